/*
 * Unit tests for pkg/cache's reflector, informer and factory, on the in-process
 * fake list/watch source and a fake clock: the test plays the API server and
 * moves time by hand; the loop is never run (processing and timers are driven
 * through the test hooks).
 */
#include "test_cache_util.h"

#include <ckube/log.h>
#include <ckube/workqueue.h>

#include <check.h>
#include <ev.h>
#include <pthread.h>
#include <unistd.h>

typedef struct fx {
	struct ev_loop *loop;
	ck_clk_fake_t clk;
	ck_cache_fake_lw_t *fake;
	ck_cache_informer_t *inf;
	rec_t rec;
	ck_cache_handler_reg_t *reg;
	int werr_calls;
	int werr_nonhealing;
	char *werr_last;
} fx_t;

static void on_werr(void *ud, ck_cache_informer_t *inf, const char *msg, const ck_result_t *res,
                    bool healing)
{
	fx_t *f = ud;
	(void)inf;
	(void)res;
	f->werr_calls++;
	f->werr_nonhealing += !healing;
	free(f->werr_last);
	f->werr_last = ck_xstrdup(msg);
}

static void fx_init(fx_t *f, const ck_cache_informer_opts_t *extra)
{
	memset(f, 0, sizeof(*f));
	f->loop = ev_loop_new(EVFLAG_AUTO);
	ck_clk_fake_init(&f->clk, 1000 * CK_NS_PER_SEC, 1700000000LL * (int64_t)CK_NS_PER_SEC);
	f->fake = ck_cache_fake_lw_new();
	ck_cache_informer_opts_t o = extra ? *extra : (ck_cache_informer_opts_t){0};
	o.clock = &f->clk.base;
	o.on_watch_error = on_werr;
	o.watch_error_ud = f;
	f->inf = ck_cache_informer_new(f->loop, &widget_type, ck_cache_fake_lw_source(f->fake), &o);
}

static void fx_start(fx_t *f)
{
	f->reg = ck_cache_informer_add_handler(f->inf, &rec_handler, &f->rec);
	ck_assert_int_eq(ck_cache_informer_start(f->inf, NULL), 0);
}

static void fx_free(fx_t *f)
{
	ck_cache_informer_free(f->inf);
	ck_cache_fake_lw_free(f->fake);
	ev_loop_destroy(f->loop);
	rec_reset(&f->rec);
	free(f->werr_last);
}

static ck_cache_fake_req_t *last_list(fx_t *f)
{
	return ck_cache_fake_lw_last(f->fake, false);
}
static ck_cache_fake_req_t *last_watch(fx_t *f)
{
	return ck_cache_fake_lw_last(f->fake, true);
}

/* Answers the current list request with items (taken) and ends it. */
static void respond_list(fx_t *f, ck_obj_t **items, size_t n, const char *rv, const char *cont)
{
	ck_cache_fake_req_t *l = last_list(f);
	ck_assert(ck_cache_fake_req_active(l));
	for (size_t i = 0; i < n; i++)
		ck_cache_fake_req_item(l, items[i]);
	ck_cache_fake_req_meta(l, rv, cont);
	ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
}

static void advance_ms(fx_t *f, uint64_t ms)
{
	ck_clk_fake_advance(&f->clk, ms * CK_NS_PER_MS);
	cache_informer_tick(f->inf);
}

static uint64_t now_ns(fx_t *f)
{
	return ck_clk_mono_ns(&f->clk.base);
}

/* The time until the reflector's next retry. */
static uint64_t retry_delay(fx_t *f)
{
	return cache_reflector_deadline(cache_informer_reflector(f->inf)) - now_ns(f);
}

/* Lists a and b at rv 10, drains: a synced informer watching from "10". */
static void fx_synced(fx_t *f)
{
	fx_start(f);
	ck_obj_t *items[] = {mkobj("ns", "a", "1"), mkobj("ns", "b", "2")};
	respond_list(f, items, 2, "10", NULL);
	cache_informer_drain(f->inf);
	ck_assert(ck_cache_informer_has_synced(f->inf));
	rec_reset(&f->rec);
}

static int count_substr(const char *s, const char *sub)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, sub)) != NULL; p += strlen(sub))
		n++;
	return n;
}

/* ---------------------------------------------------------------- list */

START_TEST(test_initial_list_paged_then_watch)
{
	fx_t f;
	fx_init(&f, NULL);
	fx_start(&f);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	const ck_list_opts_t *o = ck_cache_fake_req_opts(last_list(&f));
	ck_assert_str_eq(o->resource_version, "0");
	ck_assert_int_eq(o->limit, 500);
	ck_assert_ptr_null(o->continue_token);

	ck_obj_t *p1[] = {mkobj("ns", "a", "1"), mkobj("ns", "b", "2")};
	respond_list(&f, p1, 2, "40", "tok-1");
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 2);
	o = ck_cache_fake_req_opts(last_list(&f));
	ck_assert_str_eq(o->continue_token, "tok-1");
	ck_assert_ptr_null(o->resource_version); /* the token carries it */
	ck_assert_int_eq(o->limit, 500);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 0);

	ck_obj_t *p2[] = {mkobj("ns", "c", "3")};
	respond_list(&f, p2, 1, "50", NULL);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 1);
	o = ck_cache_fake_req_opts(last_watch(&f));
	ck_assert_str_eq(o->resource_version, "50");
	ck_assert(o->allow_watch_bookmarks);
	ck_assert(!o->send_initial_events);
	ck_assert_int_ge(o->timeout_seconds, 300);
	ck_assert_int_lt(o->timeout_seconds, 600);

	/* Listed is not synced: synced is once the list has been processed. */
	ck_assert(!ck_cache_informer_has_synced(f.inf));
	ck_assert(!ck_cache_handler_has_synced(f.reg));
	char *why = ck_cache_informer_sync_reason(f.inf);
	ck_assert_ptr_nonnull(why);
	free(why);
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_has_synced(f.inf));
	ck_assert(ck_cache_handler_has_synced(f.reg));
	ck_assert_ptr_null(ck_cache_informer_sync_reason(f.inf));
	ck_assert_str_eq(rec_text(&f.rec),
	                 "add ns/a 1 initial\nadd ns/b 2 initial\nadd ns/c 3 initial\n");

	ck_cache_stats_t st;
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_uint_eq(st.objects, 3);
	ck_assert_uint_eq(st.lists, 1);
	ck_assert_uint_eq(st.relists, 0);
	ck_assert(st.synced);
	ck_assert_int_eq(st.last_event_wall_ns, ck_clk_wall_ns(&f.clk.base));
	fx_free(&f);
}
END_TEST

START_TEST(test_selectors_reach_list_and_watch)
{
	ck_cache_informer_opts_t o = {
	    .label_selector = "app=web", .field_selector = "metadata.name!=x", .page_size = 100};
	fx_t f;
	fx_init(&f, &o);
	fx_start(&f);
	const ck_list_opts_t *lo = ck_cache_fake_req_opts(last_list(&f));
	ck_assert_str_eq(lo->label_selector, "app=web");
	ck_assert_str_eq(lo->field_selector, "metadata.name!=x");
	ck_assert_int_eq(lo->limit, 100);
	respond_list(&f, NULL, 0, "3", NULL);
	const ck_list_opts_t *wo = ck_cache_fake_req_opts(last_watch(&f));
	ck_assert_str_eq(wo->label_selector, "app=web");
	ck_assert_str_eq(wo->field_selector, "metadata.name!=x");
	fx_free(&f);
}
END_TEST

/* A selector holding namespace "in" only. */
static ck_shard_selector_t *only_ns_in(void)
{
	uint64_t h = ck_shard_hash("in", 2);
	return ck_shard_selector_new(CK_SHARD_NAMESPACE, &(ck_shard_range_t){h, h + 1}, 1, NULL);
}

/* A server that ignores shardSelector: the informer filters on its side. */
START_TEST(test_shard_selector_client_side)
{
	ck_shard_selector_t *sel = only_ns_in();
	ck_cache_informer_opts_t o = {.shard_selector = sel,
	                              .streaming_list = CK_CACHE_STREAMING_OFF};
	fx_t f;
	fx_init(&f, &o);
	ck_shard_selector_free(sel); /* copied */
	fx_start(&f);
	const char *wire = ck_cache_fake_req_opts(last_list(&f))->shard_selector;
	ck_assert_ptr_nonnull(wire);
	ck_assert_str_eq(wire, "shardRange(object.metadata.namespace, '0x08b73807b55c4bbe', "
	                       "'0x08b73807b55c4bbf')");
	ck_cache_stats_t st;
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_int_eq(st.shard_mode, CK_CACHE_SHARD_UNKNOWN);
	ck_obj_t *items[] = {mkobj("in", "a", "1"), mkobj("out", "b", "2"), mkobj("in", "c", "3")};
	respond_list(&f, items, 3, "10", NULL);
	cache_informer_drain(f.inf);
	ck_assert_str_eq(rec_text(&f.rec), "add in/a 1 initial\nadd in/c 3 initial\n");
	ck_assert_str_eq(ck_cache_fake_req_opts(last_watch(&f))->shard_selector, wire);
	/* Watch events outside are dropped, but the resourceVersion moves on. */
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_ADDED, mkobj("out", "d", "11"));
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_ADDED, mkobj("in", "e", "12"));
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_MODIFIED, mkobj("out", "b", "13"));
	cache_informer_drain(f.inf);
	ck_assert_str_eq(rec_text(&f.rec), "add in/a 1 initial\nadd in/c 3 initial\nadd in/e 12\n");
	ck_assert_str_eq(cache_reflector_last_rv(cache_informer_reflector(f.inf)), "13");
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_int_eq(st.shard_mode, CK_CACHE_SHARD_CLIENT);
	ck_assert_uint_eq(st.shard_dropped, 3);
	ck_assert_uint_eq(st.objects, 3);
	fx_free(&f);
}
END_TEST

/* A server that filters: nothing outside arrives, the mode says server-side; a
 * streaming list carries the selector too; a later stray object turns it client-side. */
START_TEST(test_shard_selector_server_side)
{
	ck_shard_selector_t *sel = only_ns_in();
	ck_cache_informer_opts_t o = {.shard_selector = sel,
	                              .streaming_list = CK_CACHE_STREAMING_ON};
	fx_t f;
	fx_init(&f, &o);
	ck_shard_selector_free(sel);
	fx_start(&f);
	ck_cache_fake_req_t *w = last_watch(&f);
	ck_assert(ck_cache_fake_req_opts(w)->send_initial_events);
	ck_assert_ptr_nonnull(ck_cache_fake_req_opts(w)->shard_selector);
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("in", "a", "5"));
	ck_cache_fake_req_event(w, CK_WATCH_BOOKMARK, mkbookmark("7", true));
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_has_synced(f.inf));
	ck_cache_stats_t st;
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_int_eq(st.shard_mode, CK_CACHE_SHARD_SERVER);
	ck_assert_str_eq(ck_cache_shard_mode_name(st.shard_mode), "server-side");
	ck_assert_uint_eq(st.shard_dropped, 0);
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("out", "x", "8"));
	cache_informer_drain(f.inf);
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_int_eq(st.shard_mode, CK_CACHE_SHARD_CLIENT);
	ck_assert_uint_eq(st.shard_dropped, 1);
	ck_assert_str_eq(rec_text(&f.rec), "add in/a 5 initial\n");
	fx_free(&f);
}
END_TEST

/* An empty list says nothing about the server: the mode stays unknown until objects
 * arrive (it once turned server-side on an empty list). */
START_TEST(test_shard_selector_empty_list)
{
	ck_shard_selector_t *sel = only_ns_in();
	ck_cache_informer_opts_t o = {.shard_selector = sel,
	                              .streaming_list = CK_CACHE_STREAMING_OFF};
	fx_t f;
	fx_init(&f, &o);
	ck_shard_selector_free(sel);
	fx_start(&f);
	respond_list(&f, NULL, 0, "10", NULL);
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_has_synced(f.inf));
	ck_cache_stats_t st;
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_str_eq(ck_cache_shard_mode_name(st.shard_mode), "unknown");
	fx_free(&f);
}
END_TEST

/* The range holding namespace ns's hash only. */
static ck_shard_range_t ns_range(const char *ns)
{
	uint64_t h = ck_shard_hash(ns, strlen(ns));
	return (ck_shard_range_t){h, h + 1};
}

/*
 * Parts on a server that filters: the first part lists alone, the others wait for
 * its list, then each has its own list and watch; a part's list replaces only its
 * range; a removed part's objects leave the store untold, its queued deltas are
 * dropped, and the same id can come back (and sync again).
 */
