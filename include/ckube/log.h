/*
 * log: klog-style structured logging for the daemon, as text or JSON lines.
 *
 *   CK_LOG_INFO("Synced", CK_KV_OBJ("foo", ns, name), CK_KV_INT("replicas", 3));
 *   CK_LOG_V(2, "Enqueued", CK_KV_STR("key", key));
 *   CK_LOG_ERROR(err, "Sync failed", CK_KV_STR("key", key));
 *
 * Text (the default) is klog's header and structured form:
 *
 *   I1129 12:00:00.000123    1234 controller.c:120] "Synced" foo="default/example-foo" replicas=3
 *
 * severity letter (I, W, E, F), month and day, local time with microseconds (UTC when
 * asked), the thread id right-aligned to 7 characters, file:line, the message quoted
 * like Go's %q, then key=value pairs: strings quoted like %q, integers and booleans
 * bare, object references as "namespace/name". A line never spans lines: a newline
 * inside a value is printed as \n (klog would switch to its multi-line form).
 *
 * JSON (--log-format=json) writes one object per line, like Kubernetes' JSON format:
 *
 *   {"ts":1669723200.000123,"caller":"controller.c:120","msg":"Synced","v":0,
 *    "foo":{"name":"example-foo","namespace":"default"},"replicas":3}
 *
 * "v" is absent on error lines (as in Kubernetes' JSON logs), "err" is present when an
 * error is given.
 *
 * Global state: this module is the one logger of the process. Configure it (format,
 * verbosity, fd, clock) once at start-up, before any thread is started; the setters
 * are atomic so that a late change is not undefined behaviour, but lines being written
 * at that moment may use either setting. Logging itself is thread-safe: each line is
 * formatted into its own buffer and written under a lock with write(2), so lines from
 * several threads never interleave, whatever the fd is (pipe, file, terminal).
 *
 * Secrets: never pass a secret (token, password, private key, Authorization header)
 * to the logger. As a guard against mistakes only, a value whose key is one of
 * "token", "authorization", "password", "client-key", "client-key-data" or
 * "bearer-token" (any case) is printed as "<redacted>" whatever its type.
 */
#ifndef CKUBE_LOG_H
#define CKUBE_LOG_H

#include <ckube/export.h>

#include <stdbool.h>
#include <stdint.h>

#include <ckube/base.h>

typedef enum ck_log_severity {
	CK_LOG_SEV_INFO = 0,
	CK_LOG_SEV_WARNING,
	CK_LOG_SEV_ERROR,
	CK_LOG_SEV_FATAL,
} ck_log_severity_t;

typedef enum ck_log_format {
	CK_LOG_FORMAT_TEXT = 0,
	CK_LOG_FORMAT_JSON,
} ck_log_format_t;

typedef enum ck_log_kv_type {
	CK_LOG_KV_NONE_ = 0, /* terminates a list; not for use by callers */
	CK_LOG_KV_STR,
	CK_LOG_KV_INT,
	CK_LOG_KV_UINT,
	CK_LOG_KV_BOOL,
	CK_LOG_KV_OBJ,
} ck_log_kv_type_t;

/*
 * One key/value pair. Build them with the KV_* macros below; every pointer in it is
 * borrowed for the duration of the logging call only. A NULL string is printed as
 * "<nil>" (text) or null (JSON).
 */
typedef struct ck_log_kv {
	const char *key;
	ck_log_kv_type_t type;
	union {
		const char *s;
		int64_t i;
		uint64_t u;
		int b;
		struct {
			const char *ns; /* NULL or "" for cluster-scoped objects */
			const char *name;
		} obj;
	} v;
} ck_log_kv_t;

#define CK_KV_STR(k, val) ((ck_log_kv_t){.key = (k), .type = CK_LOG_KV_STR, .v.s = (val)})
#define CK_KV_INT(k, val) ((ck_log_kv_t){.key = (k), .type = CK_LOG_KV_INT, .v.i = (int64_t)(val)})
#define CK_KV_UINT(k, val)                                                                         \
	((ck_log_kv_t){.key = (k), .type = CK_LOG_KV_UINT, .v.u = (uint64_t)(val)})
