/*
 * Unit tests for pkg/log: exact klog text lines, Go %q escaping, JSON lines parsed
 * with yajl, verbosity gating, redaction, and no interleaving between threads.
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include <ckube/base.h>
#include <ckube/log.h>

/* 2022-11-29T12:00:00.000123Z */
#define T0 (1669723200LL * (int64_t)CK_NS_PER_SEC + 123000)

static ck_clk_fake_t fake;
static int out_fd = -1;

static void setup(void)
{
	char path[] = "/tmp/test_log_XXXXXX";
	out_fd = mkstemp(path);
	ck_assert_int_ge(out_fd, 0);
	unlink(path);
	ck_clk_fake_init(&fake, 0, T0);
	ck_log_set_clock(&fake.base);
	ck_log_set_fd(out_fd);
	ck_log_set_utc(1);
	ck_log_set_format(CK_LOG_FORMAT_TEXT);
	ck_log_set_verbosity(0);
}

static void teardown(void)
{
	ck_log_set_fd(2);
	ck_log_set_clock(NULL);
	ck_log_set_utc(0);
	ck_log_set_format(CK_LOG_FORMAT_TEXT);
	ck_log_set_verbosity(0);
	ck_log_set_trace_key(NULL, NULL);
	close(out_fd);
	out_fd = -1;
}

/* Returns everything written so far (new string) and empties the file. */
static char *take_output(void)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	char chunk[4096];
	ssize_t n;
	lseek(out_fd, 0, SEEK_SET);
	while ((n = read(out_fd, chunk, sizeof(chunk))) > 0)
		ck_sbuf_append(&b, chunk, (size_t)n);
	ck_assert_int_eq(ftruncate(out_fd, 0), 0);
	lseek(out_fd, 0, SEEK_SET);
	return ck_sbuf_steal(&b);
}

static int my_tid(void)
{
	return (int)syscall(SYS_gettid);
}

/* Logs through ck_log_emit with a fixed caller and compares the one line written. */
#define EXPECT_LINE(expected_fmt, ...)                                                             \
	do {                                                                                       \
		char *got_ = take_output();                                                        \
		char *want_ = ck_xasprintf(expected_fmt, __VA_ARGS__);                             \
		ck_assert_str_eq(got_, want_);                                                     \
		free(got_);                                                                        \
		free(want_);                                                                       \
	} while (0)

START_TEST(text_klog_line)
{
	ck_log_emit(
	    CK_LOG_SEV_INFO, 0, "pkg/controller/controller.c", 120, NULL, "Synced",
	    (const ck_log_kv_t[]){CK_KV_OBJ("foo", "default", "example-foo"), CK_LOG_KV_END_});
	EXPECT_LINE("I1129 12:00:00.000123 %7d controller.c:120] \"Synced\" "
	            "foo=\"default/example-foo\"\n",
	            my_tid());

	/* The sample line of the brief, with a 4-digit thread id right-aligned to 7. */
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_printf(&b, "%7d", 1234);
	ck_assert_str_eq(ck_sbuf_cstr(&b), "   1234");
	ck_sbuf_free(&b);

	ck_clk_fake_advance(&fake, 3 * CK_NS_PER_SEC + 500000);
	ck_log_emit(CK_LOG_SEV_WARNING, 0, "x.c", 7, NULL, "Many kinds",
	            (const ck_log_kv_t[]){CK_KV_STR("s", "v"), CK_KV_INT("n", -5),
	                                  CK_KV_UINT("u", 18446744073709551615ULL),
	                                  CK_KV_BOOL("ok", 1), CK_KV_OBJ("node", NULL, "n1"),
	                                  CK_KV_OBJ("e", "", "c"), CK_KV_STR("nil", NULL),
	                                  CK_LOG_KV_END_});
	EXPECT_LINE("W1129 12:00:03.000623 %7d x.c:7] \"Many kinds\" s=\"v\" n=-5 "
	            "u=18446744073709551615 ok=true node=\"n1\" e=\"c\" nil=<nil>\n",
	            my_tid());

	ck_log_emit(CK_LOG_SEV_ERROR, 0, "y.c", 1, "connection refused", "Sync failed",
	            (const ck_log_kv_t[]){CK_KV_STR("key", "ns/a"), CK_LOG_KV_END_});
	EXPECT_LINE("E1129 12:00:03.000623 %7d y.c:1] \"Sync failed\" err=\"connection refused\" "
	            "key=\"ns/a\"\n",
	            my_tid());

	/* No list at all, and a NULL error: no err key (klog's ErrorS(nil, ...)). */
	ck_log_emit(CK_LOG_SEV_ERROR, 0, "y.c", 2, NULL, "Bare", NULL);
	EXPECT_LINE("E1129 12:00:03.000623 %7d y.c:2] \"Bare\"\n", my_tid());
}
END_TEST

