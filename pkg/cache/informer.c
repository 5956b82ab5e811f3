/*
 * informer: one kind's shared informer -- a reflector feeding a delta queue,
 * processed into the store and out to the registered handlers, on the loop
 * thread.
 *
 * Design note. Processing runs in an ev_check watcher (after every poll) in
 * batches of opts.batch deltas, with an ev_idle watcher active while work is
 * queued so that the loop does not block in poll meanwhile. A big relist thus
 * interleaves with network I/O instead of freezing the loop. client-go gives
 * each handler its own goroutine and unbounded buffer; here handlers are called
 * in turn on the loop thread (they must not block), which needs no buffers:
 * the one case client-go buffers for -- a handler added after start that must
 * first see every cached object -- is handled by pausing delta processing
 * while that handler is fed a snapshot of the store, as client-go does. The
 * snapshot is taken when its delivery starts, not when the handler is added:
 * a handler added from inside a callback would otherwise miss the deltas still
 * to be applied for the key being processed (they reach the store, not the
 * handler, whose snapshot is pending), and believe in a stale state.
 *
 * One libev timer serves the reflector's deadline (retry, stall) and the
 * handlers' resync deadlines; both are in the injected clock's time, so with a
 * fake clock tests run them by hand (cache_informer_tick).
 */
#include "pkg/cache/internal.h"
#include <ckube/log.h>

#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ck_cache_handler_reg {
	ck_cache_informer_t *inf;
	ck_cache_handler_t h;
	void *ud;
	uint64_t resync_ns;
	uint64_t next_resync_ns;
	bool syncing; /* its resync is due: it gets the unchanged-RV updates */
	bool removed;
	bool initial_done; /* got its snapshot (or had none to get) */
	uint64_t born;     /* the dispatch during which it was added (0: none) */
	_Atomic bool synced;
	bool snap_taken;      /* snap holds the store as of the start of its delivery */
	ck_cache_objs_t snap; /* objects still to send as adds (late handler) */
	size_t snap_pos;
	struct ck_cache_handler_reg *next;
};

struct ck_cache_informer {
	struct ev_loop *loop;
	const ck_type_t *type;
	char *name;
	ck_cache_lw_t *lw;
	ck_cache_store_t *store;
	cache_dq_t dq;
	cache_reflector_t *refl;
	const ck_clk_t *clk;
	uint64_t default_resync_ms; /* for ck_cache_informer_add_handler */
	uint64_t check_resync_ms;   /* client-go's resyncCheckPeriod: the shortest allowed */
	uint32_t batch;
	ck_cache_transform_fn transform;
	void *transform_ud;
	ck_cache_watch_error_fn on_watch_error;
	void *watch_error_ud;

	ck_cache_handler_reg_t *handlers, *handlers_tail;
	size_t nsnap_pending;
	int dispatching;
	uint64_t dispatch_id; /* of the outermost dispatch in progress */
	bool need_sweep;

	ev_timer timer;
	ev_check check;
	ev_idle idle;
	_Atomic bool started; /* read by sync_reason from any thread */
	bool stopped;

	pthread_mutex_t mu;
	pthread_cond_t cond;
	_Atomic bool synced;
	_Atomic bool wait_stopped;
	char *last_err; /* under mu */
	_Atomic bool have_tid;
	pthread_t loop_tid;
	_Atomic uint64_t n_deltas;
};

/* ---------------------------------------------------------------- scheduling */

static uint64_t resync_deadline(const ck_cache_informer_t *inf)
{
	uint64_t d = UINT64_MAX;
	for (const ck_cache_handler_reg_t *r = inf->handlers; r != NULL; r = r->next)
		if (!r->removed && r->resync_ns > 0 && r->next_resync_ns < d)
			d = r->next_resync_ns;
	return d;
}

