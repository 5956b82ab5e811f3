/*
 * The controller on a manager against envtest (etcd and kube-apiserver,
 * <ckube/envtest.h>; no CRD): a labelled ConfigMap gets its hash annotation.
 * Run from this directory: `make envtest-test`.
 */
#include "configmap-hash.h"

#include <ckube/envtest.h>

#include <check.h>
#include <pthread.h>
#include <string.h>
#include <threads.h>

static ck_envtest_t *env;
static configmap_hash_t h;
static bool hashed;

/* Beside the manager m: a labelled ConfigMap with data {"a":"1","b":"2"}, its
 * hash annotation within 30 s (FNV-1a 64 computed apart), then m stopped. */
static void *create_and_wait(void *m)
{
	ck_client_t *c = ck_envtest_client(env);
	ck_patch_t *cm = ck_ac_configmap("default", "conf");
	ck_patch_set_string(cm, CK_PATH("metadata", "labels", CONFIGMAP_HASH_LABEL), "true");
	ck_ac_configmap_data(cm, "a", "1");
	ck_ac_configmap_data(cm, "b", "2");
	ck_result_t res = {0};
	bool created = ck_client_create_body_sync(c, cm, NULL, &res) == 0;
	for (int i = 0; created && !hashed && i < 300;
	     i++, thrd_sleep(&(struct timespec){.tv_nsec = 100000000}, NULL)) {
		ck_result_clear(&res);
		if (ck_client_get_sync(c, &h.configmap_type, "default", "conf", &res) != 0)
			continue;
		const char *v = ck_obj_annotation(res.obj, CONFIGMAP_HASH_ANN);
		hashed = v != NULL && strcmp(v, "fnv64a:ba7ba27f8aa4322d") == 0;
	}
	ck_result_clear(&res);
	ck_patch_free(cm);
	ck_manager_stop(m);
	return NULL;
}

START_TEST(test_envtest)
{
	char *err = NULL;
	env = ck_envtest_start(NULL, &err);
	ck_assert_msg(env != NULL, "%s", err);
	char *argv[] = {"configmap-hash", "--kubeconfig", (char *)ck_envtest_kubeconfig(env),
	                "--metrics-bind-address=0", "--health-probe-bind-address=0"};
	int rc;
	ck_manager_t *m =
	    ck_manager_new(&(ck_manager_opts_t){.name = "configmap-hash"}, 5, argv, &rc);
	ck_assert_msg(m != NULL, "manager: exit %d", rc);
	configmap_hash_setup(&h, m);
	pthread_t t;
	pthread_create(&t, NULL, create_and_wait, m);
	ck_assert_int_eq(ck_manager_run(m), 0);
	pthread_join(t, NULL);
	ck_assert_msg(hashed, "no hash annotation fnv64a:ba7ba27f8aa4322d within 30 s");
	ck_assert_msg(ck_envtest_stop(env, &err) == 0, "%s", err);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("envtest");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_envtest);
	Suite *s = suite_create("configmap-hash");
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
