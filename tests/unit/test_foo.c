/* Unit tests of the Foo kind as the controller uses it: the generated accessors and
 * validation (api/samplecontroller/v1alpha1), the JSON written (foo_sync). */
#include "cmd/sample-controller/foo_sync.h"
#include <ckube/decode.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

static ck_obj_t *foo_from(const char *json)
{
	char *err = NULL;
	ck_obj_t *o = ck_dec_object(&foo_type, json, strlen(json), &err);
	ck_assert_msg(o != NULL, "decode: %s", err ? err : "?");
	return o;
}

static const char *FOO =
    "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\",\"metadata\":{"
    "\"name\":\"example-foo\",\"namespace\":\"default\",\"uid\":\"u-1\",\"resourceVersion\":\"42\","
    "\"generation\":3},\"spec\":{\"deploymentName\":\"web\",\"replicas\":2},\"status\":{"
    "\"availableReplicas\":2,\"observedGeneration\":3,\"conditions\":[{\"type\":\"Ready\","
    "\"status\":\"True\",\"reason\":\"DeploymentAvailable\",\"message\":\"2/2 replicas available\","
    "\"lastTransitionTime\":\"2026-11-29T12:00:00Z\",\"observedGeneration\":3}]}}";

/* status.availableReplicas, 0 when absent (as the controller reads it). */
static int64_t avail_of(const ck_obj_t *foo)
{
	int64_t n;
	foo_status_available_replicas(foo, &n);
	return n;
}

static const char *str_at(yajl_val root, const char **path)
{
	yajl_val v = yajl_tree_get(root, path, yajl_t_string);
	return v ? YAJL_GET_STRING(v) : NULL;
}

START_TEST(test_accessors_and_status_equal)
{
	ck_obj_t *f = foo_from(FOO);
	int64_t r = 0;
	ck_assert_str_eq(foo_spec_deployment_name(f), "web");
	ck_assert(foo_spec_replicas(f, &r));
	ck_assert_int_eq(r, 2);
	ck_assert(foo_status_available_replicas(f, &r));
	ck_assert_int_eq(r, 2);
	ck_assert(foo_status_observed_generation(f, &r));
	ck_assert_int_eq(r, 3);
	foo_condition_t c;
	ck_assert(foo_condition_get(f, "Ready", &c));
	ck_assert_str_eq(c.status, "True");
	ck_assert_str_eq(c.last_transition_time, "2026-11-29T12:00:00Z");
	ck_assert(!foo_condition_get(f, "Degraded", &c));

	foo_desired_status_t same = {2, 3, "True", "DeploymentAvailable", "2/2 replicas available"};
	ck_assert(foo_status_equal(f, &same));
	foo_desired_status_t fewer = {1, 3, "False", "DeploymentProgressing",
	                              "1/2 replicas available"};
	ck_assert(!foo_status_equal(f, &fewer));
	foo_desired_status_t newgen = same;
	newgen.observed_generation = 4;
	ck_assert(!foo_status_equal(f, &newgen));
	ck_obj_unref(f);
}
END_TEST

