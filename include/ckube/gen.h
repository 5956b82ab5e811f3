/*
 * gen: the run-time half of ckube-gen, the generator of typed kinds from a CRD
 * (docs/ckube-gen.md). ckube-gen writes, per CRD version, a ck_type_t descriptor,
 * C structs mirroring the schema, and static tables (ck_gen_schema_t) that say
 * where each property lives in those structs and what the schema requires of it.
 * The functions here do the work those tables describe, once for every kind:
 * reading an object's kept fields into a struct, writing a struct as JSON or into
 * a patch body, and checking values against the schema's validations.
 *
 * You normally call the generated wrappers (foo_spec_get, foo_validate_spec, ...),
 * not these; they are public so that generated code can live outside the library.
 *
 * C layout of a property named x (ckube-gen writes it; ck_gen_prop_t points into it):
 *   string            char *x;                      NULL when absent
 *   integer           int64_t x;  bool has_x;
 *   number            double x;   bool has_x;
 *   boolean           bool x;     bool has_x;
 *   object            T x;        bool has_x;       T a generated struct
 *   array             E *x; size_t x_len; bool has_x;
 *   map               char **x_keys; E *x; size_t x_len; bool has_x;
 *   kept JSON         char *x;                      compact JSON text, NULL when absent
 * where an array or map element E is char * (strings, kept JSON), int64_t, double,
 * bool or a generated struct. Kept JSON is the fallback for what C types cannot
 * say (x-kubernetes-int-or-string, x-kubernetes-preserve-unknown-fields without
 * properties, arrays of arrays): the text is written out as it is, so it must be
 * valid JSON (ck_gen_to_patch refuses it otherwise).
 *
 * Ownership: a struct filled by ck_gen_get / ck_gen_from_json owns every string
 * and array in it; ck_gen_clear frees them. A struct you fill yourself is yours to
 * free as you like; the encoders only borrow it. Nothing here keeps state except
 * a pattern's compiled regular expression (ck_gen_pattern_t), made once on first
 * use and safe to share, and the C.UTF-8 locale patterns are matched in, loaded
 * once: every function may be called from any thread.
 */
#ifndef CKUBE_GEN_H
#define CKUBE_GEN_H

#include <ckube/export.h>

#include <ckube/base.h>
#include <ckube/json.h>
#include <ckube/obj.h>
#include <ckube/patch.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ck_gen_kind {
	CK_GEN_STRING = 1,
	CK_GEN_INT,
	CK_GEN_NUMBER,
	CK_GEN_BOOL,
	CK_GEN_OBJECT,
	CK_GEN_ARRAY,
	CK_GEN_MAP,
	CK_GEN_JSON,
} ck_gen_kind_t;

/* ck_gen_schema_t.flags */
enum {
	CK_GEN_HAS_MIN = 1 << 0,
	CK_GEN_HAS_MAX = 1 << 1,
	CK_GEN_EXCL_MIN = 1 << 2,
	CK_GEN_EXCL_MAX = 1 << 3,
	CK_GEN_INT_OR_STRING = 1 << 4, /* kept JSON that must be an integer or a string */
	CK_GEN_HAS_MIN_LENGTH = 1 << 5,
	CK_GEN_HAS_MAX_LENGTH = 1 << 6,
	CK_GEN_HAS_MIN_ITEMS = 1 << 7, /* minItems, or minProperties of a map */
	CK_GEN_HAS_MAX_ITEMS = 1 << 8,
	/* Kept JSON whose schema states its shape (an object without properties, an
	 * array of arrays): another shape is refused and not read. */
	CK_GEN_JSON_OBJECT = 1 << 9,
	CK_GEN_JSON_ARRAY = 1 << 10,
};

/* No such member (ck_gen_prop_t offsets). */
#define CK_GEN_NONE ((size_t)-1)

/*
 * A schema's pattern. The schema's is an ECMA-262 / RE2 expression; ckube-gen
 * translated it to a POSIX extended one that accepts the same strings (and
 * refused the patterns it cannot translate), so matching needs only libc.
 */
typedef struct ck_gen_pattern {
	const char *source; /* as the schema states it, for messages */
	const char *ere;    /* the POSIX extended expression matched */
	/* A well-known pattern's description ("DNS-1123 subdomain (...)") for
	 * messages, or NULL. */
	const char *name;
	_Atomic(void *) re; /* compiled on first use; start it as NULL */
} ck_gen_pattern_t;

/*
 * Whether the string s matches p, as the API server's RE2 matches the schema's
 * pattern: one '.' or negated class is one UTF-8 character, whatever locale the
 * program set. Compiles p on first use and keeps it, or keeps that it does not
 * compile (ck_gen_pattern_release). Returns 1 on a match, 0 on none, -1 when
 * p->ere does not compile here or regexec ran out of memory. Borrows both.
 */
CKUBE_API int ck_gen_pattern_match(ck_gen_pattern_t *p, const char *s);
/* Frees p's compiled expression, for a pattern that is not static; p may be used
 * again afterwards. Not while another thread matches with p. */
