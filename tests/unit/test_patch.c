/*
 * patch: merge patches with annotation keys holding dots and slashes, deletes as
 * null, nested paths sharing prefixes, apply bodies with apiVersion/kind/metadata,
 * escaping, determinism, sticky errors, and the helpers' refusals before sending.
 */
#include <ckube/json.h>
#include <ckube/patch.h>
#include <ckube/types.h>

#include <check.h>
#include <stdlib.h>
#include <string.h>

static const ck_type_t cm_type = {"", "v1", "ConfigMap", "configmaps", true, NULL, 0, false};
static const ck_type_t foo_type = {
    "samplecontroller.k8s.io", "v1alpha1", "Foo", "foos", true, NULL, 0, false};
static const ck_type_t node_type = {"", "v1", "Node", "nodes", false, NULL, 0, false};

static void assert_body(const ck_patch_t *p, const char *want)
{
	char *err = NULL;
	size_t len = 0;
	char *got = ck_patch_build(p, &len, &err);
	ck_assert_msg(got != NULL, "%s", err ? err : "?");
	ck_assert_str_eq(got, want);
	ck_assert_uint_eq(len, strlen(want));
	/* Always valid JSON the reader accepts. */
	ck_json_doc_t *d = ck_json_parse(got, len, &err);
	ck_assert_msg(d != NULL, "%s", err ? err : "?");
	ck_json_doc_free(d);
	free(got);
}

START_TEST(test_merge_annotations)
{
	ck_patch_t *p = ck_patch_new();
	ck_assert_int_eq(
	    ck_patch_set_string(p, CK_PATH("metadata", "annotations", "example.com/x"), "1"), 0);
	ck_patch_set_string(p, CK_PATH("metadata", "annotations", "a.b.c/d.e"), "two");
	ck_patch_set_null(p, CK_PATH("metadata", "annotations", "old.example.com/gone"));
	ck_patch_set_string(p, CK_PATH("metadata", "labels", "app.kubernetes.io/name"), "web");
	ck_patch_set_int(p, CK_PATH("spec", "replicas"), 3);
	ck_patch_set_bool(p, CK_PATH("spec", "paused"), false);
	ck_patch_set_null(p, CK_PATH("spec", "minReadySeconds"));
	assert_body(
	    p, "{\"metadata\":{\"annotations\":{\"example.com/x\":\"1\",\"a.b.c/d.e\":\"two\","
	       "\"old.example.com/gone\":null},\"labels\":{\"app.kubernetes.io/name\":\"web\"}},"
	       "\"spec\":{\"replicas\":3,\"paused\":false,\"minReadySeconds\":null}}");
	/* The body reads back through the same segment paths. */
	char *body = ck_patch_build(p, NULL, NULL);
	ck_json_doc_t *d = ck_json_parse(body, strlen(body), NULL);
	ck_assert_str_eq(ck_json_str(ck_json_get(ck_json_root(d),
	                                         CK_PATH("metadata", "annotations", "a.b.c/d.e"))),
	                 "two");
	ck_assert(ck_json_is_null(ck_json_get(
	    ck_json_root(d), CK_PATH("metadata", "annotations", "old.example.com/gone"))));
	ck_json_doc_free(d);
	free(body);
	ck_patch_free(p);
}
END_TEST

