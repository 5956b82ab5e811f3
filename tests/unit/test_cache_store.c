/* Unit tests for pkg/cache: hash table, store, indexes, listers, label selectors. */
#include "test_cache_util.h"

#include <check.h>
#include <pthread.h>
#include <unistd.h>

/* ---------------------------------------------------------------- chash */

static bool eq_u64(const void *p, const void *key)
{
	return *(const uint64_t *)p == *(const uint64_t *)key;
}

START_TEST(test_chash_random_against_reference)
{
	/* Insert and delete at random; the table must always agree with a plain array.
	 * A weak hash (few distinct values) forces long clusters through backward shift. */
	enum { N = 2000 };
	uint64_t *vals = calloc(N, sizeof(uint64_t));
	bool *in = calloc(N, sizeof(bool));
	for (size_t i = 0; i < N; i++)
		vals[i] = i;
	chash_t t = {0};
	size_t count = 0;
	for (int round = 0; round < 40000; round++) {
		size_t i = ck_rand_u64() % N;
		uint64_t h = (vals[i] % 97) * 0x9e3779b97f4a7c15ULL;
		size_t at = chash_find(&t, h, eq_u64, &vals[i]);
		ck_assert_int_eq(at != SIZE_MAX, in[i]);
		if (in[i]) {
			chash_remove_at(&t, at);
			in[i] = false;
			count--;
		} else {
			chash_insert(&t, h, &vals[i]);
			in[i] = true;
			count++;
		}
		ck_assert_uint_eq(t.len, count);
	}
	for (size_t i = 0; i < N; i++) {
		uint64_t h = (vals[i] % 97) * 0x9e3779b97f4a7c15ULL;
		ck_assert_int_eq(chash_find(&t, h, eq_u64, &vals[i]) != SIZE_MAX, in[i]);
	}
	chash_free(&t);
	free(vals);
	free(in);
}
END_TEST

START_TEST(test_key_hash_matches_key_string)
{
	ck_obj_t *a = mkobj("ns1", "obj-a", "1");
	char key[64];
	size_t n = ck_obj_key(a, key, sizeof(key));
	ck_assert_str_eq(key, "ns1/obj-a");
	ck_assert_uint_eq(cache_obj_key_hash(a), cache_key_hash(key, n));
	ck_assert(cache_obj_key_eq(a, key, n));
	ck_assert(!cache_obj_key_eq(a, "ns1/obj-b", 9));
	ck_assert(!cache_obj_key_eq(a, "ns1obj-a", 8));
	ck_obj_t *node = mkobj_t(&node_type, NULL, "node-1", "1", NULL);
	n = ck_obj_key(node, key, sizeof(key));
	ck_assert_str_eq(key, "node-1");
	ck_assert_uint_eq(cache_obj_key_hash(node), cache_key_hash(key, n));
	ck_obj_unref(a);
	ck_obj_unref(node);
}
END_TEST

/* ---------------------------------------------------------------- store */

START_TEST(test_store_crud)
{
	ck_cache_store_t *s = ck_cache_store_new();
	ck_obj_t *a1 = mkobj("ns1", "a", "1");
	ck_assert_ptr_null(ck_cache_store_upsert(s, a1));
	ck_assert_uint_eq(ck_cache_store_len(s), 1);
	ck_obj_t *got = ck_cache_store_get(s, "ns1/a");
	ck_assert_ptr_eq(got, a1);
	ck_obj_unref(got);
	got = ck_cache_store_get_ns_name(s, "ns1", "a");
	ck_assert_ptr_eq(got, a1);
	ck_obj_unref(got);
	ck_assert_ptr_null(ck_cache_store_get(s, "ns2/a"));
	ck_assert_ptr_null(ck_cache_store_get(s, "a"));

	ck_obj_t *a2 = mkobj("ns1", "a", "2");
	ck_obj_t *old = ck_cache_store_upsert(s, a2);
	ck_assert_ptr_eq(old, a1);
	ck_obj_unref(old);
	ck_assert_uint_eq(ck_cache_store_len(s), 1);
	got = ck_cache_store_get(s, "ns1/a");
	ck_assert_str_eq(got->rv, "2");
	ck_obj_unref(got);

	old = ck_cache_store_delete(s, "ns1/a");
	ck_assert_ptr_eq(old, a2);
	ck_obj_unref(old);
	ck_assert_ptr_null(ck_cache_store_delete(s, "ns1/a"));
	ck_assert_uint_eq(ck_cache_store_len(s), 0);
	ck_obj_unref(a1);
	ck_obj_unref(a2);
	ck_cache_store_free(s);
}
END_TEST

