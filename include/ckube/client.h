/*
 * client: the Kubernetes REST client. One libev loop owns one libcurl multi handle
 * (HTTP/2 multiplexed when offered, keep-alive, TLS), a client-side token bucket
 * (QPS/burst) and retries. Two ways to call it:
 *
 *   - on the loop thread: async calls with a callback and a user pointer;
 *     "when a function that takes a callback returns an error, the callback is
 *     never called" (libuv). Callbacks run on the loop thread.
 *   - on any other thread (workers): *_sync calls that hand the request to the
 *     loop (ev_async) and block until its result. Never call a *_sync function
 *     from the loop thread (it would deadlock; it fails with an error instead).
 *
 * Bodies are decoded as they arrive (decode.h). Non-2xx answers carry the decoded
 * metav1.Status in ck_result_t (status.h).
 *
 * At -v=5 (pkg/log) every finished attempt is logged: method, path and query,
 * status, milliseconds, body bytes, attempt number; and so is each retry with its
 * reason. Headers, bodies and credentials never are.
 *
 * The client's own watchers do not keep the loop alive (ev_unref): ev_run() returns
 * when no request is in flight and nothing else holds the loop, so a process that
 * makes *_sync calls must keep its loop running (signal watchers, informers, ...).
 * The thread that runs the loop is recorded each time the loop iterates (and at
 * ck_client_new), which is how *_sync calls detect being called on it.
 */
#ifndef CKUBE_KUBE_CLIENT_H
#define CKUBE_KUBE_CLIENT_H

#include <ckube/export.h>

#include <ckube/base.h>
#include <ckube/config.h>
#include <ckube/decode.h>
#include <ckube/obj.h>
#include <ckube/status.h>

#include <stdbool.h>
#include <stdint.h>

struct ev_loop;

typedef struct ck_client ck_client_t;

/* The smallest client-side rate accepted: one request per 1000 s. Below it the
 * token bucket's waits stop meaning anything (1e-300 overflowed them). */
#define CK_CLIENT_MIN_QPS 0.001

/*
 * A transport hook: something other than the network answers the client's
 * attempts (the in-memory API server of <ckube/fake.h>). Only the network is
 * replaced: the rate limiter, retries (Retry-After, resets of a GET), deadlines,
 * Status decoding, *_sync calls, lists and watches all run as they do on curl,
 * and a body is decoded by the same code path chunk by chunk.
 *
 * Everything happens on the client's loop thread. The client calls start() once
 * per attempt; the transport answers later -- from a watcher of its own (ev_idle,
 * ev_async, ev_timer), never inside start() -- with ck_transport_head() once, then
 * any number of ck_transport_body() chunks (a watch: one event line per change,
 * for as long as it likes), then ck_transport_end(). The client calls stop() exactly
 * once per started attempt when it is done with it: after the end, when the
 * request is cancelled, or when the client is freed; stop() may come from inside
 * ck_transport_body() or ck_transport_end() (the request's callbacks ran there),
 * and after it the attempt handle must not be used again.
 */
typedef struct ck_transport_attempt ck_transport_attempt_t; /* the client's; see above */

/* One attempt as the transport sees it; every pointer is borrowed for start(). */
typedef struct ck_transport_req {
	const char *method;       /* "GET", "POST", "PUT", "PATCH", "DELETE" */
	const char *path;         /* "/api/v1/namespaces/ns/configmaps/x", escaped as sent */
	const char *query;        /* encoded, without '?'; "" when none */
	const char *content_type; /* NULL without a body */
	const char *body;         /* NULL or body_len bytes */
	size_t body_len;
	bool is_watch;
} ck_transport_req_t;

typedef struct ck_transport {
	/* Returns 0, or -1 with *err (a new string): the attempt then fails at once as
	 * a transport error naming it, and stop() is not called. */
	int (*start)(void *ud, ck_transport_attempt_t *a, const ck_transport_req_t *req,
	             char **err);
	void (*stop)(void *ud, ck_transport_attempt_t *a);
	void *ud;
} ck_transport_t;

/* The status line: code (100..599) and Retry-After seconds (-1 = none). Once,
 * before any body. Loop thread. */
CKUBE_API void ck_transport_head(ck_transport_attempt_t *a, int code, int retry_after);
/* Borrows data. Returns 0, or -1 when the attempt is over (the caller cancelled it
 * from a callback, or the body could not be decoded): stop() has run, a is gone. */
