/*
 * client_sync: blocking calls from worker threads. A worker's call is queued for
 * the loop thread, which starts it as a request; the worker sleeps until the loop
 * fills its result. Separate because it is the only code in the client that runs
 * on threads other than the loop's, and the only user of the client's mutex
 * besides ck_client_free.
 *
 * Design note. Worker threads hand requests over through a mutex-protected queue
 * and an ev_async, and sleep on a condition variable of their own until the loop
 * fills their result. ck_client_free completes whatever is still pending with an
 * error and waits for the sleepers to leave before the mutex goes away.
 */
#include "pkg/rest/client_internal.h"

#include <stdlib.h>
#include <string.h>

/* Moves a finished worker's result over and wakes the worker. */
void ck_client_i_sync_complete(ck_client_t *c, sync_call_t *call, ck_result_t *res)
{
	pthread_mutex_lock(&c->mu);
	*call->res = *res;
	memset(res, 0, sizeof(*res));
	call->done = true;
	pthread_cond_signal(&call->cond);
	pthread_mutex_unlock(&c->mu);
}

void ck_client_i_sync_fail(ck_client_t *c, sync_call_t *call, const char *msg)
{
	ck_result_t res = {0};
	res.error = ck_xstrdup(msg);
	ck_client_i_sync_complete(c, call, &res);
}

/* ---------------------------------------------------------------- threads */

void ck_client_i_prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	ck_client_t *c = (ck_client_t *)((char *)w - offsetof(ck_client_t, prepare));
	atomic_store(&c->loop_tid, gettid());
}

/* Workers queued requests: start them on the loop. */
void ck_client_i_async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	ck_client_t *c = (ck_client_t *)((char *)w - offsetof(ck_client_t, async));
	atomic_store(&c->loop_tid, gettid());
	pthread_mutex_lock(&c->mu);
	sync_call_t *q = c->queue_head;
	c->queue_head = c->queue_tail = NULL;
	pthread_mutex_unlock(&c->mu);
	while (q != NULL) {
		sync_call_t *call = q;
		q = q->next;
		char *err = NULL;
		if (ck_client_i_request_start(c, call->spec, call->dcb, NULL, call->ud, call,
		                              &err) == NULL) {
			ck_client_i_sync_fail(c, call, err ? err : "request failed");
			free(err);
		}
	}
}

static int sync_run(ck_client_t *c, const ck_req_spec_t *spec, const ck_dec_cb_t *dcb, void *ud,
                    ck_result_t *res)
{
	if (atomic_load(&c->loop_tid) == gettid()) {
		res->error = ck_xasprintf("%s: a blocking client call was made on the client's "
		                          "loop thread (it would deadlock); use kclient_request",
		                          spec->method ? spec->method : "request");
		return -1;
	}
	sync_call_t call = {.spec = spec, .dcb = dcb, .ud = ud, .res = res};
	pthread_cond_init(&call.cond, NULL);
	pthread_mutex_lock(&c->mu);
	if (c->shutting_down) {
		pthread_mutex_unlock(&c->mu);
		pthread_cond_destroy(&call.cond);
		res->error = ck_xstrdup("client shutting down");
		return -1;
	}
	/* call lives on this stack until done: the loop unlinks it long before. */
	if (c->queue_tail)
		c->queue_tail->next = &call;
	else
		c->queue_head = &call; // cppcheck-suppress autoVariables
	c->queue_tail = &call;         // cppcheck-suppress autoVariables
	c->waiters++;
	ev_async_send(c->loop, &c->async);
	while (!call.done)
		pthread_cond_wait(&call.cond, &c->mu);
	c->waiters--;
	if (c->shutting_down && c->waiters == 0)
		pthread_cond_signal(&c->idle);
	pthread_mutex_unlock(&c->mu);
	pthread_cond_destroy(&call.cond);
	return res->error == NULL ? 0 : -1;
}

int ck_client_do_sync(ck_client_t *c, const ck_req_spec_t *spec, ck_result_t *res)
{
	return sync_run(c, spec, NULL, NULL, res);
}

int ck_client_do_sync_stream(ck_client_t *c, const ck_req_spec_t *spec, const ck_dec_cb_t *dcb,
                             void *ud, ck_result_t *res)
{
	return sync_run(c, spec, dcb, ud, res);
}
