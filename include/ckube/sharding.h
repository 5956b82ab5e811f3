/*
 * sharding: N replicas of one controller split a fixed set of hash buckets among
 * themselves, coordinated only through coordination.k8s.io/v1 Leases (no extra
 * component, no webhook). The manager wires it to the informers' shard selectors
 * (<ckube/shard.h>) and to its workers.
 *
 * Design (fixed buckets, one Lease per bucket, fair share over the live members):
 *
 *   - The 64-bit hash space of the shard field (namespace or uid) is cut into B
 *     buckets (an option, 32 by default); bucket i covers one range
 *     ck_sharding_bucket_range(), placed where the hashes fall (Balance, below).
 *   - Every replica holds a member Lease "<group>-member-<identity>" and renews it
 *     like leader election does. Live members = member Leases with a holder that
 *     this replica saw change within their leaseDurationSeconds (local time only,
 *     as leader election: the timestamps in the Leases are never compared with the
 *     local clock). This replica always counts itself.
 *   - Bucket i is the Lease "<group>-bucket-<i>", acquired, renewed and released
 *     exactly as a leader-election Lease (the same code: optimistic concurrency on
 *     resourceVersion, so of two candidates only one wins).
 *   - fair share = ceil(B / live members). Every retry period a replica renews what
 *     it holds, gives up buckets beyond its fair share, and takes free or expired
 *     buckets up to its fair share. Ties break deterministically: the live
 *     identities are sorted, a replica of rank r prefers its "home" buckets
 *     (i % N == r) when taking and gives up foreign buckets (then the highest)
 *     first, so replicas converge to one bucket set each without talking.
 *     Since N x ceil(B/N) >= B, every bucket has a taker.
 *
 * Handover. A replica giving a bucket up (rebalance, or ck_sharding_stop) first
 * stops owning it (ck_sharding_owns_*() turn false at once, so workers skip its
 * keys), then calls on_release, which returns only once the in-flight reconciles
 * of the bucket have finished and its cache is dropped, and only THEN releases the
 * Lease (holderIdentity "", leaseDurationSeconds 1, as leader election's release).
 * A new owner calls on_acquire only after its write of the Lease succeeded. On
 * stop, no bucket is owned any more at once; each is then drained and released
 * (not left to expire), the Leases still to drain kept renewed meanwhile; then the
 * member Lease. A rebalance likewise renews the rest between two drains.
 *
 * Balance. N replicas owning about B/N buckets each own about 1/N of the objects
 * only if the buckets hold about as many objects each, and equal ranges do not:
 * FNV-1a puts names that differ only at the end next to each other ("app-1" ..
 * "app-30" fall into 1 of 4 equal ranges). So the boundaries are kept in a shared
 * object, the Lease "<group>-bounds" (annotations sharding.ckube.io/epoch: a
 * number, and sharding.ckube.io/bounds: the B-1 interior cuts, "0x%016x" joined
 * by ','). Its writer is the live member of rank 0, namespace field only: every
 * rebalance_every rounds it lists the namespaces, and when the fullest bucket
 * holds more than rebalance_skew_pct of the ideal share and 2 namespaces more,
 * writes the next epoch with cuts at the quantiles of their hashes (midway
 * between two neighbours, so that each namespace sits well inside its bucket;
 * the first n % B buckets one namespace fuller, so home buckets share them
 * round-robin), over the version it read (of two writers one wins). A quiet
 * cluster never moves them. Namespaces are the proxy for objects: a replica
 * cannot see the others' objects, and a namespace's objects all go to one bucket
 * anyway. For the uid field hashes are uniform: no writer, equal ranges (epoch
 * 0), the same code. Without the object, epoch 0's equal ranges.
 *
 * A move keeps safety and economy. Every write of a bucket Lease stamps it with
 * the writer's epoch (annotation sharding.ckube.io/epoch), and no replica writes
 * over a Lease stamped with a newer epoch than its own. A replica reads the
 * object in the LIST of every round; adopting epoch F, it keeps owning the
 * buckets whose range did not change (their next renewal stamps F: no drain, no
 * callback), stops owning those whose range changed, drains (on_release) and
 * releases each stamped F, and only then publishes F's boundaries (workers never
 * see a moved range as owned; a lookup racing the switch asks again). A replica
 * acquires any bucket only when every bucket Lease carries exactly its epoch: a
 * newer one means it must adopt first; an older one is a holder that has not
 * adopted yet (it will re-stamp or release within a round) or a free or expired
 * Lease, which it stamps F first (acquired and released, never owned). So when a
 * bucket is taken under F no range of an older epoch is still worked on: each
 * holder had stamped F, i.e. dropped its moved ranges, and no older replica can
 * take a Lease back (it would have to write over F). This needs no knowledge of
 * older epochs' ranges, so skipped epochs are safe, at the cost of at most one
 * round before moved buckets are taken. on_acquire gets the new range.
 *
 * Membership decides balance only, never safety: a newcomer cannot tell a crashed
 * replica's member Lease from a live one before it saw it unchanged for a lease
 * duration, so joining within a lease duration of a crash balances one lease
 * duration later.
 *
 * Safety: a key is never reconciled by two replicas at once, under leader
 * election's assumptions:
 *   (1) lease duration > renew deadline; on_release of a bucket handed over
 *       returns within the renew deadline (the Lease, still held while it
 *       drains, was renewed just before); on_release of a bucket LOST (not renewed
 *       within the renew deadline) returns within lease duration - renew
 *       deadline, the margin before another replica may take it;
 *   (2) clocks run at the same rate (skew of absolute time does not matter, only
 *       drift over one lease duration, which must stay below that margin);
 *   (3) a replica stops using a bucket it could not renew within the renew
 *       deadline, counted from the moment its last successful write was SENT.
 * Another replica takes a bucket only after it saw the Lease free (released: the
 * owner drained first) or unchanged for a whole lease duration of its own clock;
 * by then the owner, if alive, has stopped at its renew deadline, which is earlier
 * by (1)-(3). ck_sharding_owns_*() also answer false past the renew deadline even
 * when the coordinator thread is stuck, so a worker never relies on a stale "yes".
 *
 * Liveness: a crashed replica's buckets are taken within lease duration + one
 * round (a retry period, jittered by up to 24%, plus the round's requests); a
 * stopped replica's at the others' next round.
 *
 * Threads: ck_sharding_start() runs the coordinator on its own thread, with
 * blocking client calls bounded by the renew deadline. Callbacks run on that
 * thread, one at a time, and must not call ck_sharding_stop(). While one runs no
 * Lease is renewed: on_acquire must return quickly, and on_release within the
 * margin of (1). The ck_sharding_owns_*() queries are lock-free (atomics) and may
 * be called from any thread.
 */
