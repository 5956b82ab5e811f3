/*
 * finalizer: add or remove one finalizer with a merge patch that carries the
 * whole list and the object's resourceVersion (see <ckube/controllerutil.h>).
 *
 * Why the whole list and a precondition: a merge patch replaces a list, so the
 * list sent must be obj's plus or minus one name; were it sent without the
 * resourceVersion, a finalizer another controller added after obj was read
 * would be silently dropped. With it the server refuses the stale write (409).
 */
#include <ckube/controllerutil.h>

#include <ckube/base.h>

#include <stdlib.h>
#include <string.h>

static int refuse(ck_result_t *res, const char *msg)
{
	if (res->error == NULL)
		res->error = ck_xasprintf("finalizer: %s (not sent)", msg);
	return -1;
}

/* Sends obj's finalizers with add appended (add != NULL) or with every skip left out. */
static int send_list(ck_client_t *c, const ck_obj_t *obj, const char *add, const char *skip,
                     const ck_write_opts_t *o, ck_result_t *res)
{
	ck_patch_t *p = ck_patch_new();
	ck_patch_set_raw(p, CK_PATH("metadata", "finalizers"), "[]", 2);
	for (size_t i = 0; i < obj->nfinalizers; i++)
		if (skip == NULL || strcmp(obj->finalizers[i], skip) != 0)
			ck_patch_append_string(p, CK_PATH("metadata", "finalizers"),
			                       obj->finalizers[i]);
	if (add != NULL)
		ck_patch_append_string(p, CK_PATH("metadata", "finalizers"), add);
	if (obj->rv[0] != '\0')
		ck_patch_set_string(p, CK_PATH("metadata", "resourceVersion"), obj->rv);
	int rc = ck_client_merge_patch_sync(c, obj->type, obj->type->namespaced ? obj->ns : NULL,
	                                    obj->name, p, o, res);
	ck_patch_free(p);
	return rc;
}

static int check(const ck_obj_t *obj, const char *finalizer, ck_result_t *res)
{
	if (obj == NULL)
		return refuse(res, "no object");
	if (obj->name[0] == '\0')
		return refuse(res, "the object has no name");
	if (finalizer == NULL || finalizer[0] == '\0')
		return refuse(res, "empty finalizer name");
	return 0;
}

int ck_finalizer_add_sync(ck_client_t *c, const ck_obj_t *obj, const char *finalizer,
                          const ck_write_opts_t *o, ck_result_t *res)
{
	if (check(obj, finalizer, res) < 0)
		return -1;
	if (ck_obj_has_finalizer(obj, finalizer))
		return 0;
	return send_list(c, obj, finalizer, NULL, o, res);
}

int ck_finalizer_remove_sync(ck_client_t *c, const ck_obj_t *obj, const char *finalizer,
                             const ck_write_opts_t *o, ck_result_t *res)
{
	if (check(obj, finalizer, res) < 0)
		return -1;
	if (!ck_obj_has_finalizer(obj, finalizer))
		return 0;
	return send_list(c, obj, NULL, finalizer, o, res);
}