START_TEST(test_shard_parts)
{
	ck_cache_informer_opts_t o = {.shard_parts = true,
	                              .shard_field = CK_SHARD_NAMESPACE,
	                              .streaming_list = CK_CACHE_STREAMING_OFF};
	fx_t f;
	fx_init(&f, &o);
	fx_start(&f);
	/* No part yet: nothing to list, and nothing to wait for. */
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 0);
	ck_assert(ck_cache_informer_has_synced(f.inf));
	ck_assert(!ck_cache_informer_part_synced(f.inf, 2));

	ck_assert_int_eq(ck_cache_informer_add_part(f.inf, 2, ns_range("b"), NULL), 0);
	char *err = NULL;
	ck_assert_int_eq(ck_cache_informer_add_part(f.inf, 2, ns_range("b"), &err), -1);
	ck_assert_str_eq(err,
	                 "cache: informer widgets.test.example.com: add part 2: already a part");
	free(err);
	ck_assert_ptr_nonnull(
	    strstr(ck_cache_fake_req_opts(last_list(&f))->shard_selector, "0xaf63df4c8601f1a5"));
	/* Part 1 waits for the probe's answer. */
	ck_assert_int_eq(ck_cache_informer_add_part(f.inf, 1, ns_range("a"), NULL), 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	ck_obj_t *lb[] = {mkobj("b", "y", "1")};
	respond_list(&f, lb, 1, "10", NULL);
	ck_cache_fake_req_t *w2 = last_watch(&f);
	ck_assert(!ck_cache_informer_part_synced(f.inf, 2)); /* listed, not yet processed */
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_part_synced(f.inf, 2));
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	cache_informer_tick(f.inf); /* the server filters: part 1 starts */
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 2);

	ck_obj_t *la[] = {mkobj("a", "x", "3")};
	respond_list(&f, la, 1, "11", NULL);
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_part_synced(f.inf, 1));
	/* Part 1's list kept part 2's object. */
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(f.inf)), 2);
	ck_assert_str_eq(rec_text(&f.rec), "add b/y 1 initial\nadd a/x 3 initial\n");

	/* An event of part 1 still queued when it goes is dropped with it. */
	ck_cache_fake_req_t *w1 = last_watch(&f);
	ck_cache_fake_req_event(w1, CK_WATCH_ADDED, mkobj("a", "z", "12"));
	ck_cache_informer_remove_part(f.inf, 1);
	ck_assert(ck_cache_fake_req_cancelled(w1));
	cache_informer_drain(f.inf);
	ck_assert(!ck_cache_informer_part_synced(f.inf, 1));
	/* Economy: part 2 kept its watch (no relist) and its object. */
	ck_assert(ck_cache_fake_req_active(w2));
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 2);
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(f.inf)), 1);
	ck_obj_t *left = ck_cache_store_get(ck_cache_informer_store(f.inf), "b/y");
	ck_assert_ptr_nonnull(left);
	ck_obj_unref(left);
	ck_assert_str_eq(rec_text(&f.rec), "add b/y 1 initial\nadd a/x 3 initial\n");

	/* Back again: listed anew at once, synced anew. */
	ck_assert_int_eq(ck_cache_informer_add_part(f.inf, 1, ns_range("a"), NULL), 0);
	ck_obj_t *la2[] = {mkobj("a", "x", "13")};
	respond_list(&f, la2, 1, "13", NULL);
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_part_synced(f.inf, 1));
	ck_assert_str_eq(rec_text(&f.rec),
	                 "add b/y 1 initial\nadd a/x 3 initial\nadd a/x 13 initial\n");
	ck_cache_stats_t st;
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_uint_eq(st.lists, 3); /* the removed part's list still counts */
	ck_assert_uint_eq(st.shard_dropped, 0);
	ck_assert_int_eq(st.shard_mode, CK_CACHE_SHARD_SERVER);
	ck_assert_uint_eq(st.objects, 2);
	fx_free(&f);
}
END_TEST

/*
 * Parts on a server that does not filter: each part's list would carry everything,
 * so once the probe's list shows it, the parts share one list and watch over the
 * union of their ranges; an added part lists the union again (once for a burst),
 * a removed one costs no list; what the server sends outside the parts is dropped.
 * Before, every part listed and watched the whole collection on its own.
 */
START_TEST(test_shard_parts_merged)
{
	ck_cache_informer_opts_t o = {.shard_parts = true,
	                              .shard_field = CK_SHARD_NAMESPACE,
	                              .streaming_list = CK_CACHE_STREAMING_OFF};
	fx_t f;
	fx_init(&f, &o);
	fx_start(&f);
	ck_assert_int_eq(ck_cache_informer_add_part(f.inf, 2, ns_range("b"), NULL), 0);
	ck_assert_int_eq(ck_cache_informer_add_part(f.inf, 1, ns_range("a"), NULL), 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	ck_obj_t *l1[] = {mkobj("b", "y", "1"), mkobj("a", "x", "2"), mkobj("c", "z", "3")};
	respond_list(&f, l1, 3, "10", NULL);
	ck_cache_fake_req_t *w2 = last_watch(&f);
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_part_synced(f.inf, 2));
	ck_assert(!ck_cache_informer_part_synced(f.inf, 1));
	cache_informer_tick(f.inf); /* strays seen: merged */
	ck_assert(ck_cache_fake_req_cancelled(w2));
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 2);
	const char *sel = ck_cache_fake_req_opts(last_list(&f))->shard_selector;
	ck_assert_ptr_nonnull(strstr(sel, "0xaf63df4c8601f1a5")); /* b */
	ck_assert_ptr_nonnull(strstr(sel, "||"));
	ck_obj_t *l2[] = {mkobj("b", "y", "1"), mkobj("a", "x", "2"), mkobj("c", "z", "3")};
	respond_list(&f, l2, 3, "11", NULL);
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_part_synced(f.inf, 1));
	ck_assert(ck_cache_informer_part_synced(f.inf, 2));
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(f.inf)), 2);
	ck_assert_str_eq(rec_text(&f.rec), "add b/y 1 initial\nadd a/x 2 initial\n");

	/* Two parts added in a burst: one list of the union, after the delay. */
	ck_cache_fake_req_t *wm = last_watch(&f);
	ck_assert_int_eq(ck_cache_informer_add_part(f.inf, 3, ns_range("c"), NULL), 0);
	ck_assert_int_eq(ck_cache_informer_add_part(f.inf, 4, ns_range("d"), NULL), 0);
	ck_assert(ck_cache_fake_req_cancelled(wm));
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 2);
	advance_ms(&f, 250);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 3);
	ck_obj_t *l3[] = {mkobj("b", "y", "1"), mkobj("a", "x", "2"), mkobj("c", "z", "3"),
	                  mkobj("e", "q", "4")};
	respond_list(&f, l3, 4, "12", NULL);
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_part_synced(f.inf, 3));
	ck_assert(ck_cache_informer_part_synced(f.inf, 4));
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(f.inf)), 3);

	/* A part goes: no list; its objects and later events are dropped. */
	wm = last_watch(&f);
	ck_cache_informer_remove_part(f.inf, 1);
	ck_assert(ck_cache_fake_req_active(wm));
	ck_cache_fake_req_event(wm, CK_WATCH_ADDED, mkobj("a", "w", "13"));
	ck_cache_fake_req_event(wm, CK_WATCH_ADDED, mkobj("d", "v", "14"));
	cache_informer_drain(f.inf);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 3);
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(f.inf)), 3);
	ck_obj_t *gone = ck_cache_store_get(ck_cache_informer_store(f.inf), "a/x");
	ck_assert_ptr_null(gone);
	ck_assert_str_eq(rec_text(&f.rec), "add b/y 1 initial\nadd a/x 2 initial\n"
	                                   "add c/z 3 initial\nadd d/v 14\n");
	ck_cache_stats_t st;
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_int_eq(st.shard_mode, CK_CACHE_SHARD_CLIENT);
	ck_assert_uint_eq(st.lists, 3);

	/* A trickle of adds, each within the delay of the one before, still lists the
	 * union within a second of the first: parts added at 0, 150, ... 900 ms list
	 * at 1,000 ms, not 200 ms after the last add. */
	static const char *const more[] = {"f", "g", "h", "i", "j", "k", "l"};
	for (int i = 0; i < 7; i++) {
		ck_assert_int_eq(ck_cache_informer_add_part(f.inf, 10 + i, ns_range(more[i]), NULL),
		                 0);
		advance_ms(&f, 150);
		ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), i < 6 ? 3 : 4);
	}
	fx_free(&f);
}
END_TEST

/* Without a selector nothing is sent and the mode is none. */
START_TEST(test_shard_selector_none)
{
	fx_t f;
	fx_init(&f, NULL);
	fx_start(&f);
	ck_cache_fake_req_t *r = ck_cache_fake_lw_last(f.fake, true);
	if (r == NULL)
		r = last_list(&f);
	ck_assert_ptr_null(ck_cache_fake_req_opts(r)->shard_selector);
	ck_cache_stats_t st;
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_int_eq(st.shard_mode, CK_CACHE_SHARD_NONE);
	fx_free(&f);
}
END_TEST

START_TEST(test_expired_continue_falls_back_to_full_list)
{
	fx_t f;
	fx_init(&f, NULL);
	fx_start(&f);
	ck_obj_t *p1[] = {mkobj("ns", "a", "1"), mkobj("ns", "b", "2")};
	respond_list(&f, p1, 2, "40", "tok-1");
	ck_cache_fake_req_finish(last_list(&f), 410, "Expired",
	                         "The provided continue parameter is too old", 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 3);
	const ck_list_opts_t *o = ck_cache_fake_req_opts(last_list(&f));
	ck_assert_int_eq(o->limit, 0);
	ck_assert_ptr_null(o->continue_token);
	/* At the resourceVersion first asked for ("0": the watch cache), as client-go's
	 * pager does, not "" (a quorum read of the whole collection from etcd). */
	ck_assert_str_eq(o->resource_version, "0");
	ck_obj_t *all[] = {mkobj("ns", "a", "5"), mkobj("ns", "c", "6")};
	respond_list(&f, all, 2, "60", NULL);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_watch(&f))->resource_version, "60");
	cache_informer_drain(f.inf);
	/* The first page's objects are void: only the full list counts. */
	ck_assert_str_eq(rec_text(&f.rec), "add ns/a 5 initial\nadd ns/c 6 initial\n");
	ck_assert_int_eq(f.werr_calls, 0);
	fx_free(&f);
}
END_TEST

START_TEST(test_list_gone_and_too_large_relist_from_empty_rv)
{
	fx_t f;
	fx_init(&f, NULL);
	fx_synced(&f);
	/* A watch failure that needs a relist: the relist asks for the last RV... */
	ck_cache_fake_req_finish(last_watch(&f), 500, "InternalError", "boom", 0);
	advance_ms(&f, 2000); /* after 500: relist (client-go), from the last RV */
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 1);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 2);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_list(&f))->resource_version, "10");
	/* No limit: the watch cache serves it, at a version its watches can follow. */
	ck_assert_int_eq(ck_cache_fake_req_opts(last_list(&f))->limit, 0);
	/* ... and when that RV is compacted away, at once the most recent state. */
	ck_cache_fake_req_finish(last_list(&f), 410, "Expired", "too old resource version: 10 (99)",
	                         0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 3);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_list(&f))->resource_version, "");
	ck_obj_t *items[] = {mkobj("ns", "a", "1")};
	respond_list(&f, items, 1, "100", NULL);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_watch(&f))->resource_version, "100");

	/* Too large RV (504 with the cause) on a watch: a relist at the last RV, as for
	 * any watch error (client-go); told "too large" again, the list asks for "". */
	ck_cache_fake_req_t *w = last_watch(&f);
	ck_cache_fake_req_finish(w, 504, "Timeout", "Too large resource version: 200, current: 100",
	                         0);
	advance_ms(&f, 60000);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 4);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_list(&f))->resource_version, "100");
	ck_cache_fake_req_finish(last_list(&f), 504, "Timeout",
	                         "Too large resource version: 100, current: 50", 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 5);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_list(&f))->resource_version, "");
	fx_free(&f);
}
END_TEST

START_TEST(test_relist_pages_only_where_the_server_pages)
{
	fx_t f;
	fx_init(&f, NULL);
	fx_start(&f);
	/* The first list (RV 0) came in pages: no watch cache; relists keep paging. */
	ck_obj_t *p1[] = {mkobj("ns", "a", "1")};
	respond_list(&f, p1, 1, "40", "tok-1");
	ck_obj_t *p2[] = {mkobj("ns", "b", "2")};
	respond_list(&f, p2, 1, "40", NULL);
	ck_cache_fake_req_finish(last_watch(&f), 400, "BadRequest", "odd", 0);
	advance_ms(&f, 1700);
	const ck_list_opts_t *o = ck_cache_fake_req_opts(last_list(&f));
	ck_assert_str_eq(o->resource_version, "40");
	ck_assert_int_eq(o->limit, 500);
	fx_free(&f);
}
END_TEST

START_TEST(test_watch_gone_at_listed_rv_relists_from_that_rv)
{
	/* A watch told 410 at once, at the RV a list just gave, relists from that RV, not
	 * from "" (client-go: an expired watch does not make the RV "unavailable"; a list
	 * at an RV is "not older than", served by the watch cache). Only if that list is
	 * told 410 too does the next one ask for the most recent state. */
	fx_t f;
	fx_init(&f, NULL);
	fx_synced(&f); /* listed at "10", watching from "10" */
	ck_cache_fake_req_error_event(last_watch(&f), 410, "Expired",
	                              "too old resource version: 10 (15)");
	cache_informer_tick(f.inf);
	advance_ms(&f, 1700);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 2);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_list(&f))->resource_version, "10");
	ck_cache_fake_req_finish(last_list(&f), 410, "Expired", "too old resource version", 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 3);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_list(&f))->resource_version, "");
	ck_obj_t *items[] = {mkobj("ns", "a", "1")};
	respond_list(&f, items, 1, "20", NULL);
	/* A watch that delivered data before its 410 relists from its last RV, as usual. */
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_BOOKMARK, mkbookmark("25", false));
	ck_cache_fake_req_error_event(last_watch(&f), 410, "Expired", "too old resource version");
	cache_informer_tick(f.inf);
	advance_ms(&f, 5000);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_list(&f))->resource_version, "25");
	fx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- watch */

