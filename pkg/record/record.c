/*
 * record: the event recorder. Callers put events on a bounded queue; one poster
 * thread correlates them (aggregate, dedup, spam filter) and writes them through
 * the sink with retries.
 *
 * Design note: the queue, the flush tickets and the stop flag are the only state
 * shared with callers, under one mutex that is never held across a sink call or a
 * log line, so ck_record_event() waits for nothing but a few pointer moves. The three
 * correlator caches belong to the poster thread alone and take no lock.
 *
 * Spam-deferred increments: an observation whose Event already exists on the
 * server, refused by the spam filter, stays in the dedup cache marked pending.
 * The poster writes it when the object's bucket has a token again (it checks
 * whenever it wakes, and sleeps no longer than until the next token is due), or
 * unconditionally on shutdown.
 *
 * Memory: the caches keep no strings. Their keys are hashes (rec_key_*), the
 * aggregation record keeps hashes of the distinct messages, and the dedup record
 * keeps what client-go's eventLog keeps -- count, first timestamp and the name (as
 * the nanoseconds that make it unique) -- plus whether the Event exists. Every
 * other field of a write comes from the event being handled, which has the same
 * key, so the same object, type, reason (and message, but for the aggregate); the
 * one exception is a held-back increment, whose latest event the record keeps
 * until it is written. That makes an entry 32 bytes of value in one 64-byte
 * allocation (rec_lru.c), where it was a dozen strings.
 */
#include "pkg/record/rec_internal.h"
#include <ckube/log.h>
#include <ckube/record.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define AGG_PREFIX "(combined from similar events): "
/* How often a full queue is reported (the drops are counted regardless). */
#define QUEUE_FULL_LOG_NS (10 * CK_NS_PER_SEC)
/* The poster re-checks deferred increments at least this often. */
#define MAX_IDLE_WAIT_NS (60 * CK_NS_PER_SEC)

/* Dedup cache entry: one Event (client-go's eventLog, plus what the retries need). */
typedef struct obs {
	int64_t first_ns;  /* firstTimestamp / eventTime (wall clock) */
	int64_t name_ns;   /* the name is rec_event_name(object name, name_ns) */
	rec_event_t *pend; /* the latest occurrence while the spam filter holds it back */
	int32_t count;
	bool on_server; /* created (or found to exist): increments are PATCHes */
} obs_t;

/*
 * Aggregation cache entry: hashes of the distinct messages of similar events, at
 * most aggregate_max_events - 1; the first inline (most objects only ever have
 * one), the others in more[] once there is a second.
 */
typedef struct agg {
	uint64_t last_mono;
	uint64_t first;
	uint64_t *more; /* owned; aggregate_max_events - 2 slots */
	uint32_t n;
} agg_t;

/* Spam filter cache entry: one token bucket per source + object + type. */
typedef struct spam {
	uint64_t last_refill;
	uint64_t last_log;
	uint32_t tokens;
	uint32_t held_dropped; /* since the last log line (saturating) */
	uint32_t held_deferred;
	bool logged;
} spam_t;

struct ck_record {
	ck_record_sink_t sink;
	rec_kclient_t kc; /* the client sink's state, when it is the sink */
	bool kclient;
	_Atomic int api; /* ck_record_api_t; AUTO until discovery ran (poster thread) */
	rec_source_t src;
	char *component;
	char *host;
	char *reporting_controller;
	char *reporting_instance;
	const ck_clk_t *clock;
	size_t queue_size;
	int max_tries;
	uint64_t retry_interval_ns;
	uint64_t shutdown_timeout_ns;
	int aggregate_max_events;
	uint64_t aggregate_interval_ns;
	int spam_burst;
	uint64_t spam_refill_ns;
	uint64_t spam_log_interval_ns;

	/* Shared with callers, under mu. */
	pthread_mutex_t mu;
	pthread_cond_t cv;       /* wakes the poster: new event, flush, stop */
	pthread_cond_t flush_cv; /* wakes flush waiters */
	rec_event_t **q;
	size_t qhead;
	size_t qlen;
	uint64_t flush_seq;
	uint64_t flush_done;
	bool stopping;
	uint64_t stop_deadline; /* real monotonic ns */
	bool qfull_logged;
	uint64_t qfull_last_log;
	uint64_t qfull_unlogged;
	pthread_t thread;

