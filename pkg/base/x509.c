/*
 * x509: keys and certificates with GnuTLS (see x509.h).
 */
#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <string.h>
#include <time.h>

#include <ckube/base.h>

#include "pkg/base/x509.h"

/* The bytes of a P-256 field element or scalar. */
#define X509_P256_LEN 32

/* Copies an unsigned big-endian integer into out[X509_P256_LEN], left-padded with
 * zeros and without the sign byte GnuTLS may put before it. 0, or -1 if too long. */
static int put_fixed(uint8_t *out, const gnutls_datum_t *d)
{
	size_t n = d->size, skip = 0;
	while (n - skip > X509_P256_LEN && d->data[skip] == 0)
		skip++;
	if (n - skip > X509_P256_LEN)
		return -1;
	memset(out, 0, X509_P256_LEN - (n - skip));
	memcpy(out + X509_P256_LEN - (n - skip), d->data + skip, n - skip);
	return 0;
}

/*
 * Exports key as PEM (SEC 1 "EC PRIVATE KEY") into a new string; wipes every copy
 * of the secret. Written here, not by gnutls_x509_privkey_export2: GnuTLS encodes
 * the private scalar as an integer, with a 0 byte before it when its top bit is
 * set (33 bytes half the time), and RFC 5915 wants exactly 32. Go and OpenSSL
 * accept both, rustls (the kube-rs peer's TLS) refuses the 33-byte form.
 */
static int export_key(gnutls_x509_privkey_t key, char **key_pem)
{
	gnutls_ecc_curve_t curve;
	gnutls_datum_t x = {NULL, 0}, y = {NULL, 0}, k = {NULL, 0}, pem = {NULL, 0};
	/* SEQUENCE { INTEGER 1, OCTET STRING k, [0] { OID prime256v1 },
	 *            [1] { BIT STRING 04 x y } } */
	static const uint8_t head[] = {0x30, 0x77, 0x02, 0x01, 0x01, 0x04, X509_P256_LEN};
	static const uint8_t mid[] = {0xa0, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d,
	                              0x03, 0x01, 0x07, 0xa1, 0x44, 0x03, 0x42, 0x00, 0x04};
	uint8_t der[sizeof(head) + X509_P256_LEN + sizeof(mid) + 2 * X509_P256_LEN];
	uint8_t *p = der;
	int rc = gnutls_x509_privkey_export_ecc_raw(key, &curve, &x, &y, &k);
	if (rc < 0)
		goto out;
	rc = GNUTLS_E_INVALID_REQUEST;
	if (curve != GNUTLS_ECC_CURVE_SECP256R1)
		goto out;
	memcpy(p, head, sizeof(head));
	p += sizeof(head);
	if (put_fixed(p, &k) != 0)
		goto out;
	p += X509_P256_LEN;
	memcpy(p, mid, sizeof(mid));
	p += sizeof(mid);
	if (put_fixed(p, &x) != 0 || put_fixed(p + X509_P256_LEN, &y) != 0)
		goto out;
	rc = gnutls_pem_base64_encode2("EC PRIVATE KEY",
	                               &(gnutls_datum_t){der, (unsigned)sizeof(der)}, &pem);
	if (rc >= 0)
		*key_pem = ck_xstrndup((const char *)pem.data, pem.size);
out:
	ck_secure_zero(der, sizeof(der));
	gnutls_datum_t *secret[] = {&k, &pem};
	for (size_t i = 0; i < CK_ARRAY_LEN(secret); i++)
		if (secret[i]->data != NULL) {
			ck_secure_zero(secret[i]->data, secret[i]->size);
			gnutls_free(secret[i]->data);
		}
	gnutls_free(x.data);
	gnutls_free(y.data);
	return rc;
}

static int new_key(gnutls_x509_privkey_t *key)
{
	int rc = gnutls_x509_privkey_init(key);
	if (rc < 0)
		return rc;
	return gnutls_x509_privkey_generate(*key, GNUTLS_PK_ECDSA,
	                                    GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
}

int ck_x509_key(char **key_pem, char **err)
{
	gnutls_x509_privkey_t key = NULL;
	*key_pem = NULL;
	int rc = new_key(&key);
	if (rc >= 0)
		rc = export_key(key, key_pem);
	if (key != NULL)
		gnutls_x509_privkey_deinit(key);
	if (rc < 0)
		return ck_err_set(err, "generating a key: %s", gnutls_strerror(rc));
	return 0;
}

/* The subject alternative names of s; GnuTLS' error or 0. An address that is
 * neither IPv4 nor IPv6 is left in *bad_ip, so that the error names it. */
static int set_sans(gnutls_x509_crt_t crt, const ck_x509_spec_t *s, const char **step,
                    const char **bad_ip)
{
	int rc = 0;
	*step = "subject alternative names";
	for (size_t i = 0; i < s->ndns && rc >= 0; i++)
		rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, s->dns[i],
		                                          (unsigned)strlen(s->dns[i]),
		                                          GNUTLS_FSAN_APPEND);
	for (size_t i = 0; i < s->nips && rc >= 0; i++) {
		unsigned char a[16];
		unsigned n = 4;
		if (inet_pton(AF_INET, s->ips[i], a) != 1) {
			n = 16;
			if (inet_pton(AF_INET6, s->ips[i], a) != 1) {
				*bad_ip = s->ips[i];
				return GNUTLS_E_INVALID_REQUEST;
			}
		}
		rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, a, n,
		                                          GNUTLS_FSAN_APPEND);
	}
	return rc;
}