START_TEST(text_macros_capture_caller)
{
	int line = __LINE__ + 1;
	CK_LOG_INFO("Hello");
	EXPECT_LINE("I1129 12:00:00.000123 %7d test_log.c:%d] \"Hello\"\n", my_tid(), line);

	line = __LINE__ + 1;
	CK_LOG_WARN("Careful", CK_KV_INT("n", 3));
	EXPECT_LINE("W1129 12:00:00.000123 %7d test_log.c:%d] \"Careful\" n=3\n", my_tid(), line);

	line = __LINE__ + 1;
	CK_LOG_ERROR("boom", "Failed", CK_KV_STR("k", "v"), CK_KV_ERR("inner"));
	EXPECT_LINE("E1129 12:00:00.000123 %7d test_log.c:%d] \"Failed\" err=\"boom\" k=\"v\" "
	            "err=\"inner\"\n",
	            my_tid(), line);

	ck_log_set_verbosity(3);
	line = __LINE__ + 1;
	CK_LOG_V(3, "Verbose", CK_KV_BOOL("b", 0));
	EXPECT_LINE("I1129 12:00:00.000123 %7d test_log.c:%d] \"Verbose\" b=false\n", my_tid(),
	            line);
}
END_TEST

static char *quoted(const char *s)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_log_quote(&b, s);
	return ck_sbuf_steal(&b);
}

#define EXPECT_QUOTE(in, want)                                                                     \
	do {                                                                                       \
		char *q_ = quoted(in);                                                             \
		ck_assert_str_eq(q_, want);                                                        \
		free(q_);                                                                          \
	} while (0)

START_TEST(quote_like_go)
{
	/* Each expectation is what Go's strconv.Quote returns for the same bytes. */
	EXPECT_QUOTE("", "\"\"");
	EXPECT_QUOTE("plain text", "\"plain text\"");
	EXPECT_QUOTE("say \"hi\"", "\"say \\\"hi\\\"\"");
	EXPECT_QUOTE("C:\\dir", "\"C:\\\\dir\"");
	EXPECT_QUOTE("a\nb\tc\rd", "\"a\\nb\\tc\\rd\"");
	EXPECT_QUOTE("\a\b\f\v", "\"\\a\\b\\f\\v\"");
	EXPECT_QUOTE("\x01\x1f\x7f", "\"\\x01\\x1f\\x7f\"");
	EXPECT_QUOTE("h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80",
	             "\"h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80\"");
	EXPECT_QUOTE("\xe6\x97\xa5\xe6\x9c\xac", "\"\xe6\x97\xa5\xe6\x9c\xac\""); /* 日本 */
	/* Invalid UTF-8: each bad byte escaped on its own. */
	EXPECT_QUOTE("\xff", "\"\\xff\"");
	EXPECT_QUOTE("a\xc3", "\"a\\xc3\"");
	EXPECT_QUOTE("\xc0\xaf", "\"\\xc0\\xaf\"");                   /* overlong '/' */
	EXPECT_QUOTE("\xed\xa0\x80", "\"\\xed\\xa0\\x80\"");          /* surrogate */
	EXPECT_QUOTE("\xf4\x90\x80\x80", "\"\\xf4\\x90\\x80\\x80\""); /* > U+10FFFF */
	/* Valid but not printable in Go's sense. */
	EXPECT_QUOTE("\xc2\x85", "\"\\u0085\"");             /* NEL, C1 control */
	EXPECT_QUOTE("\xc2\xa0", "\"\\u00a0\"");             /* no-break space */
	EXPECT_QUOTE("\xc2\xad", "\"\\u00ad\"");             /* soft hyphen */
	EXPECT_QUOTE("\xe2\x80\x8b", "\"\\u200b\"");         /* zero width space */
	EXPECT_QUOTE("\xef\xbb\xbf", "\"\\ufeff\"");         /* BOM */
	EXPECT_QUOTE("\xf3\xa0\x80\x81", "\"\\U000e0001\""); /* language tag */
}
END_TEST

