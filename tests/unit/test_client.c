/*
 * Unit tests for pkg/rest/client.c: the transport's behaviour under faults, with a
 * scripted HTTP/1.1 server (fault_server.h) on loopback, and the token bucket with
 * a fake clock. The real API server is exercised in tests/integration/test_client.c.
 */
#include <ckube/client.h>
#include <ckube/flowcontrol.h>
#include <ckube/log.h>

#include "pkg/leaderelection/le_internal.h" /* the Lease lock, over this client */
#include "tests/unit/fault_server.h"

#include <check.h>
#include <ev.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOKEN "s3cr3t-t0ken-value"

static const char *const dep_fields[] = {"spec.replicas"};
static const ck_type_t t_dep = {
    .group = "apps",
    .version = "v1",
    .kind = "Deployment",
    .resource = "deployments",
    .namespaced = true,
    .fields = dep_fields,
    .nfields = 1,
};
static const ck_type_t t_ns = {
    .group = "", .version = "v1", .kind = "Namespace", .resource = "namespaces"};
static const ck_type_t t_pod = {
    .group = "", .version = "v1", .kind = "Pod", .resource = "pods", .namespaced = true};

/* --- fixture: a loop, a fault server and a client pointed at it --- */

typedef struct fx {
	struct ev_loop *loop;
	fault_server_t *fs;
	ck_client_t *c;
	char base[64];
} fx_t;

static void fx_init(fx_t *f, const ck_client_opts_t *opts)
{
	f->loop = ev_loop_new(EVFLAG_AUTO);
	f->fs = fs_new();
	f->c = fs_client_new(f->loop, f->fs->port, TOKEN, opts);
	snprintf(f->base, sizeof(f->base), "http://127.0.0.1:%d", f->fs->port);
}

static void fx_done(fx_t *f)
{
	ck_client_free(f->c);
	fs_free(f->fs);
	ev_loop_destroy(f->loop);
}

/* --- an exec credential plugin (tests/fixtures/exec-plugin-client.sh) --- */

/* The plugin's state folder: what the test tells it, what it reports. */
typedef struct plug {
	char dir[64];
} plug_t;

static void plug_init(plug_t *p)
{
	snprintf(p->dir, sizeof(p->dir), "/tmp/csc-client-plugin-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(p->dir));
}

static int plug_rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	return remove(path);
}

