/*
 * config_kubeconfig: kubeconfig files: reading YAML nodes, parsing and merging
 * files into one set, and resolving the chosen context (its cluster, user and exec
 * settings) into a ck_config_t. Separate because it is the only code that knows
 * YAML and the kubeconfig schema, and the part a fuzzer exercises; nothing it
 * builds points back into YAML once a config is resolved.
 *
 * Design note. Loading happens in two steps. First every kubeconfig file is parsed
 * with libyaml's document API and its named clusters, users and contexts are
 * collected into one set in which the first file that names an entry wins (the
 * YAML documents stay alive so that entries are just node pointers). Then the
 * chosen context is resolved into a flat ck_config_t: server, TLS settings, static
 * credentials read into memory, and the description of what can change over time
 * (a token file, an exec plugin). Nothing in a ck_config_t points back to YAML.
 */
#include "pkg/clientcmd/config_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Limits when copying a cluster extension into KUBERNETES_EXEC_INFO: nesting, and
 * size, since aliases let a small file expand exponentially (and the kernel takes
 * no environment string over 128 KiB). */
#define YAML_JSON_DEPTH_MAX 32
#define YAML_JSON_LEN_MAX   (64 * 1024)
#define EXEC_API_V1         "client.authentication.k8s.io/v1"
#define EXEC_API_V1BETA1    "client.authentication.k8s.io/v1beta1"
#define EXEC_EXTENSION_NAME "client.authentication.k8s.io/exec"

/* Returns a new string: the folder of path ("." when it has none). */
static char *path_dir(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;
	if (slash == NULL)
		return ck_xstrdup(".");
	if (slash == path)
		return ck_xstrdup("/");
	return ck_xstrndup(path, (size_t)(slash - path));
}

/* Returns a new string: p resolved against dir unless it is absolute. */
static char *path_resolve(const char *dir, const char *p)
{
	if (p[0] == '/' || dir == NULL)
		return ck_xstrdup(p);
	return ck_xasprintf("%s/%s", dir, p);
}

static int b64_value(unsigned char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+')
		return 62;
	if (ch == '/')
		return 63;
	return -1;
}

/*
 * Decodes standard base64, ignoring white space (folded YAML scalars) and accepting
 * missing padding. Returns 0 with a new NUL-terminated buffer in *out, or -1.
 */
static int b64_decode(const char *in, char **out, size_t *out_len)
{
	size_t n = strlen(in);
	char *buf = ck_xmalloc(n / 4 * 3 + 4);
	size_t len = 0, quad = 0, pad = 0;
	uint32_t acc = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)in[i];
		if (ck_config_i_is_space((char)ch))
			continue;
		if (ch == '=') {
			pad++;
			continue;
		}
		int v = b64_value(ch);
		if (v < 0 || pad > 0)
			goto bad;
		acc = acc << 6 | (uint32_t)v;
		if (++quad == 4) {
			buf[len++] = (char)(acc >> 16);
			buf[len++] = (char)(acc >> 8);
			buf[len++] = (char)acc;
			quad = 0;
			acc = 0;
		}
	}
	if (quad == 1 || pad > 2 || (pad > 0 && quad + pad != 4))
		goto bad;
	if (quad == 2) {
		buf[len++] = (char)(acc >> 4);
	} else if (quad == 3) {
		buf[len++] = (char)(acc >> 10);
		buf[len++] = (char)(acc >> 2);
	}
	buf[len] = '\0';
	*out = buf;
	*out_len = len;
	return 0;
bad:
	ck_secret_free(buf, n / 4 * 3 + 4);
	return -1;
}

/* RFC 1123 label, as Kubernetes requires of namespace names. */
static bool dns_label_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
		if (!alnum && (ch != '-' || i == 0 || i == n - 1))
			return false;
	}
	return true;
}

