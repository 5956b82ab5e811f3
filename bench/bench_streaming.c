/*
 * bench_streaming: initial sync of a Deployment informer, streaming list
 * (sendInitialEvents) against a paged list, on the local control plane
 * ($KUBECONFIG). Prints figures; asserts nothing. Driven by bench_streaming.sh.
 *
 *   bench_streaming populate <namespace> <objects>
 *       Makes sure <namespace> holds <objects> small Deployments (paused, no
 *       replicas: the controller-manager makes no ReplicaSets for them).
 *   bench_streaming sync <namespace> stream|list
 *       In this fresh process: an informer on <namespace>'s Deployments, from
 *       start to HasSynced. Prints one line: mode, objects, seconds, CPU seconds,
 *       VmHWM and VmRSS (KiB) at sync, and whether the stream was used.
 *
 * Why a process per measurement: VmHWM is the peak of the whole process, so only a
 * fresh one measures the sync alone.
 */
#include "pkg/cache/internal.h"
#include <ckube/cache.h>
#include <ckube/client.h>
#include <ckube/log.h>
#include <ckube/types.h>

#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* A field of /proc/self/status, in KiB. */
static long proc_kib(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (f == NULL)
		return -1;
	char line[256];
	long v = -1;
	size_t n = strlen(field);
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, field, n) == 0 && line[n] == ':')
			v = atol(line + n + 1);
	fclose(f);
	return v;
}

static const ck_type_t t_ns = {
    .group = "", .version = "v1", .kind = "Namespace", .resource = "namespaces"};

static ck_client_t *client_new(struct ev_loop *loop)
{
	const char *kc = getenv("KUBECONFIG");
	if (kc == NULL || kc[0] == '\0') {
		fprintf(stderr, "bench_streaming: KUBECONFIG is not set\n");
		return NULL;
	}
	char *err = NULL;
	ck_config_load_opts_t lo = {.kubeconfig = kc};
	ck_config_t *cfg = ck_config_load(&lo, &err);
	if (cfg == NULL) {
		fprintf(stderr, "bench_streaming: %s\n", err);
		free(err);
		return NULL;
	}
	ck_client_opts_t co = {.qps = -1, .request_timeout_ms = 600000};
	ck_client_t *c = ck_client_new(loop, cfg, &co, &err);
	if (c == NULL) {
		fprintf(stderr, "bench_streaming: %s\n", err);
		free(err);
	}
	return c;
}

/* ------------------------------------------------------------ populate */

typedef struct pop {
	ck_client_t *c;
	const char *ns;
	size_t want;
	atomic_size_t next;
	atomic_size_t created;
	atomic_int failed;
	atomic_int done;
	char **have; /* sorted names already there */
	size_t nhave;
} pop_t;

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void *creator(void *arg)
{
	pop_t *p = arg;
	for (;;) {
		size_t i = atomic_fetch_add(&p->next, 1);
		if (i >= p->want)
			break;
		char name[64];
		snprintf(name, sizeof(name), "s-%06zu", i);
		const char *key = name;
		if (p->nhave > 0 && bsearch(&key, p->have, p->nhave, sizeof(char *), cmp_str))
			continue;
		char *body = ck_xasprintf(
		    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":"
		    "\"%s\",\"labels\":{\"app\":\"s-%zu\"}},\"spec\":{\"paused\":true,"
		    "\"replicas\":0,\"selector\":{\"matchLabels\":{\"app\":\"s-%zu\"}},"
		    "\"template\":{\"metadata\":{\"labels\":{\"app\":\"s-%zu\"}},\"spec\":{"
		    "\"containers\":[{\"name\":\"c\",\"image\":\"nginx:latest\"}]}}}}",
		    name, i, i, i);
		ck_result_t r = {0};
		int rc = ck_client_create_sync(p->c, &ck_type_deployment, p->ns, body, NULL, &r);
		free(body);
		if (rc != 0 && !ck_result_is_already_exists(&r)) {
			if (atomic_fetch_add(&p->failed, 1) < 3)
				fprintf(stderr, "create %s: %s\n", name, r.error);
		} else {
			atomic_fetch_add(&p->created, 1);
		}
		ck_result_clear(&r);
	}
	return NULL;
}

