/*
 * json: reading inside JSON text, above all the kept values of an object
 * (CK_VAL_JSON: a ConfigMap's data, a Pod's spec.containers, ...), which the
 * decoder stores as text because their shape is the user's business.
 *
 * ck_json_parse() turns text into an immutable tree owned by one ck_json_doc_t;
 * every node, key and string is borrowed from the document and lives until
 * ck_json_doc_free(). A document is never modified after parsing, so any number
 * of threads may read one concurrently without locks; free it once, when no
 * reader remains.
 *
 * Paths. A path is a NULL-terminated array of segments, most easily written with
 * CK_PATH("metadata", "annotations", "example.com/x"): segments are taken
 * literally, so keys holding dots and slashes need no quoting. On an object a
 * segment names a member; on an array a segment of decimal digits without a
 * leading zero ("0", "12") is an index. A missing member, an index out of
 * range or a segment through a scalar all yield NULL ("absent"). When an object
 * has the same key twice, the last one wins, as in the API server (Go).
 *
 * Every accessor accepts NULL for a node and treats it as absent, so lookups
 * chain without checks: ck_json_get_string(ck_json_get(root, CK_PATH("a", "b")), &s, NULL).
 *
 * The form of kept text (CK_VAL_JSON, see pkg/codec/decode.c, the capture writer):
 * it is the server's JSON re-emitted token by token, so
 *   - it is compact: no blank between tokens;
 *   - members and elements are in the order the server sent them (the API
 *     server, Go, writes struct fields in declaration order and map keys
 *     sorted), duplicate keys are kept as sent;
 *   - numbers are the server's text verbatim (1e3 stays 1e3, 1.0 stays 1.0);
 *   - strings and keys are unescaped then re-escaped one way: `"` and `\` as
 *     \" and \\, newline, CR and tab as \n \r \t, the other bytes below 0x20
 *     (NUL included) as \u00XX with lower-case hex, every other byte as is
 *     (UTF-8, which the decoder validated, '/', DEL): "\u00e9" and "é" in the
 *     input give the same kept text.
 * Two kept values are therefore byte-equal exactly when the server sent the same
 * tokens in the same order, whatever its blanks and string escapes; the text
 * may be compared or hashed as it is. ck_json_write() emits any node in the
 * same form, so text from elsewhere can be brought to it.
 *
 * Malformed input, or input nested deeper than CK_JSON_MAX_DEPTH, never crashes:
 * the parse fails with a message naming the byte offset.
 */
#ifndef CKUBE_JSON_H
#define CKUBE_JSON_H

#include <ckube/export.h>

#include <ckube/base.h>
#include <ckube/decode.h>
#include <ckube/obj.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Deepest nesting accepted, outermost container = 1: the decoder's own bound, so
 * whatever it kept can be read. */
#define CK_JSON_MAX_DEPTH CK_DEC_MAX_DEPTH

/*
 * A path literal: CK_PATH("spec", "containers", "0", "image") is a NULL-terminated
 * `const char *const[]` with automatic storage in the enclosing block (a C99
 * compound literal). Paths built at run time are plain arrays ending in NULL.
 */
#define CK_PATH(...) ((const char *const[]){__VA_ARGS__, NULL})
/* The empty path: the node itself (json), the top-level object (patch). */
#define CK_PATH_TOP ((const char *const[]){NULL})

typedef enum ck_json_type {
	CK_JSON_ABSENT = 0, /* no such node (what a NULL node reports) */
	CK_JSON_NULL,
	CK_JSON_BOOL,
	CK_JSON_NUMBER,
	CK_JSON_STRING,
	CK_JSON_ARRAY,
	CK_JSON_OBJECT,
} ck_json_type_t;

/* Results of the typed getters. */
typedef enum ck_json_rc {
	CK_JSON_OK = 0,
	CK_JSON_EABSENT = -1, /* the node is NULL (path not found) */
	CK_JSON_ETYPE = -2,   /* the node has another type, or is not an integer */
	CK_JSON_ERANGE = -3,  /* a number that does not fit the asked C type */
} ck_json_rc_t;

