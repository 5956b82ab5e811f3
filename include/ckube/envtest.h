/*
 * envtest: a real etcd and kube-apiserver for a test, started in about three
 * seconds, as controller-runtime's envtest starts them.
 *
 *   ck_envtest_opts_t o = {.crd_paths = (const char *[]){"deploy/crd.yaml"}, .ncrd_paths = 1};
 *   ck_envtest_t *env = ck_envtest_start(&o, &err);      // ready, CRDs Established
 *   ck_client_t *c = ck_client_new(loop, ck_envtest_config(env, &err), NULL, &err);
 *   ...                        // or ck_envtest_client(env): one with a loop of its own
 *   ck_envtest_stop(env, &err);                           // nothing left behind
 *
 * What runs. etcd and kube-apiserver only: no controller-manager, scheduler or
 * node, so nothing reconciles built-in kinds (a Deployment gets no ReplicaSet, a
 * namespace is never finalized away, no default ServiceAccount is made), exactly as
 * in controller-runtime's envtest. Both listen on 127.0.0.1 only, on ports the
 * kernel finds free (or the ones given), and run as the calling user: no root, no
 * capability, nothing outside their directory.
 *
 * The directory. A fresh one per environment, "ckube-envtest.XXXXXX" under
 * opts.dir, else $TMPDIR, else /tmp (mode 0700), holding:
 *   pki/         ca.crt, apiserver.crt/.key (SANs 127.0.0.1, ::1, localhost),
 *                admin.crt/.key, sa.key; all made in-process with GnuTLS, ECDSA
 *                P-256 (three keys in a few milliseconds), valid for 7 days
 *   etcd/        etcd's data (--unsafe-no-fsync: a test's data need not survive a
 *                power cut, and fsync is most of etcd's start-up time)
 *   kubeconfig   the admin user by client certificate (files under pki/)
 *   pids         who started it and the servers' PIDs, for ck_envtest_stop_dir
 *                and for cleaning up after a crash
 *   etcd.log, kube-apiserver.log
 * Authentication is by client certificate: the admin certificate's organization is
 * system:masters, the group Kubernetes' RBAC lets do anything. A certificate and
 * not a token file because the serving certificate needs a CA anyway, and the
 * kubeconfig then carries no secret the server must also be told about.
 *
 * kube-apiserver's flags: --authorization-mode=RBAC (a test can check its
 * controller's Roles by impersonating or with a second, restricted user),
 * --disable-admission-plugins=ServiceAccount (nothing makes the default
 * ServiceAccount that the plugin would require of every Pod: controller-runtime
 * does the same), --service-account-issuer/-key-file/-signing-key-file (sa.key, so
 * TokenRequest works), --service-cluster-ip-range=10.0.0.0/24,
 * --endpoint-reconciler-type=none, --allow-privileged=true, --profiling=false; every
 * other admission plugin is the release's default. opts.apiserver_args adds more.
 *
 * Ready means: /readyz answers "ok" to the admin user, the namespace "default"
 * exists (namespaced objects can be created at once), and each CRD is Established
 * and its resource is served (a LIST of it answers 200). No ServiceAccount is waited
 * for: none is ever made without a controller-manager, and none is needed (above).
 *
 * A free port can be taken by another program between envtest's check and the
 * server's bind; the server then exits with "address already in use", and the start
 * is tried again with other ports (up to 3 times, logged). Fixed ports are not.
 *
 * CRDs: each path is a file or a folder; a folder's *.yaml, *.yml and *.json files
 * are read in name order (not its subfolders). A file holds one or more documents
 * separated by "---" lines, as kubectl reads them; each non-empty document must be
 * an apiextensions.k8s.io/v1 CustomResourceDefinition. Each is installed by
 * server-side apply (field manager "ckube-envtest", forced), so the API server
 * parses the YAML itself, exactly as kubectl apply --server-side does. A CRD that
 * is not Established within crd_timeout_ms, or whose NamesAccepted condition is
 * False (its names conflict with another CRD's), fails the start with an error
 * naming the file, the document, the CRD and the condition's message.
 *
 * The binaries, etcd and kube-apiserver, come from the first of these that is set,
 * and only from it (a wrong setting is an error, never a quiet switch to binaries of
 * another version found elsewhere):
 *   opts.assets_dir;
 *   $CKUBE_ENVTEST_ASSETS;
 *   the build cache: $CSC_CACHE_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/
 *   c-sample-controller, then k8s-<version>/bin, where the project's
 *   hack/build-k8s.sh and the installed `ckube-envtest assets` build them from the
 *   pinned Kubernetes version (CK_ENVTEST_KUBE_VERSION).
 * A missing binary is one line naming where it looked and how to get them:
 *   envtest: no executable etcd in /x (the assets directory given); run
 *   `ckube-envtest assets` to build etcd and kube-apiserver v1.37.2 into the build
 *   cache, or set CKUBE_ENVTEST_ASSETS to a directory that has both
 *
 * Environment: CKUBE_ENVTEST_ASSETS, CSC_CACHE_DIR, XDG_CACHE_HOME, HOME (the
 * binaries, above); TMPDIR (where directories are made when opts.dir is NULL). The
 * command adds CKUBE_ENVTEST_STATE_DIR and XDG_RUNTIME_DIR (cmd/ckube-envtest).
 *
 * Processes. The servers are children of the calling thread, in a process group of
 * their own (a terminal's ^C for the test does not reach them mid-stop). Unless
 * opts.detach, they get SIGKILL when that thread ends (Linux's parent-death
 * signal), so a test killed by SIGKILL leaves no server behind: call
 * ck_envtest_start from a thread that lives as long as the environment (the main
 * thread, or a suite's set-up). Stopping sends SIGTERM to the API server, waits up
 * to 5 s for it, then SIGKILL; then the same for etcd (together, the API server's
 * retries hold etcd's graceful stop for ~10 s); to the recorded PIDs only (each
 * checked to be the same process: start time and a command line naming the
 * directory); then removes the directory.
 *
 * After a crash. Every start first looks at the other ckube-envtest.* directories
 * of this user in the same parent: one whose starting process is gone, or a
 * detached one whose servers are all gone, is cleaned up as ck_envtest_stop_dir
 * would (its live servers stopped, the directory removed), and a one-line notice is
 * logged. An environment whose starter still runs (another test's), or a detached
 * one still serving (ckube-envtest's, until its stop), is left alone.
 *
 * Timings (Kubernetes v1.37.2, 2 cores shared with other work; `make envtest-test`
 * prints them, `ckube-envtest start -v 1` prints the steps): a start with
 * deploy/crd.yaml, until the CRD is served, takes 2.6-3.4 s warm; cold (the
 * binaries read from disk: a fresh copy, evicted from the page cache) 2.6-4.1 s; in
 * five runs each. Of that, certificates take ~8 ms, the API server until /readyz
 * ~2.5-3 s (rbac/bootstrap-roles is the last hook it waits for), a CRD ~70 ms.
 * Stop: 1.1 s (the API server ~1 s after SIGTERM, then etcd).
 *
 * Thread-safety: an environment is used by one thread at a time; its config may
 * be made and used on any thread.
 */
