/* Unit tests for pkg/cache's delta queue (client-go DeltaFIFO semantics). */
#include "test_cache_util.h"

#include <check.h>

typedef struct qfix {
	ck_cache_store_t *known;
	cache_dq_t q;
} qfix_t;

static void qfix_init(qfix_t *f)
{
	f->known = ck_cache_store_new();
	cache_dq_init(&f->q, f->known);
}

static void qfix_free(qfix_t *f)
{
	cache_dq_free(&f->q);
	ck_cache_store_free(f->known);
}

/* Pops one entry and renders it as "ns/name: Type(rv) Type(rv)...". */
static char *pop_str(qfix_t *f, bool *initial)
{
	cache_dq_entry_t *e = cache_dq_pop(&f->q, initial);
	if (e == NULL)
		return NULL;
	ck_sbuf_t b = CK_SBUF_INIT;
	char key[128];
	ck_obj_key(e->d[0].obj, key, sizeof(key));
	ck_sbuf_printf(&b, "%s:", key);
	for (uint32_t i = 0; i < e->n; i++)
		ck_sbuf_printf(&b, " %s%s(%s)", e->d[i].unknown ? "Unknown" : "",
		               cache_delta_type_name(e->d[i].type), e->d[i].obj->rv);
	cache_dq_release(&f->q, e);
	return ck_sbuf_steal(&b);
}

static void expect_pop(qfix_t *f, const char *want)
{
	char *got = pop_str(f, NULL);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, want);
	free(got);
}

/* Stores obj as processed (known). */
static void know(qfix_t *f, ck_obj_t *obj)
{
	ck_obj_unref(ck_cache_store_upsert(f->known, obj));
	ck_obj_unref(obj);
}

START_TEST(test_fifo_order_and_grouping)
{
	qfix_t f;
	qfix_init(&f);
	cache_dq_add(&f.q, CACHE_DELTA_ADDED, mkobj("ns", "a", "1"));
	cache_dq_add(&f.q, CACHE_DELTA_ADDED, mkobj("ns", "b", "2"));
	cache_dq_add(&f.q, CACHE_DELTA_UPDATED, mkobj("ns", "a", "3"));
	cache_dq_add(&f.q, CACHE_DELTA_UPDATED, mkobj("ns", "a", "4"));
	ck_assert_uint_eq(cache_dq_len(&f.q), 2);
	/* Many deltas for one key outgrow the inline array. */
	expect_pop(&f, "ns/a: Added(1) Updated(3) Updated(4)");
	expect_pop(&f, "ns/b: Added(2)");
	ck_assert_ptr_null(cache_dq_pop(&f.q, NULL));
	qfix_free(&f);
}
END_TEST

START_TEST(test_delete_dedup)
{
	qfix_t f;
	qfix_init(&f);
	know(&f, mkobj("ns", "a", "1"));
	know(&f, mkobj("ns", "b", "1"));
	/* Two real deletes: the newer one stays. */
	cache_dq_delete(&f.q, mkobj("ns", "a", "2"));
	cache_dq_delete(&f.q, mkobj("ns", "a", "3"));
	expect_pop(&f, "ns/a: Deleted(3)");
	/* A real delete then a tombstone for the same key: the real one (it knows more). */
	cache_dq_delete(&f.q, mkobj("ns", "b", "5"));
	ck_obj_t *none[1];
	cache_dq_replace(&f.q, none, 0);
	expect_pop(&f, "ns/b: Deleted(5)");
	/* a is no longer known here (the store was not updated by popping), so the
	 * replace tombstoned it as known-but-absent. */
	expect_pop(&f, "ns/a: UnknownDeleted(1)");
	ck_assert_ptr_null(cache_dq_pop(&f.q, NULL));
	qfix_free(&f);
}
END_TEST

START_TEST(test_delete_add_delete_not_collapsed)
{
	qfix_t f;
	qfix_init(&f);
	know(&f, mkobj("ns", "a", "1"));
	know(&f, mkobj("ns", "b", "1"));
	/* Deleted, Added, Deleted: no two deletes in a row, nothing to collapse. */
	cache_dq_delete(&f.q, mkobj("ns", "a", "2"));
	cache_dq_add(&f.q, CACHE_DELTA_ADDED, mkobj("ns", "a", "3"));
	cache_dq_delete(&f.q, mkobj("ns", "a", "4"));
	/* Only the trailing pair collapses; what comes before it stays. */
	cache_dq_delete(&f.q, mkobj("ns", "b", "2"));
	cache_dq_add(&f.q, CACHE_DELTA_ADDED, mkobj("ns", "b", "3"));
	cache_dq_delete(&f.q, mkobj("ns", "b", "4"));
	cache_dq_delete(&f.q, mkobj("ns", "b", "5"));
	expect_pop(&f, "ns/a: Deleted(2) Added(3) Deleted(4)");
	expect_pop(&f, "ns/b: Deleted(2) Added(3) Deleted(5)");
	ck_assert_ptr_null(cache_dq_pop(&f.q, NULL));
	qfix_free(&f);
}
END_TEST

START_TEST(test_delete_unknown_key_is_noop)
{
	qfix_t f;
	qfix_init(&f);
	cache_dq_delete(&f.q, mkobj("ns", "ghost", "9"));
	ck_assert_uint_eq(cache_dq_len(&f.q), 0);
	/* Queued but not yet known: the delete follows the add. */
	cache_dq_add(&f.q, CACHE_DELTA_ADDED, mkobj("ns", "new", "1"));
	cache_dq_delete(&f.q, mkobj("ns", "new", "2"));
	expect_pop(&f, "ns/new: Added(1) Deleted(2)");
	qfix_free(&f);
}
END_TEST