START_TEST(text_message_and_values_escaped)
{
	ck_log_emit(CK_LOG_SEV_INFO, 0, "a.c", 1, "bad \"thing\"\n", "two\nlines",
	            (const ck_log_kv_t[]){CK_KV_STR("path", "C:\\x"), CK_KV_STR("bin", "\x01\xff"),
	                                  CK_KV_STR("utf8", "gr\xc3\xbc\xc3\x9f"), CK_LOG_KV_END_});
	char *got = take_output();
	char *want =
	    ck_xasprintf("I1129 12:00:00.000123 %7d a.c:1] \"two\\nlines\" "
	                 "err=\"bad \\\"thing\\\"\\n\" path=\"C:\\\\x\" bin=\"\\x01\\xff\" "
	                 "utf8=\"gr\xc3\xbc\xc3\x9f\"\n",
	                 my_tid());
	ck_assert_str_eq(got, want);
	/* One line only: the embedded newlines are escaped. */
	ck_assert_ptr_eq(strchr(got, '\n'), got + strlen(got) - 1);
	free(got);
	free(want);
}
END_TEST

static yajl_val parse_json_line(const char *line)
{
	char errbuf[256] = "";
	yajl_val v = yajl_tree_parse(line, errbuf, sizeof(errbuf));
	ck_assert_msg(v != NULL, "not JSON (%s): %s", errbuf, line);
	ck_assert(YAJL_IS_OBJECT(v));
	return v;
}

static yajl_val field(yajl_val obj, const char *name)
{
	const char *path[] = {name, NULL};
	return yajl_tree_get(obj, path, yajl_t_any);
}