START_TEST(test_watch_events_bookmark_and_clean_close)
{
	fx_t f;
	fx_init(&f, NULL);
	fx_synced(&f);
	ck_cache_fake_req_t *w = last_watch(&f);
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "c", "11"));
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj("ns", "a", "12"));
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj("ns", "c", "13"));
	ck_cache_fake_req_event(w, CK_WATCH_BOOKMARK, mkbookmark("20", false));
	cache_informer_drain(f.inf);
	/* Deltas in the order the server sent them, across keys (RealFIFO). */
	ck_assert_str_eq(rec_text(&f.rec), "add ns/c 11\nupdate ns/a 1->12\ndelete ns/c 13\n");
	ck_assert_str_eq(cache_reflector_last_rv(cache_informer_reflector(f.inf)), "20");
	/* The server's timeout closes the stream: re-watch from the bookmark, no relist. */
	ck_clk_fake_advance(&f.clk, 300 * CK_NS_PER_SEC);
	ck_cache_fake_req_finish(w, 200, NULL, NULL, 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 2);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_watch(&f))->resource_version, "20");
	ck_cache_stats_t st;
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_uint_eq(st.watch_restarts, 1);
	ck_assert_uint_eq(st.events, 4);
	ck_assert_uint_eq(st.errors, 0);
	ck_assert_int_eq(f.werr_calls, 0);
	fx_free(&f);
}
END_TEST

START_TEST(test_watch_gone_relists_with_tombstones)
{
	fx_t f;
	fx_init(&f, NULL);
	fx_start(&f);
	ck_obj_t *items[] = {mkobj("ns", "a", "1"), mkobj("ns", "b", "2"), mkobj("ns", "c", "3")};
	respond_list(&f, items, 3, "10", NULL);
	cache_informer_drain(f.inf);
	rec_reset(&f.rec);
	ck_cache_fake_req_t *w = last_watch(&f);
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj("ns", "c", "11"));
	cache_informer_drain(f.inf);
	/* Compaction: the watch is told 410; b is deleted and d created meanwhile. */
	ck_cache_fake_req_error_event(w, 410, "Expired", "too old resource version: 11 (50)");
	cache_informer_tick(f.inf); /* the ERROR ends the watch on the next tick */
	ck_assert(ck_cache_fake_req_cancelled(w));
	ck_assert_int_eq(f.werr_calls, 0); /* 410 is routine: not reported */
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	advance_ms(&f, 1700); /* first backoff is at most 1.6 s */
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 2);
	ck_obj_t *relist[] = {mkobj("ns", "a", "1"), mkobj("ns", "d", "60")};
	respond_list(&f, relist, 2, "60", NULL);
	cache_informer_drain(f.inf);
	/* c's delete was delivered once (by the watch), b's once (by the relist, as a
	 * tombstone with its last known state), a unchanged is a resync for nobody. */
	ck_assert_int_eq(f.rec.deletes, 2);
	ck_assert_int_eq(f.rec.unknown_deletes, 1);
	ck_assert_int_eq(count_substr(rec_text(&f.rec), "delete ns/c "), 1);
	ck_assert_ptr_nonnull(strstr(rec_text(&f.rec), "delete ns/b 2 unknown\n"));
	ck_assert_ptr_nonnull(strstr(rec_text(&f.rec), "add ns/d 60\n"));
	ck_assert_int_eq(f.rec.updates, 0);
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(f.inf)), 2);
	ck_cache_stats_t st;
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_uint_eq(st.relists, 1);
	fx_free(&f);
}
END_TEST

START_TEST(test_watch_closed_at_once_is_an_error)
{
	/* client-go's "very short watch": closed within 1 s without an event ends the
	 * ListAndWatch round -- a relist after backoff, not a re-watch. */
	fx_t f;
	fx_init(&f, NULL);
	fx_synced(&f);
	ck_cache_fake_req_finish(last_watch(&f), 200, NULL, NULL, 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 1); /* no hot loop */
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	ck_assert_int_eq(f.werr_calls,
	                 0); /* retried as routine: client-go's WatchErrorHandler is not called */
	advance_ms(&f, 1700);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 1);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 2);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_list(&f))->resource_version, "10");
	fx_free(&f);
}
END_TEST

START_TEST(test_transport_error_rewatches_without_relist)
{
	/* A connection dropped mid-stream is a stream that ended (client-go's stream
	 * watcher takes a probable EOF for a close): re-watch at once from the last RV,
	 * no backoff, nothing reported. */
	fx_t f;
	fx_init(&f, NULL);
	fx_synced(&f);
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_MODIFIED, mkobj("ns", "a", "15"));
	ck_cache_fake_req_finish_transport(last_watch(&f), 56, 200, "connection reset by peer");
	ck_assert_int_eq(f.werr_calls, 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 2);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_watch(&f))->resource_version, "15");

	/* Refused at connect (the server restarting): back off, then re-watch. */
	ck_cache_fake_req_finish(last_watch(&f), 0, NULL, "connection refused", 0);
	ck_assert_int_eq(f.werr_calls,
	                 0); /* retried as routine: client-go's WatchErrorHandler is not called */
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 2);
	advance_ms(&f, 1700);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 3);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_watch(&f))->resource_version, "15");

	/* Any other failure before an answer (here a timeout) is not "retriable" for a
	 * watch: the round ends, a relist after backoff. */
	ck_clk_fake_advance(&f.clk, 5 * CK_NS_PER_SEC);
	ck_cache_fake_req_finish_transport(last_watch(&f), 28, 0, "connection timed out");
	ck_assert_int_eq(f.werr_calls, 1); /* reported: the watch request itself failed */
	advance_ms(&f, 3300);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 3);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 2);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_list(&f))->resource_version, "15");
	fx_free(&f);
}
END_TEST

START_TEST(test_watch_5xx_relists_after_backoff)
{
	/* A 5xx answer to the watch request is not "retriable" (only refused and 429
	 * are): the round ends, a relist from the last RV after backoff. */
	fx_t f;
	fx_init(&f, NULL);
	fx_synced(&f);
	ck_cache_fake_req_finish(last_watch(&f), 503, "ServiceUnavailable", "etcd is down", 0);
	ck_assert_int_eq(f.werr_calls, 1);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	advance_ms(&f, 1700);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 1);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 2);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_list(&f))->resource_version, "10");
	respond_list(&f, NULL, 0, "30", NULL);
	/* An ERROR 429 in the stream backs off and re-watches (client-go does the same). */
	ck_cache_fake_req_error_event(last_watch(&f), 429, "TooManyRequests", "slow down");
	cache_informer_tick(f.inf);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 2);
	advance_ms(&f, 3300);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 3);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 2);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_watch(&f))->resource_version, "30");
	fx_free(&f);
}
END_TEST

START_TEST(test_429_honours_retry_after)
{
	fx_t f;
	fx_init(&f, NULL);
	fx_synced(&f);
	ck_cache_fake_req_finish(last_watch(&f), 429, "TooManyRequests", "slow down", 7);
	advance_ms(&f, 6900);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 1);
	advance_ms(&f, 200);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 2);
	fx_free(&f);
}
END_TEST

START_TEST(test_watch_error_event_500_relists_after_backoff)
{
	/* An ERROR event that is not 410 (etcd hiccup: 500 InternalError) ends the watch,
	 * is reported, and is followed by a relist from the last RV after backoff, as in
	 * client-go (whose MaxInternalErrorRetryDuration defaults to 0). */
	fx_t f;
	fx_init(&f, NULL);
	fx_synced(&f);
	ck_cache_fake_req_t *w = last_watch(&f);
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj("ns", "a", "15"));
	ck_cache_fake_req_error_event(w, 500, "InternalError", "etcdserver: leader changed");
	/* Whatever the stream says after its ERROR is not believed. */
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "ghost", "16"));
	ck_assert_uint_eq(cache_reflector_deadline(cache_informer_reflector(f.inf)), 0);
	cache_informer_tick(f.inf); /* the ERROR ends the watch on the next tick */
	ck_assert(ck_cache_fake_req_cancelled(w));
	ck_assert_int_eq(f.werr_calls,
	                 0); /* retried as routine: client-go's WatchErrorHandler is not called */
	/* Not at once (no hot loop against a failing server): after the backoff. */
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	ck_assert_uint_ge(retry_delay(&f), 800 * CK_NS_PER_MS);
	advance_ms(&f, 1700);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 1);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 2);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_list(&f))->resource_version, "15");
	cache_informer_drain(f.inf);
	ck_assert_str_eq(rec_text(&f.rec), "update ns/a 1->15\n");
	ck_cache_stats_t st;
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_uint_eq(st.errors, 1);
	ck_assert_uint_eq(st.relists, 1);
	fx_free(&f);
}
END_TEST

START_TEST(test_429_on_list_honours_retry_after)
{
	/* The first backoff is at most 1.6 s; Retry-After: 7 must win over it. */
	fx_t f;
	fx_init(&f, NULL);
	fx_start(&f);
	ck_cache_fake_req_finish(last_list(&f), 429, "TooManyRequests", "too many requests", 7);
	ck_assert_int_eq(f.werr_calls, 1);
	ck_assert_int_eq(f.werr_nonhealing, 0);
	ck_assert_uint_eq(retry_delay(&f), 7 * CK_NS_PER_SEC);
	advance_ms(&f, 6900);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	advance_ms(&f, 200);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 2);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_list(&f))->resource_version, "0");
	ck_obj_t *items[] = {mkobj("ns", "a", "1")};
	respond_list(&f, items, 1, "10", NULL);
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_has_synced(f.inf));
	fx_free(&f);
}
END_TEST

START_TEST(test_repeated_429_backs_off_exponentially)
{
	/* APF answers every rejected request with 429 Retry-After: 1. Once the REST
	 * client's own retries are spent, client-go's reflector backs off through its
	 * backoffManager (800 ms doubling to 30 s), not once a second forever: the
	 * delay is the exponential backoff, never shorter than the Retry-After. */
	fx_t f;
	fx_init(&f, NULL);
	fx_synced(&f);
	uint64_t d[7];
	for (int i = 0; i < 7; i++) {
		ck_cache_fake_req_finish(last_watch(&f), 429, "TooManyRequests", "slow down", 1);
		d[i] = retry_delay(&f);
		ck_assert_uint_ge(d[i], 1 * CK_NS_PER_SEC);
		advance_ms(&f, d[i] / CK_NS_PER_MS + 1);
		ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), (size_t)i + 2);
	}
	ck_assert_uint_lt(d[0], 1600 * CK_NS_PER_MS);
	ck_assert_uint_ge(d[3], 6400 * CK_NS_PER_MS);
	ck_assert_uint_ge(d[6], 30 * CK_NS_PER_SEC);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1); /* re-watches only */

	/* The same on the list: a daemon started while rejected. */
	fx_t g;
	fx_init(&g, NULL);
	fx_start(&g);
	uint64_t e[5];
	for (int i = 0; i < 5; i++) {
		ck_cache_fake_req_finish(last_list(&g), 429, "TooManyRequests", "slow down", 1);
		e[i] = retry_delay(&g);
		advance_ms(&g, e[i] / CK_NS_PER_MS + 1);
		ck_assert_uint_eq(ck_cache_fake_lw_count(g.fake, false), (size_t)i + 2);
	}
	ck_assert_uint_ge(e[1], 1600 * CK_NS_PER_MS);
	ck_assert_uint_ge(e[4], 12800 * CK_NS_PER_MS);
	fx_free(&g);
	fx_free(&f);
}
END_TEST

START_TEST(test_delete_add_delete_delivered_in_order)
{
	/* Only two trailing deletes collapse: delete, re-create, delete is three calls. */
	fx_t f;
	fx_init(&f, NULL);
	fx_synced(&f);
	ck_cache_fake_req_t *w = last_watch(&f);
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj("ns", "a", "11"));
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "a", "12"));
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj("ns", "a", "13"));
	cache_informer_drain(f.inf);
	ck_assert_str_eq(rec_text(&f.rec), "delete ns/a 11\nadd ns/a 12\ndelete ns/a 13\n");
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(f.inf)), 1);
	fx_free(&f);
}
END_TEST

/* A thread waiting for the sync, as the daemon's main thread does. */
typedef struct waiter {
	ck_cache_informer_t *inf;
	int64_t timeout_ms;
	int rc;
	char *reason;
} waiter_t;

static void *wait_thread(void *arg)
{
	waiter_t *w = arg;
	w->rc = ck_cache_informer_wait_synced(w->inf, w->timeout_ms, &w->reason);
	return NULL;
}

static char *read_all_fd(int fd)
{
	char buf[65536];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	return ck_xstrdup(buf);
}

START_TEST(test_forbidden_reported_logged_once_and_sync_reason)
{
	FILE *tf = tmpfile();
	ck_log_set_fd(fileno(tf));
	fx_t f;
	fx_init(&f, NULL);
	fx_start(&f);
	const char *msg = "widgets.test.example.com is forbidden: User \"system:serviceaccount:x\" "
	                  "cannot list resource \"widgets\"";
	for (int i = 0; i < 3; i++) {
		ck_cache_fake_req_finish(last_list(&f), 403, "Forbidden", msg, 0);
		advance_ms(&f, 60000);
	}
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 4);
	ck_assert_int_eq(f.werr_calls, 3);
	ck_assert_int_eq(f.werr_nonhealing, 3);
	ck_assert_ptr_nonnull(strstr(f.werr_last, "list widgets.test.example.com: "));
	ck_assert_ptr_nonnull(strstr(f.werr_last, "is forbidden"));
	char *logs = read_all_fd(fileno(tf));
	ck_assert_int_eq(count_substr(logs, "is forbidden"), 1);
	free(logs);

	char *why = ck_cache_informer_sync_reason(f.inf);
	ck_assert_ptr_nonnull(strstr(why, "is forbidden"));
	free(why);
	waiter_t w = {f.inf, 30, 0, NULL};
	pthread_t th;
	pthread_create(&th, NULL, wait_thread, &w);
	pthread_join(th, NULL);
	ck_assert_int_eq(w.rc, -1);
	ck_assert_ptr_nonnull(strstr(w.reason, "cache not synced after 30 ms"));
	ck_assert_ptr_nonnull(strstr(w.reason, "is forbidden"));
	free(w.reason);

	/* RBAC fixed: the next attempt lists, and a waiter is released. */
	waiter_t w2 = {f.inf, 10000, -5, NULL};
	pthread_create(&th, NULL, wait_thread, &w2);
	respond_list(&f, NULL, 0, "5", NULL);
	cache_informer_drain(f.inf);
	pthread_join(th, NULL);
	ck_assert_int_eq(w2.rc, 0);
	logs = read_all_fd(fileno(tf));
	ck_assert_ptr_nonnull(strstr(logs, "recovered"));
	free(logs);
	fx_free(&f);
	ck_log_set_fd(2);
	fclose(tf);
}
END_TEST

