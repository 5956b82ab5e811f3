/*
 * Integration tests for pkg/rest/client.c against the real local control plane
 * (hack/local-up.sh; $KUBECONFIG names it, with contexts "token" and "cert").
 *
 * The loop runs on the test's thread; the test body runs on a worker thread and
 * uses the blocking verbs, as a controller's workers do. Each test makes its own
 * namespace and deletes it at the end.
 *
 * Case "tls": insecure-skip-tls-verify, tls-server-name and proxy-url, with helper
 * processes (connect_proxy.py, host_echo.py next to this file) on free ports.
 */
#include <ckube/client.h>
#include <ckube/types.h>

#include "it.h"
#include <arpa/inet.h>

#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <ev.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const ck_type_t t_ns = {
    .group = "", .version = "v1", .kind = "Namespace", .resource = "namespaces"};
static const ck_type_t t_sa = {.group = "",
                               .version = "v1",
                               .kind = "ServiceAccount",
                               .resource = "serviceaccounts",
                               .namespaced = true};
static const ck_type_t t_crd = {.group = "apiextensions.k8s.io",
                                .version = "v1",
                                .kind = "CustomResourceDefinition",
                                .resource = "customresourcedefinitions"};
static const char *const foo_fields[] = {"spec.deploymentName", "spec.replicas",
                                         "status.availableReplicas"};
static const ck_type_t t_foo = {.group = "samplecontroller.k8s.io",
                                .version = "v1alpha1",
                                .kind = "Foo",
                                .resource = "foos",
                                .namespaced = true,
                                .fields = foo_fields,
                                .nfields = 3};

/* ------------------------------------------------------------ fixture */

typedef struct it {
	struct ev_loop *loop;
	ck_client_t *c;
	char ns[64];
	atomic_int done;
	/* watch bookkeeping (written on the loop thread, read by the worker) */
	atomic_int added, modified, deleted, bookmarks, errors, gone, initial_end, watch_ended;
	char error_msg[512];
} it_t;

static ck_client_t *it_client_ctx(struct ev_loop *loop, const char *context, const char *token)
{
	const char *path = getenv("KUBECONFIG");
	ck_assert_msg(path != NULL && path[0] != '\0',
	              "KUBECONFIG must name the local control plane's kubeconfig");
	ck_config_load_opts_t lo = {.kubeconfig = path, .context = context};
	char *err = NULL;
	ck_config_t *cfg = ck_config_load(&lo, &err);
	ck_assert_msg(cfg != NULL, "kconfig_load: %s", err);
	if (token != NULL) {
		/* Same cluster and CA, another identity: a kubeconfig of our own. */
		struct ck_config_view v;
		ck_config_view(cfg, &v);
		ck_sbuf_t b = CK_SBUF_INIT;
		ck_sbuf_printf(&b,
		               "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
		               "    server: %s\n    certificate-authority-data: ",
		               v.server);
		ck_sbuf_put_base64(&b, v.ca_pem, v.ca_len);
		ck_sbuf_printf(&b,
		               "\nusers:\n- name: u\n  user:\n    token: %s\ncontexts:\n- name: x\n"
		               "  context:\n    cluster: c\n    user: u\ncurrent-context: x\n",
		               token);
		ck_config_free(cfg);
		cfg = ck_config_load_text(b.data, b.len, "test-kubeconfig", NULL, &err);
		ck_sbuf_free(&b);
		ck_assert_msg(cfg != NULL, "kconfig_load_text: %s", err);
	}
	ck_client_t *c = ck_client_new(loop, cfg, NULL, &err);
	ck_assert_msg(c != NULL, "kclient_new: %s", err);
	return c;
}

static void it_init(it_t *t, const char *context)
{
	memset(t, 0, sizeof(*t));
	t->loop = ev_loop_new(EVFLAG_AUTO);
	t->c = it_client_ctx(t->loop, context, NULL);
	snprintf(t->ns, sizeof(t->ns), "cli-it-%08llx", (unsigned long long)(ck_rand_u64() >> 32));
}

static void it_fini(it_t *t)
{
	ck_client_free(t->c);
	ev_loop_destroy(t->loop);
}

/* Runs fn(t) on a worker thread while this thread runs the loop. */
static void it_run(it_t *t, void *(*fn)(void *))
{
	it_loop_until(t->loop, &t->done, fn, t);
}

/* Worker side: waits up to 60 s for *v >= min. */
static bool wait_atomic(atomic_int *v, int min)
{
	for (int i = 0; i < 6000; i++) {
		if (atomic_load(v) >= min)
			return true;
		usleep(10000);
	}
	return false;
}

static void ns_create(it_t *t)
{
	char *body = ck_xasprintf("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":"
	                          "{\"name\":\"%s\",\"labels\":{\"test\":\"client\"}}}",
	                          t->ns);
	ck_result_t r = {0};
	int rc = ck_client_create_sync(t->c, &t_ns, NULL, body, NULL, &r);
	ck_assert_msg(rc == 0, "create namespace: %s", r.error);
	ck_assert_str_eq(r.obj->name, t->ns);
	ck_result_clear(&r);
	free(body);
}

static void ns_delete(it_t *t)
{
	ck_result_t r = {0};
	int rc = ck_client_delete_sync(t->c, &t_ns, NULL, t->ns, NULL, &r);
	ck_assert_msg(rc == 0, "delete namespace: %s", r.error);
	ck_result_clear(&r);
}

static char *deployment_json(const char *name, const char *rv, int replicas,
                             const char *extra_label)
{
	return ck_xasprintf(
	    "{\"apiVersion\":\"apps/"
	    "v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"%s\"%s%s%s,"
	    "\"labels\":{\"app\":\"%s\"%s%s%s}},\"spec\":{\"replicas\":%d,\"selector\":"
	    "{\"matchLabels\":{\"app\":\"%s\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":"
	    "\"%s\"}},\"spec\":{\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx:latest\"}]}}}"
	    "}",
	    name, rv ? ",\"resourceVersion\":\"" : "", rv ? rv : "", rv ? "\"" : "", name,
	    extra_label ? ",\"" : "", extra_label ? extra_label : "",
	    extra_label ? "\":\"yes\"" : "", replicas, name, name);
}

/* ------------------------------------------------------------ tests */

/* Both kubeconfig contexts reach the server: bearer token, and client certificate
 * given to curl in memory. */
static void *contexts_main(void *arg)
{
	it_t *t = arg;
	ck_result_t r = {0};
	int rc = ck_client_get_sync(t->c, &t_ns, NULL, "default", &r);
	ck_assert_msg(rc == 0, "GET namespace default: %s", r.error);
	ck_assert_int_eq(r.http_code, 200);
	ck_assert_str_eq(r.obj->name, "default");
	ck_assert_str_ne(r.obj->uid, "");
	ck_result_clear(&r);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_contexts)
{
	const char *contexts[] = {"token", "cert"};
	for (int i = 0; i < 2; i++) {
		it_t t;
		it_init(&t, contexts[i]);
		it_run(&t, contexts_main);
		it_fini(&t);
	}
}
END_TEST

