/*
 * reflector: keeps a delta queue fed from the API server: a streaming list (a
 * watch with sendInitialEvents, by default where the source can) or a paged list,
 * then a watch from that resourceVersion, forever, on the loop thread.
 *
 * Design note. The reflector is a small state machine -- LISTING, WATCHING,
 * BACKOFF -- driven by three kinds of input: request callbacks (items, events,
 * done), and cache_reflector_tick() at the deadline it publishes (a retry after
 * backoff, a watch that ended with an ERROR event, a watch that went silent).
 * It owns no timer: its informer arms one libev timer at the published
 * deadline, and tests call the tick by hand with a fake clock. Every delay is
 * computed from the injected clock by pure functions (util.c).
 *
 * Retry policy (REFERENCE.md, client-go's reflector: ListAndWatch, watch(),
 * handleWatch, isWatchErrorRetriable; a "round" is one ListAndWatch):
 *   first list                       -> resourceVersion="0", pages of 500
 *   relist from the last RV          -> no limit (served by the watch cache as "not
 *                                       older than"), unless the first list came in
 *                                       pages (then the server has no watch cache)
 *   list 410 on a continue token     -> one full list, no limit, at the RV first asked for
 *   list 410 / "too large RV"        -> relist at once from resourceVersion=""
 *   watch clean close                -> re-watch at once from the last RV
 *   ... within 1s without any event  -> relist after backoff ("very short watch")
 *   connection cut mid-stream        -> a clean close (the answer's head had come, or
 *                                       events): re-watch at once, nothing reported
 *   watch refused at connect, or 429 -> re-watch after backoff (429: Retry-After)
 *     (request or ERROR event)
 *   watch 410 (request or ERROR)     -> relist after backoff, quietly, from the last RV
 *                                       (not ""): the RV is not marked unavailable
 *   anything else on a watch: 5xx,   -> relist after backoff, from the last RV
 *     ERROR 500, "too large RV", a
 *     failure before any answer
 *   a list that fails otherwise      -> relist after backoff
 * Streaming list (client-go's watchList; every round starts with one):
 *   ended/cut before the end bookmark -> stream again at once (what came is void)
 *   ... within 1s without any event  -> this round lists instead
 *   410 / "too large RV"             -> stream again at once from resourceVersion=""
 *                                       (twice: this round lists instead)
 *   refused at connect, or 429       -> stream again after backoff
 *   anything else (4xx of a gated    -> this round lists instead; the next round
 *     server, 5xx, ERROR)               streams again
 *   MODIFIED/DELETED before the end  -> applied to the state being assembled
 * Errors are reported to the sink on every attempt but logged once per change
 * of message, so a missing CRD or RBAC rule does not flood the log.
 */
#include "pkg/cache/internal.h"
#include <ckube/log.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef enum rstate {
	R_IDLE,
	R_LISTING,
	R_WATCHING,
	R_BACKOFF,
	R_STOPPED,
} rstate_t;

typedef enum raction {
	A_RELIST,
	A_REWATCH,
} raction_t;

#define INITIAL_EVENTS_END "k8s.io/initial-events-end"

struct cache_reflector {
	ck_cache_lw_t *lw;
	const ck_clk_t *clk;
	cache_reflector_opts_t o; /* strings owned */
	cache_reflector_sink_t sink;
	void *ud;

	rstate_t state;
	ck_cache_lw_req_t *req;
	uint64_t seq;
	bool inflight;

	char *last_rv;
	bool rv_unavailable; /* after 410/too-large: the next list asks for "" */
	bool listed_once;
	bool watched_once;

	/* The list being assembled (or a streaming list's initial events). */
	ck_obj_t **items;
	size_t nitems, capitems;
	char *list_rv;
	char *cont;
	char *list_rv_param;
	bool page_had_cont;
	bool full_fallback;
	bool paginated; /* the first list came in pages: this server pages (no watch cache) */

	/* Streaming list (client-go's watchList). */
	bool use_stream;      /* streaming lists, decided once at start (client-go: NewReflector) */
	bool fallback_list;   /* this round lists: its streaming list failed */
	bool fell_back;       /* this round fell back (for tests and messages) */
	bool warned_fallback; /* the fallback was logged as a warning once */

	/* The watch. */
	bool initial_phase;
	uint64_t watch_start_ns;
	uint64_t last_activity_ns;
	int64_t watch_timeout_s;
	uint64_t watch_events;
	bool closing;
	ck_status_t err_status;

	cache_backoff_t bo;
	uint64_t retry_at_ns;
	raction_t next_action;
	char *last_err;

	_Atomic uint64_t n_lists, n_lists_done, n_relists, n_watches, n_watch_restarts, n_stalls,
	    n_errors, n_events, n_shard_dropped;
	_Atomic int64_t last_event_wall_ns;
	_Atomic int shard_mode;      /* ck_cache_shard_mode_t */
	uint64_t list_shard_dropped; /* n_shard_dropped when the current list began */
};

