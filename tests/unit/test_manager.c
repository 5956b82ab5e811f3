/*
 * Unit tests for pkg/manager: what ck_manager_new decides from the command line
 * before anything touches the network (the e2e tests run managers for real:
 * sample-controller and both examples).
 */
#include "pkg/manager/manager_internal.h"
#include <ckube/kinds.h>
#include <ckube/log.h>
#include <ckube/manager.h>
#include <ckube/types.h>

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KC "../fixtures/kubeconfig/basic.yaml"

static char *extra_value;
static void define_extra(void *ud, ck_flagset_t *fs)
{
	ck_flag_string(fs, "extra", (const char **)ud, "A flag of the program.");
}

/* ck_manager_new with argv (NULL-terminated); the manager is freed. Returns the
 * exit code, or -1 when a manager was made. */
static int try_new(char **argv, ck_manager_opts_t *mo)
{
	int argc = 0, rc = 99;
	while (argv[argc])
		argc++;
	ck_manager_opts_t def = {.name = "mgr-test"};
	ck_manager_t *m = ck_manager_new(mo ? mo : &def, argc, argv, &rc);
	if (m == NULL)
		return rc;
	ck_manager_free(m);
	return -1;
}

/* A manager from a minimal command line (no listeners); fails the test if refused. */
static ck_manager_t *new_manager(void)
{
	int rc = 99;
	char *argv[] = {
	    "t", "--kubeconfig", KC, "--metrics-bind-address=0", "--health-probe-bind-address=0",
	    NULL};
	ck_manager_t *m = ck_manager_new(&(ck_manager_opts_t){.name = "mgr-test"}, 5, argv, &rc);
	ck_assert_ptr_nonnull(m);
	return m;
}

START_TEST(test_help_version_and_usage_errors)
{
	ck_assert_int_eq(try_new((char *[]){"t", "--help", NULL}, NULL), 0);
	ck_assert_int_eq(try_new((char *[]){"t", "--version", NULL}, NULL), 0);
	ck_assert_int_eq(try_new((char *[]){"t", "--no-such-flag", NULL}, NULL), 2);
	ck_assert_int_eq(try_new((char *[]){"t", "stray", NULL}, NULL), 2);
	ck_assert_int_eq(try_new((char *[]){"t", "--kubeconfig", "/nonexistent/kc", NULL}, NULL),
	                 2);
	ck_assert_int_eq(
	    try_new((char *[]){"t", "--kubeconfig", KC, "--resync-period=500ms",
	                       "--metrics-bind-address=0", "--health-probe-bind-address=0", NULL},
	            NULL),
	    2);
	ck_assert_int_eq(
	    try_new((char *[]){"t", "--kubeconfig", KC, "--log-format=xml",
	                       "--metrics-bind-address=0", "--health-probe-bind-address=0", NULL},
	            NULL),
	    2);
	/* Leader election outside a pod needs the Lease's namespace. */
	setenv("CKUBE_SERVICEACCOUNT_DIR", "/nonexistent", 1);
	ck_assert_int_eq(
	    try_new((char *[]){"t", "--kubeconfig", KC, "--leader-elect",
	                       "--metrics-bind-address=0", "--health-probe-bind-address=0", NULL},
	            NULL),
	    2);
	ck_assert_int_eq(
	    try_new((char *[]){"t", "--kubeconfig", KC, "--leader-elect",
	                       "--leader-elect-resource-namespace=kube-system",
	                       "--leader-elect-renew-deadline=20s", "--metrics-bind-address=0",
	                       "--health-probe-bind-address=0", NULL},
	            NULL),
	    2); /* renew deadline longer than the lease */
}
END_TEST

/* Runs try_new with stderr captured into out (at most n bytes). */
static int try_new_stderr(char **argv, char *out, size_t n)
{
	char path[] = "/tmp/mgr-test-stderr-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	fflush(stderr);
	int saved = dup(2);
	dup2(fd, 2);
	int rc = try_new(argv, NULL);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	ssize_t got = pread(fd, out, n - 1, 0);
	out[got > 0 ? got : 0] = '\0';
	close(fd);
	unlink(path);
	return rc;
}

