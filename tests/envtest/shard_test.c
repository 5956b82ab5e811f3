/*
 * shard_test: <ckube/shard.h> and the informers' shard_selector against the real
 * kube-apiserver (KEP-5866, sharded list and watch), through envtest.
 *
 *   shard_test on PARENT CRD    the server started with
 *                               --feature-gates=ShardedListAndWatch=true
 *   shard_test off PARENT CRD   the default server (gate off)
 *
 * Both create 40 namespaces (team-a..team-z, app-1..app-14) with two ConfigMaps
 * and one Foo each. With the gate on: for ConfigMaps (built-in) and Foos (a
 * custom resource), by namespace and by uid, and for 4 equal and 3 uneven ranges
 * plus one OR of two of them, the server's list with shardSelector equals the
 * client-side split of a full list (ck_shard_selector_match) -- the hash agrees
 * bit for bit; a malformed selector is refused (500 with the parser's message in
 * v1.37.2, printed beside ours); an
 * informer with a selector holds exactly its subset, says server-side, dropped
 * nothing, and its watch brings only the new objects inside the selector. With the
 * gate off: the server ignores the parameter, and the informer still holds exactly
 * its subset, says client-side and counts what it dropped.
 */
#include <ckube/base.h>
#include <ckube/cache.h>
#include <ckube/client.h>
#include <ckube/envtest.h>
#include <ckube/kinds.h>
#include <ckube/shard.h>

#include <ev.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const ck_type_t t_foo = {.group = "samplecontroller.k8s.io",
                                .version = "v1alpha1",
                                .kind = "Foo",
                                .resource = "foos",
                                .namespaced = true};

#include "check.h"

#define NNS 40
static char nsname[NNS][16];

typedef struct run {
	ck_envtest_t *env;
	ck_client_t *c;
	struct ev_loop *loop;
	ev_async done, go;
	bool gate;
	/* The informer, made and started on the loop thread when go fires. */
	ck_shard_selector_t *inf_sel;
	ck_cache_informer_t *inf;
} run_t;

static void names(void)
{
	for (int i = 0; i < 26; i++)
		snprintf(nsname[i], sizeof(nsname[i]), "team-%c", 'a' + i);
	for (int i = 26; i < NNS; i++)
		snprintf(nsname[i], sizeof(nsname[i]), "app-%d", i - 25);
}

static int create(ck_client_t *c, const ck_type_t *t, const char *ns, const char *body)
{
	ck_result_t r = {0};
	int rc = ck_client_create_sync(c, t, ns, body, NULL, &r);
	CHECK(rc == 0, "create %s in %s: %s", t->resource, ns ? ns : "-", r.error ? r.error : "?");
	ck_result_clear(&r);
	return rc;
}

static void populate(ck_client_t *c, const char *tag)
{
	char b[512];
	for (int i = 0; i < NNS; i++) {
		snprintf(b, sizeof(b),
		         "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\","
		         "\"metadata\":{\"name\":\"%s\"}}",
		         nsname[i]);
		create(c, &ck_type_namespace, NULL, b);
		for (int k = 0; k < 2; k++) {
			snprintf(b, sizeof(b),
			         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
			         "\"metadata\":{\"name\":\"%s-%d\"}}",
			         tag, k);
			create(c, &ck_type_configmap, nsname[i], b);
		}
		snprintf(b, sizeof(b),
		         "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\","
		         "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"deploymentName\":\"%s\","
		         "\"replicas\":1}}",
		         tag, tag);
		create(c, &t_foo, nsname[i], b);
	}
}

/* A list (all namespaces) with the selector s (NULL = none); -1 with the result
 * kept in *r on failure. */
static int list(ck_client_t *c, const ck_type_t *t, const char *sel, ck_obj_t ***items, size_t *n,
                ck_result_t *r)
{
	ck_list_opts_t o = {.limit = 500, .shard_selector = sel};
	*items = NULL;
	*n = 0;
	return ck_client_list_sync(c, t, NULL, &o, items, n, NULL, r);
}

static void free_items(ck_obj_t **items, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ck_obj_unref(items[i]);
	free(items);
}

static int has_uid(ck_obj_t **items, size_t n, const char *uid)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(items[i]->uid, uid) == 0)
			return 1;
	return 0;
}

/* The server's list with s against the client-side split of all; returns how many
 * the server listed. */
