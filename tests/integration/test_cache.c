/*
 * Integration tests for pkg/cache against the real local control plane
 * (hack/local-up.sh; $KUBECONFIG names it).
 *
 * The loop runs on the test's thread; the scenario runs on a worker thread that
 * writes through the blocking client and compares the informers' caches with
 * what `kubectl get` says. Every test makes its own namespace.
 *
 * Two tests disturb the shared control plane on purpose (etcd compaction and a
 * kube-apiserver restart, through hack/local-ctl.sh), as the issue asks.
 */
#include <ckube/cache.h>
#include <ckube/client.h>
#include <ckube/log.h>
#include <ckube/types.h>
#include <ckube/workqueue.h>

#include <check.h>
#include <ev.h>
#include <libgen.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const ck_type_t t_ns = {
    .group = "", .version = "v1", .kind = "Namespace", .resource = "namespaces"};
static const char *const foo_fields[] = {"spec.deploymentName", "spec.replicas"};
static const ck_type_t t_foo = {.group = "samplecontroller.k8s.io",
                                .version = "v1alpha1",
                                .kind = "Foo",
                                .resource = "foos",
                                .namespaced = true,
                                .fields = foo_fields,
                                .nfields = 2};

/* ------------------------------------------------------------ notifications */

/* What handlers were told, per object name; written on the loop, read by the worker. */
typedef struct nent {
	char name[64];
	int adds, updates, deletes, unknown;
} nent_t;

typedef struct nrec {
	pthread_mutex_t mu;
	nent_t *e;
	size_t n, cap;
} nrec_t;

static nent_t *nrec_find(nrec_t *r, const char *name, bool create)
{
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->e[i].name, name) == 0)
			return &r->e[i];
	if (!create)
		return NULL;
	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 256;
		r->e = ck_xrealloc(r->e, r->cap * sizeof(*r->e));
	}
	nent_t *e = &r->e[r->n++];
	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", name);
	return e;
}

static void n_add(void *ud, ck_obj_t *obj, bool initial)
{
	nrec_t *r = ud;
	(void)initial;
	pthread_mutex_lock(&r->mu);
	nrec_find(r, obj->name, true)->adds++;
	pthread_mutex_unlock(&r->mu);
}

static void n_update(void *ud, ck_obj_t *old, ck_obj_t *obj)
{
	nrec_t *r = ud;
	(void)old;
	pthread_mutex_lock(&r->mu);
	nrec_find(r, obj->name, true)->updates++;
	pthread_mutex_unlock(&r->mu);
}

static void n_delete(void *ud, const char *key, ck_obj_t *obj, bool unknown)
{
	nrec_t *r = ud;
	(void)key;
	pthread_mutex_lock(&r->mu);
	nent_t *e = nrec_find(r, obj->name, true);
	e->deletes++;
	e->unknown += unknown;
	pthread_mutex_unlock(&r->mu);
}

static const ck_cache_handler_t nrec_handler = {n_add, n_update, n_delete};

static nent_t nrec_get(nrec_t *r, const char *name)
{
	nent_t out = {{0}, 0, 0, 0, 0};
	pthread_mutex_lock(&r->mu);
	nent_t *e = nrec_find(r, name, false);
	if (e != NULL)
		out = *e;
	pthread_mutex_unlock(&r->mu);
	return out;
}

/* ------------------------------------------------------------ a cuttable source */

/*
 * Wraps the real list/watch source so that a test can cut the informer off the
 * API server (a partition: the watch fails as if the connection dropped, new
 * requests fail to start) while the test keeps writing through the client.
 */
typedef struct creq {
	struct cut_lw *lw;
	ck_cache_lw_req_t *inner;
	const ck_dec_cb_t *dcb;
	ck_req_done_cb done;
	void *ud;
	bool active;
	bool watch;
	struct creq *next;
} creq_t;

typedef struct cut_lw {
	ck_cache_lw_t base;
	ck_cache_lw_t *inner;
	creq_t *reqs;
	bool applied;
} cut_lw_t;

static void w_obj(void *ud, ck_obj_t *o)
{
	creq_t *q = ud;
	q->dcb->on_object(q->ud, o);
}

static void w_meta(void *ud, const char *rv, const char *c, int64_t rem)
{
	creq_t *q = ud;
	q->dcb->on_list_meta(q->ud, rv, c, rem);
}

static void w_event(void *ud, ck_watch_type_t t, ck_obj_t *o, const ck_status_t *s)
{
	creq_t *q = ud;
	q->dcb->on_event(q->ud, t, o, s);
}

static const ck_dec_cb_t wrap_cb = {w_obj, w_meta, w_event};

static void w_done(void *ud, ck_result_t *r)
{
	creq_t *q = ud;
	q->active = false;
	q->done(q->ud, r);
}

static ck_cache_lw_req_t *cut_start(cut_lw_t *c, bool watch, const ck_list_opts_t *o,
                                    const ck_dec_cb_t *cb, ck_req_done_cb done, void *ud,
                                    char **err)
{
	if (c->applied) {
		ck_err_set(err, "test partition: the API server is unreachable");
		return NULL;
	}
	creq_t *q = ck_xcalloc(1, sizeof(*q));
	q->lw = c;
	q->dcb = cb;
	q->done = done;
	q->ud = ud;
	q->watch = watch;
	q->inner = watch ? c->inner->ops->watch(c->inner, o, &wrap_cb, w_done, q, err)
	                 : c->inner->ops->list(c->inner, o, &wrap_cb, w_done, q, err);
	if (q->inner == NULL) {
		free(q);
		return NULL;
	}
	q->active = true;
	q->next = c->reqs;
	c->reqs = q;
	return (ck_cache_lw_req_t *)q;
}

static ck_cache_lw_req_t *cut_list(ck_cache_lw_t *lw, const ck_list_opts_t *o,
                                   const ck_dec_cb_t *cb, ck_req_done_cb done, void *ud, char **err)
{
	return cut_start((cut_lw_t *)lw, false, o, cb, done, ud, err);
}

static ck_cache_lw_req_t *cut_watch(ck_cache_lw_t *lw, const ck_list_opts_t *o,
                                    const ck_dec_cb_t *cb, ck_req_done_cb done, void *ud,
                                    char **err)
{
	return cut_start((cut_lw_t *)lw, true, o, cb, done, ud, err);
}

static void cut_cancel(ck_cache_lw_t *lw, ck_cache_lw_req_t *req)
{
	cut_lw_t *c = (cut_lw_t *)lw;
	creq_t *q = (creq_t *)req;
	if (q->active)
		c->inner->ops->cancel(c->inner, q->inner);
	q->active = false;
}

