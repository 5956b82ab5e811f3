/*
 * libFuzzer target for ckube-gen (cmd/ckube-gen): gen_crd_load() on the input as
 * the YAML text of "fuzz.yaml", both as is and with --strict, then gen_emit() for
 * every version of a CRD that loads; or gen_pattern_ere() when the input starts
 * with "#pattern\n" (the rest, up to a NUL, is the pattern).
 *
 * Invariants (a violation traps):
 *  - load: a CRD or an error, never both, never neither; an error is one line of
 *    text starting "fuzz.yaml:"; the model is well formed (kinds, paths, items of
 *    arrays and maps, patterns with their ERE, enums, depth).
 *  - strict: refuses whatever the lenient load refuses; refuses a CRD that has
 *    notes, saying "(refused by --strict)"; accepts one without notes, with the
 *    same output.
 *  - emit (with the prefix main.c gives): 0 with a header ending "#endif\n" and a
 *    source starting "slash-star", or -1 with an error starting "fuzz.yaml:";
 *    twice on the same CRD gives the same bytes (and the same error); the output
 *    has no NUL and lexes as C: comments and literals closed, no comment close
 *    or "//" in code, every comment closed by " * /" and a newline (no name read
 *    from the CRD can close one), string literals on one line with printable
 *    bytes, directives only #ifndef / #define / #include / #endif at a line start;
 *    a header line that starts a declaration is a whole prototype "...(...);".
 *  - pattern: an ERE, or NULL with an error; an ERE that compiles is matched
 *    (ck_gen_pattern_match) against "" and its source (compiling may fail: the
 *    loader checks that).
 * Leaks are findings (LSan).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_GNU_SOURCE -Iinclude -I. \
 *     tests/fuzz/fuzz_gen.c cmd/ckube-gen/crd.c cmd/ckube-gen/emit.c \
 *     cmd/ckube-gen/pattern.c pkg/base/base.c -lyaml -pthread -lm -o fuzz_gen
 *   ./fuzz_gen -dict=tests/fuzz/fuzz_gen.dict corpus tests/fuzz/seeds/gen
 * (bash tests/fuzz/run_fuzz_gen.sh [SECONDS] does all of this.)
 */
#include "cmd/ckube-gen/gen.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_FILE    "fuzz.yaml"
#define PATTERN_MARK "#pattern\n"
/* crd.c's MAX_DEPTH: a node deeper than this is refused. */
#define MODEL_MAX_DEPTH 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_gen: invariant failed: %s (line %d)\n", #cond,       \
			        __LINE__);                                                         \
			__builtin_trap();                                                          \
		}                                                                                  \
	} while (0)

/* The checks below are not the code under test: their branches are no coverage
 * for libFuzzer to chase, and uninstrumented they cost a tenth as much. */
#if defined(__clang__) && __clang_major__ >= 13
#define NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define NO_COVERAGE
#endif

/* Where touch() adds the bytes it reads, so that the reads are not optimized out. */
volatile unsigned fuzz_gen_sink;

NO_COVERAGE static size_t touch(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++)
		fuzz_gen_sink += (unsigned char)s[n];
	return n;
}

