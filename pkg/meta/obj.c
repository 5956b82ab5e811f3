/*
 * obj: immutable, reference-counted objects and the builder that packs them.
 *
 * Design note. The builder collects every string into one scratch arena (an
 * sbuf, reused across objects so that decoding a list allocates nothing per
 * object but the final block) and remembers offsets and lengths. finish() then
 * computes the exact size of one block laid out as
 *
 *     ck_obj_t | labels[] | annotations[] | owners[] | fields[] | finalizers[] |
 *     strings...
 *
 * copies everything in, and points the struct's members into the block. Absent
 * metadata strings point to a shared static "" instead of costing a byte each.
 * Labels and annotations are sorted by key (the last value wins for a repeated
 * key, as in Go's JSON decoding) so that lookups are binary searches.
 */
#include <ckube/obj.h>

#include "pkg/meta/obj_internal.h"

#include <ckube/base.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A string in the builder's arena; off == NONE means unset. */
typedef struct bstr {
	size_t off;
	size_t len;
} bstr_t;

#define NONE ((size_t)-1)

typedef struct bkv {
	bstr_t k, v;
	size_t seq; /* insertion order, so that the last of equal keys wins */
} bkv_t;

typedef struct bowner {
	bstr_t s[4]; /* apiVersion, kind, name, uid */
	bool controller, block;
} bowner_t;

typedef struct bfield {
	ck_val_type_t type;
	bool b;
	int64_t i;
	double d;
	bstr_t s;
} bfield_t;

enum { M_NS, M_NAME, M_UID, M_RV, M_CTIME, M_DTIME, M_COUNT };

static const char *const meta_names[M_COUNT] = {
    "namespace", "name", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
};

static const char *const owner_names[4] = {"apiVersion", "kind", "name", "uid"};

struct ck_obj_builder {
	const ck_type_t *type;
	ck_sbuf_t arena;
	bstr_t meta[M_COUNT];
	int64_t generation;
	bkv_t *labels, *annots;
	size_t nlabels, nannots, caplabels, capannots;
	bowner_t *owners;
	size_t nowners, capowners;
	bstr_t *fins;
	size_t nfins, capfins;
	bfield_t *fields;
	size_t seq;
};

static const char empty_str[1] = "";
static const ck_val_t absent_val = {.type = CK_VAL_ABSENT};

/* The most entries of one kind an object can hold (the counters are 16 bits). */
#define KOBJ_MAX_ENTRIES 65535u

ck_obj_t *ck_obj_ref(ck_obj_t *obj)
{
	if (obj != NULL)
		atomic_fetch_add_explicit(&obj->refs, 1, memory_order_relaxed);
	return obj;
}

void ck_obj_unref(ck_obj_t *obj)
{
	if (obj == NULL)
		return;
	/* acq_rel: the freeing thread must see every other holder's reads finished. */
	if (atomic_fetch_sub_explicit(&obj->refs, 1, memory_order_acq_rel) == 1)
		free(obj);
}

static const char *kv_find(const ck_obj_kv_t *kv, size_t n, const char *key)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(key, kv[mid].key);
		if (c == 0)
			return kv[mid].value;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

const char *ck_obj_label(const ck_obj_t *obj, const char *key)
{
	if (obj == NULL || key == NULL)
		return NULL;
	return kv_find(obj->labels, obj->nlabels, key);
}

const char *ck_obj_annotation(const ck_obj_t *obj, const char *key)
{
	if (obj == NULL || key == NULL)
		return NULL;
	return kv_find(obj->annotations, obj->nannotations, key);
}

const ck_obj_owner_t *ck_obj_controller_ref(const ck_obj_t *obj)
{
	if (obj == NULL)
		return NULL;
	for (size_t i = 0; i < obj->nowners; i++)
		if (obj->owners[i].controller)
			return &obj->owners[i];
	return NULL;
}

bool ck_obj_has_finalizer(const ck_obj_t *obj, const char *name)
{
	if (obj == NULL || name == NULL)
		return false;
	for (size_t i = 0; i < obj->nfinalizers; i++)
		if (strcmp(obj->finalizers[i], name) == 0)
			return true;
	return false;
}

bool ck_api_version_has_group(const char *api_version, const char *group)
{
	const char *av = api_version ? api_version : "", *g = group ? group : "";
	const char *slash = strchr(av, '/');
	if (slash == NULL) /* "v1": the core group */
		return g[0] == '\0';
	return strlen(g) == (size_t)(slash - av) && memcmp(av, g, strlen(g)) == 0;
}

