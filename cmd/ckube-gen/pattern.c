/*
 * pattern: a CRD's `pattern` (ECMA-262, checked by the API server with Go's RE2)
 * turned into a POSIX extended expression that accepts the same strings, so that
 * generated validation needs nothing but libc's regexec.
 *
 * Only acceptance matters (a pattern is a yes/no test), which makes some of the
 * differences free: lazy quantifiers become greedy, non-capturing groups
 * capturing. What has no POSIX counterpart (backreferences, lookaround, word
 * boundaries, Unicode classes, flags) is refused with the reason.
 */
#include "cmd/ckube-gen/gen.h"

#include <string.h>

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
		return "[[:space:]]";
	case 'S':
		return "[^[:space:]]";
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

/* Translates the bracket expression at s[*i] ('['). Returns 0 or -1 with *err. */
static int bracket(const char *s, size_t *i, ck_sbuf_t *out, char **err)
{
	size_t p = *i + 1;
	bool neg = false, rbracket = false, hyphen = false, caret = false;
	ck_sbuf_t items = CK_SBUF_INIT;
	int rc = -1;
	if (s[p] == '^') {
		neg = true;
		p++;
	}
	if (s[p] == ']') {
		ck_err_set(err, "an empty class \"[]\" at offset %zu has no POSIX form", *i);
		goto out;
	}
	size_t first = p;
	for (; s[p] != ']'; p++) {
		char c = s[p];
		if (c == '\0') {
			ck_err_set(err, "unterminated class \"[\" at offset %zu", *i);
			goto out;
		}
		if (c == '\\') {
			char e = s[++p];
			if (e == 'd') {
				ck_sbuf_puts(&items, "0-9");
			} else if (e == 'w') {
				ck_sbuf_puts(&items, "0-9A-Za-z_");
			} else if (e == 's') {
				ck_sbuf_puts(&items, "[:space:]");
			} else if (control_escape(e)) {
				ck_sbuf_putc(&items, control_escape(e));
			} else if (e == ']') {
				rbracket = true;
			} else if (e == '-') {
				hyphen = true;
			} else if (e == '^') {
				caret = true;
			} else if (is_punct_escape(e)) {
				ck_sbuf_putc(&items, e); /* a backslash is literal in a POSIX class */
			} else {
				ck_err_set(err, "the escape \"\\%c\" inside a class at offset %zu has no "
				                "POSIX form",
				           e ? e : '0', p - 1);
				goto out;
			}
			continue;
		}
		if (c == '[' && (s[p + 1] == ':' || s[p + 1] == '.' || s[p + 1] == '=')) {
			ck_err_set(err, "\"[%c\" inside a class at offset %zu would be a POSIX class",
			           s[p + 1], p);
			goto out;
		}
		/* A hyphen first or last is literal in both dialects; moved to the end
		 * so that a ']' put first cannot start a range with it. */
		if (c == '-' && (p == first || s[p + 1] == ']')) {
			hyphen = true;
			continue;
		}
		ck_sbuf_putc(&items, c);
	}
	*i = p;
	if (!neg && caret && items.len == 0 && !rbracket && !hyphen) {
		ck_sbuf_puts(out, "\\^");
		rc = 0;
		goto out;
	}
	ck_sbuf_putc(out, '[');
	if (neg)
		ck_sbuf_putc(out, '^');
	if (rbracket)
		ck_sbuf_putc(out, ']');
	ck_sbuf_append(out, items.data ? items.data : "", items.len);
	if (caret)
		ck_sbuf_putc(out, '^');
	if (hyphen)
		ck_sbuf_putc(out, '-');
	ck_sbuf_putc(out, ']');
	rc = 0;
out:
	ck_sbuf_free(&items);
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
	 * lazy, which changes what is captured, never whether a string matches. */
	bool quant = false;
	for (size_t i = 0; s[i] != '\0'; i++) {
		char c = s[i];
		bool was_quant = quant;
		quant = false;
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
				ck_err_set(err, "the escape \"\\%c\" at offset %zu has no POSIX form",
				           e ? e : '0', i - 1);
				goto fail;
			}
		} else if (c == '[') {
			if (bracket(s, &i, &out, err) != 0)
				goto fail;
		} else if (c == '(' && s[i + 1] == '?') {
			if (s[i + 2] != ':') {
				ck_err_set(err, "\"(?%c\" at offset %zu (lookaround, flags or named "
				                "groups) has no POSIX form",
				           s[i + 2] ? s[i + 2] : '0', i);
				goto fail;
			}
			ck_sbuf_putc(&out, '(');
			i += 2;
		} else if (c == '?' && was_quant) {
			/* lazy: dropped */
		} else if (c == '*' || c == '+' || c == '?') {
			ck_sbuf_putc(&out, c);
			quant = true;
		} else if (c == '{' && interval(s, i)) {
			const char *end = strchr(s + i, '}');
			ck_sbuf_append(&out, s + i, (size_t)(end - (s + i)) + 1);
			i = (size_t)(end - s);
			quant = true;
		} else if (c == '{' || c == '}') {
			ck_sbuf_putc(&out, '\\'); /* literal in ECMA-262 when not an interval */
			ck_sbuf_putc(&out, c);
		} else if (c == '.') {
			/* RE2's '.' does not match a newline; a POSIX one does. */
			ck_sbuf_puts(&out, "[^\n]");
		} else {
			ck_sbuf_putc(&out, c);
		}
	}
	if (out.len == 0)
		return ck_xstrdup("");
	return ck_sbuf_steal(&out);
fail:
	ck_sbuf_free(&out);
	return NULL;
}
