/*
 * Unit tests for pkg/leaderelection: the decision core on an in-memory lock and a
 * fake clock (no sleeping), then the elector thread on the in-memory lock with real
 * but short timings (assertions wait for outcomes; none bounds how fast they come).
 */
#include "pkg/leaderelection/le_internal.h"
#include <ckube/base.h>
#include <ckube/leaderelection.h>

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---------- an in-memory lock: one store, one handle per elector ---------- */

typedef struct fake_store {
	pthread_mutex_t mu;
	bool exists;
	le_record_t rec;
	uint64_t version; /* bumps on every write */
	int gets, creates, updates;
	/* Called once (then cleared) inside the next update, before it applies. */
	void (*before_update)(void *ud);
	void *before_update_ud;
	/* Advanced inside every call, to model request latency. */
	ck_clk_fake_t *clock;
	uint64_t latency_ns;
} fake_store_t;

typedef struct fake_lock {
	le_lock_t base;
	fake_store_t *store;
	uint64_t seen;     /* version last read or written by this handle */
	_Atomic bool down; /* this handle's "network" is cut */
} fake_lock_t;

static void store_init(fake_store_t *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	le_record_init(&s->rec);
}

static void store_free(fake_store_t *s)
{
	le_record_free(&s->rec);
	pthread_mutex_destroy(&s->mu);
}

/* Puts rec in the store as if another party wrote it. */
static void store_put(fake_store_t *s, const char *holder, int64_t dur, const char *renew,
                      int64_t transitions)
{
	pthread_mutex_lock(&s->mu);
	s->exists = true;
	free(s->rec.holder);
	s->rec.holder = ck_xstrdup(holder);
	free(s->rec.renew_time);
	s->rec.renew_time = ck_xstrdup(renew);
	s->rec.lease_duration_s = dur;
	s->rec.transitions = transitions;
	s->version++;
	pthread_mutex_unlock(&s->mu);
}

/* A write that changes nothing the election reads (a label, say). */
static void store_touch(fake_store_t *s)
{
	pthread_mutex_lock(&s->mu);
	s->version++;
	pthread_mutex_unlock(&s->mu);
}

static void store_snapshot(fake_store_t *s, le_record_t *out)
{
	pthread_mutex_lock(&s->mu);
	le_record_copy(out, &s->rec);
	pthread_mutex_unlock(&s->mu);
}

static int store_updates(fake_store_t *s)
{
	pthread_mutex_lock(&s->mu);
	int n = s->updates;
	pthread_mutex_unlock(&s->mu);
	return n;
}

static char *store_holder(fake_store_t *s)
{
	pthread_mutex_lock(&s->mu);
	char *h = ck_xstrdup(s->rec.holder);
	pthread_mutex_unlock(&s->mu);
	return h;
}

static void latency(fake_store_t *s)
{
	if (s->clock != NULL && s->latency_ns > 0)
		ck_clk_fake_advance(s->clock, s->latency_ns);
}

