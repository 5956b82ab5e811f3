/*
 * Unit tests for the priority queue of pkg/workqueue (ck_wq_options_t.priority):
 * controller-runtime's priorityqueue rules, checked one by one, against a model, and
 * under threads.
 */
#include "tests/unit/test_wq_util.h"
#include <ckube/base.h>
#include <ckube/log.h>
#include <ckube/workqueue.h>

#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A priority queue on a fake clock; limiter NULL: the default one on that clock. */
static ck_wq_t *prio_queue(ck_clk_fake_t *c, const char *name, ck_wq_ratelimiter_t *limiter)
{
	ck_clk_fake_init(c, 1000 * CK_NS_PER_SEC, 0);
	ck_wq_options_t o = {.name = name, .clock = &c->base, .limiter = limiter, .priority = true};
	return ck_wq_new(&o);
}

static int add_p(ck_wq_t *q, const char *key, int prio)
{
	return ck_wq_add_with_opts(q, key, &(ck_wq_add_opts_t){.priority = prio});
}

static int add_later(ck_wq_t *q, const char *key, int64_t after_ns, int prio)
{
	return ck_wq_add_with_opts(q, key,
	                           &(ck_wq_add_opts_t){.after_ns = after_ns, .priority = prio});
}

/* Gets a key (something must be queued) and checks it and its priority, then done. */
static void get_expect(ck_wq_t *q, const char *want, int want_prio)
{
	int prio = 12345;
	const char *k = ck_wq_get_with_priority(q, &prio);
	ck_assert_ptr_nonnull(k);
	ck_assert_str_eq(k, want);
	ck_assert_int_eq(prio, want_prio);
	ck_wq_done(q, k);
}

/* ---- Ordering ------------------------------------------------------------------------- */

START_TEST(test_prio_order)
{
	ck_clk_fake_t c;
	ck_wq_t *q = prio_queue(&c, "p", NULL);
	ck_assert_int_eq(add_p(q, "ns/low1", CK_WQ_PRIORITY_LOW), 1);
	ck_assert_int_eq(add_p(q, "ns/mid1", 0), 1);
	ck_assert_int_eq(add_p(q, "ns/high1", 10), 1);
	ck_assert_int_eq(add_p(q, "ns/mid2", 0), 1);
	ck_assert_int_eq(add_p(q, "ns/high2", 10), 1);
	ck_assert_int_eq(add_p(q, "ns/low2", CK_WQ_PRIORITY_LOW), 1);
	ck_assert_int_eq(ck_wq_add(q, "ns/mid3"), 1); /* a plain add: priority 0 */
	ck_assert_uint_eq(ck_wq_len(q), 7);
	get_expect(q, "ns/high1", 10);
	get_expect(q, "ns/high2", 10);
	get_expect(q, "ns/mid1", 0);
	get_expect(q, "ns/mid2", 0);
	get_expect(q, "ns/mid3", 0);
	get_expect(q, "ns/low1", -100);
	get_expect(q, "ns/low2", -100);
	ck_assert_uint_eq(ck_wq_len(q), 0);
	ck_wq_free(q);
}
END_TEST

/* Within one priority the order is the order keys became ready, over many keys and
 * after the heap has grown and shrunk. */
START_TEST(test_prio_fifo_within_priority)
{
	ck_clk_fake_t c;
	ck_wq_t *q = prio_queue(&c, "p", NULL);
	char key[32];
	enum { N = 3000 };
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N; i++) {
			snprintf(key, sizeof(key), "ns/k%d", i);
			ck_assert_int_eq(add_p(q, key, i % 3 == 0 ? 5 : 0), 1);
		}
		for (int i = 0; i < N; i += 3) {
			snprintf(key, sizeof(key), "ns/k%d", i);
			ck_assert_int_eq(add_p(q, key, 5), 0); /* same priority: nothing moves */
		}
		for (int i = 0; i < N; i += 3) {
			snprintf(key, sizeof(key), "ns/k%d", i);
			get_expect(q, key, 5);
		}
		for (int i = 0; i < N; i++) {
			if (i % 3 == 0)
				continue;
			snprintf(key, sizeof(key), "ns/k%d", i);
			get_expect(q, key, 0);
		}
		ck_assert_uint_eq(ck_wq_len(q), 0);
	}
	ck_wq_free(q);
}
END_TEST

/* With every add at one priority, a priority queue does what the plain queue does:
 * the same random adds, gets and dones on both give the same answers. */
