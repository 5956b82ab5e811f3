/*
 * client_request: the lifecycle of a request (ck_req_t) from its start to its done
 * callback: the attempts, the retries of resets and of Retry-After answers, the
 * rate limiter's token, the -v=5 trace and the messages of failed requests, and
 * cancelling. Separate from the transport (client_transport.c) because these are
 * the decisions, made the same way whatever curl did: an attempt ends, and this
 * file says complete or go round again.
 *
 * Design note. A request (ck_req_t) moves through these states:
 *
 *   WAIT    an ev_timer is pending: the first start, a Retry-After delay, or the
 *           wait for a rate-limiter token. Every start goes through it, even with
 *           no delay, so that curl is never entered from inside its own callbacks
 *           (a caller may start a request from a decoder callback).
 *   CRED    parked until the exec credential plugin has run (client_creds.c).
 *   FLIGHT  an easy handle is in the multi; the body is fed to a ck_dec_t chunk by
 *           chunk from the write callback (2xx) or collected, bounded (non-2xx).
 *   DONE    the done callback runs, then the request is freed.
 *
 * A retry goes back to WAIT. A cancel while curl is on the stack only marks the
 * request; it is removed as soon as curl returns.
 *
 * Deadline. A request with a time limit (timeout_ms, or the client's default for
 * what is neither a list nor a watch) gets one absolute deadline when it starts;
 * everything fits before it: the wait for a limiter token, the exec plugin, each
 * attempt (curl is given what is left) and each retry delay. A wait that would end
 * past it is not started: the request fails at once as timed out, naming what it
 * would have waited for (a Retry-After of 999999999 s costs nothing). Retry-After
 * is also capped at MAX_RETRY_AFTER_SECONDS for requests without a deadline.
 */
#include "pkg/rest/client_internal.h"

#include <ckube/log.h>

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The wait before retrying a GET after a reset, as if the server said Retry-After: 1. */
#define RESET_RETRY_SECONDS 1
/* The longest Retry-After honoured (the header allows 999999999 s); the API server
 * asks for a second or a few. */
#define MAX_RETRY_AFTER_SECONDS 60

/* The methods a request may use; a kreq's method points into this array, so the
 * latency histogram can be kept per verb without comparing strings. */
const char *const ck_client_i_methods[NMETHODS] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"};

/* Returns the static spelling of a known method (in methods[]), or NULL. */
static const char *method_static(const char *m)
{
	if (m == NULL)
		return NULL;
	for (size_t i = 0; i < NMETHODS; i++)
		if (strcmp(m, ck_client_i_methods[i]) == 0)
			return ck_client_i_methods[i];
	return NULL;
}

/* ---------------------------------------------------------------- requests */

static void req_link(ck_client_t *c, ck_req_t *r)
{
	r->next = c->reqs;
	if (c->reqs)
		c->reqs->prev = r;
	c->reqs = r;
}

static void req_unlink(ck_client_t *c, ck_req_t *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		c->reqs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->prev = r->next = NULL;
}

/* Drops the current attempt's easy handle and everything it produced. */
void ck_client_i_req_attempt_reset(ck_req_t *r)
{
	ck_client_i_hook_stop(r);
	if (r->easy != NULL) {
		ck_client_i_conn_count(
		    r); /* cancelled in flight: its connection was opened all the same */
		curl_multi_remove_handle(r->c->multi, r->easy);
		curl_easy_cleanup(r->easy);
		r->easy = NULL;
	}
	ck_client_i_headers_free(r->headers);
	r->headers = NULL;
	r->errbuf[0] = '\0';
	r->code = 0;
	r->retry_after = -1;
	r->body_bytes = 0;
	ck_dec_free(r->dec);
	r->dec = NULL;
	ck_sbuf_reset(&r->errbody);
	ck_sbuf_reset(&r->keep);
	free(r->abort_err);
	r->abort_err = NULL;
	r->conn_counted = false;
	ck_result_clear(&r->res);
}

/* A token reserved for a start that will not happen (r ends while it waits or is
 * parked) goes back to the bucket. */
static void req_return_token(ck_req_t *r)
{
	if ((r->state == CK_REQ_WAIT || r->state == CK_REQ_CRED) && r->token_held)
		ck_tb_unreserve(&r->c->bucket, now_ns(r->c));
	r->token_held = false;
}

