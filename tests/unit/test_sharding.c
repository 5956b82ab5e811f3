/*
 * sharding: replicas splitting buckets on Leases, on the in-memory fake API server.
 * Several coordinators share one fake (one client on the env's loop, each
 * coordinator with its own identity and its own Lease locks), real clock and short
 * timings (lease 2 s, renew 1.5 s, retry 100 ms).
 *
 * The overlap oracle, by ranges (they move with the boundaries): on_acquire
 * records the member's range for the bucket and counts an overlap when another
 * member works on an intersecting range; on_release sleeps (a drain) then drops
 * it. Since a new owner's on_acquire follows the old owner's release write, which
 * follows its on_release, an intersection is two replicas working on one hash at
 * once.
 *
 * The boundaries and the epoch rule are also tested as the pure functions of
 * pkg/sharding/sharding_internal.h.
 */
#include <ckube/base.h>
#include <ckube/client.h>
#include <ckube/fake.h>
#include <ckube/json.h>
#include <ckube/kinds.h>
#include <ckube/sharding.h>
#include <ckube/types.h>

#include "pkg/sharding/sharding_internal.h"

#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NB       16u
#define LEASE_MS 2000u
#define MAXM     5

typedef struct oracle {
	pthread_mutex_t mu;
	bool active[MAXM][NB]; /* member i works on bucket b, range[i][b] */
	ck_shard_range_t range[MAXM][NB];
	int overlaps;
	int acquires, releases;
	int bucket_acquires[NB], bucket_releases[NB];
	_Atomic uint32_t drain_ms;
	char last_error[512];
} oracle_t;

typedef struct member {
	oracle_t *o;
	int idx;
	char id[16];
	ck_sharding_t *s;
} member_t;

typedef struct world {
	ck_fake_t *fake;
	ck_fake_env_t *env;
	oracle_t o;
	member_t m[MAXM];
} world_t;

/* Whether [a) and [b) intersect; end 0 is 2^64. */
static bool intersects(ck_shard_range_t a, ck_shard_range_t b)
{
	unsigned __int128 ae = a.end ? a.end : (unsigned __int128)1 << 64;
	unsigned __int128 be = b.end ? b.end : (unsigned __int128)1 << 64;
	return a.start < be && b.start < ae;
}

static void on_acquire(void *ud, uint32_t b, ck_shard_range_t r)
{
	member_t *m = ud;
	oracle_t *o = m->o;
	pthread_mutex_lock(&o->mu);
	for (int i = 0; i < MAXM; i++)
		for (uint32_t c = 0; c < NB; c++)
			if (i != m->idx && o->active[i][c] && intersects(o->range[i][c], r)) {
				o->overlaps++;
				fprintf(stderr,
				        "sharding oracle: %s acquired bucket %u [%016" PRIx64
				        ", %016" PRIx64
				        ") while member %d works on bucket %u [%016" PRIx64
				        ", %016" PRIx64 ")\n",
				        m->id, b, r.start, r.end, i, c, o->range[i][c].start,
				        o->range[i][c].end);
			}
	o->active[m->idx][b] = true;
	o->range[m->idx][b] = r;
	o->acquires++;
	o->bucket_acquires[b]++;
	pthread_mutex_unlock(&o->mu);
}

static void on_release(void *ud, uint32_t b)
{
	member_t *m = ud;
	/* In-flight reconciles finishing: the new owner must not start meanwhile. */
	usleep(atomic_load(&m->o->drain_ms) * 1000);
	pthread_mutex_lock(&m->o->mu);
	m->o->active[m->idx][b] = false;
	m->o->releases++;
	m->o->bucket_releases[b]++;
	pthread_mutex_unlock(&m->o->mu);
}

static void on_log(void *ud, ck_le_log_level_t level, const char *msg)
{
	member_t *m = ud;
	if (level != CK_LE_LOG_ERROR)
		return;
	pthread_mutex_lock(&m->o->mu);
	snprintf(m->o->last_error, sizeof(m->o->last_error), "%s", msg);
	pthread_mutex_unlock(&m->o->mu);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void world_init(world_t *w)
{
	char *err = NULL;
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->o.mu, NULL);
	atomic_init(&w->o.drain_ms, 50);
	w->fake = ck_fake_new(NULL);
	ck_fake_register(w->fake, &ck_type_lease);
	ck_fake_register(w->fake, &ck_type_namespace);
	w->env = ck_fake_env_new(w->fake, NULL, &err);
	ck_assert_msg(w->env != NULL, "%s", err ? err : "");
}

static ck_sharding_config_t config(member_t *m, bool release)
{
	ck_sharding_config_t c = {.lease_namespace = "kube-system",
	                          .group = "foo-controller",
	                          .identity = m->id,
	                          .buckets = NB,
	                          .lease_duration_ms = LEASE_MS,
	                          .renew_deadline_ms = 1500,
	                          .retry_period_ms = 100,
	                          .release_on_stop = release,
	                          .on_acquire = on_acquire,
	                          .on_release = on_release,
	                          .on_log = on_log,
	                          .rebalance_every = 1,
	                          .ud = m};
	return c;
}

static void join(world_t *w, int i, bool release)
{
	char *err = NULL;
	member_t *m = &w->m[i];
	m->o = &w->o;
	m->idx = i;
	snprintf(m->id, sizeof(m->id), "replica-%c", 'a' + i);
	ck_sharding_config_t c = config(m, release);
	m->s = ck_sharding_start(ck_fake_env_client(w->env), &c, &err);
	ck_assert_msg(m->s != NULL, "%s", err ? err : "");
}

static void leave(world_t *w, int i)
{
	ck_sharding_stop(w->m[i].s);
	w->m[i].s = NULL;
}

