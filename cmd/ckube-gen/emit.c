/*
 * emit: the C written for one version of a CRD. The header declares the
 * descriptor, the kept fields, the structs and the functions; the source holds the
 * tables of ckube/gen.h and thin typed wrappers around the library's functions,
 * so that what is generated stays small and what does the work is tested once.
 *
 * Everything is written in schema order and numbered in walk order: the same CRD
 * always gives the same bytes.
 */
#include "cmd/ckube-gen/gen.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kept {
	char *path;   /* "spec.replicas" */
	char *ident;  /* "spec_replicas" */
	char *uident; /* "SPEC_REPLICAS" */
	gen_node_t *node;
} kept_t;

size_t gen_grown(size_t n)
{
	return (n & (n - 1)) == 0 ? (n ? 2 * n : 1) : 0;
}

static size_t name_hash(const char *s)
{
	uint64_t h = 14695981039346656037u; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211u;
	return (size_t)h;
}

/* The slot of name, or of the empty slot where it would go. */
static size_t name_slot(const gen_nameset_t *ns, const char *name)
{
	size_t j = name_hash(name) & (ns->nslots - 1);
	while (ns->slots[j] != 0 && strcmp(ns->names[ns->slots[j] - 1], name) != 0)
		j = (j + 1) & (ns->nslots - 1);
	return j;
}

bool gen_nameset_add(gen_nameset_t *ns, const char *name, size_t *at)
{
	if (2 * (ns->n + 1) > ns->nslots) {
		size_t nslots = ns->nslots ? 2 * ns->nslots : 64;
		free(ns->slots);
		ns->slots = ck_xcalloc(nslots, sizeof(size_t));
		ns->nslots = nslots;
		for (size_t i = 0; i < ns->n; i++)
			ns->slots[name_slot(ns, ns->names[i])] = i + 1;
	}
	size_t j = name_slot(ns, name);
	if (ns->slots[j] != 0) {
		*at = ns->slots[j] - 1;
		return true;
	}
	if (gen_grown(ns->n))
		ns->names = ck_xrealloc(ns->names, gen_grown(ns->n) * sizeof(char *));
	ns->names[ns->n] = name;
	ns->slots[j] = ++ns->n;
	*at = ns->n - 1;
	return false;
}

size_t gen_nameset_find(const gen_nameset_t *ns, const char *name)
{
	if (ns->nslots == 0)
		return SIZE_MAX;
	size_t j = name_slot(ns, name);
	return ns->slots[j] != 0 ? ns->slots[j] - 1 : SIZE_MAX;
}

void gen_nameset_free(gen_nameset_t *ns)
{
	free(ns->names);
	free(ns->slots);
	*ns = (gen_nameset_t){0};
}

typedef struct em {
	gen_crd_t *crd;
	const gen_version_t *v;
	char *P, *PU; /* prefix, upper case */
	kept_t *kept;
	size_t nkept;
	gen_nameset_t globals; /* every identifier written at file scope (owned), for collisions */
	char **gpaths;         /* where each came from */
	int *glines;           /* and its line, 0 for the names every header has */
	int next_id;
	char *err;
} em_t;

static const char *const keywords[] = {
    "auto",          "break",
    "case",          "char",
    "const",         "continue",
    "default",       "do",
    "double",        "else",
    "enum",          "extern",
    "float",         "for",
    "goto",          "if",
    "inline",        "int",
    "long",          "register",
    "restrict",      "return",
    "short",         "signed",
    "sizeof",        "static",
    "struct",        "switch",
    "typedef",       "union",
    "unsigned",      "void",
    "volatile",      "while",
    "bool",          "true",
    "false",         "_Bool",
    "_Complex",      "_Atomic",
    "_Imaginary",    "_Noreturn",
    "_Alignas",      "_Alignof",
    "_Generic",      "_Static_assert",
    "_Thread_local", "NULL",
    "errno",
};

char *gen_snake(const char *name)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	size_t n = strlen(name);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if (isupper(c)) {
			unsigned char prev = i > 0 ? (unsigned char)name[i - 1] : 0;
			unsigned char next = (unsigned char)name[i + 1];
			/* podIP -> pod_ip, URLPath -> url_path, v1Beta -> v1_beta */
			if (i > 0 &&
			    (islower(prev) || isdigit(prev) || (isupper(prev) && islower(next))))
				ck_sbuf_putc(&b, '_');
			ck_sbuf_putc(&b, (char)tolower(c));
		} else if (isalnum(c)) {
			ck_sbuf_putc(&b, (char)c);
		} else if (b.len > 0 && b.data[b.len - 1] != '_') {
			ck_sbuf_putc(&b, '_'); /* '-', '/', ... and UTF-8 bytes */
		}
	}
	while (b.len > 0 && b.data[b.len - 1] == '_')
		b.len--;
	if (b.len == 0 || isdigit((unsigned char)b.data[0])) {
		char *rest = ck_sbuf_steal(&b);
		char *r = ck_xasprintf("f_%s", rest ? rest : "");
		free(rest);
		return r;
	}
	char *s = ck_xstrndup(b.data, b.len);
	ck_sbuf_free(&b);
	for (size_t i = 0; i < sizeof(keywords) / sizeof(keywords[0]); i++)
		if (strcmp(s, keywords[i]) == 0) {
			char *r = ck_xasprintf("%s_", s);
			free(s);
			return r;
		}
	return s;
}

