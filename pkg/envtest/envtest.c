/*
 * envtest: starting and stopping an environment (see <ckube/envtest.h>): the
 * binaries, the directory, the servers' command lines, the wait until ready.
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ckube/base.h>
#include <ckube/envtest.h>
#include <ckube/log.h>
#include <ckube/obj.h>

#include "pkg/envtest/envtest_internal.h"

#define DEFAULT_START_TIMEOUT_MS 60000
#define DEFAULT_CRD_TIMEOUT_MS   30000
/* SIGTERM, then this long before SIGKILL. */
#define STOP_GRACE_MS 5000

struct ck_envtest {
	char *dir;
	char *kubeconfig;
	char *server;
	pid_t etcd, apiserver;
	uint64_t start_ms;
	uint32_t crd_timeout_ms;
	ck_envtest_conn_t *conn;
};

static const ck_type_t t_ns = {
    .group = "", .version = "v1", .kind = "Namespace", .resource = "namespaces"};

/* The build cache's directory of binaries, as hack/build-k8s.sh lays it out. */
static char *cache_bin_dir(void)
{
	const char *root = getenv("CSC_CACHE_DIR");
	if (root != NULL && root[0] != '\0')
		return ck_xasprintf("%s/k8s-%s/bin", root, CK_ENVTEST_KUBE_VERSION);
	const char *xdg = getenv("XDG_CACHE_HOME");
	if (xdg != NULL && xdg[0] != '\0')
		return ck_xasprintf("%s/c-sample-controller/k8s-%s/bin", xdg,
		                    CK_ENVTEST_KUBE_VERSION);
	const char *home = getenv("HOME");
	if (home == NULL || home[0] == '\0') {
		struct passwd *pw = getpwuid(getuid());
		home = pw ? pw->pw_dir : "/";
	}
	return ck_xasprintf("%s/.cache/c-sample-controller/k8s-%s/bin", home,
	                    CK_ENVTEST_KUBE_VERSION);
}

/* The first of etcd and kube-apiserver missing (or not executable) in dir, or NULL. */
static const char *missing_bin(const char *dir)
{
	static const char *const bins[] = {"etcd", "kube-apiserver"};
	for (size_t i = 0; i < 2; i++) {
		char *p = ck_xasprintf("%s/%s", dir, bins[i]);
		bool ok = access(p, X_OK) == 0;
		free(p);
		if (!ok)
			return bins[i];
	}
	return NULL;
}

char *ck_envtest_assets(const char *assets_dir, char **err)
{
	const char *env = getenv("CKUBE_ENVTEST_ASSETS");
	char *dir = NULL;
	const char *from = NULL;
	/* The first place set is the only one: a typo must not quietly pick up binaries of
	 * another version from elsewhere. */
	if (assets_dir != NULL && assets_dir[0] != '\0') {
		dir = ck_xstrdup(assets_dir);
		from = "the assets directory given";
	} else if (env != NULL && env[0] != '\0') {
		dir = ck_xstrdup(env);
		from = "$CKUBE_ENVTEST_ASSETS";
	} else {
		dir = cache_bin_dir();
		from = "the build cache; $CKUBE_ENVTEST_ASSETS is not set";
	}
	const char *miss = missing_bin(dir);
	if (miss == NULL)
		return dir;
	ck_err_set(err,
	           "envtest: no executable %s in %s (%s); run `ckube-envtest assets` to build "
	           "etcd and kube-apiserver %s into the build cache, or set CKUBE_ENVTEST_ASSETS "
	           "to a directory that has both",
	           miss, dir, from, CK_ENVTEST_KUBE_VERSION);
	free(dir);
	return NULL;
}

/* The last few lines of a server's log, for an error message ("" when none). */
static char *log_tail(const char *path)
{
	char *data = NULL;
	size_t len = 0;
	if (ck_file_read_all(path, &data, &len, NULL) != 0 || len == 0) {
		free(data);
		return ck_xstrdup("");
	}
	while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r'))
		data[--len] = '\0';
	/* Three lines back, at most 600 bytes. */
	size_t start = len, lines = 0;
	while (start > 0 && lines < 3 && len - start < 600)
		if (data[--start] == '\n')
			lines++;
	char *s = data + start + (data[start] == '\n' ? 1 : 0);
	for (char *p = s; *p; p++)
		if (*p == '\n')
			*p = '|';
	char *out = ck_xasprintf("; last lines of %s: %s", path, s);
	free(data);
	return out;
}

