/*
 * consistency: an informer's periodic self-check against the API server.
 *
 * Design note. A cache that silently diverges from the server (a lost event, a
 * bug in relist handling, a proxy that replays a stream) is the worst failure an
 * informer can have: every decision made from it is wrong and nothing says so.
 * client-go has a detector for this only in tests (it panics); here it is an
 * opt-in production check that reports and never touches the store.
 *
 * Comparing a store with a list is only meaningful at one resourceVersion. The
 * check waits for a moment when every event the reflector received has been
 * applied (nothing queued): the store is then exactly the server's state at the
 * reflector's last resourceVersion R (a bookmark moves R without changing
 * anything, which keeps it true). It snapshots (key, resourceVersion) of every
 * object at that moment, and lists with resourceVersion=R and
 * resourceVersionMatch=Exact, in pages, with the informer's own selectors: the
 * server answers with the state at R whatever happened since. Keys and
 * resourceVersions are compared: missing (on the server, not cached), extra
 * (cached, not on the server), stale (both, another resourceVersion). A 410 means
 * R was compacted meanwhile; that round is skipped, not counted as divergence.
 *
 * Everything runs on the informer's loop thread; the counters are atomics read by
 * the metrics collector.
 */
#include "pkg/cache/internal.h"
#include <ckube/log.h>

#include <ev.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* How long to wait for a quiet moment (nothing queued) before skipping a round. */
#define QUIET_RETRY_S 0.1
#define QUIET_TRIES   100
#define PAGE_SIZE     500
#define SAMPLE_KEYS   5

struct cache_check {
	ck_cache_informer_t *inf;
	struct ev_loop *loop;
	ck_cache_lw_t *lw; /* borrowed: the informer's */
	char *name, *label_selector, *field_selector;
	ck_shard_selector_t *shard;
	double period_s;
	ev_timer timer;
	int tries;
	bool running; /* started and not stopped */

	/* The round in progress. */
	ck_cache_lw_req_t *req;
	bool inflight;
	uint64_t seq;
	char *rv;   /* the resourceVersion compared at */
	char *cont; /* the next page's token */
	cache_check_kv_t *snap, *got;
	size_t nsnap, ngot, capgot;

	_Atomic uint64_t n_checks, n_skipped, n_divergent_checks, last_divergent;
};

static void arm(cache_check_t *c, double after_s);

/* ---------------------------------------------------------------- comparison */

static void kv_free(cache_check_kv_t *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].rv);
	}
	free(kv);
}

static int kv_cmp(const void *a, const void *b)
{
	return strcmp(((const cache_check_kv_t *)a)->key, ((const cache_check_kv_t *)b)->key);
}

static void note(cache_check_diff_t *d, ck_sbuf_t *sample, const char *what, const char *key)
{
	size_t total = d->missing + d->extra + d->stale;
	if (total > SAMPLE_KEYS)
		return;
	if (total == SAMPLE_KEYS) {
		ck_sbuf_puts(sample, ", ...");
		return;
	}
	ck_sbuf_printf(sample, "%s%s %s", total > 1 ? ", " : "", what, key);
}

void cache_check_compare(cache_check_kv_t *cached, size_t nc, cache_check_kv_t *server, size_t ns,
                         cache_check_diff_t *out)
{
	memset(out, 0, sizeof(*out));
	/* qsort's array must not be NULL, even when empty (an empty list has none). */
	if (nc > 1)
		qsort(cached, nc, sizeof(*cached), kv_cmp);
	if (ns > 1)
		qsort(server, ns, sizeof(*server), kv_cmp);
	ck_sbuf_t sample = CK_SBUF_INIT;
	size_t i = 0, j = 0;
	while (i < nc || j < ns) {
		int c = i == nc ? 1 : j == ns ? -1 : strcmp(cached[i].key, server[j].key);
		if (c < 0) {
			out->extra++;
			note(out, &sample, "extra", cached[i].key);
			i++;
		} else if (c > 0) {
			out->missing++;
			note(out, &sample, "missing", server[j].key);
			j++;
		} else {
			if (strcmp(cached[i].rv, server[j].rv) != 0) {
				out->stale++;
				note(out, &sample, "stale", cached[i].key);
			}
			i++;
			j++;
		}
	}
	out->sample = ck_sbuf_steal(&sample);
}

/* ---------------------------------------------------------------- one round */

static void end_round(cache_check_t *c)
{
	kv_free(c->snap, c->nsnap);
	kv_free(c->got, c->ngot);
	c->snap = c->got = NULL;
	c->nsnap = c->ngot = c->capgot = 0;
	free(c->rv);
	free(c->cont);
	c->rv = c->cont = NULL;
	c->req = NULL;
	c->inflight = false;
	if (c->running)
		arm(c, c->period_s);
}