	/* Poster thread only. */
	rec_lru_t *agg;
	rec_lru_t *obs;
	rec_lru_t *spam;
	size_t npending;
	uint64_t pending_due; /* clock ns before which no pending entry can be written */
	int64_t last_name_ns;
	bool freeing;

	_Atomic uint64_t st_posted;
	_Atomic uint64_t st_patched;
	_Atomic uint64_t st_dropped_queue_full;
	_Atomic uint64_t st_dropped_spam;
	_Atomic uint64_t st_deferred_spam;
	_Atomic uint64_t st_dropped_invalid;
	_Atomic uint64_t st_failed;
	_Atomic uint64_t st_retries;
};

static void stat_inc(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* Real monotonic time: shutdown bounds and retry waits are real waits. */
static uint64_t real_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * CK_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* Waits on cv (CLOCK_MONOTONIC) until deadline; mu held. */
static void cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline)
{
	struct timespec ts = {
	    .tv_sec = (time_t)(deadline / CK_NS_PER_SEC),
	    .tv_nsec = (long)(deadline % CK_NS_PER_SEC),
	};
	pthread_cond_timedwait(cv, mu, &ts);
}

static uint64_t deadline_after(uint64_t ns)
{
	uint64_t now = real_now_ns();
	return ns > UINT64_MAX - now ? UINT64_MAX : now + ns;
}

/* mu held. */
static bool stop_expired(const ck_record_t *r)
{
	return r->stopping && real_now_ns() >= r->stop_deadline;
}

/* --- Cache entries ------------------------------------------------------------ */

static void obs_free(void *ud, void *val)
{
	ck_record_t *r = ud;
	obs_t *o = val;

	if (o->pend != NULL) {
		r->npending--;
		/* The held-back count is lost with the entry: say so in the figures. */
		if (!r->freeing)
			stat_inc(&r->st_dropped_spam, 1);
		rec_event_free(o->pend);
	}
}

static void agg_free(void *ud, void *val)
{
	agg_t *a = val;
	free(a->more);
}

/* --- Correlator (poster thread) ------------------------------------------------ */

/*
 * Notes the message (its hash h) among the similar events of a; returns true when
 * the event must go to the aggregate instead (client-go: the set of distinct
 * messages reached the max). The set keeps the first max-1 messages, which keep
 * their own Events; client-go evicts an arbitrary one instead, which makes the
 * outcome depend on map order.
 */
static bool agg_note(ck_record_t *r, agg_t *a, uint64_t h)
{
	for (uint32_t i = 0; i < a->n; i++)
		if ((i == 0 ? a->first : a->more[i - 1]) == h)
			return false;
	if (a->n + 1 >= (uint32_t)r->aggregate_max_events)
		return true;
	if (a->n == 0) {
		a->first = h;
	} else {
		if (a->more == NULL)
			a->more = ck_xcalloc((size_t)r->aggregate_max_events - 2, sizeof(*a->more));
		a->more[a->n - 1] = h;
	}
	a->n++;
	return false;
}

/* Returns the nanoseconds of a new unique event name for an Event first seen at
 * first_ns (names stay unique on a coarse or fake clock). */
static int64_t unique_name_ns(ck_record_t *r, int64_t first_ns)
{
	int64_t ns = first_ns;
	if (ns <= r->last_name_ns)
		ns = r->last_name_ns + 1;
	r->last_name_ns = ns;
	return ns;
}

/* Takes a token from key's bucket; returns false if there is none. */
static bool spam_take(ck_record_t *r, uint64_t key, uint64_t now)
{
	if (r->spam_burst < 0)
		return true;
	spam_t *s = rec_lru_get(r->spam, key);
	if (s == NULL) {
		s = rec_lru_put(r->spam, key);
		s->tokens = (uint32_t)r->spam_burst;
		s->last_refill = now;
	}
	if (now > s->last_refill) {
		uint64_t add = (now - s->last_refill) / r->spam_refill_ns;
		if (s->tokens + add >= (uint64_t)r->spam_burst) {
			s->tokens = (uint32_t)r->spam_burst;
			s->last_refill = now;
		} else {
			s->tokens += (uint32_t)add;
			s->last_refill += add * r->spam_refill_ns;
		}
	}
	if (s->tokens == 0)
		return false;
	s->tokens--;
	return true;
}

/* Clock ns until key's bucket has a token again (0 if it has one now). */
static uint64_t spam_due_in(ck_record_t *r, uint64_t key, uint64_t now)
{
	spam_t *s = rec_lru_peek(r->spam, key);
	if (s == NULL || s->tokens > 0 || r->spam_burst < 0)
		return 0;
	uint64_t due = s->last_refill + r->spam_refill_ns;
	return due > now ? due - now : 0;
}