START_TEST(test_not_found_hint_and_wait_on_loop_thread)
{
	fx_t f;
	fx_init(&f, NULL);
	fx_start(&f);
	ck_cache_fake_req_finish(last_list(&f), 404, "NotFound",
	                         "the server could not find the requested resource", 0);
	ck_assert_int_eq(f.werr_nonhealing, 1);
	ck_assert_ptr_nonnull(strstr(f.werr_last, "CRD installed"));
	cache_informer_drain(f.inf); /* makes this the loop thread */
	char *r = NULL;
	ck_assert_int_eq(ck_cache_informer_wait_synced(f.inf, 1000, &r), -1);
	ck_assert_ptr_nonnull(strstr(r, "loop thread"));
	free(r);
	fx_free(&f);
}
END_TEST

START_TEST(test_start_failure_retries)
{
	fx_t f;
	fx_init(&f, NULL);
	ck_cache_fake_lw_fail_next_start(f.fake, "client is shutting down");
	fx_start(&f);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 0);
	ck_assert_int_eq(f.werr_calls, 1);
	ck_assert_ptr_nonnull(strstr(f.werr_last, "client is shutting down"));
	advance_ms(&f, 1700);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	fx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- timing */

START_TEST(test_backoff_function)
{
	cache_backoff_t b;
	cache_backoff_init(&b, 800 * CK_NS_PER_MS, 30 * CK_NS_PER_SEC, 120 * CK_NS_PER_SEC, 1.0);
	uint64_t t = 1000 * CK_NS_PER_SEC;
	const uint64_t want_ms[] = {800, 1600, 3200, 6400, 12800, 25600, 30000, 30000};
	for (size_t i = 0; i < CK_ARRAY_LEN(want_ms); i++) {
		t += CK_NS_PER_SEC;
		ck_assert_uint_eq(cache_backoff_next(&b, t, 0.0), want_ms[i] * CK_NS_PER_MS);
	}
	/* Jitter adds up to 100% of the base. */
	t += CK_NS_PER_SEC;
	uint64_t j = cache_backoff_next(&b, t, 0.5);
	ck_assert_uint_eq(j, 45000 * CK_NS_PER_MS);
	/* Two quiet minutes: start over. */
	t += 121 * CK_NS_PER_SEC;
	ck_assert_uint_eq(cache_backoff_next(&b, t, 0.0), 800 * CK_NS_PER_MS);
	t += 119 * CK_NS_PER_SEC;
	ck_assert_uint_eq(cache_backoff_next(&b, t, 0.0), 1600 * CK_NS_PER_MS);

	ck_assert_int_eq(cache_watch_timeout_s(300, 600, 0.0), 300);
	ck_assert_int_eq(cache_watch_timeout_s(300, 600, 0.9999999), 599);
	ck_assert_int_eq(cache_watch_timeout_s(300, 600, 0.5), 450);
	ck_assert_uint_eq(cache_watch_stall_deadline(10, 300, 5), 10 + 300 * CK_NS_PER_SEC + 5);
}
END_TEST

START_TEST(test_backoff_grows_and_resets_after_health)
{
	fx_t f;
	fx_init(&f, NULL);
	fx_synced(&f);
	uint64_t d[4];
	for (int i = 0; i < 4; i++) {
		ck_cache_fake_req_finish(last_watch(&f), 0, NULL, "refused", 0);
		d[i] = retry_delay(&f);
		advance_ms(&f, d[i] / CK_NS_PER_MS + 1);
	}
	ck_assert_uint_ge(d[0], 800 * CK_NS_PER_MS);
	ck_assert_uint_lt(d[0], 1600 * CK_NS_PER_MS);
	ck_assert_uint_ge(d[1], 1600 * CK_NS_PER_MS);
	ck_assert_uint_ge(d[3], 6400 * CK_NS_PER_MS);
	ck_assert_uint_lt(d[3], 12800 * CK_NS_PER_MS);
	/* Healthy for more than two minutes (bookmarks keep the watch alive). */
	for (int i = 0; i < 5; i++) {
		ck_clk_fake_advance(&f.clk, 30 * CK_NS_PER_SEC);
		ck_cache_fake_req_event(last_watch(&f), CK_WATCH_BOOKMARK, mkbookmark("30", false));
	}
	/* The server's timeout ends it (re-watch at once); the new watch is refused. */
	ck_cache_fake_req_finish(last_watch(&f), 200, NULL, NULL, 0);
	ck_cache_fake_req_finish(last_watch(&f), 0, NULL, "refused", 0);
	ck_assert_uint_lt(retry_delay(&f), 1600 * CK_NS_PER_MS);
	fx_free(&f);
}
END_TEST

START_TEST(test_stall_detection)
{
	ck_cache_informer_opts_t o = {
	    .watch_timeout_min_s = 10, .watch_timeout_max_s = 10, .stall_margin_ms = 5000};
	fx_t f;
	fx_init(&f, &o);
	fx_synced(&f);
	ck_cache_fake_req_t *w = last_watch(&f);
	ck_assert_int_eq(ck_cache_fake_req_opts(w)->timeout_seconds, 10);
	advance_ms(&f, 9000);
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "c", "11"));
	advance_ms(&f, 14000); /* 14 s since the event: under 10 + 5 */
	ck_assert(ck_cache_fake_req_active(w));
	advance_ms(&f, 1500); /* 15.5 s of silence: dead */
	ck_assert(ck_cache_fake_req_cancelled(w));
	ck_cache_stats_t st;
	ck_cache_informer_stats(f.inf, &st);
	ck_assert_uint_eq(st.watch_stalls, 1);
	ck_assert_ptr_nonnull(strstr(f.werr_last, "no data"));
	advance_ms(&f, 1700);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 2);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_watch(&f))->resource_version, "11");
	/* Events through the stalled watch are gone for good. */
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "zombie", "12"));
	cache_informer_drain(f.inf);
	ck_assert_ptr_null(strstr(rec_text(&f.rec), "zombie"));
	fx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- handlers */

/* client-go's determineResyncPeriod: an informer with no resync period resyncs no
 * handler; before the start a shorter handler period lowers the informer's, after
 * the start it is raised to the informer's. */
START_TEST(test_resync_periods_as_client_go)
{
	fx_t f;
	fx_init(&f, NULL); /* informer period 0: it does not resync */
	rec_t h = {0};
	ck_cache_informer_add_handler_resync(f.inf, &rec_handler, &h, 1000);
	fx_synced(&f);
	advance_ms(&f, 5000);
	cache_informer_drain(f.inf);
	ck_assert_int_eq(h.updates, 0);
	rec_reset(&h);
	fx_free(&f);

	ck_cache_informer_opts_t io = {.default_resync_ms = 10000};
	fx_init(&f, &io);
	rec_t early = {0}, late = {0};
	ck_cache_informer_add_handler_resync(f.inf, &rec_handler, &early, 2000); /* lowers to 2 s */
	fx_synced(&f);
	ck_cache_informer_add_handler_resync(f.inf, &rec_handler, &late, 1000); /* raised to 2 s */
	cache_informer_drain(f.inf);
	rec_reset(&late);
	advance_ms(&f, 1000);
	cache_informer_drain(f.inf);
	ck_assert_int_eq(early.updates, 0);
	ck_assert_int_eq(late.updates, 0);
	advance_ms(&f, 1000);
	cache_informer_drain(f.inf);
	ck_assert_int_eq(early.updates, 2);
	ck_assert_int_eq(late.updates, 2);
	rec_reset(&early);
	rec_reset(&late);
	fx_free(&f);
}
END_TEST

START_TEST(test_resync_only_to_due_handlers)
{
	fx_t f;
	/* The informer's own period is the one it checks at (client-go's
	 * resyncCheckPeriod); its default handler uses it too. */
	ck_cache_informer_opts_t io = {.default_resync_ms = 5000};
	fx_init(&f, &io);
	rec_t fast = {0}, slow = {0}, never = {0}, tiny = {0};
	ck_cache_informer_add_handler_resync(f.inf, &rec_handler, &fast, 1000);
	ck_cache_informer_add_handler_resync(f.inf, &rec_handler, &slow, 5000);
	ck_cache_informer_add_handler_resync(f.inf, &rec_handler, &never, 0);
	ck_cache_informer_add_handler_resync(f.inf, &rec_handler, &tiny, 10); /* -> 1 s */
	fx_synced(&f);
	advance_ms(&f, 500);
	cache_informer_drain(f.inf);
	ck_assert_int_eq(tiny.updates, 0);
	advance_ms(&f, 500);
	cache_informer_drain(f.inf);
	ck_assert_int_eq(fast.updates, 2);
	ck_assert_int_eq(tiny.updates, 2);
	ck_assert_int_eq(slow.updates, 0);
	ck_assert_int_eq(never.updates, 0);
	ck_assert_int_eq(f.rec.updates, 0); /* the default handler: 5 s */
	ck_assert_ptr_nonnull(strstr(rec_text(&fast), "update ns/a 1->1\n"));
	advance_ms(&f, 4000);
	cache_informer_drain(f.inf);
	ck_assert_int_eq(slow.updates, 2);
	ck_assert_int_eq(never.updates, 0);
	/* A real change goes to everyone, due or not. */
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_MODIFIED, mkobj("ns", "a", "30"));
	cache_informer_drain(f.inf);
	ck_assert_int_eq(never.updates, 1);
	ck_assert_ptr_nonnull(strstr(rec_text(&never), "update ns/a 1->30\n"));
	rec_reset(&fast);
	rec_reset(&slow);
	rec_reset(&never);
	rec_reset(&tiny);
	fx_free(&f);
}
END_TEST

START_TEST(test_late_handler_gets_existing_objects_first)
{
	fx_t f;
	fx_init(&f, NULL);
	fx_synced(&f);
	rec_t late = {0};
	ck_cache_handler_reg_t *r = ck_cache_informer_add_handler(f.inf, &rec_handler, &late);
	ck_assert(!ck_cache_handler_has_synced(r));
	ck_assert_uint_gt(cache_informer_pending(f.inf), 0);
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_ADDED, mkobj("ns", "c", "11"));
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_handler_has_synced(r));
	/* Existing objects (any order), flagged initial, before the new event. */
	const char *t = rec_text(&late);
	ck_assert_int_eq(late.initial_adds, 2);
	ck_assert_ptr_nonnull(strstr(t, "add ns/a 1 initial\n"));
	ck_assert_ptr_nonnull(strstr(t, "add ns/b 2 initial\n"));
	ck_assert_ptr_nonnull(strstr(t, "initial\nadd ns/c 11\n"));
	ck_assert_str_eq(rec_text(&f.rec), "add ns/c 11\n");
	rec_reset(&late);
	fx_free(&f);
}
END_TEST

START_TEST(test_handler_added_after_start_before_sync)
{
	fx_t f;
	fx_init(&f, NULL);
	fx_start(&f);
	rec_t early = {0};
	ck_cache_handler_reg_t *r = ck_cache_informer_add_handler(f.inf, &rec_handler, &early);
	ck_obj_t *items[] = {mkobj("ns", "a", "1")};
	respond_list(&f, items, 1, "10", NULL);
	ck_assert(!ck_cache_handler_has_synced(r));
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_handler_has_synced(r));
	ck_assert_str_eq(rec_text(&early), "add ns/a 1 initial\n");
	rec_reset(&early);
	fx_free(&f);
}
END_TEST

typedef struct remover {
	ck_cache_informer_t *inf;
	ck_cache_handler_reg_t *reg;
	int calls;
} remover_t;

static void remove_self_on_add(void *ud, ck_obj_t *obj, bool initial)
{
	remover_t *rm = ud;
	(void)obj;
	(void)initial;
	rm->calls++;
	ck_cache_informer_remove_handler(rm->inf, rm->reg);
}

START_TEST(test_remove_handler_from_its_callback)
{
	fx_t f;
	fx_init(&f, NULL);
	remover_t rm = {f.inf, NULL, 0};
	ck_cache_handler_t h = {remove_self_on_add, NULL, NULL};
	rm.reg = ck_cache_informer_add_handler(f.inf, &h, &rm);
	fx_synced(&f);
	ck_assert_int_eq(rm.calls, 1);
	fx_free(&f);
}
END_TEST

typedef struct adder {
	ck_cache_informer_t *inf;
	rec_t *late;
	bool added;
} adder_t;

static void add_handler_on_delete(void *ud, const char *key, ck_obj_t *obj, bool unknown)
{
	adder_t *a = ud;
	(void)key;
	(void)obj;
	(void)unknown;
	if (!a->added && ck_cache_store_len(ck_cache_informer_store(a->inf)) == 0) {
		a->added = true;
		ck_cache_informer_add_handler(a->inf, &rec_handler, a->late);
	}
}

