/*
 * factory: one shared informer per kind, all with the factory's options, and
 * the start / wait-for-sync / shutdown of the lot.
 *
 * The informer list is only appended to (on the loop thread) and read by
 * waiters on other threads, so a mutex guards the array and waiters copy it
 * before blocking.
 */
#include "pkg/cache/cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct cache_factory {
	struct ev_loop *loop;
	kclient_t *c;
	cache_factory_opts_t o; /* strings owned */
	pthread_mutex_t mu;
	cache_informer_t **infs;
	size_t n;
};

static char *dup_or_null(const char *s)
{
	return s && s[0] ? xstrdup(s) : NULL;
}

cache_factory_t *cache_factory_new(struct ev_loop *loop, kclient_t *c,
                                   const cache_factory_opts_t *o)
{
	cache_factory_t *f = xcalloc(1, sizeof(*f));
	f->loop = loop;
	f->c = c;
	if (o != NULL)
		f->o = *o;
	f->o.ns = dup_or_null(f->o.ns);
	f->o.label_selector = dup_or_null(f->o.label_selector);
	f->o.field_selector = dup_or_null(f->o.field_selector);
	pthread_mutex_init(&f->mu, NULL);
	return f;
}

void cache_factory_free(cache_factory_t *f)
{
	if (f == NULL)
		return;
	cache_factory_shutdown(f);
	for (size_t i = 0; i < f->n; i++)
		cache_informer_free(f->infs[i]);
	free(f->infs);
	free((char *)f->o.ns);
	free((char *)f->o.label_selector);
	free((char *)f->o.field_selector);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

cache_informer_t *cache_factory_informer(cache_factory_t *f, const ktype_t *t)
{
	cache_informer_t *inf = NULL;
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->n; i++) {
		if (cache_informer_type(f->infs[i]) == t) {
			inf = f->infs[i];
			goto out;
		}
	}
	cache_lw_t *lw = NULL;
	if (f->o.lw_new != NULL)
		lw = f->o.lw_new(f->o.lw_ud, t, f->o.ns);
	else if (f->c != NULL)
		lw = cache_lw_kube_new(f->c, t, f->o.ns);
	if (lw == NULL)
		goto out;
	cache_informer_opts_t io = {
	    .label_selector = f->o.label_selector,
	    .field_selector = f->o.field_selector,
	    .default_resync_ms = f->o.default_resync_ms,
	    .streaming_list = f->o.streaming_list,
	    .on_watch_error = f->o.on_watch_error,
	    .watch_error_ud = f->o.watch_error_ud,
	    .clock = f->o.clock,
	    .backoff_initial_ms = f->o.backoff_initial_ms,
	    .backoff_max_ms = f->o.backoff_max_ms,
	    .stall_margin_ms = f->o.stall_margin_ms,
	};
	inf = cache_informer_new(f->loop, t, lw, &io);
	f->infs = xrealloc(f->infs, (f->n + 1) * sizeof(*f->infs));
	f->infs[f->n++] = inf;
out:
	pthread_mutex_unlock(&f->mu);
	return inf;
}

/* A copy of the informer array, for use without the lock. */
static cache_informer_t **snapshot(cache_factory_t *f, size_t *n)
{
	pthread_mutex_lock(&f->mu);
	*n = f->n;
	cache_informer_t **a = xmalloc((f->n ? f->n : 1) * sizeof(*a));
	if (f->n > 0)
		memcpy(a, f->infs, f->n * sizeof(*a));
	pthread_mutex_unlock(&f->mu);
	return a;
}

int cache_factory_start(cache_factory_t *f, char **err)
{
	size_t n;
	cache_informer_t **a = snapshot(f, &n);
	int result = 0;
	for (size_t i = 0; i < n && result == 0; i++)
		result = cache_informer_start(a[i], err);
	free(a);
	return result;
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cache_factory_wait_synced(cache_factory_t *f, int64_t timeout_ms, char **reason)
{
	size_t n;
	cache_informer_t **a = snapshot(f, &n);
	int64_t deadline = mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	sbuf_t why = SBUF_INIT;
	int result = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t left = timeout_ms < 0 ? -1 : deadline - mono_ms();
		if (timeout_ms >= 0 && left < 0)
			left = 0;
		char *r = NULL;
		if (cache_informer_wait_synced(a[i], left, &r) == 0)
			continue;
		result = -1;
		free(r);
		/* The waiting time is the factory's, not this informer's share. */
		r = cache_informer_sync_reason(a[i]);
		if (why.len > 0)
			sbuf_puts(&why, "; ");
		sbuf_puts(&why, r ? r : cache_informer_name(a[i]));
		free(r);
	}
	free(a);
	if (result != 0 && reason != NULL)
		*reason = xasprintf("caches not synced after %lld ms: %s", (long long)timeout_ms,
		                    sbuf_cstr(&why));
	sbuf_free(&why);
	return result;
}

char *cache_factory_sync_reason(cache_factory_t *f)
{
	size_t n;
	cache_informer_t **a = snapshot(f, &n);
	sbuf_t why = SBUF_INIT;
	for (size_t i = 0; i < n; i++) {
		char *r = cache_informer_sync_reason(a[i]);
		if (r == NULL)
			continue;
		if (why.len > 0)
			sbuf_puts(&why, "; ");
		sbuf_puts(&why, r);
		free(r);
	}
	free(a);
	if (why.len == 0) {
		sbuf_free(&why);
		return NULL;
	}
	return sbuf_steal(&why);
}

void cache_factory_shutdown(cache_factory_t *f)
{
	size_t n;
	cache_informer_t **a = snapshot(f, &n);
	for (size_t i = 0; i < n; i++)
		cache_informer_shutdown(a[i]);
	free(a);
}
