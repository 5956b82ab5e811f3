/*
 * workqueue: the rate-limited work queue of client-go's util/workqueue, in C.
 *
 * One object, ck_wq_t, is the basic queue, the delaying queue and the rate-limited
 * queue at once. Keys are strings ("namespace/name"), copied in.
 *
 * Rules (the same as client-go's):
 *  - FIFO of keys. A key already waiting is not added twice.
 *  - A key being processed (handed out by ck_wq_get, not yet ck_wq_done) is only marked
 *    dirty by ck_wq_add; ck_wq_done queues it again. So one key is never processed by
 *    two workers at once.
 *  - ck_wq_get blocks until a key is queued or the queue shuts down. After shutdown
 *    it still hands out what is queued, then returns NULL.
 *  - ck_wq_add_after(key, delay): the key is added once the delay has passed. A key
 *    already waiting with an earlier ready time keeps it; delay <= 0 adds at once.
 *    Delayed keys are dropped at shutdown.
 *  - ck_wq_add_rate_limited(key) = ck_wq_add_after(key, limiter.when(key)).
 *
 * Ownership: every wq_* function borrows q (except ck_wq_free, which takes it).
 *
 * Threads: every function is thread-safe. Producers may be the event loop thread
 * (no call blocks except ck_wq_get and ck_wq_shutdown_with_drain) and any worker;
 * consumers are worker threads blocking in ck_wq_get.
 *
 * Time comes from an injectable ck_clk_t. With a clock other than ck_clk_real(), waiting
 * threads cannot know when time moves: call ck_wq_clock_changed() after advancing it.
 *
 * Metrics: every queue with a non-empty name keeps client-go's workqueue metrics
 * (workqueue_depth, _adds_total, _queue_duration_seconds, _work_duration_seconds,
 * _unfinished_work_seconds, _longest_running_processor_seconds, _retries_total,
 * label name="<queue name>"), always on; ck_wq_metrics_write_all() renders them in
 * the Prometheus text format.
 *
 * Priority queue (ck_wq_options_t.priority): controller-runtime's priorityqueue
 * (pkg/controller/priorityqueue, designs/priorityqueue.md) on the same object. The
 * rules above stay (dedup, dirty/processing, shutdown, drain), and:
 *  - Every add carries a priority (ck_wq_add_with_opts; the other adds: 0). Ready keys
 *    are handed out highest priority first; within one priority, first ready first out.
 *    With every add at one priority and none delayed, the queue is the plain FIFO above.
 *  - A key has one entry: either ready or waiting for a delay. Adding a waiting or
 *    ready key keeps the earlier ready time (an add without a delay makes a waiting
 *    key ready now) and the higher priority (never lowered). A raised ready key goes
 *    behind the keys already ready at its new priority.
 *  - A delayed or rate-limited add keeps its priority: the key becomes ready at it.
 *  - A key added while it is processed is queued again on ck_wq_done, behind the keys
 *    ready then, at the highest priority asked while it was processed (the priority
 *    it was handed out with is forgotten, as controller-runtime forgets it at Get).
 *  - workqueue_depth carries a label priority="<n>" (controller-runtime's); the other
 *    metrics do not. workqueue_retries_total counts the adds that were delayed.
 * Where controller-runtime differs: its Get returns "shut down" at once, dropping ready
 * keys, and its drain does not wait (the rules above are kept instead); a key queued
 * again on done, or made ready by an add while it waited for a delay, keeps the FIFO
 * place of its earlier add there, where here it goes behind the keys ready before it
 * (first ready first out, as its keys that become ready when their delay ends); past
 * 25 priorities its per-priority gauges freeze while here they fold into one series.
 */
#ifndef CKUBE_WORKQUEUE_H
#define CKUBE_WORKQUEUE_H

#include <ckube/export.h>

#include <ckube/base.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Rate limiters ------------------------------------------------------------------ */

/*
 * A rate limiter decides how long an item waits before it is retried. It is a small
 * vtable so that callers can write their own: embed ck_wq_ratelimiter_t as the first
 * member and point ops at a static table. Every op must be thread-safe.
 */
