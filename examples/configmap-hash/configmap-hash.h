/*
 * configmap-hash: the controller, apart from main() so that a test can run its
 * reconcile function on listers and a client of its own (a fake API server,
 * envtest).
 */
#ifndef CONFIGMAP_HASH_H
#define CONFIGMAP_HASH_H

#include <ckube/ckube.h>

#define CONFIGMAP_HASH_LABEL      "example.ckube.io/hash"   /* "true": hashed */
#define CONFIGMAP_HASH_SECRET_ANN "example.ckube.io/secret" /* a Secret hashed too */
#define CONFIGMAP_HASH_ANN        "example.ckube.io/hash"   /* the hash written */

/* What the reconcile function reads and writes through (all borrowed but the type). */
typedef struct configmap_hash {
	ck_client_t *client;
	ck_record_t *recorder;
	const ck_cache_lister_t *configmaps, *secrets;
	/* The type of configmaps: ck_type_configmap with its annotations kept
	 * (configmap_hash_configmap_type). */
	ck_type_t configmap_type;
} configmap_hash_t;

/* Fills *t with the type the ConfigMaps are read as (ck_type_configmap, its
 * annotations kept). */
void configmap_hash_configmap_type(ck_type_t *t);
/* A ck_reconcile_fn; ud is a configmap_hash_t. */
int configmap_hash_reconcile(void *ud, const char *key, char **err);
/* Adds the controller to m and fills *h (which must outlive m) from it. */
void configmap_hash_setup(configmap_hash_t *h, ck_manager_t *m);

#endif
