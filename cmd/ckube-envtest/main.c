/*
 * ckube-envtest: a test's control plane (etcd and kube-apiserver, <ckube/envtest.h>)
 * for shell scripts.
 *
 *   eval "$(ckube-envtest start deploy/crd.yaml)"   # prints export KUBECONFIG=...
 *   kubectl get foos
 *   ckube-envtest stop
 *   ckube-envtest assets                            # builds the binaries, prints where
 *
 * start returns once the API server is ready and the CRDs are Established; the
 * servers keep running after it exits. The environment's directory is recorded in
 * the state directory ($CKUBE_ENVTEST_STATE_DIR, else $XDG_RUNTIME_DIR/ckube-envtest,
 * else /tmp/ckube-envtest-<uid>) as "current", which stop reads. One environment per
 * state directory.
 *
 * Exit status: 0 done; 1 failed (one line on stderr: a missing binary, a port in
 * use, a CRD that does not establish, a server that did not start; nothing is left
 * running); 2 usage.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ckube/base.h>
#include <ckube/envtest.h>
#include <ckube/flag.h>
#include <ckube/log.h>

#define PROG "ckube-envtest"

static void usage(FILE *out)
{
	fprintf(out, "usage: " PROG " start [flags] [CRD file or folder]...\n"
	             "       " PROG " stop\n"
	             "       " PROG " assets\n"
	             "start prints `export KUBECONFIG=<path>` once etcd and kube-apiserver are\n"
	             "ready; stop stops them and removes their files; assets builds etcd and\n"
	             "kube-apiserver " CK_ENVTEST_KUBE_VERSION " into the build cache and prints "
	             "the directory.\n"
	             "start -h lists its flags.\n");
}

/* The state directory, made (0700) and checked to be this user's. NULL with *err. */
static char *state_dir(char **err)
{
	const char *env = getenv("CKUBE_ENVTEST_STATE_DIR");
	const char *run = getenv("XDG_RUNTIME_DIR");
	char *dir = env && env[0]   ? ck_xstrdup(env)
	            : run && run[0] ? ck_xasprintf("%s/ckube-envtest", run)
	                            : ck_xasprintf("/tmp/ckube-envtest-%u", (unsigned)getuid());
	struct stat st;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		ck_err_set(err, "state directory %s: %s", dir, strerror(errno));
		free(dir);
		return NULL;
	}
	/* /tmp is shared: someone else's directory (or a link) there must not be used. */
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
		ck_err_set(err, "state directory %s is not a directory of this user", dir);
		free(dir);
		return NULL;
	}
	return dir;
}

/* The recorded environment's directory, or NULL when there is none. */
static char *current(const char *state)
{
	char *path = ck_xasprintf("%s/current", state), *data = NULL;
	size_t len = 0;
	int rc = ck_file_read_bounded(path, PATH_MAX, &data, &len, NULL);
	free(path);
	if (rc != 0)
		return NULL;
	while (len > 0 && data[len - 1] == '\n')
		data[--len] = '\0';
	return data;
}

static int put_current(const char *state, const char *dir, char **err)
{
	char *path = ck_xasprintf("%s/current", state);
	FILE *f = fopen(path, "w");
	int rc = f != NULL && fprintf(f, "%s\n", dir) > 0 ? 0 : -1;
	if (f != NULL && fclose(f) != 0)
		rc = -1;
	if (rc != 0)
		ck_err_set(err, "%s: %s", path, strerror(errno));
	free(path);
	return rc;
}

static int cmd_stop(void)
{
	char *err = NULL;
	char *state = state_dir(&err);
	if (state == NULL) {
		fprintf(stderr, PROG ": %s\n", err);
		free(err);
		return 1;
	}
	char *dir = current(state);
	int rc = 0;
	if (dir == NULL) {
		fprintf(stderr, PROG ": nothing to stop (no %s/current)\n", state);
	} else if (access(dir, F_OK) != 0) {
		/* Removed already (a start that cleaned it up as stale): forget it. */
		fprintf(stderr, PROG ": nothing to stop (%s is gone)\n", dir);
	} else if (ck_envtest_stop_dir(dir, &err) != 0) {
		fprintf(stderr, PROG ": stop: %s\n", err);
		rc = 1;
	} else {
		fprintf(stderr, PROG ": stopped, %s removed\n", dir);
	}
	if (rc == 0 && dir != NULL) {
		char *path = ck_xasprintf("%s/current", state);
		unlink(path);
		free(path);
	}
	free(err);
	free(dir);
	free(state);
	return rc;
}

