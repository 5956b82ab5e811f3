/* Unit tests for pkg/cache's delta queue (client-go RealFIFO, atomic events),
 * and the store's atomic replace it relies on. */
#include "test_cache_util.h"

#include <check.h>

/* Pops one delta and renders it as "Type(ns/name@rv)" or "ReplacedAll(n)". */
static char *pop_str(cache_dq_t *q, bool *initial)
{
	cache_delta_t d;
	if (!cache_dq_pop(q, &d, initial))
		return NULL;
	char *s;
	if (d.type == CACHE_DELTA_REPLACED_ALL) {
		s = ck_xasprintf("ReplacedAll(%u)", d.n);
	} else if (d.type == CACHE_DELTA_SYNC_ALL) {
		s = ck_xstrdup("SyncAll");
	} else {
		char key[128];
		ck_obj_key(d.obj, key, sizeof(key));
		s = ck_xasprintf("%s(%s@%s)", cache_delta_type_name(d.type), key, d.obj->rv);
	}
	cache_dq_delta_free(&d);
	cache_dq_done(q);
	return s;
}

static void expect_pop(cache_dq_t *q, const char *want)
{
	char *got = pop_str(q, NULL);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, want);
	free(got);
}

static ck_obj_t **items_of(int n, const char *rv)
{
	ck_obj_t **items = ck_xmalloc((size_t)(n ? n : 1) * sizeof(*items));
	for (int i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof(name), "o%d", i);
		items[i] = mkobj("ns", name, rv);
	}
	return items;
}

START_TEST(test_arrival_order_no_grouping)
{
	cache_dq_t q;
	cache_dq_init(&q);
	cache_dq_add(&q, CACHE_DELTA_ADDED, mkobj("ns", "a", "1"));
	cache_dq_add(&q, CACHE_DELTA_ADDED, mkobj("ns", "b", "2"));
	cache_dq_add(&q, CACHE_DELTA_UPDATED, mkobj("ns", "a", "3"));
	cache_dq_add(&q, CACHE_DELTA_DELETED, mkobj("ns", "a", "4"));
	cache_dq_add(&q, CACHE_DELTA_DELETED, mkobj("ns", "a", "5"));
	/* A delete of a key nobody saw is queued too (RealFIFO). */
	cache_dq_add(&q, CACHE_DELTA_DELETED, mkobj("ns", "ghost", "6"));
	ck_assert_uint_eq(cache_dq_len(&q), 6);
	expect_pop(&q, "Added(ns/a@1)");
	expect_pop(&q, "Added(ns/b@2)");
	expect_pop(&q, "Updated(ns/a@3)");
	expect_pop(&q, "Deleted(ns/a@4)");
	expect_pop(&q, "Deleted(ns/a@5)");
	expect_pop(&q, "Deleted(ns/ghost@6)");
	ck_assert_ptr_null(pop_str(&q, NULL));
	cache_dq_free(&q);
}
END_TEST

START_TEST(test_replace_is_one_entry_and_sync_count)
{
	cache_dq_t q;
	cache_dq_init(&q);
	ck_assert(!cache_dq_has_synced(&q));
	cache_dq_replace(&q, items_of(3, "1"), 3, 0);
	cache_dq_add(&q, CACHE_DELTA_UPDATED, mkobj("ns", "o1", "2"));
	ck_assert_uint_eq(cache_dq_len(&q), 2);
	ck_assert(!cache_dq_has_synced(&q));
	bool initial = false;
	cache_delta_t d;
	ck_assert(cache_dq_pop(&q, &d, &initial));
	ck_assert(initial);
	ck_assert_int_eq(d.type, CACHE_DELTA_REPLACED_ALL);
	ck_assert_uint_eq(d.n, 3);
	/* Not synced until the Replace is fully processed. */
	ck_assert(!cache_dq_has_synced(&q));
	cache_dq_delta_free(&d);
	cache_dq_done(&q);
	ck_assert(cache_dq_has_synced(&q));
	char *s = pop_str(&q, &initial);
	ck_assert(!initial);
	ck_assert_str_eq(s, "Updated(ns/o1@2)");
	free(s);
	/* A later relist does not change has_synced. */
	cache_dq_replace(&q, items_of(0, "1"), 0, 0);
	expect_pop(&q, "ReplacedAll(0)");
	ck_assert(cache_dq_has_synced(&q));
	cache_dq_free(&q);
}
END_TEST

START_TEST(test_events_before_first_replace_mean_synced)
{
	/* client-go: an Add/Update/Delete before any Replace populates the queue. */
	cache_dq_t q;
	cache_dq_init(&q);
	cache_dq_add(&q, CACHE_DELTA_ADDED, mkobj("ns", "a", "1"));
	ck_assert(cache_dq_has_synced(&q));
	cache_dq_free(&q);
}
END_TEST

START_TEST(test_resync_collapses_back_to_back)
{
	cache_dq_t q;
	cache_dq_init(&q);
	cache_dq_resync(&q);
	cache_dq_resync(&q);
	cache_dq_add(&q, CACHE_DELTA_UPDATED, mkobj("ns", "a", "2"));
	cache_dq_resync(&q);
	expect_pop(&q, "SyncAll");
	expect_pop(&q, "Updated(ns/a@2)");
	expect_pop(&q, "SyncAll");
	ck_assert_ptr_null(pop_str(&q, NULL));
	cache_dq_free(&q);
}
END_TEST

