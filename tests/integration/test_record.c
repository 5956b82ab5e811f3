/*
 * Integration tests for pkg/record against the real API server named by $KUBECONFIG
 * (the local control plane). The involved object is a ConfigMap this test creates
 * (no dependency on the Foo CRD); everything it creates is deleted at the end.
 *
 *   make integration B=build-rec MODULES="base log kube record" INTEG_SUITES=record \
 *        KUBECONFIG=/work/main/.local/kubeconfig
 */
#include "pkg/base/base.h"
#include "pkg/kube/client.h"
#include "pkg/kube/config.h"
#include "pkg/kube/types.h"
#include "pkg/record/record.h"

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

static const ktype_t t_configmap = {.group = "",
                                    .version = "v1",
                                    .kind = "ConfigMap",
                                    .resource = "configmaps",
                                    .namespaced = true};

#define NS "default"

/* The client's loop runs on its own thread, as in the daemon. */
static struct ev_loop *loop;
static ev_async stop_w;
static pthread_t loop_th;
static kclient_t *kc;

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
	kconfig_load_opts_t lo = {.kubeconfig = path};
	kconfig_t *cfg = kconfig_load(&lo, &err);
	ck_assert_msg(cfg != NULL, "kconfig_load: %s", err);
	loop = ev_loop_new(EVFLAG_AUTO);
	kc = kclient_new(loop, cfg, NULL, &err);
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
	kclient_free(kc);
	ev_async_stop(loop, &stop_w);
	ev_async_stop(loop, &ping_w);
	ev_loop_destroy(loop);
}

/* Creates a ConfigMap with a random name; returns it (new reference). */
static kobj_t *create_configmap(void)
{
	char body[256];
	kresult_t res = {0};
	snprintf(body, sizeof(body),
	         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
	         "\"record-it-%08" PRIx64 "\"},\"data\":{\"k\":\"v\"}}",
	         rand_u64() & 0xffffffffu);
	int rc = kclient_create_sync(kc, &t_configmap, NS, body, NULL, &res);
	ck_assert_msg(rc == 0, "create configmap: %s", res.error);
	kobj_t *obj = res.obj;
	res.obj = NULL;
	kresult_clear(&res);
	ck_assert_ptr_nonnull(obj);
	ck_assert_str_ne(obj->uid, "");
	return obj;
}

static void delete_configmap(kobj_t *cm)
{
	kresult_t res = {0};
	kclient_delete_sync(kc, &t_configmap, NS, cm->name, NULL, &res);
	kresult_clear(&res);
	kobj_unref(cm);
}

/* Lists the Events whose involvedObject has this uid (new references). */
static size_t list_events(const char *ns, const char *uid, kobj_t ***items)
{
	char sel[128];
	kresult_t res = {0};
	size_t n = 0;
	char *rv = NULL;
	snprintf(sel, sizeof(sel), "involvedObject.uid=%s", uid);
	klist_opts_t lo = {.field_selector = sel};
	*items = NULL;
	int rc = kclient_list_sync(kc, &ktype_event, ns, &lo, items, &n, &rv, &res);
	ck_assert_msg(rc == 0, "list events: %s", res.error);
	free(rv);
	kresult_clear(&res);
	return n;
}

static void free_events(kobj_t **items, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		kresult_t res = {0};
		kclient_delete_sync(kc, &ktype_event, items[i]->ns, items[i]->name, NULL, &res);
		kresult_clear(&res);
		kobj_unref(items[i]);
	}
	free(items);
}

/* GETs one Event's raw JSON (new string). */
static char *get_event_json(const char *ns, const char *name)
{
	kresult_t res = {0};
	kreq_spec_t spec = {.method = "GET",
	                    .type = &ktype_event,
	                    .ns = ns,
	                    .name = name,
	                    .decode = KDEC_OBJECT,
	                    .keep_body = true};
	int rc = kclient_do_sync(kc, &spec, &res);
	ck_assert_msg(rc == 0, "get event: %s", res.error);
	char *body = res.body;
	res.body = NULL;
	kresult_clear(&res);
	return body;
}

static const char *jstr(yajl_val v, const char *a, const char *b)
{
	const char *path[] = {a, b, NULL};
	yajl_val s = yajl_tree_get(v, path, yajl_t_string);
	return s ? YAJL_GET_STRING(s) : "";
}

