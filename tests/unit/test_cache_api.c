/*
 * Unit tests for the smaller pieces of the cache API that mirror client-go's
 * (issue 12 item 9): LastSyncResourceVersion, the watch error handler's
 * occasions, the filtering handler, the factory's tweak/transform options and
 * the indexer listings. Fake list/watch source and fake clock; the loop never
 * runs (processing is driven through the test hooks).
 */
#include "test_cache_util.h"

#include <check.h>
#include <ev.h>
#include <pthread.h>

typedef struct afx {
	struct ev_loop *loop;
	ck_clk_fake_t clk;
	ck_cache_fake_lw_t *fake;
	ck_cache_informer_t *inf;
	rec_t rec;
	int werr_calls;
	int werr_last_code;
} afx_t;

static void afx_werr(void *ud, ck_cache_informer_t *inf, const char *msg, const ck_result_t *res,
                     bool healing)
{
	afx_t *f = ud;
	(void)inf;
	(void)msg;
	(void)healing;
	f->werr_calls++;
	f->werr_last_code = res ? res->http_code : -1;
}

static void afx_init(afx_t *f)
{
	memset(f, 0, sizeof(*f));
	f->loop = ev_loop_new(EVFLAG_AUTO);
	ck_clk_fake_init(&f->clk, 1000 * CK_NS_PER_SEC, 1700000000LL * (int64_t)CK_NS_PER_SEC);
	f->fake = ck_cache_fake_lw_new();
	ck_cache_informer_opts_t o = {
	    .clock = &f->clk.base, .on_watch_error = afx_werr, .watch_error_ud = f};
	f->inf = ck_cache_informer_new(f->loop, &widget_type, ck_cache_fake_lw_source(f->fake), &o);
}

static void afx_free(afx_t *f)
{
	ck_cache_informer_free(f->inf);
	ck_cache_fake_lw_free(f->fake);
	ev_loop_destroy(f->loop);
	rec_reset(&f->rec);
}

/* Lists a and b at rv and lets the informer process it. */
static void afx_sync(afx_t *f, const char *rv)
{
	ck_cache_fake_req_t *l = ck_cache_fake_lw_last(f->fake, false);
	ck_cache_fake_req_item(l, mkobj("ns", "a", "1"));
	ck_cache_fake_req_item(l, mkobj("ns", "b", "2"));
	ck_cache_fake_req_meta(l, rv, NULL);
	ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
	cache_informer_drain(f->inf);
}

/* ---------------------------------------------------------------- last sync rv */

typedef struct rv_thr {
	ck_cache_informer_t *inf;
	char *got;
} rv_thr_t;

static void *rv_thr_main(void *p)
{
	rv_thr_t *t = p;
	t->got = ck_cache_informer_last_sync_resource_version(t->inf);
	return NULL;
}

static char *rv_from_other_thread(ck_cache_informer_t *inf)
{
	rv_thr_t t = {.inf = inf};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, rv_thr_main, &t), 0);
	pthread_join(th, NULL);
	return t.got;
}

static void assert_last_rv(ck_cache_informer_t *inf, const char *want)
{
	char *here = ck_cache_informer_last_sync_resource_version(inf);
	char *there = rv_from_other_thread(inf);
	ck_assert_str_eq(here, want);
	ck_assert_str_eq(there, want);
	free(here);
	free(there);
}

START_TEST(test_last_sync_rv_follows_list_events_and_bookmarks)
{
	afx_t f;
	afx_init(&f);
	assert_last_rv(f.inf, ""); /* before anything was listed */
	ck_assert_int_eq(ck_cache_informer_start(f.inf, NULL), 0);
	afx_sync(&f, "100");
	assert_last_rv(f.inf, "100");
	ck_cache_fake_req_t *w = ck_cache_fake_lw_last(f.fake, true);
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj("ns", "a", "105"));
	cache_informer_drain(f.inf);
	assert_last_rv(f.inf, "105");
	/* A bookmark moves it too (client-go's watchHandler sets it for every event). */
	ck_cache_fake_req_event(w, CK_WATCH_BOOKMARK, mkbookmark("120", false));
	cache_informer_drain(f.inf);
	assert_last_rv(f.inf, "120");
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj("ns", "b", "130"));
	cache_informer_drain(f.inf);
	assert_last_rv(f.inf, "130");
	afx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- watch error handler */

