/*
 * shards: --shards-by. The sharding coordinator (<ckube/sharding.h>) decides which
 * buckets of the hash space this replica owns; this file turns that into caches and
 * work:
 *
 *   acquired  the factory's split informers get the bucket as a part (its own list
 *             and watch, loop thread); until every one of them has listed it, its
 *             keys are parked, then queued again: a reconcile never reads a cache
 *             that lacks its bucket.
 *   owned     workers run its keys; each run is counted in the bucket's in-flight
 *             count, taken BEFORE ownership is checked, so that the release below
 *             cannot miss a run that saw "owned".
 *   released  ownership already answers false (the coordinator cleared it), so no
 *             new run starts; on_release waits for the in-flight ones, then the
 *             part leaves the caches (loop thread), parked keys are dropped, and
 *             only then does the coordinator release the Lease.
 *
 * A key of a bucket owned by another replica is skipped (counted): that replica's
 * own informers saw the same event.
 */
#include "pkg/manager/manager_internal.h"

#include <ckube/base.h>
#include <ckube/log.h>
#include <ckube/sharding.h>

#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { SB_FREE, SB_SYNCING, SB_READY };

typedef struct parked {
	ck_controller_t *c;
	char *key;
} parked_t;

typedef struct bucket {
	_Atomic int state;    /* SB_*: written by the coordinator and the loop */
	_Atomic int inflight; /* reconciles of its keys running now */
	parked_t *parked;     /* under mu */
	size_t nparked, cap;
	uint64_t acquired_ns; /* loop: when the part was added, for the log */
} bucket_t;

typedef struct op {
	bool add;
	uint32_t bucket;
	ck_shard_range_t range;
	bool done; /* remove: the part has left the caches */
} op_t;

struct mgr_shards {
	ck_manager_t *d;
	ck_shard_field_t field;
	uint32_t nb;
	bucket_t *b;
	ck_sharding_t *s; /* NULL before start and after stop */
	bool skip_drain;  /* testing only: shows that the oracle can fail */
	bool loop_gone;   /* freeing: nobody runs the loop to drop parts any more */

	pthread_mutex_t mu; /* parked lists, ops */
	pthread_cond_t cv;
	op_t **ops; /* requests for the loop thread, in order */
	size_t nops;
	ev_async wake;
	ev_timer poll; /* while a bucket syncs */

	_Atomic uint64_t n_acquired, n_released, n_skipped, n_parked;
};

/* Moves b to state (ready: its keys run; free: they are another replica's) and
 * returns its parked keys (*n of them; the caller frees them), in one step with
 * respect to mgr_shards_enter's parking. */
static parked_t *set_state(mgr_shards_t *sh, bucket_t *b, int state, size_t *n)
{
	pthread_mutex_lock(&sh->mu);
	atomic_store(&b->state, state);
	parked_t *p = b->parked;
	*n = b->nparked;
	b->parked = NULL;
	b->nparked = b->cap = 0;
	pthread_mutex_unlock(&sh->mu);
	return p;
}

/* ---- loop thread ---- */

static void poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	mgr_shards_t *sh = w->data;
	bool syncing = false;
	for (uint32_t i = 0; i < sh->nb; i++) {
		bucket_t *b = &sh->b[i];
		if (atomic_load(&b->state) != SB_SYNCING)
			continue;
		if (!ck_cache_factory_part_synced(sh->d->factory, i)) {
			syncing = true;
			continue;
		}
		size_t n;
		parked_t *p = set_state(sh, b, SB_READY, &n);
		CK_LOG_INFO("Shard bucket ready", CK_KV_UINT("bucket", i),
		            CK_KV_UINT("parkedKeys", n),
		            CK_KV_UINT("syncMs", (ck_clk_mono_ns(ck_clk_real()) - b->acquired_ns) /
		                                     CK_NS_PER_MS));
		for (size_t k = 0; k < n; k++) {
			ck_controller_enqueue(p[k].c, p[k].key);
			free(p[k].key);
		}
		free(p);
	}
	if (!syncing)
		ev_timer_stop(loop, w);
}

