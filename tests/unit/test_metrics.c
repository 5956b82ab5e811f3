/*
 * Unit tests for pkg/metrics: exact exposition text, escaping, number format,
 * concurrent updates, the process collector, and the HTTP server (fetched with
 * libcurl, parsed with prometheus_client's parser through prom_parse_check.py);
 * the secure server: its certificate, TLS, and the authentication/authorization
 * gate and its cache, with a fake reviewer.
 */
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include <ckube/base.h>
#include <ckube/metrics.h>

#include "pkg/metrics/metrics_internal.h"

static char *render(ck_metrics_registry_t *reg)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_metrics_registry_render(reg, &b);
	return ck_sbuf_steal(&b);
}

START_TEST(render_exact)
{
	char *err = NULL;
	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	ck_metrics_counter_t *c = ck_metrics_counter_new(reg, "c_total", "Counts things.", &err);
	ck_assert_ptr_nonnull(c);
	ck_metrics_gauge_vec_t *g =
	    ck_metrics_gauge_vec_new(reg, "g", "A gauge with \\ backslash\nand newline.",
	                             CK_METRICS_LABELS("kind", "ns"), &err);
	ck_assert_ptr_nonnull(g);
	static const double b[] = {0.1, 1, 10};
	ck_metrics_histogram_vec_t *h = ck_metrics_histogram_vec_new(
	    reg, "h_seconds", "Latency.", CK_METRICS_LABELS("op"), b, CK_ARRAY_LEN(b), &err);
	ck_assert_ptr_nonnull(h);
	/* A vec without children prints nothing at all. */
	ck_assert_ptr_nonnull(
	    ck_metrics_counter_vec_new(reg, "e_total", "Empty.", CK_METRICS_LABELS("x"), &err));
	static const double one[] = {1, INFINITY};
	ck_metrics_histogram_t *z = ck_metrics_histogram_new(reg, "z", "Zero.", one, 2, &err);
	ck_assert_ptr_nonnull(z);
	ck_assert_ptr_null(err);

	ck_metrics_counter_inc(c);
	ck_metrics_counter_inc(c);
	ck_metrics_counter_add(c, 1.5);
	ck_metrics_counter_add(c, -4);  /* ignored */
	ck_metrics_counter_add(c, NAN); /* ignored */
	ck_assert(ck_metrics_counter_value(c) == 3.5);
	ck_metrics_gauge_set(ck_metrics_gauge_vec_get(g, CK_METRICS_LABELS("b", "x")), 2);
	ck_metrics_gauge_set(ck_metrics_gauge_vec_get(g, CK_METRICS_LABELS("a", "y")), -1.5e-7);
	ck_metrics_gauge_t *ax = ck_metrics_gauge_vec_get(g, CK_METRICS_LABELS("a", "x"));
	ck_metrics_gauge_set(ax, 999999);
	ck_metrics_gauge_inc(ax);
	ck_metrics_gauge_inc(ax);
	ck_metrics_gauge_dec(ax);
	ck_assert_ptr_eq(ck_metrics_gauge_vec_get(g, CK_METRICS_LABELS("a", "x")), ax);
	ck_assert(ck_metrics_gauge_value(ax) == 1e6);
	ck_metrics_histogram_t *get = ck_metrics_histogram_vec_get(h, CK_METRICS_LABELS("get"));
	ck_metrics_histogram_observe(get, 0.0625);
	ck_metrics_histogram_observe(get, 0.5);
	ck_metrics_histogram_observe(get, 4);
	ck_metrics_histogram_observe(get, 64);
	ck_metrics_histogram_vec_get(h, CK_METRICS_LABELS("put"));
	ck_assert_uint_eq(ck_metrics_histogram_count(get), 4);

	char *text = render(reg);
	ck_assert_str_eq(text, "# HELP c_total Counts things.\n"
	                       "# TYPE c_total counter\n"
	                       "c_total 3.5\n"
	                       "# HELP g A gauge with \\\\ backslash\\nand newline.\n"
	                       "# TYPE g gauge\n"
	                       "g{kind=\"a\",ns=\"x\"} 1e+06\n"
	                       "g{kind=\"a\",ns=\"y\"} -1.5e-07\n"
	                       "g{kind=\"b\",ns=\"x\"} 2\n"
	                       "# HELP h_seconds Latency.\n"
	                       "# TYPE h_seconds histogram\n"
	                       "h_seconds_bucket{op=\"get\",le=\"0.1\"} 1\n"
	                       "h_seconds_bucket{op=\"get\",le=\"1\"} 2\n"
	                       "h_seconds_bucket{op=\"get\",le=\"10\"} 3\n"
	                       "h_seconds_bucket{op=\"get\",le=\"+Inf\"} 4\n"
	                       "h_seconds_sum{op=\"get\"} 68.5625\n"
	                       "h_seconds_count{op=\"get\"} 4\n"
	                       "h_seconds_bucket{op=\"put\",le=\"0.1\"} 0\n"
	                       "h_seconds_bucket{op=\"put\",le=\"1\"} 0\n"
	                       "h_seconds_bucket{op=\"put\",le=\"10\"} 0\n"
	                       "h_seconds_bucket{op=\"put\",le=\"+Inf\"} 0\n"
	                       "h_seconds_sum{op=\"put\"} 0\n"
	                       "h_seconds_count{op=\"put\"} 0\n"
	                       "# HELP z Zero.\n"
	                       "# TYPE z histogram\n"
	                       "z_bucket{le=\"1\"} 0\n"
	                       "z_bucket{le=\"+Inf\"} 0\n"
	                       "z_sum 0\n"
	                       "z_count 0\n");
	free(text);
	ck_metrics_registry_free(reg);
}
END_TEST

START_TEST(label_escaping)
{
	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	ck_metrics_counter_vec_t *v =
	    ck_metrics_counter_vec_new(reg, "esc_total", "Escapes.", CK_METRICS_LABELS("v"), NULL);
	ck_metrics_counter_inc(ck_metrics_counter_vec_get(v, CK_METRICS_LABELS("a\"b\\c\nd")));
	ck_metrics_counter_inc(ck_metrics_counter_vec_get(v, CK_METRICS_LABELS("bad\xff utf8")));
	ck_metrics_counter_inc(ck_metrics_counter_vec_get(v, CK_METRICS_LABELS("bad\xff utf8")));
	ck_metrics_counter_inc(ck_metrics_counter_vec_get(v, CK_METRICS_LABELS("caf\xc3\xa9")));
	ck_metrics_counter_inc(ck_metrics_counter_vec_get(v, CK_METRICS_LABELS(NULL)));
	char *text = render(reg);
	ck_assert_str_eq(text, "# HELP esc_total Escapes.\n"
	                       "# TYPE esc_total counter\n"
	                       "esc_total{v=\"\"} 1\n"
	                       "esc_total{v=\"a\\\"b\\\\c\\nd\"} 1\n"
	                       "esc_total{v=\"bad\xef\xbf\xbd utf8\"} 2\n"
	                       "esc_total{v=\"caf\xc3\xa9\"} 1\n");
	free(text);

	/* The helpers for collectors escape the same way. */
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_metrics_label_t l[] = {{"name", "q\"1"}, {"le", "+Inf"}};
	ck_metrics_write_header(&b, "x_bucket", "h\\", CK_METRICS_UNTYPED);
	ck_metrics_write_sample(&b, "x_bucket", l, 2, 7);
	ck_assert_str_eq(ck_sbuf_cstr(&b), "# HELP x_bucket h\\\\\n# TYPE x_bucket untyped\n"
	                                   "x_bucket{name=\"q\\\"1\",le=\"+Inf\"} 7\n");
	ck_sbuf_free(&b);
	ck_metrics_registry_free(reg);
}
END_TEST

static void expect_value(double v, const char *want)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_metrics_write_value(&b, v);
	ck_assert_msg(strcmp(ck_sbuf_cstr(&b), want) == 0, "%.17g printed as %s, want %s", v,
	              ck_sbuf_cstr(&b), want);
	ck_sbuf_free(&b);
}

START_TEST(value_format_like_go)
{
	/* What Go's strconv.FormatFloat(v, 'g', -1, 64) prints. */
	expect_value(0, "0");
	expect_value(-0.0, "0");
	expect_value(1, "1");
	expect_value(-1, "-1");
	expect_value(0.005, "0.005");
	expect_value(2.5, "2.5");
	expect_value(0.1, "0.1");
	expect_value(100000, "100000");
	expect_value(123456, "123456");
	expect_value(1e6, "1e+06");
	expect_value(1234567, "1.234567e+06");
	expect_value(0.0001, "0.0001");
	expect_value(0.00001, "1e-05");
	expect_value(1.0 / 3.0, "0.3333333333333333");
	expect_value(1.5e300, "1.5e+300");
	expect_value(1669723250.25, "1.66972325025e+09");
	expect_value(INFINITY, "+Inf");
	expect_value(-INFINITY, "-Inf");
	expect_value(NAN, "NaN");
}
END_TEST