static char *upper(const char *s)
{
	char *u = ck_xstrdup(s);
	for (char *p = u; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	return u;
}

/*
 * Records a file-scope identifier made for from (a schema path at line, or what
 * every header has, line 0); a second use is an error naming both places, at the
 * line of the one in the schema.
 */
static void global(em_t *e, const char *ident, const char *from, int line)
{
	size_t i;
	char *id = ck_xstrdup(ident);
	if (gen_nameset_add(&e->globals, id, &i)) {
		free(id);
		if (e->err != NULL)
			return;
		if (line == 0 && e->glines[i] > 0)
			e->err =
			    ck_xasprintf("%s:%d: %s: the C name %s is also made for %s; "
			                 "rename one, or give --prefix",
			                 e->crd->file, e->glines[i], e->gpaths[i], ident, from);
		else
			e->err = ck_xasprintf("%s:%d: %s: the C name %s is also made for %s; "
			                      "rename one, or give --prefix",
			                      e->crd->file, line, from, ident, e->gpaths[i]);
		return;
	}
	if (gen_grown(i)) {
		e->gpaths = ck_xrealloc(e->gpaths, gen_grown(i) * sizeof(char *));
		e->glines = ck_xrealloc(e->glines, gen_grown(i) * sizeof(int));
	}
	e->glines[i] = line;
	e->gpaths[i] = ck_xstrdup(from);
}

/* Appends s as a C string literal. */
static void c_str(ck_sbuf_t *b, const char *s)
{
	ck_sbuf_putc(b, '"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\' || c == '?')
			ck_sbuf_printf(b, "\\%c", c); /* '?': no trigraphs under -std=c11 */
		else if (c < 0x20 || c >= 0x7f)
			ck_sbuf_printf(b, "\\%03o", c);
		else
			ck_sbuf_putc(b, (char)c);
	}
	ck_sbuf_putc(b, '"');
}

/* The last byte appended to b, or 0. */
static char last_byte(const ck_sbuf_t *b)
{
	return b->len > 0 ? b->data[b->len - 1] : 0;
}

/*
 * Appends s for a comment: no control bytes, and a space between '*' and '/'
 * either way, so that nothing closes the comment ("*" "/") or opens one in it
 * ("/" "*", which -Wcomment rejects); and between "??" and '/', a trigraph under
 * -std=c11 that would splice the next line in (-Wtrigraphs). What was appended
 * before counts, and the text never ends in '*' or '/': the '/' of
 * "group/version" that the caller appends next cannot combine with it.
 */
static void c_comment(ck_sbuf_t *b, const char *s, size_t max)
{
	size_t n = 0;
	for (; *s && n < max; s++, n++) {
		unsigned char c = (unsigned char)*s;
		if ((c == '/' && last_byte(b) == '*') || (c == '*' && last_byte(b) == '/') ||
		    (c == '/' && b->len >= 2 && memcmp(b->data + b->len - 2, "??", 2) == 0))
			ck_sbuf_putc(b, ' ');
		if (c < 0x20)
			ck_sbuf_putc(b, ' ');
		else
			ck_sbuf_putc(b, (char)c);
	}
	if (*s)
		ck_sbuf_puts(b, "...");
	if (last_byte(b) == '*' || last_byte(b) == '/')
		ck_sbuf_putc(b, ' ');
}

/* Appends s in a comment as a C string literal (c_str), made safe by c_comment. */
static void c_str_comment(ck_sbuf_t *b, const char *s)
{
	ck_sbuf_t t = CK_SBUF_INIT;
	c_str(&t, s);
	c_comment(b, ck_sbuf_cstr(&t), t.len);
	ck_sbuf_free(&t);
}

static const char *kind_name(const gen_node_t *n)
{
	switch (n->kind) {
	case CK_GEN_STRING:
		return "string";
	case CK_GEN_INT:
		return "integer";
	case CK_GEN_NUMBER:
		return "number";
	case CK_GEN_BOOL:
		return "boolean";
	case CK_GEN_OBJECT:
		return "object";
	case CK_GEN_ARRAY:
		return "array";
	case CK_GEN_MAP:
		return "map";
	default:
		return "JSON";
	}
}

/* A short summary of what the schema requires of n, for comments. */
static void summary(ck_sbuf_t *b, const gen_node_t *n, bool required)
{
	ck_sbuf_t t = CK_SBUF_INIT;
	ck_sbuf_puts(&t, kind_name(n));
	if (n->format)
		ck_sbuf_printf(&t, " (%s)", n->format);
	if (required)
		ck_sbuf_puts(&t, ", required");
	bool xlo = n->flags & CK_GEN_EXCL_MIN, xhi = n->flags & CK_GEN_EXCL_MAX;
	if (n->kind == CK_GEN_INT && (n->flags & CK_GEN_HAS_MIN) && (n->flags & CK_GEN_HAS_MAX) &&
	    !xlo && !xhi) {
		ck_sbuf_printf(&t, ", %lld..%lld", (long long)n->imin, (long long)n->imax);
	} else {
		if (n->kind == CK_GEN_INT && (n->flags & CK_GEN_HAS_MIN))
			ck_sbuf_printf(&t, ", %s %lld", xlo ? ">" : ">=", (long long)n->imin);
		if (n->kind == CK_GEN_INT && (n->flags & CK_GEN_HAS_MAX))
			ck_sbuf_printf(&t, ", %s %lld", xhi ? "<" : "<=", (long long)n->imax);
	}
	if (n->kind == CK_GEN_NUMBER && (n->flags & CK_GEN_HAS_MIN))
		ck_sbuf_printf(&t, ", %s %g", xlo ? ">" : ">=", n->dmin);
	if (n->kind == CK_GEN_NUMBER && (n->flags & CK_GEN_HAS_MAX))
		ck_sbuf_printf(&t, ", %s %g", xhi ? "<" : "<=", n->dmax);
	if (n->flags & CK_GEN_HAS_MIN_LENGTH)
		ck_sbuf_printf(&t, ", at least %lld characters", (long long)n->min_length);
	if (n->flags & CK_GEN_HAS_MAX_LENGTH)
		ck_sbuf_printf(&t, ", at most %lld characters", (long long)n->max_length);
	if (n->flags & CK_GEN_HAS_MIN_ITEMS)
		ck_sbuf_printf(&t, ", at least %lld %s", (long long)n->min_items,
		               n->kind == CK_GEN_ARRAY ? "items" : "entries");
	if (n->flags & CK_GEN_HAS_MAX_ITEMS)
		ck_sbuf_printf(&t, ", at most %lld %s", (long long)n->max_items,
		               n->kind == CK_GEN_ARRAY ? "items" : "entries");
	if (n->pattern_name) {
		size_t len = strcspn(n->pattern_name, "(");
		while (len > 0 && n->pattern_name[len - 1] == ' ')
			len--;
		ck_sbuf_printf(&t, ", a %.*s", (int)len, n->pattern_name);
	} else if (n->pattern)
		ck_sbuf_printf(&t, ", pattern %s", n->pattern);
	if (n->nenum > 0) {
		ck_sbuf_puts(&t, ", one of ");
		for (size_t i = 0; i < n->nenum; i++)
			ck_sbuf_printf(&t, "%s%s", i ? " " : "", n->enums[i]);
	}
	if (n->why_json)
		ck_sbuf_printf(&t, "; kept as JSON text: %s", n->why_json);
	c_comment(b, ck_sbuf_cstr(&t), 200);
	ck_sbuf_free(&t);
}

/* ------------------------------------------------------------ walking */

static void add_kept(em_t *e, const char *path, const char *ident, gen_node_t *n)
{
	if (gen_grown(e->nkept))
		e->kept = ck_xrealloc(e->kept, gen_grown(e->nkept) * sizeof(kept_t));
	e->kept[e->nkept].path = ck_xstrdup(path);
	e->kept[e->nkept].ident = ck_xstrdup(ident);
	e->kept[e->nkept].uident = upper(ident);
	e->kept[e->nkept].node = n;
	n->field = (int)e->nkept++;
}

/* Kept fields: objects with properties expand into their properties, all else
 * (scalars, arrays, maps, JSON) is one field. */
static void expand(em_t *e, gen_node_t *n, const char *path, const char *ident)
{
	if (n->kind != CK_GEN_OBJECT) {
		add_kept(e, path, ident, n);
		return;
	}
	for (size_t i = 0; i < n->nprops; i++) {
		char *sn = gen_snake(n->props[i].name);
		char *p = ck_xasprintf("%s.%s", path, n->props[i].name);
		char *id = ck_xasprintf("%s_%s", ident, sn);
		expand(e, n->props[i].node, p, id);
		free(sn);
		free(p);
		free(id);
	}
}

/* Names every object's struct (ctype) and numbers every node, children first. */
static void name_nodes(em_t *e, gen_node_t *n, const char *cname)
{
	if (n->kind == CK_GEN_OBJECT) {
		for (size_t i = 0; i < n->nprops; i++) {
			char *sn = gen_snake(n->props[i].name);
			char *c = ck_xasprintf("%s_%s", cname, sn);
			name_nodes(e, n->props[i].node, c);
			free(sn);
			free(c);
		}
		free(n->ctype);
		n->ctype = ck_xstrdup(cname);
		char *t = ck_xasprintf("%s_t", cname);
		global(e, t, n->spath, n->line);
		free(t);
	} else if ((n->kind == CK_GEN_ARRAY || n->kind == CK_GEN_MAP) && n->items) {
		char *c = ck_xasprintf("%s_%s", cname, n->kind == CK_GEN_ARRAY ? "item" : "value");
		name_nodes(e, n->items, c);
		free(c);
	}
	n->id = e->next_id++;
}

/* ------------------------------------------------------------ header */

/* The C type of an element (or scalar member) of node n. */
static void elem_type(ck_sbuf_t *b, const gen_node_t *n)
{
	switch (n->kind) {
	case CK_GEN_STRING:
	case CK_GEN_JSON:
		ck_sbuf_puts(b, "char *");
		break;
	case CK_GEN_INT:
		ck_sbuf_puts(b, "int64_t ");
		break;
	case CK_GEN_NUMBER:
		ck_sbuf_puts(b, "double ");
		break;
	case CK_GEN_BOOL:
		ck_sbuf_puts(b, "bool ");
		break;
	case CK_GEN_OBJECT:
		ck_sbuf_printf(b, "%s_t ", n->ctype);
		break;
	default:
		ck_sbuf_puts(b, "void *");
		break;
	}
}

/* Checks the members of object n for collisions (x, has_x, x_len, x_keys). */
static void check_members(em_t *e, const gen_node_t *n)
{
	size_t cap = n->nprops * 4, cnt = 0;
	char **names = ck_xcalloc(cap > 0 ? cap : 1, sizeof(char *));
	const char **from = ck_xcalloc(cap > 0 ? cap : 1, sizeof(char *));
	gen_nameset_t seen = {0};
	for (size_t i = 0; i < n->nprops && e->err == NULL; i++) {
		const gen_node_t *c = n->props[i].node;
		char *sn = gen_snake(n->props[i].name);
		char *mine[4] = {ck_xstrdup(sn), NULL, NULL, NULL};
		if (c->kind != CK_GEN_STRING && c->kind != CK_GEN_JSON)
			mine[1] = ck_xasprintf("has_%s", sn);
		if (c->kind == CK_GEN_ARRAY || c->kind == CK_GEN_MAP)
			mine[2] = ck_xasprintf("%s_len", sn);
		if (c->kind == CK_GEN_MAP)
			mine[3] = ck_xasprintf("%s_keys", sn);
		for (int k = 0; k < 4; k++) {
			if (mine[k] == NULL)
				continue;
			size_t j;
			if (gen_nameset_add(&seen, mine[k], &j) && e->err == NULL)
				e->err = ck_xasprintf("%s:%d: %s.properties.%s: its C member %s "
				                      "collides with the one made for %s",
				                      e->crd->file, c->line, n->spath,
				                      n->props[i].name, mine[k], from[j]);
			names[cnt] = mine[k];
			from[cnt++] = n->props[i].name;
		}
		free(sn);
	}
	for (size_t j = 0; j < cnt; j++)
		free(names[j]);
	free(names);
	free(from);
	gen_nameset_free(&seen);
}

static void emit_struct(em_t *e, const gen_node_t *n, ck_sbuf_t *h)
{
	if (n->kind == CK_GEN_OBJECT) {
		for (size_t i = 0; i < n->nprops; i++)
			emit_struct(e, n->props[i].node, h);
	} else if ((n->kind == CK_GEN_ARRAY || n->kind == CK_GEN_MAP) && n->items) {
		emit_struct(e, n->items, h);
	}
	if (n->kind != CK_GEN_OBJECT)
		return;
	check_members(e, n);
	ck_sbuf_puts(h, "/* ");
	c_comment(h, n->spath, 400);
	if (n->description) {
		ck_sbuf_puts(h, "\n * ");
		c_comment(h, n->description, 160);
	}
	ck_sbuf_printf(h, " */\ntypedef struct %s {\n", n->ctype);
	for (size_t i = 0; i < n->nprops; i++) {
		const gen_node_t *c = n->props[i].node;
		char *sn = gen_snake(n->props[i].name);
		ck_sbuf_puts(h, "\t/* ");
		c_str_comment(h, n->props[i].name);
		ck_sbuf_puts(h, ": ");
		summary(h, c, n->props[i].required);
		ck_sbuf_puts(h, " */\n\t");
		switch (c->kind) {
		case CK_GEN_ARRAY:
			elem_type(h, c->items);
			ck_sbuf_printf(h, "*%s;\n\tsize_t %s_len;\n", sn, sn);
			break;
		case CK_GEN_MAP:
			ck_sbuf_printf(h, "char **%s_keys;\n\t", sn);
			elem_type(h, c->items);
			ck_sbuf_printf(h, "*%s;\n\tsize_t %s_len;\n", sn, sn);
			break;
		default:
			elem_type(h, c);
			ck_sbuf_printf(h, "%s;\n", sn);
			break;
		}
		if (c->kind != CK_GEN_STRING && c->kind != CK_GEN_JSON)
			ck_sbuf_printf(h, "\tbool has_%s;\n", sn);
		free(sn);
	}
	if (n->nprops == 0)
		ck_sbuf_puts(h, "\tchar unused_; /* the schema states no properties */\n");
	ck_sbuf_printf(h, "} %s_t;\n\n", n->ctype);
}

/* ------------------------------------------------------------ source tables */

/* The name of n's table: public for the kind and its top-level objects. */
static void table_name(ck_sbuf_t *c, const gen_node_t *n)
{
	if (n->exported)
		ck_sbuf_printf(c, "%s_schema", n->ctype);
	else
		ck_sbuf_printf(c, "s_%d", n->id);
}

static void emit_tables(em_t *e, const gen_node_t *n, ck_sbuf_t *c)
{
	if (n->kind == CK_GEN_OBJECT) {
		for (size_t i = 0; i < n->nprops; i++)
			emit_tables(e, n->props[i].node, c);
	} else if ((n->kind == CK_GEN_ARRAY || n->kind == CK_GEN_MAP) && n->items) {
		emit_tables(e, n->items, c);
	}
	if (n->nenum > 0) {
		ck_sbuf_printf(c, "static const char *const e_%d[] = {", n->id);
		for (size_t i = 0; i < n->nenum; i++) {
			ck_sbuf_puts(c, i ? ", " : "");
			c_str(c, n->enums[i]);
		}
		ck_sbuf_puts(c, "};\n");
	}
	if (n->pattern) {
		ck_sbuf_printf(c, "static ck_gen_pattern_t re_%d = {.source = ", n->id);
		c_str(c, n->pattern);
		ck_sbuf_puts(c, ", .ere = ");
		c_str(c, n->pattern_ere);
		ck_sbuf_puts(c, ", .name = ");
		if (n->pattern_name)
			c_str(c, n->pattern_name);
		else
			ck_sbuf_puts(c, "NULL");
		ck_sbuf_puts(c, "};\n");
	}
	if (n->kind == CK_GEN_OBJECT) {
		ck_sbuf_printf(c, "static const ck_gen_prop_t p_%d[] = {\n", n->id);
		for (size_t i = 0; i < n->nprops; i++) {
			const gen_node_t *ch = n->props[i].node;
			char *sn = gen_snake(n->props[i].name);
			const char *T = n->ctype;
			ck_sbuf_puts(c, "    {.name = ");
			c_str(c, n->props[i].name);
			ck_sbuf_puts(c, ", .schema = &");
			table_name(c, ch);
			ck_sbuf_printf(c, ", .offset = offsetof(%s_t, %s)", T, sn);
			if (ch->kind != CK_GEN_STRING && ch->kind != CK_GEN_JSON)
				ck_sbuf_printf(c, ", .has_offset = offsetof(%s_t, has_%s)", T, sn);
			else
				ck_sbuf_puts(c, ", .has_offset = CK_GEN_NONE");
			if (ch->kind == CK_GEN_ARRAY || ch->kind == CK_GEN_MAP)
				ck_sbuf_printf(c, ", .len_offset = offsetof(%s_t, %s_len)", T, sn);
			else
				ck_sbuf_puts(c, ", .len_offset = CK_GEN_NONE");
			if (ch->kind == CK_GEN_MAP)
				ck_sbuf_printf(c, ", .keys_offset = offsetof(%s_t, %s_keys)", T,
				               sn);
			else
				ck_sbuf_puts(c, ", .keys_offset = CK_GEN_NONE");
			if (ch->field >= 0)
				ck_sbuf_printf(c, ", .field = %s_%s", e->PU,
				               e->kept[ch->field].uident);
			else
				ck_sbuf_puts(c, ", .field = -1");
			ck_sbuf_printf(c, ", .required = %s},\n",
			               n->props[i].required ? "true" : "false");
			free(sn);
		}
		ck_sbuf_puts(c, "};\n");
	}
	ck_sbuf_puts(c, n->exported ? "const ck_gen_schema_t " : "static const ck_gen_schema_t ");
	table_name(c, n);
	ck_sbuf_puts(c, " = {\n");
	static const char *const kinds[] = {"",
	                                    "CK_GEN_STRING",
	                                    "CK_GEN_INT",
	                                    "CK_GEN_NUMBER",
	                                    "CK_GEN_BOOL",
	                                    "CK_GEN_OBJECT",
	                                    "CK_GEN_ARRAY",
	                                    "CK_GEN_MAP",
	                                    "CK_GEN_JSON"};
	ck_sbuf_printf(c, "    .kind = %s,\n", kinds[n->kind]);
	if (n->flags) {
		ck_sbuf_puts(c, "    .flags = ");
		static const char *const fl[] = {
		    "CK_GEN_HAS_MIN",        "CK_GEN_HAS_MAX",       "CK_GEN_EXCL_MIN",
		    "CK_GEN_EXCL_MAX",       "CK_GEN_INT_OR_STRING", "CK_GEN_HAS_MIN_LENGTH",
		    "CK_GEN_HAS_MAX_LENGTH", "CK_GEN_HAS_MIN_ITEMS", "CK_GEN_HAS_MAX_ITEMS",
		    "CK_GEN_JSON_OBJECT",    "CK_GEN_JSON_ARRAY"};
		bool first = true;
		for (int i = 0; i < 11; i++)
			if (n->flags & (1u << i)) {
				ck_sbuf_printf(c, "%s%s", first ? "" : " | ", fl[i]);
				first = false;
			}
		ck_sbuf_puts(c, ",\n");
	}
	switch (n->kind) {
	case CK_GEN_STRING:
	case CK_GEN_JSON:
		ck_sbuf_puts(c, "    .size = sizeof(char *),\n");
		break;
	case CK_GEN_INT:
		ck_sbuf_puts(c, "    .size = sizeof(int64_t),\n");
		break;
	case CK_GEN_NUMBER:
		ck_sbuf_puts(c, "    .size = sizeof(double),\n");
		break;
	case CK_GEN_BOOL:
		ck_sbuf_puts(c, "    .size = sizeof(bool),\n");
		break;
	case CK_GEN_OBJECT:
		ck_sbuf_printf(
		    c, "    .size = sizeof(%s_t),\n    .props = p_%d,\n    .nprops = %zu,\n",
		    n->ctype, n->id, n->nprops);
		break;
	default:
		ck_sbuf_puts(c, "    .size = sizeof(void *),\n    .items = &");
		table_name(c, n->items);
		ck_sbuf_puts(c, ",\n");
		break;
	}
	/* INT64_MIN has no literal of its own: written as (-MAX - 1). */
	if (n->kind == CK_GEN_INT && (n->flags & CK_GEN_HAS_MIN))
		ck_sbuf_printf(c, "    .imin = %lldLL%s,\n",
		               (long long)n->imin + (n->imin == INT64_MIN),
		               n->imin == INT64_MIN ? " - 1" : "");
	if (n->kind == CK_GEN_INT && (n->flags & CK_GEN_HAS_MAX))
		ck_sbuf_printf(c, "    .imax = %lldLL%s,\n",
		               (long long)n->imax + (n->imax == INT64_MIN),
		               n->imax == INT64_MIN ? " - 1" : "");
	if (n->kind == CK_GEN_NUMBER && (n->flags & CK_GEN_HAS_MIN))
		ck_sbuf_printf(c, "    .dmin = %.17g,\n", n->dmin);
	if (n->kind == CK_GEN_NUMBER && (n->flags & CK_GEN_HAS_MAX))
		ck_sbuf_printf(c, "    .dmax = %.17g,\n", n->dmax);
	if (n->flags & CK_GEN_HAS_MIN_LENGTH)
		ck_sbuf_printf(c, "    .min_length = %lld,\n", (long long)n->min_length);
	if (n->flags & CK_GEN_HAS_MAX_LENGTH)
		ck_sbuf_printf(c, "    .max_length = %lld,\n", (long long)n->max_length);
	if (n->flags & CK_GEN_HAS_MIN_ITEMS)
		ck_sbuf_printf(c, "    .min_items = %lld,\n", (long long)n->min_items);
	if (n->flags & CK_GEN_HAS_MAX_ITEMS)
		ck_sbuf_printf(c, "    .max_items = %lld,\n", (long long)n->max_items);
	if (n->nenum > 0)
		ck_sbuf_printf(c, "    .enum_json = e_%d,\n    .nenum = %zu,\n", n->id, n->nenum);
	if (n->pattern)
		ck_sbuf_printf(c, "    .pattern = &re_%d,\n", n->id);
	ck_sbuf_puts(c, "};\n\n");
}

/* ------------------------------------------------------------ accessors */

static void emit_accessors(em_t *e, ck_sbuf_t *h, ck_sbuf_t *c)
{
	ck_sbuf_puts(h, "/*\n * Reads of one kept field of an object decoded with ");
	ck_sbuf_printf(h,
	               "%s_type (or a\n * descriptor that extends it). Strings are borrowed "
	               "from the object. NULL / false\n * when the field is absent, null, of "
	               "another type, or the object of another kind;\n * *out is then zero, so "
	               "absent and zero differ only by the result.\n */\n",
	               e->P);
	for (size_t i = 0; i < e->nkept; i++) {
		const kept_t *k = &e->kept[i];
		const gen_node_t *n = k->node;
		const char *P = e->P, *PU = e->PU;
		ck_sbuf_puts(h, "/* ");
		c_comment(h, k->path, 300);
		ck_sbuf_puts(h, ": ");
		summary(h, n, false);
		ck_sbuf_puts(h, " */\n");
		char *fn; /* its prototype, however long the name */
		switch (n->kind) {
		case CK_GEN_STRING:
			fn = ck_xasprintf("const char *%s_%s(const ck_obj_t *obj)", P, k->ident);
			ck_sbuf_printf(c,
			               "%s\n{\n\treturn ck_kind_str(obj, &%s_type, %s_%s);\n}\n\n",
			               fn, P, PU, k->uident);
			break;
		case CK_GEN_INT:
		case CK_GEN_NUMBER:
		case CK_GEN_BOOL: {
			const char *ct = n->kind == CK_GEN_INT      ? "int64_t"
			                 : n->kind == CK_GEN_NUMBER ? "double"
			                                            : "bool";
			const char *get = n->kind == CK_GEN_INT      ? "i64"
			                  : n->kind == CK_GEN_NUMBER ? "double"
			                                             : "bool";
			fn = ck_xasprintf("bool %s_%s(const ck_obj_t *obj, %s *out)", P, k->ident,
			                  ct);
			ck_sbuf_printf(
			    c,
			    "%s\n{\n\t*out = 0;\n\treturn ck_kind_%s(obj, &%s_type, %s_%s, "
			    "out);\n}\n\n",
			    fn, get, P, PU, k->uident);
			break;
		}
		case CK_GEN_JSON:
			fn =
			    ck_xasprintf("const ck_val_t *%s_%s(const ck_obj_t *obj)", P, k->ident);
			/* Only a value of the shape the schema states. */
			ck_sbuf_printf(
			    c, "%s\n{\n\tconst ck_val_t *v = ck_kind_val(obj, &%s_type, %s_%s);\n",
			    fn, P, PU, k->uident);
			if (n->flags & CK_GEN_INT_OR_STRING)
				ck_sbuf_puts(
				    c, "\tif (v != NULL && v->type != CK_VAL_INT && v->type != "
				       "CK_VAL_STRING)\n\t\treturn NULL;\n");
			else if (n->flags & (CK_GEN_JSON_OBJECT | CK_GEN_JSON_ARRAY))
				ck_sbuf_printf(
				    c,
				    "\tif (v != NULL && (v->type != CK_VAL_JSON || v->u.s[0] != "
				    "'%c'))\n\t\treturn NULL;\n",
				    n->flags & CK_GEN_JSON_OBJECT ? '{' : '[');
			ck_sbuf_puts(c, "\treturn v;\n}\n\n");
			break;
		default: /* arrays and maps: their compact JSON text */
			fn = ck_xasprintf("const char *%s_%s_json(const ck_obj_t *obj)", P,
			                  k->ident);
			/* Kept JSON is any object or array: only the schema's shape. */
			ck_sbuf_printf(
			    c,
			    "%s\n{\n\tconst char *t = ck_kind_json(obj, &%s_type, %s_%s);\n"
			    "\treturn t != NULL && t[0] == '%c' ? t : NULL;\n}\n\n",
			    fn, P, PU, k->uident, n->kind == CK_GEN_ARRAY ? '[' : '{');
			break;
		}
		ck_sbuf_printf(h, "%s;\n", fn);
		free(fn);
		char *g = ck_xasprintf(
		    n->kind == CK_GEN_ARRAY || n->kind == CK_GEN_MAP ? "%s_%s_json" : "%s_%s", P,
		    k->ident);
		global(e, g, n->spath, n->line);
		free(g);
	}
	ck_sbuf_putc(h, '\n');
}

/* The functions on one object struct: the whole kind (top) or a top-level object. */
static void emit_object_fns(em_t *e, const gen_node_t *n, const char *member, ck_sbuf_t *h,
                            ck_sbuf_t *c)
{
	const char *T = n->ctype;
	static const char *const suffixes[] = {"_get", "_clear", "_to_json", "_to_patch", "_check"};
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		char *g = ck_xasprintf("%s%s", T, suffixes[i]);
		global(e, g, n->spath, n->line);
		free(g);
	}
	/* member is the CRD's text: c_comment() keeps it from closing the comment. */
	ck_sbuf_puts(h,
	             member ? "/*\n * The kept fields under " : "/*\n * Every kept field of obj");
	if (member)
		c_comment(h, member, 200);
	ck_sbuf_printf(h,
	               " read into *out (zeroed first; a value of another type is left\n"
	               " * absent). Returns 0, or -1 with a new message in *err. Clear *out with\n"
	               " * %s_clear() either way.\n */\n",
	               T);
	ck_sbuf_printf(h, "int %s_get(const ck_obj_t *obj, %s_t *out, char **err);\n", T, T);
	ck_sbuf_printf(c,
	               "int %s_get(const ck_obj_t *obj, %s_t *out, char **err)\n{\n\treturn "
	               "ck_gen_get(&%s_schema, obj, out, err);\n}\n\n",
	               T, T, T);
	ck_sbuf_printf(
	    h, "/* Frees what *v owns (all of it, when filled by %s_get) and zeroes it. */\n", T);
	ck_sbuf_printf(h, "void %s_clear(%s_t *v);\n", T, T);
	ck_sbuf_printf(c, "void %s_clear(%s_t *v)\n{\n\tck_gen_clear(&%s_schema, v);\n}\n\n", T, T,
	               T);
	ck_sbuf_printf(h,
	               "/* Appends *v as compact JSON, absent members left out. Borrows v. */\n");
	ck_sbuf_printf(h, "void %s_to_json(const %s_t *v, ck_sbuf_t *out);\n", T, T);
	ck_sbuf_printf(c,
	               "void %s_to_json(const %s_t *v, ck_sbuf_t *out)\n{\n\tck_gen_to_json(&%s_"
	               "schema, v, out);\n}\n\n",
	               T, T, T);
	if (member) {
		ck_sbuf_puts(h, "/* Sets ");
		c_comment(h, member, 200);
		ck_sbuf_puts(h,
		             " in the body p (create, update, apply or merge patch) to *v. "
		             "Returns\n * 0, or -1 with p's error (a kept-JSON member that is not "
		             "JSON). */\n");
		ck_sbuf_printf(h, "int %s_to_patch(const %s_t *v, ck_patch_t *p);\n", T, T);
		ck_sbuf_printf(c,
		               "int %s_to_patch(const %s_t *v, ck_patch_t *p)\n{\n\treturn "
		               "ck_gen_to_patch(&%s_schema, v, p, CK_PATH(",
		               T, T, T);
		c_str(c, member);
		ck_sbuf_puts(c, "));\n}\n\n");
	} else {
		ck_sbuf_printf(
		    h, "/* Sets each present member of *v at the top of the body p. Returns 0, "
		       "or -1\n * with p's error. */\n");
		ck_sbuf_printf(h, "int %s_to_patch(const %s_t *v, ck_patch_t *p);\n", T, T);
		ck_sbuf_printf(c,
		               "int %s_to_patch(const %s_t *v, ck_patch_t *p)\n{\n\treturn "
		               "ck_gen_to_patch_props(&%s_schema, v, p);\n}\n\n",
		               T, T, T);
	}
	ck_sbuf_printf(h,
	               "/* Checks *v against the schema before you write it: 0, or -1 with a new "
	               "message\n * in *err naming the field. */\n");
	ck_sbuf_printf(h, "int %s_check(const %s_t *v, char **err);\n\n", T, T);
	ck_sbuf_printf(c,
	               "int %s_check(const %s_t *v, char **err)\n{\n\treturn ck_gen_validate(&%s_"
	               "schema, ",
	               T, T, T);
	c_str(c, member ? member : "");
	ck_sbuf_puts(c, ", v, err);\n}\n\n");
}

