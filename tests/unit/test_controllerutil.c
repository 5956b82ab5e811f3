/*
 * controllerutil, conditions, applyconfig: owner references with the adoption
 * rules, conditions with lastTransitionTime only on a transition (fake clock),
 * typed bodies; and against a scripted server (fault_server.h), what the sync
 * helpers send: finalizer patches with the resourceVersion and no request when
 * there is nothing to do, create-or-update's GET/POST/PUT and its "unchanged",
 * create-or-patch, and the status subresource verbs. Last, the same helpers on
 * the in-memory API server (fake.h), as a user's unit test would run them.
 */
#include "tests/unit/fault_server.h"

#include <ckube/applyconfig.h>
#include <ckube/conditions.h>
#include <ckube/controllerutil.h>
#include <ckube/decode.h>
#include <ckube/fake.h>
#include <ckube/kinds.h>
#include <ckube/types.h>

#include <check.h>
#include <ev.h>

static const ck_type_t foo_type = {.group = "samplecontroller.k8s.io",
                                   .version = "v1alpha1",
                                   .kind = "Foo",
                                   .resource = "foos",
                                   .namespaced = true};

static ck_obj_t *dec(const ck_type_t *t, const char *json)
{
	char *err = NULL;
	ck_obj_t *o = ck_dec_object(t, json, strlen(json), &err);
	ck_assert_msg(o != NULL, "%s", err);
	return o;
}

static char *body_of(const ck_patch_t *p)
{
	char *err = NULL;
	char *s = ck_patch_build(p, NULL, &err);
	ck_assert_msg(s != NULL, "%s", err);
	return s;
}

#define ASSERT_BODY(p, want)                                                                       \
	do {                                                                                       \
		char *got_ = body_of(p);                                                           \
		ck_assert_str_eq(got_, want);                                                      \
		free(got_);                                                                        \
	} while (0)

/* ---------------------------------------------------------------- owner references */

#define FOO(ns, name, uid)                                                                         \
	"{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"" ns "\",\"uid\":\"" uid "\"}}"

START_TEST(test_controller_reference)
{
	ck_obj_t *foo = dec(&foo_type, FOO("ns", "f\\\"1", "u1"));
	/* A new object: one reference, escaped. */
	ck_patch_t *p = ck_patch_new_object(&ck_type_deployment, "ns", "d");
	char *err = NULL;
	ck_assert_int_eq(ck_patch_set_controller_reference(p, foo, NULL, &err), 0);
	ASSERT_BODY(p, "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":"
	               "\"d\",\"namespace\":\"ns\",\"ownerReferences\":[{\"apiVersion\":"
	               "\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\",\"name\":\"f\\\"1\","
	               "\"uid\":\"u1\",\"controller\":true,\"blockOwnerDeletion\":true}]}}");
	ck_patch_free(p);

	/* An existing object with another (plain) owner and an older reference to the
	 * same Foo under another version and uid: the plain one kept, the same one
	 * replaced in place. */
	ck_obj_t *dep =
	    dec(&ck_type_deployment,
	        "{\"metadata\":{\"name\":\"d\",\"namespace\":\"ns\",\"ownerReferences\":["
	        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"cm\","
	        "\"uid\":\"c1\"},"
	        "{\"apiVersion\":\"samplecontroller.k8s.io/v1\",\"kind\":\"Foo\","
	        "\"name\":\"f\\\"1\",\"uid\":\"old\",\"controller\":true}]}}");
	p = ck_patch_new_object(&ck_type_deployment, "ns", "d");
	ck_assert_int_eq(ck_patch_set_controller_reference(p, foo, dep, &err), 0);
	char *b = body_of(p);
	ck_assert_ptr_nonnull(
	    strstr(b, "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":"
	              "\"cm\",\"uid\":\"c1\"},{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\","
	              "\"kind\":\"Foo\",\"name\":\"f\\\"1\",\"uid\":\"u1\",\"controller\":true,"
	              "\"blockOwnerDeletion\":true}]"));
	free(b);
	ck_patch_free(p);

	/* Controlled by another Foo: the distinct error, the body untouched. */
	ck_obj_t *other = dec(&foo_type, FOO("ns", "g", "u2"));
	p = ck_patch_new_object(&ck_type_deployment, "ns", "d");
	ck_assert_int_eq(ck_patch_set_controller_reference(p, other, dep, &err),
	                 CK_OWNER_EALREADY_OWNED);
	ck_assert_str_eq(err, "Deployment ns/d is already owned by Foo f\"1 "
	                      "(samplecontroller.k8s.io/v1), not Foo g");
	free(err);
	err = NULL;
	ASSERT_BODY(p, "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":"
	               "\"d\",\"namespace\":\"ns\"}}");
	/* ... but a plain owner reference may still be added. */
	ck_assert_int_eq(ck_patch_set_owner_reference(p, other, dep, &err), 0);
	b = body_of(p);
	ck_assert_ptr_nonnull(strstr(b, "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\","
	                                "\"kind\":\"Foo\",\"name\":\"g\",\"uid\":\"u2\"}]"));
	free(b);
	ck_patch_free(p);
	ck_obj_unref(other);

	/* Namespaces: cross-namespace and namespaced-owns-cluster-scoped refused; a
	 * cluster-scoped owner may own a namespaced object. */
	ck_obj_t *far = dec(&foo_type, FOO("elsewhere", "f", "u3"));
	p = ck_patch_new_object(&ck_type_deployment, "ns", "d");
	ck_assert_int_eq(ck_patch_set_controller_reference(p, far, NULL, &err), -1);
	ck_assert_str_eq(err, "owner reference: cross-namespace owner references are disallowed: "
	                      "owner Foo elsewhere/f, object in namespace ns");
	free(err);
	err = NULL;
	ck_patch_free(p);
	p = ck_patch_new_object(&ck_type_namespace, NULL, "n");
	ck_assert_int_eq(ck_patch_set_controller_reference(p, far, NULL, &err), -1);
	ck_assert_ptr_nonnull(
	    strstr(err, "a cluster-scoped object cannot have a namespaced owner"));
	free(err);
	err = NULL;
	ck_patch_free(p);
	ck_obj_t *node = dec(&ck_type_node, "{\"metadata\":{\"name\":\"n1\",\"uid\":\"un\"}}");
	p = ck_patch_new_object(&ck_type_configmap, "ns", "cm");
	ck_assert_int_eq(ck_patch_set_controller_reference(p, node, NULL, &err), 0);
	ck_patch_free(p);
	/* An owner without a uid, a body whose namespace is unknown. */
	ck_obj_t *nouid = dec(&foo_type, "{\"metadata\":{\"name\":\"x\",\"namespace\":\"ns\"}}");
	p = ck_patch_new_object(&ck_type_deployment, "ns", "d");
	ck_assert_int_eq(ck_patch_set_controller_reference(p, nouid, NULL, &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "owner Foo \"x\" has no uid"));
	free(err);
	err = NULL;
	ck_patch_free(p);
	p = ck_patch_new();
	ck_assert_int_eq(ck_patch_set_controller_reference(p, foo, NULL, &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "namespace is unknown"));
	free(err);
	err = NULL;
	ck_assert_int_eq(ck_patch_set_controller_reference(p, foo, dep, &err), 0);
	ck_patch_free(p);
	ck_obj_unref(nouid);
	ck_obj_unref(node);
	ck_obj_unref(far);
	ck_obj_unref(dep);
	ck_obj_unref(foo);
}
END_TEST

