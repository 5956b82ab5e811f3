/*
 * The controller on a manager against envtest (etcd and kube-apiserver with
 * crd.yaml installed, <ckube/envtest.h>): a WebApp gets its Deployment. What
 * go/envtest_test.go checks. Run from this directory: `make envtest-test`.
 */
#include "webapp.h"

#include <ckube/envtest.h>

#include <check.h>
#include <pthread.h>
#include <threads.h>

static ck_envtest_t *env;
static bool got_deployment;

/* Beside the manager m: a WebApp, its Deployment within 30 s, then m stopped. */
static void *create_and_wait(void *m)
{
	ck_client_t *c = ck_envtest_client(env);
	ck_patch_t *app = web_app_patch_new("default", "web");
	ck_patch_set_string(app, CK_PATH("spec", "image"), "nginx:1.27");
	ck_patch_set_int(app, CK_PATH("spec", "replicas"), 1);
	ck_patch_set_int(app, CK_PATH("spec", "port"), 8080);
	ck_result_t res = {0};
	bool created = ck_client_create_body_sync(c, app, NULL, &res) == 0;
	for (int i = 0; created && !got_deployment && i < 300;
	     i++, thrd_sleep(&(struct timespec){.tv_nsec = 100000000}, NULL)) {
		ck_result_clear(&res);
		got_deployment =
		    ck_client_get_sync(c, &ck_type_deployment, "default", "web", &res) == 0;
	}
	ck_result_clear(&res);
	ck_patch_free(app);
	ck_manager_stop(m);
	return NULL;
}

START_TEST(test_envtest)
{
	char *err = NULL;
	const char *crds[] = {"crd.yaml"};
	env = ck_envtest_start(&(ck_envtest_opts_t){.crd_paths = crds, .ncrd_paths = 1}, &err);
	ck_assert_msg(env != NULL, "%s", err);
	char *argv[] = {"webapp", "--kubeconfig", (char *)ck_envtest_kubeconfig(env),
	                "--metrics-bind-address=0", "--health-probe-bind-address=0"};
	int rc;
	ck_manager_t *m = ck_manager_new(&(ck_manager_opts_t){.name = "webapp"}, 5, argv, &rc);
	ck_assert_msg(m != NULL, "manager: exit %d", rc);
	static webapp_t w;
	webapp_setup(&w, m);
	pthread_t t;
	pthread_create(&t, NULL, create_and_wait, m);
	ck_assert_int_eq(ck_manager_run(m), 0);
	pthread_join(t, NULL);
	ck_assert_msg(got_deployment, "no Deployment within 30 s");
	ck_assert_msg(ck_envtest_stop(env, &err) == 0, "%s", err);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("envtest");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_envtest);
	Suite *s = suite_create("webapp");
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
