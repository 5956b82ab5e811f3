/*
 * Private to pkg/record: the event as the poster thread handles it, its JSON, the
 * LRU cache the correlator is built on, and the REST-client sink. Not public API.
 *
 * Design note: everything here runs on the poster thread only (the queue is the one
 * structure shared with callers), so the caches take no locks.
 */
#ifndef CKUBE_RECORD_REC_INTERNAL_H
#define CKUBE_RECORD_REC_INTERNAL_H

#include <ckube/base.h>
#include <ckube/record.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of a message kept (the limit events.k8s.io validates; client-go's too). */
#define REC_MAX_MESSAGE 1024
/* A DNS subdomain, which event names must be. */
#define REC_MAX_NAME 253

/* One core/v1 Event. Every string is owned (never NULL after rec_event_new). */
typedef struct rec_event {
	char *name; /* metadata.name; "" until the correlator names it */
	char *ns;   /* metadata.namespace */
	char *io_api_version;
	char *io_kind;
	char *io_ns;
	char *io_name;
	char *io_uid;
	char *io_rv;
	char *type;
	char *reason;
	char *message;
	int64_t first_ns; /* wall clock */
	int64_t last_ns;
	int32_t count;
} rec_event_t;

/* Source and reporting fields, the same for every event of a recorder. */
typedef struct rec_source {
	const char *component;
	const char *host;
	const char *reporting_controller;
	const char *reporting_instance;
} rec_source_t;

/*
 * Borrows every argument; returns a new event with count 1 at wall_ns, the message
 * already sanitised and cut (rec_message_clean), free with rec_event_free().
 */
rec_event_t *rec_event_new(const ck_record_ref_t *ref, const char *type, const char *reason,
                           const char *message, int64_t wall_ns);
/* Borrows e; returns a new deep copy, free with rec_event_free(). */
rec_event_t *rec_event_dup(const rec_event_t *e);
void rec_event_free(rec_event_t *e);
/* Takes msg (the old message is freed). */
void rec_event_set_message(rec_event_t *e, char *msg);

/*
 * Borrows s; returns a new string: invalid UTF-8 replaced by U+FFFD, cut to at most
 * max bytes without splitting a character. Free with free().
 */
char *rec_message_clean(const char *s, size_t max);

/*
 * Cache keys, as keyed 64-bit hashes (pkg/base/hash.h): the caches need equality
 * only, so no key string is built or kept. Each field is hashed on its own and
 * the hashes chained, so no two field lists give the same input; each kind of key
 * starts from its own value, so an aggregate key never equals an event key.
 *   event key:     source, involved object (with uid, apiVersion), type, reason, message
 *   aggregate key: the same without message, plus reporting controller and instance
 *   spam key:      source, involved object and type
 * Borrows s and e.
 */
uint64_t rec_key_event(const rec_source_t *s, const rec_event_t *e);
uint64_t rec_key_aggregate(const rec_source_t *s, const rec_event_t *e);
uint64_t rec_key_spam(const rec_source_t *s, const rec_event_t *e);
/* Hash of a message, for the aggregation record's set of distinct ones. Borrows msg. */
uint64_t rec_key_message(const char *msg);

/*
 * Returns a new event name "<object name>.<hex ns>" (free with free()), the object
 * part cut so that the whole stays a valid DNS subdomain length.
 */
char *rec_event_name(const char *obj_name, int64_t ns);

/* Appends the complete core/v1 Event JSON for a create to out. Borrows s and e. */
void rec_json_create(ck_sbuf_t *out, const rec_source_t *s, const rec_event_t *e);
/* Appends the count/lastTimestamp/message patch to out. Borrows e. */
void rec_json_patch(ck_sbuf_t *out, const rec_event_t *e);
/* The same for events.k8s.io/v1: an Event (series once count > 1) and a series patch. */
void rec_json_create_v1(ck_sbuf_t *out, const rec_source_t *s, const rec_event_t *e);
void rec_json_patch_v1(ck_sbuf_t *out, const rec_event_t *e);

/*
 * An LRU cache of at most cap entries keyed by 64-bit hashes, each holding a value
 * of val_size bytes (8-byte aligned) inside the entry. get() makes the entry the
 * most recent; put() of a new key evicts the least recent entry when full. free_val
 * (may be NULL) is called on a value whose entry is evicted, replaced or freed with
 * the cache; it must not free the value itself (the cache owns that memory) -- only
 * what the value points to.
 */
typedef struct rec_lru rec_lru_t;
typedef void (*rec_lru_free_fn)(void *ud, void *val);
/* Returns a new cache, free with rec_lru_free() (which calls free_val on every value). */
rec_lru_t *rec_lru_new(size_t cap, size_t val_size, rec_lru_free_fn free_val, void *ud);
void rec_lru_free(rec_lru_t *l);
/*
 * Returns the value under key (owned by the cache: valid until its entry is
 * evicted, replaced or the cache freed) or NULL, and marks it most recent.
 */
void *rec_lru_get(rec_lru_t *l, uint64_t key);
/* The same without changing the order. */
void *rec_lru_peek(rec_lru_t *l, uint64_t key);
/*
 * Returns a zeroed value under key, the most recent (owned by the cache, as above):
 * a new entry, after evicting the least recent one when the cache is full; or, when
 * key is there, its entry with the old value passed to free_val first.
 */
void *rec_lru_put(rec_lru_t *l, uint64_t key);
size_t rec_lru_len(const rec_lru_t *l);
/* Calls fn on every value, most recent first; fn must not change the cache. */
void rec_lru_foreach(rec_lru_t *l, void (*fn)(void *ud, void *val), void *ud);

/*
 * The sink that writes through the REST client's blocking calls: its state, the
 * API its writes go to (the recorder picks it before building a body) and the
 * HTTP code of the last write (the recorder falls back to core/v1 on a 403 from
 * events.k8s.io: RBAC written for core/v1 events only).
 */
typedef struct rec_kclient {
	ck_client_t *c;
	ck_record_api_t api; /* CK_RECORD_API_CORE_V1 or CK_RECORD_API_EVENTS_V1 */
	int last_http;
} rec_kclient_t;
/* Borrows kc (must outlive the sink); kc->c must be set. */
void rec_sink_kclient(rec_kclient_t *kc, ck_record_sink_t *out);
/*
 * Discovery, as client-go's NewEventBroadcasterAdapter: events.k8s.io/v1 when
 * GET /apis/events.k8s.io/v1 answers, else core/v1 -- whatever the failure.
 * *why (if not NULL) gets a new string saying what the answer was.
 */
ck_record_api_t rec_kclient_discover(rec_kclient_t *kc, char **why);

#endif
