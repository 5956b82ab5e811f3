/*
 * workqueue: the rate-limited work queue of client-go's util/workqueue, in C.
 *
 * One object, wq_t, is the basic queue, the delaying queue and the rate-limited
 * queue at once. Keys are strings ("namespace/name"), copied in.
 *
 * Rules (the same as client-go's):
 *  - FIFO of keys. A key already waiting is not added twice.
 *  - A key being processed (handed out by wq_get, not yet wq_done) is only marked
 *    dirty by wq_add; wq_done queues it again. So one key is never processed by
 *    two workers at once.
 *  - wq_get blocks until a key is queued or the queue shuts down. After shutdown
 *    it still hands out what is queued, then returns NULL.
 *  - wq_add_after(key, delay): the key is added once the delay has passed. A key
 *    already waiting with an earlier ready time keeps it; delay <= 0 adds at once.
 *    Delayed keys are dropped at shutdown.
 *  - wq_add_rate_limited(key) = wq_add_after(key, limiter.when(key)).
 *
 * Ownership: every wq_* function borrows q (except wq_free, which takes it).
 *
 * Threads: every function is thread-safe. Producers may be the event loop thread
 * (no call blocks except wq_get and wq_shutdown_with_drain) and any worker;
 * consumers are worker threads blocking in wq_get.
 *
 * Time comes from an injectable clk_t. With a clock other than clk_real(), waiting
 * threads cannot know when time moves: call wq_clock_changed() after advancing it.
 *
 * Metrics: every queue with a non-empty name keeps client-go's workqueue metrics
 * (workqueue_depth, _adds_total, _queue_duration_seconds, _work_duration_seconds,
 * _unfinished_work_seconds, _longest_running_processor_seconds, _retries_total,
 * label name="<queue name>"), always on; wq_metrics_write_all() renders them in
 * the Prometheus text format.
 */
#ifndef CSC_WORKQUEUE_H
#define CSC_WORKQUEUE_H

#include "pkg/base/base.h"

#include <stddef.h>
#include <stdint.h>

/* ---- Rate limiters ------------------------------------------------------------------ */

/*
 * A rate limiter decides how long an item waits before it is retried. It is a small
 * vtable so that callers can write their own: embed wq_ratelimiter_t as the first
 * member and point ops at a static table. Every op must be thread-safe.
 */
typedef struct wq_ratelimiter wq_ratelimiter_t;
typedef struct wq_ratelimiter_ops {
	/* Borrows item; records one more failure and returns the delay in ns. */
	uint64_t (*when)(wq_ratelimiter_t *rl, const char *item);
	/* Borrows item; forgets its failures (the item succeeded). */
	void (*forget)(wq_ratelimiter_t *rl, const char *item);
	/* Borrows item; returns how many failures are recorded for it. */
	unsigned (*num_requeues)(wq_ratelimiter_t *rl, const char *item);
	/* Takes rl; frees it. */
	void (*free)(wq_ratelimiter_t *rl);
} wq_ratelimiter_ops_t;

struct wq_ratelimiter {
	const wq_ratelimiter_ops_t *ops;
};

/* Delay returned by a limiter that can never grant the request. */
#define WQ_DELAY_NEVER UINT64_MAX

/* Borrows rl and item; returns the delay in ns for the item's next retry. */
uint64_t wq_ratelimiter_when(wq_ratelimiter_t *rl, const char *item);
/* Borrows rl and item. */
void wq_ratelimiter_forget(wq_ratelimiter_t *rl, const char *item);
/* Borrows rl and item; returns the recorded failures of item. */
unsigned wq_ratelimiter_num_requeues(wq_ratelimiter_t *rl, const char *item);
/* Takes rl (may be NULL); frees it. */
void wq_ratelimiter_free(wq_ratelimiter_t *rl);

/*
 * Per-item exponential backoff: the n-th failure (n from 0) waits base·2^n ns,
 * capped at max_ns. forget() resets the item. Returns a new limiter, free with
 * wq_ratelimiter_free.
 */
wq_ratelimiter_t *wq_ratelimiter_exponential_new(uint64_t base_ns, uint64_t max_ns);

/*
 * One token bucket shared by all items (golang.org/x/time/rate reserve semantics):
 * it starts full with `burst` tokens and refills at `qps` per second; each when()
 * takes a token, so with an empty bucket the k-th request waits k/qps s. Borrows
 * clock (NULL: clk_real()), which must outlive the limiter. Returns a new limiter,
 * free with wq_ratelimiter_free, or NULL with *err set if qps is not a positive
 * finite number or burst < 1.
 */
wq_ratelimiter_t *wq_ratelimiter_bucket_new(const clk_t *clock, double qps, int burst, char **err);

/*
 * The largest delay of several limiters (all of them are asked, so each counts the
 * failure). Takes the n limiters (the array itself is borrowed). Returns a new
 * limiter, free with wq_ratelimiter_free.
 */
