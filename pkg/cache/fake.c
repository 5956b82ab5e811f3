/*
 * fake: the in-process list/watch source (fake.h). Requests are kept in a list
 * owned by the fake until it is freed, so that pointers a test holds stay valid
 * whatever the reflector does (cancel, retry) in the callbacks they trigger.
 */
#include <ckube/cache_fake.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ck_cache_fake_req {
	ck_cache_fake_lw_t *f;
	bool watch;
	ck_list_opts_t opts;
	ck_dec_cb_t cb;
	ck_req_done_cb done;
	void *ud;
	bool finished;
	bool cancelled;
	struct ck_cache_fake_req *next;
};

struct ck_cache_fake_lw {
	ck_cache_lw_t base;
	int refs;
	ck_cache_fake_req_t *reqs;
	ck_cache_fake_req_t *last_list, *last_watch;
	size_t nlists, nwatches;
	char *fail_next;
};

static char *dup_opt(const char *s)
{
	return s ? ck_xstrdup(s) : NULL;
}

static void opts_copy(ck_list_opts_t *d, const ck_list_opts_t *s)
{
	*d = *s;
	d->label_selector = dup_opt(s->label_selector);
	d->field_selector = dup_opt(s->field_selector);
	d->resource_version = dup_opt(s->resource_version);
	d->resource_version_match = dup_opt(s->resource_version_match);
	d->continue_token = dup_opt(s->continue_token);
	d->shard_selector = dup_opt(s->shard_selector);
}

static void opts_free(ck_list_opts_t *o)
{
	free((char *)o->label_selector);
	free((char *)o->field_selector);
	free((char *)o->resource_version);
	free((char *)o->resource_version_match);
	free((char *)o->continue_token);
	free((char *)o->shard_selector);
}

static void fake_unref(ck_cache_fake_lw_t *f)
{
	if (--f->refs > 0)
		return;
	for (ck_cache_fake_req_t *r = f->reqs; r != NULL;) {
		ck_cache_fake_req_t *next = r->next;
		opts_free(&r->opts);
		free(r);
		r = next;
	}
	free(f->fail_next);
	free(f);
}

static ck_cache_lw_req_t *start(ck_cache_fake_lw_t *f, bool watch, const ck_list_opts_t *o,
                                const ck_dec_cb_t *cb, ck_req_done_cb done, void *ud, char **err)
{
	if (f->fail_next != NULL) {
		ck_err_set(err, "%s", f->fail_next);
		free(f->fail_next);
		f->fail_next = NULL;
		return NULL;
	}
	ck_cache_fake_req_t *r = ck_xcalloc(1, sizeof(*r));
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
	return (ck_cache_lw_req_t *)r;
}

static ck_cache_lw_req_t *fake_list(ck_cache_lw_t *lw, const ck_list_opts_t *o,
                                    const ck_dec_cb_t *cb, ck_req_done_cb done, void *ud,
                                    char **err)
{
	return start((ck_cache_fake_lw_t *)lw, false, o, cb, done, ud, err);
}

static ck_cache_lw_req_t *fake_watch(ck_cache_lw_t *lw, const ck_list_opts_t *o,
                                     const ck_dec_cb_t *cb, ck_req_done_cb done, void *ud,
                                     char **err)
{
	return start((ck_cache_fake_lw_t *)lw, true, o, cb, done, ud, err);
}

static void fake_cancel(ck_cache_lw_t *lw, ck_cache_lw_req_t *req)
{
	(void)lw;
	ck_cache_fake_req_t *r = (ck_cache_fake_req_t *)req;
	if (!r->finished)
		r->cancelled = true;
}

static void fake_free(ck_cache_lw_t *lw)
{
	fake_unref((ck_cache_fake_lw_t *)lw);
}

static const ck_cache_lw_ops_t fake_ops = {
    .list = fake_list,
    .watch = fake_watch,
    .cancel = fake_cancel,
    .free = fake_free,
};

ck_cache_fake_lw_t *ck_cache_fake_lw_new(void)
{
	ck_cache_fake_lw_t *f = ck_xcalloc(1, sizeof(*f));
	f->base.ops = &fake_ops;
	f->base.no_watch_list = true;
	f->refs = 1;
	return f;
}

void ck_cache_fake_lw_free(ck_cache_fake_lw_t *f)
{
	if (f != NULL)
		fake_unref(f);
}