#ifndef CKUBE_SHARDING_H
#define CKUBE_SHARDING_H

#include <ckube/export.h>

#include <ckube/base.h>
#include <ckube/leaderelection.h>
#include <ckube/obj.h>
#include <ckube/shard.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ck_client;

#define CK_SHARDING_DEFAULT_BUCKETS            32u
#define CK_SHARDING_MAX_BUCKETS                1024u
#define CK_SHARDING_DEFAULT_REBALANCE_EVERY    10u
#define CK_SHARDING_DEFAULT_REBALANCE_SKEW_PCT 150u

typedef struct ck_sharding_config {
	const char *lease_namespace; /* required: where the Leases live */
	/* required: the controller's name; Lease names are "<group>-member-<identity>"
	 * and "<group>-bucket-<i>", so it must leave them valid object names. */
	const char *group;
	/* required; unique per replica (ck_le_default_identity()). In the member
	 * Lease's name it is lowercased and every character but [a-z0-9.-] becomes
	 * '-'; the Lease's holderIdentity keeps it as given. */
	const char *identity;
	uint32_t buckets;           /* 0 = CK_SHARDING_DEFAULT_BUCKETS */
	ck_shard_field_t field;     /* what the buckets hash: namespace (default) or uid */
	uint32_t lease_duration_ms; /* 0 = leader election's defaults, same rules */
	uint32_t renew_deadline_ms;
	uint32_t retry_period_ms;
	/* Hand every bucket over on ck_sharding_stop() (Leases released). false leaves
	 * them to expire, as a crash would (tests). */
	bool release_on_stop;
	/* Namespace field: the writer (live rank 0) checks the boundaries against the
	 * namespaces every this many of its rounds (0 = 10, the first on its first
	 * round), and moves them when the fullest bucket holds more than
	 * rebalance_skew_pct percent of the ideal share AND 2 namespaces more than it
	 * (0 = 150; below 100 is refused). */
	uint32_t rebalance_every;
	uint32_t rebalance_skew_pct;
	const ck_clk_t *clock; /* decisions and Lease times; NULL = real. Waits are real. */

	/* Optional; run on the coordinator's thread with ud. */
	/* This replica now holds bucket (covering range): start watching it. Quick. */
	void (*on_acquire)(void *ud, uint32_t bucket, ck_shard_range_t range);
	/* This replica gives bucket up (rebalance, stop, or lost: not renewed within
	 * the renew deadline, or taken over). Owning it already answers false. Return
	 * only when no reconcile of its keys runs any more and its cache is dropped. */
	void (*on_release)(void *ud, uint32_t bucket);
	/* A log line; msg borrowed. NULL = silent. */
	void (*on_log)(void *ud, ck_le_log_level_t level, const char *msg);
	void *ud;
} ck_sharding_config_t;

