/*
 * The correlator's decisions on a recorded event stream: a fixed sequence of events
 * over simulated time goes through a recorder (fake sink, fake clock, default
 * bounds), and what reaches the sink after each one -- create or patch, which Event,
 * its count and message -- and what the spam filter held back, are compared with a
 * transcript written out by hand from client-go's rules (tools/record
 * events_cache.go: aggregation by source + object + type + reason + reporting
 * controller/instance, 10 distinct messages within 600 s; dedup by the full event
 * key; a token bucket per source + object + type, burst 25, one token per 300 s;
 * LRU caches) and the deliberate differences record.h lists. It pins the decisions
 * so that a change of the correlator's data structures cannot change them.
 *
 * Transcript notation, one line per step:
 *   C foo-a#3 n=1 'msg'   a create of the third distinct Event name (the part
 *                          before the '.' is the object's name), count 1
 *   P foo-a#3 n=2 'msg'   a patch of it: count 2, message (core/v1)
 *   drop                   a new Event the spam filter refused (counted, lost)
 *   defer                  an increment of an existing Event it held back
 *   -                      nothing
 * The same stream runs against events.k8s.io/v1 too: the same decisions, the count
 * read from series.count (a create without series is count 1), and patches carry
 * no message there (note is immutable), so the transcript's patch messages are
 * left out of that comparison.
 */
#include <ckube/base.h>
#include <ckube/record.h>

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

/* --- A sink that keeps what it is given ---------------------------------------- */

typedef struct scall {
	char op; /* 'C' or 'P' */
	char *name;
	char *body;
} scall_t;

static struct {
	pthread_mutex_t mu;
	scall_t *v;
	size_t n, cap;
} S;

static ck_record_sink_result_t s_keep(char op, const char *name, const char *body)
{
	pthread_mutex_lock(&S.mu);
	if (S.n == S.cap) {
		S.cap = S.cap ? S.cap * 2 : 64;
		S.v = ck_xrealloc(S.v, S.cap * sizeof(*S.v));
	}
	S.v[S.n++] = (scall_t){op, name ? ck_xstrdup(name) : NULL, ck_xstrdup(body)};
	pthread_mutex_unlock(&S.mu);
	return CK_RECORD_SINK_OK;
}

static ck_record_sink_result_t s_create(void *ud, const char *ns, const char *body, char **err)
{
	return s_keep('C', NULL, body);
}

static ck_record_sink_result_t s_patch(void *ud, const char *ns, const char *name, const char *body,
                                       char **err)
{
	return s_keep('P', name, body);
}

static const ck_record_sink_t SINK = {s_create, s_patch, NULL};

static void s_setup(void)
{
	memset(&S, 0, sizeof(S));
	pthread_mutex_init(&S.mu, NULL);
}

static void s_teardown(void)
{
	for (size_t i = 0; i < S.n; i++) {
		free(S.v[i].name);
		free(S.v[i].body);
	}
	free(S.v);
	pthread_mutex_destroy(&S.mu);
}

/* --- Rendering what the sink got ------------------------------------------------ */

/* Event names in order of first appearance; "<object>#<ordinal>" stands for one. */
typedef struct names {
	char *v[128];
	size_t n;
} names_t;

static void names_free(names_t *nm)
{
	for (size_t i = 0; i < nm->n; i++)
		free(nm->v[i]);
	nm->n = 0;
}

static void render_name(ck_sbuf_t *out, names_t *nm, const char *name)
{
	size_t i;
	for (i = 0; i < nm->n && strcmp(nm->v[i], name) != 0; i++)
		;
	if (i == nm->n) {
		ck_assert_uint_lt(nm->n, CK_ARRAY_LEN(nm->v));
		nm->v[nm->n++] = ck_xstrdup(name);
	}
	const char *dot = strrchr(name, '.');
	ck_sbuf_printf(out, "%.*s#%zu", (int)(dot ? dot - name : (long)strlen(name)), name, i + 1);
}

static yajl_val jget(yajl_val v, const char *a, const char *b, yajl_type t)
{
	const char *p[] = {a, b, NULL};
	return yajl_tree_get(v, p, t);
}

