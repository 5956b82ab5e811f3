/*
 * config_creds: the credentials a client asks for: token files (re-read as they
 * rotate), the cached exec output, static values, and ck_cred_t. Separate because
 * it is what the client's loop thread calls on every request start, so nothing in
 * it may block for long: it only takes the short lock (mu) unless the caller asks
 * for a blocking ck_config_credentials().
 *
 * Design note. Credentials that change are produced by ck_config_credentials_peek()
 * and ck_config_exec_run() (ck_config_credentials() is both, blocking), which cache
 * them and bump a generation number whenever what they return changes, so that
 * the transport knows when to rebuild its TLS handle and headers.
 */
#include "pkg/clientcmd/config_internal.h"

#include <stdlib.h>
#include <string.h>

/* client-go re-reads token files once a minute (bound service-account tokens rotate). */
#define TOKEN_REREAD_NS (60 * CK_NS_PER_SEC)

/* Returns a new NUL-terminated copy of n bytes of p (which may hold NULs: PEM data
 * decoded from base64 can), or NULL when p is NULL. */
static char *mem_dup(const char *p, size_t n)
{
	if (p == NULL)
		return NULL;
	char *d = ck_xmalloc(n + 1);
	memcpy(d, p, n);
	d[n] = '\0';
	return d;
}

/* Reads a token file: trimmed, non-empty, header-safe. Returns a new string or NULL. */
char *ck_config_i_token_file_read(const char *path, char **err)
{
	char *raw = NULL;
	size_t len = 0;
	if (ck_file_read_bounded(path, CK_FILE_MAX_BYTES, &raw, &len, err) < 0)
		return NULL;
	char *tok = ck_config_i_dup_trimmed(raw, len);
	ck_secret_free(raw, len);
	if (*tok == '\0') {
		ck_err_set(err, "%s: the token file is empty", path);
	} else if (!ck_config_i_token_ok(tok)) {
		ck_err_set(err, "%s: the token contains control characters", path);
	} else {
		return tok;
	}
	ck_secret_free(tok, 0);
	return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Credentials                                                                                */

/* Re-reads the token file when due (or when forced). Call with mu held. */
static void token_file_refresh(ck_config_t *c, bool force)
{
	if (c->token_path == NULL)
		return;
	uint64_t now = ck_clk_mono_ns(c->clock);
	if (!force && now - c->file_read_mono < TOKEN_REREAD_NS)
		return;
	/* A failed read keeps the last good token and is retried on the next call
	 * (bound tokens are rewritten atomically, so this is rare). */
	char *tok = ck_config_i_token_file_read(c->token_path, NULL);
	if (tok == NULL)
		return;
	c->file_read_mono = now;
	if (!ck_config_i_str_eq(tok, c->file_token)) {
		ck_secret_free(c->file_token, 0);
		c->file_token = tok;
		tok = NULL;
		c->generation = ck_config_i_generation_next(c->generation);
	}
	ck_secret_free(tok, 0);
}

int ck_config_credentials_peek(ck_config_t *c, ck_cred_want_t want, ck_cred_t *out, char **err)
{
	int result = -1;
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&c->mu);
	token_file_refresh(c, want == CK_CRED_REFRESH);

	if (c->has_exec) {
		bool expired =
		    c->exec_expiry_wall != 0 && ck_clk_wall_ns(c->clock) >= c->exec_expiry_wall;
		bool need = !c->exec_cached;
		if (want == CK_CRED_CURRENT)
			need = need || expired;
		else if (want == CK_CRED_REFRESH)
			need = true;
		if (need) {
			if (c->exec_failed && ck_clk_mono_ns(c->clock) < c->exec_retry_mono) {
				ck_err_set(err, "%s", c->exec_last_err);
				goto out;
			}
			result = CK_CONFIG_NEED_EXEC;
			goto out;
		}
	}

	/* Static values win: a token set in the kubeconfig over tokenFile (handled at
	 * load) and over the plugin's, as client-go keeps an Authorization header. */
	const char *tok = c->token ? c->token : c->file_token ? c->file_token : c->exec_token;
	out->token = ck_xstrdup(tok);
	if (c->cert_pem) {
		out->cert_pem = mem_dup(c->cert_pem, c->cert_len);
		out->cert_len = c->cert_len;
		out->key_pem = mem_dup(c->key_pem, c->key_len);
		out->key_len = c->key_len;
	} else if (c->exec_cert) {
		out->cert_pem = mem_dup(c->exec_cert, c->exec_cert_len);
		out->cert_len = c->exec_cert_len;
		out->key_pem = mem_dup(c->exec_key, c->exec_key_len);
		out->key_len = c->exec_key_len;
	}
	out->generation = c->generation;
	result = 0;
out:
	pthread_mutex_unlock(&c->mu);
	return result;
}

int ck_config_credentials(ck_config_t *c, bool force_refresh, ck_cred_t *out, char **err)
{
	/* exec_mu around the peek too: a second caller waits for the first one's run
	 * and then finds its credential cached, instead of running the plugin again. */
	pthread_mutex_lock(&c->exec_mu);
	int r = ck_config_credentials_peek(c, force_refresh ? CK_CRED_REFRESH : CK_CRED_CURRENT,
	                                   out, err);
	if (r == CK_CONFIG_NEED_EXEC) {
		r = ck_config_i_exec_refresh(c, err);
		if (r == 0)
			r = ck_config_credentials_peek(c, CK_CRED_LAST, out, err);
		if (r == CK_CONFIG_NEED_EXEC) /* cannot happen after a good run; never loop */
			r = ck_err_set(err, "%s: exec plugin: no credential", c->where);
	}
	pthread_mutex_unlock(&c->exec_mu);
	return r;
}

void ck_cred_clear(ck_cred_t *cr)
{
	if (cr == NULL)
		return;
	ck_secret_free(cr->token, 0);
	free(cr->cert_pem);
	ck_secret_free(cr->key_pem, cr->key_len);
	memset(cr, 0, sizeof(*cr));
}
