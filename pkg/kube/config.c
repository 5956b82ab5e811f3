/*
 * config: kubeconfig files, in-cluster service accounts and exec credential
 * plugins, with client-go's clientcmd semantics.
 *
 * Design note. Loading happens in two steps. First every kubeconfig file is parsed
 * with libyaml's document API and its named clusters, users and contexts are
 * collected into one set in which the first file that names an entry wins (the
 * YAML documents stay alive so that entries are just node pointers). Then the
 * chosen context is resolved into a flat ck_config_t: server, TLS settings, static
 * credentials read into memory, and the description of what can change over time
 * (a token file, an exec plugin). Nothing in a ck_config_t points back to YAML.
 *
 * Credentials that change are produced by ck_config_credentials_peek() and
 * ck_config_exec_run() (ck_config_credentials() is both, blocking), which cache
 * them and bump a generation number whenever what they return changes, so that
 * the transport knows when to rebuild its TLS handle and headers.
 *
 * A plugin run may take seconds, so it is split from the cache for the client's
 * loop thread, which must never wait: ck_config_credentials_peek() answers from the
 * cache (or says a run is needed), ck_config_exec_run() runs the plugin on whatever
 * thread calls it. Two locks: mu guards the cache and is held only briefly; exec_mu
 * is held for a whole run, so that runs never overlap while peeks go on. A failed
 * run starts a backoff during which peeks fail with its error instead of asking for
 * yet another run: a broken plugin is not run once per request.
 *
 * Secrets (tokens, keys, passwords, the plugin's stdout) never appear in an error
 * message and are wiped before their memory is freed.
 */
#include <ckube/config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>
#include <yaml.h>

#define SA_DIR_DEFAULT "/var/run/secrets/kubernetes.io/serviceaccount"
/* client-go re-reads token files once a minute (bound service-account tokens rotate). */
#define TOKEN_REREAD_NS         (60 * CK_NS_PER_SEC)
#define EXEC_TIMEOUT_MS_DEFAULT 30000
/* After a failed plugin run: no new run for 1 s, doubling per failure up to 30 s. */
#define EXEC_BACKOFF_MIN_NS (1 * CK_NS_PER_SEC)
#define EXEC_BACKOFF_MAX_NS (30 * CK_NS_PER_SEC)
/* How often a plugin run looks at the cancel flag. */
#define EXEC_CANCEL_POLL_MS 50
/* A credential is a few KiB; anything much larger is a broken plugin. */
#define EXEC_STDOUT_MAX      (1024 * 1024)
#define EXEC_STDERR_KEEP     4096
#define EXEC_STDERR_LINE_MAX 200
/* Limits when copying a cluster extension into KUBERNETES_EXEC_INFO: nesting, and
 * size, since aliases let a small file expand exponentially (and the kernel takes
 * no environment string over 128 KiB). */
#define YAML_JSON_DEPTH_MAX 32
#define YAML_JSON_LEN_MAX   (64 * 1024)
#define EXEC_API_V1         "client.authentication.k8s.io/v1"
#define EXEC_API_V1BETA1    "client.authentication.k8s.io/v1beta1"
#define EXEC_EXTENSION_NAME "client.authentication.k8s.io/exec"

struct ck_config {
	/* What ck_config_view() exposes. */
	char *server;
	char *source;
	char *context;
	char *cluster;
	char *user;
	char *namespace;
	char *ca_pem;
	size_t ca_len;
	bool insecure;
	char *tls_server_name;
	char *proxy_url;
	char *username;
	char *password;

	/* Prefix for credential errors: `kubeconfig /x: user "bob"` or `in-cluster`. */
	char *where;
	const ck_clk_t *clock;
	pthread_mutex_t mu;      /* everything below that changes */
	pthread_mutex_t exec_mu; /* held for a whole plugin run; taken before mu, never after */

	/* Static credentials, read at load. */
	char *token;
	char *cert_pem;
	size_t cert_len;
	char *key_pem;
	size_t key_len;

	/* A token file (tokenFile, or the in-cluster token): last good token. */
	char *token_path;
	char *file_token;
	uint64_t file_read_mono;

	/* An exec plugin and its cached output. */
	bool has_exec;
	ck_exec_config_t exec;
	char *exec_info; /* KUBERNETES_EXEC_INFO, built once at load */
	uint32_t exec_timeout_ms;
	bool exec_cached;
	char *exec_token;
	char *exec_cert;
	size_t exec_cert_len;
	char *exec_key;
	size_t exec_key_len;
	int64_t exec_expiry_wall; /* 0 = no expiry */
	/* The last run failed: no new run before exec_retry_mono; peeks fail with
	 * exec_last_err instead. exec_backoff_ns is the current step. */
	bool exec_failed;
	uint64_t exec_retry_mono;
	uint64_t exec_backoff_ns;
	char *exec_last_err;
	atomic_bool exec_cancelled; /* ck_config_exec_cancel(): runs stop, for good */

	unsigned generation; /* 0 while nothing can change */
};

/* ------------------------------------------------------------------------------------------ */
/* Small helpers                                                                              */

/* Wipes and frees a secret; n = 0 means "strlen". */
static void secret_free(char *p, size_t n)
{
	if (p == NULL)
		return;
	explicit_bzero(p, n ? n : strlen(p));
	free(p);
}

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Returns a new NUL-terminated copy of n bytes of p (which may hold NULs: PEM data
 * decoded from base64 can), or NULL when p is NULL. */
static char *mem_dup(const char *p, size_t n)
{
	if (p == NULL)
		return NULL;
	char *d = ck_xmalloc(n + 1);
	memcpy(d, p, n);
	d[n] = '\0';
	return d;
}

