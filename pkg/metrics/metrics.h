/*
 * metrics: Prometheus metrics (text exposition format 0.0.4) and the HTTP server for
 * /metrics, /healthz and /readyz.
 *
 * A registry holds metric families that modules create at start-up: counters,
 * gauges and histograms, each either a single series or a "vec" with fixed label
 * names whose children (one per combination of label values) are created on first
 * use. Updating a series is lock-free (atomics); looking a child up in a vec is
 * lock-free too once the child exists (only the first use of new label values
 * takes a lock). Children live until the registry is freed, so a caller may keep
 * the pointer a lookup returns and skip the lookup next time.
 *
 *   metrics_counter_vec_t *syncs = metrics_counter_vec_new(reg, "foo_syncs_total",
 *           "Syncs by result.", METRICS_LABELS("result"), &err);
 *   metrics_counter_inc(metrics_counter_vec_get(syncs, METRICS_LABELS("error")));
 *
 * Figures computed at scrape time come from collectors: callbacks whose output is
 * appended verbatim after the registry's own families (see metrics_write_* for
 * writing valid text). metrics_registry_add_process_collector() adds the standard
 * process_* figures.
 *
 * Threads: every function here is thread-safe. The server runs one internal thread
 * (libmicrohttpd); collectors and probe checks run on it.
 */
#ifndef CSC_METRICS_H
#define CSC_METRICS_H

#include <stddef.h>

#include "pkg/base/base.h"

typedef struct metrics_registry metrics_registry_t;
typedef struct metrics_counter metrics_counter_t;
typedef struct metrics_gauge metrics_gauge_t;
typedef struct metrics_histogram metrics_histogram_t;
typedef struct metrics_counter_vec metrics_counter_vec_t;
typedef struct metrics_gauge_vec metrics_gauge_vec_t;
typedef struct metrics_histogram_vec metrics_histogram_vec_t;

typedef enum metrics_type {
	METRICS_COUNTER,
	METRICS_GAUGE,
	METRICS_HISTOGRAM,
	METRICS_UNTYPED,
} metrics_type_t;

/*
 * METRICS_LABELS("a", "b") expands to the two arguments `2, (const char *const[]){"a", "b"}`:
 * a count and an array, for the label-name and label-value parameters below.
 */
#define METRICS_LABELS(...)                                                                        \
	(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)),                       \
	    ((const char *const[]){__VA_ARGS__})

/* --- Registry. --- */

/* Returns a new empty registry, free with metrics_registry_free(). */
metrics_registry_t *metrics_registry_new(void);
/* Takes reg (may be NULL); frees it with every family, child and collector record. */
void metrics_registry_free(metrics_registry_t *reg);

/*
 * Creating families. name and label names must be valid Prometheus names, unique in
 * the registry (label names unique in the family, not starting with "__", and not
 * "le" for a histogram). Borrows every argument (copies them). Each returns the
 * family, owned by the registry (valid until metrics_registry_free), or NULL with
 * *err naming the metric.
 *
 * Histogram buckets: upper bounds, strictly increasing, finite; a trailing +Inf is
 * accepted and implied anyway. buckets NULL (nbuckets 0) = Prometheus' defaults
 * (0.005 … 10 seconds).
 */
metrics_counter_t *metrics_counter_new(metrics_registry_t *reg, const char *name, const char *help,
                                       char **err);
metrics_gauge_t *metrics_gauge_new(metrics_registry_t *reg, const char *name, const char *help,
                                   char **err);
metrics_histogram_t *metrics_histogram_new(metrics_registry_t *reg, const char *name,
                                           const char *help, const double *buckets, size_t nbuckets,
                                           char **err);
metrics_counter_vec_t *metrics_counter_vec_new(metrics_registry_t *reg, const char *name,
                                               const char *help, size_t nlabels,
                                               const char *const *labels, char **err);
metrics_gauge_vec_t *metrics_gauge_vec_new(metrics_registry_t *reg, const char *name,
                                           const char *help, size_t nlabels,
                                           const char *const *labels, char **err);
metrics_histogram_vec_t *metrics_histogram_vec_new(metrics_registry_t *reg, const char *name,
                                                   const char *help, size_t nlabels,
                                                   const char *const *labels, const double *buckets,
                                                   size_t nbuckets, char **err);

/*
 * Returns the child for these label values (borrowed: owned by the registry),
 * creating it on first use. Borrows values; a NULL value counts as "", invalid
 * UTF-8 is replaced by U+FFFD. nvalues must equal the family's label count: a
 * mismatch is a programming error and aborts with a message naming the family.
 */
metrics_counter_t *metrics_counter_vec_get(metrics_counter_vec_t *vec, size_t nvalues,
                                           const char *const *values);
metrics_gauge_t *metrics_gauge_vec_get(metrics_gauge_vec_t *vec, size_t nvalues,
                                       const char *const *values);
metrics_histogram_t *metrics_histogram_vec_get(metrics_histogram_vec_t *vec, size_t nvalues,
                                               const char *const *values);