/* client-go accepts only these proxy schemes. */
static bool proxy_url_ok(const char *u)
{
	return strncmp(u, "http://", 7) == 0 || strncmp(u, "https://", 8) == 0 ||
	       strncmp(u, "socks5://", 9) == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Reading YAML nodes                                                                         */

/* Where a node is, for messages about its type. */
static const char *node_at(const yaml_node_t *n, char buf[48])
{
	snprintf(buf, 48, " (line %zu, column %zu)", n->start_mark.line + 1,
	         n->start_mark.column + 1);
	return buf;
}

static bool node_is_null(const yaml_node_t *n)
{
	if (n == NULL)
		return true;
	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *v = (const char *)n->data.scalar.value;
	return *v == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
	       strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

/* Returns the value of key in mapping m, or NULL (absent, or m is not a mapping). */
static yaml_node_t *ymap_get(yaml_document_t *d, yaml_node_t *m, const char *key)
{
	if (m == NULL || m->type != YAML_MAPPING_NODE)
		return NULL;
	size_t klen = strlen(key);
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(d, p->key);
		if (k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == klen &&
		    memcmp(k->data.scalar.value, key, klen) == 0)
			return yaml_document_get_node(d, p->value);
	}
	return NULL;
}

/*
 * Reads a string field: *out is borrowed from the document, NULL when the field is
 * absent or null. what names the field for messages. Returns 0 or -1 with *err.
 */
static int ystr(yaml_document_t *d, yaml_node_t *m, const char *key, const char **out,
                const char *what, char **err)
{
	char at[48];
	*out = NULL;
	yaml_node_t *n = ymap_get(d, m, key);
	if (node_is_null(n))
		return 0;
	if (n->type != YAML_SCALAR_NODE)
		return ck_err_set(err, "%s%s: expected a string%s", what, key, node_at(n, at));
	if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
		return ck_err_set(err, "%s%s: contains a NUL byte%s", what, key, node_at(n, at));
	*out = (const char *)n->data.scalar.value;
	return 0;
}

/* Like ystr() but an empty string counts as absent (as Go's zero value does). */
static int ystr_ne(yaml_document_t *d, yaml_node_t *m, const char *key, const char **out,
                   const char *what, char **err)
{
	if (ystr(d, m, key, out, what, err) < 0)
		return -1;
	if (*out && **out == '\0')
		*out = NULL;
	return 0;
}

static int ybool(yaml_document_t *d, yaml_node_t *m, const char *key, bool *out, const char *what,
                 char **err)
{
	static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes",
	                                  "YES",  "on",   "On",   "ON"};
	static const char *const no[] = {"false", "False", "FALSE", "no", "No",
	                                 "NO",    "off",   "Off",   "OFF"};
	char at[48];
	*out = false;
	yaml_node_t *n = ymap_get(d, m, key);
	if (node_is_null(n))
		return 0;
	if (n->type == YAML_SCALAR_NODE) {
		const char *v = (const char *)n->data.scalar.value;
		for (size_t i = 0; i < CK_ARRAY_LEN(yes); i++) {
			if (strcmp(v, yes[i]) == 0) {
				*out = true;
				return 0;
			}
			if (strcmp(v, no[i]) == 0)
				return 0;
		}
	}
	return ck_err_set(err, "%s%s: expected true or false%s", what, key, node_at(n, at));
}

/* A mapping field: *out NULL when absent or null. */
static int ymap(yaml_document_t *d, yaml_node_t *m, const char *key, yaml_node_t **out,
                const char *what, char **err)
{
	char at[48];
	yaml_node_t *n = ymap_get(d, m, key);
	*out = NULL;
	if (node_is_null(n))
		return 0;
	if (n->type != YAML_MAPPING_NODE)
		return ck_err_set(err, "%s%s: expected a mapping%s", what, key, node_at(n, at));
	*out = n;
	return 0;
}

/* A sequence field: *out NULL when absent or null. */
static int yseq(yaml_document_t *d, yaml_node_t *m, const char *key, yaml_node_t **out,
                const char *what, char **err)
{
	char at[48];
	yaml_node_t *n = ymap_get(d, m, key);
	*out = NULL;
	if (node_is_null(n))
		return 0;
	if (n->type != YAML_SEQUENCE_NODE)
		return ck_err_set(err, "%s%s: expected a list%s", what, key, node_at(n, at));
	*out = n;
	return 0;
}

static size_t yseq_len(const yaml_node_t *s)
{
	return s ? (size_t)(s->data.sequence.items.top - s->data.sequence.items.start) : 0;
}

static yaml_node_t *yseq_at(yaml_document_t *d, yaml_node_t *s, size_t i)
{
	return yaml_document_get_node(d, s->data.sequence.items.start[i]);
}

