/*
 * controller: sample-controller's reconcile loop. Two informers (Deployments,
 * Foos) feed a rate-limited workqueue of "namespace/name" Foo keys; worker threads
 * run sync(key), reading through listers and writing through the client.
 */
#ifndef CSC_SAMPLE_CONTROLLER_H
#define CSC_SAMPLE_CONTROLLER_H

#include <ckube/cache.h>
#include <ckube/client.h>
#include <ckube/metrics.h>
#include <ckube/record.h>
#include <ckube/workqueue.h>

#include <stdbool.h>

typedef struct controller controller_t;

typedef struct controller_opts {
	ck_client_t *client;           /* borrowed */
	ck_cache_factory_t *factory;    /* borrowed; informers are taken from it */
	ck_record_t *recorder;          /* borrowed; may be NULL (no events) */
	ck_metrics_registry_t *metrics; /* borrowed; may be NULL */
	int workers;                 /* default 2 */
	const ck_clk_t *clock;          /* NULL = real */
	const char *field_manager;   /* default "sample-controller" */
} controller_opts_t;

/*
 * Creates the controller and registers its handlers on the factory's Deployment
 * and Foo informers. Loop thread (or before the loop runs). Borrows opts.
 * Returns a new controller, free with controller_free(), or NULL with *err.
 */
controller_t *controller_new(const controller_opts_t *opts, char **err);

/* Starts the worker threads. Any thread; once. Returns 0 or -1 with *err. */
int controller_start_workers(controller_t *c, char **err);

/*
 * Stops taking new work and waits until running syncs finish, at most
 * timeout_ms (< 0: no limit). Returns 0 when drained, -1 on timeout. Any thread
 * but the loop's (syncs need the loop for their API calls).
 */
int controller_shutdown(controller_t *c, int64_t timeout_ms);

/* Joins the workers (after controller_shutdown) and frees c. NULL is a no-op. */
void controller_free(controller_t *c);

/* Borrowed: the workqueue (for metrics). */
ck_wq_t *controller_queue(controller_t *c);

/* Reconciles one key now, on the calling thread (tests). Returns 0 or -1 with *err. */
int controller_sync(controller_t *c, const char *key, char **err);

#endif