static size_t agree(run_t *u, const ck_type_t *t, ck_obj_t **all, size_t nall,
                    const ck_shard_selector_t *s)
{
	ck_obj_t **got;
	size_t ngot;
	ck_result_t r = {0};
	const char *wire = ck_shard_selector_string(s);
	int rc = list(u->c, t, wire, &got, &ngot, &r);
	CHECK(rc == 0, "list %s with %s: %s", t->resource, wire, r.error ? r.error : "?");
	ck_result_clear(&r);
	if (rc != 0)
		return 0;
	size_t want = 0;
	for (size_t i = 0; i < nall; i++) {
		bool in = ck_shard_selector_match(s, all[i]);
		want += in;
		CHECK(in == has_uid(got, ngot, all[i]->uid),
		      "%s %s/%s (%s %016llx): the client says %s, the server %s", t->resource,
		      all[i]->ns, all[i]->name,
		      ck_shard_selector_field(s) == CK_SHARD_UID ? "uid hash" : "namespace hash",
		      (unsigned long long)ck_shard_hash(
		          ck_shard_selector_field(s) == CK_SHARD_UID ? all[i]->uid : all[i]->ns,
		          strlen(ck_shard_selector_field(s) == CK_SHARD_UID ? all[i]->uid
		                                                            : all[i]->ns)),
		      in ? "in" : "out", in ? "left it out" : "listed it");
	}
	CHECK(ngot == want, "%s with %s: the server listed %zu, the client split %zu", t->resource,
	      wire, ngot, want);
	free_items(got, ngot);
	return ngot;
}

/* 4 equal ranges, 3 uneven ones (cut where team-* / app-* hash: 0xde.., 0xf6..),
 * and one OR of two ranges. */
static const ck_shard_range_t equal4[] = {{0x0000000000000000ULL, 0x4000000000000000ULL},
                                          {0x4000000000000000ULL, 0x8000000000000000ULL},
                                          {0x8000000000000000ULL, 0xc000000000000000ULL},
                                          {0xc000000000000000ULL, 0}};
static const ck_shard_range_t uneven3[] = {{0x0000000000000000ULL, 0xde90a2717d125123ULL},
                                           {0xde90a2717d125123ULL, 0xf000000000000000ULL},
                                           {0xf000000000000000ULL, 0}};

static void agreement(run_t *u, const ck_type_t *t, ck_shard_field_t f)
{
	ck_obj_t **all;
	size_t nall;
	ck_result_t r = {0};
	int rc = list(u->c, t, NULL, &all, &nall, &r);
	CHECK(rc == 0, "full list of %s: %s", t->resource, r.error ? r.error : "?");
	ck_result_clear(&r);
	if (rc != 0)
		return;
	const char *fname = f == CK_SHARD_UID ? "uid" : "namespace";
	char *err = NULL;
	size_t sum = 0;
	printf("%s by %s, %zu objects; 4 equal ranges:", t->resource, fname, nall);
	for (size_t i = 0; i < 4; i++) {
		ck_shard_selector_t *s = ck_shard_selector_new(f, &equal4[i], 1, &err);
		size_t k = agree(u, t, all, nall, s);
		printf(" %zu", k);
		sum += k;
		ck_shard_selector_free(s);
	}
	CHECK(sum == nall, "4 equal ranges of %s by %s hold %zu of %zu", t->resource, fname, sum,
	      nall);
	sum = 0;
	printf("; 3 uneven:");
	for (size_t i = 0; i < 3; i++) {
		ck_shard_selector_t *s = ck_shard_selector_new(f, &uneven3[i], 1, &err);
		size_t k = agree(u, t, all, nall, s);
		printf(" %zu", k);
		sum += k;
		ck_shard_selector_free(s);
	}
	CHECK(sum == nall, "3 uneven ranges of %s by %s hold %zu of %zu", t->resource, fname, sum,
	      nall);
	ck_shard_range_t two[] = {equal4[0], uneven3[1]};
	ck_shard_selector_t *s = ck_shard_selector_new(f, two, 2, &err);
	printf("; an OR of two: %zu\n", agree(u, t, all, nall, s));
	ck_shard_selector_free(s);
	free_items(all, nall);
}

