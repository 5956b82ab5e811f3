/*
 * sharding_test: <ckube/sharding.h> against the real kube-apiserver, through
 * envtest. Three replicas, each with its own loop, client and connection, split 16
 * buckets on Leases in "default" (lease 3 s, renew 2 s, retry 250 ms):
 *
 *   join       all three start; every bucket owned once, 5 or 6 each, and each
 *              bucket's Lease names its owner (read back from the server);
 *   stop       one stops (hands over): time until every bucket is owned again,
 *              which must be shorter than the lease duration (released, not expired);
 *   kill       one stops without releasing (a crash: its Leases stay held): time
 *              until every bucket is owned again, at least the lease duration;
 *   rejoin     a new replica joins the survivor: back to 8/8.
 *
 * Through all of it an overlap oracle (on_acquire counts a bucket's workers up, on_release
 * counts down after a 100 ms "drain") must see no bucket worked on twice at once.
 *
 *   sharding_test PARENT    (PARENT: the directory for envtest's servers)
 */
#include <ckube/base.h>
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/envtest.h>
#include <ckube/sharding.h>
#include <ckube/types.h>

#include <ev.h>
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
static int holders[NB], overlaps;

typedef struct replica {
	char id[16];
	struct ev_loop *loop;
	ev_async stop;
	pthread_t thread;
	ck_client_t *c;
	ck_sharding_t *s;
} replica_t;

static replica_t reps[NREP];

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void on_acquire(void *ud, uint32_t b, ck_shard_range_t r)
{
	replica_t *rep = ud;
	(void)r;
	pthread_mutex_lock(&omu);
	if (holders[b] != 0) {
		overlaps++;
		printf("overlap: %s acquired bucket %u while another replica works on it\n",
		       rep->id, b);
	}
	holders[b]++;
	pthread_mutex_unlock(&omu);
}

static void on_release(void *ud, uint32_t b)
{
	(void)ud;
	usleep(100 * 1000); /* in-flight reconciles finishing */
	pthread_mutex_lock(&omu);
	holders[b]--;
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

static void start(const ck_envtest_t *env, int i, bool release)
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

	uint64_t t0 = mono_ms();
	for (int i = 0; i < 3; i++)
		start(env, i, i != 2); /* replica-c will be killed: it never releases */
	int64_t ms = wait_converged(3, 20000);
	counts(buf, sizeof(buf));
	printf("join: 3 replicas own all %u buckets %lld ms after starting (%s)\n", NB,
	       (long long)(ms < 0 ? ms : (int64_t)(mono_ms() - t0)), buf);
	CHECK(ms >= 0, "3 replicas did not converge in 20 s (%s)", buf);
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
