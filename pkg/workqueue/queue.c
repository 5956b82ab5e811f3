/*
 * The work queue: basic FIFO with dedup, delayed adds, rate-limited adds, metrics.
 *
 * Design note.
 *
 * State. Every key the queue knows is one item_t, interned once in a hash table
 * (key -> item). An item carries three independent facts: DIRTY (must be processed),
 * PROCESSING (handed out by ck_wq_get, not yet done) and "waiting in the delay heap".
 * The FIFO ring holds exactly the items that are DIRTY and not PROCESSING. An item
 * that is none of the three is recycled onto a small free list (its key buffer too),
 * so once warm, add/get/done allocate nothing.
 *
 * Delays without a timer thread. Delayed items sit in a min-heap ordered by ready
 * time (ties: first come first served); the item records its heap slot, so a second
 * ck_wq_add_after of the same key finds it in O(1) and keeps the earlier time. Instead
 * of a waiter thread (client-go's waitingLoop), every call that looks at the queue
 * (add, add_after, get, len) first moves the due items to the FIFO, and a ck_wq_get
 * that finds nothing sleeps until the earliest ready time. Only one blocked getter,
 * the "timer waiter", sleeps with that deadline (on its own condition variable);
 * the others sleep without one. So nothing wakes unless a key is added or a delay
 * expires, there is no extra thread per queue, and when all workers are busy no one
 * needs to wake at all: the next ck_wq_get promotes what is due. Nobody can observe the
 * difference from a waiter thread, since every observer promotes first.
 *
 * Wake-ups. A key that becomes ready wakes one idle getter, or the timer waiter if
 * no getter is idle. A getter leaving with keys still queued wakes the next one, so
 * a signal that reached a thread already awake is never lost. A new earliest delay
 * wakes the timer waiter (or makes an idle getter the timer waiter).
 *
 * Metrics are updated under the queue's mutex (which already serialises writers)
 * with relaxed atomic stores, so they cost a plain store and can be read at any time.
 *
 * Priority queues (controller-runtime's rules, <ckube/workqueue.h>). The ready keys
 * sit in a second binary heap instead of the ring, ordered by (priority descending,
 * sequence number taken when the key became ready): O(log n) add and get, exactly
 * FIFO when every priority is equal, and a key whose priority rises moves up in
 * O(log n) because the item records its slot. Per-priority FIFO rings were the other
 * choice (O(1) while priorities are few, as controller-runtime's 0 and -100 are), but
 * priorities are any int, and raising a key would take it out of the middle of its
 * ring: a linear search or tombstones that a get must skip. A heap needs no memory
 * per key beyond its slot array, like the ring. The delay heap orders as
 * controller-runtime's waiting tree: ready time, then priority, then sequence; a key
 * whose priority rises while it waits takes a new sequence number, so among the keys
 * due with it at its new priority it becomes ready last, as a raised ready key goes
 * last. Unlike the plain queue, a key is then either
 * ready or waiting for a delay, never both (one entry per key, as controller-runtime
 * keeps): an add without a delay takes a waiting key out of the delay heap, and a
 * delayed add of a ready key only raises its priority.
 */
#include "pkg/log/log_internal.h"
#include "pkg/workqueue/wq_internal.h"
#include <ckube/base.h>
#include <ckube/log.h>
#include <ckube/workqueue.h>

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define F_DIRTY      1u
#define F_PROCESSING 2u
#define F_ADD_TIME   4u /* add_ns holds the first add since the last get (metrics) */

#define NOT_IN_HEAP SIZE_MAX
/* Idle items kept for reuse; beyond this they are freed. */
#define FREE_ITEMS_MAX 256
/* Key buffers are rounded up so that keys of similar length share recycled items. */
#define KEY_ROUND    32
#define RING_MIN_CAP 16
/* The ring and the heap shrink only above this many slots. */
#define SHRINK_MIN_CAP 1024

/* client-go's queue/work duration buckets: 1e-8 s * 10^i, i = 0..9. */
#define HIST_BUCKETS 10
static const uint64_t hist_bounds_ns[HIST_BUCKETS] = {
    10ULL,      100ULL,      1000ULL,      10000ULL,      100000ULL,
    1000000ULL, 10000000ULL, 100000000ULL, 1000000000ULL, 10000000000ULL,
};
static const char *const hist_bounds_text[HIST_BUCKETS] = {
    "1e-08", "1e-07", "1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1", "1", "10",
};

typedef struct item {
	wq_hnode_t node; /* first: the table hands back node pointers */
	unsigned flags;
	int prio;                 /* priority queue: while dirty or delayed; 0 otherwise */
	size_t heap_idx;          /* slot in the delay heap, or NOT_IN_HEAP */
	size_t ready_idx;         /* priority queue: slot in the ready heap while there */
	uint64_t ready_ns;        /* while in the delay heap */
	uint64_t seq;             /* heap tie-break: earlier first (one heap at a time) */
	uint64_t add_ns;          /* metrics: when it was first added since the last get */
	uint64_t start_ns;        /* metrics: when processing started */
	struct item *prev, *next; /* processing list; next also links the free list */
	size_t key_cap;
	char key[];
} item_t;

typedef struct hist {
	_Atomic uint64_t buckets[HIST_BUCKETS]; /* not cumulative; +Inf = count - sum */
	_Atomic uint64_t count;
	_Atomic uint64_t sum_ns;
} hist_t;

/* A binary heap of items; the kind says its order and which slot field it keeps. */
typedef struct iheap {
	item_t **a;
	size_t len, cap;
} iheap_t;

enum heap_kind {
	DELAY_HEAP, /* (ready_ns, priority descending, seq); plain queues: priority 0 */
	READY_HEAP, /* (priority descending, seq) */
};

