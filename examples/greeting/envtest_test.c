/*
 * The controller on a manager against envtest (etcd and kube-apiserver with
 * crd.yaml installed, <ckube/envtest.h>): a Greeting gets its ConfigMap and its
 * status.message. Run from this directory: `make envtest-test`.
 */
#include "greeting.h"

#include <ckube/envtest.h>

#include <check.h>
#include <pthread.h>
#include <string.h>
#include <threads.h>

static ck_envtest_t *env;
static bool greeted;

/* Beside the manager m: a Greeting for Ada, its ConfigMap and its status saying
 * "Hello, Ada!" within 30 s, then m stopped. */
static void *create_and_wait(void *m)
{
	ck_client_t *c = ck_envtest_client(env);
	ck_patch_t *g = greeting_patch_new("default", "ada");
	ck_patch_set_string(g, CK_PATH("spec", "name"), "Ada");
	ck_result_t res = {0};
	bool created = ck_client_create_body_sync(c, g, NULL, &res) == 0;
	for (int i = 0; created && !greeted && i < 300;
	     i++, thrd_sleep(&(struct timespec){.tv_nsec = 100000000}, NULL)) {
		ck_result_clear(&res);
		if (ck_client_get_sync(c, &greeting_type, "default", "ada", &res) != 0)
			continue;
		const char *msg = greeting_status_message(res.obj);
		greeted = msg != NULL && strcmp(msg, "Hello, Ada!") == 0;
		ck_result_clear(&res);
		greeted = greeted && ck_client_get_sync(c, &ck_type_configmap, "default",
		                                        "ada-greeting", &res) == 0;
	}
	ck_result_clear(&res);
	ck_patch_free(g);
	ck_manager_stop(m);
	return NULL;
}

START_TEST(test_envtest)
{
	char *err = NULL;
	const char *crds[] = {"crd.yaml"};
	env = ck_envtest_start(&(ck_envtest_opts_t){.crd_paths = crds, .ncrd_paths = 1}, &err);
	ck_assert_msg(env != NULL, "%s", err);
	char *argv[] = {"greeting", "--kubeconfig", (char *)ck_envtest_kubeconfig(env),
	                "--metrics-bind-address=0", "--health-probe-bind-address=0"};
	int rc;
	ck_manager_t *m = ck_manager_new(&(ck_manager_opts_t){.name = "greeting"}, 5, argv, &rc);
	ck_assert_msg(m != NULL, "manager: exit %d", rc);
	static greeting_ctrl_t g;
	greeting_setup(&g, m);
	pthread_t t;
	pthread_create(&t, NULL, create_and_wait, m);
	ck_assert_int_eq(ck_manager_run(m), 0);
	pthread_join(t, NULL);
	ck_assert_msg(greeted, "no ConfigMap and status.message \"Hello, Ada!\" within 30 s");
	ck_assert_msg(ck_envtest_stop(env, &err) == 0, "%s", err);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("envtest");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_envtest);
	Suite *s = suite_create("greeting");
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