CKUBE_API int ck_transport_body(ck_transport_attempt_t *a, const char *data, size_t len);
/* The end of the answer: why NULL for a complete one, else a broken connection
 * (why, borrowed, says how), handled as curl's "connection reset" (a GET that
 * delivered nothing is retried). stop() runs before it returns; a is gone. */
CKUBE_API void ck_transport_end(ck_transport_attempt_t *a, const char *why);

/* Options: a zero or NULL member means the default its comment names (so {0} is
 * all defaults, and a struct from an older release stays valid). */
typedef struct ck_client_opts {
	/* Default 20; negative disables client-side limiting. Otherwise at least
	 * CK_CLIENT_MIN_QPS and finite (ck_client_new refuses anything else). */
	double qps;
	int burst;                   /* default 30 */
	const char *user_agent;      /* default "<program name> (linux) libckube/<version>" */
	uint32_t connect_timeout_ms; /* default 10000 */
	/* Total time allowed for a request that is neither a list nor a watch; default
	 * 60000. One deadline from the call to the answer: rate-limiter waits, the exec
	 * plugin, every attempt and every retry delay fit in it (see timeout_ms in
	 * ck_req_spec_t). Lists have no total limit (a big list on a slow cluster may take
	 * longer, and a relist that always times out would loop forever), as in
	 * client-go: they are cut only when they stall, see stall_timeout_ms. */
	uint32_t request_timeout_ms;
	/* Lists: abort when fewer than 1 byte/s arrived for this long (whole seconds,
	 * rounded up); default 60000. Watches may be quiet for long: not for them. */
	uint32_t stall_timeout_ms;
	/* On 429/5xx with Retry-After (honoured up to 60 s, and only while it ends before
	 * the request's deadline); 0 = default 10, <0 = none. */
	int max_retries;
	size_t max_object_bytes; /* default CK_DEC_DEFAULT_MAX_OBJECT */
	const ck_clk_t *clock;   /* NULL = real */
	/* NULL = the network (libcurl); else every attempt goes to this transport
	 * (borrowed, must outlive the client): see ck_transport_t. */
	const ck_transport_t *transport;
} ck_client_opts_t;

/*
 * Borrows loop (must outlive the client) and opts; takes cfg (freed with the
 * client, also on error). Call it on the thread that will run the loop. Returns a
 * new client, free with ck_client_free(); or NULL with *err.
 */
CKUBE_API ck_client_t *ck_client_new(struct ev_loop *loop, ck_config_t *cfg,
                                     const ck_client_opts_t *opts, char **err);
/*
 * Loop thread only, never from inside one of the client's callbacks. Pending and
 * in-flight *_sync calls complete with the error "client shutting down" (workers
 * blocked in them return; ck_client_free waits until they have all left); async
 * requests still outstanding are dropped without their callbacks. NULL is a no-op.
 */
CKUBE_API void ck_client_free(ck_client_t *c);
/* Borrowed; the client's configuration. */
CKUBE_API ck_config_t *ck_client_config(ck_client_t *c);
/* Host part of the server URL, for metrics labels (borrowed). */
CKUBE_API const char *ck_client_host(const ck_client_t *c);

/* One request, described generically; any kind with a descriptor. */
typedef struct ck_req_spec {
	const char *method;       /* "GET", "POST", "PUT", "PATCH", "DELETE" */
	const ck_type_t *type;    /* builds the path; decodes the answer */
	const char *ns;           /* NULL/"" = cluster-scoped or all namespaces */
	const char *name;         /* NULL = the collection */
	const char *subresource;  /* "status", or NULL */
	const char *query;        /* already-encoded query without '?', or NULL */
	const char *content_type; /* default application/json */
	const char *body;         /* borrowed until the call returns (copied) */
	size_t body_len;
	ck_dec_mode_t decode; /* how to decode a 2xx body */
	bool keep_body;       /* also return the raw 2xx body in kresult.body */
	/* Total time limit, one absolute deadline set when the request starts: the wait
	 * for a rate-limiter token, the exec plugin, every attempt and every retry delay
	 * (Retry-After, resets) must end before it. A wait that would end past it fails
	 * the request at once instead of starting; either way the result is a transport
	 * error, ck_result_is_timeout(), whose message names the request, the deadline and
	 * what it was waiting for. 0 = the client's default: request_timeout_ms, but
	 * for a CK_DEC_LIST only the stall guard, and for a watch none. */
	uint32_t timeout_ms;
	/* Long-running: no default request timeout, not in the latency histogram. Like
	 * any GET it is retried only before the first event reached dcb. */
	bool is_watch;
	bool no_decode; /* do not decode a 2xx body (DELETE answers: object or Status) */
	/* Not held back by the client-side rate limiter (qps/burst) and takes no token
	 * from it: leader election's Lease requests, which must be on time when a
	 * controller's writes keep the limiter busy (client-go gets the same with a
	 * separate client for the lock). Server-side limits (429) still apply. */
	bool unthrottled;
	/* A path of the server that no kind names ("/readyz", "/version"), or NULL: sent
	 * instead of the path type, ns, name and subresource build (query still
	 * appended). type is still required: it names the request in metrics. */
	const char *path;
} ck_req_spec_t;

