/*
 * Integration tests for pkg/leaderelection against the real API server named by
 * $KUBECONFIG (the local control plane), with short timings: lease 3 s, renew
 * deadline 2 s, retry 0.5 s. Every test uses its own Lease in "default" and deletes
 * it at the end.
 *
 * The network cut puts a small TCP proxy (in this file, on its own thread) between
 * one elector's client and the API server; cutting it stops all forwarding without
 * closing anything, as a partition would: requests hang until their timeout.
 *
 *   make integration B=build-le MODULES="base kube leaderelection" \
 *        INTEG_SUITES=leaderelection KUBECONFIG=/work/main/.local/kubeconfig
 *
 * Time bounds below are the semantics under test (takeover within a lease
 * duration, within two retry periods after a release), each with one second of
 * slack for request latency on a loaded machine.
 */
#include "pkg/leaderelection/le_internal.h"
#include <ckube/base.h>
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/leaderelection.h>
#include <ckube/types.h>

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NS       "default"
#define LEASE_MS 3000u
#define RENEW_MS 2000u
#define RETRY_MS 500u
#define SLACK_MS 1000u
/* A standby sees the leader's last renewal at its next poll (at most 2.2 retry
 * periods later, client-go's jitter), waits a lease duration from then, and takes
 * over at its next poll after that. */
#define TAKEOVER_MAX_MS (LEASE_MS + (unsigned)(2 * 2.2 * RETRY_MS) + SLACK_MS)

/* ---------- a client on its own loop thread, as in the daemon ---------- */

typedef struct kenv {
	struct ev_loop *loop;
	ev_async stop_w;
	pthread_t th;
	ck_client_t *kc;
	const char *master; /* server override, or NULL */
	char *err;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool ready;
} kenv_t;

static void stop_cb(struct ev_loop *l, ev_async *w, int revents)
{
	ev_break(l, EVBREAK_ALL);
}

static void *loop_main(void *arg)
{
	kenv_t *k = arg;
	const char *path = getenv("KUBECONFIG");
	ck_config_load_opts_t lo = {.kubeconfig = path, .master = k->master};
	ck_config_t *cfg = ck_config_load(&lo, &k->err);
	if (cfg != NULL)
		k->kc = ck_client_new(k->loop, cfg, NULL, &k->err);
	pthread_mutex_lock(&k->mu);
	k->ready = true;
	pthread_cond_broadcast(&k->cond);
	pthread_mutex_unlock(&k->mu);
	if (k->kc != NULL)
		ev_run(k->loop, 0);
	return NULL;
}

static void kenv_start(kenv_t *k, const char *master)
{
	const char *path = getenv("KUBECONFIG");
	ck_assert_msg(path && *path, "KUBECONFIG must name the local control plane's kubeconfig");
	memset(k, 0, sizeof(*k));
	k->master = master;
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cond, NULL);
	k->loop = ev_loop_new(EVFLAG_AUTO);
	ev_async_init(&k->stop_w, stop_cb);
	ev_async_start(k->loop, &k->stop_w); /* keeps ev_run going until the end */
	pthread_create(&k->th, NULL, loop_main, k);
	pthread_mutex_lock(&k->mu);
	while (!k->ready)
		pthread_cond_wait(&k->cond, &k->mu);
	pthread_mutex_unlock(&k->mu);
	ck_assert_msg(k->kc != NULL, "client: %s", k->err);
}

static void kenv_stop(kenv_t *k)
{
	ev_async_send(k->loop, &k->stop_w);
	pthread_join(k->th, NULL);
	ck_client_free(k->kc); /* the loop has stopped: this thread is the only one */
	ev_async_stop(k->loop, &k->stop_w);
	ev_loop_destroy(k->loop);
	pthread_cond_destroy(&k->cond);
	pthread_mutex_destroy(&k->mu);
	free(k->err);
}

/* ---------- a TCP proxy that can be cut ---------- */

#define PROXY_MAX 64

typedef struct proxy {
	int lfd;
	uint16_t port;
	struct sockaddr_in up;
	int fds[PROXY_MAX];  /* pairs: fds[2i] client side, fds[2i+1] upstream; -1 free */
	int held[PROXY_MAX]; /* accepted while cut: never answered */
	_Atomic bool cut, quit;
	pthread_t th;
} proxy_t;

static void proxy_close_pair(proxy_t *p, int i)
{
	close(p->fds[2 * i]);
	close(p->fds[2 * i + 1]);
	p->fds[2 * i] = p->fds[2 * i + 1] = -1;
}

