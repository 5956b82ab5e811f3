/*
 * obj: immutable, reference-counted Kubernetes objects and the type descriptors
 * that say which fields of a kind are kept.
 *
 * A kobj_t is built once by the decoder (decode.h) or by kobj_build_*, then never
 * changes, so any thread holding a reference may read it without locks. Every
 * string of one object lives in the same allocation as the struct. Metadata is
 * always kept (except managedFields, never); of spec/status only the dotted paths
 * listed in the kind's descriptor are kept, each as a kval_t.
 */
#ifndef CSC_KUBE_OBJ_H
#define CSC_KUBE_OBJ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A kept field's value. KVAL_JSON holds a compact JSON text of an object/array. */
typedef enum kval_type {
	KVAL_ABSENT = 0, /* the path was not in the object */
	KVAL_NULL,
	KVAL_BOOL,
	KVAL_INT,
	KVAL_DOUBLE,
	KVAL_STRING,
	KVAL_JSON,
} kval_type_t;

typedef struct kval {
	kval_type_t type;
	union {
		bool b;
		int64_t i;
		double d;
		const char *s; /* KVAL_STRING: unescaped UTF-8; KVAL_JSON: compact JSON */
	} u;
} kval_t;

/*
 * A kind. Static and immutable; generic code (client, cache, listers) works on
 * any descriptor.
 */
typedef struct ktype {
	const char *group;    /* "" for the core group */
	const char *version;  /* "v1" */
	const char *kind;     /* "Deployment" */
	const char *resource; /* plural, "deployments" */
	bool namespaced;
	/* Dotted paths kept beyond metadata, e.g. "spec.replicas", "status.conditions";
	 * a path naming an object or array keeps it whole as KVAL_JSON. */
	const char *const *fields;
	size_t nfields;
	/* Annotations cost memory and most controllers never read them. */
	bool keep_annotations;
} ktype_t;

typedef struct kobj_kv {
	const char *key;
	const char *value;
} kobj_kv_t;

typedef struct kobj_owner {
	const char *api_version;
	const char *kind;
	const char *name;
	const char *uid;
	bool controller;
	bool block_owner_deletion;
} kobj_owner_t;

/*
 * Read-only after construction. Pointers are never NULL for ns/name/uid/rv
 * ("" when absent) so callers need no checks; deletion_timestamp is NULL when
 * unset.
 */
typedef struct kobj {
	_Atomic uint32_t refs;
	uint16_t nlabels;
	uint16_t nannotations;
	uint16_t nowners;
	uint16_t nfields; /* == type->nfields */
	const ktype_t *type;
	const char *ns;
	const char *name;
	const char *uid;
	const char *rv;
	const char *creation_timestamp; /* "" when absent */
	const char *deletion_timestamp; /* NULL when not being deleted */
	int64_t generation;
	const kobj_kv_t *labels;      /* sorted by key */
	const kobj_kv_t *annotations; /* sorted by key; empty unless kept */
	const kobj_owner_t *owners;
	const kval_t *fields; /* fields[i] is type->fields[i] */
} kobj_t;

/* Returns obj with one more reference (obj may be NULL). Thread-safe. */
kobj_t *kobj_ref(kobj_t *obj);
/* Drops one reference; frees on the last. NULL is a no-op. Thread-safe. */
void kobj_unref(kobj_t *obj);

/* Borrows; returns the label's value (borrowed from obj) or NULL. */
const char *kobj_label(const kobj_t *obj, const char *key);
/* Borrows; returns the annotation's value or NULL. */
const char *kobj_annotation(const kobj_t *obj, const char *key);
/* Returns the ownerReference with controller=true, borrowed, or NULL. */
const kobj_owner_t *kobj_controller_ref(const kobj_t *obj);
/* Returns the kept field at index i (borrowed); KVAL_ABSENT if out of range. */
const kval_t *kobj_field(const kobj_t *obj, size_t i);
/* Looks a kept field up by its path; returns the index or -1. */
int ktype_field_index(const ktype_t *t, const char *path);

/*
 * Writes the store key ("namespace/name", or "name" when cluster-scoped or ns
 * is "") into buf. Returns the length it needed (like snprintf).
 */
size_t kobj_key(const kobj_t *obj, char *buf, size_t cap);
/* Borrows; returns a new "namespace/name" (or "name") string, free with free(). */
char *kobj_key_dup(const kobj_t *obj);
/* Splits a key; *ns and *name are new strings (free with free()); ns "" if none. */
int kobj_key_split(const char *key, char **ns, char **name);

/* "group/version" or "version" for the core group, into buf; returns length. */
size_t ktype_api_version(const ktype_t *t, char *buf, size_t cap);

/* Bytes held by obj (its one allocation), for the memory figures. */
size_t kobj_size(const kobj_t *obj);

/*
 * A builder, used by the decoder and by tests: collect strings and values, then
 * kobj_builder_finish() packs everything into one allocation.
 */
typedef struct kobj_builder kobj_builder_t;
/* Borrows t; returns a new builder, free with kobj_builder_free(). */
kobj_builder_t *kobj_builder_new(const ktype_t *t);
void kobj_builder_reset(kobj_builder_t *b);
void kobj_builder_free(kobj_builder_t *b);
/* Setters borrow their arguments (copied). */
void kobj_builder_set_meta(kobj_builder_t *b, const char *field, const char *value, size_t len);
void kobj_builder_set_generation(kobj_builder_t *b, int64_t g);
void kobj_builder_add_label(kobj_builder_t *b, const char *k, size_t kl, const char *v, size_t vl);
void kobj_builder_add_annotation(kobj_builder_t *b, const char *k, size_t kl, const char *v,
                                 size_t vl);
/* Drops the annotations added so far (the decoder keeps them until it knows whether
 * a watch event is a BOOKMARK). */
void kobj_builder_clear_annotations(kobj_builder_t *b);
/* Starts a new ownerReference; following set_owner calls fill it. */
void kobj_builder_add_owner(kobj_builder_t *b);
void kobj_builder_set_owner(kobj_builder_t *b, const char *field, const char *v, size_t vl);
void kobj_builder_set_owner_bool(kobj_builder_t *b, const char *field, bool v);
/* Sets kept field i; for KVAL_STRING/KVAL_JSON, s/len are copied. */
void kobj_builder_set_field(kobj_builder_t *b, size_t i, kval_type_t type, bool bv, int64_t iv,
                            double dv, const char *s, size_t len);
/* Returns a new object (refs = 1), free with kobj_unref(); resets the builder. */
kobj_t *kobj_builder_finish(kobj_builder_t *b);

#endif