static void wake_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	mgr_shards_t *sh = w->data;
	pthread_mutex_lock(&sh->mu);
	op_t **ops = sh->ops;
	size_t n = sh->nops;
	sh->ops = NULL;
	sh->nops = 0;
	pthread_mutex_unlock(&sh->mu);
	for (size_t i = 0; i < n; i++) {
		op_t *op = ops[i];
		if (op->add) {
			char *err = NULL;
			sh->b[op->bucket].acquired_ns = ck_clk_mono_ns(ck_clk_real());
			if (ck_cache_factory_add_part(sh->d->factory, op->bucket, op->range,
			                              &err) != 0)
				CK_LOG_ERROR(err, "Cannot cache a shard bucket",
				             CK_KV_UINT("bucket", op->bucket));
			free(err);
			free(op);
			if (!ev_is_active(&sh->poll)) {
				ev_timer_set(&sh->poll, 0.02, 0.02);
				ev_timer_start(loop, &sh->poll);
			}
			continue;
		}
		ck_cache_factory_remove_part(sh->d->factory, op->bucket);
		pthread_mutex_lock(&sh->mu);
		op->done = true; /* the waiter frees it */
		pthread_cond_broadcast(&sh->cv);
		pthread_mutex_unlock(&sh->mu);
	}
	free(ops);
}

static void post(mgr_shards_t *sh, op_t *op)
{
	pthread_mutex_lock(&sh->mu);
	sh->ops = ck_xrealloc(sh->ops, (sh->nops + 1) * sizeof(*sh->ops));
	sh->ops[sh->nops++] = op;
	pthread_mutex_unlock(&sh->mu);
	ev_async_send(sh->d->loop, &sh->wake);
}

/* ---- coordinator thread ---- */

static void on_acquire(void *ud, uint32_t bucket, ck_shard_range_t range)
{
	mgr_shards_t *sh = ud;
	atomic_store(&sh->b[bucket].state, SB_SYNCING);
	atomic_fetch_add(&sh->n_acquired, 1);
	op_t *op = ck_xcalloc(1, sizeof(*op));
	*op = (op_t){.add = true, .bucket = bucket, .range = range};
	post(sh, op);
}

static void on_release(void *ud, uint32_t bucket)
{
	mgr_shards_t *sh = ud;
	bucket_t *b = &sh->b[bucket];
	uint64_t t0 = ck_clk_mono_ns(ck_clk_real()), said = t0;
	/* Ownership already answers false: no run starts; wait for the running ones. */
	while (!sh->skip_drain && atomic_load(&b->inflight) > 0) {
		usleep(2000);
		uint64_t now = ck_clk_mono_ns(ck_clk_real());
		if (now - said >= CK_NS_PER_SEC) {
			said = now;
			CK_LOG_INFO("Handing a shard bucket over: waiting for its reconciles",
			            CK_KV_UINT("bucket", bucket),
			            CK_KV_INT("running", atomic_load(&b->inflight)),
			            CK_KV_UINT("waitedMs", (now - t0) / CK_NS_PER_MS));
		}
	}
	op_t op = {.add = false, .bucket = bucket, .done = sh->loop_gone};
	if (!op.done)
		post(sh, &op);
	pthread_mutex_lock(&sh->mu);
	while (!op.done)
		pthread_cond_wait(&sh->cv, &sh->mu);
	pthread_mutex_unlock(&sh->mu);
	size_t n;
	parked_t *p = set_state(sh, b, SB_FREE, &n);
	for (size_t k = 0; k < n; k++)
		free(p[k].key);
	free(p);
	atomic_fetch_add(&sh->n_released, 1);
	CK_LOG_INFO("Shard bucket handed over", CK_KV_UINT("bucket", bucket),
	            CK_KV_UINT("drainMs", (ck_clk_mono_ns(ck_clk_real()) - t0) / CK_NS_PER_MS),
	            CK_KV_UINT("droppedParkedKeys", n));
}

static void on_log(void *ud, ck_le_log_level_t level, const char *msg)
{
	if (level == CK_LE_LOG_WARNING)
		CK_LOG_INFO("Sharding", CK_KV_STR("warning", msg));
	else
		CK_LOG_V(level == CK_LE_LOG_INFO ? 0 : 2, "Sharding", CK_KV_STR("msg", msg));
}

/* ---- setup, start, stop ---- */