static void sat_inc(uint32_t *c)
{
	if (*c < UINT32_MAX)
		(*c)++;
}

/* Counts and (at most once per object per interval) logs what the filter held back
 * of e (borrowed), whose spam key is key. */
static void spam_note(ck_record_t *r, const rec_event_t *e, uint64_t key, uint64_t now,
                      bool deferred)
{
	spam_t *s = rec_lru_peek(r->spam, key);

	stat_inc(deferred ? &r->st_deferred_spam : &r->st_dropped_spam, 1);
	if (s == NULL)
		return;
	sat_inc(deferred ? &s->held_deferred : &s->held_dropped);
	if (s->logged && now - s->last_log < r->spam_log_interval_ns)
		return;
	CK_LOG_WARN("Event spam filter held back events about an object",
	            CK_KV_STR("kind", e->io_kind), CK_KV_OBJ("object", e->io_ns, e->io_name),
	            CK_KV_STR("reason", e->reason), CK_KV_UINT("dropped", s->held_dropped),
	            CK_KV_UINT("deferred", s->held_deferred), CK_KV_INT("burst", r->spam_burst),
	            CK_KV_UINT("refillSeconds", r->spam_refill_ns / CK_NS_PER_SEC));
	s->logged = true;
	s->last_log = now;
	s->held_dropped = s->held_deferred = 0;
}

/* --- Writing ------------------------------------------------------------------- */

/*
 * Sleeps ns of real time, waking early on stop. Returns false when the recorder is
 * stopping and its deadline has passed (the caller gives up).
 */
static bool poster_sleep(ck_record_t *r, uint64_t ns)
{
	bool ok = true;
	uint64_t deadline = deadline_after(ns);

	pthread_mutex_lock(&r->mu);
	for (;;) {
		uint64_t now = real_now_ns(), wake = deadline;
		if (stop_expired(r)) {
			ok = false;
			break;
		}
		if (now >= deadline)
			break;
		if (r->stopping && r->stop_deadline < wake)
			wake = r->stop_deadline;
		cond_wait_until(&r->cv, &r->mu, wake);
	}
	pthread_mutex_unlock(&r->mu);
	return ok;
}

/* The API to write: decided once, by discovery, before the first write (client sink). */
static ck_record_api_t current_api(ck_record_t *r)
{
	ck_record_api_t api = (ck_record_api_t)atomic_load(&r->api);
	if (api != CK_RECORD_API_AUTO)
		return api;
	char *why = NULL;
	api = rec_kclient_discover(&r->kc, &why);
	CK_LOG_V(1, "Event API chosen",
	         CK_KV_STR("api", api == CK_RECORD_API_EVENTS_V1 ? "events.k8s.io/v1" : "v1"),
	         CK_KV_STR("discovery", why ? why : ""));
	free(why);
	r->kc.api = api;
	atomic_store(&r->api, (int)api);
	return api;
}

/*
 * A 403 on an events.k8s.io create where discovery said it is served: most likely
 * RBAC that grants core/v1 events only (deploy/ manifests written before this
 * library used events.k8s.io). Losing every event over it would be worse than
 * writing the older API: fall back, once, for the recorder's life.
 */
static bool fall_back_to_core(ck_record_t *r, ck_record_sink_result_t result)
{
	if (!r->kclient || r->kc.api != CK_RECORD_API_EVENTS_V1 ||
	    result != CK_RECORD_SINK_REJECTED || r->kc.last_http != 403)
		return false;
	CK_LOG_WARN("events.k8s.io/v1 events forbidden, writing core/v1 events instead "
	            "(grant create/patch on events.k8s.io events to use the newer API)",
	            CK_KV_STR("reportingController", r->reporting_controller));
	r->kc.api = CK_RECORD_API_CORE_V1;
	atomic_store(&r->api, (int)CK_RECORD_API_CORE_V1);
	return true;
}

