/*
 * util: the small pieces the rest of pkg/cache stands on -- an open-addressing
 * hash table, store-key hashing, the retry
 * backoff as a pure function of a clock reading, and the result lists.
 *
 * Design note: store keys are derived from the object ("ns/name") rather than
 * kept as separate strings: comparing reads the namespace, '/', and the name
 * piecewise, and hashing lays them out on the stack, so a cached object costs no
 * key allocation at all.
 */
#include "pkg/base/hash.h"
#include "pkg/cache/internal.h"
#include <ckube/base.h>

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- hashing */

/* The pointer itself is not chosen from outside: a fixed mix spreads its bits. */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

uint64_t chash_ptr_hash(const void *p)
{
	return mix64((uint64_t)(uintptr_t)p);
}

/* Store keys are names chosen in the cluster: the library's keyed hash (pkg/base/hash.h). */
uint64_t cache_key_hash(const char *key, size_t len)
{
	return ck_hash_bytes(key, len);
}

uint64_t cache_obj_key_hash(const ck_obj_t *o)
{
	/* "ns/name" laid out on the stack (a namespace is at most 63 bytes and a name 253
	 * when the API server validated them); a longer key from elsewhere is built on
	 * the heap rather than cut. */
	char buf[512], *key = buf;
	size_t nl = cache_obj_has_ns(o) ? strlen(o->ns) : 0, l = strlen(o->name);
	size_t len = nl ? nl + 1 + l : l;
	if (len > sizeof(buf))
		key = ck_xmalloc(len);
	if (nl) {
		memcpy(key, o->ns, nl);
		key[nl] = '/';
		memcpy(key + nl + 1, o->name, l);
	} else {
		memcpy(key, o->name, l);
	}
	uint64_t h = ck_hash_bytes(key, len);
	if (key != buf)
		free(key);
	return h;
}

bool cache_obj_key_eq(const ck_obj_t *o, const char *key, size_t len)
{
	if (cache_obj_has_ns(o)) {
		size_t nl = strlen(o->ns);
		if (len <= nl || memcmp(key, o->ns, nl) != 0 || key[nl] != '/')
			return false;
		key += nl + 1;
		len -= nl + 1;
	}
	return strlen(o->name) == len && memcmp(key, o->name, len) == 0;
}

bool cache_obj_same_key(const ck_obj_t *a, const ck_obj_t *b)
{
	bool an = cache_obj_has_ns(a), bn = cache_obj_has_ns(b);
	if (an != bn)
		return false;
	if (an && strcmp(a->ns, b->ns) != 0)
		return false;
	return strcmp(a->name, b->name) == 0;
}

void cache_keybuf_set(cache_keybuf_t *kb, const ck_obj_t *o)
{
	size_t need = ck_obj_key(o, kb->small, sizeof(kb->small));
	if (need < sizeof(kb->small)) {
		kb->s = kb->small;
	} else {
		/* Only for names far beyond what the API server accepts. */
		kb->s = ck_obj_key_dup(o);
	}
	kb->len = need;
}

void cache_keybuf_free(cache_keybuf_t *kb)
{
	if (kb->s != kb->small)
		free(kb->s);
	kb->s = NULL;
}

/* ---------------------------------------------------------------- chash */

#define CHASH_MIN 8

static void chash_resize(chash_t *t, size_t ncap)
{
	chash_slot_t *old = t->slots;
	size_t ocap = t->cap;
	t->slots = ck_xcalloc(ncap, sizeof(*t->slots));
	t->cap = ncap;
	size_t mask = ncap - 1;
	for (size_t i = 0; i < ocap; i++) {
		if (old[i].p == NULL)
			continue;
		size_t j = old[i].h & mask;
		while (t->slots[j].p != NULL)
			j = (j + 1) & mask;
		t->slots[j] = old[i];
	}
	free(old);
}

size_t chash_find(const chash_t *t, uint64_t h, chash_eq_fn eq, const void *key)
{
	if (t->cap == 0)
		return SIZE_MAX;
	size_t mask = t->cap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		const chash_slot_t *s = &t->slots[i];
		if (s->p == NULL)
			return SIZE_MAX;
		if (s->h == h && eq(s->p, key))
			return i;
	}
}

