/*
 * envtest internals shared by the files of pkg/envtest (and reached by the unit
 * tests); not part of the public API: the servers' processes and the pids file
 * (proc.c), the certificates and kubeconfig (pki.c), a client on a loop thread of
 * its own (conn.c) and the CRDs (crd.c).
 */
#ifndef CKUBE_ENVTEST_ENVTEST_INTERNAL_H
#define CKUBE_ENVTEST_ENVTEST_INTERNAL_H

#include <ckube/client.h>
#include <ckube/envtest.h>

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The prefix of every environment's directory name. */
#define CK_ENVTEST_I_PREFIX "ckube-envtest."

/* ---- proc.c */

/* One process recorded in a pids file. */
typedef struct ck_envtest_proc {
	char role[32];            /* "owner", "etcd", "kube-apiserver" */
	pid_t pid;                /* 0: none (a detached environment's owner) */
	unsigned long long start; /* /proc/<pid>/stat's starttime, to tell a reused PID */
} ck_envtest_proc_t;

/* The start time of pid, or 0 when it is gone (or a zombie). */
unsigned long long ck_envtest_i_proc_start(pid_t pid);

/*
 * Starts argv (argv[0] a path) with stdin /dev/null and stdout and stderr appended
 * to log_path, every other descriptor closed, in a process group of its own; with
 * SIGKILL as its parent-death signal unless detach. Borrows everything. Returns
 * the PID, or -1 with *err.
 */
pid_t ck_envtest_i_spawn(char *const *argv, const char *log_path, bool detach, char **err);

/* Appends "<role> <pid> <start>\n" to dir/pids (fsynced). 0, or -1 with *err. */
int ck_envtest_i_record(const char *dir, const char *role, pid_t pid, char **err);

/* Reads dir/pids into *procs (new array, free with free()). 0, or -1 with *err. */
int ck_envtest_i_read_pids(const char *dir, ck_envtest_proc_t **procs, size_t *n, char **err);

/*
 * Stops the recorded servers of dir still alive and the same processes (start time,
 * command line naming dir): SIGTERM, up to grace_ms, then SIGKILL; reaps them when
 * they are our children. Returns how many were signalled.
 */
int ck_envtest_i_stop_procs(const char *dir, const ck_envtest_proc_t *procs, size_t n,
                            uint32_t grace_ms);

/* rm -rf dir (not following symbolic links). 0, or -1 with *err naming the path. */
int ck_envtest_i_remove_tree(const char *dir, char **err);

/* Cleans up the stale environments of this user under parent (see envtest.h);
 * skip is the caller's own directory or NULL. Logs one line per cleaned one. */
void ck_envtest_i_clean_stale(const char *parent, const char *skip);

/* 0 when 127.0.0.1:port can be bound (port 0: a free one is chosen into *port),
 * or -1 with *err naming the port and what for. */
int ck_envtest_i_port(uint16_t *port, const char *what, char **err);

/* ---- pki.c */

/* Writes dir/pki/ (CA, serving, admin client certificates, SA key) and
 * dir/kubeconfig for server. 0, or -1 with *err. */
int ck_envtest_i_pki(const char *dir, const char *server, char **err);

/* ---- conn.c: a client whose loop runs on a thread of its own. */
typedef struct ck_envtest_conn ck_envtest_conn_t;

/* Takes cfg. Returns a new connection (free with ck_envtest_i_conn_free) or NULL
 * with *err. */
ck_envtest_conn_t *ck_envtest_i_conn_new(ck_config_t *cfg, char **err);
/* The client, for *_sync calls from the caller's thread (borrowed). */
ck_client_t *ck_envtest_i_conn_client(ck_envtest_conn_t *k);
/* Takes k (NULL is a no-op): stops the loop thread, frees the client. */
void ck_envtest_i_conn_free(ck_envtest_conn_t *k);

/* ---- crd.c */

/* CRDs read from files, checked, not yet sent. */
typedef struct ck_envtest_crds ck_envtest_crds_t;

/*
 * Reads the CRDs of paths (files or folders). Borrows paths. Returns a new list
 * (free with ck_envtest_i_crds_free), or NULL with *err naming the path, the file,
 * the document and what is wrong with it.
 */
ck_envtest_crds_t *ck_envtest_i_crds_read(const char *const *paths, size_t n, char **err);
/* Takes l (NULL is a no-op). */
void ck_envtest_i_crds_free(ck_envtest_crds_t *l);
/* How many CRDs l holds; the i-th's name and "<file>: document N (line L)"
 * (borrowed from l). For the unit tests. */
size_t ck_envtest_i_crds_len(const ck_envtest_crds_t *l);
const char *ck_envtest_i_crds_at(const ck_envtest_crds_t *l, size_t i, const char **where);

/*
 * Applies every CRD of l, then waits up to timeout_ms for each to be Established and
 * served. Borrows both. 0, or -1 with *err naming the file, the document, the CRD
 * and, for a condition, its message.
 */
int ck_envtest_i_crds_install(ck_client_t *c, ck_envtest_crds_t *l, uint32_t timeout_ms,
                              char **err);

/* Monotonic milliseconds (the library's real clock). */
uint64_t ck_envtest_i_now_ms(void);
/* Sleeps ms milliseconds. */
void ck_envtest_i_sleep_ms(uint32_t ms);

#endif
