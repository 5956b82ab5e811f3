/*
 * Unit tests for cmd/sample-controller/controller.c on the fake API server
 * (<ckube/fake.h>): the controller's informers, listers, client and event
 * recorder all run against one ck_fake_t, and each test asserts on what the fake
 * then stores and on its action log -- as k8s.io/sample-controller's
 * controller_test.go does with client-go's fake clientsets, whose cases come
 * first here (creates the Deployment, does nothing when in sync, updates the
 * Deployment on a replicas change, refuses a Deployment it does not control).
 * Faults are reactors: a 409 on the status write, a 422 on the Deployment.
 * The unit runner links controller.c (not the daemon's main.c) for this.
 */
#include "cmd/sample-controller/controller.h"

#include "cmd/sample-controller/foo_sync.h"
#include <ckube/decode.h>
#include <ckube/fake.h>
#include <ckube/json.h>
#include <ckube/record.h>
#include <ckube/types.h>

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FX_TIMEOUT_MS 10000
#define FX_MAX_KEYS   16

/* --- fixture: a fake, its env (loop thread, client, informers), the controller --- */

typedef struct fx {
	ck_clk_fake_t clk;
	ck_fake_t *fake;
	ck_fake_env_t *env;
	ck_record_t *rec;
	controller_t *ctl;
	/* What the handlers queued (loop thread), and the Deployment bodies sent. */
	pthread_mutex_t mu;
	char *keys[FX_MAX_KEYS];
	size_t nkeys;
	char *dep_body;     /* of the last create or update of a Deployment */
	char *initial_keys; /* what fx_start's initial lists queued, joined by "," */
} fx_t;

/* Records key, with " low" after it when queued at CK_WQ_PRIORITY_LOW. */
static void fx_enqueue(void *ud, const char *key, int priority)
{
	fx_t *f = ud;
	pthread_mutex_lock(&f->mu);
	if (f->nkeys < FX_MAX_KEYS)
		f->keys[f->nkeys++] =
		    ck_xasprintf("%s%s", key, priority == CK_WQ_PRIORITY_LOW ? " low" : "");
	pthread_mutex_unlock(&f->mu);
}

/* Keeps the body of every Deployment write; answers nothing (the fake does). */
static void fx_keep_dep_body(void *ud, const ck_fake_action_t *act, ck_fake_answer_t *out)
{
	fx_t *f = ud;
	pthread_mutex_lock(&f->mu);
	free(f->dep_body);
	f->dep_body = ck_xasprintf("%.*s", (int)act->body_len, act->body);
	pthread_mutex_unlock(&f->mu);
}

static void fx_new_controller(void *ud)
{
	fx_t *f = ud;
	controller_opts_t co = {.client = ck_fake_env_client(f->env),
	                        .factory = ck_fake_env_factory(f->env),
	                        .recorder = f->rec,
	                        .clock = &f->clk.base,
	                        .enqueue = fx_enqueue,
	                        .enqueue_ud = f};
	char *err = NULL;
	f->ctl = controller_new(&co, &err);
	ck_assert_msg(f->ctl != NULL, "controller_new: %s", err ? err : "?");
}

/* The fake, holding nothing yet, and its clock, fixed at 2026-11-18T11:06:40Z (the
 * lastTransitionTime every test expects). */
static void fx_fake(fx_t *f)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
	ck_clk_fake_init(&f->clk, 1, 1795000000LL * (int64_t)CK_NS_PER_SEC);
	f->fake = ck_fake_new(&(ck_fake_opts_t){.clock = &f->clk.base});
	ck_fake_register(f->fake, &foo_type);
	ck_fake_register(f->fake, &ck_type_deployment);
}

/* Starts the controller on what the fake holds; the action log and the queued keys
 * start empty (the informers' list and watch, the initial adds are not counted). */
