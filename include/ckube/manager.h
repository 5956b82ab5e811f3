/*
 * manager: a controller is its reconcile function plus a few lines of wiring.
 *
 * The manager does what every controller built on libckube needs, in the right
 * order, the way controller-runtime's manager and sample-controller's main do:
 *
 *   ck_manager_new   the standard flags (--kubeconfig, --master, --context,
 *                    --namespace, --workers, --resync-period, --kube-api-qps/-burst,
 *                    -v, --log-format, --trace-key (one key's journey, see
 *                    docs/informers.md), --version, --metrics-bind-address,
 *                    --metrics-secure, --metrics-cert-dir/-name/-key,
 *                    --metrics-review-qps/-burst, --health-probe-bind-address,
 * --graceful-shutdown-timeout,
 *                    --leader-elect and its durations) plus the program's own;
 *                    configuration (kubeconfig / in-cluster); the libev loop; the
 *                    client; the event recorder; the shared informer factory; the
 *                    metrics registry with process, REST client, informer and event
 *                    figures; /metrics (HTTPS, callers authenticated and authorized
 *                    by the API server through a second client of their own, unless
 *                    --metrics-secure=false), /healthz,
 *                    /readyz (plain HTTP).
 *   ck_manager_add_controller / ck_manager_add_runnable    what runs once synced.
 *   ck_manager_run   starts the informers, waits for them to sync (saying why not,
 *                    every 10 s), elects a leader if asked, starts the controllers,
 *                    waits for SIGINT/SIGTERM and shuts down: controllers drain
 *                    (within --graceful-shutdown-timeout), the Lease is released,
 *                    events are flushed, the loop stops, everything is freed. A
 *                    second signal exits 1 at once.
 *
 * Threads: the caller's thread runs the loop inside ck_manager_run; a control
 * thread does the sync wait, leader election and shutdown; each controller has its
 * workers. Reconcile functions run on worker threads: they read through listers
 * and write with the client's blocking (_sync) calls, never on the loop thread.
 *
 * Ownership: the manager owns the client, the factory and its informers, the
 * recorder, the registry and the controllers it made; accessors return borrowed
 * pointers valid until ck_manager_free.
 */
#ifndef CKUBE_MANAGER_H
#define CKUBE_MANAGER_H

#include <ckube/export.h>

#include <ckube/base.h>
#include <ckube/cache.h>
#include <ckube/client.h>
#include <ckube/flag.h>
#include <ckube/metrics.h>
#include <ckube/obj.h>
#include <ckube/predicate.h>
#include <ckube/record.h>
#include <ckube/status.h>
#include <ckube/workqueue.h>

#include <stdbool.h>
#include <stdint.h>

typedef struct ck_manager ck_manager_t;
typedef struct ck_controller ck_controller_t;

typedef struct ck_manager_opts {
	/* Required: usage and --version, the user agent, the events' component, the
	 * default Lease name. Borrowed for the manager's life. */
	const char *name;
	const char *version;              /* --version and user agent; NULL: libckube's */
	const char *reporting_controller; /* events' reportingController; NULL: name */
	/* Defaults of the standard flags; 0 / NULL keep the library's (2 workers, 30 s
	 * resync, 20 qps / 30 burst, :8443 (:8080 with --metrics-secure=false) and
	 * :8081, 30 s graceful shutdown). */
	int workers;
	int64_t resync_ms;
	double qps;
	int burst;
	const char *metrics_addr;
	const char *probe_addr;
	int64_t shutdown_grace_ms;
	/* The program's own flags: called once with the flag set before parsing. */
	void (*define_flags)(void *ud, ck_flagset_t *fs);
	void *ud;
} ck_manager_opts_t;

/*
 * Borrows o, argc/argv. Parses the flags, loads the configuration, makes the loop,
 * client, recorder, factory and metrics servers. Returns a new manager (free with
 * ck_manager_free), or NULL with *exit_code set: 0 after --help or --version, 2 for
 * a bad flag or configuration (one line on stderr naming what is wrong), 1 for any
 * other failure (logged). Blocks SIGINT/SIGTERM in the calling thread, so call it
 * before starting threads of your own. Main thread.
 */
CKUBE_API ck_manager_t *ck_manager_new(const ck_manager_opts_t *o, int argc, char **argv,
                                       int *exit_code);

/*
 * Takes m (may be NULL). Frees what ck_manager_run did not (after a failed setup).
 */
CKUBE_API void ck_manager_free(ck_manager_t *m);

/* Borrowed parts, valid until ck_manager_free. Any thread. */
CKUBE_API ck_client_t *ck_manager_client(ck_manager_t *m);
CKUBE_API ck_cache_factory_t *ck_manager_factory(ck_manager_t *m);
CKUBE_API ck_record_t *ck_manager_recorder(ck_manager_t *m);
CKUBE_API ck_metrics_registry_t *ck_manager_metrics(ck_manager_t *m);
/* --namespace ("" or NULL: all), --workers. */
CKUBE_API const char *ck_manager_namespace(ck_manager_t *m);
CKUBE_API int ck_manager_workers(ck_manager_t *m);