static void rearm(ck_cache_informer_t *inf)
{
	if (!inf->started || inf->stopped)
		return;
	uint64_t d = cache_reflector_deadline(inf->refl);
	uint64_t rd = resync_deadline(inf);
	if (rd < d)
		d = rd;
	ev_timer_stop(inf->loop, &inf->timer);
	if (d == UINT64_MAX)
		return;
	uint64_t now = ck_clk_mono_ns(inf->clk);
	double after = d > now ? (double)(d - now) / 1e9 : 0.0;
	ev_timer_set(&inf->timer, after, 0.0);
	ev_timer_start(inf->loop, &inf->timer);
}

static void schedule(ck_cache_informer_t *inf)
{
	if (inf->started && !inf->stopped && !ev_is_active(&inf->idle))
		ev_idle_start(inf->loop, &inf->idle);
}

static void note_loop_thread(ck_cache_informer_t *inf)
{
	if (!atomic_load_explicit(&inf->have_tid, memory_order_relaxed)) {
		inf->loop_tid = pthread_self();
		atomic_store_explicit(&inf->have_tid, true, memory_order_release);
	}
}

static bool on_loop_thread(ck_cache_informer_t *inf)
{
	return atomic_load_explicit(&inf->have_tid, memory_order_acquire) &&
	       pthread_equal(inf->loop_tid, pthread_self());
}

/* ---------------------------------------------------------------- dispatch */

static void sweep(ck_cache_informer_t *inf)
{
	inf->need_sweep = false;
	ck_cache_handler_reg_t **pp = &inf->handlers;
	inf->handlers_tail = NULL;
	while (*pp != NULL) {
		ck_cache_handler_reg_t *r = *pp;
		if (r->removed) {
			*pp = r->next;
			ck_cache_objs_free(&r->snap);
			free(r);
		} else {
			inf->handlers_tail = r;
			pp = &r->next;
		}
	}
}

static void dispatch_begin(ck_cache_informer_t *inf)
{
	if (inf->dispatching++ == 0)
		inf->dispatch_id++;
}

static void dispatch_end(ck_cache_informer_t *inf)
{
	if (--inf->dispatching == 0 && inf->need_sweep)
		sweep(inf);
}

/* A handler added from inside a callback with nothing to catch up on (the store
 * was empty) does not get the notification in flight: the empty store it started
 * from already reflected it. One with a snapshot to receive gets nothing until
 * the snapshot is done. */
static bool deliverable(const ck_cache_informer_t *inf, const ck_cache_handler_reg_t *r)
{
	return !r->removed && r->initial_done && r->born != inf->dispatch_id;
}

static void dispatch_add(ck_cache_informer_t *inf, ck_obj_t *obj, bool initial)
{
	dispatch_begin(inf);
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL && !inf->stopped; r = r->next)
		if (deliverable(inf, r) && r->h.on_add != NULL)
			r->h.on_add(r->ud, obj, initial);
	dispatch_end(inf);
}

static void dispatch_update(ck_cache_informer_t *inf, ck_obj_t *old, ck_obj_t *obj)
{
	/* Nothing changed: a resync (or a relist of an unchanged object), only for
	 * handlers whose resync period is due. */
	bool is_sync = strcmp(old->rv, obj->rv) == 0;
	dispatch_begin(inf);
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL && !inf->stopped; r = r->next) {
		if (!deliverable(inf, r) || r->h.on_update == NULL || (is_sync && !r->syncing))
			continue;
		r->h.on_update(r->ud, old, obj);
	}
	dispatch_end(inf);
}

static void dispatch_delete(ck_cache_informer_t *inf, ck_obj_t *obj, bool unknown)
{
	cache_keybuf_t kb;
	cache_keybuf_set(&kb, obj);
	dispatch_begin(inf);
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL && !inf->stopped; r = r->next)
		if (deliverable(inf, r) && r->h.on_delete != NULL)
			r->h.on_delete(r->ud, kb.s, obj, unknown);
	dispatch_end(inf);
	cache_keybuf_free(&kb);
}

