/*
 * controller: one rate-limited workqueue, N workers calling the user's reconcile
 * function, and the event handlers that fill the queue (see <ckube/manager.h>).
 *
 * The queue de-duplicates keys and never hands the same key to two workers at once
 * (client-go's workqueue semantics, pkg/workqueue), so a reconcile function only has
 * to be correct for one key at a time. Shutdown drains on its own thread so that
 * the manager can bound how long it waits for running reconciles.
 */
#include "pkg/manager/manager_internal.h"

#include "pkg/log/log_internal.h"
#include <ckube/base.h>
#include <ckube/log.h>

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct ck_controller {
	ck_manager_t *m;
	const char *name;
	ck_reconcile_fn fn;
	void *ud;
	ck_wq_t *queue;
	ck_cache_informer_t *primary; /* the first type watched with its own handler */
	ck_metrics_counter_t *m_success, *m_error, *m_requeue, *m_requeue_after;
	ck_metrics_histogram_t *m_duration;
	int nworkers;
	pthread_t *workers;
	atomic_bool stopping;
	pthread_mutex_t drain_mu;
	pthread_cond_t drain_cv;
	bool started, drain_started, drained;
	pthread_t drain_thread;
	/* Handlers registered through ck_controller_watch_map. */
	struct map_reg {
		ck_controller_t *c;
		ck_map_fn map;
		void *ud;
	} maps[MGR_MAX_INFORMERS];
	size_t nmaps;
	/* Watches behind predicates: the handler and its copy of the array. */
	struct pred_reg {
		ck_cache_predicate_handler_t ph;
		const ck_predicate_t **preds;
	} preds[MGR_MAX_INFORMERS];
	size_t npreds;
};

/* ---- Queueing (any thread) ---- */

/* The priority of the event a handler of this thread is handling (the loop
 * thread, inside own_* and map_*), so that the keys a map function queues through
 * ck_controller_enqueue get it; 0 on every other thread and outside handlers. */
static _Thread_local int handling_priority;

void ck_controller_enqueue_priority(ck_controller_t *c, const char *key, int priority)
{
	if (priority == 0) {
		ck_wq_add(c->queue, key);
		return;
	}
	ck_wq_add_opts_t o = {.priority = priority};
	ck_wq_add_with_opts(c->queue, key, &o);
}

void ck_controller_enqueue(ck_controller_t *c, const char *key)
{
	ck_controller_enqueue_priority(c, key, handling_priority);
}

void ck_controller_enqueue_obj(ck_controller_t *c, const ck_obj_t *obj)
{
	char key[512];
	if (ck_obj_key(obj, key, sizeof(key)) < sizeof(key)) {
		ck_controller_enqueue(c, key);
		return;
	}
	char *k = ck_obj_key_dup(obj); /* a key longer than the stack buffer */
	ck_controller_enqueue(c, k);
	free(k);
}

/* controller-runtime's handler.WithLowPriorityWhenUnchanged: an add from the
 * initial list, or an update that changed nothing (a resync), is low priority. */
int ck_controller_add_priority(bool initial)
{
	return initial ? CK_WQ_PRIORITY_LOW : 0;
}

int ck_controller_update_priority(const ck_obj_t *old_obj, const ck_obj_t *new_obj)
{
	return strcmp(old_obj->rv, new_obj->rv) == 0 ? CK_WQ_PRIORITY_LOW : 0;
}

static void enqueue_ref(ck_controller_t *c, const ck_obj_t *obj, const ck_obj_owner_t *ref,
                        const ck_type_t *owner_type)
{
	/* A cluster-scoped owner's key is its name, whatever obj's namespace. */
	bool ns = obj->ns[0] != '\0' && (owner_type == NULL || owner_type->namespaced);
	char *key = ns ? ck_xasprintf("%s/%s", obj->ns, ref->name) : ck_xstrdup(ref->name);
	ck_controller_enqueue(c, key);
	free(key);
}

void ck_controller_enqueue_owner_type(void *owner_type, ck_controller_t *c, const ck_obj_t *obj)
{
	const ck_type_t *t = owner_type;
	const ck_obj_owner_t *ref = ck_obj_controller_of(obj, t->group, t->kind);
	if (ref != NULL)
		enqueue_ref(c, obj, ref, t);
}

