/*
 * Unit tests of the Greeting reconcile function on the in-memory API server
 * (<ckube/fake.h>): the ConfigMap and the status it writes, drift put back, a
 * ConfigMap that is not its own left alone, an invalid spec reported. Run from
 * this directory: `make examples-test`.
 */
#include "greeting.h"

#include <ckube/check.h>
#include <ckube/fake.h>

#include <stdlib.h>
#include <string.h>

static ck_fake_t *f;
static ck_fake_env_t *env;
static greeting_ctrl_t g;

static const ck_cache_lister_t *lister(const ck_type_t *t)
{
	return ck_cache_informer_lister(ck_fake_env_informer(env, t, NULL));
}

static void add(const ck_type_t *t, const char *json)
{
	char *err = NULL;
	ck_assert_msg(ck_fake_add(f, t, json, &err) == 0, "%s", err);
}

/* A Greeting default/ada for Ada, and the controller's client, recorder and listers. */
static void setup(void)
{
	char *err = NULL;
	f = ck_fake_new(NULL);
	add(&greeting_type, "{\"metadata\":{\"name\":\"ada\",\"namespace\":\"default\"},"
	                    "\"spec\":{\"name\":\"Ada\"}}");
	env = ck_fake_env_new(f, NULL, &err);
	g = (greeting_ctrl_t){.client = ck_fake_env_client(env),
	                      .recorder = ck_fake_env_recorder(env, NULL),
	                      .greetings = lister(&greeting_type),
	                      .configmaps = lister(&ck_type_configmap)};
	ck_assert_msg(ck_fake_env_start(env, 5000, &err) == 0, "%s", err);
}

static void teardown(void)
{
	ck_fake_env_free(env);
	ck_fake_free(f);
}

/* One reconcile of key, then the listers see its writes (and the fake its events). */
static void reconcile(const char *key)
{
	char *err = NULL;
	ck_fake_env_settle(env, 5000, NULL);
	ck_assert_msg(greeting_reconcile(&g, key, &err) == 0, "reconcile: %s", err);
	ck_assert_msg(ck_fake_env_settle(env, 5000, &err) == 0, "%s", err);
}

/* Stored object ns/name's string at path, a new string ("" when absent). */
static char *stored(const ck_type_t *t, const char *name, const char *const *path)
{
	ck_json_doc_t *d = ck_fake_get(f, t, "default", name);
	const char *s = ck_json_str(ck_json_get(ck_json_root(d), path));
	char *r = ck_xstrdup(s ? s : "");
	ck_json_doc_free(d);
	return r;
}

static void assert_stored(const ck_type_t *t, const char *name, const char *const *path,
                          const char *want)
{
	char *have = stored(t, name, path);
	ck_assert_str_eq(have, want);
	free(have);
}

/* The events of default with this reason, as the fake holds them. */
static size_t events(const char *reason)
{
	static const char *const fields[] = {"reason"};
	static const ck_type_t event_type = {"", "v1", "Event", "events", true, fields, 1, false};
	ck_obj_t **items = NULL;
	size_t n = 0, hits = 0;
	ck_result_t res = {0};
	ck_assert_int_eq(
	    ck_client_list_sync(g.client, &event_type, "default", NULL, &items, &n, NULL, &res), 0);
	for (size_t i = 0; i < n; i++) {
		const ck_val_t *v = ck_obj_field(items[i], 0);
		hits += v != NULL && v->type == CK_VAL_STRING && strcmp(v->u.s, reason) == 0;
		ck_obj_unref(items[i]);
	}
	free(items);
	ck_result_clear(&res);
	return hits;
}

static size_t writes(void)
{
	return ck_fake_count(f, "create", "configmaps") + ck_fake_count(f, "update", NULL) +
	       ck_fake_count(f, "patch", NULL);
}

