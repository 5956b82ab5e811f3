/*
 * filter: client-go's FilteringResourceEventHandler -- a handler that sees only
 * the objects a predicate accepts, built on the public handler API alone.
 *
 * An update is judged on both states, so that the wrapped handler's view stays
 * that of a store holding only accepted objects: an object that stops passing
 * leaves it (a delete of the old state), one that starts passing enters it (an
 * add, never "in the initial list": it was already known). The state lives in
 * the caller's ck_cache_filtering_handler_t; nothing is allocated here.
 */
#include <ckube/cache.h>

#include <stdlib.h>

static bool accepts(const ck_cache_filtering_handler_t *fh, const ck_obj_t *obj)
{
	return fh->filter == NULL || fh->filter(fh->filter_ud, obj);
}

static void f_add(void *ud, ck_obj_t *obj, bool in_initial_list)
{
	const ck_cache_filtering_handler_t *fh = ud;
	if (fh->handler.on_add != NULL && accepts(fh, obj))
		fh->handler.on_add(fh->handler_ud, obj, in_initial_list);
}

static void f_update(void *ud, ck_obj_t *old_obj, ck_obj_t *new_obj)
{
	const ck_cache_filtering_handler_t *fh = ud;
	bool was = accepts(fh, old_obj), is = accepts(fh, new_obj);
	if (was && is) {
		if (fh->handler.on_update != NULL)
			fh->handler.on_update(fh->handler_ud, old_obj, new_obj);
	} else if (was) {
		if (fh->handler.on_delete == NULL)
			return;
		/* The delete a handler gets names the key, which the update did not. */
		char small[320];
		size_t n = ck_obj_key(old_obj, small, sizeof(small));
		char *key = n < sizeof(small) ? small : ck_obj_key_dup(old_obj);
		fh->handler.on_delete(fh->handler_ud, key, old_obj, false);
		if (key != small)
			free(key);
	} else if (is) {
		if (fh->handler.on_add != NULL)
			fh->handler.on_add(fh->handler_ud, new_obj, false);
	}
}

static void f_delete(void *ud, const char *key, ck_obj_t *obj, bool final_state_unknown)
{
	const ck_cache_filtering_handler_t *fh = ud;
	if (fh->handler.on_delete != NULL && accepts(fh, obj))
		fh->handler.on_delete(fh->handler_ud, key, obj, final_state_unknown);
}

static const ck_cache_handler_t filtering = {f_add, f_update, f_delete};

const ck_cache_handler_t *ck_cache_filtering_handler(void)
{
	return &filtering;
}

ck_cache_handler_reg_t *
ck_cache_informer_add_filtered_handler(ck_cache_informer_t *inf,
                                       const ck_cache_filtering_handler_t *fh)
{
	return ck_cache_informer_add_handler(inf, &filtering, (void *)(uintptr_t)fh);
}
