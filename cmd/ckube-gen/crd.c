/*
 * crd: a CustomResourceDefinition (apiextensions.k8s.io/v1) read from YAML, and
 * each version's openAPIV3Schema mapped to the C kinds of ckube/gen.h.
 *
 * The input is untrusted (the generator is fuzzed on it): every error names the
 * file, the line and the path in the CRD, and limits on depth and size bound the
 * work an input can cause (YAML aliases can make a small file a huge tree).
 */
#include "cmd/ckube-gen/gen.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Deepest schema nesting mapped; the decoder keeps values up to 256 levels, and
 * no real CRD comes near this. */
#define MAX_DEPTH 32
/* Schema nodes visited in one CRD, aliases counted as often as they are used. */
#define MAX_NODES 20000
/* Work one CRD may cause, in bytes of text kept and keys compared, aliases again
 * counted as often as they are used: they let a few lines repeat a long name, an
 * enum, a pattern or a mapping of many keys thousands of times over, which
 * MAX_NODES alone does not bound (nor what is written from it). The largest
 * CRDs around (prometheus-operator's, 800 KB of YAML) need under 1 MiB. */
#define MAX_WORK (4u << 20)

typedef struct ctx {
	const char *file;
	yaml_document_t *doc;
	bool strict;
	char *err;
	size_t nodes;
	size_t work;
	bool *pattern_ok; /* by node index in doc: a pattern that compiled */
	gen_crd_t *crd;
} ctx_t;

static yaml_node_t *node_at(ctx_t *x, int i)
{
	return i > 0 ? yaml_document_get_node(x->doc, i) : NULL;
}

static int line_of(const yaml_node_t *n)
{
	return n ? (int)n->start_mark.line + 1 : 0;
}

/* Records the first error: "<file>:<line>: <path>: <why>". Returns NULL. */
static void *fail(ctx_t *x, const yaml_node_t *n, const char *path, const char *fmt, ...)
    CK_PRINTF(4, 5);
static void *fail(ctx_t *x, const yaml_node_t *n, const char *path, const char *fmt, ...)
{
	if (x->err != NULL)
		return NULL;
	va_list ap;
	va_start(ap, fmt);
	char *why = ck_xvasprintf(fmt, ap);
	va_end(ap);
	x->err = ck_xasprintf("%s:%d: %s: %s", x->file, line_of(n), path, why);
	free(why);
	return NULL;
}

/* Counts n units of work at y; false after fail() once over MAX_WORK. */
static bool work(ctx_t *x, const yaml_node_t *y, const char *path, size_t n)
{
	x->work += n < MAX_WORK ? n : MAX_WORK;
	if (x->work <= MAX_WORK)
		return true;
	fail(x, y, path, "more than %u MiB of schema text and keys (aliases used many times?)",
	     MAX_WORK >> 20);
	return false;
}

/* What the generated code will not check: a note, or an error when strict. */
static void note(ctx_t *x, const yaml_node_t *n, const char *path, const char *what)
{
	if (x->strict) {
		fail(x, n, path, "%s (refused by --strict)", what);
		return;
	}
	if (!work(x, n, path, strlen(path) + strlen(what)))
		return;
	gen_crd_t *c = x->crd;
	c->notes = ck_xrealloc(c->notes, (c->nnotes + 1) * sizeof(char *));
	c->notes[c->nnotes++] = ck_xasprintf("%s:%d: %s: %s", x->file, line_of(n), path, what);
}

static const char *scalar(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The value of key in mapping m, or NULL. */
static yaml_node_t *get(ctx_t *x, const yaml_node_t *m, const char *key)
{
	if (m == NULL || m->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
	     p++) {
		const char *k = scalar(node_at(x, p->key));
		if (k != NULL && strcmp(k, key) == 0)
			return node_at(x, p->value);
	}
	return NULL;
}

/* A required string member, or NULL after fail(). */
static const char *get_str(ctx_t *x, const yaml_node_t *m, const char *key, const char *path)
{
	const yaml_node_t *v = get(x, m, key);
	const char *s = scalar(v);
	if (s == NULL || s[0] == '\0')
		return fail(x, v ? v : m, path, "%s is required (a non-empty string)", key);
	return s;
}

static bool is_true(const yaml_node_t *n)
{
	const char *s = scalar(n);
	return s && (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0);
}

static bool parse_i64(const char *s, int64_t *out)
{
	if (s == NULL || *s == '\0')
		return false;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	*out = v;
	return true;
}

static bool parse_double(const char *s, double *out)
{
	if (s == NULL || *s == '\0')
		return false;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno != 0 || *end != '\0' || !isfinite(v))
		return false;
	*out = v;
	return true;
}

