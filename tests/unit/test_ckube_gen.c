/*
 * ckube_gen: the generator's reading and writing (cmd/ckube-gen: crd.c, pattern.c,
 * emit.c; not main.c). Loading a CRD and its refusals, each with its exact message
 * ("<file>:<line>: <path in the CRD>: <why>"); the schema mapped to C kinds, with
 * its fallbacks to kept JSON and its notes; the bounds on what an input can cost
 * (depth, YAML aliases); patterns translated to POSIX and run with regexec; C
 * names; and the code written, compiled with -Werror so that escaping is checked
 * by the compiler, not by eye.
 */
#include "cmd/ckube-gen/gen.h"

#include <ckube/base.h>

#include <check.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FILE_NAME "t.yaml"
#define ROOT      "spec.versions[0].schema.openAPIV3Schema"
#define SPEC      ROOT ".properties.spec"

/* A CRD up to its first version's openAPIV3Schema: 14 lines. */
static const char head[] = "apiVersion: apiextensions.k8s.io/v1\n" /* 1 */
                           "kind: CustomResourceDefinition\n"      /* 2 */
                           "metadata:\n"                           /* 3 */
                           "  name: widgets.example.com\n"         /* 4 */
                           "spec:\n"                               /* 5 */
                           "  group: example.com\n"                /* 6 */
                           "  scope: Namespaced\n"                 /* 7 */
                           "  names:\n"                            /* 8 */
                           "    kind: Widget\n"                    /* 9 */
                           "    plural: widgets\n"                 /* 10 */
                           "  versions:\n"                         /* 11 */
                           "  - name: v1\n"                        /* 12 */
                           "    schema:\n"                         /* 13 */
                           "      openAPIV3Schema:\n";             /* 14 */

/* head with the line `from` (whole, without its newline) replaced by `to`
 * (several lines, or none when ""). */
static char *replace_line(const char *text, const char *from, const char *to)
{
	size_t n = strlen(from);
	const char *p = text;
	while ((p = strstr(p, from)) != NULL && !((p == text || p[-1] == '\n') && p[n] == '\n'))
		p++;
	ck_assert_msg(p != NULL, "no line \"%s\"", from);
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_append(&b, text, (size_t)(p - text));
	ck_sbuf_puts(&b, to);
	ck_sbuf_puts(&b, *to ? p + n : p + n + 1);
	return ck_sbuf_steal(&b);
}

/* The CRD with body as its schema, each line indented into place: line k of body
 * is line 14 + k of the file. */
static char *with_schema(const char *body)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, head);
	for (const char *p = body; *p;) {
		size_t n = strcspn(p, "\n");
		ck_sbuf_puts(&b, "        ");
		ck_sbuf_append(&b, p, n);
		ck_sbuf_putc(&b, '\n');
		p += n;
		if (*p == '\n')
			p++;
	}
	return ck_sbuf_steal(&b);
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static gen_crd_t *load_text(const char *text, bool strict, char **err)
{
	*err = NULL;
	return gen_crd_load(FILE_NAME, text, strlen(text), strict, err);
}

static gen_crd_t *load_ok(const char *text, bool strict)
{
	char *err = NULL;
	gen_crd_t *c = load_text(text, strict, &err);
	ck_assert_msg(c != NULL, "load: %s\n%s", err ? err : "?", text);
	ck_assert_ptr_null(err);
	return c;
}

/* The error of a load that must fail (free with free()). */
static char *load_err(const char *text, bool strict)
{
	char *err = NULL;
	gen_crd_t *c = load_text(text, strict, &err);
	ck_assert_msg(c == NULL, "loaded:\n%s", text);
	ck_assert_ptr_nonnull(err);
	ck_assert_ptr_null(strchr(err, '\n'));
	return err;
}

static gen_crd_t *schema_ok(const char *body, bool strict)
{
	char *text = with_schema(body);
	gen_crd_t *c = load_ok(text, strict);
	free(text);
	return c;
}

static char *schema_err(const char *body, bool strict)
{
	char *text = with_schema(body);
	char *err = load_err(text, strict);
	free(text);
	return err;
}

#define assert_load_err(text, want)                                                                \
	do {                                                                                       \
		char *e_ = load_err(text, false);                                                  \
		ck_assert_str_eq(e_, want);                                                        \
		free(e_);                                                                          \
	} while (0)

#define assert_schema_err(body, want)                                                              \
	do {                                                                                       \
		char *e_ = schema_err(body, false);                                                \
		ck_assert_str_eq(e_, want);                                                        \
		free(e_);                                                                          \
	} while (0)

/* The property name of object n, or a failed test. */
static gen_node_t *prop(const gen_node_t *n, const char *name)
{
	ck_assert_ptr_nonnull(n);
	for (size_t i = 0; i < n->nprops; i++)
		if (strcmp(n->props[i].name, name) == 0)
			return n->props[i].node;
	ck_abort_msg("no property %s in %s", name, n->spath);
	return NULL;
}

static bool prop_required(const gen_node_t *n, const char *name)
{
	for (size_t i = 0; i < n->nprops; i++)
		if (strcmp(n->props[i].name, name) == 0)
			return n->props[i].required;
	ck_abort_msg("no property %s in %s", name, n->spath);
	return false;
}

/* ------------------------------------------------------------ loading */

START_TEST(test_load_minimal)
{
	gen_crd_t *c = schema_ok("type: object\n"
	                         "properties:\n"
	                         "  apiVersion: {type: string}\n"
	                         "  kind: {type: string}\n"
	                         "  metadata: {type: object}\n"
	                         "  spec: {type: string}\n",
	                         false);
	ck_assert_str_eq(c->file, FILE_NAME);
	ck_assert_str_eq(c->name, "widgets.example.com");
	ck_assert_str_eq(c->group, "example.com");
	ck_assert_str_eq(c->kind, "Widget");
	ck_assert_str_eq(c->plural, "widgets");
	ck_assert(c->namespaced);
	ck_assert_uint_eq(c->nversions, 1);
	ck_assert_str_eq(c->versions[0].name, "v1");
	ck_assert_int_eq(c->versions[0].line, 12);
	ck_assert_uint_eq(c->nnotes, 0);
	const gen_node_t *r = c->versions[0].root;
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->kind, CK_GEN_OBJECT);
	ck_assert_int_eq(r->line, 15);
	ck_assert_str_eq(r->spath, ROOT);
	/* apiVersion, kind and metadata are the library's: dropped. */
	ck_assert_uint_eq(r->nprops, 1);
	ck_assert_str_eq(r->props[0].name, "spec");
	ck_assert_int_eq(r->props[0].node->kind, CK_GEN_STRING);
	ck_assert_int_eq(r->props[0].node->line, 20);
	ck_assert_str_eq(r->props[0].node->spath, SPEC);
	gen_crd_free(c);

	/* Cluster scope; a version without a schema; several versions. */
	char *t1 = replace_line(head, "  scope: Namespaced", "  scope: Cluster");
	char *t2 = replace_line(t1, "    schema:", "  - name: v2beta1");
	char *t3 = replace_line(t2, "      openAPIV3Schema:", "");
	c = load_ok(t3, true);
	ck_assert(!c->namespaced);
	ck_assert_uint_eq(c->nversions, 2);
	ck_assert_str_eq(c->versions[0].name, "v1");
	ck_assert_ptr_null(c->versions[0].root);
	ck_assert_str_eq(c->versions[1].name, "v2beta1");
	ck_assert_int_eq(c->versions[1].line, 13);
	ck_assert_ptr_null(c->versions[1].root);
	gen_crd_free(c);
	free(t1);
	free(t2);
	free(t3);
	gen_crd_free(NULL);
}
END_TEST

START_TEST(test_load_multi_document)
{
	char *crd = with_schema("type: object\nproperties:\n  spec: {type: integer}\n");
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, "# leading comment\n"
	                 "apiVersion: v1\n"
	                 "kind: Namespace\n"
	                 "metadata: {name: x}\n"
	                 "---\n"
	                 "---\n"
	                 "just a scalar\n"
	                 "---\n"
	                 "- a list\n"
	                 "---\n"
	                 "kind: [not, a, string]\n"
	                 "---\n");
	ck_sbuf_puts(&b, crd);
	ck_sbuf_puts(&b, "---\n"
	                 "apiVersion: apps/v1\n"
	                 "kind: Deployment\n"
	                 "metadata: {name: y}\n"
	                 "...\n");
	gen_crd_t *c = load_ok(ck_sbuf_cstr(&b), false);
	ck_assert_str_eq(c->kind, "Widget");
	ck_assert_int_eq(prop(c->versions[0].root, "spec")->kind, CK_GEN_INT);
	/* Lines count from the top of the file, not of the document: 12 lines above. */
	ck_assert_int_eq(c->versions[0].root->line, 12 + 15);
	gen_crd_free(c);

	/* Two CRDs: refused, naming the line of each. */
	ck_sbuf_reset(&b);
	ck_sbuf_puts(&b, crd);
	ck_sbuf_puts(&b, "---\n");
	ck_sbuf_puts(&b, crd);
	char *err = load_err(ck_sbuf_cstr(&b), false);
	ck_assert_str_eq(err, FILE_NAME ":19: kind: a second CustomResourceDefinition (the first "
	                                "is at line 1): give ckube-gen one per file");
	free(err);

	/* None at all. */
	assert_load_err("apiVersion: v1\nkind: Namespace\n",
	                FILE_NAME ": no CustomResourceDefinition in the file");
	assert_load_err("", FILE_NAME ": no CustomResourceDefinition in the file");
	ck_sbuf_free(&b);
	free(crd);
}
END_TEST

