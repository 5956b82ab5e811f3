/*
 * certwatch: the secure server's serving certificate, kept current while the
 * server runs, as controller-runtime's certwatcher keeps its own.
 *
 * Design note. libmicrohttpd asks for the certificate at every TLS handshake
 * (MHD_OPTION_HTTPS_CERT_CALLBACK), so a new certificate only has to replace the
 * current one to be served to every new connection; connections already made keep
 * theirs. A thread looks every interval (10 s by default, certwatcher's polling
 * period). With a certificate directory it compares the files' identity (device,
 * inode, size, mtime, ctime, after following links: the kubelet updates a mounted
 * Secret by swapping a directory link, which changes the inode) and loads the pair
 * again when either changed. A pair that does not load, such as a certificate
 * written before its key, keeps the current one and logs an error once per change;
 * the next change is tried again. Without a directory, the self-signed certificate
 * is made again RENEW_BEFORE_DAYS before it expires (by the options' clock).
 *
 * Lifetime. GnuTLS borrows the certificate and key the callback returns for the
 * whole handshake and does not say when that ends. So each connection holds a
 * reference to the credentials it was given, dropped when libmicrohttpd reports
 * the connection closed, and replaced credentials are freed by the last one. The
 * callback has no closure argument: it finds its connection through the session's
 * pointer (libmicrohttpd sets it to the connection) and the certificates through
 * the connection's socket context, which on_connection sets before any handshake.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ckube/log.h>

#include "pkg/metrics/metrics_internal.h"

enum { MAX_CHAIN = 8, DEFAULT_INTERVAL_MS = 10000, RENEW_BEFORE_DAYS = 30 };
#define DAY_NS ((int64_t)24 * 3600 * 1000000000)

/* One certificate chain and its key, shared by the connections handed it. */
struct cred {
	gnutls_pcert_st pcert[MAX_CHAIN];
	unsigned npcert;
	gnutls_privkey_t key;
	unsigned refs; /* under certs->lock: one for being current, one per connection */
};

/* What identifies a file's content without reading it; ok = 0 when stat failed. */
struct file_id {
	int ok;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtim, ctim;
};

struct ck_metrics_certs {
	pthread_mutex_t lock; /* cur, every cred's refs, stop */
	pthread_cond_t wake;  /* stop was set */
	struct cred *cur;
	int stop;
	/* The watcher thread's own. */
	char *dir, *cert_name, *key_name; /* dir NULL: self-signed */
	struct file_id seen[2];
	int64_t renew_at_ns; /* self-signed: the clock's wall time to make a new one */
	const ck_clk_t *clk;
	int64_t interval_ms;
	pthread_t thread;
	int thread_started;
};

/* A connection's context: which credentials its handshake was given. */
struct conn {
	ck_metrics_certs_t *certs;
	struct cred *used;
};

static void cred_free(struct cred *c)
{
	for (unsigned i = 0; i < c->npcert; i++)
		gnutls_pcert_deinit(&c->pcert[i]);
	if (c->key != NULL)
		gnutls_privkey_deinit(c->key);
	free(c);
}

/* Drops one reference; call with the lock held. c may be NULL. */
static void cred_unref_locked(struct cred *c)
{
	if (c != NULL && --c->refs == 0)
		cred_free(c);
}

