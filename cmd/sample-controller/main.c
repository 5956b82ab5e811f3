/*
 * sample-controller: flags, signals and wiring only; the reconcile logic is in
 * controller.c.
 *
 * Threads:
 *   main     runs the libev loop (network, informers, timers) until shutdown.
 *   control  waits for the caches to sync, starts leader election or the workers,
 *            then waits for SIGINT/SIGTERM (sigtimedwait: signals are blocked in
 *            every thread, so no handler runs in signal context) and shuts down in
 *            order: workers drain, lease released, events flushed, loop stopped.
 *   workers, the leader elector, the event recorder, the metrics server: their own.
 */
#include "api/samplecontroller/v1alpha1/foo.h"
#include "cmd/sample-controller/controller.h"
#include <ckube/base.h>
#include <ckube/cache.h>
#include <ckube/flag.h>
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/types.h>
#include <ckube/leaderelection.h>
#include <ckube/log.h>
#include <ckube/metrics.h>
#include <ckube/record.h>

#include <ev.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG       "sample-controller"
/* The reportingController of its events. */
#define SC_REPORTING_CONTROLLER "samplecontroller.k8s.io/sample-controller"
#define EXIT_USAGE 2

typedef struct options {
	const char *kubeconfig;
	const char *master;
	const char *context;
	const char *namespace;
	int64_t workers;
	int64_t resync_ms;
	double qps;
	int64_t burst;
	int64_t verbosity;
	const char *log_format;
	bool version;
	const char *metrics_addr;
	const char *probe_addr;
	int64_t shutdown_grace_ms;
	bool leader_elect;
	int64_t le_lease_ms, le_renew_ms, le_retry_ms;
	const char *le_name;
	const char *le_namespace;
} options_t;

typedef struct daemon_state {
	options_t opt;
	struct ev_loop *loop;
	ck_client_t *client;
	ck_cache_factory_t *factory;
	ck_cache_informer_t *foos, *deployments;
	controller_t *ctl;
	ck_record_t *recorder;
	ck_metrics_registry_t *reg;
	ck_metrics_server_t *metrics_srv, *probe_srv;
	ck_metrics_gauge_t *m_leader;
	ck_le_t *elector;
	char *last_watch_error[2]; /* foos, deployments: the last non-healing error logged */
	char *identity;
	char *le_ns;
	ev_async stop_async;
	ev_timer tick;
	_Atomic uint64_t last_tick_ns;
	atomic_bool synced;
	atomic_bool lost_lease;
	atomic_bool stopping;
	int exit_code;
	pthread_t control;
} daemon_t;

/* ---- Loop thread ---- */

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	daemon_t *d = w->data;
	atomic_store(&d->last_tick_ns, ck_clk_mono_ns(ck_clk_real()));
}

static void on_stop_async(struct ev_loop *loop, ev_async *w, int revents)
{
	daemon_t *d = w->data;
	ck_cache_factory_shutdown(d->factory);
	ev_timer_stop(loop, &d->tick);
	ev_async_stop(loop, &d->stop_async);
	ev_break(loop, EVBREAK_ALL);
}

static void on_watch_error(void *ud, ck_cache_informer_t *inf, const char *msg, const ck_result_t *res,
                           bool healing)
{
	daemon_t *d = ud;
	/* Errors retrying will not heal (403, 404 for a missing CRD) need a person:
	 * say so at ERROR, once per distinct message; the informer already logs every
	 * failure at a lower level. Loop thread only, so no lock. */
	char **last = inf == d->foos ? &d->last_watch_error[0] : &d->last_watch_error[1];
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
	daemon_t *d = ud;
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
	daemon_t *d = ud;
	if (atomic_load(&d->synced))
		return 0;
	char *why = ck_cache_factory_sync_reason(d->factory);
	*reason = why ? why : ck_xstrdup("caches not synced yet");
	return -1;
}