/*
 * The shared informer of t (one per resource, see ck_cache_factory_informer),
 * reported in the manager's metrics and its sync wait. Borrows t (must outlive the
 * manager). Returns a borrowed informer, or NULL when the factory refuses t (a
 * descriptor of the same resource keeping other fields): ck_manager_run then
 * exits 1 at once with that reason. Before ck_manager_run, main thread.
 */
CKUBE_API ck_cache_informer_t *ck_manager_informer(ck_manager_t *m, const ck_type_t *t);

/*
 * Something that runs while the caches are synced (and this process leads, with
 * --leader-elect): start is called once on the control thread, stop once at
 * shutdown with the time it may take; stop returns 0 when all its work finished,
 * -1 when it did not (the manager then keeps the Lease and exits 1 without freeing
 * what the work may still use). sample-controller's controller is one.
 */
typedef struct ck_runnable {
	int (*start)(void *ud, char **err);
	int (*stop)(void *ud, int64_t grace_ms);
	void *ud;
} ck_runnable_t;

/* Borrows r (copied). Before ck_manager_run, main thread. */
CKUBE_API void ck_manager_add_runnable(ck_manager_t *m, const ck_runnable_t *r);

/*
 * The reconcile function: brings the object named key ("ns/name" or "name") to
 * what it should be. Return 0 when done (the key's backoff is forgotten), -1 with
 * *err set to a new message (free()d by the caller) to retry it with exponential
 * backoff, or a positive number of milliseconds to look at it again after that long.
 * Worker threads; several keys at once, never the same key twice at once.
 */
typedef int (*ck_reconcile_fn)(void *ud, const char *key, char **err);
/* A reconcile result: an expected race (a 409 conflict, a cache behind a write):
 * retried with backoff like -1, but counted as "requeue" and logged at -v=2 only
 * (*err, if set, is the reason). */
#define CK_RECONCILE_RETRY (-2)
/*
 * What a reconcile function returns when a request failed: CK_RECONCILE_RETRY
 * when res is a 409 Conflict (the object changed since it was read: an expected
 * race, retried with the object read again), else -1; *err gets a new message
 * "<fmt formatted>: <res->error>" (free()d by the caller of the reconcile
 * function). Borrows res. So that every write of a reconcile function ends in
 *   if (ck_..._sync(..., &res) != 0)
 *           rc = ck_reconcile_failed(&res, err, "status of Foo %s", key);
 */
CKUBE_API int ck_reconcile_failed(const ck_result_t *res, char **err, const char *fmt, ...)
    CK_PRINTF(3, 4);

/*
 * A controller: a rate-limited workqueue (client-go's default controller rate
 * limiter) named name (its metrics label, borrowed for the manager's life) and
 * --workers worker threads calling fn(ud, key, &err). Reconcile counts and
 * durations appear as controller_runtime_reconcile_total{controller=name,result}
 * and controller_runtime_reconcile_time_seconds, the queue as workqueue_*.
 * Returns a borrowed controller. Before ck_manager_run, main thread.
 */
CKUBE_API ck_controller_t *ck_manager_add_controller(ck_manager_t *m, const char *name,
                                                     ck_reconcile_fn fn, void *ud);

/* The same with every setting of the controller given. */
typedef struct ck_controller_opts {
	const char *name;          /* required; borrowed for the manager's life */
	ck_reconcile_fn reconcile; /* required */
	void *ud;
	/* Taken; NULL: client-go's default controller rate limiter. */
	ck_wq_ratelimiter_t *limiter;
	int workers; /* 0: --workers */
	/* A plain FIFO work queue even when --priority-queue is on (the default). */
	bool fifo_queue;
} ck_controller_opts_t;
/* Borrows o. Returns a borrowed controller. Before ck_manager_run, main thread. */
CKUBE_API ck_controller_t *ck_manager_add_controller_opts(ck_manager_t *m,
                                                          const ck_controller_opts_t *o);

/*
 * Queues key (borrowed, copied). Any thread. The work queue is controller-runtime's
 * priority queue unless --priority-queue=false or opts.fifo_queue: the watches'
 * handlers queue the objects of the initial list and resyncs of unchanged objects
 * (same resourceVersion) at CK_WQ_PRIORITY_LOW, everything else at 0, so a new or
 * changed object is not stuck behind a re-listed backlog; a key's priority only
 * rises while it waits, and a retried key keeps the priority it was handed out with.
 * Called from a map function (ck_controller_watch_map), this queues at the priority
 * of the event being handled; elsewhere at 0.
 */
CKUBE_API void ck_controller_enqueue(ck_controller_t *c, const char *key);
/* Queues key (borrowed, copied) at priority (higher first; ignored by a FIFO queue).
 * Any thread. */
CKUBE_API void ck_controller_enqueue_priority(ck_controller_t *c, const char *key, int priority);
/*
 * The priorities the watches' handlers queue at, for handlers of one's own (an
 * informer's, outside a manager): an add is CK_WQ_PRIORITY_LOW when it comes from the
 * initial list (initial), else 0; an update is CK_WQ_PRIORITY_LOW when the
 * resourceVersion did not change (a resync), else 0. Borrows both objects. Any thread.
 */