/* A client-side rate too small for the token bucket (its wait overflowed: undefined
 * behaviour), or not a number, is a usage error that names the flag. */
START_TEST(test_kube_api_qps_validated)
{
	const char *bad[] = {"--kube-api-qps=1e-300", "--kube-api-qps=0.0001", "--kube-api-qps=nan",
	                     "--kube-api-qps=inf"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char msg[512];
		int rc = try_new_stderr((char *[]){"t", "--kubeconfig", KC, (char *)bad[i],
		                                   "--metrics-bind-address=0",
		                                   "--health-probe-bind-address=0", NULL},
		                        msg, sizeof(msg));
		ck_assert_msg(rc == 2, "%s: rc %d", bad[i], rc);
		ck_assert_msg(strstr(msg, "-kube-api-qps: ") != NULL, "%s: %s", bad[i], msg);
	}
	ck_assert_int_eq(
	    try_new((char *[]){"t", "--kubeconfig", KC, "--kube-api-qps=-1",
	                       "--metrics-bind-address=0", "--health-probe-bind-address=0", NULL},
	            NULL),
	    -1);
}
END_TEST

START_TEST(test_made_with_program_flags_and_parts)
{
	ck_manager_opts_t mo = {
	    .name = "mgr-test", .workers = 3, .define_flags = define_extra, .ud = &extra_value};
	int rc = 99;
	char *argv[] = {"t",
	                "--kubeconfig",
	                KC,
	                "--namespace=ns1",
	                "--extra=yes",
	                "--metrics-bind-address=0",
	                "--health-probe-bind-address=0",
	                NULL};
	ck_manager_t *m = ck_manager_new(&mo, 7, argv, &rc);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(extra_value, "yes");
	ck_assert_str_eq(ck_manager_namespace(m), "ns1");
	ck_assert_int_eq(ck_manager_workers(m), 3); /* the program's default */
	ck_assert_ptr_nonnull(ck_manager_client(m));
	ck_assert_ptr_nonnull(ck_manager_factory(m));
	ck_assert_ptr_nonnull(ck_manager_recorder(m));
	ck_assert_ptr_nonnull(ck_manager_metrics(m));
	/* One informer per resource, however many watches name it. */
	ck_controller_t *c = ck_manager_add_controller(m, "ConfigMaps", NULL, NULL);
	ck_cache_informer_t *a = ck_controller_watch(c, &ck_type_configmap);
	ck_cache_informer_t *b = ck_manager_informer(m, &ck_type_configmap);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_eq(a, b);
	ck_controller_enqueue(c, "ns1/x");
	ck_manager_free(m); /* never run: frees what it made, queue included */
}
END_TEST

/* An object of t in ns with one controller ownerReference (apiVersion, kind, name). */
static ck_obj_t *owned(const ck_type_t *t, const char *ns, const char *av, const char *kind,
                       const char *name)
{
	ck_obj_builder_t *b = ck_obj_builder_new(t);
	ck_obj_builder_set_meta(b, "namespace", ns, strlen(ns));
	ck_obj_builder_set_meta(b, "name", "child", 5);
	ck_obj_builder_add_owner(b);
	ck_obj_builder_set_owner(b, "apiVersion", av, strlen(av));
	ck_obj_builder_set_owner(b, "kind", kind, strlen(kind));
	ck_obj_builder_set_owner(b, "name", name, strlen(name));
	ck_obj_builder_set_owner_bool(b, "controller", true);
	ck_obj_t *o = ck_obj_builder_finish(b);
	ck_obj_builder_free(b);
	return o;
}

/* The owner's group and kind decide, not its version nor the kind string alone;
 * watches with predicates are registered (their filtering is test_predicate's). */
