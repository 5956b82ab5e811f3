/* Unit tests for the informer's consistency check (pkg/cache/consistency.c), with
 * the fake list-watch playing the API server and a fake clock. */
#include "test_cache_util.h"

#include <check.h>
#include <ev.h>

typedef struct cfx {
	struct ev_loop *loop;
	ck_clk_fake_t clk;
	ck_cache_fake_lw_t *fake;
	ck_cache_informer_t *inf;
} cfx_t;

static void cfx_init(cfx_t *f)
{
	memset(f, 0, sizeof(*f));
	f->loop = ev_loop_new(EVFLAG_AUTO);
	ck_clk_fake_init(&f->clk, 1000 * CK_NS_PER_SEC, 1700000000LL * (int64_t)CK_NS_PER_SEC);
	f->fake = ck_cache_fake_lw_new();
	ck_cache_informer_opts_t o = {
	    .clock = &f->clk.base,
	    .label_selector = "app=x",
	    .consistency_check_ms = 60000,
	};
	f->inf = ck_cache_informer_new(f->loop, &widget_type, ck_cache_fake_lw_source(f->fake), &o);
	ck_assert_int_eq(ck_cache_informer_start(f->inf, NULL), 0);
}

static void cfx_free(cfx_t *f)
{
	ck_cache_informer_free(f->inf);
	ck_cache_fake_lw_free(f->fake);
	ev_loop_destroy(f->loop);
}

static void respond(ck_cache_fake_req_t *r, ck_obj_t **items, size_t n, const char *rv,
                    const char *cont)
{
	for (size_t i = 0; i < n; i++)
		ck_cache_fake_req_item(r, items[i]);
	ck_cache_fake_req_meta(r, rv, cont);
	ck_cache_fake_req_finish(r, 200, NULL, NULL, 0);
}

/* a@1, b@2, c@3 listed at 10, then the watch moved b to 5: the store is at "5". */
static void cfx_synced(cfx_t *f)
{
	ck_obj_t *items[] = {mkobj("ns", "a", "1"), mkobj("ns", "b", "2"), mkobj("ns", "c", "3")};
	respond(ck_cache_fake_lw_last(f->fake, false), items, 3, "10", NULL);
	ck_cache_fake_req_event(ck_cache_fake_lw_last(f->fake, true), CK_WATCH_MODIFIED,
	                        mkobj("ns", "b", "11"));
	cache_informer_drain(f->inf);
	ck_assert(ck_cache_informer_has_synced(f->inf));
}

START_TEST(test_compare_counts_each_kind)
{
	cache_check_kv_t cached[] = {{"ns/b", "2"}, {"ns/a", "1"}, {"ns/x", "9"}};
	cache_check_kv_t server[] = {{"ns/c", "3"}, {"ns/a", "1"}, {"ns/b", "7"}};
	cache_check_diff_t d;
	cache_check_compare(cached, 3, server, 3, &d);
	ck_assert_uint_eq(d.missing, 1);
	ck_assert_uint_eq(d.extra, 1);
	ck_assert_uint_eq(d.stale, 1);
	ck_assert_str_eq(d.sample, "stale ns/b, missing ns/c, extra ns/x");
	free(d.sample);
	cache_check_compare(NULL, 0, NULL, 0, &d); /* an empty namespace: no arrays */
	ck_assert_uint_eq(d.missing + d.extra + d.stale, 0);
	free(d.sample);
}
END_TEST

