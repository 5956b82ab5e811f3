/*
 * Unit tests for cmd/sample-controller/controller.c: sync() against fake informers
 * (pkg/cache/fake.h), a scripted API server for its writes (fault_server.h) and a
 * fake event sink, so that what a sync writes -- status PUTs, Events -- is counted
 * exactly.
 * The unit runner links controller.c (not the daemon's main.c) for this.
 */
#include "cmd/sample-controller/controller.h"

#include "cmd/sample-controller/foo_sync.h"
#include <ckube/record.h>
#include <ckube/types.h>

#include "pkg/cache/internal.h" /* cache_informer_drain: the test drives the informers */
#include "tests/unit/fault_server.h"
#include <ckube/cache_fake.h>
#include <ckube/decode.h>

#include <check.h>
#include <ev.h>

/* --- the event sink: counts what would reach the API server --- */

typedef struct sink {
	pthread_mutex_t mu;
	int calls;
	char *first_body; /* of the first create */
} sink_t;

static ck_record_sink_result_t sink_create(void *ud, const char *ns, const char *body, char **err)
{
	sink_t *s = ud;
	pthread_mutex_lock(&s->mu);
	s->calls++;
	if (s->first_body == NULL)
		s->first_body = ck_xstrdup(body);
	pthread_mutex_unlock(&s->mu);
	return CK_RECORD_SINK_OK;
}

static ck_record_sink_result_t sink_patch(void *ud, const char *ns, const char *name,
                                          const char *body, char **err)
{
	sink_t *s = ud;
	pthread_mutex_lock(&s->mu);
	s->calls++;
	pthread_mutex_unlock(&s->mu);
	return CK_RECORD_SINK_OK;
}

/* --- fixture: one loop (run by the test thread), fake informers, a client --- */

typedef struct fx {
	struct ev_loop *loop;
	fault_server_t *fs;
	ck_client_t *client;
	ck_cache_fake_lw_t *foos, *deps;
	ck_cache_factory_t *factory;
	sink_t sink;
	ck_record_sink_t rsink;
	ck_record_t *rec;
	controller_t *ctl;
} fx_t;

static ck_cache_lw_t *fx_lw_new(void *ud, const ck_type_t *t, const char *ns)
{
	fx_t *f = ud;
	return ck_cache_fake_lw_source(t == &foo_type ? f->foos : f->deps);
}

static ck_obj_t *foo_from(const char *json)
{
	char *err = NULL;
	ck_obj_t *o = ck_dec_object(&foo_type, json, strlen(json), &err);
	ck_assert_msg(o != NULL, "decode: %s", err ? err : "?");
	return o;
}

/* Starts everything with the Foos (taken) in the cache and no Deployment. */
static void fx_init(fx_t *f, ck_obj_t **foos, size_t n)
{
	memset(f, 0, sizeof(*f));
	f->loop = ev_loop_new(EVFLAG_AUTO);
	f->fs = fs_new();
	f->client = fs_client_new(f->loop, f->fs->port, "t", NULL);
	f->foos = ck_cache_fake_lw_new();
	f->deps = ck_cache_fake_lw_new();
	ck_cache_factory_opts_t fo = {.lw_new = fx_lw_new, .lw_ud = f};
	f->factory = ck_cache_factory_new(f->loop, NULL, &fo);
	pthread_mutex_init(&f->sink.mu, NULL);
	f->rsink = (ck_record_sink_t){sink_create, sink_patch, &f->sink};
	ck_record_opts_t ro = {
	    .component = "sample-controller", .reporting_instance = "test", .sink = &f->rsink};
	char *err = NULL;
	f->rec = ck_record_new(NULL, &ro, &err);
	ck_assert_msg(f->rec != NULL, "record_new: %s", err ? err : "?");
	controller_opts_t co = {.client = f->client, .factory = f->factory, .recorder = f->rec};
	f->ctl = controller_new(&co, &err);
	ck_assert_msg(f->ctl != NULL, "controller_new: %s", err ? err : "?");
	ck_assert_int_eq(ck_cache_factory_start(f->factory, &err), 0);

	ck_cache_fake_req_t *l = ck_cache_fake_lw_last(f->foos, false);
	for (size_t i = 0; i < n; i++)
		ck_cache_fake_req_item(l, foos[i]);
	ck_cache_fake_req_meta(l, "100", NULL);
	ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
	l = ck_cache_fake_lw_last(f->deps, false);
	ck_cache_fake_req_meta(l, "100", NULL);
	ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
	cache_informer_drain(ck_cache_factory_informer(f->factory, &foo_type));
	cache_informer_drain(ck_cache_factory_informer(f->factory, &ck_type_deployment));
}