/* ---------------------------------------------------------------- conditions */

static ck_json_doc_t *parse(const char *s)
{
	char *err = NULL;
	ck_json_doc_t *d = ck_json_parse(s, strlen(s), &err);
	ck_assert_msg(d != NULL, "%s", err);
	return d;
}

START_TEST(test_conditions)
{
	ck_clk_fake_t clk;
	ck_clk_fake_init(&clk, 0, 1714557600LL * (int64_t)CK_NS_PER_SEC); /* 2024-05-01T10:00:00Z */
	ck_sbuf_t out = CK_SBUF_INIT;
	bool changed = false;
	char *err = NULL;
	ck_condition_t ready = {.type = "Ready",
	                        .status = "False",
	                        .reason = "Progressing",
	                        .message = "0/1 \"up\"",
	                        .observed_generation = 3};
	/* None yet: appended with now. */
	ck_assert_int_eq(ck_conditions_set(NULL, &ready, &clk.base, &out, &changed, &err), 0);
	ck_assert(changed);
	ck_assert_str_eq(ck_sbuf_cstr(&out),
	                 "[{\"type\":\"Ready\",\"status\":\"False\",\"observedGeneration\":3,"
	                 "\"lastTransitionTime\":\"2024-05-01T10:00:00Z\",\"reason\":"
	                 "\"Progressing\",\"message\":\"0/1 \\\"up\\\"\"}]");

	/* The same status later, new message: the time of the transition is kept. */
	ck_json_doc_t *d = parse(ck_sbuf_cstr(&out));
	ck_clk_fake_advance(&clk, 60 * CK_NS_PER_SEC);
	ready.message = "1/2";
	ck_sbuf_reset(&out);
	ck_assert_int_eq(
	    ck_conditions_set(ck_json_root(d), &ready, &clk.base, &out, &changed, &err), 0);
	ck_assert(changed);
	ck_assert_ptr_nonnull(strstr(ck_sbuf_cstr(&out), "2024-05-01T10:00:00Z"));
	ck_assert_ptr_nonnull(strstr(ck_sbuf_cstr(&out), "\"message\":\"1/2\""));
	ck_json_doc_free(d);

	/* Nothing different: unchanged, byte for byte. */
	d = parse(ck_sbuf_cstr(&out));
	char *before = ck_xstrdup(ck_sbuf_cstr(&out));
	ck_sbuf_reset(&out);
	ck_assert_int_eq(
	    ck_conditions_set(ck_json_root(d), &ready, &clk.base, &out, &changed, &err), 0);
	ck_assert(!changed);
	ck_assert_str_eq(ck_sbuf_cstr(&out), before);
	free(before);
	ck_json_doc_free(d);

	/* A transition: now; other conditions and unknown members stay. */
	d = parse("[{\"type\":\"Synced\",\"status\":\"True\",\"x\":1},"
	          "{\"type\":\"Ready\",\"status\":\"False\",\"lastTransitionTime\":"
	          "\"2020-01-01T00:00:00Z\",\"reason\":\"R\",\"message\":\"m\",\"extra\":[1]}]");
	ready.status = "True";
	ready.observed_generation = 0;
	ck_sbuf_reset(&out);
	ck_assert_int_eq(
	    ck_conditions_set(ck_json_root(d), &ready, &clk.base, &out, &changed, &err), 0);
	ck_assert(changed);
	ck_assert_str_eq(ck_sbuf_cstr(&out),
	                 "[{\"type\":\"Synced\",\"status\":\"True\",\"x\":1},"
	                 "{\"type\":\"Ready\",\"status\":\"True\",\"lastTransitionTime\":"
	                 "\"2024-05-01T10:01:00Z\",\"reason\":\"Progressing\",\"message\":\"1/2\","
	                 "\"extra\":[1]}]");
	ck_assert(ck_conditions_is_true(ck_json_root(d), "Synced"));
	ck_assert(ck_conditions_is_false(ck_json_root(d), "Ready"));
	ck_assert(!ck_conditions_is_true(ck_json_root(d), "Nope"));
	ck_condition_t got;
	ck_assert(ck_conditions_find(ck_json_root(d), "Ready", &got));
	ck_assert_str_eq(got.last_transition_time, "2020-01-01T00:00:00Z");
	ck_assert_str_eq(got.reason, "R");
	ck_assert(!ck_conditions_find(ck_json_root(d), "Nope", &got));

	/* Remove by type. */
	ck_sbuf_reset(&out);
	ck_assert_int_eq(ck_conditions_remove(ck_json_root(d), "Synced", &out, &changed, &err), 0);
	ck_assert(changed);
	ck_assert_ptr_null(strstr(ck_sbuf_cstr(&out), "Synced"));
	ck_sbuf_reset(&out);
	ck_assert_int_eq(ck_conditions_remove(ck_json_root(d), "Nope", &out, &changed, &err), 0);
	ck_assert(!changed);
	ck_json_doc_free(d);

	/* Into a status patch. */
	ck_patch_t *p = ck_patch_new();
	ck_assert_int_eq(ck_patch_set_conditions(p, ck_sbuf_cstr(&out), out.len), 0);
	char *b = body_of(p);
	ck_assert_ptr_nonnull(strstr(b, "{\"status\":{\"conditions\":[{\"type\":\"Synced\""));
	free(b);
	ck_patch_free(p);

	/* Bad input: clear errors, nothing appended. */
	ck_sbuf_reset(&out);
	ck_condition_t bad = {.type = "Ready", .status = "true"};
	ck_assert_int_eq(ck_conditions_set(NULL, &bad, &clk.base, &out, NULL, &err), -1);
	ck_assert_str_eq(err, "conditions: condition Ready: status \"true\" is not True, False or "
	                      "Unknown");
	free(err);
	err = NULL;
	bad = (ck_condition_t){.status = "True"};
	ck_assert_int_eq(ck_conditions_set(NULL, &bad, &clk.base, &out, NULL, &err), -1);
	ck_assert_str_eq(err, "conditions: a condition needs a type");
	free(err);
	err = NULL;
	d = parse("{\"type\":\"Ready\"}");
	ck_assert_int_eq(ck_conditions_set(ck_json_root(d), &ready, &clk.base, &out, NULL, &err),
	                 -1);
	ck_assert_str_eq(err, "conditions: status.conditions is object, not an array");
	free(err);
	err = NULL;
	ck_assert_int_eq(ck_conditions_remove(ck_json_root(d), "Ready", &out, NULL, &err), -1);
	free(err);
	ck_json_doc_free(d);
	ck_assert_uint_eq(out.len, 0);
	ck_sbuf_free(&out);
}
END_TEST