/* Returns a new string: s without leading and trailing white space. */
static char *dup_trimmed(const char *s, size_t n)
{
	while (n > 0 && is_space(*s)) {
		s++;
		n--;
	}
	while (n > 0 && is_space(s[n - 1]))
		n--;
	return ck_xstrndup(s, n);
}

/* A bearer token goes into an HTTP header: it must not be able to break the header. */
static bool token_ok(const char *t)
{
	if (t == NULL || *t == '\0')
		return false;
	for (const unsigned char *p = (const unsigned char *)t; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

static bool str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

static bool mem_eq(const char *a, size_t alen, const char *b, size_t blen)
{
	if (a == NULL || b == NULL)
		return a == b;
	return alen == blen && memcmp(a, b, alen) == 0;
}

static unsigned generation_next(unsigned g)
{
	g++;
	return g == 0 ? 1 : g;
}

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
		if (is_space((char)ch))
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
	secret_free(buf, n / 4 * 3 + 4);
	return -1;
}

static void b64_encode(ck_sbuf_t *b, const unsigned char *p, size_t n)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		char q[4] = {tab[v >> 18 & 63], tab[v >> 12 & 63],
		             i + 1 < n ? tab[v >> 6 & 63] : '=', i + 2 < n ? tab[v & 63] : '='};
		ck_sbuf_append(b, q, 4);
	}
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

/*
 * Checks and normalizes a server URL: no trailing slash; when the scheme is missing,
 * https if TLS settings are present, else http (client-go's defaulting).
 * Returns a new string or NULL with *err (the caller adds where).
 */
static char *server_normalize(const char *in, bool tls, char **err)
{
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		if (*p <= 0x20 || *p == 0x7f) {
			ck_err_set(err, "server \"%s\": contains white space or control characters",
			        in);
			return NULL;
		}
	}
	char *s =
	    strstr(in, "://") ? ck_xstrdup(in) : ck_xasprintf("%s://%s", tls ? "https" : "http", in);
	size_t n = strlen(s);
	while (n > 0 && s[n - 1] == '/')
		s[--n] = '\0';
	const char *host = NULL;
	if (strncasecmp(s, "https://", 8) == 0)
		host = s + 8;
	else if (strncasecmp(s, "http://", 7) == 0)
		host = s + 7;
	if (host == NULL) {
		ck_err_set(err, "server \"%s\": scheme must be http or https", in);
		goto bad;
	}
	if (*host == '\0' || *host == '/') {
		ck_err_set(err, "server \"%s\": no host", in);
		goto bad;
	}
	if (strpbrk(s, "?#")) {
		ck_err_set(err, "server \"%s\": a query or fragment is not allowed", in);
		goto bad;
	}
	for (char *p = s; p < host; p++) /* lower-case the scheme only */
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	return s;
bad:
	free(s);
	return NULL;
}

/* client-go accepts only these proxy schemes. */
static bool proxy_url_ok(const char *u)
{
	return strncmp(u, "http://", 7) == 0 || strncmp(u, "https://", 8) == 0 ||
	       strncmp(u, "socks5://", 9) == 0;
}

/* Reads a token file: trimmed, non-empty, header-safe. Returns a new string or NULL. */
static char *token_file_read(const char *path, char **err)
{
	char *raw = NULL;
	size_t len = 0;
	if (ck_file_read_all(path, &raw, &len, err) < 0)
		return NULL;
	char *tok = dup_trimmed(raw, len);
	secret_free(raw, len);
	if (*tok == '\0') {
		ck_err_set(err, "%s: the token file is empty", path);
	} else if (!token_ok(tok)) {
		ck_err_set(err, "%s: the token contains control characters", path);
	} else {
		return tok;
	}
	secret_free(tok, 0);
	return NULL;
}

static void strv_free(char **v)
{
	if (v == NULL)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

static void exec_config_clear(ck_exec_config_t *e)
{
	free(e->api_version);
	free(e->command);
	strv_free(e->args);
	if (e->env) {
		for (char **p = e->env; *p; p++)
			secret_free(*p, 0); /* plugin env often carries secrets */
		free(e->env);
	}
	free(e->install_hint);
	free(e->interactive_mode);
	memset(e, 0, sizeof(*e));
}

static ck_config_t *kconfig_new(const ck_config_load_opts_t *o)
{
	ck_config_t *c = ck_xcalloc(1, sizeof(*c));
	c->clock = o && o->clock ? o->clock : ck_clk_real();
	c->exec_timeout_ms = o && o->exec_timeout_ms ? o->exec_timeout_ms : EXEC_TIMEOUT_MS_DEFAULT;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->exec_mu, NULL);
	atomic_init(&c->exec_cancelled, false);
	return c;
}

void ck_config_free(ck_config_t *c)
{
	if (c == NULL)
		return;
	free(c->server);
	free(c->source);
	free(c->context);
	free(c->cluster);
	free(c->user);
	free(c->namespace);
	free(c->ca_pem);
	free(c->tls_server_name);
	free(c->proxy_url);
	free(c->username);
	secret_free(c->password, 0);
	free(c->where);
	secret_free(c->token, 0);
	free(c->cert_pem);
	secret_free(c->key_pem, c->key_len);
	free(c->token_path);
	secret_free(c->file_token, 0);
	exec_config_clear(&c->exec);
	free(c->exec_info);
	secret_free(c->exec_token, 0);
	free(c->exec_cert);
	secret_free(c->exec_key, c->exec_key_len);
	free(c->exec_last_err);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->exec_mu);
	free(c);
}

/* ------------------------------------------------------------------------------------------ */
/* Reading YAML nodes                                                                         */

typedef struct kc_file {
	char *path;
	char *dir;
	yaml_document_t doc;
} kc_file_t;

