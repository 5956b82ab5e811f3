/*
 * bench_cache: figures for pkg/cache (prints them; asserts nothing).
 *
 *   bench_cache dispatch [objects] [events]
 *       In-process: watch events from the fake source through the reflector, the
 *       delta queue, the store (with its namespace index) to one handler. No decode.
 *   bench_cache memory [objects]
 *       In-process: bytes per cached Deployment, decoded from the realistic fixture
 *       (tests/fixtures/json/deployment.json: managedFields, annotations, status),
 *       tables and indexes included, measured by the store and by malloc.
 *   bench_cache cluster <objects>
 *       On the local control plane ($KUBECONFIG): makes sure namespace cache-bench
 *       holds <objects> Deployments (Foo-owned, as the controller makes them), then
 *       runs an all-namespaces Deployment informer from scratch: time to HasSynced,
 *       CPU seconds, peak and steady RSS, bytes per cached object; and, for
 *       comparison, the same list with the plain client (what the server costs).
 */
#include "pkg/cache/internal.h"
#include <ckube/cache.h>
#include <ckube/cache_fake.h>
#include <ckube/client.h>
#include <ckube/types.h>

#include <ev.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

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

/* VmRSS or VmHWM from /proc/self/status, in KiB. */
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

static void reset_peak_rss(void)
{
	FILE *f = fopen("/proc/self/clear_refs", "w");
	if (f != NULL) {
		fputs("5", f);
		fclose(f);
	}
}

/* ------------------------------------------------------------ dispatch */

static const ck_type_t bench_type = {.group = "apps",
                                     .version = "v1",
                                     .kind = "Deployment",
                                     .resource = "deployments",
                                     .namespaced = true};

static ck_obj_t *mk(const char *ns, const char *name, const char *rv)
{
	ck_obj_builder_t *b = ck_obj_builder_new(&bench_type);
	ck_obj_builder_set_meta(b, "namespace", ns, strlen(ns));
	ck_obj_builder_set_meta(b, "name", name, strlen(name));
	ck_obj_builder_set_meta(b, "resourceVersion", rv, strlen(rv));
	ck_obj_builder_add_label(b, "app", 3, "nginx", 5);
	ck_obj_t *o = ck_obj_builder_finish(b);
	ck_obj_builder_free(b);
	return o;
}

static uint64_t handled;
static void h_add(void *ud, ck_obj_t *obj, bool initial)
{
	(void)ud;
	(void)obj;
	(void)initial;
	handled++;
}
static void h_update(void *ud, ck_obj_t *old, ck_obj_t *obj)
{
	(void)ud;
	(void)old;
	(void)obj;
	handled++;
}
static void h_delete(void *ud, const char *key, ck_obj_t *obj, bool unknown)
{
	(void)ud;
	(void)key;
	(void)obj;
	(void)unknown;
	handled++;
}

