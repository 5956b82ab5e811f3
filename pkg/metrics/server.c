/*
 * The metrics and probes HTTP server, on libmicrohttpd with one internal thread.
 *
 * Design note. We create, bind and listen on the socket ourselves and hand it to
 * libmicrohttpd: that gives exact error messages for bad addresses ("bind: Address
 * already in use" rather than a bare NULL from MHD_start_daemon), Go-style address
 * parsing, and the bound port for ":0" through getsockname. Every response is built
 * whole in a buffer and handed over as a copy, so nothing outlives the handler call.
 * Malformed HTTP is answered by libmicrohttpd itself; our handler only ever sees a
 * parsed request, and answers any method but GET and HEAD with 405.
 *
 * A secure server is the same daemon with TLS (GnuTLS inside libmicrohttpd) and
 * /metrics behind auth.c's gate; it never serves probes, which the kubelet reads
 * over plain HTTP.
 *
 * Connection limits. Any pod that can reach a port can open connections and send
 * nothing; with one shared limit, 64 such connections from one pod kept the
 * kubelet's liveness probe from being answered, and the kubelet restarted a healthy
 * daemon. So each server (the probes have their own unless --metrics-secure=false
 * puts both on one address) has its own thread and its own limits: PER_IP_LIMIT
 * connections per client address (the kubelet is one address, a pod another),
 * CONN_LIMIT in all, and HEADER_TIMEOUT_S of silence before a request has arrived.
 * libmicrohttpd's timeout is one of inactivity, so a client trickling a byte at a
 * time keeps its connection; the per-address limit is what bounds those. A request
 * that has arrived gets REQUEST_TIMEOUT_S (a TokenReview may take seconds), and the
 * connection goes back to the short timeout once it is answered.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ckube/log.h>
#include <ckube/metrics.h>

#include "pkg/metrics/metrics_internal.h"

#define TEXT_PLAIN "text/plain; charset=utf-8"
#define PROM_TEXT  "text/plain; version=0.0.4; charset=utf-8"

/* See the design note. The kubelet runs at most a few probes of a pod at once and
 * Prometheus keeps one connection per target, so 8 per address leaves room. */
enum { PER_IP_LIMIT = 8, CONN_LIMIT = 256, HEADER_TIMEOUT_S = 5, REQUEST_TIMEOUT_S = 30 };

enum { EP_HEALTHZ, EP_READYZ, EP_COUNT };
static const char *const endpoint_names[EP_COUNT] = {"healthz", "readyz"};

struct check {
	char *name;
	ck_metrics_check_fn fn;
	void *ud;
};

struct ck_metrics_server {
	struct MHD_Daemon *mhd;
	ck_metrics_registry_t *reg; /* borrowed; NULL = no /metrics */
	int probes;
	int port;
	pthread_mutex_t lock; /* the check lists; held while checks run */
	struct check *checks[EP_COUNT];
	size_t nchecks[EP_COUNT];
	/* Secure servers only. */
	ck_metrics_auth_t *auth;   /* NULL: TLS without authn/authz */
	ck_metrics_certs_t *certs; /* the certificate, kept current */
};

/* --- Addresses. --- */

/* Returns 0 and the port, or -1 if s is not a decimal port number ("" means 0, as in Go). */
static int parse_port(const char *s, int *port)
{
	long v = 0;
	if (strlen(s) > 5)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	if (v > 65535)
		return -1;
	*port = (int)v;
	return 0;
}

/*
 * Splits "host:port", "[v6]:port" or ":port" and resolves the host into ss.
 * Returns 0, or -1 with *why set to a new string.
 */