typedef struct kc_entry {
	const char *name;  /* borrowed from the document */
	yaml_node_t *body; /* the "cluster"/"user"/"context" mapping, or NULL */
	kc_file_t *file;
} kc_entry_t;

typedef struct kc_list {
	kc_entry_t *v;
	size_t n, cap;
} kc_list_t;

/* Every loaded file, merged: the first file that names an entry wins. */
typedef struct kc_set {
	kc_file_t **files;
	size_t nfiles;
	kc_list_t clusters, users, contexts;
	const char *current; /* current-context, borrowed */
	kc_file_t *current_file;
} kc_set_t;

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

static void kc_set_free(kc_set_t *s)
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

static bool kc_set_empty(const kc_set_t *s)
{
	return s->current == NULL && s->clusters.n == 0 && s->users.n == 0 && s->contexts.n == 0;
}

static kc_entry_t *kc_list_find(kc_list_t *l, const char *name)
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
static int kc_collect(kc_file_t *f, yaml_node_t *root, const char *list, const char *body_key,
                      kc_list_t *into, char **err)
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
		kc_entry_t *old = kc_list_find(into, name);
		if (old && old->file == f)
			return ck_err_set(err, "%s: duplicate name \"%s\"%s", list, name,
			               node_at(item, at));
		if (old)
			continue;
		if (into->n == into->cap) {
			into->cap = into->cap ? into->cap * 2 : 8;
			into->v = ck_xrealloc(into->v, into->cap * sizeof(*into->v));
		}
		into->v[into->n++] = (kc_entry_t){name, body, f};
	}
	return 0;
}

/* Parses one kubeconfig text into the set. Returns 0 or -1 with *err naming the file. */
static int kc_set_add_text(kc_set_t *s, const char *text, size_t len, const char *path, char **err)
{
	int result = -1;
	yaml_parser_t parser;
	kc_file_t *f = ck_xcalloc(1, sizeof(*f));
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
	if (kc_collect(f, root, "clusters", "cluster", &s->clusters, err) < 0 ||
	    kc_collect(f, root, "users", "user", &s->users, err) < 0 ||
	    kc_collect(f, root, "contexts", "context", &s->contexts, err) < 0)
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
static int kc_set_add_file(kc_set_t *s, const char *path, bool *missing, char **err)
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
	int r = kc_set_add_text(s, text, len, path, err);
	free(text);
	return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Resolving the chosen context into a ck_config_t                                              */

/*
 * Reads a "-data" field (base64) or, when absent, the file field resolved against
 * the entry's folder. -data wins over the file form. *out is NULL when neither is set.
 */
static int read_data_or_file(kc_entry_t *e, const char *file_key, const char *data_key, char **out,
                             size_t *out_len, char **err)
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
		int r = ck_file_read_all(p, out, out_len, err);
		free(p);
		if (r < 0)
			return ck_err_wrap(err, "%s", file_key);
	}
	return 0;
}

static int resolve_cluster(ck_config_t *c, kc_entry_t *e, yaml_node_t **exec_ext, char **err)
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
		if (str_eq(name, EXEC_EXTENSION_NAME))
			*exec_ext = ymap_get(d, x, "extension");
	}
	return 0;
}

static int resolve_exec(ck_config_t *c, kc_entry_t *e, yaml_node_t *x, char **err)
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
		return ck_err_set(err, "exec: apiVersion \"%s\" is not supported (use %s or %s)", api,
		               EXEC_API_V1, EXEC_API_V1BETA1);
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

static int resolve_user(ck_config_t *c, kc_entry_t *e, char **err)
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
		return ck_err_set(err, "impersonation (as, as-groups, as-uid, as-user-extra) is not "
		                    "supported");
	if ((token || token_file) && (user || pass))
		return ck_err_set(err, "more than one authentication method: token and "
		                    "username/password");
	if (token && !token_ok(token))
		return ck_err_set(err, "token: contains control characters");
	if (read_data_or_file(e, "client-certificate", "client-certificate-data", &c->cert_pem,
	                      &c->cert_len, err) < 0 ||
	    read_data_or_file(e, "client-key", "client-key-data", &c->key_pem, &c->key_len, err) <
	        0)
		return -1;
	if (c->cert_pem && !c->key_pem)
		return ck_err_set(err, "client-certificate is set but client-key and client-key-data "
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
		c->file_token = token_file_read(c->token_path, err);
		if (c->file_token == NULL)
			return ck_err_wrap(err, "tokenFile");
		c->file_read_mono = ck_clk_mono_ns(c->clock);
	}
	if (exec && resolve_exec(c, e, exec, err) < 0)
		return -1;
	return 0;
}

/* Builds KUBERNETES_EXEC_INFO once: the cluster part does not change after load. */
static int build_exec_info(ck_config_t *c, kc_entry_t *cluster, yaml_node_t *ext, char **err)
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
			b64_encode(&b, (const unsigned char *)c->ca_pem, c->ca_len);
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
				r = ck_err_set(err, "larger than %d bytes as JSON", YAML_JSON_LEN_MAX);
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

/* Normalizes the server and finishes a config; where names the source for messages. */
static int finish_server(ck_config_t *c, const char *master, const char *where, char **err)
{
	if (master && *master) {
		free(c->server);
		c->server = ck_xstrdup(master);
	}
	if (c->server == NULL)
		return ck_err_set(err, "%s: server is not set", where);
	bool tls = c->ca_pem || c->cert_pem || c->insecure;
	char *s = server_normalize(c->server, tls, err);
	if (s == NULL)
		return ck_err_wrap(err, "%s", master && *master ? "--master" : where);
	free(c->server);
	c->server = s;
	return 0;
}

