/*
 * Unit tests for pkg/record: the recorder against a fake sink and a fake clock.
 * The fake sink keeps every call (create/patch, namespace, name, body) and answers
 * from a script, so correlation, aggregation, the spam filter and retries are seen
 * exactly as the API server would see them.
 */
#include "pkg/record/rec_internal.h"
#include <ckube/base.h>
#include <ckube/log.h>
#include <ckube/record.h>

#include "fault_server.h"

#include <check.h>
#include <ev.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

/* --- The fake sink ---------------------------------------------------------- */

typedef struct call {
	char op; /* 'C' create, 'P' patch */
	char *ns;
	char *name; /* patch: the URL name; create: metadata.name from the body */
	char *body;
} call_t;

typedef struct fake {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	call_t *calls;
	size_t n;
	size_t cap;
	ck_record_sink_result_t script[64]; /* answers in call order; then OK */
	size_t nscript;
	size_t pos;
	bool gate_closed; /* calls wait while closed */
	size_t entered;   /* calls that have started */
} fake_t;

static fake_t F;
static ck_clk_fake_t CLK;

#define WALL0 (1700000000LL * (int64_t)CK_NS_PER_SEC)

static char *body_str(const char *body, const char *const *path)
{
	char eb[256];
	yajl_val v = yajl_tree_parse(body, eb, sizeof(eb));
	ck_assert_msg(v != NULL, "bad JSON %s: %s", body, eb);
	yajl_val s = yajl_tree_get(v, (const char **)path, yajl_t_string);
	char *out = s ? ck_xstrdup(YAJL_GET_STRING(s)) : NULL;
	yajl_tree_free(v);
	return out;
}

static ck_record_sink_result_t fake_call(char op, const char *ns, const char *name,
                                         const char *body, char **err)
{
	ck_record_sink_result_t result = CK_RECORD_SINK_OK;

	pthread_mutex_lock(&F.mu);
	F.entered++;
	pthread_cond_broadcast(&F.cv);
	while (F.gate_closed)
		pthread_cond_wait(&F.cv, &F.mu);
	if (F.n == F.cap) {
		F.cap = F.cap ? F.cap * 2 : 64;
		F.calls = ck_xrealloc(F.calls, F.cap * sizeof(*F.calls));
	}
	call_t *c = &F.calls[F.n++];
	c->op = op;
	c->ns = ck_xstrdup(ns);
	if (name) {
		c->name = ck_xstrdup(name);
	} else {
		static const char *const p[] = {"metadata", "name", NULL};
		c->name = body_str(body, p);
	}
	c->body = ck_xstrdup(body);
	if (F.pos < F.nscript)
		result = F.script[F.pos++];
	pthread_mutex_unlock(&F.mu);
	if (result != CK_RECORD_SINK_OK)
		*err = ck_xasprintf("fake answer %d", (int)result);
	return result;
}

static ck_record_sink_result_t fake_create(void *ud, const char *ns, const char *body, char **err)
{
	return fake_call('C', ns, NULL, body, err);
}

static ck_record_sink_result_t fake_patch(void *ud, const char *ns, const char *name,
                                          const char *body, char **err)
{
	return fake_call('P', ns, name, body, err);
}

static const ck_record_sink_t FAKE_SINK = {fake_create, fake_patch, NULL};

static void fake_setup(void)
{
	memset(&F, 0, sizeof(F));
	pthread_mutex_init(&F.mu, NULL);
	pthread_cond_init(&F.cv, NULL);
	ck_clk_fake_init(&CLK, 1000 * CK_NS_PER_SEC, WALL0);
}

static void fake_teardown(void)
{
	for (size_t i = 0; i < F.n; i++) {
		free(F.calls[i].ns);
		free(F.calls[i].name);
		free(F.calls[i].body);
	}
	free(F.calls);
	pthread_mutex_destroy(&F.mu);
	pthread_cond_destroy(&F.cv);
	ck_log_set_fd(2);
}

static void script(size_t n, const ck_record_sink_result_t *r)
{
	pthread_mutex_lock(&F.mu);
	memcpy(F.script, r, n * sizeof(*r));
	F.nscript = n;
	F.pos = 0;
	pthread_mutex_unlock(&F.mu);
}

static size_t ncalls(void)
{
	pthread_mutex_lock(&F.mu);
	size_t n = F.n;
	pthread_mutex_unlock(&F.mu);
	return n;
}

static ck_record_opts_t base_opts(void)
{
	return (ck_record_opts_t){
	    .component = "sample-controller",
	    .reporting_controller = "samplecontroller.k8s.io/sample-controller",
	    .reporting_instance = "test-instance",
	    .retry_interval_ms = 1,
	    .clock = &CLK.base,
	    .sink = &FAKE_SINK,
	};
}

static ck_record_t *new_rec(const ck_record_opts_t *o)
{
	char *err = NULL;
	ck_record_t *r = ck_record_new(NULL, o, &err);
	ck_assert_msg(r != NULL, "record_new: %s", err ? err : "?");
	return r;
}

static const ck_record_ref_t FOO = {
    "samplecontroller.k8s.io/v1alpha1", "Foo", "ns1", "example-foo", "uid-1", "42"};
static const ck_record_ref_t BAR = {
    "samplecontroller.k8s.io/v1alpha1", "Foo", "ns1", "other-foo", "uid-2", "7"};

static void flush(ck_record_t *r)
{
	ck_assert_int_eq(ck_record_flush(r, 10000), 0);
}

static const char *const P_NS[] = {"metadata", "namespace", NULL};
static const char *const P_MSG[] = {"message", NULL};
static const char *const P_LAST[] = {"lastTimestamp", NULL};

/* Asserts body[path] == want. */
static void ck_body(const char *body, const char *const *path, const char *want)
{
	char *got = body_str(body, path);
	ck_assert_msg(got != NULL, "no %s in %s", path[0], body);
	ck_assert_str_eq(got, want);
	free(got);
}