START_TEST(registration_errors)
{
	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	char *err = NULL;
#define EXPECT_ERR(call, msg)                                                                      \
	do {                                                                                       \
		ck_assert_ptr_null(call);                                                          \
		ck_assert_ptr_nonnull(err);                                                        \
		ck_assert_str_eq(err, msg);                                                        \
		free(err);                                                                         \
		err = NULL;                                                                        \
	} while (0)
	EXPECT_ERR(ck_metrics_counter_new(reg, "9bad", "h", &err),
	           "metric \"9bad\": invalid metric name");
	EXPECT_ERR(ck_metrics_gauge_new(reg, "with-dash", "h", &err),
	           "metric \"with-dash\": invalid metric name");
	EXPECT_ERR(ck_metrics_counter_vec_new(reg, "ok_total", "h", CK_METRICS_LABELS("__x"), &err),
	           "metric ok_total: invalid label name \"__x\"");
	EXPECT_ERR(
	    ck_metrics_counter_vec_new(reg, "ok_total", "h", CK_METRICS_LABELS("a", "a"), &err),
	    "metric ok_total: duplicate label name \"a\"");
	EXPECT_ERR(
	    ck_metrics_histogram_vec_new(reg, "hh", "h", CK_METRICS_LABELS("le"), NULL, 0, &err),
	    "metric hh: label \"le\" is reserved in histograms");
	static const double bad[] = {1, 1};
	EXPECT_ERR(ck_metrics_histogram_new(reg, "hh", "h", bad, 2, &err),
	           "metric hh: buckets must be finite and strictly increasing (bucket 1)");
	ck_assert_ptr_nonnull(ck_metrics_counter_new(reg, "ok_total", "h", &err));
	EXPECT_ERR(ck_metrics_gauge_new(reg, "ok_total", "h", &err),
	           "metric ok_total: already registered");
	/* Default buckets when none are given. */
	ck_metrics_histogram_t *d = ck_metrics_histogram_new(reg, "d", "h", NULL, 0, &err);
	ck_assert_ptr_nonnull(d);
	ck_metrics_histogram_observe(d, 0.3);
	char *text = render(reg);
	ck_assert_ptr_nonnull(strstr(text, "d_bucket{le=\"0.005\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(text, "d_bucket{le=\"0.25\"} 0\nd_bucket{le=\"0.5\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "d_bucket{le=\"10\"} 1\nd_bucket{le=\"+Inf\"} 1\n"));
	free(text);
	ck_metrics_registry_free(reg);
}
END_TEST

/* --- Concurrency. --- */

#define THREADS 4
#define ITERS   100000

struct worker {
	ck_metrics_counter_vec_t *cv;
	ck_metrics_gauge_t *g;
	ck_metrics_histogram_t *h;
	int id;
};

static void *hammer(void *arg)
{
	struct worker *w = arg;
	char own[16], key[16];
	snprintf(own, sizeof(own), "t%d", w->id);
	for (int i = 0; i < ITERS; i++) {
		/* The lookup is on the hot path on purpose: it must be lock-free and right. */
		ck_metrics_counter_inc(
		    ck_metrics_counter_vec_get(w->cv, CK_METRICS_LABELS("shared")));
		ck_metrics_counter_add(ck_metrics_counter_vec_get(w->cv, CK_METRICS_LABELS(own)),
		                       0.5);
		if (i % 1000 == 0) {
			/* Every thread races to create the same 100 children. */
			snprintf(key, sizeof(key), "k%02d", (i / 1000) % 100);
			ck_metrics_counter_inc(
			    ck_metrics_counter_vec_get(w->cv, CK_METRICS_LABELS(key)));
		}
		ck_metrics_gauge_add(w->g, 1);
		ck_metrics_histogram_observe(w->h, (i % 4) * 0.25);
	}
	return NULL;
}

START_TEST(concurrent_updates_add_up)
{
	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	struct worker w[THREADS];
	pthread_t t[THREADS];
	ck_metrics_counter_vec_t *cv =
	    ck_metrics_counter_vec_new(reg, "ops_total", "Ops.", CK_METRICS_LABELS("who"), NULL);
	ck_metrics_gauge_t *g = ck_metrics_gauge_new(reg, "level", "Level.", NULL);
	static const double b[] = {0.3, 0.6};
	ck_metrics_histogram_t *h = ck_metrics_histogram_new(reg, "sizes", "Sizes.", b, 2, NULL);
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){cv, g, h, i};
		ck_assert_int_eq(pthread_create(&t[i], NULL, hammer, &w[i]), 0);
	}
	/* Scrape while they run: must not crash or tear. */
	for (int i = 0; i < 20; i++)
		free(render(reg));
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);

	ck_assert(ck_metrics_counter_value(ck_metrics_counter_vec_get(
	              cv, CK_METRICS_LABELS("shared"))) == THREADS * ITERS);
	for (int i = 0; i < THREADS; i++) {
		char own[16];
		snprintf(own, sizeof(own), "t%d", i);
		ck_assert(ck_metrics_counter_value(ck_metrics_counter_vec_get(
		              cv, CK_METRICS_LABELS(own))) == ITERS * 0.5);
	}
	ck_assert(ck_metrics_gauge_value(g) == THREADS * ITERS);
	ck_assert_uint_eq(ck_metrics_histogram_count(h), THREADS * ITERS);
	char *text = render(reg);
	/* Each of the 100 racing keys exists once, counted once per thread. */
	for (int k = 0; k < 100; k++) {
		char line[64];
		snprintf(line, sizeof(line), "ops_total{who=\"k%02d\"} %d\n", k, THREADS);
		ck_assert_msg(strstr(text, line) != NULL, "missing %s", line);
		char *first = strstr(text, line);
		ck_assert_ptr_null(strstr(first + 1, line));
	}
	/* Multiples of 0.25 add exactly, so the sum is exact whatever the order. */
	ck_assert_ptr_nonnull(strstr(text, "sizes_sum 150000\n"));
	ck_assert_ptr_nonnull(strstr(text, "sizes_bucket{le=\"0.3\"} 200000\n"));
	ck_assert_ptr_nonnull(strstr(text, "sizes_bucket{le=\"0.6\"} 300000\n"));
	ck_assert_ptr_nonnull(strstr(text, "sizes_count 400000\n"));
	free(text);
	ck_metrics_registry_free(reg);
}
END_TEST

/* --- Process collector. --- */

static void write_file(const char *dir, const char *rel, const char *text)
{
	char *path = ck_xasprintf("%s/%s", dir, rel);
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
	free(path);
}

START_TEST(process_collector_fixture)
{
	char dir[] = "/tmp/test_metrics_proc_XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char *self = ck_xasprintf("%s/self", dir), *fd = ck_xasprintf("%s/self/fd", dir);
	ck_assert_int_eq(mkdir(self, 0700), 0);
	ck_assert_int_eq(mkdir(fd, 0700), 0);
	/* A command name with spaces and parentheses must not shift the fields. */
	write_file(dir, "self/stat",
	           "1234 (my (odd) proc) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 4 "
	           "0 5025 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 0 0 0\n");
	write_file(dir, "stat", "cpu  1 2 3 4\nintr 5\nbtime 1669723200\nprocesses 9\n");
	write_file(dir, "self/limits",
	           "Limit                     Soft Limit           Hard Limit           Units\n"
	           "Max cpu time              unlimited            unlimited            seconds\n"
	           "Max open files            1024                 524288               files\n");
	write_file(dir, "self/fd/0", "");
	write_file(dir, "self/fd/1", "");
	write_file(dir, "self/fd/2", "");

	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	ck_metrics_registry_add_process_collector(reg, dir);
	char *text = render(reg);
	double ticks = (double)sysconf(_SC_CLK_TCK), page = (double)sysconf(_SC_PAGESIZE);
	ck_sbuf_t want = CK_SBUF_INIT;
	ck_metrics_write_header(&want, "process_cpu_seconds_total",
	                        "Total user and system CPU time spent in seconds.",
	                        CK_METRICS_COUNTER);
	ck_metrics_write_sample(&want, "process_cpu_seconds_total", NULL, 0, 400 / ticks);
	ck_sbuf_puts(&want, "# HELP process_max_fds Maximum number of open file descriptors.\n"
	                    "# TYPE process_max_fds gauge\nprocess_max_fds 1024\n"
	                    "# HELP process_open_fds Number of open file descriptors.\n"
	                    "# TYPE process_open_fds gauge\nprocess_open_fds 3\n");
	ck_metrics_write_header(&want, "process_resident_memory_bytes",
	                        "Resident memory size in bytes.", CK_METRICS_GAUGE);
	ck_metrics_write_sample(&want, "process_resident_memory_bytes", NULL, 0, 2560 * page);
	ck_metrics_write_header(&want, "process_start_time_seconds",
	                        "Start time of the process since unix epoch in seconds.",
	                        CK_METRICS_GAUGE);
	ck_metrics_write_sample(&want, "process_start_time_seconds", NULL, 0,
	                        1669723200 + 5025 / ticks);
	ck_sbuf_puts(&want, "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
	                    "# TYPE process_virtual_memory_bytes gauge\n"
	                    "process_virtual_memory_bytes 1.048576e+08\n");
	ck_assert_str_eq(text, ck_sbuf_cstr(&want));
	free(text);
	ck_sbuf_free(&want);

	/* Broken files drop their figures, nothing else. */
	write_file(dir, "self/stat", "1234 (truncated");
	write_file(dir, "self/limits", "garbage");
	text = render(reg);
	ck_assert_str_eq(text, "# HELP process_open_fds Number of open file descriptors.\n"
	                       "# TYPE process_open_fds gauge\nprocess_open_fds 3\n");
	free(text);
	ck_metrics_registry_free(reg);

	const char *rels[] = {"self/fd/0", "self/fd/1",   "self/fd/2",
	                      "self/stat", "self/limits", "stat"};
	for (size_t i = 0; i < CK_ARRAY_LEN(rels); i++) {
		char *p = ck_xasprintf("%s/%s", dir, rels[i]);
		unlink(p);
		free(p);
	}
	rmdir(fd);
	rmdir(self);
	rmdir(dir);
	free(fd);
	free(self);
}
END_TEST

static double sample_value(const char *text, const char *name)
{
	char *key = ck_xasprintf("\n%s ", name);
	const char *p = strstr(text, key);
	ck_assert_msg(p != NULL, "no sample %s", name);
	double v = strtod(p + strlen(key), NULL);
	free(key);
	return v;
}

/* The heap figures: two gauges; outside a sanitizer, in-use bytes follow a block
 * allocated and freed (a sanitizer's allocator bypasses glibc's, whose figures
 * these are). */
