/* Unit tests for pkg/workqueue: queue rules, delays, rate limiters, metrics, threads. */
#include "tests/unit/test_wq_util.h"
#include <ckube/base.h>
#include <ckube/log.h>
#include <ckube/workqueue.h>

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A queue on a fake clock whose limiter uses the same clock. */
static ck_wq_t *fake_queue(ck_clk_fake_t *c, const char *name)
{
	ck_clk_fake_init(c, 1000 * CK_NS_PER_SEC, 0);
	ck_wq_options_t o = {.name = name, .clock = &c->base, .limiter = NULL};
	return ck_wq_new(&o);
}

/* Gets a key and checks it (the queue must not block: something is queued). */
static void get_expect(ck_wq_t *q, const char *want)
{
	const char *k = ck_wq_get(q);
	ck_assert_ptr_nonnull(k);
	ck_assert_str_eq(k, want);
	ck_wq_done(q, k);
}

/* ---- Basic queue -------------------------------------------------------------------- */

START_TEST(test_fifo)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	ck_assert_int_eq(ck_wq_add(q, "ns/a"), 1);
	ck_assert_int_eq(ck_wq_add(q, "ns/b"), 1);
	ck_assert_int_eq(ck_wq_add(q, "ns/c"), 1);
	ck_assert_uint_eq(ck_wq_len(q), 3);
	get_expect(q, "ns/a");
	get_expect(q, "ns/b");
	get_expect(q, "ns/c");
	ck_assert_uint_eq(ck_wq_len(q), 0);
	ck_assert_str_eq(ck_wq_name(q), "t");
	ck_wq_free(q);
}
END_TEST

START_TEST(test_dedup_while_waiting)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	ck_assert_int_eq(ck_wq_add(q, "ns/a"), 1);
	ck_assert_int_eq(ck_wq_add(q, "ns/b"), 1);
	ck_assert_int_eq(ck_wq_add(q, "ns/a"), 0);
	ck_assert_uint_eq(ck_wq_len(q), 2);
	ck_assert(scrape(q, "workqueue_adds_total{name=\"t\"}") == 2);
	ck_assert(scrape(q, "workqueue_depth{name=\"t\"}") == 2);
	get_expect(q, "ns/a");
	get_expect(q, "ns/b");
	ck_assert_uint_eq(ck_wq_len(q), 0);
	ck_wq_free(q);
}
END_TEST

START_TEST(test_dirty_while_processing)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	ck_wq_add(q, "ns/a");
	const char *k = ck_wq_get(q);
	ck_assert_str_eq(k, "ns/a");
	/* Being processed: only marked dirty, not handed to another worker. */
	ck_assert_int_eq(ck_wq_add(q, "ns/a"), 1);
	ck_assert_int_eq(ck_wq_add(q, "ns/a"), 0);
	ck_assert_uint_eq(ck_wq_len(q), 0);
	ck_wq_add(q, "ns/b");
	ck_assert_uint_eq(ck_wq_len(q), 1);
	get_expect(q, "ns/b");
	ck_assert_uint_eq(ck_wq_len(q), 0);
	/* Done queues it again, exactly once. */
	ck_wq_done(q, k);
	ck_assert_uint_eq(ck_wq_len(q), 1);
	get_expect(q, "ns/a");
	ck_assert_uint_eq(ck_wq_len(q), 0);
	ck_assert(scrape(q, "workqueue_adds_total{name=\"t\"}") == 3);
	ck_assert(scrape(q, "workqueue_depth{name=\"t\"}") == 0);
	ck_wq_free(q);
}
END_TEST

START_TEST(test_key_is_copied)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	char buf[16];
	strcpy(buf, "ns/x");
	ck_wq_add(q, buf);
	strcpy(buf, "zz/zz");
	get_expect(q, "ns/x");
	ck_wq_free(q);
}
END_TEST

START_TEST(test_many_keys)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	char key[32];
	enum { N = 5000 };
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N; i++) {
			snprintf(key, sizeof(key), "ns%d/key-%d", i % 7, i);
			ck_assert_int_eq(ck_wq_add(q, key), 1);
		}
		for (int i = 0; i < N; i += 3) {
			snprintf(key, sizeof(key), "ns%d/key-%d", i % 7, i);
			ck_assert_int_eq(ck_wq_add(q, key), 0);
		}
		ck_assert_uint_eq(ck_wq_len(q), N);
		for (int i = 0; i < N; i++) {
			snprintf(key, sizeof(key), "ns%d/key-%d", i % 7, i);
			get_expect(q, key);
		}
		ck_assert_uint_eq(ck_wq_len(q), 0);
	}
	ck_wq_free(q);
}
END_TEST

START_TEST(test_shutdown_hands_out_queued)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	ck_wq_add(q, "ns/a");
	ck_wq_add(q, "ns/b");
	ck_assert_int_eq(ck_wq_shutting_down(q), 0);
	ck_wq_shutdown(q);
	ck_assert_int_eq(ck_wq_shutting_down(q), 1);
	get_expect(q, "ns/a");
	get_expect(q, "ns/b");
	ck_assert_ptr_null(ck_wq_get(q));
	ck_assert_ptr_null(ck_wq_get(q));
	ck_wq_free(q);
}
END_TEST

START_TEST(test_bad_use)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	/* Empty or NULL keys are refused. */
	ck_assert_int_eq(ck_wq_add(q, ""), -1);
	ck_assert_int_eq(ck_wq_add(q, NULL), -1);
	ck_assert_int_eq(ck_wq_add_after(q, "", 5 * MS), -1);
	ck_assert_int_eq(ck_wq_add_rate_limited(q, NULL), -1);
	ck_assert_uint_eq(ck_wq_num_requeues(q, NULL), 0);
	ck_wq_forget(q, NULL);
	ck_assert_uint_eq(ck_wq_len(q), 0);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 0);
	/* Done of an unknown key, of a queued-but-not-got key, of NULL: harmless. */
	ck_wq_done(q, "ns/unknown");
	ck_wq_done(q, NULL);
	ck_wq_done(q, "");
	ck_wq_add(q, "ns/a");
	ck_wq_done(q, "ns/a");
	ck_assert_uint_eq(ck_wq_len(q), 1);
	const char *k = ck_wq_get(q);
	ck_assert_str_eq(k, "ns/a");
	ck_wq_done(q, k);
	ck_wq_done(q, "ns/a"); /* twice */
	ck_assert_uint_eq(ck_wq_len(q), 0);
	/* Adds after shutdown are ignored. */
	ck_wq_shutdown(q);
	ck_assert_int_eq(ck_wq_add(q, "ns/b"), 0);
	ck_assert_int_eq(ck_wq_add_after(q, "ns/c", 0), 0);
	ck_assert_int_eq(ck_wq_add_after(q, "ns/d", 10 * MS), 0);
	ck_assert_int_eq(ck_wq_add_rate_limited(q, "ns/e"), 0);
	ck_assert_uint_eq(ck_wq_len(q), 0);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 0);
	ck_assert_ptr_null(ck_wq_get(q));
	ck_wq_shutdown(q); /* twice */
	ck_wq_shutdown_with_drain(q);
	ck_wq_free(q);
	ck_wq_free(NULL);
}
END_TEST

