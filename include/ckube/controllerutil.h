/*
 * controllerutil: what a reconcile function does to the objects it manages, as
 * controller-runtime's controllerutil does it: finalizers, owner references,
 * create-or-update and create-or-patch.
 *
 * Finalizers. ck_finalizer_add_sync / ck_finalizer_remove_sync send one merge
 * patch {"metadata":{"finalizers":[...],"resourceVersion":"<obj's>"}}: the whole
 * list as obj has it plus or minus one name, and obj's resourceVersion as a
 * precondition, so that a finalizer another writer added or removed since obj
 * was read is never lost -- the server answers 409 Conflict instead
 * (ck_result_is_conflict: re-read and retry, CK_RECONCILE_RETRY). An obj without
 * a resourceVersion (built by hand) is patched without the precondition. When
 * the name is already present (add) or absent (remove) nothing is sent: the
 * call returns 0 with res untouched (res->http_code stays 0). Read a finalizer
 * with ck_obj_has_finalizer (obj.h: finalizers are always kept).
 *
 * Owner references. ck_patch_set_controller_reference writes
 * metadata.ownerReferences into a body (escaped by the builder) following
 * controller-runtime's SetControllerReference:
 *   - the reference: apiVersion (owner's group/version), kind, name and uid of
 *     owner, controller and blockOwnerDeletion true;
 *   - existing (the object as it is now, e.g. from a lister; NULL for one not yet
 *     created) keeps its other references; one to the same object (same API
 *     group, kind and name: the version does not count) is replaced in place;
 *   - when existing already has a controller reference to another object the
 *     call fails with CK_OWNER_EALREADY_OWNED and "... is already owned by <Kind>
 *     <name>" (a controller does not adopt what another one controls);
 *   - a namespaced owner must be in the object's namespace, and cannot own a
 *     cluster-scoped object; a cluster-scoped owner may own anything.
 * The list is set whole (a merge patch replaces lists, server-side apply takes
 * the entries as this manager's): one call per body. When a check fails the
 * body is left as it was.
 *
 * Create-or-update. The caller gives the desired state as a body from
 * ck_patch_new_object() holding only the fields this controller owns.
 * ck_create_or_update_sync GETs the live object; if there is none it POSTs the
 * body (CK_OP_CREATED); else it merges the body into the live object with JSON
 * merge-patch semantics (RFC 7386: objects merged member by member, lists and
 * scalars replaced whole, null deletes) and, when that changes nothing, sends
 * nothing (CK_OP_UNCHANGED); otherwise it PUTs the merged object with the live
 * resourceVersion (CK_OP_UPDATED; a concurrent write gives 409, reported as
 * such). ck_create_or_patch_sync does the same but sends the body itself as a
 * merge patch (with the live resourceVersion as a precondition when asked).
 *
 * Where server-side apply falls short, and why these exist. Apply merges lists
 * the way the kind's schema says: a Service's spec.ports is a map keyed by port
 * and protocol, a Deployment's containers by name, env by name. When someone
 * else (kubectl edit, another field manager) adds an entry to such a list, the
 * entry is theirs: a forced apply of our list leaves it there, because we never
 * owned it, and cannot take it away; worse, if our entry and theirs collide on a
 * field validated elsewhere (two ports both named "http"), the apply is refused
 * (422). Create-or-update replaces the list whole, as controller-runtime's
 * CreateOrUpdate does, which is what repairs such drift. The other side of that
 * coin: give list elements complete, as the server stores them (the defaults
 * included, e.g. a port's protocol and targetPort), or every call sees a change
 * and writes (an update to an identical object does not change its
 * resourceVersion, but it is still a request).
 *
 * All *_sync calls: worker threads only (client.h); res must be zeroed; they
 * return 0 on success, else -1 with res->error (and the server's Status), as
 * the client's verbs. A refusal before sending (bad input) leaves
 * res->http_code 0 with a message saying what was wrong.
 */
#ifndef CKUBE_CONTROLLERUTIL_H
#define CKUBE_CONTROLLERUTIL_H

#include <ckube/export.h>

#include <ckube/client.h>
#include <ckube/obj.h>
#include <ckube/patch.h>
#include <ckube/status.h>

#include <stdbool.h>

/*
 * Adds / removes finalizer (borrowed; a non-empty name, by convention
 * "example.com/name") to / from obj (borrowed: its kind, namespace, name,
 * finalizers and resourceVersion), see the top of this file. Remove takes out
 * every occurrence. o may be NULL. res->obj is the patched object.
 */
CKUBE_API int ck_finalizer_add_sync(ck_client_t *c, const ck_obj_t *obj, const char *finalizer,
                                    const ck_write_opts_t *o, ck_result_t *res);
CKUBE_API int ck_finalizer_remove_sync(ck_client_t *c, const ck_obj_t *obj, const char *finalizer,
                                       const ck_write_opts_t *o, ck_result_t *res);

/* The distinct result of ck_patch_set_controller_reference: another controller
 * already controls the object. */
#define CK_OWNER_EALREADY_OWNED (-2)

/*
 * Sets p's metadata.ownerReferences, see the top of this file. Borrows all.
 * owner must have a name and a uid (an object read from the server). The
 * object's namespace is p's (ck_patch_new_object), else existing's; with
 * neither the call fails. Returns 0; CK_OWNER_EALREADY_OWNED or -1 with *err
 * (a new string, free with free()) and p unchanged; -1 also when p already
 * carries an error, or gets one (a reference's string not UTF-8).
 */
CKUBE_API int ck_patch_set_controller_reference(ck_patch_t *p, const ck_obj_t *owner,
                                                const ck_obj_t *existing, char **err);
/* The same for a plain owner (controller-runtime's SetOwnerReference): no
 * controller or blockOwnerDeletion, never "already owned"; a reference to the same
 * object, controller or not, is replaced by the plain one. */
CKUBE_API int ck_patch_set_owner_reference(ck_patch_t *p, const ck_obj_t *owner,
                                           const ck_obj_t *existing, char **err);

/* What create-or-update did. */
typedef enum ck_op_result {
	CK_OP_NONE = 0,  /* nothing, the call failed */
	CK_OP_CREATED,   /* POST */
	CK_OP_UPDATED,   /* PUT (create-or-update) or PATCH (create-or-patch) */
	CK_OP_UNCHANGED, /* the live object already had the body: no request sent */
} ck_op_result_t;
/* "none", "created", "updated", "unchanged" (static). */
CKUBE_API const char *ck_op_result_name(ck_op_result_t op);

/*
 * Borrows body (from ck_patch_new_object() with a name, and a namespace for a
 * namespaced kind) and o (may be NULL: its field manager and dry run go to the
 * write; force is ignored). *op gets what was done. On success res->obj is the
 * object as written (created or updated), or NULL when unchanged.
 */
CKUBE_API int ck_create_or_update_sync(ck_client_t *c, const ck_patch_t *body,
                                       const ck_write_opts_t *o, ck_op_result_t *op,
                                       ck_result_t *res);
/* The same, but an existing object is sent body as a merge patch; with
 * rv_precondition, carrying the live resourceVersion (409 when it changed). */
CKUBE_API int ck_create_or_patch_sync(ck_client_t *c, const ck_patch_t *body,
                                      const ck_write_opts_t *o, bool rv_precondition,
                                      ck_op_result_t *op, ck_result_t *res);

#endif