START_TEST(test_prio_equal_priorities_match_plain)
{
	ck_clk_fake_t c1, c2;
	ck_clk_fake_init(&c1, CK_NS_PER_SEC, 0);
	ck_wq_t *plain = ck_wq_new(&(ck_wq_options_t){.name = "a", .clock = &c1.base});
	ck_wq_t *pq = prio_queue(&c2, "b", NULL);
	enum { NKEYS = 40, MAXPROC = 4 };
	char held[MAXPROC][32];
	int nheld = 0;
	char key[32];
	uint64_t seed = ck_rand_u64();
	uint64_t x = seed | 1;
	for (int step = 0; step < 20000; step++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		unsigned op = (unsigned)(x % 10);
		if (op < 5) {
			snprintf(key, sizeof(key), "ns/k%u", (unsigned)((x >> 8) % NKEYS));
			int r1 = ck_wq_add(plain, key);
			int r2 = (x >> 20) & 1 ? ck_wq_add(pq, key) : add_p(pq, key, 0);
			ck_assert_msg(r1 == r2, "seed %llu step %d: add %s %d vs %d",
			              (unsigned long long)seed, step, key, r1, r2);
		} else if (op < 8 && nheld < MAXPROC && ck_wq_len(plain) > 0) {
			const char *k1 = ck_wq_get(plain);
			const char *k2 = ck_wq_get(pq);
			ck_assert_msg(strcmp(k1, k2) == 0, "seed %llu step %d: get %s vs %s",
			              (unsigned long long)seed, step, k1, k2);
			snprintf(held[nheld++], sizeof(held[0]), "%s", k1);
		} else if (nheld > 0) {
			int i = (int)((x >> 8) % (uint64_t)nheld);
			ck_wq_done(plain, held[i]);
			ck_wq_done(pq, held[i]);
			memmove(held[i], held[nheld - 1], sizeof(held[0]));
			nheld--;
		}
		ck_assert_uint_eq(ck_wq_len(plain), ck_wq_len(pq));
	}
	ck_wq_free(plain);
	ck_wq_free(pq);
}
END_TEST

/* A key's priority only rises while it waits; a raised key goes behind the keys
 * already queued at its new priority (controller-runtime's FIFO per priority). */
START_TEST(test_prio_only_rises)
{
	ck_clk_fake_t c;
	ck_wq_t *q = prio_queue(&c, "p", NULL);
	add_p(q, "ns/a", 5);
	add_p(q, "ns/b", 5);
	ck_assert_int_eq(add_p(q, "ns/a", 1), 0); /* lower: ignored, a keeps its place */
	ck_assert_uint_eq(ck_wq_len(q), 2);
	get_expect(q, "ns/a", 5);
	get_expect(q, "ns/b", 5);

	add_p(q, "ns/c", 0);
	add_p(q, "ns/d", 5);
	ck_assert_int_eq(add_p(q, "ns/c", 5), 0); /* raised: behind d */
	add_p(q, "ns/e", 5);
	get_expect(q, "ns/d", 5);
	get_expect(q, "ns/c", 5);
	get_expect(q, "ns/e", 5);

	/* controller-runtime's "gets pushed to the front if the priority increases". */
	ck_wq_add(q, "ns/f");
	ck_wq_add(q, "ns/g");
	ck_wq_add(q, "ns/h");
	add_p(q, "ns/h", 1);
	get_expect(q, "ns/h", 1);
	get_expect(q, "ns/f", 0);
	get_expect(q, "ns/g", 0);
	ck_wq_free(q);
}
END_TEST

/* ---- Delays --------------------------------------------------------------------------- */

START_TEST(test_prio_delayed_keeps_priority)
{
	ck_clk_fake_t c;
	ck_wq_t *q = prio_queue(&c, "p", NULL);
	ck_assert_int_eq(add_later(q, "ns/a", 10 * MS, 5), 0);
	add_p(q, "ns/b", 0);
	add_p(q, "ns/c", 5);
	ck_assert_uint_eq(ck_wq_len(q), 2);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 1);
	advance(q, &c, 10 * MS);
	ck_assert_uint_eq(ck_wq_len(q), 3);
	/* a enters at 5 when its time comes: behind c, ready before it, ahead of b. */
	get_expect(q, "ns/c", 5);
	get_expect(q, "ns/a", 5);
	get_expect(q, "ns/b", 0);

	/* While waiting: the higher priority and the earlier time win, separately. */
	add_later(q, "ns/d", 20 * MS, 0);
	add_later(q, "ns/d", 50 * MS, 8);
	add_p(q, "ns/e", 8);
	advance(q, &c, 20 * MS);
	get_expect(q, "ns/e", 8);
	get_expect(q, "ns/d", 8);
	add_later(q, "ns/f", 5 * MS, 3);
	add_later(q, "ns/f", 1 * MS, 1);
	add_p(q, "ns/g", 2);
	advance(q, &c, 1 * MS);
	get_expect(q, "ns/f", 3);
	get_expect(q, "ns/g", 2);

	/* Due at the same time: the higher priority first, whatever the add order. */
	add_later(q, "ns/h", 5 * MS, 0);
	add_later(q, "ns/i", 5 * MS, 9);
	advance(q, &c, 5 * MS);
	get_expect(q, "ns/i", 9);
	get_expect(q, "ns/h", 0);
	/* Raised while waiting, a key goes behind those due with it at its new priority. */
	add_later(q, "ns/j", 5 * MS, 0);
	add_later(q, "ns/k", 5 * MS, 3);
	add_later(q, "ns/j", 5 * MS, 3);
	advance(q, &c, 5 * MS);
	get_expect(q, "ns/k", 3);
	get_expect(q, "ns/j", 3);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 0);
	ck_wq_free(q);
}
END_TEST

/* One entry per key: an add without a delay makes a waiting key ready now (the earlier
 * time wins), and its old delay does not bring it back; a delayed add of a ready key
 * leaves it ready. Retries count the adds that asked for a delay. */