/* A non-negative integer member (minLength, ...) into *out; -1 when absent. */
static void get_count(ctx_t *x, const yaml_node_t *m, const char *key, const char *path,
                      int64_t *out)
{
	*out = -1;
	const yaml_node_t *v = get(x, m, key);
	if (v == NULL)
		return;
	if (!parse_i64(scalar(v), out) || *out < 0) {
		*out = -1;
		fail(x, v, path, "%s must be a non-negative integer", key);
	}
}

static void node_free(gen_node_t *n)
{
	if (n == NULL)
		return;
	for (size_t i = 0; i < n->nprops; i++) {
		free(n->props[i].name);
		node_free(n->props[i].node);
	}
	free(n->props);
	node_free(n->items);
	for (size_t i = 0; i < n->nenum; i++)
		free(n->enums[i]);
	free(n->enums);
	free(n->spath);
	free(n->why_json);
	free(n->pattern);
	free(n->pattern_ere);
	free(n->format);
	free(n->description);
	free(n->ctype);
	free(n);
}

/* The JSON text of enum value v for a node of kind k, or NULL after fail(). */
static char *enum_text(ctx_t *x, const gen_node_t *g, const yaml_node_t *v, const char *path)
{
	const char *s = scalar(v);
	if (s == NULL)
		return fail(x, v, path, "enum values must be scalars");
	ck_sbuf_t b = CK_SBUF_INIT;
	int64_t i;
	double d;
	switch (g->kind) {
	case CK_GEN_STRING:
		ck_sbuf_put_json_str(&b, s);
		break;
	case CK_GEN_INT:
		if (!parse_i64(s, &i))
			return fail(x, v, path, "enum value \"%s\" is not an integer", s);
		ck_sbuf_printf(&b, "%lld", (long long)i);
		break;
	case CK_GEN_NUMBER:
		if (!parse_double(s, &d))
			return fail(x, v, path, "enum value \"%s\" is not a number", s);
		ck_sbuf_printf(&b, "%.17g", d);
		break;
	case CK_GEN_BOOL:
		if (strcmp(s, "true") != 0 && strcmp(s, "false") != 0)
			return fail(x, v, path, "enum value \"%s\" is not a boolean", s);
		ck_sbuf_puts(&b, s);
		break;
	default:
		return fail(x, v, path, "enum on a %s is not supported",
		            g->kind == CK_GEN_JSON ? "value kept as JSON" : "structured value");
	}
	return ck_sbuf_steal(&b);
}

static gen_node_t *build(ctx_t *x, const yaml_node_t *y, const char *path, int depth);

/* Maps properties / required of an object schema. */
static void build_props(ctx_t *x, gen_node_t *g, const yaml_node_t *props, const yaml_node_t *y,
                        const char *path, int depth)
{
	if (props->type != YAML_MAPPING_NODE) {
		fail(x, props, path, "properties must be a mapping");
		return;
	}
	size_t n = (size_t)(props->data.mapping.pairs.top - props->data.mapping.pairs.start);
	g->props = ck_xcalloc(n > 0 ? n : 1, sizeof(gen_prop_t));
	gen_nameset_t names = {0}; /* of g->props, in their order */
	for (yaml_node_pair_t *p = props->data.mapping.pairs.start;
	     x->err == NULL && p < props->data.mapping.pairs.top; p++) {
		const yaml_node_t *k = node_at(x, p->key);
		const char *name = scalar(k);
		if (name == NULL || name[0] == '\0') {
			fail(x, k, path, "a property name must be a non-empty string");
			goto out;
		}
		size_t at;
		if (gen_nameset_add(&names, name, &at)) {
			fail(x, k, path, "property \"%s\" is stated twice", name);
			goto out;
		}
		char *sub = ck_xasprintf("%s.properties.%s", path, name);
		if (strchr(name, '.') != NULL) {
			fail(x, k, sub, "a property name with '.' cannot be a kept field's path");
			free(sub);
			goto out;
		}
		gen_node_t *c = build(x, node_at(x, p->value), sub, depth + 1);
		free(sub);
		if (c == NULL)
			goto out;
		g->props[g->nprops].name = ck_xstrdup(name);
		g->props[g->nprops++].node = c;
	}
	const yaml_node_t *req = get(x, y, "required");
	if (req == NULL || x->err != NULL)
		goto out;
	if (req->type != YAML_SEQUENCE_NODE) {
		fail(x, req, path, "required must be a list of property names");
		goto out;
	}
	for (yaml_node_item_t *it = req->data.sequence.items.start;
	     it < req->data.sequence.items.top; it++) {
		if (!work(x, req, path, 8))
			goto out;
		const yaml_node_t *r = node_at(x, *it);
		const char *name = scalar(r);
		size_t i = name ? gen_nameset_find(&names, name) : SIZE_MAX;
		if (i == SIZE_MAX) {
			fail(x, r, path,
			     "required names \"%s\", which is not one of its properties",
			     name ? name : "?");
			goto out;
		}
		g->props[i].required = true;
	}
out:
	gen_nameset_free(&names);
}

