/*
 * server: what one request means to the fake API server -- its URL and query,
 * then GET, LIST, CREATE, UPDATE, PATCH (merge, apply) and DELETE on the stored
 * objects, answered as the API server answers: the object, a list, or a
 * metav1.Status worded as the server words it. Watches are set up by
 * transport.c from the same parsed request.
 *
 * Design note. Every write ends in write_object(): the one place that decides
 * what of a body the server keeps (its own metadata fields, the status of the
 * main resource or the rest of a /status write), bumps generation, drops a
 * no-op, and completes a deletion whose last finalizer went. Objects are built
 * with the patch builder of <ckube/patch.h> and merged with <ckube/json.h>'s
 * merge patch: no JSON is assembled by hand here.
 */
#include "pkg/fake/fake_internal.h"

#include <ckube/patch.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- parsing */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A new string: s[0..n) with %XX decoded ('+' is a space in a query). */
static char *unescape(const char *s, size_t n, bool query)
{
	char *out = ck_xmalloc(n + 1);
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			out[j++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else if (query && s[i] == '+') {
			out[j++] = ' ';
		} else {
			out[j++] = s[i];
		}
	}
	out[j] = '\0';
	return out;
}

void fake_freq_clear(freq_t *q)
{
	free(q->group);
	free(q->version);
	free(q->resource);
	free(q->ns);
	free(q->name);
	free(q->sub);
	free(q->label_sel);
	free(q->field_sel);
	free(q->rv);
	free(q->rv_match);
	free(q->cont);
	free(q->field_manager);
	free(q->query);
	memset(q, 0, sizeof(*q));
}

static const char *verb_of(const freq_t *q)
{
	const char *m = q->method;
	if (strcmp(m, "GET") == 0)
		return q->watch ? "watch" : q->name ? "get" : "list";
	if (strcmp(m, "POST") == 0)
		return "create";
	if (strcmp(m, "PUT") == 0)
		return "update";
	if (strcmp(m, "PATCH") == 0)
		return "patch";
	if (strcmp(m, "DELETE") == 0)
		return q->name ? "delete" : "deletecollection";
	return "unknown";
}

static int parse_query(freq_t *q, const char *query, fans_t *a)
{
	q->query = ck_xstrdup(query ? query : "");
	const char *p = q->query;
	while (*p != '\0') {
		const char *amp = strchr(p, '&');
		size_t n = amp ? (size_t)(amp - p) : strlen(p);
		const char *eq = memchr(p, '=', n);
		char *k = unescape(p, eq ? (size_t)(eq - p) : n, true);
		char *v = eq ? unescape(eq + 1, n - (size_t)(eq + 1 - p), true) : ck_xstrdup("");
		char **slot = NULL;
		if (strcmp(k, "labelSelector") == 0)
			slot = &q->label_sel;
		else if (strcmp(k, "fieldSelector") == 0)
			slot = &q->field_sel;
		else if (strcmp(k, "resourceVersion") == 0)
			slot = &q->rv;
		else if (strcmp(k, "resourceVersionMatch") == 0)
			slot = &q->rv_match;
		else if (strcmp(k, "continue") == 0)
			slot = &q->cont;
		else if (strcmp(k, "fieldManager") == 0)
			slot = &q->field_manager;
		else if (strcmp(k, "limit") == 0)
			q->limit = strtoll(v, NULL, 10);
		else if (strcmp(k, "timeoutSeconds") == 0)
			q->timeout_s = strtoll(v, NULL, 10);
		else if (strcmp(k, "watch") == 0)
			q->watch = strcmp(v, "true") == 0 || strcmp(v, "1") == 0;
		else if (strcmp(k, "allowWatchBookmarks") == 0)
			q->bookmarks = strcmp(v, "true") == 0;
		else if (strcmp(k, "sendInitialEvents") == 0)
			q->send_initial = strcmp(v, "true") == 0;
		else if (strcmp(k, "force") == 0)
			q->force = strcmp(v, "true") == 0;
		else if (strcmp(k, "dryRun") == 0)
			q->dry_run = v[0] != '\0';
		if (slot != NULL) {
			free(*slot);
			*slot = v;
			v = NULL;
		}
		free(k);
		free(v);
		p += n;
		if (*p == '&')
			p++;
	}
	if (q->dry_run) {
		fake_status(a, 400, "BadRequest",
		            "dryRun is not modelled by the fake API server (<ckube/fake.h>)", NULL,
		            NULL);
		return -1;
	}
	return 0;
}