int mgr_shards_setup(ck_manager_t *d, char **err)
{
	mgr_options_t *o = &d->opt;
	ck_shard_field_t field;
	if (o->shards_by[0] == '\0')
		return 0;
	if (strcmp(o->shards_by, "namespace") == 0)
		field = CK_SHARD_NAMESPACE;
	else if (strcmp(o->shards_by, "uid") == 0)
		field = CK_SHARD_UID;
	else
		return ck_err_set(err,
		                  "-shards-by: \"%s\": must be namespace or uid (or empty: off)",
		                  o->shards_by);
	if (o->leader_elect)
		return ck_err_set(err, "-shards-by and -leader-elect exclude each other: every "
		                       "sharded replica is active, each on its own buckets");
	ck_sharding_config_t chk = {.lease_namespace = d->le_ns,
	                            .group = o->le_name,
	                            .identity = d->identity,
	                            .buckets = (uint32_t)o->shards,
	                            .field = field,
	                            .lease_duration_ms = (uint32_t)o->shards_lease_ms,
	                            .renew_deadline_ms = (uint32_t)o->shards_renew_ms,
	                            .retry_period_ms = (uint32_t)o->shards_retry_ms};
	if (ck_sharding_validate(&chk, err) != 0)
		return -1;
	mgr_shards_t *sh = ck_xcalloc(1, sizeof(*sh));
	sh->d = d;
	sh->field = field;
	sh->nb = (uint32_t)o->shards;
	sh->b = ck_xcalloc(sh->nb, sizeof(*sh->b));
	const char *skip = getenv("CKUBE_TESTING_SKIP_HANDOVER_WAIT");
	sh->skip_drain = skip != NULL && strcmp(skip, "1") == 0;
	if (sh->skip_drain)
		CK_LOG_ERROR("CKUBE_TESTING_SKIP_HANDOVER_WAIT=1",
		             "UNSAFE: buckets are released without waiting for their reconciles "
		             "(a test of the overlap oracle; never in production)");
	pthread_mutex_init(&sh->mu, NULL);
	pthread_cond_init(&sh->cv, NULL);
	ev_async_init(&sh->wake, wake_cb);
	sh->wake.data = sh;
	ev_async_start(d->loop, &sh->wake);
	ev_unref(d->loop); /* the async alone must not keep the loop running */
	ev_timer_init(&sh->poll, poll_cb, 0.02, 0.02);
	sh->poll.data = sh;
	d->shards = sh;
	return 0;
}

int mgr_shards_start(ck_manager_t *d, char **err)
{
	mgr_shards_t *sh = d->shards;
	mgr_options_t *o = &d->opt;
	ck_sharding_config_t cfg = {.lease_namespace = d->le_ns,
	                            .group = o->le_name,
	                            .identity = d->identity,
	                            .buckets = sh->nb,
	                            .field = sh->field,
	                            .lease_duration_ms = (uint32_t)o->shards_lease_ms,
	                            .renew_deadline_ms = (uint32_t)o->shards_renew_ms,
	                            .retry_period_ms = (uint32_t)o->shards_retry_ms,
	                            .release_on_stop = true,
	                            .on_acquire = on_acquire,
	                            .on_release = on_release,
	                            .on_log = on_log,
	                            .ud = sh};
	CK_LOG_INFO("Joining the shard group", CK_KV_OBJ("leases", d->le_ns, o->le_name),
	            CK_KV_STR("identity", d->identity), CK_KV_STR("shardsBy", o->shards_by),
	            CK_KV_UINT("buckets", sh->nb));
	ck_sharding_t *s = ck_sharding_start(d->client, &cfg, err);
	if (s == NULL)
		return -1;
	pthread_mutex_lock(&sh->mu);
	sh->s = s;
	pthread_mutex_unlock(&sh->mu);
	return 0;
}

void mgr_shards_stop(ck_manager_t *d)
{
	mgr_shards_t *sh = d->shards;
	if (sh == NULL)
		return;
	/* Out of sight of the probe and the metrics first (they read it under mu); the
	 * workers are stopped already. */
	pthread_mutex_lock(&sh->mu);
	ck_sharding_t *s = sh->s;
	sh->s = NULL;
	pthread_mutex_unlock(&sh->mu);
	/* Every bucket drained and released; the loop still runs to drop the parts. */
	if (s != NULL)
		ck_sharding_stop(s);
}

