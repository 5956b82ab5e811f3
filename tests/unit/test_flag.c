/* Unit tests for pkg/flag: Go flag-package compatible parsing. */
#include <ckube/flag.h>

#include <check.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	const char *kubeconfig;
	bool le;
	int64_t workers;
	double qps;
	int64_t resync_ms;
} opts_t;

static ck_flagset_t *mkset(opts_t *o)
{
	o->kubeconfig = NULL;
	o->le = false;
	o->workers = 2;
	o->qps = 20;
	o->resync_ms = 30000;
	ck_flagset_t *fs = ck_flagset_new("t");
	ck_flag_string(fs, "kubeconfig", &o->kubeconfig, "path");
	ck_flag_bool(fs, "leader-elect", &o->le, "elect");
	ck_flag_int(fs, "workers", &o->workers, 1, 1000, "workers");
	ck_flag_double(fs, "kube-api-qps", &o->qps, "qps");
	ck_flag_duration(fs, "resync-period", &o->resync_ms, "resync");
	return fs;
}

START_TEST(test_forms)
{
	opts_t o;
	ck_flagset_t *fs = mkset(&o);
	char *argv[] = {"t",
	                "-kubeconfig",
	                "/k",
	                "--workers=5",
	                "--leader-elect",
	                "-kube-api-qps",
	                "50.5",
	                "--resync-period",
	                "1m30s",
	                "rest",
	                NULL};
	int first = 0;
	char *err = NULL;
	ck_assert_int_eq(ck_flag_parse(fs, 10, argv, stdout, &first, &err), CK_FLAG_OK);
	ck_assert_str_eq(o.kubeconfig, "/k");
	ck_assert_int_eq(o.workers, 5);
	ck_assert(o.le);
	ck_assert(o.qps == 50.5);
	ck_assert_int_eq(o.resync_ms, 90000);
	ck_assert_int_eq(first, 9);
	ck_flagset_free(fs);
}
END_TEST

START_TEST(test_errors)
{
	opts_t o;
	struct {
		const char *arg;
		const char *want;
	} cases[] = {
	    {"--nope", "flag provided but not defined: -nope"},
	    {"--workers=0", "invalid value \"0\" for flag -workers: must be in 1..1000"},
	    {"--workers=x", "invalid value \"x\" for flag -workers: not an integer"},
	    {"--leader-elect=maybe", "invalid boolean value \"maybe\" for flag -leader-elect"},
	    {"--resync-period=30", "invalid value \"30\" for flag -resync-period: not a duration"},
	    {"--kubeconfig", "flag needs an argument: -kubeconfig"},
	    {"---x", "bad flag syntax: ---x"},
	    /* Found by fuzz_flag: a message quoting a newline was two lines. */
	    {"--no\npe", "flag provided but not defined: -no\\x0ape"},
	    {"--workers=1\n2", "invalid value \"1\\x0a2\" for flag -workers: not an integer"},
	    {"--kubeconfig=\"", NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_flagset_t *fs = mkset(&o);
		char *argv[] = {"t", (char *)cases[i].arg, NULL};
		char *err = NULL;
		if (cases[i].want == NULL) {
			ck_assert_int_eq(ck_flag_parse(fs, 2, argv, stdout, NULL, &err),
			                 CK_FLAG_OK);
			ck_flagset_free(fs);
			continue;
		}
		ck_assert_int_eq(ck_flag_parse(fs, 2, argv, stdout, NULL, &err), CK_FLAG_ERROR);
		ck_assert_msg(strchr(err, '\n') == NULL, "%s: two lines: %s", cases[i].arg, err);
		ck_assert_msg(strncmp(err, cases[i].want, strlen(cases[i].want)) == 0, "%s: got %s",
		              cases[i].arg, err);
		free(err);
		ck_flagset_free(fs);
	}
}
END_TEST

START_TEST(test_help_and_durations)
{
	opts_t o;
	ck_flagset_t *fs = mkset(&o);
	char *argv[] = {"t", "--help", NULL};
	FILE *devnull = fopen("/dev/null", "w");
	ck_assert_int_eq(ck_flag_parse(fs, 2, argv, devnull, NULL, NULL), CK_FLAG_HELP);
	fclose(devnull);
	ck_flagset_free(fs);
	int64_t ms;
	ck_assert_int_eq(ck_flag_parse_duration("2h", &ms), 0);
	ck_assert_int_eq(ms, 7200000);
	ck_assert_int_eq(ck_flag_parse_duration("1.5s", &ms), 0);
	ck_assert_int_eq(ms, 1500);
	ck_assert_int_eq(ck_flag_parse_duration("250ms", &ms), 0);
	ck_assert_int_eq(ms, 250);
	ck_assert_int_eq(ck_flag_parse_duration("0", &ms), 0);
	ck_assert_int_eq(ms, 0);
	ck_assert_int_eq(ck_flag_parse_duration("s", &ms), -1);
	ck_assert_int_eq(ck_flag_parse_duration("", &ms), -1);
	ck_assert_int_eq(ck_flag_parse_duration("5x", &ms), -1);
}
END_TEST

Suite *suite_flag(void)
{
	Suite *s = suite_create("flag");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_forms);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_help_and_durations);
	suite_add_tcase(s, tc);
	return s;
}