static bool write_all(int fd, const char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		buf += w;
		n -= (size_t)w;
	}
	return true;
}

static void proxy_accept(proxy_t *p)
{
	int cfd = accept(p->lfd, NULL, NULL);
	if (cfd < 0)
		return;
	if (atomic_load(&p->cut)) {
		for (int i = 0; i < PROXY_MAX; i++)
			if (p->held[i] < 0) {
				p->held[i] = cfd;
				return;
			}
		close(cfd);
		return;
	}
	int ufd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ufd < 0 || connect(ufd, (struct sockaddr *)&p->up, sizeof(p->up)) != 0) {
		if (ufd >= 0)
			close(ufd);
		close(cfd);
		return;
	}
	for (int i = 0; i < PROXY_MAX / 2; i++)
		if (p->fds[2 * i] < 0) {
			p->fds[2 * i] = cfd;
			p->fds[2 * i + 1] = ufd;
			return;
		}
	close(cfd);
	close(ufd);
}

static void *proxy_main(void *arg)
{
	proxy_t *p = arg;
	char buf[16384];
	while (!atomic_load(&p->quit)) {
		struct pollfd pfd[PROXY_MAX + 1];
		int map[PROXY_MAX + 1], n = 0;
		pfd[n].fd = p->lfd;
		pfd[n].events = POLLIN;
		map[n++] = -1;
		/* Cut: nothing is read, so nothing moves either way. */
		if (!atomic_load(&p->cut))
			for (int i = 0; i < PROXY_MAX; i++)
				if (p->fds[i] >= 0) {
					pfd[n].fd = p->fds[i];
					pfd[n].events = POLLIN;
					map[n++] = i;
				}
		if (poll(pfd, (nfds_t)n, 50) <= 0)
			continue;
		if (pfd[0].revents & POLLIN)
			proxy_accept(p);
		for (int k = 1; k < n; k++) {
			int i = map[k];
			if (pfd[k].revents == 0 || p->fds[i] < 0)
				continue;
			ssize_t r = read(p->fds[i], buf, sizeof(buf));
			if (r <= 0 || !write_all(p->fds[i ^ 1], buf, (size_t)r))
				proxy_close_pair(p, i / 2);
		}
	}
	return NULL;
}

/* Listens on 127.0.0.1:<any> and forwards to the API server of server_url. */
static void proxy_start(proxy_t *p, const char *server_url)
{
	memset(p, 0, sizeof(*p));
	for (int i = 0; i < PROXY_MAX; i++)
		p->fds[i] = p->held[i] = -1;
	const char *hp = strstr(server_url, "://");
	ck_assert_ptr_nonnull(hp);
	hp += 3;
	const char *colon = strrchr(hp, ':');
	ck_assert_ptr_nonnull(colon);
	char host[64];
	snprintf(host, sizeof(host), "%.*s", (int)(colon - hp), hp);
	p->up.sin_family = AF_INET;
	p->up.sin_port = htons((uint16_t)atoi(colon + 1));
	ck_assert_int_eq(inet_pton(AF_INET, host, &p->up.sin_addr), 1);

	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(p->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(p->lfd, 16), 0);
	socklen_t al = sizeof(a);
	getsockname(p->lfd, (struct sockaddr *)&a, &al);
	p->port = ntohs(a.sin_port);
	pthread_create(&p->th, NULL, proxy_main, p);
}

static void proxy_stop(proxy_t *p)
{
	atomic_store(&p->quit, true);
	pthread_join(p->th, NULL);
	for (int i = 0; i < PROXY_MAX / 2; i++)
		if (p->fds[2 * i] >= 0)
			proxy_close_pair(p, i);
	for (int i = 0; i < PROXY_MAX; i++)
		if (p->held[i] >= 0)
			close(p->held[i]);
	close(p->lfd);
}

/* ---------- electors and their callbacks ---------- */

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

static _Atomic int seq;

typedef struct cand {
	char *identity;
	ck_le_t *e;
	_Atomic int started, stopped;
	_Atomic uint64_t started_ms, stopped_ms;
	_Atomic int started_seq, stopped_seq;
	pthread_mutex_t mu;
	char events[512];
} cand_t;

static void on_started(void *ud)
{
	cand_t *c = ud;
	atomic_store(&c->started_ms, now_ms());
	atomic_store(&c->started_seq, atomic_fetch_add(&seq, 1) + 1);
	atomic_fetch_add(&c->started, 1);
}

static void on_stopped(void *ud)
{
	cand_t *c = ud;
	atomic_store(&c->stopped_ms, now_ms());
	atomic_store(&c->stopped_seq, atomic_fetch_add(&seq, 1) + 1);
	atomic_fetch_add(&c->stopped, 1);
}