const ck_obj_owner_t *ck_obj_controller_of(const ck_obj_t *obj, const char *group, const char *kind)
{
	const ck_obj_owner_t *ref = ck_obj_controller_ref(obj);
	if (ref == NULL || kind == NULL || strcmp(ref->kind, kind) != 0 ||
	    !ck_api_version_has_group(ref->api_version, group))
		return NULL;
	return ref;
}

bool ck_obj_is_controlled_by(const ck_obj_t *obj, const ck_obj_t *owner)
{
	if (owner == NULL)
		return false;
	const ck_obj_owner_t *ref =
	    ck_obj_controller_of(obj, owner->type->group, owner->type->kind);
	if (ref == NULL || strcmp(ref->name, owner->name) != 0)
		return false;
	return ref->uid[0] == '\0' || owner->uid[0] == '\0' || strcmp(ref->uid, owner->uid) == 0;
}

const ck_val_t *ck_obj_field(const ck_obj_t *obj, size_t i)
{
	if (obj == NULL || i >= obj->nfields)
		return &absent_val;
	return &obj->fields[i];
}

int ck_type_field_index(const ck_type_t *t, const char *path)
{
	if (t == NULL || path == NULL)
		return -1;
	for (size_t i = 0; i < t->nfields; i++)
		if (strcmp(t->fields[i], path) == 0)
			return (int)i;
	return -1;
}

size_t ck_obj_key(const ck_obj_t *obj, char *buf, size_t cap)
{
	int n;
	if (obj->ns[0] == '\0' || !obj->type->namespaced)
		n = snprintf(buf, cap, "%s", obj->name);
	else
		n = snprintf(buf, cap, "%s/%s", obj->ns, obj->name);
	return n < 0 ? 0 : (size_t)n;
}

char *ck_obj_key_dup(const ck_obj_t *obj)
{
	if (obj->ns[0] == '\0' || !obj->type->namespaced)
		return ck_xstrdup(obj->name);
	return ck_xasprintf("%s/%s", obj->ns, obj->name);
}

/*
 * Like client-go's SplitMetaNamespaceKey: "name" or "ns/name"; anything with
 * more than one '/' is not a key. On error *ns and *name are NULL.
 */
int ck_obj_key_split(const char *key, char **ns, char **name)
{
	*ns = NULL;
	*name = NULL;
	if (key == NULL)
		return -1;
	const char *slash = strchr(key, '/');
	if (slash == NULL) {
		*ns = ck_xstrdup("");
		*name = ck_xstrdup(key);
		return 0;
	}
	if (strchr(slash + 1, '/') != NULL)
		return -1;
	*ns = ck_xstrndup(key, (size_t)(slash - key));
	*name = ck_xstrdup(slash + 1);
	return 0;
}

size_t ck_type_api_version(const ck_type_t *t, char *buf, size_t cap)
{
	int n;
	if (t->group == NULL || t->group[0] == '\0')
		n = snprintf(buf, cap, "%s", t->version);
	else
		n = snprintf(buf, cap, "%s/%s", t->group, t->version);
	return n < 0 ? 0 : (size_t)n;
}

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* The fixed part of an object's block, before its strings. */
static size_t fixed_size(size_t nl, size_t na, size_t no, size_t nf, size_t nfin)
{
	return align8(sizeof(ck_obj_t)) + (nl + na) * sizeof(ck_obj_kv_t) +
	       no * sizeof(ck_obj_owner_t) + nf * sizeof(ck_val_t) + nfin * sizeof(char *);
}

/* Adds one string's bytes unless it is the shared static "". */
static size_t str_cost(const char *s)
{
	return s == NULL || s == empty_str ? 0 : strlen(s) + 1;
}

/*
 * Recomputes the block's size from its contents; a string holding an escaped
 * NUL ("\u0000") is counted only up to it, which is all a reader can see.
 */