/* One attempt: PATCH when the Event exists, else (or when the PATCH finds none) create. */
static ck_record_sink_result_t write_once(ck_record_t *r, obs_t *o, const rec_event_t *e,
                                          char **err)
{
	ck_record_sink_result_t result;
	ck_sbuf_t body = CK_SBUF_INIT;
	bool v1 = current_api(r) == CK_RECORD_API_EVENTS_V1;

	if (o->on_server) {
		if (v1)
			rec_json_patch_v1(&body, e);
		else
			rec_json_patch(&body, e);
		result = r->sink.patch(r->sink.ud, e->ns, e->name, ck_sbuf_cstr(&body), err);
		if (result == CK_RECORD_SINK_OK) {
			stat_inc(&r->st_patched, 1);
			goto out;
		}
		if (result != CK_RECORD_SINK_NOT_FOUND)
			goto out;
		/* Expired (the API server keeps events an hour) or deleted: create anew. */
		o->on_server = false;
		free(*err);
		*err = NULL;
		ck_sbuf_reset(&body);
	}
	if (v1)
		rec_json_create_v1(&body, &r->src, e);
	else
		rec_json_create(&body, &r->src, e);
	result = r->sink.create(r->sink.ud, e->ns, ck_sbuf_cstr(&body), err);
	if (v1 && fall_back_to_core(r, result)) {
		free(*err);
		*err = NULL;
		ck_sbuf_reset(&body);
		rec_json_create(&body, &r->src, e);
		result = r->sink.create(r->sink.ud, e->ns, ck_sbuf_cstr(&body), err);
	}
	if (result == CK_RECORD_SINK_OK)
		stat_inc(&r->st_posted, 1);
	/* Most likely our own earlier try that succeeded but whose answer was lost. */
	if (result == CK_RECORD_SINK_OK || result == CK_RECORD_SINK_ALREADY_EXISTS)
		o->on_server = true;
out:
	ck_sbuf_free(&body);
	return result;
}

#define EVENT_KVS(e)                                                                               \
	CK_KV_STR("kind", (e)->io_kind), CK_KV_OBJ("object", (e)->io_ns, (e)->io_name),            \
	    CK_KV_STR("reason", (e)->reason), CK_KV_STR("event", (e)->name)

/* Writes e (borrowed), the Event o stands for -- its name, count and first time set
 * from o by handle_event() -- with retries. */
static void write_obs(ck_record_t *r, obs_t *o, const rec_event_t *e)
{
	char *err = NULL;

	for (int tries = 1;; tries++) {
		ck_record_sink_result_t result;

		free(err);
		err = NULL;
		result = write_once(r, o, e, &err);
		switch (result) {
		case CK_RECORD_SINK_OK:
			goto out;
		case CK_RECORD_SINK_ALREADY_EXISTS:
		case CK_RECORD_SINK_NS_TERMINATING:
			CK_LOG_V(2, "Event not written, not retrying", CK_KV_ERR(err),
			         EVENT_KVS(e));
			stat_inc(&r->st_failed, 1);
			goto out;
		case CK_RECORD_SINK_NOT_FOUND:
		case CK_RECORD_SINK_REJECTED:
			CK_LOG_ERROR(err, "Server rejected event, not retrying", EVENT_KVS(e));
			stat_inc(&r->st_failed, 1);
			goto out;
		case CK_RECORD_SINK_RETRY:
			break;
		}
		if (tries >= r->max_tries) {
			CK_LOG_ERROR(err, "Unable to write event, retry limit reached",
			             EVENT_KVS(e), CK_KV_INT("tries", tries));
			stat_inc(&r->st_failed, 1);
			goto out;
		}
		/* A random first wait, so that many clients do not retry in step. */
		uint64_t wait = tries == 1
		                    ? (uint64_t)(ck_rand_unit() * (double)r->retry_interval_ns)
		                    : r->retry_interval_ns;
		CK_LOG_V(2, "Unable to write event, will retry", CK_KV_ERR(err), EVENT_KVS(e),
		         CK_KV_INT("try", tries), CK_KV_UINT("waitMs", wait / CK_NS_PER_MS));
		if (!poster_sleep(r, wait)) {
			CK_LOG_ERROR(err, "Unable to write event before shutdown", EVENT_KVS(e));
			stat_inc(&r->st_failed, 1);
			goto out;
		}
		stat_inc(&r->st_retries, 1);
	}
out:
	free(err);
}

/* Takes the held-back occurrence of o off it (the caller writes or frees it). */
static rec_event_t *obs_unpend(ck_record_t *r, obs_t *o)
{
	rec_event_t *e = o->pend;
	if (e != NULL) {
		o->pend = NULL;
		r->npending--;
	}
	return e;
}

