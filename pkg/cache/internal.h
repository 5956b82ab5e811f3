/*
 * internal: what the files of pkg/cache share and the unit tests reach into.
 * Not part of the public API (cache.h); nothing outside pkg/cache and its tests
 * includes this.
 *
 *   chash      open-addressing hash table of {hash, pointer} slots
 *   keys       hashing and comparing store keys without building the string
 *   backoff    the reflector's retry delay, a pure function of a clock reading
 *   dq         the delta queue (client-go RealFIFO, atomic events), loop thread only
 *   reflector  list, then watch, with relist/backoff/stall logic
 *   check      the periodic consistency check of a store against the server
 *   test hooks run timers and processing by hand with a fake clock
 */
#ifndef CKUBE_CACHE_INTERNAL_H
#define CKUBE_CACHE_INTERNAL_H

#include "pkg/log/log_internal.h"
#include <ckube/cache.h>
#include <ckube/log.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ev_loop;

/* ---------------------------------------------------------------- chash */

/*
 * Linear probing over a power-of-two array; an empty slot has p == NULL;
 * deletion shifts the following cluster back (no tombstones), so lookups stay
 * short under churn. The hash is stored so that growing never recomputes it.
 */
typedef struct chash_slot {
	uint64_t h;
	void *p;
} chash_slot_t;

typedef struct chash {
	chash_slot_t *slots;
	size_t cap; /* 0 or a power of two */
	size_t len;
} chash_t;

typedef bool (*chash_eq_fn)(const void *p, const void *key);

/* Returns the slot index holding a match, or SIZE_MAX. Borrows everything. */
size_t chash_find(const chash_t *t, uint64_t h, chash_eq_fn eq, const void *key);
/* Inserts p (not NULL) without looking for a duplicate; grows as needed. */
void chash_insert(chash_t *t, uint64_t h, void *p);
/* Removes the slot at idx; may shrink the table (invalidates indexes). */
void chash_remove_at(chash_t *t, size_t idx);
/* Finds p by pointer identity under hash h and removes it. Returns true if found. */
bool chash_remove_ptr(chash_t *t, uint64_t h, const void *p);
/* Frees the slots (not what they point to) and zeroes t. */
void chash_free(chash_t *t);
/* Bytes of the slot array. */
static inline size_t chash_bytes(const chash_t *t)
{
	return t->cap * sizeof(chash_slot_t);
}

uint64_t chash_ptr_hash(const void *p);

/* ---------------------------------------------------------------- keys */

/* true if the object's key has a namespace part (as ck_obj_key decides). */
static inline bool cache_obj_has_ns(const ck_obj_t *o)
{
	return o->ns[0] != '\0' && o->type->namespaced;
}
/* A key-trace line (ck_log_set_trace_key) when o's key is the traced one; off, o is
 * not even read. The steps are listed in docs/informers.md. */