int fake_parse(ck_fake_t *f, const char *method, const char *path, const char *query, freq_t *q,
               fans_t *a)
{
	(void)f;
	q->method = method;
	/* Up to 8 segments: api/v1/namespaces/ns/res/name/sub, apis/g/v/... */
	char *seg[9] = {0};
	size_t n = 0;
	const char *p = path;
	while (*p == '/')
		p++;
	while (*p != '\0' && n < 9) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		seg[n++] = unescape(p, len, false);
		p += len;
		while (*p == '/')
			p++;
	}
	int rc = -1;
	size_t i = 0;
	if (*p != '\0' || n < 3)
		goto bad;
	if (strcmp(seg[0], "api") == 0) {
		q->group = ck_xstrdup("");
		q->version = ck_xstrdup(seg[1]);
		i = 2;
	} else if (strcmp(seg[0], "apis") == 0 && n >= 4) {
		q->group = ck_xstrdup(seg[1]);
		q->version = ck_xstrdup(seg[2]);
		i = 3;
	} else {
		goto bad;
	}
	size_t rest = n - i;
	/* namespaces/<ns>/<resource>..., except a namespace's own subresources. */
	if (strcmp(seg[i], "namespaces") == 0 && rest >= 3 &&
	    !(rest == 3 &&
	      (strcmp(seg[i + 2], "status") == 0 || strcmp(seg[i + 2], "finalize") == 0))) {
		q->ns = ck_xstrdup(seg[i + 1]);
		i += 2;
		rest -= 2;
	} else {
		q->ns = ck_xstrdup("");
	}
	if (rest < 1 || rest > 3)
		goto bad;
	q->resource = ck_xstrdup(seg[i]);
	q->name = rest >= 2 ? ck_xstrdup(seg[i + 1]) : NULL;
	q->sub = rest >= 3 ? ck_xstrdup(seg[i + 2]) : NULL;
	if (q->sub != NULL && strcmp(q->sub, "status") != 0) {
		char *msg =
		    ck_xasprintf("the subresource %s is not modelled by the fake API server "
		                 "(<ckube/fake.h>): only status is",
		                 q->sub);
		fake_status(a, 404, "NotFound", msg, NULL, NULL);
		free(msg);
		goto out;
	}
	if (parse_query(q, query, a) < 0)
		goto out;
	q->verb = verb_of(q);
	rc = 0;
	goto out;
bad:
	fake_status(a, 404, "NotFound",
	            "the server could not find the requested resource (the fake API server "
	            "serves resource URLs only)",
	            NULL, NULL);
out:
	for (size_t k = 0; k < n; k++)
		free(seg[k]);
	return rc;
}

/* ---------------------------------------------------------------- answers */

char *fake_api_version(const fres_t *r)
{
	return r->group[0] ? ck_xasprintf("%s/%s", r->group, r->version) : ck_xstrdup(r->version);
}

const char *fake_obj_kind(const fres_t *r)
{
	return r->kind;
}

/* "configmaps" or "foos.samplecontroller.k8s.io": the server's qualified resource. */
static char *qualified(const fres_t *r)
{
	return r->group[0] ? ck_xasprintf("%s.%s", r->resource, r->group) : ck_xstrdup(r->resource);
}

/* A Status; details (name, group, kind) only when kind is not NULL. */
static void status_details(fans_t *a, int code, const char *reason, const char *message,
                           const char *group, const char *kind, const char *name)
{
	a->code = code;
	ck_sbuf_reset(&a->body);
	ck_sbuf_t *b = &a->body;
	ck_sbuf_puts(b, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":");
	ck_sbuf_put_json_str(b, code >= 200 && code < 300 ? "Success" : "Failure");
	ck_sbuf_puts(b, ",\"message\":");
	ck_sbuf_put_json_str(b, message);
	ck_sbuf_puts(b, ",\"reason\":");
	ck_sbuf_put_json_str(b, reason);
	if (kind != NULL) {
		ck_sbuf_puts(b, ",\"details\":{");
		if (name != NULL) {
			ck_sbuf_puts(b, "\"name\":");
			ck_sbuf_put_json_str(b, name);
			ck_sbuf_putc(b, ',');
		}
		if (group != NULL && group[0]) {
			ck_sbuf_puts(b, "\"group\":");
			ck_sbuf_put_json_str(b, group);
			ck_sbuf_putc(b, ',');
		}
		ck_sbuf_puts(b, "\"kind\":");
		ck_sbuf_put_json_str(b, kind);
		ck_sbuf_putc(b, '}');
	}
	ck_sbuf_printf(b, ",\"code\":%d}", code);
}

void fake_status(fans_t *a, int code, const char *reason, const char *message, const fres_t *r,
                 const char *name)
{
	status_details(a, code, reason, message, r ? r->group : NULL, r ? r->resource : NULL, name);
}

static void not_found(fans_t *a, const fres_t *r, const char *name)
{
	char *qr = qualified(r);
	char *msg = ck_xasprintf("%s \"%s\" not found", qr, name);
	fake_status(a, 404, "NotFound", msg, r, name);
	free(msg);
	free(qr);
}

static void conflict(fans_t *a, const fres_t *r, const char *name, const char *why)
{
	char *qr = qualified(r);
	char *msg = ck_xasprintf("Operation cannot be fulfilled on %s \"%s\": %s", qr, name, why);
	fake_status(a, 409, "Conflict", msg, r, name);
	free(msg);
	free(qr);
}

/*
 * A failed delete precondition. The server checks them in its registry, which
 * names the kind rather than the resource: "Operation cannot be fulfilled on
 * ConfigMap \"a\": ...", details.kind "ConfigMap".
 */
static void precondition_failed(fans_t *a, const fres_t *r, const char *name, const char *why)
{
	const char *kind = r->kind[0] ? r->kind : r->resource;
	char *qk = r->group[0] ? ck_xasprintf("%s.%s", kind, r->group) : ck_xstrdup(kind);
	char *msg = ck_xasprintf("Operation cannot be fulfilled on %s \"%s\": %s", qk, name, why);
	status_details(a, 409, "Conflict", msg, r->group, kind, name);
	free(msg);
	free(qk);
}

/* 422 Invalid with one cause, as the server's NewInvalid words it: the message
 * names the qualified kind ("Widget.example.com \"w\" is invalid: ..."). */