/* ---------------------------------------------------------------- typed bodies */

START_TEST(test_applyconfig)
{
	ck_patch_t *d = ck_ac_deployment("ns", "web");
	ck_ac_label(d, "app.kubernetes.io/name", "web");
	ck_ac_deployment_replicas(d, 2);
	ck_ac_deployment_selector(d, "app", "web");
	ck_ac_deployment_template_label(d, "app", "web");
	ck_patch_t *c = ck_ac_container("nginx", "nginx:1.25");
	ck_ac_container_port(c, "http", 80, NULL);
	ck_ac_container_env(c, "MODE", "prod");
	ck_ac_container_arg(c, "-g");
	ck_ac_container_arg(c, "daemon off;");
	ck_ac_container_request(c, "cpu", "100m");
	ck_ac_container_limit(c, "memory", "64Mi");
	ck_ac_deployment_container(d, c);
	ck_ac_deployment_container(d, ck_ac_container("sidecar", "busybox"));
	ASSERT_BODY(
	    d,
	    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\","
	    "\"namespace\":\"ns\",\"labels\":{\"app.kubernetes.io/name\":\"web\"}},\"spec\":{"
	    "\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{"
	    "\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":"
	    "\"nginx\",\"image\":\"nginx:1.25\",\"ports\":[{\"name\":\"http\",\"containerPort\":"
	    "80,\"protocol\":\"TCP\"}],\"env\":[{\"name\":\"MODE\",\"value\":\"prod\"}],\"args\":"
	    "[\"-g\",\"daemon off;\"],\"resources\":{\"requests\":{\"cpu\":\"100m\"},\"limits\":"
	    "{\"memory\":\"64Mi\"}}},{\"name\":\"sidecar\",\"image\":\"busybox\"}]}}}}");
	ck_patch_free(d);

	ck_patch_t *s = ck_ac_service("ns", "web");
	ck_ac_service_type(s, "ClusterIP");
	ck_ac_service_selector(s, "app", "web");
	ck_ac_service_port(s, "http", 80, 0, NULL);
	ck_ac_service_port(s, NULL, 53, 5353, "UDP");
	ASSERT_BODY(s,
	            "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"web\","
	            "\"namespace\":\"ns\"},\"spec\":{\"type\":\"ClusterIP\",\"selector\":{\"app\":"
	            "\"web\"},\"ports\":[{\"name\":\"http\",\"protocol\":\"TCP\",\"port\":80,"
	            "\"targetPort\":80},{\"protocol\":\"UDP\",\"port\":53,\"targetPort\":5353}]}}");
	ck_patch_free(s);

	ck_patch_t *cm = ck_ac_configmap("ns", "cfg");
	ck_ac_configmap_data(cm, "a.conf", "x=1\n");
	ASSERT_BODY(cm, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
	                "\"cfg\",\"namespace\":\"ns\"},\"data\":{\"a.conf\":\"x=1\\n\"}}");
	ck_patch_free(cm);

	ck_patch_t *sec = ck_ac_secret("ns", "s");
	ck_ac_secret_type(sec, "Opaque");
	ck_ac_secret_string_data(sec, "user", "admin");
	ck_ac_secret_data(sec, "bin", "\0\xff\x01", 3);
	ck_ac_secret_data(sec, "empty", "", 0);
	ASSERT_BODY(sec, "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\","
	                 "\"namespace\":\"ns\"},\"type\":\"Opaque\",\"stringData\":{\"user\":"
	                 "\"admin\"},\"data\":{\"bin\":\"AP8B\",\"empty\":\"\"}}");
	ck_patch_free(sec);

	/* Errors are the builder's: sticky, the first one named. */
	d = ck_ac_deployment("ns", "x");
	c = ck_ac_container("c", "\xff");
	ck_assert_int_eq(ck_ac_deployment_container(d, c), -1);
	ck_assert_int_eq(ck_ac_deployment_replicas(d, 1), -1);
	ck_assert_str_eq(ck_patch_error(d), "patch: image: value is not valid UTF-8");
	ck_patch_free(d);
	s = ck_ac_service("ns", "x");
	ck_assert_int_eq(ck_ac_service_selector(s, "app", NULL), -1);
	ck_assert_ptr_nonnull(ck_patch_error(s));
	ck_patch_free(s);
}
END_TEST

