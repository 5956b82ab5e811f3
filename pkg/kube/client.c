/*
 * client: the Kubernetes REST client (see client.h).
 *
 * Design note. Everything that touches the network runs on the loop thread: one
 * curl multi handle whose sockets and timeout are libev watchers (ev_io per socket,
 * one ev_timer). A request (ck_req_t) moves through these states:
 *
 *   WAIT    an ev_timer is pending: the first start, a Retry-After delay, or the
 *           wait for a rate-limiter token. Every start goes through it, even with
 *           no delay, so that curl is never entered from inside its own callbacks
 *           (a caller may start a request from a decoder callback).
 *   CRED    parked until the exec credential plugin has run (see below).
 *   FLIGHT  an easy handle is in the multi; the body is fed to a ck_dec_t chunk by
 *           chunk from the write callback (2xx) or collected, bounded (non-2xx).
 *   DONE    the done callback runs, then the request is freed.
 *
 * Credentials. A start asks the configuration for credentials without blocking
 * (ck_config_credentials_peek: cached exec output, token files, static values). When
 * the exec plugin must run (nothing cached, expired, or a 401 asked for a new one),
 * the request parks in CRED and one helper thread runs the plugin, which may take
 * seconds; every request that needs it meanwhile parks on that same run. The helper
 * ends with an ev_async; the loop joins it and puts the parked requests back to
 * WAIT, with the run's outcome. After a failed run the configuration answers with
 * that error for a backoff, so requests fail at once instead of running the plugin
 * once each. While a run is in progress its ev_async is active, so the loop stays
 * up for the parked requests; ck_client_free cancels the run (the plugin is killed)
 * and joins the helper.
 *
 * Each attempt gets a fresh easy handle; connections (and the HTTP/2 session with
 * every watch multiplexed on it) live in the multi handle's pool. That this really
 * is one connection is measured, not assumed: ck_client_conn_stats_snapshot counts
 * the connections curl opened and the HTTP version of every response head, and
 * the integration test holds the client to one connection, all HTTP/2. A retry goes
 * back to WAIT. A cancel while curl is on the stack only marks the request; it is
 * removed as soon as curl returns.
 *
 * Worker threads hand requests over through a mutex-protected queue and an
 * ev_async, and sleep on a condition variable of their own until the loop fills
 * their result. ck_client_free completes whatever is still pending with an error and
 * waits for the sleepers to leave before the mutex goes away.
 */
#include <ckube/client.h>

#include <ckube/ratelimit.h>
#include <ckube/log.h>

#include <curl/curl.h>
#include <errno.h> /* program_invocation_short_name */
#include <ev.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define DEFAULT_QPS                20.0
#define DEFAULT_BURST              30
#define DEFAULT_CONNECT_TIMEOUT_MS 10000u
#define DEFAULT_REQUEST_TIMEOUT_MS 60000u
#define DEFAULT_STALL_TIMEOUT_MS   60000u
#define DEFAULT_MAX_RETRIES        10
/* Non-2xx bodies are Status objects of a few hundred bytes; keep at most this. */
#define MAX_ERROR_BODY (1024u * 1024u)
/* The wait before retrying a GET after a reset, as if the server said Retry-After: 1. */
#define RESET_RETRY_SECONDS 1

static const double latency_bounds[CK_CLIENT_LATENCY_NBUCKETS] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
};

/* The methods a request may use; a kreq's method points into this array, so the
 * latency histogram can be kept per verb without comparing strings. */
#define NMETHODS 6
static const char *const methods[NMETHODS] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"};

/* One verb's latency histogram; counts[] is cumulative already, as exposed. */
typedef struct lat_hist {
	uint64_t counts[CK_CLIENT_LATENCY_NBUCKETS];
	double sum;
	uint64_t count;
} lat_hist_t;

typedef enum kreq_state {
	KREQ_WAIT,
	KREQ_CRED,
	KREQ_FLIGHT,
	KREQ_DONE,
} kreq_state_t;

/* A *_sync call, on the stack of the worker that waits for it. */
typedef struct sync_call {
	struct sync_call *next;
	const ck_req_spec_t *spec;
	const ck_dec_cb_t *dcb;
	void *ud;
	ck_result_t *res;
	bool done;
	pthread_cond_t cond;
} sync_call_t;

/* One socket curl asked us to watch. */
typedef struct ksock {
	ev_io io;
	ck_client_t *c;
	struct ksock *prev, *next;
} ksock_t;

typedef struct stat_entry {
	const char *method; /* static string */
	int code;
	uint64_t count;
} stat_entry_t;

struct ck_req {
	ck_client_t *c;
	struct ck_req *prev, *next; /* c->reqs */
	kreq_state_t state;
	bool cancelled;

	/* The request, copied from the spec. */
	const char *method; /* static string */
	const ck_type_t *type;
	ck_dec_mode_t decode;
	bool no_decode;
	bool keep_body;
	bool is_watch;
	uint32_t timeout_ms;
	char *url;      /* the server's URL: messages, logs */
	char *curl_url; /* the same with the TLS name as host (tls_base), or NULL */
	char *content_type;
	char *body;
	size_t body_len;
	ck_dec_cb_t ucb; /* the caller's decoder callbacks (zeroed if none) */
	ck_req_done_cb done;
	void *ud;
	sync_call_t *sync; /* set when a worker waits for this request */

