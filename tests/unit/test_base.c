/* Unit tests for pkg/base. */
#include <ckube/base.h>

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_err_first_wins)
{
	char *err = NULL;
	ck_assert_int_eq(ck_err_set(&err, "inner %d", 1), -1);
	ck_err_set(&err, "second");
	ck_err_wrap(&err, "outer");
	ck_assert_str_eq(err, "outer: inner 1");
	free(err);
}
END_TEST

START_TEST(test_sbuf_json)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_put_json_str(&b, "a\"b\\c\n\x01");
	ck_assert_str_eq(ck_sbuf_cstr(&b), "\"a\\\"b\\\\c\\n\\u0001\"");
	ck_sbuf_free(&b);
}
END_TEST

START_TEST(test_time_roundtrip)
{
	int64_t ns;
	ck_assert_int_eq(ck_time_parse_rfc3339("2026-11-29T12:00:00Z", &ns), 0);
	char out[32];
	ck_time_format_rfc3339(ns, out);
	ck_assert_str_eq(out, "2026-11-29T12:00:00Z");
	ck_assert_int_eq(ck_time_parse_rfc3339("2026-11-29T13:00:00.5+01:00", &ns), 0);
	char micro[40];
	ck_time_format_rfc3339_micro(ns, micro);
	ck_assert_str_eq(micro, "2026-11-29T12:00:00.500000Z");
	ck_assert_int_eq(ck_time_parse_rfc3339("yesterday", &ns), -1);
	ck_assert_int_eq(ck_time_parse_rfc3339("2026-11-29T12:00:00", &ns), -1);
	/* Found by fuzz_exec (an exec plugin's expirationTimestamp): past 2262 the
	 * nanoseconds overflowed (UBSan: signed integer overflow). */
	ck_assert_int_eq(ck_time_parse_rfc3339("4977-12-01T00:00:00Z", &ns), -1);
	ck_assert_int_eq(ck_time_parse_rfc3339("2026-13-01T00:00:00Z", &ns), -1);
	ck_assert_int_eq(ck_time_parse_rfc3339("2026-11-29T25:00:00Z", &ns), -1);
	/* Offsets are exactly HH:MM. On the heap, so that ASan sees a read past the end
	 * (the old parser stepped six bytes over "-1:00" and read beyond the string). */
	const char *bad_off[] = {"2026-11-29T12:00:00-1:00", "2026-11-29T12:00:00+1:0",
	                         "2026-11-29T12:00:00+ 1:00", "2026-11-29T12:00:00+01-00"};
	for (size_t i = 0; i < sizeof(bad_off) / sizeof(bad_off[0]); i++) {
		char *h = ck_xstrdup(bad_off[i]);
		ck_assert_msg(ck_time_parse_rfc3339(h, &ns) == -1, "accepted %s", h);
		free(h);
	}
	ck_assert_int_eq(ck_time_parse_rfc3339("2026-11-29T12:00:00-01:30", &ns), 0);
	ck_assert_int_eq(ck_time_parse_rfc3339("2262-01-01T00:00:00Z", &ns), 0);
}
END_TEST

START_TEST(test_fake_clock)
{
	ck_clk_fake_t f;
	ck_clk_fake_init(&f, 100, 1000);
	ck_clk_fake_advance(&f, 50);
	ck_assert_uint_eq(ck_clk_mono_ns(&f.base), 150);
	ck_assert_int_eq(ck_clk_wall_ns(&f.base), 1050);
}
END_TEST

START_TEST(test_file_read_missing)
{
	char *err = NULL, *out = NULL;
	ck_assert_int_eq(ck_file_read_all("/nonexistent/x", &out, NULL, &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x"));
	free(err);
}
END_TEST

/*
 * The point of ck_secure_zero/ck_secret_free is that the compiler cannot drop the
 * wipe: memset(p, 0, n) followed by free(p) is a dead store, and gcc 12 at -O2
 * removed it from the Authorization header in client_transport.c (objdump showed
 * ck_xasprintf, curl_slist_append, free, no memset). What a unit test can check is
 * that the wipe happens and that the free form takes NULL and binary secrets.
 */
START_TEST(test_secure_zero)
{
	char buf[32];
	memcpy(buf, "Authorization: Bearer s3cr3t", 29);
	ck_secure_zero(buf, 29);
	for (size_t i = 0; i < 29; i++)
		ck_assert_int_eq(buf[i], 0);
	ck_secure_zero(NULL, 0);
	ck_secret_free(NULL, 0);
	ck_secret_free(ck_xstrdup("token"), 0);
	char *bin = ck_xmalloc(8);
	memcpy(bin, "k\0e\0y\0\0", 8);
	ck_secret_free(bin, 8);
}
END_TEST

Suite *suite_base(void)
{
	Suite *s = suite_create("base");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_err_first_wins);
	tcase_add_test(tc, test_sbuf_json);
	tcase_add_test(tc, test_time_roundtrip);
	tcase_add_test(tc, test_fake_clock);
	tcase_add_test(tc, test_file_read_missing);
	tcase_add_test(tc, test_secure_zero);
	suite_add_tcase(s, tc);
	return s;
}