static void *crud_main(void *arg)
{
	it_t *t = arg;
	ns_create(t);
	ck_result_t r = {0};
	int rc;

	/* create */
	char *body = deployment_json("web", NULL, 1, NULL);
	rc = ck_client_create_sync(t->c, &ck_type_deployment, t->ns, body, NULL, &r);
	ck_assert_msg(rc == 0, "create: %s", r.error);
	ck_assert_int_eq(r.http_code, 201);
	ck_assert_str_eq(r.obj->name, "web");
	ck_assert_str_eq(r.obj->ns, t->ns);
	char *uid = ck_xstrdup(r.obj->uid);
	ck_result_clear(&r);
	/* create again: 409 AlreadyExists */
	rc = ck_client_create_sync(t->c, &ck_type_deployment, t->ns, body, NULL, &r);
	ck_assert_int_eq(rc, -1);
	ck_assert_msg(ck_result_is_already_exists(&r), "%s", r.error);
	ck_assert_ptr_nonnull(
	    strstr(r.error, "409 AlreadyExists: deployments.apps \"web\" already exists"));
	ck_result_clear(&r);
	free(body);

	/* get, then update (PUT) with that resourceVersion; the deployment controller
	 * writes status meanwhile, so a conflict means: get again, as controllers do */
	char *rv = NULL;
	int32_t replicas = 0;
	for (int attempt = 0;; attempt++) {
		rc = ck_client_get_sync(t->c, &ck_type_deployment, t->ns, "web", &r);
		ck_assert_msg(rc == 0, "get: %s", r.error);
		ck_assert(ck_deployment_spec_replicas(r.obj, &replicas));
		ck_assert_int_eq(replicas, 1);
		free(rv);
		rv = ck_xstrdup(r.obj->rv);
		ck_result_clear(&r);
		body = deployment_json("web", rv, 2, NULL);
		rc = ck_client_update_sync(t->c, &ck_type_deployment, t->ns, "web", body, NULL, &r);
		if (rc == 0 || !ck_result_is_conflict(&r) || attempt == 10)
			break;
		ck_result_clear(&r);
		free(body);
	}
	ck_assert_msg(rc == 0, "update: %s", r.error);
	ck_assert(ck_deployment_spec_replicas(r.obj, &replicas));
	ck_assert_int_eq(replicas, 2);
	ck_assert_str_ne(r.obj->rv, rv);
	ck_result_clear(&r);
	/* the same body again: its resourceVersion is stale now */
	rc = ck_client_update_sync(t->c, &ck_type_deployment, t->ns, "web", body, NULL, &r);
	ck_assert_int_eq(rc, -1);
	ck_assert_msg(ck_result_is_conflict(&r), "%s", r.error);
	ck_assert_ptr_nonnull(strstr(r.error,
	                             "409 Conflict: Operation cannot be fulfilled on "
	                             "deployments.apps \"web\": the object has been modified"));
	ck_result_clear(&r);
	free(body);
	free(rv);

	/* patches: merge, strategic, JSON patch, server-side apply */
	rc = ck_client_patch_sync(t->c, &ck_type_deployment, t->ns, "web", CK_PATCH_MERGE,
	                          "{\"metadata\":{\"labels\":{\"merge\":\"yes\"}}}", NULL, &r);
	ck_assert_msg(rc == 0, "merge patch: %s", r.error);
	ck_assert_str_eq(ck_obj_label(r.obj, "merge"), "yes");
	ck_result_clear(&r);
	rc = ck_client_patch_sync(t->c, &ck_type_deployment, t->ns, "web", CK_PATCH_STRATEGIC,
	                          "{\"spec\":{\"replicas\":3}}", NULL, &r);
	ck_assert_msg(rc == 0, "strategic patch: %s", r.error);
	ck_assert(ck_deployment_spec_replicas(r.obj, &replicas));
	ck_assert_int_eq(replicas, 3);
	ck_result_clear(&r);
	rc = ck_client_patch_sync(
	    t->c, &ck_type_deployment, t->ns, "web", CK_PATCH_JSON,
	    "[{\"op\":\"add\",\"path\":\"/metadata/labels/jp\",\"value\":\"yes\"}]", NULL, &r);
	ck_assert_msg(rc == 0, "json patch: %s", r.error);
	ck_assert_str_eq(ck_obj_label(r.obj, "jp"), "yes");
	ck_result_clear(&r);
	ck_write_opts_t apply = {.field_manager = "cli-it", .force = true};
	rc = ck_client_patch_sync(
	    t->c, &ck_type_deployment, t->ns, "web", CK_PATCH_APPLY,
	    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{"
	    "\"name\":\"web\",\"labels\":{\"applied\":\"yes\"}}}",
	    &apply, &r);
	ck_assert_msg(rc == 0, "apply: %s", r.error);
	ck_assert_str_eq(ck_obj_label(r.obj, "applied"), "yes");
	ck_assert_str_eq(ck_obj_label(r.obj, "merge"), "yes");
	ck_result_clear(&r);
	/* a bad JSON patch: the server's 422 message comes through */
	rc = ck_client_patch_sync(t->c, &ck_type_deployment, t->ns, "web", CK_PATCH_JSON,
	                          "[{\"op\":\"remove\",\"path\":\"/metadata/labels/nope\"}]", NULL,
	                          &r);
	ck_assert_int_eq(rc, -1);
	ck_assert_msg(r.http_code == 422 || r.http_code == 500, "%d %s", r.http_code, r.error);
	ck_result_clear(&r);

	/* list in pages of one over three deployments */
	for (int i = 0; i < 2; i++) {
		char name[32];
		snprintf(name, sizeof(name), "extra%d", i);
		body = deployment_json(name, NULL, 0, "extra");
		rc = ck_client_create_sync(t->c, &ck_type_deployment, t->ns, body, NULL, &r);
		ck_assert_msg(rc == 0, "create %s: %s", name, r.error);
		ck_result_clear(&r);
		free(body);
	}
	ck_list_opts_t lo = {.limit = 1};
	ck_obj_t **items = NULL;
	size_t n = 0;
	char *list_rv = NULL;
	rc = ck_client_list_sync(t->c, &ck_type_deployment, t->ns, &lo, &items, &n, &list_rv, &r);
	ck_assert_msg(rc == 0, "list: %s", r.error);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_ne(list_rv, "");
	for (size_t i = 0; i < n; i++)
		ck_obj_unref(items[i]);
	free(items);
	free(list_rv);
	ck_result_clear(&r);
	/* label selector */
	ck_list_opts_t sel = {.label_selector = "extra=yes"};
	rc = ck_client_list_sync(t->c, &ck_type_deployment, t->ns, &sel, &items, &n, NULL, &r);
	ck_assert_msg(rc == 0, "list selector: %s", r.error);
	ck_assert_uint_eq(n, 2);
	for (size_t i = 0; i < n; i++)
		ck_obj_unref(items[i]);
	free(items);
	ck_result_clear(&r);

	/* delete: a wrong UID precondition is a conflict; then delete for real */
	ck_delete_opts_t bad = {.precondition_uid = "00000000-0000-0000-0000-000000000000",
	                        .grace_period_seconds = -1};
	rc = ck_client_delete_sync(t->c, &ck_type_deployment, t->ns, "web", &bad, &r);
	ck_assert_int_eq(rc, -1);
	ck_assert_msg(ck_result_is_conflict(&r), "%s", r.error);
	ck_result_clear(&r);
	ck_delete_opts_t good = {.precondition_uid = uid,
	                         .propagation_policy = "Background",
	                         .grace_period_seconds = -1};
	rc = ck_client_delete_sync(t->c, &ck_type_deployment, t->ns, "web", &good, &r);
	ck_assert_msg(rc == 0, "delete: %s", r.error);
	ck_result_clear(&r);
	free(uid);
	/* gone */
	rc = ck_client_get_sync(t->c, &ck_type_deployment, t->ns, "web", &r);
	ck_assert_int_eq(rc, -1);
	ck_assert(ck_result_is_not_found(&r));
	char *want = ck_xasprintf("/apis/apps/v1/namespaces/%s/deployments/web: 404 NotFound: "
	                          "deployments.apps \"web\" not found",
	                          t->ns);
	ck_assert_msg(strstr(r.error, want) != NULL, "%s", r.error);
	ck_assert_msg(strncmp(r.error, "GET https://", 12) == 0, "%s", r.error);
	free(want);
	ck_result_clear(&r);

	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_deployment_crud)
{
	it_t t;
	it_init(&t, "token");
	it_run(&t, crud_main);
	/* Every attempt was counted. */
	ck_client_latency_t lat;
	ck_client_latency_snapshot(t.c, &lat);
	ck_assert_uint_ge(lat.count, 15);
	it_fini(&t);
}
END_TEST

/* --- Foo, when its CRD is in deploy/ --- */

static bool foo_crd_ready(it_t *t)
{
	ck_result_t r = {0};
	ck_req_spec_t spec = {.method = "GET",
	                      .type = &t_crd,
	                      .name = "foos.samplecontroller.k8s.io",
	                      .keep_body = true,
	                      .no_decode = true};
	bool ok = ck_client_do_sync(t->c, &spec, &r) == 0 && r.body != NULL &&
	          (strstr(r.body, "\"status\":\"True\",\"type\":\"Established\"") != NULL ||
	           strstr(r.body, "\"type\":\"Established\",\"status\":\"True\"") != NULL);
	ck_result_clear(&r);
	return ok;
}

static void *foo_main(void *arg)
{
	it_t *t = arg;
	bool ready = foo_crd_ready(t);
	if (!ready) {
		/* The project's own CRD; applying it is idempotent. */
		char *cmd = ck_xasprintf("kubectl --kubeconfig '%s' apply -f ../../deploy/crd.yaml "
		                         ">/dev/null 2>&1",
		                         getenv("KUBECONFIG"));
		int st = system(cmd);
		free(cmd);
		for (int i = 0; st == 0 && i < 100 && !(ready = foo_crd_ready(t)); i++)
			usleep(100000);
	}
	ck_assert_msg(ready, "CRD foos.samplecontroller.k8s.io is not established");
	ns_create(t);
	ck_result_t r = {0};
	const char *foo = "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\","
	                  "\"metadata\":{\"name\":\"f1\"},\"spec\":{\"deploymentName\":\"f1-web\","
	                  "\"replicas\":2}}";
	int rc = ck_client_create_sync(t->c, &t_foo, t->ns, foo, NULL, &r);
	ck_assert_msg(rc == 0, "create foo: %s", r.error);
	ck_assert_str_eq(ck_obj_field(r.obj, 0)->u.s, "f1-web");
	ck_assert_int_eq(ck_obj_field(r.obj, 1)->u.i, 2);
	char *rv = ck_xstrdup(r.obj->rv);
	ck_result_clear(&r);

	/* The schema's validation speaks through the error (replicas 1..10). */
	const char *bad = "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\","
	                  "\"metadata\":{\"name\":\"f2\"},\"spec\":{\"deploymentName\":\"x\","
	                  "\"replicas\":99}}";
	rc = ck_client_create_sync(t->c, &t_foo, t->ns, bad, NULL, &r);
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(r.http_code, 422);
	ck_assert_msg(strstr(r.error, "422 Invalid") != NULL, "%s", r.error);
	ck_result_clear(&r);

	/* status subresource: PUT /status */
	char *st =
	    ck_xasprintf("{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\","
	                 "\"metadata\":{\"name\":\"f1\",\"resourceVersion\":\"%s\"},"
	                 "\"spec\":{\"deploymentName\":\"f1-web\",\"replicas\":2},"
	                 "\"status\":{\"availableReplicas\":2}}",
	                 rv);
	rc = ck_client_update_status_sync(t->c, &t_foo, t->ns, "f1", st, NULL, &r);
	ck_assert_msg(rc == 0, "update status: %s", r.error);
	ck_assert_int_eq(ck_obj_field(r.obj, 2)->u.i, 2);
	ck_result_clear(&r);
	/* stale resourceVersion: 409, as sample-controller's UpdateStatus sees */
	rc = ck_client_update_status_sync(t->c, &t_foo, t->ns, "f1", st, NULL, &r);
	ck_assert_int_eq(rc, -1);
	ck_assert(ck_result_is_conflict(&r));
	ck_result_clear(&r);
	free(st);
	free(rv);

	rc = ck_client_get_sync(t->c, &t_foo, t->ns, "f1", &r);
	ck_assert_msg(rc == 0, "get foo: %s", r.error);
	ck_assert_int_eq(ck_obj_field(r.obj, 2)->u.i, 2);
	ck_result_clear(&r);
	rc = ck_client_delete_sync(t->c, &t_foo, t->ns, "f1", NULL, &r);
	ck_assert_msg(rc == 0, "delete foo: %s", r.error);
	ck_result_clear(&r);
	rc = ck_client_get_sync(t->c, &t_foo, t->ns, "f1", &r);
	ck_assert(ck_result_is_not_found(&r));
	ck_result_clear(&r);
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_foo_crud)
{
	if (access("../../deploy/crd.yaml", R_OK) != 0) {
		fprintf(stderr, "test_foo_crud: deploy/crd.yaml missing, Foo CRUD skipped\n");
		return;
	}
	it_t t;
	it_init(&t, "cert");
	it_run(&t, foo_main);
	it_fini(&t);
}
END_TEST

/* --- watch --- */

static void watch_event(void *ud, ck_watch_type_t type, ck_obj_t *obj, const ck_status_t *status)
{
	it_t *t = ud;
	switch (type) {
	case CK_WATCH_ADDED:
		atomic_fetch_add(&t->added, 1);
		break;
	case CK_WATCH_MODIFIED:
		atomic_fetch_add(&t->modified, 1);
		break;
	case CK_WATCH_DELETED:
		atomic_fetch_add(&t->deleted, 1);
		break;
	case CK_WATCH_BOOKMARK:
		if (obj != NULL && ck_obj_annotation(obj, "k8s.io/initial-events-end") != NULL)
			atomic_fetch_add(&t->initial_end, 1);
		atomic_fetch_add(&t->bookmarks, 1);
		break;
	case CK_WATCH_ERROR:
		if (status != NULL) {
			snprintf(t->error_msg, sizeof(t->error_msg), "%d %s: %s", status->code,
			         status->reason ? status->reason : "",
			         status->message ? status->message : "");
			/* The same predicate a kresult gets. */
			ck_result_t r = {.http_code = status->code};
			r.status.code = status->code;
			r.status.reason = status->reason;
			if (ck_result_is_gone(&r))
				atomic_fetch_add(&t->gone, 1);
		}
		atomic_fetch_add(&t->errors, 1);
		break;
	}
	ck_obj_unref(obj);
}

static void watch_done(void *ud, ck_result_t *res)
{
	it_t *t = ud;
	if (res->error != NULL)
		snprintf(t->error_msg, sizeof(t->error_msg), "%s", res->error);
	atomic_store(&t->watch_ended, 1);
}

static const ck_dec_cb_t watch_cb = {.on_event = watch_event};

static void *watch_main(void *arg)
{
	it_t *t = arg;
	/* The watch was started by the loop thread before this worker. */
	ck_assert_msg(wait_atomic(&t->initial_end, 1), "no initial-events-end BOOKMARK (%s)",
	              t->error_msg);
	ck_result_t r = {0};
	char *body = deployment_json("w1", NULL, 0, NULL);
	int rc = ck_client_create_sync(t->c, &ck_type_deployment, t->ns, body, NULL, &r);
	ck_assert_msg(rc == 0, "create: %s", r.error);
	ck_result_clear(&r);
	free(body);
	ck_assert_msg(wait_atomic(&t->added, 1), "no ADDED");
	rc = ck_client_patch_sync(t->c, &ck_type_deployment, t->ns, "w1", CK_PATCH_MERGE,
	                          "{\"metadata\":{\"labels\":{\"changed\":\"yes\"}}}", NULL, &r);
	ck_assert_msg(rc == 0, "patch: %s", r.error);
	ck_result_clear(&r);
	ck_assert_msg(wait_atomic(&t->modified, 1), "no MODIFIED");
	rc = ck_client_delete_sync(t->c, &ck_type_deployment, t->ns, "w1", NULL, &r);
	ck_assert_msg(rc == 0, "delete: %s", r.error);
	ck_result_clear(&r);
	ck_assert_msg(wait_atomic(&t->deleted, 1), "no DELETED");
	atomic_store(&t->done, 1);
	return NULL;
}

static void *ns_main(void *arg)
{
	it_t *t = arg;
	ns_create(t);
	atomic_store(&t->done, 1);
	return NULL;
}

static void *ns_delete_main(void *arg)
{
	it_t *t = arg;
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_watch_events)
{
	it_t t;
	it_init(&t, "token");
	it_run(&t, ns_main);
	/* A streaming list: initial events end at a BOOKMARK, then live changes. */
	ck_list_opts_t o = {.send_initial_events = true,
	                    .resource_version_match = "NotOlderThan",
	                    .allow_watch_bookmarks = true,
	                    .timeout_seconds = 120};
	char *err = NULL;
	ck_req_t *w =
	    ck_client_watch(t.c, &ck_type_deployment, t.ns, &o, &watch_cb, watch_done, &t, &err);
	ck_assert_msg(w != NULL, "%s", err);
	it_run(&t, watch_main);
	ck_assert_int_ge(atomic_load(&t.bookmarks), 1);
	ck_assert_int_eq(atomic_load(&t.errors), 0);
	ck_assert_msg(!atomic_load(&t.watch_ended), "watch ended early: %s", t.error_msg);
	ck_req_cancel(w);
	it_run(&t, ns_delete_main);
	it_fini(&t);
}
END_TEST

/*
 * An old resourceVersion: a watch from "1" is answered 200 and then a 410 ERROR
 * event ("too old resource version"), once etcd compacted past it. The API server
 * compacts every 5 minutes; on a younger cluster the watch replays history
 * instead, so the test compacts etcd itself through etcd's JSON gateway, whose URL
 * hack/local-up.sh writes next to the kubeconfig: to revision 100 (or the test
 * namespace's, if lower), so that only ancient versions become too old and other
 * tests running against the same cluster see no 410 they did not ask for.
 */
static size_t discard(char *p, size_t size, size_t n, void *ud)
{
	return size * n;
}

static bool etcd_compact(const char *rv, char *why, size_t whylen)
{
	char *dir = ck_xstrdup(getenv("KUBECONFIG"));
	char *slash = strrchr(dir, '/');
	char *envpath = ck_xasprintf("%s/env", slash ? (*slash = '\0', dir) : ".");
	char *text = NULL, *err = NULL, *url = NULL;
	bool ok = false;
	if (ck_file_read_all(envpath, &text, NULL, &err) < 0) {
		snprintf(why, whylen, "%s", err);
		goto out;
	}
	const char *p = strstr(text, "ETCD_URL=");
	if (p == NULL) {
		snprintf(why, whylen, "%s has no ETCD_URL", envpath);
		goto out;
	}
	p += 9;
	url = ck_xasprintf("%.*s/v3/kv/compaction", (int)strcspn(p, "\n"), p);
	char *body = ck_xasprintf("{\"revision\":\"%s\",\"physical\":true}", rv);
	CURL *e = curl_easy_init();
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(e, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
	CURLcode cc = curl_easy_perform(e);
	long code = 0;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(e);
	free(body);
	/* An error "already compacted" past rv is as good. */
	ok = cc == CURLE_OK && (code == 200 || code == 400);
	if (!ok)
		snprintf(why, whylen, "POST %s: curl %d, HTTP %ld", url, (int)cc, code);
out:
	free(url);
	free(text);
	free(err);
	free(envpath);
	free(dir);
	return ok;
}

/* Phase 1: did the watch from "1" end in a 410 within a few seconds? */
static void *gone_wait_main(void *arg)
{
	it_t *t = arg;
	for (int i = 0; i < 500 && !atomic_load(&t->errors) && !atomic_load(&t->watch_ended); i++)
		usleep(10000);
	atomic_store(&t->done, 1);
	return NULL;
}

static char ns_rv[32];

static void *compact_main(void *arg)
{
	it_t *t = arg;
	char why[512] = "";
	bool ok = etcd_compact(ns_rv, why, sizeof(why));
	ck_assert_msg(ok, "cannot compact etcd to force a 410: %s", why);
	/* Compaction alone is not enough on a young API server: its watch cache was
	 * filled when etcd's revision was still low, holds no event older than that, and
	 * so serves a watch from resourceVersion 1 without a 410. Restarted, it starts
	 * its window at the current revision. */
	const char *root = getenv("CSC_ROOT");
	char *cmd = ck_xasprintf("bash '%s/hack/local-ctl.sh' restart-apiserver >/dev/null",
	                         root ? root : "../..");
	int rc = system(cmd);
	ck_assert_msg(rc == 0, "%s failed (%d)", cmd, rc);
	free(cmd);
	atomic_store(&t->done, 1);
	return NULL;
}

static void *ns_rv_main(void *arg)
{
	it_t *t = arg;
	ns_create(t);
	ck_result_t r = {0};
	int rc = ck_client_get_sync(t->c, &t_ns, NULL, t->ns, &r);
	ck_assert_msg(rc == 0, "%s", r.error);
	long long rv = strtoll(r.obj->rv, NULL, 10);
	snprintf(ns_rv, sizeof(ns_rv), "%lld", rv > 100 ? 100 : rv);
	ck_result_clear(&r);
	atomic_store(&t->done, 1);
	return NULL;
}

static ck_req_t *watch_from_one(it_t *t)
{
	atomic_store(&t->errors, 0);
	atomic_store(&t->gone, 0);
	atomic_store(&t->watch_ended, 0);
	t->error_msg[0] = '\0';
	ck_list_opts_t o = {.resource_version = "1", .timeout_seconds = 60};
	char *err = NULL;
	ck_req_t *w =
	    ck_client_watch(t->c, &ck_type_deployment, t->ns, &o, &watch_cb, watch_done, t, &err);
	ck_assert_msg(w != NULL, "%s", err);
	return w;
}

START_TEST(test_watch_gone)
{
	it_t t;
	it_init(&t, "token");
	it_run(&t, ns_rv_main);
	ck_req_t *w = watch_from_one(&t);
	it_run(&t, gone_wait_main);
	if (atomic_load(&t.errors) == 0) {
		fprintf(stderr,
		        "test_watch_gone: resourceVersion 1 still served; compacting "
		        "etcd to %s and restarting the API server\n",
		        ns_rv);
		if (!atomic_load(&t.watch_ended))
			ck_req_cancel(w);
		it_run(&t, compact_main);
		w = watch_from_one(&t);
		it_run(&t, gone_wait_main);
	}
	ck_assert_msg(atomic_load(&t.errors) == 1, "no ERROR event (%s)", t.error_msg);
	ck_assert_msg(atomic_load(&t.gone) == 1, "ERROR event is not Gone: %s", t.error_msg);
	ck_assert_msg(strstr(t.error_msg, "410 Expired: too old resource version") != NULL, "%s",
	              t.error_msg);
	if (!atomic_load(&t.watch_ended)) /* else done ran and w is gone */
		ck_req_cancel(w);
	it_run(&t, ns_delete_main);
	it_fini(&t);
}
END_TEST

/* --- RBAC: a ServiceAccount without rights gets 403 with the server's words --- */

typedef struct forbid {
	it_t *admin;
	char *token;
} forbid_t;

static forbid_t forbid;

static void *forbid_setup_main(void *arg)
{
	it_t *t = arg;
	ns_create(t);
	ck_result_t r = {0};
	char *sa = ck_xasprintf("{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\",\"metadata\":"
	                        "{\"name\":\"nobody\",\"namespace\":\"%s\"}}",
	                        t->ns);
	int rc = ck_client_create_sync(t->c, &t_sa, t->ns, sa, NULL, &r);
	ck_assert_msg(rc == 0, "create sa: %s", r.error);
	ck_result_clear(&r);
	free(sa);
	/* TokenRequest: POST serviceaccounts/nobody/token; the token is in the raw body. */
	const char *tr = "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\","
	                 "\"spec\":{\"expirationSeconds\":600}}";
	ck_req_spec_t spec = {.method = "POST",
	                      .type = &t_sa,
	                      .ns = t->ns,
	                      .name = "nobody",
	                      .subresource = "token",
	                      .body = tr,
	                      .body_len = strlen(tr),
	                      .keep_body = true,
	                      .no_decode = true};
	rc = ck_client_do_sync(t->c, &spec, &r);
	ck_assert_msg(rc == 0, "token request: %s", r.error);
	const char *p = strstr(r.body, "\"token\":\"");
	ck_assert_ptr_nonnull(p);
	p += 9;
	const char *q = strchr(p, '"');
	ck_assert_ptr_nonnull(q);
	forbid.token = ck_xstrndup(p, (size_t)(q - p));
	ck_result_clear(&r);
	atomic_store(&t->done, 1);
	return NULL;
}

static void *forbid_main(void *arg)
{
	it_t *t = arg;
	ck_result_t r = {0};
	int rc = ck_client_get_sync(t->c, &ck_type_deployment, forbid.admin->ns, "x", &r);
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(r.http_code, 403);
	ck_assert(ck_result_is_forbidden(&r));
	char *want = ck_xasprintf("403 Forbidden: deployments.apps \"x\" is forbidden: User "
	                          "\"system:serviceaccount:%s:nobody\" cannot get resource "
	                          "\"deployments\" in API group \"apps\" in the namespace \"%s\"",
	                          forbid.admin->ns, forbid.admin->ns);
	ck_assert_msg(strstr(r.error, want) != NULL, "%s", r.error);
	ck_assert_ptr_null(strstr(r.error, forbid.token));
	free(want);
	ck_result_clear(&r);
	atomic_store(&t->done, 1);
	return NULL;
}

static void *unauth_main(void *arg)
{
	it_t *t = arg;
	ck_result_t r = {0};
	int rc = ck_client_get_sync(t->c, &t_ns, NULL, "default", &r);
	ck_assert_int_eq(rc, -1);
	ck_assert(ck_result_is_unauthorized(&r));
	ck_assert_msg(strstr(r.error, "401 Unauthorized") != NULL, "%s", r.error);
	ck_assert_ptr_null(strstr(r.error, "not-a-real-token"));
	ck_result_clear(&r);
	atomic_store(&t->done, 1);
	return NULL;
}

static void count_stat(void *ud, const char *method, int code, uint64_t count)
{
	if (code == 401)
		*(uint64_t *)ud += count;
}

START_TEST(test_rbac_forbidden_and_unauthorized)
{
	it_t admin;
	it_init(&admin, "token");
	forbid.admin = &admin;
	it_run(&admin, forbid_setup_main);

	it_t limited = {0};
	limited.loop = ev_loop_new(EVFLAG_AUTO);
	limited.c = it_client_ctx(limited.loop, "token", forbid.token);
	it_run(&limited, forbid_main);
	it_fini(&limited);

	it_t bogus = {0};
	bogus.loop = ev_loop_new(EVFLAG_AUTO);
	bogus.c = it_client_ctx(bogus.loop, "token", "not-a-real-token");
	it_run(&bogus, unauth_main);
	uint64_t n401 = 0;
	ck_client_stats_foreach(bogus.c, count_stat, &n401);
	/* A static token cannot change: one request, its 401 reported, no retry. */
	ck_assert_uint_eq(n401, 1);
	it_fini(&bogus);

	free(forbid.token);
	it_run(&admin, ns_delete_main);
	it_fini(&admin);
}
END_TEST

/*
 * --- one connection: every watch and call multiplexed on one HTTP/2 connection ---
 *
 * client.c asks for HTTP/2 over TLS, waits for a connection in progress rather
 * than opening another (PIPEWAIT), and multiplexes. This checks it on the real
 * API server: three watches stay open while two worker threads make 20 GET/LIST
 * calls at once, and the client's own figures must show one connection and only
 * HTTP/2 responses.
 */
static const ck_type_t t_event = {
    .group = "", .version = "v1", .kind = "Event", .resource = "events", .namespaced = true};

#define MUX_WATCHES 3
#define MUX_CALLS   10 /* per worker thread */

typedef struct mux_watch {
	const char *what;
	atomic_int added, ended;
	char err[512];
} mux_watch_t;

typedef struct mux {
	it_t *t;
	mux_watch_t w[MUX_WATCHES];
	uint64_t base_responses; /* responses before the watches started */
	atomic_int calls_ok, calls_failed;
	char call_err[512];
	pthread_mutex_t mu;              /* call_err */
	ck_client_conn_stats_t measured; /* with the watches open, after the calls */
} mux_t;

static mux_t mux;

static void mux_event(void *ud, ck_watch_type_t type, ck_obj_t *obj, const ck_status_t *status)
{
	mux_watch_t *w = ud;
	if (type == CK_WATCH_ADDED)
		atomic_fetch_add(&w->added, 1);
	else if (type == CK_WATCH_ERROR && status != NULL)
		snprintf(w->err, sizeof(w->err), "ERROR event %d %s", status->code,
		         status->message ? status->message : "");
	ck_obj_unref(obj);
}

static void mux_watch_done(void *ud, ck_result_t *res)
{
	mux_watch_t *w = ud;
	snprintf(w->err, sizeof(w->err), "ended: %s", res->error ? res->error : "cleanly");
	atomic_store(&w->ended, 1);
}

static const ck_dec_cb_t mux_cb = {.on_event = mux_event};

/* One worker's share of the calls: GETs and LISTs of several kinds. */
static void *mux_calls_main(void *arg)
{
	mux_t *m = arg;
	it_t *t = m->t;
	for (int i = 0; i < MUX_CALLS; i++) {
		ck_result_t r = {0};
		int rc;
		ck_obj_t **items = NULL;
		size_t n = 0;
		switch (i % 4) {
		case 0:
			rc = ck_client_get_sync(t->c, &t_ns, NULL, t->ns, &r);
			break;
		case 1:
			rc = ck_client_list_sync(t->c, &ck_type_deployment, t->ns, NULL, &items, &n,
			                         NULL, &r);
			break;
		case 2:
			rc = ck_client_list_sync(t->c, &t_foo, t->ns, NULL, &items, &n, NULL, &r);
			break;
		default:
			rc = ck_client_get_sync(t->c, &t_ns, NULL, "default", &r);
			break;
		}
		for (size_t k = 0; k < n; k++)
			ck_obj_unref(items[k]);
		free(items);
		if (rc == 0) {
			atomic_fetch_add(&m->calls_ok, 1);
		} else {
			atomic_fetch_add(&m->calls_failed, 1);
			pthread_mutex_lock(&m->mu);
			snprintf(m->call_err, sizeof(m->call_err), "%s", r.error ? r.error : "?");
			pthread_mutex_unlock(&m->mu);
		}
		ck_result_clear(&r);
	}
	return NULL;
}

/* Waits up to 30 s until the client has seen at least min response heads. */
static bool wait_responses(ck_client_t *c, uint64_t min)
{
	for (int i = 0; i < 3000; i++) {
		ck_client_conn_stats_t s;
		ck_client_conn_stats_snapshot(c, &s);
		if (s.responses >= min)
			return true;
		usleep(10000);
	}
	return false;
}

static void *mux_main(void *arg)
{
	it_t *t = arg;
	mux_t *m = &mux;
	/* A watch's response head comes as soon as the server has set it up. */
	ck_assert_msg(wait_responses(t->c, m->base_responses + MUX_WATCHES),
	              "the watches got no response heads");
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, mux_calls_main, m);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ck_assert_msg(atomic_load(&m->calls_failed) == 0, "%d of %d calls failed, e.g.: %s",
	              atomic_load(&m->calls_failed), 2 * MUX_CALLS, m->call_err);
	ck_assert_int_eq(atomic_load(&m->calls_ok), 2 * MUX_CALLS);

	/* One object for each watch, to show that all three still deliver. */
	ck_result_t r = {0};
	char *dep = deployment_json("mux", NULL, 0, NULL);
	int rc = ck_client_create_sync(t->c, &ck_type_deployment, t->ns, dep, NULL, &r);
	ck_assert_msg(rc == 0, "create deployment: %s", r.error);
	ck_result_clear(&r);
	free(dep);
	const char *foo = "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\","
	                  "\"metadata\":{\"name\":\"mux\"},\"spec\":{\"deploymentName\":\"mux\","
	                  "\"replicas\":1}}";
	rc = ck_client_create_sync(t->c, &t_foo, t->ns, foo, NULL, &r);
	ck_assert_msg(rc == 0, "create foo: %s", r.error);
	ck_result_clear(&r);
	char *ev = ck_xasprintf("{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"name\":"
	                        "\"mux\"},\"involvedObject\":{\"apiVersion\":\"apps/v1\",\"kind\":"
	                        "\"Deployment\",\"name\":\"mux\",\"namespace\":\"%s\"},"
	                        "\"reason\":\"Test\",\"message\":\"one connection\","
	                        "\"type\":\"Normal\",\"source\":{\"component\":\"cli-it\"}}",
	                        t->ns);
	rc = ck_client_create_sync(t->c, &t_event, t->ns, ev, NULL, &r);
	ck_assert_msg(rc == 0, "create event: %s", r.error);
	ck_result_clear(&r);
	free(ev);
	for (int i = 0; i < MUX_WATCHES; i++)
		ck_assert_msg(wait_atomic(&m->w[i].added, 1), "watch on %s saw no ADDED (%s)",
		              m->w[i].what, m->w[i].err);
	ck_client_conn_stats_snapshot(t->c, &m->measured);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_one_connection_multiplexed)
{
	const char *contexts[] = {"token", "cert"};
	const ck_type_t *types[MUX_WATCHES] = {&ck_type_deployment, &t_foo, &t_event};
	const char *what[MUX_WATCHES] = {"deployments", "foos", "events"};
	for (int ci = 0; ci < 2; ci++) {
		it_t t;
		it_init(&t, contexts[ci]);
		it_run(&t, ns_main);
		memset(&mux, 0, sizeof(mux));
		mux.t = &t;
		pthread_mutex_init(&mux.mu, NULL);
		ck_client_conn_stats_t before;
		ck_client_conn_stats_snapshot(t.c, &before);
		mux.base_responses = before.responses;
		ck_req_t *w[MUX_WATCHES];
		ck_list_opts_t o = {.allow_watch_bookmarks = true, .timeout_seconds = 120};
		for (int i = 0; i < MUX_WATCHES; i++) {
			char *err = NULL;
			mux.w[i].what = what[i];
			w[i] = ck_client_watch(t.c, types[i], t.ns, &o, &mux_cb, mux_watch_done,
			                       &mux.w[i], &err);
			ck_assert_msg(w[i] != NULL, "watch %s: %s", what[i], err);
		}
		it_run(&t, mux_main);
		for (int i = 0; i < MUX_WATCHES; i++)
			ck_assert_msg(!atomic_load(&mux.w[i].ended), "watch on %s %s", what[i],
			              mux.w[i].err);

		const ck_client_conn_stats_t *s = &mux.measured;
		char *measured = ck_xasprintf(
		    "context %s: %llu TCP connection(s) opened; %llu responses: %llu HTTP/1.x, "
		    "%llu HTTP/2, %llu HTTP/3; last response HTTP version %d (curl %s)",
		    contexts[ci], (unsigned long long)s->connections,
		    (unsigned long long)s->responses, (unsigned long long)s->responses_http1,
		    (unsigned long long)s->responses_http2, (unsigned long long)s->responses_http3,
		    s->last_http_version, curl_version_info(CURLVERSION_NOW)->version);
		fprintf(stderr, "test_one_connection_multiplexed: %s\n", measured);
		/* namespace create, 3 watches, 20 calls, 3 creates: at least 27 heads */
		ck_assert_msg(s->responses >= 1 + MUX_WATCHES + 2 * MUX_CALLS + 3, "%s", measured);
		ck_assert_msg(s->responses_http2 == s->responses, "not all HTTP/2: %s", measured);
		ck_assert_msg(s->last_http_version == 20, "%s", measured);
		ck_assert_msg(s->connections == 1, "want exactly 1 connection: %s", measured);
		free(measured);

		for (int i = 0; i < MUX_WATCHES; i++)
			ck_req_cancel(w[i]);
		it_run(&t, ns_delete_main);
		pthread_mutex_destroy(&mux.mu);
		it_fini(&t);
	}
}
END_TEST

/* ------------------------------------------------------------ TLS options, proxy */

/*
 * kubeconfig options insecure-skip-tls-verify, tls-server-name and proxy-url
 * against the real API server. Its serving certificate (hack/local-up.sh) is for
 * IP:127.0.0.1, IP:10.0.0.1 and DNS:localhost, kubernetes, kubernetes.default,
 * kubernetes.default.svc, signed by the local CA (.local/pki/ca.crt).
 */

/* The local server, from $KUBECONFIG (context "token"). */
typedef struct local_srv {
	char server[256];    /* https://127.0.0.1:PORT */
	char host_port[128]; /* 127.0.0.1:PORT */
	ck_sbuf_t ca_b64;
	char *token;
} local_srv_t;

static void local_srv_load(local_srv_t *s)
{
	memset(s, 0, sizeof(*s));
	const char *path = getenv("KUBECONFIG");
	ck_assert_msg(path != NULL && path[0] != '\0',
	              "KUBECONFIG must name the local control plane's kubeconfig");
	ck_config_load_opts_t lo = {.kubeconfig = path, .context = "token"};
	char *err = NULL;
	ck_config_t *cfg = ck_config_load(&lo, &err);
	ck_assert_msg(cfg != NULL, "kconfig_load: %s", err);
	struct ck_config_view v;
	ck_config_view(cfg, &v);
	snprintf(s->server, sizeof(s->server), "%s", v.server);
	const char *hp = strstr(v.server, "://");
	ck_assert_msg(hp != NULL && strncmp(v.server, "https://", 8) == 0, "server %s", v.server);
	snprintf(s->host_port, sizeof(s->host_port), "%s", hp + 3);
	ck_assert_msg(v.ca_pem != NULL, "the local kubeconfig has no CA");
	ck_sbuf_put_base64(&s->ca_b64, v.ca_pem, v.ca_len);
	ck_cred_t cred = {0};
	ck_assert_msg(ck_config_credentials(cfg, false, &cred, &err) == 0, "credentials: %s", err);
	ck_assert_msg(cred.token != NULL, "context token has no token");
	s->token = ck_xstrdup(cred.token);
	ck_cred_clear(&cred);
	ck_config_free(cfg);
}

static void local_srv_free(local_srv_t *s)
{
	ck_sbuf_free(&s->ca_b64);
	free(s->token);
}

typedef struct tls_kcfg {
	bool ca;                 /* certificate-authority-data: the local CA */
	bool insecure;           /* insecure-skip-tls-verify: true */
	const char *server_name; /* tls-server-name, or NULL */
	const char *proxy;       /* proxy-url, or NULL */
} tls_kcfg_t;

/* A client for the local server and token with the cluster options o. */
static void tls_init(it_t *t, const local_srv_t *s, const tls_kcfg_t *o)
{
	memset(t, 0, sizeof(*t));
	t->loop = ev_loop_new(EVFLAG_AUTO);
	snprintf(t->ns, sizeof(t->ns), "cli-tls-%08llx", (unsigned long long)(ck_rand_u64() >> 32));
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_printf(&b,
	               "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
	               "    server: %s\n",
	               s->server);
	if (o->ca)
		ck_sbuf_printf(&b, "    certificate-authority-data: %s\n",
		               ck_sbuf_cstr((ck_sbuf_t *)&s->ca_b64));
	if (o->insecure)
		ck_sbuf_puts(&b, "    insecure-skip-tls-verify: true\n");
	if (o->server_name != NULL)
		ck_sbuf_printf(&b, "    tls-server-name: %s\n", o->server_name);
	if (o->proxy != NULL)
		ck_sbuf_printf(&b, "    proxy-url: %s\n", o->proxy);
	ck_sbuf_printf(&b,
	               "users:\n- name: u\n  user:\n    token: %s\ncontexts:\n- name: x\n"
	               "  context:\n    cluster: c\n    user: u\ncurrent-context: x\n",
	               s->token);
	char *err = NULL;
	ck_config_t *cfg = ck_config_load_text(b.data, b.len, "tls-test-kubeconfig", NULL, &err);
	ck_sbuf_free(&b);
	ck_assert_msg(cfg != NULL, "kconfig_load_text: %s", err);
	/* No retries: a refused handshake must fail at once, not after backoff. */
	ck_client_opts_t co = {.max_retries = -1, .connect_timeout_ms = 5000};
	t->c = ck_client_new(t->loop, cfg, &co, &err);
	ck_assert_msg(t->c != NULL, "kclient_new: %s", err);
}

/* Worker: GET /api/v1/namespaces/default into tls_res / tls_rc. */
static ck_result_t tls_res;
static int tls_rc;

static void *get_default_main(void *arg)
{
	it_t *t = arg;
	ck_result_clear(&tls_res);
	memset(&tls_res, 0, sizeof(tls_res));
	tls_rc = ck_client_get_sync(t->c, &t_ns, NULL, "default", &tls_res);
	atomic_store(&t->done, 1);
	return NULL;
}

/* One GET of namespace default with a fresh client for o; result in tls_res. */
static int tls_get_default(const local_srv_t *s, const tls_kcfg_t *o)
{
	it_t t;
	tls_init(&t, s, o);
	it_run(&t, get_default_main);
	it_fini(&t);
	return tls_rc;
}

static void assert_get_ok(const char *what)
{
	ck_assert_msg(tls_rc == 0, "%s: GET namespace default failed: %s", what, tls_res.error);
	ck_assert_int_eq(tls_res.http_code, 200);
	ck_assert_msg(tls_res.obj != NULL && strcmp(tls_res.obj->name, "default") == 0,
	              "%s: no namespace default in the answer", what);
}

/* The GET failed in the TLS handshake because the server's certificate was refused
 * (curl error 60), and the message says so and names the request's URL. */
static void assert_verify_failed(const local_srv_t *s, const char *what, const char *needle)
{
	ck_assert_msg(tls_rc != 0, "%s: GET succeeded, want a verification error", what);
	ck_assert_msg(tls_res.http_code == 0 &&
	                  tls_res.transport_code == CURLE_PEER_FAILED_VERIFICATION,
	              "%s: want curl error %d (peer verification), got HTTP %d, curl %d: %s", what,
	              (int)CURLE_PEER_FAILED_VERIFICATION, tls_res.http_code,
	              tls_res.transport_code, tls_res.error);
	ck_assert_msg(ck_result_is_transport(&tls_res), "%s: not a transport error: %s", what,
	              tls_res.error);
	ck_assert_ptr_nonnull(tls_res.error);
	ck_assert_msg(strstr(tls_res.error, needle) != NULL, "%s: error does not say \"%s\": %s",
	              what, needle, tls_res.error);
	/* The URL in the message is the server's, as written in the kubeconfig. */
	char *url = ck_xasprintf("GET %s/api/v1/namespaces/default:", s->server);
	ck_assert_msg(strstr(tls_res.error, url) != NULL, "%s: error does not name \"%s\": %s",
	              what, url, tls_res.error);
	free(url);
	fprintf(stderr, "%s: %s\n", what, tls_res.error);
}

START_TEST(test_tls_insecure_skip_verify)
{
	local_srv_t s;
	local_srv_load(&s);
	/* No CA at all, verification off: the handshake must succeed. */
	tls_get_default(&s, &(tls_kcfg_t){.insecure = true});
	assert_get_ok("insecure-skip-tls-verify without a CA");
	/* No CA and verification on: the system store does not know the local CA. */
	tls_get_default(&s, &(tls_kcfg_t){0});
	assert_verify_failed(&s, "system CAs only", "certificate");
	/* And the local CA alone is enough. */
	tls_get_default(&s, &(tls_kcfg_t){.ca = true});
	assert_get_ok("certificate-authority-data");
	ck_result_clear(&tls_res);
	local_srv_free(&s);
}
END_TEST

/* --- helper processes (Python scripts in tests/integration), on free ports --- */

typedef struct helper {
	pid_t pid;
	char dir[64];
	char port_file[128];
	char log_file[128];
	int port;
} helper_t;

static const char *python3(void)
{
	return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

/* Starts script with args (NULL-terminated; "@PORT" and "@LOG" stand for the
 * helper's port file and log file), waits up to 10 s for its port file. */
static void helper_start(helper_t *h, const char *script, const char *const *args)
{
	memset(h, 0, sizeof(*h));
	snprintf(h->dir, sizeof(h->dir), "/tmp/cli-it-helper-XXXXXX");
	ck_assert_msg(mkdtemp(h->dir) != NULL, "mkdtemp: %s", strerror(errno));
	snprintf(h->port_file, sizeof(h->port_file), "%s/port", h->dir);
	snprintf(h->log_file, sizeof(h->log_file), "%s/log", h->dir);
	char path[256];
	/* make integration runs in tests/integration; from the top, the same file. */
	snprintf(path, sizeof(path), "%s", script);
	if (access(path, R_OK) != 0)
		snprintf(path, sizeof(path), "tests/integration/%s", script);
	ck_assert_msg(access(path, R_OK) == 0, "helper %s not found", script);
	const char *argv[16];
	int n = 0;
	argv[n++] = python3();
	argv[n++] = path;
	for (; *args != NULL && n < 15; args++)
		argv[n++] = strcmp(*args, "@PORT") == 0  ? h->port_file
		            : strcmp(*args, "@LOG") == 0 ? h->log_file
		                                         : *args;
	argv[n] = NULL;
	int rc = posix_spawnp(&h->pid, argv[0], NULL, NULL, (char *const *)argv, environ);
	ck_assert_msg(rc == 0, "posix_spawnp %s: %s", path, strerror(rc));
	for (int i = 0; i < 1000 && h->port == 0; i++) {
		FILE *f = fopen(h->port_file, "r");
		if (f != NULL) {
			if (fscanf(f, "%d", &h->port) != 1)
				h->port = 0;
			fclose(f);
		}
		if (h->port == 0) {
			int st;
			ck_assert_msg(waitpid(h->pid, &st, WNOHANG) == 0, "helper %s exited", path);
			usleep(10000);
		}
	}
	ck_assert_msg(h->port > 0, "helper %s wrote no port within 10 s", path);
}

/* Stops the helper; returns its log (new string, "" if none), free with free(). */
static char *helper_stop(helper_t *h)
{
	if (h->pid > 0) {
		kill(h->pid, SIGTERM);
		waitpid(h->pid, NULL, 0);
		h->pid = 0;
	}
	char *log = NULL;
	size_t len = 0;
	char *err = NULL;
	if (ck_file_read_all(h->log_file, &log, &len, &err) < 0) {
		free(err);
		log = ck_xstrdup("");
	}
	unlink(h->port_file);
	unlink(h->log_file);
	rmdir(h->dir);
	return log;
}

/* The first non-loopback IPv4 address that is up, or false. */
static bool non_loopback_ipv4(char *buf, size_t len)
{
	struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs) != 0)
		return false;
	bool found = false;
	for (struct ifaddrs *i = ifs; i != NULL && !found; i = i->ifa_next) {
		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0)
			continue;
		const struct sockaddr_in *sin = (const struct sockaddr_in *)i->ifa_addr;
		if ((ntohl(sin->sin_addr.s_addr) >> 24) == 127 ||
		    (ntohl(sin->sin_addr.s_addr) >> 16) == 0xa9fe) /* 169.254/16 */
			continue;
		found = inet_ntop(AF_INET, &sin->sin_addr, buf, (socklen_t)len) != NULL;
	}
	freeifaddrs(ifs);
	return found;
}

