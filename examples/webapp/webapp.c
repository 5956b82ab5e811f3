/*
 * webapp: keeps each WebApp's Deployment and Service as its spec says, reports
 * readiness, and records an event when a WebApp goes (webapp.h).
 *
 * The Deployment and the Service are written by create-or-update, not by
 * server-side apply: a Service port added by hand is an entry apply could not
 * take away (it is kubectl's), and create-or-update replaces the list whole.
 */
#include "webapp.h"

#include <stdlib.h>

#define FINALIZER  "example.ckube.io/webapp"
#define NAME_LABEL "app.kubernetes.io/name"

/* Creates or updates body (taken) with app as its controller; the lister's copy
 * of the object, if any, is what the adoption rules are checked against. */
static int own(webapp_t *w, const ck_obj_t *app, ck_patch_t *body, const ck_cache_lister_t *l,
               char **err)
{
	ck_obj_t *existing = ck_cache_lister_get(l, app->ns, app->name);
	ck_result_t res = {0};
	ck_op_result_t op;
	int rc = ck_patch_set_controller_reference(body, app, existing, err) == 0 ? 0 : -1;
	if (rc == 0 && ck_create_or_update_sync(w->client, body, NULL, &op, &res) != 0)
		rc = ck_reconcile_failed(&res, err, "%s %s/%s", ck_patch_object_type(body)->kind,
		                         app->ns, app->name);
	ck_result_clear(&res);
	ck_obj_unref(existing);
	ck_patch_free(body);
	return rc;
}

int webapp_reconcile(void *ud, const char *key, char **err)
{
	webapp_t *w = ud;
	char *ns = NULL, *name = NULL;
	ck_obj_key_split(key, &ns, &name);
	ck_obj_t *app = ck_cache_lister_get(w->webapps, ns, name), *dep = NULL;
	ck_json_doc_t *conds = NULL;
	ck_sbuf_t set = CK_SBUF_INIT;
	ck_patch_t *status = NULL;
	ck_result_t res = {0};
	int rc = 0;
	if (app == NULL)
		goto out; /* gone: the garbage collector takes its Deployment and Service */
	if (app->deletion_timestamp != NULL) {
		if (!ck_obj_has_finalizer(app, FINALIZER))
			goto out;
		ck_record_event(w->recorder, app, CK_RECORD_NORMAL, "Deleted",
		                "WebApp deleted; its Deployment and Service go with it");
		if (ck_finalizer_remove_sync(w->client, app, FINALIZER, NULL, &res) != 0)
			rc = ck_reconcile_failed(&res, err, "finalizer of WebApp %s", key);
		goto out;
	}
	if (ck_finalizer_add_sync(w->client, app, FINALIZER, NULL, &res) != 0) {
		rc = ck_reconcile_failed(&res, err, "finalizer of WebApp %s", key);
		goto out;
	}
	ck_result_clear(&res);

	int64_t replicas = 0, port = 0; /* the CRD defaults both */
	web_app_spec_replicas(app, &replicas);
	web_app_spec_port(app, &port);
	ck_patch_t *d = ck_ac_deployment(ns, name);
	ck_ac_deployment_replicas(d, (int32_t)replicas);
	ck_ac_deployment_selector(d, NAME_LABEL, name);
	ck_ac_deployment_template_label(d, NAME_LABEL, name);
	ck_patch_t *c = ck_ac_container("web", web_app_spec_image(app));
	ck_ac_container_port(c, "http", (int32_t)port, NULL);
	ck_ac_deployment_container(d, c);
	if ((rc = own(w, app, d, w->deployments, err)) != 0)
		goto out;
	ck_patch_t *s = ck_ac_service(ns, name);
	ck_ac_service_selector(s, NAME_LABEL, name);
	ck_ac_service_port(s, "http", 80, (int32_t)port, NULL);
	if ((rc = own(w, app, s, w->services, err)) != 0)
		goto out;

	int32_t ready = 0;
	dep = ck_cache_lister_get(w->deployments, ns, name);
	ck_deployment_status_ready_replicas(dep, &ready);
	ck_condition_t cond = {.type = "Ready",
	                       .status = "False",
	                       .reason = "Progressing",
	                       .message = "waiting for pods",
	                       .observed_generation = app->generation};
	if (ready == replicas)
		cond.status = "True", cond.reason = "Available", cond.message = "all pods ready";
	conds = ck_json_parse_field_path(app, "status.conditions", NULL);
	bool changed = false;
	if (ck_conditions_set(ck_json_root(conds), &cond, NULL, &set, &changed, err) != 0) {
		rc = -1;
		goto out;
	}
	int64_t had_ready = 0, had_generation = 0;
	web_app_status_ready_replicas(app, &had_ready);
	web_app_status_observed_generation(app, &had_generation);
	if (!changed && had_ready == ready && had_generation == app->generation)
		goto out; /* a write would change nothing but the resourceVersion */
	web_app_status_t st = {.ready_replicas = ready,
	                       .has_ready_replicas = true,
	                       .observed_generation = app->generation,
	                       .has_observed_generation = true};
	status = ck_patch_new();
	web_app_status_to_patch(&st, status);
	ck_patch_set_conditions(status, set.data, set.len);
	if (ck_client_status_merge_patch_sync(w->client, &web_app_type, ns, name, status, NULL,
	                                      &res) != 0)
		rc = ck_reconcile_failed(&res, err, "status of WebApp %s", key);
out:
	ck_result_clear(&res);
	ck_patch_free(status);
	ck_sbuf_free(&set);
	ck_json_doc_free(conds);
	ck_obj_unref(dep);
	ck_obj_unref(app);
	free(ns);
	free(name);
	return rc;
}

void webapp_setup(webapp_t *w, ck_manager_t *m)
{
	/* Status writes do not bump the generation: they queue nothing. */
	const ck_predicate_t *spec_changed[] = {ck_predicate_generation_changed()};
	ck_watch_opts_t webapps = {.predicates = spec_changed, .npredicates = 1};
	ck_controller_t *c = ck_manager_add_controller(m, "webapp", webapp_reconcile, w);
	w->client = ck_manager_client(m);
	w->recorder = ck_manager_recorder(m);
	w->webapps = ck_cache_informer_lister(ck_controller_watch_opts(c, &web_app_type, &webapps));
	w->deployments = ck_cache_informer_lister(ck_controller_watch_map(
	    c, &ck_type_deployment, ck_controller_enqueue_owner_type, (void *)&web_app_type));
	w->services = ck_cache_informer_lister(ck_controller_watch_map(
	    c, &ck_type_service, ck_controller_enqueue_owner_type, (void *)&web_app_type));
}
