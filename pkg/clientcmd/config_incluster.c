/*
 * config_incluster: the configuration of a pod: the API server from
 * KUBERNETES_SERVICE_HOST/PORT, the service account's token, CA and namespace.
 * Separate because it reads no kubeconfig at all: it is the one source that comes
 * from the environment and the service-account folder.
 */
#include "pkg/clientcmd/config_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SA_DIR_DEFAULT "/var/run/secrets/kubernetes.io/serviceaccount"

/* ------------------------------------------------------------------------------------------ */
/* In-cluster                                                                                 */

const char *ck_config_i_sa_dir_of(const ck_config_load_opts_t *o)
{
	if (o->sa_dir && *o->sa_dir)
		return o->sa_dir;
	const char *env = getenv("CKUBE_SERVICEACCOUNT_DIR");
	return env && *env ? env : SA_DIR_DEFAULT;
}

/* Like client-go's "possible": both variables set and a token file present. */
bool ck_config_i_in_cluster_possible(const ck_config_load_opts_t *o)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	if (host == NULL || *host == '\0' || port == NULL || *port == '\0')
		return false;
	char *tok = ck_xasprintf("%s/token", ck_config_i_sa_dir_of(o));
	struct stat st;
	bool ok = stat(tok, &st) == 0;
	free(tok);
	return ok;
}

ck_config_t *ck_config_i_in_cluster_load(const ck_config_load_opts_t *o, char **err)
{
	const char *dir = ck_config_i_sa_dir_of(o);
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	ck_config_t *c = ck_config_i_kconfig_new(o);
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
	c->file_token = ck_config_i_token_file_read(c->token_path, err);
	if (c->file_token == NULL)
		goto fail;
	c->file_read_mono = ck_clk_mono_ns(c->clock);
	c->generation = 1;

	/* client-go only logs a missing CA and falls back to the system roots, which can
	 * never verify the cluster's own CA; failing here is clearer. */
	p = ck_xasprintf("%s/ca.crt", dir);
	if (ck_file_read_bounded(p, CK_FILE_MAX_BYTES, &c->ca_pem, &c->ca_len, err) < 0)
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
		if (ck_file_read_bounded(p, CK_FILE_MAX_BYTES, &ns, &len, NULL) == 0) {
			c->namespace = ck_config_i_dup_trimmed(ns, len);
			free(ns);
		} else {
			c->namespace = ck_xstrdup("");
		}
		free(p);
	}
	p = NULL;
	if (ck_config_i_finish_server(c, o->master, "in-cluster", err) < 0)
		goto fail;
	return c;
fail:
	free(p);
	ck_err_wrap(err, "in-cluster");
	ck_config_free(c);
	return NULL;
}