static void advance_ms(afx_t *f, uint64_t ms)
{
	ck_clk_fake_advance(&f->clk, ms * CK_NS_PER_MS);
	cache_informer_tick(f->inf);
}

/* client-go calls its WatchErrorHandler when ListAndWatch returns an error: a
 * failed list, or a watch *request* answered with an error (410 included) -- not
 * a watch stream that ends with an ERROR event or a cut, not a 429 it retries. */
START_TEST(test_watch_error_handler_occasions)
{
	afx_t f;
	afx_init(&f);
	ck_assert_int_eq(ck_cache_informer_start(f.inf, NULL), 0);
	/* A failed list: reported. */
	ck_cache_fake_req_finish(ck_cache_fake_lw_last(f.fake, false), 500, "InternalError",
	                         "etcd down", 0);
	ck_assert_int_eq(f.werr_calls, 1);
	ck_assert_int_eq(f.werr_last_code, 500);
	advance_ms(&f, 60000);
	afx_sync(&f, "10");

	/* ERROR events in the stream (expired, internal): not reported. */
	ck_cache_fake_req_error_event(ck_cache_fake_lw_last(f.fake, true), 410, "Expired",
	                              "too old resource version");
	advance_ms(&f, 0);
	advance_ms(&f, 60000); /* the relist */
	afx_sync(&f, "20");
	ck_cache_fake_req_error_event(ck_cache_fake_lw_last(f.fake, true), 500, "InternalError",
	                              "boom");
	advance_ms(&f, 0);
	ck_assert_int_eq(f.werr_calls, 1);
	advance_ms(&f, 60000); /* the relist: an ERROR 500 ends the round */
	afx_sync(&f, "21");

	/* A stream cut after events: not reported. */
	ck_cache_fake_req_t *w = ck_cache_fake_lw_last(f.fake, true);
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj("ns", "a", "22"));
	ck_cache_fake_req_finish(w, 0, NULL, "connection reset", 0);
	ck_assert_int_eq(f.werr_calls, 1);
	advance_ms(&f, 60000);

	/* A watch request answered 429: retried, not reported. */
	ck_cache_fake_req_finish(ck_cache_fake_lw_last(f.fake, true), 429, "TooManyRequests",
	                         "slow down", 1);
	ck_assert_int_eq(f.werr_calls, 1);
	advance_ms(&f, 60000);

	/* A watch request answered 410: reported (client-go's handler logs it at V(4)). */
	ck_cache_fake_req_finish(ck_cache_fake_lw_last(f.fake, true), 410, "Expired",
	                         "too old resource version", 0);
	ck_assert_int_eq(f.werr_calls, 2);
	ck_assert_int_eq(f.werr_last_code, 410);
	advance_ms(&f, 60000);
	afx_sync(&f, "30");

	/* A watch request answered 403: reported. */
	ck_cache_fake_req_finish(ck_cache_fake_lw_last(f.fake, true), 403, "Forbidden", "no", 0);
	ck_assert_int_eq(f.werr_calls, 3);
	ck_assert_int_eq(f.werr_last_code, 403);
	afx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- filtering handler */

static bool is_web(void *ud, const ck_obj_t *obj)
{
	const char *app = ck_obj_label(obj, "app");
	(void)ud;
	return app != NULL && strcmp(app, "web") == 0;
}

