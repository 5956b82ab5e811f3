/*
 * manager: flags, configuration, loop, client, recorder, factory, metrics and
 * probes, leader election and the shutdown order, for any controller (see
 * <ckube/manager.h>). This is sample-controller's former main(), made general.
 *
 * Threads:
 *   caller   runs the libev loop (network, informers, timers) in ck_manager_run.
 *   control  waits for the caches to sync, starts leader election or the
 *            runnables, then waits for SIGINT/SIGTERM (sigtimedwait: the signals are
 *            blocked in every thread, so no handler runs in signal context) and
 *            shuts down in order: runnables drain, Lease released, events flushed,
 *            loop stopped.
 *   workers, the elector, the recorder, the metrics server: their own.
 */
#include "pkg/manager/manager_internal.h"

#include <ckube/base.h>
#include <ckube/config.h>
#include <ckube/leaderelection.h>
#include <ckube/log.h>
#include <ckube/sharding.h>
#include <ckube/version.h>

#include <errno.h> /* program_invocation_short_name */
#include <ev.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2

/* ---- Loop thread ---- */

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	ck_manager_t *d = w->data;
	atomic_store(&d->last_tick_ns, ck_clk_mono_ns(ck_clk_real()));
}

static void on_stop_async(struct ev_loop *loop, ev_async *w, int revents)
{
	ck_manager_t *d = w->data;
	ck_cache_factory_shutdown(d->factory);
	ev_timer_stop(loop, &d->tick);
	ev_async_stop(loop, &d->stop_async);
	ev_break(loop, EVBREAK_ALL);
}

static void on_watch_error(void *ud, ck_cache_informer_t *inf, const char *msg,
                           const ck_result_t *res, bool healing)
{
	ck_manager_t *d = ud;
	/* Errors retrying will not heal (403, 404 for a missing CRD) need a person:
	 * say so at ERROR, once per distinct message; the informer already logs every
	 * failure at a lower level. Loop thread only, so no lock. */
	char **last = NULL;
	for (size_t i = 0; i < d->ninformers; i++)
		if (d->informers[i] == inf)
			last = &d->last_watch_error[i];
	if (last == NULL)
		return;
	if (healing) {
		free(*last);
		*last = NULL;
		return;
	}
	if (*last != NULL && strcmp(*last, msg) == 0)
		return;
	free(*last);
	*last = ck_xstrdup(msg);
	CK_LOG_ERROR(msg, "Cannot list/watch; the cache will not sync until this is fixed",
	             CK_KV_STR("resource", ck_cache_informer_name(inf)));
}

/* ---- Probes (metrics server thread) ---- */

static int check_loop(void *ud, char **reason)
{
	ck_manager_t *d = ud;
	uint64_t age = ck_clk_mono_ns(ck_clk_real()) - atomic_load(&d->last_tick_ns);
	if (age > 10 * CK_NS_PER_SEC) {
		*reason = ck_xasprintf("event loop has not turned for %llus",
		                       (unsigned long long)(age / CK_NS_PER_SEC));
		return -1;
	}
	return 0;
}

static int check_synced(void *ud, char **reason)
{
	ck_manager_t *d = ud;
	if (atomic_load(&d->synced))
		return 0;
	char *why = ck_cache_factory_sync_reason(d->factory);
	*reason = why ? why : ck_xstrdup("caches not synced yet");
	return -1;
}

/* client-go's leader-election healthz: a leader whose elector has not renewed the
 * lease for its duration plus 20 s is stuck, and a restart is the cure. */
#define LE_HEALTHZ_TOLERANCE_MS 20000

static int check_le_renewing(void *ud, char **reason)
{
	ck_manager_t *d = ud;
	pthread_mutex_lock(&d->le_mu);
	int rc = ck_le_check(d->elector, LE_HEALTHZ_TOLERANCE_MS, reason);
	pthread_mutex_unlock(&d->le_mu);
	return rc;
}

static int check_leader(void *ud, char **reason)
{
	ck_manager_t *d = ud;
	if (atomic_load(&d->lost_lease)) {
		*reason = ck_xstrdup("leader election lost");
		return -1;
	}
	return 0; /* leading, or a warm standby */
}

/* ---- Metrics collectors (metrics server thread) ---- */

struct rest_ctx {
	ck_sbuf_t *out;
	const char *host;
	const char *name; /* the histogram being written, for rest_latency */
};

static void rest_stat(void *ud, const char *method, int code, uint64_t count)
{
	struct rest_ctx *r = ud;
	char codebuf[16];
	if (code == 0)
		snprintf(codebuf, sizeof(codebuf), "<error>");
	else
		snprintf(codebuf, sizeof(codebuf), "%d", code);
	ck_metrics_label_t l[] = {{"code", codebuf}, {"host", r->host}, {"method", method}};
	ck_metrics_write_sample(r->out, "rest_client_requests_total", l, 3, (double)count);
}

static void rest_resource_stat(void *ud, const char *method, const char *resource, uint64_t count)
{
	struct rest_ctx *r = ud;
	ck_metrics_label_t l[] = {{"host", r->host}, {"method", method}, {"resource", resource}};
	ck_metrics_write_sample(r->out, "rest_client_resource_requests_total", l, 3, (double)count);
}

/* One histogram series of r->name per verb, labelled as client-go's: verb and host. */
static void rest_latency(void *ud, const ck_client_latency_t *lat)
{
	struct rest_ctx *r = ud;
	char bucket[96], sum[96], count[96];
	snprintf(bucket, sizeof(bucket), "%s_bucket", r->name);
	snprintf(sum, sizeof(sum), "%s_sum", r->name);
	snprintf(count, sizeof(count), "%s_count", r->name);
	for (size_t i = 0; i < CK_CLIENT_LATENCY_NBUCKETS; i++) {
		char le[32];
		snprintf(le, sizeof(le), "%g", lat->bounds[i]);
		ck_metrics_label_t l[] = {{"host", r->host}, {"le", le}, {"verb", lat->verb}};
		ck_metrics_write_sample(r->out, bucket, l, 3, (double)lat->counts[i]);
	}
	ck_metrics_label_t inf[] = {{"host", r->host}, {"le", "+Inf"}, {"verb", lat->verb}};
	ck_metrics_write_sample(r->out, bucket, inf, 3, (double)lat->count);
	ck_metrics_label_t h[] = {{"host", r->host}, {"verb", lat->verb}};
	ck_metrics_write_sample(r->out, sum, h, 2, lat->sum);
	ck_metrics_write_sample(r->out, count, h, 2, (double)lat->count);
}