size_t ck_obj_size(const ck_obj_t *obj)
{
	if (obj == NULL)
		return 0;
	size_t n = fixed_size(obj->nlabels, obj->nannotations, obj->nowners, obj->nfields,
	                      obj->nfinalizers);
	n += str_cost(obj->ns) + str_cost(obj->name) + str_cost(obj->uid) + str_cost(obj->rv) +
	     str_cost(obj->creation_timestamp) + str_cost(obj->deletion_timestamp);
	for (size_t i = 0; i < obj->nlabels; i++)
		n += str_cost(obj->labels[i].key) + str_cost(obj->labels[i].value);
	for (size_t i = 0; i < obj->nannotations; i++)
		n += str_cost(obj->annotations[i].key) + str_cost(obj->annotations[i].value);
	for (size_t i = 0; i < obj->nowners; i++) {
		const ck_obj_owner_t *o = &obj->owners[i];
		n += str_cost(o->api_version) + str_cost(o->kind) + str_cost(o->name) +
		     str_cost(o->uid);
	}
	for (size_t i = 0; i < obj->nfields; i++)
		if (obj->fields[i].type == CK_VAL_STRING || obj->fields[i].type == CK_VAL_JSON)
			n += str_cost(obj->fields[i].u.s);
	for (size_t i = 0; i < obj->nfinalizers; i++)
		n += str_cost(obj->finalizers[i]);
	return n;
}

/* ---- builder ---- */

ck_obj_builder_t *ck_obj_builder_new(const ck_type_t *t)
{
	ck_obj_builder_t *b = ck_xcalloc(1, sizeof(*b));
	b->type = t;
	if (t->nfields > 0)
		b->fields = ck_xcalloc(t->nfields, sizeof(*b->fields));
	ck_obj_builder_reset(b);
	return b;
}

void ck_obj_builder_reset(ck_obj_builder_t *b)
{
	ck_sbuf_reset(&b->arena);
	for (size_t i = 0; i < M_COUNT; i++)
		b->meta[i].off = NONE;
	b->generation = 0;
	b->nlabels = b->nannots = b->nowners = b->nfins = 0;
	b->seq = 0;
	for (size_t i = 0; i < b->type->nfields; i++)
		b->fields[i].type = CK_VAL_ABSENT;
}

void ck_obj_i_builder_ident(const ck_obj_builder_t *b, char *out, size_t cap)
{
	if (cap == 0)
		return;
	out[0] = '\0';
	const bstr_t *ns = &b->meta[M_NS], *nm = &b->meta[M_NAME];
	if (nm->off == NONE)
		return;
	bool has_ns = ns->off != NONE && ns->len > 0;
	snprintf(out, cap, " \"%.*s%s%.*s\"", has_ns ? (int)ns->len : 0,
	         has_ns ? b->arena.data + ns->off : "", has_ns ? "/" : "", (int)nm->len,
	         b->arena.data + nm->off);
}

void ck_obj_builder_free(ck_obj_builder_t *b)
{
	if (b == NULL)
		return;
	ck_sbuf_free(&b->arena);
	free(b->labels);
	free(b->annots);
	free(b->owners);
	free(b->fins);
	free(b->fields);
	free(b);
}

/* Copies a string into the arena, NUL-terminated. */
static bstr_t arena_put(ck_obj_builder_t *b, const char *s, size_t len)
{
	bstr_t r = {b->arena.len, len};
	ck_sbuf_append(&b->arena, s, len);
	ck_sbuf_putc(&b->arena, '\0');
	return r;
}

void ck_obj_builder_set_meta(ck_obj_builder_t *b, const char *field, const char *value, size_t len)
{
	for (size_t i = 0; i < M_COUNT; i++) {
		if (strcmp(field, meta_names[i]) == 0) {
			b->meta[i] = value ? arena_put(b, value, len) : (bstr_t){NONE, 0};
			return;
		}
	}
}

void ck_obj_builder_set_generation(ck_obj_builder_t *b, int64_t g)
{
	b->generation = g;
}

static void kv_add(ck_obj_builder_t *b, bkv_t **arr, size_t *n, size_t *cap, const char *k,
                   size_t kl, const char *v, size_t vl)
{
	/* Beyond the 16-bit count the object cannot say it; the decoder rejects such
	 * input before it gets here, so dropping is only a guard. */
	if (*n >= KOBJ_MAX_ENTRIES)
		return;
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 8;
		*arr = ck_xrealloc(*arr, *cap * sizeof(**arr));
	}
	bkv_t *e = &(*arr)[(*n)++];
	e->k = arena_put(b, k, kl);
	e->v = arena_put(b, v, vl);
	e->seq = b->seq++;
}

void ck_obj_builder_add_label(ck_obj_builder_t *b, const char *k, size_t kl, const char *v,
                              size_t vl)
{
	kv_add(b, &b->labels, &b->nlabels, &b->caplabels, k, kl, v, vl);
}