static void plug_done(plug_t *p)
{
	nftw(p->dir, plug_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Writes (replaces) the file name in the state folder, atomically. */
static void plug_write(plug_t *p, const char *name, const char *text)
{
	char *tmp = ck_xasprintf("%s/.%s.tmp", p->dir, name);
	char *path = ck_xasprintf("%s/%s", p->dir, name);
	FILE *f = fopen(tmp, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	ck_assert_int_eq(rename(tmp, path), 0);
	free(tmp);
	free(path);
}

static bool plug_has(plug_t *p, const char *name)
{
	char *path = ck_xasprintf("%s/%s", p->dir, name);
	bool yes = access(path, F_OK) == 0;
	free(path);
	return yes;
}

/* How many times the plugin ran (started). */
static int plug_runs(plug_t *p)
{
	char *path = ck_xasprintf("%s/runs", p->dir);
	char *text = NULL;
	int n = 0;
	if (ck_file_read_all(path, &text, NULL, NULL) == 0)
		for (char *q = text; *q; q++)
			n += *q == '\n';
	free(text);
	free(path);
	return n;
}

/*
 * A client whose user's credential comes from the test plugin. Borrows lo (the
 * config's clock, may be NULL) and opts; expiry (may be NULL) is what the plugin
 * answers as status.expirationTimestamp.
 */
static ck_client_t *client_exec(struct ev_loop *loop, int port, plug_t *p, const char *expiry,
                                const ck_config_load_opts_t *lo, const ck_client_opts_t *opts)
{
	char plugin[PATH_MAX];
	ck_assert_ptr_nonnull(realpath("../fixtures/exec-plugin-client.sh", plugin));
	char *text = ck_xasprintf("apiVersion: v1\nkind: Config\n"
	                          "clusters:\n- name: fs\n  cluster:\n"
	                          "    server: http://127.0.0.1:%d\n"
	                          "users:\n- name: u\n  user:\n    exec:\n"
	                          "      apiVersion: client.authentication.k8s.io/v1\n"
	                          "      command: %s\n"
	                          "      installHint: 'try: apt install the-plugin'\n"
	                          "      interactiveMode: Never\n"
	                          "      env:\n"
	                          "      - {name: PLUGIN_STATE, value: '%s'}\n"
	                          "      - {name: PLUGIN_EXPIRY, value: '%s'}\n"
	                          "contexts:\n- name: c\n  context:\n    cluster: fs\n    user: u\n"
	                          "current-context: c\n",
	                          port, plugin, p->dir, expiry ? expiry : "");
	char *err = NULL;
	ck_config_t *cfg = ck_config_load_text(text, strlen(text), "test-kubeconfig", lo, &err);
	free(text);
	ck_assert_msg(cfg != NULL, "kconfig: %s", err ? err : "?");
	ck_client_t *c = ck_client_new(loop, cfg, opts, &err);
	ck_assert_msg(c != NULL, "kclient_new: %s", err ? err : "?");
	return c;
}

static void fx_init_exec(fx_t *f, plug_t *p, const char *expiry, const ck_config_load_opts_t *lo,
                         const ck_client_opts_t *opts)
{
	f->loop = ev_loop_new(EVFLAG_AUTO);
	f->fs = fs_new();
	f->c = client_exec(f->loop, f->fs->port, p, expiry, lo, opts);
	snprintf(f->base, sizeof(f->base), "http://127.0.0.1:%d", f->fs->port);
}

#define ASSERT_HAS(s, sub)                                                                         \
	do {                                                                                       \
		ck_assert_ptr_nonnull(s);                                                          \
		ck_assert_msg(strstr((s), (sub)) != NULL, "\"%s\" lacks \"%s\"", (s), (sub));      \
	} while (0)
#define ASSERT_LACKS(s, sub)                                                                       \
	ck_assert_msg((s) == NULL || strstr((s), (sub)) == NULL, "\"%s\" has \"%s\"", (s), (sub))

/* Runs the loop until *flag is set (or 20 s pass: then the test fails). */
typedef struct until {
	ev_timer tick;
	atomic_int *flag;
	double deadline;
} until_t;

static void until_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	until_t *u = (until_t *)w;
	if (atomic_load(u->flag) || ev_now(loop) > u->deadline)
		ev_break(loop, EVBREAK_ONE);
}

static void run_until(struct ev_loop *loop, atomic_int *flag)
{
	until_t u = {.flag = flag, .deadline = ev_now(loop) + 20};
	ev_timer_init(&u.tick, until_cb, 0.005, 0.005);
	ev_timer_start(loop, &u.tick);
	ev_run(loop, 0);
	ev_timer_stop(loop, &u.tick);
	ck_assert_msg(atomic_load(flag), "timed out waiting on the loop");
}

/* --- an async call and its captured result --- */

typedef struct call {
	atomic_int done;
	ck_result_t res;
	int objects;
	int events[5];
	char names[8][32];
	char *list_rv;
	char *list_cont;
	atomic_int *on_object_flag; /* set when the first object arrives */
	ck_req_t *cancel_on_event;  /* cancel this request from inside on_event */
} call_t;

static void call_done(void *ud, ck_result_t *res)
{
	call_t *c = ud;
	c->res = *res;
	memset(res, 0, sizeof(*res));
	atomic_store(&c->done, 1);
}

static void call_object(void *ud, ck_obj_t *obj)
{
	call_t *c = ud;
	if (c->objects < 8)
		snprintf(c->names[c->objects], sizeof(c->names[0]), "%s", obj->name);
	c->objects++;
	if (c->on_object_flag)
		atomic_store(c->on_object_flag, 1);
	ck_obj_unref(obj);
}

static void call_meta(void *ud, const char *rv, const char *cont, int64_t remaining)
{
	call_t *c = ud;
	free(c->list_rv);
	free(c->list_cont);
	c->list_rv = ck_xstrdup(rv);
	c->list_cont = ck_xstrdup(cont ? cont : "");
}

static void call_event(void *ud, ck_watch_type_t type, ck_obj_t *obj, const ck_status_t *status)
{
	call_t *c = ud;
	c->events[type]++;
	ck_obj_unref(obj);
	if (c->cancel_on_event != NULL) {
		ck_req_cancel(c->cancel_on_event);
		c->cancel_on_event = NULL;
		atomic_store(&c->done, 1);
	}
}

static const ck_dec_cb_t call_cb = {
    .on_object = call_object, .on_list_meta = call_meta, .on_event = call_event};

static void call_clear(call_t *c)
{
	ck_result_clear(&c->res);
	free(c->list_rv);
	free(c->list_cont);
}

/* Starts spec on the loop and runs it to completion. */
static void run_call(fx_t *f, const ck_req_spec_t *spec, call_t *c)
{
	char *err = NULL;
	ck_req_t *r = ck_client_request(f->c, spec, &call_cb, call_done, c, &err);
	ck_assert_msg(r != NULL, "kclient_request: %s", err ? err : "?");
	run_until(f->loop, &c->done);
}

static void run_get(fx_t *f, const ck_type_t *t, const char *ns, const char *name, call_t *c)
{
	ck_req_spec_t spec = {
	    .method = "GET", .type = t, .ns = ns, .name = name, .decode = CK_DEC_OBJECT};
	run_call(f, &spec, c);
}

#define DEP_JSON(name)                                                                             \
	"{\"kind\":\"Deployment\",\"apiVersion\":\"apps/v1\",\"metadata\":{\"name\":\"" name       \
	"\",\"namespace\":\"ns1\",\"resourceVersion\":\"5\"},\"spec\":{\"replicas\":2}}"

#define LIST_JSON(rv, cont, items)                                                                 \
	"{\"kind\":\"DeploymentList\",\"apiVersion\":\"apps/"                                      \
	"v1\",\"metadata\":{\"resourceVersion\":"                                                  \
	"\"" rv "\",\"continue\":\"" cont "\"},\"items\":[" items "]}"

static const char status_404[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"deployments.apps \\\"y\\\" not found\",\"reason\":\"NotFound\","
    "\"details\":{\"name\":\"y\",\"group\":\"apps\",\"kind\":\"deployments\"},\"code\":404}";

/* ------------------------------------------------------------------ tests */

START_TEST(test_get_ok_and_request_shape)
{
	fx_t f;
	fx_init(&f, NULL);
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert_msg(c.res.error == NULL, "%s", c.res.error);
	ck_assert_int_eq(c.res.http_code, 200);
	ck_assert_ptr_nonnull(c.res.obj);
	ck_assert_str_eq(c.res.obj->name, "d1");
	ck_assert_int_eq(ck_obj_field(c.res.obj, 0)->u.i, 2);

	const fs_request_t *rq = fs_request(f.fs, 0);
	ck_assert_str_eq(rq->method, "GET");
	ck_assert_str_eq(rq->target, "/apis/apps/v1/namespaces/ns1/deployments/d1");
	ck_assert_ptr_nonnull(strstr(rq->headers, "Authorization: Bearer " TOKEN));
	/* No name of the library user's choosing: the program's own, as client-go does. */
	ck_assert_ptr_nonnull(
	    strstr(rq->headers, "User-Agent: unit-tests (linux) libckube/" CSC_VERSION));
	ck_assert_ptr_nonnull(strstr(rq->headers, "Accept-Encoding: gzip"));
	ck_assert_ptr_nonnull(strstr(rq->headers, "Accept: application/json"));
	call_clear(&c);
	fx_done(&f);
}
END_TEST

START_TEST(test_paths_and_queries)
{
	fx_t f;
	fx_init(&f, NULL);
	for (int i = 0; i < 5; i++)
		fs_push_simple(f.fs, 200, NULL, "{\"kind\":\"X\",\"metadata\":{\"name\":\"a\"}}");
	call_t c[5] = {{0}};
	run_get(&f, &t_ns, "ignored", "kube-system", &c[0]); /* cluster-scoped: no ns */
	run_get(&f, &t_pod, "a b", "p/1", &c[1]);            /* escaped path segments */
	run_get(&f, &t_pod, NULL, NULL, &c[2]);              /* all namespaces */
	ck_list_opts_t lo = {.label_selector = "app=nginx,tier in (a,b)",
	                     .resource_version = "123",
	                     .resource_version_match = "NotOlderThan",
	                     .limit = 500};
	char *q = ck_list_opts_query(&lo, false);
	ck_req_spec_t spec = {
	    .method = "GET", .type = &t_pod, .ns = "ns1", .query = q, .decode = CK_DEC_OBJECT};
	run_call(&f, &spec, &c[3]);
	/* A path no kind names (envtest's /readyz): it replaces the type's path, the
	 * query still follows. */
	ck_req_spec_t raw = {.method = "GET",
	                     .type = &t_pod,
	                     .ns = "ns1",
	                     .name = "p",
	                     .path = "/readyz",
	                     .query = "verbose",
	                     .no_decode = true,
	                     .keep_body = true};
	run_call(&f, &raw, &c[4]);
	free(q);
	ck_assert_str_eq(fs_request(f.fs, 0)->target, "/api/v1/namespaces/kube-system");
	ck_assert_str_eq(fs_request(f.fs, 1)->target, "/api/v1/namespaces/a%20b/pods/p%2F1");
	ck_assert_str_eq(fs_request(f.fs, 2)->target, "/api/v1/pods");
	ck_assert_str_eq(
	    fs_request(f.fs, 3)->target,
	    "/api/v1/namespaces/ns1/pods?labelSelector=app%3Dnginx%2Ctier%20in%20%28a%2Cb%29"
	    "&resourceVersion=123&resourceVersionMatch=NotOlderThan&limit=500");
	ck_assert_str_eq(fs_request(f.fs, 4)->target, "/readyz?verbose");
	ck_assert_int_eq(c[4].res.http_code, 200);
	for (int i = 0; i < 5; i++)
		call_clear(&c[i]);
	fx_done(&f);
}
END_TEST

START_TEST(test_query_builders)
{
	ck_list_opts_t w = {.resource_version = "77",
	                    .allow_watch_bookmarks = true,
	                    .timeout_seconds = 300,
	                    .send_initial_events = true,
	                    .resource_version_match = "NotOlderThan",
	                    .limit = 9,
	                    .field_selector = "metadata.name=x"};
	char *q = ck_list_opts_query(&w, true);
	ck_assert_str_eq(q, "watch=true&fieldSelector=metadata.name%3Dx&resourceVersion=77&"
	                    "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&"
	                    "timeoutSeconds=300&sendInitialEvents=true");
	free(q);
	/* continue excludes resourceVersion; "" resourceVersion is left out */
	ck_list_opts_t l = {.resource_version = "5", .continue_token = "abc=", .limit = 2};
	q = ck_list_opts_query(&l, false);
	ck_assert_str_eq(q, "limit=2&continue=abc%3D");
	free(q);
	ck_list_opts_t e = {.resource_version = ""};
	q = ck_list_opts_query(&e, false);
	ck_assert_str_eq(q, "");
	free(q);
	q = ck_list_opts_query(NULL, false);
	ck_assert_str_eq(q, "");
	free(q);

	q = ck_write_opts_query(NULL, false);
	ck_assert_str_eq(q, ""); /* no default manager: the server derives one */
	free(q);
	ck_write_opts_t wo = {.field_manager = "me", .force = true, .dry_run = true};
	q = ck_write_opts_query(&wo, true);
	ck_assert_str_eq(q, "fieldManager=me&dryRun=All&force=true");
	free(q);
	q = ck_write_opts_query(&wo, false);
	ck_assert_str_eq(q, "fieldManager=me&dryRun=All");
	free(q);

	ck_delete_opts_t d = {.propagation_policy = "Foreground",
	                      .precondition_uid = "u-1",
	                      .precondition_rv = "9",
	                      .grace_period_seconds = 0};
	q = ck_delete_opts_body(&d);
	ck_assert_str_eq(q,
	                 "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"propagationPolicy\":"
	                 "\"Foreground\",\"gracePeriodSeconds\":0,\"preconditions\":{\"uid\":"
	                 "\"u-1\",\"resourceVersion\":\"9\"}}");
	free(q);
	ck_assert_str_eq(ck_patch_content_type(CK_PATCH_APPLY), "application/apply-patch+yaml");
	ck_assert_str_eq(ck_patch_content_type(CK_PATCH_STRATEGIC),
	                 "application/strategic-merge-patch+json");
}
END_TEST

typedef struct stat_seen {
	int n429, n200, n500, n0;
} stat_seen_t;

static void stat_cb(void *ud, const char *method, int code, uint64_t count)
{
	stat_seen_t *s = ud;
	if (strcmp(method, "GET") != 0)
		return;
	if (code == 429)
		s->n429 += (int)count;
	else if (code == 200)
		s->n200 += (int)count;
	else if (code == 500)
		s->n500 += (int)count;
	else if (code == 0)
		s->n0 += (int)count;
}

START_TEST(test_429_retry_after_then_success)
{
	fx_t f;
	fx_init(&f, NULL);
	fs_push_simple(f.fs, 429, "Retry-After: 0\r\n",
	               "{\"kind\":\"Status\",\"code\":429,\"reason\":\"TooManyRequests\"}");
	fs_push_simple(f.fs, 429, "Retry-After: 0\r\n", "{}");
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert_msg(c.res.error == NULL, "%s", c.res.error);
	ck_assert_str_eq(c.res.obj->name, "d1");
	ck_assert_int_eq(fs_nrequests(f.fs), 3);
	stat_seen_t s = {0};
	ck_client_stats_foreach(f.c, stat_cb, &s);
	ck_assert_int_eq(s.n429, 2);
	ck_assert_int_eq(s.n200, 1);
	ck_client_latency_t lat;
	ck_client_latency_snapshot(f.c, &lat);
	ck_assert_uint_eq(lat.count, 3);
	ck_assert_uint_eq(lat.counts[CK_CLIENT_LATENCY_NBUCKETS - 1], 3);
	ck_assert(lat.bounds[0] > 0 && lat.bounds[0] < lat.bounds[1]);
	call_clear(&c);
	fx_done(&f);
}
END_TEST

START_TEST(test_429_gives_up_after_max_retries)
{
	ck_client_opts_t o = {.max_retries = 2};
	fx_t f;
	fx_init(&f, &o);
	for (int i = 0; i < 3; i++)
		fs_push_simple(f.fs, 429, "Retry-After: 0\r\n",
		               "{\"kind\":\"Status\",\"code\":429,\"reason\":\"TooManyRequests\","
		               "\"message\":\"slow down\"}");
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("never"));
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert_int_eq(fs_nrequests(f.fs), 3);
	ck_assert(ck_result_is_too_many_requests(&c.res));
	ck_assert_ptr_nonnull(strstr(c.res.error, "429 TooManyRequests: slow down"));
	call_clear(&c);
	fx_done(&f);
}
END_TEST

START_TEST(test_500_with_retry_after_is_retried)
{
	fx_t f;
	fx_init(&f, NULL);
	fs_push_simple(f.fs, 500, "Retry-After: 1\r\n", "{}");
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	call_t c = {0};
	double t0 = ev_time();
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert_msg(c.res.error == NULL, "%s", c.res.error);
	ck_assert_int_eq(fs_nrequests(f.fs), 2);
	/* The delay was honoured (a lower bound, not a speed). */
	ck_assert(ev_time() - t0 >= 0.9);
	call_clear(&c);
	fx_done(&f);
}
END_TEST

START_TEST(test_500_without_retry_after_is_not_retried)
{
	fx_t f;
	fx_init(&f, NULL);
	fs_push_simple(f.fs, 500, NULL,
	               "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"boom\","
	               "\"reason\":\"InternalError\",\"code\":500}");
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("never"));
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert_int_eq(fs_nrequests(f.fs), 1);
	ck_assert_int_eq(c.res.http_code, 500);
	ck_assert(ck_result_is_server_error(&c.res));
	ck_assert_ptr_nonnull(strstr(c.res.error, "500 InternalError: boom"));
	ck_assert_ptr_null(c.res.obj);
	stat_seen_t s = {0};
	ck_client_stats_foreach(f.c, stat_cb, &s);
	ck_assert_int_eq(s.n500, 1);
	call_clear(&c);
	fx_done(&f);
}
END_TEST

START_TEST(test_reset_mid_body_get_is_retried)
{
	fx_t f;
	fx_init(&f, NULL);
	const char *body = DEP_JSON("d1");
	char *head = ck_xasprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	                          "Content-Length: %zu\r\n\r\n",
	                          strlen(body));
	fs_resp_t *r = fs_resp_new();
	fs_write(r, head);
	fs_writen(r, body, 40);
	fs_sleep(r, 50);
	fs_reset(r);
	fs_push(f.fs, r);
	free(head);
	fs_push_simple(f.fs, 200, NULL, body);
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert_msg(c.res.error == NULL, "%s", c.res.error);
	ck_assert_str_eq(c.res.obj->name, "d1");
	ck_assert_int_eq(fs_nrequests(f.fs), 2);
	stat_seen_t s = {0};
	ck_client_stats_foreach(f.c, stat_cb, &s);
	ck_assert_int_eq(s.n0, 1);
	call_clear(&c);
	fx_done(&f);
}
END_TEST

START_TEST(test_early_eof_get_is_retried)
{
	fx_t f;
	fx_init(&f, NULL);
	const char *body = DEP_JSON("d1");
	char *head = ck_xasprintf("HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", strlen(body));
	fs_resp_t *r = fs_resp_new();
	fs_write(r, head);
	fs_writen(r, body, 10);
	fs_close(r); /* a clean FIN, fewer bytes than announced */
	fs_push(f.fs, r);
	free(head);
	fs_push_simple(f.fs, 200, NULL, body);
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert_msg(c.res.error == NULL, "%s", c.res.error);
	ck_assert_int_eq(fs_nrequests(f.fs), 2);
	call_clear(&c);
	fx_done(&f);
}
END_TEST

/* A worker thread's blocking call. */
typedef struct worker {
	ck_client_t *c;
	int which; /* 0 get, 1 create, 2 the Lease lock's get */
	int rc;
	ck_result_t res;
	atomic_int done;
} worker_t;

static void *worker_main(void *arg)
{
	worker_t *w = arg;
	if (w->which == 0)
		w->rc = ck_client_get_sync(w->c, &t_dep, "ns1", "d1", &w->res);
	else if (w->which == 2) {
		le_lock_t *l = le_lock_lease_new(w->c, "ns1", "sc");
		le_record_t rec;
		le_record_init(&rec);
		char *err = NULL;
		w->rc = l->ops->get(l, 5000, &rec, &err);
		if (w->rc != 0)
			w->res.error = err;
		else
			free(err);
		le_record_free(&rec);
		l->ops->free(l);
	} else
		w->rc = ck_client_create_sync(w->c, &t_dep, "ns1", DEP_JSON("d1"), NULL, &w->res);
	atomic_store(&w->done, 1);
	return NULL;
}

