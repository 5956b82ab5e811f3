/*
 * tls: the secure metrics server's certificate, either read from a directory
 * (controller-runtime's CertDir/CertName/KeyName) or self-signed in memory, as
 * controller-runtime does when no directory is given; certwatch.c reloads and
 * renews it.
 *
 * The certificate is made by the library's one certificate maker (pkg/base/x509.c:
 * GnuTLS, ECDSA P-256), which envtest's certificates come from too.
 */
#include <gnutls/gnutls.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pkg/base/x509.h"
#include "pkg/metrics/metrics_internal.h"

/* Whether s can be a DNS SAN: letters, digits, '-' and '.', 1..253 bytes. */
static int dns_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > 253 || s[0] == '.' || s[0] == '-')
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
			return 0;
	return 1;
}

int ck_metrics_i_self_signed(const char *host, char **cert_pem, char **key_pem, char **err)
{
	bool extra = dns_name_ok(host) && strcmp(host, "localhost") != 0;
	const char *dns[] = {"localhost", extra ? host : NULL};
	const char *ips[] = {"127.0.0.1", "::1"};
	ck_x509_spec_t s = {.cn = dns_name_ok(host) ? host : "localhost",
	                    .dns = dns,
	                    .ndns = extra ? 2 : 1,
	                    .ips = ips,
	                    .nips = 2,
	                    .server = true,
	                    .days = CK_METRICS_I_SELF_SIGNED_DAYS};
	if (ck_x509_make(&s, cert_pem, key_pem, err) != 0)
		return ck_err_wrap(err, "making the metrics server's self-signed certificate");
	return 0;
}

/* A certificate or key file: the library's bounded reader (a regular file of at
 * most 1 MiB; the certificate watcher calls this on its thread, and a FIFO put
 * in the directory must not block it), and not empty. NULL with *err. */
static char *read_pem(const char *path, char **err)
{
	char *data = NULL;
	size_t len = 0;
	if (ck_file_read_bounded(path, CK_FILE_MAX_BYTES, &data, &len, err) != 0)
		return NULL;
	if (len == 0) {
		ck_err_set(err, "%s: empty", path);
		free(data);
		return NULL;
	}
	return data;
}

int ck_metrics_i_load_pair(const char *dir, const char *cert_name, const char *key_name,
                           char **cert_pem, char **key_pem, char **err)
{
	int result = -1;
	char *cp = ck_xasprintf("%s/%s", dir, cert_name);
	char *kp = ck_xasprintf("%s/%s", dir, key_name);
	gnutls_certificate_credentials_t cred = NULL;
	*cert_pem = *key_pem = NULL;
	char *c = read_pem(cp, err), *k = c ? read_pem(kp, err) : NULL;
	if (k == NULL)
		goto out;
	/* libmicrohttpd only says "cannot start" for a bad pair: check it here first. */
	int rc = gnutls_certificate_allocate_credentials(&cred);
	if (rc >= 0) {
		gnutls_datum_t cd = {(unsigned char *)c, (unsigned)strlen(c)};
		gnutls_datum_t kd = {(unsigned char *)k, (unsigned)strlen(k)};
		rc = gnutls_certificate_set_x509_key_mem(cred, &cd, &kd, GNUTLS_X509_FMT_PEM);
	}
	if (rc < 0) {
		ck_err_set(err, "%s and %s: %s", cp, kp, gnutls_strerror(rc));
		goto out;
	}
	*cert_pem = c;
	*key_pem = k;
	c = k = NULL;
	result = 0;
out:
	if (cred != NULL)
		gnutls_certificate_free_credentials(cred);
	free(c);
	ck_secret_free(k, 0);
	free(cp);
	free(kp);
	return result;
}
