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
 * capturing. What has no POSIX counterpart (backreferences, lookaround, word
 * boundaries, Unicode classes, flags) is refused with the reason.
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

/* The ERE of a class escape outside brackets, or NULL. */
static const char *class_outside(char c)
{
	switch (c) {
	case 'd':
		return "[0-9]";
	case 'D':
		return "[^0-9]";
	case 'w':
		return "[0-9A-Za-z_]";
	case 'W':
		return "[^0-9A-Za-z_]";
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
} cls_t;

static void cls_char(cls_t *k, char c)
{
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
		if (e == 'd')
			ck_sbuf_puts(&k->items, "0-9");
		else if (e == 'w')
			ck_sbuf_puts(&k->items, "0-9A-Za-z_");
		else if (e == 's')
			ck_sbuf_puts(&k->items, RE2_SPACE);
		else if (control_escape(e))
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

/* Translates the bracket expression at s[*i] ('['). Returns 0 or -1 with *err. */
static int bracket(const char *s, size_t *i, ck_sbuf_t *out, char **err)
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
		}
	}
	*i = p;
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
	for (size_t i = 0; s[i] != '\0'; i++) {
		char c = s[i];
		bool was_quant = quant, was_lazy = lazy;
		quant = lazy = false;
		size_t atom = 1; /* what this token adds; 0: not an atom */
		if (c == '\\') {
			char e = s[++i];
			if (class_outside(e)) {
				ck_sbuf_puts(&out, class_outside(e));
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
			if (bracket(s, &i, &out, err) != 0)
				goto fail;
		} else if (c == '(') {
			if (s[i + 1] == '?' && s[i + 2] != ':') {
				ck_err_set(err,
				           "\"(?%c\" at offset %zu (lookaround, flags or named "
				           "groups) has no POSIX form",
				           s[i + 2] ? s[i + 2] : '0', i);
				goto fail;
			}
			if (depth == MAX_GROUP_DEPTH) {
				ck_err_set(err, "groups nested deeper than %d levels at offset %zu",
				           MAX_GROUP_DEPTH, i);
				goto fail;
			}
			ck_sbuf_putc(&out, '(');
			if (s[i + 1] == '?')
				i += 2;
			sums[++depth] = 0;
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
			/* RE2's '.' does not match a newline; a POSIX one does. */
			ck_sbuf_puts(&out, "[^\n]");
		} else {
			ck_sbuf_putc(&out, c);
		}
		if (atom > 0 && !quant)
			last = atom;
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