static void fx_done(fx_t *f)
{
	controller_free(f->ctl);
	ck_record_free(f->rec);
	ck_cache_factory_free(f->factory);
	ck_client_free(f->client);
	ck_cache_fake_lw_free(f->foos);
	ck_cache_fake_lw_free(f->deps);
	fs_free(f->fs);
	ev_loop_destroy(f->loop);
	free(f->sink.first_body);
	pthread_mutex_destroy(&f->sink.mu);
}

/* Events that reached the sink, once the recorder handled all queued. */
static int fx_events(fx_t *f)
{
	ck_assert_int_eq(ck_record_flush(f->rec, 10000), 0);
	pthread_mutex_lock(&f->sink.mu);
	int n = f->sink.calls;
	pthread_mutex_unlock(&f->sink.mu);
	return n;
}

/* The watch brings the Foo (taken) as the server now has it. */
static void fx_watch_modified(fx_t *f, ck_obj_t *foo)
{
	ck_cache_fake_req_t *w = ck_cache_fake_lw_last(f->foos, true);
	ck_assert_ptr_nonnull(w);
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, foo);
	cache_informer_drain(ck_cache_factory_informer(f->factory, &foo_type));
}

/* --- sync on a worker thread while the test thread runs the loop --- */

typedef struct tc_sync {
	controller_t *c;
	const char *key;
	int rc;
	char *err;
	atomic_int done;
} tc_sync_t;

static void *tc_sync_main(void *arg)
{
	tc_sync_t *s = arg;
	s->rc = controller_sync(s->c, s->key, &s->err);
	atomic_store(&s->done, 1);
	return NULL;
}

typedef struct tc_until {
	ev_timer tick;
	atomic_int *flag;
	double deadline;
} tc_until_t;

static void tc_until_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	tc_until_t *u = (tc_until_t *)w;
	if (atomic_load(u->flag) || ev_now(loop) > u->deadline)
		ev_break(loop, EVBREAK_ONE);
}

/* Returns controller_sync's result; *err (may be NULL) gets its error. */
static int fx_sync(fx_t *f, const char *key, char **err)
{
	tc_sync_t s = {.c = f->ctl, .key = key};
	pthread_t th;
	pthread_create(&th, NULL, tc_sync_main, &s);
	tc_until_t u = {.flag = &s.done, .deadline = ev_now(f->loop) + 20};
	ev_timer_init(&u.tick, tc_until_cb, 0.002, 0.002);
	ev_timer_start(f->loop, &u.tick);
	ev_run(f->loop, 0);
	ev_timer_stop(f->loop, &u.tick);
	ck_assert_msg(atomic_load(&s.done), "sync did not finish");
	pthread_join(th, NULL);
	if (err)
		*err = s.err;
	else
		free(s.err);
	return s.rc;
}

/* The Foo as the server stores it after the status PUT i: meta_spec plus its status. */
static ck_obj_t *server_foo(fx_t *f, int i, const char *meta_spec)
{
	const fs_request_t *rq = fs_request(f->fs, i);
	ck_assert_ptr_nonnull(rq);
	ck_assert_str_eq(rq->method, "PUT");
	ck_assert_ptr_nonnull(strstr(rq->target, "/namespaces/ns1/foos/"));
	ck_assert_ptr_nonnull(strstr(rq->target, "/status"));
	const char *st = strstr(rq->body, "\"status\":{");
	ck_assert_ptr_nonnull(st);
	char *json = ck_xasprintf("{%s,%.*s}", meta_spec, (int)(strlen(st) - 1), st);
	ck_obj_t *o = foo_from(json);
	free(json);
	return o;
}

/* The metadata and spec members of Foo ns1/<name>; a new string, free with free(). */
static char *meta_spec(const char *name, const char *rv, int gen, const char *spec)
{
	return ck_xasprintf("\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns1\",\"uid\":\"u1\","
	                    "\"resourceVersion\":\"%s\",\"generation\":%d},\"spec\":%s",
	                    name, rv, gen, spec);
}

static const char *ANY_FOO =
    "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\","
    "\"metadata\":{\"name\":\"x\",\"namespace\":\"ns1\"}}";

