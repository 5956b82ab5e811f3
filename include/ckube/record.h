/*
 * record: the Kubernetes event recorder (client-go tools/record semantics).
 *
 * A controller calls ck_record_event() from any thread; the call formats the message,
 * copies what it needs from the involved object and puts the event on a bounded
 * queue (default 1000; when full the event is dropped, counted and logged). It
 * never waits for the network. One poster thread per recorder takes events off
 * the queue, runs them through the correlator and writes Events through a sink (by
 * default the REST client's blocking calls, which hand the request to the client's
 * loop).
 *
 * Which Event API (ck_record_opts_t.api): with the client sink, events.k8s.io/v1
 * when discovery (GET /apis/events.k8s.io/v1, once, before the first write) says
 * the server serves it, else core/v1 -- as client-go's tools/events broadcaster
 * adapter. In events.k8s.io/v1 an event is {reportingController, reportingInstance,
 * action (= the reason: the recording calls have none), reason, regarding (the
 * involved object), note (the message), type, eventTime (first occurrence)} and a
 * repetition sets series {count, lastObservedTime} by PATCH; note cannot change
 * after create there, so an aggregate Event keeps its first combined message. If
 * the server refuses an events.k8s.io create with 403 (RBAC that grants only core
 * "events"), the recorder logs it once and writes core/v1 from then on. A sink of
 * the caller's gets core/v1 bodies unless api says otherwise.
 *
 * The correlator (per recorder, LRU caches of 4096 entries each):
 *   - dedup: an event identical to one seen before (same source, involved object,
 *     type, reason and message) is not created again: the existing Event's count,
 *     lastTimestamp and message are PATCHed (strategic merge patch). If the PATCH
 *     answers 404 (the Event expired or was deleted) a new Event is created. Any
 *     create carries the latest occurrence's involvedObject (its resourceVersion
 *     included), as client-go's.
 *   - aggregation: similar events (differing only in message) are tracked per
 *     source + object + type + reason; the 10th distinct message seen within 10
 *     minutes of the previous similar event, and every new message after it, go
 *     to one aggregate Event "(combined from similar events): <latest message>",
 *     itself counted by PATCH (the first 9 messages keep their own Events).
 *   - spam filter per source + object: a token bucket, burst 25, one token back
 *     every 5 minutes; each write to the API server takes one token.
 *
 * Where this differs from client-go (deliberately):
 *   - client-go silently discards what the spam filter refuses. Here a refused
 *     *new* Event is dropped, counted (dropped_spam) and logged at most once per
 *     object per spam_log_interval; a refused *count increment* of an Event that
 *     already exists is not lost: the count is kept and written when the object's
 *     bucket refills, or at the latest when the recorder is freed (deferred_spam).
 *     So 100 identical events end as one Event with count 100.
 *   - retries: transport errors, 429 and 5xx are retried (client-go retries only
 *     transport errors), up to max_tries, retry_interval apart (the first wait is
 *     a random fraction of it). AlreadyExists, namespace-terminating and other 4xx
 *     answers are not retried.
 *   - cache keys are keyed 64-bit hashes of their fields, each field hashed on
 *     its own (so ("ab","c") and ("a","bc") differ), and the set of similar
 *     messages holds their hashes: no strings are kept (about 240 bytes per
 *     distinct event for all three caches, bench/bench_record.sh). Two keys alike
 *     by chance would share a record; with 4,096 entries the odds are near 2^-52
 *     per new key. Event names are unique per recorder even when two events carry
 *     the same nanosecond timestamp.
 *
 * Event names are "<object name>.<hex nanoseconds>", in the involved object's
 * namespace ("default" for cluster-scoped objects). Messages are cut to 1024 bytes
 * on a UTF-8 boundary; invalid UTF-8 is replaced by U+FFFD.
 *
 * Threads: ck_record_event(), ck_record_stats() and ck_record_flush() may be called from any
 * thread. With the kclient sink, the recorder must be freed while the client's loop
 * is still running (its poster thread uses the client's *_sync calls).
 */
#ifndef CKUBE_RECORD_H
#define CKUBE_RECORD_H

#include <ckube/export.h>

#include <ckube/base.h>
#include <ckube/client.h>
#include <ckube/obj.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#define CK_RECORD_NORMAL  "Normal"
#define CK_RECORD_WARNING "Warning"

typedef struct ck_record ck_record_t;

/*
 * The involved object, when the caller has no ck_obj_t. Every string is borrowed for
 * the call (copied); NULL is the same as "".
 */
typedef struct ck_record_ref {
	const char *api_version; /* "apps/v1" */
	const char *kind;        /* "Deployment" */
	const char *ns;          /* "" for cluster-scoped objects */
	const char *name;
	const char *uid;
	const char *resource_version;
} ck_record_ref_t;

/*
 * What a sink call did. The recorder decides from it whether to retry; a sink
 * built on something other than the REST client maps its own errors to these.
 */
typedef enum ck_record_sink_result {
	CK_RECORD_SINK_OK = 0,
	CK_RECORD_SINK_NOT_FOUND,      /* 404: for a patch, the Event is gone (create it) */
	CK_RECORD_SINK_ALREADY_EXISTS, /* 409 AlreadyExists: not retried */
	CK_RECORD_SINK_NS_TERMINATING, /* the namespace is being deleted: not retried */
	CK_RECORD_SINK_RETRY,          /* transport error, 429, 5xx: retried */
	CK_RECORD_SINK_REJECTED,       /* any other answer (403, 422, ...): not retried */
} ck_record_sink_result_t;