typedef struct ck_sharding ck_sharding_t;

/* Borrows cfg. 0, or -1 with a new *err naming what is wrong (as ck_le_validate,
 * plus the bucket count and the Lease names). */
CKUBE_API int ck_sharding_validate(const ck_sharding_config_t *cfg, char **err);

/*
 * Borrows c (must outlive the coordinator) and cfg (strings copied). Returns a new
 * coordinator, running on its own thread, stop and free it with ck_sharding_stop();
 * or NULL with *err (and no callback is ever called).
 */
CKUBE_API ck_sharding_t *ck_sharding_start(struct ck_client *c, const ck_sharding_config_t *cfg,
                                           char **err);

/*
 * Takes s. Stops the coordinator: every owned bucket stops being owned, gets
 * on_release, and (release_on_stop) its Lease released; then the member Lease.
 * Joins the thread and frees s. NULL is a no-op. Never from a callback.
 */
CKUBE_API void ck_sharding_stop(ck_sharding_t *s);

/* The number of buckets (B). */
CKUBE_API uint32_t ck_sharding_buckets(const ck_sharding_t *s);
/* The range of bucket i (< B) in the current epoch's boundaries. Any thread. */
CKUBE_API ck_shard_range_t ck_sharding_bucket_range(const ck_sharding_t *s, uint32_t i);
/* The bucket whose range holds hash h, in the current epoch. Any thread. */
CKUBE_API uint32_t ck_sharding_bucket_of(const ck_sharding_t *s, uint64_t h);
/* The epoch of the boundaries this replica uses (0: equal ranges, no bounds
 * object adopted yet). Any thread. */
CKUBE_API uint64_t ck_sharding_epoch(const ck_sharding_t *s);
/* Copies the current boundaries into out (B + 1 entries, borrowed): out[i] the
 * start of bucket i, out[B] = 0 standing for 2^64. Returns their epoch (the two
 * always of one epoch). Any thread. */
CKUBE_API uint64_t ck_sharding_bounds(const ck_sharding_t *s, uint64_t *out);

/* Whether this replica owns bucket i right now (held, renewed within the renew
 * deadline, not being handed over). Any thread, lock-free. */
CKUBE_API bool ck_sharding_owns_bucket(const ck_sharding_t *s, uint32_t i);
/* Whether it owns the bucket of hash h. Any thread. */
CKUBE_API bool ck_sharding_owns_hash(const ck_sharding_t *s, uint64_t h);
/* Whether it owns obj (borrowed): its namespace or uid, the configured field. */
CKUBE_API bool ck_sharding_owns_obj(const ck_sharding_t *s, const ck_obj_t *obj);
/* Whether it owns the workqueue key "ns/name" (or "name": namespace ""), borrowed.
 * Namespace field only: a key carries no uid, so with CK_SHARD_UID this is false;
 * use ck_sharding_owns_obj. */
CKUBE_API bool ck_sharding_owns_key(const ck_sharding_t *s, const char *key);
/* How many buckets it owns right now. Any thread. */
CKUBE_API uint32_t ck_sharding_owned_count(const ck_sharding_t *s);
/* The live members seen at the last round (this replica included); any thread. */
CKUBE_API uint32_t ck_sharding_members(const ck_sharding_t *s);

/*
 * Returns a new selector over the owned buckets' ranges (adjacent ones merged),
 * free with ck_shard_selector_free(); NULL when none is owned. Any thread.
 */
CKUBE_API ck_shard_selector_t *ck_sharding_selector(const ck_sharding_t *s);

#endif
