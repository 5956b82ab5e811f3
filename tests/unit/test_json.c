/*
 * json: reading inside kept values: paths with dotted keys, document order, every
 * type and its mismatches, malformed input with offsets, the depth bound, and a
 * ConfigMap decoded by ck_dec_object then read back.
 */
#include <ckube/base.h>
#include <ckube/decode.h>
#include <ckube/json.h>
#include <ckube/obj.h>

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static ck_json_doc_t *parse(const char *s)
{
	char *err = NULL;
	ck_json_doc_t *d = ck_json_parse(s, strlen(s), &err);
	ck_assert_msg(d != NULL, "parse %s: %s", s, err ? err : "?");
	return d;
}

/* Returns the error of a parse that must fail (free with free()). */
static char *parse_err(const char *s, size_t len)
{
	char *err = NULL;
	ck_json_doc_t *d = ck_json_parse(s, len, &err);
	ck_assert_ptr_null(d);
	ck_assert_ptr_nonnull(err);
	return err;
}

START_TEST(test_paths)
{
	ck_json_doc_t *d = parse("{\"metadata\":{\"annotations\":{\"example.com/x\":\"1\","
	                         "\"a.b\":{\"c\":\"nested\"}}},\"list\":[10,{\"k\":\"v\"}]}");
	const ck_json_t *r = ck_json_root(d);
	ck_assert_str_eq(
	    ck_json_str(ck_json_get(r, CK_PATH("metadata", "annotations", "example.com/x"))), "1");
	ck_assert_str_eq(
	    ck_json_str(ck_json_get(r, CK_PATH("metadata", "annotations", "a.b", "c"))), "nested");
	/* A dotted segment is one key, never split. */
	ck_assert_ptr_null(ck_json_get(r, CK_PATH("metadata", "annotations", "a", "b")));
	ck_assert_str_eq(ck_json_str(ck_json_get(r, CK_PATH("list", "1", "k"))), "v");
	int64_t i = 0;
	ck_assert_int_eq(ck_json_get_int64(ck_json_get(r, CK_PATH("list", "0")), &i), CK_JSON_OK);
	ck_assert_int_eq(i, 10);
	/* Indexes: canonical decimal only, in range only. */
	ck_assert_ptr_null(ck_json_get(r, CK_PATH("list", "2")));
	ck_assert_ptr_null(ck_json_get(r, CK_PATH("list", "01")));
	ck_assert_ptr_null(ck_json_get(r, CK_PATH("list", "-1")));
	ck_assert_ptr_null(ck_json_get(r, CK_PATH("list", "")));
	ck_assert_ptr_null(ck_json_get(r, CK_PATH("list", "99999999999999999999999")));
	/* Through a scalar, or a missing key: absent, and absent chains. */
	ck_assert_ptr_null(ck_json_get(r, CK_PATH("list", "0", "x")));
	ck_assert_ptr_null(ck_json_get(ck_json_get(r, CK_PATH("nope")), CK_PATH("x")));
	ck_assert_ptr_eq(ck_json_get(r, CK_PATH("")), NULL);
	const char *const empty[] = {NULL};
	ck_assert_ptr_eq(ck_json_get(r, empty), r);
	ck_assert_ptr_eq(ck_json_get(r, NULL), r);
	/* Explicit count, no terminator needed. */
	const char *segs[] = {"metadata", "annotations", "example.com/x"};
	ck_assert_str_eq(ck_json_str(ck_json_getn(r, segs, 3)), "1");
	ck_assert_int_eq(ck_json_type(ck_json_getn(r, segs, 2)), CK_JSON_OBJECT);
	ck_assert_ptr_eq(ck_json_getn(r, segs, 0), r);
	ck_json_doc_free(d);
}
END_TEST