static int run_dispatch(size_t nobj, size_t nevents)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	ck_cache_fake_lw_t *fake = ck_cache_fake_lw_new();
	ck_cache_informer_t *inf =
	    ck_cache_informer_new(loop, &bench_type, ck_cache_fake_lw_source(fake), NULL);
	ck_cache_handler_t h = {h_add, h_update, h_delete};
	ck_cache_informer_add_handler(inf, &h, NULL);
	ck_cache_informer_start(inf, NULL);

	/* Two versions of every object; events alternate between them. */
	ck_obj_t **pool = malloc(2 * nobj * sizeof(ck_obj_t *));
	for (size_t i = 0; i < nobj; i++) {
		char ns[32], name[32];
		snprintf(ns, sizeof(ns), "ns-%zu", i % 100);
		snprintf(name, sizeof(name), "deploy-%06zu", i);
		pool[2 * i] = mk(ns, name, "100");
		pool[2 * i + 1] = mk(ns, name, "101");
	}
	ck_cache_fake_req_t *l = ck_cache_fake_lw_last(fake, false);
	double t0 = now_s();
	for (size_t i = 0; i < nobj; i++)
		ck_cache_fake_req_item(l, ck_obj_ref(pool[2 * i]));
	ck_cache_fake_req_meta(l, "100", NULL);
	ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
	cache_informer_drain(inf);
	double t_list = now_s() - t0;

	ck_cache_fake_req_t *w = ck_cache_fake_lw_last(fake, true);
	handled = 0;
	double c0 = cpu_s();
	t0 = now_s();
	/* Batches as a busy watch stream would deliver them between loop iterations. */
	const size_t batch = 256;
	for (size_t e = 0; e < nevents;) {
		for (size_t k = 0; k < batch && e < nevents; k++, e++) {
			size_t i = (e * 7919) % nobj;
			ck_obj_t *o = pool[2 * i + ((e / nobj) % 2 == 0 ? 1 : 0)];
			ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, ck_obj_ref(o));
		}
		cache_informer_drain(inf);
	}
	double dt = now_s() - t0;
	double dc = cpu_s() - c0;
	printf("dispatch: %zu objects listed in %.3f s (%.0f objects/s through Replace)\n", nobj,
	       t_list, (double)nobj / t_list);
	printf("dispatch: %zu watch events -> %llu handler calls in %.3f s: %.0f events/s "
	       "(%.2f us/event, CPU %.3f s)\n",
	       nevents, (unsigned long long)handled, dt, (double)nevents / dt,
	       dt * 1e6 / (double)nevents, dc);
	for (size_t i = 0; i < 2 * nobj; i++)
		ck_obj_unref(pool[i]);
	free(pool);
	ck_cache_informer_free(inf);
	ck_cache_fake_lw_free(fake);
	ev_loop_destroy(loop);
	return 0;
}

/* ------------------------------------------------------------ memory */

static char *replace_once(const char *s, const char *from, const char *to)
{
	const char *p = strstr(s, from);
	if (p == NULL)
		return NULL;
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_append(&b, s, (size_t)(p - s));
	ck_sbuf_puts(&b, to);
	ck_sbuf_puts(&b, p + strlen(from));
	return ck_sbuf_steal(&b);
}

static int run_memory(size_t nobj)
{
	const char *path = "tests/fixtures/json/deployment.json";
	char *json = NULL, *err = NULL;
	size_t len = 0;
	if (ck_file_read_all(path, &json, &len, &err) != 0) {
		fprintf(stderr, "memory: %s\n", err);
		return 1;
	}
	const char *ident =
	    "\"name\":\"example-foo\",\"namespace\":\"default\",\"uid\":\"3c5e1d2a-8f4b-"
	    "4c6d-9e0f-1a2b3c4d5e6f\"";
	if (strstr(json, ident) == NULL) {
		fprintf(stderr, "memory: fixture changed: metadata identity not found\n");
		return 1;
	}
	malloc_trim(0);
	size_t heap0 = mallinfo2().uordblks;
	ck_cache_store_t *s = ck_cache_store_new();
	for (size_t i = 0; i < nobj; i++) {
		char id[200];
		snprintf(
		    id, sizeof(id),
		    "\"name\":\"foo-%06zu\",\"namespace\":\"team-%03zu\",\"uid\":\"%08zx-8f4b-4c6d-"
		    "9e0f-1a2b3c4d5e6f\"",
		    i, i % 200, i);
		char *one = replace_once(json, ident, id);
		ck_obj_t *o = ck_dec_object(&ck_type_deployment, one, strlen(one), &err);
		free(one);
		if (o == NULL) {
			fprintf(stderr, "memory: decode: %s\n", err);
			return 1;
		}
		ck_obj_unref(ck_cache_store_upsert(s, o));
		ck_obj_unref(o);
	}
	size_t heap1 = mallinfo2().uordblks;
	size_t obj_bytes = 0;
	size_t tables = ck_cache_store_mem_bytes(s, &obj_bytes);
	printf("memory: %zu Deployments (fixture: %zu bytes of JSON each) cached\n", nobj, len);
	printf("memory: objects %.0f B/object, store tables + namespace index %.1f B/object, "
	       "total %.0f B/object\n",
	       (double)obj_bytes / (double)nobj, (double)tables / (double)nobj,
	       (double)(obj_bytes + tables) / (double)nobj);
	printf("memory: malloc in use %.0f B/object (allocator overhead included)\n",
	       (double)(heap1 - heap0) / (double)nobj);
	ck_cache_store_free(s);
	free(json);
	return 0;
}

