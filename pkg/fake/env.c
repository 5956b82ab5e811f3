/*
 * env: a ready test environment on the fake -- a libev loop on a thread of its
 * own, a client of the fake and an informer factory on it -- so that a
 * controller's unit test needs no harness: it seeds the fake, starts informers,
 * calls its sync function with *_sync calls from its own thread, waits for the
 * informers to catch up (ck_fake_env_settle) and asserts on the fake.
 *
 * Design note. Everything that must run on the loop (creating the client and
 * the factory, informers, starting them, freeing) is handed to it with
 * ck_fake_env_run: a queue and an ev_async, the caller waiting on a condition
 * variable. The ev_async keeps the loop alive; freeing breaks it. Settling is
 * checked, not timed: the informers' stores are compared with the fake (same
 * keys, same resourceVersions), then one round trip through the loop makes
 * sure the handlers called with those changes have returned.
 */
#include "pkg/fake/fake_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct env_call {
	struct env_call *next;
	void (*fn)(void *ud);
	void *ud;
	bool done;
} env_call_t;

struct ck_fake_env {
	ck_fake_t *f;
	struct ev_loop *loop;
	pthread_t thread;
	ev_async wake;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	env_call_t *calls;
	ck_client_opts_t opts;
	bool has_opts;
	char *err;
	ck_client_t *client;
	ck_cache_factory_t *factory;
	ck_cache_informer_t **infs;
	const ck_type_t **types;
	size_t ninfs;
};

static void wake_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	ck_fake_env_t *env = (ck_fake_env_t *)((char *)w - offsetof(ck_fake_env_t, wake));
	for (;;) {
		pthread_mutex_lock(&env->mu);
		env_call_t *c = env->calls;
		if (c != NULL)
			env->calls = c->next;
		pthread_mutex_unlock(&env->mu);
		if (c == NULL)
			break;
		c->fn(c->ud);
		pthread_mutex_lock(&env->mu);
		c->done = true;
		pthread_cond_broadcast(&env->cond);
		pthread_mutex_unlock(&env->mu);
	}
}

static void *loop_main(void *ud)
{
	ck_fake_env_t *env = ud;
	ev_run(env->loop, 0);
	return NULL;
}

void ck_fake_env_run(ck_fake_env_t *env, void (*fn)(void *ud), void *ud)
{
	env_call_t c = {.fn = fn, .ud = ud};
	pthread_mutex_lock(&env->mu);
	env_call_t **pp = &env->calls;
	while (*pp != NULL)
		pp = &(*pp)->next;
	*pp = &c;
	pthread_mutex_unlock(&env->mu);
	ev_async_send(env->loop, &env->wake);
	pthread_mutex_lock(&env->mu);
	while (!c.done)
		pthread_cond_wait(&env->cond, &env->mu);
	pthread_mutex_unlock(&env->mu);
}

static void setup_on_loop(void *ud)
{
	ck_fake_env_t *env = ud;
	env->client =
	    ck_fake_client_new(env->f, env->loop, env->has_opts ? &env->opts : NULL, &env->err);
	if (env->client == NULL)
		return;
	env->factory = ck_cache_factory_new(env->loop, env->client, &(ck_cache_factory_opts_t){0});
}

static void teardown_on_loop(void *ud)
{
	ck_fake_env_t *env = ud;
	ck_cache_factory_free(env->factory);
	env->factory = NULL;
	ck_client_free(env->client);
	env->client = NULL;
	fake_transport_detach(env->f);
	ev_async_stop(env->loop, &env->wake);
	ev_break(env->loop, EVBREAK_ALL);
}

ck_fake_env_t *ck_fake_env_new(ck_fake_t *f, const ck_client_opts_t *o, char **err)
{
	ck_fake_env_t *env = ck_xcalloc(1, sizeof(*env));
	env->f = f;
	if (o != NULL) {
		env->opts = *o;
		env->has_opts = true;
	}
	env->loop = ev_loop_new(EVFLAG_AUTO);
	if (env->loop == NULL) {
		free(env);
		ck_err_set(err, "fake env: ev_loop_new failed");
		return NULL;
	}
	pthread_mutex_init(&env->mu, NULL);
	pthread_cond_init(&env->cond, NULL);
	ev_async_init(&env->wake, wake_cb);
	ev_async_start(env->loop, &env->wake);
	int rc = pthread_create(&env->thread, NULL, loop_main, env);
	if (rc != 0) {
		ck_err_set(err, "fake env: pthread_create: %s", strerror(rc));
		ev_loop_destroy(env->loop);
		pthread_mutex_destroy(&env->mu);
		pthread_cond_destroy(&env->cond);
		free(env);
		return NULL;
	}
	/* The client is made on the loop's thread, which it records as its own. */
	ck_fake_env_run(env, setup_on_loop, env);
	if (env->client == NULL) {
		ck_err_set(err, "fake env: %s", env->err ? env->err : "no client");
		ck_fake_env_free(env);
		return NULL;
	}
	return env;
}