START_TEST(test_iteration_order)
{
	ck_json_doc_t *d = parse("{\"z\":1,\"a\":2,\"m\":3,\"a\":4,\"k\\u0000y\":5}");
	const ck_json_t *r = ck_json_root(d);
	ck_assert_uint_eq(ck_json_len(r), 5);
	const char *want[] = {"z", "a", "m", "a"};
	for (size_t i = 0; i < 4; i++)
		ck_assert_str_eq(ck_json_key(r, i, NULL), want[i]);
	size_t kl = 0;
	const char *k = ck_json_key(r, 4, &kl);
	ck_assert_uint_eq(kl, 3);
	ck_assert_mem_eq(k, "k\0y", 3);
	ck_assert_ptr_nonnull(ck_json_member(r, "k\0y", 3));
	ck_assert_ptr_null(ck_json_key(r, 5, NULL));
	ck_assert_ptr_null(ck_json_at(r, 5));
	/* The last of a repeated key wins, as in Go. */
	int64_t v = 0;
	ck_assert_int_eq(ck_json_get_int64(ck_json_get(r, CK_PATH("a")), &v), CK_JSON_OK);
	ck_assert_int_eq(v, 4);
	ck_json_doc_free(d);

	d = parse("[\"c\",\"b\",[],{},\"a\"]");
	r = ck_json_root(d);
	ck_assert_uint_eq(ck_json_len(r), 5);
	ck_assert_str_eq(ck_json_str(ck_json_at(r, 0)), "c");
	ck_assert_str_eq(ck_json_str(ck_json_at(r, 4)), "a");
	ck_assert_int_eq(ck_json_type(ck_json_at(r, 2)), CK_JSON_ARRAY);
	ck_assert_uint_eq(ck_json_len(ck_json_at(r, 2)), 0);
	ck_assert_int_eq(ck_json_type(ck_json_at(r, 3)), CK_JSON_OBJECT);
	ck_assert_ptr_null(ck_json_key(r, 0, NULL)); /* arrays have no keys */
	ck_assert_uint_eq(ck_json_len(ck_json_at(r, 0)), 0);
	ck_json_doc_free(d);
}
END_TEST