START_TEST(test_free_with_pending)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	ck_wq_add(q, "ns/a");
	ck_wq_add(q, "ns/b");
	ck_wq_add_after(q, "ns/c", 10 * MS);
	ck_wq_add_rate_limited(q, "ns/d");
	const char *k = ck_wq_get(q);
	ck_assert_str_eq(k, "ns/a");
	ck_wq_add(q, "ns/a");
	ck_wq_free(q); /* leaks show under ASan */
}
END_TEST

/* ---- Threads: blocking get, shutdown, drain ------------------------------------------- */

typedef struct getter {
	ck_wq_t *q;
	char key[64]; /* copy of what ck_wq_get returned; "" for NULL */
	int got_null;
	_Atomic int finished;
	int do_done;
} getter_t;

static void *getter_main(void *arg)
{
	getter_t *g = arg;
	const char *k = ck_wq_get(g->q);
	if (k == NULL) {
		g->got_null = 1;
	} else {
		snprintf(g->key, sizeof(g->key), "%s", k);
		if (g->do_done)
			ck_wq_done(g->q, k);
	}
	atomic_store(&g->finished, 1);
	return NULL;
}

START_TEST(test_get_blocks_until_add)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	getter_t g = {.q = q, .do_done = 1};
	pthread_t th;
	pthread_create(&th, NULL, getter_main, &g);
	usleep(20000);
	ck_assert_int_eq(atomic_load(&g.finished), 0);
	ck_wq_add(q, "ns/a");
	pthread_join(th, NULL);
	ck_assert_str_eq(g.key, "ns/a");
	ck_wq_free(q);
}
END_TEST

START_TEST(test_shutdown_wakes_getters)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	getter_t g[3];
	pthread_t th[3];
	ck_wq_add_after(q, "ns/later", 1000 * MS); /* one getter becomes the timer waiter */
	for (int i = 0; i < 3; i++) {
		g[i] = (getter_t){.q = q, .do_done = 1};
		pthread_create(&th[i], NULL, getter_main, &g[i]);
	}
	usleep(20000);
	ck_wq_shutdown(q);
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(g[i].got_null, 1);
	}
	/* The delayed key was dropped. */
	ck_assert_uint_eq(ck_wq_waiting_len(q), 0);
	ck_wq_free(q);
}
END_TEST

typedef struct drainer {
	ck_wq_t *q;
	_Atomic int returned;
	int shutdown_only;
} drainer_t;

static void *drainer_main(void *arg)
{
	drainer_t *d = arg;
	ck_wq_shutdown_with_drain(d->q);
	atomic_store(&d->returned, 1);
	return NULL;
}

static void wait_shutting_down(ck_wq_t *q)
{
	while (!ck_wq_shutting_down(q))
		usleep(1000);
}

START_TEST(test_drain_waits_for_done)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	ck_wq_add(q, "ns/a");
	ck_wq_add(q, "ns/b");
	const char *a = ck_wq_get(q);
	const char *b = ck_wq_get(q);
	drainer_t d = {.q = q};
	pthread_t th;
	pthread_create(&th, NULL, drainer_main, &d);
	wait_shutting_down(q);
	usleep(20000);
	ck_assert_int_eq(atomic_load(&d.returned), 0);
	ck_wq_done(q, a);
	usleep(20000);
	ck_assert_int_eq(atomic_load(&d.returned), 0);
	/* Adds during the drain are ignored. */
	ck_assert_int_eq(ck_wq_add(q, "ns/c"), 0);
	ck_wq_done(q, b);
	pthread_join(th, NULL);
	ck_assert_int_eq(atomic_load(&d.returned), 1);
	ck_assert_ptr_null(ck_wq_get(q));
	ck_wq_free(q);
}
END_TEST

START_TEST(test_drain_with_dirty_key)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	ck_wq_add(q, "ns/a");
	const char *a = ck_wq_get(q);
	ck_wq_add(q, "ns/a"); /* dirty while processing, before shutdown */
	drainer_t d = {.q = q};
	pthread_t th;
	pthread_create(&th, NULL, drainer_main, &d);
	wait_shutting_down(q);
	ck_wq_done(q, a);
	/* Nothing is processing any more: the drain ends though a is queued again. */
	pthread_join(th, NULL);
	/* After shutdown the queued key is still handed out, then NULL. */
	get_expect(q, "ns/a");
	ck_assert_ptr_null(ck_wq_get(q));
	ck_wq_free(q);
}
END_TEST

START_TEST(test_shutdown_ends_drain)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	ck_wq_add(q, "ns/a");
	const char *a = ck_wq_get(q);
	drainer_t d = {.q = q};
	pthread_t th;
	pthread_create(&th, NULL, drainer_main, &d);
	wait_shutting_down(q);
	usleep(10000);
	ck_assert_int_eq(atomic_load(&d.returned), 0);
	ck_wq_shutdown(q);
	pthread_join(th, NULL);
	ck_assert_int_eq(atomic_load(&d.returned), 1);
	ck_wq_done(q, a);
	ck_wq_free(q);
}
END_TEST

START_TEST(test_drain_idle_returns)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	ck_wq_add(q, "ns/a"); /* queued, not processing: the drain does not wait for it */
	ck_wq_shutdown_with_drain(q);
	get_expect(q, "ns/a");
	ck_wq_free(q);
}
END_TEST

/* ---- Delaying queue ------------------------------------------------------------------ */