#ifndef CKUBE_ENVTEST_H
#define CKUBE_ENVTEST_H

#include <ckube/export.h>

#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/obj.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The Kubernetes version whose binaries are looked for in the build cache. */
#define CK_ENVTEST_KUBE_VERSION "v1.37.2"

typedef struct ck_envtest ck_envtest_t;

/* Options: zero or NULL members mean the default their comment names. */
typedef struct ck_envtest_opts {
	/* CRD files or folders to install before returning (see above). */
	const char *const *crd_paths;
	size_t ncrd_paths;
	/* A directory with etcd and kube-apiserver; NULL = $CKUBE_ENVTEST_ASSETS, then
	 * the build cache. */
	const char *assets_dir;
	/* Where the environment's directory is made; NULL = $TMPDIR, else /tmp. */
	const char *dir;
	/* Fixed ports on 127.0.0.1; 0 = one the kernel finds free. A fixed port that is
	 * in use fails the start at once, naming it. */
	uint16_t api_port;
	uint16_t etcd_port;
	/* Until /readyz says ok; default 60000. */
	uint32_t start_timeout_ms;
	/* For each CRD to be Established and served; default 30000. */
	uint32_t crd_timeout_ms;
	/* The servers outlive the calling thread and process (the ckube-envtest
	 * command): stop them with ck_envtest_stop_dir. */
	bool detach;
	/* More kube-apiserver flags ("--feature-gates=..."), after envtest's own. */
	const char *const *apiserver_args;
	size_t napiserver_args;
} ck_envtest_opts_t;

/*
 * Cleans up stale environments, then starts etcd and kube-apiserver, waits until
 * ready, installs opts' CRDs and waits until they are served. Borrows opts (NULL =
 * defaults). Returns a new environment (stop it with ck_envtest_stop), or NULL with
 * *err (one line: what failed, and where to look, e.g. the server's log, whose
 * last lines are included); on failure nothing it started is left running and its
 * directory is removed.
 */
CKUBE_API ck_envtest_t *ck_envtest_start(const ck_envtest_opts_t *opts, char **err);