void chash_insert(chash_t *t, uint64_t h, void *p)
{
	/* Keep the load under 70% so that linear probes stay short. */
	if (t->cap == 0)
		chash_resize(t, CHASH_MIN);
	else if ((t->len + 1) * 10 > t->cap * 7)
		chash_resize(t, t->cap * 2);
	size_t mask = t->cap - 1;
	size_t i = h & mask;
	while (t->slots[i].p != NULL)
		i = (i + 1) & mask;
	t->slots[i].h = h;
	t->slots[i].p = p;
	t->len++;
}

void chash_remove_at(chash_t *t, size_t idx)
{
	size_t mask = t->cap - 1;
	size_t i = idx;
	/* Backward-shift: move later members of the cluster into the hole when their
	 * home slot is not between the hole and where they sit. */
	for (size_t j = (i + 1) & mask; t->slots[j].p != NULL; j = (j + 1) & mask) {
		size_t home = t->slots[j].h & mask;
		bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
		if (!stays) {
			t->slots[i] = t->slots[j];
			i = j;
		}
	}
	t->slots[i].p = NULL;
	t->slots[i].h = 0;
	t->len--;
	/* Give memory back after heavy deletion so that steady RSS follows the data. */
	if (t->len == 0) {
		chash_free(t);
	} else if (t->cap > CHASH_MIN && t->len * 8 < t->cap) {
		chash_resize(t, t->cap / 4 < CHASH_MIN ? CHASH_MIN : t->cap / 4);
	}
}

static bool ptr_eq(const void *p, const void *key)
{
	return p == key;
}

bool chash_remove_ptr(chash_t *t, uint64_t h, const void *p)
{
	size_t i = chash_find(t, h, ptr_eq, p);
	if (i == SIZE_MAX)
		return false;
	chash_remove_at(t, i);
	return true;
}

void chash_free(chash_t *t)
{
	free(t->slots);
	t->slots = NULL;
	t->cap = 0;
	t->len = 0;
}

/* ---------------------------------------------------------------- backoff */

void cache_backoff_init(cache_backoff_t *b, uint64_t initial_ns, uint64_t max_ns, uint64_t reset_ns,
                        double jitter)
{
	memset(b, 0, sizeof(*b));
	b->initial_ns = initial_ns;
	b->max_ns = max_ns < initial_ns ? initial_ns : max_ns;
	b->reset_ns = reset_ns;
	b->jitter = jitter;
	b->base_ns = initial_ns;
}

uint64_t cache_backoff_next(cache_backoff_t *b, uint64_t now_ns, double rnd)
{
	if (!b->used || now_ns - b->last_ns > b->reset_ns)
		b->base_ns = b->initial_ns;
	b->used = true;
	b->last_ns = now_ns;
	uint64_t base = b->base_ns;
	b->base_ns = base > b->max_ns / 2 ? b->max_ns : base * 2;
	if (rnd < 0)
		rnd = 0;
	if (rnd >= 1)
		rnd = 0.999999;
	return base + (uint64_t)((double)base * b->jitter * rnd);
}

int64_t cache_watch_timeout_s(int64_t min_s, int64_t max_s, double rnd)
{
	if (max_s <= min_s)
		return min_s;
	int64_t span = max_s - min_s;
	int64_t off = (int64_t)((double)span * rnd);
	if (off >= span)
		off = span - 1;
	if (off < 0)
		off = 0;
	return min_s + off;
}

/* ---------------------------------------------------------------- results */

void ck_cache_objs_free(ck_cache_objs_t *l)
{
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->n; i++)
		ck_obj_unref(l->items[i]);
	free(l->items);
	l->items = NULL;
	l->n = 0;
}

void ck_cache_strs_free(ck_cache_strs_t *l)
{
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->items[i]);
	free(l->items);
	l->items = NULL;
	l->n = 0;
}