START_TEST(test_handler_added_in_a_callback_misses_the_event_in_flight)
{
	fx_t f;
	fx_init(&f, NULL);
	rec_t late = {0};
	adder_t a = {f.inf, &late, false};
	ck_cache_handler_t h = {NULL, NULL, add_handler_on_delete};
	ck_cache_informer_add_handler(f.inf, &h, &a);
	fx_synced(&f);
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_DELETED, mkobj("ns", "a", "11"));
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_DELETED, mkobj("ns", "b", "12"));
	cache_informer_drain(f.inf);
	ck_assert(a.added);
	/* It was added once the store was empty: nothing to tell it, not even the delete
	 * that was being delivered. The next event it gets. */
	ck_assert_str_eq(rec_text(&late), "");
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_ADDED, mkobj("ns", "c", "13"));
	cache_informer_drain(f.inf);
	ck_assert_str_eq(rec_text(&late), "add ns/c 13\n");
	rec_reset(&late);
	fx_free(&f);
}
END_TEST

/*
 * A handler's idea of the cache, built from its notifications alone, with the
 * checks every handler may rely on: an add only for an absent key, an update
 * or delete only for a present one, an update's old state is the last one it
 * was told. Its initial adds must come before its HasSynced turns true.
 */
typedef struct view {
	struct {
		char key[64];
		char rv[16];
	} e[64];
	size_t n;
	ck_cache_handler_reg_t *reg; /* set once registered */
	int initial_adds;
	int adds_after_synced; /* initial adds seen while HasSynced was already true */
	int events;            /* notifications other than initial adds */
	int events_unsynced;   /* of those, seen while HasSynced was still false */
} view_t;

static long view_find(const view_t *v, const char *key)
{
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->e[i].key, key) == 0)
			return (long)i;
	return -1;
}

static void view_on_add(void *ud, ck_obj_t *obj, bool initial)
{
	view_t *v = ud;
	char key[64];
	ck_obj_key(obj, key, sizeof(key));
	ck_assert_msg(view_find(v, key) < 0, "add of %s, which the handler has", key);
	ck_assert_uint_lt(v->n, CK_ARRAY_LEN(v->e));
	snprintf(v->e[v->n].key, sizeof(v->e[v->n].key), "%s", key);
	snprintf(v->e[v->n].rv, sizeof(v->e[v->n].rv), "%s", obj->rv);
	v->n++;
	bool synced = v->reg != NULL && ck_cache_handler_has_synced(v->reg);
	if (initial) {
		v->initial_adds++;
		v->adds_after_synced += synced;
	} else {
		v->events++;
		v->events_unsynced += !synced;
	}
}

static void view_on_update(void *ud, ck_obj_t *old, ck_obj_t *obj)
{
	view_t *v = ud;
	char key[64];
	ck_obj_key(obj, key, sizeof(key));
	long i = view_find(v, key);
	ck_assert_msg(i >= 0, "update of %s, which the handler does not have", key);
	ck_assert_str_eq(old->rv, v->e[i].rv);
	snprintf(v->e[i].rv, sizeof(v->e[i].rv), "%s", obj->rv);
	v->events++;
	v->events_unsynced += !ck_cache_handler_has_synced(v->reg);
}

static void view_on_delete(void *ud, const char *key, ck_obj_t *obj, bool unknown)
{
	view_t *v = ud;
	(void)obj;
	(void)unknown;
	long i = view_find(v, key);
	ck_assert_msg(i >= 0, "delete of %s, which the handler does not have", key);
	v->e[i] = v->e[--v->n];
	v->events++;
	v->events_unsynced += !ck_cache_handler_has_synced(v->reg);
}

static const ck_cache_handler_t view_handler = {view_on_add, view_on_update, view_on_delete};

/* The handler's view is exactly the store: same keys, same resourceVersions. */
static void view_assert_is_store(const view_t *v, ck_cache_store_t *st)
{
	ck_assert_uint_eq(v->n, ck_cache_store_len(st));
	for (size_t i = 0; i < v->n; i++) {
		ck_obj_t *o = ck_cache_store_get(st, v->e[i].key);
		ck_assert_msg(o != NULL, "the handler has %s, the store does not", v->e[i].key);
		ck_assert_str_eq(o->rv, v->e[i].rv);
		ck_obj_unref(o);
	}
}

/* Registers a view handler from inside the callback for the object named trigger. */
typedef struct view_adder {
	ck_cache_informer_t *inf;
	view_t *late;
	const char *trigger;
	bool added;
	bool synced_at_once;
} view_adder_t;

static void view_add_on_add(void *ud, ck_obj_t *obj, bool initial)
{
	view_adder_t *a = ud;
	(void)initial;
	if (a->added || strcmp(obj->name, a->trigger) != 0)
		return;
	a->added = true;
	a->late->reg = ck_cache_informer_add_handler(a->inf, &view_handler, a->late);
	a->synced_at_once = ck_cache_handler_has_synced(a->late->reg);
}

START_TEST(test_handler_added_in_a_callback_sees_the_store)
{
	/* Added from the callback for c's add, with a's updates, c's delete and d's
	 * add still queued: it gets the store as it is then (with c) and exactly the
	 * deltas after the one in flight, ending with what the store has. */
	fx_t f;
	fx_init(&f, NULL);
	view_t late;
	memset(&late, 0, sizeof(late));
	view_adder_t a = {f.inf, &late, "c", false, false};
	ck_cache_handler_t h = {view_add_on_add, NULL, NULL};
	ck_cache_informer_add_handler(f.inf, &h, &a);
	fx_synced(&f); /* a@1, b@2 */
	ck_cache_fake_req_t *w = last_watch(&f);
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "c", "11"));
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj("ns", "a", "12"));
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj("ns", "c", "13"));
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "d", "14"));
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj("ns", "a", "15"));
	cache_informer_drain(f.inf);
	ck_assert(a.added);
	ck_assert(!a.synced_at_once); /* the store was not empty: a snapshot to deliver */
	ck_assert_str_eq(rec_text(&f.rec),
	                 "add ns/c 11\nupdate ns/a 1->12\ndelete ns/c 13\nadd ns/d 14\n"
	                 "update ns/a 12->15\n");
	view_assert_is_store(&late, ck_cache_informer_store(f.inf));
	/* The store after c's add (a@1, b@2, c@11), then the four deltas after it. */
	ck_assert_int_eq(late.initial_adds, 3);
	ck_assert_int_eq(late.adds_after_synced, 0);
	ck_assert_int_eq(late.events, 4);
	ck_assert_int_eq(late.events_unsynced, 0);
	ck_assert(ck_cache_handler_has_synced(late.reg));
	ck_assert_uint_eq(cache_informer_pending(f.inf), 0);

	/* Later events keep it exact. */
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj("ns", "b", "16"));
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "c", "17"));
	cache_informer_drain(f.inf);
	view_assert_is_store(&late, ck_cache_informer_store(f.inf));
	fx_free(&f);
}
END_TEST

START_TEST(test_handler_added_in_a_callback_during_the_initial_list)
{
	/* Added from the callback for the third object of the first list, with two
	 * more to come: those too are initial adds, and HasSynced waits for them. */
	fx_t f;
	fx_init(&f, NULL);
	view_t late;
	memset(&late, 0, sizeof(late));
	view_adder_t a = {f.inf, &late, "c", false, false};
	ck_cache_handler_t h = {view_add_on_add, NULL, NULL};
	ck_cache_informer_add_handler(f.inf, &h, &a);
	fx_start(&f);
	ck_obj_t *items[] = {mkobj("ns", "a", "1"), mkobj("ns", "b", "2"), mkobj("ns", "c", "3"),
	                     mkobj("ns", "d", "4"), mkobj("ns", "e", "5")};
	respond_list(&f, items, 5, "10", NULL);
	cache_informer_drain(f.inf);
	ck_assert(a.added);
	ck_assert(!a.synced_at_once);
	ck_assert(ck_cache_informer_has_synced(f.inf));
	ck_assert(ck_cache_handler_has_synced(late.reg));
	view_assert_is_store(&late, ck_cache_informer_store(f.inf));
	ck_assert_int_eq(late.initial_adds, 5);
	ck_assert_int_eq(late.adds_after_synced, 0);
	ck_assert_int_eq(late.events, 0);
	fx_free(&f);
}
END_TEST

START_TEST(test_late_handler_added_between_batches_of_the_initial_list)
{
	/* Not from a callback: the list reached the store at once, and the loop told
	 * the first handler about two of five objects (batch 2) when this one comes.
	 * It gets all five from its snapshot, as initial adds, none of the list's
	 * remaining notifications, and is synced only after the last. */
	ck_cache_informer_opts_t o = {.batch = 2};
	fx_t f;
	fx_init(&f, &o);
	fx_start(&f);
	ck_obj_t *items[] = {mkobj("ns", "a", "1"), mkobj("ns", "b", "2"), mkobj("ns", "c", "3"),
	                     mkobj("ns", "d", "4"), mkobj("ns", "e", "5")};
	respond_list(&f, items, 5, "10", NULL);
	/* The list is built beside the store two objects a round, then swapped in. */
	for (int i = 0; i < 10 && ck_cache_store_len(ck_cache_informer_store(f.inf)) == 0; i++) {
		ck_assert_int_eq(f.rec.adds, 0);
		ev_run(f.loop, EVRUN_NOWAIT);
	}
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(f.inf)), 5);
	ev_run(f.loop, EVRUN_NOWAIT);
	ck_assert_int_eq(f.rec.adds, 2);
	ck_assert(!ck_cache_informer_has_synced(f.inf));
	view_t late;
	memset(&late, 0, sizeof(late));
	late.reg = ck_cache_informer_add_handler(f.inf, &view_handler, &late);
	ck_assert(!ck_cache_handler_has_synced(late.reg));
	for (int i = 0; i < 20 && cache_informer_pending(f.inf) > 0; i++) {
		ck_assert(!ck_cache_handler_has_synced(late.reg));
		ev_run(f.loop, EVRUN_NOWAIT);
	}
	ck_assert_uint_eq(cache_informer_pending(f.inf), 0);
	ck_assert(ck_cache_informer_has_synced(f.inf));
	ck_assert(ck_cache_handler_has_synced(late.reg));
	view_assert_is_store(&late, ck_cache_informer_store(f.inf));
	ck_assert_uint_eq(late.n, 5);
	ck_assert_int_eq(late.initial_adds, 5);
	ck_assert_int_eq(late.adds_after_synced, 0);
	ck_assert_int_eq(f.rec.initial_adds, 5);
	/* And it follows the watch from there. */
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_DELETED, mkobj("ns", "a", "11"));
	cache_informer_drain(f.inf);
	view_assert_is_store(&late, ck_cache_informer_store(f.inf));
	ck_assert_int_eq(late.events, 1);
	ck_assert_int_eq(late.events_unsynced, 0);
	fx_free(&f);
}
END_TEST

static ck_obj_t *strip_labels(void *ud, ck_obj_t *obj)
{
	int *calls = ud;
	(*calls)++;
	return mkobj(obj->ns, obj->name, obj->rv); /* the same object without labels */
}

START_TEST(test_transform_before_store)
{
	fx_t f;
	fx_init(&f, NULL);
	int calls = 0;
	ck_cache_informer_set_transform(f.inf, strip_labels, &calls);
	fx_start(&f);
	ck_obj_t *items[] = {mkobj_app("ns", "a", "1", "web")};
	respond_list(&f, items, 1, "10", NULL);
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_ADDED, mkobj_app("ns", "b", "11", "web"));
	cache_informer_drain(f.inf);
	ck_assert_int_eq(calls, 2);
	ck_obj_t *a = ck_cache_lister_get(ck_cache_informer_lister(f.inf), "ns", "a");
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_null(ck_obj_label(a, "app"));
	ck_obj_unref(a);
	ck_cache_selector_t *web = ck_cache_selector_parse("app=web", NULL);
	ck_cache_objs_t l;
	ck_cache_lister_list(ck_cache_informer_lister(f.inf), web, &l);
	ck_assert_uint_eq(l.n, 0);
	ck_cache_objs_free(&l);
	ck_cache_selector_free(web);
	fx_free(&f);
}
END_TEST

static void app_index(void *ud, const ck_obj_t *obj, ck_cache_index_values_t *out)
{
	(void)ud;
	const char *v = ck_obj_label(obj, "app");
	if (v != NULL)
		ck_cache_index_values_add(out, v);
}

static size_t by_app(fx_t *f, const char *v)
{
	ck_cache_objs_t l;
	ck_assert_int_eq(
	    ck_cache_store_by_index(ck_cache_informer_store(f->inf), "app", v, &l, NULL), 0);
	size_t n = l.n;
	ck_cache_objs_free(&l);
	return n;
}

START_TEST(test_index_follows_updates_and_deletes)
{
	fx_t f;
	fx_init(&f, NULL);
	ck_assert_int_eq(ck_cache_informer_add_index(f.inf, "app", app_index, NULL, NULL), 0);
	fx_synced(&f);
	ck_cache_fake_req_t *w = last_watch(&f);
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj_app("ns", "x", "11", "web"));
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj_app("ns2", "y", "12", "web"));
	cache_informer_drain(f.inf);
	ck_assert_uint_eq(by_app(&f, "web"), 2);
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj_app("ns", "x", "13", "db"));
	cache_informer_drain(f.inf);
	ck_assert_uint_eq(by_app(&f, "web"), 1);
	ck_assert_uint_eq(by_app(&f, "db"), 1);
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj_app("ns", "x", "14", "db"));
	cache_informer_drain(f.inf);
	ck_assert_uint_eq(by_app(&f, "db"), 0);
	ck_cache_objs_t l;
	ck_cache_lister_list_ns(ck_cache_informer_lister(f.inf), "ns2", NULL, &l);
	ck_assert_uint_eq(l.n, 1);
	ck_cache_objs_free(&l);
	fx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- streaming list */

