/*
 * transport: the fake API server on the client's loop -- the ck_transport_t
 * hook (client.h) that takes each attempt, runs the reactors, serves it after
 * its delay, and keeps watches open, writing one event line per change.
 *
 * Design note. An attempt becomes a conn. Nothing is answered inside start():
 * each conn is served from its own ev_timer (0 s, or the latency the reactors
 * asked for), so the client is never re-entered. A watch is a cursor into the
 * fake's history (tracker.c): whatever thread changed the fake wakes the loop
 * with ev_async, and every open watch then writes the events after its cursor.
 * Writing a line runs the client's callbacks, which may cancel any request:
 * the client then calls stop(), which only marks a conn while lines are being
 * written (conn->busy, f->flushing); marked conns are freed by sweep() once no
 * write is on the stack.
 */
#include "pkg/fake/fake_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct fconn {
	fconn_t *next;
	ck_fake_t *f;
	ck_transport_attempt_t *a;
	ev_timer timer; /* the answer's delay; then a watch's timeoutSeconds */
	freq_t q;
	char *body;
	char *ctype;
	fans_t ans;
	bool answered;  /* ans holds the answer (parse error, reactor, served) */
	bool streaming; /* a watch past its head */
	bool busy;      /* lines are being written to it */
	bool dead;      /* stop() came: free when not busy */
	uint64_t cursor;
	uint64_t bookmarks_seen;
	ck_cache_selector_t *sel;
};

static void conn_free(fconn_t *c)
{
	ev_timer_stop(c->f->loop, &c->timer);
	fake_freq_clear(&c->q);
	free(c->body);
	free(c->ctype);
	ck_sbuf_free(&c->ans.body);
	ck_cache_selector_free(c->sel);
	free(c);
}

/* Frees the conns stop() marked, once no line is being written. */
static void sweep(ck_fake_t *f)
{
	if (f->flushing > 0)
		return;
	for (fconn_t **pp = &f->conns; *pp != NULL;) {
		fconn_t *c = *pp;
		if (c->dead && !c->busy) {
			*pp = c->next;
			conn_free(c);
		} else {
			pp = &c->next;
		}
	}
}

/* Writes len bytes; false when the attempt is over (the client stopped it). */
static bool conn_write(fconn_t *c, const char *data, size_t len)
{
	if (c->dead)
		return false;
	c->busy = true;
	int rc = ck_transport_body(c->a, data, len);
	c->busy = false;
	return rc == 0 && !c->dead;
}

static void conn_end(fconn_t *c)
{
	if (c->dead)
		return;
	c->busy = true;
	ck_transport_end(c->a, NULL);
	c->busy = false;
}

/* --- watch lines --- */

static void line_event(ck_sbuf_t *b, const char *type, const char *json)
{
	ck_sbuf_printf(b, "{\"type\":\"%s\",\"object\":%s}\n", type, json);
}

static void line_bookmark(ck_sbuf_t *b, const fres_t *r, uint64_t rv, bool initial_end)
{
	char *av = fake_api_version(r);
	ck_sbuf_puts(b, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":");
	ck_sbuf_put_json_str(b, fake_obj_kind(r));
	ck_sbuf_puts(b, ",\"apiVersion\":");
	ck_sbuf_put_json_str(b, av);
	ck_sbuf_printf(b, ",\"metadata\":{\"resourceVersion\":\"%" PRIu64 "\"", rv);
	if (initial_end)
		ck_sbuf_puts(b, ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}");
	ck_sbuf_puts(b, "}}}\n");
	free(av);
}

static void line_expired(ck_sbuf_t *b, uint64_t asked, uint64_t oldest)
{
	fans_t a = {0};
	char *msg =
	    ck_xasprintf("too old resource version: %" PRIu64 " (%" PRIu64 ")", asked, oldest);
	fake_status(&a, 410, "Expired", msg, NULL, NULL);
	line_event(b, "ERROR", ck_sbuf_cstr(&a.body));
	ck_sbuf_free(&a.body);
	free(msg);
}

