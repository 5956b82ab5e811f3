/*
 * ck_envtest_eventually and ck_envtest_get_eventually: a test waits for its
 * controller's effect by polling, as gomega's Eventually does.
 */
#include <stdlib.h>

#include <ckube/base.h>
#include <ckube/client.h>
#include <ckube/envtest.h>

#include "pkg/envtest/envtest_internal.h"

/* Between two tries: a reconcile takes milliseconds, a GET about one. */
#define POLL_MS 100

int ck_envtest_eventually(uint32_t timeout_ms, bool (*cond)(void *ud, char **why), void *ud,
                          char **err)
{
	uint64_t deadline = ck_envtest_i_now_ms() + timeout_ms;
	char *why = NULL;
	for (;;) {
		free(why);
		why = NULL;
		if (cond(ud, &why)) {
			free(why);
			return 0;
		}
		if (ck_envtest_i_now_ms() >= deadline)
			break;
		ck_envtest_i_sleep_ms(POLL_MS);
	}
	*err = ck_xasprintf("not within %u ms: %s", (unsigned)timeout_ms,
	                    why != NULL ? why : "the condition was false");
	free(why);
	return -1;
}

typedef struct get_until {
	ck_client_t *c;
	const ck_type_t *t;
	const char *ns, *name;
	bool (*pred)(void *ud, const ck_obj_t *obj);
	void *ud;
} get_until_t;

static bool get_holds(void *ud, char **why)
{
	get_until_t *g = ud;
	ck_result_t res = {0};
	bool ok = false;
	if (ck_client_get_sync(g->c, g->t, g->ns, g->name, &res) != 0)
		*why = ck_xstrdup(res.error != NULL ? res.error : "the GET failed");
	else if (g->pred != NULL && !g->pred(g->ud, res.obj))
		*why = ck_xstrdup("the predicate was false");
	else
		ok = true;
	ck_result_clear(&res);
	return ok;
}

int ck_envtest_get_eventually(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                              bool (*pred)(void *ud, const ck_obj_t *obj), void *ud,
                              uint32_t timeout_ms, char **err)
{
	get_until_t g = {.c = c, .t = t, .ns = ns, .name = name, .pred = pred, .ud = ud};
	char *why = NULL;
	if (ck_envtest_eventually(timeout_ms, get_holds, &g, &why) == 0)
		return 0;
	bool scoped = ns != NULL && ns[0] != '\0';
	*err =
	    ck_xasprintf("%s %s%s%s: %s", t->kind, scoped ? ns : "", scoped ? "/" : "", name, why);
	free(why);
	return -1;
}