/* Updates. All lock-free. Counters only go up: a negative or NaN add is ignored. */
void metrics_counter_inc(metrics_counter_t *c);
void metrics_counter_add(metrics_counter_t *c, double v);
double metrics_counter_value(const metrics_counter_t *c);
void metrics_gauge_set(metrics_gauge_t *g, double v);
void metrics_gauge_add(metrics_gauge_t *g, double v);
void metrics_gauge_inc(metrics_gauge_t *g);
void metrics_gauge_dec(metrics_gauge_t *g);
double metrics_gauge_value(const metrics_gauge_t *g);
void metrics_histogram_observe(metrics_histogram_t *h, double v);
/* Returns how many observations h has had. */
unsigned long long metrics_histogram_count(const metrics_histogram_t *h);

/*
 * A collector appends whole families (HELP, TYPE, samples) in the text format to out
 * at every scrape; its output is appended verbatim after the registry's families, in
 * the order collectors were added. It runs on the server thread and must not call
 * back into this registry's add/render functions. Borrows ud.
 */
typedef void (*metrics_collector_fn)(void *ud, sbuf_t *out);
void metrics_registry_add_collector(metrics_registry_t *reg, metrics_collector_fn fn, void *ud);

/*
 * Adds the process collector: process_cpu_seconds_total, process_open_fds,
 * process_max_fds, process_virtual_memory_bytes, process_resident_memory_bytes and
 * process_start_time_seconds, read from procfs at each scrape. proc_root is "/proc"
 * when NULL (tests point it at a fixture tree); borrowed, copied. A figure that
 * cannot be read is left out of that scrape.
 */
void metrics_registry_add_process_collector(metrics_registry_t *reg, const char *proc_root);

/* Appends the whole exposition (families sorted by name, then collectors) to out. */
void metrics_registry_render(metrics_registry_t *reg, sbuf_t *out);

/* --- Writing the text format (for collectors). Each borrows its arguments. --- */

typedef struct metrics_label {
	const char *name;
	const char *value;
} metrics_label_t;

/* "# HELP name help" (help escaped) and "# TYPE name type" lines. */
void metrics_write_header(sbuf_t *out, const char *name, const char *help, metrics_type_t type);
/* One sample line: name{l1="v1",...} value, label values escaped. */
void metrics_write_sample(sbuf_t *out, const char *name, const metrics_label_t *labels,
                          size_t nlabels, double value);
/* A value the way Prometheus' Go client prints it: 1, 0.005, 1.5e+06, +Inf, NaN. */
void metrics_write_value(sbuf_t *out, double v);

/* --- The HTTP server: /metrics, /healthz, /readyz. --- */

typedef struct metrics_server metrics_server_t;

/*
 * Starts a server on bind_addr, Go style: ":8080" (every address, IPv6 and IPv4),
 * "127.0.0.1:8080", "[::1]:8080", "localhost:8080"; port 0 picks a free port (see
 * metrics_server_port). "0" or "" means disabled: returns 0 with *out = NULL.
 *
 * It serves /metrics from reg when reg is not NULL (borrowed; must outlive the
 * server), and /healthz, /readyz (and /healthz/<check>, /readyz/<check>) when probes
 * is nonzero. To serve both on one address, pass both to one server; binding two
 * servers to the same address fails with "address already in use".
 *
 * flag names the option the address came from ("--metrics-bind-address"): errors
 * read `--metrics-bind-address "x": missing port in address`. Returns 0 and a new
 * server in *out (stop with metrics_server_stop), or -1 with *err.
 */
int metrics_server_start(const char *bind_addr, const char *flag, metrics_registry_t *reg,
                         int probes, metrics_server_t **out, char **err);
/* Returns the bound TCP port (useful after port 0), or 0 for a NULL server. */
int metrics_server_port(const metrics_server_t *srv);
/* Takes srv (may be NULL): stops answering, waits for the thread, frees it. */
void metrics_server_stop(metrics_server_t *srv);

/*
 * A probe check: returns 0 when healthy, or nonzero and sets *reason to a new string
 * (free()d by the server; may be left NULL) saying why. It runs on the server thread
 * for every probe request and must be quick and thread-safe; it must not add checks.
 */
typedef int (*metrics_check_fn)(void *ud, char **reason);

/*
 * Adds a named check to endpoint "healthz" or "readyz" of srv (a no-op returning 0
 * when srv is NULL, i.e. disabled). Borrows endpoint and name (copied) and ud. Checks
 * may be added while the server runs. Returns 0, or -1 with *err for an unknown
 * endpoint, a name that is empty, has '/' or is already used there.
 *
 * The answers match kube-apiserver's healthz handler: "ok" (200) when every check
 * passes; "?verbose" lists "[+]name ok" per check and ends "readyz check passed";
 * any failure gives 500 and the list with "[-]name failed: reason withheld" and
 * "readyz check failed" (the reason goes to the log at -v 2, since the endpoint is
 * unauthenticated). "?exclude=name" skips a check. /readyz/<name> runs one check:
 * "ok", or 500 "internal server error: <reason>". No checks at all = one "ping"
 * check that always passes.
 */
int metrics_probe_add_check(metrics_server_t *srv, const char *endpoint, const char *name,
                            metrics_check_fn check, void *ud, char **err);

#endif
