/*
 * Private to pkg/workqueue: the string hash table shared by the queue (key -> item)
 * and the exponential limiter (key -> failures). Not part of the public API.
 *
 * Design note: open addressing with linear probing over an array of node pointers,
 * capacity a power of two, at most half full; deletion shifts the following run back
 * instead of leaving tombstones, so lookups never slow down with churn. Nodes are
 * intrusive (the caller embeds wq_hnode_t and owns the memory), so the table itself
 * never allocates except when it grows or shrinks.
 */
#ifndef CKUBE_WORKQUEUE_WQ_INTERNAL_H
#define CKUBE_WORKQUEUE_WQ_INTERNAL_H

/* Keys are hashed with the library's keyed hash (names chosen in the cluster). */
#include "pkg/base/hash.h"
#include <stddef.h>
#include <stdint.h>

typedef struct wq_hnode {
	uint64_t hash;
	const char *key; /* borrowed from the embedding struct */
	size_t len;
} wq_hnode_t;

typedef struct wq_htab {
	wq_hnode_t **slots;
	size_t mask; /* capacity - 1; 0 with no slots yet */
	size_t count;
} wq_htab_t;

/* Borrows t; returns the node with this key or NULL. */
wq_hnode_t *wq_htab_find(const wq_htab_t *t, const char *key, size_t len, uint64_t hash);

/* Borrows n (must not be in t; its hash/key/len set). */
void wq_htab_insert(wq_htab_t *t, wq_hnode_t *n);

/* Removes n (which must be in t). */
void wq_htab_remove(wq_htab_t *t, wq_hnode_t *n);

/* Frees the slot array (not the nodes). */
void wq_htab_free(wq_htab_t *t);

/*
 * The depth of a priority queue by priority, for workqueue_depth{priority="<n>"}.
 *
 * controller-runtime labels the depth with the priority but stops at 25 distinct
 * priorities (maxRecommendedUniquePriorities: a label per priority must not explode
 * the series count); past that every change goes to priority="exceeded_cardinality_limit".
 * It leaves the per-priority gauges where they stood then, so their sum no longer
 * matches the depth; here the counts move into the placeholder when the limit is
 * crossed, so the samples always add up to workqueue_depth. A fixed array: at most
 * 25 priorities, scanned linearly (the last one touched first: adds come in runs).
 * Not locked: the queue's mutex covers it.
 */
#define WQ_PRIO_LABELS_MAX 25
#define WQ_PRIO_EXCEEDED   "exceeded_cardinality_limit"

typedef struct wq_prio_depth {
	int prio[WQ_PRIO_LABELS_MAX]; /* in the order first seen */
	int64_t depth[WQ_PRIO_LABELS_MAX];
	size_t n;
	size_t last;  /* index last touched */
	int exceeded; /* more than WQ_PRIO_LABELS_MAX seen: everything is in rest */
	int64_t rest;
} wq_prio_depth_t;

/* Borrows d; adds delta to the depth of priority prio. */
void wq_prio_depth_add(wq_prio_depth_t *d, int prio, int64_t delta);

#endif
