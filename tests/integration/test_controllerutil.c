/*
 * Integration tests for the controller helpers (controllerutil.h, conditions.h,
 * applyconfig.h, the status verbs of patch.h) against the real local control
 * plane ($KUBECONFIG, hack/local-up.sh).
 *
 *   drift        create-or-update of a Service: created, unchanged (no write: the
 *                resourceVersion stays), a second port added by another writer
 *                (a strategic-merge patch, as kubectl edit sends) survives a
 *                forced server-side apply of our one port, and create-or-update
 *                repairs it to exactly one port
 *   defaulted    create-or-update of a Deployment: the second call sends no
 *                write (the resourceVersion stays and the client counted no PUT;
 *                nor a PATCH from create-or-patch)
 *                although the server filled the container with defaults
 *                (imagePullPolicy, terminationMessagePath, resources, ...); a
 *                changed image is written
 *   status       a status in a main-resource patch of a Foo (its CRD has the
 *                status subresource) is answered 200 and dropped; the status
 *                merge patch and the status apply land; a Ready condition set
 *                with the conditions helpers, its lastTransitionTime kept on a
 *                write without a transition
 *   finalizers   add (the object as read keeps it), a stale add refused with 409
 *                rather than losing the other finalizer, a delete held back
 *                (deletionTimestamp and finalizers kept in ck_obj_t), the removal
 *                lets it go
 *   owners       a ConfigMap created with a controller reference to a Foo is
 *                controlled by it; another Foo cannot take it (already owned)
 *
 * The loop runs on the test's thread, the test body on a worker thread (the
 * helpers are blocking calls, as in a reconcile function). Each test makes its
 * own namespace and deletes it at the end.
 */
#include <ckube/applyconfig.h>
#include <ckube/client.h>
#include <ckube/conditions.h>
#include <ckube/controllerutil.h>
#include <ckube/json.h>
#include <ckube/kinds.h>
#include <ckube/patch.h>
#include <ckube/types.h>

#include "it.h"

#include <check.h>
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const ck_type_t t_crd = {.group = "apiextensions.k8s.io",
                                .version = "v1",
                                .kind = "CustomResourceDefinition",
                                .resource = "customresourcedefinitions"};
static const char *const foo_fields[] = {"status.availableReplicas", "status.conditions"};
static const ck_type_t t_foo = {.group = "samplecontroller.k8s.io",
                                .version = "v1alpha1",
                                .kind = "Foo",
                                .resource = "foos",
                                .namespaced = true,
                                .fields = foo_fields,
                                .nfields = 2};

typedef struct it {
	struct ev_loop *loop;
	ck_client_t *c;
	char ns[64];
	atomic_int done;
} it_t;

