/*
 * createupdate: create-or-update and create-or-patch (see
 * <ckube/controllerutil.h>).
 *
 * The live object is read raw (keep_body): the desired body names only the
 * fields this controller owns, the live one has everything else, and the
 * merge (ck_json_merge_patch, RFC 7386) must keep what it does not name -- a
 * kept-fields ck_obj_t would have lost it. ck_json_merge_patch_noop decides
 * "unchanged" on values (numbers by value, members in any order), so the
 * server's own formatting never causes a write.
 */
#include <ckube/controllerutil.h>

#include <ckube/base.h>
#include <ckube/json.h>

#include <stdlib.h>
#include <string.h>

static const char *const op_names[] = {"none", "created", "updated", "unchanged"};

const char *ck_op_result_name(ck_op_result_t op)
{
	return (size_t)op < CK_ARRAY_LEN(op_names) ? op_names[op] : "?";
}

static int refuse(ck_result_t *res, const char *what, const char *msg)
{
	if (res->error == NULL)
		res->error = ck_xasprintf("%s: %s (not sent)", what, msg);
	return -1;
}

/* GETs the live object raw into res->body; 0 found, 1 not found, -1 failed. */
static int get_live(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                    ck_result_t *res)
{
	ck_req_spec_t spec = {.method = "GET",
	                      .type = t,
	                      .ns = ns,
	                      .name = name,
	                      .keep_body = true,
	                      .no_decode = true};
	if (ck_client_do_sync(c, &spec, res) == 0)
		return 0;
	return ck_result_is_not_found(res) ? 1 : -1;
}

/* The steps both share. *live gets the live document, NULL when created. */
static int begin(ck_client_t *c, const ck_patch_t *body, const char *what, const ck_write_opts_t *o,
                 ck_op_result_t *op, ck_json_doc_t **desired, ck_json_doc_t **live,
                 ck_result_t *res)
{
	*op = CK_OP_NONE;
	*desired = *live = NULL;
	const ck_type_t *t = ck_patch_object_type(body);
	const char *ns = ck_patch_object_ns(body), *name = ck_patch_object_name(body);
	if (t == NULL)
		return refuse(res, what, "the body was not made by ck_patch_new_object");
	if (name == NULL)
		return refuse(res, what, "the body has no metadata.name");
	if (t->namespaced && ns == NULL)
		return refuse(res, what, "the body of a namespaced kind has no metadata.namespace");
	char *err = NULL;
	size_t len = 0;
	char *text = ck_patch_build(body, &len, &err);
	if (text == NULL) {
		refuse(res, what, err);
		free(err);
		return -1;
	}
	*desired = ck_json_parse(text, len, &err);
	free(text);
	if (*desired == NULL) { /* the builder writes what the parser reads: a bug */
		refuse(res, what, err);
		free(err);
		return -1;
	}
	ck_result_t got = {0};
	int found = get_live(c, t, ns, name, &got);
	if (found < 0) {
		*res = got;
		return -1;
	}
	if (found == 1) {
		ck_result_clear(&got);
		if (ck_client_create_body_sync(c, body, o, res) < 0)
			return -1;
		*op = CK_OP_CREATED;
		return 0;
	}
	*live = ck_json_parse(got.body, got.body_len, &err);
	ck_result_clear(&got);
	if (*live == NULL) {
		res->error = ck_xasprintf("%s: reading %s %s%s%s: %s", what, t->kind, ns ? ns : "",
		                          ns ? "/" : "", name, err);
		free(err);
		return -1;
	}
	return 0;
}

int ck_create_or_update_sync(ck_client_t *c, const ck_patch_t *body, const ck_write_opts_t *o,
                             ck_op_result_t *op, ck_result_t *res)
{
	ck_json_doc_t *desired = NULL, *live = NULL;
	ck_sbuf_t merged = CK_SBUF_INIT;
	int rc = begin(c, body, "create or update", o, op, &desired, &live, res);
	if (rc < 0 || live == NULL)
		goto out;
	const ck_json_t *l = ck_json_root(live), *d = ck_json_root(desired);
	if (ck_json_merge_patch_noop(l, d)) {
		*op = CK_OP_UNCHANGED;
		goto out;
	}
	/* The merged object carries the live metadata.resourceVersion (the body does
	 * not set it): a write since the GET makes the PUT fail with 409. */
	ck_json_merge_patch(l, d, &merged);
	rc = ck_client_update_sync(c, ck_patch_object_type(body), ck_patch_object_ns(body),
	                           ck_patch_object_name(body), ck_sbuf_cstr(&merged), o, res);
	if (rc == 0)
		*op = CK_OP_UPDATED;
out:
	ck_sbuf_free(&merged);
	ck_json_doc_free(desired);
	ck_json_doc_free(live);
	return rc;
}

int ck_create_or_patch_sync(ck_client_t *c, const ck_patch_t *body, const ck_write_opts_t *o,
                            bool rv_precondition, ck_op_result_t *op, ck_result_t *res)
{
	ck_json_doc_t *desired = NULL, *live = NULL, *pre = NULL;
	ck_sbuf_t patch = CK_SBUF_INIT;
	int rc = begin(c, body, "create or patch", o, op, &desired, &live, res);
	if (rc < 0 || live == NULL)
		goto out;
	const ck_json_t *l = ck_json_root(live), *d = ck_json_root(desired);
	if (ck_json_merge_patch_noop(l, d)) {
		*op = CK_OP_UNCHANGED;
		goto out;
	}
	const char *rv = ck_json_str(ck_json_get(l, CK_PATH("metadata", "resourceVersion")));
	if (rv_precondition && rv != NULL) {
		/* The body with the live resourceVersion merged in. */
		ck_sbuf_t b = CK_SBUF_INIT;
		ck_sbuf_puts(&b, "{\"metadata\":{\"resourceVersion\":");
		ck_sbuf_put_json_str(&b, rv);
		ck_sbuf_puts(&b, "}}");
		pre = ck_json_parse(b.data, b.len, NULL);
		ck_sbuf_free(&b);
		ck_json_merge_patch(d, ck_json_root(pre), &patch);
	} else {
		ck_json_write(d, &patch);
	}
	rc = ck_client_patch_sync(c, ck_patch_object_type(body), ck_patch_object_ns(body),
	                          ck_patch_object_name(body), CK_PATCH_MERGE, ck_sbuf_cstr(&patch),
	                          o, res);
	if (rc == 0)
		*op = CK_OP_UPDATED;
out:
	ck_sbuf_free(&patch);
	ck_json_doc_free(pre);
	ck_json_doc_free(desired);
	ck_json_doc_free(live);
	return rc;
}
