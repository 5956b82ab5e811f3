/*
 * cache: informers. A local, indexed copy of one kind of Kubernetes object, kept
 * current by list+watch, with handlers told about every change (client-go's
 * tools/cache: reflector, RealFIFO, indexer, shared informer, factory, listers).
 *
 *   kube-apiserver --list/watch--> reflector --deltas--> delta queue
 *        --> store + indexes (readable from any thread) --> handlers (loop thread)
 *
 * Threads. Everything runs on the one libev loop thread -- requests, timers,
 * delta processing, store writes and handler calls -- except reads of a store
 * (store, lister and index lookups), which any thread may make: they take a read
 * lock and hand back *references* to immutable objects (ck_obj_unref when done),
 * never copies, so no lock is held while the caller works.
 * Functions marked "loop thread" may also be called by any one thread before
 * the loop runs (set-up).
 *
 * A typical controller:
 *
 *   ck_cache_factory_t *f = ck_cache_factory_new(loop, client, &(ck_cache_factory_opts_t){
 *           .default_resync_ms = 30000});
 *   ck_cache_informer_t *foos = ck_cache_factory_informer(f, &foo_type);
 *   ck_cache_informer_add_handler(foos, &(ck_cache_handler_t){on_add, on_update, NULL}, ctl);
 *   ck_cache_factory_start(f, &err);                  // before or on the loop thread
 *   ... run the loop in its thread ...
 *   if (ck_cache_factory_wait_synced(f, 60000, &reason) != 0)   // from main/worker
 *           fail("cannot sync: %s", reason);
 *   ck_obj_t *foo = ck_cache_lister_get(ck_cache_informer_lister(foos), ns, name);
 */
#ifndef CKUBE_CACHE_H
#define CKUBE_CACHE_H

#include <ckube/export.h>

#include <ckube/base.h>
#include <ckube/client.h>
#include <ckube/decode.h>
#include <ckube/obj.h>
#include <ckube/shard.h>
#include <ckube/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ev_loop;

/* ================================================================ results */

/* Objects returned by a read: n new references. Free with ck_cache_objs_free. */
typedef struct ck_cache_objs {
	ck_obj_t **items;
	size_t n;
} ck_cache_objs_t;
/* Drops every reference, frees the array and zeroes l. */
CKUBE_API void ck_cache_objs_free(ck_cache_objs_t *l);

/* Strings returned by a read: n new strings. Free with ck_cache_strs_free. */
typedef struct ck_cache_strs {
	char **items;
	size_t n;
} ck_cache_strs_t;
CKUBE_API void ck_cache_strs_free(ck_cache_strs_t *l);

/* ================================================================ store and indexer */

/*
 * A thread-safe store of objects keyed by "namespace/name" ("name" for
 * cluster-scoped kinds), with named indexes. An index function maps an object
 * to zero or more values; by-index lookups return the objects with a value.
 * The namespace index (CK_CACHE_INDEX_NAMESPACE, value = the object's namespace)
 * is always there. Writes and reads lock (a writer-preferring rwlock); an
 * informer's store is written only by its loop thread.
 */
typedef struct ck_cache_store ck_cache_store_t;

#define CK_CACHE_INDEX_NAMESPACE "namespace"

/* The values an index function emits; add with ck_cache_index_values_add. */
typedef struct ck_cache_index_values ck_cache_index_values_t;
/* Borrows value (copied). Emitting the same value twice counts once. */
CKUBE_API void ck_cache_index_values_add(ck_cache_index_values_t *v, const char *value);

/*
 * An index function: borrows obj, adds its values to out. Must be a pure
 * function of the object (it is called again on the old object to unindex it).
 * Called with the store's write lock held: it must not touch the store.
 */
typedef void (*ck_cache_index_fn)(void *ud, const ck_obj_t *obj, ck_cache_index_values_t *out);

/* Returns a new empty store (with the namespace index), free with ck_cache_store_free. */
CKUBE_API ck_cache_store_t *ck_cache_store_new(void);
/* Drops every object reference and frees s. NULL is a no-op. */
CKUBE_API void ck_cache_store_free(ck_cache_store_t *s);

/*
 * Adds an index named name (borrowed, copied); ud is borrowed. Objects already
 * stored are indexed at once. Returns 0, or -1 with *err if the name is taken.
 */
CKUBE_API int ck_cache_store_add_index(ck_cache_store_t *s, const char *name, ck_cache_index_fn fn,
                                       void *ud, char **err);

