/*
 * shard: KEP-5866 shard selectors -- the FNV-1a 64 hash, the selector's wire form
 * (parse and format) and the match the API server applies (include/ckube/shard.h).
 *
 * The parser takes the subset of CEL the server's own parser (k8s.io/apiserver/
 * pkg/sharding) lets through: shardRange(<field>, <bound>, <bound>) calls joined
 * by ||, with whitespace anywhere between tokens and bounds in '...' or "...".
 * Its checks are the server's (field, 0x and 16 lowercase digits or 2^64,
 * start < end, one field throughout), so a selector refused here would get a 400.
 */
#include <ckube/base.h>
#include <ckube/shard.h>

#include <stdlib.h>
#include <string.h>

#define FNV64_OFFSET 0xcbf29ce484222325ULL
#define FNV64_PRIME  0x100000001b3ULL

struct ck_shard_selector {
	ck_shard_field_t field;
	size_t n;
	ck_shard_range_t *r;
	char *wire;
};

static const char *const field_path[] = {
    [CK_SHARD_NAMESPACE] = "object.metadata.namespace",
    [CK_SHARD_UID] = "object.metadata.uid",
};

uint64_t ck_shard_hash(const void *p, size_t len)
{
	const unsigned char *b = p;
	uint64_t h = FNV64_OFFSET;
	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= FNV64_PRIME;
	}
	return h;
}

/* start < end, with end 0 standing for 2^64. */
static bool range_ok(const ck_shard_range_t *r)
{
	return r->end == 0 || r->start < r->end;
}

static void put_bound(ck_sbuf_t *b, uint64_t v, bool is_end)
{
	if (is_end && v == 0)
		ck_sbuf_puts(b, "'0x10000000000000000'");
	else
		ck_sbuf_printf(b, "'0x%016llx'", (unsigned long long)v);
}

static ck_shard_selector_t *build(ck_shard_field_t field, const ck_shard_range_t *r, size_t n)
{
	ck_shard_selector_t *s = ck_xcalloc(1, sizeof(*s));
	s->field = field;
	s->n = n;
	s->r = ck_xmalloc(n * sizeof(*r));
	memcpy(s->r, r, n * sizeof(*r));
	ck_sbuf_t b = CK_SBUF_INIT;
	for (size_t i = 0; i < n; i++) {
		ck_sbuf_printf(&b, "%sshardRange(%s, ", i ? " || " : "", field_path[field]);
		put_bound(&b, r[i].start, false);
		ck_sbuf_puts(&b, ", ");
		put_bound(&b, r[i].end, true);
		ck_sbuf_putc(&b, ')');
	}
	s->wire = ck_xstrdup(ck_sbuf_cstr(&b));
	free(b.data);
	return s;
}

ck_shard_selector_t *ck_shard_selector_new(ck_shard_field_t field, const ck_shard_range_t *r,
                                           size_t n, char **err)
{
	if (field != CK_SHARD_NAMESPACE && field != CK_SHARD_UID) {
		ck_err_set(err, "shard selector: unknown field %d", (int)field);
		return NULL;
	}
	if (!r || n == 0) {
		ck_err_set(err, "shard selector: no range");
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (!range_ok(&r[i])) {
			ck_err_set(err,
			           "shard selector: range %zu: start 0x%016llx must be less than "
			           "end 0x%016llx",
			           i + 1, (unsigned long long)r[i].start,
			           (unsigned long long)r[i].end);
			return NULL;
		}
	}
	return build(field, r, n);
}

/* ---------------------------------------------------------------- parser */

typedef struct parser {
	const char *s; /* the whole selector, for columns */
	const char *p;
	size_t range; /* 1-based number of the range being read */
	char **err;
} parser_t;

static void skip_ws(parser_t *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
		ps->p++;
}

static size_t column(const parser_t *ps, const char *at)
{
	return (size_t)(at - ps->s) + 1;
}

