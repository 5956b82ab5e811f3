/*
 * store: the thread-safe, indexed object store behind every informer, and the
 * listers that read it.
 *
 * Design note. The main table maps a key hash to the object pointer itself
 * (one 16-byte slot per object, keys compared against the object's own
 * namespace and name). Each index maps a value string to a set of object
 * pointers. An update swaps the pointer in the main table and in every index
 * set the object belongs to, which requires recomputing the old object's index
 * values: index functions must be pure (client-go has the same rule). All of it
 * is under one writer-preferring rwlock, so that a steady stream of worker
 * reads can never starve the loop thread's writes.
 */
#include "pkg/cache/internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ck_cache_index_values {
	ck_sbuf_t arena;
	size_t *offs;
	size_t n, cap;
};

/* One value of an index and the objects that have it. */
typedef struct ivalue {
	chash_t set; /* ck_obj_t *, hashed by pointer */
	char value[];
} ivalue_t;

typedef struct cindex {
	char *name;
	ck_cache_index_fn fn;
	void *ud;
	chash_t values; /* ivalue_t *, hashed by string */
} cindex_t;

struct ck_cache_store {
	pthread_rwlock_t lock;
	chash_t objs; /* ck_obj_t *, hashed by key */
	cindex_t *idx;
	size_t nidx;
	/* Scratch for index values; used only under the write lock. */
	ck_cache_index_values_t scratch;
};

typedef struct keyref {
	const char *s;
	size_t len;
} keyref_t;

static bool eq_obj_key(const void *p, const void *key)
{
	const keyref_t *k = key;
	return cache_obj_key_eq(p, k->s, k->len);
}

static bool eq_obj_obj(const void *p, const void *key)
{
	return cache_obj_same_key(p, key);
}

static bool eq_ivalue(const void *p, const void *key)
{
	return strcmp(((const ivalue_t *)p)->value, key) == 0;
}

static uint64_t str_hash(const char *s)
{
	return cache_key_hash(s, strlen(s));
}

/* ---------------------------------------------------------------- index values */

void ck_cache_index_values_add(ck_cache_index_values_t *v, const char *value)
{
	if (value == NULL)
		return;
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->arena.data + v->offs[i], value) == 0)
			return;
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 4;
		v->offs = ck_xrealloc(v->offs, v->cap * sizeof(*v->offs));
	}
	v->offs[v->n++] = v->arena.len;
	ck_sbuf_append(&v->arena, value, strlen(value) + 1);
}

static void values_reset(ck_cache_index_values_t *v)
{
	v->n = 0;
	v->arena.len = 0;
}

static void values_free(ck_cache_index_values_t *v)
{
	ck_sbuf_free(&v->arena);
	free(v->offs);
	memset(v, 0, sizeof(*v));
}

static const char *values_at(const ck_cache_index_values_t *v, size_t i)
{
	return v->arena.data + v->offs[i];
}

static void ns_index_fn(void *ud, const ck_obj_t *obj, ck_cache_index_values_t *out)
{
	(void)ud;
	ck_cache_index_values_add(out, obj->ns);
}

/* ---------------------------------------------------------------- index maintenance */

static void index_remove(cindex_t *ix, ck_obj_t *obj, ck_cache_index_values_t *v)
{
	values_reset(v);
	ix->fn(ix->ud, obj, v);
	for (size_t i = 0; i < v->n; i++) {
		const char *val = values_at(v, i);
		size_t at = chash_find(&ix->values, str_hash(val), eq_ivalue, val);
		if (at == SIZE_MAX)
			continue;
		ivalue_t *iv = ix->values.slots[at].p;
		chash_remove_ptr(&iv->set, chash_ptr_hash(obj), obj);
		if (iv->set.len == 0) {
			chash_remove_at(&ix->values, at);
			chash_free(&iv->set);
			free(iv);
		}
	}
}