START_TEST(test_enqueue_owner_type_and_watch_opts)
{
	ck_manager_t *m = new_manager();
	ck_controller_t *c = ck_manager_add_controller(m, "Deployments", NULL, NULL);
	const ck_predicate_t *preds[] = {ck_predicate_generation_changed()};
	ck_watch_opts_t wo = {.predicates = preds, .npredicates = 1};
	ck_assert_ptr_nonnull(ck_controller_watch_opts(c, &ck_type_deployment, &wo));
	ck_assert_ptr_nonnull(ck_controller_watch_map_opts(c, &ck_type_replicaset,
	                                                   ck_controller_enqueue_owner_type,
	                                                   (void *)&ck_type_deployment, &wo));
	ck_wq_t *q = mgr_controller_queue(c);

	ck_obj_t *objs[] = {
	    owned(&ck_type_replicaset, "ns", "apps/v1", "Deployment", "d1"),       /* queued */
	    owned(&ck_type_replicaset, "ns", "apps/v1beta2", "Deployment", "d2"),  /* queued */
	    owned(&ck_type_replicaset, "ns", "example.com/v1", "Deployment", "x"), /* other group */
	    owned(&ck_type_replicaset, "ns", "v1", "Deployment", "y"),             /* core group */
	    owned(&ck_type_replicaset, "ns", "apps/v1", "StatefulSet", "z"),       /* other kind */
	};
	for (size_t i = 0; i < CK_ARRAY_LEN(objs); i++)
		ck_controller_enqueue_owner_type((void *)&ck_type_deployment, c, objs[i]);
	ck_assert_uint_eq(ck_wq_len(q), 2);
	const char *k = ck_wq_get(q);
	ck_assert_str_eq(k, "ns/d1");
	ck_wq_done(q, k);
	k = ck_wq_get(q);
	ck_assert_str_eq(k, "ns/d2");
	ck_wq_done(q, k);
	/* The deprecated kind-only map takes the other group's Deployment too. */
	ck_controller_enqueue_owner("Deployment", c, objs[2]);
	ck_assert_uint_eq(ck_wq_len(q), 1);
	k = ck_wq_get(q);
	ck_assert_str_eq(k, "ns/x");
	ck_wq_done(q, k);
	/* A cluster-scoped owner (a Node) of a namespaced object: its key is its name. */
	ck_obj_t *pod = owned(&ck_type_pod, "ns", "v1", "Node", "n1");
	ck_controller_enqueue_owner_type((void *)&ck_type_node, c, pod);
	k = ck_wq_get(q);
	ck_assert_str_eq(k, "n1");
	ck_wq_done(q, k);
	ck_obj_unref(pod);
	for (size_t i = 0; i < CK_ARRAY_LEN(objs); i++)
		ck_obj_unref(objs[i]);
	ck_manager_free(m);
}
END_TEST

/* A ConfigMap ns/name at resourceVersion rv. */
static ck_obj_t *cm(const char *name, const char *rv)
{
	ck_obj_builder_t *b = ck_obj_builder_new(&ck_type_configmap);
	ck_obj_builder_set_meta(b, "namespace", "ns", 2);
	ck_obj_builder_set_meta(b, "name", name, strlen(name));
	ck_obj_builder_set_meta(b, "resourceVersion", rv, strlen(rv));
	ck_obj_t *o = ck_obj_builder_finish(b);
	ck_obj_builder_free(b);
	return o;
}

/* The keys a queue hands out, in order, with their priorities ("ns/d 0,ns/a -100"). */
static void assert_order(ck_wq_t *q, const char *want)
{
	ck_sbuf_t got = CK_SBUF_INIT;
	int prio;
	while (ck_wq_len(q) > 0) {
		const char *k = ck_wq_get_with_priority(q, &prio);
		ck_sbuf_printf(&got, "%s%s %d", got.len ? "," : "", k, prio);
		ck_wq_done(q, k);
	}
	ck_assert_str_eq(ck_sbuf_cstr(&got), want);
	ck_sbuf_free(&got);
}

/*
 * The watch handlers (controller-runtime's WithLowPriorityWhenUnchanged): adds of
 * the initial list and resyncs (same resourceVersion) wait behind new and changed
 * objects; one FIFO with --priority-queue=false (mode 1) or for a controller added
 * with fifo_queue (mode 2).
 */
