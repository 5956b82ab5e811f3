/*
 * config: where the cluster is and how to authenticate, with client-go's
 * clientcmd semantics.
 *
 * Source order (ck_config_load): an explicit kubeconfig path alone (a missing file
 * is an error); else every file in $KUBECONFIG (colon-separated, merged: the
 * first file that sets a cluster/user/context or current-context wins; relative
 * paths resolve against the file's own folder; missing files are skipped); else
 * in-cluster (service account); else ~/.kube/config; else --master alone (a server
 * and no credentials). When $KUBECONFIG is set but names no existing (non-empty)
 * file, in-cluster or --master alone are tried and ~/.kube/config is not, as in
 * client-go. Then the optional context and --master overrides.
 *
 * Credentials that change over time (tokenFile, in-cluster token, exec plugins)
 * are fetched through ck_config_credentials(), which caches and refreshes them; or,
 * on a thread that must not block (the client's loop), through
 * ck_config_credentials_peek() with the plugin run by ck_config_exec_run() elsewhere.
 * Every error names the file and the field:
 *   kubeconfig /x/y: context "dev": user "bob" not found
 *
 * Files a configuration names (certificate-authority, client-certificate,
 * client-key, tokenFile, the service account's token, ca.crt and namespace) are
 * read with ck_file_read_bounded: regular files only, at most CK_FILE_MAX_BYTES
 * (1 MiB), never blocking on a FIFO, since the token file is re-read on the
 * client's loop thread. A server URL with user information (user:password@) is
 * refused, in a message that does not repeat it.
 */
#ifndef CKUBE_KUBE_CONFIG_H
#define CKUBE_KUBE_CONFIG_H

#include <ckube/export.h>

#include <ckube/base.h>

#include <stdbool.h>
#include <stddef.h>

typedef struct ck_exec_config {
	char *api_version; /* client.authentication.k8s.io/v1 or v1beta1 */
	char *command;
	char **args; /* NULL-terminated */
	char **env;  /* NULL-terminated "NAME=value", given to the child only */
	char *install_hint;
	bool provide_cluster_info;
	char *interactive_mode; /* Never / IfAvailable / Always */
} ck_exec_config_t;

typedef struct ck_config ck_config_t;

/* Read-only view of a loaded configuration; strings owned by the ck_config_t. */
struct ck_config_view {
	const char *server;    /* "https://127.0.0.1:6443" (no trailing slash) */
	const char *source;    /* "kubeconfig /path", "in-cluster", for messages */
	const char *context;   /* context name used, "" in-cluster */
	const char *cluster;   /* cluster name used */
	const char *user;      /* user name used */
	const char *namespace; /* context's namespace, or in-cluster namespace, or "" */
	const char *ca_pem;    /* CA bundle in memory (file or -data), NULL = system CAs */
	size_t ca_len;
	bool insecure; /* insecure-skip-tls-verify */
	const char *tls_server_name;
	const char *proxy_url;
	const char *username; /* basic auth, rarely used */
	const char *password;
	bool has_exec;
};

typedef struct ck_config_load_opts {
	const char *kubeconfig; /* --kubeconfig, or NULL */
	const char *context;    /* --context override, or NULL */
	const char *master;     /* --master override of the server, or NULL */
	/* Service-account folder; NULL = $CKUBE_SERVICEACCOUNT_DIR or
	 * /var/run/secrets/kubernetes.io/serviceaccount */
	const char *sa_dir;
	/* Clock for token re-reads and exec expiry; NULL = real. */
	const ck_clk_t *clock;
	/* Exec plugins are killed after this long; 0 = 30000 ms. */
	uint32_t exec_timeout_ms;
} ck_config_load_opts_t;

/* Borrows opts (NULL = all defaults). Returns a new config (free with ck_config_free())
 * or NULL with *err. Reads every file it needs (CA, client cert/key, tokenFile) now;
 * exec plugins run later, in ck_config_credentials(). */
CKUBE_API ck_config_t *ck_config_load(const ck_config_load_opts_t *opts, char **err);
/* Loads a single kubeconfig file's text (tests, tools); path is for messages and
 * relative paths. Returns a new config or NULL with *err. */
CKUBE_API ck_config_t *ck_config_load_text(const char *text, size_t len, const char *path,
                                           const ck_config_load_opts_t *opts, char **err);