struct ck_wq {
	pthread_mutex_t mu;
	pthread_cond_t idle_cond;  /* getters with nothing to do */
	pthread_cond_t timer_cond; /* the one getter waiting for the earliest delay */
	pthread_cond_t drain_cond; /* ck_wq_shutdown_with_drain */
	const ck_clk_t *clock;
	bool real_clock;
	bool timed; /* named: metrics are exposed, so adds, gets and dones read the clock */
	char *name;
	ck_wq_ratelimiter_t *limiter;

	wq_htab_t items;

	bool prio;     /* a priority queue: ready items in ready_heap, not in the ring */
	item_t **ring; /* FIFO of DIRTY, not PROCESSING items (not a priority queue) */
	size_t ring_head, ring_len, ring_cap;
	iheap_t ready_heap; /* priority queue: the DIRTY, not PROCESSING items */

	iheap_t delayed; /* delayed items */
	uint64_t seq;

	item_t *processing; /* doubly linked, for the scrape-time gauges */
	size_t nprocessing;

	item_t *free_items;
	size_t nfree;

	unsigned idle_waiters;
	bool timer_waiter;
	unsigned drain_waiters;
	bool shutting_down;
	bool drain;

	/* Metrics: written under mu, read with atomic loads. */
	_Atomic int64_t depth;
	_Atomic uint64_t adds;
	_Atomic uint64_t retries;
	hist_t queue_hist;
	hist_t work_hist;
	wq_prio_depth_t prio_depth; /* priority queue with a name; under mu */
};

/* ---- Small helpers ------------------------------------------------------------------ */

/* One writer at a time (q->mu held): a relaxed load+store is enough and costs no RMW. */
static inline void add_u64(_Atomic uint64_t *p, uint64_t d)
{
	atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + d,
	                      memory_order_relaxed);
}

static inline void add_i64(_Atomic int64_t *p, int64_t d)
{
	atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + d,
	                      memory_order_relaxed);
}

static void hist_observe(hist_t *h, uint64_t ns)
{
	for (int i = 0; i < HIST_BUCKETS; i++) {
		if (ns <= hist_bounds_ns[i]) {
			add_u64(&h->buckets[i], 1);
			break;
		}
	}
	add_u64(&h->count, 1);
	add_u64(&h->sum_ns, ns);
}

static inline uint64_t since(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

/* Returns 0 and the length of a usable key, or -1 for NULL / empty / absurdly long. */
static int key_check(const char *key, size_t *len)
{
	if (key == NULL || key[0] == '\0')
		return -1;
	size_t n = strlen(key);
	if (n > (size_t)INT32_MAX)
		return -1;
	*len = n;
	return 0;
}

/* ---- Items ------------------------------------------------------------------------- */

static item_t *item_find(ck_wq_t *q, const char *key, size_t len, uint64_t h)
{
	return (item_t *)wq_htab_find(&q->items, key, len, h);
}

/* Returns the item for key, interning it (from the free list when possible). */
static item_t *item_intern(ck_wq_t *q, const char *key, size_t len, uint64_t h)
{
	item_t *it = item_find(q, key, len, h);
	if (it != NULL)
		return it;

	it = q->free_items;
	if (it != NULL && it->key_cap > len) {
		q->free_items = it->next;
		q->nfree--;
	} else {
		size_t cap = (len + 1 + KEY_ROUND - 1) / KEY_ROUND * KEY_ROUND;
		it = ck_xmalloc(sizeof(*it) + cap);
		it->key_cap = cap;
	}
	memcpy(it->key, key, len + 1);
	it->node.hash = h;
	it->node.key = it->key;
	it->node.len = len;
	it->flags = 0;
	it->prio = 0;
	it->heap_idx = NOT_IN_HEAP;
	it->prev = it->next = NULL;
	wq_htab_insert(&q->items, &it->node);
	return it;
}

/* Recycles it if nothing refers to it any more. */
static void item_release(ck_wq_t *q, item_t *it)
{
	if ((it->flags & (F_DIRTY | F_PROCESSING)) != 0 || it->heap_idx != NOT_IN_HEAP)
		return;
	wq_htab_remove(&q->items, &it->node);
	if (q->nfree < FREE_ITEMS_MAX) {
		it->next = q->free_items;
		q->free_items = it;
		q->nfree++;
	} else {
		free(it);
	}
}

/* ---- FIFO ring ------------------------------------------------------------------------ */

/* Moves the ring into a new array of cap slots (a power of two >= ring_len). */
static void ring_resize(ck_wq_t *q, size_t cap)
{
	item_t **r = ck_xmalloc(cap * sizeof(*r));
	for (size_t i = 0; i < q->ring_len; i++)
		r[i] = q->ring[(q->ring_head + i) & (q->ring_cap - 1)];
	free(q->ring);
	q->ring = r;
	q->ring_head = 0;
	q->ring_cap = cap;
}

static void ring_push(ck_wq_t *q, item_t *it)
{
	if (q->ring_len == q->ring_cap)
		ring_resize(q, q->ring_cap == 0 ? RING_MIN_CAP : q->ring_cap * 2);
	q->ring[(q->ring_head + q->ring_len) & (q->ring_cap - 1)] = it;
	q->ring_len++;
}

static item_t *ring_pop(ck_wq_t *q)
{
	item_t *it = q->ring[q->ring_head];
	q->ring_head = (q->ring_head + 1) & (q->ring_cap - 1);
	q->ring_len--;
	/* Give back the memory of a burst, with enough slack not to resize back and forth. */
	if (q->ring_cap > SHRINK_MIN_CAP && q->ring_len * 8 < q->ring_cap)
		ring_resize(q, q->ring_cap / 2);
	return it;
}

/* ---- Heaps ---------------------------------------------------------------------------- */

/* Called with constant kinds only, so the compiler specialises each heap's code. */
static inline bool heap_less(enum heap_kind k, const item_t *a, const item_t *b)
{
	if (k == DELAY_HEAP && a->ready_ns != b->ready_ns)
		return a->ready_ns < b->ready_ns;
	if (a->prio != b->prio)
		return a->prio > b->prio;
	return a->seq < b->seq;
}

static inline void heap_set(iheap_t *h, enum heap_kind k, size_t i, item_t *it)
{
	h->a[i] = it;
	if (k == DELAY_HEAP)
		it->heap_idx = i;
	else
		it->ready_idx = i;
}

static void heap_up(iheap_t *h, enum heap_kind k, size_t i)
{
	item_t *it = h->a[i];
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!heap_less(k, it, h->a[p]))
			break;
		heap_set(h, k, i, h->a[p]);
		i = p;
	}
	heap_set(h, k, i, it);
}