/*
 * An invalid Foo costs one status write and one Warning event per change, and
 * nothing on the syncs (resyncs, the watch echo of our own write) that follow.
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
		char key[64];
		snprintf(key, sizeof(key), "ns1/%s", name);
		char *ms1 = meta_spec(name, "1", 1, cases[k].spec);
		char *json = ck_xasprintf("{%s}", ms1);
		ck_obj_t *foo = foo_from(json);
		free(json);
		fx_t f;
		fx_init(&f, &foo, 1);

		/* The write fails (a stale cache): no event, retried. */
		fs_push_simple(
		    f.fs, 409, NULL,
		    "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Conflict\","
		    "\"message\":\"the object has been modified\",\"code\":409}");
		char *err = NULL;
		ck_assert_int_eq(fx_sync(&f, key, &err), -1);
		ck_assert_ptr_nonnull(err);
		free(err);
		ck_assert_int_eq(fs_nrequests(f.fs), 1);
		ck_assert_int_eq(fx_events(&f), 0);

		/* The retry writes the status, and records the event with it. */
		fs_push_simple(f.fs, 200, NULL, ANY_FOO);
		ck_assert_int_eq(fx_sync(&f, key, NULL), 0);
		ck_assert_int_eq(fs_nrequests(f.fs), 2);
		ck_assert_int_eq(fx_events(&f), 1);
		ck_assert_ptr_nonnull(strstr(f.sink.first_body, "\"reason\":\"InvalidSpec\""));
		ck_assert_ptr_nonnull(strstr(f.sink.first_body, "\"type\":\"Warning\""));

		/* The watch echoes our write, then resyncs: nothing is written. */
		char *ms2 = meta_spec(name, "2", 1, cases[k].spec);
		fx_watch_modified(&f, server_foo(&f, 1, ms2));
		for (int i = 0; i < 3; i++) {
			ck_assert_int_eq(fx_sync(&f, key, NULL), 0);
			ck_assert_int_eq(fs_nrequests(f.fs), 2);
			ck_assert_msg(fx_events(&f) == 1, "%s: sync %d recorded an event again",
			              name, i);
		}

		/* A new generation, still invalid: one write, one event. */
		char *ms3 = meta_spec(name, "3", 2, cases[k].spec2);
		json = ck_xasprintf("{%s}", ms3);
		fx_watch_modified(&f, foo_from(json));
		free(json);
		fs_push_simple(f.fs, 200, NULL, ANY_FOO);
		ck_assert_int_eq(fx_sync(&f, key, NULL), 0);
		ck_assert_int_eq(fs_nrequests(f.fs), 3);
		ck_assert_int_eq(fx_events(&f), 2);
		char *ms4 = meta_spec(name, "4", 2, cases[k].spec2);
		fx_watch_modified(&f, server_foo(&f, 2, ms4));
		ck_assert_int_eq(fx_sync(&f, key, NULL), 0);
		ck_assert_int_eq(fs_nrequests(f.fs), 3);
		ck_assert_int_eq(fx_events(&f), 2);

		fx_done(&f);
		free(ms1);
		free(ms2);
		free(ms3);
		free(ms4);
	}
}
END_TEST

/*
 * Refusals that retrying cannot fix are said on the Foo and not retried: a name
 * too long for the Deployment's "controller" label (checked before any request),
 * and a Deployment the API server refuses as invalid (422).
 */
/* A Foo at resourceVersion 1, generation 1, with the given spec; owned by the caller. */
static ck_obj_t *foo_new(const char *name, const char *spec)
{
	char *ms = meta_spec(name, "1", 1, spec);
	char *json = ck_xasprintf("{%s}", ms);
	ck_obj_t *foo = foo_from(json);
	free(json);
	free(ms);
	return foo;
}

