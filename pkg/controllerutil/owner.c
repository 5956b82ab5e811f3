/*
 * owner: metadata.ownerReferences of a body, with controller-runtime's adoption
 * rules (see <ckube/controllerutil.h>).
 *
 * The list is rebuilt from the existing object's references, each written with
 * the fields ck_obj_owner_t keeps, and the new reference put in place of one to
 * the same object (same API group, kind and name) or appended. Every string goes
 * through the patch builder, which escapes it: an owner's name is the user's
 * text and must never be pasted into JSON.
 */
#include <ckube/controllerutil.h>

#include <ckube/base.h>

#include <stdlib.h>
#include <string.h>

/* Does ref name the same object as owner (controller-runtime's referSameObject)? */
static bool same_object(const ck_obj_owner_t *ref, const ck_obj_t *owner)
{
	return strcmp(ref->kind, owner->type->kind) == 0 && strcmp(ref->name, owner->name) == 0 &&
	       ck_api_version_has_group(ref->api_version, owner->type->group);
}

static ck_patch_t *ref_item(const char *api_version, const char *kind, const char *name,
                            const char *uid, bool controller, bool block)
{
	ck_patch_t *it = ck_patch_new();
	ck_patch_set_string(it, CK_PATH("apiVersion"), api_version);
	ck_patch_set_string(it, CK_PATH("kind"), kind);
	ck_patch_set_string(it, CK_PATH("name"), name);
	ck_patch_set_string(it, CK_PATH("uid"), uid);
	if (controller)
		ck_patch_set_bool(it, CK_PATH("controller"), true);
	if (block)
		ck_patch_set_bool(it, CK_PATH("blockOwnerDeletion"), true);
	return it;
}

/* The checks of controller-runtime's validateOwner, and ours on bad input. */
static int validate(const ck_patch_t *p, const ck_obj_t *owner, const ck_obj_t *existing,
                    char **err)
{
	if (ck_patch_error(p) != NULL)
		return ck_err_set(err, "owner reference: the body already failed: %s",
		                  ck_patch_error(p));
	if (owner == NULL)
		return ck_err_set(err, "owner reference: no owner");
	if (owner->name[0] == '\0' || owner->uid[0] == '\0')
		return ck_err_set(err,
		                  "owner reference: owner %s \"%s\" has no %s (use the object as "
		                  "read from the API server)",
		                  owner->type->kind, owner->name, owner->name[0] ? "uid" : "name");
	const ck_type_t *t = ck_patch_object_type(p);
	const char *obj_ns;
	if (t != NULL)
		obj_ns = t->namespaced && ck_patch_object_ns(p) ? ck_patch_object_ns(p) : "";
	else if (existing != NULL)
		obj_ns = existing->type->namespaced ? existing->ns : "";
	else
		return ck_err_set(err, "owner reference: the object's namespace is unknown (make "
		                       "the body with ck_patch_new_object, or pass the existing "
		                       "object)");
	const char *owner_ns = owner->type->namespaced ? owner->ns : "";
	if (owner_ns[0] == '\0')
		return 0;
	if (obj_ns[0] == '\0')
		return ck_err_set(err,
		                  "owner reference: a cluster-scoped object cannot have a "
		                  "namespaced owner (%s %s/%s)",
		                  owner->type->kind, owner_ns, owner->name);
	if (strcmp(owner_ns, obj_ns) != 0)
		return ck_err_set(err,
		                  "owner reference: cross-namespace owner references are "
		                  "disallowed: owner %s %s/%s, object in namespace %s",
		                  owner->type->kind, owner_ns, owner->name, obj_ns);
	return 0;
}

static int set_reference(ck_patch_t *p, const ck_obj_t *owner, const ck_obj_t *existing,
                         bool controller, char **err)
{
	if (validate(p, owner, existing, err) < 0)
		return -1;
	if (controller && existing != NULL) {
		const ck_obj_owner_t *cur = ck_obj_controller_ref(existing);
		if (cur != NULL && !same_object(cur, owner)) {
			ck_err_set(err, "%s %s%s%s is already owned by %s %s (%s), not %s %s",
			           existing->type->kind, existing->ns, existing->ns[0] ? "/" : "",
			           existing->name, cur->kind, cur->name, cur->api_version,
			           owner->type->kind, owner->name);
			return CK_OWNER_EALREADY_OWNED;
		}
	}
	char av[256];
	if (ck_type_api_version(owner->type, av, sizeof(av)) >= sizeof(av))
		return ck_err_set(err, "owner reference: apiVersion of %s too long",
		                  owner->type->kind);

	/* Every check is done: from here on only the builder can fail (a string that
	 * is not UTF-8), and then p carries that error. */
	const char *const *path = CK_PATH("metadata", "ownerReferences");
	ck_patch_set_raw(p, path, "[]", 2);
	bool placed = false;
	for (size_t i = 0; existing != NULL && i < existing->nowners; i++) {
		const ck_obj_owner_t *r = &existing->owners[i];
		if (!placed && same_object(r, owner)) {
			ck_patch_append(p, path,
			                ref_item(av, owner->type->kind, owner->name, owner->uid,
			                         controller, controller));
			placed = true;
			continue;
		}
		ck_patch_append(p, path,
		                ref_item(r->api_version, r->kind, r->name, r->uid, r->controller,
		                         r->block_owner_deletion));
	}
	if (!placed)
		ck_patch_append(p, path,
		                ref_item(av, owner->type->kind, owner->name, owner->uid, controller,
		                         controller));
	if (ck_patch_error(p) != NULL)
		return ck_err_set(err, "%s", ck_patch_error(p));
	return 0;
}

int ck_patch_set_controller_reference(ck_patch_t *p, const ck_obj_t *owner,
                                      const ck_obj_t *existing, char **err)
{
	return set_reference(p, owner, existing, true, err);
}

int ck_patch_set_owner_reference(ck_patch_t *p, const ck_obj_t *owner, const ck_obj_t *existing,
                                 char **err)
{
	return set_reference(p, owner, existing, false, err);
}
