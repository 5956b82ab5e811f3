/*
 * leaderelection: the elector's decisions (le_core_*), its thread, and the helpers
 * for the daemon's flags. See leaderelection.h for the semantics and le_internal.h
 * for the split between decisions and timing.
 *
 * Two deliberate differences from client-go, both on the safe side:
 *   - the renew deadline counts from the moment our last successful write was sent,
 *     not from the start of the current round of retries, so a leader that cannot
 *     renew gives up at most renew-deadline after the last write anyone could have
 *     observed; with renew deadline < lease duration it stops before anyone may
 *     take over, whatever the retry period and the request latency;
 *   - a leader that observes another valid holder stops at once instead of retrying
 *     until the deadline: it has been replaced, running on would mean two leaders.
 */
#include "pkg/leaderelection/le_internal.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* --- records --- */

void le_record_init(le_record_t *r)
{
	r->holder = ck_xstrdup("");
	r->lease_duration_s = 0;
	r->acquire_time = ck_xstrdup("");
	r->renew_time = ck_xstrdup("");
	r->transitions = 0;
}

void le_record_free(le_record_t *r)
{
	free(r->holder);
	free(r->acquire_time);
	free(r->renew_time);
	memset(r, 0, sizeof(*r));
}

void le_record_clear(le_record_t *r)
{
	le_record_free(r);
	le_record_init(r);
}

static void replace_str(char **dst, const char *src)
{
	char *copy = ck_xstrdup(src != NULL ? src : "");
	free(*dst);
	*dst = copy;
}

void le_record_copy(le_record_t *dst, const le_record_t *src)
{
	if (dst == src)
		return;
	replace_str(&dst->holder, src->holder);
	replace_str(&dst->acquire_time, src->acquire_time);
	replace_str(&dst->renew_time, src->renew_time);
	dst->lease_duration_s = src->lease_duration_s;
	dst->transitions = src->transitions;
}

bool le_record_equal(const le_record_t *a, const le_record_t *b)
{
	return strcmp(a->holder, b->holder) == 0 && a->lease_duration_s == b->lease_duration_s &&
	       strcmp(a->acquire_time, b->acquire_time) == 0 &&
	       strcmp(a->renew_time, b->renew_time) == 0 && a->transitions == b->transitions;
}

/* --- decisions --- */

void le_core_init(le_core_t *c, const char *identity, uint64_t lease_ns, const ck_clk_t *clock,
                  le_lock_t *lock)
{
	memset(c, 0, sizeof(*c));
	c->identity = ck_xstrdup(identity);
	c->lease_ns = lease_ns;
	/* client-go writes int(LeaseDuration / time.Second); never 0 (validated). */
	c->lease_duration_s = (int64_t)(lease_ns / CK_NS_PER_SEC);
	if (c->lease_duration_s < 1)
		c->lease_duration_s = 1;
	c->clock = clock != NULL ? clock : ck_clk_real();
	c->lock = lock;
	le_record_init(&c->observed);
	c->reported_leader = ck_xstrdup("");
}

void le_core_free(le_core_t *c)
{
	free(c->identity);
	le_record_free(&c->observed);
	free(c->reported_leader);
	memset(c, 0, sizeof(*c));
}

bool le_core_is_leader(const le_core_t *c)
{
	return c->have_observed && strcmp(c->observed.holder, c->identity) == 0;
}

bool le_core_observed_valid(const le_core_t *c, uint64_t now)
{
	if (!c->have_observed)
		return false;
	/* The record's own duration: a released lease (1 s) lapses quickly even for
	 * clients that do not treat an empty holder as free. */
	int64_t d = c->observed.lease_duration_s;
	uint64_t dur = d > 0 ? (uint64_t)d * CK_NS_PER_SEC : 0;
	return c->observed_mono + dur > now;
}