static void invalid(fans_t *a, const char *group, const char *kind, const char *name,
                    const char *field, const char *cause, const char *detail)
{
	char *msg = ck_xasprintf("%s%s%s \"%s\" is invalid: %s: %s", kind, group[0] ? "." : "",
	                         group, name, field, detail);
	a->code = 422;
	ck_sbuf_reset(&a->body);
	ck_sbuf_t *b = &a->body;
	ck_sbuf_puts(b, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
	                "\"status\":\"Failure\",\"message\":");
	ck_sbuf_put_json_str(b, msg);
	ck_sbuf_puts(b, ",\"reason\":\"Invalid\",\"details\":{\"name\":");
	ck_sbuf_put_json_str(b, name);
	if (group[0]) {
		ck_sbuf_puts(b, ",\"group\":");
		ck_sbuf_put_json_str(b, group);
	}
	ck_sbuf_puts(b, ",\"kind\":");
	ck_sbuf_put_json_str(b, kind);
	ck_sbuf_puts(b, ",\"causes\":[{\"reason\":");
	ck_sbuf_put_json_str(b, cause);
	ck_sbuf_puts(b, ",\"message\":");
	ck_sbuf_put_json_str(b, detail);
	ck_sbuf_puts(b, ",\"field\":");
	ck_sbuf_put_json_str(b, field);
	ck_sbuf_puts(b, "}]},\"code\":422}");
	free(msg);
}

static void answer_text(fans_t *a, int code, const char *json)
{
	a->code = code;
	ck_sbuf_reset(&a->body);
	ck_sbuf_puts(&a->body, json);
}

/* ---------------------------------------------------------------- selectors */

/* The minimal descriptor a selector needs: labels only. */
static const ck_type_t label_type = {"", "v1", "Object", "objects", true, NULL, 0, false};

int fake_check_field_sel(const char *field_sel, fans_t *a)
{
	if (field_sel == NULL || field_sel[0] == '\0')
		return 0;
	char *copy = ck_xstrdup(field_sel);
	int rc = 0;
	for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		size_t k = strcspn(tok, "=!");
		if (!((k == 13 && strncmp(tok, "metadata.name", 13) == 0) ||
		      (k == 18 && strncmp(tok, "metadata.namespace", 18) == 0))) {
			char *msg =
			    ck_xasprintf("field label not supported: %.*s (the fake API "
			                 "server models metadata.name and metadata.namespace)",
			                 (int)k, tok);
			fake_status(a, 400, "BadRequest", msg, NULL, NULL);
			free(msg);
			rc = -1;
			break;
		}
	}
	free(copy);
	return rc;
}

static bool field_matches(const char *field_sel, const char *ns, const char *name)
{
	if (field_sel == NULL || field_sel[0] == '\0')
		return true;
	char *copy = ck_xstrdup(field_sel);
	bool ok = true;
	for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok != NULL && ok;
	     tok = strtok_r(NULL, ",", &save)) {
		size_t k = strcspn(tok, "=!");
		const char *have = (k == 13) ? name : ns;
		const char *op = tok + k;
		bool neg = op[0] == '!';
		const char *v = op + (neg ? 2 : (op[1] == '=' ? 2 : 1));
		bool eq = strcmp(have, v) == 0;
		ok = neg ? !eq : eq;
	}
	free(copy);
	return ok;
}

bool fake_selected(const ck_cache_selector_t *sel, const char *field_sel, const char *ns,
                   const char *name, const char *json)
{
	if (!field_matches(field_sel, ns, name))
		return false;
	if (sel == NULL)
		return true;
	ck_obj_t *o = ck_dec_object(&label_type, json, strlen(json), NULL);
	bool ok = o != NULL && ck_cache_selector_matches(sel, o);
	ck_obj_unref(o);
	return ok;
}

/* ---------------------------------------------------------------- objects */

typedef struct meta {
	const char *name, *ns, *uid, *created, *deleted;
	uint64_t rv;
	int64_t generation;
} meta_t;

/*
 * The object to store: body's members, its status replaced by status_from's
 * (when take_status; absent there = none), and the server's metadata fields.
 */
static char *build_obj(const fres_t *r, const ck_json_t *body, bool take_status,
                       const ck_json_t *status_from, const meta_t *m)
{
	ck_patch_t *p = ck_patch_new();
	if (!ck_json_member(body, "apiVersion", 10)) {
		char *av = fake_api_version(r);
		ck_patch_set_string(p, CK_PATH("apiVersion"), av);
		free(av);
	}
	if (!ck_json_member(body, "kind", 4) && r->kind[0])
		ck_patch_set_string(p, CK_PATH("kind"), r->kind);
	for (size_t i = 0; i < ck_json_len(body); i++) {
		const char *k = ck_json_key(body, i, NULL);
		if (take_status && strcmp(k, "status") == 0)
			continue;
		ck_patch_set_json(p, CK_PATH(k), ck_json_at(body, i));
	}
	const ck_json_t *st = ck_json_member(status_from, "status", 6);
	if (take_status && st != NULL)
		ck_patch_set_json(p, CK_PATH("status"), st);
	ck_patch_set_string(p, CK_PATH("metadata", "name"), m->name);
	if (m->ns[0])
		ck_patch_set_string(p, CK_PATH("metadata", "namespace"), m->ns);
	ck_patch_set_string(p, CK_PATH("metadata", "uid"), m->uid);
	char rv[24];
	snprintf(rv, sizeof(rv), "%" PRIu64, m->rv);
	ck_patch_set_string(p, CK_PATH("metadata", "resourceVersion"), rv);
	if (r->generation)
		ck_patch_set_int(p, CK_PATH("metadata", "generation"), m->generation);
	ck_patch_set_string(p, CK_PATH("metadata", "creationTimestamp"), m->created);
	if (m->deleted != NULL) {
		ck_patch_set_string(p, CK_PATH("metadata", "deletionTimestamp"), m->deleted);
		ck_patch_set_int(p, CK_PATH("metadata", "deletionGracePeriodSeconds"), 0);
	}
	char *err = NULL;
	char *out = ck_patch_build(p, NULL, &err);
	if (out == NULL)
		ck_fatal("fake: building an object: %s", err ? err : "?");
	ck_patch_free(p);
	return out;
}

