/*
 * sharding_test: <ckube/sharding.h> against the real kube-apiserver, through
 * envtest. Three replicas, each with its own loop, client and connection, split 16
 * buckets on Leases in "default" (lease 3 s, renew 2 s, retry 250 ms):
 *
 *   join       30 namespaces app-1..app-30 exist (FNV-1a puts them next to each
 *              other: equal ranges give one replica nearly all); all three start;
 *              every bucket owned once, 5 or 6 each, and each bucket's Lease names
 *              its owner (read back from the server); the boundaries move to a
 *              new epoch and each replica owns about a third of the namespaces;
 *   move       30 more, team-a..team-z and team-aa..team-ad: the boundaries move
 *              again, stay balanced, and only the moved buckets change hands;
 *   stop       one stops (hands over): time until every bucket is owned again,
 *              which must be shorter than the lease duration (released, not expired);
 *   kill       one stops without releasing (a crash: its Leases stay held): time
 *              until every bucket is owned again, at least the lease duration;
 *   rejoin     a new replica joins the survivor: back to 8/8.
 *
 * Through all of it an overlap oracle must see no hash worked on by two replicas at
 * once: on_acquire records the replica's range for the bucket and counts an overlap
 * if another replica works on an intersecting range (by ranges, since they move);
 * on_release drops it after a 100 ms "drain".
 *
 *   sharding_test PARENT    (PARENT: the directory for envtest's servers)
 */
#include <ckube/base.h>
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/envtest.h>
#include <ckube/kinds.h>
#include <ckube/sharding.h>
#include <ckube/types.h>

#include <ev.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NB       16u
#define NREP     4
#define LEASE_MS 3000u

#include "check.h"

static pthread_mutex_t omu = PTHREAD_MUTEX_INITIALIZER;
/* Replica i works on bucket b's range[i][b] (under omu). */
static bool active[NREP][NB];
static ck_shard_range_t range[NREP][NB];
static int overlaps, acquires[NB], releases[NB];

typedef struct replica {
	char id[16];
	struct ev_loop *loop;
	ev_async stop;
	pthread_t thread;
	ck_client_t *c;
	ck_sharding_t *s;
} replica_t;

static replica_t reps[NREP];

