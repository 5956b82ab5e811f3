/*
 * config: kubeconfig files, in-cluster service accounts and exec credential
 * plugins, with client-go's clientcmd semantics (see config.h). This file holds
 * the object itself (creation, ck_config_free, ck_config_view), the search order
 * of ck_config_load, what every source ends with (the server, checked and
 * normalized), and small helpers the other files share.
 *
 * Design note. The loader is split by concern, as curl's lib/ is (the list is in
 * config_internal.h): config_kubeconfig.c parses and merges kubeconfig files and
 * resolves a context, config_incluster.c reads the service account,
 * config_exec.c runs exec plugins, config_creds.c hands out credentials. Each of
 * them produces or reads the same flat ck_config_t; only this file decides which
 * source is used.
 *
 * Secrets (tokens, keys, passwords, the plugin's stdout) never appear in an error
 * message and are wiped before their memory is freed.
 */
#include "pkg/clientcmd/config_internal.h"

#include <stdlib.h>
#include <string.h>

#define EXEC_TIMEOUT_MS_DEFAULT 30000

/* ------------------------------------------------------------------------------------------ */
/* Small helpers                                                                              */

bool ck_config_i_is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Returns a new string: s without leading and trailing white space. */
char *ck_config_i_dup_trimmed(const char *s, size_t n)
{
	while (n > 0 && ck_config_i_is_space(*s)) {
		s++;
		n--;
	}
	while (n > 0 && ck_config_i_is_space(s[n - 1]))
		n--;
	return ck_xstrndup(s, n);
}

/* A bearer token goes into an HTTP header: it must not be able to break the header. */
bool ck_config_i_token_ok(const char *t)
{
	if (t == NULL || *t == '\0')
		return false;
	for (const unsigned char *p = (const unsigned char *)t; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

bool ck_config_i_str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

unsigned ck_config_i_generation_next(unsigned g)
{
	g++;
	return g == 0 ? 1 : g;
}

/*
 * Checks and normalizes a server URL: no trailing slash; when the scheme is missing,
 * https if TLS settings are present, else http (client-go's defaulting).
 * Returns a new string or NULL with *err (the caller adds where).
 */
static char *server_normalize(const char *in, bool tls, char **err)
{
	/* user:password@ first, before any message quotes the URL: it would be printed
	 * (the daemon's "Starting" line) and sent as basic auth. client-go keeps it and
	 * Go's HTTP client sends it so; the API server dropped basic auth in 1.19, and a
	 * kubeconfig's credentials belong in its user entry. */
	const char *auth = strstr(in, "://");
	auth = auth ? auth + 3 : in;
	size_t alen = strcspn(auth, "/?#");
	const char *at = memchr(auth, '@', alen);
	if (at != NULL) {
		ck_err_set(err,
		           "server \"%.*s***@%.*s\": user information (user:password@) is not "
		           "allowed in the server URL; put credentials in the kubeconfig's user",
		           (int)(auth - in), in, (int)(alen - (size_t)(at + 1 - auth)), at + 1);
		return NULL;
	}
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		if (*p <= 0x20 || *p == 0x7f) {
			ck_err_set(err, "server \"%s\": contains white space or control characters",
			           in);
			return NULL;
		}
	}
	char *s = strstr(in, "://") ? ck_xstrdup(in)
	                            : ck_xasprintf("%s://%s", tls ? "https" : "http", in);
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
			ck_secret_free(*p, 0); /* plugin env often carries secrets */
		free(e->env);
	}
	free(e->install_hint);
	free(e->interactive_mode);
	memset(e, 0, sizeof(*e));
}

ck_config_t *ck_config_i_kconfig_new(const ck_config_load_opts_t *o)
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
	ck_secret_free(c->password, 0);
	free(c->where);
	ck_secret_free(c->token, 0);
	free(c->cert_pem);
	ck_secret_free(c->key_pem, c->key_len);
	free(c->token_path);
	ck_secret_free(c->file_token, 0);
	exec_config_clear(&c->exec);
	free(c->exec_info);
	ck_secret_free(c->exec_token, 0);
	free(c->exec_cert);
	ck_secret_free(c->exec_key, c->exec_key_len);
	free(c->exec_last_err);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->exec_mu);
	free(c);
}

/* Normalizes the server and finishes a config; where names the source for messages. */
int ck_config_i_finish_server(ck_config_t *c, const char *master, const char *where, char **err)
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