START_TEST(json_lines)
{
	ck_log_set_format(CK_LOG_FORMAT_JSON);
	ck_log_set_verbosity(2);
	ck_log_emit(CK_LOG_SEV_INFO, 2, "pkg/controller.c", 120, NULL, "Synced",
	            (const ck_log_kv_t[]){
	                CK_KV_OBJ("foo", "default", "example-foo"), CK_KV_INT("n", 5),
	                CK_KV_OBJ("node", NULL, "n1"), CK_KV_STR("s", "q\"\\\n\x01\xff\xc3\xa9"),
	                CK_KV_BOOL("b", 1), CK_KV_STR("nil", NULL), CK_LOG_KV_END_});
	char *line = take_output();
	/* The exact bytes too, so that field order and number formats are pinned. */
	ck_assert_str_eq(
	    line, "{\"ts\":1669723200.000123,\"caller\":\"controller.c:120\",\"msg\":\"Synced\","
	          "\"v\":2,\"foo\":{\"name\":\"example-foo\",\"namespace\":\"default\"},"
	          "\"n\":5,\"node\":{\"name\":\"n1\"},"
	          "\"s\":\"q\\\"\\\\\\n\\u0001\\ufffd\xc3\xa9\",\"b\":true,\"nil\":null}\n");
	yajl_val v = parse_json_line(line);
	yajl_val ts = field(v, "ts");
	ck_assert(YAJL_IS_DOUBLE(ts));
	ck_assert(YAJL_GET_DOUBLE(ts) > 1669723200.0001 && YAJL_GET_DOUBLE(ts) < 1669723200.0002);
	ck_assert_str_eq(YAJL_GET_STRING(field(v, "caller")), "controller.c:120");
	ck_assert_str_eq(YAJL_GET_STRING(field(v, "msg")), "Synced");
	ck_assert_int_eq(YAJL_GET_INTEGER(field(v, "v")), 2);
	ck_assert_int_eq(YAJL_GET_INTEGER(field(v, "n")), 5);
	const char *ns_path[] = {"foo", "namespace", NULL};
	ck_assert_str_eq(YAJL_GET_STRING(yajl_tree_get(v, ns_path, yajl_t_string)), "default");
	ck_assert_ptr_null(field(v, "err"));
	yajl_tree_free(v);
	free(line);

	/* Errors: "err" present, no "v"; a whole second gives an integral ts. */
	ck_clk_fake_init(&fake, 0, 1669723201LL * (int64_t)CK_NS_PER_SEC);
	ck_log_emit(CK_LOG_SEV_ERROR, 0, "c.c", 9, "it broke", "Failed", NULL);
	line = take_output();
	ck_assert_str_eq(line, "{\"ts\":1669723201,\"caller\":\"c.c:9\",\"msg\":\"Failed\","
	                       "\"err\":\"it broke\"}\n");
	v = parse_json_line(line);
	ck_assert_str_eq(YAJL_GET_STRING(field(v, "err")), "it broke");
	ck_assert_ptr_null(field(v, "v"));
	yajl_tree_free(v);
	free(line);

	/* Trailing zeros of the fraction are dropped. */
	ck_clk_fake_init(&fake, 0, 1669723201LL * (int64_t)CK_NS_PER_SEC + 500000000);
	CK_LOG_INFO("Half");
	line = take_output();
	ck_assert_msg(strncmp(line, "{\"ts\":1669723201.5,\"caller\":\"test_log.c:", 40) == 0, "%s",
	              line);
	yajl_tree_free(parse_json_line(line));
	free(line);
}
END_TEST

START_TEST(format_parse)
{
	ck_log_format_t f = CK_LOG_FORMAT_TEXT;
	char *err = NULL;
	ck_assert_int_eq(ck_log_format_parse("json", &f, &err), 0);
	ck_assert_int_eq(f, CK_LOG_FORMAT_JSON);
	ck_assert_int_eq(ck_log_format_parse("text", &f, &err), 0);
	ck_assert_int_eq(f, CK_LOG_FORMAT_TEXT);
	ck_assert_int_eq(ck_log_format_parse("yaml", &f, &err), -1);
	ck_assert_str_eq(err, "--log-format \"yaml\": unknown format (want \"text\" or \"json\")");
	free(err);
}
END_TEST

static int evaluated;
static int count_eval(void)
{
	return ++evaluated;
}

START_TEST(verbosity_gating)
{
	ck_log_set_verbosity(1);
	ck_assert(ck_log_v_enabled(0));
	ck_assert(ck_log_v_enabled(1));
	ck_assert(!ck_log_v_enabled(2));
	evaluated = 0;
	CK_LOG_V(2, "Hidden", CK_KV_INT("n", count_eval()));
	char *got = take_output();
	ck_assert_str_eq(got, "");
	free(got);
	/* Off means not even the arguments are evaluated. */
	ck_assert_int_eq(evaluated, 0);

	CK_LOG_V(1, "Shown", CK_KV_INT("n", count_eval()));
	got = take_output();
	ck_assert_ptr_nonnull(strstr(got, "] \"Shown\" n=1\n"));
	free(got);
	ck_assert_int_eq(evaluated, 1);

	/* Warnings and errors print at any verbosity. */
	ck_log_set_verbosity(0);
	CK_LOG_V(1, "Hidden");
	CK_LOG_WARN("W");
	CK_LOG_ERROR(NULL, "E");
	got = take_output();
	ck_assert_ptr_null(strstr(got, "Hidden"));
	ck_assert_ptr_nonnull(strstr(got, "\"W\""));
	ck_assert_ptr_nonnull(strstr(got, "\"E\""));
	free(got);
	ck_assert_int_eq(ck_log_verbosity(), 0);
}
END_TEST

