/*
 * Integration tests for pkg/record against the real API server named by $KUBECONFIG
 * (the local control plane). The involved object is a ConfigMap this test creates
 * (no dependency on the Foo CRD); everything it creates is deleted at the end.
 *
 *   make integration B=build-rec MODULES="base log kube record" INTEG_SUITES=record \
 *        KUBECONFIG=/work/main/.local/kubeconfig
 */
#include <ckube/base.h>
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/record.h>
#include <ckube/types.h>

#include <check.h>
#include <ev.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

static const ck_type_t t_configmap = {.group = "",
                                      .version = "v1",
                                      .kind = "ConfigMap",
                                      .resource = "configmaps",
                                      .namespaced = true};

#define NS "default"

/* The client's loop runs on its own thread, as in the daemon. */
static struct ev_loop *loop;
static ev_async stop_w;
static pthread_t loop_th;
static ck_client_t *kc;

static ev_async ping_w;
static atomic_int loop_running;

static void stop_cb(struct ev_loop *l, ev_async *w, int revents)
{
	ev_break(l, EVBREAK_ALL);
}

static void ping_cb(struct ev_loop *l, ev_async *w, int revents)
{
	atomic_store(&loop_running, 1);
}

static void *loop_main(void *arg)
{
	ev_run(loop, 0);
	return NULL;
}

static void setup(void)
{
	char *err = NULL;
	const char *path = getenv("KUBECONFIG");
	ck_assert_msg(path && *path, "KUBECONFIG must name the local control plane's kubeconfig");
	ck_config_load_opts_t lo = {.kubeconfig = path};
	ck_config_t *cfg = ck_config_load(&lo, &err);
	ck_assert_msg(cfg != NULL, "kconfig_load: %s", err);
	loop = ev_loop_new(EVFLAG_AUTO);
	kc = ck_client_new(loop, cfg, NULL, &err);
	ck_assert_msg(kc != NULL, "kclient_new: %s", err);
	ev_async_init(&stop_w, stop_cb);
	ev_async_start(loop, &stop_w); /* keeps ev_run going until the test ends */
	ev_async_init(&ping_w, ping_cb);
	ev_async_start(loop, &ping_w);
	atomic_store(&loop_running, 0);
	pthread_create(&loop_th, NULL, loop_main, NULL);
	/*
	 * The client takes the thread that created it for its loop thread until the loop
	 * has run once (and refuses blocking calls from it): wait for that first.
	 */
	ev_async_send(loop, &ping_w);
	for (int i = 0; i < 10000 && !atomic_load(&loop_running); i++)
		usleep(1000);
	ck_assert(atomic_load(&loop_running));
}

static void teardown(void)
{
	ev_async_send(loop, &stop_w);
	pthread_join(loop_th, NULL);
	/* The loop has stopped: this thread is now the only one touching it. */
	ck_client_free(kc);
	ev_async_stop(loop, &stop_w);
	ev_async_stop(loop, &ping_w);
	ev_loop_destroy(loop);
}

/* Creates a ConfigMap with a random name; returns it (new reference). */
static ck_obj_t *create_configmap(void)
{
	char body[256];
	ck_result_t res = {0};
	snprintf(body, sizeof(body),
	         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
	         "\"record-it-%08" PRIx64 "\"},\"data\":{\"k\":\"v\"}}",
	         ck_rand_u64() & 0xffffffffu);
	int rc = ck_client_create_sync(kc, &t_configmap, NS, body, NULL, &res);
	ck_assert_msg(rc == 0, "create configmap: %s", res.error);
	ck_obj_t *obj = res.obj;
	res.obj = NULL;
	ck_result_clear(&res);
	ck_assert_ptr_nonnull(obj);
	ck_assert_str_ne(obj->uid, "");
	return obj;
}