static void fx_start(fx_t *f)
{
	char *err = NULL;
	f->env = ck_fake_env_new(f->fake, NULL, &err);
	ck_assert_msg(f->env != NULL, "env: %s", err ? err : "?");
	ck_assert_ptr_nonnull(ck_fake_env_informer(f->env, &foo_type, &err));
	ck_assert_ptr_nonnull(ck_fake_env_informer(f->env, &ck_type_deployment, &err));
	ck_record_opts_t ro = {.component = "sample-controller", .reporting_instance = "test"};
	f->rec = ck_record_new(ck_fake_env_client(f->env), &ro, &err);
	ck_assert_msg(f->rec != NULL, "record_new: %s", err ? err : "?");
	ck_fake_env_run(f->env, fx_new_controller, f);
	ck_assert_msg(ck_fake_env_start(f->env, FX_TIMEOUT_MS, &err) == 0, "start: %s", err);
	ck_assert_msg(ck_fake_env_settle(f->env, FX_TIMEOUT_MS, &err) == 0, "settle: %s", err);
	ck_fake_prepend_reactor(f->fake, "create", "deployments", fx_keep_dep_body, f);
	ck_fake_prepend_reactor(f->fake, "update", "deployments", fx_keep_dep_body, f);
	ck_fake_clear_actions(f->fake);
	ck_sbuf_t b = CK_SBUF_INIT;
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->nkeys; i++) {
		ck_sbuf_printf(&b, "%s%s", i ? "," : "", f->keys[i]);
		free(f->keys[i]);
	}
	f->nkeys = 0;
	pthread_mutex_unlock(&f->mu);
	f->initial_keys = ck_xstrdup(ck_sbuf_cstr(&b));
	ck_sbuf_free(&b);
}

static void fx_done(fx_t *f)
{
	ck_record_free(f->rec);
	ck_fake_env_free(f->env);
	controller_free(f->ctl);
	ck_fake_free(f->fake);
	for (size_t i = 0; i < f->nkeys; i++)
		free(f->keys[i]);
	free(f->dep_body);
	free(f->initial_keys);
	pthread_mutex_destroy(&f->mu);
}

/* Seeds the fake with json (a Foo or a Deployment, per t). */
static void fx_add(fx_t *f, const ck_type_t *t, const char *json)
{
	char *err = NULL;
	ck_assert_msg(ck_fake_add(f->fake, t, json, &err) == 0, "add: %s", err ? err : "?");
}

/* Someone else's edit of the stored object (a new spec: a new generation); the
 * listers see it before this returns. */
static void fx_put(fx_t *f, const ck_type_t *t, const char *json)
{
	char *err = NULL;
	ck_assert_msg(ck_fake_put(f->fake, t, json, &err) == 0, "put: %s", err ? err : "?");
	ck_assert_msg(ck_fake_env_settle(f->env, FX_TIMEOUT_MS, &err) == 0, "settle: %s", err);
}

/* The stored object as the controller would read it (its ck_type_t), or NULL. */
static ck_obj_t *fx_get(fx_t *f, const ck_type_t *t, const char *name)
{
	ck_json_doc_t *d = ck_fake_get(f->fake, t, "default", name);
	if (d == NULL)
		return NULL;
	char *text = ck_json_to_text(ck_json_root(d)), *err = NULL;
	ck_obj_t *o = ck_dec_object(t, text, strlen(text), &err);
	ck_assert_msg(o != NULL, "decode %s: %s", name, err ? err : "?");
	free(text);
	ck_json_doc_free(d);
	return o;
}

/* One sync of default/<name>, as a worker runs it; then the listers catch up with
 * its writes (the watch echo) and the recorder has written its events. Returns
 * controller_sync's result; *err (may be NULL) gets its error. */
static int fx_sync(fx_t *f, const char *name, char **err)
{
	char key[128], *e = NULL;
	snprintf(key, sizeof(key), "default/%s", name);
	int rc = controller_sync(f->ctl, key, &e);
	char *serr = NULL;
	ck_assert_msg(ck_fake_env_settle(f->env, FX_TIMEOUT_MS, &serr) == 0, "settle: %s", serr);
	ck_assert_int_eq(ck_record_flush(f->rec, FX_TIMEOUT_MS), 0);
	if (err)
		*err = e;
	else
		free(e);
	return rc;
}

/*
 * The writes the controller sent to Foos and Deployments since the last clear,
 * one "verb resource[/sub] ns/name" line each (the fake's action log without the
 * informers' list/watch -- as Go's filterInformerActions -- and without the
 * recorder's Events, counted by fx_events). A new string.
 */