/* ---------------------------------------------------------------- against a server */

typedef struct fx {
	struct ev_loop *loop;
	fault_server_t *fs;
	ck_client_t *c;
} fx_t;

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

/* Runs fn(ud) on a worker thread while this thread runs the client's loop. */
typedef struct job {
	void (*fn)(void *ud);
	void *ud;
	atomic_int done;
} job_t;

static void *job_main(void *arg)
{
	job_t *j = arg;
	j->fn(j->ud);
	atomic_store(&j->done, 1);
	return NULL;
}

static void run_job(fx_t *f, void (*fn)(void *), void *ud)
{
	job_t j = {.fn = fn, .ud = ud};
	pthread_t th;
	pthread_create(&th, NULL, job_main, &j);
	until_t u = {.flag = &j.done, .deadline = ev_now(f->loop) + 20};
	ev_timer_init(&u.tick, until_cb, 0.005, 0.005);
	ev_timer_start(f->loop, &u.tick);
	ev_run(f->loop, 0);
	ev_timer_stop(f->loop, &u.tick);
	pthread_join(th, NULL);
	ck_assert_msg(atomic_load(&j.done), "timed out");
}

static void fx_init(fx_t *f)
{
	f->loop = ev_loop_new(EVFLAG_AUTO);
	f->fs = fs_new();
	f->c = fs_client_new(f->loop, f->fs->port, "tok", NULL);
}