/* ------------------------------------------------------------ cluster */

static const ck_type_t t_ns = {
    .group = "", .version = "v1", .kind = "Namespace", .resource = "namespaces"};

#define BENCH_NS "cache-bench"

typedef struct cl {
	struct ev_loop *loop;
	ck_client_t *c;
	size_t want;
	atomic_size_t next;
	atomic_size_t created;
	atomic_int failed;
	atomic_int done;
	char ns_uid[64]; /* the owner: the namespace itself (a missing owner gets GC'd) */
	char **have;     /* names already there */
	size_t nhave;
	int threads_left;
	pthread_mutex_t mu;
} cl_t;

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void *creator(void *arg)
{
	cl_t *c = arg;
	for (;;) {
		size_t i = atomic_fetch_add(&c->next, 1);
		if (i >= c->want)
			break;
		char name[64];
		snprintf(name, sizeof(name), "bench-%06zu", i);
		const char *key = name;
		if (c->nhave > 0 && bsearch(&key, c->have, c->nhave, sizeof(char *), cmp_str))
			continue;
		char *body = ck_xasprintf(
		    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":"
		    "\"%s\",\"labels\":{\"app\":\"nginx\",\"controller\":\"foo-%zu\"},"
		    "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"name\":"
		    "\"%s\",\"uid\":\"%s\",\"controller\":true,\"blockOwnerDeletion\":true}]},"
		    "\"spec\":{"
		    "\"replicas\":0,\"selector\":{\"matchLabels\":{\"app\":\"nginx\","
		    "\"controller\":"
		    "\"foo-%zu\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"nginx\","
		    "\"controller\":\"foo-%zu\"}},\"spec\":{\"containers\":[{\"name\":\"nginx\","
		    "\"image\":\"nginx:latest\"}]}}}}",
		    name, i, BENCH_NS, c->ns_uid, i, i);
		ck_result_t r = {0};
		int rc = ck_client_create_sync(c->c, &ck_type_deployment, BENCH_NS, body, NULL, &r);
		free(body);
		if (rc != 0 && !ck_result_is_already_exists(&r)) {
			if (atomic_fetch_add(&c->failed, 1) < 3)
				fprintf(stderr, "create %s: %s\n", name, r.error);
		} else {
			atomic_fetch_add(&c->created, 1);
		}
		ck_result_clear(&r);
	}
	pthread_mutex_lock(&c->mu);
	if (--c->threads_left == 0)
		atomic_store(&c->done, 1);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

static void *populate_main(void *arg)
{
	cl_t *c = arg;
	ck_result_t r = {0};
	char *body = ck_xasprintf("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{"
	                          "\"name\":\"%s\"}}",
	                          BENCH_NS);
	ck_client_create_sync(c->c, &t_ns, NULL, body, NULL, &r);
	free(body);
	ck_result_clear(&r);
	if (ck_client_get_sync(c->c, &t_ns, NULL, BENCH_NS, &r) == 0)
		snprintf(c->ns_uid, sizeof(c->ns_uid), "%s", r.obj->uid);
	ck_result_clear(&r);
	/* What is there already (a previous run). */
	ck_obj_t **items = NULL;
	size_t n = 0;
	char *rv = NULL;
	ck_list_opts_t o = {.limit = 500};
	if (ck_client_list_sync(c->c, &ck_type_deployment, BENCH_NS, &o, &items, &n, &rv, &r) ==
	    0) {
		c->have = ck_xmalloc((n + 1) * sizeof(char *));
		for (size_t i = 0; i < n; i++) {
			c->have[c->nhave++] = ck_xstrdup(items[i]->name);
			ck_obj_unref(items[i]);
		}
		qsort(c->have, c->nhave, sizeof(char *), cmp_str);
	}
	free(items);
	free(rv);
	ck_result_clear(&r);
	double t0 = now_s();
	enum { NTHREADS = 12 };
	pthread_t th[NTHREADS];
	c->threads_left = NTHREADS;
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, creator, c);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	size_t made = atomic_load(&c->created);
	if (made > 0)
		fprintf(stderr, "cluster: created %zu Deployments in %.1f s (%zu were there)\n",
		        made, now_s() - t0, c->nhave);
	return NULL;
}