#define CACHE_TRACE(o, step, ...)                                                                  \
	LOG_TRACE_PARTS(cache_obj_has_ns(o) ? (o)->ns : NULL, (o)->name, (step), ##__VA_ARGS__)
/* Hash of the object's store key, equal to cache_key_hash() of ck_obj_key(). */
uint64_t cache_obj_key_hash(const ck_obj_t *o);
/* Hash of a key string of len bytes. */
uint64_t cache_key_hash(const char *key, size_t len);
/* true if the object's key is exactly key[0..len). */
bool cache_obj_key_eq(const ck_obj_t *o, const char *key, size_t len);
/* true if a and b have the same key. */
bool cache_obj_same_key(const ck_obj_t *a, const ck_obj_t *b);

/* A key written into a small buffer, or a heap one when long (bad input). */
typedef struct cache_keybuf {
	char *s;
	size_t len;
	char small[320];
} cache_keybuf_t;
void cache_keybuf_set(cache_keybuf_t *kb, const ck_obj_t *o);
void cache_keybuf_free(cache_keybuf_t *kb);

/* ---------------------------------------------------------------- store (internal) */

/*
 * Writer-side operations used by the informer's delta processing. They lock
 * like the public ones; the _nolock readers are for the single writer thread,
 * which may read without the lock because nobody else writes.
 */
ck_obj_t *cache_store_get_obj_nolock(ck_cache_store_t *s, const ck_obj_t *like);
/* Removes the entry with obj's key; returns the store's reference or NULL. */
ck_obj_t *cache_store_delete_obj(ck_cache_store_t *s, const ck_obj_t *obj);
/* Calls fn for every object without locking (writer thread only). */
void cache_store_foreach_nolock(ck_cache_store_t *s, void (*fn)(void *ud, ck_obj_t *obj), void *ud);
/* Snapshot of every object (new refs), without locking (writer thread only). */
void cache_store_list_nolock(ck_cache_store_t *s, ck_cache_objs_t *out);
/* The lister view of a store (the same pointer, narrowed). */
const ck_cache_lister_t *cache_lister_from_store(ck_cache_store_t *s);

/* ---------------------------------------------------------------- backoff */

typedef struct cache_backoff {
	uint64_t initial_ns;
	uint64_t max_ns;
	uint64_t reset_ns; /* quiet time after which the next delay starts over */
	double jitter;     /* delay = base + rnd * jitter * base */
	uint64_t base_ns;  /* the next un-jittered delay */
	uint64_t last_ns;  /* when the last delay was handed out */
	bool used;
} cache_backoff_t;

void cache_backoff_init(cache_backoff_t *b, uint64_t initial_ns, uint64_t max_ns, uint64_t reset_ns,
                        double jitter);
/*
 * Returns the delay before the next retry, given the clock reading now_ns and a
 * random rnd in [0, 1). The un-jittered base doubles from initial to max; if no
 * delay was handed out for reset_ns (the source was healthy that long), it
 * starts over at initial.
 */
uint64_t cache_backoff_next(cache_backoff_t *b, uint64_t now_ns, double rnd);

/* A watch's server-side timeout in seconds, uniform in [min_s, max_s). */
int64_t cache_watch_timeout_s(int64_t min_s, int64_t max_s, double rnd);
/* The time after which a watch that has delivered nothing since last_ns is dead. */
static inline uint64_t cache_watch_stall_deadline(uint64_t last_ns, int64_t timeout_s,
                                                  uint64_t margin_ns)
{
	return last_ns + (uint64_t)timeout_s * CK_NS_PER_SEC + margin_ns;
}

/* ---------------------------------------------------------------- delta queue */

/*
 * client-go's RealFIFO with atomic events (AtomicFIFO): one entry per thing the
 * reflector said, in the order it said it. A relist is one ReplacedAll entry
 * (the whole list) and a resync one SyncAll entry; the informer turns them into
 * notifications against its store when it reaches them (delta.c).
 */
typedef enum cache_delta_type {
	CACHE_DELTA_ADDED,
	CACHE_DELTA_UPDATED,
	CACHE_DELTA_DELETED,
	CACHE_DELTA_REPLACED_ALL,
	CACHE_DELTA_SYNC_ALL,
} cache_delta_type_t;

const char *cache_delta_type_name(cache_delta_type_t t);

/* 16 bytes: a delta costs its slot in the ring and nothing else. */
typedef struct cache_delta {
	uint8_t type;  /* cache_delta_type_t */
	uint16_t part; /* REPLACED_ALL: the informer part's tag whose list it is; 0 = all */
	uint32_t n;    /* REPLACED_ALL: items */
	union {
		ck_obj_t *obj;    /* ADDED, UPDATED, DELETED: one reference */
		ck_obj_t **items; /* REPLACED_ALL: the array (malloc'd) and a reference each */
	};
} cache_delta_t;

typedef struct cache_dq {
	cache_delta_t *ring; /* cap slots, a power of two (or 0) */
	size_t cap, head, len;
	bool populated; /* something was queued or a Replace happened */
	size_t initial; /* deltas of the first Replace (and before it) not yet done */
	uint64_t queued_total;
} cache_dq_t;

void cache_dq_init(cache_dq_t *q);
/* Drops everything queued and frees the queue's memory. */
void cache_dq_free(cache_dq_t *q);
/* Queues Added, Updated or Deleted for obj (takes obj). A Deleted is queued
 * whether or not the key was ever seen, as client-go's RealFIFO does. */
void cache_dq_add(cache_dq_t *q, cache_delta_type_t type, ck_obj_t *obj);
/* A (re)list's result as one ReplacedAll: takes items (the array too). part: the
 * tag of the informer part it lists (0 = the whole informer). */
void cache_dq_replace(cache_dq_t *q, ck_obj_t **items, size_t n, uint16_t part);
/* Queues one SyncAll (a no-op if the newest queued delta is already one). */
void cache_dq_resync(cache_dq_t *q);
/*
 * Removes the oldest delta into *out (its references pass to the caller; free
 * them with cache_dq_delta_free) and returns true, or false when empty.
 * *initial is set to whether it belongs to the first list (client-go's
 * isInInitialList). Call cache_dq_done once it is fully processed.
 */
bool cache_dq_pop(cache_dq_t *q, cache_delta_t *out, bool *initial);
/* The popped delta is processed: it no longer holds up has_synced. */
void cache_dq_done(cache_dq_t *q);
/* Drops a popped delta's references. */
void cache_dq_delta_free(cache_delta_t *d);
/* Deltas queued. */
static inline size_t cache_dq_len(const cache_dq_t *q)
{
	return q->len;
}
/* true once the first Replace, and everything queued before it, is done. */
static inline bool cache_dq_has_synced(const cache_dq_t *q)
{
	return q->populated && q->initial == 0;
}

/* ---------------------------------------------------------------- store replace */

/*
 * Replacing the store's whole content in one step, for a relist: the new
 * table and indexes are built beside the old ones (in as many add calls as
 * wanted), then commit swaps them in under the write lock, so that a reader
 * sees the old content or the new, never a mix. Writer thread only, and the
 * store must not be written between begin and commit/abort.
 */
typedef struct cache_store_repl cache_store_repl_t;

/* Starts a replacement of s's content. */
cache_store_repl_t *cache_store_replace_begin(ck_cache_store_t *s);
/* Adds items[0..n) (borrowed; the new content takes its own references). olds[i]
 * receives a reference to the object items[i] will replace (NULL if its key is
 * absent now). A key listed twice: the later object wins. */
void cache_store_replace_add(cache_store_repl_t *r, ck_obj_t *const *items, size_t n,
                             ck_obj_t **olds);
/* Swaps the new content in and frees r. gone (overwritten) receives references
 * to the objects whose keys are not in the new content. */
void cache_store_replace_commit(cache_store_repl_t *r, ck_cache_objs_t *gone);
/* Drops the new content and r (NULL is a no-op); the store is untouched. */
void cache_store_replace_abort(cache_store_repl_t *r);

/* ---------------------------------------------------------------- reflector */

typedef struct cache_reflector cache_reflector_t;

/* What the reflector feeds; all calls on the loop thread. */
typedef struct cache_reflector_sink {
	/* A complete (re)list: takes the references in items and the array. */
	void (*replace)(void *ud, ck_obj_t **items, size_t n, const char *rv);
	/* ADDED, MODIFIED or DELETED; takes obj. */
	void (*event)(void *ud, ck_watch_type_t type, ck_obj_t *obj);
	/* A failed attempt: msg borrowed, res borrowed (may be NULL), healing = a retry may
	 * succeed (false for 401/403/404). */
	void (*error)(void *ud, const char *msg, const ck_result_t *res, bool healing);
	/* The reflector's deadline changed: re-arm the timer. */
	void (*rearm)(void *ud);
} cache_reflector_sink_t;

typedef struct cache_reflector_opts {
	const char *name; /* for messages: "deployments.apps" */
	const char *label_selector;
	const char *field_selector;
	uint32_t page_size;
	ck_cache_streaming_t streaming_list; /* DEFAULT: on unless lw->no_watch_list */
	uint64_t backoff_initial_ns, backoff_max_ns, backoff_reset_ns;
	int64_t watch_timeout_min_s, watch_timeout_max_s;
	uint64_t stall_margin_ns;
	const ck_shard_selector_t *shard; /* copied; NULL = no sharding */
} cache_reflector_opts_t;

typedef struct cache_reflector_stats {
	uint64_t lists;          /* list operations started (every page counts once per list) */
	uint64_t lists_done;     /* completed (Replace delivered) */
	uint64_t relists;        /* lists after the first */
	uint64_t watches;        /* watch requests started */
	uint64_t watch_restarts; /* watch requests after the first */
	uint64_t stalls;         /* watches replaced because they delivered nothing */
	uint64_t errors;         /* failed attempts */
	uint64_t events;         /* watch events received (bookmarks included) */
	int64_t last_event_wall_ns;
	ck_cache_shard_mode_t shard_mode;
	uint64_t shard_dropped;
} cache_reflector_stats_t;

/* Borrows lw, clk, sink (must outlive it); copies opts. */
cache_reflector_t *cache_reflector_new(ck_cache_lw_t *lw, const ck_clk_t *clk,
                                       const cache_reflector_opts_t *o,
                                       const cache_reflector_sink_t *sink, void *ud);
/* Starts the first list. */
void cache_reflector_start(cache_reflector_t *r);
/* Cancels anything in flight; no sink call afterwards. */
void cache_reflector_stop(cache_reflector_t *r);
void cache_reflector_free(cache_reflector_t *r);
/* The time (clock ns) at which cache_reflector_tick has work, UINT64_MAX if none. */
uint64_t cache_reflector_deadline(const cache_reflector_t *r);
/* Runs what is due at now_ns: a retry after backoff, a stalled or ERRORed watch. */
void cache_reflector_tick(cache_reflector_t *r, uint64_t now_ns);
/* Thread-safe copy of the counters. */
void cache_reflector_stats(const cache_reflector_t *r, cache_reflector_stats_t *out);
/* true while a watch is established (not listing, backing off, or still in a
 * streaming list's initial events): client-go resyncs only then. */
bool cache_reflector_watching(const cache_reflector_t *r);
/* Who applies its shard selector (any thread). */
ck_cache_shard_mode_t cache_reflector_shard_mode(const cache_reflector_t *r);
/* Borrowed, loop thread: the last resourceVersion seen ("" before the first list). */
const char *cache_reflector_last_rv(const cache_reflector_t *r);
/* true while the current round fell back from a streaming list to list+watch. */
bool cache_reflector_streaming_refused(const cache_reflector_t *r);

/* ---------------------------------------------------------------- consistency check */

/* A periodic comparison of an informer's store with the server (consistency.c). */
typedef struct cache_check cache_check_t;

typedef struct cache_check_kv {
	char *key, *rv; /* owned */
} cache_check_kv_t;

typedef struct cache_check_diff {
	size_t missing; /* on the server, not cached */
	size_t extra;   /* cached, not on the server */
	size_t stale;   /* both, with another resourceVersion */
	char *sample;   /* new string: the first few keys ("stale ns/a, missing ns/b") */
} cache_check_diff_t;

typedef struct cache_check_stats {
	uint64_t checks;           /* comparisons completed */
	uint64_t skipped;          /* rounds skipped (compacted, never quiet, list failed) */
	uint64_t divergent_checks; /* comparisons that found a difference */
	uint64_t last_divergent;   /* objects that differed in the last comparison */
} cache_check_stats_t;

/* Sorts both arrays by key (borrowed) and counts the differences into *out. */
void cache_check_compare(cache_check_kv_t *cached, size_t nc, cache_check_kv_t *server, size_t ns,
                         cache_check_diff_t *out);
/* Borrows inf, loop, lw (must outlive it); copies the selectors (shard may be
 * NULL: the server's objects outside it are not expected in the store). Not started. */
cache_check_t *cache_check_new(ck_cache_informer_t *inf, struct ev_loop *loop, ck_cache_lw_t *lw,
                               const char *label_selector, const char *field_selector,
                               const ck_shard_selector_t *shard, uint64_t period_ms);
/* Arms the first round one period from now. Loop thread. */
void cache_check_start(cache_check_t *c);
/* Starts a round now if nothing is queued (tests). Returns true if it started. */
bool cache_check_run_now(cache_check_t *c);
/* Cancels the round in flight and the timer. NULL is a no-op. */
void cache_check_stop(cache_check_t *c);
void cache_check_free(cache_check_t *c);
/* Any thread. NULL gives zeroes. */
void cache_check_stats(const cache_check_t *c, cache_check_stats_t *out);
/* The informer's check, or NULL when its period is 0 (tests). */
cache_check_t *cache_informer_check(ck_cache_informer_t *inf);

/* ---------------------------------------------------------------- test hooks */

/* Runs the informer's timers against its clock now (a fake clock in tests). */
void cache_informer_tick(ck_cache_informer_t *inf);
/* Processes queued deltas and late-handler adds until nothing is left. */
void cache_informer_drain(ck_cache_informer_t *inf);
/* Deltas queued, notifications of the one in progress and late-handler catch-up
 * not yet delivered. */
size_t cache_informer_pending(ck_cache_informer_t *inf);
/* The informer's reflector (borrowed). */
cache_reflector_t *cache_informer_reflector(ck_cache_informer_t *inf);
/* Part id's reflector (opts.shard_parts), or NULL. */
cache_reflector_t *cache_informer_part_reflector(ck_cache_informer_t *inf, uint32_t id);

#endif
