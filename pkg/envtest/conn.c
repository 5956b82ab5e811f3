/*
 * conn: a client whose libev loop runs on a thread of its own, so that envtest can
 * make blocking (_sync) calls from the caller's thread as a controller's workers
 * do. The client is made on the loop thread (it records that thread, which is how
 * a _sync call made there is refused) and freed there when the loop stops.
 */
#include <ev.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include <ckube/base.h>

#include "pkg/envtest/envtest_internal.h"

struct ck_envtest_conn {
	struct ev_loop *loop;
	ev_async stop; /* also keeps the loop running while idle */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool started; /* the thread made the client (or failed to) */
	ck_config_t *cfg;
	ck_client_t *client;
	char *err;
};

static void on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

static void *conn_main(void *arg)
{
	ck_envtest_conn_t *k = arg;
	/* The test's own requests come first: no client-side limit. */
	ck_client_opts_t o = {.qps = -1, .user_agent = "ckube-envtest"};
	ck_client_t *c = ck_client_new(k->loop, k->cfg, &o, &k->err);
	pthread_mutex_lock(&k->mu);
	k->client = c;
	k->started = true;
	pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->mu);
	if (c == NULL)
		return NULL;
	ev_run(k->loop, 0);
	ck_client_free(c);
	return NULL;
}

ck_envtest_conn_t *ck_envtest_i_conn_new(ck_config_t *cfg, char **err)
{
	ck_envtest_conn_t *k = ck_xcalloc(1, sizeof(*k));
	k->cfg = cfg;
	k->loop = ev_loop_new(EVFLAG_AUTO);
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	ev_async_init(&k->stop, on_stop);
	ev_async_start(k->loop, &k->stop);
	/* The thread takes no signal (it inherits the mask it is made with): a
	 * program's SIGTERM is for its own handling, such as a manager's sigtimedwait
	 * (manager.h), whereas this thread would die of it and the process with it. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&k->thread, NULL, conn_main, k);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		/* ck_client_new never ran to take it. */
		ck_config_free(cfg);
		ck_err_set(err, "envtest: starting the client's thread: error %d", rc);
		goto fail;
	}
	pthread_mutex_lock(&k->mu);
	while (!k->started)
		pthread_cond_wait(&k->cv, &k->mu);
	pthread_mutex_unlock(&k->mu);
	if (k->client != NULL)
		return k;
	pthread_join(k->thread, NULL);
	ck_err_set(err, "envtest: %s", k->err ? k->err : "cannot make a client");
fail:
	ev_loop_destroy(k->loop);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	free(k->err);
	free(k);
	return NULL;
}

ck_client_t *ck_envtest_i_conn_client(ck_envtest_conn_t *k)
{
	return k->client;
}

void ck_envtest_i_conn_free(ck_envtest_conn_t *k)
{
	if (k == NULL)
		return;
	ev_async_send(k->loop, &k->stop);
	pthread_join(k->thread, NULL);
	ev_loop_destroy(k->loop);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	free(k->err);
	free(k);
}
