/*
 * Unit tests of the WebApp reconcile function on the in-memory API server
 * (<ckube/fake.h>): what go/controller_test.go checks, then a repaired Service
 * and a deletion. Run from this directory: `make examples-test`.
 */
#include "webapp.h"

#include <ckube/check.h>
#include <ckube/fake.h>

#include <stdlib.h>

static ck_fake_t *f;
static ck_fake_env_t *env;
static webapp_t w;

static const ck_cache_lister_t *lister(const ck_type_t *t)
{
	return ck_cache_informer_lister(ck_fake_env_informer(env, t, NULL));
}

/* A WebApp default/web, and the controller's client, recorder and listers on a fake. */
static void setup(void)
{
	char *err = NULL;
	f = ck_fake_new(&(ck_fake_opts_t){.gc = true});
	ck_assert_msg(
	    ck_fake_add(f, &web_app_type,
	                "{\"metadata\":{\"name\":\"web\",\"namespace\":\"default\"},\"spec\":"
	                "{\"image\":\"nginx:1.27\",\"replicas\":2,\"port\":8080}}",
	                &err) == 0,
	    "%s", err);
	env = ck_fake_env_new(f, NULL, &err);
	w = (webapp_t){.client = ck_fake_env_client(env),
	               .recorder = ck_fake_env_recorder(env, NULL),
	               .webapps = lister(&web_app_type),
	               .deployments = lister(&ck_type_deployment),
	               .services = lister(&ck_type_service)};
	ck_assert_msg(ck_fake_env_start(env, 5000, &err) == 0, "%s", err);
}

static void teardown(void)
{
	ck_fake_env_free(env);
	ck_fake_free(f);
}

/* One reconcile of default/web, then the listers see its writes. */
static void reconcile(void)
{
	char *err = NULL;
	ck_assert_msg(webapp_reconcile(&w, "default/web", &err) == 0, "reconcile: %s", err);
	ck_assert_msg(ck_fake_env_settle(env, 5000, &err) == 0, "%s", err);
}

START_TEST(test_reconcile_creates)
{
	reconcile();
	ck_json_doc_t *d = ck_fake_get(f, &ck_type_deployment, "default", "web");
	const ck_json_t *spec = ck_json_get(ck_json_root(d), CK_PATH("spec"));
	ck_assert_int_eq(ck_json_int(ck_json_get(spec, CK_PATH("replicas")), 0), 2);
	ck_assert_str_eq(
	    ck_json_str(ck_json_get(spec, CK_PATH("template", "spec", "containers", "0", "image"))),
	    "nginx:1.27");
	ck_json_doc_t *s = ck_fake_get(f, &ck_type_service, "default", "web");
	const ck_json_t *ports = ck_json_get(ck_json_root(s), CK_PATH("spec", "ports"));
	ck_assert_uint_eq(ck_json_len(ports), 1);
	ck_assert_int_eq(ck_json_int(ck_json_get(ports, CK_PATH("0", "targetPort")), 0), 8080);
	ck_json_doc_t *a = ck_fake_get(f, &web_app_type, "default", "web");
	ck_assert_uint_eq(
	    ck_json_len(ck_json_get(ck_json_root(a), CK_PATH("metadata", "finalizers"))), 1);
	ck_assert(ck_conditions_is_false(
	    ck_json_get(ck_json_root(a), CK_PATH("status", "conditions")), "Ready"));
	ck_json_doc_free(d);
	ck_json_doc_free(s);
	ck_json_doc_free(a);
}
END_TEST

START_TEST(test_nothing_written_twice_and_drift_repaired)
{
	reconcile();
	ck_fake_clear_actions(f);
	reconcile();
	ck_assert_uint_eq(ck_fake_count(f, "create", NULL) + ck_fake_count(f, "update", NULL) +
	                      ck_fake_count(f, "patch", NULL),
	                  0);

	/* Someone adds a port by hand: the next reconcile takes it away. */
	ck_assert_int_eq(ck_fake_put(f, &ck_type_service,
	                             "{\"metadata\":{\"name\":\"web\",\"namespace\":\"default\"},"
	                             "\"spec\":{\"ports\":[{\"name\":\"http\",\"port\":80},"
	                             "{\"name\":\"debug\",\"port\":9090}]}}",
	                             NULL),
	                 0);
	reconcile();
	ck_json_doc_t *s = ck_fake_get(f, &ck_type_service, "default", "web");
	ck_assert_uint_eq(ck_json_len(ck_json_get(ck_json_root(s), CK_PATH("spec", "ports"))), 1);
	ck_json_doc_free(s);
}
END_TEST

START_TEST(test_deletion_releases_the_finalizer)
{
	reconcile();
	ck_assert_int_eq(ck_fake_delete(f, &web_app_type, "default", "web", NULL), 0);
	ck_assert_uint_eq(ck_fake_len(f, &web_app_type, "default"), 1); /* held by the finalizer */
	ck_fake_env_settle(env, 5000, NULL);
	reconcile();
	ck_assert_uint_eq(ck_fake_len(f, &web_app_type, "default"), 0);
	ck_assert_uint_eq(ck_fake_len(f, &ck_type_deployment, "default"), 0); /* collected */
	ck_assert_uint_eq(ck_fake_count(f, "create", "events"), 1);
}
END_TEST

CK_CHECK_MAIN("webapp", setup, teardown, test_reconcile_creates,
              test_nothing_written_twice_and_drift_repaired, test_deletion_releases_the_finalizer)