typedef struct ck_wq_ratelimiter ck_wq_ratelimiter_t;
typedef struct ck_wq_ratelimiter_ops {
	/* Borrows item; records one more failure and returns the delay in ns. */
	uint64_t (*when)(ck_wq_ratelimiter_t *rl, const char *item);
	/* Borrows item; forgets its failures (the item succeeded). */
	void (*forget)(ck_wq_ratelimiter_t *rl, const char *item);
	/* Borrows item; returns how many failures are recorded for it. */
	unsigned (*num_requeues)(ck_wq_ratelimiter_t *rl, const char *item);
	/* Takes rl; frees it. */
	void (*free)(ck_wq_ratelimiter_t *rl);
} ck_wq_ratelimiter_ops_t;

struct ck_wq_ratelimiter {
	const ck_wq_ratelimiter_ops_t *ops;
};

/* Delay returned by a limiter that can never grant the request. */
#define CK_WQ_DELAY_NEVER UINT64_MAX

/* Borrows rl and item; returns the delay in ns for the item's next retry. */
CKUBE_API uint64_t ck_wq_ratelimiter_when(ck_wq_ratelimiter_t *rl, const char *item);
/* Borrows rl and item. */
CKUBE_API void ck_wq_ratelimiter_forget(ck_wq_ratelimiter_t *rl, const char *item);
/* Borrows rl and item; returns the recorded failures of item. */
CKUBE_API unsigned ck_wq_ratelimiter_num_requeues(ck_wq_ratelimiter_t *rl, const char *item);
/* Takes rl (may be NULL); frees it. */
CKUBE_API void ck_wq_ratelimiter_free(ck_wq_ratelimiter_t *rl);

/*
 * Per-item exponential backoff: the n-th failure (n from 0) waits base·2^n ns,
 * capped at max_ns. forget() resets the item. Returns a new limiter, free with
 * ck_wq_ratelimiter_free.
 */
CKUBE_API ck_wq_ratelimiter_t *ck_wq_ratelimiter_exponential_new(uint64_t base_ns, uint64_t max_ns);

/*
 * client-go's ItemFastSlowRateLimiter: an item's first max_fast failures wait
 * fast_ns each, every later one slow_ns (max_fast 0: all slow). forget() resets the
 * item. Returns a new limiter, free with ck_wq_ratelimiter_free.
 */
CKUBE_API ck_wq_ratelimiter_t *ck_wq_ratelimiter_fast_slow_new(uint64_t fast_ns, uint64_t slow_ns,
                                                               unsigned max_fast);

/*
 * client-go's WithMaxWaitRateLimiter: inner's delay, but never more than max_ns.
 * forget() and num_requeues() are inner's. Takes inner. Returns a new limiter, free
 * with ck_wq_ratelimiter_free (which frees inner too).
 */
CKUBE_API ck_wq_ratelimiter_t *ck_wq_ratelimiter_max_wait_new(ck_wq_ratelimiter_t *inner,
                                                              uint64_t max_ns);

/*
 * One token bucket shared by all items (golang.org/x/time/rate reserve semantics):
 * it starts full with `burst` tokens and refills at `qps` per second; each when()
 * takes a token, so with an empty bucket the k-th request waits k/qps s. Borrows
 * clock (NULL: ck_clk_real()), which must outlive the limiter. Returns a new limiter,
 * free with ck_wq_ratelimiter_free, or NULL with *err set if qps is not a positive
 * finite number or burst < 1.
 */
CKUBE_API ck_wq_ratelimiter_t *ck_wq_ratelimiter_bucket_new(const ck_clk_t *clock, double qps,
                                                            int burst, char **err);

/*
 * The largest delay of several limiters (all of them are asked, so each counts the
 * failure). Takes the n limiters (the array itself is borrowed). Returns a new
 * limiter, free with ck_wq_ratelimiter_free.
 */
CKUBE_API ck_wq_ratelimiter_t *ck_wq_ratelimiter_max_of_new(ck_wq_ratelimiter_t *const *limiters,
                                                            size_t n);

