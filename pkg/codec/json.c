/*
 * json: JSON text -> an immutable tree, with yajl's callback parser.
 *
 * Not yajl_tree: it drops string lengths (a \u0000 would cut a string), has no
 * depth bound (its parser stack, and our recursive walks, would grow with the
 * input) and gives no byte offsets. Here every node, key and string goes into one
 * bump arena per document, so a document is freed by walking its blocks, never
 * its tree. While parsing, the children of every open container wait on one
 * scratch stack; a container's closing bracket moves its children into the
 * arena as one array, so lookups and iteration walk plain arrays.
 *
 * Secrets (ck_json_i_parse_secret, json_internal.h): an exec plugin's
 * ExecCredential is read here too, for the same depth bound (yajl_tree's free
 * recursed once per level: 400,000 nested arrays overflowed the stack). Its
 * strings are tokens and keys, so the document's arena and yajl's own buffers
 * (its lexer unescapes strings into one) are wiped before they go back to the
 * heap, and a parse error names the byte offset without an excerpt of the input.
 */
#include "pkg/codec/json_internal.h"
#include "pkg/codec/syntax.h"

#include <ckube/base.h>

#include <yajl/yajl_parse.h>

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct member {
	const char *key; /* NULL for array elements */
	size_t klen;
	const ck_json_t *val;
} member_t;

struct ck_json {
	ck_json_type_t type;
	bool b;
	size_t len; /* string bytes, number text bytes, or number of members/elements */
	union {
		const char *s;     /* CK_JSON_STRING, CK_JSON_NUMBER (NUL-terminated) */
		const member_t *m; /* CK_JSON_ARRAY, CK_JSON_OBJECT */
	} u;
};

typedef struct block {
	struct block *next;
	size_t used, cap;
	alignas(max_align_t) unsigned char data[];
} block_t;

struct ck_json_doc {
	block_t *blocks;
	const ck_json_t *root;
	bool secret; /* wipe every block when freed */
};

#define BLOCK_MIN 4096

static void *arena_alloc(ck_json_doc_t *d, size_t n)
{
	const size_t al = alignof(max_align_t);
	n = (n + al - 1) & ~(al - 1);
	block_t *b = d->blocks;
	if (b == NULL || b->cap - b->used < n) {
		size_t cap = n > BLOCK_MIN ? n : BLOCK_MIN;
		block_t *nb = ck_xmalloc(sizeof(*nb) + cap);
		nb->used = 0;
		nb->cap = cap;
		/* A big allocation goes behind the current block, which keeps its room. */
		if (b != NULL && n > BLOCK_MIN) {
			nb->next = b->next;
			b->next = nb;
		} else {
			nb->next = b;
			d->blocks = nb;
		}
		b = nb;
	}
	void *p = b->data + b->used;
	b->used += n;
	return p;
}

static const char *arena_str(ck_json_doc_t *d, const char *s, size_t l)
{
	char *p = arena_alloc(d, l + 1);
	if (l > 0)
		memcpy(p, s, l);
	p[l] = '\0';
	return p;
}

/* ---- the parser ---- */

typedef struct frame {
	ck_json_t *node;
	size_t first; /* index of its first child on the scratch stack */
} frame_t;

typedef struct parser {
	ck_json_doc_t *doc;
	yajl_handle h;
	frame_t frames[CK_JSON_MAX_DEPTH];
	size_t nframes;
	member_t *scratch;
	size_t nscratch, capscratch;
	const char *key; /* the pending key of the innermost object (in the arena) */
	size_t klen;
	size_t base;     /* offset of yajl's current buffer in the input */
	size_t len;      /* of the input */
	size_t good_end; /* the input is valid JSON up to here */
	char *err;
} parser_t;

/*
 * Where yajl is in the input; called from the callbacks, after the token.
 * yajl_complete_parse lexes a buffer of its own, whose offsets mean "the end".
 */
static size_t pos(parser_t *p)
{
	size_t at = p->base + yajl_get_bytes_consumed(p->h);
	return at < p->len ? at : p->len;
}

static ck_json_t *new_node(parser_t *p, ck_json_type_t t)
{
	p->good_end = pos(p);
	ck_json_t *n = arena_alloc(p->doc, sizeof(*n));
	*n = (ck_json_t){.type = t};
	return n;
}