START_TEST(test_prio_delayed_then_added_now)
{
	ck_clk_fake_t c;
	ck_wq_t *q = prio_queue(&c, "p", NULL);
	ck_assert_int_eq(add_later(q, "ns/a", 3600 * CK_NS_PER_SEC, 2), 0);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 1);
	ck_assert_uint_eq(ck_wq_len(q), 0);
	ck_assert_int_eq(ck_wq_add(q, "ns/a"), 1);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 0);
	ck_assert_uint_eq(ck_wq_len(q), 1);
	get_expect(q, "ns/a", 2); /* the higher of the two */
	advance(q, &c, 7200 * CK_NS_PER_SEC);
	ck_assert_uint_eq(ck_wq_len(q), 0);

	add_p(q, "ns/c", 3);
	ck_wq_add(q, "ns/b");
	ck_assert_int_eq(add_later(q, "ns/b", 10 * MS, 4), 0);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 0);
	ck_assert_uint_eq(ck_wq_len(q), 2);
	get_expect(q, "ns/b", 4); /* its priority rose all the same */
	get_expect(q, "ns/c", 3);
	advance(q, &c, 20 * MS);
	ck_assert_uint_eq(ck_wq_len(q), 0);

	/* add_after on a priority queue: a zero delay is a plain add, no retry. */
	ck_assert_int_eq(ck_wq_add_after(q, "ns/d", 0), 0);
	ck_assert_uint_eq(ck_wq_len(q), 1);
	get_expect(q, "ns/d", 0);
	ck_assert(scrape(q, "workqueue_retries_total{name=\"p\"}") == 2);
	ck_wq_free(q);
}
END_TEST

/* Adds without a delay take waiting keys out of the middle of the delay heap; what
 * stays must still come out in ready-time order, and what left must not come back. */
START_TEST(test_prio_delay_heap_removals)
{
	ck_clk_fake_t c;
	ck_wq_t *q = prio_queue(&c, "p", NULL);
	enum { N = 3000 };
	static int64_t ready[N];
	static bool taken[N];
	char key[32];
	for (int i = 0; i < N; i++) {
		ready[i] = 1 + (int64_t)(ck_rand_u64() % 100000) * 1000;
		taken[i] = ck_rand_u64() % 2 == 0;
		snprintf(key, sizeof(key), "ns/k%d", i);
		add_later(q, key, ready[i], (int)(ck_rand_u64() % 3));
	}
	size_t ntaken = 0;
	for (int i = 0; i < N; i++) {
		if (!taken[i])
			continue;
		snprintf(key, sizeof(key), "ns/k%d", i);
		ck_assert_int_eq(ck_wq_add(q, key), 1);
		ntaken++;
	}
	ck_assert_uint_eq(ck_wq_len(q), ntaken);
	ck_assert_uint_eq(ck_wq_waiting_len(q), N - ntaken);
	for (size_t i = 0; i < ntaken; i++)
		ck_wq_done(q, ck_wq_get(q));
	int64_t now = 0, last = 0;
	size_t got = 0;
	while (got < N - ntaken) {
		now += 1000 * 1000;
		advance(q, &c, 1000 * 1000);
		while (ck_wq_len(q) > 0) {
			const char *k = ck_wq_get(q);
			int i = atoi(k + 4);
			ck_assert_msg(!taken[i], "%s came back", k);
			ck_assert_msg(ready[i] <= now && ready[i] > now - 1000 * 1000,
			              "%s due at %lld, out at %lld", k, (long long)ready[i],
			              (long long)now);
			ck_assert(ready[i] > last - 1000 * 1000);
			last = ready[i];
			got++;
			ck_wq_done(q, k);
		}
	}
	ck_assert_uint_eq(ck_wq_waiting_len(q), 0);
	ck_wq_free(q);
}
END_TEST

START_TEST(test_prio_rate_limited_keeps_priority)
{
	ck_clk_fake_t c;
	ck_wq_t *q =
	    prio_queue(&c, "p", ck_wq_ratelimiter_exponential_new(5 * CK_NS_PER_MS, CK_NS_PER_SEC));
	ck_wq_add(q, "ns/x");
	ck_wq_add(q, "ns/y");
	ck_assert_int_eq(ck_wq_add_with_opts(
	                     q, "ns/r", &(ck_wq_add_opts_t){.rate_limited = true, .priority = 7}),
	                 0);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 1);
	ck_assert_uint_eq(ck_wq_num_requeues(q, "ns/r"), 1);
	advance(q, &c, 5 * MS - 1);
	ck_assert_uint_eq(ck_wq_len(q), 2);
	advance(q, &c, 1);
	get_expect(q, "ns/r", 7);
	get_expect(q, "ns/x", 0);
	get_expect(q, "ns/y", 0);

	/* With a delay too, the shorter of the two wins. */
	ck_wq_add_with_opts(q, "ns/s",
	                    &(ck_wq_add_opts_t){.after_ns = 100 * MS, .rate_limited = true});
	ck_wq_add_with_opts(q, "ns/t",
	                    &(ck_wq_add_opts_t){.after_ns = 1 * MS, .rate_limited = true});
	advance(q, &c, 1 * MS);
	get_expect(q, "ns/t", 0);
	ck_assert_uint_eq(ck_wq_len(q), 0);
	advance(q, &c, 4 * MS);
	get_expect(q, "ns/s", 0);

	/* ck_wq_add_rate_limited: priority 0, the limiter's next delay (10 ms for r). */
	ck_assert_int_eq(ck_wq_add_rate_limited(q, "ns/r"), 0);
	advance(q, &c, 10 * MS - 1);
	ck_assert_uint_eq(ck_wq_len(q), 0);
	advance(q, &c, 1);
	get_expect(q, "ns/r", 0);
	ck_assert_int_eq(ck_wq_add_rate_limited(q, ""), -1);
	ck_wq_free(q);
}
END_TEST

/* ---- Processing ----------------------------------------------------------------------- */

