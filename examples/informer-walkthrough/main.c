/*
 * informer-walkthrough: the informer programming model in five steps, without the
 * manager, as client-go's sample-controller main.go wires it by hand
 * (docs/informers.md walks through it, and through what happens inside):
 *
 *   1. configuration from flags     (clientcmd.BuildConfigFromFlags)
 *   2. a client on an event loop     (kubernetes.NewForConfig)
 *   3. a shared informer factory     (informers.NewSharedInformerFactory)
 *   4. handlers that queue keys      (informer.AddEventHandler + a workqueue)
 *   5. start: informers, wait for the caches, then the workers
 *
 * What it does: every ConfigMap labelled walkthrough.example.com/count=true gets
 * the annotation walkthrough.example.com/keys = the number of keys in its data.
 * A worker reads the ConfigMap from the informer's lister and writes with the
 * client only when the annotation is wrong, so its own write comes back as an
 * update and ends there. --trace-key=<namespace>/<name> logs that ConfigMap's
 * journey through each step.
 *
 * Built with `pkg-config --cflags --libs ckube` and -lev (it calls libev itself;
 * libev ships no .pc file): examples/informer-walkthrough/LIBS.
 */
/* sigwait, pthread_sigmask: POSIX, not C11. */
#define _POSIX_C_SOURCE 200809L

#include <ckube/ckube.h>

#include <ev.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LABEL "walkthrough.example.com/count"
#define ANN   "walkthrough.example.com/keys"

static ck_type_t configmap_type; /* ck_type_configmap with its annotations kept */
static ck_client_t *client;
static const ck_cache_lister_t *lister;
static ck_wq_t *queue;
static ev_async stop_loop;

/* Step 4: handlers run on the loop thread; they only queue the object's key. */
static void on_add(void *ud, ck_obj_t *obj, bool in_initial_list)
{
	(void)ud, (void)in_initial_list;
	char *key = ck_obj_key_dup(obj);
	ck_wq_add(queue, key);
	free(key);
}

static void on_update(void *ud, ck_obj_t *old_obj, ck_obj_t *new_obj)
{
	(void)old_obj;
	on_add(ud, new_obj, false);
}

static void on_delete(void *ud, const char *key, ck_obj_t *obj, bool final_state_unknown)
{
	(void)ud, (void)obj, (void)final_state_unknown; /* a tombstone's key is as good */
	ck_wq_add(queue, key);
}

/* A worker's reconcile: read from the cache, write through the client. */
static int reconcile(const char *key, char **err)
{
	char *ns = NULL, *name = NULL;
	int rc = 0;
	if (ck_obj_key_split(key, &ns, &name) != 0)
		return 0; /* a malformed key never succeeds: drop it */
	ck_obj_t *cm = ck_cache_lister_get(lister, ns, name);
	if (cm == NULL)
		goto out; /* deleted: nothing to do */
	ck_json_doc_t *data = ck_json_parse_field_path(cm, "data", NULL);
	char want[32];
	snprintf(want, sizeof(want), "%zu", ck_json_len(ck_json_root(data)));
	ck_json_doc_free(data);
	const char *have = ck_obj_annotation(cm, ANN);
	if (have != NULL && strcmp(have, want) == 0)
		goto out;
	ck_patch_t *p = ck_patch_new();
	ck_patch_set_string(p, CK_PATH("metadata", "annotations", ANN), want);
	ck_result_t res = {0};
	if (ck_client_merge_patch_sync(client, &configmap_type, ns, name, p, NULL, &res) != 0) {
		*err = ck_xasprintf("patch %s: %s", key, res.error);
		rc = -1;
	}
	ck_result_clear(&res);
	ck_patch_free(p);
out:
	ck_obj_unref(cm);
	free(ns);
	free(name);
	return rc;
}

static void *worker(void *arg)
{
	(void)arg;
	const char *key;
	while ((key = ck_wq_get(queue)) != NULL) {
		char *err = NULL;
		if (reconcile(key, &err) == 0) {
			ck_wq_forget(queue, key);
		} else {
			CK_LOG_ERROR(err, "Reconcile failed, retrying", CK_KV_STR("key", key));
			ck_wq_add_rate_limited(queue, key);
		}
		free(err);
		ck_wq_done(queue, key);
	}
	return NULL;
}

static void on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w, (void)revents;
	ev_break(loop, EVBREAK_ALL);
}

static void *run_loop(void *loop)
{
	ev_run(loop, 0);
	return NULL;
}