static long long body_int(const char *body, const char *key)
{
	char eb[256];
	const char *p[] = {key, NULL};
	yajl_val v = yajl_tree_parse(body, eb, sizeof(eb));
	ck_assert_ptr_nonnull(v);
	yajl_val n = yajl_tree_get(v, p, yajl_t_number);
	ck_assert_msg(n != NULL && YAJL_IS_INTEGER(n), "no integer %s in %s", key, body);
	long long out = YAJL_GET_INTEGER(n);
	yajl_tree_free(v);
	return out;
}

/* --- Tests -------------------------------------------------------------------- */

START_TEST(test_create_body)
{
	ck_record_opts_t o = base_opts();
	o.host = "node-1";
	ck_record_t *r = new_rec(&o);

	ck_record_event_ref(r, &FOO, CK_RECORD_WARNING, "ErrResourceExists",
	                    "Resource %s already exists and is not managed by Foo", "\"dep\"");
	flush(r);
	ck_assert_uint_eq(ncalls(), 1);
	call_t *c = &F.calls[0];
	ck_assert_int_eq(c->op, 'C');
	ck_assert_str_eq(c->ns, "ns1");

	char want_name[64];
	snprintf(want_name, sizeof(want_name), "example-foo.%llx", (unsigned long long)WALL0);
	ck_assert_str_eq(c->name, want_name);

	char eb[256];
	yajl_val v = yajl_tree_parse(c->body, eb, sizeof(eb));
	ck_assert_ptr_nonnull(v);
	struct {
		const char *path[3];
		const char *want;
	} fields[] = {
	    {{"apiVersion"}, "v1"},
	    {{"kind"}, "Event"},
	    {{"metadata", "namespace"}, "ns1"},
	    {{"involvedObject", "kind"}, "Foo"},
	    {{"involvedObject", "namespace"}, "ns1"},
	    {{"involvedObject", "name"}, "example-foo"},
	    {{"involvedObject", "uid"}, "uid-1"},
	    {{"involvedObject", "apiVersion"}, "samplecontroller.k8s.io/v1alpha1"},
	    {{"involvedObject", "resourceVersion"}, "42"},
	    {{"reason"}, "ErrResourceExists"},
	    {{"message"}, "Resource \"dep\" already exists and is not managed by Foo"},
	    {{"source", "component"}, "sample-controller"},
	    {{"source", "host"}, "node-1"},
	    {{"firstTimestamp"}, "2023-11-14T22:13:20Z"},
	    {{"lastTimestamp"}, "2023-11-14T22:13:20Z"},
	    {{"type"}, "Warning"},
	    {{"reportingComponent"}, "samplecontroller.k8s.io/sample-controller"},
	    {{"reportingInstance"}, "test-instance"},
	};
	for (size_t i = 0; i < CK_ARRAY_LEN(fields); i++) {
		yajl_val s = yajl_tree_get(v, fields[i].path, yajl_t_string);
		ck_assert_msg(s != NULL, "missing %s", fields[i].path[0]);
		ck_assert_str_eq(YAJL_GET_STRING(s), fields[i].want);
	}
	const char *pc[] = {"count", NULL}, *pe[] = {"eventTime", NULL};
	ck_assert_int_eq(YAJL_GET_INTEGER(yajl_tree_get(v, pc, yajl_t_number)), 1);
	yajl_val et = yajl_tree_get(v, pe, yajl_t_any);
	ck_assert(et != NULL && YAJL_IS_NULL(et));
	yajl_tree_free(v);

	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 1);
	ck_assert_uint_eq(st.patched, 0);
	ck_record_free(r);
}
END_TEST

START_TEST(test_cluster_scoped_and_kobj)
{
	static const ck_type_t node_type = {.group = "", .version = "v1", .kind = "Node"};
	static const ck_type_t dep_type = {.group = "apps", .version = "v1", .kind = "Deployment"};
	ck_obj_t node = {.type = &node_type, .ns = "", .name = "n1", .uid = "u", .rv = "1"};
	ck_obj_t dep = {.type = &dep_type, .ns = "ns2", .name = "d1", .uid = "u2", .rv = "9"};
	ck_record_opts_t o = base_opts();
	ck_record_t *r = new_rec(&o);

	ck_record_event(r, &node, CK_RECORD_NORMAL, "Ready", "node %s ready", "n1");
	ck_record_event(r, &dep, CK_RECORD_NORMAL, "Synced", "ok");
	flush(r);
	ck_assert_uint_eq(ncalls(), 2);
	/* Cluster-scoped: the event goes to "default", involvedObject has no namespace. */
	ck_assert_str_eq(F.calls[0].ns, "default");
	ck_body(F.calls[0].body, P_NS, "default");
	const char *const p_ions[] = {"involvedObject", "namespace", NULL};
	const char *const p_ioav[] = {"involvedObject", "apiVersion", NULL};
	char *ions = body_str(F.calls[0].body, p_ions);
	ck_assert_ptr_null(ions);
	ck_body(F.calls[0].body, p_ioav, "v1");
	ck_assert_str_eq(F.calls[1].ns, "ns2");
	ck_body(F.calls[1].body, p_ioav, "apps/v1");
	/* Two events on a frozen clock still get distinct names. */
	ck_assert_str_ne(strchr(F.calls[0].name, '.'), strchr(F.calls[1].name, '.'));
	ck_record_free(r);
}
END_TEST

