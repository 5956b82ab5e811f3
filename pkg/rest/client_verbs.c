/*
 * client_verbs: what a request is made of, and the verbs on top of requests: the
 * request URL, the query strings and bodies of list, watch, write and delete
 * options, the async list and watch helpers, and the blocking get, create,
 * update, patch, delete and paged list. Separate because none of it touches
 * curl, libev or the request's state: it only builds specs and calls
 * ck_client_request or ck_client_do_sync.
 */
#include "pkg/rest/client_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends s percent-encoded: everything but RFC 3986 unreserved characters. */
static void put_escaped(ck_sbuf_t *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
			ck_sbuf_putc(b, (char)*p);
		} else {
			ck_sbuf_putc(b, '%');
			ck_sbuf_putc(b, hex[*p >> 4]);
			ck_sbuf_putc(b, hex[*p & 15]);
		}
	}
}

static void put_param(ck_sbuf_t *b, const char *key, const char *value)
{
	if (b->len > 0)
		ck_sbuf_putc(b, '&');
	ck_sbuf_puts(b, key);
	ck_sbuf_putc(b, '=');
	put_escaped(b, value);
}

/* The path type, ns, name and subresource name, after the base URL. */
static void put_type_path(ck_sbuf_t *b, const ck_req_spec_t *spec)
{
	const ck_type_t *t = spec->type;
	if (t->group == NULL || t->group[0] == '\0')
		ck_sbuf_printf(b, "/api/%s", t->version);
	else
		ck_sbuf_printf(b, "/apis/%s/%s", t->group, t->version);
	if (t->namespaced && spec->ns != NULL && spec->ns[0] != '\0') {
		ck_sbuf_puts(b, "/namespaces/");
		put_escaped(b, spec->ns);
	}
	ck_sbuf_putc(b, '/');
	ck_sbuf_puts(b, t->resource);
	if (spec->name != NULL) {
		ck_sbuf_putc(b, '/');
		put_escaped(b, spec->name);
	}
	if (spec->subresource != NULL && spec->subresource[0] != '\0') {
		ck_sbuf_putc(b, '/');
		ck_sbuf_puts(b, spec->subresource);
	}
}

/* Returns a new URL for spec, free with free(). */
char *ck_client_i_build_url(const ck_client_t *c, const ck_req_spec_t *spec)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, c->base);
	if (spec->path != NULL)
		ck_sbuf_puts(&b, spec->path);
	else
		put_type_path(&b, spec);
	if (spec->query != NULL && spec->query[0] != '\0') {
		ck_sbuf_putc(&b, '?');
		ck_sbuf_puts(&b, spec->query);
	}
	return ck_sbuf_steal(&b);
}

char *ck_list_opts_query(const ck_list_opts_t *o, bool watch)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	if (watch)
		put_param(&b, "watch", "true");
	if (o != NULL) {
		bool cont = !watch && o->continue_token != NULL && o->continue_token[0] != '\0';
		if (o->label_selector != NULL && o->label_selector[0] != '\0')
			put_param(&b, "labelSelector", o->label_selector);
		if (o->shard_selector && o->shard_selector[0])
			put_param(&b, "shardSelector", o->shard_selector);
		if (o->field_selector != NULL && o->field_selector[0] != '\0')
			put_param(&b, "fieldSelector", o->field_selector);
		/* "" means "most recent", which is what leaving it out means too. */
		if (!cont && o->resource_version != NULL && o->resource_version[0] != '\0')
			put_param(&b, "resourceVersion", o->resource_version);
		if (!cont && o->resource_version_match != NULL &&
		    o->resource_version_match[0] != '\0')
			put_param(&b, "resourceVersionMatch", o->resource_version_match);
		if (!watch && o->limit > 0) {
			char n[24];
			snprintf(n, sizeof(n), "%lld", (long long)o->limit);
			put_param(&b, "limit", n);
		}
		if (cont)
			put_param(&b, "continue", o->continue_token);
		if (watch && o->allow_watch_bookmarks)
			put_param(&b, "allowWatchBookmarks", "true");
		if (watch && o->timeout_seconds > 0) {
			char n[24];
			snprintf(n, sizeof(n), "%lld", (long long)o->timeout_seconds);
			put_param(&b, "timeoutSeconds", n);
		}
		if (watch && o->send_initial_events)
			put_param(&b, "sendInitialEvents", "true");
	}
	if (b.len == 0)
		return ck_xstrdup("");
	return ck_sbuf_steal(&b);
}