START_TEST(test_ring_grows_wraps_and_shrinks)
{
	cache_dq_t q;
	cache_dq_init(&q);
	int next_in = 0, next_out = 0;
	for (int round = 0; round < 200; round++) {
		for (int i = 0; i < 37; i++) {
			char rv[16];
			snprintf(rv, sizeof(rv), "%d", next_in++);
			cache_dq_add(&q, CACHE_DELTA_UPDATED, mkobj("ns", "a", rv));
		}
		for (int i = 0; i < 30; i++) {
			char want[32];
			snprintf(want, sizeof(want), "Updated(ns/a@%d)", next_out++);
			expect_pop(&q, want);
		}
	}
	ck_assert_uint_ge(q.cap, cache_dq_len(&q));
	while (next_out < next_in) {
		char want[32];
		snprintf(want, sizeof(want), "Updated(ns/a@%d)", next_out++);
		expect_pop(&q, want);
	}
	/* Drained: the burst's memory went back. */
	ck_assert_uint_le(q.cap, 16);
	cache_dq_free(&q);
}
END_TEST

START_TEST(test_store_replace_reports_olds_and_gone)
{
	ck_cache_store_t *st = ck_cache_store_new();
	ck_obj_t *a = mkobj_app("ns", "a", "1", "x"), *b = mkobj_app("ns", "b", "1", "x");
	ck_obj_unref(ck_cache_store_upsert(st, a));
	ck_obj_unref(ck_cache_store_upsert(st, b));
	ck_obj_t *items[] = {mkobj_app("ns", "a", "2", "y"), mkobj_app("other", "c", "2", "y")};
	ck_obj_t *olds[2];
	ck_cache_objs_t gone;
	cache_store_repl_t *r = cache_store_replace_begin(st);
	cache_store_replace_add(r, items, 1, olds);
	/* Built beside the store: nothing visible yet. */
	ck_obj_t *now = ck_cache_store_get(st, "ns/a");
	ck_assert_ptr_eq(now, a);
	ck_obj_unref(now);
	cache_store_replace_add(r, items + 1, 1, olds + 1);
	cache_store_replace_commit(r, &gone);
	ck_assert_ptr_eq(olds[0], a);
	ck_assert_ptr_null(olds[1]);
	ck_assert_uint_eq(gone.n, 1);
	ck_assert_ptr_eq(gone.items[0], b);
	ck_assert_uint_eq(ck_cache_store_len(st), 2);
	/* The indexes follow: the namespace index has the new namespaces only. */
	ck_cache_objs_t in;
	ck_assert_int_eq(ck_cache_store_by_index(st, CK_CACHE_INDEX_NAMESPACE, "other", &in, NULL),
	                 0);
	ck_assert_uint_eq(in.n, 1);
	ck_cache_objs_free(&in);
	ck_assert_int_eq(ck_cache_store_by_index(st, CK_CACHE_INDEX_NAMESPACE, "ns", &in, NULL), 0);
	ck_assert_uint_eq(in.n, 1);
	ck_assert_ptr_eq(in.items[0], items[0]);
	ck_cache_objs_free(&in);
	ck_obj_unref(olds[0]);
	ck_cache_objs_free(&gone);
	ck_obj_unref(items[0]);
	ck_obj_unref(items[1]);
	ck_obj_unref(a);
	ck_obj_unref(b);
	ck_cache_store_free(st);
}
END_TEST

START_TEST(test_store_replace_abort_leaves_the_store)
{
	ck_cache_store_t *st = ck_cache_store_new();
	ck_obj_t *a = mkobj("ns", "a", "1");
	ck_obj_unref(ck_cache_store_upsert(st, a));
	ck_obj_t *items[] = {mkobj("ns", "a", "2"), mkobj("ns", "a", "3")};
	ck_obj_t *olds[2];
	cache_store_repl_t *r = cache_store_replace_begin(st);
	cache_store_replace_add(r, items, 2, olds); /* a key twice: the later wins */
	ck_assert_ptr_eq(olds[0], a);
	ck_assert_ptr_eq(olds[1], a);
	cache_store_replace_abort(r);
	ck_obj_unref(olds[0]);
	ck_obj_unref(olds[1]);
	ck_obj_t *now = ck_cache_store_get(st, "ns/a");
	ck_assert_str_eq(now->rv, "1");
	ck_obj_unref(now);
	r = cache_store_replace_begin(st);
	cache_store_replace_add(r, items, 2, olds);
	ck_obj_unref(olds[0]);
	ck_obj_unref(olds[1]);
	ck_cache_objs_t gone;
	cache_store_replace_commit(r, &gone);
	ck_assert_uint_eq(gone.n, 0);
	now = ck_cache_store_get(st, "ns/a");
	ck_assert_str_eq(now->rv, "3");
	ck_assert_uint_eq(ck_cache_store_len(st), 1);
	ck_obj_unref(now);
	ck_obj_unref(items[0]);
	ck_obj_unref(items[1]);
	ck_obj_unref(a);
	ck_cache_store_free(st);
}
END_TEST

Suite *suite_cache_queue(void)
{
	Suite *s = suite_create("cache_queue");
	TCase *tc = tcase_create("dq");
	tcase_add_test(tc, test_arrival_order_no_grouping);
	tcase_add_test(tc, test_replace_is_one_entry_and_sync_count);
	tcase_add_test(tc, test_events_before_first_replace_mean_synced);
	tcase_add_test(tc, test_resync_collapses_back_to_back);
	tcase_add_test(tc, test_ring_grows_wraps_and_shrinks);
	tcase_add_test(tc, test_store_replace_reports_olds_and_gone);
	tcase_add_test(tc, test_store_replace_abort_leaves_the_store);
	suite_add_tcase(s, tc);
	return s;
}
