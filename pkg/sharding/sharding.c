/*
 * sharding: the bucket coordinator (see <ckube/sharding.h> for the design and its
 * guarantees). Every Lease, the member's and each bucket's, is held through
 * leader election's decision core (le_core_t over a Lease lock), so acquiring,
 * renewing, the renew deadline and the release are the very code whose safety
 * leader election's tests establish; this file only decides WHICH Leases to hold.
 *
 * One round per retry period: LIST the group's Leases (one request sees every
 * member and bucket), renew what is held, hand over what is beyond the fair share,
 * then try free or expired buckets up to it. The LIST seeds each bucket core's
 * observation (le_core_observe_at), so a bucket left by a crashed member is tried
 * one lease duration after the LIST first saw it unchanged, without a GET per
 * bucket per round. The same LIST carries the bounds object and each bucket
 * Lease's epoch stamp: a newer epoch is adopted before anything else is decided
 * (adopt), and buckets are taken only through the epoch gate (acquire_gate).
 */
#include "pkg/leaderelection/le_internal.h"
#include "pkg/sharding/sharding_internal.h"
#include <ckube/client.h>
#include <ckube/kinds.h>
#include <ckube/sharding.h>
#include <ckube/types.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A member Lease as the last LISTs showed it. */
typedef struct member {
	char *name;
	le_record_t rec;
	uint64_t seen; /* local time the record last changed */
	bool listed;   /* in the last LIST */
} member_t;

/* One epoch's boundaries, immutable once published; kept until the coordinator
 * is freed, so that a reader holding an old one never reads freed memory. */
typedef struct bounds_ver {
	struct bounds_ver *older;
	uint64_t epoch;
	uint64_t b[]; /* nb + 1 */
} bounds_ver_t;

typedef struct bucket {
	struct ck_sharding *s;
	le_lock_t *lock;
	le_core_t core;
	bool held;       /* coordinator's view: we hold the Lease and called on_acquire */
	uint64_t wepoch; /* the epoch our next write of the Lease carries */
	uint64_t lepoch; /* the epoch the last LIST showed on it (0: absent/none) */
	/* Read by any thread: owned now, and until when (local mono ns). */
	_Atomic bool owned;
	_Atomic uint64_t valid_until;
} bucket_t;

struct ck_sharding {
	ck_sharding_config_t cfg; /* callbacks and ud; strings point at our copies */
	char *ns, *group, *identity, *member_name, *bucket_prefix, *member_prefix;
	ck_client_t *client;
	const ck_clk_t *clock;
	uint64_t lease_ns, renew_ns, retry_ns;
	uint32_t nb;
	/* The current epoch's boundaries: workers read bounds_pub (any thread), the
	 * coordinator its own pointer cur (the same one). */
	_Atomic(bounds_ver_t *) bounds_pub;
	bounds_ver_t *cur;
	bucket_t *b;
	ck_type_t lease_type; /* ck_type_lease keeping annotations */
	uint32_t rebalance_every, skew_pct, rounds;

	/* The bounds object "<group>-bounds" as the last LIST showed it. */
	char *bounds_name;
	bool obj_listed, obj_valid;
	char *obj_rv, *obj_bad_rv; /* its version; the last one found malformed */
	uint64_t obj_epoch;
	uint64_t *obj_bounds; /* nb + 1, when obj_valid */

	le_lock_t *mlock;
	le_core_t mcore; /* our member Lease */
	member_t *members;
	size_t nmembers;
	char **live; /* sorted live identities, borrowed from members (or ours) */
	size_t nlive;
	_Atomic uint32_t live_pub;

	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool stopping; /* under mu */
};

static void sh_logf(ck_sharding_t *s, ck_le_log_level_t level, const char *fmt, ...)
    CK_PRINTF(3, 4);
static void sh_logf(ck_sharding_t *s, ck_le_log_level_t level, const char *fmt, ...)
{
	if (s->cfg.on_log == NULL)
		return;
	va_list ap;
	va_start(ap, fmt);
	char *msg = ck_xvasprintf(fmt, ap);
	va_end(ap);
	s->cfg.on_log(s->cfg.ud, level, msg);
	free(msg);
}

/* --- boundaries --- */

#define ANN_EPOCH  "sharding.ckube.io/epoch"
#define ANN_BOUNDS "sharding.ckube.io/bounds"

static bounds_ver_t *bounds_ver_new(uint64_t epoch, const uint64_t *b, uint32_t nb,
                                    bounds_ver_t *older)
{
	bounds_ver_t *v = ck_xcalloc(1, sizeof(*v) + (nb + 1) * sizeof(v->b[0]));
	v->older = older;
	v->epoch = epoch;
	memcpy(v->b, b, (nb + 1) * sizeof(v->b[0]));
	return v;
}

uint32_t ck_sharding_buckets(const ck_sharding_t *s)
{
	return s->nb;
}

static ck_shard_range_t range_in(const bounds_ver_t *v, uint32_t nb, uint32_t i)
{
	ck_shard_range_t r = {0, 0};
	if (i < nb) {
		r.start = v->b[i];
		r.end = v->b[i + 1];
	}
	return r;
}

ck_shard_range_t ck_sharding_bucket_range(const ck_sharding_t *s, uint32_t i)
{
	return range_in(atomic_load(&s->bounds_pub), s->nb, i);
}