static void collect_client(void *ud, ck_sbuf_t *out)
{
	ck_manager_t *d = ud;
	struct rest_ctx r = {out, ck_client_host(d->client), NULL};
	ck_metrics_write_header(
	    out, "rest_client_requests_total",
	    "Number of HTTP requests, partitioned by status code, method, and host.",
	    CK_METRICS_COUNTER);
	ck_client_stats_foreach(d->client, rest_stat, &r);

	ck_metrics_write_header(out, "rest_client_resource_requests_total",
	                        "Number of HTTP requests, partitioned by method, resource and "
	                        "host (ckube's own: what the client spends its rate limit on).",
	                        CK_METRICS_COUNTER);
	ck_client_resource_stats_foreach(d->client, rest_resource_stat, &r);

	ck_client_conn_stats_t cs;
	ck_client_conn_stats_snapshot(d->client, &cs);
	ck_metrics_write_header(out, "rest_client_response_body_bytes_total",
	                        "Response body bytes read, watches included, after content "
	                        "decoding, by host (ckube's own).",
	                        CK_METRICS_COUNTER);
	ck_metrics_label_t hl[] = {{"host", r.host}};
	ck_metrics_write_sample(out, "rest_client_response_body_bytes_total", hl, 1,
	                        (double)cs.body_bytes);

	r.name = "rest_client_request_duration_seconds";
	ck_metrics_write_header(out, r.name,
	                        "Request latency in seconds (non-watch requests), partitioned by "
	                        "verb and host.",
	                        CK_METRICS_HISTOGRAM);
	ck_client_latency_foreach(d->client, rest_latency, &r);

	r.name = "rest_client_rate_limiter_duration_seconds";
	ck_metrics_write_header(out, r.name,
	                        "Client side rate limiter latency in seconds, partitioned by verb "
	                        "and host.",
	                        CK_METRICS_HISTOGRAM);
	ck_client_rate_limiter_foreach(d->client, rest_latency, &r);
}

static void collect_informers(void *ud, ck_sbuf_t *out)
{
	ck_manager_t *d = ud;
	size_t n = d->ninformers;
	ck_cache_informer_t **infs = d->informers;
	ck_cache_stats_t *st = ck_xcalloc(n ? n : 1, sizeof(*st));
	for (size_t i = 0; i < n; i++)
		ck_cache_informer_stats(infs[i], &st[i]);
	int64_t now = ck_clk_wall_ns(ck_clk_real());
	struct {
		const char *name, *help;
		ck_metrics_type_t type;
	} fam[] = {
	    {"informer_objects", "Objects in the informer's cache.", CK_METRICS_GAUGE},
	    {"informer_lists_total", "Lists started (all pages of one list count once).",
	     CK_METRICS_COUNTER},
	    {"informer_relists_total", "Lists after the first (after 410 Gone, errors).",
	     CK_METRICS_COUNTER},
	    {"informer_watch_restarts_total", "Watch requests after the first.",
	     CK_METRICS_COUNTER},
	    {"informer_watch_stalls_total", "Watches replaced because they delivered nothing.",
	     CK_METRICS_COUNTER},
	    {"informer_errors_total", "Failed list/watch attempts.", CK_METRICS_COUNTER},
	    {"informer_events_total", "Watch events received.", CK_METRICS_COUNTER},
	    {"informer_last_event_age_seconds", "Seconds since the last watch event or list.",
	     CK_METRICS_GAUGE},
	    {"informer_synced", "1 once the informer's first list has been processed.",
	     CK_METRICS_GAUGE},
	    {"informer_consistency_checks_total",
	     "Comparisons of the cache with the server (--cache-consistency-check-period).",
	     CK_METRICS_COUNTER},
	    {"informer_consistency_skipped_total",
	     "Consistency checks skipped (resourceVersion compacted, list failed, never quiet).",
	     CK_METRICS_COUNTER},
	    {"informer_consistency_divergent_objects",
	     "Objects missing, extra or stale in the cache at the last consistency check.",
	     CK_METRICS_GAUGE},
	    {"informer_shard_mode",
	     "Who applies the shard selector: 0 none, 1 not known yet, 2 the API server "
	     "(server-side), 3 this client (client-side: the server sent everything).",
	     CK_METRICS_GAUGE},
	    {"informer_shard_dropped_total",
	     "Listed objects and watch events outside the shard selector, dropped here.",
	     CK_METRICS_COUNTER},
	};
	for (size_t f = 0; f < CK_ARRAY_LEN(fam); f++) {
		ck_metrics_write_header(out, fam[f].name, fam[f].help, fam[f].type);
		for (size_t i = 0; i < n; i++) {
			double v = 0;
			switch (f) {
			case 0:
				v = (double)st[i].objects;
				break;
			case 1:
				v = (double)st[i].lists;
				break;
			case 2:
				v = (double)st[i].relists;
				break;
			case 3:
				v = (double)st[i].watch_restarts;
				break;
			case 4:
				v = (double)st[i].watch_stalls;
				break;
			case 5:
				v = (double)st[i].errors;
				break;
			case 6:
				v = (double)st[i].events;
				break;
			case 7:
				v = st[i].last_event_wall_ns
				        ? (double)(now - st[i].last_event_wall_ns) / 1e9
				        : -1;
				break;
			case 8:
				v = st[i].synced ? 1 : 0;
				break;
			case 9:
				v = (double)st[i].consistency_checks;
				break;
			case 10:
				v = (double)st[i].consistency_skipped;
				break;
			case 11:
				v = (double)st[i].consistency_last_diff;
				break;
			case 12:
				v = (double)st[i].shard_mode;
				break;
			case 13:
				v = (double)st[i].shard_dropped;
				break;
			}
			ck_metrics_label_t l[] = {{"resource", ck_cache_informer_name(infs[i])}};
			ck_metrics_write_sample(out, fam[f].name, l, 1, v);
		}
	}
	free(st);
}

static void collect_events(void *ud, ck_sbuf_t *out)
{
	ck_manager_t *d = ud;
	if (d->recorder == NULL)
		return;
	ck_record_stats_t s;
	ck_record_stats(d->recorder, &s);
	ck_metrics_write_header(out, "events_total", "Kubernetes Events by outcome.",
	                        CK_METRICS_COUNTER);
	struct {
		const char *k;
		uint64_t v;
	} rows[] = {{"posted", s.posted},
	            {"patched", s.patched},
	            {"dropped_queue_full", s.dropped_queue_full},
	            {"dropped_spam", s.dropped_spam},
	            {"failed", s.failed}};
	for (size_t i = 0; i < CK_ARRAY_LEN(rows); i++) {
		ck_metrics_label_t l[] = {{"outcome", rows[i].k}};
		ck_metrics_write_sample(out, "events_total", l, 1, (double)rows[i].v);
	}
}

static void collect_queues(void *ud, ck_sbuf_t *out)
{
	ck_manager_t *d = ud;
	ck_wq_t *qs[MGR_MAX_CONTROLLERS];
	for (size_t i = 0; i < d->ncontrollers; i++)
		qs[i] = mgr_controller_queue(d->controllers[i]);
	if (d->ncontrollers > 0)
		ck_wq_metrics_write_all(qs, d->ncontrollers, out);
}

/* ---- Runnables ---- */

static void start_runnables(ck_manager_t *d)
{
	/* Never after a shutdown began (the elector may win the lease late), never twice. */
	if (atomic_load(&d->stopping) || atomic_exchange(&d->started, true))
		return;
	for (size_t i = 0; i < d->nrunnables; i++) {
		char *err = NULL;
		if (d->runnables[i].start(d->runnables[i].ud, &err) != 0) {
			CK_LOG_ERROR(err, "Cannot start");
			free(err);
		}
	}
}