static void delete_configmap(ck_obj_t *cm)
{
	ck_result_t res = {0};
	ck_client_delete_sync(kc, &t_configmap, NS, cm->name, NULL, &res);
	ck_result_clear(&res);
	ck_obj_unref(cm);
}

/* Lists the Events whose involvedObject has this uid (new references). */
static size_t list_events(const char *ns, const char *uid, ck_obj_t ***items)
{
	char sel[128];
	ck_result_t res = {0};
	size_t n = 0;
	char *rv = NULL;
	snprintf(sel, sizeof(sel), "involvedObject.uid=%s", uid);
	ck_list_opts_t lo = {.field_selector = sel};
	*items = NULL;
	int rc = ck_client_list_sync(kc, &ck_type_event, ns, &lo, items, &n, &rv, &res);
	ck_assert_msg(rc == 0, "list events: %s", res.error);
	free(rv);
	ck_result_clear(&res);
	return n;
}

static void free_events(ck_obj_t **items, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ck_result_t res = {0};
		ck_client_delete_sync(kc, &ck_type_event, items[i]->ns, items[i]->name, NULL, &res);
		ck_result_clear(&res);
		ck_obj_unref(items[i]);
	}
	free(items);
}

/* GETs one Event's raw JSON (new string). */
static char *get_event_json(const char *ns, const char *name)
{
	ck_result_t res = {0};
	ck_req_spec_t spec = {.method = "GET",
	                      .type = &ck_type_event,
	                      .ns = ns,
	                      .name = name,
	                      .decode = CK_DEC_OBJECT,
	                      .keep_body = true};
	int rc = ck_client_do_sync(kc, &spec, &res);
	ck_assert_msg(rc == 0, "get event: %s", res.error);
	char *body = res.body;
	res.body = NULL;
	ck_result_clear(&res);
	return body;
}

static const char *jstr(yajl_val v, const char *a, const char *b)
{
	const char *path[] = {a, b, NULL};
	yajl_val s = yajl_tree_get(v, path, yajl_t_string);
	return s ? YAJL_GET_STRING(s) : "";
}

static ck_record_t *new_recorder_api(ck_record_api_t api)
{
	char *err = NULL;
	ck_record_opts_t o = {
	    .component = "sample-controller",
	    .reporting_controller = "samplecontroller.k8s.io/sample-controller",
	    .reporting_instance = "record-integration-test",
	    .retry_interval_ms = 100,
	    .api = api,
	};
	ck_record_t *r = ck_record_new(kc, &o, &err);
	ck_assert_msg(r != NULL, "record_new: %s", err);
	return r;
}

/* The tests of core/v1 fields (count, source, timestamps) write core/v1 Events. */
static ck_record_t *new_recorder(void)
{
	return new_recorder_api(CK_RECORD_API_CORE_V1);
}

START_TEST(test_hundred_identical_events_one_event)
{
	ck_obj_t *cm = create_configmap();
	ck_record_t *r = new_recorder();

	for (int i = 0; i < 100; i++)
		ck_record_event(r, cm, CK_RECORD_WARNING, "SyncFailed", "sync of %s failed: %s",
		                cm->name, "the same error");
	ck_assert_int_eq(ck_record_flush(r, 60000), 0);
	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 1);
	ck_assert_uint_eq(st.failed, 0);
	/* The spam filter's burst of 25 writes; the rest of the count is written at free. */
	ck_record_free(r);

	ck_obj_t **items;
	size_t n = list_events(NS, cm->uid, &items);
	ck_assert_uint_eq(n, 1);
	int32_t count = 0;
	ck_assert(ck_event_count(items[0], &count));
	ck_assert_int_eq(count, 100);
	ck_assert_str_eq(ck_event_reason(items[0]), "SyncFailed");
	ck_assert_str_eq(ck_event_type(items[0]), "Warning");

	char *body = get_event_json(NS, items[0]->name);
	char eb[256];
	yajl_val v = yajl_tree_parse(body, eb, sizeof(eb));
	ck_assert_msg(v != NULL, "%s", eb);
	char want[128];
	snprintf(want, sizeof(want), "sync of %s failed: the same error", cm->name);
	ck_assert_str_eq(jstr(v, "message", NULL), want);
	ck_assert_str_eq(jstr(v, "involvedObject", "kind"), "ConfigMap");
	ck_assert_str_eq(jstr(v, "involvedObject", "name"), cm->name);
	ck_assert_str_eq(jstr(v, "involvedObject", "namespace"), NS);
	ck_assert_str_eq(jstr(v, "involvedObject", "apiVersion"), "v1");
	ck_assert_str_eq(jstr(v, "source", "component"), "sample-controller");
	ck_assert_str_eq(jstr(v, "reportingComponent", NULL),
	                 "samplecontroller.k8s.io/sample-controller");
	ck_assert_str_eq(jstr(v, "reportingInstance", NULL), "record-integration-test");
	ck_assert_ptr_nonnull(strstr(items[0]->name, cm->name));
	yajl_tree_free(v);
	free(body);

	free_events(items, n);
	delete_configmap(cm);
}
END_TEST