/*
 * Inserts or replaces the object with obj's key. Borrows obj (the store takes
 * its own reference). Returns the object it replaced (a reference the caller
 * now owns: ck_obj_unref it) or NULL if the key was new.
 */
CKUBE_API ck_obj_t *ck_cache_store_upsert(ck_cache_store_t *s, ck_obj_t *obj);
/* Removes key (borrowed). Returns the removed object (caller unrefs) or NULL. */
CKUBE_API ck_obj_t *ck_cache_store_delete(ck_cache_store_t *s, const char *key);

/* Returns a new reference to the object stored under key, or NULL if none. Any thread. */
CKUBE_API ck_obj_t *ck_cache_store_get(ck_cache_store_t *s, const char *key);
/* Same with the key's parts (ns "" or NULL for cluster-scoped). Any thread. */
CKUBE_API ck_obj_t *ck_cache_store_get_ns_name(ck_cache_store_t *s, const char *ns,
                                               const char *name);
/* Number of objects. Any thread. */
CKUBE_API size_t ck_cache_store_len(ck_cache_store_t *s);
/* Every object (new references, in no order) into *out. Any thread. */
CKUBE_API void ck_cache_store_list(ck_cache_store_t *s, ck_cache_objs_t *out);
/* Every key (new strings) into *out. Any thread. */
CKUBE_API void ck_cache_store_list_keys(ck_cache_store_t *s, ck_cache_strs_t *out);
/*
 * The objects whose index `index` has value `value` (new references) into *out.
 * Returns 0 (an unknown value yields none), or -1 with *err if there is no such
 * index. Any thread.
 */
CKUBE_API int ck_cache_store_by_index(ck_cache_store_t *s, const char *index, const char *value,
                                      ck_cache_objs_t *out, char **err);
/* Same, as keys (new strings): client-go's IndexKeys. */
CKUBE_API int ck_cache_store_index_keys(ck_cache_store_t *s, const char *index, const char *value,
                                        ck_cache_strs_t *out, char **err);
/* The values index `index` currently has (new strings): client-go's ListIndexFuncValues.
 * -1 with *err if no such index. */
CKUBE_API int ck_cache_store_index_values(ck_cache_store_t *s, const char *index,
                                          ck_cache_strs_t *out, char **err);
/*
 * client-go's Indexer.Index: the objects that share any of obj's values of index
 * `index` (new references, each once) into *out. obj (borrowed) need not be
 * stored: its values are computed by the index function (under the read lock: it
 * must not touch the store). Returns 0, or -1 with *err if there is no such index.
 * Any thread.
 */
CKUBE_API int ck_cache_store_index(ck_cache_store_t *s, const char *index, const ck_obj_t *obj,
                                   ck_cache_objs_t *out, char **err);
/* client-go's GetIndexers: the names of the store's indexes (new strings, the
 * namespace index included) into *out. Any thread. */
CKUBE_API void ck_cache_store_indexers(ck_cache_store_t *s, ck_cache_strs_t *out);
/* The function and ud index `index` was added with, into *fn and *ud (either may be
 * NULL). Returns 0, or -1 if there is no such index. Any thread. */
CKUBE_API int ck_cache_store_get_indexer(ck_cache_store_t *s, const char *index,
                                         ck_cache_index_fn *fn, void **ud);
/*
 * Calls fn(ud, obj) for every object of a snapshot taken under the read lock,
 * until fn returns false. The lock is not held while fn runs, so fn may call
 * back into this store (changes made meanwhile are not in the snapshot). obj is
 * borrowed for the call (ck_obj_ref to keep it). Any thread.
 */
CKUBE_API void ck_cache_store_foreach(ck_cache_store_t *s, bool (*fn)(void *ud, ck_obj_t *obj),
                                      void *ud);

/* Memory held, for the figures: bytes of the tables and indexes; *obj_bytes (if not
 * NULL) receives the bytes of the objects themselves (ck_obj_size). Any thread. */
CKUBE_API size_t ck_cache_store_mem_bytes(ck_cache_store_t *s, size_t *obj_bytes);

/* ================================================================ label selectors */

/*
 * A parsed label selector, as in `kubectl -l`: comma-separated requirements
 * `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>n`, `k<n`.
 * The empty selector matches everything. Immutable; any thread.
 */