static void world_free(world_t *w)
{
	for (int i = 0; i < MAXM; i++)
		if (w->m[i].s != NULL)
			leave(w, i);
	ck_fake_env_free(w->env);
	ck_fake_free(w->fake);
	pthread_mutex_destroy(&w->o.mu);
}

/* Whether the running members own every bucket, each once, each between
 * floor(B / n) and ceil(B / n), and see n members. */
static bool converged(world_t *w, uint32_t n)
{
	uint32_t total = 0, fair = (NB + n - 1) / n;
	for (uint32_t b = 0; b < NB; b++) {
		int owners = 0;
		for (int i = 0; i < MAXM; i++)
			owners += w->m[i].s != NULL && ck_sharding_owns_bucket(w->m[i].s, b);
		if (owners != 1)
			return false;
	}
	for (int i = 0; i < MAXM; i++) {
		if (w->m[i].s == NULL)
			continue;
		uint32_t c = ck_sharding_owned_count(w->m[i].s);
		if (c > fair || c < NB / n || ck_sharding_members(w->m[i].s) != n)
			return false;
		total += c;
	}
	return total == NB;
}

/*
 * Whether every running member's callbacks have caught up with its owned flags.
 * A member sets a bucket's flag before it calls on_acquire (and clears it before
 * on_release), so converged() can hold while an on_acquire is still to come: a
 * test that counts callbacks waits for this too (it once read 15 acquires of 16).
 */
static bool observed(world_t *w)
{
	bool ok = true;
	pthread_mutex_lock(&w->o.mu);
	for (int i = 0; i < MAXM && ok; i++)
		if (w->m[i].s != NULL)
			for (uint32_t b = 0; b < NB && ok; b++)
				ok = w->o.active[w->m[i].idx][b] ==
				     ck_sharding_owns_bucket(w->m[i].s, b);
	pthread_mutex_unlock(&w->o.mu);
	return ok;
}

static void wait_observed(world_t *w, uint64_t limit_ms)
{
	uint64_t t0 = mono_ms();
	while (!observed(w)) {
		ck_assert_msg(mono_ms() - t0 < limit_ms,
		              "callbacks behind the owned flags after %llu ms",
		              (unsigned long long)limit_ms);
		usleep(10 * 1000);
	}
}

/* Milliseconds until converged(n), or fails after limit_ms. */
static uint64_t wait_converged(world_t *w, uint32_t n, uint64_t limit_ms)
{
	uint64_t t0 = mono_ms();
	while (!converged(w, n)) {
		ck_assert_msg(mono_ms() - t0 < limit_ms, "not converged on %u members in %llu ms",
		              n, (unsigned long long)limit_ms);
		usleep(10 * 1000);
	}
	return mono_ms() - t0;
}

/* The fake's Lease of bucket b names the member that owns it. */
static void check_leases(world_t *w)
{
	for (uint32_t b = 0; b < NB; b++) {
		char name[64];
		snprintf(name, sizeof(name), "foo-controller-bucket-%u", b);
		ck_json_doc_t *doc = ck_fake_get(w->fake, &ck_type_lease, "kube-system", name);
		ck_assert_msg(doc != NULL, "no Lease %s", name);
		const char *holder =
		    ck_json_str(ck_json_get(ck_json_root(doc), CK_PATH("spec", "holderIdentity")));
		int owner = -1;
		for (int i = 0; i < MAXM; i++)
			if (w->m[i].s != NULL && ck_sharding_owns_bucket(w->m[i].s, b))
				owner = i;
		ck_assert_int_ge(owner, 0);
		ck_assert_msg(holder != NULL && strcmp(holder, w->m[owner].id) == 0,
		              "Lease %s held by %s, owned by %s", name, holder ? holder : "(none)",
		              w->m[owner].id);
		ck_json_doc_free(doc);
	}
}

static int overlaps(world_t *w)
{
	pthread_mutex_lock(&w->o.mu);
	int n = w->o.overlaps;
	pthread_mutex_unlock(&w->o.mu);
	return n;
}

START_TEST(test_validate)
{
	member_t m = {.id = "a"};
	char *err = NULL;
	ck_sharding_config_t c = config(&m, true);
	ck_assert_int_eq(ck_sharding_validate(&c, &err), 0);

	c.group = "";
	ck_assert_int_eq(ck_sharding_validate(&c, &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "group"));
	free(err);
	err = NULL;

	c = config(&m, true);
	c.group = "Foo_Controller";
	ck_assert_int_eq(ck_sharding_validate(&c, &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "Foo_Controller-member-a"));
	free(err);
	err = NULL;

	c = config(&m, true);
	c.buckets = CK_SHARDING_MAX_BUCKETS + 1;
	ck_assert_int_eq(ck_sharding_validate(&c, &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "1025 buckets"));
	free(err);
	err = NULL;

	c = config(&m, true);
	c.renew_deadline_ms = LEASE_MS;
	ck_assert_int_eq(ck_sharding_validate(&c, &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "must be greater than"));
	free(err);
	err = NULL;

	/* An identity with characters a name cannot carry still gives a valid name. */
	c = config(&m, true);
	c.identity = "Host_0123abcd";
	ck_assert_int_eq(ck_sharding_validate(&c, &err), 0);
	ck_assert_ptr_null(ck_sharding_start(NULL, &(ck_sharding_config_t){0}, &err));
	ck_assert_ptr_nonnull(err);
	free(err);
}
END_TEST