void ck_obj_builder_add_annotation(ck_obj_builder_t *b, const char *k, size_t kl, const char *v,
                                   size_t vl)
{
	kv_add(b, &b->annots, &b->nannots, &b->capannots, k, kl, v, vl);
}

void ck_obj_builder_clear_annotations(ck_obj_builder_t *b)
{
	b->nannots = 0;
}

void ck_obj_builder_add_owner(ck_obj_builder_t *b)
{
	if (b->nowners >= KOBJ_MAX_ENTRIES)
		return;
	if (b->nowners == b->capowners) {
		b->capowners = b->capowners ? b->capowners * 2 : 2;
		b->owners = ck_xrealloc(b->owners, b->capowners * sizeof(*b->owners));
	}
	bowner_t *o = &b->owners[b->nowners++];
	for (size_t i = 0; i < 4; i++)
		o->s[i].off = NONE;
	o->controller = o->block = false;
}

void ck_obj_builder_set_owner(ck_obj_builder_t *b, const char *field, const char *v, size_t vl)
{
	if (b->nowners == 0)
		return;
	bowner_t *o = &b->owners[b->nowners - 1];
	for (size_t i = 0; i < 4; i++) {
		if (strcmp(field, owner_names[i]) == 0) {
			o->s[i] = v ? arena_put(b, v, vl) : (bstr_t){NONE, 0};
			return;
		}
	}
}

void ck_obj_builder_set_owner_bool(ck_obj_builder_t *b, const char *field, bool v)
{
	if (b->nowners == 0)
		return;
	bowner_t *o = &b->owners[b->nowners - 1];
	if (strcmp(field, "controller") == 0)
		o->controller = v;
	else if (strcmp(field, "blockOwnerDeletion") == 0)
		o->block = v;
}

void ck_obj_builder_add_finalizer(ck_obj_builder_t *b, const char *s, size_t len)
{
	if (b->nfins == b->capfins) {
		b->capfins = b->capfins ? b->capfins * 2 : 2;
		b->fins = ck_xrealloc(b->fins, b->capfins * sizeof(*b->fins));
	}
	b->fins[b->nfins++] = arena_put(b, s ? s : "", s ? len : 0);
}

void ck_obj_builder_set_field(ck_obj_builder_t *b, size_t i, ck_val_type_t type, bool bv,
                              int64_t iv, double dv, const char *s, size_t len)
{
	if (i >= b->type->nfields)
		return;
	bfield_t *f = &b->fields[i];
	f->type = type;
	f->b = bv;
	f->i = iv;
	f->d = dv;
	f->s.off = NONE;
	if (type == CK_VAL_STRING || type == CK_VAL_JSON)
		f->s = arena_put(b, s ? s : "", s ? len : 0);
}

static int kv_cmp(const void *a, const void *b, void *arena)
{
	const bkv_t *x = a, *y = b;
	const char *base = arena;
	/* Arena strings are NUL-terminated; strcmp orders like the readers' strcmp. */
	int c = strcmp(base + x->k.off, base + y->k.off);
	if (c != 0)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sorts by key and drops all but the last of equal keys; returns the new count. */
static size_t kv_normalize(bkv_t *arr, size_t n, const char *arena)
{
	bool sorted = true;
	for (size_t i = 1; i < n && sorted; i++)
		sorted = strcmp(arena + arr[i - 1].k.off, arena + arr[i].k.off) < 0;
	if (sorted)
		return n; /* the usual case: the API server writes map keys in order */
	qsort_r(arr, n, sizeof(*arr), kv_cmp, (void *)arena);
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		if (i + 1 < n && strcmp(arena + arr[i].k.off, arena + arr[i + 1].k.off) == 0)
			continue;
		arr[out++] = arr[i];
	}
	return out;
}

typedef struct packer {
	char *p; /* next free string byte */
	const char *arena;
} packer_t;

static const char *pack(packer_t *pk, bstr_t s)
{
	if (s.off == NONE || s.len == 0)
		return empty_str;
	char *d = pk->p;
	memcpy(d, pk->arena + s.off, s.len + 1);
	pk->p += s.len + 1;
	return d;
}

static size_t bcost(bstr_t s)
{
	return s.off == NONE || s.len == 0 ? 0 : s.len + 1;
}