START_TEST(redaction)
{
	ck_log_emit(CK_LOG_SEV_INFO, 0, "r.c", 1, NULL, "Creds",
	            (const ck_log_kv_t[]){
	                CK_KV_STR("token", "s3cr3t-a"),
	                CK_KV_STR("Authorization", "Bearer s3cr3t-b"),
	                CK_KV_STR("PASSWORD", "s3cr3t-c"), CK_KV_STR("client-key", "s3cr3t-d"),
	                CK_KV_INT("token", 12345), CK_KV_STR("user", "alice"), CK_LOG_KV_END_});
	char *got = take_output();
	char *want = ck_xasprintf("I1129 12:00:00.000123 %7d r.c:1] \"Creds\" token=\"<redacted>\" "
	                          "Authorization=\"<redacted>\" PASSWORD=\"<redacted>\" "
	                          "client-key=\"<redacted>\" token=\"<redacted>\" user=\"alice\"\n",
	                          my_tid());
	ck_assert_str_eq(got, want);
	free(got);
	free(want);

	ck_log_set_format(CK_LOG_FORMAT_JSON);
	ck_log_emit(CK_LOG_SEV_INFO, 0, "r.c", 2, NULL, "Creds",
	            (const ck_log_kv_t[]){CK_KV_STR("Token", "s3cr3t-a"),
	                                  CK_KV_OBJ("password", "x", "s3cr3t-e"), CK_LOG_KV_END_});
	got = take_output();
	ck_assert_ptr_null(strstr(got, "s3cr3t"));
	yajl_val v = parse_json_line(got);
	ck_assert_str_eq(YAJL_GET_STRING(field(v, "Token")), "<redacted>");
	ck_assert_str_eq(YAJL_GET_STRING(field(v, "password")), "<redacted>");
	yajl_tree_free(v);
	free(got);
}
END_TEST

/* --- Many threads, one pipe. --- */

#define WRITERS          4
#define LINES_PER_WRITER 10000
#define BIG              6000 /* above PIPE_BUF: a single write(2) of it is not atomic on a pipe */

struct reader {
	int fd;
	ck_sbuf_t data;
};

static void *read_all(void *arg)
{
	struct reader *r = arg;
	char chunk[65536];
	ssize_t n;
	while ((n = read(r->fd, chunk, sizeof(chunk))) > 0)
		ck_sbuf_append(&r->data, chunk, (size_t)n);
	return NULL;
}

static char big_value[BIG + 1];

static void *write_lines(void *arg)
{
	int id = (int)(intptr_t)arg;
	for (int i = 0; i < LINES_PER_WRITER; i++) {
		const char *pad = (i % 100 == 0) ? big_value : "";
		CK_LOG_INFO("Line", CK_KV_INT("w", id), CK_KV_INT("i", i), CK_KV_STR("pad", pad));
	}
	return NULL;
}