START_TEST(test_filtering_handler_turns_updates_into_adds_and_deletes)
{
	afx_t f;
	afx_init(&f);
	ck_cache_filtering_handler_t fh = {
	    .filter = is_web, .handler = rec_handler, .handler_ud = &f.rec};
	ck_assert_ptr_nonnull(ck_cache_informer_add_filtered_handler(f.inf, &fh));
	ck_assert_int_eq(ck_cache_informer_start(f.inf, NULL), 0);
	ck_cache_fake_req_t *l = ck_cache_fake_lw_last(f.fake, false);
	ck_cache_fake_req_item(l, mkobj_app("ns", "a", "1", "web"));
	ck_cache_fake_req_item(l, mkobj_app("ns", "b", "2", "db"));
	ck_cache_fake_req_meta(l, "10", NULL);
	ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
	cache_informer_drain(f.inf);
	ck_assert_str_eq(rec_text(&f.rec), "add ns/a 1 initial\n");
	rec_reset(&f.rec);

	ck_cache_fake_req_t *w = ck_cache_fake_lw_last(f.fake, true);
	/* old passes, new does not: a delete of the old state */
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj_app("ns", "a", "11", "db"));
	cache_informer_drain(f.inf);
	/* old does not, new does: an add, not of the initial list */
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj_app("ns", "b", "12", "web"));
	cache_informer_drain(f.inf);
	/* both pass: the update itself */
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj_app("ns", "b", "13", "web"));
	cache_informer_drain(f.inf);
	/* neither passes: nothing */
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj_app("ns", "a", "14", "db"));
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj_app("ns", "a", "15", "db"));
	cache_informer_drain(f.inf);
	/* a delete of a passing object passes */
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj_app("ns", "b", "16", "web"));
	cache_informer_drain(f.inf);
	ck_assert_str_eq(rec_text(&f.rec), "delete ns/a 1\n"
	                                   "add ns/b 12\n"
	                                   "update ns/b 12->13\n"
	                                   "delete ns/b 16\n");
	ck_assert_int_eq(f.rec.initial_adds, 0);
	ck_assert_int_eq(f.rec.unknown_deletes, 0);
	afx_free(&f);
}
END_TEST

START_TEST(test_filtering_handler_null_callbacks_and_filter)
{
	afx_t f;
	afx_init(&f);
	/* No filter: everything passes; a missing callback is skipped, not called. */
	ck_cache_filtering_handler_t all = {.handler = rec_handler, .handler_ud = &f.rec};
	ck_cache_filtering_handler_t adds_only = {
	    .filter = is_web, .handler = {.on_add = rec_on_add}, .handler_ud = &f.rec};
	ck_cache_informer_add_handler(f.inf, ck_cache_filtering_handler(), &all);
	ck_cache_informer_add_filtered_handler(f.inf, &adds_only);
	ck_assert_int_eq(ck_cache_informer_start(f.inf, NULL), 0);
	ck_cache_fake_req_t *l = ck_cache_fake_lw_last(f.fake, false);
	ck_cache_fake_req_item(l, mkobj_app("ns", "a", "1", "web"));
	ck_cache_fake_req_meta(l, "10", NULL);
	ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
	cache_informer_drain(f.inf);
	ck_cache_fake_req_t *w = ck_cache_fake_lw_last(f.fake, true);
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj_app("ns", "a", "11", "db"));
	cache_informer_drain(f.inf);
	ck_assert_str_eq(rec_text(&f.rec), "add ns/a 1 initial\nadd ns/a 1 initial\n"
	                                   "update ns/a 1->11\n");
	afx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- factory options */

typedef struct ffx {
	ck_cache_fake_lw_t *fake;
	char *lw_ns;
	int tweaks, transforms;
} ffx_t;

static ck_cache_lw_t *ffx_lw_new(void *ud, const ck_type_t *t, const char *ns)
{
	ffx_t *f = ud;
	(void)t;
	free(f->lw_ns);
	f->lw_ns = ck_xstrdup(ns ? ns : "");
	return ck_cache_fake_lw_source(f->fake);
}

static void ffx_tweak(void *ud, ck_list_opts_t *o)
{
	ffx_t *f = ud;
	f->tweaks++;
	/* What client-go's tweaks do: add to the selectors. */
	o->label_selector = "tier=web";
	o->field_selector = "metadata.name!=skip";
}

/* Marks what it saw, so the store shows it ran: the same object plus a label. */
static ck_obj_t *ffx_transform(void *ud, ck_obj_t *obj)
{
	ffx_t *f = ud;
	f->transforms++;
	const char *labels[] = {"transformed=yes", NULL};
	return mkobj_t(obj->type, obj->ns, obj->name, obj->rv, labels);
}

