/*
 * Internal to pkg/leaderelection (and its unit tests): the lease record, the lock
 * vtable that stores it, and the elector's decision core.
 *
 * Design note. The decision logic (le_core_try_acquire_or_renew, le_core_release)
 * only talks to a lock through le_lock_ops_t and to time through a ck_clk_t, so unit
 * tests drive it with an in-memory lock and a fake clock and no network. The thread
 * loop in leaderelection.c adds the timing (jittered retries, renew deadline) on top;
 * lease_lock.c is the one real lock, a Lease written through kclient.
 */
#ifndef CKUBE_LEADERELECTION_LE_INTERNAL_H
#define CKUBE_LEADERELECTION_LE_INTERNAL_H

#include <ckube/base.h>
#include <ckube/leaderelection.h>
#include <ckube/obj.h>

#include <stdbool.h>
#include <stdint.h>

/* LeaseSpec as the election sees it. Strings are owned and never NULL. */
typedef struct le_record {
	char *holder; /* "" = nobody holds the lease */
	int64_t lease_duration_s;
	char *acquire_time; /* MicroTime text as stored, "" when absent */
	char *renew_time;   /* idem */
	int64_t transitions;
} le_record_t;

/* Sets every string to a new "" and numbers to 0. */
void le_record_init(le_record_t *r);
/* Frees the strings and re-inits r (to "" strings). */
void le_record_clear(le_record_t *r);
/* Frees the strings; r is zeroed and must be re-inited before use. */
void le_record_free(le_record_t *r);
/* Borrows src; replaces dst's content with a deep copy. */
void le_record_copy(le_record_t *dst, const le_record_t *src);
bool le_record_equal(const le_record_t *a, const le_record_t *b);

typedef enum le_lock_rc {
	LE_LOCK_OK = 0,
	LE_LOCK_NOT_FOUND, /* get: no such lease */
	LE_LOCK_CONFLICT,  /* create: exists; update: resourceVersion stale */
	LE_LOCK_ERROR,     /* anything else (transport, timeout, 403, ...) with *err */
} le_lock_rc_t;

typedef struct le_lock le_lock_t;

/*
 * A lock stores one record with optimistic concurrency: update writes over the
 * version last seen by this handle's get/create/update, and fails with
 * LE_LOCK_CONFLICT if the stored one moved on since (or before any get/create).
 * timeout_ms bounds the call (> 0). Every op sets *err (new string) on failure.
 */
typedef struct le_lock_ops {
	/* Fills *out (cleared first) on LE_LOCK_OK. */
	int (*get)(le_lock_t *l, uint32_t timeout_ms, le_record_t *out, char **err);
	/* Borrows rec. */
	int (*create)(le_lock_t *l, uint32_t timeout_ms, const le_record_t *rec, char **err);
	/* Borrows rec. */
	int (*update)(le_lock_t *l, uint32_t timeout_ms, const le_record_t *rec, char **err);
	/* Takes l. */
	void (*free)(le_lock_t *l);
} le_lock_ops_t;

struct le_lock {
	const le_lock_ops_t *ops;
	char *desc; /* "namespace/name", for messages; owned */
};

/*
 * Borrows c (must outlive the lock), ns and name (copied). Returns a new lock on the
 * coordination.k8s.io/v1 Lease ns/name, free with lock->ops->free().
 */
le_lock_t *le_lock_lease_new(struct ck_client *c, const char *ns, const char *name);
/*
 * The hook of le_lock_lease_annotate: from the annotation's value on the Lease as
 * the lock last read or wrote it (stored, borrowed; NULL when absent, and on
 * create), 0 with *value (a new string) to write, or -1 with *err to refuse the
 * write. Runs on the caller's thread, inside create and update.
 */
typedef int (*le_annotate_fn)(void *ud, const char *stored, char **value, char **err);
/*
 * Lease locks only (le_lock_lease_new). Every later create and update of l (an
 * acquire, renewal or release) also sets metadata.annotations[key] to what fn
 * gives; a refusal fails the write with LE_LOCK_CONFLICT and fn's *err, as a
 * write over a version that moved on would. Borrows key (copied) and ud. Lets a
 * caller keep its own state in the Lease beside the election record, and refuse
 * to write over a newer one (pkg/sharding's epochs).
 */
void le_lock_lease_annotate(le_lock_t *l, const char *key, le_annotate_fn fn, void *ud);

/* Borrows obj (a decoded ck_type_lease); replaces *out's content with its spec. */
void le_record_from_lease(const ck_obj_t *obj, le_record_t *out);

/* The elector's state and decisions; single-threaded (the elector's thread). */
typedef struct le_core {
	char *identity;           /* owned */
	uint64_t lease_ns;        /* our lease duration */
	int64_t lease_duration_s; /* what we write: whole seconds, >= 1 */
	const ck_clk_t *clock;    /* borrowed */
	le_lock_t *lock;          /* borrowed */

	le_record_t observed; /* the last record seen or written */
	bool have_observed;
	uint64_t observed_mono; /* local time at which observed last changed */
	/* Local time at which the last successful write of ours was *sent*: the
	 * server stored it after that, so anyone's observation of it is later too.
	 * Our renew deadline counts from here (see le_core_renew_deadline). */
	uint64_t last_write_sent;
	char *reported_leader; /* last holder reported through transitions */
} le_core_t;

/* Borrows identity (copied), clock and lock (must outlive the core). */
void le_core_init(le_core_t *c, const char *identity, uint64_t lease_ns, const ck_clk_t *clock,
                  le_lock_t *lock);
void le_core_free(le_core_t *c);

/* Borrows rec. Takes rec as observed at local time mono unless it equals the
 * record already observed (only a change restarts validity): lets a caller that
 * saw the record elsewhere (a LIST) seed the core without a GET of its own. */
void le_core_observe_at(le_core_t *c, const le_record_t *rec, uint64_t mono);
/* Whether the observed record names us as the holder (client-go's IsLeader). */
bool le_core_is_leader(const le_core_t *c);
/* Whether the observed record is still valid at local time now. */
bool le_core_observed_valid(const le_core_t *c, uint64_t now);

/*
 * client-go's tryAcquireOrRenew. Lock calls are bounded by deadline (monotonic ns on
 * c->clock). Returns true if we hold the lease after the call (created, renewed or
 * taken over). false: held by someone else and still valid (*err untouched), or a
 * failed call (*err says which and why).
 */
bool le_core_try_acquire_or_renew(le_core_t *c, uint64_t deadline, char **err);

/*
 * Gives the lease up if we hold it: holder "", leaseDurationSeconds 1,
 * acquireTime/renewTime now, leaseTransitions kept. Returns 0 (released, or not
 * ours), -1 with *err.
 */
int le_core_release(le_core_t *c, uint64_t deadline, char **err);

/*
 * If the observed holder differs from the last reported one, records it and
 * returns it (borrowed from c, valid until the next core call); else NULL.
 * Changes to an empty holder are recorded but not returned.
 */
const char *le_core_take_transition(le_core_t *c);

/* Local time after which a leader that has not renewed must stop leading. */
uint64_t le_core_renew_deadline(const le_core_t *c, uint64_t renew_ns);

/* Jittered wait of client-go's wait.Jitter(retry, 1.2): retry * (1 + r * 1.2), r in
 * [0, 1). */
uint64_t le_jitter(uint64_t retry_ns, double r);

/* Takes lock (freed by ck_le_stop, or at once on failure). As ck_le_start, on any lock. */
ck_le_t *le_start_with_lock(le_lock_t *lock, const ck_le_config_t *cfg, char **err);

#endif