START_TEST(test_delay_ordering)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	ck_wq_add_after(q, "ns/c", 30 * MS);
	ck_wq_add_after(q, "ns/a", 10 * MS);
	ck_wq_add_after(q, "ns/b", 20 * MS);
	ck_wq_add_after(q, "ns/b2", 20 * MS); /* same time: first come first served */
	ck_assert_uint_eq(ck_wq_len(q), 0);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 4);
	advance(q, &c, 10 * MS - 1);
	ck_assert_uint_eq(ck_wq_len(q), 0);
	advance(q, &c, 1);
	ck_assert_uint_eq(ck_wq_len(q), 1);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 3);
	get_expect(q, "ns/a");
	advance(q, &c, 100 * MS);
	ck_assert_uint_eq(ck_wq_len(q), 3);
	get_expect(q, "ns/b");
	get_expect(q, "ns/b2");
	get_expect(q, "ns/c");
	ck_wq_free(q);
}
END_TEST

START_TEST(test_delay_earlier_wins)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	/* Later, then earlier: the earlier time replaces it. */
	ck_wq_add_after(q, "ns/a", 100 * MS);
	ck_wq_add_after(q, "ns/a", 50 * MS);
	/* Earlier, then later: the earlier time is kept. */
	ck_wq_add_after(q, "ns/b", 60 * MS);
	ck_wq_add_after(q, "ns/b", 200 * MS);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 2);
	advance(q, &c, 50 * MS);
	ck_assert_uint_eq(ck_wq_len(q), 1);
	get_expect(q, "ns/a");
	advance(q, &c, 10 * MS);
	ck_assert_uint_eq(ck_wq_len(q), 1);
	get_expect(q, "ns/b");
	ck_assert_uint_eq(ck_wq_waiting_len(q), 0);
	advance(q, &c, 1000 * MS);
	ck_assert_uint_eq(ck_wq_len(q), 0);
	ck_assert(scrape(q, "workqueue_retries_total{name=\"t\"}") == 4);
	ck_wq_free(q);
}
END_TEST

START_TEST(test_delay_nonpositive_adds_now)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	ck_wq_add_after(q, "ns/a", 0);
	ck_wq_add_after(q, "ns/b", -5 * MS);
	ck_assert_uint_eq(ck_wq_len(q), 2);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 0);
	get_expect(q, "ns/a");
	get_expect(q, "ns/b");
	ck_wq_free(q);
}
END_TEST

START_TEST(test_delay_and_queued)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	/* A queued key can also wait for a delay; when due it is deduplicated. */
	ck_wq_add(q, "ns/a");
	ck_wq_add_after(q, "ns/a", 10 * MS);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 1);
	advance(q, &c, 10 * MS);
	ck_assert_uint_eq(ck_wq_len(q), 1);
	get_expect(q, "ns/a");
	ck_assert_uint_eq(ck_wq_len(q), 0);
	/* Due while processing: dirty, queued again on done. */
	ck_wq_add(q, "ns/b");
	const char *b = ck_wq_get(q);
	ck_wq_add_after(q, "ns/b", 10 * MS);
	advance(q, &c, 10 * MS);
	ck_assert_uint_eq(ck_wq_len(q), 0);
	ck_wq_done(q, b);
	ck_assert_uint_eq(ck_wq_len(q), 1);
	get_expect(q, "ns/b");
	ck_wq_free(q);
}
END_TEST

START_TEST(test_delay_due_keys_before_new_add)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	ck_wq_add_after(q, "ns/early", 10 * MS);
	advance(q, &c, 20 * MS);
	ck_wq_add(q, "ns/late");
	get_expect(q, "ns/early");
	get_expect(q, "ns/late");
	ck_wq_free(q);
}
END_TEST

START_TEST(test_delay_heap_random)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	enum { N = 2000 };
	static int64_t ready[N];
	char key[32];
	for (int i = 0; i < N; i++) {
		ready[i] = 1 + (int64_t)(ck_rand_u64() % 100000) * 1000;
		snprintf(key, sizeof(key), "ns/k%d", i);
		ck_wq_add_after(q, key, ready[i]);
	}
	/* Re-add half of them with random delays: each keeps the earlier one. */
	for (int i = 0; i < N; i += 2) {
		int64_t d = 1 + (int64_t)(ck_rand_u64() % 100000) * 1000;
		snprintf(key, sizeof(key), "ns/k%d", i);
		ck_wq_add_after(q, key, d);
		if (d < ready[i])
			ready[i] = d;
	}
	ck_assert_uint_eq(ck_wq_waiting_len(q), N);
	int64_t last = 0;
	int got = 0;
	/* Advance in steps; every key must come out no earlier than its time, in order. */
	for (int64_t t = 0; got < N; t += 7 * 1000 * 1000) {
		advance(q, &c, 7 * 1000 * 1000);
		while (ck_wq_len(q) > 0) {
			const char *k = ck_wq_get(q);
			int i = atoi(k + 4);
			ck_assert_int_ge(ready[i], last);
			ck_assert_int_le(ready[i], t + 7 * 1000 * 1000);
			last = ready[i];
			got++;
			ck_wq_done(q, k);
		}
	}
	ck_assert_uint_eq(ck_wq_waiting_len(q), 0);
	ck_wq_free(q);
}
END_TEST

START_TEST(test_delay_wakes_blocked_getter_fake_clock)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	getter_t g = {.q = q, .do_done = 1};
	pthread_t th;
	pthread_create(&th, NULL, getter_main, &g);
	ck_wq_add_after(q, "ns/a", 1000 * MS);
	usleep(20000);
	ck_assert_int_eq(atomic_load(&g.finished), 0);
	advance(q, &c, 999 * MS);
	usleep(20000);
	ck_assert_int_eq(atomic_load(&g.finished), 0);
	advance(q, &c, 1 * MS);
	pthread_join(th, NULL);
	ck_assert_str_eq(g.key, "ns/a");
	ck_wq_free(q);
}
END_TEST

START_TEST(test_delay_real_clock)
{
	ck_wq_options_t o = {.name = "real"};
	ck_wq_t *q = ck_wq_new(&o);
	uint64_t t0 = ck_clk_mono_ns(ck_clk_real());
	ck_wq_add_after(q, "ns/a", 30 * MS);
	const char *k = ck_wq_get(q);
	uint64_t t1 = ck_clk_mono_ns(ck_clk_real());
	ck_assert_str_eq(k, "ns/a");
	ck_assert_uint_ge(t1 - t0, 30 * CK_NS_PER_MS);
	ck_wq_done(q, k);
	ck_wq_free(q);
}
END_TEST