static void cut_free(ck_cache_lw_t *lw)
{
	cut_lw_t *c = (cut_lw_t *)lw;
	for (creq_t *q = c->reqs; q != NULL;) {
		creq_t *next = q->next;
		free(q);
		q = next;
	}
	ck_cache_lw_free(c->inner);
	free(c);
}

static const ck_cache_lw_ops_t cut_ops = {cut_list, cut_watch, cut_cancel, cut_free};

/* Loop thread: fails every active request as a dropped connection would. */
static void cut_apply(cut_lw_t *c, bool cut)
{
	if (c->applied == cut)
		return;
	c->applied = cut;
	if (!cut)
		return;
	for (creq_t *q = c->reqs; q != NULL; q = q->next) {
		if (!q->active)
			continue;
		c->inner->ops->cancel(c->inner, q->inner);
		q->active = false;
		ck_result_t res = {0};
		res.error = ck_xstrdup("test partition: connection reset");
		q->done(q->ud, &res);
		free(res.error);
	}
}

/* ------------------------------------------------------------ fixture */

typedef struct cit {
	struct ev_loop *loop;
	ck_client_t *c;
	char ns[64];
	atomic_int done;
	ck_cache_factory_t *fac;
	cut_lw_t *cut;
	atomic_int cut_req;
	atomic_int cut_applied;
	nrec_t dep_rec, foo_rec;
	unsigned seq;
} cit_t;

static const char *kubeconfig(void)
{
	const char *p = getenv("KUBECONFIG");
	ck_assert_msg(p != NULL && p[0] != '\0', "KUBECONFIG must name the local control plane");
	return p;
}

static ck_cache_lw_t *make_cut_lw(void *ud, const ck_type_t *t, const char *ns)
{
	cit_t *it = ud;
	cut_lw_t *c = ck_xcalloc(1, sizeof(*c));
	c->base.ops = &cut_ops;
	c->inner = ck_cache_lw_kube_new(it->c, t, ns);
	it->cut = c;
	return &c->base;
}

/* A client of the local control plane on loop (opts may be NULL). */
static ck_client_t *cit_client_new(struct ev_loop *loop, const ck_client_opts_t *opts)
{
	ck_config_load_opts_t lo = {.kubeconfig = kubeconfig()};
	char *err = NULL;
	ck_config_t *cfg = ck_config_load(&lo, &err);
	ck_assert_msg(cfg != NULL, "kconfig_load: %s", err);
	ck_client_t *c = ck_client_new(loop, cfg, opts, &err);
	ck_assert_msg(c != NULL, "kclient_new: %s", err);
	return c;
}

static void cit_init(cit_t *t, bool cuttable)
{
	memset(t, 0, sizeof(*t));
	if (getenv("CACHE_IT_V") != NULL)
		ck_log_set_verbosity(atoi(getenv("CACHE_IT_V")));
	t->loop = ev_loop_new(EVFLAG_AUTO);
	t->c = cit_client_new(t->loop, NULL);
	snprintf(t->ns, sizeof(t->ns), "cache-it-%08llx",
	         (unsigned long long)(ck_rand_u64() >> 32));
	pthread_mutex_init(&t->dep_rec.mu, NULL);
	pthread_mutex_init(&t->foo_rec.mu, NULL);
	ck_cache_factory_opts_t fo = {.default_resync_ms = 30000, .ns = t->ns};
	if (cuttable) {
		fo.lw_new = make_cut_lw;
		fo.lw_ud = t;
	}
	t->fac = ck_cache_factory_new(t->loop, t->c, &fo);
}

static void cit_fini(cit_t *t)
{
	/* Informers before the client: the client drops outstanding requests. */
	ck_cache_factory_free(t->fac);
	ck_client_free(t->c);
	ev_loop_destroy(t->loop);
	free(t->dep_rec.e);
	free(t->foo_rec.e);
	pthread_mutex_destroy(&t->dep_rec.mu);
	pthread_mutex_destroy(&t->foo_rec.mu);
}

typedef struct driver {
	ev_timer tick;
	cit_t *t;
} driver_t;

static void driver_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	cit_t *t = ((driver_t *)w)->t;
	if (t->cut != NULL) {
		cut_apply(t->cut, atomic_load(&t->cut_req) != 0);
		atomic_store(&t->cut_applied, t->cut->applied);
	}
	if (atomic_load(&t->done))
		ev_break(loop, EVBREAK_ONE);
}

/* Runs fn(t) on a worker thread while this thread runs the loop. */
static void cit_run(cit_t *t, void *(*fn)(void *))
{
	pthread_t th;
	atomic_store(&t->done, 0);
	pthread_create(&th, NULL, fn, t);
	driver_t d = {.t = t};
	ev_timer_init(&d.tick, driver_cb, 0.01, 0.01);
	ev_timer_start(t->loop, &d.tick);
	ev_run(t->loop, 0);
	ev_timer_stop(t->loop, &d.tick);
	pthread_join(th, NULL);
}

/* ------------------------------------------------------------ worker helpers */

/* Retries through an API server restart (the restart script returns when ready,
 * but the client's old connections may still fail once). */
static int do_retry(int (*fn)(cit_t *, const char *, ck_result_t *), cit_t *t, const char *name)
{
	for (int i = 0; i < 20; i++) {
		ck_result_t r = {0};
		int rc = fn(t, name, &r);
		bool transport =
		    rc != 0 && (ck_result_is_transport(&r) || ck_result_is_server_error(&r));
		if (rc != 0 && !transport)
			ck_abort_msg("%s: %s", name, r.error);
		ck_result_clear(&r);
		if (rc == 0)
			return 0;
		usleep(250000);
	}
	return -1;
}

static int ns_create_fn(cit_t *t, const char *name, ck_result_t *r)
{
	char *body = ck_xasprintf("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":"
	                          "{\"name\":\"%s\"}}",
	                          name);
	int rc = ck_client_create_sync(t->c, &t_ns, NULL, body, NULL, r);
	free(body);
	return rc;
}

static void ns_delete(cit_t *t)
{
	ck_result_t r = {0};
	ck_client_delete_sync(t->c, &t_ns, NULL, t->ns, NULL, &r);
	ck_result_clear(&r);
}