START_TEST(test_store_cluster_scoped_keys)
{
	ck_cache_store_t *s = ck_cache_store_new();
	ck_obj_t *n = mkobj_t(&node_type, NULL, "node-1", "5", NULL);
	ck_cache_store_upsert(s, n);
	ck_obj_t *got = ck_cache_store_get(s, "node-1");
	ck_assert_ptr_eq(got, n);
	ck_obj_unref(got);
	got = ck_cache_store_get_ns_name(s, "", "node-1");
	ck_assert_ptr_eq(got, n);
	ck_obj_unref(got);
	ck_cache_strs_t keys;
	ck_cache_store_list_keys(s, &keys);
	ck_assert_uint_eq(keys.n, 1);
	ck_assert_str_eq(keys.items[0], "node-1");
	ck_cache_strs_free(&keys);
	ck_obj_unref(n);
	ck_cache_store_free(s);
}
END_TEST

static size_t count_by_index(ck_cache_store_t *s, const char *index, const char *value)
{
	ck_cache_objs_t l;
	ck_assert_int_eq(ck_cache_store_by_index(s, index, value, &l, NULL), 0);
	size_t n = l.n;
	ck_cache_objs_free(&l);
	return n;
}

START_TEST(test_store_namespace_index)
{
	ck_cache_store_t *s = ck_cache_store_new();
	for (int i = 0; i < 50; i++) {
		char name[16];
		snprintf(name, sizeof(name), "o%d", i);
		ck_obj_t *o = mkobj(i % 2 ? "odd" : "even", name, "1");
		ck_cache_store_upsert(s, o);
		ck_obj_unref(o);
	}
	ck_assert_uint_eq(count_by_index(s, CK_CACHE_INDEX_NAMESPACE, "odd"), 25);
	ck_assert_uint_eq(count_by_index(s, CK_CACHE_INDEX_NAMESPACE, "even"), 25);
	ck_assert_uint_eq(count_by_index(s, CK_CACHE_INDEX_NAMESPACE, "none"), 0);

	ck_cache_strs_t vals;
	ck_assert_int_eq(ck_cache_store_index_values(s, CK_CACHE_INDEX_NAMESPACE, &vals, NULL), 0);
	ck_assert_uint_eq(vals.n, 2);
	ck_cache_strs_free(&vals);

	ck_cache_strs_t keys;
	ck_assert_int_eq(ck_cache_store_index_keys(s, CK_CACHE_INDEX_NAMESPACE, "odd", &keys, NULL),
	                 0);
	ck_assert_uint_eq(keys.n, 25);
	for (size_t i = 0; i < keys.n; i++)
		ck_assert(strncmp(keys.items[i], "odd/o", 5) == 0);
	ck_cache_strs_free(&keys);

	/* Deleting every odd object drops the value itself. */
	for (int i = 1; i < 50; i += 2) {
		char key[32];
		snprintf(key, sizeof(key), "odd/o%d", i);
		ck_obj_unref(ck_cache_store_delete(s, key));
	}
	ck_assert_uint_eq(count_by_index(s, CK_CACHE_INDEX_NAMESPACE, "odd"), 0);
	ck_assert_int_eq(ck_cache_store_index_values(s, CK_CACHE_INDEX_NAMESPACE, &vals, NULL), 0);
	ck_assert_uint_eq(vals.n, 1);
	ck_assert_str_eq(vals.items[0], "even");
	ck_cache_strs_free(&vals);

	char *err = NULL;
	ck_cache_objs_t l;
	ck_assert_int_eq(ck_cache_store_by_index(s, "nope", "x", &l, &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "nope"));
	free(err);
	ck_cache_store_free(s);
}
END_TEST