static void *populate_main(void *arg)
{
	pop_t *p = arg;
	ck_result_t r = {0};
	char *body = ck_xasprintf("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{"
	                          "\"name\":\"%s\"}}",
	                          p->ns);
	ck_client_create_sync(p->c, &t_ns, NULL, body, NULL, &r);
	free(body);
	ck_result_clear(&r);
	ck_obj_t **items = NULL;
	size_t n = 0;
	char *rv = NULL;
	ck_list_opts_t o = {.limit = 500};
	if (ck_client_list_sync(p->c, &ck_type_deployment, p->ns, &o, &items, &n, &rv, &r) == 0) {
		p->have = ck_xmalloc((n + 1) * sizeof(char *));
		for (size_t i = 0; i < n; i++) {
			p->have[p->nhave++] = ck_xstrdup(items[i]->name);
			ck_obj_unref(items[i]);
		}
		qsort(p->have, p->nhave, sizeof(char *), cmp_str);
	}
	free(items);
	free(rv);
	ck_result_clear(&r);
	double t0 = now_s();
	enum { NTHREADS = 16 };
	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, creator, p);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	size_t made = atomic_load(&p->created);
	fprintf(stderr, "populate: %zu Deployments in %s (%zu were there, %zu created in %.1f s)\n",
	        p->nhave + made, p->ns, p->nhave, made, now_s() - t0);
	atomic_store(&p->done, 1);
	return NULL;
}

static void flag_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	if (atomic_load((atomic_int *)w->data))
		ev_break(loop, EVBREAK_ONE);
}

static int run_populate(const char *ns, size_t want)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	pop_t p = {.ns = ns, .want = want};
	p.c = client_new(loop);
	if (p.c == NULL)
		return 1;
	pthread_t th;
	pthread_create(&th, NULL, populate_main, &p);
	ev_timer t;
	ev_timer_init(&t, flag_tick, 0.01, 0.01);
	t.data = &p.done;
	ev_timer_start(loop, &t);
	ev_run(loop, 0);
	ev_timer_stop(loop, &t);
	pthread_join(th, NULL);
	for (size_t i = 0; i < p.nhave; i++)
		free(p.have[i]);
	free(p.have);
	int failed = atomic_load(&p.failed);
	ck_client_free(p.c);
	ev_loop_destroy(loop);
	if (failed > 0)
		fprintf(stderr, "populate: %d creates failed\n", failed);
	return failed > 0;
}

/* ------------------------------------------------------------ sync */

typedef struct sync_watch {
	ev_timer t;
	ck_cache_informer_t *inf;
	double t_synced, cpu_synced;
	long hwm_kib, rss_kib;
} sync_watch_t;

static void sync_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	sync_watch_t *s = (sync_watch_t *)w;
	if (!ck_cache_informer_has_synced(s->inf))
		return;
	s->t_synced = now_s();
	s->cpu_synced = cpu_s();
	s->hwm_kib = proc_kib("VmHWM");
	s->rss_kib = proc_kib("VmRSS");
	ev_break(loop, EVBREAK_ONE);
}

static int run_sync(const char *ns, bool stream)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	ck_client_t *c = client_new(loop);
	if (c == NULL)
		return 1;
	long rss0 = proc_kib("VmRSS");
	double cpu0 = cpu_s();
	double t0 = now_s();
	ck_cache_informer_opts_t o = {.streaming_list =
	                                  stream ? CK_CACHE_STREAMING_ON : CK_CACHE_STREAMING_OFF};
	ck_cache_informer_t *inf = ck_cache_informer_new(
	    loop, &ck_type_deployment, ck_cache_lw_kube_new(c, &ck_type_deployment, ns), &o);
	ck_cache_informer_start(inf, NULL);
	sync_watch_t sw = {.inf = inf};
	ev_timer_init(&sw.t, sync_tick, 0.001, 0.001);
	ev_timer_start(loop, &sw.t);
	ev_run(loop, 0);
	ev_timer_stop(loop, &sw.t);
	ck_cache_stats_t st;
	ck_cache_informer_stats(inf, &st);
	/* Streamed, or this round fell back to a list (a refusal). */
	bool streamed = stream && !cache_reflector_streaming_refused(cache_informer_reflector(inf));
	printf("%s %llu %.2f %.2f %ld %ld %ld %s\n", stream ? "stream" : "list",
	       (unsigned long long)st.objects, sw.t_synced - t0, sw.cpu_synced - cpu0, rss0,
	       sw.hwm_kib, sw.rss_kib, stream ? (streamed ? "streamed" : "FELL-BACK") : "paged");
	ck_cache_informer_free(inf);
	ck_client_free(c);
	ev_loop_destroy(loop);
	return 0;
}

int main(int argc, char **argv)
{
	const char *v = getenv("BENCH_V");
	if (v != NULL)
		ck_log_set_verbosity(atoi(v));
	if (argc == 4 && strcmp(argv[1], "populate") == 0)
		return run_populate(argv[2], (size_t)atol(argv[3]));
	if (argc == 4 && strcmp(argv[1], "sync") == 0 &&
	    (strcmp(argv[3], "stream") == 0 || strcmp(argv[3], "list") == 0))
		return run_sync(argv[2], strcmp(argv[3], "stream") == 0);
	fprintf(stderr, "usage: %s populate <namespace> <objects> | sync <namespace> stream|list\n",
	        argv[0]);
	return 2;
}