/* Whether n or anything under it states a validation (what kept JSON loses). */
static bool has_checks(const gen_node_t *n)
{
	unsigned shape = CK_GEN_INT_OR_STRING | CK_GEN_JSON_OBJECT | CK_GEN_JSON_ARRAY;
	if ((n->flags & ~shape) != 0 || n->nenum > 0 || n->pattern != NULL)
		return true;
	for (size_t i = 0; i < n->nprops; i++)
		if (n->props[i].required || has_checks(n->props[i].node))
			return true;
	return n->items != NULL && has_checks(n->items);
}

/* Makes g a value kept as JSON text, saying why. */
static void keep_json(gen_node_t *g, const char *why)
{
	g->kind = CK_GEN_JSON;
	free(g->why_json);
	g->why_json = ck_xstrdup(why);
}

static void build_validations(ctx_t *x, gen_node_t *g, const yaml_node_t *y, const char *path)
{
	const yaml_node_t *v;
	if ((v = get(x, y, "minimum")) != NULL) {
		g->flags |= CK_GEN_HAS_MIN;
		if (g->kind == CK_GEN_INT ? !parse_i64(scalar(v), &g->imin)
		                          : !parse_double(scalar(v), &g->dmin))
			fail(x, v, path, "minimum \"%s\" is not %s", scalar(v) ? scalar(v) : "?",
			     g->kind == CK_GEN_INT ? "an integer" : "a number");
		if (is_true(get(x, y, "exclusiveMinimum")))
			g->flags |= CK_GEN_EXCL_MIN;
	}
	if ((v = get(x, y, "maximum")) != NULL) {
		g->flags |= CK_GEN_HAS_MAX;
		if (g->kind == CK_GEN_INT ? !parse_i64(scalar(v), &g->imax)
		                          : !parse_double(scalar(v), &g->dmax))
			fail(x, v, path, "maximum \"%s\" is not %s", scalar(v) ? scalar(v) : "?",
			     g->kind == CK_GEN_INT ? "an integer" : "a number");
		if (is_true(get(x, y, "exclusiveMaximum")))
			g->flags |= CK_GEN_EXCL_MAX;
	}
	if ((g->flags & (CK_GEN_HAS_MIN | CK_GEN_HAS_MAX)) && g->kind != CK_GEN_INT &&
	    g->kind != CK_GEN_NUMBER)
		fail(x, y, path, "minimum / maximum apply to integers and numbers only");
	get_count(x, y, "minLength", path, &g->min_length);
	get_count(x, y, "maxLength", path, &g->max_length);
	get_count(x, y, "minItems", path, &g->min_items);
	get_count(x, y, "maxItems", path, &g->max_items);
	int64_t minp, maxp;
	get_count(x, y, "minProperties", path, &minp);
	get_count(x, y, "maxProperties", path, &maxp);
	if (g->kind == CK_GEN_MAP) {
		g->min_items = minp;
		g->max_items = maxp;
	}
	if (g->min_length >= 0)
		g->flags |= CK_GEN_HAS_MIN_LENGTH;
	if (g->max_length >= 0)
		g->flags |= CK_GEN_HAS_MAX_LENGTH;
	if (g->min_items >= 0)
		g->flags |= CK_GEN_HAS_MIN_ITEMS;
	if (g->max_items >= 0)
		g->flags |= CK_GEN_HAS_MAX_ITEMS;
	if ((v = get(x, y, "pattern")) != NULL) {
		const char *src = scalar(v);
		if (src == NULL) {
			fail(x, v, path, "pattern must be a string");
			return;
		}
		if (!work(x, v, path, 4 * strlen(src)))
			return;
		char *why = NULL;
		char *ere = gen_pattern_ere(src, &why);
		if (ere == NULL) {
			fail(x, v, path, "pattern '%s': %s", src, why);
			free(why);
			return;
		}
		/* Compiled once per pattern in the file, however often aliases use it. */
		bool *ok = &x->pattern_ok[v - x->doc->nodes.start];
		if (!*ok) {
			/* As generated validation will compile it: by the library. */
			ck_gen_pattern_t p = {.source = src, .ere = ere};
			int rc = ck_gen_pattern_match(&p, "");
			ck_gen_pattern_release(&p);
			if (rc < 0) {
				fail(x, v, path,
				     "pattern '%s' is not a valid regular expression here", src);
				free(ere);
				return;
			}
		}
		*ok = true;
		g->pattern = ck_xstrdup(src);
		g->pattern_ere = ere;
		g->pattern_name = gen_pattern_name(src);
	}
	if ((v = get(x, y, "enum")) != NULL) {
		if (v->type != YAML_SEQUENCE_NODE) {
			fail(x, v, path, "enum must be a list");
			return;
		}
		size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
		if (!work(x, v, path, 8 * n))
			return;
		/* Structured values (of a value kept as JSON: an array of arrays, ...) have
		 * no text here that the generated validation could compare with; a
		 * placeholder would make it refuse every value. Left to the API server. */
		for (size_t i = 0; g->kind == CK_GEN_JSON && i < n; i++) {
			const yaml_node_t *e = node_at(x, v->data.sequence.items.start[i]);
			if (e != NULL && e->type != YAML_SCALAR_NODE) {
				note(x, y, path,
				     "an enum of structured values is not checked by the generated "
				     "validation (the API server checks it)");
				return;
			}
		}
		g->enums = ck_xcalloc(n > 0 ? n : 1, sizeof(char *));
		for (size_t i = 0; i < n && x->err == NULL; i++) {
			const yaml_node_t *e = node_at(x, v->data.sequence.items.start[i]);
			if (!work(x, e, path, scalar(e) ? strlen(scalar(e)) : 0))
				return;
			char *t = enum_text(x, g, e, path);
			if (t != NULL)
				g->enums[g->nenum++] = t;
		}
	}
}

