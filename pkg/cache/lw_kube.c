/*
 * lw_kube: the list/watch source on the real API server, a thin adapter from
 * the reflector's vtable to ck_client_list / ck_client_watch (same callback and
 * cancellation contract, so nothing to translate but the namespace).
 */
#include <ckube/cache.h>

#include <stdlib.h>

typedef struct lw_kube {
	ck_cache_lw_t base;
	ck_client_t *c;
	const ck_type_t *t;
	char *ns; /* NULL = all namespaces */
} lw_kube_t;

static ck_cache_lw_req_t *kube_list(ck_cache_lw_t *lw, const ck_list_opts_t *o,
                                    const ck_dec_cb_t *cb, ck_req_done_cb done, void *ud,
                                    char **err)
{
	lw_kube_t *k = (lw_kube_t *)lw;
	return (ck_cache_lw_req_t *)ck_client_list(k->c, k->t, k->ns, o, cb, done, ud, err);
}

static ck_cache_lw_req_t *kube_watch(ck_cache_lw_t *lw, const ck_list_opts_t *o,
                                     const ck_dec_cb_t *cb, ck_req_done_cb done, void *ud,
                                     char **err)
{
	lw_kube_t *k = (lw_kube_t *)lw;
	return (ck_cache_lw_req_t *)ck_client_watch(k->c, k->t, k->ns, o, cb, done, ud, err);
}

static void kube_cancel(ck_cache_lw_t *lw, ck_cache_lw_req_t *req)
{
	(void)lw;
	ck_req_cancel((ck_req_t *)req);
}

static void kube_free(ck_cache_lw_t *lw)
{
	lw_kube_t *k = (lw_kube_t *)lw;
	free(k->ns);
	free(k);
}

static const ck_cache_lw_ops_t kube_ops = {
    .list = kube_list,
    .watch = kube_watch,
    .cancel = kube_cancel,
    .free = kube_free,
};

ck_cache_lw_t *ck_cache_lw_kube_new(ck_client_t *c, const ck_type_t *t, const char *ns)
{
	lw_kube_t *k = ck_xcalloc(1, sizeof(*k));
	k->base.ops = &kube_ops;
	k->c = c;
	k->t = t;
	k->ns = (ns != NULL && ns[0] != '\0') ? ck_xstrdup(ns) : NULL;
	return &k->base;
}

void ck_cache_lw_free(ck_cache_lw_t *lw)
{
	if (lw != NULL)
		lw->ops->free(lw);
}
