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

static int start_workers(void *ud, char **err)
{
	return controller_start_workers(ud, err);
}

static int stop_workers(void *ud, int64_t grace_ms)
{
	return controller_shutdown(ud, grace_ms);
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
	ck_manager_informer(m, &ktype_foo);
	ck_manager_informer(m, &ck_type_deployment);
	controller_opts_t cto = {.client = ck_manager_client(m),
	                         .factory = ck_manager_factory(m),
	                         .recorder = ck_manager_recorder(m),
	                         .metrics = ck_manager_metrics(m),
	                         .workers = ck_manager_workers(m),
	                         .field_manager = PROG};
	char *err = NULL;
	controller_t *ctl = controller_new(&cto, &err);
	if (ctl == NULL) {
		CK_LOG_ERROR(err, "Cannot start");
		free(err);
		ck_manager_free(m);
		return 1;
	}
	ck_runnable_t r = {.start = start_workers, .stop = stop_workers, .ud = ctl};
	ck_manager_add_runnable(m, &r);
	rc = ck_manager_run(m); /* frees the manager; the workers have drained */
	controller_free(ctl);
	return rc;
}
