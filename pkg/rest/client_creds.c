/*
 * client_creds: credentials for each attempt, the exec credential plugin's helper
 * thread, and the retry of a 401 with a fresh credential. Separate because it is
 * the one part of the client that waits on something other than the network (a
 * plugin may take seconds) and the one that handles secrets; the request lifecycle
 * only asks "a credential for this attempt?" and "retry this 401?".
 *
 * Design note. Credentials. A start asks the configuration for credentials without
 * blocking (ck_config_credentials_peek: cached exec output, token files, static
 * values). When the exec plugin must run (nothing cached, expired, or a 401 asked
 * for a new one), the request parks in CRED and one helper thread runs the plugin,
 * which may take seconds; every request that needs it meanwhile parks on that same
 * run. The helper ends with an ev_async; the loop joins it and puts the parked
 * requests back to WAIT, with the run's outcome. After a failed run the
 * configuration answers with that error for a backoff, so requests fail at once
 * instead of running the plugin once each. While a run is in progress its ev_async
 * is active, so the loop stays up for the parked requests; ck_client_free cancels
 * the run (the plugin is killed) and joins the helper.
 */
#include "pkg/rest/client_internal.h"

#include <ckube/log.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* --- the exec plugin, on a helper thread --- */

static void *exec_main(void *arg)
{
	ck_client_t *c = arg;
	char *err = NULL;
	/* Only this thread writes these until the loop has joined it. */
	c->exec_rc = ck_config_exec_run(c->cfg, &err);
	c->exec_err = err;
	atomic_store(&c->exec_finished, true);
	ev_async_send(c->loop, &c->exec_async);
	return NULL;
}

/*
 * The run is over (rc, and err taken: its error or NULL): every request parked on it
 * goes back to WAIT with the outcome, to be started (or failed) on the next loop
 * iteration. Nothing is called back from here, so walking c->reqs is safe.
 */
static void exec_finish(ck_client_t *c, int rc, char *err)
{
	c->exec_busy = false;
	ev_async_stop(c->loop, &c->exec_async);
	CK_LOG_V(
	    5, "Exec credential plugin finished", CK_KV_BOOL("ok", rc == 0),
	    CK_KV_INT("milliseconds", (int64_t)((now_ns(c) - c->exec_start_ns) / CK_NS_PER_MS)));
	for (ck_req_t *r = c->reqs; r != NULL; r = r->next) {
		if (r->state != CK_REQ_CRED)
			continue;
		if (rc == 0)
			r->exec_ran = true;
		else
			r->exec_err = ck_xstrdup(err ? err : "exec plugin failed");
		ck_client_i_req_schedule(r, 0);
	}
	free(err);
}

/* The helper said it is done: join it, then resume the parked requests. */
void ck_client_i_exec_async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	ck_client_t *c = (ck_client_t *)((char *)w - offsetof(ck_client_t, exec_async));
	if (!c->exec_busy || !atomic_load(&c->exec_finished))
		return;
	pthread_join(c->exec_thread, NULL);
	char *err = c->exec_err;
	c->exec_err = NULL;
	exec_finish(c, c->exec_rc, err);
}