static const char *meta_str(const ck_json_t *root, const char *field)
{
	const char *s = ck_json_str(ck_json_get(root, CK_PATH("metadata", field)));
	return s ? s : "";
}

static bool has_finalizers(const ck_json_t *root)
{
	return ck_json_len(ck_json_get(root, CK_PATH("metadata", "finalizers"))) > 0;
}

/* true when something outside metadata and status differs. */
static bool spec_changed(const ck_json_t *a, const ck_json_t *b)
{
	for (int pass = 0; pass < 2; pass++) {
		const ck_json_t *x = pass ? b : a, *y = pass ? a : b;
		for (size_t i = 0; i < ck_json_len(x); i++) {
			size_t kl = 0;
			const char *k = ck_json_key(x, i, &kl);
			if (strcmp(k, "metadata") == 0 || strcmp(k, "status") == 0 ||
			    strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0)
				continue;
			if (!ck_json_equal(ck_json_at(x, i), ck_json_member(y, k, kl)))
				return true;
		}
	}
	return false;
}

static ck_json_doc_t *parse_body(const freq_t *q, const fres_t *r, fans_t *a)
{
	char *err = NULL;
	ck_json_doc_t *d = ck_json_parse(q->body ? q->body : "", q->body_len, &err);
	if (d != NULL && ck_json_type(ck_json_root(d)) != CK_JSON_OBJECT) {
		ck_json_doc_free(d);
		d = NULL;
		err = ck_xstrdup("not a JSON object");
	}
	if (d == NULL) {
		char *msg = ck_xasprintf("the body of the request is not a JSON object: %s",
		                         err ? err : "?");
		fake_status(a, 400, "BadRequest", msg, NULL, NULL);
		free(msg);
	}
	free(err);
	return d;
}

static void learn_kind(fres_t *r, const ck_json_t *body)
{
	const char *k = ck_json_str(ck_json_member(body, "kind", 4));
	if (r->kind[0] == '\0' && k != NULL && k[0] != '\0') {
		free(r->kind);
		r->kind = ck_xstrdup(k);
	}
}

static void delete_obj(ck_fake_t *f, fres_t *r, fobj_t *o, bool gc, fans_t *a);

/* Deletes, in every resource, the objects an ownerReference ties to uid. */
static void collect_garbage(ck_fake_t *f, const char *uid)
{
	for (size_t i = 0; i < f->nres; i++) {
		fres_t *r = f->res[i];
		for (size_t j = 0; j < r->n;) {
			fobj_t *o = r->objs[j];
			const ck_json_t *refs = ck_json_get(ck_json_root(o->doc),
			                                    CK_PATH("metadata", "ownerReferences"));
			bool owned = false;
			for (size_t k = 0; k < ck_json_len(refs) && !owned; k++) {
				const char *u =
				    ck_json_str(ck_json_get(ck_json_at(refs, k), CK_PATH("uid")));
				owned = u != NULL && strcmp(u, uid) == 0;
			}
			size_t before = r->n;
			if (owned &&
			    ck_json_get(ck_json_root(o->doc),
			                CK_PATH("metadata", "deletionTimestamp")) == NULL) {
				fans_t ignored = {0};
				delete_obj(f, r, o, true, &ignored);
				ck_sbuf_free(&ignored.body);
			}
			if (r->n == before)
				j++;
		}
	}
}

/* Removes o for good (its last finalizer went, or it had none): DELETED; with gc
 * (and the fake's opts.gc) its dependents go too. */
static void remove_obj(ck_fake_t *f, fres_t *r, fobj_t *o, const ck_json_t *last, bool gc,
                       fans_t *a)
{
	const ck_json_t *root = last ? last : ck_json_root(o->doc);
	char *uid = ck_xstrdup(meta_str(root, "uid"));
	f->rv++;
	ck_json_doc_t *rvp = NULL;
	char patch[64];
	snprintf(patch, sizeof(patch), "{\"metadata\":{\"resourceVersion\":\"%" PRIu64 "\"}}",
	         f->rv);
	rvp = ck_json_parse(patch, strlen(patch), NULL);
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_json_merge_patch(root, ck_json_root(rvp), &b);
	ck_json_doc_free(rvp);
	answer_text(a, 200, ck_sbuf_cstr(&b));
	fake_remove(f, r, o, ck_sbuf_steal(&b));
	if (f->gc && gc)
		collect_garbage(f, uid);
	free(uid);
}