typedef struct ck_req ck_req_t;

/*
 * Completion for an async request: result is borrowed for the call (take
 * result->obj or result->body by setting it to NULL if you keep it). For
 * CK_DEC_OBJECT the decoded object is result->obj (dcb is not used).
 */
typedef void (*ck_req_done_cb)(void *ud, ck_result_t *result);

/*
 * Starts an async request on the loop thread. Borrows spec (copied). For
 * CK_DEC_LIST/CK_DEC_WATCH, items/events go to dcb as they decode (may be NULL for
 * OBJECT). done is called exactly once, unless ck_req_cancel() was called first.
 * Returns a handle (owned by the client, valid until done runs or cancel) or
 * NULL with *err (and then no callback ever runs).
 */
CKUBE_API ck_req_t *ck_client_request(ck_client_t *c, const ck_req_spec_t *spec,
                                      const ck_dec_cb_t *dcb, ck_req_done_cb done, void *ud,
                                      char **err);
/*
 * Cancels a request that has not completed (waiting for a token or a retry, or in
 * flight); none of its callbacks runs afterwards. Allowed inside any of the
 * client's callbacks, including the request's own decoder callbacks; a no-op
 * inside its own done callback. Loop thread only.
 */
CKUBE_API void ck_req_cancel(ck_req_t *r);

/* --- List/watch options (query strings built and escaped by the client) --- */
typedef struct ck_list_opts {
	const char *label_selector;
	const char *field_selector;
	const char *resource_version;       /* NULL = unset, "" = most recent, "0" = any */
	const char *resource_version_match; /* "NotOlderThan" / "Exact" / NULL */
	int64_t limit;                      /* 0 = unset */
	const char *continue_token;
	/* watch only */
	bool allow_watch_bookmarks;
	int64_t timeout_seconds; /* 0 = unset */
	bool send_initial_events;
	/* KEP-5866 shardSelector (<ckube/shard.h>'s wire form), or NULL. Last so that
	 * the members above keep their offsets for programs built against an older
	 * header. A server without the ShardedListAndWatch gate ignores it. */
	const char *shard_selector;
} ck_list_opts_t;

/*
 * Borrows o (may be NULL); returns a new encoded query string without '?' ("" when
 * empty), free with free(). watch adds "watch=true" and the watch-only options.
 * With a continue token, resourceVersion(Match) are left out (the server rejects
 * them together).
 */
CKUBE_API char *ck_list_opts_query(const ck_list_opts_t *o, bool watch);

/* Async list (one page): items to dcb->on_object, list meta to dcb->on_list_meta. */
CKUBE_API ck_req_t *ck_client_list(ck_client_t *c, const ck_type_t *t, const char *ns,
                                   const ck_list_opts_t *o, const ck_dec_cb_t *dcb,
                                   ck_req_done_cb done, void *ud, char **err);
/*
 * Async watch: events to dcb->on_event; done when the stream ends (clean or not; a
 * refused watch, e.g. 403, ends at once with the Status in the result). With
 * o->timeout_seconds the client gives up 60 s after the server should have ended
 * it (a dead peer that went silent). Watches are sent without Accept-Encoding:
 * the API server gzips a watch as one gzip member per event, which curl 7.88
 * cannot read.
 */
CKUBE_API ck_req_t *ck_client_watch(ck_client_t *c, const ck_type_t *t, const char *ns,
                                    const ck_list_opts_t *o, const ck_dec_cb_t *dcb,
                                    ck_req_done_cb done, void *ud, char **err);

/* --- Blocking verbs for worker threads. Fill *res; return 0 if 2xx, else -1. --- */