static void emit_validators(em_t *e, const gen_node_t *root, ck_sbuf_t *h, ck_sbuf_t *c)
{
	const char *P = e->P;
	ck_sbuf_printf(h,
	               "/*\n * Validation of an object as the schema states it (ckube/gen.h says "
	               "what is checked):\n * 0, or -1 with a new message in *err naming the "
	               "field, e.g. \"spec.x: 11 is not\n * in 1..10\". Borrows obj.\n */\n");
	ck_sbuf_printf(h, "int %s_validate(const ck_obj_t *obj, char **err);\n", P);
	ck_sbuf_printf(c,
	               "int %s_validate(const ck_obj_t *obj, char **err)\n{\n\treturn "
	               "ck_gen_validate_obj(&%s_schema, \"\", false, obj, err);\n}\n\n",
	               P, root->ctype);
	char *g = ck_xasprintf("%s_validate", P);
	global(e, g, root->spath, root->line);
	free(g);
	for (size_t i = 0; i < root->nprops; i++) {
		const gen_node_t *n = root->props[i].node;
		if (n->kind != CK_GEN_OBJECT)
			continue;
		char *sn = gen_snake(root->props[i].name);
		ck_sbuf_puts(h, "/* Only ");
		c_comment(h, root->props[i].name, 200);
		ck_sbuf_puts(h, ". */\n");
		ck_sbuf_printf(h, "int %s_validate_%s(const ck_obj_t *obj, char **err);\n", P, sn);
		ck_sbuf_printf(c,
		               "int %s_validate_%s(const ck_obj_t *obj, char **err)\n{\n\treturn "
		               "ck_gen_validate_obj(&%s_schema, ",
		               P, sn, n->ctype);
		c_str(c, root->props[i].name);
		ck_sbuf_printf(c, ", %s, obj, err);\n}\n\n",
		               root->props[i].required ? "true" : "false");
		g = ck_xasprintf("%s_validate_%s", P, sn);
		global(e, g, n->spath, n->line);
		free(g);
		free(sn);
	}
	ck_sbuf_putc(h, '\n');
}

