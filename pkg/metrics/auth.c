/*
 * auth: the secure metrics server's gate, as controller-runtime's
 * filters.WithAuthenticationAndAuthorization: the bearer token is authenticated
 * (TokenReview), then the user is authorized for the path and verb
 * (SubjectAccessReview), both through an injectable reviewer, both cached the way
 * k8s.io/apiserver's delegating authenticator and authorizer cache them.
 *
 * Design note. Bounded tables keyed by SHA-256 digests, so that no token is kept
 * in memory once reviewed. Tokens: the users of valid ones, and apart from them
 * the invalid ones; requests (user, groups, uid, extra, path, verb): the allowed
 * ones, and apart from them the denied ones. Anyone can send a token, so the
 * negative tables are the ones a stranger fills: keeping them separate means a
 * flood of made-up tokens only evicts other made-up tokens, never a real
 * scraper's decision (one LRU for both, at 1024 entries, was emptied by 1024
 * requests). Lookups are linear: a metrics endpoint has a handful of scrapers,
 * and at most max_cached entries per table; when one is full, the expired entries
 * go first, then the one that would expire soonest. An expired valid token stays
 * until its slot is needed: it marks the token as one that was valid, see below.
 * Failed reviews are not cached, as in the apiserver: the next scrape asks again.
 *
 * Reviews cost API requests, so they are rate-limited here, before they are
 * made, and a request over the limit is answered 429 with Retry-After rather
 * than queued (a queue would hold the server thread and every scraper behind
 * it). Two token buckets of the same size: "new" pays for TokenReviews of tokens
 * never seen valid, the only reviews a caller without credentials can cause;
 * "known" pays for TokenReviews of tokens that were valid when last reviewed and
 * for SubjectAccessReviews (asked only for authenticated callers). So random
 * tokens drain "new" alone, and a real scraper whose cached decision expires
 * mid-flood is still reviewed. The lock is never held during a review, so two
 * concurrent misses for the same token may both ask; the later answer wins.
 */
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ckube/flowcontrol.h>
#include <ckube/log.h>

#include "pkg/metrics/metrics_internal.h"

#define DIGEST_LEN 32

struct entry {
	unsigned char key[DIGEST_LEN];
	uint64_t expires_ns;
	int yes;
	ck_metrics_user_t user; /* tokens table, when yes */
};

struct table {
	struct entry *e;
	size_t n;
};

/* Which bucket pays for a review (see the design note). */
enum payer { PAY_NEW, PAY_KNOWN };

struct ck_metrics_auth {
	ck_metrics_reviewer_t r;
	uint64_t authn_ttl_ns, allow_ttl_ns, deny_ttl_ns;
	size_t max;
	const ck_clk_t *clk;
	pthread_mutex_t mu; /* the tables, the buckets and the counts */
	struct table tokens_ok, tokens_bad, access_ok, access_bad;
	ck_tb_t bucket[2]; /* indexed by enum payer */
	unsigned long nauthn, nauthz, nthrottled;
	/* In the server's registry (which outlives the gate), or NULL. */
	ck_metrics_counter_t *m_authn, *m_authz, *m_throttled;
};

void ck_metrics_user_clear(ck_metrics_user_t *u)
{
	if (u == NULL)
		return;
	free(u->name);
	free(u->uid);
	for (size_t i = 0; i < u->ngroups; i++)
		free(u->groups[i]);
	free(u->groups);
	free(u->extra_json);
	memset(u, 0, sizeof(*u));
}

static void user_copy(ck_metrics_user_t *dst, const ck_metrics_user_t *src)
{
	dst->name = ck_xstrdup(src->name ? src->name : "");
	dst->uid = src->uid ? ck_xstrdup(src->uid) : NULL;
	dst->ngroups = src->ngroups;
	dst->groups = src->ngroups ? ck_xcalloc(src->ngroups, sizeof(char *)) : NULL;
	for (size_t i = 0; i < src->ngroups; i++)
		dst->groups[i] = ck_xstrdup(src->groups[i] ? src->groups[i] : "");
	dst->extra_json = src->extra_json ? ck_xstrdup(src->extra_json) : NULL;
}

static uint64_t ms_or(int64_t ms, uint64_t def_ms)
{
	return (ms > 0 ? (uint64_t)ms : def_ms) * CK_NS_PER_MS;
}

/* A counter of reg named name, or NULL (no registry, or the name is taken). */
static ck_metrics_counter_t *counter_or_null(ck_metrics_registry_t *reg, const char *name,
                                             const char *help)
{
	char *err = NULL;
	ck_metrics_counter_t *c = reg ? ck_metrics_counter_new(reg, name, help, &err) : NULL;
	free(err);
	return c;
}

