/*
 * factory: one shared informer per resource (group/version/plural), all with
 * the factory's options (namespace, selectors, list-option tweak, transform),
 * and the start / wait-for-sync / shutdown of the lot.
 *
 * Sharing goes by what a descriptor names, not by its address: two modules that
 * each describe Pods get one watch and one cache. Two descriptors of one resource
 * that keep different fields cannot share (the cache would lack the other's
 * fields), and a second watch would double the API server's load unnoticed, so
 * the factory refuses the second one and says why.
 *
 * The informer list is only appended to (on the loop thread) and read by
 * waiters on other threads, so a mutex guards the array and waiters copy it
 * before blocking.
 *
 * With shard_parts, every informer the sharding can split caches the factory's
 * current parts, including an informer made after they were added. A
 * cluster-scoped resource sharded by namespace has nothing to split (every object's
 * namespace is ""): its informer caches it whole.
 */
#include <ckube/cache.h>

#include <ckube/log.h>
#include <ckube/types.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ck_cache_factory {
	struct ev_loop *loop;
	ck_client_t *c;
	ck_cache_factory_opts_t o; /* strings owned */
	pthread_mutex_t mu;
	ck_cache_informer_t **infs;
	size_t n;
	struct factory_part {
		uint32_t id;
		ck_shard_range_t range;
	} * parts; /* shard_parts: the current parts, loop thread */
	size_t nparts;
};

/* Whether t's informer is split into the factory's parts. */
static bool parted(const ck_cache_factory_t *f, const ck_type_t *t)
{
	return f->o.shard_parts && (t->namespaced || f->o.shard_field == CK_SHARD_UID);
}

/*
 * A list/watch source that hands every request's options through the factory's
 * tweak first (WithTweakListOptions): the reflector keeps its own selectors, the
 * tweak sees and changes a copy per request, as client-go's tweak does.
 */
typedef struct tweak_lw {
	ck_cache_lw_t base;
	ck_cache_lw_t *inner;
	void (*fn)(void *ud, ck_list_opts_t *o);
	void *ud;
} tweak_lw_t;

static ck_cache_lw_req_t *tw_list(ck_cache_lw_t *lw, const ck_list_opts_t *o, const ck_dec_cb_t *cb,
                                  ck_req_done_cb done, void *ud, char **err)
{
	tweak_lw_t *t = (tweak_lw_t *)lw;
	ck_list_opts_t copy = *o;
	t->fn(t->ud, &copy);
	/* The source reads the options during the call only (ck_cache_lw_ops_t). */
	// cppcheck-suppress returnDanglingLifetime
	return t->inner->ops->list(t->inner, &copy, cb, done, ud, err);
}

static ck_cache_lw_req_t *tw_watch(ck_cache_lw_t *lw, const ck_list_opts_t *o,
                                   const ck_dec_cb_t *cb, ck_req_done_cb done, void *ud, char **err)
{
	tweak_lw_t *t = (tweak_lw_t *)lw;
	ck_list_opts_t copy = *o;
	t->fn(t->ud, &copy);
	/* The source reads the options during the call only (ck_cache_lw_ops_t). */
	// cppcheck-suppress returnDanglingLifetime
	return t->inner->ops->watch(t->inner, &copy, cb, done, ud, err);
}

static void tw_cancel(ck_cache_lw_t *lw, ck_cache_lw_req_t *req)
{
	tweak_lw_t *t = (tweak_lw_t *)lw;
	t->inner->ops->cancel(t->inner, req);
}

static void tw_free(ck_cache_lw_t *lw)
{
	tweak_lw_t *t = (tweak_lw_t *)lw;
	ck_cache_lw_free(t->inner);
	free(t);
}

static const ck_cache_lw_ops_t tweak_ops = {tw_list, tw_watch, tw_cancel, tw_free};

