/*
 * Internal to pkg/sharding (and its unit tests): the bucket boundaries and the
 * epoch rule as pure functions, so that the balance and the safety of a boundary
 * move are tested without a server (bounds.c).
 *
 * A boundary array of nb buckets has nb + 1 entries: bounds[0] = 0, bounds[i] the
 * start of bucket i (strictly increasing), and bounds[nb] = 0 standing for 2^64,
 * as ck_shard_range_t's end does.
 */
#ifndef CKUBE_SHARDING_SHARDING_INTERNAL_H
#define CKUBE_SHARDING_SHARDING_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Equal ranges: bucket i starts at i * 2^64 / nb. Epoch 0's boundaries. */
void sh_equal_bounds(uint64_t *bounds, uint32_t nb);

/*
 * Boundaries placing about n / nb of the hashes in each bucket. Sorts hashes (n of
 * them) in place; fills bounds (nb + 1 entries). The cut between two buckets lies
 * midway between the last hash of one and the first of the next, so that every
 * hash sits well inside its bucket; when there are fewer hashes than buckets, the
 * empty buckets split the gaps evenly. With no hash, equal ranges.
 */
void sh_balanced_bounds(uint64_t *hashes, size_t n, uint32_t nb, uint64_t *bounds);

/* The bucket of bounds (nb buckets) whose range holds h. */
uint32_t sh_bucket_of(const uint64_t *bounds, uint32_t nb, uint64_t h);

/* The most of the n hashes that one bucket of bounds holds. */
size_t sh_max_load(const uint64_t *bounds, uint32_t nb, const uint64_t *hashes, size_t n);

/*
 * Whether boundaries whose fullest bucket holds max_load of n hashes are off enough
 * to be moved: more than skew_pct percent of the ideal n / nb AND at least 2 more
 * than it (so that a handful of namespaces never moves them).
 */
bool sh_bounds_skewed(size_t max_load, size_t n, uint32_t nb, uint32_t skew_pct);

/* Whether bucket i's range differs between two boundary arrays. */
bool sh_bucket_changed(const uint64_t *a, const uint64_t *b, uint32_t i);

/*
 * The text kept in the bounds object: the nb - 1 interior boundaries as
 * "0x%016x" joined by ','; "" for one bucket. Returns a new string, free with free().
 */
char *sh_bounds_format(const uint64_t *bounds, uint32_t nb);
/*
 * Parses sh_bounds_format's text (borrowed) for nb buckets into bounds (nb + 1).
 * 0, or -1 with *err naming what is wrong and where (bounds untouched).
 */
int sh_bounds_parse(const char *text, uint32_t nb, uint64_t *bounds, char **err);
/* A decimal epoch (borrowed text). 0, or -1 with *err. */
int sh_epoch_parse(const char *text, uint64_t *epoch, char **err);

/*
 * The epoch rule: may a replica whose boundaries are those of epoch acquire a
 * bucket, given the epoch each bucket Lease carries (lease_epoch[k]; a Lease
 * never written counts as epoch 0, a Lease this replica holds as what it last
 * wrote on it)?
 */
typedef enum sh_gate {
	SH_GATE_OPEN,  /* every Lease carries epoch: acquire */
	SH_GATE_WAIT,  /* some carry an older one: retire the free ones, wait */
	SH_GATE_STALE, /* some carry a newer one: adopt its boundaries first */
} sh_gate_t;
sh_gate_t sh_acquire_gate(uint64_t epoch, const uint64_t *lease_epoch, uint32_t nb);

#endif
