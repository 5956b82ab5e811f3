/*
 * controller: sample-controller's semantics (see REFERENCE.md), plus:
 *  - nothing is written when nothing changed, so a resync of unchanged Foos costs
 *    no API calls and no events;
 *  - status carries observedGeneration and a Ready condition;
 *  - a Foo whose spec is invalid (the CRD on a cluster may lack validation) gets a
 *    Ready=False status and, when that status is written, a Warning event; it is
 *    not retried until it changes.
 */
#include "cmd/sample-controller/controller.h"

#include "cmd/sample-controller/foo_sync.h"
#include <ckube/log.h>
#include <ckube/manager.h>
#include <ckube/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum sync_result {
	SYNC_OK = 0,      /* done: forget the key */
	SYNC_ERROR = -1,  /* failed: retry with backoff */
	SYNC_REQUEUE = -2 /* expected race (409 conflict, stale cache): retry with backoff */
};

struct controller {
	ck_client_t *client;
	ck_cache_informer_t *foos;
	ck_cache_informer_t *deployments;
	const ck_cache_lister_t *foo_lister;
	const ck_cache_lister_t *dep_lister;
	ck_record_t *recorder;
	const ck_clk_t *clock;
	const char *field_manager;
	/* Where handlers queue Foo keys (the manager's controller); NULL: nowhere. */
	void (*enqueue)(void *ud, const char *key, int priority);
	void *enqueue_ud;
};

/* ---- Handlers: loop thread, must not block. ---- */

/* With the manager's priority queue (--priority-queue), the initial list and
 * resyncs wait behind new and changed objects, as in controller-runtime: after a
 * restart, a Foo created meanwhile is not stuck behind every re-listed one. */
static void enqueue_foo(controller_t *c, const ck_obj_t *foo, int priority)
{
	char key[512];
	if (ck_obj_key(foo, key, sizeof(key)) >= sizeof(key))
		return; /* names are at most 253 bytes: cannot happen for a valid object */
	if (c->enqueue)
		c->enqueue(c->enqueue_ud, key, priority);
}

static void foo_on_add(void *ud, ck_obj_t *obj, bool initial)
{
	enqueue_foo(ud, obj, ck_controller_add_priority(initial));
}

static void foo_on_update(void *ud, ck_obj_t *old_obj, ck_obj_t *new_obj)
{
	/* Like upstream, resyncs (same resourceVersion) re-reconcile too: that is what
	 * repairs drift the informers cannot see. sync() writes nothing if all agrees. */
	enqueue_foo(ud, new_obj, ck_controller_update_priority(old_obj, new_obj));
}

/*
 * The owning Foo of a Deployment, through its controller ownerReference. Upstream
 * matches the kind's name alone; we match API group and kind (any version), as
 * controller-runtime's Owns() does: a "Foo" of another group is not ours.
 */
static void handle_object(controller_t *c, const ck_obj_t *obj, int priority)
{
	const ck_obj_owner_t *ref = ck_obj_controller_of(obj, FOO_GROUP, FOO_KIND);
	if (ref == NULL)
		return;
	ck_obj_t *foo = ck_cache_lister_get(c->foo_lister, obj->ns, ref->name);
	if (foo == NULL) {
		CK_LOG_V(4, "Ignoring orphaned object", CK_KV_OBJ("deployment", obj->ns, obj->name),
		         CK_KV_STR("foo", ref->name));
		return;
	}
	enqueue_foo(c, foo, priority);
	ck_obj_unref(foo);
}

static void dep_on_add(void *ud, ck_obj_t *obj, bool initial)
{
	handle_object(ud, obj, ck_controller_add_priority(initial));
}

static void dep_on_update(void *ud, ck_obj_t *old_obj, ck_obj_t *new_obj)
{
	/* Periodic resyncs send the same object twice; the Foo resync covers it. */
	if (strcmp(old_obj->rv, new_obj->rv) == 0)
		return;
	handle_object(ud, new_obj, 0);
}