static int fake_get(le_lock_t *base, uint32_t timeout_ms, le_record_t *out, char **err)
{
	fake_lock_t *l = (fake_lock_t *)base;
	fake_store_t *s = l->store;
	ck_assert_uint_gt(timeout_ms, 0);
	if (atomic_load(&l->down))
		return ck_err_set(err, "connection refused"), LE_LOCK_ERROR;
	latency(s);
	pthread_mutex_lock(&s->mu);
	s->gets++;
	int rc = LE_LOCK_NOT_FOUND;
	if (s->exists) {
		le_record_clear(out);
		le_record_copy(out, &s->rec);
		l->seen = s->version;
		rc = LE_LOCK_OK;
	} else {
		ck_err_set(err, "leases \"x\" not found");
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static int fake_create(le_lock_t *base, uint32_t timeout_ms, const le_record_t *rec, char **err)
{
	fake_lock_t *l = (fake_lock_t *)base;
	fake_store_t *s = l->store;
	ck_assert_uint_gt(timeout_ms, 0);
	if (atomic_load(&l->down))
		return ck_err_set(err, "connection refused"), LE_LOCK_ERROR;
	latency(s);
	pthread_mutex_lock(&s->mu);
	s->creates++;
	int rc = LE_LOCK_CONFLICT;
	if (!s->exists) {
		s->exists = true;
		le_record_copy(&s->rec, rec);
		l->seen = ++s->version;
		rc = LE_LOCK_OK;
	} else {
		ck_err_set(err, "already exists");
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static int fake_update(le_lock_t *base, uint32_t timeout_ms, const le_record_t *rec, char **err)
{
	fake_lock_t *l = (fake_lock_t *)base;
	fake_store_t *s = l->store;
	ck_assert_uint_gt(timeout_ms, 0);
	if (atomic_load(&l->down))
		return ck_err_set(err, "connection refused"), LE_LOCK_ERROR;
	latency(s);
	void (*hook)(void *) = s->before_update;
	s->before_update = NULL;
	if (hook != NULL)
		hook(s->before_update_ud);
	pthread_mutex_lock(&s->mu);
	s->updates++;
	int rc;
	if (!s->exists) {
		rc = LE_LOCK_NOT_FOUND;
		ck_err_set(err, "not found");
	} else if (l->seen != s->version) {
		rc = LE_LOCK_CONFLICT;
		ck_err_set(err, "the object has been modified");
	} else {
		le_record_copy(&s->rec, rec);
		l->seen = ++s->version;
		rc = LE_LOCK_OK;
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static void fake_free(le_lock_t *base)
{
	free(base->desc);
	free(base);
}

static const le_lock_ops_t fake_ops = {fake_get, fake_create, fake_update, fake_free};

static le_lock_t *fake_lock_new(fake_store_t *s)
{
	fake_lock_t *l = ck_xcalloc(1, sizeof(*l));
	l->base.ops = &fake_ops;
	l->base.desc = ck_xstrdup("ns/lease");
	l->store = s;
	atomic_init(&l->down, false);
	return &l->base;
}

/* ---------- the decision core, fake clock ---------- */

#define SEC     CK_NS_PER_SEC
#define T0_WALL ((int64_t)1795953600 * (int64_t)CK_NS_PER_SEC) /* 2026-11-29T12:00:00Z */

typedef struct fixture {
	ck_clk_fake_t clk;
	fake_store_t store;
	le_lock_t *la, *lb;
	le_core_t a, b;
} fixture_t;

static void fx_init(fixture_t *f)
{
	ck_clk_fake_init(&f->clk, 1000 * SEC, T0_WALL);
	store_init(&f->store);
	f->la = fake_lock_new(&f->store);
	f->lb = fake_lock_new(&f->store);
	le_core_init(&f->a, "a", 15 * SEC, &f->clk.base, f->la);
	le_core_init(&f->b, "b", 15 * SEC, &f->clk.base, f->lb);
}

static void fx_free(fixture_t *f)
{
	le_core_free(&f->a);
	le_core_free(&f->b);
	f->la->ops->free(f->la);
	f->lb->ops->free(f->lb);
	store_free(&f->store);
}

static uint64_t fx_deadline(fixture_t *f)
{
	return ck_clk_mono_ns(&f->clk.base) + 10 * SEC;
}

static bool fx_try(fixture_t *f, le_core_t *c, char **err)
{
	return le_core_try_acquire_or_renew(c, fx_deadline(f), err);
}

START_TEST(test_create_when_missing)
{
	fixture_t f;
	char *err = NULL;
	fx_init(&f);
	ck_assert(fx_try(&f, &f.a, &err));
	ck_assert_ptr_null(err);
	ck_assert_int_eq(f.store.creates, 1);
	ck_assert(le_core_is_leader(&f.a));
	ck_assert_str_eq(f.store.rec.holder, "a");
	ck_assert_int_eq(f.store.rec.lease_duration_s, 15);
	ck_assert_int_eq(f.store.rec.transitions, 0);
	/* MicroTime: RFC 3339 with microseconds, from the (fake) wall clock. */
	ck_assert_str_eq(f.store.rec.acquire_time, "2026-11-29T12:00:00.000000Z");
	ck_assert_str_eq(f.store.rec.renew_time, "2026-11-29T12:00:00.000000Z");
	ck_assert_str_eq(le_core_take_transition(&f.a), "a");
	ck_assert_ptr_null(le_core_take_transition(&f.a));
	fx_free(&f);
}
END_TEST

/* Validity is counted from when *we* saw the record change, never from its renewTime:
 * a renewTime in 1970 does not make a freshly observed lease free. */
START_TEST(test_held_lease_valid_from_local_observation)
{
	fixture_t f;
	char *err = NULL;
	fx_init(&f);
	store_put(&f.store, "c", 15, "1970-01-01T00:00:00.000000Z", 4);

	ck_assert(!fx_try(&f, &f.b, &err));
	ck_assert_ptr_null(err); /* held by someone else is not an error */
	ck_assert(!le_core_is_leader(&f.b));
	ck_assert_str_eq(le_core_take_transition(&f.b), "c");

	ck_clk_fake_advance(&f.clk, 14 * SEC);
	ck_assert(!fx_try(&f, &f.b, &err));
	ck_assert_ptr_null(err);
	ck_assert_int_eq(f.store.updates, 0);

	ck_clk_fake_advance(&f.clk, 1 * SEC + 1); /* observed + 15 s is now in the past */
	ck_assert(fx_try(&f, &f.b, &err));
	ck_assert_ptr_null(err);
	ck_assert_str_eq(f.store.rec.holder, "b");
	ck_assert_int_eq(f.store.rec.transitions, 5); /* a takeover counts */
	ck_assert_str_eq(f.store.rec.acquire_time, "2026-11-29T12:00:15.000000Z");
	ck_assert(le_core_is_leader(&f.b));
	ck_assert_str_eq(le_core_take_transition(&f.b), "b");
	fx_free(&f);
}
END_TEST

/* Each renewal observed restarts the wait; the record's own duration is used. */
START_TEST(test_renewals_keep_standby_waiting)
{
	fixture_t f;
	char *err = NULL;
	fx_init(&f);
	ck_assert(fx_try(&f, &f.a, &err)); /* a creates, lease 15 s */

	ck_assert(!fx_try(&f, &f.b, &err)); /* b observes at t=0 */
	ck_clk_fake_advance(&f.clk, 10 * SEC);
	ck_assert(fx_try(&f, &f.a, &err)); /* a renews at t=10 */
	ck_clk_fake_advance(&f.clk, 2 * SEC);
	ck_assert(!fx_try(&f, &f.b, &err)); /* b sees the change at t=12 */
	ck_clk_fake_advance(&f.clk, 14 * SEC);
	ck_assert(!fx_try(&f, &f.b, &err)); /* t=26 < 12 + 15 */
	ck_assert_ptr_null(err);
	ck_clk_fake_advance(&f.clk, 1 * SEC + 1);
	ck_assert(fx_try(&f, &f.b, &err)); /* t=27+ */
	ck_assert_str_eq(f.store.rec.holder, "b");
	ck_assert_int_eq(f.store.rec.transitions, 1);

	/* a's next renewal goes the fast path, conflicts, reads, sees b: not leader. */
	ck_assert(!fx_try(&f, &f.a, &err));
	ck_assert(!le_core_is_leader(&f.a));
	ck_assert_str_eq(f.a.observed.holder, "b");
	free(err);
	fx_free(&f);
}
END_TEST

/* A leader renews with one write (no read), keeping acquireTime and the count. */
START_TEST(test_renew_fast_path)
{
	fixture_t f;
	char *err = NULL;
	fx_init(&f);
	store_put(&f.store, "", 1, "", 7);
	ck_assert(fx_try(&f, &f.a, &err)); /* empty holder: free at once */
	ck_assert_int_eq(f.store.rec.transitions, 8);
	int gets = f.store.gets;

	ck_clk_fake_advance(&f.clk, 2 * SEC);
	ck_assert(fx_try(&f, &f.a, &err));
	ck_assert_ptr_null(err);
	ck_assert_int_eq(f.store.gets, gets); /* no read */
	ck_assert_str_eq(f.store.rec.acquire_time, "2026-11-29T12:00:00.000000Z");
	ck_assert_str_eq(f.store.rec.renew_time, "2026-11-29T12:00:02.000000Z");
	ck_assert_int_eq(f.store.rec.transitions, 8);

	/* Someone else wrote something that does not change the holder: the fast
	 * write conflicts, the careful path reads and renews. */
	store_touch(&f.store);
	ck_clk_fake_advance(&f.clk, 2 * SEC);
	ck_assert(fx_try(&f, &f.a, &err));
	ck_assert_ptr_null(err);
	ck_assert_int_eq(f.store.gets, gets + 1);
	ck_assert_str_eq(f.store.rec.renew_time, "2026-11-29T12:00:04.000000Z");
	ck_assert_str_eq(f.store.rec.acquire_time, "2026-11-29T12:00:00.000000Z");
	ck_assert_int_eq(f.store.rec.transitions, 8);
	fx_free(&f);
}
END_TEST

/* A leader whose own lease lapsed locally (no renewal for a lease duration) reads
 * before writing. */
START_TEST(test_expired_leader_reads_first)
{
	fixture_t f;
	char *err = NULL;
	fx_init(&f);
	ck_assert(fx_try(&f, &f.a, &err));
	int gets = f.store.gets;
	ck_clk_fake_advance(&f.clk, 16 * SEC);
	ck_assert(fx_try(&f, &f.a, &err));
	ck_assert_int_eq(f.store.gets, gets + 1);
	ck_assert_int_eq(f.store.rec.transitions, 0); /* still ours: not a transition */
	fx_free(&f);
}
END_TEST

static void hook_a_takes_over(void *ud)
{
	fixture_t *f = ud;
	char *err = NULL;
	ck_assert(le_core_try_acquire_or_renew(&f->a, fx_deadline(f), &err));
	ck_assert_ptr_null(err);
}

/* Two candidates race for an expired lease: the resourceVersion lets one win. */
START_TEST(test_takeover_race_one_winner)
{
	fixture_t f;
	char *err = NULL;
	fx_init(&f);
	store_put(&f.store, "c", 15, "", 2);
	ck_assert(!fx_try(&f, &f.a, &err));
	ck_assert(!fx_try(&f, &f.b, &err));
	ck_clk_fake_advance(&f.clk, 16 * SEC);
	/* b reads the expired lease; before its write lands, a takes over. */
	f.store.before_update = hook_a_takes_over;
	f.store.before_update_ud = &f;
	ck_assert(!fx_try(&f, &f.b, &err));
	ck_assert_ptr_nonnull(err);
	ck_assert_ptr_nonnull(strstr(err, "updating lease ns/lease"));
	ck_assert_ptr_nonnull(strstr(err, "modified"));
	free(err);
	err = NULL;
	ck_assert_str_eq(f.store.rec.holder, "a");
	ck_assert_int_eq(f.store.rec.transitions, 3); /* counted once */
	ck_assert(le_core_is_leader(&f.a));
	ck_assert(!le_core_is_leader(&f.b));
	/* b's next look sees a's fresh record: held, no error. */
	ck_assert(!fx_try(&f, &f.b, &err));
	ck_assert_ptr_null(err);
	ck_assert_str_eq(f.b.observed.holder, "a");
	fx_free(&f);
}
END_TEST

START_TEST(test_release_and_immediate_takeover)
{
	fixture_t f;
	char *err = NULL;
	fx_init(&f);
	ck_assert(fx_try(&f, &f.a, &err));
	ck_assert(!fx_try(&f, &f.b, &err)); /* b observes a's fresh lease */
	ck_clk_fake_advance(&f.clk, 3 * SEC);
	ck_assert_int_eq(le_core_release(&f.a, fx_deadline(&f), &err), 0);
	ck_assert_ptr_null(err);
	ck_assert_str_eq(f.store.rec.holder, "");
	ck_assert_int_eq(f.store.rec.lease_duration_s, 1);
	ck_assert_str_eq(f.store.rec.renew_time, "2026-11-29T12:00:03.000000Z");
	ck_assert_str_eq(f.store.rec.acquire_time, "2026-11-29T12:00:03.000000Z");
	ck_assert_int_eq(f.store.rec.transitions, 0);
	ck_assert(!le_core_is_leader(&f.a));
	ck_assert_ptr_null(le_core_take_transition(&f.a)); /* "" is not reported */

	/* Releasing again writes nothing. */
	int updates = f.store.updates;
	ck_assert_int_eq(le_core_release(&f.a, fx_deadline(&f), &err), 0);
	ck_assert_int_eq(f.store.updates, updates);

	/* No clock advance: an empty holder is free at once. */
	ck_assert(fx_try(&f, &f.b, &err));
	ck_assert_str_eq(f.store.rec.holder, "b");
	ck_assert_int_eq(f.store.rec.transitions, 1);
	fx_free(&f);
}
END_TEST

/* A release over a stale version reads once and still releases what is ours. */
START_TEST(test_release_after_conflict)
{
	fixture_t f;
	char *err = NULL;
	fx_init(&f);
	ck_assert(fx_try(&f, &f.a, &err));
	store_touch(&f.store);
	int gets = f.store.gets;
	ck_assert_int_eq(le_core_release(&f.a, fx_deadline(&f), &err), 0);
	ck_assert_ptr_null(err);
	ck_assert_str_eq(f.store.rec.holder, "");
	ck_assert_int_eq(f.store.gets, gets + 1);

	/* And a release of a lease someone else took meanwhile writes nothing. */
	fixture_t g;
	fx_init(&g);
	ck_assert(fx_try(&g, &g.a, &err));
	store_put(&g.store, "z", 15, "", 9);
	int updates = g.store.updates;
	ck_assert_int_eq(le_core_release(&g.a, fx_deadline(&g), &err), 0);
	ck_assert_int_eq(g.store.updates, updates + 1); /* the one that conflicted */
	ck_assert_str_eq(g.store.rec.holder, "z");
	fx_free(&g);
	fx_free(&f);
}
END_TEST

START_TEST(test_lock_errors)
{
	fixture_t f;
	char *err = NULL;
	fx_init(&f);
	ck_assert(fx_try(&f, &f.a, &err));
	atomic_store(&((fake_lock_t *)f.la)->down, true);
	ck_clk_fake_advance(&f.clk, 2 * SEC);
	ck_assert(!fx_try(&f, &f.a, &err));
	ck_assert_ptr_nonnull(err);
	ck_assert_str_eq(err, "getting lease ns/lease: connection refused");
	free(err);
	err = NULL;
	/* The failed renew does not change what we believe. */
	ck_assert(le_core_is_leader(&f.a));

	ck_assert_int_eq(le_core_release(&f.a, fx_deadline(&f), &err), -1);
	ck_assert_str_eq(err, "releasing lease ns/lease: connection refused");
	free(err);
	err = NULL;

	/* No time left: no call at all. */
	int calls = f.store.gets + f.store.updates + f.store.creates;
	ck_assert(!le_core_try_acquire_or_renew(&f.b, ck_clk_mono_ns(&f.clk.base), &err));
	ck_assert_ptr_nonnull(strstr(err, "deadline"));
	ck_assert_int_eq(f.store.gets + f.store.updates + f.store.creates, calls);
	free(err);
	fx_free(&f);
}
END_TEST

/* The renew deadline counts from when the last successful write was sent, so slow
 * answers do not stretch it. */
START_TEST(test_renew_deadline_from_send_time)
{
	fixture_t f;
	char *err = NULL;
	fx_init(&f);
	f.store.clock = &f.clk;
	f.store.latency_ns = 3 * SEC;
	uint64_t t0 = ck_clk_mono_ns(&f.clk.base);
	ck_assert(fx_try(&f, &f.a, &err)); /* get (+3 s) then create (+3 s) */
	ck_assert_uint_eq(f.a.last_write_sent, t0 + 3 * SEC);
	ck_assert_uint_eq(f.a.observed_mono, t0 + 6 * SEC);
	ck_assert_uint_eq(le_core_renew_deadline(&f.a, 10 * SEC), t0 + 13 * SEC);
	fx_free(&f);
}
END_TEST

START_TEST(test_transition_reports)
{
	fixture_t f;
	char *err = NULL;
	fx_init(&f);
	ck_assert_ptr_null(le_core_take_transition(&f.b)); /* nothing observed */
	store_put(&f.store, "c", 15, "", 0);
	fx_try(&f, &f.b, &err);
	ck_assert_str_eq(le_core_take_transition(&f.b), "c");
	fx_try(&f, &f.b, &err);
	ck_assert_ptr_null(le_core_take_transition(&f.b));
	store_put(&f.store, "", 1, "", 0);
	ck_clk_fake_advance(&f.clk, SEC);
	store_touch(&f.store);
	ck_assert(fx_try(&f, &f.b, &err)); /* free: b takes it */
	ck_assert_str_eq(le_core_take_transition(&f.b), "b");
	ck_assert_ptr_null(err);
	fx_free(&f);
}
END_TEST

START_TEST(test_jitter)
{
	ck_assert_uint_eq(le_jitter(2 * SEC, 0), 2 * SEC);
	ck_assert_uint_eq(le_jitter(2 * SEC, 0.5), 2 * SEC + 1200 * CK_NS_PER_MS);
	ck_assert_uint_lt(le_jitter(2 * SEC, 1.0), 2 * SEC + 2400 * CK_NS_PER_MS);
	ck_assert_uint_ge(le_jitter(2 * SEC, 0.999), 2 * SEC + 2397 * CK_NS_PER_MS);
	for (int i = 0; i < 1000; i++) {
		uint64_t j = le_jitter(1000, ck_rand_unit());
		ck_assert(j >= 1000 && j < 2200);
	}
}
END_TEST

/* ---------- configuration helpers ---------- */

static ck_le_config_t good_config(void)
{
	ck_le_config_t c;
	memset(&c, 0, sizeof(c));
	c.lease_namespace = "kube-system";
	c.lease_name = "sample-controller";
	c.identity = "host_0123";
	return c;
}

static void expect_invalid(const ck_le_config_t *c, const char *needle)
{
	char *err = NULL;
	ck_assert_int_eq(ck_le_validate(c, &err), -1);
	ck_assert_ptr_nonnull(err);
	if (strstr(err, needle) == NULL)
		ck_abort_msg("error \"%s\" lacks \"%s\"", err, needle);
	free(err);
}

START_TEST(test_validate)
{
	char *err = NULL;
	ck_le_config_t c = good_config();
	ck_assert_int_eq(ck_le_validate(&c, &err), 0); /* defaults 15 / 10 / 2 */
	c.lease_duration_ms = 3000;
	c.renew_deadline_ms = 2000;
	c.retry_period_ms = 500;
	ck_assert_int_eq(ck_le_validate(&c, &err), 0);
	ck_assert_ptr_null(err);

	c.renew_deadline_ms = 3000;
	expect_invalid(&c, "--leader-elect-lease-duration=3s must be greater than "
	                   "--leader-elect-renew-deadline=3s");
	c.lease_duration_ms = 2500;
	c.renew_deadline_ms = 2200;
	expect_invalid(&c,
	               "--leader-elect-lease-duration=2.5s must be greater than "
	               "--leader-elect-renew-deadline=2.2s (the Lease records whole seconds: 2s)");
	c.renew_deadline_ms = 1900;
	ck_assert_int_eq(ck_le_validate(&c, &err), 0);
	c.lease_duration_ms = 15000;
	c.renew_deadline_ms = 2400;
	c.retry_period_ms = 2000; /* 2.4 s is exactly 1.2 x 2 s: not greater */
	expect_invalid(&c, "--leader-elect-renew-deadline=2.4s must be greater than 1.2 x "
	                   "--leader-elect-retry-period=2s");
	c.renew_deadline_ms = 2401;
	ck_assert_int_eq(ck_le_validate(&c, &err), 0);
	c.renew_deadline_ms = 0; /* default 10 s */
	c.retry_period_ms = 9000;
	expect_invalid(&c, "1.2 x --leader-elect-retry-period=9s");
	c.retry_period_ms = 0;
	c.lease_duration_ms = 800;
	c.renew_deadline_ms = 500;
	c.retry_period_ms = 100;
	expect_invalid(&c, "at least 1s");

	c = good_config();
	c.lease_namespace = "";
	expect_invalid(&c, "--leader-elect-resource-namespace");
	c.lease_namespace = "Kube_System";
	expect_invalid(&c, "not a valid namespace");
	c = good_config();
	c.lease_name = NULL;
	expect_invalid(&c, "--leader-elect-resource-name");
	c.lease_name = "-bad-";
	expect_invalid(&c, "not a valid object name");
	c.lease_name = "a..b";
	expect_invalid(&c, "not a valid object name");
	c.lease_name = "sample-controller.k8s.io";
	ck_assert_int_eq(ck_le_validate(&c, &err), 0);
	c.identity = "";
	expect_invalid(&c, "identity");
}
END_TEST

START_TEST(test_default_identity)
{
	char host[256] = "";
	gethostname(host, sizeof(host));
	char *a = ck_le_default_identity(), *b = ck_le_default_identity();
	size_t hl = strlen(host);
	ck_assert_int_eq(strncmp(a, host, hl), 0);
	ck_assert_int_eq(a[hl], '_');
	ck_assert_uint_eq(strlen(a + hl + 1), 16);
	ck_assert_uint_eq(strspn(a + hl + 1, "0123456789abcdef"), 16);
	ck_assert_str_ne(a, b);
	free(a);
	free(b);
}
END_TEST

static void write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");
	ck_assert_ptr_nonnull(fp);
	fputs(text, fp);
	fclose(fp);
}

START_TEST(test_default_namespace)
{
	char dir[] = "/tmp/le-sa-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char *path = ck_xasprintf("%s/namespace", dir), *err = NULL;

	char *ns = ck_le_default_namespace(dir, &err);
	ck_assert_ptr_null(ns);
	ck_assert_ptr_nonnull(strstr(err, path));
	ck_assert_ptr_nonnull(strstr(err, "set --leader-elect-resource-namespace"));
	free(err);
	err = NULL;

	write_file(path, "  \n");
	ck_assert_ptr_null(ck_le_default_namespace(dir, &err));
	ck_assert_ptr_nonnull(strstr(err, "is empty"));
	free(err);
	err = NULL;

	write_file(path, "team-a\n");
	ns = ck_le_default_namespace(dir, &err);
	ck_assert_str_eq(ns, "team-a");
	free(ns);

	/* NULL: $CKUBE_SERVICEACCOUNT_DIR. */
	setenv("CKUBE_SERVICEACCOUNT_DIR", dir, 1);
	ns = ck_le_default_namespace(NULL, &err);
	unsetenv("CKUBE_SERVICEACCOUNT_DIR");
	ck_assert_ptr_null(err);
	ck_assert_str_eq(ns, "team-a");
	free(ns);

	unlink(path);
	rmdir(dir);
	free(path);
}
END_TEST

/* ---------- the elector thread on the in-memory lock, real time ---------- */

/* Short timings; validity needs whole seconds, so the lease is 1 s. */
#define LEASE_MS 1000u
#define RENEW_MS 600u
#define RETRY_MS 100u

typedef struct shared_log {
	pthread_mutex_t mu;
	char text[4096]; /* "a+ b- ..." in order: + started, - stopped */
	_Atomic int seq;
} shared_log_t;

typedef struct cb_state {
	const char *name;
	shared_log_t *log;
	_Atomic int started, stopped, new_leader;
	_Atomic int started_seq, stopped_seq;
	_Atomic bool leader_at_start; /* ck_le_is_leader() seen true inside the callback */
	ck_le_t *_Atomic self;
	char events[1024];
	pthread_mutex_t mu;
} cb_state_t;

static void log_add(shared_log_t *l, const char *name, char what)
{
	pthread_mutex_lock(&l->mu);
	size_t n = strlen(l->text);
	snprintf(l->text + n, sizeof(l->text) - n, "%s%c ", name, what);
	pthread_mutex_unlock(&l->mu);
}

/* Compares the shared log under its lock (the electors may still be running). */
static bool log_is(shared_log_t *l, const char *want)
{
	pthread_mutex_lock(&l->mu);
	bool eq = strcmp(l->text, want) == 0;
	if (!eq)
		fprintf(stderr, "log is \"%s\", want \"%s\"\n", l->text, want);
	pthread_mutex_unlock(&l->mu);
	return eq;
}

static void sleep_ms(unsigned ms);

static void cb_started(void *ud)
{
	cb_state_t *s = ud;
	atomic_store(&s->started_seq, atomic_fetch_add(&s->log->seq, 1) + 1);
	/* The elector may win before start_elector() stored its handle (a loaded
	 * machine): wait for it rather than skip the check. */
	ck_le_t *self = atomic_load(&s->self);
	for (int i = 0; self == NULL && i < 500; i++) {
		sleep_ms(2);
		self = atomic_load(&s->self);
	}
	if (self != NULL)
		atomic_store(&s->leader_at_start, ck_le_is_leader(self));
	atomic_fetch_add(&s->started, 1);
	log_add(s->log, s->name, '+');
}

static void cb_stopped(void *ud)
{
	cb_state_t *s = ud;
	atomic_store(&s->stopped_seq, atomic_fetch_add(&s->log->seq, 1) + 1);
	atomic_fetch_add(&s->stopped, 1);
	log_add(s->log, s->name, '-');
}

static void cb_new_leader(void *ud, const char *id)
{
	cb_state_t *s = ud;
	ck_assert(id[0] != '\0');
	atomic_fetch_add(&s->new_leader, 1);
}

static void cb_event(void *ud, const char *reason, const char *msg)
{
	cb_state_t *s = ud;
	ck_assert_str_eq(reason, "LeaderElection");
	pthread_mutex_lock(&s->mu);
	size_t n = strlen(s->events);
	snprintf(s->events + n, sizeof(s->events) - n, "%s|", msg);
	pthread_mutex_unlock(&s->mu);
}

static void cb_init(cb_state_t *s, const char *name, shared_log_t *log)
{
	memset(s, 0, sizeof(*s));
	s->name = name;
	s->log = log;
	pthread_mutex_init(&s->mu, NULL);
}

static ck_le_t *start_elector(fake_store_t *store, le_lock_t **lockp, cb_state_t *s, bool release)
{
	ck_le_config_t c;
	memset(&c, 0, sizeof(c));
	c.lease_namespace = "ns";
	c.lease_name = "lease";
	c.identity = s->name;
	c.lease_duration_ms = LEASE_MS;
	c.renew_deadline_ms = RENEW_MS;
	c.retry_period_ms = RETRY_MS;
	c.release_on_cancel = release;
	c.on_started_leading = cb_started;
	c.on_stopped_leading = cb_stopped;
	c.on_new_leader = cb_new_leader;
	c.on_event = cb_event;
	c.ud = s;
	char *err = NULL;
	le_lock_t *lock = fake_lock_new(store);
	if (lockp != NULL)
		*lockp = lock;
	ck_le_t *e = le_start_with_lock(lock, &c, &err);
	ck_assert_msg(e != NULL, "le_start: %s", err);
	atomic_store(&s->self, e);
	return e;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Waits (generously: the machine may be slow) until *flag >= want. */
static bool wait_for(_Atomic int *flag, int want)
{
	for (int i = 0; i < 3000; i++) {
		if (atomic_load(flag) >= want)
			return true;
		sleep_ms(10);
	}
	return false;
}

static void log_init(shared_log_t *l)
{
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->mu, NULL);
}

/* A gate the elector's next update waits at, to model an elector that hangs. */
typedef struct gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool entered, open;
} gate_t;

static void gate_wait(void *ud)
{
	gate_t *g = ud;
	pthread_mutex_lock(&g->mu);
	g->entered = true;
	pthread_cond_broadcast(&g->cv);
	while (!g->open)
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
}

/* client-go's HealthzAdaptor: a leader whose elector has not renewed for longer than
 * the lease duration plus the tolerance is unhealthy; anyone else is healthy. */
START_TEST(test_healthz_check_stuck_leader)
{
	fake_store_t store;
	shared_log_t log;
	cb_state_t sa;
	ck_clk_fake_t clk;
	gate_t g = {.entered = false, .open = false};
	pthread_mutex_init(&g.mu, NULL);
	pthread_cond_init(&g.cv, NULL);
	store_init(&store);
	log_init(&log);
	cb_init(&sa, "a", &log);
	ck_clk_fake_init(&clk, 1000 * SEC, 0);
	/* The first renewal (an update; the lease is created) hangs at the gate. */
	store.before_update = gate_wait;
	store.before_update_ud = &g;

	ck_assert_int_eq(ck_le_check(NULL, 0, NULL), 0);
	ck_le_config_t c = {.lease_namespace = "ns",
	                    .lease_name = "lease",
	                    .identity = "a",
	                    .lease_duration_ms = LEASE_MS,
	                    .renew_deadline_ms = RENEW_MS,
	                    .retry_period_ms = RETRY_MS,
	                    .clock = &clk.base,
	                    .on_started_leading = cb_started,
	                    .on_stopped_leading = cb_stopped,
	                    .ud = &sa};
	char *err = NULL;
	ck_le_t *e = le_start_with_lock(fake_lock_new(&store), &c, &err);
	ck_assert_msg(e != NULL, "le_start: %s", err);
	atomic_store(&sa.self, e);
	ck_assert(wait_for(&sa.started, 1));
	pthread_mutex_lock(&g.mu);
	while (!g.entered)
		pthread_cond_wait(&g.cv, &g.mu);
	pthread_mutex_unlock(&g.mu);
	/* Stuck inside its renewal, but within lease + tolerance: healthy. */
	char *why = NULL;
	ck_assert_int_eq(ck_le_check(e, 20000, &why), 0);
	ck_clk_fake_advance(&clk, (uint64_t)LEASE_MS * CK_NS_PER_MS + 20 * SEC);
	ck_assert_int_eq(ck_le_check(e, 20000, &why), 0);
	ck_clk_fake_advance(&clk, CK_NS_PER_MS + 1);
	ck_assert_int_eq(ck_le_check(e, 20000, &why), -1);
	ck_assert_ptr_nonnull(why);
	ck_assert_msg(strstr(why, "failed election to renew leadership on lease ns/lease") != NULL,
	              "%s", why);
	free(why);
	pthread_mutex_lock(&g.mu);
	g.open = true;
	pthread_cond_broadcast(&g.cv);
	pthread_mutex_unlock(&g.mu);
	ck_le_stop(e);
	store_free(&store);
	pthread_mutex_destroy(&g.mu);
	pthread_cond_destroy(&g.cv);
}
END_TEST

START_TEST(test_thread_one_leader_then_release)
{
	fake_store_t store;
	shared_log_t log;
	cb_state_t sa, sb;
	store_init(&store);
	log_init(&log);
	cb_init(&sa, "a", &log);
	cb_init(&sb, "b", &log);

	ck_le_t *a = start_elector(&store, NULL, &sa, true);
	ck_assert(wait_for(&sa.started, 1));
	ck_le_t *b = start_elector(&store, NULL, &sb, true);
	ck_assert(wait_for(&sb.new_leader, 1)); /* b saw a */
	sleep_ms(3 * LEASE_MS);                 /* a keeps renewing: b never leads */
	ck_assert(ck_le_is_leader(a));
	ck_assert(!ck_le_is_leader(b));
	ck_assert(atomic_load(&sa.leader_at_start));
	ck_assert_int_eq(atomic_load(&sb.started), 0);
	char *h = ck_le_leader(b);
	ck_assert_str_eq(h, "a");
	free(h);

	ck_le_stop(a); /* release */
	ck_assert_int_eq(atomic_load(&sa.stopped), 1);
	ck_assert(wait_for(&sb.started, 1));
	ck_assert(ck_le_is_leader(b));
	le_record_t r;
	le_record_init(&r);
	store_snapshot(&store, &r);
	ck_assert_str_eq(r.holder, "b");
	ck_assert_int_eq(r.transitions, 1);
	le_record_free(&r);
	ck_assert_str_eq(sa.events, "a became leader|a stopped leading|");
	ck_assert(log_is(&log, "a+ a- b+ "));

	ck_le_stop(b);
	ck_assert_int_eq(atomic_load(&sb.stopped), 1);
	ck_assert_str_eq(sb.events, "b became leader|b stopped leading|");
	store_free(&store);
}
END_TEST

/* Stopped without release: the standby waits for the lease to lapse. */
START_TEST(test_thread_takeover_after_lease)
{
	fake_store_t store;
	shared_log_t log;
	cb_state_t sa, sb;
	store_init(&store);
	log_init(&log);
	cb_init(&sa, "a", &log);
	cb_init(&sb, "b", &log);

	ck_le_t *a = start_elector(&store, NULL, &sa, false);
	ck_assert(wait_for(&sa.started, 1));
	ck_le_t *b = start_elector(&store, NULL, &sb, false);
	ck_assert(wait_for(&sb.new_leader, 1));
	uint64_t stop_ms = now_ms();
	ck_le_stop(a);
	char *h = store_holder(&store);
	ck_assert_str_eq(h, "a"); /* not released */
	free(h);
	ck_assert(wait_for(&sb.started, 1));
	/* Safety, not speed: b may not take over before a's last renewal (about one
	 * retry period before the stop, more on a loaded machine) plus the lease
	 * duration; half a lease leaves room for scheduling delays. */
	ck_assert_uint_ge(now_ms() - stop_ms, LEASE_MS / 2);
	ck_le_stop(b);
	store_free(&store);
}
END_TEST

/* The leader's network is cut: it stops leading before the standby may take over,
 * and never leads again in this run. */
START_TEST(test_thread_network_cut)
{
	fake_store_t store;
	shared_log_t log;
	cb_state_t sa, sb;
	le_lock_t *la = NULL;
	store_init(&store);
	log_init(&log);
	cb_init(&sa, "a", &log);
	cb_init(&sb, "b", &log);

	ck_le_t *a = start_elector(&store, &la, &sa, true);
	ck_assert(wait_for(&sa.started, 1));
	ck_le_t *b = start_elector(&store, NULL, &sb, true);
	ck_assert(wait_for(&sb.new_leader, 1));

	atomic_store(&((fake_lock_t *)la)->down, true);
	ck_assert(wait_for(&sa.stopped, 1));
	ck_assert(!ck_le_is_leader(a));
	ck_assert(wait_for(&sb.started, 1));
	ck_assert_int_lt(atomic_load(&sa.stopped_seq), atomic_load(&sb.started_seq));
	ck_assert(log_is(&log, "a+ a- b+ "));

	atomic_store(&((fake_lock_t *)la)->down, false);
	sleep_ms(3 * LEASE_MS);
	ck_le_stop(b); /* releases */
	sleep_ms(3 * LEASE_MS);
	ck_assert_int_eq(atomic_load(&sa.started), 1); /* no re-acquire */
	ck_assert(!ck_le_is_leader(a));
	ck_le_stop(a);
	ck_assert_int_eq(atomic_load(&sa.stopped), 1); /* not twice */
	ck_assert_str_eq(sa.events, "a became leader|a stopped leading|");
	store_free(&store);
}
END_TEST

/* Stopping a standby: prompt, no callbacks but on_new_leader, no write. */
START_TEST(test_thread_stop_standby)
{
	fake_store_t store;
	shared_log_t log;
	cb_state_t sb;
	store_init(&store);
	log_init(&log);
	cb_init(&sb, "b", &log);
	store_put(&store, "c", 3600, "", 0);
	ck_le_t *b = start_elector(&store, NULL, &sb, true);
	ck_assert(wait_for(&sb.new_leader, 1));
	int updates = store_updates(&store);
	ck_le_stop(b);
	ck_assert_int_eq(store_updates(&store), updates);
	ck_assert_int_eq(atomic_load(&sb.started), 0);
	ck_assert_int_eq(atomic_load(&sb.stopped), 0);
	ck_assert_str_eq(sb.events, "");
	store_free(&store);
}
END_TEST

START_TEST(test_start_invalid)
{
	fake_store_t store;
	store_init(&store);
	ck_le_config_t c = good_config();
	c.renew_deadline_ms = 20000;
	char *err = NULL;
	ck_assert_ptr_null(le_start_with_lock(fake_lock_new(&store), &c, &err));
	ck_assert_ptr_nonnull(strstr(err, "must be greater than"));
	free(err);
	ck_le_stop(NULL);
	store_free(&store);
}
END_TEST

Suite *suite_leaderelection(void)
{
	Suite *s = suite_create("leaderelection");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_create_when_missing);
	tcase_add_test(tc, test_held_lease_valid_from_local_observation);
	tcase_add_test(tc, test_renewals_keep_standby_waiting);
	tcase_add_test(tc, test_renew_fast_path);
	tcase_add_test(tc, test_expired_leader_reads_first);
	tcase_add_test(tc, test_takeover_race_one_winner);
	tcase_add_test(tc, test_release_and_immediate_takeover);
	tcase_add_test(tc, test_release_after_conflict);
	tcase_add_test(tc, test_lock_errors);
	tcase_add_test(tc, test_renew_deadline_from_send_time);
	tcase_add_test(tc, test_transition_reports);
	tcase_add_test(tc, test_jitter);
	suite_add_tcase(s, tc);

	tc = tcase_create("config");
	tcase_add_test(tc, test_validate);
	tcase_add_test(tc, test_default_identity);
	tcase_add_test(tc, test_default_namespace);
	suite_add_tcase(s, tc);

	tc = tcase_create("thread");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_thread_one_leader_then_release);
	tcase_add_test(tc, test_healthz_check_stuck_leader);
	tcase_add_test(tc, test_thread_takeover_after_lease);
	tcase_add_test(tc, test_thread_network_cut);
	tcase_add_test(tc, test_thread_stop_standby);
	tcase_add_test(tc, test_start_invalid);
	suite_add_tcase(s, tc);
	return s;
}
