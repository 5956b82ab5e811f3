/*
 * The C side of tests/re2/run.sh: reads the oracle's lines ("x<pattern hex>
 * x<string hex> <0|1>", what Go's regexp says), translates each pattern as
 * ckube-gen does (gen_pattern_ere) and matches each string as generated
 * validation does (ck_gen_pattern_match), and reports every pair where the two
 * disagree. Patterns ckube-gen refuses are counted, not compared: a refusal is a
 * clear error at generation time, a disagreement a wrong answer at run time.
 * Exit status 1 when any pair disagrees.
 */
#include "cmd/ckube-gen/gen.h"
#include <ckube/log.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHOW_MAX 20

/* Decodes "x<hex>" into a new string, or NULL. */
static char *unhex(const char *s)
{
	if (*s++ != 'x')
		return NULL;
	size_t n = strlen(s);
	if (n % 2 != 0)
		return NULL;
	char *out = ck_xmalloc(n / 2 + 1);
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1) {
			free(out);
			return NULL;
		}
		out[i] = (char)v;
	}
	out[n / 2] = '\0';
	return out;
}

int main(void)
{
	char line[65536], *src = NULL, *ere = NULL, *last = NULL;
	ck_gen_pattern_t pat = {0};
	long pairs = 0, compared = 0, patterns = 0, refused = 0, uncompiled = 0, wrong = 0;
	bool skip = false;
	int rc = 1;
	while (fgets(line, sizeof(line), stdin) != NULL) {
		char p_hex[32768], s_hex[32768];
		int want;
		if (sscanf(line, "%32767s %32767s %d", p_hex, s_hex, &want) != 3) {
			fprintf(stderr, "re2 diff: unreadable line: %s", line);
			goto out;
		}
		pairs++;
		if (last == NULL || strcmp(last, p_hex) != 0) {
			/* A new pattern: translate and compile it once. */
			free(last);
			last = ck_xstrdup(p_hex);
			ck_gen_pattern_release(&pat);
			free(src);
			free(ere);
			char *why = NULL;
			src = unhex(p_hex);
			if (src == NULL) {
				fprintf(stderr, "re2 diff: bad pattern hex: %s\n", p_hex);
				goto out;
			}
			patterns++;
			ere = gen_pattern_ere(src, &why);
			pat = (ck_gen_pattern_t){.source = src, .ere = ere};
			skip = ere == NULL;
			if (skip)
				refused++;
			else if (ck_gen_pattern_match(&pat, "") < 0) {
				skip = true;
				uncompiled++;
			}
			free(why);
		}
		if (skip)
			continue;
		char *str = unhex(s_hex);
		if (str == NULL) {
			fprintf(stderr, "re2 diff: bad string hex: %s\n", s_hex);
			goto out;
		}
		int got = ck_gen_pattern_match(&pat, str);
		compared++;
		if (got != want) {
			if (wrong < SHOW_MAX) {
				ck_sbuf_t b = CK_SBUF_INIT;
				ck_sbuf_puts(&b, "pattern ");
				ck_log_quote(&b, src);
				ck_sbuf_puts(&b, " (ERE ");
				ck_log_quote(&b, ere);
				ck_sbuf_puts(&b, ") on ");
				ck_log_quote(&b, str);
				ck_sbuf_printf(&b, ": Go %s, ckube %s",
				               want ? "matches" : "does not",
				               got ? "matches" : "does not");
				printf("  DIFF  %s\n", ck_sbuf_cstr(&b));
				ck_sbuf_free(&b);
			}
			wrong++;
		}
		free(str);
	}
	printf("re2 diff: %ld patterns Go accepts (%ld refused by ckube-gen, %ld not compiled "
	       "by regcomp), %ld of %ld pairs compared, %ld disagree\n",
	       patterns, refused, uncompiled, compared, pairs, wrong);
	rc = wrong == 0 && compared > 0 ? 0 : 1;
out:
	ck_gen_pattern_release(&pat);
	free(src);
	free(ere);
	free(last);
	return rc;
}
