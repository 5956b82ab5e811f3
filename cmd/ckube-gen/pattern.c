/*
 * pattern: a CRD's `pattern` (ECMA-262, checked by the API server with Go's RE2)
 * turned into a POSIX extended expression that accepts the same strings, so that
 * generated validation needs nothing but libc's regexec.
 *
 * Characters are UTF-8 ones: the library matches in a UTF-8 locale
 * (ck_gen_pattern_match), so '.' and a negated class take one character, as in
 * RE2, and a non-ASCII literal is one atom for a quantifier.
 *
 * Only acceptance matters (a pattern is a yes/no test), which makes some of the
 * differences free: lazy quantifiers become greedy, non-capturing groups
 * capturing, (?U) nothing. RE2's flags i and s, which the API server accepts,
 * become what they mean: letters in both cases (and Go's two non-ASCII folds of
 * ASCII letters), '.' that matches a newline. What has no POSIX counterpart
 * (backreferences, lookaround, word boundaries, Unicode classes, multi-line mode)
 * is refused with the reason.
 */
#include "cmd/ckube-gen/gen.h"

#include <stdlib.h>
#include <string.h>

/*
 * Bounds on what regcomp() is given. glibc expands a repetition into copies of
 * what it repeats ("a+" is "aa*", "a{2,5}" five a's, so "((a+)+)+" doubles three
 * times) and parses groups recursively: an unbounded pattern exhausts memory or
 * the stack, in ckube-gen and again in every program that compiles the generated
 * validation. RE2 refuses counts over 1000 and a repetition of a repetition too.
 */
#define MAX_REPEAT      1000 /* {n,m}: n and m */
#define MAX_COPIES      2000 /* atoms once every repetition is expanded */
#define MAX_GROUP_DEPTH 100  /* nested ( ) */

/* Well-known Kubernetes name formats, described in messages by name. */
static const struct {
	const char *src, *name;
} known[] = {
    {"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
     "DNS-1123 subdomain (lower case alphanumerics, '-' and '.', at most 253 characters)"},
    {"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
     "DNS-1123 label (lower case alphanumerics and '-', starting and ending with an "
     "alphanumeric)"},
    {"^[a-z]([-a-z0-9]*[a-z0-9])?$",
     "DNS-1035 label (lower case alphanumerics and '-', starting with a letter)"},
    {"^[A-Za-z_][A-Za-z0-9_]*$", "C identifier (letters, digits and '_', not starting with "
                                 "a digit)"},
};

const char *gen_pattern_name(const char *src)
{
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(known[i].src, src) == 0)
			return known[i].name;
	return NULL;
}

/* RE2's \s: ASCII white space but \v ([[:space:]] has \v, and in a UTF-8
 * locale Unicode's spaces too). */
#define RE2_SPACE "\t\n\f\r "

/* Go's case folding (what (?i) matches) pairs two ASCII letters with non-ASCII
 * ones: k K and the Kelvin sign U+212A, s S and the long s U+017F. */
#define FOLD_KELVIN "\xe2\x84\xaa"
#define FOLD_LONG_S "\xc5\xbf"

/* What (?i) adds to the lower-case ASCII letter c besides its upper case. */
static const char *fold_extra(char c)
{
	return c == 'k' ? FOLD_KELVIN : c == 's' ? FOLD_LONG_S : "";
}

/* The ERE of a class escape outside brackets, or NULL; ci: under (?i), where
 * Go folds \w (and so \W) too. */
static const char *class_outside(char c, bool ci)
{
	switch (c) {
	case 'd':
		return "[0-9]";
	case 'D':
		return "[^0-9]";
	case 'w':
		return ci ? "[0-9A-Za-z_" FOLD_KELVIN FOLD_LONG_S "]" : "[0-9A-Za-z_]";
	case 'W':
		return ci ? "[^0-9A-Za-z_" FOLD_KELVIN FOLD_LONG_S "]" : "[^0-9A-Za-z_]";
	case 's':
		return "[" RE2_SPACE "]";
	case 'S':
		return "[^" RE2_SPACE "]";
	default:
		return NULL;
	}
}

