/*
 * fake: the in-memory API server (<ckube/fake.h>) through a real client and real
 * informers: every verb's semantics and its Status, watches, reactors, the env.
 */
#include "api/samplecontroller/v1alpha1/foo.h"

#include <ckube/config.h>
#include <ckube/fake.h>
#include <ckube/patch.h>
#include <ckube/record.h>

#include <check.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const cm_fields[] = {"data"};
static const ck_type_t cm_type = {"", "v1", "ConfigMap", "configmaps", true, cm_fields, 1, true};
static const char *const w_fields[] = {"spec", "status"};
static const ck_type_t widget_type = {"example.com", "v1",     "Widget", "widgets",
                                      true,          w_fields, 2,        false};

static ck_fake_t *fake;
static ck_fake_env_t *env;
static ck_client_t *cl;

static void setup_with(const ck_fake_opts_t *o)
{
	char *err = NULL;
	fake = ck_fake_new(o);
	env = ck_fake_env_new(fake, NULL, &err);
	ck_assert_msg(env != NULL, "%s", err ? err : "");
	cl = ck_fake_env_client(env);
}

static void setup(void)
{
	setup_with(NULL);
}

static void teardown(void)
{
	ck_fake_env_free(env);
	ck_fake_free(fake);
	env = NULL;
	fake = NULL;
}

/* The stored object's string at path, or NULL (a new string). */
static char *stored(const ck_type_t *t, const char *ns, const char *name, const char *const *path)
{
	ck_json_doc_t *d = ck_fake_get(fake, t, ns, name);
	const ck_json_t *v = ck_json_get(ck_json_root(d), path);
	char *s =
	    v ? (ck_json_type(v) == CK_JSON_STRING ? strdup(ck_json_str(v)) : ck_json_to_text(v))
	      : NULL;
	ck_json_doc_free(d);
	return s;
}

/* Stores json as ck_fake_add does; a refusal fails the test with its reason. */
static void add(const ck_type_t *t, const char *json)
{
	char *err = NULL;
	int rc = ck_fake_add(fake, t, json, &err);
	ck_assert_msg(rc == 0, "ck_fake_add: %s", err ? err : "(no reason)");
}

static void assert_status(const ck_result_t *r, int code, const char *reason, const char *msg)
{
	ck_assert_int_eq(r->http_code, code);
	ck_assert_str_eq(r->status.reason ? r->status.reason : "", reason);
	if (msg != NULL)
		ck_assert_msg(r->status.message && strstr(r->status.message, msg),
		              "message %s lacks %s",
		              r->status.message ? r->status.message : "(null)", msg);
}

/* ---------------------------------------------------------------- create/get */

START_TEST(test_create_get)
{
	ck_result_t r = {0};
	ck_fake_register(fake, &cm_type); /* its kind; the URL names only the resource */
	int rc = ck_client_create_sync(
	    cl, &cm_type, "ns",
	    "{\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"1\"}},\"data\":{\"k\":\"v\"},"
	    "\"extra\":{\"kept\":true}}",
	    NULL, &r);
	ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
	ck_assert_int_eq(r.http_code, 201);
	ck_assert_str_eq(r.obj->name, "a");
	ck_assert_str_eq(r.obj->ns, "ns");
	ck_assert_str_eq(r.obj->uid, "00000000-0000-4000-8000-000000000001");
	ck_assert_str_eq(r.obj->rv, "1");
	ck_assert_int_eq(r.obj->generation, 0); /* a ConfigMap has none, as on the server */
	ck_assert_str_ne(r.obj->creation_timestamp, "");
	ck_result_clear(&r);

	/* Every field is stored, not only what the type keeps. */
	char *kept = stored(&cm_type, "ns", "a", CK_PATH("extra", "kept"));
	ck_assert_str_eq(kept, "true");
	free(kept);
	char *kind = stored(&cm_type, "ns", "a", CK_PATH("kind"));
	ck_assert_str_eq(kind, "ConfigMap");
	free(kind);

	rc = ck_client_get_sync(cl, &cm_type, "ns", "a", &r);
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(r.obj->rv, "1");
	ck_result_clear(&r);

	rc = ck_client_get_sync(cl, &cm_type, "ns", "nope", &r);
	ck_assert_int_eq(rc, -1);
	assert_status(&r, 404, "NotFound", "configmaps \"nope\" not found");
	ck_assert_str_eq(r.status.details_name, "nope");
	ck_assert_str_eq(r.status.details_kind, "configmaps");
	ck_assert(ck_result_is_not_found(&r));
	ck_result_clear(&r);

	rc = ck_client_create_sync(cl, &cm_type, "ns", "{\"metadata\":{\"name\":\"a\"}}", NULL, &r);
	ck_assert_int_eq(rc, -1);
	assert_status(&r, 409, "AlreadyExists", "configmaps \"a\" already exists");
	ck_assert(ck_result_is_already_exists(&r));
	ck_result_clear(&r);

	rc = ck_client_create_sync(cl, &cm_type, "ns", "{\"metadata\":{}}", NULL, &r);
	ck_assert_int_eq(rc, -1);
	assert_status(&r, 422, "Invalid", "name or generateName is required");
	ck_assert_str_eq(r.status.causes, "FieldValueRequired");
	ck_result_clear(&r);

	rc = ck_client_create_sync(cl, &cm_type, "ns",
	                           "{\"metadata\":{\"name\":\"b\",\"namespace\":\"other\"}}", NULL,
	                           &r);
	ck_assert_int_eq(rc, -1);
	assert_status(&r, 400, "BadRequest", "does not match the namespace");
	ck_result_clear(&r);

	/* A group's resource is qualified in messages and details. */
	rc = ck_client_get_sync(cl, &widget_type, "ns", "w", &r);
	assert_status(&r, 404, "NotFound", "widgets.example.com \"w\" not found");
	ck_assert_str_eq(r.status.details_group, "example.com");
	ck_result_clear(&r);
}
END_TEST

START_TEST(test_generate_name_deterministic)
{
	char names[2][64];
	ck_clk_fake_t clk;
	ck_clk_fake_init(&clk, 0, (int64_t)1700000000 * (int64_t)CK_NS_PER_SEC);
	for (int run = 0; run < 2; run++) {
		ck_fake_t *f = ck_fake_new(&(ck_fake_opts_t){.seed = 7, .clock = &clk.base});
		char *err = NULL;
		ck_assert_int_eq(
		    ck_fake_add(f, &cm_type,
		                "{\"metadata\":{\"generateName\":\"x-\",\"namespace\":\"n\"}}",
		                &err),
		    0);
		ck_json_doc_t *d = NULL;
		/* The one object there: find it by listing through the env. */
		ck_fake_env_t *e = ck_fake_env_new(f, NULL, &err);
		ck_obj_t **items = NULL;
		size_t n = 0;
		ck_result_t r = {0};
		ck_assert_int_eq(ck_client_list_sync(ck_fake_env_client(e), &cm_type, "n", NULL,
		                                     &items, &n, NULL, &r),
		                 0);
		ck_assert_uint_eq(n, 1);
		ck_assert_int_eq(strncmp(items[0]->name, "x-", 2), 0);
		ck_assert_uint_eq(strlen(items[0]->name), 7);
		snprintf(names[run], sizeof(names[run]), "%s", items[0]->name);
		/* Timestamps from the injected clock. */
		ck_assert_str_eq(items[0]->creation_timestamp, "2023-11-14T22:13:20Z");
		ck_assert_str_eq(items[0]->uid, "00000000-0000-4000-8000-000000000001");
		ck_obj_unref(items[0]);
		free(items);
		ck_result_clear(&r);
		ck_json_doc_free(d);
		ck_fake_env_free(e);
		ck_fake_free(f);
	}
	ck_assert_str_eq(names[0], names[1]);
}
END_TEST

