/*
 * configmap-hash: writes a hash of each labelled ConfigMap's data (and of the Secret
 * its annotation names) into an annotation, so that a change of either shows.
 *
 * ConfigMaps labelled example.ckube.io/hash=true get example.ckube.io/hash:
 * "fnv64a:<16 hex>", FNV-1a 64 over the ConfigMap's data and then the Secret's data
 * (keys sorted; key, 0, value, 0 for each; Secret values as bytes). A change is
 * written as a JSON merge patch and announced by a HashUpdated event. The same
 * controller in Go with client-go is go/main.go, for comparison.
 *
 * Built only with `pkg-config --cflags --libs ckube`:
 *
 *   cc main.c configmap-hash.c $(pkg-config --cflags --libs ckube)
 *
 * The controller itself is configmap-hash.c; its tests are configmap-hash_test.c
 * (on the fake API server, `make examples-test`) and envtest_test.c
 * (`make envtest-test`).
 */
#include "configmap-hash.h"

int main(int argc, char **argv)
{
	static configmap_hash_t h;
	int rc;
	ck_manager_opts_t mo = {.name = "configmap-hash", .version = "0.1.0"};
	ck_manager_t *m = ck_manager_new(&mo, argc, argv, &rc);
	if (m == NULL)
		return rc;
	configmap_hash_setup(&h, m);
	return ck_manager_run(m);
}