static int dep_create_fn(cit_t *t, const char *name, ck_result_t *r)
{
	char *body = ck_xasprintf(
	    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"%s\","
	    "\"labels\":{\"app\":\"%s\"}},\"spec\":{\"replicas\":0,\"selector\":{\"matchLabels\":"
	    "{\"app\":\"%s\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"%s\"}},\"spec\":"
	    "{\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx:latest\"}]}}}}",
	    name, name, name, name);
	int rc = ck_client_create_sync(t->c, &ck_type_deployment, t->ns, body, NULL, r);
	free(body);
	return rc;
}

static int foo_create_fn(cit_t *t, const char *name, ck_result_t *r)
{
	char *body =
	    ck_xasprintf("{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":"
	                 "\"Foo\",\"metadata\":{\"name\":\"%s\"},\"spec\":{\"deploymentName\":"
	                 "\"fd-%s\",\"replicas\":1}}",
	                 name, name);
	int rc = ck_client_create_sync(t->c, &t_foo, t->ns, body, NULL, r);
	free(body);
	return rc;
}

static int patch_fn(cit_t *t, const ck_type_t *type, const char *name, ck_result_t *r)
{
	char *body = ck_xasprintf("{\"metadata\":{\"labels\":{\"gen\":\"g%u\"}}}", ++t->seq);
	int rc = ck_client_patch_sync(t->c, type, t->ns, name, CK_PATCH_MERGE, body, NULL, r);
	free(body);
	return rc;
}

static int dep_patch_fn(cit_t *t, const char *name, ck_result_t *r)
{
	return patch_fn(t, &ck_type_deployment, name, r);
}

static int foo_patch_fn(cit_t *t, const char *name, ck_result_t *r)
{
	return patch_fn(t, &t_foo, name, r);
}

static int dep_delete_fn(cit_t *t, const char *name, ck_result_t *r)
{
	int rc = ck_client_delete_sync(t->c, &ck_type_deployment, t->ns, name, NULL, r);
	return rc != 0 && ck_result_is_not_found(r) ? 0 : rc;
}