static void run_worker(fx_t *f, worker_t *w)
{
	pthread_t th;
	w->c = f->c;
	pthread_create(&th, NULL, worker_main, w);
	run_until(f->loop, &w->done);
	pthread_join(th, NULL);
}

START_TEST(test_reset_mid_body_post_is_not_retried)
{
	fx_t f;
	fx_init(&f, NULL);
	const char *body = DEP_JSON("d1");
	char *head =
	    ck_xasprintf("HTTP/1.1 201 Created\r\nContent-Length: %zu\r\n\r\n", strlen(body));
	fs_resp_t *r = fs_resp_new();
	fs_write(r, head);
	fs_writen(r, body, 40);
	fs_sleep(r, 50);
	fs_reset(r);
	fs_push(f.fs, r);
	free(head);
	fs_push_simple(f.fs, 201, NULL, body);
	worker_t w = {.which = 1};
	run_worker(&f, &w);
	ck_assert_int_eq(w.rc, -1);
	ck_assert_int_eq(fs_nrequests(f.fs), 1);
	ck_assert(ck_result_is_transport(&w.res));
	ck_assert_int_eq(w.res.http_code, 0);
	ck_assert_int_ne(w.res.transport_code, 0);
	char *want = ck_xasprintf("POST %s/apis/apps/v1/namespaces/ns1/deployments"
	                          ": ",
	                          f.base);
	ck_assert_msg(strncmp(w.res.error, want, strlen(want)) == 0, "%s", w.res.error);
	ck_assert_ptr_null(strstr(w.res.error, TOKEN));
	free(want);
	const fs_request_t *rq = fs_request(f.fs, 0);
	ck_assert_str_eq(rq->method, "POST");
	ck_assert_str_eq(rq->body, body);
	ck_assert_ptr_nonnull(strstr(rq->headers, "Content-Type: application/json"));
	ck_result_clear(&w.res);
	fx_done(&f);
}
END_TEST

START_TEST(test_slow_body_decoded_incrementally)
{
	fx_t f;
	fx_init(&f, NULL);
	atomic_int first_seen = 0;
	const char *p1 = "{\"kind\":\"DeploymentList\",\"apiVersion\":\"apps/v1\",\"metadata\":"
	                 "{\"resourceVersion\":\"42\"},\"items\":[" DEP_JSON("a") ",";
	const char *p2 = DEP_JSON("b") "]}";
	fs_resp_t *r = fs_resp_new();
	fs_write(r, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	            "Transfer-Encoding: chunked\r\n\r\n");
	char *chunk = ck_xasprintf("%zx\r\n%s\r\n", strlen(p1), p1);
	fs_write(r, chunk);
	free(chunk);
	/* The rest only once the client has handed the first item over. */
	fs_wait_flag(r, &first_seen);
	fs_sleep(r, 20);
	chunk = ck_xasprintf("%zx\r\n%s\r\n0\r\n\r\n", strlen(p2), p2);
	/* and byte by byte, to cut tokens everywhere */
	for (size_t i = 0; chunk[i]; i++)
		fs_writen(r, chunk + i, 1), i % 8 == 0 ? fs_sleep(r, 1) : r;
	free(chunk);
	fs_push(f.fs, r);

	call_t c = {.on_object_flag = &first_seen};
	char *err = NULL;
	ck_req_t *req = ck_client_list(f.c, &t_dep, "ns1", NULL, &call_cb, call_done, &c, &err);
	ck_assert_ptr_nonnull(req);
	run_until(f.loop, &c.done);
	ck_assert_msg(c.res.error == NULL, "%s", c.res.error);
	ck_assert_int_eq(c.objects, 2);
	ck_assert_str_eq(c.names[0], "a");
	ck_assert_str_eq(c.names[1], "b");
	ck_assert_str_eq(c.list_rv, "42");
	pthread_mutex_lock(&f.fs->mu);
	ck_assert_int_eq(f.fs->flag_timeouts, 0);
	pthread_mutex_unlock(&f.fs->mu);
	call_clear(&c);
	fx_done(&f);
}
END_TEST

/* A list that takes longer than the request timeout but keeps coming completes. */
START_TEST(test_slow_list_outlives_request_timeout)
{
	ck_client_opts_t o = {.request_timeout_ms = 300};
	fx_t f;
	fx_init(&f, &o);
	fs_resp_t *r = fs_resp_new();
	fs_write(r, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	            "Transfer-Encoding: chunked\r\n\r\n");
	const char *head = "{\"kind\":\"DeploymentList\",\"apiVersion\":\"apps/v1\",\"metadata\":"
	                   "{\"resourceVersion\":\"42\"},\"items\":[";
	char *ch = ck_xasprintf("%zx\r\n%s\r\n", strlen(head), head);
	fs_write(r, ch);
	free(ch);
	/* 12 items, 100 ms apart: 1.2 s in all, four times the request timeout. */
	for (int i = 0; i < 12; i++) {
		fs_sleep(r, 100);
		char *item = ck_xasprintf("%s" DEP_JSON("d"), i ? "," : "");
		ch = ck_xasprintf("%zx\r\n%s\r\n", strlen(item), item);
		fs_write(r, ch);
		free(ch);
		free(item);
	}
	fs_write(r, "2\r\n]}\r\n0\r\n\r\n");
	fs_push(f.fs, r);
	/* A plain GET still has the total limit. */
	fs_resp_t *r2 = fs_resp_new();
	fs_write(r2, "HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n{");
	for (int i = 0; i < 12; i++)
		fs_sleep(r2, 100), fs_write(r2, " ");
	fs_push(f.fs, r2);

	call_t c = {0};
	char *err = NULL;
	ck_assert_ptr_nonnull(
	    ck_client_list(f.c, &t_dep, "ns1", NULL, &call_cb, call_done, &c, &err));
	run_until(f.loop, &c.done);
	ck_assert_msg(c.res.error == NULL, "%s", c.res.error);
	ck_assert_int_eq(c.objects, 12);
	ck_assert_str_eq(c.list_rv, "42");
	call_clear(&c);

	call_t g = {0};
	run_get(&f, &t_dep, "ns1", "d1", &g);
	ck_assert(ck_result_is_transport(&g.res));
	ck_assert_int_eq(g.res.transport_code, 28); /* CURLE_OPERATION_TIMEDOUT */
	call_clear(&g);
	fx_done(&f);
}
END_TEST

/* A list that stops coming is cut by the stall guard. */
START_TEST(test_stalled_list_is_cut)
{
	ck_client_opts_t o = {.stall_timeout_ms = 1000};
	fx_t f;
	fx_init(&f, &o);
	fs_resp_t *r = fs_resp_new();
	const char *body = LIST_JSON("42", "", DEP_JSON("a"));
	char *head = ck_xasprintf("HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", strlen(body));
	fs_write(r, head);
	free(head);
	/* Silent with the connection open. (Not after body bytes: curl averages the
	 * speed over 5 s, so a test would wait that long too.) */
	fs_sleep(r, 4000);
	fs_write(r, body);
	fs_push(f.fs, r);
	call_t c = {0};
	char *err = NULL;
	ck_assert_ptr_nonnull(
	    ck_client_list(f.c, &t_dep, "ns1", NULL, &call_cb, call_done, &c, &err));
	run_until(f.loop, &c.done);
	ck_assert(ck_result_is_transport(&c.res));
	ck_assert_int_eq(c.res.transport_code, 28);
	ck_assert_int_eq(c.objects, 0);
	ck_assert_int_eq(fs_nrequests(f.fs), 1);
	call_clear(&c);
	fx_done(&f);
}
END_TEST

static const unsigned char gz_body[] = {
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xdd, 0x90, 0x41, 0x0a, 0x02, 0x31,
    0x0c, 0x45, 0xaf, 0x32, 0x64, 0x2d, 0x88, 0xb8, 0x10, 0x5c, 0x7b, 0x06, 0xf7, 0xb1, 0x13, 0x86,
    0x32, 0x6d, 0x1a, 0x9a, 0x2a, 0xea, 0xd0, 0xbb, 0xdb, 0x64, 0xe5, 0x19, 0x26, 0xbb, 0xfc, 0x17,
    0x7e, 0xf8, 0x7f, 0x83, 0x35, 0xf2, 0x0c, 0xd7, 0x09, 0x6e, 0x24, 0xa9, 0x7c, 0x32, 0x71, 0x83,
    0xc3, 0x04, 0x28, 0xf1, 0x4e, 0x55, 0x63, 0x61, 0x63, 0x28, 0xa2, 0xc7, 0xd7, 0xc9, 0x40, 0xa6,
    0x86, 0x33, 0x36, 0x1c, 0xf2, 0x06, 0x8c, 0x99, 0x8c, 0x2f, 0x5f, 0x43, 0xb6, 0xa9, 0x60, 0x70,
    0x89, 0xd5, 0xcf, 0x2b, 0x69, 0x79, 0xd6, 0x40, 0x7f, 0x66, 0x17, 0xd3, 0x13, 0x3e, 0x28, 0xa9,
    0x9b, 0x08, 0xfa, 0xff, 0xf7, 0x4e, 0x06, 0x7a, 0x1f, 0xf9, 0x54, 0x28, 0x78, 0xba, 0x3a, 0x6a,
    0x8d, 0x01, 0x2d, 0xea, 0xb9, 0xf7, 0x1f, 0xeb, 0x1f, 0xd8, 0x04, 0x6f, 0x01, 0x00, 0x00};

START_TEST(test_gzip_body)
{
	fx_t f;
	fx_init(&f, NULL);
	char *head = ck_xasprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	                          "Content-Encoding: gzip\r\nContent-Length: %zu\r\n\r\n",
	                          sizeof(gz_body));
	fs_resp_t *r = fs_resp_new();
	fs_write(r, head);
	fs_writen(r, gz_body, 60);
	fs_sleep(r, 10);
	fs_writen(r, gz_body + 60, sizeof(gz_body) - 60);
	fs_push(f.fs, r);
	free(head);
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "gz", &c);
	ck_assert_msg(c.res.error == NULL, "%s", c.res.error);
	ck_assert_str_eq(c.res.obj->name, "gz");
	ck_assert_int_eq(ck_obj_field(c.res.obj, 0)->u.i, 3);
	ck_assert_uint_eq(strlen(ck_obj_label(c.res.obj, "pad")), 200);
	call_clear(&c);
	fx_done(&f);
}
END_TEST

START_TEST(test_malformed_json)
{
	fx_t f;
	fx_init(&f, NULL);
	fs_push_simple(f.fs, 200, NULL, "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"replicas\":}}");
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert_ptr_nonnull(c.res.error);
	ck_assert_int_eq(fs_nrequests(f.fs), 1);
	ck_assert_ptr_null(c.res.obj);
	char *want =
	    ck_xasprintf("GET %s/apis/apps/v1/namespaces/ns1/deployments/d1: decoding", f.base);
	ck_assert_msg(strncmp(c.res.error, want, strlen(want)) == 0, "%s", c.res.error);
	ck_assert_msg(strstr(c.res.error, "byte") != NULL, "%s", c.res.error);
	free(want);
	call_clear(&c);
	fx_done(&f);
}
END_TEST