void ck_client_i_req_free(ck_req_t *r)
{
	ck_client_t *c = r->c;
	/* WAIT's delay, or CRED's deadline. */
	ev_timer_stop(c->loop, &r->timer);
	req_return_token(r);
	ck_client_i_req_attempt_reset(r);
	free(r->exec_err);
	ck_status_clear(&r->unauth_status);
	ck_sbuf_free(&r->errbody);
	ck_sbuf_free(&r->keep);
	req_unlink(c, r);
	free(r->url);
	free(r->curl_url);
	free(r->content_type);
	free(r->body);
	free(r);
}

/* Ends the request: the caller learns the result, then the request is freed. */
void ck_client_i_req_complete(ck_req_t *r)
{
	req_return_token(r);
	r->state = CK_REQ_DONE;
	if (r->sync != NULL)
		ck_client_i_sync_complete(r->c, r->sync, &r->res);
	else if (r->done != NULL)
		r->done(r->ud, &r->res);
	ck_client_i_req_free(r);
}

/* Back to WAIT for delay seconds (0 = next loop iteration). */
void ck_client_i_req_schedule(ck_req_t *r, double delay)
{
	r->state = CK_REQ_WAIT;
	ev_timer_stop(r->c->loop, &r->timer); /* CRED may have its deadline armed */
	ev_timer_set(&r->timer, delay, 0.);
	ev_timer_start(r->c->loop, &r->timer);
}

void ck_client_i_req_fail_transport(ck_req_t *r, int transport_code, const char *why)
{
	r->res.http_code = 0;
	r->res.transport_code = transport_code;
	r->res.error = ck_xasprintf("%s %s: %s", r->method, r->url, why);
	ck_client_i_req_complete(r);
}

void ck_client_i_req_fail_deadline(ck_req_t *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *why = ck_xvasprintf(fmt, ap);
	va_end(ap);
	char *msg =
	    ck_xasprintf("timed out (the request's %u ms deadline): %s", r->timeout_ms, why);
	ck_status_clear(&r->res.status);
	ck_client_i_req_fail_transport(r, CURLE_OPERATION_TIMEDOUT, msg);
	free(msg);
	free(why);
}

/* True when a retry in delay seconds still starts before r's deadline; the caller
 * fails the request as timed out otherwise. */
static bool req_retry_fits(ck_req_t *r, double delay)
{
	return (double)ck_client_i_req_left_ns(r) > delay * 1e9;
}

/*
 * Sets up and adds an easy handle for the next attempt; parks r when the exec
 * plugin must run first; completes r on failure.
 */
static void req_start_attempt(ck_req_t *r)
{
	ck_client_t *c = r->c;
	ck_cred_t cred = {0};
	if (!ck_client_i_attempt_creds(r, &cred))
		return;
	if (c->transport != NULL) {
		ck_cred_clear(&cred); /* the hook is not the network: nothing to present */
		ck_client_i_hook_start(r);
		return;
	}

	CURL *e = curl_easy_init();
	if (e == NULL) {
		ck_cred_clear(&cred);
		ck_client_i_req_fail_transport(r, CURLE_FAILED_INIT, "curl_easy_init failed");
		return;
	}
	ck_client_i_easy_setup(r, e, &cred);

	r->state = CK_REQ_FLIGHT;
	r->attempts++;
	r->start_ns = now_ns(c);
	CURLMcode mc = curl_multi_add_handle(c->multi, e);
	if (mc != CURLM_OK) {
		curl_easy_cleanup(e);
		r->easy = NULL;
		r->state = CK_REQ_DONE;
		ck_client_i_req_fail_transport(r, CURLE_FAILED_INIT, curl_multi_strerror(mc));
	}
}

/*
 * A WAIT ended: take a rate-limiter token (maybe waiting again), then start. Or the
 * deadline of a request parked in CRED passed.
 */