static void handle_entry(ck_cache_informer_t *inf, cache_dq_entry_t *e, bool initial)
{
	for (uint32_t i = 0; i < e->n && !inf->stopped; i++) {
		cache_delta_t *d = &e->d[i];
		atomic_fetch_add_explicit(&inf->n_deltas, 1, memory_order_relaxed);
		if (d->type == CACHE_DELTA_DELETED) {
			ck_obj_unref(cache_store_delete_obj(inf->store, d->obj));
			dispatch_delete(inf, d->obj, d->unknown);
			continue;
		}
		ck_obj_t *old = ck_cache_store_upsert(inf->store, d->obj);
		if (old != NULL) {
			dispatch_update(inf, old, d->obj);
			ck_obj_unref(old);
		} else {
			dispatch_add(inf, d->obj, initial);
		}
	}
}

static void mark_synced(ck_cache_informer_t *inf)
{
	pthread_mutex_lock(&inf->mu);
	atomic_store(&inf->synced, true);
	free(inf->last_err);
	inf->last_err = NULL;
	pthread_cond_broadcast(&inf->cond);
	pthread_mutex_unlock(&inf->mu);
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL; r = r->next)
		if (r->initial_done)
			atomic_store(&r->synced, true);
	CK_LOG_V(2, "Caches populated", CK_KV_STR("resource", inf->name),
	         CK_KV_UINT("objects", ck_cache_store_len(inf->store)));
}

/* Feeds late handlers their snapshots; returns the budget left. */
static size_t deliver_snapshots(ck_cache_informer_t *inf, size_t budget)
{
	dispatch_begin(inf);
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL && budget > 0 && !inf->stopped;
	     r = r->next) {
		if (r->removed || r->initial_done)
			continue;
		if (!r->snap_taken) {
			/* Nothing is applied to the store while a snapshot is pending, so this
			 * is the state that the deltas processed after it follow. */
			cache_store_list_nolock(inf->store, &r->snap);
			r->snap_pos = 0;
			r->snap_taken = true;
		}
		while (budget > 0 && r->snap_pos < r->snap.n && !r->removed && !inf->stopped) {
			ck_obj_t *obj = r->snap.items[r->snap_pos++];
			budget--;
			if (r->h.on_add != NULL)
				r->h.on_add(r->ud, obj, true);
		}
		if (!r->removed && r->snap_pos == r->snap.n) {
			ck_cache_objs_free(&r->snap);
			r->snap_pos = 0;
			r->initial_done = true;
			inf->nsnap_pending--;
			if (atomic_load(&inf->synced))
				atomic_store(&r->synced, true);
		}
	}
	dispatch_end(inf);
	return budget;
}

static void process(ck_cache_informer_t *inf, size_t budget)
{
	if (!inf->started || inf->stopped)
		return;
	if (inf->nsnap_pending > 0)
		budget = deliver_snapshots(inf, budget);
	while (inf->nsnap_pending == 0 && budget > 0 && !inf->stopped) {
		bool initial;
		cache_dq_entry_t *e = cache_dq_pop(&inf->dq, &initial);
		if (e == NULL)
			break;
		handle_entry(inf, e, initial);
		cache_dq_release(&inf->dq, e);
		budget--;
	}
	if (inf->stopped)
		return;
	if (!atomic_load(&inf->synced) && cache_dq_has_synced(&inf->dq))
		mark_synced(inf);
	if (cache_dq_len(&inf->dq) == 0 && inf->nsnap_pending == 0)
		ev_idle_stop(inf->loop, &inf->idle);
}

static void check_cb(struct ev_loop *loop, ev_check *w, int revents)
{
	(void)loop;
	(void)revents;
	ck_cache_informer_t *inf = w->data;
	note_loop_thread(inf);
	process(inf, inf->batch);
}

static void idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	/* Only keeps poll from blocking while work is queued; check_cb does it. */
	(void)loop;
	(void)w;
	(void)revents;
}

/* ---------------------------------------------------------------- timers */