START_TEST(test_identical_events_patch_count)
{
	ck_record_opts_t o = base_opts();
	ck_record_t *r = new_rec(&o);

	for (int i = 0; i < 5; i++) {
		ck_record_event_ref(r, &FOO, CK_RECORD_WARNING, "SyncFailed", "boom");
		flush(r);
		ck_clk_fake_advance(&CLK, CK_NS_PER_SEC);
	}
	ck_assert_uint_eq(ncalls(), 5);
	ck_assert_int_eq(F.calls[0].op, 'C');
	for (int i = 1; i < 5; i++) {
		call_t *c = &F.calls[i];
		ck_assert_int_eq(c->op, 'P');
		ck_assert_str_eq(c->name, F.calls[0].name);
		ck_assert_str_eq(c->ns, "ns1");
		ck_assert_int_eq(body_int(c->body, "count"), i + 1);
		ck_body(c->body, P_MSG, "boom");
		char ts[32];
		ck_time_format_rfc3339(WALL0 + i * (int64_t)CK_NS_PER_SEC, ts);
		ck_body(c->body, P_LAST, ts);
		/* The patch carries exactly count, lastTimestamp and message. */
		char eb[128];
		yajl_val v = yajl_tree_parse(c->body, eb, sizeof(eb));
		ck_assert_uint_eq(YAJL_GET_OBJECT(v)->len, 3);
		yajl_tree_free(v);
	}
	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 1);
	ck_assert_uint_eq(st.patched, 4);

	/* A different message (or reason, or object) is a different event. */
	ck_record_event_ref(r, &FOO, CK_RECORD_WARNING, "SyncFailed", "bang");
	ck_record_event_ref(r, &FOO, CK_RECORD_NORMAL, "SyncFailed", "boom");
	ck_record_event_ref(r, &BAR, CK_RECORD_WARNING, "SyncFailed", "boom");
	flush(r);
	ck_assert_uint_eq(ncalls(), 8);
	for (int i = 5; i < 8; i++)
		ck_assert_int_eq(F.calls[i].op, 'C');
	ck_record_free(r);
}
END_TEST

START_TEST(test_aggregation)
{
	ck_record_opts_t o = base_opts();
	o.spam_burst = -1; /* look at aggregation alone */
	ck_record_t *r = new_rec(&o);
	char first_agg[300] = "";

	for (int i = 1; i <= 12; i++) {
		ck_record_event_ref(r, &FOO, CK_RECORD_WARNING, "Failed", "failure number %d", i);
		flush(r);
		ck_clk_fake_advance(&CLK, CK_NS_PER_SEC);
	}
	ck_assert_uint_eq(ncalls(), 12);
	/* The first 9 distinct messages have their own events. */
	for (int i = 0; i < 9; i++) {
		char want[64];
		snprintf(want, sizeof(want), "failure number %d", i + 1);
		ck_assert_int_eq(F.calls[i].op, 'C');
		ck_body(F.calls[i].body, P_MSG, want);
	}
	/* The 10th creates the aggregate; the 11th and 12th count on it. */
	ck_assert_int_eq(F.calls[9].op, 'C');
	ck_body(F.calls[9].body, P_MSG, "(combined from similar events): failure number 10");
	snprintf(first_agg, sizeof(first_agg), "%s", F.calls[9].name);
	for (int i = 10; i < 12; i++) {
		char want[80];
		snprintf(want, sizeof(want), "(combined from similar events): failure number %d",
		         i + 1);
		ck_assert_int_eq(F.calls[i].op, 'P');
		ck_assert_str_eq(F.calls[i].name, first_agg);
		ck_body(F.calls[i].body, P_MSG, want);
		ck_assert_int_eq(body_int(F.calls[i].body, "count"), i - 8);
	}
	/* A message seen before keeps counting on its own event. */
	ck_record_event_ref(r, &FOO, CK_RECORD_WARNING, "Failed", "failure number 3");
	flush(r);
	ck_assert_int_eq(F.calls[12].op, 'P');
	ck_assert_str_eq(F.calls[12].name, F.calls[2].name);
	ck_assert_int_eq(body_int(F.calls[12].body, "count"), 2);

	/* After 10 quiet minutes the similar-message set starts over. */
	ck_clk_fake_advance(&CLK, 601 * CK_NS_PER_SEC);
	ck_record_event_ref(r, &FOO, CK_RECORD_WARNING, "Failed", "failure number 99");
	flush(r);
	ck_assert_int_eq(F.calls[13].op, 'C');
	ck_body(F.calls[13].body, P_MSG, "failure number 99");
	ck_record_free(r);
}
END_TEST

/* Distinct reasons: neither dedup nor aggregation apply, only the spam filter. */
static void distinct_events(ck_record_t *r, const ck_record_ref_t *ref, int from, int n)
{
	for (int i = from; i < from + n; i++)
		ck_record_event_ref(r, ref, CK_RECORD_NORMAL, "Reason", "message %d", i);
}

START_TEST(test_spam_filter_burst_refill)
{
	ck_record_opts_t o = base_opts();
	o.aggregate_max_events = 1000;
	ck_record_t *r = new_rec(&o);
	ck_record_stats_t st;

	distinct_events(r, &FOO, 0, 30);
	flush(r);
	ck_assert_uint_eq(ncalls(), 25);
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 25);
	ck_assert_uint_eq(st.dropped_spam, 5);

	/* Another object has its own bucket. */
	distinct_events(r, &BAR, 0, 3);
	flush(r);
	ck_assert_uint_eq(ncalls(), 28);

	/* Not yet five minutes: still nothing. */
	ck_clk_fake_advance(&CLK, 299 * CK_NS_PER_SEC);
	distinct_events(r, &FOO, 100, 1);
	flush(r);
	ck_assert_uint_eq(ncalls(), 28);
	/* One token back after five minutes, and only one. */
	ck_clk_fake_advance(&CLK, 1 * CK_NS_PER_SEC);
	distinct_events(r, &FOO, 200, 2);
	flush(r);
	ck_assert_uint_eq(ncalls(), 29);
	ck_body(F.calls[28].body, P_MSG, "message 200");
	/* Ten minutes: two tokens. */
	ck_clk_fake_advance(&CLK, 600 * CK_NS_PER_SEC);
	distinct_events(r, &FOO, 300, 3);
	flush(r);
	ck_assert_uint_eq(ncalls(), 31);
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.dropped_spam, 5 + 1 + 1 + 1);
	ck_record_free(r);
}
END_TEST

/* client-go keys the spam filter by event type too: a stream of Normal events about
 * an object must not use up the tokens a Warning about it needs. */