/*
 * Whether any (an anyOf) is [{type: integer}, {type: string}], which is how
 * controller-gen states an IntOrString beside x-kubernetes-int-or-string: the
 * generated validation checks exactly that (CK_GEN_INT_OR_STRING), so it is no
 * note, and --strict takes the CRDs that use IntOrString.
 */
static bool int_or_string_any_of(ctx_t *x, const yaml_node_t *any)
{
	if (any == NULL || any->type != YAML_SEQUENCE_NODE ||
	    any->data.sequence.items.top - any->data.sequence.items.start != 2)
		return false;
	bool is_int = false, is_str = false;
	for (yaml_node_item_t *it = any->data.sequence.items.start;
	     it < any->data.sequence.items.top; it++) {
		const yaml_node_t *a = node_at(x, *it);
		if (a == NULL || a->type != YAML_MAPPING_NODE ||
		    a->data.mapping.pairs.top - a->data.mapping.pairs.start != 1)
			return false;
		const char *t = scalar(get(x, a, "type"));
		if (t != NULL && strcmp(t, "integer") == 0)
			is_int = true;
		else if (t != NULL && strcmp(t, "string") == 0)
			is_str = true;
		else
			return false;
	}
	return is_int && is_str;
}

static gen_node_t *build(ctx_t *x, const yaml_node_t *y, const char *path, int depth)
{
	if (y == NULL || y->type != YAML_MAPPING_NODE)
		return fail(x, y, path, "a schema must be a mapping");
	if (depth > MAX_DEPTH)
		return fail(x, y, path, "nested deeper than %d levels", MAX_DEPTH);
	if (++x->nodes > MAX_NODES)
		return fail(x, y, path, "more than %d schema nodes (aliases used many times?)",
		            MAX_NODES);
	/* Its path is kept (and written) and each get() below scans its keys. */
	size_t pairs = (size_t)(y->data.mapping.pairs.top - y->data.mapping.pairs.start);
	if (!work(x, y, path, strlen(path) + 32 * (pairs + 1)))
		return NULL;
	if (get(x, y, "$ref") != NULL)
		return fail(x, y, path, "$ref is not allowed in a CRD schema");
	gen_node_t *g = ck_xcalloc(1, sizeof(*g));
	g->line = line_of(y);
	g->spath = ck_xstrdup(path);
	g->min_length = g->max_length = g->min_items = g->max_items = -1;
	g->nullable = is_true(get(x, y, "nullable"));
	const char *type = scalar(get(x, y, "type"));
	bool preserve = is_true(get(x, y, "x-kubernetes-preserve-unknown-fields"));
	const yaml_node_t *props = get(x, y, "properties");
	const yaml_node_t *addl = get(x, y, "additionalProperties");
	const char *fmt = scalar(get(x, y, "format"));
	const char *desc = scalar(get(x, y, "description"));
	size_t dlen = desc ? strcspn(desc, "\n") : 0;
	if (!work(x, y, path, dlen + (fmt ? strlen(fmt) : 0)))
		goto bad;
	if (fmt != NULL)
		g->format = ck_xstrdup(fmt);
	if (desc != NULL)
		g->description = ck_xstrndup(desc, dlen);

	if (is_true(get(x, y, "x-kubernetes-int-or-string"))) {
		keep_json(g, "x-kubernetes-int-or-string: an integer or a string");
		g->flags |= CK_GEN_INT_OR_STRING;
	} else if (type == NULL) {
		if (!preserve) {
			fail(x, y, path,
			     "no type: a structural schema states one at every level (or "
			     "x-kubernetes-preserve-unknown-fields / x-kubernetes-int-or-string)");
			goto bad;
		}
		keep_json(g, "x-kubernetes-preserve-unknown-fields without a type: any JSON");
	} else if (strcmp(type, "string") == 0) {
		g->kind = CK_GEN_STRING;
	} else if (strcmp(type, "integer") == 0) {
		g->kind = CK_GEN_INT;
	} else if (strcmp(type, "number") == 0) {
		g->kind = CK_GEN_NUMBER;
	} else if (strcmp(type, "boolean") == 0) {
		g->kind = CK_GEN_BOOL;
	} else if (strcmp(type, "array") == 0) {
		const yaml_node_t *items = get(x, y, "items");
		if (items == NULL) {
			fail(x, y, path, "an array needs items");
			goto bad;
		}
		char *sub = ck_xasprintf("%s.items", path);
		g->items = build(x, items, sub, depth + 1);
		free(sub);
		if (g->items == NULL)
			goto bad;
		g->kind = CK_GEN_ARRAY;
		if (g->items->kind == CK_GEN_ARRAY || g->items->kind == CK_GEN_MAP) {
			keep_json(g, "an array of arrays or maps");
			g->flags |= CK_GEN_JSON_ARRAY;
			if (has_checks(g->items))
				note(x, y, path,
				     "an array of arrays or maps is kept as JSON text: the "
				     "validations of "
				     "its "
				     "elements are not checked by the generated validation");
		}
	} else if (strcmp(type, "object") == 0) {
		if (props != NULL && addl != NULL && scalar(addl) == NULL) {
			fail(x, y, path,
			     "properties and additionalProperties together are not "
			     "structural");
			goto bad;
		}
		if (props != NULL) {
			g->kind = CK_GEN_OBJECT;
			build_props(x, g, props, y, path, depth);
			if (x->err != NULL)
				goto bad;
			if (g->nprops == 0) {
				keep_json(g, "an object without properties");
				g->flags |= CK_GEN_JSON_OBJECT;
			} else if (preserve)
				note(x, y, path,
				     "x-kubernetes-preserve-unknown-fields: fields beyond the "
				     "stated properties are not in the generated struct (they "
				     "stay on the server)");
		} else if (addl != NULL && scalar(addl) == NULL) {
			char *sub = ck_xasprintf("%s.additionalProperties", path);
			g->items = build(x, addl, sub, depth + 1);
			free(sub);
			if (g->items == NULL)
				goto bad;
			g->kind = CK_GEN_MAP;
			if (g->items->kind == CK_GEN_ARRAY || g->items->kind == CK_GEN_MAP) {
				keep_json(g, "a map of arrays or maps");
				g->flags |= CK_GEN_JSON_OBJECT;
				if (has_checks(g->items))
					note(x, y, path,
					     "a map of arrays or maps is kept as JSON text: the "
					     "validations "
					     "of its values are not checked by the generated "
					     "validation");
			}
		} else {
			keep_json(g, preserve ? "x-kubernetes-preserve-unknown-fields: any object"
			                      : "an object without properties");
			g->flags |= CK_GEN_JSON_OBJECT;
		}
	} else {
		fail(x, get(x, y, "type"), path, "unknown type \"%s\"", type);
		goto bad;
	}
	if (x->err != NULL)
		goto bad;
	static const char *const unchecked[] = {"oneOf", "anyOf", "allOf", "not"};
	for (size_t i = 0; i < sizeof(unchecked) / sizeof(unchecked[0]); i++) {
		const yaml_node_t *u = get(x, y, unchecked[i]);
		if (u == NULL)
			continue;
		if ((g->flags & CK_GEN_INT_OR_STRING) && strcmp(unchecked[i], "anyOf") == 0 &&
		    int_or_string_any_of(x, u))
			continue;
		char what[160];
		snprintf(what, sizeof(what),
		         "%s is not checked by the generated validation (the API server checks it)",
		         unchecked[i]);
		note(x, y, path, what);
	}
	if (get(x, y, "x-kubernetes-validations") != NULL)
		note(x, y, path,
		     "x-kubernetes-validations (CEL) are not checked by the generated validation "
		     "(the API server checks them)");
	build_validations(x, g, y, path);
	if (x->err != NULL)
		goto bad;
	return g;
bad:
	node_free(g);
	return NULL;
}