/* A config with only a server and no credentials (--master and nothing else). */
ck_config_t *ck_config_i_master_only(const ck_config_load_opts_t *o, const char *source, char **err)
{
	ck_config_t *c = ck_config_i_kconfig_new(o);
	c->source = ck_xstrdup(source);
	c->context = ck_xstrdup("");
	c->cluster = ck_xstrdup("");
	c->user = ck_xstrdup("");
	c->namespace = ck_xstrdup("");
	c->where = ck_xstrdup(source);
	if (ck_config_i_finish_server(c, o->master, source, err) < 0) {
		ck_config_free(c);
		return NULL;
	}
	return c;
}

/* ------------------------------------------------------------------------------------------ */
/* Loading                                                                                    */

ck_config_t *ck_config_load_text(const char *text, size_t len, const char *path,
                                 const ck_config_load_opts_t *opts, char **err)
{
	ck_config_load_opts_t none = {0};
	const ck_config_load_opts_t *o = opts ? opts : &none;
	kubeconfig_set_t s = {0};
	ck_config_t *c = NULL;
	if (ck_config_i_kubeconfig_set_add_text(&s, text, len, path, err) == 0)
		c = ck_config_i_kubeconfig_set_resolve(&s, o, err);
	ck_config_i_kubeconfig_set_free(&s);
	return c;
}

/* Adds every existing file of $KUBECONFIG; *found counts them. */
static int load_env_list(kubeconfig_set_t *s, const char *list, size_t *found, char **err)
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
		if (ck_config_i_kubeconfig_set_add_file(s, p, &missing, err) < 0) {
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
	kubeconfig_set_t s = {0};
	ck_config_t *c = NULL;
	bool have_master = o->master && *o->master;
	char *home_cfg = NULL;

	/* 1. An explicit path alone; a missing file is an error. */
	if (o->kubeconfig && *o->kubeconfig) {
		if (ck_config_i_kubeconfig_set_add_file(&s, o->kubeconfig, NULL, err) == 0)
			c = ck_config_i_kubeconfig_set_resolve(&s, o, err);
		goto out;
	}

	/* 2. $KUBECONFIG, merged. Missing files are skipped; when none exists (or all are
	 * empty) client-go falls back to in-cluster and never reads ~/.kube/config. */
	const char *env = getenv("KUBECONFIG");
	if (env && *env) {
		size_t found;
		if (load_env_list(&s, env, &found, err) < 0)
			goto out;
		if (!ck_config_i_kubeconfig_set_empty(&s)) {
			c = ck_config_i_kubeconfig_set_resolve(&s, o, err);
			goto out;
		}
		if (ck_config_i_in_cluster_possible(o)) {
			c = ck_config_i_in_cluster_load(o, err);
		} else if (have_master) {
			c = ck_config_i_master_only(o, "--master", err);
		} else {
			ck_err_set(err,
			           "no configuration: %s in $KUBECONFIG (%s), and not running in a "
			           "cluster (KUBERNETES_SERVICE_HOST/PORT or %s/token missing)",
			           found ? "only empty files" : "no existing file", env,
			           ck_config_i_sa_dir_of(o));
		}
		goto out;
	}

	/* 3. In-cluster. */
	if (ck_config_i_in_cluster_possible(o)) {
		c = ck_config_i_in_cluster_load(o, err);
		goto out;
	}

	/* 4. ~/.kube/config. */
	const char *home = getenv("HOME");
	if (home && *home) {
		bool missing;
		home_cfg = ck_xasprintf("%s/.kube/config", home);
		if (ck_config_i_kubeconfig_set_add_file(&s, home_cfg, &missing, err) < 0)
			goto out;
		if (!ck_config_i_kubeconfig_set_empty(&s)) {
			c = ck_config_i_kubeconfig_set_resolve(&s, o, err);
			goto out;
		}
	}

	/* 5. --master alone: a server and no credentials, as client-go allows. */
	if (have_master) {
		c = ck_config_i_master_only(o, "--master", err);
		goto out;
	}
	ck_err_set(err,
	           "no configuration: no --kubeconfig, $KUBECONFIG unset, not running in a cluster "
	           "(KUBERNETES_SERVICE_HOST/PORT or %s/token missing), and %s %s",
	           ck_config_i_sa_dir_of(o),
	           home_cfg ? home_cfg : "$HOME/.kube/config ($HOME unset)",
	           home_cfg && s.nfiles ? "is empty" : "does not exist");
out:
	free(home_cfg);
	ck_config_i_kubeconfig_set_free(&s);
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