START_TEST(test_spam_bucket_per_type)
{
	ck_record_opts_t o = base_opts();
	o.aggregate_max_events = 1000;
	ck_record_t *r = new_rec(&o);
	distinct_events(r, &FOO, 0, 30); /* 25 posted, the Normal bucket is empty */
	ck_record_event_ref(r, &FOO, CK_RECORD_WARNING, "ErrResourceExists",
	                    "Resource \"x\" already exists and is not managed by Foo");
	flush(r);
	ck_assert_uint_eq(ncalls(), 26);
	ck_body(F.calls[25].body, P_MSG, "Resource \"x\" already exists and is not managed by Foo");
	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.dropped_spam, 5);
	ck_record_free(r);
}
END_TEST

static size_t count_lines_with(const char *path, const char *needle)
{
	char *text = NULL;
	size_t n = 0;
	ck_assert_int_eq(ck_file_read_all(path, &text, NULL, NULL), 0);
	for (char *p = text; (p = strstr(p, needle)) != NULL; p++)
		n++;
	free(text);
	return n;
}

START_TEST(test_spam_drops_logged_rate_limited)
{
	char path[] = "/tmp/test_record_log_XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_log_set_fd(fd);

	ck_record_opts_t o = base_opts();
	o.aggregate_max_events = 1000;
	ck_record_t *r = new_rec(&o);

	distinct_events(r, &FOO, 0, 40); /* 15 dropped */
	distinct_events(r, &BAR, 0, 26); /* 1 dropped */
	flush(r);
	ck_assert_uint_eq(count_lines_with(path, "spam filter held back"), 2);
	ck_assert_uint_eq(count_lines_with(path, "object=\"ns1/example-foo\""), 1);
	ck_assert_uint_eq(count_lines_with(path, "object=\"ns1/other-foo\""), 1);

	/* Within the interval: counted, not logged again. */
	ck_clk_fake_advance(&CLK, 60 * CK_NS_PER_SEC);
	distinct_events(r, &FOO, 100, 5);
	flush(r);
	ck_assert_uint_eq(count_lines_with(path, "spam filter held back"), 2);

	/* After it: one more line, with what was held back meanwhile. */
	ck_clk_fake_advance(&CLK, 300 * CK_NS_PER_SEC);
	distinct_events(r, &FOO, 200, 3); /* one token back, two dropped */
	flush(r);
	ck_assert_uint_eq(count_lines_with(path, "spam filter held back"), 3);
	/* 14 + 5 held back since the first line, and the one that triggered this one. */
	ck_assert_uint_eq(count_lines_with(path, "dropped=20"), 1);

	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.dropped_spam, 15 + 1 + 5 + 2);
	ck_record_free(r);
	close(fd);
	unlink(path);
}
END_TEST

START_TEST(test_spam_defers_increments)
{
	ck_record_opts_t o = base_opts();
	ck_record_t *r = new_rec(&o);
	ck_record_stats_t st;

	for (int i = 0; i < 30; i++)
		ck_record_event_ref(r, &FOO, CK_RECORD_WARNING, "SyncFailed", "same");
	flush(r);
	/* 25 writes (1 create + 24 patches), the other 5 increments held back. */
	ck_assert_uint_eq(ncalls(), 25);
	ck_assert_int_eq(body_int(F.calls[24].body, "count"), 25);
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.deferred_spam, 5);
	ck_assert_uint_eq(st.dropped_spam, 0);

	/* Not before a token is back... */
	ck_clk_fake_advance(&CLK, 299 * CK_NS_PER_SEC);
	flush(r);
	ck_assert_uint_eq(ncalls(), 25);
	/* ...then the held-back count is written in one patch. */
	ck_clk_fake_advance(&CLK, 1 * CK_NS_PER_SEC);
	flush(r);
	ck_assert_uint_eq(ncalls(), 26);
	ck_assert_int_eq(F.calls[25].op, 'P');
	ck_assert_int_eq(body_int(F.calls[25].body, "count"), 30);
	ck_record_free(r);
}
END_TEST

START_TEST(test_hundred_identical_one_event)
{
	ck_record_opts_t o = base_opts();
	ck_record_t *r = new_rec(&o);

	for (int i = 0; i < 100; i++)
		ck_record_event_ref(r, &FOO, CK_RECORD_WARNING, "SyncFailed", "same failure");
	flush(r);
	/* Freeing writes the count the spam filter held back. */
	ck_record_free(r);
	size_t n = ncalls();
	ck_assert_uint_eq(n, 26);
	size_t creates = 0;
	for (size_t i = 0; i < n; i++) {
		creates += F.calls[i].op == 'C';
		ck_assert_str_eq(F.calls[i].name, F.calls[0].name);
	}
	ck_assert_uint_eq(creates, 1);
	ck_assert_int_eq(body_int(F.calls[n - 1].body, "count"), 100);
}
END_TEST

START_TEST(test_queue_full_never_blocks)
{
	ck_record_opts_t o = base_opts();
	o.queue_size = 10;
	o.aggregate_max_events = 1000;
	o.spam_burst = -1;
	ck_record_t *r = new_rec(&o);

	/* The poster blocks inside the first write; the queue then fills up. */
	pthread_mutex_lock(&F.mu);
	F.gate_closed = true;
	pthread_mutex_unlock(&F.mu);
	distinct_events(r, &FOO, 0, 1);
	pthread_mutex_lock(&F.mu);
	while (F.entered == 0)
		pthread_cond_wait(&F.cv, &F.mu);
	pthread_mutex_unlock(&F.mu);

	distinct_events(r, &FOO, 1, 60); /* returns although nothing moves */
	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.dropped_queue_full, 50);

	pthread_mutex_lock(&F.mu);
	F.gate_closed = false;
	pthread_cond_broadcast(&F.cv);
	pthread_mutex_unlock(&F.mu);
	flush(r);
	ck_assert_uint_eq(ncalls(), 11);
	ck_record_free(r);
}
END_TEST

START_TEST(test_retry_then_success)
{
	static const ck_record_sink_result_t s[] = {CK_RECORD_SINK_RETRY, CK_RECORD_SINK_RETRY,
	                                            CK_RECORD_SINK_RETRY};
	script(3, s);
	ck_record_opts_t o = base_opts();
	ck_record_t *r = new_rec(&o);
	ck_record_event_ref(r, &FOO, CK_RECORD_NORMAL, "Synced", "ok");
	flush(r);
	ck_assert_uint_eq(ncalls(), 4);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(F.calls[i].op, 'C');
		ck_assert_str_eq(F.calls[i].body, F.calls[0].body);
	}
	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 1);
	ck_assert_uint_eq(st.retries, 3);
	ck_assert_uint_eq(st.failed, 0);
	ck_record_free(r);
}
END_TEST