typedef enum ck_patch_type {
	CK_PATCH_MERGE,     /* application/merge-patch+json */
	CK_PATCH_STRATEGIC, /* application/strategic-merge-patch+json */
	CK_PATCH_JSON,      /* application/json-patch+json */
	CK_PATCH_APPLY,     /* application/apply-patch+yaml (server-side apply) */
} ck_patch_type_t;

typedef struct ck_write_opts {
	const char *field_manager; /* NULL: none sent (the server derives one from the
	                              user agent; server-side apply requires one) */
	bool force;                /* server-side apply only */
	bool dry_run;
} ck_write_opts_t;

typedef struct ck_delete_opts {
	const char *propagation_policy; /* "Foreground", "Background", "Orphan" or NULL */
	const char *precondition_uid;   /* or NULL */
	const char *precondition_rv;    /* or NULL */
	int64_t grace_period_seconds;   /* -1 = unset */
} ck_delete_opts_t;

/*
 * Helpers for building a ck_req_spec_t by hand (async writes on the loop thread).
 * Borrows o (may be NULL: no field manager); returns a new query string
 * "[fieldManager=...][&dryRun=All][&force=true]" (force only when apply; "" if none),
 * free with free().
 */
CKUBE_API char *ck_write_opts_query(const ck_write_opts_t *o, bool apply);
/* Returns the Content-Type of a patch type (static string). */
CKUBE_API const char *ck_patch_content_type(ck_patch_type_t pt);
/* Borrows o; returns a new DeleteOptions JSON body, free with free(). */
CKUBE_API char *ck_delete_opts_body(const ck_delete_opts_t *o);

/*
 * Runs spec on the loop and waits. Borrows spec. Any thread but the loop's (there
 * it fails at once with an error instead of deadlocking). res must be zeroed.
 * For CK_DEC_LIST/CK_DEC_WATCH use ck_client_do_sync_stream.
 */
CKUBE_API int ck_client_do_sync(ck_client_t *c, const ck_req_spec_t *spec, ck_result_t *res);
/* Same, with dcb (borrowed) called on the LOOP thread with ud while this thread waits. */
CKUBE_API int ck_client_do_sync_stream(ck_client_t *c, const ck_req_spec_t *spec,
                                       const ck_dec_cb_t *dcb, void *ud, ck_result_t *res);

CKUBE_API int ck_client_get_sync(ck_client_t *c, const ck_type_t *t, const char *ns,
                                 const char *name, ck_result_t *res);
/* body: a complete JSON object (borrowed). */
CKUBE_API int ck_client_create_sync(ck_client_t *c, const ck_type_t *t, const char *ns,
                                    const char *body, const ck_write_opts_t *o, ck_result_t *res);
CKUBE_API int ck_client_update_sync(ck_client_t *c, const ck_type_t *t, const char *ns,
                                    const char *name, const char *body, const ck_write_opts_t *o,
                                    ck_result_t *res);
CKUBE_API int ck_client_update_status_sync(ck_client_t *c, const ck_type_t *t, const char *ns,
                                           const char *name, const char *body,
                                           const ck_write_opts_t *o, ck_result_t *res);
CKUBE_API int ck_client_patch_sync(ck_client_t *c, const ck_type_t *t, const char *ns,
                                   const char *name, ck_patch_type_t pt, const char *body,
                                   const ck_write_opts_t *o, ck_result_t *res);
/* The same to the status subresource (.../status): the status alone changes. */
CKUBE_API int ck_client_patch_status_sync(ck_client_t *c, const ck_type_t *t, const char *ns,
                                          const char *name, ck_patch_type_t pt, const char *body,
                                          const ck_write_opts_t *o, ck_result_t *res);
/* o may be NULL (server defaults). The answer is not decoded (res->obj stays NULL). */
CKUBE_API int ck_client_delete_sync(ck_client_t *c, const ck_type_t *t, const char *ns,
                                    const char *name, const ck_delete_opts_t *o, ck_result_t *res);
/*
 * A whole list, all pages (o->limit per page); objects appended to *items (new refs,
 * free each and the array); *list_rv (may be NULL) gets a new string, free with
 * free(). An expired continue token restarts once as a single unpaged list.
 */
CKUBE_API int ck_client_list_sync(ck_client_t *c, const ck_type_t *t, const char *ns,
                                  const ck_list_opts_t *o, ck_obj_t ***items, size_t *nitems,
                                  char **list_rv, ck_result_t *res);

