/* Helpers shared by the pkg/workqueue unit tests (the plain and the priority
 * queue): moving a fake clock, reading the queue's metrics. */
#ifndef CSC_TEST_WQ_UTIL_H
#define CSC_TEST_WQ_UTIL_H

#include <ckube/base.h>
#include <ckube/workqueue.h>

#include <stdlib.h>
#include <string.h>

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

#endif