START_TEST(test_unfixable_refusals_reported_not_retried)
{
	/* 1. A 64-character name: one status write (InvalidName), one Warning, no create. */
	char name[65];
	memset(name, 'n', 64);
	name[64] = '\0';
	ck_obj_t *foo = foo_new(name, "{\"deploymentName\":\"web\",\"replicas\":1}");
	fx_t f;
	fx_init(&f, &foo, 1);
	char key[128];
	snprintf(key, sizeof(key), "ns1/%s", name);
	fs_push_simple(f.fs, 200, NULL, ANY_FOO);
	ck_assert_int_eq(fx_sync(&f, key, NULL), 0);
	ck_assert_int_eq(fs_nrequests(f.fs), 1);
	const fs_request_t *rq = fs_request(f.fs, 0);
	ck_assert_str_eq(rq->method, "PUT");
	ck_assert_msg(strstr(rq->body, "\"reason\":\"InvalidName\"") != NULL, "%s", rq->body);
	ck_assert_msg(strstr(rq->body, "64 characters, at most 63") != NULL, "%s", rq->body);
	ck_assert_int_eq(fx_events(&f), 1);
	ck_assert_ptr_nonnull(strstr(f.sink.first_body, "\"type\":\"Warning\""));
	fx_done(&f);

	/* 2. The create answered 422: the server's message on the Foo, sync done. */
	foo = foo_new("ok", "{\"deploymentName\":\"web\",\"replicas\":1}");
	fx_init(&f, &foo, 1);
	fs_push_simple(f.fs, 422, NULL,
	               "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
	               "\"message\":\"Deployment.apps \\\"web\\\" is invalid: spec.template: "
	               "refused by a test\",\"reason\":\"Invalid\",\"code\":422}");
	fs_push_simple(f.fs, 200, NULL, ANY_FOO);
	char *err = NULL;
	ck_assert_int_eq(fx_sync(&f, "ns1/ok", &err), 0);
	free(err);
	ck_assert_int_eq(fs_nrequests(f.fs), 2);
	ck_assert_str_eq(fs_request(f.fs, 0)->method, "POST");
	rq = fs_request(f.fs, 1);
	ck_assert_str_eq(rq->method, "PUT");
	ck_assert_msg(strstr(rq->body, "\"reason\":\"DeploymentInvalid\"") != NULL, "%s", rq->body);
	ck_assert_msg(strstr(rq->body, "refused by a test") != NULL, "%s", rq->body);
	ck_assert_int_eq(fx_events(&f), 1);
	fx_done(&f);

	/* 3. The same on the update path: the Foo's Deployment exists with 1 replica,
	 * the Foo asks for 2, the PUT is answered 422. */
	foo = foo_new("up", "{\"deploymentName\":\"web\",\"replicas\":2}");
	fx_init(&f, &foo, 1);
	char *err2 = NULL;
	const char *dep_json =
	    "{\"metadata\":{\"name\":\"web\",\"namespace\":\"ns1\",\"uid\":\"d1\","
	    "\"resourceVersion\":\"5\",\"ownerReferences\":[{\"apiVersion\":"
	    "\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\",\"name\":\"up\",\"uid\":\"u1\","
	    "\"controller\":true}]},\"spec\":{\"replicas\":1}}";
	ck_obj_t *dep = ck_dec_object(&ck_type_deployment, dep_json, strlen(dep_json), &err2);
	ck_assert_msg(dep != NULL, "%s", err2 ? err2 : "?");
	ck_cache_fake_req_t *w = ck_cache_fake_lw_last(f.deps, true);
	ck_assert_ptr_nonnull(w);
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, dep);
	cache_informer_drain(ck_cache_factory_informer(f.factory, &ck_type_deployment));
	fs_push_simple(f.fs, 422, NULL,
	               "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
	               "\"message\":\"Deployment.apps \\\"web\\\" is invalid: refused on update\","
	               "\"reason\":\"Invalid\",\"code\":422}");
	fs_push_simple(f.fs, 200, NULL, ANY_FOO);
	ck_assert_int_eq(fx_sync(&f, "ns1/up", NULL), 0);
	ck_assert_int_eq(fs_nrequests(f.fs), 2);
	ck_assert_str_eq(fs_request(f.fs, 0)->method, "PUT");
	ck_assert_ptr_nonnull(strstr(fs_request(f.fs, 0)->target, "/deployments/web"));
	rq = fs_request(f.fs, 1);
	ck_assert_msg(strstr(rq->body, "\"reason\":\"DeploymentInvalid\"") != NULL, "%s", rq->body);
	ck_assert_msg(strstr(rq->body, "refused on update") != NULL, "%s", rq->body);
	ck_assert_int_eq(fx_events(&f), 1);
	fx_done(&f);
}
END_TEST

Suite *suite_controller(void)
{
	Suite *s = suite_create("controller");
	TCase *tc = tcase_create("sync");
	tcase_add_test(tc, test_invalid_spec_event_only_when_status_written);
	tcase_add_test(tc, test_unfixable_refusals_reported_not_retried);
	suite_add_tcase(s, tc);
	return s;
}