typedef struct ck_cache_selector ck_cache_selector_t;
/* Borrows s. Returns a new selector (free with ck_cache_selector_free) or NULL with *err. */
CKUBE_API ck_cache_selector_t *ck_cache_selector_parse(const char *s, char **err);
CKUBE_API bool ck_cache_selector_matches(const ck_cache_selector_t *sel, const ck_obj_t *obj);
CKUBE_API void ck_cache_selector_free(ck_cache_selector_t *sel);

/* ================================================================ list/watch source */

/*
 * Where a reflector gets its data: a small vtable so the reflector can run
 * against the API server (ck_cache_lw_kube_new) or an in-process fake (fake.h).
 * An implementation embeds ck_cache_lw_t as its first member.
 *
 * list and watch start one request (loop thread), like ck_client_list/_watch:
 * items (list), list metadata and watch events go to cb as they arrive; done is
 * called exactly once at the end unless cancel was called first. They return a
 * handle, or NULL with *err -- and then no callback ever runs.
 */
typedef struct ck_cache_lw ck_cache_lw_t;
typedef struct ck_cache_lw_req ck_cache_lw_req_t;

typedef struct ck_cache_lw_ops {
	ck_cache_lw_req_t *(*list)(ck_cache_lw_t *lw, const ck_list_opts_t *o,
	                           const ck_dec_cb_t *cb, ck_req_done_cb done, void *ud,
	                           char **err);
	ck_cache_lw_req_t *(*watch)(ck_cache_lw_t *lw, const ck_list_opts_t *o,
	                            const ck_dec_cb_t *cb, ck_req_done_cb done, void *ud,
	                            char **err);
	/* Cancels an in-flight request: none of its callbacks runs afterwards. */
	void (*cancel)(ck_cache_lw_t *lw, ck_cache_lw_req_t *req);
	void (*free)(ck_cache_lw_t *lw);
} ck_cache_lw_ops_t;

struct ck_cache_lw {
	const ck_cache_lw_ops_t *ops;
	/* The source cannot serve a streaming list (sendInitialEvents): with
	 * CK_CACHE_STREAMING_DEFAULT the reflector lists. In-process fakes set it, as
	 * client-go's fake clients opt out of WatchList semantics. */
	bool no_watch_list;
};

/*
 * Borrows c and t (must outlive it); ns (borrowed, copied) restricts to one
 * namespace, NULL or "" for all. Returns a new source, free with ck_cache_lw_free.
 * Free its informer (or factory) before the client: ck_client_free drops the
 * requests still outstanding.
 */
CKUBE_API ck_cache_lw_t *ck_cache_lw_kube_new(ck_client_t *c, const ck_type_t *t, const char *ns);
/* NULL is a no-op. */
CKUBE_API void ck_cache_lw_free(ck_cache_lw_t *lw);

/* ================================================================ informer */

typedef struct ck_cache_informer ck_cache_informer_t;

/*
 * Handler callbacks, on the loop thread. Any may be NULL. Objects are borrowed
 * for the call: ck_obj_ref one to keep it. Handlers must not block (enqueue a key
 * on a workqueue and return).
 *
 * on_add: a new object; in_initial_list is true for the objects of the first
 *   list (and for the existing objects a late handler receives).
 * on_update: old and new state. When old->rv equals new->rv nothing changed: it
 *   is a periodic resync, delivered only to handlers whose resync period is due.
 * on_delete: the object with key `key` is gone. obj is never NULL: it is the
 *   deleted object's final state, or -- when final_state_unknown is true -- the
 *   last state this cache knew, because the delete happened while the watch was
 *   down and was only noticed by a relist (client-go's DeletedFinalStateUnknown
 *   tombstone). Either way, no delete is ever lost. As in client-go, a delete
 *   the server sends for an object this cache never had is delivered too.
 * Notifications follow the order the server sent the changes in, across keys;
 * a relist's come as its deletes, then an update or add per listed object.
 */
typedef struct ck_cache_handler {
	void (*on_add)(void *ud, ck_obj_t *obj, bool in_initial_list);
	void (*on_update)(void *ud, ck_obj_t *old_obj, ck_obj_t *new_obj);
	void (*on_delete)(void *ud, const char *key, ck_obj_t *obj, bool final_state_unknown);
} ck_cache_handler_t;

/* A registered handler (owned by the informer; valid until removed or freed). */
typedef struct ck_cache_handler_reg ck_cache_handler_reg_t;