static int check_leader(void *ud, char **reason)
{
	daemon_t *d = ud;
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

/* One histogram series per verb, labelled as client-go's: verb and host. */
static void rest_latency(void *ud, const ck_client_latency_t *lat)
{
	struct rest_ctx *r = ud;
	for (size_t i = 0; i < CK_CLIENT_LATENCY_NBUCKETS; i++) {
		char le[32];
		snprintf(le, sizeof(le), "%g", lat->bounds[i]);
		ck_metrics_label_t l[] = {{"host", r->host}, {"le", le}, {"verb", lat->verb}};
		ck_metrics_write_sample(r->out, "rest_client_request_duration_seconds_bucket", l, 3,
		                     (double)lat->counts[i]);
	}
	ck_metrics_label_t inf[] = {{"host", r->host}, {"le", "+Inf"}, {"verb", lat->verb}};
	ck_metrics_write_sample(r->out, "rest_client_request_duration_seconds_bucket", inf, 3,
	                     (double)lat->count);
	ck_metrics_label_t h[] = {{"host", r->host}, {"verb", lat->verb}};
	ck_metrics_write_sample(r->out, "rest_client_request_duration_seconds_sum", h, 2, lat->sum);
	ck_metrics_write_sample(r->out, "rest_client_request_duration_seconds_count", h, 2,
	                     (double)lat->count);
}

static void collect_client(void *ud, ck_sbuf_t *out)
{
	daemon_t *d = ud;
	struct rest_ctx r = {out, ck_client_host(d->client)};
	ck_metrics_write_header(
	    out, "rest_client_requests_total",
	    "Number of HTTP requests, partitioned by status code, method, and host.",
	    CK_METRICS_COUNTER);
	ck_client_stats_foreach(d->client, rest_stat, &r);

	ck_metrics_write_header(out, "rest_client_request_duration_seconds",
	                     "Request latency in seconds (non-watch requests), partitioned by "
	                     "verb and host.",
	                     CK_METRICS_HISTOGRAM);
	ck_client_latency_foreach(d->client, rest_latency, &r);
}

static void collect_informers(void *ud, ck_sbuf_t *out)
{
	daemon_t *d = ud;
	ck_cache_informer_t *infs[] = {d->deployments, d->foos};
	ck_cache_stats_t st[2];
	for (int i = 0; i < 2; i++)
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
	    {"informer_watch_restarts_total", "Watch requests after the first.", CK_METRICS_COUNTER},
	    {"informer_watch_stalls_total", "Watches replaced because they delivered nothing.",
	     CK_METRICS_COUNTER},
	    {"informer_errors_total", "Failed list/watch attempts.", CK_METRICS_COUNTER},
	    {"informer_events_total", "Watch events received.", CK_METRICS_COUNTER},
	    {"informer_last_event_age_seconds", "Seconds since the last watch event or list.",
	     CK_METRICS_GAUGE},
	    {"informer_synced", "1 once the informer's first list has been processed.",
	     CK_METRICS_GAUGE},
	};
	for (size_t f = 0; f < CK_ARRAY_LEN(fam); f++) {
		ck_metrics_write_header(out, fam[f].name, fam[f].help, fam[f].type);
		for (int i = 0; i < 2; i++) {
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
			}
			ck_metrics_label_t l[] = {{"resource", ck_cache_informer_name(infs[i])}};
			ck_metrics_write_sample(out, fam[f].name, l, 1, v);
		}
	}
}