/* Appends one sink call as "C|P <name> n=<count> '<message>'". */
static void render_call(ck_sbuf_t *out, names_t *nm, const scall_t *c, bool v1)
{
	char eb[256];
	yajl_val v = yajl_tree_parse(c->body, eb, sizeof(eb));
	ck_assert_msg(v != NULL, "bad JSON %s: %s", c->body, eb);

	const char *name = c->name;
	if (c->op == 'C') {
		yajl_val n = jget(v, "metadata", "name", yajl_t_string);
		ck_assert_ptr_nonnull(n);
		name = YAJL_GET_STRING(n);
	}
	ck_sbuf_printf(out, "%c ", c->op);
	render_name(out, nm, name);

	long long count;
	const char *msg = NULL;
	if (v1) {
		/* series only from the second occurrence on; the server refuses less. */
		yajl_val sc = jget(v, "series", "count", yajl_t_number);
		count = sc ? YAJL_GET_INTEGER(sc) : 1;
		ck_assert_msg(sc == NULL || count >= 2, "series below 2: %s", c->body);
		ck_assert_msg(c->op == 'C' || sc != NULL, "patch without series: %s", c->body);
		yajl_val note = jget(v, "note", NULL, yajl_t_string);
		ck_assert_msg(c->op == 'C' || note == NULL, "note in a patch: %s", c->body);
		msg = note ? YAJL_GET_STRING(note) : NULL;
	} else {
		yajl_val cn = jget(v, "count", NULL, yajl_t_number);
		ck_assert_msg(cn != NULL, "no count: %s", c->body);
		count = YAJL_GET_INTEGER(cn);
		yajl_val m = jget(v, "message", NULL, yajl_t_string);
		ck_assert_msg(m != NULL, "no message: %s", c->body);
		msg = YAJL_GET_STRING(m);
	}
	ck_sbuf_printf(out, " n=%lld", count);
	if (msg != NULL)
		ck_sbuf_printf(out, " '%s'", msg);
	yajl_tree_free(v);
}

/* The transcript's line with the patches' messages left out (events.k8s.io/v1). */
static char *strip_patch_messages(const char *want)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	bool in_patch = false;
	for (const char *p = want; *p;) {
		if ((p == want || p[-1] == ' ') && p[0] == 'P' && p[1] == ' ')
			in_patch = true;
		if (in_patch && p[0] == ' ' && p[1] == '\'') {
			const char *end = strchr(p + 2, '\'');
			ck_assert_ptr_nonnull(end);
			p = end + 1;
			in_patch = false;
			continue;
		}
		ck_sbuf_putc(&b, *p++);
	}
	return ck_sbuf_steal(&b);
}

/* --- The stream ------------------------------------------------------------------ */

#define NORMAL  CK_RECORD_NORMAL
#define WARNING CK_RECORD_WARNING
#define SYNCED  "Foo synced successfully"
#define EXISTS  "Resource \"dep\" already exists and is not managed by Foo"
#define COMB    "(combined from similar events): "
#define FREE    (-1) /* t of the step that frees the recorder */

static const ck_record_ref_t A = {
    "samplecontroller.k8s.io/v1alpha1", "Foo", "ns1", "foo-a", "uid-a", "100"};
static const ck_record_ref_t B = {
    "samplecontroller.k8s.io/v1alpha1", "Foo", "ns1", "foo-b", "uid-b", "200"};
static const ck_record_ref_t C1 = {"v1", "ConfigMap", "ns1", "c1", "uid-c1", "1"};
static const ck_record_ref_t C2 = {"v1", "ConfigMap", "ns1", "c2", "uid-c2", "1"};
static const ck_record_ref_t C3 = {"v1", "ConfigMap", "ns1", "c3", "uid-c3", "1"};

typedef struct step {
	int t;                      /* seconds since the start; FREE: ck_record_free() */
	const ck_record_ref_t *obj; /* NULL: no event; the clock moves, the poster runs */
	const char *type;
	const char *reason;
	const char *msg;
	const char *want;
} step_t;

/*
 * Token buckets (source + object + type) are written [A/N 24] after a step: what is
 * left. Each write to the API server takes one token, a held-back one none.
 */