void ck_controller_enqueue_owner(void *kind, ck_controller_t *c, const ck_obj_t *obj)
{
	const ck_obj_owner_t *ref = ck_obj_controller_ref(obj);
	if (ref == NULL || strcmp(ref->kind, (const char *)kind) != 0)
		return;
	enqueue_ref(c, obj, ref, NULL);
}

int ck_reconcile_failed(const ck_result_t *res, char **err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *what = ck_xvasprintf(fmt, ap);
	va_end(ap);
	*err = ck_xasprintf("%s: %s", what, res->error ? res->error : "failed");
	free(what);
	return ck_result_is_conflict(res) ? CK_RECONCILE_RETRY : -1;
}

/* ---- Handlers (loop thread) ---- */

static void own_add(void *ud, ck_obj_t *obj, bool initial)
{
	handling_priority = ck_controller_add_priority(initial);
	ck_controller_enqueue_obj(ud, obj);
	handling_priority = 0;
}

static void own_update(void *ud, ck_obj_t *old_obj, ck_obj_t *new_obj)
{
	handling_priority = ck_controller_update_priority(old_obj, new_obj);
	ck_controller_enqueue_obj(ud, new_obj);
	handling_priority = 0;
}

static void own_delete(void *ud, const char *key, ck_obj_t *obj, bool final_state_unknown)
{
	ck_controller_t *c = ud;
	ck_wq_add(c->queue, key);
}

/* Registers h with ud on inf, behind o's predicates when it has any. */
static void add_handler(ck_controller_t *c, ck_cache_informer_t *inf, const ck_cache_handler_t *h,
                        void *ud, const ck_watch_opts_t *o)
{
	if (o == NULL || o->npredicates == 0) {
		ck_cache_informer_add_handler(inf, h, ud);
		return;
	}
	if (c->npreds == MGR_MAX_INFORMERS)
		ck_fatal("controller %s: more than %d watches with predicates", c->name,
		         MGR_MAX_INFORMERS);
	struct pred_reg *r = &c->preds[c->npreds++];
	r->preds = ck_xcalloc(o->npredicates, sizeof(*r->preds));
	memcpy(r->preds, o->predicates, o->npredicates * sizeof(*r->preds));
	r->ph = (ck_cache_predicate_handler_t){
	    .preds = r->preds, .npreds = o->npredicates, .handler = *h, .handler_ud = ud};
	ck_cache_informer_add_handler(inf, ck_cache_predicate_handler(), &r->ph);
}

static const ck_cache_handler_t own_handler = {
    .on_add = own_add, .on_update = own_update, .on_delete = own_delete};

const ck_cache_handler_t *mgr_controller_own_handler(void)
{
	return &own_handler;
}

ck_cache_informer_t *ck_controller_watch_opts(ck_controller_t *c, const ck_type_t *t,
                                              const ck_watch_opts_t *o)
{
	ck_cache_informer_t *inf = ck_manager_informer(c->m, t);
	if (inf == NULL)
		return NULL;
	add_handler(c, inf, &own_handler, c, o);
	if (c->primary == NULL)
		c->primary = inf;
	return inf;
}

ck_cache_informer_t *ck_controller_watch(ck_controller_t *c, const ck_type_t *t)
{
	return ck_controller_watch_opts(c, t, NULL);
}

static void map_add(void *ud, ck_obj_t *obj, bool initial)
{
	struct map_reg *r = ud;
	handling_priority = ck_controller_add_priority(initial);
	r->map(r->ud, r->c, obj);
	handling_priority = 0;
}

static void map_update(void *ud, ck_obj_t *old_obj, ck_obj_t *new_obj)
{
	struct map_reg *r = ud;
	handling_priority = ck_controller_update_priority(old_obj, new_obj);
	r->map(r->ud, r->c, new_obj);
	handling_priority = 0;
}

static void map_delete(void *ud, const char *key, ck_obj_t *obj, bool final_state_unknown)
{
	struct map_reg *r = ud;
	if (obj != NULL) /* the last state known, also inside a tombstone */
		r->map(r->ud, r->c, obj);
}

