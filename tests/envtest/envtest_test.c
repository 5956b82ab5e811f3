/*
 * envtest's test program, run by tests/envtest/run.sh (make envtest-test) as an
 * unprivileged user, and built again by tests/lib/run.sh from the installed headers
 * and library only (so it uses nothing but <ckube/...> and libev, as a user's test
 * would).
 *
 *   envtest_test basic PARENT CRD...   start with the CRDs, create a Foo through a
 *                                      client made from ck_envtest_config, read it
 *                                      back through ck_envtest_client, stop; then no
 *                                      recorded PID alive and no directory left.
 *                                      Prints "start_ms N".
 *   envtest_test fail PARENT WANT [--api-port N] [--assets DIR] [CRD...]
 *                                      the start must fail with an error containing
 *                                      WANT, on one line, leaving no directory in
 *                                      PARENT and no process naming PARENT.
 *   envtest_test crash PARENT CRD...   start, print "dir D" and the PIDs, then wait to
 *                                      be killed (run.sh kill -9s it).
 *
 * Exit status 0 when every check held; 1 with "FAIL: ..." otherwise.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem; libcheck builds with -std=c11 alone */
#endif
#include <ckube/base.h>
#include <ckube/client.h>
#include <ckube/envtest.h>
#include <ckube/obj.h>
#include <ckube/status.h>

#include <dirent.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const foo_fields[] = {"spec.replicas", "spec.deploymentName"};
static const ck_type_t t_foo = {.group = "samplecontroller.k8s.io",
                                .version = "v1alpha1",
                                .kind = "Foo",
                                .resource = "foos",
                                .namespaced = true,
                                .fields = foo_fields,
                                .nfields = 2};

#include "check.h"

/* Whether pid runs (a zombie waiting for its parent to reap it does not). */
static int alive(int pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	return p != NULL && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* The number of live processes whose command line names s. */
static int procs_naming(const char *s)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;
	while (d != NULL && (de = readdir(d)) != NULL) {
		int pid = atoi(de->d_name);
		if (pid <= 0 || pid == getpid() || !alive(pid))
			continue;
		char path[64], buf[8192];
		snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		ssize_t len = read(fd, buf, sizeof(buf));
		close(fd);
		if (len > 0 && memmem(buf, (size_t)len, s, strlen(s)) != NULL)
			n++;
	}
	if (d != NULL)
		closedir(d);
	return n;
}

/* The number of envtest directories in parent. */
static int dirs_in(const char *parent)
{
	DIR *d = opendir(parent);
	struct dirent *de;
	int n = 0;
	while (d != NULL && (de = readdir(d)) != NULL)
		if (strncmp(de->d_name, "ckube-envtest.", 14) == 0)
			n++;
	if (d != NULL)
		closedir(d);
	return n;
}

/* The servers' PIDs from dir/pids (owner excluded); returns how many. */
static int server_pids(const char *dir, int pids[4])
{
	char path[4096], role[32];
	int pid, n = 0;
	unsigned long long st;
	snprintf(path, sizeof(path), "%s/pids", dir);
	FILE *f = fopen(path, "r");
	while (f != NULL && n < 4 && fscanf(f, "%31s %d %llu", role, &pid, &st) == 3)
		if (strcmp(role, "owner") != 0)
			pids[n++] = pid;
	if (f != NULL)
		fclose(f);
	return n;
}

/* ---- a user's client: its loop on this thread, the test body on a worker. */
typedef struct user {
	ck_client_t *c;
	ck_envtest_t *env;
	struct ev_loop *loop;
	ev_async done;
} user_t;