START_TEST(test_truncated_json)
{
	fx_t f;
	fx_init(&f, NULL);
	/* A complete HTTP body holding half a JSON object. */
	fs_push_simple(f.fs, 200, NULL, "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"repl");
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert_ptr_nonnull(c.res.error);
	ck_assert_msg(strstr(c.res.error, "trunc") != NULL, "%s", c.res.error);
	ck_assert_ptr_null(c.res.obj);
	call_clear(&c);
	fx_done(&f);
}
END_TEST

START_TEST(test_oversized_object)
{
	ck_client_opts_t o = {.max_object_bytes = 4096};
	fx_t f;
	fx_init(&f, &o);
	/* A 1 MiB label value, streamed with no Content-Length (ends at close). */
	fs_resp_t *r = fs_resp_new();
	fs_write(r, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
	            "{\"metadata\":{\"name\":\"big\",\"labels\":{\"x\":\"");
	char *pad = ck_xmalloc(65536);
	memset(pad, 'a', 65536);
	for (int i = 0; i < 16; i++)
		fs_writen(r, pad, 65536);
	free(pad);
	fs_write(r, "\"}}}");
	fs_close(r);
	fs_push(f.fs, r);
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "big", &c);
	ck_assert_ptr_nonnull(c.res.error);
	ck_assert_msg(strstr(c.res.error, "larger than the limit of 4096 bytes") != NULL, "%s",
	              c.res.error);
	ck_assert_ptr_null(c.res.obj);
	ck_assert_int_eq(fs_nrequests(f.fs), 1);
	call_clear(&c);
	fx_done(&f);
}
END_TEST

START_TEST(test_404_status_decoded)
{
	fx_t f;
	fx_init(&f, NULL);
	fs_push_simple(f.fs, 404, NULL, status_404);
	call_t c = {0};
	run_get(&f, &t_dep, "x", "y", &c);
	ck_assert_int_eq(c.res.http_code, 404);
	ck_assert(ck_result_is_not_found(&c.res));
	ck_assert(!ck_result_is_transport(&c.res));
	ck_assert_str_eq(c.res.status.reason, "NotFound");
	ck_assert_str_eq(c.res.status.details_name, "y");
	char *want = ck_xasprintf("GET %s/apis/apps/v1/namespaces/x/deployments/y: 404 NotFound: "
	                          "deployments.apps \"y\" not found",
	                          f.base);
	ck_assert_str_eq(c.res.error, want);
	free(want);
	call_clear(&c);
	fx_done(&f);
}
END_TEST

START_TEST(test_non_status_error_body)
{
	fx_t f;
	fx_init(&f, NULL);
	fs_push_simple(f.fs, 502, NULL, "<html>bad gateway</html>");
	call_t c = {0};
	run_get(&f, &t_dep, "x", "y", &c);
	ck_assert_int_eq(c.res.http_code, 502);
	ck_assert(ck_result_is_server_error(&c.res));
	ck_assert_msg(strstr(c.res.error, ": 502") != NULL, "%s", c.res.error);
	call_clear(&c);
	fx_done(&f);
}
END_TEST

/* A credential that can change (here an exec plugin's) is refreshed after a 401 and
 * the request retried once; a second 401 is the answer. */
START_TEST(test_401_refreshes_and_retries_once)
{
	plug_t p;
	plug_init(&p);
	fx_t f;
	fx_init_exec(&f, &p, NULL, NULL, NULL);
	const char *unauth = "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":"
	                     "\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}";
	fs_push_simple(f.fs, 401, NULL, unauth);
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	fs_push_simple(f.fs, 401, NULL, unauth);
	fs_push_simple(f.fs, 401, NULL, unauth);
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("never"));
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert_msg(c.res.error == NULL, "%s", c.res.error);
	ck_assert_int_eq(fs_nrequests(f.fs), 2);
	ck_assert_int_eq(plug_runs(&p), 2);
	ck_assert_ptr_nonnull(strstr(fs_request(f.fs, 1)->headers, "Authorization: Bearer tok-2"));
	call_clear(&c);
	call_t c2 = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c2);
	ck_assert(ck_result_is_unauthorized(&c2.res));
	ck_assert_int_eq(fs_nrequests(f.fs), 4);
	call_clear(&c2);
	fx_done(&f);
	plug_done(&p);
}
END_TEST

/* A static token cannot change: its 401 is the answer at once, with no second
 * request the server would refuse the same way. */
START_TEST(test_401_static_token_not_retried)
{
	fx_t f;
	fx_init(&f, NULL);
	fs_push_simple(f.fs, 401, NULL,
	               "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":"
	               "\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}");
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("never"));
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert(ck_result_is_unauthorized(&c.res));
	ASSERT_HAS(c.res.error, "401 Unauthorized: Unauthorized");
	ASSERT_LACKS(c.res.error, "refreshing");
	ck_assert_int_eq(fs_nrequests(f.fs), 1);
	call_clear(&c);
	fx_done(&f);
}
END_TEST

/* A 401 whose forced refresh fails: the error says both what the server said and why
 * no new credential could be had (the plugin's message and its installHint). */
START_TEST(test_401_keeps_the_refresh_error)
{
	plug_t p;
	plug_init(&p);
	plug_write(&p, "mode.2", "fail");
	fx_t f;
	fx_init_exec(&f, &p, NULL, NULL, NULL);
	fs_push_simple(f.fs, 401, NULL,
	               "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":"
	               "\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}");
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("never"));
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert(ck_result_is_unauthorized(&c.res));
	ck_assert_int_eq(c.res.http_code, 401);
	ASSERT_HAS(c.res.error, "deployments/d1: 401 Unauthorized: Unauthorized");
	ASSERT_HAS(c.res.error, "login failed: account locked");
	ASSERT_HAS(c.res.error, "try: apt install the-plugin");
	ASSERT_LACKS(c.res.error, "tok-");
	ck_assert_int_eq(fs_nrequests(f.fs), 1);
	ck_assert_int_eq(plug_runs(&p), 2);
	ck_assert_ptr_nonnull(strstr(fs_request(f.fs, 0)->headers, "Authorization: Bearer tok-1"));
	call_clear(&c);
	fx_done(&f);
	plug_done(&p);
}
END_TEST

/* -v=5 traces every attempt and every retry, with no secret in it; -v=4 nothing. */
START_TEST(test_trace_at_v5)
{
	char path[] = "/tmp/csc-client-log-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_log_set_fd(fd);
	ck_log_set_verbosity(5);
	fx_t f;
	fx_init(&f, NULL);
	fs_push_simple(f.fs, 429, "Retry-After: 0\r\n", "{}");
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert_msg(c.res.error == NULL, "%s", c.res.error);
	call_clear(&c);
	ck_log_set_verbosity(4);
	call_t c2 = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c2);
	call_clear(&c2);
	ck_log_set_verbosity(0);
	ck_log_set_fd(2);
	fx_done(&f);
	close(fd);

	char *text = NULL;
	ck_assert_int_eq(ck_file_read_all(path, &text, NULL, NULL), 0);
	unlink(path);
	int lines = 0;
	for (char *q = text; *q; q++)
		lines += *q == '\n';
	ck_assert_msg(lines == 3, "%s", text);
	const char *url = "verb=\"GET\" url=\"/apis/apps/v1/namespaces/ns1/deployments/d1\"";
	char *want = ck_xasprintf("\"Response\" %s status=429 milliseconds=", url);
	ASSERT_HAS(text, want);
	free(want);
	ASSERT_HAS(text, "bytes=2 attempt=1\n");
	want = ck_xasprintf("\"Retrying request\" %s reason=\"429 with Retry-After\" "
	                    "delayMilliseconds=0 attempt=2\n",
	                    url);
	ASSERT_HAS(text, want);
	free(want);
	want = ck_xasprintf("\"Response\" %s status=200 milliseconds=", url);
	ASSERT_HAS(text, want);
	free(want);
	want = ck_xasprintf("bytes=%zu attempt=2\n", strlen(DEP_JSON("d1")));
	ASSERT_HAS(text, want);
	free(want);
	ASSERT_LACKS(text, TOKEN);
	ASSERT_LACKS(text, "Bearer");
	ASSERT_LACKS(text, "uthorization");
	free(text);
}
END_TEST

/* 2029-12-31T23:00:00Z: where the config's fake clock starts. */
#define WALL_START 1893452400LL

/*
 * The plugin runs off the loop. A watch streams (credential from run 1); then the
 * credential expires and a GET needs run 2, which waits until the test says go. The
 * test says go only after three more watch events have arrived while run 2 was
 * known to be running (a loop timer saw it start). With the plugin on the loop
 * thread, nothing would turn and the GET would fail with the plugin's "no go".
 */
typedef struct offloop {
	fx_t *f;
	plug_t *p;
	ck_clk_fake_t *fc;
	int events;
	int during_run; /* watch events delivered while run 2 was in progress */
	atomic_int started;
	atomic_int watch_done;
	call_t get;
	ck_result_t watch_res;
} offloop_t;

static void offloop_poll(struct ev_loop *loop, ev_timer *w, int revents)
{
	offloop_t *o = w->data;
	if (!atomic_load(&o->started) && plug_has(o->p, "started.2"))
		atomic_store(&o->started, 1);
}

static void offloop_event(void *ud, ck_watch_type_t type, ck_obj_t *obj, const ck_status_t *status)
{
	offloop_t *o = ud;
	ck_obj_unref(obj);
	if (++o->events == 1) {
		/* The cached credential expires; the next request needs a plugin run. */
		ck_clk_fake_advance(o->fc, 7200 * CK_NS_PER_SEC);
		ck_req_spec_t spec = {.method = "GET",
		                      .type = &t_dep,
		                      .ns = "ns1",
		                      .name = "d1",
		                      .decode = CK_DEC_OBJECT};
		ck_assert_ptr_nonnull(
		    ck_client_request(o->f->c, &spec, NULL, call_done, &o->get, NULL));
		return;
	}
	if (atomic_load(&o->started) && !plug_has(o->p, "finished.2") && ++o->during_run == 3)
		plug_write(o->p, "go", "");
}

static void offloop_watch_done(void *ud, ck_result_t *res)
{
	offloop_t *o = ud;
	o->watch_res = *res;
	memset(res, 0, sizeof(*res));
	atomic_store(&o->watch_done, 1);
}

