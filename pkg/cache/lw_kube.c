/*
 * lw_kube: the list/watch source on the real API server, a thin adapter from
 * the reflector's vtable to kclient_list / kclient_watch (same callback and
 * cancellation contract, so nothing to translate but the namespace).
 */
#include "pkg/cache/cache.h"

#include <stdlib.h>

typedef struct lw_kube {
	cache_lw_t base;
	kclient_t *c;
	const ktype_t *t;
	char *ns; /* NULL = all namespaces */
} lw_kube_t;

static cache_lw_req_t *kube_list(cache_lw_t *lw, const klist_opts_t *o, const kdec_cb_t *cb,
                                 kreq_done_cb done, void *ud, char **err)
{
	lw_kube_t *k = (lw_kube_t *)lw;
	return (cache_lw_req_t *)kclient_list(k->c, k->t, k->ns, o, cb, done, ud, err);
}

static cache_lw_req_t *kube_watch(cache_lw_t *lw, const klist_opts_t *o, const kdec_cb_t *cb,
                                  kreq_done_cb done, void *ud, char **err)
{
	lw_kube_t *k = (lw_kube_t *)lw;
	return (cache_lw_req_t *)kclient_watch(k->c, k->t, k->ns, o, cb, done, ud, err);
}

static void kube_cancel(cache_lw_t *lw, cache_lw_req_t *req)
{
	(void)lw;
	kreq_cancel((kreq_t *)req);
}

static void kube_free(cache_lw_t *lw)
{
	lw_kube_t *k = (lw_kube_t *)lw;
	free(k->ns);
	free(k);
}

static const cache_lw_ops_t kube_ops = {
    .list = kube_list,
    .watch = kube_watch,
    .cancel = kube_cancel,
    .free = kube_free,
};

cache_lw_t *cache_lw_kube_new(kclient_t *c, const ktype_t *t, const char *ns)
{
	lw_kube_t *k = xcalloc(1, sizeof(*k));
	k->base.ops = &kube_ops;
	k->c = c;
	k->t = t;
	k->ns = (ns != NULL && ns[0] != '\0') ? xstrdup(ns) : NULL;
	return &k->base;
}

void cache_lw_free(cache_lw_t *lw)
{
	if (lw != NULL)
		lw->ops->free(lw);
}
