/*
 * check: the main() of a controller's unit test, so that a test file ends in one
 * line instead of a runner of its own (what `go test` gives a Go test for free).
 *
 *   START_TEST(test_creates) { ... } END_TEST
 *   START_TEST(test_deletes) { ... } END_TEST
 *   CK_CHECK_MAIN("webapp", setup, teardown, test_creates, test_deletes)
 *
 * It needs the check package (Debian's `check`; build with `pkg-config --cflags
 * --libs check`): this header includes <check.h>, and its code is static inline,
 * compiled into the test and not into libckube, which does not link check.
 *
 * What the runner does: one suite and one test case, both named name; setup and
 * teardown (either may be NULL) as a checked fixture, run in each test's own
 * process around that test (check forks one per test, so a test starts from a
 * fresh fixture and a crash fails that test only); the tests in the order given;
 * every test's result printed as check's CK_NORMAL does (failures with file and
 * line, then a summary). check's environment variables work as with a runner of
 * one's own: CK_RUN_SUITE and CK_RUN_CASE (both are name here) and CK_INCLUDE_TAGS
 * select, CK_FORK=no runs in one process (under a debugger), CK_VERBOSITY,
 * CK_DEFAULT_TIMEOUT and CK_TIMEOUT_MULTIPLIER as documented by check. The
 * program's exit code is 0 when every test passed, 1 otherwise.
 *
 * Timeout: check's default, 4 s per test (CK_DEFAULT_TIMEOUT); a test that starts
 * envtest needs more: CK_CHECK_MAIN_TIMEOUT(name, seconds, setup, teardown, ...).
 */
#ifndef CKUBE_CHECK_H
#define CKUBE_CHECK_H

#include <check.h>
#include <stddef.h>

/*
 * Runs the tests (n of them, each a START_TEST name) as described above and
 * returns the exit code: 0 when all passed, 1 otherwise. Borrows name and tests.
 * timeout_s 0 keeps check's default; setup and teardown may be NULL.
 */
static inline int ck_check_run(const char *name, double timeout_s, void (*setup)(void),
                               void (*teardown)(void), const TTest *const *tests, size_t n)
{
	Suite *s = suite_create(name);
	TCase *tc = tcase_create(name);
	if (timeout_s > 0)
		tcase_set_timeout(tc, timeout_s);
	if (setup != NULL || teardown != NULL)
		tcase_add_checked_fixture(tc, setup, teardown);
	for (size_t i = 0; i < n; i++)
		tcase_add_test(tc, tests[i]);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

/* The program's main(): runs the tests (START_TEST names, at least one) of a suite
 * named name_, with check's default timeout. */
#define CK_CHECK_MAIN(name_, setup_, teardown_, ...)                                               \
	CK_CHECK_MAIN_TIMEOUT(name_, 0, setup_, teardown_, __VA_ARGS__)

/* The same with each test's timeout, timeout_s_ seconds (check's CK_TIMEOUT_MULTIPLIER
 * still applies). */
#define CK_CHECK_MAIN_TIMEOUT(name_, timeout_s_, setup_, teardown_, ...)                           \
	int main(void)                                                                             \
	{                                                                                          \
		const TTest *const ck_check_tests_[] = {__VA_ARGS__};                              \
		return ck_check_run(name_, timeout_s_, setup_, teardown_, ck_check_tests_,         \
		                    sizeof(ck_check_tests_) / sizeof(ck_check_tests_[0]));         \
	}

#endif