static void on_item(void *ud, ck_obj_t *obj)
{
	cache_check_t *c = ud;
	if (obj == NULL)
		return;
	/* The store holds the selector's objects only, whoever filtered them. */
	if (c->shard != NULL && !ck_shard_selector_match(c->shard, obj)) {
		ck_obj_unref(obj);
		return;
	}
	if (c->ngot == c->capgot) {
		c->capgot = c->capgot ? c->capgot * 2 : 256;
		c->got = ck_xrealloc(c->got, c->capgot * sizeof(*c->got));
	}
	c->got[c->ngot].key = ck_obj_key_dup(obj);
	c->got[c->ngot].rv = ck_xstrdup(obj->rv);
	c->ngot++;
	ck_obj_unref(obj);
}

static void on_meta(void *ud, const char *rv, const char *cont, int64_t remaining)
{
	cache_check_t *c = ud;
	(void)rv;
	(void)remaining;
	free(c->cont);
	c->cont = cont != NULL && cont[0] != '\0' ? ck_xstrdup(cont) : NULL;
}

static const ck_dec_cb_t list_cb = {.on_object = on_item, .on_list_meta = on_meta};

static void list_done(void *ud, ck_result_t *res);

static void request_page(cache_check_t *c)
{
	ck_list_opts_t o = {
	    .label_selector = c->label_selector,
	    .field_selector = c->field_selector,
	    .shard_selector = c->shard ? ck_shard_selector_string(c->shard) : NULL,
	    .limit = PAGE_SIZE,
	};
	char *cont = c->cont;
	c->cont = NULL;
	if (cont != NULL) {
		o.continue_token = cont; /* carries the resourceVersion of the first page */
	} else {
		o.resource_version = c->rv;
		o.resource_version_match = "Exact";
	}
	char *err = NULL;
	uint64_t seq = ++c->seq;
	c->inflight = true;
	ck_cache_lw_req_t *h = c->lw->ops->list(c->lw, &o, &list_cb, list_done, c, &err);
	free(cont);
	if (h == NULL) {
		CK_LOG_WARN("Cache consistency check could not list",
		            CK_KV_STR("resource", c->name), CK_KV_ERR(err));
		free(err);
		atomic_fetch_add(&c->n_skipped, 1);
		end_round(c);
		return;
	}
	if (c->seq == seq && c->inflight)
		c->req = h;
}

static void report(cache_check_t *c)
{
	cache_check_diff_t d;
	cache_check_compare(c->snap, c->nsnap, c->got, c->ngot, &d);
	size_t bad = d.missing + d.extra + d.stale;
	atomic_fetch_add(&c->n_checks, 1);
	atomic_store(&c->last_divergent, bad);
	if (bad == 0) {
		CK_LOG_V(3, "Cache consistent with the server", CK_KV_STR("resource", c->name),
		         CK_KV_STR("resourceVersion", c->rv), CK_KV_UINT("objects", c->nsnap));
	} else {
		atomic_fetch_add(&c->n_divergent_checks, 1);
		CK_LOG_WARN("Cache diverges from the server", CK_KV_STR("resource", c->name),
		            CK_KV_STR("resourceVersion", c->rv), CK_KV_UINT("missing", d.missing),
		            CK_KV_UINT("extra", d.extra), CK_KV_UINT("stale", d.stale),
		            CK_KV_STR("examples", d.sample));
	}
	free(d.sample);
}

static void list_done(void *ud, ck_result_t *res)
{
	cache_check_t *c = ud;
	c->inflight = false;
	c->req = NULL;
	if (ck_result_ok(res)) {
		if (c->cont != NULL) {
			request_page(c);
			return;
		}
		report(c);
	} else if (ck_result_is_gone(res)) {
		/* Compacted since the snapshot: nothing to compare at that version. */
		CK_LOG_V(2, "Cache consistency check skipped: resourceVersion compacted",
		         CK_KV_STR("resource", c->name), CK_KV_STR("resourceVersion", c->rv));
		atomic_fetch_add(&c->n_skipped, 1);
	} else {
		CK_LOG_WARN("Cache consistency check failed to list",
		            CK_KV_STR("resource", c->name), CK_KV_STR("error", res->error));
		atomic_fetch_add(&c->n_skipped, 1);
	}
	end_round(c);
}