static char *fx_writes(fx_t *f)
{
	char *log = ck_fake_actions(f->fake), *save = NULL;
	ck_sbuf_t b = CK_SBUF_INIT;
	for (char *l = strtok_r(log, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
		if (strncmp(l, "list ", 5) == 0 || strncmp(l, "watch ", 6) == 0 ||
		    strncmp(l, "get ", 4) == 0 || strstr(l, " events ") != NULL)
			continue;
		ck_sbuf_printf(&b, "%s\n", l);
	}
	free(log);
	char *s = ck_xstrdup(ck_sbuf_cstr(&b));
	ck_sbuf_free(&b);
	return s;
}

#define ck_assert_writes(f, want)                                                                  \
	do {                                                                                       \
		char *got_ = fx_writes(f);                                                         \
		ck_assert_msg(strcmp(got_, want) == 0, "writes:\n%s\nwant:\n%s", got_, want);      \
		free(got_);                                                                        \
	} while (0)

/* Events written since the last clear (a new one is a create, a repeat a patch). */
static size_t fx_events(fx_t *f)
{
	return ck_fake_count(f->fake, "create", "events") +
	       ck_fake_count(f->fake, "patch", "events");
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The "<type> <reason>" of the Events stored in default, sorted, joined by ",". A
 * new string. */
static char *fx_event_reasons(fx_t *f)
{
	ck_obj_t **items = NULL;
	size_t n = 0;
	ck_result_t r = {0};
	ck_assert_int_eq(ck_client_list_sync(ck_fake_env_client(f->env), &ck_type_event, "default",
	                                     NULL, &items, &n, NULL, &r),
	                 0);
	char **s = ck_xcalloc(n + 1, sizeof(*s));
	for (size_t i = 0; i < n; i++) {
		s[i] = ck_xasprintf("%s %s", ck_event_type(items[i]), ck_event_reason(items[i]));
		ck_obj_unref(items[i]);
	}
	qsort(s, n, sizeof(*s), cmp_str);
	ck_sbuf_t b = CK_SBUF_INIT;
	for (size_t i = 0; i < n; i++) {
		ck_sbuf_printf(&b, "%s%s", i ? "," : "", s[i]);
		free(s[i]);
	}
	free(s);
	free(items);
	ck_result_clear(&r);
	char *out = ck_xstrdup(ck_sbuf_cstr(&b));
	ck_sbuf_free(&b);
	return out;
}

#define ck_assert_events(f, want)                                                                  \
	do {                                                                                       \
		char *got_ = fx_event_reasons(f);                                                  \
		ck_assert_msg(strcmp(got_, want) == 0, "events: %s, want %s", got_, want);         \
		free(got_);                                                                        \
	} while (0)

/* --- objects, as upstream's newFoo and newDeployment --- */

/* A Foo default/<name> with deploymentName <name>-deployment; replicas < 0: unset. */
static char *foo_json(const char *name, int replicas)
{
	if (replicas < 0)
		return ck_xasprintf("{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\"},"
		                    "\"spec\":{\"deploymentName\":\"%s-deployment\"}}",
		                    name, name);
	return ck_xasprintf("{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\"},"
	                    "\"spec\":{\"deploymentName\":\"%s-deployment\",\"replicas\":%d}}",
	                    name, name, replicas);
}

static void add_foo(fx_t *f, const char *name, int replicas)
{
	char *j = foo_json(name, replicas);
	fx_add(f, &foo_type, j);
	free(j);
}

/*
 * Exactly the Deployment upstream's newDeployment(foo) makes -- the body of the
 * create and of the update (a whole object, no resourceVersion: an unconditional
 * PUT) -- for the stored Foo default/<name> with replicas (the uid is the fake's).
 * A new string.
 */
static char *want_deployment(fx_t *f, const char *name, int replicas)
{
	ck_obj_t *foo = fx_get(f, &foo_type, name);
	ck_assert_ptr_nonnull(foo);
	char *s = ck_xasprintf(
	    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":"
	    "\"%s-deployment\",\"namespace\":\"default\",\"labels\":{\"app\":\"nginx\","
	    "\"controller\":\"%s\"},\"ownerReferences\":[{\"apiVersion\":"
	    "\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\",\"name\":\"%s\",\"uid\":\"%s\","
	    "\"controller\":true,\"blockOwnerDeletion\":true}]},\"spec\":{\"replicas\":%d,"
	    "\"selector\":{\"matchLabels\":{\"app\":\"nginx\",\"controller\":\"%s\"}},"
	    "\"template\":{\"metadata\":{\"labels\":{\"app\":\"nginx\",\"controller\":\"%s\"}},"
	    "\"spec\":{\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx:latest\"}]}}}}",
	    name, name, name, foo->uid, replicas, name, name);
	ck_obj_unref(foo);
	return s;
}

/* The controller's own Deployment for Foo default/<name> (replicas, availableReplicas
 * in its status), stored as the server would hold it. */
static void add_own_deployment(fx_t *f, const char *name, int replicas, int available)
{
	char *d = want_deployment(f, name, replicas);
	char *j = ck_xasprintf("%.*s,\"status\":{\"observedGeneration\":1,\"replicas\":%d,"
	                       "\"availableReplicas\":%d}}",
	                       (int)strlen(d) - 1, d, replicas, available);
	fx_add(f, &ck_type_deployment, j);
	free(j);
	free(d);
}

static void assert_dep_body(fx_t *f, const char *want)
{
	pthread_mutex_lock(&f->mu);
	ck_assert_ptr_nonnull(f->dep_body);
	ck_assert_msg(strcmp(f->dep_body, want) == 0, "body:\n%s\nwant:\n%s", f->dep_body, want);
	pthread_mutex_unlock(&f->mu);
}

/* The stored Foo's status: availableReplicas, observedGeneration and its Ready
 * condition (status, reason, message; observedGeneration the Foo's). */
static void assert_status(fx_t *f, const char *name, int64_t avail, int64_t gen, const char *ready,
                          const char *reason, const char *message)
{
	ck_obj_t *foo = fx_get(f, &foo_type, name);
	ck_assert_ptr_nonnull(foo);
	int64_t a = -1, g = -1;
	ck_assert(foo_status_available_replicas(foo, &a));
	ck_assert(foo_status_observed_generation(foo, &g));
	ck_assert_int_eq(a, avail);
	ck_assert_int_eq(g, gen);
	ck_assert_int_eq(foo->generation, gen);
	foo_condition_t c;
	ck_assert_msg(foo_condition_get(foo, "Ready", &c), "no Ready condition");
	ck_assert_str_eq(c.status, ready);
	ck_assert_str_eq(c.reason, reason);
	ck_assert_msg(strstr(c.message, message) != NULL, "message: %s", c.message);
	ck_assert_int_eq(c.observed_generation, gen);
	char ltt[32];
	ck_time_format_rfc3339(1795000000LL * (int64_t)CK_NS_PER_SEC, ltt);
	ck_assert_str_eq(c.last_transition_time, ltt);
	ck_obj_unref(foo);
}

/* ---- upstream's controller_test.go ---- */

/* TestCreatesDeployment: a Foo without its Deployment: one create of exactly
 * newDeployment(foo), then the status (0 of 1 available: not Ready yet). */
START_TEST(test_creates_deployment)
{
	fx_t f;
	fx_fake(&f);
	add_foo(&f, "test", 1);
	fx_start(&f);

	ck_assert_int_eq(fx_sync(&f, "test", NULL), 0);
	ck_assert_writes(&f, "create deployments default/-\n"
	                     "update foos/status default/test\n");
	char *want = want_deployment(&f, "test", 1);
	assert_dep_body(&f, want);
	free(want);
	ck_obj_t *foo = fx_get(&f, &foo_type, "test"),
	         *dep = fx_get(&f, &ck_type_deployment, "test-deployment");
	ck_assert_ptr_nonnull(dep);
	ck_assert(ck_obj_is_controlled_by(dep, foo));
	int32_t r = 0;
	ck_assert(ck_deployment_spec_replicas(dep, &r));
	ck_assert_int_eq(r, 1);
	ck_obj_unref(dep);
	ck_obj_unref(foo);
	assert_status(&f, "test", 0, 1, "False", "DeploymentProgressing", "0/1 replicas available");
	ck_assert_uint_eq(fx_events(&f), 1);
	ck_assert_events(&f, "Normal Synced");
	fx_done(&f);
}
END_TEST

/* TestDoNothing: the Foo and its Deployment agree. Upstream writes the status
 * every time; we write it once (it was absent), then nothing at all: no request,
 * no event, no new resourceVersion. */
START_TEST(test_do_nothing)
{
	fx_t f;
	fx_fake(&f);
	add_foo(&f, "test", 1);
	add_own_deployment(&f, "test", 1, 1);
	fx_start(&f);

	ck_assert_int_eq(fx_sync(&f, "test", NULL), 0);
	ck_assert_writes(&f, "update foos/status default/test\n");
	assert_status(&f, "test", 1, 1, "True", "DeploymentAvailable", "1/1 replicas available");
	ck_assert_uint_eq(fx_events(&f), 1);

	ck_fake_clear_actions(f.fake);
	uint64_t rv = ck_fake_resource_version(f.fake);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(fx_sync(&f, "test", NULL), 0);
		ck_assert_writes(&f, "");
		ck_assert_uint_eq(fx_events(&f), 0);
	}
	ck_assert_uint_eq(ck_fake_resource_version(f.fake), rv);
	ck_assert_events(&f, "Normal Synced");
	fx_done(&f);
}
END_TEST

/* TestUpdateDeployment: spec.replicas 1 -> 2: the Deployment is replaced by
 * newDeployment(foo) (a whole object, unconditionally), then the status. */
START_TEST(test_update_deployment)
{
	fx_t f;
	fx_fake(&f);
	add_foo(&f, "test", 1);
	add_own_deployment(&f, "test", 1, 1);
	fx_start(&f);
	char *j = foo_json("test", 2);
	fx_put(&f, &foo_type, j); /* generation 2 */
	free(j);
	ck_fake_clear_actions(f.fake);

	ck_assert_int_eq(fx_sync(&f, "test", NULL), 0);
	ck_assert_writes(&f, "update deployments default/test-deployment\n"
	                     "update foos/status default/test\n");
	char *want = want_deployment(&f, "test", 2);
	assert_dep_body(&f, want);
	free(want);
	ck_obj_t *dep = fx_get(&f, &ck_type_deployment, "test-deployment");
	int32_t r = 0;
	ck_assert(ck_deployment_spec_replicas(dep, &r));
	ck_assert_int_eq(r, 2);
	ck_assert_int_eq(dep->generation, 2);
	ck_obj_unref(dep);
	/* The Deployment's controller has not seen generation 2 yet: not Ready. */
	assert_status(&f, "test", 1, 2, "False", "DeploymentProgressing", "1/2 replicas available");
	ck_assert_events(&f, "Normal Synced");
	fx_done(&f);
}
END_TEST

/* TestNotControlledByUs: a Deployment of that name that is not the Foo's (no owner,
 * or another Foo's): left alone, the sync fails, the Foo says why (Ready=False) and
 * a Warning event too. */
START_TEST(test_not_controlled_by_us)
{
	static const char *const owners[] = {
	    "",
	    ",\"ownerReferences\":[{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\","
	    "\"kind\":\"Foo\",\"name\":\"test\",\"uid\":\"another-foo\",\"controller\":true}]",
	    /* Our Foo's uid (%s) under another kind: forged, not ours either. */
	    ",\"ownerReferences\":[{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\","
	    "\"kind\":\"Bar\",\"name\":\"test\",\"uid\":\"%s\",\"controller\":true}]",
	};
	for (size_t k = 0; k < sizeof(owners) / sizeof(owners[0]); k++) {
		fx_t f;
		fx_fake(&f);
		add_foo(&f, "test", 1);
		ck_obj_t *foo = fx_get(&f, &foo_type, "test");
		char *o = ck_xasprintf(owners[k], foo->uid);
		ck_obj_unref(foo);
		char *d = ck_xasprintf(
		    "{\"metadata\":{\"name\":\"test-deployment\",\"namespace\":\"default\"%s},"
		    "\"spec\":{\"replicas\":3}}",
		    o);
		free(o);
		fx_add(&f, &ck_type_deployment, d);
		free(d);
		fx_start(&f);
		ck_obj_t *before = fx_get(&f, &ck_type_deployment, "test-deployment");

		char *err = NULL;
		ck_assert_int_eq(fx_sync(&f, "test", &err), -1);
		ck_assert_str_eq(
		    err, "Resource \"test-deployment\" already exists and is not managed by Foo");
		free(err);
		ck_assert_writes(&f, "update foos/status default/test\n");
		ck_obj_t *dep = fx_get(&f, &ck_type_deployment, "test-deployment");
		ck_assert_str_eq(dep->rv, before->rv);
		ck_obj_unref(before);
		int32_t r = 0;
		ck_assert(ck_deployment_spec_replicas(dep, &r));
		ck_assert_int_eq(r, 3);
		ck_obj_unref(dep);
		assert_status(&f, "test", 0, 1, "False", "ErrResourceExists",
		              "\"test-deployment\" already exists and is not managed by Foo");
		ck_assert_events(&f, "Warning ErrResourceExists");
		fx_done(&f);
	}
}
END_TEST

/* A Foo being deleted (a finalizer holds it) or gone: nothing is written (the
 * garbage collector deletes its Deployment, through the ownerReference). */
START_TEST(test_deleted_foo_left_alone)
{
	fx_t f;
	fx_fake(&f);
	fx_add(&f, &foo_type,
	       "{\"metadata\":{\"name\":\"test\",\"namespace\":\"default\",\"finalizers\":"
	       "[\"example.com/hold\"]},\"spec\":{\"deploymentName\":\"test-deployment\","
	       "\"replicas\":1}}");
	fx_start(&f);
	char *err = NULL;
	ck_assert_int_eq(ck_fake_delete(f.fake, &foo_type, "default", "test", &err), 0);
	ck_assert_msg(ck_fake_env_settle(f.env, FX_TIMEOUT_MS, &err) == 0, "settle: %s", err);
	ck_obj_t *foo = fx_get(&f, &foo_type, "test");
	ck_assert_ptr_nonnull(foo->deletion_timestamp);
	ck_obj_unref(foo);
	ck_fake_clear_actions(f.fake);

	ck_assert_int_eq(fx_sync(&f, "test", NULL), 0);
	ck_assert_writes(&f, "");
	ck_assert_uint_eq(ck_fake_len(f.fake, &ck_type_deployment, NULL), 0);

	/* The finalizer removed, the Foo goes; its key still syncs, to nothing. */
	fx_put(&f, &foo_type,
	       "{\"metadata\":{\"name\":\"test\",\"namespace\":\"default\"},\"spec\":{"
	       "\"deploymentName\":\"test-deployment\",\"replicas\":1}}");
	ck_assert_ptr_null(ck_fake_get(f.fake, &foo_type, "default", "test"));
	ck_fake_clear_actions(f.fake);
	ck_assert_int_eq(fx_sync(&f, "test", NULL), 0);
	ck_assert_writes(&f, "");
	ck_assert_uint_eq(fx_events(&f), 0);
	fx_done(&f);
}
END_TEST

/* ---- the handlers: a Deployment change queues the Foo that controls it ---- */

/* The keys queued since fx_start, joined by ","; a new string. */
static char *fx_keys(fx_t *f)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->nkeys; i++)
		ck_sbuf_printf(&b, "%s%s", i ? "," : "", f->keys[i]);
	pthread_mutex_unlock(&f->mu);
	char *s = ck_xstrdup(ck_sbuf_cstr(&b));
	ck_sbuf_free(&b);
	return s;
}