/* Multi-valued: every label value of the object, as "k=v". */
static void labels_index(void *ud, const ck_obj_t *obj, ck_cache_index_values_t *out)
{
	int *calls = ud;
	(*calls)++;
	for (size_t i = 0; i < obj->nlabels; i++) {
		char v[128];
		snprintf(v, sizeof(v), "%s=%s", obj->labels[i].key, obj->labels[i].value);
		ck_cache_index_values_add(out, v);
	}
}

START_TEST(test_store_custom_index_after_objects)
{
	ck_cache_store_t *s = ck_cache_store_new();
	const char *l1[] = {"app=web", "tier=front", NULL};
	const char *l2[] = {"app=web", "tier=back", NULL};
	ck_obj_t *a = mkobj_t(&widget_type, "ns", "a", "1", l1);
	ck_obj_t *b = mkobj_t(&widget_type, "ns", "b", "1", l2);
	ck_cache_store_upsert(s, a);
	ck_cache_store_upsert(s, b);
	int calls = 0;
	ck_assert_int_eq(ck_cache_store_add_index(s, "labels", labels_index, &calls, NULL), 0);
	ck_assert_int_eq(calls, 2); /* existing objects indexed at once */
	ck_assert_uint_eq(count_by_index(s, "labels", "app=web"), 2);
	ck_assert_uint_eq(count_by_index(s, "labels", "tier=front"), 1);

	/* Update: b moves from back to front; its old value must go. */
	const char *l3[] = {"app=api", "tier=front", NULL};
	ck_obj_t *b2 = mkobj_t(&widget_type, "ns", "b", "2", l3);
	ck_obj_unref(ck_cache_store_upsert(s, b2));
	ck_assert_uint_eq(count_by_index(s, "labels", "app=web"), 1);
	ck_assert_uint_eq(count_by_index(s, "labels", "app=api"), 1);
	ck_assert_uint_eq(count_by_index(s, "labels", "tier=front"), 2);
	ck_assert_uint_eq(count_by_index(s, "labels", "tier=back"), 0);
	ck_cache_objs_t l;
	ck_cache_store_by_index(s, "labels", "app=api", &l, NULL);
	ck_assert_ptr_eq(l.items[0], b2); /* the new object, not the old one */
	ck_cache_objs_free(&l);

	/* Delete: gone from every value. */
	ck_obj_unref(ck_cache_store_delete(s, "ns/a"));
	ck_assert_uint_eq(count_by_index(s, "labels", "app=web"), 0);
	ck_assert_uint_eq(count_by_index(s, "labels", "tier=front"), 1);

	char *err = NULL;
	ck_assert_int_eq(ck_cache_store_add_index(s, "labels", labels_index, &calls, &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "labels"));
	free(err);
	ck_obj_unref(a);
	ck_obj_unref(b);
	ck_obj_unref(b2);
	ck_cache_store_free(s);
}
END_TEST

START_TEST(test_store_mem_and_foreach)
{
	ck_cache_store_t *s = ck_cache_store_new();
	for (int i = 0; i < 100; i++) {
		char name[16];
		snprintf(name, sizeof(name), "o%d", i);
		ck_obj_t *o = mkobj("ns", name, "1");
		ck_cache_store_upsert(s, o);
		ck_obj_unref(o);
	}
	size_t obj_bytes = 0;
	size_t tables = ck_cache_store_mem_bytes(s, &obj_bytes);
	ck_assert_uint_gt(tables, 100 * 16);
	ck_assert_uint_lt(tables, 100 * 200);
	ck_assert_uint_gt(obj_bytes, 100 * sizeof(ck_obj_t));
	ck_cache_objs_t all;
	ck_cache_store_list(s, &all);
	ck_assert_uint_eq(all.n, 100);
	ck_cache_objs_free(&all);
	ck_cache_store_free(s);
}
END_TEST

