/*
 * Shard selectors (KEP-5866): the FNV-1a 64 vectors, namespace hashes, range edges
 * (start inclusive, end exclusive, 2^64), parse/format round trips and malformed
 * selectors refused with a message naming the range, the column and the fault.
 * That the hash and the ranges agree with kube-apiserver's is shown against the
 * real server in tests/envtest/shard_test.c.
 */
#include <ckube/base.h>
#include <ckube/obj.h>
#include <ckube/shard.h>

#include <check.h>
#include <stdlib.h>
#include <string.h>

static const ck_type_t cm = {"", "v1", "ConfigMap", "configmaps", true, NULL, 0, false};

static uint64_t h(const char *s)
{
	return ck_shard_hash(s, strlen(s));
}

START_TEST(test_fnv_vectors)
{
	/* The FNV-1a 64 reference vectors (Fowler/Noll/Vo's test suite). */
	ck_assert_uint_eq(h(""), 0xcbf29ce484222325ULL);
	ck_assert_uint_eq(h("a"), 0xaf63dc4c8601ec8cULL);
	ck_assert_uint_eq(h("foobar"), 0x85944171f73967e8ULL);
	/* Namespaces: the bytes of the name, nothing else. */
	ck_assert_uint_eq(h("default"), 0xebada5168620c5feULL);
	ck_assert_uint_eq(h("kube-system"), 0xdf65c7bc1d82b35eULL);
	ck_assert_uint_eq(h("team-a"), 0xde90a3717d1252d6ULL);
	ck_assert_uint_eq(h("team-b"), 0xde90a2717d125123ULL);
	ck_assert_uint_eq(h("app-1"), 0xf67432a45808f146ULL);
	/* Length, not a terminator: an embedded NUL counts. */
	ck_assert_uint_ne(ck_shard_hash("a\0", 2), h("a"));
}
END_TEST

static ck_obj_t *obj(const char *ns, const char *uid)
{
	ck_obj_builder_t *b = ck_obj_builder_new(&cm);
	ck_obj_builder_set_meta(b, "namespace", ns, strlen(ns));
	ck_obj_builder_set_meta(b, "name", "x", 1);
	ck_obj_builder_set_meta(b, "uid", uid, strlen(uid));
	ck_obj_t *o = ck_obj_builder_finish(b);
	ck_obj_builder_free(b);
	return o;
}

START_TEST(test_range_edges)
{
	uint64_t d = h("default");
	char *err = NULL;
	/* [d, d+1) holds d only. */
	ck_shard_selector_t *s =
	    ck_shard_selector_new(CK_SHARD_NAMESPACE, &(ck_shard_range_t){d, d + 1}, 1, &err);
	ck_assert_ptr_nonnull(s);
	ck_assert(ck_shard_selector_match_hash(s, d));
	ck_assert(!ck_shard_selector_match_hash(s, d - 1));
	ck_assert(!ck_shard_selector_match_hash(s, d + 1));
	ck_obj_t *in = obj("default", "u1"), *out = obj("kube-system", "u1");
	ck_assert(ck_shard_selector_match(s, in));
	ck_assert(!ck_shard_selector_match(s, out));
	ck_shard_selector_free(s);
	/* [x, d): end exclusive. */
	s = ck_shard_selector_new(CK_SHARD_NAMESPACE, &(ck_shard_range_t){0, d}, 1, &err);
	ck_assert(!ck_shard_selector_match(s, in));
	ck_assert(ck_shard_selector_match_hash(s, d - 1));
	ck_assert(ck_shard_selector_match_hash(s, 0));
	ck_shard_selector_free(s);
	/* The full space [0, 2^64) holds every hash, UINT64_MAX included. */
	s = ck_shard_selector_parse(
	    "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')", &err);
	ck_assert_msg(s, "%s", err ? err : "");
	ck_assert(ck_shard_selector_match_hash(s, 0));
	ck_assert(ck_shard_selector_match_hash(s, UINT64_MAX));
	ck_assert_int_eq(ck_shard_selector_field(s), CK_SHARD_UID);
	ck_assert(ck_shard_selector_match(s, in));
	ck_shard_selector_free(s);
	/* Last range up to 2^64: the top hash is in, one below the start is out. */
	s = ck_shard_selector_parse("shardRange(object.metadata.namespace, '0xc000000000000000', "
	                            "'0x10000000000000000')",
	                            &err);
	ck_assert(ck_shard_selector_match_hash(s, UINT64_MAX));
	ck_assert(ck_shard_selector_match_hash(s, 0xc000000000000000ULL));
	ck_assert(!ck_shard_selector_match_hash(s, 0xbfffffffffffffffULL));
	ck_shard_selector_free(s);
	/* uid selects on the uid, not the namespace. */
	uint64_t u = h("u1");
	s = ck_shard_selector_new(CK_SHARD_UID, &(ck_shard_range_t){u, u + 1}, 1, &err);
	ck_assert(ck_shard_selector_match(s, in));
	ck_assert(ck_shard_selector_match(s, out));
	ck_shard_selector_free(s);
	ck_obj_unref(in);
	ck_obj_unref(out);
	ck_assert_ptr_null(err);
}
END_TEST

