/*
 * sample-controller: the Foo controller on libckube's manager. Flags, signals,
 * configuration, metrics and probes, leader election and the shutdown order are
 * the manager's (<ckube/manager.h>); the reconcile logic is in controller.c.
 */
#include "api/samplecontroller/v1alpha1/foo.h"
#include "cmd/sample-controller/controller.h"
#include <ckube/log.h>
#include <ckube/manager.h>
#include <ckube/types.h>

#include <stdlib.h>

#define PROG "sample-controller"
/* The reportingController of its events. */
#define SC_REPORTING_CONTROLLER "samplecontroller.k8s.io/sample-controller"

static ck_controller_t *foo_queue;

static void enqueue_foo(void *ud, const char *key, int priority)
{
	(void)ud;
	ck_controller_enqueue_priority(foo_queue, key, priority);
}

int main(int argc, char **argv)
{
	int rc;
	ck_manager_opts_t mo = {
	    .name = PROG, .version = CSC_VERSION, .reporting_controller = SC_REPORTING_CONTROLLER};
	ck_manager_t *m = ck_manager_new(&mo, argc, argv, &rc);
	if (m == NULL)
		return rc;
	/* Both informers in the manager's metrics and sync wait. */
	ck_manager_informer(m, &foo_type);
	ck_manager_informer(m, &ck_type_deployment);
	controller_opts_t cto = {.client = ck_manager_client(m),
	                         .factory = ck_manager_factory(m),
	                         .recorder = ck_manager_recorder(m),
	                         .field_manager = PROG,
	                         .enqueue = enqueue_foo};
	char *err = NULL;
	controller_t *ctl = controller_new(&cto, &err);
	if (ctl == NULL) {
		CK_LOG_ERROR(err, "Cannot start");
		free(err);
		ck_manager_free(m);
		return 1;
	}
	/* The Foo queue and its workers, with sample-controller's overall bucket (50
	 * qps, burst 300). Handlers fire only once the loop runs, after this. */
	ck_controller_opts_t co = {.name = "Foos",
	                           .reconcile = controller_reconcile,
	                           .ud = ctl,
	                           .limiter = ck_wq_ratelimiter_controller_new(NULL, 50, 300)};
	foo_queue = ck_manager_add_controller_opts(m, &co);
	rc = ck_manager_run(m); /* frees the manager; the workers have drained */
	controller_free(ctl);
	return rc;
}
