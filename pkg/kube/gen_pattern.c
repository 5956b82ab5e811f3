/*
 * gen_pattern: matches a schema's pattern (translated by ckube-gen to a POSIX
 * extended expression) as the API server's RE2 matches it, by UTF-8 character,
 * whatever locale the program chose.
 */
#include <ckube/gen.h>
#include <ckube/log.h>

#include <locale.h>
#include <pthread.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdlib.h>

/*
 * The locale patterns are compiled and matched in. RE2, which the API server
 * matches with, reads UTF-8 characters; regcomp and regexec read characters of the
 * locale's encoding, and in "C" a character is a byte ("^.{3}$" would refuse
 * "ééé" and accept "éa"). So both run in "C.UTF-8", set for the calling thread
 * only (uselocale): the program's own locale is neither used nor changed. Only
 * its LC_CTYPE is loaded (/usr/lib/locale/C.utf8/LC_CTYPE on Debian, in libc-bin;
 * a minimal image must copy that file). Without it, "C", and a warning says once
 * that matching is by byte.
 */
static locale_t match_locale;
static pthread_once_t match_locale_once = PTHREAD_ONCE_INIT;

static void match_locale_init(void)
{
	match_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	if (match_locale == (locale_t)0)
		match_locale = newlocale(LC_CTYPE_MASK, "C.utf8", (locale_t)0);
	if (match_locale == (locale_t)0) {
		CK_LOG_WARN("No C.UTF-8 locale: schema patterns match bytes, not characters",
		            CK_KV_STR("missing", "/usr/lib/locale/C.utf8/LC_CTYPE"));
		match_locale = newlocale(LC_CTYPE_MASK, "C", (locale_t)0);
	}
}

/* Switches the calling thread to match_locale; returns the locale to restore. */
static locale_t match_locale_enter(void)
{
	pthread_once(&match_locale_once, match_locale_init);
	return match_locale != (locale_t)0 ? uselocale(match_locale) : (locale_t)0;
}

static void match_locale_leave(locale_t old)
{
	if (old != (locale_t)0)
		uselocale(old);
}

/* The pattern's compiled expression, made once; NULL if it does not compile.
 * Called inside match_locale_enter / _leave. */
static regex_t *pattern_re(ck_gen_pattern_t *p)
{
	regex_t *re = atomic_load(&p->re);
	if (re != NULL)
		return re;
	re = ck_xmalloc(sizeof(*re));
	if (regcomp(re, p->ere, REG_EXTENDED | REG_NOSUB) != 0) {
		free(re);
		return NULL;
	}
	void *expected = NULL;
	if (!atomic_compare_exchange_strong(&p->re, &expected, re)) {
		/* Another thread won the race: use its copy. */
		regfree(re);
		free(re);
		re = expected;
	}
	return re;
}

int ck_gen_pattern_match(ck_gen_pattern_t *p, const char *s)
{
	locale_t old = match_locale_enter();
	regex_t *re = pattern_re(p);
	int rc = re == NULL ? -1 : regexec(re, s, 0, NULL, 0) == 0;
	match_locale_leave(old);
	return rc;
}

void ck_gen_pattern_release(ck_gen_pattern_t *p)
{
	regex_t *re = atomic_exchange(&p->re, NULL);
	if (re != NULL) {
		regfree(re);
		free(re);
	}
}