static void index_insert(cindex_t *ix, ck_obj_t *obj, ck_cache_index_values_t *v)
{
	values_reset(v);
	ix->fn(ix->ud, obj, v);
	for (size_t i = 0; i < v->n; i++) {
		const char *val = values_at(v, i);
		uint64_t h = str_hash(val);
		size_t at = chash_find(&ix->values, h, eq_ivalue, val);
		ivalue_t *iv;
		if (at == SIZE_MAX) {
			size_t len = strlen(val);
			iv = ck_xcalloc(1, sizeof(*iv) + len + 1);
			memcpy(iv->value, val, len + 1);
			chash_insert(&ix->values, h, iv);
		} else {
			iv = ix->values.slots[at].p;
		}
		chash_insert(&iv->set, chash_ptr_hash(obj), obj);
	}
}

static void index_values_free(chash_t *values)
{
	for (size_t i = 0; i < values->cap; i++) {
		ivalue_t *iv = values->slots[i].p;
		if (iv == NULL)
			continue;
		chash_free(&iv->set);
		free(iv);
	}
	chash_free(values);
}

static void index_free(cindex_t *ix)
{
	index_values_free(&ix->values);
	free(ix->name);
}

static cindex_t *index_find(ck_cache_store_t *s, const char *name)
{
	for (size_t i = 0; i < s->nidx; i++)
		if (strcmp(s->idx[i].name, name) == 0)
			return &s->idx[i];
	return NULL;
}

/* ---------------------------------------------------------------- lifecycle */

static void add_index_locked(ck_cache_store_t *s, const char *name, ck_cache_index_fn fn, void *ud)
{
	s->idx = ck_xrealloc(s->idx, (s->nidx + 1) * sizeof(*s->idx));
	cindex_t *ix = &s->idx[s->nidx++];
	memset(ix, 0, sizeof(*ix));
	ix->name = ck_xstrdup(name);
	ix->fn = fn;
	ix->ud = ud;
	for (size_t i = 0; i < s->objs.cap; i++)
		if (s->objs.slots[i].p != NULL)
			index_insert(ix, s->objs.slots[i].p, &s->scratch);
}

ck_cache_store_t *ck_cache_store_new(void)
{
	ck_cache_store_t *s = ck_xcalloc(1, sizeof(*s));
	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	/* Workers read all the time; the one writer must still get through. */
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&s->lock, &a);
	pthread_rwlockattr_destroy(&a);
	add_index_locked(s, CK_CACHE_INDEX_NAMESPACE, ns_index_fn, NULL);
	return s;
}

void ck_cache_store_free(ck_cache_store_t *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->nidx; i++)
		index_free(&s->idx[i]);
	free(s->idx);
	for (size_t i = 0; i < s->objs.cap; i++)
		ck_obj_unref(s->objs.slots[i].p);
	chash_free(&s->objs);
	values_free(&s->scratch);
	pthread_rwlock_destroy(&s->lock);
	free(s);
}

int ck_cache_store_add_index(ck_cache_store_t *s, const char *name, ck_cache_index_fn fn, void *ud,
                             char **err)
{
	int result = -1;
	if (name == NULL || fn == NULL)
		return ck_err_set(err, "cache: add index: a name and a function are required");
	pthread_rwlock_wrlock(&s->lock);
	if (index_find(s, name) != NULL) {
		ck_err_set(err, "cache: add index %s: an index with this name exists", name);
		goto out;
	}
	add_index_locked(s, name, fn, ud);
	result = 0;
out:
	pthread_rwlock_unlock(&s->lock);
	return result;
}

/* ---------------------------------------------------------------- writes */