/*
 * client-go's DefaultControllerRateLimiter: max(exponential 5 ms .. 1000 s, bucket
 * 10 qps burst 100). Borrows clock (NULL: real). Returns a new limiter, free with
 * ck_wq_ratelimiter_free.
 */
CKUBE_API ck_wq_ratelimiter_t *ck_wq_ratelimiter_default_new(const ck_clk_t *clock);

/*
 * The same shape with the overall bucket of the caller's choice:
 * max(exponential 5 ms .. 1000 s, bucket qps/burst) (sample-controller uses 50/300).
 * Borrows clock (NULL: real). Returns a new limiter, free with ck_wq_ratelimiter_free;
 * NULL when qps <= 0 or burst < 1.
 */
CKUBE_API ck_wq_ratelimiter_t *ck_wq_ratelimiter_controller_new(const ck_clk_t *clock, double qps,
                                                                int burst);

/* ---- The queue ---------------------------------------------------------------------- */

typedef struct ck_wq ck_wq_t;

typedef struct ck_wq_options {
	/* Queue name, the metrics label; NULL or "" = no metrics exposed, and then adds,
	 * gets and dones read no clock while nothing is delayed. Borrowed (copied). */
	const char *name;
	/* Clock; NULL = ck_clk_real(). Borrowed: must outlive the queue. */
	const ck_clk_t *clock;
	/* Rate limiter; NULL = ck_wq_ratelimiter_default_new(clock). Taken: freed with the queue.
	 */
	ck_wq_ratelimiter_t *limiter;
	/* true: a priority queue (the rules at the top of this file). */
	bool priority;
} ck_wq_options_t;

/* The priority controller-runtime gives events of the initial list and resyncs of
 * unchanged objects (handler.WithLowPriorityWhenUnchanged): below the default 0. */
#define CK_WQ_PRIORITY_LOW (-100)

/* controller-runtime's priorityqueue.AddOpts. All zero: a plain add at priority 0. */
typedef struct ck_wq_add_opts {
	/* > 0: the key becomes ready after this delay; <= 0: ready now. */
	int64_t after_ns;
	/* Ask the rate limiter too (counting a failure); the shorter of its delay and
	 * after_ns wins (after_ns <= 0: the limiter's). */
	bool rate_limited;
	/* Higher first. Ignored by a queue that is not a priority queue. */
	int priority;
} ck_wq_add_opts_t;

/* Borrows opts (may be NULL: all defaults). Returns a new queue, free with ck_wq_free. */
CKUBE_API ck_wq_t *ck_wq_new(const ck_wq_options_t *opts);

/*
 * Takes q (may be NULL); frees it with everything still queued or delayed. No other
 * thread may be using q any more (shut it down and join the workers first).
 */
CKUBE_API void ck_wq_free(ck_wq_t *q);

/* Borrows q; returns its name (borrowed, "" if none). */
CKUBE_API const char *ck_wq_name(const ck_wq_t *q);

/*
 * Borrows key (copied). Returns 1 if the key was marked dirty (queued, or queued
 * again on ck_wq_done if it is being processed), 0 if it was ignored (already
 * waiting, or the queue is shutting down), -1 if refused (NULL or empty key).
 * On a priority queue: ck_wq_add_with_opts at priority 0.
 */
CKUBE_API int ck_wq_add(ck_wq_t *q, const char *key);

/*
 * Borrows key (copied). Adds key once delay_ns has passed; delay_ns <= 0 adds at
 * once. If key is already waiting for a delay, the earlier ready time is kept.
 * Counts one retry (workqueue_retries_total) like client-go. Returns 0, or -1 if the
 * key is refused (NULL or empty); ignored while shutting down.
 * On a priority queue: ck_wq_add_with_opts with {.after_ns = delay_ns} (so a retry is
 * counted only for delay_ns > 0, as controller-runtime counts), returning 0 or -1.
 */
CKUBE_API int ck_wq_add_after(ck_wq_t *q, const char *key, int64_t delay_ns);

/*
 * Borrows key. Adds key after the delay its rate limiter gives (counting a failure).
 * Returns 0, or -1 if the key is refused.
 * On a priority queue: ck_wq_add_with_opts with {.rate_limited = true}, returning 0 or -1.
 */