static int resolve_bind(const char *addr, struct sockaddr_storage *ss, socklen_t *sslen, char **why)
{
	int result = -1;
	char *host = NULL;
	const char *port_str;
	int port;
	struct addrinfo *ai = NULL;

	if (addr[0] == '[') {
		const char *close = strchr(addr, ']');
		if (close == NULL) {
			ck_err_set(why, "missing ']' in address");
			goto out;
		}
		if (close[1] != ':') {
			ck_err_set(why, "missing port in address");
			goto out;
		}
		host = ck_xstrndup(addr + 1, (size_t)(close - addr - 1));
		port_str = close + 2;
	} else {
		const char *colon = strrchr(addr, ':');
		if (colon == NULL) {
			ck_err_set(why, "missing port in address");
			goto out;
		}
		host = ck_xstrndup(addr, (size_t)(colon - addr));
		if (strchr(host, ':') != NULL) {
			ck_err_set(why,
			           "too many colons in address (an IPv6 address needs brackets)");
			goto out;
		}
		port_str = colon + 1;
	}
	if (parse_port(port_str, &port) != 0) {
		ck_err_set(why, "invalid port \"%s\"", port_str);
		goto out;
	}

	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	if (host[0] == '\0') {
		/* Every address: IPv6 any, dual stack (the caller falls back to IPv4). */
		v6->sin6_family = AF_INET6;
		v6->sin6_addr = in6addr_any;
		v6->sin6_port = htons((uint16_t)port);
		*sslen = sizeof(*v6);
	} else if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		*sslen = sizeof(*v4);
	} else {
		/* A v6 literal (with an optional %zone) or a name; Go prefers IPv4 for names. */
		struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
		int rc = getaddrinfo(host, NULL, &hints, &ai);
		if (rc != 0) {
			ck_err_set(why, "lookup %s: %s", host, gai_strerror(rc));
			goto out;
		}
		struct addrinfo *pick = ai;
		for (struct addrinfo *p = ai; p != NULL; p = p->ai_next)
			if (p->ai_family == AF_INET) {
				pick = p;
				break;
			}
		if (pick->ai_addrlen > sizeof(*ss)) {
			ck_err_set(why, "lookup %s: address too long", host);
			goto out;
		}
		memcpy(ss, pick->ai_addr, pick->ai_addrlen);
		*sslen = pick->ai_addrlen;
		if (ss->ss_family == AF_INET)
			v4->sin_port = htons((uint16_t)port);
		else
			v6->sin6_port = htons((uint16_t)port);
	}
	result = 0;
out:
	if (ai != NULL)
		freeaddrinfo(ai);
	free(host);
	return result;
}

/* Returns a listening socket for addr and its port, or -1 with *why. */
static int listen_on(const char *addr, int *port_out, char **why)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	if (resolve_bind(addr, &ss, &len, why) != 0)
		return -1;
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 && ss.ss_family == AF_INET6 &&
	    IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&ss)->sin6_addr) &&
	    (errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT)) {
		/* No IPv6 in this network namespace: every IPv4 address then. */
		uint16_t port = ((struct sockaddr_in6 *)&ss)->sin6_port;
		struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
		memset(&ss, 0, sizeof(ss));
		v4->sin_family = AF_INET;
		v4->sin_addr.s_addr = htonl(INADDR_ANY);
		v4->sin_port = port;
		len = sizeof(*v4);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	}
	if (fd < 0)
		return ck_err_set(why, "socket: %s", strerror(errno));
	int one = 1, zero = 0;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (bind(fd, (struct sockaddr *)&ss, len) != 0) {
		ck_err_set(why, "bind: %s", strerror(errno));
		close(fd);
		return -1;
	}
	if (listen(fd, 128) != 0) {
		ck_err_set(why, "listen: %s", strerror(errno));
		close(fd);
		return -1;
	}
	struct sockaddr_storage bound;
	socklen_t blen = sizeof(bound);
	if (getsockname(fd, (struct sockaddr *)&bound, &blen) != 0) {
		ck_err_set(why, "getsockname: %s", strerror(errno));
		close(fd);
		return -1;
	}
	*port_out = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
	                                             : ((struct sockaddr_in6 *)&bound)->sin6_port);
	return fd;
}

/* --- Probes. --- */

struct query {
	int verbose;
	char **exclude;
	size_t nexclude;
};

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
	struct query *q = cls;
	if (key == NULL)
		return MHD_YES;
	if (strcmp(key, "verbose") == 0) {
		q->verbose = 1;
	} else if (strcmp(key, "exclude") == 0 && value != NULL && q->nexclude < 64) {
		q->exclude = ck_xrealloc(q->exclude, (q->nexclude + 1) * sizeof(char *));
		q->exclude[q->nexclude++] = ck_xstrdup(value);
	}
	return MHD_YES;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int always_ok(void *ud, char **reason)
{
	return 0;
}

/* Runs one check; returns 0 (*reason: its public note or NULL) or -1 with a new
 * reason string in *reason. */
static int run_check(const struct check *c, char **reason)
{
	*reason = NULL;
	if (c->fn(c->ud, reason) == 0) {
		/* A note is public by contract (ck_metrics_check_fn); one line, whatever
		 * it holds. */
		for (char *p = *reason; p != NULL && *p; p++)
			if (*p == '\n' || *p == '\r')
				*p = ' ';
		return 0;
	}
	if (*reason == NULL)
		*reason = ck_xstrdup("check failed");
	return -1;
}