static const step_t STREAM[] = {
    /* Identical events: one Event, counted by patch (the event key is equal). */
    {0, &A, NORMAL, "Synced", SYNCED, "C foo-a#1 n=1 '" SYNCED "'"}, /* [A/N 24] */
    {1, &A, NORMAL, "Synced", SYNCED, "P foo-a#1 n=2 '" SYNCED "'"},
    {2, &A, NORMAL, "Synced", SYNCED, "P foo-a#1 n=3 '" SYNCED "'"}, /* [A/N 22] */
    /* Another type about the same object: another event key, its own bucket. */
    {3, &A, WARNING, "ErrResourceExists", EXISTS, "C foo-a#2 n=1 '" EXISTS "'"}, /* [A/W 24] */
    {4, &A, WARNING, "ErrResourceExists", EXISTS, "P foo-a#2 n=2 '" EXISTS "'"}, /* [A/W 23] */

    /* Similar events (same aggregate key, messages differ): the first 9 distinct
     * messages keep their own Events... */
    {10, &A, WARNING, "SyncFailed", "attempt 1", "C foo-a#3 n=1 'attempt 1'"},
    {11, &A, WARNING, "SyncFailed", "attempt 2", "C foo-a#4 n=1 'attempt 2'"},
    {12, &A, WARNING, "SyncFailed", "attempt 3", "C foo-a#5 n=1 'attempt 3'"},
    {13, &A, WARNING, "SyncFailed", "attempt 4", "C foo-a#6 n=1 'attempt 4'"},
    {14, &A, WARNING, "SyncFailed", "attempt 5", "C foo-a#7 n=1 'attempt 5'"},
    {15, &A, WARNING, "SyncFailed", "attempt 6", "C foo-a#8 n=1 'attempt 6'"},
    {16, &A, WARNING, "SyncFailed", "attempt 7", "C foo-a#9 n=1 'attempt 7'"},
    {17, &A, WARNING, "SyncFailed", "attempt 8", "C foo-a#10 n=1 'attempt 8'"},
    {18, &A, WARNING, "SyncFailed", "attempt 9", "C foo-a#11 n=1 'attempt 9'"},
    /* ...the 10th distinct one within 600 s of the previous similar event makes the
     * aggregate Event, "(combined from similar events): " + the message... */
    {19, &A, WARNING, "SyncFailed", "attempt 10", "C foo-a#12 n=1 '" COMB "attempt 10'"},
    /* ...and every new message after it counts on the aggregate (its key is the
     * aggregate key), the message the latest one. */
    {20, &A, WARNING, "SyncFailed", "attempt 11", "P foo-a#12 n=2 '" COMB "attempt 11'"},
    {21, &A, WARNING, "SyncFailed", "attempt 12", "P foo-a#12 n=3 '" COMB "attempt 12'"},
    /* A message among the 9 kept counts on its own Event. (client-go drops an
     * arbitrary message from the set when it aggregates, so there it might go to
     * the aggregate; here the first 9 stay: record.h's deliberate difference.) */
    {22, &A, WARNING, "SyncFailed", "attempt 3", "P foo-a#5 n=2 'attempt 3'"},
    /* A message that was aggregated is not in the set: the aggregate again. */
    {23, &A, WARNING, "SyncFailed", "attempt 11", "P foo-a#12 n=4 '" COMB "attempt 11'"},
    /* [A/W 9] */

    /* A burst of 30 identical events about B: the bucket allows 25 writes (one
     * create, 24 patches)... */
    {30, &B, NORMAL, "Synced", SYNCED, "C foo-b#13 n=1 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=2 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=3 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=4 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=5 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=6 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=7 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=8 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=9 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=10 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=11 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=12 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=13 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=14 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=15 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=16 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=17 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=18 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=19 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=20 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=21 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=22 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=23 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=24 '" SYNCED "'"},
    {30, &B, NORMAL, "Synced", SYNCED, "P foo-b#13 n=25 '" SYNCED "'"}, /* [B/N 0] */
    /* ...and the rest is counted but held back: the Event exists, so the count is
     * kept for later (client-go would lose these; record.h's difference). */
    {30, &B, NORMAL, "Synced", SYNCED, "defer"},
    {30, &B, NORMAL, "Synced", SYNCED, "defer"},
    {30, &B, NORMAL, "Synced", SYNCED, "defer"},
    {30, &B, NORMAL, "Synced", SYNCED, "defer"},
    {30, &B, NORMAL, "Synced", SYNCED, "defer"},
    /* The type is in the spam key: a Warning about B still has its 25 tokens. */
    {31, &B, WARNING, "ErrResourceExists", EXISTS, "C foo-b#14 n=1 '" EXISTS "'"},
    /* A new Normal Event about B has no token: dropped (as in client-go), but the
     * dedup record counts it (client-go's logger observes before the filter). */
    {32, &B, NORMAL, "Scaled", "Scaled to 2", "drop"},
    /* One second short of the first token back (300 s after the bucket was made). */
    {329, NULL, NULL, NULL, NULL, "-"},
    /* The token is back: the held-back count goes out in one patch. [B/N 0] */
    {330, NULL, NULL, NULL, NULL, "P foo-b#13 n=30 '" SYNCED "'"},
    /* That token is spent: the next one is due at 630. */
    {331, &B, NORMAL, "Scaled", "Scaled to 2", "drop"},
    /* Exactly 600 s after the last similar event is still within the window
     * (client-go starts over only when the interval is longer): the set is still
     * full, so a new message goes to the aggregate. [A/W: 9 + 2 refilled - 1] */
    {623, &A, WARNING, "SyncFailed", "attempt 13", "P foo-a#12 n=5 '" COMB "attempt 13'"},
    /* A token for B/N: the Event the filter refused twice is created now, with the
     * count of all three (it never reached the server, so a create, not a patch). */
    {630, &B, NORMAL, "Scaled", "Scaled to 2", "C foo-b#15 n=3 'Scaled to 2'"},
    /* [B/N 0] again: the next increment is held back until 930. */
    {631, &B, NORMAL, "Synced", SYNCED, "defer"},
    {930, NULL, NULL, NULL, NULL, "P foo-b#13 n=31 '" SYNCED "'"},
    /* 601 s after the last similar event: the set of messages starts over, so a new
     * message has its own Event again... */
    {1224, &A, WARNING, "SyncFailed", "attempt 99", "C foo-a#16 n=1 'attempt 99'"},
    /* ...and a message seen before still finds its Event by the full key. */
    {1225, &A, WARNING, "SyncFailed", "attempt 1", "P foo-a#3 n=2 'attempt 1'"},
    /* Held back, then written when the recorder is freed (the shutdown bound). */
    {1226, &B, NORMAL, "Synced", SYNCED, "defer"},
    {FREE, NULL, NULL, NULL, NULL, "P foo-b#13 n=32 '" SYNCED "'"},
};