/* Non-zero when pid, our child, has exited; *err then says how, with its log. */
static bool exited(pid_t pid, const char *name, const char *log, char **err)
{
	int st = 0;
	if (waitpid(pid, &st, WNOHANG) != pid)
		return false;
	char *tail = log_tail(log);
	if (WIFEXITED(st))
		ck_err_set(err, "envtest: %s exited with status %d before it was ready%s", name,
		           WEXITSTATUS(st), tail);
	else
		ck_err_set(err, "envtest: %s was killed by signal %d before it was ready%s", name,
		           WTERMSIG(st), tail);
	free(tail);
	return true;
}

/* A NULL-terminated argv of new strings. */
typedef struct argv {
	char **v;
	size_t n, cap;
} argv_t;

static void arg(argv_t *a, char *s)
{
	if (a->n + 2 > a->cap) {
		a->cap = a->cap ? 2 * a->cap : 32;
		a->v = ck_xrealloc(a->v, a->cap * sizeof(*a->v));
	}
	a->v[a->n++] = s;
	a->v[a->n] = NULL;
}

static void argv_free(argv_t *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
}

static pid_t start_etcd(ck_envtest_t *e, const char *bin, uint16_t port, uint16_t peer, bool detach,
                        char **err)
{
	argv_t a = {0};
	char *client = ck_xasprintf("http://127.0.0.1:%u", (unsigned)port);
	char *peers = ck_xasprintf("http://127.0.0.1:%u", (unsigned)peer);
	arg(&a, ck_xasprintf("%s/etcd", bin));
	arg(&a, ck_xasprintf("--name=envtest"));
	arg(&a, ck_xasprintf("--data-dir=%s/etcd", e->dir));
	arg(&a, ck_xasprintf("--listen-client-urls=%s", client));
	arg(&a, ck_xasprintf("--advertise-client-urls=%s", client));
	arg(&a, ck_xasprintf("--listen-peer-urls=%s", peers));
	arg(&a, ck_xasprintf("--initial-advertise-peer-urls=%s", peers));
	arg(&a, ck_xasprintf("--initial-cluster=envtest=%s", peers));
	/* A test's data need not survive a power cut; fsync is most of etcd's start. */
	arg(&a, ck_xasprintf("--unsafe-no-fsync"));
	/* 8 GiB, not 2: a benchmark's 100,000 objects and their history fit (a cap
	 * only; nothing is allocated up front). */
	arg(&a, ck_xasprintf("--quota-backend-bytes=8589934592"));
	arg(&a, ck_xasprintf("--log-level=warn"));
	char *log = ck_xasprintf("%s/etcd.log", e->dir);
	pid_t pid = ck_envtest_i_spawn(a.v, log, detach, err);
	free(log);
	free(client);
	free(peers);
	argv_free(&a);
	return pid;
}