START_TEST(test_load_refusals)
{
	char *t;
	/* Only apiextensions.k8s.io/v1. */
	t = replace_line(head, "apiVersion: apiextensions.k8s.io/v1",
	                 "apiVersion: apiextensions.k8s.io/v1beta1");
	assert_load_err(t,
	                FILE_NAME ":1: apiVersion: \"apiextensions.k8s.io/v1beta1\": only "
	                          "apiextensions.k8s.io/v1 CRDs are read (v1beta1 was removed in "
	                          "Kubernetes 1.22)");
	free(t);
	t = replace_line(head, "apiVersion: apiextensions.k8s.io/v1", "");
	assert_load_err(t, FILE_NAME ":1: apiVersion: \"\": only apiextensions.k8s.io/v1 CRDs are "
	                             "read (v1beta1 was removed in Kubernetes 1.22)");
	free(t);

	/* Each required member, reported where it was looked for. */
	t = replace_line(head, "  group: example.com", "");
	assert_load_err(t, FILE_NAME ":6: spec: group is required (a non-empty string)");
	free(t);
	t = replace_line(head, "  group: example.com", "  group: ''");
	assert_load_err(t, FILE_NAME ":6: spec: group is required (a non-empty string)");
	free(t);
	t = replace_line(head, "  group: example.com", "  group: {a: b}");
	assert_load_err(t, FILE_NAME ":6: spec: group is required (a non-empty string)");
	free(t);
	t = replace_line(head, "    kind: Widget", "");
	assert_load_err(t, FILE_NAME ":9: spec.names: kind is required (a non-empty string)");
	free(t);
	t = replace_line(head, "    plural: widgets", "");
	assert_load_err(t, FILE_NAME ":9: spec.names: plural is required (a non-empty string)");
	free(t);
	t = replace_line(head, "  scope: Namespaced", "");
	assert_load_err(t, FILE_NAME ":6: spec: scope is required (a non-empty string)");
	free(t);
	t = replace_line(head, "  scope: Namespaced", "  scope: namespaced");
	assert_load_err(t, FILE_NAME ":7: spec.scope: \"namespaced\" is neither Namespaced nor "
	                             "Cluster");
	free(t);

	/* versions: absent, empty, not a list, an entry without a name. */
	const char *cut = "  group: example.com\n"
	                  "  scope: Namespaced\n"
	                  "  names:\n"
	                  "    kind: Widget\n"
	                  "    plural: widgets\n";
	const char *top = "apiVersion: apiextensions.k8s.io/v1\n"
	                  "kind: CustomResourceDefinition\n"
	                  "spec:\n";
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, top);
	ck_sbuf_puts(&b, cut);
	assert_load_err(ck_sbuf_cstr(&b), FILE_NAME ":4: spec.versions: at least one version is "
	                                            "required");
	ck_sbuf_puts(&b, "  versions: []\n");
	assert_load_err(ck_sbuf_cstr(&b), FILE_NAME ":9: spec.versions: at least one version is "
	                                            "required");
	ck_sbuf_reset(&b);
	ck_sbuf_puts(&b, top);
	ck_sbuf_puts(&b, cut);
	ck_sbuf_puts(&b, "  versions: {v1: {}}\n");
	assert_load_err(ck_sbuf_cstr(&b), FILE_NAME ":9: spec.versions: at least one version is "
	                                            "required");
	ck_sbuf_reset(&b);
	ck_sbuf_puts(&b, top);
	ck_sbuf_puts(&b, cut);
	ck_sbuf_puts(&b, "  versions:\n  - name: v1\n  - served: true\n");
	assert_load_err(ck_sbuf_cstr(&b), FILE_NAME ":11: spec.versions[1]: name is required (a "
	                                            "non-empty string)");
	ck_sbuf_reset(&b);
	ck_sbuf_puts(&b, top);
	ck_sbuf_puts(&b, cut);
	ck_sbuf_puts(&b,
	             "  versions:\n  - name: v1\n  - name: v2\n  - name: v1\n    served: true\n");
	assert_load_err(ck_sbuf_cstr(&b), FILE_NAME ":12: spec.versions[2]: version \"v1\" is "
	                                            "stated twice");
	ck_sbuf_free(&b);

	/* No spec, no names: reported at the mapping that lacks them, never at line 0. */
	assert_load_err("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n",
	                FILE_NAME ":1: spec: a mapping is required");
	t = replace_line(head, "  names:", "");
	char *t2 = replace_line(t, "    kind: Widget", "");
	char *t3 = replace_line(t2, "    plural: widgets", "");
	assert_load_err(t3, FILE_NAME ":6: spec.names: a mapping is required");
	free(t);
	free(t2);
	free(t3);
}
END_TEST

START_TEST(test_load_invalid_yaml)
{
	assert_load_err("apiVersion: v1\nkind: [a, b\n",
	                FILE_NAME ":3: invalid YAML: did not find expected ',' or ']' while "
	                          "parsing a flow sequence");
	char *t = with_schema("type: object\n"
	                      "properties:\n"
	                      "  spec: {type: string\n");
	assert_load_err(t, FILE_NAME ":18: invalid YAML: did not find expected ',' or '}' while "
	                             "parsing a flow mapping");
	free(t);
	assert_load_err("a: b\n\tc: d\n",
	                FILE_NAME ":2: invalid YAML: found a tab character that "
	                          "violates indentation while scanning a plain scalar");
	assert_load_err("a: *nowhere\n", FILE_NAME ":1: invalid YAML: found undefined alias");
	/* A YAML error after the CRD is still an error. */
	t = with_schema("type: object\n");
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, t);
	ck_sbuf_puts(&b, "---\nx: [\n");
	char *err = load_err(ck_sbuf_cstr(&b), false);
	ck_assert_str_eq(err,
	                 FILE_NAME ":18: invalid YAML: did not find expected node content while "
	                           "parsing a flow node");
	free(err);
	ck_sbuf_free(&b);
	free(t);
}
END_TEST

/* ------------------------------------------------------------ schema refusals */

START_TEST(test_schema_refusals)
{
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec: {$ref: '#/definitions/x'}\n",
	                  FILE_NAME ":17: " SPEC ": $ref is not allowed in a CRD schema");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    description: no type\n",
	                  FILE_NAME ":18: " SPEC ": no type: a structural schema states one at "
	                            "every level (or x-kubernetes-preserve-unknown-fields "
	                            "/ x-kubernetes-int-or-string)");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: object\n"
	                  "    properties:\n"
	                  "      a:\n"
	                  "        format: int32\n"
	                  "        type: int\n",
	                  FILE_NAME ":22: " SPEC ".properties.a: unknown type \"int\"");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: object\n"
	                  "    properties:\n"
	                  "      list: {type: array}\n",
	                  FILE_NAME ":20: " SPEC ".properties.list: an array needs items");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: object\n"
	                  "    properties: {a: {type: string}}\n"
	                  "    additionalProperties: {type: string}\n",
	                  FILE_NAME ":18: " SPEC ": properties and additionalProperties together "
	                            "are not structural");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: object\n"
	                  "    required:\n"
	                  "    - a\n"
	                  "    - b\n"
	                  "    properties: {a: {type: string}}\n",
	                  FILE_NAME ":21: " SPEC ": required names \"b\", which is not one of its "
	                            "properties");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: object\n"
	                  "    required: a\n"
	                  "    properties: {a: {type: string}}\n",
	                  FILE_NAME ":19: " SPEC ": required must be a list of property names");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: object\n"
	                  "    properties:\n"
	                  "      a: {type: string}\n"
	                  "      example.com/b: {type: string}\n",
	                  FILE_NAME ":21: " SPEC ".properties.example.com/b: a property name with "
	                            "'.' cannot be a kept field's path");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: object\n"
	                  "    properties:\n"
	                  "      a: {type: string}\n"
	                  "      b: {type: string}\n"
	                  "      a: {type: integer}\n",
	                  FILE_NAME ":22: " SPEC ": property \"a\" is stated twice");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: object\n"
	                  "    properties:\n"
	                  "      '': {type: string}\n",
	                  FILE_NAME ":20: " SPEC ": a property name must be a non-empty string");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: object\n"
	                  "    properties: [a, b]\n",
	                  FILE_NAME ":19: " SPEC ": properties must be a mapping");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec: 5\n",
	                  FILE_NAME ":17: " SPEC ": a schema must be a mapping");
	assert_schema_err("type: string\n",
	                  FILE_NAME ":15: " ROOT ": the top of a schema must be of type object");
	assert_schema_err("x-kubernetes-preserve-unknown-fields: true\n",
	                  FILE_NAME ":15: " ROOT ": the top of a schema must be of type object");
}
END_TEST

START_TEST(test_schema_validation_refusals)
{
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: string\n"
	                  "    minimum: 1\n",
	                  FILE_NAME ":18: " SPEC ": minimum / maximum apply to integers and "
	                            "numbers only");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: boolean\n"
	                  "    maximum: 1\n",
	                  FILE_NAME ":18: " SPEC ": minimum / maximum apply to integers and "
	                            "numbers only");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: integer\n"
	                  "    minimum: 1.5\n",
	                  FILE_NAME ":19: " SPEC ": minimum \"1.5\" is not an integer");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: number\n"
	                  "    maximum: .inf\n",
	                  FILE_NAME ":19: " SPEC ": maximum \".inf\" is not a number");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: string\n"
	                  "    maxLength: 1.5\n",
	                  FILE_NAME ":19: " SPEC ": maxLength must be a non-negative integer");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: string\n"
	                  "    minLength: -1\n",
	                  FILE_NAME ":19: " SPEC ": minLength must be a non-negative integer");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: array\n"
	                  "    items: {type: string}\n"
	                  "    maxItems: [1]\n",
	                  FILE_NAME ":20: " SPEC ": maxItems must be a non-negative integer");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: integer\n"
	                  "    enum:\n"
	                  "    - 1\n"
	                  "    - two\n",
	                  FILE_NAME ":21: " SPEC ": enum value \"two\" is not an integer");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: number\n"
	                  "    enum: [1.5, x]\n",
	                  FILE_NAME ":19: " SPEC ": enum value \"x\" is not a number");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: boolean\n"
	                  "    enum: [true, yes]\n",
	                  FILE_NAME ":19: " SPEC ": enum value \"yes\" is not a boolean");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: string\n"
	                  "    enum: [a, [b]]\n",
	                  FILE_NAME ":19: " SPEC ": enum values must be scalars");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: string\n"
	                  "    enum: a\n",
	                  FILE_NAME ":19: " SPEC ": enum must be a list");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: array\n"
	                  "    items: {type: string}\n"
	                  "    enum: [a]\n",
	                  FILE_NAME ":20: " SPEC ": enum on a structured value is not supported");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    x-kubernetes-int-or-string: true\n"
	                  "    enum: [a, 1]\n",
	                  FILE_NAME ":19: " SPEC ": enum on a value kept as JSON is not supported");
	/* Patterns that have no POSIX form, with the translator's reason. */
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: string\n"
	                  "    pattern: '(?=a)b'\n",
	                  FILE_NAME ":19: " SPEC ": pattern '(?=a)b': \"(?=\" at offset 0 "
	                            "(lookaround or a named group) has no POSIX form");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: string\n"
	                  "    pattern: '^a\\b'\n",
	                  FILE_NAME ":19: " SPEC ": pattern '^a\\b': the escape \"\\b\" at offset "
	                            "2 has no POSIX form");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: string\n"
	                  "    pattern: '(a)\\1'\n",
	                  FILE_NAME ":19: " SPEC ": pattern '(a)\\1': the escape \"\\1\" at offset "
	                            "3 has no POSIX form");
	/* Translated, but not an expression regcomp takes. */
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: string\n"
	                  "    pattern: 'a{3,1}'\n",
	                  FILE_NAME ":19: " SPEC ": pattern 'a{3,1}' is not a valid regular "
	                            "expression here");
	assert_schema_err("type: object\n"
	                  "properties:\n"
	                  "  spec:\n"
	                  "    type: string\n"
	                  "    pattern: [a]\n",
	                  FILE_NAME ":19: " SPEC ": pattern must be a string");
}
END_TEST

/* body: a spec nested `levels` objects deep (the spec itself is level 1). */
static char *nested(int levels)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, "type: object\nproperties:\n  spec: ");
	for (int i = 1; i < levels; i++)
		ck_sbuf_puts(&b, "{type: object, properties: {a: ");
	ck_sbuf_puts(&b, "{type: string}");
	for (int i = 1; i < levels; i++)
		ck_sbuf_puts(&b, "}}");
	ck_sbuf_putc(&b, '\n');
	return ck_sbuf_steal(&b);
}

