/*
 * client_transport: the network side of the client, on the loop thread: the curl
 * multi handle driven by libev, the easy handle of each attempt with its TLS,
 * proxy and timeout options, and the curl callbacks that feed a response to the
 * decoder. Separate because it is the one place that speaks curl and libev; the
 * request lifecycle (client_request.c) only sees "an attempt ended with cc".
 *
 * Design note. Everything that touches the network runs on the loop thread: one
 * curl multi handle whose sockets and timeout are libev watchers (ev_io per socket,
 * one ev_timer). In FLIGHT an easy handle is in the multi; the body is fed to a
 * ck_dec_t chunk by chunk from the write callback (2xx) or collected, bounded
 * (non-2xx).
 *
 * Each attempt gets a fresh easy handle; connections (and the HTTP/2 session with
 * every watch multiplexed on it) live in the multi handle's pool. That this really
 * is one connection is measured, not assumed (client_stats.c).
 */
#include "pkg/rest/client_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Non-2xx bodies are Status objects of a few hundred bytes; keep at most this. */
#define MAX_ERROR_BODY (1024u * 1024u)

/* --- decoder callbacks: forward to the caller, counting what it has seen. --- */

static void wrap_object(void *ud, ck_obj_t *obj)
{
	ck_req_t *r = ud;
	if (r->decode == CK_DEC_OBJECT) {
		/* Held until the end, so an OBJECT request can still be retried. */
		ck_obj_unref(r->res.obj);
		r->res.obj = obj;
		return;
	}
	if (r->cancelled || r->ucb.on_object == NULL) {
		ck_obj_unref(obj);
		return;
	}
	r->delivered++;
	r->ucb.on_object(r->ud, obj);
}

static void wrap_list_meta(void *ud, const char *rv, const char *cont, int64_t remaining)
{
	ck_req_t *r = ud;
	if (r->cancelled || r->ucb.on_list_meta == NULL)
		return;
	r->delivered++;
	r->ucb.on_list_meta(r->ud, rv, cont, remaining);
}

static void wrap_event(void *ud, ck_watch_type_t type, ck_obj_t *obj, const ck_status_t *status)
{
	ck_req_t *r = ud;
	if (r->cancelled || r->ucb.on_event == NULL) {
		ck_obj_unref(obj);
		return;
	}
	r->delivered++;
	r->ucb.on_event(r->ud, type, obj, status);
}

static const ck_dec_cb_t wrap_cb = {
    .on_object = wrap_object,
    .on_list_meta = wrap_list_meta,
    .on_event = wrap_event,
};

/* --- curl easy callbacks --- */

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
	ck_req_t *r = ud;
	size_t len = size * n;
	if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
		r->retry_after = -1; /* a new response head (after a 1xx, say) */
		if (!r->conn_counted)
			ck_client_i_conn_response(r);
	} else if (len > 12 && strncasecmp(buf, "Retry-After:", 12) == 0) {
		/* Only delay-seconds, as client-go: an HTTP date is ignored. */
		size_t i = 12;
		while (i < len && (buf[i] == ' ' || buf[i] == '\t'))
			i++;
		long v = 0;
		size_t digits = 0;
		while (i < len && buf[i] >= '0' && buf[i] <= '9' && digits < 9) {
			v = v * 10 + (buf[i] - '0');
			i++;
			digits++;
		}
		while (i < len &&
		       (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n'))
			i++;
		if (digits > 0 && i == len)
			r->retry_after = (int)v;
	}
	return len;
}

static size_t on_write(char *ptr, size_t size, size_t n, void *ud)
{
	ck_req_t *r = ud;
	if (r->cancelled)
		return 0; /* aborts the transfer */
	if (r->code == 0)
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->code);
	return ck_client_i_feed(r, ptr, size * n);
}

/* A chunk of the current attempt's body, whose status r->code is known: decoded
 * (2xx) or collected, bounded (non-2xx). The curl write callback and a transport
 * hook (client_hook.c) both feed through here, so a response is read one way
 * whatever carried it. */