ck_obj_t *ck_cache_store_upsert(ck_cache_store_t *s, ck_obj_t *obj)
{
	uint64_t h = cache_obj_key_hash(obj);
	ck_obj_ref(obj);
	pthread_rwlock_wrlock(&s->lock);
	size_t at = chash_find(&s->objs, h, eq_obj_obj, obj);
	ck_obj_t *old = NULL;
	if (at != SIZE_MAX) {
		old = s->objs.slots[at].p;
		s->objs.slots[at].p = obj;
	} else {
		chash_insert(&s->objs, h, obj);
	}
	for (size_t i = 0; i < s->nidx; i++) {
		if (old != NULL)
			index_remove(&s->idx[i], old, &s->scratch);
		index_insert(&s->idx[i], obj, &s->scratch);
	}
	pthread_rwlock_unlock(&s->lock);
	return old;
}

static ck_obj_t *delete_at_locked(ck_cache_store_t *s, size_t at)
{
	ck_obj_t *old = s->objs.slots[at].p;
	chash_remove_at(&s->objs, at);
	for (size_t i = 0; i < s->nidx; i++)
		index_remove(&s->idx[i], old, &s->scratch);
	return old;
}

ck_obj_t *ck_cache_store_delete(ck_cache_store_t *s, const char *key)
{
	if (key == NULL)
		return NULL;
	keyref_t k = {key, strlen(key)};
	uint64_t h = cache_key_hash(key, k.len);
	ck_obj_t *old = NULL;
	pthread_rwlock_wrlock(&s->lock);
	size_t at = chash_find(&s->objs, h, eq_obj_key, &k);
	if (at != SIZE_MAX)
		old = delete_at_locked(s, at);
	pthread_rwlock_unlock(&s->lock);
	return old;
}

ck_obj_t *cache_store_delete_obj(ck_cache_store_t *s, const ck_obj_t *obj)
{
	uint64_t h = cache_obj_key_hash(obj);
	ck_obj_t *old = NULL;
	pthread_rwlock_wrlock(&s->lock);
	size_t at = chash_find(&s->objs, h, eq_obj_obj, obj);
	if (at != SIZE_MAX)
		old = delete_at_locked(s, at);
	pthread_rwlock_unlock(&s->lock);
	return old;
}

/*
 * The atomic relist (client-go's AtomicFIFO replaces its indexer under one
 * lock). The new table and indexes are built beside the old ones, in as many
 * steps as the caller likes (the informer does a batch per loop round, so a
 * big relist does not freeze the loop), and swapped in under the write lock:
 * readers wait for a few pointer stores, not for the index computations, and
 * see the old content until then. The price is a second set of tables for the
 * duration. Only the writer thread changes the tables, so it reads the old
 * ones unlocked, and they must not change until the commit.
 */
struct cache_store_repl {
	ck_cache_store_t *s;
	chash_t objs;
	chash_t *values; /* one per index */
	size_t nidx;
	ck_cache_index_values_t v;
};

cache_store_repl_t *cache_store_replace_begin(ck_cache_store_t *s)
{
	cache_store_repl_t *r = ck_xcalloc(1, sizeof(*r));
	r->s = s;
	r->nidx = s->nidx;
	r->values = r->nidx ? ck_xcalloc(r->nidx, sizeof(*r->values)) : NULL;
	return r;
}

void cache_store_replace_add(cache_store_repl_t *r, ck_obj_t *const *items, size_t n,
                             ck_obj_t **olds)
{
	ck_cache_store_t *s = r->s;
	for (size_t i = 0; i < n; i++) {
		ck_obj_t *obj = items[i];
		uint64_t h = cache_obj_key_hash(obj);
		size_t at = chash_find(&s->objs, h, eq_obj_obj, obj);
		olds[i] = at == SIZE_MAX ? NULL : ck_obj_ref(s->objs.slots[at].p);
		at = chash_find(&r->objs, h, eq_obj_obj, obj);
		if (at != SIZE_MAX) {
			/* A key listed twice: the later one wins. */
			ck_obj_t *prev = r->objs.slots[at].p;
			for (size_t k = 0; k < r->nidx; k++) {
				cindex_t ix = s->idx[k];
				ix.values = r->values[k];
				index_remove(&ix, prev, &r->v);
				r->values[k] = ix.values;
			}
			ck_obj_unref(prev);
			r->objs.slots[at].p = ck_obj_ref(obj);
		} else {
			chash_insert(&r->objs, h, ck_obj_ref(obj));
		}
		for (size_t k = 0; k < r->nidx; k++) {
			cindex_t ix = s->idx[k];
			ix.values = r->values[k];
			index_insert(&ix, obj, &r->v);
			r->values[k] = ix.values;
		}
	}
}