static void dep_on_delete(void *ud, const char *key, ck_obj_t *obj, bool final_state_unknown)
{
	(void)key;
	(void)final_state_unknown; /* the tombstone's last known state is just as good */
	handle_object(ud, obj, 0);
}

/* ---- sync ---- */

static void warn_event(controller_t *c, const ck_obj_t *foo, const char *reason, const char *msg)
{
	if (c->recorder)
		ck_record_event(c->recorder, foo, CK_RECORD_WARNING, reason, "%s", msg);
}

/* Writes the status if it differs from what the Foo says. Returns a sync_result. */
static int update_status(controller_t *c, const ck_obj_t *foo, const foo_desired_status_t *st,
                         bool *wrote, char **err)
{
	if (foo_status_equal(foo, st))
		return SYNC_OK;
	ck_sbuf_t body = CK_SBUF_INIT;
	ck_result_t res = {0};
	int result = SYNC_ERROR;
	foo_status_update_json(foo, st, ck_clk_wall_ns(c->clock), &body);
	ck_write_opts_t wo = {.field_manager = c->field_manager};
	if (ck_client_update_status_sync(c->client, &foo_type, foo->ns, foo->name,
	                                 ck_sbuf_cstr(&body), &wo, &res) == 0) {
		*wrote = true;
		result = SYNC_OK;
		goto out;
	}
	ck_err_set(err, "update status of foo %s/%s: %s", foo->ns, foo->name,
	           res.error ? res.error : "unknown error");
	/* 409: our cached Foo is stale; the watch brings the new one and we retry. 404:
	 * deleted meanwhile (or, on an old CRD, no status subresource: then say so). */
	if (ck_result_is_conflict(&res))
		result = SYNC_REQUEUE;
	else if (ck_result_is_not_found(&res))
		ck_err_wrap(err, "the Foo is gone or the CRD lacks the status subresource "
		                 "(apply deploy/crd.yaml)");
out:
	ck_result_clear(&res);
	ck_sbuf_free(&body);
	return result;
}

/*
 * A Foo that retrying cannot fix (an invalid spec or name, a Deployment the API
 * server refuses as invalid): logs why, writes Ready=False with reason and why,
 * and records the Warning event only when that write happened. A resync of an
 * unchanged Foo then costs nothing (no status PUT, no Event PATCH every resync
 * period); a new generation changes observedGeneration, hence one write and one
 * event. A failed write records nothing: its retry will. Upstream logs and retries
 * (or, for an empty deploymentName, only logs). Returns a sync_result.
 */
static int unfixable(controller_t *c, const ck_obj_t *foo, const char *reason, const char *why,
                     char **err)
{
	CK_LOG_ERROR(why, "Foo cannot be reconciled as written",
	             CK_KV_OBJ("foo", foo->ns, foo->name), CK_KV_STR("reason", reason));
	int64_t avail = 0;
	foo_status_available_replicas(foo, &avail);
	foo_desired_status_t st = {avail, foo->generation, "False", reason, why};
	bool wrote = false;
	int result = update_status(c, foo, &st, &wrote, err);
	if (wrote)
		warn_event(c, foo, reason, why);
	return result;
}

/* The message of a refusal: the server's Status message, else the request's error. */
static const char *refusal_message(const ck_result_t *res)
{
	return res->status.message && res->status.message[0] ? res->status.message : res->error;
}

