/*
 * ckube-gen's model: a CRD read from YAML (crd.c), its schema mapped to C types
 * (the kinds of ckube/gen.h), and the code written from it (emit.c). Private to
 * the generator and to its fuzz target.
 */
#ifndef CKUBE_GEN_MODEL_H
#define CKUBE_GEN_MODEL_H

#include <ckube/base.h>
#include <ckube/gen.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gen_node gen_node_t;

typedef struct gen_prop {
	char *name; /* the JSON member */
	gen_node_t *node;
	bool required;
} gen_prop_t;

/* One schema node, mapped. */
struct gen_node {
	ck_gen_kind_t kind;
	unsigned flags; /* CK_GEN_* of ckube/gen.h */
	int line;       /* 1-based line of the node in the file */
	char *spath;    /* where in the CRD: "spec.versions[0].schema.openAPIV3Schema..." */
	char *why_json; /* for CK_GEN_JSON: why the value is kept as JSON text */
	gen_prop_t *props;
	size_t nprops;
	gen_node_t *items; /* arrays and maps */
	int64_t imin, imax;
	double dmin, dmax;
	int64_t min_length, max_length, min_items, max_items;
	char **enums; /* compact JSON text of each value */
	size_t nenum;
	char *pattern;     /* as in the schema */
	char *pattern_ere; /* translated (pattern.c) */
	const char *pattern_name;
	char *format;
	char *description; /* its first line */
	bool nullable;
	/* Set by gen_emit: */
	int id;        /* number of its table in the generated source */
	int field;     /* index of its kept field, or -1 */
	char *ctype;   /* objects: the generated struct's name, without _t */
	bool exported; /* its table is public: the whole kind and its top-level objects */
};

typedef struct gen_version {
	char *name;
	int line;
	gen_node_t *root; /* NULL when the version states no schema */
} gen_version_t;

typedef struct gen_crd {
	char *file; /* as named on the command line, for messages and the header */
	char *name; /* metadata.name */
	char *group, *kind, *plural;
	bool namespaced;
	gen_version_t *versions;
	size_t nversions;
	/* What the generated code does not check (CEL rules, oneOf, ...): one line
	 * each, "file:line: path: what". */
	char **notes;
	size_t nnotes;
} gen_crd_t;

/*
 * Reads the one CustomResourceDefinition in the YAML text buf (len bytes; other
 * documents are skipped). file names it in messages. Returns a new CRD, free
 * with gen_crd_free(); or NULL with a new message in *err:
 * "<file>:<line>: <path in the CRD>: <why>". strict: what would be a note is
 * refused instead.
 */
gen_crd_t *gen_crd_load(const char *file, const char *buf, size_t len, bool strict, char **err);
void gen_crd_free(gen_crd_t *crd);

typedef struct gen_opts {
	const char *prefix; /* C prefix ("foo"); NULL: the kind in snake case */
	const char *base;   /* file base name ("foo"); NULL: the kind in snake case */
} gen_opts_t;

/*
 * Writes version v of crd as C: the header into *h, the source into *c (which
 * includes "<base>.h"). Deterministic: the same CRD gives the same bytes.
 * Returns 0, or -1 with a new message in *err (a name that collides in C).
 */
int gen_emit(gen_crd_t *crd, const gen_version_t *v, const gen_opts_t *o, ck_sbuf_t *h,
             ck_sbuf_t *c, char **err);

/* snake_case of a camelCase name (new string): "podIP" -> "pod_ip". */
char *gen_snake(const char *name);

/*
 * A set of names, for duplicate and collision checks in constant time (a list
 * compared name by name makes a schema of thousands of names quadratic): a hash
 * table of indexes into names, which it borrows. Zero-initialize; free with
 * gen_nameset_free().
 */
typedef struct gen_nameset {
	const char **names; /* in the order added */
	size_t n;
	size_t *slots; /* index + 1, 0 when empty */
	size_t nslots; /* a power of two, or 0 */
} gen_nameset_t;

/* Adds name unless it is there. Returns true if it was, with its index in *at;
 * false with the new one in *at. */
bool gen_nameset_add(gen_nameset_t *ns, const char *name, size_t *at);
/* The index of name, or SIZE_MAX. */
size_t gen_nameset_find(const gen_nameset_t *ns, const char *name);
void gen_nameset_free(gen_nameset_t *ns);
/* The size to grow an array to when adding its element n + 1, one at a time, or
 * 0 when it has room: doubled when n is a power of two (0 is too), so that n
 * additions copy O(n) elements (a realloc by one copies every time under ASan). */
size_t gen_grown(size_t n);

/*
 * Translates an ECMA-262 / RE2 pattern to a POSIX extended expression that
 * accepts the same strings. Returns a new string, or NULL with a new message in
 * *err naming what cannot be translated (backreferences, lookaround, \b, ...).
 */
char *gen_pattern_ere(const char *src, char **err);
/* The description of a well-known Kubernetes pattern (DNS-1123 names, ...), or NULL. */
const char *gen_pattern_name(const char *src);

#endif