START_TEST(test_retry_gives_up)
{
	ck_record_sink_result_t s[12];
	for (size_t i = 0; i < CK_ARRAY_LEN(s); i++)
		s[i] = CK_RECORD_SINK_RETRY;
	script(CK_ARRAY_LEN(s), s);
	ck_record_opts_t o = base_opts();
	o.max_tries = 12;
	ck_record_t *r = new_rec(&o);
	ck_record_event_ref(r, &FOO, CK_RECORD_NORMAL, "Synced", "ok");
	flush(r);
	ck_assert_uint_eq(ncalls(), 12);
	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 0);
	ck_assert_uint_eq(st.failed, 1);
	ck_assert_uint_eq(st.retries, 11);

	/* The failed Event was never created: the next occurrence creates it, counted. */
	ck_record_event_ref(r, &FOO, CK_RECORD_NORMAL, "Synced", "ok");
	flush(r);
	ck_assert_uint_eq(ncalls(), 13);
	ck_assert_int_eq(F.calls[12].op, 'C');
	ck_assert_int_eq(body_int(F.calls[12].body, "count"), 2);
	ck_record_free(r);
}
END_TEST

START_TEST(test_not_retried)
{
	static const ck_record_sink_result_t s[] = {
	    CK_RECORD_SINK_ALREADY_EXISTS, CK_RECORD_SINK_NS_TERMINATING, CK_RECORD_SINK_REJECTED};
	script(3, s);
	ck_record_opts_t o = base_opts();
	o.aggregate_max_events = 1000;
	ck_record_t *r = new_rec(&o);
	for (int i = 0; i < 3; i++) {
		distinct_events(r, &FOO, i, 1);
		flush(r);
		ck_assert_uint_eq(ncalls(), (size_t)i + 1);
	}
	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.failed, 3);
	ck_assert_uint_eq(st.retries, 0);
	ck_assert_uint_eq(st.posted, 0);
	ck_record_free(r);
}
END_TEST

START_TEST(test_already_exists_then_patch)
{
	/* A create that answers AlreadyExists means the Event is there: count on it. */
	static const ck_record_sink_result_t s[] = {CK_RECORD_SINK_ALREADY_EXISTS};
	script(1, s);
	ck_record_opts_t o = base_opts();
	ck_record_t *r = new_rec(&o);
	ck_record_event_ref(r, &FOO, CK_RECORD_NORMAL, "Synced", "ok");
	ck_record_event_ref(r, &FOO, CK_RECORD_NORMAL, "Synced", "ok");
	flush(r);
	ck_assert_uint_eq(ncalls(), 2);
	ck_assert_int_eq(F.calls[1].op, 'P');
	ck_assert_int_eq(body_int(F.calls[1].body, "count"), 2);
	ck_record_free(r);
}
END_TEST

START_TEST(test_patch_not_found_creates)
{
	static const ck_record_sink_result_t s[] = {CK_RECORD_SINK_OK, CK_RECORD_SINK_NOT_FOUND};
	script(2, s);
	ck_record_opts_t o = base_opts();
	ck_record_t *r = new_rec(&o);
	ck_record_event_ref(r, &FOO, CK_RECORD_WARNING, "SyncFailed", "x");
	ck_clk_fake_advance(&CLK, 5 * CK_NS_PER_SEC);
	ck_record_event_ref(r, &FOO, CK_RECORD_WARNING, "SyncFailed", "x");
	flush(r);
	ck_assert_uint_eq(ncalls(), 3);
	ck_assert_int_eq(F.calls[0].op, 'C');
	ck_assert_int_eq(F.calls[1].op, 'P');
	ck_assert_int_eq(F.calls[2].op, 'C');
	/* The new Event keeps the name and carries the whole count. */
	ck_assert_str_eq(F.calls[2].name, F.calls[0].name);
	ck_assert_int_eq(body_int(F.calls[2].body, "count"), 2);
	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 2);
	ck_assert_uint_eq(st.failed, 0);

	/* From then on, patches again. */
	ck_record_event_ref(r, &FOO, CK_RECORD_WARNING, "SyncFailed", "x");
	flush(r);
	ck_assert_int_eq(F.calls[3].op, 'P');
	ck_assert_int_eq(body_int(F.calls[3].body, "count"), 3);
	ck_record_free(r);
}
END_TEST

START_TEST(test_message_utf8_cut)
{
	ck_record_opts_t o = base_opts();
	ck_record_t *r = new_rec(&o);
	char msg[1100];
	memset(msg, 'a', 1023);
	memcpy(msg + 1023, "\xc3\xa9zzz", 6); /* "é" straddles byte 1024 */
	ck_record_event_ref(r, &FOO, CK_RECORD_NORMAL, "Long", "%s", msg);
	ck_record_event_ref(r, &FOO, CK_RECORD_NORMAL, "Bad", "x\xff\xc3y");
	flush(r);
	char *m = body_str(F.calls[0].body, P_MSG);
	ck_assert_uint_eq(strlen(m), 1023);
	free(m);
	ck_body(F.calls[1].body, P_MSG, "x\xef\xbf\xbd\xef\xbf\xbdy");
	ck_record_free(r);

	char *c = rec_message_clean("ab\xe2\x82\xac", 4); /* the euro sign does not fit */
	ck_assert_str_eq(c, "ab");
	free(c);
	c = rec_message_clean("\xed\xa0\x80|\xc0\xaf", 100); /* surrogate, overlong */
	ck_assert_str_eq(c, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd");
	free(c);
}
END_TEST

START_TEST(test_invalid_dropped)
{
	ck_record_opts_t o = base_opts();
	ck_record_t *r = new_rec(&o);
	ck_record_event_ref(r, &FOO, "Error", "Reason", "x");
	ck_record_event_ref(r, &FOO, CK_RECORD_NORMAL, "", "x");
	ck_record_event_ref(r, NULL, CK_RECORD_NORMAL, "Reason", "x");
	ck_record_event(r, NULL, CK_RECORD_NORMAL, "Reason", "x");
	ck_record_event(NULL, NULL, CK_RECORD_NORMAL, "Reason", "x"); /* no-op */
	flush(r);
	ck_assert_uint_eq(ncalls(), 0);
	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.dropped_invalid, 4);
	ck_record_free(r);
}
END_TEST