static void snap_one(void *ud, ck_obj_t *obj)
{
	cache_check_t *c = ud;
	c->snap[c->nsnap].key = ck_obj_key_dup(obj);
	c->snap[c->nsnap].rv = ck_xstrdup(obj->rv);
	c->nsnap++;
}

/* Starts a round if the store is at a known resourceVersion now; true if started. */
static bool try_begin(cache_check_t *c)
{
	ck_cache_informer_t *inf = c->inf;
	const char *rv = cache_reflector_last_rv(cache_informer_reflector(inf));
	if (!ck_cache_informer_has_synced(inf) || cache_informer_pending(inf) > 0 || rv[0] == '\0')
		return false;
	ck_cache_store_t *s = ck_cache_informer_store(inf);
	c->snap = ck_xcalloc(ck_cache_store_len(s) + 1, sizeof(*c->snap));
	c->nsnap = 0;
	cache_store_foreach_nolock(s, snap_one, c);
	c->rv = ck_xstrdup(rv);
	request_page(c);
	return true;
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	cache_check_t *c = w->data;
	/* The one-shot timer has stopped itself: undo arm()'s ev_unref (libev's rule for
	 * an unreferenced watcher that stops). */
	ev_ref(c->loop);
	if (c->inflight || c->snap != NULL)
		return;
	if (try_begin(c)) {
		c->tries = 0;
		return;
	}
	if (++c->tries < QUIET_TRIES) {
		arm(c, QUIET_RETRY_S);
		return;
	}
	c->tries = 0;
	CK_LOG_V(2, "Cache consistency check skipped: never quiet, or not synced",
	         CK_KV_STR("resource", c->name));
	atomic_fetch_add(&c->n_skipped, 1);
	arm(c, c->period_s);
}

static void arm(cache_check_t *c, double after_s)
{
	if (ev_is_active(&c->timer)) {
		ev_ref(c->loop);
		ev_timer_stop(c->loop, &c->timer);
	}
	ev_timer_set(&c->timer, after_s, 0.0);
	ev_timer_start(c->loop, &c->timer);
	/* The check alone must not keep the loop running. */
	ev_unref(c->loop);
}

/* ---------------------------------------------------------------- public (internal) */

static char *dup_or_null(const char *s)
{
	return s != NULL && s[0] != '\0' ? ck_xstrdup(s) : NULL;
}

cache_check_t *cache_check_new(ck_cache_informer_t *inf, struct ev_loop *loop, ck_cache_lw_t *lw,
                               const char *label_selector, const char *field_selector,
                               const ck_shard_selector_t *shard, uint64_t period_ms)
{
	cache_check_t *c = ck_xcalloc(1, sizeof(*c));
	c->inf = inf;
	c->loop = loop;
	c->lw = lw;
	c->name = ck_xstrdup(ck_cache_informer_name(inf));
	c->label_selector = dup_or_null(label_selector);
	c->field_selector = dup_or_null(field_selector);
	c->shard = ck_shard_selector_dup(shard);
	c->period_s = (double)period_ms / 1000.0;
	ev_timer_init(&c->timer, timer_cb, 0.0, 0.0);
	c->timer.data = c;
	return c;
}

void cache_check_start(cache_check_t *c)
{
	if (c == NULL || c->running)
		return;
	c->running = true;
	arm(c, c->period_s);
}

bool cache_check_run_now(cache_check_t *c)
{
	if (c->inflight || c->snap != NULL)
		return false;
	return try_begin(c);
}

void cache_check_stop(cache_check_t *c)
{
	if (c == NULL)
		return;
	if (ev_is_active(&c->timer)) {
		ev_ref(c->loop);
		ev_timer_stop(c->loop, &c->timer);
	}
	c->running = false;
	if (c->inflight && c->req != NULL)
		c->lw->ops->cancel(c->lw, c->req);
	if (c->inflight || c->snap != NULL)
		end_round(c);
}

void cache_check_free(cache_check_t *c)
{
	if (c == NULL)
		return;
	cache_check_stop(c);
	free(c->name);
	free(c->label_selector);
	free(c->field_selector);
	ck_shard_selector_free(c->shard);
	free(c);
}

void cache_check_stats(const cache_check_t *c, cache_check_stats_t *out)
{
	memset(out, 0, sizeof(*out));
	if (c == NULL)
		return;
	cache_check_t *m = (cache_check_t *)(uintptr_t)c;
	out->checks = atomic_load(&m->n_checks);
	out->skipped = atomic_load(&m->n_skipped);
	out->divergent_checks = atomic_load(&m->n_divergent_checks);
	out->last_divergent = atomic_load(&m->last_divergent);
}