	/* Retry bookkeeping, across attempts. */
	ev_timer timer;
	bool token_held; /* a rate-limiter token is reserved for the next start */
	int retries;
	int attempts; /* attempts sent so far, for the trace */
	bool auth_refreshed;
	bool force_refresh;      /* the next start asks for a new credential (after a 401) */
	bool exec_ran;           /* the plugin run this request waited for succeeded */
	char *exec_err;          /* or failed, with this error */
	int unauth_code;         /* 401 while retrying a 401, so that a failed refresh... */
	ck_status_t unauth_status; /* ...still reports the server's Status */
	unsigned cred_gen;       /* generation of the credential the current attempt used */
	uint64_t delivered; /* callbacks made to ucb: past this point a retry would repeat them */

	/* The current attempt. */
	CURL *easy;
	struct curl_slist *headers;
	char errbuf[CURL_ERROR_SIZE];
	long code;       /* HTTP status, 0 until the first body byte or the end */
	int retry_after; /* Retry-After seconds, -1 when absent */
	uint64_t body_bytes;
	ck_dec_t *dec;
	ck_sbuf_t errbody;
	ck_sbuf_t keep;
	char *abort_err; /* why the write callback stopped the transfer */
	uint64_t start_ns;
	bool conn_counted; /* its CURLINFO_NUM_CONNECTS (and its response head) is in c->conn */

	ck_result_t res;
};

struct ck_client {
	struct ev_loop *loop;
	ck_config_t *cfg;
	struct ck_config_view view;
	const ck_clk_t *clock;

	double qps;
	int burst;
	char *user_agent;
	uint32_t connect_timeout_ms;
	uint32_t request_timeout_ms;
	uint32_t stall_timeout_ms;
	int max_retries;
	size_t max_object_bytes;

	char *base; /* server URL without trailing slash: request URLs, messages */
	char *host;
	/*
	 * tls-server-name (when it differs from the server's host): curl is given
	 * tls_base, the server URL with the TLS name as its host, so that it sends
	 * that SNI and verifies the certificate for it; connect_to sends it to the
	 * real address (directly, or in the proxy's CONNECT), and host_header keeps
	 * the Host header the server's, as client-go does.
	 */
	char *tls_base;
	struct curl_slist *connect_to;
	char *host_header; /* "Host: <host>" */

	CURLM *multi;
	ev_timer curl_timer;
	ev_async async;
	ev_prepare prepare;
	ksock_t *socks;
	ck_req_t *reqs;
	int in_curl;  /* > 0 while curl_multi_socket_action is on the stack */
	ck_tb_t bucket; /* loop thread only */
	_Atomic pid_t loop_tid;

	/* The exec plugin's helper thread. exec_busy is the loop thread's; exec_rc and
	 * exec_err are the helper's until the loop has joined it. */
	bool exec_busy;
	pthread_t exec_thread;
	ev_async exec_async;
	atomic_bool exec_finished;
	int exec_rc;
	char *exec_err;
	uint64_t exec_start_ns;

	pthread_mutex_t mu; /* queue, shutting_down, waiters */
	pthread_cond_t idle;
	sync_call_t *queue_head, *queue_tail;
	bool shutting_down;
	int waiters;

	pthread_mutex_t stats_mu;
	stat_entry_t *stats;
	size_t nstats, capstats;
	lat_hist_t lat[NMETHODS]; /* indexed like methods[] */
	ck_client_conn_stats_t conn;
};

static void req_timer_cb(struct ev_loop *loop, ev_timer *w, int revents);
static void multi_process(ck_client_t *c);
static char *status_message(const ck_req_t *r, const char *refresh_err);

/* ---------------------------------------------------------------- helpers */

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static uint64_t now_ns(const ck_client_t *c)
{
	return ck_clk_mono_ns(c->clock);
}

/* Returns the static spelling of a known method (in methods[]), or NULL. */
static const char *method_static(const char *m)
{
	if (m == NULL)
		return NULL;
	for (size_t i = 0; i < NMETHODS; i++)
		if (strcmp(m, methods[i]) == 0)
			return methods[i];
	return NULL;
}

/* Index in methods[] of a method_static() pointer. */
static size_t method_index(const char *m)
{
	for (size_t i = 0; i < NMETHODS; i++)
		if (m == methods[i])
			return i;
	ck_fatal("client: method %s not from method_static", m);
}

/* Appends s percent-encoded: everything but RFC 3986 unreserved characters. */
static void put_escaped(ck_sbuf_t *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
			ck_sbuf_putc(b, (char)*p);
		} else {
			ck_sbuf_putc(b, '%');
			ck_sbuf_putc(b, hex[*p >> 4]);
			ck_sbuf_putc(b, hex[*p & 15]);
		}
	}
}

static void put_param(ck_sbuf_t *b, const char *key, const char *value)
{
	if (b->len > 0)
		ck_sbuf_putc(b, '&');
	ck_sbuf_puts(b, key);
	ck_sbuf_putc(b, '=');
	put_escaped(b, value);
}

/* Returns a new URL for spec, free with free(). */
static char *build_url(const ck_client_t *c, const ck_req_spec_t *spec)
{
	const ck_type_t *t = spec->type;
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, c->base);
	if (t->group == NULL || t->group[0] == '\0')
		ck_sbuf_printf(&b, "/api/%s", t->version);
	else
		ck_sbuf_printf(&b, "/apis/%s/%s", t->group, t->version);
	if (t->namespaced && spec->ns != NULL && spec->ns[0] != '\0') {
		ck_sbuf_puts(&b, "/namespaces/");
		put_escaped(&b, spec->ns);
	}
	ck_sbuf_putc(&b, '/');
	ck_sbuf_puts(&b, t->resource);
	if (spec->name != NULL) {
		ck_sbuf_putc(&b, '/');
		put_escaped(&b, spec->name);
	}
	if (spec->subresource != NULL && spec->subresource[0] != '\0') {
		ck_sbuf_putc(&b, '/');
		ck_sbuf_puts(&b, spec->subresource);
	}
	if (spec->query != NULL && spec->query[0] != '\0') {
		ck_sbuf_putc(&b, '?');
		ck_sbuf_puts(&b, spec->query);
	}
	return ck_sbuf_steal(&b);
}