/* ------------------------------------------------------------ the files */

static void banner(em_t *e, ck_sbuf_t *b)
{
	ck_sbuf_puts(b, "/*\n * ");
	c_comment(b, e->crd->kind, 100);
	ck_sbuf_puts(b, " (");
	c_comment(b, e->crd->group, 200);
	ck_sbuf_puts(b, "/");
	c_comment(b, e->v->name, 100);
	ck_sbuf_puts(b, "), generated by ckube-gen from ");
	c_comment(b, e->crd->file, 200);
	ck_sbuf_puts(b, ".\n * DO NOT EDIT: change the CRD and run ckube-gen again.\n");
	if (e->crd->nnotes > 0) {
		ck_sbuf_puts(b, " *\n * Not checked by the generated validation:\n");
		for (size_t i = 0; i < e->crd->nnotes; i++) {
			ck_sbuf_puts(b, " *   ");
			c_comment(b, e->crd->notes[i], 400);
			ck_sbuf_putc(b, '\n');
		}
	}
	ck_sbuf_puts(b, " */\n");
}

static void emit_header_top(em_t *e, const char *guard, ck_sbuf_t *h)
{
	const gen_crd_t *crd = e->crd;
	banner(e, h);
	ck_sbuf_printf(h, "#ifndef %s\n#define %s\n\n", guard, guard);
	ck_sbuf_puts(h, "#include <ckube/base.h>\n#include <ckube/gen.h>\n#include "
	                "<ckube/kinds.h>\n#include <ckube/obj.h>\n#include <ckube/patch.h>\n\n");
	ck_sbuf_puts(h, "#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n\n");
	const char *PU = e->PU;
	ck_sbuf_printf(h, "#define %s_GROUP       ", PU);
	c_str(h, crd->group);
	ck_sbuf_printf(h, "\n#define %s_VERSION     ", PU);
	c_str(h, e->v->name);
	ck_sbuf_printf(h, "\n#define %s_API_VERSION %s_GROUP \"/\" %s_VERSION\n", PU, PU, PU);
	ck_sbuf_printf(h, "#define %s_KIND        ", PU);
	c_str(h, crd->kind);
	ck_sbuf_printf(h, "\n#define %s_RESOURCE    ", PU);
	c_str(h, crd->plural);
	ck_sbuf_puts(h, "\n\n");
	ck_sbuf_printf(
	    h,
	    "/* The kind's descriptor, for informers, listers and the client: it keeps "
	    "the\n * fields below beyond metadata. */\nextern const ck_type_t %s_type;\n\n",
	    e->P);
	ck_sbuf_printf(h, "/* Kept fields: indexes into %s_type.fields. */\nenum {\n", e->P);
	for (size_t i = 0; i < e->nkept; i++) {
		ck_sbuf_printf(h, "\t%s_%s, /* ", PU, e->kept[i].uident);
		c_comment(h, e->kept[i].path, 300);
		ck_sbuf_puts(h, " */\n");
		char *g = ck_xasprintf("%s_%s", PU, e->kept[i].uident);
		global(e, g, e->kept[i].node->spath, e->kept[i].node->line);
		free(g);
	}
	ck_sbuf_printf(h, "\t%s_NFIELDS\n};\n\n", PU);
}

