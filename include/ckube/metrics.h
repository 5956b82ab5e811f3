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
 *   ck_metrics_counter_vec_t *syncs = ck_metrics_counter_vec_new(reg, "foo_syncs_total",
 *           "Syncs by result.", CK_METRICS_LABELS("result"), &err);
 *   ck_metrics_counter_inc(ck_metrics_counter_vec_get(syncs, CK_METRICS_LABELS("error")));
 *
 * Figures computed at scrape time come from collectors: callbacks whose output is
 * appended verbatim after the registry's own families (see metrics_write_* for
 * writing valid text). ck_metrics_registry_add_process_collector() adds the standard
 * process_* figures, ck_metrics_registry_add_heap_collector() what malloc holds.
 *
 * The server serves plain HTTP (ck_metrics_server_start) or, for /metrics only,
 * HTTPS with every caller authenticated and authorized by the API server
 * (ck_metrics_server_start_secure), as controller-runtime's secure metrics.
 *
 * Threads: every function here is thread-safe. The server runs one internal thread
 * (libmicrohttpd); collectors, probe checks and reviews run on it.
 */
#ifndef CKUBE_METRICS_H
#define CKUBE_METRICS_H

#include <ckube/export.h>

#include <stddef.h>

#include <ckube/base.h>

typedef struct ck_metrics_registry ck_metrics_registry_t;
typedef struct ck_metrics_counter ck_metrics_counter_t;
typedef struct ck_metrics_gauge ck_metrics_gauge_t;
typedef struct ck_metrics_histogram ck_metrics_histogram_t;
typedef struct ck_metrics_counter_vec ck_metrics_counter_vec_t;
typedef struct ck_metrics_gauge_vec ck_metrics_gauge_vec_t;
typedef struct ck_metrics_histogram_vec ck_metrics_histogram_vec_t;

typedef enum ck_metrics_type {
	CK_METRICS_COUNTER,
	CK_METRICS_GAUGE,
	CK_METRICS_HISTOGRAM,
	CK_METRICS_UNTYPED,
} ck_metrics_type_t;

/*
 * CK_METRICS_LABELS("a", "b") expands to the two arguments `2, (const char *const[]){"a", "b"}`:
 * a count and an array, for the label-name and label-value parameters below.
 */
#define CK_METRICS_LABELS(...)                                                                     \
	(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)),                       \
	    ((const char *const[]){__VA_ARGS__})

/* --- Registry. --- */

/* Returns a new empty registry, free with ck_metrics_registry_free(). */
CKUBE_API ck_metrics_registry_t *ck_metrics_registry_new(void);
/* Takes reg (may be NULL); frees it with every family, child and collector record. */
CKUBE_API void ck_metrics_registry_free(ck_metrics_registry_t *reg);

/*
 * Creating families. name and label names must be valid Prometheus names, unique in
 * the registry (label names unique in the family, not starting with "__", and not
 * "le" for a histogram). Borrows every argument (copies them). Each returns the
 * family, owned by the registry (valid until ck_metrics_registry_free), or NULL with
 * *err naming the metric.
 *
 * Histogram buckets: upper bounds, strictly increasing, finite; a trailing +Inf is
 * accepted and implied anyway. buckets NULL (nbuckets 0) = Prometheus' defaults
 * (0.005 … 10 seconds).
 */
CKUBE_API ck_metrics_counter_t *ck_metrics_counter_new(ck_metrics_registry_t *reg, const char *name,
                                                       const char *help, char **err);
CKUBE_API ck_metrics_gauge_t *ck_metrics_gauge_new(ck_metrics_registry_t *reg, const char *name,
                                                   const char *help, char **err);
CKUBE_API ck_metrics_histogram_t *ck_metrics_histogram_new(ck_metrics_registry_t *reg,
                                                           const char *name, const char *help,
                                                           const double *buckets, size_t nbuckets,
                                                           char **err);
CKUBE_API ck_metrics_counter_vec_t *
ck_metrics_counter_vec_new(ck_metrics_registry_t *reg, const char *name, const char *help,
                           size_t nlabels, const char *const *labels, char **err);
CKUBE_API ck_metrics_gauge_vec_t *ck_metrics_gauge_vec_new(ck_metrics_registry_t *reg,
                                                           const char *name, const char *help,
                                                           size_t nlabels,
                                                           const char *const *labels, char **err);