CKUBE_API int ck_controller_add_priority(bool initial);
CKUBE_API int ck_controller_update_priority(const ck_obj_t *old_obj, const ck_obj_t *new_obj);
/* Queues the key of obj (borrowed). Any thread. */
CKUBE_API void ck_controller_enqueue_obj(ck_controller_t *c, const ck_obj_t *obj);

/*
 * Watches t and queues each added, updated or deleted object's own key (For() in
 * controller-runtime). Returns the borrowed informer (NULL: see ck_manager_informer).
 */
CKUBE_API ck_cache_informer_t *ck_controller_watch(ck_controller_t *c, const ck_type_t *t);

/*
 * Watches t and calls map(ud, c, obj) for each added, updated (the new object) or
 * deleted (the last known state, also for tombstones) object, so that it queues the
 * keys it relates to (Watches()/Owns() in controller-runtime). Loop thread: map must
 * be quick and must not block. Returns the borrowed informer (NULL: see ck_manager_informer).
 */
typedef void (*ck_map_fn)(void *ud, ck_controller_t *c, const ck_obj_t *obj);
CKUBE_API ck_cache_informer_t *ck_controller_watch_map(ck_controller_t *c, const ck_type_t *t,
                                                       ck_map_fn map, void *ud);

/*
 * Watch options. predicates: an array of npredicates (borrowed, copied; the
 * predicates themselves must outlive the manager) that every event must pass
 * before it is queued or mapped (all of them: controller-runtime's
 * builder.WithPredicates, or WithEventFilter given to every watch). See
 * <ckube/predicate.h> for the ready-made ones. NULL options or none: all events.
 */
typedef struct ck_watch_opts {
	const ck_predicate_t *const *predicates;
	size_t npredicates;
} ck_watch_opts_t;
/* ck_controller_watch and ck_controller_watch_map with options (o may be NULL). */
CKUBE_API ck_cache_informer_t *ck_controller_watch_opts(ck_controller_t *c, const ck_type_t *t,
                                                        const ck_watch_opts_t *o);
CKUBE_API ck_cache_informer_t *ck_controller_watch_map_opts(ck_controller_t *c, const ck_type_t *t,
                                                            ck_map_fn map, void *ud,
                                                            const ck_watch_opts_t *o);

/*
 * Queues the owner named by obj's controller ownerReference when that owner is of
 * kind owner_type: same API group and kind (the version does not matter), as
 * controller-runtime's Owns()/EnqueueRequestForOwner with OnlyControllerOwner.
 * The owner's key is obj's namespace and the reference's name (an owner of a
 * namespaced object is in its namespace or cluster-scoped: then the name alone).
 * A ready-made map for ck_controller_watch_map: ud = the owner's descriptor, a
 * `const ck_type_t *` (borrowed for the manager's life).
 */
CKUBE_API void ck_controller_enqueue_owner_type(void *owner_type, ck_controller_t *c,
                                                const ck_obj_t *obj);
/* Deprecated: matches the kind string only, so a Deployment of another API group
 * (or an ownerReference to any group's kind of that name) is taken for the owner.
 * Use ck_controller_enqueue_owner_type. ud = the kind (a C string). */
CKUBE_API void ck_controller_enqueue_owner(void *kind, ck_controller_t *c, const ck_obj_t *obj);

/*
 * Runs until SIGINT/SIGTERM (see the top of this header) and frees everything.
 * Takes m. Returns the exit code: 0 after a clean shutdown, 1 otherwise. Main
 * thread (the one that called ck_manager_new).
 */
CKUBE_API int ck_manager_run(ck_manager_t *m);
/*
 * Asks a running manager to shut down, as SIGTERM does (it is one, sent to the
 * process: the manager blocks SIGINT/SIGTERM in every thread and waits for them):
 * ck_manager_run then drains and returns. What controller-runtime's tests do by
 * cancelling the manager's context. Borrows m. Any thread but the one inside
 * ck_manager_run; only while it runs.
 */
CKUBE_API void ck_manager_stop(ck_manager_t *m);

/*
 * Runs m as ck_manager_run does while body(ud, &err) runs on a thread of its own,
 * and stops m (ck_manager_stop) when body returns: a test's "start the manager in
 * the background, act on the cluster and wait for the result, cancel", in one call.
 * Takes m (as ck_manager_run); borrows body and ud. Returns m's exit code, after
 * both have ended. body returns 0, or nonzero with its reason in *err (a new
 * message); that reason reaches *body_err (free() it), or "the test body failed
 * (returned N)" when it left none; *body_err is set to NULL first, and stays NULL
 * when body returned 0.
 * When m ends first (a failed start), body is not interrupted: it should give up
 * on a timeout (ck_envtest_eventually). body runs with SIGINT/SIGTERM blocked, as
 * every thread of a manager; it should report failures through *err rather than
 * with check's assertions, which are meant for the test's own thread. Main thread
 * (the one that called ck_manager_new).
 */
CKUBE_API int ck_manager_run_with(ck_manager_t *m, int (*body)(void *ud, char **err), void *ud,
                                  char **body_err);

#endif