/* The /healthz and /readyz answer, in kube-apiserver's words. Returns the status. */
static int probe_root(struct ck_metrics_server *srv, int ep, const struct query *q, ck_sbuf_t *body)
{
	static const struct check ping = {"ping", always_ok, NULL};
	const char *epname = endpoint_names[ep];
	ck_sbuf_t lines = CK_SBUF_INIT;
	int failed = 0;
	char *used = ck_xcalloc(q->nexclude ? q->nexclude : 1, 1);

	pthread_mutex_lock(&srv->lock);
	size_t n = srv->nchecks[ep];
	const struct check *checks = n ? srv->checks[ep] : &ping;
	if (n == 0)
		n = 1;
	for (size_t i = 0; i < n; i++) {
		const struct check *c = &checks[i];
		int excluded = 0;
		for (size_t j = 0; j < q->nexclude; j++) {
			if (!used[j] && strcmp(q->exclude[j], c->name) == 0) {
				used[j] = 1;
				excluded = 1;
			}
		}
		if (excluded) {
			ck_sbuf_printf(&lines, "[+]%s excluded: ok\n", c->name);
			continue;
		}
		char *reason = NULL;
		if (run_check(c, &reason) == 0) {
			ck_sbuf_printf(&lines, "[+]%s ok%s%s\n", c->name, reason ? ": " : "",
			               reason ? reason : "");
			free(reason);
			continue;
		}
		/* The endpoint is unauthenticated: the reason goes to the log only. */
		ck_sbuf_printf(&lines, "[-]%s failed: reason withheld\n", c->name);
		CK_LOG_V(2, "Probe check failed", CK_KV_STR("endpoint", epname),
		         CK_KV_STR("check", c->name), CK_KV_STR("reason", reason));
		free(reason);
		failed = 1;
	}
	pthread_mutex_unlock(&srv->lock);

	/* Names asked to be excluded that match no check, sorted and %q-quoted. */
	char **left = ck_xcalloc(q->nexclude ? q->nexclude : 1, sizeof(char *));
	size_t nleft = 0;
	for (size_t j = 0; j < q->nexclude; j++) {
		int dup = 0;
		for (size_t k = 0; k < nleft; k++)
			dup |= strcmp(left[k], q->exclude[j]) == 0;
		if (!used[j] && !dup)
			left[nleft++] = q->exclude[j];
	}
	if (nleft > 0) {
		qsort(left, nleft, sizeof(char *), cmp_str);
		ck_sbuf_puts(&lines,
		             "warn: some health checks cannot be excluded: no matches for ");
		for (size_t k = 0; k < nleft; k++) {
			if (k)
				ck_sbuf_putc(&lines, ',');
			ck_log_quote(&lines, left[k]);
		}
		ck_sbuf_putc(&lines, '\n');
	}
	free(left);
	free(used);

	int status = MHD_HTTP_OK;
	if (failed) {
		/* Always verbose on failure; the trailing newline is Go's http.Error's. */
		ck_sbuf_append(body, lines.data ? lines.data : "", lines.len);
		ck_sbuf_printf(body, "%s check failed\n", epname);
		status = MHD_HTTP_INTERNAL_SERVER_ERROR;
	} else if (!q->verbose) {
		ck_sbuf_puts(body, "ok");
	} else {
		ck_sbuf_append(body, lines.data ? lines.data : "", lines.len);
		ck_sbuf_printf(body, "%s check passed\n", epname);
	}
	ck_sbuf_free(&lines);
	return status;
}

/*
 * /healthz/<name>: one check alone, its reason withheld as in probe_root. Returns
 * the status, or 0 when there is no such check.
 */
static int probe_one(struct ck_metrics_server *srv, int ep, const char *name, ck_sbuf_t *body)
{
	int status = 0;
	pthread_mutex_lock(&srv->lock);
	const struct check *found = NULL;
	for (size_t i = 0; i < srv->nchecks[ep]; i++)
		if (strcmp(srv->checks[ep][i].name, name) == 0)
			found = &srv->checks[ep][i];
	if (found != NULL || (srv->nchecks[ep] == 0 && strcmp(name, "ping") == 0)) {
		char *reason = NULL;
		if (found == NULL || run_check(found, &reason) == 0) {
			ck_sbuf_puts(body, "ok");
			if (reason != NULL) {
				ck_sbuf_puts(body, ": ");
				ck_sbuf_puts(body, reason);
			}
			status = MHD_HTTP_OK;
		} else {
			/* kube-apiserver prints the reason here, but a reason names what
			 * failed (API errors, user names) to anyone who can reach the port:
			 * withheld as in the list, and logged. */
			ck_sbuf_puts(body, "internal server error: reason withheld\n");
			CK_LOG_V(2, "Probe check failed", CK_KV_STR("endpoint", endpoint_names[ep]),
			         CK_KV_STR("check", name), CK_KV_STR("reason", reason));
			status = MHD_HTTP_INTERNAL_SERVER_ERROR;
		}
		free(reason);
	}
	pthread_mutex_unlock(&srv->lock);
	return status;
}