static void heap_down(iheap_t *h, enum heap_kind k, size_t i)
{
	item_t *it = h->a[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->len)
			break;
		if (c + 1 < h->len && heap_less(k, h->a[c + 1], h->a[c]))
			c++;
		if (!heap_less(k, h->a[c], it))
			break;
		heap_set(h, k, i, h->a[c]);
		i = c;
	}
	heap_set(h, k, i, it);
}

static void heap_push(iheap_t *h, enum heap_kind k, item_t *it)
{
	if (h->len == h->cap) {
		h->cap = h->cap == 0 ? RING_MIN_CAP : h->cap * 2;
		h->a = ck_xrealloc(h->a, h->cap * sizeof(*h->a));
	}
	heap_set(h, k, h->len++, it);
	heap_up(h, k, h->len - 1);
}

/* Takes out the item at slot i (its slot field is left for the caller to reset). */
static void heap_remove_at(iheap_t *h, enum heap_kind k, size_t i)
{
	if (--h->len > i) {
		heap_set(h, k, i, h->a[h->len]);
		/* The moved item may belong above or below slot i. */
		heap_up(h, k, i);
		heap_down(h, k, k == DELAY_HEAP ? h->a[i]->heap_idx : h->a[i]->ready_idx);
	}
	if (h->cap > SHRINK_MIN_CAP && h->len * 8 < h->cap) {
		h->cap /= 2;
		h->a = ck_xrealloc(h->a, h->cap * sizeof(*h->a));
	}
}

static item_t *heap_pop(iheap_t *h, enum heap_kind k)
{
	item_t *top = h->a[0];
	heap_remove_at(h, k, 0);
	if (k == DELAY_HEAP)
		top->heap_idx = NOT_IN_HEAP;
	return top;
}

/* ---- Ready keys: the ring, or the ready heap of a priority queue ----------------------- */

static inline size_t ready_len(const ck_wq_t *q)
{
	return q->prio ? q->ready_heap.len : q->ring_len;
}

/* Queues a DIRTY, not PROCESSING item behind every key ready now (at its priority). */
static inline void ready_push(ck_wq_t *q, item_t *it)
{
	if (!q->prio) {
		ring_push(q, it);
		return;
	}
	it->seq = q->seq++;
	heap_push(&q->ready_heap, READY_HEAP, it);
}

static inline item_t *ready_pop(ck_wq_t *q)
{
	return q->prio ? heap_pop(&q->ready_heap, READY_HEAP) : ring_pop(q);
}

/* ---- Core (q->mu held) ---------------------------------------------------------------- */

/*
 * The time, when something needs it: the metrics of a named queue, or delayed keys
 * that may have fallen due. An unnamed queue exposes no metrics, and with nothing
 * delayed it reads no clock at all: a clock read is 20-50 ns, a third of an
 * add+get+done (client-go's queue reads none without a metrics provider).
 */
static inline uint64_t now_if_needed(ck_wq_t *q)
{
	return q->timed || q->delayed.len > 0 ? ck_clk_mono_ns(q->clock) : 0;
}

/* Wakes one getter for a newly queued key: an idle one, else the timer waiter. */
static void wake_getter(ck_wq_t *q)
{
	if (q->idle_waiters > 0)
		pthread_cond_signal(&q->idle_cond);
	else if (q->timer_waiter)
		pthread_cond_signal(&q->timer_cond);
}

/* client-go's Add on an interned item. Returns 1 if it became dirty, 0 if ignored. */
static int add_locked(ck_wq_t *q, item_t *it, uint64_t now)
{
	if (it->flags & F_DIRTY)
		return 0;
	it->flags |= F_DIRTY;
	add_u64(&q->adds, 1);
	add_i64(&q->depth, 1);
	if (q->prio && q->timed)
		wq_prio_depth_add(&q->prio_depth, it->prio, 1);
	if (!(it->flags & F_ADD_TIME)) {
		it->flags |= F_ADD_TIME;
		it->add_ns = now;
	}
	if (it->flags & F_PROCESSING)
		return 1; /* queued again by ck_wq_done */
	ready_push(q, it);
	wake_getter(q);
	return 1;
}

/* Moves every delayed item whose time has come to the FIFO. */
static void promote_due(ck_wq_t *q, uint64_t now)
{
	while (q->delayed.len > 0 && q->delayed.a[0]->ready_ns <= now)
		add_locked(q, heap_pop(&q->delayed, DELAY_HEAP), now);
}

/* Drops every delayed item (shutdown: they could never be added). */
static void drop_delayed(ck_wq_t *q)
{
	while (q->delayed.len > 0)
		item_release(q, heap_pop(&q->delayed, DELAY_HEAP));
}

/*
 * The timer waiter's sleep: until the earliest ready time on the real clock, or until
 * ck_wq_clock_changed / an add on any other clock (whose time we cannot map to a deadline).
 */
static void wait_for_delay(ck_wq_t *q, uint64_t ready_ns)
{
	if (!q->real_clock) {
		pthread_cond_wait(&q->timer_cond, &q->mu);
		return;
	}
	struct timespec ts;
	ts.tv_sec = (time_t)(ready_ns / CK_NS_PER_SEC);
	ts.tv_nsec = (long)(ready_ns % CK_NS_PER_SEC);
	pthread_cond_timedwait(&q->timer_cond, &q->mu, &ts);
}