/*
 * Called when client-go's WatchErrorHandler is (loop thread): a failed list, a
 * watch request answered with an error (410 Expired included) or not at all, and
 * a watch that delivered nothing for longer than its timeout (ours alone) -- not
 * a watch stream that ended with an ERROR event or a cut, nor a 429 on a watch
 * (both are retried as routine). msg (borrowed) says
 * what failed, e.g. "list foos.samplecontroller.k8s.io: foos.samplecontroller.k8s.io
 * is forbidden: User ...". res (borrowed, may be NULL for local failures) has the
 * HTTP code and Status. healing is false for errors that retrying will not fix
 * (401, 403, 404) -- report those. The informer itself logs each distinct message
 * once, not every retry.
 */
typedef void (*ck_cache_watch_error_fn)(void *ud, ck_cache_informer_t *inf, const char *msg,
                                        const ck_result_t *res, bool healing);

/* Returns a new reference to the object to store instead of obj (which it borrows);
 * ck_obj_ref(obj) keeps it as is. NULL keeps obj. Runs before the object is queued. */
typedef ck_obj_t *(*ck_cache_transform_fn)(void *ud, ck_obj_t *obj);

/*
 * The initial state by a streaming list (a watch with sendInitialEvents, ended by
 * the "k8s.io/initial-events-end" bookmark) instead of a paged list: one request,
 * objects decoded one by one, served from the watch cache. DEFAULT is on, as
 * client-go's WatchListClient gate is since 1.35, unless the source says it cannot
 * (ck_cache_lw_t.no_watch_list) or the environment has
 * KUBE_FEATURE_WatchListClient=false (client-go's own switch for its gate). A
 * server that refuses it costs one request per list+watch round: that round lists.
 * Why on: at 50,000 Deployments a paged list raised the server's peak memory by
 * about 100 MiB per client listing at once, a streaming list by 2-42 MiB for one to
 * four, for 2.5x the server's CPU and sync time (docs/informers.md). OFF suits a
 * small collection listed by few clients, where sync time counts more.
 */
typedef enum ck_cache_streaming {
	CK_CACHE_STREAMING_DEFAULT = 0,
	CK_CACHE_STREAMING_ON = 1, /* == true: also where the source says it cannot */
	CK_CACHE_STREAMING_OFF = 2,
} ck_cache_streaming_t;

typedef struct ck_cache_informer_opts {
	const char *label_selector; /* server-side filter, or NULL */
	const char *field_selector; /* server-side filter, or NULL */
	uint64_t default_resync_ms; /* for ck_cache_informer_add_handler; 0 = never */
	/* A streaming list (sendInitialEvents); default on, see ck_cache_streaming_t. */
	ck_cache_streaming_t streaming_list;
	uint32_t page_size; /* list limit; default 500 */
	ck_cache_transform_fn transform;
	void *transform_ud;
	ck_cache_watch_error_fn on_watch_error;
	void *watch_error_ud;
	const ck_clk_t *clock; /* NULL = real; a fake clock makes timers manual (tests) */
	/* Tuning; 0 = default. */
	uint32_t backoff_initial_ms;  /* 800 */
	uint32_t backoff_max_ms;      /* 30000 */
	uint32_t backoff_reset_ms;    /* 120000: healthy this long resets the backoff */
	uint32_t watch_timeout_min_s; /* 300 */
	uint32_t watch_timeout_max_s; /* 600 */
	uint32_t stall_margin_ms;     /* 30000: silent for timeout + this = dead watch */
	uint32_t batch;               /* deltas processed per loop iteration; 1024 */
	/*
	 * Every this many ms, compare the store with the server at the resourceVersion
	 * it is at (a paged list with resourceVersionMatch=Exact) and report missing,
	 * extra and stale objects in a log line and the stats; the store is never
	 * changed. 0 = off. Costs one list of the collection per period.
	 */
	uint64_t consistency_check_ms;
	/*
	 * KEP-5866 sharding (<ckube/shard.h>; borrowed, copied): only the objects whose
	 * namespace or uid hashes into the selector's ranges. It is sent on every list
	 * and watch (streaming list included) as shardSelector, and applied again here
	 * to every listed object and watch event, so the store is the same whether or
	 * not the server honours it (a server without the ShardedListAndWatch gate
	 * ignores the parameter). An object never leaves the selected set by changing:
	 * namespace and uid are immutable. Which side filtered: ck_cache_stats_t's
	 * shard_mode, logged once. NULL = no sharding.
	 */
	const ck_shard_selector_t *shard_selector;
	/*
	 * Parts (the manager's sharding, <ckube/sharding.h>), instead of one fixed
	 * selector: the informer starts caching nothing, and each range given to
	 * ck_cache_informer_add_part() is listed and watched on its own (its own
	 * shardSelector and client-side check), so adding or removing a part leaves the
	 * other parts' watches and objects alone. Where the server does not filter
	 * (each part's watch would carry everything), the parts are merged into one
	 * list and watch over the union of their ranges once the first part's list
	 * shows it (the others wait for that answer); an added part then relists the
	 * union. shard_field is what the ranges hash.
	 * Such an informer counts as synced once started; whether a part's first list
	 * reached the store and the handlers is ck_cache_informer_part_synced(). No
	 * consistency check. Its last sync resourceVersion is its first part's (merged:
	 * the union's).
	 */
	bool shard_parts;
	ck_shard_field_t shard_field;
} ck_cache_informer_opts_t;

