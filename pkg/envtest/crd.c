/*
 * crd: installing CustomResourceDefinitions from files and folders, and waiting
 * until each is Established and its resource served.
 *
 * Documents are split on "---" lines as kubectl (apimachinery's YAML reader) splits
 * them, and each is sent as it is written, by server-side apply
 * (application/apply-patch+yaml): the API server converts the YAML itself, so a
 * plain scalar means here what it means to kubectl. libyaml reads only what envtest
 * needs to know: kind, apiVersion, the name, and the group, plural, scope and a
 * served version to check that the resource is served.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include <ckube/base.h>
#include <ckube/json.h>

#include "pkg/envtest/envtest_internal.h"

static const char *const crd_fields[] = {"status.conditions"};
static const ck_type_t t_crd = {.group = "apiextensions.k8s.io",
                                .version = "v1",
                                .kind = "CustomResourceDefinition",
                                .resource = "customresourcedefinitions",
                                .fields = crd_fields,
                                .nfields = 1};

/* One CRD read from a file: where it came from and what envtest checks. */
typedef struct crd {
	char *where; /* "<file>: document N (line L)" */
	char *text;  /* the document, as written */
	char *name, *group, *plural, *version;
	bool namespaced;
	ck_type_t type; /* its custom resource, to see it served */
} crd_t;

/* ck_envtest_crds_t of envtest_internal.h. */
typedef struct ck_envtest_crds crd_list_t;
struct ck_envtest_crds {
	crd_t *v;
	size_t n, cap;
};

void ck_envtest_i_crds_free(crd_list_t *l)
{
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->n; i++) {
		crd_t *c = &l->v[i];
		free(c->where);
		free(c->text);
		free(c->name);
		free(c->group);
		free(c->plural);
		free(c->version);
	}
	free(l->v);
	free(l);
}

/* The value of key in mapping m, or NULL. */
static yaml_node_t *map_get(yaml_document_t *d, yaml_node_t *m, const char *key)
{
	if (m == NULL || m->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(d, p->key);
		if (k != NULL && k->type == YAML_SCALAR_NODE &&
		    strcmp((const char *)k->data.scalar.value, key) == 0)
			return yaml_document_get_node(d, p->value);
	}
	return NULL;
}

