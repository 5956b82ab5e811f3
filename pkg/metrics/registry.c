/*
 * metrics registry: families, children, atomics, and the text exposition.
 *
 * Design note. A family keeps its children in a fixed table of hash chains whose
 * heads are atomic pointers. A child is fully built before it is published with a
 * release store at the head of its chain and is never unlinked before the registry
 * is freed, so readers (lookups, the renderer) walk chains with acquire loads and no
 * lock. Only inserting takes the family's mutex, which also makes the "look again
 * under the lock" step rule out duplicates.
 *
 * Values are doubles stored as their bit patterns in 64-bit atomics and changed
 * with compare-and-swap. A counter also has an integer part so that the common
 * inc() is a single fetch_add. A histogram stores per-bucket (not cumulative)
 * counts; the renderer adds them up and derives _count from the same loads, so
 * +Inf and _count always agree within one scrape.
 */
#include "pkg/base/hash.h"
#include "pkg/metrics/metrics_internal.h"
#include <ckube/metrics.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHAINS 64

struct family;

struct child {
	struct child *next; /* immutable once published */
	const struct family *fam;
	uint64_t hash;
	char **values;
	_Atomic uint64_t ival;     /* counter: integer part */
	_Atomic uint64_t bits;     /* counter: fractional part; gauge: value; histogram: sum */
	_Atomic uint64_t counts[]; /* histogram: nbuckets + 1 (the last is +Inf) */
};

struct family {
	char *name;
	char *help;
	ck_metrics_type_t type;
	size_t nlabels;
	char **labels;
	size_t nbuckets;
	double *buckets;
	pthread_mutex_t insert_lock;
	struct child *_Atomic chains[CHAINS];
};

struct collector {
	ck_metrics_collector_fn fn;
	void *ud;
	void (*free_ud)(void *); /* NULL when the caller owns ud */
};

struct ck_metrics_registry {
	pthread_mutex_t lock; /* families and collectors arrays */
	struct family **families;
	size_t nfamilies;
	struct collector *collectors;
	size_t ncollectors;
};

static const double default_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

static uint64_t dbits(double v)
{
	uint64_t u;
	memcpy(&u, &v, sizeof(u));
	return u;
}

static double bitsd(uint64_t u)
{
	double v;
	memcpy(&v, &u, sizeof(v));
	return v;
}

static void atomic_add_double(_Atomic uint64_t *a, double v)
{
	uint64_t old = atomic_load_explicit(a, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(a, &old, dbits(bitsd(old) + v),
	                                              memory_order_relaxed, memory_order_relaxed))
		;
}

/* --- Names and text helpers. --- */

static int valid_name(const char *s, int allow_colon)
{
	if (s == NULL || *s == '\0')
		return 0;
	for (const char *p = s; *p; p++) {
		int c = (unsigned char)*p;
		int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
		            (allow_colon && c == ':');
		if (!alpha && !(p != s && c >= '0' && c <= '9'))
			return 0;
	}
	return 1;
}

/* Length of a valid UTF-8 sequence at p (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	size_t len;
	uint32_t c, min;
	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xC2 && p[0] <= 0xDF)
		len = 2, c = p[0] & 0x1F, min = 0x80;
	else if (p[0] >= 0xE0 && p[0] <= 0xEF)
		len = 3, c = p[0] & 0x0F, min = 0x800;
	else if (p[0] >= 0xF0 && p[0] <= 0xF4)
		len = 4, c = p[0] & 0x07, min = 0x10000;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		c = (c << 6) | (p[i] & 0x3F);
	}
	if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
		return 0;
	return len;
}

/*
 * Appends s escaped for the text format: backslash and newline always, the double
 * quote inside label values. Invalid UTF-8 becomes U+FFFD, which parsers accept.
 */