ck_metrics_auth_t *ck_metrics_i_auth_new(const ck_metrics_secure_opts_t *o,
                                         ck_metrics_registry_t *reg)
{
	ck_metrics_auth_t *a = ck_xcalloc(1, sizeof(*a));
	a->r = *o->reviewer;
	/* controller-runtime's figures (pkg/metrics/filters), not the apiserver's 10 s. */
	a->authn_ttl_ns = ms_or(o->authn_ttl_ms, 60 * 1000);
	a->allow_ttl_ns = ms_or(o->allow_ttl_ms, 5 * 60 * 1000);
	a->deny_ttl_ns = ms_or(o->deny_ttl_ms, 30 * 1000);
	a->max = o->max_cached ? o->max_cached : 1024;
	a->clk = o->clock ? o->clock : ck_clk_real();
	/* 5/s, 10 at once: a handful of new scrapers at a time (each costs two
	 * reviews), a trickle for the API server when someone floods the port. */
	double qps = o->review_qps != 0 ? o->review_qps : 5;
	int burst = o->review_burst > 0 ? o->review_burst : 10;
	uint64_t now = ck_clk_mono_ns(a->clk);
	ck_tb_init(&a->bucket[PAY_NEW], qps, burst, now);
	ck_tb_init(&a->bucket[PAY_KNOWN], qps, burst, now);
	a->m_authn = counter_or_null(reg, "metrics_auth_token_reviews_total",
	                             "TokenReviews asked for /metrics callers.");
	a->m_authz = counter_or_null(reg, "metrics_auth_access_reviews_total",
	                             "SubjectAccessReviews asked for /metrics callers.");
	a->m_throttled = counter_or_null(
	    reg, "metrics_auth_throttled_total",
	    "/metrics requests answered 429 because their review was over the review rate.");
	pthread_mutex_init(&a->mu, NULL);
	return a;
}

static void table_free(struct table *t)
{
	for (size_t i = 0; i < t->n; i++)
		ck_metrics_user_clear(&t->e[i].user);
	free(t->e);
	t->e = NULL;
	t->n = 0;
}

void ck_metrics_i_auth_free(ck_metrics_auth_t *a)
{
	if (a == NULL)
		return;
	table_free(&a->tokens_ok);
	table_free(&a->tokens_bad);
	table_free(&a->access_ok);
	table_free(&a->access_bad);
	pthread_mutex_destroy(&a->mu);
	free(a);
}

void ck_metrics_i_auth_counts(ck_metrics_auth_t *a, unsigned long *authn, unsigned long *authz,
                              unsigned long *throttled)
{
	pthread_mutex_lock(&a->mu);
	*authn = a->nauthn;
	*authz = a->nauthz;
	if (throttled != NULL)
		*throttled = a->nthrottled;
	pthread_mutex_unlock(&a->mu);
}

/* The entry for key, live or expired, or NULL. Lock held. */
static struct entry *table_lookup(struct table *t, const unsigned char *key)
{
	for (size_t i = 0; i < t->n; i++)
		if (memcmp(t->e[i].key, key, DIGEST_LEN) == 0)
			return &t->e[i];
	return NULL;
}

/* The live entry for key, or NULL. Lock held. */
static struct entry *table_find(struct table *t, const unsigned char *key, uint64_t now)
{
	struct entry *e = table_lookup(t, key);
	return e != NULL && e->expires_ns > now ? e : NULL;
}

static void table_drop(struct table *t, size_t i)
{
	ck_metrics_user_clear(&t->e[i].user);
	t->e[i] = t->e[--t->n];
}

/* Drops the entry for key, if any. Lock held. */
static void table_forget(struct table *t, const unsigned char *key)
{
	struct entry *e = table_lookup(t, key);
	if (e != NULL)
		table_drop(t, (size_t)(e - t->e));
}

/*
 * Takes a token from bucket p for one review, unless it would have to wait: then
 * returns the whole seconds until one is there (at least 1, for Retry-After) and
 * takes nothing, so that refused callers do not push the next one further back.
 * Returns 0 when the review may go ahead. Lock held.
 */
