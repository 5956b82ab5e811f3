/*
 * greeting: the Greeting controller (crd.yaml), apart from main() so that a test
 * can run its reconcile function on listers and a client of its own (a fake API
 * server, envtest).
 */
#ifndef GREETING_H
#define GREETING_H

#include "v1alpha1/greeting.h"

#include <ckube/ckube.h>

/* What the reconcile function reads and writes through (all borrowed). */
typedef struct greeting_ctrl {
	ck_client_t *client;
	ck_record_t *recorder;
	const ck_cache_lister_t *greetings, *configmaps;
} greeting_ctrl_t;

/* A ck_reconcile_fn; ud is a greeting_ctrl_t. */
int greeting_reconcile(void *ud, const char *key, char **err);
/* Adds the controller to m and fills *g (which must outlive m) from it. */
void greeting_setup(greeting_ctrl_t *g, ck_manager_t *m);

#endif