static void start_list(cache_reflector_t *r);
static void start_watch(cache_reflector_t *r, bool initial);

/* ---------------------------------------------------------------- helpers */

static uint64_t now_ns(const cache_reflector_t *r)
{
	return ck_clk_mono_ns(r->clk);
}

static void set_str(char **dst, const char *src)
{
	char *n = ck_xstrdup(src ? src : "");
	free(*dst);
	*dst = n;
}

static void drop_items(cache_reflector_t *r)
{
	for (size_t i = 0; i < r->nitems; i++)
		ck_obj_unref(r->items[i]);
	free(r->items);
	r->items = NULL;
	r->nitems = r->capitems = 0;
}

static void push_item(cache_reflector_t *r, ck_obj_t *obj)
{
	if (r->nitems == r->capitems) {
		r->capitems = r->capitems ? r->capitems * 2 : 64;
		r->items = ck_xrealloc(r->items, r->capitems * sizeof(*r->items));
	}
	r->items[r->nitems++] = obj;
}

static void status_copy(ck_status_t *dst, const ck_status_t *src)
{
	ck_status_clear(dst);
	if (src == NULL)
		return;
	dst->code = src->code;
	dst->status = ck_xstrdup(src->status);
	dst->reason = ck_xstrdup(src->reason);
	dst->message = ck_xstrdup(src->message);
	dst->details_name = ck_xstrdup(src->details_name);
	dst->details_kind = ck_xstrdup(src->details_kind);
	dst->details_group = ck_xstrdup(src->details_group);
	dst->retry_after_seconds = src->retry_after_seconds;
	dst->causes = ck_xstrdup(src->causes);
}

static bool non_healing(const ck_result_t *res)
{
	return res != NULL && (ck_result_is_forbidden(res) || ck_result_is_not_found(res) ||
	                       ck_result_is_unauthorized(res));
}

/* "list foos.samplecontroller.k8s.io: <the server's words>" */
static char *fmt_error(const cache_reflector_t *r, const char *what, const ck_result_t *res)
{
	const char *detail = NULL;
	if (res == NULL)
		return ck_xasprintf("%s %s: failed", what ? what : "request", r->o.name);
	if (res->status.message != NULL && res->status.message[0] != '\0')
		detail = res->status.message;
	else if (res->error != NULL && res->error[0] != '\0')
		detail = res->error;
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_printf(&b, "%s %s: ", what, r->o.name);
	if (detail != NULL)
		ck_sbuf_puts(&b, detail);
	else
		ck_sbuf_printf(&b, "HTTP %d", res->http_code);
	if (ck_result_is_not_found(res))
		ck_sbuf_puts(&b, " (is the resource served: API group enabled, CRD installed?)");
	return ck_sbuf_steal(&b);
}

static void cancel_req(cache_reflector_t *r)
{
	if (r->inflight && r->req != NULL)
		r->lw->ops->cancel(r->lw, r->req);
	r->req = NULL;
	r->inflight = false;
}

static void recovered(cache_reflector_t *r)
{
	if (r->last_err == NULL)
		return;
	CK_LOG_INFO("List/watch recovered", CK_KV_STR("resource", r->o.name),
	            CK_KV_STR("previousError", r->last_err));
	free(r->last_err);
	r->last_err = NULL;
}

/*
 * A failed attempt: log it if the message is new, schedule the retry, then tell
 * the sink (last: the sink's callback may shut the informer down).
 * Either res or msg is given. quiet: routine (410), logged at V(2) only. report:
 * the sink's error callback runs -- where client-go's ListAndWatch returns an
 * error to its WatchErrorHandler: a failed list, a watch request that failed or
 * was answered with an error (410 included, 429 and refusals excepted: retried);
 * not a stream that ended with an ERROR event, a cut or a very short watch.
 */
static void fail(cache_reflector_t *r, const char *what, const ck_result_t *res, const char *msg,
                 raction_t action, bool quiet, bool report)
{
	char *m = msg ? ck_xstrdup(msg) : fmt_error(r, what, res);
	bool healing = !non_healing(res);
	atomic_fetch_add(&r->n_errors, 1);
	if (quiet) {
		CK_LOG_V(2, "List/watch will retry", CK_KV_STR("resource", r->o.name),
		         CK_KV_ERR(m));
	} else if (r->last_err == NULL || strcmp(r->last_err, m) != 0) {
		if (healing)
			CK_LOG_WARN("List/watch failed, will retry",
			            CK_KV_STR("resource", r->o.name), CK_KV_ERR(m));
		else
			CK_LOG_ERROR(m, "List/watch failed and will not heal by retrying",
			             CK_KV_STR("resource", r->o.name));
		set_str(&r->last_err, m);
	} else {
		CK_LOG_V(4, "List/watch failed again", CK_KV_STR("resource", r->o.name),
		         CK_KV_ERR(m));
	}
	uint64_t now = now_ns(r);
	uint64_t delay = cache_backoff_next(&r->bo, now, ck_rand_unit());
	/* The REST client has already spent its Retry-After retries: back off as for
	 * any error (a Retry-After of 1 s would otherwise pace us forever), but never
	 * come back sooner than the server asked. */
	if (res != NULL && ck_result_is_too_many_requests(res) &&
	    res->status.retry_after_seconds > 0 &&
	    delay < (uint64_t)res->status.retry_after_seconds * CK_NS_PER_SEC)
		delay = (uint64_t)res->status.retry_after_seconds * CK_NS_PER_SEC;
	r->state = R_BACKOFF;
	r->retry_at_ns = now + delay;
	r->next_action = action;
	r->sink.rearm(r->ud);
	if (report)
		r->sink.error(r->ud, m, res, healing);
	free(m);
}