static int admit(ck_metrics_auth_t *a, enum payer p, const char *review)
{
	ck_tb_t *b = &a->bucket[p];
	uint64_t now = ck_clk_mono_ns(a->clk);
	uint64_t wait = ck_tb_reserve(b, now);
	if (wait == 0)
		return 0;
	ck_tb_unreserve(b, now);
	CK_LOG_V(4, "Metrics request over the review rate", CK_KV_STR("review", review),
	         CK_KV_STR("bucket", p == PAY_NEW ? "new" : "known"));
	a->nthrottled++;
	if (a->m_throttled != NULL)
		ck_metrics_counter_inc(a->m_throttled);
	uint64_t s = (wait + CK_NS_PER_SEC - 1) / CK_NS_PER_SEC;
	return s < 1 ? 1 : s > 3600 ? 3600 : (int)s;
}

/* Stores a decision (takes *user when not NULL), replacing any for the same key. Lock held. */
static void table_put(ck_metrics_auth_t *a, struct table *t, const unsigned char *key, int yes,
                      uint64_t expires_ns, ck_metrics_user_t *user, uint64_t now)
{
	for (size_t i = 0; i < t->n; i++)
		if (memcmp(t->e[i].key, key, DIGEST_LEN) == 0) {
			table_drop(t, i);
			break;
		}
	if (t->n >= a->max) {
		for (size_t i = t->n; i-- > 0;)
			if (t->e[i].expires_ns <= now)
				table_drop(t, i);
	}
	if (t->n >= a->max) {
		size_t soonest = 0;
		for (size_t i = 1; i < t->n; i++)
			if (t->e[i].expires_ns < t->e[soonest].expires_ns)
				soonest = i;
		table_drop(t, soonest);
	}
	if (t->e == NULL)
		t->e = ck_xcalloc(a->max, sizeof(struct entry));
	struct entry *e = &t->e[t->n++];
	memset(e, 0, sizeof(*e));
	memcpy(e->key, key, DIGEST_LEN);
	e->yes = yes;
	e->expires_ns = expires_ns;
	if (user != NULL) {
		e->user = *user;
		memset(user, 0, sizeof(*user));
	}
}

static void digest(const void *data, size_t len, unsigned char *out)
{
	if (gnutls_hash_fast(GNUTLS_DIG_SHA256, data, len, out) < 0)
		ck_fatal("SHA-256 is not available"); /* GnuTLS always has it */
}

/*
 * The token of "Authorization: Bearer <token>", as the apiserver's bearer token
 * authenticator reads it: blanks trimmed, the scheme case-insensitive, the token
 * the second space-separated word. NULL when there is none. Returns a new string.
 */
static char *bearer_token(const char *h)
{
	if (h == NULL)
		return NULL;
	while (*h == ' ' || *h == '\t')
		h++;
	if (strncasecmp(h, "bearer ", 7) != 0)
		return NULL;
	const char *t = h + 7;
	size_t n = strcspn(t, " ");
	while (n > 0 && (t[n - 1] == '\t' || t[n - 1] == '\r' || t[n - 1] == '\n'))
		n--;
	return n ? ck_xstrndup(t, n) : NULL;
}

/* The authorization cache key: every field the review sends, unambiguously framed. */
static void access_key(const ck_metrics_user_t *u, const char *path, const char *verb,
                       unsigned char *out)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_put_json_str(&b, u->name ? u->name : "");
	ck_sbuf_put_json_str(&b, u->uid ? u->uid : "");
	for (size_t i = 0; i < u->ngroups; i++)
		ck_sbuf_put_json_str(&b, u->groups[i]);
	ck_sbuf_putc(&b, '|');
	ck_sbuf_puts(&b, u->extra_json ? u->extra_json : "");
	ck_sbuf_putc(&b, '|');
	ck_sbuf_put_json_str(&b, path);
	ck_sbuf_put_json_str(&b, verb);
	digest(b.data, b.len, out);
	ck_sbuf_free(&b);
}

