/*
 * patch: JSON object bodies built by calls instead of by hand, for
 *   - a JSON merge patch (RFC 7386; PATCH application/merge-patch+json): set the
 *     paths to change, set a path to null to delete that key;
 *   - a server-side apply body (PATCH application/apply-patch+yaml, which accepts
 *     JSON): ck_patch_new_object() starts it with apiVersion, kind,
 *     metadata.name and metadata.namespace, then the caller sets exactly the
 *     fields it owns;
 *   - a create (POST) or update (PUT) body, the same way.
 *
 * Paths follow json.h: a NULL-terminated array of literal segments, written
 * CK_PATH("metadata", "annotations", "example.com/x"); a segment is always an
 * object key here (arrays are set whole, as raw JSON or from a ck_json_t, which
 * is also what a merge patch does with them).
 *
 * Semantics, all deterministic (the same calls give the same bytes):
 *   - members appear in the order their keys were first set; setting a path
 *     again replaces its value (a value or a whole subtree) in place;
 *   - the objects on the way to a path are created as needed and shared by
 *     paths with the same prefix; going through a path that holds a
 *     non-object value (a string, null, an array) is an error;
 *   - a raw or ck_json_t object becomes objects of the builder, so later calls
 *     may set paths inside it; repeated keys in it keep the last value;
 *   - strings and keys must be valid UTF-8; they are escaped as kept text is
 *     (json.h): the output is compact JSON in that same form.
 *
 * Errors are sticky: the first failing call records why (and returns -1), later
 * calls do nothing, and ck_patch_build() returns NULL with that message, so a
 * run of calls can be checked once. A builder is not thread-safe: one thread at
 * a time; a const builder may be built and sent from several threads.
 */
#ifndef CKUBE_PATCH_H
#define CKUBE_PATCH_H

#include <ckube/export.h>

#include <ckube/client.h>
#include <ckube/json.h>
#include <ckube/obj.h>
#include <ckube/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ck_patch ck_patch_t;

/* Returns a new empty object builder ({}), free with ck_patch_free(). */
CKUBE_API ck_patch_t *ck_patch_new(void);
/*
 * Returns a new builder starting {"apiVersion":..,"kind":..,"metadata":{"name":..,
 * "namespace":..}} for an object of kind t (borrowed, must outlive the builder),
 * free with ck_patch_free(). Borrows ns and name (copied). name NULL or "" leaves
 * metadata.name out (a create with metadata.generateName); ns NULL or "" leaves
 * metadata.namespace out; a namespace for a cluster-scoped kind is an error
 * (sticky). The client helpers below send it to t, ns and name.
 */
CKUBE_API ck_patch_t *ck_patch_new_object(const ck_type_t *t, const char *ns, const char *name);
/* NULL is a no-op. */
CKUBE_API void ck_patch_free(ck_patch_t *p);

/*
 * Setters. Borrow path and value (copied). Return 0, or -1 when this call or an
 * earlier one failed (see ck_patch_error). An empty path is an error, except
 * for ck_patch_set_raw/ck_patch_set_json with an object, whose members are then
 * set one by one at the top level.
 */
CKUBE_API int ck_patch_set_string(ck_patch_t *p, const char *const *path, const char *s);
/* len bytes of s, which may hold NULs (sent as \u0000). */
CKUBE_API int ck_patch_set_stringn(ck_patch_t *p, const char *const *path, const char *s,
                                   size_t len);
CKUBE_API int ck_patch_set_int(ck_patch_t *p, const char *const *path, int64_t v);
/* Finite values only; written with 17 significant digits, always with a '.' or
 * an exponent so it reads back as a double. */
CKUBE_API int ck_patch_set_double(ck_patch_t *p, const char *const *path, double v);
CKUBE_API int ck_patch_set_bool(ck_patch_t *p, const char *const *path, bool v);
/* null: in a merge patch, deletes the key. */
CKUBE_API int ck_patch_set_null(ck_patch_t *p, const char *const *path);
/* len bytes of JSON text (any value), parsed and checked as ck_json_parse does;
 * malformed text is an error naming its byte offset. */
CKUBE_API int ck_patch_set_raw(ck_patch_t *p, const char *const *path, const char *json,
                               size_t len);
