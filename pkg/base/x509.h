/*
 * The library's one X.509 certificate maker (internal: not installed): the metrics
 * server's self-signed certificate (pkg/metrics/tls.c) and envtest's CA, serving
 * and client certificates (pkg/envtest) are all made here.
 *
 * ECDSA P-256 keys, because generating one takes microseconds where RSA 2048 takes
 * tens of milliseconds (envtest makes three at every start). GnuTLS, because the
 * library links it already (libmicrohttpd's TLS).
 */
#ifndef CKUBE_PKG_BASE_X509_H
#define CKUBE_PKG_BASE_X509_H

#include <stdbool.h>
#include <stddef.h>

/* What one certificate says. Borrowed by ck_x509_make. */
typedef struct ck_x509_spec {
	const char *cn;         /* subject common name (required) */
	const char *org;        /* subject organization (Kubernetes reads it as a group), or NULL */
	const char *const *dns; /* subject alternative names */
	size_t ndns;
	const char *const *ips; /* textual IPv4 or IPv6 addresses */
	size_t nips;
	bool ca;       /* a certificate authority: may sign certificates, nothing else */
	bool server;   /* extended key usage TLS server */
	bool client;   /* extended key usage TLS client */
	unsigned days; /* valid from a minute ago for this many days */
	/* The signer, PEM; both NULL for a self-signed certificate. */
	const char *issuer_cert_pem;
	const char *issuer_key_pem;
} ck_x509_spec_t;

/*
 * Makes a new key and a certificate for it as s says. Borrows s. Returns 0 with new
 * PEM strings in *cert_pem and *key_pem (free the key with ck_secret_free), or -1
 * with *err ("<cn>: <step>: <GnuTLS message>", or naming an address in s->ips that
 * is neither IPv4 nor IPv6).
 */
int ck_x509_make(const ck_x509_spec_t *s, char **cert_pem, char **key_pem, char **err);

/* A new ECDSA P-256 private key alone (PEM in *key_pem, free with ck_secret_free):
 * 0, or -1 with *err. */
int ck_x509_key(char **key_pem, char **err);

#endif
