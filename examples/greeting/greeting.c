/*
 * greeting: keeps each Greeting's ConfigMap <name>-greeting saying
 * "Hello, <spec.name>!" and reports it in status.message (greeting.h).
 *
 * The ConfigMap is written by server-side apply with a controller reference to
 * the Greeting; the status through the status subresource, which is where a CRD
 * with one keeps it (the main resource would drop it).
 */
#include "greeting.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIELD_MANAGER "greeting"

/* data.message of the ConfigMap, a new string, or NULL. */
static char *configmap_message(const ck_obj_t *cm)
{
	ck_json_doc_t *d = ck_json_parse_field_path(cm, "data", NULL);
	const char *s = ck_json_str(ck_json_get(ck_json_root(d), CK_PATH("message")));
	char *r = s ? ck_xstrdup(s) : NULL;
	ck_json_doc_free(d);
	return r;
}

int greeting_reconcile(void *ud, const char *key, char **err)
{
	greeting_ctrl_t *c = ud;
	char *ns = NULL, *name = NULL, *have = NULL, *cm_name = NULL;
	ck_obj_key_split(key, &ns, &name);
	ck_obj_t *g = ck_cache_lister_get(c->greetings, ns, name), *cm = NULL;
	ck_patch_t *p = NULL;
	ck_result_t res = {0};
	int rc = 0;
	if (g == NULL || g->deletion_timestamp != NULL)
		goto out; /* gone: the garbage collector removes its ConfigMap */
	char *why = NULL;
	if (greeting_validate_spec(g, &why) != 0) {
		/* The CRD refuses such a Greeting; one written under another CRD is
		 * reported, not retried until it changes. */
		ck_record_event(c->recorder, g, CK_RECORD_WARNING, "InvalidSpec", "%s", why);
		free(why);
		goto out;
	}
	const char *who = greeting_spec_name(g);
	char want[128];
	snprintf(want, sizeof(want), "Hello, %s!", who && *who ? who : "world");

	cm_name = ck_xasprintf("%s-greeting", name);
	cm = ck_cache_lister_get(c->configmaps, ns, cm_name);
	have = cm ? configmap_message(cm) : NULL;
	if (have == NULL || strcmp(have, want) != 0) {
		/* Apply what this controller owns; the server merges it with others'. */
		p = ck_ac_configmap(ns, cm_name);
		if (ck_patch_set_controller_reference(p, g, cm, &why) == CK_OWNER_EALREADY_OWNED) {
			/* Not ours to take: reported, not retried until something changes. */
			ck_record_event(c->recorder, g, CK_RECORD_WARNING, "AlreadyOwned", "%s",
			                why);
			free(why);
			goto out;
		}
		if (why != NULL) {
			*err = why;
			rc = -1;
			goto out;
		}
		ck_ac_configmap_data(p, "message", want);
		if (ck_client_apply_sync(c->client, p, FIELD_MANAGER, true, &res) != 0) {
			*err = ck_xasprintf("apply ConfigMap %s/%s: %s", ns, cm_name, res.error);
			rc = -1;
			goto out;
		}
		ck_record_event(c->recorder, g, CK_RECORD_NORMAL, "Applied",
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
		if (ck_client_status_merge_patch_sync(c->client, &greeting_type, ns, name, p, NULL,
		                                      &res) != 0) {
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

void greeting_setup(greeting_ctrl_t *g, ck_manager_t *m)
{
	ck_controller_t *c = ck_manager_add_controller(m, "Greetings", greeting_reconcile, g);
	g->client = ck_manager_client(m);
	g->recorder = ck_manager_recorder(m);
	g->greetings = ck_cache_informer_lister(ck_controller_watch(c, &greeting_type));
	/* Its ConfigMaps: a change or delete queues the Greeting that controls it. */
	g->configmaps = ck_cache_informer_lister(ck_controller_watch_map(
	    c, &ck_type_configmap, ck_controller_enqueue_owner_type, (void *)&greeting_type));
}
