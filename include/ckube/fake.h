/*
 * fake: an API server in memory, for unit tests of controllers (client-go's fake
 * clientset and controller-runtime's fake client, as one server). A ck_client_t
 * is pointed at it through the client's transport hook (ck_client_opts_t.transport),
 * so everything above the network runs as in production: the rate limiter,
 * retries, Status decoding, the *_sync calls, informers, listers. No network, no
 * root, no threads of its own (ck_fake_env_t adds one loop thread).
 *
 *   ck_fake_t *f = ck_fake_new(NULL);
 *   ck_fake_add(f, &foo_type, "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\"},...}", &err);
 *   ck_fake_env_t *env = ck_fake_env_new(f, NULL, &err);   // loop thread + client + factory
 *   ck_cache_informer_t *foos = ck_fake_env_informer(env, &foo_type);
 *   ck_fake_env_start(env, 5000, &err);                     // informers synced
 *   my_sync(ck_fake_env_client(env), ck_cache_informer_lister(foos), "ns/a");
 *   ck_fake_env_settle(env, 5000, &err);                    // listers saw every write
 *   ck_json_doc_t *d = ck_fake_get(f, &ck_type_deployment, "ns", "a");  // assert on it
 *   ...
 *   ck_fake_env_free(env);
 *   ck_fake_free(f);
 *
 * Objects are stored whole, as JSON text (every field, whatever a ck_type_t keeps),
 * keyed by group, version, resource (the plural of the URL), namespace and name.
 * Any resource works, generated kinds included: it is known from the URL;
 * registering its ck_type_t (ck_fake_register) adds its kind and scope.
 *
 * Modelled (answers are metav1.Status bodies worded as the API server words them:
 * reason, code, details.name/group/kind, and causes for Invalid):
 *   GET; LIST of one namespace or all, labelSelector (=, ==, !=, in, notin, exists,
 *     !key, <, >: the selector syntax of <ckube/cache.h>), fieldSelector on
 *     metadata.name and metadata.namespace (=, ==, !=; any other field: 400),
 *     the list's resourceVersion, limit + continue (pages are cut from the current
 *     state, see below);
 *   WATCH from a resourceVersion (ADDED, MODIFIED, DELETED as the changes were made,
 *     with label/field selectors: an object leaving the selector is DELETED, one
 *     entering it ADDED), from "" or "0" (an ADDED per existing object first),
 *     sendInitialEvents=true (ADDED per object, then the BOOKMARK annotated
 *     k8s.io/initial-events-end), BOOKMARK events when allowWatchBookmarks (on
 *     ck_fake_bookmark, ck_fake_env_settle and at the end of timeoutSeconds), and
 *     the ERROR event with 410 Expired "too old resource version" for a
 *     resourceVersion older than the kept history (opts.history events);
 *   CREATE: generateName (5-character suffix), uid, creationTimestamp, the status
 *     dropped where a status subresource owns it,
 *     resourceVersion (one counter for every object, as etcd's revision),
 *     generation 1 (not for the kinds that have none on the server: those without
 *     a status subresource below, namespaces, services, nodes), 409 AlreadyExists, 422 Invalid for
 * a missing name, 400 for a namespace that differs from the URL's; UPDATE (PUT): 409 Conflict on a
 * stale metadata.resourceVersion (none given: an unconditional update), 404 when absent (no create
 * on update), 400 for a name that differs from the URL's; uid, creationTimestamp, deletionTimestamp
 *     and generation are the server's; generation + 1 only when something outside
 *     metadata and status changed; with a status subresource (the default, except
 *     for configmaps, secrets, serviceaccounts, endpoints, events, leases and the
 *     RBAC kinds: ck_fake_set_status_subresource) a write to the main resource
 *     keeps the stored status and a write to /status changes only the status;
 *     without one, /status answers 404;
 *   PATCH, application/merge-patch+json (RFC 7386; a metadata.resourceVersion in
 *     the patch is a precondition, as on the server), and a strategic merge patch
 *     without lists or $ directives (which means the same: the recorder's Event
 *     patches);
 *   server-side apply (application/apply-patch+yaml with a JSON body; fieldManager
 *     required, 400 without): the applied object is merged into the stored one
 *     (or created): objects member by member, lists of objects element by
 *     element by their usual merge keys (containers, initContainers, env,
 *     volumes, imagePullSecrets and other "name"-keyed lists by name; conditions by
 *     type; ports by containerPort+protocol or port+protocol; volumeMounts by
 *     mountPath), every other list replaced whole;
 *   DELETE: an object with finalizers gets deletionTimestamp and
 *     deletionGracePeriodSeconds 0 and stays (MODIFIED) until an update or patch
 *     removes its last finalizer, then goes (DELETED); while it is being deleted,
 *     a write that adds a finalizer is refused with the server's 422 (Invalid,
 *     metadata.finalizers: "Forbidden: no new finalizers can be added if the
 *     object is being deleted, found new finalizers []string{...}"); preconditions on uid and
 *     resourceVersion (409 Conflict, worded as the server's registry words it);
 *     with opts.gc, deleting an owner deletes the objects whose ownerReferences
 *     name its uid, at once (propagationPolicy Background, the default) or not
 *     (Orphan).
 *
 * Not modelled, answered with an error that says so (never a silent success):
 * strategic merge patch with lists or $ directives and JSON patch (415), apply bodies in YAML
 * (415), dryRun (400), propagationPolicy Foreground (400), resourceVersionMatch=Exact on a
 * resourceVersion other than the current one (400), and any other path than a resource URL (404).
 *
 * Not modelled, silently (documented simplifications): managedFields and conflicts
 * between field managers (force is accepted and ignored; a field a manager stops
 * applying is not removed), defaulting, validation beyond the name, admission,
 * namespaces' existence and termination, the graceful deletion of pods, continue
 * tokens' snapshot (a later page reflects the state when it is asked for), the
 * scope of a resource (taken from the URL), and the periodic bookmarks of a real
 * server.
 *
 * Threads. A ck_fake_t is thread-safe: tests seed and inspect it from their own
 * thread while its loop serves. The transport side (ck_fake_transport, the
 * clients) lives on one loop, whose thread runs every reactor and every answer.
 *
 * Determinism. uids ("fake-uid-N"), generateName suffixes and resourceVersions
 * come from counters (the suffixes seeded by opts.seed), timestamps from
 * opts.clock: the same test gives the same objects every run.
 */
