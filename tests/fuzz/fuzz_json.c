/*
 * libFuzzer target for the JSON reader (json.h) and, on what it accepts, the
 * patch builder (patch.h).
 *
 * Each input is parsed; a failure must come with a message. An accepted document
 * is walked whole (every getter on every node, lookups by key and index), written
 * in kept form, and that text must parse again and write to the same bytes (the
 * form is a fixed point). An object is also copied into a patch builder, whose
 * output must parse and equal the kept form when the object has no repeated key.
 *
 *   bash tests/fuzz/run_fuzz_json.sh [seconds] [libFuzzer flags...]
 */
#include <ckube/base.h>
#include <ckube/json.h>
#include <ckube/patch.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* patch.c's senders call the client, which this target does not link (curl, libev):
 * never called here. */
int ck_client_patch_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                         ck_patch_type_t pt, const char *body, const ck_write_opts_t *o,
                         ck_result_t *res)
{
	__builtin_trap();
}
int ck_client_create_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *body,
                          const ck_write_opts_t *o, ck_result_t *res)
{
	__builtin_trap();
}
int ck_client_update_sync(ck_client_t *c, const ck_type_t *t, const char *ns, const char *name,
                          const char *body, const ck_write_opts_t *o, ck_result_t *res)
{
	__builtin_trap();
}
int ck_client_patch_status_sync(ck_client_t *c, const ck_type_t *t, const char *ns,
                                const char *name, ck_patch_type_t pt, const char *body,
                                const ck_write_opts_t *o, ck_result_t *res)
{
	__builtin_trap();
}

/* Merge patch (json_merge.c) on any document: equal to itself, and idempotent:
 * merging p into r = merge(p, p) changes nothing (RFC 7386 merges are). */
static void check_merge(const ck_json_t *root)
{
	if (!ck_json_equal(root, root))
		__builtin_trap();
	ck_sbuf_t out = {0};
	if (ck_json_merge_patch(root, root, &out) != 0)
		__builtin_trap();
	ck_json_doc_t *m = ck_json_parse(out.data, out.len, NULL);
	ck_sbuf_t again = {0};
	if (m == NULL || ck_json_merge_patch(ck_json_root(m), root, &again) != 0)
		__builtin_trap();
	ck_json_doc_t *m2 = ck_json_parse(again.data, again.len, NULL);
	if (m2 == NULL || !ck_json_equal(ck_json_root(m2), ck_json_root(m))) {
		fprintf(stderr, "merge is not idempotent:\n%s\n%s\n", ck_sbuf_cstr(&out),
		        ck_sbuf_cstr(&again));
		__builtin_trap();
	}
	ck_json_doc_free(m2);
	ck_json_doc_free(m);
	ck_sbuf_free(&again);
	ck_sbuf_free(&out);
}

/* Returns false if some object below v repeats a key (the builder merges those). */
static bool walk(const ck_json_t *v, int depth)
{
	/* depth: the level v's container would be at; scalars may sit one below. */
	if (ck_json_len(v) > 0 && depth > CK_JSON_MAX_DEPTH)
		__builtin_trap();
	bool unique = true;
	const char *s;
	size_t l;
	int64_t i;
	double d;
	bool b;
	ck_json_get_string(v, &s, &l);
	ck_json_get_int64(v, &i);
	ck_json_get_double(v, &d);
	ck_json_get_bool(v, &b);
	ck_json_get_number_text(v, &s);
	ck_json_is_null(v);
	ck_json_str(v);
	(void)ck_json_type_name(ck_json_type(v));
	for (size_t k = 0; k < ck_json_len(v); k++) {
		const ck_json_t *m = ck_json_at(v, k);
		if (m == NULL)
			__builtin_trap();
		const char *key = ck_json_key(v, k, &l);
		if (ck_json_type(v) == CK_JSON_OBJECT) {
			const ck_json_t *found = ck_json_member(v, key, l);
			if (found == NULL)
				__builtin_trap();
			if (found != m)
				unique = false;
			const char *path[] = {key, NULL};
			if (strlen(key) == l && ck_json_get(v, path) != found)
				__builtin_trap();
		} else {
			char idx[24];
			snprintf(idx, sizeof(idx), "%zu", k);
			if (ck_json_get(v, CK_PATH(idx)) != m)
				__builtin_trap();
		}
		if (!walk(m, depth + 1))
			unique = false;
	}
	return unique;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *err = NULL;
	ck_json_doc_t *doc = ck_json_parse((const char *)data, size, &err);
	if (doc == NULL) {
		if (err == NULL || err[0] == '\0')
			__builtin_trap();
		free(err);
		return 0;
	}
	const ck_json_t *root = ck_json_root(doc);
	bool unique = walk(root, 1);
	check_merge(root);
	char *t1 = ck_json_to_text(root);
	ck_json_doc_t *again = ck_json_parse(t1, strlen(t1), &err);
	if (again == NULL) {
		fprintf(stderr, "kept form does not parse: %s\n%s\n", err, t1);
		__builtin_trap();
	}
	char *t2 = ck_json_to_text(ck_json_root(again));
	if (strcmp(t1, t2) != 0) {
		fprintf(stderr, "not a fixed point:\n%s\n%s\n", t1, t2);
		__builtin_trap();
	}
	if (ck_json_type(root) == CK_JSON_OBJECT) {
		ck_patch_t *p = ck_patch_new();
		if (ck_patch_set_json(p, CK_PATH_TOP, root) != 0)
			__builtin_trap();
		char *body = ck_patch_build(p, NULL, NULL);
		if (body == NULL || (unique && strcmp(body, t1) != 0)) {
			fprintf(stderr, "patch differs:\n%s\n%s\n", t1, body ? body : "(null)");
			__builtin_trap();
		}
		ck_json_doc_t *pd = ck_json_parse(body, strlen(body), NULL);
		if (pd == NULL)
			__builtin_trap();
		ck_json_doc_free(pd);
		free(body);
		ck_patch_free(p);
	}
	free(t1);
	free(t2);
	ck_json_doc_free(again);
	ck_json_doc_free(doc);
	return 0;
}