/* Takes inner. */
static ck_cache_lw_t *tweak_lw_new(ck_cache_lw_t *inner, const ck_cache_factory_opts_t *o)
{
	tweak_lw_t *t = ck_xcalloc(1, sizeof(*t));
	t->base.ops = &tweak_ops;
	/* A source that cannot stream a list stays one when wrapped. */
	t->base.no_watch_list = inner->no_watch_list;
	t->inner = inner;
	t->fn = o->tweak_list_opts;
	t->ud = o->tweak_ud;
	return &t->base;
}

static char *dup_or_null(const char *s)
{
	return s && s[0] ? ck_xstrdup(s) : NULL;
}

ck_cache_factory_t *ck_cache_factory_new(struct ev_loop *loop, ck_client_t *c,
                                         const ck_cache_factory_opts_t *o)
{
	ck_cache_factory_t *f = ck_xcalloc(1, sizeof(*f));
	f->loop = loop;
	f->c = c;
	if (o != NULL)
		f->o = *o;
	f->o.ns = dup_or_null(f->o.ns);
	f->o.label_selector = dup_or_null(f->o.label_selector);
	f->o.field_selector = dup_or_null(f->o.field_selector);
	f->o.shard_selector = ck_shard_selector_dup(f->o.shard_selector);
	pthread_mutex_init(&f->mu, NULL);
	return f;
}