/* Under f->mu: the lines c is owed (events after its cursor, a bookmark); true
 * when the stream must end after them (its cursor fell out of the history). */
static bool watch_pending(ck_fake_t *f, fconn_t *c, ck_sbuf_t *out)
{
	fres_t *r = fake_res(f, c->q.group, c->q.version, c->q.resource, true);
	if (c->cursor < f->hist_floor) {
		line_expired(out, c->cursor, f->hist_floor + 1);
		return true;
	}
	for (size_t i = 0; i < f->hist_len; i++) {
		const fevent_t *e = fake_hist_at(f, i);
		if (e->rv <= c->cursor || e->res != r)
			continue;
		if (c->q.ns[0] && strcmp(e->ns, c->q.ns) != 0)
			continue;
		/* The name is the same before and after; the labels may not be. */
		ck_json_doc_t *d = ck_json_parse(e->json, strlen(e->json), NULL);
		const char *name =
		    ck_json_str(ck_json_get(ck_json_root(d), CK_PATH("metadata", "name")));
		bool now = fake_selected(c->sel, c->q.field_sel, e->ns, name ? name : "", e->json);
		bool before = e->old_json != NULL && fake_selected(c->sel, c->q.field_sel, e->ns,
		                                                   name ? name : "", e->old_json);
		ck_json_doc_free(d);
		const char *type = NULL;
		if (e->type == CK_WATCH_MODIFIED)
			type = now && before ? "MODIFIED"
			       : now         ? "ADDED"
			       : before      ? "DELETED"
			                     : NULL;
		else if (now)
			type = e->type == CK_WATCH_ADDED ? "ADDED" : "DELETED";
		if (type != NULL)
			line_event(out, type, e->json);
	}
	c->cursor = f->rv;
	if (c->bookmarks_seen != f->bookmarks) {
		c->bookmarks_seen = f->bookmarks;
		if (c->q.bookmarks)
			line_bookmark(out, r, f->rv, false);
	}
	return false;
}

/* Writes the event lines in b (taken: freed) to c, one event per chunk as the
 * server flushes them, and ends c after them when end. Returns false when c went
 * away meanwhile. */
static bool watch_send(fconn_t *c, ck_sbuf_t *b, bool end)
{
	bool ok = true;
	for (size_t off = 0; ok && off < b->len;) {
		const char *nl = memchr(b->data + off, '\n', b->len - off);
		size_t n = (size_t)(nl - (b->data + off)) + 1;
		ok = conn_write(c, b->data + off, n);
		off += n;
	}
	ck_sbuf_free(b);
	if (ok && end)
		conn_end(c);
	return ok;
}

/* Writes what c is owed; ends it when needed. */
static void watch_flush(ck_fake_t *f, fconn_t *c)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	pthread_mutex_lock(&f->mu);
	bool end = watch_pending(f, c, &b);
	pthread_mutex_unlock(&f->mu);
	watch_send(c, &b, end);
}

static void async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	ck_fake_t *f = (ck_fake_t *)((char *)w - offsetof(ck_fake_t, async));
	f->flushing++;
	for (fconn_t *c = f->conns; c != NULL; c = c->next)
		if (c->streaming && !c->dead)
			watch_flush(f, c);
	f->flushing--;
	sweep(f);
}

void fake_wake(ck_fake_t *f)
{
	if (f->loop != NULL)
		ev_async_send(f->loop, &f->async);
}

static void watch_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	fconn_t *c = (fconn_t *)((char *)w - offsetof(fconn_t, timer));
	ck_fake_t *f = c->f;
	f->flushing++;
	watch_flush(f, c);
	if (c->q.bookmarks && !c->dead) {
		ck_sbuf_t b = CK_SBUF_INIT;
		pthread_mutex_lock(&f->mu);
		line_bookmark(&b, fake_res(f, c->q.group, c->q.version, c->q.resource, true), f->rv,
		              false);
		pthread_mutex_unlock(&f->mu);
		conn_write(c, b.data, b.len);
		ck_sbuf_free(&b);
	}
	conn_end(c); /* the server ends a watch at its timeoutSeconds */
	f->flushing--;
	sweep(f);
}