START_TEST(test_prio_processing_readded)
{
	ck_clk_fake_t c;
	ck_wq_t *q = prio_queue(&c, "p", NULL);
	add_p(q, "ns/a", 10);
	int prio = -1;
	const char *a = ck_wq_get_with_priority(q, &prio);
	ck_assert_str_eq(a, "ns/a");
	ck_assert_int_eq(prio, 10);
	/* Added while processed: dirty, not handed out again before done. */
	ck_assert_int_eq(add_p(q, "ns/a", 0), 1);
	ck_assert_int_eq(add_p(q, "ns/a", 3), 0);
	ck_assert_int_eq(add_p(q, "ns/a", 1), 0);
	ck_assert_uint_eq(ck_wq_len(q), 0);
	add_p(q, "ns/b", 3);
	add_p(q, "ns/c", 1);
	ck_assert_uint_eq(ck_wq_len(q), 2);
	ck_wq_done(q, a);
	ck_assert_uint_eq(ck_wq_len(q), 3);
	/* At the highest priority asked while processed (3, not its old 10), behind b. */
	get_expect(q, "ns/b", 3);
	get_expect(q, "ns/a", 3);
	get_expect(q, "ns/c", 1);

	/* The priority it was handed out with is forgotten. */
	add_p(q, "ns/d", 10);
	const char *d = ck_wq_get(q);
	ck_wq_add(q, "ns/d");
	ck_wq_done(q, d);
	get_expect(q, "ns/d", 0);

	/* Delayed while processed: due, it waits for done, at its priority. */
	ck_wq_add(q, "ns/e");
	const char *e = ck_wq_get(q);
	add_later(q, "ns/e", 10 * MS, 6);
	advance(q, &c, 10 * MS);
	ck_assert_uint_eq(ck_wq_len(q), 0);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 0);
	add_p(q, "ns/f", 5);
	ck_wq_done(q, e);
	get_expect(q, "ns/e", 6);
	get_expect(q, "ns/f", 5);
	ck_wq_free(q);
}
END_TEST

/* ---- Shutdown and drain ------------------------------------------------------------------ */

typedef struct drainer {
	ck_wq_t *q;
	_Atomic int returned;
} drainer_t;

static void *drainer_main(void *arg)
{
	drainer_t *d = arg;
	ck_wq_shutdown_with_drain(d->q);
	atomic_store(&d->returned, 1);
	return NULL;
}

START_TEST(test_prio_shutdown_drain)
{
	ck_clk_fake_t c;
	ck_wq_t *q = prio_queue(&c, "p", NULL);
	add_p(q, "ns/a", 0);
	add_p(q, "ns/b", 9);
	add_p(q, "ns/c", 4);
	add_later(q, "ns/later", 10 * MS, 20);
	const char *b = ck_wq_get(q);
	ck_assert_str_eq(b, "ns/b");
	drainer_t d = {.q = q};
	pthread_t th;
	pthread_create(&th, NULL, drainer_main, &d);
	while (!ck_wq_shutting_down(q))
		usleep(1000);
	usleep(20000);
	ck_assert_int_eq(atomic_load(&d.returned), 0); /* b is still processed */
	/* Adds are ignored, delayed keys dropped. */
	ck_assert_int_eq(add_p(q, "ns/d", 50), 0);
	ck_assert_int_eq(add_p(q, "ns/b", 50), 0);
	ck_assert_int_eq(add_later(q, "ns/e", MS, 50), 0);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 0);
	ck_wq_done(q, b);
	pthread_join(th, NULL);
	ck_assert_int_eq(atomic_load(&d.returned), 1);
	/* What was ready is still handed out, by priority, then NULL. */
	advance(q, &c, 20 * MS);
	get_expect(q, "ns/c", 4);
	get_expect(q, "ns/a", 0);
	int prio = 7;
	ck_assert_ptr_null(ck_wq_get_with_priority(q, &prio));
	ck_assert_int_eq(prio, 0);
	ck_assert_ptr_null(ck_wq_get(q));
	ck_wq_free(q);
}
END_TEST

/* Keys still queued, delayed or processed when the queue is freed: no leak (ASan). */
START_TEST(test_prio_free_with_pending)
{
	ck_clk_fake_t c;
	ck_wq_t *q = prio_queue(&c, "p", NULL);
	add_p(q, "ns/a", 1);
	add_p(q, "ns/b", 2);
	add_later(q, "ns/c", 10 * MS, 3);
	ck_wq_add_rate_limited(q, "ns/d");
	const char *k = ck_wq_get(q);
	ck_assert_str_eq(k, "ns/b");
	add_p(q, "ns/b", 5);
	ck_assert_int_eq(ck_wq_add_with_opts(q, NULL, NULL), -1);
	ck_assert_int_eq(ck_wq_add_with_opts(q, "", NULL), -1);
	ck_assert_int_eq(ck_wq_add_with_opts(q, "ns/e", NULL), 1);
	ck_wq_free(q);
}
END_TEST

/* On a queue that is not a priority queue, add_with_opts is controller-runtime's
 * wrapper: rate_limited, else a delay, else a plain add; the priority is ignored. */