/* Takes c; wipes the secrets it holds. NULL is a no-op. */
CKUBE_API void ck_config_free(ck_config_t *c);

/* Borrows c; fills *v with borrowed pointers valid until ck_config_free(). */
CKUBE_API void ck_config_view(const ck_config_t *c, struct ck_config_view *v);

/* Current credentials: copies owned by the caller, free with ck_cred_clear(). */
typedef struct ck_cred {
	char *token;    /* bearer token or NULL */
	char *cert_pem; /* client certificate PEM in memory or NULL */
	size_t cert_len;
	char *key_pem; /* client key PEM in memory or NULL */
	size_t key_len;
	/* Non-zero when the credential came from something that can change
	 * (tokenFile, exec, in-cluster); a changed generation means "reconnect".
	 * Zero (static): the client answers a 401 at once, without a retry. */
	unsigned generation;
} ck_cred_t;

/*
 * Returns the current credentials in *out (0), or -1 with *err. Re-reads a
 * tokenFile / in-cluster token at most once a minute (keeping the last good token
 * if a read fails); runs the exec plugin when it has no cached credential, when
 * the cached one expired, or when force_refresh (after a 401; force_refresh also
 * re-reads a token file at once). To avoid running a plugin once per failed
 * request, pass force_refresh only when the 401'd request used the current
 * generation; and after a failed run the plugin is not run again for a while (see
 * ck_config_credentials_peek). Thread-safe. Blocks while a plugin runs (up to
 * exec_timeout_ms): not for the client's loop thread.
 * A static token wins over tokenFile and over the plugin's token; a static client
 * certificate wins over the plugin's.
 */
CKUBE_API int ck_config_credentials(ck_config_t *c, bool force_refresh, ck_cred_t *out, char **err);

/* What ck_config_credentials_peek() is asked for. */
typedef enum ck_cred_want {
	CK_CRED_CURRENT, /* the cached credential, while it has not expired */
	CK_CRED_REFRESH, /* a new one, after a 401: re-read a token file now, run the plugin */
	/* What the last good plugin run gave, even if already expired: for the requests
	 * that waited for that run (otherwise a plugin that hands out short-lived
	 * credentials could make them wait for run after run). */
	CK_CRED_LAST,
} ck_cred_want_t;

/* ck_config_credentials_peek(): the exec plugin must run first. */
#define CK_CONFIG_NEED_EXEC 1

/*
 * ck_config_credentials() without ever running the plugin, for the loop thread.
 * Returns 0 with the credentials in *out (free with ck_cred_clear()); or
 * CK_CONFIG_NEED_EXEC when they need a plugin run first (nothing cached, expired, or
 * want == CK_CRED_REFRESH), and then *out is empty; or -1 with *err (new string,
 * free with free()). -1 is what a failed run leads to: for 1 s after a failure,
 * doubling with each further failure up to 30 s (a good run resets it), the answer
 * is that run's error (with the plugin's installHint), so that a broken plugin is
 * not run once per request. Token files are re-read here (one small file read, at
 * most once a minute). Thread-safe; holds a lock only briefly, never during a run.
 */
CKUBE_API int ck_config_credentials_peek(ck_config_t *c, ck_cred_want_t want, ck_cred_t *out,
                                         char **err);

/*
 * Runs the exec plugin now and caches what it returns, or records the failure for
 * the backoff above. Blocks up to exec_timeout_ms: call it on a thread of its own.
 * Runs never overlap (a second caller waits for the first). Returns 0, or -1 with
 * *err (new string, free with free()); -1 at once when c has no exec plugin.
 */
CKUBE_API int ck_config_exec_run(ck_config_t *c, char **err);

/*
 * For shutting down while a run may be in progress: the run in progress kills the
 * plugin (its whole process group) within 50 ms and fails with "cancelled", and so
 * does every later run, for good. Any thread; borrows c. Join the thread that runs
 * ck_config_exec_run() before ck_config_free().
 */
CKUBE_API void ck_config_exec_cancel(ck_config_t *c);
/* Borrows cr: wipes and frees its strings and zeroes it. NULL is a no-op. */
CKUBE_API void ck_cred_clear(ck_cred_t *cr);

#endif