/* Milliseconds left until deadline, at least 1; 0 when it has passed. */
static uint32_t remaining_ms(const le_core_t *c, uint64_t deadline)
{
	uint64_t now = ck_clk_mono_ns(c->clock);
	if (now >= deadline)
		return 0;
	uint64_t ms = (deadline - now + CK_NS_PER_MS - 1) / CK_NS_PER_MS;
	return ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

static void observe(le_core_t *c, const le_record_t *rec)
{
	le_record_copy(&c->observed, rec);
	c->have_observed = true;
	c->observed_mono = ck_clk_mono_ns(c->clock);
}

void le_core_observe_at(le_core_t *c, const le_record_t *rec, uint64_t mono)
{
	if (c->have_observed && le_record_equal(&c->observed, rec))
		return;
	le_record_copy(&c->observed, rec);
	c->have_observed = true;
	c->observed_mono = mono;
}

/* Our write of rec, sent at local time sent, succeeded. */
static void observe_write(le_core_t *c, const le_record_t *rec, uint64_t sent)
{
	observe(c, rec);
	c->last_write_sent = sent;
}

/* Fills rec with a fresh claim by us, timestamps now. */
static void claim_record(const le_core_t *c, le_record_t *rec)
{
	char now[40];
	ck_time_format_rfc3339_micro(ck_clk_wall_ns(c->clock), now);
	replace_str(&rec->holder, c->identity);
	replace_str(&rec->acquire_time, now);
	replace_str(&rec->renew_time, now);
	rec->lease_duration_s = c->lease_duration_s;
	rec->transitions = 0;
}

bool le_core_try_acquire_or_renew(le_core_t *c, uint64_t deadline, char **err)
{
	bool result = false;
	le_lock_t *l = c->lock;
	le_record_t want, old;
	char *fast_err = NULL; /* kept only to explain a deadline it used up */
	uint32_t timeout;
	uint64_t sent;
	int rc;

	le_record_init(&want);
	le_record_init(&old);

	/* 1. Fast path: we led at our last look and our lease is still valid, so
	 * write over the version we know without reading first. A conflict (someone
	 * else wrote) falls through to the careful path. */
	if (le_core_is_leader(c) && le_core_observed_valid(c, ck_clk_mono_ns(c->clock))) {
		claim_record(c, &want);
		replace_str(&want.acquire_time, c->observed.acquire_time);
		want.transitions = c->observed.transitions;
		if ((timeout = remaining_ms(c, deadline)) == 0)
			goto deadline;
		sent = ck_clk_mono_ns(c->clock);
		rc = l->ops->update(l, timeout, &want, &fast_err);
		if (rc == LE_LOCK_OK) {
			observe_write(c, &want, sent);
			result = true;
			goto out;
		}
	}

	/* 2. Read the record, or create it when there is none. */
	claim_record(c, &want);
	if ((timeout = remaining_ms(c, deadline)) == 0)
		goto deadline;
	char *get_err = NULL;
	rc = l->ops->get(l, timeout, &old, &get_err);
	if (rc != LE_LOCK_NOT_FOUND && rc != LE_LOCK_OK)
		ck_err_set(err, "%s", get_err != NULL ? get_err : "failed");
	free(get_err); /* not found is no error: we create the lease */
	if (rc == LE_LOCK_NOT_FOUND) {
		if ((timeout = remaining_ms(c, deadline)) == 0)
			goto deadline;
		sent = ck_clk_mono_ns(c->clock);
		rc = l->ops->create(l, timeout, &want, err);
		if (rc == LE_LOCK_OK) {
			observe_write(c, &want, sent);
			result = true;
		} else {
			ck_err_wrap(err, "creating lease %s", l->desc);
		}
		goto out;
	}
	if (rc != LE_LOCK_OK) {
		ck_err_wrap(err, "getting lease %s", l->desc);
		goto out;
	}

	/* 3. Only a change of the record restarts its validity: the holder's
	 * timestamps are never compared with our clock. */
	if (!c->have_observed || !le_record_equal(&c->observed, &old))
		observe(c, &old);
	if (old.holder[0] != '\0' && le_core_observed_valid(c, ck_clk_mono_ns(c->clock)) &&
	    !le_core_is_leader(c))
		goto out; /* held by someone else: not an error */

	/* 4. Renew (keep acquireTime and the count) or take over (count one more). */
	if (le_core_is_leader(c)) {
		replace_str(&want.acquire_time, old.acquire_time);
		want.transitions = old.transitions;
	} else {
		want.transitions = old.transitions + 1;
	}
	if ((timeout = remaining_ms(c, deadline)) == 0)
		goto deadline;
	sent = ck_clk_mono_ns(c->clock);
	rc = l->ops->update(l, timeout, &want, err);
	if (rc == LE_LOCK_OK) {
		observe_write(c, &want, sent);
		result = true;
	} else {
		ck_err_wrap(err, "updating lease %s", l->desc);
	}
	goto out;

deadline:
	if (fast_err != NULL)
		ck_err_set(err, "updating lease %s: %s", l->desc, fast_err);
	else
		ck_err_set(err, "lease %s: no time left before the deadline", l->desc);
out:
	free(fast_err);
	le_record_free(&want);
	le_record_free(&old);
	return result;
}

int le_core_release(le_core_t *c, uint64_t deadline, char **err)
{
	int result = -1;
	le_lock_t *l = c->lock;
	le_record_t rec, cur;
	char now[40], *e = NULL;
	uint32_t timeout;
	uint64_t sent;
	int rc;

	le_record_init(&rec);
	le_record_init(&cur);
	if (!le_core_is_leader(c)) {
		result = 0;
		goto out;
	}
	ck_time_format_rfc3339_micro(ck_clk_wall_ns(c->clock), now);
	replace_str(&rec.acquire_time, now);
	replace_str(&rec.renew_time, now);
	rec.lease_duration_s = 1;
	/* Two tries: our version may be stale (a renew answer lost on the way);
	 * then read once and give up only what is still ours. */
	for (int attempt = 0; attempt < 2; attempt++) {
		rec.transitions = c->observed.transitions;
		free(e);
		e = NULL;
		if ((timeout = remaining_ms(c, deadline)) == 0) {
			ck_err_set(&e, "no time left");
			goto out;
		}
		sent = ck_clk_mono_ns(c->clock);
		rc = l->ops->update(l, timeout, &rec, &e);
		if (rc == LE_LOCK_OK) {
			observe_write(c, &rec, sent);
			result = 0;
			goto out;
		}
		if (rc != LE_LOCK_CONFLICT || attempt == 1)
			goto out;
		free(e);
		e = NULL;
		if ((timeout = remaining_ms(c, deadline)) == 0) {
			ck_err_set(&e, "no time left");
			goto out;
		}
		rc = l->ops->get(l, timeout, &cur, &e);
		if (rc == LE_LOCK_NOT_FOUND) {
			result = 0; /* deleted: nothing left to release */
			goto out;
		}
		if (rc != LE_LOCK_OK)
			goto out;
		if (!le_record_equal(&c->observed, &cur))
			observe(c, &cur);
		if (!le_core_is_leader(c)) {
			result = 0; /* someone else holds it now */
			goto out;
		}
	}
out:
	if (result != 0) {
		ck_err_set(err, "releasing lease %s: %s", l->desc, e != NULL ? e : "failed");
	}
	free(e);
	le_record_free(&rec);
	le_record_free(&cur);
	return result;
}

const char *le_core_take_transition(le_core_t *c)
{
	if (!c->have_observed || strcmp(c->observed.holder, c->reported_leader) == 0)
		return NULL;
	replace_str(&c->reported_leader, c->observed.holder);
	return c->reported_leader[0] != '\0' ? c->reported_leader : NULL;
}

uint64_t le_core_renew_deadline(const le_core_t *c, uint64_t renew_ns)
{
	return c->last_write_sent + renew_ns;
}

uint64_t le_jitter(uint64_t retry_ns, double r)
{
	if (r < 0)
		r = 0;
	if (r >= 1)
		r = 0.999999;
	return retry_ns + (uint64_t)((double)retry_ns * CK_LE_JITTER_FACTOR * r);
}

/* --- configuration --- */

static uint32_t or_default(uint32_t v, uint32_t def)
{
	return v != 0 ? v : def;
}

/* "15s", "1.5s", "500ms" into buf. */
static const char *fmt_ms(uint32_t ms, char buf[32])
{
	if (ms % 1000 == 0)
		snprintf(buf, 32, "%us", ms / 1000);
	else if (ms >= 1000)
		snprintf(buf, 32, "%.3gs", ms / 1000.0);
	else
		snprintf(buf, 32, "%ums", ms);
	return buf;
}

/* RFC 1123 subdomain (max 253) or label (max 63, no dots). */
static bool dns_name_ok(const char *s, bool label)
{
	size_t n = strlen(s);
	if (n == 0 || n > (label ? 63u : 253u))
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
		if (alnum)
			continue;
		if ((ch != '-' && (label || ch != '.')) || i == 0 || i == n - 1)
			return false;
		if (ch == '.' && (s[i - 1] == '.' || s[i - 1] == '-' || s[i + 1] == '-'))
			return false;
	}
	return true;
}

