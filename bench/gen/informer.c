/*
 * The program bench/bench_gen.sh builds from a freshly generated Gadget kind: a
 * manager, one informer of Gadgets, and a reconcile that reads each one through the
 * generated accessors and validation and prints one line (the script waits for it).
 */
#include "v1/gadget.h"

#include <ckube/ckube.h>

#include <stdio.h>
#include <stdlib.h>

static const ck_cache_lister_t *gadgets;

static int reconcile(void *ud, const char *key, char **err)
{
	(void)ud;
	(void)err;
	char *ns = NULL, *name = NULL, *why = NULL;
	ck_obj_key_split(key, &ns, &name);
	ck_obj_t *g = ck_cache_lister_get(gadgets, ns, name);
	if (g != NULL) {
		int64_t size = 0;
		gadget_spec_size(g, &size);
		const char *color = gadget_spec_color(g);
		bool valid = gadget_validate(g, &why) == 0;
		printf("reconciled %s size=%lld color=%s %s\n", key, (long long)size,
		       color ? color : "(absent)", valid ? "valid" : why);
		fflush(stdout);
	}
	free(why);
	ck_obj_unref(g);
	free(ns);
	free(name);
	return 0;
}

int main(int argc, char **argv)
{
	int rc;
	ck_manager_opts_t mo = {.name = "gadget-informer", .version = "0.1.0"};
	ck_manager_t *mgr = ck_manager_new(&mo, argc, argv, &rc);
	if (mgr == NULL)
		return rc;
	ck_controller_t *c = ck_manager_add_controller(mgr, "Gadgets", reconcile, NULL);
	gadgets = ck_cache_informer_lister(ck_controller_watch(c, &gadget_type));
	return ck_manager_run(mgr);
}