int ck_metrics_probe_add_check(ck_metrics_server_t *srv, const char *endpoint, const char *name,
                               ck_metrics_check_fn check, void *ud, char **err)
{
	if (srv == NULL)
		return 0;
	int ep = -1;
	for (int i = 0; i < EP_COUNT; i++)
		if (endpoint != NULL && strcmp(endpoint, endpoint_names[i]) == 0)
			ep = i;
	if (ep < 0)
		return ck_err_set(
		    err, "probe check \"%s\": unknown endpoint \"%s\" (want healthz or readyz)",
		    name ? name : "", endpoint ? endpoint : "");
	if (name == NULL || name[0] == '\0' || strchr(name, '/') != NULL || check == NULL)
		return ck_err_set(err, "%s check \"%s\": invalid name or no function", endpoint,
		                  name ? name : "");
	int result = 0;
	pthread_mutex_lock(&srv->lock);
	for (size_t i = 0; i < srv->nchecks[ep]; i++) {
		if (strcmp(srv->checks[ep][i].name, name) == 0) {
			result = ck_err_set(err, "%s check \"%s\": already added", endpoint, name);
			goto out;
		}
	}
	srv->checks[ep] =
	    ck_xrealloc(srv->checks[ep], (srv->nchecks[ep] + 1) * sizeof(struct check));
	srv->checks[ep][srv->nchecks[ep]++] = (struct check){ck_xstrdup(name), check, ud};
out:
	pthread_mutex_unlock(&srv->lock);
	return result;
}

/* --- Requests. --- */

static enum MHD_Result respond(struct MHD_Connection *conn, int status, const char *ctype,
                               ck_sbuf_t *body, int allow_header, int retry_after)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
	    body->len, (void *)ck_sbuf_cstr(body), MHD_RESPMEM_MUST_COPY);
	if (resp == NULL)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	if (allow_header)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	if (retry_after > 0) {
		char ra[16];
		snprintf(ra, sizeof(ra), "%d", retry_after);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ra);
	}
	enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls)
{
	struct ck_metrics_server *srv = cls;
	ck_sbuf_t body = CK_SBUF_INIT;
	int status = MHD_HTTP_NOT_FOUND;
	const char *ctype = TEXT_PLAIN;
	int allow = 0, retry_after = 0;
	if (url == NULL)
		url = "";
	/* The request is in: give the answer time (see the design note). */
	MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)REQUEST_TIMEOUT_S);

	if (method == NULL || (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)) {
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
		ck_sbuf_puts(&body, "method not allowed\n");
		allow = 1;
	} else if (srv->reg != NULL && strcmp(url, "/metrics") == 0) {
		status = MHD_HTTP_OK;
		if (srv->auth != NULL) {
			/* The verb is the method in lower case, as controller-runtime's filter. */
			const char *verb = strcmp(method, "GET") == 0 ? "get" : "head";
			status = ck_metrics_i_auth_check(
			    srv->auth,
			    MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
			                                MHD_HTTP_HEADER_AUTHORIZATION),
			    url, verb, &body, &retry_after);
		}
		if (status == MHD_HTTP_OK) {
			ck_metrics_registry_render(srv->reg, &body);
			ctype = PROM_TEXT;
		}
	} else if (srv->probes) {
		for (int ep = 0; ep < EP_COUNT; ep++) {
			size_t n = strlen(endpoint_names[ep]);
			if (url[0] != '/' || strncmp(url + 1, endpoint_names[ep], n) != 0)
				continue;
			const char *rest = url + 1 + n;
			if (*rest == '\0') {
				struct query q = {0, NULL, 0};
				MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, query_arg,
				                          &q);
				status = probe_root(srv, ep, &q, &body);
				for (size_t i = 0; i < q.nexclude; i++)
					free(q.exclude[i]);
				free(q.exclude);
			} else if (rest[0] == '/' && rest[1] != '\0') {
				status = probe_one(srv, ep, rest + 1, &body);
				if (status == 0)
					status = MHD_HTTP_NOT_FOUND;
			}
			break;
		}
	}
	if (status == MHD_HTTP_NOT_FOUND) {
		ck_sbuf_reset(&body);
		ck_sbuf_puts(&body, "404 page not found\n");
	}
	enum MHD_Result ret = respond(conn, status, ctype, &body, allow, retry_after);
	ck_sbuf_free(&body);
	return ret;
}