static void on_done(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

static void *body(void *arg)
{
	user_t *u = arg;
	ck_result_t r = {0};
	const char *foo = "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\","
	                  "\"metadata\":{\"name\":\"example-foo\"},"
	                  "\"spec\":{\"deploymentName\":\"example-foo\",\"replicas\":2}}";
	int rc = ck_client_create_sync(u->c, &t_foo, "default", foo, NULL, &r);
	CHECK(rc == 0, "creating a Foo: %s", r.error ? r.error : "?");
	ck_result_clear(&r);
	/* Read back through envtest's own client: the object is in the server. */
	rc = ck_client_get_sync(ck_envtest_client(u->env), &t_foo, "default", "example-foo", &r);
	CHECK(rc == 0 && r.obj != NULL, "reading the Foo back: %s", r.error ? r.error : "?");
	if (rc == 0 && r.obj != NULL) {
		const ck_val_t *v = ck_obj_field(r.obj, 0);
		CHECK(v->type == CK_VAL_INT && v->u.i == 2, "spec.replicas is not 2");
		CHECK(r.obj->uid[0] != '\0', "the Foo has no uid");
	}
	ck_result_clear(&r);
	/* Bad input the server refuses: a Foo whose replicas is a string. */
	const char *bad = "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\","
	                  "\"metadata\":{\"name\":\"bad\"},\"spec\":{\"replicas\":\"two\"}}";
	rc = ck_client_create_sync(u->c, &t_foo, "default", bad, NULL, &r);
	CHECK(rc != 0 && r.http_code == 422, "an invalid Foo was not refused with 422 (%d)",
	      r.http_code);
	ck_result_clear(&r);
	ev_async_send(u->loop, &u->done);
	return NULL;
}

static int run_basic(const char *parent, int ncrd, char **crds)
{
	char *err = NULL;
	ck_envtest_opts_t o = {
	    .crd_paths = (const char *const *)crds, .ncrd_paths = (size_t)ncrd, .dir = parent};
	ck_envtest_t *env = ck_envtest_start(&o, &err);
	if (env == NULL) {
		printf("FAIL: start: %s\n", err);
		free(err);
		return 1;
	}
	printf("start_ms %llu\n", (unsigned long long)ck_envtest_start_ms(env));
	char *dir = ck_xstrdup(ck_envtest_dir(env));
	int pids[4], np = server_pids(dir, pids);
	CHECK(np == 2, "%d servers recorded in %s/pids, want etcd and kube-apiserver", np, dir);
	for (int i = 0; i < np; i++)
		CHECK(alive(pids[i]), "server %d is not running", pids[i]);
	struct stat st;
	CHECK(stat(dir, &st) == 0 && (st.st_mode & 077) == 0 && st.st_uid == getuid(),
	      "%s is not a 0700 directory of this user", dir);

	/* A client of the user's own, from the config envtest hands back. */
	user_t u = {.env = env, .loop = ev_loop_new(EVFLAG_AUTO)};
	ck_config_t *cfg = ck_envtest_config(env, &err);
	CHECK(cfg != NULL, "config: %s", err ? err : "?");
	u.c = cfg ? ck_client_new(u.loop, cfg, NULL, &err) : NULL;
	CHECK(u.c != NULL, "client: %s", err ? err : "?");
	if (u.c != NULL) {
		ev_async_init(&u.done, on_done);
		ev_async_start(u.loop, &u.done);
		pthread_t t;
		pthread_create(&t, NULL, body, &u);
		ev_run(u.loop, 0);
		pthread_join(t, NULL);
		ck_client_free(u.c);
	}
	ev_loop_destroy(u.loop);

	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK(ck_envtest_stop(env, &err) == 0, "stop: %s", err ? err : "?");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("stop_ms %lld\n",
	       (long long)(t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
	for (int i = 0; i < np; i++)
		CHECK(!alive(pids[i]), "server %d still runs after stop", pids[i]);
	CHECK(access(dir, F_OK) != 0, "%s is still there after stop", dir);
	CHECK(procs_naming(dir) == 0, "a process still names %s", dir);
	free(dir);
	free(err);
	return failures ? 1 : 0;
}

static int run_fail(const char *parent, const char *want, int argc, char **argv)
{
	ck_envtest_opts_t o = {.dir = parent, .crd_timeout_ms = 10000};
	const char *crds[8];
	size_t n = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--api-port") == 0 && i + 1 < argc)
			o.api_port = (uint16_t)atoi(argv[++i]);
		else if (strcmp(argv[i], "--assets") == 0 && i + 1 < argc)
			o.assets_dir = argv[++i];
		else if (n < 8)
			crds[n++] = argv[i];
	}
	o.crd_paths = crds;
	o.ncrd_paths = n;
	char *err = NULL;
	ck_envtest_t *env = ck_envtest_start(&o, &err);
	CHECK(env == NULL, "the start did not fail");
	if (env != NULL) {
		ck_envtest_stop(env, NULL);
		return 1;
	}
	printf("error: %s\n", err);
	CHECK(err != NULL && strstr(err, want) != NULL, "the error does not say \"%s\"", want);
	CHECK(err != NULL && strchr(err, '\n') == NULL, "the error is not one line");
	CHECK(dirs_in(parent) == 0, "a directory was left in %s", parent);
	CHECK(procs_naming(parent) == 0, "a process naming %s still runs", parent);
	free(err);
	return failures ? 1 : 0;
}

static int run_crash(const char *parent, int ncrd, char **crds)
{
	char *err = NULL;
	ck_envtest_opts_t o = {
	    .crd_paths = (const char *const *)crds, .ncrd_paths = (size_t)ncrd, .dir = parent};
	ck_envtest_t *env = ck_envtest_start(&o, &err);
	if (env == NULL) {
		printf("FAIL: start: %s\n", err);
		return 1;
	}
	int pids[4], np = server_pids(ck_envtest_dir(env), pids);
	printf("self %d\ndir %s\n", (int)getpid(), ck_envtest_dir(env));
	for (int i = 0; i < np; i++)
		printf("pid %d\n", pids[i]);
	fflush(stdout);
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 3 && strcmp(argv[1], "basic") == 0)
		return run_basic(argv[2], argc - 3, argv + 3);
	if (argc >= 4 && strcmp(argv[1], "fail") == 0)
		return run_fail(argv[2], argv[3], argc - 4, argv + 4);
	if (argc >= 3 && strcmp(argv[1], "crash") == 0)
		return run_crash(argv[2], argc - 3, argv + 3);
	fprintf(stderr, "usage: envtest_test basic|fail|crash PARENT ...\n");
	return 2;
}
