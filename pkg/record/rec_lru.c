/*
 * rec_lru: a fixed-capacity LRU cache for the correlator, keyed by 64-bit hashes,
 * its values stored inside the entries.
 *
 * Design note: memory per entry is what this file is for (the three caches hold
 * up to 4,096 entries each, as client-go's). An entry is one allocation: the
 * recency links, the key and the value (24 bytes + val_size; the correlator's
 * values are 32 bytes, so 56, one 64-byte malloc chunk). Keys are hashes, not
 * strings: the caches need equality only, and a keyed 64-bit hash gives two of
 * 4,096 live keys the same value with a probability near 2^-52 per new key. The
 * index is open addressing (linear probing, deletion by backward shift, so no
 * tombstones) over entry pointers, at most 3/4 full, grown by doubling as entries
 * come: an idle recorder holds 16 slots per cache, not a table sized for the cap.
 */
#include "pkg/record/rec_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct lru_node {
	struct lru_node *prev; /* towards the most recent */
	struct lru_node *next; /* towards the least recent */
	uint64_t key;
	uint64_t val[]; /* val_size bytes; 8-byte alignment is enough for the values */
} lru_node_t;

struct rec_lru {
	lru_node_t **slots;
	size_t mask; /* slots - 1 (a power of two) */
	size_t cap;
	size_t len;
	size_t val_size;
	lru_node_t *head; /* most recent */
	lru_node_t *tail; /* least recent */
	rec_lru_free_fn free_val;
	void *ud;
};

#define MIN_SLOTS 16

rec_lru_t *rec_lru_new(size_t cap, size_t val_size, rec_lru_free_fn free_val, void *ud)
{
	rec_lru_t *l = ck_xcalloc(1, sizeof(*l));

	l->cap = cap ? cap : 1;
	l->val_size = val_size;
	l->slots = ck_xcalloc(MIN_SLOTS, sizeof(*l->slots));
	l->mask = MIN_SLOTS - 1;
	l->free_val = free_val;
	l->ud = ud;
	return l;
}

static void list_unlink(rec_lru_t *l, lru_node_t *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		l->head = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		l->tail = n->prev;
	n->prev = n->next = NULL;
}

static void list_push_front(rec_lru_t *l, lru_node_t *n)
{
	n->prev = NULL;
	n->next = l->head;
	if (l->head)
		l->head->prev = n;
	l->head = n;
	if (l->tail == NULL)
		l->tail = n;
}

/* The slot holding key, or the empty slot where it would go. */
static size_t slot_of(const rec_lru_t *l, uint64_t key)
{
	size_t i = (size_t)key & l->mask;
	while (l->slots[i] != NULL && l->slots[i]->key != key)
		i = (i + 1) & l->mask;
	return i;
}

static lru_node_t *lru_find(const rec_lru_t *l, uint64_t key)
{
	return l->slots[slot_of(l, key)];
}

/* Doubles the index (len + 1 would make it more than 3/4 full). */
static void grow(rec_lru_t *l)
{
	size_t n = (l->mask + 1) * 2;
	lru_node_t **old = l->slots;
	size_t old_n = l->mask + 1;

	l->slots = ck_xcalloc(n, sizeof(*l->slots));
	l->mask = n - 1;
	for (size_t i = 0; i < old_n; i++)
		if (old[i] != NULL)
			l->slots[slot_of(l, old[i]->key)] = old[i];
	free(old);
}

/*
 * Empties slot i and moves back the entries after it in its probe run that may
 * now be found sooner: an entry stays where it is when its home slot lies
 * cyclically in (i, j], else it moves into the hole.
 */
static void slot_clear(rec_lru_t *l, size_t i)
{
	size_t j = i;
	l->slots[i] = NULL;
	for (;;) {
		j = (j + 1) & l->mask;
		lru_node_t *n = l->slots[j];
		if (n == NULL)
			return;
		size_t home = (size_t)n->key & l->mask;
		bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
		if (stays)
			continue;
		l->slots[i] = n;
		l->slots[j] = NULL;
		i = j;
	}
}

static void lru_remove(rec_lru_t *l, lru_node_t *n)
{
	slot_clear(l, slot_of(l, n->key));
	list_unlink(l, n);
	l->len--;
	if (l->free_val)
		l->free_val(l->ud, n->val);
	free(n);
}

void *rec_lru_get(rec_lru_t *l, uint64_t key)
{
	lru_node_t *n = lru_find(l, key);
	if (n == NULL)
		return NULL;
	if (l->head != n) {
		list_unlink(l, n);
		list_push_front(l, n);
	}
	return n->val;
}

void *rec_lru_peek(rec_lru_t *l, uint64_t key)
{
	lru_node_t *n = lru_find(l, key);
	return n ? n->val : NULL;
}

void *rec_lru_put(rec_lru_t *l, uint64_t key)
{
	lru_node_t *n = lru_find(l, key);

	if (n != NULL) {
		if (l->free_val)
			l->free_val(l->ud, n->val);
		memset(n->val, 0, l->val_size);
		list_unlink(l, n);
		list_push_front(l, n);
		return n->val;
	}
	if (l->len >= l->cap)
		lru_remove(l, l->tail);
	if ((l->len + 1) * 4 > (l->mask + 1) * 3)
		grow(l);
	n = ck_xcalloc(1, sizeof(*n) + l->val_size);
	n->key = key;
	l->slots[slot_of(l, key)] = n;
	list_push_front(l, n);
	l->len++;
	return n->val;
}

size_t rec_lru_len(const rec_lru_t *l)
{
	return l->len;
}

void rec_lru_foreach(rec_lru_t *l, void (*fn)(void *ud, void *val), void *ud)
{
	for (lru_node_t *n = l->head; n; n = n->next)
		fn(ud, n->val);
}

void rec_lru_free(rec_lru_t *l)
{
	if (l == NULL)
		return;
	/* Straight down the list: the index goes with it, no backward shifts. */
	for (lru_node_t *n = l->head, *next; n; n = next) {
		next = n->next;
		if (l->free_val)
			l->free_val(l->ud, n->val);
		free(n);
	}
	free(l->slots);
	free(l);
}
