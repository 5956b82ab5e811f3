/*
 * The controller on a manager against envtest (etcd and kube-apiserver,
 * <ckube/envtest.h>; no CRD): a labelled ConfigMap gets its hash annotation.
 * Run from this directory: `make envtest-test`.
 */
#include "configmap-hash.h"

#include <ckube/check.h>
#include <ckube/envtest.h>

#include <stdlib.h>
#include <string.h>

static configmap_hash_t h;

static bool hashed(void *want, const ck_obj_t *cm)
{
	const char *v = ck_obj_annotation(cm, CONFIGMAP_HASH_ANN);
	return v != NULL && strcmp(v, want) == 0;
}

/* Beside the manager: a labelled ConfigMap with data {"a":"1","b":"2"}, then its
 * hash annotation within 30 s (FNV-1a 64 computed apart). */
static int create_and_wait(void *env, char **err)
{
	ck_client_t *c = ck_envtest_client(env);
	ck_patch_t *cm = ck_ac_configmap("default", "conf");
	ck_patch_set_string(cm, CK_PATH("metadata", "labels", CONFIGMAP_HASH_LABEL), "true");
	ck_ac_configmap_data(cm, "a", "1");
	ck_ac_configmap_data(cm, "b", "2");
	ck_result_t res = {0};
	int rc = ck_client_create_body_sync(c, cm, NULL, &res);
	if (rc != 0)
		*err = ck_xstrdup(res.error);
	ck_result_clear(&res);
	ck_patch_free(cm);
	return rc != 0 ? rc
	               : ck_envtest_get_eventually(c, &h.configmap_type, "default", "conf", hashed,
	                                           "fnv64a:ba7ba27f8aa4322d", 30000, err);
}

START_TEST(test_envtest)
{
	char *err = NULL;
	ck_envtest_t *env = ck_envtest_start(NULL, &err);
	ck_assert_msg(env != NULL, "%s", err);
	char *argv[] = {"configmap-hash", "--kubeconfig", (char *)ck_envtest_kubeconfig(env)};
	int rc;
	ck_manager_t *m = ck_manager_new(
	    &(ck_manager_opts_t){.name = "configmap-hash", .metrics_addr = "0", .probe_addr = "0"},
	    3, argv, &rc);
	ck_assert_msg(m != NULL, "manager: exit %d", rc);
	configmap_hash_setup(&h, m);
	ck_assert_int_eq(ck_manager_run_with(m, create_and_wait, env, &err), 0);
	ck_assert_msg(err == NULL, "%s", err);
	ck_assert_msg(ck_envtest_stop(env, &err) == 0, "%s", err);
}
END_TEST

CK_CHECK_MAIN_TIMEOUT("configmap-hash", 120, NULL, NULL, test_envtest)