START_TEST(test_priority_queue_handlers)
{
	for (int mode = 0; mode < 3; mode++) {
		int rc = 99;
		bool fifo = mode != 0;
		char *argv[] = {"t",
		                "--kubeconfig",
		                KC,
		                "--metrics-bind-address=0",
		                "--health-probe-bind-address=0",
		                mode == 1 ? "--priority-queue=false" : "--priority-queue=true",
		                NULL};
		ck_manager_t *m =
		    ck_manager_new(&(ck_manager_opts_t){.name = "mgr-test"}, 6, argv, &rc);
		ck_assert_ptr_nonnull(m);
		ck_controller_t *c = ck_manager_add_controller_opts(
		    m, &(ck_controller_opts_t){.name = "ConfigMaps", .fifo_queue = mode == 2});
		ck_wq_t *q = mgr_controller_queue(c);
		const ck_cache_handler_t *h = mgr_controller_own_handler();
		ck_obj_t *a = cm("a", "1"), *b = cm("b", "2"), *r1 = cm("r", "3"),
		         *r2 = cm("r", "3"), *d = cm("d", "4"), *e1 = cm("e", "5"),
		         *e2 = cm("e", "6");
		h->on_add(c, a, true);   /* initial list */
		h->on_add(c, b, true);   /* initial list */
		h->on_update(c, r1, r2); /* resync: nothing changed */
		h->on_add(c, d, false);  /* created since */
		h->on_update(c, e1, e2); /* changed */
		h->on_add(c, b, false);  /* b again, new: its priority rises */
		/* The rule as exported for handlers of one's own. */
		ck_assert_int_eq(ck_controller_add_priority(true), CK_WQ_PRIORITY_LOW);
		ck_assert_int_eq(ck_controller_add_priority(false), 0);
		ck_assert_int_eq(ck_controller_update_priority(r1, r2), CK_WQ_PRIORITY_LOW);
		ck_assert_int_eq(ck_controller_update_priority(e1, e2), 0);
		if (fifo)
			assert_order(q, "ns/a 0,ns/b 0,ns/r 0,ns/d 0,ns/e 0");
		else
			assert_order(q, "ns/d 0,ns/e 0,ns/b 0,ns/a -100,ns/r -100");
		ck_obj_t *all[] = {a, b, r1, r2, d, e1, e2};
		for (size_t i = 0; i < CK_ARRAY_LEN(all); i++)
			ck_obj_unref(all[i]);
		ck_manager_free(m);
	}
}
END_TEST

/* A descriptor the factory refuses (same resource, other fields): NULL, a lister of
 * NULL is NULL, and run exits 1 before starting anything. */
START_TEST(test_reconcile_failed)
{
	ck_result_t conflict = {.http_code = 409,
	                        .error = "PUT foos/a: 409 Conflict: the object has been modified",
	                        .status = {.code = 409, .reason = "Conflict"}};
	ck_result_t gone = {.http_code = 500, .error = "PUT foos/a: 500 InternalError"};
	char *err = NULL;
	ck_assert_int_eq(ck_reconcile_failed(&conflict, &err, "status of Foo %s", "ns/a"),
	                 CK_RECONCILE_RETRY);
	ck_assert_str_eq(err, "status of Foo ns/a: PUT foos/a: 409 Conflict: the object has been "
	                      "modified");
	free(err);
	ck_assert_int_eq(ck_reconcile_failed(&gone, &err, "Deployment %s/%s", "ns", "a"), -1);
	ck_assert_str_eq(err, "Deployment ns/a: PUT foos/a: 500 InternalError");
	free(err);
}
END_TEST

static void *stop_soon(void *m)
{
	usleep(100000);
	ck_manager_stop(m);
	return NULL;
}

/* A manager stopped from one of the program's threads shuts down cleanly. */
START_TEST(test_stop)
{
	ck_manager_t *m = new_manager();
	pthread_t t;
	pthread_create(&t, NULL, stop_soon, m);
	ck_assert_int_eq(ck_manager_run(m), 0); /* frees m */
	pthread_join(t, NULL);
}
END_TEST

static int body_ok(void *ud, char **err)
{
	usleep(100000);
	return 0;
}

static int body_fails(void *ud, char **err)
{
	if (ud != NULL)
		*err = ck_xstrdup(ud);
	return 2;
}

/* ck_manager_run_with: the body's return stops the manager (without the stop this
 * test would hang until check's timeout); its failure comes back with its reason. */