/* Takes ev: aggregates, dedups, filters and writes it. */
static void handle_event(ck_record_t *r, rec_event_t *ev)
{
	uint64_t now = ck_clk_mono_ns(r->clock);
	uint64_t akey = rec_key_aggregate(&r->src, ev), key;
	agg_t *a = rec_lru_get(r->agg, akey);

	/* A put over a stale record frees it and gives a fresh (zeroed) one. */
	if (a == NULL || now < a->last_mono || now - a->last_mono > r->aggregate_interval_ns)
		a = rec_lru_put(r->agg, akey);
	a->last_mono = now;
	if (agg_note(r, a, rec_key_message(ev->message))) {
		char *m = ck_xasprintf(AGG_PREFIX "%s", ev->message);
		rec_event_set_message(ev, rec_message_clean(m, REC_MAX_MESSAGE));
		free(m);
		key = akey; /* the aggregate Event is counted under the aggregate key */
	} else {
		key = rec_key_event(&r->src, ev);
	}

	obs_t *o = rec_lru_get(r->obs, key);
	if (o != NULL) {
		o->count++;
	} else {
		o = rec_lru_put(r->obs, key);
		o->first_ns = ev->first_ns;
		o->name_ns = unique_name_ns(r, ev->first_ns);
		o->count = 1;
	}
	/* The Event as it now stands: this occurrence's fields (the same key, so the
	 * same object, type and reason), the record's name, first time and count. */
	ev->count = o->count;
	ev->first_ns = o->first_ns;
	free(ev->name);
	ev->name = rec_event_name(ev->io_name, o->name_ns);

	uint64_t skey = rec_key_spam(&r->src, ev);
	if (!spam_take(r, skey, now)) {
		spam_note(r, ev, skey, now, o->on_server);
		if (!o->on_server) {
			/* A new Event refused: the count stays in the record, the rest goes. */
			rec_event_free(ev);
			return;
		}
		if (o->pend == NULL) {
			uint64_t due = now + spam_due_in(r, skey, now);
			if (r->npending == 0 || due < r->pending_due)
				r->pending_due = due;
			r->npending++;
		}
		rec_event_free(o->pend);
		o->pend = ev; /* the latest occurrence is what will be written */
		return;
	}
	rec_event_free(obs_unpend(r, o)); /* this occurrence carries its count */
	write_obs(r, o, ev);
	rec_event_free(ev);
}

typedef struct pend_list {
	obs_t **v;
	size_t n;
} pend_list_t;

static void collect_pending(void *ud, void *val)
{
	pend_list_t *l = ud;
	obs_t *o = val;
	if (o->pend != NULL)
		l->v[l->n++] = o;
}

/*
 * Writes the deferred increments whose bucket has a token again (all of them when
 * force, until the stop deadline). Returns clock ns until the next one is due, or
 * UINT64_MAX when none is left.
 */
static uint64_t write_pending(ck_record_t *r, bool force)
{
	uint64_t next = UINT64_MAX;
	pend_list_t l = {NULL, 0};

	if (r->npending == 0)
		return next;
	/* Nothing can be due yet: spare the walk over the cache on every wake-up. */
	uint64_t start = ck_clk_mono_ns(r->clock);
	if (!force && start < r->pending_due)
		return r->pending_due - start;
	/* Collected first: writing sleeps between retries, the cache stays put. */
	l.v = ck_xcalloc(r->npending, sizeof(*l.v));
	rec_lru_foreach(r->obs, collect_pending, &l);
	for (size_t i = 0; i < l.n; i++) {
		obs_t *o = l.v[i];
		uint64_t now = ck_clk_mono_ns(r->clock);

		if (force) {
			pthread_mutex_lock(&r->mu);
			bool expired = stop_expired(r);
			pthread_mutex_unlock(&r->mu);
			if (expired)
				break;
		}
		uint64_t skey = rec_key_spam(&r->src, o->pend);
		if (spam_take(r, skey, now) || force) {
			rec_event_t *e = obs_unpend(r, o);
			write_obs(r, o, e);
			rec_event_free(e);
		} else {
			uint64_t due = spam_due_in(r, skey, now);
			if (due < next)
				next = due;
		}
	}
	free(l.v);
	if (next != UINT64_MAX)
		r->pending_due = ck_clk_mono_ns(r->clock) + next;
	return next;
}

/* --- The poster thread --------------------------------------------------------- */