static void fx_done(fx_t *f)
{
	ck_client_free(f->c);
	fs_free(f->fs);
	ev_loop_destroy(f->loop);
}

typedef struct calls {
	ck_client_t *c;
	const ck_obj_t *obj;
	const ck_patch_t *body;
	int rc[4];
	ck_op_result_t op[4];
	ck_result_t res[4];
} calls_t;

static void finalizer_calls(void *ud)
{
	calls_t *k = ud;
	k->rc[0] = ck_finalizer_add_sync(k->c, k->obj, "example.com/x", NULL, &k->res[0]);
	k->rc[1] = ck_finalizer_add_sync(k->c, k->obj, "example.com/a", NULL, &k->res[1]);
	k->rc[2] = ck_finalizer_remove_sync(k->c, k->obj, "example.com/a", NULL, &k->res[2]);
	k->rc[3] = ck_finalizer_remove_sync(k->c, k->obj, "example.com/none", NULL, &k->res[3]);
}

#define CM_JSON "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm\",\"namespace\":\"ns\"}}"

START_TEST(test_finalizers_sent)
{
	fx_t f;
	fx_init(&f);
	ck_obj_t *obj =
	    dec(&ck_type_configmap,
	        "{\"metadata\":{\"name\":\"cm\",\"namespace\":\"ns\",\"resourceVersion\":"
	        "\"7\",\"finalizers\":[\"example.com/a\",\"kubernetes\","
	        "\"example.com/a\"]}}");
	fs_push_simple(f.fs, 200, NULL, CM_JSON);
	fs_push_simple(f.fs, 409, NULL,
	               "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Conflict\","
	               "\"code\":409,\"message\":\"the object has been modified\"}");
	calls_t k = {.c = f.c, .obj = obj};
	run_job(&f, finalizer_calls, &k);
	ck_assert_msg(k.rc[0] == 0, "%s", k.res[0].error);
	ck_assert_int_eq(k.rc[1], 0); /* present: nothing sent */
	ck_assert_int_eq(k.res[1].http_code, 0);
	ck_assert_int_eq(k.rc[2], -1); /* the scripted conflict */
	ck_assert(ck_result_is_conflict(&k.res[2]));
	ck_assert_int_eq(k.rc[3], 0); /* absent: nothing sent */
	ck_assert_int_eq(k.res[3].http_code, 0);
	ck_assert_int_eq(fs_nrequests(f.fs), 2);
	const fs_request_t *rq = fs_request(f.fs, 0);
	ck_assert_str_eq(rq->method, "PATCH");
	ck_assert_str_eq(rq->target, "/api/v1/namespaces/ns/configmaps/cm");
	ck_assert_ptr_nonnull(strstr(rq->headers, "application/merge-patch+json"));
	ck_assert_str_eq(rq->body,
	                 "{\"metadata\":{\"finalizers\":[\"example.com/a\",\"kubernetes\","
	                 "\"example.com/a\",\"example.com/x\"],\"resourceVersion\":\"7\"}}");
	ck_assert_str_eq(
	    fs_request(f.fs, 1)->body,
	    "{\"metadata\":{\"finalizers\":[\"kubernetes\"],\"resourceVersion\":\"7\"}}");
	for (int i = 0; i < 4; i++)
		ck_result_clear(&k.res[i]);

	/* Refused before sending. */
	ck_result_t res = {0};
	ck_assert_int_eq(ck_finalizer_add_sync(f.c, obj, "", NULL, &res), -1);
	ck_assert_str_eq(res.error, "finalizer: empty finalizer name (not sent)");
	ck_result_clear(&res);
	ck_obj_unref(obj);
	fx_done(&f);
}
END_TEST

static void cou_calls(void *ud)
{
	calls_t *k = ud;
	for (int i = 0; i < 3; i++)
		k->rc[i] = ck_create_or_update_sync(k->c, k->body, NULL, &k->op[i], &k->res[i]);
	k->rc[3] = ck_create_or_patch_sync(k->c, k->body, NULL, true, &k->op[3], &k->res[3]);
}