static record_t *new_recorder(void)
{
	char *err = NULL;
	record_opts_t o = {
	    .component = "sample-controller",
	    .reporting_controller = RECORD_SAMPLE_CONTROLLER,
	    .reporting_instance = "record-integration-test",
	    .retry_interval_ms = 100,
	};
	record_t *r = record_new(kc, &o, &err);
	ck_assert_msg(r != NULL, "record_new: %s", err);
	return r;
}

START_TEST(test_hundred_identical_events_one_event)
{
	kobj_t *cm = create_configmap();
	record_t *r = new_recorder();

	for (int i = 0; i < 100; i++)
		record_event(r, cm, RECORD_WARNING, "SyncFailed", "sync of %s failed: %s", cm->name,
		             "the same error");
	ck_assert_int_eq(record_flush(r, 60000), 0);
	record_stats_t st;
	record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 1);
	ck_assert_uint_eq(st.failed, 0);
	/* The spam filter's burst of 25 writes; the rest of the count is written at free. */
	record_free(r);

	kobj_t **items;
	size_t n = list_events(NS, cm->uid, &items);
	ck_assert_uint_eq(n, 1);
	int32_t count = 0;
	ck_assert(event_count(items[0], &count));
	ck_assert_int_eq(count, 100);
	ck_assert_str_eq(event_reason(items[0]), "SyncFailed");
	ck_assert_str_eq(event_type(items[0]), "Warning");

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
	ck_assert_str_eq(jstr(v, "reportingComponent", NULL), RECORD_SAMPLE_CONTROLLER);
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
	kobj_t *cm = create_configmap();
	record_t *r = new_recorder();
	kobj_t **items;

	record_event(r, cm, RECORD_NORMAL, "Synced", "Foo synced successfully");
	ck_assert_int_eq(record_flush(r, 30000), 0);
	size_t n = list_events(NS, cm->uid, &items);
	ck_assert_uint_eq(n, 1);
	free_events(items, n); /* deletes it behind the recorder's back */

	/* The count-increment PATCH answers 404: the recorder creates the Event again. */
	record_event(r, cm, RECORD_NORMAL, "Synced", "Foo synced successfully");
	ck_assert_int_eq(record_flush(r, 30000), 0);
	record_stats_t st;
	record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 2);
	ck_assert_uint_eq(st.failed, 0);
	record_free(r);

	n = list_events(NS, cm->uid, &items);
	ck_assert_uint_eq(n, 1);
	int32_t count = 0;
	ck_assert(event_count(items[0], &count));
	ck_assert_int_eq(count, 2);
	free_events(items, n);
	delete_configmap(cm);
}
END_TEST

START_TEST(test_cluster_scoped_object)
{
	/* A Namespace is cluster-scoped: its events live in "default". */
	char uid[64];
	snprintf(uid, sizeof(uid), "record-it-%016" PRIx64, rand_u64());
	record_ref_t ref = {
	    .api_version = "v1", .kind = "Namespace", .name = "default", .uid = uid};
	record_t *r = new_recorder();
	record_event_ref(r, &ref, RECORD_NORMAL, "Checked", "namespace checked");
	ck_assert_int_eq(record_flush(r, 30000), 0);
	record_stats_t st;
	record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 1);
	record_free(r);

	kobj_t **items;
	size_t n = list_events("default", uid, &items);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(event_message(items[0]), "namespace checked");
	free_events(items, n);
}
END_TEST

START_TEST(test_namespace_missing_not_retried)
{
	/* Events for an object in a namespace that does not exist: 404 on create. */
	record_ref_t ref = {.api_version = "v1",
	                    .kind = "ConfigMap",
	                    .ns = "record-it-no-such-namespace",
	                    .name = "x",
	                    .uid = "u"};
	record_t *r = new_recorder();
	record_event_ref(r, &ref, RECORD_NORMAL, "Checked", "nowhere");
	ck_assert_int_eq(record_flush(r, 30000), 0);
	record_stats_t st;
	record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 0);
	ck_assert_uint_eq(st.failed, 1);
	ck_assert_uint_eq(st.retries, 0);
	record_free(r);
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
	suite_add_tcase(s, tc);
	return s;
}