/*
 * What Host header did the API server receive? Its pod proxy forwards the Host it
 * got to the pod (kube-apiserver v1.3x; checked with curl -H Host), so a pod whose
 * IP is this machine's non-loopback address (kwok leaves the status of a pod
 * annotated kwok.x-k8s.io/status=custom to us) and whose "container" is
 * host_echo.py answers with it.
 */
static const ck_type_t t_pod = {
    .group = "", .version = "v1", .kind = "Pod", .resource = "pods", .namespaced = true};

typedef struct host_probe {
	char ip[64];
	int port;
	char seen[256]; /* "Host: ..." line the echo server answered */
} host_probe_t;
static host_probe_t probe;

static void *host_setup_main(void *arg)
{
	it_t *t = arg;
	ns_create(t);
	char *pod = ck_xasprintf(
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"host-echo\","
	    "\"annotations\":{\"kwok.x-k8s.io/status\":\"custom\"}},\"spec\":{\"nodeName\":"
	    "\"kwok-node-0\",\"containers\":[{\"name\":\"echo\",\"image\":\"none\"}]}}");
	ck_result_t r = {0};
	/* The namespace's default ServiceAccount (admission needs it) comes a moment
	 * after the namespace. */
	int rc = -1;
	for (int i = 0; i < 100; i++) {
		ck_result_clear(&r);
		memset(&r, 0, sizeof(r));
		rc = ck_client_create_sync(t->c, &t_pod, t->ns, pod, NULL, &r);
		if (rc == 0 || r.http_code != 403)
			break;
		usleep(100000);
	}
	ck_assert_msg(rc == 0, "create pod: %s", r.error);
	ck_result_clear(&r);
	free(pod);
	char *st = ck_xasprintf("{\"status\":{\"phase\":\"Running\",\"podIP\":\"%s\",\"podIPs\":[{"
	                        "\"ip\":\"%s\"}]}}",
	                        probe.ip, probe.ip);
	memset(&r, 0, sizeof(r));
	ck_req_spec_t sp = {.method = "PATCH",
	                    .type = &t_pod,
	                    .ns = t->ns,
	                    .name = "host-echo",
	                    .subresource = "status",
	                    .content_type = ck_patch_content_type(CK_PATCH_MERGE),
	                    .body = st,
	                    .body_len = strlen(st),
	                    .decode = CK_DEC_OBJECT};
	rc = ck_client_do_sync(t->c, &sp, &r);
	ck_assert_msg(rc == 0, "patch pod status: %s", r.error);
	ck_result_clear(&r);
	free(st);
	atomic_store(&t->done, 1);
	return NULL;
}