START_TEST(test_replace_and_prefixes)
{
	ck_patch_t *p = ck_patch_new();
	ck_patch_set_int(p, CK_PATH("a", "b", "c"), 1);
	ck_patch_set_int(p, CK_PATH("a", "x"), 2);
	ck_patch_set_int(p, CK_PATH("a", "b", "d"), 3);
	ck_patch_set_int(p, CK_PATH("z"), 4);
	/* Setting again replaces in place: first position kept. */
	ck_patch_set_string(p, CK_PATH("a", "b", "c"), "again");
	assert_body(p, "{\"a\":{\"b\":{\"c\":\"again\",\"d\":3},\"x\":2},\"z\":4}");
	/* A whole subtree replaced by null (merge patch: delete it). */
	ck_patch_set_null(p, CK_PATH("a", "b"));
	assert_body(p, "{\"a\":{\"b\":null,\"x\":2},\"z\":4}");
	/* ... and back to an object by a raw value whose members later calls refine. */
	ck_patch_set_raw(p, CK_PATH("a", "b"),
	                 "{ \"k\" : [1, {\"q\":true}], \"k2\":{\"m\":1}, \"k\":0 }",
	                 strlen("{ \"k\" : [1, {\"q\":true}], \"k2\":{\"m\":1}, \"k\":0 }"));
	ck_patch_set_int(p, CK_PATH("a", "b", "k2", "n"), 2);
	assert_body(p, "{\"a\":{\"b\":{\"k\":0,\"k2\":{\"m\":1,\"n\":2}},\"x\":2},\"z\":4}");
	ck_patch_set_raw(p, CK_PATH("arr"), " [1 , \"two\", null] ", 19);
	ck_patch_set_double(p, CK_PATH("d"), 2.0);
	ck_patch_set_double(p, CK_PATH("e"), 0.1);
	assert_body(p, "{\"a\":{\"b\":{\"k\":0,\"k2\":{\"m\":1,\"n\":2}},\"x\":2},\"z\":4,"
	               "\"arr\":[1,\"two\",null],\"d\":2.0,\"e\":0.10000000000000001}");
	ck_patch_free(p);

	/* Top-level raw object: its members are set at the top. */
	p = ck_patch_new();
	ck_patch_set_int(p, CK_PATH("b"), 1);
	ck_assert_int_eq(ck_patch_set_raw(p, CK_PATH_TOP, "{\"a\":1,\"b\":{}}", 14), 0);
	assert_body(p, "{\"b\":{},\"a\":1}");
	ck_patch_free(p);

	p = ck_patch_new();
	assert_body(p, "{}");
	ck_patch_free(p);
}
END_TEST

START_TEST(test_apply_body)
{
	ck_patch_t *p = ck_patch_new_object(&foo_type, "ns1", "example-foo");
	ck_patch_set_int(p, CK_PATH("spec", "replicas"), 2);
	ck_patch_set_string(p, CK_PATH("metadata", "labels", "example.com/owned-by"), "me");
	assert_body(p, "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\","
	               "\"metadata\":{\"name\":\"example-foo\",\"namespace\":\"ns1\","
	               "\"labels\":{\"example.com/owned-by\":\"me\"}},\"spec\":{\"replicas\":2}}");
	ck_patch_free(p);

	p = ck_patch_new_object(&cm_type, "default", "cfg");
	ck_patch_set_string(p, CK_PATH("data", "game.properties"), "lives=3\n");
	assert_body(p,
	            "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cfg\","
	            "\"namespace\":\"default\"},\"data\":{\"game.properties\":\"lives=3\\n\"}}");
	ck_patch_free(p);

	/* Cluster-scoped: no namespace; giving one is an error. No name: left out. */
	p = ck_patch_new_object(&node_type, NULL, "n1");
	assert_body(p, "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"}}");
	ck_patch_free(p);
	p = ck_patch_new_object(&cm_type, "default", NULL);
	ck_patch_set_string(p, CK_PATH("metadata", "generateName"), "cfg-");
	assert_body(p, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"namespace\":"
	               "\"default\",\"generateName\":\"cfg-\"}}");
	ck_patch_free(p);
	p = ck_patch_new_object(&node_type, "ns", "n1");
	char *err = NULL;
	ck_assert_ptr_null(ck_patch_build(p, NULL, &err));
	ck_assert_str_eq(err, "patch: Node is cluster-scoped, yet namespace ns was given");
	free(err);
	ck_patch_free(p);
}
END_TEST

START_TEST(test_escaping)
{
	ck_patch_t *p = ck_patch_new();
	const char odd[] = "q\"b\\s/n\nt\tc\x01\x1f\x7f"
	                   "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
	ck_patch_set_string(p, CK_PATH("k\"ey\n", "a/b.c"), odd);
	ck_patch_set_stringn(p, CK_PATH("nul"), "a\0b", 3);
	ck_patch_set_string(p, CK_PATH(""), "empty key");
	assert_body(
	    p, "{\"k\\\"ey\\n\":{\"a/b.c\":\"q\\\"b\\\\s/n\\nt\\tc\\u0001\\u001f\x7f"
	       "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"},\"nul\":\"a\\u0000b\",\"\":\"empty key\"}");
	/* Round trip: the reader gives the same bytes back. */
	char *body = ck_patch_build(p, NULL, NULL);
	ck_json_doc_t *d = ck_json_parse(body, strlen(body), NULL);
	ck_assert_str_eq(ck_json_str(ck_json_get(ck_json_root(d), CK_PATH("k\"ey\n", "a/b.c"))),
	                 odd);
	size_t l = 0;
	const char *s = NULL;
	ck_assert_int_eq(ck_json_get_string(ck_json_get(ck_json_root(d), CK_PATH("nul")), &s, &l),
	                 CK_JSON_OK);
	ck_assert_uint_eq(l, 3);
	ck_json_doc_free(d);
	free(body);
	ck_patch_free(p);

	/* Invalid UTF-8 (a lone continuation byte, an overlong, a surrogate) is refused. */
	static const char *const bad[] = {"\x80", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	                                  "\xe2\x82"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = ck_patch_new();
		ck_assert_int_eq(ck_patch_set_string(p, CK_PATH("a"), bad[i]), -1);
		ck_assert_str_eq(ck_patch_error(p), "patch: a: value is not valid UTF-8");
		ck_patch_free(p);
		p = ck_patch_new();
		ck_assert_int_eq(ck_patch_set_int(p, CK_PATH("a", bad[i]), 1), -1);
		ck_assert_ptr_nonnull(strstr(ck_patch_error(p), "key is not valid UTF-8"));
		ck_patch_free(p);
	}
}
END_TEST