START_TEST(test_streaming_list)
{
	ck_cache_informer_opts_t o = {.streaming_list = CK_CACHE_STREAMING_ON};
	fx_t f;
	fx_init(&f, &o);
	fx_start(&f);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 0);
	ck_cache_fake_req_t *w = last_watch(&f);
	const ck_list_opts_t *wo = ck_cache_fake_req_opts(w);
	ck_assert(wo->send_initial_events);
	ck_assert(wo->allow_watch_bookmarks);
	ck_assert_str_eq(wo->resource_version_match, "NotOlderThan");
	ck_assert_str_eq(wo->resource_version, "");
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "a", "5"));
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "b", "6"));
	ck_cache_fake_req_event(w, CK_WATCH_BOOKMARK, mkbookmark("6", false));
	cache_informer_drain(f.inf);
	ck_assert(!ck_cache_informer_has_synced(f.inf));
	ck_cache_fake_req_event(w, CK_WATCH_BOOKMARK, mkbookmark("7", true));
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_has_synced(f.inf));
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "c", "8"));
	cache_informer_drain(f.inf);
	ck_assert_str_eq(rec_text(&f.rec), "add ns/a 5 initial\nadd ns/b 6 initial\nadd ns/c 8\n");
	ck_assert_str_eq(cache_reflector_last_rv(cache_informer_reflector(f.inf)), "8");
	fx_free(&f);
}
END_TEST

START_TEST(test_streaming_list_refused_falls_back)
{
	ck_cache_informer_opts_t o = {.streaming_list = CK_CACHE_STREAMING_ON};
	fx_t f;
	fx_init(&f, &o);
	fx_start(&f);
	ck_cache_fake_req_finish(last_watch(&f), 422, "Invalid",
	                         "sendInitialEvents is forbidden for watch unless the WatchList "
	                         "feature gate is enabled",
	                         0);
	ck_assert(cache_reflector_streaming_refused(cache_informer_reflector(f.inf)));
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_list(&f))->resource_version, "0");
	ck_obj_t *items[] = {mkobj("ns", "a", "1")};
	respond_list(&f, items, 1, "10", NULL);
	ck_assert(!ck_cache_fake_req_opts(last_watch(&f))->send_initial_events);
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_has_synced(f.inf));
	fx_free(&f);
}
END_TEST

START_TEST(test_streaming_list_is_the_default)
{
	/* As client-go's WatchListClient since 1.35: on unless the source cannot serve
	 * it (the in-process fake says so by default, as client-go's fakes do). */
	fx_t f;
	fx_init(&f, NULL);
	fx_start(&f);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 0);
	fx_free(&f);

	fx_init(&f, NULL);
	ck_cache_fake_lw_set_watch_list(f.fake, true);
	fx_start(&f);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 0);
	ck_assert(ck_cache_fake_req_opts(last_watch(&f))->send_initial_events);
	fx_free(&f);

	/* Opt-outs: the option, and client-go's own switch for its gate. */
	ck_cache_informer_opts_t o = {.streaming_list = CK_CACHE_STREAMING_OFF};
	fx_init(&f, &o);
	ck_cache_fake_lw_set_watch_list(f.fake, true);
	fx_start(&f);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	fx_free(&f);

	setenv("KUBE_FEATURE_WatchListClient", "false", 1);
	fx_init(&f, NULL);
	ck_cache_fake_lw_set_watch_list(f.fake, true);
	fx_start(&f);
	unsetenv("KUBE_FEATURE_WatchListClient");
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	fx_free(&f);
}
END_TEST

START_TEST(test_streaming_refusal_falls_back_for_one_round)
{
	/* client-go falls back to list+watch for the ListAndWatch that failed to stream,
	 * and streams again on the next one. */
	ck_cache_informer_opts_t o = {.streaming_list = CK_CACHE_STREAMING_ON};
	fx_t f;
	fx_init(&f, &o);
	fx_start(&f);
	ck_cache_fake_req_finish(last_watch(&f), 422, "Invalid", "sendInitialEvents is forbidden",
	                         0);
	ck_obj_t *items[] = {mkobj("ns", "a", "1")};
	respond_list(&f, items, 1, "10", NULL);
	ck_assert(!ck_cache_fake_req_opts(last_watch(&f))->send_initial_events);
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_has_synced(f.inf));
	/* The round ends (ERROR 500); the next one streams again, from the last RV. */
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_MODIFIED, mkobj("ns", "a", "12"));
	ck_cache_fake_req_error_event(last_watch(&f), 500, "InternalError", "leader changed");
	cache_informer_tick(f.inf);
	advance_ms(&f, 1700);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 3);
	const ck_list_opts_t *wo = ck_cache_fake_req_opts(last_watch(&f));
	ck_assert(wo->send_initial_events);
	ck_assert_str_eq(wo->resource_version, "12");
	ck_assert(!cache_reflector_streaming_refused(cache_informer_reflector(f.inf)));
	fx_free(&f);
}
END_TEST

START_TEST(test_streaming_applies_modified_and_deleted)
{
	/* client-go's watchList applies every event to a temporary store: a MODIFIED or
	 * DELETED before the end bookmark changes the state being assembled. */
	ck_cache_informer_opts_t o = {.streaming_list = CK_CACHE_STREAMING_ON};
	fx_t f;
	fx_init(&f, &o);
	fx_start(&f);
	ck_cache_fake_req_t *w = last_watch(&f);
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "a", "5"));
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "b", "6"));
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj("ns", "a", "8"));
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj("ns", "b", "9"));
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj("ns", "c", "10"));
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj("ns", "nobody", "11"));
	ck_cache_fake_req_event(w, CK_WATCH_BOOKMARK, mkbookmark("11", true));
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_has_synced(f.inf));
	ck_assert_str_eq(rec_text(&f.rec), "add ns/a 8 initial\nadd ns/c 10 initial\n");
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(f.inf)), 2);
	fx_free(&f);
}
END_TEST

START_TEST(test_streaming_interrupted_streams_again)
{
	ck_cache_informer_opts_t o = {.streaming_list = CK_CACHE_STREAMING_ON};
	fx_t f;
	fx_init(&f, &o);
	fx_start(&f);
	/* Closed (or cut) before the end bookmark after some events: client-go's
	 * watchList streams again at once, from scratch. */
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_ADDED, mkobj("ns", "a", "5"));
	ck_clk_fake_advance(&f.clk, 2 * CK_NS_PER_SEC);
	ck_cache_fake_req_finish_transport(last_watch(&f), 56, 200, "connection reset by peer");
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 2);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 0);
	ck_assert(ck_cache_fake_req_opts(last_watch(&f))->send_initial_events);
	/* 410 / too large: stream again at once, from the most recent state. */
	ck_cache_fake_req_finish(last_watch(&f), 410, "Expired", "too old", 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 3);
	ck_assert_str_eq(ck_cache_fake_req_opts(last_watch(&f))->resource_version, "");
	ck_assert(ck_cache_fake_req_opts(last_watch(&f))->send_initial_events);
	/* Refused at connect: back off, then stream again. */
	ck_cache_fake_req_finish(last_watch(&f), 0, NULL, "connection refused", 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 3);
	advance_ms(&f, 1700);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 4);
	ck_assert(ck_cache_fake_req_opts(last_watch(&f))->send_initial_events);
	/* A very short watch is an error: this round falls back to a list. */
	ck_cache_fake_req_finish(last_watch(&f), 200, NULL, NULL, 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, false), 1);
	respond_list(&f, NULL, 0, "20", NULL);
	cache_informer_drain(f.inf);
	ck_assert(ck_cache_informer_has_synced(f.inf));
	ck_assert_uint_eq(f.rec.adds, 0); /* a's half-streamed state was dropped */
	fx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- lifecycle */

START_TEST(test_shutdown_stops_watch_and_deliveries)
{
	fx_t f;
	fx_init(&f, NULL);
	fx_synced(&f);
	ck_cache_fake_req_t *w = last_watch(&f);
	ck_cache_fake_req_event(w, CK_WATCH_ADDED,
	                        mkobj("ns", "c", "11")); /* queued, not processed */
	ck_cache_informer_shutdown(f.inf);
	ck_assert(ck_cache_fake_req_cancelled(w));
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "d", "12"));
	cache_informer_drain(f.inf);
	advance_ms(&f, 600000);
	ck_assert_str_eq(rec_text(&f.rec), "");
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.fake, true), 1);
	/* The store stays readable until free. */
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(f.inf)), 2);
	ck_assert_int_eq(ck_cache_informer_start(f.inf, NULL), -1);
	fx_free(&f);
}
END_TEST

START_TEST(test_shutdown_wakes_waiters)
{
	fx_t f;
	fx_init(&f, NULL);
	fx_start(&f);
	waiter_t w = {f.inf, -1, 0, NULL};
	pthread_t th;
	pthread_create(&th, NULL, wait_thread, &w);
	usleep(20000);
	ck_cache_informer_shutdown(f.inf);
	pthread_join(th, NULL);
	ck_assert_int_eq(w.rc, -1);
	ck_assert_ptr_nonnull(strstr(w.reason, "shut down"));
	free(w.reason);
	fx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- factory */

typedef struct fakes {
	ck_cache_fake_lw_t *widgets, *nodes;
	int made;
} fakes_t;

static ck_cache_lw_t *make_lw(void *ud, const ck_type_t *t, const char *ns)
{
	fakes_t *fk = ud;
	(void)ns;
	fk->made++;
	return ck_cache_fake_lw_source(t == &widget_type ? fk->widgets : fk->nodes);
}

START_TEST(test_factory_shares_informers_and_waits)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	ck_clk_fake_t clk;
	ck_clk_fake_init(&clk, CK_NS_PER_SEC, 0);
	fakes_t fk = {ck_cache_fake_lw_new(), ck_cache_fake_lw_new(), 0};
	ck_cache_factory_opts_t o = {
	    .default_resync_ms = 30000, .clock = &clk.base, .lw_new = make_lw, .lw_ud = &fk};
	ck_cache_factory_t *fac = ck_cache_factory_new(loop, NULL, &o);
	ck_cache_informer_t *w1 = ck_cache_factory_informer(fac, &widget_type);
	ck_cache_informer_t *w2 = ck_cache_factory_informer(fac, &widget_type);
	ck_cache_informer_t *n1 = ck_cache_factory_informer(fac, &node_type);
	ck_assert_ptr_eq(w1, w2);
	ck_assert_ptr_ne(w1, n1);
	ck_assert_int_eq(fk.made, 2);
	rec_t r = {0};
	ck_cache_informer_add_handler(w1, &rec_handler, &r);
	ck_assert_int_eq(ck_cache_factory_start(fac, NULL), 0);
	ck_obj_t *wi = mkobj("ns", "a", "1");
	ck_cache_fake_req_item(ck_cache_fake_lw_last(fk.widgets, false), wi);
	ck_cache_fake_req_meta(ck_cache_fake_lw_last(fk.widgets, false), "10", NULL);
	ck_cache_fake_req_finish(ck_cache_fake_lw_last(fk.widgets, false), 200, NULL, NULL, 0);
	cache_informer_drain(w1);

	/* From a worker thread: the nodes informer is still waiting. */
	char *why = ck_cache_factory_sync_reason(fac);
	ck_assert_ptr_nonnull(strstr(why, "nodes"));
	ck_assert_ptr_null(strstr(why, "widgets"));
	free(why);

	ck_cache_fake_req_finish(ck_cache_fake_lw_last(fk.nodes, false), 200, NULL, NULL, 0);
	cache_informer_drain(n1);
	ck_assert_ptr_null(ck_cache_factory_sync_reason(fac));
	ck_assert_str_eq(rec_text(&r), "add ns/a 1 initial\n");

	ck_cache_factory_shutdown(fac);
	ck_assert(ck_cache_fake_req_cancelled(ck_cache_fake_lw_last(fk.widgets, true)));
	ck_assert(ck_cache_fake_req_cancelled(ck_cache_fake_lw_last(fk.nodes, true)));
	ck_cache_factory_free(fac);
	ck_cache_fake_lw_free(fk.widgets);
	ck_cache_fake_lw_free(fk.nodes);
	rec_reset(&r);
	ev_loop_destroy(loop);
}
END_TEST

typedef struct fwaiter {
	ck_cache_factory_t *f;
	int rc;
	char *reason;
} fwaiter_t;

static void *fwait_thread(void *arg)
{
	fwaiter_t *w = arg;
	w->rc = ck_cache_factory_wait_synced(w->f, 30, &w->reason);
	return NULL;
}

START_TEST(test_factory_wait_reports_each_unsynced)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	fakes_t fk = {ck_cache_fake_lw_new(), ck_cache_fake_lw_new(), 0};
	ck_cache_factory_opts_t o = {.lw_new = make_lw, .lw_ud = &fk};
	ck_cache_factory_t *fac = ck_cache_factory_new(loop, NULL, &o);
	ck_cache_factory_informer(fac, &widget_type);
	ck_cache_factory_informer(fac, &node_type);
	ck_cache_factory_start(fac, NULL);
	ck_cache_fake_req_finish(ck_cache_fake_lw_last(fk.widgets, false), 403, "Forbidden",
	                         "widgets.test.example.com is forbidden", 0);
	fwaiter_t w = {fac, 0, NULL};
	pthread_t th;
	pthread_create(&th, NULL, fwait_thread, &w);
	pthread_join(th, NULL);
	ck_assert_int_eq(w.rc, -1);
	ck_assert_ptr_nonnull(strstr(w.reason, "is forbidden"));
	ck_assert_ptr_nonnull(strstr(w.reason, "nodes: waiting for the initial list"));
	free(w.reason);
	ck_cache_factory_free(fac);
	ck_cache_fake_lw_free(fk.widgets);
	ck_cache_fake_lw_free(fk.nodes);
	ev_loop_destroy(loop);
}
END_TEST

/* ---------------------------------------------------------------- the real loop */

static void stop_loop_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