static void delete_obj(ck_fake_t *f, fres_t *r, fobj_t *o, bool gc, fans_t *a)
{
	const ck_json_t *root = ck_json_root(o->doc);
	if (!has_finalizers(root)) {
		remove_obj(f, r, o, NULL, gc, a);
		return;
	}
	if (ck_json_get(root, CK_PATH("metadata", "deletionTimestamp")) != NULL) {
		answer_text(a, 200, o->json); /* already being deleted */
		return;
	}
	char *now = fake_now(f);
	int64_t gen = 0;
	ck_json_get_int64(ck_json_get(root, CK_PATH("metadata", "generation")), &gen);
	meta_t m = {o->name, o->ns, meta_str(root, "uid"), meta_str(root, "creationTimestamp"), now,
	            ++f->rv, gen};
	char *json = build_obj(r, root, false, NULL, &m);
	answer_text(a, 200, json);
	fake_commit(f, r, o, json, CK_WATCH_MODIFIED);
	free(now);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether new (being written over old, an object being deleted) adds finalizers
 * old did not have: the server refuses that (ValidateObjectMetaUpdate), naming
 * them sorted, as Go's %#v prints a set's list; so does this, answering into a. */
static bool new_finalizers(fans_t *a, const fres_t *r, const char *name, const ck_json_t *oroot,
                           const ck_json_t *nroot)
{
	const ck_json_t *of = ck_json_get(oroot, CK_PATH("metadata", "finalizers"));
	const ck_json_t *nf = ck_json_get(nroot, CK_PATH("metadata", "finalizers"));
	size_t n = 0;
	const char **extra = ck_xcalloc(ck_json_len(nf) + 1, sizeof(*extra));
	for (size_t i = 0; i < ck_json_len(nf); i++) {
		const ck_json_t *v = ck_json_at(nf, i);
		bool known = ck_json_str(v) == NULL;
		for (size_t j = 0; j < ck_json_len(of) && !known; j++)
			known = ck_json_equal(v, ck_json_at(of, j));
		for (size_t j = 0; j < n && !known; j++)
			known = strcmp(ck_json_str(v), extra[j]) == 0; /* a set: named once */
		if (!known)
			extra[n++] = ck_json_str(v);
	}
	if (n > 0) {
		qsort(extra, n, sizeof(*extra), cmp_str);
		ck_sbuf_t why = CK_SBUF_INIT;
		ck_sbuf_puts(&why,
		             "Forbidden: no new finalizers can be added if the object is being "
		             "deleted, found new finalizers []string{");
		for (size_t i = 0; i < n; i++) {
			ck_sbuf_puts(&why, i ? ", " : "");
			ck_sbuf_put_json_str(&why, extra[i]);
		}
		ck_sbuf_putc(&why, '}');
		invalid(a, r->group, r->kind[0] ? r->kind : r->resource, name,
		        "metadata.finalizers", "FieldValueForbidden", ck_sbuf_cstr(&why));
		ck_sbuf_free(&why);
	}
	free(extra);
	return n > 0;
}

/*
 * Stores body as the new state of old (which exists): what an UPDATE, a PATCH and
 * an apply all end in. sub is "status" or NULL.
 */
static void write_object(ck_fake_t *f, fres_t *r, fobj_t *old, const ck_json_t *body,
                         const char *sub, fans_t *a)
{
	const ck_json_t *oroot = ck_json_root(old->doc);
	const ck_json_t *base = body;
	bool take_status = false;
	const ck_json_t *status_from = NULL;
	if (sub != NULL) {
		base = oroot; /* a /status write changes the status alone */
		take_status = true;
		status_from = body;
	} else if (r->status_sub) {
		take_status = true; /* the main resource keeps the stored status */
		status_from = oroot;
	}
	int64_t gen = 0;
	ck_json_get_int64(ck_json_get(oroot, CK_PATH("metadata", "generation")), &gen);
	const char *deleted =
	    ck_json_str(ck_json_get(oroot, CK_PATH("metadata", "deletionTimestamp")));
	meta_t m = {old->name,
	            old->ns,
	            meta_str(oroot, "uid"),
	            meta_str(oroot, "creationTimestamp"),
	            deleted,
	            old->rv,
	            gen};
	char *json = build_obj(r, base, take_status, status_from, &m);
	ck_json_doc_t *nd = ck_json_parse(json, strlen(json), NULL);
	const ck_json_t *nroot = ck_json_root(nd);
	if (ck_json_equal(nroot, oroot)) {
		/* Nothing changed: no new resourceVersion, no event, as the server. */
		answer_text(a, 200, old->json);
		goto out;
	}
	if (deleted != NULL && new_finalizers(a, r, old->name, oroot, nroot))
		goto out;
	if (deleted != NULL && !has_finalizers(nroot)) {
		remove_obj(f, r, old, nroot, true, a);
		goto out;
	}
	m.generation = gen + (spec_changed(oroot, nroot) ? 1 : 0);
	m.rv = ++f->rv;
	free(json);
	json = build_obj(r, base, take_status, status_from, &m);
	answer_text(a, 200, json);
	fake_commit(f, r, old, json, CK_WATCH_MODIFIED);
	json = NULL;
out:
	free(json);
	ck_json_doc_free(nd);
}

/* The next generateName suffix: 5 characters of the API server's alphabet. */
static void gen_suffix(ck_fake_t *f, char out[6])
{
	static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
	uint64_t x = f->seed * 6364136223846793005ULL + (++f->names) * 1442695040888963407ULL;
	x ^= x >> 29;
	for (int i = 0; i < 5; i++) {
		out[i] = alphabet[x % 27];
		x /= 27;
	}
	out[5] = '\0';
}

static void do_create(ck_fake_t *f, fres_t *r, const freq_t *q, const ck_json_t *body,
                      bool keep_status, fans_t *a)
{
	const char *name = meta_str(body, "name");
	const char *gen_name = meta_str(body, "generateName");
	const char *bns = meta_str(body, "namespace");
	char *generated = NULL;
	if (q->ns[0] && bns[0] && strcmp(q->ns, bns) != 0) {
		fake_status(a, 400, "BadRequest",
		            "the namespace of the provided object does not match the namespace "
		            "sent on the request",
		            NULL, NULL);
		return;
	}
	if (name[0] == '\0' && gen_name[0] != '\0') {
		char sfx[6];
		gen_suffix(f, sfx);
		generated = ck_xasprintf("%s%s", gen_name, sfx);
		name = generated;
	}
	if (name[0] == '\0') {
		invalid(a, r->group, r->kind[0] ? r->kind : r->resource, "", "metadata.name",
		        "FieldValueRequired", "Required value: name or generateName is required");
		return;
	}
	if (fake_find(r, q->ns, name, NULL) != NULL) {
		char *qr = qualified(r);
		char *msg = ck_xasprintf("%s \"%s\" already exists", qr, name);
		fake_status(a, 409, "AlreadyExists", msg, r, name);
		free(msg);
		free(qr);
		free(generated);
		return;
	}
	char uid[48];
	snprintf(uid, sizeof(uid), "00000000-0000-4000-8000-%012" PRIu64, ++f->uids);
	char *now = fake_now(f);
	meta_t m = {name, q->ns, uid, now, NULL, ++f->rv, 1};
	/* A create through the API drops the status where a subresource owns it. */
	bool drop_status = r->status_sub && !keep_status;
	char *json = build_obj(r, body, drop_status, NULL, &m);
	answer_text(a, 201, json);
	fake_commit(f, r, NULL, json, CK_WATCH_ADDED);
	free(now);
	free(generated);
}

/* ---------------------------------------------------------------- verbs */

static void do_list(ck_fake_t *f, fres_t *r, const freq_t *q, fans_t *a)
{
	if (fake_check_field_sel(q->field_sel, a) < 0)
		return;
	char *err = NULL;
	ck_cache_selector_t *sel = NULL;
	if (q->label_sel != NULL && q->label_sel[0] != '\0' &&
	    (sel = ck_cache_selector_parse(q->label_sel, &err)) == NULL) {
		char *msg = ck_xasprintf("unable to parse requirement: %s", err ? err : "?");
		fake_status(a, 400, "BadRequest", msg, NULL, NULL);
		free(msg);
		free(err);
		return;
	}
	uint64_t list_rv = f->rv;
	const char *after_ns = NULL, *after_name = NULL;
	char *tok = NULL;
	if (q->cont != NULL && q->cont[0] != '\0') {
		/* "<rv>/<ns>/<name>": the list's resourceVersion, then the last key sent. */
		tok = ck_xstrdup(q->cont);
		char *s1 = strchr(tok, '/'), *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
		if (s2 == NULL) {
			fake_status(a, 400, "BadRequest", "continue key is not valid", NULL, NULL);
			goto out;
		}
		*s1 = *s2 = '\0';
		list_rv = strtoull(tok, NULL, 10);
		after_ns = s1 + 1;
		after_name = s2 + 1;
	} else if (q->rv_match != NULL && strcmp(q->rv_match, "Exact") == 0 && q->rv != NULL &&
	           strtoull(q->rv, NULL, 10) != f->rv) {
		fake_status(
		    a, 400, "BadRequest",
		    "resourceVersionMatch=Exact with an older resourceVersion is not "
		    "modelled by the fake API server (<ckube/fake.h>): it keeps no snapshots",
		    NULL, NULL);
		goto out;
	}
	ck_sbuf_t items = CK_SBUF_INIT;
	size_t sent = 0;
	const fobj_t *last = NULL;
	bool more = false;
	for (size_t i = 0; i < r->n; i++) {
		const fobj_t *o = r->objs[i];
		if (q->ns[0] && strcmp(o->ns, q->ns) != 0)
			continue;
		if (after_ns != NULL &&
		    (strcmp(o->ns, after_ns) < 0 ||
		     (strcmp(o->ns, after_ns) == 0 && strcmp(o->name, after_name) <= 0)))
			continue;
		if (!fake_selected(sel, q->field_sel, o->ns, o->name, o->json))
			continue;
		if (q->limit > 0 && (int64_t)sent == q->limit) {
			more = true;
			break;
		}
		if (sent++)
			ck_sbuf_putc(&items, ',');
		ck_sbuf_puts(&items, o->json);
		last = o;
	}
	char *av = fake_api_version(r);
	ck_sbuf_t *b = &a->body;
	ck_sbuf_reset(b);
	a->code = 200;
	ck_sbuf_printf(b, "{\"kind\":\"%sList\",\"apiVersion\":", r->kind[0] ? r->kind : "");
	ck_sbuf_put_json_str(b, av);
	ck_sbuf_printf(b, ",\"metadata\":{\"resourceVersion\":\"%" PRIu64 "\"", list_rv);
	if (more && last != NULL) {
		char *c = ck_xasprintf("%" PRIu64 "/%s/%s", list_rv, last->ns, last->name);
		ck_sbuf_puts(b, ",\"continue\":");
		ck_sbuf_put_json_str(b, c);
		free(c);
	}
	ck_sbuf_puts(b, "},\"items\":[");
	if (items.len)
		ck_sbuf_append(b, items.data, items.len);
	ck_sbuf_puts(b, "]}");
	ck_sbuf_free(&items);
	free(av);
out:
	free(tok);
	ck_cache_selector_free(sel);
}

/*
 * true when a strategic merge patch means exactly what the same body means as a
 * merge patch: no list anywhere (strategic merge merges lists by their patch
 * merge keys) and no "$" directive ($patch, $retainKeys, ...). The recorder's
 * Event patches (count, lastTimestamp, message) are such.
 */
static bool strategic_is_merge(const ck_json_t *v)
{
	if (ck_json_type(v) == CK_JSON_ARRAY)
		return false;
	for (size_t i = 0; ck_json_type(v) == CK_JSON_OBJECT && i < ck_json_len(v); i++)
		if (ck_json_key(v, i, NULL)[0] == '$' || !strategic_is_merge(ck_json_at(v, i)))
			return false;
	return true;
}

static void do_patch(ck_fake_t *f, fres_t *r, const freq_t *q, fans_t *a)
{
	const char *ct = q->ctype ? q->ctype : "";
	bool merge = strncmp(ct, "application/merge-patch+json", 28) == 0;
	bool apply = strncmp(ct, "application/apply-patch+yaml", 28) == 0;
	bool strategic = strncmp(ct, "application/strategic-merge-patch+json", 38) == 0;
	if (!merge && !apply && !strategic) {
		char *msg = ck_xasprintf(
		    "%s is not modelled by the fake API server (<ckube/fake.h>): send "
		    "application/merge-patch+json or server-side apply",
		    strncmp(ct, "application/json-patch+json", 27) == 0 ? "JSON patch" : ct);
		fake_status(a, 415, "UnsupportedMediaType", msg, NULL, NULL);
		free(msg);
		return;
	}
	if (apply && (q->field_manager == NULL || q->field_manager[0] == '\0')) {
		invalid(a, "meta.k8s.io", "PatchOptions", "", "fieldManager", "FieldValueRequired",
		        "Required value: is required for apply patch");
		return;
	}
	char *err = NULL;
	ck_json_doc_t *pd = ck_json_parse(q->body ? q->body : "", q->body_len, &err);
	if (pd == NULL || ck_json_type(ck_json_root(pd)) != CK_JSON_OBJECT) {
		char *msg = apply ? ck_xasprintf("an apply body that is not a JSON object is not "
		                                 "modelled by the fake API server (<ckube/fake.h>; "
		                                 "YAML is not read): %s",
		                                 err ? err : "not an object")
		                  : ck_xasprintf("the body of the request is not a JSON object: %s",
		                                 err ? err : "not an object");
		fake_status(a, apply ? 415 : 400, apply ? "UnsupportedMediaType" : "BadRequest",
		            msg, NULL, NULL);
		free(msg);
		free(err);
		ck_json_doc_free(pd);
		return;
	}
	const ck_json_t *patch = ck_json_root(pd);
	if (strategic && !strategic_is_merge(patch)) {
		fake_status(
		    a, 415, "UnsupportedMediaType",
		    "strategic merge patch with lists or $ directives is not modelled by "
		    "the fake API server (<ckube/fake.h>): send application/merge-patch+json "
		    "or server-side apply",
		    NULL, NULL);
		ck_json_doc_free(pd);
		return;
	}
	fobj_t *old = fake_find(r, q->ns, q->name, NULL);
	if (old == NULL) {
		if (apply && q->sub == NULL) {
			ck_sbuf_t b = CK_SBUF_INIT;
			fake_apply_merge(NULL, patch, NULL, &b);
			ck_json_doc_t *cd = ck_json_parse(b.data, b.len, NULL);
			learn_kind(r, ck_json_root(cd));
			do_create(f, r, q, ck_json_root(cd), false, a);
			ck_json_doc_free(cd);
			ck_sbuf_free(&b);
		} else {
			not_found(a, r, q->name);
		}
		ck_json_doc_free(pd);
		return;
	}
	const char *want_rv =
	    ck_json_str(ck_json_get(patch, CK_PATH("metadata", "resourceVersion")));
	char have_rv[24];
	snprintf(have_rv, sizeof(have_rv), "%" PRIu64, old->rv);
	if (want_rv != NULL && strcmp(want_rv, have_rv) != 0) {
		conflict(a, r, q->name,
		         "the object has been modified; please apply your changes to the latest "
		         "version and try again");
		ck_json_doc_free(pd);
		return;
	}
	ck_sbuf_t b = CK_SBUF_INIT;
	if (apply)
		fake_apply_merge(ck_json_root(old->doc), patch, NULL, &b);
	else
		ck_json_merge_patch(ck_json_root(old->doc), patch, &b);
	ck_json_doc_t *nd = ck_json_parse(b.data, b.len, NULL);
	write_object(f, r, old, ck_json_root(nd), q->sub, a);
	ck_json_doc_free(nd);
	ck_sbuf_free(&b);
	ck_json_doc_free(pd);
}

static void do_update(ck_fake_t *f, fres_t *r, const freq_t *q, const ck_json_t *body, fans_t *a)
{
	const char *name = meta_str(body, "name");
	const char *bns = meta_str(body, "namespace");
	if (name[0] && strcmp(name, q->name) != 0) {
		char *msg = ck_xasprintf("the name of the object (%s) does not match the name on "
		                         "the URL (%s)",
		                         name, q->name);
		fake_status(a, 400, "BadRequest", msg, NULL, NULL);
		free(msg);
		return;
	}
	if (q->ns[0] && bns[0] && strcmp(q->ns, bns) != 0) {
		fake_status(a, 400, "BadRequest",
		            "the namespace of the provided object does not match the namespace "
		            "sent on the request",
		            NULL, NULL);
		return;
	}
	fobj_t *old = fake_find(r, q->ns, q->name, NULL);
	if (old == NULL) {
		not_found(a, r, q->name);
		return;
	}
	const char *rv = meta_str(body, "resourceVersion");
	char have[24];
	snprintf(have, sizeof(have), "%" PRIu64, old->rv);
	if (rv[0] && strcmp(rv, have) != 0) {
		conflict(a, r, q->name,
		         "the object has been modified; please apply your changes to the latest "
		         "version and try again");
		return;
	}
	write_object(f, r, old, body, q->sub, a);
}

static void do_delete(ck_fake_t *f, fres_t *r, const freq_t *q, fans_t *a)
{
	fobj_t *old = fake_find(r, q->ns, q->name, NULL);
	if (old == NULL) {
		not_found(a, r, q->name);
		return;
	}
	bool gc = true;
	if (q->body != NULL && q->body_len > 0) {
		char *err = NULL;
		ck_json_doc_t *d = ck_json_parse(q->body, q->body_len, &err);
		if (d == NULL) {
			char *msg = ck_xasprintf("the DeleteOptions body is not JSON: %s", err);
			fake_status(a, 400, "BadRequest", msg, NULL, NULL);
			free(msg);
			free(err);
			return;
		}
		const ck_json_t *pre = ck_json_get(ck_json_root(d), CK_PATH("preconditions"));
		const char *uid = ck_json_str(ck_json_get(pre, CK_PATH("uid")));
		const char *rv = ck_json_str(ck_json_get(pre, CK_PATH("resourceVersion")));
		const char *policy =
		    ck_json_str(ck_json_get(ck_json_root(d), CK_PATH("propagationPolicy")));
		const ck_json_t *oroot = ck_json_root(old->doc);
		char have[24];
		snprintf(have, sizeof(have), "%" PRIu64, old->rv);
		char *why = NULL;
		if (uid != NULL && strcmp(uid, meta_str(oroot, "uid")) != 0)
			why =
			    ck_xasprintf("the UID in the precondition (%s) does not match the UID "
			                 "in record (%s). The object might have been deleted and "
			                 "then recreated",
			                 uid, meta_str(oroot, "uid"));
		else if (rv != NULL && strcmp(rv, have) != 0)
			why = ck_xasprintf(
			    "the ResourceVersion in the precondition (%s) does not "
			    "match the ResourceVersion in record (%s). The object might "
			    "have been modified",
			    rv, have);
		bool foreground = policy != NULL && strcmp(policy, "Foreground") == 0;
		gc = !(policy != NULL && strcmp(policy, "Orphan") == 0);
		ck_json_doc_free(d);
		if (why != NULL) {
			precondition_failed(a, r, q->name, why);
			free(why);
			return;
		}
		if (foreground) {
			/* The owner would wait for its dependents: a semantics a test would rely
			 * on, so it is refused rather than run as background. */
			fake_status(a, 400, "BadRequest",
			            "propagationPolicy Foreground is not modelled by the fake API "
			            "server (<ckube/fake.h>): use Background or Orphan",
			            NULL, NULL);
			return;
		}
	}
	delete_obj(f, r, old, gc, a);
}

void fake_serve(ck_fake_t *f, const freq_t *q, fans_t *a)
{
	pthread_mutex_lock(&f->mu);
	fres_t *r = fake_res(f, q->group, q->version, q->resource, true);
	ck_json_doc_t *body = NULL;
	if (q->sub != NULL && !r->status_sub) {
		fake_status(a, 404, "NotFound",
		            "the server could not find the requested resource (this resource has "
		            "no status subresource in the fake: ck_fake_set_status_subresource)",
		            NULL, NULL);
		goto out;
	}
	if (strcmp(q->verb, "get") == 0) {
		fobj_t *o = fake_find(r, q->ns, q->name, NULL);
		if (o == NULL)
			not_found(a, r, q->name);
		else
			answer_text(a, 200, o->json);
	} else if (strcmp(q->verb, "list") == 0) {
		do_list(f, r, q, a);
	} else if (strcmp(q->verb, "create") == 0 || strcmp(q->verb, "update") == 0) {
		if ((body = parse_body(q, r, a)) == NULL)
			goto out;
		learn_kind(r, ck_json_root(body));
		if (strcmp(q->verb, "create") == 0) {
			if (q->name != NULL) {
				fake_status(
				    a, 405, "MethodNotAllowed",
				    "the server does not allow this method on the requested "
				    "resource",
				    NULL, NULL);
				goto out;
			}
			do_create(f, r, q, ck_json_root(body), q->seeding, a);
		} else {
			do_update(f, r, q, ck_json_root(body), a);
		}
	} else if (strcmp(q->verb, "patch") == 0) {
		do_patch(f, r, q, a);
	} else if (strcmp(q->verb, "delete") == 0) {
		do_delete(f, r, q, a);
	} else {
		char *msg = ck_xasprintf(
		    "%s is not modelled by the fake API server (<ckube/fake.h>)", q->verb);
		fake_status(a, 405, "MethodNotAllowed", msg, NULL, NULL);
		free(msg);
	}
out:
	ck_json_doc_free(body);
	pthread_mutex_unlock(&f->mu);
}