START_TEST(test_one_member_owns_all)
{
	world_t w;
	world_init(&w);
	join(&w, 0, true);
	ck_sharding_t *s = w.m[0].s;
	wait_converged(&w, 1, 5000);
	check_leases(&w);

	/* Equal ranges that tile the hash space, and the lookups agree with them. */
	ck_assert_uint_eq(ck_sharding_buckets(s), NB);
	for (uint32_t b = 0; b < NB; b++) {
		ck_shard_range_t r = ck_sharding_bucket_range(s, b);
		ck_assert_uint_eq(r.start, (uint64_t)b << 60);
		ck_assert_uint_eq(r.end, b + 1 < NB ? (uint64_t)(b + 1) << 60 : 0);
		ck_assert_uint_eq(ck_sharding_bucket_of(s, r.start), b);
		ck_assert_uint_eq(ck_sharding_bucket_of(s, r.start + ((1ull << 60) - 1)), b);
	}
	ck_assert(ck_sharding_owns_key(s, "team-a/foo"));
	ck_assert(ck_sharding_owns_key(s, "cluster-scoped"));
	ck_shard_selector_t *sel = ck_sharding_selector(s);
	ck_assert_str_eq(ck_shard_selector_string(sel),
	                 "shardRange(object.metadata.namespace, '0x0000000000000000', "
	                 "'0x10000000000000000')");
	ck_shard_selector_free(sel);

	leave(&w, 0);
	ck_assert_int_eq(overlaps(&w), 0);
	ck_assert_int_eq(w.o.acquires, (int)NB);
	ck_assert_int_eq(w.o.releases, (int)NB);
	/* Released on stop: every Lease free. */
	ck_json_doc_t *doc =
	    ck_fake_get(w.fake, &ck_type_lease, "kube-system", "foo-controller-bucket-3");
	ck_assert_str_eq(
	    ck_json_str(ck_json_get(ck_json_root(doc), CK_PATH("spec", "holderIdentity"))), "");
	ck_json_doc_free(doc);
	world_free(&w);
}
END_TEST

START_TEST(test_three_converge_then_stop_hands_over)
{
	world_t w;
	world_init(&w);
	for (int i = 0; i < 3; i++)
		join(&w, i, true);
	uint64_t ms = wait_converged(&w, 3, 10000);
	printf("sharding: 3 members own %u buckets (%u/%u/%u) after %llu ms\n", NB,
	       ck_sharding_owned_count(w.m[0].s), ck_sharding_owned_count(w.m[1].s),
	       ck_sharding_owned_count(w.m[2].s), (unsigned long long)ms);
	check_leases(&w);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_ge(ck_sharding_owned_count(w.m[i].s), 5);
		ck_assert_uint_le(ck_sharding_owned_count(w.m[i].s), 6);
		/* The selector of the owned buckets (adjacent ones merged) matches
		 * exactly the hashes owned, at every bucket edge and in between. */
		ck_shard_selector_t *sel = ck_sharding_selector(w.m[i].s);
		ck_assert_ptr_nonnull(sel);
		size_t nr;
		ck_assert_uint_le(ck_shard_selector_ranges(sel, &nr) != NULL ? nr : 99, 6);
		for (uint32_t b = 0; b < NB; b++) {
			uint64_t h0 = (uint64_t)b << 60;
			uint64_t hs[3] = {h0, h0 + (1ull << 59), h0 + ((1ull << 60) - 1)};
			for (int k = 0; k < 3; k++)
				ck_assert_int_eq(ck_shard_selector_match_hash(sel, hs[k]),
				                 ck_sharding_owns_hash(w.m[i].s, hs[k]));
		}
		ck_shard_selector_free(sel);
	}
	/* A key's namespace picks its bucket: exactly one member owns it, and the
	 * same one owns the object (its namespace; "" when cluster-scoped). */
	const char *keys[] = {"team-a/foo", "team-b/foo", "app-1/x", "app-30/y", "node-1"};
	const char *nss[] = {"team-a", "team-b", "app-1", "app-30", ""};
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		int owners = 0;
		ck_obj_builder_t *ob = ck_obj_builder_new(&ck_type_configmap);
		ck_obj_builder_set_meta(ob, "namespace", nss[k], strlen(nss[k]));
		ck_obj_builder_set_meta(ob, "name", "x", 1);
		ck_obj_t *o = ck_obj_builder_finish(ob);
		ck_obj_builder_free(ob);
		for (int i = 0; i < 3; i++) {
			owners += ck_sharding_owns_key(w.m[i].s, keys[k]);
			ck_assert_int_eq(ck_sharding_owns_obj(w.m[i].s, o),
			                 ck_sharding_owns_key(w.m[i].s, keys[k]));
		}
		ck_obj_unref(o);
		ck_assert_msg(owners == 1, "%s owned by %d members", keys[k], owners);
	}

	/* A stop hands over: the others take the buckets long before the Leases
	 * (2 s) could have expired. */
	uint64_t t0 = mono_ms();
	leave(&w, 1);
	ms = wait_converged(&w, 2, 10000);
	uint64_t total = mono_ms() - t0;
	printf("sharding: stop of one of 3: every bucket owned again %llu ms after the stop "
	       "(%llu after it returned)\n",
	       (unsigned long long)total, (unsigned long long)ms);
	ck_assert_uint_lt(total, LEASE_MS);
	check_leases(&w);
	ck_assert_int_eq(overlaps(&w), 0);
	world_free(&w);
}
END_TEST

