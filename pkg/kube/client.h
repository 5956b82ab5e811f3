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
 * metav1.Status in kresult_t (status.h).
 */
#ifndef CSC_KUBE_CLIENT_H
#define CSC_KUBE_CLIENT_H

#include "pkg/base/base.h"
#include "pkg/kube/config.h"
#include "pkg/kube/decode.h"
#include "pkg/kube/obj.h"
#include "pkg/kube/status.h"

#include <stdbool.h>
#include <stdint.h>

struct ev_loop;

typedef struct kclient kclient_t;

typedef struct kclient_opts {
	double qps;               /* default 20; negative disables client-side limiting */
	int burst;                /* default 30 */
	const char *user_agent;   /* default "sample-controller/<version> (linux) c" */
	uint32_t connect_timeout_ms; /* default 10000 */
	uint32_t request_timeout_ms; /* non-watch requests; default 60000 */
	int max_retries;          /* on 429/5xx with Retry-After; default 10 */
	size_t max_object_bytes;  /* default KDEC_DEFAULT_MAX_OBJECT */
	const clk_t *clock;       /* NULL = real */
} kclient_opts_t;

/*
 * Borrows loop (must outlive the client) and opts; takes cfg (freed with the
 * client). Returns a new client, free with kclient_free() on the loop thread
 * after the loop stopped running requests; or NULL with *err.
 */
kclient_t *kclient_new(struct ev_loop *loop, kconfig_t *cfg, const kclient_opts_t *opts,
		       char **err);
void kclient_free(kclient_t *c);
/* Borrowed; the client's configuration. */
kconfig_t *kclient_config(kclient_t *c);
/* Host part of the server URL, for metrics labels (borrowed). */
const char *kclient_host(const kclient_t *c);

/* One request, described generically; any kind with a descriptor. */
typedef struct kreq_spec {
	const char *method;      /* "GET", "POST", "PUT", "PATCH", "DELETE" */
	const ktype_t *type;     /* builds the path; decodes the answer */
	const char *ns;          /* NULL/"" = cluster-scoped or all namespaces */
	const char *name;        /* NULL = the collection */
	const char *subresource; /* "status", or NULL */
	const char *query;       /* already-encoded query without '?', or NULL */
	const char *content_type; /* default application/json */
	const char *body;        /* borrowed until the call returns (copied) */
	size_t body_len;
	kdec_mode_t decode;      /* how to decode a 2xx body */
	bool keep_body;          /* also return the raw 2xx body in kresult.body */
	uint32_t timeout_ms;     /* 0 = client default; watches use none */
	bool is_watch;           /* long-running: no request timeout, no retry */
} kreq_spec_t;

typedef struct kreq kreq_t;

/*
 * Completion for an async request: result is borrowed for the call (take
 * result->obj by setting it to NULL if you keep it).
 */
typedef void (*kreq_done_cb)(void *ud, kresult_t *result);

/*
 * Starts an async request on the loop thread. Borrows spec (copied). For
 * KDEC_LIST/KDEC_WATCH, items/events go to dcb as they decode (may be NULL for
 * OBJECT). done is called exactly once, unless kreq_cancel() was called first.
 * Returns a handle (owned by the client, valid until done runs or cancel) or
 * NULL with *err (and then no callback ever runs).
 */
kreq_t *kclient_request(kclient_t *c, const kreq_spec_t *spec, const kdec_cb_t *dcb,
			kreq_done_cb done, void *ud, char **err);
/* Cancels an in-flight request; its callbacks will not run. Loop thread only. */
void kreq_cancel(kreq_t *r);

/* --- List/watch options (query strings built and escaped by the client) --- */
typedef struct klist_opts {
	const char *label_selector;
	const char *field_selector;
	const char *resource_version;       /* NULL = unset, "" = most recent, "0" = any */
	const char *resource_version_match; /* "NotOlderThan" / "Exact" / NULL */
	int64_t limit;                      /* 0 = unset */
	const char *continue_token;
	/* watch only */
	bool allow_watch_bookmarks;
	int64_t timeout_seconds;            /* 0 = unset */
	bool send_initial_events;
} klist_opts_t;