int ck_x509_make(const ck_x509_spec_t *s, char **cert_pem, char **key_pem, char **err)
{
	int result = -1, rc;
	const char *step = "generating the key", *bad_ip = NULL;
	gnutls_x509_privkey_t key = NULL, ikey = NULL;
	gnutls_x509_crt_t crt = NULL, icrt = NULL;
	gnutls_datum_t cd = {NULL, 0};
	unsigned char serial[16];
	time_t now = time(NULL);

	*cert_pem = *key_pem = NULL;
	if ((rc = new_key(&key)) < 0)
		goto fail;
	if (s->issuer_cert_pem != NULL) {
		step = "reading the issuer";
		gnutls_datum_t ic = {(unsigned char *)s->issuer_cert_pem,
		                     (unsigned)strlen(s->issuer_cert_pem)};
		gnutls_datum_t ik = {(unsigned char *)s->issuer_key_pem,
		                     s->issuer_key_pem ? (unsigned)strlen(s->issuer_key_pem) : 0};
		if ((rc = gnutls_x509_crt_init(&icrt)) < 0 ||
		    (rc = gnutls_x509_crt_import(icrt, &ic, GNUTLS_X509_FMT_PEM)) < 0 ||
		    (rc = gnutls_x509_privkey_init(&ikey)) < 0 ||
		    (rc = gnutls_x509_privkey_import(ikey, &ik, GNUTLS_X509_FMT_PEM)) < 0)
			goto fail;
	}
	/* A random positive serial, as RFC 5280 asks (the top bit clear). */
	step = "generating a serial number";
	if ((rc = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial))) < 0)
		goto fail;
	serial[0] &= 0x7f;
	step = "filling in the certificate";
	unsigned usage =
	    s->ca ? GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN | GNUTLS_KEY_DIGITAL_SIGNATURE
	          : GNUTLS_KEY_DIGITAL_SIGNATURE;
	if ((rc = gnutls_x509_crt_init(&crt)) < 0 ||
	    (rc = gnutls_x509_crt_set_version(crt, 3)) < 0 ||
	    (rc = gnutls_x509_crt_set_serial(crt, serial, sizeof(serial))) < 0 ||
	    /* A minute of slack for a peer whose clock runs a little behind. */
	    (rc = gnutls_x509_crt_set_activation_time(crt, now - 60)) < 0 ||
	    (rc = gnutls_x509_crt_set_expiration_time(crt, now + (time_t)s->days * 24 * 3600)) <
	        0 ||
	    (s->org != NULL &&
	     (rc = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_ORGANIZATION_NAME, 0, s->org,
	                                         (unsigned)strlen(s->org))) < 0) ||
	    (rc = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, s->cn,
	                                        (unsigned)strlen(s->cn))) < 0 ||
	    (rc = set_sans(crt, s, &step, &bad_ip)) < 0 ||
	    (step = "filling in the certificate", (rc = gnutls_x509_crt_set_key(crt, key)) < 0) ||
	    (rc = gnutls_x509_crt_set_basic_constraints(crt, s->ca ? 1 : 0, -1)) < 0 ||
	    (rc = gnutls_x509_crt_set_key_usage(crt, usage)) < 0 ||
	    (s->server &&
	     (rc = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0)) < 0) ||
	    (s->client &&
	     (rc = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_CLIENT, 0)) < 0))
		goto fail;
	step = "signing";
	if ((rc = gnutls_x509_crt_sign2(crt, icrt ? icrt : crt, ikey ? ikey : key,
	                                GNUTLS_DIG_SHA256, 0)) < 0)
		goto fail;
	step = "encoding";
	if ((rc = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &cd)) < 0 ||
	    (rc = export_key(key, key_pem)) < 0)
		goto fail;
	*cert_pem = ck_xstrndup((const char *)cd.data, cd.size);
	result = 0;
fail:
	if (result != 0 && bad_ip != NULL)
		ck_err_set(err, "certificate %s: %s: '%s' is not an IPv4 or IPv6 address", s->cn,
		           step, bad_ip);
	else if (result != 0)
		ck_err_set(err, "certificate %s: %s: %s", s->cn, step, gnutls_strerror(rc));
	gnutls_free(cd.data);
	if (crt != NULL)
		gnutls_x509_crt_deinit(crt);
	if (icrt != NULL)
		gnutls_x509_crt_deinit(icrt);
	if (key != NULL)
		gnutls_x509_privkey_deinit(key);
	if (ikey != NULL)
		gnutls_x509_privkey_deinit(ikey);
	return result;
}
