/*
 * it.h - the integration suites' one loop harness: the client's loop runs
 * on the test's own thread while the test body runs on a worker, because
 * the *_sync calls block until the loop thread completes them.
 * Header-only and static: each suite is one translation unit.
 */
#ifndef CKUBE_TESTS_INTEGRATION_IT_H
#define CKUBE_TESTS_INTEGRATION_IT_H

#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>

typedef struct it_until {
	ev_timer tick;
	atomic_int *flag;
} it_until_t;

static void it_until_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	it_until_t *u = (it_until_t *)w;
	if (atomic_load(u->flag))
		ev_break(loop, EVBREAK_ONE);
}

/* Clears *done, runs fn(arg) on a worker thread and this thread's loop until
 * fn sets *done, then joins the worker. Borrows everything. */
static inline void it_loop_until(struct ev_loop *loop, atomic_int *done, void *(*fn)(void *),
                                 void *arg)
{
	pthread_t th;
	atomic_store(done, 0);
	pthread_create(&th, NULL, fn, arg);
	it_until_t u = {.flag = done};
	ev_timer_init(&u.tick, it_until_cb, 0.01, 0.01);
	ev_timer_start(loop, &u.tick);
	ev_run(loop, 0);
	ev_timer_stop(loop, &u.tick);
	pthread_join(th, NULL);
}

#endif