void ck_fake_env_free(ck_fake_env_t *env)
{
	if (env == NULL)
		return;
	ck_fake_env_run(env, teardown_on_loop, env);
	pthread_join(env->thread, NULL);
	ev_loop_destroy(env->loop);
	pthread_mutex_destroy(&env->mu);
	pthread_cond_destroy(&env->cond);
	free(env->infs);
	free(env->types);
	free(env->err);
	free(env);
}

ck_client_t *ck_fake_env_client(ck_fake_env_t *env)
{
	return env->client;
}

ck_cache_factory_t *ck_fake_env_factory(ck_fake_env_t *env)
{
	return env->factory;
}

struct ev_loop *ck_fake_env_loop(ck_fake_env_t *env)
{
	return env->loop;
}

typedef struct inf_call {
	ck_fake_env_t *env;
	const ck_type_t *t;
	ck_cache_informer_t *inf;
	char *err;
	int rc;
} inf_call_t;

static void informer_on_loop(void *ud)
{
	inf_call_t *c = ud;
	c->inf = ck_cache_factory_informer_err(c->env->factory, c->t, &c->err);
}

ck_cache_informer_t *ck_fake_env_informer(ck_fake_env_t *env, const ck_type_t *t, char **err)
{
	inf_call_t c = {.env = env, .t = t};
	ck_fake_env_run(env, informer_on_loop, &c);
	if (c.inf == NULL) {
		ck_err_set(err, "fake env: informer for %s: %s", t->resource, c.err ? c.err : "?");
		free(c.err);
		return NULL;
	}
	ck_fake_register(env->f, t);
	for (size_t i = 0; i < env->ninfs; i++)
		if (env->infs[i] == c.inf)
			return c.inf;
	env->infs = ck_xrealloc(env->infs, (env->ninfs + 1) * sizeof(*env->infs));
	env->types = ck_xrealloc(env->types, (env->ninfs + 1) * sizeof(*env->types));
	env->infs[env->ninfs] = c.inf;
	env->types[env->ninfs] = t;
	env->ninfs++;
	return c.inf;
}

static void start_on_loop(void *ud)
{
	inf_call_t *c = ud;
	c->rc = ck_cache_factory_start(c->env->factory, &c->err);
}

int ck_fake_env_start(ck_fake_env_t *env, int64_t timeout_ms, char **err)
{
	inf_call_t c = {.env = env};
	ck_fake_env_run(env, start_on_loop, &c);
	if (c.rc < 0) {
		ck_err_set(err, "fake env: starting the informers: %s", c.err ? c.err : "?");
		free(c.err);
		return -1;
	}
	char *reason = NULL;
	if (ck_cache_factory_wait_synced(env->factory, timeout_ms, &reason) < 0) {
		ck_err_set(err, "fake env: informers not synced: %s", reason ? reason : "?");
		free(reason);
		return -1;
	}
	return 0;
}

/* NULL when inf's store holds what f holds for t; else what differs (new string). */
static char *store_diff(ck_fake_t *f, ck_cache_informer_t *inf, const ck_type_t *t)
{
	char *diff = NULL;
	ck_cache_objs_t objs = {0};
	ck_cache_store_list(ck_cache_informer_store(inf), &objs);
	pthread_mutex_lock(&f->mu);
	fres_t *r = fake_res(f, t->group ? t->group : "", t->version, t->resource, false);
	size_t n = r ? r->n : 0;
	for (size_t i = 0; i < objs.n && diff == NULL; i++) {
		const ck_obj_t *o = objs.items[i];
		fobj_t *fo = r ? fake_find(r, o->ns, o->name, NULL) : NULL;
		if (fo == NULL)
			diff = ck_xasprintf("%s %s/%s is cached but gone from the fake",
			                    t->resource, o->ns, o->name);
		else if (strtoull(o->rv, NULL, 10) != fo->rv)
			diff =
			    ck_xasprintf("%s %s/%s is cached at resourceVersion %s, the fake has "
			                 "%" PRIu64,
			                 t->resource, o->ns, o->name, o->rv, fo->rv);
	}
	if (diff == NULL && objs.n != n)
		diff = ck_xasprintf("%s: %zu cached, %zu in the fake", t->resource, objs.n, n);
	pthread_mutex_unlock(&f->mu);
	ck_cache_objs_free(&objs);
	return diff;
}

static void noop(void *ud)
{
	(void)ud;
}

int ck_fake_env_settle(ck_fake_env_t *env, int64_t timeout_ms, char **err)
{
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (size_t i = 0; i < env->ninfs; i++) {
		for (;;) {
			char *diff = store_diff(env->f, env->infs[i], env->types[i]);
			if (diff == NULL)
				break;
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			int64_t ms = (now.tv_sec - start.tv_sec) * 1000 +
			             (now.tv_nsec - start.tv_nsec) / 1000000;
			if (timeout_ms >= 0 && ms > timeout_ms) {
				ck_err_set(
				    err, "fake env: informers not settled after %" PRId64 " ms: %s",
				    timeout_ms, diff);
				free(diff);
				return -1;
			}
			free(diff);
			nanosleep(&(struct timespec){0, 1000000}, NULL);
		}
	}
	/* The handlers of the last change ran in the same loop callback as its store
	 * write: one round trip through the loop waits for them to return. */
	ck_fake_env_run(env, noop, NULL);
	return 0;
}