ck_cache_informer_t *ck_controller_watch_map(ck_controller_t *c, const ck_type_t *t, ck_map_fn map,
                                             void *ud)
{
	return ck_controller_watch_map_opts(c, t, map, ud, NULL);
}

ck_cache_informer_t *ck_controller_watch_map_opts(ck_controller_t *c, const ck_type_t *t,
                                                  ck_map_fn map, void *ud, const ck_watch_opts_t *o)
{
	ck_cache_informer_t *inf = ck_manager_informer(c->m, t);
	if (inf == NULL)
		return NULL;
	if (c->nmaps == MGR_MAX_INFORMERS)
		ck_fatal("controller %s: more than %d watches", c->name, MGR_MAX_INFORMERS);
	struct map_reg *r = &c->maps[c->nmaps++];
	*r = (struct map_reg){.c = c, .map = map, .ud = ud};
	ck_cache_handler_t h = {
	    .on_add = map_add, .on_update = map_update, .on_delete = map_delete};
	add_handler(c, inf, &h, r, o);
	return inf;
}

/* ---- Workers ---- */

/* The key trace's reconcile-end line: the result, how long it took, and the error
 * when there is one. */
static void trace_reconcile_end(const ck_controller_t *c, int r, uint64_t took_ns, const char *err)
{
	ck_log_kv_t kvs[] = {
	    CK_KV_STR("controller", c->name),
	    CK_KV_STR("result", r == 0                    ? "success"
	                        : r == CK_RECONCILE_RETRY ? "requeue"
	                        : r > 0                   ? "requeue_after"
	                                                  : "error"),
	    CK_KV_INT("requeueAfterMs", r > 0 ? r : 0),
	    CK_KV_UINT("tookUs", took_ns / 1000),
	    CK_KV_ERR(err),
	    CK_LOG_KV_END_,
	};
	if (err == NULL)
		kvs[4] = (ck_log_kv_t)CK_LOG_KV_END_;
	ck_log_trace_emit(LOG_FILE_, __LINE__, "reconcile-end", kvs);
}

/*
 * --reconcile-log: one line per reconcile, "<start> <end> <identity> <controller>
 * <key>" (wall clock, ns), written with one append so that the lines of several
 * workers and replicas sharing a file never interleave. The overlap oracle of the
 * sharding tests merges them.
 */
static void log_reconcile(const ck_controller_t *c, const char *key, int64_t start, int64_t end)
{
	char line[768];
	int n = snprintf(line, sizeof(line), "%lld %lld %s %s %s\n", (long long)start,
	                 (long long)end, c->m->identity, c->name, key);
	if (n > 0 && (size_t)n < sizeof(line)) {
		ssize_t w = write(c->m->reconcile_log_fd, line, (size_t)n);
		(void)w;
	}
}