START_TEST(test_run_with)
{
	char *err = NULL;
	ck_assert_int_eq(ck_manager_run_with(new_manager(), body_ok, NULL, &err), 0);
	ck_assert_ptr_null(err);
	ck_assert_int_eq(ck_manager_run_with(new_manager(), body_fails, "no Deployment", &err), 0);
	ck_assert_str_eq(err, "no Deployment");
	free(err);
	err = NULL;
	ck_assert_int_eq(ck_manager_run_with(new_manager(), body_fails, NULL, &err), 0);
	ck_assert_str_eq(err, "the test body failed (returned 2)");
	free(err);
}
END_TEST

/* A manager that ends on its own (here: a refused informer) waits for the body,
 * and no stop is left pending for the next manager. */
START_TEST(test_run_with_manager_ends_first)
{
	static const char *const other_fields[] = {"data"};
	static const ck_type_t secrets_data_only = {.group = "",
	                                            .version = "v1",
	                                            .kind = "Secret",
	                                            .resource = "secrets",
	                                            .namespaced = true,
	                                            .fields = other_fields,
	                                            .nfields = 1};
	ck_manager_t *m = new_manager();
	ck_manager_informer(m, &ck_type_secret);
	ck_manager_informer(m, &secrets_data_only);
	char *err = NULL;
	ck_assert_int_eq(ck_manager_run_with(m, body_ok, NULL, &err), 1);
	ck_assert_ptr_null(err);
	sigset_t pending;
	ck_assert_int_eq(sigpending(&pending), 0);
	ck_assert(!sigismember(&pending, SIGTERM));
}
END_TEST

START_TEST(test_refused_informer_fails_run)
{
	static const char *const other_fields[] = {"data"};
	static const ck_type_t secrets_data_only = {.group = "",
	                                            .version = "v1",
	                                            .kind = "Secret",
	                                            .resource = "secrets",
	                                            .namespaced = true,
	                                            .fields = other_fields,
	                                            .nfields = 1};
	ck_manager_t *m = new_manager();
	ck_assert_ptr_nonnull(ck_manager_informer(m, &ck_type_secret));
	ck_cache_informer_t *inf = ck_manager_informer(m, &secrets_data_only);
	ck_assert_ptr_null(inf);
	ck_assert_ptr_null(ck_cache_informer_lister(inf));
	ck_assert_int_eq(ck_manager_run(m), 1); /* frees m */
}
END_TEST

/* --trace-key: a bad key is a usage error naming the flag; a good one is set. */
START_TEST(test_trace_key_flag)
{
	char msg[512];
	int rc = try_new_stderr((char *[]){"t", "--kubeconfig", KC, "--trace-key=a/b/c",
	                                   "--metrics-bind-address=0",
	                                   "--health-probe-bind-address=0", NULL},
	                        msg, sizeof(msg));
	ck_assert_int_eq(rc, 2);
	ck_assert_msg(strstr(msg, "-trace-key: trace key \"a/b/c\": want \"namespace/name\"") !=
	                  NULL,
	              "%s", msg);
	ck_assert_ptr_null(ck_log_trace_key());
	ck_assert_int_eq(
	    try_new((char *[]){"t", "--kubeconfig", KC, "--trace-key=ns1/x",
	                       "--metrics-bind-address=0", "--health-probe-bind-address=0", NULL},
	            NULL),
	    -1);
	char *k = ck_log_trace_key();
	ck_assert_str_eq(k, "ns1/x");
	free(k);
	ck_log_set_trace_key(NULL, NULL);
}
END_TEST

static atomic_int x_calls, y_calls;

/* ns1/x fails once, then succeeds; ns1/y succeeds. */
static int trace_reconcile(void *ud, const char *key, char **err)
{
	(void)ud;
	if (strcmp(key, "ns1/y") == 0) {
		atomic_fetch_add(&y_calls, 1);
		return 0;
	}
	if (atomic_fetch_add(&x_calls, 1) == 0) {
		*err = ck_xstrdup("first try fails");
		return -1;
	}
	return 0;
}

/* The manager's workers trace the key's reconcile between its queue steps, and
 * only that key's. */
