/*
 * <ckube/check.h>: the runner of users' unit tests. Each test runs ck_check_run on
 * tests of its own (in the forked process check gives each of these tests) and
 * checks its exit code, the fixture, the timeout and CK_RUN_CASE.
 */
#include <ckube/base.h>
#include <ckube/check.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int set_up;
static char trace[64]; /* teardowns are counted in a file: they run in the inner tests' processes */

static void inner_setup(void)
{
	set_up = 1;
}

static void inner_teardown(void)
{
	FILE *f = fopen(trace, "a");
	if (f != NULL) {
		fputc('t', f);
		fclose(f);
	}
}

START_TEST(inner_pass)
{
	ck_assert_int_eq(set_up, 1);
}
END_TEST

START_TEST(inner_fail)
{
	ck_abort_msg("fails on purpose");
}
END_TEST

START_TEST(inner_slow)
{
	nanosleep(&(struct timespec){.tv_nsec = 600000000}, NULL);
}
END_TEST

/* The inner runs fork, as a user's test runs by default, also when this runner does
 * not (CK_FORK=no, as make unit-tsan runs): the fixture and timeout depend on it.
 * And they print nothing: their failures are on purpose, and in make test's log
 * they read as real ones. The outer runner's own verbosity is put back after. */
static char *outer_verbosity;

static void fork_inner(void)
{
	setenv("CK_FORK", "yes", 1);
	const char *v = getenv("CK_VERBOSITY");
	outer_verbosity = v ? ck_xstrdup(v) : NULL;
	setenv("CK_VERBOSITY", "silent", 1);
}

static void restore_verbosity(void)
{
	if (outer_verbosity != NULL)
		setenv("CK_VERBOSITY", outer_verbosity, 1);
	else
		unsetenv("CK_VERBOSITY");
	free(outer_verbosity);
	outer_verbosity = NULL;
}

static size_t teardowns(void)
{
	FILE *f = fopen(trace, "r");
	size_t n = 0;
	if (f != NULL) {
		while (fgetc(f) != EOF)
			n++;
		fclose(f);
	}
	return n;
}

START_TEST(runner_exit_code_and_fixture)
{
	snprintf(trace, sizeof(trace), "/tmp/ck-check-trace.%d", (int)getpid());
	remove(trace);
	const TTest *ok[] = {inner_pass, inner_pass};
	ck_assert_int_eq(ck_check_run("inner", 0, inner_setup, inner_teardown, ok, 2), 0);
	ck_assert_uint_eq(teardowns(), 2);
	const TTest *bad[] = {inner_pass, inner_fail};
	ck_assert_int_eq(ck_check_run("inner", 0, inner_setup, inner_teardown, bad, 2), 1);
	/* check runs no teardown after a failed test: it ends that test's process. */
	ck_assert_uint_eq(teardowns(), 3);
	remove(trace);
	/* Without a fixture, inner_pass finds set_up unset. */
	ck_assert_int_eq(ck_check_run("inner", 0, NULL, NULL, ok, 1), 1);
}
END_TEST

START_TEST(runner_timeout)
{
	const TTest *slow[] = {inner_slow};
	ck_assert_int_eq(ck_check_run("inner", 0.2, NULL, NULL, slow, 1), 1);
	ck_assert_int_eq(ck_check_run("inner", 0, NULL, NULL, slow, 1), 0); /* check's 4 s */
}
END_TEST

START_TEST(runner_honours_ck_run_case)
{
	const TTest *bad[] = {inner_fail};
	setenv("CK_RUN_CASE", "other", 1);
	ck_assert_int_eq(ck_check_run("inner", 0, NULL, NULL, bad, 1), 0);
	setenv("CK_RUN_CASE", "inner", 1);
	ck_assert_int_eq(ck_check_run("inner", 0, NULL, NULL, bad, 1), 1);
	unsetenv("CK_RUN_CASE");
}
END_TEST

Suite *suite_check(void)
{
	Suite *s = suite_create("check");
	TCase *tc = tcase_create("runner");
	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, fork_inner, restore_verbosity);
	tcase_add_test(tc, runner_exit_code_and_fixture);
	tcase_add_test(tc, runner_timeout);
	tcase_add_test(tc, runner_honours_ck_run_case);
	suite_add_tcase(s, tc);
	return s;
}