static void on_event(void *ud, const char *reason, const char *msg)
{
	cand_t *c = ud;
	pthread_mutex_lock(&c->mu);
	size_t n = strlen(c->events);
	snprintf(c->events + n, sizeof(c->events) - n, "%s: %s|", reason, msg);
	pthread_mutex_unlock(&c->mu);
}

static void on_log(void *ud, ck_le_log_level_t level, const char *msg)
{
	cand_t *c = ud;
	fprintf(stderr, "  [%s] %c %s\n", c->identity, "IWE"[level], msg);
}

static void cand_start(cand_t *c, ck_client_t *kc, const char *lease, bool release)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->mu, NULL);
	char *host = ck_le_default_identity();
	c->identity = ck_xasprintf("it-%s", host);
	free(host);
	ck_le_config_t cfg = {
	    .lease_namespace = NS,
	    .lease_name = lease,
	    .identity = c->identity,
	    .lease_duration_ms = LEASE_MS,
	    .renew_deadline_ms = RENEW_MS,
	    .retry_period_ms = RETRY_MS,
	    .release_on_cancel = release,
	    .on_started_leading = on_started,
	    .on_stopped_leading = on_stopped,
	    .on_event = on_event,
	    .on_log = on_log,
	    .ud = c,
	};
	char *err = NULL;
	c->e = ck_le_start(kc, &cfg, &err);
	ck_assert_msg(c->e != NULL, "le_start: %s", err);
}

static void cand_stop(cand_t *c)
{
	ck_le_stop(c->e);
	c->e = NULL;
}

static void cand_free(cand_t *c)
{
	ck_le_stop(c->e);
	pthread_mutex_destroy(&c->mu);
	free(c->identity);
}

/* Waits up to ms for *flag >= 1; returns whether it came. */
static bool wait_flag(_Atomic int *flag, unsigned ms)
{
	uint64_t end = now_ms() + ms;
	while (now_ms() < end) {
		if (atomic_load(flag) >= 1)
			return true;
		sleep_ms(10);
	}
	return atomic_load(flag) >= 1;
}

static char *lease_name(void)
{
	return ck_xasprintf("le-it-%08" PRIx64, ck_rand_u64() & 0xffffffffu);
}

/* GETs the Lease (new reference) or NULL if absent. */
static ck_obj_t *get_lease(ck_client_t *kc, const char *name)
{
	ck_result_t res = {0};
	int rc = ck_client_get_sync(kc, &ck_type_lease, NS, name, &res);
	ck_obj_t *obj = NULL;
	if (rc == 0) {
		obj = res.obj;
		res.obj = NULL;
	} else {
		ck_assert_msg(ck_result_is_not_found(&res), "get lease: %s", res.error);
	}
	ck_result_clear(&res);
	return obj;
}

static void delete_lease(ck_client_t *kc, const char *name)
{
	ck_result_t res = {0};
	ck_client_delete_sync(kc, &ck_type_lease, NS, name, NULL, &res);
	ck_result_clear(&res);
}

static void expect_holder(ck_client_t *kc, const char *name, const char *holder,
                          int32_t transitions)
{
	ck_obj_t *l = get_lease(kc, name);
	ck_assert_ptr_nonnull(l);
	const char *h = ck_lease_holder_identity(l);
	ck_assert_str_eq(h != NULL ? h : "", holder);
	int32_t t = -1;
	ck_assert(ck_lease_transitions(l, &t));
	ck_assert_int_eq(t, transitions);
	ck_obj_unref(l);
}

/* ---------- tests ---------- */

static kenv_t direct;

static void setup(void)
{
	kenv_start(&direct, NULL);
}
static void teardown(void)
{
	kenv_stop(&direct);
}

/* The Lease lock alone: create, read, and a write over a stale resourceVersion is a
 * conflict (the server checks the version carried in the merge patch). */