START_TEST(test_crash_taken_after_expiry)
{
	world_t w;
	world_init(&w);
	join(&w, 0, true);
	join(&w, 1, true);
	join(&w, 2, false); /* "crashes": its Leases are left to expire */
	wait_converged(&w, 3, 10000);

	uint64_t t0 = mono_ms();
	leave(&w, 2);
	uint64_t ms = wait_converged(&w, 2, 10000);
	printf("sharding: crash of one of 3: every bucket owned again %llu ms after it "
	       "(lease %u ms)\n",
	       (unsigned long long)(mono_ms() - t0), LEASE_MS);
	/* Not before the Leases expired (the others saw them unchanged for 2 s), and
	 * within lease duration + a few rounds. */
	ck_assert_uint_ge(mono_ms() - t0, LEASE_MS - 100);
	ck_assert_uint_lt(ms, LEASE_MS + 1500);
	check_leases(&w);
	ck_assert_int_eq(overlaps(&w), 0);
	world_free(&w);
}
END_TEST

START_TEST(test_rebalance_on_join)
{
	world_t w;
	world_init(&w);
	join(&w, 0, true);
	join(&w, 1, true);
	wait_converged(&w, 2, 10000);
	ck_assert_uint_eq(ck_sharding_owned_count(w.m[0].s), NB / 2);

	/* Joins: 2 -> 3 -> 5; the old members give buckets up, drained first. */
	join(&w, 2, true);
	uint64_t ms = wait_converged(&w, 3, 10000);
	printf("sharding: join 2 -> 3 rebalanced in %llu ms\n", (unsigned long long)ms);
	join(&w, 3, true);
	join(&w, 4, true);
	ms = wait_converged(&w, 5, 10000);
	printf("sharding: join 3 -> 5 rebalanced in %llu ms (%u/%u/%u/%u/%u)\n",
	       (unsigned long long)ms, ck_sharding_owned_count(w.m[0].s),
	       ck_sharding_owned_count(w.m[1].s), ck_sharding_owned_count(w.m[2].s),
	       ck_sharding_owned_count(w.m[3].s), ck_sharding_owned_count(w.m[4].s));
	check_leases(&w);
	/* And leaves: 5 -> 2. */
	leave(&w, 0);
	leave(&w, 3);
	leave(&w, 4);
	wait_converged(&w, 2, 10000);
	ck_assert_uint_eq(ck_sharding_owned_count(w.m[1].s), NB / 2);
	check_leases(&w);
	ck_assert_int_eq(overlaps(&w), 0);
	world_free(&w);
}
END_TEST

START_TEST(test_slow_drain_keeps_leases)
{
	world_t w;
	world_init(&w);
	join(&w, 0, true);
	join(&w, 1, true);
	wait_converged(&w, 2, 10000);

	/* Draining 8 buckets for 400 ms each outlasts a lease (2 s): the Leases still
	 * to drain must be renewed meanwhile, or replica-b takes them over while
	 * replica-a still works on them. */
	atomic_store(&w.o.drain_ms, 400);
	uint64_t t0 = mono_ms();
	leave(&w, 0);
	printf("sharding: stop with 8 slow drains took %llu ms (lease %u ms)\n",
	       (unsigned long long)(mono_ms() - t0), LEASE_MS);
	ck_assert_uint_gt(mono_ms() - t0, LEASE_MS);
	atomic_store(&w.o.drain_ms, 0);
	wait_converged(&w, 1, 10000);
	ck_assert_int_eq(overlaps(&w), 0);
	world_free(&w);
}
END_TEST

/* --- boundaries and the epoch rule, as pure functions --- */

#define B32 32u

/* The namespaces FNV-1a puts next to each other: set 0 app-1..app-30, 1
 * team-a..team-z, 2 both. Fills h; returns how many. */
static size_t name_hashes(int set, uint64_t *h)
{
	char name[16];
	size_t n = 0;
	for (int i = 1; set != 1 && i <= 30; i++) {
		snprintf(name, sizeof(name), "app-%d", i);
		h[n++] = ck_shard_hash(name, strlen(name));
	}
	for (int i = 0; set != 0 && i < 26; i++) {
		snprintf(name, sizeof(name), "team-%c", 'a' + i);
		h[n++] = ck_shard_hash(name, strlen(name));
	}
	return n;
}

/* Each of nrep replicas owning its home buckets (b % nrep == r, as the
 * coordinator prefers): how many of the n hashes each holds, into count[]; the
 * largest distance from the ideal n / nrep, times nrep (integers). */
static size_t shares(const uint64_t *bounds, uint32_t nb, const uint64_t *h, size_t n,
                     uint32_t nrep, size_t *count)
{
	size_t worst = 0;
	for (uint32_t r = 0; r < nrep; r++)
		count[r] = 0;
	for (size_t k = 0; k < n; k++)
		count[sh_bucket_of(bounds, nb, h[k]) % nrep]++;
	for (uint32_t r = 0; r < nrep; r++) {
		size_t d = count[r] * nrep > n ? count[r] * nrep - n : n - count[r] * nrep;
		worst = d > worst ? d : worst;
	}
	return worst;
}

