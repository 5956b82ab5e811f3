/*
 * Unit tests for pkg/envtest's parts that need no server: reading CRD files, the pids
 * file, stopping recorded processes (and only those), cleaning up stale directories,
 * ports, certificates and kubeconfig, where the binaries are looked for. The servers
 * themselves are tested by tests/envtest/run.sh (make envtest-test).
 */
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ckube/base.h>
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/envtest.h>
#include <ckube/fake.h>
#include <ckube/kinds.h>

#include "pkg/envtest/envtest_internal.h"

static char tmp[64];

static void setup(void)
{
	strcpy(tmp, "/tmp/test_envtest_XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void teardown(void)
{
	nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static char *put(const char *name, const char *text)
{
	char *path = ck_xasprintf("%s/%s", tmp, name);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return path;
}

#define CRD(name, group, plural)                                                                   \
	"apiVersion: apiextensions.k8s.io/v1\n"                                                    \
	"kind: CustomResourceDefinition\n"                                                         \
	"metadata:\n"                                                                              \
	"  name: " name "\n"                                                                       \
	"spec:\n"                                                                                  \
	"  group: " group "\n"                                                                     \
	"  scope: Cluster\n"                                                                       \
	"  names: {kind: K, plural: " plural "}\n"                                                 \
	"  versions:\n"                                                                            \
	"  - {name: v1, served: true, storage: true}\n"

/* The error of reading paths, which must fail. */
static char *read_err(const char *const *paths, size_t n)
{
	char *err = NULL;
	ck_envtest_crds_t *l = ck_envtest_i_crds_read(paths, n, &err);
	ck_assert_ptr_null(l);
	ck_assert_ptr_nonnull(err);
	ck_assert_ptr_null(strchr(err, '\n'));
	return err;
}

/* Documents split on "---" lines as kubectl splits them: a leading separator, one with a
 * comment, an empty document, JSON; each CRD named with its file, number and line. */
START_TEST(crd_documents)
{
	char *f =
	    put("crds.yaml",
	        "# leading comment\n"
	        "---\n" CRD("as.x.test", "x.test",
	                    "as") "--- # second\n"
	                          "\n"
	                          "---\n"
	                          "# only a comment\n"
	                          "---\n"
	                          "{\"apiVersion\": \"apiextensions.k8s.io/v1\", \"kind\": "
	                          "\"CustomResourceDefinition\", \"metadata\": {\"name\": "
	                          "\"bs.x.test\"}, \"spec\": {\"group\": \"x.test\", \"names\": "
	                          "{\"plural\": \"bs\"}, \"versions\": [{\"name\": \"v2\", "
	                          "\"served\": true}]}}");
	const char *paths[] = {f};
	char *err = NULL;
	ck_envtest_crds_t *l = ck_envtest_i_crds_read(paths, 1, &err);
	ck_assert_msg(l != NULL, "%s", err);
	ck_assert_uint_eq(ck_envtest_i_crds_len(l), 2);
	const char *where;
	ck_assert_str_eq(ck_envtest_i_crds_at(l, 0, &where), "as.x.test");
	char *want = ck_xasprintf("%s: document 1 (line 3)", f);
	ck_assert_str_eq(where, want);
	free(want);
	ck_assert_str_eq(ck_envtest_i_crds_at(l, 1, &where), "bs.x.test");
	want = ck_xasprintf("%s: document 2 (line 18)", f);
	ck_assert_str_eq(where, want);
	free(want);
	ck_envtest_i_crds_free(l);
	free(f);
}
END_TEST

/* A folder: its .yaml, .yml and .json files in name order, nothing else. */
START_TEST(crd_folder)
{
	char *d = ck_xasprintf("%s/crds", tmp);
	ck_assert_int_eq(mkdir(d, 0700), 0);
	free(put("crds/b.yml", CRD("bs.x.test", "x.test", "bs")));
	free(put("crds/a.yaml", CRD("as.x.test", "x.test", "as")));
	free(put("crds/c.json", CRD("cs.x.test", "x.test", "cs")));
	free(put("crds/readme.txt", "not read"));
	free(put("crds/.hidden.yaml", "not read either: {"));
	const char *paths[] = {d};
	char *err = NULL;
	ck_envtest_crds_t *l = ck_envtest_i_crds_read(paths, 1, &err);
	ck_assert_msg(l != NULL, "%s", err);
	ck_assert_uint_eq(ck_envtest_i_crds_len(l), 3);
	const char *where;
	ck_assert_str_eq(ck_envtest_i_crds_at(l, 0, &where), "as.x.test");
	ck_assert_str_eq(ck_envtest_i_crds_at(l, 1, &where), "bs.x.test");
	ck_assert_str_eq(ck_envtest_i_crds_at(l, 2, &where), "cs.x.test");
	ck_envtest_i_crds_free(l);
	free(d);
}
END_TEST

/* Bad input: one line naming the path, the file, the document and what is wrong. */
START_TEST(crd_bad_input)
{
	char *err;
	const char *missing[] = {"/nonexistent/crd.yaml"};
	err = read_err(missing, 1);
	ck_assert_str_eq(err, "envtest: CRD path /nonexistent/crd.yaml: No such file or directory");
	free(err);

	char *f = put("bad.yaml", CRD("as.x.test", "x.test", "as") "---\nkind: [unclosed\n");
	const char *p1[] = {f};
	err = read_err(p1, 1);
	char *want = ck_xasprintf("envtest: %s: line 13:", f);
	ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
	free(want);
	free(err);
	free(f);

	f = put("deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n");
	const char *p2[] = {f};
	err = read_err(p2, 1);
	want = ck_xasprintf("envtest: %s: document 1 (line 1): apps/v1 Deployment is not an "
	                    "apiextensions.k8s.io/v1 CustomResourceDefinition",
	                    f);
	ck_assert_str_eq(err, want);
	free(want);
	free(err);
	free(f);

	f = put("old.yaml", "apiVersion: apiextensions.k8s.io/v1beta1\n"
	                    "kind: CustomResourceDefinition\nmetadata: {name: x}\n");
	const char *p3[] = {f};
	err = read_err(p3, 1);
	ck_assert_ptr_nonnull(strstr(err,
	                             "apiextensions.k8s.io/v1beta1 CustomResourceDefinition is "
	                             "not an apiextensions.k8s.io/v1"));
	free(err);
	free(f);

	f = put("noname.yaml", "apiVersion: apiextensions.k8s.io/v1\n"
	                       "kind: CustomResourceDefinition\nspec: {group: x.test}\n");
	const char *p4[] = {f};
	err = read_err(p4, 1);
	ck_assert_ptr_nonnull(
	    strstr(err, "CustomResourceDefinition (unnamed) has no metadata.name"));
	free(err);
	free(f);

	f = put("noserved.yaml", "apiVersion: apiextensions.k8s.io/v1\n"
	                         "kind: CustomResourceDefinition\nmetadata: {name: as.x.test}\n"
	                         "spec:\n  group: x.test\n  names: {plural: as}\n"
	                         "  versions: [{name: v1, served: false}]\n");
	const char *p5[] = {f};
	err = read_err(p5, 1);
	ck_assert_ptr_nonnull(
	    strstr(err, "CustomResourceDefinition as.x.test has no served version"));
	free(err);
	free(f);

	f = put("empty.yaml", "# nothing\n---\n");
	const char *p6[] = {f};
	err = read_err(p6, 1);
	want = ck_xasprintf("envtest: %s: no CustomResourceDefinition in it", f);
	ck_assert_str_eq(err, want);
	free(want);
	free(err);
	free(f);

	char *d = ck_xasprintf("%s/none", tmp);
	ck_assert_int_eq(mkdir(d, 0700), 0);
	const char *p7[] = {d};
	err = read_err(p7, 1);
	want = ck_xasprintf("envtest: CRD folder %s: no .yaml, .yml or .json file", d);
	ck_assert_str_eq(err, want);
	free(want);
	free(err);
	free(d);
}
END_TEST

START_TEST(pids_file)
{
	char *err = NULL;
	ck_assert_int_eq(ck_envtest_i_record(tmp, "owner", getpid(), &err), 0);
	ck_assert_int_eq(ck_envtest_i_record(tmp, "owner", 0, &err), 0);
	ck_envtest_proc_t *procs = NULL;
	size_t n = 0;
	ck_assert_int_eq(ck_envtest_i_read_pids(tmp, &procs, &n, &err), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(procs[0].role, "owner");
	ck_assert_int_eq(procs[0].pid, getpid());
	ck_assert_uint_eq(procs[0].start, ck_envtest_i_proc_start(getpid()));
	ck_assert_uint_ne(procs[0].start, 0);
	ck_assert_int_eq(procs[1].pid, 0);
	ck_assert_uint_eq(procs[1].start, 0);
	free(procs);
	free(put("pids", "owner twelve\n"));
	ck_assert_int_eq(ck_envtest_i_read_pids(tmp, &procs, &n, &err), -1);
	ck_assert_ptr_null(procs);
	ck_assert_ptr_nonnull(strstr(err, "/pids: not a pids line: owner twelve"));
	free(err);
}
END_TEST

/* A shell loop whose command line names tmp (its $0), started as envtest starts a
 * server; trap_term makes it ignore SIGTERM. */
static pid_t loop_child(bool trap_term)
{
	char *log = ck_xasprintf("%s/child.log", tmp);
	char *const argv[] = {"/bin/sh", "-c",
	                      trap_term ? "trap '' TERM; while :; do sleep 0.05; done"
	                                : "while :; do sleep 0.05; done",
	                      tmp, NULL};
	char *err = NULL;
	pid_t pid = ck_envtest_i_spawn(argv, log, false, &err);
	ck_assert_msg(pid > 0, "%s", err);
	free(log);
	/* Until it runs the shell (its command line names tmp). */
	for (int i = 0; i < 200 && ck_envtest_i_proc_start(pid) == 0; i++)
		usleep(5000);
	usleep(50000);
	return pid;
}

/* Stopping: TERM; KILL after the grace when TERM is ignored; never a PID that is not
 * the recorded process (another command line). */
START_TEST(stop_recorded_only)
{
	char *err = NULL;
	pid_t a = loop_child(false), b = loop_child(true);
	ck_assert_int_eq(ck_envtest_i_record(tmp, "owner", getpid(), &err), 0);
	ck_assert_int_eq(ck_envtest_i_record(tmp, "etcd", a, &err), 0);
	ck_assert_int_eq(ck_envtest_i_record(tmp, "kube-apiserver", b, &err), 0);
	/* A process whose command line does not name tmp, recorded too. */
	pid_t other = fork();
	if (other == 0) {
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	usleep(50000);
	ck_assert_int_eq(ck_envtest_i_record(tmp, "stray", other, &err), 0);
	ck_envtest_proc_t *procs = NULL;
	size_t n = 0;
	ck_assert_int_eq(ck_envtest_i_read_pids(tmp, &procs, &n, &err), 0);
	uint64_t t0 = ck_envtest_i_now_ms();
	ck_assert_int_eq(ck_envtest_i_stop_procs(tmp, procs, n, 300), 2);
	uint64_t took = ck_envtest_i_now_ms() - t0;
	/* b ignored TERM: killed after the 300 ms grace, not 5 s later. */
	ck_assert_uint_ge(took, 300);
	ck_assert_uint_lt(took, 3000);
	ck_assert_uint_eq(ck_envtest_i_proc_start(a), 0);
	ck_assert_uint_eq(ck_envtest_i_proc_start(b), 0);
	ck_assert_uint_ne(ck_envtest_i_proc_start(other), 0);
	kill(other, SIGKILL);
	waitpid(other, NULL, 0);
	free(procs);
}
END_TEST

/* A binary that cannot run: the child says so in its log and exits 127. */
START_TEST(spawn_exec_failure)
{
	char *log = ck_xasprintf("%s/x.log", tmp), *err = NULL;
	char *const argv[] = {"/nonexistent/etcd", NULL};
	pid_t pid = ck_envtest_i_spawn(argv, log, false, &err);
	ck_assert_int_gt(pid, 0);
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 127);
	char *text = NULL;
	ck_assert_int_eq(ck_file_read_all(log, &text, NULL, &err), 0);
	ck_assert_ptr_nonnull(strstr(text, "exec failed"));
	free(text);
	char *bad = ck_xasprintf("%s/no/such/dir/x.log", tmp);
	ck_assert_int_eq(ck_envtest_i_spawn(argv, bad, false, &err), -1);
	ck_assert_ptr_nonnull(strstr(err, "no/such/dir/x.log: No such file or directory"));
	free(err);
	free(bad);
	free(log);
}
END_TEST

static char *mkenv(const char *name, const char *pids)
{
	char *d = ck_xasprintf("%s/%s", tmp, name);
	ck_assert_int_eq(mkdir(d, 0700), 0);
	if (pids != NULL) {
		char *p = ck_xasprintf("%s/pids", d);
		FILE *f = fopen(p, "w");
		fputs(pids, f);
		fclose(f);
		free(p);
	}
	return d;
}

/* Stale: a dead owner's directory and a detached one with no server left go; a live
 * owner's, one without a pids file, one of another name, and the caller's stay. */
START_TEST(clean_stale)
{
	pid_t dead = fork();
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	char *line = ck_xasprintf("owner %d 1\netcd %d 1\n", (int)dead, (int)dead);
	char *gone1 = mkenv(CK_ENVTEST_I_PREFIX "dead", line);
	char *gone2 = mkenv(CK_ENVTEST_I_PREFIX "detached", "owner 0 0\n");
	free(line);
	line = ck_xasprintf("owner %d %llu\n", (int)getpid(), ck_envtest_i_proc_start(getpid()));
	char *live = mkenv(CK_ENVTEST_I_PREFIX "live", line);
	char *mine = mkenv(CK_ENVTEST_I_PREFIX "mine", "owner 0 0\n");
	free(line);
	char *nopids = mkenv(CK_ENVTEST_I_PREFIX "nopids", NULL);
	char *other = mkenv("other.dir", "owner 0 0\n");
	ck_envtest_i_clean_stale(tmp, mine);
	ck_assert_int_ne(access(gone1, F_OK), 0);
	ck_assert_int_ne(access(gone2, F_OK), 0);
	ck_assert_int_eq(access(live, F_OK), 0);
	ck_assert_int_eq(access(mine, F_OK), 0);
	ck_assert_int_eq(access(nopids, F_OK), 0);
	ck_assert_int_eq(access(other, F_OK), 0);
	free(gone1);
	free(gone2);
	free(live);
	free(mine);
	free(nopids);
	free(other);
}
END_TEST

/* stop_dir removes only a directory envtest made. */
START_TEST(stop_dir_refuses)
{
	char *err = NULL;
	char *other = mkenv("other.dir", "owner 0 0\n");
	ck_assert_int_eq(ck_envtest_stop_dir(other, &err), -1);
	char *want = ck_xasprintf("envtest: %s is not an envtest directory of this user", other);
	ck_assert_str_eq(err, want);
	ck_assert_int_eq(access(other, F_OK), 0);
	free(want);
	free(err);
	err = NULL;
	char *nopids = mkenv(CK_ENVTEST_I_PREFIX "nopids", NULL);
	ck_assert_int_eq(ck_envtest_stop_dir(nopids, &err), -1);
	ck_assert_int_eq(access(nopids, F_OK), 0);
	free(err);
	err = NULL;
	char *ok = mkenv(CK_ENVTEST_I_PREFIX "ok", "owner 0 0\n");
	free(put(CK_ENVTEST_I_PREFIX "ok/etcd.log", "x"));
	ck_assert_int_eq(ck_envtest_stop_dir(ok, &err), 0);
	ck_assert_int_ne(access(ok, F_OK), 0);
	free(other);
	free(nopids);
	free(ok);
}
END_TEST

START_TEST(ports)
{
	char *err = NULL;
	uint16_t p = 0;
	ck_assert_int_eq(ck_envtest_i_port(&p, "x", &err), 0);
	ck_assert_uint_ne(p, 0);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 1), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	uint16_t busy = ntohs(a.sin_port);
	ck_assert_int_eq(ck_envtest_i_port(&busy, "kube-apiserver's port", &err), -1);
	char *want = ck_xasprintf("127.0.0.1:%u, kube-apiserver's port, is in use (Address already "
	                          "in use)",
	                          (unsigned)ntohs(a.sin_port));
	ck_assert_str_eq(err, want);
	free(want);
	free(err);
	close(fd);
}
END_TEST

static gnutls_x509_crt_t load_crt(const char *path)
{
	char *pem = NULL, *err = NULL;
	size_t len = 0;
	ck_assert_int_eq(ck_file_read_all(path, &pem, &len, &err), 0);
	gnutls_x509_crt_t crt;
	gnutls_datum_t d = {(unsigned char *)pem, (unsigned)len};
	ck_assert_int_eq(gnutls_x509_crt_init(&crt), 0);
	ck_assert_int_eq(gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM), 0);
	free(pem);
	return crt;
}

/* The certificates chain to the CA, the admin is in system:masters, the serving
 * certificate names 127.0.0.1; keys are 0600; the kubeconfig loads as that user. */
START_TEST(pki_and_kubeconfig)
{
	char *err = NULL;
	ck_assert_int_eq(ck_envtest_i_pki(tmp, "https://127.0.0.1:1234", &err), 0);
	char *path = ck_xasprintf("%s/pki/ca.crt", tmp);
	gnutls_x509_crt_t ca = load_crt(path);
	free(path);
	static const char *const names[] = {"apiserver", "admin"};
	for (int i = 0; i < 2; i++) {
		path = ck_xasprintf("%s/pki/%s.crt", tmp, names[i]);
		gnutls_x509_crt_t c = load_crt(path);
		unsigned vst = 1;
		ck_assert_int_eq(gnutls_x509_crt_verify(c, &ca, 1, 0, &vst), 0);
		ck_assert_uint_eq(vst, 0);
		if (i == 0)
			ck_assert_int_ne(gnutls_x509_crt_check_ip(
			                     c, (const unsigned char *)"\x7f\0\0\x01", 4, 0),
			                 0);
		else {
			char dn[256];
			size_t len = sizeof(dn);
			ck_assert_int_eq(gnutls_x509_crt_get_dn(c, dn, &len), 0);
			ck_assert_ptr_nonnull(strstr(dn, "O=system:masters"));
		}
		gnutls_x509_crt_deinit(c);
		free(path);
		path = ck_xasprintf("%s/pki/%s.key", tmp, names[i]);
		struct stat st;
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_uint_eq(st.st_mode & 0777, 0600);
		free(path);
	}
	gnutls_x509_crt_deinit(ca);
	path = ck_xasprintf("%s/kubeconfig", tmp);
	ck_config_load_opts_t lo = {.kubeconfig = path};
	ck_config_t *cfg = ck_config_load(&lo, &err);
	ck_assert_msg(cfg != NULL, "%s", err);
	struct ck_config_view v;
	ck_config_view(cfg, &v);
	ck_assert_str_eq(v.server, "https://127.0.0.1:1234");
	ck_assert_str_eq(v.namespace, "default");
	ck_assert_ptr_nonnull(v.ca_pem);
	ck_cred_t cr = {0};
	ck_assert_int_eq(ck_config_credentials(cfg, false, &cr, &err), 0);
	ck_assert_ptr_nonnull(cr.cert_pem);
	ck_assert_ptr_nonnull(cr.key_pem);
	ck_cred_clear(&cr);
	ck_config_free(cfg);
	free(path);
}
END_TEST

/* Where the binaries are: the first place set, and no other; one line when missing. */
START_TEST(assets)
{
	char *err = NULL;
	unsetenv("CKUBE_ENVTEST_ASSETS");
	unsetenv("XDG_CACHE_HOME");
	setenv("CSC_CACHE_DIR", tmp, 1);
	ck_assert_ptr_null(ck_envtest_assets(NULL, &err));
	char *want = ck_xasprintf(
	    "envtest: no executable etcd in %s/k8s-" CK_ENVTEST_KUBE_VERSION
	    "/bin (the build cache; $CKUBE_ENVTEST_ASSETS is not set); run `ckube-envtest assets` "
	    "to build etcd and kube-apiserver " CK_ENVTEST_KUBE_VERSION
	    " into the build cache, or set CKUBE_ENVTEST_ASSETS to a directory that has both",
	    tmp);
	ck_assert_str_eq(err, want);
	free(want);
	free(err);
	err = NULL;

	char *d = ck_xasprintf("%s/bin", tmp);
	ck_assert_int_eq(mkdir(d, 0700), 0);
	free(put("bin/etcd", "#!/bin/sh\n"));
	char *k = put("bin/kube-apiserver", "#!/bin/sh\n");
	char *e = ck_xasprintf("%s/etcd", d);
	chmod(e, 0755);
	setenv("CKUBE_ENVTEST_ASSETS", d, 1);
	/* kube-apiserver is there but not executable. */
	ck_assert_ptr_null(ck_envtest_assets(NULL, &err));
	ck_assert_ptr_nonnull(strstr(err, "no executable kube-apiserver in"));
	ck_assert_ptr_nonnull(strstr(err, "($CKUBE_ENVTEST_ASSETS)"));
	free(err);
	err = NULL;
	chmod(k, 0755);
	char *got = ck_envtest_assets(NULL, &err);
	ck_assert_str_eq(got, d);
	free(got);
	/* The directory given wins, and is the only place looked. */
	ck_assert_ptr_null(ck_envtest_assets("/nonexistent", &err));
	ck_assert_ptr_nonnull(
	    strstr(err, "no executable etcd in /nonexistent (the assets directory given)"));
	free(err);
	free(d);
	free(k);
	free(e);
}
END_TEST

/* The client on a loop thread of its own: made there, used by blocking calls from
 * this thread (a refused connection comes back as a transport error), then stopped
 * and joined. Also under TSan (the hand-over of the client between the threads). */
START_TEST(conn_thread)
{
	char *err = NULL;
	/* A port nothing listens on: bound, then closed. */
	uint16_t port = 0;
	ck_assert_int_eq(ck_envtest_i_port(&port, "x", &err), 0);
	char *kc = ck_xasprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
	                        "    server: https://127.0.0.1:%u\nusers:\n- name: u\n  user: {}\n"
	                        "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
	                        "current-context: x\n",
	                        (unsigned)port);
	ck_config_t *cfg = ck_config_load_text(kc, strlen(kc), "test", NULL, &err);
	ck_assert_msg(cfg != NULL, "%s", err);
	ck_envtest_conn_t *k = ck_envtest_i_conn_new(cfg, &err);
	ck_assert_msg(k != NULL, "%s", err);
	static const ck_type_t t_ns = {
	    .group = "", .version = "v1", .kind = "Namespace", .resource = "namespaces"};
	for (int i = 0; i < 3; i++) {
		ck_result_t r = {0};
		ck_req_spec_t spec = {.method = "GET",
		                      .type = &t_ns,
		                      .path = "/readyz",
		                      .no_decode = true,
		                      .timeout_ms = 2000};
		ck_assert_int_ne(ck_client_do_sync(ck_envtest_i_conn_client(k), &spec, &r), 0);
		ck_assert_int_eq(r.http_code, 0);
		ck_assert_ptr_nonnull(strstr(r.error, "/readyz"));
		ck_result_clear(&r);
	}
	/* A SIGTERM to the process, taken by a thread that waits for it as a manager
	 * does, never by the client's thread (whose default action would end the
	 * process: the test would then die of the signal). */
	signal(SIGTERM, SIG_DFL); /* not the handler check's runner may have installed */
	sigset_t term;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &term, NULL);
	kill(getpid(), SIGTERM);
	struct timespec wait = {5, 0};
	ck_assert_int_eq(sigtimedwait(&term, NULL, &wait), SIGTERM);
	pthread_sigmask(SIG_UNBLOCK, &term, NULL);
	ck_envtest_i_conn_free(k);
	free(kc);
}
END_TEST