START_TEST(test_schema_depth)
{
	/* The root is depth 0: 32 levels below it are kept, 33 are not. */
	char *body = nested(32);
	gen_crd_t *c = schema_ok(body, false);
	const gen_node_t *n = prop(c->versions[0].root, "spec");
	for (int i = 1; i < 32; i++)
		n = prop(n, "a");
	ck_assert_int_eq(n->kind, CK_GEN_STRING);
	gen_crd_free(c);
	free(body);

	body = nested(33);
	char *err = schema_err(body, false);
	ck_sbuf_t want = CK_SBUF_INIT;
	ck_sbuf_puts(&want, FILE_NAME ":17: " SPEC);
	for (int i = 1; i < 33; i++)
		ck_sbuf_puts(&want, ".properties.a");
	ck_sbuf_puts(&want, ": nested deeper than 32 levels");
	ck_assert_str_eq(err, ck_sbuf_cstr(&want));
	free(err);
	free(body);

	/* Array items and map values are levels too. */
	ck_sbuf_reset(&want);
	ck_sbuf_puts(&want, "type: object\nproperties:\n  spec: ");
	for (int i = 0; i < 40; i++)
		ck_sbuf_puts(&want, i % 2 ? "{type: array, items: "
		                          : "{type: object, "
		                            "additionalProperties: ");
	ck_sbuf_puts(&want, "{type: string}");
	for (int i = 0; i < 40; i++)
		ck_sbuf_putc(&want, '}');
	err = schema_err(ck_sbuf_cstr(&want), false);
	ck_assert_msg(strstr(err, ": nested deeper than 32 levels") != NULL, "%s", err);
	ck_assert_msg(starts_with(err, FILE_NAME ":17: " SPEC ".additionalProperties.items."), "%s",
	              err);
	free(err);
	ck_sbuf_free(&want);
}
END_TEST

/* Seconds since an arbitrary point. */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(test_schema_aliases)
{
	/* A few aliases are fine: each use is mapped on its own. */
	gen_crd_t *c = schema_ok("type: object\n"
	                         "properties:\n"
	                         "  spec:\n"
	                         "    type: object\n"
	                         "    properties:\n"
	                         "      a: &name {type: string, maxLength: 63}\n"
	                         "      b: *name\n",
	                         false);
	const gen_node_t *spec = prop(c->versions[0].root, "spec");
	ck_assert_int_eq(prop(spec, "b")->kind, CK_GEN_STRING);
	ck_assert_int_eq(prop(spec, "b")->max_length, 63);
	ck_assert_ptr_ne(prop(spec, "a"), prop(spec, "b"));
	ck_assert_str_eq(prop(spec, "b")->spath, SPEC ".properties.b");
	gen_crd_free(c);

	/* Billion laughs: each level uses the one below ten times, 10^9 nodes from a
	 * file of 1 KiB. Refused after MAX_NODES, quickly. */
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, "type: object\nproperties:\n  l0: &l0 {type: string}\n");
	for (int l = 1; l <= 9; l++) {
		ck_sbuf_printf(&b, "  l%d: &l%d {type: object, properties: {", l, l);
		for (int k = 0; k < 10; k++)
			ck_sbuf_printf(&b, "%sx%d: *l%d", k ? ", " : "", k, l - 1);
		ck_sbuf_puts(&b, "}}\n");
	}
	double t0 = now();
	char *err = schema_err(ck_sbuf_cstr(&b), false);
	double took = now() - t0;
	ck_assert_msg(starts_with(err, FILE_NAME ":"), "%s", err);
	ck_assert_msg(strstr(err, ": more than 20000 schema nodes (aliases used many times?)") !=
	                  NULL,
	              "%s", err);
	ck_assert_msg(strstr(err, " " ROOT ".properties.l5.properties.x") != NULL, "%s", err);
	ck_assert_msg(took < 10.0, "took %.1f s", took);
	free(err);
	/* The same in --strict. */
	err = schema_err(ck_sbuf_cstr(&b), true);
	ck_assert_ptr_nonnull(strstr(err, "more than 20000 schema nodes"));
	free(err);
	ck_sbuf_free(&b);

	/* 20000 nodes exactly are fine: the root, l0 and 19998 uses of l0. */
	ck_sbuf_t many = CK_SBUF_INIT;
	ck_sbuf_puts(&many, "type: object\nproperties:\n  l0: &l0 {type: string}\n");
	for (int k = 0; k < 19998; k++)
		ck_sbuf_printf(&many, "  p%d: *l0\n", k);
	c = schema_ok(ck_sbuf_cstr(&many), false);
	ck_assert_uint_eq(c->versions[0].root->nprops, 19999);
	gen_crd_free(c);
	ck_sbuf_puts(&many, "  last: *l0\n");
	err = schema_err(ck_sbuf_cstr(&many), false);
	ck_assert_str_eq(err, FILE_NAME ":17: " ROOT ".properties.last: more than 20000 schema "
	                                "nodes (aliases used many times?)");
	free(err);
	ck_sbuf_free(&many);
}
END_TEST

START_TEST(test_schema_alias_cycle)
{
	/* libyaml lets an alias name the node being read: a cycle. Mapping it must end
	 * (at the depth bound, or the node bound), not loop or overflow the stack. */
	char *err = schema_err("type: object\n"
	                       "properties:\n"
	                       "  spec: &a {type: object, properties: {x: *a}}\n",
	                       false);
	ck_assert_msg(starts_with(err, FILE_NAME ":17: " SPEC ".properties.x.properties.x"), "%s",
	              err);
	ck_assert_msg(strstr(err, ": nested deeper than 32 levels") != NULL, "%s", err);
	free(err);
	double t0 = now();
	err = schema_err("type: object\n"
	                 "properties:\n"
	                 "  spec: &a {type: object, properties: {x: *a, y: *a, z: *a}}\n",
	                 false);
	ck_assert_msg(strstr(err, ": nested deeper than 32 levels") != NULL ||
	                  strstr(err, ": more than 20000 schema nodes") != NULL,
	              "%s", err);
	ck_assert_msg(now() - t0 < 10.0, "took %.1f s", now() - t0);
	free(err);
	/* Through items and additionalProperties too. */
	err = schema_err(
	    "type: object\n"
	    "properties:\n"
	    "  spec: &a {type: array, items: {type: object, additionalProperties: *a}}\n",
	    false);
	ck_assert_msg(strstr(err, ": nested deeper than 32 levels") != NULL, "%s", err);
	free(err);
	/* The root itself aliased below itself. */
	char *t = replace_line(head, "      openAPIV3Schema:",
	                       "      openAPIV3Schema: &r {type: object, properties: {spec: *r}}");
	err = load_err(t, false);
	ck_assert_msg(strstr(err, ": nested deeper than 32 levels") != NULL, "%s", err);
	free(err);
	free(t);
}
END_TEST

/* ------------------------------------------------------------ mapping */

