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
	ck_client_t *client;         /* borrowed */
	ck_cache_factory_t *factory; /* borrowed; informers are taken from it */
	ck_record_t *recorder;       /* borrowed; may be NULL (no events) */
	const ck_clk_t *clock;       /* NULL = real */
	const char *field_manager;   /* default "sample-controller" */
	/* Where the handlers queue Foo keys, with a priority (CK_WQ_PRIORITY_LOW for the
	 * initial list and resyncs, else 0): ck_controller_enqueue_priority with the
	 * manager's controller in the daemon; NULL in tests that call controller_sync. */
	void (*enqueue)(void *ud, const char *key, int priority);
	void *enqueue_ud;
} controller_opts_t;

/*
 * Creates the controller and registers its handlers on the factory's Deployment
 * and Foo informers. Loop thread (or before the loop runs). Borrows opts.
 * Returns a new controller, free with controller_free(), or NULL with *err.
 */
controller_t *controller_new(const controller_opts_t *opts, char **err);

/* Takes c (may be NULL). No reconcile may run any more. */
void controller_free(controller_t *c);

/*
 * The reconcile function for the manager's controller (ck_reconcile_fn, ud = c):
 * 0 done, CK_RECONCILE_RETRY for an expected race (409 conflict, stale cache), -1
 * with *err for a failure. Worker threads.
 */
int controller_reconcile(void *ud, const char *key, char **err);

/* Reconciles one key now, on the calling thread (tests). Returns 0 or -1 with *err. */
int controller_sync(controller_t *c, const char *key, char **err);

#endif