static void done_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	if (atomic_load((atomic_int *)w->data))
		ev_break(loop, EVBREAK_ONE);
}

static void run_loop_until(struct ev_loop *loop, atomic_int *flag)
{
	ev_timer t;
	ev_timer_init(&t, done_tick, 0.01, 0.01);
	t.data = flag;
	ev_timer_start(loop, &t);
	ev_run(loop, 0);
	ev_timer_stop(loop, &t);
}

typedef struct lister_ctx {
	ck_client_t *c;
	atomic_int done;
	double secs;
	size_t n;
} lister_ctx_t;

static void *plain_list(void *arg)
{
	lister_ctx_t *l = arg;
	ck_obj_t **items = NULL;
	size_t n = 0;
	char *rv = NULL;
	ck_result_t r = {0};
	ck_list_opts_t o = {.resource_version = "0", .limit = 500};
	double t0 = now_s();
	if (ck_client_list_sync(l->c, &ck_type_deployment, NULL, &o, &items, &n, &rv, &r) != 0)
		fprintf(stderr, "plain list: %s\n", r.error);
	l->secs = now_s() - t0;
	l->n = n;
	for (size_t i = 0; i < n; i++)
		ck_obj_unref(items[i]);
	free(items);
	free(rv);
	ck_result_clear(&r);
	atomic_store(&l->done, 1);
	return NULL;
}

typedef struct sync_watch {
	ev_timer t;
	ck_cache_informer_t *inf;
	double t_synced;
	double cpu_synced;
	long hwm_kib;
} sync_watch_t;

static void sync_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	sync_watch_t *s = (sync_watch_t *)w;
	if (ck_cache_informer_has_synced(s->inf)) {
		s->t_synced = now_s();
		s->cpu_synced = cpu_s();
		s->hwm_kib = proc_kib("VmHWM");
		ev_break(loop, EVBREAK_ONE);
	}
}

static void sleep_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ONE);
}