START_TEST(test_free_drains_queue)
{
	ck_record_opts_t o = base_opts();
	o.aggregate_max_events = 1000;
	ck_record_t *r = new_rec(&o);
	distinct_events(r, &FOO, 0, 20);
	ck_record_free(r);
	ck_assert_uint_eq(ncalls(), 20);
}
END_TEST

START_TEST(test_new_errors)
{
	char *err = NULL;
	ck_record_opts_t o = base_opts();
	o.component = NULL;
	ck_assert_ptr_null(ck_record_new(NULL, &o, &err));
	ck_assert_ptr_nonnull(strstr(err, "component"));
	free(err);
	err = NULL;
	o = base_opts();
	o.sink = NULL;
	ck_assert_ptr_null(ck_record_new(NULL, &o, &err));
	ck_assert_ptr_nonnull(err);
	free(err);
	ck_record_free(NULL);
}
END_TEST

START_TEST(test_event_name_cut)
{
	char longname[300];
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	longname[235] = '-';
	char *n = rec_event_name(longname, 0x1234);
	ck_assert_uint_le(strlen(n), REC_MAX_NAME);
	ck_assert_ptr_nonnull(strstr(n, "x.1234"));
	free(n);
	n = rec_event_name("foo", 255);
	ck_assert_str_eq(n, "foo.ff");
	free(n);
}
END_TEST

static int lru_frees;
/* The values are strings the test owns through the cache: freed with their entry. */
static void count_free(void *ud, void *val)
{
	lru_frees++;
	free(*(char **)val);
}

static void lru_set(rec_lru_t *l, uint64_t key, const char *s)
{
	*(char **)rec_lru_put(l, key) = ck_xstrdup(s);
}

static const char *lru_str(void *val)
{
	return val ? *(char **)val : NULL;
}

START_TEST(test_lru)
{
	enum { A = 'a', B, C, D, E };
	rec_lru_t *l = rec_lru_new(3, sizeof(char *), count_free, NULL);
	lru_set(l, A, "A");
	lru_set(l, B, "B");
	lru_set(l, C, "C");
	ck_assert_str_eq(lru_str(rec_lru_get(l, A)), "A"); /* a is now the most recent */
	lru_set(l, D, "D");                                /* evicts b */
	ck_assert_ptr_null(rec_lru_get(l, B));
	ck_assert_int_eq(lru_frees, 1);
	ck_assert_str_eq(lru_str(rec_lru_peek(l, C)), "C"); /* peek does not refresh c */
	lru_set(l, E, "E");                                 /* evicts c */
	ck_assert_ptr_null(rec_lru_get(l, C));
	lru_set(l, A, "A2"); /* replaces, frees the old value */
	ck_assert_int_eq(lru_frees, 3);
	ck_assert_str_eq(lru_str(rec_lru_get(l, A)), "A2");
	ck_assert_uint_eq(rec_lru_len(l), 3);
	rec_lru_free(l);
	ck_assert_int_eq(lru_frees, 6);
}
END_TEST

/*
 * The index under churn: keys that all want the same slot (the same low bits) and
 * their neighbours, evicted and put back in every order, stay findable -- the
 * backward shift on removal must not lose one behind a hole.
 */
START_TEST(test_lru_collisions)
{
	rec_lru_t *l = rec_lru_new(40, sizeof(uint64_t), NULL, NULL);
	uint64_t k[120];
	for (size_t i = 0; i < CK_ARRAY_LEN(k); i++)
		k[i] = i % 3 == 0 ? (uint64_t)i << 32 : (uint64_t)i; /* a third land in slot 0 */
	for (int round = 0; round < 4; round++) {
		for (size_t i = 0; i < CK_ARRAY_LEN(k); i++) {
			size_t j = round % 2 ? CK_ARRAY_LEN(k) - 1 - i : (i * 7) % CK_ARRAY_LEN(k);
			uint64_t *v = rec_lru_get(l, k[j]);
			if (v == NULL)
				v = rec_lru_put(l, k[j]);
			*v = k[j] ^ 0x5a5a;
			ck_assert_uint_le(rec_lru_len(l), 40);
		}
		/* The 40 most recent are there, with their values; no other is. */
		size_t found = 0;
		for (size_t i = 0; i < CK_ARRAY_LEN(k); i++) {
			uint64_t *v = rec_lru_peek(l, k[i]);
			if (v != NULL) {
				ck_assert_uint_eq(*v, k[i] ^ 0x5a5a);
				found++;
			}
		}
		ck_assert_uint_eq(found, 40);
	}
	rec_lru_free(l);
}
END_TEST

typedef struct thr_arg {
	ck_record_t *r;
	int id;
} thr_arg_t;

static void *thr_main(void *p)
{
	thr_arg_t *a = p;
	ck_record_ref_t ref = FOO;
	char name[32];
	snprintf(name, sizeof(name), "obj-%d", a->id);
	ref.name = name;
	for (int i = 0; i < 200; i++)
		ck_record_event_ref(a->r, &ref, CK_RECORD_NORMAL, "Tick", "tick");
	return NULL;
}

