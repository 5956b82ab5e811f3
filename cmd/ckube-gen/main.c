/*
 * ckube-gen: typed C for a custom resource, from its CRD (docs/ckube-gen.md).
 *
 *   ckube-gen [-o DIR] [--version V] [--prefix P] [--base NAME] [--strict] [--check] CRD.yaml
 *
 * For each version of the CRD (or only V) writes DIR/<version>/<base>.h and .c:
 * the ck_type_t descriptor, accessors, structs, encoders and validation. --check
 * writes nothing and fails when the files differ from what would be written (the
 * verify step of `make test`).
 */
#include "cmd/ckube-gen/gen.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A CRD larger than this is not a CRD (the API server's limit on an object is 3 MiB). */
#define MAX_INPUT (16u << 20)

static void usage(FILE *f)
{
	fputs("usage: ckube-gen [-o DIR] [--version V] [--prefix P] [--base NAME] [--strict] "
	      "[--check] CRD.yaml\n"
	      "  -o DIR         where to write <version>/<base>.h and .c (default .)\n"
	      "  --version V    only this version of the CRD (default: all)\n"
	      "  --prefix P     C prefix of every name (default: the kind in snake case, with\n"
	      "                 _<version> added when several versions are written)\n"
	      "  --base NAME    file name without .h/.c (default: the kind in snake case)\n"
	      "  --strict       refuse what the generated validation cannot check (CEL, oneOf)\n"
	      "  --check        write nothing; exit 1 if the files are missing or differ\n",
	      f);
}

static char *read_file(const char *path, size_t *len, char **err)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		ck_err_set(err, "%s: %s", path, strerror(errno));
		return NULL;
	}
	ck_sbuf_t b = CK_SBUF_INIT;
	char chunk[65536];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (b.len + n > MAX_INPUT) {
			ck_err_set(err, "%s: larger than %u MiB", path, MAX_INPUT >> 20);
			fclose(f);
			ck_sbuf_free(&b);
			return NULL;
		}
		ck_sbuf_append(&b, chunk, n);
	}
	bool bad = ferror(f);
	fclose(f);
	if (bad) {
		ck_sbuf_free(&b);
		ck_err_set(err, "%s: read error", path);
		return NULL;
	}
	*len = b.len;
	ck_sbuf_cstr(&b);
	return b.data ? ck_sbuf_steal(&b) : ck_xstrdup("");
}

/* mkdir -p: creates dir and its parents. Returns 0 or -1 with errno. */
static int mkdir_p(const char *dir)
{
	char *p = ck_xstrdup(dir);
	int rc = 0;
	for (char *s = p + 1; rc == 0 && *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			rc = -1;
		*s = '/';
	}
	if (rc == 0 && mkdir(p, 0755) != 0 && errno != EEXIST)
		rc = -1;
	free(p);
	return rc;
}

/* Writes or checks one file. Returns 0, 1 when --check found it stale, -1 on error. */
static int put_file(const char *path, const ck_sbuf_t *text, bool check)
{
	size_t have_len = 0;
	char *ign = NULL;
	char *have = read_file(path, &have_len, &ign);
	free(ign);
	bool same =
	    have != NULL && have_len == text->len && memcmp(have, text->data, text->len) == 0;
	free(have);
	if (check) {
		if (!same)
			fprintf(stderr, "ckube-gen: %s is %s: regenerate it (make generate)\n",
			        path, have ? "stale" : "missing");
		return same ? 0 : 1;
	}
	if (same)
		return 0; /* untouched: make sees no change */
	char *tmp = ck_xasprintf("%s.tmp", path);
	FILE *f = fopen(tmp, "wb");
	int rc = -1;
	if (f == NULL || fwrite(text->data, 1, text->len, f) != text->len) {
		fprintf(stderr, "ckube-gen: %s: %s\n", tmp, strerror(errno));
		if (f)
			fclose(f);
	} else if (fclose(f) != 0 || rename(tmp, path) != 0) {
		fprintf(stderr, "ckube-gen: %s: %s\n", path, strerror(errno));
	} else {
		rc = 0;
	}
	free(tmp);
	return rc;
}