/* Stops every runnable within grace_ms in all; 0 when all of them drained. */
static int stop_runnables(ck_manager_t *d, int64_t grace_ms)
{
	int rc = 0;
	uint64_t end =
	    ck_clk_mono_ns(ck_clk_real()) + (uint64_t)(grace_ms < 0 ? 0 : grace_ms) * CK_NS_PER_MS;
	for (size_t i = 0; i < d->nrunnables; i++) {
		uint64_t now = ck_clk_mono_ns(ck_clk_real());
		int64_t left = now >= end ? 0 : (int64_t)((end - now) / CK_NS_PER_MS);
		if (d->runnables[i].stop(d->runnables[i].ud, left) != 0)
			rc = -1;
	}
	return rc;
}

/* ---- Leader election callbacks (elector thread) ---- */

static void le_started(void *ud)
{
	ck_manager_t *d = ud;
	CK_LOG_INFO("Started leading", CK_KV_STR("identity", d->identity));
	if (d->m_leader)
		ck_metrics_gauge_set(d->m_leader, 1);
	start_runnables(d);
}

static void le_stopped(void *ud)
{
	ck_manager_t *d = ud;
	if (d->m_leader)
		ck_metrics_gauge_set(d->m_leader, 0);
	if (atomic_load(&d->stopping))
		return; /* our own release on shutdown */
	/* Lost the lease: stop writing at once; a restart re-joins as a candidate. */
	atomic_store(&d->lost_lease, true);
	stop_runnables(d, 0);
	CK_LOG_ERROR("leader election lost", "Stopping", CK_KV_STR("identity", d->identity));
	kill(getpid(), SIGTERM);
}

void ck_manager_stop(ck_manager_t *m)
{
	(void)m;
	/* The control thread's wait is for the signal; a flag of our own would need a
	 * second way to wake it. */
	kill(getpid(), SIGTERM);
}

/* ck_manager_run_with's body and what its thread reports back. */
typedef struct run_with {
	int (*body)(void *ud, char **err);
	void *ud;
	int rc;
	char *err;
	pthread_mutex_t mu;
	bool run_done; /* ck_manager_run returned: nobody waits for a stop any more */
	bool stopped;  /* the body's end sent the stop */
} run_with_t;