ck_obj_t *ck_obj_builder_finish(ck_obj_builder_t *b)
{
	const char *arena = ck_sbuf_cstr(&b->arena);
	size_t nl = kv_normalize(b->labels, b->nlabels, arena);
	size_t na = kv_normalize(b->annots, b->nannots, arena);
	size_t no = b->nowners, nf = b->type->nfields, nfin = b->nfins;

	size_t strs = 0;
	for (size_t i = 0; i < M_COUNT; i++)
		strs += bcost(b->meta[i]);
	for (size_t i = 0; i < nl; i++)
		strs += bcost(b->labels[i].k) + bcost(b->labels[i].v);
	for (size_t i = 0; i < na; i++)
		strs += bcost(b->annots[i].k) + bcost(b->annots[i].v);
	for (size_t i = 0; i < no; i++)
		for (size_t j = 0; j < 4; j++)
			strs += bcost(b->owners[i].s[j]);
	for (size_t i = 0; i < nf; i++)
		strs += bcost(b->fields[i].s);
	for (size_t i = 0; i < nfin; i++)
		strs += bcost(b->fins[i]);

	size_t fixed = fixed_size(nl, na, no, nf, nfin);
	char *block = ck_xmalloc(fixed + strs);
	ck_obj_t *o = (ck_obj_t *)block;
	memset(o, 0, sizeof(*o));
	atomic_init(&o->refs, 1);
	o->type = b->type;
	o->nlabels = (uint16_t)nl;
	o->nannotations = (uint16_t)na;
	o->nowners = (uint16_t)no;
	o->nfields = (uint16_t)nf;

	char *p = block + align8(sizeof(ck_obj_t));
	ck_obj_kv_t *labels = (ck_obj_kv_t *)p;
	p += nl * sizeof(ck_obj_kv_t);
	ck_obj_kv_t *annots = (ck_obj_kv_t *)p;
	p += na * sizeof(ck_obj_kv_t);
	ck_obj_owner_t *owners = (ck_obj_owner_t *)p;
	p += no * sizeof(ck_obj_owner_t);
	ck_val_t *fields = (ck_val_t *)p;
	p += nf * sizeof(ck_val_t);
	const char **fins = (const char **)p;
	p += nfin * sizeof(char *);

	packer_t pk = {p, arena};
	o->ns = pack(&pk, b->meta[M_NS]);
	o->name = pack(&pk, b->meta[M_NAME]);
	o->uid = pack(&pk, b->meta[M_UID]);
	o->rv = pack(&pk, b->meta[M_RV]);
	o->creation_timestamp = pack(&pk, b->meta[M_CTIME]);
	/* An explicit "" deletionTimestamp is not a deletion. */
	o->deletion_timestamp = bcost(b->meta[M_DTIME]) ? pack(&pk, b->meta[M_DTIME]) : NULL;
	o->generation = b->generation;
	for (size_t i = 0; i < nl; i++) {
		labels[i].key = pack(&pk, b->labels[i].k);
		labels[i].value = pack(&pk, b->labels[i].v);
	}
	for (size_t i = 0; i < na; i++) {
		annots[i].key = pack(&pk, b->annots[i].k);
		annots[i].value = pack(&pk, b->annots[i].v);
	}
	for (size_t i = 0; i < no; i++) {
		owners[i].api_version = pack(&pk, b->owners[i].s[0]);
		owners[i].kind = pack(&pk, b->owners[i].s[1]);
		owners[i].name = pack(&pk, b->owners[i].s[2]);
		owners[i].uid = pack(&pk, b->owners[i].s[3]);
		owners[i].controller = b->owners[i].controller;
		owners[i].block_owner_deletion = b->owners[i].block;
	}
	for (size_t i = 0; i < nf; i++) {
		const bfield_t *f = &b->fields[i];
		memset(&fields[i], 0, sizeof(fields[i]));
		fields[i].type = f->type;
		switch (f->type) {
		case CK_VAL_BOOL:
			fields[i].u.b = f->b;
			break;
		case CK_VAL_INT:
			fields[i].u.i = f->i;
			break;
		case CK_VAL_DOUBLE:
			fields[i].u.d = f->d;
			break;
		case CK_VAL_STRING:
		case CK_VAL_JSON:
			fields[i].u.s = pack(&pk, f->s);
			break;
		default:
			break;
		}
	}
	for (size_t i = 0; i < nfin; i++)
		fins[i] = pack(&pk, b->fins[i]);
	o->finalizers = nfin ? fins : NULL;
	o->nfinalizers = nfin;
	o->labels = labels;
	o->annotations = annots;
	o->owners = owners;
	o->fields = fields;
	ck_obj_builder_reset(b);
	return o;
}
