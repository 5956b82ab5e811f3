/*
 * client_internal: what the files of the REST client (client*.c) share; not a
 * public header. The two objects (ck_client_t, ck_req_t) and the functions one
 * concern's file calls in another's. Everything here is hidden from the library's
 * API (-fvisibility=hidden, no CKUBE_API); the ck_client_i_ prefix marks what is
 * shared only between these files.
 *
 *   client.c            the client object: options, ck_client_new/free, accessors
 *   client_transport.c  the curl multi handle on libev, easy handles, TLS options
 *   client_request.c    a request's lifecycle: attempts, retries, Retry-After, limiter
 *   client_creds.c      credentials for an attempt, the exec plugin thread, 401s
 *   client_sync.c       worker threads handing requests to the loop and waiting
 *   client_hook.c       the transport hook: attempts answered by ck_transport_t
 *   client_verbs.c      URLs and query strings, the verbs, list/watch helpers
 *   client_stats.c      request counts, latency histograms, connection figures
 */
#ifndef CKUBE_REST_CLIENT_INTERNAL_H
#define CKUBE_REST_CLIENT_INTERNAL_H

#include <ckube/client.h>
#include <ckube/flowcontrol.h>

#include <curl/curl.h>
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

/* The methods a request may use (ck_client_i_methods, in client_request.c). */
#define NMETHODS 6
extern const char *const ck_client_i_methods[NMETHODS];

/* One verb's latency histogram; counts[] is cumulative already, as exposed. */
typedef struct lat_hist {
	uint64_t counts[CK_CLIENT_LATENCY_NBUCKETS];
	double sum;
	uint64_t count;
} lat_hist_t;

typedef enum kreq_state {
	CK_REQ_WAIT,
	CK_REQ_CRED,
	CK_REQ_FLIGHT,
	CK_REQ_DONE,
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

/* Attempts per (method, resource); resource is owned (the type may not outlive it). */
typedef struct res_stat_entry {
	const char *method; /* static string */
	char *resource;
	uint64_t count;
} res_stat_entry_t;

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
	bool unthrottled; /* skips the rate limiter (ck_req_spec_t.unthrottled) */
	/* The whole request's time limit (spec's timeout_ms, or the client's default;
	 * 0 = none: lists and watches) and the monotonic instant it ends at: rate-limiter
	 * waits, the exec plugin, every attempt and every retry delay fit before it. */
	uint32_t timeout_ms;
	uint64_t deadline_ns;
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
	bool force_refresh;        /* the next start asks for a new credential (after a 401) */
	bool exec_ran;             /* the plugin run this request waited for succeeded */
	char *exec_err;            /* or failed, with this error */
	int unauth_code;           /* 401 while retrying a 401, so that a failed refresh... */
	ck_status_t unauth_status; /* ...still reports the server's Status */
	unsigned cred_gen;         /* generation of the credential the current attempt used */
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
	bool tp_active;    /* the attempt is with the transport hook (client_hook.c) */
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
	const ck_transport_t *transport; /* NULL = curl (client_hook.c) */

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
	int in_curl;    /* > 0 while curl_multi_socket_action is on the stack */
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
	lat_hist_t rl[NMETHODS];  /* rate-limiter waits, indexed like methods[] */
	res_stat_entry_t *res_stats;
	size_t nres_stats, capres_stats;
	ck_client_conn_stats_t conn;
};

static inline uint64_t now_ns(const ck_client_t *c)
{
	return ck_clk_mono_ns(c->clock);
}

/* Nanoseconds left before r's deadline: UINT64_MAX without one, 0 once passed. */
static inline uint64_t ck_client_i_req_left_ns(const ck_req_t *r)
{
	if (r->deadline_ns == 0)
		return UINT64_MAX;
	uint64_t now = now_ns(r->c);
	return now < r->deadline_ns ? r->deadline_ns - now : 0;
}

/* client_request.c: a request's lifecycle. */

/* Starts a request (every start goes through WAIT); NULL with *err when spec is bad. */
ck_req_t *ck_client_i_request_start(ck_client_t *c, const ck_req_spec_t *spec,
                                    const ck_dec_cb_t *dcb, ck_req_done_cb done, void *ud,
                                    sync_call_t *sync, char **err);