/* A condition true at its third call, saying why not before. */
static bool third_time(void *ud, char **why)
{
	int *calls = ud;
	if (++*calls >= 3)
		return true;
	*why = ck_xasprintf("call %d", *calls);
	return false;
}

static bool never(void *ud, char **why)
{
	int *calls = ud;
	++*calls;
	if (*calls % 2 == 0)
		*why = ck_xasprintf("call %d", *calls); /* odd calls say nothing: freed or not */
	return false;
}

START_TEST(eventually)
{
	char *err = NULL;
	int calls = 0;
	uint64_t t0 = ck_envtest_i_now_ms();
	ck_assert_int_eq(ck_envtest_eventually(5000, third_time, &calls, &err), 0);
	ck_assert_int_eq(calls, 3);
	ck_assert_ptr_null(err);
	ck_assert_uint_ge(ck_envtest_i_now_ms() - t0, 200); /* polled, 100 ms apart */
	calls = 1;
	ck_assert_int_eq(ck_envtest_eventually(250, never, &calls, &err), -1);
	ck_assert_int_ge(calls, 3);
	char want[64];
	if (calls % 2 == 0)
		snprintf(want, sizeof(want), "not within 250 ms: call %d", calls);
	else
		snprintf(want, sizeof(want), "not within 250 ms: the condition was false");
	ck_assert_str_eq(err, want);
	free(err);
	err = NULL;
	/* Timeout 0: one try. */
	calls = 0;
	ck_assert_int_eq(ck_envtest_eventually(0, third_time, &calls, &err), -1);
	ck_assert_int_eq(calls, 1);
	ck_assert_str_eq(err, "not within 0 ms: call 1");
	free(err);
}
END_TEST