static void repl_free(cache_store_repl_t *r)
{
	for (size_t k = 0; k < r->nidx; k++)
		index_values_free(&r->values[k]);
	free(r->values);
	for (size_t i = 0; i < r->objs.cap; i++)
		ck_obj_unref(r->objs.slots[i].p);
	chash_free(&r->objs);
	values_free(&r->v);
	free(r);
}

void cache_store_replace_abort(cache_store_repl_t *r)
{
	if (r != NULL)
		repl_free(r);
}

void cache_store_replace_commit(cache_store_repl_t *r, ck_cache_objs_t *gone)
{
	ck_cache_store_t *s = r->s;
	pthread_rwlock_wrlock(&s->lock);
	chash_t old = s->objs;
	s->objs = r->objs;
	r->objs = old;
	for (size_t k = 0; k < r->nidx; k++) {
		chash_t t = s->idx[k].values;
		s->idx[k].values = r->values[k];
		r->values[k] = t;
	}
	pthread_rwlock_unlock(&s->lock);

	/* r now holds the old content: what has no key in the new one is gone. */
	gone->n = 0;
	gone->items = NULL;
	size_t cap = 0;
	for (size_t i = 0; i < r->objs.cap; i++) {
		ck_obj_t *o = r->objs.slots[i].p;
		if (o == NULL ||
		    chash_find(&s->objs, r->objs.slots[i].h, eq_obj_obj, o) != SIZE_MAX)
			continue;
		if (gone->n == cap) {
			cap = cap ? cap * 2 : 16;
			gone->items = ck_xrealloc(gone->items, cap * sizeof(*gone->items));
		}
		gone->items[gone->n++] = ck_obj_ref(o);
	}
	repl_free(r);
}

/* ---------------------------------------------------------------- reads */

ck_obj_t *cache_store_get_obj_nolock(ck_cache_store_t *s, const ck_obj_t *like)
{
	size_t at = chash_find(&s->objs, cache_obj_key_hash(like), eq_obj_obj, like);
	return at == SIZE_MAX ? NULL : s->objs.slots[at].p;
}

void cache_store_foreach_nolock(ck_cache_store_t *s, void (*fn)(void *ud, ck_obj_t *obj), void *ud)
{
	for (size_t i = 0; i < s->objs.cap; i++)
		if (s->objs.slots[i].p != NULL)
			fn(ud, s->objs.slots[i].p);
}

static void list_locked(ck_cache_store_t *s, ck_cache_objs_t *out)
{
	out->n = 0;
	out->items = s->objs.len ? ck_xmalloc(s->objs.len * sizeof(ck_obj_t *)) : NULL;
	for (size_t i = 0; i < s->objs.cap; i++)
		if (s->objs.slots[i].p != NULL)
			out->items[out->n++] = ck_obj_ref(s->objs.slots[i].p);
}

void cache_store_list_nolock(ck_cache_store_t *s, ck_cache_objs_t *out)
{
	list_locked(s, out);
}

ck_obj_t *ck_cache_store_get(ck_cache_store_t *s, const char *key)
{
	if (key == NULL)
		return NULL;
	keyref_t k = {key, strlen(key)};
	uint64_t h = cache_key_hash(key, k.len);
	ck_obj_t *obj = NULL;
	pthread_rwlock_rdlock(&s->lock);
	size_t at = chash_find(&s->objs, h, eq_obj_key, &k);
	if (at != SIZE_MAX)
		obj = ck_obj_ref(s->objs.slots[at].p);
	pthread_rwlock_unlock(&s->lock);
	return obj;
}

