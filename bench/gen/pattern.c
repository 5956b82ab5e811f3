/*
 * Schema pattern matching, measured (bench/bench_gen.sh; prints figures, asserts
 * nothing about time). For each pattern: the first match, which compiles it, and
 * then the mean of a match on strings of a few lengths, as generated validation
 * does (ck_gen_pattern_match: by UTF-8 character, or by byte where that cannot
 * answer differently) and as plain regexec in the C locale does (by byte).
 * Patterns arrive one per line on stdin, as a CRD states them; each is translated
 * as ckube-gen translates it (cmd/ckube-gen/pattern.c, linked in).
 *   pattern ITERATIONS < patterns
 */
#include "cmd/ckube-gen/gen.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* A string of n characters that the subdomain and length patterns accept. */
static char *subject(size_t n)
{
	char *s = ck_xmalloc(n + 1);
	for (size_t i = 0; i < n; i++)
		s[i] = (i % 10 == 9 && i + 1 < n) ? '.' : (char)('a' + (int)(i % 26));
	s[n] = '\0';
	return s;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 2000;
	static const size_t lens[] = {16, 63, 253};
	char line[4096];
	while (fgets(line, sizeof(line), stdin) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		const char *src = line;
		char *why = NULL, *ere = gen_pattern_ere(src, &why);
		printf("  %s\n", src);
		if (ere == NULL) {
			printf("    refused: %s\n", why);
			free(why);
			continue;
		}
		ck_gen_pattern_t p = {.source = src, .ere = ere};
		double t0 = now_us();
		int ok = ck_gen_pattern_match(&p, "");
		double t1 = now_us();
		regex_t re;
		int rc = regcomp(&re, ere, REG_EXTENDED | REG_NOSUB);
		double t2 = now_us();
		if (ok < 0 || rc != 0) {
			printf("    does not compile\n");
			if (rc == 0)
				regfree(&re);
			ck_gen_pattern_release(&p);
			free(ere);
			continue;
		}
		printf("    %-34s %9.1f us (library) %9.1f us (regexec, C)\n", "compile", t1 - t0,
		       t2 - t1);
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			char *s = subject(lens[k]);
			int m = 0;
			double a = now_us();
			for (long i = 0; i < iters; i++)
				m += ck_gen_pattern_match(&p, s);
			double b = now_us();
			for (long i = 0; i < iters; i++)
				m += regexec(&re, s, 0, NULL, 0) == 0;
			double c = now_us();
			printf("    match %3zu characters (%s)%*s %9.2f us (library) %9.2f us "
			       "(regexec, C)\n",
			       lens[k], m > 0 ? "match" : "no match", m > 0 ? 4 : 1, "",
			       (b - a) / (double)iters, (c - b) / (double)iters);
			free(s);
		}
		regfree(&re);
		ck_gen_pattern_release(&p);
		free(ere);
	}
	return 0;
}