START_TEST(test_processing_runs_on_the_loop)
{
	/* Without the test hooks: the check/idle watchers process queued deltas and the
	 * zero-delay timer ends an ERRORed watch, all by ev_run. */
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	ck_cache_fake_lw_t *fake = ck_cache_fake_lw_new();
	ck_cache_informer_opts_t o = {.batch = 2};
	ck_cache_informer_t *inf =
	    ck_cache_informer_new(loop, &widget_type, ck_cache_fake_lw_source(fake), &o);
	rec_t r = {0};
	ck_cache_informer_add_handler(inf, &rec_handler, &r);
	ck_cache_informer_start(inf, NULL);
	ck_obj_t *items[] = {mkobj("ns", "a", "1"), mkobj("ns", "b", "2"), mkobj("ns", "c", "3"),
	                     mkobj("ns", "d", "4"), mkobj("ns", "e", "5")};
	ck_cache_fake_req_t *l = ck_cache_fake_lw_last(fake, false);
	for (int i = 0; i < 5; i++)
		ck_cache_fake_req_item(l, items[i]);
	ck_cache_fake_req_meta(l, "9", NULL);
	ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
	ck_cache_fake_req_error_event(ck_cache_fake_lw_last(fake, true), 410, "Expired", "too old");
	ev_timer stop;
	ev_timer_init(&stop, stop_loop_cb, 0.2, 0.0);
	ev_timer_start(loop, &stop);
	ev_run(loop, 0);
	ck_assert(ck_cache_informer_has_synced(inf));
	ck_assert_int_eq(r.adds, 5);
	ck_assert(ck_cache_fake_req_cancelled(ck_cache_fake_lw_last(fake, true)));
	ck_cache_informer_free(inf);
	ck_cache_fake_lw_free(fake);
	rec_reset(&r);
	ev_loop_destroy(loop);
}
END_TEST

/* ---------------------------------------------------------------- threads */

/* A worker: reads the informer's cache and state while the loop thread writes. */
typedef struct xreader {
	ck_cache_informer_t *inf;
	ck_cache_handler_reg_t *reg;
	_Atomic bool stop;
	_Atomic long reads, bad;
} xreader_t;

static void *xreader_thread(void *arg)
{
	xreader_t *x = arg;
	const ck_cache_lister_t *l = ck_cache_informer_lister(x->inf);
	ck_cache_store_t *st = ck_cache_informer_store(x->inf);
	while (!atomic_load(&x->stop)) {
		ck_obj_t *o = ck_cache_lister_get(l, "ns", "k3");
		if (o != NULL && strcmp(o->name, "k3") != 0)
			atomic_fetch_add(&x->bad, 1);
		ck_obj_unref(o);
		ck_cache_objs_t objs;
		ck_cache_lister_list_ns(l, "ns", NULL, &objs);
		for (size_t i = 0; i < objs.n; i++)
			if (strcmp(objs.items[i]->ns, "ns") != 0 || objs.items[i]->name[0] != 'k')
				atomic_fetch_add(&x->bad, 1);
		ck_cache_objs_free(&objs);
		ck_cache_strs_t keys;
		ck_cache_store_list_keys(st, &keys);
		ck_cache_strs_free(&keys);
		size_t ob;
		ck_cache_store_mem_bytes(st, &ob);
		ck_cache_stats_t stats;
		ck_cache_informer_stats(x->inf, &stats);
		if (stats.synced != ck_cache_informer_has_synced(x->inf) && stats.synced)
			atomic_fetch_add(&x->bad, 1); /* synced never turns false */
		(void)ck_cache_handler_has_synced(x->reg);
		free(ck_cache_informer_sync_reason(x->inf));
		atomic_fetch_add(&x->reads, 1);
	}
	return NULL;
}

START_TEST(test_readers_on_threads_while_the_loop_processes)
{
	/* Workers read through the lister, the stats and the sync state while the loop
	 * thread lists, applies events, relists and feeds a late handler: meant for
	 * TSan (make unit-tsan), and the readers must only ever see whole objects. */
	fx_t f;
	fx_init(&f, NULL);
	fx_start(&f);
	xreader_t x = {.inf = f.inf, .reg = f.reg};
	waiter_t w = {f.inf, 10000, -5, NULL};
	pthread_t th[3];
	pthread_create(&th[0], NULL, wait_thread, &w);
	for (int i = 1; i < 3; i++)
		pthread_create(&th[i], NULL, xreader_thread, &x);
	enum { KEYS = 40 };
	long server[KEYS] = {0};
	long rv = 10;
	ck_cache_fake_req_t *l = last_list(&f);
	for (int i = 0; i < KEYS; i += 2) {
		char name[16], rvs[24];
		snprintf(name, sizeof(name), "k%d", i);
		snprintf(rvs, sizeof(rvs), "%ld", ++rv);
		server[i] = rv;
		ck_cache_fake_req_item(l, mkobj("ns", name, rvs));
	}
	ck_cache_fake_req_meta(l, "100", NULL);
	ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
	rv = 100;
	cache_informer_drain(f.inf);
	pthread_join(th[0], NULL);
	ck_assert_int_eq(w.rc, 0);
	view_t late;
	memset(&late, 0, sizeof(late));
	for (int op = 0; op < 1500; op++) {
		int k = (int)(ck_rand_u64() % KEYS);
		char name[16], rvs[24];
		snprintf(name, sizeof(name), "k%d", k);
		snprintf(rvs, sizeof(rvs), "%ld", ++rv);
		ck_watch_type_t type = server[k] == 0           ? CK_WATCH_ADDED
		                       : ck_rand_u64() % 3 == 0 ? CK_WATCH_DELETED
		                                                : CK_WATCH_MODIFIED;
		server[k] = type == CK_WATCH_DELETED ? 0 : rv;
		ck_cache_fake_req_event(last_watch(&f), type, mkobj("ns", name, rvs));
		if (op % 10 == 0)
			cache_informer_drain(f.inf);
		if (op == 500) {
			late.reg = ck_cache_informer_add_handler(f.inf, &view_handler, &late);
		} else if (op == 1000) {
			/* A relist with the same state: replaced objects, no tombstones. */
			ck_cache_fake_req_error_event(last_watch(&f), 410, "Expired", "too old");
			cache_informer_tick(f.inf);
			advance_ms(&f, 60000);
			l = last_list(&f);
			for (int i = 0; i < KEYS; i++) {
				if (server[i] == 0)
					continue;
				char n2[16], r2[24];
				snprintf(n2, sizeof(n2), "k%d", i);
				snprintf(r2, sizeof(r2), "%ld", server[i]);
				ck_cache_fake_req_item(l, mkobj("ns", n2, r2));
			}
			ck_cache_fake_req_meta(l, rvs, NULL);
			ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
		}
	}
	cache_informer_drain(f.inf);
	atomic_store(&x.stop, true);
	for (int i = 1; i < 3; i++)
		pthread_join(th[i], NULL);
	ck_assert_int_gt(atomic_load(&x.reads), 0);
	ck_assert_int_eq(atomic_load(&x.bad), 0);
	view_assert_is_store(&late, ck_cache_informer_store(f.inf));
	for (int i = 0; i < KEYS; i++) {
		char name[16];
		snprintf(name, sizeof(name), "k%d", i);
		ck_obj_t *o = ck_cache_lister_get(ck_cache_informer_lister(f.inf), "ns", name);
		ck_assert_int_eq(o != NULL, server[i] != 0);
		if (o != NULL)
			ck_assert_int_eq(atol(o->rv), server[i]);
		ck_obj_unref(o);
	}
	free(w.reason);
	fx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- long random churn */

enum { CHURN_KEYS = 300 };

/* A handler that checks the add/update/delete sequence of every key is coherent. */
typedef struct tracker {
	bool present[CHURN_KEYS];
	long rv[CHURN_KEYS];
	long calls;
} tracker_t;

static int key_index(const ck_obj_t *o)
{
	return atoi(o->name + 1);
}

static void t_add(void *ud, ck_obj_t *obj, bool initial)
{
	tracker_t *t = ud;
	(void)initial;
	int k = key_index(obj);
	ck_assert_msg(!t->present[k], "add of present key %s", obj->name);
	t->present[k] = true;
	t->rv[k] = atol(obj->rv);
	t->calls++;
}

static void t_update(void *ud, ck_obj_t *old, ck_obj_t *obj)
{
	tracker_t *t = ud;
	int k = key_index(obj);
	ck_assert_msg(t->present[k], "update of absent key %s", obj->name);
	ck_assert_int_eq(atol(old->rv), t->rv[k]);
	t->rv[k] = atol(obj->rv);
	t->calls++;
}

static void t_delete(void *ud, const char *key, ck_obj_t *obj, bool unknown)
{
	tracker_t *t = ud;
	(void)unknown;
	int k = key_index(obj);
	ck_assert_msg(t->present[k], "delete of absent key %s", key);
	t->present[k] = false;
	t->calls++;
}

static const ck_cache_handler_t tracker_handler = {t_add, t_update, t_delete};

START_TEST(test_long_random_churn)
{
	/* Random creates/updates/deletes, watch breaks with 410 and changes lost in the
	 * gap, clean closes, bookmarks, resyncs, late handlers coming and going: at the
	 * end the store equals the "server", every handler's view is coherent, and
	 * (under ASan) nothing leaked. */
	fx_t f;
	fx_init(&f, NULL);
	tracker_t main_t, resync_t;
	memset(&main_t, 0, sizeof(main_t));
	memset(&resync_t, 0, sizeof(resync_t));
	ck_cache_informer_add_handler(f.inf, &tracker_handler, &main_t);
	ck_cache_informer_add_handler_resync(f.inf, &tracker_handler, &resync_t, 1000);
	ck_assert_int_eq(ck_cache_informer_start(f.inf, NULL), 0);
	long server[CHURN_KEYS] = {0}; /* rv, 0 = absent */
	long rv = 1;
	respond_list(&f, NULL, 0, "1", NULL);
	bool gap = false;
	tracker_t *late = NULL;
	ck_cache_handler_reg_t *late_reg = NULL;
	char name[16], rvs[24];
	for (int op = 0; op < 30000; op++) {
		int k = (int)(ck_rand_u64() % CHURN_KEYS);
		snprintf(name, sizeof(name), "k%d", k);
		snprintf(rvs, sizeof(rvs), "%ld", ++rv);
		ck_watch_type_t type;
		if (server[k] == 0) {
			type = CK_WATCH_ADDED;
			server[k] = rv;
		} else if (ck_rand_u64() % 3 == 0) {
			type = CK_WATCH_DELETED;
			server[k] = 0;
		} else {
			type = CK_WATCH_MODIFIED;
			server[k] = rv;
		}
		if (!gap)
			ck_cache_fake_req_event(last_watch(&f), type, mkobj("ns", name, rvs));
		uint64_t dice = ck_rand_u64() % 1000;
		if (dice < 20) {
			cache_informer_drain(f.inf);
		} else if (dice < 22 && !gap) {
			/* The watch breaks with 410; changes go on while we are away. */
			ck_cache_fake_req_error_event(last_watch(&f), 410, "Expired", "too old");
			cache_informer_tick(f.inf);
			gap = true;
		} else if (dice < 24 && gap) {
			advance_ms(&f, 60000);
			ck_cache_fake_req_t *l = last_list(&f);
			ck_assert(ck_cache_fake_req_active(l));
			for (int i = 0; i < CHURN_KEYS; i++) {
				if (server[i] == 0)
					continue;
				char n2[16], r2[24];
				snprintf(n2, sizeof(n2), "k%d", i);
				snprintf(r2, sizeof(r2), "%ld", server[i]);
				ck_cache_fake_req_item(l, mkobj("ns", n2, r2));
			}
			ck_cache_fake_req_meta(l, rvs, NULL);
			ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
			gap = false;
		} else if (dice < 26 && !gap) {
			ck_cache_fake_req_event(last_watch(&f), CK_WATCH_BOOKMARK,
			                        mkbookmark(rvs, false));
			ck_clk_fake_advance(&f.clk, 2 * CK_NS_PER_SEC);
			ck_cache_fake_req_finish(last_watch(&f), 200, NULL, NULL,
			                         0); /* clean close */
		} else if (dice < 30) {
			advance_ms(&f, 1000); /* resync for the 1 s handler */
		} else if (dice < 31) {
			if (late == NULL) {
				late = ck_xcalloc(1, sizeof(*late));
				late_reg =
				    ck_cache_informer_add_handler(f.inf, &tracker_handler, late);
			} else {
				ck_cache_informer_remove_handler(f.inf, late_reg);
				free(late);
				late = NULL;
			}
		}
	}
	if (gap) {
		ck_cache_fake_req_error_event(last_watch(&f), 410, "Expired", "too old");
		advance_ms(&f, 60000);
		ck_cache_fake_req_t *l = last_list(&f);
		for (int i = 0; i < CHURN_KEYS; i++) {
			if (server[i] == 0)
				continue;
			char n2[16], r2[24];
			snprintf(n2, sizeof(n2), "k%d", i);
			snprintf(r2, sizeof(r2), "%ld", server[i]);
			ck_cache_fake_req_item(l, mkobj("ns", n2, r2));
		}
		ck_cache_fake_req_meta(l, rvs, NULL);
		ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
	}
	cache_informer_drain(f.inf);
	ck_cache_store_t *st = ck_cache_informer_store(f.inf);
	size_t live = 0;
	for (int i = 0; i < CHURN_KEYS; i++) {
		snprintf(name, sizeof(name), "k%d", i);
		ck_obj_t *o = ck_cache_store_get_ns_name(st, "ns", name);
		if (server[i] == 0) {
			ck_assert_msg(o == NULL, "%s should be gone", name);
		} else {
			live++;
			ck_assert_msg(o != NULL, "%s missing", name);
			ck_assert_int_eq(atol(o->rv), server[i]);
		}
		ck_obj_unref(o);
		ck_assert_int_eq(main_t.present[i], server[i] != 0);
		ck_assert_int_eq(resync_t.present[i], server[i] != 0);
		if (late != NULL)
			ck_assert_int_eq(late->present[i], server[i] != 0);
	}
	ck_assert_uint_eq(ck_cache_store_len(st), live);
	ck_cache_stats_t stats;
	ck_cache_informer_stats(f.inf, &stats);
	ck_assert_uint_ge(stats.relists, 10);
	free(late);
	fx_free(&f);
}
END_TEST

/* ------------------------------------------------------------ key trace */

/* A handler that queues every key it is told about, as a controller's does. */
static void tq_add(void *ud, ck_obj_t *obj, bool initial)
{
	(void)initial;
	char *k = ck_obj_key_dup(obj);
	ck_wq_add(ud, k);
	free(k);
}
static void tq_update(void *ud, ck_obj_t *old_obj, ck_obj_t *new_obj)
{
	(void)old_obj;
	tq_add(ud, new_obj, false);
}
static void tq_delete(void *ud, const char *key, ck_obj_t *obj, bool unknown)
{
	(void)obj;
	(void)unknown;
	ck_wq_add(ud, key);
}
static const ck_cache_handler_t tq_handler = {tq_add, tq_update, tq_delete};

/* Reads what fd got since the last call (new string) and empties it. */
static char *trace_take(int fd)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	char chunk[4096];
	ssize_t n;
	lseek(fd, 0, SEEK_SET);
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		ck_sbuf_append(&b, chunk, (size_t)n);
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	lseek(fd, 0, SEEK_SET);
	ck_sbuf_putc(&b, '\0');
	return ck_sbuf_steal(&b);
}