/* Returns "kubeconfig a:b:c" for messages and the view's source. */
static char *kc_set_source(const kc_set_t *s)
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

/* A config with only a server and no credentials (--master and nothing else). */
static ck_config_t *master_only(const ck_config_load_opts_t *o, const char *source, char **err)
{
	ck_config_t *c = kconfig_new(o);
	c->source = ck_xstrdup(source);
	c->context = ck_xstrdup("");
	c->cluster = ck_xstrdup("");
	c->user = ck_xstrdup("");
	c->namespace = ck_xstrdup("");
	c->where = ck_xstrdup(source);
	if (finish_server(c, o->master, source, err) < 0) {
		ck_config_free(c);
		return NULL;
	}
	return c;
}

static ck_config_t *kc_set_resolve(kc_set_t *s, const ck_config_load_opts_t *o, char **err)
{
	ck_config_t *c = NULL;
	char *source = kc_set_source(s);
	bool override = o->context && *o->context;
	const char *ctx_name = override ? o->context : s->current;
	kc_entry_t *ctx, *cl = NULL, *us = NULL;
	yaml_node_t *exec_ext = NULL;

	if (ctx_name == NULL) {
		if (o->master && *o->master) {
			c = master_only(o, source, err);
			goto out;
		}
		ck_err_set(err, "%s: current-context is not set and no context was given", source);
		goto out;
	}
	ctx = kc_list_find(&s->contexts, ctx_name);
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
		cl = kc_list_find(&s->clusters, cl_name);
		if (cl == NULL) {
			ck_err_set(err, "cluster \"%s\" not found", cl_name);
			goto ctx_err;
		}
	} else if (!(o->master && *o->master)) {
		ck_err_set(err, "cluster is not set");
		goto ctx_err;
	}
	if (us_name) {
		us = kc_list_find(&s->users, us_name);
		if (us == NULL) {
			ck_err_set(err, "user \"%s\" not found", us_name);
			goto ctx_err;
		}
	}

	c = kconfig_new(o);
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
	char *cl_where = cl ? ck_xasprintf("kubeconfig %s: cluster \"%s\"", cl->file->path, cl->name)
	                    : ck_xstrdup(source);
	int r = finish_server(c, o->master, cl_where, err);
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

/* ------------------------------------------------------------------------------------------ */
/* In-cluster                                                                                 */

static const char *sa_dir_of(const ck_config_load_opts_t *o)
{
	if (o->sa_dir && *o->sa_dir)
		return o->sa_dir;
	const char *env = getenv("CSC_SERVICEACCOUNT_DIR");
	return env && *env ? env : SA_DIR_DEFAULT;
}

/* Like client-go's "possible": both variables set and a token file present. */
static bool in_cluster_possible(const ck_config_load_opts_t *o)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	if (host == NULL || *host == '\0' || port == NULL || *port == '\0')
		return false;
	char *tok = ck_xasprintf("%s/token", sa_dir_of(o));
	struct stat st;
	bool ok = stat(tok, &st) == 0;
	free(tok);
	return ok;
}

