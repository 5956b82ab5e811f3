/*
 * greeting: a controller of a custom resource, Greeting (crd.yaml). Each Greeting
 * owns a ConfigMap <name>-greeting whose data.message is "Hello, <spec.name>!"
 * ("world" when spec.name is empty), written by server-side apply with a
 * controller reference to the Greeting, and reports that message in
 * status.message through the status subresource. A ConfigMap changed or deleted
 * by hand is put back; deleting the Greeting lets the garbage collector take the
 * ConfigMap; a ConfigMap of that name controlled by something else is left alone
 * (an event says so).
 *
 * The kind exists only as a CRD: its C (descriptor, accessors, structs,
 * validation) is generated from crd.yaml by ckube-gen at build time:
 *
 *   ckube-gen -o gen examples/greeting/crd.yaml      # gen/v1alpha1/greeting.{h,c}
 *   cc -Igen main.c greeting.c gen/v1alpha1/greeting.c $(pkg-config --cflags --libs ckube)
 *
 * The controller itself is greeting.c; its tests are greeting_test.c (on the fake
 * API server, `make examples-test`) and envtest_test.c (`make envtest-test`).
 */
#include "greeting.h"

int main(int argc, char **argv)
{
	static greeting_ctrl_t g;
	int rc;
	ck_manager_opts_t mo = {.name = "greeting", .version = "0.1.0"};
	ck_manager_t *m = ck_manager_new(&mo, argc, argv, &rc);
	if (m == NULL)
		return rc;
	greeting_setup(&g, m);
	return ck_manager_run(m);
}