static rec_event_t *q_pop(ck_record_t *r)
{
	rec_event_t *ev = r->q[r->qhead];
	r->q[r->qhead] = NULL;
	r->qhead = (r->qhead + 1) % r->queue_size;
	r->qlen--;
	return ev;
}

static void *poster_main(void *arg)
{
	ck_record_t *r = arg;
	size_t left = 0;

	pthread_mutex_lock(&r->mu);
	for (;;) {
		uint64_t seq = r->flush_seq;

		if (r->qlen > 0 && !stop_expired(r)) {
			rec_event_t *ev = q_pop(r);
			pthread_mutex_unlock(&r->mu);
			handle_event(r, ev);
			pthread_mutex_lock(&r->mu);
			continue;
		}
		if (r->stopping)
			break;
		pthread_mutex_unlock(&r->mu);
		uint64_t due = write_pending(r, false);
		pthread_mutex_lock(&r->mu);
		if (r->qlen > 0 || r->stopping)
			continue;
		/* Everything queued before flush ticket seq has been handled. */
		if (r->flush_done < seq) {
			r->flush_done = seq;
			pthread_cond_broadcast(&r->flush_cv);
		}
		if (r->flush_seq != seq)
			continue;
		cond_wait_until(&r->cv, &r->mu,
		                deadline_after(due < MAX_IDLE_WAIT_NS ? due : MAX_IDLE_WAIT_NS));
	}
	while (r->qlen > 0) {
		rec_event_free(q_pop(r));
		left++;
	}
	pthread_mutex_unlock(&r->mu);

	if (left > 0) {
		stat_inc(&r->st_failed, left);
		CK_LOG_WARN("Events not written before the shutdown deadline",
		            CK_KV_UINT("events", left));
	}
	/* Shutting down: the counts the spam filter held back are written now. */
	write_pending(r, true);

	pthread_mutex_lock(&r->mu);
	r->flush_done = r->flush_seq;
	pthread_cond_broadcast(&r->flush_cv);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* --- Public API ---------------------------------------------------------------- */

static void strings_free(ck_record_t *r)
{
	free(r->component);
	free(r->host);
	free(r->reporting_controller);
	free(r->reporting_instance);
}

ck_record_t *ck_record_new(ck_client_t *c, const ck_record_opts_t *opts, char **err)
{
	ck_record_t *r = NULL;
	pthread_condattr_t ca;
	bool have_ca = false, have_cv = false, have_fcv = false;
	int rc;

	if (opts == NULL || opts->component == NULL || *opts->component == '\0') {
		ck_err_set(err, "record: component (the events' source.component) is required");
		return NULL;
	}
	if (opts->sink == NULL && c == NULL) {
		ck_err_set(err, "record: neither a client nor a sink given");
		return NULL;
	}
	if (opts->sink != NULL && (opts->sink->create == NULL || opts->sink->patch == NULL)) {
		ck_err_set(err, "record: sink lacks its create or patch function");
		return NULL;
	}

	r = ck_xcalloc(1, sizeof(*r));
	if (opts->sink != NULL) {
		r->sink = *opts->sink;
	} else {
		r->kclient = true;
		r->kc.c = c;
		rec_sink_kclient(&r->kc, &r->sink);
	}
	/* A sink of the caller's does not discover: it gets what it was written for. */
	ck_record_api_t api = opts->api;
	if (api == CK_RECORD_API_AUTO && !r->kclient)
		api = CK_RECORD_API_CORE_V1;
	r->kc.api = api == CK_RECORD_API_EVENTS_V1 ? api : CK_RECORD_API_CORE_V1;
	atomic_store(&r->api, (int)api);
	r->component = ck_xstrdup(opts->component);
	r->host = ck_xstrdup(opts->host ? opts->host : "");
	r->reporting_controller =
	    ck_xstrdup(opts->reporting_controller ? opts->reporting_controller : opts->component);
	if (opts->reporting_instance != NULL) {
		r->reporting_instance = ck_xstrdup(opts->reporting_instance);
	} else if (*r->host) {
		r->reporting_instance = ck_xstrdup(r->host);
	} else {
		char hn[256] = "";
		if (gethostname(hn, sizeof(hn) - 1) != 0 || hn[0] == '\0')
			snprintf(hn, sizeof(hn), "%s", opts->component);
		r->reporting_instance = ck_xstrdup(hn);
	}
	r->src =
	    (rec_source_t){r->component, r->host, r->reporting_controller, r->reporting_instance};
	r->clock = opts->clock ? opts->clock : ck_clk_real();
	r->queue_size = opts->queue_size ? opts->queue_size : 1000;
	r->max_tries = opts->max_tries > 0 ? opts->max_tries : 12;
	r->retry_interval_ns =
	    (opts->retry_interval_ms ? opts->retry_interval_ms : 10000) * CK_NS_PER_MS;
	r->shutdown_timeout_ns =
	    (opts->shutdown_timeout_ms ? opts->shutdown_timeout_ms : 10000) * CK_NS_PER_MS;
	r->aggregate_max_events = opts->aggregate_max_events > 0 ? opts->aggregate_max_events : 10;
	r->aggregate_interval_ns =
	    (opts->aggregate_interval_ms ? opts->aggregate_interval_ms : 600000) * CK_NS_PER_MS;
	r->spam_burst = opts->spam_burst ? opts->spam_burst : 25;
	r->spam_refill_ns = (opts->spam_refill_ms ? opts->spam_refill_ms : 300000) * CK_NS_PER_MS;
	r->spam_log_interval_ns =
	    (opts->spam_log_interval_ms ? opts->spam_log_interval_ms : 300000) * CK_NS_PER_MS;

	size_t cache = opts->cache_size ? opts->cache_size : 4096;
	r->agg = rec_lru_new(cache, sizeof(agg_t), agg_free, r);
	r->obs = rec_lru_new(cache, sizeof(obs_t), obs_free, r);
	r->spam = rec_lru_new(cache, sizeof(spam_t), NULL, r);
	r->q = ck_xcalloc(r->queue_size, sizeof(*r->q));

	pthread_mutex_init(&r->mu, NULL);
	if ((rc = pthread_condattr_init(&ca)) != 0)
		goto fail;
	have_ca = true;
	if ((rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) != 0)
		goto fail;
	if ((rc = pthread_cond_init(&r->cv, &ca)) != 0)
		goto fail;
	have_cv = true;
	if ((rc = pthread_cond_init(&r->flush_cv, &ca)) != 0)
		goto fail;
	have_fcv = true;
	if ((rc = pthread_create(&r->thread, NULL, poster_main, r)) != 0)
		goto fail;
	pthread_condattr_destroy(&ca);
	return r;

fail:
	ck_err_set(err, "record: starting the poster thread: %s", strerror(rc));
	if (have_ca)
		pthread_condattr_destroy(&ca);
	if (have_cv)
		pthread_cond_destroy(&r->cv);
	if (have_fcv)
		pthread_cond_destroy(&r->flush_cv);
	pthread_mutex_destroy(&r->mu);
	r->freeing = true;
	rec_lru_free(r->agg);
	rec_lru_free(r->obs);
	rec_lru_free(r->spam);
	free(r->q);
	strings_free(r);
	free(r);
	return NULL;
}

void ck_record_free(ck_record_t *r)
{
	if (r == NULL)
		return;
	pthread_mutex_lock(&r->mu);
	r->stopping = true;
	r->stop_deadline = deadline_after(r->shutdown_timeout_ns);
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thread, NULL);

	r->freeing = true;
	rec_lru_free(r->agg);
	rec_lru_free(r->obs);
	rec_lru_free(r->spam);
	while (r->qlen > 0)
		rec_event_free(q_pop(r));
	free(r->q);
	pthread_cond_destroy(&r->cv);
	pthread_cond_destroy(&r->flush_cv);
	pthread_mutex_destroy(&r->mu);
	strings_free(r);
	free(r);
}

