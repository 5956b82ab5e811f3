/*
 * tracker: the fake's state -- resources, their objects as whole JSON, the one
 * resourceVersion counter and the history of changes that watches replay -- and
 * the calls a test seeds and inspects it with (fake.h).
 *
 * Design note. Objects are kept as text plus a parsed document, so every field
 * survives whatever the test's ck_type_t keeps, and an answer is the stored text
 * itself. Each resource's objects are sorted by (namespace, name), the order etcd
 * lists keys in, so lists and pages are deterministic. Every change appends an
 * event to a bounded ring; a watch is a cursor into it (transport.c), so a change
 * made on any thread reaches every stream in order, and a watch from a
 * resourceVersion older than the ring is told 410 as the watch cache tells it.
 * Seeding goes through the server's own verbs (fake_serve), so a seeded object
 * is exactly what a POST would have stored.
 */
#include "pkg/fake/fake_internal.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_HISTORY 1000

/* Resources whose API has no status subresource (the default is to have one);
 * none of them has a metadata.generation either. */
static const char *const no_status[] = {
    "configmaps",   "secrets", "serviceaccounts", "endpoints",    "events",
    "leases",       "roles",   "rolebindings",    "clusterroles", "clusterrolebindings",
    "podtemplates", NULL,
};
/* Resources with a status but no metadata.generation on the server. */
static const char *const no_generation[] = {"namespaces", "services", "nodes", NULL};