static void *host_probe_main(void *arg)
{
	it_t *t = arg;
	char *name = ck_xasprintf("http:host-echo:%d", probe.port);
	ck_req_spec_t sp = {.method = "GET",
	                    .type = &t_pod,
	                    .ns = t->ns,
	                    .name = name,
	                    .subresource = "proxy/",
	                    .keep_body = true,
	                    .no_decode = true};
	ck_result_t r = {0};
	int rc = ck_client_do_sync(t->c, &sp, &r);
	ck_assert_msg(rc == 0, "GET pod proxy: %s", r.error);
	ck_assert_ptr_nonnull(r.body);
	size_t n = strcspn(r.body, "\n");
	snprintf(probe.seen, sizeof(probe.seen), "%.*s", (int)n, r.body);
	ck_result_clear(&r);
	free(name);
	atomic_store(&t->done, 1);
	return NULL;
}

static void *host_teardown_main(void *arg)
{
	it_t *t = arg;
	ck_delete_opts_t d = {.grace_period_seconds = 0};
	ck_result_t r = {0};
	int rc = ck_client_delete_sync(t->c, &t_pod, t->ns, "host-echo", &d, &r);
	ck_assert_msg(rc == 0, "delete pod: %s", r.error);
	ck_result_clear(&r);
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_tls_server_name)
{
	local_srv_t s;
	local_srv_load(&s);
	/* A DNS SAN of the serving certificate that does not even resolve here: the
	 * client connects to 127.0.0.1 and only verifies (and sends SNI) for it. */
	tls_get_default(&s, &(tls_kcfg_t){.ca = true, .server_name = "kubernetes"});
	assert_get_ok("tls-server-name kubernetes");
	tls_get_default(&s, &(tls_kcfg_t){.ca = true, .server_name = "localhost"});
	assert_get_ok("tls-server-name localhost");
	/* A name the certificate is not for: refused, and the message names it. */
	tls_get_default(&s, &(tls_kcfg_t){.ca = true, .server_name = "not-in-cert.example"});
	assert_verify_failed(&s, "tls-server-name not-in-cert.example", "not-in-cert.example");
	ck_result_clear(&tls_res);

	/* client-go: tls-server-name changes SNI and verification only; the Host header
	 * is still the server URL's host (Go's http.Request.Host from the URL). */
	memset(&probe, 0, sizeof(probe));
	if (!non_loopback_ipv4(probe.ip, sizeof(probe.ip))) {
		fprintf(stderr, "test_tls_server_name: no non-loopback IPv4 address: the Host "
		                "header the API server saw is not checked\n");
		local_srv_free(&s);
		return;
	}
	helper_t echo;
	helper_start(&echo, "host_echo.py", (const char *const[]){probe.ip, "@PORT", NULL});
	probe.port = echo.port;
	it_t t;
	tls_init(&t, &s, &(tls_kcfg_t){.ca = true, .server_name = "kubernetes"});
	it_run(&t, host_setup_main);
	it_run(&t, host_probe_main);
	char want[192];
	snprintf(want, sizeof(want), "Host: %s", s.host_port);
	bool ok = strcmp(probe.seen, want) == 0;
	fprintf(stderr,
	        "test_tls_server_name: with tls-server-name kubernetes the API server saw "
	        "\"%s\"\n",
	        probe.seen);
	it_run(&t, host_teardown_main);
	it_fini(&t);
	free(helper_stop(&echo));
	ck_assert_msg(ok, "API server saw \"%s\", want \"%s\"", probe.seen, want);
	local_srv_free(&s);
}
END_TEST