/* ---- Public API ------------------------------------------------------------------------ */

ck_wq_t *ck_wq_new(const ck_wq_options_t *opts)
{
	ck_wq_options_t none = {0};
	if (opts == NULL)
		opts = &none;
	ck_wq_t *q = ck_xcalloc(1, sizeof(*q));
	q->clock = opts->clock != NULL ? opts->clock : ck_clk_real();
	q->real_clock = q->clock == ck_clk_real();
	q->name = ck_xstrdup(opts->name != NULL ? opts->name : "");
	q->timed = q->name[0] != '\0';
	q->prio = opts->priority;
	q->limiter =
	    opts->limiter != NULL ? opts->limiter : ck_wq_ratelimiter_default_new(q->clock);

	/* Adaptive: a thread that finds the lock held spins briefly before sleeping in the
	 * kernel. Every critical section here is short, so with workers on other cores the
	 * lock is usually free again within the spin, where a plain mutex pays a futex
	 * sleep and wake-up on every collision (bench/bench_workqueue.sh, 2 workers each
	 * adding: 760 ns per key with a plain mutex, 240 ns adaptive). */
	pthread_mutexattr_t mattr;
	pthread_mutexattr_init(&mattr);
	pthread_mutexattr_settype(&mattr, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(&q->mu, &mattr);
	pthread_mutexattr_destroy(&mattr);
	pthread_cond_init(&q->idle_cond, NULL);
	pthread_cond_init(&q->drain_cond, NULL);
	/* ck_clk_real() is CLOCK_MONOTONIC, so ready times are absolute deadlines as they are. */
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&q->timer_cond, &attr);
	pthread_condattr_destroy(&attr);
	return q;
}