int ck_le_validate(const ck_le_config_t *cfg, char **err)
{
	uint32_t lease = or_default(cfg->lease_duration_ms, CK_LE_DEFAULT_LEASE_DURATION_MS);
	uint32_t renew = or_default(cfg->renew_deadline_ms, CK_LE_DEFAULT_RENEW_DEADLINE_MS);
	uint32_t retry = or_default(cfg->retry_period_ms, CK_LE_DEFAULT_RETRY_PERIOD_MS);
	char a[32], b[32];

	if (cfg->lease_namespace == NULL || cfg->lease_namespace[0] == '\0')
		return ck_err_set(err, "leader election: the lease namespace is not set "
		                       "(--leader-elect-resource-namespace)");
	if (!dns_name_ok(cfg->lease_namespace, true))
		return ck_err_set(
		    err,
		    "leader election: --leader-elect-resource-namespace=\"%s\" is not a "
		    "valid namespace (lowercase RFC 1123 label, at most 63 characters)",
		    cfg->lease_namespace);
	if (cfg->lease_name == NULL || cfg->lease_name[0] == '\0')
		return ck_err_set(
		    err,
		    "leader election: the lease name is not set (--leader-elect-resource-name)");
	if (!dns_name_ok(cfg->lease_name, false))
		return ck_err_set(
		    err,
		    "leader election: --leader-elect-resource-name=\"%s\" is not a valid "
		    "object name (lowercase RFC 1123 subdomain, at most 253 characters)",
		    cfg->lease_name);
	if (cfg->identity == NULL || cfg->identity[0] == '\0')
		return ck_err_set(err, "leader election: the identity is empty");
	if (lease < 1000)
		return ck_err_set(
		    err,
		    "leader election: --leader-elect-lease-duration=%s is too short: the "
		    "Lease records whole seconds, so it must be at least 1s",
		    fmt_ms(lease, a));
	/* Others judge validity by the whole seconds written in the Lease, so that is
	 * what the renew deadline must stay under. */
	if (lease - lease % 1000 <= renew) {
		char c3[32];
		bool rounded = lease % 1000 != 0;
		return ck_err_set(
		    err,
		    "leader election: --leader-elect-lease-duration=%s must be greater "
		    "than --leader-elect-renew-deadline=%s%s%s%s",
		    fmt_ms(lease, a), fmt_ms(renew, b),
		    rounded ? " (the Lease records whole seconds: " : "",
		    rounded ? fmt_ms(lease - lease % 1000, c3) : "", rounded ? ")" : "");
	}
	/* renew > 1.2 x retry, in integers: 10 renew > 12 retry. */
	if ((uint64_t)renew * 10 <= (uint64_t)retry * 12)
		return ck_err_set(
		    err,
		    "leader election: --leader-elect-renew-deadline=%s must be greater "
		    "than 1.2 x --leader-elect-retry-period=%s",
		    fmt_ms(renew, a), fmt_ms(retry, b));
	return 0;
}