#define CK_KV_BOOL(k, val) ((ck_log_kv_t){.key = (k), .type = CK_LOG_KV_BOOL, .v.b = !!(val)})
/* An object reference (klog.KObj): "ns/name" in text, {"name","namespace"} in JSON. */
#define CK_KV_OBJ(k, nsv, namev)                                                                   \
	((ck_log_kv_t){.key = (k), .type = CK_LOG_KV_OBJ, .v.obj = {.ns = (nsv), .name = (namev)}})
/* An error message as a pair keyed "err" (what CK_LOG_ERROR's first argument also gives). */
#define CK_KV_ERR(e) CK_KV_STR("err", (e))

/* --- Configuration: once, at start-up, before threads start. --- */

/* Sets the verbosity (-v); CK_LOG_V(n, ...) lines print when n <= level. Default 0. */
CKUBE_API void ck_log_set_verbosity(int level);
/* Returns the verbosity level. */
CKUBE_API int ck_log_verbosity(void);
/* Sets the output format. Default CK_LOG_FORMAT_TEXT. */
CKUBE_API void ck_log_set_format(ck_log_format_t format);
/* Parses a --log-format value ("text" or "json"); borrows name. Returns 0, or -1 with *err. */
CKUBE_API int ck_log_format_parse(const char *name, ck_log_format_t *out, char **err);
/* Sets the fd lines are written to (borrowed: never closed here). Default 2 (stderr). */
CKUBE_API void ck_log_set_fd(int fd);
/* Sets the clock for timestamps (borrowed; must outlive logging). NULL = real clock. */
CKUBE_API void ck_log_set_clock(const ck_clk_t *clock);
/* Text timestamps in UTC (1) or local time like klog (0, the default). */
CKUBE_API void ck_log_set_utc(int utc);

/* --- Logging. --- */

/* Returns nonzero when CK_LOG_V(level, ...) lines are printed. Cheap (one atomic load). */
CKUBE_API int ck_log_v_enabled(int level);

/*
 * The macros. msg is a constant description ("Synced", not a formatted sentence);
 * the varying parts go in key/value pairs. Arguments are not evaluated when the
 * line is off. CK_LOG_ERROR's err is a message string (borrowed) or NULL for none.
 * CK_LOG_FATAL writes the line and exits the process with status 255, like klog.
 */