ck_cache_lw_t *ck_cache_fake_lw_source(ck_cache_fake_lw_t *f)
{
	f->refs++;
	return &f->base;
}

size_t ck_cache_fake_lw_count(const ck_cache_fake_lw_t *f, bool watch)
{
	return watch ? f->nwatches : f->nlists;
}

ck_cache_fake_req_t *ck_cache_fake_lw_last(ck_cache_fake_lw_t *f, bool watch)
{
	return watch ? f->last_watch : f->last_list;
}

void ck_cache_fake_lw_set_watch_list(ck_cache_fake_lw_t *f, bool supported)
{
	f->base.no_watch_list = !supported;
}

void ck_cache_fake_lw_fail_next_start(ck_cache_fake_lw_t *f, const char *err)
{
	free(f->fail_next);
	f->fail_next = ck_xstrdup(err ? err : "injected failure");
}

bool ck_cache_fake_req_active(const ck_cache_fake_req_t *r)
{
	return r != NULL && !r->finished && !r->cancelled;
}

bool ck_cache_fake_req_cancelled(const ck_cache_fake_req_t *r)
{
	return r != NULL && r->cancelled;
}

const ck_list_opts_t *ck_cache_fake_req_opts(const ck_cache_fake_req_t *r)
{
	return &r->opts;
}

void ck_cache_fake_req_item(ck_cache_fake_req_t *r, ck_obj_t *obj)
{
	if (!ck_cache_fake_req_active(r) || r->watch || r->cb.on_object == NULL) {
		ck_obj_unref(obj);
		return;
	}
	r->cb.on_object(r->ud, obj);
}

void ck_cache_fake_req_meta(ck_cache_fake_req_t *r, const char *rv, const char *cont)
{
	if (!ck_cache_fake_req_active(r) || r->watch || r->cb.on_list_meta == NULL)
		return;
	r->cb.on_list_meta(r->ud, rv, cont, -1);
}

void ck_cache_fake_req_event(ck_cache_fake_req_t *r, ck_watch_type_t type, ck_obj_t *obj)
{
	if (!ck_cache_fake_req_active(r) || !r->watch || r->cb.on_event == NULL) {
		ck_obj_unref(obj);
		return;
	}
	r->cb.on_event(r->ud, type, obj, NULL);
}

void ck_cache_fake_req_error_event(ck_cache_fake_req_t *r, int code, const char *reason,
                                   const char *message)
{
	if (!ck_cache_fake_req_active(r) || !r->watch || r->cb.on_event == NULL)
		return;
	ck_status_t st = {
	    .code = code,
	    .status = (char *)"Failure",
	    .reason = (char *)reason,
	    .message = (char *)message,
	};
	r->cb.on_event(r->ud, CK_WATCH_ERROR, NULL, &st);
}

void ck_cache_fake_req_finish(ck_cache_fake_req_t *r, int http_code, const char *reason,
                              const char *message, int retry_after_s)
{
	if (!ck_cache_fake_req_active(r))
		return;
	r->finished = true;
	ck_result_t res;
	memset(&res, 0, sizeof(res));
	res.http_code = http_code;
	if (http_code == 0) {
		res.transport_code = 7; /* CURLE_COULDNT_CONNECT */
		res.error = ck_xasprintf("%s: %s", r->watch ? "watch" : "list",
		                         message ? message : "connection refused");
	} else if (http_code < 200 || http_code >= 300) {
		res.status.code = http_code;
		res.status.status = ck_xstrdup("Failure");
		res.status.reason = ck_xstrdup(reason);
		res.status.message = ck_xstrdup(message);
		res.status.retry_after_seconds = retry_after_s;
		res.error = ck_xasprintf("HTTP %d %s: %s", http_code, reason ? reason : "",
		                         message ? message : "");
	}
	r->done(r->ud, &res);
	ck_result_clear(&res);
}

void ck_cache_fake_req_finish_transport(ck_cache_fake_req_t *r, int curl_code, int head_code,
                                        const char *message)
{
	if (!ck_cache_fake_req_active(r))
		return;
	r->finished = true;
	ck_result_t res;
	memset(&res, 0, sizeof(res));
	res.transport_code = curl_code;
	res.head_code = head_code;
	res.error = ck_xasprintf("%s: %s (curl error %d)", r->watch ? "watch" : "list",
	                         message ? message : "transport error", curl_code);
	r->done(r->ud, &res);
	ck_result_clear(&res);
}