#define ck_assert_keys(f, want)                                                                    \
	do {                                                                                       \
		char *got_ = fx_keys(f);                                                           \
		ck_assert_msg(strcmp(got_, want) == 0, "queued: \"%s\", want \"%s\"", got_, want); \
		free(got_);                                                                        \
	} while (0)

/* A Deployment default/<name> whose controller reference is apiVersion/kind/owner. */
static void add_owned(fx_t *f, const char *name, const char *api_version, const char *owner)
{
	char *j = ck_xasprintf(
	    "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"ownerReferences\":"
	    "[{\"apiVersion\":\"%s\",\"kind\":\"Foo\",\"name\":\"%s\",\"uid\":\"u-%s\","
	    "\"controller\":true}]},\"spec\":{\"replicas\":1}}",
	    name, api_version, owner, owner);
	fx_add(f, &ck_type_deployment, j);
	free(j);
	char *err = NULL;
	ck_assert_msg(ck_fake_env_settle(f->env, FX_TIMEOUT_MS, &err) == 0, "settle: %s", err);
}

/*
 * Upstream's handleObject: the Foo named by a Deployment's controller reference is
 * queued when it exists. The reference must name our kind: API group and kind
 * (samplecontroller.k8s.io Foo, any version), not the kind's name alone -- a Foo of
 * another API group is not ours, whatever its name.
 */