START_TEST(test_balanced_bounds)
{
	static const char *set_name[] = {"app-1..app-30", "team-a..team-z", "both"};
	uint64_t h[64], sorted[64], eq[B32 + 1], bal[B32 + 1];
	size_t count[4];

	for (int set = 0; set < 3; set++) {
		size_t n = name_hashes(set, h);
		memcpy(sorted, h, n * sizeof(*h));
		sh_equal_bounds(eq, B32);
		sh_balanced_bounds(sorted, n, B32, bal);

		/* Strictly increasing, tiling the hash space; every hash strictly inside
		 * its bucket (a cut lies between two hashes, never on one). */
		ck_assert_uint_eq(bal[0], 0);
		ck_assert_uint_eq(bal[B32], 0);
		for (uint32_t k = 1; k < B32; k++)
			ck_assert_uint_gt(bal[k], bal[k - 1]);
		for (size_t i = 0; i < n; i++)
			for (uint32_t k = 1; k < B32; k++)
				ck_assert_uint_ne(h[i], bal[k]);

		/* Every bucket holds floor or ceil of n / B; equal ranges are skewed. */
		size_t load = (n + B32 - 1) / B32;
		size_t max_eq = sh_max_load(eq, B32, h, n), max_bal = sh_max_load(bal, B32, h, n);
		ck_assert_uint_le(max_bal, load);
		ck_assert(sh_bounds_skewed(max_eq, n, B32, 150));
		ck_assert(!sh_bounds_skewed(max_bal, n, B32, 150));

		/* Each replica's share within one bucket's load of n / N. */
		for (uint32_t nrep = 3; nrep <= 4; nrep++) {
			char ebuf[64] = "", bbuf[64] = "";
			size_t we = shares(eq, B32, h, n, nrep, count);
			for (uint32_t r = 0; r < nrep; r++)
				snprintf(ebuf + strlen(ebuf), sizeof(ebuf) - strlen(ebuf), "%s%zu",
				         r ? "/" : "", count[r]);
			size_t wb = shares(bal, B32, h, n, nrep, count);
			for (uint32_t r = 0; r < nrep; r++)
				snprintf(bbuf + strlen(bbuf), sizeof(bbuf) - strlen(bbuf), "%s%zu",
				         r ? "/" : "", count[r]);
			printf(
			    "sharding balance: %zu namespaces %s, %u buckets, %u replicas: equal "
			    "ranges %s (fullest bucket %zu), balanced %s (fullest %zu)\n",
			    n, set_name[set], B32, nrep, ebuf, max_eq, bbuf, max_bal);
			ck_assert_msg(
			    wb <= load * nrep,
			    "%s on %u replicas: balanced shares %s, not within %zu of %zu/%u",
			    set_name[set], nrep, bbuf, load, n, nrep);
			/* What this is for: equal ranges miss it. */
			ck_assert_msg(we > load * nrep, "%s: equal ranges %s are balanced already?",
			              set_name[set], ebuf);
		}
	}

	/* Fewer hashes than buckets, none, and all equal: still strictly increasing. */
	uint64_t one[3] = {42, 42, 42}, b4[5];
	sh_balanced_bounds(one, 3, 4, b4);
	for (uint32_t k = 1; k < 4; k++)
		ck_assert_uint_gt(b4[k], b4[k - 1]);
	sh_balanced_bounds(NULL, 0, 4, b4);
	ck_assert_uint_eq(b4[1], 1ull << 62);
	uint64_t top[2] = {UINT64_MAX, UINT64_MAX};
	sh_balanced_bounds(top, 2, 4, b4);
	for (uint32_t k = 1; k < 4; k++)
		ck_assert_uint_gt(b4[k], b4[k - 1]);
	/* A handful never moves them: 2 namespaces in one of 16 buckets is fine, 3 are
	 * 2 more than the ideal (3 / 16); 60 in 16 (ideal 3.75) move at 6 (> 5.6), not
	 * at 5. */
	ck_assert(!sh_bounds_skewed(2, 2, 16, 150));
	ck_assert(sh_bounds_skewed(3, 3, 16, 150));
	ck_assert(!sh_bounds_skewed(5, 60, 16, 150));
	ck_assert(sh_bounds_skewed(6, 60, 16, 150));
	ck_assert(!sh_bounds_skewed(6, 60, 16, 200));
}
END_TEST

START_TEST(test_bounds_text)
{
	uint64_t b[5], back[5];
	char *err = NULL;
	sh_balanced_bounds((uint64_t[]){1, 1ull << 40, 3ull << 62}, 3, 4, b);
	char *t = sh_bounds_format(b, 4);
	ck_assert_int_eq(sh_bounds_parse(t, 4, back, &err), 0);
	ck_assert_mem_eq(b, back, sizeof(b));
	ck_assert_uint_eq(strlen(t), 3 * 18 + 2);
	free(t);
	t = sh_bounds_format(b, 1);
	ck_assert_str_eq(t, "");
	ck_assert_int_eq(sh_bounds_parse(t, 1, back, &err), 0);
	free(t);

	static const struct {
		const char *text;
		const char *want;
	} bad[] = {
	    {"", "boundary 1 (column 1): not 0x and 16 lowercase hex digits"},
	    {"0x1,0x2,0x3", "boundary 1 (column 1): not 0x"},
	    {"0x4000000000000000,0x2000000000000000,0x8000000000000000",
	     "boundary 2 (column 20): 0x2000000000000000 does not follow"},
	    {"0x4000000000000000,0x8000000000000000", "2 boundaries, but 4 buckets need 3"},
	    {"0x1000000000000000,0x2000000000000000,0x3000000000000000,0x4000000000000000",
	     "more than 3 boundaries"},
	    {"0x1000000000000000;0x2000000000000000", "column 19: ';' where ','"},
	    {"0x000000000000000A,0x2000000000000000,0x3000000000000000", "not 0x and 16 lowercase"},
	    {"0x0000000000000000,0x2000000000000000,0x3000000000000000", "does not follow"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(sh_bounds_parse(bad[i].text, 4, back, &err), -1);
		ck_assert_msg(strstr(err, bad[i].want) != NULL, "\"%s\": got \"%s\", want \"%s\"",
		              bad[i].text, err, bad[i].want);
		free(err);
		err = NULL;
	}
	uint64_t e = 0;
	ck_assert_int_eq(sh_epoch_parse("12", &e, &err), 0);
	ck_assert_uint_eq(e, 12);
	const char *bad_epochs[] = {"", "-1", "1x", "99999999999999999999", NULL};
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(sh_epoch_parse(bad_epochs[i], &e, &err), -1);
		ck_assert_ptr_nonnull(strstr(err, "epoch"));
		free(err);
		err = NULL;
	}
}
END_TEST