static int run_cluster(size_t want)
{
	const char *kc = getenv("KUBECONFIG");
	if (kc == NULL || kc[0] == '\0') {
		fprintf(stderr, "cluster: KUBECONFIG is not set\n");
		return 1;
	}
	cl_t c;
	memset(&c, 0, sizeof(c));
	pthread_mutex_init(&c.mu, NULL);
	c.want = want;
	c.loop = ev_loop_new(EVFLAG_AUTO);
	char *err = NULL;
	ck_config_load_opts_t lo = {.kubeconfig = kc};
	ck_config_t *cfg = ck_config_load(&lo, &err);
	if (cfg == NULL) {
		fprintf(stderr, "cluster: %s\n", err);
		return 1;
	}
	ck_client_opts_t co = {.qps = -1, .request_timeout_ms = 600000};
	c.c = ck_client_new(c.loop, cfg, &co, &err);
	if (c.c == NULL) {
		fprintf(stderr, "cluster: %s\n", err);
		return 1;
	}
	pthread_t th;
	c.threads_left = 1;
	pthread_create(&th, NULL, populate_main, &c);
	/* populate_main's creators flag done; it joins them first. */
	run_loop_until(c.loop, &c.done);
	pthread_join(th, NULL);
	if (atomic_load(&c.failed) > 0)
		fprintf(stderr, "cluster: %d creates failed\n", atomic_load(&c.failed));

	/* What the server costs: the same list with the plain client, all in memory. */
	lister_ctx_t pl = {.c = c.c};
	pthread_create(&th, NULL, plain_list, &pl);
	run_loop_until(c.loop, &pl.done);
	pthread_join(th, NULL);
	malloc_trim(0);

	/* The informer from scratch. */
	long rss0 = proc_kib("VmRSS");
	reset_peak_rss();
	double cpu0 = cpu_s();
	double t0 = now_s();
	ck_cache_informer_t *inf =
	    ck_cache_informer_new(c.loop, &ck_type_deployment,
	                          ck_cache_lw_kube_new(c.c, &ck_type_deployment, NULL), NULL);
	ck_cache_informer_start(inf, NULL);
	sync_watch_t sw = {.inf = inf};
	ev_timer_init(&sw.t, sync_tick, 0.001, 0.001);
	ev_timer_start(c.loop, &sw.t);
	ev_run(c.loop, 0);
	ev_timer_stop(c.loop, &sw.t);
	size_t n = ck_cache_store_len(ck_cache_informer_store(inf));
	size_t obj_bytes = 0;
	size_t tables = ck_cache_store_mem_bytes(ck_cache_informer_store(inf), &obj_bytes);
	/* Steady state: a few seconds of watching, then the memory the process keeps. */
	ev_timer st;
	ev_timer_init(&st, sleep_tick, 5.0, 0.0);
	ev_timer_start(c.loop, &st);
	ev_run(c.loop, 0);
	long rss_steady = proc_kib("VmRSS");
	malloc_trim(0);
	long rss_trim = proc_kib("VmRSS");

	printf("cluster: %zu Deployments cached (%zu in %s)\n", n, want, BENCH_NS);
	printf("cluster: plain client list (RV=0, all in memory): %.2f s for %zu objects\n",
	       pl.secs, pl.n);
	printf("cluster: informer time to HasSynced %.2f s, CPU %.2f s (%.0f%% of the wall "
	       "time: the rest is the API server)\n",
	       sw.t_synced - t0, sw.cpu_synced - cpu0,
	       100.0 * (sw.cpu_synced - cpu0) / (sw.t_synced - t0));
	printf("cluster: RSS before %ld KiB, peak during sync %ld KiB, steady %ld KiB "
	       "(after malloc_trim %ld KiB)\n",
	       rss0, sw.hwm_kib, rss_steady, rss_trim);
	printf("cluster: per cached object: objects %.0f B + tables/indexes %.1f B = %.0f B; "
	       "RSS growth %.0f B/object (steady, trimmed)\n",
	       (double)obj_bytes / (double)n, (double)tables / (double)n,
	       (double)(obj_bytes + tables) / (double)n,
	       (double)(rss_trim - rss0) * 1024.0 / (double)n);

	ck_cache_informer_free(inf);
	ck_client_free(c.c);
	ev_loop_destroy(c.loop);
	for (size_t i = 0; i < c.nhave; i++)
		free(c.have[i]);
	free(c.have);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "dispatch";
	if (strcmp(mode, "dispatch") == 0)
		return run_dispatch(argc > 2 ? (size_t)atol(argv[2]) : 10000,
		                    argc > 3 ? (size_t)atol(argv[3]) : 2000000);
	if (strcmp(mode, "memory") == 0)
		return run_memory(argc > 2 ? (size_t)atol(argv[2]) : 50000);
	if (strcmp(mode, "cluster") == 0 && argc > 2)
		return run_cluster((size_t)atol(argv[2]));
	fprintf(stderr,
	        "usage: %s dispatch [objects] [events] | memory [objects] | cluster "
	        "<objects>\n",
	        argv[0]);
	return 2;
}