int main(int argc, char **argv)
{
	/* Step 1: configuration from flags (kubeconfig, then in-cluster, as client-go). */
	const char *kubeconfig = NULL, *master = NULL, *ns = "", *trace_key = "";
	int64_t workers = 2, verbosity = 0;
	bool version = false;
	char *err = NULL;
	ck_flagset_t *fs = ck_flagset_new("informer-walkthrough");
	ck_flag_string(fs, "kubeconfig", &kubeconfig, "Path to a kubeconfig.");
	ck_flag_string(fs, "master", &master, "The API server's address (overrides kubeconfig).");
	ck_flag_string(fs, "namespace", &ns, "Only this namespace (default: all).");
	ck_flag_string(fs, "trace-key", &trace_key, "Log each step of this key's journey.");
	ck_flag_int(fs, "workers", &workers, 1, 64, "Worker threads.");
	ck_flag_int(fs, "v", &verbosity, 0, 10, "Log verbosity.");
	ck_flag_bool(fs, "version", &version, "Print the version and exit.");
	int first = argc;
	ck_flag_result_t fr = ck_flag_parse(fs, argc, argv, stderr, &first, &err);
	if (fr == CK_FLAG_OK && first < argc) {
		fr = CK_FLAG_ERROR;
		err = ck_xasprintf("unexpected argument \"%s\"", argv[first]);
	}
	if (fr == CK_FLAG_OK && ck_log_set_trace_key(trace_key, &err) != 0) {
		fr = CK_FLAG_ERROR;
		ck_err_wrap(&err, "-trace-key");
	}
	if (fr != CK_FLAG_OK || version) {
		if (version)
			printf("informer-walkthrough %s\n", ck_version());
		if (err != NULL)
			fprintf(stderr, "informer-walkthrough: %s\n", err);
		free(err);
		ck_flagset_free(fs);
		return fr == CK_FLAG_ERROR ? 2 : 0;
	}
	ck_log_set_verbosity((int)verbosity);
	ck_config_load_opts_t lo = {.kubeconfig = kubeconfig, .master = master};
	ck_config_t *cfg = ck_config_load(&lo, &err);
	if (cfg == NULL) {
		fprintf(stderr, "informer-walkthrough: %s\n", err);
		free(err);
		ck_flagset_free(fs);
		return 2;
	}

	/* Step 2: a client, whose requests run on this loop. */
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	client = ck_client_new(loop, cfg, &(ck_client_opts_t){.user_agent = "informer-walkthrough"},
	                       &err);
	if (client == NULL) {
		CK_LOG_ERROR(err, "Cannot make a client");
		free(err);
		ev_loop_destroy(loop);
		ck_flagset_free(fs);
		return 1;
	}

	/* Step 3: a shared informer factory; the ConfigMap informer and its lister. */
	ck_cache_factory_t *factory = ck_cache_factory_new(
	    loop, client,
	    &(ck_cache_factory_opts_t){
	        .default_resync_ms = 30000, .ns = ns, .label_selector = LABEL "=true"});
	configmap_type = ck_type_configmap;
	configmap_type.keep_annotations = true;
	ck_cache_informer_t *informer = ck_cache_factory_informer(factory, &configmap_type);
	lister = ck_cache_informer_lister(informer);

	/* Step 4: handlers that feed a rate-limited workqueue. */
	queue = ck_wq_new(&(ck_wq_options_t){.name = "configmaps"});
	ck_cache_informer_add_handler(
	    informer,
	    &(ck_cache_handler_t){.on_add = on_add, .on_update = on_update, .on_delete = on_delete},
	    NULL);

	/* Step 5: start the informers, run the loop on its thread, wait for the caches,
	 * then start the workers; stop on SIGINT/SIGTERM. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* every thread made below inherits it */
	ev_async_init(&stop_loop, on_stop);
	ev_async_start(loop, &stop_loop);
	pthread_t loop_thread, threads[64];
	int rc = 1, nthreads = 0;
	if (ck_cache_factory_start(factory, &err) != 0 ||
	    pthread_create(&loop_thread, NULL, run_loop, loop) != 0) {
		CK_LOG_ERROR(err, "Cannot start");
		goto free_all;
	}
	if (ck_cache_factory_wait_synced(factory, 60000, &err) != 0) {
		CK_LOG_ERROR(err, "Caches did not sync");
		goto stop;
	}
	CK_LOG_INFO("Caches synced, starting workers", CK_KV_INT("workers", workers));
	for (; nthreads < workers; nthreads++)
		if (pthread_create(&threads[nthreads], NULL, worker, NULL) != 0)
			break;
	int sig = 0;
	sigwait(&sigs, &sig);
	CK_LOG_INFO("Shutting down", CK_KV_STR("signal", sig == SIGINT ? "SIGINT" : "SIGTERM"));
	rc = 0;
stop:
	ck_wq_shutdown(queue); /* workers finish their key, then get NULL */
	for (int i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	ev_async_send(loop, &stop_loop);
	pthread_join(loop_thread, NULL);
free_all:
	/* The loop has stopped: this thread may free what lives on it. */
	ck_cache_factory_free(factory);
	ck_client_free(client);
	ck_wq_free(queue);
	ev_loop_destroy(loop);
	ck_flagset_free(fs);
	free(err);
	return rc;
}