START_TEST(test_delay_new_earliest_wakes_timer_waiter)
{
	ck_wq_options_t o = {.name = "real"};
	ck_wq_t *q = ck_wq_new(&o);
	getter_t g = {.q = q, .do_done = 1};
	ck_wq_add_after(q, "ns/late", 60000 * MS);
	pthread_t th;
	pthread_create(&th, NULL, getter_main, &g);
	usleep(20000); /* the getter now sleeps until the 60 s deadline */
	uint64_t t0 = ck_clk_mono_ns(ck_clk_real());
	ck_wq_add_after(q, "ns/soon", 20 * MS);
	pthread_join(th, NULL);
	uint64_t t1 = ck_clk_mono_ns(ck_clk_real());
	ck_assert_str_eq(g.key, "ns/soon");
	/* Woken for the new deadline, not at the old one. */
	ck_assert_uint_lt(t1 - t0, 30 * CK_NS_PER_SEC);
	ck_wq_free(q);
}
END_TEST

/* ---- Rate limiters ------------------------------------------------------------------- */

START_TEST(test_exponential)
{
	ck_wq_ratelimiter_t *rl =
	    ck_wq_ratelimiter_exponential_new(5 * CK_NS_PER_MS, 1000 * CK_NS_PER_SEC);
	uint64_t want = 5 * CK_NS_PER_MS;
	ck_assert_uint_eq(ck_wq_ratelimiter_num_requeues(rl, "ns/a"), 0);
	for (unsigned i = 0; i < 70; i++) {
		uint64_t cap = 1000 * CK_NS_PER_SEC;
		ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "ns/a"), want < cap ? want : cap);
		ck_assert_uint_eq(ck_wq_ratelimiter_num_requeues(rl, "ns/a"), i + 1);
		if (want < cap)
			want *= 2;
	}
	/* 5, 10, 20 ms for another item, independent of the first. */
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "ns/b"), 5 * CK_NS_PER_MS);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "ns/b"), 10 * CK_NS_PER_MS);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "ns/b"), 20 * CK_NS_PER_MS);
	/* Forget resets. */
	ck_wq_ratelimiter_forget(rl, "ns/a");
	ck_assert_uint_eq(ck_wq_ratelimiter_num_requeues(rl, "ns/a"), 0);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "ns/a"), 5 * CK_NS_PER_MS);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "ns/a"), 10 * CK_NS_PER_MS);
	ck_assert_uint_eq(ck_wq_ratelimiter_num_requeues(rl, "ns/b"), 3);
	ck_wq_ratelimiter_forget(rl, "ns/never");
	ck_wq_ratelimiter_free(rl);
}
END_TEST

/* client-go's ItemFastSlowRateLimiter: max_fast fast tries per item, then slow. */
START_TEST(test_fast_slow)
{
	ck_wq_ratelimiter_t *rl =
	    ck_wq_ratelimiter_fast_slow_new(5 * CK_NS_PER_MS, 10 * CK_NS_PER_SEC, 3);
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), 5 * CK_NS_PER_MS);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), 10 * CK_NS_PER_SEC);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), 10 * CK_NS_PER_SEC);
	ck_assert_uint_eq(ck_wq_ratelimiter_num_requeues(rl, "a"), 5);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "b"), 5 * CK_NS_PER_MS); /* its own count */
	ck_wq_ratelimiter_forget(rl, "a");
	ck_assert_uint_eq(ck_wq_ratelimiter_num_requeues(rl, "a"), 0);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), 5 * CK_NS_PER_MS);
	ck_wq_ratelimiter_free(rl);
	rl = ck_wq_ratelimiter_fast_slow_new(5 * CK_NS_PER_MS, 10 * CK_NS_PER_SEC, 0);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), 10 * CK_NS_PER_SEC); /* all slow */
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), 10 * CK_NS_PER_SEC);
	ck_wq_ratelimiter_free(rl);
}
END_TEST

/* client-go's WithMaxWaitRateLimiter: the inner delay capped; counts are the inner's. */
START_TEST(test_max_wait)
{
	ck_wq_ratelimiter_t *rl = ck_wq_ratelimiter_max_wait_new(
	    ck_wq_ratelimiter_exponential_new(CK_NS_PER_SEC, 1000 * CK_NS_PER_SEC),
	    5 * CK_NS_PER_SEC);
	uint64_t want[] = {1, 2, 4, 5, 5, 5};
	for (size_t i = 0; i < CK_ARRAY_LEN(want); i++)
		ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "k"), want[i] * CK_NS_PER_SEC);
	ck_assert_uint_eq(ck_wq_ratelimiter_num_requeues(rl, "k"), 6);
	ck_wq_ratelimiter_forget(rl, "k");
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "k"), CK_NS_PER_SEC);
	ck_wq_ratelimiter_free(rl); /* frees the inner limiter too (LeakSanitizer) */
}
END_TEST

START_TEST(test_exponential_big_base)
{
	/* base·2^n past 2^64 must clamp to max, not wrap. */
	ck_wq_ratelimiter_t *rl = ck_wq_ratelimiter_exponential_new(UINT64_MAX / 3, UINT64_MAX - 1);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "k"), UINT64_MAX / 3);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "k"), (UINT64_MAX / 3) * 2);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "k"), UINT64_MAX - 1);
	ck_wq_ratelimiter_free(rl);
}
END_TEST

static void assert_near(uint64_t got, uint64_t want)
{
	uint64_t d = got > want ? got - want : want - got;
	ck_assert_msg(d <= 1000, "got %llu want %llu", (unsigned long long)got,
	              (unsigned long long)want);
}

START_TEST(test_bucket)
{
	ck_clk_fake_t c;
	ck_clk_fake_init(&c, 5 * CK_NS_PER_SEC, 0);
	ck_wq_ratelimiter_t *rl = ck_wq_ratelimiter_bucket_new(&c.base, 10, 3, NULL);
	ck_assert_ptr_nonnull(rl);
	/* Full bucket: burst requests free, then each one more waits 1/qps longer. */
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), 0);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "b"), 0);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), 0);
	assert_near(ck_wq_ratelimiter_when(rl, "c"), 100 * CK_NS_PER_MS);
	assert_near(ck_wq_ratelimiter_when(rl, "d"), 200 * CK_NS_PER_MS);
	assert_near(ck_wq_ratelimiter_when(rl, "e"), 300 * CK_NS_PER_MS);
	ck_assert_uint_eq(ck_wq_ratelimiter_num_requeues(rl, "a"), 0);
	ck_wq_ratelimiter_forget(rl, "a");
	/* Refill: 1 s = 10 tokens pays the debt of 3 and refills up to the burst only. */
	ck_clk_fake_advance(&c, CK_NS_PER_SEC);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), 0);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), 0);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), 0);
	assert_near(ck_wq_ratelimiter_when(rl, "a"), 100 * CK_NS_PER_MS);
	/* Partial refill: 50 ms = half a token. Balance -1 + 0.5 - 1 = -1.5. */
	ck_clk_fake_advance(&c, 50 * CK_NS_PER_MS);
	assert_near(ck_wq_ratelimiter_when(rl, "a"), 150 * CK_NS_PER_MS);
	ck_wq_ratelimiter_free(rl);
}
END_TEST

