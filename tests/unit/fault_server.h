/*
 * fault_server: a scripted HTTP/1.1 server on a loopback port, in a thread of the
 * test process, for what the real API server cannot be made to do on demand: a
 * reset mid-body, a body cut short, a slow body, malformed JSON, a 429 with
 * Retry-After. Header-only (static functions) so that any unit test can include it.
 *
 * Each request that arrives gets the next scripted response, in order, whatever
 * its connection. A response is a list of steps: write bytes, sleep, wait until a
 * flag is set by the test (to prove the client consumed what came before), close,
 * or reset (RST via SO_LINGER 0). Without a scripted response the server answers
 * 599. Every request is logged (method, target, header block, body) for asserts.
 */
#ifndef CSC_TESTS_FAULT_SERVER_H
#define CSC_TESTS_FAULT_SERVER_H

#include <ckube/base.h>
#include <ckube/client.h>
#include <ckube/config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum fs_op { FS_WRITE, FS_SLEEP, FS_WAIT_FLAG, FS_CLOSE, FS_RESET };

#define FS_MAX_RESPONSES 64
#define FS_MAX_REQUESTS  64
#define FS_MAX_CONNS     32

typedef struct fs_step {
	enum fs_op op;
	char *data;
	size_t len;
	int ms;
	atomic_int *flag;
} fs_step_t;

typedef struct fs_resp {
	fs_step_t *steps;
	int nsteps, cap;
} fs_resp_t;

typedef struct fs_request {
	char *method;
	char *target;
	char *headers; /* the whole header block, lines joined by "\r\n" */
	char *body;
	size_t body_len;
} fs_request_t;

typedef struct fs_conn {
	int fd;
	ck_sbuf_t in;
} fs_conn_t;

typedef struct fault_server {
	int lfd;
	int port;
	int wake[2];
	pthread_t thread;
	pthread_mutex_t mu;
	fs_resp_t *resps[FS_MAX_RESPONSES];
	int nresps, next_resp;
	fs_request_t reqs[FS_MAX_REQUESTS];
	int nreqs;
	int flag_timeouts; /* FS_WAIT_FLAG steps that gave up waiting */
	fs_conn_t conns[FS_MAX_CONNS];
	int nconns;
} fault_server_t;

/* --- building responses (on the test thread, before pushing) --- */

static inline fs_resp_t *fs_resp_new(void)
{
	return ck_xcalloc(1, sizeof(fs_resp_t));
}

static inline fs_resp_t *fs_step(fs_resp_t *r, enum fs_op op, const void *data, size_t len, int ms,
                                 atomic_int *flag)
{
	if (r->nsteps == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 8;
		r->steps = ck_xrealloc(r->steps, (size_t)r->cap * sizeof(*r->steps));
	}
	fs_step_t *s = &r->steps[r->nsteps++];
	memset(s, 0, sizeof(*s));
	s->op = op;
	if (data != NULL) {
		s->data = ck_xmalloc(len + 1);
		memcpy(s->data, data, len);
		s->len = len;
	}
	s->ms = ms;
	s->flag = flag;
	return r;
}

static inline fs_resp_t *fs_write(fs_resp_t *r, const char *s)
{
	return fs_step(r, FS_WRITE, s, strlen(s), 0, NULL);
}
static inline fs_resp_t *fs_writen(fs_resp_t *r, const void *p, size_t n)
{
	return fs_step(r, FS_WRITE, p, n, 0, NULL);
}
static inline fs_resp_t *fs_sleep(fs_resp_t *r, int ms)
{
	return fs_step(r, FS_SLEEP, NULL, 0, ms, NULL);
}
/* Waits (at most 5 s) until *flag is non-zero. */
static inline fs_resp_t *fs_wait_flag(fs_resp_t *r, atomic_int *flag)
{
	return fs_step(r, FS_WAIT_FLAG, NULL, 0, 5000, flag);
}
static inline fs_resp_t *fs_close(fs_resp_t *r)
{
	return fs_step(r, FS_CLOSE, NULL, 0, 0, NULL);
}
static inline fs_resp_t *fs_reset(fs_resp_t *r)
{
	return fs_step(r, FS_RESET, NULL, 0, 0, NULL);
}

static inline void fs_resp_free(fs_resp_t *r)
{
	if (r == NULL)
		return;
	for (int i = 0; i < r->nsteps; i++)
		free(r->steps[i].data);
	free(r->steps);
	free(r);
}

/* Takes r: queues it as the answer to the next request without one. */
static inline void fs_push(fault_server_t *fs, fs_resp_t *r)
{
	pthread_mutex_lock(&fs->mu);
	if (fs->nresps == FS_MAX_RESPONSES)
		ck_fatal("fault server: too many responses");
	fs->resps[fs->nresps++] = r;
	pthread_mutex_unlock(&fs->mu);
}