/* Gives a finished value to the open container, or makes it the root. */
static int add(parser_t *p, const ck_json_t *v)
{
	if (p->nframes == 0) {
		p->doc->root = v;
		return 1;
	}
	if (p->nscratch == p->capscratch) {
		p->capscratch = p->capscratch ? p->capscratch * 2 : 64;
		p->scratch = ck_xrealloc(p->scratch, p->capscratch * sizeof(*p->scratch));
	}
	bool obj = p->frames[p->nframes - 1].node->type == CK_JSON_OBJECT;
	p->scratch[p->nscratch++] = (member_t){obj ? p->key : NULL, obj ? p->klen : 0, v};
	return 1;
}

static int cb_null(void *ctx)
{
	parser_t *p = ctx;
	return add(p, new_node(p, CK_JSON_NULL));
}

static int cb_bool(void *ctx, int b)
{
	parser_t *p = ctx;
	ck_json_t *n = new_node(p, CK_JSON_BOOL);
	n->b = b != 0;
	return add(p, n);
}

static int cb_number(void *ctx, const char *s, size_t l)
{
	parser_t *p = ctx;
	ck_json_t *n = new_node(p, CK_JSON_NUMBER);
	n->u.s = arena_str(p->doc, s, l);
	n->len = l;
	return add(p, n);
}

static int cb_string(void *ctx, const unsigned char *s, size_t l)
{
	parser_t *p = ctx;
	ck_json_t *n = new_node(p, CK_JSON_STRING);
	n->u.s = arena_str(p->doc, (const char *)s, l);
	n->len = l;
	return add(p, n);
}

static int cb_key(void *ctx, const unsigned char *k, size_t l)
{
	parser_t *p = ctx;
	p->good_end = pos(p);
	p->key = arena_str(p->doc, (const char *)k, l);
	p->klen = l;
	return 1;
}

static int cb_open(parser_t *p, ck_json_type_t t)
{
	if (p->nframes == CK_JSON_MAX_DEPTH) {
		p->err = ck_xasprintf("JSON nested deeper than %d levels at byte %zu",
		                      CK_JSON_MAX_DEPTH, pos(p) - 1);
		return 0;
	}
	ck_json_t *n = new_node(p, t);
	/* Its entry in the parent is made now, while the pending key is still its
	 * own; the node's children are attached at the close. */
	if (!add(p, n))
		return 0;
	p->frames[p->nframes++] = (frame_t){n, p->nscratch};
	return 1;
}

static int cb_start_map(void *ctx)
{
	return cb_open(ctx, CK_JSON_OBJECT);
}

static int cb_start_array(void *ctx)
{
	return cb_open(ctx, CK_JSON_ARRAY);
}

static int cb_close(void *ctx)
{
	parser_t *p = ctx;
	p->good_end = pos(p);
	frame_t *f = &p->frames[--p->nframes];
	size_t n = p->nscratch - f->first;
	if (n > 0) {
		member_t *m = arena_alloc(p->doc, n * sizeof(*m));
		memcpy(m, p->scratch + f->first, n * sizeof(*m));
		f->node->u.m = m;
	}
	f->node->len = n;
	p->nscratch = f->first;
	return 1;
}

static const yajl_callbacks callbacks = {
    cb_null,      cb_bool, NULL,     NULL,           cb_number, cb_string,
    cb_start_map, cb_key,  cb_close, cb_start_array, cb_close,
};

/* Up to 16 printable bytes of the input from the end of the last good token. */
static void excerpt(const char *text, size_t len, size_t at, char out[17])
{
	size_t n = 0;
	for (size_t i = at; i < len && n < 16; i++, n++) {
		unsigned char c = (unsigned char)text[i];
		out[n] = c >= 0x20 && c < 0x7f ? (char)c : '.';
	}
	out[n] = '\0';
}

static void parse_failed(parser_t *p, const char *text, size_t len)
{
	if (p->err != NULL)
		return; /* a callback refused: its message says why */
	char ex[17] = "";
	if (!p->doc->secret)
		excerpt(text, len, p->good_end, ex);
	p->err = ck_codec_i_syntax_error(p->h, p->good_end, ex);
}

/*
 * yajl's allocator for secrets: every buffer it frees or outgrows is wiped first.
 * malloc_usable_size gives the size, which yajl's free does not pass.
 */
static void *wipe_malloc(void *ctx, size_t n)
{
	(void)ctx;
	return ck_xmalloc(n ? n : 1);
}