ck_obj_t *ck_cache_store_get_ns_name(ck_cache_store_t *s, const char *ns, const char *name)
{
	if (name == NULL)
		return NULL;
	if (ns == NULL || ns[0] == '\0')
		return ck_cache_store_get(s, name);
	char small[320];
	int n = snprintf(small, sizeof(small), "%s/%s", ns, name);
	if (n >= 0 && (size_t)n < sizeof(small))
		return ck_cache_store_get(s, small);
	char *key = ck_xasprintf("%s/%s", ns, name);
	ck_obj_t *obj = ck_cache_store_get(s, key);
	free(key);
	return obj;
}

size_t ck_cache_store_len(ck_cache_store_t *s)
{
	pthread_rwlock_rdlock(&s->lock);
	size_t n = s->objs.len;
	pthread_rwlock_unlock(&s->lock);
	return n;
}

void ck_cache_store_list(ck_cache_store_t *s, ck_cache_objs_t *out)
{
	pthread_rwlock_rdlock(&s->lock);
	list_locked(s, out);
	pthread_rwlock_unlock(&s->lock);
}

void ck_cache_store_list_keys(ck_cache_store_t *s, ck_cache_strs_t *out)
{
	pthread_rwlock_rdlock(&s->lock);
	out->n = 0;
	out->items = s->objs.len ? ck_xmalloc(s->objs.len * sizeof(char *)) : NULL;
	for (size_t i = 0; i < s->objs.cap; i++)
		if (s->objs.slots[i].p != NULL)
			out->items[out->n++] = ck_obj_key_dup(s->objs.slots[i].p);
	pthread_rwlock_unlock(&s->lock);
}

/* Finds index `index`'s set for value; *ix NULL means no such index. Read lock held. */
static const chash_t *index_set_locked(ck_cache_store_t *s, const char *index, const char *value,
                                       cindex_t **ix)
{
	*ix = index_find(s, index);
	if (*ix == NULL || value == NULL)
		return NULL;
	size_t at = chash_find(&(*ix)->values, str_hash(value), eq_ivalue, value);
	return at == SIZE_MAX ? NULL : &((ivalue_t *)(*ix)->values.slots[at].p)->set;
}

int ck_cache_store_by_index(ck_cache_store_t *s, const char *index, const char *value,
                            ck_cache_objs_t *out, char **err)
{
	cindex_t *ix;
	out->items = NULL;
	out->n = 0;
	if (index == NULL)
		return ck_err_set(err, "cache: by index: no index name");
	pthread_rwlock_rdlock(&s->lock);
	const chash_t *set = index_set_locked(s, index, value, &ix);
	if (set != NULL && set->len > 0) {
		out->items = ck_xmalloc(set->len * sizeof(ck_obj_t *));
		for (size_t i = 0; i < set->cap; i++)
			if (set->slots[i].p != NULL)
				out->items[out->n++] = ck_obj_ref(set->slots[i].p);
	}
	pthread_rwlock_unlock(&s->lock);
	if (ix == NULL)
		return ck_err_set(err, "cache: index %s does not exist", index);
	return 0;
}

int ck_cache_store_index_keys(ck_cache_store_t *s, const char *index, const char *value,
                              ck_cache_strs_t *out, char **err)
{
	cindex_t *ix;
	out->items = NULL;
	out->n = 0;
	if (index == NULL)
		return ck_err_set(err, "cache: index keys: no index name");
	pthread_rwlock_rdlock(&s->lock);
	const chash_t *set = index_set_locked(s, index, value, &ix);
	if (set != NULL && set->len > 0) {
		out->items = ck_xmalloc(set->len * sizeof(char *));
		for (size_t i = 0; i < set->cap; i++)
			if (set->slots[i].p != NULL)
				out->items[out->n++] = ck_obj_key_dup(set->slots[i].p);
	}
	pthread_rwlock_unlock(&s->lock);
	if (ix == NULL)
		return ck_err_set(err, "cache: index %s does not exist", index);
	return 0;
}

