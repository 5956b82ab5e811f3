/*
 * patch: a tree of objects whose leaves are compact JSON texts, written out in
 * insertion order.
 *
 * Leaves are serialised when set (strings escaped, raw JSON re-emitted by
 * ck_json_write), so building is a plain walk and costs nothing to repeat.
 * Objects keep their members in an array searched linearly: patch bodies have a
 * handful of keys per level, and insertion order is what makes the output
 * deterministic without sorting.
 */
#include <ckube/patch.h>

#include <ckube/base.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pnode pnode_t;

struct pnode {
	char *key; /* in its parent; NULL for the root */
	size_t klen;
	bool obj;
	char *text; /* a leaf's JSON text */
	size_t tlen;
	size_t depth;   /* a leaf's own nesting (0 for a scalar), for the depth bound */
	pnode_t **kids; /* an object's members, in insertion order */
	size_t nkids, capkids;
};

struct ck_patch {
	pnode_t root;
	char *err;
	const ck_type_t *type; /* set by ck_patch_new_object */
	char *ns, *name;
};

static void node_clear(pnode_t *n)
{
	for (size_t i = 0; i < n->nkids; i++) {
		node_clear(n->kids[i]);
		free(n->kids[i]->key);
		free(n->kids[i]);
	}
	free(n->kids);
	free(n->text);
	n->kids = NULL;
	n->nkids = n->capkids = 0;
	n->text = NULL;
	n->tlen = n->depth = 0;
	n->obj = false;
}

ck_patch_t *ck_patch_new(void)
{
	ck_patch_t *p = ck_xcalloc(1, sizeof(*p));
	p->root.obj = true;
	return p;
}

void ck_patch_free(ck_patch_t *p)
{
	if (p == NULL)
		return;
	node_clear(&p->root);
	free(p->err);
	free(p->ns);
	free(p->name);
	free(p);
}

const char *ck_patch_error(const ck_patch_t *p)
{
	return p->err;
}

/* Records the first error; returns -1. */
static int fail(ck_patch_t *p, const char *fmt, ...) CK_PRINTF(2, 3);
static int fail(ck_patch_t *p, const char *fmt, ...)
{
	if (p->err == NULL) {
		va_list ap;
		va_start(ap, fmt);
		p->err = ck_xvasprintf(fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Strict UTF-8: no overlongs, no surrogates, nothing past U+10FFFF. */
static bool utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i];
		size_t k;
		unsigned lo = 0x80, hi = 0xbf;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			k = 1;
		} else if (c >= 0xe0 && c <= 0xef) {
			k = 2;
			if (c == 0xe0)
				lo = 0xa0;
			else if (c == 0xed)
				hi = 0x9f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 3;
			if (c == 0xf0)
				lo = 0x90;
			else if (c == 0xf4)
				hi = 0x8f;
		} else {
			return false;
		}
		if (n - i - 1 < k)
			return false;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return false;
		for (size_t j = 2; j <= k; j++)
			if (s[i + j] < 0x80 || s[i + j] > 0xbf)
				return false;
		i += k + 1;
	}
	return true;
}

/* "a.b.c" for messages (segments may hold dots: quoted then). */
static char *path_str(const char *const *path, size_t n)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			ck_sbuf_putc(&b, '.');
		if (strpbrk(path[i], ".\"") != NULL || path[i][0] == '\0')
			ck_sbuf_put_json_str(&b, path[i]);
		else
			ck_sbuf_puts(&b, path[i]);
	}
	return ck_sbuf_steal(&b);
}

static size_t path_len(const char *const *path)
{
	size_t n = 0;
	while (path != NULL && path[n] != NULL)
		n++;
	return n;
}

static pnode_t *find_kid(const pnode_t *o, const char *key, size_t klen)
{
	for (size_t i = 0; i < o->nkids; i++)
		if (o->kids[i]->klen == klen && memcmp(o->kids[i]->key, key, klen) == 0)
			return o->kids[i];
	return NULL;
}

/* The member key of o, emptied if it existed (position kept), else appended. */
static pnode_t *fresh_kid(pnode_t *o, const char *key, size_t klen)
{
	pnode_t *k = find_kid(o, key, klen);
	if (k != NULL) {
		node_clear(k);
		return k;
	}
	if (o->nkids == o->capkids) {
		o->capkids = o->capkids ? o->capkids * 2 : 4;
		o->kids = ck_xrealloc(o->kids, o->capkids * sizeof(*o->kids));
	}
	k = ck_xcalloc(1, sizeof(*k));
	/* Not strndup: a key from a parsed document may hold NULs. */
	k->key = ck_xmalloc(klen + 1);
	memcpy(k->key, key, klen);
	k->key[klen] = '\0';
	k->klen = klen;
	o->kids[o->nkids++] = k;
	return k;
}