static void version_free(gen_version_t *v)
{
	free(v->name);
	node_free(v->root);
}

void gen_crd_free(gen_crd_t *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->nversions; i++)
		version_free(&c->versions[i]);
	free(c->versions);
	for (size_t i = 0; i < c->nnotes; i++)
		free(c->notes[i]);
	free(c->notes);
	free(c->file);
	free(c->name);
	free(c->group);
	free(c->kind);
	free(c->plural);
	free(c);
}

/* apiVersion, kind and metadata are the object's own: the library reads them. */
static void drop_meta(gen_node_t *root)
{
	size_t k = 0;
	for (size_t i = 0; i < root->nprops; i++) {
		const char *n = root->props[i].name;
		if (strcmp(n, "apiVersion") == 0 || strcmp(n, "kind") == 0 ||
		    strcmp(n, "metadata") == 0) {
			free(root->props[i].name);
			node_free(root->props[i].node);
		} else {
			root->props[k++] = root->props[i];
		}
	}
	root->nprops = k;
}

/* Reads the CRD document at root of x->doc into x->crd. */
static void read_crd(ctx_t *x, const yaml_node_t *root)
{
	gen_crd_t *c = x->crd;
	const char *av = scalar(get(x, root, "apiVersion"));
	if (av == NULL || strcmp(av, "apiextensions.k8s.io/v1") != 0) {
		fail(x, root, "apiVersion",
		     "\"%s\": only apiextensions.k8s.io/v1 CRDs are read (v1beta1 was removed in "
		     "Kubernetes 1.22)",
		     av ? av : "");
		return;
	}
	const char *name = scalar(get(x, get(x, root, "metadata"), "name"));
	c->name = ck_xstrdup(name ? name : "");
	/* Checked here so that a missing spec or names is reported where it was looked
	 * for: get_str would only have the absent mapping, and no line. */
	const yaml_node_t *spec = get(x, root, "spec");
	if (spec == NULL || spec->type != YAML_MAPPING_NODE) {
		fail(x, spec ? spec : root, "spec", "a mapping is required");
		return;
	}
	const yaml_node_t *names = get(x, spec, "names");
	if (names == NULL || names->type != YAML_MAPPING_NODE) {
		fail(x, names ? names : spec, "spec.names", "a mapping is required");
		return;
	}
	const char *group = get_str(x, spec, "group", "spec");
	const char *kind = get_str(x, names, "kind", "spec.names");
	const char *plural = get_str(x, names, "plural", "spec.names");
	const char *scope = get_str(x, spec, "scope", "spec");
	if (x->err != NULL)
		return;
	if (strcmp(scope, "Namespaced") != 0 && strcmp(scope, "Cluster") != 0) {
		fail(x, get(x, spec, "scope"), "spec.scope",
		     "\"%s\" is neither Namespaced nor Cluster", scope);
		return;
	}
	c->group = ck_xstrdup(group);
	c->kind = ck_xstrdup(kind);
	c->plural = ck_xstrdup(plural);
	c->namespaced = strcmp(scope, "Namespaced") == 0;
	const yaml_node_t *vs = get(x, spec, "versions");
	if (vs == NULL || vs->type != YAML_SEQUENCE_NODE ||
	    vs->data.sequence.items.top == vs->data.sequence.items.start) {
		fail(x, vs ? vs : spec, "spec.versions", "at least one version is required");
		return;
	}
	size_t n = (size_t)(vs->data.sequence.items.top - vs->data.sequence.items.start);
	c->versions = ck_xcalloc(n, sizeof(gen_version_t));
	x->pattern_ok =
	    ck_xcalloc((size_t)(x->doc->nodes.top - x->doc->nodes.start) + 1, sizeof(bool));
	for (size_t i = 0; i < n && x->err == NULL; i++) {
		const yaml_node_t *v = node_at(x, vs->data.sequence.items.start[i]);
		char path[64];
		snprintf(path, sizeof(path), "spec.versions[%zu]", i);
		const char *vname = get_str(x, v, "name", path);
		if (vname == NULL)
			return;
		for (size_t j = 0; j < c->nversions; j++)
			if (strcmp(c->versions[j].name, vname) == 0) {
				fail(x, v, path, "version \"%s\" is stated twice", vname);
				return;
			}
		gen_version_t *gv = &c->versions[c->nversions++];
		gv->name = ck_xstrdup(vname);
		gv->line = line_of(v);
		const yaml_node_t *s = get(x, get(x, v, "schema"), "openAPIV3Schema");
		if (s == NULL)
			continue;
		char *sp = ck_xasprintf("%s.schema.openAPIV3Schema", path);
		gv->root = build(x, s, sp, 0);
		if (gv->root != NULL && gv->root->kind == CK_GEN_OBJECT)
			drop_meta(gv->root);
		const char *rt = scalar(get(x, s, "type"));
		if (gv->root != NULL && (rt == NULL || strcmp(rt, "object") != 0))
			fail(x, s, sp, "the top of a schema must be of type object");
		free(sp);
	}
}