/* ---------------------------------------------------------------- update */

START_TEST(test_update_conflict_generation)
{
	add(&widget_type, "{\"metadata\":{\"name\":\"w\",\"namespace\":\"ns\"},"
	                  "\"spec\":{\"size\":1},\"status\":{\"ready\":false}}");
	ck_result_t r = {0};
	/* A stale resourceVersion: 409 Conflict, worded as the server. */
	int rc = ck_client_update_sync(
	    cl, &widget_type, "ns", "w",
	    "{\"metadata\":{\"name\":\"w\",\"resourceVersion\":\"999\"},\"spec\":{\"size\":2}}",
	    NULL, &r);
	ck_assert_int_eq(rc, -1);
	assert_status(
	    &r, 409, "Conflict",
	    "Operation cannot be fulfilled on widgets.example.com \"w\": the object has "
	    "been modified; please apply your changes to the latest version and try again");
	ck_assert(ck_result_is_conflict(&r));
	ck_result_clear(&r);

	ck_result_t g = {0};
	ck_assert_int_eq(ck_client_get_sync(cl, &widget_type, "ns", "w", &g), 0);
	ck_assert_int_eq(g.obj->generation, 1);
	ck_result_clear(&g);
	/* Spec change: generation 2; the main resource keeps the stored status. */
	rc = ck_client_update_sync(cl, &widget_type, "ns", "w",
	                           "{\"metadata\":{\"name\":\"w\",\"resourceVersion\":\"1\"},"
	                           "\"spec\":{\"size\":2},\"status\":{\"ready\":true}}",
	                           NULL, &r);
	ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
	ck_assert_int_eq(r.obj->generation, 2);
	ck_assert_str_eq(r.obj->rv, "2");
	ck_result_clear(&r);
	char *ready = stored(&widget_type, "ns", "w", CK_PATH("status", "ready"));
	ck_assert_str_eq(ready, "false");
	free(ready);

	/* Metadata only: no generation bump. */
	rc = ck_client_update_sync(cl, &widget_type, "ns", "w",
	                           "{\"metadata\":{\"name\":\"w\",\"labels\":{\"a\":\"b\"}},"
	                           "\"spec\":{\"size\":2}}",
	                           NULL, &r);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(r.obj->generation, 2);
	ck_assert_str_eq(r.obj->rv, "3");
	ck_result_clear(&r);

	/* The status subresource changes the status alone. */
	rc = ck_client_update_status_sync(cl, &widget_type, "ns", "w",
	                                  "{\"metadata\":{\"name\":\"w\"},\"spec\":{\"size\":9},"
	                                  "\"status\":{\"ready\":true}}",
	                                  NULL, &r);
	ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
	ck_assert_int_eq(r.obj->generation, 2);
	ck_result_clear(&r);
	ready = stored(&widget_type, "ns", "w", CK_PATH("status", "ready"));
	ck_assert_str_eq(ready, "true");
	free(ready);
	char *size = stored(&widget_type, "ns", "w", CK_PATH("spec", "size"));
	ck_assert_str_eq(size, "2");
	free(size);

	/* A no-op write: no new resourceVersion. */
	uint64_t before = ck_fake_resource_version(fake);
	rc = ck_client_update_status_sync(
	    cl, &widget_type, "ns", "w",
	    "{\"metadata\":{\"name\":\"w\"},\"status\":{\"ready\":true}}", NULL, &r);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(ck_fake_resource_version(fake), before);
	ck_result_clear(&r);

	/* Absent: 404 (no create on update); a ConfigMap has no /status. */
	rc = ck_client_update_sync(cl, &widget_type, "ns", "nope",
	                           "{\"metadata\":{\"name\":\"nope\"}}", NULL, &r);
	assert_status(&r, 404, "NotFound", "widgets.example.com \"nope\" not found");
	ck_result_clear(&r);
	add(&cm_type, "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\"}}");
	rc = ck_client_update_status_sync(cl, &cm_type, "ns", "c",
	                                  "{\"metadata\":{\"name\":\"c\"}}", NULL, &r);
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(r.http_code, 404);
	ck_result_clear(&r);
	/* Unless told it has one. */
	ck_fake_set_status_subresource(fake, &cm_type, true);
	rc = ck_client_update_status_sync(cl, &cm_type, "ns", "c",
	                                  "{\"metadata\":{\"name\":\"c\"}}", NULL, &r);
	ck_assert_int_eq(rc, 0);
	ck_result_clear(&r);
}
END_TEST

/* ---------------------------------------------------------------- patch, apply */

START_TEST(test_patch_merge_and_unmodelled)
{
	add(&widget_type, "{\"metadata\":{\"name\":\"w\",\"namespace\":\"ns\"},"
	                  "\"spec\":{\"a\":1,\"b\":2}}");
	ck_result_t r = {0};
	int rc = ck_client_patch_sync(cl, &widget_type, "ns", "w", CK_PATCH_MERGE,
	                              "{\"spec\":{\"b\":null,\"c\":3}}", NULL, &r);
	ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
	ck_assert_int_eq(r.obj->generation, 2);
	ck_result_clear(&r);
	char *spec = stored(&widget_type, "ns", "w", CK_PATH("spec"));
	ck_assert_str_eq(spec, "{\"a\":1,\"c\":3}");
	free(spec);

	/* A resourceVersion in a merge patch is a precondition. */
	rc = ck_client_patch_sync(cl, &widget_type, "ns", "w", CK_PATCH_MERGE,
	                          "{\"metadata\":{\"resourceVersion\":\"1\"},\"spec\":{\"a\":5}}",
	                          NULL, &r);
	assert_status(&r, 409, "Conflict", "the object has been modified");
	ck_result_clear(&r);

	/* Not modelled: an error that says so, never a silent success. */
	rc = ck_client_patch_sync(cl, &widget_type, "ns", "w", CK_PATCH_STRATEGIC,
	                          "{\"spec\":{\"l\":[1]}}", NULL, &r);
	ck_assert_int_eq(rc, -1);
	assert_status(&r, 415, "UnsupportedMediaType",
	              "strategic merge patch with lists or $ directives is not modelled by the "
	              "fake API server");
	ck_result_clear(&r);
	rc = ck_client_patch_sync(cl, &widget_type, "ns", "w", CK_PATCH_STRATEGIC,
	                          "{\"spec\":{\"$patch\":\"replace\"}}", NULL, &r);
	assert_status(&r, 415, "UnsupportedMediaType", "$ directives");
	ck_result_clear(&r);
	rc = ck_client_patch_sync(cl, &widget_type, "ns", "w", CK_PATCH_JSON,
	                          "[{\"op\":\"add\",\"path\":\"/spec/a\",\"value\":5}]", NULL, &r);
	assert_status(&r, 415, "UnsupportedMediaType", "JSON patch is not modelled");
	ck_result_clear(&r);
	rc = ck_client_patch_sync(cl, &widget_type, "ns", "w", CK_PATCH_MERGE, "{}",
	                          &(ck_write_opts_t){.dry_run = true}, &r);
	assert_status(&r, 400, "BadRequest", "dryRun is not modelled");
	ck_result_clear(&r);
	spec = stored(&widget_type, "ns", "w", CK_PATH("spec", "a"));
	ck_assert_str_eq(spec, "1");
	free(spec);
	/* Without lists or directives a strategic merge patch is a merge patch. */
	rc = ck_client_patch_sync(cl, &widget_type, "ns", "w", CK_PATCH_STRATEGIC,
	                          "{\"spec\":{\"a\":7,\"c\":null}}", NULL, &r);
	ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
	ck_result_clear(&r);
	spec = stored(&widget_type, "ns", "w", CK_PATH("spec"));
	ck_assert_str_eq(spec, "{\"a\":7}");
	free(spec);

	rc = ck_client_patch_sync(cl, &widget_type, "ns", "nope", CK_PATCH_MERGE, "{}", NULL, &r);
	assert_status(&r, 404, "NotFound", NULL);
	ck_result_clear(&r);
}
END_TEST

