/* Private to pkg/manager: the manager's state, shared by manager.c and controller.c. */
#ifndef CKUBE_MANAGER_INTERNAL_H
#define CKUBE_MANAGER_INTERNAL_H

#include <ckube/leaderelection.h>
#include <ckube/manager.h>
#include <ckube/workqueue.h>

#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#define MGR_MAX_INFORMERS   32
#define MGR_MAX_RUNNABLES   16
#define MGR_MAX_CONTROLLERS 16

typedef struct mgr_options {
	const char *kubeconfig;
	const char *master;
	const char *context;
	const char *namespace;
	int64_t workers;
	int64_t resync_ms;
	int64_t consistency_ms; /* --cache-consistency-check-period; 0 = off */
	double qps;
	int64_t burst;
	int64_t verbosity;
	const char *log_format;
	const char *trace_key; /* --trace-key: "" off */
	bool version;
	const char *metrics_addr;
	bool metrics_secure;
	const char *metrics_cert_dir, *metrics_cert_name, *metrics_cert_key;
	double metrics_review_qps;
	int64_t metrics_review_burst;
	const char *probe_addr;
	int64_t shutdown_grace_ms;
	bool leader_elect;
	int64_t le_lease_ms, le_renew_ms, le_retry_ms;
	const char *le_name;
	const char *le_namespace;
	const char *shards_by; /* --shards-by: "" off, "namespace" or "uid" */
	int64_t shards;        /* --shards: buckets */
	int64_t shards_lease_ms, shards_renew_ms, shards_retry_ms;
	const char *reconcile_log;   /* --reconcile-log: "" off */
	bool priority_queue;         /* --priority-queue */
	const char *cache_dump_file; /* --cache-dump-file: "" off */
} mgr_options_t;

typedef struct mgr_shards mgr_shards_t;

struct ck_manager {
	ck_manager_opts_t mo;
	mgr_options_t opt;
	struct ev_loop *loop;
	ck_client_t *client;
	ck_client_t *review_client; /* /metrics reviews only; NULL unless --metrics-secure */
	ck_cache_factory_t *factory;
	ck_record_t *recorder;
	ck_metrics_registry_t *reg;
	ck_metrics_server_t *metrics_srv, *probe_srv;
	ck_metrics_gauge_t *m_leader;
	ck_le_t *elector; /* under le_mu: the healthz check reads it */
	pthread_mutex_t le_mu;
	ck_cache_informer_t *informers[MGR_MAX_INFORMERS];
	char *last_watch_error[MGR_MAX_INFORMERS];
	size_t ninformers;
	ck_runnable_t runnables[MGR_MAX_RUNNABLES];
	size_t nrunnables;
	ck_controller_t *controllers[MGR_MAX_CONTROLLERS];
	size_t ncontrollers;
	/* Shared by every controller: one family each. */
	ck_metrics_counter_vec_t *m_reconcile_total;
	ck_metrics_histogram_vec_t *m_reconcile_time;
	char *identity;
	char *le_ns;
	ev_async stop_async;
	ev_timer tick;
	_Atomic uint64_t last_tick_ns;
	atomic_bool synced;
	atomic_bool lost_lease;
	atomic_bool stopping;
	atomic_bool started;
	int exit_code;
	pthread_t control;
	/* Waits for a second signal during the shutdown; ended by ck_manager_run, so that
	 * it never outlives the manager (and takes the next manager's stop for its own). */
	pthread_t second;
	bool second_started;
	atomic_bool second_quit; /* ck_manager_run is returning: the SIGTERM it sends is its own */
	ck_flagset_t *flags;
	char *setup_err;      /* the first refused informer: ck_manager_run fails with it */
	mgr_shards_t *shards; /* --shards-by; NULL when not sharded */
	int reconcile_log_fd; /* --reconcile-log; -1 off */
	/* CKUBE_TESTING_RECONCILE_DELAY_MS: every reconcile takes this much longer, so
	 * that the sharding tests always catch reconciles in flight at a handover. */
	useconds_t testing_delay_us;
};

/* controller.c */
ck_controller_t *mgr_controller_new(ck_manager_t *m, const ck_controller_opts_t *o);
int mgr_controller_start(void *c, char **err);
int mgr_controller_stop(void *c, int64_t grace_ms);
void mgr_controller_free(ck_controller_t *c);
ck_wq_t *mgr_controller_queue(ck_controller_t *c);
/* cache_dump.c: every informer's keys to --cache-dump-file. 0, or -1 with *err.
 * Control thread. */
int mgr_cache_dump(ck_manager_t *d, char **err);
/* Tests: the handler ck_controller_watch registers (its ud is the controller). */
const ck_cache_handler_t *mgr_controller_own_handler(void);
/* The informer of the first type it watches with its own handler (its "For"), or NULL. */
ck_cache_informer_t *mgr_controller_primary(ck_controller_t *c);

/* shards.c: --shards-by */
/* Validates the flags; when sharded, makes d->shards (before the factory: it splits
 * informers into parts). 0, or -1 with *err (a usage error). Main thread. */
int mgr_shards_setup(ck_manager_t *d, char **err);
/* Joins the shard group (control thread, caches synced). 0, or -1 with *err. */
int mgr_shards_start(ck_manager_t *d, char **err);
/* Hands every bucket over and leaves the group; workers already stopped, the loop
 * still running. Control thread. */
void mgr_shards_stop(ck_manager_t *d);
void mgr_shards_free(ck_manager_t *d);
typedef enum mgr_gate {
	MGR_GATE_RUN,    /* owned and listed: run it, then mgr_shards_leave(*bucket) */
	MGR_GATE_SKIP,   /* another replica's: drop it */
	MGR_GATE_PARKED, /* owned, caches still listing: requeued once they are */
} mgr_gate_t;
/* Worker thread, for each key it takes. */
mgr_gate_t mgr_shards_enter(ck_manager_t *d, ck_controller_t *c, const char *key, uint32_t *bucket);
void mgr_shards_leave(ck_manager_t *d, uint32_t bucket);
/* The /readyz check "shards" (its note: the buckets owned) and the metrics. */
int mgr_shards_check(void *ud, char **note);
void mgr_shards_collect(void *ud, ck_sbuf_t *out);

#endif