/* The field picks the bytes hashed; a cluster-scoped object's namespace is "". */
START_TEST(test_obj_hash)
{
	ck_obj_t *o = obj("team-a", "u1"), *c = obj("", "u2");
	ck_assert_uint_eq(ck_shard_obj_hash(CK_SHARD_NAMESPACE, o), 0xde90a3717d1252d6ULL);
	ck_assert_uint_eq(ck_shard_obj_hash(CK_SHARD_UID, o), h("u1"));
	ck_assert_uint_eq(ck_shard_obj_hash(CK_SHARD_NAMESPACE, c), 0xcbf29ce484222325ULL);
	ck_assert_uint_eq(ck_shard_obj_hash(CK_SHARD_UID, c), h("u2"));
	ck_obj_unref(o);
	ck_obj_unref(c);
}
END_TEST

START_TEST(test_parse_format)
{
	char *err = NULL;
	/* Whitespace anywhere, double quotes: the canonical form comes back. */
	ck_shard_selector_t *s = ck_shard_selector_parse(
	    "  shardRange( object.metadata.namespace ,\"0x0000000000000000\",'0x4000000000000000' )"
	    "||shardRange(object . metadata . namespace, '0xc000000000000000', "
	    "'0x10000000000000000')  ",
	    &err);
	ck_assert_msg(s, "%s", err ? err : "");
	const char *want =
	    "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || "
	    "shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')";
	ck_assert_str_eq(ck_shard_selector_string(s), want);
	size_t n;
	const ck_shard_range_t *r = ck_shard_selector_ranges(s, &n);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(r[0].start, 0);
	ck_assert_uint_eq(r[0].end, 0x4000000000000000ULL);
	ck_assert_uint_eq(r[1].start, 0xc000000000000000ULL);
	ck_assert_uint_eq(r[1].end, 0); /* 2^64 */
	ck_assert(ck_shard_selector_match_hash(s, 0x3fffffffffffffffULL));
	ck_assert(!ck_shard_selector_match_hash(s, 0x4000000000000000ULL));
	ck_assert(!ck_shard_selector_match_hash(s, 0x8000000000000000ULL));
	ck_assert(ck_shard_selector_match_hash(s, 0xc000000000000000ULL));
	/* The wire form parses back to the same selector; dup is equal. */
	ck_shard_selector_t *again = ck_shard_selector_parse(want, &err);
	ck_assert_str_eq(ck_shard_selector_string(again), want);
	ck_shard_selector_t *d = ck_shard_selector_dup(again);
	ck_assert_str_eq(ck_shard_selector_string(d), want);
	ck_shard_selector_free(d);
	ck_shard_selector_free(again);
	ck_shard_selector_free(s);
	ck_assert_ptr_null(ck_shard_selector_dup(NULL));
	ck_shard_selector_free(NULL);
}
END_TEST

