/*
 * tls: the secure metrics server's certificate, either read from a directory
 * (controller-runtime's CertDir/CertName/KeyName) or self-signed in memory, as
 * controller-runtime does when no directory is given; certwatch.c reloads and
 * renews it.
 *
 * Design note. GnuTLS, because libmicrohttpd already links it for TLS: signing a
 * certificate here loads no library the process does not already have. ECDSA
 * P-256 rather than RSA 2048 because generating the key takes microseconds, not
 * tens of milliseconds, at every start.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* Sets *err to "what: <gnutls message>" and returns -1. */
static int tls_fail(char **err, const char *what, int rc)
{
	return ck_err_set(err, "%s: %s", what, gnutls_strerror(rc));
}

int ck_metrics_i_self_signed(const char *host, char **cert_pem, char **key_pem, char **err)
{
	int result = -1, rc;
	gnutls_x509_privkey_t key = NULL;
	gnutls_x509_crt_t crt = NULL;
	gnutls_datum_t cd = {NULL, 0}, kd = {NULL, 0};
	unsigned char serial[16];
	unsigned char v4[4], v6[16];
	time_t now = time(NULL);
	const char *cn = dns_name_ok(host) ? host : "localhost";

	*cert_pem = *key_pem = NULL;
	if ((rc = gnutls_x509_privkey_init(&key)) < 0 ||
	    (rc = gnutls_x509_privkey_generate(
	         key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0)) < 0) {
		tls_fail(err, "generating the metrics server's key", rc);
		goto out;
	}
	/* A random positive serial, as RFC 5280 asks (the top bit clear). */
	if ((rc = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial))) < 0) {
		tls_fail(err, "generating a serial number", rc);
		goto out;
	}
	serial[0] &= 0x7f;
	inet_pton(AF_INET, "127.0.0.1", v4);
	inet_pton(AF_INET6, "::1", v6);
	if ((rc = gnutls_x509_crt_init(&crt)) < 0 ||
	    (rc = gnutls_x509_crt_set_version(crt, 3)) < 0 ||
	    (rc = gnutls_x509_crt_set_serial(crt, serial, sizeof(serial))) < 0 ||
	    /* A minute of slack for a scraper whose clock runs a little behind. */
	    (rc = gnutls_x509_crt_set_activation_time(crt, now - 60)) < 0 ||
	    (rc = gnutls_x509_crt_set_expiration_time(crt, now + CK_METRICS_I_SELF_SIGNED_DAYS *
	                                                             24 * 3600)) < 0 ||
	    (rc = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
	                                        (unsigned)strlen(cn))) < 0 ||
	    (rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, "localhost", 9,
	                                               GNUTLS_FSAN_APPEND)) < 0 ||
	    (rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, v4, 4,
	                                               GNUTLS_FSAN_APPEND)) < 0 ||
	    (rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, v6, 16,
	                                               GNUTLS_FSAN_APPEND)) < 0 ||
	    (dns_name_ok(host) && strcmp(host, "localhost") != 0 &&
	     (rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, host,
	                                                (unsigned)strlen(host),
	                                                GNUTLS_FSAN_APPEND)) < 0) ||
	    (rc = gnutls_x509_crt_set_key(crt, key)) < 0 ||
	    (rc = gnutls_x509_crt_set_basic_constraints(crt, 0, -1)) < 0 ||
	    (rc = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE)) < 0 ||
	    (rc = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0)) < 0 ||
	    (rc = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0)) < 0) {
		tls_fail(err, "making the metrics server's self-signed certificate", rc);
		goto out;
	}
	if ((rc = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &cd)) < 0 ||
	    (rc = gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &kd)) < 0) {
		tls_fail(err, "encoding the metrics server's certificate", rc);
		goto out;
	}
	*cert_pem = ck_xstrndup((const char *)cd.data, cd.size);
	*key_pem = ck_xstrndup((const char *)kd.data, kd.size);
	result = 0;
out:
	if (kd.data != NULL) {
		/* The key in clear: wipe GnuTLS' copy before it goes back to the heap. */
		ck_secure_zero(kd.data, kd.size);
		gnutls_free(kd.data);
	}
	gnutls_free(cd.data);
	if (crt != NULL)
		gnutls_x509_crt_deinit(crt);
	if (key != NULL)
		gnutls_x509_privkey_deinit(key);
	return result;
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