static bool valid_type(const char *t)
{
	return t && (strcmp(t, CK_RECORD_NORMAL) == 0 || strcmp(t, CK_RECORD_WARNING) == 0);
}

void ck_record_eventv(ck_record_t *r, const ck_record_ref_t *ref, const char *type,
                      const char *reason, const char *fmt, va_list ap)
{
	rec_event_t *ev;
	char *msg;
	bool log_full = false;
	uint64_t unlogged = 0;

	if (r == NULL)
		return;
	const char *why = NULL;
	if (ref == NULL || ref->name == NULL || *ref->name == '\0')
		why = "no involved object (or it has no name)";
	else if (!valid_type(type))
		why = "unsupported event type (want Normal or Warning)";
	else if (reason == NULL || *reason == '\0')
		why = "empty reason";
	else if (fmt == NULL)
		why = "no message";
	if (why != NULL) {
		stat_inc(&r->st_dropped_invalid, 1);
		CK_LOG_ERROR(why, "Event dropped", CK_KV_STR("type", type),
		             CK_KV_STR("reason", reason),
		             CK_KV_OBJ("object", ref ? ref->ns : NULL, ref ? ref->name : NULL));
		return;
	}
	msg = ck_xvasprintf(fmt, ap);
	ev = rec_event_new(ref, type, reason, msg, ck_clk_wall_ns(r->clock));
	free(msg);

	pthread_mutex_lock(&r->mu);
	if (r->qlen < r->queue_size && !r->stopping) {
		r->q[(r->qhead + r->qlen) % r->queue_size] = ev;
		r->qlen++;
		ev = NULL;
		pthread_cond_signal(&r->cv);
	} else if (r->stopping) {
		/* A caller racing ck_record_free(): counted, not reported as a full queue. */
		stat_inc(&r->st_dropped_queue_full, 1);
	} else {
		uint64_t now = ck_clk_mono_ns(r->clock);
		stat_inc(&r->st_dropped_queue_full, 1);
		r->qfull_unlogged++;
		if (!r->qfull_logged || now - r->qfull_last_log >= QUEUE_FULL_LOG_NS) {
			log_full = true;
			unlogged = r->qfull_unlogged;
			r->qfull_unlogged = 0;
			r->qfull_logged = true;
			r->qfull_last_log = now;
		}
	}
	pthread_mutex_unlock(&r->mu);

	if (log_full)
		CK_LOG_WARN("Event queue full, dropping events", CK_KV_UINT("dropped", unlogged),
		            CK_KV_UINT("queueSize", r->queue_size), CK_KV_STR("kind", ev->io_kind),
		            CK_KV_OBJ("object", ev->io_ns, ev->io_name),
		            CK_KV_STR("reason", ev->reason));
	rec_event_free(ev);
}