START_TEST(test_apply)
{
	static const ck_type_t dep = {"apps", "v1", "Deployment", "deployments", true,
	                              NULL,   0,    false};
	ck_result_t r = {0};
	ck_write_opts_t o = {.field_manager = "ctl", .force = true};
	const char *first =
	    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"d\","
	    "\"namespace\":\"ns\"},\"spec\":{\"replicas\":1,\"template\":{\"spec\":{\"containers\":"
	    "[{\"name\":\"app\",\"image\":\"a:1\",\"ports\":[{\"containerPort\":80}]}]}}}}";
	int rc = ck_client_patch_sync(cl, &dep, "ns", "d", CK_PATCH_APPLY, first, &o, &r);
	ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
	ck_assert_int_eq(r.http_code, 201);
	ck_result_clear(&r);

	/* Someone adds a sidecar and an env; the controller re-applies its own fields. */
	char *err = NULL;
	ck_assert_int_eq(
	    ck_fake_put(
	        fake, &dep,
	        "{\"metadata\":{\"name\":\"d\",\"namespace\":\"ns\"},\"spec\":{\"replicas\":1,"
	        "\"template\":{\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"a:1\","
	        "\"env\":[{\"name\":\"E\",\"value\":\"1\"}],\"ports\":[{\"containerPort\":80}]},"
	        "{\"name\":\"side\",\"image\":\"s:1\"}]}}}}",
	        &err),
	    0);
	const char *second =
	    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"d\","
	    "\"namespace\":\"ns\"},\"spec\":{\"replicas\":3,\"template\":{\"spec\":{\"containers\":"
	    "[{\"name\":\"app\",\"image\":\"a:2\",\"ports\":[{\"containerPort\":80,"
	    "\"protocol\":\"TCP\",\"name\":\"http\"}]}]}}}}";
	rc = ck_client_patch_sync(cl, &dep, "ns", "d", CK_PATCH_APPLY, second, &o, &r);
	ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
	ck_result_clear(&r);
	char *containers =
	    stored(&dep, "ns", "d", CK_PATH("spec", "template", "spec", "containers"));
	ck_assert_str_eq(containers,
	                 "[{\"name\":\"app\",\"image\":\"a:2\",\"env\":[{\"name\":\"E\",\"value\":"
	                 "\"1\"}],\"ports\":[{\"containerPort\":80,\"protocol\":\"TCP\",\"name\":"
	                 "\"http\"}]},{\"name\":\"side\",\"image\":\"s:1\"}]");
	free(containers);
	char *replicas = stored(&dep, "ns", "d", CK_PATH("spec", "replicas"));
	ck_assert_str_eq(replicas, "3");
	free(replicas);

	rc = ck_client_patch_sync(cl, &dep, "ns", "d", CK_PATCH_APPLY, second, NULL, &r);
	assert_status(&r, 422, "Invalid",
	              "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value");
	ck_result_clear(&r);
	rc = ck_client_patch_sync(cl, &dep, "ns", "d", CK_PATCH_APPLY, "spec:\n  replicas: 2\n", &o,
	                          &r);
	assert_status(&r, 415, "UnsupportedMediaType", "YAML is not read");
	ck_result_clear(&r);
}
END_TEST

/* ---------------------------------------------------------------- delete */

START_TEST(test_delete_finalizers)
{
	add(&widget_type, "{\"metadata\":{\"name\":\"w\",\"namespace\":\"ns\","
	                  "\"finalizers\":[\"example.com/cleanup\"]},\"spec\":{}}");
	ck_result_t r = {0};
	int rc = ck_client_delete_sync(cl, &widget_type, "ns", "w", NULL, &r);
	ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
	ck_result_clear(&r);
	/* Still there, being deleted. */
	char *ts = stored(&widget_type, "ns", "w", CK_PATH("metadata", "deletionTimestamp"));
	ck_assert_ptr_nonnull(ts);
	free(ts);
	char *grace =
	    stored(&widget_type, "ns", "w", CK_PATH("metadata", "deletionGracePeriodSeconds"));
	ck_assert_str_eq(grace, "0");
	free(grace);
	rc = ck_client_get_sync(cl, &widget_type, "ns", "w", &r);
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_nonnull(r.obj->deletion_timestamp);
	ck_result_clear(&r);

	/* No finalizer may be added while it is being deleted: the server's 422. */
	rc = ck_client_patch_sync(cl, &widget_type, "ns", "w", CK_PATCH_MERGE,
	                          "{\"metadata\":{\"finalizers\":[\"example.com/cleanup\","
	                          "\"z/late\",\"a/late\",\"z/late\"]}}",
	                          NULL, &r);
	assert_status(&r, 422, "Invalid",
	              "Widget.example.com \"w\" is invalid: metadata.finalizers: Forbidden: no "
	              "new finalizers can be added if the object is being deleted, found new "
	              "finalizers []string{\"a/late\", \"z/late\"}");
	ck_result_clear(&r);

	/* The controller removes its finalizer: the object goes. */
	rc = ck_client_patch_sync(cl, &widget_type, "ns", "w", CK_PATCH_MERGE,
	                          "{\"metadata\":{\"finalizers\":null}}", NULL, &r);
	ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
	ck_result_clear(&r);
	ck_assert_ptr_null(ck_fake_get(fake, &widget_type, "ns", "w"));
	ck_assert_uint_eq(ck_fake_len(fake, &widget_type, NULL), 0);

	rc = ck_client_delete_sync(cl, &widget_type, "ns", "w", NULL, &r);
	assert_status(&r, 404, "NotFound", NULL);
	ck_result_clear(&r);
}
END_TEST