typedef struct ck_json_doc ck_json_doc_t;
/* A node of a document; always borrowed from its document. */
typedef struct ck_json ck_json_t;

/*
 * Parses len bytes of text (need not be NUL-terminated; a raw NUL byte is an
 * error, the escape \u0000 inside a string is not). Any JSON value may be at the
 * top; blanks around it are allowed, anything else after it is not. Strings
 * must be valid UTF-8. Borrows text (copied). Returns a new document, free with
 * ck_json_doc_free(); or NULL with *err ("malformed JSON after byte N: <what>
 * (near \"<bytes>\")", the input being valid up to byte N, as ck_dec_feed
 * reports it; or "JSON nested deeper than 256 levels at byte N", N being the
 * offset of the offending bracket). Thread-safe (no shared state).
 */
CKUBE_API ck_json_doc_t *ck_json_parse(const char *text, size_t len, char **err);
/*
 * Borrows v; returns a new document holding v's value: a CK_VAL_JSON is parsed,
 * a scalar (null, bool, int, double, string) becomes a one-node document.
 * CK_VAL_ABSENT (or v NULL) returns NULL with *err "value is absent".
 */
CKUBE_API ck_json_doc_t *ck_json_parse_val(const ck_val_t *v, char **err);
/*
 * Kept field i of obj (ck_obj_field), as ck_json_parse_val. Borrows obj; the
 * document does not reference it. NULL with *err when the field is absent
 * ("<kind> <ns>/<name>: field <path> is absent") or i is out of range.
 */
CKUBE_API ck_json_doc_t *ck_json_parse_field(const ck_obj_t *obj, size_t i, char **err);
/* Same, naming the field by its dotted path in obj->type->fields ("data"). */
CKUBE_API ck_json_doc_t *ck_json_parse_field_path(const ck_obj_t *obj, const char *path,
                                                  char **err);
/* Frees d and every node of it. NULL is a no-op. */
CKUBE_API void ck_json_doc_free(ck_json_doc_t *d);

/* The top-level value (borrowed from d); NULL if d is NULL. */
CKUBE_API const ck_json_t *ck_json_root(const ck_json_doc_t *d);

/* The node's type; CK_JSON_ABSENT for NULL. */
CKUBE_API ck_json_type_t ck_json_type(const ck_json_t *v);
/* "absent", "null", "bool", "number", "string", "array", "object" (static). */
CKUBE_API const char *ck_json_type_name(ck_json_type_t t);

/*
 * Follows path (borrowed, NULL-terminated, see the top of this file) from v.
 * Returns the node reached (borrowed from v's document), v itself for an empty
 * path, or NULL if some segment was not found.
 */
CKUBE_API const ck_json_t *ck_json_get(const ck_json_t *v, const char *const *path);
/* Same with an explicit count: segs[0..n) (need not be NULL-terminated). */
CKUBE_API const ck_json_t *ck_json_getn(const ck_json_t *v, const char *const *segs, size_t n);
/* One step: the member named key (keylen bytes, may hold NULs) of an object, else NULL. */
CKUBE_API const ck_json_t *ck_json_member(const ck_json_t *obj, const char *key, size_t keylen);

/*
 * Iteration, in document order:
 *   for (size_t i = 0; i < ck_json_len(v); i++)
 *           use(ck_json_key(v, i, NULL), ck_json_at(v, i));
 * ck_json_len: members of an object, elements of an array, 0 for anything else.
 * ck_json_at: the i-th member's value or element (borrowed), NULL out of range.
 * ck_json_key: the i-th member's key (borrowed, NUL-terminated; *len, if not
 * NULL, gets its length, since a key may hold \u0000), NULL if v is not an
 * object or i is out of range. Duplicate keys are all visited.
 */
CKUBE_API size_t ck_json_len(const ck_json_t *v);
CKUBE_API const ck_json_t *ck_json_at(const ck_json_t *v, size_t i);
CKUBE_API const char *ck_json_key(const ck_json_t *v, size_t i, size_t *len);