#ifndef CKUBE_FAKE_H
#define CKUBE_FAKE_H

#include <ckube/export.h>

#include <ckube/base.h>
#include <ckube/cache.h>
#include <ckube/client.h>
#include <ckube/json.h>
#include <ckube/obj.h>
#include <ckube/record.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ev_loop;

typedef struct ck_fake ck_fake_t;

/* A zero or NULL member means the default its comment names. */
typedef struct ck_fake_opts {
	const ck_clk_t *clock; /* creation/deletionTimestamp; NULL = real */
	uint64_t seed;         /* generateName suffixes; 0 = 1 */
	size_t history;        /* watch events kept for watches from an old RV; 0 = 1000 */
	bool gc;               /* owner-reference garbage collection on delete */
} ck_fake_opts_t;

/* Borrows o (may be NULL; its clock must outlive the fake). Returns a new fake,
 * free with ck_fake_free(). */
CKUBE_API ck_fake_t *ck_fake_new(const ck_fake_opts_t *o);
/* Frees f and every object. Free every client and env using it first. NULL is a no-op. */
CKUBE_API void ck_fake_free(ck_fake_t *f);

/* Registers t's resource (borrowed, must outlive f): its kind (for bookmarks,
 * lists and bodies without one) and scope. Optional. Any thread. */
CKUBE_API void ck_fake_register(ck_fake_t *f, const ck_type_t *t);
/* Whether t's resource has a status subresource (see the top). Any thread. */
CKUBE_API void ck_fake_set_status_subresource(ck_fake_t *f, const ck_type_t *t, bool on);

