/* Helpers shared by the pkg/cache unit tests: test kinds, object builders, a
 * handler that records what it is told. */
#ifndef CSC_TEST_CACHE_UTIL_H
#define CSC_TEST_CACHE_UTIL_H

#include "pkg/cache/internal.h"
#include <ckube/cache.h>
#include <ckube/cache_fake.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ck_type_t widget_type = {
    .group = "test.example.com",
    .version = "v1",
    .kind = "Widget",
    .resource = "widgets",
    .namespaced = true,
};

static const ck_type_t node_type = {
    .group = "",
    .version = "v1",
    .kind = "Node",
    .resource = "nodes",
    .namespaced = false,
};

static inline void bset(ck_obj_builder_t *b, const char *f, const char *v)
{
	ck_obj_builder_set_meta(b, f, v, strlen(v));
}

/* A new object: labels given as "k=v" strings, NULL-terminated. */
static inline ck_obj_t *mkobj_t(const ck_type_t *t, const char *ns, const char *name,
                                const char *rv, const char *const *labels)
{
	ck_obj_builder_t *b = ck_obj_builder_new(t);
	if (ns != NULL)
		bset(b, "namespace", ns);
	bset(b, "name", name);
	bset(b, "resourceVersion", rv);
	char uid[128];
	snprintf(uid, sizeof(uid), "uid-%s-%s", ns ? ns : "", name);
	bset(b, "uid", uid);
	for (size_t i = 0; labels != NULL && labels[i] != NULL; i++) {
		const char *eq = strchr(labels[i], '=');
		ck_obj_builder_add_label(b, labels[i], (size_t)(eq - labels[i]), eq + 1,
		                         strlen(eq + 1));
	}
	ck_obj_t *o = ck_obj_builder_finish(b);
	ck_obj_builder_free(b);
	return o;
}

static inline ck_obj_t *mkobj(const char *ns, const char *name, const char *rv)
{
	return mkobj_t(&widget_type, ns, name, rv, NULL);
}

static inline ck_obj_t *mkobj_app(const char *ns, const char *name, const char *rv, const char *app)
{
	char l[64];
	snprintf(l, sizeof(l), "app=%s", app);
	const char *labels[] = {l, NULL};
	return mkobj_t(&widget_type, ns, name, rv, labels);
}

static inline ck_obj_t *mkbookmark(const char *rv, bool initial_end)
{
	ck_obj_builder_t *b = ck_obj_builder_new(&widget_type);
	bset(b, "resourceVersion", rv);
	if (initial_end)
		ck_obj_builder_add_annotation(b, "k8s.io/initial-events-end", 25, "true", 4);
	ck_obj_t *o = ck_obj_builder_finish(b);
	ck_obj_builder_free(b);
	return o;
}

/* Records handler calls as lines of text. */
typedef struct rec {
	ck_sbuf_t log;
	int adds, initial_adds, updates, deletes, unknown_deletes;
} rec_t;

static inline void rec_on_add(void *ud, ck_obj_t *obj, bool initial)
{
	rec_t *r = ud;
	r->adds++;
	r->initial_adds += initial;
	ck_sbuf_printf(&r->log, "add %s/%s %s%s\n", obj->ns, obj->name, obj->rv,
	               initial ? " initial" : "");
}

static inline void rec_on_update(void *ud, ck_obj_t *old, ck_obj_t *obj)
{
	rec_t *r = ud;
	r->updates++;
	ck_sbuf_printf(&r->log, "update %s/%s %s->%s\n", obj->ns, obj->name, old->rv, obj->rv);
}

static inline void rec_on_delete(void *ud, const char *key, ck_obj_t *obj, bool unknown)
{
	rec_t *r = ud;
	r->deletes++;
	r->unknown_deletes += unknown;
	ck_sbuf_printf(&r->log, "delete %s %s%s\n", key, obj->rv, unknown ? " unknown" : "");
}

static const ck_cache_handler_t rec_handler = {rec_on_add, rec_on_update, rec_on_delete};

static inline const char *rec_text(rec_t *r)
{
	return ck_sbuf_cstr(&r->log);
}

static inline void rec_reset(rec_t *r)
{
	ck_sbuf_free(&r->log);
	memset(r, 0, sizeof(*r));
}

#endif