/*
 * The bounds at work: LRU caches of 2 entries and a burst of 2 (one object's
 * records are evicted together with the others', least recently used first).
 * [c1 1] is the tokens left in c1's bucket.
 */
static const step_t EVICT[] = {
    {0, &C1, NORMAL, "Synced", "ok", "C c1#1 n=1 'ok'"}, /* [c1 1] */
    {0, &C1, NORMAL, "Synced", "ok", "P c1#1 n=2 'ok'"}, /* [c1 0] */
    {0, &C1, NORMAL, "Synced", "ok", "defer"},
    {0, &C2, NORMAL, "Synced", "ok", "C c2#2 n=1 'ok'"},
    /* c3 evicts c1's records: its held-back increment is lost, and counted so. */
    {0, &C3, NORMAL, "Synced", "ok", "C c3#3 n=1 'ok' drop"},
    /* c1 again: no record, so a new Event (a new name) with a fresh bucket. */
    {0, &C1, NORMAL, "Synced", "ok", "C c1#4 n=1 'ok'"},
    /* c2 was the least recent: evicted by c1 just now. */
    {0, &C2, NORMAL, "Synced", "ok", "C c2#5 n=1 'ok'"},
    /* c1 is still cached: counted on its new Event; its bucket [c1 0]. */
    {0, &C1, NORMAL, "Synced", "ok", "P c1#4 n=2 'ok'"},
    {0, &C1, NORMAL, "Synced", "ok", "defer"},
    {FREE, NULL, NULL, NULL, NULL, "P c1#4 n=3 'ok'"},
};