static void put_escaped(ck_sbuf_t *out, const char *s, int quote)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t n = strlen((const char *)p);
	while (n > 0) {
		size_t len = utf8_len(p, n);
		if (len == 0) {
			ck_sbuf_puts(out, "\xef\xbf\xbd");
			p++, n--;
			continue;
		}
		if (*p == '\\')
			ck_sbuf_puts(out, "\\\\");
		else if (*p == '\n')
			ck_sbuf_puts(out, "\\n");
		else if (*p == '"' && quote)
			ck_sbuf_puts(out, "\\\"");
		else
			ck_sbuf_append(out, p, len);
		p += len, n -= len;
	}
}

void ck_metrics_write_value(ck_sbuf_t *out, double v)
{
	if (isnan(v)) {
		ck_sbuf_puts(out, "NaN");
		return;
	}
	if (isinf(v)) {
		ck_sbuf_puts(out, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	if (v == 0) {
		ck_sbuf_putc(out, '0');
		return;
	}
	/*
	 * Go's strconv.FormatFloat(v, 'g', -1, 64): the fewest digits that read back
	 * exactly, in %e form when the exponent is below -4 or at least 6 (Go uses 6
	 * for the shortest form, not the digit count as C's %g would).
	 */
	char e[40];
	int prec;
	for (prec = 1; prec < 17; prec++) {
		snprintf(e, sizeof(e), "%.*e", prec - 1, v);
		if (strtod(e, NULL) == v)
			break;
	}
	snprintf(e, sizeof(e), "%.*e", prec - 1, v);
	int exp = atoi(strchr(e, 'e') + 1);
	if (exp < -4 || exp >= 6) {
		ck_sbuf_puts(out, e);
		return;
	}
	int decimals = prec - 1 - exp;
	ck_sbuf_printf(out, "%.*f", decimals > 0 ? decimals : 0, v);
}

static const char *type_name(ck_metrics_type_t t)
{
	switch (t) {
	case CK_METRICS_COUNTER:
		return "counter";
	case CK_METRICS_GAUGE:
		return "gauge";
	case CK_METRICS_HISTOGRAM:
		return "histogram";
	case CK_METRICS_UNTYPED:
		break;
	}
	return "untyped";
}

void ck_metrics_write_header(ck_sbuf_t *out, const char *name, const char *help,
                             ck_metrics_type_t type)
{
	ck_sbuf_printf(out, "# HELP %s ", name);
	put_escaped(out, help, 0);
	ck_sbuf_printf(out, "\n# TYPE %s %s\n", name, type_name(type));
}

static void put_labels(ck_sbuf_t *out, const ck_metrics_label_t *labels, size_t n)
{
	if (n == 0)
		return;
	ck_sbuf_putc(out, '{');
	for (size_t i = 0; i < n; i++) {
		ck_sbuf_printf(out, "%s%s=\"", i ? "," : "", labels[i].name);
		put_escaped(out, labels[i].value, 1);
		ck_sbuf_putc(out, '"');
	}
	ck_sbuf_putc(out, '}');
}

void ck_metrics_write_sample(ck_sbuf_t *out, const char *name, const ck_metrics_label_t *labels,
                             size_t nlabels, double value)
{
	ck_sbuf_puts(out, name);
	put_labels(out, labels, nlabels);
	ck_sbuf_putc(out, ' ');
	ck_metrics_write_value(out, value);
	ck_sbuf_putc(out, '\n');
}

/* --- Registry and families. --- */

ck_metrics_registry_t *ck_metrics_registry_new(void)
{
	ck_metrics_registry_t *reg = ck_xcalloc(1, sizeof(*reg));
	pthread_mutex_init(&reg->lock, NULL);
	return reg;
}

static void child_free(struct child *c, size_t nlabels)
{
	for (size_t i = 0; i < nlabels; i++)
		free(c->values[i]);
	free(c->values);
	free(c);
}

static void family_free(struct family *f)
{
	for (size_t i = 0; i < CHAINS; i++) {
		struct child *c = atomic_load(&f->chains[i]);
		while (c != NULL) {
			struct child *next = c->next;
			child_free(c, f->nlabels);
			c = next;
		}
	}
	for (size_t i = 0; i < f->nlabels; i++)
		free(f->labels[i]);
	free(f->labels);
	free(f->buckets);
	free(f->name);
	free(f->help);
	pthread_mutex_destroy(&f->insert_lock);
	free(f);
}

void ck_metrics_registry_free(ck_metrics_registry_t *reg)
{
	if (reg == NULL)
		return;
	for (size_t i = 0; i < reg->nfamilies; i++)
		family_free(reg->families[i]);
	free(reg->families);
	for (size_t i = 0; i < reg->ncollectors; i++)
		if (reg->collectors[i].free_ud != NULL)
			reg->collectors[i].free_ud(reg->collectors[i].ud);
	free(reg->collectors);
	pthread_mutex_destroy(&reg->lock);
	free(reg);
}

static uint64_t hash_values(size_t n, const char *const *values)
{
	uint64_t h = 0;
	for (size_t i = 0; i < n; i++) {
		const char *v = values[i] ? values[i] : "";
		h = ck_hash_combine(h, ck_hash_bytes(v, strlen(v)));
	}
	return h;
}

/* Returns a new copy of s with each invalid UTF-8 byte replaced by U+FFFD. */
static char *utf8_sanitize(const char *s)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t n = strlen((const char *)p);
	while (n > 0) {
		size_t len = utf8_len(p, n);
		if (len == 0) {
			ck_sbuf_puts(&b, "\xef\xbf\xbd");
			p++, n--;
		} else {
			ck_sbuf_append(&b, p, len);
			p += len, n -= len;
		}
	}
	return ck_sbuf_steal(&b);
}

/* Takes values (an array of nlabels new strings); returns a new unpublished child. */
static struct child *child_new(const struct family *f, uint64_t hash, char **values)
{
	size_t ncounts = f->type == CK_METRICS_HISTOGRAM ? f->nbuckets + 1 : 0;
	struct child *c = ck_xcalloc(1, sizeof(*c) + ncounts * sizeof(c->counts[0]));
	c->fam = f;
	c->hash = hash;
	c->values = values;
	atomic_init(&c->ival, 0);
	atomic_init(&c->bits, dbits(0));
	for (size_t i = 0; i < ncounts; i++)
		atomic_init(&c->counts[i], 0);
	return c;
}

static int values_equal(const struct family *f, const struct child *c, const char *const *values)
{
	for (size_t i = 0; i < f->nlabels; i++)
		if (strcmp(c->values[i], values[i] ? values[i] : "") != 0)
			return 0;
	return 1;
}

static struct child *chain_find(struct family *f, uint64_t hash, const char *const *values)
{
	struct child *c = atomic_load_explicit(&f->chains[hash % CHAINS], memory_order_acquire);
	for (; c != NULL; c = c->next)
		if (c->hash == hash && values_equal(f, c, values))
			return c;
	return NULL;
}

/*
 * Returns the child for values, creating it on first use. Children store their
 * values sanitized (valid UTF-8), so a lookup with invalid UTF-8 never hits the
 * lock-free path and always takes the slow one, which is correct, merely slower.
 */
static struct child *family_child(struct family *f, size_t nvalues, const char *const *values)
{
	if (nvalues != f->nlabels)
		ck_fatal("metrics: %s has %zu labels, %zu values given", f->name, f->nlabels,
		         nvalues);
	struct child *c = chain_find(f, hash_values(nvalues, values), values);
	if (c != NULL)
		return c;
	char **clean = ck_xcalloc(nvalues ? nvalues : 1, sizeof(char *));
	for (size_t i = 0; i < nvalues; i++)
		clean[i] = utf8_sanitize(values[i]);
	uint64_t hash = hash_values(nvalues, (const char *const *)clean);
	pthread_mutex_lock(&f->insert_lock);
	c = chain_find(f, hash, (const char *const *)clean);
	if (c == NULL) {
		c = child_new(f, hash, clean);
		clean = NULL;
		size_t slot = hash % CHAINS;
		c->next = atomic_load_explicit(&f->chains[slot], memory_order_relaxed);
		atomic_store_explicit(&f->chains[slot], c, memory_order_release);
	}
	pthread_mutex_unlock(&f->insert_lock);
	if (clean != NULL) {
		for (size_t i = 0; i < nvalues; i++)
			free(clean[i]);
		free(clean);
	}
	return c;
}

static struct family *family_add(ck_metrics_registry_t *reg, ck_metrics_type_t type,
                                 const char *name, const char *help, size_t nlabels,
                                 const char *const *labels, const double *buckets, size_t nbuckets,
                                 char **err)
{
	struct family *f = NULL;
	if (!valid_name(name, 1)) {
		ck_err_set(err, "metric \"%s\": invalid metric name", name ? name : "");
		return NULL;
	}
	for (size_t i = 0; i < nlabels; i++) {
		if (!valid_name(labels[i], 0) || strncmp(labels[i], "__", 2) == 0) {
			ck_err_set(err, "metric %s: invalid label name \"%s\"", name,
			           labels[i] ? labels[i] : "");
			return NULL;
		}
		if (type == CK_METRICS_HISTOGRAM && strcmp(labels[i], "le") == 0) {
			ck_err_set(err, "metric %s: label \"le\" is reserved in histograms", name);
			return NULL;
		}
		for (size_t j = 0; j < i; j++) {
			if (strcmp(labels[i], labels[j]) == 0) {
				ck_err_set(err, "metric %s: duplicate label name \"%s\"", name,
				           labels[i]);
				return NULL;
			}
		}
	}
	if (type == CK_METRICS_HISTOGRAM) {
		if (buckets == NULL || nbuckets == 0) {
			buckets = default_buckets;
			nbuckets = CK_ARRAY_LEN(default_buckets);
		}
		if (isinf(buckets[nbuckets - 1]) && buckets[nbuckets - 1] > 0)
			nbuckets--; /* +Inf is always there */
		for (size_t i = 0; i < nbuckets; i++) {
			if (!isfinite(buckets[i]) || (i > 0 && buckets[i] <= buckets[i - 1])) {
				ck_err_set(
				    err,
				    "metric %s: buckets must be finite and strictly increasing "
				    "(bucket %zu)",
				    name, i);
				return NULL;
			}
		}
	}

	pthread_mutex_lock(&reg->lock);
	for (size_t i = 0; i < reg->nfamilies; i++) {
		if (strcmp(reg->families[i]->name, name) == 0) {
			pthread_mutex_unlock(&reg->lock);
			ck_err_set(err, "metric %s: already registered", name);
			return NULL;
		}
	}
	f = ck_xcalloc(1, sizeof(*f));
	f->name = ck_xstrdup(name);
	f->help = ck_xstrdup(help ? help : "");
	f->type = type;
	f->nlabels = nlabels;
	f->labels = ck_xcalloc(nlabels ? nlabels : 1, sizeof(char *));
	for (size_t i = 0; i < nlabels; i++)
		f->labels[i] = ck_xstrdup(labels[i]);
	if (type == CK_METRICS_HISTOGRAM) {
		f->nbuckets = nbuckets;
		f->buckets = ck_xcalloc(nbuckets ? nbuckets : 1, sizeof(double));
		if (nbuckets)
			memcpy(f->buckets, buckets, nbuckets * sizeof(double));
	}
	pthread_mutex_init(&f->insert_lock, NULL);
	for (size_t i = 0; i < CHAINS; i++)
		atomic_init(&f->chains[i], NULL);
	reg->families = ck_xrealloc(reg->families, (reg->nfamilies + 1) * sizeof(*reg->families));
	reg->families[reg->nfamilies++] = f;
	pthread_mutex_unlock(&reg->lock);
	return f;
}

/*
 * The typed handles are the family (for vecs) or the child (for series), behind
 * distinct incomplete types so that the compiler keeps a gauge from being passed
 * as a counter.
 */
ck_metrics_counter_t *ck_metrics_counter_new(ck_metrics_registry_t *reg, const char *name,
                                             const char *help, char **err)
{
	struct family *f = family_add(reg, CK_METRICS_COUNTER, name, help, 0, NULL, NULL, 0, err);
	return f ? (ck_metrics_counter_t *)family_child(f, 0, NULL) : NULL;
}

ck_metrics_gauge_t *ck_metrics_gauge_new(ck_metrics_registry_t *reg, const char *name,
                                         const char *help, char **err)
{
	struct family *f = family_add(reg, CK_METRICS_GAUGE, name, help, 0, NULL, NULL, 0, err);
	return f ? (ck_metrics_gauge_t *)family_child(f, 0, NULL) : NULL;
}

ck_metrics_histogram_t *ck_metrics_histogram_new(ck_metrics_registry_t *reg, const char *name,
                                                 const char *help, const double *buckets,
                                                 size_t nbuckets, char **err)
{
	struct family *f =
	    family_add(reg, CK_METRICS_HISTOGRAM, name, help, 0, NULL, buckets, nbuckets, err);
	return f ? (ck_metrics_histogram_t *)family_child(f, 0, NULL) : NULL;
}

ck_metrics_counter_vec_t *ck_metrics_counter_vec_new(ck_metrics_registry_t *reg, const char *name,
                                                     const char *help, size_t nlabels,
                                                     const char *const *labels, char **err)
{
	return (ck_metrics_counter_vec_t *)family_add(reg, CK_METRICS_COUNTER, name, help, nlabels,
	                                              labels, NULL, 0, err);
}

ck_metrics_gauge_vec_t *ck_metrics_gauge_vec_new(ck_metrics_registry_t *reg, const char *name,
                                                 const char *help, size_t nlabels,
                                                 const char *const *labels, char **err)
{
	return (ck_metrics_gauge_vec_t *)family_add(reg, CK_METRICS_GAUGE, name, help, nlabels,
	                                            labels, NULL, 0, err);
}

ck_metrics_histogram_vec_t *ck_metrics_histogram_vec_new(ck_metrics_registry_t *reg,
                                                         const char *name, const char *help,
                                                         size_t nlabels, const char *const *labels,
                                                         const double *buckets, size_t nbuckets,
                                                         char **err)
{
	return (ck_metrics_histogram_vec_t *)family_add(reg, CK_METRICS_HISTOGRAM, name, help,
	                                                nlabels, labels, buckets, nbuckets, err);
}

ck_metrics_counter_t *ck_metrics_counter_vec_get(ck_metrics_counter_vec_t *vec, size_t nvalues,
                                                 const char *const *values)
{
	return (ck_metrics_counter_t *)family_child((struct family *)vec, nvalues, values);
}

ck_metrics_gauge_t *ck_metrics_gauge_vec_get(ck_metrics_gauge_vec_t *vec, size_t nvalues,
                                             const char *const *values)
{
	return (ck_metrics_gauge_t *)family_child((struct family *)vec, nvalues, values);
}

ck_metrics_histogram_t *ck_metrics_histogram_vec_get(ck_metrics_histogram_vec_t *vec,
                                                     size_t nvalues, const char *const *values)
{
	return (ck_metrics_histogram_t *)family_child((struct family *)vec, nvalues, values);
}

/* --- Updates. --- */

void ck_metrics_counter_inc(ck_metrics_counter_t *c)
{
	atomic_fetch_add_explicit(&((struct child *)c)->ival, 1, memory_order_relaxed);
}

void ck_metrics_counter_add(ck_metrics_counter_t *c, double v)
{
	struct child *ch = (struct child *)c;
	if (!(v >= 0)) /* negative or NaN: a counter never goes down */
		return;
	/* Whole numbers below 2^53 take the integer fast path (the range check comes
	 * first: casting a larger double to uint64_t is undefined). */
	if (v < 9007199254740992.0 && v == (double)(uint64_t)v)
		atomic_fetch_add_explicit(&ch->ival, (uint64_t)v, memory_order_relaxed);
	else
		atomic_add_double(&ch->bits, v);
}

double ck_metrics_counter_value(const ck_metrics_counter_t *c)
{
	struct child *ch = (struct child *)c;
	return (double)atomic_load_explicit(&ch->ival, memory_order_relaxed) +
	       bitsd(atomic_load_explicit(&ch->bits, memory_order_relaxed));
}

void ck_metrics_gauge_set(ck_metrics_gauge_t *g, double v)
{
	atomic_store_explicit(&((struct child *)g)->bits, dbits(v), memory_order_relaxed);
}

void ck_metrics_gauge_add(ck_metrics_gauge_t *g, double v)
{
	atomic_add_double(&((struct child *)g)->bits, v);
}

void ck_metrics_gauge_inc(ck_metrics_gauge_t *g)
{
	ck_metrics_gauge_add(g, 1);
}

void ck_metrics_gauge_dec(ck_metrics_gauge_t *g)
{
	ck_metrics_gauge_add(g, -1);
}

double ck_metrics_gauge_value(const ck_metrics_gauge_t *g)
{
	return bitsd(atomic_load_explicit(&((struct child *)g)->bits, memory_order_relaxed));
}

void ck_metrics_histogram_observe(ck_metrics_histogram_t *h, double v)
{
	struct child *c = (struct child *)h;
	const struct family *f = c->fam;
	/* Buckets are few (about a dozen): a linear scan beats a binary search here. */
	size_t i = 0;
	while (i < f->nbuckets && !(v <= f->buckets[i]))
		i++;
	atomic_fetch_add_explicit(&c->counts[i], 1, memory_order_relaxed);
	atomic_add_double(&c->bits, v);
}

unsigned long long ck_metrics_histogram_count(const ck_metrics_histogram_t *h)
{
	struct child *c = (struct child *)h;
	unsigned long long n = 0;
	for (size_t i = 0; i <= c->fam->nbuckets; i++)
		n += atomic_load_explicit(&c->counts[i], memory_order_relaxed);
	return n;
}

/* --- Collectors and rendering. --- */

void metrics_registry_add_collector_owned(ck_metrics_registry_t *reg, ck_metrics_collector_fn fn,
                                          void *ud, void (*free_ud)(void *))
{
	pthread_mutex_lock(&reg->lock);
	reg->collectors =
	    ck_xrealloc(reg->collectors, (reg->ncollectors + 1) * sizeof(*reg->collectors));
	reg->collectors[reg->ncollectors++] = (struct collector){fn, ud, free_ud};
	pthread_mutex_unlock(&reg->lock);
}

void ck_metrics_registry_add_collector(ck_metrics_registry_t *reg, ck_metrics_collector_fn fn,
                                       void *ud)
{
	metrics_registry_add_collector_owned(reg, fn, ud, NULL);
}

static int family_cmp(const void *a, const void *b)
{
	const struct family *fa = *(struct family *const *)a, *fb = *(struct family *const *)b;
	return strcmp(fa->name, fb->name);
}

static int child_cmp(const void *a, const void *b, void *nlabels)
{
	const struct child *ca = *(struct child *const *)a, *cb = *(struct child *const *)b;
	for (size_t i = 0; i < *(size_t *)nlabels; i++) {
		int r = strcmp(ca->values[i], cb->values[i]);
		if (r != 0)
			return r;
	}
	return 0;
}

static void render_child(ck_sbuf_t *out, const struct family *f, const struct child *c,
                         ck_metrics_label_t *labels)
{
	for (size_t i = 0; i < f->nlabels; i++)
		labels[i] = (ck_metrics_label_t){f->labels[i], c->values[i]};
	if (f->type == CK_METRICS_COUNTER) {
		ck_metrics_write_sample(out, f->name, labels, f->nlabels,
		                        ck_metrics_counter_value((const ck_metrics_counter_t *)c));
		return;
	}
	if (f->type != CK_METRICS_HISTOGRAM) {
		ck_metrics_write_sample(out, f->name, labels, f->nlabels,
		                        ck_metrics_gauge_value((const ck_metrics_gauge_t *)c));
		return;
	}
	ck_sbuf_t name = CK_SBUF_INIT, le = CK_SBUF_INIT;
	uint64_t cumulative = 0;
	ck_sbuf_printf(&name, "%s_bucket", f->name);
	for (size_t i = 0; i <= f->nbuckets; i++) {
		cumulative += atomic_load_explicit(&c->counts[i], memory_order_relaxed);
		ck_sbuf_reset(&le);
		if (i < f->nbuckets)
			ck_metrics_write_value(&le, f->buckets[i]);
		else
			ck_sbuf_puts(&le, "+Inf");
		labels[f->nlabels] = (ck_metrics_label_t){"le", ck_sbuf_cstr(&le)};
		ck_metrics_write_sample(out, name.data, labels, f->nlabels + 1, (double)cumulative);
	}
	ck_sbuf_reset(&name);
	ck_sbuf_printf(&name, "%s_sum", f->name);
	ck_metrics_write_sample(out, name.data, labels, f->nlabels,
	                        bitsd(atomic_load_explicit(&c->bits, memory_order_relaxed)));
	ck_sbuf_reset(&name);
	ck_sbuf_printf(&name, "%s_count", f->name);
	ck_metrics_write_sample(out, name.data, labels, f->nlabels, (double)cumulative);
	ck_sbuf_free(&name);
	ck_sbuf_free(&le);
}

static void render_family(ck_sbuf_t *out, struct family *f)
{
	size_t n = 0, cap = 16;
	struct child **kids = ck_xmalloc(cap * sizeof(*kids));
	for (size_t i = 0; i < CHAINS; i++) {
		for (struct child *c = atomic_load_explicit(&f->chains[i], memory_order_acquire);
		     c != NULL; c = c->next) {
			if (n == cap)
				kids = ck_xrealloc(kids, (cap *= 2) * sizeof(*kids));
			kids[n++] = c;
		}
	}
	/* A vec with no child yet prints nothing, as Prometheus' Go client does. */
	if (n > 0) {
		qsort_r(kids, n, sizeof(*kids), child_cmp, &f->nlabels);
		ck_metrics_write_header(out, f->name, f->help, f->type);
		ck_metrics_label_t *labels = ck_xcalloc(f->nlabels + 1, sizeof(*labels));
		for (size_t i = 0; i < n; i++)
			render_child(out, f, kids[i], labels);
		free(labels);
	}
	free(kids);
}

void ck_metrics_registry_render(ck_metrics_registry_t *reg, ck_sbuf_t *out)
{
	pthread_mutex_lock(&reg->lock);
	if (reg->nfamilies > 1)
		qsort(reg->families, reg->nfamilies, sizeof(*reg->families), family_cmp);
	for (size_t i = 0; i < reg->nfamilies; i++)
		render_family(out, reg->families[i]);
	/* Collectors run without the lock, so that one may read other modules freely. */
	size_t ncollectors = reg->ncollectors;
	struct collector *collectors =
	    ck_xcalloc(ncollectors ? ncollectors : 1, sizeof(*collectors));
	if (ncollectors)
		memcpy(collectors, reg->collectors, ncollectors * sizeof(*collectors));
	pthread_mutex_unlock(&reg->lock);
	for (size_t i = 0; i < ncollectors; i++)
		collectors[i].fn(collectors[i].ud, out);
	free(collectors);
}