CKUBE_API void ck_gen_pattern_release(ck_gen_pattern_t *p);

typedef struct ck_gen_schema ck_gen_schema_t;

typedef struct ck_gen_prop {
	const char *name; /* the JSON member */
	const ck_gen_schema_t *schema;
	size_t offset;      /* of the value in the parent struct */
	size_t has_offset;  /* of bool has_x, or CK_GEN_NONE (strings, kept JSON) */
	size_t len_offset;  /* arrays and maps: of size_t x_len */
	size_t keys_offset; /* maps: of char **x_keys */
	int field;          /* index into the kind's kept fields, or -1 */
	bool required;
} ck_gen_prop_t;

struct ck_gen_schema {
	ck_gen_kind_t kind;
	unsigned flags;
	size_t size; /* sizeof the C value (the element size in an array or map) */
	/* CK_GEN_OBJECT */
	const ck_gen_prop_t *props;
	size_t nprops;
	/* CK_GEN_ARRAY, CK_GEN_MAP: the element */
	const ck_gen_schema_t *items;
	/* Validations, each one set only with its flag. */
	int64_t imin, imax; /* CK_GEN_INT */
	double dmin, dmax;  /* CK_GEN_NUMBER */
	int64_t min_length, max_length;
	int64_t min_items, max_items; /* arrays, and maps (properties) */
	const char *const *enum_json; /* allowed values as compact JSON text */
	size_t nenum;
	ck_gen_pattern_t *pattern; /* or NULL */
};

/*
 * Reads the kept fields of obj that the object schema s describes into *out (a
 * struct of s's layout, zeroed first). Properties kept as their own field are
 * read from it; an object property without a field is read from its own
 * properties', and is present when any of them is. A value of another type than
 * the schema's is left absent (ck_gen_validate_obj reports it). Borrows s and obj.
 * Returns 0, or -1 with a new message in *err when a kept JSON value cannot be
 * parsed (the struct then holds what was read; clear it either way).
 */
CKUBE_API int ck_gen_get(const ck_gen_schema_t *s, const ck_obj_t *obj, void *out, char **err);
/*
 * Reads the JSON value v into *out (a value of s's C type, zeroed first; for a
 * string or kept JSON, a char *). Returns true when v had the schema's type.
 * Borrows s and v.
 */
CKUBE_API bool ck_gen_from_json(const ck_gen_schema_t *s, const ck_json_t *v, void *out);
/* Frees what the struct *v of object schema s owns and zeroes it. NULL is a no-op. */
CKUBE_API void ck_gen_clear(const ck_gen_schema_t *s, void *v);
/*
 * Appends the value *v of schema s as compact JSON: an object's present
 * properties in schema order, absent ones left out. Borrows s and v.
 */
CKUBE_API void ck_gen_to_json(const ck_gen_schema_t *s, const void *v, ck_sbuf_t *out);
/*
 * Sets path in the patch body p to the value *v of schema s (ck_gen_to_json's
 * text). Returns 0, or -1 with p's sticky error (ck_patch_error) when the text
 * is not valid JSON (a kept-JSON member you set by hand).
 */
CKUBE_API int ck_gen_to_patch(const ck_gen_schema_t *s, const void *v, ck_patch_t *p,
                              const char *const *path);

/*
 * Sets each present property of the object struct *v (schema s) at the top of the
 * patch body p, as ck_gen_to_patch does for one: the spec and status of a whole
 * generated kind. Returns 0, or -1 as ck_gen_to_patch.
 */
CKUBE_API int ck_gen_to_patch_props(const ck_gen_schema_t *s, const void *v, ck_patch_t *p);

/*
 * Validation, as the API server applies the schema: type, enum, minimum /
 * maximum (exclusive or not), minLength / maxLength (in characters), pattern,
 * minItems / maxItems, minProperties / maxProperties, required. The first
 * violation found is reported as a new message in *err naming its path, e.g.
 *   spec.replicas: 11 is not in 1..10
 *   spec.deploymentName: "Web" is not a valid DNS-1123 subdomain (...)
 *   status.conditions[0].status: "Maybe" is not one of "True", "False", "Unknown"
 * and -1 is returned; 0 when the value is valid. A JSON null is treated as absent,
 * as the API server prunes it. What ckube-gen did not map (CEL rules, oneOf,
 * anyOf, allOf, not) is left to the server (docs/ckube-gen.md).
 */
/* The kept fields of obj under the object schema s, at path ("spec"; "" for the
 * whole kind); required: whether the object must be present. Borrows all. */
CKUBE_API int ck_gen_validate_obj(const ck_gen_schema_t *s, const char *path, bool required,
                                  const ck_obj_t *obj, char **err);
/* The JSON value v (NULL = absent) at path. Borrows all. */
CKUBE_API int ck_gen_validate_json(const ck_gen_schema_t *s, const char *path, const ck_json_t *v,
                                   char **err);
/* The value *v of schema s (a struct you are about to write), at path. Borrows all. */
CKUBE_API int ck_gen_validate(const ck_gen_schema_t *s, const char *path, const void *v,
                              char **err);

#endif