/*
 * Walks path[0..n-1) from the root, creating objects, and returns the object that
 * holds the last segment; NULL (error recorded) through a non-object, or when the
 * value would sit deeper than the bound allows.
 */
static pnode_t *parent_of(ck_patch_t *p, const char *const *path, size_t n)
{
	pnode_t *o = &p->root;
	for (size_t i = 0; i < n; i++) {
		if (!utf8_valid((const unsigned char *)path[i], strlen(path[i]))) {
			char *ps = path_str(path, i + 1);
			fail(p, "patch: path %s: key is not valid UTF-8", ps);
			free(ps);
			return NULL;
		}
	}
	for (size_t i = 0; i + 1 < n; i++) {
		pnode_t *k = find_kid(o, path[i], strlen(path[i]));
		if (k == NULL) {
			k = fresh_kid(o, path[i], strlen(path[i]));
			k->obj = true;
		} else if (!k->obj) {
			char *ps = path_str(path, n), *pre = path_str(path, i + 1);
			fail(p, "patch: cannot set %s: %s already holds a non-object value", ps,
			     pre);
			free(ps);
			free(pre);
			return NULL;
		}
		o = k;
	}
	return o;
}

/*
 * Bounds the output's nesting as the parsers do (the receiving server has a bound
 * too): the root is level 1, so the object holding a path's last segment is at
 * level n and a container value there reaches level n + its own depth.
 */
static int check_depth(ck_patch_t *p, const char *const *path, size_t n, size_t vdepth)
{
	if (n + vdepth > (size_t)CK_JSON_MAX_DEPTH) {
		char *ps = path_str(path, n);
		fail(p, "patch: %s: the body would nest deeper than %d levels", ps,
		     CK_JSON_MAX_DEPTH);
		free(ps);
		return -1;
	}
	return 0;
}

/* Sets path to the JSON text (taken). */
static int set_text(ck_patch_t *p, const char *const *path, char *text, size_t tlen, size_t depth)
{
	size_t n = path_len(path);
	if (p->err != NULL || n == 0 || check_depth(p, path, n, depth) < 0) {
		if (p->err == NULL)
			fail(p, "patch: empty path");
		free(text);
		return -1;
	}
	pnode_t *o = parent_of(p, path, n);
	if (o == NULL) {
		free(text);
		return -1;
	}
	pnode_t *k = fresh_kid(o, path[n - 1], strlen(path[n - 1]));
	k->text = text;
	k->tlen = tlen;
	k->depth = depth;
	return 0;
}

int ck_patch_set_stringn(ck_patch_t *p, const char *const *path, const char *s, size_t len)
{
	if (p->err == NULL && !utf8_valid((const unsigned char *)s, len)) {
		char *ps = path_str(path, path_len(path));
		fail(p, "patch: %s: value is not valid UTF-8", ps);
		free(ps);
	}
	if (p->err != NULL)
		return -1;
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_put_json_strn(&b, s, len);
	size_t l = b.len;
	return set_text(p, path, ck_sbuf_steal(&b), l, 0);
}

int ck_patch_set_string(ck_patch_t *p, const char *const *path, const char *s)
{
	if (s == NULL)
		return fail(p, "patch: NULL string (use ck_patch_set_null)");
	return ck_patch_set_stringn(p, path, s, strlen(s));
}

int ck_patch_set_int(ck_patch_t *p, const char *const *path, int64_t v)
{
	if (p->err != NULL)
		return -1;
	char *t = ck_xasprintf("%lld", (long long)v);
	return set_text(p, path, t, strlen(t), 0);
}

int ck_patch_set_double(ck_patch_t *p, const char *const *path, double v)
{
	if (p->err != NULL)
		return -1;
	if (!isfinite(v)) {
		char *ps = path_str(path, path_len(path));
		fail(p, "patch: %s: %g is not a JSON number", ps, v);
		free(ps);
		return -1;
	}
	char *t = ck_xasprintf("%.17g", v);
	if (strpbrk(t, ".eE") == NULL) {
		char *t2 = ck_xasprintf("%s.0", t);
		free(t);
		t = t2;
	}
	return set_text(p, path, t, strlen(t), 0);
}

