/*
 * Unit tests for the informer's queue model (client-go's RealFIFO with atomic
 * events, delta.c): deltas reach handlers in the order the server sent them, a
 * relist replaces the store in one step, resyncs happen only while watching,
 * and a handler added late catches up without holding the others back.
 * Driven like test_cache_informer.c: the fake list/watch source, a fake clock,
 * and the loop run by hand (ev_run NOWAIT processes one batch).
 */
#include "test_cache_util.h"

#include <check.h>
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

typedef struct ffx {
	struct ev_loop *loop;
	ck_clk_fake_t clk;
	ck_cache_fake_lw_t *fake;
	ck_cache_informer_t *inf;
	rec_t rec;
} ffx_t;

static void ffx_init(ffx_t *f, const ck_cache_informer_opts_t *extra)
{
	memset(f, 0, sizeof(*f));
	f->loop = ev_loop_new(EVFLAG_AUTO);
	ck_clk_fake_init(&f->clk, 1000 * CK_NS_PER_SEC, 1700000000LL * (int64_t)CK_NS_PER_SEC);
	f->fake = ck_cache_fake_lw_new();
	ck_cache_informer_opts_t o = extra ? *extra : (ck_cache_informer_opts_t){0};
	o.clock = &f->clk.base;
	f->inf = ck_cache_informer_new(f->loop, &widget_type, ck_cache_fake_lw_source(f->fake), &o);
}

static void ffx_free(ffx_t *f)
{
	ck_cache_informer_free(f->inf);
	ck_cache_fake_lw_free(f->fake);
	ev_loop_destroy(f->loop);
	rec_reset(&f->rec);
}

static ck_cache_fake_req_t *ffx_watch(ffx_t *f)
{
	return ck_cache_fake_lw_last(f->fake, true);
}

/* Answers the pending list with items (taken) at rv. */
static void ffx_list(ffx_t *f, ck_obj_t **items, size_t n, const char *rv)
{
	ck_cache_fake_req_t *l = ck_cache_fake_lw_last(f->fake, false);
	ck_assert(ck_cache_fake_req_active(l));
	for (size_t i = 0; i < n; i++)
		ck_cache_fake_req_item(l, items[i]);
	ck_cache_fake_req_meta(l, rv, NULL);
	ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
}

/* Starts with the recording handler, lists a@1 and b@2 at rv 10, drains. */
static void ffx_synced(ffx_t *f)
{
	ck_cache_informer_add_handler(f->inf, &rec_handler, &f->rec);
	ck_assert_int_eq(ck_cache_informer_start(f->inf, NULL), 0);
	ck_obj_t *items[] = {mkobj("ns", "a", "1"), mkobj("ns", "b", "2")};
	ffx_list(f, items, 2, "10");
	cache_informer_drain(f->inf);
	ck_assert(ck_cache_informer_has_synced(f->inf));
	rec_reset(&f->rec);
}

static void ffx_advance_ms(ffx_t *f, uint64_t ms)
{
	ck_clk_fake_advance(&f->clk, ms * CK_NS_PER_MS);
	cache_informer_tick(f->inf);
}

/* ---------------------------------------------------------------- order */

START_TEST(test_deltas_in_server_order_across_keys)
{
	/* a's second update was sent after c's add: a DeltaFIFO delivers both of a's
	 * first (grouped under the key queued first), a RealFIFO in arrival order. */
	ffx_t f;
	ffx_init(&f, NULL);
	ffx_synced(&f);
	ck_cache_fake_req_t *w = ffx_watch(&f);
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj("ns", "a", "11"));
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", "c", "12"));
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj("ns", "a", "13"));
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj("ns", "c", "14"));
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj("ns", "b", "15"));
	cache_informer_drain(f.inf);
	ck_assert_str_eq(rec_text(&f.rec), "update ns/a 1->11\n"
	                                   "add ns/c 12\n"
	                                   "update ns/a 11->13\n"
	                                   "delete ns/c 14\n"
	                                   "delete ns/b 15\n");
	ffx_free(&f);
}
END_TEST