void ck_wq_free(ck_wq_t *q)
{
	if (q == NULL)
		return;
	if (q->items.slots != NULL)
		for (size_t i = 0; i <= q->items.mask; i++)
			free(q->items.slots[i]);
	wq_htab_free(&q->items);
	while (q->free_items != NULL) {
		item_t *next = q->free_items->next;
		free(q->free_items);
		q->free_items = next;
	}
	free(q->ring);
	free(q->ready_heap.a);
	free(q->delayed.a);
	ck_wq_ratelimiter_free(q->limiter);
	free(q->name);
	pthread_cond_destroy(&q->timer_cond);
	pthread_cond_destroy(&q->drain_cond);
	pthread_cond_destroy(&q->idle_cond);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

const char *ck_wq_name(const ck_wq_t *q)
{
	return q->name;
}

/*
 * A key-trace line for the traced key (docs/informers.md), written with q->mu held
 * so that the lines of one key's add, get and done come in the order they happened
 * across threads. Out of line: the hot paths only test a flag. depth: whether the
 * line says how many keys are queued.
 */
static void __attribute__((noinline))
trace_step(const char *step, const ck_wq_t *q, const char *outcome, bool depth, int line)
{
	ck_log_kv_t kvs[] = {CK_KV_STR("queue", q->name), CK_KV_STR("outcome", outcome),
	                     CK_KV_UINT("depth", ready_len(q)), CK_LOG_KV_END_};
	if (outcome == NULL)
		kvs[1] = kvs[2];
	if (outcome == NULL || !depth)
		kvs[2] = (ck_log_kv_t)CK_LOG_KV_END_;
	ck_log_trace_emit(LOG_FILE_, line, step, kvs);
}

/* What an add did to the key, for the key trace (docs/informers.md). */
static const char *add_outcome(unsigned flags_before, bool shutting_down)
{
	if (shutting_down)
		return "ignored: shutting down";
	if ((flags_before & F_DIRTY) && (flags_before & F_PROCESSING))
		return "deduplicated: being processed, already due again at done";
	if (flags_before & F_DIRTY)
		return "deduplicated: already queued";
	if (flags_before & F_PROCESSING)
		return "marked dirty: being processed, queued again at done";
	return "queued";
}

/* Wakes whoever must shorten its sleep because the earliest ready time moved earlier. */
static void delay_moved_earlier(ck_wq_t *q, uint64_t old_first)
{
	if (q->delayed.a[0]->ready_ns >= old_first)
		return;
	if (q->timer_waiter)
		pthread_cond_signal(&q->timer_cond);
	else if (q->idle_waiters > 0)
		pthread_cond_signal(&q->idle_cond);
}

static inline uint64_t ready_time(uint64_t now, int64_t delay_ns)
{
	return (uint64_t)delay_ns > UINT64_MAX - now ? UINT64_MAX : now + (uint64_t)delay_ns;
}

/* Raises the priority of a DIRTY item: it goes behind the keys ready at prio now. */
static void raise_ready(ck_wq_t *q, item_t *it, int prio)
{
	if (q->timed) {
		wq_prio_depth_add(&q->prio_depth, it->prio, -1);
		wq_prio_depth_add(&q->prio_depth, prio, 1);
	}
	it->prio = prio;
	if (it->flags & F_PROCESSING)
		return; /* ck_wq_done queues it, at this priority */
	it->seq = q->seq++;
	heap_up(&q->ready_heap, READY_HEAP, it->ready_idx);
}

/*
 * controller-runtime's lockedAddWithOpts for one interned item of a priority queue:
 * delay_ns > 0 delays it. Returns 1 if the key became dirty now, else 0, and in
 * *outcome what happened (for the key trace).
 */
static int prio_add_locked(ck_wq_t *q, item_t *it, int prio, int64_t delay_ns, uint64_t now,
                           const char **outcome)
{
	bool waiting = it->heap_idx != NOT_IN_HEAP;
	if (delay_ns > 0)
		add_u64(&q->retries, 1);
	if (it->flags & F_DIRTY) {
		/* Ready already (or due again at done): no delay can make it later. */
		*outcome = add_outcome(it->flags, false);
		if (prio > it->prio) {
			*outcome = "deduplicated: already queued, priority raised";
			raise_ready(q, it, prio);
		}
		return 0;
	}
	if (delay_ns <= 0) {
		/* Ready now: the earlier time wins over a delay it was waiting for. */
		*outcome = add_outcome(it->flags, false);
		if (waiting) {
			*outcome = "queued: was waiting for a delay";
			heap_remove_at(&q->delayed, DELAY_HEAP, it->heap_idx);
			it->heap_idx = NOT_IN_HEAP;
			if (it->prio > prio)
				prio = it->prio;
		}
		it->prio = prio;
		return add_locked(q, it, now);
	}
	uint64_t ready = ready_time(now, delay_ns);
	uint64_t old_first = q->delayed.len > 0 ? q->delayed.a[0]->ready_ns : UINT64_MAX;
	if (waiting) {
		*outcome = "already waiting: the earlier time kept";
		bool moved = false;
		if (ready < it->ready_ns) {
			*outcome = "already waiting: this earlier time taken";
			it->ready_ns = ready;
			moved = true;
		}
		if (prio > it->prio) {
			it->prio = prio;
			it->seq = q->seq++;
			moved = true;
		}
		/* Both changes can only bring it nearer the top (priority ranks before seq). */
		if (moved)
			heap_up(&q->delayed, DELAY_HEAP, it->heap_idx);
	} else {
		*outcome = "waiting";
		it->prio = prio;
		it->ready_ns = ready;
		it->seq = q->seq++;
		heap_push(&q->delayed, DELAY_HEAP, it);
	}
	delay_moved_earlier(q, old_first);
	return 0;
}

/* A priority queue's add of every kind; delay_ns is the one to apply (<= 0: none). */
static int prio_add(ck_wq_t *q, const char *key, size_t len, int prio, int64_t delay_ns)
{
	uint64_t h = ck_hash_bytes(key, len);
	bool trace = log_trace_on() && ck_log_trace_match(key);
	const char *outcome = "ignored: shutting down";
	int result = 0;

	pthread_mutex_lock(&q->mu);
	if (q->shutting_down)
		goto out;
	uint64_t now = delay_ns > 0 ? ck_clk_mono_ns(q->clock) : now_if_needed(q);
	promote_due(q, now);
	item_t *it = item_intern(q, key, len, h);
	result = prio_add_locked(q, it, prio, delay_ns, now, &outcome);
out:
	/* Under the lock, as ck_wq_add's trace. */
	if (trace)
		ck_log_trace_emit(
		    LOG_FILE_, __LINE__, "queue-add",
		    (const ck_log_kv_t[]){
		        CK_KV_STR("queue", q->name), CK_KV_INT("priority", prio),
		        CK_KV_INT("delayMs", delay_ns > 0 ? delay_ns / (int64_t)CK_NS_PER_MS : 0),
		        CK_KV_STR("outcome", outcome), CK_KV_UINT("depth", ready_len(q)),
		        CK_LOG_KV_END_});
	pthread_mutex_unlock(&q->mu);
	return result;
}

int ck_wq_add(ck_wq_t *q, const char *key)
{
	size_t len;
	if (key_check(key, &len) < 0)
		return -1;
	if (q->prio)
		return prio_add(q, key, len, 0, 0);
	uint64_t h = ck_hash_bytes(key, len);
	int result = 0;
	bool trace = log_trace_on() && ck_log_trace_match(key);
	unsigned before = 0;

	pthread_mutex_lock(&q->mu);
	if (q->shutting_down)
		goto out;
	uint64_t now = now_if_needed(q);
	/* Keys that fell due before this one go first, as with client-go's waiting loop. */
	promote_due(q, now);
	item_t *it = item_intern(q, key, len, h);
	if (trace)
		before = it->flags;
	result = add_locked(q, it, now);
out:
	/* Under the lock: this line is written before any get of the key can log. */
	if (trace)
		trace_step("queue-add", q, add_outcome(before, q->shutting_down), true, __LINE__);
	pthread_mutex_unlock(&q->mu);
	return result;
}

int ck_wq_add_after(ck_wq_t *q, const char *key, int64_t delay_ns)
{
	size_t len;
	if (key_check(key, &len) < 0)
		return -1;
	if (q->prio) {
		prio_add(q, key, len, 0, delay_ns);
		return 0;
	}
	uint64_t h = ck_hash_bytes(key, len);
	bool trace = log_trace_on() && ck_log_trace_match(key);
	const char *outcome = "ignored: shutting down";

	pthread_mutex_lock(&q->mu);
	if (q->shutting_down)
		goto out;
	add_u64(&q->retries, 1);
	uint64_t now = ck_clk_mono_ns(q->clock);
	promote_due(q, now);
	item_t *it = item_intern(q, key, len, h);
	if (delay_ns <= 0) {
		outcome = add_outcome(it->flags, false);
		add_locked(q, it, now);
		goto out;
	}
	uint64_t ready = ready_time(now, delay_ns);
	uint64_t old_first = q->delayed.len > 0 ? q->delayed.a[0]->ready_ns : UINT64_MAX;
	if (it->heap_idx != NOT_IN_HEAP) {
		/* Already waiting: the earlier ready time wins. */
		outcome = "already waiting: the earlier time kept";
		if (ready < it->ready_ns) {
			outcome = "already waiting: this earlier time taken";
			it->ready_ns = ready;
			heap_up(&q->delayed, DELAY_HEAP, it->heap_idx);
		}
	} else {
		outcome = "waiting";
		it->ready_ns = ready;
		it->seq = q->seq++;
		heap_push(&q->delayed, DELAY_HEAP, it);
	}
	/* A new earliest deadline: the timer waiter must shorten its sleep. */
	delay_moved_earlier(q, old_first);
out:
	/* Under the lock, as ck_wq_add's: a zero delay queues the key at once, and a
	 * worker's get must not log before this line. */
	if (trace)
		ck_log_trace_emit(
		    LOG_FILE_, __LINE__, "queue-add-after",
		    (const ck_log_kv_t[]){
		        CK_KV_STR("queue", q->name),
		        CK_KV_INT("delayMs", delay_ns > 0 ? delay_ns / (int64_t)CK_NS_PER_MS : 0),
		        CK_KV_STR("outcome", outcome), CK_LOG_KV_END_});
	pthread_mutex_unlock(&q->mu);
	return 0;
}

int ck_wq_add_rate_limited(ck_wq_t *q, const char *key)
{
	if (q->prio)
		return ck_wq_add_with_opts(q, key, &(ck_wq_add_opts_t){.rate_limited = true}) < 0
		           ? -1
		           : 0;
	size_t len;
	if (key_check(key, &len) < 0)
		return -1;
	uint64_t d = ck_wq_ratelimiter_when(q->limiter, key);
	LOG_TRACE(key, "queue-rate-limited", CK_KV_STR("queue", q->name),
	          CK_KV_UINT("delayMs", d / CK_NS_PER_MS),
	          CK_KV_UINT("failures", ck_wq_ratelimiter_num_requeues(q->limiter, key)));
	return ck_wq_add_after(q, key, d > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)d);
}