/* A qps so small that the wait overflows 64 bits of ns: "never", as before the
 * bucket was pkg/flowcontrol's, and no undefined float-to-integer conversion. */
START_TEST(test_bucket_tiny_qps)
{
	ck_clk_fake_t c;
	ck_clk_fake_init(&c, 5 * CK_NS_PER_SEC, 0);
	ck_wq_ratelimiter_t *rl = ck_wq_ratelimiter_bucket_new(&c.base, 1e-12, 1, NULL);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), 0);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), CK_WQ_DELAY_NEVER);
	ck_wq_ratelimiter_free(rl);
}
END_TEST

START_TEST(test_bucket_bad_args)
{
	char *err = NULL;
	ck_assert_ptr_null(ck_wq_ratelimiter_bucket_new(NULL, 0, 10, &err));
	ck_assert_ptr_nonnull(strstr(err, "qps"));
	free(err);
	err = NULL;
	ck_assert_ptr_null(ck_wq_ratelimiter_bucket_new(NULL, 10, 0, &err));
	ck_assert_ptr_nonnull(strstr(err, "burst"));
	free(err);
	ck_assert_ptr_null(ck_wq_ratelimiter_bucket_new(NULL, NAN, 10, NULL));
	ck_assert_ptr_null(ck_wq_ratelimiter_bucket_new(NULL, INFINITY, 10, NULL));
	ck_wq_ratelimiter_free(NULL);
}
END_TEST

START_TEST(test_max_of)
{
	ck_clk_fake_t c;
	ck_clk_fake_init(&c, 5 * CK_NS_PER_SEC, 0);
	ck_wq_ratelimiter_t *parts[2] = {
	    ck_wq_ratelimiter_exponential_new(5 * CK_NS_PER_MS, CK_NS_PER_SEC),
	    ck_wq_ratelimiter_bucket_new(&c.base, 1, 1, NULL),
	};
	ck_wq_ratelimiter_t *rl = ck_wq_ratelimiter_max_of_new(parts, 2);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), 5 * CK_NS_PER_MS); /* exp wins */
	assert_near(ck_wq_ratelimiter_when(rl, "a"), CK_NS_PER_SEC);          /* bucket wins */
	ck_assert_uint_eq(ck_wq_ratelimiter_num_requeues(rl, "a"), 2);
	ck_wq_ratelimiter_forget(rl, "a");
	ck_assert_uint_eq(ck_wq_ratelimiter_num_requeues(rl, "a"), 0);
	/* The bucket was asked every time, so it is 2 s in debt now. */
	assert_near(ck_wq_ratelimiter_when(rl, "a"), 2 * CK_NS_PER_SEC);
	ck_clk_fake_advance(&c, 10 * CK_NS_PER_SEC);
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "a"), 10 * CK_NS_PER_MS);
	ck_wq_ratelimiter_free(rl);
}
END_TEST

static void check_preset(ck_wq_ratelimiter_t *rl, int burst, uint64_t step_ns)
{
	char key[32];
	for (int i = 0; i < burst; i++) {
		snprintf(key, sizeof(key), "ns/k%d", i);
		ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, key), 5 * CK_NS_PER_MS);
	}
	/* Past the burst, the bucket dominates for fresh items. */
	assert_near(ck_wq_ratelimiter_when(rl, "ns/extra"), step_ns);
	assert_near(ck_wq_ratelimiter_when(rl, "ns/extra2"), 2 * step_ns);
	/* The exponential cap is 1000 s. */
	for (int i = 0; i < 40; i++)
		ck_wq_ratelimiter_when(rl, "ns/k0");
	ck_assert_uint_eq(ck_wq_ratelimiter_when(rl, "ns/k0"), 1000 * CK_NS_PER_SEC);
	ck_wq_ratelimiter_free(rl);
}

START_TEST(test_presets)
{
	ck_clk_fake_t c;
	ck_clk_fake_init(&c, 5 * CK_NS_PER_SEC, 0);
	check_preset(ck_wq_ratelimiter_default_new(&c.base), 100, 100 * CK_NS_PER_MS);
	check_preset(ck_wq_ratelimiter_controller_new(&c.base, 50, 300), 300, 20 * CK_NS_PER_MS);
}
END_TEST

START_TEST(test_add_rate_limited)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "t");
	ck_assert_int_eq(ck_wq_add_rate_limited(q, "ns/a"), 0);
	ck_assert_uint_eq(ck_wq_num_requeues(q, "ns/a"), 1);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 1);
	advance(q, &c, 5 * MS - 1);
	ck_assert_uint_eq(ck_wq_len(q), 0);
	advance(q, &c, 1);
	ck_assert_uint_eq(ck_wq_len(q), 1);
	const char *a = ck_wq_get(q);
	/* Failed again while processing: 10 ms, then dirty, queued on done. */
	ck_wq_add_rate_limited(q, a);
	ck_assert_uint_eq(ck_wq_num_requeues(q, a), 2);
	advance(q, &c, 10 * MS);
	ck_assert_uint_eq(ck_wq_len(q), 0);
	ck_wq_done(q, a);
	ck_assert_uint_eq(ck_wq_len(q), 1);
	a = ck_wq_get(q);
	ck_wq_forget(q, a); /* success */
	ck_assert_uint_eq(ck_wq_num_requeues(q, a), 0);
	ck_wq_done(q, a);
	ck_assert(scrape(q, "workqueue_retries_total{name=\"t\"}") == 2);
	ck_wq_free(q);
}
END_TEST