static int do_sync(controller_t *c, const char *key, char **err)
{
	char *ns = NULL, *name = NULL, *why = NULL;
	ck_obj_t *foo = NULL, *dep = NULL;
	ck_result_t res = {0};
	ck_patch_t *body = NULL; /* the Deployment sent */
	int result = SYNC_ERROR;
	bool wrote = false;

	if (ck_obj_key_split(key, &ns, &name) != 0) {
		/* A malformed key can never succeed: drop it. */
		CK_LOG_ERROR("invalid resource key", "Dropping key", CK_KV_STR("key", key));
		result = SYNC_OK;
		goto out;
	}
	foo = ck_cache_lister_get(c->foo_lister, ns, name);
	if (foo == NULL) {
		CK_LOG_V(2, "Foo no longer exists", CK_KV_OBJ("foo", ns, name));
		result = SYNC_OK;
		goto out;
	}
	if (foo->deletion_timestamp != NULL) {
		/* Being deleted: the garbage collector removes the Deployment. */
		result = SYNC_OK;
		goto out;
	}

	/* Not retried until the Foo changes (unless the status write failed). */
	if (foo_validate_name(foo, &why) != 0) {
		result = unfixable(c, foo, "InvalidName", why, err);
		goto out;
	}
	/* First, as upstream does: an empty name is not one the pattern should judge. */
	const char *dname = foo_spec_deployment_name(foo);
	if (dname == NULL || dname[0] == '\0') {
		result =
		    unfixable(c, foo, "InvalidSpec", "spec.deploymentName must be specified", err);
		goto out;
	}
	/* The schema's checks, generated from deploy/crd.yaml: the CRD installed may
	 * be the upstream one, which states none. */
	if (foo_validate_spec(foo, &why) != 0) {
		result = unfixable(c, foo, "InvalidSpec", why, err);
		goto out;
	}

	ck_write_opts_t wo = {.field_manager = c->field_manager};
	dep = ck_cache_lister_get(c->dep_lister, ns, dname);
	if (dep == NULL) {
		if ((body = foo_new_deployment(foo, err)) == NULL)
			goto out;
		if (ck_client_create_body_sync(c->client, body, &wo, &res) != 0) {
			if (ck_result_is_invalid(&res)) {
				/* The same Foo builds the same Deployment: refused again. */
				result = unfixable(c, foo, "DeploymentInvalid",
				                   refusal_message(&res), err);
				goto out;
			}
			ck_err_set(err, "create deployment %s/%s: %s", ns, dname, res.error);
			/* Exists but not in our cache yet: retry once the informer sees it. */
			result = ck_result_is_already_exists(&res) ? SYNC_REQUEUE : SYNC_ERROR;
			goto out;
		}
		CK_LOG_V(2, "Created deployment", CK_KV_OBJ("foo", ns, name),
		         CK_KV_OBJ("deployment", ns, dname));
		wrote = true;
		dep = res.obj;
		res.obj = NULL;
		ck_result_clear(&res);
		ck_patch_free(body);
		body = NULL;
		if (dep == NULL) {
			ck_err_set(err, "create deployment %s/%s: no object in the answer", ns,
			           dname);
			goto out;
		}
	}

	/* Ours when its controller reference names this Foo: group, kind, name and uid
	 * (upstream's IsControlledBy compares the uid alone, which the API server makes
	 * unique: they differ only for a reference forged with our uid under another
	 * kind or name, which is not ours either). */
	if (!ck_obj_is_controlled_by(dep, foo)) {
		char msg[600];
		snprintf(msg, sizeof(msg),
		         "Resource \"%s\" already exists and is not managed by Foo", dname);
		warn_event(c, foo, "ErrResourceExists", msg);
		int64_t was = 0;
		foo_status_available_replicas(foo, &was);
		foo_desired_status_t st = {was, foo->generation, "False", "ErrResourceExists", msg};
		bool w = false;
		update_status(c, foo, &st, &w, NULL);
		ck_err_set(err, "%s", msg);
		result = SYNC_ERROR;
		goto out;
	}

	int64_t want = 0;
	int32_t have = 0;
	bool has_want = foo_spec_replicas(foo, &want);
	bool has_have = ck_deployment_spec_replicas(dep, &have);
	if (has_want && (!has_have || have != want)) {
		CK_LOG_V(2, "Updating deployment replicas", CK_KV_OBJ("foo", ns, name),
		         CK_KV_INT("want", want), CK_KV_INT("have", have));
		if ((body = foo_new_deployment(foo, err)) == NULL)
			goto out;
		if (ck_client_update_body_sync(c->client, body, &wo, &res) != 0) {
			if (ck_result_is_invalid(&res)) {
				/* The same Foo builds the same Deployment: refused again. */
				result = unfixable(c, foo, "DeploymentInvalid",
				                   refusal_message(&res), err);
				goto out;
			}
			ck_err_set(err, "update deployment %s/%s: %s", ns, dname, res.error);
			result = ck_result_is_conflict(&res) ? SYNC_REQUEUE : SYNC_ERROR;
			goto out;
		}
		wrote = true;
		if (res.obj != NULL) {
			ck_obj_unref(dep);
			dep = res.obj;
			res.obj = NULL;
		}
		ck_result_clear(&res);
	}

	int32_t avail = 0, dspec = 1;
	int64_t dgen_seen = 0;
	ck_deployment_status_available_replicas(dep, &avail);
	ck_deployment_spec_replicas(dep, &dspec);
	ck_deployment_status_observed_generation(dep, &dgen_seen);
	int64_t desired = has_want ? want : dspec;
	bool ready = avail >= desired && dgen_seen >= dep->generation;
	char msg[128];
	snprintf(msg, sizeof(msg), "%d/%lld replicas available", (int)avail, (long long)desired);
	foo_desired_status_t st = {avail, foo->generation, ready ? "True" : "False",
	                           ready ? "DeploymentAvailable" : "DeploymentProgressing", msg};
	result = update_status(c, foo, &st, &wrote, err);
	if (result != SYNC_OK)
		goto out;
	if (wrote && c->recorder)
		ck_record_event(c->recorder, foo, CK_RECORD_NORMAL, "Synced",
		                "Foo synced successfully");
out:
	ck_result_clear(&res);
	ck_patch_free(body);
	ck_obj_unref(dep);
	ck_obj_unref(foo);
	free(why);
	free(ns);
	free(name);
	return result;
}