START_TEST(test_delete_preconditions)
{
	add(&cm_type, "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\"}}");
	ck_result_t r = {0};
	int rc = ck_client_delete_sync(
	    cl, &cm_type, "ns", "c",
	    &(ck_delete_opts_t){.precondition_uid = "other", .grace_period_seconds = -1}, &r);
	ck_assert_int_eq(rc, -1);
	assert_status(
	    &r, 409, "Conflict",
	    "Operation cannot be fulfilled on ConfigMap \"c\": the UID in the precondition "
	    "(other) does not match the UID in record");
	ck_assert_str_eq(r.status.details_kind, "ConfigMap");
	ck_result_clear(&r);
	rc = ck_client_delete_sync(
	    cl, &cm_type, "ns", "c",
	    &(ck_delete_opts_t){.precondition_rv = "7", .grace_period_seconds = -1}, &r);
	assert_status(&r, 409, "Conflict",
	              "the ResourceVersion in the precondition (7) does not match");
	ck_result_clear(&r);
	rc = ck_client_delete_sync(
	    cl, &cm_type, "ns", "c",
	    &(ck_delete_opts_t){.precondition_rv = "1", .grace_period_seconds = -1}, &r);
	ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
	ck_result_clear(&r);
	ck_assert_uint_eq(ck_fake_len(fake, &cm_type, "ns"), 0);
}
END_TEST

static void setup_gc(void)
{
	setup_with(&(ck_fake_opts_t){.gc = true});
}

START_TEST(test_owner_gc)
{
	add(&widget_type, "{\"metadata\":{\"name\":\"w\",\"namespace\":\"ns\"}}");
	ck_json_doc_t *d = ck_fake_get(fake, &widget_type, "ns", "w");
	const char *uid = ck_json_str(ck_json_get(ck_json_root(d), CK_PATH("metadata", "uid")));
	char *dep = ck_xasprintf(
	    "{\"metadata\":{\"name\":\"owned\",\"namespace\":\"ns\",\"ownerReferences\":"
	    "[{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"name\":\"w\","
	    "\"uid\":\"%s\",\"controller\":true}]}}",
	    uid);
	ck_json_doc_free(d);
	add(&cm_type, dep);
	free(dep);
	add(&cm_type, "{\"metadata\":{\"name\":\"free\",\"namespace\":\"ns\"}}");
	ck_result_t r = {0};
	/* Foreground is refused (not modelled); Orphan keeps the dependents. */
	ck_assert_int_eq(
	    ck_client_delete_sync(
	        cl, &widget_type, "ns", "w",
	        &(ck_delete_opts_t){.propagation_policy = "Foreground", .grace_period_seconds = -1},
	        &r),
	    -1);
	assert_status(&r, 400, "BadRequest", "propagationPolicy Foreground is not modelled");
	ck_result_clear(&r);
	add(&widget_type, "{\"metadata\":{\"name\":\"w2\",\"namespace\":\"ns\"}}");
	d = ck_fake_get(fake, &widget_type, "ns", "w2");
	uid = ck_json_str(ck_json_get(ck_json_root(d), CK_PATH("metadata", "uid")));
	dep = ck_xasprintf(
	    "{\"metadata\":{\"name\":\"orphan\",\"namespace\":\"ns\",\"ownerReferences\":"
	    "[{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"name\":\"w2\","
	    "\"uid\":\"%s\"}]}}",
	    uid);
	ck_json_doc_free(d);
	add(&cm_type, dep);
	free(dep);
	ck_assert_int_eq(ck_client_delete_sync(cl, &widget_type, "ns", "w2",
	                                       &(ck_delete_opts_t){.propagation_policy = "Orphan",
	                                                           .grace_period_seconds = -1},
	                                       &r),
	                 0);
	ck_result_clear(&r);
	d = ck_fake_get(fake, &cm_type, "ns", "orphan");
	ck_assert_ptr_nonnull(d);
	ck_json_doc_free(d);

	ck_assert_int_eq(ck_client_delete_sync(cl, &widget_type, "ns", "w", NULL, &r), 0);
	ck_result_clear(&r);
	ck_assert_ptr_null(ck_fake_get(fake, &cm_type, "ns", "owned"));
	d = ck_fake_get(fake, &cm_type, "ns", "free");
	ck_assert_ptr_nonnull(d);
	ck_json_doc_free(d);
}
END_TEST

/* ---------------------------------------------------------------- list */

