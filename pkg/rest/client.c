/*
 * client: the Kubernetes REST client (see client.h): the client object, its
 * options and defaults, the server URL, ck_client_new and ck_client_free.
 *
 * Design note. The client is split by concern, as curl's lib/ is; each file's
 * header says what it holds and why (the list is in client_internal.h):
 * client_transport.c (curl multi on libev), client_request.c (a request's
 * states and retries), client_creds.c (credentials and the exec plugin thread),
 * client_sync.c (blocking calls from worker threads), client_verbs.c (URLs and
 * verbs), client_stats.c (figures). This file only builds and tears down what
 * they share, in the order that makes teardown safe: ck_client_free completes
 * whatever is still pending with an error and waits for the sleeping workers to
 * leave before the mutex goes away.
 */
#include "pkg/rest/client_internal.h"
#include <ckube/version.h>

#include <errno.h> /* program_invocation_short_name */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_QPS                20.0
#define DEFAULT_BURST              30
#define DEFAULT_CONNECT_TIMEOUT_MS 10000u
#define DEFAULT_REQUEST_TIMEOUT_MS 60000u
#define DEFAULT_STALL_TIMEOUT_MS   60000u
#define DEFAULT_MAX_RETRIES        10

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---------------------------------------------------------------- lifecycle */

/* Splits the server URL for messages, metrics and tls-server-name. */
static int parse_server(ck_client_t *c, char **err)
{
	const char *server = c->view.server;
	if (server == NULL || server[0] == '\0')
		return ck_err_set(err, "client: %s: no server URL",
		                  c->view.source ? c->view.source : "config");
	size_t n = strlen(server);
	while (n > 0 && server[n - 1] == '/')
		n--;
	c->base = ck_xstrndup(server, n);

	int result = -1;
	char *scheme = NULL, *host = NULL, *port = NULL;
	CURLU *u = curl_url();
	if (curl_url_set(u, CURLUPART_URL, c->base, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
		ck_err_set(err, "client: %s: server URL %s cannot be parsed",
		           c->view.source ? c->view.source : "config", c->base);
		goto out;
	}
	if (strcmp(scheme, "https") != 0 && strcmp(scheme, "http") != 0) {
		ck_err_set(err, "client: %s: server URL %s: scheme must be https or http",
		           c->view.source ? c->view.source : "config", c->base);
		goto out;
	}
	curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
	bool explicit_port = false;
	char *p2 = NULL;
	if (curl_url_get(u, CURLUPART_PORT, &p2, 0) == CURLUE_OK) {
		explicit_port = true;
		curl_free(p2);
	}
	c->host = explicit_port ? ck_xasprintf("%s:%s", host, port) : ck_xstrdup(host);

	if (strcmp(scheme, "https") == 0 && c->view.tls_server_name != NULL &&
	    c->view.tls_server_name[0] != '\0' && strcmp(c->view.tls_server_name, host) != 0) {
		/* curl verifies the certificate against the URL's host: ask for the
		 * TLS name in the URL and connect to the real address underneath. */
		char *conn = ck_xasprintf("%s:%s:%s:%s", c->view.tls_server_name, port, host, port);
		c->connect_to = curl_slist_append(NULL, conn);
		free(conn);
		c->host_header = ck_xasprintf("Host: %s", c->host);
		curl_url_set(u, CURLUPART_HOST, c->view.tls_server_name, 0);
		char *url = NULL;
		if (curl_url_get(u, CURLUPART_URL, &url, 0) == CURLUE_OK) {
			n = strlen(url);
			while (n > 0 && url[n - 1] == '/')
				n--;
			c->tls_base = ck_xstrndup(url, n);
			curl_free(url);
		}
	}
	result = 0;
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return result;
}

ck_client_t *ck_client_new(struct ev_loop *loop, ck_config_t *cfg, const ck_client_opts_t *opts,
                           char **err)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, curl_init_once);
	if (loop == NULL || cfg == NULL) {
		ck_config_free(cfg);
		ck_err_set(err, "client: no loop or no configuration");
		return NULL;
	}
	ck_client_opts_t o = opts ? *opts : (ck_client_opts_t){0};
	if (!isfinite(o.qps) || (o.qps > 0 && o.qps < CK_CLIENT_MIN_QPS)) {
		ck_config_free(cfg);
		ck_err_set(
		    err,
		    "client: qps %g: must be at least %g, or negative to disable client-side "
		    "rate limiting",
		    o.qps, CK_CLIENT_MIN_QPS);
		return NULL;
	}
	ck_client_t *c = ck_xcalloc(1, sizeof(*c));
	c->loop = loop;
	c->cfg = cfg;
	ck_config_view(cfg, &c->view);
	c->clock = o.clock ? o.clock : ck_clk_real();
	c->qps = o.qps == 0 ? DEFAULT_QPS : o.qps;
	c->burst = o.burst > 0 ? o.burst : DEFAULT_BURST;
	/* As client-go: the program's name unless the caller names itself. */
	c->user_agent = o.user_agent ? ck_xstrdup(o.user_agent)
	                             : ck_xasprintf("%s (linux) libckube/" CKUBE_VERSION_STRING,
	                                            program_invocation_short_name);
	c->connect_timeout_ms =
	    o.connect_timeout_ms ? o.connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
	c->request_timeout_ms =
	    o.request_timeout_ms ? o.request_timeout_ms : DEFAULT_REQUEST_TIMEOUT_MS;
	c->stall_timeout_ms = o.stall_timeout_ms ? o.stall_timeout_ms : DEFAULT_STALL_TIMEOUT_MS;
	c->max_retries =
	    o.max_retries == 0 ? DEFAULT_MAX_RETRIES : (o.max_retries < 0 ? 0 : o.max_retries);
	c->max_object_bytes = o.max_object_bytes ? o.max_object_bytes : CK_DEC_DEFAULT_MAX_OBJECT;
	c->transport = o.transport;
	ck_tb_init(&c->bucket, c->qps, c->burst, now_ns(c));
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->idle, NULL);
	pthread_mutex_init(&c->stats_mu, NULL);
	atomic_store(&c->loop_tid, gettid());

	if (parse_server(c, err) < 0)
		goto fail;
	if (c->transport != NULL && (c->transport->start == NULL || c->transport->stop == NULL)) {
		ck_err_set(err, "client: transport hook without start or stop");
		goto fail;
	}

	c->multi = curl_multi_init();
	if (c->multi == NULL) {
		ck_err_set(err, "client: curl_multi_init failed");
		goto fail;
	}
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, ck_client_i_multi_socket_cb);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, ck_client_i_multi_timer_cb);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);

	ev_init(&c->curl_timer, ck_client_i_curl_timer_cb);
	ev_async_init(&c->exec_async, ck_client_i_exec_async_cb);
	atomic_init(&c->exec_finished, false);
	ev_async_init(&c->async, ck_client_i_async_cb);
	ev_async_start(loop, &c->async);
	ev_unref(loop);
	ev_prepare_init(&c->prepare, ck_client_i_prepare_cb);
	ev_prepare_start(loop, &c->prepare);
	ev_unref(loop);
	return c;
