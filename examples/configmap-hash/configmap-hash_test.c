/*
 * Unit tests of the configmap-hash reconcile function on the in-memory API server
 * (<ckube/fake.h>): the hash annotation on a labelled ConfigMap, recomputed when
 * the Secret it names changes, nothing for unlabelled ConfigMaps, nothing written
 * when the annotation is right. The hashes expected were computed apart (Python's
 * FNV-1a 64 over the same bytes). Run from this directory: `make examples-test`.
 */
#include "configmap-hash.h"

#include <ckube/check.h>
#include <ckube/fake.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ck_fake_t *f;
static ck_fake_env_t *env;
static configmap_hash_t h;

static const ck_cache_lister_t *lister(const ck_type_t *t)
{
	return ck_cache_informer_lister(ck_fake_env_informer(env, t, NULL));
}

static void put(const ck_type_t *t, const char *json)
{
	char *err = NULL;
	ck_assert_msg(ck_fake_put(f, t, json, &err) == 0, "%s", err);
}

/* The controller's client, recorder and listers on an empty fake. */
static void setup(void)
{
	char *err = NULL;
	f = ck_fake_new(NULL);
	env = ck_fake_env_new(f, NULL, &err);
	configmap_hash_configmap_type(&h.configmap_type);
	h.client = ck_fake_env_client(env);
	h.recorder = ck_fake_env_recorder(env, NULL);
	h.configmaps = lister(&h.configmap_type);
	h.secrets = lister(&ck_type_secret_with_data);
	ck_assert_msg(ck_fake_env_start(env, 5000, &err) == 0, "%s", err);
}

static void teardown(void)
{
	ck_fake_env_free(env);
	ck_fake_free(f);
}

/* The listers see what was seeded, one reconcile of default/name, then the listers
 * see its writes. */
static void reconcile(const char *name)
{
	char *err = NULL, key[64];
	snprintf(key, sizeof(key), "default/%s", name);
	ck_assert_msg(ck_fake_env_settle(env, 5000, &err) == 0, "%s", err);
	ck_assert_msg(configmap_hash_reconcile(&h, key, &err) == 0, "reconcile: %s", err);
	ck_assert_msg(ck_fake_env_settle(env, 5000, &err) == 0, "%s", err);
}

/* The stored ConfigMap's hash annotation, a new string ("" when absent). */
static char *hash_of(const char *name)
{
	ck_json_doc_t *d = ck_fake_get(f, &ck_type_configmap, "default", name);
	const char *s = ck_json_str(
	    ck_json_get(ck_json_root(d), CK_PATH("metadata", "annotations", CONFIGMAP_HASH_ANN)));
	char *r = ck_xstrdup(s ? s : "");
	ck_json_doc_free(d);
	return r;
}

static void assert_hash(const char *name, const char *want)
{
	char *have = hash_of(name);
	ck_assert_str_eq(have, want);
	free(have);
}

/* Data {"b":"2","a":"1"} (hashed a first), the label set to label, naming Secret creds. */
static void configmap(const char *name, const char *label)
{
	char json[512];
	snprintf(json, sizeof(json),
	         "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"labels\":{\"%s\":"
	         "\"%s\"},\"annotations\":{\"%s\":\"creds\"}},\"data\":{\"b\":\"2\",\"a\":\"1\"}}",
	         name, CONFIGMAP_HASH_LABEL, label, CONFIGMAP_HASH_SECRET_ANN);
	put(&ck_type_configmap, json);
}

/* Secret creds with password (base64) as given. */
static void secret(const char *b64)
{
	char json[256];
	snprintf(json, sizeof(json),
	         "{\"metadata\":{\"name\":\"creds\",\"namespace\":\"default\"},"
	         "\"data\":{\"password\":\"%s\"}}",
	         b64);
	put(&ck_type_secret_with_data, json);
}

START_TEST(test_labelled_gets_the_hash)
{
	configmap("conf", "true"); /* its Secret does not exist: the data alone */
	reconcile("conf");
	assert_hash("conf", "fnv64a:ba7ba27f8aa4322d");
	ck_assert_uint_eq(ck_fake_count(f, "patch", "configmaps"), 1);
	ck_assert_uint_eq(ck_fake_count(f, "create", "events"), 1);
}
END_TEST

START_TEST(test_secret_change_recomputes)
{
	secret("czNjcmV0"); /* "s3cret" */
	configmap("conf", "true");
	reconcile("conf");
	assert_hash("conf", "fnv64a:87203019f8a10eba");
	secret("cm90YXRlZA=="); /* "rotated" */
	reconcile("conf");
	assert_hash("conf", "fnv64a:77113d1e40e8fac3");
	ck_assert_uint_eq(ck_fake_count(f, "patch", "configmaps"), 2);
}
END_TEST

START_TEST(test_unlabelled_untouched)
{
	put(&ck_type_configmap, "{\"metadata\":{\"name\":\"plain\",\"namespace\":\"default\"},"
	                        "\"data\":{\"a\":\"1\"}}");
	configmap("off", "false");
	reconcile("plain");
	reconcile("off");
	reconcile("absent");
	assert_hash("plain", "");
	assert_hash("off", "");
	ck_assert_uint_eq(ck_fake_count(f, "patch", NULL) + ck_fake_count(f, "update", NULL) +
	                      ck_fake_count(f, "create", NULL),
	                  0);
}
END_TEST

START_TEST(test_no_write_when_right)
{
	configmap("conf", "true");
	reconcile("conf");
	ck_fake_clear_actions(f);
	reconcile("conf");
	ck_assert_uint_eq(ck_fake_count(f, "patch", NULL) + ck_fake_count(f, "update", NULL) +
	                      ck_fake_count(f, "create", NULL),
	                  0);
	assert_hash("conf", "fnv64a:ba7ba27f8aa4322d");
}
END_TEST

CK_CHECK_MAIN("configmap-hash", setup, teardown, test_labelled_gets_the_hash,
              test_secret_change_recomputes, test_unlabelled_untouched, test_no_write_when_right)