/* Starts a plugin run on a helper thread (at most one at a time). */
static void exec_start(ck_client_t *c)
{
	c->exec_busy = true;
	c->exec_start_ns = now_ns(c);
	atomic_store(&c->exec_finished, false);
	/* Active (and not unref'd) while the run lasts: the loop must not return with
	 * requests parked on it. */
	ev_async_start(c->loop, &c->exec_async);
	CK_LOG_V(5, "Running exec credential plugin");
	/* The helper inherits this mask: signals stay with the threads that handle them. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int e = pthread_create(&c->exec_thread, NULL, exec_main, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e != 0)
		exec_finish(c, -1,
		            ck_xasprintf("exec plugin: cannot start a thread: %s", strerror(e)));
}

/* Parks r until the plugin has run, sharing the run in progress if there is one. */
static void req_park(ck_req_t *r)
{
	ck_client_t *c = r->c;
	r->state = CK_REQ_CRED;
	/* The rate-limiter token taken for this start waits with the request (given
	 * back if it is cancelled meanwhile). */
	r->token_held = ck_tb_enabled(&c->bucket);
	/* The plugin may take up to its own timeout (30 s): the request's deadline
	 * still holds while it waits (req_timer_cb fails it in CRED). */
	uint64_t left = ck_client_i_req_left_ns(r);
	if (left != UINT64_MAX) {
		ev_timer_set(&r->timer, (double)left / 1e9, 0.);
		ev_timer_start(c->loop, &r->timer);
	}
	if (!c->exec_busy)
		exec_start(c);
}

/*
 * No credentials for r (borrows err). After a 401 the answer is still that 401,
 * with why no new credential could be had; otherwise it is a transport-level error.
 */
static void req_fail_credentials(ck_req_t *r, const char *err)
{
	if (r->unauth_code != 0) {
		r->code = r->unauth_code;
		r->res.http_code = r->unauth_code;
		r->res.status = r->unauth_status;
		memset(&r->unauth_status, 0, sizeof(r->unauth_status));
		r->res.error = ck_client_i_status_message(r, err ? err : "failed");
		ck_client_i_req_complete(r);
		return;
	}
	char *why = ck_xasprintf("credentials: %s", err ? err : "failed");
	ck_client_i_req_fail_transport(r, 0, why);
	free(why);
}

bool ck_client_i_attempt_creds(ck_req_t *r, ck_cred_t *cred)
{
	ck_client_t *c = r->c;
	char *err = NULL;
	int rc;
	if (r->exec_err != NULL) {
		/* The run r waited for failed. */
		rc = -1;
		err = r->exec_err;
		r->exec_err = NULL;
	} else {
		ck_cred_want_t want = r->exec_ran        ? CK_CRED_LAST
		                      : r->force_refresh ? CK_CRED_REFRESH
		                                         : CK_CRED_CURRENT;
		rc = ck_config_credentials_peek(c->cfg, want, cred, &err);
	}
	r->exec_ran = false;
	if (rc == CK_CONFIG_NEED_EXEC) {
		req_park(r);
		return false;
	}
	r->force_refresh = false;
	if (rc < 0) {
		req_fail_credentials(r, err);
		free(err);
		return false;
	}
	r->unauth_code = 0;
	ck_status_clear(&r->unauth_status);
	return true;
}

bool ck_client_i_unauthorized_retry(ck_req_t *r)
{
	ck_client_t *c = r->c;
	/* Exec plugins and token files: retry once with a fresh credential. If another
	 * request already refreshed it meanwhile, its new one will do; otherwise the
	 * next start forces a refresh (a plugin run, off the loop), once for this
	 * request. The 401 is kept for the answer in case that refresh fails. A
	 * credential that cannot change (generation 0: static token, certificate) is
	 * not retried: the server would only refuse it again. */
	ck_cred_t cred = {0};
	int rc = -1;
	if (r->code == 401 && !r->auth_refreshed)
		rc = ck_config_credentials_peek(c->cfg, CK_CRED_CURRENT, &cred, NULL);
	bool can_change = r->code == 401 && !r->auth_refreshed && (rc != 0 || cred.generation != 0);
	if (can_change) {
		r->auth_refreshed = true;
		r->force_refresh = !(rc == 0 && cred.generation != r->cred_gen);
		ck_cred_clear(&cred);
		r->unauth_code = (int)r->code;
		r->unauth_status = r->res.status;
		memset(&r->res.status, 0, sizeof(r->res.status));
		ck_client_i_req_trace_retry(r, "401: retrying with refreshed credentials", 0);
		ck_client_i_req_attempt_reset(r);
		ck_client_i_req_schedule(r, 0);
		return true;
	}
	ck_cred_clear(&cred);
	return false;
}