START_TEST(test_exec_plugin_runs_off_the_loop)
{
	char logpath[] = "/tmp/csc-client-log-XXXXXX";
	int logfd = mkstemp(logpath);
	ck_assert_int_ge(logfd, 0);
	ck_log_set_fd(logfd);
	ck_log_set_verbosity(5);
	plug_t p;
	plug_init(&p);
	plug_write(&p, "mode.2", "wait");
	ck_clk_fake_t fc;
	ck_clk_fake_init(&fc, 0, WALL_START * (int64_t)CK_NS_PER_SEC);
	ck_config_load_opts_t lo = {.clock = &fc.base};
	fx_t f;
	fx_init_exec(&f, &p, "2030-01-01T00:00:00Z", &lo, NULL);
	offloop_t o = {.f = &f, .p = &p, .fc = &fc};

	const char *ev = "{\"type\":\"MODIFIED\",\"object\":" DEP_JSON("a") "}\n";
	char *chunk = ck_xasprintf("%zx\r\n%s\r\n", strlen(ev), ev);
	fs_resp_t *r = fs_resp_new();
	fs_write(r, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	            "Transfer-Encoding: chunked\r\n\r\n");
	fs_write(r, chunk);
	fs_wait_flag(r, &o.started); /* until the loop has seen run 2 start */
	for (int i = 0; i < 3; i++)
		fs_sleep(r, 20), fs_write(r, chunk);
	fs_sleep(r, 200);
	fs_write(r, "0\r\n\r\n");
	fs_push(f.fs, r);
	free(chunk);
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));

	ev_timer poll;
	ev_timer_init(&poll, offloop_poll, 0.01, 0.01);
	poll.data = &o;
	ev_timer_start(f.loop, &poll);
	ck_list_opts_t wo = {.resource_version = "5"};
	ck_dec_cb_t dcb = {.on_event = offloop_event};
	ck_assert_ptr_nonnull(
	    ck_client_watch(f.c, &t_dep, "ns1", &wo, &dcb, offloop_watch_done, &o, NULL));
	run_until(f.loop, &o.get.done);
	run_until(f.loop, &o.watch_done);
	ev_timer_stop(f.loop, &poll);
	ck_log_set_verbosity(0);
	ck_log_set_fd(2);

	ck_assert_msg(o.get.res.error == NULL, "%s", o.get.res.error);
	ck_assert_str_eq(o.get.res.obj->name, "d1");
	ck_assert_msg(o.watch_res.error == NULL, "%s", o.watch_res.error);
	ck_assert_int_eq(o.events, 4);
	ck_assert_int_eq(o.during_run, 3);
	ck_assert_int_eq(plug_runs(&p), 2);
	pthread_mutex_lock(&f.fs->mu);
	ck_assert_int_eq(f.fs->flag_timeouts, 0);
	pthread_mutex_unlock(&f.fs->mu);
	ck_assert_ptr_nonnull(strstr(fs_request(f.fs, 0)->headers, "Authorization: Bearer tok-1"));
	ck_assert_ptr_nonnull(strstr(fs_request(f.fs, 1)->headers, "Authorization: Bearer tok-2"));
	call_clear(&o.get);
	ck_result_clear(&o.watch_res);
	fx_done(&f);
	plug_done(&p);

	/* The trace names the plugin runs, never what they returned. */
	close(logfd);
	char *text = NULL;
	ck_assert_int_eq(ck_file_read_all(logpath, &text, NULL, NULL), 0);
	unlink(logpath);
	ASSERT_HAS(text, "\"Exec credential plugin finished\" ok=true");
	ASSERT_LACKS(text, "tok-");
	free(text);
}
END_TEST

/*
 * A failing plugin is not run once per request: requests that need it at the same
 * time share one run, and during the backoff that follows (1 s, then 2 s, on the
 * config's fake clock) requests fail at once with its error and installHint.
 */
START_TEST(test_failing_exec_plugin_backs_off)
{
	plug_t p;
	plug_init(&p);
	plug_write(&p, "mode", "fail");
	ck_clk_fake_t fc;
	ck_clk_fake_init(&fc, 0, WALL_START * (int64_t)CK_NS_PER_SEC);
	ck_config_load_opts_t lo = {.clock = &fc.base};
	fx_t f;
	fx_init_exec(&f, &p, NULL, &lo, NULL);
	ck_req_spec_t spec = {
	    .method = "GET", .type = &t_dep, .ns = "ns1", .name = "d1", .decode = CK_DEC_OBJECT};

	const int expect_runs[] = {1, 1, -1, 2, 2, -1, 2, -1, 3};
	for (size_t k = 0; k < CK_ARRAY_LEN(expect_runs); k++) {
		if (expect_runs[k] < 0) { /* a step of the fake clock, in seconds */
			ck_clk_fake_advance(&fc, (uint64_t)-expect_runs[k] * CK_NS_PER_SEC);
			continue;
		}
		call_t c[5] = {{0}};
		for (int i = 0; i < 5; i++)
			ck_assert_ptr_nonnull(
			    ck_client_request(f.c, &spec, NULL, call_done, &c[i], NULL));
		for (int i = 0; i < 5; i++) {
			run_until(f.loop, &c[i].done);
			ck_assert(ck_result_is_transport(&c[i].res));
			ASSERT_HAS(c[i].res.error, "login failed: account locked");
			ASSERT_HAS(c[i].res.error, "try: apt install the-plugin");
			call_clear(&c[i]);
		}
		ck_assert_msg(plug_runs(&p) == expect_runs[k], "step %zu: %d runs", k,
		              plug_runs(&p));
	}
	ck_assert_int_eq(fs_nrequests(f.fs), 0);

	/* Fixed: after the backoff (now 4 s) the plugin runs again, and all is well. */
	plug_write(&p, "mode", "token");
	ck_clk_fake_advance(&fc, 4 * CK_NS_PER_SEC);
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	call_t ok = {0};
	run_get(&f, &t_dep, "ns1", "d1", &ok);
	ck_assert_msg(ok.res.error == NULL, "%s", ok.res.error);
	ck_assert_int_eq(plug_runs(&p), 4);
	ck_assert_ptr_nonnull(strstr(fs_request(f.fs, 0)->headers, "Authorization: Bearer tok-4"));
	call_clear(&ok);
	fx_done(&f);
	plug_done(&p);
}
END_TEST

/*
 * ck_client_free while the plugin runs: the plugin is killed and the helper joined (no
 * 30 s wait), a worker waiting in a parked call returns "client shutting down", and
 * a parked request cancelled before that never calls back.
 */
START_TEST(test_free_while_exec_plugin_runs)
{
	plug_t p;
	plug_init(&p);
	plug_write(&p, "mode", "wait");
	fx_t f;
	fx_init_exec(&f, &p, NULL, NULL, NULL);
	call_t cancelled = {0};
	ck_req_spec_t spec = {
	    .method = "GET", .type = &t_dep, .ns = "ns1", .name = "d1", .decode = CK_DEC_OBJECT};
	ck_req_t *r = ck_client_request(f.c, &spec, NULL, call_done, &cancelled, NULL);
	ck_assert_ptr_nonnull(r);
	worker_t w = {.which = 0, .c = f.c};
	pthread_t th;
	pthread_create(&th, NULL, worker_main, &w);
	for (int i = 0; i < 4000 && !plug_has(&p, "started.1"); i++)
		ev_run(f.loop, EVRUN_NOWAIT), fs_sleep_ms(1);
	ck_assert(plug_has(&p, "started.1"));
	/* Until the worker's call is parked too (its request is on the loop). */
	for (int i = 0; i < 200; i++)
		ev_run(f.loop, EVRUN_NOWAIT), fs_sleep_ms(1);
	ck_req_cancel(r);
	ck_client_free(f.c);
	f.c = NULL;
	pthread_join(th, NULL);
	ck_assert_int_eq(w.rc, -1);
	ASSERT_HAS(w.res.error, "client shutting down");
	ck_result_clear(&w.res);
	ck_assert_int_eq(atomic_load(&cancelled.done), 0);
	/* Killed: told to go now, a live plugin would finish within 50 ms. */
	plug_write(&p, "go", "");
	fs_sleep_ms(300);
	ck_assert(!plug_has(&p, "finished.1"));
	ck_assert_int_eq(plug_runs(&p), 1);
	ck_assert_int_eq(fs_nrequests(f.fs), 0);
	fx_done(&f);
	plug_done(&p);
}
END_TEST

START_TEST(test_connect_refused)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	/* A port that was just free: bind, read the number, close. */
	fault_server_t *fs = fs_new();
	int port = fs->port;
	fs_free(fs);
	ck_client_t *cl = fs_client_new(loop, port, TOKEN, NULL);
	fx_t f = {.loop = loop, .c = cl};
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert_int_eq(c.res.http_code, 0);
	ck_assert_int_eq(c.res.transport_code, 7); /* CURLE_COULDNT_CONNECT */
	ck_assert(ck_result_is_transport(&c.res));
	char *want = ck_xasprintf(
	    "GET http://127.0.0.1:%d/apis/apps/v1/namespaces/ns1/deployments/d1: ", port);
	ck_assert_msg(strncmp(c.res.error, want, strlen(want)) == 0, "%s", c.res.error);
	free(want);
	call_clear(&c);
	ck_client_free(cl);
	ev_loop_destroy(loop);
}
END_TEST

/* tls-server-name only matters for TLS (SNI and verification; the real server is in
 * tests/integration): over plain http the request goes to the server's host and its
 * Host header stays the server's, as in client-go. */
START_TEST(test_tls_server_name_and_host)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	fault_server_t *fs = fs_new();
	char *text =
	    ck_xasprintf("apiVersion: v1\nkind: Config\n"
	                 "clusters:\n- name: fs\n  cluster:\n    server: http://127.0.0.1:%d/\n"
	                 "    tls-server-name: kubernetes.default\n"
	                 "users:\n- name: u\n  user: {}\n"
	                 "contexts:\n- name: c\n  context:\n    cluster: fs\n    user: u\n"
	                 "current-context: c\n",
	                 fs->port);
	char *err = NULL;
	ck_config_t *cfg = ck_config_load_text(text, strlen(text), "test-kubeconfig", NULL, &err);
	free(text);
	ck_assert_msg(cfg != NULL, "%s", err);
	ck_client_t *cl = ck_client_new(loop, cfg, NULL, &err);
	ck_assert_msg(cl != NULL, "%s", err);
	char want[64];
	snprintf(want, sizeof(want), "127.0.0.1:%d", fs->port);
	ck_assert_str_eq(ck_client_host(cl), want);
	fs_push_simple(fs, 200, NULL, DEP_JSON("d1"));
	fx_t f = {.loop = loop, .c = cl, .fs = fs};
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert_msg(c.res.error == NULL, "%s", c.res.error);
	const fs_request_t *rq = fs_request(fs, 0);
	snprintf(want, sizeof(want), "Host: 127.0.0.1:%d", fs->port);
	ck_assert_msg(strstr(rq->headers, want) != NULL, "%s", rq->headers);
	ck_assert_ptr_null(strstr(rq->headers, "Authorization"));
	ck_assert_str_eq(rq->target, "/apis/apps/v1/namespaces/ns1/deployments/d1");
	call_clear(&c);
	fx_done(&f);
}
END_TEST