static int foo_delete_fn(cit_t *t, const char *name, ck_result_t *r)
{
	int rc = ck_client_delete_sync(t->c, &t_foo, t->ns, name, NULL, r);
	return rc != 0 && ck_result_is_not_found(r) ? 0 : rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted "name rv" lines. */
static char *join_sorted(char **lines, size_t n)
{
	qsort(lines, n, sizeof(char *), cmp_str);
	ck_sbuf_t b = CK_SBUF_INIT;
	for (size_t i = 0; i < n; i++) {
		ck_sbuf_puts(&b, lines[i]);
		ck_sbuf_putc(&b, '\n');
		free(lines[i]);
	}
	free(lines);
	return ck_sbuf_steal(&b);
}

static char *cache_state(ck_cache_informer_t *inf, const char *ns)
{
	ck_cache_objs_t l;
	ck_cache_lister_list_ns(ck_cache_informer_lister(inf), ns, NULL, &l);
	char **lines = ck_xmalloc((l.n + 1) * sizeof(char *));
	for (size_t i = 0; i < l.n; i++)
		lines[i] = ck_xasprintf("%s %s", l.items[i]->name, l.items[i]->rv);
	size_t n = l.n;
	ck_cache_objs_free(&l);
	return join_sorted(lines, n);
}

static char *kubectl_state(const char *resource, const char *ns)
{
	char *cmd =
	    ck_xasprintf("kubectl --kubeconfig '%s' get %s -n %s -o jsonpath='{range "
	                 ".items[*]}{.metadata.name}{\" \"}{.metadata.resourceVersion}{\"\\n\"}"
	                 "{end}' 2>/dev/null",
	                 kubeconfig(), resource, ns);
	FILE *p = popen(cmd, "r");
	free(cmd);
	if (p == NULL)
		return NULL;
	char **lines = NULL;
	size_t n = 0;
	char buf[256];
	while (fgets(buf, sizeof(buf), p) != NULL) {
		buf[strcspn(buf, "\n")] = '\0';
		if (buf[0] == '\0')
			continue;
		lines = ck_xrealloc(lines, (n + 1) * sizeof(char *));
		lines[n++] = ck_xstrdup(buf);
	}
	if (pclose(p) != 0) {
		for (size_t i = 0; i < n; i++)
			free(lines[i]);
		free(lines);
		return NULL;
	}
	if (lines == NULL)
		lines = ck_xmalloc(sizeof(char *));
	return join_sorted(lines, n);
}

/* Waits up to timeout_s for the cache to equal `kubectl get` exactly (names and RVs). */
static bool converge(ck_cache_informer_t *inf, const char *resource, const char *ns, int timeout_s)
{
	char *a = NULL, *b = NULL;
	for (int i = 0; i < timeout_s * 4; i++) {
		free(a);
		free(b);
		a = cache_state(inf, ns);
		b = kubectl_state(resource, ns);
		if (b != NULL && strcmp(a, b) == 0) {
			free(a);
			free(b);
			return true;
		}
		usleep(250000);
	}
	fprintf(stderr, "cache (%s):\n%.2000s\nkubectl:\n%.2000s\n", resource, a,
	        b ? b : "(kubectl failed)");
	free(a);
	free(b);
	return false;
}

static void run_script(const char *what)
{
	char dir[4096];
	const char *root = getenv("CSC_ROOT");
	snprintf(dir, sizeof(dir), "%s", root ? root : "../..");
	char *cmd = ck_xasprintf("bash '%s/hack/local-ctl.sh' %s >/dev/null", dir, what);
	int rc = system(cmd);
	ck_assert_msg(rc == 0, "%s failed (%d)", cmd, rc);
	free(cmd);
}

/* ------------------------------------------------------------ 1000 random changes */

typedef struct kind_ops {
	const char *prefix;
	const char *resource;
	int (*create)(cit_t *, const char *, ck_result_t *);
	int (*patch)(cit_t *, const char *, ck_result_t *);
	int (*del)(cit_t *, const char *, ck_result_t *);
	nrec_t *rec;
	ck_cache_informer_t *inf;
	char **live;
	size_t nlive;
	char **gone;
	size_t ngone;
	unsigned next;
} kind_ops_t;

static void one_random_op(cit_t *t, kind_ops_t *k)
{
	double x = ck_rand_unit();
	if (k->nlive == 0 || x < 0.4) {
		char name[64];
		snprintf(name, sizeof(name), "%s-%04u", k->prefix, k->next++);
		ck_assert_int_eq(do_retry(k->create, t, name), 0);
		k->live = ck_xrealloc(k->live, (k->nlive + 1) * sizeof(char *));
		k->live[k->nlive++] = ck_xstrdup(name);
	} else if (x < 0.7) {
		ck_assert_int_eq(do_retry(k->patch, t, k->live[ck_rand_u64() % k->nlive]), 0);
	} else {
		size_t i = ck_rand_u64() % k->nlive;
		ck_assert_int_eq(do_retry(k->del, t, k->live[i]), 0);
		k->gone = ck_xrealloc(k->gone, (k->ngone + 1) * sizeof(char *));
		k->gone[k->ngone++] = k->live[i];
		k->live[i] = k->live[--k->nlive];
	}
}

/*
 * Every deleted object that handlers saw: exactly one delete. With expect_adds
 * (no watch gap) every object was seen; across an outage an object created and
 * deleted inside the gap is invisible to any informer, and must then get nothing.
 * Every live object: one add, no delete.
 */
static void check_notifications(kind_ops_t *k, bool expect_adds)
{
	int unseen = 0;
	for (size_t i = 0; i < k->ngone; i++) {
		nent_t e = nrec_get(k->rec, k->gone[i]);
		ck_assert_msg(e.adds <= 1, "%s: %d adds", k->gone[i], e.adds);
		if (expect_adds)
			ck_assert_msg(e.adds == 1, "%s: %d adds", k->gone[i], e.adds);
		ck_assert_msg(e.deletes == e.adds, "%s: %d adds but %d delete notifications",
		              k->gone[i], e.adds, e.deletes);
		unseen += e.adds == 0;
	}
	for (size_t i = 0; i < k->nlive; i++) {
		nent_t e = nrec_get(k->rec, k->live[i]);
		ck_assert_msg(e.deletes == 0, "%s: live but %d deletes", k->live[i], e.deletes);
		ck_assert_msg(e.adds == 1, "%s: %d adds", k->live[i], e.adds);
	}
	if (unseen > 0)
		fprintf(stderr, "%s: %d objects lived and died inside the watch gap (never seen)\n",
		        k->resource, unseen);
}

static void kind_free(kind_ops_t *k)
{
	for (size_t i = 0; i < k->nlive; i++)
		free(k->live[i]);
	for (size_t i = 0; i < k->ngone; i++)
		free(k->gone[i]);
	free(k->live);
	free(k->gone);
}

typedef struct churn_ctx {
	cit_t t;
	kind_ops_t dep, foo;
} churn_ctx_t;

static void *churn_main(void *arg)
{
	churn_ctx_t *c = arg;
	cit_t *t = &c->t;
	char *why = NULL;
	ck_assert_msg(ck_cache_factory_wait_synced(t->fac, 30000, &why) == 0, "sync: %s", why);
	for (int i = 0; i < 1000; i++)
		one_random_op(t, ck_rand_unit() < 0.6 ? &c->dep : &c->foo);
	ck_assert(converge(c->dep.inf, "deployments.apps", t->ns, 60));
	ck_assert(converge(c->foo.inf, "foos.samplecontroller.k8s.io", t->ns, 60));
	check_notifications(&c->dep, true);
	check_notifications(&c->foo, true);
	for (size_t i = 0; i < c->dep.nlive; i++) {
		ck_obj_t *o = ck_cache_lister_get(ck_cache_informer_lister(c->dep.inf), t->ns,
		                                  c->dep.live[i]);
		ck_assert_ptr_nonnull(o);
		ck_obj_unref(o);
	}
	ck_cache_stats_t st;
	ck_cache_informer_stats(c->dep.inf, &st);
	fprintf(stderr,
	        "churn: deployments %zu live %zu deleted; foos %zu live %zu deleted; "
	        "deployment informer: %llu events, %llu relists, %llu watch restarts\n",
	        c->dep.nlive, c->dep.ngone, c->foo.nlive, c->foo.ngone,
	        (unsigned long long)st.events, (unsigned long long)st.relists,
	        (unsigned long long)st.watch_restarts);
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

static void *create_ns_main(void *arg)
{
	cit_t *t = arg;
	ck_assert_int_eq(do_retry(ns_create_fn, t, t->ns), 0);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_churn_matches_kubectl)
{
	churn_ctx_t c;
	cit_init(&c.t, false);
	cit_run(&c.t, create_ns_main);
	memset(&c.dep, 0, sizeof(c.dep));
	memset(&c.foo, 0, sizeof(c.foo));
	c.dep = (kind_ops_t){.prefix = "d",
	                     .resource = "deployments",
	                     .create = dep_create_fn,
	                     .patch = dep_patch_fn,
	                     .del = dep_delete_fn,
	                     .rec = &c.t.dep_rec};
	c.foo = (kind_ops_t){.prefix = "f",
	                     .resource = "foos",
	                     .create = foo_create_fn,
	                     .patch = foo_patch_fn,
	                     .del = foo_delete_fn,
	                     .rec = &c.t.foo_rec};
	c.dep.inf = ck_cache_factory_informer(c.t.fac, &ck_type_deployment);
	c.foo.inf = ck_cache_factory_informer(c.t.fac, &t_foo);
	ck_cache_informer_add_handler(c.dep.inf, &nrec_handler, &c.t.dep_rec);
	ck_cache_informer_add_handler(c.foo.inf, &nrec_handler, &c.t.foo_rec);
	ck_assert_int_eq(ck_cache_factory_start(c.t.fac, NULL), 0);
	cit_run(&c.t, churn_main);
	kind_free(&c.dep);
	kind_free(&c.foo);
	cit_fini(&c.t);
}
END_TEST

/* ------------------------------------------------------------ compaction -> 410 */

static void *compaction_main(void *arg)
{
	churn_ctx_t *c = arg;
	cit_t *t = &c->t;
	char *why = NULL;
	ck_assert_msg(ck_cache_factory_wait_synced(t->fac, 30000, &why) == 0, "sync: %s", why);
	char name[64];
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "d-%04d", i);
		ck_assert_int_eq(do_retry(dep_create_fn, t, name), 0);
	}
	ck_assert(converge(c->dep.inf, "deployments.apps", t->ns, 60));

	/* Partition the informer; meanwhile delete 15, create 10, change 10. */
	atomic_store(&t->cut_req, 1);
	while (!atomic_load(&t->cut_applied))
		usleep(10000);
	for (int i = 0; i < 15; i++) {
		snprintf(name, sizeof(name), "d-%04d", i);
		ck_assert_int_eq(do_retry(dep_delete_fn, t, name), 0);
	}
	for (int i = 40; i < 50; i++) {
		snprintf(name, sizeof(name), "d-%04d", i);
		ck_assert_int_eq(do_retry(dep_create_fn, t, name), 0);
	}
	for (int i = 15; i < 25; i++) {
		snprintf(name, sizeof(name), "d-%04d", i);
		ck_assert_int_eq(do_retry(dep_patch_fn, t, name), 0);
	}
	/* Compact etcd, and restart the API server so that its watch cache no longer
	 * holds our resourceVersion either: the re-watch and the list from it get 410. */
	run_script("compact");
	run_script("restart-apiserver");
	atomic_store(&t->cut_req, 0);

	ck_assert(converge(c->dep.inf, "deployments.apps", t->ns, 90));
	for (int i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "d-%04d", i);
		nent_t e = nrec_get(&t->dep_rec, name);
		if (i < 15) {
			ck_assert_msg(e.deletes == 1, "%s: %d deletes", name, e.deletes);
			ck_assert_msg(e.unknown == 1, "%s: not a final-state-unknown delete", name);
		} else {
			ck_assert_msg(e.deletes == 0, "%s: %d deletes", name, e.deletes);
			ck_assert_msg(e.adds == 1, "%s: %d adds", name, e.adds);
		}
	}
	ck_cache_stats_t st;
	ck_cache_informer_stats(c->dep.inf, &st);
	ck_assert_uint_ge(st.relists, 1);
	fprintf(stderr, "compaction: %llu relists, %llu watch restarts, %llu errors\n",
	        (unsigned long long)st.relists, (unsigned long long)st.watch_restarts,
	        (unsigned long long)st.errors);
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_compaction_relist_delivers_each_delete_once)
{
	churn_ctx_t c;
	memset(&c, 0, sizeof(c));
	cit_init(&c.t, true);
	cit_run(&c.t, create_ns_main);
	c.dep.inf = ck_cache_factory_informer(c.t.fac, &ck_type_deployment);
	ck_cache_informer_add_handler(c.dep.inf, &nrec_handler, &c.t.dep_rec);
	ck_assert_int_eq(ck_cache_factory_start(c.t.fac, NULL), 0);
	cit_run(&c.t, compaction_main);
	cit_fini(&c.t);
}
END_TEST