/*
 * Borrows loop, t (must outlive it) and o (copied); takes lw (freed with the
 * informer). Returns a new informer, not started, free with ck_cache_informer_free.
 * Loop thread.
 */
CKUBE_API ck_cache_informer_t *ck_cache_informer_new(struct ev_loop *loop, const ck_type_t *t,
                                                     ck_cache_lw_t *lw,
                                                     const ck_cache_informer_opts_t *o);
/* Stops (as ck_cache_informer_shutdown) and frees. NULL is a no-op. Loop thread. */
CKUBE_API void ck_cache_informer_free(ck_cache_informer_t *inf);

/* Sets the transform (before start). Loop thread. */
CKUBE_API void ck_cache_informer_set_transform(ck_cache_informer_t *inf, ck_cache_transform_fn fn,
                                               void *ud);
/* Adds an index to the store (see ck_cache_store_add_index). Loop thread. */
CKUBE_API int ck_cache_informer_add_index(ck_cache_informer_t *inf, const char *name,
                                          ck_cache_index_fn fn, void *ud, char **err);

/*
 * Registers a handler (h copied, ud borrowed) with the informer's default
 * resync period. Before or after start: a handler added after start first gets
 * an add for every object already cached (in_initial_list true), then every
 * later change, and its HasSynced turns true only after those adds. "Already
 * cached" is the store when it is added (from inside a callback: including the
 * change being delivered, which it does not get): its view always follows the
 * store exactly. Its adds are delivered a batch at a time beside the other
 * handlers' notifications, which do not wait for them. Returns the
 * registration (owned by the informer). Loop thread.
 */
CKUBE_API ck_cache_handler_reg_t *
ck_cache_informer_add_handler(ck_cache_informer_t *inf, const ck_cache_handler_t *h, void *ud);
/* Same with its own resync period: 0 = never, else at least 1000 ms. */
CKUBE_API ck_cache_handler_reg_t *ck_cache_informer_add_handler_resync(ck_cache_informer_t *inf,
                                                                       const ck_cache_handler_t *h,
                                                                       void *ud,
                                                                       uint64_t resync_ms);
/* Unregisters (no call afterwards, even from within one of its callbacks). Loop thread. */
CKUBE_API void ck_cache_informer_remove_handler(ck_cache_informer_t *inf,
                                                ck_cache_handler_reg_t *reg);
/* true once this handler received the initial list. Any thread. */
CKUBE_API bool ck_cache_handler_has_synced(const ck_cache_handler_reg_t *reg);

/*
 * A filtering handler (client-go's FilteringResourceEventHandler): handler sees
 * only the objects filter accepts (filter NULL = all; it borrows obj and must be
 * a pure function of it). Adds and deletes pass when filter accepts the object.
 * An update passes as an update when both states pass, becomes a delete of the
 * old state (final_state_unknown false) when only the old one passes, an add of
 * the new one (in_initial_list false) when only the new one passes, and nothing
 * when neither does.
 */
typedef bool (*ck_cache_filter_fn)(void *ud, const ck_obj_t *obj);
typedef struct ck_cache_filtering_handler {
	ck_cache_filter_fn filter;
	void *filter_ud;
	ck_cache_handler_t handler;
	void *handler_ud;
} ck_cache_filtering_handler_t;
/* The callbacks to register with ud = a ck_cache_filtering_handler_t * (borrowed: it
 * must outlive the registration), e.g. with ck_cache_informer_add_handler_resync. */
CKUBE_API const ck_cache_handler_t *ck_cache_filtering_handler(void);
/* Registers fh (borrowed, must outlive the registration) with the default resync. Loop thread. */
CKUBE_API ck_cache_handler_reg_t *
ck_cache_informer_add_filtered_handler(ck_cache_informer_t *inf,
                                       const ck_cache_filtering_handler_t *fh);