char *ck_write_opts_query(const ck_write_opts_t *o, bool apply)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	/* No default name: as in client-go, without one the API server names the
	 * manager after the user agent (server-side apply requires one). */
	if (o != NULL && o->field_manager != NULL && o->field_manager[0] != '\0')
		put_param(&b, "fieldManager", o->field_manager);
	if (o != NULL && o->dry_run)
		put_param(&b, "dryRun", "All");
	if (apply && o != NULL && o->force)
		put_param(&b, "force", "true");
	return ck_sbuf_steal(&b);
}

const char *ck_patch_content_type(ck_patch_type_t pt)
{
	switch (pt) {
	case CK_PATCH_MERGE:
		return "application/merge-patch+json";
	case CK_PATCH_STRATEGIC:
		return "application/strategic-merge-patch+json";
	case CK_PATCH_JSON:
		return "application/json-patch+json";
	case CK_PATCH_APPLY:
		return "application/apply-patch+yaml";
	}
	return "application/merge-patch+json";
}

char *ck_delete_opts_body(const ck_delete_opts_t *o)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\"");
	if (o != NULL && o->propagation_policy != NULL) {
		ck_sbuf_puts(&b, ",\"propagationPolicy\":");
		ck_sbuf_put_json_str(&b, o->propagation_policy);
	}
	if (o != NULL && o->grace_period_seconds >= 0)
		ck_sbuf_printf(&b, ",\"gracePeriodSeconds\":%lld",
		               (long long)o->grace_period_seconds);
	if (o != NULL && (o->precondition_uid != NULL || o->precondition_rv != NULL)) {
		ck_sbuf_puts(&b, ",\"preconditions\":{");
		if (o->precondition_uid != NULL) {
			ck_sbuf_puts(&b, "\"uid\":");
			ck_sbuf_put_json_str(&b, o->precondition_uid);
		}
		if (o->precondition_rv != NULL) {
			if (o->precondition_uid != NULL)
				ck_sbuf_putc(&b, ',');
			ck_sbuf_puts(&b, "\"resourceVersion\":");
			ck_sbuf_put_json_str(&b, o->precondition_rv);
		}
		ck_sbuf_putc(&b, '}');
	}
	ck_sbuf_putc(&b, '}');
	return ck_sbuf_steal(&b);
}

ck_req_t *ck_client_list(ck_client_t *c, const ck_type_t *t, const char *ns,
                         const ck_list_opts_t *o, const ck_dec_cb_t *dcb, ck_req_done_cb done,
                         void *ud, char **err)
{
	char *q = ck_list_opts_query(o, false);
	ck_req_spec_t spec = {
	    .method = "GET", .type = t, .ns = ns, .query = q, .decode = CK_DEC_LIST};
	ck_req_t *r = ck_client_request(c, &spec, dcb, done, ud, err);
	free(q);
	return r;
}

ck_req_t *ck_client_watch(ck_client_t *c, const ck_type_t *t, const char *ns,
                          const ck_list_opts_t *o, const ck_dec_cb_t *dcb, ck_req_done_cb done,
                          void *ud, char **err)
{
	char *q = ck_list_opts_query(o, true);
	ck_req_spec_t spec = {.method = "GET",
	                      .type = t,
	                      .ns = ns,
	                      .query = q,
	                      .decode = CK_DEC_WATCH,
	                      .is_watch = true};
	/* The server ends the watch after timeoutSeconds; if it goes silent instead (a
	 * dead peer behind a proxy), give up a minute later. */
	if (o != NULL && o->timeout_seconds > 0 && o->timeout_seconds < 24 * 3600)
		spec.timeout_ms = (uint32_t)(o->timeout_seconds + 60) * 1000u;
	ck_req_t *r = ck_client_request(c, &spec, dcb, done, ud, err);
	free(q);
	return r;
}

/* ---------------------------------------------------------------- blocking verbs */

int ck_client_get_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                       ck_result_t *res)
{
	ck_req_spec_t spec = {
	    .method = "GET", .type = t, .ns = ns, .name = name, .decode = CK_DEC_OBJECT};
	return ck_client_do_sync(c, &spec, res);
}

static int write_sync(ck_client_t *c, const char *method, const ck_type_t *t, const char *ns,
                      const char *name, const char *sub, const char *ctype, bool apply,
                      const char *body, const ck_write_opts_t *o, ck_result_t *res)
{
	char *q = ck_write_opts_query(o, apply);
	ck_req_spec_t spec = {.method = method,
	                      .type = t,
	                      .ns = ns,
	                      .name = name,
	                      .subresource = sub,
	                      .query = q,
	                      .content_type = ctype,
	                      .body = body ? body : "",
	                      .body_len = body ? strlen(body) : 0,
	                      .decode = CK_DEC_OBJECT};
	int rc = ck_client_do_sync(c, &spec, res);
	free(q);
	return rc;
}