static void req_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	ck_req_t *r = (ck_req_t *)((char *)w - offsetof(ck_req_t, timer));
	ck_client_t *c = r->c;
	if (r->state == CK_REQ_FLIGHT) {
		/* Only a hooked attempt arms it in flight: curl keeps its own deadline. */
		ck_client_i_hook_timeout(r);
		return;
	}
	if (r->state == CK_REQ_CRED) {
		/* The plugin run goes on for whoever else needs it. */
		ck_client_i_req_fail_deadline(r, "waiting for the exec credential plugin");
		return;
	}
	if (ck_client_i_req_left_ns(r) == 0) {
		ck_client_i_req_fail_deadline(r, "before attempt %d could start", r->attempts + 1);
		return;
	}
	if (!r->unthrottled && !r->token_held && ck_tb_enabled(&c->bucket)) {
		uint64_t wait = ck_tb_reserve(&c->bucket, now_ns(c));
		r->token_held = true;
		ck_client_i_stats_rate_limited(c, r->method, (double)wait / 1e9);
		if (wait > 0 && wait >= ck_client_i_req_left_ns(r)) {
			/* As client-go's limiter Wait with a context deadline: fail now. */
			ck_client_i_req_fail_deadline(r,
			                              "the client-side rate limiter (qps %g, burst "
			                              "%d) has no token for %.3f s",
			                              c->qps, c->burst, (double)wait / 1e9);
			return;
		}
		if (wait > 0) {
			ck_client_i_req_schedule(r, (double)wait / 1e9);
			return;
		}
	}
	r->token_held = false;
	req_start_attempt(r);
}

static bool transport_retryable(CURLcode cc)
{
	switch (cc) {
	case CURLE_RECV_ERROR:   /* connection reset */
	case CURLE_SEND_ERROR:   /* reset while sending */
	case CURLE_PARTIAL_FILE: /* early EOF: fewer bytes than announced */
	case CURLE_GOT_NOTHING:  /* closed before any response */
	case CURLE_HTTP2:        /* GOAWAY, connection-level errors */
	case CURLE_HTTP2_STREAM: /* stream reset */
		return true;
	default:
		return false;
	}
}

/*
 * Builds the message of a non-2xx answer from its decoded Status. Borrows
 * refresh_err: why the credential refresh after a 401 failed, or NULL; without it
 * the caller of a 401 would not learn that the exec plugin is broken (and how to
 * install it), only that the server refused the old credential.
 */
char *ck_client_i_status_message(const ck_req_t *r, const char *refresh_err)
{
	const ck_status_t *s = &r->res.status;
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_printf(&b, "%s %s: %ld", r->method, r->url, r->code);
	if (s->reason != NULL && s->reason[0] != '\0')
		ck_sbuf_printf(&b, " %s", s->reason);
	if (s->message != NULL && s->message[0] != '\0')
		ck_sbuf_printf(&b, ": %s", s->message);
	if (refresh_err != NULL)
		ck_sbuf_printf(&b, "; refreshing the credentials failed: %s", refresh_err);
	return ck_sbuf_steal(&b);
}

/* The request's path and query, for logs (the server is the same for every line). */
static const char *req_path(const ck_req_t *r)
{
	return r->url + strlen(r->c->base);
}

/*
 * -v=5: one line per finished attempt, like client-go's round-tripper trace. Only
 * the method, path and figures: never a header (the Authorization header) nor a body.
 */
static void req_trace(const ck_req_t *r, CURLcode cc, double secs)
{
	if (!ck_log_v_enabled(5))
		return;
	const char *err = NULL;
	if (r->cancelled)
		err = "cancelled";
	else if (r->abort_err != NULL)
		err = r->abort_err;
	else if (cc != CURLE_OK)
		err = r->errbuf[0] ? r->errbuf : curl_easy_strerror(cc);
	int64_t ms = (int64_t)(secs * 1000.0);
	if (err != NULL)
		CK_LOG_V(5, "Response", CK_KV_STR("verb", r->method), CK_KV_STR("url", req_path(r)),
		         CK_KV_INT("status", r->code), CK_KV_INT("milliseconds", ms),
		         CK_KV_UINT("bytes", r->body_bytes), CK_KV_INT("attempt", r->attempts),
		         CK_KV_ERR(err));
	else
		CK_LOG_V(5, "Response", CK_KV_STR("verb", r->method), CK_KV_STR("url", req_path(r)),
		         CK_KV_INT("status", r->code), CK_KV_INT("milliseconds", ms),
		         CK_KV_UINT("bytes", r->body_bytes), CK_KV_INT("attempt", r->attempts));
}

/* -v=5: why the request goes round again, and when. */
void ck_client_i_req_trace_retry(const ck_req_t *r, const char *why, double delay)
{
	CK_LOG_V(5, "Retrying request", CK_KV_STR("verb", r->method), CK_KV_STR("url", req_path(r)),
	         CK_KV_STR("reason", why),
	         CK_KV_INT("delayMilliseconds", (int64_t)(delay * 1000.0)),
	         CK_KV_INT("attempt", r->attempts + 1));
}

