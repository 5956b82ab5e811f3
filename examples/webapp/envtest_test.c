/*
 * The controller on a manager against envtest (etcd and kube-apiserver with
 * crd.yaml installed, <ckube/envtest.h>): a WebApp gets its Deployment. What
 * go/envtest_test.go checks. Run from this directory: `make envtest-test`.
 */
#include "webapp.h"

#include <ckube/check.h>
#include <ckube/envtest.h>

#include <stdlib.h>

/* Beside the manager: a WebApp, then its Deployment within 30 s. */
static int create_and_wait(void *env, char **err)
{
	ck_client_t *c = ck_envtest_client(env);
	ck_patch_t *app = web_app_patch_new("default", "web");
	ck_patch_set_string(app, CK_PATH("spec", "image"), "nginx:1.27");
	ck_patch_set_int(app, CK_PATH("spec", "replicas"), 1);
	ck_patch_set_int(app, CK_PATH("spec", "port"), 8080);
	ck_result_t res = {0};
	int rc = ck_client_create_body_sync(c, app, NULL, &res);
	if (rc != 0)
		*err = ck_xstrdup(res.error);
	ck_result_clear(&res);
	ck_patch_free(app);
	return rc != 0 ? rc
	               : ck_envtest_get_eventually(c, &ck_type_deployment, "default", "web", NULL,
	                                           NULL, 30000, err);
}

START_TEST(test_envtest)
{
	char *err = NULL;
	const char *crds[] = {"crd.yaml"};
	ck_envtest_t *env =
	    ck_envtest_start(&(ck_envtest_opts_t){.crd_paths = crds, .ncrd_paths = 1}, &err);
	ck_assert_msg(env != NULL, "%s", err);
	char *argv[] = {"webapp", "--kubeconfig", (char *)ck_envtest_kubeconfig(env)};
	int rc;
	ck_manager_t *m = ck_manager_new(
	    &(ck_manager_opts_t){.name = "webapp", .metrics_addr = "0", .probe_addr = "0"}, 3, argv,
	    &rc);
	ck_assert_msg(m != NULL, "manager: exit %d", rc);
	static webapp_t w;
	webapp_setup(&w, m);
	ck_assert_int_eq(ck_manager_run_with(m, create_and_wait, env, &err), 0);
	ck_assert_msg(err == NULL, "%s", err);
	ck_assert_msg(ck_envtest_stop(env, &err) == 0, "%s", err);
}
END_TEST

CK_CHECK_MAIN_TIMEOUT("webapp", 120, NULL, NULL, test_envtest)
