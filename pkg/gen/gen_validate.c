/*
 * gen_validate: checks values against the validations a CRD's schema states, from
 * the tables ckube-gen writes (gen.h), with messages that name the field.
 */
#include <ckube/gen.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A scalar, from a kept field or a JSON node alike. */
typedef struct scalar {
	enum { SC_STRING, SC_INT, SC_DOUBLE, SC_BOOL, SC_OTHER } t;
	const char *s;
	int64_t i;
	double d;
	bool b;
} scalar_t;

/* The longest value quoted in a message, in bytes: a whole DNS subdomain fits, and
 * messages stay short enough to be a condition's. */
#define QUOTE_MAX 253

/* How many bytes of s to quote: all of it up to QUOTE_MAX, else QUOTE_MAX or
 * fewer so as not to split a UTF-8 character (a message must stay valid UTF-8
 * to be a condition's). */
static size_t quote_len(const char *s)
{
	size_t n = strnlen(s, QUOTE_MAX + 1);
	if (n <= QUOTE_MAX)
		return n;
	n = QUOTE_MAX;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

/* Appends s quoted, cut at a UTF-8 boundary after QUOTE_MAX bytes. */
static void put_quoted(ck_sbuf_t *b, const char *s)
{
	size_t n = quote_len(s);
	ck_sbuf_putc(b, '"');
	ck_sbuf_append(b, s, n);
	if (s[n] == '\0')
		ck_sbuf_putc(b, '"');
	else
		ck_sbuf_printf(b, "...\" (%zu bytes)", strlen(s));
}

/* Appends the JSON text of a value, cut as put_quoted cuts a string (a string's
 * closing quote put back); the bytes counted are the text's. */
static void put_text(ck_sbuf_t *b, const char *text)
{
	size_t n = quote_len(text);
	ck_sbuf_append(b, text, n);
	if (text[n] != '\0')
		ck_sbuf_printf(b, "...%s (%zu bytes)", text[0] == '"' ? "\"" : "", strlen(text));
}

/* "<path>.<name>", or "<name>" at the top. */
static char *join(const char *path, const char *name)
{
	return path[0] ? ck_xasprintf("%s.%s", path, name) : ck_xstrdup(name);
}

/* Characters (code points) of valid UTF-8, as maxLength counts them. */
static size_t utf8_chars(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

/* Sets *err to "<path>: <quoted s> <what>". */
static int err_quoted(char **err, const char *path, const char *s, const char *what)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_printf(&b, "%s: ", path);
	put_quoted(&b, s);
	ck_sbuf_printf(&b, " %s", what);
	int rc = ck_err_set(err, "%s", ck_sbuf_cstr(&b));
	ck_sbuf_free(&b);
	return rc;
}

static int check_enum(const ck_gen_schema_t *s, const char *path, const char *text, char **err)
{
	if (s->nenum == 0)
		return 0;
	for (size_t i = 0; i < s->nenum; i++)
		if (strcmp(s->enum_json[i], text) == 0)
			return 0;
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_printf(&b, "%s: ", path);
	put_text(&b, text);
	ck_sbuf_puts(&b, " is not one of ");
	for (size_t i = 0; i < s->nenum; i++)
		ck_sbuf_printf(&b, "%s%s", i > 0 ? ", " : "", s->enum_json[i]);
	int rc = ck_err_set(err, "%s", ck_sbuf_cstr(&b));
	ck_sbuf_free(&b);
	return rc;
}

static int check_string(const ck_gen_schema_t *s, const char *path, const char *v, char **err)
{
	bool lo = s->flags & CK_GEN_HAS_MIN_LENGTH, hi = s->flags & CK_GEN_HAS_MAX_LENGTH;
	size_t n = lo || hi ? utf8_chars(v) : 0;
	if (hi && n > (uint64_t)s->max_length)
		return ck_err_set(err, "%s: %zu characters, at most %lld", path, n,
		                  (long long)s->max_length);
	if (lo && n < (uint64_t)s->min_length)
		return ck_err_set(err, "%s: %zu characters, at least %lld", path, n,
		                  (long long)s->min_length);
	if (s->pattern != NULL) {
		int m = ck_gen_pattern_match(s->pattern, v);
		if (m < 0)
			return ck_err_set(err,
			                  "%s: the pattern '%s' cannot be matched here (does not "
			                  "compile, or out of memory)",
			                  path, s->pattern->source);
		if (m == 0) {
			if (s->pattern->name != NULL) {
				char what[256];
				snprintf(what, sizeof(what), "is not a valid %s", s->pattern->name);
				return err_quoted(err, path, v, what);
			}
			char what[1024];
			snprintf(what, sizeof(what), "does not match the pattern '%s'",
			         s->pattern->source);
			return err_quoted(err, path, v, what);
		}
	}
	return 0;
}

static int check_int(const ck_gen_schema_t *s, const char *path, int64_t v, char **err)
{
	bool lo = s->flags & CK_GEN_HAS_MIN, hi = s->flags & CK_GEN_HAS_MAX;
	bool xlo = s->flags & CK_GEN_EXCL_MIN, xhi = s->flags & CK_GEN_EXCL_MAX;
	bool below = lo && (xlo ? v <= s->imin : v < s->imin);
	bool above = hi && (xhi ? v >= s->imax : v > s->imax);
	if (!below && !above)
		return 0;
	if (lo && hi && !xlo && !xhi)
		return ck_err_set(err, "%s: %lld is not in %lld..%lld", path, (long long)v,
		                  (long long)s->imin, (long long)s->imax);
	if (below)
		return ck_err_set(err, "%s: %lld is %s %lld", path, (long long)v,
		                  xlo ? "not more than" : "less than the minimum",
		                  (long long)s->imin);
	return ck_err_set(err, "%s: %lld is %s %lld", path, (long long)v,
	                  xhi ? "not less than" : "more than the maximum", (long long)s->imax);
}

static int check_double(const ck_gen_schema_t *s, const char *path, double v, char **err)
{
	bool lo = s->flags & CK_GEN_HAS_MIN, hi = s->flags & CK_GEN_HAS_MAX;
	bool xlo = s->flags & CK_GEN_EXCL_MIN, xhi = s->flags & CK_GEN_EXCL_MAX;
	if (lo && (xlo ? v <= s->dmin : v < s->dmin))
		return ck_err_set(err, "%s: %g is %s %g", path, v,
		                  xlo ? "not more than" : "less than the minimum", s->dmin);
	if (hi && (xhi ? v >= s->dmax : v > s->dmax))
		return ck_err_set(err, "%s: %g is %s %g", path, v,
		                  xhi ? "not less than" : "more than the maximum", s->dmax);
	return 0;
}

/* The JSON text of a scalar, for enum comparison (the kept form, json.h). */
static void scalar_text(const scalar_t *v, ck_sbuf_t *b)
{
	switch (v->t) {
	case SC_STRING:
		ck_sbuf_put_json_str(b, v->s);
		break;
	case SC_INT:
		ck_sbuf_printf(b, "%lld", (long long)v->i);
		break;
	case SC_DOUBLE:
		ck_sbuf_printf(b, "%.17g", v->d);
		break;
	case SC_BOOL:
		ck_sbuf_puts(b, v->b ? "true" : "false");
		break;
	default:
		break;
	}
}

static int check_scalar(const ck_gen_schema_t *s, const char *path, const scalar_t *v, char **err)
{
	switch (s->kind) {
	case CK_GEN_STRING:
		if (v->t != SC_STRING)
			return ck_err_set(err, "%s: must be a string", path);
		break;
	case CK_GEN_INT:
		if (v->t != SC_INT)
			return ck_err_set(err, "%s: must be an integer", path);
		break;
	case CK_GEN_NUMBER:
		if (v->t != SC_INT && v->t != SC_DOUBLE)
			return ck_err_set(err, "%s: must be a number", path);
		break;
	case CK_GEN_BOOL:
		if (v->t != SC_BOOL)
			return ck_err_set(err, "%s: must be a boolean", path);
		break;
	case CK_GEN_JSON:
		if ((s->flags & CK_GEN_INT_OR_STRING) && v->t != SC_INT && v->t != SC_STRING)
			return ck_err_set(err, "%s: must be an integer or a string", path);
		if (s->flags & CK_GEN_JSON_OBJECT)
			return ck_err_set(err, "%s: must be an object", path);
		if (s->flags & CK_GEN_JSON_ARRAY)
			return ck_err_set(err, "%s: must be an array", path);
		break;
	case CK_GEN_OBJECT:
	case CK_GEN_MAP:
		return ck_err_set(err, "%s: must be an object", path);
	case CK_GEN_ARRAY:
		return ck_err_set(err, "%s: must be an array", path);
	}
	if (s->nenum > 0) {
		ck_sbuf_t b = CK_SBUF_INIT;
		scalar_text(v, &b);
		int rc = check_enum(s, path, ck_sbuf_cstr(&b), err);
		ck_sbuf_free(&b);
		if (rc != 0)
			return rc;
	}
	if (v->t == SC_STRING)
		return check_string(s, path, v->s, err);
	if (v->t == SC_INT && s->kind == CK_GEN_INT)
		return check_int(s, path, v->i, err);
	if (v->t == SC_INT && s->kind == CK_GEN_NUMBER)
		return check_double(s, path, (double)v->i, err);
	if (v->t == SC_DOUBLE && s->kind == CK_GEN_NUMBER)
		return check_double(s, path, v->d, err);
	return 0;
}

static int check_count(const ck_gen_schema_t *s, const char *path, size_t n, const char *what,
                       char **err)
{
	if ((s->flags & CK_GEN_HAS_MAX_ITEMS) && n > (uint64_t)s->max_items)
		return ck_err_set(err, "%s: %zu %s, at most %lld", path, n, what,
		                  (long long)s->max_items);
	if ((s->flags & CK_GEN_HAS_MIN_ITEMS) && n < (uint64_t)s->min_items)
		return ck_err_set(err, "%s: %zu %s, at least %lld", path, n, what,
		                  (long long)s->min_items);
	return 0;
}

int ck_gen_validate_json(const ck_gen_schema_t *s, const char *path, const ck_json_t *v, char **err)
{
	ck_json_type_t t = ck_json_type(v);
	if (t == CK_JSON_ABSENT || t == CK_JSON_NULL)
		return 0;
	if (t == CK_JSON_OBJECT || t == CK_JSON_ARRAY) {
		bool obj_ok =
		    t == CK_JSON_OBJECT && (s->kind == CK_GEN_OBJECT || s->kind == CK_GEN_MAP);
		bool arr_ok = t == CK_JSON_ARRAY && s->kind == CK_GEN_ARRAY;
		if (s->kind == CK_GEN_JSON) {
			if (s->flags & CK_GEN_INT_OR_STRING)
				return ck_err_set(err, "%s: must be an integer or a string", path);
			if ((s->flags & CK_GEN_JSON_OBJECT) && t != CK_JSON_OBJECT)
				return ck_err_set(err, "%s: must be an object", path);
			if ((s->flags & CK_GEN_JSON_ARRAY) && t != CK_JSON_ARRAY)
				return ck_err_set(err, "%s: must be an array", path);
		} else if (!obj_ok && !arr_ok) {
			scalar_t other = {.t = SC_OTHER};
			if (s->kind == CK_GEN_OBJECT || s->kind == CK_GEN_MAP)
				return ck_err_set(err, "%s: must be an object", path);
			if (s->kind == CK_GEN_ARRAY)
				return ck_err_set(err, "%s: must be an array", path);
			return check_scalar(s, path, &other, err);
		}
		if (s->nenum > 0) {
			char *text = ck_json_to_text(v);
			int rc = check_enum(s, path, text, err);
			free(text);
			if (rc != 0)
				return rc;
		}
		size_t n = ck_json_len(v);
		if (s->kind == CK_GEN_JSON) /* only its count: its inside is not mapped */
			return check_count(s, path, n, t == CK_JSON_ARRAY ? "items" : "properties",
			                   err);
		if (check_count(s, path, n, s->kind == CK_GEN_ARRAY ? "items" : "properties", err))
			return -1;
		if (s->kind == CK_GEN_OBJECT) {
			for (size_t i = 0; i < s->nprops; i++) {
				const ck_gen_prop_t *p = &s->props[i];
				const ck_json_t *m = ck_json_member(v, p->name, strlen(p->name));
				char *sub = join(path, p->name);
				int rc = 0;
				if ((m == NULL || ck_json_is_null(m)) && p->required)
					rc = ck_err_set(err, "%s: required", sub);
				else
					rc = ck_gen_validate_json(p->schema, sub, m, err);
				free(sub);
				if (rc != 0)
					return rc;
			}
			return 0;
		}
		for (size_t i = 0; i < n; i++) {
			char *sub = s->kind == CK_GEN_ARRAY
			                ? ck_xasprintf("%s[%zu]", path, i)
			                : ck_xasprintf("%s[%s]", path, ck_json_key(v, i, NULL));
			int rc = ck_gen_validate_json(s->items, sub, ck_json_at(v, i), err);
			free(sub);
			if (rc != 0)
				return rc;
		}
		return 0;
	}
	scalar_t sc = {.t = SC_OTHER};
	const char *str;
	if (ck_json_get_string(v, &str, NULL) == CK_JSON_OK) {
		sc.t = SC_STRING;
		sc.s = str;
	} else if (ck_json_get_int64(v, &sc.i) == CK_JSON_OK) {
		sc.t = SC_INT;
	} else if (ck_json_get_double(v, &sc.d) == CK_JSON_OK) {
		sc.t = SC_DOUBLE;
	} else if (ck_json_get_bool(v, &sc.b) == CK_JSON_OK) {
		sc.t = SC_BOOL;
	}
	return check_scalar(s, path, &sc, err);
}

/* Whether any kept field under the object schema s is present in obj. */
static bool object_present(const ck_gen_schema_t *s, const ck_obj_t *obj)
{
	for (size_t i = 0; i < s->nprops; i++) {
		const ck_gen_prop_t *p = &s->props[i];
		if (p->field >= 0) {
			ck_val_type_t t = ck_obj_field(obj, (size_t)p->field)->type;
			if (t != CK_VAL_ABSENT && t != CK_VAL_NULL)
				return true;
		} else if (p->schema->kind == CK_GEN_OBJECT && object_present(p->schema, obj)) {
			return true;
		}
	}
	return false;
}

static int check_val(const ck_gen_schema_t *s, const char *path, const ck_val_t *v, char **err)
{
	scalar_t sc = {.t = SC_OTHER};
	switch (v->type) {
	case CK_VAL_ABSENT:
	case CK_VAL_NULL:
		return 0;
	case CK_VAL_JSON: {
		ck_json_doc_t *d = ck_json_parse_val(v, err);
		if (d == NULL)
			return ck_err_wrap(err, "%s", path);
		int rc = ck_gen_validate_json(s, path, ck_json_root(d), err);
		ck_json_doc_free(d);
		return rc;
	}
	case CK_VAL_STRING:
		sc.t = SC_STRING;
		sc.s = v->u.s;
		break;
	case CK_VAL_INT:
		sc.t = SC_INT;
		sc.i = v->u.i;
		break;
	case CK_VAL_DOUBLE:
		sc.t = SC_DOUBLE;
		sc.d = v->u.d;
		break;
	case CK_VAL_BOOL:
		sc.t = SC_BOOL;
		sc.b = v->u.b;
		break;
	}
	return check_scalar(s, path, &sc, err);
}

int ck_gen_validate_obj(const ck_gen_schema_t *s, const char *path, bool required,
                        const ck_obj_t *obj, char **err)
{
	/* The whole kind (path "") is obj itself, present even when none of its kept
	 * fields is: its required members must still be reported. */
	if (path[0] != '\0' && !object_present(s, obj))
		return required ? ck_err_set(err, "%s: required", path) : 0;
	for (size_t i = 0; i < s->nprops; i++) {
		const ck_gen_prop_t *p = &s->props[i];
		char *sub = join(path, p->name);
		int rc = 0;
		if (p->field >= 0) {
			const ck_val_t *v = ck_obj_field(obj, (size_t)p->field);
			if (p->required && (v->type == CK_VAL_ABSENT || v->type == CK_VAL_NULL))
				rc = ck_err_set(err, "%s: required", sub);
			else
				rc = check_val(p->schema, sub, v, err);
		} else if (p->schema->kind == CK_GEN_OBJECT) {
			rc = ck_gen_validate_obj(p->schema, sub, p->required, obj, err);
		}
		free(sub);
		if (rc != 0)
			return rc;
	}
	return 0;
}

int ck_gen_validate(const ck_gen_schema_t *s, const char *path, const void *v, char **err)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_gen_to_json(s, v, &b);
	ck_json_doc_t *d = ck_json_parse(ck_sbuf_cstr(&b), b.len, err);
	int rc = d != NULL ? ck_gen_validate_json(s, path, ck_json_root(d), err)
	                   : ck_err_wrap(err, "%s", path);
	ck_json_doc_free(d);
	ck_sbuf_free(&b);
	return rc;
}