START_TEST(test_acquire_gate)
{
	uint64_t e[4] = {0, 0, 0, 0};
	/* No bounds object yet: Leases without a stamp are epoch 0. */
	ck_assert_int_eq(sh_acquire_gate(0, e, 4), SH_GATE_OPEN);
	/* Epoch 1 adopted: one Lease not stamped yet (its holder has not renewed, or
	 * it is free and must be stamped first) keeps the gate shut. */
	ck_assert_int_eq(sh_acquire_gate(1, e, 4), SH_GATE_WAIT);
	e[0] = e[1] = e[3] = 1;
	ck_assert_int_eq(sh_acquire_gate(1, e, 4), SH_GATE_WAIT);
	e[2] = 1;
	ck_assert_int_eq(sh_acquire_gate(1, e, 4), SH_GATE_OPEN);
	/* Someone is on a newer epoch: adopt before acquiring anything. */
	e[1] = 2;
	ck_assert_int_eq(sh_acquire_gate(1, e, 4), SH_GATE_STALE);
	e[0] = 0;
	ck_assert_int_eq(sh_acquire_gate(1, e, 4), SH_GATE_STALE);
	ck_assert_int_eq(sh_acquire_gate(2, e, 4), SH_GATE_WAIT);
}
END_TEST

/* --- boundary moves through the coordinators, on the fake --- */

/* Writes the bounds object as a writer would: epoch and boundaries. */
static void put_bounds(world_t *w, uint64_t epoch, const char *text)
{
	char *err = NULL, json[2048];
	snprintf(json, sizeof(json),
	         "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":"
	         "{\"name\":\"foo-controller-bounds\",\"namespace\":\"kube-system\","
	         "\"annotations\":{\"sharding.ckube.io/epoch\":\"%" PRIu64
	         "\",\"sharding.ckube.io/bounds\":\"%s\"}}}",
	         epoch, text);
	ck_assert_msg(ck_fake_put(w->fake, &ck_type_lease, json, &err) == 0, "%s", err);
}

/* Whether every running member uses epoch and the fake's bucket Leases all carry
 * it. */
static bool at_epoch(world_t *w, uint64_t epoch)
{
	for (int i = 0; i < MAXM; i++)
		if (w->m[i].s != NULL && ck_sharding_epoch(w->m[i].s) != epoch)
			return false;
	for (uint32_t b = 0; b < NB; b++) {
		char name[64];
		snprintf(name, sizeof(name), "foo-controller-bucket-%u", b);
		ck_json_doc_t *doc = ck_fake_get(w->fake, &ck_type_lease, "kube-system", name);
		const char *e = doc != NULL
		                    ? ck_json_str(ck_json_get(ck_json_root(doc),
		                                              CK_PATH("metadata", "annotations",
		                                                      "sharding.ckube.io/epoch")))
		                    : NULL;
		bool ok = e != NULL && strtoull(e, NULL, 10) == epoch;
		ck_json_doc_free(doc);
		if (!ok)
			return false;
	}
	return true;
}

static uint64_t wait_epoch(world_t *w, uint32_t n, uint64_t epoch, uint64_t limit_ms)
{
	uint64_t t0 = mono_ms();
	while (!at_epoch(w, epoch) || !converged(w, n)) {
		ck_assert_msg(mono_ms() - t0 < limit_ms, "not at epoch %" PRIu64 " in %llu ms",
		              epoch, (unsigned long long)limit_ms);
		usleep(10 * 1000);
	}
	return mono_ms() - t0;
}

static ck_sharding_config_t uid_config(member_t *m)
{
	ck_sharding_config_t c = config(m, true);
	c.field = CK_SHARD_UID; /* no writer: the test writes the bounds object */
	return c;
}

START_TEST(test_move_reacquires_only_moved)
{
	world_t w;
	char *err = NULL;
	world_init(&w);
	for (int i = 0; i < 3; i++) {
		member_t *m = &w.m[i];
		m->o = &w.o;
		m->idx = i;
		snprintf(m->id, sizeof(m->id), "replica-%c", 'a' + i);
		ck_sharding_config_t c = uid_config(m);
		m->s = ck_sharding_start(ck_fake_env_client(w.env), &c, &err);
		ck_assert_msg(m->s != NULL, "%s", err ? err : "");
	}
	wait_converged(&w, 3, 10000);
	wait_observed(&w, 10000);
	uint64_t before[NB + 1], after[NB + 1];
	ck_assert_uint_eq(ck_sharding_bounds(w.m[0].s, before), 0);
	int acq[NB], rel[NB];
	pthread_mutex_lock(&w.o.mu);
	memcpy(acq, w.o.bucket_acquires, sizeof(acq));
	memcpy(rel, w.o.bucket_releases, sizeof(rel));
	pthread_mutex_unlock(&w.o.mu);

	/* Epoch 1 moves one cut: buckets 4 and 5 change range, the rest stay. */
	uint64_t moved[NB + 1];
	memcpy(moved, before, sizeof(moved));
	moved[5] += 1ull << 59;
	char *text = sh_bounds_format(moved, NB);
	put_bounds(&w, 1, text);
	free(text);
	uint64_t ms = wait_epoch(&w, 3, 1, 10000);
	wait_observed(&w, 10000);
	printf("sharding: epoch 1 (2 of %u ranges moved) adopted and owned again in %llu ms\n", NB,
	       (unsigned long long)ms);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(ck_sharding_bounds(w.m[i].s, after), 1);
		ck_assert_mem_eq(after, moved, sizeof(after));
	}
	ck_shard_range_t r4 = ck_sharding_bucket_range(w.m[0].s, 4);
	ck_assert_uint_eq(r4.end, moved[5]);
	ck_assert_uint_eq(ck_sharding_bucket_of(w.m[0].s, moved[5] - 1), 4);

	/* Economy: the moved buckets were drained and taken again (with their new
	 * range), the others never left their owner. */
	pthread_mutex_lock(&w.o.mu);
	for (uint32_t b = 0; b < NB; b++) {
		int da = w.o.bucket_acquires[b] - acq[b], dr = w.o.bucket_releases[b] - rel[b];
		bool changed = b == 4 || b == 5;
		ck_assert_msg(da == (changed ? 1 : 0) && dr == (changed ? 1 : 0),
		              "bucket %u: %d acquires, %d releases during the move", b, da, dr);
		if (changed) {
			int owner = -1;
			for (int i = 0; i < 3; i++)
				if (w.o.active[i][b])
					owner = i;
			ck_assert_int_ge(owner, 0);
			ck_assert_uint_eq(w.o.range[owner][b].start, moved[b]);
			ck_assert_uint_eq(w.o.range[owner][b].end, moved[b + 1]);
		}
	}
	pthread_mutex_unlock(&w.o.mu);
	check_leases(&w);

	/* A stop, with the moved boundaries: handed over within them. */
	leave(&w, 1);
	wait_converged(&w, 2, 10000);
	ck_assert_uint_eq(ck_sharding_epoch(w.m[0].s), 1);
	ck_assert_int_eq(overlaps(&w), 0);
	world_free(&w);
}
END_TEST

