/*
 * metrics internals shared by the files of pkg/metrics (and reached by the unit
 * tests); not part of the public API: the owned collector (registry.c), the
 * serving certificate (tls.c) kept current (certwatch.c) and the
 * authentication/authorization decision cache (auth.c).
 */
#ifndef CKUBE_METRICS_METRICS_INTERNAL_H
#define CKUBE_METRICS_METRICS_INTERNAL_H

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>

#include <ckube/metrics.h>

/* Like ck_metrics_registry_add_collector, but takes ud: free_ud(ud) runs at registry free. */
void metrics_registry_add_collector_owned(ck_metrics_registry_t *reg, ck_metrics_collector_fn fn,
                                          void *ud, void (*free_ud)(void *));

/* How long a self-signed certificate is valid. */
#define CK_METRICS_I_SELF_SIGNED_DAYS 365

/*
 * A self-signed serving certificate: ECDSA P-256, valid from a minute ago for
 * CK_METRICS_I_SELF_SIGNED_DAYS, SANs localhost, 127.0.0.1, ::1 and host (skipped when NULL, empty
 * or not a DNS name). Returns 0 with new PEM strings in *cert_pem and *key_pem, or -1 with *err.
 */
int ck_metrics_i_self_signed(const char *host, char **cert_pem, char **key_pem, char **err);

/*
 * Reads dir/cert_name and dir/key_name (PEM) and checks that they load as one key
 * pair. Returns 0 with new strings, or -1 with *err naming the file.
 */
int ck_metrics_i_load_pair(const char *dir, const char *cert_name, const char *key_name,
                           char **cert_pem, char **key_pem, char **err);

/* The serving certificate of a secure server, reloaded or renewed while it runs. */
typedef struct ck_metrics_certs ck_metrics_certs_t;

/*
 * Loads so's certificate directory, or makes a self-signed certificate, and starts
 * the thread that keeps it current. Borrows so. Returns 0 with a new watcher in
 * *out (free with ck_metrics_i_certs_free after the server stopped), or -1 with
 * *err naming the file.
 */
int ck_metrics_i_certs_new(const ck_metrics_secure_opts_t *so, ck_metrics_certs_t **out,
                           char **err);
/* Takes w (may be NULL): stops the thread, frees the credentials. */
void ck_metrics_i_certs_free(ck_metrics_certs_t *w);
/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION callback; cls is the watcher. */
void ck_metrics_i_certs_on_connection(void *cls, struct MHD_Connection *connection,
                                      void **socket_context,
                                      enum MHD_ConnectionNotificationCode toe);
/* libmicrohttpd's MHD_OPTION_HTTPS_CERT_CALLBACK: the current certificate and key. */
int ck_metrics_i_certs_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn,
                                int nreqs, const gnutls_pk_algorithm_t *pk_algos,
                                int pk_algos_length, gnutls_pcert_st **pcert,
                                unsigned int *pcert_length, gnutls_privkey_t *privkey);

typedef struct ck_metrics_auth ck_metrics_auth_t;

/*
 * Borrows o (copies the reviewer and the options) and reg (may be NULL; must outlive
 * the cache: its counters of reviews and 429s are registered there). Returns a new
 * cache.
 */
ck_metrics_auth_t *ck_metrics_i_auth_new(const ck_metrics_secure_opts_t *o,
                                         ck_metrics_registry_t *reg);
/* Takes a (may be NULL). */
void ck_metrics_i_auth_free(ck_metrics_auth_t *a);

/*
 * The decision for one request, from the cache or the reviewer. Borrows every
 * argument; header is the Authorization header's value or NULL. Returns the HTTP
 * status (200 to serve, 401, 403, 429 or 500) and, for the others, appends the body
 * (Go's http.Error text) to body. 429: a review was needed and its rate limit is
 * spent; *retry_after gets the seconds to wait (0 for every other status).
 * Thread-safe; a review runs outside the lock.
 */
int ck_metrics_i_auth_check(ck_metrics_auth_t *a, const char *header, const char *path,
                            const char *verb, ck_sbuf_t *body, int *retry_after);

/* How many reviews a has asked the reviewer for, and how many requests it answered
 * 429, so far (for tests; throttled may be NULL). */
void ck_metrics_i_auth_counts(ck_metrics_auth_t *a, unsigned long *authn, unsigned long *authz,
                              unsigned long *throttled);

#endif