START_TEST(test_lock_optimistic_concurrency)
{
	char *name = lease_name(), *err = NULL;
	le_lock_t *l1 = le_lock_lease_new(direct.kc, NS, name);
	le_lock_t *l2 = le_lock_lease_new(direct.kc, NS, name);
	le_record_t rec, got;
	le_record_init(&rec);
	le_record_init(&got);

	ck_assert_int_eq(l1->ops->get(l1, 5000, &got, &err), LE_LOCK_NOT_FOUND);
	free(err);
	err = NULL;
	ck_assert_int_eq(l1->ops->update(l1, 5000, &rec, &err), LE_LOCK_CONFLICT); /* unread */
	free(err);
	err = NULL;

	free(rec.holder);
	rec.holder = ck_xstrdup("one");
	rec.lease_duration_s = 7;
	free(rec.renew_time);
	rec.renew_time = ck_xstrdup("2026-11-29T12:00:00.123456Z");
	rec.transitions = 2;
	ck_assert_int_eq(l1->ops->create(l1, 5000, &rec, &err), LE_LOCK_OK);
	ck_assert_int_eq(l2->ops->create(l2, 5000, &rec, &err), LE_LOCK_CONFLICT);
	free(err);
	err = NULL;

	ck_assert_int_eq(l2->ops->get(l2, 5000, &got, &err), LE_LOCK_OK);
	ck_assert_str_eq(got.holder, "one");
	ck_assert_int_eq(got.lease_duration_s, 7);
	ck_assert_str_eq(got.renew_time, "2026-11-29T12:00:00.123456Z");
	ck_assert_str_eq(got.acquire_time, "");
	ck_assert_int_eq(got.transitions, 2);

	free(rec.holder);
	rec.holder = ck_xstrdup("two");
	ck_assert_int_eq(l2->ops->update(l2, 5000, &rec, &err), LE_LOCK_OK);
	/* l1 still has the version of its create. */
	ck_assert_int_eq(l1->ops->update(l1, 5000, &rec, &err), LE_LOCK_CONFLICT);
	ck_assert_ptr_nonnull(err);
	free(err);
	err = NULL;
	ck_assert_int_eq(l1->ops->get(l1, 5000, &got, &err), LE_LOCK_OK);
	ck_assert_str_eq(got.holder, "two");
	ck_assert_int_eq(l1->ops->update(l1, 5000, &rec, &err), LE_LOCK_OK);

	le_record_free(&rec);
	le_record_free(&got);
	l1->ops->free(l1);
	l2->ops->free(l2);
	delete_lease(direct.kc, name);
	free(name);
}
END_TEST

/* Two electors, one leader; kill it (no release): the other takes over within the
 * lease duration. */
START_TEST(test_two_electors_kill_leader)
{
	char *name = lease_name();
	cand_t a, b;
	cand_start(&a, direct.kc, name, false);
	ck_assert(wait_flag(&a.started, 10000));
	cand_start(&b, direct.kc, name, false);
	sleep_ms(2 * LEASE_MS); /* a renews; b must stay a standby */
	ck_assert(ck_le_is_leader(a.e));
	ck_assert(!ck_le_is_leader(b.e));
	ck_assert_int_eq(atomic_load(&b.started), 0);
	char *seen = ck_le_leader(b.e);
	ck_assert_str_eq(seen, a.identity);
	free(seen);

	ck_obj_t *l = get_lease(direct.kc, name);
	ck_assert_ptr_nonnull(l);
	ck_assert_str_eq(ck_lease_holder_identity(l), a.identity);
	int32_t d = 0;
	ck_assert(ck_lease_duration_seconds(l, &d));
	ck_assert_int_eq(d, 3);
	int64_t acq, ren;
	ck_assert(ck_lease_acquire_time_ns(l, &acq));
	ck_assert(ck_lease_renew_time_ns(l, &ren));
	ck_assert_int_gt(ren, acq); /* renewed since it was acquired */
	ck_assert_uint_eq(strlen(ck_lease_renew_time(l)), strlen("2026-11-29T12:00:00.000000Z"));
	ck_obj_unref(l);

	uint64_t killed = now_ms();
	cand_stop(&a); /* no release: like a crash */
	expect_holder(direct.kc, name, a.identity, 0);
	ck_assert(wait_flag(&b.started, TAKEOVER_MAX_MS));
	uint64_t took = atomic_load(&b.started_ms) - killed;
	fprintf(stderr, "  takeover after kill: %" PRIu64 " ms (lease %u ms)\n", took, LEASE_MS);
	/* Not before a's lease could have lapsed: its last renewal was sent about one
	 * retry period (plus a request's latency) before the kill. */
	ck_assert_uint_ge(took, LEASE_MS - RETRY_MS - SLACK_MS / 2);
	ck_assert_uint_le(took, TAKEOVER_MAX_MS);
	expect_holder(direct.kc, name, b.identity, 1);
	ck_assert_ptr_nonnull(strstr(b.events, "LeaderElection: "));
	ck_assert_ptr_nonnull(strstr(b.events, " became leader|"));

	cand_free(&a);
	cand_free(&b);
	delete_lease(direct.kc, name);
	free(name);
}
END_TEST