/* The byte a control escape stands for, or 0. */
static char control_escape(char c)
{
	switch (c) {
	case 't':
		return '\t';
	case 'n':
		return '\n';
	case 'r':
		return '\r';
	case 'f':
		return '\f';
	case 'v':
		return '\v';
	default:
		return 0;
	}
}

static bool is_punct_escape(char c)
{
	return c != '\0' && strchr(".^$|?*+()[]{}\\/-,:=!<>'\"#&~%@`;_ ", c) != NULL;
}

/*
 * A bracket expression being translated. The bytes that are special in a POSIX
 * one (']' and '^' first, '-' between two bytes, '[' before ':', '.' or '=') are
 * set aside and put where they are literal; all else keeps the source's order.
 */
typedef struct cls {
	ck_sbuf_t items;
	bool rbracket, caret, hyphen, lbracket;
	bool member[128]; /* every ASCII byte in the class, for (?i) */
} cls_t;

static void cls_mark(cls_t *k, int lo, int hi)
{
	for (int c = lo; c <= hi; c++)
		k->member[c & 0x7f] = true;
}

static void cls_char(cls_t *k, char c)
{
	cls_mark(k, (unsigned char)c, (unsigned char)c);
	if (c == ']')
		k->rbracket = true;
	else if (c == '^')
		k->caret = true;
	else if (c == '-')
		k->hyphen = true;
	else if (c == '[')
		k->lbracket = true;
	else
		ck_sbuf_putc(&k->items, c);
}

/*
 * Reads one class atom at s[*p]: a byte into *c, or a class escape (\d, \w, \s)
 * added to k, *c then -1. Returns 0 or -1 with *err; start is the offset of the
 * class's '['.
 */
static int cls_atom(const char *s, size_t *p, size_t start, cls_t *k, int *c, char **err)
{
	char a = s[*p];
	*c = -1;
	if (a == '\0')
		return ck_err_set(err, "unterminated class \"[\" at offset %zu", start);
	if (a == '\\') {
		char e = s[*p + 1];
		if (e == 'd') {
			ck_sbuf_puts(&k->items, "0-9");
			cls_mark(k, '0', '9');
		} else if (e == 'w') {
			ck_sbuf_puts(&k->items, "0-9A-Za-z_");
			cls_mark(k, '0', '9');
			cls_mark(k, 'A', 'Z');
			cls_mark(k, 'a', 'z');
			cls_mark(k, '_', '_');
		} else if (e == 's') {
			ck_sbuf_puts(&k->items, RE2_SPACE);
			for (const char *sp = RE2_SPACE; *sp; sp++)
				cls_mark(k, (unsigned char)*sp, (unsigned char)*sp);
		} else if (control_escape(e))
			*c = (unsigned char)control_escape(e);
		else if (is_punct_escape(e))
			*c = (unsigned char)e; /* a backslash is literal in a POSIX class */
		else
			return ck_err_set(err,
			                  "the escape \"\\%c\" inside a class at offset %zu has no "
			                  "POSIX form",
			                  e ? e : '0', *p);
		*p += 2;
		return 0;
	}
	if (a == '[' && (s[*p + 1] == ':' || s[*p + 1] == '.' || s[*p + 1] == '='))
		return ck_err_set(err,
		                  "\"[%c\" inside a class at offset %zu would be a POSIX class",
		                  s[*p + 1], *p);
	/* One code point is one ECMA atom but several bytes here: [é] would accept
	 * either byte of it, and not "é". */
	if ((unsigned char)a >= 0x80)
		return ck_err_set(err,
		                  "a non-ASCII character inside a class at offset %zu has no POSIX "
		                  "form",
		                  *p);
	*c = (unsigned char)a;
	(*p)++;
	return 0;
}

/* Under (?i): the other case of each letter in k, and Go's non-ASCII folds. A
 * negated class is negated after folding, as in Go. */