/* Starts list+watch (idempotent). Returns 0 or -1 with *err. Loop thread. */
CKUBE_API int ck_cache_informer_start(ck_cache_informer_t *inf, char **err);
/*
 * Stops the watches and timers and drops what is queued: no handler call after
 * it returns, waiters wake up with a failure. The store stays readable until
 * ck_cache_informer_free. Loop thread (or after the loop stopped).
 */
CKUBE_API void ck_cache_informer_shutdown(ck_cache_informer_t *inf);

/* true once the first list has been fully processed. Any thread. */
CKUBE_API bool ck_cache_informer_has_synced(ck_cache_informer_t *inf);
/*
 * Blocks until synced, timeout_ms elapsed (< 0: no limit), or shutdown. Returns
 * 0 when synced; else -1 and, if reason is not NULL, a new string (free with
 * free()) saying why: the last list/watch error ("list foos.samplecontroller.k8s.io:
 * ... is forbidden: ...") or the state. Any thread except the loop thread
 * (which it would block: it fails at once there).
 */
CKUBE_API int ck_cache_informer_wait_synced(ck_cache_informer_t *inf, int64_t timeout_ms,
                                            char **reason);
/* NULL when synced; else a new string (free()) saying what blocks the sync. Any thread. */
CKUBE_API char *ck_cache_informer_sync_reason(ck_cache_informer_t *inf);

/* Borrowed: the informer's store (reads from any thread). */
CKUBE_API ck_cache_store_t *ck_cache_informer_store(ck_cache_informer_t *inf);
CKUBE_API const ck_type_t *ck_cache_informer_type(const ck_cache_informer_t *inf);
/* Borrowed: "deployments.apps", "pods", "foos.samplecontroller.k8s.io". */
CKUBE_API const char *ck_cache_informer_name(const ck_cache_informer_t *inf);

/*
 * client-go's SharedInformer.LastSyncResourceVersion: the resourceVersion of the
 * last list, watch event or bookmark the informer's reflector received ("" before
 * the first list completed). Returns a new string, free with free(). Any thread.
 */
CKUBE_API char *ck_cache_informer_last_sync_resource_version(ck_cache_informer_t *inf);

/*
 * Starts caching part id (the caller's number, unique among the informer's parts) of
 * an informer made with opts.shard_parts: the objects whose shard field hashes into
 * range, listed and watched on their own (merged: see opts.shard_parts). Returns 0,
 * or -1 with *err (not a parted
 * informer, id already a part, empty range, shut down, or called from a handler).
 * Loop thread.
 */
CKUBE_API int ck_cache_informer_add_part(ck_cache_informer_t *inf, uint32_t id,
                                         ck_shard_range_t range, char **err);
/*
 * Stops part id's watch and drops its objects from the store WITHOUT telling the
 * handlers: nothing was deleted, the range is simply no longer this cache's (a
 * handler that keeps its own state per object must not expect a delete). Its
 * deltas still queued are dropped. Unknown id: a no-op. Loop thread, not from a
 * handler.
 */
CKUBE_API void ck_cache_informer_remove_part(ck_cache_informer_t *inf, uint32_t id);
/* Whether part id's first list is in the store and was told to the handlers (false
 * for an unknown id). Any thread. */
CKUBE_API bool ck_cache_informer_part_synced(ck_cache_informer_t *inf, uint32_t id);

/* Figures for metrics. Any thread. */
/*
 * Who applies an informer's shard selector. The API server echoes the selector in
 * a built-in resource's list (metadata.shardInfo) but not in a custom resource's
 * (v1.37), and not at all in a streaming list, so the informer judges by what
 * arrives instead, the same way for every resource: any object outside the
 * selector that reaches it means the server did not filter (CLIENT); a list or
 * streaming list that brought objects, none of them outside, means it did
 * (SERVER); an empty one proves nothing and changes nothing. A server that
 * later stops filtering (restarted without the gate) turns it to CLIENT.
 */
typedef enum ck_cache_shard_mode {
	CK_CACHE_SHARD_NONE = 0,    /* no shard selector */
	CK_CACHE_SHARD_UNKNOWN = 1, /* before the first list completed */
	CK_CACHE_SHARD_SERVER = 2,  /* the server filters; the client check found nothing */
	CK_CACHE_SHARD_CLIENT = 3,  /* the server sent everything; the client filters */
} ck_cache_shard_mode_t;

/* "none", "unknown", "server-side", "client-side". */
CKUBE_API const char *ck_cache_shard_mode_name(ck_cache_shard_mode_t m);

