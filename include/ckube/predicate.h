/*
 * predicate: which events of an informer a handler sees, as controller-runtime's
 * predicates (predicate.Funcs, GenerationChangedPredicate, ...) passed to
 * builder.WithPredicates / WithEventFilter.
 *
 * A predicate judges one event: an add (create), an update (the old and the new
 * state) or a delete (the last state known). A NULL member passes every event
 * of its sort. A predicate handler calls the wrapped handler only when every one
 * of its predicates passes (logical AND); unlike the filtering handler of
 * cache.h, an update that fails is dropped, never turned into an add or a
 * delete: a predicate says whether a change is worth a reconcile, not which
 * objects exist.
 *
 * The ready-made ones pass every add and delete and judge updates only:
 *   ck_predicate_generation_changed   metadata.generation differs (a spec change
 *                                     of a kind that counts generations; status
 *                                     and metadata changes do not bump it, and
 *                                     neither does a resync)
 *   ck_predicate_labels_changed       the labels differ
 *   ck_predicate_annotations_changed  the annotations differ; annotations are
 *                                     kept only for a kind whose descriptor has
 *                                     keep_annotations: for any other kind both
 *                                     states have none and no update passes
 *   ck_predicate_resource_version_changed  the resourceVersion differs: drops the
 *                                     resyncs (an update of an object to itself)
 * Predicates run on the loop thread with the informer's objects (borrowed): they
 * must be quick, must not block and must not keep the objects.
 */
#ifndef CKUBE_PREDICATE_H
#define CKUBE_PREDICATE_H

#include <ckube/export.h>

#include <ckube/cache.h>
#include <ckube/obj.h>

#include <stdbool.h>
#include <stddef.h>

typedef struct ck_predicate {
	bool (*create)(void *ud, const ck_obj_t *obj);
	bool (*update)(void *ud, const ck_obj_t *old_obj, const ck_obj_t *new_obj);
	/* obj is the last state known (also from a tombstone); a delete known by its
	 * key alone (no state) passes without a call. */
	bool (*del)(void *ud, const ck_obj_t *obj);
	void *ud;
} ck_predicate_t;

/* The ready-made predicates (static, never freed). */
CKUBE_API const ck_predicate_t *ck_predicate_generation_changed(void);
CKUBE_API const ck_predicate_t *ck_predicate_labels_changed(void);
CKUBE_API const ck_predicate_t *ck_predicate_annotations_changed(void);
CKUBE_API const ck_predicate_t *ck_predicate_resource_version_changed(void);

/* Borrows obj; true when every predicate of preds[0..n) passes the event (n 0: true). */
CKUBE_API bool ck_predicates_create(const ck_predicate_t *const *preds, size_t n,
                                    const ck_obj_t *obj);
CKUBE_API bool ck_predicates_update(const ck_predicate_t *const *preds, size_t n,
                                    const ck_obj_t *old_obj, const ck_obj_t *new_obj);
CKUBE_API bool ck_predicates_delete(const ck_predicate_t *const *preds, size_t n,
                                    const ck_obj_t *obj);

/* A handler behind predicates: the state lives in the caller's struct, which must
 * outlive the registration (preds, the array and the predicates, too). */
typedef struct ck_cache_predicate_handler {
	const ck_predicate_t *const *preds;
	size_t npreds;
	ck_cache_handler_t handler;
	void *handler_ud;
} ck_cache_predicate_handler_t;
/* The callbacks to register with ud = a ck_cache_predicate_handler_t * (borrowed). */
CKUBE_API const ck_cache_handler_t *ck_cache_predicate_handler(void);

#endif