int main(int argc, char **argv)
{
	const char *out = ".", *only = NULL;
	gen_opts_t o = {0};
	bool strict = false, check = false;
	static const struct option longopts[] = {{"version", required_argument, NULL, 'V'},
	                                         {"prefix", required_argument, NULL, 'p'},
	                                         {"base", required_argument, NULL, 'b'},
	                                         {"strict", no_argument, NULL, 's'},
	                                         {"check", no_argument, NULL, 'c'},
	                                         {"help", no_argument, NULL, 'h'},
	                                         {NULL, 0, NULL, 0}};
	int ch;
	while ((ch = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'o':
			out = optarg;
			break;
		case 'V':
			only = optarg;
			break;
		case 'p':
			o.prefix = optarg;
			break;
		case 'b':
			o.base = optarg;
			break;
		case 's':
			strict = true;
			break;
		case 'c':
			check = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	const char *file = argv[optind];
	char *err = NULL;
	size_t len = 0;
	char *buf = read_file(file, &len, &err);
	gen_crd_t *crd = buf ? gen_crd_load(file, buf, len, strict, &err) : NULL;
	free(buf);
	if (crd == NULL) {
		fprintf(stderr, "ckube-gen: %s\n", err);
		free(err);
		return 1;
	}
	for (size_t i = 0; i < crd->nnotes && !check; i++)
		fprintf(stderr, "ckube-gen: note: %s\n", crd->notes[i]);
	int rc = 0;
	size_t done = 0;
	for (size_t i = 0; i < crd->nversions && rc == 0; i++) {
		const gen_version_t *v = &crd->versions[i];
		if (only && strcmp(only, v->name) != 0)
			continue;
		gen_opts_t vo = o;
		char *prefix = NULL;
		if (vo.prefix == NULL && only == NULL && crd->nversions > 1) {
			char *k = gen_snake(crd->kind), *vs = gen_snake(v->name);
			prefix = ck_xasprintf("%s_%s", k, vs);
			free(k);
			free(vs);
			vo.prefix = prefix;
		}
		ck_sbuf_t h = CK_SBUF_INIT, c = CK_SBUF_INIT;
		/* The version names a directory under -o: one component, not "." or "..". */
		if (strchr(v->name, '/') != NULL || strcmp(v->name, ".") == 0 ||
		    strcmp(v->name, "..") == 0) {
			fprintf(stderr,
			        "ckube-gen: %s:%d: spec.versions[%zu]: version \"%s\" cannot "
			        "name a directory\n",
			        file, v->line, i, v->name);
			rc = 1;
		} else if (gen_emit(crd, v, &vo, &h, &c, &err) != 0) {
			fprintf(stderr, "ckube-gen: %s\n", err);
			free(err);
			err = NULL;
			rc = 1;
		} else {
			char *base = vo.base ? ck_xstrdup(vo.base) : gen_snake(crd->kind);
			char *dir = ck_xasprintf("%s/%s", out, v->name);
			char *hp = ck_xasprintf("%s/%s.h", dir, base),
			     *cp = ck_xasprintf("%s/%s.c", dir, base);
			if (!check && mkdir_p(dir) != 0) {
				fprintf(stderr, "ckube-gen: %s: %s\n", dir, strerror(errno));
				rc = 1;
			}
			if (rc == 0) {
				int a = put_file(hp, &h, check), b = put_file(cp, &c, check);
				rc = a < 0 || b < 0 ? 1 : (a || b);
			}
			free(base);
			free(dir);
			free(hp);
			free(cp);
		}
		ck_sbuf_free(&h);
		ck_sbuf_free(&c);
		free(prefix);
		done++;
	}
	if (rc == 0 && done == 0) {
		fprintf(stderr, "ckube-gen: %s: no version \"%s\"\n", file, only ? only : "");
		rc = 1;
	}
	gen_crd_free(crd);
	return rc;
}