START_TEST(test_plain_queue_add_with_opts)
{
	ck_clk_fake_t c;
	ck_clk_fake_init(&c, CK_NS_PER_SEC, 0);
	ck_wq_t *q = ck_wq_new(&(ck_wq_options_t){
	    .name = "plain",
	    .clock = &c.base,
	    .limiter = ck_wq_ratelimiter_exponential_new(5 * CK_NS_PER_MS, CK_NS_PER_SEC)});
	ck_assert_int_eq(add_p(q, "ns/a", 0), 1);
	ck_assert_int_eq(add_p(q, "ns/b", 100), 1);
	ck_assert_int_eq(
	    ck_wq_add_with_opts(q, "ns/c", &(ck_wq_add_opts_t){.after_ns = 50 * MS, .priority = 9}),
	    0);
	ck_assert_int_eq(
	    ck_wq_add_with_opts(q, "ns/d",
	                        &(ck_wq_add_opts_t){.after_ns = 50 * MS, .rate_limited = true}),
	    0);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 2);
	ck_assert_uint_eq(ck_wq_num_requeues(q, "ns/d"), 1);
	get_expect(q, "ns/a", 0);
	get_expect(q, "ns/b", 0); /* FIFO: the priority was ignored */
	ck_wq_add(q, "ns/x");
	advance(q, &c, 5 * MS); /* d: the limiter's 5 ms, not 50 */
	get_expect(q, "ns/x", 0);
	get_expect(q, "ns/d", 0);
	advance(q, &c, 45 * MS);
	get_expect(q, "ns/c", 0);
	char *s = scrape_text(q);
	ck_assert_ptr_null(strstr(s, "priority="));
	ck_assert(metric(s, "workqueue_depth{name=\"plain\"}") == 0);
	free(s);
	ck_wq_free(q);
}
END_TEST

/* The key trace says, for each add of the traced key, its priority, its delay and
 * what the add did. */
START_TEST(test_prio_trace_outcomes)
{
	int fd = trace_start("ns/a");
	ck_clk_fake_t c;
	ck_wq_t *q = prio_queue(&c, "q", NULL);
	add_later(q, "ns/a", 10 * MS, 1);
	add_later(q, "ns/a", 5 * MS, 0);
	add_p(q, "ns/a", 2);
	add_p(q, "ns/a", 4);
	add_later(q, "ns/a", 10 * MS, 0);
	add_p(q, "ns/b", 9);
	ck_wq_shutdown(q);
	add_p(q, "ns/a", 9);
	char log[8192];
	trace_stop(fd, log, sizeof(log));
	ck_assert_ptr_null(strstr(log, "ns/b"));
	const char *want[] = {
	    "priority=1 delayMs=10 outcome=\"waiting\" depth=0",
	    "priority=0 delayMs=5 outcome=\"already waiting: this earlier time taken\" depth=0",
	    "priority=2 delayMs=0 outcome=\"queued: was waiting for a delay\" depth=1",
	    "priority=4 delayMs=0 outcome=\"deduplicated: already queued, priority raised\" "
	    "depth=1",
	    "priority=0 delayMs=10 outcome=\"deduplicated: already queued\" depth=1",
	    "priority=9 delayMs=0 outcome=\"ignored: shutting down\" depth=2",
	};
	trace_expect(log, "\"Trace\" key=\"ns/a\" step=\"queue-add\" queue=\"q\" ", want,
	             CK_ARRAY_LEN(want));
	ck_wq_free(q);
}
END_TEST

/* ---- A model ------------------------------------------------------------------------------ */

/*
 * The rules written plainly (linear scans, no heaps): random adds of every kind, gets,
 * dones and clock steps on the queue and on the model must agree on every answer.
 * This is what checks the heaps' bookkeeping: removals from the middle of the delay
 * heap, raises inside both heaps, growth and shrinking.
 */
enum { MK = 48 };
typedef struct mkey {
	bool dirty, proc, waiting;
	int prio;
	uint64_t seq, ready_at;
} mkey_t;

typedef struct model {
	mkey_t k[MK];
	uint64_t seq, now;
} model_t;

static int m_add_locked(model_t *m, mkey_t *k)
{
	if (k->dirty)
		return 0;
	k->dirty = true;
	if (!k->proc)
		k->seq = m->seq++;
	return 1;
}

static void m_promote(model_t *m)
{
	for (;;) {
		mkey_t *best = NULL;
		for (int i = 0; i < MK; i++) {
			mkey_t *k = &m->k[i];
			if (!k->waiting || k->ready_at > m->now)
				continue;
			if (best == NULL || k->ready_at < best->ready_at ||
			    (k->ready_at == best->ready_at &&
			     (k->prio > best->prio ||
			      (k->prio == best->prio && k->seq < best->seq))))
				best = k;
		}
		if (best == NULL)
			return;
		best->waiting = false;
		m_add_locked(m, best);
	}
}

static int m_add(model_t *m, int i, int prio, int64_t delay)
{
	m_promote(m);
	mkey_t *k = &m->k[i];
	if (k->dirty) {
		if (prio > k->prio) {
			k->prio = prio;
			if (!k->proc)
				k->seq = m->seq++;
		}
		return 0;
	}
	if (delay <= 0) {
		if (k->waiting) {
			k->waiting = false;
			if (k->prio > prio)
				prio = k->prio;
		}
		k->prio = prio;
		return m_add_locked(m, k);
	}
	uint64_t ready = m->now + (uint64_t)delay;
	if (k->waiting) {
		if (ready < k->ready_at)
			k->ready_at = ready;
		if (prio > k->prio) {
			k->prio = prio;
			k->seq = m->seq++;
		}
		return 0;
	}
	k->prio = prio;
	k->ready_at = ready;
	k->seq = m->seq++;
	k->waiting = true;
	return 0;
}

