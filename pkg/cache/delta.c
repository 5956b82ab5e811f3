/*
 * delta: the delta queue between the reflector and the store, with client-go's
 * DeltaFIFO semantics (REFERENCE.md): per key an ordered list of deltas, keys
 * popped in first-queued order, two trailing deletes collapsed, and Replace
 * turning every key that vanished across a relist into a "final state unknown"
 * delete that carries the last known object.
 *
 * Design note. Everything runs on the loop thread, so unlike DeltaFIFO there is
 * no lock and no condition variable. The queue is still needed even though the
 * producer and consumer share a thread: it lets a big relist be handed over in
 * one call and then processed in batches between network events, and it gives
 * the relist its tombstones against what was queued but not yet processed. An
 * entry is keyed by its first delta's object (no key strings are kept) and
 * entries are recycled, so a steady stream of events allocates nothing.
 */
#include "pkg/cache/internal.h"

#include <stdlib.h>
#include <string.h>

#define DQ_MAX_SPARE 1024

const char *cache_delta_type_name(cache_delta_type_t t)
{
	switch (t) {
	case CACHE_DELTA_ADDED:
		return "Added";
	case CACHE_DELTA_UPDATED:
		return "Updated";
	case CACHE_DELTA_DELETED:
		return "Deleted";
	case CACHE_DELTA_REPLACED:
		return "Replaced";
	case CACHE_DELTA_SYNC:
		return "Sync";
	}
	return "?";
}

static bool eq_entry_obj(const void *p, const void *key)
{
	const cache_dq_entry_t *e = p;
	return cache_obj_same_key(e->d[0].obj, key);
}

void cache_dq_init(cache_dq_t *q, ck_cache_store_t *known)
{
	memset(q, 0, sizeof(*q));
	q->known = known;
}

static cache_dq_entry_t *entry_new(cache_dq_t *q)
{
	cache_dq_entry_t *e = q->spare;
	if (e != NULL) {
		q->spare = e->next;
		q->nspare--;
	} else {
		e = ck_xmalloc(sizeof(*e));
	}
	e->next = NULL;
	e->n = 0;
	e->cap = 2;
	e->d = e->inl;
	return e;
}

static void entry_push(cache_dq_entry_t *e, cache_delta_type_t type, ck_obj_t *obj, bool unknown)
{
	if (e->n == e->cap) {
		uint32_t ncap = e->cap * 2;
		if (e->d == e->inl) {
			e->d = ck_xmalloc(ncap * sizeof(*e->d));
			memcpy(e->d, e->inl, e->n * sizeof(*e->d));
		} else {
			e->d = ck_xrealloc(e->d, ncap * sizeof(*e->d));
		}
		e->cap = ncap;
	}
	e->d[e->n++] = (cache_delta_t){.type = (uint8_t)type, .unknown = unknown, .obj = obj};
}

/*
 * Two deletes in a row say the same thing; keep the one that knows more: the
 * older unless the newer is a real (not final-state-unknown) delete.
 */
static void entry_dedup(cache_dq_entry_t *e)
{
	if (e->n < 2)
		return;
	cache_delta_t *a = &e->d[e->n - 2], *b = &e->d[e->n - 1];
	if (a->type != CACHE_DELTA_DELETED || b->type != CACHE_DELTA_DELETED)
		return;
	if (b->unknown) {
		ck_obj_unref(b->obj);
	} else {
		ck_obj_unref(a->obj);
		*a = *b;
	}
	e->n--;
}

static cache_dq_entry_t *find_entry(cache_dq_t *q, const ck_obj_t *obj, uint64_t h)
{
	size_t at = chash_find(&q->map, h, eq_entry_obj, obj);
	return at == SIZE_MAX ? NULL : q->map.slots[at].p;
}

/* Appends a delta for obj's key (takes obj). */
static void queue_action(cache_dq_t *q, cache_delta_type_t type, ck_obj_t *obj, bool unknown)
{
	uint64_t h = cache_obj_key_hash(obj);
	cache_dq_entry_t *e = find_entry(q, obj, h);
	q->queued_total++;
	if (e != NULL) {
		entry_push(e, type, obj, unknown);
		entry_dedup(e);
		return;
	}
	e = entry_new(q);
	e->h = h;
	entry_push(e, type, obj, unknown);
	chash_insert(&q->map, h, e);
	if (q->tail != NULL)
		q->tail->next = e;
	else
		q->head = e;
	q->tail = e;
}

void cache_dq_add(cache_dq_t *q, cache_delta_type_t type, ck_obj_t *obj)
{
	q->populated = true;
	queue_action(q, type, obj, false);
}