START_TEST(test_concurrent_callers)
{
	ck_record_opts_t o = base_opts();
	o.queue_size = 10000;
	o.spam_burst = -1;
	ck_record_t *r = new_rec(&o);
	pthread_t t[4];
	thr_arg_t a[4];
	for (int i = 0; i < 4; i++) {
		a[i] = (thr_arg_t){r, i};
		pthread_create(&t[i], NULL, thr_main, &a[i]);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	flush(r);
	ck_record_stats_t st;
	ck_record_stats(r, &st);
	ck_assert_uint_eq(st.posted, 4);
	ck_assert_uint_eq(st.patched, 4 * 199);
	ck_assert_uint_eq(ncalls(), 800);
	ck_record_free(r);
}
END_TEST

/* --- events.k8s.io/v1 ------------------------------------------------------- */

START_TEST(test_events_v1_bodies)
{
	ck_record_opts_t o = base_opts();
	o.api = CK_RECORD_API_EVENTS_V1;
	ck_record_t *r = new_rec(&o);
	ck_assert_int_eq(ck_record_api(r), CK_RECORD_API_EVENTS_V1);

	ck_record_event_ref(r, &FOO, CK_RECORD_WARNING, "SyncFailed", "boom %d", 1);
	flush(r);
	ck_clk_fake_advance(&CLK, 3 * CK_NS_PER_SEC);
	ck_record_event_ref(r, &FOO, CK_RECORD_WARNING, "SyncFailed", "boom %d", 1);
	flush(r);
	ck_assert_uint_eq(ncalls(), 2);
	call_t *c = &F.calls[0];
	ck_assert_int_eq(c->op, 'C');
	ck_assert_str_eq(c->ns, "ns1");
	struct {
		const char *path[3];
		const char *want;
	} fields[] = {
	    {{"apiVersion"}, "events.k8s.io/v1"},
	    {{"kind"}, "Event"},
	    {{"metadata", "namespace"}, "ns1"},
	    {{"regarding", "kind"}, "Foo"},
	    {{"regarding", "namespace"}, "ns1"},
	    {{"regarding", "name"}, "example-foo"},
	    {{"regarding", "uid"}, "uid-1"},
	    {{"regarding", "apiVersion"}, "samplecontroller.k8s.io/v1alpha1"},
	    {{"reason"}, "SyncFailed"},
	    {{"action"}, "SyncFailed"},
	    {{"note"}, "boom 1"},
	    {{"type"}, "Warning"},
	    {{"eventTime"}, "2023-11-14T22:13:20.000000Z"},
	    {{"reportingController"}, "samplecontroller.k8s.io/sample-controller"},
	    {{"reportingInstance"}, "test-instance"},
	};
	for (size_t i = 0; i < CK_ARRAY_LEN(fields); i++) {
		char *got = body_str(c->body, fields[i].path);
		ck_assert_msg(got != NULL, "missing %s in %s", fields[i].path[0], c->body);
		ck_assert_str_eq(got, fields[i].want);
		free(got);
	}
	/* The server refuses the deprecated (core/v1) fields and a series below 2. */
	const char *absent[] = {"count",   "firstTimestamp", "lastTimestamp", "source",
	                        "message", "involvedObject", "series"};
	char eb[256];
	yajl_val v = yajl_tree_parse(c->body, eb, sizeof(eb));
	for (size_t i = 0; i < CK_ARRAY_LEN(absent); i++) {
		const char *pa[] = {absent[i], NULL};
		ck_assert_msg(yajl_tree_get(v, pa, yajl_t_any) == NULL, "%s in %s", absent[i],
		              c->body);
	}
	yajl_tree_free(v);

	/* The repetition: a patch of the series alone (note is immutable there). */
	c = &F.calls[1];
	ck_assert_int_eq(c->op, 'P');
	ck_assert_str_eq(c->name, F.calls[0].name);
	v = yajl_tree_parse(c->body, eb, sizeof(eb));
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(YAJL_GET_OBJECT(v)->len, 1);
	const char *pcount[] = {"series", "count", NULL};
	const char *plast[] = {"series", "lastObservedTime", NULL};
	ck_assert_int_eq(YAJL_GET_INTEGER(yajl_tree_get(v, pcount, yajl_t_number)), 2);
	ck_assert_str_eq(YAJL_GET_STRING(yajl_tree_get(v, plast, yajl_t_string)),
	                 "2023-11-14T22:13:23.000000Z");
	yajl_tree_free(v);
	ck_record_free(r);
}
END_TEST

START_TEST(test_own_sink_defaults_to_core_v1)
{
	ck_record_opts_t o = base_opts();
	ck_record_t *r = new_rec(&o);
	ck_assert_int_eq(ck_record_api(r), CK_RECORD_API_CORE_V1);
	ck_record_free(r);
}
END_TEST

/*
 * The client sink against a scripted server: discovery first, then the write to
 * the API it chose. The client's loop runs on this thread, the poster's blocking
 * calls hand their requests to it.
 */
typedef struct api_fx {
	fault_server_t *fs;
	struct ev_loop *loop;
	ck_client_t *c;
	ck_record_t *r;
	ev_timer poll;
	int ticks;
} api_fx_t;

static void api_poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	api_fx_t *f = w->data;
	ck_record_stats_t st;
	ck_record_stats(f->r, &st);
	if (st.posted + st.failed > 0 || ++f->ticks > 500)
		ev_break(loop, EVBREAK_ALL);
}

#define EVENT_201 "{\"kind\":\"Event\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"e\"}}"
#define STATUS_JSON(code, reason)                                                                  \
	"{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":\"" reason   \
	"\",\"code\":" #code "}"

/* Runs one event through a recorder on the client sink; returns its stats. */
static void api_run(api_fx_t *f, ck_record_stats_t *st)
{
	f->loop = ev_loop_new(EVFLAG_AUTO);
	f->c = fs_client_new(f->loop, f->fs->port, "tok", NULL);
	ck_record_opts_t o = {.component = "sample-controller",
	                      .reporting_instance = "test-instance",
	                      .retry_interval_ms = 1,
	                      .max_tries = 1};
	char *err = NULL;
	f->r = ck_record_new(f->c, &o, &err);
	ck_assert_msg(f->r != NULL, "%s", err);
	ck_assert_int_eq(ck_record_api(f->r), CK_RECORD_API_AUTO);
	ck_record_event_ref(f->r, &FOO, CK_RECORD_NORMAL, "Synced", "synced");
	ev_timer_init(&f->poll, api_poll_cb, 0.01, 0.01);
	f->poll.data = f;
	ev_timer_start(f->loop, &f->poll);
	ev_run(f->loop, 0);
	ev_timer_stop(f->loop, &f->poll);
	ck_record_stats(f->r, st);
}