CKUBE_API ck_metrics_histogram_vec_t *
ck_metrics_histogram_vec_new(ck_metrics_registry_t *reg, const char *name, const char *help,
                             size_t nlabels, const char *const *labels, const double *buckets,
                             size_t nbuckets, char **err);

/*
 * Returns the child for these label values (borrowed: owned by the registry),
 * creating it on first use. Borrows values; a NULL value counts as "", invalid
 * UTF-8 is replaced by U+FFFD. nvalues must equal the family's label count: a
 * mismatch is a programming error and aborts with a message naming the family.
 */
CKUBE_API ck_metrics_counter_t *ck_metrics_counter_vec_get(ck_metrics_counter_vec_t *vec,
                                                           size_t nvalues,
                                                           const char *const *values);
CKUBE_API ck_metrics_gauge_t *ck_metrics_gauge_vec_get(ck_metrics_gauge_vec_t *vec, size_t nvalues,
                                                       const char *const *values);
CKUBE_API ck_metrics_histogram_t *ck_metrics_histogram_vec_get(ck_metrics_histogram_vec_t *vec,
                                                               size_t nvalues,
                                                               const char *const *values);

/* Updates. All lock-free. Counters only go up: a negative or NaN add is ignored. */
CKUBE_API void ck_metrics_counter_inc(ck_metrics_counter_t *c);
CKUBE_API void ck_metrics_counter_add(ck_metrics_counter_t *c, double v);
CKUBE_API double ck_metrics_counter_value(const ck_metrics_counter_t *c);
CKUBE_API void ck_metrics_gauge_set(ck_metrics_gauge_t *g, double v);
CKUBE_API void ck_metrics_gauge_add(ck_metrics_gauge_t *g, double v);
CKUBE_API void ck_metrics_gauge_inc(ck_metrics_gauge_t *g);
CKUBE_API void ck_metrics_gauge_dec(ck_metrics_gauge_t *g);
CKUBE_API double ck_metrics_gauge_value(const ck_metrics_gauge_t *g);
CKUBE_API void ck_metrics_histogram_observe(ck_metrics_histogram_t *h, double v);
/* Returns how many observations h has had. */
unsigned long long ck_metrics_histogram_count(const ck_metrics_histogram_t *h);

/*
 * A collector appends whole families (HELP, TYPE, samples) in the text format to out
 * at every scrape; its output is appended verbatim after the registry's families, in
 * the order collectors were added. It runs on the server thread and must not call
 * back into this registry's add/render functions. Borrows ud.
 */
typedef void (*ck_metrics_collector_fn)(void *ud, ck_sbuf_t *out);
CKUBE_API void ck_metrics_registry_add_collector(ck_metrics_registry_t *reg,
                                                 ck_metrics_collector_fn fn, void *ud);

/*
 * Adds the process collector: process_cpu_seconds_total, process_open_fds,
 * process_max_fds, process_virtual_memory_bytes, process_resident_memory_bytes and
 * process_start_time_seconds, read from procfs at each scrape. proc_root is "/proc"
 * when NULL (tests point it at a fixture tree); borrowed, copied. A figure that
 * cannot be read is left out of that scrape.
 */
CKUBE_API void ck_metrics_registry_add_process_collector(ck_metrics_registry_t *reg,
                                                         const char *proc_root);

/*
 * Adds process_malloc_inuse_bytes (allocated and not freed) and
 * process_malloc_free_bytes (free but kept by malloc), from glibc's mallinfo2; the
 * counterpart of Go's heap figures. Unlike RSS, in-use bytes fall when the program
 * frees, so they tell a leak from a heap that glibc keeps. Writes nothing on other C
 * libraries; under a sanitizer the figures are glibc's arenas, not the program's.
 */
CKUBE_API void ck_metrics_registry_add_heap_collector(ck_metrics_registry_t *reg);

/* Appends the whole exposition (families sorted by name, then collectors) to out. */
CKUBE_API void ck_metrics_registry_render(ck_metrics_registry_t *reg, ck_sbuf_t *out);

/* --- Writing the text format (for collectors). Each borrows its arguments. --- */

typedef struct ck_metrics_label {
	const char *name;
	const char *value;
} ck_metrics_label_t;