wq_ratelimiter_t *wq_ratelimiter_max_of_new(wq_ratelimiter_t *const *limiters, size_t n);

/*
 * client-go's DefaultControllerRateLimiter: max(exponential 5 ms .. 1000 s, bucket
 * 10 qps burst 100). Borrows clock (NULL: real). Returns a new limiter, free with
 * wq_ratelimiter_free.
 */
wq_ratelimiter_t *wq_ratelimiter_default_new(const clk_t *clock);

/*
 * sample-controller's own choice: max(exponential 5 ms .. 1000 s, bucket 50 qps
 * burst 300). Borrows clock (NULL: real). Returns a new limiter, free with
 * wq_ratelimiter_free.
 */
wq_ratelimiter_t *wq_ratelimiter_sample_controller_new(const clk_t *clock);

/* ---- The queue ---------------------------------------------------------------------- */

typedef struct wq wq_t;

typedef struct wq_options {
	/* Queue name, the metrics label; NULL or "" = no metrics exposed. Borrowed (copied). */
	const char *name;
	/* Clock; NULL = clk_real(). Borrowed: must outlive the queue. */
	const clk_t *clock;
	/* Rate limiter; NULL = wq_ratelimiter_default_new(clock). Taken: freed with the queue. */
	wq_ratelimiter_t *limiter;
} wq_options_t;

/* Borrows opts (may be NULL: all defaults). Returns a new queue, free with wq_free. */
wq_t *wq_new(const wq_options_t *opts);

/*
 * Takes q (may be NULL); frees it with everything still queued or delayed. No other
 * thread may be using q any more (shut it down and join the workers first).
 */
void wq_free(wq_t *q);

/* Borrows q; returns its name (borrowed, "" if none). */
const char *wq_name(const wq_t *q);

/*
 * Borrows key (copied). Returns 1 if the key was marked dirty (queued, or queued
 * again on wq_done if it is being processed), 0 if it was ignored (already
 * waiting, or the queue is shutting down), -1 if refused (NULL or empty key).
 */
int wq_add(wq_t *q, const char *key);

/*
 * Borrows key (copied). Adds key once delay_ns has passed; delay_ns <= 0 adds at
 * once. If key is already waiting for a delay, the earlier ready time is kept.
 * Counts one retry (workqueue_retries_total) like client-go. Returns 0, or -1 if the
 * key is refused (NULL or empty); ignored while shutting down.
 */
int wq_add_after(wq_t *q, const char *key, int64_t delay_ns);

/*
 * Borrows key. Adds key after the delay its rate limiter gives (counting a failure).
 * Returns 0, or -1 if the key is refused.
 */
int wq_add_rate_limited(wq_t *q, const char *key);

/* Borrows key. Tells the rate limiter that key succeeded: its backoff restarts. */
void wq_forget(wq_t *q, const char *key);

/* Borrows key. Returns the failures the rate limiter has recorded for key. */
unsigned wq_num_requeues(wq_t *q, const char *key);

/*
 * Blocks until a key is queued or the queue is shut down. Returns the key, borrowed:
 * it stays valid until the caller passes it to wq_done (which every successful
 * wq_get must be followed by). Returns NULL once the queue is shut down and empty.
 */
const char *wq_get(wq_t *q);

/*
 * Borrows key. Marks key as processed: if it was added while being processed it is
 * queued again. A key that is not being processed is ignored. After this call a key
 * borrowed from wq_get may be freed.
 */
void wq_done(wq_t *q, const char *key);

/* Returns how many keys are queued (ready, not being processed). */
size_t wq_len(wq_t *q);

/* Returns how many keys wait for a delay (wq_add_after / wq_add_rate_limited). */
size_t wq_waiting_len(wq_t *q);

/*
 * Starts shutting down: further adds are ignored, delayed keys are dropped, and
 * threads blocked in wq_get return NULL once the queue is empty. Does not wait.
 * Also ends a wq_shutdown_with_drain that is waiting.
 */
void wq_shutdown(wq_t *q);

/* Like wq_shutdown, then blocks until no key is being processed. */
void wq_shutdown_with_drain(wq_t *q);

/* Returns 1 once wq_shutdown or wq_shutdown_with_drain has been called, else 0. */
int wq_shutting_down(wq_t *q);

/*
 * For injected clocks: wakes the threads that wait for a delayed key so they read the
 * clock again. Not needed with clk_real().
 */
void wq_clock_changed(wq_t *q);

/*
 * Borrows q; appends its metrics in the Prometheus text format (HELP and TYPE lines
 * included) to out. Nothing is written for a queue without a name.
 */
void wq_metrics_write(wq_t *q, sbuf_t *out);

/*
 * Borrows the n queues; appends the metrics of all of them to out, each family's HELP
 * and TYPE lines once, then one sample set per named queue. Use this rather than
 * calling wq_metrics_write for each queue, which would repeat HELP/TYPE lines.
 */
void wq_metrics_write_all(wq_t *const *qs, size_t n, sbuf_t *out);

#endif