START_TEST(test_trace_key_through_the_workers)
{
	char path[] = "/tmp/mgr-test-trace-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_manager_opts_t mo = {.name = "mgr-test", .workers = 2};
	int rc = 99;
	char *argv[] = {"t",
	                "--kubeconfig",
	                KC,
	                "--trace-key=ns1/x",
	                "--metrics-bind-address=0",
	                "--health-probe-bind-address=0",
	                NULL};
	ck_manager_t *m = ck_manager_new(&mo, 6, argv, &rc);
	ck_assert_ptr_nonnull(m);
	ck_log_set_fd(fd);
	ck_controller_t *c = ck_manager_add_controller(m, "Things", trace_reconcile, NULL);
	ck_controller_enqueue(c, "ns1/y");
	/* Low, as from an initial list: its retry must keep that priority. */
	ck_controller_enqueue_priority(c, "ns1/x", CK_WQ_PRIORITY_LOW);
	char *err = NULL;
	ck_assert_int_eq(mgr_controller_start(c, &err), 0);
	for (int i = 0; i < 500 && (atomic_load(&x_calls) < 2 || atomic_load(&y_calls) < 1); i++)
		usleep(10000);
	ck_assert_int_eq(atomic_load(&x_calls), 2);
	ck_assert_int_eq(atomic_load(&y_calls), 1);
	ck_assert_int_eq(mgr_controller_stop(c, 5000), 0);
	ck_log_set_fd(2);
	ck_log_set_trace_key(NULL, NULL);

	char log[16384];
	ssize_t n = pread(fd, log, sizeof(log) - 1, 0);
	ck_assert_int_gt(n, 0);
	log[n] = '\0';
	close(fd);
	ck_assert_ptr_null(strstr(log, "ns1/y"));
	/* The steps of ns1/x, in order (the priority queue's, the default). */
	const char *want[] = {
	    "step=\"queue-add\" queue=\"Things\" priority=-100 delayMs=0 outcome=\"queued\"",
	    "step=\"queue-get\" queue=\"Things\"",
	    "step=\"reconcile-start\" controller=\"Things\"",
	    "step=\"reconcile-end\" controller=\"Things\" result=\"error\" requeueAfterMs=0 "
	    "tookUs=",
	    "step=\"queue-rate-limited\" queue=\"Things\" delayMs=5 failures=1",
	    "step=\"queue-add\" queue=\"Things\" priority=-100 delayMs=5 outcome=\"waiting\"",
	    "step=\"queue-done\" queue=\"Things\" outcome=\"finished\"",
	    "step=\"queue-get\" queue=\"Things\"",
	    "step=\"reconcile-start\" controller=\"Things\"",
	    "step=\"reconcile-end\" controller=\"Things\" result=\"success\"",
	    "step=\"queue-forget\" queue=\"Things\" failures=1",
	    "step=\"queue-done\" queue=\"Things\" outcome=\"finished\"",
	};
	const char *p = log;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const char *at = strstr(p, "\"Trace\" key=\"ns1/x\" ");
		ck_assert_msg(at != NULL, "step %zu missing (%s) in:\n%s", i, want[i], log);
		at += strlen("\"Trace\" key=\"ns1/x\" ");
		ck_assert_msg(strncmp(at, want[i], strlen(want[i])) == 0,
		              "step %zu: want %s in:\n%s", i, want[i], log);
		p = at;
	}
	ck_assert_ptr_null(strstr(p, "\"Trace\""));
	ck_assert_ptr_nonnull(strstr(log, "err=\"first try fails\""));
	ck_manager_free(m);
}
END_TEST

Suite *suite_manager(void)
{
	Suite *s = suite_create("manager");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_help_version_and_usage_errors);
	tcase_add_test(tc, test_kube_api_qps_validated);
	tcase_add_test(tc, test_made_with_program_flags_and_parts);
	tcase_add_test(tc, test_enqueue_owner_type_and_watch_opts);
	tcase_add_test(tc, test_priority_queue_handlers);
	tcase_add_test(tc, test_refused_informer_fails_run);
	tcase_add_test(tc, test_reconcile_failed);
	tcase_add_test(tc, test_stop);
	tcase_add_test(tc, test_run_with);
	tcase_add_test(tc, test_run_with_manager_ends_first);
	tcase_add_test(tc, test_trace_key_flag);
	tcase_add_test(tc, test_trace_key_through_the_workers);
	suite_add_tcase(s, tc);
	return s;
}
