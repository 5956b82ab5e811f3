/*
 * fake: an in-process list/watch source for tests of informers and of the
 * controllers built on them -- no network, no client, no API server.
 *
 * The test plays the API server by hand: each list or watch the reflector
 * starts is recorded as a request; the test reads its options, feeds it items,
 * list metadata, watch events, and ends it with a result. Callbacks run inside
 * those calls, on the calling (loop) thread. Requests stay valid until the fake
 * is freed, so a test may keep pointers across the reflector's retries.
 *
 *   cache_fake_lw_t *f = cache_fake_lw_new();
 *   cache_informer_t *inf = cache_informer_new(loop, &t, cache_fake_lw_source(f), &o);
 *   cache_informer_start(inf, NULL);
 *   cache_fake_req_t *l = cache_fake_lw_last(f, false);   // the first list
 *   cache_fake_req_item(l, obj);
 *   cache_fake_req_meta(l, "100", NULL);
 *   cache_fake_req_finish(l, 200, NULL, NULL, 0);
 *   cache_fake_req_t *w = cache_fake_lw_last(f, true);    // the watch from "100"
 *   ...
 *   cache_informer_free(inf);
 *   cache_fake_lw_free(f);
 */
#ifndef CSC_CACHE_FAKE_H
#define CSC_CACHE_FAKE_H

#include "pkg/cache/cache.h"

typedef struct cache_fake_lw cache_fake_lw_t;
typedef struct cache_fake_req cache_fake_req_t;

/* Returns a new fake, free with cache_fake_lw_free. */
cache_fake_lw_t *cache_fake_lw_new(void);
/* Drops the test's reference (the source given to an informer holds its own). */
void cache_fake_lw_free(cache_fake_lw_t *f);
/* Returns a new reference as a list/watch source; the informer takes it. */
cache_lw_t *cache_fake_lw_source(cache_fake_lw_t *f);

/* Number of list (watch = false) or watch requests started so far. */
size_t cache_fake_lw_count(const cache_fake_lw_t *f, bool watch);
/* The most recent list or watch request (borrowed), or NULL. */
cache_fake_req_t *cache_fake_lw_last(cache_fake_lw_t *f, bool watch);
/* Makes the next list/watch call fail to start with err (borrowed, copied). */
void cache_fake_lw_fail_next_start(cache_fake_lw_t *f, const char *err);

/* true while neither finished nor cancelled. */
bool cache_fake_req_active(const cache_fake_req_t *r);
bool cache_fake_req_cancelled(const cache_fake_req_t *r);
/* The options it was started with (strings owned by the fake; NULL = unset). */
const klist_opts_t *cache_fake_req_opts(const cache_fake_req_t *r);

/* List: delivers one item (takes obj). Ignored (obj dropped) when not active. */
void cache_fake_req_item(cache_fake_req_t *r, kobj_t *obj);
/* List: delivers the list metadata (borrowed; NULL = absent). */
void cache_fake_req_meta(cache_fake_req_t *r, const char *rv, const char *cont);
/* Watch: delivers one event (takes obj). */
void cache_fake_req_event(cache_fake_req_t *r, kwatch_type_t type, kobj_t *obj);
/* Watch: delivers an ERROR event carrying a Status (strings borrowed). */
void cache_fake_req_error_event(cache_fake_req_t *r, int code, const char *reason,
                                const char *message);
/*
 * Ends the request: http_code 200 = success, 0 = transport error (no answer),
 * else a Status with reason/message (borrowed, may be NULL) and Retry-After.
 */
void cache_fake_req_finish(cache_fake_req_t *r, int http_code, const char *reason,
                           const char *message, int retry_after_s);

#endif