START_TEST(test_deleted_event_is_created_again)
{
	ck_obj_t *cm = create_configmap();
	ck_record_t *r = new_recorder();
	ck_obj_t **items;

	ck_record_event(r, cm, CK_RECORD_NORMAL, "Synced", "Foo synced successfully");
	ck_assert_int_eq(ck_record_flush(r, 30000), 0);
	size_t n = list_events(NS, cm->uid, &items);
	ck_assert_uint_eq(n, 1);
	free_events(items, n); /* deletes it behind the recorder's back */

	/* The count-increment PATCH answers 404: the recorder creates the Event again. */
	ck_record_event(r, cm, CK_RECORD_NORMAL, "Synced", "Foo synced successfully");
	ck_assert_int_eq(ck_record_flush(r, 30000), 0);
	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 2);
	ck_assert_uint_eq(st.failed, 0);
	ck_record_free(r);

	n = list_events(NS, cm->uid, &items);
	ck_assert_uint_eq(n, 1);
	int32_t count = 0;
	ck_assert(ck_event_count(items[0], &count));
	ck_assert_int_eq(count, 2);
	free_events(items, n);
	delete_configmap(cm);
}
END_TEST

START_TEST(test_cluster_scoped_object)
{
	/* A Namespace is cluster-scoped: its events live in "default". */
	char uid[64];
	snprintf(uid, sizeof(uid), "record-it-%016" PRIx64, ck_rand_u64());
	ck_record_ref_t ref = {
	    .api_version = "v1", .kind = "Namespace", .name = "default", .uid = uid};
	ck_record_t *r = new_recorder();
	ck_record_event_ref(r, &ref, CK_RECORD_NORMAL, "Checked", "namespace checked");
	ck_assert_int_eq(ck_record_flush(r, 30000), 0);
	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 1);
	ck_record_free(r);

	ck_obj_t **items;
	size_t n = list_events("default", uid, &items);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(ck_event_message(items[0]), "namespace checked");
	free_events(items, n);
}
END_TEST

START_TEST(test_namespace_missing_not_retried)
{
	/* Events for an object in a namespace that does not exist: 404 on create. */
	ck_record_ref_t ref = {.api_version = "v1",
	                       .kind = "ConfigMap",
	                       .ns = "record-it-no-such-namespace",
	                       .name = "x",
	                       .uid = "u"};
	ck_record_t *r = new_recorder();
	ck_record_event_ref(r, &ref, CK_RECORD_NORMAL, "Checked", "nowhere");
	ck_assert_int_eq(ck_record_flush(r, 30000), 0);
	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 0);
	ck_assert_uint_eq(st.failed, 1);
	ck_assert_uint_eq(st.retries, 0);
	ck_record_free(r);
}
END_TEST