/* Borrows the PEM strings; returns new credentials (one reference) or NULL with *err. */
static struct cred *cred_new(const char *cert_pem, const char *key_pem, char **err)
{
	struct cred *c = ck_xcalloc(1, sizeof(*c));
	gnutls_datum_t cd = {(unsigned char *)cert_pem, (unsigned)strlen(cert_pem)};
	gnutls_datum_t kd = {(unsigned char *)key_pem, (unsigned)strlen(key_pem)};
	unsigned n = MAX_CHAIN;
	int rc = gnutls_pcert_list_import_x509_raw(c->pcert, &n, &cd, GNUTLS_X509_FMT_PEM, 0);
	if (rc < 0) {
		ck_err_set(err, "certificate: %s", gnutls_strerror(rc));
		goto fail;
	}
	c->npcert = n;
	if ((rc = gnutls_privkey_init(&c->key)) < 0 ||
	    (rc = gnutls_privkey_import_x509_raw(c->key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
		ck_err_set(err, "key: %s", gnutls_strerror(rc));
		goto fail;
	}
	c->refs = 1;
	return c;
fail:
	cred_free(c);
	return NULL;
}

/* Makes c current; the previous one goes when its last connection does. Takes c. */
static void certs_swap(ck_metrics_certs_t *w, struct cred *c)
{
	pthread_mutex_lock(&w->lock);
	struct cred *old = w->cur;
	w->cur = c;
	cred_unref_locked(old);
	pthread_mutex_unlock(&w->lock);
}

static void file_id_get(const char *dir, const char *name, struct file_id *id)
{
	char *path = ck_xasprintf("%s/%s", dir, name);
	struct stat st;
	memset(id, 0, sizeof(*id));
	if (stat(path, &st) == 0)
		*id = (struct file_id){1, st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
	free(path);
}

static int file_id_eq(const struct file_id *a, const struct file_id *b)
{
	return a->ok == b->ok && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtim.tv_sec == b->mtim.tv_sec && a->mtim.tv_nsec == b->mtim.tv_nsec &&
	       a->ctim.tv_sec == b->ctim.tv_sec && a->ctim.tv_nsec == b->ctim.tv_nsec;
}

/* Reads the directory's pair into new credentials; NULL with *err naming the files. */
static struct cred *load_dir(ck_metrics_certs_t *w, char **err)
{
	char *cert = NULL, *key = NULL;
	struct cred *c = NULL;
	if (ck_metrics_i_load_pair(w->dir, w->cert_name, w->key_name, &cert, &key, err) == 0)
		c = cred_new(cert, key, err);
	free(cert);
	ck_secret_free(key, 0);
	return c;
}

/* A new self-signed certificate; NULL with *err. Sets when to make the next one. */
static struct cred *make_self_signed(ck_metrics_certs_t *w, char **err)
{
	char host[256] = "", *cert = NULL, *key = NULL;
	struct cred *c = NULL;
	if (gethostname(host, sizeof(host) - 1) != 0)
		host[0] = '\0';
	if (ck_metrics_i_self_signed(host, &cert, &key, err) == 0)
		c = cred_new(cert, key, err);
	if (c != NULL)
		w->renew_at_ns = ck_clk_wall_ns(w->clk) +
		                 (CK_METRICS_I_SELF_SIGNED_DAYS - RENEW_BEFORE_DAYS) * DAY_NS;
	free(cert);
	ck_secret_free(key, 0);
	return c;
}

/* One look: reloads or renews when due. Watcher thread only. */
static void certs_check(ck_metrics_certs_t *w)
{
	char *err = NULL;
	struct cred *c = NULL;
	if (w->dir == NULL) {
		if (ck_clk_wall_ns(w->clk) < w->renew_at_ns)
			return;
		if ((c = make_self_signed(w, &err)) == NULL) {
			/* Tried again at the next look; the current one is still valid. */
			CK_LOG_ERROR(err,
			             "Cannot renew the metrics server's self-signed certificate");
			goto out;
		}
		CK_LOG_INFO("Renewed the metrics server's self-signed certificate");
		certs_swap(w, c);
		goto out;
	}
	struct file_id now[2];
	file_id_get(w->dir, w->cert_name, &now[0]);
	file_id_get(w->dir, w->key_name, &now[1]);
	if (file_id_eq(&now[0], &w->seen[0]) && file_id_eq(&now[1], &w->seen[1]))
		return;
	/* Remembered even when the pair does not load: one error per change, not one
	 * per look. */
	w->seen[0] = now[0];
	w->seen[1] = now[1];
	if ((c = load_dir(w, &err)) == NULL) {
		CK_LOG_ERROR(
		    err, "Cannot reload the metrics serving certificate; keeping the one in use",
		    CK_KV_STR("dir", w->dir));
		goto out;
	}
	CK_LOG_INFO("Reloaded the metrics serving certificate", CK_KV_STR("dir", w->dir));
	certs_swap(w, c);
out:
	free(err);
}

static void *watch_main(void *arg)
{
	ck_metrics_certs_t *w = arg;
	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		int64_t ns = until.tv_nsec + (w->interval_ms % 1000) * 1000000;
		until.tv_sec += (time_t)(w->interval_ms / 1000 + ns / 1000000000);
		until.tv_nsec = (long)(ns % 1000000000);
		pthread_cond_timedwait(&w->wake, &w->lock, &until);
		if (w->stop)
			break;
		pthread_mutex_unlock(&w->lock);
		certs_check(w);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int ck_metrics_i_certs_new(const ck_metrics_secure_opts_t *so, ck_metrics_certs_t **out, char **err)
{
	int result = -1;
	ck_metrics_certs_t *w = ck_xcalloc(1, sizeof(*w));
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&w->lock, NULL);
	w->clk = so->clock ? so->clock : ck_clk_real();
	w->interval_ms = so->reload_interval_ms > 0 ? so->reload_interval_ms : DEFAULT_INTERVAL_MS;
	*out = NULL;
	if (so->cert_dir != NULL && so->cert_dir[0] != '\0') {
		w->dir = ck_xstrdup(so->cert_dir);
		w->cert_name =
		    ck_xstrdup(so->cert_name && so->cert_name[0] ? so->cert_name : "tls.crt");
		w->key_name =
		    ck_xstrdup(so->key_name && so->key_name[0] ? so->key_name : "tls.key");
		/* Identified before reading: a change in between is read again later. */
		file_id_get(w->dir, w->cert_name, &w->seen[0]);
		file_id_get(w->dir, w->key_name, &w->seen[1]);
		w->cur = load_dir(w, err);
	} else {
		w->cur = make_self_signed(w, err);
	}
	if (w->cur == NULL)
		goto out;
	/* pthread_create returns its error; errno is not set. */
	int rc = pthread_create(&w->thread, NULL, watch_main, w);
	if (rc != 0) {
		ck_err_set(err, "starting the certificate watcher: %s", strerror(rc));
		goto out;
	}
	w->thread_started = 1;
	*out = w;
	w = NULL;
	result = 0;
out:
	ck_metrics_i_certs_free(w);
	return result;
}

void ck_metrics_i_certs_free(ck_metrics_certs_t *w)
{
	if (w == NULL)
		return;
	if (w->thread_started) {
		pthread_mutex_lock(&w->lock);
		w->stop = 1;
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
	}
	/* The server is stopped: every connection has closed and dropped its reference. */
	pthread_mutex_lock(&w->lock);
	cred_unref_locked(w->cur);
	pthread_mutex_unlock(&w->lock);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w->dir);
	free(w->cert_name);
	free(w->key_name);
	free(w);
}

void ck_metrics_i_certs_on_connection(void *cls, struct MHD_Connection *connection,
                                      void **socket_context,
                                      enum MHD_ConnectionNotificationCode toe)
{
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		struct conn *cc = ck_xcalloc(1, sizeof(*cc));
		cc->certs = cls;
		*socket_context = cc;
		return;
	}
	struct conn *cc = *socket_context;
	if (cc == NULL)
		return;
	pthread_mutex_lock(&cc->certs->lock);
	cred_unref_locked(cc->used);
	pthread_mutex_unlock(&cc->certs->lock);
	free(cc);
	*socket_context = NULL;
}

int ck_metrics_i_certs_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn,
                                int nreqs, const gnutls_pk_algorithm_t *pk_algos,
                                int pk_algos_length, gnutls_pcert_st **pcert,
                                unsigned int *pcert_length, gnutls_privkey_t *privkey)
{
	struct MHD_Connection *conn = gnutls_session_get_ptr(session);
	const union MHD_ConnectionInfo *ci =
	    conn ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT) : NULL;
	struct conn *cc = ci ? ci->socket_context : NULL;
	if (cc == NULL)
		return -1; /* not a connection of ours: fail the handshake rather than guess */
	pthread_mutex_lock(&cc->certs->lock);
	struct cred *c = cc->certs->cur;
	c->refs++;
	/* A second handshake on one connection: the first one's credentials are done. */
	cred_unref_locked(cc->used);
	cc->used = c;
	pthread_mutex_unlock(&cc->certs->lock);
	*pcert = c->pcert;
	*pcert_length = c->npcert;
	*privkey = c->key;
	return 0;
}
