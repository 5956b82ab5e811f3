/*
 * The controller on a manager against envtest (etcd and kube-apiserver with
 * crd.yaml installed, <ckube/envtest.h>): a Greeting gets its ConfigMap and its
 * status.message. Run from this directory: `make envtest-test`.
 */
#include "greeting.h"

#include <ckube/check.h>
#include <ckube/envtest.h>

#include <stdlib.h>
#include <string.h>

static bool says(void *want, const ck_obj_t *g)
{
	const char *msg = greeting_status_message(g);
	return msg != NULL && strcmp(msg, want) == 0;
}

/* Beside the manager: a Greeting for Ada, then its status saying "Hello, Ada!" and
 * its ConfigMap, each within 30 s. */
static int create_and_wait(void *env, char **err)
{
	ck_client_t *c = ck_envtest_client(env);
	ck_patch_t *g = greeting_patch_new("default", "ada");
	ck_patch_set_string(g, CK_PATH("spec", "name"), "Ada");
	ck_result_t res = {0};
	int rc = ck_client_create_body_sync(c, g, NULL, &res);
	if (rc != 0)
		*err = ck_xstrdup(res.error);
	ck_result_clear(&res);
	ck_patch_free(g);
	if (rc == 0)
		rc = ck_envtest_get_eventually(c, &greeting_type, "default", "ada", says,
		                               "Hello, Ada!", 30000, err);
	return rc != 0 ? rc
	               : ck_envtest_get_eventually(c, &ck_type_configmap, "default", "ada-greeting",
	                                           NULL, NULL, 30000, err);
}

START_TEST(test_envtest)
{
	char *err = NULL;
	const char *crds[] = {"crd.yaml"};
	ck_envtest_t *env =
	    ck_envtest_start(&(ck_envtest_opts_t){.crd_paths = crds, .ncrd_paths = 1}, &err);
	ck_assert_msg(env != NULL, "%s", err);
	char *argv[] = {"greeting", "--kubeconfig", (char *)ck_envtest_kubeconfig(env)};
	int rc;
	ck_manager_t *m = ck_manager_new(
	    &(ck_manager_opts_t){.name = "greeting", .metrics_addr = "0", .probe_addr = "0"}, 3,
	    argv, &rc);
	ck_assert_msg(m != NULL, "manager: exit %d", rc);
	static greeting_ctrl_t g;
	greeting_setup(&g, m);
	ck_assert_int_eq(ck_manager_run_with(m, create_and_wait, env, &err), 0);
	ck_assert_msg(err == NULL, "%s", err);
	ck_assert_msg(ck_envtest_stop(env, &err) == 0, "%s", err);
}
END_TEST

CK_CHECK_MAIN_TIMEOUT("greeting", 120, NULL, NULL, test_envtest)
