/*
 * The string hash table private to pkg/workqueue (see wq_internal.h for the design).
 */
#include "pkg/workqueue/wq_internal.h"
#include <ckube/base.h>

#include <stdlib.h>
#include <string.h>

#define HTAB_MIN_CAP 16
/* Shrink only when far below the load limit, so that a queue hovering around one size
 * does not resize back and forth. */
#define HTAB_SHRINK_CAP 64

wq_hnode_t *wq_htab_find(const wq_htab_t *t, const char *key, size_t len, uint64_t hash)
{
	if (t->slots == NULL)
		return NULL;
	for (size_t i = hash & t->mask;; i = (i + 1) & t->mask) {
		wq_hnode_t *n = t->slots[i];
		if (n == NULL)
			return NULL;
		if (n->hash == hash && n->len == len && memcmp(n->key, key, len) == 0)
			return n;
	}
}

/* Puts n into the first free slot of its probe run; the table has room. */
static void place(wq_hnode_t **slots, size_t mask, wq_hnode_t *n)
{
	size_t i = n->hash & mask;
	while (slots[i] != NULL)
		i = (i + 1) & mask;
	slots[i] = n;
}

static void resize(wq_htab_t *t, size_t cap)
{
	wq_hnode_t **slots = ck_xcalloc(cap, sizeof(*slots));
	if (t->slots != NULL) {
		for (size_t i = 0; i <= t->mask; i++)
			if (t->slots[i] != NULL)
				place(slots, cap - 1, t->slots[i]);
		free(t->slots);
	}
	t->slots = slots;
	t->mask = cap - 1;
}

void wq_htab_insert(wq_htab_t *t, wq_hnode_t *n)
{
	size_t cap = t->slots == NULL ? 0 : t->mask + 1;
	if ((t->count + 1) * 2 > cap)
		resize(t, cap == 0 ? HTAB_MIN_CAP : cap * 2);
	place(t->slots, t->mask, n);
	t->count++;
}

void wq_htab_remove(wq_htab_t *t, wq_hnode_t *n)
{
	size_t i = n->hash & t->mask;
	while (t->slots[i] != n)
		i = (i + 1) & t->mask;

	/*
	 * Backward-shift deletion: walk the rest of the probe run and move back every
	 * entry whose home slot does not lie cyclically in (i, j], so that no lookup
	 * ever meets a hole before its key.
	 */
	for (size_t j = i;;) {
		j = (j + 1) & t->mask;
		wq_hnode_t *m = t->slots[j];
		if (m == NULL)
			break;
		size_t k = m->hash & t->mask;
		int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
		if (stays)
			continue;
		t->slots[i] = m;
		i = j;
	}
	t->slots[i] = NULL;
	t->count--;

	size_t cap = t->mask + 1;
	if (cap > HTAB_SHRINK_CAP && t->count * 8 < cap)
		resize(t, cap / 2);
}

void wq_htab_free(wq_htab_t *t)
{
	free(t->slots);
	t->slots = NULL;
	t->mask = 0;
	t->count = 0;
}