static pid_t start_apiserver(ck_envtest_t *e, const char *bin, uint16_t etcd_port, uint16_t port,
                             const ck_envtest_opts_t *o, char **err)
{
	argv_t a = {0};
	const char *d = e->dir;
	arg(&a, ck_xasprintf("%s/kube-apiserver", bin));
	arg(&a, ck_xasprintf("--etcd-servers=http://127.0.0.1:%u", (unsigned)etcd_port));
	arg(&a, ck_xasprintf("--bind-address=127.0.0.1"));
	arg(&a, ck_xasprintf("--advertise-address=127.0.0.1"));
	arg(&a, ck_xasprintf("--secure-port=%u", (unsigned)port));
	arg(&a, ck_xasprintf("--cert-dir=%s/pki", d));
	arg(&a, ck_xasprintf("--tls-cert-file=%s/pki/apiserver.crt", d));
	arg(&a, ck_xasprintf("--tls-private-key-file=%s/pki/apiserver.key", d));
	arg(&a, ck_xasprintf("--client-ca-file=%s/pki/ca.crt", d));
	arg(&a, ck_xasprintf("--authorization-mode=RBAC"));
	arg(&a, ck_xasprintf("--disable-admission-plugins=ServiceAccount"));
	arg(&a, ck_xasprintf("--service-account-issuer=https://kubernetes.default.svc"));
	arg(&a, ck_xasprintf("--service-account-key-file=%s/pki/sa.key", d));
	arg(&a, ck_xasprintf("--service-account-signing-key-file=%s/pki/sa.key", d));
	arg(&a, ck_xasprintf("--service-cluster-ip-range=10.0.0.0/24"));
	arg(&a, ck_xasprintf("--endpoint-reconciler-type=none"));
	arg(&a, ck_xasprintf("--allow-privileged=true"));
	arg(&a, ck_xasprintf("--profiling=false"));
	for (size_t i = 0; o != NULL && i < o->napiserver_args; i++)
		arg(&a, ck_xstrdup(o->apiserver_args[i]));
	char *log = ck_xasprintf("%s/kube-apiserver.log", d);
	pid_t pid = ck_envtest_i_spawn(a.v, log, o != NULL && o->detach, err);
	free(log);
	argv_free(&a);
	return pid;
}

/*
 * Waits until /readyz answers ok and the namespace "default" exists, while both
 * servers run. 0, or -1 with *err: a server that exited (with its log), or the
 * last answer when the time is up.
 */
static int wait_ready(ck_envtest_t *e, uint32_t timeout_ms, char **err)
{
	ck_client_t *c = ck_envtest_i_conn_client(e->conn);
	uint64_t deadline = ck_envtest_i_now_ms() + timeout_ms;
	char *last = ck_xstrdup("no answer yet");
	char *etcd_log = ck_xasprintf("%s/etcd.log", e->dir);
	char *api_log = ck_xasprintf("%s/kube-apiserver.log", e->dir);
	int result = -1;
	bool ready = false;
	for (;;) {
		if (exited(e->etcd, "etcd", etcd_log, err)) {
			e->etcd = 0;
			goto out;
		}
		if (exited(e->apiserver, "kube-apiserver", api_log, err)) {
			e->apiserver = 0;
			goto out;
		}
		ck_result_t r = {0};
		ck_req_spec_t spec = {.method = "GET",
		                      .type = &t_ns,
		                      .path = ready ? NULL : "/readyz",
		                      .name = "default",
		                      .no_decode = true,
		                      .keep_body = true,
		                      .timeout_ms = 2000};
		int rc = ck_client_do_sync(c, &spec, &r);
		free(last);
		last = ck_xstrdup(rc == 0   ? "namespace default not found yet"
		                  : r.error ? r.error
		                            : "failed");
		if (rc == 0 && !ready)
			ready = true;
		else if (rc == 0)
			result = 0;
		ck_result_clear(&r);
		if (result == 0)
			break;
		if (ck_envtest_i_now_ms() >= deadline) {
			char *tail = log_tail(api_log);
			ck_err_set(err, "envtest: kube-apiserver not ready after %u ms: %s%s",
			           (unsigned)timeout_ms, last, tail);
			free(tail);
			goto out;
		}
		if (rc != 0)
			ck_envtest_i_sleep_ms(50);
	}
out:
	free(last);
	free(etcd_log);
	free(api_log);
	return result;
}

/* Stops what e started and removes its directory; e can start again. */
static int stop_all(ck_envtest_t *e, char **err)
{
	int result = 0;
	ck_envtest_i_conn_free(e->conn);
	e->conn = NULL;
	if (e->dir != NULL) {
		ck_envtest_proc_t *procs = NULL;
		size_t n = 0;
		if (ck_envtest_i_read_pids(e->dir, &procs, &n, NULL) == 0)
			ck_envtest_i_stop_procs(e->dir, procs, n, STOP_GRACE_MS);
		free(procs);
		result = ck_envtest_i_remove_tree(e->dir, err);
	}
	free(e->dir);
	free(e->kubeconfig);
	free(e->server);
	e->dir = e->kubeconfig = e->server = NULL;
	e->etcd = e->apiserver = 0;
	return result;
}

static int teardown(ck_envtest_t *e, char **err)
{
	int result = stop_all(e, err);
	free(e);
	return result;
}