/* Release on stop: the standby takes over at its next retry. */
START_TEST(test_release_fast_takeover)
{
	char *name = lease_name();
	cand_t a, b;
	cand_start(&a, direct.kc, name, true);
	ck_assert(wait_flag(&a.started, 10000));
	cand_start(&b, direct.kc, name, true);
	sleep_ms(LEASE_MS);
	ck_assert_int_eq(atomic_load(&b.started), 0);

	uint64_t released = now_ms();
	cand_stop(&a);
	ck_assert_int_eq(atomic_load(&a.stopped), 1);
	ck_assert(wait_flag(&b.started, LEASE_MS + SLACK_MS));
	uint64_t took = atomic_load(&b.started_ms) - released;
	fprintf(stderr, "  takeover after release: %" PRIu64 " ms (retry %u ms)\n", took, RETRY_MS);
	/* Two retry periods, with client-go's 1.2 jitter: at most 2.2 x retry. */
	ck_assert_uint_le(took, (unsigned)(2.2 * RETRY_MS) + SLACK_MS);
	expect_holder(direct.kc, name, b.identity, 1);

	cand_stop(&b); /* released too: holder empty, duration 1 */
	ck_obj_t *l = get_lease(direct.kc, name);
	ck_assert_str_eq(ck_lease_holder_identity(l) ? ck_lease_holder_identity(l) : "", "");
	int32_t d = 0;
	ck_assert(ck_lease_duration_seconds(l, &d));
	ck_assert_int_eq(d, 1);
	ck_obj_unref(l);
	char *want =
	    ck_xasprintf("LeaderElection: %s became leader|LeaderElection: %s stopped leading|",
	                 a.identity, a.identity);
	ck_assert_str_eq(a.events, want);
	free(want);
	cand_free(&a);
	cand_free(&b);
	delete_lease(direct.kc, name);
	free(name);
}
END_TEST

/* The leader loses the API server (a partition: requests hang). It stops leading
 * before the standby may take over the lease. */
START_TEST(test_network_cut)
{
	char *name = lease_name();
	struct ck_config_view v;
	ck_config_view(ck_client_config(direct.kc), &v);
	proxy_t px;
	proxy_start(&px, v.server);
	char *master = ck_xasprintf("https://127.0.0.1:%u", px.port);
	kenv_t cut;
	kenv_start(&cut, master);

	cand_t a, b;
	cand_start(&a, cut.kc, name, true);
	ck_assert(wait_flag(&a.started, 10000));
	cand_start(&b, direct.kc, name, true);
	sleep_ms(LEASE_MS);
	ck_assert(ck_le_is_leader(a.e));
	ck_assert_int_eq(atomic_load(&b.started), 0);

	uint64_t cut_at = now_ms();
	atomic_store(&px.cut, true);
	ck_assert(wait_flag(&a.stopped, RENEW_MS + RETRY_MS + SLACK_MS));
	ck_assert(!ck_le_is_leader(a.e));
	ck_assert(wait_flag(&b.started, TAKEOVER_MAX_MS));
	fprintf(stderr, "  cut: a stopped after %" PRIu64 " ms, b started after %" PRIu64 " ms\n",
	        atomic_load(&a.stopped_ms) - cut_at, atomic_load(&b.started_ms) - cut_at);
	ck_assert_int_lt(atomic_load(&a.stopped_seq), atomic_load(&b.started_seq));
	ck_assert_uint_lt(atomic_load(&a.stopped_ms), atomic_load(&b.started_ms));
	expect_holder(direct.kc, name, b.identity, 1);

	cand_free(&b);
	/* a's stop tries to release over the cut network: bounded by its deadline,
	 * and a lease that is not ours is not released. */
	uint64_t t = now_ms();
	cand_free(&a);
	ck_assert_uint_le(now_ms() - t, RENEW_MS + SLACK_MS);
	ck_assert_int_eq(atomic_load(&a.started), 1);
	ck_assert_int_eq(atomic_load(&a.stopped), 1);

	kenv_stop(&cut);
	proxy_stop(&px);
	free(master);
	delete_lease(direct.kc, name);
	free(name);
}
END_TEST

Suite *suite_leaderelection(void)
{
	Suite *s = suite_create("leaderelection");
	TCase *tc = tcase_create("lease");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_lock_optimistic_concurrency);
	tcase_add_test(tc, test_two_electors_kill_leader);
	tcase_add_test(tc, test_release_fast_takeover);
	tcase_add_test(tc, test_network_cut);
	suite_add_tcase(s, tc);
	return s;
}