/* "# HELP name help" (help escaped) and "# TYPE name type" lines. */
CKUBE_API void ck_metrics_write_header(ck_sbuf_t *out, const char *name, const char *help,
                                       ck_metrics_type_t type);
/* One sample line: name{l1="v1",...} value, label values escaped. */
CKUBE_API void ck_metrics_write_sample(ck_sbuf_t *out, const char *name,
                                       const ck_metrics_label_t *labels, size_t nlabels,
                                       double value);
/* A value the way Prometheus' Go client prints it: 1, 0.005, 1.5e+06, +Inf, NaN. */
CKUBE_API void ck_metrics_write_value(ck_sbuf_t *out, double v);

/* --- The HTTP server: /metrics, /healthz, /readyz. --- */

typedef struct ck_metrics_server ck_metrics_server_t;

/*
 * Starts a server on bind_addr, Go style: ":8080" (every address, IPv6 and IPv4),
 * "127.0.0.1:8080", "[::1]:8080", "localhost:8080"; port 0 picks a free port (see
 * ck_metrics_server_port). "0" or "" means disabled: returns 0 with *out = NULL.
 *
 * It serves /metrics from reg when reg is not NULL (borrowed; must outlive the
 * server), and /healthz, /readyz (and /healthz/<check>, /readyz/<check>) when probes
 * is nonzero. To serve both on one address, pass both to one server; binding two
 * servers to the same address fails with "address already in use".
 *
 * flag names the option the address came from ("--metrics-bind-address"): errors
 * read `--metrics-bind-address "x": missing port in address`. Returns 0 and a new
 * server in *out (stop with ck_metrics_server_stop), or -1 with *err.
 */
CKUBE_API int ck_metrics_server_start(const char *bind_addr, const char *flag,
                                      ck_metrics_registry_t *reg, int probes,
                                      ck_metrics_server_t **out, char **err);
/* Returns the bound TCP port (useful after port 0), or 0 for a NULL server. */
CKUBE_API int ck_metrics_server_port(const ck_metrics_server_t *srv);
/* Takes srv (may be NULL): stops answering, waits for the thread, frees it. */
CKUBE_API void ck_metrics_server_stop(ck_metrics_server_t *srv);

/* --- Secure serving: HTTPS, callers authenticated and authorized by the API server. --- */

/*
 * Who a bearer token belongs to: a TokenReview's status.user. Strings are owned by
 * the struct (free with ck_metrics_user_clear); extra_json is status.user.extra
 * as compact JSON ({"key":["value"]}), or NULL when there is none.
 */
typedef struct ck_metrics_user {
	char *name;
	char *uid;
	char **groups;
	size_t ngroups;
	char *extra_json;
} ck_metrics_user_t;

/* Frees what u holds and zeroes it; u itself is the caller's. */
CKUBE_API void ck_metrics_user_clear(ck_metrics_user_t *u);

/* What a review function answers. */
enum {
	CK_METRICS_REVIEW_FAILED = -1, /* the review could not be made: *err says why */
	CK_METRICS_REVIEW_NO = 0,      /* not authenticated / not allowed */
	CK_METRICS_REVIEW_YES = 1,
};

/*
 * How callers are checked. Both run on the server thread, one request at a time,
 * and may block (they are asked at most once per cache lifetime for the same
 * token or the same user and request).
 *   authenticate: borrows token; YES fills *user (new strings), NO when the token
 *                 is not valid (*reason may get a new string, logged), FAILED with *err.
 *   authorize:    borrows user, path, verb (a non-resource request); YES, NO (*reason
 *                 may get a new string, logged), FAILED with *err.
 */
typedef struct ck_metrics_reviewer {
	int (*authenticate)(void *ud, const char *token, ck_metrics_user_t *user, char **reason,
	                    char **err);
	int (*authorize)(void *ud, const ck_metrics_user_t *user, const char *path,
	                 const char *verb, char **reason, char **err);
	void *ud;
} ck_metrics_reviewer_t;

struct ck_client;
/*
 * Fills *out with the reviewer that asks the API server through c (borrowed; must
 * outlive the server): a TokenReview (authentication.k8s.io/v1) of the token, then a
 * SubjectAccessReview (authorization.k8s.io/v1) with nonResourceAttributes {path,
 * verb} and the reviewed user, groups, uid and extra, as controller-runtime's
 * filters.WithAuthenticationAndAuthorization. The calls are blocking client calls,
 * so c's loop must run on another thread. The identity needs create on both kinds.
 * Give it a client of its own (the manager builds one from the same configuration):
 * on the controller's client every unseen token would spend a request of its QPS.
 */
