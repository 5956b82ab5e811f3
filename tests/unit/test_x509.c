/*
 * Unit tests for pkg/base/x509.c: the library's one certificate maker (the metrics
 * server's self-signed certificate is tested in test_metrics.c).
 */
#include <check.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdlib.h>
#include <string.h>

#include <ckube/base.h>

#include "pkg/base/x509.h"

static gnutls_x509_crt_t load(const char *pem)
{
	gnutls_x509_crt_t crt;
	gnutls_datum_t d = {(unsigned char *)pem, (unsigned)strlen(pem)};
	ck_assert_int_eq(gnutls_x509_crt_init(&crt), 0);
	ck_assert_int_eq(gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM), 0);
	return crt;
}

/* A CA and a client certificate it signed: the chain verifies, the subject carries
 * the organization (Kubernetes' group), the purposes are as asked. */
START_TEST(ca_signs_client)
{
	char *ca_c = NULL, *ca_k = NULL, *cl_c = NULL, *cl_k = NULL, *err = NULL;
	ck_x509_spec_t ca = {.cn = "test-ca", .ca = true, .days = 1};
	ck_assert_int_eq(ck_x509_make(&ca, &ca_c, &ca_k, &err), 0);
	ck_x509_spec_t cl = {.cn = "admin",
	                     .org = "system:masters",
	                     .client = true,
	                     .days = 1,
	                     .issuer_cert_pem = ca_c,
	                     .issuer_key_pem = ca_k};
	ck_assert_int_eq(ck_x509_make(&cl, &cl_c, &cl_k, &err), 0);

	gnutls_x509_crt_t cac = load(ca_c), clc = load(cl_c);
	unsigned critical = 0, isca = 0;
	/* It returns the CA flag: 1 for a CA. */
	ck_assert_int_eq(gnutls_x509_crt_get_basic_constraints(cac, &critical, &isca, NULL), 1);
	ck_assert_uint_eq(isca, 1);
	unsigned vst = 1;
	ck_assert_int_eq(gnutls_x509_crt_verify(clc, &cac, 1, 0, &vst), 0);
	ck_assert_uint_eq(vst, 0);
	/* Signed by that CA, not any: another CA does not vouch for it. */
	char *o_c = NULL, *o_k = NULL;
	ck_assert_int_eq(ck_x509_make(&ca, &o_c, &o_k, &err), 0);
	gnutls_x509_crt_t oc = load(o_c);
	ck_assert_int_eq(gnutls_x509_crt_verify(clc, &oc, 1, 0, &vst), 0);
	ck_assert_uint_ne(vst, 0);
	gnutls_x509_crt_deinit(oc);
	free(o_c);
	ck_secret_free(o_k, 0);
	char dn[256];
	size_t len = sizeof(dn);
	ck_assert_int_eq(gnutls_x509_crt_get_dn(clc, dn, &len), 0);
	ck_assert_ptr_nonnull(strstr(dn, "O=system:masters"));
	ck_assert_ptr_nonnull(strstr(dn, "CN=admin"));
	char oid[128];
	len = sizeof(oid);
	ck_assert_int_eq(gnutls_x509_crt_get_key_purpose_oid(clc, 0, oid, &len, NULL), 0);
	ck_assert_str_eq(oid, GNUTLS_KP_TLS_WWW_CLIENT);
	gnutls_x509_crt_deinit(cac);
	gnutls_x509_crt_deinit(clc);
	free(ca_c);
	free(cl_c);
	ck_secret_free(ca_k, 0);
	ck_secret_free(cl_k, 0);
}
END_TEST

/*
 * Keys as RFC 5915 has them: the private scalar in exactly 32 bytes, whatever its
 * top bit (GnuTLS' own export gave 33, with a 0 byte first, half the time, and
 * rustls refuses those), and each the key of its certificate.
 */
START_TEST(keys_fixed_length)
{
	for (int i = 0; i < 64; i++) {
		char *c = NULL, *k = NULL, *err = NULL;
		ck_x509_spec_t s = {.cn = "k", .days = 1};
		ck_assert_int_eq(ck_x509_make(&s, &c, &k, &err), 0);
		gnutls_datum_t der = {NULL, 0};
		gnutls_datum_t pem = {(unsigned char *)k, (unsigned)strlen(k)};
		ck_assert_int_eq(gnutls_pem_base64_decode2("EC PRIVATE KEY", &pem, &der), 0);
		ck_assert_uint_eq(der.size, 121);
		ck_assert_uint_eq(der.data[5], 0x04); /* OCTET STRING */
		ck_assert_uint_eq(der.data[6], 32);
		gnutls_free(der.data);
		gnutls_x509_privkey_t key;
		ck_assert_int_eq(gnutls_x509_privkey_init(&key), 0);
		ck_assert_int_eq(gnutls_x509_privkey_import(key, &pem, GNUTLS_X509_FMT_PEM), 0);
		unsigned char kid[64], cid[64];
		size_t klen = sizeof(kid), clen = sizeof(cid);
		ck_assert_int_eq(gnutls_x509_privkey_get_key_id(key, 0, kid, &klen), 0);
		gnutls_x509_crt_t crt = load(c);
		ck_assert_int_eq(gnutls_x509_crt_get_key_id(crt, 0, cid, &clen), 0);
		ck_assert_uint_eq(klen, clen);
		ck_assert_int_eq(memcmp(kid, cid, klen), 0);
		gnutls_x509_crt_deinit(crt);
		gnutls_x509_privkey_deinit(key);
		free(c);
		ck_secret_free(k, 0);
	}
}
END_TEST

/* Bad input: an issuer that is not PEM, an address that is not one. */
START_TEST(bad_input)
{
	char *c = NULL, *k = NULL, *err = NULL;
	ck_x509_spec_t s = {
	    .cn = "x", .days = 1, .issuer_cert_pem = "garbage", .issuer_key_pem = "garbage"};
	ck_assert_int_eq(ck_x509_make(&s, &c, &k, &err), -1);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(err, "certificate x: reading the issuer"));
	free(err);
	err = NULL;
	const char *ips[] = {"127.0.0.300"};
	ck_x509_spec_t s2 = {.cn = "y", .days = 1, .ips = ips, .nips = 1};
	ck_assert_int_eq(ck_x509_make(&s2, &c, &k, &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "certificate y: subject alternative names: "
	                                  "'127.0.0.300' is not an IPv4 or IPv6 address"));
	free(err);
	err = NULL;
	ck_assert_int_eq(ck_x509_key(&k, &err), 0);
	ck_assert_ptr_nonnull(strstr(k, "PRIVATE KEY-----"));
	ck_secret_free(k, 0);
}
END_TEST

Suite *suite_x509(void)
{
	Suite *s = suite_create("x509");
	TCase *tc = tcase_create("make");
	tcase_add_test(tc, ca_signs_client);
	tcase_add_test(tc, keys_fixed_length);
	tcase_add_test(tc, bad_input);
	suite_add_tcase(s, tc);
	return s;
}
