/*
 * webapp: the WebApp controller (crd.yaml), apart from main() so that a test
 * can run its reconcile function on listers and a client of its own (a fake
 * API server, envtest). The C twin of go/controller.go.
 */
#ifndef WEBAPP_H
#define WEBAPP_H

#include "v1alpha1/web_app.h"

#include <ckube/ckube.h>

/* What the reconcile function reads and writes through (all borrowed). */
typedef struct webapp {
	ck_client_t *client;
	ck_record_t *recorder;
	const ck_cache_lister_t *webapps, *deployments, *services;
} webapp_t;

/* A ck_reconcile_fn; ud is a webapp_t. */
int webapp_reconcile(void *ud, const char *key, char **err);
/* Adds the controller to m and fills *w (which must outlive m) from it. */
void webapp_setup(webapp_t *w, ck_manager_t *m);

#endif