/* Readers on threads while the writer churns: run under TSan too. */
typedef struct rd_ctx {
	ck_cache_store_t *s;
	_Atomic bool stop;
	_Atomic long reads;
} rd_ctx_t;

static void *reader(void *arg)
{
	rd_ctx_t *c = arg;
	while (!atomic_load(&c->stop)) {
		ck_obj_t *o = ck_cache_store_get(c->s, "ns/o7");
		if (o != NULL) {
			ck_assert_str_eq(o->name, "o7");
			ck_obj_unref(o);
		}
		ck_cache_objs_t l;
		ck_cache_store_by_index(c->s, CK_CACHE_INDEX_NAMESPACE, "ns", &l, NULL);
		for (size_t i = 0; i < l.n; i++)
			ck_assert_str_eq(l.items[i]->ns, "ns");
		ck_cache_objs_free(&l);
		atomic_fetch_add(&c->reads, 1);
	}
	return NULL;
}

START_TEST(test_store_concurrent_readers)
{
	rd_ctx_t c = {.s = ck_cache_store_new()};
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, reader, &c);
	for (int round = 0; round < 3000; round++) {
		char name[16], rv[16];
		snprintf(name, sizeof(name), "o%d", round % 20);
		snprintf(rv, sizeof(rv), "%d", round);
		ck_obj_t *o = mkobj("ns", name, rv);
		ck_obj_unref(ck_cache_store_upsert(c.s, o));
		ck_obj_unref(o);
		if (round % 7 == 0) {
			char key[32];
			snprintf(key, sizeof(key), "ns/o%d", (round / 7) % 20);
			ck_obj_unref(ck_cache_store_delete(c.s, key));
		}
	}
	atomic_store(&c.stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ck_cache_store_free(c.s);
}
END_TEST

/* A foreach callback that reads the store back, while a writer queues for the lock. */
typedef struct nested {
	ck_cache_store_t *s;
	pthread_t writer;
	bool writing;
	int seen, found;
} nested_t;

static void *queued_writer(void *arg)
{
	ck_obj_t *o = mkobj("ns", "new", "9");
	ck_obj_unref(ck_cache_store_upsert(arg, o));
	ck_obj_unref(o);
	return NULL;
}

static bool read_back(void *ud, ck_obj_t *obj)
{
	nested_t *n = ud;
	if (!n->writing) {
		n->writing = true;
		pthread_create(&n->writer, NULL, queued_writer, n->s);
		usleep(50000); /* time for the writer to queue on the lock */
	}
	char key[64];
	ck_obj_key(obj, key, sizeof(key));
	ck_obj_t *again = ck_cache_store_get(n->s, key);
	n->found += again == obj;
	ck_obj_unref(again);
	n->seen++;
	return true;
}

static bool stop_after_two(void *ud, ck_obj_t *obj)
{
	int *calls = ud;
	(void)obj;
	return ++*calls < 2;
}

START_TEST(test_store_foreach_may_read_the_store)
{
	/* A read from inside the callback must not deadlock behind a waiting writer
	 * (the lock prefers writers and is not recursive for readers). */
	ck_cache_store_t *s = ck_cache_store_new();
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "o%d", i);
		ck_obj_t *o = mkobj("ns", name, "1");
		ck_cache_store_upsert(s, o);
		ck_obj_unref(o);
	}
	nested_t n = {.s = s};
	ck_cache_store_foreach(s, read_back, &n);
	ck_assert(n.writing);
	pthread_join(n.writer, NULL);
	ck_assert_int_eq(n.seen, 3);
	ck_assert_int_eq(n.found, 3);
	ck_assert_uint_eq(ck_cache_store_len(s), 4);
	int calls = 0;
	ck_cache_store_foreach(s, stop_after_two, &calls);
	ck_assert_int_eq(calls, 2);
	ck_cache_store_free(s);
}
END_TEST