char *ck_le_default_identity(void)
{
	char host[256];
	if (gethostname(host, sizeof(host)) != 0 || host[0] == '\0')
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	return ck_xasprintf("%s_%016llx", host, (unsigned long long)ck_rand_u64());
}

char *ck_le_default_namespace(const char *sa_dir, char **err)
{
	char *result = NULL, *text = NULL, *path = NULL, *e = NULL;
	const char *dir = sa_dir;

	if (dir == NULL || dir[0] == '\0')
		dir = getenv("CKUBE_SERVICEACCOUNT_DIR");
	if (dir == NULL || dir[0] == '\0')
		dir = "/var/run/secrets/kubernetes.io/serviceaccount";
	path = ck_xasprintf("%s/namespace", dir);
	if (ck_file_read_bounded(path, CK_FILE_MAX_BYTES, &text, NULL, &e) != 0) {
		ck_err_set(err,
		           "leader election: cannot tell this pod's namespace (%s); set "
		           "--leader-elect-resource-namespace",
		           e);
		goto out;
	}
	char *start = text, *end = text + strlen(text);
	while (*start != '\0' && isspace((unsigned char)*start))
		start++;
	while (end > start && isspace((unsigned char)end[-1]))
		end--;
	if (end == start) {
		ck_err_set(err,
		           "leader election: %s is empty, cannot tell this pod's namespace; set "
		           "--leader-elect-resource-namespace",
		           path);
		goto out;
	}
	result = ck_xstrndup(start, (size_t)(end - start));
out:
	free(e);
	free(text);
	free(path);
	return result;
}