typedef struct ck_cache_stats {
	uint64_t objects;           /* in the store */
	uint64_t lists;             /* lists started (all pages of one list count once) */
	uint64_t relists;           /* lists after the first */
	uint64_t watch_restarts;    /* watch requests after the first */
	uint64_t watch_stalls;      /* watches replaced for delivering nothing */
	uint64_t errors;            /* failed list/watch attempts */
	uint64_t events;            /* watch events received (bookmarks included) */
	uint64_t deltas;            /* deltas processed */
	int64_t last_event_wall_ns; /* wall time of the last watch event or list; 0 = never */
	bool synced;
	/* The consistency check (opts.consistency_check_ms); zeroes when it is off. */
	uint64_t consistency_checks;    /* comparisons completed */
	uint64_t consistency_skipped;   /* rounds skipped: compacted, never quiet, list failed */
	uint64_t consistency_divergent; /* comparisons that found a difference */
	uint64_t consistency_last_diff; /* objects that differed in the last comparison */
	/* Sharding (opts.shard_selector): who filters, and what the client dropped. */
	ck_cache_shard_mode_t shard_mode;
	uint64_t shard_dropped; /* listed objects and watch events outside the selector */
} ck_cache_stats_t;
CKUBE_API void ck_cache_informer_stats(ck_cache_informer_t *inf, ck_cache_stats_t *out);

/* ================================================================ listers */

/*
 * A read-only view of an informer's store for sync functions (any thread).
 * Every returned object is a new reference (ck_obj_unref when done).
 */
typedef struct ck_cache_lister ck_cache_lister_t;

/* Borrowed, valid as long as the informer; NULL for a NULL informer. */
CKUBE_API const ck_cache_lister_t *ck_cache_informer_lister(ck_cache_informer_t *inf);
/* A new reference, or NULL when not found (the only failure). ns "" or NULL if cluster-scoped. */
CKUBE_API ck_obj_t *ck_cache_lister_get(const ck_cache_lister_t *l, const char *ns,
                                        const char *name);
/* Every object matching sel (NULL = all) into *out. */
CKUBE_API void ck_cache_lister_list(const ck_cache_lister_t *l, const ck_cache_selector_t *sel,
                                    ck_cache_objs_t *out);
/* The objects of namespace ns matching sel (NULL = all), via the namespace index;
 * ns "" or NULL is every namespace (metav1.NamespaceAll), as ListAllByNamespace. */
CKUBE_API void ck_cache_lister_list_ns(const ck_cache_lister_t *l, const char *ns,
                                       const ck_cache_selector_t *sel, ck_cache_objs_t *out);

/* ================================================================ factory */

/*
 * One informer per resource -- group, version and resource (plural) -- shared by
 * every handler that asks for it, all with the factory's options (namespace,
 * selectors, list-option tweak, transform, resync: client-go's
 * NewSharedInformerFactoryWithOptions with WithNamespace, WithTweakListOptions and
 * WithTransform). Sharing goes by what the descriptor names, not by its
 * address: two modules with their own, equal descriptors of a kind (ck_type_equal,
 * types.h) get the same informer, one list/watch, one cache. The informer (and its
 * objects' ->type) keeps the first descriptor asked for; the accessors and field
 * indexes of any equal one read those objects alike.
 *
 * A descriptor of a resource the factory already serves but with a different
 * field list (or a different kind, scope or keep_annotations) is refused: its
 * reader would find its fields absent in every object. ck_cache_factory_informer_err
 * then returns NULL and says why in *err, naming the resource and the first
 * difference; ck_cache_factory_informer returns NULL and logs that as the error
 * line "Shared informer refused" (resource=..., group=...). Use one descriptor
 * per resource in a process, or a second factory (with its own watch) for the other.
 */
typedef struct ck_cache_factory ck_cache_factory_t;