gen_crd_t *gen_crd_load(const char *file, const char *buf, size_t len, bool strict, char **err)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	ctx_t x = {.file = file, .strict = strict};
	gen_crd_t *c = ck_xcalloc(1, sizeof(*c));
	c->file = ck_xstrdup(file);
	x.crd = c;
	bool found = false;
	int found_line = 0;
	if (!yaml_parser_initialize(&parser))
		ck_fatal("yaml_parser_initialize: out of memory");
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	for (;;) {
		if (!yaml_parser_load(&parser, &doc)) {
			x.err = ck_xasprintf(
			    "%s:%zu: invalid YAML: %s%s%s", file, parser.problem_mark.line + 1,
			    parser.problem ? parser.problem : "?", parser.context ? " " : "",
			    parser.context ? parser.context : "");
			break;
		}
		yaml_node_t *root = yaml_document_get_root_node(&doc);
		if (root == NULL) { /* the end of the stream */
			yaml_document_delete(&doc);
			break;
		}
		x.doc = &doc;
		const char *kind = scalar(get(&x, root, "kind"));
		if (kind != NULL && strcmp(kind, "CustomResourceDefinition") == 0 &&
		    x.err == NULL) {
			if (found)
				fail(&x, root, "kind",
				     "a second CustomResourceDefinition (the first is at line %d): "
				     "give ckube-gen one per file",
				     found_line);
			else
				read_crd(&x, root);
			found = true;
			found_line = line_of(root);
		}
		yaml_document_delete(&doc);
		free(x.pattern_ok);
		x.pattern_ok = NULL;
		if (x.err != NULL)
			break;
	}
	yaml_parser_delete(&parser);
	if (x.err == NULL && !found)
		x.err = ck_xasprintf("%s: no CustomResourceDefinition in the file", file);
	if (x.err != NULL) {
		ck_err_set(err, "%s", x.err);
		free(x.err);
		gen_crd_free(c);
		return NULL;
	}
	return c;
}
