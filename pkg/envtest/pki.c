/*
 * pki: an environment's certificates and its kubeconfig. One CA signs the API
 * server's serving certificate and the admin's client certificate (organization
 * system:masters); the service-account signing key is a key alone. All are made by
 * the library's certificate maker (pkg/base/x509.c), in-process, in milliseconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ckube/base.h>

#include "pkg/base/x509.h"
#include "pkg/envtest/envtest_internal.h"

/* Long enough for any test run, short enough that a leaked key is soon worthless. */
#define PKI_DAYS 7

/* Writes text to dir/name with mode 0600. 0, or -1 with *err. */
static int put(const char *dir, const char *name, const char *text, char **err)
{
	char *path = ck_xasprintf("%s/%s", dir, name);
	int result = -1;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	size_t len = strlen(text);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len) {
		ck_err_set(err, "%s: %s", path, strerror(errno));
		goto out;
	}
	result = 0;
out:
	if (fd >= 0)
		close(fd);
	free(path);
	return result;
}

/* Makes a certificate as s says and writes it to pki/<name>.crt and .key. */
static int issue(const char *pki, const char *name, const ck_x509_spec_t *s, char **cert,
                 char **key, char **err)
{
	if (ck_x509_make(s, cert, key, err) != 0)
		return -1;
	char *cn = ck_xasprintf("%s.crt", name), *kn = ck_xasprintf("%s.key", name);
	int rc = put(pki, cn, *cert, err) == 0 && put(pki, kn, *key, err) == 0 ? 0 : -1;
	free(cn);
	free(kn);
	return rc;
}

int ck_envtest_i_pki(const char *dir, const char *server, char **err)
{
	int result = -1;
	char *pki = ck_xasprintf("%s/pki", dir);
	char *ca_c = NULL, *ca_k = NULL, *srv_c = NULL, *srv_k = NULL, *adm_c = NULL, *adm_k = NULL,
	     *sa = NULL, *kc = NULL;
	if (mkdir(pki, 0700) != 0) {
		ck_err_set(err, "%s: %s", pki, strerror(errno));
		goto out;
	}
	ck_x509_spec_t ca = {.cn = "ckube-envtest-ca", .ca = true, .days = PKI_DAYS};
	/* The names a client may reach the server by, and those of the in-cluster
	 * Service "kubernetes", so that a token's audience checks out as in a cluster. */
	const char *dns[] = {"localhost", "kubernetes", "kubernetes.default",
	                     "kubernetes.default.svc"};
	const char *ips[] = {"127.0.0.1", "::1", "10.0.0.1"};
	if (issue(pki, "ca", &ca, &ca_c, &ca_k, err) != 0)
		goto out;
	ck_x509_spec_t srv = {.cn = "kube-apiserver",
	                      .dns = dns,
	                      .ndns = sizeof(dns) / sizeof(dns[0]),
	                      .ips = ips,
	                      .nips = sizeof(ips) / sizeof(ips[0]),
	                      .server = true,
	                      .days = PKI_DAYS,
	                      .issuer_cert_pem = ca_c,
	                      .issuer_key_pem = ca_k};
	ck_x509_spec_t adm = {.cn = "ckube-envtest-admin",
	                      .org = "system:masters",
	                      .client = true,
	                      .days = PKI_DAYS,
	                      .issuer_cert_pem = ca_c,
	                      .issuer_key_pem = ca_k};
	if (issue(pki, "apiserver", &srv, &srv_c, &srv_k, err) != 0 ||
	    issue(pki, "admin", &adm, &adm_c, &adm_k, err) != 0 || ck_x509_key(&sa, err) != 0 ||
	    put(pki, "sa.key", sa, err) != 0)
		goto out;
	/* Paths, not -data: the kubeconfig is then short and readable, and the files
	 * live exactly as long as the directory. */
	kc = ck_xasprintf("apiVersion: v1\n"
	                  "kind: Config\n"
	                  "clusters:\n"
	                  "- name: envtest\n"
	                  "  cluster:\n"
	                  "    server: %s\n"
	                  "    certificate-authority: %s/ca.crt\n"
	                  "users:\n"
	                  "- name: admin\n"
	                  "  user:\n"
	                  "    client-certificate: %s/admin.crt\n"
	                  "    client-key: %s/admin.key\n"
	                  "contexts:\n"
	                  "- name: envtest\n"
	                  "  context: {cluster: envtest, user: admin, namespace: default}\n"
	                  "current-context: envtest\n",
	                  server, pki, pki, pki);
	if (put(dir, "kubeconfig", kc, err) != 0)
		goto out;
	result = 0;
out:
	free(pki);
	free(ca_c);
	free(srv_c);
	free(adm_c);
	free(kc);
	ck_secret_free(ca_k, 0);
	ck_secret_free(srv_k, 0);
	ck_secret_free(adm_k, 0);
	ck_secret_free(sa, 0);
	return result;
}
