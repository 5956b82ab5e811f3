/*
 * gen: reading kept fields into generated structs, and writing them back out,
 * driven by the tables ckube-gen writes (gen.h). Validation is in gen_validate.c.
 */
#include <ckube/gen.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pointer to the member at off in struct base. */
#define AT(base, off)  ((void *)((char *)(base) + (off)))
#define CAT(base, off) ((const void *)((const char *)(base) + (off)))

static void set_flag(void *base, size_t off, bool v)
{
	if (off != CK_GEN_NONE)
		*(bool *)AT(base, off) = v;
}

static bool get_flag(const void *base, size_t off)
{
	return off != CK_GEN_NONE && *(const bool *)CAT(base, off);
}

/* Whether property p of struct base is present (what the encoders write). */
static bool prop_present(const ck_gen_prop_t *p, const void *base)
{
	switch (p->schema->kind) {
	case CK_GEN_STRING:
	case CK_GEN_JSON:
		return *(char *const *)CAT(base, p->offset) != NULL;
	case CK_GEN_ARRAY:
	case CK_GEN_MAP:
		/* Items set without the flag still count: forgetting has_x must not
		 * silently drop a list. */
		return get_flag(base, p->has_offset) ||
		       *(const size_t *)CAT(base, p->len_offset) > 0;
	default:
		return get_flag(base, p->has_offset);
	}
}

/* Frees what the value at v (of schema s) owns; leaves it zeroed. */
static void clear_value(const ck_gen_schema_t *s, void *v);

static void clear_elems(const ck_gen_schema_t *e, void *arr, size_t n)
{
	for (size_t i = 0; arr != NULL && i < n; i++)
		clear_value(e, (char *)arr + i * e->size);
}

static void clear_value(const ck_gen_schema_t *s, void *v)
{
	switch (s->kind) {
	case CK_GEN_STRING:
	case CK_GEN_JSON:
		free(*(char **)v);
		break;
	case CK_GEN_OBJECT:
		ck_gen_clear(s, v);
		return;
	default:
		break;
	}
	memset(v, 0, s->size);
}

static void clear_prop(const ck_gen_prop_t *p, void *base)
{
	const ck_gen_schema_t *s = p->schema;
	if (s->kind == CK_GEN_ARRAY || s->kind == CK_GEN_MAP) {
		void **arr = AT(base, p->offset);
		size_t *n = AT(base, p->len_offset);
		clear_elems(s->items, *arr, *n);
		free(*arr);
		*arr = NULL;
		if (s->kind == CK_GEN_MAP) {
			char ***keys = AT(base, p->keys_offset);
			for (size_t i = 0; *keys != NULL && i < *n; i++)
				free((*keys)[i]);
			free(*keys);
			*keys = NULL;
		}
		*n = 0;
	} else {
		clear_value(s, AT(base, p->offset));
	}
	set_flag(base, p->has_offset, false);
}

void ck_gen_clear(const ck_gen_schema_t *s, void *v)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < s->nprops; i++)
		clear_prop(&s->props[i], v);
	memset(v, 0, s->size);
}

/* ---------------------------------------------------------------- reading */

static bool from_json_value(const ck_gen_schema_t *s, const ck_json_t *v, void *out)
{
	switch (s->kind) {
	case CK_GEN_STRING: {
		const char *str = ck_json_str(v);
		if (str == NULL)
			return false;
		*(char **)out = ck_xstrdup(str);
		return true;
	}
	case CK_GEN_INT:
		return ck_json_get_int64(v, out) == CK_JSON_OK;
	case CK_GEN_NUMBER:
		return ck_json_get_double(v, out) == CK_JSON_OK;
	case CK_GEN_BOOL:
		return ck_json_get_bool(v, out) == CK_JSON_OK;
	case CK_GEN_JSON: {
		if (ck_json_type(v) == CK_JSON_ABSENT || ck_json_is_null(v))
			return false;
		/* An int-or-string holding a boolean, a fraction, an object, ... is of
		 * another type than the schema's: left absent like any other, not kept
		 * for the encoders to write back. */
		int64_t i;
		if ((s->flags & CK_GEN_INT_OR_STRING) && ck_json_type(v) != CK_JSON_STRING &&
		    ck_json_get_int64(v, &i) != CK_JSON_OK)
			return false;
		if (((s->flags & CK_GEN_JSON_OBJECT) && ck_json_type(v) != CK_JSON_OBJECT) ||
		    ((s->flags & CK_GEN_JSON_ARRAY) && ck_json_type(v) != CK_JSON_ARRAY))
			return false;
		*(char **)out = ck_json_to_text(v);
		return true;
	}
	default:
		return false;
	}
}

/*
 * Reads v into property p of struct base (all of its members). Returns whether
 * v had the property's type.
 */