/* A node of a parsed document (borrowed, copied), e.g. a kept field to send back. */
CKUBE_API int ck_patch_set_json(ck_patch_t *p, const char *const *path, const ck_json_t *v);

/*
 * Lists built element by element (the one mechanism the typed bodies of
 * applyconfig.h use for containers, ports, env, ...): appends to the array at
 * path, creating it (and the objects on the way) when absent; appending to a
 * path that holds anything but an array is an error. Elements keep the order
 * they were appended in.
 */
/* Takes item (a builder of one element, e.g. from ck_patch_new(); freed here, also
 * on error); its sticky error, if any, becomes p's. */
CKUBE_API int ck_patch_append(ck_patch_t *p, const char *const *path, ck_patch_t *item);
/* Borrows s (copied): a string element. */
CKUBE_API int ck_patch_append_string(ck_patch_t *p, const char *const *path, const char *s);

/* What ck_patch_new_object() was given (borrowed from p): the kind (NULL for a
 * plain ck_patch_new() builder), the namespace and the name (NULL when not given). */
CKUBE_API const ck_type_t *ck_patch_object_type(const ck_patch_t *p);
CKUBE_API const char *ck_patch_object_ns(const ck_patch_t *p);
CKUBE_API const char *ck_patch_object_name(const ck_patch_t *p);

/* The first error (borrowed from p, valid until ck_patch_free), or NULL. */
CKUBE_API const char *ck_patch_error(const ck_patch_t *p);
/*
 * Borrows p (unchanged; building again gives the same bytes). Returns the compact
 * JSON text as a new NUL-terminated string, free with free(), its length in *len
 * (may be NULL); or NULL with *err (the sticky error, or a document nested
 * deeper than CK_JSON_MAX_DEPTH).
 */
CKUBE_API char *ck_patch_build(const ck_patch_t *p, size_t *len, char **err);

/*
 * Sending, with the client's blocking verbs: worker threads only, never the
 * client's loop thread (client.h). res must be zeroed; returns 0 on 2xx, else -1.
 * When the body cannot be built or the call is refused before sending, nothing
 * is sent: res->error says why and res->http_code stays 0 (so ck_result_is_transport()
 * is also true: check the message, do not retry such a call).
 */
/* PATCH application/merge-patch+json of patch to t/ns/name; o may be NULL. */
CKUBE_API int ck_client_merge_patch_sync(ck_client_t *c, const ck_type_t *t, const char *ns,
                                         const char *name, const ck_patch_t *patch,
                                         const ck_write_opts_t *o, ck_result_t *res);
/*
 * Server-side apply of body, which must come from ck_patch_new_object() with a
 * name (and a namespace when the kind is namespaced): PATCH
 * application/apply-patch+yaml ?fieldManager=..[&force=true]. field_manager is
 * required: NULL or "" is refused without sending.
 */
CKUBE_API int ck_client_apply_sync(ck_client_t *c, const ck_patch_t *body,
                                   const char *field_manager, bool force, ck_result_t *res);
/*
 * The status subresource (.../status), where a kind that has one takes its status:
 * the main resource ignores status there (a CRD with the subresource answers 200
 * and drops it), and the status subresource ignores everything but status (and
 * metadata it may not change). As ck_client_merge_patch_sync and
 * ck_client_apply_sync otherwise; a kind without the subresource answers 404.
 */
CKUBE_API int ck_client_status_merge_patch_sync(ck_client_t *c, const ck_type_t *t, const char *ns,
                                                const char *name, const ck_patch_t *patch,
                                                const ck_write_opts_t *o, ck_result_t *res);
CKUBE_API int ck_client_status_apply_sync(ck_client_t *c, const ck_patch_t *body,
                                          const char *field_manager, bool force, ck_result_t *res);
/* POST body (from ck_patch_new_object()) to its kind and namespace; o may be NULL. */
CKUBE_API int ck_client_create_body_sync(ck_client_t *c, const ck_patch_t *body,
                                         const ck_write_opts_t *o, ck_result_t *res);
/* PUT body (from ck_patch_new_object() with a name; include
 * metadata.resourceVersion for optimistic concurrency); o may be NULL. */
CKUBE_API int ck_client_update_body_sync(ck_client_t *c, const ck_patch_t *body,
                                         const ck_write_opts_t *o, ck_result_t *res);

#endif