static bool json_number_like(const char *s)
{
	const char *p = s;
	if (*p == '-')
		p++;
	if (*p == '0') {
		p++;
	} else if (*p >= '1' && *p <= '9') {
		while (*p >= '0' && *p <= '9')
			p++;
	} else {
		return false;
	}
	if (*p == '.') {
		p++;
		if (!(*p >= '0' && *p <= '9'))
			return false;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!(*p >= '0' && *p <= '9'))
			return false;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return *p == '\0';
}

/*
 * Appends node n as JSON (for the exec extension passed to the plugin). Plain
 * scalars that read as booleans, null or numbers stay untyped; the rest are strings.
 * The depth limit also stops alias cycles, which libyaml allows; the output stops
 * once b is longer than max_len, which bounds the work for aliases that expand
 * exponentially ("billion laughs": every node visited appends at least one byte).
 */
static int yaml_to_json(yaml_document_t *d, yaml_node_t *n, ck_sbuf_t *b, size_t max_len, int depth,
                        char **err)
{
	if (depth > YAML_JSON_DEPTH_MAX)
		return ck_err_set(err, "nested too deeply");
	if (b->len > max_len)
		return ck_err_set(err, "larger than %d bytes as JSON", YAML_JSON_LEN_MAX);
	switch (n->type) {
	case YAML_SCALAR_NODE: {
		const char *v = (const char *)n->data.scalar.value;
		if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
			if (node_is_null(n)) {
				ck_sbuf_puts(b, "null");
				return 0;
			}
			if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0 ||
			    json_number_like(v)) {
				ck_sbuf_puts(b, v);
				return 0;
			}
		}
		ck_sbuf_put_json_str(b, v);
		return 0;
	}
	case YAML_SEQUENCE_NODE:
		ck_sbuf_putc(b, '[');
		for (size_t i = 0; i < yseq_len(n); i++) {
			if (i)
				ck_sbuf_putc(b, ',');
			if (yaml_to_json(d, yseq_at(d, n, i), b, max_len, depth + 1, err) < 0)
				return -1;
		}
		ck_sbuf_putc(b, ']');
		return 0;
	case YAML_MAPPING_NODE:
		ck_sbuf_putc(b, '{');
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
		     p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(d, p->key);
			if (k == NULL || k->type != YAML_SCALAR_NODE)
				return ck_err_set(err, "a mapping key is not a string");
			if (p != n->data.mapping.pairs.start)
				ck_sbuf_putc(b, ',');
			ck_sbuf_put_json_str(b, (const char *)k->data.scalar.value);
			ck_sbuf_putc(b, ':');
			if (yaml_to_json(d, yaml_document_get_node(d, p->value), b, max_len,
			                 depth + 1, err) < 0)
				return -1;
		}
		ck_sbuf_putc(b, '}');
		return 0;
	default:
		ck_sbuf_puts(b, "null");
		return 0;
	}
}

/* ------------------------------------------------------------------------------------------ */
/* Parsing and merging kubeconfig files                                                       */

void ck_config_i_kubeconfig_set_free(kubeconfig_set_t *s)
{
	for (size_t i = 0; i < s->nfiles; i++) {
		yaml_document_delete(&s->files[i]->doc);
		free(s->files[i]->path);
		free(s->files[i]->dir);
		free(s->files[i]);
	}
	free(s->files);
	free(s->clusters.v);
	free(s->users.v);
	free(s->contexts.v);
	memset(s, 0, sizeof(*s));
}

bool ck_config_i_kubeconfig_set_empty(const kubeconfig_set_t *s)
{
	return s->current == NULL && s->clusters.n == 0 && s->users.n == 0 && s->contexts.n == 0;
}

static kubeconfig_entry_t *kubeconfig_list_find(kubeconfig_list_t *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].name, name) == 0)
			return &l->v[i];
	return NULL;
}

/*
 * Collects the named entries of one top-level list ("clusters" with bodies under
 * "cluster", ...). A name already set by an earlier file is skipped; a name given
 * twice in one file is an error.
 */