/* --- the elector thread --- */

struct ck_le {
	le_core_t core;
	le_lock_t *lock;
	ck_le_config_t cfg; /* callbacks and ud; its strings point at our copies */
	char *ns, *name, *identity;
	uint64_t lease_ns, renew_ns, retry_ns;

	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond; /* signalled by ck_le_stop; waits use CLOCK_MONOTONIC */
	bool stopping;       /* under mu */
	char *leader;        /* last reported holder, under mu */
	_Atomic bool leading;
	/* core.observed_mono, published for ck_le_check (other threads). */
	_Atomic uint64_t observed_pub;
};

static void le_logf(ck_le_t *e, ck_le_log_level_t level, const char *fmt, ...) CK_PRINTF(3, 4);
static void le_logf(ck_le_t *e, ck_le_log_level_t level, const char *fmt, ...)
{
	if (e->cfg.on_log == NULL)
		return;
	va_list ap;
	va_start(ap, fmt);
	char *msg = ck_xvasprintf(fmt, ap);
	va_end(ap);
	e->cfg.on_log(e->cfg.ud, level, msg);
	free(msg);
}

static void le_event(ck_le_t *e, const char *what)
{
	if (e->cfg.on_event == NULL)
		return;
	char *msg = ck_xasprintf("%s %s", e->identity, what);
	e->cfg.on_event(e->cfg.ud, CK_LE_EVENT_REASON, msg);
	free(msg);
}

/* Reports a change of holder (client-go's maybeReportTransition). */
static void le_report(ck_le_t *e)
{
	atomic_store(&e->observed_pub, e->core.observed_mono);
	const char *holder = le_core_take_transition(&e->core);
	pthread_mutex_lock(&e->mu);
	if (strcmp(e->leader, e->core.reported_leader) != 0) {
		free(e->leader);
		e->leader = ck_xstrdup(e->core.reported_leader);
	}
	pthread_mutex_unlock(&e->mu);
	if (holder != NULL) {
		le_logf(e, CK_LE_LOG_INFO, "new leader of lease %s: %s", e->lock->desc, holder);
		if (e->cfg.on_new_leader != NULL)
			e->cfg.on_new_leader(e->cfg.ud, holder);
	}
}

/* Waits ns of real time unless stopped first. Returns true when stopping. */
static bool le_wait(ck_le_t *e, uint64_t ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t t = (uint64_t)ts.tv_nsec + ns;
	ts.tv_sec += (time_t)(t / CK_NS_PER_SEC);
	ts.tv_nsec = (long)(t % CK_NS_PER_SEC);
	pthread_mutex_lock(&e->mu);
	while (!e->stopping) {
		if (pthread_cond_timedwait(&e->cond, &e->mu, &ts) == ETIMEDOUT)
			break;
	}
	bool stop = e->stopping;
	pthread_mutex_unlock(&e->mu);
	return stop;
}

static bool le_stopping(ck_le_t *e)
{
	pthread_mutex_lock(&e->mu);
	bool stop = e->stopping;
	pthread_mutex_unlock(&e->mu);
	return stop;
}

