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
 *   cc -Igen main.c gen/v1alpha1/greeting.c $(pkg-config --cflags --libs ckube)
 */
#include "v1alpha1/greeting.h"

#include <ckube/ckube.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIELD_MANAGER "greeting"

static ck_manager_t *mgr;
static const ck_cache_lister_t *greetings, *configmaps;

/* data.message of the ConfigMap, a new string, or NULL. */
static char *configmap_message(const ck_obj_t *cm)
{
	ck_json_doc_t *d = ck_json_parse_field_path(cm, "data", NULL);
	const char *s = ck_json_str(ck_json_get(ck_json_root(d), CK_PATH("message")));
	char *r = s ? ck_xstrdup(s) : NULL;
	ck_json_doc_free(d);
	return r;
}

static int reconcile(void *ud, const char *key, char **err)
{
	(void)ud;
	char *ns = NULL, *name = NULL, *have = NULL, *cm_name = NULL;
	ck_obj_key_split(key, &ns, &name);
	ck_obj_t *g = ck_cache_lister_get(greetings, ns, name), *cm = NULL;
	ck_patch_t *p = NULL;
	ck_result_t res = {0};
	int rc = 0;
	if (g == NULL || g->deletion_timestamp != NULL)
		goto out; /* gone: the garbage collector removes its ConfigMap */
	char *why = NULL;
	if (greeting_validate_spec(g, &why) != 0) {
		/* The CRD refuses such a Greeting; one written under another CRD is
		 * reported, not retried until it changes. */
		ck_record_event(ck_manager_recorder(mgr), g, CK_RECORD_WARNING, "InvalidSpec", "%s",
		                why);
		free(why);
		goto out;
	}
	const char *who = greeting_spec_name(g);
	char want[128];
	snprintf(want, sizeof(want), "Hello, %s!", who && *who ? who : "world");

	cm_name = ck_xasprintf("%s-greeting", name);
	cm = ck_cache_lister_get(configmaps, ns, cm_name);
	have = cm ? configmap_message(cm) : NULL;
	if (have == NULL || strcmp(have, want) != 0) {
		/* Apply what this controller owns; the server merges it with others'. */
		p = ck_ac_configmap(ns, cm_name);
		if (ck_patch_set_controller_reference(p, g, cm, &why) == CK_OWNER_EALREADY_OWNED) {
			/* Not ours to take: reported, not retried until something changes. */
			ck_record_event(ck_manager_recorder(mgr), g, CK_RECORD_WARNING,
			                "AlreadyOwned", "%s", why);
			free(why);
			goto out;
		}
		if (why != NULL) {
			*err = why;
			rc = -1;
			goto out;
		}
		ck_ac_configmap_data(p, "message", want);
		if (ck_client_apply_sync(ck_manager_client(mgr), p, FIELD_MANAGER, true, &res) !=
		    0) {
			*err = ck_xasprintf("apply ConfigMap %s/%s: %s", ns, cm_name, res.error);
			rc = -1;
			goto out;
		}
		ck_record_event(ck_manager_recorder(mgr), g, CK_RECORD_NORMAL, "Applied",
		                "ConfigMap %s says \"%s\"", cm_name, want);
		ck_result_clear(&res);
		ck_patch_free(p);
		p = NULL;
	}
	const char *status = greeting_status_message(g);
	if (status == NULL || strcmp(status, want) != 0) {
		greeting_status_t st = {.message = want};
		p = ck_patch_new();
		greeting_status_to_patch(&st, p);
		/* The status subresource: the main resource would drop status. */
		if (ck_client_status_merge_patch_sync(ck_manager_client(mgr), &greeting_type, ns,
		                                      name, p, NULL, &res) != 0) {
			*err = ck_xasprintf("status of Greeting %s: %s", key, res.error);
			rc = -1;
		}
	}
out:
	ck_result_clear(&res);
	ck_patch_free(p);
	ck_obj_unref(cm);
	ck_obj_unref(g);
	free(have);
	free(cm_name);
	free(ns);
	free(name);
	return rc;
}

int main(int argc, char **argv)
{
	int rc;
	ck_manager_opts_t mo = {.name = "greeting", .version = "0.1.0"};
	mgr = ck_manager_new(&mo, argc, argv, &rc);
	if (mgr == NULL)
		return rc;
	ck_controller_t *c = ck_manager_add_controller(mgr, "Greetings", reconcile, NULL);
	greetings = ck_cache_informer_lister(ck_controller_watch(c, &greeting_type));
	/* Its ConfigMaps: a change or delete queues the Greeting that controls it. */
	configmaps = ck_cache_informer_lister(ck_controller_watch_map(
	    c, &ck_type_configmap, ck_controller_enqueue_owner_type, (void *)&greeting_type));
	return ck_manager_run(mgr);
}