int ck_wq_add_with_opts(ck_wq_t *q, const char *key, const ck_wq_add_opts_t *opts)
{
	static const ck_wq_add_opts_t none = {0};
	if (opts == NULL)
		opts = &none;
	if (!q->prio) {
		/* controller-runtime's priorityQueueWrapper around a plain queue. */
		if (opts->rate_limited)
			return ck_wq_add_rate_limited(q, key);
		if (opts->after_ns > 0)
			return ck_wq_add_after(q, key, opts->after_ns);
		return ck_wq_add(q, key);
	}
	size_t len;
	if (key_check(key, &len) < 0)
		return -1;
	int64_t delay = opts->after_ns;
	if (opts->rate_limited) {
		/* Asked outside the queue's lock: the limiter has its own. The shorter wins. */
		uint64_t d = ck_wq_ratelimiter_when(q->limiter, key);
		int64_t rl = d > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)d;
		LOG_TRACE(key, "queue-rate-limited", CK_KV_STR("queue", q->name),
		          CK_KV_UINT("delayMs", d / CK_NS_PER_MS),
		          CK_KV_UINT("failures", ck_wq_ratelimiter_num_requeues(q->limiter, key)));
		if (delay <= 0 || rl < delay)
			delay = rl;
	}
	return prio_add(q, key, len, opts->priority, delay);
}

void ck_wq_forget(ck_wq_t *q, const char *key)
{
	size_t len;
	if (key_check(key, &len) != 0)
		return;
	LOG_TRACE(key, "queue-forget", CK_KV_STR("queue", q->name),
	          CK_KV_UINT("failures", ck_wq_ratelimiter_num_requeues(q->limiter, key)));
	ck_wq_ratelimiter_forget(q->limiter, key);
}

unsigned ck_wq_num_requeues(ck_wq_t *q, const char *key)
{
	size_t len;
	if (key_check(key, &len) < 0)
		return 0;
	return ck_wq_ratelimiter_num_requeues(q->limiter, key);
}

const char *ck_wq_get(ck_wq_t *q)
{
	return ck_wq_get_with_priority(q, NULL);
}

const char *ck_wq_get_with_priority(ck_wq_t *q, int *priority)
{
	const char *result = NULL;
	int prio = 0;
	uint64_t now;

	pthread_mutex_lock(&q->mu);
	for (;;) {
		now = now_if_needed(q);
		if (!q->shutting_down)
			promote_due(q, now);
		if (ready_len(q) > 0)
			break;
		if (q->shutting_down)
			goto out;
		if (q->delayed.len > 0 && !q->timer_waiter) {
			q->timer_waiter = true;
			wait_for_delay(q, q->delayed.a[0]->ready_ns);
			q->timer_waiter = false;
		} else {
			q->idle_waiters++;
			pthread_cond_wait(&q->idle_cond, &q->mu);
			q->idle_waiters--;
		}
	}

	item_t *it = ready_pop(q);
	it->flags = (it->flags & ~(F_DIRTY | F_ADD_TIME)) | F_PROCESSING;
	add_i64(&q->depth, -1);
	prio = it->prio;
	if (q->prio && q->timed)
		wq_prio_depth_add(&q->prio_depth, prio, -1);
	if (q->timed)
		hist_observe(&q->queue_hist, since(now, it->add_ns));
	it->start_ns = now;
	it->prev = NULL;
	it->next = q->processing;
	if (q->processing != NULL)
		q->processing->prev = it;
	q->processing = it;
	q->nprocessing++;
	result = it->key;

	/* Pass the baton: more work for another getter, or the delay watch to be taken. */
	if (ready_len(q) > 0)
		wake_getter(q);
	else if (q->delayed.len > 0 && !q->timer_waiter && q->idle_waiters > 0)
		pthread_cond_signal(&q->idle_cond);
	if (log_trace_on() && ck_log_trace_match(result))
		trace_step("queue-get", q, NULL, true, __LINE__);
out:
	pthread_mutex_unlock(&q->mu);
	if (priority != NULL)
		*priority = prio;
	return result;
}