START_TEST(test_check_lists_exact_at_the_store_rv_and_reports)
{
	cfx_t f;
	cfx_init(&f);
	cfx_synced(&f);
	size_t lists = ck_cache_fake_lw_count(f.fake, false);
	ck_assert(cache_check_run_now(cache_informer_check(f.inf)));
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), lists + 1);
	ck_cache_fake_req_t *r = ck_cache_fake_lw_last(f.fake, false);
	const ck_list_opts_t *o = ck_cache_fake_req_opts(r);
	ck_assert_str_eq(o->resource_version, "11");
	ck_assert_str_eq(o->resource_version_match, "Exact");
	ck_assert_str_eq(o->label_selector, "app=x");
	ck_assert_int_eq(o->limit, 500);

	/* Two pages that agree with the store. */
	ck_obj_t *p1[] = {mkobj("ns", "a", "1"), mkobj("ns", "b", "11")};
	respond(r, p1, 2, "11", "tok");
	r = ck_cache_fake_lw_last(f.fake, false);
	ck_assert_str_eq(ck_cache_fake_req_opts(r)->continue_token, "tok");
	ck_obj_t *p2[] = {mkobj("ns", "c", "3")};
	respond(r, p2, 1, "11", NULL);
	ck_cache_stats_t st;
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_uint_eq(st.consistency_checks, 1);
	ck_assert_uint_eq(st.consistency_divergent, 0);
	ck_assert_uint_eq(st.consistency_last_diff, 0);

	/* The server says otherwise (a lost event): reported, the store untouched. */
	ck_assert(cache_check_run_now(cache_informer_check(f.inf)));
	ck_obj_t *p3[] = {mkobj("ns", "a", "12"), mkobj("ns", "d", "13")};
	respond(ck_cache_fake_lw_last(f.fake, false), p3, 2, "11", NULL);
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_uint_eq(st.consistency_checks, 2);
	ck_assert_uint_eq(st.consistency_divergent, 1);
	ck_assert_uint_eq(st.consistency_last_diff, 4); /* a stale, b and c extra, d missing */
	ck_assert_uint_eq(st.objects, 3);
	ck_obj_t *a = ck_cache_store_get(ck_cache_informer_store(f.inf), "ns/a");
	ck_assert_str_eq(a->rv, "1");
	ck_obj_unref(a);
	cfx_free(&f);
}
END_TEST

START_TEST(test_check_waits_for_a_quiet_store_and_skips_compacted)
{
	cfx_t f;
	cfx_init(&f);
	/* Not synced yet: no round. */
	ck_assert(!cache_check_run_now(cache_informer_check(f.inf)));
	cfx_synced(&f);
	/* An event received but not yet applied: the store is not at the last RV. */
	ck_cache_fake_req_event(ck_cache_fake_lw_last(f.fake, true), CK_WATCH_ADDED,
	                        mkobj("ns", "e", "14"));
	ck_assert(!cache_check_run_now(cache_informer_check(f.inf)));
	cache_informer_drain(f.inf);
	ck_assert(cache_check_run_now(cache_informer_check(f.inf)));
	ck_cache_fake_req_finish(ck_cache_fake_lw_last(f.fake, false), 410, "Expired",
	                         "too old resource version", 0);
	ck_cache_stats_t st;
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_uint_eq(st.consistency_checks, 0);
	ck_assert_uint_eq(st.consistency_skipped, 1);
	ck_assert_uint_eq(st.consistency_divergent, 0);
	/* A round in flight is not started twice; shutdown cancels it. */
	ck_assert(cache_check_run_now(cache_informer_check(f.inf)));
	ck_assert(!cache_check_run_now(cache_informer_check(f.inf)));
	ck_cache_fake_req_t *r = ck_cache_fake_lw_last(f.fake, false);
	ck_cache_informer_shutdown(f.inf);
	ck_assert(ck_cache_fake_req_cancelled(r));
	cfx_free(&f);
}
END_TEST

START_TEST(test_check_off_by_default)
{
	ck_cache_fake_lw_t *fake = ck_cache_fake_lw_new();
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	ck_cache_informer_t *inf =
	    ck_cache_informer_new(loop, &widget_type, ck_cache_fake_lw_source(fake), NULL);
	ck_assert_ptr_null(cache_informer_check(inf));
	ck_cache_informer_free(inf);
	ck_cache_fake_lw_free(fake);
	ev_loop_destroy(loop);
}
END_TEST

Suite *suite_cache_consistency(void);
Suite *suite_cache_consistency(void)
{
	Suite *s = suite_create("cache_consistency");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_compare_counts_each_kind);
	tcase_add_test(tc, test_check_lists_exact_at_the_store_rv_and_reports);
	tcase_add_test(tc, test_check_waits_for_a_quiet_store_and_skips_compacted);
	tcase_add_test(tc, test_check_off_by_default);
	suite_add_tcase(s, tc);
	return s;
}