START_TEST(test_deployment_queues_its_foo)
{
	fx_t f;
	fx_fake(&f);
	add_foo(&f, "test", 1);
	fx_start(&f);

	add_owned(&f, "other-group", "other.example.com/v1", "test");
	ck_assert_keys(&f, "");
	add_owned(&f, "orphan", "samplecontroller.k8s.io/v1alpha1", "gone");
	ck_assert_keys(&f, "");
	add_owned(&f, "ours", "samplecontroller.k8s.io/v1alpha1", "test");
	ck_assert_keys(&f, "default/test");
	/* Another version of the same group is the same kind. */
	add_owned(&f, "ours-v1", "samplecontroller.k8s.io/v1", "test");
	ck_assert_keys(&f, "default/test,default/test");
	/* Its deletion too (the last state the informer had). */
	char *err = NULL;
	ck_assert_int_eq(ck_fake_delete(f.fake, &ck_type_deployment, "default", "ours", &err), 0);
	ck_assert_msg(ck_fake_env_settle(f.env, FX_TIMEOUT_MS, &err) == 0, "settle: %s", err);
	ck_assert_keys(&f, "default/test,default/test,default/test");
	fx_done(&f);
}
END_TEST

/*
 * Priorities (the daemon's priority queue): the Foos of the initial list, and
 * those the initial list's Deployments point at, are queued low; a Foo created or
 * changed since, or the Foo of a Deployment changed since, at the default priority.
 */