static uint64_t le_now(ck_le_t *e)
{
	return ck_clk_mono_ns(e->core.clock);
}

/* Acquires; returns true once we lead, false when stopped first. */
static bool le_acquire(ck_le_t *e)
{
	le_logf(e, CK_LE_LOG_INFO, "attempting to acquire leader lease %s...", e->lock->desc);
	for (;;) {
		char *err = NULL;
		if (le_stopping(e))
			return false;
		bool ok = le_core_try_acquire_or_renew(&e->core, le_now(e) + e->renew_ns, &err);
		le_report(e);
		if (ok)
			return true;
		if (err != NULL)
			le_logf(e, CK_LE_LOG_ERROR, "failed to acquire lease %s: %s", e->lock->desc,
			        err);
		free(err);
		if (le_wait(e, le_jitter(e->retry_ns, ck_rand_unit())))
			return false;
	}
}

/* Renews every retry period. Returns true when stopped, false when the lease was
 * lost (*why set). */
static bool le_renew(ck_le_t *e, char **why)
{
	char *last = NULL;
	bool result = false;

	for (;;) {
		if (le_wait(e, e->retry_ns)) {
			result = true;
			goto out;
		}
		for (;;) {
			uint64_t deadline = le_core_renew_deadline(&e->core, e->renew_ns);
			uint64_t now = le_now(e);
			if (now >= deadline) {
				*why = ck_xasprintf(
				    "no successful renewal within the renew deadline "
				    "(%llu ms)%s%s",
				    (unsigned long long)(e->renew_ns / CK_NS_PER_MS),
				    last != NULL ? "; last error: " : "", last != NULL ? last : "");
				goto out;
			}
			free(last);
			last = NULL;
			bool ok = le_core_try_acquire_or_renew(&e->core, deadline, &last);
			le_report(e);
			if (ok)
				break;
			if (!le_core_is_leader(&e->core) && e->core.observed.holder[0] != '\0' &&
			    le_core_observed_valid(&e->core, le_now(e))) {
				*why =
				    ck_xasprintf("lease taken over by %s", e->core.observed.holder);
				goto out;
			}
			le_logf(e, CK_LE_LOG_WARNING, "failed to renew lease %s: %s", e->lock->desc,
			        last != NULL ? last : "unknown error");
			now = le_now(e);
			/* Never sleep past the renew deadline: a request that used up the
			 * time left must not buy a whole extra retry period. */
			uint64_t wait = e->retry_ns;
			if (now >= deadline)
				wait = 0;
			else if (deadline - now < wait)
				wait = deadline - now;
			if (le_wait(e, wait)) {
				result = true;
				goto out;
			}
		}
	}
out:
	free(last);
	return result;
}

static void *le_run(void *arg)
{
	ck_le_t *e = arg;
	char *why = NULL, *err = NULL;

	if (!le_acquire(e))
		return NULL;
	atomic_store(&e->leading, true);
	le_logf(e, CK_LE_LOG_INFO, "successfully acquired lease %s", e->lock->desc);
	le_event(e, "became leader");
	if (e->cfg.on_started_leading != NULL)
		e->cfg.on_started_leading(e->cfg.ud);

	bool stopped = le_renew(e, &why);
	atomic_store(&e->leading, false);
	if (!stopped)
		le_logf(e, CK_LE_LOG_ERROR, "stopped leading: lost lease %s: %s", e->lock->desc,
		        why);
	/* Before the release: whatever the lease guards must have stopped before a
	 * standby can take over, and the callback is where the caller stops it. */
	if (e->cfg.on_stopped_leading != NULL)
		e->cfg.on_stopped_leading(e->cfg.ud);
	if (stopped && e->cfg.release_on_cancel) {
		if (le_core_release(&e->core, le_now(e) + e->renew_ns, &err) == 0)
			le_logf(e, CK_LE_LOG_INFO, "released lease %s", e->lock->desc);
		else
			le_logf(e, CK_LE_LOG_ERROR, "%s", err);
	}
	le_event(e, "stopped leading");
	le_report(e);
	free(why);
	free(err);
	return NULL;
}