/* ---------------------------------------------------------------- requests */

static void on_item(void *ud, ck_obj_t *obj);
static void on_list_meta(void *ud, const char *rv, const char *cont, int64_t remaining);
static void on_event(void *ud, ck_watch_type_t type, ck_obj_t *obj, const ck_status_t *status);
static void list_done_cb(void *ud, ck_result_t *res);
static void watch_done_cb(void *ud, ck_result_t *res);

static const ck_dec_cb_t list_cb = {.on_object = on_item, .on_list_meta = on_list_meta};
static const ck_dec_cb_t watch_cb = {.on_event = on_event};

static void issue(cache_reflector_t *r, bool watch, const ck_list_opts_t *o)
{
	char *err = NULL;
	uint64_t seq = ++r->seq;
	r->inflight = true;
	ck_cache_lw_req_t *h = watch
	                           ? r->lw->ops->watch(r->lw, o, &watch_cb, watch_done_cb, r, &err)
	                           : r->lw->ops->list(r->lw, o, &list_cb, list_done_cb, r, &err);
	if (h == NULL) {
		r->inflight = false;
		char *m = ck_xasprintf("%s %s: %s", watch ? "watch" : "list", r->o.name,
		                       err ? err : "cannot start the request");
		free(err);
		bool relist = !watch || r->initial_phase;
		r->fallback_list = false;
		drop_items(r);
		r->initial_phase = false;
		fail(r, NULL, NULL, m, relist ? A_RELIST : A_REWATCH, false, true);
		free(m);
		return;
	}
	/* A done callback run from inside the call has already moved on. */
	if (r->seq == seq && r->inflight)
		r->req = h;
}

static void base_opts(const cache_reflector_t *r, ck_list_opts_t *o)
{
	memset(o, 0, sizeof(*o));
	o->label_selector = r->o.label_selector;
	o->field_selector = r->o.field_selector;
	o->shard_selector = r->o.shard ? ck_shard_selector_string(r->o.shard) : NULL;
}

/* ---------------------------------------------------------------- shards */

static void set_shard_mode(cache_reflector_t *r, ck_cache_shard_mode_t m, const char *why)
{
	if (atomic_exchange(&r->shard_mode, (int)m) == (int)m)
		return;
	CK_LOG_INFO("Shard selector applied", CK_KV_STR("resource", r->o.name),
	            CK_KV_STR("mode", ck_cache_shard_mode_name(m)), CK_KV_STR("why", why),
	            CK_KV_STR("shardSelector", ck_shard_selector_string(r->o.shard)));
}

/*
 * The client-side half of sharding: false (and obj counted) when obj is outside
 * the selector -- the server sent it, so it did not filter. Filtering twice is
 * harmless; namespace and uid are immutable, so an object that matched once
 * always does and no delete is ever needed for one that "left".
 */
static bool shard_keep(cache_reflector_t *r, const ck_obj_t *obj)
{
	if (r->o.shard == NULL || ck_shard_selector_match(r->o.shard, obj))
		return true;
	atomic_fetch_add(&r->n_shard_dropped, 1);
	set_shard_mode(r, CK_CACHE_SHARD_CLIENT, "the server sent an object outside the selector");
	return false;
}

/* A complete list or streaming list: nothing outside the selector means the
 * server filtered. */
static void shard_list_done(cache_reflector_t *r, size_t kept)
{
	if (r->o.shard == NULL)
		return;
	/* An empty list proves nothing: a server that ignores the selector would have
	 * sent the same nothing. */
	if (kept > 0 && atomic_load(&r->n_shard_dropped) == r->list_shard_dropped)
		set_shard_mode(r, CK_CACHE_SHARD_SERVER,
		               "the list held objects, none outside the selector");
}

/* ---------------------------------------------------------------- list */

static const char *relist_rv(const cache_reflector_t *r)
{
	if (r->rv_unavailable)
		return "";
	return r->last_rv[0] != '\0' ? r->last_rv : "0";
}