static void cls_fold(cls_t *k)
{
	for (int c = 'a'; c <= 'z'; c++) {
		int u = c - 'a' + 'A';
		if (k->member[c] && !k->member[u])
			cls_char(k, (char)u);
		else if (k->member[u] && !k->member[c])
			cls_char(k, (char)c);
	}
	for (int c = 'a'; c <= 'z'; c++)
		if (k->member[c])
			ck_sbuf_puts(&k->items, fold_extra((char)c));
}

/* Translates the bracket expression at s[*i] ('['); ci: under (?i). Returns 0 or
 * -1 with *err. */
static int bracket(const char *s, size_t *i, bool ci, ck_sbuf_t *out, char **err)
{
	size_t p = *i + 1;
	bool neg = false;
	cls_t k = {.items = CK_SBUF_INIT};
	int rc = -1;
	if (s[p] == '^') {
		neg = true;
		p++;
	}
	if (s[p] == ']') {
		ck_err_set(err, "an empty class \"[]\" at offset %zu has no POSIX form", *i);
		goto out;
	}
	while (s[p] != ']') {
		int lo, hi;
		size_t at = p;
		if (cls_atom(s, &p, *i, &k, &lo, err) != 0)
			goto out;
		/* '-' makes a range only between two bytes: after or before a class
		 * escape, or last, it is literal (ECMA-262 Annex B, and RE2). */
		if (lo < 0 || s[p] != '-' || s[p + 1] == ']' || s[p + 1] == '\0') {
			if (lo >= 0)
				cls_char(&k, (char)lo);
			continue;
		}
		size_t q = p + 1;
		if (cls_atom(s, &q, *i, &k, &hi, err) != 0)
			goto out;
		p = q;
		if (hi < 0) {
			cls_char(&k, (char)lo);
			cls_char(&k, '-');
		} else if (hi < lo) {
			/* As written: an escape stays one, and the message one line. */
			ck_err_set(err, "the range \"%.*s\" at offset %zu is out of order",
			           (int)(q - at), s + at, at);
			goto out;
		} else if (strchr("[]^-", lo) != NULL || strchr("[]^-", hi) != NULL) {
			/* An end that is special in POSIX: the range byte by byte. */
			for (int c = lo; c <= hi; c++)
				cls_char(&k, (char)c);
		} else {
			ck_sbuf_putc(&k.items, (char)lo);
			ck_sbuf_putc(&k.items, '-');
			ck_sbuf_putc(&k.items, (char)hi);
			cls_mark(&k, lo, hi);
		}
	}
	*i = p;
	if (ci)
		cls_fold(&k);
	if (!neg && !k.rbracket && k.items.len == 0 && !k.lbracket && k.caret) {
		/* '^' would come first and negate: "[-^]", or just "\^". */
		ck_sbuf_puts(out, k.hyphen ? "[-^]" : "\\^");
		rc = 0;
		goto out;
	}
	ck_sbuf_putc(out, '[');
	if (neg)
		ck_sbuf_putc(out, '^');
	if (k.rbracket)
		ck_sbuf_putc(out, ']');
	ck_sbuf_append(out, k.items.data ? k.items.data : "", k.items.len);
	if (k.lbracket)
		ck_sbuf_putc(out, '[');
	if (k.caret)
		ck_sbuf_putc(out, '^');
	if (k.hyphen)
		ck_sbuf_putc(out, '-');
	ck_sbuf_putc(out, ']');
	rc = 0;
out:
	ck_sbuf_free(&k.items);
	return rc;
}

/* true if s[i] ('{') starts an interval {n}, {n,} or {n,m}. */
static bool interval(const char *s, size_t i)
{
	size_t p = i + 1, digits = 0;
	while (s[p] >= '0' && s[p] <= '9')
		p++, digits++;
	if (digits == 0)
		return false;
	if (s[p] == ',') {
		p++;
		while (s[p] >= '0' && s[p] <= '9')
			p++;
	}
	return s[p] == '}';
}

