/*
 * decode: streaming JSON -> kobj_t, straight from the bytes the transport hands
 * over (yajl callbacks, no DOM, no line or whole-body buffering). A chunk may end
 * anywhere, even inside a UTF-8 sequence or a number.
 *
 * Three shapes:
 *   KDEC_OBJECT  one object (GET, create, update answers)
 *   KDEC_LIST    a List: items are emitted one by one as each completes; the
 *                list's metadata (resourceVersion, continue, remainingItemCount)
 *                is emitted exactly once, when its object closes (before the
 *                items in the API server's output), else at the end of the list
 *   KDEC_WATCH   a watch stream: newline-separated {"type":..,"object":..}
 *                events, emitted one by one
 * An object larger than max_object_bytes of input is an error, not an OOM, and
 * so is JSON nested deeper than KDEC_MAX_DEPTH: memory stays bounded whatever
 * the input, inside objects or outside them.
 */
#ifndef CSC_KUBE_DECODE_H
#define CSC_KUBE_DECODE_H

#include "pkg/kube/obj.h"
#include "pkg/kube/status.h"

#include <stddef.h>
#include <stdint.h>

typedef enum kdec_mode {
	KDEC_OBJECT,
	KDEC_LIST,
	KDEC_WATCH,
} kdec_mode_t;

typedef enum kwatch_type {
	KWATCH_ADDED,
	KWATCH_MODIFIED,
	KWATCH_DELETED,
	KWATCH_BOOKMARK,
	KWATCH_ERROR,
} kwatch_type_t;

/* Returns "ADDED", ... */
const char *kwatch_type_name(kwatch_type_t t);

typedef struct kdec_cb {
	/* KDEC_OBJECT / KDEC_LIST: one decoded object. Takes obj (unref when done). */
	void (*on_object)(void *ud, kobj_t *obj);
	/* KDEC_LIST: list metadata; strings borrowed for the call; remaining -1 if absent. */
	void (*on_list_meta)(void *ud, const char *rv, const char *cont, int64_t remaining);
	/*
	 * KDEC_WATCH: one event. For ADDED/MODIFIED/DELETED/BOOKMARK, takes obj (a
	 * BOOKMARK's object has only metadata; its annotations are always kept so
	 * k8s.io/initial-events-end is visible). For ERROR, obj is NULL and status
	 * (borrowed) holds the decoded metav1.Status.
	 */
	void (*on_event)(void *ud, kwatch_type_t type, kobj_t *obj, const kstatus_t *status);
} kdec_cb_t;

typedef struct kdec kdec_t;

#define KDEC_DEFAULT_MAX_OBJECT (64u * 1024u * 1024u)
/*
 * Deepest nesting of arrays and maps accepted, counted from the outermost value
 * (a List or watch event counts as levels too). Kubernetes objects stay far
 * below it; without it a body of brackets grows yajl's stack with the input.
 */
#define KDEC_MAX_DEPTH 256

/* Borrows t and cb (must outlive the decoder). Returns a new decoder, free with kdec_free(). */
kdec_t *kdec_new(const ktype_t *t, kdec_mode_t mode, const kdec_cb_t *cb, void *ud,
                 size_t max_object_bytes);
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
int kdec_feed(kdec_t *d, const char *buf, size_t len, char **err);
/* Ends the input. Returns -1 with *err if the input was truncated. */
int kdec_finish(kdec_t *d, char **err);
/* Total input bytes consumed so far. */
uint64_t kdec_bytes(const kdec_t *d);
void kdec_free(kdec_t *d);

/* Decodes one complete buffer as a single object. Returns a new ref or NULL with *err. */
kobj_t *kdec_object(const ktype_t *t, const char *buf, size_t len, char **err);

#endif
