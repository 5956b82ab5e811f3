/*
 * proc: envtest's processes. Starting a server, recording it in the directory's
 * pids file, stopping only what was recorded (a PID is checked to be the same
 * process before it is signalled: its start time and a command line naming the
 * directory), removing the directory, and cleaning up after a crashed test.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ckube/base.h>
#include <ckube/log.h>

#include "pkg/envtest/envtest_internal.h"

uint64_t ck_envtest_i_now_ms(void)
{
	return ck_clk_mono_ns(ck_clk_real()) / CK_NS_PER_MS;
}

void ck_envtest_i_sleep_ms(uint32_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

unsigned long long ck_envtest_i_proc_start(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses: fields start after the last ')'. */
	char *p = strrchr(buf, ')');
	if (p == NULL || p[1] != ' ')
		return 0;
	char state = p[2];
	if (state == 'Z' || state == 'X')
		return 0;
	/* Field 3 is the state; the start time is field 22. */
	p += 2;
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (p == NULL)
			return 0;
		p++;
	}
	return strtoull(p, NULL, 10);
}

/* Whether pid's command line names dir (its arguments are NUL-separated). */
static bool cmdline_names(pid_t pid, const char *dir)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	char *data = NULL;
	size_t len = 0;
	if (ck_file_read_bounded(path, CK_FILE_MAX_BYTES, &data, &len, NULL) != 0)
		return false;
	bool found = memmem(data, len, dir, strlen(dir)) != NULL;
	free(data);
	return found;
}

pid_t ck_envtest_i_spawn(char *const *argv, const char *log_path, bool detach, char **err)
{
	int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int out = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	pid_t parent = getpid(), pid = -1;
	if (in < 0 || out < 0) {
		ck_err_set(err, "%s: %s", in < 0 ? "/dev/null" : log_path, strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		ck_err_set(err, "starting %s: fork: %s", argv[0], strerror(errno));
		goto out;
	}
	if (pid == 0) {
		/* The child of a threaded process: async-signal-safe calls only. */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGQUIT};
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			sigaction(sigs[i], &dfl, NULL);
		if (detach) {
			setsid();
		} else {
			setpgid(0, 0);
			/* Dies with the thread that started it; if that already happened, now.
			 * SIGKILL: the data is thrown away anyway, and etcd asked to stop
			 * while its API server goes too waits ~10 s for it. */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(1);
		}
		if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
			_exit(126);
		close_range(3, ~0U, 0);
		execv(argv[0], argv);
		static const char msg[] = "ckube-envtest: exec failed\n";
		ssize_t w = write(2, msg, sizeof(msg) - 1);
		(void)w;
		_exit(127);
	}
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return pid;
}

int ck_envtest_i_record(const char *dir, const char *role, pid_t pid, char **err)
{
	char *path = ck_xasprintf("%s/pids", dir);
	int result = -1;
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		ck_err_set(err, "%s: %s", path, strerror(errno));
		goto out;
	}
	char line[128];
	int n = snprintf(line, sizeof(line), "%s %d %llu\n", role, (int)pid,
	                 pid > 0 ? ck_envtest_i_proc_start(pid) : 0ULL);
	/* Synced: after a crash of the machine's test runner the file is what is left. */
	if (write(fd, line, (size_t)n) != n || fsync(fd) != 0) {
		ck_err_set(err, "%s: writing: %s", path, strerror(errno));
		goto out;
	}
	result = 0;
out:
	if (fd >= 0)
		close(fd);
	free(path);
	return result;
}

int ck_envtest_i_read_pids(const char *dir, ck_envtest_proc_t **procs, size_t *n, char **err)
{
	char *path = ck_xasprintf("%s/pids", dir), *data = NULL;
	int result = -1;
	*procs = NULL;
	*n = 0;
	if (ck_file_read_bounded(path, 64 * 1024, &data, NULL, err) != 0)
		goto out;
	size_t cap = 0;
	char *save = NULL;
	for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		ck_envtest_proc_t p = {.pid = 0};
		int pid = 0;
		if (sscanf(line, "%31s %d %llu", p.role, &pid, &p.start) != 3 || pid < 0) {
			ck_err_set(err, "%s: not a pids line: %s", path, line);
			free(*procs);
			*procs = NULL;
			*n = 0;
			goto out;
		}
		p.pid = pid;
		if (*n == cap) {
			cap = cap ? cap * 2 : 4;
			*procs = ck_xrealloc(*procs, cap * sizeof(**procs));
		}
		(*procs)[(*n)++] = p;
	}
	result = 0;