START_TEST(no_interleaving)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	memset(big_value, 'x', BIG);
	big_value[BIG] = '\0';
	struct reader r = {p[0], CK_SBUF_INIT};
	pthread_t rt, wt[WRITERS];
	ck_assert_int_eq(pthread_create(&rt, NULL, read_all, &r), 0);
	ck_log_set_fd(p[1]);
	for (int w = 0; w < WRITERS; w++)
		ck_assert_int_eq(pthread_create(&wt[w], NULL, write_lines, (void *)(intptr_t)w), 0);
	for (int w = 0; w < WRITERS; w++)
		pthread_join(wt[w], NULL);
	ck_log_set_fd(out_fd);
	close(p[1]);
	pthread_join(rt, NULL);
	close(p[0]);

	/* Every line is whole and each writer's lines arrive in order. */
	int next[WRITERS] = {0};
	int lines = 0;
	char *save = NULL;
	for (char *line = strtok_r(r.data.data, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		int w = -1, i = -1, off = 0;
		char *body = strstr(line, "] \"Line\" ");
		ck_assert_msg(body != NULL && line[0] == 'I', "mangled line %d: %.80s", lines,
		              line);
		ck_assert_int_eq(sscanf(body, "] \"Line\" w=%d i=%d pad=\"%n", &w, &i, &off), 2);
		ck_assert_int_gt(off, 0);
		ck_assert(w >= 0 && w < WRITERS);
		ck_assert_int_eq(i, next[w]);
		size_t padlen = strlen(body + off);
		ck_assert_uint_eq(padlen, (i % 100 == 0 ? BIG : 0) + 1);
		ck_assert_int_eq(body[off + padlen - 1], '"');
		next[w]++;
		lines++;
	}
	ck_assert_int_eq(lines, WRITERS * LINES_PER_WRITER);
	for (int w = 0; w < WRITERS; w++)
		ck_assert_int_eq(next[w], LINES_PER_WRITER);
	ck_sbuf_free(&r.data);
}
END_TEST

START_TEST(trace_key_parse_and_match)
{
	char *err = NULL;
	ck_assert_ptr_null(ck_log_trace_key());
	ck_assert(!ck_log_trace_on());
	ck_assert(!ck_log_trace_match("default/foo"));
	ck_assert(!ck_log_trace_match_parts("default", "foo"));

	ck_assert_int_eq(ck_log_set_trace_key("default/foo", &err), 0);
	ck_assert(ck_log_trace_on());
	char *k = ck_log_trace_key();
	ck_assert_str_eq(k, "default/foo");
	free(k);
	ck_assert(ck_log_trace_match("default/foo"));
	ck_assert(!ck_log_trace_match("default/fo"));
	ck_assert(!ck_log_trace_match("default/foo2"));
	ck_assert(!ck_log_trace_match("foo"));
	ck_assert(!ck_log_trace_match(NULL));
	ck_assert(ck_log_trace_match_parts("default", "foo"));
	ck_assert(!ck_log_trace_match_parts("other", "foo"));
	ck_assert(!ck_log_trace_match_parts(NULL, "foo"));
	ck_assert(!ck_log_trace_match_parts("default", NULL));

	/* A cluster-scoped key: no namespace part. */
	ck_assert_int_eq(ck_log_set_trace_key("node-1", &err), 0);
	ck_assert(ck_log_trace_match("node-1"));
	ck_assert(ck_log_trace_match_parts(NULL, "node-1"));
	ck_assert(ck_log_trace_match_parts("", "node-1"));
	ck_assert(!ck_log_trace_match_parts("default", "node-1"));

	/* Bad keys are refused with the reason, and the key in force stays. */
	const char *bad[] = {"/foo", "default/", "a/b/c", "default/ foo", "a\nb", "/"};
	for (size_t i = 0; i < CK_ARRAY_LEN(bad); i++) {
		err = NULL;
		ck_assert_int_eq(ck_log_set_trace_key(bad[i], &err), -1);
		ck_assert_ptr_nonnull(err);
		ck_assert_msg(strncmp(err, "trace key \"", 11) == 0, "%s", err);
		free(err);
	}
	err = NULL;
	ck_assert_int_eq(ck_log_set_trace_key("a/b/c", &err), -1);
	ck_assert_str_eq(err, "trace key \"a/b/c\": want \"namespace/name\", or \"name\" for a "
	                      "cluster-scoped object");
	free(err);
	ck_assert(ck_log_trace_match("node-1"));

	/* NULL and "" turn it off. */
	ck_assert_int_eq(ck_log_set_trace_key("", NULL), 0);
	ck_assert(!ck_log_trace_on());
	ck_assert_ptr_null(ck_log_trace_key());
	ck_assert(!ck_log_trace_match("node-1"));
	ck_assert_int_eq(ck_log_set_trace_key("x/y", NULL), 0);
	ck_assert_int_eq(ck_log_set_trace_key(NULL, NULL), 0);
	ck_assert(!ck_log_trace_match("x/y"));
}
END_TEST