/* ---------------------------------------------------------------- listers */

START_TEST(test_lister)
{
	ck_cache_store_t *s = ck_cache_store_new();
	const ck_cache_lister_t *l = cache_lister_from_store(s);
	ck_obj_t *objs[] = {
	    mkobj_app("a", "x", "1", "web"),
	    mkobj_app("a", "y", "1", "db"),
	    mkobj_app("b", "x", "1", "web"),
	    mkobj("b", "z", "1"),
	};
	for (size_t i = 0; i < 4; i++) {
		ck_cache_store_upsert(s, objs[i]);
		ck_obj_unref(objs[i]);
	}
	ck_obj_t *got = ck_cache_lister_get(l, "a", "y");
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got->name, "y");
	ck_obj_unref(got);
	ck_assert_ptr_null(ck_cache_lister_get(l, "a", "z")); /* not found: NULL */

	ck_cache_objs_t out;
	ck_cache_lister_list(l, NULL, &out);
	ck_assert_uint_eq(out.n, 4);
	ck_cache_objs_free(&out);
	ck_cache_lister_list_ns(l, "b", NULL, &out);
	ck_assert_uint_eq(out.n, 2);
	ck_cache_objs_free(&out);
	/* "" is metav1.NamespaceAll, as client-go's ListAllByNamespace: everything. */
	ck_cache_lister_list_ns(l, "", NULL, &out);
	ck_assert_uint_eq(out.n, 4);
	ck_cache_objs_free(&out);
	ck_cache_lister_list_ns(l, NULL, NULL, &out);
	ck_assert_uint_eq(out.n, 4);
	ck_cache_objs_free(&out);

	ck_cache_selector_t *web = ck_cache_selector_parse("app=web", NULL);
	ck_cache_lister_list(l, web, &out);
	ck_assert_uint_eq(out.n, 2);
	ck_cache_objs_free(&out);
	ck_cache_lister_list_ns(l, "b", web, &out);
	ck_assert_uint_eq(out.n, 1);
	ck_assert_str_eq(out.items[0]->name, "x");
	ck_cache_objs_free(&out);
	ck_cache_selector_free(web);

	ck_cache_selector_t *noapp = ck_cache_selector_parse("!app", NULL);
	ck_cache_lister_list(l, noapp, &out);
	ck_assert_uint_eq(out.n, 1);
	ck_assert_str_eq(out.items[0]->name, "z");
	ck_cache_objs_free(&out);
	ck_cache_selector_free(noapp);
	ck_cache_store_free(s);
}
END_TEST

/* ---------------------------------------------------------------- selectors */

static bool sel_match(const char *sel, const char *const *labels)
{
	char *err = NULL;
	ck_cache_selector_t *s = ck_cache_selector_parse(sel, &err);
	ck_assert_msg(s != NULL, "parse %s: %s", sel, err ? err : "");
	ck_obj_t *o = mkobj_t(&widget_type, "ns", "o", "1", labels);
	bool m = ck_cache_selector_matches(s, o);
	ck_obj_unref(o);
	ck_cache_selector_free(s);
	return m;
}

START_TEST(test_selector_semantics)
{
	const char *l[] = {"app=web", "tier=front", "n=5", NULL};
	ck_assert(sel_match("", l));
	ck_assert(sel_match("app=web", l));
	ck_assert(sel_match("app==web", l));
	ck_assert(sel_match(" app = web , tier=front ", l));
	ck_assert(!sel_match("app=db", l));
	ck_assert(sel_match("app!=db", l));
	ck_assert(sel_match("missing!=x", l)); /* != matches an absent label */
	ck_assert(sel_match("app in (db, web)", l));
	ck_assert(!sel_match("app notin (db,web)", l));
	ck_assert(sel_match("missing notin (a)", l));
	ck_assert(sel_match("app", l));
	ck_assert(!sel_match("!app", l));
	ck_assert(sel_match("!missing", l));
	ck_assert(sel_match("n>4", l));
	ck_assert(!sel_match("n>5", l));
	ck_assert(sel_match("n<6", l));
	ck_assert(!sel_match("app>1", l)); /* not an integer label */
	ck_assert(sel_match("example.com/x notin (a),app", l));
}
END_TEST