static void malformed(run_t *u)
{
	ck_obj_t **got;
	size_t n;
	ck_result_t r = {0};
	const char *bad[] = {
	    "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
	    "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
	    "shardRange(object.metadata.uid, '0x8000000000000000', '0x0000000000000000')",
	};
	for (size_t i = 0; i < CK_ARRAY_LEN(bad); i++) {
		char *err = NULL;
		ck_shard_selector_t *s = ck_shard_selector_parse(bad[i], &err);
		CHECK(s == NULL, "the parser accepted %s", bad[i]);
		ck_shard_selector_free(s);
		int rc = list(u->c, &ck_type_configmap, bad[i], &got, &n, &r);
		if (u->gate) {
			/* v1.37.2 answers 500 InternalError (not 400) with the parser's
			 * message: the list's conversion of ListOptions fails. */
			CHECK(rc != 0 && r.error && strstr(r.error, "invalid shard selector: "),
			      "%s: want the server's refusal, got %d %s", bad[i], r.http_code,
			      r.error ? r.error : "");
			printf("%d for %s\n  server: %s\n  ours:   %s\n", r.http_code, bad[i],
			       r.error ? r.error : "?", err ? err : "?");
		} else {
			/* Without the gate the parameter is not read at all. */
			CHECK(rc == 0, "gate off, %s: %s", bad[i], r.error ? r.error : "?");
		}
		if (rc == 0)
			free_items(got, n);
		ck_result_clear(&r);
		if (u->gate) {
			/* A watch, and a streaming list, are refused the same way. */
			ck_list_opts_t o = {.shard_selector = bad[i],
			                    .send_initial_events = i == 0,
			                    .resource_version_match =
			                        i == 0 ? "NotOlderThan" : NULL,
			                    .allow_watch_bookmarks = true};
			char *q = ck_list_opts_query(&o, true);
			ck_req_spec_t spec = {.method = "GET",
			                      .type = &ck_type_configmap,
			                      .query = q,
			                      .decode = CK_DEC_WATCH,
			                      .is_watch = true,
			                      .timeout_ms = 10000};
			rc = ck_client_do_sync(u->c, &spec, &r);
			CHECK(rc != 0 && r.error && strstr(r.error, "invalid shard selector: "),
			      "watch%s with %s: want the server's refusal, got %d %s",
			      i == 0 ? " (sendInitialEvents)" : "", bad[i], r.http_code,
			      r.error ? r.error : "");
			printf("%d for a watch%s with it\n", r.http_code,
			       i == 0 ? " (sendInitialEvents)" : "");
			ck_result_clear(&r);
			free(q);
		}
		free(err);
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The informer's store is exactly the selector's part of the server's objects. */
static bool store_is_subset(run_t *u, const ck_shard_selector_t *s, size_t *nstore, size_t *nwant)
{
	ck_obj_t **all;
	size_t nall;
	ck_result_t r = {0};
	if (list(u->c, &ck_type_configmap, NULL, &all, &nall, &r) != 0) {
		ck_result_clear(&r);
		return false;
	}
	const ck_cache_lister_t *l = ck_cache_informer_lister(u->inf);
	bool same = true;
	*nwant = 0;
	for (size_t i = 0; i < nall; i++) {
		bool in = ck_shard_selector_match(s, all[i]);
		*nwant += in;
		ck_obj_t *o = ck_cache_lister_get(l, all[i]->ns, all[i]->name);
		if ((o != NULL) != in)
			same = false;
		ck_obj_unref(o);
	}
	ck_cache_objs_t st = {0};
	ck_cache_lister_list(l, NULL, &st);
	*nstore = st.n;
	same = same && st.n == *nwant;
	ck_cache_objs_free(&st);
	free_items(all, nall);
	return same;
}

static void informer_check(run_t *u)
{
	/* Started on the loop thread; wait until synced. */
	ev_async_send(u->loop, &u->go);
	uint64_t t0 = now_ms();
	while (!(u->inf && ck_cache_informer_has_synced(u->inf)) && now_ms() - t0 < 30000)
		usleep(20000);
	CHECK(u->inf && ck_cache_informer_has_synced(u->inf), "the informer did not sync");
	if (!u->inf)
		return;
	size_t nstore = 0, nwant = 0;
	CHECK(store_is_subset(u, u->inf_sel, &nstore, &nwant),
	      "after the list the store (%zu) is not the selector's part (%zu)", nstore, nwant);
	/* New objects in every namespace: the watch brings those inside the selector. */
	char b[256];
	for (int i = 0; i < NNS; i++) {
		snprintf(b, sizeof(b),
		         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
		         "\"metadata\":{\"name\":\"late\"}}");
		create(u->c, &ck_type_configmap, nsname[i], b);
	}
	bool same = false;
	t0 = now_ms();
	while (!(same = store_is_subset(u, u->inf_sel, &nstore, &nwant)) && now_ms() - t0 < 20000)
		usleep(100000);
	CHECK(same, "after the watch the store (%zu) is not the selector's part (%zu)", nstore,
	      nwant);
	ck_cache_stats_t st;
	ck_cache_informer_stats(u->inf, &st);
	printf("informer (gate %s) with %s: %zu of the configmaps in its store, mode %s, "
	       "%llu dropped, %llu watch events\n",
	       u->gate ? "on" : "off", ck_shard_selector_string(u->inf_sel), nstore,
	       ck_cache_shard_mode_name(st.shard_mode), (unsigned long long)st.shard_dropped,
	       (unsigned long long)st.events);
	if (u->gate) {
		CHECK(st.shard_mode == CK_CACHE_SHARD_SERVER, "gate on: mode %s, want server-side",
		      ck_cache_shard_mode_name(st.shard_mode));
		/* The server filtered the list and every watch event: nothing to drop. */
		CHECK(st.shard_dropped == 0, "gate on: %llu dropped, want 0",
		      (unsigned long long)st.shard_dropped);
	} else {
		CHECK(st.shard_mode == CK_CACHE_SHARD_CLIENT, "gate off: mode %s, want client-side",
		      ck_cache_shard_mode_name(st.shard_mode));
		CHECK(st.shard_dropped > 0, "gate off: nothing dropped");
	}
}

static void *body(void *arg)
{
	run_t *u = arg;
	populate(u->c, "cm");
	if (u->gate) {
		agreement(u, &ck_type_configmap, CK_SHARD_NAMESPACE);
		agreement(u, &ck_type_configmap, CK_SHARD_UID);
		agreement(u, &t_foo, CK_SHARD_NAMESPACE);
		agreement(u, &t_foo, CK_SHARD_UID);
	} else {
		/* The parameter is ignored: a selected list is the full list. */
		ck_obj_t **all, **got;
		size_t nall, ngot;
		ck_result_t r = {0};
		list(u->c, &ck_type_configmap, NULL, &all, &nall, &r);
		ck_result_clear(&r);
		char *err = NULL;
		ck_shard_selector_t *s =
		    ck_shard_selector_new(CK_SHARD_NAMESPACE, &equal4[3], 1, &err);
		list(u->c, &ck_type_configmap, ck_shard_selector_string(s), &got, &ngot, &r);
		ck_result_clear(&r);
		printf("gate off: a list with a selector gave %zu of %zu configmaps\n", ngot, nall);
		CHECK(ngot == nall, "gate off: the server filtered (%zu of %zu)", ngot, nall);
		ck_shard_selector_free(s);
		free_items(all, nall);
		free_items(got, ngot);
	}
	malformed(u);
	informer_check(u);
	ev_async_send(u->loop, &u->done);
	return NULL;
}

static void on_done(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

static void on_go(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)revents;
	run_t *u = w->data;
	ck_cache_informer_opts_t o = {.shard_selector = u->inf_sel};
	ck_cache_informer_t *inf = ck_cache_informer_new(
	    loop, &ck_type_configmap, ck_cache_lw_kube_new(u->c, &ck_type_configmap, NULL), &o);
	char *err = NULL;
	CHECK(ck_cache_informer_start(inf, &err) == 0, "informer start: %s", err ? err : "?");
	free(err);
	u->inf = inf;
}

static int run(bool gate, const char *parent, const char *crd)
{
	char *err = NULL;
	const char *gate_arg[] = {"--feature-gates=ShardedListAndWatch=true"};
	const char *crds[] = {crd};
	ck_envtest_opts_t o = {.crd_paths = crds,
	                       .ncrd_paths = 1,
	                       .dir = parent,
	                       .apiserver_args = gate ? gate_arg : NULL,
	                       .napiserver_args = gate ? 1 : 0};
	ck_envtest_t *env = ck_envtest_start(&o, &err);
	if (env == NULL) {
		printf("FAIL: start: %s\n", err);
		free(err);
		return 1;
	}
	names();
	run_t u = {.env = env, .loop = ev_loop_new(EVFLAG_AUTO), .gate = gate};
	/* The informer's selector: the team-a..team-z side of an uneven cut. */
	u.inf_sel = ck_shard_selector_new(CK_SHARD_NAMESPACE, &uneven3[1], 1, &err);
	ck_config_t *cfg = ck_envtest_config(env, &err);
	u.c = cfg ? ck_client_new(u.loop, cfg, NULL, &err) : NULL;
	CHECK(u.c != NULL, "client: %s", err ? err : "?");
	if (u.c != NULL) {
		ev_async_init(&u.done, on_done);
		ev_async_start(u.loop, &u.done);
		ev_async_init(&u.go, on_go);
		u.go.data = &u;
		ev_async_start(u.loop, &u.go);
		pthread_t t;
		pthread_create(&t, NULL, body, &u);
		ev_run(u.loop, 0);
		pthread_join(t, NULL);
		ck_cache_informer_free(u.inf);
		ck_client_free(u.c);
	}
	ck_shard_selector_free(u.inf_sel);
	ev_loop_destroy(u.loop);
	CHECK(ck_envtest_stop(env, &err) == 0, "stop: %s", err ? err : "?");
	free(err);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 4 || (strcmp(argv[1], "on") != 0 && strcmp(argv[1], "off") != 0)) {
		fprintf(stderr, "usage: shard_test on|off PARENT CRD\n");
		return 2;
	}
	return run(strcmp(argv[1], "on") == 0, argv[2], argv[3]);
}