/* ------------------------------------------------------------ apiserver restart */

static void *restart_main(void *arg)
{
	churn_ctx_t *c = arg;
	cit_t *t = &c->t;
	char *why = NULL;
	ck_assert_msg(ck_cache_factory_wait_synced(t->fac, 30000, &why) == 0, "sync: %s", why);
	for (int i = 0; i < 150; i++)
		one_random_op(t, &c->dep);
	run_script("restart-apiserver");
	for (int i = 0; i < 150; i++)
		one_random_op(t, &c->dep);
	ck_assert(converge(c->dep.inf, "deployments.apps", t->ns, 90));
	check_notifications(&c->dep, false);
	ck_cache_stats_t st;
	ck_cache_informer_stats(c->dep.inf, &st);
	ck_assert_uint_ge(st.watch_restarts, 1);
	fprintf(stderr, "restart: %zu live %zu deleted; %llu relists, %llu watch restarts\n",
	        c->dep.nlive, c->dep.ngone, (unsigned long long)st.relists,
	        (unsigned long long)st.watch_restarts);
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_apiserver_restart_loses_nothing)
{
	churn_ctx_t c;
	memset(&c, 0, sizeof(c));
	cit_init(&c.t, false);
	cit_run(&c.t, create_ns_main);
	c.dep = (kind_ops_t){.prefix = "d",
	                     .resource = "deployments",
	                     .create = dep_create_fn,
	                     .patch = dep_patch_fn,
	                     .del = dep_delete_fn,
	                     .rec = &c.t.dep_rec};
	c.dep.inf = ck_cache_factory_informer(c.t.fac, &ck_type_deployment);
	ck_cache_informer_add_handler(c.dep.inf, &nrec_handler, &c.t.dep_rec);
	ck_assert_int_eq(ck_cache_factory_start(c.t.fac, NULL), 0);
	cit_run(&c.t, restart_main);
	kind_free(&c.dep);
	cit_fini(&c.t);
}
END_TEST

/* ------------------------------------------------------------ streaming list, RBAC */

static void *streaming_main(void *arg)
{
	cit_t *t = arg;
	char name[64];
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "s-%d", i);
		ck_assert_int_eq(do_retry(dep_create_fn, t, name), 0);
	}
	atomic_store(&t->done, 1);
	return NULL;
}

static void *streaming_wait_main(void *arg)
{
	cit_t *t = arg;
	char *why = NULL;
	ck_assert_msg(ck_cache_factory_wait_synced(t->fac, 30000, &why) == 0, "sync: %s", why);
	ck_cache_informer_t *inf = ck_cache_factory_informer(t->fac, &ck_type_deployment);
	/* The initial state came by the stream (the WatchList gate is on by default in
	 * kube-apiserver since 1.32): its one watch carried 5 ADDED and the end bookmark;
	 * a fallback would have needed a second watch after its list. */
	ck_cache_stats_t st;
	ck_cache_informer_stats(inf, &st);
	ck_assert_uint_eq(st.watch_restarts, 0);
	ck_assert_uint_ge(st.events, 6);
	ck_assert(converge(inf, "deployments.apps", t->ns, 30));
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(inf)), 5);
	nent_t e = nrec_get(&t->dep_rec, "s-3");
	ck_assert_int_eq(e.adds, 1);
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_streaming_list)
{
	cit_t t;
	cit_init(&t, false);
	ck_cache_factory_free(t.fac);
	ck_cache_factory_opts_t fo = {.ns = t.ns}; /* streaming is the default */
	t.fac = ck_cache_factory_new(t.loop, t.c, &fo);
	cit_run(&t, create_ns_main);
	cit_run(&t, streaming_main);
	ck_cache_informer_t *inf = ck_cache_factory_informer(t.fac, &ck_type_deployment);
	ck_cache_informer_add_handler(inf, &nrec_handler, &t.dep_rec);
	ck_assert_int_eq(ck_cache_factory_start(t.fac, NULL), 0);
	cit_run(&t, streaming_wait_main);
	cit_fini(&t);
}
END_TEST

/* ------------------------------------------------------------ factory tweak */

/* WithTweakListOptions: the factory's informers list and watch only app in (d-web, d-web2). */
static void tweak_web(void *ud, ck_list_opts_t *o)
{
	(void)ud;
	o->label_selector = "app in (d-web,d-web2)";
}