/* The current attempt ended with cc; decide: complete, or retry. */
void ck_client_i_req_attempt_done(ck_req_t *r, CURLcode cc)
{
	ck_client_t *c = r->c;
	if (r->code == 0 && r->easy != NULL)
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->code);
	double secs = (double)(now_ns(c) - r->start_ns) / 1e9;
	bool transport = cc != CURLE_OK && r->abort_err == NULL;
	ck_client_i_stats_record(c, r->method, r->type ? r->type->resource : NULL,
	                         transport ? 0 : (int)r->code, !r->is_watch, secs);
	ck_client_i_conn_count(r);
	req_trace(r, cc, secs);
	if (r->easy != NULL) {
		curl_multi_remove_handle(c->multi, r->easy);
		curl_easy_cleanup(r->easy);
		r->easy = NULL;
	}

	if (r->cancelled) {
		ck_client_i_req_free(r);
		return;
	}

	if (r->abort_err != NULL) {
		r->res.http_code = (int)r->code;
		r->res.error = ck_xasprintf("%s %s: %s", r->method, r->url, r->abort_err);
		ck_client_i_req_complete(r);
		return;
	}

	if (transport && cc == CURLE_OPERATION_TIMEDOUT && r->deadline_ns != 0 &&
	    ck_client_i_req_left_ns(r) < 10 * CK_NS_PER_MS) {
		/* curl was given what was left of the deadline, and used it. */
		const char *why = r->errbuf[0] ? r->errbuf : curl_easy_strerror(cc);
		r->res.head_code = (int)r->code;
		ck_client_i_req_fail_deadline(r, "attempt %d: %s", r->attempts, why);
		return;
	}
	if (transport) {
		bool retry = strcmp(r->method, "GET") == 0 && transport_retryable(cc) &&
		             r->delivered == 0 && r->retries < c->max_retries;
		if (retry && !req_retry_fits(r, RESET_RETRY_SECONDS)) {
			const char *why = r->errbuf[0] ? r->errbuf : curl_easy_strerror(cc);
			ck_client_i_req_fail_deadline(
			    r, "no time left to retry after: %s (curl error %d)", why, (int)cc);
			return;
		}
		if (retry) {
			r->retries++;
			ck_client_i_req_trace_retry(r, "connection failed before any data",
			                            RESET_RETRY_SECONDS);
			ck_client_i_req_attempt_reset(r);
			ck_client_i_req_schedule(r, RESET_RETRY_SECONDS);
			return;
		}
		const char *why = r->errbuf[0] ? r->errbuf : curl_easy_strerror(cc);
		char *msg = ck_xasprintf("%s (curl error %d)", why, (int)cc);
		/* A watch cut after its 200 is a stream that ended, not a refused request:
		 * the reflector tells the two apart by this. */
		r->res.head_code = (int)r->code;
		ck_client_i_req_fail_transport(r, (int)cc, msg);
		free(msg);
		return;
	}

	if (r->code >= 200 && r->code < 300) {
		char *err = NULL;
		if (r->dec != NULL && ck_dec_finish(r->dec, &err) < 0) {
			r->res.http_code = (int)r->code;
			r->res.error = ck_xasprintf("%s %s: decoding the response body: %s",
			                            r->method, r->url, err ? err : "failed");
			free(err);
			ck_client_i_req_complete(r);
			return;
		}
		r->res.http_code = (int)r->code;
		if (r->keep_body) {
			r->res.body_len = r->keep.len;
			ck_sbuf_cstr(&r->keep);
			r->res.body = ck_sbuf_steal(&r->keep);
		}
		ck_client_i_req_complete(r);
		return;
	}

	ck_status_parse(r->errbody.data ? r->errbody.data : "", r->errbody.len, (int)r->code,
	                &r->res.status);
	if (r->res.status.retry_after_seconds == 0 && r->retry_after > 0)
		r->res.status.retry_after_seconds = r->retry_after;

	if (ck_client_i_unauthorized_retry(r))
		return;
	if ((r->code == 429 || r->code >= 500) && r->retry_after >= 0 &&
	    r->retries < c->max_retries) {
		int delay = r->retry_after;
		if (delay > MAX_RETRY_AFTER_SECONDS)
			delay = MAX_RETRY_AFTER_SECONDS;
		if (!req_retry_fits(r, delay)) {
			const ck_status_t *st = &r->res.status;
			bool has_reason = st->reason != NULL && st->reason[0] != '\0';
			bool has_msg = st->message != NULL && st->message[0] != '\0';
			ck_client_i_req_fail_deadline(
			    r,
			    "the server's Retry-After of %d s ends past it (answer: %ld%s%s%s%s)",
			    r->retry_after, r->code, has_reason ? " " : "",
			    has_reason ? st->reason : "", has_msg ? ": " : "",
			    has_msg ? st->message : "");
			return;
		}
		r->retries++;
		ck_client_i_req_trace_retry(
		    r, r->code == 429 ? "429 with Retry-After" : "5xx with Retry-After", delay);
		ck_client_i_req_attempt_reset(r);
		ck_client_i_req_schedule(r, delay);
		return;
	}
	r->res.http_code = (int)r->code;
	r->res.error = ck_client_i_status_message(r, NULL);
	ck_client_i_req_complete(r);
}