/* RE2's flags that have a translation, set or cleared by (?flags) and (?flags:. */
enum { FLAG_I = 1, FLAG_S = 2 };

/*
 * Reads the flags of "(?flags)" or "(?flags:" at s[at] ('('): applies them to
 * *flags, sets *end to the offset of the closing ')' or ':'. Returns 0, or -1
 * with *err naming what RE2 would refuse or POSIX cannot do.
 */
static int read_flags(const char *s, size_t at, int *flags, size_t *end, char **err)
{
	size_t p = at + 2;
	bool neg = false, after_neg = false;
	int f = *flags;
	for (;; p++) {
		char c = s[p];
		if (c == ')' || c == ':') {
			/* "(?)" is allowed (and does nothing), "(?-)" is not, as in Go. */
			if (neg && !after_neg)
				return ck_err_set(err, "\"%.*s\" at offset %zu names no flag",
				                  (int)(p - at + 1), s + at, at);
			break;
		}
		if (c == '\0')
			return ck_err_set(err, "\"(?\" at offset %zu is not closed", at);
		if (c == '-') {
			if (neg)
				return ck_err_set(err, "a second \"-\" at offset %zu", p);
			neg = true;
			continue;
		}
		int bit;
		if (c == 'i')
			bit = FLAG_I;
		else if (c == 's')
			bit = FLAG_S;
		else if (c == 'U' || (c == 'm' && neg))
			bit = 0; /* ungreedy: acceptance is the same; -m: the default */
		else if (c == 'm')
			return ck_err_set(err,
			                  "the flag \"m\" at offset %zu (multi-line mode) has no "
			                  "POSIX form",
			                  p);
		else
			return ck_err_set(err, "unknown flag \"%c\" at offset %zu", c, p);
		f = neg ? f & ~bit : f | bit;
		after_neg = neg;
	}
	*flags = f;
	*end = p;
	return 0;
}