START_TEST(test_newer_epoch_blocks_until_adopted)
{
	world_t w;
	char *err = NULL;
	world_init(&w);
	/* A bucket Lease stamped by a replica on epoch 7 (free): this one, on epoch 0,
	 * must acquire nothing until it adopted epoch 7's boundaries. */
	ck_assert_int_eq(
	    ck_fake_put(
	        w.fake, &ck_type_lease,
	        "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":"
	        "{\"name\":\"foo-controller-bucket-3\",\"namespace\":\"kube-system\","
	        "\"annotations\":{\"sharding.ckube.io/epoch\":\"7\"}},"
	        "\"spec\":{\"holderIdentity\":\"\",\"leaseDurationSeconds\":1}}",
	        &err),
	    0);
	member_t *m = &w.m[0];
	m->o = &w.o;
	snprintf(m->id, sizeof(m->id), "replica-a");
	ck_sharding_config_t c = uid_config(m);
	m->s = ck_sharding_start(ck_fake_env_client(w.env), &c, &err);
	ck_assert_ptr_nonnull(m->s);
	usleep(600 * 1000);
	ck_assert_uint_eq(ck_sharding_owned_count(m->s), 0);

	/* A malformed bounds object is named and ignored. */
	put_bounds(&w, 7, "0x1,zzz");
	usleep(400 * 1000);
	ck_assert_uint_eq(ck_sharding_owned_count(m->s), 0);
	ck_assert_uint_eq(ck_sharding_epoch(m->s), 0);
	pthread_mutex_lock(&w.o.mu);
	printf("sharding: malformed bounds object: %s\n", w.o.last_error);
	ck_assert_msg(strstr(w.o.last_error, "bounds Lease kube-system/foo-controller-bounds: "
	                                     "annotation sharding.ckube.io/bounds: boundary 1 "
	                                     "(column 1)") != NULL,
	              "%s", w.o.last_error);
	pthread_mutex_unlock(&w.o.mu);

	uint64_t eq[NB + 1];
	sh_equal_bounds(eq, NB);
	char *text = sh_bounds_format(eq, NB);
	put_bounds(&w, 7, text);
	free(text);
	wait_epoch(&w, 1, 7, 10000);
	ck_assert_uint_eq(ck_sharding_owned_count(m->s), NB);
	world_free(&w);
}
END_TEST

/* Adds namespaces app-1..app-30 (set 0) or team-a..team-z (set 1) to the fake. */
static void add_namespaces(world_t *w, int set)
{
	char *err = NULL, json[256];
	for (int i = 0; i < (set == 0 ? 30 : 26); i++) {
		char name[16];
		if (set == 0)
			snprintf(name, sizeof(name), "app-%d", i + 1);
		else
			snprintf(name, sizeof(name), "team-%c", 'a' + i);
		snprintf(
		    json, sizeof(json),
		    "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}",
		    name);
		ck_assert_msg(ck_fake_add(w->fake, &ck_type_namespace, json, &err) == 0, "%s", err);
	}
}

/* How many of the namespaces each of the 3 members owns; returns the largest
 * distance from n / 3, times 3. */
static size_t owned_namespaces(world_t *w, int sets, size_t *count, size_t *n)
{
	char key[32];
	size_t worst = 0;
	*n = 0;
	for (int i = 0; i < 3; i++)
		count[i] = 0;
	for (int set = 0; set < sets; set++)
		for (int k = 0; k < (set == 0 ? 30 : 26); k++) {
			if (set == 0)
				snprintf(key, sizeof(key), "app-%d/x", k + 1);
			else
				snprintf(key, sizeof(key), "team-%c/x", 'a' + k);
			for (int i = 0; i < 3; i++)
				count[i] += ck_sharding_owns_key(w->m[i].s, key);
			(*n)++;
		}
	for (int i = 0; i < 3; i++) {
		size_t d = count[i] * 3 > *n ? count[i] * 3 - *n : *n - count[i] * 3;
		worst = d > worst ? d : worst;
	}
	return worst;
}