int ck_patch_set_bool(ck_patch_t *p, const char *const *path, bool v)
{
	if (p->err != NULL)
		return -1;
	return set_text(p, path, ck_xstrdup(v ? "true" : "false"), v ? 4 : 5, 0);
}

int ck_patch_set_null(ck_patch_t *p, const char *const *path)
{
	if (p->err != NULL)
		return -1;
	return set_text(p, path, ck_xstrdup("null"), 4, 0);
}

/* Nesting of a parsed node (0 for a scalar); bounded by the parser. */
static size_t json_depth(const ck_json_t *v)
{
	size_t d = 0;
	for (size_t i = 0; i < ck_json_len(v); i++) {
		size_t k = json_depth(ck_json_at(v, i));
		if (k > d)
			d = k;
	}
	ck_json_type_t t = ck_json_type(v);
	return t == CK_JSON_OBJECT || t == CK_JSON_ARRAY ? d + 1 : 0;
}

/* Puts v under o as key: objects become builder objects, the rest leaf text. */
static void put_json(pnode_t *o, const char *key, size_t klen, const ck_json_t *v)
{
	pnode_t *k = fresh_kid(o, key, klen);
	if (ck_json_type(v) == CK_JSON_OBJECT) {
		k->obj = true;
		for (size_t i = 0; i < ck_json_len(v); i++) {
			size_t l;
			const char *mk = ck_json_key(v, i, &l);
			put_json(k, mk, l, ck_json_at(v, i));
		}
		return;
	}
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_json_write(v, &b);
	k->tlen = b.len;
	k->text = ck_sbuf_steal(&b);
	k->depth = json_depth(v);
}

int ck_patch_set_json(ck_patch_t *p, const char *const *path, const ck_json_t *v)
{
	if (p->err != NULL)
		return -1;
	if (v == NULL)
		return fail(p, "patch: absent JSON value");
	size_t n = path_len(path);
	if (n == 0) {
		if (ck_json_type(v) != CK_JSON_OBJECT)
			return fail(p, "patch: only an object can be set at the top level, not %s",
			            ck_json_type_name(ck_json_type(v)));
		if (json_depth(v) > CK_JSON_MAX_DEPTH)
			return fail(p, "patch: the body would nest deeper than %d levels",
			            CK_JSON_MAX_DEPTH);
		for (size_t i = 0; i < ck_json_len(v); i++) {
			size_t l;
			const char *mk = ck_json_key(v, i, &l);
			put_json(&p->root, mk, l, ck_json_at(v, i));
		}
		return 0;
	}
	if (check_depth(p, path, n, json_depth(v)) < 0)
		return -1;
	pnode_t *o = parent_of(p, path, n);
	if (o == NULL)
		return -1;
	put_json(o, path[n - 1], strlen(path[n - 1]), v);
	return 0;
}

int ck_patch_set_raw(ck_patch_t *p, const char *const *path, const char *json, size_t len)
{
	if (p->err != NULL)
		return -1;
	char *err = NULL;
	ck_json_doc_t *d = ck_json_parse(json, len, &err);
	if (d == NULL) {
		char *ps = path_str(path, path_len(path));
		fail(p, "patch: %s: %s", ps[0] ? ps : "(top level)", err);
		free(ps);
		free(err);
		return -1;
	}
	int rc = ck_patch_set_json(p, path, ck_json_root(d));
	ck_json_doc_free(d);
	return rc;
}

/*
 * Appends one element's JSON text (taken) to the array at path, creating it. The
 * array is a leaf like any other, so appending rewrites its closing bracket: a
 * list is built in the order its elements are appended.
 */
static int append_text(ck_patch_t *p, const char *const *path, char *text, size_t tlen,
                       size_t depth)
{
	size_t n = path_len(path);
	if (p->err == NULL && n == 0)
		fail(p, "patch: empty path");
	if (p->err != NULL || check_depth(p, path, n, depth + 1) < 0) {
		free(text);
		return -1;
	}
	pnode_t *o = parent_of(p, path, n);
	if (o == NULL) {
		free(text);
		return -1;
	}
	pnode_t *k = find_kid(o, path[n - 1], strlen(path[n - 1]));
	if (k == NULL) {
		k = fresh_kid(o, path[n - 1], strlen(path[n - 1]));
		k->text = ck_xstrdup("[]");
		k->tlen = 2;
		k->depth = 1;
	} else if (k->obj || k->tlen < 2 || k->text[0] != '[') {
		char *ps = path_str(path, n);
		fail(p, "patch: cannot append to %s: it holds %s, not an array", ps,
		     k->obj ? "an object" : k->text);
		free(ps);
		free(text);
		return -1;
	}
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_append(&b, k->text, k->tlen - 1);
	if (k->tlen > 2)
		ck_sbuf_putc(&b, ',');
	ck_sbuf_append(&b, text, tlen);
	ck_sbuf_putc(&b, ']');
	free(text);
	free(k->text);
	k->tlen = b.len;
	k->text = ck_sbuf_steal(&b);
	if (depth + 1 > k->depth)
		k->depth = depth + 1;
	return 0;
}

