/*
 * fake: the in-process list/watch source (fake.h). Requests are kept in a list
 * owned by the fake until it is freed, so that pointers a test holds stay valid
 * whatever the reflector does (cancel, retry) in the callbacks they trigger.
 */
#include "pkg/cache/fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cache_fake_req {
	cache_fake_lw_t *f;
	bool watch;
	klist_opts_t opts;
	kdec_cb_t cb;
	kreq_done_cb done;
	void *ud;
	bool finished;
	bool cancelled;
	struct cache_fake_req *next;
};

struct cache_fake_lw {
	cache_lw_t base;
	int refs;
	cache_fake_req_t *reqs;
	cache_fake_req_t *last_list, *last_watch;
	size_t nlists, nwatches;
	char *fail_next;
};

static char *dup_opt(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

static void opts_copy(klist_opts_t *d, const klist_opts_t *s)
{
	*d = *s;
	d->label_selector = dup_opt(s->label_selector);
	d->field_selector = dup_opt(s->field_selector);
	d->resource_version = dup_opt(s->resource_version);
	d->resource_version_match = dup_opt(s->resource_version_match);
	d->continue_token = dup_opt(s->continue_token);
}

static void opts_free(klist_opts_t *o)
{
	free((char *)o->label_selector);
	free((char *)o->field_selector);
	free((char *)o->resource_version);
	free((char *)o->resource_version_match);
	free((char *)o->continue_token);
}

static void fake_unref(cache_fake_lw_t *f)
{
	if (--f->refs > 0)
		return;
	for (cache_fake_req_t *r = f->reqs; r != NULL;) {
		cache_fake_req_t *next = r->next;
		opts_free(&r->opts);
		free(r);
		r = next;
	}
	free(f->fail_next);
	free(f);
}

static cache_lw_req_t *start(cache_fake_lw_t *f, bool watch, const klist_opts_t *o,
                             const kdec_cb_t *cb, kreq_done_cb done, void *ud, char **err)
{
	if (f->fail_next != NULL) {
		err_set(err, "%s", f->fail_next);
		free(f->fail_next);
		f->fail_next = NULL;
		return NULL;
	}
	cache_fake_req_t *r = xcalloc(1, sizeof(*r));
	r->f = f;
	r->watch = watch;
	opts_copy(&r->opts, o);
	r->cb = *cb;
	r->done = done;
	r->ud = ud;
	r->next = f->reqs;
	f->reqs = r;
	if (watch) {
		f->last_watch = r;
		f->nwatches++;
	} else {
		f->last_list = r;
		f->nlists++;
	}
	return (cache_lw_req_t *)r;
}

static cache_lw_req_t *fake_list(cache_lw_t *lw, const klist_opts_t *o, const kdec_cb_t *cb,
                                 kreq_done_cb done, void *ud, char **err)
{
	return start((cache_fake_lw_t *)lw, false, o, cb, done, ud, err);
}

static cache_lw_req_t *fake_watch(cache_lw_t *lw, const klist_opts_t *o, const kdec_cb_t *cb,
                                  kreq_done_cb done, void *ud, char **err)
{
	return start((cache_fake_lw_t *)lw, true, o, cb, done, ud, err);
}

static void fake_cancel(cache_lw_t *lw, cache_lw_req_t *req)
{
	(void)lw;
	cache_fake_req_t *r = (cache_fake_req_t *)req;
	if (!r->finished)
		r->cancelled = true;
}

static void fake_free(cache_lw_t *lw)
{
	fake_unref((cache_fake_lw_t *)lw);
}

static const cache_lw_ops_t fake_ops = {
    .list = fake_list,
    .watch = fake_watch,
    .cancel = fake_cancel,
    .free = fake_free,
};

cache_fake_lw_t *cache_fake_lw_new(void)
{
	cache_fake_lw_t *f = xcalloc(1, sizeof(*f));
	f->base.ops = &fake_ops;
	f->refs = 1;
	return f;
}

void cache_fake_lw_free(cache_fake_lw_t *f)
{
	if (f != NULL)
		fake_unref(f);
}

cache_lw_t *cache_fake_lw_source(cache_fake_lw_t *f)
{
	f->refs++;
	return &f->base;
}

size_t cache_fake_lw_count(const cache_fake_lw_t *f, bool watch)
{
	return watch ? f->nwatches : f->nlists;
}

cache_fake_req_t *cache_fake_lw_last(cache_fake_lw_t *f, bool watch)
{
	return watch ? f->last_watch : f->last_list;
}

void cache_fake_lw_fail_next_start(cache_fake_lw_t *f, const char *err)
{
	free(f->fail_next);
	f->fail_next = xstrdup(err ? err : "injected failure");
}

bool cache_fake_req_active(const cache_fake_req_t *r)
{
	return r != NULL && !r->finished && !r->cancelled;
}

bool cache_fake_req_cancelled(const cache_fake_req_t *r)
{
	return r != NULL && r->cancelled;
}

const klist_opts_t *cache_fake_req_opts(const cache_fake_req_t *r)
{
	return &r->opts;
}

void cache_fake_req_item(cache_fake_req_t *r, kobj_t *obj)
{
	if (!cache_fake_req_active(r) || r->watch || r->cb.on_object == NULL) {
		kobj_unref(obj);
		return;
	}
	r->cb.on_object(r->ud, obj);
}

void cache_fake_req_meta(cache_fake_req_t *r, const char *rv, const char *cont)
{
	if (!cache_fake_req_active(r) || r->watch || r->cb.on_list_meta == NULL)
		return;
	r->cb.on_list_meta(r->ud, rv, cont, -1);
}

void cache_fake_req_event(cache_fake_req_t *r, kwatch_type_t type, kobj_t *obj)
{
	if (!cache_fake_req_active(r) || !r->watch || r->cb.on_event == NULL) {
		kobj_unref(obj);
		return;
	}
	r->cb.on_event(r->ud, type, obj, NULL);
}

void cache_fake_req_error_event(cache_fake_req_t *r, int code, const char *reason,
                                const char *message)
{
	if (!cache_fake_req_active(r) || !r->watch || r->cb.on_event == NULL)
		return;
	kstatus_t st = {
	    .code = code,
	    .status = (char *)"Failure",
	    .reason = (char *)reason,
	    .message = (char *)message,
	};
	r->cb.on_event(r->ud, KWATCH_ERROR, NULL, &st);
}

void cache_fake_req_finish(cache_fake_req_t *r, int http_code, const char *reason,
                           const char *message, int retry_after_s)
{
	if (!cache_fake_req_active(r))
		return;
	r->finished = true;
	kresult_t res;
	memset(&res, 0, sizeof(res));
	res.http_code = http_code;
	if (http_code == 0) {
		res.transport_code = 7; /* CURLE_COULDNT_CONNECT */
		res.error = xasprintf("%s: %s", r->watch ? "watch" : "list",
		                      message ? message : "connection refused");
	} else if (http_code < 200 || http_code >= 300) {
		res.status.code = http_code;
		res.status.status = xstrdup("Failure");
		res.status.reason = xstrdup(reason);
		res.status.message = xstrdup(message);
		res.status.retry_after_seconds = retry_after_s;
		res.error = xasprintf("HTTP %d %s: %s", http_code, reason ? reason : "",
		                      message ? message : "");
	}
	r->done(r->ud, &res);
	kresult_clear(&res);
}