/* Queues a complete response with a Content-Length; extra_headers end in "\r\n". */
static inline void fs_push_simple(fault_server_t *fs, int code, const char *extra_headers,
                                  const char *body)
{
	char *head = ck_xasprintf("HTTP/1.1 %d Scripted\r\nContent-Type: application/json\r\n"
	                          "Content-Length: %zu\r\n%s\r\n",
	                          code, strlen(body), extra_headers ? extra_headers : "");
	fs_resp_t *r = fs_resp_new();
	fs_write(r, head);
	fs_write(r, body);
	free(head);
	fs_push(fs, r);
}

/* --- the server thread --- */

static inline void fs_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
}

static inline void fs_conn_close(fault_server_t *fs, int i, bool reset)
{
	if (reset) {
		struct linger lg = {1, 0};
		setsockopt(fs->conns[i].fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	close(fs->conns[i].fd);
	ck_sbuf_free(&fs->conns[i].in);
	fs->conns[i] = fs->conns[--fs->nconns];
}

/* Plays one response; returns false if the connection was closed. */
static inline bool fs_play(fault_server_t *fs, int ci, const fs_resp_t *r)
{
	int fd = fs->conns[ci].fd;
	for (int i = 0; i < r->nsteps; i++) {
		const fs_step_t *s = &r->steps[i];
		switch (s->op) {
		case FS_WRITE: {
			size_t off = 0;
			while (off < s->len) {
				ssize_t n = send(fd, s->data + off, s->len - off, MSG_NOSIGNAL);
				if (n <= 0) {
					if (n < 0 && errno == EINTR)
						continue;
					fs_conn_close(fs, ci, false);
					return false;
				}
				off += (size_t)n;
			}
			break;
		}
		case FS_SLEEP:
			fs_sleep_ms(s->ms);
			break;
		case FS_WAIT_FLAG: {
			int waited = 0;
			while (atomic_load(s->flag) == 0 && waited < s->ms) {
				fs_sleep_ms(5);
				waited += 5;
			}
			if (atomic_load(s->flag) == 0) {
				pthread_mutex_lock(&fs->mu);
				fs->flag_timeouts++;
				pthread_mutex_unlock(&fs->mu);
			}
			break;
		}
		case FS_CLOSE:
			fs_conn_close(fs, ci, false);
			return false;
		case FS_RESET:
			fs_conn_close(fs, ci, true);
			return false;
		}
	}
	return true;
}

/* Handles every complete request buffered on connection ci. */
static inline void fs_serve_conn(fault_server_t *fs, int ci)
{
	for (;;) {
		ck_sbuf_t *in = &fs->conns[ci].in;
		const char *end = in->len ? memmem(in->data, in->len, "\r\n\r\n", 4) : NULL;
		if (end == NULL)
			return;
		size_t head_len = (size_t)(end - in->data) + 4;
		size_t body_len = 0;
		char *head = ck_xstrndup(in->data, head_len - 4);
		for (char *p = head; (p = strcasestr(p, "\r\nContent-Length:")) != NULL; p++)
			body_len = (size_t)strtoul(p + 17, NULL, 10);
		if (in->len < head_len + body_len) {
			free(head);
			return;
		}
		fs_request_t rq = {0};
		char *sp1 = strchr(head, ' ');
		char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
		rq.method = sp1 ? ck_xstrndup(head, (size_t)(sp1 - head)) : ck_xstrdup("");
		rq.target = sp2 ? ck_xstrndup(sp1 + 1, (size_t)(sp2 - sp1 - 1)) : ck_xstrdup("");
		rq.headers = head;
		rq.body = ck_xstrndup(in->data + head_len, body_len);
		rq.body_len = body_len;
		memmove(in->data, in->data + head_len + body_len, in->len - head_len - body_len);
		in->len -= head_len + body_len;

		pthread_mutex_lock(&fs->mu);
		if (fs->nreqs < FS_MAX_REQUESTS)
			fs->reqs[fs->nreqs++] = rq;
		else
			ck_fatal("fault server: too many requests");
		const fs_resp_t *r = fs->next_resp < fs->nresps ? fs->resps[fs->next_resp++] : NULL;
		pthread_mutex_unlock(&fs->mu);
		if (r == NULL) {
			static const char none[] =
			    "HTTP/1.1 599 No Script\r\nContent-Length: 0\r\n\r\n";
			fs_step_t st = {FS_WRITE, (char *)none, sizeof(none) - 1, 0, NULL};
			fs_resp_t tmp = {&st, 1, 1};
			if (!fs_play(fs, ci, &tmp))
				return;
			continue;
		}
		if (!fs_play(fs, ci, r))
			return;
	}
}

static inline void *fs_main(void *arg)
{
	fault_server_t *fs = arg;
	for (;;) {
		struct pollfd pfd[FS_MAX_CONNS + 2];
		pfd[0] = (struct pollfd){fs->wake[0], POLLIN, 0};
		pfd[1] = (struct pollfd){fs->lfd, POLLIN, 0};
		int n = fs->nconns;
		for (int i = 0; i < n; i++)
			pfd[i + 2] = (struct pollfd){fs->conns[i].fd, POLLIN, 0};
		if (poll(pfd, (nfds_t)n + 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[0].revents)
			break;
		/* From the last so that closing (swap with the last) keeps indexes valid. */
		for (int i = n - 1; i >= 0; i--) {
			if (!pfd[i + 2].revents)
				continue;
			char buf[16384];
			ssize_t got = recv(fs->conns[i].fd, buf, sizeof(buf), 0);
			if (got <= 0) {
				fs_conn_close(fs, i, false);
				continue;
			}
			ck_sbuf_append(&fs->conns[i].in, buf, (size_t)got);
			fs_serve_conn(fs, i);
		}
		if (pfd[1].revents) {
			int cfd = accept(fs->lfd, NULL, NULL);
			if (cfd >= 0 && fs->nconns < FS_MAX_CONNS) {
				fs->conns[fs->nconns++] = (fs_conn_t){cfd, CK_SBUF_INIT};
			} else if (cfd >= 0) {
				close(cfd);
			}
		}
	}
	return NULL;
}

/* Returns a new running server on 127.0.0.1 (an ephemeral port), free with fs_free(). */
static inline fault_server_t *fs_new(void)
{
	fault_server_t *fs = ck_xcalloc(1, sizeof(*fs));
	pthread_mutex_init(&fs->mu, NULL);
	fs->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int one = 1;
	setsockopt(fs->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fs->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fs->lfd, 16) < 0)
		ck_fatal("fault server: bind/listen: %s", strerror(errno));
	socklen_t al = sizeof(a);
	getsockname(fs->lfd, (struct sockaddr *)&a, &al);
	fs->port = ntohs(a.sin_port);
	if (pipe(fs->wake) < 0)
		ck_fatal("fault server: pipe: %s", strerror(errno));
	pthread_create(&fs->thread, NULL, fs_main, fs);
	return fs;
}

static inline void fs_free(fault_server_t *fs)
{
	if (fs == NULL)
		return;
	if (write(fs->wake[1], "x", 1) < 0)
		ck_fatal("fault server: wake: %s", strerror(errno));
	pthread_join(fs->thread, NULL);
	while (fs->nconns > 0)
		fs_conn_close(fs, 0, false);
	close(fs->lfd);
	close(fs->wake[0]);
	close(fs->wake[1]);
	for (int i = 0; i < fs->nresps; i++)
		fs_resp_free(fs->resps[i]);
	for (int i = 0; i < fs->nreqs; i++) {
		free(fs->reqs[i].method);
		free(fs->reqs[i].target);
		free(fs->reqs[i].headers);
		free(fs->reqs[i].body);
	}
	pthread_mutex_destroy(&fs->mu);
	free(fs);
}

/* How many requests arrived so far. */
static inline int fs_nrequests(fault_server_t *fs)
{
	pthread_mutex_lock(&fs->mu);
	int n = fs->nreqs;
	pthread_mutex_unlock(&fs->mu);
	return n;
}

/* Request i (borrowed; stable once logged). */
static inline const fs_request_t *fs_request(fault_server_t *fs, int i)
{
	pthread_mutex_lock(&fs->mu);
	const fs_request_t *r = i < fs->nreqs ? &fs->reqs[i] : NULL;
	pthread_mutex_unlock(&fs->mu);
	return r;
}

/*
 * A client of the fault server on port: plain http, bearer token `token` (a static
 * one: it cannot change). Borrows loop and opts (NULL = defaults). Returns a new
 * client (free with ck_client_free(), which frees its config too); a setup failure
 * is ck_fatal, the test cannot go on without it.
 */
static inline ck_client_t *fs_client_new(struct ev_loop *loop, int port, const char *token,
                                         const ck_client_opts_t *opts)
{
	char *text =
	    ck_xasprintf("apiVersion: v1\nkind: Config\n"
	                 "clusters:\n- name: fs\n  cluster:\n    server: http://127.0.0.1:%d\n"
	                 "users:\n- name: u\n  user:\n    token: %s\n"
	                 "contexts:\n- name: c\n  context:\n    cluster: fs\n    user: u\n"
	                 "current-context: c\n",
	                 port, token);
	char *err = NULL;
	ck_config_t *cfg = ck_config_load_text(text, strlen(text), "test-kubeconfig", NULL, &err);
	free(text);
	if (cfg == NULL)
		ck_fatal("fs_client_new: kubeconfig: %s", err ? err : "?");
	ck_client_t *c = ck_client_new(loop, cfg, opts, &err);
	if (c == NULL)
		ck_fatal("fs_client_new: kclient_new: %s", err ? err : "?");
	return c;
}

#endif