uint32_t ck_sharding_bucket_of(const ck_sharding_t *s, uint64_t h)
{
	return sh_bucket_of(atomic_load(&s->bounds_pub)->b, s->nb, h);
}

uint64_t ck_sharding_epoch(const ck_sharding_t *s)
{
	return s != NULL ? atomic_load(&s->bounds_pub)->epoch : 0;
}

uint64_t ck_sharding_bounds(const ck_sharding_t *s, uint64_t *out)
{
	const bounds_ver_t *v = atomic_load(&s->bounds_pub);
	memcpy(out, v->b, (s->nb + 1) * sizeof(*out));
	return v->epoch;
}

/* --- queries (any thread) --- */

bool ck_sharding_owns_bucket(const ck_sharding_t *s, uint32_t i)
{
	if (s == NULL || i >= s->nb || !atomic_load(&s->b[i].owned))
		return false;
	/* Even if the coordinator is stuck in a callback or a request, a bucket past
	 * its renew deadline is not ours to work on. */
	return ck_clk_mono_ns(s->clock) < atomic_load(&s->b[i].valid_until);
}

bool ck_sharding_owns_hash(const ck_sharding_t *s, uint64_t h)
{
	if (s == NULL)
		return false;
	/* A bucket's owned flag belongs to the boundaries it was set under: if they
	 * moved between reading them and reading the flag, the flag may be the new
	 * range's, so ask again. (A moved bucket's flag is cleared before the new
	 * boundaries are published and set again only after.) */
	for (;;) {
		bounds_ver_t *v = atomic_load(&s->bounds_pub);
		bool owns = ck_sharding_owns_bucket(s, sh_bucket_of(v->b, s->nb, h));
		if (atomic_load(&s->bounds_pub) == v)
			return owns;
	}
}

bool ck_sharding_owns_obj(const ck_sharding_t *s, const ck_obj_t *obj)
{
	if (s == NULL || obj == NULL)
		return false;
	return ck_sharding_owns_hash(s, ck_shard_obj_hash(s->cfg.field, obj));
}

bool ck_sharding_owns_key(const ck_sharding_t *s, const char *key)
{
	if (s == NULL || key == NULL || s->cfg.field != CK_SHARD_NAMESPACE)
		return false;
	const char *slash = strchr(key, '/');
	size_t len = slash != NULL ? (size_t)(slash - key) : 0;
	return ck_sharding_owns_hash(s, ck_shard_hash(key, len));
}

uint32_t ck_sharding_owned_count(const ck_sharding_t *s)
{
	uint32_t n = 0;
	for (uint32_t i = 0; s != NULL && i < s->nb; i++)
		n += ck_sharding_owns_bucket(s, i) ? 1 : 0;
	return n;
}

uint32_t ck_sharding_members(const ck_sharding_t *s)
{
	return s != NULL ? atomic_load(&s->live_pub) : 0;
}

ck_shard_selector_t *ck_sharding_selector(const ck_sharding_t *s)
{
	ck_shard_range_t *r = ck_xcalloc(s->nb, sizeof(*r));
	size_t n = 0;
	ck_shard_selector_t *sel = NULL;
	bounds_ver_t *v;
	do { /* as ck_sharding_owns_hash: flags and boundaries of one epoch */
		v = atomic_load(&s->bounds_pub);
		n = 0;
		for (uint32_t i = 0; i < s->nb; i++) {
			if (!ck_sharding_owns_bucket(s, i))
				continue;
			ck_shard_range_t br = range_in(v, s->nb, i);
			if (n > 0 && r[n - 1].end == br.start && br.start != 0)
				r[n - 1].end = br.end;
			else
				r[n++] = br;
		}
	} while (atomic_load(&s->bounds_pub) != v);
	if (n > 0)
		sel = ck_shard_selector_new(s->cfg.field, r, n, NULL);
	free(r);
	return sel;
}

/* --- configuration --- */

static uint32_t or_default(uint32_t v, uint32_t def)
{
	return v != 0 ? v : def;
}

/* The identity as it appears in a Lease name. */
static char *name_part(const char *identity)
{
	char *p = ck_xstrdup(identity);
	for (char *q = p; *q != '\0'; q++) {
		char ch = *q;
		if (ch >= 'A' && ch <= 'Z')
			ch = (char)(ch - 'A' + 'a');
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' ||
		      ch == '-'))
			ch = '-';
		*q = ch;
	}
	return p;
}

