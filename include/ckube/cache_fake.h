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
 *   ck_cache_fake_lw_t *f = ck_cache_fake_lw_new();
 *   ck_cache_informer_t *inf = ck_cache_informer_new(loop, &t, ck_cache_fake_lw_source(f), &o);
 *   ck_cache_informer_start(inf, NULL);
 *   ck_cache_fake_req_t *l = ck_cache_fake_lw_last(f, false);   // the first list
 *   ck_cache_fake_req_item(l, obj);
 *   ck_cache_fake_req_meta(l, "100", NULL);
 *   ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
 *   ck_cache_fake_req_t *w = ck_cache_fake_lw_last(f, true);    // the watch from "100"
 *   ...
 *   ck_cache_informer_free(inf);
 *   ck_cache_fake_lw_free(f);
 */
#ifndef CKUBE_CACHE_FAKE_H
#define CKUBE_CACHE_FAKE_H

#include <ckube/export.h>

#include <ckube/cache.h>

typedef struct ck_cache_fake_lw ck_cache_fake_lw_t;
typedef struct ck_cache_fake_req ck_cache_fake_req_t;

/* Returns a new fake, free with ck_cache_fake_lw_free. */
CKUBE_API ck_cache_fake_lw_t *ck_cache_fake_lw_new(void);
/* Drops the test's reference (the source given to an informer holds its own). */
CKUBE_API void ck_cache_fake_lw_free(ck_cache_fake_lw_t *f);
/* Returns a new reference as a list/watch source; the informer takes it. */
CKUBE_API ck_cache_lw_t *ck_cache_fake_lw_source(ck_cache_fake_lw_t *f);

/* Number of list (watch = false) or watch requests started so far. */
CKUBE_API size_t ck_cache_fake_lw_count(const ck_cache_fake_lw_t *f, bool watch);
/* The most recent list or watch request (borrowed), or NULL. */
CKUBE_API ck_cache_fake_req_t *ck_cache_fake_lw_last(ck_cache_fake_lw_t *f, bool watch);
/* Whether the fake serves streaming lists with CK_CACHE_STREAMING_DEFAULT (it does
 * not, as client-go's fakes: set true to test the default). */
CKUBE_API void ck_cache_fake_lw_set_watch_list(ck_cache_fake_lw_t *f, bool supported);
/* Makes the next list/watch call fail to start with err (borrowed, copied). */
CKUBE_API void ck_cache_fake_lw_fail_next_start(ck_cache_fake_lw_t *f, const char *err);

/* true while neither finished nor cancelled. */
CKUBE_API bool ck_cache_fake_req_active(const ck_cache_fake_req_t *r);
CKUBE_API bool ck_cache_fake_req_cancelled(const ck_cache_fake_req_t *r);
/* The options it was started with (strings owned by the fake; NULL = unset). */
CKUBE_API const ck_list_opts_t *ck_cache_fake_req_opts(const ck_cache_fake_req_t *r);

/* List: delivers one item (takes obj). Ignored (obj dropped) when not active. */
CKUBE_API void ck_cache_fake_req_item(ck_cache_fake_req_t *r, ck_obj_t *obj);
/* List: delivers the list metadata (borrowed; NULL = absent). */
CKUBE_API void ck_cache_fake_req_meta(ck_cache_fake_req_t *r, const char *rv, const char *cont);
/* Watch: delivers one event (takes obj). */
CKUBE_API void ck_cache_fake_req_event(ck_cache_fake_req_t *r, ck_watch_type_t type, ck_obj_t *obj);
/* Watch: delivers an ERROR event carrying a Status (strings borrowed). */
CKUBE_API void ck_cache_fake_req_error_event(ck_cache_fake_req_t *r, int code, const char *reason,
                                             const char *message);
/*
 * Ends the request: http_code 200 = success, 0 = transport error (no answer),
 * else a Status with reason/message (borrowed, may be NULL) and Retry-After.
 */
CKUBE_API void ck_cache_fake_req_finish(ck_cache_fake_req_t *r, int http_code, const char *reason,
                                        const char *message, int retry_after_s);
/*
 * Ends the request with a transport error: curl_code (CURLcode, e.g. 7 refused,
 * 28 timed out, 56 receive failure), head_code the HTTP status that had arrived
 * before it (200: cut mid-stream; 0: no answer), message borrowed.
 */
CKUBE_API void ck_cache_fake_req_finish_transport(ck_cache_fake_req_t *r, int curl_code,
                                                  int head_code, const char *message);

#endif
