/*
 * client_hook: attempts answered by a transport hook (ck_transport_t, client.h)
 * instead of curl: the in-memory API server of <ckube/fake.h> plugs in here.
 * Separate from client_transport.c, which speaks curl, because the hook replaces
 * exactly what that file does and nothing more: a hooked attempt leaves
 * client_request.c in FLIGHT like a curl one, its body goes through the same
 * ck_client_i_feed, and it ends in the same ck_client_i_req_attempt_done, so
 * retries, the limiter, deadlines and Status decoding are the ones the network
 * gets.
 *
 * Design note. A ck_transport_attempt_t is the request itself (one attempt at a
 * time per request); r->tp_active says the transport holds it, and every way out
 * of FLIGHT (the end, the deadline, a cancel, a retry's reset, ck_client_free)
 * goes through ck_client_i_hook_stop, which calls stop() exactly once. curl keeps
 * an attempt's deadline itself (CURLOPT_TIMEOUT_MS); a hooked attempt gets it from
 * the request's own timer, which is otherwise idle in FLIGHT. While a body chunk
 * is decoded, in_curl is raised as it is for curl, so that a callback that cancels
 * a request only marks it and the request is freed after the chunk.
 */
#include "pkg/rest/client_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ck_req_t *req_of(ck_transport_attempt_t *a)
{
	return (ck_req_t *)a;
}

void ck_client_i_hook_start(ck_req_t *r)
{
	ck_client_t *c = r->c;
	const char *pq = r->url + strlen(c->base);
	const char *q = strchr(pq, '?');
	char *path = q ? ck_xstrndup(pq, (size_t)(q - pq)) : ck_xstrdup(pq);
	ck_transport_req_t tr = {
	    .method = r->method,
	    .path = path,
	    .query = q ? q + 1 : "",
	    .content_type = r->body ? r->content_type : NULL,
	    .body = r->body,
	    .body_len = r->body_len,
	    .is_watch = r->is_watch,
	};
	r->state = CK_REQ_FLIGHT;
	r->attempts++;
	r->start_ns = now_ns(c);
	char *err = NULL;
	int rc = c->transport->start(c->transport->ud, (ck_transport_attempt_t *)r, &tr, &err);
	free(path);
	if (rc < 0) {
		char *why = ck_xasprintf("transport hook: %s", err ? err : "refused the attempt");
		free(err);
		r->state = CK_REQ_DONE;
		ck_client_i_req_fail_transport(r, CURLE_COULDNT_CONNECT, why);
		free(why);
		return;
	}
	r->tp_active = true;
	if (r->deadline_ns != 0) {
		ev_timer_set(&r->timer, (double)ck_client_i_req_left_ns(r) / 1e9, 0.);
		ev_timer_start(c->loop, &r->timer);
	}
}

void ck_client_i_hook_stop(ck_req_t *r)
{
	if (!r->tp_active)
		return;
	r->tp_active = false;
	ev_timer_stop(r->c->loop, &r->timer);
	r->c->transport->stop(r->c->transport->ud, (ck_transport_attempt_t *)r);
}

/* The attempt ended with cc (curl's code for the same ending). */
static void hook_finish(ck_req_t *r, CURLcode cc)
{
	ck_client_i_hook_stop(r);
	ck_client_i_req_attempt_done(r, cc);
}

void ck_client_i_hook_timeout(ck_req_t *r)
{
	snprintf(r->errbuf, sizeof(r->errbuf), "Operation timed out after %.0f ms",
	         (double)(now_ns(r->c) - r->start_ns) / 1e6);
	hook_finish(r, CURLE_OPERATION_TIMEDOUT);
}

void ck_transport_head(ck_transport_attempt_t *a, int code, int retry_after)
{
	ck_req_t *r = req_of(a);
	r->code = code;
	r->retry_after = retry_after;
}

int ck_transport_body(ck_transport_attempt_t *a, const char *data, size_t len)
{
	ck_req_t *r = req_of(a);
	ck_client_t *c = r->c;
	size_t n = 0;
	if (r->code == 0)
		r->abort_err = ck_xstrdup("transport hook: a body before its status");
	else if (!r->cancelled) {
		c->in_curl++;
		n = ck_client_i_feed(r, data, len);
		c->in_curl--;
	}
	if (r->cancelled) {
		ck_client_i_sweep_cancelled(c); /* r, and any other cancelled meanwhile */
		return -1;
	}
	ck_client_i_sweep_cancelled(c);
	if (n < len) {
		hook_finish(r, CURLE_WRITE_ERROR);
		return -1;
	}
	return 0;
}

void ck_transport_end(ck_transport_attempt_t *a, const char *why)
{
	ck_req_t *r = req_of(a);
	if (why != NULL)
		snprintf(r->errbuf, sizeof(r->errbuf), "%s", why);
	/* A reset, as curl reports a connection that broke mid-answer. */
	hook_finish(r, why != NULL ? CURLE_RECV_ERROR : CURLE_OK);
}