static bool from_json_prop(const ck_gen_prop_t *p, const ck_json_t *v, void *base)
{
	const ck_gen_schema_t *s = p->schema;
	if (v == NULL || ck_json_is_null(v))
		return false;
	bool ok;
	if (s->kind == CK_GEN_ARRAY || s->kind == CK_GEN_MAP) {
		bool arr = s->kind == CK_GEN_ARRAY;
		if (ck_json_type(v) != (arr ? CK_JSON_ARRAY : CK_JSON_OBJECT))
			return false;
		size_t n = ck_json_len(v);
		char *elems = ck_xcalloc(n > 0 ? n : 1, s->items->size);
		char **keys = arr ? NULL : ck_xcalloc(n > 0 ? n : 1, sizeof(char *));
		for (size_t i = 0; i < n; i++) {
			/* An element of another type stays zero: the list keeps its
			 * length and positions, as validation reports them. */
			(void)ck_gen_from_json(s->items, ck_json_at(v, i),
			                       elems + i * s->items->size);
			if (keys != NULL)
				keys[i] = ck_xstrdup(ck_json_key(v, i, NULL));
		}
		*(void **)AT(base, p->offset) = elems;
		*(size_t *)AT(base, p->len_offset) = n;
		if (keys != NULL)
			*(char ***)AT(base, p->keys_offset) = keys;
		ok = true;
	} else {
		ok = ck_gen_from_json(s, v, AT(base, p->offset));
	}
	set_flag(base, p->has_offset, ok);
	return ok;
}

bool ck_gen_from_json(const ck_gen_schema_t *s, const ck_json_t *v, void *out)
{
	if (s->kind == CK_GEN_ARRAY || s->kind == CK_GEN_MAP) {
		/* Only reachable for a bare array schema, which ckube-gen never makes
		 * an element of (arrays of arrays are kept JSON). */
		return false;
	}
	if (s->kind != CK_GEN_OBJECT) {
		memset(out, 0, s->size);
		return from_json_value(s, v, out);
	}
	memset(out, 0, s->size);
	if (ck_json_type(v) != CK_JSON_OBJECT)
		return false;
	for (size_t i = 0; i < s->nprops; i++) {
		const ck_gen_prop_t *p = &s->props[i];
		(void)from_json_prop(p, ck_json_member(v, p->name, strlen(p->name)), out);
	}
	return true;
}

/* Reads kept value v (a scalar or CK_VAL_JSON) into property p of base. */
static int from_val_prop(const ck_gen_prop_t *p, const ck_val_t *v, void *base, char **err)
{
	const ck_gen_schema_t *s = p->schema;
	void *dst = AT(base, p->offset);
	bool ok = false;
	switch (v->type) {
	case CK_VAL_ABSENT:
	case CK_VAL_NULL:
		return 0;
	case CK_VAL_STRING:
		if (s->kind == CK_GEN_STRING) {
			*(char **)dst = ck_xstrdup(v->u.s);
			return 0;
		}
		break;
	case CK_VAL_INT:
		if (s->kind == CK_GEN_INT) {
			*(int64_t *)dst = v->u.i;
			ok = true;
		} else if (s->kind == CK_GEN_NUMBER) {
			*(double *)dst = (double)v->u.i;
			ok = true;
		}
		break;
	case CK_VAL_DOUBLE:
		if (s->kind == CK_GEN_NUMBER) {
			*(double *)dst = v->u.d;
			ok = true;
		}
		break;
	case CK_VAL_BOOL:
		if (s->kind == CK_GEN_BOOL) {
			*(bool *)dst = v->u.b;
			ok = true;
		}
		break;
	case CK_VAL_JSON:
		break;
	}
	if (ok) {
		set_flag(base, p->has_offset, true);
		return 0;
	}
	if (s->kind == CK_GEN_STRING || s->kind == CK_GEN_INT || s->kind == CK_GEN_NUMBER ||
	    s->kind == CK_GEN_BOOL)
		return 0; /* another type: left absent */
	/* Objects, arrays, maps and kept JSON: through the JSON reader. */
	ck_json_doc_t *d = ck_json_parse_val(v, err);
	if (d == NULL)
		return ck_err_wrap(err, "%s", p->name);
	(void)from_json_prop(p, ck_json_root(d), base);
	ck_json_doc_free(d);
	return 0;
}

/* Fills the object struct base of schema s from obj's kept fields. Returns
 * whether any property was present. */
static bool get_object(const ck_gen_schema_t *s, const ck_obj_t *obj, void *base, int *rc,
                       char **err)
{
	bool any = false;
	for (size_t i = 0; i < s->nprops; i++) {
		const ck_gen_prop_t *p = &s->props[i];
		if (p->field >= 0) {
			if (from_val_prop(p, ck_obj_field(obj, (size_t)p->field), base, err) != 0)
				*rc = -1;
		} else if (p->schema->kind == CK_GEN_OBJECT) {
			set_flag(base, p->has_offset,
			         get_object(p->schema, obj, AT(base, p->offset), rc, err));
		}
		any = any || prop_present(p, base);
	}
	return any;
}