START_TEST(test_factory_tweak_transform_namespace)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	ck_clk_fake_t clk;
	ck_clk_fake_init(&clk, 1000 * CK_NS_PER_SEC, 1700000000LL * (int64_t)CK_NS_PER_SEC);
	ffx_t f = {.fake = ck_cache_fake_lw_new()};
	ck_cache_factory_opts_t fo = {.clock = &clk.base,
	                              .ns = "team-a",
	                              .lw_new = ffx_lw_new,
	                              .lw_ud = &f,
	                              .tweak_list_opts = ffx_tweak,
	                              .tweak_ud = &f,
	                              .transform = ffx_transform,
	                              .transform_ud = &f};
	ck_cache_factory_t *fac = ck_cache_factory_new(loop, NULL, &fo);
	ck_cache_informer_t *inf = ck_cache_factory_informer(fac, &widget_type);
	ck_assert_ptr_nonnull(inf);
	ck_assert_str_eq(f.lw_ns, "team-a");
	ck_assert_int_eq(ck_cache_factory_start(fac, NULL), 0);

	/* The list and the watch after it both carry the tweaked selectors. */
	ck_cache_fake_req_t *l = ck_cache_fake_lw_last(f.fake, false);
	ck_assert_str_eq(ck_cache_fake_req_opts(l)->label_selector, "tier=web");
	ck_assert_str_eq(ck_cache_fake_req_opts(l)->field_selector, "metadata.name!=skip");
	ck_cache_fake_req_item(l, mkobj("team-a", "a", "1"));
	ck_cache_fake_req_meta(l, "10", NULL);
	ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
	ck_cache_fake_req_t *w = ck_cache_fake_lw_last(f.fake, true);
	ck_assert_ptr_nonnull(w);
	ck_assert_str_eq(ck_cache_fake_req_opts(w)->label_selector, "tier=web");
	ck_assert_str_eq(ck_cache_fake_req_opts(w)->resource_version, "10");
	ck_assert(ck_cache_fake_req_opts(w)->allow_watch_bookmarks);
	ck_assert_int_eq(f.tweaks, 2);
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("team-a", "b", "11"));
	cache_informer_drain(inf);

	/* Every object stored went through the factory's transform. */
	ck_assert_int_eq(f.transforms, 2);
	ck_obj_t *a = ck_cache_store_get(ck_cache_informer_store(inf), "team-a/a");
	ck_obj_t *b = ck_cache_store_get(ck_cache_informer_store(inf), "team-a/b");
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_str_eq(ck_obj_label(a, "transformed"), "yes");
	ck_assert_str_eq(ck_obj_label(b, "transformed"), "yes");
	ck_obj_unref(a);
	ck_obj_unref(b);

	ck_cache_factory_free(fac);
	ck_cache_fake_lw_free(f.fake);
	free(f.lw_ns);
	ev_loop_destroy(loop);
}
END_TEST

/* ---------------------------------------------------------------- indexer listings */

/* Multi-valued: every label value of the object ("by any label value"). */
static void label_values_fn(void *ud, const ck_obj_t *obj, ck_cache_index_values_t *out)
{
	(void)ud;
	const char *v;
	if ((v = ck_obj_label(obj, "app")) != NULL)
		ck_cache_index_values_add(out, v);
	if ((v = ck_obj_label(obj, "tier")) != NULL)
		ck_cache_index_values_add(out, v);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp((*(ck_obj_t *const *)a)->name, (*(ck_obj_t *const *)b)->name);
}

static char *names(ck_cache_objs_t *l)
{
	qsort(l->items, l->n, sizeof(*l->items), cmp_name);
	ck_sbuf_t b = CK_SBUF_INIT;
	for (size_t i = 0; i < l->n; i++)
		ck_sbuf_printf(&b, "%s%s", i ? " " : "", l->items[i]->name);
	ck_cache_objs_free(l);
	return ck_sbuf_steal(&b);
}

static ck_obj_t *mk2(const char *name, const char *app, const char *tier)
{
	char a[32], t[32];
	snprintf(a, sizeof(a), "app=%s", app);
	snprintf(t, sizeof(t), "tier=%s", tier);
	const char *labels[] = {a, t, NULL};
	return mkobj_t(&widget_type, "ns", name, "1", labels);
}