char *ck_list_opts_query(const ck_list_opts_t *o, bool watch)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	if (watch)
		put_param(&b, "watch", "true");
	if (o != NULL) {
		bool cont = !watch && o->continue_token != NULL && o->continue_token[0] != '\0';
		if (o->label_selector != NULL && o->label_selector[0] != '\0')
			put_param(&b, "labelSelector", o->label_selector);
		if (o->field_selector != NULL && o->field_selector[0] != '\0')
			put_param(&b, "fieldSelector", o->field_selector);
		/* "" means "most recent", which is what leaving it out means too. */
		if (!cont && o->resource_version != NULL && o->resource_version[0] != '\0')
			put_param(&b, "resourceVersion", o->resource_version);
		if (!cont && o->resource_version_match != NULL &&
		    o->resource_version_match[0] != '\0')
			put_param(&b, "resourceVersionMatch", o->resource_version_match);
		if (!watch && o->limit > 0) {
			char n[24];
			snprintf(n, sizeof(n), "%lld", (long long)o->limit);
			put_param(&b, "limit", n);
		}
		if (cont)
			put_param(&b, "continue", o->continue_token);
		if (watch && o->allow_watch_bookmarks)
			put_param(&b, "allowWatchBookmarks", "true");
		if (watch && o->timeout_seconds > 0) {
			char n[24];
			snprintf(n, sizeof(n), "%lld", (long long)o->timeout_seconds);
			put_param(&b, "timeoutSeconds", n);
		}
		if (watch && o->send_initial_events)
			put_param(&b, "sendInitialEvents", "true");
	}
	if (b.len == 0)
		return ck_xstrdup("");
	return ck_sbuf_steal(&b);
}

char *ck_write_opts_query(const ck_write_opts_t *o, bool apply)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	/* No default name: as in client-go, without one the API server names the
	 * manager after the user agent (server-side apply requires one). */
	if (o != NULL && o->field_manager != NULL && o->field_manager[0] != '\0')
		put_param(&b, "fieldManager", o->field_manager);
	if (o != NULL && o->dry_run)
		put_param(&b, "dryRun", "All");
	if (apply && o != NULL && o->force)
		put_param(&b, "force", "true");
	return ck_sbuf_steal(&b);
}

const char *ck_patch_content_type(ck_patch_type_t pt)
{
	switch (pt) {
	case CK_PATCH_MERGE:
		return "application/merge-patch+json";
	case CK_PATCH_STRATEGIC:
		return "application/strategic-merge-patch+json";
	case CK_PATCH_JSON:
		return "application/json-patch+json";
	case CK_PATCH_APPLY:
		return "application/apply-patch+yaml";
	}
	return "application/merge-patch+json";
}

char *ck_delete_opts_body(const ck_delete_opts_t *o)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\"");
	if (o != NULL && o->propagation_policy != NULL) {
		ck_sbuf_puts(&b, ",\"propagationPolicy\":");
		ck_sbuf_put_json_str(&b, o->propagation_policy);
	}
	if (o != NULL && o->grace_period_seconds >= 0)
		ck_sbuf_printf(&b, ",\"gracePeriodSeconds\":%lld", (long long)o->grace_period_seconds);
	if (o != NULL && (o->precondition_uid != NULL || o->precondition_rv != NULL)) {
		ck_sbuf_puts(&b, ",\"preconditions\":{");
		if (o->precondition_uid != NULL) {
			ck_sbuf_puts(&b, "\"uid\":");
			ck_sbuf_put_json_str(&b, o->precondition_uid);
		}
		if (o->precondition_rv != NULL) {
			if (o->precondition_uid != NULL)
				ck_sbuf_putc(&b, ',');
			ck_sbuf_puts(&b, "\"resourceVersion\":");
			ck_sbuf_put_json_str(&b, o->precondition_rv);
		}
		ck_sbuf_putc(&b, '}');
	}
	ck_sbuf_putc(&b, '}');
	return ck_sbuf_steal(&b);
}

/* ---------------------------------------------------------------- figures */

static void stats_record(ck_client_t *c, const char *method, int code, bool timed, double secs)
{
	pthread_mutex_lock(&c->stats_mu);
	size_t i;
	for (i = 0; i < c->nstats; i++)
		if (c->stats[i].method == method && c->stats[i].code == code)
			break;
	if (i == c->nstats) {
		if (c->nstats == c->capstats) {
			c->capstats = c->capstats ? c->capstats * 2 : 16;
			c->stats = ck_xrealloc(c->stats, c->capstats * sizeof(*c->stats));
		}
		c->stats[c->nstats++] = (stat_entry_t){method, code, 0};
	}
	c->stats[i].count++;
	if (timed) {
		lat_hist_t *h = &c->lat[method_index(method)];
		for (size_t k = 0; k < CK_CLIENT_LATENCY_NBUCKETS; k++)
			if (secs <= latency_bounds[k])
				h->counts[k]++;
		h->sum += secs;
		h->count++;
	}
	pthread_mutex_unlock(&c->stats_mu);
}

/*
 * Adds the current attempt's new connections to the figures, once per attempt.
 * CURLINFO_NUM_CONNECTS is known once the transfer has connected; waiting for
 * the attempt to end would leave out a watch's connection for as long as it
 * streams, so this runs at the response head, and at the end for attempts that
 * never got one. Loop thread.
 */
