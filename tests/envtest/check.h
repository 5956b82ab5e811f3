/*
 * check.h - the one non-fatal assertion shared by the envtest programs
 * (envtest_test.c, shard_test.c, sharding_test.c).
 *
 * These programs are not check suites: they drive real servers and keep going after a
 * failed CHECK so one run reports every broken step; main() returns failures != 0.
 */
#ifndef CKUBE_TESTS_ENVTEST_CHECK_H
#define CKUBE_TESTS_ENVTEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                                \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

#endif