char *gen_pattern_ere(const char *s, char **err)
{
	ck_sbuf_t out = CK_SBUF_INIT;
	/* Whether the last token was a quantifier: a '?' right after one makes it
	 * lazy, which changes what is captured, never whether a string matches; and
	 * whether it was that '?'. */
	bool quant = false, lazy = false;
	/* The expanded size of each open group (sums[0]: the whole pattern), and of
	 * the last atom (what a quantifier repeats; 0 after '(' or '|'). */
	size_t sums[MAX_GROUP_DEPTH + 1] = {0}, depth = 0, last = 0;
	/* Each open group's flags: set by (?flags) until the group closes. */
	int flags[MAX_GROUP_DEPTH + 1] = {0};
	for (size_t i = 0; s[i] != '\0'; i++) {
		char c = s[i];
		bool was_quant = quant, was_lazy = lazy;
		quant = lazy = false;
		bool ci = flags[depth] & FLAG_I;
		size_t atom = 1; /* what this token adds; 0: not an atom */
		if (c == '\\') {
			char e = s[++i];
			if (class_outside(e, ci)) {
				ck_sbuf_puts(&out, class_outside(e, ci));
			} else if (control_escape(e)) {
				ck_sbuf_putc(&out, control_escape(e));
			} else if (e != '\0' && strchr(".[]()*+?{}|^$\\", e)) {
				ck_sbuf_putc(&out, '\\');
				ck_sbuf_putc(&out, e);
			} else if (is_punct_escape(e)) {
				ck_sbuf_putc(&out, e);
			} else {
				ck_err_set(err,
				           "the escape \"\\%c\" at offset %zu has no POSIX form",
				           e ? e : '0', i - 1);
				goto fail;
			}
		} else if (c == '[') {
			if (bracket(s, &i, ci, &out, err) != 0)
				goto fail;
		} else if (c == '(') {
			int f = flags[depth];
			size_t end = i + 2; /* "(?:": the ':' */
			if (s[i + 1] == '?' && s[i + 2] != ':') {
				if (s[i + 2] != '\0' && strchr("=!<P", s[i + 2]) != NULL) {
					ck_err_set(err,
					           "\"(?%c\" at offset %zu (lookaround or a named "
					           "group) has no POSIX form",
					           s[i + 2], i);
					goto fail;
				}
				if (read_flags(s, i, &f, &end, err) != 0)
					goto fail;
				if (s[end] == ')') {
					/* (?flags): for the rest of the enclosing group. */
					flags[depth] = f;
					i = end;
					last = atom = 0;
					goto next;
				}
			}
			if (depth == MAX_GROUP_DEPTH) {
				ck_err_set(err, "groups nested deeper than %d levels at offset %zu",
				           MAX_GROUP_DEPTH, i);
				goto fail;
			}
			ck_sbuf_putc(&out, '(');
			if (s[i + 1] == '?')
				i = end;
			sums[++depth] = 0;
			flags[depth] = f;
			last = atom = 0;
		} else if (c == ')' && depth > 0) {
			ck_sbuf_putc(&out, ')');
			last = atom = sums[depth--]; /* the group, added to the enclosing one */
		} else if (c == '|') {
			ck_sbuf_putc(&out, '|');
			last = atom = 0;
		} else if (c == '?' && was_quant) {
			lazy = true; /* dropped */
			atom = 0;
		} else if (c == '*' || c == '+' || c == '?' || (c == '{' && interval(s, i))) {
			if (was_quant || was_lazy) {
				ck_err_set(err,
				           "\"%c\" at offset %zu repeats a repetition (RE2 refuses "
				           "it)",
				           c, i);
				goto fail;
			}
			size_t copies = c == '+' ? 2 : 1;
			if (c == '{') {
				const char *end = strchr(s + i, '}');
				char *p;
				unsigned long lo = strtoul(s + i + 1, &p, 10), hi = lo;
				if (*p == ',')
					hi = p[1] == '}' ? lo + 1 : strtoul(p + 1, NULL, 10);
				if (lo > MAX_REPEAT || hi > MAX_REPEAT) {
					ck_err_set(err,
					           "a count over %d at offset %zu (RE2 refuses it)",
					           MAX_REPEAT, i);
					goto fail;
				}
				copies = hi > lo ? hi : lo;
				ck_sbuf_append(&out, s + i, (size_t)(end - (s + i)) + 1);
				i = (size_t)(end - s);
			} else {
				ck_sbuf_putc(&out, c);
			}
			quant = true;
			atom = copies > 1 ? last * (copies - 1) : 0; /* the copies added */
			last *= copies > 0 ? copies : 1;
		} else if (c == '{' || c == '}') {
			ck_sbuf_putc(&out, '\\'); /* literal in ECMA-262 when not an interval */
			ck_sbuf_putc(&out, c);
		} else if (c == '.') {
			/* RE2's '.' does not match a newline, but under (?s); a POSIX
			 * one does. */
			ck_sbuf_puts(&out, flags[depth] & FLAG_S ? "." : "[^\n]");
		} else if (ci && (unsigned char)c >= 0x80) {
			/* Folding it would need Unicode's case tables. */
			ck_err_set(err,
			           "a non-ASCII character at offset %zu under (?i) has no POSIX "
			           "form",
			           i);
			goto fail;
		} else if (ci && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
			char lo = (char)(c | 0x20);
			ck_sbuf_printf(&out, "[%c%c%s]", lo, (char)(lo - 'a' + 'A'),
			               fold_extra(lo));
		} else {
			ck_sbuf_putc(&out, c);
		}
		if (atom > 0 && !quant)
			last = atom;
	next:
		sums[depth] += atom;
		if (sums[depth] > MAX_COPIES) {
			ck_err_set(err,
			           "more than %d characters and classes once its repetitions are "
			           "expanded (at offset %zu): too large for regcomp",
			           MAX_COPIES, i);
			goto fail;
		}
	}
	if (out.len == 0)
		return ck_xstrdup("");
	return ck_sbuf_steal(&out);
fail:
	ck_sbuf_free(&out);
	return NULL;
}