static void wipe_free(void *ctx, void *ptr)
{
	(void)ctx;
	if (ptr == NULL)
		return;
	ck_secure_zero(ptr, malloc_usable_size(ptr));
	free(ptr);
}

static void *wipe_realloc(void *ctx, void *ptr, size_t n)
{
	void *q = wipe_malloc(ctx, n);
	if (ptr != NULL) {
		size_t old = malloc_usable_size(ptr);
		memcpy(q, ptr, old < n ? old : n);
		wipe_free(ctx, ptr);
	}
	return q;
}

static yajl_alloc_funcs wipe_funcs = {wipe_malloc, wipe_realloc, wipe_free, NULL};

static ck_json_doc_t *parse(const char *text, size_t len, bool secret, char **err)
{
	parser_t *p = ck_xcalloc(1, sizeof(*p));
	p->doc = ck_xcalloc(1, sizeof(*p->doc));
	p->doc->secret = secret;
	p->len = len;
	p->h = yajl_alloc(&callbacks, secret ? &wipe_funcs : NULL, p);
	if (p->h == NULL)
		ck_fatal("yajl_alloc failed");
	yajl_status st = yajl_parse(p->h, (const unsigned char *)(text ? text : ""), len);
	if (st == yajl_status_ok) {
		/* The tokens it completes (a number at the very end) end the input. */
		p->base = len;
		st = yajl_complete_parse(p->h);
	}
	ck_json_doc_t *d = p->doc;
	if (st != yajl_status_ok || d->root == NULL) {
		if (st == yajl_status_ok)
			p->err = ck_xstrdup("empty JSON text");
		parse_failed(p, text, len);
		ck_err_set(err, "%s", p->err);
		ck_json_doc_free(d);
		d = NULL;
	}
	free(p->err);
	free(p->scratch);
	yajl_free(p->h);
	free(p);
	return d;
}

ck_json_doc_t *ck_json_parse(const char *text, size_t len, char **err)
{
	return parse(text, len, false, err);
}

ck_json_doc_t *ck_json_i_parse_secret(const char *text, size_t len, char **err)
{
	return parse(text, len, true, err);
}

void ck_json_doc_free(ck_json_doc_t *d)
{
	if (d == NULL)
		return;
	for (block_t *b = d->blocks, *next; b != NULL; b = next) {
		next = b->next;
		if (d->secret)
			ck_secure_zero(b->data, b->used);
		free(b);
	}
	free(d);
}

/* A one-node document for a scalar kept value. */
static ck_json_doc_t *scalar_doc(ck_json_type_t t, bool b, const char *s, size_t l)
{
	ck_json_doc_t *d = ck_xcalloc(1, sizeof(*d));
	ck_json_t *n = arena_alloc(d, sizeof(*n));
	*n = (ck_json_t){.type = t, .b = b};
	if (s != NULL) {
		n->u.s = arena_str(d, s, l);
		n->len = l;
	}
	d->root = n;
	return d;
}

/* A double as JSON number text that reads back as a double (never as an integer)
 * and stays valid JSON: an overflowed value (the input said 1e999) as +-1e999. */
static size_t format_double(double v, char out[40])
{
	if (isinf(v) || isnan(v))
		return (size_t)snprintf(out, 40, "%s1e999", v < 0 ? "-" : "");
	int n = snprintf(out, 40, "%.17g", v);
	if (strpbrk(out, ".eE") == NULL)
		n += snprintf(out + n, 40 - (size_t)n, ".0");
	return (size_t)n;
}

ck_json_doc_t *ck_json_parse_val(const ck_val_t *v, char **err)
{
	char num[40];
	size_t n;
	switch (v ? v->type : CK_VAL_ABSENT) {
	case CK_VAL_NULL:
		return scalar_doc(CK_JSON_NULL, false, NULL, 0);
	case CK_VAL_BOOL:
		return scalar_doc(CK_JSON_BOOL, v->u.b, NULL, 0);
	case CK_VAL_INT:
		n = (size_t)snprintf(num, sizeof(num), "%lld", (long long)v->u.i);
		return scalar_doc(CK_JSON_NUMBER, false, num, n);
	case CK_VAL_DOUBLE:
		n = format_double(v->u.d, num);
		return scalar_doc(CK_JSON_NUMBER, false, num, n);
	case CK_VAL_STRING:
		return scalar_doc(CK_JSON_STRING, false, v->u.s, strlen(v->u.s));
	case CK_VAL_JSON:
		return ck_json_parse(v->u.s, strlen(v->u.s), err);
	case CK_VAL_ABSENT:
	default:
		ck_err_set(err, "value is absent");
		return NULL;
	}
}