/* Whether a server of e failed because a port it was given is taken. */
static bool port_taken(const ck_envtest_t *e)
{
	static const char *const logs[] = {"etcd.log", "kube-apiserver.log"};
	bool taken = false;
	for (size_t i = 0; i < 2 && !taken; i++) {
		char *path = ck_xasprintf("%s/%s", e->dir, logs[i]), *data = NULL;
		if (ck_file_read_all(path, &data, NULL, NULL) == 0)
			taken = strstr(data, "address already in use") != NULL;
		free(data);
		free(path);
	}
	return taken;
}

/*
 * One try: ports, directory, certificates, servers, the wait until ready. 0, or -1
 * with *err, and *clash when a port chosen here was taken by someone else between
 * the check and the server's bind (the caller tries again with others).
 */
static int start_once(ck_envtest_t *e, const ck_envtest_opts_t *o, const char *bin,
                      const char *parent, uint64_t t0, bool *clash, char **err)
{
	uint16_t etcd_port = o->etcd_port, peer_port = 0, api_port = o->api_port;
	*clash = false;
	/* Fixed ports first: one in use is the caller's mistake, said before any work. */
	if (ck_envtest_i_port(&api_port, "kube-apiserver's port", err) != 0 ||
	    ck_envtest_i_port(&etcd_port, "etcd's client port", err) != 0 ||
	    ck_envtest_i_port(&peer_port, "etcd's peer port", err) != 0)
		return -1;
	char *tmpl = ck_xasprintf("%s/" CK_ENVTEST_I_PREFIX "XXXXXX", parent);
	if (mkdtemp(tmpl) == NULL) {
		ck_err_set(err, "envtest: making a directory in %s: %s", parent, strerror(errno));
		free(tmpl);
		return -1;
	}
	e->dir = tmpl;
	e->kubeconfig = ck_xasprintf("%s/kubeconfig", e->dir);
	e->server = ck_xasprintf("https://127.0.0.1:%u", (unsigned)api_port);
	/* The owner first: a directory is never without one (see clean_stale). */
	if (ck_envtest_i_record(e->dir, "owner", o->detach ? 0 : getpid(), err) != 0 ||
	    ck_envtest_i_pki(e->dir, e->server, err) != 0)
		return -1;
	/* Both at once: the API server waits for etcd by itself. */
	if ((e->etcd = start_etcd(e, bin, etcd_port, peer_port, o->detach, err)) < 0 ||
	    ck_envtest_i_record(e->dir, "etcd", e->etcd, err) != 0 ||
	    (e->apiserver = start_apiserver(e, bin, etcd_port, api_port, o, err)) < 0 ||
	    ck_envtest_i_record(e->dir, "kube-apiserver", e->apiserver, err) != 0)
		return -1;
	CK_LOG_V(1, "envtest: servers started", CK_KV_STR("dir", e->dir),
	         CK_KV_UINT("ms", ck_envtest_i_now_ms() - t0));
	ck_config_t *cfg = ck_envtest_config(e, err);
	if (cfg == NULL || (e->conn = ck_envtest_i_conn_new(cfg, err)) == NULL)
		return -1;
	if (wait_ready(e, o->start_timeout_ms ? o->start_timeout_ms : DEFAULT_START_TIMEOUT_MS,
	               err) != 0) {
		*clash = (e->etcd == 0 || e->apiserver == 0) && o->api_port == 0 &&
		         o->etcd_port == 0 && port_taken(e);
		return -1;
	}
	CK_LOG_V(1, "envtest: API server ready", CK_KV_STR("server", e->server),
	         CK_KV_UINT("ms", ck_envtest_i_now_ms() - t0));
	return 0;
}

/* How many times a start is tried when a free port was taken before a server bound it. */
#define START_TRIES 3

