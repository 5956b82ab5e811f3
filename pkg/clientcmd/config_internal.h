/*
 * config_internal: what the files of the configuration loader (config*.c) share;
 * not a public header. The ck_config_t object, the merged set of kubeconfig files,
 * and the functions one concern's file calls in another's. Everything here is
 * hidden from the library's API (-fvisibility=hidden, no CKUBE_API); the
 * ck_config_i_ prefix marks what is shared only between these files.
 *
 *   config.c             load (the search order), view, free; small helpers
 *   config_kubeconfig.c  kubeconfig YAML: parsing, merging, resolving a context
 *   config_incluster.c   the in-cluster service account
 *   config_exec.c        the exec credential plugin runner and its cache
 *   config_creds.c       credentials: token files, the cache peek, ck_cred_t
 */
#ifndef CKUBE_CLIENTCMD_CONFIG_INTERNAL_H
#define CKUBE_CLIENTCMD_CONFIG_INTERNAL_H

#include <ckube/config.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

struct ck_config {
	/* What ck_config_view() exposes. */
	char *server;
	char *source;
	char *context;
	char *cluster;
	char *user;
	char *namespace;
	char *ca_pem;
	size_t ca_len;
	bool insecure;
	char *tls_server_name;
	char *proxy_url;
	char *username;
	char *password;

	/* Prefix for credential errors: `kubeconfig /x: user "bob"` or `in-cluster`. */
	char *where;
	const ck_clk_t *clock;
	pthread_mutex_t mu;      /* everything below that changes */
	pthread_mutex_t exec_mu; /* held for a whole plugin run; taken before mu, never after */

	/* Static credentials, read at load. */
	char *token;
	char *cert_pem;
	size_t cert_len;
	char *key_pem;
	size_t key_len;

	/* A token file (tokenFile, or the in-cluster token): last good token. */
	char *token_path;
	char *file_token;
	uint64_t file_read_mono;

	/* An exec plugin and its cached output. */
	bool has_exec;
	ck_exec_config_t exec;
	char *exec_info; /* KUBERNETES_EXEC_INFO, built once at load */
	uint32_t exec_timeout_ms;
	bool exec_cached;
	char *exec_token;
	char *exec_cert;
	size_t exec_cert_len;
	char *exec_key;
	size_t exec_key_len;
	int64_t exec_expiry_wall; /* 0 = no expiry */
	/* The last run failed: no new run before exec_retry_mono; peeks fail with
	 * exec_last_err instead. exec_backoff_ns is the current step. */
	bool exec_failed;
	uint64_t exec_retry_mono;
	uint64_t exec_backoff_ns;
	char *exec_last_err;
	atomic_bool exec_cancelled; /* ck_config_exec_cancel(): runs stop, for good */

	unsigned generation; /* 0 while nothing can change */
};

typedef struct kubeconfig_file {
	char *path;
	char *dir;
	yaml_document_t doc;
} kubeconfig_file_t;

typedef struct kubeconfig_entry {
	const char *name;  /* borrowed from the document */
	yaml_node_t *body; /* the "cluster"/"user"/"context" mapping, or NULL */
	kubeconfig_file_t *file;
} kubeconfig_entry_t;

typedef struct kubeconfig_list {
	kubeconfig_entry_t *v;
	size_t n, cap;
} kubeconfig_list_t;

/* Every loaded file, merged: the first file that names an entry wins. */
typedef struct kubeconfig_set {
	kubeconfig_file_t **files;
	size_t nfiles;
	kubeconfig_list_t clusters, users, contexts;
	const char *current; /* current-context, borrowed */
	kubeconfig_file_t *current_file;
} kubeconfig_set_t;

/* config.c: helpers, and what every source of a configuration ends with. */

bool ck_config_i_is_space(char ch);
/* Returns a new string: s without leading and trailing white space. */
char *ck_config_i_dup_trimmed(const char *s, size_t n);
/* A bearer token goes into an HTTP header: it must not be able to break the header. */
bool ck_config_i_token_ok(const char *t);
bool ck_config_i_str_eq(const char *a, const char *b);
unsigned ck_config_i_generation_next(unsigned g);
/*
 * Parses len bytes of a plugin's ExecCredential output into c's credential cache
 * (the generation moves on only when the credential changed). Borrows text. Returns
 * 0, or -1 with *err, which never quotes the output (it may hold a secret).
 */
int ck_config_i_exec_parse(ck_config_t *c, const char *text, size_t len, char **err);
ck_config_t *ck_config_i_kconfig_new(const ck_config_load_opts_t *o);
/* Normalizes the server and finishes a config; where names the source for messages. */
int ck_config_i_finish_server(ck_config_t *c, const char *master, const char *where, char **err);
/* A config with only a server and no credentials (--master and nothing else). */
ck_config_t *ck_config_i_master_only(const ck_config_load_opts_t *o, const char *source,
                                     char **err);

/* config_kubeconfig.c: the merged set of kubeconfig files. */

void ck_config_i_kubeconfig_set_free(kubeconfig_set_t *s);
bool ck_config_i_kubeconfig_set_empty(const kubeconfig_set_t *s);
/* Parses one kubeconfig text into the set. Returns 0 or -1 with *err naming the file. */
int ck_config_i_kubeconfig_set_add_text(kubeconfig_set_t *s, const char *text, size_t len,
                                        const char *path, char **err);
/* Reads and adds a file. *missing (if given) is set and 0 returned when it does not exist. */
int ck_config_i_kubeconfig_set_add_file(kubeconfig_set_t *s, const char *path, bool *missing,
                                        char **err);
/* Resolves the chosen context (o->context, else current-context) into a config. */
ck_config_t *ck_config_i_kubeconfig_set_resolve(kubeconfig_set_t *s, const ck_config_load_opts_t *o,
                                                char **err);

/* config_incluster.c. */

/* The service-account folder: o->sa_dir, $CKUBE_SERVICEACCOUNT_DIR or the default. */
const char *ck_config_i_sa_dir_of(const ck_config_load_opts_t *o);
/* Like client-go's "possible": both variables set and a token file present. */
bool ck_config_i_in_cluster_possible(const ck_config_load_opts_t *o);
ck_config_t *ck_config_i_in_cluster_load(const ck_config_load_opts_t *o, char **err);

/* config_exec.c. */

/* Runs the plugin and records the outcome (exec_mu held, mu not). 0, or -1 with *err. */
int ck_config_i_exec_refresh(ck_config_t *c, char **err);

/* config_creds.c. */

/* Reads a token file: trimmed, non-empty, header-safe. Returns a new string or NULL. */
char *ck_config_i_token_file_read(const char *path, char **err);

#endif