void ck_record_event_ref(ck_record_t *r, const ck_record_ref_t *ref, const char *type,
                         const char *reason, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ck_record_eventv(r, ref, type, reason, fmt, ap);
	va_end(ap);
}

void ck_record_event(ck_record_t *r, const ck_obj_t *obj, const char *type, const char *reason,
                     const char *fmt, ...)
{
	char api_version[256] = "";
	ck_record_ref_t ref = {0};
	va_list ap;

	if (obj != NULL && obj->type != NULL) {
		const ck_type_t *t = obj->type;
		/* "group/version", or "version" for the core group. */
		if (t->group && *t->group)
			snprintf(api_version, sizeof(api_version), "%s/%s", t->group, t->version);
		else
			snprintf(api_version, sizeof(api_version), "%s",
			         t->version ? t->version : "");
		ref =
		    (ck_record_ref_t){api_version, t->kind, obj->ns, obj->name, obj->uid, obj->rv};
	}
	va_start(ap, fmt);
	ck_record_eventv(r, obj && obj->type ? &ref : NULL, type, reason, fmt, ap);
	va_end(ap);
}

int ck_record_flush(ck_record_t *r, uint32_t timeout_ms)
{
	int result = 0;
	uint64_t deadline = deadline_after((uint64_t)timeout_ms * CK_NS_PER_MS);

	pthread_mutex_lock(&r->mu);
	uint64_t ticket = ++r->flush_seq;
	pthread_cond_signal(&r->cv);
	while (r->flush_done < ticket) {
		if (real_now_ns() >= deadline) {
			result = -1;
			break;
		}
		cond_wait_until(&r->flush_cv, &r->mu, deadline);
	}
	pthread_mutex_unlock(&r->mu);
	return result;
}

void ck_record_stats(const ck_record_t *r, ck_record_stats_t *out)
{
	ck_record_t *m = (ck_record_t *)r; /* atomics are read, not changed */
	out->posted = atomic_load(&m->st_posted);
	out->patched = atomic_load(&m->st_patched);
	out->dropped_queue_full = atomic_load(&m->st_dropped_queue_full);
	out->dropped_spam = atomic_load(&m->st_dropped_spam);
	out->deferred_spam = atomic_load(&m->st_deferred_spam);
	out->dropped_invalid = atomic_load(&m->st_dropped_invalid);
	out->failed = atomic_load(&m->st_failed);
	out->retries = atomic_load(&m->st_retries);
}

ck_record_api_t ck_record_api(const ck_record_t *r)
{
	return (ck_record_api_t)atomic_load(&((ck_record_t *)(uintptr_t)r)->api);
}