START_TEST(test_initial_list_queued_low)
{
	fx_t f;
	fx_fake(&f);
	add_foo(&f, "a", 1);
	fx_add(&f, &ck_type_deployment,
	       "{\"metadata\":{\"name\":\"web\",\"namespace\":\"default\",\"ownerReferences\":"
	       "[{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\","
	       "\"name\":\"a\",\"uid\":\"u-a\",\"controller\":true}]},\"spec\":{\"replicas\":1}}");
	fx_start(&f);
	/* The Foo's initial add, and the Deployment's when its informer saw the Foo in
	 * the Foo lister already (the two informers list in either order): all low. */
	ck_assert_msg(strcmp(f.initial_keys, "default/a low") == 0 ||
	                  strcmp(f.initial_keys, "default/a low,default/a low") == 0,
	              "initial keys: %s", f.initial_keys);
	add_foo(&f, "b", 1);
	char *err = NULL;
	ck_assert_msg(ck_fake_env_settle(f.env, FX_TIMEOUT_MS, &err) == 0, "settle: %s", err);
	ck_assert_keys(&f, "default/b");
	add_owned(&f, "web2", "samplecontroller.k8s.io/v1alpha1", "a");
	ck_assert_keys(&f, "default/b,default/a");
	fx_done(&f);
}
END_TEST