static void resync_tick(ck_cache_informer_t *inf, uint64_t now)
{
	bool any = false;
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL; r = r->next)
		if (!r->removed && r->resync_ns > 0 && now >= r->next_resync_ns)
			any = true;
	if (!any)
		return;
	/* The set of syncing handlers changes only when some period is due, so Sync
	 * deltas still queued from the last resync keep their audience otherwise. */
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL; r = r->next) {
		r->syncing = !r->removed && r->resync_ns > 0 && now >= r->next_resync_ns;
		if (r->syncing)
			r->next_resync_ns = now + r->resync_ns;
	}
	cache_dq_resync(&inf->dq);
	schedule(inf);
}

static void tick(ck_cache_informer_t *inf)
{
	if (!inf->started || inf->stopped)
		return;
	uint64_t now = ck_clk_mono_ns(inf->clk);
	cache_reflector_tick(inf->refl, now);
	if (inf->stopped)
		return;
	resync_tick(inf, now);
	rearm(inf);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	ck_cache_informer_t *inf = w->data;
	note_loop_thread(inf);
	tick(inf);
}

/* ---------------------------------------------------------------- reflector sink */

static ck_obj_t *transformed(ck_cache_informer_t *inf, ck_obj_t *obj)
{
	if (inf->transform == NULL)
		return obj;
	ck_obj_t *t = inf->transform(inf->transform_ud, obj);
	if (t == NULL)
		return obj;
	ck_obj_unref(obj);
	return t;
}

static void sink_replace(void *ud, ck_obj_t **items, size_t n, const char *rv)
{
	ck_cache_informer_t *inf = ud;
	(void)rv;
	for (size_t i = 0; i < n; i++)
		items[i] = transformed(inf, items[i]);
	cache_dq_replace(&inf->dq, items, n);
	free(items);
	schedule(inf);
}

static void sink_event(void *ud, ck_watch_type_t type, ck_obj_t *obj)
{
	ck_cache_informer_t *inf = ud;
	obj = transformed(inf, obj);
	if (type == CK_WATCH_DELETED)
		cache_dq_delete(&inf->dq, obj);
	else
		cache_dq_add(&inf->dq,
		             type == CK_WATCH_ADDED ? CACHE_DELTA_ADDED : CACHE_DELTA_UPDATED, obj);
	schedule(inf);
}

static void sink_error(void *ud, const char *msg, const ck_result_t *res, bool healing)
{
	ck_cache_informer_t *inf = ud;
	pthread_mutex_lock(&inf->mu);
	free(inf->last_err);
	inf->last_err = ck_xstrdup(msg);
	pthread_mutex_unlock(&inf->mu);
	if (inf->on_watch_error != NULL)
		inf->on_watch_error(inf->watch_error_ud, inf, msg, res, healing);
}

static void sink_rearm(void *ud)
{
	rearm(ud);
}

static const cache_reflector_sink_t sink = {
    .replace = sink_replace,
    .event = sink_event,
    .error = sink_error,
    .rearm = sink_rearm,
};

/* ---------------------------------------------------------------- lifecycle */

static char *type_name(const ck_type_t *t)
{
	if (t->group == NULL || t->group[0] == '\0')
		return ck_xstrdup(t->resource);
	return ck_xasprintf("%s.%s", t->resource, t->group);
}