fail:
	free(c->base);
	free(c->host);
	free(c->user_agent);
	curl_slist_free_all(c->connect_to);
	free(c->tls_base);
	free(c->host_header);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->idle);
	pthread_mutex_destroy(&c->stats_mu);
	ck_config_free(cfg);
	free(c);
	return NULL;
}

void ck_client_free(ck_client_t *c)
{
	if (c == NULL)
		return;
	if (c->exec_busy) {
		/* A plugin may run for up to its timeout (30 s): kill it rather than wait.
		 * The parked requests are dropped below with the others. */
		ck_config_exec_cancel(c->cfg);
		pthread_join(c->exec_thread, NULL);
		free(c->exec_err);
		c->exec_err = NULL;
		c->exec_busy = false;
		ev_async_stop(c->loop, &c->exec_async);
	}
	pthread_mutex_lock(&c->mu);
	c->shutting_down = true;
	sync_call_t *q = c->queue_head;
	c->queue_head = c->queue_tail = NULL;
	pthread_mutex_unlock(&c->mu);
	while (q != NULL) {
		sync_call_t *call = q;
		q = q->next;
		ck_client_i_sync_fail(c, call, "client shutting down");
	}
	while (c->reqs != NULL) {
		ck_req_t *r = c->reqs;
		if (r->sync != NULL) {
			ck_result_clear(&r->res);
			r->res.error =
			    ck_xasprintf("%s %s: client shutting down", r->method, r->url);
			ck_client_i_sync_complete(c, r->sync, &r->res);
		}
		ck_client_i_req_free(r);
	}
	pthread_mutex_lock(&c->mu);
	while (c->waiters > 0)
		pthread_cond_wait(&c->idle, &c->mu);
	pthread_mutex_unlock(&c->mu);

	ev_ref(c->loop);
	ev_async_stop(c->loop, &c->async);
	ev_ref(c->loop);
	ev_prepare_stop(c->loop, &c->prepare);
	ev_timer_stop(c->loop, &c->curl_timer);
	curl_multi_cleanup(c->multi);
	while (c->socks != NULL) {
		ksock_t *s = c->socks;
		c->socks = s->next;
		ev_io_stop(c->loop, &s->io);
		free(s);
	}
	curl_slist_free_all(c->connect_to);
	free(c->tls_base);
	free(c->host_header);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->idle);
	pthread_mutex_destroy(&c->stats_mu);
	ck_config_free(c->cfg);
	ck_client_i_stats_free(c);
	free(c->base);
	free(c->host);
	free(c->user_agent);
	free(c);
}

ck_config_t *ck_client_config(ck_client_t *c)
{
	return c->cfg;
}

const char *ck_client_host(const ck_client_t *c)
{
	return c->host;
}

struct ev_loop *ck_client_loop(ck_client_t *c)
{
	return c->loop;
}