/* The nesting of a built object: 1 for {}, deepest leaf's plus its level. */
static size_t obj_depth(const pnode_t *o)
{
	size_t d = 0;
	for (size_t i = 0; i < o->nkids; i++) {
		size_t k = o->kids[i]->obj ? obj_depth(o->kids[i]) : o->kids[i]->depth;
		if (k > d)
			d = k;
	}
	return d + 1;
}

int ck_patch_append(ck_patch_t *p, const char *const *path, ck_patch_t *item)
{
	if (item == NULL)
		return fail(p, "patch: NULL element to append");
	if (p->err == NULL && item->err != NULL)
		fail(p, "%s", item->err);
	if (p->err != NULL) {
		ck_patch_free(item);
		return -1;
	}
	size_t depth = obj_depth(&item->root), len = 0;
	char *text = ck_patch_build(item, &len, NULL);
	ck_patch_free(item);
	return append_text(p, path, text, len, depth);
}

int ck_patch_append_string(ck_patch_t *p, const char *const *path, const char *s)
{
	if (s == NULL)
		return fail(p, "patch: NULL string to append");
	if (p->err == NULL && !utf8_valid((const unsigned char *)s, strlen(s))) {
		char *ps = path_str(path, path_len(path));
		fail(p, "patch: %s: value is not valid UTF-8", ps);
		free(ps);
	}
	if (p->err != NULL)
		return -1;
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_put_json_str(&b, s);
	size_t l = b.len;
	return append_text(p, path, ck_sbuf_steal(&b), l, 0);
}

const ck_type_t *ck_patch_object_type(const ck_patch_t *p)
{
	return p->type;
}

const char *ck_patch_object_ns(const ck_patch_t *p)
{
	return p->ns;
}

const char *ck_patch_object_name(const ck_patch_t *p)
{
	return p->name;
}

ck_patch_t *ck_patch_new_object(const ck_type_t *t, const char *ns, const char *name)
{
	ck_patch_t *p = ck_patch_new();
	p->type = t;
	char av[256];
	size_t n = ck_type_api_version(t, av, sizeof(av));
	if (n >= sizeof(av)) {
		fail(p, "patch: apiVersion of %s too long", t->kind);
		return p;
	}
	ck_patch_set_string(p, CK_PATH("apiVersion"), av);
	ck_patch_set_string(p, CK_PATH("kind"), t->kind);
	if (name != NULL && name[0] != '\0') {
		p->name = ck_xstrdup(name);
		ck_patch_set_string(p, CK_PATH("metadata", "name"), name);
	}
	if (ns != NULL && ns[0] != '\0') {
		if (!t->namespaced) {
			fail(p, "patch: %s is cluster-scoped, yet namespace %s was given", t->kind,
			     ns);
			return p;
		}
		p->ns = ck_xstrdup(ns);
		ck_patch_set_string(p, CK_PATH("metadata", "namespace"), ns);
	}
	return p;
}

/* Recursion is bounded by check_depth: at most CK_JSON_MAX_DEPTH levels. */
static void write_obj(const pnode_t *o, ck_sbuf_t *b)
{
	ck_sbuf_putc(b, '{');
	for (size_t i = 0; i < o->nkids; i++) {
		const pnode_t *k = o->kids[i];
		if (i > 0)
			ck_sbuf_putc(b, ',');
		ck_sbuf_put_json_strn(b, k->key, k->klen);
		ck_sbuf_putc(b, ':');
		if (k->obj)
			write_obj(k, b);
		else
			ck_sbuf_append(b, k->text, k->tlen);
	}
	ck_sbuf_putc(b, '}');
}

char *ck_patch_build(const ck_patch_t *p, size_t *len, char **err)
{
	if (p->err != NULL) {
		ck_err_set(err, "%s", p->err);
		return NULL;
	}
	ck_sbuf_t b = CK_SBUF_INIT;
	write_obj(&p->root, &b);
	if (len != NULL)
		*len = b.len;
	return ck_sbuf_steal(&b);
}