START_TEST(test_types)
{
	ck_json_doc_t *d = parse(" {\"s\":\"h\\u00e9\\n\\\"\",\"z\":\"a\\u0000b\",\"i\":-42,"
	                         "\"max\":9223372036854775807,\"min\":-9223372036854775808,"
	                         "\"big\":9223372036854775808,\"f\":1.5,\"e\":1e3,\"one\":1.0,"
	                         "\"huge\":1e999,\"t\":true,\"n\":null,\"a\":[],\"o\":{}} ");
	const ck_json_t *r = ck_json_root(d);
	const char *s = NULL;
	size_t l = 0;
	ck_assert_int_eq(ck_json_get_string(ck_json_get(r, CK_PATH("s")), &s, &l), CK_JSON_OK);
	ck_assert_str_eq(s, "h\xc3\xa9\n\"");
	ck_assert_uint_eq(l, 5);
	ck_assert_int_eq(ck_json_get_string(ck_json_get(r, CK_PATH("z")), &s, &l), CK_JSON_OK);
	ck_assert_uint_eq(l, 3);
	ck_assert_mem_eq(s, "a\0b", 4);

	int64_t i = 7;
	ck_assert_int_eq(ck_json_get_int64(ck_json_get(r, CK_PATH("i")), &i), CK_JSON_OK);
	ck_assert_int_eq(i, -42);
	ck_assert_int_eq(ck_json_get_int64(ck_json_get(r, CK_PATH("max")), &i), CK_JSON_OK);
	ck_assert(i == INT64_MAX);
	ck_assert_int_eq(ck_json_get_int64(ck_json_get(r, CK_PATH("min")), &i), CK_JSON_OK);
	ck_assert(i == INT64_MIN);
	i = 7;
	ck_assert_int_eq(ck_json_get_int64(ck_json_get(r, CK_PATH("big")), &i), CK_JSON_ERANGE);
	ck_assert_int_eq(ck_json_get_int64(ck_json_get(r, CK_PATH("f")), &i), CK_JSON_ETYPE);
	ck_assert_int_eq(ck_json_get_int64(ck_json_get(r, CK_PATH("e")), &i), CK_JSON_ETYPE);
	ck_assert_int_eq(ck_json_get_int64(ck_json_get(r, CK_PATH("one")), &i), CK_JSON_ETYPE);
	ck_assert_int_eq(ck_json_get_int64(ck_json_get(r, CK_PATH("s")), &i), CK_JSON_ETYPE);
	ck_assert_int_eq(ck_json_get_int64(ck_json_get(r, CK_PATH("nope")), &i), CK_JSON_EABSENT);
	ck_assert_int_eq(i, 7); /* untouched on failure */
	/* The shorthand: the integer, else the default. */
	ck_assert_int_eq(ck_json_int(ck_json_get(r, CK_PATH("i")), 7), -42);
	ck_assert(ck_json_int(ck_json_get(r, CK_PATH("min")), 7) == INT64_MIN);
	ck_assert_int_eq(ck_json_int(ck_json_get(r, CK_PATH("big")), 7), 7);
	ck_assert_int_eq(ck_json_int(ck_json_get(r, CK_PATH("one")), 7), 7);
	ck_assert_int_eq(ck_json_int(ck_json_get(r, CK_PATH("s")), 7), 7);
	ck_assert_int_eq(ck_json_int(NULL, -1), -1);

	double f = 0;
	ck_assert_int_eq(ck_json_get_double(ck_json_get(r, CK_PATH("f")), &f), CK_JSON_OK);
	ck_assert(f == 1.5);
	ck_assert_int_eq(ck_json_get_double(ck_json_get(r, CK_PATH("e")), &f), CK_JSON_OK);
	ck_assert(f == 1000.0);
	ck_assert_int_eq(ck_json_get_double(ck_json_get(r, CK_PATH("i")), &f), CK_JSON_OK);
	ck_assert(f == -42.0);
	ck_assert_int_eq(ck_json_get_double(ck_json_get(r, CK_PATH("huge")), &f), CK_JSON_ERANGE);
	ck_assert_int_eq(ck_json_get_double(ck_json_get(r, CK_PATH("t")), &f), CK_JSON_ETYPE);
	const char *nt = NULL;
	ck_assert_int_eq(ck_json_get_number_text(ck_json_get(r, CK_PATH("big")), &nt), CK_JSON_OK);
	ck_assert_str_eq(nt, "9223372036854775808");
	ck_assert_int_eq(ck_json_get_number_text(ck_json_get(r, CK_PATH("s")), &nt), CK_JSON_ETYPE);

	bool b = false;
	ck_assert_int_eq(ck_json_get_bool(ck_json_get(r, CK_PATH("t")), &b), CK_JSON_OK);
	ck_assert(b);
	ck_assert_int_eq(ck_json_get_bool(ck_json_get(r, CK_PATH("n")), &b), CK_JSON_ETYPE);
	ck_assert_int_eq(ck_json_get_bool(NULL, &b), CK_JSON_EABSENT);
	ck_assert(ck_json_is_null(ck_json_get(r, CK_PATH("n"))));
	ck_assert(!ck_json_is_null(ck_json_get(r, CK_PATH("nope"))));
	ck_assert(!ck_json_is_null(ck_json_get(r, CK_PATH("t"))));
	ck_assert_int_eq(ck_json_get_string(ck_json_get(r, CK_PATH("i")), &s, NULL), CK_JSON_ETYPE);
	ck_assert_int_eq(ck_json_get_string(ck_json_get(r, CK_PATH("o")), &s, NULL), CK_JSON_ETYPE);
	ck_assert_ptr_null(ck_json_str(ck_json_get(r, CK_PATH("a"))));

	ck_assert_int_eq(ck_json_type(ck_json_get(r, CK_PATH("n"))), CK_JSON_NULL);
	ck_assert_int_eq(ck_json_type(ck_json_get(r, CK_PATH("t"))), CK_JSON_BOOL);
	ck_assert_int_eq(ck_json_type(ck_json_get(r, CK_PATH("i"))), CK_JSON_NUMBER);
	ck_assert_int_eq(ck_json_type(ck_json_get(r, CK_PATH("s"))), CK_JSON_STRING);
	ck_assert_int_eq(ck_json_type(ck_json_get(r, CK_PATH("a"))), CK_JSON_ARRAY);
	ck_assert_int_eq(ck_json_type(ck_json_get(r, CK_PATH("o"))), CK_JSON_OBJECT);
	ck_assert_int_eq(ck_json_type(NULL), CK_JSON_ABSENT);
	ck_assert_str_eq(ck_json_type_name(CK_JSON_OBJECT), "object");
	ck_assert_str_eq(ck_json_type_name(CK_JSON_ABSENT), "absent");

	/* Written back in kept form: compact, order kept, numbers verbatim, one escaping. */
	char *t = ck_json_to_text(r);
	ck_assert_str_eq(t, "{\"s\":\"h\xc3\xa9\\n\\\"\",\"z\":\"a\\u0000b\",\"i\":-42,"
	                    "\"max\":9223372036854775807,\"min\":-9223372036854775808,"
	                    "\"big\":9223372036854775808,\"f\":1.5,\"e\":1e3,\"one\":1.0,"
	                    "\"huge\":1e999,\"t\":true,\"n\":null,\"a\":[],\"o\":{}}");
	free(t);
	ck_assert_ptr_null(ck_json_to_text(NULL));
	ck_json_doc_free(d);

	/* Top-level scalars. */
	d = parse(" \"x\" ");
	ck_assert_str_eq(ck_json_str(ck_json_root(d)), "x");
	ck_json_doc_free(d);
	d = parse("12");
	ck_assert_int_eq(ck_json_get_int64(ck_json_root(d), &i), CK_JSON_OK);
	ck_assert_int_eq(i, 12);
	ck_json_doc_free(d);
	ck_json_doc_free(NULL);
	ck_assert_ptr_null(ck_json_root(NULL));
}
END_TEST

