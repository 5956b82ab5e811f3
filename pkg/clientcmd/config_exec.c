/*
 * config_exec: the exec credential plugin runner: spawning the plugin with its
 * environment and KUBERNETES_EXEC_INFO, bounding its time and output, parsing its
 * ExecCredential into the cache, and the backoff after a failure. Separate because
 * it is the one part of the loader that runs another program and may take seconds;
 * everything else answers at once.
 *
 * Design note. A plugin run may take seconds, so it is split from the cache for the
 * client's loop thread, which must never wait: ck_config_credentials_peek() answers
 * from the cache (or says a run is needed), ck_config_exec_run() runs the plugin on
 * whatever thread calls it. Two locks: mu guards the cache and is held only
 * briefly; exec_mu is held for a whole run, so that runs never overlap while peeks
 * go on. A failed run starts a backoff during which peeks fail with its error
 * instead of asking for yet another run: a broken plugin is not run once per
 * request.
 */
#include "pkg/clientcmd/config_internal.h"
#include "pkg/codec/json_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* After a failed plugin run: no new run for 1 s, doubling per failure up to 30 s. */
#define EXEC_BACKOFF_MIN_NS (1 * CK_NS_PER_SEC)
#define EXEC_BACKOFF_MAX_NS (30 * CK_NS_PER_SEC)
/* How often a plugin run looks at the cancel flag. */
#define EXEC_CANCEL_POLL_MS 50
/* A credential is a few KiB; anything much larger is a broken plugin. */
#define EXEC_STDOUT_MAX      (1024 * 1024)
#define EXEC_STDERR_KEEP     4096
#define EXEC_STDERR_LINE_MAX 200

static bool mem_eq(const char *a, size_t alen, const char *b, size_t blen)
{
	if (a == NULL || b == NULL)
		return a == b;
	return alen == blen && memcmp(a, b, alen) == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Exec credential plugins                                                                    */

/* The first line of the plugin's stderr, shortened and stripped of control characters. */
static char *first_line(const ck_sbuf_t *b)
{
	size_t n = 0;
	while (n < b->len && n < EXEC_STDERR_LINE_MAX && b->data[n] != '\n' && b->data[n] != '\r')
		n++;
	char *s = ck_xstrndup(b->data ? b->data : "", n);
	for (char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return s;
}

/* The child's environment: ours, minus what the plugin config and KUBERNETES_EXEC_INFO
 * set, plus those. Pointers are borrowed; free only the array. */
static char **exec_envp(const ck_config_t *c)
{
	size_t n = 0, ne = 0;
	while (environ && environ[n])
		n++;
	while (c->exec.env[ne])
		ne++;
	char **v = ck_xcalloc(n + ne + 2, sizeof(char *));
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(environ[i], '=');
		size_t len = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
		bool shadowed = len == strlen("KUBERNETES_EXEC_INFO") &&
		                memcmp(environ[i], "KUBERNETES_EXEC_INFO", len) == 0;
		for (size_t j = 0; j < ne && !shadowed; j++)
			shadowed = strncmp(c->exec.env[j], environ[i], len) == 0 &&
			           c->exec.env[j][len] == '=';
		if (!shadowed)
			v[k++] = environ[i];
	}
	for (size_t j = 0; j < ne; j++)
		v[k++] = c->exec.env[j];
	v[k++] = c->exec_info;
	return v;
}

static uint64_t mono_now(void)
{
	return ck_clk_mono_ns(ck_clk_real());
}

/* One run of the plugin: its process, the read ends of its output pipes, what it
 * wrote to stderr (the first EXEC_STDERR_KEEP bytes, for the error message), and
 * how the run ended. */
typedef struct exec_child {
	pid_t pid;          /* -1 when none is running (never spawned, or reaped) */
	int out_fd, err_fd; /* read ends; -1 once closed */
	ck_sbuf_t err;
	uint64_t deadline; /* monotonic ns */
	int status;        /* waitpid's, valid when status_known */
	bool status_known, timed_out, too_big, failed, cancelled;
} exec_child_t;

/*
 * Starts the plugin with an argv array (no shell), stdin from /dev/null, stdout
 * and stderr into pipes, in its own process group so that a timeout or a cancel
 * kills whatever it started, with default signal dispositions and mask. Returns 0
 * with ch->pid and the read ends set, or -1 with *err.
 */
static int exec_spawn(ck_config_t *c, exec_child_t *ch, char **err)
{
	const char *cmd = c->exec.command, *hint = c->exec.install_hint;
	int result = -1, po[2] = {-1, -1}, pe[2] = {-1, -1};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	bool fa_ok = false, attr_ok = false;
	size_t na = 0;
	while (c->exec.args[na])
		na++;
	char **argv = ck_xcalloc(na + 2, sizeof(char *));
	argv[0] = c->exec.command;
	for (size_t i = 0; i < na; i++)
		argv[i + 1] = c->exec.args[i];
	char **envp = exec_envp(c);

	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
		ck_err_set(err, "exec plugin \"%s\": pipe: %s", cmd, strerror(errno));
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	fa_ok = true;
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	/* Whatever else we have open (sockets, files) is none of the plugin's business. */
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	posix_spawnattr_init(&attr);
	attr_ok = true;
	sigset_t none, def;
	sigemptyset(&none);
	sigemptyset(&def);
	int defsigs[] = {SIGPIPE, SIGINT,  SIGTERM, SIGHUP, SIGQUIT,
	                 SIGCHLD, SIGALRM, SIGUSR1, SIGUSR2};
	for (size_t i = 0; i < CK_ARRAY_LEN(defsigs); i++)
		sigaddset(&def, defsigs[i]);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &def);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
	                                    POSIX_SPAWN_SETSIGDEF);

	int r = posix_spawnp(&ch->pid, cmd, &fa, &attr, argv, envp);
	if (r != 0) {
		ch->pid = -1;
		if (r == ENOENT)
			ck_err_set(err, "exec plugin \"%s\": executable not found%s%s", cmd,
			           hint ? ": " : "", hint ? hint : "");
		else
			ck_err_set(err, "exec plugin \"%s\": cannot run it: %s%s%s", cmd,
			           strerror(r), hint ? ": " : "", hint ? hint : "");
		goto out;
	}
	/* The read ends are the child's now; ours are only the write ends, closed below. */
	ch->out_fd = po[0];
	ch->err_fd = pe[0];
	po[0] = pe[0] = -1;
	result = 0;