void mgr_shards_free(ck_manager_t *d)
{
	mgr_shards_t *sh = d->shards;
	if (sh == NULL)
		return;
	sh->loop_gone = true; /* the caches go with the factory */
	mgr_shards_stop(d);
	for (uint32_t i = 0; i < sh->nb; i++) {
		for (size_t k = 0; k < sh->b[i].nparked; k++)
			free(sh->b[i].parked[k].key);
		free(sh->b[i].parked);
	}
	for (size_t i = 0; i < sh->nops; i++)
		if (sh->ops[i]->add)
			free(sh->ops[i]);
	free(sh->ops);
	free(sh->b);
	pthread_mutex_destroy(&sh->mu);
	pthread_cond_destroy(&sh->cv);
	free(sh);
	d->shards = NULL;
}

/* ---- workers ---- */

/* The hash a key is sharded by: its namespace's, or (uid) its cached object's uid's.
 * false when it cannot be known (uid of an object not in this replica's cache). */
static bool key_hash(mgr_shards_t *sh, ck_controller_t *c, const char *key, uint64_t *h)
{
	if (sh->field == CK_SHARD_NAMESPACE) {
		const char *slash = strchr(key, '/');
		*h = ck_shard_hash(key, slash != NULL ? (size_t)(slash - key) : 0);
		return true;
	}
	ck_cache_informer_t *inf = mgr_controller_primary(c);
	ck_obj_t *obj = inf != NULL ? ck_cache_store_get(ck_cache_informer_store(inf), key) : NULL;
	if (obj == NULL)
		return false;
	*h = ck_shard_obj_hash(CK_SHARD_UID, obj);
	ck_obj_unref(obj);
	return true;
}

mgr_gate_t mgr_shards_enter(ck_manager_t *d, ck_controller_t *c, const char *key, uint32_t *bucket)
{
	mgr_shards_t *sh = d->shards;
	ck_sharding_t *s = sh->s;
	uint64_t h;
	if (s == NULL || !key_hash(sh, c, key, &h)) {
		atomic_fetch_add(&sh->n_skipped, 1);
		return MGR_GATE_SKIP;
	}
	uint32_t i = ck_sharding_bucket_of(s, h);
	bucket_t *b = &sh->b[i];
	/* Counted first, checked second: a release that cleared ownership before this
	 * check is not missed by its wait, and one after it waits for this run. The
	 * bucket is looked up again: had the boundaries moved in between, bucket i
	 * may now cover other hashes (a moved bucket is never owned while they move). */
	atomic_fetch_add(&b->inflight, 1);
	if (ck_sharding_owns_bucket(s, i) && ck_sharding_bucket_of(s, h) == i &&
	    atomic_load(&b->state) == SB_READY) {
		*bucket = i;
		return MGR_GATE_RUN;
	}
	atomic_fetch_sub(&b->inflight, 1);
	if (!ck_sharding_owns_bucket(s, i)) {
		atomic_fetch_add(&sh->n_skipped, 1);
		return MGR_GATE_SKIP;
	}
	/* Owned, its caches not listed yet: parked until they are. */
	pthread_mutex_lock(&sh->mu);
	bool ready = atomic_load(&b->state) == SB_READY;
	if (!ready) {
		if (b->nparked == b->cap) {
			b->cap = b->cap ? b->cap * 2 : 16;
			b->parked = ck_xrealloc(b->parked, b->cap * sizeof(*b->parked));
		}
		b->parked[b->nparked++] = (parked_t){c, ck_xstrdup(key)};
	}
	pthread_mutex_unlock(&sh->mu);
	if (ready) /* became ready meanwhile: go round again */
		ck_controller_enqueue(c, key);
	atomic_fetch_add(&sh->n_parked, 1);
	return MGR_GATE_PARKED;
}

void mgr_shards_leave(ck_manager_t *d, uint32_t bucket)
{
	atomic_fetch_sub(&d->shards->b[bucket].inflight, 1);
}

/* ---- probes and metrics ---- */