/* ---- what we add to upstream: unfixable Foos, said once per change ---- */

/* A reactor answering its request once with the code, reason and message of a
 * fault_t, then passing requests on. */
typedef struct fault {
	int code;
	const char *reason, *message;
	int left; /* answers still to give */
} fault_t;

static void fault_react(void *ud, const ck_fake_action_t *act, ck_fake_answer_t *out)
{
	fault_t *ft = ud;
	if (ft->left <= 0)
		return;
	ft->left--;
	out->code = ft->code;
	out->reason = ft->reason;
	out->message = ft->message;
}

/*
 * An invalid Foo costs one status write and one Warning event per change, and
 * nothing on the syncs (resyncs, the watch echo of our own write) that follow. A
 * failed status write (409: a stale cache) records no event: the retry does.
 */
START_TEST(test_invalid_spec_event_only_when_status_written)
{
	static const struct {
		const char *name;
		const char *spec; /* generation 1, then generation 2 */
		const char *spec2;
	} cases[] = {
	    {"bad", "{\"deploymentName\":\"Web\",\"replicas\":2}",
	     "{\"deploymentName\":\"web\",\"replicas\":11}"},
	    /* Upstream logs and does not requeue; we add a status and one event. */
	    {"noname", "{\"replicas\":2}", "{\"replicas\":3}"},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const char *name = cases[k].name;
		fx_t f;
		fx_fake(&f);
		char *j = ck_xasprintf(
		    "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\"},\"spec\":%s}", name,
		    cases[k].spec);
		fx_add(&f, &foo_type, j);
		free(j);
		fx_start(&f);
		fault_t conflict = {409, "Conflict", "the object has been modified", 1};
		ck_fake_prepend_reactor(f.fake, "update", "foos/status", fault_react, &conflict);

		char *err = NULL;
		ck_assert_int_eq(fx_sync(&f, name, &err), -1);
		ck_assert_msg(err && strstr(err, "the object has been modified"), "%s", err);
		free(err);
		ck_assert_uint_eq(ck_fake_count(f.fake, "update", "foos/status"), 1);
		ck_assert_uint_eq(fx_events(&f), 0);

		/* The retry writes the status, and records the event with it. */
		ck_assert_int_eq(fx_sync(&f, name, NULL), 0);
		ck_assert_uint_eq(ck_fake_count(f.fake, "update", "foos/status"), 2);
		ck_assert_uint_eq(fx_events(&f), 1);
		ck_assert_events(&f, "Warning InvalidSpec");
		assert_status(&f, name, 0, 1, "False", "InvalidSpec", "deploymentName");

		/* The listers have the written status: nothing more is written. */
		for (int i = 0; i < 3; i++) {
			ck_assert_int_eq(fx_sync(&f, name, NULL), 0);
			ck_assert_uint_eq(ck_fake_count(f.fake, "update", "foos/status"), 2);
			ck_assert_msg(fx_events(&f) == 1, "%s: sync %d recorded an event again",
			              name, i);
		}

		/* A new generation, still invalid: one write, one event. */
		j = ck_xasprintf("{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\"},"
		                 "\"spec\":%s}",
		                 name, cases[k].spec2);
		fx_put(&f, &foo_type, j);
		free(j);
		ck_assert_int_eq(fx_sync(&f, name, NULL), 0);
		ck_assert_uint_eq(ck_fake_count(f.fake, "update", "foos/status"), 3);
		ck_assert_uint_eq(fx_events(&f), 2);
		ck_assert_int_eq(fx_sync(&f, name, NULL), 0);
		ck_assert_uint_eq(ck_fake_count(f.fake, "update", "foos/status"), 3);
		ck_assert_uint_eq(fx_events(&f), 2);
		/* Nothing but the status was ever written. */
		ck_assert_uint_eq(ck_fake_count(f.fake, "create", "deployments"), 0);
		ck_assert_uint_eq(ck_fake_len(f.fake, &ck_type_deployment, NULL), 0);
		fx_done(&f);
	}
}
END_TEST