static void conn_count(ck_req_t *r)
{
	if (r->conn_counted || r->easy == NULL)
		return;
	r->conn_counted = true;
	long n = 0;
	if (curl_easy_getinfo(r->easy, CURLINFO_NUM_CONNECTS, &n) != CURLE_OK || n <= 0)
		return;
	pthread_mutex_lock(&r->c->stats_mu);
	r->c->conn.connections += (uint64_t)n;
	pthread_mutex_unlock(&r->c->stats_mu);
}

/* A response head arrived for the current attempt (the first status line). */
static void conn_response(ck_req_t *r)
{
	long v = CURL_HTTP_VERSION_NONE;
	curl_easy_getinfo(r->easy, CURLINFO_HTTP_VERSION, &v);
	conn_count(r);
	ck_client_conn_stats_t *s = &r->c->conn;
	pthread_mutex_lock(&r->c->stats_mu);
	s->responses++;
	switch (v) {
	case CURL_HTTP_VERSION_1_0:
		s->responses_http1++;
		s->last_http_version = 10;
		break;
	case CURL_HTTP_VERSION_1_1:
		s->responses_http1++;
		s->last_http_version = 11;
		break;
	case CURL_HTTP_VERSION_2_0:
		s->responses_http2++;
		s->last_http_version = 20;
		break;
	case CURL_HTTP_VERSION_3:
		s->responses_http3++;
		s->last_http_version = 30;
		break;
	default:
		s->last_http_version = 0;
		break;
	}
	pthread_mutex_unlock(&r->c->stats_mu);
}

void ck_client_stats_foreach(ck_client_t *c, ck_client_request_stat_cb cb, void *ud)
{
	pthread_mutex_lock(&c->stats_mu);
	size_t n = c->nstats;
	stat_entry_t *copy = ck_xmalloc((n ? n : 1) * sizeof(*copy));
	if (n)
		memcpy(copy, c->stats, n * sizeof(*copy));
	pthread_mutex_unlock(&c->stats_mu);
	for (size_t i = 0; i < n; i++)
		cb(ud, copy[i].method, copy[i].code, copy[i].count);
	free(copy);
}

/* Fills *out from h (a copy) and the shared bucket bounds. */
static void latency_fill(ck_client_latency_t *out, const char *verb, const lat_hist_t *h)
{
	out->verb = verb;
	memcpy(out->bounds, latency_bounds, sizeof(latency_bounds));
	memcpy(out->counts, h->counts, sizeof(out->counts));
	out->sum = h->sum;
	out->count = h->count;
}

void ck_client_latency_snapshot(ck_client_t *c, ck_client_latency_t *out)
{
	lat_hist_t total = {0};
	pthread_mutex_lock(&c->stats_mu);
	for (size_t m = 0; m < NMETHODS; m++) {
		for (size_t k = 0; k < CK_CLIENT_LATENCY_NBUCKETS; k++)
			total.counts[k] += c->lat[m].counts[k];
		total.sum += c->lat[m].sum;
		total.count += c->lat[m].count;
	}
	pthread_mutex_unlock(&c->stats_mu);
	latency_fill(out, NULL, &total);
}

void ck_client_latency_foreach(ck_client_t *c, ck_client_latency_cb cb, void *ud)
{
	lat_hist_t copy[NMETHODS];
	pthread_mutex_lock(&c->stats_mu);
	memcpy(copy, c->lat, sizeof(copy));
	pthread_mutex_unlock(&c->stats_mu);
	for (size_t m = 0; m < NMETHODS; m++) {
		if (copy[m].count == 0)
			continue;
		ck_client_latency_t lat;
		latency_fill(&lat, methods[m], &copy[m]);
		cb(ud, &lat);
	}
}