START_TEST(trace_lines)
{
	/* Off: nothing written, the arguments not evaluated. */
	evaluated = 0;
	CK_LOG_TRACE("ns/a", "queue-add", CK_KV_INT("n", count_eval()));
	CK_LOG_TRACE_PARTS("ns", "a", "watch-event", CK_KV_INT("n", count_eval()));
	char *got = take_output();
	ck_assert_str_eq(got, "");
	free(got);
	ck_assert_int_eq(evaluated, 0);

	ck_assert_int_eq(ck_log_set_trace_key("ns/a", NULL), 0);
	CK_LOG_TRACE("ns/b", "queue-add", CK_KV_INT("n", count_eval()));
	CK_LOG_TRACE_PARTS("ns", "b", "watch-event", CK_KV_INT("n", count_eval()));
	got = take_output();
	ck_assert_str_eq(got, "");
	free(got);
	ck_assert_int_eq(evaluated, 0);

	/* At verbosity 0, one line per step: key and step first. */
	int l1 = __LINE__ + 1;
	CK_LOG_TRACE("ns/a", "queue-add", CK_KV_STR("queue", "Foos"), CK_KV_BOOL("added", true));
	int l2 = __LINE__ + 1;
	CK_LOG_TRACE_PARTS("ns", "a", "watch-event", CK_KV_STR("type", "MODIFIED"));
	ck_log_trace_emit("x.c", 7, "done", NULL);
	got = take_output();
	char *want = ck_xasprintf(
	    "I1129 12:00:00.000123 %7d test_log.c:%d] \"Trace\" key=\"ns/a\" step=\"queue-add\" "
	    "queue=\"Foos\" added=true\n"
	    "I1129 12:00:00.000123 %7d test_log.c:%d] \"Trace\" key=\"ns/a\" "
	    "step=\"watch-event\" type=\"MODIFIED\"\n"
	    "I1129 12:00:00.000123 %7d x.c:7] \"Trace\" key=\"ns/a\" step=\"done\"\n",
	    my_tid(), l1, my_tid(), l2, my_tid());
	ck_assert_str_eq(got, want);
	free(got);
	free(want);

	/* JSON: the same pairs. */
	ck_log_set_format(CK_LOG_FORMAT_JSON);
	CK_LOG_TRACE("ns/a", "queue-get");
	got = take_output();
	ck_assert_ptr_nonnull(
	    strstr(got, "\"msg\":\"Trace\",\"v\":0,\"key\":\"ns/a\",\"step\":\"queue-get\"}"));
	free(got);
	ck_log_set_trace_key(NULL, NULL);
}
END_TEST

Suite *suite_log(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("log");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, text_klog_line);
	tcase_add_test(tc, text_macros_capture_caller);
	tcase_add_test(tc, quote_like_go);
	tcase_add_test(tc, text_message_and_values_escaped);
	tcase_add_test(tc, json_lines);
	tcase_add_test(tc, format_parse);
	tcase_add_test(tc, verbosity_gating);
	tcase_add_test(tc, redaction);
	tcase_add_test(tc, no_interleaving);
	tcase_add_test(tc, trace_key_parse_and_match);
	tcase_add_test(tc, trace_lines);
	suite_add_tcase(s, tc);
	return s;
}