START_TEST(test_replace_tombstones_and_sync_count)
{
	qfix_t f;
	qfix_init(&f);
	/* Known: a, b, c. Queued (not processed): d added, then e added. */
	know(&f, mkobj("ns", "a", "1"));
	know(&f, mkobj("ns", "b", "1"));
	know(&f, mkobj("ns", "c", "1"));
	f.q.populated = false; /* as before a first list */
	cache_dq_add(&f.q, CACHE_DELTA_ADDED, mkobj("ns", "d", "1"));
	f.q.populated = false;
	/* The relist has a (changed) and d; b, c vanished while we were not watching. */
	ck_obj_t *items[] = {mkobj("ns", "a", "7"), mkobj("ns", "d", "7")};
	cache_dq_replace(&f.q, items, 2);
	ck_assert(!cache_dq_has_synced(&f.q));
	/* a, d listed + b, c tombstones = 4 keys before synced. */
	ck_assert_uint_eq(f.q.initial, 4);

	bool initial;
	int tomb = 0;
	char *s;
	int n = 0;
	while ((s = pop_str(&f, &initial)) != NULL) {
		ck_assert(initial);
		if (strncmp(s, "ns/a:", 5) == 0)
			ck_assert_str_eq(s, "ns/a: Replaced(7)");
		else if (strncmp(s, "ns/d:", 5) == 0)
			ck_assert_str_eq(s, "ns/d: Added(1) Replaced(7)");
		else if (strcmp(s, "ns/b: UnknownDeleted(1)") == 0 ||
		         strcmp(s, "ns/c: UnknownDeleted(1)") == 0)
			tomb++;
		else
			ck_abort_msg("unexpected %s", s);
		free(s);
		n++;
	}
	ck_assert_int_eq(n, 4);
	ck_assert_int_eq(tomb, 2);
	ck_assert(cache_dq_has_synced(&f.q));
	qfix_free(&f);
}
END_TEST

START_TEST(test_replace_tombstone_for_queued_key_uses_newest)
{
	qfix_t f;
	qfix_init(&f);
	know(&f, mkobj("ns", "a", "1"));
	/* Watch saw an update for a (queued, unprocessed), then the watch died and a
	 * was deleted: the relist's tombstone must carry the newest state, rv 2. */
	cache_dq_add(&f.q, CACHE_DELTA_UPDATED, mkobj("ns", "a", "2"));
	ck_obj_t *none[1];
	cache_dq_replace(&f.q, none, 0);
	expect_pop(&f, "ns/a: Updated(2) UnknownDeleted(2)");
	ck_assert_ptr_null(cache_dq_pop(&f.q, NULL));
	qfix_free(&f);
}
END_TEST

START_TEST(test_empty_first_replace_is_synced)
{
	qfix_t f;
	qfix_init(&f);
	ck_assert(!cache_dq_has_synced(&f.q));
	ck_obj_t *none[1];
	cache_dq_replace(&f.q, none, 0);
	ck_assert(cache_dq_has_synced(&f.q));
	qfix_free(&f);
}
END_TEST

START_TEST(test_resync_skips_queued)
{
	qfix_t f;
	qfix_init(&f);
	know(&f, mkobj("ns", "a", "1"));
	know(&f, mkobj("ns", "b", "1"));
	cache_dq_add(&f.q, CACHE_DELTA_UPDATED, mkobj("ns", "b", "2"));
	cache_dq_resync(&f.q);
	ck_assert_uint_eq(cache_dq_len(&f.q), 2);
	expect_pop(&f, "ns/b: Updated(2)"); /* no Sync appended behind a pending change */
	expect_pop(&f, "ns/a: Sync(1)");
	qfix_free(&f);
}
END_TEST

START_TEST(test_entries_recycled)
{
	qfix_t f;
	qfix_init(&f);
	for (int round = 0; round < 3000; round++) {
		char name[16];
		snprintf(name, sizeof(name), "o%d", round % 50);
		cache_dq_add(&f.q, CACHE_DELTA_ADDED, mkobj("ns", name, "1"));
		cache_dq_add(&f.q, CACHE_DELTA_UPDATED, mkobj("ns", name, "2"));
		cache_dq_add(&f.q, CACHE_DELTA_UPDATED, mkobj("ns", name, "3"));
		if (round % 3 == 0) {
			cache_dq_entry_t *e;
			while ((e = cache_dq_pop(&f.q, NULL)) != NULL)
				cache_dq_release(&f.q, e);
		}
	}
	ck_assert_uint_le(f.q.nspare, 1024);
	qfix_free(&f);
}
END_TEST

Suite *suite_cache_queue(void)
{
	Suite *s = suite_create("cache_queue");
	TCase *tc = tcase_create("dq");
	tcase_add_test(tc, test_fifo_order_and_grouping);
	tcase_add_test(tc, test_delete_dedup);
	tcase_add_test(tc, test_delete_add_delete_not_collapsed);
	tcase_add_test(tc, test_delete_unknown_key_is_noop);
	tcase_add_test(tc, test_replace_tombstones_and_sync_count);
	tcase_add_test(tc, test_replace_tombstone_for_queued_key_uses_newest);
	tcase_add_test(tc, test_empty_first_replace_is_synced);
	tcase_add_test(tc, test_resync_skips_queued);
	tcase_add_test(tc, test_entries_recycled);
	suite_add_tcase(s, tc);
	return s;
}