START_TEST(test_custom_limiter)
{
	ck_clk_fake_t c;
	ck_clk_fake_init(&c, CK_NS_PER_SEC, 0);
	ck_wq_options_t o = {.name = "sc",
	                     .clock = &c.base,
	                     .limiter = ck_wq_ratelimiter_controller_new(&c.base, 50, 300)};
	ck_wq_t *q = ck_wq_new(&o);
	ck_wq_add_rate_limited(q, "ns/a");
	ck_wq_add_rate_limited(q, "ns/a");
	ck_assert_uint_eq(ck_wq_num_requeues(q, "ns/a"), 2);
	ck_assert_uint_eq(ck_wq_waiting_len(q), 1);
	advance(q, &c, 5 * MS);
	ck_assert_uint_eq(ck_wq_len(q), 1); /* the earlier (5 ms) time was kept */
	ck_wq_free(q);
}
END_TEST

/* ---- Metrics ----------------------------------------------------------------------- */

START_TEST(test_metrics_values)
{
	ck_clk_fake_t c;
	ck_wq_t *q = fake_queue(&c, "ctl");
	ck_wq_add(q, "ns/a");
	advance(q, &c, 1 * MS);
	const char *a = ck_wq_get(q); /* waited 1 ms */
	ck_wq_add(q, "ns/b");
	const char *b = ck_wq_get(q); /* waited 0 */
	advance(q, &c, 2000 * MS);
	ck_wq_add_after(q, "ns/c", 10 * MS);

	ck_sbuf_t t = CK_SBUF_INIT;
	ck_wq_metrics_write(q, &t);
	const char *s = ck_sbuf_cstr(&t);
	ck_assert(metric(s, "workqueue_depth{name=\"ctl\"}") == 0);
	ck_assert(metric(s, "workqueue_adds_total{name=\"ctl\"}") == 2);
	ck_assert(metric(s, "workqueue_retries_total{name=\"ctl\"}") == 1);
	ck_assert(metric(s, "workqueue_queue_duration_seconds_bucket{name=\"ctl\",le=\"1e-08\"}") ==
	          1);
	ck_assert(
	    metric(s, "workqueue_queue_duration_seconds_bucket{name=\"ctl\",le=\"0.0001\"}") == 1);
	ck_assert(metric(s, "workqueue_queue_duration_seconds_bucket{name=\"ctl\",le=\"0.001\"}") ==
	          2);
	ck_assert(metric(s, "workqueue_queue_duration_seconds_bucket{name=\"ctl\",le=\"+Inf\"}") ==
	          2);
	ck_assert(metric(s, "workqueue_queue_duration_seconds_count{name=\"ctl\"}") == 2);
	ck_assert(metric(s, "workqueue_queue_duration_seconds_sum{name=\"ctl\"}") == 0.001);
	ck_assert(metric(s, "workqueue_work_duration_seconds_count{name=\"ctl\"}") == 0);
	ck_assert(metric(s, "workqueue_unfinished_work_seconds{name=\"ctl\"}") == 4);
	ck_assert(metric(s, "workqueue_longest_running_processor_seconds{name=\"ctl\"}") == 2);
	ck_sbuf_free(&t);

	ck_wq_done(q, a);
	advance(q, &c, 1000 * MS);
	ck_wq_metrics_write(q, &t);
	s = ck_sbuf_cstr(&t);
	ck_assert(metric(s, "workqueue_work_duration_seconds_bucket{name=\"ctl\",le=\"1\"}") == 0);
	ck_assert(metric(s, "workqueue_work_duration_seconds_bucket{name=\"ctl\",le=\"10\"}") == 1);
	ck_assert(metric(s, "workqueue_work_duration_seconds_sum{name=\"ctl\"}") == 2);
	ck_assert(metric(s, "workqueue_unfinished_work_seconds{name=\"ctl\"}") == 3);
	ck_assert(metric(s, "workqueue_longest_running_processor_seconds{name=\"ctl\"}") == 3);
	/* ns/c became due and was added. */
	ck_assert(metric(s, "workqueue_depth{name=\"ctl\"}") == 1);
	ck_assert(metric(s, "workqueue_adds_total{name=\"ctl\"}") == 3);
	ck_sbuf_free(&t);

	ck_wq_done(q, b);
	ck_assert(scrape(q, "workqueue_unfinished_work_seconds{name=\"ctl\"}") == 0);
	ck_assert(scrape(q, "workqueue_longest_running_processor_seconds{name=\"ctl\"}") == 0);
	ck_wq_free(q);
}
END_TEST