static int kubeconfig_collect(kubeconfig_file_t *f, yaml_node_t *root, const char *list,
                              const char *body_key, kubeconfig_list_t *into, char **err)
{
	yaml_document_t *d = &f->doc;
	yaml_node_t *seq;
	char at[48];
	if (yseq(d, root, list, &seq, "", err) < 0)
		return -1;
	for (size_t i = 0; i < yseq_len(seq); i++) {
		yaml_node_t *item = yseq_at(d, seq, i);
		if (item == NULL || item->type != YAML_MAPPING_NODE)
			return ck_err_set(err, "%s[%zu]: expected a mapping%s", list, i,
			                  item ? node_at(item, at) : "");
		char what[64];
		snprintf(what, sizeof(what), "%s[%zu]: ", list, i);
		const char *name;
		yaml_node_t *body;
		if (ystr(d, item, "name", &name, what, err) < 0 ||
		    ymap(d, item, body_key, &body, what, err) < 0)
			return -1;
		if (name == NULL || *name == '\0')
			return ck_err_set(err, "%s[%zu]: name is missing%s", list, i,
			                  node_at(item, at));
		kubeconfig_entry_t *old = kubeconfig_list_find(into, name);
		if (old && old->file == f)
			return ck_err_set(err, "%s: duplicate name \"%s\"%s", list, name,
			                  node_at(item, at));
		if (old)
			continue;
		if (into->n == into->cap) {
			into->cap = into->cap ? into->cap * 2 : 8;
			into->v = ck_xrealloc(into->v, into->cap * sizeof(*into->v));
		}
		into->v[into->n++] = (kubeconfig_entry_t){name, body, f};
	}
	return 0;
}

/* Parses one kubeconfig text into the set. Returns 0 or -1 with *err naming the file. */
int ck_config_i_kubeconfig_set_add_text(kubeconfig_set_t *s, const char *text, size_t len,
                                        const char *path, char **err)
{
	int result = -1;
	yaml_parser_t parser;
	kubeconfig_file_t *f = ck_xcalloc(1, sizeof(*f));
	bool have_doc = false;
	char at[48];

	f->path = ck_xstrdup(path ? path : "<text>");
	f->dir = path ? path_dir(path) : NULL;
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &f->doc)) {
		if (parser.context)
			ck_err_set(err,
			           "line %zu, column %zu: %s %s (started at line %zu, column %zu)",
			           parser.problem_mark.line + 1, parser.problem_mark.column + 1,
			           parser.problem, parser.context, parser.context_mark.line + 1,
			           parser.context_mark.column + 1);
		else
			ck_err_set(err, "line %zu, column %zu: %s", parser.problem_mark.line + 1,
			           parser.problem_mark.column + 1,
			           parser.problem ? parser.problem : "malformed YAML");
		goto out;
	}
	have_doc = true;
	/* From here the set owns the file and its document. */
	s->files = ck_xrealloc(s->files, (s->nfiles + 1) * sizeof(*s->files));
	s->files[s->nfiles++] = f;

	yaml_node_t *root = yaml_document_get_root_node(&f->doc);
	if (node_is_null(root)) { /* an empty file is an empty config */
		result = 0;
		goto out;
	}
	if (root->type != YAML_MAPPING_NODE) {
		ck_err_set(err, "expected a mapping at the top level%s", node_at(root, at));
		goto out;
	}
	const char *cur;
	if (ystr_ne(&f->doc, root, "current-context", &cur, "", err) < 0)
		goto out;
	if (cur && s->current == NULL) {
		s->current = cur;
		s->current_file = f;
	}
	if (kubeconfig_collect(f, root, "clusters", "cluster", &s->clusters, err) < 0 ||
	    kubeconfig_collect(f, root, "users", "user", &s->users, err) < 0 ||
	    kubeconfig_collect(f, root, "contexts", "context", &s->contexts, err) < 0)
		goto out;
	result = 0;
out:
	if (result < 0)
		ck_err_wrap(err, "kubeconfig %s", f->path);
	if (!have_doc) {
		free(f->path);
		free(f->dir);
		free(f);
	}
	yaml_parser_delete(&parser);
	return result;
}