/* The scalar at a path of keys (NULL-terminated), or NULL. */
static const char *scalar_at(yaml_document_t *d, yaml_node_t *n, const char *const *path)
{
	for (; *path != NULL && n != NULL; path++)
		n = map_get(d, n, *path);
	return n != NULL && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The name of the first version with served: true, or NULL. */
static const char *served_version(yaml_document_t *d, yaml_node_t *root)
{
	yaml_node_t *vs = map_get(d, map_get(d, root, "spec"), "versions");
	if (vs == NULL || vs->type != YAML_SEQUENCE_NODE)
		return NULL;
	for (yaml_node_item_t *it = vs->data.sequence.items.start; it < vs->data.sequence.items.top;
	     it++) {
		yaml_node_t *v = yaml_document_get_node(d, *it);
		const char *served = scalar_at(d, v, (const char *[]){"served", NULL});
		const char *name = scalar_at(d, v, (const char *[]){"name", NULL});
		if (served != NULL && strcmp(served, "true") == 0 && name != NULL)
			return name;
	}
	return NULL;
}

/*
 * Reads one document (text, starting at line `line` of file) into l, or skips it
 * when empty. 0, or -1 with *err naming the file, the document and what is wrong.
 */
static int read_doc(const char *file, int docno, int line, const char *text, size_t len,
                    crd_list_t *l, char **err)
{
	yaml_parser_t p;
	yaml_document_t d;
	int result = -1;
	bool loaded = false;
	char *where = NULL;
	yaml_parser_initialize(&p);
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	if (!yaml_parser_load(&p, &d)) {
		ck_err_set(err, "envtest: %s: line %zu: %s", file,
		           (size_t)line + p.problem_mark.line, p.problem ? p.problem : "not YAML");
		goto out;
	}
	loaded = true;
	yaml_node_t *root = yaml_document_get_root_node(&d);
	if (root == NULL) { /* only comments or blank lines */
		result = 0;
		goto out;
	}
	where = ck_xasprintf("%s: document %d (line %d)", file, docno,
	                     line + (int)root->start_mark.line);
	const char *kind = scalar_at(&d, root, (const char *[]){"kind", NULL});
	const char *av = scalar_at(&d, root, (const char *[]){"apiVersion", NULL});
	const char *name = scalar_at(&d, root, (const char *[]){"metadata", "name", NULL});
	const char *group = scalar_at(&d, root, (const char *[]){"spec", "group", NULL});
	const char *plural = scalar_at(&d, root, (const char *[]){"spec", "names", "plural", NULL});
	const char *scope = scalar_at(&d, root, (const char *[]){"spec", "scope", NULL});
	const char *version = served_version(&d, root);
	if (kind == NULL || strcmp(kind, "CustomResourceDefinition") != 0 || av == NULL ||
	    strcmp(av, "apiextensions.k8s.io/v1") != 0) {
		ck_err_set(err,
		           "envtest: %s: %s%s%s is not an apiextensions.k8s.io/v1 "
		           "CustomResourceDefinition",
		           where, av ? av : "(no apiVersion)", kind ? " " : "", kind ? kind : "");
		goto out;
	}
	if (name == NULL || group == NULL || plural == NULL || version == NULL) {
		ck_err_set(err, "envtest: %s: CustomResourceDefinition %s has no %s", where,
		           name ? name : "(unnamed)",
		           name == NULL     ? "metadata.name"
		           : group == NULL  ? "spec.group"
		           : plural == NULL ? "spec.names.plural"
		                            : "served version (spec.versions[].served: true)");
		goto out;
	}
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 4;
		l->v = ck_xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	crd_t *c = &l->v[l->n++];
	*c = (crd_t){.where = where,
	             .text = ck_xstrndup(text, len),
	             .name = ck_xstrdup(name),
	             .group = ck_xstrdup(group),
	             .plural = ck_xstrdup(plural),
	             .version = ck_xstrdup(version),
	             .namespaced = scope == NULL || strcmp(scope, "Cluster") != 0};
	where = NULL;
	result = 0;
out:
	if (loaded)
		yaml_document_delete(&d);
	yaml_parser_delete(&p);
	free(where);
	return result;
}

/* Whether the line at p (up to '\n' or the end) is a "---" document separator:
 * "---" then nothing but blanks or a comment, as apimachinery's reader decides. */
static bool separator(const char *p, const char *end)
{
	if (end - p < 3 || strncmp(p, "---", 3) != 0)
		return false;
	for (p += 3; p < end && *p != '\n'; p++) {
		if (*p == '#')
			return true;
		if (*p != ' ' && *p != '\t' && *p != '\r')
			return false;
	}
	return true;
}

/* Reads every document of file into l. 0, or -1 with *err. */
static int read_file(const char *file, crd_list_t *l, char **err)
{
	char *data = NULL;
	size_t len = 0;
	if (ck_file_read_all(file, &data, &len, err) != 0)
		return ck_err_wrap(err, "envtest: CRD file");
	size_t before = l->n;
	int rc = 0, docno = 1, line = 1, start_line = 1;
	const char *end = data + len, *doc = data;
	for (const char *p = data;;) {
		bool last = p == end, sep = !last && separator(p, end);
		if (last || sep) {
			size_t had = l->n;
			rc = read_doc(file, docno, start_line, doc, (size_t)(p - doc), l, err);
			docno += l->n > had; /* empty documents are not counted */
			if (rc != 0 || last)
				break;
		}
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		p = nl ? nl + 1 : end;
		line++;
		if (sep) { /* the next document starts after the separator's line */
			doc = p;
			start_line = line;
		}
	}
	if (rc == 0 && l->n == before)
		rc = ck_err_set(err, "envtest: %s: no CustomResourceDefinition in it", file);
	free(data);
	return rc;
}

static int yaml_name(const struct dirent *de)
{
	const char *dot = strrchr(de->d_name, '.');
	return de->d_name[0] != '.' && dot != NULL &&
	       (strcmp(dot, ".yaml") == 0 || strcmp(dot, ".yml") == 0 || strcmp(dot, ".json") == 0);
}

/* Reads a file, or a folder's *.yaml, *.yml and *.json files in name order. */
static int read_path(const char *path, crd_list_t *l, char **err)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return ck_err_set(err, "envtest: CRD path %s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return read_file(path, l, err);
	struct dirent **names = NULL;
	int n = scandir(path, &names, yaml_name, alphasort);
	if (n < 0)
		return ck_err_set(err, "envtest: CRD folder %s: %s", path, strerror(errno));
	int rc = n == 0
	             ? ck_err_set(err, "envtest: CRD folder %s: no .yaml, .yml or .json file", path)
	             : 0;
	for (int i = 0; i < n; i++) {
		if (rc == 0) {
			char *f = ck_xasprintf("%s/%s", path, names[i]->d_name);
			rc = read_file(f, l, err);
			free(f);
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

static const char *res_msg(const ck_result_t *r)
{
	if (r->status.message != NULL && r->status.message[0] != '\0')
		return r->status.message;
	return r->error ? r->error : "failed";
}

/* The condition type's status, reason and message in conds (a JSON array). */
static bool find_cond(const ck_json_t *conds, const char *type, const char **status,
                      const char **msg)
{
	for (size_t i = 0; i < ck_json_len(conds); i++) {
		const ck_json_t *c = ck_json_at(conds, i);
		const char *t = ck_json_str(ck_json_member(c, "type", 4));
		if (t != NULL && strcmp(t, type) == 0) {
			*status = ck_json_str(ck_json_member(c, "status", 6));
			*msg = ck_json_str(ck_json_member(c, "message", 7));
			return true;
		}
	}
	return false;
}

/* One look at c: 1 Established and served, 0 not yet (*why says what), -1 never
 * (*err). */
static int check_crd(ck_client_t *cl, crd_t *c, char **why, char **err)
{
	ck_result_t r = {0};
	ck_json_doc_t *doc = NULL;
	int result = 0;
	free(*why);
	*why = NULL;
	if (ck_client_get_sync(cl, &t_crd, NULL, c->name, &r) != 0 || r.obj == NULL) {
		*why = ck_xasprintf("cannot read it: %s", res_msg(&r));
		goto out;
	}
	doc = ck_json_parse_field(r.obj, 0, NULL);
	const ck_json_t *conds = doc ? ck_json_root(doc) : NULL;
	const char *st = NULL, *msg = NULL;
	if (conds != NULL && find_cond(conds, "NamesAccepted", &st, &msg) && st != NULL &&
	    strcmp(st, "False") == 0) {
		result = ck_err_set(err,
		                    "envtest: %s: CustomResourceDefinition %s is not Established: "
		                    "NamesAccepted is False: %s",
		                    c->where, c->name, msg ? msg : "(no message)");
		goto out;
	}
	if (conds == NULL || !find_cond(conds, "Established", &st, &msg) || st == NULL ||
	    strcmp(st, "True") != 0) {
		*why = st ? ck_xasprintf("Established is %s: %s", st, msg ? msg : "(no message)")
		          : ck_xstrdup("no Established condition yet");
		goto out;
	}
	/* Established, but the handler may lag a moment behind: one LIST proves it. */
	ck_result_clear(&r);
	ck_req_spec_t list = {.method = "GET",
	                      .type = &c->type,
	                      .query = "limit=1",
	                      .no_decode = true,
	                      .timeout_ms = 5000};
	if (ck_client_do_sync(cl, &list, &r) != 0) {
		*why = ck_xasprintf("Established, but listing %s.%s answers: %s", c->plural,
		                    c->group, res_msg(&r));
		goto out;
	}
	result = 1;
out:
	ck_json_doc_free(doc);
	ck_result_clear(&r);
	return result;
}

crd_list_t *ck_envtest_i_crds_read(const char *const *paths, size_t n, char **err)
{
	crd_list_t *l = ck_xcalloc(1, sizeof(*l));
	for (size_t i = 0; i < n; i++) {
		if (read_path(paths[i], l, err) != 0) {
			ck_envtest_i_crds_free(l);
			return NULL;
		}
	}
	for (size_t i = 0; i < l->n; i++) {
		crd_t *c = &l->v[i];
		c->type = (ck_type_t){.group = c->group,
		                      .version = c->version,
		                      .resource = c->plural,
		                      .namespaced = c->namespaced};
	}
	return l;
}

size_t ck_envtest_i_crds_len(const crd_list_t *l)
{
	return l->n;
}

const char *ck_envtest_i_crds_at(const crd_list_t *l, size_t i, const char **where)
{
	*where = l->v[i].where;
	return l->v[i].name;
}

int ck_envtest_i_crds_install(ck_client_t *cl, crd_list_t *l, uint32_t timeout_ms, char **err)
{
	char *why = NULL;
	int result = -1;
	ck_write_opts_t wo = {.field_manager = "ckube-envtest", .force = true};
	for (size_t i = 0; i < l->n; i++) {
		crd_t *c = &l->v[i];
		ck_result_t r = {0};
		int rc = ck_client_patch_sync(cl, &t_crd, NULL, c->name, CK_PATCH_APPLY, c->text,
		                              &wo, &r);
		if (rc != 0)
			ck_err_set(err, "envtest: %s: CustomResourceDefinition %s: %s", c->where,
			           c->name, res_msg(&r));
		ck_result_clear(&r);
		if (rc != 0)
			goto out;
	}
	/* All were sent before the first wait: the API server establishes them together. */
	uint64_t deadline = ck_envtest_i_now_ms() + timeout_ms;
	for (size_t i = 0; i < l->n; i++) {
		int rc;
		while ((rc = check_crd(cl, &l->v[i], &why, err)) == 0) {
			if (ck_envtest_i_now_ms() >= deadline) {
				ck_err_set(
				    err,
				    "envtest: %s: CustomResourceDefinition %s is not Established "
				    "after %u ms: %s",
				    l->v[i].where, l->v[i].name, (unsigned)timeout_ms, why);
				goto out;
			}
			ck_envtest_i_sleep_ms(20);
		}
		if (rc < 0)
			goto out;
	}
	result = 0;
out:
	free(why);
	return result;
}