#define CK_LOG_INFO(msg, ...)                                                                      \
	ck_log_emit(CK_LOG_SEV_INFO, 0, LOG_FILE_, __LINE__, NULL, (msg),                          \
	            (const ck_log_kv_t[]){CK_LOG_KV_END_, ##__VA_ARGS__, CK_LOG_KV_END_} + 1)
#define CK_LOG_WARN(msg, ...)                                                                      \
	ck_log_emit(CK_LOG_SEV_WARNING, 0, LOG_FILE_, __LINE__, NULL, (msg),                       \
	            (const ck_log_kv_t[]){CK_LOG_KV_END_, ##__VA_ARGS__, CK_LOG_KV_END_} + 1)
#define CK_LOG_ERROR(err, msg, ...)                                                                \
	ck_log_emit(CK_LOG_SEV_ERROR, 0, LOG_FILE_, __LINE__, (err), (msg),                        \
	            (const ck_log_kv_t[]){CK_LOG_KV_END_, ##__VA_ARGS__, CK_LOG_KV_END_} + 1)
#define CK_LOG_FATAL(err, msg, ...)                                                                \
	ck_log_emit(CK_LOG_SEV_FATAL, 0, LOG_FILE_, __LINE__, (err), (msg),                        \
	            (const ck_log_kv_t[]){CK_LOG_KV_END_, ##__VA_ARGS__, CK_LOG_KV_END_} + 1)
#define CK_LOG_V(level, msg, ...)                                                                  \
	do {                                                                                       \
		if (ck_log_v_enabled(level))                                                       \
			ck_log_emit(                                                               \
			    CK_LOG_SEV_INFO, (level), LOG_FILE_, __LINE__, NULL, (msg),            \
			    (const ck_log_kv_t[]){CK_LOG_KV_END_, ##__VA_ARGS__, CK_LOG_KV_END_} + \
			        1);                                                                \
	} while (0)

/*
 * The function behind the macros: formats and writes one line at the given
 * severity and verbosity. Borrows every argument. kvs is terminated by an element
 * of type CK_LOG_KV_NONE_ (may be NULL for none). Does not check verbosity.
 * At CK_LOG_SEV_FATAL it does not return.
 */
CKUBE_API void ck_log_emit(ck_log_severity_t sev, int v, const char *file, int line,
                           const char *err, const char *msg, const ck_log_kv_t *kvs);

/* --- Key trace: one object's journey through the machinery (docs/informers.md). --- */

/*
 * Sets the key whose journey is logged: "namespace/name", or "name" for a
 * cluster-scoped object (the workqueue key; ck_obj_key). Borrows key (copied).
 * NULL or "" turns tracing off (the default). Returns 0, or -1 with *err (new
 * string) when key is not of that form: an empty part, a second '/', a space or
 * control character. The manager's --trace-key calls it.
 *
 * While a key is set, the reflector, delta queue, store, handlers, workqueues and
 * the manager's workers each write one line per step they take for that key (and
 * for no other), whatever the verbosity:
 *
 *   I1207 04:10:00.000123    1234 reflector.c:590] "Trace" key="default/foo" step="watch-event" ...
 *
 * msg "Trace", then key=, step= and the step's own pairs (docs/informers.md lists
 * the steps). Every object of that namespace and name is traced, whatever its kind
 * (a Foo and the Deployment it owns of the same name both show, each line naming
 * its resource). Off, a step of the library costs one relaxed atomic load (inline)
 * and builds no key; CK_LOG_TRACE in a program adds a call (ck_log_trace_on).
 * Any thread; a change is seen by the steps that start after it (the old key's
 * memory is kept until exit, so a concurrent step never reads freed memory).
 */
CKUBE_API int ck_log_set_trace_key(const char *key, char **err);
/* true while a key is traced: one relaxed atomic load, all that a step costs when off. */
CKUBE_API bool ck_log_trace_on(void);
/* Returns the traced key as a new string (free with free()), or NULL when off. */
CKUBE_API char *ck_log_trace_key(void);
/* true when key (borrowed; NULL never matches) is the traced key. Off: one relaxed load. */
CKUBE_API bool ck_log_trace_match(const char *key);
/* The same for a key's parts, without building the key: ns NULL or "" for a
 * cluster-scoped object. Borrows both. */
CKUBE_API bool ck_log_trace_match_parts(const char *ns, const char *name);
/*
 * Writes one trace line: "Trace" key=<the traced key> step=<step> then kvs
 * (terminated as for ck_log_emit; may be NULL). Borrows everything. Does not check
 * the key: call it after a match (the macros below do).
 */
CKUBE_API void ck_log_trace_emit(const char *file, int line, const char *step,
                                 const ck_log_kv_t *kvs);

/* A trace line for key (evaluated twice) when it is the traced key; off, neither key
 * nor the pairs are evaluated. */
#define CK_LOG_TRACE(key, step, ...)                                                               \
	do {                                                                                       \
		if (ck_log_trace_on() && ck_log_trace_match(key))                                  \
			ck_log_trace_emit(                                                         \
			    LOG_FILE_, __LINE__, (step),                                           \
			    (const ck_log_kv_t[]){CK_LOG_KV_END_, ##__VA_ARGS__, CK_LOG_KV_END_} + \
			        1);                                                                \
	} while (0)
/* The same for an object's key given as its parts (ns NULL or "" when cluster-scoped). */
#define CK_LOG_TRACE_PARTS(ns, name, step, ...)                                                    \
	do {                                                                                       \
		if (ck_log_trace_on() && ck_log_trace_match_parts((ns), (name)))                   \
			ck_log_trace_emit(                                                         \
			    LOG_FILE_, __LINE__, (step),                                           \
			    (const ck_log_kv_t[]){CK_LOG_KV_END_, ##__VA_ARGS__, CK_LOG_KV_END_} + \
			        1);                                                                \
	} while (0)

/* Appends s quoted like Go's strconv.Quote (%q): the escaping the text format uses. */
CKUBE_API void ck_log_quote(ck_sbuf_t *out, const char *s);

#ifdef __FILE_NAME__
#define LOG_FILE_ __FILE_NAME__
#else
#define LOG_FILE_ __FILE__
#endif

/*
 * The lists the macros build start with a dummy element so that an empty list
 * compiles (the GNU ", ##__VA_ARGS__" comma elision), and end with the terminator.
 */
#define CK_LOG_KV_END_                                                                             \
	{                                                                                          \
		NULL, CK_LOG_KV_NONE_,                                                             \
		{                                                                                  \
			NULL                                                                       \
		}                                                                                  \
	}

#endif