int ck_cache_store_index_values(ck_cache_store_t *s, const char *index, ck_cache_strs_t *out,
                                char **err)
{
	out->items = NULL;
	out->n = 0;
	if (index == NULL)
		return ck_err_set(err, "cache: index values: no index name");
	pthread_rwlock_rdlock(&s->lock);
	cindex_t *ix = index_find(s, index);
	if (ix != NULL && ix->values.len > 0) {
		out->items = ck_xmalloc(ix->values.len * sizeof(char *));
		for (size_t i = 0; i < ix->values.cap; i++)
			if (ix->values.slots[i].p != NULL)
				out->items[out->n++] =
				    ck_xstrdup(((ivalue_t *)ix->values.slots[i].p)->value);
	}
	pthread_rwlock_unlock(&s->lock);
	if (ix == NULL)
		return ck_err_set(err, "cache: index %s does not exist", index);
	return 0;
}

void ck_cache_store_foreach(ck_cache_store_t *s, bool (*fn)(void *ud, ck_obj_t *obj), void *ud)
{
	/* fn runs on a snapshot, without the lock: under it, fn reading this store
	 * would deadlock as soon as a writer queued (the lock prefers writers, so a
	 * second read lock waits behind it), and a slow fn would hold up the loop
	 * thread's writes. The price is one array and a reference per object. */
	ck_cache_objs_t snap;
	ck_cache_store_list(s, &snap);
	for (size_t i = 0; i < snap.n; i++)
		if (!fn(ud, snap.items[i]))
			break;
	ck_cache_objs_free(&snap);
}

size_t ck_cache_store_mem_bytes(ck_cache_store_t *s, size_t *obj_bytes)
{
	pthread_rwlock_rdlock(&s->lock);
	size_t n = sizeof(*s) + chash_bytes(&s->objs) + s->nidx * sizeof(cindex_t);
	for (size_t i = 0; i < s->nidx; i++) {
		cindex_t *ix = &s->idx[i];
		n += chash_bytes(&ix->values) + strlen(ix->name) + 1;
		for (size_t j = 0; j < ix->values.cap; j++) {
			ivalue_t *iv = ix->values.slots[j].p;
			if (iv != NULL)
				n += sizeof(*iv) + strlen(iv->value) + 1 + chash_bytes(&iv->set);
		}
	}
	if (obj_bytes != NULL) {
		size_t ob = 0;
		for (size_t i = 0; i < s->objs.cap; i++)
			ob += ck_obj_size(s->objs.slots[i].p);
		*obj_bytes = ob;
	}
	pthread_rwlock_unlock(&s->lock);
	return n;
}

/* ---------------------------------------------------------------- listers */

/*
 * A lister is its informer's store seen through a narrower, read-only API: the
 * handle is the store pointer itself, so it costs nothing and lives as long.
 */
const ck_cache_lister_t *cache_lister_from_store(ck_cache_store_t *s)
{
	return (const ck_cache_lister_t *)s;
}

static ck_cache_store_t *lister_store(const ck_cache_lister_t *l)
{
	return (ck_cache_store_t *)(uintptr_t)l;
}

ck_obj_t *ck_cache_lister_get(const ck_cache_lister_t *l, const char *ns, const char *name)
{
	return ck_cache_store_get_ns_name(lister_store(l), ns, name);
}

/* Keeps the items matching sel, dropping the others' references. */
static void filter(ck_cache_objs_t *out, const ck_cache_selector_t *sel)
{
	if (sel == NULL)
		return;
	size_t k = 0;
	for (size_t i = 0; i < out->n; i++) {
		if (ck_cache_selector_matches(sel, out->items[i]))
			out->items[k++] = out->items[i];
		else
			ck_obj_unref(out->items[i]);
	}
	out->n = k;
}