START_TEST(test_list_selectors_pages)
{
	const char *objs[] = {
	    "{\"metadata\":{\"name\":\"a\",\"namespace\":\"n1\",\"labels\":{\"app\":\"x\",\"tier\":"
	    "\"web\"}}}",
	    "{\"metadata\":{\"name\":\"b\",\"namespace\":\"n1\",\"labels\":{\"app\":\"y\"}}}",
	    "{\"metadata\":{\"name\":\"c\",\"namespace\":\"n2\",\"labels\":{\"app\":\"x\"}}}",
	    "{\"metadata\":{\"name\":\"d\",\"namespace\":\"n2\"}}",
	};
	for (size_t i = 0; i < 4; i++)
		add(&cm_type, objs[i]);
	struct {
		const char *ns, *label, *field;
		const char *want;
	} cases[] = {
	    {NULL, NULL, NULL, "a b c d"},
	    {"n1", NULL, NULL, "a b"},
	    {NULL, "app=x", NULL, "a c"},
	    {NULL, "app==x", NULL, "a c"},
	    {NULL, "app!=x", NULL, "b d"},
	    {NULL, "app in (x,y)", NULL, "a b c"},
	    {NULL, "app notin (x)", NULL, "b d"},
	    {NULL, "tier", NULL, "a"},
	    {NULL, "!app", NULL, "d"},
	    {NULL, NULL, "metadata.name=c", "c"},
	    {NULL, NULL, "metadata.namespace!=n1", "c d"},
	    {NULL, "app=x", "metadata.namespace==n2", "c"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_obj_t **items = NULL;
		size_t n = 0;
		char *rv = NULL;
		ck_result_t r = {0};
		ck_list_opts_t o = {.label_selector = cases[i].label,
		                    .field_selector = cases[i].field};
		int rc = ck_client_list_sync(cl, &cm_type, cases[i].ns, &o, &items, &n, &rv, &r);
		ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
		char got[64] = "";
		for (size_t j = 0; j < n; j++) {
			strcat(got, j ? " " : "");
			strcat(got, items[j]->name);
			ck_obj_unref(items[j]);
		}
		ck_assert_msg(strcmp(got, cases[i].want) == 0, "case %zu: got \"%s\" want \"%s\"",
		              i, got, cases[i].want);
		ck_assert_str_eq(rv, "4");
		free(items);
		free(rv);
		ck_result_clear(&r);
	}
	/* Pages: limit 1 takes four requests, the same objects. */
	ck_fake_clear_actions(fake);
	ck_obj_t **items = NULL;
	size_t n = 0;
	ck_result_t r = {0};
	ck_assert_int_eq(ck_client_list_sync(cl, &cm_type, NULL, &(ck_list_opts_t){.limit = 1},
	                                     &items, &n, NULL, &r),
	                 0);
	ck_assert_uint_eq(n, 4);
	for (size_t j = 0; j < n; j++)
		ck_obj_unref(items[j]);
	free(items);
	ck_result_clear(&r);
	ck_assert_uint_eq(ck_fake_count(fake, "list", "configmaps"), 4);

	ck_assert_int_eq(ck_client_list_sync(cl, &cm_type, NULL,
	                                     &(ck_list_opts_t){.field_selector = "spec.x=1"},
	                                     &items, &n, NULL, &r),
	                 -1);
	assert_status(&r, 400, "BadRequest", "field label not supported: spec.x");
	ck_result_clear(&r);
}
END_TEST

/* ---------------------------------------------------------------- watch */

typedef struct events {
	char log[4096];
} events_t;

static void on_event(void *ud, ck_watch_type_t type, ck_obj_t *obj, const ck_status_t *status)
{
	events_t *e = ud;
	char line[256];
	if (type == CK_WATCH_ERROR)
		snprintf(line, sizeof(line), "ERROR %d %s;", status->code,
		         status->reason ? status->reason : "");
	else if (type == CK_WATCH_BOOKMARK)
		snprintf(line, sizeof(line), "BOOKMARK %s%s;", obj->rv,
		         ck_obj_annotation(obj, "k8s.io/initial-events-end") ? " end" : "");
	else
		snprintf(line, sizeof(line), "%s %s %s;", ck_watch_type_name(type), obj->name,
		         obj->rv);
	strncat(e->log, line, sizeof(e->log) - strlen(e->log) - 1);
	ck_obj_unref(obj);
}

/* A watch of configmaps in ns with o, for as long as its timeoutSeconds. */
static int watch(const ck_list_opts_t *o, events_t *e, ck_result_t *r)
{
	char *q = ck_list_opts_query(o, true);
	ck_req_spec_t spec = {.method = "GET",
	                      .type = &cm_type,
	                      .ns = "ns",
	                      .query = q,
	                      .decode = CK_DEC_WATCH,
	                      .is_watch = true};
	static const ck_dec_cb_t cb = {.on_event = on_event};
	int rc = ck_client_do_sync_stream(cl, &spec, &cb, e, r);
	free(q);
	return rc;
}

START_TEST(test_watch_from_rv_and_bookmarks)
{
	char *err = NULL;
	add(&cm_type,
	    "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"labels\":{\"l\":\"1\"}}}");
	ck_assert_msg(
	    ck_fake_put(fake, &cm_type,
	                "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\"},\"data\":{}}",
	                &err) == 0,
	    "%s", err);
	ck_assert_int_eq(ck_fake_delete(fake, &cm_type, "ns", "a", &err), 0);
	add(&cm_type, "{\"metadata\":{\"name\":\"b\",\"namespace\":\"other\"}}");
	events_t e = {0};
	ck_result_t r = {0};
	/* From 0: an ADDED per object of ns now (none: a went, b is other's). */
	int rc = watch(&(ck_list_opts_t){.resource_version = "0", .timeout_seconds = 1}, &e, &r);
	ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
	ck_assert_str_eq(e.log, "");
	ck_result_clear(&r);

	memset(&e, 0, sizeof(e));
	rc = watch(&(ck_list_opts_t){.resource_version = "0",
	                             .timeout_seconds = 1,
	                             .allow_watch_bookmarks = true},
	           &e, &r);
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(e.log, "BOOKMARK 4;");
	ck_result_clear(&r);

	memset(&e, 0, sizeof(e));
	rc = watch(&(ck_list_opts_t){.resource_version = "0",
	                             .timeout_seconds = 1,
	                             .label_selector = "l=1"},
	           &e, &r);
	ck_assert_str_eq(e.log, "");
	ck_result_clear(&r);

	/* From resourceVersion 1: every change after it, in order. */
	memset(&e, 0, sizeof(e));
	rc = watch(&(ck_list_opts_t){.resource_version = "1", .timeout_seconds = 1}, &e, &r);
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(e.log, "MODIFIED a 2;DELETED a 3;");
	ck_result_clear(&r);
	/* A selecting watch: the label's removal is a DELETED; the real delete, of an
	 * object it no longer selects, is not sent. */
	memset(&e, 0, sizeof(e));
	rc = watch(&(ck_list_opts_t){.resource_version = "1",
	                             .timeout_seconds = 1,
	                             .label_selector = "l=1"},
	           &e, &r);
	ck_assert_str_eq(e.log, "DELETED a 2;");
	ck_result_clear(&r);
	memset(&e, 0, sizeof(e));
	rc = watch(&(ck_list_opts_t){.resource_version = "0",
	                             .timeout_seconds = 1,
	                             .send_initial_events = true,
	                             .resource_version_match = "NotOlderThan",
	                             .allow_watch_bookmarks = true},
	           &e, &r);
	ck_assert_str_eq(e.log, "BOOKMARK 4 end;BOOKMARK 4;");
	ck_result_clear(&r);
}
END_TEST

/* The watch's view of a deletion held by a finalizer. */
START_TEST(test_finalizer_events)
{
	add(&cm_type, "{\"metadata\":{\"name\":\"f\",\"namespace\":\"ns\","
	              "\"finalizers\":[\"x/y\"]}}");
	ck_result_t r = {0};
	ck_assert_int_eq(ck_client_delete_sync(cl, &cm_type, "ns", "f", NULL, &r), 0);
	ck_result_clear(&r);
	/* Deleting again changes nothing. */
	ck_assert_int_eq(ck_client_delete_sync(cl, &cm_type, "ns", "f", NULL, &r), 0);
	ck_result_clear(&r);
	ck_assert_uint_eq(ck_fake_resource_version(fake), 2);
	ck_assert_int_eq(ck_client_patch_sync(cl, &cm_type, "ns", "f", CK_PATCH_MERGE,
	                                      "{\"metadata\":{\"finalizers\":[]}}", NULL, &r),
	                 0);
	ck_result_clear(&r);
	events_t e = {0};
	ck_assert_int_eq(
	    watch(&(ck_list_opts_t){.resource_version = "1", .timeout_seconds = 1}, &e, &r), 0);
	ck_result_clear(&r);
	ck_assert_str_eq(e.log, "MODIFIED f 2;DELETED f 3;");
}
END_TEST

static void setup_short_history(void)
{
	setup_with(&(ck_fake_opts_t){.history = 2});
}

START_TEST(test_watch_too_old)
{
	for (int i = 0; i < 4; i++) {
		char body[128];
		snprintf(body, sizeof(body),
		         "{\"metadata\":{\"name\":\"c%d\",\"namespace\":\"ns\"}}", i);
		add(&cm_type, body);
	}
	events_t e = {0};
	ck_result_t r = {0};
	int rc = watch(&(ck_list_opts_t){.resource_version = "1", .timeout_seconds = 5}, &e, &r);
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(e.log, "ERROR 410 Expired;");
	ck_result_clear(&r);
	memset(&e, 0, sizeof(e));
	rc = watch(&(ck_list_opts_t){.resource_version = "2", .timeout_seconds = 1}, &e, &r);
	ck_assert_str_eq(e.log, "ADDED c2 3;ADDED c3 4;");
	ck_result_clear(&r);
}
END_TEST

/* ---------------------------------------------------------------- informers */

typedef struct counts {
	int adds, updates, deletes;
} counts_t;

static void h_add(void *ud, ck_obj_t *obj, bool initial)
{
	((counts_t *)ud)->adds++;
}
static void h_update(void *ud, ck_obj_t *o, ck_obj_t *n)
{
	((counts_t *)ud)->updates++;
}
static void h_delete(void *ud, const char *key, ck_obj_t *obj, bool unknown)
{
	((counts_t *)ud)->deletes++;
}

typedef struct add_handler {
	ck_cache_informer_t *inf;
	counts_t *c;
} add_handler_t;

static void add_handler_on_loop(void *ud)
{
	add_handler_t *a = ud;
	static const ck_cache_handler_t h = {h_add, h_update, h_delete};
	ck_cache_informer_add_handler(a->inf, &h, a->c);
}

static void read_counts(void *ud)
{
	counts_t *pair = ud; /* [0] live, [1] copy, read on the loop thread */
	pair[1] = pair[0];
}

START_TEST(test_informer_fed_by_fake)
{
	char *err = NULL;
	add(&cm_type, "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\"}}");
	ck_cache_informer_t *inf = ck_fake_env_informer(env, &cm_type, &err);
	ck_assert_msg(inf != NULL, "%s", err ? err : "");
	counts_t c[2] = {{0}};
	add_handler_t ah = {inf, &c[0]};
	ck_fake_env_run(env, add_handler_on_loop, &ah);
	ck_assert_msg(ck_fake_env_start(env, 5000, &err) == 0, "%s", err);
	ck_obj_t *o = ck_cache_lister_get(ck_cache_informer_lister(inf), "ns", "a");
	ck_assert_ptr_nonnull(o);
	ck_obj_unref(o);

	/* Changes from the test's thread and through the client. */
	add(&cm_type, "{\"metadata\":{\"name\":\"b\",\"namespace\":\"ns\"}}");
	ck_result_t r = {0};
	ck_assert_int_eq(ck_client_patch_sync(cl, &cm_type, "ns", "a", CK_PATCH_MERGE,
	                                      "{\"data\":{\"k\":\"v\"}}", NULL, &r),
	                 0);
	ck_result_clear(&r);
	ck_assert_int_eq(ck_fake_delete(fake, &cm_type, "ns", "b", &err), 0);
	ck_assert_msg(ck_fake_env_settle(env, 5000, &err) == 0, "%s", err);
	ck_fake_env_run(env, read_counts, c);
	ck_assert_int_eq(c[1].adds, 2);
	ck_assert_int_eq(c[1].updates, 1);
	ck_assert_int_eq(c[1].deletes, 1);
	o = ck_cache_lister_get(ck_cache_informer_lister(inf), "ns", "a");
	ck_assert_str_eq(o->rv, "3");
	ck_obj_unref(o);
	ck_assert_ptr_null(ck_cache_lister_get(ck_cache_informer_lister(inf), "ns", "b"));
	/* The reflector's streaming list (sendInitialEvents) was served: no list. */
	ck_assert_uint_eq(ck_fake_count(fake, "list", "configmaps"), 0);
	ck_assert_uint_ge(ck_fake_count(fake, "watch", "configmaps"), 1);
}
END_TEST

/* The reflector's other path: a paged list, then a watch from its resourceVersion. */
typedef struct listing {
	ck_fake_env_t *env;
	ck_cache_informer_t *inf;
} listing_t;

static void listing_new(void *ud)
{
	listing_t *l = ud;
	ck_cache_informer_opts_t o = {.streaming_list = CK_CACHE_STREAMING_OFF, .page_size = 1};
	l->inf = ck_cache_informer_new(
	    ck_fake_env_loop(l->env), &cm_type,
	    ck_cache_lw_kube_new(ck_fake_env_client(l->env), &cm_type, NULL), &o);
	ck_cache_informer_start(l->inf, NULL);
}

static void listing_free(void *ud)
{
	listing_t *l = ud;
	ck_cache_informer_free(l->inf);
}

START_TEST(test_informer_list_then_watch)
{
	for (int i = 0; i < 3; i++) {
		char body[128];
		snprintf(body, sizeof(body),
		         "{\"metadata\":{\"name\":\"c%d\",\"namespace\":\"ns\"}}", i);
		add(&cm_type, body);
	}
	listing_t l = {.env = env};
	ck_fake_env_run(env, listing_new, &l);
	char *reason = NULL;
	ck_assert_msg(ck_cache_informer_wait_synced(l.inf, 5000, &reason) == 0, "%s", reason);
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(l.inf)), 3);
	ck_assert_uint_ge(ck_fake_count(fake, "list", "configmaps"), 1);
	add(&cm_type, "{\"metadata\":{\"name\":\"d\",\"namespace\":\"ns\"}}");
	ck_obj_t *o = NULL;
	for (int i = 0; i < 5000 && o == NULL; i++) {
		o = ck_cache_lister_get(ck_cache_informer_lister(l.inf), "ns", "d");
		if (o == NULL)
			nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	ck_assert_ptr_nonnull(o);
	ck_assert_str_eq(o->rv, "4");
	ck_obj_unref(o);
	ck_assert_uint_ge(ck_fake_count(fake, "watch", "configmaps"), 1);
	ck_fake_env_run(env, listing_free, &l);
}
END_TEST