void ck_client_conn_stats_snapshot(ck_client_t *c, ck_client_conn_stats_t *out)
{
	pthread_mutex_lock(&c->stats_mu);
	*out = c->conn;
	pthread_mutex_unlock(&c->stats_mu);
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
static void req_attempt_reset(ck_req_t *r)
{
	if (r->easy != NULL) {
		conn_count(r); /* cancelled in flight: its connection was opened all the same */
		curl_multi_remove_handle(r->c->multi, r->easy);
		curl_easy_cleanup(r->easy);
		r->easy = NULL;
	}
	curl_slist_free_all(r->headers);
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

static void req_free(ck_req_t *r)
{
	ck_client_t *c = r->c;
	if (r->state == KREQ_WAIT)
		ev_timer_stop(c->loop, &r->timer);
	if ((r->state == KREQ_WAIT || r->state == KREQ_CRED) && r->token_held)
		ck_tb_unreserve(&c->bucket, now_ns(c));
	req_attempt_reset(r);
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

/* Moves a finished worker's result over and wakes the worker. */
static void sync_complete(ck_client_t *c, sync_call_t *call, ck_result_t *res)
{
	pthread_mutex_lock(&c->mu);
	*call->res = *res;
	memset(res, 0, sizeof(*res));
	call->done = true;
	pthread_cond_signal(&call->cond);
	pthread_mutex_unlock(&c->mu);
}

static void sync_fail(ck_client_t *c, sync_call_t *call, const char *msg)
{
	ck_result_t res = {0};
	res.error = ck_xstrdup(msg);
	sync_complete(c, call, &res);
}

/* Ends the request: the caller learns the result, then the request is freed. */
static void req_complete(ck_req_t *r)
{
	r->state = KREQ_DONE;
	if (r->sync != NULL)
		sync_complete(r->c, r->sync, &r->res);
	else if (r->done != NULL)
		r->done(r->ud, &r->res);
	req_free(r);
}

/* Back to WAIT for delay seconds (0 = next loop iteration). */
static void req_schedule(ck_req_t *r, double delay)
{
	r->state = KREQ_WAIT;
	ev_timer_set(&r->timer, delay, 0.);
	ev_timer_start(r->c->loop, &r->timer);
}

static void req_fail_transport(ck_req_t *r, int transport_code, const char *why)
{
	r->res.http_code = 0;
	r->res.transport_code = transport_code;
	r->res.error = ck_xasprintf("%s %s: %s", r->method, r->url, why);
	req_complete(r);
}

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
			conn_response(r);
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
	ck_client_t *c = r->c;
	size_t len = size * n;
	if (r->cancelled)
		return 0; /* aborts the transfer */
	if (r->code == 0)
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->code);
	r->body_bytes += len;
	if (r->code < 200 || r->code >= 300) {
		if (r->errbody.len < MAX_ERROR_BODY) {
			size_t room = MAX_ERROR_BODY - r->errbody.len;
			ck_sbuf_append(&r->errbody, ptr, len < room ? len : room);
		}
		return len;
	}
	if (r->keep_body) {
		if (r->keep.len + len > c->max_object_bytes) {
			r->abort_err =
			    ck_xasprintf("response body larger than %zu bytes", c->max_object_bytes);
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
	CK_LOG_V(5, "Exec credential plugin finished", CK_KV_BOOL("ok", rc == 0),
	      CK_KV_INT("milliseconds", (int64_t)((now_ns(c) - c->exec_start_ns) / CK_NS_PER_MS)));
	for (ck_req_t *r = c->reqs; r != NULL; r = r->next) {
		if (r->state != KREQ_CRED)
			continue;
		if (rc == 0)
			r->exec_ran = true;
		else
			r->exec_err = ck_xstrdup(err ? err : "exec plugin failed");
		req_schedule(r, 0);
	}
	free(err);
}

/* The helper said it is done: join it, then resume the parked requests. */
static void exec_async_cb(struct ev_loop *loop, ev_async *w, int revents)
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
	r->state = KREQ_CRED;
	/* The rate-limiter token taken for this start waits with the request (given
	 * back if it is cancelled meanwhile). */
	r->token_held = ck_tb_enabled(&c->bucket);
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
		r->res.error = status_message(r, err ? err : "failed");
		req_complete(r);
		return;
	}
	char *why = ck_xasprintf("credentials: %s", err ? err : "failed");
	req_fail_transport(r, 0, why);
	free(why);
}

/*
 * Sets up and adds an easy handle for the next attempt; parks r when the exec
 * plugin must run first; completes r on failure.
 */
static void req_start_attempt(ck_req_t *r)
{
	ck_client_t *c = r->c;
	ck_cred_t cred = {0};
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
		rc = ck_config_credentials_peek(c->cfg, want, &cred, &err);
	}
	r->exec_ran = false;
	if (rc == CK_CONFIG_NEED_EXEC) {
		req_park(r);
		return;
	}
	r->force_refresh = false;
	if (rc < 0) {
		req_fail_credentials(r, err);
		free(err);
		return;
	}
	r->unauth_code = 0;
	ck_status_clear(&r->unauth_status);

	CURL *e = curl_easy_init();
	if (e == NULL) {
		ck_cred_clear(&cred);
		req_fail_transport(r, CURLE_FAILED_INIT, "curl_easy_init failed");
		return;
	}
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
	if (r->timeout_ms > 0) {
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)r->timeout_ms);
	} else if (r->decode == CK_DEC_LIST && !r->no_decode && !r->is_watch) {
		/* A list streams for as long as it is big: no total limit, only a guard
		 * against a peer that stopped sending (a total limit would make an
		 * unpaged relist of a big, slow cluster fail and restart forever). */
		long secs = (long)((c->stall_timeout_ms + 999u) / 1000u);
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, secs);
	} else if (!r->is_watch) {
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)c->request_timeout_ms);
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
	if (cred.cert_pem != NULL && cred.key_pem != NULL) {
		struct curl_blob cert = {cred.cert_pem, cred.cert_len, CURL_BLOB_COPY};
		struct curl_blob key = {cred.key_pem, cred.key_len, CURL_BLOB_COPY};
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
	if (cred.token == NULL && c->view.username != NULL && c->view.username[0] != '\0') {
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
	if (cred.token != NULL && cred.token[0] != '\0') {
		char *auth = ck_xasprintf("Authorization: Bearer %s", cred.token);
		h = curl_slist_append(h, auth);
		memset(auth, 0, strlen(auth));
		free(auth);
	}
	r->cred_gen = cred.generation;
	ck_cred_clear(&cred);
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

	r->state = KREQ_FLIGHT;
	r->attempts++;
	r->start_ns = now_ns(c);
	CURLMcode mc = curl_multi_add_handle(c->multi, e);
	if (mc != CURLM_OK) {
		curl_easy_cleanup(e);
		r->easy = NULL;
		r->state = KREQ_DONE;
		req_fail_transport(r, CURLE_FAILED_INIT, curl_multi_strerror(mc));
	}
}

/* A WAIT ended: take a rate-limiter token (maybe waiting again), then start. */
static void req_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	ck_req_t *r = (ck_req_t *)((char *)w - offsetof(ck_req_t, timer));
	ck_client_t *c = r->c;
	if (!r->token_held && ck_tb_enabled(&c->bucket)) {
		uint64_t wait = ck_tb_reserve(&c->bucket, now_ns(c));
		r->token_held = true;
		if (wait > 0) {
			req_schedule(r, (double)wait / 1e9);
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
static char *status_message(const ck_req_t *r, const char *refresh_err)
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
		      CK_KV_UINT("bytes", r->body_bytes), CK_KV_INT("attempt", r->attempts), CK_KV_ERR(err));
	else
		CK_LOG_V(5, "Response", CK_KV_STR("verb", r->method), CK_KV_STR("url", req_path(r)),
		      CK_KV_INT("status", r->code), CK_KV_INT("milliseconds", ms),
		      CK_KV_UINT("bytes", r->body_bytes), CK_KV_INT("attempt", r->attempts));
}

/* -v=5: why the request goes round again, and when. */
static void req_trace_retry(const ck_req_t *r, const char *why, double delay)
{
	CK_LOG_V(5, "Retrying request", CK_KV_STR("verb", r->method), CK_KV_STR("url", req_path(r)),
	      CK_KV_STR("reason", why), CK_KV_INT("delayMilliseconds", (int64_t)(delay * 1000.0)),
	      CK_KV_INT("attempt", r->attempts + 1));
}

/* The current attempt ended with cc; decide: complete, or retry. */
static void req_attempt_done(ck_req_t *r, CURLcode cc)
{
	ck_client_t *c = r->c;
	if (r->code == 0)
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->code);
	double secs = (double)(now_ns(c) - r->start_ns) / 1e9;
	bool transport = cc != CURLE_OK && r->abort_err == NULL;
	stats_record(c, r->method, transport ? 0 : (int)r->code, !r->is_watch, secs);
	conn_count(r);
	req_trace(r, cc, secs);
	curl_multi_remove_handle(c->multi, r->easy);
	curl_easy_cleanup(r->easy);
	r->easy = NULL;

	if (r->cancelled) {
		req_free(r);
		return;
	}

	if (r->abort_err != NULL) {
		r->res.http_code = (int)r->code;
		r->res.error = ck_xasprintf("%s %s: %s", r->method, r->url, r->abort_err);
		req_complete(r);
		return;
	}

	if (transport) {
		if (strcmp(r->method, "GET") == 0 && transport_retryable(cc) && r->delivered == 0 &&
		    r->retries < c->max_retries) {
			r->retries++;
			req_trace_retry(r, "connection failed before any data",
			                RESET_RETRY_SECONDS);
			req_attempt_reset(r);
			req_schedule(r, RESET_RETRY_SECONDS);
			return;
		}
		const char *why = r->errbuf[0] ? r->errbuf : curl_easy_strerror(cc);
		char *msg = ck_xasprintf("%s (curl error %d)", why, (int)cc);
		req_fail_transport(r, (int)cc, msg);
		free(msg);
		return;
	}

	if (r->code >= 200 && r->code < 300) {
		char *err = NULL;
		if (r->dec != NULL && ck_dec_finish(r->dec, &err) < 0) {
			r->res.http_code = (int)r->code;
			r->res.error = ck_xasprintf("%s %s: decoding the response body: %s", r->method,
			                         r->url, err ? err : "failed");
			free(err);
			req_complete(r);
			return;
		}
		r->res.http_code = (int)r->code;
		if (r->keep_body) {
			r->res.body_len = r->keep.len;
			ck_sbuf_cstr(&r->keep);
			r->res.body = ck_sbuf_steal(&r->keep);
		}
		req_complete(r);
		return;
	}

	ck_status_parse(r->errbody.data ? r->errbody.data : "", r->errbody.len, (int)r->code,
	              &r->res.status);
	if (r->res.status.retry_after_seconds == 0 && r->retry_after > 0)
		r->res.status.retry_after_seconds = r->retry_after;

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
		req_trace_retry(r, "401: retrying with refreshed credentials", 0);
		req_attempt_reset(r);
		req_schedule(r, 0);
		return;
	}
	ck_cred_clear(&cred);
	if ((r->code == 429 || r->code >= 500) && r->retry_after >= 0 &&
	    r->retries < c->max_retries) {
		int delay = r->retry_after;
		r->retries++;
		req_trace_retry(r, r->code == 429 ? "429 with Retry-After" : "5xx with Retry-After",
		                delay);
		req_attempt_reset(r);
		req_schedule(r, delay);
		return;
	}
	r->res.http_code = (int)r->code;
	r->res.error = status_message(r, NULL);
	req_complete(r);
}