ck_json_doc_t *ck_json_parse_field(const ck_obj_t *obj, size_t i, char **err)
{
	const char *path = i < obj->nfields ? obj->type->fields[i] : NULL;
	if (path == NULL) {
		ck_err_set(err, "%s %s/%s: no kept field %zu", obj->type->kind, obj->ns, obj->name,
		           i);
		return NULL;
	}
	const ck_val_t *v = ck_obj_field(obj, i);
	if (v->type == CK_VAL_ABSENT) {
		ck_err_set(err, "%s %s/%s: field %s is absent", obj->type->kind, obj->ns, obj->name,
		           path);
		return NULL;
	}
	ck_json_doc_t *d = ck_json_parse_val(v, err);
	if (d == NULL)
		ck_err_wrap(err, "%s %s/%s: field %s", obj->type->kind, obj->ns, obj->name, path);
	return d;
}

ck_json_doc_t *ck_json_parse_field_path(const ck_obj_t *obj, const char *path, char **err)
{
	int i = ck_type_field_index(obj->type, path);
	if (i < 0) {
		ck_err_set(err, "%s: %s is not a kept field", obj->type->kind, path);
		return NULL;
	}
	return ck_json_parse_field(obj, (size_t)i, err);
}

/* ---- reading ---- */

const ck_json_t *ck_json_root(const ck_json_doc_t *d)
{
	return d ? d->root : NULL;
}

ck_json_type_t ck_json_type(const ck_json_t *v)
{
	return v ? v->type : CK_JSON_ABSENT;
}

const char *ck_json_type_name(ck_json_type_t t)
{
	static const char *const names[] = {"absent", "null",  "bool",  "number",
	                                    "string", "array", "object"};
	return (unsigned)t < CK_ARRAY_LEN(names) ? names[t] : "?";
}

const ck_json_t *ck_json_member(const ck_json_t *obj, const char *key, size_t keylen)
{
	if (obj == NULL || obj->type != CK_JSON_OBJECT || key == NULL)
		return NULL;
	/* Backwards: the last of a repeated key wins. */
	for (size_t i = obj->len; i-- > 0;) {
		const member_t *m = &obj->u.m[i];
		if (m->klen == keylen && memcmp(m->key, key, keylen) == 0)
			return m->val;
	}
	return NULL;
}

/* "0", "17": an index; "", "01", "-1", "1x", or past SIZE_MAX: not one. */
static bool parse_index(const char *s, size_t *out)
{
	if (s[0] == '\0' || (s[0] == '0' && s[1] != '\0'))
		return false;
	size_t v = 0;
	for (; *s; s++) {
		unsigned c = (unsigned char)*s - '0';
		if (c > 9 || v > (SIZE_MAX - c) / 10)
			return false;
		v = v * 10 + c;
	}
	*out = v;
	return true;
}

static const ck_json_t *step(const ck_json_t *v, const char *seg)
{
	if (v == NULL || seg == NULL)
		return NULL;
	if (v->type == CK_JSON_OBJECT)
		return ck_json_member(v, seg, strlen(seg));
	size_t i;
	if (v->type == CK_JSON_ARRAY && parse_index(seg, &i))
		return ck_json_at(v, i);
	return NULL;
}

const ck_json_t *ck_json_getn(const ck_json_t *v, const char *const *segs, size_t n)
{
	for (size_t i = 0; i < n && v != NULL; i++)
		v = step(v, segs[i]);
	return v;
}

const ck_json_t *ck_json_get(const ck_json_t *v, const char *const *path)
{
	if (path == NULL)
		return v;
	for (; *path != NULL && v != NULL; path++)
		v = step(v, *path);
	return v;
}

size_t ck_json_len(const ck_json_t *v)
{
	if (v == NULL || (v->type != CK_JSON_OBJECT && v->type != CK_JSON_ARRAY))
		return 0;
	return v->len;
}

const ck_json_t *ck_json_at(const ck_json_t *v, size_t i)
{
	if (i >= ck_json_len(v))
		return NULL;
	return v->u.m[i].val;
}

const char *ck_json_key(const ck_json_t *v, size_t i, size_t *len)
{
	if (v == NULL || v->type != CK_JSON_OBJECT || i >= v->len)
		return NULL;
	if (len != NULL)
		*len = v->u.m[i].klen;
	return v->u.m[i].key;
}