static void list_page(cache_reflector_t *r)
{
	ck_list_opts_t o;
	base_opts(r, &o);
	char *cont = r->cont;
	r->cont = NULL;
	r->page_had_cont = false;
	if (r->full_fallback) {
		/* The pages so far are void: one unpaged list at the resourceVersion first
		 * asked for, as client-go's pager does ("0" is served by the watch cache; ""
		 * would be a quorum read of the whole collection from etcd). */
		o.resource_version = r->list_rv_param;
	} else if (cont != NULL && cont[0] != '\0') {
		/* A continue token carries its own resourceVersion. */
		o.continue_token = cont;
		o.limit = r->o.page_size;
		r->page_had_cont = true;
	} else {
		o.resource_version = r->list_rv_param;
		/* A list from a given resourceVersion with a limit is served by etcd at exactly
		 * that version; without one, the watch cache serves it as "not older than",
		 * at a version its watches can continue from. Page it only where the server
		 * paged the first list anyway (client-go does the same). */
		bool specific = r->list_rv_param[0] != '\0' && strcmp(r->list_rv_param, "0") != 0;
		o.limit = specific && !r->paginated ? 0 : r->o.page_size;
	}
	r->state = R_LISTING;
	CK_LOG_V(3, "Listing", CK_KV_STR("resource", r->o.name),
	         CK_KV_STR("resourceVersion", o.resource_version), CK_KV_INT("limit", o.limit),
	         CK_KV_BOOL("continue", o.continue_token != NULL));
	issue(r, false, &o);
	free(cont);
}

/* A paged list, this round's or the fallback of its streaming list. */
static void plain_list(cache_reflector_t *r)
{
	drop_items(r);
	free(r->cont);
	r->cont = NULL;
	free(r->list_rv);
	r->list_rv = NULL;
	r->full_fallback = false;
	set_str(&r->list_rv_param, relist_rv(r));
	list_page(r);
}

/* Starts a round's list (client-go's ListAndWatch). */
static void start_list(cache_reflector_t *r)
{
	atomic_fetch_add(&r->n_lists, 1);
	if (r->listed_once)
		atomic_fetch_add(&r->n_relists, 1);
	r->listed_once = true;
	r->list_shard_dropped = atomic_load(&r->n_shard_dropped);
	if (r->use_stream && !r->fallback_list) {
		r->fell_back = false;
		start_watch(r, true);
		return;
	}
	plain_list(r);
}

static void on_item(void *ud, ck_obj_t *obj)
{
	cache_reflector_t *r = ud;
	if (r->state != R_LISTING || obj == NULL) {
		ck_obj_unref(obj);
		return;
	}
	CACHE_TRACE(obj, "list-item", CK_KV_STR("resource", r->o.name), CK_KV_STR("rv", obj->rv));
	if (!shard_keep(r, obj)) {
		ck_obj_unref(obj);
		return;
	}
	push_item(r, obj);
}

static void on_list_meta(void *ud, const char *rv, const char *cont, int64_t remaining)
{
	cache_reflector_t *r = ud;
	(void)remaining;
	if (r->state != R_LISTING)
		return;
	if (rv != NULL && rv[0] != '\0')
		set_str(&r->list_rv, rv);
	free(r->cont);
	r->cont = (cont != NULL && cont[0] != '\0') ? ck_xstrdup(cont) : NULL;
}

/* Hands a complete list to the sink and moves on to the watch. */
static void list_complete(cache_reflector_t *r, const char *rv)
{
	ck_obj_t **items = r->items;
	size_t n = r->nitems;
	r->items = NULL;
	r->nitems = r->capitems = 0;
	set_str(&r->last_rv, rv);
	r->rv_unavailable = false;
	r->fallback_list = false; /* the next round streams again */
	atomic_fetch_add(&r->n_lists_done, 1);
	atomic_store(&r->last_event_wall_ns, ck_clk_wall_ns(r->clk));
	CK_LOG_V(3, "Listed", CK_KV_STR("resource", r->o.name), CK_KV_STR("resourceVersion", rv),
	         CK_KV_UINT("objects", n));
	shard_list_done(r, n);
	recovered(r);
	r->sink.replace(r->ud, items, n, r->last_rv);
}

static void list_done(cache_reflector_t *r, ck_result_t *res)
{
	if (ck_result_ok(res)) {
		if (r->cont != NULL && !r->full_fallback) {
			if (!r->page_had_cont && strcmp(r->list_rv_param, "0") == 0)
				r->paginated = true;
			list_page(r);
			return;
		}
		char *rv = r->list_rv ? r->list_rv : ck_xstrdup("");
		r->list_rv = NULL;
		list_complete(r, rv);
		free(rv);
		if (r->state == R_LISTING)
			start_watch(r, false);
		return;
	}
	drop_items(r);
	free(r->cont);
	r->cont = NULL;
	if (ck_result_is_gone(res) && r->page_had_cont && !r->full_fallback) {
		CK_LOG_V(2, "List continue token expired, listing in full",
		         CK_KV_STR("resource", r->o.name));
		r->full_fallback = true;
		list_page(r);
		return;
	}
	if ((ck_result_is_gone(res) || ck_result_is_rv_too_large(res)) && !r->rv_unavailable &&
	    r->list_rv_param[0] != '\0') {
		/* Our resourceVersion is compacted away or ahead of this server: the one
		 * list that cannot fail that way is the most recent state. */
		CK_LOG_V(2, "List resourceVersion unavailable, listing the most recent state",
		         CK_KV_STR("resource", r->o.name),
		         CK_KV_STR("resourceVersion", r->list_rv_param));
		r->rv_unavailable = true;
		start_list(r); /* still this round: a fallback lists again */
		return;
	}
	r->fallback_list = false; /* the round ends: the next one streams again */
	fail(r, "list", res, NULL, A_RELIST, false, true);
}