static int count_of(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

START_TEST(test_metrics_format_several_queues)
{
	ck_clk_fake_t c;
	ck_wq_t *qs[3];
	qs[0] = fake_queue(&c, "foos");
	ck_wq_options_t o = {.name = "we\"ird\\name\n", .clock = &c.base};
	qs[1] = ck_wq_new(&o);
	qs[2] = ck_wq_new(NULL); /* no name: no metrics */
	ck_wq_add(qs[0], "ns/a");
	ck_wq_add(qs[1], "ns/a");
	ck_wq_add(qs[2], "ns/a");

	ck_sbuf_t t = CK_SBUF_INIT;
	ck_wq_metrics_write_all(qs, 3, &t);
	const char *s = ck_sbuf_cstr(&t);
	static const char *const families[] = {
	    "workqueue_depth gauge",
	    "workqueue_adds_total counter",
	    "workqueue_queue_duration_seconds histogram",
	    "workqueue_work_duration_seconds histogram",
	    "workqueue_unfinished_work_seconds gauge",
	    "workqueue_longest_running_processor_seconds gauge",
	    "workqueue_retries_total counter",
	};
	for (size_t i = 0; i < CK_ARRAY_LEN(families); i++) {
		char line[128];
		snprintf(line, sizeof(line), "# TYPE %s\n", families[i]);
		ck_assert_int_eq(count_of(s, line), 1);
	}
	ck_assert_int_eq(count_of(s, "# HELP "), 7);
	ck_assert_int_eq(count_of(s, "# TYPE "), 7);
	ck_assert(metric(s, "workqueue_depth{name=\"foos\"}") == 1);
	ck_assert(metric(s, "workqueue_depth{name=\"we\\\"ird\\\\name\\n\"}") == 1);
	/* 13 histogram lines each x 2 families + 5 single samples, per named queue. */
	ck_assert_int_eq(count_of(s, "{name=\"foos\""), 2 * 13 + 5);
	ck_assert_int_eq(count_of(s, "{name=\""), 2 * (2 * 13 + 5));
	/* Every line is a comment or `name{labels} value`, and the text ends with a newline. */
	for (const char *p = s; *p != '\0';) {
		const char *e = strchr(p, '\n');
		ck_assert_ptr_nonnull(e);
		if (*p != '#') {
			ck_assert(strncmp(p, "workqueue_", 10) == 0);
			const char *sp = memrchr(p, '}', (size_t)(e - p));
			ck_assert(sp != NULL && sp < e && sp[1] == ' ');
			char *end;
			strtod(sp + 2, &end);
			ck_assert_ptr_eq(end, e);
		}
		p = e + 1;
	}
	ck_sbuf_free(&t);

	/* Only unnamed queues: nothing at all. */
	ck_wq_metrics_write(qs[2], &t);
	ck_assert_uint_eq(t.len, 0);
	ck_sbuf_free(&t);
	for (int i = 0; i < 3; i++)
		ck_wq_free(qs[i]);
}
END_TEST

/* ---- Hammering ---------------------------------------------------------------------- */

enum { HAMMER_KEYS = 64, HAMMER_WORKERS = 8, HAMMER_ADDS = 20000 };

typedef struct hammer {
	ck_wq_t *q;
	_Atomic int busy[HAMMER_KEYS];
	_Atomic unsigned long processed[HAMMER_KEYS];
	_Atomic unsigned long gets;
	_Atomic int violations;
	_Atomic int worker_seed;
} hammer_t;

static void *hammer_worker(void *arg)
{
	hammer_t *h = arg;
	unsigned seed = (unsigned)atomic_fetch_add(&h->worker_seed, 1) * 2654435761u + 1;
	const char *k;
	char key[32];
	while ((k = ck_wq_get(h->q)) != NULL) {
		int i = atoi(k + 4);
		if (atomic_exchange(&h->busy[i], 1) != 0)
			atomic_fetch_add(&h->violations, 1);
		atomic_fetch_add(&h->gets, 1);
		atomic_fetch_add(&h->processed[i], 1);
		seed = seed * 1103515245u + 12345u;
		/* Workers are producers too: the same key (dirty while processing) or another. */
		if ((seed >> 16) % 4 == 0) {
			ck_wq_add(h->q, k);
		} else if ((seed >> 16) % 4 == 1) {
			snprintf(key, sizeof(key), "ns/k%u", (seed >> 8) % HAMMER_KEYS);
			ck_wq_add(h->q, key);
		} else if ((seed >> 16) % 16 == 2) {
			ck_wq_add_after(h->q, k, 1000);
		}
		if ((seed >> 20) % 8 == 0)
			sched_yield();
		atomic_store(&h->busy[i], 0);
		ck_wq_done(h->q, k);
	}
	return NULL;
}

START_TEST(test_hammer_no_concurrent_processing)
{
	static hammer_t h;
	memset(&h, 0, sizeof(h));
	ck_wq_options_t o = {.name = "hammer"};
	h.q = ck_wq_new(&o);
	pthread_t th[HAMMER_WORKERS];
	for (int i = 0; i < HAMMER_WORKERS; i++)
		pthread_create(&th[i], NULL, hammer_worker, &h);
	char key[32];
	for (unsigned i = 0; i < HAMMER_ADDS; i++) {
		snprintf(key, sizeof(key), "ns/k%u", (unsigned)(ck_rand_u64() % HAMMER_KEYS));
		ck_wq_add(h.q, key);
		if (i % 64 == 0)
			sched_yield();
	}
	/* Let the workers catch up, then drain: everything dirty is still processed. */
	while (ck_wq_len(h.q) > 0 || ck_wq_waiting_len(h.q) > 0)
		usleep(1000);
	ck_wq_shutdown_with_drain(h.q);
	for (int i = 0; i < HAMMER_WORKERS; i++)
		pthread_join(th[i], NULL);

	ck_assert_int_eq(atomic_load(&h.violations), 0);
	ck_assert_uint_eq(ck_wq_len(h.q), 0);
	/* Every add that marked a key dirty led to exactly one get. */
	double adds = scrape(h.q, "workqueue_adds_total{name=\"hammer\"}");
	ck_assert(adds == (double)atomic_load(&h.gets));
	ck_assert(scrape(h.q, "workqueue_depth{name=\"hammer\"}") == 0);
	ck_assert(scrape(h.q, "workqueue_work_duration_seconds_count{name=\"hammer\"}") == adds);
	ck_assert(scrape(h.q, "workqueue_unfinished_work_seconds{name=\"hammer\"}") == 0);
	ck_wq_free(h.q);
}
END_TEST

/* Producer on one thread (the "loop"), two workers, and delayed adds racing with gets. */
typedef struct delayed_run {
	ck_wq_t *q;
	_Atomic unsigned long got;
} delayed_run_t;

static void *delayed_worker(void *arg)
{
	delayed_run_t *d = arg;
	const char *k;
	while ((k = ck_wq_get(d->q)) != NULL) {
		atomic_fetch_add(&d->got, 1);
		ck_wq_done(d->q, k);
	}
	return NULL;
}

START_TEST(test_delayed_threads)
{
	delayed_run_t d = {0};
	ck_wq_options_t o = {.name = "delayed"};
	d.q = ck_wq_new(&o);
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, delayed_worker, &d);
	char key[32];
	enum { N = 500 };
	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "ns/d%d", i);
		ck_wq_add_after(d.q, key, (int64_t)(ck_rand_u64() % 3000000)); /* < 3 ms */
	}
	while (atomic_load(&d.got) < N)
		usleep(1000);
	ck_wq_shutdown(d.q);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ck_assert_uint_eq(atomic_load(&d.got), N);
	ck_wq_free(d.q);
}
END_TEST

/* A clock that counts its reads. */
typedef struct counting_clk {
	ck_clk_t base;
	_Atomic unsigned reads;
	uint64_t now;
} counting_clk_t;

static uint64_t counting_mono(const ck_clk_t *c)
{
	counting_clk_t *cc = (counting_clk_t *)(uintptr_t)c;
	atomic_fetch_add(&cc->reads, 1);
	return cc->now;
}

static int64_t counting_wall(const ck_clk_t *c)
{
	return 0;
}

/* An unnamed queue exposes no metrics: with nothing delayed, add/get/done read no
 * clock (a third of their cost); a named one reads it for its histograms, and an
 * unnamed one with delayed keys reads it to promote them. */