static void *run_with_main(void *arg)
{
	run_with_t *w = arg;
	w->rc = w->body(w->ud, &w->err);
	pthread_mutex_lock(&w->mu);
	if (!w->run_done) {
		ck_manager_stop(NULL); /* m itself may be freed by now: the stop needs none of it */
		w->stopped = true;
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int ck_manager_run_with(ck_manager_t *m, int (*body)(void *ud, char **err), void *ud,
                        char **body_err)
{
	run_with_t w = {.body = body, .ud = ud};
	pthread_mutex_init(&w.mu, NULL);
	pthread_t t;
	int rc = 1, err;
	*body_err = NULL;
	if ((err = pthread_create(&t, NULL, run_with_main, &w)) != 0) {
		CK_LOG_ERROR(strerror(err), "Cannot start the thread of the test body");
		ck_manager_free(m);
		*body_err = ck_xasprintf("the test body did not run: cannot start its thread: %s",
		                         strerror(err));
		goto out;
	}
	rc = ck_manager_run(m);
	pthread_mutex_lock(&w.mu);
	w.run_done = true;
	pthread_mutex_unlock(&w.mu);
	pthread_join(t, NULL);
	/* The manager ended on its own just before the body's stop: that SIGTERM is still
	 * pending (blocked in every thread) and would stop the next manager at once. */
	sigset_t pending, term;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	if (w.stopped && sigpending(&pending) == 0 && sigismember(&pending, SIGTERM))
		sigtimedwait(&term, NULL, &(struct timespec){0});
	if (w.rc != 0)
		*body_err = w.err != NULL
		                ? w.err
		                : ck_xasprintf("the test body failed (returned %d)", w.rc);
	else
		free(w.err);
out:
	pthread_mutex_destroy(&w.mu);
	return rc;
}

static void le_new_leader(void *ud, const char *identity)
{
	ck_manager_t *d = ud;
	if (strcmp(identity, d->identity) != 0)
		CK_LOG_INFO("New leader elected", CK_KV_STR("identity", identity));
}

static void le_event(void *ud, const char *reason, const char *message)
{
	ck_manager_t *d = ud;
	if (d->recorder == NULL)
		return;
	ck_record_ref_t ref = {.api_version = "coordination.k8s.io/v1",
	                       .kind = "Lease",
	                       .ns = d->le_ns,
	                       .name = d->opt.le_name,
	                       .uid = "",
	                       .resource_version = ""};
	ck_record_event_ref(d->recorder, &ref, CK_RECORD_NORMAL, reason, "%s", message);
}

static void le_log(void *ud, ck_le_log_level_t level, const char *msg)
{
	if (level == CK_LE_LOG_ERROR)
		CK_LOG_ERROR(msg, "Leader election");
	else if (level == CK_LE_LOG_WARNING)
		CK_LOG_WARN(msg);
	else
		CK_LOG_V(2, msg);
}

/* ---- Control thread ---- */

static void *second_signal_main(void *arg);

static int wait_signal(sigset_t *set, int timeout_ms)
{
	struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
	int sig = sigtimedwait(set, NULL, &ts);
	return sig > 0 ? sig : 0;
}

/* The signals the control thread takes: SIGINT, SIGTERM, and SIGUSR1 with
 * --cache-dump-file. */
static void control_signals(const ck_manager_t *d, sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	if (d->opt.cache_dump_file[0] != '\0')
		sigaddset(set, SIGUSR1);
}

/* wait_signal that serves SIGUSR1 (a cache dump) and waits on: 0 after timeout_ms,
 * or SIGINT/SIGTERM. */
static int wait_quit(ck_manager_t *d, sigset_t *set, int timeout_ms)
{
	int sig = wait_signal(set, timeout_ms);
	if (sig == SIGUSR1) {
		char *err = NULL;
		if (mgr_cache_dump(d, &err) != 0)
			CK_LOG_ERROR(err, "Cannot dump the caches");
		free(err);
		sig = 0;
	}
	return sig;
}

static void *control_main(void *arg)
{
	ck_manager_t *d = arg;
	sigset_t set;
	control_signals(d, &set);
	char *last_reason = NULL;
	uint64_t last_log = 0;
	int sig = 0;

	CK_LOG_INFO("Waiting for informer caches to sync");
	/* Polled every 20 ms: an initial list of an empty or small namespace takes a few
	 * milliseconds, and workers should not start up to a whole poll period later
	 * (client-go's WaitForCacheSync polls every 100 ms). The poll only reads flags. */
	while (!(sig = wait_quit(d, &set, 20))) {
		char *why = ck_cache_factory_sync_reason(d->factory);
		if (why == NULL)
			break;
		uint64_t now = ck_clk_mono_ns(ck_clk_real());
		/* Say why, when it changes and every 10 s; never hang silently. */
		if (last_reason == NULL || strcmp(why, last_reason) != 0 ||
		    now - last_log > 10 * CK_NS_PER_SEC) {
			CK_LOG_INFO("Caches not synced yet", CK_KV_STR("reason", why));
			last_log = now;
		}
		free(last_reason);
		last_reason = why;
	}
	free(last_reason);

	if (sig == 0) {
		atomic_store(&d->synced, true);
		CK_LOG_INFO("Caches synced");
		char *err = NULL;
		if (d->opt.leader_elect) {
			ck_le_config_t lc = {
			    .lease_namespace = d->le_ns,
			    .lease_name = d->opt.le_name,
			    .identity = d->identity,
			    .lease_duration_ms = (uint32_t)d->opt.le_lease_ms,
			    .renew_deadline_ms = (uint32_t)d->opt.le_renew_ms,
			    .retry_period_ms = (uint32_t)d->opt.le_retry_ms,
			    .release_on_cancel = true,
			    .on_started_leading = le_started,
			    .on_stopped_leading = le_stopped,
			    .on_new_leader = le_new_leader,
			    .on_event = le_event,
			    .on_log = le_log,
			    .ud = d,
			};
			CK_LOG_INFO("Attempting to acquire leader lease",
			            CK_KV_OBJ("lease", d->le_ns, d->opt.le_name),
			            CK_KV_STR("identity", d->identity));
			ck_le_t *e = ck_le_start(d->client, &lc, &err);
			pthread_mutex_lock(&d->le_mu);
			d->elector = e;
			pthread_mutex_unlock(&d->le_mu);
			if (e == NULL) {
				CK_LOG_ERROR(err, "Cannot start leader election");
				d->exit_code = 1;
				sig = SIGTERM;
			}
		} else if (d->shards != NULL) {
			if (mgr_shards_start(d, &err) != 0) {
				CK_LOG_ERROR(err, "Cannot join the shard group");
				d->exit_code = 1;
				sig = SIGTERM;
			} else {
				start_runnables(d);
			}
		} else {
			start_runnables(d);
		}
		free(err);
		while (!sig)
			sig = wait_quit(d, &set, 1000);
	}

	/* Shutdown. A second signal exits at once. */
	atomic_store(&d->stopping, true);
	if (atomic_load(&d->lost_lease))
		d->exit_code = 1;
	CK_LOG_INFO("Shutting down; a second signal exits immediately", CK_KV_INT("signal", sig));
	d->second_started = pthread_create(&d->second, NULL, second_signal_main, d) == 0;
	/* Stop taking work; let running reconciles finish within the grace period. */
	bool drained = stop_runnables(d, d->opt.shutdown_grace_ms) == 0;
	if (!drained) {
		CK_LOG_ERROR("timed out", "Workers did not finish within the grace period");
		d->exit_code = 1;
	}
	/* Buckets handed over only when no reconcile runs: a worker still running would
	 * write alongside the next owner. Otherwise they run out on their own. */
	if (d->shards != NULL && drained)
		mgr_shards_stop(d);
	else if (d->shards != NULL)
		CK_LOG_INFO("Not releasing the shard buckets while workers still run");
	if (d->elector && drained) {
		pthread_mutex_lock(&d->le_mu);
		ck_le_t *e = d->elector;
		d->elector = NULL;
		pthread_mutex_unlock(&d->le_mu);
		ck_le_stop(e); /* releases the lease: a standby takes over at once */
	} else if (d->elector) {
		/* A worker may still be writing: releasing now would let a standby
		 * write alongside it. The lease runs out on its own instead. */
		CK_LOG_INFO("Not releasing the lease while workers still run");
	}
	/* The recorder posts through the loop: flush it while the loop still runs.
	 * Servers first, since their collectors read the recorder. */
	ck_metrics_server_stop(d->metrics_srv);
	ck_metrics_server_stop(d->probe_srv);
	d->metrics_srv = d->probe_srv = NULL;
	if (drained) {
		ck_record_free(d->recorder);
		d->recorder = NULL;
	}
	ev_async_send(d->loop, &d->stop_async);
	return NULL;
}

/* A second SIGINT/SIGTERM during shutdown exits at once. Started when the
 * shutdown begins, so it is the only thread waiting for signals then. */
static void *second_signal_main(void *arg)
{
	ck_manager_t *d = arg;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	int sig = 0;
	if (sigwait(&set, &sig) == 0 && !atomic_load(&d->second_quit)) {
		char msg[160];
		int n = snprintf(msg, sizeof(msg), "%s: second signal, exiting\n", d->mo.name);
		ssize_t w = write(2, msg, n > 0 && (size_t)n < sizeof(msg) ? (size_t)n : 0);
		(void)w;
		_exit(1);
	}
	return NULL;
}

/* ---- Setup ---- */

static int usage_error(ck_manager_t *d, const char *msg)
{
	fprintf(stderr, "%s: %s\n", d->mo.name, msg);
	return EXIT_USAGE;
}

static ck_flagset_t *define_flags(ck_manager_t *d)
{
	mgr_options_t *o = &d->opt;
	ck_flagset_t *fs = ck_flagset_new(d->mo.name);
	ck_flag_string(fs, "kubeconfig", &o->kubeconfig,
	               "Path to a kubeconfig. Only required if out-of-cluster.");
	ck_flag_string(fs, "master", &o->master,
	               "The address of the Kubernetes API server. Overrides any value in "
	               "kubeconfig. Only required if out-of-cluster.");
	ck_flag_string(fs, "context", &o->context, "The kubeconfig context to use.");
	ck_flag_string(fs, "namespace", &o->namespace,
	               "Only watch objects in this namespace (default: all).");
	ck_flag_int(fs, "workers", &o->workers, 1, 1000, "Number of worker threads.");
	ck_flag_duration(fs, "resync-period", &o->resync_ms, "Informer resync period.");
	ck_flag_bool(fs, "priority-queue", &o->priority_queue,
	             "Controllers' work queues hand out new and changed objects before those "
	             "of the initial list and of resyncs (controller-runtime's priority "
	             "queue); false: one FIFO.");
	ck_flag_duration(fs, "cache-consistency-check-period", &o->consistency_ms,
	                 "Compare every informer's cache with the server this often and report "
	                 "divergence (log, metrics); 0 disables. Costs one list per period.");
	ck_flag_double(fs, "kube-api-qps", &o->qps,
	               "Client-side QPS limit towards the API server: at least 0.001 "
	               "(negative disables).");
	ck_flag_int(fs, "kube-api-burst", &o->burst, 1, 1000000, "Client-side burst.");
	ck_flag_int(fs, "v", &o->verbosity, 0, 10,
	            "Log verbosity (0 operator, 2 detail, 4 debug, 5 trace).");
	ck_flag_string(fs, "log-format", &o->log_format, "Log format: text or json.");
	ck_flag_string(fs, "trace-key", &o->trace_key,
	               "Log every step of this one key's journey, reflector to reconcile "
	               "(namespace/name, or name when cluster-scoped; docs/informers.md).");
	ck_flag_bool(fs, "version", &o->version, "Print the version and exit.");
	ck_flag_string(fs, "metrics-bind-address", &o->metrics_addr,
	               "Address of the Prometheus /metrics endpoint; 0 disables. The default is "
	               ":8443 with --metrics-secure, :8080 without.");
	ck_flag_bool(fs, "metrics-secure", &o->metrics_secure,
	             "Serve /metrics over HTTPS, only to callers the API server authenticates "
	             "(TokenReview) and authorizes for GET /metrics (SubjectAccessReview); "
	             "false serves plain HTTP to anyone.");
	ck_flag_string(fs, "metrics-cert-dir", &o->metrics_cert_dir,
	               "Directory holding the metrics server's certificate and key (see "
	               "--metrics-cert-name, --metrics-cert-key); empty: a self-signed "
	               "certificate made at start.");
	ck_flag_string(fs, "metrics-cert-name", &o->metrics_cert_name,
	               "File name of the metrics server's certificate in --metrics-cert-dir.");
	ck_flag_string(fs, "metrics-cert-key", &o->metrics_cert_key,
	               "File name of the metrics server's key in --metrics-cert-dir.");
	ck_flag_double(fs, "metrics-review-qps", &o->metrics_review_qps,
	               "With --metrics-secure: TokenReviews and SubjectAccessReviews per second "
	               "for /metrics callers; a caller over it gets 429 (negative: no limit).");
	ck_flag_int(fs, "metrics-review-burst", &o->metrics_review_burst, 1, 1000000,
	            "With --metrics-secure: reviews at once before --metrics-review-qps applies.");
	ck_flag_string(fs, "health-probe-bind-address", &o->probe_addr,
	               "Address of /healthz and /readyz; 0 disables.");
	ck_flag_duration(fs, "graceful-shutdown-timeout", &o->shutdown_grace_ms,
	                 "How long running syncs may take to finish after SIGTERM.");
	ck_flag_bool(fs, "leader-elect", &o->leader_elect,
	             "Elect a leader through a Lease; only the leader runs workers.");
	ck_flag_duration(fs, "leader-elect-lease-duration", &o->le_lease_ms,
	                 "How long a non-leader waits before it may take over an unrenewed lease.");
	ck_flag_duration(fs, "leader-elect-renew-deadline", &o->le_renew_ms,
	                 "How long the leader retries renewing before it gives up leading.");
	ck_flag_duration(fs, "leader-elect-retry-period", &o->le_retry_ms,
	                 "How long to wait between tries of acquiring or renewing.");
	ck_flag_string(fs, "leader-elect-resource-name", &o->le_name,
	               "Name of the Lease (with --shards-by: the prefix of the shard group's "
	               "Leases).");
	ck_flag_string(fs, "leader-elect-resource-namespace", &o->le_namespace,
	               "Namespace of the Lease, or of the shard group's Leases (default: the "
	               "pod's namespace).");
	ck_flag_string(fs, "shards-by", &o->shards_by,
	               "Run as one of several active replicas splitting the objects by the hash "
	               "of their namespace or uid (namespace or uid; empty: off). Each replica "
	               "lists and watches only its buckets (KEP-5866 shardSelector, filtered "
	               "again on the client); Leases coordinate them (docs/sharding.md). "
	               "Excludes --leader-elect.");
	ck_flag_int(fs, "shards", &o->shards, 1, CK_SHARDING_MAX_BUCKETS,
	            "With --shards-by: the number of hash buckets the replicas split.");
	ck_flag_duration(fs, "shards-lease-duration", &o->shards_lease_ms,
	                 "With --shards-by: how long a bucket of a replica that stopped renewing "
	                 "stays its own before another replica may take it.");
	ck_flag_duration(fs, "shards-renew-deadline", &o->shards_renew_ms,
	                 "With --shards-by: how long a replica retries renewing a bucket before "
	                 "it stops working on it.");
	ck_flag_duration(fs, "shards-retry-period", &o->shards_retry_ms,
	                 "With --shards-by: how often the bucket Leases are renewed and the "
	                 "shares rebalanced.");
	ck_flag_string(fs, "reconcile-log", &o->reconcile_log,
	               "Append each reconcile's start and end (wall clock, ns), identity, "
	               "controller and key to this file, one line each (tests: the sharding "
	               "overlap oracle). Empty: off.");
	ck_flag_string(fs, "cache-dump-file", &o->cache_dump_file,
	               "On SIGUSR1, write every informer's cached keys to this file, one "
	               "\"<resource> <namespace/name>\" line each (what a sharded replica "
	               "holds). Empty: off, and SIGUSR1 keeps its default action.");
	if (d->mo.define_flags)
		d->mo.define_flags(d->mo.ud, fs);
	return fs;
}

/* Leader election settings: namespace, identity, durations. 0, or 2 (usage). */
static int setup_leader_election(ck_manager_t *d, char **err)
{
	mgr_options_t *o = &d->opt;
	if (o->le_namespace && *o->le_namespace) {
		d->le_ns = ck_xstrdup(o->le_namespace);
	} else {
		d->le_ns = ck_le_default_namespace(NULL, err);
		if (d->le_ns == NULL) {
			ck_err_wrap(err, "-leader-elect-resource-namespace is not set and the "
			                 "pod's namespace is unknown");
			return EXIT_USAGE;
		}
	}
	ck_le_config_t chk = {.lease_namespace = d->le_ns,
	                      .lease_name = o->le_name,
	                      .identity = d->identity,
	                      .lease_duration_ms = (uint32_t)o->le_lease_ms,
	                      .renew_deadline_ms = (uint32_t)o->le_renew_ms,
	                      .retry_period_ms = (uint32_t)o->le_retry_ms};
	/* The elector counts in 32-bit milliseconds: refuse what would wrap. */
	const int64_t max_ms = 24LL * 3600 * 1000;
	if (o->le_lease_ms <= 0 || o->le_renew_ms <= 0 || o->le_retry_ms <= 0 ||
	    o->le_lease_ms > max_ms || o->le_renew_ms > max_ms || o->le_retry_ms > max_ms ||
	    ck_le_validate(&chk, err) != 0) {
		if (*err == NULL)
			*err = ck_xstrdup(
			    "leader election durations must be positive and at most 24h");
		return EXIT_USAGE;
	}
	return 0;
}

/* Everything ck_manager_new makes after the flags. 0, 1 or 2 (usage). */
/* "<name>/<version> (linux) libckube/<version>", for both clients. */
static void user_agent(const ck_manager_t *d, char *buf, size_t n)
{
	snprintf(buf, n, "%s/%s (linux) libckube/%s", d->mo.name, d->mo.version, ck_version());
}

/* Logging as the flags say, and the flags no parser bound could check. */
static int setup_flags(ck_manager_t *d, char **err)
{
	mgr_options_t *o = &d->opt;
	ck_log_format_t lf;
	if (ck_log_format_parse(o->log_format, &lf, err) != 0)
		return EXIT_USAGE;
	ck_log_set_format(lf);
	ck_log_set_verbosity((int)o->verbosity);
	if (ck_log_set_trace_key(o->trace_key, err) != 0) {
		ck_err_wrap(err, "-trace-key");
		return EXIT_USAGE;
	}
	if (o->trace_key[0] != '\0')
		CK_LOG_INFO("Tracing one key through informers, queues and workers",
		            CK_KV_STR("key", o->trace_key));
	if (o->resync_ms < 0 || (o->resync_ms > 0 && o->resync_ms < 1000)) {
		*err = ck_xstrdup("-resync-period: must be 0 (off) or at least 1s");
		return EXIT_USAGE;
	}
	if (o->consistency_ms < 0 || (o->consistency_ms > 0 && o->consistency_ms < 1000)) {
		*err =
		    ck_xstrdup("-cache-consistency-check-period: must be 0 (off) or at least 1s");
		return EXIT_USAGE;
	}
	/* The client refuses these too; here the message names the flag. */
	if (!isfinite(o->qps) || (o->qps > 0 && o->qps < CK_CLIENT_MIN_QPS)) {
		*err = ck_xasprintf("-kube-api-qps: %g: must be at least %g requests/s, or "
		                    "negative to disable client-side rate limiting",
		                    o->qps, CK_CLIENT_MIN_QPS);
		return EXIT_USAGE;
	}
	if (o->metrics_review_qps >= 0 && o->metrics_review_qps < 0.01) {
		*err =
		    ck_xstrdup("-metrics-review-qps: must be negative (no limit) or at least 0.01");
		return EXIT_USAGE;
	}
	if (o->shutdown_grace_ms < 0) {
		*err = ck_xstrdup("-graceful-shutdown-timeout: must not be negative");
		return EXIT_USAGE;
	}
	return 0;
}

/* Signals: blocked everywhere, taken synchronously by the control threads. */
static void setup_signals(const ck_manager_t *d)
{
	sigset_t set;
	control_signals(d, &set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* The configuration, leader election's settings, the event loop and the client. */
static int setup_client(ck_manager_t *d, char **err)
{
	mgr_options_t *o = &d->opt;
	ck_config_load_opts_t lo = {
	    .kubeconfig = o->kubeconfig, .master = o->master, .context = o->context};
	ck_config_t *cfg = ck_config_load(&lo, err);
	if (cfg == NULL)
		return EXIT_USAGE;
	struct ck_config_view view;
	ck_config_view(cfg, &view);

	d->identity = ck_le_default_identity();
	if (o->leader_elect || o->shards_by[0] != '\0') {
		int rc = setup_leader_election(d, err);
		if (rc != 0) {
			ck_config_free(cfg);
			return rc;
		}
	}

	d->loop = ev_loop_new(EVFLAG_AUTO);
	if (d->loop == NULL) {
		ck_config_free(cfg);
		*err = ck_xstrdup("cannot create the event loop");
		return 1;
	}
	char ua[160];
	user_agent(d, ua, sizeof(ua));
	ck_client_opts_t co = {.qps = o->qps, .burst = (int)o->burst, .user_agent = ua};
	d->client = ck_client_new(d->loop, cfg, &co, err);
	/* cfg is taken by the client, even on failure */
	if (d->client == NULL)
		return EXIT_USAGE;
	CK_LOG_INFO("Starting", CK_KV_STR("version", d->mo.version),
	            CK_KV_STR("server", view.server), CK_KV_STR("config", view.source));
	return 0;
}

/* The registry with the process, heap and leader-election figures. */
static void setup_metrics(ck_manager_t *d)
{
	mgr_options_t *o = &d->opt;
	d->reg = ck_metrics_registry_new();
	ck_metrics_registry_add_process_collector(d->reg, NULL);
	ck_metrics_registry_add_heap_collector(d->reg);
	ck_metrics_gauge_vec_t *lv = ck_metrics_gauge_vec_new(
	    d->reg, "leader_election_master_status",
	    "1 if this process is the leader, 0 if not (only with -leader-elect).",
	    CK_METRICS_LABELS("name"), NULL);
	if (lv && o->leader_elect)
		d->m_leader = ck_metrics_gauge_vec_get(lv, CK_METRICS_LABELS(o->le_name));
}

/* The event recorder, reporting as the manager's name and identity. */
static int setup_recorder(ck_manager_t *d, char **err)
{
	/* Flushing events at shutdown is best effort: bounded to 5 s (plus one
	 * in-flight write, itself bounded) so that a partitioned daemon exits soon. */
	ck_record_opts_t ro = {.component = d->mo.name,
	                       .reporting_controller = d->mo.reporting_controller
	                                                   ? d->mo.reporting_controller
	                                                   : d->mo.name,
	                       .reporting_instance = d->identity,
	                       .shutdown_timeout_ms = 5000};
	d->recorder = ck_record_new(d->client, &ro, err);
	return d->recorder != NULL ? 0 : 1;
}

/* The informer factory, and the collectors that read it, the client and queues. */
static void setup_factory(ck_manager_t *d)
{
	mgr_options_t *o = &d->opt;
	ck_cache_factory_opts_t fo = {
	    .default_resync_ms = (uint64_t)o->resync_ms,
	    .consistency_check_ms = (uint64_t)o->consistency_ms,
	    .ns = o->namespace,
	    .on_watch_error = on_watch_error,
	    .watch_error_ud = d,
	    .shard_parts = d->shards != NULL,
	    .shard_field = strcmp(o->shards_by, "uid") == 0 ? CK_SHARD_UID : CK_SHARD_NAMESPACE};
	d->factory = ck_cache_factory_new(d->loop, d->client, &fo);
	if (d->shards != NULL)
		ck_metrics_registry_add_collector(d->reg, mgr_shards_collect, d);
	ck_metrics_registry_add_collector(d->reg, collect_client, d);
	ck_metrics_registry_add_collector(d->reg, collect_informers, d);
	ck_metrics_registry_add_collector(d->reg, collect_events, d);
	ck_metrics_registry_add_collector(d->reg, collect_queues, d);
}

/* The metrics server (HTTPS with its own review client, or plain) and the probes. */
static int setup_servers(ck_manager_t *d, char **err)
{
	mgr_options_t *o = &d->opt;
	/* One server when both flags name the same address, unless /metrics is HTTPS:
	 * the kubelet probes over plain HTTP. */
	bool same = strcmp(o->metrics_addr, o->probe_addr) == 0 && strcmp(o->metrics_addr, "0");
	if (o->metrics_secure && same) {
		*err = ck_xasprintf("--metrics-bind-address and --health-probe-bind-address are "
		                    "both \"%s\": with --metrics-secure /metrics is HTTPS and the "
		                    "probes plain HTTP, so they need two addresses (or pass "
		                    "--metrics-secure=false)",
		                    o->metrics_addr);
		return EXIT_USAGE;
	}
	if (o->metrics_secure && strcmp(o->metrics_addr, "0") != 0) {
		/* The reviews get a client of their own, as controller-runtime builds one
		 * for its filter: on the controller's client every unseen token spent a
		 * request of the QPS its reconciles need. Its limiter is off because the
		 * gate limits reviews before asking (answering 429, where a client-side
		 * limiter would queue the scrape and hold the server thread). */
		ck_config_load_opts_t lo = {
		    .kubeconfig = o->kubeconfig, .master = o->master, .context = o->context};
		ck_config_t *rcfg = ck_config_load(&lo, err);
		if (rcfg == NULL)
			return EXIT_USAGE;
		char ua[160], rua[200];
		user_agent(d, ua, sizeof(ua));
		snprintf(rua, sizeof(rua), "%s metrics-auth", ua);
		ck_client_opts_t rco = {.qps = -1, .user_agent = rua};
		d->review_client = ck_client_new(d->loop, rcfg, &rco, err);
		if (d->review_client == NULL)
			return EXIT_USAGE;
		ck_metrics_reviewer_t rv;
		ck_metrics_kube_reviewer(d->review_client, &rv);
		ck_metrics_secure_opts_t so = {.cert_dir = o->metrics_cert_dir,
		                               .cert_name = o->metrics_cert_name,
		                               .key_name = o->metrics_cert_key,
		                               .reviewer = &rv,
		                               .review_qps = o->metrics_review_qps,
		                               .review_burst = (int)o->metrics_review_burst};
		if (ck_metrics_server_start_secure(o->metrics_addr, "--metrics-bind-address",
		                                   d->reg, &so, &d->metrics_srv, err) != 0)
			return EXIT_USAGE;
		if (d->metrics_srv != NULL)
			CK_LOG_INFO(
			    "Serving metrics over HTTPS; callers need a token allowed to get "
			    "/metrics",
			    CK_KV_STR("address", o->metrics_addr),
			    CK_KV_INT("port", ck_metrics_server_port(d->metrics_srv)),
			    CK_KV_STR("certificate", o->metrics_cert_dir[0] ? o->metrics_cert_dir
			                                                    : "self-signed"));
	} else if (ck_metrics_server_start(o->metrics_addr, "--metrics-bind-address", d->reg, same,
	                                   &d->metrics_srv, err) != 0) {
		return EXIT_USAGE;
	}
	if (!same && ck_metrics_server_start(o->probe_addr, "--health-probe-bind-address", NULL, 1,
	                                     &d->probe_srv, err) != 0)
		return EXIT_USAGE;
	ck_metrics_server_t *ps = same ? d->metrics_srv : d->probe_srv;
	ck_metrics_probe_add_check(ps, "healthz", "event-loop", check_loop, d, NULL);
	ck_metrics_probe_add_check(ps, "readyz", "informers-synced", check_synced, d, NULL);
	ck_metrics_probe_add_check(ps, "readyz", "leader-election", check_leader, d, NULL);
	if (o->leader_elect)
		ck_metrics_probe_add_check(ps, "healthz", "leader-election", check_le_renewing, d,
		                           NULL);
	if (d->shards != NULL)
		ck_metrics_probe_add_check(ps, "readyz", "shards", mgr_shards_check, d, NULL);
	return 0;
}

/* --reconcile-log: opened for appending (created 0600). 0, or -1 with *err. */
static int o_reconcile_log(ck_manager_t *d, char **err)
{
	const char *path = d->opt.reconcile_log;
	if (path[0] == '\0')
		return 0;
	d->reconcile_log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (d->reconcile_log_fd < 0)
		return ck_err_set(err, "-reconcile-log: %s: %s", path, strerror(errno));
	return 0;
}

/* Each stage in the order it needs the earlier ones; stops at the first failure
 * (ck_manager_free releases what was made). */
static int setup(ck_manager_t *d, char **err)
{
	int rc;
	if ((rc = setup_flags(d, err)) != 0)
		return rc;
	setup_signals(d);
	if ((rc = setup_client(d, err)) != 0)
		return rc;
	setup_metrics(d);
	if ((rc = setup_recorder(d, err)) != 0)
		return rc;
	if (mgr_shards_setup(d, err) != 0)
		return EXIT_USAGE;
	if (o_reconcile_log(d, err) != 0)
		return EXIT_USAGE;
	const char *delay = getenv("CKUBE_TESTING_RECONCILE_DELAY_MS");
	if (delay != NULL && atoi(delay) > 0 && atoi(delay) <= 10000) {
		d->testing_delay_us = (useconds_t)atoi(delay) * 1000;
		CK_LOG_INFO("Testing: every reconcile is delayed",
		            CK_KV_STR("CKUBE_TESTING_RECONCILE_DELAY_MS", delay));
	}
	setup_factory(d);
	return setup_servers(d, err);
}

/* The default --metrics-bind-address, compared by address after parsing. */
static const char metrics_secure_default[] = ":8443";

ck_manager_t *ck_manager_new(const ck_manager_opts_t *mo, int argc, char **argv, int *exit_code)
{
	ck_manager_t *d = ck_xcalloc(1, sizeof(*d));
	pthread_mutex_init(&d->le_mu, NULL);
	d->mo = *mo;
	if (d->mo.name == NULL || d->mo.name[0] == '\0')
		d->mo.name = program_invocation_short_name;
	if (d->mo.version == NULL)
		d->mo.version = ck_version();
	d->opt = (mgr_options_t){
	    .workers = mo->workers > 0 ? mo->workers : 2,
	    .resync_ms = mo->resync_ms > 0 ? mo->resync_ms : 30000,
	    .qps = mo->qps != 0 ? mo->qps : 20,
	    .burst = mo->burst > 0 ? mo->burst : 30,
	    .log_format = "text",
	    .trace_key = "",
	    .metrics_addr = mo->metrics_addr ? mo->metrics_addr : metrics_secure_default,
	    .metrics_secure = true,
	    .metrics_cert_dir = "",
	    .metrics_cert_name = "tls.crt",
	    .metrics_cert_key = "tls.key",
	    .metrics_review_qps = 5,
	    .metrics_review_burst = 10,
	    .probe_addr = mo->probe_addr ? mo->probe_addr : ":8081",
	    .shutdown_grace_ms = mo->shutdown_grace_ms > 0 ? mo->shutdown_grace_ms : 30000,
	    .le_lease_ms = CK_LE_DEFAULT_LEASE_DURATION_MS,
	    .le_renew_ms = CK_LE_DEFAULT_RENEW_DEADLINE_MS,
	    .le_retry_ms = CK_LE_DEFAULT_RETRY_PERIOD_MS,
	    .le_name = d->mo.name,
	    .shards_by = "",
	    .shards = CK_SHARDING_DEFAULT_BUCKETS,
	    .shards_lease_ms = CK_LE_DEFAULT_LEASE_DURATION_MS,
	    .shards_renew_ms = CK_LE_DEFAULT_RENEW_DEADLINE_MS,
	    .shards_retry_ms = CK_LE_DEFAULT_RETRY_PERIOD_MS,
	    .reconcile_log = "",
	    .priority_queue = true,
	    .cache_dump_file = "",
	};
	d->reconcile_log_fd = -1;
	char *err = NULL;
	int rc;
	d->flags = define_flags(d);
	int first = 0;
	/* Usage goes to stderr, as Go's flag package prints it. */
	ck_flag_result_t fr = ck_flag_parse(d->flags, argc, argv, stderr, &first, &err);
	if (fr == CK_FLAG_HELP) {
		rc = 0;
		goto fail;
	}
	if (fr == CK_FLAG_ERROR) {
		rc = EXIT_USAGE;
		goto fail;
	}
	if (first < argc) {
		err = ck_xasprintf("unexpected argument \"%s\"", argv[first]);
		rc = EXIT_USAGE;
		goto fail;
	}
	/* The default address follows --metrics-secure unless one was given (the pointer
	 * is the default's only while the flag was not passed). */
	if (d->opt.metrics_addr == metrics_secure_default && !d->opt.metrics_secure)
		d->opt.metrics_addr = ":8080";
	if (d->opt.version) {
		printf("%s %s\n", d->mo.name, d->mo.version);
		rc = 0;
		goto fail;
	}
	rc = setup(d, &err);
	if (rc != 0)
		goto fail;
	*exit_code = 0;
	return d;
fail:
	if (rc == EXIT_USAGE && err != NULL)
		usage_error(d, err);
	else if (rc != 0)
		CK_LOG_ERROR(err, "Cannot start");
	*exit_code = rc;
	free(err);
	ck_manager_free(d);
	return NULL;
}

void ck_manager_free(ck_manager_t *d)
{
	if (d == NULL)
		return;
	/* Servers first: their checks read the elector. */
	ck_metrics_server_stop(d->metrics_srv);
	ck_metrics_server_stop(d->probe_srv);
	if (d->elector)
		ck_le_stop(d->elector);
	mgr_shards_free(d);
	if (d->reconcile_log_fd >= 0)
		close(d->reconcile_log_fd);
	pthread_mutex_destroy(&d->le_mu);
	for (size_t i = 0; i < d->ncontrollers; i++)
		mgr_controller_free(d->controllers[i]);
	ck_record_free(d->recorder);
	ck_cache_factory_free(d->factory);
	ck_client_free(d->review_client);
	ck_client_free(d->client);
	ck_metrics_registry_free(d->reg);
	if (d->loop)
		ev_loop_destroy(d->loop);
	for (size_t i = 0; i < d->ninformers; i++)
		free(d->last_watch_error[i]);
	free(d->identity);
	free(d->le_ns);
	free(d->setup_err);
	ck_flagset_free(d->flags);
	free(d);
}

int ck_manager_run(ck_manager_t *d)
{
	char *err = NULL;
	if (d->setup_err != NULL) {
		err = d->setup_err;
		d->setup_err = NULL;
		goto fail;
	}
	atomic_store(&d->last_tick_ns, ck_clk_mono_ns(ck_clk_real()));
	ev_timer_init(&d->tick, on_tick, 1.0, 1.0);
	d->tick.data = d;
	ev_timer_start(d->loop, &d->tick);
	ev_async_init(&d->stop_async, on_stop_async);
	d->stop_async.data = d;
	ev_async_start(d->loop, &d->stop_async);

	if (ck_cache_factory_start(d->factory, &err) != 0)
		goto fail;
	if (pthread_create(&d->control, NULL, control_main, d) != 0) {
		err = ck_xstrdup("cannot start the control thread");
		goto fail;
	}
	ev_run(d->loop, 0);
	pthread_join(d->control, NULL);
	if (d->second_started) {
		/* Wake its sigwait with a signal sent to it alone, marked as ours. Not
		 * pthread_cancel: glibc's cancellation unwinds through libgcc_s, which a
		 * minimal image lacks ("libgcc_s.so.1 must be installed for pthread_cancel
		 * to work", then SIGSEGV: exit 139 on the real node). */
		atomic_store(&d->second_quit, true);
		pthread_kill(d->second, SIGTERM);
		pthread_join(d->second, NULL);
	}
	int result = d->exit_code;
	CK_LOG_INFO("Stopped", CK_KV_INT("exit_code", result));
	if (d->recorder != NULL) {
		/* Workers did not drain: they still use the client, the caches, the
		 * recorder and the elector, so none of it may be freed. Leave now. */
		fflush(NULL);
		_exit(result);
	}
	ck_manager_free(d);
	return result;
fail:
	CK_LOG_ERROR(err, "Cannot start");
	free(err);
	ck_manager_free(d);
	return 1;
}

/* ---- Accessors and registration ---- */

ck_client_t *ck_manager_client(ck_manager_t *m)
{
	return m->client;
}

ck_cache_factory_t *ck_manager_factory(ck_manager_t *m)
{
	return m->factory;
}

ck_record_t *ck_manager_recorder(ck_manager_t *m)
{
	return m->recorder;
}

ck_metrics_registry_t *ck_manager_metrics(ck_manager_t *m)
{
	return m->reg;
}

const char *ck_manager_namespace(ck_manager_t *m)
{
	return m->opt.namespace;
}

int ck_manager_workers(ck_manager_t *m)
{
	return (int)m->opt.workers;
}

ck_cache_informer_t *ck_manager_informer(ck_manager_t *m, const ck_type_t *t)
{
	char *err = NULL;
	ck_cache_informer_t *inf = ck_cache_factory_informer_err(m->factory, t, &err);
	if (inf == NULL) {
		/* A setup mistake (e.g. two descriptors of one resource keeping different
		 * fields): keep the first reason, and refuse to run with it. */
		if (m->setup_err == NULL)
			m->setup_err = err ? err : ck_xstrdup("informer refused");
		else
			free(err);
		return NULL;
	}
	for (size_t i = 0; i < m->ninformers; i++)
		if (m->informers[i] == inf)
			return inf;
	if (m->ninformers == MGR_MAX_INFORMERS)
		ck_fatal("manager: more than %d informers", MGR_MAX_INFORMERS);
	m->informers[m->ninformers++] = inf;
	return inf;
}

void ck_manager_add_runnable(ck_manager_t *m, const ck_runnable_t *r)
{
	if (m->nrunnables == MGR_MAX_RUNNABLES)
		ck_fatal("manager: more than %d runnables", MGR_MAX_RUNNABLES);
	m->runnables[m->nrunnables++] = *r;
}

ck_controller_t *ck_manager_add_controller_opts(ck_manager_t *m, const ck_controller_opts_t *o)
{
	if (m->ncontrollers == MGR_MAX_CONTROLLERS)
		ck_fatal("manager: more than %d controllers", MGR_MAX_CONTROLLERS);
	ck_controller_t *c = mgr_controller_new(m, o);
	m->controllers[m->ncontrollers++] = c;
	ck_runnable_t r = {.start = mgr_controller_start, .stop = mgr_controller_stop, .ud = c};
	ck_manager_add_runnable(m, &r);
	return c;
}

ck_controller_t *ck_manager_add_controller(ck_manager_t *m, const char *name, ck_reconcile_fn fn,
                                           void *ud)
{
	ck_controller_opts_t o = {.name = name, .reconcile = fn, .ud = ud};
	return ck_manager_add_controller_opts(m, &o);
}