/* "owns 3 of 32 buckets (3 members): 0-1,7" */
static char *owned_text(mgr_shards_t *sh)
{
	ck_sharding_t *s = sh->s;
	ck_sbuf_t b = CK_SBUF_INIT;
	if (s == NULL) {
		ck_sbuf_puts(&b, "not in the shard group");
		return ck_sbuf_steal(&b);
	}
	ck_sbuf_printf(&b, "owns %u of %u buckets (%u members)", ck_sharding_owned_count(s), sh->nb,
	               ck_sharding_members(s));
	const char *sep = ": ";
	for (uint32_t i = 0; i < sh->nb; i++) {
		if (!ck_sharding_owns_bucket(s, i) || atomic_load(&sh->b[i].state) != SB_READY)
			continue;
		uint32_t j = i;
		while (j + 1 < sh->nb && ck_sharding_owns_bucket(s, j + 1) &&
		       atomic_load(&sh->b[j + 1].state) == SB_READY)
			j++;
		if (j > i)
			ck_sbuf_printf(&b, "%s%u-%u", sep, i, j);
		else
			ck_sbuf_printf(&b, "%s%u", sep, i);
		sep = ",";
		i = j;
	}
	return ck_sbuf_steal(&b);
}

int mgr_shards_check(void *ud, char **note)
{
	ck_manager_t *d = ud;
	pthread_mutex_lock(&d->shards->mu);
	*note = owned_text(d->shards);
	pthread_mutex_unlock(&d->shards->mu);
	return 0;
}

void mgr_shards_collect(void *ud, ck_sbuf_t *out)
{
	ck_manager_t *d = ud;
	mgr_shards_t *sh = d->shards;
	pthread_mutex_lock(&sh->mu);
	ck_sharding_t *s = sh->s;
	uint32_t owned = 0, members = 0;
	ck_metrics_write_header(
	    out, "ckube_shard_bucket_owned",
	    "Each hash bucket this replica owns and its range [start, end) (end "
	    "0x0 = 2^64): 1 once its caches are listed, 0 while they list.",
	    CK_METRICS_GAUGE);
	for (uint32_t i = 0; s != NULL && i < sh->nb; i++) {
		if (!ck_sharding_owns_bucket(s, i))
			continue;
		owned++;
		char num[16], start[24], end[24];
		ck_shard_range_t r = ck_sharding_bucket_range(s, i);
		snprintf(num, sizeof(num), "%u", i);
		snprintf(start, sizeof(start), "0x%016llx", (unsigned long long)r.start);
		snprintf(end, sizeof(end), "0x%016llx", (unsigned long long)r.end);
		ck_metrics_label_t l[] = {{"bucket", num}, {"start", start}, {"end", end}};
		ck_metrics_write_sample(out, "ckube_shard_bucket_owned", l, 3,
		                        atomic_load(&sh->b[i].state) == SB_READY ? 1 : 0);
	}
	if (s != NULL)
		members = ck_sharding_members(s);
	pthread_mutex_unlock(&sh->mu);
	struct {
		const char *name, *help;
		ck_metrics_type_t type;
		double v;
	} rows[] = {
	    {"ckube_shard_buckets", "Hash buckets the shard group splits.", CK_METRICS_GAUGE,
	     sh->nb},
	    {"ckube_shard_buckets_owned", "Hash buckets this replica owns.", CK_METRICS_GAUGE,
	     owned},
	    {"ckube_shard_members", "Live replicas in the shard group, as last seen.",
	     CK_METRICS_GAUGE, members},
	    {"ckube_shard_acquired_total", "Buckets this replica took.", CK_METRICS_COUNTER,
	     (double)atomic_load(&sh->n_acquired)},
	    {"ckube_shard_released_total", "Buckets this replica handed over (drained first).",
	     CK_METRICS_COUNTER, (double)atomic_load(&sh->n_released)},
	    {"ckube_shard_keys_skipped_total",
	     "Queued keys not run because another replica owns their bucket.", CK_METRICS_COUNTER,
	     (double)atomic_load(&sh->n_skipped)},
	    {"ckube_shard_keys_parked_total",
	     "Queued keys held back until their newly owned bucket's caches were listed.",
	     CK_METRICS_COUNTER, (double)atomic_load(&sh->n_parked)},
	};
	for (size_t i = 0; i < CK_ARRAY_LEN(rows); i++) {
		ck_metrics_write_header(out, rows[i].name, rows[i].help, rows[i].type);
		ck_metrics_write_sample(out, rows[i].name, NULL, 0, rows[i].v);
	}
}
