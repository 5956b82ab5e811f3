/*
 * shard: the API server's shard selectors (KEP-5866, sharded list and watch).
 *
 * A list or watch with shardSelector=<selector> returns only the objects whose
 * 64-bit FNV-1a hash of one metadata field falls in one of the selector's ranges.
 * The wire form, as kube-apiserver v1.37 parses it (k8s.io/apiserver/pkg/sharding):
 *
 *   shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')
 *   shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') ||
 *       shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')
 *
 * - the field is object.metadata.namespace or object.metadata.uid, the same in
 *   every range of one selector;
 * - the hash is FNV-1a 64 over the field's bytes exactly (no terminator, no
 *   prefix); a cluster-scoped object's namespace is "" (hash 0xcbf29ce484222325);
 * - a range is [start, end): start inclusive, end exclusive; start < end;
 * - bounds are quoted, "0x" and exactly 16 lowercase hex digits, except the end of
 *   the hash space, 0x10000000000000000 (2^64);
 * - ranges are OR-ed with ||; nothing else (no &&, no other function) is allowed.
 *
 * The server answers a malformed selector with 400 Bad Request; this parser
 * refuses the same inputs, so a selector it accepts is one the server accepts.
 *
 * In ck_shard_range_t, end == 0 stands for 2^64 (a uint64_t cannot hold it, and
 * end 0 is never a valid exclusive bound otherwise, since start < end).
 *
 * Selectors are immutable once built: any thread may match with one.
 */
#ifndef CKUBE_SHARD_H
#define CKUBE_SHARD_H

#include <ckube/export.h>
#include <ckube/obj.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The field whose hash a selector ranges over. */
typedef enum ck_shard_field {
	CK_SHARD_NAMESPACE = 0, /* object.metadata.namespace */
	CK_SHARD_UID = 1,       /* object.metadata.uid */
} ck_shard_field_t;

/* [start, end); end == 0 means 2^64, the end of the hash space. */
typedef struct ck_shard_range {
	uint64_t start;
	uint64_t end;
} ck_shard_range_t;

/* True when hash h falls in r. */
static inline bool ck_shard_range_contains(ck_shard_range_t r, uint64_t h)
{
	return h >= r.start && (r.end == 0 || h < r.end);
}

typedef struct ck_shard_selector ck_shard_selector_t;

/* The FNV-1a 64 hash of len bytes of p (borrowed): the API server's shard hash. */
CKUBE_API uint64_t ck_shard_hash(const void *p, size_t len);

/*
 * Borrows s; returns a new selector, free with ck_shard_selector_free, or NULL with
 * *err naming what is wrong and where ("shard selector: range 2 (column 61): end
 * '0x8' must be 0x and 16 lowercase hex digits, e.g. '0x0000000000000008'").
 */
CKUBE_API ck_shard_selector_t *ck_shard_selector_parse(const char *s, char **err);
/*
 * Borrows r (n ranges, n >= 1); returns a new selector over field, or NULL with
 * *err (no range, or a range whose start is not below its end).
 */
CKUBE_API ck_shard_selector_t *
ck_shard_selector_new(ck_shard_field_t field, const ck_shard_range_t *r, size_t n, char **err);
/* Borrows s; returns a new selector equal to it (NULL for NULL), free with _free. */
CKUBE_API ck_shard_selector_t *ck_shard_selector_dup(const ck_shard_selector_t *s);
/* NULL is a no-op. */
CKUBE_API void ck_shard_selector_free(ck_shard_selector_t *s);

/* The wire form (borrowed, lives as long as s): the shardSelector parameter. */
CKUBE_API const char *ck_shard_selector_string(const ck_shard_selector_t *s);
CKUBE_API ck_shard_field_t ck_shard_selector_field(const ck_shard_selector_t *s);
/* The ranges (borrowed, *n of them, in the order given). */
CKUBE_API const ck_shard_range_t *ck_shard_selector_ranges(const ck_shard_selector_t *s, size_t *n);

/* The hash the API server shards obj by on field: FNV-1a 64 of its namespace ("" when
 * cluster-scoped) or uid. Borrows obj. */
CKUBE_API uint64_t ck_shard_obj_hash(ck_shard_field_t field, const ck_obj_t *obj);

/* True when hash h falls in one of s's ranges. */
CKUBE_API bool ck_shard_selector_match_hash(const ck_shard_selector_t *s, uint64_t h);
/* True when obj's namespace or uid (s's field) hashes into one of s's ranges: the
 * same answer the API server gives. Borrows both. */
CKUBE_API bool ck_shard_selector_match(const ck_shard_selector_t *s, const ck_obj_t *obj);

#endif