/* Whether [a) and [b) intersect; end 0 is 2^64. */
static bool intersects(ck_shard_range_t a, ck_shard_range_t b)
{
	unsigned __int128 ae = a.end ? a.end : (unsigned __int128)1 << 64;
	unsigned __int128 be = b.end ? b.end : (unsigned __int128)1 << 64;
	return a.start < be && b.start < ae;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void on_acquire(void *ud, uint32_t b, ck_shard_range_t r)
{
	replica_t *rep = ud;
	int me = (int)(rep - reps);
	pthread_mutex_lock(&omu);
	for (int i = 0; i < NREP; i++)
		for (uint32_t c = 0; c < NB; c++)
			if (i != me && active[i][c] && intersects(range[i][c], r)) {
				overlaps++;
				printf("overlap: %s acquired bucket %u [%016" PRIx64 ", %016" PRIx64
				       ") while %s works on bucket %u [%016" PRIx64 ", %016" PRIx64
				       ")\n",
				       rep->id, b, r.start, r.end, reps[i].id, c, range[i][c].start,
				       range[i][c].end);
			}
	active[me][b] = true;
	range[me][b] = r;
	acquires[b]++;
	pthread_mutex_unlock(&omu);
}

static void on_release(void *ud, uint32_t b)
{
	replica_t *rep = ud;
	usleep(100 * 1000); /* in-flight reconciles finishing */
	pthread_mutex_lock(&omu);
	active[rep - reps][b] = false;
	releases[b]++;
	pthread_mutex_unlock(&omu);
}

static void on_log(void *ud, ck_le_log_level_t level, const char *msg)
{
	replica_t *rep = ud;
	if (level != CK_LE_LOG_INFO)
		printf("%s: %s\n", rep->id, msg);
}

static void on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

static void *loop_main(void *arg)
{
	replica_t *rep = arg;
	ev_run(rep->loop, 0);
	return NULL;
}

/* Replica i's loop thread and client, no coordinator yet. */
static void connect_replica(const ck_envtest_t *env, int i)
{
	char *err = NULL;
	replica_t *rep = &reps[i];
	snprintf(rep->id, sizeof(rep->id), "replica-%c", 'a' + i);
	rep->loop = ev_loop_new(EVFLAG_AUTO);
	ck_config_t *cfg = ck_envtest_config(env, &err);
	rep->c = cfg != NULL ? ck_client_new(rep->loop, cfg, NULL, &err) : NULL;
	CHECK(rep->c != NULL, "client: %s", err ? err : "?");
	ev_async_init(&rep->stop, on_stop);
	ev_async_start(rep->loop, &rep->stop);
	pthread_create(&rep->thread, NULL, loop_main, rep);
	free(err);
}

/* Its coordinator. */
static void begin(int i, bool release)
{
	char *err = NULL;
	replica_t *rep = &reps[i];
	ck_sharding_config_t c = {.lease_namespace = "default",
	                          .group = "sample-controller",
	                          .identity = rep->id,
	                          .buckets = NB,
	                          .lease_duration_ms = LEASE_MS,
	                          .renew_deadline_ms = 2000,
	                          .retry_period_ms = 250,
	                          .release_on_stop = release,
	                          .on_acquire = on_acquire,
	                          .on_release = on_release,
	                          .on_log = on_log,
	                          .ud = rep};
	rep->s = ck_sharding_start(rep->c, &c, &err);
	CHECK(rep->s != NULL, "start %s: %s", rep->id, err ? err : "?");
	free(err);
}

static void start(const ck_envtest_t *env, int i, bool release)
{
	connect_replica(env, i);
	begin(i, release);
}

static void stop(int i)
{
	replica_t *rep = &reps[i];
	ck_sharding_stop(rep->s);
	rep->s = NULL;
	ev_async_send(rep->loop, &rep->stop);
	pthread_join(rep->thread, NULL);
	ck_client_free(rep->c);
	ev_loop_destroy(rep->loop);
	rep->c = NULL;
}

/* Every bucket owned by one running replica, each between floor and ceil of
 * B / n, all seeing n members. */
static bool converged(uint32_t n)
{
	for (uint32_t b = 0; b < NB; b++) {
		int owners = 0;
		for (int i = 0; i < NREP; i++)
			owners += reps[i].s != NULL && ck_sharding_owns_bucket(reps[i].s, b);
		if (owners != 1)
			return false;
	}
	for (int i = 0; i < NREP; i++) {
		if (reps[i].s == NULL)
			continue;
		uint32_t c = ck_sharding_owned_count(reps[i].s);
		if (c < NB / n || c > (NB + n - 1) / n || ck_sharding_members(reps[i].s) != n)
			return false;
	}
	return true;
}

/* Milliseconds until converged(n); -1 after limit_ms. */
static int64_t wait_converged(uint32_t n, uint64_t limit_ms)
{
	uint64_t t0 = mono_ms();
	while (!converged(n)) {
		if (mono_ms() - t0 > limit_ms)
			return -1;
		usleep(5 * 1000);
	}
	return (int64_t)(mono_ms() - t0);
}

static void counts(char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = '\0';
	for (int i = 0; i < NREP && off < len; i++)
		if (reps[i].s != NULL)
			off += (size_t)snprintf(buf + off, len - off, "%s%s=%u", off ? " " : "",
			                        reps[i].id, ck_sharding_owned_count(reps[i].s));
}

/* Whether every running replica uses an epoch above min. */
static bool epoch_above(uint64_t min)
{
	for (int i = 0; i < NREP; i++)
		if (reps[i].s != NULL && ck_sharding_epoch(reps[i].s) <= min)
			return false;
	return true;
}

/* Milliseconds until every running replica is past epoch min and converged(n);
 * -1 after limit_ms. */
static int64_t wait_epoch(uint64_t min, uint32_t n, uint64_t limit_ms)
{
	uint64_t t0 = mono_ms();
	while (!epoch_above(min) || !converged(n)) {
		if (mono_ms() - t0 > limit_ms)
			return -1;
		usleep(5 * 1000);
	}
	return (int64_t)(mono_ms() - t0);
}

/* Creates the namespaces prefix + suffix for n suffixes: "1".."n" when numbered,
 * else "a".."z", "aa".. */
static void create_namespaces(ck_client_t *c, const char *prefix, int n, bool numbered)
{
	char body[256], name[32];
	for (int i = 0; i < n; i++) {
		if (numbered)
			snprintf(name, sizeof(name), "%s%d", prefix, i + 1);
		else if (i < 26)
			snprintf(name, sizeof(name), "%s%c", prefix, 'a' + i);
		else
			snprintf(name, sizeof(name), "%sa%c", prefix, 'a' + i - 26);
		snprintf(
		    body, sizeof(body),
		    "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}",
		    name);
		ck_result_t r = {0};
		CHECK(ck_client_create_sync(c, &ck_type_namespace, NULL, body, NULL, &r) == 0,
		      "create namespace %s: %s", name, r.error ? r.error : "?");
		ck_result_clear(&r);
	}
}

/* create_namespaces(reps[0].c, "app-", 30, true) on a thread of its own: the
 * client counts the thread that made it as its loop's until the loop ran, and
 * refuses a blocking call from there. */
static void *create_apps(void *arg)
{
	(void)arg;
	create_namespaces(reps[0].c, "app-", 30, true);
	return NULL;
}

/* Every namespace on the server: how many each running replica owns (into
 * count[], buf says it); returns the largest distance from the even share, as a
 * multiple of one bucket's load (the namespaces over the buckets), times 100. */
static int64_t balance(ck_client_t *c, size_t *total, char *buf, size_t len)
{
	ck_obj_t **items = NULL;
	size_t n = 0, count[NREP] = {0}, off = 0;
	ck_result_t r = {0};
	int64_t worst = 0;
	if (ck_client_list_sync(c, &ck_type_namespace, NULL, NULL, &items, &n, NULL, &r) != 0) {
		CHECK(0, "list namespaces: %s", r.error ? r.error : "?");
		ck_result_clear(&r);
		return INT64_MAX;
	}
	for (size_t k = 0; k < n; k++) {
		char key[300];
		snprintf(key, sizeof(key), "%s/x", items[k]->name);
		for (int i = 0; i < NREP; i++)
			if (reps[i].s != NULL)
				count[i] += ck_sharding_owns_key(reps[i].s, key);
		ck_obj_unref(items[k]);
	}
	free(items);
	ck_result_clear(&r);
	buf[0] = '\0';
	for (int i = 0; i < NREP && off < len; i++) {
		if (reps[i].s == NULL)
			continue;
		off += (size_t)snprintf(buf + off, len - off, "%s%s=%zu", off ? " " : "",
		                        reps[i].id, count[i]);
		/* How far count is from the replica's share of the namespaces by the
		 * buckets it owns (owned * n / NB), in percent of that share. The
		 * boundaries move only when a bucket holds more than 1.5 times its share
		 * (docs/sharding.md), so namespaces made after a move may leave a
		 * replica some way off: half its share either way is the bound, as in
		 * tests/envtest/sharded_check.py. */
		int64_t share = (int64_t)(ck_sharding_owned_count(reps[i].s) * n);
		int64_t d = (int64_t)count[i] * NB - share;
		d = d < 0 ? -d : d;
		int64_t rel = share > 0 ? d * 100 / share : 100;
		worst = rel > worst ? rel : worst;
	}
	*total = n;
	return worst;
}

/* Each bucket's Lease, read from the server, names the replica that owns it. */
static void check_leases(ck_client_t *c)
{
	for (uint32_t b = 0; b < NB; b++) {
		char name[64];
		ck_result_t r = {0};
		snprintf(name, sizeof(name), "sample-controller-bucket-%u", b);
		if (ck_client_get_sync(c, &ck_type_lease, "default", name, &r) != 0) {
			CHECK(0, "get Lease %s: %s", name, r.error ? r.error : "?");
			ck_result_clear(&r);
			continue;
		}
		const char *holder = ck_lease_holder_identity(r.obj);
		const char *owner = NULL;
		for (int i = 0; i < NREP; i++)
			if (reps[i].s != NULL && ck_sharding_owns_bucket(reps[i].s, b))
				owner = reps[i].id;
		CHECK(owner != NULL && holder != NULL && strcmp(holder, owner) == 0,
		      "Lease %s held by %s, owned by %s", name, holder ? holder : "(none)",
		      owner ? owner : "(none)");
		ck_result_clear(&r);
	}
}

int main(int argc, char **argv)
{
	char *err = NULL, buf[128];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 2) {
		fprintf(stderr, "usage: sharding_test PARENT\n");
		return 2;
	}
	ck_envtest_opts_t o = {.dir = argv[1]};
	ck_envtest_t *env = ck_envtest_start(&o, &err);
	if (env == NULL) {
		printf("FAIL: start: %s\n", err);
		free(err);
		return 1;
	}

	/* Namespaces FNV-1a puts next to each other, before anyone starts. */
	pthread_t creator;
	connect_replica(env, 0);
	pthread_create(&creator, NULL, create_apps, NULL);
	pthread_join(creator, NULL);

	uint64_t t0 = mono_ms();
	begin(0, true);
	for (int i = 1; i < 3; i++)
		start(env, i, i != 2); /* replica-c will be killed: it never releases */
	int64_t ms = wait_converged(3, 20000);
	counts(buf, sizeof(buf));
	printf("join: 3 replicas own all %u buckets %lld ms after starting (%s)\n", NB,
	       (long long)(ms < 0 ? ms : (int64_t)(mono_ms() - t0)), buf);
	CHECK(ms >= 0, "3 replicas did not converge in 20 s (%s)", buf);
	check_leases(reps[0].c);

	/* Balance: the writer (rank 0, every 10 rounds) moves the boundaries to the
	 * namespaces' hashes. Within one bucket's load of a third each. */
	char bal[128];
	size_t nns = 0;
	uint64_t b0[NB + 1], b1[NB + 1], b2[NB + 1];
	for (uint32_t b = 0; b <= NB; b++) /* epoch 0's: equal */
		b0[b] = (uint64_t)(((unsigned __int128)b << 64) / NB);
	ms = wait_epoch(0, 3, 20000);
	uint64_t e1 = ck_sharding_bounds(reps[0].s, b1);
	int64_t worst = balance(reps[0].c, &nns, bal, sizeof(bal));
	printf("balance: epoch %" PRIu64 " %lld ms after the join: %zu namespaces owned %s "
	       "(worst %lld%% off its buckets' share)\n",
	       e1, (long long)ms, nns, bal, (long long)worst);
	CHECK(ms >= 0, "no epoch > 0 on every replica within 20 s");
	CHECK(worst <= 50, "unbalanced: %s of %zu namespaces", bal, nns);
	CHECK(memcmp(b0, b1, sizeof(b0)) != 0, "the boundaries did not move");
	check_leases(reps[0].c);

	/* More names next to each other: the boundaries move again, only the moved
	 * buckets change hands, and no hash is worked on twice meanwhile. */
	int acq0[NB], rel0[NB];
	pthread_mutex_lock(&omu);
	memcpy(acq0, acquires, sizeof(acq0));
	memcpy(rel0, releases, sizeof(rel0));
	pthread_mutex_unlock(&omu);
	t0 = mono_ms();
	create_namespaces(reps[0].c, "team-", 30, false);
	ms = wait_epoch(e1, 3, 20000);
	uint64_t e2 = ck_sharding_bounds(reps[0].s, b2);
	worst = balance(reps[0].c, &nns, bal, sizeof(bal));
	int moved = 0, changed_hands = 0, kept_moved = 0;
	pthread_mutex_lock(&omu);
	for (uint32_t b = 0; b < NB; b++) {
		bool changed = b1[b] != b2[b] || b1[b + 1] != b2[b + 1];
		bool handed = acquires[b] != acq0[b] || releases[b] != rel0[b];
		moved += changed;
		changed_hands += handed;
		kept_moved += handed && !changed;
	}
	pthread_mutex_unlock(&omu);
	printf("move: epoch %" PRIu64 " -> %" PRIu64 " %llu ms after creating 30 more: %zu "
	       "namespaces owned %s (worst %lld%% off its buckets' share); %d of %u "
	       "ranges moved, %d buckets changed hands, %d of them unmoved\n",
	       e1, e2, (unsigned long long)(mono_ms() - t0), nns, bal, (long long)worst, moved, NB,
	       changed_hands, kept_moved);
	CHECK(ms >= 0, "the boundaries did not move to a newer epoch within 20 s");
	CHECK(worst <= 50, "unbalanced after the move: %s of %zu namespaces", bal, nns);
	CHECK(kept_moved == 0, "%d buckets whose range stayed changed hands", kept_moved);
	CHECK(overlaps == 0, "%d overlaps through the move", overlaps);
	check_leases(reps[0].c);

	/* stop: replica-b hands over. */
	t0 = mono_ms();
	stop(1);
	uint64_t stopped = mono_ms() - t0;
	ms = wait_converged(2, 20000);
	counts(buf, sizeof(buf));
	uint64_t handover = mono_ms() - t0;
	printf("stop: every bucket owned again %llu ms after the stop began (stop took %llu ms; "
	       "lease %u ms) (%s)\n",
	       (unsigned long long)handover, (unsigned long long)stopped, LEASE_MS, buf);
	CHECK(ms >= 0, "not converged on 2 after the stop (%s)", buf);
	CHECK(handover < LEASE_MS, "the handover took %llu ms, not shorter than a lease",
	      (unsigned long long)handover);
	check_leases(reps[0].c);

	/* kill: replica-c stops without releasing. */
	t0 = mono_ms();
	stop(2);
	ms = wait_converged(1, 20000);
	counts(buf, sizeof(buf));
	uint64_t expiry = mono_ms() - t0;
	printf("kill: every bucket owned again %llu ms after the kill (lease %u ms, retry 250 "
	       "ms) (%s)\n",
	       (unsigned long long)expiry, LEASE_MS, buf);
	CHECK(ms >= 0, "not converged on 1 after the kill (%s)", buf);
	CHECK(expiry >= LEASE_MS - 250, "buckets taken %llu ms after a kill, before expiry",
	      (unsigned long long)expiry);
	CHECK(expiry < LEASE_MS + 3000, "expiry takeover took %llu ms", (unsigned long long)expiry);
	check_leases(reps[0].c);

	/* rejoin. */
	t0 = mono_ms();
	start(env, 3, true);
	ms = wait_converged(2, 20000);
	counts(buf, sizeof(buf));
	printf("rejoin: 2 replicas balanced %llu ms after the join (%s)\n",
	       (unsigned long long)(mono_ms() - t0), buf);
	CHECK(ms >= 0, "not converged on 2 after the rejoin (%s)", buf);
	check_leases(reps[0].c);

	stop(3);
	stop(0);
	printf("overlaps: %d\n", overlaps);
	CHECK(overlaps == 0, "%d buckets were worked on by two replicas at once", overlaps);
	CHECK(ck_envtest_stop(env, &err) == 0, "stop: %s", err ? err : "?");
	free(err);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