/*
 * Installs more CRDs (files or folders, as opts.crd_paths) into a running
 * environment and waits until each is Established and served. Borrows every
 * argument. Returns 0, or -1 with *err naming the file, the document and the CRD.
 */
CKUBE_API int ck_envtest_install_crds(ck_envtest_t *e, const char *const *paths, size_t n,
                                      char **err);

/* Borrows e. Returns a new configuration for the admin user (free with
 * ck_config_free, or hand it to ck_client_new, which takes it), or NULL with *err. */
CKUBE_API ck_config_t *ck_envtest_config(const ck_envtest_t *e, char **err);
/*
 * A client for the admin user whose libev loop runs on a thread of envtest's own,
 * so a test needs no loop to make blocking (*_sync) calls from its own threads
 * (borrowed, valid until ck_envtest_stop; never free it). Options: no client-side
 * rate limit, user agent "ckube-envtest".
 */
CKUBE_API ck_client_t *ck_envtest_client(ck_envtest_t *e);
/* The kubeconfig file (borrowed, valid until ck_envtest_stop). */
CKUBE_API const char *ck_envtest_kubeconfig(const ck_envtest_t *e);
/* The environment's directory (borrowed, valid until ck_envtest_stop). */
CKUBE_API const char *ck_envtest_dir(const ck_envtest_t *e);
/* "https://127.0.0.1:<port>" (borrowed, valid until ck_envtest_stop). */
CKUBE_API const char *ck_envtest_server(const ck_envtest_t *e);
/* How long ck_envtest_start took, in milliseconds: from the call until ready with
 * the CRDs served (figures above). */
CKUBE_API uint64_t ck_envtest_start_ms(const ck_envtest_t *e);

/*
 * Takes e (NULL is a no-op): stops the servers (SIGTERM, up to 5 s, then SIGKILL),
 * reaps them and removes the directory. Returns 0, or -1 with *err when something
 * could not be removed (the servers are stopped regardless).
 */
CKUBE_API int ck_envtest_stop(ck_envtest_t *e, char **err);

/*
 * Takes e (NULL is a no-op): frees the handle only, leaving the servers running and
 * the directory in place: for a detached environment (the ckube-envtest command),
 * stopped later with ck_envtest_stop_dir(dir).
 */
CKUBE_API void ck_envtest_release(ck_envtest_t *e);

/*
 * Stops the environment recorded in dir (made by a start with opts.detach, maybe by
 * another process) and removes dir. Borrows dir. Only PIDs recorded in dir/pids
 * whose start time matches and whose command line names dir are signalled.
 * Returns 0, or -1 with *err (dir is not an envtest directory, or could not be
 * removed).
 */
CKUBE_API int ck_envtest_stop_dir(const char *dir, char **err);

/*
 * Waiting for a controller's effect, as controller-runtime's tests do with gomega's
 * Eventually: the condition is tried at once, then every 100 ms (the API server
 * answers a GET in about a millisecond; a controller's reconcile takes a few), until
 * it holds or timeout_ms has passed since the call. Blocking; any thread (a
 * ck_manager_run_with body, typically).
 */

/*
 * Polls cond(ud, &why) until it returns true: returns 0. After timeout_ms returns
 * -1 with *err "not within <timeout_ms> ms: <why>", why being the reason the last
 * call gave (a new string cond may set; each is freed here) or "the condition was
 * false". Borrows cond and ud; *err is a new string (free() it).
 */
CKUBE_API int ck_envtest_eventually(uint32_t timeout_ms, bool (*cond)(void *ud, char **why),
                                    void *ud, char **err);

/*
 * GETs t's object ns/name (ns NULL or "" for a cluster-scoped one) through c until
 * it exists and pred(ud, obj) is true (pred NULL: until it exists): returns 0.
 * After timeout_ms returns -1 with *err "<Kind> <ns>/<name>: not within <timeout_ms>
 * ms: " and the last GET's error, or "the predicate was false". Borrows every
 * argument; obj is borrowed for the call only; *err is a new string (free() it).
 * c is a client whose loop runs on another thread (ck_envtest_client's, or a
 * manager's).
 */
CKUBE_API int ck_envtest_get_eventually(ck_client_t *c, const ck_type_t *t, const char *ns,
                                        const char *name,
                                        bool (*pred)(void *ud, const ck_obj_t *obj), void *ud,
                                        uint32_t timeout_ms, char **err);

/*
 * Where the binaries are: the first of opts' order above that has both. Borrows
 * assets_dir (may be NULL). Returns a new string (free with free()), or NULL with
 * *err: the one line naming every place looked and how to get the binaries.
 */
CKUBE_API char *ck_envtest_assets(const char *assets_dir, char **err);

#endif