ck_fake_t *ck_fake_new(const ck_fake_opts_t *o)
{
	ck_fake_opts_t opts = o ? *o : (ck_fake_opts_t){0};
	ck_fake_t *f = ck_xcalloc(1, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
	f->clock = opts.clock ? opts.clock : ck_clk_real();
	f->seed = opts.seed ? opts.seed : 1;
	f->history_cap = opts.history ? opts.history : DEFAULT_HISTORY;
	f->gc = opts.gc;
	f->hist = ck_xcalloc(f->history_cap, sizeof(*f->hist));
	fake_transport_init(f);
	return f;
}

static void obj_free(fobj_t *o)
{
	if (o == NULL)
		return;
	free(o->ns);
	free(o->name);
	free(o->json);
	ck_json_doc_free(o->doc);
	free(o);
}

static void event_clear(fevent_t *e)
{
	free(e->ns);
	free(e->json);
	free(e->old_json);
	memset(e, 0, sizeof(*e));
}

void ck_fake_free(ck_fake_t *f)
{
	if (f == NULL)
		return;
	fake_transport_free(f);
	for (size_t i = 0; i < f->nres; i++) {
		fres_t *r = f->res[i];
		for (size_t j = 0; j < r->n; j++)
			obj_free(r->objs[j]);
		free(r->objs);
		free(r->group);
		free(r->version);
		free(r->resource);
		free(r->kind);
		free(r);
	}
	free(f->res);
	for (size_t i = 0; i < f->history_cap; i++)
		event_clear(&f->hist[i]);
	free(f->hist);
	fake_reactors_free(f);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

fres_t *fake_res(ck_fake_t *f, const char *group, const char *version, const char *resource,
                 bool create)
{
	for (size_t i = 0; i < f->nres; i++) {
		fres_t *r = f->res[i];
		if (strcmp(r->group, group) == 0 && strcmp(r->version, version) == 0 &&
		    strcmp(r->resource, resource) == 0)
			return r;
	}
	if (!create)
		return NULL;
	fres_t *r = ck_xcalloc(1, sizeof(*r));
	r->group = ck_xstrdup(group);
	r->version = ck_xstrdup(version);
	r->resource = ck_xstrdup(resource);
	r->kind = ck_xstrdup("");
	r->status_sub = true;
	r->generation = true;
	for (size_t i = 0; no_status[i] != NULL; i++)
		if (strcmp(resource, no_status[i]) == 0)
			r->status_sub = r->generation = false;
	for (size_t i = 0; no_generation[i] != NULL; i++)
		if (strcmp(resource, no_generation[i]) == 0)
			r->generation = false;
	if (f->nres == f->capres) {
		f->capres = f->capres ? 2 * f->capres : 8;
		f->res = ck_xrealloc(f->res, f->capres * sizeof(*f->res));
	}
	f->res[f->nres++] = r;
	return r;
}

static fres_t *res_of_type(ck_fake_t *f, const ck_type_t *t)
{
	fres_t *r = fake_res(f, t->group ? t->group : "", t->version, t->resource, true);
	if (r->kind[0] == '\0' && t->kind != NULL) {
		free(r->kind);
		r->kind = ck_xstrdup(t->kind);
	}
	return r;
}

void ck_fake_register(ck_fake_t *f, const ck_type_t *t)
{
	pthread_mutex_lock(&f->mu);
	res_of_type(f, t);
	pthread_mutex_unlock(&f->mu);
}

void ck_fake_set_status_subresource(ck_fake_t *f, const ck_type_t *t, bool on)
{
	pthread_mutex_lock(&f->mu);
	res_of_type(f, t)->status_sub = on;
	pthread_mutex_unlock(&f->mu);
}

static int key_cmp(const char *ns1, const char *n1, const char *ns2, const char *n2)
{
	int c = strcmp(ns1, ns2);
	return c != 0 ? c : strcmp(n1, n2);
}

fobj_t *fake_find(fres_t *r, const char *ns, const char *name, size_t *pos)
{
	size_t lo = 0, hi = r->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = key_cmp(r->objs[mid]->ns, r->objs[mid]->name, ns, name);
		if (c == 0) {
			if (pos)
				*pos = mid;
			return r->objs[mid];
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (pos)
		*pos = lo;
	return NULL;
}

const fevent_t *fake_hist_at(const ck_fake_t *f, size_t i)
{
	return &f->hist[(f->hist_start + i) % f->history_cap];
}

static void hist_push(ck_fake_t *f, fres_t *r, ck_watch_type_t type, const char *ns,
                      const char *json, const char *old_json)
{
	if (f->hist_len == f->history_cap) {
		fevent_t *e = &f->hist[f->hist_start];
		f->hist_floor = e->rv; /* a watch from below it misses this one */
		event_clear(e);
		f->hist_start = (f->hist_start + 1) % f->history_cap;
		f->hist_len--;
	}
	fevent_t *e = &f->hist[(f->hist_start + f->hist_len) % f->history_cap];
	e->rv = f->rv;
	e->res = r;
	e->type = type;
	e->ns = ck_xstrdup(ns);
	e->json = ck_xstrdup(json);
	e->old_json = old_json ? ck_xstrdup(old_json) : NULL;
	f->hist_len++;
}

fobj_t *fake_commit(ck_fake_t *f, fres_t *r, fobj_t *old, char *json, ck_watch_type_t type)
{
	char *err = NULL;
	ck_json_doc_t *doc = ck_json_parse(json, strlen(json), &err);
	if (doc == NULL) /* the server built it: a bug, not a user's error */
		ck_fatal("fake: stored object does not parse: %s", err ? err : "?");
	const ck_json_t *md = ck_json_get(ck_json_root(doc), CK_PATH("metadata"));
	const char *ns = ck_json_str(ck_json_get(md, CK_PATH("namespace")));
	const char *name = ck_json_str(ck_json_get(md, CK_PATH("name")));
	fobj_t *o = ck_xcalloc(1, sizeof(*o));
	o->ns = ck_xstrdup(ns ? ns : "");
	o->name = ck_xstrdup(name ? name : "");
	o->json = json;
	o->doc = doc;
	o->rv = f->rv;
	size_t pos = 0;
	fobj_t *cur = fake_find(r, o->ns, o->name, &pos);
	hist_push(f, r, type, o->ns, json, old ? old->json : NULL);
	if (cur != NULL) {
		r->objs[pos] = o;
		obj_free(cur);
	} else {
		if (r->n == r->cap) {
			r->cap = r->cap ? 2 * r->cap : 16;
			r->objs = ck_xrealloc(r->objs, r->cap * sizeof(*r->objs));
		}
		memmove(&r->objs[pos + 1], &r->objs[pos], (r->n - pos) * sizeof(*r->objs));
		r->objs[pos] = o;
		r->n++;
	}
	fake_wake(f);
	return o;
}

void fake_remove(ck_fake_t *f, fres_t *r, fobj_t *old, char *json)
{
	size_t pos = 0;
	if (fake_find(r, old->ns, old->name, &pos) != old) {
		free(json);
		return;
	}
	hist_push(f, r, CK_WATCH_DELETED, old->ns, json ? json : old->json, NULL);
	free(json);
	memmove(&r->objs[pos], &r->objs[pos + 1], (r->n - pos - 1) * sizeof(*r->objs));
	r->n--;
	obj_free(old);
	fake_wake(f);
}

char *fake_now(const ck_fake_t *f)
{
	char buf[32];
	int64_t ns = ck_clk_wall_ns(f->clock);
	ck_time_format_rfc3339(ns, buf);
	return ck_xstrdup(buf);
}

/* --- seeding and inspecting --- */

/* Runs one verb on t's resource as a request would, without reactors. */
static int seed(ck_fake_t *f, const ck_type_t *t, const char *method, const char *ns,
                const char *name, const char *json, char **err)
{
	pthread_mutex_lock(&f->mu);
	res_of_type(f, t);
	pthread_mutex_unlock(&f->mu);
	char *docns = NULL, *docname = NULL;
	if (json != NULL) {
		ck_json_doc_t *d = ck_json_parse(json, strlen(json), err);
		if (d == NULL)
			return ck_err_wrap(err, "fake: %s %s", method, t->resource);
		const ck_json_t *md = ck_json_get(ck_json_root(d), CK_PATH("metadata"));
		const char *s = ck_json_str(ck_json_get(md, CK_PATH("namespace")));
		docns = s ? ck_xstrdup(s) : NULL;
		s = ck_json_str(ck_json_get(md, CK_PATH("name")));
		docname = s ? ck_xstrdup(s) : NULL;
		ck_json_doc_free(d);
	}
	freq_t q = {0};
	q.method = method;
	q.verb = strcmp(method, "POST") == 0  ? "create"
	         : strcmp(method, "PUT") == 0 ? "update"
	                                      : "delete";
	q.group = ck_xstrdup(t->group ? t->group : "");
	q.version = ck_xstrdup(t->version);
	q.resource = ck_xstrdup(t->resource);
	const char *n = ns ? ns : docns;
	q.ns = ck_xstrdup(t->namespaced && n ? n : "");
	const char *nm = name ? name : (strcmp(method, "POST") == 0 ? NULL : docname);
	q.name = nm ? ck_xstrdup(nm) : NULL;
	q.body = json;
	q.body_len = json ? strlen(json) : 0;
	q.ctype = "application/json";
	q.seeding = true;
	fans_t a = {0};
	fake_serve(f, &q, &a);
	int rc = 0;
	if (strcmp(method, "PUT") == 0 && a.code == 404) {
		/* ck_fake_put creates what is not there. */
		ck_sbuf_free(&a.body);
		a = (fans_t){0};
		free(q.name);
		q.name = NULL;
		q.method = "POST";
		q.verb = "create";
		fake_serve(f, &q, &a);
	}
	if (a.code < 200 || a.code >= 300) {
		ck_status_t st = {0};
		ck_status_parse(a.body.data ? a.body.data : "", a.body.len, a.code, &st);
		rc = ck_err_set(err, "fake: %s %s: %d %s: %s", method, t->resource, a.code,
		                st.reason ? st.reason : "", st.message ? st.message : "");
		ck_status_clear(&st);
	}
	ck_sbuf_free(&a.body);
	fake_freq_clear(&q);
	free(docns);
	free(docname);
	return rc;
}

int ck_fake_add(ck_fake_t *f, const ck_type_t *t, const char *json, char **err)
{
	if (json == NULL)
		return ck_err_set(err, "fake: POST %s: no object", t->resource);
	return seed(f, t, "POST", NULL, NULL, json, err);
}

int ck_fake_put(ck_fake_t *f, const ck_type_t *t, const char *json, char **err)
{
	if (json == NULL)
		return ck_err_set(err, "fake: PUT %s: no object", t->resource);
	/* Unconditional: the stored resourceVersion is taken, whatever json says. */
	ck_json_doc_t *d = ck_json_parse(json, strlen(json), err);
	if (d == NULL)
		return ck_err_wrap(err, "fake: PUT %s", t->resource);
	ck_sbuf_t b = CK_SBUF_INIT;
	static const char drop_rv[] = "{\"metadata\":{\"resourceVersion\":null}}";
	ck_json_doc_t *patch = ck_json_parse(drop_rv, sizeof(drop_rv) - 1, NULL);
	ck_json_merge_patch(ck_json_root(d), ck_json_root(patch), &b);
	ck_json_doc_free(patch);
	ck_json_doc_free(d);
	int rc = seed(f, t, "PUT", NULL, NULL, ck_sbuf_cstr(&b), err);
	ck_sbuf_free(&b);
	return rc;
}

int ck_fake_delete(ck_fake_t *f, const ck_type_t *t, const char *ns, const char *name, char **err)
{
	if (name == NULL || name[0] == '\0')
		return ck_err_set(err, "fake: DELETE %s: no name", t->resource);
	return seed(f, t, "DELETE", ns ? ns : "", name, NULL, err);
}

ck_json_doc_t *ck_fake_get(ck_fake_t *f, const ck_type_t *t, const char *ns, const char *name)
{
	if (name == NULL)
		return NULL;
	ck_json_doc_t *d = NULL;
	pthread_mutex_lock(&f->mu);
	fres_t *r = fake_res(f, t->group ? t->group : "", t->version, t->resource, false);
	fobj_t *o = r ? fake_find(r, t->namespaced && ns ? ns : "", name, NULL) : NULL;
	if (o != NULL)
		d = ck_json_parse(o->json, strlen(o->json), NULL);
	pthread_mutex_unlock(&f->mu);
	return d;
}

size_t ck_fake_len(ck_fake_t *f, const ck_type_t *t, const char *ns)
{
	size_t n = 0;
	pthread_mutex_lock(&f->mu);
	fres_t *r = fake_res(f, t->group ? t->group : "", t->version, t->resource, false);
	for (size_t i = 0; r != NULL && i < r->n; i++)
		if (ns == NULL || ns[0] == '\0' || strcmp(r->objs[i]->ns, ns) == 0)
			n++;
	pthread_mutex_unlock(&f->mu);
	return n;
}

uint64_t ck_fake_resource_version(ck_fake_t *f)
{
	pthread_mutex_lock(&f->mu);
	uint64_t rv = f->rv;
	pthread_mutex_unlock(&f->mu);
	return rv;
}

void ck_fake_bookmark(ck_fake_t *f)
{
	pthread_mutex_lock(&f->mu);
	f->bookmarks++;
	fake_wake(f);
	pthread_mutex_unlock(&f->mu);
}