static size_t m_len(model_t *m, size_t *waiting)
{
	m_promote(m);
	size_t n = 0, w = 0;
	for (int i = 0; i < MK; i++) {
		n += m->k[i].dirty && !m->k[i].proc;
		w += m->k[i].waiting;
	}
	*waiting = w;
	return n;
}

/* Returns the index of the key handed out, or -1 if none is ready. */
static int m_get(model_t *m)
{
	m_promote(m);
	int best = -1;
	for (int i = 0; i < MK; i++) {
		mkey_t *k = &m->k[i];
		if (!k->dirty || k->proc)
			continue;
		if (best < 0 || k->prio > m->k[best].prio ||
		    (k->prio == m->k[best].prio && k->seq < m->k[best].seq))
			best = i;
	}
	if (best >= 0) {
		m->k[best].proc = true;
		m->k[best].dirty = false;
	}
	return best;
}

static void m_done(model_t *m, int i)
{
	m->k[i].proc = false;
	if (m->k[i].dirty)
		m->k[i].seq = m->seq++;
}

START_TEST(test_prio_matches_model)
{
	static model_t m;
	memset(&m, 0, sizeof(m));
	ck_clk_fake_t c;
	ck_wq_t *q = prio_queue(&c, "model", NULL);
	m.now = ck_clk_mono_ns(&c.base);
	static const int prios[] = {CK_WQ_PRIORITY_LOW, 0, 0, 3, 10};
	int held[4], nheld = 0;
	char key[32];
	uint64_t seed = ck_rand_u64();
	uint64_t x = seed | 1;
	for (int step = 0; step < 30000; step++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		unsigned op = (unsigned)(x % 16);
		int i = (int)((x >> 8) % MK);
		snprintf(key, sizeof(key), "ns/k%d", i);
		if (op < 7) {
			int prio = prios[(x >> 16) % CK_ARRAY_LEN(prios)];
			/* Delays in whole ms from a few values, so ready times collide. */
			int64_t delay = (x >> 24) & 1 ? 0 : (int64_t)((x >> 25) % 6) * MS;
			int r = add_later(q, key, delay, prio);
			int want = m_add(&m, i, prio, delay);
			ck_assert_msg(r == want, "seed %llu step %d: add %s p%d d%lld: %d, want %d",
			              (unsigned long long)seed, step, key, prio, (long long)delay,
			              r, want);
		} else if (op < 11 && nheld < 4) {
			int want = m_get(&m);
			if (want < 0)
				continue; /* the queue would block */
			int prio = 0;
			const char *k = ck_wq_get_with_priority(q, &prio);
			ck_assert_msg(k != NULL && atoi(k + 4) == want && prio == m.k[want].prio,
			              "seed %llu step %d: got %s p%d, want ns/k%d p%d",
			              (unsigned long long)seed, step, k ? k : "NULL", prio, want,
			              m.k[want].prio);
			held[nheld++] = want;
		} else if (op < 14 && nheld > 0) {
			int h = (int)((x >> 8) % (uint64_t)nheld);
			snprintf(key, sizeof(key), "ns/k%d", held[h]);
			ck_wq_done(q, key);
			m_done(&m, held[h]);
			held[h] = held[--nheld];
		} else {
			int64_t d = (int64_t)((x >> 8) % 3) * MS;
			advance(q, &c, d);
			m.now += (uint64_t)d;
		}
		size_t want_waiting;
		size_t want_len = m_len(&m, &want_waiting);
		ck_assert_msg(ck_wq_len(q) == want_len && ck_wq_waiting_len(q) == want_waiting,
		              "seed %llu step %d: len %zu/%zu, want %zu/%zu",
		              (unsigned long long)seed, step, ck_wq_len(q), ck_wq_waiting_len(q),
		              want_len, want_waiting);
	}
	ck_wq_free(q);
}
END_TEST

/* ---- Metrics ------------------------------------------------------------------------------ */

/* Every sample line of a family other than workqueue_depth has no priority label. */
static void assert_priority_only_on_depth(const char *s)
{
	for (const char *p = s; *p != '\0';) {
		const char *nl = strchr(p, '\n');
		size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
		char line[512];
		snprintf(line, sizeof(line), "%.*s", (int)n, p);
		if (line[0] != '#' && strncmp(line, "workqueue_depth{", 16) != 0)
			ck_assert_msg(strstr(line, "priority=") == NULL, "labelled: %s", line);
		p += n + (nl != NULL);
	}
}

static int prom_check(const char *text)
{
	char path[] = "/tmp/test_wq_prio_XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	/* The Debian package installs the parser for the system interpreter. */
	const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
	char *cmd = ck_xasprintf("%s prom_parse_check.py workqueue_depth:gauge "
	                         "workqueue_adds:counter workqueue_retries:counter < %s",
	                         py, path);
	int rc = system(cmd);
	free(cmd);
	unlink(path);
	ck_assert_msg(rc != -1 && WIFEXITED(rc), "could not run the checker");
	return WEXITSTATUS(rc);
}

