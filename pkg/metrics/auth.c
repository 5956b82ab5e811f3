/*
 * auth: the secure metrics server's gate, as controller-runtime's
 * filters.WithAuthenticationAndAuthorization: the bearer token is authenticated
 * (TokenReview), then the user is authorized for the path and verb
 * (SubjectAccessReview), both through an injectable reviewer, both cached the way
 * k8s.io/apiserver's delegating authenticator and authorizer cache them.
 *
 * Design note. Two bounded tables keyed by SHA-256 digests, so that no token is
 * kept in memory once reviewed: one of tokens (the user they name, or "invalid"),
 * one of (user, groups, uid, extra, path, verb) requests (allowed or denied).
 * Lookups are linear: a metrics endpoint has a handful of scrapers, and at most
 * max_cached entries each; when full, the expired entries go first, then the one
 * that would expire soonest. Failed reviews are not cached, as in the apiserver:
 * the next scrape asks again. The lock is never held during a review, so two
 * concurrent misses for the same token may both ask; the later answer wins.
 */
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

struct ck_metrics_auth {
	ck_metrics_reviewer_t r;
	uint64_t authn_ttl_ns, allow_ttl_ns, deny_ttl_ns;
	size_t max;
	const ck_clk_t *clk;
	pthread_mutex_t mu; /* the tables and the counts */
	struct table tokens, access;
	unsigned long nauthn, nauthz;
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

ck_metrics_auth_t *ck_metrics_i_auth_new(const ck_metrics_secure_opts_t *o)
{
	ck_metrics_auth_t *a = ck_xcalloc(1, sizeof(*a));
	a->r = *o->reviewer;
	/* controller-runtime's figures (pkg/metrics/filters), not the apiserver's 10 s. */
	a->authn_ttl_ns = ms_or(o->authn_ttl_ms, 60 * 1000);
	a->allow_ttl_ns = ms_or(o->allow_ttl_ms, 5 * 60 * 1000);
	a->deny_ttl_ns = ms_or(o->deny_ttl_ms, 30 * 1000);
	a->max = o->max_cached ? o->max_cached : 1024;
	a->clk = o->clock ? o->clock : ck_clk_real();
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
	table_free(&a->tokens);
	table_free(&a->access);
	pthread_mutex_destroy(&a->mu);
	free(a);
}

void ck_metrics_i_auth_counts(ck_metrics_auth_t *a, unsigned long *authn, unsigned long *authz)
{
	pthread_mutex_lock(&a->mu);
	*authn = a->nauthn;
	*authz = a->nauthz;
	pthread_mutex_unlock(&a->mu);
}

/* The live entry for key, or NULL. Lock held. */
static struct entry *table_find(struct table *t, const unsigned char *key, uint64_t now)
{
	for (size_t i = 0; i < t->n; i++)
		if (memcmp(t->e[i].key, key, DIGEST_LEN) == 0)
			return t->e[i].expires_ns > now ? &t->e[i] : NULL;
	return NULL;
}

static void table_drop(struct table *t, size_t i)
{
	ck_metrics_user_clear(&t->e[i].user);
	t->e[i] = t->e[--t->n];
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
                            const char *verb, ck_sbuf_t *body)
{
	int status = 500;
	char *token = bearer_token(header);
	char *reason = NULL, *err = NULL;
	ck_metrics_user_t user = {0};
	unsigned char key[DIGEST_LEN];
	struct entry *e;

	if (token == NULL) {
		CK_LOG_V(4, "Metrics request without a bearer token", CK_KV_STR("path", path));
		status = 401;
		goto out;
	}
	digest(token, strlen(token), key);
	int known = 0, yes = 0;
	pthread_mutex_lock(&a->mu);
	e = table_find(&a->tokens, key, ck_clk_mono_ns(a->clk));
	if (e != NULL) {
		known = 1;
		yes = e->yes;
		if (yes)
			user_copy(&user, &e->user);
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
		uint64_t now = ck_clk_mono_ns(a->clk);
		ck_metrics_user_t cached = {0};
		if (yes)
			user_copy(&cached, &user);
		pthread_mutex_lock(&a->mu);
		a->nauthn++;
		table_put(a, &a->tokens, key, yes, now + a->authn_ttl_ns, yes ? &cached : NULL,
		          now);
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
	e = table_find(&a->access, key, ck_clk_mono_ns(a->clk));
	if (e != NULL) {
		known = 1;
		yes = e->yes;
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
		uint64_t now = ck_clk_mono_ns(a->clk);
		pthread_mutex_lock(&a->mu);
		a->nauthz++;
		table_put(a, &a->access, key, yes, now + (yes ? a->allow_ttl_ns : a->deny_ttl_ns),
		          NULL, now);
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
	if (token != NULL) {
		memset(token, 0, strlen(token));
		free(token);
	}
	ck_metrics_user_clear(&user);
	free(reason);
	free(err);
	return status;
}