START_TEST(test_unnamed_queue_reads_no_clock)
{
	counting_clk_t c = {.base = {counting_mono, counting_wall}, .now = 1000 * CK_NS_PER_SEC};
	ck_wq_options_t o = {.clock = &c.base};
	ck_wq_t *q = ck_wq_new(&o);
	unsigned at_start = atomic_load(&c.reads); /* the default limiter's bucket starts */
	for (int i = 0; i < 100; i++) {
		ck_assert_int_eq(ck_wq_add(q, "ns/a"), 1);
		get_expect(q, "ns/a");
	}
	ck_assert_uint_eq(atomic_load(&c.reads), at_start);

	ck_wq_add_after(q, "ns/later", 5 * MS);
	unsigned before = atomic_load(&c.reads);
	ck_wq_add(q, "ns/b");
	ck_assert_uint_gt(atomic_load(&c.reads), before);
	c.now += 10 * MS;
	get_expect(q, "ns/b");
	get_expect(q, "ns/later");
	ck_wq_free(q);

	o.name = "named";
	q = ck_wq_new(&o);
	at_start = atomic_load(&c.reads);
	ck_wq_add(q, "ns/a");
	get_expect(q, "ns/a");
	ck_assert_uint_ge(atomic_load(&c.reads), at_start + 3);
	ck_wq_free(q);
}
END_TEST

/* The key trace names what each add, get and done did to the traced key, and
 * nothing of any other key. */
START_TEST(test_trace_outcomes)
{
	int fd = trace_start("ns/a");
	ck_wq_t *q = ck_wq_new(&(ck_wq_options_t){.name = "q"});
	ck_wq_add(q, "ns/a");
	ck_wq_add(q, "ns/b");
	ck_wq_add(q, "ns/a");
	const char *k = ck_wq_get(q);
	ck_assert_str_eq(k, "ns/a");
	ck_wq_add(q, "ns/a");
	ck_wq_add(q, "ns/a");
	ck_wq_done(q, k);
	k = ck_wq_get(q);
	ck_assert_str_eq(k, "ns/b");
	ck_wq_done(q, k);
	k = ck_wq_get(q);
	ck_assert_str_eq(k, "ns/a");
	ck_wq_done(q, k);
	ck_wq_done(q, "ns/a");
	ck_wq_shutdown(q);
	ck_wq_add(q, "ns/a");
	char log[8192];
	trace_stop(fd, log, sizeof(log));
	ck_assert_ptr_null(strstr(log, "ns/b"));
	const char *want[] = {
	    "step=\"queue-add\" queue=\"q\" outcome=\"queued\" depth=1",
	    "step=\"queue-add\" queue=\"q\" outcome=\"deduplicated: already queued\" depth=2",
	    "step=\"queue-get\" queue=\"q\" depth=1",
	    "step=\"queue-add\" queue=\"q\" outcome=\"marked dirty: being processed, queued again "
	    "at done\"",
	    "step=\"queue-add\" queue=\"q\" outcome=\"deduplicated: being processed, already due "
	    "again at done\"",
	    "step=\"queue-done\" queue=\"q\" outcome=\"queued again: added while processed\"",
	    "step=\"queue-get\" queue=\"q\" depth=0",
	    "step=\"queue-done\" queue=\"q\" outcome=\"finished\"",
	    "step=\"queue-done\" queue=\"q\" outcome=\"ignored: not being processed\"",
	    "step=\"queue-add\" queue=\"q\" outcome=\"ignored: shutting down\"",
	};
	const char *rest = trace_expect(log, "\"Trace\" key=\"ns/a\" ", want, CK_ARRAY_LEN(want));
	ck_assert_ptr_null(strstr(rest, "\"Trace\""));
	ck_wq_free(q);
}
END_TEST

Suite *suite_workqueue(void)
{
	Suite *s = suite_create("workqueue");
	TCase *tc = tcase_create("queue");
	tcase_add_test(tc, test_trace_outcomes);
	tcase_add_test(tc, test_fifo);
	tcase_add_test(tc, test_dedup_while_waiting);
	tcase_add_test(tc, test_dirty_while_processing);
	tcase_add_test(tc, test_key_is_copied);
	tcase_add_test(tc, test_many_keys);
	tcase_add_test(tc, test_shutdown_hands_out_queued);
	tcase_add_test(tc, test_bad_use);
	tcase_add_test(tc, test_free_with_pending);
	suite_add_tcase(s, tc);

	tc = tcase_create("threads");
	tcase_add_test(tc, test_get_blocks_until_add);
	tcase_add_test(tc, test_shutdown_wakes_getters);
	tcase_add_test(tc, test_drain_waits_for_done);
	tcase_add_test(tc, test_drain_with_dirty_key);
	tcase_add_test(tc, test_shutdown_ends_drain);
	tcase_add_test(tc, test_drain_idle_returns);
	tcase_add_test(tc, test_hammer_no_concurrent_processing);
	tcase_add_test(tc, test_delayed_threads);
	suite_add_tcase(s, tc);

	tc = tcase_create("delaying");
	tcase_add_test(tc, test_delay_ordering);
	tcase_add_test(tc, test_delay_earlier_wins);
	tcase_add_test(tc, test_delay_nonpositive_adds_now);
	tcase_add_test(tc, test_delay_and_queued);
	tcase_add_test(tc, test_delay_due_keys_before_new_add);
	tcase_add_test(tc, test_delay_heap_random);
	tcase_add_test(tc, test_delay_wakes_blocked_getter_fake_clock);
	tcase_add_test(tc, test_delay_real_clock);
	tcase_add_test(tc, test_delay_new_earliest_wakes_timer_waiter);
	suite_add_tcase(s, tc);

	tc = tcase_create("ratelimit");
	tcase_add_test(tc, test_exponential);
	tcase_add_test(tc, test_exponential_big_base);
	tcase_add_test(tc, test_fast_slow);
	tcase_add_test(tc, test_max_wait);
	tcase_add_test(tc, test_bucket);
	tcase_add_test(tc, test_bucket_tiny_qps);
	tcase_add_test(tc, test_bucket_bad_args);
	tcase_add_test(tc, test_max_of);
	tcase_add_test(tc, test_presets);
	tcase_add_test(tc, test_add_rate_limited);
	tcase_add_test(tc, test_custom_limiter);
	suite_add_tcase(s, tc);

	tc = tcase_create("metrics");
	tcase_add_test(tc, test_metrics_values);
	tcase_add_test(tc, test_unnamed_queue_reads_no_clock);
	tcase_add_test(tc, test_metrics_format_several_queues);
	suite_add_tcase(s, tc);
	return s;
}