static char *build(void)
{
	ck_patch_t *p = ck_patch_new_object(&foo_type, "ns", "n");
	ck_patch_set_string(p, CK_PATH("metadata", "annotations", "x.io/b"), "2");
	ck_patch_set_string(p, CK_PATH("metadata", "annotations", "x.io/a"), "1");
	ck_patch_set_raw(p, CK_PATH("spec"), "{\"z\":1,\"a\":[3,2,1]}", 19);
	ck_patch_set_double(p, CK_PATH("status", "ratio"), 1.0 / 3.0);
	char *once = ck_patch_build(p, NULL, NULL);
	char *twice = ck_patch_build(p, NULL, NULL);
	ck_assert_str_eq(once, twice);
	free(twice);
	ck_patch_free(p);
	return once;
}

START_TEST(test_determinism)
{
	char *a = build(), *b = build();
	ck_assert_str_eq(a, b);
	ck_assert_str_eq(a, "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\","
	                    "\"metadata\":{\"name\":\"n\",\"namespace\":\"ns\",\"annotations\":"
	                    "{\"x.io/b\":\"2\",\"x.io/a\":\"1\"}},\"spec\":{\"z\":1,\"a\":[3,2,1]},"
	                    "\"status\":{\"ratio\":0.33333333333333331}}");
	free(a);
	free(b);
}
END_TEST

START_TEST(test_errors)
{
	ck_patch_t *p = ck_patch_new();
	ck_patch_set_string(p, CK_PATH("a", "b"), "leaf");
	ck_assert_int_eq(ck_patch_set_int(p, CK_PATH("a", "b", "c"), 1), -1);
	ck_assert_str_eq(ck_patch_error(p),
	                 "patch: cannot set a.b.c: a.b already holds a non-object value");
	/* Sticky: later calls do nothing, the first error is kept. */
	ck_assert_int_eq(ck_patch_set_int(p, CK_PATH("ok"), 1), -1);
	char *err = NULL;
	ck_assert_ptr_null(ck_patch_build(p, NULL, &err));
	ck_assert_str_eq(err, "patch: cannot set a.b.c: a.b already holds a non-object value");
	free(err);
	ck_patch_free(p);

	p = ck_patch_new();
	ck_assert_int_eq(ck_patch_set_raw(p, CK_PATH("x.y", "z"), "{\"a\":", 5), -1);
	ck_assert_str_eq(
	    ck_patch_error(p),
	    "patch: \"x.y\".z: malformed JSON after byte 4: parse error: premature EOF "
	    "(near \":\")");
	ck_patch_free(p);

	p = ck_patch_new();
	ck_assert_int_eq(ck_patch_set_int(p, CK_PATH_TOP, 1), -1);
	ck_assert_str_eq(ck_patch_error(p), "patch: empty path");
	ck_patch_free(p);

	p = ck_patch_new();
	ck_assert_int_eq(ck_patch_set_raw(p, CK_PATH_TOP, "[1]", 3), -1);
	ck_assert_str_eq(ck_patch_error(p),
	                 "patch: only an object can be set at the top level, not array");
	ck_patch_free(p);

	p = ck_patch_new();
	ck_assert_int_eq(ck_patch_set_double(p, CK_PATH("d"), 1.0 / 0.0), -1);
	ck_assert_str_eq(ck_patch_error(p), "patch: d: inf is not a JSON number");
	ck_patch_free(p);

	p = ck_patch_new();
	ck_assert_int_eq(ck_patch_set_string(p, CK_PATH("s"), NULL), -1);
	ck_assert_int_eq(ck_patch_set_json(p, CK_PATH("s"), NULL), -1);
	ck_patch_free(p);

	/* Depth: a raw value that would push the body past the bound. */
	ck_sbuf_t b = CK_SBUF_INIT;
	for (int i = 0; i < CK_JSON_MAX_DEPTH - 1; i++)
		ck_sbuf_putc(&b, '[');
	for (int i = 0; i < CK_JSON_MAX_DEPTH - 1; i++)
		ck_sbuf_putc(&b, ']');
	p = ck_patch_new();
	ck_assert_int_eq(ck_patch_set_raw(p, CK_PATH("a"), b.data, b.len), 0); /* 1 + 255 levels */
	ck_assert_int_eq(ck_patch_set_int(p, CK_PATH("a", "b"), 1), -1);
	ck_assert_str_eq(ck_patch_error(p),
	                 "patch: cannot set a.b: a already holds a non-object value");
	ck_patch_free(p);
	p = ck_patch_new();
	ck_assert_int_eq(ck_patch_set_raw(p, CK_PATH("a", "b"), b.data, b.len), -1);
	ck_assert_str_eq(ck_patch_error(p),
	                 "patch: a.b: the body would nest deeper than 256 levels");
	ck_patch_free(p);
	ck_sbuf_free(&b);
}
END_TEST