/* ---- sending ---- */

static int refuse(ck_result_t *res, const char *what, const char *msg)
{
	if (res->error == NULL)
		res->error = ck_xasprintf("%s: %s (not sent)", what, msg);
	return -1;
}

int ck_client_merge_patch_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                               const ck_patch_t *patch, const ck_write_opts_t *o, ck_result_t *res)
{
	char *err = NULL;
	char *body = ck_patch_build(patch, NULL, &err);
	if (body == NULL) {
		refuse(res, "merge patch", err);
		free(err);
		return -1;
	}
	int rc = ck_client_patch_sync(c, t, ns, name, CK_PATCH_MERGE, body, o, res);
	free(body);
	return rc;
}

/* The checks the helpers that send a whole object share. */
static int object_body(const ck_patch_t *body, const char *what, bool need_name, ck_result_t *res,
                       char **out)
{
	if (body->type == NULL)
		return refuse(res, what, "the body was not made by ck_patch_new_object");
	if (need_name && body->name == NULL)
		return refuse(res, what, "the body has no metadata.name");
	if (body->type->namespaced && body->ns == NULL)
		return refuse(res, what, "the body of a namespaced kind has no metadata.namespace");
	char *err = NULL;
	*out = ck_patch_build(body, NULL, &err);
	if (*out == NULL) {
		refuse(res, what, err);
		free(err);
		return -1;
	}
	return 0;
}

/* A PATCH of text to t/ns/name, or to its status subresource when sub is "status". */
static int patch_sub(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                     const char *sub, ck_patch_type_t pt, const char *text,
                     const ck_write_opts_t *o, ck_result_t *res)
{
	return sub == NULL ? ck_client_patch_sync(c, t, ns, name, pt, text, o, res)
	                   : ck_client_patch_status_sync(c, t, ns, name, pt, text, o, res);
}

int ck_client_status_merge_patch_sync(ck_client_t *c, const ck_type_t *t, const char *ns,
                                      const char *name, const ck_patch_t *patch,
                                      const ck_write_opts_t *o, ck_result_t *res)
{
	char *err = NULL;
	char *body = ck_patch_build(patch, NULL, &err);
	if (body == NULL) {
		refuse(res, "status merge patch", err);
		free(err);
		return -1;
	}
	int rc = patch_sub(c, t, ns, name, "status", CK_PATCH_MERGE, body, o, res);
	free(body);
	return rc;
}

static int apply_to(ck_client_t *c, const ck_patch_t *body, const char *sub, const char *what,
                    const char *field_manager, bool force, ck_result_t *res)
{
	if (field_manager == NULL || field_manager[0] == '\0')
		return refuse(
		    res, what,
		    "a field manager is required (the server rejects an apply without one)");
	char *text = NULL;
	if (object_body(body, what, true, res, &text) < 0)
		return -1;
	ck_write_opts_t wo = {.field_manager = field_manager, .force = force};
	int rc =
	    patch_sub(c, body->type, body->ns, body->name, sub, CK_PATCH_APPLY, text, &wo, res);
	free(text);
	return rc;
}

int ck_client_apply_sync(ck_client_t *c, const ck_patch_t *body, const char *field_manager,
                         bool force, ck_result_t *res)
{
	return apply_to(c, body, NULL, "server-side apply", field_manager, force, res);
}

int ck_client_status_apply_sync(ck_client_t *c, const ck_patch_t *body, const char *field_manager,
                                bool force, ck_result_t *res)
{
	return apply_to(c, body, "status", "status server-side apply", field_manager, force, res);
}

int ck_client_create_body_sync(ck_client_t *c, const ck_patch_t *body, const ck_write_opts_t *o,
                               ck_result_t *res)
{
	char *text = NULL;
	if (object_body(body, "create", false, res, &text) < 0)
		return -1;
	int rc = ck_client_create_sync(c, body->type, body->ns, text, o, res);
	free(text);
	return rc;
}

int ck_client_update_body_sync(ck_client_t *c, const ck_patch_t *body, const ck_write_opts_t *o,
                               ck_result_t *res)
{
	char *text = NULL;
	if (object_body(body, "update", true, res, &text) < 0)
		return -1;
	int rc = ck_client_update_sync(c, body->type, body->ns, body->name, text, o, res);
	free(text);
	return rc;
}