/* After curl ran: drop requests cancelled meanwhile, then handle finished transfers. */
static void multi_process(ck_client_t *c)
{
	for (ck_req_t *r = c->reqs, *next; r != NULL; r = next) {
		next = r->next;
		if (r->cancelled && r->state == KREQ_FLIGHT)
			req_free(r);
	}
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(c->multi, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		char *priv = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
		if (priv != NULL)
			req_attempt_done((ck_req_t *)priv, msg->data.result);
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

static void curl_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	ck_client_t *c = (ck_client_t *)((char *)w - offsetof(ck_client_t, curl_timer));
	socket_action(c, CURL_SOCKET_TIMEOUT, 0);
}

static int multi_socket_cb(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
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

static int multi_timer_cb(CURLM *m, long timeout_ms, void *userp)
{
	ck_client_t *c = userp;
	ev_timer_stop(c->loop, &c->curl_timer);
	if (timeout_ms >= 0) {
		ev_timer_set(&c->curl_timer, (double)timeout_ms / 1000.0, 0.);
		ev_timer_start(c->loop, &c->curl_timer);
	}
	return 0;
}

/* ---------------------------------------------------------------- threads */

static void prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	ck_client_t *c = (ck_client_t *)((char *)w - offsetof(ck_client_t, prepare));
	atomic_store(&c->loop_tid, gettid());
}

static ck_req_t *request_start(ck_client_t *c, const ck_req_spec_t *spec, const ck_dec_cb_t *dcb,
                             ck_req_done_cb done, void *ud, sync_call_t *sync, char **err);

/* Workers queued requests: start them on the loop. */
static void async_cb(struct ev_loop *loop, ev_async *w, int revents)
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
		if (request_start(c, call->spec, call->dcb, NULL, call->ud, call, &err) == NULL) {
			sync_fail(c, call, err ? err : "request failed");
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

int ck_client_do_sync_stream(ck_client_t *c, const ck_req_spec_t *spec, const ck_dec_cb_t *dcb, void *ud,
                           ck_result_t *res)
{
	return sync_run(c, spec, dcb, ud, res);
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

ck_client_t *ck_client_new(struct ev_loop *loop, ck_config_t *cfg, const ck_client_opts_t *opts, char **err)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, curl_init_once);
	if (loop == NULL || cfg == NULL) {
		ck_config_free(cfg);
		ck_err_set(err, "client: no loop or no configuration");
		return NULL;
	}
	ck_client_opts_t o = opts ? *opts : (ck_client_opts_t){0};
	ck_client_t *c = ck_xcalloc(1, sizeof(*c));
	c->loop = loop;
	c->cfg = cfg;
	ck_config_view(cfg, &c->view);
	c->clock = o.clock ? o.clock : ck_clk_real();
	c->qps = o.qps == 0 ? DEFAULT_QPS : o.qps;
	c->burst = o.burst > 0 ? o.burst : DEFAULT_BURST;
	/* As client-go: the program's name unless the caller names itself. */
	c->user_agent = o.user_agent ? ck_xstrdup(o.user_agent)
	                             : ck_xasprintf("%s (linux) libckube/" CSC_VERSION,
	                                            program_invocation_short_name);
	c->connect_timeout_ms =
	    o.connect_timeout_ms ? o.connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
	c->request_timeout_ms =
	    o.request_timeout_ms ? o.request_timeout_ms : DEFAULT_REQUEST_TIMEOUT_MS;
	c->stall_timeout_ms = o.stall_timeout_ms ? o.stall_timeout_ms : DEFAULT_STALL_TIMEOUT_MS;
	c->max_retries =
	    o.max_retries == 0 ? DEFAULT_MAX_RETRIES : (o.max_retries < 0 ? 0 : o.max_retries);
	c->max_object_bytes = o.max_object_bytes ? o.max_object_bytes : CK_DEC_DEFAULT_MAX_OBJECT;
	ck_tb_init(&c->bucket, c->qps, c->burst, now_ns(c));
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->idle, NULL);
	pthread_mutex_init(&c->stats_mu, NULL);
	atomic_store(&c->loop_tid, gettid());

	if (parse_server(c, err) < 0)
		goto fail;

	c->multi = curl_multi_init();
	if (c->multi == NULL) {
		ck_err_set(err, "client: curl_multi_init failed");
		goto fail;
	}
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, multi_socket_cb);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, multi_timer_cb);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);

	ev_init(&c->curl_timer, curl_timer_cb);
	ev_async_init(&c->exec_async, exec_async_cb);
	atomic_init(&c->exec_finished, false);
	ev_async_init(&c->async, async_cb);
	ev_async_start(loop, &c->async);
	ev_unref(loop);
	ev_prepare_init(&c->prepare, prepare_cb);
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
		sync_fail(c, call, "client shutting down");
	}
	while (c->reqs != NULL) {
		ck_req_t *r = c->reqs;
		if (r->sync != NULL) {
			ck_result_clear(&r->res);
			r->res.error = ck_xasprintf("%s %s: client shutting down", r->method, r->url);
			sync_complete(c, r->sync, &r->res);
		}
		req_free(r);
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
	free(c->stats);
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

/* ---------------------------------------------------------------- async API */

static ck_req_t *request_start(ck_client_t *c, const ck_req_spec_t *spec, const ck_dec_cb_t *dcb,
                             ck_req_done_cb done, void *ud, sync_call_t *sync, char **err)
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
	r->timeout_ms = spec->timeout_ms;
	r->url = build_url(c, spec);
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
	req_schedule(r, 0);
	return r;
}