static void list_done_cb(void *ud, ck_result_t *res)
{
	cache_reflector_t *r = ud;
	r->inflight = false;
	r->req = NULL;
	if (r->state != R_LISTING)
		return;
	list_done(r, res);
}

/* ---------------------------------------------------------------- watch */

static void start_watch(cache_reflector_t *r, bool initial)
{
	ck_list_opts_t o;
	base_opts(r, &o);
	atomic_fetch_add(&r->n_watches, 1);
	if (r->watched_once)
		atomic_fetch_add(&r->n_watch_restarts, 1);
	r->watched_once = true;
	r->watch_timeout_s = cache_watch_timeout_s(r->o.watch_timeout_min_s,
	                                           r->o.watch_timeout_max_s, ck_rand_unit());
	o.allow_watch_bookmarks = true;
	o.timeout_seconds = r->watch_timeout_s;
	if (initial) {
		drop_items(r);
		r->list_shard_dropped = atomic_load(&r->n_shard_dropped);
		o.send_initial_events = true;
		o.resource_version_match = "NotOlderThan";
		o.resource_version = r->rv_unavailable ? "" : r->last_rv;
	} else {
		o.resource_version = r->last_rv;
	}
	r->initial_phase = initial;
	r->watch_start_ns = r->last_activity_ns = now_ns(r);
	r->watch_events = 0;
	r->closing = false;
	ck_status_clear(&r->err_status);
	r->state = R_WATCHING;
	CK_LOG_V(3, "Watching", CK_KV_STR("resource", r->o.name),
	         CK_KV_STR("resourceVersion", o.resource_version),
	         CK_KV_INT("timeoutSeconds", o.timeout_seconds),
	         CK_KV_BOOL("sendInitialEvents", initial));
	issue(r, true, &o);
	if (r->state == R_WATCHING)
		r->sink.rearm(r->ud);
}

static void end_initial_phase(cache_reflector_t *r, const char *rv)
{
	r->initial_phase = false;
	r->fell_back = false;
	list_complete(r, rv);
}

