/*
 * libFuzzer target for kubeconfig loading: ck_config_load_text() on the input as
 * the YAML text of "/fuzz/kubeconfig", then ck_config_view() and a credentials peek.
 *
 * Options: a comment line "#fuzz: context=NAME master=URL" (either part optional)
 * anywhere in the input sets the --context and --master overrides; YAML ignores it.
 *
 * Nothing an input says can touch the machine:
 *  - ck_file_read_all() and ck_file_read_bounded() (the reader of files a kubeconfig
 *    names) are replaced (ld --wrap) by an in-memory folder: /fuzz/ca.pem,
 *    /fuzz/client.crt, /fuzz/client.key, /fuzz/token (copies of the fake fixtures
 *    under tests/fixtures/kubeconfig), /fuzz/empty, /fuzz/bad-token; every other
 *    path is "No such file or directory" and no real file is ever opened (so no
 *    /dev/zero, FIFO or /etc/shadow). Every path asked for must be absolute: a
 *    relative one in the config resolves against /fuzz.
 *  - posix_spawn()/posix_spawnp() are replaced by a trap: loading never runs an
 *    exec plugin, and the target never calls ck_config_credentials() or
 *    ck_config_exec_run() (the ones that do). ck_config_credentials_peek() never runs one.
 *  - opts.sa_dir names a folder that does not exist.
 *
 * Invariants: a config or an error (non-empty, naming /fuzz/kubeconfig, or --master
 * for a bad --master), never both, never neither; a loaded config has a normalized
 * http(s) server, a valid namespace, no CA with insecure-skip-tls-verify, a
 * NUL-terminated CA of ca_len bytes; a peek gives header-safe tokens and a cert with
 * its key; no message quotes a secret read from a (fake) file. Leaks are findings (LSan).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_GNU_SOURCE -Iinclude -I. \
 *     -Wl,--wrap=ck_file_read_all,--wrap=ck_file_read_bounded \
 *     -Wl,--wrap=posix_spawn,--wrap=posix_spawnp \
 *     tests/fuzz/fuzz_kubeconfig.c pkg/base/base.c pkg/clientcmd/config*.c \
 *     -lyaml -lyajl -pthread -lm -o fuzz_kubeconfig
 *   ./fuzz_kubeconfig -dict=tests/fuzz/fuzz_kubeconfig.dict corpus seeds
 * (bash tests/fuzz/run_fuzz_kubeconfig.sh [SECONDS] does all of this.)
 */
#include <ckube/base.h>
#include <ckube/config.h>

#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_PATH "/fuzz/kubeconfig"
/* Contents of the fake files that count as secrets: never in a message. */
#define SECRET_TOKEN "file-token-1"
#define SECRET_KEY   "ZmFrZSBjbGllbnQga2V5"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int __wrap_ck_file_read_all(const char *path, char **out, size_t *len, char **err);
int __wrap_ck_file_read_bounded(const char *path, size_t max_bytes, char **out, size_t *len,
                                char **err);
int __wrap_posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                       const posix_spawnattr_t *attr, char *const argv[], char *const envp[]);
int __wrap_posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                        const posix_spawnattr_t *attr, char *const argv[], char *const envp[]);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_kubeconfig: invariant failed: %s (line %d)\n",       \
			        #cond, __LINE__);                                                  \
			__builtin_trap();                                                          \
		}                                                                                  \
	} while (0)

static const struct fake_file {
	const char *path;
	const char *text;
} fake_files[] = {
    {"/fuzz/ca.pem", "-----BEGIN CERTIFICATE-----\nZmFrZSBjbHVzdGVyIENB\n"
                     "-----END CERTIFICATE-----\n"},
    {"/fuzz/client.crt", "-----BEGIN CERTIFICATE-----\nZmFrZSBjbGllbnQgY2VydA==\n"
                         "-----END CERTIFICATE-----\n"},
    {"/fuzz/client.key", "-----BEGIN PRIVATE KEY-----\n" SECRET_KEY "\n"
                         "-----END PRIVATE KEY-----\n"},
    {"/fuzz/token", SECRET_TOKEN "\n"},
    {"/fuzz/empty", ""},
    {"/fuzz/bad-token", "a\001b\n"},
};

/* The in-memory folder; the real ck_file_read_all() is never called. */
int __wrap_ck_file_read_all(const char *path, char **out, size_t *len, char **err)
{
	CHECK(path != NULL && path[0] == '/');
	for (size_t i = 0; i < CK_ARRAY_LEN(fake_files); i++) {
		if (strcmp(path, fake_files[i].path) == 0) {
			*out = ck_xstrdup(fake_files[i].text);
			if (len)
				*len = strlen(fake_files[i].text);
			return 0;
		}
	}
	return ck_err_set(err, "%s: No such file or directory", path);
}

/* The same folder; every fake file is far under any limit. */
int __wrap_ck_file_read_bounded(const char *path, size_t max_bytes, char **out, size_t *len,
                                char **err)
{
	CHECK(max_bytes > 0);
	return __wrap_ck_file_read_all(path, out, len, err);
}

int __wrap_posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	(void)pid, (void)path, (void)fa, (void)attr, (void)argv, (void)envp;
	fprintf(stderr, "fuzz_kubeconfig: posix_spawn called while loading\n");
	__builtin_trap();
}

int __wrap_posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                        const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	(void)pid, (void)file, (void)fa, (void)attr, (void)argv, (void)envp;
	fprintf(stderr, "fuzz_kubeconfig: posix_spawnp called while loading\n");
	__builtin_trap();
}