static void *worker_main(void *arg)
{
	ck_controller_t *c = arg;
	const char *key;
	int prio = 0;
	while ((key = ck_wq_get_with_priority(c->queue, &prio)) != NULL) {
		/* Shutting down: finish what runs, take nothing new (the queue would still
		 * hand out every key it holds). The key stays unprocessed, not forgotten. */
		if (atomic_load(&c->stopping)) {
			ck_wq_done(c->queue, key);
			break;
		}
		uint32_t bucket = 0;
		mgr_gate_t gate =
		    c->m->shards != NULL ? mgr_shards_enter(c->m, c, key, &bucket) : MGR_GATE_RUN;
		if (gate != MGR_GATE_RUN) {
			LOG_TRACE(key, "reconcile-skipped", CK_KV_STR("controller", c->name),
			          CK_KV_STR("why", gate == MGR_GATE_SKIP
			                               ? "another replica's shard bucket"
			                               : "its bucket's caches are still listing"));
			ck_wq_forget(c->queue, key);
			ck_wq_done(c->queue, key);
			continue;
		}
		char *err = NULL;
		LOG_TRACE(key, "reconcile-start", CK_KV_STR("controller", c->name));
		int64_t wall0 = ck_clk_wall_ns(ck_clk_real());
		uint64_t t0 = ck_clk_mono_ns(ck_clk_real());
		if (c->m->testing_delay_us > 0)
			usleep(c->m->testing_delay_us);
		int r = c->fn(c->ud, key, &err);
		uint64_t took = ck_clk_mono_ns(ck_clk_real()) - t0;
		if (c->m->reconcile_log_fd >= 0)
			log_reconcile(c, key, wall0, ck_clk_wall_ns(ck_clk_real()));
		if (c->m->shards != NULL)
			mgr_shards_leave(c->m, bucket);
		double secs = (double)took / 1e9;
		if (log_trace_on() && ck_log_trace_match(key))
			trace_reconcile_end(c, r, took, err);
		if (c->m_duration)
			ck_metrics_histogram_observe(c->m_duration, secs);
		if (r == 0) {
			ck_wq_forget(c->queue, key);
			if (c->m_success)
				ck_metrics_counter_inc(c->m_success);
			CK_LOG_V(4, "Successfully synced", CK_KV_STR("controller", c->name),
			         CK_KV_STR("key", key));
		} else if (r == CK_RECONCILE_RETRY) {
			/* Retries keep the priority the key was handed out with. */
			ck_wq_add_with_opts(
			    c->queue, key,
			    &(ck_wq_add_opts_t){.rate_limited = true, .priority = prio});
			if (c->m_requeue)
				ck_metrics_counter_inc(c->m_requeue);
			CK_LOG_V(2, "Requeued", CK_KV_STR("controller", c->name),
			         CK_KV_STR("key", key), CK_KV_ERR(err));
		} else if (r > 0) {
			ck_wq_forget(c->queue, key);
			ck_wq_add_with_opts(
			    c->queue, key,
			    &(ck_wq_add_opts_t){.after_ns = (int64_t)r * (int64_t)CK_NS_PER_MS,
			                        .priority = prio});
			if (c->m_requeue_after)
				ck_metrics_counter_inc(c->m_requeue_after);
		} else {
			ck_wq_add_with_opts(
			    c->queue, key,
			    &(ck_wq_add_opts_t){.rate_limited = true, .priority = prio});
			if (c->m_error)
				ck_metrics_counter_inc(c->m_error);
			CK_LOG_ERROR(err ? err : "failed", "Error syncing; requeuing",
			             CK_KV_STR("controller", c->name), CK_KV_STR("key", key),
			             CK_KV_UINT("retries", ck_wq_num_requeues(c->queue, key)));
		}
		free(err);
		ck_wq_done(c->queue, key);
	}
	return NULL;
}

ck_controller_t *mgr_controller_new(ck_manager_t *m, const ck_controller_opts_t *o)
{
	ck_controller_t *c = ck_xcalloc(1, sizeof(*c));
	const char *name = o->name;
	c->m = m;
	c->name = name;
	c->fn = o->reconcile;
	c->ud = o->ud;
	c->nworkers = o->workers > 0 ? o->workers : ck_manager_workers(m);
	pthread_mutex_init(&c->drain_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->drain_cv, &ca);
	pthread_condattr_destroy(&ca);
	ck_wq_options_t qo = {.name = name,
	                      .limiter = o->limiter,
	                      .priority = m->opt.priority_queue && !o->fifo_queue};
	c->queue = ck_wq_new(&qo);

	/* One family for all controllers, one series per controller. */
	ck_metrics_registry_t *reg = ck_manager_metrics(m);
	if (m->m_reconcile_total == NULL) {
		m->m_reconcile_total =
		    ck_metrics_counter_vec_new(reg, "controller_runtime_reconcile_total",
		                               "Total number of reconciliations per controller",
		                               CK_METRICS_LABELS("controller", "result"), NULL);
		m->m_reconcile_time = ck_metrics_histogram_vec_new(
		    reg, "controller_runtime_reconcile_time_seconds",
		    "Length of time per reconciliation per controller",
		    CK_METRICS_LABELS("controller"),
		    (const double[]){0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}, 11,
		    NULL);
	}
	if (m->m_reconcile_total) {
		c->m_success = ck_metrics_counter_vec_get(m->m_reconcile_total,
		                                          CK_METRICS_LABELS(name, "success"));
		c->m_error = ck_metrics_counter_vec_get(m->m_reconcile_total,
		                                        CK_METRICS_LABELS(name, "error"));
		c->m_requeue = ck_metrics_counter_vec_get(m->m_reconcile_total,
		                                          CK_METRICS_LABELS(name, "requeue"));
		c->m_requeue_after = ck_metrics_counter_vec_get(
		    m->m_reconcile_total, CK_METRICS_LABELS(name, "requeue_after"));
	}
	if (m->m_reconcile_time)
		c->m_duration =
		    ck_metrics_histogram_vec_get(m->m_reconcile_time, CK_METRICS_LABELS(name));
	return c;
}