void ck_cache_lister_list(const ck_cache_lister_t *l, const ck_cache_selector_t *sel,
                          ck_cache_objs_t *out)
{
	ck_cache_store_list(lister_store(l), out);
	filter(out, sel);
}

void ck_cache_lister_list_ns(const ck_cache_lister_t *l, const char *ns,
                             const ck_cache_selector_t *sel, ck_cache_objs_t *out)
{
	/* "" is metav1.NamespaceAll: every object, as client-go's ListAllByNamespace. */
	if (ns == NULL || ns[0] == '\0') {
		ck_cache_lister_list(l, sel, out);
		return;
	}
	ck_cache_store_by_index(lister_store(l), CK_CACHE_INDEX_NAMESPACE, ns, out, NULL);
	filter(out, sel);
}

/* ---------------------------------------------------------------- index listings */

static bool eq_ptr(const void *p, const void *key)
{
	return p == key;
}

int ck_cache_store_index(ck_cache_store_t *s, const char *index, const ck_obj_t *obj,
                         ck_cache_objs_t *out, char **err)
{
	ck_cache_index_values_t v = {0};
	chash_t seen = {0}; /* an object with two of obj's values is returned once */
	out->items = NULL;
	out->n = 0;
	if (index == NULL || obj == NULL)
		return ck_err_set(err, "cache: index: no index name or object");
	pthread_rwlock_rdlock(&s->lock);
	cindex_t *ix = index_find(s, index);
	if (ix == NULL)
		goto out;
	/* obj is the caller's, not necessarily stored: its values are computed here
	 * (client-go's Index does the same), into local scratch -- the store's own is
	 * the writer's. */
	ix->fn(ix->ud, obj, &v);
	size_t cap = 0;
	for (size_t i = 0; i < v.n; i++) {
		const char *val = values_at(&v, i);
		size_t at = chash_find(&ix->values, str_hash(val), eq_ivalue, val);
		if (at == SIZE_MAX)
			continue;
		const chash_t *set = &((ivalue_t *)ix->values.slots[at].p)->set;
		for (size_t j = 0; j < set->cap; j++) {
			ck_obj_t *o = set->slots[j].p;
			if (o == NULL)
				continue;
			uint64_t h = chash_ptr_hash(o);
			if (v.n > 1 && chash_find(&seen, h, eq_ptr, o) != SIZE_MAX)
				continue;
			if (v.n > 1)
				chash_insert(&seen, h, o);
			if (out->n == cap) {
				cap = cap ? cap * 2 : set->len;
				out->items = ck_xrealloc(out->items, cap * sizeof(ck_obj_t *));
			}
			out->items[out->n++] = ck_obj_ref(o);
		}
	}
out:
	pthread_rwlock_unlock(&s->lock);
	chash_free(&seen);
	values_free(&v);
	if (ix == NULL)
		return ck_err_set(err, "cache: index %s does not exist", index);
	return 0;
}

void ck_cache_store_indexers(ck_cache_store_t *s, ck_cache_strs_t *out)
{
	pthread_rwlock_rdlock(&s->lock);
	out->n = s->nidx;
	out->items = ck_xmalloc((s->nidx ? s->nidx : 1) * sizeof(char *));
	for (size_t i = 0; i < s->nidx; i++)
		out->items[i] = ck_xstrdup(s->idx[i].name);
	pthread_rwlock_unlock(&s->lock);
}

int ck_cache_store_get_indexer(ck_cache_store_t *s, const char *index, ck_cache_index_fn *fn,
                               void **ud)
{
	int result = -1;
	pthread_rwlock_rdlock(&s->lock);
	cindex_t *ix = index ? index_find(s, index) : NULL;
	if (ix != NULL) {
		if (fn != NULL)
			*fn = ix->fn;
		if (ud != NULL)
			*ud = ix->ud;
		result = 0;
	}
	pthread_rwlock_unlock(&s->lock);
	return result;
}