/*
 * Typed getters: return CK_JSON_OK and fill *out, or a ck_json_rc_t error and
 * leave *out untouched. The node is never converted: a string "3" is not an
 * integer, a number is not a bool.
 */
/* *s gets the unescaped UTF-8 string (borrowed, NUL-terminated); *len (may be
 * NULL) its length, which counts any NUL inside. */
CKUBE_API int ck_json_get_string(const ck_json_t *v, const char **s, size_t *len);
/* Integers only: a number with a fraction or exponent (1.0, 1e3) is CK_JSON_ETYPE,
 * as in Go's encoding/json; one outside int64 is CK_JSON_ERANGE. */
CKUBE_API int ck_json_get_int64(const ck_json_t *v, int64_t *out);
/* Any number; CK_JSON_ERANGE when its magnitude overflows a double (1e999). */
CKUBE_API int ck_json_get_double(const ck_json_t *v, double *out);
CKUBE_API int ck_json_get_bool(const ck_json_t *v, bool *out);
/* The number's text as it was in the input (borrowed), e.g. for big integers. */
CKUBE_API int ck_json_get_number_text(const ck_json_t *v, const char **text);
/* true only for a JSON null (false for NULL, i.e. absent). */
CKUBE_API bool ck_json_is_null(const ck_json_t *v);
/* Shorthand: the string (borrowed) or NULL when v is absent or not a string. */
CKUBE_API const char *ck_json_str(const ck_json_t *v);
/* Shorthand: the integer (as ck_json_get_int64), or dflt when v is absent, not
 * an integer or out of range: ck_json_int(ck_json_get(d, CK_PATH("spec",
 * "replicas")), 1). */
CKUBE_API int64_t ck_json_int(const ck_json_t *v, int64_t dflt);

/*
 * Appends v as compact JSON to out, in the form of kept text (see above).
 * Borrows both. An absent node (NULL) appends nothing and returns -1, else 0.
 */
CKUBE_API int ck_json_write(const ck_json_t *v, ck_sbuf_t *out);
/* Same, as a new string (free with free()); NULL for an absent node. */
CKUBE_API char *ck_json_to_text(const ck_json_t *v);

/*
 * Deep equality: objects as sets of members (order does not matter; a repeated
 * key counts once, its last value), arrays element by element, strings byte for
 * byte, numbers by value (1, 1.0 and 1e0 are equal, as to the API server). Two
 * absent (NULL) nodes are equal. Borrows both.
 */
CKUBE_API bool ck_json_equal(const ck_json_t *a, const ck_json_t *b);
/*
 * JSON merge patch (RFC 7386): appends to out the value target becomes when patch
 * is merged into it: a member of an object patch set to null removes the member,
 * any other member is merged recursively, and anything that is not an object
 * (arrays included) replaces what was there whole. target NULL is absent. Output
 * in the form of kept text; members keep target's order, new ones follow in the
 * patch's order. Borrows all three. Returns 0, or -1 (nothing appended) when patch
 * or out is NULL.
 */
CKUBE_API int ck_json_merge_patch(const ck_json_t *target, const ck_json_t *patch, ck_sbuf_t *out);
/*
 * Containment: true when whole already holds everything part says, where the
 * members whole has and part does not name are someone else's (the server's
 * defaults above all): an object contains part's object when it has each of its
 * members (a null member: the key is absent) with a value that contains part's;
 * an array contains part's array when it has the same length and each element
 * contains part's element at the same index; any other value contains an equal
 * one (as ck_json_equal). So {"a":[{"b":1,"c":2}],"d":3} contains {"a":[{"b":1}]}
 * but not {"a":[{"b":1},{"b":2}]} nor {"a":[{"b":2}]}. Unlike "merging part
 * into whole changes nothing", a list element with more members than part's (a
 * container the server filled with imagePullPolicy, resources, ...) is
 * contained: what create-or-update needs to say "unchanged". Borrows both; part
 * NULL (absent) is contained only in an absent whole.
 */
CKUBE_API bool ck_json_contains(const ck_json_t *whole, const ck_json_t *part);

#endif
