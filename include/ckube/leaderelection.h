/*
 * leaderelection: leader election on a coordination.k8s.io/v1 Lease, with
 * client-go's semantics.
 *
 * Every replica runs one elector. It tries to acquire the Lease every retry period
 * (jittered by a factor of 1.2, as client-go's JitterFactor). Once it holds the Lease
 * it renews it every retry period; if it cannot renew within the renew deadline it
 * stops leading for good (a process never re-acquires in the same run: the daemon
 * exits and a clean restart re-joins). Writes use optimistic concurrency on the
 * Lease's resourceVersion, so of two candidates only one wins.
 *
 * Validity is judged by local time only: a Lease held by someone else counts as
 * valid while (local monotonic time at which this elector last saw the record
 * change) + leaseDurationSeconds of that record is in the future. The timestamps in
 * the record are never compared with the local clock, so clock skew between nodes
 * does not matter (only clock rate does). A Lease with an empty holderIdentity is
 * free at once. A takeover increments leaseTransitions.
 *
 * On ck_le_stop() a leader with release_on_cancel gives the Lease up (holderIdentity
 * "", leaseDurationSeconds 1, acquireTime/renewTime now) so that a standby takes
 * over at its next retry instead of a full lease duration later. The caller must
 * have stopped everything the Lease guards before the release: before calling
 * ck_le_stop(), or inside on_stopped_leading, which runs before the release.
 *
 * Threads: ck_le_start() runs the elector on its own thread; it makes blocking client
 * calls (kclient_*_sync) bounded by the renew deadline. Callbacks run on that
 * thread, one at a time; they must not call ck_le_stop(), and all but
 * on_stopped_leading must return quickly (while one runs, the lease is not renewed).
 * ck_le_is_leader() and ck_le_leader() may be called from any thread.
 */
#ifndef CKUBE_LEADERELECTION_H
#define CKUBE_LEADERELECTION_H

#include <ckube/export.h>

#include <ckube/base.h>

#include <stdbool.h>
#include <stdint.h>

struct ck_client;

/* Defaults of the --leader-elect-* flags (client-go's "core clients" values). */
#define CK_LE_DEFAULT_LEASE_DURATION_MS 15000u
#define CK_LE_DEFAULT_RENEW_DEADLINE_MS 10000u
#define CK_LE_DEFAULT_RETRY_PERIOD_MS   2000u
/* wait.JitterUntil's factor in client-go: a retry waits retry * [1, 1 + 1.2). */
#define CK_LE_JITTER_FACTOR 1.2
/* Event reason of the events this module asks to be recorded. */
#define CK_LE_EVENT_REASON "LeaderElection"

typedef enum ck_le_log_level {
	CK_LE_LOG_INFO = 0,
	CK_LE_LOG_WARNING,
	CK_LE_LOG_ERROR,
} ck_le_log_level_t;

typedef struct ck_le_config {
	const char *lease_namespace; /* required */
	const char *lease_name;      /* required */
	const char *identity;        /* required; see ck_le_default_identity() */
	/* 0 = the default above. The Lease records whole seconds, so the lease
	 * duration must be at least 1000 ms. */
	uint32_t lease_duration_ms;
	uint32_t renew_deadline_ms;
	uint32_t retry_period_ms;
	/* Give the Lease up on ck_le_stop() (holder emptied). */
	bool release_on_cancel;
	/* Clock for the election's decisions and the Lease's timestamps; NULL = real.
	 * The elector's waits between tries always use real time. */
	const ck_clk_t *clock;

	/* All callbacks are optional, run on the elector's thread, and get ud. */
	/* This process became the leader: start the workers. */
	void (*on_started_leading)(void *ud);
	/* This process stopped leading: called once, only after on_started_leading,
	 * both when the Lease was lost (renew deadline passed, or another holder seen)
	 * and on ck_le_stop(). ck_le_is_leader() is already false. It may block until the
	 * workers have stopped: on ck_le_stop() the Lease is released only after it
	 * returns, so a standby never runs alongside them. The daemon exits on a loss;
	 * it knows a stop is one because it called ck_le_stop(). */
	void (*on_stopped_leading)(void *ud);
	/* A different holder was observed (including this process); identity is
	 * borrowed for the call; never called for an empty holder. */
	void (*on_new_leader)(void *ud, const char *identity);
	/* An Event to record on the Lease (type Normal, reason CK_LE_EVENT_REASON):
	 * "<identity> became leader", "<identity> stopped leading". Strings borrowed. */
	void (*on_event)(void *ud, const char *reason, const char *message);
	/* A log line (attempting to acquire, acquired, failed to renew, ...);
	 * msg borrowed. NULL = silent. */
	void (*on_log)(void *ud, ck_le_log_level_t level, const char *msg);
	void *ud;
} ck_le_config_t;

typedef struct ck_le ck_le_t;

/*
 * Borrows cfg. Checks that the names and identity are set and that
 * lease duration > renew deadline > 1.2 x retry period (client-go's rule) after
 * defaults are applied. Returns 0, or -1 with *err naming the flag at fault.
 */
CKUBE_API int ck_le_validate(const ck_le_config_t *cfg, char **err);

/*
 * Borrows c (must outlive the elector) and cfg (strings are copied). Validates cfg,
 * then starts the elector thread, which first tries to acquire at once. Returns a
 * new elector, stop and free it with ck_le_stop(); or NULL with *err (and then no
 * callback is ever called).
 */
CKUBE_API ck_le_t *ck_le_start(struct ck_client *c, const ck_le_config_t *cfg, char **err);

/*
 * Takes e. Cancels the election: wakes the thread; if this process leads, calls
 * on_stopped_leading, then releases the Lease if release_on_cancel is set; joins
 * the thread and frees e. May block up to the renew deadline when the API
 * server does not answer. NULL is a no-op. Never call it from a callback.
 */
CKUBE_API void ck_le_stop(ck_le_t *e);

/* Whether this process leads right now (atomic; for the leader metric, readyz). */
CKUBE_API bool ck_le_is_leader(const ck_le_t *e);

/*
 * client-go's leader-election healthz check (HealthzAdaptor): 0 when e is NULL, not
 * leading, or leading and its lease was renewed within the lease duration plus
 * tolerance_ms; -1 with a new *reason (free()) when a leader has not renewed for
 * longer, i.e. its elector is stuck. Any thread; e must not be stopped meanwhile.
 */
CKUBE_API int ck_le_check(ck_le_t *e, uint64_t tolerance_ms, char **reason);

/* Returns a new string (free with free()): the last observed holder, "" if none. */
CKUBE_API char *ck_le_leader(ck_le_t *e);

/* Returns a new string (free with free()): "<hostname>_<16 random hex digits>". */
CKUBE_API char *ck_le_default_identity(void);

/*
 * Borrows sa_dir (NULL = $CKUBE_SERVICEACCOUNT_DIR, else
 * /var/run/secrets/kubernetes.io/serviceaccount). Returns a new string (free with
 * free()): the pod's namespace read from <sa_dir>/namespace; or NULL with *err
 * saying to set --leader-elect-resource-namespace.
 */
CKUBE_API char *ck_le_default_namespace(const char *sa_dir, char **err);

#endif