static bool starts_with(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/* An error of the loader or the emitter: one line naming the file. */
static void check_err(const char *err)
{
	CHECK(err != NULL);
	size_t n = touch(err);
	CHECK(starts_with(err, FUZZ_FILE ":"));
	CHECK(n > strlen(FUZZ_FILE ":"));
	(void)n;
}

/* ------------------------------------------------------------ the model */

static void check_node(const gen_node_t *n, int depth)
{
	CHECK(n != NULL);
	CHECK(depth <= MODEL_MAX_DEPTH);
	CHECK(n->kind >= CK_GEN_STRING && n->kind <= CK_GEN_JSON);
	CHECK(n->spath != NULL && starts_with(n->spath, "spec.versions["));
	touch(n->spath);
	CHECK(n->line >= 1);
	if (n->kind == CK_GEN_JSON)
		CHECK(n->why_json != NULL && touch(n->why_json) > 0);
	if (n->kind == CK_GEN_ARRAY || n->kind == CK_GEN_MAP)
		CHECK(n->items != NULL);
	if (n->kind == CK_GEN_OBJECT)
		CHECK(depth == 0 || n->nprops > 0); /* an object without properties is JSON */
	else
		CHECK(n->nprops == 0);
	for (size_t i = 0; i < n->nprops; i++) {
		CHECK(n->props[i].name != NULL && touch(n->props[i].name) > 0);
		CHECK(strchr(n->props[i].name, '.') == NULL);
		for (size_t j = 0; j < i; j++)
			CHECK(strcmp(n->props[i].name, n->props[j].name) != 0);
		check_node(n->props[i].node, depth + 1);
	}
	if (n->items)
		check_node(n->items, depth + 1);
	CHECK((n->pattern == NULL) == (n->pattern_ere == NULL));
	if (n->pattern) {
		touch(n->pattern);
		touch(n->pattern_ere);
	}
	if (n->pattern_name)
		touch(n->pattern_name);
	for (size_t i = 0; i < n->nenum; i++)
		CHECK(n->enums[i] != NULL && touch(n->enums[i]) > 0);
	if (n->format)
		touch(n->format);
	if (n->description)
		CHECK(strchr(n->description, '\n') == NULL);
	CHECK(n->min_length >= -1 && n->max_length >= -1 && n->min_items >= -1 &&
	      n->max_items >= -1);
	CHECK(((n->flags & CK_GEN_HAS_MIN_LENGTH) != 0) == (n->min_length >= 0));
	CHECK(((n->flags & CK_GEN_HAS_MAX_LENGTH) != 0) == (n->max_length >= 0));
	CHECK(((n->flags & CK_GEN_HAS_MIN_ITEMS) != 0) == (n->min_items >= 0));
	CHECK(((n->flags & CK_GEN_HAS_MAX_ITEMS) != 0) == (n->max_items >= 0));
}

static void check_crd(const gen_crd_t *c)
{
	CHECK(c->file != NULL && strcmp(c->file, FUZZ_FILE) == 0);
	CHECK(c->name != NULL);
	touch(c->name);
	CHECK(c->group != NULL && touch(c->group) > 0);
	CHECK(c->kind != NULL && touch(c->kind) > 0);
	CHECK(c->plural != NULL && touch(c->plural) > 0);
	CHECK(c->nversions > 0 && c->versions != NULL);
	for (size_t i = 0; i < c->nversions; i++) {
		const gen_version_t *v = &c->versions[i];
		CHECK(v->name != NULL && touch(v->name) > 0);
		CHECK(v->line >= 1);
		for (size_t j = 0; j < i; j++)
			CHECK(strcmp(v->name, c->versions[j].name) != 0);
		if (v->root != NULL) {
			CHECK(v->root->kind == CK_GEN_OBJECT || v->root->kind == CK_GEN_JSON);
			check_node(v->root, 0);
		}
	}
	for (size_t i = 0; i < c->nnotes; i++) {
		CHECK(starts_with(c->notes[i], FUZZ_FILE ":"));
		touch(c->notes[i]);
	}
}

/* ------------------------------------------------------------ the output */

static bool directive_ok(const char *p)
{
	static const char *const ok[] = {"#ifndef ", "#define ", "#include ", "#endif\n"};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (starts_with(p, ok[i]))
			return true;
	return false;
}

/* A declaration at the start of a header line (not extern, typedef or enum) is a
 * whole prototype: "...(...);". */
NO_COVERAGE static void check_prototype(const char *line)
{
	static const char *const other[] = {"extern ", "typedef ", "enum "};
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		if (starts_with(line, other[i]))
			return;
	size_t n = strcspn(line, "\n");
	CHECK(n >= 2 && memcmp(line + n - 2, ");", 2) == 0);
	CHECK(memchr(line, '(', n) != NULL);
}

/*
 * The generated text lexes as C with every comment and literal closed where the
 * emitter closes it: no text read from the CRD ends a comment or a literal early.
 */
NO_COVERAGE static void check_c(const ck_sbuf_t *b, bool header)
{
	CHECK(b->data != NULL && b->len > 0);
	const char *s = b->data;
	size_t n = b->len;
	CHECK(strlen(s) == n); /* no NUL; and s[n] is the terminator */
	enum { CODE, COMMENT, STR, CHR } st = CODE;
	bool bol = true; /* only blanks so far on this line */
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		switch (st) {
		case CODE:
			if (c == '/' && s[i + 1] == '*') {
				st = COMMENT;
				i++;
				bol = false;
				continue;
			}
			CHECK(!(c == '*' && s[i + 1] == '/')); /* a comment closed twice */
			CHECK(!(c == '/' && s[i + 1] == '/'));
			if (c == '\n') {
				bol = true;
				continue;
			}
			if (c == ' ' || c == '\t')
				continue;
			CHECK(c > 0x20 && c < 0x7f && strchr("@`$\\", c) == NULL);
			if (c == '#') {
				CHECK(bol);
				CHECK(directive_ok(s + i));
			}
			if (header && bol && i > 0 && s[i - 1] == '\n' && c >= 'a' && c <= 'z')
				check_prototype(s + i);
			if (c == '"')
				st = STR;
			else if (c == '\'')
				st = CHR;
			bol = false;
			break;
		case COMMENT:
			if (c == '*' && s[i + 1] == '/') {
				/* Every comment the emitter writes ends " * /" and a newline. */
				CHECK(i > 0 && s[i - 1] == ' ');
				CHECK(s[i + 2] == '\n');
				st = CODE;
				i++;
			}
			break;
		case STR:
		case CHR:
			CHECK(c >= 0x20 && c < 0x7f);
			if (c == '\\') {
				CHECK(i + 1 < n);
				unsigned char e = (unsigned char)s[++i];
				CHECK(strchr("\"\\?'ntrfvab01234567", e) != NULL);
			} else if (c == (st == STR ? '"' : '\'')) {
				st = CODE;
			}
			break;
		}
	}
	CHECK(st == CODE);
}

/* The prefix main.c gives version v: the kind's, with the version's when there are
 * several. New string, or NULL for the default. */