/*
 * Seeding and inspecting, from any thread (these never go through reactors nor
 * the action log). Each borrows its arguments.
 *
 * ck_fake_add: creates the object json (as a POST would: uid, resourceVersion,
 * ... are filled in; its namespace is metadata.namespace), keeping the status it
 * has (a POST through a client drops it where a status subresource owns it).
 * Returns 0, or -1 with *err naming the reason (the Status: "fake: POST
 * configmaps: 409 AlreadyExists: configmaps \"a\" already exists").
 * ck_fake_put: creates it or replaces the stored one unconditionally (someone
 * else's edit, as kubectl replace without a resourceVersion: same rules as
 * UPDATE). ck_fake_delete: deletes as a DELETE would (finalizers are honoured).
 */
CKUBE_API int ck_fake_add(ck_fake_t *f, const ck_type_t *t, const char *json, char **err);
CKUBE_API int ck_fake_put(ck_fake_t *f, const ck_type_t *t, const char *json, char **err);
CKUBE_API int ck_fake_delete(ck_fake_t *f, const ck_type_t *t, const char *ns, const char *name,
                             char **err);
/* The stored object as a new document (free with ck_json_doc_free), or NULL when
 * absent. ns NULL or "" for cluster-scoped kinds. */
CKUBE_API ck_json_doc_t *ck_fake_get(ck_fake_t *f, const ck_type_t *t, const char *ns,
                                     const char *name);
/* Number of objects of t's resource in ns (NULL or "" = all namespaces). */
CKUBE_API size_t ck_fake_len(ck_fake_t *f, const ck_type_t *t, const char *ns);
/* The latest resourceVersion handed out (0 before the first write). */
CKUBE_API uint64_t ck_fake_resource_version(ck_fake_t *f);
/* Sends a BOOKMARK at the latest resourceVersion on every watch that allows them. */
CKUBE_API void ck_fake_bookmark(ck_fake_t *f);

/* --- Reactors (client-go's PrependReactor) and the action log --- */

/* One request as a reactor sees it; every string is borrowed for the call, "" when
 * absent (never NULL). */
typedef struct ck_fake_action {
	const char *verb; /* "get", "list", "watch", "create", "update", "patch", "delete" */
	const char *group, *version, *resource;
	const char *ns, *name, *subresource;
	const char *content_type; /* of the body: the patch type for a patch */
	const char *body;
	size_t body_len;
	const char *query;
} ck_fake_action_t;

/* A reactor's answer. code 0 = no answer (pass on); body NULL = a metav1.Status
 * made of code, reason and message; body set = sent as is (a new string, taken). */
typedef struct ck_fake_answer {
	int code;
	const char *reason;  /* static or borrowed until the reactor returns... */
	const char *message; /* ...copied then */
	char *body;
	int retry_after; /* Retry-After seconds; 0 = no header */
	/* Latency: the answer (the reactor's or the server's) is delayed this much more,
	 * on a timer: the loop goes on meanwhile. Summed over the reactors that run. */
	uint32_t delay_ms;
} ck_fake_answer_t;

/*
 * Called on the loop thread, without the fake's lock (it may call ck_fake_get,
 * ck_fake_add, ...), for each request whose verb and resource match, most
 * recently prepended first, until one answers (sets out->code); one that does
 * not answer passes the request on, possibly with latency (out->delay_ms). Every
 * attempt is logged and counted whatever the reactors do. act and out are
 * borrowed for the call.
 */
typedef void (*ck_fake_reactor_fn)(void *ud, const ck_fake_action_t *act, ck_fake_answer_t *out);
/* verb and resource (borrowed, copied): "*" or NULL for any; resource is the plural,
 * optionally "/status" for the subresource ("foos/status"). ud is borrowed. */
CKUBE_API void ck_fake_prepend_reactor(ck_fake_t *f, const char *verb, const char *resource,
                                       ck_fake_reactor_fn fn, void *ud);