/* A request was answered (or abandoned): back to the short wait for the next one. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
	MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)HEADER_TIMEOUT_S);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	if (!ck_log_v_enabled(2))
		return;
	char *msg = ck_xvasprintf(fmt, ap);
	size_t n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	CK_LOG_V(2, "HTTP server", CK_KV_STR("message", msg));
	free(msg);
}

/* --- Life cycle. --- */

static void server_free(struct ck_metrics_server *srv)
{
	for (int ep = 0; ep < EP_COUNT; ep++) {
		for (size_t i = 0; i < srv->nchecks[ep]; i++)
			free(srv->checks[ep][i].name);
		free(srv->checks[ep]);
	}
	ck_metrics_i_auth_free(srv->auth);
	ck_metrics_i_certs_free(srv->certs);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}

/* Either kind of server: plain when so is NULL. */
static int server_start(const char *bind_addr, const char *flag, ck_metrics_registry_t *reg,
                        int probes, const ck_metrics_secure_opts_t *so, ck_metrics_server_t **out,
                        char **err)
{
	int result = -1;
	char *why = NULL;
	int fd = -1;
	struct ck_metrics_server *srv = NULL;
	if (flag == NULL)
		flag = "bind address";
	*out = NULL;
	if (bind_addr == NULL || bind_addr[0] == '\0' || strcmp(bind_addr, "0") == 0)
		return 0; /* disabled */

	srv = ck_xcalloc(1, sizeof(*srv));
	srv->reg = reg;
	srv->probes = probes;
	pthread_mutex_init(&srv->lock, NULL);
	unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
	if (so != NULL) {
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			ck_err_set(err, "%s \"%s\": this libmicrohttpd has no TLS support", flag,
			           bind_addr);
			goto out;
		}
		if (ck_metrics_i_certs_new(so, &srv->certs, &why) != 0) {
			ck_err_set(err, "%s \"%s\": %s", flag, bind_addr, why);
			goto out;
		}
		if (so->reviewer != NULL)
			srv->auth = ck_metrics_i_auth_new(so, reg);
		flags |= MHD_USE_TLS;
	}
	fd = listen_on(bind_addr, &srv->port, &why);
	if (fd < 0) {
		ck_err_set(err, "%s \"%s\": %s", flag, bind_addr, why);
		goto out;
	}
	/* A plain server ends the options before the TLS ones (MHD_OPTION_END there). */
	srv->mhd = MHD_start_daemon(
	    flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
	    MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
	    (unsigned)PER_IP_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HEADER_TIMEOUT_S,
	    /* The certificate is asked for at each handshake: certwatch.c replaces it. */
	    so ? MHD_OPTION_NOTIFY_CONNECTION : MHD_OPTION_END, ck_metrics_i_certs_on_connection,
	    srv->certs, MHD_OPTION_HTTPS_CERT_CALLBACK, ck_metrics_i_certs_retrieve,
	    /* TLS 1.2 and 1.3 only, as Go's servers since 1.22. */
	    MHD_OPTION_HTTPS_PRIORITIES, "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2",
	    MHD_OPTION_END);
	if (srv->mhd == NULL) {
		ck_err_set(err, "%s \"%s\": cannot start the HTTP%s server", flag, bind_addr,
		           so ? "S" : "");
		goto out;
	}
	fd = -1; /* the daemon owns it now */
	*out = srv;
	srv = NULL;
	result = 0;
out:
	if (fd >= 0)
		close(fd);
	if (srv != NULL)
		server_free(srv);
	free(why);
	return result;
}

int ck_metrics_server_start(const char *bind_addr, const char *flag, ck_metrics_registry_t *reg,
                            int probes, ck_metrics_server_t **out, char **err)
{
	return server_start(bind_addr, flag, reg, probes, NULL, out, err);
}

int ck_metrics_server_start_secure(const char *bind_addr, const char *flag,
                                   ck_metrics_registry_t *reg, const ck_metrics_secure_opts_t *o,
                                   ck_metrics_server_t **out, char **err)
{
	static const ck_metrics_secure_opts_t none = {0};
	return server_start(bind_addr, flag, reg, 0, o ? o : &none, out, err);
}

int ck_metrics_server_port(const ck_metrics_server_t *srv)
{
	return srv ? srv->port : 0;
}

void ck_metrics_server_stop(ck_metrics_server_t *srv)
{
	if (srv == NULL)
		return;
	MHD_stop_daemon(srv->mhd);
	server_free(srv);
}