static ck_config_t *in_cluster_load(const ck_config_load_opts_t *o, char **err)
{
	const char *dir = sa_dir_of(o);
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	ck_config_t *c = kconfig_new(o);
	char *p = NULL;
	c->source = ck_xstrdup("in-cluster");
	c->where = ck_xstrdup("in-cluster");
	c->context = ck_xstrdup("");
	c->cluster = ck_xstrdup("");
	c->user = ck_xstrdup("");
	/* IPv6 literals need brackets in a URL. */
	if (strchr(host, ':') && host[0] != '[')
		c->server = ck_xasprintf("https://[%s]:%s", host, port);
	else
		c->server = ck_xasprintf("https://%s:%s", host, port);

	c->token_path = ck_xasprintf("%s/token", dir);
	c->file_token = token_file_read(c->token_path, err);
	if (c->file_token == NULL)
		goto fail;
	c->file_read_mono = ck_clk_mono_ns(c->clock);
	c->generation = 1;

	/* client-go only logs a missing CA and falls back to the system roots, which can
	 * never verify the cluster's own CA; failing here is clearer. */
	p = ck_xasprintf("%s/ca.crt", dir);
	if (ck_file_read_all(p, &c->ca_pem, &c->ca_len, err) < 0)
		goto fail;
	free(p);
	p = NULL;

	/* The namespace: $POD_NAMESPACE (as client-go), else the file, else "". */
	const char *pod_ns = getenv("POD_NAMESPACE");
	if (pod_ns && *pod_ns) {
		c->namespace = ck_xstrdup(pod_ns);
	} else {
		char *ns = NULL;
		size_t len = 0;
		p = ck_xasprintf("%s/namespace", dir);
		if (ck_file_read_all(p, &ns, &len, NULL) == 0) {
			c->namespace = dup_trimmed(ns, len);
			free(ns);
		} else {
			c->namespace = ck_xstrdup("");
		}
		free(p);
	}
	p = NULL;
	if (finish_server(c, o->master, "in-cluster", err) < 0)
		goto fail;
	return c;
fail:
	free(p);
	ck_err_wrap(err, "in-cluster");
	ck_config_free(c);
	return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Loading                                                                                    */

ck_config_t *ck_config_load_text(const char *text, size_t len, const char *path,
                             const ck_config_load_opts_t *opts, char **err)
{
	ck_config_load_opts_t none = {0};
	const ck_config_load_opts_t *o = opts ? opts : &none;
	kc_set_t s = {0};
	ck_config_t *c = NULL;
	if (kc_set_add_text(&s, text, len, path, err) == 0)
		c = kc_set_resolve(&s, o, err);
	kc_set_free(&s);
	return c;
}

/* Adds every existing file of $KUBECONFIG; *found counts them. */
static int load_env_list(kc_set_t *s, const char *list, size_t *found, char **err)
{
	char *copy = ck_xstrdup(list);
	char *save = NULL;
	int result = 0;
	*found = 0;
	for (char *p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
		bool dup = false, missing;
		for (size_t i = 0; i < s->nfiles && !dup; i++)
			dup = strcmp(s->files[i]->path, p) == 0;
		if (dup)
			continue;
		if (kc_set_add_file(s, p, &missing, err) < 0) {
			result = -1;
			break;
		}
		if (!missing)
			(*found)++;
	}
	free(copy);
	return result;
}

ck_config_t *ck_config_load(const ck_config_load_opts_t *opts, char **err)
{
	ck_config_load_opts_t none = {0};
	const ck_config_load_opts_t *o = opts ? opts : &none;
	kc_set_t s = {0};
	ck_config_t *c = NULL;
	bool have_master = o->master && *o->master;
	char *home_cfg = NULL;

	/* 1. An explicit path alone; a missing file is an error. */
	if (o->kubeconfig && *o->kubeconfig) {
		if (kc_set_add_file(&s, o->kubeconfig, NULL, err) == 0)
			c = kc_set_resolve(&s, o, err);
		goto out;
	}

	/* 2. $KUBECONFIG, merged. Missing files are skipped; when none exists (or all are
	 * empty) client-go falls back to in-cluster and never reads ~/.kube/config. */
	const char *env = getenv("KUBECONFIG");
	if (env && *env) {
		size_t found;
		if (load_env_list(&s, env, &found, err) < 0)
			goto out;
		if (!kc_set_empty(&s)) {
			c = kc_set_resolve(&s, o, err);
			goto out;
		}
		if (in_cluster_possible(o)) {
			c = in_cluster_load(o, err);
		} else if (have_master) {
			c = master_only(o, "--master", err);
		} else {
			ck_err_set(err,
			        "no configuration: %s in $KUBECONFIG (%s), and not running in a "
			        "cluster (KUBERNETES_SERVICE_HOST/PORT or %s/token missing)",
			        found ? "only empty files" : "no existing file", env, sa_dir_of(o));
		}
		goto out;
	}

	/* 3. In-cluster. */
	if (in_cluster_possible(o)) {
		c = in_cluster_load(o, err);
		goto out;
	}

	/* 4. ~/.kube/config. */
	const char *home = getenv("HOME");
	if (home && *home) {
		bool missing;
		home_cfg = ck_xasprintf("%s/.kube/config", home);
		if (kc_set_add_file(&s, home_cfg, &missing, err) < 0)
			goto out;
		if (!kc_set_empty(&s)) {
			c = kc_set_resolve(&s, o, err);
			goto out;
		}
	}

	/* 5. --master alone: a server and no credentials, as client-go allows. */
	if (have_master) {
		c = master_only(o, "--master", err);
		goto out;
	}
	ck_err_set(err,
	        "no configuration: no --kubeconfig, $KUBECONFIG unset, not running in a cluster "
	        "(KUBERNETES_SERVICE_HOST/PORT or %s/token missing), and %s %s",
	        sa_dir_of(o), home_cfg ? home_cfg : "$HOME/.kube/config ($HOME unset)",
	        home_cfg && s.nfiles ? "is empty" : "does not exist");
out:
	free(home_cfg);
	kc_set_free(&s);
	return c;
}

void ck_config_view(const ck_config_t *c, struct ck_config_view *v)
{
	memset(v, 0, sizeof(*v));
	v->server = c->server;
	v->source = c->source;
	v->context = c->context;
	v->cluster = c->cluster;
	v->user = c->user;
	v->namespace = c->namespace;
	v->ca_pem = c->ca_pem;
	v->ca_len = c->ca_len;
	v->insecure = c->insecure;
	v->tls_server_name = c->tls_server_name;
	v->proxy_url = c->proxy_url;
	v->username = c->username;
	v->password = c->password;
	v->has_exec = c->has_exec;
}

/* ------------------------------------------------------------------------------------------ */
/* Exec credential plugins                                                                    */

/* The first line of the plugin's stderr, shortened and stripped of control characters. */
static char *first_line(const ck_sbuf_t *b)
{
	size_t n = 0;
	while (n < b->len && n < EXEC_STDERR_LINE_MAX && b->data[n] != '\n' && b->data[n] != '\r')
		n++;
	char *s = ck_xstrndup(b->data ? b->data : "", n);
	for (char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return s;
}

/* The child's environment: ours, minus what the plugin config and KUBERNETES_EXEC_INFO
 * set, plus those. Pointers are borrowed; free only the array. */
static char **exec_envp(const ck_config_t *c)
{
	size_t n = 0, ne = 0;
	while (environ && environ[n])
		n++;
	while (c->exec.env[ne])
		ne++;
	char **v = ck_xcalloc(n + ne + 2, sizeof(char *));
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(environ[i], '=');
		size_t len = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
		bool shadowed = len == strlen("KUBERNETES_EXEC_INFO") &&
		                memcmp(environ[i], "KUBERNETES_EXEC_INFO", len) == 0;
		for (size_t j = 0; j < ne && !shadowed; j++)
			shadowed = strncmp(c->exec.env[j], environ[i], len) == 0 &&
			           c->exec.env[j][len] == '=';
		if (!shadowed)
			v[k++] = environ[i];
	}
	for (size_t j = 0; j < ne; j++)
		v[k++] = c->exec.env[j];
	v[k++] = c->exec_info;
	return v;
}

static uint64_t mono_now(void)
{
	return ck_clk_mono_ns(ck_clk_real());
}

/*
 * Runs the plugin with an argv array (no shell), stdin from /dev/null, stdout and
 * stderr captured, in its own process group so that a timeout or a cancel kills
 * whatever it started. Touches only what never changes after load (and the atomic
 * cancel flag), so it runs without c->mu. Returns 0 with its stdout in *out, or -1
 * with *err (never the output).
 */
static int exec_run(ck_config_t *c, ck_sbuf_t *out, char **err)
{
	int result = -1;
	int po[2] = {-1, -1}, pe[2] = {-1, -1};
	char **argv = NULL, **envp = NULL;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	bool fa_ok = false, attr_ok = false, timed_out = false, too_big = false, failed = false;
	bool cancelled = false;
	pid_t pid = -1;
	int status = 0;
	bool status_known = false;
	ck_sbuf_t eb = CK_SBUF_INIT;
	const char *cmd = c->exec.command;
	const char *hint = c->exec.install_hint;

	size_t na = 0;
	while (c->exec.args[na])
		na++;
	argv = ck_xcalloc(na + 2, sizeof(char *));
	argv[0] = c->exec.command;
	for (size_t i = 0; i < na; i++)
		argv[i + 1] = c->exec.args[i];
	envp = exec_envp(c);

	if (atomic_load(&c->exec_cancelled)) {
		ck_err_set(err, "exec plugin \"%s\": cancelled", cmd);
		goto out;
	}
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
		ck_err_set(err, "exec plugin \"%s\": pipe: %s", cmd, strerror(errno));
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	fa_ok = true;
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	/* Whatever else we have open (sockets, files) is none of the plugin's business. */
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	posix_spawnattr_init(&attr);
	attr_ok = true;
	sigset_t none, def;
	sigemptyset(&none);
	sigemptyset(&def);
	int defsigs[] = {SIGPIPE, SIGINT,  SIGTERM, SIGHUP, SIGQUIT,
	                 SIGCHLD, SIGALRM, SIGUSR1, SIGUSR2};
	for (size_t i = 0; i < CK_ARRAY_LEN(defsigs); i++)
		sigaddset(&def, defsigs[i]);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &def);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
	                                    POSIX_SPAWN_SETSIGDEF);

	int r = posix_spawnp(&pid, cmd, &fa, &attr, argv, envp);
	if (r != 0) {
		pid = -1;
		if (r == ENOENT)
			ck_err_set(err, "exec plugin \"%s\": executable not found%s%s", cmd,
			        hint ? ": " : "", hint ? hint : "");
		else
			ck_err_set(err, "exec plugin \"%s\": cannot run it: %s%s%s", cmd, strerror(r),
			        hint ? ": " : "", hint ? hint : "");
		goto out;
	}
	close(po[1]);
	close(pe[1]);
	po[1] = pe[1] = -1;

	uint64_t deadline = mono_now() + (uint64_t)c->exec_timeout_ms * CK_NS_PER_MS;
	while (po[0] >= 0 || pe[0] >= 0) {
		uint64_t now = mono_now();
		if (now >= deadline) {
			timed_out = true;
			break;
		}
		if (atomic_load(&c->exec_cancelled)) {
			cancelled = true;
			break;
		}
		struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
		int ms = (int)((deadline - now) / CK_NS_PER_MS) + 1;
		if (ms > EXEC_CANCEL_POLL_MS)
			ms = EXEC_CANCEL_POLL_MS;
		int n = poll(fds, 2, ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ck_err_set(err, "exec plugin \"%s\": poll: %s", cmd, strerror(errno));
			failed = true;
			break;
		}
		for (int i = 0; i < 2; i++) {
			int *fd = i == 0 ? &po[0] : &pe[0];
			if (*fd < 0 || fds[i].revents == 0)
				continue;
			char buf[16384];
			ssize_t got = read(*fd, buf, sizeof(buf));
			if (got < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (got <= 0) {
				close(*fd);
				*fd = -1;
				continue;
			}
			if (i == 0) {
				if (out->len + (size_t)got > EXEC_STDOUT_MAX) {
					too_big = true;
					break;
				}
				ck_sbuf_append(out, buf, (size_t)got);
			} else if (eb.len < EXEC_STDERR_KEEP) {
				ck_sbuf_append(&eb, buf, (size_t)got);
			}
		}
		if (too_big)
			break;
	}

	/* Reap it; a plugin that closed its output but lingers still gets the deadline. */
	if (timed_out || too_big || failed || cancelled)
		kill(-pid, SIGKILL);
	for (;;) {
		bool block = timed_out || too_big || failed || cancelled;
		pid_t w = waitpid(pid, &status, block ? 0 : WNOHANG);
		if (w == pid) {
			status_known = true;
			break;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) /* ECHILD: someone else reaped it (SIGCHLD ignored); judge the output */
			break;
		if (mono_now() >= deadline) {
			timed_out = true;
			kill(-pid, SIGKILL);
			continue;
		}
		if (atomic_load(&c->exec_cancelled)) {
			cancelled = true;
			kill(-pid, SIGKILL);
			continue;
		}
		struct timespec ts = {0, 2 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	pid = -1;

	if (failed)
		goto out;
	if (cancelled) {
		ck_err_set(err, "exec plugin \"%s\": cancelled", cmd);
		goto out;
	}
	if (timed_out) {
		ck_err_set(err, "exec plugin \"%s\": timed out after %u ms and was killed", cmd,
		        c->exec_timeout_ms);
		goto out;
	}
	if (too_big) {
		ck_err_set(err, "exec plugin \"%s\": output larger than %d bytes", cmd,
		        EXEC_STDOUT_MAX);
		goto out;
	}
	if (status_known && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		char *line = first_line(&eb);
		char how[48];
		if (WIFEXITED(status))
			snprintf(how, sizeof(how), "exit code %d", WEXITSTATUS(status));
		else
			snprintf(how, sizeof(how), "signal %d",
			         WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		ck_err_set(err, "exec plugin \"%s\": failed with %s%s%s%s%s", cmd, how,
		        *line ? ": " : "", line, hint ? "; " : "", hint ? hint : "");
		free(line);
		goto out;
	}
	result = 0;
out:
	if (pid > 0) {
		kill(-pid, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	for (int i = 0; i < 2; i++) {
		if (po[i] >= 0)
			close(po[i]);
		if (pe[i] >= 0)
			close(pe[i]);
	}
	if (fa_ok)
		posix_spawn_file_actions_destroy(&fa);
	if (attr_ok)
		posix_spawnattr_destroy(&attr);
	free(argv);
	free(envp);
	ck_sbuf_free(&eb);
	return result;
}

/* Reads a string member of a yajl object; NULL when absent or not a string. */
static const char *jstr(yajl_val obj, const char *key)
{
	const char *path[] = {key, NULL};
	yajl_val v = yajl_tree_get(obj, path, yajl_t_string);
	return v ? YAJL_GET_STRING(v) : NULL;
}

/* Parses an ExecCredential into the cache. Messages never quote the output. */
static int exec_parse(ck_config_t *c, const char *text, char **err)
{
	int result = -1;
	const char *cmd = c->exec.command;
	char ebuf[256];
	yajl_val root = yajl_tree_parse(text, ebuf, sizeof(ebuf));
	explicit_bzero(ebuf, sizeof(ebuf)); /* yajl quotes the input in its message */
	if (root == NULL || !YAJL_IS_OBJECT(root)) {
		ck_err_set(err, "exec plugin \"%s\": output is not a JSON object", cmd);
		goto out;
	}
	const char *api = jstr(root, "apiVersion");
	if (api == NULL || strcmp(api, c->exec.api_version) != 0) {
		ck_err_set(err,
		        "exec plugin \"%s\": returned apiVersion \"%.100s\", configured \"%s\"",
		        cmd, api ? api : "", c->exec.api_version);
		goto out;
	}
	const char *kind = jstr(root, "kind");
	if (kind && strcmp(kind, "ExecCredential") != 0) {
		ck_err_set(err, "exec plugin \"%s\": returned kind \"%.100s\", not ExecCredential",
		        cmd, kind);
		goto out;
	}
	const char *spath[] = {"status", NULL};
	yajl_val st = yajl_tree_get(root, spath, yajl_t_object);
	if (st == NULL) {
		ck_err_set(err, "exec plugin \"%s\": no status in its output", cmd);
		goto out;
	}
	const char *tok = jstr(st, "token");
	const char *cert = jstr(st, "clientCertificateData");
	const char *key = jstr(st, "clientKeyData");
	const char *exp = jstr(st, "expirationTimestamp");
	if (tok && *tok == '\0')
		tok = NULL;
	if (cert && *cert == '\0')
		cert = NULL;
	if (key && *key == '\0')
		key = NULL;
	if (!tok && !cert && !key) {
		ck_err_set(err,
		        "exec plugin \"%s\": status has neither a token nor a client "
		        "certificate and key",
		        cmd);
		goto out;
	}
	if (!cert != !key) {
		ck_err_set(err,
		        "exec plugin \"%s\": status has only one of clientCertificateData and "
		        "clientKeyData",
		        cmd);
		goto out;
	}
	if (tok && !token_ok(tok)) {
		ck_err_set(err, "exec plugin \"%s\": status.token contains control characters", cmd);
		goto out;
	}
	int64_t expiry = 0;
	if (exp && *exp && ck_time_parse_rfc3339(exp, &expiry) < 0) {
		ck_err_set(err,
		        "exec plugin \"%s\": status.expirationTimestamp \"%.64s\" is not RFC 3339",
		        cmd, exp);
		goto out;
	}
	/* Only a credential that differs from the cached one is a new generation. */
	bool same = c->exec_cached && str_eq(tok, c->exec_token) &&
	            mem_eq(cert, cert ? strlen(cert) : 0, c->exec_cert, c->exec_cert_len) &&
	            mem_eq(key, key ? strlen(key) : 0, c->exec_key, c->exec_key_len);
	if (!same) {
		secret_free(c->exec_token, 0);
		free(c->exec_cert);
		secret_free(c->exec_key, c->exec_key_len);
		c->exec_token = ck_xstrdup(tok);
		c->exec_cert = ck_xstrdup(cert);
		c->exec_cert_len = cert ? strlen(cert) : 0;
		c->exec_key = ck_xstrdup(key);
		c->exec_key_len = key ? strlen(key) : 0;
		if (c->exec_cached)
			c->generation = generation_next(c->generation);
	}
	c->exec_cached = true;
	c->exec_expiry_wall = expiry;
	result = 0;
out:
	if (root) {
		/* The tree holds the secret strings; wipe them before yajl frees them. */
		const char *sp[] = {"status", NULL};
		yajl_val st2 = yajl_tree_get(root, sp, yajl_t_object);
		for (size_t i = 0; st2 && i < st2->u.object.len; i++) {
			yajl_val v = st2->u.object.values[i];
			if (YAJL_IS_STRING(v))
				explicit_bzero(v->u.string, strlen(v->u.string));
		}
		yajl_tree_free(root);
	}
	return result;
}

/*
 * Runs the plugin and records the outcome: the new credential, or the error and the
 * next step of the backoff. Call with exec_mu held and mu not held. Returns 0, or -1
 * with *err.
 */
static int exec_refresh(ck_config_t *c, char **err)
{
	ck_sbuf_t out = CK_SBUF_INIT;
	char *e = NULL;
	int r = exec_run(c, &out, &e);
	pthread_mutex_lock(&c->mu);
	if (r == 0)
		r = exec_parse(c, ck_sbuf_cstr(&out), &e);
	if (r == 0) {
		c->exec_failed = false;
		c->exec_backoff_ns = 0;
		free(c->exec_last_err);
		c->exec_last_err = NULL;
	} else {
		if (e == NULL)
			e = ck_xstrdup("exec plugin failed");
		ck_err_wrap(&e, "%s", c->where);
		c->exec_backoff_ns =
		    c->exec_backoff_ns == 0 ? EXEC_BACKOFF_MIN_NS : c->exec_backoff_ns * 2;
		if (c->exec_backoff_ns > EXEC_BACKOFF_MAX_NS)
			c->exec_backoff_ns = EXEC_BACKOFF_MAX_NS;
		c->exec_failed = true;
		c->exec_retry_mono = ck_clk_mono_ns(c->clock) + c->exec_backoff_ns;
		free(c->exec_last_err);
		c->exec_last_err = ck_xstrdup(e);
	}
	pthread_mutex_unlock(&c->mu);
	if (out.data)
		explicit_bzero(out.data, out.cap);
	ck_sbuf_free(&out);
	if (e != NULL) {
		ck_err_set(err, "%s", e);
		free(e);
	}
	return r;
}

int ck_config_exec_run(ck_config_t *c, char **err)
{
	if (!c->has_exec)
		return ck_err_set(err, "%s: no exec plugin configured",
		               c->where ? c->where : "config");
	pthread_mutex_lock(&c->exec_mu);
	int r = exec_refresh(c, err);
	pthread_mutex_unlock(&c->exec_mu);
	return r;
}

void ck_config_exec_cancel(ck_config_t *c)
{
	atomic_store(&c->exec_cancelled, true);
}

/* ------------------------------------------------------------------------------------------ */
/* Credentials                                                                                */

/* Re-reads the token file when due (or when forced). Call with mu held. */
static void token_file_refresh(ck_config_t *c, bool force)
{
	if (c->token_path == NULL)
		return;
	uint64_t now = ck_clk_mono_ns(c->clock);
	if (!force && now - c->file_read_mono < TOKEN_REREAD_NS)
		return;
	/* A failed read keeps the last good token and is retried on the next call
	 * (bound tokens are rewritten atomically, so this is rare). */
	char *tok = token_file_read(c->token_path, NULL);
	if (tok == NULL)
		return;
	c->file_read_mono = now;
	if (!str_eq(tok, c->file_token)) {
		secret_free(c->file_token, 0);
		c->file_token = tok;
		tok = NULL;
		c->generation = generation_next(c->generation);
	}
	secret_free(tok, 0);
}

int ck_config_credentials_peek(ck_config_t *c, ck_cred_want_t want, ck_cred_t *out, char **err)
{
	int result = -1;
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&c->mu);
	token_file_refresh(c, want == CK_CRED_REFRESH);

	if (c->has_exec) {
		bool expired =
		    c->exec_expiry_wall != 0 && ck_clk_wall_ns(c->clock) >= c->exec_expiry_wall;
		bool need = !c->exec_cached;
		if (want == CK_CRED_CURRENT)
			need = need || expired;
		else if (want == CK_CRED_REFRESH)
			need = true;
		if (need) {
			if (c->exec_failed && ck_clk_mono_ns(c->clock) < c->exec_retry_mono) {
				ck_err_set(err, "%s", c->exec_last_err);
				goto out;
			}
			result = CK_CONFIG_NEED_EXEC;
			goto out;
		}
	}

	/* Static values win: a token set in the kubeconfig over tokenFile (handled at
	 * load) and over the plugin's, as client-go keeps an Authorization header. */
	const char *tok = c->token ? c->token : c->file_token ? c->file_token : c->exec_token;
	out->token = ck_xstrdup(tok);
	if (c->cert_pem) {
		out->cert_pem = mem_dup(c->cert_pem, c->cert_len);
		out->cert_len = c->cert_len;
		out->key_pem = mem_dup(c->key_pem, c->key_len);
		out->key_len = c->key_len;
	} else if (c->exec_cert) {
		out->cert_pem = mem_dup(c->exec_cert, c->exec_cert_len);
		out->cert_len = c->exec_cert_len;
		out->key_pem = mem_dup(c->exec_key, c->exec_key_len);
		out->key_len = c->exec_key_len;
	}
	out->generation = c->generation;
	result = 0;
out:
	pthread_mutex_unlock(&c->mu);
	return result;
}

int ck_config_credentials(ck_config_t *c, bool force_refresh, ck_cred_t *out, char **err)
{
	/* exec_mu around the peek too: a second caller waits for the first one's run
	 * and then finds its credential cached, instead of running the plugin again. */
	pthread_mutex_lock(&c->exec_mu);
	int r =
	    ck_config_credentials_peek(c, force_refresh ? CK_CRED_REFRESH : CK_CRED_CURRENT, out, err);
	if (r == CK_CONFIG_NEED_EXEC) {
		r = exec_refresh(c, err);
		if (r == 0)
			r = ck_config_credentials_peek(c, CK_CRED_LAST, out, err);
		if (r == CK_CONFIG_NEED_EXEC) /* cannot happen after a good run; never loop */
			r = ck_err_set(err, "%s: exec plugin: no credential", c->where);
	}
	pthread_mutex_unlock(&c->exec_mu);
	return r;
}

void ck_cred_clear(ck_cred_t *cr)
{
	if (cr == NULL)
		return;
	secret_free(cr->token, 0);
	free(cr->cert_pem);
	secret_free(cr->key_pem, cr->key_len);
	memset(cr, 0, sizeof(*cr));
}