START_TEST(test_store_index_by_object_and_indexers)
{
	ck_cache_store_t *s = ck_cache_store_new();
	int tag = 0;
	ck_assert_int_eq(ck_cache_store_add_index(s, "labels", label_values_fn, &tag, NULL), 0);
	ck_obj_t *objs[] = {mk2("a", "web", "front"), mk2("b", "web", "back"),
	                    mk2("c", "db", "back"), mk2("d", "cache", "edge")};
	for (size_t i = 0; i < CK_ARRAY_LEN(objs); i++) {
		ck_obj_unref(ck_cache_store_upsert(s, objs[i]));
		ck_obj_unref(objs[i]);
	}
	/* Objects sharing any value with the probe: app=web (a, b) or tier=back (b, c);
	 * b has both and comes once. The probe itself is not stored. */
	ck_obj_t *probe = mk2("probe", "web", "back");
	ck_cache_objs_t l;
	char *err = NULL;
	ck_assert_int_eq(ck_cache_store_index(s, "labels", probe, &l, &err), 0);
	char *got = names(&l);
	ck_assert_str_eq(got, "a b c");
	free(got);
	/* One value: exactly that value's set. */
	ck_obj_t *probe2 = mk2("p2", "cache", "nowhere");
	ck_assert_int_eq(ck_cache_store_index(s, "labels", probe2, &l, NULL), 0);
	got = names(&l);
	ck_assert_str_eq(got, "d");
	free(got);
	/* The namespace index, by object. */
	ck_assert_int_eq(ck_cache_store_index(s, CK_CACHE_INDEX_NAMESPACE, probe, &l, NULL), 0);
	ck_assert_uint_eq(l.n, 4);
	ck_cache_objs_free(&l);
	ck_assert_int_eq(ck_cache_store_index(s, "nope", probe, &l, &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "nope"));
	ck_assert_uint_eq(l.n, 0);
	free(err);
	ck_obj_unref(probe);
	ck_obj_unref(probe2);

	/* GetIndexers: names, and the function each was added with. */
	ck_cache_strs_t names_l;
	ck_cache_store_indexers(s, &names_l);
	ck_assert_uint_eq(names_l.n, 2);
	bool ns_seen = false, labels_seen = false;
	for (size_t i = 0; i < names_l.n; i++) {
		ns_seen |= strcmp(names_l.items[i], CK_CACHE_INDEX_NAMESPACE) == 0;
		labels_seen |= strcmp(names_l.items[i], "labels") == 0;
	}
	ck_assert(ns_seen && labels_seen);
	ck_cache_strs_free(&names_l);
	ck_cache_index_fn fn = NULL;
	void *ud = NULL;
	ck_assert_int_eq(ck_cache_store_get_indexer(s, "labels", &fn, &ud), 0);
	ck_assert(fn == label_values_fn);
	ck_assert_ptr_eq(ud, &tag);
	ck_assert_int_eq(ck_cache_store_get_indexer(s, "nope", &fn, &ud), -1);

	/* IndexKeys and ListIndexFuncValues, for completeness of the client-go set. */
	ck_cache_strs_t keys;
	ck_assert_int_eq(ck_cache_store_index_keys(s, "labels", "back", &keys, NULL), 0);
	ck_assert_uint_eq(keys.n, 2);
	ck_cache_strs_free(&keys);
	ck_assert_int_eq(ck_cache_store_index_values(s, "labels", &keys, NULL), 0);
	ck_assert_uint_eq(keys.n, 6); /* web db cache front back edge */
	ck_cache_strs_free(&keys);
	ck_cache_store_free(s);
}
END_TEST

Suite *suite_cache_api(void);
Suite *suite_cache_api(void)
{
	Suite *s = suite_create("cache_api");
	TCase *tc = tcase_create("informer");
	tcase_add_test(tc, test_last_sync_rv_follows_list_events_and_bookmarks);
	tcase_add_test(tc, test_watch_error_handler_occasions);
	tcase_add_test(tc, test_filtering_handler_turns_updates_into_adds_and_deletes);
	tcase_add_test(tc, test_filtering_handler_null_callbacks_and_filter);
	suite_add_tcase(s, tc);
	tc = tcase_create("store");
	tcase_add_test(tc, test_store_index_by_object_and_indexers);
	suite_add_tcase(s, tc);
	tc = tcase_create("factory");
	tcase_add_test(tc, test_factory_tweak_transform_namespace);
	suite_add_tcase(s, tc);
	return s;
}