/* A generated kind (ckube-gen's Foo): its descriptor and accessors on the fake. */
START_TEST(test_generated_kind)
{
	ck_result_t r = {0};
	int rc = ck_client_create_sync(
	    cl, &foo_type, "ns",
	    "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\",\"metadata\":"
	    "{\"name\":\"f\"},\"spec\":{\"deploymentName\":\"d\",\"replicas\":2},"
	    "\"status\":{\"availableReplicas\":9}}",
	    NULL, &r);
	ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
	int64_t n = -1;
	ck_assert(foo_spec_replicas(r.obj, &n));
	ck_assert_int_eq(n, 2);
	/* A create drops the status where a subresource owns it, as a CRD with one does. */
	ck_assert(!foo_status_available_replicas(r.obj, &n));
	ck_result_clear(&r);
	rc = ck_client_update_status_sync(cl, &foo_type, "ns", "f",
	                                  "{\"metadata\":{\"name\":\"f\"},\"status\":"
	                                  "{\"availableReplicas\":2,\"observedGeneration\":1}}",
	                                  NULL, &r);
	ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
	ck_assert(foo_status_available_replicas(r.obj, &n));
	ck_assert_int_eq(n, 2);
	ck_assert_str_eq(foo_spec_deployment_name(r.obj), "d");
	ck_result_clear(&r);
}
END_TEST

/* A watch cancelled from inside its own event callback, while the fake writes
 * its lines: no later callback, nothing used after it is freed. */
typedef struct cancel_watch {
	ck_req_t *req;
	int events, done;
} cancel_watch_t;

static void cw_event(void *ud, ck_watch_type_t type, ck_obj_t *obj, const ck_status_t *st)
{
	cancel_watch_t *cw = ud;
	cw->events++;
	ck_obj_unref(obj);
	ck_req_cancel(cw->req);
}

static void cw_done(void *ud, ck_result_t *res)
{
	((cancel_watch_t *)ud)->done++;
}

static void cw_start(void *ud)
{
	static const ck_dec_cb_t cb = {.on_event = cw_event};
	cancel_watch_t *cw = ud;
	cw->req = ck_client_watch(cl, &cm_type, "ns", &(ck_list_opts_t){.resource_version = "0"},
	                          &cb, cw_done, cw, NULL);
}

static void cw_read(void *ud)
{
	cancel_watch_t *cw = ud;
	cw[1] = cw[0];
}

START_TEST(test_cancel_inside_callback)
{
	for (int i = 0; i < 3; i++) {
		char body[128];
		snprintf(body, sizeof(body),
		         "{\"metadata\":{\"name\":\"c%d\",\"namespace\":\"ns\"}}", i);
		add(&cm_type, body);
	}
	cancel_watch_t cw[2] = {{0}};
	ck_fake_env_run(env, cw_start, &cw[0]);
	ck_assert_ptr_nonnull(cw[0].req);
	/* Three lines are owed; the first callback cancels. Changes after it go nowhere. */
	for (int i = 0; i < 50; i++) {
		ck_fake_env_run(env, cw_read, cw);
		if (cw[1].events > 0)
			break;
		nanosleep(&(struct timespec){0, 2000000}, NULL);
	}
	add(&cm_type, "{\"metadata\":{\"name\":\"d\",\"namespace\":\"ns\"}}");
	nanosleep(&(struct timespec){0, 20000000}, NULL);
	ck_fake_env_run(env, cw_read, cw);
	ck_assert_int_eq(cw[1].events, 1);
	ck_assert_int_eq(cw[1].done, 0);
}
END_TEST