ck_cache_informer_t *ck_cache_informer_new(struct ev_loop *loop, const ck_type_t *t,
                                           ck_cache_lw_t *lw, const ck_cache_informer_opts_t *o)
{
	static const ck_cache_informer_opts_t none = {0};
	if (o == NULL)
		o = &none;
	ck_cache_informer_t *inf = ck_xcalloc(1, sizeof(*inf));
	inf->loop = loop;
	inf->type = t;
	inf->name = type_name(t);
	inf->lw = lw;
	inf->store = ck_cache_store_new();
	cache_dq_init(&inf->dq, inf->store);
	inf->clk = o->clock ? o->clock : ck_clk_real();
	inf->default_resync_ms = o->default_resync_ms;
	inf->check_resync_ms = o->default_resync_ms;
	inf->batch = o->batch ? o->batch : 1024;
	inf->transform = o->transform;
	inf->transform_ud = o->transform_ud;
	inf->on_watch_error = o->on_watch_error;
	inf->watch_error_ud = o->watch_error_ud;
	cache_reflector_opts_t ro = {
	    .name = inf->name,
	    .label_selector = o->label_selector,
	    .field_selector = o->field_selector,
	    .page_size = o->page_size,
	    .streaming_list = o->streaming_list,
	    .backoff_initial_ns = (uint64_t)o->backoff_initial_ms * CK_NS_PER_MS,
	    .backoff_max_ns = (uint64_t)o->backoff_max_ms * CK_NS_PER_MS,
	    .backoff_reset_ns = (uint64_t)o->backoff_reset_ms * CK_NS_PER_MS,
	    .watch_timeout_min_s = o->watch_timeout_min_s,
	    .watch_timeout_max_s = o->watch_timeout_max_s,
	    .stall_margin_ns = (uint64_t)o->stall_margin_ms * CK_NS_PER_MS,
	};
	inf->refl = cache_reflector_new(lw, inf->clk, &ro, &sink, inf);
	ev_timer_init(&inf->timer, timer_cb, 0.0, 0.0);
	inf->timer.data = inf;
	ev_check_init(&inf->check, check_cb);
	inf->check.data = inf;
	ev_idle_init(&inf->idle, idle_cb);
	inf->idle.data = inf;
	pthread_mutex_init(&inf->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&inf->cond, &ca);
	pthread_condattr_destroy(&ca);
	return inf;
}

int ck_cache_informer_start(ck_cache_informer_t *inf, char **err)
{
	if (inf->stopped)
		return ck_err_set(err, "cache: informer %s: start after shutdown", inf->name);
	if (inf->started)
		return 0;
	inf->started = true;
	ev_check_start(inf->loop, &inf->check);
	/* The check watcher alone must not keep ev_run going. */
	ev_unref(inf->loop);
	CK_LOG_V(2, "Starting informer", CK_KV_STR("resource", inf->name));
	cache_reflector_start(inf->refl);
	rearm(inf);
	return 0;
}

void ck_cache_informer_shutdown(ck_cache_informer_t *inf)
{
	if (inf == NULL || inf->stopped)
		return;
	inf->stopped = true;
	cache_reflector_stop(inf->refl);
	ev_timer_stop(inf->loop, &inf->timer);
	ev_idle_stop(inf->loop, &inf->idle);
	if (ev_is_active(&inf->check)) {
		ev_ref(inf->loop);
		ev_check_stop(inf->loop, &inf->check);
	}
	cache_dq_free(&inf->dq);
	cache_dq_init(&inf->dq, inf->store);
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL; r = r->next) {
		ck_cache_objs_free(&r->snap);
		r->snap_pos = 0;
		r->snap_taken = false;
	}
	pthread_mutex_lock(&inf->mu);
	atomic_store(&inf->wait_stopped, true);
	pthread_cond_broadcast(&inf->cond);
	pthread_mutex_unlock(&inf->mu);
}

void ck_cache_informer_free(ck_cache_informer_t *inf)
{
	if (inf == NULL)
		return;
	ck_cache_informer_shutdown(inf);
	cache_reflector_free(inf->refl);
	ck_cache_lw_free(inf->lw);
	cache_dq_free(&inf->dq);
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL;) {
		ck_cache_handler_reg_t *next = r->next;
		ck_cache_objs_free(&r->snap);
		free(r);
		r = next;
	}
	ck_cache_store_free(inf->store);
	pthread_mutex_destroy(&inf->mu);
	pthread_cond_destroy(&inf->cond);
	free(inf->last_err);
	free(inf->name);
	free(inf);
}

void ck_cache_informer_set_transform(ck_cache_informer_t *inf, ck_cache_transform_fn fn, void *ud)
{
	inf->transform = fn;
	inf->transform_ud = ud;
}