START_TEST(test_set_json_from_doc)
{
	const char *kept = "{\"b\":[1,2],\"a\":{\"x\":\"\\u00e9\",\"n\\u0000ul\":1}}";
	ck_json_doc_t *d = ck_json_parse(kept, strlen(kept), NULL);
	ck_patch_t *p = ck_patch_new();
	ck_patch_set_json(p, CK_PATH("data"), ck_json_root(d));
	ck_patch_set_json(p, CK_PATH("first"), ck_json_get(ck_json_root(d), CK_PATH("b", "0")));
	ck_json_doc_free(d); /* copied */
	assert_body(p, "{\"data\":{\"b\":[1,2],\"a\":{\"x\":\"\xc3\xa9\",\"n\\u0000ul\":1}},"
	               "\"first\":1}");
	ck_patch_free(p);
}
END_TEST

/* Lists built element by element: order kept, objects and strings, errors sticky. */
START_TEST(test_append)
{
	ck_patch_t *p = ck_patch_new_object(&cm_type, "ns", "x");
	ck_assert_str_eq(ck_patch_object_name(p), "x");
	ck_assert_str_eq(ck_patch_object_ns(p), "ns");
	ck_assert_ptr_eq(ck_patch_object_type(p), &cm_type);
	ck_patch_t *c = ck_patch_new();
	ck_patch_set_string(c, CK_PATH("name"), "a\"b");
	ck_patch_append_string(c, CK_PATH("args"), "-v");
	ck_patch_append_string(c, CK_PATH("args"), "2");
	ck_assert_int_eq(ck_patch_append(p, CK_PATH("spec", "items"), c), 0);
	ck_assert_int_eq(ck_patch_append(p, CK_PATH("spec", "items"), ck_patch_new()), 0);
	ck_patch_set_int(p, CK_PATH("spec", "n"), 1);
	assert_body(p, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
	               "\"x\",\"namespace\":\"ns\"},\"spec\":{\"items\":[{\"name\":\"a\\\"b\","
	               "\"args\":[\"-v\",\"2\"]},{}],\"n\":1}}");
	/* Setting the path again replaces the list whole; appending then goes on. */
	ck_patch_set_raw(p, CK_PATH("spec", "items"), "[1]", 3);
	ck_patch_append_string(p, CK_PATH("spec", "items"), "z");
	char *body = ck_patch_build(p, NULL, NULL);
	ck_assert_ptr_nonnull(strstr(body, "\"items\":[1,\"z\"]"));
	free(body);
	/* Appending to a non-array is an error naming the path. */
	ck_assert_int_eq(ck_patch_append_string(p, CK_PATH("spec", "n"), "q"), -1);
	ck_assert_str_eq(ck_patch_error(p),
	                 "patch: cannot append to spec.n: it holds 1, not an array");
	ck_patch_free(p);

	p = ck_patch_new();
	ck_patch_set_string(p, CK_PATH("o", "k"), "v");
	ck_assert_int_eq(ck_patch_append_string(p, CK_PATH("o"), "q"), -1);
	ck_assert_ptr_nonnull(strstr(ck_patch_error(p), "it holds an object"));
	ck_patch_free(p);

	/* An element's own error becomes the list's (and the element is freed). */
	p = ck_patch_new();
	c = ck_patch_new();
	ck_patch_set_string(c, CK_PATH("bad"), "\xff");
	ck_assert_int_eq(ck_patch_append(p, CK_PATH("l"), c), -1);
	ck_assert_str_eq(ck_patch_error(p), "patch: bad: value is not valid UTF-8");
	ck_assert_int_eq(ck_patch_append(p, CK_PATH("l"), ck_patch_new()), -1);
	ck_assert_int_eq(ck_patch_append(p, CK_PATH("l"), NULL), -1);
	ck_patch_free(p);
	p = ck_patch_new();
	ck_assert_int_eq(ck_patch_append_string(p, CK_PATH_TOP, "x"), -1);
	ck_assert_str_eq(ck_patch_error(p), "patch: empty path");
	ck_assert_ptr_null(ck_patch_object_type(p));
	ck_assert_ptr_null(ck_patch_object_name(p));
	ck_patch_free(p);
}
END_TEST