/* The event recorder on the fake: a create, then its strategic merge patch of the
 * count (no lists: modelled). Discovery of events.k8s.io is a 404 on the fake, so
 * AUTO writes core/v1 Events. */
START_TEST(test_recorder_on_fake)
{
	char *err = NULL;
	add(&cm_type, "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\"}}");
	ck_result_t r = {0};
	ck_assert_int_eq(ck_client_get_sync(cl, &cm_type, "ns", "a", &r), 0);
	ck_record_t *rec = ck_record_new(cl, &(ck_record_opts_t){.component = "test"}, &err);
	ck_assert_msg(rec != NULL, "%s", err);
	ck_record_event(rec, r.obj, CK_RECORD_NORMAL, "Synced", "synced %s", "a");
	ck_assert_int_eq(ck_record_flush(rec, 5000), 0);
	ck_record_event(rec, r.obj, CK_RECORD_NORMAL, "Synced", "synced %s", "a");
	ck_assert_int_eq(ck_record_flush(rec, 5000), 0);
	ck_record_free(rec);
	ck_result_clear(&r);
	static const ck_type_t ev = {"", "v1", "Event", "events", true, NULL, 0, false};
	ck_assert_uint_eq(ck_fake_len(fake, &ev, "ns"), 1);
	ck_assert_uint_eq(ck_fake_count(fake, "create", "events"), 1);
	ck_assert_uint_eq(ck_fake_count(fake, "patch", "events"), 1);
}
END_TEST

/* The env's recorder: one per env, and settling waits for its events, even slow
 * ones (300 ms of latency on their create). */
static void slow_events(void *ud, const ck_fake_action_t *act, ck_fake_answer_t *out)
{
	out->delay_ms = 300;
}

START_TEST(test_env_recorder)
{
	char *err = NULL;
	add(&cm_type, "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\"}}");
	ck_result_t r = {0};
	ck_assert_int_eq(ck_client_get_sync(cl, &cm_type, "ns", "a", &r), 0);
	ck_record_t *rec = ck_fake_env_recorder(env, &err);
	ck_assert_msg(rec != NULL, "%s", err);
	ck_assert_ptr_eq(ck_fake_env_recorder(env, &err), rec);
	ck_fake_prepend_reactor(fake, "create", "events", slow_events, NULL);
	ck_record_event(rec, r.obj, CK_RECORD_WARNING, "Failed", "failed %s", "a");
	ck_assert_msg(ck_fake_env_settle(env, 5000, &err) == 0, "%s", err);
	static const ck_type_t ev = {"", "v1", "Event", "events", true, NULL, 0, false};
	ck_assert_uint_eq(ck_fake_len(fake, &ev, "ns"), 1);
	ck_result_clear(&r);
}
END_TEST

/* ---------------------------------------------------------------- reactors */

static void fail_once(void *ud, const ck_fake_action_t *act, ck_fake_answer_t *out)
{
	int *n = ud;
	if ((*n)++ > 0)
		return;
	out->code = 500;
	out->reason = "InternalError";
	out->message = "injected";
	out->retry_after = 1;
}

static void fail_no_retry_after(void *ud, const ck_fake_action_t *act, ck_fake_answer_t *out)
{
	fail_once(ud, act, out);
	out->retry_after = 0;
}

START_TEST(test_reactor_500_retry)
{
	add(&cm_type, "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\"}}");
	int n = 0;
	ck_fake_prepend_reactor(fake, "get", "configmaps", fail_once, &n);
	ck_result_t r = {0};
	int rc = ck_client_get_sync(cl, &cm_type, "ns", "a", &r);
	ck_assert_msg(rc == 0, "%s", r.error ? r.error : "");
	ck_result_clear(&r);
	ck_assert_int_eq(n, 2);
	ck_assert_uint_eq(ck_fake_count(fake, "get", "configmaps"), 2);
	ck_assert_uint_eq(ck_fake_count(fake, "*", NULL), 2);
	char *log = ck_fake_actions(fake);
	ck_assert_str_eq(log, "get configmaps ns/a\nget configmaps ns/a\n");
	free(log);

	/* Without Retry-After the client does not retry: the 500 comes back. */
	n = 0;
	ck_fake_clear_reactors(fake);
	ck_fake_clear_actions(fake);
	ck_fake_prepend_reactor(fake, "*", "*", fail_no_retry_after, &n);
	rc = ck_client_get_sync(cl, &cm_type, "ns", "a", &r);
	ck_assert_int_eq(rc, -1);
	assert_status(&r, 500, "InternalError", "injected");
	ck_result_clear(&r);
	ck_assert_uint_eq(ck_fake_count(fake, "get", "configmaps"), 1);
}
END_TEST

static void slow(void *ud, const ck_fake_action_t *act, ck_fake_answer_t *out)
{
	out->delay_ms = 300;
}

static void deny_status(void *ud, const ck_fake_action_t *act, ck_fake_answer_t *out)
{
	out->code = 403;
	out->reason = "Forbidden";
	out->message = "no";
}

static int64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

START_TEST(test_reactor_latency_and_subresource)
{
	add(&widget_type, "{\"metadata\":{\"name\":\"w\",\"namespace\":\"ns\"}}");
	ck_fake_prepend_reactor(fake, "get", NULL, slow, NULL);
	ck_result_t r = {0};
	int64_t t0 = ms_now();
	ck_assert_int_eq(ck_client_get_sync(cl, &widget_type, "ns", "w", &r), 0);
	ck_assert_int_ge(ms_now() - t0, 290);
	ck_result_clear(&r);
	/* Past the request's deadline: the client's timeout, not a hang. */
	ck_req_spec_t spec = {.method = "GET",
	                      .type = &widget_type,
	                      .ns = "ns",
	                      .name = "w",
	                      .decode = CK_DEC_OBJECT,
	                      .timeout_ms = 100};
	ck_assert_int_eq(ck_client_do_sync(cl, &spec, &r), -1);
	ck_assert(ck_result_is_timeout(&r));
	ck_result_clear(&r);

	/* A reactor on the status subresource alone. */
	ck_fake_prepend_reactor(fake, "update", "widgets/status", deny_status, NULL);
	ck_assert_int_eq(ck_client_update_sync(cl, &widget_type, "ns", "w",
	                                       "{\"metadata\":{\"name\":\"w\"},\"spec\":{\"x\":1}}",
	                                       NULL, &r),
	                 0);
	ck_result_clear(&r);
	ck_assert_int_eq(ck_client_update_status_sync(cl, &widget_type, "ns", "w",
	                                              "{\"metadata\":{\"name\":\"w\"}}", NULL, &r),
	                 -1);
	assert_status(&r, 403, "Forbidden", "no");
	ck_result_clear(&r);
	ck_assert_uint_eq(ck_fake_count(fake, "update", "widgets"), 2);
	ck_assert_uint_eq(ck_fake_count(fake, "update", "widgets/status"), 1);
}
END_TEST