CKUBE_API int ck_wq_add_rate_limited(ck_wq_t *q, const char *key);

/*
 * Borrows key (copied) and opts (NULL: all zero). controller-runtime's AddWithOpts on
 * a priority queue (rules at the top of this file). On any other queue, as
 * controller-runtime's wrapper of a plain queue: rate_limited -> ck_wq_add_rate_limited,
 * else after_ns > 0 -> ck_wq_add_after, else ck_wq_add; the priority is ignored.
 * Returns 1 if the key was marked dirty now (queued, or queued again on ck_wq_done),
 * 0 otherwise (it waits for a delay, was already queued - its priority may have been
 * raised -, or the queue is shutting down), -1 if the key is refused (NULL or empty).
 */
CKUBE_API int ck_wq_add_with_opts(ck_wq_t *q, const char *key, const ck_wq_add_opts_t *opts);

/* Borrows key. Tells the rate limiter that key succeeded: its backoff restarts. */
CKUBE_API void ck_wq_forget(ck_wq_t *q, const char *key);

/* Borrows key. Returns the failures the rate limiter has recorded for key. */
CKUBE_API unsigned ck_wq_num_requeues(ck_wq_t *q, const char *key);

/*
 * Blocks until a key is queued or the queue is shut down. Returns the key, borrowed:
 * it stays valid until the caller passes it to ck_wq_done (which every successful
 * ck_wq_get must be followed by). Returns NULL once the queue is shut down and empty.
 */
CKUBE_API const char *ck_wq_get(ck_wq_t *q);

/*
 * ck_wq_get that also stores in *priority (may be NULL) the priority the key was
 * queued with, so that a worker can add it again at the same priority
 * (controller-runtime's GetWithPriority); 0 on a queue that is not a priority queue,
 * and when NULL is returned.
 */
CKUBE_API const char *ck_wq_get_with_priority(ck_wq_t *q, int *priority);

/*
 * Borrows key. Marks key as processed: if it was added while being processed it is
 * queued again. A key that is not being processed is ignored. After this call a key
 * borrowed from ck_wq_get may be freed.
 */
CKUBE_API void ck_wq_done(ck_wq_t *q, const char *key);

/* Returns how many keys are queued (ready, not being processed). */
CKUBE_API size_t ck_wq_len(ck_wq_t *q);

/* Returns how many keys wait for a delay (ck_wq_add_after / ck_wq_add_rate_limited). */
CKUBE_API size_t ck_wq_waiting_len(ck_wq_t *q);

/*
 * Starts shutting down: further adds are ignored, delayed keys are dropped, and
 * threads blocked in ck_wq_get return NULL once the queue is empty. Does not wait.
 * Also ends a ck_wq_shutdown_with_drain that is waiting.
 */
CKUBE_API void ck_wq_shutdown(ck_wq_t *q);

/* Like ck_wq_shutdown, then blocks until no key is being processed. */
CKUBE_API void ck_wq_shutdown_with_drain(ck_wq_t *q);

/* Returns 1 once ck_wq_shutdown or ck_wq_shutdown_with_drain has been called, else 0. */
CKUBE_API int ck_wq_shutting_down(ck_wq_t *q);

/*
 * For injected clocks: wakes the threads that wait for a delayed key so they read the
 * clock again. Not needed with ck_clk_real().
 */
CKUBE_API void ck_wq_clock_changed(ck_wq_t *q);

/*
 * Borrows q; appends its metrics in the Prometheus text format (HELP and TYPE lines
 * included) to out. Nothing is written for a queue without a name.
 */
CKUBE_API void ck_wq_metrics_write(ck_wq_t *q, ck_sbuf_t *out);

/*
 * Borrows the n queues; appends the metrics of all of them to out, each family's HELP
 * and TYPE lines once, then one sample set per named queue. Use this rather than
 * calling ck_wq_metrics_write for each queue, which would repeat HELP/TYPE lines.
 */
CKUBE_API void ck_wq_metrics_write_all(ck_wq_t *const *qs, size_t n, ck_sbuf_t *out);

#endif