int ck_metrics_i_auth_check(ck_metrics_auth_t *a, const char *header, const char *path,
                            const char *verb, ck_sbuf_t *body, int *retry_after)
{
	int status = 500;
	char *token = bearer_token(header);
	char *reason = NULL, *err = NULL;
	ck_metrics_user_t user = {0};
	unsigned char key[DIGEST_LEN];
	struct entry *e;
	int wait;

	*retry_after = 0;
	if (token == NULL) {
		CK_LOG_V(4, "Metrics request without a bearer token", CK_KV_STR("path", path));
		status = 401;
		goto out;
	}
	digest(token, strlen(token), key);
	int known = 0, yes = 0;
	pthread_mutex_lock(&a->mu);
	uint64_t now = ck_clk_mono_ns(a->clk);
	if ((e = table_find(&a->tokens_ok, key, now)) != NULL) {
		known = yes = 1;
		user_copy(&user, &e->user);
	} else if (table_find(&a->tokens_bad, key, now) != NULL) {
		known = 1;
	} else {
		/* An expired valid token is reviewed on the known bucket. */
		enum payer p = table_lookup(&a->tokens_ok, key) ? PAY_KNOWN : PAY_NEW;
		if ((wait = admit(a, p, "TokenReview")) > 0) {
			pthread_mutex_unlock(&a->mu);
			*retry_after = wait;
			status = 429;
			goto out;
		}
		a->nauthn++;
		if (a->m_authn != NULL)
			ck_metrics_counter_inc(a->m_authn);
	}
	pthread_mutex_unlock(&a->mu);
	if (!known) {
		int rc = a->r.authenticate(a->r.ud, token, &user, &reason, &err);
		if (rc == CK_METRICS_REVIEW_FAILED) {
			CK_LOG_ERROR(
			    err ? err : "review failed",
			    "Authentication failed: cannot review the metrics caller's token");
			ck_sbuf_puts(body, "Authentication failed\n");
			goto out;
		}
		yes = rc == CK_METRICS_REVIEW_YES;
		if (yes && user.name == NULL)
			user.name = ck_xstrdup("");
		ck_metrics_user_t cached = {0};
		if (yes)
			user_copy(&cached, &user);
		pthread_mutex_lock(&a->mu);
		now = ck_clk_mono_ns(a->clk);
		/* A token is in one table at most: a valid one that turned invalid no
		 * longer counts as known. */
		table_forget(yes ? &a->tokens_bad : &a->tokens_ok, key);
		table_put(a, yes ? &a->tokens_ok : &a->tokens_bad, key, yes, now + a->authn_ttl_ns,
		          yes ? &cached : NULL, now);
		pthread_mutex_unlock(&a->mu);
		ck_metrics_user_clear(&cached);
	}
	if (!yes) {
		CK_LOG_V(4, "Metrics request with an invalid bearer token",
		         CK_KV_STR("reason", reason ? reason : (known ? "cached" : "")));
		status = 401;
		goto out;
	}

	access_key(&user, path, verb, key);
	known = 0;
	pthread_mutex_lock(&a->mu);
	now = ck_clk_mono_ns(a->clk);
	if (table_find(&a->access_ok, key, now) != NULL) {
		known = yes = 1;
	} else if (table_find(&a->access_bad, key, now) != NULL) {
		known = 1;
		yes = 0;
	} else if ((wait = admit(a, PAY_KNOWN, "SubjectAccessReview")) > 0) {
		pthread_mutex_unlock(&a->mu);
		*retry_after = wait;
		status = 429;
		goto out;
	} else {
		a->nauthz++;
		if (a->m_authz != NULL)
			ck_metrics_counter_inc(a->m_authz);
	}
	pthread_mutex_unlock(&a->mu);
	if (!known) {
		free(reason);
		reason = NULL;
		int rc = a->r.authorize(a->r.ud, &user, path, verb, &reason, &err);
		if (rc == CK_METRICS_REVIEW_FAILED) {
			CK_LOG_ERROR(
			    err ? err : "review failed",
			    "Authorization failed: cannot review the metrics caller's access",
			    CK_KV_STR("user", user.name));
			ck_sbuf_printf(body, "Authorization for user %s failed\n", user.name);
			goto out;
		}
		yes = rc == CK_METRICS_REVIEW_YES;
		pthread_mutex_lock(&a->mu);
		now = ck_clk_mono_ns(a->clk);
		table_forget(yes ? &a->access_bad : &a->access_ok, key);
		table_put(a, yes ? &a->access_ok : &a->access_bad, key, yes,
		          now + (yes ? a->allow_ttl_ns : a->deny_ttl_ns), NULL, now);
		pthread_mutex_unlock(&a->mu);
	}
	if (!yes) {
		CK_LOG_V(4, "Metrics request denied", CK_KV_STR("user", user.name),
		         CK_KV_STR("reason", reason ? reason : (known ? "cached" : "")));
		ck_sbuf_printf(body, "Authorization denied for user %s\n", user.name);
		status = 403;
		goto out;
	}
	status = 200;
out:
	if (status == 401)
		ck_sbuf_puts(body, "Unauthorized\n");
	if (status == 429)
		ck_sbuf_puts(body, "Too many requests, please try again later.\n");
	ck_secret_free(token, 0);
	ck_metrics_user_clear(&user);
	free(reason);
	free(err);
	return status;
}