START_TEST(heap_collector)
{
	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	ck_metrics_registry_add_heap_collector(reg);
	char *text = render(reg);
	ck_assert_ptr_nonnull(strstr(text, "# TYPE process_malloc_inuse_bytes gauge\n"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE process_malloc_free_bytes gauge\n"));
	double before = sample_value(text, "process_malloc_inuse_bytes");
	ck_assert(before >= 0 && sample_value(text, "process_malloc_free_bytes") >= 0);
	free(text);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	size_t n = 8u << 20;
	char *block = malloc(n);
	ck_assert_ptr_nonnull(block);
	memset(block, 1, n);
	text = render(reg);
	double during = sample_value(text, "process_malloc_inuse_bytes");
	free(text);
	free(block);
	text = render(reg);
	double after = sample_value(text, "process_malloc_inuse_bytes");
	free(text);
	ck_assert_msg(during - before >= (double)n, "in use %.0f -> %.0f", before, during);
	ck_assert_msg(during - after >= (double)n, "in use after free %.0f -> %.0f", during, after);
#endif
	ck_metrics_registry_free(reg);
}
END_TEST

START_TEST(process_collector_real)
{
	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	ck_metrics_registry_add_process_collector(reg, NULL);
	char *text = render(reg);
	struct timeval now;
	gettimeofday(&now, NULL);
	ck_assert(sample_value(text, "process_open_fds") >= 3);
	ck_assert(sample_value(text, "process_max_fds") >= sample_value(text, "process_open_fds"));
	ck_assert(sample_value(text, "process_resident_memory_bytes") > 0);
	ck_assert(sample_value(text, "process_virtual_memory_bytes") >=
	          sample_value(text, "process_resident_memory_bytes"));
	ck_assert(sample_value(text, "process_cpu_seconds_total") >= 0);
	double start = sample_value(text, "process_start_time_seconds");
	ck_assert(start > 1.6e9 && start <= (double)now.tv_sec + 1);
	free(text);
	ck_metrics_registry_free(reg);
}
END_TEST

/* --- The server. --- */

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	ck_sbuf_append(ud, p, size * n);
	return size * n;
}

static const char *http_host = "127.0.0.1"; /* "[::1]" for IPv6 requests */

/* Performs one request on http_host:port; returns the status, the body in *body. */
static long http(const char *method, int port, const char *path, ck_sbuf_t *body, char *ctype,
                 size_t ctlen)
{
	CURL *c = curl_easy_init();
	ck_assert_ptr_nonnull(c);
	char *url = ck_xasprintf("http://%s:%d%s", http_host, port, path);
	ck_sbuf_reset(body);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
	if (strcmp(method, "HEAD") == 0) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "a=1");
	}
	CURLcode rc = curl_easy_perform(c);
	ck_assert_msg(rc == CURLE_OK, "%s %s: %s", method, url, curl_easy_strerror(rc));
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (ctype != NULL) {
		char *ct = NULL;
		curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
		snprintf(ctype, ctlen, "%s", ct ? ct : "");
	}
	ck_sbuf_cstr(body);
	curl_easy_cleanup(c);
	free(url);
	return status;
}

#define EXPECT_HTTP(method, path, want_status, want_body)                                          \
	do {                                                                                       \
		long st_ = http(method, port, path, &body, NULL, 0);                               \
		ck_assert_msg(st_ == (want_status), "%s %s: status %ld, want %d", method, path,    \
		              st_, (int)(want_status));                                            \
		ck_assert_str_eq(ck_sbuf_cstr(&body), want_body);                                  \
	} while (0)

