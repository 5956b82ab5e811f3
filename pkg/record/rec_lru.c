/*
 * rec_lru: a fixed-capacity string-keyed LRU cache for the correlator.
 *
 * Design note: chained hash buckets (a power of two, at least twice the capacity,
 * allocated once) plus a doubly linked recency list. The capacity is fixed, so the
 * table never grows and a put() costs at most one eviction.
 */
#include "pkg/base/hash.h"
#include "pkg/record/rec_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct lru_node {
	struct lru_node *hnext; /* bucket chain */
	struct lru_node *prev;  /* towards the most recent */
	struct lru_node *next;  /* towards the least recent */
	uint64_t hash;
	void *val;
	char key[]; /* NUL-terminated copy */
} lru_node_t;

struct rec_lru {
	lru_node_t **buckets;
	size_t mask;
	size_t cap;
	size_t len;
	lru_node_t *head; /* most recent */
	lru_node_t *tail; /* least recent */
	rec_lru_free_fn free_val;
	void *ud;
};

/* Keys hold object and reason names chosen in the cluster: the keyed hash. */
static uint64_t lru_hash(const char *s)
{
	return ck_hash_bytes(s, strlen(s));
}

rec_lru_t *rec_lru_new(size_t cap, rec_lru_free_fn free_val, void *ud)
{
	rec_lru_t *l = ck_xcalloc(1, sizeof(*l));
	size_t nb = 16;

	if (cap == 0)
		cap = 1;
	while (nb < cap * 2)
		nb <<= 1;
	l->buckets = ck_xcalloc(nb, sizeof(*l->buckets));
	l->mask = nb - 1;
	l->cap = cap;
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

static lru_node_t *lru_find(rec_lru_t *l, const char *key, uint64_t h)
{
	for (lru_node_t *n = l->buckets[h & l->mask]; n; n = n->hnext)
		if (n->hash == h && strcmp(n->key, key) == 0)
			return n;
	return NULL;
}

static void lru_remove(rec_lru_t *l, lru_node_t *n)
{
	lru_node_t **pp = &l->buckets[n->hash & l->mask];
	while (*pp != n)
		pp = &(*pp)->hnext;
	*pp = n->hnext;
	list_unlink(l, n);
	l->len--;
	if (l->free_val)
		l->free_val(l->ud, n->val);
	free(n);
}

void *rec_lru_get(rec_lru_t *l, const char *key)
{
	lru_node_t *n = lru_find(l, key, lru_hash(key));
	if (n == NULL)
		return NULL;
	if (l->head != n) {
		list_unlink(l, n);
		list_push_front(l, n);
	}
	return n->val;
}

void *rec_lru_peek(rec_lru_t *l, const char *key)
{
	lru_node_t *n = lru_find(l, key, lru_hash(key));
	return n ? n->val : NULL;
}

void rec_lru_put(rec_lru_t *l, const char *key, void *val)
{
	uint64_t h = lru_hash(key);
	lru_node_t *n = lru_find(l, key, h);

	if (n != NULL) {
		void *old = n->val;
		n->val = val;
		if (old != val && l->free_val)
			l->free_val(l->ud, old);
		list_unlink(l, n);
		list_push_front(l, n);
		return;
	}
	if (l->len >= l->cap)
		lru_remove(l, l->tail);
	size_t kl = strlen(key);
	n = ck_xmalloc(sizeof(*n) + kl + 1);
	memcpy(n->key, key, kl + 1);
	n->hash = h;
	n->val = val;
	n->hnext = l->buckets[h & l->mask];
	l->buckets[h & l->mask] = n;
	n->prev = n->next = NULL;
	list_push_front(l, n);
	l->len++;
}

size_t rec_lru_len(const rec_lru_t *l)
{
	return l->len;
}

void rec_lru_foreach(rec_lru_t *l, void (*fn)(void *ud, const char *key, void *val), void *ud)
{
	for (lru_node_t *n = l->head; n; n = n->next)
		fn(ud, n->key, n->val);
}

void rec_lru_free(rec_lru_t *l)
{
	if (l == NULL)
		return;
	while (l->head)
		lru_remove(l, l->head);
	free(l->buckets);
	free(l);
}