START_TEST(test_delete_of_a_key_never_seen_is_delivered)
{
	/* client-go's RealFIFO queues every Deleted it is given; processing deletes it
	 * from the store (a no-op) and calls OnDelete with the object as sent. */
	ffx_t f;
	ffx_init(&f, NULL);
	ffx_synced(&f);
	ck_cache_fake_req_event(ffx_watch(&f), CK_WATCH_DELETED, mkobj("ns", "ghost", "11"));
	cache_informer_drain(f.inf);
	ck_assert_str_eq(rec_text(&f.rec), "delete ns/ghost 11\n");
	ck_assert_uint_eq(ck_cache_store_len(ck_cache_informer_store(f.inf)), 2);
	ffx_free(&f);
}
END_TEST

START_TEST(test_relist_delivers_deletes_then_replacements)
{
	/* An atomic Replace: the store takes the list at once, then handlers get the
	 * tombstones for vanished keys, then the updates/adds in list order. */
	ffx_t f;
	ffx_init(&f, NULL);
	ffx_synced(&f);
	ck_cache_fake_req_t *w = ffx_watch(&f);
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mkobj("ns", "a", "11"));
	ck_cache_fake_req_error_event(w, 410, "Expired", "too old");
	cache_informer_tick(f.inf);
	ffx_advance_ms(&f, 60000);
	ck_obj_t *items[] = {mkobj("ns", "a", "20"), mkobj("ns", "d", "21")};
	ffx_list(&f, items, 2, "30");
	cache_informer_drain(f.inf);
	/* a's update, queued before the relist, is delivered first, in order; then b's
	 * tombstone (its last known state), then the list's items in list order. */
	ck_assert_str_eq(rec_text(&f.rec), "update ns/a 1->11\n"
	                                   "delete ns/b 2 unknown\n"
	                                   "update ns/a 11->20\n"
	                                   "add ns/d 21\n");
	ffx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- resync */