static char *main_prefix(const gen_crd_t *c, const gen_version_t *v)
{
	if (c->nversions <= 1)
		return NULL;
	char *k = gen_snake(c->kind), *vs = gen_snake(v->name);
	char *p = ck_xasprintf("%s_%s", k, vs);
	free(k);
	free(vs);
	return p;
}

typedef struct out {
	int rc;
	char *err;
	ck_sbuf_t h, c;
} out_t;

/* Emits version i into *o; lex checks the output when check (the other
 * emissions of the same version are compared with the checked one). */
static void emit(gen_crd_t *crd, size_t i, out_t *o, bool check)
{
	const gen_version_t *v = &crd->versions[i];
	char *prefix = main_prefix(crd, v);
	gen_opts_t opts = {.prefix = prefix};
	memset(o, 0, sizeof(*o));
	o->rc = gen_emit(crd, v, &opts, &o->h, &o->c, &o->err);
	free(prefix);
	CHECK(o->rc == 0 || o->rc == -1);
	if (o->rc == 0) {
		CHECK(o->err == NULL);
		if (check) {
			check_c(&o->h, true);
			check_c(&o->c, false);
		}
		CHECK(ends_with(o->h.data, o->h.len, "#endif\n"));
		CHECK(starts_with(o->h.data, "/*"));
		CHECK(starts_with(o->c.data, "/*"));
	} else {
		check_err(o->err);
	}
}

static void same_out(const out_t *a, const out_t *b)
{
	CHECK(a->rc == b->rc);
	if (a->rc != 0) {
		CHECK(strcmp(a->err, b->err) == 0);
		return;
	}
	CHECK(a->h.len == b->h.len && memcmp(a->h.data, b->h.data, a->h.len) == 0);
	CHECK(a->c.len == b->c.len && memcmp(a->c.data, b->c.data, a->c.len) == 0);
}

static void out_free(out_t *o)
{
	free(o->err);
	ck_sbuf_free(&o->h);
	ck_sbuf_free(&o->c);
}

static void fuzz_crd(const uint8_t *data, size_t size)
{
	char *err = NULL, *serr = NULL;
	gen_crd_t *crd = gen_crd_load(FUZZ_FILE, (const char *)data, size, false, &err);
	CHECK((crd == NULL) != (err == NULL));
	gen_crd_t *scrd = gen_crd_load(FUZZ_FILE, (const char *)data, size, true, &serr);
	CHECK((scrd == NULL) != (serr == NULL));
	if (crd == NULL) {
		check_err(err);
		CHECK(scrd == NULL); /* strict refuses what lenient refuses */
	}
	if (serr != NULL)
		check_err(serr);
	if (crd != NULL) {
		check_crd(crd);
		if (crd->nnotes > 0) {
			CHECK(scrd == NULL);
			CHECK(ends_with(serr, strlen(serr), "(refused by --strict)"));
		} else {
			CHECK(scrd != NULL && scrd->nnotes == 0);
		}
		for (size_t i = 0; i < crd->nversions; i++) {
			out_t a, b;
			emit(crd, i, &a, true);
			emit(crd, i, &b, false); /* determinism on the same model */
			same_out(&a, &b);
			out_free(&b);
			if (scrd != NULL) { /* and on a model loaded again */
				CHECK(scrd->nversions == crd->nversions);
				emit(scrd, i, &b, false);
				same_out(&a, &b);
				out_free(&b);
			}
			out_free(&a);
		}
	}
	gen_crd_free(crd);
	gen_crd_free(scrd);
	free(err);
	free(serr);
}

/* ------------------------------------------------------------ patterns */

static void fuzz_pattern(const uint8_t *data, size_t size)
{
	char *src = ck_xstrndup((const char *)data, size); /* up to a NUL */
	char *err = NULL;
	char *ere = gen_pattern_ere(src, &err);
	CHECK((ere == NULL) != (err == NULL));
	if (ere == NULL) {
		CHECK(touch(err) > 0);
	} else {
		touch(ere);
		/* The same translation again (no hidden state). */
		char *err2 = NULL, *ere2 = gen_pattern_ere(src, &err2);
		CHECK(ere2 != NULL && err2 == NULL && strcmp(ere, ere2) == 0);
		free(ere2);
		/* Matched as generated validation matches (in a UTF-8 locale), the
		 * source itself too: not always valid UTF-8. */
		ck_gen_pattern_t p = {.source = src, .ere = ere};
		if (ck_gen_pattern_match(&p, "") >= 0)
			fuzz_gen_sink += (unsigned)ck_gen_pattern_match(&p, src);
		ck_gen_pattern_release(&p);
		/* gen_pattern_name() knows only sources that translate. */
		const char *name = gen_pattern_name(src);
		if (name)
			touch(name);
	}
	free(ere);
	free(err);
	free(src);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t m = strlen(PATTERN_MARK);
	if (size >= m && memcmp(data, PATTERN_MARK, m) == 0)
		fuzz_pattern(data + m, size - m);
	else
		fuzz_crd(data, size);
	return 0;
}