int ck_client_create_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *body,
                          const ck_write_opts_t *o, ck_result_t *res)
{
	return write_sync(c, "POST", t, ns, NULL, NULL, NULL, false, body, o, res);
}

int ck_client_update_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                          const char *body, const ck_write_opts_t *o, ck_result_t *res)
{
	return write_sync(c, "PUT", t, ns, name, NULL, NULL, false, body, o, res);
}

int ck_client_update_status_sync(ck_client_t *c, const ck_type_t *t, const char *ns,
                                 const char *name, const char *body, const ck_write_opts_t *o,
                                 ck_result_t *res)
{
	return write_sync(c, "PUT", t, ns, name, "status", NULL, false, body, o, res);
}

int ck_client_patch_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                         ck_patch_type_t pt, const char *body, const ck_write_opts_t *o,
                         ck_result_t *res)
{
	return write_sync(c, "PATCH", t, ns, name, NULL, ck_patch_content_type(pt),
	                  pt == CK_PATCH_APPLY, body, o, res);
}

int ck_client_patch_status_sync(ck_client_t *c, const ck_type_t *t, const char *ns,
                                const char *name, ck_patch_type_t pt, const char *body,
                                const ck_write_opts_t *o, ck_result_t *res)
{
	return write_sync(c, "PATCH", t, ns, name, "status", ck_patch_content_type(pt),
	                  pt == CK_PATCH_APPLY, body, o, res);
}

int ck_client_delete_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                          const ck_delete_opts_t *o, ck_result_t *res)
{
	char *body = o != NULL ? ck_delete_opts_body(o) : NULL;
	ck_req_spec_t spec = {.method = "DELETE",
	                      .type = t,
	                      .ns = ns,
	                      .name = name,
	                      .body = body,
	                      .body_len = body ? strlen(body) : 0,
	                      .no_decode = true};
	int rc = ck_client_do_sync(c, &spec, res);
	free(body);
	return rc;
}

/* list_sync's page collector; runs on the loop thread while the worker waits. */
typedef struct list_acc {
	ck_obj_t **items;
	size_t n, cap;
	char *rv;
	char *cont;
} list_acc_t;

static void acc_object(void *ud, ck_obj_t *obj)
{
	list_acc_t *a = ud;
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 64;
		a->items = ck_xrealloc(a->items, a->cap * sizeof(*a->items));
	}
	a->items[a->n++] = obj;
}

static void acc_meta(void *ud, const char *rv, const char *cont, int64_t remaining)
{
	list_acc_t *a = ud;
	free(a->rv);
	free(a->cont);
	a->rv = ck_xstrdup(rv ? rv : "");
	a->cont = ck_xstrdup(cont ? cont : "");
}

int ck_client_list_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const ck_list_opts_t *o,
                        ck_obj_t ***items, size_t *nitems, char **list_rv, ck_result_t *res)
{
	static const ck_dec_cb_t acc_cb = {.on_object = acc_object, .on_list_meta = acc_meta};
	ck_list_opts_t page = o ? *o : (ck_list_opts_t){0};
	list_acc_t a = {0};
	char *token = NULL; /* the continue token of the page being asked for */
	bool restarted = false;
	int rc;
	for (;;) {
		page.continue_token = token;
		bool paged = token != NULL;
		char *q = ck_list_opts_query(&page, false);
		ck_req_spec_t spec = {
		    .method = "GET", .type = t, .ns = ns, .query = q, .decode = CK_DEC_LIST};
		rc = ck_client_do_sync_stream(c, &spec, &acc_cb, &a, res);
		free(q);
		free(token);
		token = a.cont;
		a.cont = NULL;
		if (rc < 0 && ck_result_is_gone(res) && paged && !restarted) {
			/* The continue token expired: one full list instead of pages. */
			restarted = true;
			for (size_t i = 0; i < a.n; i++)
				ck_obj_unref(a.items[i]);
			a.n = 0;
			ck_result_clear(res);
			page = o ? *o : (ck_list_opts_t){0};
			page.limit = 0;
			free(token);
			token = NULL;
			continue;
		}
		if (rc < 0 || token == NULL || token[0] == '\0')
			break;
		ck_result_clear(res);
	}
	free(token);
	if (rc < 0) {
		for (size_t i = 0; i < a.n; i++)
			ck_obj_unref(a.items[i]);
		free(a.items);
		a.items = NULL;
		a.n = 0;
	}
	*items = a.items;
	*nitems = a.n;
	if (list_rv != NULL)
		*list_rv = rc == 0 ? ck_xstrdup(a.rv ? a.rv : "") : NULL;
	free(a.rv);
	return rc;
}