/*
 * Where events are written. Both calls run on the poster thread, one at a time,
 * and may block. body is a complete JSON document (borrowed for the call). On
 * failure they may set *err to a new message (freed by the recorder).
 */
typedef struct ck_record_sink {
	/* POST namespaces/<ns>/events */
	ck_record_sink_result_t (*create)(void *ud, const char *ns, const char *body, char **err);
	/* PATCH namespaces/<ns>/events/<name>, strategic merge patch */
	ck_record_sink_result_t (*patch)(void *ud, const char *ns, const char *name,
	                                 const char *body, char **err);
	void *ud;
} ck_record_sink_t;

/* The Event API written; AUTO is discovery with the client sink, core/v1 with a sink given. */
typedef enum ck_record_api {
	CK_RECORD_API_AUTO = 0,
	CK_RECORD_API_CORE_V1,   /* v1 Event: involvedObject, message, count, timestamps */
	CK_RECORD_API_EVENTS_V1, /* events.k8s.io/v1 Event: regarding, note, series */
} ck_record_api_t;

/* Zero means "the default" for every field. */
typedef struct ck_record_opts {
	const char *component;            /* source.component; required */
	const char *host;                 /* source.host; default: omitted */
	const char *reporting_controller; /* reportingComponent; default: component */
	const char *reporting_instance;   /* default: host, else the machine's hostname */
	size_t queue_size;                /* default 1000 */
	int max_tries;                    /* per event; default 12 */
	uint32_t retry_interval_ms;       /* default 10000 */
	uint32_t shutdown_timeout_ms;     /* ck_record_free's bound; default 10000 */
	size_t cache_size;                /* entries per LRU cache; default 4096 */
	int aggregate_max_events;         /* default 10 */
	uint32_t aggregate_interval_ms;   /* default 600000 (10 min) */
	int spam_burst;                   /* default 25; negative disables the filter */
	uint32_t spam_refill_ms;          /* one token back per; default 300000 (5 min) */
	uint32_t spam_log_interval_ms;    /* per-object drop log; default 300000 */
	const ck_clk_t *clock;            /* timestamps and windows; NULL = real */
	const ck_record_sink_t *sink;     /* borrowed, outlives the recorder; NULL = client */
	ck_record_api_t api;              /* default AUTO (see the top of this file) */
} ck_record_opts_t;

/*
 * Borrows c (must outlive the recorder; may be NULL when opts->sink is given) and
 * opts (copied). Starts the poster thread. Returns a new recorder, free with
 * ck_record_free(); or NULL with *err.
 */
CKUBE_API ck_record_t *ck_record_new(ck_client_t *c, const ck_record_opts_t *opts, char **err);

/*
 * Stops the recorder: the poster thread goes on writing what is queued, and the
 * counts the spam filter held back, for at most shutdown_timeout_ms; what is left
 * then is counted as failed. Frees r. NULL is a no-op. Do not call ck_record_event()
 * concurrently with it.
 */
CKUBE_API void ck_record_free(ck_record_t *r);

/*
 * Records an event about obj (borrowed; kind and apiVersion come from its type).
 * type is CK_RECORD_NORMAL or CK_RECORD_WARNING (anything else is dropped and counted
 * as invalid); reason is a short CamelCase word; the message is printf-formatted.
 * Never blocks on I/O; thread-safe. r may be NULL (no-op).
 */
CKUBE_API void ck_record_event(ck_record_t *r, const ck_obj_t *obj, const char *type,
                               const char *reason, const char *fmt, ...) CK_PRINTF(5, 6);
/* The same, the involved object given as a ck_record_ref_t (borrowed). */
CKUBE_API void ck_record_event_ref(ck_record_t *r, const ck_record_ref_t *ref, const char *type,
                                   const char *reason, const char *fmt, ...) CK_PRINTF(5, 6);
/* The same with a va_list. Borrows everything. */
CKUBE_API void ck_record_eventv(ck_record_t *r, const ck_record_ref_t *ref, const char *type,
                                const char *reason, const char *fmt, va_list ap) CK_PRINTF(5, 0);

/*
 * Waits until every event queued before the call has been handled (written, given
 * up or filtered) and the spam-deferred counts that are due by the recorder's clock
 * have been written. Returns 0, or -1 if timeout_ms passed first. For tests and
 * orderly shutdown.
 */
CKUBE_API int ck_record_flush(ck_record_t *r, uint32_t timeout_ms);

/* Counters since ck_record_new, for metrics (a consistent-enough snapshot). */
typedef struct ck_record_stats {
	uint64_t posted;             /* Events created */
	uint64_t patched;            /* count increments written by PATCH */
	uint64_t dropped_queue_full; /* ck_record_event() calls dropped: queue full */
	uint64_t dropped_spam;       /* new Events the spam filter refused */
	uint64_t deferred_spam;      /* increments the spam filter postponed */
	uint64_t dropped_invalid;    /* bad type, no object, no reason */
	uint64_t failed;             /* rejected by the server, or retries exhausted */
	uint64_t retries;            /* attempts repeated after a retryable failure */
} ck_record_stats_t;

/* Borrows r; fills *out. */
CKUBE_API void ck_record_stats(const ck_record_t *r, ck_record_stats_t *out);

/* The API the recorder writes: AUTO until discovery ran (before the first write). Any thread. */
CKUBE_API ck_record_api_t ck_record_api(const ck_record_t *r);

#endif