START_TEST(test_prio_metrics_depth_by_priority)
{
	ck_clk_fake_t c;
	ck_wq_t *q = prio_queue(&c, "pq", NULL);
	char *s = scrape_text(q);
	ck_assert_ptr_null(strstr(s, "workqueue_depth{")); /* no priority seen yet */
	free(s);

	add_p(q, "ns/a", 0);
	add_p(q, "ns/b", 0);
	add_p(q, "ns/c", CK_WQ_PRIORITY_LOW);
	add_later(q, "ns/d", 10 * MS, 5);
	s = scrape_text(q);
	ck_assert(metric(s, "workqueue_depth{name=\"pq\",priority=\"0\"}") == 2);
	ck_assert(metric(s, "workqueue_depth{name=\"pq\",priority=\"-100\"}") == 1);
	/* Waiting keys are not in the depth, and nothing is unlabelled. */
	ck_assert(metric(s, "workqueue_depth{name=\"pq\",priority=\"5\"}") == -1);
	ck_assert(metric(s, "workqueue_depth{name=\"pq\"}") == -1);
	ck_assert(metric(s, "workqueue_adds_total{name=\"pq\"}") == 3);
	ck_assert(metric(s, "workqueue_retries_total{name=\"pq\"}") == 1);
	assert_priority_only_on_depth(s);
	free(s);

	/* A raise moves the key's count; the emptied priority stays, at 0. */
	add_p(q, "ns/c", 0);
	ck_assert(scrape(q, "workqueue_depth{name=\"pq\",priority=\"0\"}") == 3);
	ck_assert(scrape(q, "workqueue_depth{name=\"pq\",priority=\"-100\"}") == 0);
	advance(q, &c, 10 * MS);
	ck_assert(scrape(q, "workqueue_depth{name=\"pq\",priority=\"5\"}") == 1);
	get_expect(q, "ns/d", 5);
	ck_assert(scrape(q, "workqueue_depth{name=\"pq\",priority=\"5\"}") == 0);
	/* Dirty while processed counts, at the priority it will be queued at. */
	const char *a = ck_wq_get(q);
	ck_assert_str_eq(a, "ns/a");
	add_p(q, "ns/a", 7);
	ck_assert(scrape(q, "workqueue_depth{name=\"pq\",priority=\"7\"}") == 1);
	ck_wq_done(q, a);
	get_expect(q, "ns/a", 7);
	ck_assert(scrape(q, "workqueue_depth{name=\"pq\",priority=\"7\"}") == 0);
	ck_assert(scrape(q, "workqueue_depth{name=\"pq\",priority=\"0\"}") == 2);

	/* Beside a plain queue: each family once, both parse. */
	ck_clk_fake_t c2;
	ck_clk_fake_init(&c2, CK_NS_PER_SEC, 0);
	ck_wq_t *qs[2] = {ck_wq_new(&(ck_wq_options_t){.name = "plain", .clock = &c2.base}), q};
	ck_wq_add(qs[0], "ns/z");
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_wq_metrics_write_all(qs, 2, &b);
	s = ck_xstrdup(ck_sbuf_cstr(&b));
	ck_sbuf_free(&b);
	ck_assert(metric(s, "workqueue_depth{name=\"plain\"}") == 1);
	ck_assert(metric(s, "workqueue_depth{name=\"pq\",priority=\"0\"}") == 2);
	ck_assert_ptr_eq(strstr(s, "# TYPE workqueue_depth"),
	                 strstr(s, "# TYPE workqueue_depth gauge"));
	ck_assert_ptr_null(
	    strstr(strstr(s, "# TYPE workqueue_depth") + 1, "# TYPE workqueue_depth"));
	assert_priority_only_on_depth(s);
	ck_assert_int_eq(prom_check(s), 0);
	free(s);
	ck_wq_free(qs[0]);
	ck_wq_free(q);
}
END_TEST

/* controller-runtime's cardinality limit: 25 priorities get a label each; one more and
 * the whole depth is one sample labelled exceeded_cardinality_limit. */
START_TEST(test_prio_metrics_cardinality_limit)
{
	ck_clk_fake_t c;
	ck_wq_t *q = prio_queue(&c, "card", NULL);
	char key[32], label[96];
	for (int p = 0; p < 25; p++) {
		snprintf(key, sizeof(key), "ns/k%d", p);
		add_p(q, key, p);
	}
	char *s = scrape_text(q);
	for (int p = 0; p < 25; p++) {
		snprintf(label, sizeof(label), "workqueue_depth{name=\"card\",priority=\"%d\"}", p);
		ck_assert(metric(s, label) == 1);
	}
	free(s);
	get_expect(q, "ns/k24", 24);
	add_p(q, "ns/k25", 25);
	s = scrape_text(q);
	ck_assert(
	    metric(s, "workqueue_depth{name=\"card\",priority=\"exceeded_cardinality_limit\"}") ==
	    25);
	ck_assert_ptr_null(strstr(s, "priority=\"0\""));
	free(s);
	get_expect(q, "ns/k25", 25);
	add_p(q, "ns/k0", 30); /* a raise: the total stays */
	ck_assert(
	    scrape(q, "workqueue_depth{name=\"card\",priority=\"exceeded_cardinality_limit\"}") ==
	    24);
	while (ck_wq_len(q) > 0)
		ck_wq_done(q, ck_wq_get(q));
	ck_assert(
	    scrape(q, "workqueue_depth{name=\"card\",priority=\"exceeded_cardinality_limit\"}") ==
	    0);
	ck_wq_free(q);
}
END_TEST

/* ---- Threads ------------------------------------------------------------------------------ */

enum { HK = 64, PRODUCERS = 3, CONSUMERS = 3, PER_PRODUCER = 20000 };

typedef struct hammer {
	ck_wq_t *q;
	_Atomic int busy[HK];
	_Atomic int violations;
	_Atomic unsigned long gets;
	_Atomic int producers_left;
} hammer_t;