void cache_dq_delete(cache_dq_t *q, ck_obj_t *obj)
{
	q->populated = true;
	/* Deleting what nobody has seen would hand handlers a delete without an add. */
	if (cache_store_get_obj_nolock(q->known, obj) == NULL &&
	    find_entry(q, obj, cache_obj_key_hash(obj)) == NULL) {
		ck_obj_unref(obj);
		return;
	}
	queue_action(q, CACHE_DELTA_DELETED, obj, false);
}

typedef struct replace_ctx {
	cache_dq_t *q;
	chash_t *listed;
	size_t deletions;
} replace_ctx_t;

static bool eq_obj(const void *p, const void *key)
{
	return cache_obj_same_key(p, key);
}

static bool listed_has(const chash_t *listed, const ck_obj_t *obj)
{
	return chash_find(listed, cache_obj_key_hash(obj), eq_obj, obj) != SIZE_MAX;
}

static void tombstone_known(void *ud, ck_obj_t *obj)
{
	replace_ctx_t *c = ud;
	if (listed_has(c->listed, obj) || find_entry(c->q, obj, cache_obj_key_hash(obj)) != NULL)
		return;
	queue_action(c->q, CACHE_DELTA_DELETED, ck_obj_ref(obj), true);
	c->deletions++;
}

void cache_dq_replace(cache_dq_t *q, ck_obj_t **items, size_t n)
{
	chash_t listed = {0};
	size_t distinct = 0;
	for (size_t i = 0; i < n; i++) {
		ck_obj_t *obj = items[i];
		uint64_t h = cache_obj_key_hash(obj);
		if (chash_find(&listed, h, eq_obj, obj) == SIZE_MAX) {
			chash_insert(&listed, h, obj);
			distinct++;
		}
		queue_action(q, CACHE_DELTA_REPLACED, obj, false);
	}
	/* Queued keys absent from the list: their newest state is the last we know. The
	 * entries visited here only grow; new entries are appended behind `stop`. */
	replace_ctx_t c = {q, &listed, 0};
	cache_dq_entry_t *stop = q->tail;
	for (cache_dq_entry_t *e = q->head; e != NULL; e = e->next) {
		ck_obj_t *newest = e->d[e->n - 1].obj;
		if (!listed_has(&listed, newest)) {
			queue_action(q, CACHE_DELTA_DELETED, ck_obj_ref(newest), true);
			c.deletions++;
		}
		if (e == stop)
			break;
	}
	/* Known (processed) keys absent from the list and with nothing queued. */
	cache_store_foreach_nolock(q->known, tombstone_known, &c);
	chash_free(&listed);
	if (!q->populated) {
		q->populated = true;
		q->initial = distinct + c.deletions;
	}
}

static void resync_one(void *ud, ck_obj_t *obj)
{
	cache_dq_t *q = ud;
	if (find_entry(q, obj, cache_obj_key_hash(obj)) != NULL)
		return;
	queue_action(q, CACHE_DELTA_SYNC, ck_obj_ref(obj), false);
}

void cache_dq_resync(cache_dq_t *q)
{
	cache_store_foreach_nolock(q->known, resync_one, q);
}

cache_dq_entry_t *cache_dq_pop(cache_dq_t *q, bool *initial)
{
	cache_dq_entry_t *e = q->head;
	if (e == NULL)
		return NULL;
	q->head = e->next;
	if (q->head == NULL)
		q->tail = NULL;
	e->next = NULL;
	chash_remove_ptr(&q->map, e->h, e);
	if (initial != NULL)
		*initial = !cache_dq_has_synced(q);
	if (q->initial > 0)
		q->initial--;
	return e;
}

void cache_dq_release(cache_dq_t *q, cache_dq_entry_t *e)
{
	for (uint32_t i = 0; i < e->n; i++)
		ck_obj_unref(e->d[i].obj);
	if (e->d != e->inl)
		free(e->d);
	e->n = 0;
	if (q->nspare < DQ_MAX_SPARE) {
		e->next = q->spare;
		q->spare = e;
		q->nspare++;
	} else {
		free(e);
	}
}

void cache_dq_free(cache_dq_t *q)
{
	cache_dq_entry_t *e = q->head;
	while (e != NULL) {
		cache_dq_entry_t *next = e->next;
		for (uint32_t i = 0; i < e->n; i++)
			ck_obj_unref(e->d[i].obj);
		if (e->d != e->inl)
			free(e->d);
		free(e);
		e = next;
	}
	for (e = q->spare; e != NULL;) {
		cache_dq_entry_t *next = e->next;
		free(e);
		e = next;
	}
	chash_free(&q->map);
	memset(q, 0, sizeof(*q));
}