/* Borrows o; returns a new encoded query string (free with free()). */
char *klist_opts_query(const klist_opts_t *o, bool watch);

/* Async list (one page): items to dcb->on_object, list meta to dcb->on_list_meta. */
kreq_t *kclient_list(kclient_t *c, const ktype_t *t, const char *ns, const klist_opts_t *o,
		     const kdec_cb_t *dcb, kreq_done_cb done, void *ud, char **err);
/* Async watch: events to dcb->on_event; done when the stream ends (clean or not). */
kreq_t *kclient_watch(kclient_t *c, const ktype_t *t, const char *ns, const klist_opts_t *o,
		      const kdec_cb_t *dcb, kreq_done_cb done, void *ud, char **err);

/* --- Blocking verbs for worker threads. Fill *res; return 0 if 2xx, else -1. --- */

typedef enum kpatch_type {
	KPATCH_MERGE,     /* application/merge-patch+json */
	KPATCH_STRATEGIC, /* application/strategic-merge-patch+json */
	KPATCH_JSON,      /* application/json-patch+json */
	KPATCH_APPLY,     /* application/apply-patch+yaml (server-side apply) */
} kpatch_type_t;

typedef struct kwrite_opts {
	const char *field_manager; /* default "sample-controller" */
	bool force;                /* server-side apply only */
	bool dry_run;
} kwrite_opts_t;

typedef struct kdelete_opts {
	const char *propagation_policy;   /* "Foreground", "Background", "Orphan" or NULL */
	const char *precondition_uid;     /* or NULL */
	const char *precondition_rv;      /* or NULL */
	int64_t grace_period_seconds;     /* -1 = unset */
} kdelete_opts_t;

/* Runs spec on the loop and waits. Borrows spec. Any thread but the loop's. */
int kclient_do_sync(kclient_t *c, const kreq_spec_t *spec, kresult_t *res);

int kclient_get_sync(kclient_t *c, const ktype_t *t, const char *ns, const char *name,
		     kresult_t *res);
/* body: a complete JSON object (borrowed). */
int kclient_create_sync(kclient_t *c, const ktype_t *t, const char *ns, const char *body,
			const kwrite_opts_t *o, kresult_t *res);
int kclient_update_sync(kclient_t *c, const ktype_t *t, const char *ns, const char *name,
			const char *body, const kwrite_opts_t *o, kresult_t *res);
int kclient_update_status_sync(kclient_t *c, const ktype_t *t, const char *ns, const char *name,
			       const char *body, const kwrite_opts_t *o, kresult_t *res);
int kclient_patch_sync(kclient_t *c, const ktype_t *t, const char *ns, const char *name,
		       kpatch_type_t pt, const char *body, const kwrite_opts_t *o, kresult_t *res);
int kclient_delete_sync(kclient_t *c, const ktype_t *t, const char *ns, const char *name,
			const kdelete_opts_t *o, kresult_t *res);
/* A whole list, all pages; objects appended to *items (new refs, free each and the array). */
int kclient_list_sync(kclient_t *c, const ktype_t *t, const char *ns, const klist_opts_t *o,
		      kobj_t ***items, size_t *nitems, char **list_rv, kresult_t *res);

/* --- Figures for pkg/metrics (thread-safe snapshot). --- */
typedef void (*kclient_request_stat_cb)(void *ud, const char *method, int code, uint64_t count);
/* Calls cb once per (method, code) pair seen; code 0 = transport error. */
void kclient_stats_foreach(kclient_t *c, kclient_request_stat_cb cb, void *ud);
/* Latency histogram of completed non-watch requests: buckets in seconds. */
void kclient_latency_snapshot(kclient_t *c, const double **bounds, uint64_t *counts,
			      size_t *nbuckets, double *sum, uint64_t *count);

/* The loop the client runs on (borrowed). */
struct ev_loop *kclient_loop(kclient_t *c);

#endif