START_TEST(test_selector_errors)
{
	const char *bad[] = {"app=web,", "=web",     "app in ()", "app in (a", "app in a",
	                     "n>x",      "app=we b", "app ~ b",   ",",         NULL};
	for (size_t i = 0; bad[i] != NULL; i++) {
		char *err = NULL;
		ck_cache_selector_t *s = ck_cache_selector_parse(bad[i], &err);
		ck_assert_msg(s == NULL, "accepted %s", bad[i]);
		ck_assert_ptr_nonnull(err);
		ck_assert_ptr_nonnull(strstr(err, "label selector"));
		free(err);
	}
}
END_TEST

/* The fixed, public function the store hashed keys with before they were keyed:
 * FNV-1a from the standard offset basis, then a 64-bit finaliser. */
static uint64_t unkeyed_store_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

/* Names a tenant can compute offline to share one bucket of a 4096-slot table
 * under an unkeyed function must spread under the store's keyed hash. Failed
 * while the store used unkeyed_store_hash (all 256 in one bucket). */
START_TEST(test_store_hash_keyed_against_crafted_names)
{
	enum { N = 256, MASK = 4095 };
	static char names[N][48];
	unsigned counts[MASK + 1] = {0}, most = 0;
	int n = 0;

	for (unsigned long i = 0; n < N; i++) {
		snprintf(names[n], sizeof(names[n]), "default/p%lu", i);
		if ((unkeyed_store_hash(names[n]) & MASK) == 0)
			n++;
	}
	for (int i = 0; i < N; i++) {
		uint64_t h = cache_key_hash(names[i], strlen(names[i]));
		unsigned c = ++counts[h & MASK];
		if (c > most)
			most = c;
	}
	/* 256 random keys in 4096 buckets: P(any bucket > 6) is below 1e-6. */
	ck_assert_msg(most <= 6, "%u of %d crafted names share one bucket", most, N);

	/* The object form hashes as its key string does. */
	ck_obj_t *o = mkobj("default", "p1", "1");
	ck_assert_uint_eq(cache_obj_key_hash(o), cache_key_hash("default/p1", 10));
	ck_obj_unref(o);
}
END_TEST

Suite *suite_cache_store(void)
{
	Suite *s = suite_create("cache_store");
	TCase *tc = tcase_create("store");
	tcase_add_test(tc, test_chash_random_against_reference);
	tcase_add_test(tc, test_key_hash_matches_key_string);
	tcase_add_test(tc, test_store_crud);
	tcase_add_test(tc, test_store_cluster_scoped_keys);
	tcase_add_test(tc, test_store_namespace_index);
	tcase_add_test(tc, test_store_custom_index_after_objects);
	tcase_add_test(tc, test_store_mem_and_foreach);
	tcase_add_test(tc, test_store_concurrent_readers);
	tcase_add_test(tc, test_lister);
	tcase_add_test(tc, test_store_hash_keyed_against_crafted_names);
	tcase_add_test(tc, test_selector_semantics);
	tcase_add_test(tc, test_selector_errors);
	suite_add_tcase(s, tc);
	/* Its own case: before the fix it deadlocked, and should fail fast. */
	TCase *tf = tcase_create("foreach");
	tcase_set_timeout(tf, 10);
	tcase_add_test(tf, test_store_foreach_may_read_the_store);
	suite_add_tcase(s, tf);
	return s;
}