/* Reads and adds a file. *missing (if given) is set and 0 returned when it does not exist. */
int ck_config_i_kubeconfig_set_add_file(kubeconfig_set_t *s, const char *path, bool *missing,
                                        char **err)
{
	char *text = NULL;
	size_t len = 0;
	char *e = NULL;
	struct stat st;
	if (missing)
		*missing = false;
	if (missing && stat(path, &st) < 0 && errno == ENOENT) {
		*missing = true;
		return 0;
	}
	if (ck_file_read_all(path, &text, &len, &e) < 0) {
		/* ck_file_read_all's message already names the path. */
		ck_err_set(err, "kubeconfig %s", e);
		free(e);
		return -1;
	}
	int r = ck_config_i_kubeconfig_set_add_text(s, text, len, path, err);
	free(text);
	return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Resolving the chosen context into a ck_config_t                                              */

/*
 * Reads a "-data" field (base64) or, when absent, the file field resolved against
 * the entry's folder. -data wins over the file form. *out is NULL when neither is set.
 */
static int read_data_or_file(kubeconfig_entry_t *e, const char *file_key, const char *data_key,
                             char **out, size_t *out_len, char **err)
{
	const char *data, *file;
	*out = NULL;
	*out_len = 0;
	if (ystr_ne(&e->file->doc, e->body, data_key, &data, "", err) < 0 ||
	    ystr_ne(&e->file->doc, e->body, file_key, &file, "", err) < 0)
		return -1;
	if (data) {
		if (b64_decode(data, out, out_len) < 0)
			return ck_err_set(err, "%s: invalid base64", data_key);
		if (*out_len == 0) {
			free(*out);
			*out = NULL;
		}
		return 0;
	}
	if (file) {
		char *p = path_resolve(e->file->dir, file);
		int r = ck_file_read_bounded(p, CK_FILE_MAX_BYTES, out, out_len, err);
		free(p);
		if (r < 0)
			return ck_err_wrap(err, "%s", file_key);
	}
	return 0;
}

static int resolve_cluster(ck_config_t *c, kubeconfig_entry_t *e, yaml_node_t **exec_ext,
                           char **err)
{
	yaml_document_t *d = &e->file->doc;
	const char *server, *tsn, *proxy;
	yaml_node_t *exts;
	if (ystr_ne(d, e->body, "server", &server, "", err) < 0 ||
	    ybool(d, e->body, "insecure-skip-tls-verify", &c->insecure, "", err) < 0 ||
	    ystr_ne(d, e->body, "tls-server-name", &tsn, "", err) < 0 ||
	    ystr_ne(d, e->body, "proxy-url", &proxy, "", err) < 0 ||
	    yseq(d, e->body, "extensions", &exts, "", err) < 0)
		return -1;
	if (read_data_or_file(e, "certificate-authority", "certificate-authority-data", &c->ca_pem,
	                      &c->ca_len, err) < 0)
		return -1;
	if (c->insecure && c->ca_pem)
		return ck_err_set(err, "insecure-skip-tls-verify cannot be used together with "
		                       "certificate-authority or certificate-authority-data");
	if (proxy && !proxy_url_ok(proxy))
		return ck_err_set(err, "proxy-url \"%s\": scheme must be http, https or socks5",
		                  proxy);
	c->server = ck_xstrdup(server);
	c->tls_server_name = ck_xstrdup(tsn);
	c->proxy_url = ck_xstrdup(proxy);
	*exec_ext = NULL;
	for (size_t i = 0; i < yseq_len(exts); i++) {
		yaml_node_t *x = yseq_at(d, exts, i);
		const char *name;
		if (x == NULL || x->type != YAML_MAPPING_NODE)
			continue;
		if (ystr(d, x, "name", &name, "extensions: ", err) < 0)
			return -1;
		if (ck_config_i_str_eq(name, EXEC_EXTENSION_NAME))
			*exec_ext = ymap_get(d, x, "extension");
	}
	return 0;
}

static int resolve_exec(ck_config_t *c, kubeconfig_entry_t *e, yaml_node_t *x, char **err)
{
	yaml_document_t *d = &e->file->doc;
	ck_exec_config_t *ex = &c->exec;
	const char *api, *cmd, *hint, *mode;
	yaml_node_t *args, *env;
	if (ystr_ne(d, x, "apiVersion", &api, "exec: ", err) < 0 ||
	    ystr_ne(d, x, "command", &cmd, "exec: ", err) < 0 ||
	    ystr_ne(d, x, "installHint", &hint, "exec: ", err) < 0 ||
	    ystr_ne(d, x, "interactiveMode", &mode, "exec: ", err) < 0 ||
	    ybool(d, x, "provideClusterInfo", &ex->provide_cluster_info, "exec: ", err) < 0 ||
	    yseq(d, x, "args", &args, "exec: ", err) < 0 ||
	    yseq(d, x, "env", &env, "exec: ", err) < 0)
		return -1;
	if (cmd == NULL)
		return ck_err_set(err, "exec: command is not set");
	if (api == NULL)
		return ck_err_set(err, "exec: apiVersion is not set");
	if (strcmp(api, EXEC_API_V1) != 0 && strcmp(api, EXEC_API_V1BETA1) != 0)
		return ck_err_set(err, "exec: apiVersion \"%s\" is not supported (use %s or %s)",
		                  api, EXEC_API_V1, EXEC_API_V1BETA1);
	if (mode == NULL && strcmp(api, EXEC_API_V1) == 0)
		return ck_err_set(err, "exec: interactiveMode must be set for %s", EXEC_API_V1);
	if (mode && strcmp(mode, "Never") != 0 && strcmp(mode, "IfAvailable") != 0 &&
	    strcmp(mode, "Always") != 0)
		return ck_err_set(
		    err, "exec: interactiveMode \"%s\" is invalid (Never, IfAvailable, Always)",
		    mode);
	/* We never give the plugin a terminal: it runs under a daemon's loop. */
	if (mode && strcmp(mode, "Always") == 0)
		return ck_err_set(err, "exec: interactiveMode Always needs a terminal, and plugins "
		                       "here never get one");
	ex->api_version = ck_xstrdup(api);
	/* Like client-go: a command with a slash is a path relative to the kubeconfig's
	 * folder; a bare name is looked up in PATH. */
	ex->command = strchr(cmd, '/') ? path_resolve(e->file->dir, cmd) : ck_xstrdup(cmd);
	ex->install_hint = ck_xstrdup(hint);
	ex->interactive_mode = ck_xstrdup(mode ? mode : "IfAvailable");
	size_t na = yseq_len(args), ne = yseq_len(env);
	ex->args = ck_xcalloc(na + 1, sizeof(char *));
	for (size_t i = 0; i < na; i++) {
		yaml_node_t *a = yseq_at(d, args, i);
		char at[48];
		if (a == NULL || a->type != YAML_SCALAR_NODE ||
		    strlen((const char *)a->data.scalar.value) != a->data.scalar.length)
			return ck_err_set(err, "exec: args[%zu]: expected a string%s", i,
			                  a ? node_at(a, at) : "");
		ex->args[i] = ck_xstrdup((const char *)a->data.scalar.value);
	}
	ex->env = ck_xcalloc(ne + 1, sizeof(char *));
	for (size_t i = 0; i < ne; i++) {
		yaml_node_t *v = yseq_at(d, env, i);
		char what[48];
		const char *name, *value;
		snprintf(what, sizeof(what), "exec: env[%zu]: ", i);
		if (v == NULL || v->type != YAML_MAPPING_NODE)
			return ck_err_set(err, "%sexpected a mapping with name and value", what);
		if (ystr(d, v, "name", &name, what, err) < 0 ||
		    ystr(d, v, "value", &value, what, err) < 0)
			return -1;
		if (name == NULL || *name == '\0' || strchr(name, '='))
			return ck_err_set(err, "%sname is missing or invalid", what);
		ex->env[i] = ck_xasprintf("%s=%s", name, value ? value : "");
	}
	c->has_exec = true;
	return 0;
}

static int resolve_user(ck_config_t *c, kubeconfig_entry_t *e, char **err)
{
	yaml_document_t *d = &e->file->doc;
	const char *token, *token_file, *user, *pass, *as;
	yaml_node_t *exec, *ap, *groups;
	if (ystr_ne(d, e->body, "token", &token, "", err) < 0 ||
	    ystr_ne(d, e->body, "tokenFile", &token_file, "", err) < 0 ||
	    ystr_ne(d, e->body, "username", &user, "", err) < 0 ||
	    ystr_ne(d, e->body, "password", &pass, "", err) < 0 ||
	    ystr_ne(d, e->body, "as", &as, "", err) < 0 ||
	    yseq(d, e->body, "as-groups", &groups, "", err) < 0 ||
	    ymap(d, e->body, "exec", &exec, "", err) < 0 ||
	    ymap(d, e->body, "auth-provider", &ap, "", err) < 0)
		return -1;
	if (exec && ap)
		return ck_err_set(err, "exec and auth-provider cannot be used together");
	if (ap) {
		const char *name;
		if (ystr(d, ap, "name", &name, "auth-provider: ", err) < 0)
			return -1;
		return ck_err_set(err, "auth-provider \"%s\" is not supported (use an exec plugin)",
		                  name ? name : "");
	}
	/* Silently ignoring impersonation would act with the caller's own rights. */
	if (as || groups || ymap_get(d, e->body, "as-uid") || ymap_get(d, e->body, "as-user-extra"))
		return ck_err_set(err,
		                  "impersonation (as, as-groups, as-uid, as-user-extra) is not "
		                  "supported");
	if ((token || token_file) && (user || pass))
		return ck_err_set(err, "more than one authentication method: token and "
		                       "username/password");
	if (token && !ck_config_i_token_ok(token))
		return ck_err_set(err, "token: contains control characters");
	if (read_data_or_file(e, "client-certificate", "client-certificate-data", &c->cert_pem,
	                      &c->cert_len, err) < 0 ||
	    read_data_or_file(e, "client-key", "client-key-data", &c->key_pem, &c->key_len, err) <
	        0)
		return -1;
	if (c->cert_pem && !c->key_pem)
		return ck_err_set(err,
		                  "client-certificate is set but client-key and client-key-data "
		                  "are not");
	if (c->key_pem && !c->cert_pem)
		return ck_err_set(err, "client-key is set but client-certificate and "
		                       "client-certificate-data are not");
	c->username = ck_xstrdup(user);
	c->password = ck_xstrdup(pass);
	if (token) {
		/* token wins over tokenFile */
		c->token = ck_xstrdup(token);
	} else if (token_file) {
		c->token_path = path_resolve(e->file->dir, token_file);
		c->file_token = ck_config_i_token_file_read(c->token_path, err);
		if (c->file_token == NULL)
			return ck_err_wrap(err, "tokenFile");
		c->file_read_mono = ck_clk_mono_ns(c->clock);
	}
	if (exec && resolve_exec(c, e, exec, err) < 0)
		return -1;
	return 0;
}

/* Builds KUBERNETES_EXEC_INFO once: the cluster part does not change after load. */
static int build_exec_info(ck_config_t *c, kubeconfig_entry_t *cluster, yaml_node_t *ext,
                           char **err)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, "KUBERNETES_EXEC_INFO={\"apiVersion\":");
	ck_sbuf_put_json_str(&b, c->exec.api_version);
	ck_sbuf_puts(&b, ",\"kind\":\"ExecCredential\",\"spec\":{\"interactive\":false");
	if (c->exec.provide_cluster_info) {
		ck_sbuf_puts(&b, ",\"cluster\":{\"server\":");
		ck_sbuf_put_json_str(&b, c->server);
		if (c->tls_server_name) {
			ck_sbuf_puts(&b, ",\"tls-server-name\":");
			ck_sbuf_put_json_str(&b, c->tls_server_name);
		}
		if (c->insecure)
			ck_sbuf_puts(&b, ",\"insecure-skip-tls-verify\":true");
		if (c->ca_pem) {
			ck_sbuf_puts(&b, ",\"certificate-authority-data\":\"");
			ck_sbuf_put_base64(&b, c->ca_pem, c->ca_len);
			ck_sbuf_putc(&b, '"');
		}
		if (c->proxy_url) {
			ck_sbuf_puts(&b, ",\"proxy-url\":");
			ck_sbuf_put_json_str(&b, c->proxy_url);
		}
		if (ext && cluster && !node_is_null(ext)) {
			ck_sbuf_puts(&b, ",\"config\":");
			size_t max = b.len + YAML_JSON_LEN_MAX;
			int r = yaml_to_json(&cluster->file->doc, ext, &b, max, 0, err);
			if (r == 0 && b.len > max) /* the last scalar went over */
				r = ck_err_set(err, "larger than %d bytes as JSON",
				               YAML_JSON_LEN_MAX);
			if (r < 0) {
				ck_sbuf_free(&b);
				return ck_err_wrap(err, "cluster \"%s\": extensions: %s",
				                   cluster->name, EXEC_EXTENSION_NAME);
			}
		}
		ck_sbuf_putc(&b, '}');
	}
	ck_sbuf_puts(&b, "}}");
	c->exec_info = ck_sbuf_steal(&b);
	return 0;
}