size_t ck_client_i_feed(ck_req_t *r, const char *ptr, size_t len)
{
	ck_client_t *c = r->c;
	r->body_bytes += len;
	pthread_mutex_lock(&c->stats_mu); /* short: counters only */
	c->conn.body_bytes += len;
	pthread_mutex_unlock(&c->stats_mu);
	if (r->code < 200 || r->code >= 300) {
		if (r->errbody.len < MAX_ERROR_BODY) {
			size_t room = MAX_ERROR_BODY - r->errbody.len;
			ck_sbuf_append(&r->errbody, ptr, len < room ? len : room);
		}
		return len;
	}
	if (r->keep_body) {
		if (r->keep.len + len > c->max_object_bytes) {
			r->abort_err = ck_xasprintf("response body larger than %zu bytes",
			                            c->max_object_bytes);
			return 0;
		}
		ck_sbuf_append(&r->keep, ptr, len);
	}
	if (r->no_decode)
		return len;
	if (r->dec == NULL)
		r->dec = ck_dec_new(r->type, r->decode, &wrap_cb, r, c->max_object_bytes);
	char *err = NULL;
	if (ck_dec_feed(r->dec, ptr, len, &err) < 0) {
		/* The decoder names the byte offset itself. */
		r->abort_err = ck_xasprintf("decoding the response body: %s", err ? err : "failed");
		free(err);
		return 0;
	}
	return r->cancelled ? 0 : len;
}

/*
 * Frees an attempt's header list. The list holds a copy of the Authorization
 * header, so every entry is wiped first (curl_slist_free_all would leave the token
 * in freed memory).
 */
void ck_client_i_headers_free(struct curl_slist *h)
{
	for (struct curl_slist *p = h; p != NULL; p = p->next)
		if (p->data != NULL)
			ck_secure_zero(p->data, strlen(p->data));
	curl_slist_free_all(h);
}

/* Sets up easy handle e, which becomes r->easy, for r's next attempt. */
void ck_client_i_easy_setup(ck_req_t *r, CURL *e, ck_cred_t *cred)
{
	ck_client_t *c = r->c;
	r->easy = e;
	r->conn_counted = false;
	r->errbuf[0] = '\0';
	curl_easy_setopt(e, CURLOPT_URL, r->curl_url ? r->curl_url : r->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, r);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
	/*
	 * curl sends "Accept-Encoding: gzip" and inflates before on_write sees it.
	 * Not for watches: the API server compresses a watch as one gzip member per
	 * event, and curl 7.88 fails the transfer at the second member (error 23).
	 */
	if (!r->is_watch)
		curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "gzip");
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	/* Wait for a connection in progress to say whether it multiplexes rather than
	 * opening a second one: every watch shares one HTTP/2 connection. */
	curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 30L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_timeout_ms);
	if (r->deadline_ns != 0) {
		/* What is left of the request's deadline, not timeout_ms afresh: earlier
		 * attempts, retry delays and limiter waits have used the rest. */
		uint64_t left_ms = ck_client_i_req_left_ns(r) / CK_NS_PER_MS;
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(left_ms > 0 ? left_ms : 1));
	} else if (r->decode == CK_DEC_LIST && !r->no_decode && !r->is_watch) {
		/* A list streams for as long as it is big: no total limit, only a guard
		 * against a peer that stopped sending (a total limit would make an
		 * unpaged relist of a big, slow cluster fail and restart forever). */
		long secs = (long)((c->stall_timeout_ms + 999u) / 1000u);
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, secs);
	}

	if (c->view.insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (c->view.ca_pem != NULL && c->view.ca_len > 0) {
		/* The kubeconfig's CA is the only trust anchor, as in client-go. */
		struct curl_blob ca = {(void *)c->view.ca_pem, c->view.ca_len, CURL_BLOB_COPY};
		curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &ca);
		curl_easy_setopt(e, CURLOPT_CAINFO, NULL);
		curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
	}
	if (cred->cert_pem != NULL && cred->key_pem != NULL) {
		struct curl_blob cert = {cred->cert_pem, cred->cert_len, CURL_BLOB_COPY};
		struct curl_blob key = {cred->key_pem, cred->key_len, CURL_BLOB_COPY};
		curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
		curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
		curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
	}
	if (c->connect_to != NULL)
		curl_easy_setopt(e, CURLOPT_CONNECT_TO, c->connect_to);
	if (c->view.proxy_url != NULL && c->view.proxy_url[0] != '\0') {
		curl_easy_setopt(e, CURLOPT_PROXY, c->view.proxy_url);
		/* An explicit proxy-url has no exceptions (client-go: http.ProxyURL); without
		 * this, curl would go direct for hosts in $no_proxy / $NO_PROXY. */
		curl_easy_setopt(e, CURLOPT_NOPROXY, "");
		/* on_header must see the server's response head, not the proxy's answer
		 * to CONNECT (its status line would be counted as the response, with the
		 * proxy's HTTP version, and its Retry-After taken for the server's). */
		curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
	}
	if (cred->token == NULL && c->view.username != NULL && c->view.username[0] != '\0') {
		curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(e, CURLOPT_USERNAME, c->view.username);
		curl_easy_setopt(e, CURLOPT_PASSWORD, c->view.password ? c->view.password : "");
	}

	struct curl_slist *h = NULL;
	h = curl_slist_append(h, "Accept: application/json");
	/* No "Expect: 100-continue" round trip before large bodies. */
	h = curl_slist_append(h, "Expect:");
	if (c->host_header != NULL)
		h = curl_slist_append(h, c->host_header);
	if (r->body != NULL) {
		char *ct = ck_xasprintf("Content-Type: %s", r->content_type);
		h = curl_slist_append(h, ct);
		free(ct);
	}
	if (cred->token != NULL && cred->token[0] != '\0') {
		char *auth = ck_xasprintf("Authorization: Bearer %s", cred->token);
		h = curl_slist_append(h, auth);
		ck_secret_free(auth, 0);
	}
	r->cred_gen = cred->generation;
	ck_cred_clear(cred);
	r->headers = h;
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);

	if (strcmp(r->method, "GET") == 0) {
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	} else if (strcmp(r->method, "HEAD") == 0) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else {
		if (r->body != NULL) {
			curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
			curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
		}
		if (strcmp(r->method, "POST") != 0 || r->body == NULL)
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
	}
}