/* The live Service as the server would answer: a second port added by someone else. */
#define SVC_LIVE(ports)                                                                            \
	"{\"kind\":\"Service\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"web\","              \
	"\"namespace\":"                                                                           \
	"\"ns\",\"resourceVersion\":\"5\",\"labels\":{\"keep\":\"me\"}},\"spec\":{"                \
	"\"ports\":" ports ",\"clusterIP\":\"10.0.0.1\"}}"
#define PORT80 "{\"name\":\"http\",\"protocol\":\"TCP\",\"port\":80,\"targetPort\":80}"
#define PORT81 "{\"name\":\"http2\",\"protocol\":\"TCP\",\"port\":81,\"targetPort\":81}"

START_TEST(test_create_or_update_sent)
{
	fx_t f;
	fx_init(&f);
	ck_patch_t *svc = ck_ac_service("ns", "web");
	ck_ac_service_port(svc, "http", 80, 0, NULL);
	/* 1: absent -> POST */
	fs_push_simple(f.fs, 404, NULL,
	               "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"NotFound\","
	               "\"code\":404}");
	fs_push_simple(f.fs, 201, NULL, SVC_LIVE("[" PORT80 "]"));
	/* 2: present, same (members in another order, 80 written 8e1) -> nothing */
	fs_push_simple(f.fs, 200, NULL,
	               SVC_LIVE("[{\"port\":8e1,\"targetPort\":80,\"name\":\"http\","
	                        "\"protocol\":\"TCP\"}]"));
	/* 3: drift -> PUT of the merged object */
	fs_push_simple(f.fs, 200, NULL, SVC_LIVE("[" PORT80 "," PORT81 "]"));
	fs_push_simple(f.fs, 200, NULL, SVC_LIVE("[" PORT80 "]"));
	/* 4: create-or-patch, drift -> merge PATCH with the resourceVersion */
	fs_push_simple(f.fs, 200, NULL, SVC_LIVE("[" PORT80 "," PORT81 "]"));
	fs_push_simple(f.fs, 200, NULL, SVC_LIVE("[" PORT80 "]"));
	calls_t k = {.c = f.c, .body = svc};
	run_job(&f, cou_calls, &k);
	for (int i = 0; i < 4; i++)
		ck_assert_msg(k.rc[i] == 0, "call %d: %s", i, k.res[i].error);
	ck_assert_int_eq(k.op[0], CK_OP_CREATED);
	ck_assert_int_eq(k.op[1], CK_OP_UNCHANGED);
	ck_assert_int_eq(k.op[2], CK_OP_UPDATED);
	ck_assert_int_eq(k.op[3], CK_OP_UPDATED);
	ck_assert_str_eq(ck_op_result_name(k.op[1]), "unchanged");
	ck_assert_int_eq(fs_nrequests(f.fs), 7);
	const char *path = "/api/v1/namespaces/ns/services/web";
	ck_assert_str_eq(fs_request(f.fs, 0)->method, "GET");
	ck_assert_str_eq(fs_request(f.fs, 0)->target, path);
	ck_assert_str_eq(fs_request(f.fs, 1)->method, "POST");
	ck_assert_str_eq(fs_request(f.fs, 1)->target, "/api/v1/namespaces/ns/services");
	ck_assert_str_eq(fs_request(f.fs, 2)->method, "GET");
	const fs_request_t *put = fs_request(f.fs, 4);
	ck_assert_str_eq(put->method, "PUT");
	ck_assert_str_eq(put->target, path);
	/* The live object with the list replaced whole: labels, clusterIP and the
	 * resourceVersion kept. */
	ck_assert_str_eq(put->body,
	                 "{\"kind\":\"Service\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
	                 "\"web\",\"namespace\":\"ns\",\"resourceVersion\":\"5\",\"labels\":{"
	                 "\"keep\":\"me\"}},\"spec\":{\"ports\":[" PORT80
	                 "],\"clusterIP\":\"10.0.0.1\"}}");
	const fs_request_t *patch = fs_request(f.fs, 6);
	ck_assert_str_eq(patch->method, "PATCH");
	ck_assert_ptr_nonnull(strstr(patch->headers, "application/merge-patch+json"));
	ck_assert_str_eq(
	    patch->body,
	    "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"web\","
	    "\"namespace\":\"ns\",\"resourceVersion\":\"5\"},\"spec\":{\"ports\":[" PORT80 "]}}");
	for (int i = 0; i < 4; i++)
		ck_result_clear(&k.res[i]);

	ck_result_t res = {0};
	ck_op_result_t op = CK_OP_UPDATED;
	ck_patch_free(svc);

	/* Refusals: a body without a kind, without a name. */
	ck_patch_t *plain = ck_patch_new();
	ck_assert_int_eq(ck_create_or_update_sync(f.c, plain, NULL, &op, &res), -1);
	ck_assert_int_eq(op, CK_OP_NONE);
	ck_assert_str_eq(
	    res.error, "create or update: the body was not made by ck_patch_new_object (not sent)");
	ck_result_clear(&res);
	ck_patch_free(plain);
	fx_done(&f);
}
END_TEST