static bool labelled(void *ud, const ck_obj_t *obj)
{
	const char *v = ck_obj_label(obj, "app");
	return v != NULL && strcmp(v, ud) == 0;
}

static void *add_later(void *f)
{
	usleep(250000);
	ck_fake_add(
	    f, &ck_type_configmap,
	    "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"labels\":{\"app\":\"web\"}}}",
	    NULL);
	return NULL;
}

/* On the in-memory API server: until it exists, until the predicate holds, the
 * error naming the object and the last reason. */
START_TEST(get_eventually)
{
	char *err = NULL;
	ck_fake_t *f = ck_fake_new(NULL);
	ck_fake_env_t *env = ck_fake_env_new(f, NULL, &err);
	ck_assert_msg(env != NULL, "%s", err);
	ck_client_t *c = ck_fake_env_client(env);
	pthread_t t;
	pthread_create(&t, NULL, add_later, f);
	ck_assert_msg(ck_envtest_get_eventually(c, &ck_type_configmap, "ns", "c", NULL, NULL, 5000,
	                                        &err) == 0,
	              "%s", err);
	pthread_join(t, NULL);
	ck_assert_int_eq(ck_envtest_get_eventually(c, &ck_type_configmap, "ns", "c", labelled,
	                                           "web", 1000, &err),
	                 0);
	ck_assert_int_eq(
	    ck_envtest_get_eventually(c, &ck_type_configmap, "ns", "c", labelled, "db", 200, &err),
	    -1);
	ck_assert_str_eq(err, "ConfigMap ns/c: not within 200 ms: the predicate was false");
	free(err);
	err = NULL;
	ck_assert_int_eq(
	    ck_envtest_get_eventually(c, &ck_type_namespace, NULL, "gone", NULL, NULL, 200, &err),
	    -1);
	ck_assert_msg(strncmp(err, "Namespace gone: not within 200 ms: ", 35) == 0 &&
	                  strstr(err, "404") != NULL,
	              "%s", err);
	free(err);
	ck_fake_env_free(env);
	ck_fake_free(f);
}
END_TEST

Suite *suite_envtest(void)
{
	Suite *s = suite_create("envtest");
	TCase *tc = tcase_create("parts");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, crd_documents);
	tcase_add_test(tc, crd_folder);
	tcase_add_test(tc, crd_bad_input);
	tcase_add_test(tc, pids_file);
	tcase_add_test(tc, stop_recorded_only);
	tcase_add_test(tc, spawn_exec_failure);
	tcase_add_test(tc, clean_stale);
	tcase_add_test(tc, stop_dir_refuses);
	tcase_add_test(tc, ports);
	tcase_add_test(tc, pki_and_kubeconfig);
	tcase_add_test(tc, assets);
	tcase_add_test(tc, conn_thread);
	tcase_add_test(tc, eventually);
	tcase_add_test(tc, get_eventually);
	suite_add_tcase(s, tc);
	return s;
}