void ck_wq_done(ck_wq_t *q, const char *key)
{
	size_t len;
	if (key_check(key, &len) < 0)
		return;
	uint64_t h = ck_hash_bytes(key, len);
	/* Matched now: key may point into the item, which done may recycle. */
	bool trace = log_trace_on() && ck_log_trace_match(key);
	const char *outcome = "ignored: not being processed";

	pthread_mutex_lock(&q->mu);
	item_t *it = item_find(q, key, len, h);
	if (it == NULL || !(it->flags & F_PROCESSING))
		goto out; /* unknown or not being processed: harmless */
	if (q->timed)
		hist_observe(&q->work_hist, since(ck_clk_mono_ns(q->clock), it->start_ns));
	it->flags &= ~F_PROCESSING;
	if (it->prev != NULL)
		it->prev->next = it->next;
	else
		q->processing = it->next;
	if (it->next != NULL)
		it->next->prev = it->prev;
	it->prev = it->next = NULL;
	q->nprocessing--;

	if (q->nprocessing == 0 && q->drain_waiters > 0)
		pthread_cond_broadcast(&q->drain_cond);
	if (it->flags & F_DIRTY) {
		outcome = "queued again: added while processed";
		ready_push(q, it);
		wake_getter(q);
	} else {
		/* key may point into it: not used after this. */
		outcome = "finished";
		item_release(q, it);
	}
out:
	/* The line names the traced key's own copy: key may have been freed above. */
	if (trace)
		trace_step("queue-done", q, outcome, false, __LINE__);
	pthread_mutex_unlock(&q->mu);
}

size_t ck_wq_len(ck_wq_t *q)
{
	pthread_mutex_lock(&q->mu);
	if (!q->shutting_down && q->delayed.len > 0)
		promote_due(q, ck_clk_mono_ns(q->clock));
	size_t n = ready_len(q);
	pthread_mutex_unlock(&q->mu);
	return n;
}

size_t ck_wq_waiting_len(ck_wq_t *q)
{
	pthread_mutex_lock(&q->mu);
	if (!q->shutting_down && q->delayed.len > 0)
		promote_due(q, ck_clk_mono_ns(q->clock));
	size_t n = q->delayed.len;
	pthread_mutex_unlock(&q->mu);
	return n;
}

/* Sets the shutdown state and wakes everyone; mu held. */
static void shutdown_locked(ck_wq_t *q, bool drain)
{
	q->shutting_down = true;
	q->drain = drain;
	drop_delayed(q);
	pthread_cond_broadcast(&q->idle_cond);
	pthread_cond_broadcast(&q->timer_cond);
	pthread_cond_broadcast(&q->drain_cond);
}

void ck_wq_shutdown(ck_wq_t *q)
{
	pthread_mutex_lock(&q->mu);
	shutdown_locked(q, false);
	pthread_mutex_unlock(&q->mu);
}

void ck_wq_shutdown_with_drain(ck_wq_t *q)
{
	pthread_mutex_lock(&q->mu);
	shutdown_locked(q, true);
	q->drain_waiters++;
	while (q->nprocessing > 0 && q->drain)
		pthread_cond_wait(&q->drain_cond, &q->mu);
	q->drain_waiters--;
	pthread_mutex_unlock(&q->mu);
}

int ck_wq_shutting_down(ck_wq_t *q)
{
	pthread_mutex_lock(&q->mu);
	int r = q->shutting_down;
	pthread_mutex_unlock(&q->mu);
	return r;
}

void ck_wq_clock_changed(ck_wq_t *q)
{
	pthread_mutex_lock(&q->mu);
	pthread_cond_broadcast(&q->timer_cond);
	pthread_cond_broadcast(&q->idle_cond);
	pthread_mutex_unlock(&q->mu);
}

/* ---- Metrics exposition ----------------------------------------------------------------- */

typedef struct hist_snap {
	uint64_t buckets[HIST_BUCKETS];
	uint64_t count;
	uint64_t sum_ns;
} hist_snap_t;

typedef struct snap {
	const char *name;
	int64_t depth;
	bool prio;               /* a priority queue: depth by priority */
	wq_prio_depth_t by_prio; /* copied: the queue's changes under its lock */
	uint64_t adds, retries;
	hist_snap_t queue_hist, work_hist;
	double unfinished_s, longest_s;
} snap_t;

static void hist_snapshot(const hist_t *h, hist_snap_t *s)
{
	for (int i = 0; i < HIST_BUCKETS; i++)
		s->buckets[i] = atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
	s->count = atomic_load_explicit(&h->count, memory_order_relaxed);
	s->sum_ns = atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
}

/*
 * Takes the lock once so the figures of one queue agree with each other (a histogram's
 * buckets with its count) and so the processing list can be walked: unfinished work
 * and the longest running processor are computed now, from the start times.
 */
static void snapshot(ck_wq_t *q, snap_t *s)
{
	pthread_mutex_lock(&q->mu);
	uint64_t now = ck_clk_mono_ns(q->clock);
	if (!q->shutting_down)
		promote_due(q, now);
	s->name = q->name;
	s->depth = atomic_load_explicit(&q->depth, memory_order_relaxed);
	s->prio = q->prio;
	if (q->prio)
		s->by_prio = q->prio_depth;
	s->adds = atomic_load_explicit(&q->adds, memory_order_relaxed);
	s->retries = atomic_load_explicit(&q->retries, memory_order_relaxed);
	hist_snapshot(&q->queue_hist, &s->queue_hist);
	hist_snapshot(&q->work_hist, &s->work_hist);
	uint64_t total = 0, longest = 0;
	for (const item_t *it = q->processing; it != NULL; it = it->next) {
		uint64_t d = since(now, it->start_ns);
		total += d;
		if (d > longest)
			longest = d;
	}
	pthread_mutex_unlock(&q->mu);
	s->unfinished_s = (double)total / (double)CK_NS_PER_SEC;
	s->longest_s = (double)longest / (double)CK_NS_PER_SEC;
}

/* Label value escaping of the text format: backslash, double quote, newline. */
static void put_label(ck_sbuf_t *out, const char *v)
{
	for (; *v != '\0'; v++) {
		if (*v == '\\')
			ck_sbuf_puts(out, "\\\\");
		else if (*v == '"')
			ck_sbuf_puts(out, "\\\"");
		else if (*v == '\n')
			ck_sbuf_puts(out, "\\n");
		else
			ck_sbuf_putc(out, *v);
	}
}