static void emit_source_top(em_t *e, const char *base, ck_sbuf_t *c)
{
	banner(e, c);
	ck_sbuf_printf(c, "#include \"%s.h\"\n\n#include <stddef.h>\n\n", base);
	ck_sbuf_printf(c, "static const char *const fields[%s_NFIELDS > 0 ? %s_NFIELDS : 1] = {\n",
	               e->PU, e->PU);
	for (size_t i = 0; i < e->nkept; i++) {
		ck_sbuf_printf(c, "    [%s_%s] = ", e->PU, e->kept[i].uident);
		c_str(c, e->kept[i].path);
		ck_sbuf_puts(c, ",\n");
	}
	if (e->nkept == 0)
		ck_sbuf_puts(c, "    NULL,\n");
	ck_sbuf_printf(
	    c,
	    "};\n\nconst ck_type_t %s_type = {\n    .group = %s_GROUP,\n    .version = "
	    "%s_VERSION,\n    .kind = %s_KIND,\n    .resource = %s_RESOURCE,\n    "
	    ".namespaced = %s,\n    .fields = fields,\n    .nfields = %s_NFIELDS,\n};\n\n",
	    e->P, e->PU, e->PU, e->PU, e->PU, e->crd->namespaced ? "true" : "false", e->PU);
}