START_TEST(test_watch_events_and_cancel)
{
	fx_t f;
	fx_init(&f, NULL);
	const char *ev1 = "{\"type\":\"ADDED\",\"object\":" DEP_JSON("a") "}\n";
	const char *ev2 = "{\"type\":\"MODIFIED\",\"object\":" DEP_JSON("a") "}\n";
	const char *ev3 =
	    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Deployment\",\"apiVersion\":"
	    "\"apps/v1\",\"metadata\":{\"resourceVersion\":\"9\"}}}\n";
	const char *ev4 = "{\"type\":\"DELETED\",\"object\":" DEP_JSON("a") "}\n";
	fs_resp_t *r = fs_resp_new();
	fs_write(r, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	            "Transfer-Encoding: chunked\r\n\r\n");
	const char *evs[] = {ev1, ev2, ev3, ev4};
	for (int i = 0; i < 4; i++) {
		char *ch = ck_xasprintf("%zx\r\n%s\r\n", strlen(evs[i]), evs[i]);
		fs_write(r, ch);
		free(ch);
		fs_sleep(r, 5);
	}
	fs_write(r, "0\r\n\r\n");
	fs_push(f.fs, r);

	ck_list_opts_t o = {
	    .resource_version = "5", .allow_watch_bookmarks = true, .timeout_seconds = 60};
	call_t c = {0};
	char *err = NULL;
	ck_req_t *req = ck_client_watch(f.c, &t_dep, "ns1", &o, &call_cb, call_done, &c, &err);
	ck_assert_ptr_nonnull(req);
	run_until(f.loop, &c.done);
	ck_assert_msg(c.res.error == NULL, "%s", c.res.error);
	ck_assert_int_eq(c.events[CK_WATCH_ADDED], 1);
	ck_assert_int_eq(c.events[CK_WATCH_MODIFIED], 1);
	ck_assert_int_eq(c.events[CK_WATCH_BOOKMARK], 1);
	ck_assert_int_eq(c.events[CK_WATCH_DELETED], 1);
	/* The server gzips a watch one member per event, which curl 7.88 cannot read. */
	ck_assert_ptr_null(strcasestr(fs_request(f.fs, 0)->headers, "Accept-Encoding"));
	ck_assert_str_eq(fs_request(f.fs, 0)->target,
	                 "/apis/apps/v1/namespaces/ns1/deployments?watch=true&resourceVersion=5&"
	                 "allowWatchBookmarks=true&timeoutSeconds=60");
	call_clear(&c);

	/* A watch cancelled from inside its own event callback: no done, no leak. */
	fs_resp_t *r2 = fs_resp_new();
	fs_write(r2, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
	char *ch = ck_xasprintf("%zx\r\n%s%s\r\n", strlen(ev1) + strlen(ev2), ev1, ev2);
	fs_write(r2, ch);
	free(ch);
	fs_sleep(r2, 200);
	fs_push(f.fs, r2);
	call_t c2 = {0};
	ck_req_t *w2 = ck_client_watch(f.c, &t_dep, "ns1", &o, &call_cb, call_done, &c2, &err);
	c2.cancel_on_event = w2;
	run_until(f.loop, &c2.done);
	ck_assert_int_eq(c2.events[CK_WATCH_ADDED], 1);
	ck_assert_int_eq(c2.events[CK_WATCH_MODIFIED], 0); /* nothing after the cancel */
	ck_assert_ptr_null(c2.res.error);
	ck_assert_int_eq(c2.res.http_code, 0); /* done never ran */
	call_clear(&c2);
	fx_done(&f);
}
END_TEST

START_TEST(test_cancel_before_start)
{
	fx_t f;
	fx_init(&f, NULL);
	call_t c = {0};
	ck_req_spec_t spec = {.method = "GET", .type = &t_dep, .ns = "a", .name = "b"};
	ck_req_t *r = ck_client_request(f.c, &spec, NULL, call_done, &c, NULL);
	ck_req_cancel(r);
	/* Bad specs fail at once and never call back. */
	char *err = NULL;
	ck_req_spec_t bad = {.method = "BREW", .type = &t_dep};
	ck_assert_ptr_null(ck_client_request(f.c, &bad, NULL, call_done, &c, &err));
	ck_assert_ptr_nonnull(strstr(err, "BREW"));
	free(err);
	ev_run(f.loop, EVRUN_NOWAIT);
	ev_run(f.loop, 0); /* returns: nothing left that holds the loop */
	ck_assert_int_eq(atomic_load(&c.done), 0);
	ck_assert_int_eq(fs_nrequests(f.fs), 0);
	fx_done(&f);
}
END_TEST

START_TEST(test_sync_from_worker_thread)
{
	fx_t f;
	fx_init(&f, NULL);
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	worker_t w = {.which = 0};
	run_worker(&f, &w);
	ck_assert_msg(w.rc == 0, "%s", w.res.error);
	ck_assert_str_eq(w.res.obj->name, "d1");
	ck_result_clear(&w.res);
	fx_done(&f);
}
END_TEST

/* A blocking call made on the loop thread fails instead of deadlocking. */
static void on_loop_sync_done(void *ud, ck_result_t *res)
{
	call_t *c = ud;
	ck_client_t *cl = (ck_client_t *)c->list_rv; /* smuggled: the client */
	c->list_rv = NULL;
	ck_result_t r2 = {0};
	int rc = ck_client_get_sync(cl, &t_dep, "ns1", "d1", &r2);
	c->objects = rc;
	c->res = r2;
	atomic_store(&c->done, 1);
}

START_TEST(test_sync_on_loop_thread_fails)
{
	fx_t f;
	fx_init(&f, NULL);
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	call_t c = {0};
	c.list_rv = (char *)f.c;
	ck_req_spec_t spec = {
	    .method = "GET", .type = &t_dep, .ns = "ns1", .name = "d1", .decode = CK_DEC_OBJECT};
	ck_client_request(f.c, &spec, NULL, on_loop_sync_done, &c, NULL);
	run_until(f.loop, &c.done);
	ck_assert_int_eq(c.objects, -1);
	ck_assert_ptr_nonnull(strstr(c.res.error, "loop thread"));
	ck_result_clear(&c.res);
	fx_done(&f);
}
END_TEST

START_TEST(test_free_completes_pending_sync)
{
	fx_t f;
	fx_init(&f, NULL);
	atomic_int release = 0;
	fs_resp_t *r = fs_resp_new();
	fs_wait_flag(r, &release); /* never answers until the test is over */
	fs_push(f.fs, r);
	worker_t w = {.which = 0, .c = f.c};
	pthread_t th;
	pthread_create(&th, NULL, worker_main, &w);
	/* Run the loop until the request reached the server. */
	for (int i = 0; i < 2000 && fs_nrequests(f.fs) == 0; i++)
		ev_run(f.loop, EVRUN_NOWAIT), fs_sleep_ms(1);
	ck_assert_int_eq(fs_nrequests(f.fs), 1);
	ck_client_free(f.c);
	f.c = NULL;
	pthread_join(th, NULL);
	ck_assert_int_eq(w.rc, -1);
	ck_assert_ptr_nonnull(strstr(w.res.error, "client shutting down"));
	ck_result_clear(&w.res);
	atomic_store(&release, 1);
	fx_done(&f);
}
END_TEST

/* The verbs, called from a worker thread as a controller would. */
typedef struct verbs {
	ck_client_t *c;
	int rc[5];
	ck_result_t r[5];
	ck_obj_t **items[2];
	size_t n[2];
	char *rv[2];
	atomic_int done;
} verbs_t;

static void *verbs_main(void *arg)
{
	verbs_t *v = arg;
	ck_delete_opts_t d = {.propagation_policy = "Background",
	                      .precondition_uid = "u1",
	                      .grace_period_seconds = -1};
	v->rc[0] = ck_client_delete_sync(v->c, &t_dep, "ns1", "d1", &d, &v->r[0]);
	ck_write_opts_t wo = {.field_manager = "ctl", .force = true};
	v->rc[1] = ck_client_patch_sync(v->c, &t_dep, "ns1", "d1", CK_PATCH_APPLY,
	                                "{\"spec\":{\"replicas\":2}}", &wo, &v->r[1]);
	v->rc[2] =
	    ck_client_update_status_sync(v->c, &t_dep, "ns1", "d1", DEP_JSON("d1"), NULL, &v->r[2]);
	ck_list_opts_t lo = {.limit = 1, .label_selector = "app=x"};
	v->rc[3] = ck_client_list_sync(v->c, &t_dep, "ns1", &lo, &v->items[0], &v->n[0], &v->rv[0],
	                               &v->r[3]);
	v->rc[4] = ck_client_list_sync(v->c, &t_dep, "ns1", &lo, &v->items[1], &v->n[1], &v->rv[1],
	                               &v->r[4]);
	atomic_store(&v->done, 1);
	return NULL;
}

START_TEST(test_verbs_from_worker)
{
	fx_t f;
	fx_init(&f, NULL);
	fs_push_simple(f.fs, 200, NULL, "{\"kind\":\"Status\",\"status\":\"Success\"}");
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	/* list 1: two pages */
	fs_push_simple(f.fs, 200, NULL, LIST_JSON("50", "tok1", DEP_JSON("a")));
	fs_push_simple(f.fs, 200, NULL, LIST_JSON("50", "", DEP_JSON("b")));
	/* list 2: the continue token expires; one unpaged list instead */
	fs_push_simple(f.fs, 200, NULL, LIST_JSON("60", "tok2", DEP_JSON("a")));
	fs_push_simple(f.fs, 410, NULL,
	               "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Expired\","
	               "\"message\":\"continue token expired\",\"code\":410}");
	fs_push_simple(f.fs, 200, NULL,
	               LIST_JSON("70", "", DEP_JSON("a") "," DEP_JSON("b") "," DEP_JSON("c")));

	verbs_t v = {.c = f.c};
	pthread_t th;
	pthread_create(&th, NULL, verbs_main, &v);
	run_until(f.loop, &v.done);
	pthread_join(th, NULL);
	for (int i = 0; i < 5; i++)
		ck_assert_msg(v.rc[i] == 0, "call %d: %s", i, v.r[i].error);
	ck_assert_ptr_null(v.r[0].obj); /* a delete's answer is not decoded */
	ck_assert_str_eq(v.r[1].obj->name, "d1");
	ck_assert_uint_eq(v.n[0], 2);
	ck_assert_str_eq(v.items[0][0]->name, "a");
	ck_assert_str_eq(v.items[0][1]->name, "b");
	ck_assert_str_eq(v.rv[0], "50");
	ck_assert_uint_eq(v.n[1], 3);
	ck_assert_str_eq(v.rv[1], "70");

	const char *dep = "/apis/apps/v1/namespaces/ns1/deployments";
	char want[256];
	const fs_request_t *rq = fs_request(f.fs, 0);
	ck_assert_str_eq(rq->method, "DELETE");
	snprintf(want, sizeof(want), "%s/d1", dep);
	ck_assert_str_eq(rq->target, want);
	ck_assert_str_eq(rq->body,
	                 "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\","
	                 "\"propagationPolicy\":\"Background\",\"preconditions\":{\"uid\":"
	                 "\"u1\"}}");
	rq = fs_request(f.fs, 1);
	ck_assert_str_eq(rq->method, "PATCH");
	snprintf(want, sizeof(want), "%s/d1?fieldManager=ctl&force=true", dep);
	ck_assert_str_eq(rq->target, want);
	ck_assert_ptr_nonnull(strstr(rq->headers, "Content-Type: application/apply-patch+yaml"));
	rq = fs_request(f.fs, 2);
	ck_assert_str_eq(rq->method, "PUT");
	snprintf(want, sizeof(want), "%s/d1/status", dep);
	ck_assert_str_eq(rq->target, want);
	snprintf(want, sizeof(want), "%s?labelSelector=app%%3Dx&limit=1", dep);
	ck_assert_str_eq(fs_request(f.fs, 3)->target, want);
	snprintf(want, sizeof(want), "%s?labelSelector=app%%3Dx&limit=1&continue=tok1", dep);
	ck_assert_str_eq(fs_request(f.fs, 4)->target, want);
	snprintf(want, sizeof(want), "%s?labelSelector=app%%3Dx", dep);
	ck_assert_str_eq(fs_request(f.fs, 7)->target, want);

	for (int k = 0; k < 2; k++) {
		for (size_t i = 0; i < v.n[k]; i++)
			ck_obj_unref(v.items[k][i]);
		free(v.items[k]);
		free(v.rv[k]);
	}
	for (int i = 0; i < 5; i++)
		ck_result_clear(&v.r[i]);
	fx_done(&f);
}
END_TEST

/* --- per-verb latency and connection figures --- */

typedef struct res_seen {
	int n;
	const char *method[8];
	char resource[8][32];
	uint64_t count[8];
} res_seen_t;

static void res_cb(void *ud, const char *method, const char *resource, uint64_t count)
{
	res_seen_t *r = ud;
	if (r->n < 8) {
		r->method[r->n] = method;
		snprintf(r->resource[r->n], sizeof(r->resource[0]), "%s", resource);
		r->count[r->n++] = count;
	}
}

typedef struct verb_seen {
	int n;
	const char *verb[8];
	uint64_t count[8];
	double sum[8];
	bool cumulative_ok;
} verb_seen_t;

static void verb_cb(void *ud, const ck_client_latency_t *lat)
{
	verb_seen_t *v = ud;
	if (v->n < 8) {
		v->verb[v->n] = lat->verb;
		v->count[v->n] = lat->count;
		v->sum[v->n] = lat->sum;
		v->n++;
	}
	for (size_t i = 1; i < CK_CLIENT_LATENCY_NBUCKETS; i++)
		if (lat->counts[i] < lat->counts[i - 1] || lat->counts[i] > lat->count)
			v->cumulative_ok = false;
}

/* Breaks the loop once the client has seen *want response heads (or after 20 s). */
typedef struct until_heads {
	ev_timer tick;
	ck_client_t *c;
	uint64_t want;
	double deadline;
} until_heads_t;

static void until_heads_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	until_heads_t *u = (until_heads_t *)w;
	ck_client_conn_stats_t s;
	ck_client_conn_stats_snapshot(u->c, &s);
	if (s.responses >= u->want || ev_now(loop) > u->deadline)
		ev_break(loop, EVBREAK_ONE);
}

