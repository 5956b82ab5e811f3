/*
 * The one unit-test runner. Each tests/unit/test_<name>.c defines
 * `Suite *suite_<name>(void)`; the build generates the list in build/suites.h.
 * CK_RUN_SUITES="a b" (space separated) restricts the run to those suites.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#define SUITE(n) Suite *suite_##n(void);
#include "suites.h"
#undef SUITE

static int wanted(const char *name)
{
	const char *only = getenv("CK_RUN_SUITES");
	if (only == NULL || *only == '\0')
		return 1;
	size_t n = strlen(name);
	for (const char *p = only; (p = strstr(p, name)) != NULL; p += n) {
		int starts = p == only || p[-1] == ' ';
		int ends = p[n] == '\0' || p[n] == ' ';
		if (starts && ends)
			return 1;
	}
	return 0;
}

int main(void)
{
	SRunner *sr = srunner_create(NULL);
#define SUITE(n)                                                                                   \
	if (wanted(#n))                                                                            \
		srunner_add_suite(sr, suite_##n());
#include "suites.h"
#undef SUITE
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