/* The steps of the "Trace" lines in log, space-separated (new string); every trace
 * line must name key. */
static char *trace_steps(const char *log, const char *key)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	char *want_key = ck_xasprintf("\"Trace\" key=\"%s\" step=\"", key);
	for (const char *p = log; (p = strstr(p, "\"Trace\" ")) != NULL;) {
		const char *eol = strchr(p, '\n');
		ck_assert_msg(strncmp(p, want_key, strlen(want_key)) == 0,
		              "trace of another key: %.*s", (int)(eol ? eol - p : 80), p);
		p += strlen(want_key);
		const char *q = strchr(p, '"');
		ck_sbuf_printf(&b, "%s%.*s", b.len ? " " : "", (int)(q - p), p);
		p = q;
	}
	free(want_key);
	ck_sbuf_putc(&b, '\0');
	return ck_sbuf_steal(&b);
}

/* The first trace line of step (new string), or NULL. */
static char *trace_line(const char *log, const char *step, int nth)
{
	char *pat = ck_xasprintf("step=\"%s\"", step);
	const char *p = log;
	for (int i = 0; i <= nth && p != NULL; i++)
		if ((p = strstr(p, pat)) != NULL && i < nth)
			p++;
	free(pat);
	if (p == NULL)
		return NULL;
	const char *bol = p, *eol = strchr(p, '\n');
	while (bol > log && bol[-1] != '\n')
		bol--;
	return ck_xasprintf("%.*s", (int)(eol - bol), bol);
}

#define ASSERT_TRACE_HAS(log, step, nth, text)                                                     \
	do {                                                                                       \
		char *l_ = trace_line((log), (step), (nth));                                       \
		ck_assert_msg(l_ != NULL, "no trace line %s #%d", (step), (nth));                  \
		ck_assert_msg(strstr(l_, (text)) != NULL, "%s #%d lacks %s: %s", (step), (nth),    \
		              (text), l_);                                                         \
		free(l_);                                                                          \
	} while (0)

START_TEST(test_key_trace_follows_one_key)
{
	char path[] = "/tmp/test_trace_XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_log_set_fd(fd);
	ck_assert_int_eq(ck_log_set_trace_key("ns/a", NULL), 0);

	fx_t f;
	fx_init(&f, NULL);
	ck_wq_t *q = ck_wq_new(&(ck_wq_options_t){.name = "widgets", .clock = &f.clk.base});
	ck_cache_informer_add_handler(f.inf, &tq_handler, q); /* handler 1 */
	fx_start(&f);                                         /* handler 2: the recorder */

	/* The initial list: a and b. */
	ck_obj_t *items[] = {mkobj("ns", "a", "1"), mkobj("ns", "b", "2")};
	respond_list(&f, items, 2, "10", NULL);
	cache_informer_drain(f.inf);
	char *log = trace_take(fd);
	char *steps = trace_steps(log, "ns/a");
	ck_assert_str_eq(steps, "list-item delta-queued delta-popped store-updated "
	                        "handler-notified queue-add handler-notified");
	ASSERT_TRACE_HAS(log, "list-item", 0, "resource=\"widgets.test.example.com\" rv=\"1\"");
	ASSERT_TRACE_HAS(log, "delta-queued", 0, "type=\"ReplacedAll\" rv=\"1\"");
	ASSERT_TRACE_HAS(log, "delta-popped", 0, "initialList=true");
	ASSERT_TRACE_HAS(log, "store-updated", 0, "op=\"add\" rv=\"1\"");
	ASSERT_TRACE_HAS(log, "handler-notified", 0, "handler=1 event=\"add\"");
	ASSERT_TRACE_HAS(log, "handler-notified", 0, "initialList=true");
	ASSERT_TRACE_HAS(log, "handler-notified", 1, "handler=2 event=\"add\"");
	ASSERT_TRACE_HAS(log, "queue-add", 0, "queue=\"widgets\" outcome=\"queued\"");
	free(steps);
	free(log);

	/* A watch event for each, then for a while its key is still queued. */
	ck_cache_fake_req_t *w = last_watch(&f);
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj("ns", "b", "11"));
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj("ns", "a", "12"));
	cache_informer_drain(f.inf);
	log = trace_take(fd);
	steps = trace_steps(log, "ns/a");
	ck_assert_str_eq(steps, "watch-event delta-queued delta-popped store-updated "
	                        "handler-notified queue-add handler-notified");
	ASSERT_TRACE_HAS(log, "watch-event", 0, "type=\"MODIFIED\" rv=\"12\"");
	ASSERT_TRACE_HAS(log, "delta-queued", 0, "type=\"Updated\" rv=\"12\"");
	ASSERT_TRACE_HAS(log, "delta-popped", 0, "initialList=false");
	ASSERT_TRACE_HAS(log, "store-updated", 0, "op=\"update\" rv=\"12\" oldRV=\"1\"");
	ASSERT_TRACE_HAS(log, "handler-notified", 0, "event=\"update\" rv=\"12\" resync=false");
	ASSERT_TRACE_HAS(log, "queue-add", 0, "outcome=\"deduplicated: already queued\"");
	free(steps);
	free(log);

	/* A worker: a (queued first) fails once and is retried after its backoff, b
	 * (not traced) is done meanwhile, then a succeeds. */
	const char *k = ck_wq_get(q);
	ck_assert_str_eq(k, "ns/a");
	ck_wq_add_rate_limited(q, k);
	ck_wq_done(q, k);
	k = ck_wq_get(q);
	ck_assert_str_eq(k, "ns/b");
	ck_wq_forget(q, k);
	ck_wq_done(q, k);
	ck_clk_fake_advance(&f.clk, 10 * CK_NS_PER_MS);
	k = ck_wq_get(q);
	ck_assert_str_eq(k, "ns/a");
	ck_wq_forget(q, k);
	ck_wq_done(q, k);
	log = trace_take(fd);
	steps = trace_steps(log, "ns/a");
	ck_assert_str_eq(steps, "queue-get queue-rate-limited queue-add-after queue-done "
	                        "queue-get queue-forget queue-done");
	ASSERT_TRACE_HAS(log, "queue-rate-limited", 0, "delayMs=5 failures=1");
	ASSERT_TRACE_HAS(log, "queue-add-after", 0, "delayMs=5 outcome=\"waiting\"");
	ASSERT_TRACE_HAS(log, "queue-done", 0, "outcome=\"finished\"");
	ASSERT_TRACE_HAS(log, "queue-forget", 0, "failures=1");
	free(steps);
	free(log);

	/* The watch expires; a is deleted meanwhile: the relist's tombstone. */
	ck_cache_fake_req_error_event(w, 410, "Expired", "too old resource version: 12 (50)");
	cache_informer_tick(f.inf);
	advance_ms(&f, 1700);
	ck_obj_t *relist[] = {mkobj("ns", "b", "11")};
	respond_list(&f, relist, 1, "60", NULL);
	cache_informer_drain(f.inf);
	log = trace_take(fd);
	steps = trace_steps(log, "ns/a");
	ck_assert_str_eq(steps, "store-updated handler-notified queue-add handler-notified");
	ASSERT_TRACE_HAS(log, "store-updated", 0, "op=\"delete\" rv=\"12\"");
	ASSERT_TRACE_HAS(log, "store-updated", 0, "by=\"list: not in it\"");
	ASSERT_TRACE_HAS(log, "handler-notified", 0, "event=\"delete\" rv=\"12\"");
	ASSERT_TRACE_HAS(log, "handler-notified", 0, "finalStateUnknown=true");
	free(steps);
	free(log);

	/* Off: nothing more, whatever happens to a. */
	ck_log_set_trace_key(NULL, NULL);
	ck_cache_fake_req_event(last_watch(&f), CK_WATCH_ADDED, mkobj("ns", "a", "70"));
	cache_informer_drain(f.inf);
	log = trace_take(fd);
	ck_assert_ptr_null(strstr(log, "\"Trace\""));
	free(log);

	ck_log_set_fd(2);
	close(fd);
	fx_free(&f);
	ck_wq_free(q);
}
END_TEST

Suite *suite_cache_informer(void)
{
	Suite *s = suite_create("cache_informer");
	TCase *tc = tcase_create("reflector");
	tcase_add_test(tc, test_initial_list_paged_then_watch);
	tcase_add_test(tc, test_selectors_reach_list_and_watch);
	tcase_add_test(tc, test_shard_selector_client_side);
	tcase_add_test(tc, test_shard_selector_server_side);
	tcase_add_test(tc, test_shard_selector_none);
	tcase_add_test(tc, test_shard_selector_empty_list);
	tcase_add_test(tc, test_expired_continue_falls_back_to_full_list);
	tcase_add_test(tc, test_list_gone_and_too_large_relist_from_empty_rv);
	tcase_add_test(tc, test_relist_pages_only_where_the_server_pages);
	tcase_add_test(tc, test_watch_gone_at_listed_rv_relists_from_that_rv);
	tcase_add_test(tc, test_watch_events_bookmark_and_clean_close);
	tcase_add_test(tc, test_watch_gone_relists_with_tombstones);
	tcase_add_test(tc, test_watch_closed_at_once_is_an_error);
	tcase_add_test(tc, test_transport_error_rewatches_without_relist);
	tcase_add_test(tc, test_watch_5xx_relists_after_backoff);
	tcase_add_test(tc, test_429_honours_retry_after);
	tcase_add_test(tc, test_429_on_list_honours_retry_after);
	tcase_add_test(tc, test_watch_error_event_500_relists_after_backoff);
	tcase_add_test(tc, test_repeated_429_backs_off_exponentially);
	tcase_add_test(tc, test_forbidden_reported_logged_once_and_sync_reason);
	tcase_add_test(tc, test_not_found_hint_and_wait_on_loop_thread);
	tcase_add_test(tc, test_start_failure_retries);
	tcase_add_test(tc, test_backoff_function);
	tcase_add_test(tc, test_backoff_grows_and_resets_after_health);
	tcase_add_test(tc, test_stall_detection);
	tcase_add_test(tc, test_streaming_list);
	tcase_add_test(tc, test_streaming_list_refused_falls_back);
	tcase_add_test(tc, test_streaming_list_is_the_default);
	tcase_add_test(tc, test_streaming_refusal_falls_back_for_one_round);
	tcase_add_test(tc, test_streaming_applies_modified_and_deleted);
	tcase_add_test(tc, test_streaming_interrupted_streams_again);
	suite_add_tcase(s, tc);
	TCase *th = tcase_create("informer");
	tcase_add_test(th, test_resync_only_to_due_handlers);
	tcase_add_test(th, test_resync_periods_as_client_go);
	tcase_add_test(th, test_late_handler_gets_existing_objects_first);
	tcase_add_test(th, test_handler_added_after_start_before_sync);
	tcase_add_test(th, test_remove_handler_from_its_callback);
	tcase_add_test(th, test_handler_added_in_a_callback_misses_the_event_in_flight);
	tcase_add_test(th, test_handler_added_in_a_callback_sees_the_store);
	tcase_add_test(th, test_handler_added_in_a_callback_during_the_initial_list);
	tcase_add_test(th, test_late_handler_added_between_batches_of_the_initial_list);
	tcase_add_test(th, test_delete_add_delete_delivered_in_order);
	tcase_add_test(th, test_transform_before_store);
	tcase_add_test(th, test_index_follows_updates_and_deletes);
	tcase_add_test(th, test_shutdown_stops_watch_and_deliveries);
	tcase_add_test(th, test_shutdown_wakes_waiters);
	tcase_add_test(th, test_factory_shares_informers_and_waits);
	tcase_add_test(th, test_factory_wait_reports_each_unsynced);
	tcase_add_test(th, test_processing_runs_on_the_loop);
	tcase_add_test(th, test_readers_on_threads_while_the_loop_processes);
	tcase_add_test(th, test_long_random_churn);
	tcase_add_test(th, test_key_trace_follows_one_key);
	tcase_add_test(th, test_shard_parts);
	tcase_add_test(th, test_shard_parts_merged);
	suite_add_tcase(s, th);
	return s;
}