ck_req_t *ck_client_request(ck_client_t *c, const ck_req_spec_t *spec, const ck_dec_cb_t *dcb,
                        ck_req_done_cb done, void *ud, char **err)
{
	if (done == NULL) {
		ck_err_set(err, "client: request without a done callback");
		return NULL;
	}
	return request_start(c, spec, dcb, done, ud, NULL, err);
}

void ck_req_cancel(ck_req_t *r)
{
	if (r == NULL || r->cancelled)
		return;
	r->cancelled = true;
	switch (r->state) {
	case KREQ_WAIT:
	case KREQ_CRED: /* the plugin run goes on for whoever else needs it */
		req_free(r);
		break;
	case KREQ_FLIGHT:
		/* curl may be on the stack (a decoder callback): multi_process frees it. */
		if (r->c->in_curl == 0)
			req_free(r);
		break;
	case KREQ_DONE:
		break; /* its done callback is running; it is freed right after */
	}
}

ck_req_t *ck_client_list(ck_client_t *c, const ck_type_t *t, const char *ns, const ck_list_opts_t *o,
                     const ck_dec_cb_t *dcb, ck_req_done_cb done, void *ud, char **err)
{
	char *q = ck_list_opts_query(o, false);
	ck_req_spec_t spec = {.method = "GET", .type = t, .ns = ns, .query = q, .decode = CK_DEC_LIST};
	ck_req_t *r = ck_client_request(c, &spec, dcb, done, ud, err);
	free(q);
	return r;
}

