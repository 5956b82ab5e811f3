/*
 * sharding: replicas splitting buckets on Leases, on the in-memory fake API server.
 * Several coordinators share one fake (one client on the env's loop, each
 * coordinator with its own identity and its own Lease locks), real clock and short
 * timings (lease 2 s, renew 1.5 s, retry 100 ms).
 *
 * The overlap oracle: on_acquire counts a bucket's holders up and fails on a
 * second one; on_release sleeps (a drain) then counts down. Since a new owner's
 * on_acquire follows the old owner's release write, which follows its on_release,
 * a count above one is two replicas working on a bucket at once.
 */
#include <ckube/base.h>
#include <ckube/client.h>
#include <ckube/fake.h>
#include <ckube/json.h>
#include <ckube/kinds.h>
#include <ckube/sharding.h>
#include <ckube/types.h>

#include <check.h>
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
	int holders[NB];
	int overlaps;
	int acquires, releases;
	_Atomic uint32_t drain_ms;
} oracle_t;

typedef struct member {
	oracle_t *o;
	char id[16];
	ck_sharding_t *s;
} member_t;

typedef struct world {
	ck_fake_t *fake;
	ck_fake_env_t *env;
	oracle_t o;
	member_t m[MAXM];
} world_t;

static void on_acquire(void *ud, uint32_t b, ck_shard_range_t r)
{
	member_t *m = ud;
	(void)r;
	pthread_mutex_lock(&m->o->mu);
	if (m->o->holders[b] != 0) {
		m->o->overlaps++;
		fprintf(stderr,
		        "sharding oracle: %s acquired bucket %u while %d others work on it\n",
		        m->id, b, m->o->holders[b]);
	}
	m->o->holders[b]++;
	m->o->acquires++;
	pthread_mutex_unlock(&m->o->mu);
}

static void on_release(void *ud, uint32_t b)
{
	member_t *m = ud;
	/* In-flight reconciles finishing: the new owner must not start meanwhile. */
	usleep(atomic_load(&m->o->drain_ms) * 1000);
	pthread_mutex_lock(&m->o->mu);
	m->o->holders[b]--;
	m->o->releases++;
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
	                          .ud = m};
	return c;
}

static void join(world_t *w, int i, bool release)
{
	char *err = NULL;
	member_t *m = &w->m[i];
	m->o = &w->o;
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

Suite *suite_sharding(void)
{
	Suite *s = suite_create("sharding");
	TCase *tc = tcase_create("config");
	tcase_add_test(tc, test_validate);
	suite_add_tcase(s, tc);

	tc = tcase_create("members");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_one_member_owns_all);
	tcase_add_test(tc, test_three_converge_then_stop_hands_over);
	tcase_add_test(tc, test_crash_taken_after_expiry);
	tcase_add_test(tc, test_rebalance_on_join);
	tcase_add_test(tc, test_slow_drain_keeps_leases);
	suite_add_tcase(s, tc);
	return s;
}