/* The proxy's log: one "CONNECT target header-names" line per tunnel asked for. */
static void assert_connects(const char *log, const char *want_target, const char *never)
{
	char *want = ck_xasprintf("CONNECT %s ", want_target);
	ck_assert_msg(strstr(log, want) != NULL, "proxy was not asked to CONNECT %s; log:\n%s",
	              want_target, log);
	free(want);
	if (never != NULL) {
		char *bad = ck_xasprintf("CONNECT %s", never);
		ck_assert_msg(strstr(log, bad) == NULL, "proxy was asked to CONNECT %s; log:\n%s",
		              never, log);
		free(bad);
	}
	/* Every line is a CONNECT (https through an HTTP proxy is always tunnelled), and
	 * none carries the bearer token: the Authorization header is for the API
	 * server, inside the tunnel, never for the proxy. */
	for (const char *l = log; *l != '\0';) {
		size_t n = strcspn(l, "\n");
		ck_assert_msg(strncmp(l, "CONNECT ", 8) == 0, "proxy got: %.*s", (int)n, l);
		char *line = ck_xstrndup(l, n);
		ck_assert_msg(strstr(line, "authorization") == NULL,
		              "the proxy saw an Authorization header: %s", line);
		free(line);
		l += n;
		if (*l == '\n')
			l++;
	}
}