static void forbidden_call(void *ud)
{
	calls_t *k = ud;
	k->rc[0] = ck_create_or_update_sync(k->c, k->body, NULL, &k->op[0], &k->res[0]);
}

START_TEST(test_create_or_update_get_fails)
{
	fx_t f;
	fx_init(&f);
	ck_patch_t *cm = ck_ac_configmap("ns", "cm");
	fs_push_simple(f.fs, 403, NULL,
	               "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Forbidden\","
	               "\"code\":403,\"message\":\"configmaps \\\"cm\\\" is forbidden\"}");
	calls_t k = {.c = f.c, .body = cm, .op = {CK_OP_UPDATED}};
	run_job(&f, forbidden_call, &k);
	ck_assert_int_eq(k.rc[0], -1);
	ck_assert_int_eq(k.op[0], CK_OP_NONE);
	ck_assert(ck_result_is_forbidden(&k.res[0]));
	ck_assert_int_eq(fs_nrequests(f.fs), 1);
	ck_result_clear(&k.res[0]);
	ck_patch_free(cm);
	fx_done(&f);
}
END_TEST

static void status_calls(void *ud)
{
	calls_t *k = ud;
	ck_patch_t *p = ck_patch_new();
	ck_patch_set_int(p, CK_PATH("status", "availableReplicas"), 1);
	ck_write_opts_t wo = {.field_manager = "m"};
	k->rc[0] =
	    ck_client_status_merge_patch_sync(k->c, &foo_type, "ns", "f", p, &wo, &k->res[0]);
	ck_patch_free(p);
	p = ck_patch_new_object(&foo_type, "ns", "f");
	ck_patch_set_int(p, CK_PATH("status", "availableReplicas"), 2);
	k->rc[1] = ck_client_status_apply_sync(k->c, p, "m", true, &k->res[1]);
	ck_patch_free(p);
}

START_TEST(test_status_subresource_sent)
{
	fx_t f;
	fx_init(&f);
	const char *foo = "{\"kind\":\"Foo\",\"metadata\":{\"name\":\"f\",\"namespace\":\"ns\"}}";
	fs_push_simple(f.fs, 200, NULL, foo);
	fs_push_simple(f.fs, 200, NULL, foo);
	calls_t k = {.c = f.c};
	run_job(&f, status_calls, &k);
	ck_assert_msg(k.rc[0] == 0, "%s", k.res[0].error);
	ck_assert_msg(k.rc[1] == 0, "%s", k.res[1].error);
	const char *base = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/f/status";
	const fs_request_t *rq = fs_request(f.fs, 0);
	ck_assert_str_eq(rq->method, "PATCH");
	char want[256];
	snprintf(want, sizeof(want), "%s?fieldManager=m", base);
	ck_assert_str_eq(rq->target, want);
	ck_assert_ptr_nonnull(strstr(rq->headers, "application/merge-patch+json"));
	ck_assert_str_eq(rq->body, "{\"status\":{\"availableReplicas\":1}}");
	rq = fs_request(f.fs, 1);
	snprintf(want, sizeof(want), "%s?fieldManager=m&force=true", base);
	ck_assert_str_eq(rq->target, want);
	ck_assert_ptr_nonnull(strstr(rq->headers, "application/apply-patch+yaml"));
	ck_assert_str_eq(k.res[1].obj->name, "f");
	ck_result_clear(&k.res[0]);
	ck_result_clear(&k.res[1]);
	fx_done(&f);
}
END_TEST

/* ---------------------------------------------------------------- on the fake */

static ck_json_doc_t *fake_get(ck_fake_t *f, const ck_type_t *t, const char *name)
{
	ck_json_doc_t *d = ck_fake_get(f, t, "ns", name);
	ck_assert_ptr_nonnull(d);
	return d;
}

