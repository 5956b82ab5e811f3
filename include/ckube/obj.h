/*
 * obj: immutable, reference-counted Kubernetes objects and the type descriptors
 * that say which fields of a kind are kept.
 *
 * A ck_obj_t is built once by the decoder (decode.h) or by kobj_build_*, then never
 * changes, so any thread holding a reference may read it without locks. Every
 * string of one object lives in the same allocation as the struct.
 *
 * What is kept. Of metadata, always: namespace, name, uid, resourceVersion,
 * creationTimestamp, deletionTimestamp, generation, labels, ownerReferences and
 * finalizers (a controller that owns a finalizer must see it and the deletion
 * it holds back); annotations only when the kind's descriptor says so
 * (keep_annotations); managedFields never; any other metadata member only when
 * the descriptor lists it as a field ("metadata.generateName"). Of spec and
 * status only the dotted paths listed in the descriptor are kept, each as a
 * ck_val_t. An object without finalizers costs a NULL pointer and a zero count
 * for them.
 */
#ifndef CKUBE_KUBE_OBJ_H
#define CKUBE_KUBE_OBJ_H

#include <ckube/export.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A kept field's value. CK_VAL_JSON holds a compact JSON text of an object/array. */
typedef enum ck_val_type {
	CK_VAL_ABSENT = 0, /* the path was not in the object */
	CK_VAL_NULL,
	CK_VAL_BOOL,
	CK_VAL_INT,
	CK_VAL_DOUBLE,
	CK_VAL_STRING,
	CK_VAL_JSON,
} ck_val_type_t;

typedef struct ck_val {
	ck_val_type_t type;
	union {
		bool b;
		int64_t i;
		double d;
		const char *s; /* CK_VAL_STRING: unescaped UTF-8; CK_VAL_JSON: compact JSON */
	} u;
} ck_val_t;

/*
 * A kind. Static and immutable; generic code (client, cache, listers) works on
 * any descriptor.
 */
typedef struct ck_type {
	const char *group;    /* "" for the core group */
	const char *version;  /* "v1" */
	const char *kind;     /* "Deployment" */
	const char *resource; /* plural, "deployments" */
	bool namespaced;
	/* Dotted paths kept beyond metadata, e.g. "spec.replicas", "status.conditions";
	 * a path naming an object or array keeps it whole as CK_VAL_JSON. */
	const char *const *fields;
	size_t nfields;
	/* Annotations cost memory and most controllers never read them. */
	bool keep_annotations;
} ck_type_t;

typedef struct ck_obj_kv {
	const char *key;
	const char *value;
} ck_obj_kv_t;

typedef struct ck_obj_owner {
	const char *api_version;
	const char *kind;
	const char *name;
	const char *uid;
	bool controller;
	bool block_owner_deletion;
} ck_obj_owner_t;

/*
 * Read-only after construction. Pointers are never NULL for ns/name/uid/rv
 * ("" when absent) so callers need no checks; deletion_timestamp is NULL when
 * unset.
 */
typedef struct ck_obj {
	_Atomic uint32_t refs;
	uint16_t nlabels;
	uint16_t nannotations;
	uint16_t nowners;
	uint16_t nfields; /* == type->nfields */
	const ck_type_t *type;
	const char *ns;
	const char *name;
	const char *uid;
	const char *rv;
	const char *creation_timestamp; /* "" when absent */
	const char *deletion_timestamp; /* NULL when not being deleted */
	int64_t generation;
	const ck_obj_kv_t *labels;      /* sorted by key */
	const ck_obj_kv_t *annotations; /* sorted by key; empty unless kept */
	const ck_obj_owner_t *owners;
	const ck_val_t *fields; /* fields[i] is type->fields[i] */
	/* metadata.finalizers in the server's order (duplicates kept as sent); NULL
	 * when there are none. Appended last so that the members above keep their
	 * offsets for programs built against an older header. */
	const char *const *finalizers;
	size_t nfinalizers;
} ck_obj_t;

/* Returns obj with one more reference (obj may be NULL). Thread-safe. */
CKUBE_API ck_obj_t *ck_obj_ref(ck_obj_t *obj);
/* Drops one reference; frees on the last. NULL is a no-op. Thread-safe. */
CKUBE_API void ck_obj_unref(ck_obj_t *obj);

/* Borrows; returns the label's value (borrowed from obj) or NULL. */
CKUBE_API const char *ck_obj_label(const ck_obj_t *obj, const char *key);
/* Borrows; returns the annotation's value or NULL. */
CKUBE_API const char *ck_obj_annotation(const ck_obj_t *obj, const char *key);
/* Returns the ownerReference with controller=true, borrowed, or NULL. */
CKUBE_API const ck_obj_owner_t *ck_obj_controller_ref(const ck_obj_t *obj);
/* true if obj's metadata.finalizers holds name (both borrowed; NULL: false). */
CKUBE_API bool ck_obj_has_finalizer(const ck_obj_t *obj, const char *name);
/*
 * Owner references compared as the API machinery compares them
 * (controller-runtime's controllerutil): by API group, kind and name; the
 * version is not part of the identity (apps/v1beta1 and apps/v1 name the same
 * object).
 *
 * ck_obj_controller_of: obj's controller ownerReference when its owner has API
 * group group ("" for the core group; NULL is taken as "") and kind kind
 * (borrowed), else NULL; the reference is borrowed from obj.
 * ck_obj_is_controlled_by: true when obj's controller reference names owner: same
 * group (of owner->type), kind and name, and the same uid unless one of the two
 * uids is "" (an owner recreated under the same name is another object).
 */