START_TEST(test_tls_proxy_url)
{
	local_srv_t s;
	local_srv_load(&s);
	/* An explicit proxy-url wins over no_proxy in the environment (client-go uses
	 * http.ProxyURL for it, which knows no exceptions). */
	setenv("no_proxy", "127.0.0.1,localhost,kubernetes", 1);
	setenv("NO_PROXY", "127.0.0.1,localhost,kubernetes", 1);

	helper_t px;
	helper_start(&px, "connect_proxy.py", (const char *const[]){"@PORT", "@LOG", NULL});
	char *proxy = ck_xasprintf("http://127.0.0.1:%d", px.port);
	tls_get_default(&s, &(tls_kcfg_t){.ca = true, .proxy = proxy});
	assert_get_ok("proxy-url");
	char *log = helper_stop(&px);
	fprintf(stderr, "test_tls_proxy_url: proxy log:\n%s", log);
	assert_connects(log, s.host_port, NULL);
	free(log);
	free(proxy);

	/* With tls-server-name too, the proxy is asked for the server's real address;
	 * the TLS name is only for the handshake inside the tunnel. */
	helper_start(&px, "connect_proxy.py", (const char *const[]){"@PORT", "@LOG", NULL});
	proxy = ck_xasprintf("http://127.0.0.1:%d", px.port);
	tls_get_default(&s, &(tls_kcfg_t){.ca = true, .server_name = "kubernetes", .proxy = proxy});
	assert_get_ok("proxy-url with tls-server-name kubernetes");
	log = helper_stop(&px);
	fprintf(stderr, "test_tls_proxy_url: with tls-server-name, proxy log:\n%s", log);
	assert_connects(log, s.host_port, "kubernetes");
	free(log);
	free(proxy);

	/* A proxy that is down is an error, not a silent direct connection. */
	helper_start(&px, "connect_proxy.py", (const char *const[]){"@PORT", "@LOG", NULL});
	proxy = ck_xasprintf("http://127.0.0.1:%d", px.port);
	free(helper_stop(&px));
	tls_get_default(&s, &(tls_kcfg_t){.ca = true, .proxy = proxy});
	ck_assert_msg(tls_rc != 0, "GET through a stopped proxy succeeded");
	ck_assert_msg(tls_res.transport_code == CURLE_COULDNT_CONNECT,
	              "want curl error %d through a stopped proxy: %s", (int)CURLE_COULDNT_CONNECT,
	              tls_res.error);
	free(proxy);
	ck_result_clear(&tls_res);
	unsetenv("no_proxy");
	unsetenv("NO_PROXY");
	local_srv_free(&s);
}
END_TEST

Suite *suite_client(void)
{
	Suite *s = suite_create("client");
	TCase *tc = tcase_create("apiserver");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_contexts);
	tcase_add_test(tc, test_deployment_crud);
	tcase_add_test(tc, test_foo_crud);
	tcase_add_test(tc, test_watch_events);
	tcase_add_test(tc, test_watch_gone);
	tcase_add_test(tc, test_rbac_forbidden_and_unauthorized);
	tcase_add_test(tc, test_one_connection_multiplexed);
	suite_add_tcase(s, tc);
	TCase *tls = tcase_create("tls");
	tcase_set_timeout(tls, 120);
	tcase_add_test(tls, test_tls_insecure_skip_verify);
	tcase_add_test(tls, test_tls_server_name);
	tcase_add_test(tls, test_tls_proxy_url);
	suite_add_tcase(s, tls);
	return s;
}