START_TEST(test_latency_per_verb_and_connections)
{
	fx_t f;
	fx_init(&f, NULL);
	ck_client_conn_stats_t s;
	ck_client_conn_stats_snapshot(f.c, &s);
	ck_assert_uint_eq(s.connections, 0);
	ck_assert_uint_eq(s.responses, 0);
	ck_assert_int_eq(s.last_http_version, 0);

	/* DELETE, GET, POST, DELETE: one keep-alive connection for all four. */
	fs_push_simple(f.fs, 200, NULL, "{\"kind\":\"Status\",\"status\":\"Success\"}");
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	fs_push_simple(f.fs, 201, NULL, DEP_JSON("d1"));
	fs_push_simple(f.fs, 200, NULL, "{\"kind\":\"Status\",\"status\":\"Success\"}");
	const char *verbs[] = {"DELETE", "GET", "POST", "DELETE"};
	for (int i = 0; i < 4; i++) {
		const char *body = strcmp(verbs[i], "POST") == 0 ? DEP_JSON("d1") : NULL;
		ck_req_spec_t spec = {.method = verbs[i],
		                      .type = &t_dep,
		                      .ns = "ns1",
		                      .name = body ? NULL : "d1",
		                      .body = body,
		                      .body_len = body ? strlen(body) : 0,
		                      .decode = CK_DEC_OBJECT,
		                      .no_decode = strcmp(verbs[i], "DELETE") == 0};
		call_t c = {0};
		run_call(&f, &spec, &c);
		ck_assert_msg(c.res.error == NULL, "%s: %s", verbs[i], c.res.error);
		call_clear(&c);
	}
	/* One series per verb seen, in a fixed order (not the order of first use). */
	verb_seen_t v = {.cumulative_ok = true};
	ck_client_latency_foreach(f.c, verb_cb, &v);
	ck_assert_int_eq(v.n, 3);
	ck_assert_str_eq(v.verb[0], "GET");
	ck_assert_uint_eq(v.count[0], 1);
	ck_assert_str_eq(v.verb[1], "POST");
	ck_assert_uint_eq(v.count[1], 1);
	ck_assert_str_eq(v.verb[2], "DELETE");
	ck_assert_uint_eq(v.count[2], 2);
	ck_assert(v.cumulative_ok);
	ck_client_latency_t all;
	ck_client_latency_snapshot(f.c, &all);
	ck_assert_ptr_null(all.verb);
	ck_assert_uint_eq(all.count, 4);
	ck_client_conn_stats_snapshot(f.c, &s);
	ck_assert_uint_eq(s.connections, 1);
	ck_assert_uint_eq(s.responses, 4);
	ck_assert_uint_eq(s.responses_http1, 4); /* h2 is asked for over TLS only */
	ck_assert_uint_eq(s.responses_http2, 0);
	ck_assert_int_eq(s.last_http_version, 11);
	/* Every body byte read is counted, whether decoded or not (DELETE's are not). */
	ck_assert_uint_eq(s.body_bytes, 2 * strlen("{\"kind\":\"Status\",\"status\":\"Success\"}") +
	                                    2 * strlen(DEP_JSON("d1")));

	/* The server closes after this answer: the next request needs a new connection,
	 * and a watch's is counted at its response head, while it still streams. */
	fs_push_simple(f.fs, 200, "Connection: close\r\n", DEP_JSON("d1"));
	call_t c = {0};
	run_get(&f, &t_dep, "ns1", "d1", &c);
	ck_assert_msg(c.res.error == NULL, "%s", c.res.error);
	call_clear(&c);
	atomic_int release = 0;
	const char *ev = "{\"type\":\"ADDED\",\"object\":" DEP_JSON("a") "}\n";
	fs_resp_t *r = fs_resp_new();
	fs_write(r, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	            "Transfer-Encoding: chunked\r\n\r\n");
	char *ch = ck_xasprintf("%zx\r\n%s\r\n", strlen(ev), ev);
	fs_write(r, ch);
	free(ch);
	fs_wait_flag(r, &release);
	fs_write(r, "0\r\n\r\n");
	fs_push(f.fs, r);
	call_t w = {0};
	char *err = NULL;
	ck_assert_ptr_nonnull(
	    ck_client_watch(f.c, &t_dep, "ns1", NULL, &call_cb, call_done, &w, &err));
	until_heads_t u = {.c = f.c, .want = 6, .deadline = ev_now(f.loop) + 20};
	ev_timer_init(&u.tick, until_heads_cb, 0.005, 0.005);
	ev_timer_start(f.loop, &u.tick);
	ev_run(f.loop, 0);
	ev_timer_stop(f.loop, &u.tick);
	ck_client_conn_stats_snapshot(f.c, &s);
	ck_assert_int_eq(atomic_load(&w.done), 0); /* the watch is still open */
	ck_assert_uint_eq(s.responses, 6);
	ck_assert_uint_eq(s.connections, 2);
	atomic_store(&release, 1);
	run_until(f.loop, &w.done);
	ck_assert_msg(w.res.error == NULL, "%s", w.res.error);
	call_clear(&w);
	ck_client_conn_stats_snapshot(f.c, &s);
	ck_assert_uint_eq(s.connections, 2); /* not counted twice at its end */
	ck_assert_uint_eq(s.body_bytes, 2 * strlen("{\"kind\":\"Status\",\"status\":\"Success\"}") +
	                                    3 * strlen(DEP_JSON("d1")) + strlen(ev));
	/* Watches are not in the latency histogram. */
	ck_client_latency_snapshot(f.c, &all);
	ck_assert_uint_eq(all.count, 5);
	fx_done(&f);
}
END_TEST

/* --- the token bucket, on a fake clock --- */

START_TEST(test_bucket_burst_then_qps)
{
	ck_clk_fake_t clk;
	ck_clk_fake_init(&clk, 1000 * CK_NS_PER_SEC, 0);
	ck_tb_t b;
	ck_tb_init(&b, 10, 3, ck_clk_mono_ns(&clk.base));
	ck_assert(ck_tb_enabled(&b));
	/* The burst is free... */
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq(ck_tb_reserve(&b, ck_clk_mono_ns(&clk.base)), 0);
	/* ...then each waiter is spaced 1/qps after the one before. */
	ck_assert_uint_eq(ck_tb_reserve(&b, ck_clk_mono_ns(&clk.base)), 100 * CK_NS_PER_MS);
	ck_assert_uint_eq(ck_tb_reserve(&b, ck_clk_mono_ns(&clk.base)), 200 * CK_NS_PER_MS);
	ck_clk_fake_advance(&clk, 200 * CK_NS_PER_MS);
	/* Both promised tokens are now used up; the next one is 100 ms away. */
	ck_assert_uint_eq(ck_tb_reserve(&b, ck_clk_mono_ns(&clk.base)), 100 * CK_NS_PER_MS);
	/* A cancelled waiter gives its token back. */
	ck_tb_unreserve(&b, ck_clk_mono_ns(&clk.base));
	ck_assert_uint_eq(ck_tb_reserve(&b, ck_clk_mono_ns(&clk.base)), 100 * CK_NS_PER_MS);
	/* A long idle refills to the burst, not beyond. */
	ck_clk_fake_advance(&clk, 3600 * CK_NS_PER_SEC);
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq(ck_tb_reserve(&b, ck_clk_mono_ns(&clk.base)), 0);
	ck_assert_uint_eq(ck_tb_reserve(&b, ck_clk_mono_ns(&clk.base)), 100 * CK_NS_PER_MS);
	/* Steady state: one token per 100 ms. */
	for (int i = 0; i < 5; i++) {
		ck_clk_fake_advance(&clk, 100 * CK_NS_PER_MS);
		ck_assert_uint_eq(ck_tb_reserve(&b, ck_clk_mono_ns(&clk.base)), 100 * CK_NS_PER_MS);
	}
}
END_TEST

START_TEST(test_bucket_negative_qps_disables)
{
	ck_clk_fake_t clk;
	ck_clk_fake_init(&clk, 5, 0);
	ck_tb_t b;
	ck_tb_init(&b, -1, 1, ck_clk_mono_ns(&clk.base));
	ck_assert(!ck_tb_enabled(&b));
	for (int i = 0; i < 1000; i++)
		ck_assert_uint_eq(ck_tb_reserve(&b, ck_clk_mono_ns(&clk.base)), 0);
}
END_TEST

/*
 * A rate so low that the wait for a token does not fit in 64-bit nanoseconds
 * (--kube-api-qps=1e-300): converting it was undefined behaviour (UBSan: "inf is
 * outside the range of representable values of type 'unsigned long'"). The bucket
 * now says "never" (UINT64_MAX), and the client refuses such a rate outright.
 */
START_TEST(test_bucket_tiny_qps)
{
	ck_tb_t b;
	ck_tb_init(&b, 1e-300, 1, 0);
	ck_assert_uint_eq(ck_tb_reserve(&b, 0), 0);
	ck_assert_uint_eq(ck_tb_reserve(&b, 1), UINT64_MAX);
	ck_tb_unreserve(&b, 2);
	ck_tb_init(&b, 1e-11, 1, 0); /* 1e20 ns: past what a uint64_t holds (1.8e19) */
	ck_assert_uint_eq(ck_tb_reserve(&b, 0), 0);
	ck_assert_uint_eq(ck_tb_reserve(&b, 0), UINT64_MAX);

	const double bad[] = {1e-300, 1e-4, NAN, INFINITY};
	for (size_t i = 0; i < CK_ARRAY_LEN(bad); i++) {
		struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
		const char *kc =
		    "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
		    "    server: http://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n"
		    "    cluster: c\n    user: \"\"\ncurrent-context: c\n";
		char *err = NULL;
		ck_config_t *cfg = ck_config_load_text(kc, strlen(kc), "kc", NULL, &err);
		ck_assert_msg(cfg != NULL, "%s", err);
		ck_client_opts_t o = {.qps = bad[i]};
		ck_client_t *c = ck_client_new(loop, cfg, &o, &err);
		ck_assert_msg(c == NULL, "qps %g accepted", bad[i]);
		ck_assert_msg(strstr(err, "qps") != NULL && strstr(err, "0.001") != NULL, "%s",
		              err);
		free(err);
		ev_loop_destroy(loop);
	}
}
END_TEST

/* The client spaces requests with its bucket: burst 1, 4 qps -> the third request
 * cannot have been sent before 0.5 s (a lower bound: nothing about speed). */