ck_le_t *le_start_with_lock(le_lock_t *lock, const ck_le_config_t *cfg, char **err)
{
	ck_le_t *e = NULL;
	pthread_condattr_t ca;

	if (ck_le_validate(cfg, err) != 0) {
		lock->ops->free(lock);
		return NULL;
	}
	e = ck_xcalloc(1, sizeof(*e));
	e->lock = lock;
	e->cfg = *cfg;
	e->ns = ck_xstrdup(cfg->lease_namespace);
	e->name = ck_xstrdup(cfg->lease_name);
	e->identity = ck_xstrdup(cfg->identity);
	e->cfg.lease_namespace = e->ns;
	e->cfg.lease_name = e->name;
	e->cfg.identity = e->identity;
	e->lease_ns =
	    or_default(cfg->lease_duration_ms, CK_LE_DEFAULT_LEASE_DURATION_MS) * CK_NS_PER_MS;
	e->renew_ns =
	    or_default(cfg->renew_deadline_ms, CK_LE_DEFAULT_RENEW_DEADLINE_MS) * CK_NS_PER_MS;
	e->retry_ns =
	    or_default(cfg->retry_period_ms, CK_LE_DEFAULT_RETRY_PERIOD_MS) * CK_NS_PER_MS;
	e->leader = ck_xstrdup("");
	atomic_init(&e->leading, false);
	le_core_init(&e->core, e->identity, e->lease_ns, cfg->clock, lock);

	pthread_mutex_init(&e->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->cond, &ca);
	pthread_condattr_destroy(&ca);

	int rc = pthread_create(&e->thread, NULL, le_run, e);
	if (rc != 0) {
		ck_err_set(err, "leader election: starting the elector thread: %s", strerror(rc));
		pthread_cond_destroy(&e->cond);
		pthread_mutex_destroy(&e->mu);
		le_core_free(&e->core);
		lock->ops->free(lock);
		free(e->leader);
		free(e->ns);
		free(e->name);
		free(e->identity);
		free(e);
		return NULL;
	}
	return e;
}

ck_le_t *ck_le_start(struct ck_client *c, const ck_le_config_t *cfg, char **err)
{
	if (ck_le_validate(cfg, err) != 0)
		return NULL;
	return le_start_with_lock(le_lock_lease_new(c, cfg->lease_namespace, cfg->lease_name), cfg,
	                          err);
}

void ck_le_stop(ck_le_t *e)
{
	if (e == NULL)
		return;
	if (pthread_equal(pthread_self(), e->thread))
		ck_fatal("le_stop called from a leader election callback (it would join itself)");
	pthread_mutex_lock(&e->mu);
	e->stopping = true;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->thread, NULL);

	pthread_cond_destroy(&e->cond);
	pthread_mutex_destroy(&e->mu);
	le_core_free(&e->core);
	e->lock->ops->free(e->lock);
	free(e->leader);
	free(e->ns);
	free(e->name);
	free(e->identity);
	free(e);
}

bool ck_le_is_leader(const ck_le_t *e)
{
	return e != NULL && atomic_load(&e->leading);
}

int ck_le_check(ck_le_t *e, uint64_t tolerance_ms, char **reason)
{
	if (e == NULL || !atomic_load(&e->leading))
		return 0;
	uint64_t now = ck_clk_mono_ns(e->core.clock);
	uint64_t seen = atomic_load(&e->observed_pub);
	uint64_t limit = e->lease_ns + tolerance_ms * CK_NS_PER_MS;
	if (now <= seen || now - seen <= limit)
		return 0;
	if (reason != NULL)
		*reason =
		    ck_xasprintf("failed election to renew leadership on lease %s: last renewed "
		                 "%llu ms ago, more than the lease duration plus %llu ms",
		                 e->lock->desc, (unsigned long long)((now - seen) / CK_NS_PER_MS),
		                 (unsigned long long)tolerance_ms);
	return -1;
}

char *ck_le_leader(ck_le_t *e)
{
	pthread_mutex_lock(&e->mu);
	char *s = ck_xstrdup(e->leader);
	pthread_mutex_unlock(&e->mu);
	return s;
}