/* A shortened view of what is at p, for messages. */
static int fail_at(parser_t *ps, const char *at, const char *what)
{
	size_t len = strcspn(at, ",)|");
	if (len > 40)
		len = 40;
	if (*at == '\0')
		return ck_err_set(ps->err,
		                  "shard selector: range %zu (column %zu): %s, found the end",
		                  ps->range, column(ps, at), what);
	return ck_err_set(ps->err, "shard selector: range %zu (column %zu): %s, found \"%.*s\"",
	                  ps->range, column(ps, at), what, (int)(len ? len : 1), at);
}

static bool ident_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (!first && c >= '0' && c <= '9');
}

static int expect(parser_t *ps, char c, const char *what)
{
	skip_ws(ps);
	if (*ps->p != c)
		return fail_at(ps, ps->p, what);
	ps->p++;
	return 0;
}

/* A dotted path (object.metadata.uid) -> the field it names. */
static int parse_field(parser_t *ps, ck_shard_field_t *f)
{
	skip_ws(ps);
	const char *at = ps->p;
	ck_sbuf_t b = CK_SBUF_INIT;
	int rc = -1;
	for (;;) {
		skip_ws(ps);
		if (!ident_char(*ps->p, true)) {
			fail_at(ps, at,
			        "expected a field path (object.metadata.namespace or "
			        "object.metadata.uid)");
			goto out;
		}
		const char *id = ps->p;
		while (ident_char(*ps->p, false))
			ps->p++;
		ck_sbuf_append(&b, id, (size_t)(ps->p - id));
		skip_ws(ps);
		if (*ps->p != '.')
			break;
		ps->p++;
		ck_sbuf_putc(&b, '.');
	}
	const char *path = ck_sbuf_cstr(&b);
	for (size_t i = 0; i < CK_ARRAY_LEN(field_path); i++) {
		if (strcmp(path, field_path[i]) == 0) {
			*f = (ck_shard_field_t)i;
			rc = 0;
			goto out;
		}
	}
	ck_err_set(ps->err,
	           "shard selector: range %zu (column %zu): unsupported field path \"%s\"; "
	           "supported: object.metadata.namespace, object.metadata.uid",
	           ps->range, column(ps, at), path);
out:
	free(b.data);
	return rc;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* A quoted bound: '0x' + 16 lowercase hex digits, or 2^64 (*max) for an end. */
static int parse_bound(parser_t *ps, const char *name, uint64_t *v, bool *max)
{
	skip_ws(ps);
	const char *at = ps->p;
	char q = *ps->p;
	if (q != '\'' && q != '"')
		return fail_at(ps, at,
		               name[0] == 's' ? "the start must be a quoted string ('0x...')"
		                              : "the end must be a quoted string ('0x...')");
	const char *lit = ++ps->p;
	const char *close = strchr(lit, q);
	if (!close)
		return fail_at(ps, at, "unterminated string");
	size_t len = (size_t)(close - lit);
	ps->p = close + 1;
	*max = false;
	*v = 0;
	if (len == 19 && memcmp(lit, "0x10000000000000000", 19) == 0) {
		if (name[0] == 's')
			return ck_err_set(ps->err,
			                  "shard selector: range %zu (column %zu): start "
			                  "0x10000000000000000 is past the last hash",
			                  ps->range, column(ps, at));
		*max = true;
		return 0;
	}
	bool ok = len == 18 && lit[0] == '0' && lit[1] == 'x';
	for (size_t i = 2; ok && i < len; i++) {
		int d = hexval(lit[i]);
		if (d < 0)
			ok = false;
		else
			*v = (*v << 4) | (uint64_t)d;
	}
	if (!ok)
		return ck_err_set(
		    ps->err,
		    "shard selector: range %zu (column %zu): %s '%.*s' must be 0x and "
		    "16 lowercase hex digits (or 0x10000000000000000 for the end), "
		    "e.g. '0x8000000000000000'",
		    ps->range, column(ps, at), name, (int)(len > 40 ? 40 : len), lit);
	return 0;
}

static int parse_range(parser_t *ps, ck_shard_field_t *f, ck_shard_range_t *r)
{
	skip_ws(ps);
	const char *at = ps->p;
	static const char fn[] = "shardRange";
	if (strncmp(ps->p, fn, sizeof(fn) - 1) != 0 || ident_char(ps->p[sizeof(fn) - 1], false))
		return fail_at(ps, at, "expected shardRange(field, 'start', 'end')");
	ps->p += sizeof(fn) - 1;
	if (expect(ps, '(', "expected '(' after shardRange") < 0 || parse_field(ps, f) < 0 ||
	    expect(ps, ',', "expected ',' after the field") < 0)
		return -1;
	uint64_t start, end;
	bool smax, emax;
	if (parse_bound(ps, "start", &start, &smax) < 0 ||
	    expect(ps, ',', "expected ',' after the start") < 0 ||
	    parse_bound(ps, "end", &end, &emax) < 0 ||
	    expect(ps, ')', "expected ')': shardRange takes exactly 3 arguments") < 0)
		return -1;
	if (!emax && start >= end)
		return ck_err_set(ps->err,
		                  "shard selector: range %zu (column %zu): start 0x%016llx must be "
		                  "less than end 0x%016llx",
		                  ps->range, column(ps, at), (unsigned long long)start,
		                  (unsigned long long)end);
	r->start = start;
	r->end = emax ? 0 : end;
	return 0;
}

ck_shard_selector_t *ck_shard_selector_parse(const char *s, char **err)
{
	parser_t ps = {.s = s, .p = s, .range = 1, .err = err};
	ck_shard_range_t *r = NULL;
	ck_shard_selector_t *sel = NULL;
	size_t n = 0;
	ck_shard_field_t field = CK_SHARD_NAMESPACE;
	if (!s) {
		ck_err_set(err, "shard selector: none given");
		goto out;
	}
	skip_ws(&ps);
	if (*ps.p == '\0') {
		ck_err_set(err, "shard selector: empty (omit it to list everything)");
		goto out;
	}
	for (;;) {
		ck_shard_field_t f = CK_SHARD_NAMESPACE;
		r = ck_xrealloc(r, (n + 1) * sizeof(*r));
		const char *at = ps.p;
		if (parse_range(&ps, &f, &r[n]) < 0)
			goto out;
		if (n > 0 && f != field) {
			ck_err_set(
			    err,
			    "shard selector: range %zu (column %zu): all ranges must use the "
			    "same field, got %s and %s",
			    ps.range, column(&ps, at), field_path[field], field_path[f]);
			goto out;
		}
		field = f;
		n++;
		skip_ws(&ps);
		if (*ps.p == '\0')
			break;
		if (ps.p[0] != '|' || ps.p[1] != '|') {
			fail_at(&ps, ps.p, "expected || or the end after a range");
			goto out;
		}
		ps.p += 2;
		ps.range++;
	}
	sel = build(field, r, n);
out:
	free(r);
	return sel;
}

ck_shard_selector_t *ck_shard_selector_dup(const ck_shard_selector_t *s)
{
	return s ? build(s->field, s->r, s->n) : NULL;
}

void ck_shard_selector_free(ck_shard_selector_t *s)
{
	if (!s)
		return;
	free(s->r);
	free(s->wire);
	free(s);
}

const char *ck_shard_selector_string(const ck_shard_selector_t *s)
{
	return s->wire;
}

ck_shard_field_t ck_shard_selector_field(const ck_shard_selector_t *s)
{
	return s->field;
}

const ck_shard_range_t *ck_shard_selector_ranges(const ck_shard_selector_t *s, size_t *n)
{
	*n = s->n;
	return s->r;
}

bool ck_shard_selector_match_hash(const ck_shard_selector_t *s, uint64_t h)
{
	for (size_t i = 0; i < s->n; i++) {
		if (ck_shard_range_contains(s->r[i], h))
			return true;
	}
	return false;
}

uint64_t ck_shard_obj_hash(ck_shard_field_t field, const ck_obj_t *obj)
{
	const char *v = field == CK_SHARD_UID ? obj->uid : obj->ns;
	return ck_shard_hash(v, strlen(v));
}

bool ck_shard_selector_match(const ck_shard_selector_t *s, const ck_obj_t *obj)
{
	return ck_shard_selector_match_hash(s, ck_shard_obj_hash(s->field, obj));
}