static void api_free(api_fx_t *f)
{
	ck_record_free(f->r);
	ck_client_free(f->c);
	ev_loop_destroy(f->loop);
	fs_free(f->fs);
}

static void assert_req(fault_server_t *fs, int i, const char *method, const char *target)
{
	const fs_request_t *q = fs_request(fs, i);
	ck_assert_msg(q != NULL, "no request %d", i);
	ck_assert_str_eq(q->method, method);
	ck_assert_msg(strncmp(q->target, target, strlen(target)) == 0, "request %d: %s, want %s", i,
	              q->target, target);
}

START_TEST(test_discovery_404_falls_back_to_core_v1)
{
	api_fx_t f = {.fs = fs_new()};
	fs_push_simple(f.fs, 404, NULL, STATUS_JSON(404, "NotFound"));
	fs_push_simple(f.fs, 201, NULL, EVENT_201);
	ck_record_stats_t st;
	api_run(&f, &st);
	ck_assert_uint_eq(st.posted, 1);
	ck_assert_int_eq(ck_record_api(f.r), CK_RECORD_API_CORE_V1);
	ck_assert_int_eq(fs_nrequests(f.fs), 2);
	assert_req(f.fs, 0, "GET", "/apis/events.k8s.io/v1/");
	assert_req(f.fs, 1, "POST", "/api/v1/namespaces/ns1/events");
	const char *const pav[] = {"apiVersion", NULL};
	ck_body(fs_request(f.fs, 1)->body, pav, "v1");
	api_free(&f);
}
END_TEST

START_TEST(test_discovery_ok_writes_events_v1)
{
	api_fx_t f = {.fs = fs_new()};
	fs_push_simple(
	    f.fs, 200, NULL,
	    "{\"kind\":\"APIResourceList\",\"groupVersion\":\"events.k8s.io/v1\","
	    "\"resources\":[{\"name\":\"events\",\"namespaced\":true,\"kind\":\"Event\"}]}");
	fs_push_simple(f.fs, 201, NULL, EVENT_201);
	ck_record_stats_t st;
	api_run(&f, &st);
	ck_assert_uint_eq(st.posted, 1);
	ck_assert_int_eq(ck_record_api(f.r), CK_RECORD_API_EVENTS_V1);
	ck_assert_int_eq(fs_nrequests(f.fs), 2);
	assert_req(f.fs, 1, "POST", "/apis/events.k8s.io/v1/namespaces/ns1/events");
	const char *const pav[] = {"apiVersion", NULL};
	const char *const pnote[] = {"note", NULL};
	ck_body(fs_request(f.fs, 1)->body, pav, "events.k8s.io/v1");
	ck_body(fs_request(f.fs, 1)->body, pnote, "synced");
	api_free(&f);
}
END_TEST

START_TEST(test_events_v1_forbidden_falls_back_to_core_v1)
{
	api_fx_t f = {.fs = fs_new()};
	fs_push_simple(f.fs, 200, NULL, "{\"kind\":\"APIResourceList\",\"resources\":[]}");
	fs_push_simple(f.fs, 403, NULL, STATUS_JSON(403, "Forbidden"));
	fs_push_simple(f.fs, 201, NULL, EVENT_201);
	ck_record_stats_t st;
	api_run(&f, &st);
	ck_assert_uint_eq(st.posted, 1);
	ck_assert_uint_eq(st.failed, 0);
	ck_assert_int_eq(ck_record_api(f.r), CK_RECORD_API_CORE_V1);
	ck_assert_int_eq(fs_nrequests(f.fs), 3);
	assert_req(f.fs, 1, "POST", "/apis/events.k8s.io/v1/namespaces/ns1/events");
	assert_req(f.fs, 2, "POST", "/api/v1/namespaces/ns1/events");
	api_free(&f);
}
END_TEST

Suite *suite_record(void)
{
	Suite *s = suite_create("record");
	TCase *tc = tcase_create("record");
	tcase_add_checked_fixture(tc, fake_setup, fake_teardown);
	tcase_add_test(tc, test_create_body);
	tcase_add_test(tc, test_cluster_scoped_and_kobj);
	tcase_add_test(tc, test_identical_events_patch_count);
	tcase_add_test(tc, test_aggregation);
	tcase_add_test(tc, test_spam_filter_burst_refill);
	tcase_add_test(tc, test_spam_bucket_per_type);
	tcase_add_test(tc, test_spam_drops_logged_rate_limited);
	tcase_add_test(tc, test_spam_defers_increments);
	tcase_add_test(tc, test_hundred_identical_one_event);
	tcase_add_test(tc, test_queue_full_never_blocks);
	tcase_add_test(tc, test_retry_then_success);
	tcase_add_test(tc, test_retry_gives_up);
	tcase_add_test(tc, test_not_retried);
	tcase_add_test(tc, test_already_exists_then_patch);
	tcase_add_test(tc, test_patch_not_found_creates);
	tcase_add_test(tc, test_message_utf8_cut);
	tcase_add_test(tc, test_invalid_dropped);
	tcase_add_test(tc, test_free_drains_queue);
	tcase_add_test(tc, test_new_errors);
	tcase_add_test(tc, test_event_name_cut);
	tcase_add_test(tc, test_lru);
	tcase_add_test(tc, test_lru_collisions);
	tcase_add_test(tc, test_concurrent_callers);
	tcase_add_test(tc, test_events_v1_bodies);
	tcase_add_test(tc, test_own_sink_defaults_to_core_v1);
	suite_add_tcase(s, tc);
	tc = tcase_create("api");
	tcase_add_test(tc, test_discovery_404_falls_back_to_core_v1);
	tcase_add_test(tc, test_discovery_ok_writes_events_v1);
	tcase_add_test(tc, test_events_v1_forbidden_falls_back_to_core_v1);
	suite_add_tcase(s, tc);
	return s;
}