out:
	for (int i = 0; i < 2; i++) {
		if (po[i] >= 0)
			close(po[i]);
		if (pe[i] >= 0)
			close(pe[i]);
	}
	if (fa_ok)
		posix_spawn_file_actions_destroy(&fa);
	if (attr_ok)
		posix_spawnattr_destroy(&attr);
	free(argv);
	free(envp);
	return result;
}

/* Reads both pipes until the plugin closes them, the deadline passes, a cancel
 * comes, stdout passes EXEC_STDOUT_MAX or poll fails (each noted in ch). */
static void exec_collect(ck_config_t *c, exec_child_t *ch, ck_sbuf_t *out, char **err)
{
	while (ch->out_fd >= 0 || ch->err_fd >= 0) {
		uint64_t now = mono_now();
		if (now >= ch->deadline) {
			ch->timed_out = true;
			return;
		}
		if (atomic_load(&c->exec_cancelled)) {
			ch->cancelled = true;
			return;
		}
		struct pollfd fds[2] = {{ch->out_fd, POLLIN, 0}, {ch->err_fd, POLLIN, 0}};
		int ms = (int)((ch->deadline - now) / CK_NS_PER_MS) + 1;
		if (ms > EXEC_CANCEL_POLL_MS)
			ms = EXEC_CANCEL_POLL_MS;
		int n = poll(fds, 2, ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ck_err_set(err, "exec plugin \"%s\": poll: %s", c->exec.command,
			           strerror(errno));
			ch->failed = true;
			return;
		}
		for (int i = 0; i < 2; i++) {
			int *fd = i == 0 ? &ch->out_fd : &ch->err_fd;
			if (*fd < 0 || fds[i].revents == 0)
				continue;
			char buf[16384];
			ssize_t got = read(*fd, buf, sizeof(buf));
			if (got < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (got <= 0) {
				close(*fd);
				*fd = -1;
				continue;
			}
			if (i == 0) {
				if (out->len + (size_t)got > EXEC_STDOUT_MAX) {
					ch->too_big = true;
					return;
				}
				ck_sbuf_append(out, buf, (size_t)got);
			} else if (ch->err.len < EXEC_STDERR_KEEP) {
				ck_sbuf_append(&ch->err, buf, (size_t)got);
			}
		}
	}
}

/* Waits for the plugin's exit. A run that already went wrong is killed (its whole
 * process group) first; one that closed its output but lingers still gets the
 * deadline and the cancel flag. */
static void exec_reap(ck_config_t *c, exec_child_t *ch)
{
	bool kill_it = ch->timed_out || ch->too_big || ch->failed || ch->cancelled;
	if (kill_it)
		kill(-ch->pid, SIGKILL);
	for (;;) {
		kill_it = ch->timed_out || ch->too_big || ch->failed || ch->cancelled;
		pid_t w = waitpid(ch->pid, &ch->status, kill_it ? 0 : WNOHANG);
		if (w == ch->pid) {
			ch->status_known = true;
			break;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) /* ECHILD: someone else reaped it (SIGCHLD ignored); judge the output */
			break;
		if (mono_now() >= ch->deadline) {
			ch->timed_out = true;
			kill(-ch->pid, SIGKILL);
			continue;
		}
		if (atomic_load(&c->exec_cancelled)) {
			ch->cancelled = true;
			kill(-ch->pid, SIGKILL);
			continue;
		}
		struct timespec ts = {0, 2 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	ch->pid = -1;
}

/* How the reaped run ended, as the caller's error: 0 when it exited 0 in time. */
static int exec_verdict(const ck_config_t *c, const exec_child_t *ch, char **err)
{
	const char *cmd = c->exec.command, *hint = c->exec.install_hint;
	if (ch->failed)
		return -1; /* *err set where it failed */
	if (ch->cancelled) {
		ck_err_set(err, "exec plugin \"%s\": cancelled", cmd);
		return -1;
	}
	if (ch->timed_out) {
		ck_err_set(err, "exec plugin \"%s\": timed out after %u ms and was killed", cmd,
		           c->exec_timeout_ms);
		return -1;
	}
	if (ch->too_big) {
		ck_err_set(err, "exec plugin \"%s\": output larger than %d bytes", cmd,
		           EXEC_STDOUT_MAX);
		return -1;
	}
	if (ch->status_known && !(WIFEXITED(ch->status) && WEXITSTATUS(ch->status) == 0)) {
		char *line = first_line(&ch->err);
		char how[48];
		if (WIFEXITED(ch->status))
			snprintf(how, sizeof(how), "exit code %d", WEXITSTATUS(ch->status));
		else
			snprintf(how, sizeof(how), "signal %d",
			         WIFSIGNALED(ch->status) ? WTERMSIG(ch->status) : 0);
		ck_err_set(err, "exec plugin \"%s\": failed with %s%s%s%s%s", cmd, how,
		           *line ? ": " : "", line, hint ? "; " : "", hint ? hint : "");
		free(line);
		return -1;
	}
	return 0;
}

/*
 * Runs the plugin once: spawn, collect its output, reap it, judge. Touches only
 * what never changes after load (and the atomic cancel flag), so it runs without
 * c->mu. Returns 0 with its stdout in *out, or -1 with *err (never the output).
 */
static int exec_run(ck_config_t *c, ck_sbuf_t *out, char **err)
{
	int result = -1;
	exec_child_t ch = {.pid = -1, .out_fd = -1, .err_fd = -1, .err = CK_SBUF_INIT};

	if (atomic_load(&c->exec_cancelled)) {
		ck_err_set(err, "exec plugin \"%s\": cancelled", c->exec.command);
		goto out;
	}
	if (exec_spawn(c, &ch, err) != 0)
		goto out;
	ch.deadline = mono_now() + (uint64_t)c->exec_timeout_ms * CK_NS_PER_MS;
	exec_collect(c, &ch, out, err);
	exec_reap(c, &ch);
	result = exec_verdict(c, &ch, err);
out:
	if (ch.pid > 0) {
		kill(-ch.pid, SIGKILL);
		while (waitpid(ch.pid, &ch.status, 0) < 0 && errno == EINTR)
			;
	}
	if (ch.out_fd >= 0)
		close(ch.out_fd);
	if (ch.err_fd >= 0)
		close(ch.err_fd);
	ck_sbuf_free(&ch.err);
	return result;
}

/* A string member of an object (borrowed); NULL when absent or not a string. */
static const char *jstr(const ck_json_t *obj, const char *key)
{
	return ck_json_str(ck_json_member(obj, key, strlen(key)));
}

/*
 * Parses an ExecCredential into the cache. Messages never quote the output. Read
 * with the library's own JSON reader in its mode for secrets: bounded depth, and
 * every copy of the output's strings is wiped when the document is freed.
 */
int ck_config_i_exec_parse(ck_config_t *c, const char *text, size_t len, char **err)
{
	int result = -1;
	const char *cmd = c->exec.command;
	char *jerr = NULL;
	ck_json_doc_t *doc = ck_json_i_parse_secret(text, len, &jerr);
	if (doc == NULL) {
		/* The reader's message names the byte offset and quotes nothing. */
		ck_err_set(err, "exec plugin \"%s\": output is not valid JSON: %s", cmd,
		           jerr ? jerr : "parse failed");
		goto out;
	}
	const ck_json_t *root = ck_json_root(doc);
	if (ck_json_type(root) != CK_JSON_OBJECT) {
		ck_err_set(err, "exec plugin \"%s\": output is not a JSON object but %s %s", cmd,
		           ck_json_type(root) == CK_JSON_ARRAY ? "an" : "a",
		           ck_json_type_name(ck_json_type(root)));
		goto out;
	}
	const char *api = jstr(root, "apiVersion");
	if (api == NULL || strcmp(api, c->exec.api_version) != 0) {
		ck_err_set(err,
		           "exec plugin \"%s\": returned apiVersion \"%.100s\", configured \"%s\"",
		           cmd, api ? api : "", c->exec.api_version);
		goto out;
	}
	const char *kind = jstr(root, "kind");
	if (kind && strcmp(kind, "ExecCredential") != 0) {
		ck_err_set(err, "exec plugin \"%s\": returned kind \"%.100s\", not ExecCredential",
		           cmd, kind);
		goto out;
	}
	const ck_json_t *st = ck_json_member(root, "status", 6);
	if (ck_json_type(st) != CK_JSON_OBJECT) {
		ck_err_set(err, "exec plugin \"%s\": no status in its output", cmd);
		goto out;
	}
	/* A \u0000 inside would cut the value short where C reads it: refuse it. */
	static const char *const fields[] = {"token", "clientCertificateData", "clientKeyData",
	                                     "expirationTimestamp"};
	for (size_t i = 0; i < CK_ARRAY_LEN(fields); i++) {
		const char *v = NULL;
		size_t vlen = 0;
		if (ck_json_get_string(ck_json_member(st, fields[i], strlen(fields[i])), &v,
		                       &vlen) == CK_JSON_OK &&
		    memchr(v, '\0', vlen) != NULL) {
			ck_err_set(err, "exec plugin \"%s\": status.%s contains a NUL character",
			           cmd, fields[i]);
			goto out;
		}
	}
	const char *tok = jstr(st, "token");
	const char *cert = jstr(st, "clientCertificateData");
	const char *key = jstr(st, "clientKeyData");
	const char *exp = jstr(st, "expirationTimestamp");
	if (tok && *tok == '\0')
		tok = NULL;
	if (cert && *cert == '\0')
		cert = NULL;
	if (key && *key == '\0')
		key = NULL;
	if (!tok && !cert && !key) {
		ck_err_set(err,
		           "exec plugin \"%s\": status has neither a token nor a client "
		           "certificate and key",
		           cmd);
		goto out;
	}
	if (!cert != !key) {
		ck_err_set(err,
		           "exec plugin \"%s\": status has only one of clientCertificateData and "
		           "clientKeyData",
		           cmd);
		goto out;
	}
	if (tok && !ck_config_i_token_ok(tok)) {
		ck_err_set(err, "exec plugin \"%s\": status.token contains control characters",
		           cmd);
		goto out;
	}
	int64_t expiry = 0;
	if (exp && *exp && ck_time_parse_rfc3339(exp, &expiry) < 0) {
		ck_err_set(
		    err, "exec plugin \"%s\": status.expirationTimestamp \"%.64s\" is not RFC 3339",
		    cmd, exp);
		goto out;
	}
	/* Only a credential that differs from the cached one is a new generation. */
	bool same = c->exec_cached && ck_config_i_str_eq(tok, c->exec_token) &&
	            mem_eq(cert, cert ? strlen(cert) : 0, c->exec_cert, c->exec_cert_len) &&
	            mem_eq(key, key ? strlen(key) : 0, c->exec_key, c->exec_key_len);
	if (!same) {
		ck_secret_free(c->exec_token, 0);
		free(c->exec_cert);
		ck_secret_free(c->exec_key, c->exec_key_len);
		c->exec_token = ck_xstrdup(tok);
		c->exec_cert = ck_xstrdup(cert);
		c->exec_cert_len = cert ? strlen(cert) : 0;
		c->exec_key = ck_xstrdup(key);
		c->exec_key_len = key ? strlen(key) : 0;
		if (c->exec_cached)
			c->generation = ck_config_i_generation_next(c->generation);
	}
	c->exec_cached = true;
	c->exec_expiry_wall = expiry;
	result = 0;
out:
	ck_json_doc_free(doc);
	free(jerr);
	return result;
}

/*
 * Runs the plugin and records the outcome: the new credential, or the error and the
 * next step of the backoff. Call with exec_mu held and mu not held. Returns 0, or -1
 * with *err.
 */
int ck_config_i_exec_refresh(ck_config_t *c, char **err)
{
	ck_sbuf_t out = CK_SBUF_INIT;
	char *e = NULL;
	int r = exec_run(c, &out, &e);
	pthread_mutex_lock(&c->mu);
	if (r == 0)
		r = ck_config_i_exec_parse(c, out.data, out.len, &e);
	if (r == 0) {
		c->exec_failed = false;
		c->exec_backoff_ns = 0;
		free(c->exec_last_err);
		c->exec_last_err = NULL;
	} else {
		if (e == NULL)
			e = ck_xstrdup("exec plugin failed");
		ck_err_wrap(&e, "%s", c->where);
		c->exec_backoff_ns =
		    c->exec_backoff_ns == 0 ? EXEC_BACKOFF_MIN_NS : c->exec_backoff_ns * 2;
		if (c->exec_backoff_ns > EXEC_BACKOFF_MAX_NS)
			c->exec_backoff_ns = EXEC_BACKOFF_MAX_NS;
		c->exec_failed = true;
		c->exec_retry_mono = ck_clk_mono_ns(c->clock) + c->exec_backoff_ns;
		free(c->exec_last_err);
		c->exec_last_err = ck_xstrdup(e);
	}
	pthread_mutex_unlock(&c->mu);
	ck_secure_zero(out.data, out.cap);
	ck_sbuf_free(&out);
	if (e != NULL) {
		ck_err_set(err, "%s", e);
		free(e);
	}
	return r;
}

int ck_config_exec_run(ck_config_t *c, char **err)
{
	if (!c->has_exec)
		return ck_err_set(err, "%s: no exec plugin configured",
		                  c->where ? c->where : "config");
	pthread_mutex_lock(&c->exec_mu);
	int r = ck_config_i_exec_refresh(c, err);
	pthread_mutex_unlock(&c->exec_mu);
	return r;
}

void ck_config_exec_cancel(ck_config_t *c)
{
	atomic_store(&c->exec_cancelled, true);
}