/* Returns "kubeconfig a:b:c" for messages and the view's source. */
static char *kubeconfig_set_source(const kubeconfig_set_t *s)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, "kubeconfig ");
	for (size_t i = 0; i < s->nfiles; i++) {
		if (i)
			ck_sbuf_putc(&b, ':');
		ck_sbuf_puts(&b, s->files[i]->path);
	}
	return ck_sbuf_steal(&b);
}

ck_config_t *ck_config_i_kubeconfig_set_resolve(kubeconfig_set_t *s, const ck_config_load_opts_t *o,
                                                char **err)
{
	ck_config_t *c = NULL;
	char *source = kubeconfig_set_source(s);
	bool override = o->context && *o->context;
	const char *ctx_name = override ? o->context : s->current;
	kubeconfig_entry_t *ctx, *cl = NULL, *us = NULL;
	yaml_node_t *exec_ext = NULL;

	if (ctx_name == NULL) {
		if (o->master && *o->master) {
			c = ck_config_i_master_only(o, source, err);
			goto out;
		}
		ck_err_set(err, "%s: current-context is not set and no context was given", source);
		goto out;
	}
	ctx = kubeconfig_list_find(&s->contexts, ctx_name);
	if (ctx == NULL) {
		if (override)
			ck_err_set(err, "%s: context \"%s\" not found", source, ctx_name);
		else
			ck_err_set(err, "kubeconfig %s: current-context: context \"%s\" not found",
			           s->current_file->path, ctx_name);
		goto out;
	}
	const char *cl_name, *us_name, *ns;
	yaml_document_t *d = &ctx->file->doc;
	if (ystr_ne(d, ctx->body, "cluster", &cl_name, "", err) < 0 ||
	    ystr_ne(d, ctx->body, "user", &us_name, "", err) < 0 ||
	    ystr_ne(d, ctx->body, "namespace", &ns, "", err) < 0)
		goto ctx_err;
	if (ns && !dns_label_ok(ns)) {
		ck_err_set(err, "namespace \"%s\" is not a valid namespace name", ns);
		goto ctx_err;
	}
	if (cl_name) {
		cl = kubeconfig_list_find(&s->clusters, cl_name);
		if (cl == NULL) {
			ck_err_set(err, "cluster \"%s\" not found", cl_name);
			goto ctx_err;
		}
	} else if (!(o->master && *o->master)) {
		ck_err_set(err, "cluster is not set");
		goto ctx_err;
	}
	if (us_name) {
		us = kubeconfig_list_find(&s->users, us_name);
		if (us == NULL) {
			ck_err_set(err, "user \"%s\" not found", us_name);
			goto ctx_err;
		}
	}

	c = ck_config_i_kconfig_new(o);
	c->source = ck_xstrdup(source);
	c->context = ck_xstrdup(ctx_name);
	c->cluster = ck_xstrdup(cl_name ? cl_name : "");
	c->user = ck_xstrdup(us_name ? us_name : "");
	c->namespace = ck_xstrdup(ns ? ns : "");
	if (us)
		c->where = ck_xasprintf("kubeconfig %s: user \"%s\"", us->file->path, us->name);
	else
		c->where = ck_xasprintf("kubeconfig %s: context \"%s\"", ctx->file->path, ctx_name);
	if (cl && resolve_cluster(c, cl, &exec_ext, err) < 0) {
		ck_err_wrap(err, "kubeconfig %s: cluster \"%s\"", cl->file->path, cl->name);
		goto fail;
	}
	if (us && resolve_user(c, us, err) < 0) {
		ck_err_wrap(err, "%s", c->where);
		goto fail;
	}
	char *cl_where =
	    cl ? ck_xasprintf("kubeconfig %s: cluster \"%s\"", cl->file->path, cl->name)
	       : ck_xstrdup(source);
	int r = ck_config_i_finish_server(c, o->master, cl_where, err);
	free(cl_where);
	if (r < 0)
		goto fail;
	if (c->has_exec && build_exec_info(c, cl, exec_ext, err) < 0) {
		ck_err_wrap(err, "kubeconfig %s", cl->file->path);
		goto fail;
	}
	if (c->token_path || c->has_exec)
		c->generation = 1;
	goto out;

ctx_err:
	ck_err_wrap(err, "kubeconfig %s: context \"%s\"", ctx->file->path, ctx_name);
	goto out;
fail:
	ck_config_free(c);
	c = NULL;
out:
	free(source);
	return c;
}