static bool str_eq(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

/*
 * An event of a streaming list before its end bookmark, applied to the state
 * being assembled as client-go's watchList applies it to a temporary store: the
 * initial events are ADDED, but a MODIFIED or DELETED is not dropped. Lookups
 * scan from the end (rare events; the array keeps the server's order).
 */
static void initial_event(cache_reflector_t *r, ck_watch_type_t type, ck_obj_t *obj)
{
	if (type == CK_WATCH_ADDED) {
		push_item(r, obj);
		return;
	}
	size_t i = r->nitems;
	while (i > 0 &&
	       !(str_eq(r->items[i - 1]->name, obj->name) && str_eq(r->items[i - 1]->ns, obj->ns)))
		i--;
	if (type == CK_WATCH_MODIFIED) {
		if (i == 0) {
			push_item(r, obj);
		} else {
			ck_obj_unref(r->items[i - 1]);
			r->items[i - 1] = obj;
		}
		return;
	}
	/* DELETED */
	if (i > 0) {
		ck_obj_unref(r->items[i - 1]);
		memmove(&r->items[i - 1], &r->items[i], (r->nitems - i) * sizeof(*r->items));
		r->nitems--;
	}
	ck_obj_unref(obj);
}

static void on_event(void *ud, ck_watch_type_t type, ck_obj_t *obj, const ck_status_t *status)
{
	cache_reflector_t *r = ud;
	if (r->state != R_WATCHING || r->closing) {
		ck_obj_unref(obj);
		return;
	}
	r->last_activity_ns = now_ns(r);
	r->watch_events++;
	atomic_fetch_add(&r->n_events, 1);
	atomic_store(&r->last_event_wall_ns, ck_clk_wall_ns(r->clk));
	switch (type) {
	case CK_WATCH_ADDED:
	case CK_WATCH_MODIFIED:
	case CK_WATCH_DELETED:
		if (obj == NULL)
			return;
		CACHE_TRACE(obj, "watch-event", CK_KV_STR("resource", r->o.name),
		            CK_KV_STR("type", ck_watch_type_name(type)), CK_KV_STR("rv", obj->rv),
		            CK_KV_BOOL("initialEvents", r->initial_phase));
		if (!r->initial_phase && obj->rv[0] != '\0')
			set_str(&r->last_rv, obj->rv); /* a dropped event still moves the rv on */
		if (!shard_keep(r, obj)) {
			ck_obj_unref(obj);
			return;
		}
		if (r->initial_phase) {
			initial_event(r, type, obj);
			return;
		}
		r->sink.event(r->ud, type, obj);
		return;
	case CK_WATCH_BOOKMARK:
		if (obj == NULL)
			return;
		if (r->initial_phase) {
			const char *end = ck_obj_annotation(obj, INITIAL_EVENTS_END);
			if (end != NULL && strcmp(end, "true") == 0)
				end_initial_phase(r, obj->rv);
		} else if (obj->rv[0] != '\0') {
			set_str(&r->last_rv, obj->rv);
		}
		ck_obj_unref(obj);
		return;
	case CK_WATCH_ERROR:
		ck_obj_unref(obj);
		/* Ending the request from inside its own callback is not ours to do:
		 * ask for an immediate tick. */
		status_copy(&r->err_status, status);
		if (status == NULL)
			r->err_status.code = 500;
		r->closing = true;
		r->sink.rearm(r->ud);
		return;
	}
	ck_obj_unref(obj);
}

/*
 * This round lists instead (client-go: "falling back to regular list"). res, if
 * any, is why: a 401/403/404 is the list's to report (it will fail the same way),
 * so only other reasons are worth a warning, once.
 */
static void fall_back(cache_reflector_t *r, const char *why, const ck_result_t *res)
{
	r->fell_back = true;
	r->fallback_list = true;
	if (!r->warned_fallback && !non_healing(res)) {
		r->warned_fallback = true;
		CK_LOG_WARN("Streaming list failed, listing instead for this round",
		            CK_KV_STR("resource", r->o.name), CK_KV_STR("reason", why));
	} else {
		CK_LOG_V(2, "Streaming list failed, listing instead for this round",
		         CK_KV_STR("resource", r->o.name), CK_KV_STR("reason", why));
	}
	plain_list(r);
}

/*
 * A streaming list ended before its end bookmark (client-go's watchList): closed
 * = the stream ended or was cut after its answer, else res is the error. What
 * was assembled is void either way.
 */
static void stream_ended(cache_reflector_t *r, const ck_result_t *res, bool closed)
{
	drop_items(r);
	if (closed) {
		if (r->watch_events == 0 && now_ns(r) - r->watch_start_ns < CK_NS_PER_SEC) {
			fall_back(r, "the stream closed within 1s without any event", NULL);
			return;
		}
		/* Part of the state came: ask for all of it again, at once. */
		CK_LOG_V(2, "Streaming list ended before the initial-events-end bookmark, again",
		         CK_KV_STR("resource", r->o.name), CK_KV_UINT("events", r->watch_events));
		start_watch(r, true);
		return;
	}
	if ((ck_result_is_gone(res) || ck_result_is_rv_too_large(res)) && !r->rv_unavailable) {
		/* Our resourceVersion is gone or ahead: stream the most recent state, at once. */
		r->rv_unavailable = true;
		start_watch(r, true);
		return;
	}
	if (ck_result_is_connection_refused(res) || ck_result_is_too_many_requests(res)) {
		/* isWatchErrorRetriable: back off, then stream again. Reported: client-go
		 * falls back to a list here, whose failure reaches its WatchErrorHandler
		 * (and the reason an informer is not synced must say the server is down). */
		fail(r, "watch", res, NULL, A_RELIST, false, !ck_result_is_too_many_requests(res));
		return;
	}
	/* Refused (an old or gated server: 4xx), 5xx, an ERROR event: list instead. */
	char *m = fmt_error(r, "watch", res);
	fall_back(r, m, res);
	free(m);
}

/* The watch is over: res is the request's result, or NULL after an ERROR event. */
static void watch_ended(cache_reflector_t *r, const ck_result_t *res)
{
	ck_result_t synth;
	char *synth_err = NULL;
	bool errored = r->closing;
	if (errored) {
		memset(&synth, 0, sizeof(synth));
		synth.http_code = r->err_status.code > 0 ? r->err_status.code : 500;
		synth.status = r->err_status;
		synth_err =
		    ck_xasprintf("watch ERROR event: %s",
		                 r->err_status.message ? r->err_status.message : "(no message)");
		synth.error = synth_err;
		res = &synth;
	}
	r->closing = false;
	bool initial = r->initial_phase;
	r->initial_phase = false;
	r->state = R_IDLE;
	CK_LOG_V(3, "Watch ended", CK_KV_STR("resource", r->o.name),
	         CK_KV_INT("code", res->http_code), CK_KV_STR("error", res->error),
	         CK_KV_UINT("events", r->watch_events));

	/* A connection cut after the watch was answered is a stream that ended, as for
	 * client-go's stream watcher (a probable EOF is a close, not an error). */
	bool cut = !errored && ck_result_is_transport(res) &&
	           ((res->head_code >= 200 && res->head_code < 300) || r->watch_events > 0);
	bool closed = !errored && (ck_result_ok(res) || cut);
	if (initial) {
		stream_ended(r, res, closed);
		goto out;
	}
	if (closed) {
		if (r->watch_events == 0 && now_ns(r) - r->watch_start_ns < CK_NS_PER_SEC) {
			/* client-go's "very short watch": the round ends, a relist follows. */
			char *m =
			    ck_xasprintf("watch %s: closed within 1s without any event", r->o.name);
			fail(r, NULL, NULL, m, A_RELIST, false, false);
			free(m);
		} else {
			start_watch(r, false);
		}
		goto out;
	}
	if (ck_result_is_gone(res)) {
		/* Routine. The relist asks for the last RV, not "": a list at an RV is "not
		 * older than" (the watch cache serves it); should that 410 too, the list path
		 * moves to the most recent state. client-go does not mark the RV unavailable
		 * here either. */
		fail(r, "watch", res, NULL, A_RELIST, true, !errored);
	} else if (ck_result_is_connection_refused(res) || ck_result_is_too_many_requests(res)) {
		/* client-go's isWatchErrorRetriable: the server is down or shedding load, our
		 * resourceVersion is still good. Retried, not reported. */
		fail(r, "watch", res, NULL, A_REWATCH, false, false);
	} else {
		/* 5xx, an ERROR event, a failure before any answer other than a refusal: the
		 * ListAndWatch round ends; the next starts with a list. Reported when the
		 * request itself failed (client-go's ListAndWatch returns that error to its
		 * WatchErrorHandler), not when a stream ended with an ERROR event. */
		fail(r, "watch", res, NULL, A_RELIST, false, !errored);
	}
out:
	free(synth_err);
	/* synth borrowed err_status' strings; they go now. */
	ck_status_clear(&r->err_status);
}

static void watch_done_cb(void *ud, ck_result_t *res)
{
	cache_reflector_t *r = ud;
	r->inflight = false;
	r->req = NULL;
	if (r->state != R_WATCHING)
		return;
	watch_ended(r, res);
}

/* ---------------------------------------------------------------- public */

static char *dup_or_null(const char *s)
{
	return s && s[0] ? ck_xstrdup(s) : NULL;
}

/*
 * client-go decides once, in NewReflector: its WatchListClient gate (on since
 * 1.35; KUBE_FEATURE_WatchListClient=false turns it off), unless the client
 * cannot do WatchList semantics (its fakes).
 */
static bool use_streaming(const ck_cache_lw_t *lw, ck_cache_streaming_t s)
{
	if (s == CK_CACHE_STREAMING_ON)
		return true;
	if (s == CK_CACHE_STREAMING_OFF || lw->no_watch_list)
		return false;
	const char *env = getenv("KUBE_FEATURE_WatchListClient");
	if (env == NULL)
		return true;
	/* Go's strconv.ParseBool spellings of false. */
	static const char *const no[] = {"0", "f", "F", "false", "FALSE", "False"};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (strcmp(env, no[i]) == 0)
			return false;
	return true;
}

cache_reflector_t *cache_reflector_new(ck_cache_lw_t *lw, const ck_clk_t *clk,
                                       const cache_reflector_opts_t *o,
                                       const cache_reflector_sink_t *sink, void *ud)
{
	cache_reflector_t *r = ck_xcalloc(1, sizeof(*r));
	r->lw = lw;
	r->clk = clk ? clk : ck_clk_real();
	r->o = *o;
	r->o.name = ck_xstrdup(o->name ? o->name : "objects");
	r->o.label_selector = dup_or_null(o->label_selector);
	r->o.field_selector = dup_or_null(o->field_selector);
	r->o.shard = ck_shard_selector_dup(o->shard);
	atomic_store(&r->shard_mode,
	             (int)(o->shard ? CK_CACHE_SHARD_UNKNOWN : CK_CACHE_SHARD_NONE));
	if (r->o.page_size == 0)
		r->o.page_size = 500;
	if (r->o.backoff_initial_ns == 0)
		r->o.backoff_initial_ns = 800 * CK_NS_PER_MS;
	if (r->o.backoff_max_ns == 0)
		r->o.backoff_max_ns = 30 * CK_NS_PER_SEC;
	if (r->o.backoff_reset_ns == 0)
		r->o.backoff_reset_ns = 120 * CK_NS_PER_SEC;
	if (r->o.watch_timeout_min_s <= 0)
		r->o.watch_timeout_min_s = 300;
	if (r->o.watch_timeout_max_s < r->o.watch_timeout_min_s)
		r->o.watch_timeout_max_s =
		    r->o.watch_timeout_min_s == 300 ? 600 : r->o.watch_timeout_min_s;
	if (r->o.stall_margin_ns == 0)
		r->o.stall_margin_ns = 30 * CK_NS_PER_SEC;
	r->sink = *sink;
	r->ud = ud;
	r->last_rv = ck_xstrdup("");
	r->list_rv_param = ck_xstrdup("");
	cache_backoff_init(&r->bo, r->o.backoff_initial_ns, r->o.backoff_max_ns,
	                   r->o.backoff_reset_ns, 1.0);
	return r;
}

void cache_reflector_start(cache_reflector_t *r)
{
	if (r->state != R_IDLE || r->listed_once)
		return;
	r->use_stream = use_streaming(r->lw, r->o.streaming_list);
	start_list(r);
}

void cache_reflector_stop(cache_reflector_t *r)
{
	if (r == NULL)
		return;
	cancel_req(r);
	r->state = R_STOPPED;
	r->closing = false;
	drop_items(r);
}

void cache_reflector_free(cache_reflector_t *r)
{
	if (r == NULL)
		return;
	cache_reflector_stop(r);
	free(r->last_rv);
	free(r->list_rv);
	free(r->cont);
	free(r->list_rv_param);
	free(r->last_err);
	ck_status_clear(&r->err_status);
	free((char *)r->o.name);
	free((char *)r->o.label_selector);
	free((char *)r->o.field_selector);
	ck_shard_selector_free((ck_shard_selector_t *)r->o.shard);
	free(r);
}

uint64_t cache_reflector_deadline(const cache_reflector_t *r)
{
	switch (r->state) {
	case R_BACKOFF:
		return r->retry_at_ns;
	case R_WATCHING:
		if (r->closing)
			return 0;
		return cache_watch_stall_deadline(r->last_activity_ns, r->watch_timeout_s,
		                                  r->o.stall_margin_ns);
	default:
		return UINT64_MAX;
	}
}

void cache_reflector_tick(cache_reflector_t *r, uint64_t now)
{
	if (r->state == R_BACKOFF) {
		if (now < r->retry_at_ns)
			return;
		r->state = R_IDLE;
		if (r->next_action == A_RELIST)
			start_list(r);
		else
			start_watch(r, false);
		return;
	}
	if (r->state != R_WATCHING)
		return;
	if (r->closing) {
		cancel_req(r);
		watch_ended(r, NULL);
		return;
	}
	if (now < cache_reflector_deadline(r))
		return;
	/* No event, no bookmark, not even the server's own timeout closing the stream:
	 * the connection is dead in a way TCP did not notice. */
	cancel_req(r);
	atomic_fetch_add(&r->n_stalls, 1);
	bool initial = r->initial_phase;
	r->initial_phase = false;
	drop_items(r);
	char *m = ck_xasprintf("watch %s: no data for %llus (timeout %llds + margin); replacing it",
	                       r->o.name,
	                       (unsigned long long)((now - r->last_activity_ns) / CK_NS_PER_SEC),
	                       (long long)r->watch_timeout_s);
	r->state = R_IDLE;
	fail(r, NULL, NULL, m, initial ? A_RELIST : A_REWATCH, false, true);
	free(m);
}

void cache_reflector_stats(const cache_reflector_t *r, cache_reflector_stats_t *out)
{
	cache_reflector_t *m = (cache_reflector_t *)(uintptr_t)r;
	out->lists = atomic_load(&m->n_lists);
	out->lists_done = atomic_load(&m->n_lists_done);
	out->relists = atomic_load(&m->n_relists);
	out->watches = atomic_load(&m->n_watches);
	out->watch_restarts = atomic_load(&m->n_watch_restarts);
	out->stalls = atomic_load(&m->n_stalls);
	out->errors = atomic_load(&m->n_errors);
	out->events = atomic_load(&m->n_events);
	out->last_event_wall_ns = atomic_load(&m->last_event_wall_ns);
	out->shard_mode = (ck_cache_shard_mode_t)atomic_load(&m->shard_mode);
	out->shard_dropped = atomic_load(&m->n_shard_dropped);
}

ck_cache_shard_mode_t cache_reflector_shard_mode(const cache_reflector_t *r)
{
	return (ck_cache_shard_mode_t)atomic_load(&((cache_reflector_t *)(uintptr_t)r)->shard_mode);
}

const char *ck_cache_shard_mode_name(ck_cache_shard_mode_t m)
{
	switch (m) {
	case CK_CACHE_SHARD_NONE:
		return "none";
	case CK_CACHE_SHARD_UNKNOWN:
		return "unknown";
	case CK_CACHE_SHARD_SERVER:
		return "server-side";
	case CK_CACHE_SHARD_CLIENT:
		return "client-side";
	}
	return "unknown";
}

const char *cache_reflector_last_rv(const cache_reflector_t *r)
{
	return r->last_rv;
}

bool cache_reflector_streaming_refused(const cache_reflector_t *r)
{
	return r->fell_back;
}

bool cache_reflector_watching(const cache_reflector_t *r)
{
	return r->state == R_WATCHING && !r->initial_phase && !r->closing;
}