int ck_cache_informer_add_index(ck_cache_informer_t *inf, const char *name, ck_cache_index_fn fn,
                                void *ud, char **err)
{
	return ck_cache_store_add_index(inf->store, name, fn, ud, err);
}

/* ---------------------------------------------------------------- handlers */

ck_cache_handler_reg_t *ck_cache_informer_add_handler_resync(ck_cache_informer_t *inf,
                                                             const ck_cache_handler_t *h, void *ud,
                                                             uint64_t resync_ms)
{
	ck_cache_handler_reg_t *r = ck_xcalloc(1, sizeof(*r));
	r->inf = inf;
	r->h = *h;
	r->ud = ud;
	if (resync_ms > 0 && resync_ms < 1000)
		resync_ms = 1000; /* client-go's minimum: a faster resync is a busy loop */
	/* client-go's determineResyncPeriod, with the informer's period as its check
	 * period: an informer that does not resync (0) resyncs no handler; a shorter
	 * period lowers the informer's before it starts and is raised to it after. */
	if (resync_ms > 0 && inf->check_resync_ms == 0) {
		CK_LOG_V(2, "Handler resync period ignored: this informer does not resync",
		         CK_KV_STR("resource", ck_cache_informer_name(inf)),
		         CK_KV_UINT("resyncMs", resync_ms));
		resync_ms = 0;
	} else if (resync_ms > 0 && resync_ms < inf->check_resync_ms) {
		if (inf->started)
			resync_ms = inf->check_resync_ms;
		else
			inf->check_resync_ms = resync_ms;
	}
	r->resync_ns = resync_ms * CK_NS_PER_MS;
	if (inf->dispatching > 0)
		r->born = inf->dispatch_id;
	r->next_resync_ns = ck_clk_mono_ns(inf->clk) + r->resync_ns;
	if (inf->started && !inf->stopped && ck_cache_store_len(inf->store) > 0) {
		/* Everything processed so far, as adds, before any further delta. The
		 * snapshot waits for deliver_snapshots: the rest of an entry being
		 * processed (when added from a callback) must be in it. */
		inf->nsnap_pending++;
		schedule(inf);
	} else {
		r->initial_done = true;
		if (atomic_load(&inf->synced))
			atomic_store(&r->synced, true);
	}
	if (inf->handlers_tail != NULL)
		inf->handlers_tail->next = r;
	else
		inf->handlers = r;
	inf->handlers_tail = r;
	rearm(inf);
	return r;
}

ck_cache_handler_reg_t *ck_cache_informer_add_handler(ck_cache_informer_t *inf,
                                                      const ck_cache_handler_t *h, void *ud)
{
	return ck_cache_informer_add_handler_resync(inf, h, ud, inf->default_resync_ms);
}

void ck_cache_informer_remove_handler(ck_cache_informer_t *inf, ck_cache_handler_reg_t *reg)
{
	if (reg == NULL || reg->removed)
		return;
	reg->removed = true;
	if (!reg->initial_done) {
		reg->initial_done = true;
		inf->nsnap_pending--;
	}
	if (inf->dispatching > 0)
		inf->need_sweep = true;
	else
		sweep(inf);
	rearm(inf);
}

bool ck_cache_handler_has_synced(const ck_cache_handler_reg_t *reg)
{
	return atomic_load(&((ck_cache_handler_reg_t *)(uintptr_t)reg)->synced);
}

/* ---------------------------------------------------------------- sync state */

bool ck_cache_informer_has_synced(ck_cache_informer_t *inf)
{
	return atomic_load(&inf->synced);
}

static char *reason_locked(ck_cache_informer_t *inf)
{
	if (atomic_load(&inf->synced))
		return NULL;
	if (atomic_load(&inf->wait_stopped))
		return ck_xasprintf("%s: informer shut down before its cache synced", inf->name);
	if (inf->last_err != NULL)
		return ck_xstrdup(inf->last_err);
	if (!inf->started)
		return ck_xasprintf("%s: informer not started", inf->name);
	return ck_xasprintf("%s: waiting for the initial list (no error so far)", inf->name);
}