START_TEST(test_client_rate_limited)
{
	ck_client_opts_t o = {.qps = 4, .burst = 1};
	fx_t f;
	fx_init(&f, &o);
	call_t c[3] = {{0}};
	ck_req_spec_t spec = {
	    .method = "GET", .type = &t_dep, .ns = "ns1", .name = "d1", .decode = CK_DEC_OBJECT};
	for (int i = 0; i < 3; i++) {
		fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
		ck_assert_ptr_nonnull(ck_client_request(f.c, &spec, NULL, call_done, &c[i], NULL));
	}
	double t0 = ev_time();
	run_until(f.loop, &c[2].done);
	run_until(f.loop, &c[1].done);
	run_until(f.loop, &c[0].done);
	ck_assert(ev_time() - t0 >= 0.45);
	for (int i = 0; i < 3; i++) {
		ck_assert_msg(c[i].res.error == NULL, "%s", c[i].res.error);
		call_clear(&c[i]);
	}
	/* The waits are in the rate-limiter histogram: one free token, then 0.25 s and
	 * 0.5 s promised; and the three attempts are counted on their resource. */
	verb_seen_t v = {.cumulative_ok = true};
	ck_client_rate_limiter_foreach(f.c, verb_cb, &v);
	ck_assert_int_eq(v.n, 1);
	ck_assert_str_eq(v.verb[0], "GET");
	ck_assert_uint_eq(v.count[0], 3);
	ck_assert(v.cumulative_ok);
	ck_assert(v.sum[0] >= 0.7 && v.sum[0] <= 0.8);
	res_seen_t rs = {0};
	ck_client_resource_stats_foreach(f.c, res_cb, &rs);
	ck_assert_int_eq(rs.n, 1);
	ck_assert_str_eq(rs.method[0], "GET");
	ck_assert_str_eq(rs.resource[0], "deployments");
	ck_assert_uint_eq(rs.count[0], 3);
	fx_done(&f);
}
END_TEST

/* An unthrottled request neither waits for nor takes a token: with the burst
 * spent and the next token 2 s away, it completes before the throttled one queued
 * ahead of it (an order, not a time). */
START_TEST(test_unthrottled_skips_the_limiter)
{
	ck_client_opts_t o = {.qps = 0.5, .burst = 1};
	fx_t f;
	fx_init(&f, &o);
	call_t a = {0}, b = {0}, u = {0};
	ck_req_spec_t spec = {
	    .method = "GET", .type = &t_dep, .ns = "ns1", .name = "d1", .decode = CK_DEC_OBJECT};
	for (int i = 0; i < 3; i++)
		fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	ck_assert_ptr_nonnull(ck_client_request(f.c, &spec, NULL, call_done, &a, NULL));
	ck_assert_ptr_nonnull(ck_client_request(f.c, &spec, NULL, call_done, &b, NULL));
	ck_req_spec_t us = spec;
	us.unthrottled = true;
	ck_assert_ptr_nonnull(ck_client_request(f.c, &us, NULL, call_done, &u, NULL));
	run_until(f.loop, &u.done);
	ck_assert_msg(!atomic_load(&b.done), "the throttled request went first");
	run_until(f.loop, &b.done);
	run_until(f.loop, &a.done);
	ck_assert_msg(u.res.error == NULL && b.res.error == NULL && a.res.error == NULL, "%s",
	              u.res.error   ? u.res.error
	              : b.res.error ? b.res.error
	                            : a.res.error);
	call_clear(&a);
	call_clear(&b);
	call_clear(&u);
	fx_done(&f);
}
END_TEST

/* The Lease lock's requests are unthrottled: with the bucket spent and the next
 * token 1,000 s away, leader election still reads its Lease (throttled, the get
 * would wait past its 5 s limit and run_until's). */
START_TEST(test_lease_lock_skips_the_limiter)
{
	ck_client_opts_t o = {.qps = 0.001, .burst = 1};
	fx_t f;
	fx_init(&f, &o);
	call_t a = {0};
	ck_req_spec_t spec = {
	    .method = "GET", .type = &t_dep, .ns = "ns1", .name = "d1", .decode = CK_DEC_OBJECT};
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	ck_assert_ptr_nonnull(ck_client_request(f.c, &spec, NULL, call_done, &a, NULL));
	run_until(f.loop, &a.done);
	call_clear(&a);
	fs_push_simple(f.fs, 200, NULL,
	               "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
	               "\"metadata\":{\"name\":\"sc\",\"namespace\":\"ns1\","
	               "\"resourceVersion\":\"7\"},\"spec\":{\"holderIdentity\":\"x\","
	               "\"leaseDurationSeconds\":15}}");
	worker_t w = {.which = 2};
	run_worker(&f, &w);
	ck_assert_msg(w.rc == 0, "%s", w.res.error ? w.res.error : "?");
	free(w.res.error);
	fx_done(&f);
}
END_TEST

/*
 * timeout_ms is one deadline for the whole request: rate-limiter waits, retries
 * and Retry-After delays included. Before, it bounded each attempt only, so a 429
 * with Retry-After: 999999999 parked the request for 31 years.
 */
START_TEST(test_timeout_covers_retry_after)
{
	fx_t f;
	fx_init(&f, NULL);
	fs_push_simple(f.fs, 429, "Retry-After: 999999999\r\n",
	               "{\"kind\":\"Status\",\"code\":429,\"reason\":\"TooManyRequests\","
	               "\"message\":\"slow down\"}");
	call_t c = {0};
	ck_req_spec_t spec = {.method = "GET",
	                      .type = &t_dep,
	                      .ns = "ns1",
	                      .name = "d1",
	                      .decode = CK_DEC_OBJECT,
	                      .timeout_ms = 500};
	double t0 = ev_time();
	run_call(&f, &spec, &c);
	ck_assert_msg(ev_time() - t0 < 2.0, "took %.1f s", ev_time() - t0);
	ck_assert_int_eq(fs_nrequests(f.fs), 1);
	ck_assert_ptr_nonnull(c.res.error);
	ck_assert(ck_result_is_timeout(&c.res));
	ck_assert_msg(strstr(c.res.error, "/apis/apps/v1/namespaces/ns1/deployments/d1: timed out "
	                                  "(the request's 500 ms deadline)") != NULL,
	              "%s", c.res.error);
	ck_assert_msg(strstr(c.res.error, "Retry-After of 999999999 s") != NULL, "%s", c.res.error);
	ck_assert_msg(strstr(c.res.error, "429 TooManyRequests: slow down") != NULL, "%s",
	              c.res.error);
	call_clear(&c);

	/* Retry-After: 1 three times and then 200, within 1.5 s: the second delay
	 * would end past the deadline, so the request fails after one retry. */
	for (int i = 0; i < 3; i++)
		fs_push_simple(f.fs, 429, "Retry-After: 1\r\n", "{}");
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("late"));
	call_t c2 = {0};
	spec.timeout_ms = 1500;
	t0 = ev_time();
	run_call(&f, &spec, &c2);
	ck_assert_msg(ev_time() - t0 < 1.5, "took %.1f s", ev_time() - t0);
	ck_assert_msg(c2.res.error != NULL && ck_result_is_timeout(&c2.res), "%s",
	              c2.res.error ? c2.res.error : "succeeded");
	call_clear(&c2);
	fx_done(&f);
}
END_TEST

/* A wait for a rate-limiter token that would end past the deadline fails at once
 * (as client-go's limiter Wait with a context deadline), and gives its token back. */
START_TEST(test_timeout_covers_rate_limiter)
{
	ck_client_opts_t o = {.qps = 0.5, .burst = 1};
	fx_t f;
	fx_init(&f, &o);
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d1"));
	fs_push_simple(f.fs, 200, NULL, DEP_JSON("d2"));
	call_t a = {0}, b = {0};
	ck_req_spec_t spec = {.method = "GET",
	                      .type = &t_dep,
	                      .ns = "ns1",
	                      .name = "d1",
	                      .decode = CK_DEC_OBJECT,
	                      .timeout_ms = 300};
	ck_assert_ptr_nonnull(ck_client_request(f.c, &spec, NULL, call_done, &a, NULL));
	ck_assert_ptr_nonnull(ck_client_request(f.c, &spec, NULL, call_done, &b, NULL));
	double t0 = ev_time();
	run_until(f.loop, &a.done);
	run_until(f.loop, &b.done);
	ck_assert_msg(ev_time() - t0 < 1.0, "took %.1f s", ev_time() - t0);
	ck_assert_msg(a.res.error == NULL, "%s", a.res.error);
	ck_assert_ptr_nonnull(b.res.error);
	ck_assert(ck_result_is_timeout(&b.res));
	ck_assert_msg(strstr(b.res.error, "client-side rate limiter") != NULL, "%s", b.res.error);
	ck_assert_int_eq(fs_nrequests(f.fs), 1);
	call_clear(&a);
	call_clear(&b);
	fx_done(&f);
}
END_TEST

Suite *suite_client(void)
{
	Suite *s = suite_create("client");
	TCase *tc = tcase_create("transport");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_get_ok_and_request_shape);
	tcase_add_test(tc, test_paths_and_queries);
	tcase_add_test(tc, test_query_builders);
	tcase_add_test(tc, test_429_retry_after_then_success);
	tcase_add_test(tc, test_429_gives_up_after_max_retries);
	tcase_add_test(tc, test_500_with_retry_after_is_retried);
	tcase_add_test(tc, test_500_without_retry_after_is_not_retried);
	tcase_add_test(tc, test_reset_mid_body_get_is_retried);
	tcase_add_test(tc, test_early_eof_get_is_retried);
	tcase_add_test(tc, test_reset_mid_body_post_is_not_retried);
	tcase_add_test(tc, test_slow_body_decoded_incrementally);
	tcase_add_test(tc, test_slow_list_outlives_request_timeout);
	tcase_add_test(tc, test_stalled_list_is_cut);
	tcase_add_test(tc, test_gzip_body);
	tcase_add_test(tc, test_malformed_json);
	tcase_add_test(tc, test_truncated_json);
	tcase_add_test(tc, test_oversized_object);
	tcase_add_test(tc, test_404_status_decoded);
	tcase_add_test(tc, test_non_status_error_body);
	tcase_add_test(tc, test_401_refreshes_and_retries_once);
	tcase_add_test(tc, test_401_static_token_not_retried);
	tcase_add_test(tc, test_401_keeps_the_refresh_error);
	tcase_add_test(tc, test_trace_at_v5);
	tcase_add_test(tc, test_exec_plugin_runs_off_the_loop);
	tcase_add_test(tc, test_failing_exec_plugin_backs_off);
	tcase_add_test(tc, test_free_while_exec_plugin_runs);
	tcase_add_test(tc, test_connect_refused);
	tcase_add_test(tc, test_tls_server_name_and_host);
	tcase_add_test(tc, test_watch_events_and_cancel);
	tcase_add_test(tc, test_cancel_before_start);
	tcase_add_test(tc, test_sync_from_worker_thread);
	tcase_add_test(tc, test_sync_on_loop_thread_fails);
	tcase_add_test(tc, test_free_completes_pending_sync);
	tcase_add_test(tc, test_verbs_from_worker);
	tcase_add_test(tc, test_client_rate_limited);
	tcase_add_test(tc, test_timeout_covers_retry_after);
	tcase_add_test(tc, test_timeout_covers_rate_limiter);
	tcase_add_test(tc, test_latency_per_verb_and_connections);
	suite_add_tcase(s, tc);
	TCase *tb = tcase_create("ratelimit");
	tcase_add_test(tb, test_bucket_burst_then_qps);
	tcase_add_test(tb, test_bucket_negative_qps_disables);
	tcase_add_test(tb, test_bucket_tiny_qps);
	tcase_add_test(tb, test_unthrottled_skips_the_limiter);
	tcase_add_test(tb, test_lease_lock_skips_the_limiter);
	suite_add_tcase(s, tb);
	return s;
}