static const char *python(void)
{
	/* The Debian package installs the parser for the system interpreter. */
	return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

/* Runs prom_parse_check.py on text with the given arguments; returns its exit status. */
static int prom_check(const char *text, const char *args)
{
	char path[] = "/tmp/test_metrics_body_XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	char *cmd = ck_xasprintf("%s prom_parse_check.py %s < %s", python(), args, path);
	int rc = system(cmd);
	free(cmd);
	unlink(path);
	ck_assert_msg(rc != -1 && WIFEXITED(rc), "could not run the checker");
	return WEXITSTATUS(rc);
}

static void custom_collector(void *ud, ck_sbuf_t *out)
{
	ck_metrics_label_t l[] = {{"name", ud}};
	ck_metrics_write_header(out, "custom_queue_depth", "Depth of a queue.", CK_METRICS_GAUGE);
	ck_metrics_write_sample(out, "custom_queue_depth", l, 1, 3);
}

START_TEST(prom_checker_rejects_bad_text)
{
	/* The checker itself must be able to fail, or the next test proves nothing. */
	ck_assert_int_eq(prom_check("# TYPE x counter\nx_total 1\n", "x:counter"), 0);
	ck_assert_int_ne(prom_check("x{a=\"1\" 2\n", ""), 0);
	ck_assert_int_ne(prom_check("# TYPE x counter\nx_total 1\n", "y"), 0);
	ck_assert_int_ne(prom_check("# TYPE h histogram\nh_bucket{le=\"1\"} 3\n"
	                            "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 2\n",
	                            ""),
	                 0);
}
END_TEST

START_TEST(server_metrics_parse)
{
	char *err = NULL;
	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	ck_metrics_counter_vec_t *cv = ck_metrics_counter_vec_new(
	    reg, "c_total", "Counts \"things\".", CK_METRICS_LABELS("k"), &err);
	ck_metrics_counter_inc(
	    ck_metrics_counter_vec_get(cv, CK_METRICS_LABELS("odd \"v\" \\ \n x")));
	ck_metrics_gauge_set(ck_metrics_gauge_new(reg, "g", "Gauge.", &err), 1e-9);
	ck_metrics_histogram_vec_t *h = ck_metrics_histogram_vec_new(
	    reg, "h_seconds", "Latency.", CK_METRICS_LABELS("op"), NULL, 0, &err);
	ck_metrics_histogram_observe(ck_metrics_histogram_vec_get(h, CK_METRICS_LABELS("get")),
	                             0.2);
	ck_metrics_histogram_observe(ck_metrics_histogram_vec_get(h, CK_METRICS_LABELS("get")), 20);
	ck_metrics_registry_add_process_collector(reg, NULL);
	ck_metrics_registry_add_collector(reg, custom_collector, "workqueue");
	ck_assert_ptr_null(err);

	ck_metrics_server_t *srv = NULL;
	ck_assert_int_eq(
	    ck_metrics_server_start("127.0.0.1:0", "--metrics-bind-address", reg, 0, &srv, &err),
	    0);
	ck_assert_ptr_nonnull(srv);
	int port = ck_metrics_server_port(srv);
	ck_assert_int_gt(port, 0);

	ck_sbuf_t body = CK_SBUF_INIT;
	char ctype[128];
	ck_assert_int_eq(http("GET", port, "/metrics", &body, ctype, sizeof(ctype)), 200);
	ck_assert_str_eq(ctype, "text/plain; version=0.0.4; charset=utf-8");
	ck_assert_ptr_nonnull(
	    strstr(ck_sbuf_cstr(&body), "custom_queue_depth{name=\"workqueue\"} 3\n"));
	ck_assert_int_eq(
	    prom_check(ck_sbuf_cstr(&body),
	               "c:counter g:gauge h_seconds:histogram process_cpu_seconds:counter "
	               "process_open_fds:gauge process_max_fds:gauge "
	               "process_resident_memory_bytes:gauge "
	               "process_virtual_memory_bytes:gauge "
	               "process_start_time_seconds:gauge custom_queue_depth:gauge"),
	    0);
	/* Metrics only: no probes here. */
	EXPECT_HTTP("GET", "/healthz", 404, "404 page not found\n");
	ck_sbuf_free(&body);
	ck_metrics_server_stop(srv);
	ck_metrics_registry_free(reg);
}
END_TEST

struct flag {
	_Atomic int ok;
	const char *why;
};

static int check_flag(void *ud, char **reason)
{
	struct flag *f = ud;
	if (atomic_load(&f->ok))
		return 0;
	*reason = ck_xstrdup(f->why);
	return 1;
}

static int check_note(void *ud, char **note)
{
	(void)ud;
	*note = ck_xstrdup("owns 2 of 4\nbuckets: 0,3");
	return 0;
}

START_TEST(server_probes)
{
	char *err = NULL;
	ck_metrics_server_t *srv = NULL;
	ck_assert_int_eq(ck_metrics_server_start("127.0.0.1:0", "--health-probe-bind-address", NULL,
	                                         1, &srv, &err),
	                 0);
	int port = ck_metrics_server_port(srv);
	ck_sbuf_t body = CK_SBUF_INIT;

	/* No checks: kube's implicit ping. */
	EXPECT_HTTP("GET", "/healthz", 200, "ok");
	EXPECT_HTTP("GET", "/healthz?verbose", 200, "[+]ping ok\nhealthz check passed\n");
	EXPECT_HTTP("GET", "/healthz/ping", 200, "ok");

	struct flag synced = {0, "caches not synced"}, leader = {1, NULL};
	ck_assert_int_eq(
	    ck_metrics_probe_add_check(srv, "readyz", "informer-sync", check_flag, &synced, &err),
	    0);
	ck_assert_int_eq(
	    ck_metrics_probe_add_check(srv, "readyz", "leader", check_flag, &leader, &err), 0);
	ck_assert_int_eq(
	    ck_metrics_probe_add_check(srv, "healthz", "loop", check_flag, &leader, &err), 0);

	EXPECT_HTTP(
	    "GET", "/readyz", 500,
	    "[-]informer-sync failed: reason withheld\n[+]leader ok\nreadyz check failed\n");
	EXPECT_HTTP(
	    "GET", "/readyz?verbose=1", 500,
	    "[-]informer-sync failed: reason withheld\n[+]leader ok\nreadyz check failed\n");
	/* Security finding i: one check alone withholds its reason as the list does
	 * (the endpoint is unauthenticated); it goes to the log. */
	EXPECT_HTTP("GET", "/readyz/informer-sync", 500,
	            "internal server error: reason withheld\n");
	EXPECT_HTTP("GET", "/readyz/informer-sync?verbose", 500,
	            "internal server error: reason withheld\n");
	EXPECT_HTTP("GET", "/readyz/leader", 200, "ok");
	EXPECT_HTTP("GET", "/readyz/nope", 404, "404 page not found\n");
	EXPECT_HTTP("GET", "/readyz?exclude=informer-sync", 200, "ok");
	EXPECT_HTTP("GET", "/readyz?exclude=informer-sync&verbose", 200,
	            "[+]informer-sync excluded: ok\n[+]leader ok\nreadyz check passed\n");
	EXPECT_HTTP(
	    "GET", "/readyz?exclude=nope&exclude=alpha&exclude=nope", 500,
	    "[-]informer-sync failed: reason withheld\n[+]leader ok\n"
	    "warn: some health checks cannot be excluded: no matches for \"alpha\",\"nope\"\n"
	    "readyz check failed\n");
	EXPECT_HTTP("GET", "/healthz?verbose", 200, "[+]loop ok\nhealthz check passed\n");
	EXPECT_HTTP("GET", "/healthz/ping", 404, "404 page not found\n");

	atomic_store(&synced.ok, 1);
	EXPECT_HTTP("GET", "/readyz", 200, "ok");
	EXPECT_HTTP("GET", "/readyz?verbose", 200,
	            "[+]informer-sync ok\n[+]leader ok\nreadyz check passed\n");

	/* A passing check's note (the shard buckets owned) is shown, on one line. */
	ck_assert_int_eq(
	    ck_metrics_probe_add_check(srv, "readyz", "shards", check_note, NULL, &err), 0);
	EXPECT_HTTP("GET", "/readyz?verbose", 200,
	            "[+]informer-sync ok\n[+]leader ok\n[+]shards ok: owns 2 of 4 buckets: 0,3\n"
	            "readyz check passed\n");
	EXPECT_HTTP("GET", "/readyz/shards", 200, "ok: owns 2 of 4 buckets: 0,3");

	/* Methods and paths. */
	EXPECT_HTTP("HEAD", "/readyz", 200, "");
	EXPECT_HTTP("POST", "/readyz", 405, "method not allowed\n");
	EXPECT_HTTP("DELETE", "/healthz", 405, "method not allowed\n");
	EXPECT_HTTP("GET", "/", 404, "404 page not found\n");
	EXPECT_HTTP("GET", "/readyzz", 404, "404 page not found\n");
	EXPECT_HTTP("GET", "/readyz/", 404, "404 page not found\n");
	EXPECT_HTTP("GET", "/metrics", 404, "404 page not found\n");

	/* Bad checks. */
	ck_assert_int_eq(ck_metrics_probe_add_check(srv, "livez", "x", check_flag, &leader, &err),
	                 -1);
	ck_assert_str_eq(err,
	                 "probe check \"x\": unknown endpoint \"livez\" (want healthz or readyz)");
	free(err);
	err = NULL;
	ck_assert_int_eq(
	    ck_metrics_probe_add_check(srv, "readyz", "leader", check_flag, &leader, &err), -1);
	ck_assert_str_eq(err, "readyz check \"leader\": already added");
	free(err);
	err = NULL;
	ck_assert_int_eq(
	    ck_metrics_probe_add_check(srv, "readyz", "a/b", check_flag, &leader, &err), -1);
	free(err);
	ck_sbuf_free(&body);
	ck_metrics_server_stop(srv);
}
END_TEST

static int have_ipv6_loopback(void)
{
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	if (fd < 0)
		return 0;
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	int ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

START_TEST(server_one_address_both)
{
	char *err = NULL;
	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	ck_metrics_gauge_set(ck_metrics_gauge_new(reg, "up_gauge", "Up.", &err), 1);
	ck_metrics_server_t *srv = NULL;
	/* ":0" listens on every address, dual stack when the host has IPv6. */
	ck_assert_int_eq(
	    ck_metrics_server_start(":0", "--metrics-bind-address", reg, 1, &srv, &err), 0);
	int port = ck_metrics_server_port(srv);
	ck_sbuf_t body = CK_SBUF_INIT;
	EXPECT_HTTP("GET", "/metrics", 200,
	            "# HELP up_gauge Up.\n# TYPE up_gauge gauge\nup_gauge 1\n");
	EXPECT_HTTP("GET", "/readyz", 200, "ok");
	EXPECT_HTTP("GET", "/healthz", 200, "ok");
	if (have_ipv6_loopback()) {
		/* Dual stack: the same server answers on IPv6 loopback. */
		http_host = "[::1]";
		EXPECT_HTTP("GET", "/readyz", 200, "ok");
		http_host = "127.0.0.1";
	}
	ck_metrics_server_stop(srv);

	/* localhost resolves without DNS; and IPv6 loopback where the host has it. */
	ck_assert_int_eq(ck_metrics_server_start("localhost:0", "--x", reg, 0, &srv, &err), 0);
	ck_assert_int_gt(ck_metrics_server_port(srv), 0);
	ck_metrics_server_stop(srv);
	if (ck_metrics_server_start("[::1]:0", "--x", reg, 0, &srv, &err) == 0) {
		port = ck_metrics_server_port(srv);
		ck_assert_int_gt(port, 0);
		http_host = "[::1]";
		EXPECT_HTTP("GET", "/metrics", 200,
		            "# HELP up_gauge Up.\n# TYPE up_gauge gauge\nup_gauge 1\n");
		http_host = "127.0.0.1";
		ck_metrics_server_stop(srv);
	} else {
		/* No IPv6 here: the error must still name the address. */
		ck_assert(!have_ipv6_loopback());
		ck_assert_ptr_nonnull(strstr(err, "--x \"[::1]:0\": "));
		free(err);
		err = NULL;
	}
	ck_sbuf_free(&body);
	ck_metrics_registry_free(reg);
}
END_TEST

START_TEST(server_disabled_and_bad_addresses)
{
	char *err = NULL;
	ck_metrics_server_t *srv = (ck_metrics_server_t *)&err; /* must be overwritten */
	ck_assert_int_eq(
	    ck_metrics_server_start("0", "--metrics-bind-address", NULL, 1, &srv, &err), 0);
	ck_assert_ptr_null(srv);
	ck_assert_ptr_null(err);
	ck_assert_int_eq(ck_metrics_server_start("", "--metrics-bind-address", NULL, 1, &srv, &err),
	                 0);
	ck_assert_ptr_null(srv);
	ck_assert_int_eq(ck_metrics_server_port(NULL), 0);
	ck_assert_int_eq(ck_metrics_probe_add_check(NULL, "readyz", "x", check_flag, NULL, &err),
	                 0);
	ck_metrics_server_stop(NULL);

	static const struct {
		const char *addr, *msg;
	} bad[] = {
	    {"x", "--metrics-bind-address \"x\": missing port in address"},
	    {"8080", "--metrics-bind-address \"8080\": missing port in address"},
	    {"127.0.0.1:99999",
	     "--metrics-bind-address \"127.0.0.1:99999\": invalid port \"99999\""},
	    {"127.0.0.1:http", "--metrics-bind-address \"127.0.0.1:http\": invalid port \"http\""},
	    {":-1", "--metrics-bind-address \":-1\": invalid port \"-1\""},
	    {"::1:8080", "--metrics-bind-address \"::1:8080\": too many colons in address (an IPv6 "
	                 "address needs brackets)"},
	    {"[::1", "--metrics-bind-address \"[::1\": missing ']' in address"},
	    {"[::1]8080", "--metrics-bind-address \"[::1]8080\": missing port in address"},
	};
	for (size_t i = 0; i < CK_ARRAY_LEN(bad); i++) {
		ck_assert_int_eq(ck_metrics_server_start(bad[i].addr, "--metrics-bind-address",
		                                         NULL, 1, &srv, &err),
		                 -1);
		ck_assert_ptr_null(srv);
		ck_assert_str_eq(err, bad[i].msg);
		free(err);
		err = NULL;
	}

	/* A port in use. */
	ck_metrics_server_t *first = NULL;
	ck_assert_int_eq(ck_metrics_server_start("127.0.0.1:0", "--a", NULL, 1, &first, &err), 0);
	char *addr = ck_xasprintf("127.0.0.1:%d", ck_metrics_server_port(first));
	ck_assert_int_eq(
	    ck_metrics_server_start(addr, "--health-probe-bind-address", NULL, 1, &srv, &err), -1);
	char *want =
	    ck_xasprintf("--health-probe-bind-address \"%s\": bind: Address already in use", addr);
	ck_assert_str_eq(err, want);
	free(want);
	free(err);
	free(addr);
	ck_metrics_server_stop(first);
}
END_TEST

static int count_open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Sends raw bytes, half-closes, returns the first line of the answer (new string). */
static char *raw_request(int port, const char *data, size_t len)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	struct timeval tv = {10, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	size_t off = 0;
	while (off < len) {
		ssize_t n = send(fd, data + off, len - off, MSG_NOSIGNAL);
		if (n <= 0)
			break; /* the server may close early on garbage: fine */
		off += (size_t)n;
	}
	shutdown(fd, SHUT_WR);
	ck_sbuf_t b = CK_SBUF_INIT;
	char chunk[4096];
	ssize_t n;
	while ((n = recv(fd, chunk, sizeof(chunk), 0)) > 0)
		ck_sbuf_append(&b, chunk, (size_t)n);
	close(fd);
	char *all = ck_sbuf_steal(&b);
	char *eol = strstr(all, "\r\n");
	if (eol != NULL)
		*eol = '\0';
	return all;
}

START_TEST(server_survives_odd_requests)
{
	char *err = NULL;
	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	ck_metrics_counter_inc(ck_metrics_counter_new(reg, "alive_total", "Alive.", &err));
	int fds_before = count_open_fds();
	ck_metrics_server_t *srv = NULL;
	ck_assert_int_eq(ck_metrics_server_start("127.0.0.1:0", "--m", reg, 1, &srv, &err), 0);
	int port = ck_metrics_server_port(srv);

	ck_sbuf_t body = CK_SBUF_INIT;
	char *longurl = ck_xmalloc(20100);
	memcpy(longurl, "GET /", 5);
	memset(longurl + 5, 'a', 20000);
	memcpy(longurl + 20005, " HTTP/1.0\r\n\r\n", 14);
#define S(lit) lit, sizeof(lit) - 1
	static const char junk[] = {0, 1, 2, 3, '\r', '\n', '\r', '\n', (char)0xff};
	const struct {
		const char *data;
		size_t len;
		const char *want; /* prefix of the status line; NULL = any answer or none */
	} reqs[] = {
	    {S("GARBAGE\r\n\r\n"), NULL},
	    {junk, sizeof(junk), NULL},
	    {longurl, strlen(longurl), NULL},
	    {S("GET /metrics HTTP/1.1\r\n\r\n"), NULL}, /* 1.1 without Host */
	    {S("GET /metrics HTTP/1.0\r\n\r\n"), "HTTP/1.1 200"},
	    {S("POST /metrics HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello"), "HTTP/1.1 405"},
	    {S("PUT /readyz HTTP/1.0\r\nContent-Length: 100\r\n\r\nshort"), NULL},
	    {S("GET /healthz?exclude=%ff%00&verbose HTTP/1.0\r\n\r\n"), "HTTP/1.1 200"},
	    {S("GET /healthz//x HTTP/1.0\r\n\r\n"), "HTTP/1.1 404"},
	    {S("GET /../metrics HTTP/1.0\r\n\r\n"), NULL},
	    {S("GET /metrics HTTP/1.0\r\nX: \x01\x02\r\n\r\n"), NULL},
	    {"", 0, NULL},
	};
	for (size_t i = 0; i < CK_ARRAY_LEN(reqs); i++) {
		char *line = raw_request(port, reqs[i].data, reqs[i].len);
		/* Whatever it was, no crash: the server still answers a proper request. */
		ck_assert_int_eq(http("GET", port, "/healthz", &body, NULL, 0), 200);
		if (reqs[i].want != NULL)
			ck_assert_msg(strncmp(line, reqs[i].want, strlen(reqs[i].want)) == 0,
			              "request %zu: got \"%s\", want \"%s\"", i, line,
			              reqs[i].want);
		free(line);
	}
	free(longurl);

	/* Still serving. */
	EXPECT_HTTP("GET", "/metrics", 200,
	            "# HELP alive_total Alive.\n# TYPE alive_total counter\nalive_total 1\n");
	ck_sbuf_free(&body);
	ck_metrics_server_stop(srv);
	/* The listening socket and the daemon's own descriptors are all closed. */
	ck_assert_int_eq(count_open_fds(), fds_before);
	ck_metrics_registry_free(reg);
}
END_TEST

/*
 * Opens n connections from the source address src (any 127/8 address works on
 * loopback) to 127.0.0.1:port, each sending half a request line and then nothing,
 * as a pod holding the server's connections would. Connections the server refuses
 * still count: the kernel completes the handshake before the server sees them.
 */
static void idle_flood(const char *src, int port, int *fds, int n)
{
	for (int i = 0; i < n; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		ck_assert_int_ge(fds[i], 0);
		struct sockaddr_in from = {.sin_family = AF_INET};
		ck_assert_int_eq(inet_pton(AF_INET, src, &from.sin_addr), 1);
		ck_assert_int_eq(bind(fds[i], (struct sockaddr *)&from, sizeof(from)), 0);
		struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		ck_assert_int_eq(connect(fds[i], (struct sockaddr *)&to, sizeof(to)), 0);
		send(fds[i], "GET /healthz HT", 15, MSG_NOSIGNAL);
	}
}

/*
 * GET url from 127.0.0.1 with the kubelet's default probe timeout (timeoutSeconds
 * 1): returns the status, or -1 with *cc when no answer came in time.
 */
static long probe_within_1s(const char *url, CURLcode *cc)
{
	CURL *c = curl_easy_init();
	ck_assert_ptr_nonnull(c);
	ck_sbuf_t body = CK_SBUF_INIT;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 1000L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
	*cc = curl_easy_perform(c);
	long status = -1;
	if (*cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	ck_sbuf_free(&body);
	return status;
}

/*
 * Security finding a: 100 idle, half-sent connections from one address (any pod)
 * filled the server's shared connection limit, and the kubelet's /healthz, from
 * another address, got no answer: the liveness probe failed. With a per-address
 * limit the kubelet is still answered within its 1 s timeout, on the probe server
 * and on the secure metrics server alike. Several probes, so that a limit reached
 * only after a while would show too.
 */
START_TEST(server_idle_flood_from_one_address)
{
	char *err = NULL;
	enum { N = 100 };
	int fds[N];
	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	ck_metrics_server_t *probes = NULL, *secure = NULL;
	ck_assert_int_eq(ck_metrics_server_start("127.0.0.1:0", "--health-probe-bind-address", NULL,
	                                         1, &probes, &err),
	                 0);
	ck_assert_int_eq(ck_metrics_server_start_secure("127.0.0.1:0", "--metrics-bind-address",
	                                                reg, NULL, &secure, &err),
	                 0);
	const struct {
		ck_metrics_server_t *srv;
		const char *url;
	} cases[] = {{probes, "http://127.0.0.1:%d/healthz"},
	             {secure, "https://127.0.0.1:%d/metrics"}};
	for (size_t k = 0; k < CK_ARRAY_LEN(cases); k++) {
		int port = ck_metrics_server_port(cases[k].srv);
		char *url = ck_xasprintf(cases[k].url, port);
		idle_flood("127.0.0.2", port, fds, N);
		for (int i = 0; i < 3; i++) {
			CURLcode cc;
			long st = probe_within_1s(url, &cc);
			ck_assert_msg(st == 200, "%s with %d idle connections from 127.0.0.2: %s",
			              url, N, st < 0 ? curl_easy_strerror(cc) : "not 200");
			usleep(200 * 1000);
		}
		if (cases[k].srv == probes) {
			/* And none of them is kept: those over the per-address limit are
			 * closed at once, the rest after the short wait for a request
			 * (seconds, not the half minute of before). */
			int closed = 0;
			for (int i = 0; i < N; i++) {
				struct timeval tv = {15, 0};
				setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
				char c;
				ssize_t r = recv(fds[i], &c, 1, 0);
				closed +=
				    r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
				if (closed <= i)
					break;
			}
			ck_assert_msg(closed == N, "%d of %d idle connections closed", closed, N);
		}
		for (int i = 0; i < N; i++)
			close(fds[i]);
		free(url);
	}
	ck_metrics_server_stop(probes);
	ck_metrics_server_stop(secure);
	ck_metrics_registry_free(reg);
}
END_TEST

/* --- The secure server. --- */

/*
 * A fake reviewer: tokens "alice" and "bob" are valid (users alice and bob, uid
 * u-<name>, group g), "carol" is valid but her access review fails, "boom" fails
 * to review, "t<N>" are valid users t<N>; anything else is invalid. Only alice
 * and t<N> may get /metrics. Counts its calls.
 */
struct fake_rev {
	_Atomic int authn, authz;
	char last_path[64], last_verb[16];
};

static int fake_authenticate(void *ud, const char *token, ck_metrics_user_t *user, char **reason,
                             char **err)
{
	struct fake_rev *f = ud;
	atomic_fetch_add(&f->authn, 1);
	if (strcmp(token, "boom") == 0)
		return ck_err_set(err, "tokenreviews is forbidden"), CK_METRICS_REVIEW_FAILED;
	if (strcmp(token, "alice") && strcmp(token, "bob") && strcmp(token, "carol") &&
	    token[0] != 't') {
		*reason = ck_xstrdup("invalid bearer token");
		return CK_METRICS_REVIEW_NO;
	}
	user->name = ck_xstrdup(token);
	user->uid = ck_xasprintf("u-%s", token);
	user->groups = ck_xcalloc(1, sizeof(char *));
	user->groups[user->ngroups++] = ck_xstrdup("g");
	return CK_METRICS_REVIEW_YES;
}

static int fake_authorize(void *ud, const ck_metrics_user_t *user, const char *path,
                          const char *verb, char **reason, char **err)
{
	struct fake_rev *f = ud;
	atomic_fetch_add(&f->authz, 1);
	snprintf(f->last_path, sizeof(f->last_path), "%s", path);
	snprintf(f->last_verb, sizeof(f->last_verb), "%s", verb);
	ck_assert_int_eq((int)user->ngroups, 1);
	ck_assert_str_eq(user->groups[0], "g");
	if (strcmp(user->name, "carol") == 0)
		return ck_err_set(err, "subjectaccessreviews is forbidden"),
		       CK_METRICS_REVIEW_FAILED;
	if (strcmp(user->name, "alice") == 0 || user->name[0] == 't')
		return CK_METRICS_REVIEW_YES;
	*reason = ck_xstrdup("no RBAC policy matched");
	return CK_METRICS_REVIEW_NO;
}

/* GET https://127.0.0.1:port/path; returns the status, or -1 with *cc when no answer came. */
static long https_get(int port, const char *path, const char *authz, const char *cainfo,
                      const char *scheme, ck_sbuf_t *body, CURLcode *cc)
{
	CURL *c = curl_easy_init();
	ck_assert_ptr_nonnull(c);
	char *url = ck_xasprintf("%s://127.0.0.1:%d%s", scheme ? scheme : "https", port, path);
	struct curl_slist *hdr = NULL;
	if (authz != NULL) {
		char *h = ck_xasprintf("Authorization: %s", authz);
		hdr = curl_slist_append(hdr, h);
		free(h);
	}
	ck_sbuf_reset(body);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
	if (cainfo != NULL) {
		curl_easy_setopt(c, CURLOPT_CAINFO, cainfo);
	} else {
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	*cc = curl_easy_perform(c);
	long status = -1;
	if (*cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	ck_sbuf_cstr(body);
	curl_slist_free_all(hdr);
	curl_easy_cleanup(c);
	free(url);
	return status;
}

#define EXPECT_HTTPS(path, authz, want_status, want_body)                                          \
	do {                                                                                       \
		CURLcode cc_;                                                                      \
		long st_ = https_get(port, path, authz, NULL, NULL, &body, &cc_);                  \
		ck_assert_msg(cc_ == CURLE_OK, "%s: %s", path, curl_easy_strerror(cc_));           \
		ck_assert_msg(st_ == (want_status), "%s with %s: status %ld, want %d (%s)", path,  \
		              authz ? authz : "no token", st_, (int)(want_status),                 \
		              ck_sbuf_cstr(&body));                                                \
		if ((want_body) != NULL)                                                           \
			ck_assert_str_eq(ck_sbuf_cstr(&body), (const char *)(want_body));          \
	} while (0)

static void put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	fclose(f);
}

START_TEST(self_signed_certificate)
{
	char *cert = NULL, *key = NULL, *cert2 = NULL, *key2 = NULL, *err = NULL;
	ck_assert_int_eq(ck_metrics_i_self_signed("sample-controller-7d9f-x2", &cert, &key, &err),
	                 0);
	ck_assert_ptr_nonnull(strstr(cert, "-----BEGIN CERTIFICATE-----"));
	ck_assert_ptr_nonnull(strstr(key, "PRIVATE KEY-----"));

	gnutls_x509_crt_t crt;
	gnutls_datum_t d = {(unsigned char *)cert, (unsigned)strlen(cert)};
	ck_assert_int_eq(gnutls_x509_crt_init(&crt), 0);
	ck_assert_int_eq(gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM), 0);
	/* One year, starting now (a minute of slack). */
	time_t now = time(NULL);
	time_t nb = gnutls_x509_crt_get_activation_time(crt);
	time_t na = gnutls_x509_crt_get_expiration_time(crt);
	ck_assert_int_le(nb, now);
	ck_assert_int_ge(nb, now - 120);
	ck_assert_int_ge(na - nb, 365 * 24 * 3600);
	ck_assert_int_le(na - nb, 366 * 24 * 3600);
	/* SANs: localhost, 127.0.0.1, ::1 and the host name. */
	int dns_local = 0, dns_host = 0, ip4 = 0, ip6 = 0;
	for (unsigned i = 0;; i++) {
		char san[256];
		size_t len = sizeof(san);
		int t = gnutls_x509_crt_get_subject_alt_name(crt, i, san, &len, NULL);
		if (t == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
			break;
		ck_assert_int_ge(t, 0);
		if (t == GNUTLS_SAN_DNSNAME && len == 9 && memcmp(san, "localhost", 9) == 0)
			dns_local = 1;
		if (t == GNUTLS_SAN_DNSNAME && len == 25 &&
		    memcmp(san, "sample-controller-7d9f-x2", 25) == 0)
			dns_host = 1;
		if (t == GNUTLS_SAN_IPADDRESS && len == 4 && memcmp(san, "\x7f\0\0\x01", 4) == 0)
			ip4 = 1;
		if (t == GNUTLS_SAN_IPADDRESS && len == 16 &&
		    memcmp(san, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x01", 16) == 0)
			ip6 = 1;
	}
	ck_assert(dns_local && dns_host && ip4 && ip6);
	/* ECDSA P-256, not a CA, signed by itself (it verifies against itself). */
	unsigned bits = 0;
	ck_assert_int_eq(gnutls_x509_crt_get_pk_algorithm(crt, &bits), GNUTLS_PK_ECDSA);
	ck_assert_int_eq(bits, 256);
	unsigned critical = 0, ca = 1;
	ck_assert_int_eq(gnutls_x509_crt_get_basic_constraints(crt, &critical, &ca, NULL), 0);
	ck_assert_uint_eq(ca, 0);
	unsigned vst = 1;
	ck_assert_int_eq(
	    gnutls_x509_crt_verify(crt, &crt, 1, GNUTLS_VERIFY_ALLOW_UNSORTED_CHAIN, &vst), 0);
	gnutls_x509_crt_deinit(crt);

	/* The key is the certificate's: a temp dir pair loads as one. */
	char dir[] = "/tmp/test_metrics_cert_XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char *cp = ck_xasprintf("%s/tls.crt", dir), *kp = ck_xasprintf("%s/tls.key", dir);
	put_file(cp, cert);
	put_file(kp, key);
	char *lc = NULL, *lk = NULL;
	ck_assert_int_eq(ck_metrics_i_load_pair(dir, "tls.crt", "tls.key", &lc, &lk, &err), 0);
	ck_assert_str_eq(lc, cert);
	free(lc);
	free(lk);

	/* Each start makes a new key and serial; a bad host name is left out. */
	ck_assert_int_eq(ck_metrics_i_self_signed("bad name!", &cert2, &key2, &err), 0);
	ck_assert_str_ne(cert, cert2);
	ck_assert_str_ne(key, key2);

	/* A key that is not the certificate's is refused, naming both files. */
	put_file(kp, key2);
	ck_assert_int_eq(ck_metrics_i_load_pair(dir, "tls.crt", "tls.key", &lc, &lk, &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "tls.crt and "));
	ck_assert_ptr_null(lc);
	free(err);
	err = NULL;
	/* A missing file is named. */
	ck_assert_int_eq(ck_metrics_i_load_pair(dir, "nope.crt", "tls.key", &lc, &lk, &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "nope.crt: No such file or directory"));
	free(err);
	unlink(cp);
	unlink(kp);
	rmdir(dir);
	free(cp);
	free(kp);
	free(cert);
	free(key);
	free(cert2);
	free(key2);
}
END_TEST

START_TEST(server_tls)
{
	char *err = NULL;
	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	ck_metrics_gauge_set(ck_metrics_gauge_new(reg, "up_gauge", "Up.", &err), 1);
	ck_metrics_server_t *srv = NULL;
	/* Self-signed, no reviewer: TLS only. */
	ck_assert_int_eq(ck_metrics_server_start_secure("127.0.0.1:0", "--metrics-bind-address",
	                                                reg, NULL, &srv, &err),
	                 0);
	int port = ck_metrics_server_port(srv);
	ck_sbuf_t body = CK_SBUF_INIT;
	EXPECT_HTTPS("/metrics", NULL, 200,
	             "# HELP up_gauge Up.\n# TYPE up_gauge gauge\nup_gauge 1\n");
	/* No probes on a secure server. */
	EXPECT_HTTPS("/healthz", NULL, 404, "404 page not found\n");
	/* Plain HTTP on the TLS port gets no HTTP answer. */
	CURLcode cc;
	ck_assert_int_eq(https_get(port, "/metrics", NULL, NULL, "http", &body, &cc), -1);
	ck_assert_int_ne(cc, CURLE_OK);
	ck_metrics_server_stop(srv);

	/* A given certificate is the one served: curl verifies against it as the CA. */
	char dir[] = "/tmp/test_metrics_srv_XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char *cert = NULL, *key = NULL;
	ck_assert_int_eq(ck_metrics_i_self_signed(NULL, &cert, &key, &err), 0);
	char *cp = ck_xasprintf("%s/serving.pem", dir),
	     *kp = ck_xasprintf("%s/serving-key.pem", dir);
	put_file(cp, cert);
	put_file(kp, key);
	ck_metrics_secure_opts_t so = {
	    .cert_dir = dir, .cert_name = "serving.pem", .key_name = "serving-key.pem"};
	ck_assert_int_eq(ck_metrics_server_start_secure("127.0.0.1:0", "--metrics-bind-address",
	                                                reg, &so, &srv, &err),
	                 0);
	port = ck_metrics_server_port(srv);
	ck_assert_int_eq(https_get(port, "/metrics", NULL, cp, NULL, &body, &cc), 200);
	ck_metrics_server_stop(srv);
	/* ... and another self-signed one does not verify against it. */
	ck_assert_int_eq(ck_metrics_server_start_secure("127.0.0.1:0", "--metrics-bind-address",
	                                                reg, NULL, &srv, &err),
	                 0);
	port = ck_metrics_server_port(srv);
	ck_assert_int_eq(https_get(port, "/metrics", NULL, cp, NULL, &body, &cc), -1);
	ck_assert_int_eq(cc, CURLE_PEER_FAILED_VERIFICATION);
	ck_metrics_server_stop(srv);

	/* A missing certificate fails the start, naming the flag and the file. */
	so.cert_name = "missing.pem";
	srv = (ck_metrics_server_t *)&err;
	ck_assert_int_eq(ck_metrics_server_start_secure("127.0.0.1:0", "--metrics-bind-address",
	                                                reg, &so, &srv, &err),
	                 -1);
	ck_assert_ptr_null(srv);
	ck_assert_ptr_nonnull(strstr(err, "--metrics-bind-address \"127.0.0.1:0\": "));
	ck_assert_ptr_nonnull(strstr(err, "missing.pem: No such file or directory"));
	free(err);
	unlink(cp);
	unlink(kp);
	rmdir(dir);
	free(cp);
	free(kp);
	free(cert);
	free(key);
	ck_sbuf_free(&body);
	ck_metrics_registry_free(reg);
}
END_TEST

/* Writes text to dir/name by a rename, as an update of a mounted Secret appears. */
static void replace_file(const char *dir, const char *name, const char *text)
{
	char *tmp = ck_xasprintf("%s/.%s.tmp", dir, name), *path = ck_xasprintf("%s/%s", dir, name);
	put_file(tmp, text);
	ck_assert_int_eq(rename(tmp, path), 0);
	free(tmp);
	free(path);
}

/*
 * The certificate a new TLS connection to 127.0.0.1:port is served, as a new
 * string (curl's "Cert:" PEM), or NULL when there was no handshake.
 */
static char *served_cert(int port)
{
	CURL *c = curl_easy_init();
	ck_assert_ptr_nonnull(c);
	char *url = ck_xasprintf("https://127.0.0.1:%d/nothing", port);
	ck_sbuf_t body = CK_SBUF_INIT;
	char *pem = NULL;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
	curl_easy_setopt(c, CURLOPT_CERTINFO, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
	if (curl_easy_perform(c) == CURLE_OK) {
		struct curl_certinfo *ci = NULL;
		curl_easy_getinfo(c, CURLINFO_CERTINFO, &ci);
		for (int i = 0; ci != NULL && i < ci->num_of_certs && pem == NULL; i++)
			for (struct curl_slist *l = ci->certinfo[i]; l != NULL; l = l->next)
				if (strncmp(l->data, "Cert:", 5) == 0)
					pem = ck_xstrdup(l->data + 5);
	}
	curl_easy_cleanup(c);
	ck_sbuf_free(&body);
	free(url);
	return pem;
}

/* Polls until a new connection is served want (or 10 s passed); returns whether it was. */
static int served_becomes(int port, const char *want)
{
	for (int i = 0; i < 200; i++) {
		char *got = served_cert(port);
		int same = got != NULL && strcmp(got, want) == 0;
		free(got);
		if (same)
			return 1;
		usleep(50 * 1000);
	}
	return 0;
}

/*
 * Security finding k: the certificate was read once at start (and the self-signed
 * one expires after a year). Files replaced while the server runs are served to
 * new connections; a pair that does not load keeps the one in use; the
 * self-signed certificate is made again before it expires.
 */
START_TEST(server_tls_reloads_certificate)
{
	char *err = NULL;
	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	char dir[] = "/tmp/test_metrics_reload_XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char *c1, *k1, *c2, *k2;
	ck_assert_int_eq(ck_metrics_i_self_signed("one.example", &c1, &k1, &err), 0);
	ck_assert_int_eq(ck_metrics_i_self_signed("two.example", &c2, &k2, &err), 0);
	replace_file(dir, "tls.crt", c1);
	replace_file(dir, "tls.key", k1);
	ck_metrics_secure_opts_t so = {.cert_dir = dir, .reload_interval_ms = 50};
	ck_metrics_server_t *srv = NULL;
	ck_assert_int_eq(ck_metrics_server_start_secure("127.0.0.1:0", "--metrics-bind-address",
	                                                reg, &so, &srv, &err),
	                 0);
	int port = ck_metrics_server_port(srv);
	char *got = served_cert(port);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, c1);
	free(got);

	/* Replaced: new connections get the new pair. */
	replace_file(dir, "tls.key", k2);
	replace_file(dir, "tls.crt", c2);
	ck_assert_msg(served_becomes(port, c2), "the replaced certificate is never served");

	/* A key that does not match, then garbage: the current pair stays. */
	replace_file(dir, "tls.key", k1);
	usleep(300 * 1000);
	got = served_cert(port);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, c2);
	free(got);
	replace_file(dir, "tls.crt", "not a certificate\n");
	usleep(300 * 1000);
	got = served_cert(port);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, c2);
	free(got);
	/* Repaired: the good pair is served. */
	replace_file(dir, "tls.crt", c1);
	ck_assert_msg(served_becomes(port, c1), "the repaired pair is never served");
	ck_metrics_server_stop(srv);

	/* Self-signed: made again once fewer than 30 days are left. */
	ck_clk_fake_t clk;
	ck_clk_fake_init(&clk, 1, (int64_t)time(NULL) * 1000000000);
	ck_metrics_secure_opts_t ss = {.clock = &clk.base, .reload_interval_ms = 50};
	ck_assert_int_eq(ck_metrics_server_start_secure("127.0.0.1:0", "--metrics-bind-address",
	                                                reg, &ss, &srv, &err),
	                 0);
	port = ck_metrics_server_port(srv);
	char *first = served_cert(port);
	ck_assert_ptr_nonnull(first);
	ck_clk_fake_advance(&clk, (uint64_t)300 * 24 * 3600 * 1000000000);
	usleep(300 * 1000);
	got = served_cert(port);
	ck_assert_str_eq(got, first); /* 65 days left: kept */
	free(got);
	ck_clk_fake_advance(&clk, (uint64_t)40 * 24 * 3600 * 1000000000);
	int renewed = 0;
	for (int i = 0; i < 200 && !renewed; i++) {
		got = served_cert(port);
		renewed = got != NULL && strcmp(got, first) != 0;
		free(got);
		usleep(50 * 1000);
	}
	ck_assert_msg(renewed, "the self-signed certificate is not renewed 25 days before expiry");
	free(first);
	ck_metrics_server_stop(srv);

	const char *names[] = {"tls.crt", "tls.key"};
	for (size_t i = 0; i < CK_ARRAY_LEN(names); i++) {
		char *p = ck_xasprintf("%s/%s", dir, names[i]);
		unlink(p);
		free(p);
	}
	rmdir(dir);
	free(c1);
	free(k1);
	free(c2);
	free(k2);
	ck_metrics_registry_free(reg);
}
END_TEST

START_TEST(server_auth_statuses)
{
	char *err = NULL;
	struct fake_rev f = {0};
	ck_metrics_reviewer_t rv = {fake_authenticate, fake_authorize, &f};
	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	ck_metrics_gauge_set(ck_metrics_gauge_new(reg, "up_gauge", "Up.", &err), 1);
	ck_metrics_secure_opts_t so = {.reviewer = &rv};
	ck_metrics_server_t *srv = NULL;
	ck_assert_int_eq(ck_metrics_server_start_secure("127.0.0.1:0", "--metrics-bind-address",
	                                                reg, &so, &srv, &err),
	                 0);
	int port = ck_metrics_server_port(srv);
	ck_sbuf_t body = CK_SBUF_INIT;
	EXPECT_HTTPS("/metrics", NULL, 401, "Unauthorized\n");
	EXPECT_HTTPS("/metrics", "Bearer ", 401, "Unauthorized\n");
	EXPECT_HTTPS("/metrics", "Basic YWxpY2U6eA==", 401, "Unauthorized\n");
	ck_assert_int_eq(atomic_load(&f.authn), 0); /* no token: nothing to review */
	EXPECT_HTTPS("/metrics", "Bearer garbage", 401, "Unauthorized\n");
	EXPECT_HTTPS("/metrics", "Bearer alice", 200, NULL);
	/* The gate counts its reviews in the server's registry. */
	ck_assert_ptr_nonnull(strstr(ck_sbuf_cstr(&body),
	                             "# HELP up_gauge Up.\n# TYPE up_gauge gauge\nup_gauge 1\n"));
	ck_assert_ptr_nonnull(
	    strstr(ck_sbuf_cstr(&body), "\nmetrics_auth_token_reviews_total 2\n"));
	ck_assert_str_eq(f.last_path, "/metrics");
	ck_assert_str_eq(f.last_verb, "get");
	/* The scheme is case-insensitive, as in the apiserver. */
	EXPECT_HTTPS("/metrics", "bearer alice", 200, NULL);
	EXPECT_HTTPS("/metrics", "Bearer bob", 403, "Authorization denied for user bob\n");
	EXPECT_HTTPS("/metrics", "Bearer boom", 500, "Authentication failed\n");
	EXPECT_HTTPS("/metrics", "Bearer carol", 500, "Authorization for user carol failed\n");
	/* Other paths are not gated: they do not exist. */
	int before = atomic_load(&f.authn);
	EXPECT_HTTPS("/other", NULL, 404, "404 page not found\n");
	ck_assert_int_eq(atomic_load(&f.authn), before);
	ck_metrics_server_stop(srv);
	ck_sbuf_free(&body);
	ck_metrics_registry_free(reg);
}
END_TEST

/* One decision through the cache: returns the status. */
static int decide(ck_metrics_auth_t *a, const char *token)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	char *h = token ? ck_xasprintf("Bearer %s", token) : NULL;
	int retry = -1;
	int st = ck_metrics_i_auth_check(a, h, "/metrics", "get", &b, &retry);
	ck_assert_int_eq(retry > 0, st == 429);
	free(h);
	ck_sbuf_free(&b);
	return st;
}

START_TEST(auth_decision_cache)
{
	struct fake_rev f = {0};
	ck_metrics_reviewer_t rv = {fake_authenticate, fake_authorize, &f};
	ck_clk_fake_t clk;
	ck_clk_fake_init(&clk, 1000 * CK_NS_PER_SEC, 0);
	ck_metrics_secure_opts_t so = {.reviewer = &rv, .clock = &clk.base, .max_cached = 4};
	ck_metrics_auth_t *a = ck_metrics_i_auth_new(&so, NULL);

	/* Allowed: reviewed once, then served from the cache. */
	ck_assert_int_eq(decide(a, "alice"), 200);
	ck_assert_int_eq(decide(a, "alice"), 200);
	ck_assert_int_eq(atomic_load(&f.authn), 1);
	ck_assert_int_eq(atomic_load(&f.authz), 1);
	/* The token is cached 1 min, the allowed decision 5 min. */
	ck_clk_fake_advance(&clk, 61 * CK_NS_PER_SEC);
	ck_assert_int_eq(decide(a, "alice"), 200);
	ck_assert_int_eq(atomic_load(&f.authn), 2);
	ck_assert_int_eq(atomic_load(&f.authz), 1);
	ck_clk_fake_advance(&clk, 240 * CK_NS_PER_SEC);
	ck_assert_int_eq(decide(a, "alice"), 200);
	ck_assert_int_eq(atomic_load(&f.authz), 2);

	/* Denied: cached 30 s. */
	ck_assert_int_eq(decide(a, "bob"), 403);
	ck_assert_int_eq(decide(a, "bob"), 403);
	ck_assert_int_eq(atomic_load(&f.authz), 3);
	ck_clk_fake_advance(&clk, 31 * CK_NS_PER_SEC);
	ck_assert_int_eq(decide(a, "bob"), 403);
	ck_assert_int_eq(atomic_load(&f.authz), 4);

	/* An invalid token is cached too (1 min); a failed review is not. */
	int n = atomic_load(&f.authn);
	ck_assert_int_eq(decide(a, "garbage"), 401);
	ck_assert_int_eq(decide(a, "garbage"), 401);
	ck_assert_int_eq(atomic_load(&f.authn), n + 1);
	ck_assert_int_eq(decide(a, "boom"), 500);
	ck_assert_int_eq(decide(a, "boom"), 500);
	ck_assert_int_eq(atomic_load(&f.authn), n + 3);
	n = atomic_load(&f.authz);
	ck_assert_int_eq(decide(a, "carol"), 500);
	ck_assert_int_eq(decide(a, "carol"), 500);
	ck_assert_int_eq(atomic_load(&f.authz), n + 2);

	/* Bounded: with 4 entries, the 4 newest tokens stay, older ones are asked again. */
	for (int i = 0; i < 10; i++) {
		char t[16];
		snprintf(t, sizeof(t), "t%d", i);
		ck_assert_int_eq(decide(a, t), 200);
		ck_clk_fake_advance(&clk, CK_NS_PER_SEC);
	}
	n = atomic_load(&f.authn);
	ck_assert_int_eq(decide(a, "t9"), 200);
	ck_assert_int_eq(decide(a, "t6"), 200);
	ck_assert_int_eq(atomic_load(&f.authn), n);
	ck_assert_int_eq(decide(a, "t0"), 200);
	ck_assert_int_eq(atomic_load(&f.authn), n + 1);
	ck_metrics_i_auth_free(a);
}
END_TEST

/*
 * Reviews are rate-limited before they are asked: over the limit a request gets
 * 429 (no review made), cached decisions are still served, and a token once valid
 * is reviewed again on its own bucket, which made-up tokens cannot spend.
 */
START_TEST(auth_review_rate_limit)
{
	struct fake_rev f = {0};
	ck_metrics_reviewer_t rv = {fake_authenticate, fake_authorize, &f};
	ck_clk_fake_t clk;
	ck_clk_fake_init(&clk, 1000 * CK_NS_PER_SEC, 0);
	ck_metrics_secure_opts_t so = {
	    .reviewer = &rv, .clock = &clk.base, .review_qps = 2, .review_burst = 3};
	ck_metrics_registry_t *reg = ck_metrics_registry_new();
	ck_metrics_auth_t *a = ck_metrics_i_auth_new(&so, reg);

	ck_assert_int_eq(decide(a, "alice"), 200); /* one new-token review, one access review */
	/* A flood of made-up tokens: what is left of the burst is reviewed, the rest are
	 * 429 with no review asked. */
	int n401 = 0, n429 = 0;
	for (int i = 0; i < 100; i++) {
		char t[32];
		snprintf(t, sizeof(t), "x%d", i);
		int st = decide(a, t);
		n401 += st == 401;
		n429 += st == 429;
	}
	ck_assert_int_eq(n401, 2); /* alice took one of the burst of 3 */
	ck_assert_int_eq(n429, 98);
	unsigned long authn, authz, throttled;
	ck_metrics_i_auth_counts(a, &authn, &authz, &throttled);
	ck_assert_uint_eq(authn, 3);
	ck_assert_uint_eq(authz, 1);
	ck_assert_uint_eq(throttled, 98);
	ck_assert_int_eq(atomic_load(&f.authn), 3);
	/* The 429's answer: Retry-After is the time to the next token, rounded up. */
	ck_sbuf_t b = CK_SBUF_INIT;
	int retry = 0;
	ck_assert_int_eq(ck_metrics_i_auth_check(a, "Bearer y", "/metrics", "get", &b, &retry),
	                 429);
	ck_assert_int_eq(retry, 1);
	ck_assert_str_eq(ck_sbuf_cstr(&b), "Too many requests, please try again later.\n");
	ck_sbuf_free(&b);
	/* The real scraper is served from the cache meanwhile... */
	ck_assert_int_eq(decide(a, "alice"), 200);
	/* ...and once its token entry expired, it is reviewed again on the known bucket,
	 * which the flood did not touch, though the new-token bucket is still empty. */
	ck_clk_fake_advance(&clk, 61 * CK_NS_PER_SEC);
	for (int i = 0; i < 200; i++) {
		char t[32];
		snprintf(t, sizeof(t), "z%d", i);
		decide(a, t);
	}
	ck_assert_int_eq(decide(a, "z-last"), 429);
	ck_assert_int_eq(decide(a, "alice"), 200);
	ck_assert_int_eq(atomic_load(&f.authn), 3 + 3 + 1);
	/* A new valid caller during the flood waits its turn like everyone else. */
	ck_assert_int_eq(decide(a, "t1"), 429);
	ck_clk_fake_advance(&clk, CK_NS_PER_SEC);
	ck_assert_int_eq(decide(a, "t1"), 200);
	/* The counters are in the registry. */
	ck_sbuf_t out = CK_SBUF_INIT;
	ck_metrics_registry_render(reg, &out);
	ck_assert_ptr_nonnull(strstr(ck_sbuf_cstr(&out), "metrics_auth_token_reviews_total 8\n"));
	ck_assert_ptr_nonnull(strstr(ck_sbuf_cstr(&out), "metrics_auth_access_reviews_total 2\n"));
	ck_assert_ptr_nonnull(strstr(ck_sbuf_cstr(&out), "metrics_auth_throttled_total 298\n"));
	ck_sbuf_free(&out);
	ck_metrics_i_auth_free(a);
	ck_metrics_registry_free(reg);
}
END_TEST

/*
 * Invalid tokens and denials are bounded apart from valid tokens and allowed
 * requests: any number of made-up tokens leaves the real scrapers' entries cached.
 */
START_TEST(auth_bad_tokens_do_not_evict)
{
	struct fake_rev f = {0};
	ck_metrics_reviewer_t rv = {fake_authenticate, fake_authorize, &f};
	ck_clk_fake_t clk;
	ck_clk_fake_init(&clk, 1000 * CK_NS_PER_SEC, 0);
	ck_metrics_secure_opts_t so = {
	    .reviewer = &rv, .clock = &clk.base, .max_cached = 4, .review_qps = -1};
	ck_metrics_auth_t *a = ck_metrics_i_auth_new(&so, NULL);
	ck_assert_int_eq(decide(a, "alice"), 200);
	ck_assert_int_eq(decide(a, "t1"), 200);
	ck_assert_int_eq(decide(a, "bob"), 403);
	for (int i = 0; i < 1000; i++) {
		char t[32];
		snprintf(t, sizeof(t), "x%d", i);
		ck_assert_int_eq(decide(a, t), 401);
	}
	int n = atomic_load(&f.authn), m = atomic_load(&f.authz);
	ck_assert_int_eq(decide(a, "alice"), 200);
	ck_assert_int_eq(decide(a, "t1"), 200);
	ck_assert_int_eq(decide(a, "bob"), 403);
	ck_assert_int_eq(atomic_load(&f.authn), n);
	ck_assert_int_eq(atomic_load(&f.authz), m);
	/* Invalid ones are still cached, 4 of them: the last is, the first was evicted. */
	ck_assert_int_eq(decide(a, "x999"), 401);
	ck_assert_int_eq(atomic_load(&f.authn), n);
	ck_assert_int_eq(decide(a, "x0"), 401);
	ck_assert_int_eq(atomic_load(&f.authn), n + 1);
	ck_metrics_i_auth_free(a);
}
END_TEST

static void curl_setup(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}
static void curl_teardown(void)
{
	curl_global_cleanup();
}

Suite *suite_metrics(void)
{
	Suite *s = suite_create("metrics");
	TCase *reg = tcase_create("registry");
	tcase_set_timeout(reg, 120);
	tcase_add_test(reg, render_exact);
	tcase_add_test(reg, label_escaping);
	tcase_add_test(reg, value_format_like_go);
	tcase_add_test(reg, registration_errors);
	tcase_add_test(reg, concurrent_updates_add_up);
	tcase_add_test(reg, process_collector_fixture);
	tcase_add_test(reg, process_collector_real);
	tcase_add_test(reg, heap_collector);
	suite_add_tcase(s, reg);

	TCase *srv = tcase_create("server");
	tcase_add_checked_fixture(srv, curl_setup, curl_teardown);
	tcase_set_timeout(srv, 120);
	tcase_add_test(srv, prom_checker_rejects_bad_text);
	tcase_add_test(srv, server_metrics_parse);
	tcase_add_test(srv, server_probes);
	tcase_add_test(srv, server_one_address_both);
	tcase_add_test(srv, server_disabled_and_bad_addresses);
	tcase_add_test(srv, server_survives_odd_requests);
	tcase_add_test(srv, server_idle_flood_from_one_address);
	tcase_add_test(srv, self_signed_certificate);
	tcase_add_test(srv, server_tls);
	tcase_add_test(srv, server_tls_reloads_certificate);
	tcase_add_test(srv, server_auth_statuses);
	tcase_add_test(srv, auth_decision_cache);
	tcase_add_test(srv, auth_review_rate_limit);
	tcase_add_test(srv, auth_bad_tokens_do_not_evict);
	suite_add_tcase(s, srv);
	return s;
}