/* Runs steps through a new recorder and compares each step's outcome. */
static void run_stream(const step_t *steps, size_t n, const ck_record_opts_t *base, bool v1)
{
	ck_clk_fake_t clk;
	ck_clk_fake_init(&clk, 1000 * CK_NS_PER_SEC, 1700000000LL * (int64_t)CK_NS_PER_SEC);
	ck_record_opts_t o = *base;
	o.component = "sample-controller";
	o.reporting_controller = "samplecontroller.k8s.io/sample-controller";
	o.reporting_instance = "test-instance";
	o.clock = &clk.base;
	o.sink = &SINK;
	o.api = v1 ? CK_RECORD_API_EVENTS_V1 : CK_RECORD_API_CORE_V1;
	char *err = NULL;
	ck_record_t *r = ck_record_new(NULL, &o, &err);
	ck_assert_msg(r != NULL, "%s", err);

	names_t nm = {.n = 0};
	ck_record_stats_t before = {0}, after;
	size_t seen = 0;
	int now = 0;
	for (size_t i = 0; i < n; i++) {
		const step_t *s = &steps[i];
		if (s->t == FREE) {
			ck_record_free(r);
			r = NULL;
			after = before;
		} else {
			ck_assert_int_ge(s->t, now);
			ck_clk_fake_advance(&clk, (uint64_t)(s->t - now) * CK_NS_PER_SEC);
			now = s->t;
			if (s->obj != NULL)
				ck_record_event_ref(r, s->obj, s->type, s->reason, "%s", s->msg);
			ck_assert_int_eq(ck_record_flush(r, 10000), 0);
			ck_record_stats(r, &after);
		}

		ck_sbuf_t got = CK_SBUF_INIT;
		pthread_mutex_lock(&S.mu);
		for (; seen < S.n; seen++) {
			if (got.len > 0)
				ck_sbuf_putc(&got, ' ');
			render_call(&got, &nm, &S.v[seen], v1);
		}
		pthread_mutex_unlock(&S.mu);
		for (uint64_t k = before.dropped_spam; k < after.dropped_spam; k++)
			ck_sbuf_puts(&got, got.len ? " drop" : "drop");
		for (uint64_t k = before.deferred_spam; k < after.deferred_spam; k++)
			ck_sbuf_puts(&got, got.len ? " defer" : "defer");
		if (got.len == 0)
			ck_sbuf_puts(&got, "-");
		before = after;

		char *want = v1 ? strip_patch_messages(s->want) : ck_xstrdup(s->want);
		ck_assert_msg(strcmp(ck_sbuf_cstr(&got), want) == 0,
		              "%s step %zu (t=%d %s %s %s '%s'):\n  got  %s\n  want %s",
		              v1 ? "events.k8s.io/v1" : "core/v1", i + 1, s->t,
		              s->obj ? s->obj->name : "-", s->type ? s->type : "-",
		              s->reason ? s->reason : "-", s->msg ? s->msg : "", ck_sbuf_cstr(&got),
		              want);
		free(want);
		ck_sbuf_free(&got);
	}
	ck_record_free(r);
	names_free(&nm);
}

START_TEST(test_stream_core_v1)
{
	ck_record_opts_t o = {0}; /* every bound at its default */
	run_stream(STREAM, CK_ARRAY_LEN(STREAM), &o, false);
}
END_TEST

START_TEST(test_stream_events_v1)
{
	ck_record_opts_t o = {0};
	run_stream(STREAM, CK_ARRAY_LEN(STREAM), &o, true);
}
END_TEST

START_TEST(test_stream_eviction)
{
	ck_record_opts_t o = {.cache_size = 2, .spam_burst = 2};
	run_stream(EVICT, CK_ARRAY_LEN(EVICT), &o, false);
}
END_TEST

Suite *suite_record_stream(void)
{
	Suite *s = suite_create("record_stream");
	TCase *tc = tcase_create("stream");
	tcase_add_checked_fixture(tc, s_setup, s_teardown);
	tcase_add_test(tc, test_stream_core_v1);
	tcase_add_test(tc, test_stream_events_v1);
	tcase_add_test(tc, test_stream_eviction);
	suite_add_tcase(s, tc);
	return s;
}