START_TEST(test_client_refusals)
{
	/* Refused before anything is sent, so no client is needed. */
	ck_patch_t *p = ck_patch_new_object(&cm_type, "default", "cfg");
	ck_result_t res = {0};
	ck_assert_int_eq(ck_client_apply_sync(NULL, p, NULL, false, &res), -1);
	ck_assert_int_eq(res.http_code, 0);
	ck_assert_ptr_nonnull(strstr(res.error, "a field manager is required"));
	ck_result_clear(&res);
	ck_assert_int_eq(ck_client_apply_sync(NULL, p, "", true, &res), -1);
	ck_assert_ptr_nonnull(strstr(res.error, "field manager"));
	ck_result_clear(&res);
	ck_patch_free(p);

	p = ck_patch_new();
	ck_assert_int_eq(ck_client_apply_sync(NULL, p, "mgr", false, &res), -1);
	ck_assert_ptr_nonnull(strstr(res.error, "not made by ck_patch_new_object"));
	ck_result_clear(&res);
	ck_assert_int_eq(ck_client_create_body_sync(NULL, p, NULL, &res), -1);
	ck_result_clear(&res);
	ck_patch_set_null(p, CK_PATH_TOP); /* an error: empty path */
	ck_assert_int_eq(
	    ck_client_merge_patch_sync(NULL, &cm_type, "default", "cfg", p, NULL, &res), -1);
	ck_assert_str_eq(res.error, "merge patch: patch: empty path (not sent)");
	ck_result_clear(&res);
	ck_assert_int_eq(
	    ck_client_status_merge_patch_sync(NULL, &cm_type, "default", "cfg", p, NULL, &res), -1);
	ck_assert_str_eq(res.error, "status merge patch: patch: empty path (not sent)");
	ck_result_clear(&res);
	ck_assert_int_eq(ck_client_status_apply_sync(NULL, p, "mgr", false, &res), -1);
	ck_assert_ptr_nonnull(strstr(res.error, "status server-side apply: the body was not made"));
	ck_result_clear(&res);
	ck_patch_free(p);

	p = ck_patch_new_object(&cm_type, "default", NULL);
	ck_assert_int_eq(ck_client_apply_sync(NULL, p, "mgr", false, &res), -1);
	ck_assert_ptr_nonnull(strstr(res.error, "no metadata.name"));
	ck_result_clear(&res);
	ck_assert_int_eq(ck_client_update_body_sync(NULL, p, NULL, &res), -1);
	ck_result_clear(&res);
	ck_patch_free(p);

	p = ck_patch_new_object(&cm_type, NULL, "cfg");
	ck_assert_int_eq(ck_client_apply_sync(NULL, p, "mgr", false, &res), -1);
	ck_assert_ptr_nonnull(strstr(res.error, "no metadata.namespace"));
	ck_result_clear(&res);
	ck_patch_free(p);
}
END_TEST

Suite *suite_patch(void)
{
	Suite *s = suite_create("patch");
	TCase *tc = tcase_create("patch");
	tcase_add_test(tc, test_merge_annotations);
	tcase_add_test(tc, test_replace_and_prefixes);
	tcase_add_test(tc, test_apply_body);
	tcase_add_test(tc, test_escaping);
	tcase_add_test(tc, test_determinism);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_set_json_from_doc);
	tcase_add_test(tc, test_client_refusals);
	tcase_add_test(tc, test_append);
	suite_add_tcase(s, tc);
	return s;
}