static void *hammer_producer(void *arg)
{
	hammer_t *h = arg;
	uint64_t x = ck_rand_u64() | 1;
	char key[32];
	static const int prios[] = {CK_WQ_PRIORITY_LOW, 0, 5, 10};
	for (int i = 0; i < PER_PRODUCER; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		snprintf(key, sizeof(key), "ns/k%u", (unsigned)(x % HK));
		int prio = prios[(x >> 8) % 4];
		unsigned kind = (unsigned)((x >> 12) % 20);
		if (kind == 0)
			ck_wq_add_with_opts(
			    h->q, key, &(ck_wq_add_opts_t){.rate_limited = true, .priority = prio});
		else if (kind < 3)
			ck_wq_add_with_opts(
			    h->q, key,
			    &(ck_wq_add_opts_t){.after_ns = (int64_t)((x >> 20) % 2000000),
			                        .priority = prio});
		else
			add_p(h->q, key, prio);
		if (i % 128 == 0)
			sched_yield();
	}
	atomic_fetch_sub(&h->producers_left, 1);
	return NULL;
}

static void *hammer_consumer(void *arg)
{
	hammer_t *h = arg;
	const char *k;
	int prio;
	unsigned n = 0;
	while ((k = ck_wq_get_with_priority(h->q, &prio)) != NULL) {
		int i = atoi(k + 4);
		if (atomic_fetch_add(&h->busy[i], 1) != 0)
			atomic_fetch_add(&h->violations, 1);
		atomic_fetch_add(&h->gets, 1);
		/* Every 7th comes back while processed, queued again at done (not every
		 * time: a key that always came back would keep the queue busy for ever). */
		if (++n % 7 == 0)
			add_p(h->q, k, prio);
		atomic_fetch_sub(&h->busy[i], 1);
		ck_wq_done(h->q, k);
	}
	return NULL;
}

START_TEST(test_prio_threads)
{
	static hammer_t h;
	memset(&h, 0, sizeof(h));
	h.q = ck_wq_new(
	    &(ck_wq_options_t){.name = "hammer",
	                       .priority = true,
	                       .limiter = ck_wq_ratelimiter_exponential_new(1000, CK_NS_PER_MS)});
	atomic_store(&h.producers_left, PRODUCERS);
	pthread_t pt[PRODUCERS], ct[CONSUMERS];
	for (int i = 0; i < CONSUMERS; i++)
		pthread_create(&ct[i], NULL, hammer_consumer, &h);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_create(&pt[i], NULL, hammer_producer, &h);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(pt[i], NULL);
	/* Let delays expire and the consumers catch up; the drain processes what is dirty. */
	while (ck_wq_len(h.q) > 0 || ck_wq_waiting_len(h.q) > 0)
		usleep(1000);
	ck_wq_shutdown_with_drain(h.q);
	for (int i = 0; i < CONSUMERS; i++)
		pthread_join(ct[i], NULL);

	ck_assert_int_eq(atomic_load(&h.violations), 0);
	ck_assert_uint_eq(ck_wq_len(h.q), 0);
	char *s = scrape_text(h.q);
	/* Every add that marked a key dirty led to exactly one get. */
	double adds = metric(s, "workqueue_adds_total{name=\"hammer\"}");
	ck_assert(adds == (double)atomic_load(&h.gets));
	ck_assert(adds >= HK);
	ck_assert(metric(s, "workqueue_work_duration_seconds_count{name=\"hammer\"}") == adds);
	ck_assert(metric(s, "workqueue_unfinished_work_seconds{name=\"hammer\"}") == 0);
	static const char *const labels[] = {"-100", "0", "5", "10"};
	char label[96];
	for (size_t i = 0; i < CK_ARRAY_LEN(labels); i++) {
		snprintf(label, sizeof(label), "workqueue_depth{name=\"hammer\",priority=\"%s\"}",
		         labels[i]);
		ck_assert_msg(metric(s, label) == 0, "%s", label);
	}
	free(s);
	ck_wq_free(h.q);
}
END_TEST

Suite *suite_workqueue_priority(void)
{
	Suite *s = suite_create("workqueue_priority");
	TCase *tc = tcase_create("rules");
	tcase_add_test(tc, test_prio_order);
	tcase_add_test(tc, test_prio_fifo_within_priority);
	tcase_add_test(tc, test_prio_equal_priorities_match_plain);
	tcase_add_test(tc, test_prio_only_rises);
	tcase_add_test(tc, test_prio_delayed_keeps_priority);
	tcase_add_test(tc, test_prio_delayed_then_added_now);
	tcase_add_test(tc, test_prio_delay_heap_removals);
	tcase_add_test(tc, test_prio_rate_limited_keeps_priority);
	tcase_add_test(tc, test_prio_processing_readded);
	tcase_add_test(tc, test_prio_shutdown_drain);
	tcase_add_test(tc, test_prio_free_with_pending);
	tcase_add_test(tc, test_plain_queue_add_with_opts);
	tcase_add_test(tc, test_prio_trace_outcomes);
	tcase_add_test(tc, test_prio_matches_model);
	suite_add_tcase(s, tc);

	tc = tcase_create("metrics");
	tcase_add_test(tc, test_prio_metrics_depth_by_priority);
	tcase_add_test(tc, test_prio_metrics_cardinality_limit);
	suite_add_tcase(s, tc);

	tc = tcase_create("threads");
	tcase_add_test(tc, test_prio_threads);
	suite_add_tcase(s, tc);
	return s;
}