/* After curl ran: drop requests cancelled meanwhile, then handle finished transfers. */
void ck_client_i_sweep_cancelled(ck_client_t *c)
{
	for (ck_req_t *r = c->reqs, *next; r != NULL; r = next) {
		next = r->next;
		if (r->cancelled && r->state == CK_REQ_FLIGHT)
			ck_client_i_req_free(r);
	}
}

static void multi_process(ck_client_t *c)
{
	ck_client_i_sweep_cancelled(c);
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(c->multi, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		char *priv = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
		if (priv != NULL)
			ck_client_i_req_attempt_done((ck_req_t *)priv, msg->data.result);
	}
}

/* ---------------------------------------------------------------- curl <-> libev */

static void socket_action(ck_client_t *c, curl_socket_t fd, int action)
{
	int running = 0;
	c->in_curl++;
	curl_multi_socket_action(c->multi, fd, action, &running);
	c->in_curl--;
	multi_process(c);
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	ksock_t *s = (ksock_t *)w;
	int action = ((revents & EV_READ) ? CURL_CSELECT_IN : 0) |
	             ((revents & EV_WRITE) ? CURL_CSELECT_OUT : 0);
	socket_action(s->c, w->fd, action);
}

void ck_client_i_curl_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	ck_client_t *c = (ck_client_t *)((char *)w - offsetof(ck_client_t, curl_timer));
	socket_action(c, CURL_SOCKET_TIMEOUT, 0);
}

int ck_client_i_multi_socket_cb(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
	ck_client_t *c = userp;
	ksock_t *s = socketp;
	if (what == CURL_POLL_REMOVE) {
		if (s != NULL) {
			ev_io_stop(c->loop, &s->io);
			if (s->prev)
				s->prev->next = s->next;
			else
				c->socks = s->next;
			if (s->next)
				s->next->prev = s->prev;
			free(s);
			curl_multi_assign(c->multi, fd, NULL);
		}
		return 0;
	}
	if (s == NULL) {
		s = ck_xcalloc(1, sizeof(*s));
		s->c = c;
		s->next = c->socks;
		if (c->socks)
			c->socks->prev = s;
		c->socks = s;
		ev_init(&s->io, io_cb);
		curl_multi_assign(c->multi, fd, s);
	} else {
		ev_io_stop(c->loop, &s->io);
	}
	int events =
	    ((what & CURL_POLL_IN) ? EV_READ : 0) | ((what & CURL_POLL_OUT) ? EV_WRITE : 0);
	ev_io_set(&s->io, fd, events);
	ev_io_start(c->loop, &s->io);
	return 0;
}

int ck_client_i_multi_timer_cb(CURLM *m, long timeout_ms, void *userp)
{
	ck_client_t *c = userp;
	ev_timer_stop(c->loop, &c->curl_timer);
	if (timeout_ms >= 0) {
		ev_timer_set(&c->curl_timer, (double)timeout_ms / 1000.0, 0.);
		ev_timer_start(c->loop, &c->curl_timer);
	}
	return 0;
}