static void em_free(em_t *e)
{
	for (size_t i = 0; i < e->nkept; i++) {
		free(e->kept[i].path);
		free(e->kept[i].ident);
		free(e->kept[i].uident);
	}
	free(e->kept);
	for (size_t i = 0; i < e->globals.n; i++) {
		free((char *)e->globals.names[i]);
		free(e->gpaths[i]);
	}
	gen_nameset_free(&e->globals);
	free(e->gpaths);
	free(e->glines);
	free(e->P);
	free(e->PU);
	free(e->err);
}

static void reset_nodes(gen_node_t *n)
{
	n->field = -1;
	n->id = 0;
	n->exported = false;
	for (size_t i = 0; i < n->nprops; i++)
		reset_nodes(n->props[i].node);
	if (n->items)
		reset_nodes(n->items);
}

int gen_emit(gen_crd_t *crd, const gen_version_t *v, const gen_opts_t *o, ck_sbuf_t *h,
             ck_sbuf_t *c, char **err)
{
	em_t e = {.crd = crd, .v = v};
	e.P = o->prefix ? ck_xstrdup(o->prefix) : gen_snake(crd->kind);
	e.PU = upper(e.P);
	char *base = o->base ? ck_xstrdup(o->base) : gen_snake(crd->kind);
	gen_node_t empty = {.kind = CK_GEN_OBJECT, .spath = "(no schema)"};
	gen_node_t *root = v->root ? v->root : &empty;
	int rc = -1;
	if (root->kind != CK_GEN_OBJECT) /* an object without properties */
		root = &empty;
	reset_nodes(root);
	for (size_t i = 0; i < root->nprops; i++) {
		char *sn = gen_snake(root->props[i].name);
		expand(&e, root->props[i].node, root->props[i].name, sn);
		free(sn);
	}
	name_nodes(&e, root, e.P);
	root->exported = true;
	for (size_t i = 0; i < root->nprops; i++)
		if (root->props[i].node->kind == CK_GEN_OBJECT)
			root->props[i].node->exported = true;
	char *g = ck_xasprintf("%s_type", e.P);
	global(&e, g, "the descriptor", 0);
	free(g);
	/* The header's macros, and the schema tables it declares: names too. */
	static const char *const macros[] = {"GROUP", "VERSION",  "API_VERSION",
	                                     "KIND",  "RESOURCE", "NFIELDS"};
	for (size_t i = 0; i < sizeof(macros) / sizeof(macros[0]); i++) {
		g = ck_xasprintf("%s_%s", e.PU, macros[i]);
		global(&e, g, "the header's macros", 0);
		free(g);
	}
	g = ck_xasprintf("%s_schema", root->ctype);
	global(&e, g, root->spath, root->line);
	free(g);
	for (size_t i = 0; i < root->nprops; i++)
		if (root->props[i].node->exported) {
			g = ck_xasprintf("%s_schema", root->props[i].node->ctype);
			global(&e, g, root->props[i].node->spath, root->props[i].node->line);
			free(g);
		}

	char *vs = gen_snake(v->name);
	char *guard = ck_xasprintf("CKUBE_GEN_%s_%s_H", e.PU, vs);
	for (char *p = guard; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	free(vs);
	emit_header_top(&e, guard, h);
	emit_struct(&e, root, h);
	ck_sbuf_printf(
	    h, "/* The schema's tables (ckube/gen.h), for ck_gen_* calls of your own. */\n");
	ck_sbuf_printf(h, "extern const ck_gen_schema_t %s_schema;\n", root->ctype);
	for (size_t i = 0; i < root->nprops; i++)
		if (root->props[i].node->exported)
			ck_sbuf_printf(h, "extern const ck_gen_schema_t %s_schema;\n",
			               root->props[i].node->ctype);
	ck_sbuf_putc(h, '\n');

	emit_source_top(&e, base, c);
	emit_tables(&e, root, c);
	emit_accessors(&e, h, c);

	ck_sbuf_printf(h, "/* A body for create, update, apply or merge patch of the named object: "
	                  "apiVersion,\n * kind, metadata.name and .namespace set (ckube/patch.h). "
	                  "Free with ck_patch_free(). */\n");
	ck_sbuf_printf(h, "ck_patch_t *%s_patch_new(const char *ns, const char *name);\n\n", e.P);
	ck_sbuf_printf(c,
	               "ck_patch_t *%s_patch_new(const char *ns, const char *name)\n{\n\treturn "
	               "ck_patch_new_object(&%s_type, ns, name);\n}\n\n",
	               e.P, e.P);
	g = ck_xasprintf("%s_patch_new", e.P);
	global(&e, g, "the patch constructor", 0);
	free(g);
	emit_object_fns(&e, root, NULL, h, c);
	for (size_t i = 0; i < root->nprops; i++)
		if (root->props[i].node->exported)
			emit_object_fns(&e, root->props[i].node, root->props[i].name, h, c);
	emit_validators(&e, root, h, c);
	ck_sbuf_printf(h, "#endif\n");
	if (e.err != NULL) {
		ck_err_set(err, "%s", e.err);
		goto out;
	}
	rc = 0;
out:
	free(guard);
	free(base);
	if (root == &empty)
		free(empty.ctype);
	em_free(&e);
	return rc;
}