static bool cache_has(ck_cache_informer_t *inf, const char *ns, const char *name)
{
	ck_obj_t *o = ck_cache_lister_get(ck_cache_informer_lister(inf), ns, name);
	ck_obj_unref(o);
	return o != NULL;
}

static void *tweak_create_main(void *arg)
{
	cit_t *t = arg;
	ck_assert_int_eq(do_retry(ns_create_fn, t, t->ns), 0);
	ck_assert_int_eq(do_retry(dep_create_fn, t, "d-web"), 0);
	ck_assert_int_eq(do_retry(dep_create_fn, t, "d-db"), 0);
	atomic_store(&t->done, 1);
	return NULL;
}

static void *tweak_main(void *arg)
{
	cit_t *t = arg;
	char *why = NULL;
	ck_assert_msg(ck_cache_factory_wait_synced(t->fac, 30000, &why) == 0, "sync: %s", why);
	ck_cache_informer_t *inf = ck_cache_factory_informer(t->fac, &ck_type_deployment);
	/* The list was filtered... */
	ck_assert(cache_has(inf, t->ns, "d-web"));
	ck_assert(!cache_has(inf, t->ns, "d-db"));
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(inf)), 1);
	/* ...and so is the watch: d-db2 is created first, d-web2 after it. */
	ck_assert_int_eq(do_retry(dep_create_fn, t, "d-db2"), 0);
	ck_assert_int_eq(do_retry(dep_create_fn, t, "d-web2"), 0);
	for (int i = 0; i < 300 && !cache_has(inf, t->ns, "d-web2"); i++)
		usleep(100000);
	ck_assert(cache_has(inf, t->ns, "d-web2"));
	ck_assert(!cache_has(inf, t->ns, "d-db2"));
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(inf)), 2);
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_factory_tweak_list_options)
{
	cit_t t;
	cit_init(&t, false);
	ck_cache_factory_free(t.fac);
	ck_cache_factory_opts_t fo = {.ns = t.ns, .tweak_list_opts = tweak_web};
	t.fac = ck_cache_factory_new(t.loop, t.c, &fo);
	cit_run(&t, tweak_create_main);
	ck_assert_ptr_nonnull(ck_cache_factory_informer(t.fac, &ck_type_deployment));
	ck_assert_int_eq(ck_cache_factory_start(t.fac, NULL), 0);
	cit_run(&t, tweak_main);
	cit_fini(&t);
}
END_TEST

/* Reads KEY=value from the control plane's env file (next to the kubeconfig). */
static char *local_env(const char *key)
{
	char *path = ck_xstrdup(kubeconfig());
	char *file = ck_xasprintf("%s/env", dirname(path));
	free(path);
	char *text = NULL;
	ck_assert_msg(ck_file_read_all(file, &text, NULL, NULL) == 0, "read %s", file);
	free(file);
	char *want = ck_xasprintf("\n%s=", key);
	char *p = strstr(text, want);
	char *val = NULL;
	if (p != NULL) {
		p += strlen(want);
		val = ck_xstrndup(p, strcspn(p, "\n"));
	}
	free(want);
	free(text);
	return val;
}

typedef struct rbac_ctx {
	ck_cache_factory_t *fac;
	atomic_int done;
	int rc;
	char *reason;
	atomic_int nonhealing;
} rbac_ctx_t;

static void on_werr(void *ud, ck_cache_informer_t *inf, const char *msg, const ck_result_t *res,
                    bool healing)
{
	rbac_ctx_t *r = ud;
	(void)inf;
	(void)msg;
	(void)res;
	if (!healing)
		atomic_fetch_add(&r->nonhealing, 1);
}

static void *rbac_main(void *arg)
{
	rbac_ctx_t *r = arg;
	r->rc = ck_cache_factory_wait_synced(r->fac, 3000, &r->reason);
	atomic_store(&r->done, 1);
	return NULL;
}

static void rbac_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	if (atomic_load(&((rbac_ctx_t *)w->data)->done))
		ev_break(loop, EVBREAK_ONE);
}

START_TEST(test_forbidden_sync_reports_reason)
{
	char *token = local_env("LIMITED_TOKEN");
	char *server = local_env("API_SERVER");
	char *ca = local_env("CA_FILE");
	ck_assert_ptr_nonnull(token);
	char *yaml =
	    ck_xasprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
	                 "    server: %s\n    certificate-authority: %s\nusers:\n- name: u\n"
	                 "  user:\n    token: %s\ncontexts:\n- name: x\n  context:\n"
	                 "    cluster: c\n    user: u\ncurrent-context: x\n",
	                 server, ca, token);
	char *err = NULL;
	ck_config_t *cfg =
	    ck_config_load_text(yaml, strlen(yaml), "limited-kubeconfig", NULL, &err);
	ck_assert_msg(cfg != NULL, "%s", err);
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	ck_client_t *c = ck_client_new(loop, cfg, NULL, &err);
	ck_assert_msg(c != NULL, "%s", err);
	rbac_ctx_t r = {0};
	ck_cache_factory_opts_t fo = {.on_watch_error = on_werr, .watch_error_ud = &r};
	r.fac = ck_cache_factory_new(loop, c, &fo);
	ck_cache_factory_informer(r.fac, &t_foo);
	ck_cache_factory_start(r.fac, NULL);
	pthread_t th;
	pthread_create(&th, NULL, rbac_main, &r);
	ev_timer tick;
	ev_timer_init(&tick, rbac_tick, 0.01, 0.01);
	tick.data = &r;
	ev_timer_start(loop, &tick);
	ev_run(loop, 0);
	ev_timer_stop(loop, &tick);
	pthread_join(th, NULL);
	ck_assert_int_eq(r.rc, -1);
	ck_assert_msg(strstr(r.reason, "foos.samplecontroller.k8s.io is forbidden") != NULL, "%s",
	              r.reason);
	ck_assert_int_ge(atomic_load(&r.nonhealing), 1);
	fprintf(stderr, "forbidden: %s\n", r.reason);
	free(r.reason);
	ck_cache_factory_free(r.fac);
	ck_client_free(c);
	ev_loop_destroy(loop);
	free(yaml);
	free(token);
	free(server);
	free(ca);
}
END_TEST

/* ------------------------------------------------------------ objects over the limit */