void ck_client_i_req_attempt_reset(ck_req_t *r);
void ck_client_i_req_free(ck_req_t *r);
void ck_client_i_req_complete(ck_req_t *r);
void ck_client_i_req_schedule(ck_req_t *r, double delay);
void ck_client_i_req_fail_transport(ck_req_t *r, int transport_code, const char *why);
/* Fails r as timed out (CURLE_OPERATION_TIMEDOUT): "<method> <url>: timed out (the
 * request's N ms deadline): <why>". */
void ck_client_i_req_fail_deadline(ck_req_t *r, const char *fmt, ...) CK_PRINTF(2, 3);
char *ck_client_i_status_message(const ck_req_t *r, const char *refresh_err);
void ck_client_i_req_trace_retry(const ck_req_t *r, const char *why, double delay);
void ck_client_i_req_attempt_done(ck_req_t *r, CURLcode cc);

/* client_transport.c: curl and libev. */

/* Feeds len bytes of the current attempt's body (status in r->code); returns len,
 * or less when the attempt must stop (r->abort_err says why, or r was cancelled). */
size_t ck_client_i_feed(ck_req_t *r, const char *ptr, size_t len);
/* Wipes (it holds the Authorization header) and frees an attempt's header list. */
void ck_client_i_headers_free(struct curl_slist *h);
/* Sets up easy handle e for r's next attempt with cred (which it clears). */
void ck_client_i_easy_setup(ck_req_t *r, CURL *e, ck_cred_t *cred);
void ck_client_i_curl_timer_cb(struct ev_loop *loop, ev_timer *w, int revents);
int ck_client_i_multi_socket_cb(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp);
int ck_client_i_multi_timer_cb(CURLM *m, long timeout_ms, void *userp);

/* Frees the requests cancelled while curl or a transport hook was on the stack. */
void ck_client_i_sweep_cancelled(ck_client_t *c);

/* client_hook.c: the transport hook. */

/* Hands r's next attempt (state FLIGHT) to c->transport; completes r on failure. */
void ck_client_i_hook_start(ck_req_t *r);
/* Ends the hooked attempt in flight (its deadline passed, or the request is being
 * reset): the transport's stop() runs. No-op for a curl attempt. */
void ck_client_i_hook_stop(ck_req_t *r);
/* r's deadline passed while its hooked attempt was in flight. */
void ck_client_i_hook_timeout(ck_req_t *r);

/* client_creds.c: credentials. */

/* Gets the credential for r's next attempt into *cred; false when r was parked
 * until the exec plugin has run, or completed for want of a credential. */
bool ck_client_i_attempt_creds(ck_req_t *r, ck_cred_t *cred);
/* A non-2xx answer: true when it was a 401 and r goes round again for a fresh
 * credential. */
bool ck_client_i_unauthorized_retry(ck_req_t *r);
void ck_client_i_exec_async_cb(struct ev_loop *loop, ev_async *w, int revents);

/* client_sync.c: worker threads. */

void ck_client_i_sync_complete(ck_client_t *c, sync_call_t *call, ck_result_t *res);
void ck_client_i_sync_fail(ck_client_t *c, sync_call_t *call, const char *msg);
void ck_client_i_prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents);
void ck_client_i_async_cb(struct ev_loop *loop, ev_async *w, int revents);

/* client_verbs.c: URLs. */

/* Returns a new URL for spec, free with free(). */
char *ck_client_i_build_url(const ck_client_t *c, const ck_req_spec_t *spec);

/* client_stats.c: figures. */

void ck_client_i_stats_record(ck_client_t *c, const char *method, const char *resource, int code,
                              bool timed, double secs);
/* A rate-limiter token was reserved for an attempt of method, to be used in secs. */
void ck_client_i_stats_rate_limited(ck_client_t *c, const char *method, double secs);
/* Frees the figures' tables (ck_client_free). */
void ck_client_i_stats_free(ck_client_t *c);
void ck_client_i_conn_count(ck_req_t *r);
void ck_client_i_conn_response(ck_req_t *r);

#endif