START_TEST(test_malformed)
{
	static const struct {
		const char *in;
		const char *want; /* prefix of the message */
	} cases[] = {
	    {"{\"a\":1,}", "malformed JSON after byte 6: parse error: invalid object key"},
	    {"[1,2", "malformed JSON after byte 4: parse error: premature EOF"},
	    {"{\"a\" 1}", "malformed JSON after byte 4: parse error: object key and value"},
	    {"", "malformed JSON after byte 0: parse error: premature EOF"},
	    {"   ", "malformed JSON after byte 0: parse error: premature EOF"},
	    {"nul", "malformed JSON after byte 0: lexical error"},
	    {"\"abc", "malformed JSON after byte 0: parse error: premature EOF"},
	    {"[1] x", "malformed JSON after byte 3: parse error: trailing garbage"},
	    {"{\"a\":[1.5e]}", "malformed JSON after byte 6: lexical error: malformed number"},
	    {"{\"a\":\"\xff\"}",
	     "malformed JSON after byte 4: lexical error: invalid bytes in UTF8"},
	    {"[1] [2]", "malformed JSON after byte 3: parse error: trailing garbage"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *err = parse_err(cases[i].in, strlen(cases[i].in));
		ck_assert_msg(strncmp(err, cases[i].want, strlen(cases[i].want)) == 0,
		              "%s: got %s, want %s", cases[i].in, err, cases[i].want);
		free(err);
	}
	/* An excerpt of where it went wrong. */
	char *err = parse_err("{\"a\":1,}", 8);
	ck_assert_ptr_nonnull(strstr(err, "(near \",}\")"));
	free(err);
	/* A raw NUL is an error; the length, not a terminator, bounds the input. */
	err = parse_err("[1,\0 2]", 7);
	ck_assert_ptr_nonnull(strstr(err, "after byte 2"));
	free(err);
	ck_json_doc_t *d = ck_json_parse("[1]garbage", 3, NULL);
	ck_assert_ptr_nonnull(d);
	ck_json_doc_free(d);
	/* err may be NULL. */
	ck_assert_ptr_null(ck_json_parse("{", 1, NULL));
	ck_assert_ptr_null(ck_json_parse(NULL, 0, NULL));
}
END_TEST

static char *nested(size_t n, char open, char close)
{
	char *s = malloc(2 * n + 1);
	memset(s, open, n);
	memset(s + n, close, n);
	s[2 * n] = '\0';
	return s;
}

START_TEST(test_depth)
{
	char *s = nested(CK_JSON_MAX_DEPTH, '[', ']');
	ck_json_doc_t *d = parse(s);
	const ck_json_t *v = ck_json_root(d);
	for (int i = 1; i < CK_JSON_MAX_DEPTH; i++)
		v = ck_json_at(v, 0);
	ck_assert_int_eq(ck_json_type(v), CK_JSON_ARRAY);
	ck_assert_uint_eq(ck_json_len(v), 0);
	char *t = ck_json_to_text(ck_json_root(d));
	ck_assert_str_eq(t, s);
	free(t);
	ck_json_doc_free(d);
	free(s);

	s = nested(CK_JSON_MAX_DEPTH + 1, '[', ']');
	char *err = parse_err(s, strlen(s));
	ck_assert_str_eq(err, "JSON nested deeper than 256 levels at byte 256");
	free(err);
	free(s);
	/* Far deeper, and objects: still refused at the same place, no stack growth. */
	size_t n = 100000;
	ck_sbuf_t b = CK_SBUF_INIT;
	for (size_t i = 0; i < n; i++)
		ck_sbuf_puts(&b, "{\"a\":");
	err = parse_err(b.data, b.len);
	ck_assert_str_eq(err, "JSON nested deeper than 256 levels at byte 1280");
	free(err);
	ck_sbuf_free(&b);
}
END_TEST

static const char *const cm_fields[] = {"data", "binaryData", "immutable"};
static const ck_type_t cm_type = {"", "v1", "ConfigMap", "configmaps", true, cm_fields, 3, false};

START_TEST(test_configmap)
{
	const char *body =
	    "{\n  \"kind\": \"ConfigMap\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {\n"
	    "    \"name\": \"game-config\",\n    \"namespace\": \"default\",\n"
	    "    \"uid\": \"0e4f3f5c-1\",\n    \"resourceVersion\": \"812\",\n"
	    "    \"managedFields\": [{\"manager\": \"kubectl\", \"fieldsV1\": {\"f:data\": {}}}]\n"
	    "  },\n  \"data\": {\n    \"game.properties\": \"enemies=aliens\\nlives=3\\n\",\n"
	    "    \"ui.properties\": \"color.good=purple\\u0021\",\n"
	    "    \"example.com/owner\": \"team-a\",\n    \"empty\": \"\"\n  },\n"
	    "  \"immutable\": true\n}\n";
	char *err = NULL;
	ck_obj_t *obj = ck_dec_object(&cm_type, body, strlen(body), &err);
	ck_assert_msg(obj != NULL, "%s", err ? err : "?");
	const ck_val_t *kept = ck_obj_field(obj, 0);
	ck_assert_int_eq(kept->type, CK_VAL_JSON);
	/* The kept form: compact, server order, re-escaped ("\u0021" is "!"). */
	ck_assert_str_eq(kept->u.s, "{\"game.properties\":\"enemies=aliens\\nlives=3\\n\","
	                            "\"ui.properties\":\"color.good=purple!\","
	                            "\"example.com/owner\":\"team-a\",\"empty\":\"\"}");

	ck_json_doc_t *d = ck_json_parse_field_path(obj, "data", &err);
	ck_assert_msg(d != NULL, "%s", err ? err : "?");
	const ck_json_t *data = ck_json_root(d);
	ck_assert_uint_eq(ck_json_len(data), 4);
	ck_assert_str_eq(ck_json_key(data, 0, NULL), "game.properties");
	ck_assert_str_eq(ck_json_key(data, 3, NULL), "empty");
	ck_assert_str_eq(ck_json_str(ck_json_get(data, CK_PATH("game.properties"))),
	                 "enemies=aliens\nlives=3\n");
	ck_assert_str_eq(ck_json_str(ck_json_get(data, CK_PATH("example.com/owner"))), "team-a");
	/* Writing the parsed value back gives the kept text byte for byte. */
	char *t = ck_json_to_text(data);
	ck_assert_str_eq(t, kept->u.s);
	free(t);
	ck_json_doc_free(d);

	/* A scalar kept field reads the same way. */
	d = ck_json_parse_field(obj, 2, &err);
	ck_assert_ptr_nonnull(d);
	bool b = false;
	ck_assert_int_eq(ck_json_get_bool(ck_json_root(d), &b), CK_JSON_OK);
	ck_assert(b);
	ck_json_doc_free(d);

	/* Absent and unknown fields say so. */
	ck_assert_ptr_null(ck_json_parse_field(obj, 1, &err));
	ck_assert_str_eq(err, "ConfigMap default/game-config: field binaryData is absent");
	free(err);
	err = NULL;
	ck_assert_ptr_null(ck_json_parse_field(obj, 9, &err));
	ck_assert_ptr_nonnull(strstr(err, "no kept field 9"));
	free(err);
	err = NULL;
	ck_assert_ptr_null(ck_json_parse_field_path(obj, "spec", &err));
	ck_assert_str_eq(err, "ConfigMap: spec is not a kept field");
	free(err);
	ck_obj_unref(obj);
}
END_TEST

START_TEST(test_parse_val)
{
	ck_val_t v = {.type = CK_VAL_INT, .u.i = -5};
	ck_json_doc_t *d = ck_json_parse_val(&v, NULL);
	int64_t i = 0;
	ck_assert_int_eq(ck_json_get_int64(ck_json_root(d), &i), CK_JSON_OK);
	ck_assert_int_eq(i, -5);
	ck_json_doc_free(d);

	v = (ck_val_t){.type = CK_VAL_DOUBLE, .u.d = 2.0};
	d = ck_json_parse_val(&v, NULL);
	char *t = ck_json_to_text(ck_json_root(d));
	ck_assert_str_eq(t, "2.0"); /* still reads as a double, not an integer */
	free(t);
	ck_assert_int_eq(ck_json_get_int64(ck_json_root(d), &i), CK_JSON_ETYPE);
	ck_json_doc_free(d);

	v = (ck_val_t){.type = CK_VAL_STRING, .u.s = "x\"y"};
	d = ck_json_parse_val(&v, NULL);
	t = ck_json_to_text(ck_json_root(d));
	ck_assert_str_eq(t, "\"x\\\"y\"");
	free(t);
	ck_json_doc_free(d);

	v = (ck_val_t){.type = CK_VAL_NULL};
	d = ck_json_parse_val(&v, NULL);
	ck_assert(ck_json_is_null(ck_json_root(d)));
	ck_json_doc_free(d);

	v = (ck_val_t){.type = CK_VAL_JSON, .u.s = "{bad"};
	char *err = NULL;
	ck_assert_ptr_null(ck_json_parse_val(&v, &err));
	ck_assert_ptr_nonnull(strstr(err, "after byte 1"));
	free(err);
	err = NULL;
	ck_assert_ptr_null(ck_json_parse_val(NULL, &err));
	ck_assert_str_eq(err, "value is absent");
	free(err);
}
END_TEST

/* merge(target, patch) must give want (compared with ck_json_equal), and merging
 * patch again must change nothing (RFC 7386 merges are idempotent). */
static void check_merge(const char *target, const char *patch, const char *want)
{
	ck_json_doc_t *t = target ? parse(target) : NULL, *p = parse(patch), *w = parse(want);
	ck_sbuf_t out = {0};
	ck_assert_int_eq(ck_json_merge_patch(ck_json_root(t), ck_json_root(p), &out), 0);
	ck_json_doc_t *got = parse(ck_sbuf_cstr(&out));
	ck_assert_msg(ck_json_equal(ck_json_root(got), ck_json_root(w)),
	              "merge %s into %s: got %s, want %s", patch, target ? target : "(absent)",
	              ck_sbuf_cstr(&out), want);
	ck_sbuf_t again = {0};
	ck_json_merge_patch(ck_json_root(got), ck_json_root(p), &again);
	ck_json_doc_t *twice = parse(ck_sbuf_cstr(&again));
	ck_assert_msg(ck_json_equal(ck_json_root(twice), ck_json_root(got)),
	              "merging %s twice: %s, then %s", patch, ck_sbuf_cstr(&out),
	              ck_sbuf_cstr(&again));
	ck_json_doc_free(twice);
	ck_sbuf_free(&again);
	ck_sbuf_free(&out);
	ck_json_doc_free(got);
	ck_json_doc_free(t);
	ck_json_doc_free(p);
	ck_json_doc_free(w);
}

START_TEST(test_merge_patch)
{
	/* The cases of RFC 7386, appendix A, written out here. */
	check_merge("{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
	check_merge("{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}");
	check_merge("{\"a\":\"b\"}", "{\"a\":null}", "{}");
	check_merge("{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}");
	check_merge("{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
	check_merge("{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}");
	check_merge("{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}",
	            "{\"a\":{\"b\":\"d\"}}");
	check_merge("{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}");
	check_merge("[\"a\",\"b\"]", "[\"c\",\"d\"]", "[\"c\",\"d\"]");
	check_merge("{\"a\":\"b\"}", "[\"c\"]", "[\"c\"]");
	check_merge("{\"a\":\"foo\"}", "null", "null");
	check_merge("{\"a\":\"foo\"}", "\"bar\"", "\"bar\"");
	check_merge("{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}");
	check_merge("[1,2]", "{\"a\":\"b\",\"c\":null}", "{\"a\":\"b\"}");
	check_merge("{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}");
	check_merge(NULL, "{\"a\":{\"b\":null,\"c\":1}}", "{\"a\":{\"c\":1}}");
	/* What create-or-update relies on: a list is replaced whole, so a port someone
	 * else added goes; the fields the patch does not name stay. */
	check_merge(
	    "{\"spec\":{\"clusterIP\":\"10.0.0.1\",\"ports\":[{\"name\":\"http\",\"port\":80},"
	    "{\"name\":\"http\",\"port\":8080}]}}",
	    "{\"spec\":{\"ports\":[{\"name\":\"http\",\"port\":80}]}}",
	    "{\"spec\":{\"clusterIP\":\"10.0.0.1\",\"ports\":[{\"name\":\"http\",\"port\":80}]}}");
	/* Nothing changes. */
	check_merge("{\"spec\":{\"replicas\":1,\"x\":[1,2]},\"m\":2}",
	            "{\"spec\":{\"replicas\":1.0}}",
	            "{\"spec\":{\"replicas\":1,\"x\":[1,2]},\"m\":2}");
	check_merge("{\"a\":1}", "{\"b\":null}", "{\"a\":1}");
	/* A repeated key: the last one counts, and the output holds it once. */
	ck_json_doc_t *t = parse("{\"a\":1,\"a\":2}"), *p = parse("{\"b\":3}");
	ck_sbuf_t out = {0};
	ck_json_merge_patch(ck_json_root(t), ck_json_root(p), &out);
	ck_assert_str_eq(ck_sbuf_cstr(&out), "{\"a\":2,\"b\":3}");
	ck_assert_int_eq(ck_json_merge_patch(ck_json_root(t), NULL, &out), -1);
	ck_sbuf_free(&out);
	ck_json_doc_free(t);
	ck_json_doc_free(p);
}
END_TEST

START_TEST(test_contains)
{
	/* A Deployment's container as the server stores it, and as a controller wants it. */
	const char *live =
	    "{\"spec\":{\"replicas\":2,\"template\":{\"spec\":{\"containers\":[{"
	    "\"name\":\"web\",\"image\":\"nginx\",\"ports\":[{\"name\":\"http\","
	    "\"containerPort\":8080,\"protocol\":\"TCP\"}],\"resources\":{},"
	    "\"imagePullPolicy\":\"IfNotPresent\"}],\"dnsPolicy\":\"ClusterFirst\"}}},"
	    "\"status\":{\"replicas\":2}}";
	static const char *const in[] = {
	    "{}",
	    "{\"spec\":{\"replicas\":2.0}}",
	    "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"web\",\"image\":"
	    "\"nginx\",\"ports\":[{\"containerPort\":8080}]}]}}}}",
	    "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"resources\":{}}]}}}}",
	    "{\"metadata\":null,\"spec\":{\"paused\":null}}",
	};
	static const char *const out[] = {
	    "{\"spec\":{\"replicas\":3}}",
	    /* a list of another length: an entry added or removed is drift */
	    "{\"spec\":{\"template\":{\"spec\":{\"containers\":[]}}}}",
	    "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"web\"},"
	    "{\"name\":\"web\"}]}}}}",
	    "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"image\":\"nginx:2\"}]}}}}",
	    "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"env\":[]}]}}}}",
	    "{\"status\":null}",
	    "{\"spec\":{\"replicas\":\"2\"}}",
	    "{\"spec\":[]}",
	    "{\"spec\":{\"replicas\":{}}}",
	    "[]",
	    "null",
	};
	ck_json_doc_t *w = parse(live);
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		ck_json_doc_t *p = parse(in[i]);
		ck_assert_msg(ck_json_contains(ck_json_root(w), ck_json_root(p)), "should hold %s",
		              in[i]);
		ck_json_doc_free(p);
	}
	for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++) {
		ck_json_doc_t *p = parse(out[i]);
		ck_assert_msg(!ck_json_contains(ck_json_root(w), ck_json_root(p)),
		              "should not hold %s", out[i]);
		ck_json_doc_free(p);
	}
	/* Scalars and arrays at the top, absent nodes. */
	ck_json_doc_t *a = parse("[1,{\"x\":1,\"y\":2}]"), *b = parse("[1.0,{\"y\":2}]");
	ck_assert(ck_json_contains(ck_json_root(a), ck_json_root(b)));
	ck_assert(!ck_json_contains(ck_json_root(b), ck_json_root(a)));
	ck_assert(ck_json_contains(NULL, NULL));
	ck_assert(!ck_json_contains(NULL, ck_json_root(b)));
	ck_assert(!ck_json_contains(ck_json_root(a), NULL));
	ck_json_doc_free(a);
	ck_json_doc_free(b);
	ck_json_doc_free(w);
}
END_TEST

START_TEST(test_equal)
{
	static const char *const same[][2] = {
	    {"{\"a\":1,\"b\":[true,null,\"x\"]}", "{\"b\":[true,null,\"x\"],\"a\":1}"},
	    {"1", "1.0"},
	    {"100", "1e2"},
	    {"{\"a\":1,\"a\":2}", "{\"a\":2}"},
	    {"\"\\u00e9\"", "\"\xc3\xa9\""},
	};
	static const char *const differ[][2] = {
	    {"{\"a\":1}", "{\"a\":1,\"b\":1}"},
	    {"[1,2]", "[2,1]"},
	    {"1", "\"1\""},
	    {"null", "false"},
	    {"{\"a\":null}", "{}"},
	    {"\"a\\u0000b\"", "\"a\""},
	    {"9007199254740993", "9007199254740992"},
	};
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		ck_json_doc_t *a = parse(same[i][0]), *b = parse(same[i][1]);
		ck_assert_msg(ck_json_equal(ck_json_root(a), ck_json_root(b)), "%s == %s",
		              same[i][0], same[i][1]);
		ck_json_doc_free(a);
		ck_json_doc_free(b);
	}
	for (size_t i = 0; i < sizeof(differ) / sizeof(differ[0]); i++) {
		ck_json_doc_t *a = parse(differ[i][0]), *b = parse(differ[i][1]);
		ck_assert_msg(!ck_json_equal(ck_json_root(a), ck_json_root(b)), "%s != %s",
		              differ[i][0], differ[i][1]);
		ck_assert_msg(!ck_json_equal(ck_json_root(b), ck_json_root(a)), "%s != %s",
		              differ[i][1], differ[i][0]);
		ck_json_doc_free(a);
		ck_json_doc_free(b);
	}
	ck_assert(ck_json_equal(NULL, NULL));
}
END_TEST

Suite *suite_json(void)
{
	Suite *s = suite_create("json");
	TCase *tc = tcase_create("json");
	tcase_add_test(tc, test_paths);
	tcase_add_test(tc, test_iteration_order);
	tcase_add_test(tc, test_types);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_depth);
	tcase_add_test(tc, test_configmap);
	tcase_add_test(tc, test_parse_val);
	tcase_add_test(tc, test_merge_patch);
	tcase_add_test(tc, test_equal);
	tcase_add_test(tc, test_contains);
	suite_add_tcase(s, tc);
	return s;
}