/*
 * A client whose max_object_bytes (64 KiB here; 64 MiB by default, far above what
 * etcd stores) is smaller than an object the server holds. The informer must not
 * skip the object (that would lose it) nor crash: its sync fails with a reason that
 * names the object and the limit, it retries with backoff, and once the object is
 * back under the limit it converges. A watch event over the limit leaves the cache
 * at the last state that fitted until a relist can read the new one.
 */
#define BIG_LIMIT (64u * 1024u)

typedef struct big_ctx {
	cit_t t;
	pthread_mutex_t mu;
	char *last_err;
	atomic_int nerr;
} big_ctx_t;

static void big_werr(void *ud, ck_cache_informer_t *inf, const char *msg, const ck_result_t *res,
                     bool healing)
{
	big_ctx_t *b = ud;
	(void)inf;
	(void)res;
	(void)healing;
	pthread_mutex_lock(&b->mu);
	free(b->last_err);
	b->last_err = ck_xstrdup(msg);
	pthread_mutex_unlock(&b->mu);
	atomic_fetch_add(&b->nerr, 1);
}

static bool big_err_has(big_ctx_t *b, const char *want)
{
	pthread_mutex_lock(&b->mu);
	bool ok = b->last_err != NULL && strstr(b->last_err, want) != NULL;
	pthread_mutex_unlock(&b->mu);
	return ok;
}

/* Sets annotation "pad" of Deployment name to n bytes of 'x'; returns the new
 * resourceVersion as a number. */
static unsigned long long big_annotate(cit_t *t, const char *name, size_t n)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, "{\"metadata\":{\"annotations\":{\"pad\":\"");
	for (size_t i = 0; i < n; i++)
		ck_sbuf_putc(&b, 'x');
	ck_sbuf_puts(&b, "\"}}}");
	ck_result_t r = {0};
	int rc = ck_client_patch_sync(t->c, &ck_type_deployment, t->ns, name, CK_PATCH_MERGE,
	                              ck_sbuf_cstr(&b), NULL, &r);
	ck_assert_msg(rc == 0, "annotate %s: %s", name, r.error);
	unsigned long long rv = strtoull(r.obj->rv, NULL, 10);
	ck_result_clear(&r);
	ck_sbuf_free(&b);
	return rv;
}

/* The cached object's resourceVersion as a number; 0 when it is not cached. */
static unsigned long long cached_rv(ck_cache_informer_t *inf, const char *ns, const char *name)
{
	ck_obj_t *o = ck_cache_lister_get(ck_cache_informer_lister(inf), ns, name);
	unsigned long long rv = o ? strtoull(o->rv, NULL, 10) : 0;
	ck_obj_unref(o);
	return rv;
}

static void *big_setup_main(void *arg)
{
	big_ctx_t *b = arg;
	ck_assert_int_eq(do_retry(ns_create_fn, &b->t, b->t.ns), 0);
	ck_assert_int_eq(do_retry(dep_create_fn, &b->t, "d-small"), 0);
	ck_assert_int_eq(do_retry(dep_create_fn, &b->t, "d-big"), 0);
	big_annotate(&b->t, "d-big", 100 * 1024);
	atomic_store(&b->t.done, 1);
	return NULL;
}

static void *big_main(void *arg)
{
	big_ctx_t *b = arg;
	cit_t *t = &b->t;
	ck_cache_informer_t *inf = ck_cache_factory_informer(t->fac, &ck_type_deployment);
	char *why = NULL;
	/* 1. A list holding an object over the limit: not synced, and the reason
	 * names the object and the limit. */
	ck_assert_int_eq(ck_cache_factory_wait_synced(t->fac, 5000, &why), -1);
	char want[160];
	snprintf(want, sizeof(want), "\"%s/d-big\" larger than the limit of %u bytes", t->ns,
	         BIG_LIMIT);
	ck_assert_msg(why != NULL && strstr(why, want) != NULL, "reason: %s", why);
	ck_assert(big_err_has(b, want));
	fprintf(stderr, "over the limit: %s\n", why);
	free(why);
	why = NULL;
	ck_assert_int_eq(ck_cache_store_len(ck_cache_informer_store(inf)), 0);
	/* 2. Under the limit again: it converges, nothing skipped. */
	big_annotate(t, "d-big", 10);
	ck_assert_msg(ck_cache_factory_wait_synced(t->fac, 60000, &why) == 0, "sync: %s", why);
	ck_assert_int_eq(ck_cache_store_len(ck_cache_informer_store(inf)), 2);
	/* 3. A watch event over the limit: reported, and the cache keeps d-small as
	 * it was (its last state that fitted), never a half-read object. */
	int nerr = atomic_load(&b->nerr);
	unsigned long long rv_big = big_annotate(t, "d-small", 100 * 1024);
	for (int i = 0; i < 300 && atomic_load(&b->nerr) == nerr; i++)
		usleep(100000);
	snprintf(want, sizeof(want), "\"%s/d-small\" larger than the limit", t->ns);
	pthread_mutex_lock(&b->mu);
	ck_assert_msg(b->last_err != NULL && strstr(b->last_err, want) != NULL,
	              "no error naming d-small: %s", b->last_err ? b->last_err : "(none)");
	pthread_mutex_unlock(&b->mu);
	unsigned long long rv = cached_rv(inf, t->ns, "d-small");
	ck_assert_msg(rv > 0 && rv < rv_big, "d-small cached at %llu, the large version is %llu",
	              rv, rv_big);
	/* 4. Back under the limit: the cache reaches that state (or a later one: the
	 * deployment controller may write its status). */
	unsigned long long rv_small = big_annotate(t, "d-small", 20);
	for (int i = 0; i < 600 && (rv = cached_rv(inf, t->ns, "d-small")) < rv_small; i++)
		usleep(100000);
	ck_assert_msg(rv >= rv_small, "d-small cached at %llu, never reached %llu", rv, rv_small);
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_object_over_limit)
{
	big_ctx_t b;
	cit_init(&b.t, false);
	pthread_mutex_init(&b.mu, NULL);
	b.last_err = NULL;
	atomic_store(&b.nerr, 0);
	/* The informers read through a client whose object limit is 64 KiB; the test
	 * writes through the fixture's (whose answers carry the large objects). */
	ck_cache_factory_free(b.t.fac);
	ck_client_opts_t co = {.max_object_bytes = BIG_LIMIT};
	ck_client_t *lim = cit_client_new(b.t.loop, &co);
	cit_run(&b.t, big_setup_main);
	ck_cache_factory_opts_t fo = {
	    .ns = b.t.ns, .on_watch_error = big_werr, .watch_error_ud = &b};
	b.t.fac = ck_cache_factory_new(b.t.loop, lim, &fo);
	ck_cache_factory_informer(b.t.fac, &ck_type_deployment);
	ck_assert_int_eq(ck_cache_factory_start(b.t.fac, NULL), 0);
	cit_run(&b.t, big_main);
	ck_cache_factory_free(b.t.fac);
	b.t.fac = NULL;
	ck_client_free(lim);
	cit_fini(&b.t);
	free(b.last_err);
	pthread_mutex_destroy(&b.mu);
}
END_TEST