/* Removes every reactor. Any thread. */
CKUBE_API void ck_fake_clear_reactors(ck_fake_t *f);
/* Requests received (every attempt, retries included) with verb and resource ("*" or
 * NULL for any; "foos/status" for the subresource alone). Any thread. */
CKUBE_API size_t ck_fake_count(ck_fake_t *f, const char *verb, const char *resource);
/* The action log: one line per request, "verb resource[/sub] ns/name" ("-" for no
 * namespace or name), oldest first, as a new string (free with free()). Any thread. */
CKUBE_API char *ck_fake_actions(ck_fake_t *f);
/* Empties the log and the counts. Any thread. */
CKUBE_API void ck_fake_clear_actions(ck_fake_t *f);

/* --- Pointing a client at it --- */

/* The transport that serves f on loop (borrowed; one loop per fake). Returns the
 * hook (owned by f), or NULL with *err when f already serves another loop. Loop
 * thread (or before the loop runs). */
CKUBE_API const ck_transport_t *ck_fake_transport(ck_fake_t *f, struct ev_loop *loop, char **err);
/* A client of f on loop: ck_client_new with the fake's transport and o's other
 * options (o may be NULL: defaults, rate limiting off). Returns a new client, free
 * with ck_client_free() before ck_fake_free(); or NULL with *err. */
CKUBE_API ck_client_t *ck_fake_client_new(ck_fake_t *f, struct ev_loop *loop,
                                          const ck_client_opts_t *o, char **err);

/* --- A ready environment: a loop thread, a client and an informer factory --- */

typedef struct ck_fake_env ck_fake_env_t;

/*
 * Starts a loop on a thread of its own with a client of f (o as in
 * ck_fake_client_new) and an informer factory on it (no resync, every namespace).
 * Borrows f (must outlive the env). Returns a new env, free with ck_fake_env_free();
 * or NULL with *err.
 */
CKUBE_API ck_fake_env_t *ck_fake_env_new(ck_fake_t *f, const ck_client_opts_t *o, char **err);
/* Stops the loop thread, frees the factory and the client. NULL is a no-op. */
CKUBE_API void ck_fake_env_free(ck_fake_env_t *env);
/* Borrowed, valid until ck_fake_env_free: for *_sync calls from the test's thread. */
CKUBE_API ck_client_t *ck_fake_env_client(ck_fake_env_t *env);
CKUBE_API ck_cache_factory_t *ck_fake_env_factory(ck_fake_env_t *env);
CKUBE_API struct ev_loop *ck_fake_env_loop(ck_fake_env_t *env);
/* An event recorder on the env's client (client-go's FakeRecorder, but the events
 * land in f as core/v1 Events, reason and message included, for ck_fake_count
 * (f, "create", "events") or a LIST): made on the first call, freed with the env
 * (borrowed until then). ck_fake_env_settle also waits until every event recorded
 * before it is written. NULL with *err if refused. Not the loop thread. */
CKUBE_API ck_record_t *ck_fake_env_recorder(ck_fake_env_t *env, char **err);
/* Runs fn(ud) on the loop thread and waits for it. Any thread but the loop's. */
CKUBE_API void ck_fake_env_run(ck_fake_env_t *env, void (*fn)(void *ud), void *ud);
/* The factory's informer for t (borrowed; t must outlive env), created on the loop
 * thread; the env follows it for ck_fake_env_settle. NULL with *err if refused. */
CKUBE_API ck_cache_informer_t *ck_fake_env_informer(ck_fake_env_t *env, const ck_type_t *t,
                                                    char **err);
/* Starts the factory's informers and waits until they synced. 0, or -1 with *err. */
CKUBE_API int ck_fake_env_start(ck_fake_env_t *env, int64_t timeout_ms, char **err);
/*
 * Waits until every informer made by ck_fake_env_informer holds exactly what f
 * holds for its resource (same keys, same resourceVersions) and its handlers
 * have run for it: after a write, a lister read is deterministic. 0, or -1 with
 * *err naming the informer that lags and what it misses.
 */
CKUBE_API int ck_fake_env_settle(ck_fake_env_t *env, int64_t timeout_ms, char **err);

#endif