static void collect_events(void *ud, ck_sbuf_t *out)
{
	daemon_t *d = ud;
	if (d->recorder == NULL)
		return;
	ck_record_stats_t s;
	ck_record_stats(d->recorder, &s);
	ck_metrics_write_header(out, "events_total", "Kubernetes Events by outcome.", CK_METRICS_COUNTER);
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

/* ---- Leader election callbacks (elector thread) ---- */

static void le_started(void *ud)
{
	daemon_t *d = ud;
	char *err = NULL;
	CK_LOG_INFO("Started leading", CK_KV_STR("identity", d->identity));
	if (d->m_leader)
		ck_metrics_gauge_set(d->m_leader, 1);
	if (controller_start_workers(d->ctl, &err) != 0) {
		CK_LOG_ERROR(err, "Cannot start workers");
		free(err);
	}
}

static void le_stopped(void *ud)
{
	daemon_t *d = ud;
	if (d->m_leader)
		ck_metrics_gauge_set(d->m_leader, 0);
	if (atomic_load(&d->stopping))
		return; /* our own release on shutdown */
	/* Lost the lease: stop writing at once; a restart re-joins as a candidate. */
	atomic_store(&d->lost_lease, true);
	controller_shutdown(d->ctl, 0);
	CK_LOG_ERROR("leader election lost", "Stopping", CK_KV_STR("identity", d->identity));
	kill(getpid(), SIGTERM);
}

static void le_new_leader(void *ud, const char *identity)
{
	daemon_t *d = ud;
	if (strcmp(identity, d->identity) != 0)
		CK_LOG_INFO("New leader elected", CK_KV_STR("identity", identity));
}

static void le_event(void *ud, const char *reason, const char *message)
{
	daemon_t *d = ud;
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

static void *control_main(void *arg)
{
	daemon_t *d = arg;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	char *last_reason = NULL;
	uint64_t last_log = 0;
	int sig = 0;

	CK_LOG_INFO("Waiting for informer caches to sync");
	while (!(sig = wait_signal(&set, 200))) {
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
			d->elector = ck_le_start(d->client, &lc, &err);
		} else if (controller_start_workers(d->ctl, &err) != 0) {
			CK_LOG_ERROR(err, "Cannot start workers");
		}
		if (d->opt.leader_elect && d->elector == NULL) {
			CK_LOG_ERROR(err, "Cannot start leader election");
			d->exit_code = 1;
			sig = SIGTERM;
		}
		free(err);
		while (!sig)
			sig = wait_signal(&set, 1000);
	}

	/* Shutdown. A second signal exits at once. */
	atomic_store(&d->stopping, true);
	if (atomic_load(&d->lost_lease))
		d->exit_code = 1;
	CK_LOG_INFO("Shutting down; a second signal exits immediately", CK_KV_INT("signal", sig));
	pthread_t second;
	if (pthread_create(&second, NULL, second_signal_main, NULL) == 0)
		pthread_detach(second);
	/* Stop taking work; let running syncs finish within the grace period. */
	bool drained = controller_shutdown(d->ctl, d->opt.shutdown_grace_ms) == 0;
	if (!drained) {
		CK_LOG_ERROR("timed out", "Workers did not finish within the grace period");
		d->exit_code = 1;
	}
	if (d->elector && drained) {
		ck_le_stop(d->elector); /* releases the lease: a standby takes over at once */
		d->elector = NULL;
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
	(void)arg;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	int sig = 0;
	if (sigwait(&set, &sig) == 0) {
		static const char msg[] = "sample-controller: second signal, exiting\n";
		ssize_t n = write(2, msg, sizeof(msg) - 1);
		(void)n;
		_exit(1);
	}
	return NULL;
}

/* ---- main ---- */

static int usage_error(const char *msg)
{
	fprintf(stderr, "%s: %s\n", PROG, msg);
	return EXIT_USAGE;
}

static ck_flagset_t *define_flags(options_t *o)
{
	ck_flagset_t *fs = ck_flagset_new(PROG);
	ck_flag_string(fs, "kubeconfig", &o->kubeconfig,
	            "Path to a kubeconfig. Only required if out-of-cluster.");
	ck_flag_string(fs, "master", &o->master,
	            "The address of the Kubernetes API server. Overrides any value in kubeconfig. "
	            "Only required if out-of-cluster.");
	ck_flag_string(fs, "context", &o->context, "The kubeconfig context to use.");
	ck_flag_string(fs, "namespace", &o->namespace,
	            "Only watch Foos and Deployments in this namespace (default: all).");
	ck_flag_int(fs, "workers", &o->workers, 1, 1000, "Number of worker threads.");
	ck_flag_duration(fs, "resync-period", &o->resync_ms, "Informer resync period.");
	ck_flag_double(fs, "kube-api-qps", &o->qps,
	            "Client-side QPS limit towards the API server (negative disables).");
	ck_flag_int(fs, "kube-api-burst", &o->burst, 1, 1000000, "Client-side burst.");
	ck_flag_int(fs, "v", &o->verbosity, 0, 10,
	         "Log verbosity (0 operator, 2 detail, 4 debug, 5 trace).");
	ck_flag_string(fs, "log-format", &o->log_format, "Log format: text or json.");
	ck_flag_bool(fs, "version", &o->version, "Print the version and exit.");
	ck_flag_string(fs, "metrics-bind-address", &o->metrics_addr,
	            "Address of the Prometheus /metrics endpoint; 0 disables.");
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
	ck_flag_string(fs, "leader-elect-resource-name", &o->le_name, "Name of the Lease.");
	ck_flag_string(fs, "leader-elect-resource-namespace", &o->le_namespace,
	            "Namespace of the Lease (default: the pod's namespace).");
	return fs;
}

int main(int argc, char **argv)
{
	static daemon_t dd;
	daemon_t *d = &dd;
	options_t *o = &d->opt;
	*o = (options_t){
	    .workers = 2,
	    .resync_ms = 30000,
	    .qps = 20,
	    .burst = 30,
	    .log_format = "text",
	    .metrics_addr = ":8080",
	    .probe_addr = ":8081",
	    .shutdown_grace_ms = 30000,
	    .le_lease_ms = 15000,
	    .le_renew_ms = 10000,
	    .le_retry_ms = 2000,
	    .le_name = "sample-controller",
	};
	char *err = NULL;
	int result = EXIT_USAGE;
	ck_config_t *cfg = NULL;

	ck_flagset_t *fs = define_flags(o);
	int first = 0;
	/* Usage goes to stderr, as Go's flag package prints it. */
	ck_flag_result_t fr = ck_flag_parse(fs, argc, argv, stderr, &first, &err);
	if (fr == CK_FLAG_HELP) {
		result = 0;
		goto out;
	}
	if (fr == CK_FLAG_ERROR) {
		result = usage_error(err);
		goto out;
	}
	if (first < argc) {
		free(err);
		err = ck_xasprintf("unexpected argument \"%s\"", argv[first]);
		result = usage_error(err);
		goto out;
	}
	if (o->version) {
		printf("%s %s\n", PROG, CSC_VERSION);
		result = 0;
		goto out;
	}
	ck_log_format_t lf;
	if (ck_log_format_parse(o->log_format, &lf, &err) != 0) {
		result = usage_error(err);
		goto out;
	}
	ck_log_set_format(lf);
	ck_log_set_verbosity((int)o->verbosity);
	if (o->resync_ms < 0 || (o->resync_ms > 0 && o->resync_ms < 1000)) {
		result = usage_error("-resync-period: must be 0 (off) or at least 1s");
		goto out;
	}
	if (o->shutdown_grace_ms < 0) {
		result = usage_error("-graceful-shutdown-timeout: must not be negative");
		goto out;
	}

	/* Signals: blocked everywhere, taken synchronously by the control threads. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	ck_config_load_opts_t lo = {
	    .kubeconfig = o->kubeconfig, .master = o->master, .context = o->context};
	cfg = ck_config_load(&lo, &err);
	if (cfg == NULL) {
		result = usage_error(err);
		goto out;
	}
	struct ck_config_view view;
	ck_config_view(cfg, &view);

	if (o->leader_elect) {
		if (o->le_namespace && *o->le_namespace) {
			d->le_ns = ck_xstrdup(o->le_namespace);
		} else {
			d->le_ns = ck_le_default_namespace(NULL, &err);
			if (d->le_ns == NULL) {
				ck_err_wrap(&err,
				         "-leader-elect-resource-namespace is not set and the "
				         "pod's namespace is unknown");
				result = usage_error(err);
				goto out;
			}
		}
		d->identity = ck_le_default_identity();
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
		    ck_le_validate(&chk, &err) != 0) {
			if (err == NULL)
				err = ck_xstrdup(
				    "leader election durations must be positive and at most 24h");
			result = usage_error(err);
			goto out;
		}
	}

	d->loop = ev_loop_new(EVFLAG_AUTO);
	if (d->loop == NULL) {
		err = ck_xstrdup("cannot create the event loop");
		result = 1;
		goto fail;
	}
	char ua[128];
	snprintf(ua, sizeof(ua), "%s/%s (linux) c", PROG, CSC_VERSION);
	ck_client_opts_t co = {.qps = o->qps, .burst = (int)o->burst, .user_agent = ua};
	d->client = ck_client_new(d->loop, cfg, &co, &err);
	cfg = NULL; /* taken by the client, even on failure */
	if (d->client == NULL) {
		result = usage_error(err);
		goto out;
	}
	CK_LOG_INFO("Starting", CK_KV_STR("version", CSC_VERSION), CK_KV_STR("server", view.server),
	         CK_KV_STR("config", view.source));

	d->reg = ck_metrics_registry_new();
	ck_metrics_registry_add_process_collector(d->reg, NULL);
	ck_metrics_gauge_vec_t *lv = ck_metrics_gauge_vec_new(
	    d->reg, "leader_election_master_status",
	    "1 if this process is the leader, 0 if not (only with -leader-elect).",
	    CK_METRICS_LABELS("name"), NULL);
	if (lv && o->leader_elect)
		d->m_leader = ck_metrics_gauge_vec_get(lv, CK_METRICS_LABELS(o->le_name));

	/* Flushing events at shutdown is best effort: bounded to 5 s (plus one
	 * in-flight write, itself bounded) so that a partitioned daemon exits soon. */
	ck_record_opts_t ro = {.component = PROG,
	                    .reporting_controller = SC_REPORTING_CONTROLLER,
	                    .reporting_instance = d->identity,
	                    .shutdown_timeout_ms = 5000};
	d->recorder = ck_record_new(d->client, &ro, &err);
	if (d->recorder == NULL) {
		result = 1;
		goto fail;
	}

	ck_cache_factory_opts_t fo = {.default_resync_ms = (uint64_t)o->resync_ms,
	                           .ns = o->namespace,
	                           .on_watch_error = on_watch_error,
	                           .watch_error_ud = d};
	d->factory = ck_cache_factory_new(d->loop, d->client, &fo);
	controller_opts_t cto = {.client = d->client,
	                         .factory = d->factory,
	                         .recorder = d->recorder,
	                         .metrics = d->reg,
	                         .workers = (int)o->workers};
	d->ctl = controller_new(&cto, &err);
	if (d->ctl == NULL) {
		result = 1;
		goto fail;
	}
	d->foos = ck_cache_factory_informer(d->factory, &ktype_foo);
	d->deployments = ck_cache_factory_informer(d->factory, &ck_type_deployment);
	ck_metrics_registry_add_collector(d->reg, collect_client, d);
	ck_metrics_registry_add_collector(d->reg, collect_informers, d);
	ck_metrics_registry_add_collector(d->reg, collect_events, d);

	/* One server when both flags name the same address. */
	bool same = strcmp(o->metrics_addr, o->probe_addr) == 0;
	if (ck_metrics_server_start(o->metrics_addr, "--metrics-bind-address", d->reg, same,
	                         &d->metrics_srv, &err) != 0) {
		result = usage_error(err);
		goto out;
	}
	if (!same && ck_metrics_server_start(o->probe_addr, "--health-probe-bind-address", NULL, 1,
	                                  &d->probe_srv, &err) != 0) {
		result = usage_error(err);
		goto out;
	}
	ck_metrics_server_t *ps = same ? d->metrics_srv : d->probe_srv;
	ck_metrics_probe_add_check(ps, "healthz", "event-loop", check_loop, d, NULL);
	ck_metrics_probe_add_check(ps, "readyz", "informers-synced", check_synced, d, NULL);
	ck_metrics_probe_add_check(ps, "readyz", "leader-election", check_leader, d, NULL);

	atomic_store(&d->last_tick_ns, ck_clk_mono_ns(ck_clk_real()));
	ev_timer_init(&d->tick, on_tick, 1.0, 1.0);
	d->tick.data = d;
	ev_timer_start(d->loop, &d->tick);
	ev_async_init(&d->stop_async, on_stop_async);
	d->stop_async.data = d;
	ev_async_start(d->loop, &d->stop_async);

	if (ck_cache_factory_start(d->factory, &err) != 0) {
		result = 1;
		goto fail;
	}
	if (pthread_create(&d->control, NULL, control_main, d) != 0) {
		err = ck_xstrdup("cannot start the control thread");
		result = 1;
		goto fail;
	}

	ev_run(d->loop, 0);
	pthread_join(d->control, NULL);
	result = d->exit_code;
	CK_LOG_INFO("Stopped", CK_KV_INT("exit_code", result));
	if (d->recorder != NULL) {
		/* Workers did not drain: they still use the client, the caches, the
		 * recorder and the elector, so none of it may be freed. Leave now. */
		fflush(NULL);
		_exit(result);
	}
	goto out;
fail:
	CK_LOG_ERROR(err, "Cannot start");
out:
	if (d->elector)
		ck_le_stop(d->elector);
	ck_metrics_server_stop(d->metrics_srv);
	ck_metrics_server_stop(d->probe_srv);
	controller_free(d->ctl);
	ck_record_free(d->recorder);
	ck_cache_factory_free(d->factory);
	ck_client_free(d->client);
	ck_config_free(cfg);
	ck_metrics_registry_free(d->reg);
	if (d->loop)
		ev_loop_destroy(d->loop);
	free(d->identity);
	free(d->le_ns);
	free(d->last_watch_error[0]);
	free(d->last_watch_error[1]);
	free(err);
	ck_flagset_free(fs);
	return result;
}