/* Shortest text that reads back as the same double. */
static void put_double(ck_sbuf_t *out, double v)
{
	char buf[40];
	snprintf(buf, sizeof(buf), "%.15g", v);
	if (strtod(buf, NULL) != v)
		snprintf(buf, sizeof(buf), "%.17g", v);
	ck_sbuf_puts(out, buf);
}

static void put_head(ck_sbuf_t *out, const char *family, const char *type, const char *help)
{
	ck_sbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", family, help, family, type);
}

static void put_sample_u(ck_sbuf_t *out, const char *family, const char *name, uint64_t v)
{
	ck_sbuf_printf(out, "%s{name=\"", family);
	put_label(out, name);
	ck_sbuf_printf(out, "\"} %llu\n", (unsigned long long)v);
}

static void put_sample_d(ck_sbuf_t *out, const char *family, const char *name, double v)
{
	ck_sbuf_printf(out, "%s{name=\"", family);
	put_label(out, name);
	ck_sbuf_puts(out, "\"} ");
	put_double(out, v);
	ck_sbuf_putc(out, '\n');
}

/*
 * workqueue_depth of a priority queue: one sample per priority seen (zeros included,
 * as controller-runtime's gauges stay once created), label priority after name. A
 * plain queue's sample has no priority label, which Prometheus reads as the empty
 * value controller-runtime writes for it.
 */
static void put_depth_by_prio(ck_sbuf_t *out, const char *name, const wq_prio_depth_t *d)
{
	for (size_t i = 0; i < d->n + (d->exceeded ? 1 : 0); i++) {
		ck_sbuf_puts(out, "workqueue_depth{name=\"");
		put_label(out, name);
		if (i < d->n)
			ck_sbuf_printf(out, "\",priority=\"%d\"} ", d->prio[i]);
		else
			ck_sbuf_puts(out, "\",priority=\"" WQ_PRIO_EXCEEDED "\"} ");
		put_double(out, (double)(i < d->n ? d->depth[i] : d->rest));
		ck_sbuf_putc(out, '\n');
	}
}

static void put_hist(ck_sbuf_t *out, const char *family, const char *name, const hist_snap_t *h)
{
	uint64_t cum = 0;
	for (int i = 0; i < HIST_BUCKETS; i++) {
		cum += h->buckets[i];
		ck_sbuf_printf(out, "%s_bucket{name=\"", family);
		put_label(out, name);
		ck_sbuf_printf(out, "\",le=\"%s\"} %llu\n", hist_bounds_text[i],
		               (unsigned long long)cum);
	}
	ck_sbuf_printf(out, "%s_bucket{name=\"", family);
	put_label(out, name);
	ck_sbuf_printf(out, "\",le=\"+Inf\"} %llu\n", (unsigned long long)h->count);
	ck_sbuf_printf(out, "%s_sum{name=\"", family);
	put_label(out, name);
	ck_sbuf_puts(out, "\"} ");
	put_double(out, (double)h->sum_ns / (double)CK_NS_PER_SEC);
	ck_sbuf_putc(out, '\n');
	ck_sbuf_printf(out, "%s_count{name=\"", family);
	put_label(out, name);
	ck_sbuf_printf(out, "\"} %llu\n", (unsigned long long)h->count);
}

void ck_wq_metrics_write_all(ck_wq_t *const *qs, size_t n, ck_sbuf_t *out)
{
	snap_t *s = ck_xcalloc(n == 0 ? 1 : n, sizeof(*s));
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (qs[i] != NULL && qs[i]->name[0] != '\0')
			snapshot(qs[i], &s[k++]);
	if (k == 0)
		goto out;

	put_head(out, "workqueue_depth", "gauge",
	         "Current number of keys waiting in the workqueue.");
	for (size_t i = 0; i < k; i++) {
		if (s[i].prio)
			put_depth_by_prio(out, s[i].name, &s[i].by_prio);
		else
			put_sample_d(out, "workqueue_depth", s[i].name, (double)s[i].depth);
	}

	put_head(out, "workqueue_adds_total", "counter", "Total number of adds to the workqueue.");
	for (size_t i = 0; i < k; i++)
		put_sample_u(out, "workqueue_adds_total", s[i].name, s[i].adds);

	put_head(out, "workqueue_queue_duration_seconds", "histogram",
	         "Seconds a key waits in the workqueue before a worker gets it.");
	for (size_t i = 0; i < k; i++)
		put_hist(out, "workqueue_queue_duration_seconds", s[i].name, &s[i].queue_hist);

	put_head(out, "workqueue_work_duration_seconds", "histogram",
	         "Seconds a worker spends processing a key from the workqueue.");
	for (size_t i = 0; i < k; i++)
		put_hist(out, "workqueue_work_duration_seconds", s[i].name, &s[i].work_hist);

	put_head(out, "workqueue_unfinished_work_seconds", "gauge",
	         "Seconds of work in progress not yet observed by work_duration; a steady "
	         "rise means stuck workers.");
	for (size_t i = 0; i < k; i++)
		put_sample_d(out, "workqueue_unfinished_work_seconds", s[i].name,
		             s[i].unfinished_s);

	put_head(out, "workqueue_longest_running_processor_seconds", "gauge",
	         "Seconds the longest running worker of the workqueue has been processing "
	         "its key.");
	for (size_t i = 0; i < k; i++)
		put_sample_d(out, "workqueue_longest_running_processor_seconds", s[i].name,
		             s[i].longest_s);

	put_head(out, "workqueue_retries_total", "counter",
	         "Total number of delayed and rate-limited adds to the workqueue.");
	for (size_t i = 0; i < k; i++)
		put_sample_u(out, "workqueue_retries_total", s[i].name, s[i].retries);
out:
	free(s);
}

void ck_wq_metrics_write(ck_wq_t *q, ck_sbuf_t *out)
{
	ck_wq_metrics_write_all(&q, 1, out);
}