START_TEST(test_validation)
{
	struct {
		const char *spec;
		const char *want; /* NULL = valid */
	} cases[] = {
	    {"{\"deploymentName\":\"web\",\"replicas\":1}", NULL},
	    {"{\"deploymentName\":\"web.v2-a\"}", NULL},
	    {"{}", NULL}, /* empty name is the controller's own case, like upstream */
	    {"{\"deploymentName\":\"Web\"}", "spec.deploymentName: \"Web\" is not a valid"},
	    {"{\"deploymentName\":\"-web\"}", "spec.deploymentName"},
	    {"{\"deploymentName\":\"web-\"}", "spec.deploymentName"},
	    {"{\"deploymentName\":\"a..b\"}", "spec.deploymentName"},
	    {"{\"deploymentName\":7}", "spec.deploymentName: must be a string"},
	    {"{\"deploymentName\":\"web\",\"replicas\":0}", "spec.replicas: 0 is not in 1..10"},
	    {"{\"deploymentName\":\"web\",\"replicas\":11}", "spec.replicas: 11 is not in 1..10"},
	    {"{\"deploymentName\":\"web\",\"replicas\":\"3\"}",
	     "spec.replicas: must be an integer"},
	    {"{\"deploymentName\":\"web\",\"replicas\":2.5}", "spec.replicas: must be an integer"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char json[512];
		snprintf(json, sizeof(json),
		         "{\"metadata\":{\"name\":\"f\",\"namespace\":\"n\"},\"spec\":%s}",
		         cases[i].spec);
		ck_obj_t *f = foo_from(json);
		char *err = NULL;
		int rc = foo_validate_spec(f, &err);
		if (cases[i].want == NULL) {
			ck_assert_msg(rc == 0, "%s: unexpected error %s", cases[i].spec, err);
		} else {
			ck_assert_msg(rc == -1 && err && strstr(err, cases[i].want), "%s: got %s",
			              cases[i].spec, err ? err : "no error");
		}
		free(err);
		ck_obj_unref(f);
	}
	/* A valid name is at most 253 characters. */
	char json[512], *err = NULL;
	for (int n = 253; n <= 254; n++) {
		snprintf(json, sizeof(json), "{\"spec\":{\"deploymentName\":\"%0*d\"}}", n, 0);
		ck_obj_t *f = foo_from(json);
		ck_assert_int_eq(foo_validate_spec(f, &err), n == 253 ? 0 : -1);
		ck_obj_unref(f);
	}
	ck_assert_str_eq(err, "spec.deploymentName: 254 characters, at most 253");
	free(err);
}
END_TEST

/* foo_new_deployment's body as sent (a new string). */
static char *dep_text(const ck_obj_t *f)
{
	char *err = NULL;
	ck_patch_t *p = foo_new_deployment(f, &err);
	ck_assert_msg(p != NULL, "foo_new_deployment: %s", err ? err : "?");
	char *text = ck_patch_build(p, NULL, &err);
	ck_assert_msg(text != NULL, "build: %s", err ? err : "?");
	ck_patch_free(p);
	return text;
}

START_TEST(test_new_deployment_json)
{
	ck_obj_t *f = foo_from(FOO);
	char *text = dep_text(f);
	char ebuf[256];
	yajl_val root = yajl_tree_parse(text, ebuf, sizeof(ebuf));
	ck_assert_msg(root != NULL, "invalid JSON: %s: %s", ebuf, text);
	const char *name[] = {"metadata", "name", NULL}, *ns[] = {"metadata", "namespace", NULL},
	           *lc[] = {"metadata", "labels", "controller", NULL},
	           *la[] = {"metadata", "labels", "app", NULL},
	           *sel[] = {"spec", "selector", "matchLabels", "controller", NULL},
	           *tl[] = {"spec", "template", "metadata", "labels", "app", NULL};
	ck_assert_str_eq(str_at(root, name), "web");
	ck_assert_str_eq(str_at(root, ns), "default");
	ck_assert_str_eq(str_at(root, lc), "example-foo");
	ck_assert_str_eq(str_at(root, la), "nginx");
	ck_assert_str_eq(str_at(root, sel), "example-foo");
	ck_assert_str_eq(str_at(root, tl), "nginx");
	const char *rep[] = {"spec", "replicas", NULL};
	yajl_val r = yajl_tree_get(root, rep, yajl_t_number);
	ck_assert(r && YAJL_GET_INTEGER(r) == 2);
	const char *owners[] = {"metadata", "ownerReferences", NULL};
	yajl_val ow = yajl_tree_get(root, owners, yajl_t_array);
	ck_assert(ow && YAJL_GET_ARRAY(ow)->len == 1);
	yajl_val o0 = YAJL_GET_ARRAY(ow)->values[0];
	const char *uid[] = {"uid", NULL}, *kind[] = {"kind", NULL}, *ctl[] = {"controller", NULL},
	           *bod[] = {"blockOwnerDeletion", NULL}, *av[] = {"apiVersion", NULL};
	ck_assert_str_eq(str_at(o0, uid), "u-1");
	ck_assert_str_eq(str_at(o0, kind), "Foo");
	ck_assert_str_eq(str_at(o0, av), "samplecontroller.k8s.io/v1alpha1");
	ck_assert(YAJL_IS_TRUE(yajl_tree_get(o0, ctl, yajl_t_true)));
	ck_assert(YAJL_IS_TRUE(yajl_tree_get(o0, bod, yajl_t_true)));
	const char *cont[] = {"spec", "template", "spec", "containers", NULL};
	yajl_val cs = yajl_tree_get(root, cont, yajl_t_array);
	ck_assert(cs && YAJL_GET_ARRAY(cs)->len == 1);
	const char *img[] = {"image", NULL}, *cn[] = {"name", NULL};
	ck_assert_str_eq(str_at(YAJL_GET_ARRAY(cs)->values[0], img), "nginx:latest");
	ck_assert_str_eq(str_at(YAJL_GET_ARRAY(cs)->values[0], cn), "nginx");
	yajl_tree_free(root);
	free(text);
	ck_obj_unref(f);

	/* Without spec.replicas the field is omitted (the API server defaults it). */
	f = foo_from("{\"metadata\":{\"name\":\"f\",\"namespace\":\"n\",\"uid\":\"u\"},"
	             "\"spec\":{\"deploymentName\":\"d\\\"q\"}}");
	text = dep_text(f);
	root = yajl_tree_parse(text, ebuf, sizeof(ebuf));
	ck_assert_msg(root != NULL, "escaping broke the JSON: %s", text);
	ck_assert_ptr_null(yajl_tree_get(root, rep, yajl_t_number));
	ck_assert_str_eq(str_at(root, name), "d\"q");
	yajl_tree_free(root);
	free(text);
	ck_obj_unref(f);
}
END_TEST

/*
 * The bytes sent are those the hand-written JSON of earlier versions sent (the
 * members in upstream's order, the same escaping), so the move to the typed body
 * changed no request: names with characters to escape, non-ASCII, no replicas.
 */
#define FOO_BYTES_1                                                                                \
	"{\"metadata\":{\"name\":\"a.b-c\",\"namespace\":\"ns-1\",\"uid\":"                        \
	"\"6f1c2a3e-0b4d-4c5e-9f60-718293a4b5c6\"},\"spec\":{\"deploymentName\":\"web\","          \
	"\"replicas\":10}}"
#define FOO_BYTES_2                                                                                \
	"{\"metadata\":{\"name\":\"q\\\"b\\\\s\\u0001\\t\\u00e9/"                                  \
	"\\u2713\\ud83d\\ude00\",\"namespace\":"                                                   \
	"\"n\\u007f<\\/script>\",\"uid\":\"u\\\"\\u2028\"},\"spec\":{\"deploymentName\":"          \
	"\"d\\\"\\u00e9\\n\",\"replicas\":1}}"
#define FOO_BYTES_3                                                                                \
	"{\"metadata\":{\"name\":\"f\",\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":{"              \
	"\"deploymentName\":\"d\"}}"
START_TEST(test_new_deployment_bytes)
{
	static const struct {
		const char *foo, *want;
	} cases[] = {
	    {FOO_BYTES_1,
	     "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\""
	     "web\",\"namespace\":\"ns-1\",\"labels\":{\"app\":\"nginx\",\"controller\":\""
	     "a.b-c\"},\"ownerReferences\":[{\"apiVersion\":\"samplecontroller.k8s.io/v1al"
	     "pha1\",\"kind\":\"Foo\",\"name\":\"a.b-c\",\"uid\":\"6f1c2a3e-0b4d-4c5e-9f60"
	     "-718293a4b5c6\",\"controller\":true,\"blockOwnerDeletion\":true}]},\"spec\":"
	     "{\"replicas\":10,\"selector\":{\"matchLabels\":{\"app\":\"nginx\",\"controll"
	     "er\":\"a.b-c\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"nginx\",\""
	     "controller\":\"a.b-c\"}},\"spec\":{\"containers\":[{\"name\":\"nginx\",\"ima"
	     "ge\":\"nginx:latest\"}]}}}}"},
	    {FOO_BYTES_2,
	     "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\""
	     "d\\\"\303\251\\n\",\"namespace\":\"n\177</script>\",\"labels\":{\"app\":\"ng"
	     "inx\",\"controller\":\"q\\\"b\\\\s\\u0001\\t\303\251/\342\234\223\360\237\230"
	     "\200\"},\"ownerReferences\":[{\"apiVersion\":\"samplecontroller.k8s.io/v1alp"
	     "ha1\",\"kind\":\"Foo\",\"name\":\"q\\\"b\\\\s\\u0001\\t\303\251/\342\234\223"
	     "\360\237\230\200\",\"uid\":\"u\\\"\342\200\250\",\"controller\":true,\"block"
	     "OwnerDeletion\":true}]},\"spec\":{\"replicas\":1,\"selector\":{\"matchLabels"
	     "\":{\"app\":\"nginx\",\"controller\":\"q\\\"b\\\\s\\u0001\\t\303\251/\342\234"
	     "\223\360\237\230\200\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"n"
	     "ginx\",\"controller\":\"q\\\"b\\\\s\\u0001\\t\303\251/\342\234\223\360\237\230"
	     "\200\"}},\"spec\":{\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx:lat"
	     "est\"}]}}}}"},
	    {FOO_BYTES_3,
	     "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\""
	     "d\",\"namespace\":\"n\",\"labels\":{\"app\":\"nginx\",\"controller\":\"f\"},"
	     "\"ownerReferences\":[{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\""
	     "kind\":\"Foo\",\"name\":\"f\",\"uid\":\"u\",\"controller\":true,\"blockOwner"
	     "Deletion\":true}]},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"nginx\""
	     ",\"controller\":\"f\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"ng"
	     "inx\",\"controller\":\"f\"}},\"spec\":{\"containers\":[{\"name\":\"nginx\",\""
	     "image\":\"nginx:latest\"}]}}}}"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_obj_t *f = foo_from(cases[i].foo);
		char *text = dep_text(f);
		ck_assert_msg(strcmp(text, cases[i].want) == 0, "%zu:\n%s\nwant:\n%s", i, text,
		              cases[i].want);
		free(text);
		ck_obj_unref(f);
	}
	/* Bad input: a Foo without a uid (not read from the server) has no owner. */
	ck_obj_t *f = foo_from(FOO_BYTES_3);
	char *json = ck_xasprintf("%s", FOO_BYTES_3);
	ck_obj_unref(f);
	char *at = strstr(json, ",\"uid\":\"u\"");
	memmove(at, at + 10, strlen(at + 10) + 1);
	f = foo_from(json);
	char *err = NULL;
	ck_assert_ptr_null(foo_new_deployment(f, &err));
	ck_assert_msg(err && strstr(err, "owner Foo \"f\" has no uid"), "%s", err);
	free(err);
	free(json);
	ck_obj_unref(f);
}
END_TEST

START_TEST(test_status_update_json)
{
	ck_obj_t *f = foo_from(FOO);
	ck_sbuf_t b = CK_SBUF_INIT;
	char ebuf[256];
	/* Same status value: lastTransitionTime is kept. */
	foo_desired_status_t st = {1, 4, "True", "DeploymentAvailable", "1/1 replicas available"};
	foo_status_update_json(f, &st, 1795000000LL * 1000000000LL, &b);
	yajl_val root = yajl_tree_parse(ck_sbuf_cstr(&b), ebuf, sizeof(ebuf));
	ck_assert_msg(root != NULL, "%s", ebuf);
	const char *rv[] = {"metadata", "resourceVersion", NULL};
	ck_assert_str_eq(str_at(root, rv), "42");
	const char *conds[] = {"status", "conditions", NULL};
	yajl_val cs = yajl_tree_get(root, conds, yajl_t_array);
	ck_assert(cs && YAJL_GET_ARRAY(cs)->len == 1);
	const char *ltt[] = {"lastTransitionTime", NULL};
	ck_assert_str_eq(str_at(YAJL_GET_ARRAY(cs)->values[0], ltt), "2026-11-29T12:00:00Z");
	yajl_tree_free(root);
	ck_sbuf_reset(&b);
	/* Status flips: the transition time is now. */
	foo_desired_status_t down = {0, 4, "False", "DeploymentProgressing",
	                             "0/1 replicas available"};
	foo_status_update_json(f, &down, 1795000000LL * 1000000000LL, &b);
	root = yajl_tree_parse(ck_sbuf_cstr(&b), ebuf, sizeof(ebuf));
	cs = yajl_tree_get(root, conds, yajl_t_array);
	char want[32];
	ck_time_format_rfc3339(1795000000LL * 1000000000LL, want);
	ck_assert_str_eq(str_at(YAJL_GET_ARRAY(cs)->values[0], ltt), want);
	yajl_tree_free(root);
	ck_sbuf_free(&b);
	ck_obj_unref(f);
}
END_TEST

/*
 * What the API server answers to our status PUT and then sends on the watch: the
 * Foo (meta_spec: its metadata and spec members) with the status the PUT body
 * carries. Returns a new string, free with free().
 */
static char *server_answer(const char *put_body, const char *meta_spec)
{
	char ebuf[256];
	/* The body must be valid JSON, UTF-8 included (yajl checks it), or the server
	 * would not store exactly what we sent. */
	yajl_val root = yajl_tree_parse(put_body, ebuf, sizeof(ebuf));
	ck_assert_msg(root != NULL, "PUT body is not valid JSON: %s", ebuf);
	yajl_tree_free(root);
	const char *st = strstr(put_body, "\"status\":{");
	ck_assert_ptr_nonnull(st);
	size_t n = strlen(st) - 1; /* without the body's closing brace */
	return ck_xasprintf("{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\","
	                    "%s,%.*s}",
	                    meta_spec, (int)n, st);
}

/* The message of the Ready condition in a PUT body (a new string). */
static char *ready_message(const char *put_body)
{
	yajl_val root = yajl_tree_parse(put_body, NULL, 0);
	const char *conds[] = {"status", "conditions", NULL}, *tp[] = {"type", NULL},
	           *mp[] = {"message", NULL};
	yajl_val cs = yajl_tree_get(root, conds, yajl_t_array);
	ck_assert_ptr_nonnull(cs);
	char *out = NULL;
	for (size_t i = 0; i < YAJL_GET_ARRAY(cs)->len && out == NULL; i++) {
		yajl_val c = YAJL_GET_ARRAY(cs)->values[i];
		const char *t = str_at(c, tp);
		if (t != NULL && strcmp(t, "Ready") == 0)
			out = ck_xstrdup(str_at(c, mp));
	}
	yajl_tree_free(root);
	ck_assert_ptr_nonnull(out);
	return out;
}

/*
 * A 1000-character deploymentName (a CRD without validation lets it in): the
 * InvalidSpec status the controller wants must read back equal once the server
 * stored it, or every sync writes it again (and its event), forever.
 */
START_TEST(test_long_deployment_name_status_round_trips)
{
	/* 252 ASCII then two-byte characters, so that a cut at a valid name's length
	 * (253 bytes) would fall inside one. */
	ck_sbuf_t name = CK_SBUF_INIT;
	for (int i = 0; i < 1000; i++)
		ck_sbuf_puts(&name, i < 252 ? "a" : "\xc3\xa9");
	ck_sbuf_t meta_spec = CK_SBUF_INIT;
	ck_sbuf_puts(&meta_spec, "\"metadata\":{\"name\":\"f\",\"namespace\":\"n\",\"uid\":\"u\","
	                         "\"resourceVersion\":\"8\",\"generation\":5},"
	                         "\"spec\":{\"deploymentName\":");
	ck_sbuf_put_json_str(&meta_spec, ck_sbuf_cstr(&name));
	ck_sbuf_puts(&meta_spec, ",\"replicas\":2}");
	char *json = ck_xasprintf("{%s}", ck_sbuf_cstr(&meta_spec));
	ck_obj_t *f = foo_from(json);
	ck_assert_str_eq(foo_spec_deployment_name(f), ck_sbuf_cstr(&name));

	/* The desired status, as the controller's sync computes it. */
	char *why = NULL;
	ck_assert_int_eq(foo_validate_spec(f, &why), -1);
	ck_assert_msg(strlen(why) <= FOO_CONDITION_MESSAGE_MAX, "message of %zu bytes",
	              strlen(why));
	ck_assert_str_eq(why, "spec.deploymentName: 1000 characters, at most 253");
	foo_desired_status_t st = {avail_of(f), f->generation, "False", "InvalidSpec", why};
	ck_assert(!foo_status_equal(f, &st));

	ck_sbuf_t b = CK_SBUF_INIT;
	foo_status_update_json(f, &st, 1795000000LL * 1000000000LL, &b);
	char *msg = ready_message(ck_sbuf_cstr(&b));
	ck_assert_str_eq(msg, why);
	char *answer = server_answer(ck_sbuf_cstr(&b), ck_sbuf_cstr(&meta_spec));
	ck_obj_t *g = foo_from(answer);

	/* The next sync (the watch brings g) computes the same status: no write. */
	char *why2 = NULL;
	ck_assert_int_eq(foo_validate_spec(g, &why2), -1);
	ck_assert_str_eq(why2, why);
	foo_desired_status_t st2 = {avail_of(g), g->generation, "False", "InvalidSpec", why2};
	ck_assert_msg(foo_status_equal(g, &st2), "the controller would write again");
	ck_assert(foo_status_equal(g, &st));

	free(why2);
	ck_obj_unref(g);
	free(answer);
	free(msg);
	ck_sbuf_free(&b);
	free(why);
	ck_obj_unref(f);
	free(json);
	ck_sbuf_free(&meta_spec);
	ck_sbuf_free(&name);
}
END_TEST

/*
 * Any message longer than a condition holds is cut, at a character boundary,
 * the same way when written and when compared, so it still reads back equal.
 */
START_TEST(test_long_message_cut_at_utf8_boundary)
{
	ck_sbuf_t m = CK_SBUF_INIT;
	ck_sbuf_puts(&m, "xy");
	for (int i = 0; i < 600; i++)
		ck_sbuf_puts(&m, "\xc3\xa9"); /* byte 511 is the second of a character */
	const char *meta_spec = "\"metadata\":{\"name\":\"f\",\"namespace\":\"n\","
	                        "\"resourceVersion\":\"3\",\"generation\":2},"
	                        "\"spec\":{\"deploymentName\":\"web\"}";
	char *json = ck_xasprintf("{%s}", meta_spec);
	ck_obj_t *f = foo_from(json);
	foo_desired_status_t st = {0, 2, "False", "DeploymentProgressing", ck_sbuf_cstr(&m)};
	ck_sbuf_t b = CK_SBUF_INIT;
	foo_status_update_json(f, &st, 1795000000LL * 1000000000LL, &b);
	char *msg = ready_message(ck_sbuf_cstr(&b));
	ck_assert_uint_eq(strlen(msg), 510);
	ck_assert(strncmp(msg, ck_sbuf_cstr(&m), 510) == 0);
	char *answer = server_answer(ck_sbuf_cstr(&b), meta_spec);
	ck_obj_t *g = foo_from(answer);
	ck_assert(foo_status_equal(g, &st));
	foo_condition_t c;
	ck_assert(foo_condition_get(g, "Ready", &c));
	ck_assert_str_eq(c.message, msg);
	/* A different message is still a difference. */
	foo_desired_status_t other = st;
	other.ready_message = "0/1 replicas available";
	ck_assert(!foo_status_equal(g, &other));
	ck_obj_unref(g);
	free(answer);
	free(msg);
	ck_sbuf_free(&b);
	ck_obj_unref(f);
	free(json);
	ck_sbuf_free(&m);
}
END_TEST

/* The status PUT replaces status.conditions: what other writers set must survive. */
START_TEST(test_status_update_keeps_other_conditions)
{
	const char *degraded =
	    "{\"type\":\"Degraded\",\"status\":\"False\",\"reason\":\"AsExpected\","
	    "\"message\":\"all \\\"good\\\"\",\"lastTransitionTime\":"
	    "\"2026-01-02T03:04:05Z\",\"observedGeneration\":2,"
	    "\"extra\":{\"a\":[1,true,null,\"s\"]}}";
	const char *progressing = "{\"type\":\"Progressing\",\"status\":\"True\"}";
	const char *ready =
	    "{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"DeploymentAvailable\","
	    "\"message\":\"old\",\"lastTransitionTime\":\"2026-11-29T12:00:00Z\","
	    "\"observedGeneration\":3}";
	char *json = ck_xasprintf(
	    "{\"metadata\":{\"name\":\"f\",\"namespace\":\"n\",\"resourceVersion\":\"9\","
	    "\"generation\":4},\"spec\":{\"deploymentName\":\"web\"},\"status\":{"
	    "\"conditions\":[%s,%s,%s,%s]}}",
	    degraded, ready, progressing, ready);
	ck_obj_t *f = foo_from(json);
	foo_desired_status_t st = {1, 4, "True", "DeploymentAvailable", "1/1 replicas available"};
	ck_sbuf_t b = CK_SBUF_INIT;
	foo_status_update_json(f, &st, 1795000000LL * 1000000000LL, &b);
	yajl_val root = yajl_tree_parse(ck_sbuf_cstr(&b), NULL, 0);
	ck_assert_msg(root != NULL, "%s", ck_sbuf_cstr(&b));
	const char *conds[] = {"status", "conditions", NULL}, *tp[] = {"type", NULL},
	           *mp[] = {"message", NULL}, *lp[] = {"lastTransitionTime", NULL};
	yajl_val cs = yajl_tree_get(root, conds, yajl_t_array);
	/* In place, the duplicate Ready dropped (the list is a map keyed by type). */
	ck_assert_msg(cs && YAJL_GET_ARRAY(cs)->len == 3, "%s", ck_sbuf_cstr(&b));
	ck_assert_str_eq(str_at(YAJL_GET_ARRAY(cs)->values[0], tp), "Degraded");
	ck_assert_str_eq(str_at(YAJL_GET_ARRAY(cs)->values[1], tp), "Ready");
	ck_assert_str_eq(str_at(YAJL_GET_ARRAY(cs)->values[1], mp), "1/1 replicas available");
	ck_assert_str_eq(str_at(YAJL_GET_ARRAY(cs)->values[1], lp), "2026-11-29T12:00:00Z");
	ck_assert_str_eq(str_at(YAJL_GET_ARRAY(cs)->values[2], tp), "Progressing");
	/* Byte for byte as the server returned them. */
	ck_assert_msg(strstr(ck_sbuf_cstr(&b), degraded) != NULL, "%s", ck_sbuf_cstr(&b));
	ck_assert_msg(strstr(ck_sbuf_cstr(&b), progressing) != NULL, "%s", ck_sbuf_cstr(&b));
	yajl_tree_free(root);
	ck_sbuf_reset(&b);
	ck_obj_unref(f);
	free(json);

	/* No Ready yet: ours goes last. */
	json = ck_xasprintf("{\"metadata\":{\"name\":\"f\",\"namespace\":\"n\"},\"status\":{"
	                    "\"conditions\":[%s]}}",
	                    progressing);
	f = foo_from(json);
	foo_status_update_json(f, &st, 1795000000LL * 1000000000LL, &b);
	root = yajl_tree_parse(ck_sbuf_cstr(&b), NULL, 0);
	cs = yajl_tree_get(root, conds, yajl_t_array);
	ck_assert_msg(cs && YAJL_GET_ARRAY(cs)->len == 2, "%s", ck_sbuf_cstr(&b));
	ck_assert_str_eq(str_at(YAJL_GET_ARRAY(cs)->values[0], tp), "Progressing");
	ck_assert_str_eq(str_at(YAJL_GET_ARRAY(cs)->values[1], tp), "Ready");
	yajl_tree_free(root);
	ck_sbuf_reset(&b);
	ck_obj_unref(f);
	free(json);

	/* Another writer's condition with deeply nested detail (100 levels; the
	 * decoder allows up to CK_DEC_MAX_DEPTH) is kept whole, never dropped. */
	ck_sbuf_t deep = CK_SBUF_INIT;
	ck_sbuf_puts(&deep, "{\"type\":\"Deep\",\"status\":\"True\",\"detail\":");
	for (int i = 0; i < 100; i++)
		ck_sbuf_puts(&deep, "[");
	ck_sbuf_puts(&deep, "1");
	for (int i = 0; i < 100; i++)
		ck_sbuf_puts(&deep, "]");
	ck_sbuf_puts(&deep, "}");
	json = ck_xasprintf("{\"metadata\":{\"name\":\"f\",\"namespace\":\"n\"},\"status\":{"
	                    "\"conditions\":[%s]}}",
	                    ck_sbuf_cstr(&deep));
	f = foo_from(json);
	foo_status_update_json(f, &st, 1795000000LL * 1000000000LL, &b);
	ck_assert_msg(strstr(ck_sbuf_cstr(&b), ck_sbuf_cstr(&deep)) != NULL, "%s",
	              ck_sbuf_cstr(&b));
	ck_sbuf_free(&deep);
	ck_sbuf_free(&b);
	ck_obj_unref(f);
	free(json);
}
END_TEST

Suite *suite_foo(void)
{
	Suite *s = suite_create("foo");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_accessors_and_status_equal);
	tcase_add_test(tc, test_validation);
	tcase_add_test(tc, test_new_deployment_json);
	tcase_add_test(tc, test_new_deployment_bytes);
	tcase_add_test(tc, test_status_update_json);
	tcase_add_test(tc, test_long_deployment_name_status_round_trips);
	tcase_add_test(tc, test_long_message_cut_at_utf8_boundary);
	tcase_add_test(tc, test_status_update_keeps_other_conditions);
	suite_add_tcase(s, tc);
	return s;
}