/* Starts the stream of watch c: its head, its initial events, then what follows.
 * Returns true when it did (c may be gone since); false when it refused the
 * watch with an answer in c->ans, left for the caller to send. */
static bool watch_begin(ck_fake_t *f, fconn_t *c)
{
	freq_t *q = &c->q;
	char *err = NULL;
	if (fake_check_field_sel(q->field_sel, &c->ans) < 0) {
		c->answered = true;
		return false;
	}
	if (q->label_sel != NULL && q->label_sel[0] != '\0' &&
	    (c->sel = ck_cache_selector_parse(q->label_sel, &err)) == NULL) {
		char *msg = ck_xasprintf("unable to parse requirement: %s", err ? err : "?");
		fake_status(&c->ans, 400, "BadRequest", msg, NULL, NULL);
		free(msg);
		free(err);
		c->answered = true;
		return false;
	}
	ck_sbuf_t b = CK_SBUF_INIT;
	bool end = false;
	pthread_mutex_lock(&f->mu);
	fres_t *r = fake_res(f, q->group, q->version, q->resource, true);
	bool from_now =
	    q->send_initial || q->rv == NULL || q->rv[0] == '\0' || strcmp(q->rv, "0") == 0;
	c->bookmarks_seen = f->bookmarks;
	if (from_now) {
		/* "Get state and start at most recent": an ADDED per object first. */
		for (size_t i = 0; i < r->n; i++) {
			const fobj_t *o = r->objs[i];
			if ((q->ns[0] && strcmp(o->ns, q->ns) != 0) ||
			    !fake_selected(c->sel, q->field_sel, o->ns, o->name, o->json))
				continue;
			line_event(&b, "ADDED", o->json);
		}
		c->cursor = f->rv;
		if (q->send_initial)
			line_bookmark(&b, r, f->rv, true);
	} else {
		char *endp = NULL;
		c->cursor = strtoull(q->rv, &endp, 10);
		if (endp == q->rv || *endp != '\0') {
			pthread_mutex_unlock(&f->mu);
			char *msg = ck_xasprintf("invalid resource version \"%s\"", q->rv);
			fake_status(&c->ans, 400, "BadRequest", msg, NULL, NULL);
			free(msg);
			c->answered = true;
			ck_sbuf_free(&b);
			return false;
		}
		end = watch_pending(f, c, &b);
	}
	pthread_mutex_unlock(&f->mu);
	c->streaming = true;
	ck_transport_head(c->a, 200, -1);
	f->flushing++;
	bool ok = watch_send(c, &b, end);
	if (ok && !end && !c->dead && q->timeout_s > 0) {
		ev_timer_init(&c->timer, watch_timeout_cb, (double)q->timeout_s, 0.);
		ev_timer_start(f->loop, &c->timer);
	}
	if (ok && !end && !c->dead)
		watch_flush(f, c); /* what changed since the snapshot */
	f->flushing--;
	sweep(f);
	return true;
}

/* The conn's delay passed: serve it and answer. */
static void serve_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	fconn_t *c = (fconn_t *)((char *)w - offsetof(fconn_t, timer));
	ck_fake_t *f = c->f;
	if (!c->answered && c->q.watch) {
		if (watch_begin(f, c))
			return; /* c may be gone */
	} else if (!c->answered) {
		fake_serve(f, &c->q, &c->ans);
	}
	ck_transport_head(c->a, c->ans.code, c->ans.retry_after > 0 ? c->ans.retry_after : -1);
	if (conn_write(c, c->ans.body.data ? c->ans.body.data : "", c->ans.body.len))
		conn_end(c);
	sweep(f);
}