/* ---------------------------------------------------------------- async API */

ck_req_t *ck_client_i_request_start(ck_client_t *c, const ck_req_spec_t *spec,
                                    const ck_dec_cb_t *dcb, ck_req_done_cb done, void *ud,
                                    sync_call_t *sync, char **err)
{
	const char *method = method_static(spec->method);
	if (method == NULL) {
		ck_err_set(err, "client: unsupported method %s",
		           spec->method ? spec->method : "(null)");
		return NULL;
	}
	if (spec->type == NULL || spec->type->resource == NULL || spec->type->version == NULL) {
		ck_err_set(err, "client: %s: request without a complete type", method);
		return NULL;
	}
	if (c->shutting_down) {
		ck_err_set(err, "client shutting down");
		return NULL;
	}
	ck_req_t *r = ck_xcalloc(1, sizeof(*r));
	r->c = c;
	r->method = method;
	r->type = spec->type;
	r->decode = spec->decode;
	r->no_decode = spec->no_decode;
	r->keep_body = spec->keep_body;
	r->is_watch = spec->is_watch;
	r->unthrottled = spec->unthrottled;
	/* The default total limit is for calls; a list streams for as long as it is
	 * big (only its stall guard applies) and a watch is long-running. */
	bool is_list = spec->decode == CK_DEC_LIST && !spec->no_decode;
	r->timeout_ms = spec->timeout_ms > 0        ? spec->timeout_ms
	                : spec->is_watch || is_list ? 0
	                                            : c->request_timeout_ms;
	if (r->timeout_ms > 0)
		r->deadline_ns = now_ns(c) + (uint64_t)r->timeout_ms * CK_NS_PER_MS;
	r->url = ck_client_i_build_url(c, spec);
	if (c->tls_base != NULL)
		r->curl_url = ck_xasprintf("%s%s", c->tls_base, r->url + strlen(c->base));
	if (spec->body != NULL) {
		r->body = ck_xmalloc(spec->body_len + 1);
		memcpy(r->body, spec->body, spec->body_len);
		r->body[spec->body_len] = '\0';
		r->body_len = spec->body_len;
		r->content_type =
		    ck_xstrdup(spec->content_type ? spec->content_type : "application/json");
	}
	if (dcb != NULL)
		r->ucb = *dcb;
	r->done = done;
	r->ud = ud;
	r->sync = sync;
	r->retry_after = -1;
	ev_init(&r->timer, req_timer_cb);
	req_link(c, r);
	ck_client_i_req_schedule(r, 0);
	return r;
}

ck_req_t *ck_client_request(ck_client_t *c, const ck_req_spec_t *spec, const ck_dec_cb_t *dcb,
                            ck_req_done_cb done, void *ud, char **err)
{
	if (done == NULL) {
		ck_err_set(err, "client: request without a done callback");
		return NULL;
	}
	return ck_client_i_request_start(c, spec, dcb, done, ud, NULL, err);
}

void ck_req_cancel(ck_req_t *r)
{
	if (r == NULL || r->cancelled)
		return;
	r->cancelled = true;
	switch (r->state) {
	case CK_REQ_WAIT:
	case CK_REQ_CRED: /* the plugin run goes on for whoever else needs it */
		ck_client_i_req_free(r);
		break;
	case CK_REQ_FLIGHT:
		/* curl may be on the stack (a decoder callback): multi_process frees it. */
		if (r->c->in_curl == 0)
			ck_client_i_req_free(r);
		break;
	case CK_REQ_DONE:
		break; /* its done callback is running; it is freed right after */
	}
}