START_TEST(test_schema_mapping)
{
	gen_crd_t *c =
	    schema_ok("type: object\n"                                       /* 15 */
	              "properties:\n"                                        /* 16 */
	              "  spec:\n"                                            /* 17 */
	              "    type: object\n"                                   /* 18 */
	              "    description: |\n"                                 /* 19 */
	              "      First line.\n"                                  /* 20 */
	              "      Second line.\n"                                 /* 21 */
	              "    required: [name, replicas]\n"                     /* 22 */
	              "    properties:\n"                                    /* 23 */
	              "      name:\n"                                        /* 24 */
	              "        type: string\n"                               /* 25 */
	              "        minLength: 1\n"                               /* 26 */
	              "        maxLength: 63\n"                              /* 27 */
	              "        pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'\n" /* 28 */
	              "      replicas:\n"
	              "        type: integer\n"
	              "        format: int32\n"
	              "        minimum: -3\n"
	              "        maximum: 10\n"
	              "        exclusiveMaximum: true\n"
	              "        nullable: true\n"
	              "      ratio: {type: number, minimum: 0.5, exclusiveMinimum: true}\n"
	              "      mode: {type: string, enum: [Fast, \"Slow \\\"x\\\"\"]}\n"
	              "      level: {type: integer, enum: [1, 2, +3]}\n"
	              "      on: {type: boolean, enum: [true]}\n"
	              "      weight: {type: number, enum: [0.5, 2]}\n"
	              "      tags:\n"
	              "        type: array\n"
	              "        minItems: 1\n"
	              "        maxItems: 5\n"
	              "        items: {type: string}\n"
	              "      limits:\n"
	              "        type: object\n"
	              "        minProperties: 2\n"
	              "        additionalProperties: {type: integer}\n"
	              "      template:\n"
	              "        type: object\n"
	              "        properties:\n"
	              "          image: {type: string}\n",
	              false);
	ck_assert_uint_eq(c->nnotes, 0);
	const gen_node_t *spec = prop(c->versions[0].root, "spec");
	ck_assert_int_eq(spec->kind, CK_GEN_OBJECT);
	ck_assert_int_eq(spec->line, 18);
	ck_assert_str_eq(spec->description, "First line.");
	ck_assert_uint_eq(spec->nprops, 10);
	ck_assert_str_eq(spec->props[0].name, "name"); /* schema order */
	ck_assert_str_eq(spec->props[9].name, "template");
	ck_assert(prop_required(spec, "name"));
	ck_assert(prop_required(spec, "replicas"));
	ck_assert(!prop_required(spec, "mode"));

	const gen_node_t *n = prop(spec, "name");
	ck_assert_int_eq(n->kind, CK_GEN_STRING);
	ck_assert_int_eq(n->line, 25);
	ck_assert_str_eq(n->spath, SPEC ".properties.name");
	ck_assert_uint_eq(n->flags, CK_GEN_HAS_MIN_LENGTH | CK_GEN_HAS_MAX_LENGTH);
	ck_assert_int_eq(n->min_length, 1);
	ck_assert_int_eq(n->max_length, 63);
	ck_assert_int_eq(n->min_items, -1);
	ck_assert_str_eq(n->pattern, "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
	ck_assert_str_eq(n->pattern_ere, "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$");
	ck_assert_ptr_nonnull(n->pattern_name);
	ck_assert_ptr_nonnull(strstr(n->pattern_name, "DNS-1123 label"));

	n = prop(spec, "replicas");
	ck_assert_int_eq(n->kind, CK_GEN_INT);
	ck_assert_str_eq(n->format, "int32");
	ck_assert(n->nullable);
	ck_assert_uint_eq(n->flags, CK_GEN_HAS_MIN | CK_GEN_HAS_MAX | CK_GEN_EXCL_MAX);
	ck_assert_int_eq(n->imin, -3);
	ck_assert_int_eq(n->imax, 10);

	n = prop(spec, "ratio");
	ck_assert_int_eq(n->kind, CK_GEN_NUMBER);
	ck_assert_uint_eq(n->flags, CK_GEN_HAS_MIN | CK_GEN_EXCL_MIN);
	ck_assert_double_eq(n->dmin, 0.5);

	n = prop(spec, "mode");
	ck_assert_uint_eq(n->nenum, 2);
	ck_assert_str_eq(n->enums[0], "\"Fast\"");
	ck_assert_str_eq(n->enums[1], "\"Slow \\\"x\\\"\"");
	n = prop(spec, "level");
	ck_assert_uint_eq(n->nenum, 3);
	ck_assert_str_eq(n->enums[2], "3");
	n = prop(spec, "on");
	ck_assert_int_eq(n->kind, CK_GEN_BOOL);
	ck_assert_str_eq(n->enums[0], "true");
	n = prop(spec, "weight");
	ck_assert_str_eq(n->enums[0], "0.5");
	ck_assert_str_eq(n->enums[1], "2");

	n = prop(spec, "tags");
	ck_assert_int_eq(n->kind, CK_GEN_ARRAY);
	ck_assert_int_eq(n->items->kind, CK_GEN_STRING);
	ck_assert_str_eq(n->items->spath, SPEC ".properties.tags.items");
	ck_assert_uint_eq(n->flags, CK_GEN_HAS_MIN_ITEMS | CK_GEN_HAS_MAX_ITEMS);
	ck_assert_int_eq(n->min_items, 1);
	ck_assert_int_eq(n->max_items, 5);

	n = prop(spec, "limits");
	ck_assert_int_eq(n->kind, CK_GEN_MAP);
	ck_assert_int_eq(n->items->kind, CK_GEN_INT);
	ck_assert_str_eq(n->items->spath, SPEC ".properties.limits.additionalProperties");
	ck_assert_uint_eq(n->flags, CK_GEN_HAS_MIN_ITEMS);
	ck_assert_int_eq(n->min_items, 2);

	n = prop(spec, "template");
	ck_assert_int_eq(n->kind, CK_GEN_OBJECT);
	ck_assert_int_eq(prop(n, "image")->kind, CK_GEN_STRING);
	ck_assert_str_eq(prop(n, "image")->spath, SPEC ".properties.template.properties.image");
	gen_crd_free(c);
}
END_TEST

START_TEST(test_schema_fallbacks)
{
	gen_crd_t *c =
	    schema_ok("type: object\n"
	              "properties:\n"
	              "  spec:\n"
	              "    type: object\n"
	              "    properties:\n"
	              "      port: {x-kubernetes-int-or-string: true}\n"
	              "      any: {x-kubernetes-preserve-unknown-fields: true}\n"
	              "      anyObj: {type: object, x-kubernetes-preserve-unknown-fields: "
	              "true}\n"
	              "      empty: {type: object}\n"
	              "      emptyProps: {type: object, properties: {}}\n"
	              "      open: {type: object, additionalProperties: true}\n"
	              "      matrix: {type: array, items: {type: array, items: {type: "
	              "integer}}}\n"
	              "      listOfMaps: {type: array, items: {type: object, "
	              "additionalProperties: {type: string}}}\n"
	              "      mapOfLists: {type: object, additionalProperties: {type: "
	              "array, items: {type: string}}}\n"
	              "      mapOfMaps: {type: object, additionalProperties: {type: "
	              "object, additionalProperties: {type: string}}}\n"
	              "      listOfAny: {type: array, items: "
	              "{x-kubernetes-preserve-unknown-fields: true}}\n",
	              true);
	ck_assert_uint_eq(c->nnotes, 0);
	const gen_node_t *spec = prop(c->versions[0].root, "spec");
	const gen_node_t *n = prop(spec, "port");
	ck_assert_int_eq(n->kind, CK_GEN_JSON);
	ck_assert_uint_eq(n->flags, CK_GEN_INT_OR_STRING);
	ck_assert_ptr_nonnull(n->why_json);
	const char *json[] = {"any",    "anyObj",     "empty",      "emptyProps", "open",
	                      "matrix", "listOfMaps", "mapOfLists", "mapOfMaps"};
	for (size_t i = 0; i < sizeof(json) / sizeof(json[0]); i++) {
		n = prop(spec, json[i]);
		ck_assert_msg(n->kind == CK_GEN_JSON, "%s: kind %d", json[i], n->kind);
		ck_assert_msg(n->why_json != NULL && n->why_json[0] != '\0', "%s", json[i]);
		ck_assert_uint_eq(n->flags & CK_GEN_INT_OR_STRING, 0);
	}
	n = prop(spec, "listOfAny");
	ck_assert_int_eq(n->kind, CK_GEN_ARRAY);
	ck_assert_int_eq(n->items->kind, CK_GEN_JSON);
	gen_crd_free(c);

	/* controller-gen writes IntOrString as exactly this anyOf: that is what
	 * CK_GEN_INT_OR_STRING checks, so it is no note (and --strict takes it). */
	c = schema_ok("type: object\n"
	              "properties:\n"
	              "  spec:\n"
	              "    anyOf:\n"
	              "    - type: integer\n"
	              "    - type: string\n"
	              "    x-kubernetes-int-or-string: true\n",
	              true);
	ck_assert_uint_eq(c->nnotes, 0);
	ck_assert_uint_eq(prop(c->versions[0].root, "spec")->flags, CK_GEN_INT_OR_STRING);
	gen_crd_free(c);
	/* Any other anyOf there is one. */
	c = schema_ok("type: object\n"
	              "properties:\n"
	              "  spec:\n"
	              "    anyOf:\n"
	              "    - type: integer\n"
	              "      minimum: 1\n"
	              "    - type: string\n"
	              "    x-kubernetes-int-or-string: true\n",
	              false);
	ck_assert_uint_eq(c->nnotes, 1);
	gen_crd_free(c);
}
END_TEST

START_TEST(test_schema_notes)
{
	const char *body = "type: object\n"                                       /* 15 */
	                   "x-kubernetes-validations:\n"                          /* 16 */
	                   "- rule: self.spec.a < 3\n"                            /* 17 */
	                   "properties:\n"                                        /* 18 */
	                   "  spec:\n"                                            /* 19 */
	                   "    type: object\n"                                   /* 20 */
	                   "    oneOf:\n"                                         /* 21 */
	                   "    - required: [a]\n"                                /* 22 */
	                   "    - required: [b]\n"                                /* 23 */
	                   "    properties:\n"                                    /* 24 */
	                   "      a: {type: string, not: {enum: [x]}}\n"          /* 25 */
	                   "      b: {type: string, allOf: [{minLength: 1}]}\n"   /* 26 */
	                   "      c: {type: integer, anyOf: [{minimum: 1}]}\n"    /* 27 */
	                   "      d:\n"                                           /* 28 */
	                   "        type: object\n"                               /* 29 */
	                   "        x-kubernetes-preserve-unknown-fields: true\n" /* 30 */
	                   "        properties: {e: {type: string}}\n";           /* 31 */
	gen_crd_t *c = schema_ok(body, false);
	/* In the order met: children before their parent. */
	const char *want[] = {
	    FILE_NAME ":25: " SPEC ".properties.a: not is not checked by the generated validation "
	              "(the API server checks it)",
	    FILE_NAME ":26: " SPEC
	              ".properties.b: allOf is not checked by the generated validation "
	              "(the API server checks it)",
	    FILE_NAME ":27: " SPEC
	              ".properties.c: anyOf is not checked by the generated validation "
	              "(the API server checks it)",
	    FILE_NAME ":29: " SPEC ".properties.d: x-kubernetes-preserve-unknown-fields: fields "
	              "beyond the stated properties are not in the generated struct "
	              "(they stay on the server)",
	    FILE_NAME ":20: " SPEC ": oneOf is not checked by the generated validation (the API "
	              "server checks it)",
	    FILE_NAME ":15: " ROOT ": x-kubernetes-validations (CEL) are not checked by the "
	              "generated validation (the API server checks them)",
	};
	ck_assert_uint_eq(c->nnotes, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < c->nnotes; i++)
		ck_assert_str_eq(c->notes[i], want[i]);
	/* The properties are still mapped. */
	ck_assert_int_eq(prop(prop(c->versions[0].root, "spec"), "d")->kind, CK_GEN_OBJECT);
	gen_crd_free(c);

	/* --strict refuses the first one met. */
	char *err = schema_err(body, true);
	ck_assert_str_eq(err, FILE_NAME ":25: " SPEC ".properties.a: not is not checked by the "
	                                "generated validation (the API server checks "
	                                "it) (refused by --strict)");
	free(err);
	const char *one[][2] = {
	    {"type: object\nx-kubernetes-validations: [{rule: 'true'}]\n",
	     FILE_NAME ":15: " ROOT ": x-kubernetes-validations (CEL) are not checked by the "
	               "generated validation (the API server checks them) (refused by "
	               "--strict)"},
	    {"type: object\nproperties:\n  spec: {type: string, oneOf: [{minLength: 1}]}\n",
	     FILE_NAME ":17: " SPEC ": oneOf is not checked by the generated validation (the API "
	               "server checks it) (refused by --strict)"},
	    {"type: object\nproperties:\n  spec: {type: string, anyOf: [{minLength: 1}]}\n",
	     FILE_NAME ":17: " SPEC ": anyOf is not checked by the generated validation (the API "
	               "server checks it) (refused by --strict)"},
	    {"type: object\nproperties:\n  spec: {type: string, allOf: [{minLength: 1}]}\n",
	     FILE_NAME ":17: " SPEC ": allOf is not checked by the generated validation (the API "
	               "server checks it) (refused by --strict)"},
	    {"type: object\nproperties:\n  spec: {type: string, not: {minLength: 1}}\n",
	     FILE_NAME ":17: " SPEC ": not is not checked by the generated validation (the API "
	               "server checks it) (refused by --strict)"},
	};
	for (size_t i = 0; i < sizeof(one) / sizeof(one[0]); i++) {
		c = schema_ok(one[i][0], false);
		ck_assert_uint_eq(c->nnotes, 1);
		gen_crd_free(c);
		err = schema_err(one[i][0], true);
		ck_assert_str_eq(err, one[i][1]);
		free(err);
	}
}
END_TEST

START_TEST(test_schema_structured_enum)
{
	/* An enum of structured values on a value kept as JSON cannot be compared by
	 * the generated validation: it is a note, and no enum is kept (a kept enum of
	 * placeholders would refuse every value). */
	const char *body = "type: object\n"
	                   "properties:\n"
	                   "  spec:\n"
	                   "    type: array\n"
	                   "    items: {type: array, items: {type: string}}\n"
	                   "    enum: [[[a]], [[b, c]]]\n";
	gen_crd_t *c = schema_ok(body, false);
	const gen_node_t *n = prop(c->versions[0].root, "spec");
	ck_assert_int_eq(n->kind, CK_GEN_JSON);
	ck_assert_uint_eq(n->nenum, 0);
	ck_assert_uint_eq(c->nnotes, 1);
	ck_assert_str_eq(c->notes[0], FILE_NAME ":18: " SPEC ": an enum of structured values is "
	                                        "not checked by the generated "
	                                        "validation (the API server checks "
	                                        "it)");
	gen_crd_free(c);
	char *err = schema_err(body, true);
	ck_assert_ptr_nonnull(strstr(err, "(refused by --strict)"));
	free(err);
}
END_TEST

/* ------------------------------------------------------------ patterns */

typedef struct {
	const char *ecma;
	const char *match[6];
	const char *nomatch[6];
} pattern_case_t;

static const pattern_case_t pattern_cases[] = {
    {"\\d+", {"1", "a42b"}, {"", "abc"}},
    {"^\\d+$", {"0", "123"}, {"1a", " 1", ""}},
    {"^\\D$", {"a", "-"}, {"1"}},
    {"^\\w+$", {"a_1", "Z"}, {"a-b", "", "a b"}},
    {"^\\W$", {"-", " "}, {"a", "_", "0"}},
    {"\\s", {" a", "\t", "a\nb"}, {"ab", ""}},
    {"^\\S+$", {"ab"}, {"a b", "a\tb"}},
    {"^[\\d.-]+$", {"1.2-3", "-", "."}, {"1a", "1 2"}},
    {"^[\\w-]+$", {"a-b_c"}, {"a.b"}},
    {"^[^\\]]$", {"a", "["}, {"]", "ab"}},
    {"^[\\]a]+$", {"]", "a]a"}, {"b"}},
    {"^[\\\\]$", {"\\"}, {"a", "]"}},
    {"^a{2,3}$", {"aa", "aaa"}, {"a", "aaaa"}},
    {"^a{2}$", {"aa"}, {"a", "aaa"}},
    {"^a{2,}$", {"aa", "aaaaa"}, {"a"}},
    {"^a{,3}$", {"a{,3}"}, {"aaa", "a"}},
    {"^a{$", {"a{"}, {"a"}},
    {"^a}$", {"a}"}, {"a"}},
    {"^\\{\\}$", {"{}"}, {"{"}},
    {"^(?:ab)+$", {"ab", "abab"}, {"aba", ""}},
    {"^a+?b$", {"ab", "aaab"}, {"aaa", "b"}},
    {"^a*?b??c$", {"c", "aabc"}, {"bbc"}},
    {"^a{1,2}?$", {"a", "aa"}, {"aaa"}},
    {"^\\.$", {"."}, {"a", ""}},
    {"^.$", {"a", "."}, {"\n", "ab", ""}},
    {"^a.c$", {"abc"}, {"a\nc"}},
    {"^[-a]$", {"-", "a"}, {"b"}},
    {"^[a-]$", {"-", "a"}, {"b"}},
    {"^[\\^a]$", {"^", "a"}, {"b"}},
    {"^[\\^]$", {"^"}, {"a"}},
    {"^[^^]$", {"a"}, {"^"}},
    {"^[a^]$", {"a", "^"}, {"b"}},
    {"^[-^]$", {"-", "^"}, {"a"}},
    {"^[\\^\\-]$", {"-", "^"}, {"a"}},
    {"^[\\-]$", {"-"}, {"a"}},
    {"^[\\w-.]+$", {"a-b.c_d"}, {"a b", "a/b"}},
    {"^[\\d-z]+$", {"1-z"}, {"a"}},
    {"^[a-c-e]+$", {"a-b", "ce"}, {"d"}},
    {"^[.]$", {"."}, {"a"}},
    {"^[--/]+$", {"-./"}, {",", "0"}},
    {"^[!-\\]]+$", {"!", "]", "A", "\\"}, {"^", "a", " "}},
    {"^[\\[:]+$", {"[:"}, {"a"}},
    {"^[\\[\\]]+$", {"[]"}, {"a"}},
    {"^[\\[\\^-]+$", {"[^-"}, {"a"}},
    {"^[^\\^-]$", {"a"}, {"^", "-"}},
    {"^[a-\\d]+$", {"a-1"}, {"b"}},
    {"^[\\t-\\r]+$", {"\t\n\r"}, {" "}},
    {"^[*+?()|{}$]+$", {"*+?()|{}$"}, {"a"}},
    {"^x\\/y$", {"x/y"}, {"x\\/y", "xy"}},
    {"^a\\tb$", {"a\tb"}, {"atb", "a b"}},
    {"^[\\t\\n]$", {"\t", "\n"}, {"t", "n"}},
    {"^\\n\\r\\f\\v$", {"\n\r\f\v"}, {"nrfv"}},
    {"^a\\-b\\:c$", {"a-b:c"}, {"ab:c"}},
    {"^a|b$", {"ab", "xb", "ax"}, {"x"}},
    {"^(a|bc)*$", {"", "abca"}, {"b"}},
    {"^\\$\\^\\*\\+\\?\\(\\)\\[\\]\\|\\\\$", {"$^*+?()[]|\\"}, {""}},
    {"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
     {"a", "web-1.example.com"},
     {"-a", "a-", "A", "a..b", "a_b"}},
    {"", {"", "x"}, {NULL}},
    /* RE2 matches characters, not bytes: "é" is two bytes, "€" three, "😀" four. */
    {"^.{3}$", {"abc", "ééé", "a€😀"}, {"éa", "éééé", "ab"}},
    {"^.$", {"é", "€", "😀"}, {"é\n"}},
    {"^é+$", {"é", "éé"}, {"é\xa9", "e"}},
    {"^[^a]$", {"é", "😀"}, {"a", "éé"}},
    {"^[^a-z]{2}$", {"é€", "AB"}, {"éa"}},
    {"^\\D\\W\\S$", {"ééé", "a-é", "é é"}, {"1éé", "éé "}},
    {"^日本\\.語{2}$", {"日本.語語"}, {"日本.語", "日本x語語"}},
    /* RE2's \s is [\t\n\f\r ]: not \v, not a non-breaking space. */
    {"^\\s$", {" ", "\t", "\n", "\f", "\r"}, {"\v", "\u00a0", "\u2003"}},
    {"^[\\s]$", {" ", "\r"}, {"\v", "\u00a0"}},
    {"^\\S$", {"\v", "\u00a0", "é"}, {" ", "\t"}},
    /* RE2's flags (the API server accepts them, ECMA-262 has none). (?i) folds
     * as Go does: k with the Kelvin sign U+212A, s with the long s U+017F. */
    {"^(?i)abc$", {"abc", "ABC", "aBc"}, {"abd", "ab"}},
    {"^(?i)k$", {"k", "K", "\u212a"}, {"x", "kk"}},
    {"^(?i:s)S$", {"sS", "SS", "\u017fS"}, {"ss", "s\u017f"}},
    {"^a(?i)b$", {"ab", "aB"}, {"AB", "Ab"}},
    {"^(a(?i)b)c$", {"abc", "aBc"}, {"aBC", "Abc"}},
    {"^(?i)x|y$", {"X", "Xz", "zy", "zY"}, {"z", "zx"}},
    {"^(?i)[a-c]+$", {"AbC", "cab"}, {"d", "aD"}},
    {"^(?i)[^k]$", {"x", "\u00e9"}, {"K", "k", "\u212a"}},
    {"^(?i)[k-m]$", {"\u212a", "L", "m"}, {"j", "N"}},
    {"^(?i)[\\ws]$", {"\u212a", "\u017f", "_"}, {"-"}},
    {"^(?i)\\w+$", {"Kk\u212a\u017f_9"}, {"a-b"}},
    {"^(?i)\\W$", {"-", " "}, {"\u212a", "\u017f", "a"}},
    {"^\\W$", {"\u212a"}, {"a"}},
    {"^(?i)\\d\\s$", {"1 "}, {"a "}},
    {"^(?s)a.b$", {"a\nb", "axb"}, {"ab"}},
    {"^(?is)A.B$", {"a\nb"}, {"a\nc"}},
    {"^(?i-s)a.b$", {"AxB"}, {"a\nb"}},
    {"^(?i:a(?-i)b)$", {"Ab"}, {"AB"}},
    {"^(?U)a+b??$", {"aaa", "ab"}, {"b"}},
    {"^(?-m)a$", {"a"}, {"b"}},
    {"^a(?)b$", {"ab"}, {"a", "aB"}},
};

START_TEST(test_patterns)
{
	/* Every case is run; the failures are reported together. */
	ck_sbuf_t fails = CK_SBUF_INIT;
	for (size_t i = 0; i < sizeof(pattern_cases) / sizeof(pattern_cases[0]); i++) {
		const pattern_case_t *t = &pattern_cases[i];
		char *err = NULL;
		char *ere = gen_pattern_ere(t->ecma, &err);
		if (ere == NULL) {
			ck_sbuf_printf(&fails, "\n  %s: %s", t->ecma, err ? err : "?");
			free(err);
			continue;
		}
		ck_assert_ptr_null(err);
		/* Matched as generated validation matches: by the library. */
		ck_gen_pattern_t p = {.source = t->ecma, .ere = ere};
		if (ck_gen_pattern_match(&p, "") < 0) {
			ck_sbuf_printf(&fails, "\n  %s (ERE %s): does not compile", t->ecma, ere);
			free(ere);
			continue;
		}
		for (size_t k = 0; k < 6 && t->match[k]; k++)
			if (ck_gen_pattern_match(&p, t->match[k]) != 1)
				ck_sbuf_printf(&fails, "\n  %s (ERE %s) must match \"%s\"", t->ecma,
				               ere, t->match[k]);
		for (size_t k = 0; k < 6 && t->nomatch[k]; k++)
			if (ck_gen_pattern_match(&p, t->nomatch[k]) != 0)
				ck_sbuf_printf(&fails, "\n  %s (ERE %s) must not match \"%s\"",
				               t->ecma, ere, t->nomatch[k]);
		ck_gen_pattern_release(&p);
		free(ere);
	}
	ck_assert_msg(fails.len == 0, "%s", ck_sbuf_cstr(&fails));
	ck_sbuf_free(&fails);
}
END_TEST

START_TEST(test_pattern_refusals)
{
	static const char *const cases[][2] = {
	    {"\\b", "the escape \"\\b\" at offset 0 has no POSIX form"},
	    {"a\\B", "the escape \"\\B\" at offset 1 has no POSIX form"},
	    {"(a)\\1", "the escape \"\\1\" at offset 3 has no POSIX form"},
	    {"\\x41", "the escape \"\\x\" at offset 0 has no POSIX form"},
	    {"\\p{L}", "the escape \"\\p\" at offset 0 has no POSIX form"},
	    {"a\\", "the escape \"\\0\" at offset 1 has no POSIX form"},
	    {"(?=a)", "\"(?=\" at offset 0 (lookaround or a named group) has no POSIX form"},
	    {"a(?!b)", "\"(?!\" at offset 1 (lookaround or a named group) has no POSIX form"},
	    {"(?<=a)b", "\"(?<\" at offset 0 (lookaround or a named group) has no POSIX form"},
	    {"(?P<n>a)", "\"(?P\" at offset 0 (lookaround or a named group) has no POSIX form"},
	    {"(?", "\"(?\" at offset 0 is not closed"},
	    {"(?i", "\"(?\" at offset 0 is not closed"},
	    {"(?m)^a$", "the flag \"m\" at offset 2 (multi-line mode) has no POSIX form"},
	    {"a(?x)", "unknown flag \"x\" at offset 3"},
	    {"(?-)", "\"(?-)\" at offset 0 names no flag"},
	    {"(?i-)", "\"(?i-)\" at offset 0 names no flag"},
	    {"(?i-s-m)", "a second \"-\" at offset 5"},
	    {"(?i)caf\xc3\xa9", "a non-ASCII character at offset 7 under (?i) has no POSIX form"},
	    {"(?i:\xc3\xa9)", "a non-ASCII character at offset 4 under (?i) has no POSIX form"},
	    {"[\\D]", "the escape \"\\D\" inside a class at offset 1 has no POSIX form"},
	    {"a[x\\S]", "the escape \"\\S\" inside a class at offset 3 has no POSIX form"},
	    {"[\\b]", "the escape \"\\b\" inside a class at offset 1 has no POSIX form"},
	    {"[a\\", "the escape \"\\0\" inside a class at offset 2 has no POSIX form"},
	    {"[]", "an empty class \"[]\" at offset 0 has no POSIX form"},
	    {"x[^]", "an empty class \"[]\" at offset 1 has no POSIX form"},
	    {"[abc", "unterminated class \"[\" at offset 0"},
	    {"ab[", "unterminated class \"[\" at offset 2"},
	    {"[^", "unterminated class \"[\" at offset 0"},
	    {"[[:alpha:]]", "\"[:\" inside a class at offset 1 would be a POSIX class"},
	    {"[a[.b]", "\"[.\" inside a class at offset 2 would be a POSIX class"},
	    {"x[z-a]", "the range \"z-a\" at offset 2 is out of order"},
	    {"[a\\n-\\t]", "the range \"\\n-\\t\" at offset 2 is out of order"},
	    {"[caf\xc3\xa9]", "a non-ASCII character inside a class at offset 4 has no POSIX form"},
	    /* What would make regcomp take gigabytes or overflow its stack (found by
	     * fuzz_gen): refused, as RE2 refuses the first two. */
	    {"a++", "\"+\" at offset 2 repeats a repetition (RE2 refuses it)"},
	    {"a{1001}", "a count over 1000 at offset 1 (RE2 refuses it)"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *err = NULL;
		char *ere = gen_pattern_ere(cases[i][0], &err);
		ck_assert_msg(ere == NULL, "%s -> %s", cases[i][0], ere);
		ck_assert_ptr_nonnull(err);
		ck_assert_str_eq(err, cases[i][1]);
		free(err);
	}
}
END_TEST

/* Groups nested past 100 levels and patterns that expand past regcomp's reach. */
START_TEST(test_pattern_size_limits)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	for (int i = 0; i < 101; i++)
		ck_sbuf_putc(&b, '(');
	ck_sbuf_putc(&b, 'a');
	for (int i = 0; i < 101; i++)
		ck_sbuf_putc(&b, ')');
	char *err = NULL;
	ck_assert_ptr_null(gen_pattern_ere(ck_sbuf_cstr(&b), &err));
	ck_assert_msg(err && strstr(err, "groups nested deeper than 100 levels"), "%s", err);
	free(err);
	err = NULL;
	ck_assert_ptr_null(gen_pattern_ere("(a{1000}){1000}", &err));
	ck_assert_msg(err && strstr(err, "too large for regcomp"), "%s", err);
	free(err);
	err = NULL;
	/* Within the limits: 100 levels, and a count of 1000. */
	ck_sbuf_reset(&b);
	for (int i = 0; i < 100; i++)
		ck_sbuf_putc(&b, '(');
	ck_sbuf_putc(&b, 'a');
	for (int i = 0; i < 100; i++)
		ck_sbuf_putc(&b, ')');
	char *ere = gen_pattern_ere(ck_sbuf_cstr(&b), &err);
	ck_assert_msg(ere != NULL, "%s", err);
	free(ere);
	ere = gen_pattern_ere("^a{1000}$", &err);
	ck_assert_msg(ere != NULL, "%s", err);
	free(ere);
	ck_sbuf_free(&b);
}
END_TEST

START_TEST(test_pattern_names)
{
	const char *n = gen_pattern_name("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*["
	                                 "a-z0-9])?)*$");
	ck_assert_ptr_nonnull(n);
	ck_assert_ptr_eq(strstr(n, "DNS-1123 subdomain"), n);
	n = gen_pattern_name("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
	ck_assert_ptr_nonnull(n);
	ck_assert_ptr_eq(strstr(n, "DNS-1123 label"), n);
	n = gen_pattern_name("^[a-z]([-a-z0-9]*[a-z0-9])?$");
	ck_assert_ptr_nonnull(n);
	ck_assert_ptr_eq(strstr(n, "DNS-1035 label"), n);
	/* Exact text only. */
	ck_assert_ptr_null(gen_pattern_name("[a-z0-9]([-a-z0-9]*[a-z0-9])?"));
	ck_assert_ptr_null(gen_pattern_name("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ "));
	ck_assert_ptr_null(gen_pattern_name(""));
}
END_TEST

/* ------------------------------------------------------------ C names */

START_TEST(test_snake)
{
	static const char *const cases[][2] = {
	    {"podIP", "pod_ip"},
	    {"URLPath", "url_path"},
	    {"deploymentName", "deployment_name"},
	    {"x-y", "x_y"},
	    {"default", "default_"},
	    {"Default", "default_"},
	    {"int", "int_"},
	    {"bool", "bool_"},
	    {"9lives", "f_9lives"},
	    {"-9", "f_9"},
	    {"spec", "spec"},
	    {"v1Beta1", "v1_beta1"},
	    {"HTTPSProxy", "https_proxy"},
	    {"a--b__c", "a_b_c"},
	    {"_x_", "x"},
	    {"example.com/name", "example_com_name"},
	    {"caf\xc3\xa9", "caf"},
	    {"ID", "id"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *s = gen_snake(cases[i][0]);
		ck_assert_msg(strcmp(s, cases[i][1]) == 0, "%s -> %s, want %s", cases[i][0], s,
		              cases[i][1]);
		free(s);
	}
	/* Nothing usable: still a C identifier. */
	const char *empty[] = {"", "-", "\xc3\xa9"};
	for (size_t i = 0; i < 3; i++) {
		char *s = gen_snake(empty[i]);
		ck_assert_msg(s[0] != '\0' && (s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z')), "%s",
		              s);
		free(s);
	}
}
END_TEST

/* ------------------------------------------------------------ emission */

/* The repository's include/ from the test's directory (tests/unit) or the top. */
static const char *include_dir(void)
{
	if (access("../../include/ckube/gen.h", R_OK) == 0)
		return "../../include";
	return "include";
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "%s", path);
	ck_assert_uint_eq(fwrite(text, 1, strlen(text), f), strlen(text));
	ck_assert_int_eq(fclose(f), 0);
}

static char *read_all(const char *path)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	FILE *f = fopen(path, "r");
	if (f != NULL) {
		char buf[4096];
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			ck_sbuf_append(&b, buf, n);
		fclose(f);
	}
	ck_sbuf_cstr(&b);
	return ck_sbuf_steal(&b);
}

/* Writes <base>.h and <base>.c into a new directory and compiles the source with
 * warnings as errors: what is badly escaped does not compile. On failure the
 * directory is left for a look. */
static void compile_ok(const char *base, const char *h, const char *c)
{
	char dir[] = "/tmp/ckube-gen-test-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char *hp = ck_xasprintf("%s/%s.h", dir, base);
	char *cp = ck_xasprintf("%s/%s.c", dir, base);
	char *log = ck_xasprintf("%s/cc.log", dir);
	write_file(hp, h);
	write_file(cp, c);
	char *cmd = ck_xasprintf("cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I%s -I%s %s "
	                         ">%s 2>&1",
	                         include_dir(), dir, cp, log);
	int rc = system(cmd);
	char *out = read_all(log);
	/* check's messages are short: the first lines of the compiler's only. */
	ck_assert_msg(rc == 0, "%s: exit %d\n%.1500s", cmd, rc, out);
	free(out);
	unlink(hp);
	unlink(cp);
	unlink(log);
	rmdir(dir);
	free(cmd);
	free(hp);
	free(cp);
	free(log);
}

/* Emits version 0 of c; returns gen_emit's result, the files in h and c. */
static int emit(gen_crd_t *crd, const char *prefix, const char *base, ck_sbuf_t *h, ck_sbuf_t *c,
                char **err)
{
	gen_opts_t o = {.prefix = prefix, .base = base};
	*err = NULL;
	ck_sbuf_reset(h);
	ck_sbuf_reset(c);
	int rc = gen_emit(crd, &crd->versions[0], &o, h, c, err);
	ck_sbuf_cstr(h);
	ck_sbuf_cstr(c);
	return rc;
}

static void emit_ok(gen_crd_t *crd, const char *prefix, const char *base, ck_sbuf_t *h,
                    ck_sbuf_t *c)
{
	char *err = NULL;
	int rc = emit(crd, prefix, base, h, c, &err);
	ck_assert_msg(rc == 0, "emit: %s", err ? err : "?");
	ck_assert_ptr_null(err);
}

static char *emit_err(const char *body)
{
	gen_crd_t *crd = schema_ok(body, false);
	ck_sbuf_t h = CK_SBUF_INIT, c = CK_SBUF_INIT;
	char *err = NULL;
	int rc = emit(crd, NULL, NULL, &h, &c, &err);
	ck_assert_msg(rc == -1, "emitted:\n%s", ck_sbuf_cstr(&h));
	ck_assert_ptr_nonnull(err);
	ck_sbuf_free(&h);
	ck_sbuf_free(&c);
	gen_crd_free(crd);
	return err;
}

/* check's messages are short: the text's first 1500 bytes only. */
#define assert_has(text, s)                                                                        \
	ck_assert_msg(strstr(text, s) != NULL, "no \"%s\" in:\n%.1500s", s, text)

static const char rich[] = "type: object\n"
                           "description: A widget.\n"
                           "required: [spec]\n"
                           "properties:\n"
                           "  apiVersion: {type: string}\n"
                           "  kind: {type: string}\n"
                           "  metadata: {type: object}\n"
                           "  data: {type: object, additionalProperties: {type: string}}\n"
                           "  spec:\n"
                           "    type: object\n"
                           "    required: [replicas]\n"
                           "    properties:\n"
                           "      replicas: {type: integer, minimum: 1, maximum: 10}\n"
                           "      podIP: {type: string, pattern: '^\\d+(\\.\\d+){3}$'}\n"
                           "      ratio: {type: number, minimum: 0.25}\n"
                           "      paused: {type: boolean}\n"
                           "      mode: {type: string, enum: [Fast, Slow]}\n"
                           "      template:\n"
                           "        type: object\n"
                           "        properties:\n"
                           "          image: {type: string}\n"
                           "          resources:\n"
                           "            type: object\n"
                           "            properties:\n"
                           "              cpu: {x-kubernetes-int-or-string: true}\n"
                           "          ports: {type: array, items: {type: integer}}\n"
                           "      labels: {type: object, additionalProperties: {type: string}}\n"
                           "      raw: {x-kubernetes-preserve-unknown-fields: true}\n"
                           "      items:\n"
                           "        type: array\n"
                           "        items:\n"
                           "          type: object\n"
                           "          required: [name]\n"
                           "          properties:\n"
                           "            name: {type: string}\n"
                           "            weight: {type: number}\n"
                           "      byName:\n"
                           "        type: object\n"
                           "        additionalProperties:\n"
                           "          type: object\n"
                           "          properties: {value: {type: integer}}\n"
                           "  status:\n"
                           "    type: object\n"
                           "    properties:\n"
                           "      ready: {type: boolean}\n"
                           "      conditions: {type: array, items: {type: object, properties: "
                           "{type: {type: string}}}}\n";

START_TEST(test_emit_basic)
{
	gen_crd_t *crd = schema_ok(rich, true);
	ck_sbuf_t h = CK_SBUF_INIT, c = CK_SBUF_INIT;
	emit_ok(crd, NULL, NULL, &h, &c);
	const char *H = h.data, *C = c.data;

	ck_assert_ptr_eq(strstr(H, "/*\n * Widget (example.com/v1), generated by ckube-gen from "
	                           "t.yaml.\n * DO NOT EDIT"),
	                 H);
	assert_has(H, "\n#ifndef CKUBE_GEN_WIDGET_V1_H\n#define CKUBE_GEN_WIDGET_V1_H\n");
	ck_assert_str_eq(H + strlen(H) - strlen("\n#endif\n"), "\n#endif\n");
	assert_has(H, "#define WIDGET_GROUP       \"example.com\"\n");
	assert_has(H, "#define WIDGET_VERSION     \"v1\"\n");
	assert_has(H, "#define WIDGET_KIND        \"Widget\"\n");
	assert_has(H, "#define WIDGET_RESOURCE    \"widgets\"\n");
	assert_has(H, "extern const ck_type_t widget_type;\n");
	/* The kept fields: nested objects expanded into their properties, in schema
	 * order; arrays, maps and JSON are one field each. */
	const char *fields[][2] = {
	    {"WIDGET_DATA", "data"},
	    {"WIDGET_SPEC_REPLICAS", "spec.replicas"},
	    {"WIDGET_SPEC_POD_IP", "spec.podIP"},
	    {"WIDGET_SPEC_RATIO", "spec.ratio"},
	    {"WIDGET_SPEC_PAUSED", "spec.paused"},
	    {"WIDGET_SPEC_MODE", "spec.mode"},
	    {"WIDGET_SPEC_TEMPLATE_IMAGE", "spec.template.image"},
	    {"WIDGET_SPEC_TEMPLATE_RESOURCES_CPU", "spec.template.resources.cpu"},
	    {"WIDGET_SPEC_TEMPLATE_PORTS", "spec.template.ports"},
	    {"WIDGET_SPEC_LABELS", "spec.labels"},
	    {"WIDGET_SPEC_RAW", "spec.raw"},
	    {"WIDGET_SPEC_ITEMS", "spec.items"},
	    {"WIDGET_SPEC_BY_NAME", "spec.byName"},
	    {"WIDGET_STATUS_READY", "status.ready"},
	    {"WIDGET_STATUS_CONDITIONS", "status.conditions"},
	};
	const char *enum_at = strstr(H, "enum {\n");
	ck_assert_ptr_nonnull(enum_at);
	const char *p = enum_at;
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		char *line = ck_xasprintf("\n\t%s, /* %s */\n", fields[i][0], fields[i][1]);
		const char *at = strstr(p, line);
		ck_assert_msg(at != NULL, "no %s after the previous field in:\n%s", line, enum_at);
		p = at + 1;
		free(line);
		line = ck_xasprintf("    [%s] = \"%s\",\n", fields[i][0], fields[i][1]);
		assert_has(C, line);
		free(line);
	}
	assert_has(p, "\tWIDGET_NFIELDS\n};\n");
	/* No field for the object themselves, nor for metadata. */
	ck_assert_ptr_null(strstr(H, "WIDGET_SPEC,"));
	ck_assert_ptr_null(strstr(H, "WIDGET_SPEC_TEMPLATE,"));
	ck_assert_ptr_null(strstr(H, "WIDGET_METADATA"));
	/* Structs, accessors, functions. */
	assert_has(H, "typedef struct widget_spec_template_resources {\n");
	assert_has(H, "} widget_spec_t;\n");
	assert_has(H, "\tchar *pod_ip;\n");
	assert_has(H, "\tint64_t replicas;\n\tbool has_replicas;\n");
	assert_has(H,
	           "\twidget_spec_items_item_t *items;\n\tsize_t items_len;\n\tbool has_items;\n");
	assert_has(H, "\tchar **by_name_keys;\n\twidget_spec_by_name_value_t *by_name;\n");
	assert_has(H, "const char *widget_spec_pod_ip(const ck_obj_t *obj);\n");
	assert_has(H, "bool widget_spec_replicas(const ck_obj_t *obj, int64_t *out);\n");
	assert_has(H, "const char *widget_spec_labels_json(const ck_obj_t *obj);\n");
	assert_has(H, "const ck_val_t *widget_spec_raw(const ck_obj_t *obj);\n");
	assert_has(H,
	           "int widget_spec_get(const ck_obj_t *obj, widget_spec_t *out, char **err);\n");
	assert_has(H, "int widget_validate_spec(const ck_obj_t *obj, char **err);\n");
	assert_has(H, "extern const ck_gen_schema_t widget_schema;\n");
	assert_has(H, "extern const ck_gen_schema_t widget_status_schema;\n");
	assert_has(C, "#include \"widget.h\"\n");
	assert_has(C, "const ck_type_t widget_type = {\n");
	assert_has(C, "    .namespaced = true,\n");
	assert_has(C, "    .flags = CK_GEN_HAS_MIN | CK_GEN_HAS_MAX,\n");
	assert_has(C, "    .imin = 1LL,\n    .imax = 10LL,\n");
	assert_has(C, "    .flags = CK_GEN_INT_OR_STRING,\n");
	assert_has(C, ".ere = \"^[0-9]+(\\\\.[0-9]+){3}$\"");
	assert_has(C, "ck_gen_validate_obj(&widget_spec_schema, \"spec\", true, obj, err);");
	compile_ok("widget", H, C);

	/* The same CRD, emitted again or loaded again: the same bytes. */
	ck_sbuf_t h2 = CK_SBUF_INIT, c2 = CK_SBUF_INIT;
	emit_ok(crd, NULL, NULL, &h2, &c2);
	ck_assert_str_eq(h2.data, H);
	ck_assert_str_eq(c2.data, C);
	gen_crd_t *again = schema_ok(rich, false);
	emit_ok(again, NULL, NULL, &h2, &c2);
	ck_assert_str_eq(h2.data, H);
	ck_assert_str_eq(c2.data, C);
	gen_crd_free(again);
	ck_sbuf_free(&h2);
	ck_sbuf_free(&c2);
	ck_sbuf_free(&h);
	ck_sbuf_free(&c);
	gen_crd_free(crd);
}
END_TEST

START_TEST(test_emit_versions)
{
	/* Each version on its own: its name in the guard and the macros, its own
	 * fields; emitting one leaves nothing behind for the next. */
	char *t = replace_line(head, "      openAPIV3Schema:",
	                       "      openAPIV3Schema:\n"
	                       "        type: object\n"
	                       "        properties: {spec: {type: object, properties: {a: {type: "
	                       "string}}}}\n"
	                       "  - name: v2beta1\n"
	                       "    schema:\n"
	                       "      openAPIV3Schema:\n"
	                       "        type: object\n"
	                       "        properties: {spec: {type: object, properties: {b: {type: "
	                       "integer}, a: {type: string}}}}");
	gen_crd_t *crd = load_ok(t, true);
	free(t);
	ck_assert_uint_eq(crd->nversions, 2);
	gen_opts_t o = {0};
	ck_sbuf_t h1 = CK_SBUF_INIT, c1 = CK_SBUF_INIT, h2 = CK_SBUF_INIT, c2 = CK_SBUF_INIT;
	char *err = NULL;
	ck_assert_int_eq(gen_emit(crd, &crd->versions[0], &o, &h1, &c1, &err), 0);
	ck_assert_int_eq(gen_emit(crd, &crd->versions[1], &o, &h2, &c2, &err), 0);
	ck_sbuf_cstr(&h1);
	ck_sbuf_cstr(&h2);
	ck_sbuf_cstr(&c2);
	assert_has(h1.data, "#ifndef CKUBE_GEN_WIDGET_V1_H\n");
	assert_has(h1.data, "#define WIDGET_VERSION     \"v1\"\n");
	assert_has(h1.data, "enum {\n\tWIDGET_SPEC_A, /* spec.a */\n\tWIDGET_NFIELDS\n};\n");
	assert_has(h2.data, "#ifndef CKUBE_GEN_WIDGET_V2BETA1_H\n");
	assert_has(h2.data, "#define WIDGET_VERSION     \"v2beta1\"\n");
	assert_has(h2.data, "enum {\n\tWIDGET_SPEC_B, /* spec.b */\n\tWIDGET_SPEC_A, /* spec.a "
	                    "*/\n\tWIDGET_NFIELDS\n};\n");
	compile_ok("widget", h2.data, c2.data);
	ck_sbuf_t h3 = CK_SBUF_INIT, c3 = CK_SBUF_INIT;
	ck_assert_int_eq(gen_emit(crd, &crd->versions[0], &o, &h3, &c3, &err), 0);
	ck_assert_str_eq(ck_sbuf_cstr(&h3), h1.data);
	ck_assert_str_eq(ck_sbuf_cstr(&c3), ck_sbuf_cstr(&c1));
	ck_sbuf_free(&h1);
	ck_sbuf_free(&c1);
	ck_sbuf_free(&h2);
	ck_sbuf_free(&c2);
	ck_sbuf_free(&h3);
	ck_sbuf_free(&c3);
	gen_crd_free(crd);
}
END_TEST

START_TEST(test_emit_prefix)
{
	gen_crd_t *crd = schema_ok(rich, false);
	ck_sbuf_t h = CK_SBUF_INIT, c = CK_SBUF_INIT;
	emit_ok(crd, "acme_gadget", "gadget_v1", &h, &c);
	/* Every name made from the prefix: nothing is left of the kind's. */
	ck_assert_msg(strstr(h.data, "widget_") == NULL && strstr(h.data, "WIDGET_") == NULL, "%s",
	              h.data);
	ck_assert_msg(strstr(c.data, "widget_") == NULL && strstr(c.data, "WIDGET_") == NULL, "%s",
	              c.data);
	assert_has(h.data, "#ifndef CKUBE_GEN_ACME_GADGET_V1_H\n");
	assert_has(h.data, "#define ACME_GADGET_GROUP       \"example.com\"\n");
	assert_has(h.data, "#define ACME_GADGET_KIND        \"Widget\"\n");
	assert_has(h.data, "extern const ck_type_t acme_gadget_type;\n");
	assert_has(h.data, "\tACME_GADGET_SPEC_TEMPLATE_IMAGE, /* spec.template.image */\n");
	assert_has(h.data, "} acme_gadget_spec_t;\n");
	assert_has(h.data, "int acme_gadget_validate(const ck_obj_t *obj, char **err);\n");
	assert_has(c.data, "#include \"gadget_v1.h\"\n");
	compile_ok("gadget_v1", h.data, c.data);
	ck_sbuf_free(&h);
	ck_sbuf_free(&c);
	gen_crd_free(crd);
}
END_TEST

START_TEST(test_emit_no_schema)
{
	char *t = replace_line(head, "    schema:", "");
	char *t2 = replace_line(t, "      openAPIV3Schema:", "");
	gen_crd_t *crd = load_ok(t2, true);
	ck_assert_ptr_null(crd->versions[0].root);
	ck_sbuf_t h = CK_SBUF_INIT, c = CK_SBUF_INIT;
	emit_ok(crd, NULL, NULL, &h, &c);
	assert_has(h.data, "enum {\n\tWIDGET_NFIELDS\n};\n");
	assert_has(h.data, "typedef struct widget {\n\tchar unused_;");
	assert_has(h.data, "extern const ck_type_t widget_type;\n");
	assert_has(c.data, "    .nfields = WIDGET_NFIELDS,\n");
	compile_ok("widget", h.data, c.data);
	gen_crd_free(crd);
	free(t);
	free(t2);

	/* A schema without properties (only the ones the library reads) is the same. */
	crd = schema_ok("type: object\nproperties:\n  metadata: {type: object}\n", false);
	emit_ok(crd, NULL, NULL, &h, &c);
	assert_has(h.data, "enum {\n\tWIDGET_NFIELDS\n};\n");
	compile_ok("widget", h.data, c.data);
	gen_crd_free(crd);
	crd = schema_ok("type: object\nx-kubernetes-preserve-unknown-fields: true\n", false);
	emit_ok(crd, NULL, NULL, &h, &c);
	assert_has(h.data, "enum {\n\tWIDGET_NFIELDS\n};\n");
	compile_ok("widget", h.data, c.data);
	gen_crd_free(crd);
	ck_sbuf_free(&h);
	ck_sbuf_free(&c);
}
END_TEST

START_TEST(test_emit_collisions)
{
	/* Two members of one struct (in array items: no kept fields, no accessors). */
	char *err = emit_err("type: object\n"
	                     "properties:\n"
	                     "  spec:\n"
	                     "    type: array\n"
	                     "    items:\n"
	                     "      type: object\n"
	                     "      properties:\n"
	                     "        fooBar: {type: string}\n"
	                     "        foo_bar: {type: string}\n");
	ck_assert_str_eq(err,
	                 FILE_NAME ":23: " SPEC ".items.properties.foo_bar: its C member foo_bar "
	                           "collides with the one made for fooBar");
	free(err);
	/* x and has_x. */
	err = emit_err("type: object\n"
	               "properties:\n"
	               "  spec:\n"
	               "    type: object\n"
	               "    properties:\n"
	               "      x: {type: integer}\n"
	               "      hasX: {type: boolean}\n");
	ck_assert_str_eq(err, FILE_NAME ":21: " SPEC ".properties.hasX: its C member has_x "
	                                "collides with the one made for x");
	free(err);
	/* Kept fields: their names collide first. */
	err = emit_err("type: object\n"
	               "properties:\n"
	               "  spec:\n"
	               "    type: object\n"
	               "    properties:\n"
	               "      fooBar: {type: string}\n"
	               "      foo_bar: {type: string}\n");
	ck_assert_str_eq(err, FILE_NAME ":21: " SPEC ".properties.foo_bar: the C name "
	                                "WIDGET_SPEC_FOO_BAR is also made for " SPEC
	                                ".properties.fooBar; rename one, or give "
	                                "--prefix");
	free(err);
	/* Two kept fields with one name from different parents: spec.x and specX. */
	err = emit_err("type: object\n"
	               "properties:\n"
	               "  spec:\n"
	               "    type: object\n"
	               "    properties:\n"
	               "      x: {type: string}\n"
	               "  specX: {type: string}\n");
	ck_assert_str_eq(err,
	                 FILE_NAME ":21: " ROOT ".properties.specX: the C name WIDGET_SPEC_X is "
	                           "also made for " SPEC ".properties.x; rename "
	                           "one, or give --prefix");
	free(err);
	/* An accessor and a struct type. */
	err = emit_err("type: object\n"
	               "properties:\n"
	               "  spec:\n"
	               "    type: object\n"
	               "    properties:\n"
	               "      t: {type: string}\n");
	ck_assert_str_eq(err,
	                 FILE_NAME ":20: " SPEC ".properties.t: the C name widget_spec_t is also "
	                           "made for " SPEC "; rename one, or give "
	                           "--prefix");
	free(err);
	/* Names the header makes of its own: schema tables, macros, the descriptor,
	 * the patch constructor. */
	err = emit_err("type: object\n"
	               "properties:\n"
	               "  spec:\n"
	               "    type: object\n"
	               "    properties:\n"
	               "      schema: {type: string}\n");
	ck_assert_str_eq(err, FILE_NAME ":20: " SPEC ".properties.schema: the C name "
	                                "widget_spec_schema is also made for " SPEC
	                                "; rename one, or give --prefix");
	free(err);
	err = emit_err("type: object\n"
	               "properties:\n"
	               "  schema: {type: string}\n");
	ck_assert_str_eq(err, FILE_NAME ":17: " ROOT ".properties.schema: the C name widget_schema "
	                                "is also made for " ROOT "; rename one, or "
	                                "give --prefix");
	free(err);
	err = emit_err("type: object\n"
	               "properties:\n"
	               "  version: {type: string}\n");
	ck_assert_str_eq(err,
	                 FILE_NAME ":17: " ROOT ".properties.version: the C name WIDGET_VERSION "
	                           "is also made for the header's macros; rename "
	                           "one, or give --prefix");
	free(err);
	err = emit_err("type: object\n"
	               "properties:\n"
	               "  nfields: {type: integer}\n");
	ck_assert_str_eq(err,
	                 FILE_NAME ":17: " ROOT ".properties.nfields: the C name WIDGET_NFIELDS "
	                           "is also made for the header's macros; rename "
	                           "one, or give --prefix");
	free(err);
	err = emit_err("type: object\n"
	               "properties:\n"
	               "  type: {type: string}\n");
	ck_assert_str_eq(err, FILE_NAME ":17: " ROOT ".properties.type: the C name widget_type is "
	                                "also made for the descriptor; rename one, or "
	                                "give --prefix");
	free(err);
	err = emit_err("type: object\n"
	               "properties:\n"
	               "  patchNew: {type: string}\n");
	ck_assert_str_eq(err, FILE_NAME ":17: " ROOT ".properties.patchNew: the C name "
	                                "widget_patch_new is also made for the patch "
	                                "constructor; rename one, or give --prefix");
	free(err);
	/* Near misses are fine, and compile. */
	gen_crd_t *crd = schema_ok("type: object\n"
	                           "properties:\n"
	                           "  versions: {type: string}\n"
	                           "  schemas: {type: string}\n"
	                           "  spec:\n"
	                           "    type: object\n"
	                           "    properties:\n"
	                           "      get: {type: object, properties: {x: {type: string}}}\n"
	                           "      tt: {type: string}\n",
	                           false);
	ck_sbuf_t h = CK_SBUF_INIT, c = CK_SBUF_INIT;
	emit_ok(crd, NULL, NULL, &h, &c);
	compile_ok("widget", h.data, c.data);
	ck_sbuf_free(&h);
	ck_sbuf_free(&c);
	gen_crd_free(crd);
}
END_TEST

START_TEST(test_emit_escaping)
{
	/* What a CRD may say that C must not take as code: quotes, backslashes, '?'
	 * (trigraphs under -std=c11), comment ends and starts, non-ASCII bytes, control
	 * characters, in descriptions, patterns, enum values and property names. */
	gen_crd_t *crd =
	    schema_ok("type: object\n"
	              "description: 'Top */ level /* with \"quotes\" and \\ and ?\?/'\n"
	              "properties:\n"
	              "  spec:\n"
	              "    type: object\n"
	              "    description: \"caf\\u00e9 */ ?\?= \\\\ \\\" \\t tab /\"\n"
	              "    properties:\n"
	              "      q:\n"
	              "        type: string\n"
	              "        description: 'a ?\?/'\n"
	              "        pattern: '^(\"|\\\\|\\?|/\\*|\\*/|x/*y|caf\xc3\xa9"
	              "|\\t|\\?\\?/)+$'\n"
	              "        enum: ['\"', '\\', '?\?/', '*/', '/*', 'caf\xc3\xa9"
	              "', \"\\t\\n\", '?\?=', 'a*/b']\n"
	              "      'we*/ird\"na\\me?\?/':\n"
	              "        type: object\n"
	              "        description: x*\n"
	              "        properties:\n"
	              "          'x/*y': {type: string, description: '*/'}\n"
	              "          'caf\xc3\xa9"
	              "': {type: integer, enum: [1]}\n"
	              "  'back\\':\n"
	              "    type: object\n"
	              "    description: ends in a backslash\n"
	              "    properties: {'x\\': {type: string, description: 'y\\'}}\n"
	              "  'top*/obj?\?/':\n"
	              "    type: object\n"
	              "    properties:\n"
	              "      'a*/b': {type: string, description: '/'}\n",
	              false);
	ck_sbuf_t h = CK_SBUF_INIT, c = CK_SBUF_INIT;
	emit_ok(crd, NULL, NULL, &h, &c);
	compile_ok("widget", h.data, c.data);
	/* The values are kept as they are in the tables. */
	assert_has(c.data, "\"\\\"\\\\\\\"\\\"\"");      /* the enum value "\"" */
	assert_has(c.data, "\"\\\"caf\\303\\251\\\"\""); /* "\"café\"" */
	gen_crd_free(crd);

	/* A group, kind, version or file whose text would close the banner. */
	const char *odd = "apiVersion: apiextensions.k8s.io/v1\n"
	                  "kind: CustomResourceDefinition\n"
	                  "spec:\n"
	                  "  group: 'example.com*'\n"
	                  "  scope: Cluster\n"
	                  "  names: {kind: 'Odd*', plural: 'odds*/'}\n"
	                  "  versions:\n"
	                  "  - name: '*v1/*'\n"
	                  "    schema:\n"
	                  "      openAPIV3Schema:\n"
	                  "        type: object\n"
	                  "        x-kubernetes-validations: [{rule: 'true'}]\n"
	                  "        properties: {spec: {type: object, properties: {'*/': {type: "
	                  "string}}}}\n";
	char *err = NULL;
	crd = gen_crd_load("dir*/odd?\?/", odd, strlen(odd), false, &err);
	ck_assert_msg(crd != NULL, "%s", err);
	emit_ok(crd, "odd", "odd", &h, &c);
	compile_ok("odd", h.data, c.data);
	gen_crd_free(crd);
	ck_sbuf_free(&h);
	ck_sbuf_free(&c);
}
END_TEST

START_TEST(test_emit_limits)
{
	/* The extreme integers have C literals. */
	gen_crd_t *crd = schema_ok("type: object\n"
	                           "properties:\n"
	                           "  spec:\n"
	                           "    type: object\n"
	                           "    properties:\n"
	                           "      lo: {type: integer, minimum: -9223372036854775808, "
	                           "maximum: -9223372036854775808}\n"
	                           "      hi: {type: integer, minimum: 9223372036854775807, "
	                           "maximum: 9223372036854775807}\n"
	                           "      n: {type: number, minimum: -1e308, maximum: 1e-300}\n"
	                           "      e: {type: integer, enum: [-9223372036854775808]}\n",
	                           false);
	ck_sbuf_t h = CK_SBUF_INIT, c = CK_SBUF_INIT;
	emit_ok(crd, NULL, NULL, &h, &c);
	compile_ok("widget", h.data, c.data);
	gen_crd_free(crd);
	/* Out of range: refused when read. */
	char *err = schema_err("type: object\n"
	                       "properties:\n"
	                       "  spec: {type: integer, maximum: 9223372036854775808}\n",
	                       false);
	ck_assert_str_eq(err, FILE_NAME ":17: " SPEC ": maximum \"9223372036854775808\" is not an "
	                                "integer");
	free(err);
	ck_sbuf_free(&h);
	ck_sbuf_free(&c);
}
END_TEST

Suite *suite_ckube_gen(void)
{
	Suite *s = suite_create("ckube_gen");
	TCase *tc = tcase_create("load");
	tcase_add_test(tc, test_load_minimal);
	tcase_add_test(tc, test_load_multi_document);
	tcase_add_test(tc, test_load_refusals);
	tcase_add_test(tc, test_load_invalid_yaml);
	suite_add_tcase(s, tc);
	tc = tcase_create("schema");
	tcase_add_test(tc, test_schema_refusals);
	tcase_add_test(tc, test_schema_validation_refusals);
	tcase_add_test(tc, test_schema_depth);
	tcase_add_test(tc, test_schema_aliases);
	tcase_add_test(tc, test_schema_alias_cycle);
	tcase_add_test(tc, test_schema_mapping);
	tcase_add_test(tc, test_schema_fallbacks);
	tcase_add_test(tc, test_schema_notes);
	tcase_add_test(tc, test_schema_structured_enum);
	suite_add_tcase(s, tc);
	tc = tcase_create("pattern");
	tcase_add_test(tc, test_patterns);
	tcase_add_test(tc, test_pattern_refusals);
	tcase_add_test(tc, test_pattern_size_limits);
	tcase_add_test(tc, test_pattern_names);
	tcase_add_test(tc, test_snake);
	suite_add_tcase(s, tc);
	tc = tcase_create("emit");
	tcase_add_test(tc, test_emit_basic);
	tcase_add_test(tc, test_emit_versions);
	tcase_add_test(tc, test_emit_prefix);
	tcase_add_test(tc, test_emit_no_schema);
	tcase_add_test(tc, test_emit_collisions);
	tcase_add_test(tc, test_emit_escaping);
	tcase_add_test(tc, test_emit_limits);
	suite_add_tcase(s, tc);
	return s;
}