CKUBE_API const ck_obj_owner_t *ck_obj_controller_of(const ck_obj_t *obj, const char *group,
                                                     const char *kind);
CKUBE_API bool ck_obj_is_controlled_by(const ck_obj_t *obj, const ck_obj_t *owner);
/* true when apiVersion api_version ("apps/v1", "v1") is of API group group
 * ("apps", ""); both borrowed, NULL is "". */
CKUBE_API bool ck_api_version_has_group(const char *api_version, const char *group);
/* Returns the kept field at index i (borrowed); CK_VAL_ABSENT if out of range. */
CKUBE_API const ck_val_t *ck_obj_field(const ck_obj_t *obj, size_t i);
/* Looks a kept field up by its path; returns the index or -1. */
CKUBE_API int ck_type_field_index(const ck_type_t *t, const char *path);

/*
 * Writes the store key ("namespace/name", or "name" when cluster-scoped or ns
 * is "") into buf. Returns the length it needed (like snprintf).
 */
CKUBE_API size_t ck_obj_key(const ck_obj_t *obj, char *buf, size_t cap);
/* Borrows; returns a new "namespace/name" (or "name") string, free with free(). */
CKUBE_API char *ck_obj_key_dup(const ck_obj_t *obj);
/* Splits a key "ns/name" or "name"; *ns and *name are new strings (free with free());
 * ns "" if none. Returns 0, or -1 (both NULL) for a NULL key or one with two slashes. */
CKUBE_API int ck_obj_key_split(const char *key, char **ns, char **name);

/* "group/version" or "version" for the core group, into buf; returns length. */
CKUBE_API size_t ck_type_api_version(const ck_type_t *t, char *buf, size_t cap);

/* Bytes held by obj (its one allocation), for the memory figures. */
CKUBE_API size_t ck_obj_size(const ck_obj_t *obj);

/*
 * A builder, used by the decoder and by tests: collect strings and values, then
 * ck_obj_builder_finish() packs everything into one allocation.
 */
typedef struct ck_obj_builder ck_obj_builder_t;
/* Borrows t; returns a new builder, free with ck_obj_builder_free(). */
CKUBE_API ck_obj_builder_t *ck_obj_builder_new(const ck_type_t *t);
CKUBE_API void ck_obj_builder_reset(ck_obj_builder_t *b);
CKUBE_API void ck_obj_builder_free(ck_obj_builder_t *b);
/* Setters borrow their arguments (copied). */
CKUBE_API void ck_obj_builder_set_meta(ck_obj_builder_t *b, const char *field, const char *value,
                                       size_t len);
CKUBE_API void ck_obj_builder_set_generation(ck_obj_builder_t *b, int64_t g);
CKUBE_API void ck_obj_builder_add_label(ck_obj_builder_t *b, const char *k, size_t kl,
                                        const char *v, size_t vl);
CKUBE_API void ck_obj_builder_add_annotation(ck_obj_builder_t *b, const char *k, size_t kl,
                                             const char *v, size_t vl);
/* Drops the annotations added so far (the decoder keeps them until it knows whether
 * a watch event is a BOOKMARK). */
CKUBE_API void ck_obj_builder_clear_annotations(ck_obj_builder_t *b);
/* Starts a new ownerReference; following set_owner calls fill it. */
CKUBE_API void ck_obj_builder_add_owner(ck_obj_builder_t *b);
CKUBE_API void ck_obj_builder_set_owner(ck_obj_builder_t *b, const char *field, const char *v,
                                        size_t vl);
CKUBE_API void ck_obj_builder_set_owner_bool(ck_obj_builder_t *b, const char *field, bool v);
/* Appends one member of metadata.finalizers (copied; order kept). */
CKUBE_API void ck_obj_builder_add_finalizer(ck_obj_builder_t *b, const char *s, size_t len);
/* Sets kept field i; for CK_VAL_STRING/CK_VAL_JSON, s/len are copied. */
CKUBE_API void ck_obj_builder_set_field(ck_obj_builder_t *b, size_t i, ck_val_type_t type, bool bv,
                                        int64_t iv, double dv, const char *s, size_t len);
/* Returns a new object (refs = 1), free with ck_obj_unref(); resets the builder. */
CKUBE_API ck_obj_t *ck_obj_builder_finish(ck_obj_builder_t *b);

#endif