CKUBE_API void ck_metrics_kube_reviewer(struct ck_client *c, ck_metrics_reviewer_t *out);

/* Options of a secure server; zero members take the default their comment names. */
typedef struct ck_metrics_secure_opts {
	/* A directory holding the serving certificate and key (PEM), read at start and
	 * again whenever either file changes (checked every reload_interval_ms, as
	 * controller-runtime's certwatcher): new connections get the new pair; a pair
	 * that does not load keeps the current one and logs an error. NULL or "": a
	 * self-signed certificate (ECDSA P-256, one year, for localhost, 127.0.0.1, ::1
	 * and this host's name) generated in memory at start and again 30 days before
	 * it expires. */
	const char *cert_dir;
	const char *cert_name; /* default "tls.crt" */
	const char *key_name;  /* default "tls.key" */
	/* Borrowed (copied); NULL: no authentication nor authorization (TLS only). */
	const ck_metrics_reviewer_t *reviewer;
	/* How long decisions are cached, as controller-runtime's filter: authentication
	 * (valid and invalid tokens alike) 1 min, allowed 5 min, denied 30 s. A failed
	 * review is never cached. At most max_cached (default 1024) each of valid
	 * tokens, invalid tokens, allowed and denied requests: the four are bounded
	 * apart, so invalid tokens and denials never evict a valid caller's entries. */
	int64_t authn_ttl_ms;
	int64_t allow_ttl_ms;
	int64_t deny_ttl_ms;
	size_t max_cached;
	/* Reviews asked per second (default 5; negative: unlimited) and at once
	 * (default 10), in each of two buckets: one for tokens never seen valid, one
	 * for tokens that were valid and for access reviews (authenticated callers).
	 * A request whose review would exceed its bucket is answered 429 Too Many
	 * Requests with Retry-After, not queued. */
	double review_qps;
	int review_burst;
	const ck_clk_t *clock; /* NULL = real; also dates the self-signed certificate's renewal */
	int64_t reload_interval_ms; /* default 10 s */
} ck_metrics_secure_opts_t;

/*
 * As ck_metrics_server_start with probes off, but serves HTTPS (TLS 1.2 or later),
 * and /metrics only to a caller whose "Authorization: Bearer <token>" the reviewer
 * authenticates (401 "Unauthorized" otherwise) and authorizes for the path /metrics
 * and the lower-case method as verb ("get"; 403 "Authorization denied for user
 * <name>" otherwise); a review that fails answers 500 and logs the error; one over
 * the review rate (o->review_qps) answers 429 with Retry-After. The reviews and
 * the 429s are counted in reg (metrics_auth_token_reviews_total,
 * metrics_auth_access_reviews_total, metrics_auth_throttled_total). Other
 * paths answer 404 without a check. Borrows o. Returns 0 and the server in *out, or
 * -1 with *err (also when a certificate or key cannot be read or do not match).
 */
CKUBE_API int ck_metrics_server_start_secure(const char *bind_addr, const char *flag,
                                             ck_metrics_registry_t *reg,
                                             const ck_metrics_secure_opts_t *o,
                                             ck_metrics_server_t **out, char **err);

/*
 * A probe check: returns 0 when healthy, or nonzero and sets *reason to a new string
 * (free()d by the server; may be left NULL) saying why. A passing check may set
 * *reason too: a note shown in the verbose list ("[+]name ok: note"), so it must
 * hold nothing secret (the endpoint is unauthenticated). It runs on the server
 * thread for every probe request and must be quick and thread-safe; it must not add
 * checks.
 */
typedef int (*ck_metrics_check_fn)(void *ud, char **reason);

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
 * "ok", or 500 "internal server error: reason withheld" (kube-apiserver prints the
 * reason there; here it goes to the log as for the list). No checks at all = one
 * "ping" check that always passes.
 */
CKUBE_API int ck_metrics_probe_add_check(ck_metrics_server_t *srv, const char *endpoint,
                                         const char *name, ck_metrics_check_fn check, void *ud,
                                         char **err);

#endif