int controller_sync(controller_t *c, const char *key, char **err)
{
	return do_sync(c, key, err) == SYNC_OK ? 0 : -1;
}

int controller_reconcile(void *ud, const char *key, char **err)
{
	switch (do_sync(ud, key, err)) {
	case SYNC_OK:
		return 0;
	case SYNC_REQUEUE:
		return CK_RECONCILE_RETRY;
	default:
		return -1;
	}
}

controller_t *controller_new(const controller_opts_t *o, char **err)
{
	controller_t *c = ck_xcalloc(1, sizeof(*c));
	c->client = o->client;
	c->recorder = o->recorder;
	c->clock = o->clock ? o->clock : ck_clk_real();
	c->field_manager = o->field_manager ? o->field_manager : "sample-controller";
	c->enqueue = o->enqueue;
	c->enqueue_ud = o->enqueue_ud;
	c->foos = ck_cache_factory_informer(o->factory, &foo_type);
	c->deployments = ck_cache_factory_informer(o->factory, &ck_type_deployment);
	if (c->foos == NULL || c->deployments == NULL) {
		ck_err_set(err, "cannot create informers");
		free(c);
		return NULL;
	}
	c->foo_lister = ck_cache_informer_lister(c->foos);
	c->dep_lister = ck_cache_informer_lister(c->deployments);

	ck_cache_handler_t fh = {.on_add = foo_on_add, .on_update = foo_on_update};
	ck_cache_handler_t dh = {
	    .on_add = dep_on_add, .on_update = dep_on_update, .on_delete = dep_on_delete};
	ck_cache_informer_add_handler(c->foos, &fh, c);
	ck_cache_informer_add_handler(c->deployments, &dh, c);
	return c;
}

void controller_free(controller_t *c)
{
	free(c);
}