START_TEST(test_resync_only_while_watching)
{
	/* client-go runs the resync timer from the watch loop: not while listing or
	 * backing off. */
	ck_cache_informer_opts_t o = {.default_resync_ms = 1000};
	ffx_t f;
	ffx_init(&f, &o);
	ffx_synced(&f);
	ck_cache_fake_req_error_event(ffx_watch(&f), 410, "Expired", "too old");
	cache_informer_tick(f.inf); /* the watch ends: backoff, then a relist */
	ffx_advance_ms(&f, 1700);   /* past the resync period and the first backoff */
	ck_assert(ck_cache_fake_req_active(ck_cache_fake_lw_last(f.fake, false)));
	cache_informer_drain(f.inf);
	ffx_advance_ms(&f, 500);
	cache_informer_drain(f.inf);
	ck_assert_str_eq(rec_text(&f.rec), "");
	/* The relist (unchanged objects: no notification) and the watch after it: the
	 * resync that was held back is due now. */
	ck_obj_t *items[] = {mkobj("ns", "a", "1"), mkobj("ns", "b", "2")};
	ffx_list(&f, items, 2, "10");
	cache_informer_drain(f.inf);
	ck_assert_str_eq(rec_text(&f.rec), "");
	ffx_advance_ms(&f, 0);
	cache_informer_drain(f.inf);
	ck_assert_int_eq(f.rec.updates, 2);
	ffx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- atomic relist */

enum { GEN_OBJS = 10000, GEN_GONE = 1000 };

static ck_obj_t *gen_obj(int i, int gen)
{
	char name[32], rv[16], lab[16];
	snprintf(name, sizeof(name), "o%d", i);
	snprintf(rv, sizeof(rv), "%d", gen);
	snprintf(lab, sizeof(lab), "gen=%d", gen);
	const char *labels[] = {lab, NULL};
	return mkobj_t(&widget_type, "ns", name, rv, labels);
}

typedef struct genreader {
	const ck_cache_lister_t *l;
	_Atomic bool stop;
	_Atomic long reads;
	_Atomic long mixed;   /* lists with objects of two generations */
	_Atomic long bad_len; /* lists of neither generation's size */
	_Atomic long back;    /* an older generation after a newer one */
	_Atomic int max_gen;
} genreader_t;

static int obj_gen(const ck_obj_t *o)
{
	const char *g = ck_obj_label(o, "gen");
	return g ? atoi(g) : -1;
}

static void *genreader_thread(void *arg)
{
	genreader_t *g = arg;
	int seen = 0;
	while (!atomic_load(&g->stop)) {
		ck_cache_objs_t objs;
		ck_cache_lister_list(g->l, NULL, &objs);
		int gen = objs.n > 0 ? obj_gen(objs.items[0]) : 0;
		for (size_t i = 1; i < objs.n; i++)
			if (obj_gen(objs.items[i]) != gen) {
				atomic_fetch_add(&g->mixed, 1);
				break;
			}
		if (objs.n != 0 && objs.n != GEN_OBJS)
			atomic_fetch_add(&g->bad_len, 1);
		ck_cache_objs_free(&objs);
		if (gen < seen)
			atomic_fetch_add(&g->back, 1);
		if (gen > seen)
			seen = gen;
		/* A get never goes back either. */
		ck_obj_t *o = ck_cache_lister_get(g->l, "ns", "o5");
		if (o != NULL) {
			int og = obj_gen(o);
			if (og < seen)
				atomic_fetch_add(&g->back, 1);
			if (og > seen)
				seen = og;
		}
		ck_obj_unref(o);
		atomic_store(&g->max_gen, seen);
		atomic_fetch_add(&g->reads, 1);
	}
	return NULL;
}

/* Waits (up to 5 s) until the reader finished a read that started after now. */
static void wait_for_reads(genreader_t *g)
{
	long start = atomic_load(&g->reads);
	for (int i = 0; i < 5000 && atomic_load(&g->reads) < start + 2; i++)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
}

/* Lists every object of generation gen (gen 2: the first GEN_GONE vanished, as
 * many new ones appeared). */
static void list_gen(ffx_t *f, int gen)
{
	ck_cache_fake_req_t *l = ck_cache_fake_lw_last(f->fake, false);
	ck_assert(ck_cache_fake_req_active(l));
	int from = gen == 1 ? 0 : GEN_GONE, to = from + GEN_OBJS;
	for (int i = from; i < to; i++)
		ck_cache_fake_req_item(l, gen_obj(i, gen));
	char rv[16];
	snprintf(rv, sizeof(rv), "%d", gen * 100);
	ck_cache_fake_req_meta(l, rv, NULL);
	ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
}

typedef struct counter {
	long adds, updates, deletes, unknown;
} counter_t;

static void c_add(void *ud, ck_obj_t *obj, bool initial)
{
	(void)obj;
	(void)initial;
	((counter_t *)ud)->adds++;
}
static void c_update(void *ud, ck_obj_t *old, ck_obj_t *obj)
{
	(void)old;
	(void)obj;
	((counter_t *)ud)->updates++;
}
static void c_delete(void *ud, const char *key, ck_obj_t *obj, bool unknown)
{
	(void)key;
	(void)obj;
	((counter_t *)ud)->deletes++;
	((counter_t *)ud)->unknown += unknown;
}
static const ck_cache_handler_t counter_handler = {c_add, c_update, c_delete};

START_TEST(test_relist_is_atomic_for_readers)
{
	ffx_t f;
	ffx_init(&f, NULL); /* batches of 1024: a relist of 10,000 takes several */
	counter_t c = {0};
	ck_cache_informer_add_handler(f.inf, &counter_handler, &c);
	ck_assert_int_eq(ck_cache_informer_start(f.inf, NULL), 0);
	genreader_t g = {.l = ck_cache_informer_lister(f.inf)};
	pthread_t th;
	pthread_create(&th, NULL, genreader_thread, &g);
	list_gen(&f, 1);
	for (int i = 0; i < 100 && cache_informer_pending(f.inf) > 0; i++) {
		ev_run(f.loop, EVRUN_NOWAIT);
		wait_for_reads(&g);
	}
	ck_assert(ck_cache_informer_has_synced(f.inf));
	ck_assert_int_eq(c.adds, GEN_OBJS);
	ck_cache_fake_req_error_event(ffx_watch(&f), 410, "Expired", "too old");
	cache_informer_tick(f.inf);
	ffx_advance_ms(&f, 60000);
	list_gen(&f, 2);
	int rounds = 0;
	for (; rounds < 100 && cache_informer_pending(f.inf) > 0; rounds++) {
		ev_run(f.loop, EVRUN_NOWAIT);
		wait_for_reads(&g);
	}
	wait_for_reads(&g);
	atomic_store(&g.stop, true);
	pthread_join(th, NULL);
	ck_assert_int_gt(rounds, 1); /* the handlers' share did take several batches */
	ck_assert_int_gt(atomic_load(&g.reads), rounds);
	ck_assert_int_eq(atomic_load(&g.mixed), 0);
	ck_assert_int_eq(atomic_load(&g.bad_len), 0);
	ck_assert_int_eq(atomic_load(&g.back), 0);
	ck_assert_int_eq(atomic_load(&g.max_gen), 2);
	ck_assert_int_eq(c.deletes, GEN_GONE);
	ck_assert_int_eq(c.unknown, GEN_GONE);
	ck_assert_int_eq(c.updates, GEN_OBJS - GEN_GONE);
	ck_assert_int_eq(c.adds, GEN_OBJS + GEN_GONE);
	ffx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- late handler */

/* A handler that keeps its own copy of the cache from its notifications alone and
 * checks each one against it. */
typedef struct mirror {
	ck_cache_store_t *st;
	long initial_adds, events, bad;
	ck_cache_handler_reg_t *reg;
} mirror_t;

static void m_add(void *ud, ck_obj_t *obj, bool initial)
{
	mirror_t *m = ud;
	ck_obj_t *had = cache_store_get_obj_nolock(m->st, obj);
	if (had != NULL)
		m->bad++;
	ck_obj_unref(ck_cache_store_upsert(m->st, obj));
	if (initial)
		m->initial_adds++;
	else
		m->events++;
}

static void m_update(void *ud, ck_obj_t *old, ck_obj_t *obj)
{
	mirror_t *m = ud;
	ck_obj_t *had = cache_store_get_obj_nolock(m->st, obj);
	if (had == NULL || strcmp(had->rv, old->rv) != 0)
		m->bad++;
	ck_obj_unref(ck_cache_store_upsert(m->st, obj));
	m->events++;
}

static void m_delete(void *ud, const char *key, ck_obj_t *obj, bool unknown)
{
	mirror_t *m = ud;
	(void)unknown;
	(void)obj;
	ck_obj_t *had = ck_cache_store_delete(m->st, key);
	if (had == NULL)
		m->bad++;
	ck_obj_unref(had);
	m->events++;
}

static const ck_cache_handler_t mirror_handler = {m_add, m_update, m_delete};

typedef struct cmp {
	ck_cache_store_t *other;
	long diff;
} cmp_t;

static bool cmp_one(void *ud, ck_obj_t *obj)
{
	cmp_t *c = ud;
	ck_obj_t *o = cache_store_get_obj_nolock(c->other, obj);
	if (o == NULL || strcmp(o->rv, obj->rv) != 0)
		c->diff++;
	return true;
}

static void assert_same_store(ck_cache_store_t *a, ck_cache_store_t *b)
{
	ck_assert_uint_eq(ck_cache_store_len(a), ck_cache_store_len(b));
	cmp_t c = {b, 0};
	ck_cache_store_foreach(a, cmp_one, &c);
	ck_assert_int_eq(c.diff, 0);
}

START_TEST(test_late_handler_does_not_stall_the_others)
{
	ck_cache_informer_opts_t o = {.batch = 100};
	ffx_t f;
	ffx_init(&f, &o);
	counter_t early = {0};
	ck_cache_informer_add_handler(f.inf, &counter_handler, &early);
	ck_assert_int_eq(ck_cache_informer_start(f.inf, NULL), 0);
	list_gen(&f, 1);
	cache_informer_drain(f.inf);
	ck_assert_int_eq(early.adds, GEN_OBJS);
	early = (counter_t){0};

	mirror_t late = {.st = ck_cache_store_new()};
	late.reg = ck_cache_informer_add_handler(f.inf, &mirror_handler, &late);
	ck_cache_fake_req_t *w = ffx_watch(&f);
	int interleaved = 0, rounds = 0;
	for (; rounds < 1000 && cache_informer_pending(f.inf) > 0; rounds++) {
		/* One event per round, touching objects the snapshot has (or had). */
		char rv[16];
		snprintf(rv, sizeof(rv), "%d", 1000 + rounds);
		if (rounds < 60) {
			int k = rounds * 7;
			ck_watch_type_t t = rounds % 5 == 4 ? CK_WATCH_DELETED : CK_WATCH_MODIFIED;
			char name[32];
			snprintf(name, sizeof(name), "o%d", k);
			ck_cache_fake_req_event(w, t, mkobj("ns", name, rv));
			if (rounds % 10 == 0) {
				snprintf(name, sizeof(name), "new%d", rounds);
				ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj("ns", name, rv));
			}
		}
		long before = early.updates + early.deletes + early.adds;
		ev_run(f.loop, EVRUN_NOWAIT);
		long after = early.updates + early.deletes + early.adds;
		if (after > before && late.initial_adds < GEN_OBJS)
			interleaved++;
	}
	cache_informer_drain(f.inf);
	/* The early handler kept getting events while the late one took its snapshot
	 * (10,000 objects at 100 per batch). */
	ck_assert_int_gt(interleaved, 10);
	ck_assert_int_eq(early.updates + early.deletes + early.adds, 60 + 6);
	ck_assert_int_eq(late.bad, 0);
	ck_assert_int_eq(late.initial_adds, GEN_OBJS);
	ck_assert(ck_cache_handler_has_synced(late.reg));
	assert_same_store(late.st, ck_cache_informer_store(f.inf));
	assert_same_store(ck_cache_informer_store(f.inf), late.st);
	ck_cache_store_free(late.st);
	ffx_free(&f);
}
END_TEST

START_TEST(test_handler_added_while_a_relist_is_built)
{
	/* The relist is built beside the store over several rounds; a handler added
	 * meanwhile starts from the old content and so must get the relist's
	 * notifications, which turn it into the new one. */
	ck_cache_informer_opts_t o = {.batch = 2};
	ffx_t f;
	ffx_init(&f, &o);
	ffx_synced(&f); /* a@1, b@2 */
	ck_cache_fake_req_error_event(ffx_watch(&f), 410, "Expired", "too old");
	cache_informer_tick(f.inf);
	ffx_advance_ms(&f, 60000);
	ck_obj_t *items[] = {mkobj("ns", "a", "5"), mkobj("ns", "c", "6"), mkobj("ns", "d", "7"),
	                     mkobj("ns", "e", "8")};
	ffx_list(&f, items, 4, "30");
	ev_run(f.loop, EVRUN_NOWAIT);
	ck_obj_t *b = ck_cache_lister_get(ck_cache_informer_lister(f.inf), "ns", "b");
	ck_assert_ptr_nonnull(b); /* not swapped in yet */
	ck_obj_unref(b);
	mirror_t late = {.st = ck_cache_store_new()};
	late.reg = ck_cache_informer_add_handler(f.inf, &mirror_handler, &late);
	cache_informer_drain(f.inf);
	ck_assert_int_eq(late.bad, 0);
	ck_assert_int_eq(late.initial_adds, 2);
	assert_same_store(late.st, ck_cache_informer_store(f.inf));
	assert_same_store(ck_cache_informer_store(f.inf), late.st);
	ck_assert_str_eq(rec_text(&f.rec), "delete ns/b 2 unknown\n"
	                                   "update ns/a 1->5\n"
	                                   "add ns/c 6\n"
	                                   "add ns/d 7\n"
	                                   "add ns/e 8\n");
	ck_cache_store_free(late.st);
	ffx_free(&f);
}
END_TEST

Suite *suite_cache_fifo(void)
{
	Suite *s = suite_create("cache_fifo");
	TCase *tc = tcase_create("fifo");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_deltas_in_server_order_across_keys);
	tcase_add_test(tc, test_delete_of_a_key_never_seen_is_delivered);
	tcase_add_test(tc, test_relist_delivers_deletes_then_replacements);
	tcase_add_test(tc, test_resync_only_while_watching);
	tcase_add_test(tc, test_relist_is_atomic_for_readers);
	tcase_add_test(tc, test_late_handler_does_not_stall_the_others);
	tcase_add_test(tc, test_handler_added_while_a_relist_is_built);
	suite_add_tcase(s, tc);
	return s;
}