static int tp_start(void *ud, ck_transport_attempt_t *a, const ck_transport_req_t *req, char **err)
{
	ck_fake_t *f = ud;
	fconn_t *c = ck_xcalloc(1, sizeof(*c));
	c->f = f;
	c->a = a;
	if (req->body != NULL) {
		c->body = ck_xmalloc(req->body_len + 1);
		memcpy(c->body, req->body, req->body_len);
		c->body[req->body_len] = '\0';
	}
	c->ctype = req->content_type ? ck_xstrdup(req->content_type) : NULL;
	uint32_t delay_ms = 0;
	if (fake_parse(f, req->method, req->path, req->query, &c->q, &c->ans) < 0) {
		c->answered = true;
	} else {
		c->q.body = c->body;
		c->q.body_len = req->body_len;
		c->q.ctype = c->ctype;
		c->answered = fake_react(f, &c->q, &c->ans, &delay_ms);
	}
	ev_timer_init(&c->timer, serve_cb, (double)delay_ms / 1000.0, 0.);
	ev_timer_start(f->loop, &c->timer);
	c->next = f->conns;
	f->conns = c;
	return 0;
}

static void tp_stop(void *ud, ck_transport_attempt_t *a)
{
	ck_fake_t *f = ud;
	for (fconn_t *c = f->conns; c != NULL; c = c->next) {
		if (c->a == a && !c->dead) {
			c->dead = true;
			ev_timer_stop(f->loop, &c->timer);
			break;
		}
	}
	sweep(f);
}

void fake_transport_init(ck_fake_t *f)
{
	f->transport.start = tp_start;
	f->transport.stop = tp_stop;
	f->transport.ud = f;
	ev_async_init(&f->async, async_cb);
}

void fake_transport_free(ck_fake_t *f)
{
	while (f->conns != NULL) {
		fconn_t *c = f->conns;
		f->conns = c->next;
		conn_free(c);
	}
	if (f->loop != NULL) {
		ev_ref(f->loop);
		ev_async_stop(f->loop, &f->async);
	}
}

void fake_transport_detach(ck_fake_t *f)
{
	pthread_mutex_lock(&f->mu);
	if (f->loop != NULL) {
		ev_ref(f->loop);
		ev_async_stop(f->loop, &f->async);
		f->loop = NULL;
	}
	pthread_mutex_unlock(&f->mu);
}

const ck_transport_t *ck_fake_transport(ck_fake_t *f, struct ev_loop *loop, char **err)
{
	pthread_mutex_lock(&f->mu);
	bool other = f->loop != NULL && f->loop != loop;
	if (f->loop == NULL) {
		f->loop = loop;
		ev_async_start(loop, &f->async);
		ev_unref(loop); /* the fake alone does not keep a loop running */
	}
	pthread_mutex_unlock(&f->mu);
	if (other) {
		ck_err_set(err, "fake: already serving another loop (one loop per fake)");
		return NULL;
	}
	return &f->transport;
}

ck_client_t *ck_fake_client_new(ck_fake_t *f, struct ev_loop *loop, const ck_client_opts_t *o,
                                char **err)
{
	static const char kubeconfig[] =
	    "apiVersion: v1\nkind: Config\n"
	    "clusters:\n- name: fake\n  cluster:\n    server: http://fake.invalid\n"
	    "users:\n- name: fake\n  user: {}\n"
	    "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n"
	    "current-context: fake\n";
	const ck_transport_t *tp = ck_fake_transport(f, loop, err);
	if (tp == NULL)
		return NULL;
	ck_config_t *cfg =
	    ck_config_load_text(kubeconfig, sizeof(kubeconfig) - 1, "(fake)", NULL, err);
	if (cfg == NULL)
		return NULL;
	ck_client_opts_t opts = o ? *o : (ck_client_opts_t){.qps = -1};
	opts.transport = tp;
	return ck_client_new(loop, cfg, &opts, err);
}