static const ck_type_t t_events_v1 = {.group = "events.k8s.io",
                                      .version = "v1",
                                      .kind = "Event",
                                      .resource = "events",
                                      .namespaced = true};

START_TEST(test_events_v1_by_discovery_with_series)
{
	ck_obj_t *cm = create_configmap();
	ck_record_t *r = new_recorder_api(CK_RECORD_API_AUTO);
	for (int i = 0; i < 3; i++) {
		ck_record_event(r, cm, CK_RECORD_WARNING, "SyncFailed", "sync of %s failed",
		                cm->name);
		ck_assert_int_eq(ck_record_flush(r, 30000), 0);
		usleep(20000); /* lastObservedTime moves */
	}
	ck_assert_int_eq(ck_record_api(r), CK_RECORD_API_EVENTS_V1);
	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 1);
	ck_assert_uint_eq(st.patched, 2);
	ck_assert_uint_eq(st.failed, 0);
	ck_record_free(r);

	/* One Event (seen through core/v1 too), read back through events.k8s.io/v1. */
	ck_obj_t **items;
	size_t n = list_events(NS, cm->uid, &items);
	ck_assert_uint_eq(n, 1);
	ck_result_t res = {0};
	ck_req_spec_t spec = {.method = "GET",
	                      .type = &t_events_v1,
	                      .ns = NS,
	                      .name = items[0]->name,
	                      .no_decode = true,
	                      .keep_body = true};
	int rc = ck_client_do_sync(kc, &spec, &res);
	ck_assert_msg(rc == 0, "get events.k8s.io event: %s", res.error);
	char eb[256];
	yajl_val v = yajl_tree_parse(res.body, eb, sizeof(eb));
	ck_assert_msg(v != NULL, "%s", eb);
	char want[128];
	snprintf(want, sizeof(want), "sync of %s failed", cm->name);
	ck_assert_str_eq(jstr(v, "apiVersion", NULL), "events.k8s.io/v1");
	ck_assert_str_eq(jstr(v, "note", NULL), want);
	ck_assert_str_eq(jstr(v, "reason", NULL), "SyncFailed");
	ck_assert_str_eq(jstr(v, "action", NULL), "SyncFailed");
	ck_assert_str_eq(jstr(v, "type", NULL), "Warning");
	ck_assert_str_eq(jstr(v, "reportingController", NULL),
	                 "samplecontroller.k8s.io/sample-controller");
	ck_assert_str_eq(jstr(v, "reportingInstance", NULL), "record-integration-test");
	ck_assert_str_eq(jstr(v, "regarding", "kind"), "ConfigMap");
	ck_assert_str_eq(jstr(v, "regarding", "name"), cm->name);
	ck_assert_str_eq(jstr(v, "regarding", "uid"), cm->uid);
	ck_assert_str_ne(jstr(v, "eventTime", NULL), "");
	const char *pcount[] = {"series", "count", NULL};
	yajl_val c = yajl_tree_get(v, pcount, yajl_t_number);
	ck_assert_msg(c != NULL, "no series.count: %s", res.body);
	ck_assert_int_eq(YAJL_GET_INTEGER(c), 3);
	ck_assert_str_gt(jstr(v, "series", "lastObservedTime"), jstr(v, "eventTime", NULL));
	yajl_tree_free(v);
	ck_result_clear(&res);
	free_events(items, n);
	delete_configmap(cm);
}
END_TEST

Suite *suite_record(void)
{
	Suite *s = suite_create("record");
	TCase *tc = tcase_create("record");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_hundred_identical_events_one_event);
	tcase_add_test(tc, test_deleted_event_is_created_again);
	tcase_add_test(tc, test_cluster_scoped_object);
	tcase_add_test(tc, test_namespace_missing_not_retried);
	tcase_add_test(tc, test_events_v1_by_discovery_with_series);
	suite_add_tcase(s, tc);
	return s;
}