START_TEST(test_configmap_and_status)
{
	reconcile("default/ada");
	assert_stored(&ck_type_configmap, "ada-greeting", CK_PATH("data", "message"),
	              "Hello, Ada!");
	/* Controlled by the Greeting: its group, kind, name and uid. */
	char *uid = stored(&greeting_type, "ada", CK_PATH("metadata", "uid"));
	ck_json_doc_t *d = ck_fake_get(f, &ck_type_configmap, "default", "ada-greeting");
	const ck_json_t *refs =
	    ck_json_get(ck_json_root(d), CK_PATH("metadata", "ownerReferences"));
	ck_assert_uint_eq(ck_json_len(refs), 1);
	ck_assert_str_eq(ck_json_str(ck_json_get(refs, CK_PATH("0", "apiVersion"))),
	                 "example.ckube.io/v1alpha1");
	ck_assert_str_eq(ck_json_str(ck_json_get(refs, CK_PATH("0", "kind"))), "Greeting");
	ck_assert_str_eq(ck_json_str(ck_json_get(refs, CK_PATH("0", "name"))), "ada");
	ck_assert_str_eq(ck_json_str(ck_json_get(refs, CK_PATH("0", "uid"))), uid);
	bool controller = false;
	ck_assert_int_eq(
	    ck_json_get_bool(ck_json_get(refs, CK_PATH("0", "controller")), &controller),
	    CK_JSON_OK);
	ck_assert(controller);
	ck_json_doc_free(d);
	free(uid);
	/* The status, through the status subresource only. */
	assert_stored(&greeting_type, "ada", CK_PATH("status", "message"), "Hello, Ada!");
	ck_assert_uint_eq(ck_fake_count(f, "patch", "greetings/status"), 1);
	ck_assert_uint_eq(ck_fake_count(f, "patch", "greetings"), 1);
	ck_assert_uint_eq(events("Applied"), 1);
}
END_TEST

START_TEST(test_world_when_no_name)
{
	add(&greeting_type, "{\"metadata\":{\"name\":\"anon\",\"namespace\":\"default\"}}");
	reconcile("default/anon");
	assert_stored(&ck_type_configmap, "anon-greeting", CK_PATH("data", "message"),
	              "Hello, world!");
	assert_stored(&greeting_type, "anon", CK_PATH("status", "message"), "Hello, world!");
}
END_TEST

START_TEST(test_nothing_written_twice_and_drift_repaired)
{
	reconcile("default/ada");
	ck_fake_clear_actions(f);
	reconcile("default/ada");
	ck_assert_uint_eq(writes(), 0);

	/* Someone edits the message (kubectl patch --type merge): it is put back. */
	ck_patch_t *p = ck_patch_new();
	ck_patch_set_string(p, CK_PATH("data", "message"), "tampered");
	ck_result_t res = {0};
	ck_assert_int_eq(ck_client_merge_patch_sync(g.client, &ck_type_configmap, "default",
	                                            "ada-greeting", p, NULL, &res),
	                 0);
	ck_result_clear(&res);
	ck_patch_free(p);
	reconcile("default/ada");
	assert_stored(&ck_type_configmap, "ada-greeting", CK_PATH("data", "message"),
	              "Hello, Ada!");

	/* ...and deleted: it comes back. */
	ck_assert_int_eq(ck_fake_delete(f, &ck_type_configmap, "default", "ada-greeting", NULL), 0);
	reconcile("default/ada");
	assert_stored(&ck_type_configmap, "ada-greeting", CK_PATH("data", "message"),
	              "Hello, Ada!");
}
END_TEST

START_TEST(test_already_owned_left_alone)
{
	add(&ck_type_configmap,
	    "{\"metadata\":{\"name\":\"ada-greeting\",\"namespace\":\"default\","
	    "\"ownerReferences\":[{\"apiVersion\":\"example.ckube.io/v1alpha1\",\"kind\":"
	    "\"Greeting\",\"name\":\"other\",\"uid\":\"uid-of-other\",\"controller\":true}]},"
	    "\"data\":{\"message\":\"theirs\"}}");
	ck_fake_clear_actions(f);
	reconcile("default/ada");
	ck_assert_uint_eq(writes(), 0);
	assert_stored(&ck_type_configmap, "ada-greeting", CK_PATH("data", "message"), "theirs");
	assert_stored(&greeting_type, "ada", CK_PATH("status", "message"), "");
	ck_assert_uint_eq(events("AlreadyOwned"), 1);
}
END_TEST

START_TEST(test_invalid_spec_reported)
{
	/* spec.name is at most 63 characters (crd.yaml); the fake does not validate. */
	add(&greeting_type, "{\"metadata\":{\"name\":\"long\",\"namespace\":\"default\"},\"spec\":{"
	                    "\"name\":\"0123456789012345678901234567890123456789012345678901234567"
	                    "890123\"}}");
	ck_fake_clear_actions(f);
	reconcile("default/long");
	ck_assert_uint_eq(writes(), 0);
	ck_assert_uint_eq(ck_fake_len(f, &ck_type_configmap, "default"), 0);
	ck_assert_uint_eq(events("InvalidSpec"), 1);
}
END_TEST

CK_CHECK_MAIN("greeting", setup, teardown, test_configmap_and_status, test_world_when_no_name,
              test_nothing_written_twice_and_drift_repaired, test_already_owned_left_alone,
              test_invalid_spec_reported)