static int cmd_start(int argc, char **argv)
{
	const char *assets = NULL, *gates = "";
	int64_t api_port = 0, etcd_port = 0, timeout_ms = 60000, crd_timeout_ms = 30000, v = 0;
	ck_flagset_t *fs = ck_flagset_new(PROG " start");
	ck_flag_string(fs, "assets", &assets,
	               "directory with etcd and kube-apiserver (empty: $CKUBE_ENVTEST_ASSETS, "
	               "else the build cache)");
	ck_flag_int(fs, "api-port", &api_port, 0, 65535,
	            "kube-apiserver's port on 127.0.0.1 (0: a free one)");
	ck_flag_int(fs, "etcd-port", &etcd_port, 0, 65535,
	            "etcd's client port on 127.0.0.1 (0: a free one)");
	ck_flag_duration(fs, "timeout", &timeout_ms, "how long to wait for the API server");
	ck_flag_duration(fs, "crd-timeout", &crd_timeout_ms,
	                 "how long to wait for each CRD to be Established");
	ck_flag_int(fs, "v", &v, 0, 10, "log verbosity (1: the start's steps and their times)");
	ck_flag_string(fs, "feature-gates", &gates,
	               "kube-apiserver's --feature-gates, e.g. ShardedListAndWatch=true (empty: "
	               "its defaults)");
	int first = argc, rc = 1;
	char *err = NULL, *state = NULL, *old = NULL, *gate_arg = NULL;
	ck_envtest_t *env = NULL;
	ck_flag_result_t fr = ck_flag_parse(fs, argc, argv, stdout, &first, &err);
	if (fr != CK_FLAG_OK) {
		if (fr == CK_FLAG_ERROR)
			fprintf(stderr, PROG ": %s\n", err);
		rc = fr == CK_FLAG_HELP ? 0 : 2;
		goto out;
	}
	ck_log_set_verbosity((int)v);
	if ((state = state_dir(&err)) == NULL)
		goto fail;
	/* One environment per state directory: a second start would orphan the first. */
	if ((old = current(state)) != NULL) {
		if (access(old, F_OK) == 0) {
			ck_err_set(&err,
			           "already running (KUBECONFIG=%s/kubeconfig); run `" PROG
			           " stop` first",
			           old);
			goto fail;
		}
		char *path = ck_xasprintf("%s/current", state);
		unlink(path);
		free(path);
	}
	ck_envtest_opts_t o = {.crd_paths = (const char *const *)argv + first,
	                       .ncrd_paths = (size_t)(argc - first),
	                       .assets_dir = assets,
	                       .dir = state,
	                       .api_port = (uint16_t)api_port,
	                       .etcd_port = (uint16_t)etcd_port,
	                       .start_timeout_ms = (uint32_t)timeout_ms,
	                       .crd_timeout_ms = (uint32_t)crd_timeout_ms,
	                       .detach = true};
	if (gates[0] != '\0') {
		gate_arg = ck_xasprintf("--feature-gates=%s", gates);
		o.apiserver_args = (const char *const *)&gate_arg;
		o.napiserver_args = 1;
	}
	if ((env = ck_envtest_start(&o, &err)) == NULL)
		goto fail;
	if (put_current(state, ck_envtest_dir(env), &err) != 0) {
		ck_envtest_stop_dir(ck_envtest_dir(env), NULL);
		goto fail;
	}
	printf("export KUBECONFIG=%s\n", ck_envtest_kubeconfig(env));
	fflush(stdout);
	fprintf(stderr, PROG ": ready in %.2fs: %s (%s)\n", (double)ck_envtest_start_ms(env) / 1000,
	        ck_envtest_server(env), ck_envtest_dir(env));
	rc = 0;
	goto out;
fail:
	/* The library's messages start "envtest: "; once is enough. */
	fprintf(stderr, PROG ": %s\n",
	        !err                                ? "failed"
	        : strncmp(err, "envtest: ", 9) == 0 ? err + 9
	                                            : err);
out:
	/* Detached: freeing the handle leaves the servers and the directory to stop. */
	if (env != NULL)
		ck_envtest_release(env);
	free(err);
	free(state);
	free(old);
	free(gate_arg);
	ck_flagset_free(fs);
	return rc;
}

/* Runs the build script next to the installed program (share/ckube) or in the
 * source tree (hack/), which builds what is missing and prints the directory. */
static int cmd_assets(void)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		fprintf(stderr, PROG ": assets: /proc/self/exe: %s\n", strerror(errno));
		return 1;
	}
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	*slash = '\0';
	const char *rel[] = {"../share/ckube/build-k8s.sh", "../hack/build-k8s.sh"};
	for (size_t i = 0; i < 2; i++) {
		char *script = ck_xasprintf("%s/%s", self, rel[i]);
		if (access(script, R_OK) == 0) {
			execlp("bash", "bash", script, "envtest", (char *)NULL);
			fprintf(stderr, PROG ": assets: bash: %s\n", strerror(errno));
			free(script);
			return 1;
		}
		free(script);
	}
	fprintf(stderr, PROG ": assets: no build-k8s.sh in %s/../share/ckube or %s/../hack\n", self,
	        self);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "start") == 0)
		return cmd_start(argc - 1, argv + 1);
	if (strcmp(argv[1], "stop") == 0 && argc == 2)
		return cmd_stop();
	if (strcmp(argv[1], "assets") == 0 && argc == 2)
		return cmd_assets();
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return 2;
}