static void it_init(it_t *t)
{
	memset(t, 0, sizeof(*t));
	const char *path = getenv("KUBECONFIG");
	ck_assert_msg(path != NULL && path[0] != '\0',
	              "KUBECONFIG must name the local control plane's kubeconfig");
	t->loop = ev_loop_new(EVFLAG_AUTO);
	ck_config_load_opts_t lo = {.kubeconfig = path};
	char *err = NULL;
	ck_config_t *cfg = ck_config_load(&lo, &err);
	ck_assert_msg(cfg != NULL, "config: %s", err);
	t->c = ck_client_new(t->loop, cfg, NULL, &err);
	ck_assert_msg(t->c != NULL, "client: %s", err);
	snprintf(t->ns, sizeof(t->ns), "cu-it-%08llx", (unsigned long long)(ck_rand_u64() >> 32));
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

/* Runs fn on a fresh it_t when deploy/crd.yaml (the Foo CRD fn applies) is
 * there; says so and passes when it is not. */
static void it_run_crd(const char *test, void *(*fn)(void *))
{
	if (access("../../deploy/crd.yaml", R_OK) != 0) {
		fprintf(stderr, "%s: deploy/crd.yaml missing, skipped\n", test);
		return;
	}
	it_t t;
	it_init(&t);
	it_run(&t, fn);
	it_fini(&t);
}

static void ns_create(it_t *t)
{
	ck_patch_t *p = ck_patch_new_object(&ck_type_namespace, NULL, t->ns);
	ck_result_t r = {0};
	ck_assert_msg(ck_client_create_body_sync(t->c, p, NULL, &r) == 0, "namespace: %s", r.error);
	ck_result_clear(&r);
	ck_patch_free(p);
}

static void ns_delete(it_t *t)
{
	ck_result_t r = {0};
	ck_assert_msg(ck_client_delete_sync(t->c, &ck_type_namespace, NULL, t->ns, NULL, &r) == 0,
	              "delete namespace: %s", r.error);
	ck_result_clear(&r);
}

/* The raw object (GET with keep_body), parsed; NULL when absent. */
static ck_json_doc_t *get_raw(it_t *t, const ck_type_t *type, const char *name)
{
	ck_result_t r = {0};
	ck_req_spec_t spec = {.method = "GET",
	                      .type = type,
	                      .ns = type->namespaced ? t->ns : NULL,
	                      .name = name,
	                      .keep_body = true,
	                      .no_decode = true};
	if (ck_client_do_sync(t->c, &spec, &r) != 0) {
		ck_assert_msg(ck_result_is_not_found(&r), "get %s: %s", name, r.error);
		ck_result_clear(&r);
		return NULL;
	}
	char *err = NULL;
	ck_json_doc_t *d = ck_json_parse(r.body, r.body_len, &err);
	ck_assert_msg(d != NULL, "%s", err);
	ck_result_clear(&r);
	return d;
}

static char *rv_of(const ck_json_doc_t *d)
{
	return ck_xstrdup(
	    ck_json_str(ck_json_get(ck_json_root(d), CK_PATH("metadata", "resourceVersion"))));
}

/* ------------------------------------------------------------ drift */

static ck_patch_t *desired_service(const char *ns)
{
	ck_patch_t *s = ck_ac_service(ns, "web");
	ck_ac_label(s, "app", "web");
	ck_ac_service_selector(s, "app", "web");
	ck_ac_service_port(s, "http", 80, 0, NULL);
	return s;
}

static size_t nports(it_t *t)
{
	ck_json_doc_t *d = get_raw(t, &ck_type_service, "web");
	size_t n = ck_json_len(ck_json_get(ck_json_root(d), CK_PATH("spec", "ports")));
	ck_json_doc_free(d);
	return n;
}

static void *drift_main(void *arg)
{
	it_t *t = arg;
	ns_create(t);
	ck_patch_t *want = desired_service(t->ns);
	ck_result_t r = {0};
	ck_op_result_t op;

	int rc = ck_create_or_update_sync(t->c, want, NULL, &op, &r);
	ck_assert_msg(rc == 0, "create: %s", r.error);
	ck_assert_int_eq(op, CK_OP_CREATED);
	ck_result_clear(&r);
	ck_json_doc_t *d = get_raw(t, &ck_type_service, "web");
	char *rv1 = rv_of(d);
	ck_json_doc_free(d);

	rc = ck_create_or_update_sync(t->c, want, NULL, &op, &r);
	ck_assert_msg(rc == 0, "again: %s", r.error);
	ck_assert_int_eq(op, CK_OP_UNCHANGED);
	ck_result_clear(&r);
	d = get_raw(t, &ck_type_service, "web");
	char *rv2 = rv_of(d);
	ck_json_doc_free(d);
	ck_assert_str_eq(rv1, rv2); /* no write */

	/* Someone edits the Service by hand: a second port, by strategic merge (the
	 * ports are merged by port number: the new entry is kubectl's). */
	ck_write_opts_t kubectl = {.field_manager = "kubectl-edit"};
	rc = ck_client_patch_sync(t->c, &ck_type_service, t->ns, "web", CK_PATCH_STRATEGIC,
	                          "{\"spec\":{\"ports\":[{\"name\":\"http-alt\",\"port\":8080,"
	                          "\"protocol\":\"TCP\",\"targetPort\":8080}]}}",
	                          &kubectl, &r);
	ck_assert_msg(rc == 0, "drift: %s", r.error);
	ck_result_clear(&r);
	ck_assert_uint_eq(nports(t), 2);

	/* Server-side apply of our one port, forced, does not take kubectl's away. */
	rc = ck_client_apply_sync(t->c, want, "ctl", true, &r);
	ck_assert_msg(rc == 0, "apply: %s", r.error);
	ck_result_clear(&r);
	ck_assert_uint_eq(nports(t), 2);

	/* Create-or-update replaces the list whole. */
	rc = ck_create_or_update_sync(t->c, want, NULL, &op, &r);
	ck_assert_msg(rc == 0, "repair: %s", r.error);
	ck_assert_int_eq(op, CK_OP_UPDATED);
	ck_result_clear(&r);
	d = get_raw(t, &ck_type_service, "web");
	const ck_json_t *ports = ck_json_get(ck_json_root(d), CK_PATH("spec", "ports"));
	ck_assert_uint_eq(ck_json_len(ports), 1);
	ck_assert_str_eq(ck_json_str(ck_json_get(ports, CK_PATH("0", "name"))), "http");
	/* What it did not name (the allocated clusterIP, the label) is kept. */
	ck_assert_ptr_nonnull(
	    ck_json_str(ck_json_get(ck_json_root(d), CK_PATH("spec", "clusterIP"))));
	ck_json_doc_free(d);
	rc = ck_create_or_update_sync(t->c, want, NULL, &op, &r);
	ck_assert_msg(rc == 0 && op == CK_OP_UNCHANGED, "after repair: %s %s", r.error,
	              ck_op_result_name(op));
	ck_result_clear(&r);

	/* create-or-patch: the same drift, repaired by a merge patch with the
	 * resourceVersion as a precondition. */
	rc = ck_client_patch_sync(t->c, &ck_type_service, t->ns, "web", CK_PATCH_STRATEGIC,
	                          "{\"spec\":{\"ports\":[{\"name\":\"http-alt\",\"port\":8080,"
	                          "\"protocol\":\"TCP\",\"targetPort\":8080}]}}",
	                          &kubectl, &r);
	ck_assert_msg(rc == 0, "drift 2: %s", r.error);
	ck_result_clear(&r);
	rc = ck_create_or_patch_sync(t->c, want, NULL, true, &op, &r);
	ck_assert_msg(rc == 0, "patch repair: %s", r.error);
	ck_assert_int_eq(op, CK_OP_UPDATED);
	ck_result_clear(&r);
	ck_assert_uint_eq(nports(t), 1);

	free(rv1);
	free(rv2);
	ck_patch_free(want);
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_create_or_update_repairs_drift)
{
	it_t t;
	it_init(&t);
	it_run(&t, drift_main);
	it_fini(&t);
}
END_TEST

/* ------------------------------------------------------------ defaulted */

static ck_patch_t *desired_deployment(const char *ns, const char *image)
{
	ck_patch_t *d = ck_ac_deployment(ns, "web");
	ck_ac_deployment_replicas(d, 2);
	ck_ac_deployment_selector(d, "app", "web");
	ck_ac_deployment_template_label(d, "app", "web");
	ck_patch_t *c = ck_ac_container("web", image);
	ck_ac_container_port(c, "http", 8080, NULL);
	ck_ac_deployment_container(d, c);
	return d;
}

struct count {
	const char *method;
	uint64_t n;
};

static void count_method(void *ud, const char *method, int code, uint64_t count)
{
	struct count *c = ud;
	if (strcmp(method, c->method) == 0)
		c->n += count;
}

/* Requests of that method the client sent so far. */
static uint64_t sent(it_t *t, const char *method)
{
	struct count c = {method, 0};
	ck_client_stats_foreach(t->c, count_method, &c);
	return c.n;
}

static void *defaulted_main(void *arg)
{
	it_t *t = arg;
	ns_create(t);
	ck_patch_t *want = desired_deployment(t->ns, "nginx:1.27");
	ck_result_t r = {0};
	ck_op_result_t op;

	int rc = ck_create_or_update_sync(t->c, want, NULL, &op, &r);
	ck_assert_msg(rc == 0, "create: %s", r.error);
	ck_assert_int_eq(op, CK_OP_CREATED);
	ck_result_clear(&r);
	ck_json_doc_t *d = get_raw(t, &ck_type_deployment, "web");
	/* The server filled in what the body left out: the case under test. */
	ck_assert_ptr_nonnull(
	    ck_json_get(ck_json_root(d),
	                CK_PATH("spec", "template", "spec", "containers", "0", "imagePullPolicy")));
	/* Not the resourceVersion: the deployment controller writes the status
	 * meanwhile. The generation moves only with the spec. */
	int64_t gen1 = 0, gen2 = 0;
	ck_json_get_int64(ck_json_get(ck_json_root(d), CK_PATH("metadata", "generation")), &gen1);
	ck_json_doc_free(d);

	uint64_t puts = sent(t, "PUT"), patches = sent(t, "PATCH");
	rc = ck_create_or_update_sync(t->c, want, NULL, &op, &r);
	ck_assert_msg(rc == 0, "again: %s", r.error);
	ck_assert_msg(op == CK_OP_UNCHANGED, "second create-or-update: %s, want unchanged",
	              ck_op_result_name(op));
	ck_result_clear(&r);
	ck_assert_uint_eq(sent(t, "PUT"), puts); /* no PUT sent */
	/* The same for create-or-patch: no PATCH. */
	rc = ck_create_or_patch_sync(t->c, want, NULL, true, &op, &r);
	ck_assert_msg(rc == 0 && op == CK_OP_UNCHANGED, "create-or-patch: %s %s", r.error,
	              ck_op_result_name(op));
	ck_result_clear(&r);
	ck_assert_uint_eq(sent(t, "PATCH"), patches);
	d = get_raw(t, &ck_type_deployment, "web");
	ck_json_get_int64(ck_json_get(ck_json_root(d), CK_PATH("metadata", "generation")), &gen2);
	ck_json_doc_free(d);
	ck_assert_int_eq(gen1, 1);
	ck_assert_int_eq(gen2, gen1);

	/* A value it owns changes: written, the defaults come back from the server. */
	ck_patch_free(want);
	want = desired_deployment(t->ns, "nginx:1.28");
	/* The deployment controller writes the status meanwhile: a 409 is retried, as
	 * a reconcile would be. */
	int tries = 0;
	do {
		ck_result_clear(&r);
		rc = ck_create_or_update_sync(t->c, want, NULL, &op, &r);
	} while (rc != 0 && ck_result_is_conflict(&r) && ++tries < 10);
	ck_assert_msg(rc == 0 && op == CK_OP_UPDATED, "new image: %s %s", r.error,
	              ck_op_result_name(op));
	ck_result_clear(&r);
	ck_assert_uint_eq(sent(t, "PUT"), puts + 1 + (uint64_t)tries);
	d = get_raw(t, &ck_type_deployment, "web");
	const ck_json_t *c0 =
	    ck_json_get(ck_json_root(d), CK_PATH("spec", "template", "spec", "containers", "0"));
	ck_assert_str_eq(ck_json_str(ck_json_get(c0, CK_PATH("image"))), "nginx:1.28");
	ck_assert_ptr_nonnull(ck_json_get(c0, CK_PATH("imagePullPolicy")));
	ck_json_doc_free(d);
	rc = ck_create_or_update_sync(t->c, want, NULL, &op, &r);
	ck_assert_msg(rc == 0 && op == CK_OP_UNCHANGED, "after the update: %s %s", r.error,
	              ck_op_result_name(op));
	ck_result_clear(&r);

	ck_patch_free(want);
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_create_or_update_defaulted)
{
	it_t t;
	it_init(&t);
	it_run(&t, defaulted_main);
	it_fini(&t);
}
END_TEST

/* ------------------------------------------------------------ status */

static bool foo_crd_ready(it_t *t)
{
	ck_json_doc_t *d = get_raw(t, &t_crd, "foos.samplecontroller.k8s.io");
	const ck_json_t *conds = ck_json_get(ck_json_root(d), CK_PATH("status", "conditions"));
	bool ok = ck_conditions_is_true(conds, "Established");
	ck_json_doc_free(d);
	return ok;
}

static void foo_crd(it_t *t)
{
	bool ready = foo_crd_ready(t);
	if (!ready) {
		char *cmd = ck_xasprintf("kubectl --kubeconfig '%s' apply -f ../../deploy/crd.yaml "
		                         ">/dev/null 2>&1",
		                         getenv("KUBECONFIG"));
		int st = system(cmd);
		free(cmd);
		for (int i = 0; st == 0 && i < 100 && !(ready = foo_crd_ready(t)); i++)
			usleep(100000);
	}
	ck_assert_msg(ready, "CRD foos.samplecontroller.k8s.io is not established");
}

static ck_obj_t *foo_create(it_t *t, const char *name)
{
	ck_patch_t *p = ck_patch_new_object(&t_foo, t->ns, name);
	ck_patch_set_string(p, CK_PATH("spec", "deploymentName"), name);
	ck_patch_set_int(p, CK_PATH("spec", "replicas"), 1);
	ck_result_t r = {0};
	ck_assert_msg(ck_client_create_body_sync(t->c, p, NULL, &r) == 0, "foo: %s", r.error);
	ck_obj_t *o = r.obj;
	r.obj = NULL;
	ck_result_clear(&r);
	ck_patch_free(p);
	return o;
}

static ck_obj_t *foo_get(it_t *t, const char *name)
{
	ck_result_t r = {0};
	ck_assert_msg(ck_client_get_sync(t->c, &t_foo, t->ns, name, &r) == 0, "get: %s", r.error);
	ck_obj_t *o = r.obj;
	r.obj = NULL;
	ck_result_clear(&r);
	return o;
}

static void *status_main(void *arg)
{
	it_t *t = arg;
	foo_crd(t);
	ns_create(t);
	ck_obj_unref(foo_create(t, "f1"));
	ck_result_t r = {0};

	/* The mistake the docs used to show: status in a main-resource patch. */
	ck_patch_t *p = ck_patch_new();
	ck_patch_set_int(p, CK_PATH("status", "availableReplicas"), 3);
	int rc = ck_client_merge_patch_sync(t->c, &t_foo, t->ns, "f1", p, NULL, &r);
	ck_assert_msg(rc == 0, "main patch: %s", r.error); /* 200 ... */
	ck_result_clear(&r);
	ck_obj_t *o = foo_get(t, "f1");
	ck_assert_int_eq(ck_obj_field(o, 0)->type, CK_VAL_ABSENT); /* ... and dropped */
	ck_obj_unref(o);

	/* The status subresource takes it. */
	rc = ck_client_status_merge_patch_sync(t->c, &t_foo, t->ns, "f1", p, NULL, &r);
	ck_assert_msg(rc == 0, "status patch: %s", r.error);
	ck_assert_int_eq(ck_obj_field(r.obj, 0)->u.i, 3);
	ck_result_clear(&r);
	ck_patch_free(p);

	/* Status apply. */
	p = ck_patch_new_object(&t_foo, t->ns, "f1");
	ck_patch_set_int(p, CK_PATH("status", "availableReplicas"), 4);
	rc = ck_client_status_apply_sync(t->c, p, "ctl", true, &r);
	ck_assert_msg(rc == 0, "status apply: %s", r.error);
	ck_result_clear(&r);
	ck_patch_free(p);
	o = foo_get(t, "f1");
	ck_assert_int_eq(ck_obj_field(o, 0)->u.i, 4);

	/* A Ready condition, then the same status with another message: the time of
	 * the transition stays what the server stored. */
	ck_condition_t ready = {.type = "Ready",
	                        .status = "False",
	                        .reason = "Progressing",
	                        .message = "0/1",
	                        .observed_generation = o->generation};
	char *err = NULL;
	for (int round = 0; round < 2; round++) {
		ck_json_doc_t *cd = ck_json_parse_field_path(o, "status.conditions", NULL);
		ck_sbuf_t out = CK_SBUF_INIT;
		bool changed = false;
		ck_assert_msg(
		    ck_conditions_set(ck_json_root(cd), &ready, NULL, &out, &changed, &err) == 0,
		    "%s", err);
		ck_assert(changed);
		p = ck_patch_new();
		ck_patch_set_conditions(p, out.data, out.len);
		rc = ck_client_status_merge_patch_sync(t->c, &t_foo, t->ns, "f1", p, NULL, &r);
		ck_assert_msg(rc == 0, "conditions: %s", r.error);
		ck_result_clear(&r);
		ck_patch_free(p);
		ck_sbuf_free(&out);
		ck_json_doc_free(cd);
		ck_obj_t *n = foo_get(t, "f1");
		cd = ck_json_parse_field_path(n, "status.conditions", NULL);
		ck_condition_t got;
		ck_assert(ck_conditions_find(ck_json_root(cd), "Ready", &got));
		ck_assert_str_eq(got.message, ready.message);
		ck_assert(ck_conditions_is_false(ck_json_root(cd), "Ready"));
		if (round == 1) {
			/* The server's copy of the first round's time came back unchanged. */
			ck_json_doc_t *od = ck_json_parse_field_path(o, "status.conditions", NULL);
			ck_condition_t first;
			ck_assert(ck_conditions_find(ck_json_root(od), "Ready", &first));
			ck_assert_str_eq(got.last_transition_time, first.last_transition_time);
			ck_json_doc_free(od);
		}
		ck_json_doc_free(cd);
		ck_obj_unref(o);
		o = n;
		ready.message = "still 0/1";
	}
	ck_obj_unref(o);
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_status_subresource)
{
	it_run_crd("test_status_subresource", status_main);
}
END_TEST

/* ------------------------------------------------------------ finalizers */

static ck_obj_t *cm_get(it_t *t)
{
	ck_result_t r = {0};
	if (ck_client_get_sync(t->c, &ck_type_configmap, t->ns, "cm", &r) != 0) {
		ck_assert_msg(ck_result_is_not_found(&r), "get cm: %s", r.error);
		ck_result_clear(&r);
		return NULL;
	}
	ck_obj_t *o = r.obj;
	r.obj = NULL;
	ck_result_clear(&r);
	return o;
}

static void *finalizer_main(void *arg)
{
	it_t *t = arg;
	ns_create(t);
	ck_patch_t *cm = ck_ac_configmap(t->ns, "cm");
	ck_ac_configmap_data(cm, "k", "v");
	ck_result_t r = {0};
	ck_assert_msg(ck_client_create_body_sync(t->c, cm, NULL, &r) == 0, "cm: %s", r.error);
	ck_result_clear(&r);
	ck_patch_free(cm);

	ck_obj_t *stale = cm_get(t);
	ck_assert_int_eq(ck_finalizer_add_sync(t->c, stale, "example.com/a", NULL, &r), 0);
	ck_assert(ck_obj_has_finalizer(r.obj, "example.com/a"));
	ck_result_clear(&r);
	/* Added again from the copy read before: 409, not a list without "a". */
	ck_assert_int_eq(ck_finalizer_add_sync(t->c, stale, "example.com/b", NULL, &r), -1);
	ck_assert_msg(ck_result_is_conflict(&r), "%s", r.error);
	ck_result_clear(&r);
	ck_obj_t *cur = cm_get(t);
	ck_assert_int_eq(ck_finalizer_add_sync(t->c, cur, "example.com/b", NULL, &r), 0);
	ck_result_clear(&r);
	ck_obj_unref(cur);
	cur = cm_get(t);
	ck_assert_uint_eq(cur->nfinalizers, 2);
	ck_assert_str_eq(cur->finalizers[0], "example.com/a");
	ck_assert_str_eq(cur->finalizers[1], "example.com/b");
	/* Present already: nothing sent. */
	ck_assert_int_eq(ck_finalizer_add_sync(t->c, cur, "example.com/a", NULL, &r), 0);
	ck_assert_int_eq(r.http_code, 0);
	ck_obj_unref(cur);

	/* A delete is held back by them. */
	ck_assert_msg(ck_client_delete_sync(t->c, &ck_type_configmap, t->ns, "cm", NULL, &r) == 0,
	              "delete: %s", r.error);
	ck_result_clear(&r);
	cur = cm_get(t);
	ck_assert_ptr_nonnull(cur);
	ck_assert_ptr_nonnull(cur->deletion_timestamp);
	ck_assert_uint_eq(cur->nfinalizers, 2);
	ck_assert_int_eq(ck_finalizer_remove_sync(t->c, cur, "example.com/a", NULL, &r), 0);
	ck_result_clear(&r);
	ck_obj_unref(cur);
	cur = cm_get(t);
	ck_assert_ptr_nonnull(cur);
	ck_assert_int_eq(ck_finalizer_remove_sync(t->c, cur, "example.com/b", NULL, &r), 0);
	ck_result_clear(&r);
	ck_obj_unref(cur);
	ck_assert_ptr_null(cm_get(t)); /* the last one gone: so is the object */
	ck_obj_unref(stale);
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_finalizers)
{
	it_t t;
	it_init(&t);
	it_run(&t, finalizer_main);
	it_fini(&t);
}
END_TEST

/* ------------------------------------------------------------ owners */

static void *owner_main(void *arg)
{
	it_t *t = arg;
	foo_crd(t);
	ns_create(t);
	ck_obj_t *f1 = foo_create(t, "f1"), *f2 = foo_create(t, "f2");
	ck_patch_t *cm = ck_ac_configmap(t->ns, "child");
	ck_ac_configmap_data(cm, "k", "v");
	char *err = NULL;
	ck_assert_msg(ck_patch_set_controller_reference(cm, f1, NULL, &err) == 0, "%s", err);
	ck_result_t r = {0};
	ck_op_result_t op;
	ck_assert_msg(ck_create_or_update_sync(t->c, cm, NULL, &op, &r) == 0, "child: %s", r.error);
	ck_assert_int_eq(op, CK_OP_CREATED);
	ck_obj_t *child = r.obj;
	r.obj = NULL;
	ck_result_clear(&r);
	ck_assert(ck_obj_is_controlled_by(child, f1));
	ck_assert(!ck_obj_is_controlled_by(child, f2));
	ck_assert_ptr_nonnull(ck_obj_controller_of(child, "samplecontroller.k8s.io", "Foo"));
	ck_assert(ck_obj_controller_ref(child)->block_owner_deletion);
	/* The same reference again: nothing to write. */
	ck_assert_int_eq(ck_create_or_update_sync(t->c, cm, NULL, &op, &r), 0);
	ck_assert_int_eq(op, CK_OP_UNCHANGED);
	ck_result_clear(&r);
	ck_patch_free(cm);

	/* f2 cannot adopt what f1 controls. */
	cm = ck_ac_configmap(t->ns, "child");
	ck_assert_int_eq(ck_patch_set_controller_reference(cm, f2, child, &err),
	                 CK_OWNER_EALREADY_OWNED);
	ck_assert_msg(strstr(err, "is already owned by Foo f1") != NULL, "%s", err);
	free(err);
	ck_patch_free(cm);

	ck_obj_unref(child);
	ck_obj_unref(f1);
	ck_obj_unref(f2);
	ns_delete(t);
	atomic_store(&t->done, 1);
	return NULL;
}

START_TEST(test_owner_references)
{
	it_run_crd("test_owner_references", owner_main);
}
END_TEST

Suite *suite_controllerutil(void)
{
	Suite *s = suite_create("controllerutil");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_create_or_update_repairs_drift);
	tcase_add_test(tc, test_create_or_update_defaulted);
	tcase_add_test(tc, test_status_subresource);
	tcase_add_test(tc, test_finalizers);
	tcase_add_test(tc, test_owner_references);
	suite_add_tcase(s, tc);
	return s;
}
