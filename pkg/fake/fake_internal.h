/*
 * fake_internal: what the files of the in-memory API server (pkg/fake) share;
 * not a public header.
 *
 *   tracker.c    the fake object: resources, stored objects, the resourceVersion
 *                counter, the watch history, seeding and inspecting (fake.h)
 *   server.c     a request's semantics: URL and query, the verbs, Status bodies
 *   apply.c      server-side apply's merge (lists by their merge keys)
 *   transport.c  the transport hook on the loop: answers, delays, watch streams
 *   reactor.c    reactors and the action log
 *   env.c        the loop thread with a client and an informer factory
 *
 * Locking. f->mu guards everything in ck_fake_t but the loop side (conns, loop,
 * async), which only the loop thread touches. Reactors run without the lock.
 */
#ifndef CKUBE_FAKE_INTERNAL_H
#define CKUBE_FAKE_INTERNAL_H

#include <ckube/fake.h>

#include <ev.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* One stored object. */
typedef struct fobj {
	char *ns; /* "" for cluster-scoped */
	char *name;
	char *json; /* the whole object, compact */
	ck_json_doc_t *doc;
	uint64_t rv;
} fobj_t;

/* One resource: group, version, plural. */
typedef struct fres {
	char *group, *version, *resource;
	char *kind; /* "" until known (registered, or seen in a body) */
	bool status_sub;
	bool generation; /* the server keeps metadata.generation for it */
	fobj_t **objs;   /* sorted by (ns, name): lists come in the server's key order */
	size_t n, cap;
} fres_t;

/* One change, for watches. */
typedef struct fevent {
	uint64_t rv;
	fres_t *res;
	ck_watch_type_t type;
	char *ns;
	char *json;     /* the object after the change (its last state for DELETED) */
	char *old_json; /* before it (MODIFIED), for selector transitions; else NULL */
} fevent_t;

typedef struct freactor {
	struct freactor *next;
	char *verb, *resource; /* NULL = any */
	ck_fake_reactor_fn fn;
	void *ud;
} freactor_t;

typedef struct fconn fconn_t;

struct ck_fake {
	pthread_mutex_t mu;
	const ck_clk_t *clock;
	uint64_t seed;
	size_t history_cap;
	bool gc;

	uint64_t rv;    /* the latest resourceVersion */
	uint64_t uids;  /* uids handed out */
	uint64_t names; /* generateName suffixes handed out */
	fres_t **res;
	size_t nres, capres;
	fevent_t *hist; /* a ring of history_cap events */
	size_t hist_start, hist_len;
	uint64_t hist_floor; /* a watch from an RV below it has lost events: 410 */
	uint64_t bookmarks;  /* ck_fake_bookmark calls, for the streams */

	freactor_t *reactors;
	char **actions;
	size_t nactions, capactions;

	/* The loop side. */
	struct ev_loop *loop;
	ev_async async; /* something changed: flush the watch streams */
	ck_transport_t transport;
	fconn_t *conns;
	int flushing; /* > 0 while streams are written: stop() only marks */
};

/* A parsed request. */
typedef struct freq {
	const char *method;
	const char *verb; /* "get", "list", ... */
	char *group, *version, *resource, *ns, *name, *sub;
	char *label_sel, *field_sel, *rv, *rv_match, *cont, *field_manager;
	int64_t limit, timeout_s;
	bool watch, bookmarks, send_initial, force, dry_run;
	bool seeding; /* ck_fake_add: the status given is kept */
	const char *ctype;
	const char *body;
	size_t body_len;
	char *query;
} freq_t;

/* An answer. */
typedef struct fans {
	int code;
	int retry_after;
	ck_sbuf_t body;
} fans_t;

/* tracker.c (f->mu held unless said) */
fres_t *fake_res(ck_fake_t *f, const char *group, const char *version, const char *resource,
                 bool create);
fobj_t *fake_find(fres_t *r, const char *ns, const char *name, size_t *pos);
/* Stores json (taken) as the new state of ns/name (old may be NULL): a new RV, an
 * event. Returns the stored object. */
fobj_t *fake_commit(ck_fake_t *f, fres_t *r, fobj_t *old, char *json, ck_watch_type_t type);
/* Removes old: an event DELETED with its last state (json taken, or old's). */
void fake_remove(ck_fake_t *f, fres_t *r, fobj_t *old, char *json);
void fake_wake(ck_fake_t *f); /* any thread, f->mu held */
const fevent_t *fake_hist_at(const ck_fake_t *f, size_t i);
char *fake_now(const ck_fake_t *f); /* a new RFC 3339 string */

/* server.c */
/* Parses method/path/query into q; 0, or -1 with a Status answer in a. */
int fake_parse(ck_fake_t *f, const char *method, const char *path, const char *query, freq_t *q,
               fans_t *a);
void fake_freq_clear(freq_t *q);
/* Serves q (not a watch), taking the lock. */
void fake_serve(ck_fake_t *f, const freq_t *q, fans_t *a);
void fake_status(fans_t *a, int code, const char *reason, const char *message, const fres_t *r,
                 const char *name);
/* true when the object's JSON matches the request's selectors (sel may be NULL). */
bool fake_selected(const ck_cache_selector_t *sel, const char *field_sel, const char *ns,
                   const char *name, const char *json);
/* 0, or -1 with a 400 in a when field_sel names an unsupported field. */
int fake_check_field_sel(const char *field_sel, fans_t *a);
/* The group/version string: "v1" or "apps/v1" (new string). */
char *fake_api_version(const fres_t *r);
const char *fake_obj_kind(const fres_t *r);

/* apply.c: appends to out the merge of applied into live (either may be NULL). */
void fake_apply_merge(const ck_json_t *live, const ck_json_t *applied, const char *field,
                      ck_sbuf_t *out);

/* reactor.c: logs q, runs the reactors (without the lock); true when one answered
 * into a; *delay_ms gets the latency asked for. */
bool fake_react(ck_fake_t *f, const freq_t *q, fans_t *a, uint32_t *delay_ms);
void fake_reactors_free(ck_fake_t *f);

/* transport.c */
void fake_transport_init(ck_fake_t *f);
void fake_transport_free(ck_fake_t *f);
/* Loop thread: stops serving the loop (it is about to be destroyed). */
void fake_transport_detach(ck_fake_t *f);

#endif