int ck_sharding_validate(const ck_sharding_config_t *cfg, char **err)
{
	int rc = -1;
	char *e = NULL, *id = NULL, *name = NULL, *last = NULL;
	uint32_t nb = or_default(cfg->buckets, CK_SHARDING_DEFAULT_BUCKETS);

	if (cfg->group == NULL || cfg->group[0] == '\0') {
		ck_err_set(err, "sharding: the group (the controller's name, prefix of its Lease "
		                "names) is empty");
		goto out;
	}
	if (cfg->identity == NULL || cfg->identity[0] == '\0') {
		ck_err_set(err, "sharding: the identity is empty");
		goto out;
	}
	if (nb > CK_SHARDING_MAX_BUCKETS) {
		ck_err_set(err, "sharding: %u buckets is too many (at most %u)", nb,
		           CK_SHARDING_MAX_BUCKETS);
		goto out;
	}
	if (cfg->rebalance_skew_pct != 0 && cfg->rebalance_skew_pct < 100) {
		ck_err_set(err,
		           "sharding: rebalance skew %u%% is below 100%% (the fullest bucket "
		           "always holds at least the ideal share)",
		           cfg->rebalance_skew_pct);
		goto out;
	}
	if (cfg->field != CK_SHARD_NAMESPACE && cfg->field != CK_SHARD_UID) {
		ck_err_set(err, "sharding: unknown shard field %d (namespace or uid)",
		           (int)cfg->field);
		goto out;
	}
	/* The Lease names, checked by leader election's own rules: the longest
	 * bucket name and the member name. */
	id = name_part(cfg->identity);
	name = ck_xasprintf("%s-member-%s", cfg->group, id);
	last = ck_xasprintf("%s-bucket-%u", cfg->group, nb - 1);
	const char *names[2] = {name, last};
	for (int k = 0; k < 2; k++) {
		ck_le_config_t le = {.lease_namespace = cfg->lease_namespace,
		                     .lease_name = names[k],
		                     .identity = cfg->identity,
		                     .lease_duration_ms = cfg->lease_duration_ms,
		                     .renew_deadline_ms = cfg->renew_deadline_ms,
		                     .retry_period_ms = cfg->retry_period_ms};
		if (ck_le_validate(&le, &e) != 0) {
			ck_err_set(err, "sharding (group \"%s\", Lease \"%s\"): %s", cfg->group,
			           names[k], e);
			goto out;
		}
	}
	rc = 0;
out:
	free(e);
	free(id);
	free(name);
	free(last);
	return rc;
}

/* --- the coordinator's rounds --- */

static uint64_t now_ns(const ck_sharding_t *s)
{
	return ck_clk_mono_ns(s->clock);
}

static bool is_stopping(ck_sharding_t *s)
{
	pthread_mutex_lock(&s->mu);
	bool stop = s->stopping;
	pthread_mutex_unlock(&s->mu);
	return stop;
}

/* Waits ns of real time unless stopped first. Returns true when stopping. */
static bool sh_wait(ck_sharding_t *s, uint64_t ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t t = (uint64_t)ts.tv_nsec + ns;
	ts.tv_sec += (time_t)(t / CK_NS_PER_SEC);
	ts.tv_nsec = (long)(t % CK_NS_PER_SEC);
	pthread_mutex_lock(&s->mu);
	while (!s->stopping) {
		if (pthread_cond_timedwait(&s->cond, &s->mu, &ts) == ETIMEDOUT)
			break;
	}
	bool stop = s->stopping;
	pthread_mutex_unlock(&s->mu);
	return stop;
}

/* Publishes bucket i's deadline after a successful write of ours. */
static void publish(ck_sharding_t *s, uint32_t i)
{
	atomic_store(&s->b[i].valid_until, le_core_renew_deadline(&s->b[i].core, s->renew_ns));
}

/* The bucket Leases' epoch annotation (le_lock_lease_annotate): every write
 * carries the bucket's wepoch, and none goes over a Lease stamped with a newer
 * epoch (a replica that has not adopted the newer boundaries yet must not take a
 * bucket that a newer one retired). */
static int epoch_annotation(void *ud, const char *stored, char **value, char **err)
{
	bucket_t *b = ud;
	uint64_t e = 0;
	if (stored != NULL && sh_epoch_parse(stored, &e, err) != 0) {
		ck_err_wrap(err, "Lease %s: annotation %s", b->lock->desc, ANN_EPOCH);
		return -1;
	}
	if (e > b->wepoch) {
		ck_err_set(err,
		           "Lease %s carries epoch %" PRIu64 ", newer than this replica's %" PRIu64
		           " (it adopts the new boundaries first)",
		           b->lock->desc, e, b->wepoch);
		return -1;
	}
	*value = ck_xasprintf("%" PRIu64, b->wepoch);
	return 0;
}

/* Stops owning bucket i and drains it (on_release); release writes the Lease
 * free afterwards. The order is the handover guarantee. */
static void give_up(ck_sharding_t *s, uint32_t i, bool release, const char *why)
{
	bucket_t *b = &s->b[i];
	char *err = NULL;
	if (!b->held)
		return;
	atomic_store(&b->owned, false);
	b->held = false;
	if (s->cfg.on_release != NULL)
		s->cfg.on_release(s->cfg.ud, i);
	if (release) {
		if (le_core_release(&b->core, now_ns(s) + s->renew_ns, &err) == 0)
			sh_logf(s, CK_LE_LOG_INFO, "released bucket %u (%s)", i, why);
		else
			sh_logf(s, CK_LE_LOG_ERROR, "bucket %u (%s): %s", i, why, err);
	} else {
		sh_logf(s, CK_LE_LOG_WARNING, "gave bucket %u up without releasing it: %s", i, why);
	}
	free(err);
}

static void take(ck_sharding_t *s, uint32_t i)
{
	bucket_t *b = &s->b[i];
	b->held = true;
	publish(s, i);
	atomic_store(&b->owned, true);
	sh_logf(s, CK_LE_LOG_INFO, "acquired bucket %u", i);
	if (s->cfg.on_acquire != NULL)
		s->cfg.on_acquire(s->cfg.ud, i, ck_sharding_bucket_range(s, i));
}