ck_wq_t *mgr_controller_queue(ck_controller_t *c)
{
	return c->queue;
}

ck_cache_informer_t *mgr_controller_primary(ck_controller_t *c)
{
	return c->primary;
}

int mgr_controller_start(void *arg, char **err)
{
	ck_controller_t *c = arg;
	int result = 0;
	pthread_mutex_lock(&c->drain_mu);
	if (c->started || atomic_load(&c->stopping))
		goto out;
	c->workers = ck_xcalloc((size_t)c->nworkers, sizeof(pthread_t));
	for (int i = 0; i < c->nworkers; i++) {
		int rc = pthread_create(&c->workers[i], NULL, worker_main, c);
		if (rc != 0) {
			c->nworkers = i;
			c->started = true;
			result = ck_err_set(err, "controller %s: start worker %d: %s", c->name, i,
			                    strerror(rc));
			goto out;
		}
	}
	c->started = true;
	CK_LOG_INFO("Started workers", CK_KV_STR("controller", c->name),
	            CK_KV_INT("count", c->nworkers));
out:
	pthread_mutex_unlock(&c->drain_mu);
	return result;
}

/* The drain runs once on its own thread so that callers can bound their wait. */
static void *drain_main(void *arg)
{
	ck_controller_t *c = arg;
	ck_wq_shutdown(c->queue);
	pthread_mutex_lock(&c->drain_mu);
	int n = c->started ? c->nworkers : 0;
	pthread_mutex_unlock(&c->drain_mu);
	for (int i = 0; i < n; i++)
		pthread_join(c->workers[i], NULL);
	pthread_mutex_lock(&c->drain_mu);
	c->drained = true;
	pthread_cond_broadcast(&c->drain_cv);
	pthread_mutex_unlock(&c->drain_mu);
	return NULL;
}

int mgr_controller_stop(void *arg, int64_t timeout_ms)
{
	ck_controller_t *c = arg;
	atomic_store(&c->stopping, true);
	pthread_mutex_lock(&c->drain_mu);
	if (!c->drain_started) {
		c->drain_started = true;
		if (pthread_create(&c->drain_thread, NULL, drain_main, c) != 0) {
			c->drain_started = false;
			pthread_mutex_unlock(&c->drain_mu);
			ck_wq_shutdown(c->queue);
			return -1;
		}
	}
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t t = timeout_ms < 0 ? 0 : timeout_ms;
	ts.tv_sec += t / 1000;
	ts.tv_nsec += (t % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	while (!c->drained)
		if (pthread_cond_timedwait(&c->drain_cv, &c->drain_mu, &ts) != 0)
			break;
	bool done = c->drained;
	pthread_mutex_unlock(&c->drain_mu);
	return done ? 0 : -1;
}

void mgr_controller_free(ck_controller_t *c)
{
	if (c == NULL)
		return;
	atomic_store(&c->stopping, true);
	ck_wq_shutdown(c->queue);
	if (c->drain_started)
		pthread_join(c->drain_thread, NULL); /* it joins the workers */
	else
		for (int i = 0; c->started && i < c->nworkers; i++)
			pthread_join(c->workers[i], NULL);
	free(c->workers);
	for (size_t i = 0; i < c->npreds; i++)
		free(c->preds[i].preds);
	pthread_mutex_destroy(&c->drain_mu);
	pthread_cond_destroy(&c->drain_cv);
	ck_wq_free(c->queue);
	free(c);
}
