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
#include <string.h>

/*
 * The locale patterns are compiled and matched in. RE2, which the API server
 * matches with, reads UTF-8 characters; regcomp and regexec read characters of the
 * locale's encoding, and in "C" a character is a byte ("^.{3}$" would refuse
 * "ééé" and accept "éa"). So both run in "C.UTF-8", set for the calling thread
 * only (uselocale): the program's own locale is neither used nor changed. Only
 * its LC_CTYPE is loaded (/usr/lib/locale/C.utf8/LC_CTYPE on Debian, in libc-bin;
 * a minimal image must copy that file). Without it, "C", and a warning says once
 * that matching is by byte. Patterns where bytes cannot answer differently are
 * compiled and matched in "C" (by_character).
 */
static locale_t utf8_locale, c_locale;
static pthread_once_t locales_once = PTHREAD_ONCE_INIT;

static void locales_init(void)
{
	c_locale = newlocale(LC_CTYPE_MASK, "C", (locale_t)0);
	utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	if (utf8_locale == (locale_t)0)
		utf8_locale = newlocale(LC_CTYPE_MASK, "C.utf8", (locale_t)0);
	if (utf8_locale == (locale_t)0) {
		CK_LOG_WARN("No C.UTF-8 locale: schema patterns match bytes, not characters",
		            CK_KV_STR("missing", "/usr/lib/locale/C.utf8/LC_CTYPE"));
		utf8_locale = c_locale;
	}
}

/*
 * Whether matching ere by byte could answer differently from matching it by
 * UTF-8 character: when it has a non-ASCII byte, a '.' or a bracket that
 * negates or names a POSIX class (conservatively: "[^", "[:", "[=", "[." anywhere;
 * an escaped character is literal). Otherwise every atom is one ASCII byte, which
 * no byte of a multi-byte character equals, so bytes give the same answer, and
 * glibc matches them about four times faster (bench/bench_gen.sh): most
 * Kubernetes patterns (names, label values, quantities) are of this kind.
 */
static bool by_character(const char *ere)
{
	for (const unsigned char *p = (const unsigned char *)ere; *p != '\0'; p++) {
		if (*p == '\\' && p[1] != '\0')
			p++;
		else if (*p == '.' || (*p == '[' && p[1] != '\0' && strchr("^:=.", p[1])))
			return true;
		if (*p >= 0x80)
			return true;
	}
	return false;
}

/* A compiled pattern and the locale it was compiled in, and is matched in. */
typedef struct compiled {
	regex_t re;
	locale_t locale;
} compiled_t;

/* What p->re holds for a pattern that does not compile here: the failure is
 * remembered, not paid again on every match. */
static compiled_t not_compiled;

/* The pattern compiled, made once; &not_compiled if it does not compile. */
static compiled_t *pattern_compiled(ck_gen_pattern_t *p)
{
	compiled_t *c = atomic_load(&p->re);
	if (c != NULL)
		return c;
	pthread_once(&locales_once, locales_init);
	c = ck_xmalloc(sizeof(*c));
	c->locale = by_character(p->ere) ? utf8_locale : c_locale;
	locale_t old = uselocale(c->locale);
	int rc = regcomp(&c->re, p->ere, REG_EXTENDED | REG_NOSUB);
	uselocale(old);
	if (rc != 0) {
		free(c);
		c = &not_compiled;
	}
	void *expected = NULL;
	if (!atomic_compare_exchange_strong(&p->re, &expected, c)) {
		/* Another thread won the race: use its copy. */
		if (c != &not_compiled) {
			regfree(&c->re);
			free(c);
		}
		c = expected;
	}
	return c;
}

int ck_gen_pattern_match(ck_gen_pattern_t *p, const char *s)
{
	compiled_t *c = pattern_compiled(p);
	if (c == &not_compiled)
		return -1;
	locale_t old = uselocale(c->locale);
	int rc = regexec(&c->re, s, 0, NULL, 0);
	uselocale(old);
	/* Anything but a match or no match (REG_ESPACE) is not an answer. */
	return rc == 0 ? 1 : rc == REG_NOMATCH ? 0 : -1;
}

void ck_gen_pattern_release(ck_gen_pattern_t *p)
{
	compiled_t *c = atomic_exchange(&p->re, NULL);
	if (c != NULL && c != &not_compiled) {
		regfree(&c->re);
		free(c);
	}
}