int ck_json_get_string(const ck_json_t *v, const char **s, size_t *len)
{
	if (v == NULL)
		return CK_JSON_EABSENT;
	if (v->type != CK_JSON_STRING)
		return CK_JSON_ETYPE;
	*s = v->u.s;
	if (len != NULL)
		*len = v->len;
	return CK_JSON_OK;
}

const char *ck_json_str(const ck_json_t *v)
{
	return v != NULL && v->type == CK_JSON_STRING ? v->u.s : NULL;
}

int64_t ck_json_int(const ck_json_t *v, int64_t dflt)
{
	int64_t i;
	return ck_json_get_int64(v, &i) == CK_JSON_OK ? i : dflt;
}

int ck_json_get_int64(const ck_json_t *v, int64_t *out)
{
	if (v == NULL)
		return CK_JSON_EABSENT;
	if (v->type != CK_JSON_NUMBER)
		return CK_JSON_ETYPE;
	switch (ck_codec_i_parse_int(v->u.s, strlen(v->u.s), out)) {
	case CK_CODEC_INT_OK:
		return CK_JSON_OK;
	case CK_CODEC_INT_RANGE:
		return CK_JSON_ERANGE;
	default:
		return CK_JSON_ETYPE;
	}
}

int ck_json_get_double(const ck_json_t *v, double *out)
{
	if (v == NULL)
		return CK_JSON_EABSENT;
	if (v->type != CK_JSON_NUMBER)
		return CK_JSON_ETYPE;
	errno = 0;
	double d = strtod(v->u.s, NULL);
	/* ERANGE is also set on underflow, where the result (0 or tiny) is fine. */
	if (isinf(d))
		return CK_JSON_ERANGE;
	*out = d;
	return CK_JSON_OK;
}

int ck_json_get_bool(const ck_json_t *v, bool *out)
{
	if (v == NULL)
		return CK_JSON_EABSENT;
	if (v->type != CK_JSON_BOOL)
		return CK_JSON_ETYPE;
	*out = v->b;
	return CK_JSON_OK;
}

int ck_json_get_number_text(const ck_json_t *v, const char **text)
{
	if (v == NULL)
		return CK_JSON_EABSENT;
	if (v->type != CK_JSON_NUMBER)
		return CK_JSON_ETYPE;
	*text = v->u.s;
	return CK_JSON_OK;
}

bool ck_json_is_null(const ck_json_t *v)
{
	return v != NULL && v->type == CK_JSON_NULL;
}

/* ---- writing, in the decoder's capture form ---- */

/* Recursion is bounded: a parsed document nests at most CK_JSON_MAX_DEPTH deep. */
static void write_node(const ck_json_t *v, ck_sbuf_t *out)
{
	switch (v->type) {
	case CK_JSON_NULL:
		ck_sbuf_append(out, "null", 4);
		break;
	case CK_JSON_BOOL:
		ck_sbuf_puts(out, v->b ? "true" : "false");
		break;
	case CK_JSON_NUMBER:
		ck_sbuf_append(out, v->u.s, v->len);
		break;
	case CK_JSON_STRING:
		ck_sbuf_put_json_strn(out, v->u.s, v->len);
		break;
	case CK_JSON_ARRAY:
	case CK_JSON_OBJECT: {
		bool obj = v->type == CK_JSON_OBJECT;
		ck_sbuf_putc(out, obj ? '{' : '[');
		for (size_t i = 0; i < v->len; i++) {
			if (i > 0)
				ck_sbuf_putc(out, ',');
			if (obj) {
				ck_sbuf_put_json_strn(out, v->u.m[i].key, v->u.m[i].klen);
				ck_sbuf_putc(out, ':');
			}
			write_node(v->u.m[i].val, out);
		}
		ck_sbuf_putc(out, obj ? '}' : ']');
		break;
	}
	case CK_JSON_ABSENT:
	default:
		break;
	}
}

int ck_json_write(const ck_json_t *v, ck_sbuf_t *out)
{
	if (v == NULL)
		return -1;
	write_node(v, out);
	return 0;
}

char *ck_json_to_text(const ck_json_t *v)
{
	if (v == NULL)
		return NULL;
	ck_sbuf_t b = CK_SBUF_INIT;
	write_node(v, &b);
	return ck_sbuf_steal(&b);
}