char *ck_cache_informer_sync_reason(ck_cache_informer_t *inf)
{
	pthread_mutex_lock(&inf->mu);
	char *r = reason_locked(inf);
	pthread_mutex_unlock(&inf->mu);
	return r;
}

int ck_cache_informer_wait_synced(ck_cache_informer_t *inf, int64_t timeout_ms, char **reason)
{
	if (atomic_load(&inf->synced))
		return 0;
	if (on_loop_thread(inf)) {
		if (reason != NULL)
			*reason = ck_xasprintf("%s: wait for cache sync called on the loop thread, "
			                       "which would deadlock",
			                       inf->name);
		return -1;
	}
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	if (timeout_ms > 0) {
		dl.tv_sec += timeout_ms / 1000;
		dl.tv_nsec += (timeout_ms % 1000) * 1000000L;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&inf->mu);
	while (!atomic_load(&inf->synced) && !atomic_load(&inf->wait_stopped) && timeout_ms != 0) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&inf->cond, &inf->mu);
		} else if (pthread_cond_timedwait(&inf->cond, &inf->mu, &dl) == ETIMEDOUT) {
			break;
		}
	}
	int result = atomic_load(&inf->synced) ? 0 : -1;
	if (result != 0 && reason != NULL) {
		char *why = reason_locked(inf);
		*reason = ck_xasprintf("cache not synced after %lld ms: %s", (long long)timeout_ms,
		                       why ? why : "unknown");
		free(why);
	}
	pthread_mutex_unlock(&inf->mu);
	return result;
}

/* ---------------------------------------------------------------- accessors */

ck_cache_store_t *ck_cache_informer_store(ck_cache_informer_t *inf)
{
	return inf->store;
}
const ck_type_t *ck_cache_informer_type(const ck_cache_informer_t *inf)
{
	return inf->type;
}
const char *ck_cache_informer_name(const ck_cache_informer_t *inf)
{
	return inf->name;
}

const ck_cache_lister_t *ck_cache_informer_lister(ck_cache_informer_t *inf)
{
	/* NULL for NULL: a refused ck_cache_factory_informer() must not crash here. */
	if (inf == NULL)
		return NULL;
	return cache_lister_from_store(inf->store);
}

void ck_cache_informer_stats(ck_cache_informer_t *inf, ck_cache_stats_t *out)
{
	cache_reflector_stats_t rs;
	cache_reflector_stats(inf->refl, &rs);
	memset(out, 0, sizeof(*out));
	out->objects = ck_cache_store_len(inf->store);
	out->lists = rs.lists;
	out->relists = rs.relists;
	out->watch_restarts = rs.watch_restarts;
	out->watch_stalls = rs.stalls;
	out->errors = rs.errors;
	out->events = rs.events;
	out->deltas = atomic_load(&inf->n_deltas);
	out->last_event_wall_ns = rs.last_event_wall_ns;
	out->synced = atomic_load(&inf->synced);
}

/* ---------------------------------------------------------------- test hooks */

void cache_informer_tick(ck_cache_informer_t *inf)
{
	tick(inf);
}

void cache_informer_drain(ck_cache_informer_t *inf)
{
	note_loop_thread(inf);
	do
		process(inf, SIZE_MAX);
	while (!inf->stopped && inf->started && cache_informer_pending(inf) > 0);
}

size_t cache_informer_pending(ck_cache_informer_t *inf)
{
	size_t n = cache_dq_len(&inf->dq);
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL; r = r->next) {
		if (r->removed || r->initial_done)
			continue;
		if (r->snap_taken) {
			n += r->snap.n - r->snap_pos;
		} else {
			/* Still to be taken: at least the taking itself is work. */
			size_t len = ck_cache_store_len(inf->store);
			n += len > 0 ? len : 1;
		}
	}
	return n;
}

cache_reflector_t *cache_informer_reflector(ck_cache_informer_t *inf)
{
	return inf->refl;
}