static void refused(const char *sel, const char *want)
{
	char *err = NULL;
	ck_shard_selector_t *s = ck_shard_selector_parse(sel, &err);
	ck_assert_msg(!s, "accepted: %s", sel);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, want), "%s\n  gave: %s\n  want: %s", sel, err, want);
	free(err);
}

#define R0 "'0x0000000000000000'"
#define R8 "'0x8000000000000000'"

START_TEST(test_malformed)
{
	refused(NULL, "none given");
	refused("   ", "empty");
	refused("shardRange(object.metadata.name, " R0 ", " R8 ")",
	        "range 1 (column 12): unsupported field path \"object.metadata.name\"");
	refused("shardRange(object.metadata.uid, '0x0', " R8 ")",
	        "range 1 (column 33): start '0x0' must be 0x and 16 lowercase hex digits");
	refused("shardRange(object.metadata.uid, " R0 ", '0x8000000000000000X')",
	        "end '0x8000000000000000X' must be 0x and 16");
	refused("shardRange(object.metadata.uid, '0X0000000000000000', " R8 ")", "start '0X0");
	refused("shardRange(object.metadata.uid, " R0 ", '0xC000000000000000')",
	        "end '0xC000000000000000'");
	refused("shardRange(object.metadata.uid, 0x0000000000000000, " R8 ")",
	        "the start must be a quoted string");
	refused("shardRange(object.metadata.uid, " R8 ", " R8 ")",
	        "start 0x8000000000000000 must be less than end 0x8000000000000000");
	refused("shardRange(object.metadata.uid, '0x10000000000000000', '0x10000000000000000')",
	        "start 0x10000000000000000 is past the last hash");
	refused("shardRange(object.metadata.uid, " R0 ")", "expected ',' after the start");
	refused("shardRange(object.metadata.uid, " R0 ", " R8 ", " R8 ")",
	        "shardRange takes exactly 3 arguments");
	refused("shardRange(object.metadata.uid, " R0 ", " R8
	        ") && shardRange(object.metadata.uid, " R8 ", '0x10000000000000000')",
	        "range 1 (column 77): expected || or the end after a range, found \"&&");
	refused("shardRange(object.metadata.uid, " R0 ", " R8 ") || "
	        "shardRange(object.metadata.namespace, " R8 ", '0x10000000000000000')",
	        "range 2 (column 79): all ranges must use the same field");
	refused("shardRange(object.metadata.uid, " R0 ", " R8 ") ||", "range 2");
	refused("hashRange(object.metadata.uid, " R0 ", " R8 ")", "expected shardRange(");
	refused("shardRange(object.metadata.uid, '0x0000000000000000, " R8 ")",
	        "start '0x0000000000000000, ' must be 0x");
	char *err = NULL;
	ck_assert_ptr_null(ck_shard_selector_new(CK_SHARD_UID, &(ck_shard_range_t){5, 5}, 1, &err));
	ck_assert_ptr_nonnull(strstr(err, "range 1: start 0x0000000000000005 must be less"));
	free(err);
	err = NULL;
	ck_assert_ptr_null(ck_shard_selector_new(CK_SHARD_UID, NULL, 0, &err));
	ck_assert_str_eq(err, "shard selector: no range");
	free(err);
}
END_TEST

Suite *suite_shard(void)
{
	Suite *s = suite_create("shard");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_fnv_vectors);
	tcase_add_test(tc, test_range_edges);
	tcase_add_test(tc, test_obj_hash);
	tcase_add_test(tc, test_parse_format);
	tcase_add_test(tc, test_malformed);
	suite_add_tcase(s, tc);
	return s;
}