void ck_cache_factory_free(ck_cache_factory_t *f)
{
	if (f == NULL)
		return;
	ck_cache_factory_shutdown(f);
	for (size_t i = 0; i < f->n; i++)
		ck_cache_informer_free(f->infs[i]);
	free(f->infs);
	free(f->parts);
	free((char *)f->o.ns);
	free((char *)f->o.label_selector);
	free((char *)f->o.field_selector);
	ck_shard_selector_free((ck_shard_selector_t *)f->o.shard_selector);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

static bool same_str(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

/* The key informers are shared by: the factory's own options are the rest of it. */
static bool same_resource(const ck_type_t *a, const ck_type_t *b)
{
	return same_str(a->group, b->group) && same_str(a->version, b->version) &&
	       same_str(a->resource, b->resource);
}

/* Why t cannot share have's informer (ck_type_equal(have, t) is false): a new string
 * naming the resource and the first difference, so the author finds which
 * descriptor to change. */
static char *mismatch(const ck_cache_informer_t *inf, const ck_type_t *t)
{
	const ck_type_t *have = ck_cache_informer_type(inf);
	const char *name = ck_cache_informer_name(inf);
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_printf(
	    &b, "%s: this factory already has an informer for it whose descriptor (kind %s) ", name,
	    have->kind);
	size_t n = have->nfields < t->nfields ? have->nfields : t->nfields;
	size_t i = 0;
	while (i < n && same_str(have->fields[i], t->fields[i]))
		i++;
	if (i < n)
		ck_sbuf_printf(&b,
		               "keeps \"%s\" as field %zu where this one (kind %s) keeps \"%s\"",
		               have->fields[i], i, t->kind, t->fields[i]);
	else if (have->nfields != t->nfields)
		ck_sbuf_printf(&b, "keeps %zu field%s where this one (kind %s) keeps %zu",
		               have->nfields, have->nfields == 1 ? "" : "s", t->kind, t->nfields);
	else if (have->keep_annotations != t->keep_annotations)
		ck_sbuf_printf(&b, "%s annotations where this one (kind %s) %s",
		               have->keep_annotations ? "keeps" : "drops", t->kind,
		               t->keep_annotations ? "keeps them" : "drops them");
	else
		ck_sbuf_printf(&b, "says %s (%s) where this one says %s (%s)",
		               have->namespaced ? "namespaced" : "cluster-scoped", have->kind,
		               t->namespaced ? "namespaced" : "cluster-scoped", t->kind);
	ck_sbuf_puts(&b, "; one cache cannot serve both: use one descriptor, or another factory");
	return ck_sbuf_steal(&b);
}

ck_cache_informer_t *ck_cache_factory_informer_err(ck_cache_factory_t *f, const ck_type_t *t,
                                                   char **err)
{
	ck_cache_informer_t *inf = NULL;
	char *why = NULL;
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->n; i++) {
		const ck_type_t *have = ck_cache_informer_type(f->infs[i]);
		if (have != t && !same_resource(have, t))
			continue;
		/* Sharing a cache whose objects lack fields this caller reads would make
		 * them look absent: refuse rather than hand out a quietly wrong cache. */
		if (ck_type_equal(have, t))
			inf = f->infs[i];
		else
			why = mismatch(f->infs[i], t);
		goto out;
	}
	ck_cache_lw_t *lw = NULL;
	if (f->o.lw_new != NULL)
		lw = f->o.lw_new(f->o.lw_ud, t, f->o.ns);
	else if (f->c != NULL)
		lw = ck_cache_lw_kube_new(f->c, t, f->o.ns);
	if (lw == NULL) {
		why = ck_xasprintf("%s: %s", t->resource,
		                   f->o.lw_new != NULL ? "lw_new returned no list/watch source"
		                                       : "the factory has no client");
		goto out;
	}
	if (f->o.tweak_list_opts != NULL)
		lw = tweak_lw_new(lw, &f->o);
	ck_cache_informer_opts_t io = {
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
	    .consistency_check_ms = f->o.consistency_check_ms,
	    .transform = f->o.transform,
	    .transform_ud = f->o.transform_ud,
	    .shard_selector = f->o.shard_selector,
	    .shard_parts = parted(f, t),
	    .shard_field = f->o.shard_field,
	};
	inf = ck_cache_informer_new(f->loop, t, lw, &io);
	for (size_t i = 0; io.shard_parts && i < f->nparts; i++)
		(void)ck_cache_informer_add_part(inf, f->parts[i].id, f->parts[i].range, NULL);
	f->infs = ck_xrealloc(f->infs, (f->n + 1) * sizeof(*f->infs));
	f->infs[f->n++] = inf;
out:
	pthread_mutex_unlock(&f->mu);
	if (why != NULL) {
		if (err != NULL)
			*err = why;
		else
			free(why);
	}
	return inf;
}

ck_cache_informer_t *ck_cache_factory_informer(ck_cache_factory_t *f, const ck_type_t *t)
{
	char *err = NULL;
	ck_cache_informer_t *inf = ck_cache_factory_informer_err(f, t, &err);
	if (inf == NULL)
		CK_LOG_ERROR(err, "Shared informer refused", CK_KV_STR("resource", t->resource),
		             CK_KV_STR("group", t->group ? t->group : ""));
	free(err);
	return inf;
}

/* A copy of the informer array, for use without the lock. */
static ck_cache_informer_t **snapshot(ck_cache_factory_t *f, size_t *n)
{
	pthread_mutex_lock(&f->mu);
	*n = f->n;
	ck_cache_informer_t **a = ck_xmalloc((f->n ? f->n : 1) * sizeof(*a));
	if (f->n > 0)
		memcpy(a, f->infs, f->n * sizeof(*a));
	pthread_mutex_unlock(&f->mu);
	return a;
}

int ck_cache_factory_start(ck_cache_factory_t *f, char **err)
{
	size_t n;
	ck_cache_informer_t **a = snapshot(f, &n);
	int result = 0;
	for (size_t i = 0; i < n && result == 0; i++)
		result = ck_cache_informer_start(a[i], err);
	free(a);
	return result;
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ck_cache_factory_wait_synced(ck_cache_factory_t *f, int64_t timeout_ms, char **reason)
{
	size_t n;
	ck_cache_informer_t **a = snapshot(f, &n);
	int64_t deadline = mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	ck_sbuf_t why = CK_SBUF_INIT;
	int result = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t left = timeout_ms < 0 ? -1 : deadline - mono_ms();
		if (timeout_ms >= 0 && left < 0)
			left = 0;
		char *r = NULL;
		if (ck_cache_informer_wait_synced(a[i], left, &r) == 0)
			continue;
		result = -1;
		free(r);
		/* The waiting time is the factory's, not this informer's share. */
		r = ck_cache_informer_sync_reason(a[i]);
		if (why.len > 0)
			ck_sbuf_puts(&why, "; ");
		ck_sbuf_puts(&why, r ? r : ck_cache_informer_name(a[i]));
		free(r);
	}
	free(a);
	if (result != 0 && reason != NULL)
		*reason = ck_xasprintf("caches not synced after %lld ms: %s", (long long)timeout_ms,
		                       ck_sbuf_cstr(&why));
	ck_sbuf_free(&why);
	return result;
}

char *ck_cache_factory_sync_reason(ck_cache_factory_t *f)
{
	size_t n;
	ck_cache_informer_t **a = snapshot(f, &n);
	ck_sbuf_t why = CK_SBUF_INIT;
	for (size_t i = 0; i < n; i++) {
		char *r = ck_cache_informer_sync_reason(a[i]);
		if (r == NULL)
			continue;
		if (why.len > 0)
			ck_sbuf_puts(&why, "; ");
		ck_sbuf_puts(&why, r);
		free(r);
	}
	free(a);
	if (why.len == 0) {
		ck_sbuf_free(&why);
		return NULL;
	}
	return ck_sbuf_steal(&why);
}

void ck_cache_factory_shutdown(ck_cache_factory_t *f)
{
	size_t n;
	ck_cache_informer_t **a = snapshot(f, &n);
	for (size_t i = 0; i < n; i++)
		ck_cache_informer_shutdown(a[i]);
	free(a);
}

int ck_cache_factory_add_part(ck_cache_factory_t *f, uint32_t id, ck_shard_range_t range,
                              char **err)
{
	if (!f->o.shard_parts)
		return ck_err_set(err, "cache: factory: add part %u: not made with shard_parts",
		                  id);
	for (size_t i = 0; i < f->nparts; i++)
		if (f->parts[i].id == id)
			return ck_err_set(err, "cache: factory: add part %u: already a part", id);
	size_t n;
	ck_cache_informer_t **a = snapshot(f, &n);
	int result = 0;
	for (size_t i = 0; i < n && result == 0; i++)
		if (parted(f, ck_cache_informer_type(a[i])))
			result = ck_cache_informer_add_part(a[i], id, range, err);
	if (result != 0) {
		/* All or none: the ones already given it let it go. */
		for (size_t i = 0; i < n; i++)
			ck_cache_informer_remove_part(a[i], id);
	} else {
		f->parts = ck_xrealloc(f->parts, (f->nparts + 1) * sizeof(*f->parts));
		f->parts[f->nparts++] = (struct factory_part){id, range};
	}
	free(a);
	return result;
}

void ck_cache_factory_remove_part(ck_cache_factory_t *f, uint32_t id)
{
	for (size_t i = 0; i < f->nparts; i++) {
		if (f->parts[i].id != id)
			continue;
		f->parts[i] = f->parts[--f->nparts];
		size_t n;
		ck_cache_informer_t **a = snapshot(f, &n);
		for (size_t k = 0; k < n; k++)
			ck_cache_informer_remove_part(a[k], id);
		free(a);
		return;
	}
}

bool ck_cache_factory_part_synced(ck_cache_factory_t *f, uint32_t id)
{
	size_t n;
	ck_cache_informer_t **a = snapshot(f, &n);
	bool synced = true;
	for (size_t i = 0; i < n && synced; i++)
		if (parted(f, ck_cache_informer_type(a[i])))
			synced = ck_cache_informer_part_synced(a[i], id);
	free(a);
	return synced;
}