/* --- Figures for pkg/metrics (thread-safe snapshot). --- */
typedef void (*ck_client_request_stat_cb)(void *ud, const char *method, int code, uint64_t count);
/*
 * Calls cb once per (method, code) pair seen, counting every attempt (retries
 * too); code 0 = transport error. Thread-safe; cb runs on a copy, no lock held.
 */
CKUBE_API void ck_client_stats_foreach(ck_client_t *c, ck_client_request_stat_cb cb, void *ud);
/*
 * Latency histogram of non-watch request attempts (Prometheus histogram shape), per
 * verb: the HTTP method, as client-go's rest_client_request_duration_seconds{verb}.
 */
#define CK_CLIENT_LATENCY_NBUCKETS 13
typedef struct ck_client_latency {
	const char *verb; /* "GET", "POST", ... (static string); NULL = all verbs together */
	double bounds[CK_CLIENT_LATENCY_NBUCKETS];   /* upper bounds in seconds, ascending */
	uint64_t counts[CK_CLIENT_LATENCY_NBUCKETS]; /* cumulative: attempts <= bounds[i] */
	double sum;                                  /* seconds */
	uint64_t count;                              /* all attempts (the +Inf bucket) */
} ck_client_latency_t;
/* Fills *out (caller's storage) with a consistent copy, all verbs summed. Thread-safe. */
CKUBE_API void ck_client_latency_snapshot(ck_client_t *c, ck_client_latency_t *out);
/* lat is borrowed for the call. */
typedef void (*ck_client_latency_cb)(void *ud, const ck_client_latency_t *lat);
/*
 * Calls cb once per verb that has had at least one timed attempt, always in the
 * same order (GET, POST, PUT, PATCH, DELETE, HEAD), so a series once exposed never
 * vanishes. Thread-safe; cb runs on a consistent copy, no lock held.
 */
CKUBE_API void ck_client_latency_foreach(ck_client_t *c, ck_client_latency_cb cb, void *ud);
/*
 * The same shape for the client-side rate limiter: per verb, how long each attempt
 * waited for its token (0 when one was there), as client-go's
 * rest_client_rate_limiter_duration_seconds{verb}. Nothing is counted while the
 * limiter is off (qps < 0) or for unthrottled requests. Thread-safe.
 */
CKUBE_API void ck_client_rate_limiter_foreach(ck_client_t *c, ck_client_latency_cb cb, void *ud);

/* method is static, resource borrowed for the call ("" for a request without a type). */
typedef void (*ck_client_resource_stat_cb)(void *ud, const char *method, const char *resource,
                                           uint64_t count);
/*
 * Calls cb once per (method, resource) pair seen, counting every attempt: what the
 * client spent its requests on (client-go has no such figure; the API server's
 * apiserver_request_total{verb,resource} is its counterpart). Thread-safe; cb runs
 * on a copy, no lock held.
 */
CKUBE_API void ck_client_resource_stats_foreach(ck_client_t *c, ck_client_resource_stat_cb cb,
                                                void *ud);

/*
 * Connection figures: whether the one multi handle really keeps one connection for
 * every watch and call (HTTP/2 multiplexing) or opens more.
 */
typedef struct ck_client_conn_stats {
	/* New connections curl opened (CURLINFO_NUM_CONNECTS summed over attempts),
	 * counted as soon as an attempt's response head arrives, so a watch that is
	 * still streaming is already in; an attempt without a response is counted
	 * when it ends. */
	uint64_t connections;
	/* Response heads received (at most one per attempt), by HTTP version. */
	uint64_t responses;
	uint64_t responses_http1; /* HTTP/1.0 or HTTP/1.1 */
	uint64_t responses_http2;
	uint64_t responses_http3;
	/* Version of the latest response head: 10, 11, 20, 30; 0 = none yet. */
	int last_http_version;
	/* Response body bytes read, every attempt and status, watches as they stream
	 * (after gzip decoding, as the decoder sees them): what a sharded informer
	 * saves is read off this. */
	uint64_t body_bytes;
} ck_client_conn_stats_t;
/* Fills *out (caller's storage) with a consistent copy. Thread-safe. */
CKUBE_API void ck_client_conn_stats_snapshot(ck_client_t *c, ck_client_conn_stats_t *out);

/* The loop the client runs on (borrowed). */
CKUBE_API struct ev_loop *ck_client_loop(ck_client_t *c);

#endif