START_TEST(test_on_the_fake)
{
	ck_fake_t *f = ck_fake_new(NULL);
	ck_fake_register(f, &foo_type);
	char *err = NULL;
	ck_assert_msg(ck_fake_add(f, &foo_type,
	                          "{\"metadata\":{\"name\":\"f1\",\"namespace\":\"ns\"},"
	                          "\"spec\":{\"replicas\":1}}",
	                          &err) == 0,
	              "%s", err);
	ck_fake_env_t *env = ck_fake_env_new(f, NULL, &err);
	ck_assert_msg(env != NULL, "%s", err);
	ck_client_t *c = ck_fake_env_client(env);
	ck_result_t r = {0};

	/* Finalizers: added, a stale add refused, removed. */
	ck_assert_int_eq(ck_client_get_sync(c, &foo_type, "ns", "f1", &r), 0);
	ck_obj_t *foo = r.obj;
	r.obj = NULL;
	ck_result_clear(&r);
	ck_assert_msg(ck_finalizer_add_sync(c, foo, "example.com/a", NULL, &r) == 0, "%s", r.error);
	ck_obj_t *cur = r.obj;
	r.obj = NULL;
	ck_result_clear(&r);
	ck_assert(ck_obj_has_finalizer(cur, "example.com/a"));
	ck_assert_int_eq(ck_finalizer_add_sync(c, foo, "example.com/b", NULL, &r), -1);
	ck_assert(ck_result_is_conflict(&r));
	ck_result_clear(&r);
	ck_assert_msg(ck_finalizer_remove_sync(c, cur, "example.com/a", NULL, &r) == 0, "%s",
	              r.error);
	ck_assert_uint_eq(r.obj->nfinalizers, 0);
	ck_result_clear(&r);

	/* Status: dropped from the main resource, taken by the subresource. */
	ck_patch_t *p = ck_patch_new();
	ck_patch_set_int(p, CK_PATH("status", "availableReplicas"), 1);
	ck_assert_int_eq(ck_client_merge_patch_sync(c, &foo_type, "ns", "f1", p, NULL, &r), 0);
	ck_result_clear(&r);
	ck_json_doc_t *d = fake_get(f, &foo_type, "f1");
	ck_assert_ptr_null(ck_json_get(ck_json_root(d), CK_PATH("status", "availableReplicas")));
	ck_json_doc_free(d);
	ck_assert_int_eq(ck_client_status_merge_patch_sync(c, &foo_type, "ns", "f1", p, NULL, &r),
	                 0);
	ck_result_clear(&r);
	ck_patch_free(p);
	d = fake_get(f, &foo_type, "f1");
	int64_t n = 0;
	ck_json_get_int64(ck_json_get(ck_json_root(d), CK_PATH("status", "availableReplicas")), &n);
	ck_assert_int_eq(n, 1);
	ck_json_doc_free(d);

	/* Create-or-update of a Service owned by the Foo: created, unchanged (no PUT),
	 * a port added by someone else taken away. */
	ck_patch_t *svc = ck_ac_service("ns", "web");
	ck_ac_service_port(svc, "http", 80, 0, NULL);
	ck_assert_msg(ck_patch_set_controller_reference(svc, cur, NULL, &err) == 0, "%s", err);
	ck_op_result_t op;
	ck_assert_msg(ck_create_or_update_sync(c, svc, NULL, &op, &r) == 0, "%s", r.error);
	ck_assert_int_eq(op, CK_OP_CREATED);
	ck_assert(ck_obj_is_controlled_by(r.obj, cur));
	ck_result_clear(&r);
	ck_assert_int_eq(ck_create_or_update_sync(c, svc, NULL, &op, &r), 0);
	ck_assert_int_eq(op, CK_OP_UNCHANGED);
	ck_assert_uint_eq(ck_fake_count(f, "update", "services"), 0);
	ck_patch_t *drift = ck_patch_new();
	const char *ports = "[" PORT80 ",{\"name\":\"x\",\"protocol\":\"TCP\",\"port\":81}]";
	ck_patch_set_raw(drift, CK_PATH("spec", "ports"), ports, strlen(ports));
	ck_assert_int_eq(
	    ck_client_merge_patch_sync(c, &ck_type_service, "ns", "web", drift, NULL, &r), 0);
	ck_result_clear(&r);
	ck_patch_free(drift);
	ck_assert_int_eq(ck_create_or_update_sync(c, svc, NULL, &op, &r), 0);
	ck_assert_int_eq(op, CK_OP_UPDATED);
	ck_result_clear(&r);
	ck_assert_uint_eq(ck_fake_count(f, "update", "services"), 1);
	d = fake_get(f, &ck_type_service, "web");
	ck_assert_uint_eq(ck_json_len(ck_json_get(ck_json_root(d), CK_PATH("spec", "ports"))), 1);
	ck_json_doc_free(d);
	ck_patch_free(svc);

	ck_obj_unref(cur);
	ck_obj_unref(foo);
	ck_fake_env_free(env);
	ck_fake_free(f);
}
END_TEST

Suite *suite_controllerutil(void)
{
	Suite *s = suite_create("controllerutil");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_controller_reference);
	tcase_add_test(tc, test_conditions);
	tcase_add_test(tc, test_applyconfig);
	tcase_add_test(tc, test_finalizers_sent);
	tcase_add_test(tc, test_create_or_update_sent);
	tcase_add_test(tc, test_create_or_update_get_fails);
	tcase_add_test(tc, test_status_subresource_sent);
	tcase_add_test(tc, test_on_the_fake);
	suite_add_tcase(s, tc);
	return s;
}