/*
 * Refusals that retrying cannot fix are said on the Foo and not retried: a name
 * too long for the Deployment's "controller" label (checked before any request),
 * and a Deployment the API server refuses as invalid (422), on create and update.
 */
START_TEST(test_unfixable_refusals_reported_not_retried)
{
	/* 1. A 64-character name: one status write (InvalidName), one Warning, no create. */
	char name[65];
	memset(name, 'n', 64);
	name[64] = '\0';
	fx_t f;
	fx_fake(&f);
	add_foo(&f, name, 1);
	fx_start(&f);
	ck_assert_int_eq(fx_sync(&f, name, NULL), 0);
	char want[160];
	snprintf(want, sizeof(want), "update foos/status default/%s\n", name);
	ck_assert_writes(&f, want);
	assert_status(&f, name, 0, 1, "False", "InvalidName", "64 characters, at most 63");
	ck_assert_events(&f, "Warning InvalidName");
	fx_done(&f);

	/* 2. The create answered 422: the server's message on the Foo, sync done. */
	fx_fake(&f);
	add_foo(&f, "ok", 1);
	fx_start(&f);
	fault_t invalid = {422, "Invalid",
	                   "Deployment.apps \"ok-deployment\" is invalid: spec.template: refused "
	                   "by a test",
	                   1};
	ck_fake_prepend_reactor(f.fake, "create", "deployments", fault_react, &invalid);
	ck_assert_int_eq(fx_sync(&f, "ok", NULL), 0);
	ck_assert_writes(&f, "create deployments default/-\n"
	                     "update foos/status default/ok\n");
	ck_assert_uint_eq(ck_fake_len(f.fake, &ck_type_deployment, NULL), 0);
	assert_status(&f, "ok", 0, 1, "False", "DeploymentInvalid", "refused by a test");
	ck_assert_events(&f, "Warning DeploymentInvalid");
	fx_done(&f);

	/* 3. The same on the update path: the Foo's Deployment has 1 replica, the Foo
	 * asks for 2, the PUT is answered 422. */
	fx_fake(&f);
	add_foo(&f, "up", 2);
	add_own_deployment(&f, "up", 1, 1);
	fx_start(&f);
	fault_t invalid2 = {422, "Invalid",
	                    "Deployment.apps \"up-deployment\" is invalid: refused on update", 1};
	ck_fake_prepend_reactor(f.fake, "update", "deployments", fault_react, &invalid2);
	ck_assert_int_eq(fx_sync(&f, "up", NULL), 0);
	ck_assert_writes(&f, "update deployments default/up-deployment\n"
	                     "update foos/status default/up\n");
	assert_status(&f, "up", 0, 1, "False", "DeploymentInvalid", "refused on update");
	ck_assert_events(&f, "Warning DeploymentInvalid");
	fx_done(&f);
}
END_TEST

Suite *suite_controller(void)
{
	Suite *s = suite_create("controller");
	TCase *tc = tcase_create("upstream");
	tcase_add_test(tc, test_creates_deployment);
	tcase_add_test(tc, test_do_nothing);
	tcase_add_test(tc, test_update_deployment);
	tcase_add_test(tc, test_not_controlled_by_us);
	tcase_add_test(tc, test_deleted_foo_left_alone);
	tcase_add_test(tc, test_deployment_queues_its_foo);
	tcase_add_test(tc, test_initial_list_queued_low);
	suite_add_tcase(s, tc);
	tc = tcase_create("unfixable");
	tcase_add_test(tc, test_invalid_spec_event_only_when_status_written);
	tcase_add_test(tc, test_unfixable_refusals_reported_not_retried);
	suite_add_tcase(s, tc);
	return s;
}