ck_req_t *ck_client_watch(ck_client_t *c, const ck_type_t *t, const char *ns, const ck_list_opts_t *o,
                      const ck_dec_cb_t *dcb, ck_req_done_cb done, void *ud, char **err)
{
	char *q = ck_list_opts_query(o, true);
	ck_req_spec_t spec = {.method = "GET",
	                    .type = t,
	                    .ns = ns,
	                    .query = q,
	                    .decode = CK_DEC_WATCH,
	                    .is_watch = true};
	/* The server ends the watch after timeoutSeconds; if it goes silent instead (a
	 * dead peer behind a proxy), give up a minute later. */
	if (o != NULL && o->timeout_seconds > 0 && o->timeout_seconds < 24 * 3600)
		spec.timeout_ms = (uint32_t)(o->timeout_seconds + 60) * 1000u;
	ck_req_t *r = ck_client_request(c, &spec, dcb, done, ud, err);
	free(q);
	return r;
}

/* ---------------------------------------------------------------- blocking verbs */

int ck_client_get_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                     ck_result_t *res)
{
	ck_req_spec_t spec = {
	    .method = "GET", .type = t, .ns = ns, .name = name, .decode = CK_DEC_OBJECT};
	return ck_client_do_sync(c, &spec, res);
}

static int write_sync(ck_client_t *c, const char *method, const ck_type_t *t, const char *ns,
                      const char *name, const char *sub, const char *ctype, bool apply,
                      const char *body, const ck_write_opts_t *o, ck_result_t *res)
{
	char *q = ck_write_opts_query(o, apply);
	ck_req_spec_t spec = {.method = method,
	                    .type = t,
	                    .ns = ns,
	                    .name = name,
	                    .subresource = sub,
	                    .query = q,
	                    .content_type = ctype,
	                    .body = body ? body : "",
	                    .body_len = body ? strlen(body) : 0,
	                    .decode = CK_DEC_OBJECT};
	int rc = ck_client_do_sync(c, &spec, res);
	free(q);
	return rc;
}

int ck_client_create_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *body,
                        const ck_write_opts_t *o, ck_result_t *res)
{
	return write_sync(c, "POST", t, ns, NULL, NULL, NULL, false, body, o, res);
}

int ck_client_update_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                        const char *body, const ck_write_opts_t *o, ck_result_t *res)
{
	return write_sync(c, "PUT", t, ns, name, NULL, NULL, false, body, o, res);
}

int ck_client_update_status_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                               const char *body, const ck_write_opts_t *o, ck_result_t *res)
{
	return write_sync(c, "PUT", t, ns, name, "status", NULL, false, body, o, res);
}

int ck_client_patch_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                       ck_patch_type_t pt, const char *body, const ck_write_opts_t *o, ck_result_t *res)
{
	return write_sync(c, "PATCH", t, ns, name, NULL, ck_patch_content_type(pt),
	                  pt == CK_PATCH_APPLY, body, o, res);
}

int ck_client_delete_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                        const ck_delete_opts_t *o, ck_result_t *res)
{
	char *body = o != NULL ? ck_delete_opts_body(o) : NULL;
	ck_req_spec_t spec = {.method = "DELETE",
	                    .type = t,
	                    .ns = ns,
	                    .name = name,
	                    .body = body,
	                    .body_len = body ? strlen(body) : 0,
	                    .no_decode = true};
	int rc = ck_client_do_sync(c, &spec, res);
	free(body);
	return rc;
}

/* list_sync's page collector; runs on the loop thread while the worker waits. */
typedef struct list_acc {
	ck_obj_t **items;
	size_t n, cap;
	char *rv;
	char *cont;
} list_acc_t;

static void acc_object(void *ud, ck_obj_t *obj)
{
	list_acc_t *a = ud;
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 64;
		a->items = ck_xrealloc(a->items, a->cap * sizeof(*a->items));
	}
	a->items[a->n++] = obj;
}

static void acc_meta(void *ud, const char *rv, const char *cont, int64_t remaining)
{
	list_acc_t *a = ud;
	free(a->rv);
	free(a->cont);
	a->rv = ck_xstrdup(rv ? rv : "");
	a->cont = ck_xstrdup(cont ? cont : "");
}

int ck_client_list_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const ck_list_opts_t *o,
                      ck_obj_t ***items, size_t *nitems, char **list_rv, ck_result_t *res)
{
	static const ck_dec_cb_t acc_cb = {.on_object = acc_object, .on_list_meta = acc_meta};
	ck_list_opts_t page = o ? *o : (ck_list_opts_t){0};
	list_acc_t a = {0};
	char *token = NULL; /* the continue token of the page being asked for */
	bool restarted = false;
	int rc;
	for (;;) {
		page.continue_token = token;
		bool paged = token != NULL;
		char *q = ck_list_opts_query(&page, false);
		ck_req_spec_t spec = {
		    .method = "GET", .type = t, .ns = ns, .query = q, .decode = CK_DEC_LIST};
		rc = ck_client_do_sync_stream(c, &spec, &acc_cb, &a, res);
		free(q);
		free(token);
		token = a.cont;
		a.cont = NULL;
		if (rc < 0 && ck_err_is_gone(res) && paged && !restarted) {
			/* The continue token expired: one full list instead of pages. */
			restarted = true;
			for (size_t i = 0; i < a.n; i++)
				ck_obj_unref(a.items[i]);
			a.n = 0;
			ck_result_clear(res);
			page = o ? *o : (ck_list_opts_t){0};
			page.limit = 0;
			free(token);
			token = NULL;
			continue;
		}
		if (rc < 0 || token == NULL || token[0] == '\0')
			break;
		ck_result_clear(res);
	}
	free(token);
	if (rc < 0) {
		for (size_t i = 0; i < a.n; i++)
			ck_obj_unref(a.items[i]);
		free(a.items);
		a.items = NULL;
		a.n = 0;
	}
	*items = a.items;
	*nitems = a.n;
	if (list_rv != NULL)
		*list_rv = rc == 0 ? ck_xstrdup(a.rv ? a.rv : "") : NULL;
	free(a.rv);
	return rc;
}