int ck_gen_get(const ck_gen_schema_t *s, const ck_obj_t *obj, void *out, char **err)
{
	int rc = 0;
	memset(out, 0, s->size);
	(void)get_object(s, obj, out, &rc, err);
	return rc;
}

/* ---------------------------------------------------------------- writing */

static void to_json_value(const ck_gen_schema_t *s, const void *v, ck_sbuf_t *out);

static void to_json_prop(const ck_gen_prop_t *p, const void *base, ck_sbuf_t *out)
{
	const ck_gen_schema_t *s = p->schema;
	if (s->kind != CK_GEN_ARRAY && s->kind != CK_GEN_MAP) {
		to_json_value(s, CAT(base, p->offset), out);
		return;
	}
	const char *elems = *(char *const *)CAT(base, p->offset);
	size_t n = *(const size_t *)CAT(base, p->len_offset);
	if (elems == NULL)
		n = 0;
	char *const *keys =
	    s->kind == CK_GEN_MAP ? *(char **const *)CAT(base, p->keys_offset) : NULL;
	ck_sbuf_putc(out, s->kind == CK_GEN_ARRAY ? '[' : '{');
	bool first = true;
	for (size_t i = 0; i < n; i++) {
		if (s->kind == CK_GEN_MAP && (keys == NULL || keys[i] == NULL))
			continue; /* a map entry without a key cannot be written */
		if (!first)
			ck_sbuf_putc(out, ',');
		first = false;
		if (s->kind == CK_GEN_MAP) {
			ck_sbuf_put_json_str(out, keys[i]);
			ck_sbuf_putc(out, ':');
		}
		to_json_value(s->items, elems + i * s->items->size, out);
	}
	ck_sbuf_putc(out, s->kind == CK_GEN_ARRAY ? ']' : '}');
}

static void to_json_value(const ck_gen_schema_t *s, const void *v, ck_sbuf_t *out)
{
	switch (s->kind) {
	case CK_GEN_STRING: {
		const char *str = *(char *const *)v;
		ck_sbuf_put_json_str(out, str ? str : "");
		break;
	}
	case CK_GEN_JSON: {
		const char *txt = *(char *const *)v;
		ck_sbuf_puts(out, txt ? txt : "null");
		break;
	}
	case CK_GEN_INT:
		ck_sbuf_printf(out, "%lld", (long long)*(const int64_t *)v);
		break;
	case CK_GEN_NUMBER: {
		/* %.17g reads back as the same double. JSON has no NaN or Inf. */
		double d = *(const double *)v;
		if (d != d || d - d != 0)
			ck_sbuf_puts(out, "null");
		else
			ck_sbuf_printf(out, "%.17g", d);
		break;
	}
	case CK_GEN_BOOL:
		ck_sbuf_puts(out, *(const bool *)v ? "true" : "false");
		break;
	case CK_GEN_OBJECT: {
		ck_sbuf_putc(out, '{');
		bool first = true;
		for (size_t i = 0; i < s->nprops; i++) {
			const ck_gen_prop_t *p = &s->props[i];
			if (!prop_present(p, v))
				continue;
			if (!first)
				ck_sbuf_putc(out, ',');
			first = false;
			ck_sbuf_put_json_str(out, p->name);
			ck_sbuf_putc(out, ':');
			to_json_prop(p, v, out);
		}
		ck_sbuf_putc(out, '}');
		break;
	}
	default:
		ck_sbuf_puts(out, "null");
		break;
	}
}

void ck_gen_to_json(const ck_gen_schema_t *s, const void *v, ck_sbuf_t *out)
{
	to_json_value(s, v, out);
}

int ck_gen_to_patch(const ck_gen_schema_t *s, const void *v, ck_patch_t *p, const char *const *path)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	to_json_value(s, v, &b);
	int rc = ck_patch_set_raw(p, path, ck_sbuf_cstr(&b), b.len);
	ck_sbuf_free(&b);
	return rc;
}

int ck_gen_to_patch_props(const ck_gen_schema_t *s, const void *v, ck_patch_t *p)
{
	int rc = 0;
	ck_sbuf_t b = CK_SBUF_INIT;
	for (size_t i = 0; rc == 0 && i < s->nprops; i++) {
		const ck_gen_prop_t *pr = &s->props[i];
		if (!prop_present(pr, v))
			continue;
		ck_sbuf_reset(&b);
		to_json_prop(pr, v, &b);
		rc = ck_patch_set_raw(p, CK_PATH(pr->name), ck_sbuf_cstr(&b), b.len);
	}
	ck_sbuf_free(&b);
	return rc;
}
