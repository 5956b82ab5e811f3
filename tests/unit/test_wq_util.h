/* Helpers shared by the pkg/workqueue unit tests (the plain and the priority
 * queue): moving a fake clock, reading the queue's metrics. */
#ifndef CSC_TEST_WQ_UTIL_H
#define CSC_TEST_WQ_UTIL_H

#include <ckube/base.h>
#include <ckube/log.h>
#include <ckube/workqueue.h>

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MS ((int64_t)CK_NS_PER_MS)

static inline void advance(ck_wq_t *q, ck_clk_fake_t *c, int64_t ns)
{
	ck_clk_fake_advance(c, (uint64_t)ns);
	ck_wq_clock_changed(q);
}

/* The queue's metrics text; a new string. */
static inline char *scrape_text(ck_wq_t *q)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_wq_metrics_write(q, &b);
	char *s = ck_xstrdup(ck_sbuf_cstr(&b));
	ck_sbuf_free(&b);
	return s;
}

/* The value of the sample line `prefix` + " ", or -1 if there is none. */
static inline double metric(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);
	for (const char *p = text; p != NULL && *p != '\0';) {
		if (strncmp(p, prefix, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return -1;
}

static inline double scrape(ck_wq_t *q, const char *prefix)
{
	char *s = scrape_text(q);
	double v = metric(s, prefix);
	free(s);
	return v;
}

/* Traces key into a fresh unlinked file; returns its fd for trace_stop. */
static inline int trace_start(const char *key)
{
	char path[] = "/tmp/test_wq_trace_XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_log_set_fd(fd);
	ck_assert_int_eq(ck_log_set_trace_key(key, NULL), 0);
	return fd;
}

/* Ends the trace of trace_start and reads what it wrote into log (len bytes). */
static inline void trace_stop(int fd, char *log, size_t len)
{
	ck_log_set_trace_key(NULL, NULL);
	ck_log_set_fd(2);
	ssize_t n = pread(fd, log, len - 1, 0);
	close(fd);
	ck_assert_int_gt(n, 0);
	log[n] = '\0';
}

/* Each of the n wanted texts, in order, right after a line's prefix in log.
 * Returns what follows the last one. */
static inline const char *trace_expect(const char *log, const char *prefix, const char *const *want,
                                       size_t n)
{
	const char *p = log;
	for (size_t i = 0; i < n; i++) {
		p = strstr(p, prefix);
		ck_assert_msg(p != NULL, "line %zu (%s) missing in:\n%s", i, want[i], log);
		p += strlen(prefix);
		ck_assert_msg(strncmp(p, want[i], strlen(want[i])) == 0,
		              "line %zu: want %s in:\n%s", i, want[i], log);
	}
	return p;
}

#endif