/* Where touch() adds the bytes it reads, so that the reads are not optimized out. */
volatile unsigned fuzz_kubeconfig_sink;

/* Reads every byte of s (so ASan sees an overrun) and returns its length. */
static size_t touch(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++)
		fuzz_kubeconfig_sink += (unsigned char)s[n];
	return n;
}

static size_t touch_opt(const char *s)
{
	return s ? touch(s) : 0;
}

static void touch_mem(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fuzz_kubeconfig_sink += (unsigned char)p[i];
}

static bool header_safe(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

static bool dns_label(const char *s)
{
	size_t n = strlen(s);
	if (n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool alnum = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9');
		if (!alnum && (s[i] != '-' || i == 0 || i == n - 1))
			return false;
	}
	return true;
}

/* Returns a new string: the value of "name=" on the first "#fuzz:" line, or NULL. */
static char *fuzz_opt(const char *text, const char *name)
{
	const char *line = strstr(text, "#fuzz:");
	if (line == NULL)
		return NULL;
	const char *eol = strchr(line, '\n');
	size_t nlen = strlen(name);
	for (const char *p = line + 6; *p && (eol == NULL || p < eol); p++) {
		if ((p[-1] == ' ' || p[-1] == ':') && strncmp(p, name, nlen) == 0 &&
		    p[nlen] == '=') {
			const char *v = p + nlen + 1;
			size_t n = strcspn(v, " \t\r\n");
			return ck_xstrndup(v, n);
		}
	}
	return NULL;
}

static void check_view(const ck_config_t *c)
{
	struct ck_config_view v;
	ck_config_view(c, &v);
	CHECK(v.server != NULL && v.source != NULL && v.context != NULL && v.cluster != NULL &&
	      v.user != NULL && v.namespace != NULL);
	size_t n = touch(v.server);
	CHECK(strncmp(v.server, "https://", 8) == 0 || strncmp(v.server, "http://", 7) == 0);
	CHECK(n > 0 && v.server[n - 1] != '/');
	CHECK(header_safe(v.server) && strchr(v.server, ' ') == NULL);
	CHECK(strcmp(v.source, "kubeconfig " FUZZ_PATH) == 0);
	touch(v.context);
	touch(v.cluster);
	touch(v.user);
	touch(v.namespace);
	CHECK(dns_label(v.namespace));
	if (v.ca_pem != NULL) {
		touch_mem(v.ca_pem, v.ca_len);
		CHECK(v.ca_pem[v.ca_len] == '\0');
		CHECK(!v.insecure);
	} else {
		CHECK(v.ca_len == 0);
	}
	touch_opt(v.tls_server_name);
	if (v.proxy_url != NULL) {
		touch(v.proxy_url);
		CHECK(strncmp(v.proxy_url, "http://", 7) == 0 ||
		      strncmp(v.proxy_url, "https://", 8) == 0 ||
		      strncmp(v.proxy_url, "socks5://", 9) == 0);
	}
	touch_opt(v.username);
	touch_opt(v.password);
}

/* A peek never runs the plugin (spawns trap); it may re-read a (fake) token file. */
static void check_peek(ck_config_t *c, ck_cred_want_t want)
{
	struct ck_config_view v;
	ck_config_view(c, &v);
	ck_cred_t cr;
	char *err = NULL;
	int r = ck_config_credentials_peek(c, want, &cr, &err);
	if (r == 0) {
		CHECK(err == NULL);
		if (cr.token)
			CHECK(touch(cr.token) > 0 && header_safe(cr.token));
		CHECK((cr.cert_pem == NULL) == (cr.key_pem == NULL));
		if (cr.cert_pem) {
			touch_mem(cr.cert_pem, cr.cert_len);
			touch_mem(cr.key_pem, cr.key_len);
		}
	} else if (r == CK_CONFIG_NEED_EXEC) {
		CHECK(v.has_exec && err == NULL);
		CHECK(cr.token == NULL && cr.cert_pem == NULL && cr.key_pem == NULL);
	} else {
		/* Only a failed plugin run leads here, and none ran. */
		CHECK(0 && "peek failed without a plugin run");
	}
	ck_cred_clear(&cr);
	free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A NUL-terminated copy for the option line; the loader gets (data, size). */
	char *text = ck_xstrndup((const char *)data, size);
	char *context = fuzz_opt(text, "context");
	char *master = fuzz_opt(text, "master");
	ck_config_load_opts_t o = {
	    .context = context,
	    .master = master,
	    .sa_dir = "/nonexistent/fuzz-serviceaccount",
	    .exec_timeout_ms = 1,
	};
	char *err = NULL;
	ck_config_t *c = ck_config_load_text((const char *)data, size, FUZZ_PATH, &o, &err);
	CHECK((c == NULL) != (err == NULL));
	if (c == NULL) {
		CHECK(touch(err) > 0);
		CHECK(strstr(err, FUZZ_PATH) != NULL ||
		      (master && *master && strncmp(err, "--master: ", 10) == 0));
		/* (Unless the input itself says them: then they are not from a file.) */
		CHECK(strstr(err, SECRET_TOKEN) == NULL || strstr(text, SECRET_TOKEN) != NULL);
		CHECK(strstr(err, SECRET_KEY) == NULL || strstr(text, SECRET_KEY) != NULL);
		free(err);
	} else {
		check_view(c);
		check_peek(c, CK_CRED_CURRENT);
		check_peek(c, CK_CRED_REFRESH);
		check_peek(c, CK_CRED_LAST);
		ck_config_free(c);
	}
	free(context);
	free(master);
	free(text);
	return 0;
}
