/*
 * delta: the queue between the reflector and the store -- client-go's RealFIFO
 * with atomic events (feature gates InOrderInformers, GA, and AtomicFIFO, on
 * by default since 1.36).
 *
 * Model. Every notification the reflector makes is one entry, in arrival
 * order: Added, Updated or Deleted carrying the object; a complete (re)list is
 * one ReplacedAll entry carrying the whole list; a resync one SyncAll entry
 * with nothing. Nothing is coalesced per key, so handlers see the server's
 * order across keys (a DeltaFIFO, which this file used to be, groups a key's
 * deltas under its first-queued position and reorders them).
 *
 * The queue needs no knowledge of the store: tombstones are made when the
 * informer reaches a ReplacedAll, against the store as all earlier entries
 * left it (informer.c; client-go's processReplacedAllInfo): every stored key
 * missing from the list becomes a Deleted with final state unknown carrying
 * the last stored object; the store takes the list in one step
 * (cache_store_replace); then handlers get the deletes, then an update or add
 * per listed object in list order. A SyncAll becomes an unchanged-RV update
 * for every stored object, for the handlers whose resync period is due.
 *
 * A Deleted for a key the informer never saw is queued and delivered like any
 * other (the store delete is a no-op, handlers get OnDelete with the object as
 * the server sent it): that is what RealFIFO does; the DeltaFIFO dropped it.
 *
 * has_synced: the first Replace records how many entries are queued up to and
 * including it (client-go's initialPopulationCount); it turns true when that
 * many have been fully processed, its notifications included.
 *
 * Where it differs from client-go. Everything runs on the loop thread: no
 * lock, no condition variable, no Pop blocking; the informer pops between
 * network events in batches (the queue still lets a relist be handed over in
 * one call and its notifications spread over several batches). client-go's
 * PopBatch groups distinct keys into one store transaction; here each entry
 * is applied on its own, which readers cannot tell apart (each write is one
 * locked step, and a ReplacedAll one locked swap). Bookmark entries are not
 * queued: the store does not track a resourceVersion. Consecutive SyncAll
 * entries collapse into one (the second would repeat the first's
 * notifications to the same handlers).
 *
 * Memory. Entries are 16-byte slots in a ring that doubles as needed and
 * halves when mostly empty: a steady stream of events allocates nothing.
 */
#include "pkg/cache/internal.h"

#include <stdlib.h>
#include <string.h>

#define DQ_MIN_CAP 16

const char *cache_delta_type_name(cache_delta_type_t t)
{
	switch (t) {
	case CACHE_DELTA_ADDED:
		return "Added";
	case CACHE_DELTA_UPDATED:
		return "Updated";
	case CACHE_DELTA_DELETED:
		return "Deleted";
	case CACHE_DELTA_REPLACED_ALL:
		return "ReplacedAll";
	case CACHE_DELTA_SYNC_ALL:
		return "SyncAll";
	}
	return "?";
}

void cache_dq_init(cache_dq_t *q)
{
	memset(q, 0, sizeof(*q));
}

/* Moves the ring into an array of ncap slots (ncap >= len), unwrapped. */
static void resize(cache_dq_t *q, size_t ncap)
{
	cache_delta_t *r = ck_xmalloc(ncap * sizeof(*r));
	for (size_t i = 0; i < q->len; i++)
		r[i] = q->ring[(q->head + i) & (q->cap - 1)];
	free(q->ring);
	q->ring = r;
	q->cap = ncap;
	q->head = 0;
}

static void push(cache_dq_t *q, cache_delta_t d)
{
	if (q->len == q->cap)
		resize(q, q->cap ? q->cap * 2 : DQ_MIN_CAP);
	q->ring[(q->head + q->len) & (q->cap - 1)] = d;
	q->len++;
	q->queued_total++;
}

void cache_dq_add(cache_dq_t *q, cache_delta_type_t type, ck_obj_t *obj)
{
	q->populated = true;
	push(q, (cache_delta_t){.type = (uint8_t)type, .obj = obj});
}

void cache_dq_replace(cache_dq_t *q, ck_obj_t **items, size_t n, uint16_t part)
{
	if (n == 0) {
		free(items);
		items = NULL;
	}
	push(q,
	     (cache_delta_t){
	         .type = CACHE_DELTA_REPLACED_ALL, .part = part, .n = (uint32_t)n, .items = items});
	if (!q->populated) {
		q->populated = true;
		q->initial = q->len;
	}
}

void cache_dq_resync(cache_dq_t *q)
{
	if (q->len > 0 &&
	    q->ring[(q->head + q->len - 1) & (q->cap - 1)].type == CACHE_DELTA_SYNC_ALL)
		return;
	push(q, (cache_delta_t){.type = CACHE_DELTA_SYNC_ALL});
}

bool cache_dq_pop(cache_dq_t *q, cache_delta_t *out, bool *initial)
{
	if (q->len == 0)
		return false;
	if (initial != NULL)
		*initial = !cache_dq_has_synced(q);
	*out = q->ring[q->head];
	q->head = (q->head + 1) & (q->cap - 1);
	q->len--;
	/* Give a burst's memory back once it is mostly drained. */
	if (q->cap > DQ_MIN_CAP && q->len < q->cap / 8)
		resize(q, q->cap / 2);
	return true;
}

void cache_dq_done(cache_dq_t *q)
{
	if (q->initial > 0)
		q->initial--;
}

void cache_dq_delta_free(cache_delta_t *d)
{
	if (d->type == CACHE_DELTA_REPLACED_ALL) {
		for (uint32_t i = 0; i < d->n; i++)
			ck_obj_unref(d->items[i]);
		free(d->items);
	} else if (d->type != CACHE_DELTA_SYNC_ALL) {
		ck_obj_unref(d->obj);
	}
	d->obj = NULL;
	d->n = 0;
}

void cache_dq_free(cache_dq_t *q)
{
	for (size_t i = 0; i < q->len; i++)
		cache_dq_delta_free(&q->ring[(q->head + i) & (q->cap - 1)]);
	free(q->ring);
	memset(q, 0, sizeof(*q));
}