/* A zero or NULL member means the default its comment names. */
typedef struct ck_cache_factory_opts {
	uint64_t default_resync_ms; /* the daemon uses 30000; 0 = no resync */
	const char *ns;             /* restrict every informer to one namespace; NULL = all */
	const char *label_selector;
	const char *field_selector;
	ck_cache_streaming_t streaming_list; /* default on, see ck_cache_streaming_t */
	ck_cache_watch_error_fn on_watch_error;
	void *watch_error_ud;
	const ck_clk_t *clock;
	/* Builds the list/watch source instead of the client (tests): returns a new source. */
	ck_cache_lw_t *(*lw_new)(void *ud, const ck_type_t *t, const char *ns);
	void *lw_ud;
	/* Tuning passed to every informer (see ck_cache_informer_opts_t); 0 = default. */
	uint32_t backoff_initial_ms, backoff_max_ms, stall_margin_ms;
	/* Every informer's consistency check period (ck_cache_informer_opts_t); 0 = off. */
	uint64_t consistency_check_ms;
	/* client-go's WithTransform: the transform of every informer the factory creates. */
	ck_cache_transform_fn transform;
	void *transform_ud;
	/*
	 * client-go's WithTweakListOptions: called (loop thread) on a copy of the options
	 * of every list and watch request of every informer of the factory, after ns and
	 * the selectors above were applied. It may set label_selector/field_selector to
	 * strings it keeps alive as long as the factory; it must leave resourceVersion,
	 * continue, limit and the watch fields alone (the reflector's protocol).
	 */
	void (*tweak_list_opts)(void *ud, ck_list_opts_t *o);
	void *tweak_ud;
	/* Every informer's shard selector (ck_cache_informer_opts_t; borrowed, copied). */
	const ck_shard_selector_t *shard_selector;
	/* Every informer in parts (ck_cache_informer_opts_t.shard_parts), given with
	 * ck_cache_factory_add_part(); a cluster-scoped resource is not split by
	 * namespace (its objects all hash ""): its informer caches it whole. */
	bool shard_parts;
	ck_shard_field_t shard_field;
} ck_cache_factory_opts_t;

/*
 * Borrows loop, c (may be NULL when o->lw_new is set) and o (copied, strings
 * too). Returns a new factory, free with ck_cache_factory_free. Loop thread.
 */
CKUBE_API ck_cache_factory_t *ck_cache_factory_new(struct ev_loop *loop, ck_client_t *c,
                                                   const ck_cache_factory_opts_t *o);
/* Shuts down and frees every informer, then f. NULL is a no-op. Loop thread; before
 * ck_client_free. */
CKUBE_API void ck_cache_factory_free(ck_cache_factory_t *f);
/*
 * The informer for t's resource (borrowed, owned by the factory), created on
 * first use. Borrows t (must outlive f when it creates the informer). Returns
 * NULL with *err (a new string, free with free(); err may be NULL) when t keeps
 * other fields than the descriptor the informer was made with (see above), when
 * there is neither a client nor lw_new, or when lw_new returns NULL. Loop thread.
 */
CKUBE_API ck_cache_informer_t *ck_cache_factory_informer_err(ck_cache_factory_t *f,
                                                             const ck_type_t *t, char **err);
/* The same, logging the reason for a NULL (the "Shared informer refused" line). */
CKUBE_API ck_cache_informer_t *ck_cache_factory_informer(ck_cache_factory_t *f, const ck_type_t *t);
/* Starts every informer not yet started (call again after adding informers). Loop thread. */
CKUBE_API int ck_cache_factory_start(ck_cache_factory_t *f, char **err);
/*
 * Waits until every informer has synced (timeout_ms overall, < 0 no limit).
 * Returns 0, or -1 with *reason (new string) listing each informer that did not
 * sync and why. Any thread except the loop thread.
 */
CKUBE_API int ck_cache_factory_wait_synced(ck_cache_factory_t *f, int64_t timeout_ms,
                                           char **reason);
/* NULL when all synced, else a new string naming what blocks. Any thread. */
CKUBE_API char *ck_cache_factory_sync_reason(ck_cache_factory_t *f);
/* Shuts every informer down (see ck_cache_informer_shutdown). Loop thread. */
CKUBE_API void ck_cache_factory_shutdown(ck_cache_factory_t *f);
/*
 * shard_parts: every split informer, now and made later, caches part id covering
 * range too (ck_cache_informer_add_part); all or none. 0, or -1 with *err. Loop thread.
 */
CKUBE_API int ck_cache_factory_add_part(ck_cache_factory_t *f, uint32_t id, ck_shard_range_t range,
                                        char **err);
/* Every split informer drops part id (ck_cache_informer_remove_part: the handlers
 * are not told). Unknown id: a no-op. Loop thread. */
CKUBE_API void ck_cache_factory_remove_part(ck_cache_factory_t *f, uint32_t id);
/* Whether every split informer has part id's first list in its store and told. Any
 * thread. */
CKUBE_API bool ck_cache_factory_part_synced(ck_cache_factory_t *f, uint32_t id);

#endif
