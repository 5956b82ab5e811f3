/*
 * predicate: event predicates and the handler that applies them (see
 * <ckube/predicate.h>). Built on the public handler API alone, as filter.c.
 */
#include <ckube/predicate.h>

#include <stdint.h>
#include <string.h>

bool ck_predicates_create(const ck_predicate_t *const *preds, size_t n, const ck_obj_t *obj)
{
	for (size_t i = 0; i < n; i++)
		if (preds[i]->create != NULL && !preds[i]->create(preds[i]->ud, obj))
			return false;
	return true;
}

bool ck_predicates_update(const ck_predicate_t *const *preds, size_t n, const ck_obj_t *old_obj,
                          const ck_obj_t *new_obj)
{
	for (size_t i = 0; i < n; i++)
		if (preds[i]->update != NULL && !preds[i]->update(preds[i]->ud, old_obj, new_obj))
			return false;
	return true;
}

bool ck_predicates_delete(const ck_predicate_t *const *preds, size_t n, const ck_obj_t *obj)
{
	if (obj == NULL)
		return true;
	for (size_t i = 0; i < n; i++)
		if (preds[i]->del != NULL && !preds[i]->del(preds[i]->ud, obj))
			return false;
	return true;
}

/* ---- ready-made ---- */

static bool generation_changed(void *ud, const ck_obj_t *o, const ck_obj_t *n)
{
	return o->generation != n->generation;
}

/* Both sorted by key (obj.h), so equal maps are equal arrays. */
static bool kv_differ(const ck_obj_kv_t *a, size_t na, const ck_obj_kv_t *b, size_t nb)
{
	if (na != nb)
		return true;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i].key, b[i].key) != 0 || strcmp(a[i].value, b[i].value) != 0)
			return true;
	return false;
}

static bool labels_changed(void *ud, const ck_obj_t *o, const ck_obj_t *n)
{
	return kv_differ(o->labels, o->nlabels, n->labels, n->nlabels);
}

static bool annotations_changed(void *ud, const ck_obj_t *o, const ck_obj_t *n)
{
	return kv_differ(o->annotations, o->nannotations, n->annotations, n->nannotations);
}

static bool rv_changed(void *ud, const ck_obj_t *o, const ck_obj_t *n)
{
	return strcmp(o->rv, n->rv) != 0;
}

static const ck_predicate_t p_generation = {.update = generation_changed};
static const ck_predicate_t p_labels = {.update = labels_changed};
static const ck_predicate_t p_annotations = {.update = annotations_changed};
static const ck_predicate_t p_rv = {.update = rv_changed};

const ck_predicate_t *ck_predicate_generation_changed(void)
{
	return &p_generation;
}

const ck_predicate_t *ck_predicate_labels_changed(void)
{
	return &p_labels;
}

const ck_predicate_t *ck_predicate_annotations_changed(void)
{
	return &p_annotations;
}

const ck_predicate_t *ck_predicate_resource_version_changed(void)
{
	return &p_rv;
}

/* ---- the handler ---- */

static void p_add(void *ud, ck_obj_t *obj, bool in_initial_list)
{
	const ck_cache_predicate_handler_t *ph = ud;
	if (ph->handler.on_add != NULL && ck_predicates_create(ph->preds, ph->npreds, obj))
		ph->handler.on_add(ph->handler_ud, obj, in_initial_list);
}

static void p_update(void *ud, ck_obj_t *old_obj, ck_obj_t *new_obj)
{
	const ck_cache_predicate_handler_t *ph = ud;
	if (ph->handler.on_update != NULL &&
	    ck_predicates_update(ph->preds, ph->npreds, old_obj, new_obj))
		ph->handler.on_update(ph->handler_ud, old_obj, new_obj);
}

static void p_delete(void *ud, const char *key, ck_obj_t *obj, bool final_state_unknown)
{
	const ck_cache_predicate_handler_t *ph = ud;
	if (ph->handler.on_delete != NULL && ck_predicates_delete(ph->preds, ph->npreds, obj))
		ph->handler.on_delete(ph->handler_ud, key, obj, final_state_unknown);
}

static const ck_cache_handler_t predicate_handler = {p_add, p_update, p_delete};

const ck_cache_handler_t *ck_cache_predicate_handler(void)
{
	return &predicate_handler;
}