out:
	free(data);
	free(path);
	return result;
}

/* Whether p is alive and still the process recorded in dir. */
static bool same_proc(const char *dir, const ck_envtest_proc_t *p)
{
	return p->pid > 0 && p->start != 0 && ck_envtest_i_proc_start(p->pid) == p->start &&
	       cmdline_names(p->pid, dir);
}

/* Waits up to ms for p to be gone (reaping it if it is our child); true when it is. */
static bool wait_gone(const ck_envtest_proc_t *p, uint32_t ms)
{
	uint64_t end = ck_envtest_i_now_ms() + ms;
	for (;;) {
		/* Reap it if it is our child (a no-op for another's). */
		waitpid(p->pid, NULL, WNOHANG);
		/* Not same_proc: an exiting process's command line reads empty before it
		 * is gone. Its start time stays until it is a zombie or reaped. */
		if (ck_envtest_i_proc_start(p->pid) != p->start)
			return true;
		if (ck_envtest_i_now_ms() >= end)
			return false;
		ck_envtest_i_sleep_ms(10);
	}
}

int ck_envtest_i_stop_procs(const char *dir, const ck_envtest_proc_t *procs, size_t n,
                            uint32_t grace_ms)
{
	int count = 0;
	/* Last started first: the API server before etcd. Together, the API server's
	 * retries keep etcd's graceful stop waiting (12 s instead of 4.5 s here). */
	for (size_t i = n; i-- > 0;) {
		const ck_envtest_proc_t *p = &procs[i];
		if (strcmp(p->role, "owner") == 0)
			continue;
		waitpid(p->pid, NULL, WNOHANG);
		if (!same_proc(dir, p) || kill(p->pid, SIGTERM) != 0)
			continue;
		count++;
		if (!wait_gone(p, grace_ms) && kill(p->pid, SIGKILL) == 0)
			wait_gone(p, 5000);
	}
	return count;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

int ck_envtest_i_remove_tree(const char *dir, char **err)
{
	if (nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
		return ck_err_set(err, "removing %s: %s", dir, strerror(errno));
	return 0;
}

void ck_envtest_i_clean_stale(const char *parent, const char *skip)
{
	DIR *d = opendir(parent);
	if (d == NULL)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, CK_ENVTEST_I_PREFIX, strlen(CK_ENVTEST_I_PREFIX)) != 0)
			continue;
		char *path = ck_xasprintf("%s/%s", parent, de->d_name);
		struct stat st;
		ck_envtest_proc_t *procs = NULL;
		size_t n = 0;
		/* Only this user's real directories that record an owner. */
		if ((skip != NULL && strcmp(path, skip) == 0) || lstat(path, &st) != 0 ||
		    !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
		    ck_envtest_i_read_pids(path, &procs, &n, NULL) != 0 || n == 0 ||
		    strcmp(procs[0].role, "owner") != 0) {
			free(procs);
			free(path);
			continue;
		}
		bool detached = procs[0].pid == 0;
		bool owner_alive =
		    !detached && ck_envtest_i_proc_start(procs[0].pid) == procs[0].start;
		bool servers_alive = false;
		for (size_t i = 1; i < n; i++)
			if (same_proc(path, &procs[i]))
				servers_alive = true;
		if ((detached && !servers_alive) || (!detached && !owner_alive)) {
			int killed = ck_envtest_i_stop_procs(path, procs, n, 5000);
			char *err = NULL;
			if (ck_envtest_i_remove_tree(path, &err) == 0)
				CK_LOG_INFO("envtest: removed a stale environment",
				            CK_KV_STR("dir", path),
				            CK_KV_INT("owner", procs[0].pid),
				            CK_KV_INT("serversStopped", killed));
			else
				CK_LOG_ERROR(err, "envtest: cannot remove a stale environment",
				             CK_KV_STR("dir", path));
			free(err);
		}
		free(procs);
		free(path);
	}
	closedir(d);
}

int ck_envtest_i_port(uint16_t *port, const char *what, char **err)
{
	int result = -1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ck_err_set(err, "socket: %s", strerror(errno));
	/* As Go's listeners do: a port in TIME_WAIT is free for the server too. */
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons(*port),
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		ck_err_set(err, "127.0.0.1:%u, %s, is in use (%s)", (unsigned)*port, what,
		           strerror(errno));
		goto out;
	}
	if (*port == 0 && getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
		ck_err_set(err, "getsockname: %s", strerror(errno));
		goto out;
	}
	*port = ntohs(a.sin_port);
	result = 0;
out:
	close(fd);
	return result;
}