/* ---------------------------------------------------------------- the hook itself */

/* A transport of the test's own, for the two endings the fake never sends: a
 * connection reset (mode 0: the first attempt, then a complete answer) and a body
 * before any status (mode 1). */
typedef struct {
	ev_timer t; /* first: the callback casts back */
	ck_transport_attempt_t *a;
	int starts, mode;
	ck_client_t *c;
	char *err;
} hook_tp_t;

static void hook_answer(struct ev_loop *loop, ev_timer *w, int revents)
{
	hook_tp_t *h = (hook_tp_t *)w;
	ck_transport_attempt_t *a = h->a;
	if (h->mode == 1) {
		ck_assert_int_eq(ck_transport_body(a, "{}", 2), -1);
		return;
	}
	if (h->starts == 1) {
		ck_transport_end(a, "connection reset by the test");
		return;
	}
	static const char cm[] = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
	                         "\"metadata\":{\"name\":\"x\",\"namespace\":\"ns\"}}";
	ck_transport_head(a, 200, -1);
	if (ck_transport_body(a, cm, sizeof(cm) - 1) == 0)
		ck_transport_end(a, NULL);
}

static int hook_start(void *ud, ck_transport_attempt_t *a, const ck_transport_req_t *req,
                      char **err)
{
	hook_tp_t *h = ud;
	h->a = a;
	h->starts++;
	ev_timer_start(ck_fake_env_loop(env), &h->t);
	return 0;
}

static void hook_stop(void *ud, ck_transport_attempt_t *a)
{
	hook_tp_t *h = ud;
	ev_timer_stop(ck_fake_env_loop(env), &h->t);
	h->a = NULL;
}

static hook_tp_t hook;
static const ck_transport_t hook_tp = {hook_start, hook_stop, &hook};

static void hook_client_new(void *ud)
{
	static const char kc[] =
	    "apiVersion: v1\nkind: Config\n"
	    "clusters:\n- name: t\n  cluster:\n    server: http://hook.invalid\n"
	    "users:\n- name: t\n  user: {}\n"
	    "contexts:\n- name: t\n  context:\n    cluster: t\n    user: t\n"
	    "current-context: t\n";
	ck_config_t *cfg = ck_config_load_text(kc, sizeof(kc) - 1, "(hook)", NULL, &hook.err);
	if (cfg != NULL)
		hook.c =
		    ck_client_new(ck_fake_env_loop(env), cfg,
		                  &(ck_client_opts_t){.qps = -1, .transport = &hook_tp}, &hook.err);
}

static void hook_client_free(void *ud)
{
	ck_client_free(hook.c);
}

static void hook_get(int mode, ck_result_t *r)
{
	hook = (hook_tp_t){.mode = mode};
	ev_timer_init(&hook.t, hook_answer, 0., 0.);
	ck_fake_env_run(env, hook_client_new, NULL);
	ck_assert_msg(hook.c != NULL, "%s", hook.err ? hook.err : "");
	ck_client_get_sync(hook.c, &cm_type, "ns", "x", r);
	ck_fake_env_run(env, hook_client_free, NULL);
}

START_TEST(test_hook_reset_and_early_body)
{
	/* A reset GET that delivered nothing is retried, as curl's would be. */
	ck_result_t r = {0};
	hook_get(0, &r);
	ck_assert_msg(r.error == NULL, "%s", r.error);
	ck_assert_int_eq(hook.starts, 2);
	ck_assert_str_eq(r.obj->name, "x");
	ck_result_clear(&r);

	/* A body before its status fails the request, naming why. */
	hook_get(1, &r);
	ck_assert_int_eq(hook.starts, 1);
	ck_assert_msg(r.error && strstr(r.error, "a body before its status"), "%s",
	              r.error ? r.error : "(no error)");
	ck_result_clear(&r);
}
END_TEST

START_TEST(test_bad_paths)
{
	/* A request the fake cannot place: 404 that says so. */
	static const ck_type_t odd = {"", "v1", "Pod", "pods", true, NULL, 0, false};
	ck_req_spec_t spec = {.method = "GET",
	                      .type = &odd,
	                      .ns = "ns",
	                      .name = "p",
	                      .subresource = "log",
	                      .decode = CK_DEC_OBJECT};
	ck_result_t r = {0};
	ck_assert_int_eq(ck_client_do_sync(cl, &spec, &r), -1);
	assert_status(&r, 404, "NotFound", "the subresource log is not modelled");
	ck_result_clear(&r);
	char *err = NULL;
	ck_assert_int_eq(ck_fake_add(fake, &cm_type, "not json", &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "malformed JSON"));
	free(err);
	err = NULL;
	ck_assert_int_eq(ck_fake_add(fake, &cm_type, "{\"metadata\":{\"namespace\":\"n\"}}", &err),
	                 -1);
	ck_assert_msg(strstr(err, "422 Invalid") != NULL, "%s", err);
	free(err);
	err = NULL;
	ck_assert_int_eq(ck_fake_add(fake, &cm_type, NULL, &err), -1);
	ck_assert_str_eq(err, "fake: POST configmaps: no object");
	free(err);
	err = NULL;
	ck_assert_int_eq(ck_fake_delete(fake, &cm_type, "ns", NULL, &err), -1);
	ck_assert_str_eq(err, "fake: DELETE configmaps: no name");
	free(err);
	ck_assert_ptr_null(ck_fake_get(fake, &cm_type, "ns", NULL));
}
END_TEST

Suite *suite_fake(void)
{
	Suite *s = suite_create("fake");
	TCase *tc = tcase_create("server");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_create_get);
	tcase_add_test(tc, test_update_conflict_generation);
	tcase_add_test(tc, test_patch_merge_and_unmodelled);
	tcase_add_test(tc, test_apply);
	tcase_add_test(tc, test_delete_finalizers);
	tcase_add_test(tc, test_delete_preconditions);
	tcase_add_test(tc, test_list_selectors_pages);
	tcase_add_test(tc, test_watch_from_rv_and_bookmarks);
	tcase_add_test(tc, test_finalizer_events);
	tcase_add_test(tc, test_informer_fed_by_fake);
	tcase_add_test(tc, test_generated_kind);
	tcase_add_test(tc, test_recorder_on_fake);
	tcase_add_test(tc, test_env_recorder);
	tcase_add_test(tc, test_cancel_inside_callback);
	tcase_add_test(tc, test_informer_list_then_watch);
	tcase_add_test(tc, test_reactor_500_retry);
	tcase_add_test(tc, test_reactor_latency_and_subresource);
	tcase_add_test(tc, test_hook_reset_and_early_body);
	tcase_add_test(tc, test_bad_paths);
	suite_add_tcase(s, tc);
	TCase *tg = tcase_create("gc");
	tcase_add_checked_fixture(tg, setup_gc, teardown);
	tcase_add_test(tg, test_owner_gc);
	suite_add_tcase(s, tg);
	TCase *th = tcase_create("history");
	tcase_add_checked_fixture(th, setup_short_history, teardown);
	tcase_set_timeout(th, 30);
	tcase_add_test(th, test_watch_too_old);
	suite_add_tcase(s, th);
	TCase *tn = tcase_create("names");
	tcase_add_test(tn, test_generate_name_deterministic);
	suite_add_tcase(s, tn);
	return s;
}