ck_envtest_t *ck_envtest_start(const ck_envtest_opts_t *opts, char **err)
{
	static const ck_envtest_opts_t defaults = {0};
	const ck_envtest_opts_t *o = opts ? opts : &defaults;
	uint64_t t0 = ck_envtest_i_now_ms();
	ck_envtest_t *e = ck_xcalloc(1, sizeof(*e));
	char *bin = ck_envtest_assets(o->assets_dir, err);
	char *parent = NULL;
	bool ok = false, clash = false;
	/* The CRD files are read first: a mistake in one costs no server start. */
	ck_envtest_crds_t *crds = NULL;
	e->crd_timeout_ms = o->crd_timeout_ms ? o->crd_timeout_ms : DEFAULT_CRD_TIMEOUT_MS;
	if (bin == NULL ||
	    (crds = ck_envtest_i_crds_read(o->crd_paths, o->ncrd_paths, err)) == NULL)
		goto out;
	const char *tmp = getenv("TMPDIR");
	parent = ck_xstrdup(o->dir ? o->dir : tmp && tmp[0] ? tmp : "/tmp");
	ck_envtest_i_clean_stale(parent, NULL);
	for (int i = 1; start_once(e, o, bin, parent, t0, &clash, err) != 0; i++) {
		if (!clash || i == START_TRIES)
			goto out;
		CK_LOG_INFO("envtest: a port was taken before the server bound it, trying others",
		            CK_KV_ERR(err ? *err : NULL), CK_KV_INT("try", i));
		stop_all(e, NULL);
		if (err != NULL) {
			free(*err);
			*err = NULL;
		}
	}
	if (ck_envtest_i_crds_install(ck_envtest_i_conn_client(e->conn), crds, e->crd_timeout_ms,
	                              err) != 0)
		goto out;
	e->start_ms = ck_envtest_i_now_ms() - t0;
	ok = true;
out:
	ck_envtest_i_crds_free(crds);
	free(bin);
	free(parent);
	if (!ok) {
		teardown(e, NULL);
		e = NULL;
	}
	return e;
}

int ck_envtest_install_crds(ck_envtest_t *e, const char *const *paths, size_t n, char **err)
{
	ck_envtest_crds_t *crds = ck_envtest_i_crds_read(paths, n, err);
	int rc = crds ? ck_envtest_i_crds_install(ck_envtest_i_conn_client(e->conn), crds,
	                                          e->crd_timeout_ms, err)
	              : -1;
	ck_envtest_i_crds_free(crds);
	return rc;
}

ck_config_t *ck_envtest_config(const ck_envtest_t *e, char **err)
{
	ck_config_load_opts_t lo = {.kubeconfig = e->kubeconfig};
	return ck_config_load(&lo, err);
}

ck_client_t *ck_envtest_client(ck_envtest_t *e)
{
	return ck_envtest_i_conn_client(e->conn);
}

const char *ck_envtest_kubeconfig(const ck_envtest_t *e)
{
	return e->kubeconfig;
}

const char *ck_envtest_dir(const ck_envtest_t *e)
{
	return e->dir;
}

const char *ck_envtest_server(const ck_envtest_t *e)
{
	return e->server;
}

uint64_t ck_envtest_start_ms(const ck_envtest_t *e)
{
	return e->start_ms;
}

int ck_envtest_stop(ck_envtest_t *e, char **err)
{
	return e == NULL ? 0 : teardown(e, err);
}

void ck_envtest_release(ck_envtest_t *e)
{
	if (e == NULL)
		return;
	ck_envtest_i_conn_free(e->conn);
	free(e->dir);
	free(e->kubeconfig);
	free(e->server);
	free(e);
}

int ck_envtest_stop_dir(const char *dir, char **err)
{
	ck_envtest_proc_t *procs = NULL;
	size_t n = 0;
	struct stat st;
	int result = -1;
	/* Only a directory envtest made, of this user: never rm -rf anything else. */
	const char *base = strrchr(dir, '/');
	base = base ? base + 1 : dir;
	if (strncmp(base, CK_ENVTEST_I_PREFIX, strlen(CK_ENVTEST_I_PREFIX)) != 0 ||
	    lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
	    ck_envtest_i_read_pids(dir, &procs, &n, NULL) != 0) {
		ck_err_set(err, "envtest: %s is not an envtest directory of this user", dir);
		goto out;
	}
	ck_envtest_i_stop_procs(dir, procs, n, STOP_GRACE_MS);
	result = ck_envtest_i_remove_tree(dir, err);
out:
	free(procs);
	return result;
}
