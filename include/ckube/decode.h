/*
 * decode: streaming JSON -> ck_obj_t, straight from the bytes the transport hands
 * over (yajl callbacks, no DOM, no line or whole-body buffering). A chunk may end
 * anywhere, even inside a UTF-8 sequence or a number.
 *
 * Three shapes:
 *   CK_DEC_OBJECT  one object (GET, create, update answers)
 *   CK_DEC_LIST    a List: items are emitted one by one as each completes; the
 *                list's metadata (resourceVersion, continue, remainingItemCount)
 *                is emitted exactly once, when its object closes (before the
 *                items in the API server's output), else at the end of the list
 *   CK_DEC_WATCH   a watch stream: newline-separated {"type":..,"object":..}
 *                events, emitted one by one
 * An object larger than max_object_bytes of input is an error, not an OOM, and
 * so is JSON nested deeper than CK_DEC_MAX_DEPTH: memory stays bounded whatever
 * the input, inside objects or outside them.
 */
#ifndef CKUBE_KUBE_DECODE_H
#define CKUBE_KUBE_DECODE_H

#include <ckube/export.h>

#include <ckube/obj.h>
#include <ckube/status.h>

#include <stddef.h>
#include <stdint.h>

typedef enum ck_dec_mode {
	CK_DEC_OBJECT,
	CK_DEC_LIST,
	CK_DEC_WATCH,
} ck_dec_mode_t;

typedef enum ck_watch_type {
	CK_WATCH_ADDED,
	CK_WATCH_MODIFIED,
	CK_WATCH_DELETED,
	CK_WATCH_BOOKMARK,
	CK_WATCH_ERROR,
} ck_watch_type_t;

/* Returns "ADDED", ... */
CKUBE_API const char *ck_watch_type_name(ck_watch_type_t t);

typedef struct ck_dec_cb {
	/* CK_DEC_OBJECT / CK_DEC_LIST: one decoded object. Takes obj (unref when done). */
	void (*on_object)(void *ud, ck_obj_t *obj);
	/* CK_DEC_LIST: list metadata; strings borrowed for the call; remaining -1 if absent. */
	void (*on_list_meta)(void *ud, const char *rv, const char *cont, int64_t remaining);
	/*
	 * CK_DEC_WATCH: one event. For ADDED/MODIFIED/DELETED/BOOKMARK, takes obj (a
	 * BOOKMARK's object has only metadata; its annotations are always kept so
	 * k8s.io/initial-events-end is visible). For ERROR, obj is NULL and status
	 * (borrowed) holds the decoded metav1.Status.
	 */
	void (*on_event)(void *ud, ck_watch_type_t type, ck_obj_t *obj, const ck_status_t *status);
} ck_dec_cb_t;

typedef struct ck_dec ck_dec_t;

#define CK_DEC_DEFAULT_MAX_OBJECT (64u * 1024u * 1024u)
/*
 * Deepest nesting of arrays and maps accepted, counted from the outermost value
 * (a List or watch event counts as levels too). Kubernetes objects stay far
 * below it; without it a body of brackets grows yajl's stack with the input.
 */
#define CK_DEC_MAX_DEPTH 256

/* Borrows t and cb (must outlive the decoder). Returns a new decoder, free with ck_dec_free(). */
CKUBE_API ck_dec_t *ck_dec_new(const ck_type_t *t, ck_dec_mode_t mode, const ck_dec_cb_t *cb,
                               void *ud, size_t max_object_bytes);
/*
 * Feeds bytes. Callbacks run inside this call. Returns 0, or -1 with *err set
 * (malformed JSON with the byte offset and a short excerpt, an object over the
 * limit, an unknown watch event type). After an error the decoder is dead.
 * Malformed JSON is reported "after byte N": the input is valid up to N, which
 * does not depend on how the input was chunked, nor do the offsets of the other
 * errors. Outside objects (a List's own fields) max_object_bytes bounds each
 * value as if it were an object: the List's metadata, each value the decoder
 * skips, and each other token with the blanks before it.
 */
CKUBE_API int ck_dec_feed(ck_dec_t *d, const char *buf, size_t len, char **err);
/* Ends the input. Returns -1 with *err if the input was truncated. */
CKUBE_API int ck_dec_finish(ck_dec_t *d, char **err);
/* Total input bytes consumed so far. */
CKUBE_API uint64_t ck_dec_bytes(const ck_dec_t *d);
CKUBE_API void ck_dec_free(ck_dec_t *d);

/* Decodes one complete buffer as a single object. Returns a new ref or NULL with *err. */
CKUBE_API ck_obj_t *ck_dec_object(const ck_type_t *t, const char *buf, size_t len, char **err);

#endif