/* ------------------------------------------------------------ key trace */

static int trace_fd = -1;
static ck_wq_t *trace_q;

static void tq_add(void *ud, ck_obj_t *obj, bool initial)
{
	(void)ud;
	(void)initial;
	char *k = ck_obj_key_dup(obj);
	ck_wq_add(trace_q, k);
	free(k);
}

static void tq_update(void *ud, ck_obj_t *old, ck_obj_t *obj)
{
	(void)old;
	tq_add(ud, obj, false);
}

static void *trace_main(void *arg)
{
	cit_t *t = arg;
	char *why = NULL;
	ck_assert_msg(ck_cache_factory_wait_synced(t->fac, 30000, &why) == 0, "sync: %s", why);
	ck_cache_informer_t *inf = ck_cache_factory_informer(t->fac, &ck_type_deployment);
	ck_assert_int_eq(do_retry(dep_create_fn, t, "d-other"), 0);
	ck_assert_int_eq(do_retry(dep_create_fn, t, "d-traced"), 0);
	for (int i = 0; i < 300 && !cache_has(inf, t->ns, "d-traced"); i++)
		usleep(100000);
	ck_assert(cache_has(inf, t->ns, "d-traced"));
	/* A worker takes it: get, forget, done. */
	const char *k;
	while ((k = ck_wq_get(trace_q)) != NULL) {
		bool traced = strstr(k, "/d-traced") != NULL;
		ck_wq_forget(trace_q, k);
		ck_wq_done(trace_q, k);
		if (traced)
			break;
	}
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

/* Against the real server: the traced Deployment's journey from its watch event to
 * a worker, every step in order, and nothing of the other one. */
START_TEST(test_key_trace_against_the_server)
{
	cit_t t;
	cit_init(&t, false);
	char path[] = "/tmp/cache-it-trace-XXXXXX";
	trace_fd = mkstemp(path);
	ck_assert_int_ge(trace_fd, 0);
	unlink(path);
	char *key = ck_xasprintf("%s/d-traced", t.ns);
	ck_assert_int_eq(ck_log_set_trace_key(key, NULL), 0);
	ck_log_set_fd(trace_fd);
	trace_q = ck_wq_new(&(ck_wq_options_t){.name = "traced"});
	cit_run(&t, create_ns_main);
	ck_cache_informer_t *inf = ck_cache_factory_informer(t.fac, &ck_type_deployment);
	ck_cache_informer_add_handler(inf, &(ck_cache_handler_t){tq_add, tq_update, NULL}, NULL);
	ck_assert_int_eq(ck_cache_factory_start(t.fac, NULL), 0);
	cit_run(&t, trace_main);
	ck_log_set_fd(2);
	ck_log_set_trace_key(NULL, NULL);

	ck_sbuf_t b = CK_SBUF_INIT;
	char chunk[4096];
	ssize_t n;
	for (off_t off = 0; (n = pread(trace_fd, chunk, sizeof(chunk), off)) > 0; off += n)
		ck_sbuf_append(&b, chunk, (size_t)n);
	close(trace_fd);
	const char *log = ck_sbuf_cstr(&b);
	ck_assert_ptr_null(strstr(log, "d-other"));
	/* The first steps, in order; the Deployment controller's status writes may add
	 * more watch events after them. */
	const char *want[] = {
	    "step=\"watch-event\" resource=\"deployments.apps\" type=\"ADDED\"",
	    "step=\"delta-queued\" resource=\"deployments.apps\" type=\"Added\"",
	    "step=\"delta-popped\" resource=\"deployments.apps\" type=\"Added\"",
	    "step=\"store-updated\" resource=\"deployments.apps\" op=\"add\"",
	    "step=\"handler-notified\" resource=\"deployments.apps\" handler=1 event=\"add\"",
	    "step=\"queue-add\" queue=\"traced\" outcome=\"queued\"",
	};
	char *prefix = ck_xasprintf("\"Trace\" key=\"%s\" ", key);
	const char *p = log;
	for (size_t i = 0; i < CK_ARRAY_LEN(want); i++) {
		p = strstr(p, prefix);
		ck_assert_msg(p != NULL, "step %zu (%s) missing in:\n%s", i, want[i], log);
		p += strlen(prefix);
		ck_assert_msg(strncmp(p, want[i], strlen(want[i])) == 0,
		              "step %zu: want %s in:\n%s", i, want[i], log);
	}
	ck_assert_msg(strstr(p, "step=\"queue-get\" queue=\"traced\"") != NULL, "%s", log);
	ck_assert_msg(strstr(p, "step=\"queue-forget\" queue=\"traced\"") != NULL, "%s", log);
	ck_assert_msg(strstr(p, "step=\"queue-done\" queue=\"traced\"") != NULL, "%s", log);
	free(prefix);
	free(key);
	ck_sbuf_free(&b);
	ck_wq_shutdown(trace_q);
	ck_wq_free(trace_q);
	cit_fini(&t);
}
END_TEST

Suite *suite_cache(void)
{
	Suite *s = suite_create("cache");
	/* One case per scenario so that CK_RUN_CASE can pick one. */
	const struct {
		const char *name;
		const TTest *test;
	} cases[] = {
	    {"rbac", test_forbidden_sync_reports_reason},
	    {"streaming", test_streaming_list},
	    {"tweak", test_factory_tweak_list_options},
	    {"trace", test_key_trace_against_the_server},
	    {"over_limit", test_object_over_limit},
	    {"churn", test_churn_matches_kubectl},
	    /* These two disturb the shared control plane (etcd compaction, API server
	     * restart): run them when nobody else is using it. */
	    {"compaction", test_compaction_relist_delivers_each_delete_once},
	    {"restart", test_apiserver_restart_loses_nothing},
	};
	for (size_t i = 0; i < CK_ARRAY_LEN(cases); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_set_timeout(tc, 600);
		tcase_add_test(tc, cases[i].test);
		suite_add_tcase(s, tc);
	}
	return s;
}