static member_t *member_find(ck_sharding_t *s, const char *name)
{
	for (size_t i = 0; i < s->nmembers; i++)
		if (strcmp(s->members[i].name, name) == 0)
			return &s->members[i];
	return NULL;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The bounds object as listed (obj, borrowed): its epoch and boundaries, or
 * obj_valid false with one error line per version of it. */
static void observe_bounds(ck_sharding_t *s, const ck_obj_t *obj)
{
	char *err = NULL;
	uint64_t e = 0;
	const char *et = ck_obj_annotation(obj, ANN_EPOCH),
	           *bt = ck_obj_annotation(obj, ANN_BOUNDS);

	s->obj_listed = true;
	if (s->obj_rv != NULL && strcmp(s->obj_rv, obj->rv) == 0)
		return; /* unchanged since the last LIST */
	free(s->obj_rv);
	s->obj_rv = ck_xstrdup(obj->rv);
	s->obj_valid = false;
	if (sh_epoch_parse(et, &e, &err) != 0)
		ck_err_wrap(&err, "annotation %s", ANN_EPOCH);
	else if (bt == NULL)
		ck_err_set(&err, "no annotation %s", ANN_BOUNDS);
	else if (sh_bounds_parse(bt, s->nb, s->obj_bounds, &err) != 0)
		ck_err_wrap(&err, "annotation %s", ANN_BOUNDS);
	if (err == NULL) {
		s->obj_epoch = e;
		s->obj_valid = true;
	} else if (s->obj_bad_rv == NULL || strcmp(s->obj_bad_rv, obj->rv) != 0) {
		sh_logf(s, CK_LE_LOG_ERROR,
		        "bounds Lease %s/%s: %s; kept epoch %" PRIu64 "'s boundaries", s->ns,
		        s->bounds_name, err, s->cur->epoch);
		free(s->obj_bad_rv);
		s->obj_bad_rv = ck_xstrdup(obj->rv);
	}
	free(err);
}

/* LISTs the group's Leases: updates the member table, seeds the bucket cores,
 * notes each bucket Lease's epoch and reads the bounds object. 0, or -1 with
 * *err. */
static int observe_leases(ck_sharding_t *s, char **err)
{
	ck_obj_t **items = NULL;
	size_t n = 0;
	ck_result_t res;
	le_record_t rec;
	int rc = -1;
	size_t plen = strlen(s->member_prefix), blen = strlen(s->bucket_prefix);
	uint64_t now;

	memset(&res, 0, sizeof(res));
	le_record_init(&rec);
	if (ck_client_list_sync(s->client, &s->lease_type, s->ns, NULL, &items, &n, NULL, &res) !=
	    0) {
		ck_err_set(err, "listing Leases in %s: %s", s->ns,
		           res.error != NULL ? res.error : "failed");
		goto out;
	}
	now = now_ns(s);
	for (size_t k = 0; k < s->nmembers; k++)
		s->members[k].listed = false;
	for (uint32_t i = 0; i < s->nb; i++)
		s->b[i].lepoch = 0;
	s->obj_listed = false;
	for (size_t k = 0; k < n; k++) {
		const char *name = items[k]->name;
		if (strcmp(name, s->bounds_name) == 0) {
			observe_bounds(s, items[k]);
		} else if (strncmp(name, s->member_prefix, plen) == 0) {
			le_record_from_lease(items[k], &rec);
			member_t *m = member_find(s, name);
			if (m == NULL) {
				s->members = ck_xrealloc(s->members,
				                         (s->nmembers + 1) * sizeof(*s->members));
				m = &s->members[s->nmembers++];
				m->name = ck_xstrdup(name);
				le_record_init(&m->rec);
				m->seen = 0;
			}
			if (m->seen == 0 || !le_record_equal(&m->rec, &rec)) {
				le_record_copy(&m->rec, &rec);
				m->seen = now;
			}
			m->listed = true;
		} else if (strncmp(name, s->bucket_prefix, blen) == 0) {
			char *end = NULL;
			const char *num = name + blen;
			errno = 0;
			unsigned long i = strtoul(num, &end, 10);
			if (num[0] < '0' || num[0] > '9' || *end != '\0' || errno != 0 ||
			    i >= s->nb)
				continue; /* another bucket count's leftovers: not ours */
			le_record_from_lease(items[k], &rec);
			/* Our own writes are observed by the core itself. */
			if (!s->b[i].held)
				le_core_observe_at(&s->b[i].core, &rec, now);
			const char *et = ck_obj_annotation(items[k], ANN_EPOCH);
			char *e = NULL;
			if (et != NULL && sh_epoch_parse(et, &s->b[i].lepoch, &e) != 0) {
				/* Not ours to interpret: as if newer, so no one acquires over it.
				 */
				sh_logf(s, CK_LE_LOG_ERROR, "bucket Lease %s: annotation %s: %s",
				        s->b[i].lock->desc, ANN_EPOCH, e);
				s->b[i].lepoch = UINT64_MAX;
			}
			free(e);
		}
	}
	if (!s->obj_listed) {
		free(s->obj_rv);
		s->obj_rv = NULL;
		s->obj_valid = false;
	}
	/* Forget members whose Lease is gone. */
	size_t w = 0;
	for (size_t k = 0; k < s->nmembers; k++) {
		if (s->members[k].listed) {
			s->members[w++] = s->members[k];
		} else {
			free(s->members[k].name);
			le_record_free(&s->members[k].rec);
		}
	}
	s->nmembers = w;
	rc = 0;
out:
	for (size_t k = 0; k < n; k++)
		ck_obj_unref(items[k]);
	free(items);
	ck_result_clear(&res);
	le_record_free(&rec);
	return rc;
}

/* The sorted live identities (ours always among them). */
static void compute_live(ck_sharding_t *s)
{
	uint64_t now = now_ns(s);
	free(s->live);
	s->live = ck_xcalloc(s->nmembers + 1, sizeof(*s->live));
	s->nlive = 0;
	s->live[s->nlive++] = s->identity;
	for (size_t k = 0; k < s->nmembers; k++) {
		member_t *m = &s->members[k];
		uint64_t dur = m->rec.lease_duration_s > 0
		                   ? (uint64_t)m->rec.lease_duration_s * CK_NS_PER_SEC
		                   : 0;
		if (m->rec.holder[0] == '\0' || strcmp(m->rec.holder, s->identity) == 0 ||
		    m->seen + dur <= now)
			continue;
		bool dup = false;
		for (size_t j = 0; j < s->nlive; j++)
			dup = dup || strcmp(s->live[j], m->rec.holder) == 0;
		if (!dup)
			s->live[s->nlive++] = m->rec.holder;
	}
	qsort(s->live, s->nlive, sizeof(*s->live), cmp_str);
	atomic_store(&s->live_pub, (uint32_t)s->nlive);
}

static uint32_t my_rank(const ck_sharding_t *s)
{
	for (size_t k = 0; k < s->nlive; k++)
		if (strcmp(s->live[k], s->identity) == 0)
			return (uint32_t)k;
	return 0;
}

/* Renews every bucket we hold (owned, or being drained), gives up those we can no
 * longer claim, and returns how many we still hold. Run every round and between
 * two drains, so that a slow on_release never lets the other Leases lapse. */
static uint32_t renew_held(ck_sharding_t *s)
{
	uint32_t held = 0;
	char *err = NULL;
	for (uint32_t i = 0; i < s->nb; i++) {
		bucket_t *b = &s->b[i];
		if (!b->held)
			continue;
		uint64_t deadline = le_core_renew_deadline(&b->core, s->renew_ns);
		if (le_core_try_acquire_or_renew(&b->core, deadline, &err)) {
			publish(s, i);
			held++;
		} else if (!le_core_is_leader(&b->core) && b->core.observed.holder[0] != '\0' &&
		           le_core_observed_valid(&b->core, now_ns(s))) {
			give_up(s, i, false, "taken over");
		} else if (now_ns(s) >= deadline) {
			give_up(s, i, false, "not renewed within the renew deadline");
		} else {
			held++; /* retried next round, still before the deadline */
			sh_logf(s, CK_LE_LOG_WARNING, "failed to renew bucket %u: %s", i,
			        err != NULL ? err : "unknown error");
		}
		free(err);
		err = NULL;
	}
	return held;
}

/* Adopts the bounds object's newer epoch F. Buckets whose range stays keep being
 * owned (their next renewal stamps F on the Lease). Those whose range moves stop
 * being owned at once, then each is drained and released stamped F (the others
 * renewed between two drains: those still draining keep their old epoch's stamp,
 * so no one acquires over them), and only then are the new boundaries published:
 * a worker never sees a moved range as owned. */
static void adopt(ck_sharding_t *s)
{
	uint64_t f = s->obj_epoch;
	const uint64_t *nb_ = s->obj_bounds, *ob = s->cur->b;
	uint32_t moved = 0, released = 0;

	for (uint32_t i = 0; i < s->nb; i++) {
		bool changed = sh_bucket_changed(ob, nb_, i);
		moved += changed;
		if (!s->b[i].held)
			continue;
		if (changed)
			atomic_store(&s->b[i].owned, false);
		else
			s->b[i].wepoch = f;
	}
	for (uint32_t i = 0; i < s->nb; i++) {
		if (!s->b[i].held || !sh_bucket_changed(ob, nb_, i))
			continue;
		s->b[i].wepoch = f;
		give_up(s, i, true, "its range moved");
		released++;
		renew_held(s);
	}
	s->cur = bounds_ver_new(f, nb_, s->nb, s->cur);
	atomic_store(&s->bounds_pub, s->cur);
	sh_logf(s, CK_LE_LOG_INFO,
	        "adopted the boundaries of epoch %" PRIu64 ": %u of %u ranges moved, %u of them "
	        "released here",
	        f, moved, s->nb, released);
}

/* Stamps a free or expired bucket Lease with our epoch (acquired and released at
 * once, never owned), so that no replica still on an older epoch takes it. */
static void retire(ck_sharding_t *s, uint32_t i)
{
	bucket_t *b = &s->b[i];
	char *err = NULL;
	b->wepoch = s->cur->epoch;
	if (le_core_try_acquire_or_renew(&b->core, now_ns(s) + s->renew_ns, &err)) {
		if (le_core_release(&b->core, now_ns(s) + s->renew_ns, &err) == 0) {
			b->lepoch = b->wepoch; /* as the next LIST would show it */
			sh_logf(s, CK_LE_LOG_INFO, "stamped free bucket %u with epoch %" PRIu64, i,
			        b->wepoch);
		}
	}
	if (err != NULL)
		sh_logf(s, CK_LE_LOG_WARNING, "stamping bucket %u with epoch %" PRIu64 ": %s", i,
		        b->wepoch, err);
	free(err);
}

/* Whether the LIST shows bucket i held by someone, still valid. */
static bool held_elsewhere(ck_sharding_t *s, uint32_t i)
{
	bucket_t *b = &s->b[i];
	return b->core.have_observed && b->core.observed.holder[0] != '\0' &&
	       le_core_observed_valid(&b->core, now_ns(s));
}

/* The gate on what this replica knows of the bucket Leases' epochs (le: nb). */
static sh_gate_t gate_now(ck_sharding_t *s, uint64_t *le)
{
	for (uint32_t i = 0; i < s->nb; i++)
		le[i] = s->b[i].held ? s->b[i].wepoch : s->b[i].lepoch;
	return sh_acquire_gate(s->cur->epoch, le, s->nb);
}

/* The epoch rule (sh_acquire_gate) on this round's LIST. Waiting, it stamps the
 * free Leases of older epochs and looks again: when only free ones held it shut
 * (a fresh group, or the holders all renewed), it opens in this round. */
static sh_gate_t acquire_gate(ck_sharding_t *s)
{
	uint64_t *le = ck_xcalloc(s->nb, sizeof(*le));
	sh_gate_t g = gate_now(s, le);
	if (g == SH_GATE_WAIT) {
		for (uint32_t i = 0; i < s->nb; i++)
			if (le[i] < s->cur->epoch && !s->b[i].held && !held_elsewhere(s, i))
				retire(s, i);
		g = gate_now(s, le);
	}
	free(le);
	return g;
}

/* The writer (live rank 0, namespace field, every rebalance_every rounds):
 * moves the boundaries to the namespaces' hashes when the fullest bucket holds
 * too many (sh_bounds_skewed). A new epoch, written over the version listed, so
 * that of two writers one wins. Returns true when it wrote one. */
static bool rebalance(ck_sharding_t *s)
{
	bool wrote = false;
	ck_obj_t **items = NULL;
	size_t n = 0;
	uint64_t *h = NULL, *nbounds = NULL;
	char *text = NULL;
	ck_sbuf_t body = CK_SBUF_INIT;
	ck_result_t res;

	memset(&res, 0, sizeof(res));
	if (ck_client_list_sync(s->client, &ck_type_namespace, NULL, NULL, &items, &n, NULL,
	                        &res) != 0) {
		sh_logf(s, CK_LE_LOG_WARNING, "listing namespaces to place the boundaries: %s",
		        res.error != NULL ? res.error : "failed");
		goto out;
	}
	h = ck_xcalloc(n + 1, sizeof(*h));
	for (size_t k = 0; k < n; k++)
		h[k] = ck_shard_hash(items[k]->name, strlen(items[k]->name));
	size_t before = sh_max_load(s->cur->b, s->nb, h, n);
	if (!sh_bounds_skewed(before, n, s->nb, s->skew_pct))
		goto out;
	nbounds = ck_xcalloc(s->nb + 1, sizeof(*nbounds));
	sh_balanced_bounds(h, n, s->nb, nbounds);
	uint64_t epoch = (s->obj_epoch > s->cur->epoch ? s->obj_epoch : s->cur->epoch) + 1;
	text = sh_bounds_format(nbounds, s->nb);

	ck_sbuf_puts(&body, "{\"metadata\":{");
	if (s->obj_rv != NULL) {
		ck_sbuf_puts(&body, "\"resourceVersion\":");
		ck_sbuf_put_json_str(&body, s->obj_rv);
	} else {
		ck_sbuf_puts(&body, "\"name\":");
		ck_sbuf_put_json_str(&body, s->bounds_name);
		ck_sbuf_puts(&body, ",\"namespace\":");
		ck_sbuf_put_json_str(&body, s->ns);
	}
	ck_sbuf_printf(
	    &body,
	    ",\"annotations\":{\"" ANN_EPOCH "\":\"%" PRIu64 "\",\"" ANN_BOUNDS "\":", epoch);
	ck_sbuf_put_json_str(&body, text);
	ck_sbuf_puts(&body, "}}");
	int rc;
	if (s->obj_rv != NULL) {
		ck_sbuf_putc(&body, '}');
		rc = ck_client_patch_sync(s->client, &ck_type_lease, s->ns, s->bounds_name,
		                          CK_PATCH_MERGE, ck_sbuf_cstr(&body), NULL, &res);
	} else {
		ck_sbuf_puts(&body,
		             ",\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\"}");
		rc = ck_client_create_sync(s->client, &ck_type_lease, s->ns, ck_sbuf_cstr(&body),
		                           NULL, &res);
	}
	wrote = rc == 0;
	if (rc == 0)
		sh_logf(s, CK_LE_LOG_INFO,
		        "moved the boundaries to epoch %" PRIu64
		        ": the fullest of %u buckets held %zu "
		        "of %zu namespaces, now %zu",
		        epoch, s->nb, before, n, sh_max_load(nbounds, s->nb, h, n));
	else if (ck_result_is_conflict(&res) || ck_result_is_already_exists(&res))
		sh_logf(s, CK_LE_LOG_INFO,
		        "bounds Lease %s/%s changed meanwhile; checked again later", s->ns,
		        s->bounds_name);
	else
		sh_logf(s, CK_LE_LOG_WARNING, "writing bounds Lease %s/%s: %s", s->ns,
		        s->bounds_name, res.error != NULL ? res.error : "failed");
out:
	for (size_t k = 0; k < n; k++)
		ck_obj_unref(items[k]);
	free(items);
	free(h);
	free(nbounds);
	free(text);
	ck_sbuf_free(&body);
	ck_result_clear(&res);
	return wrote;
}

/* Our share: B / n, one more for the first B % n ranks. The shares add up to B
 * exactly, so once every member holds its own, no bucket is free and no member is
 * empty (ceil(B / n) for all would allow 4/4/4/4/0 of 16 on 5). */
static uint32_t fair_share(uint32_t nb, uint32_t n, uint32_t rank)
{
	return nb / n + (rank < nb % n ? 1 : 0);
}

static void round_once(ck_sharding_t *s)
{
	char *err = NULL;
	uint32_t held = 0, fair, rank, n;

	/* 1. Our member Lease: lost or not, keep trying (it only counts us in). */
	if (!le_core_try_acquire_or_renew(&s->mcore, now_ns(s) + s->renew_ns, &err) && err != NULL)
		sh_logf(s, CK_LE_LOG_WARNING, "member lease %s: %s", s->mlock->desc, err);
	free(err);
	err = NULL;

	/* 2. Renew what we hold; give up what we can no longer claim. */
	held = renew_held(s);

	/* 3. Who is alive, and our share. */
	if (observe_leases(s, &err) != 0) {
		sh_logf(s, CK_LE_LOG_WARNING, "%s", err);
		free(err);
		return; /* no rebalance on a stale view */
	}
	/* Adopted before the writer judges the boundaries: judged against older ones
	 * they look skewed, and two writers in turn would move them for nothing. */
	if (s->obj_valid && s->obj_epoch > s->cur->epoch)
		adopt(s);
	compute_live(s);
	rank = my_rank(s);
	/* The writer adopts what it wrote in the same round (one more LIST): else, on
	 * a fresh start, it would take every bucket on the old boundaries and hand
	 * them all back a round later to take them again. */
	if (s->cfg.field == CK_SHARD_NAMESPACE && rank == 0 &&
	    s->rounds++ % s->rebalance_every == 0 && rebalance(s)) {
		if (observe_leases(s, &err) != 0) {
			sh_logf(s, CK_LE_LOG_WARNING, "%s", err);
			free(err);
			return;
		}
		if (s->obj_valid && s->obj_epoch > s->cur->epoch)
			adopt(s);
	}
	held = 0;
	for (uint32_t i = 0; i < s->nb; i++)
		held += s->b[i].held;
	compute_live(s);
	n = (uint32_t)s->nlive;
	rank = my_rank(s);
	fair = fair_share(s->nb, n, rank);

	/* 4. Beyond the fair share: hand over foreign buckets first, highest first. */
	for (int pass = 0; pass < 2 && held > fair; pass++) {
		for (uint32_t k = s->nb; k-- > 0 && held > fair;) {
			bool home = k % n == rank;
			if (!s->b[k].held || home != (pass == 1))
				continue;
			give_up(s, k, true, "rebalance");
			held = renew_held(s);
		}
	}

	/* 5. Below it: free or expired buckets, home ones first, once every bucket
	 * Lease carries our epoch. */
	if (held < fair && acquire_gate(s) != SH_GATE_OPEN)
		return;
	for (int pass = 0; pass < 2 && held < fair; pass++) {
		for (uint32_t k = 0; k < s->nb && held < fair; k++) {
			bucket_t *b = &s->b[k];
			bool home = k % n == rank;
			if (b->held || home != (pass == 0))
				continue;
			if (held_elsewhere(s, k))
				continue; /* held by someone, as far as the LIST shows */
			if (is_stopping(s))
				return;
			b->wepoch = s->cur->epoch;
			if (le_core_try_acquire_or_renew(&b->core, now_ns(s) + s->renew_ns, &err)) {
				take(s, k);
				held++;
			} else if (err != NULL) {
				sh_logf(s, CK_LE_LOG_WARNING, "acquiring bucket %u: %s", k, err);
			}
			free(err);
			err = NULL;
		}
	}
}

static void *sh_run(void *arg)
{
	ck_sharding_t *s = arg;
	char *err = NULL;

	do {
		round_once(s);
	} while (!sh_wait(s, le_jitter(s->retry_ns, ck_rand_unit() * 0.2)));

	/* Stop: no bucket is owned from here on (workers skip every key at once);
	 * each is then drained and released, the others kept renewed meanwhile so
	 * none lapses while drained; then the member. */
	for (uint32_t i = 0; i < s->nb; i++)
		atomic_store(&s->b[i].owned, false);
	for (uint32_t i = 0; i < s->nb; i++) {
		if (!s->b[i].held)
			continue;
		give_up(s, i, s->cfg.release_on_stop,
		        s->cfg.release_on_stop ? "stopping" : "stopping, left to expire");
		if (s->cfg.release_on_stop)
			renew_held(s);
	}
	if (s->cfg.release_on_stop &&
	    le_core_release(&s->mcore, now_ns(s) + s->renew_ns, &err) != 0)
		sh_logf(s, CK_LE_LOG_ERROR, "%s", err);
	free(err);
	return NULL;
}

static void sh_free(ck_sharding_t *s)
{
	for (uint32_t i = 0; i < s->nb; i++) {
		le_core_free(&s->b[i].core);
		s->b[i].lock->ops->free(s->b[i].lock);
	}
	le_core_free(&s->mcore);
	s->mlock->ops->free(s->mlock);
	for (size_t k = 0; k < s->nmembers; k++) {
		free(s->members[k].name);
		le_record_free(&s->members[k].rec);
	}
	free(s->members);
	free(s->live);
	free(s->b);
	for (bounds_ver_t *v = s->cur, *older; v != NULL; v = older) {
		older = v->older;
		free(v);
	}
	free(s->obj_bounds);
	free(s->obj_rv);
	free(s->obj_bad_rv);
	free(s->bounds_name);
	free(s->ns);
	free(s->group);
	free(s->identity);
	free(s->member_name);
	free(s->member_prefix);
	free(s->bucket_prefix);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

ck_sharding_t *ck_sharding_start(struct ck_client *c, const ck_sharding_config_t *cfg, char **err)
{
	ck_sharding_t *s;
	pthread_condattr_t ca;
	char *id;

	if (ck_sharding_validate(cfg, err) != 0)
		return NULL;
	s = ck_xcalloc(1, sizeof(*s));
	s->cfg = *cfg;
	s->client = c;
	s->clock = cfg->clock != NULL ? cfg->clock : ck_clk_real();
	s->ns = ck_xstrdup(cfg->lease_namespace);
	s->group = ck_xstrdup(cfg->group);
	s->identity = ck_xstrdup(cfg->identity);
	s->cfg.lease_namespace = s->ns;
	s->cfg.group = s->group;
	s->cfg.identity = s->identity;
	s->lease_ns =
	    or_default(cfg->lease_duration_ms, CK_LE_DEFAULT_LEASE_DURATION_MS) * CK_NS_PER_MS;
	s->renew_ns =
	    or_default(cfg->renew_deadline_ms, CK_LE_DEFAULT_RENEW_DEADLINE_MS) * CK_NS_PER_MS;
	s->retry_ns =
	    or_default(cfg->retry_period_ms, CK_LE_DEFAULT_RETRY_PERIOD_MS) * CK_NS_PER_MS;
	s->nb = or_default(cfg->buckets, CK_SHARDING_DEFAULT_BUCKETS);
	s->rebalance_every = or_default(cfg->rebalance_every, CK_SHARDING_DEFAULT_REBALANCE_EVERY);
	s->skew_pct = or_default(cfg->rebalance_skew_pct, CK_SHARDING_DEFAULT_REBALANCE_SKEW_PCT);
	s->lease_type = ck_type_lease;
	s->lease_type.keep_annotations = true;
	s->obj_bounds = ck_xcalloc(s->nb + 1, sizeof(*s->obj_bounds));
	sh_equal_bounds(s->obj_bounds, s->nb); /* epoch 0: equal ranges, no object */
	s->cur = bounds_ver_new(0, s->obj_bounds, s->nb, NULL);
	atomic_init(&s->bounds_pub, s->cur);
	s->bounds_name = ck_xasprintf("%s-bounds", s->group);

	id = name_part(s->identity);
	s->member_prefix = ck_xasprintf("%s-member-", s->group);
	s->bucket_prefix = ck_xasprintf("%s-bucket-", s->group);
	s->member_name = ck_xasprintf("%s%s", s->member_prefix, id);
	free(id);
	s->mlock = le_lock_lease_new(c, s->ns, s->member_name);
	le_core_init(&s->mcore, s->identity, s->lease_ns, s->clock, s->mlock);
	s->b = ck_xcalloc(s->nb, sizeof(*s->b));
	for (uint32_t i = 0; i < s->nb; i++) {
		char *name = ck_xasprintf("%s%u", s->bucket_prefix, i);
		s->b[i].s = s;
		s->b[i].lock = le_lock_lease_new(c, s->ns, name);
		le_lock_lease_annotate(s->b[i].lock, ANN_EPOCH, epoch_annotation, &s->b[i]);
		le_core_init(&s->b[i].core, s->identity, s->lease_ns, s->clock, s->b[i].lock);
		atomic_init(&s->b[i].owned, false);
		atomic_init(&s->b[i].valid_until, 0);
		free(name);
	}
	atomic_init(&s->live_pub, 1);

	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	int rc = pthread_create(&s->thread, NULL, sh_run, s);
	if (rc != 0) {
		ck_err_set(err, "sharding: starting the coordinator thread: %s", strerror(rc));
		sh_free(s);
		return NULL;
	}
	return s;
}

void ck_sharding_stop(ck_sharding_t *s)
{
	if (s == NULL)
		return;
	if (pthread_equal(pthread_self(), s->thread))
		ck_fatal("ck_sharding_stop called from a sharding callback (it would join itself)");
	pthread_mutex_lock(&s->mu);
	s->stopping = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	sh_free(s);
}