START_TEST(test_namespaces_move_bounds)
{
	world_t w;
	size_t count[3], n;
	world_init(&w);
	for (int i = 0; i < 3; i++)
		join(&w, i, true);
	wait_converged(&w, 3, 10000);
	ck_assert_uint_eq(ck_sharding_epoch(w.m[0].s), 0);
	owned_namespaces(&w, 1, count, &n);
	printf("sharding: epoch 0 (equal ranges): app-1..app-30 owned %zu/%zu/%zu\n", count[0],
	       count[1], count[2]);

	/* The writer (rank 0, every round here) sees app-1..app-30 crowd one bucket
	 * and moves the boundaries. */
	add_namespaces(&w, 0);
	uint64_t t0 = mono_ms();
	while (ck_sharding_epoch(w.m[0].s) == 0 || ck_sharding_epoch(w.m[1].s) == 0 ||
	       ck_sharding_epoch(w.m[2].s) == 0 || !converged(&w, 3)) {
		ck_assert_msg(mono_ms() - t0 < 10000, "no new epoch in 10 s");
		usleep(10 * 1000);
	}
	uint64_t e1 = ck_sharding_epoch(w.m[0].s);
	size_t worst = owned_namespaces(&w, 1, count, &n);
	printf("sharding: epoch %" PRIu64 " after %llu ms: app-1..app-30 owned %zu/%zu/%zu\n", e1,
	       (unsigned long long)(mono_ms() - t0), count[0], count[1], count[2]);
	/* Within one bucket's load (ceil(30 / 16) = 2) of 10 each. */
	ck_assert_msg(worst <= 2 * 3, "unbalanced: %zu/%zu/%zu", count[0], count[1], count[2]);

	/* 26 more, next to each other again: the boundaries move again. */
	add_namespaces(&w, 1);
	t0 = mono_ms();
	while (ck_sharding_epoch(w.m[0].s) == e1 || ck_sharding_epoch(w.m[1].s) == e1 ||
	       ck_sharding_epoch(w.m[2].s) == e1 || !converged(&w, 3)) {
		ck_assert_msg(mono_ms() - t0 < 10000, "no new epoch in 10 s");
		usleep(10 * 1000);
	}
	worst = owned_namespaces(&w, 2, count, &n);
	printf("sharding: epoch %" PRIu64 " after %llu ms: %zu namespaces owned %zu/%zu/%zu\n",
	       ck_sharding_epoch(w.m[0].s), (unsigned long long)(mono_ms() - t0), n, count[0],
	       count[1], count[2]);
	ck_assert_msg(worst <= 4 * 3, "unbalanced: %zu/%zu/%zu", count[0], count[1], count[2]);
	/* A quiet cluster: no more moves. */
	uint64_t e2 = ck_sharding_epoch(w.m[0].s);
	usleep(500 * 1000);
	ck_assert_uint_eq(ck_sharding_epoch(w.m[0].s), e2);
	ck_assert_int_eq(overlaps(&w), 0);
	world_free(&w);
}
END_TEST

/* A fresh group whose namespaces crowd one bucket: the writer moves the
 * boundaries in its first round and takes every bucket on the new ones at once;
 * it used to take them all on the equal ranges first and hand them all back a
 * round later (16 releases before converging). Then a member joins that sorts
 * first, so it writes from its first round on: the boundaries are as they should
 * be and stay; it once judged them against the equal ranges, before adopting
 * them, and moved them to a new epoch for nothing. */
START_TEST(test_fresh_group_takes_once)
{
	world_t w;
	world_init(&w);
	add_namespaces(&w, 0);
	join(&w, 1, true);
	uint64_t t0 = mono_ms();
	while (ck_sharding_epoch(w.m[1].s) == 0 || !converged(&w, 1)) {
		ck_assert_msg(mono_ms() - t0 < 10000, "not converged on a new epoch in 10 s");
		usleep(10 * 1000);
	}
	wait_observed(&w, 10000);
	pthread_mutex_lock(&w.o.mu); /* the member's thread goes on renewing */
	int acquires = w.o.acquires, releases = w.o.releases;
	pthread_mutex_unlock(&w.o.mu);
	ck_assert_int_eq(acquires, (int)NB);
	ck_assert_int_eq(releases, 0);
	uint64_t e = ck_sharding_epoch(w.m[1].s);

	join(&w, 0, true);
	wait_converged(&w, 2, 10000);
	usleep(300 * 1000); /* three more rounds of the writer */
	ck_assert_uint_eq(ck_sharding_epoch(w.m[0].s), e);
	ck_assert_uint_eq(ck_sharding_epoch(w.m[1].s), e);
	ck_assert_int_eq(overlaps(&w), 0);
	leave(&w, 0);
	leave(&w, 1);
	world_free(&w);
}
END_TEST

Suite *suite_sharding(void)
{
	Suite *s = suite_create("sharding");
	TCase *tc = tcase_create("config");
	tcase_add_test(tc, test_validate);
	tcase_add_test(tc, test_balanced_bounds);
	tcase_add_test(tc, test_bounds_text);
	tcase_add_test(tc, test_acquire_gate);
	suite_add_tcase(s, tc);

	tc = tcase_create("members");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_one_member_owns_all);
	tcase_add_test(tc, test_three_converge_then_stop_hands_over);
	tcase_add_test(tc, test_crash_taken_after_expiry);
	tcase_add_test(tc, test_rebalance_on_join);
	tcase_add_test(tc, test_slow_drain_keeps_leases);
	tcase_add_test(tc, test_move_reacquires_only_moved);
	tcase_add_test(tc, test_newer_epoch_blocks_until_adopted);
	tcase_add_test(tc, test_namespaces_move_bounds);
	tcase_add_test(tc, test_fresh_group_takes_once);
	suite_add_tcase(s, tc);
	return s;
}
