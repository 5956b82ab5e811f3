/*
 * Unit tests for pkg/clientcmd: kubeconfig loading and merging, every auth kind,
 * exec plugins (tests/fixtures/exec-plugin.sh), in-cluster, token re-reads with a
 * fake clock. Runs from tests/unit (the Makefile's cwd), so fixtures are ../fixtures.
 */
#include <ckube/config.h>

#include <check.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIX "../fixtures/kubeconfig"

/* 2029-12-31T23:00:00Z, the fake wall clock's start. */
#define WALL_START 1893452400LL

static char tmpdir[256];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char *p = ck_xasprintf("%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	free(p);
}

static char *read_file(const char *dir, const char *name)
{
	char *p = ck_xasprintf("%s/%s", dir, name);
	char *out = NULL;
	if (ck_file_read_all(p, &out, NULL, NULL) < 0)
		out = NULL;
	free(p);
	return out;
}

/* Every test starts from an environment with no configuration anywhere. */
static void setup(void)
{
	strcpy(tmpdir, "/tmp/csc-config-test-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	unsetenv("KUBECONFIG");
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	unsetenv("POD_NAMESPACE");
	unsetenv("CKUBE_SERVICEACCOUNT_DIR");
	unsetenv("PLUGIN_MODE");
	setenv("HOME", tmpdir, 1);
	setenv("PLUGIN_STATE", tmpdir, 1);
}

static void teardown(void)
{
	nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static ck_config_t *load_text(const char *text, const ck_config_load_opts_t *o, char **err)
{
	return ck_config_load_text(text, strlen(text), FIX "/inline.yaml", o, err);
}

/* Loads text that must fail, and returns the message (free it). */
static char *load_err(const char *text)
{
	char *err = NULL;
	ck_config_t *c = load_text(text, NULL, &err);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(err);
	return err;
}

#define ASSERT_HAS(s, sub)                                                                         \
	do {                                                                                       \
		ck_assert_ptr_nonnull(s);                                                          \
		ck_assert_msg(strstr((s), (sub)) != NULL, "\"%s\" lacks \"%s\"", (s), (sub));      \
	} while (0)
#define ASSERT_LACKS(s, sub)                                                                       \
	ck_assert_msg(strstr((s), (sub)) == NULL, "\"%s\" has \"%s\"", (s), (sub))

/* ---------------------------------------------------------------------------------------- */
/* Auth kinds from fixtures                                                                 */

START_TEST(test_basic_token_and_ca_file)
{
	char *err = NULL;
	ck_config_load_opts_t o = {.kubeconfig = FIX "/basic.yaml"};
	ck_config_t *c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	struct ck_config_view v;
	ck_config_view(c, &v);
	ck_assert_str_eq(v.server, "https://127.0.0.1:6443");
	ck_assert_str_eq(v.source, "kubeconfig " FIX "/basic.yaml");
	ck_assert_str_eq(v.context, "dev");
	ck_assert_str_eq(v.cluster, "dev-cluster");
	ck_assert_str_eq(v.user, "bob");
	ck_assert_str_eq(v.namespace, "team-a");
	ck_assert_str_eq(v.tls_server_name, "kubernetes.default");
	ck_assert_ptr_null(v.proxy_url);
	ck_assert(!v.insecure);
	ck_assert(!v.has_exec);
	ck_assert_uint_eq(v.ca_len, 75);
	ASSERT_HAS(v.ca_pem, "ZmFrZSBjbHVzdGVyIENB");

	ck_cred_t cr;
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "static-token-bob");
	ck_assert_ptr_null(cr.cert_pem);
	ck_assert_uint_eq(cr.generation, 0);
	ck_cred_clear(&cr);
	ck_assert_ptr_null(cr.token);
	/* A static credential does not change on a forced refresh. */
	ck_assert_int_eq(ck_config_credentials(c, true, &cr, &err), 0);
	ck_assert_uint_eq(cr.generation, 0);
	ck_cred_clear(&cr);
	ck_config_free(c);
	ck_cred_clear(NULL);
	ck_config_free(NULL);
}
END_TEST

START_TEST(test_client_cert_files_and_insecure)
{
	char *err = NULL;
	ck_config_load_opts_t o = {.kubeconfig = FIX "/certfile.yaml"};
	ck_config_t *c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	struct ck_config_view v;
	ck_config_view(c, &v);
	/* No scheme, TLS settings present: https, like client-go. */
	ck_assert_str_eq(v.server, "https://10.0.0.1:6443");
	ck_assert(v.insecure);
	ck_assert_ptr_null(v.ca_pem);
	ck_cred_t cr;
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_ptr_null(cr.token);
	ck_assert_uint_eq(cr.cert_len, 79);
	ASSERT_HAS(cr.cert_pem, "ZmFrZSBjbGllbnQgY2VydA==");
	ck_assert_uint_eq(cr.key_len, 75);
	ASSERT_HAS(cr.key_pem, "BEGIN PRIVATE KEY");
	ck_cred_clear(&cr);
	ck_config_free(c);
}
END_TEST

START_TEST(test_data_fields_win_and_decode)
{
	char *err = NULL;
	ck_config_load_opts_t o = {.kubeconfig = FIX "/certdata.yaml"};
	ck_config_t *c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	struct ck_config_view v;
	ck_config_view(c, &v);
	char *ca = read_file(FIX, "ca.pem");
	ck_assert_uint_eq(v.ca_len, strlen(ca));
	ck_assert(memcmp(v.ca_pem, ca, v.ca_len) == 0);
	free(ca);
	ck_assert_str_eq(v.proxy_url, "socks5://127.0.0.1:1080");
	ck_cred_t cr;
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	char *crt = read_file(FIX, "client.crt"), *key = read_file(FIX, "client.key");
	ck_assert_str_eq(cr.cert_pem, crt);
	ck_assert_uint_eq(cr.cert_len, strlen(crt));
	/* client-key-data is a folded scalar: the white space inside is ignored. */
	ck_assert_str_eq(cr.key_pem, key);
	free(crt);
	free(key);
	ck_cred_clear(&cr);
	ck_config_free(c);
}
END_TEST

START_TEST(test_token_wins_over_token_file_and_basic_auth)
{
	char *err = NULL;
	ck_config_load_opts_t o = {.kubeconfig = FIX "/tokenfile.yaml", .context = "both"};
	ck_config_t *c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_cred_t cr;
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "the-token-wins");
	ck_assert_uint_eq(cr.generation, 0);
	ck_cred_clear(&cr);
	ck_config_free(c);

	o.context = "basic";
	c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	struct ck_config_view v;
	ck_config_view(c, &v);
	ck_assert_str_eq(v.username, "admin");
	ck_assert_str_eq(v.password, "s3cret");
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_ptr_null(cr.token);
	ck_cred_clear(&cr);
	ck_config_free(c);

	/* The default context reads tokenFile relative to the kubeconfig, trimmed. */
	o.context = NULL;
	c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "file-token-1");
	ck_assert_uint_eq(cr.generation, 1);
	ck_cred_clear(&cr);
	ck_config_free(c);
}
END_TEST

START_TEST(test_token_file_reread_with_fake_clock)
{
	ck_clk_fake_t fc;
	ck_clk_fake_init(&fc, 1000, WALL_START * (int64_t)CK_NS_PER_SEC);
	write_file(tmpdir, "tok", "  first\n");
	char *text = ck_xasprintf("current-context: c\n"
	                          "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
	                          "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
	                          "users: [{name: u, user: {tokenFile: %s/tok}}]\n",
	                          tmpdir);
	char *err = NULL;
	ck_config_load_opts_t o = {.clock = &fc.base};
	ck_config_t *c = load_text(text, &o, &err);
	free(text);
	ck_assert_msg(c != NULL, "%s", err);
	ck_cred_t cr;
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "first");
	unsigned g1 = cr.generation;
	ck_assert_uint_ne(g1, 0);
	ck_cred_clear(&cr);

	/* Rotated on disk, but a minute has not passed: the cached token is returned. */
	write_file(tmpdir, "tok", "second\n");
	ck_clk_fake_advance(&fc, 59 * CK_NS_PER_SEC);
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "first");
	ck_assert_uint_eq(cr.generation, g1);
	ck_cred_clear(&cr);

	ck_clk_fake_advance(&fc, 1 * CK_NS_PER_SEC);
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "second");
	unsigned g2 = cr.generation;
	ck_assert_uint_ne(g2, g1);
	ck_cred_clear(&cr);

	/* Unchanged content: same generation. */
	ck_clk_fake_advance(&fc, 61 * CK_NS_PER_SEC);
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_uint_eq(cr.generation, g2);
	ck_cred_clear(&cr);

	/* Unreadable or empty: the last good token stays. */
	char *p = ck_xasprintf("%s/tok", tmpdir);
	unlink(p);
	ck_clk_fake_advance(&fc, 61 * CK_NS_PER_SEC);
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "second");
	ck_cred_clear(&cr);
	write_file(tmpdir, "tok", " \n");
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "second");
	ck_assert_uint_eq(cr.generation, g2);
	ck_cred_clear(&cr);

	/* A forced refresh (after a 401) re-reads at once. */
	write_file(tmpdir, "tok", "third");
	ck_assert_int_eq(ck_config_credentials(c, true, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "third");
	ck_assert_uint_ne(cr.generation, g2);
	ck_cred_clear(&cr);
	free(p);
	ck_config_free(c);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Errors name the file and the field                                                       */

START_TEST(test_error_messages)
{
	static const char base[] = "current-context: dev\n"
	                           "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n";
	char *text, *e;

	text = ck_xasprintf("%scontexts: [{name: dev, context: {cluster: c, user: bob}}]\n", base);
	e = load_err(text);
	ck_assert_str_eq(e,
	                 "kubeconfig " FIX "/inline.yaml: context \"dev\": user \"bob\" not found");
	free(e);
	free(text);

	text = ck_xasprintf("%scontexts: [{name: dev, context: {cluster: nope}}]\n", base);
	e = load_err(text);
	ck_assert_str_eq(e, "kubeconfig " FIX
	                    "/inline.yaml: context \"dev\": cluster \"nope\" not found");
	free(e);
	free(text);

	text = ck_xasprintf("%scontexts: [{name: other, context: {cluster: c}}]\n", base);
	e = load_err(text);
	ck_assert_str_eq(e, "kubeconfig " FIX
	                    "/inline.yaml: current-context: context \"dev\" not found");
	free(e);
	free(text);

	e = load_err("clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
	             "contexts: [{name: dev, context: {cluster: c}}]\n");
	ASSERT_HAS(e, FIX "/inline.yaml");
	ASSERT_HAS(e, "current-context is not set");
	free(e);

	text = ck_xasprintf("%scontexts: [{name: dev, context: {cluster: c, user: u}}]\n"
	                    "users: [{name: u, user: {exec: {command: x, apiVersion: "
	                    "client.authentication.k8s.io/v1}, auth-provider: {name: oidc}}}]\n",
	                    base);
	e = load_err(text);
	ck_assert_str_eq(e, "kubeconfig " FIX "/inline.yaml: user \"u\": exec and auth-provider "
	                    "cannot be used together");
	free(e);
	free(text);

	text = ck_xasprintf(
	    "%scontexts: [{name: dev, context: {cluster: c, user: u}}]\n"
	    "users: [{name: u, user: {client-certificate-data: 'bm90IGJhc2U2NA=*'}}]\n",
	    base);
	e = load_err(text);
	ck_assert_str_eq(e, "kubeconfig " FIX
	                    "/inline.yaml: user \"u\": client-certificate-data: invalid base64");
	free(e);
	free(text);

	text = ck_xasprintf("%scontexts: [{name: dev, context: {cluster: c, user: u}}]\n"
	                    "users: [{name: u, user: {client-certificate-data: Zm9v}}]\n",
	                    base);
	e = load_err(text);
	ASSERT_HAS(e, "user \"u\": client-certificate is set but client-key");
	free(e);
	free(text);

	text = ck_xasprintf("%scontexts: [{name: dev, context: {cluster: c, user: u}}]\n"
	                    "users: [{name: u, user: {token: t, username: a, password: b}}]\n",
	                    base);
	e = load_err(text);
	ASSERT_HAS(e, "user \"u\": more than one authentication method");
	free(e);
	free(text);

	text = ck_xasprintf("%scontexts: [{name: dev, context: {cluster: c, user: u}}]\n"
	                    "users: [{name: u, user: {tokenFile: missing-token}}]\n",
	                    base);
	e = load_err(text);
	ck_assert_str_eq(e, "kubeconfig " FIX "/inline.yaml: user \"u\": tokenFile: " FIX
	                    "/missing-token: No such file or directory");
	free(e);
	free(text);

	text = ck_xasprintf("%scontexts: [{name: dev, context: {cluster: c, namespace: Bad_NS}}]\n",
	                    base);
	e = load_err(text);
	ASSERT_HAS(e, "context \"dev\": namespace \"Bad_NS\"");
	free(e);
	free(text);

	e = load_err("current-context: dev\n"
	             "clusters: [{name: c, cluster: {certificate-authority: ca.pem}}]\n"
	             "contexts: [{name: dev, context: {cluster: c}}]\n");
	ck_assert_str_eq(e, "kubeconfig " FIX "/inline.yaml: cluster \"c\": server is not set");
	free(e);

	e = load_err("current-context: dev\n"
	             "clusters: [{name: c, cluster: {server: 'https://h', proxy-url: 'ftp://p'}}]\n"
	             "contexts: [{name: dev, context: {cluster: c}}]\n");
	ASSERT_HAS(e, "cluster \"c\": proxy-url \"ftp://p\": scheme must be");
	free(e);

	e = load_err("current-context: dev\n"
	             "clusters: [{name: c, cluster: {server: 'https://h', certificate-authority: "
	             "nope.pem}}]\n"
	             "contexts: [{name: dev, context: {cluster: c}}]\n");
	ck_assert_str_eq(e, "kubeconfig " FIX
	                    "/inline.yaml: cluster \"c\": certificate-authority: " FIX
	                    "/nope.pem: No such file or directory");
	free(e);

	e = load_err("current-context: dev\n"
	             "clusters: [{name: c, cluster: {server: 'https://h', certificate-authority: "
	             "ca.pem, insecure-skip-tls-verify: true}}]\n"
	             "contexts: [{name: dev, context: {cluster: c}}]\n");
	ASSERT_HAS(e, "cluster \"c\": insecure-skip-tls-verify cannot be used together");
	free(e);

	e = load_err("current-context: dev\n"
	             "clusters: [{name: c, cluster: {server: 'ftp://h'}}]\n"
	             "contexts: [{name: dev, context: {cluster: c}}]\n");
	ASSERT_HAS(e, "cluster \"c\": server \"ftp://h\": scheme must be http or https");
	free(e);

	e = load_err("clusters: {name: c}\n");
	ASSERT_HAS(e,
	           "kubeconfig " FIX "/inline.yaml: clusters: expected a list (line 1, column 11)");
	free(e);

	e = load_err("clusters:\n- name: c\n- name: c\n");
	ASSERT_HAS(e, "clusters: duplicate name \"c\" (line 3");
	free(e);

	e = load_err(
	    "current-context: dev\n"
	    "clusters: [{name: c, cluster: {server: 'https://h', insecure-skip-tls-verify: "
	    "maybe}}]\n"
	    "contexts: [{name: dev, context: {cluster: c}}]\n");
	ASSERT_HAS(e, "cluster \"c\": insecure-skip-tls-verify: expected true or false");
	free(e);

	e = load_err("- just\n- a list\n");
	ASSERT_HAS(e, "expected a mapping at the top level");
	free(e);

	text = ck_xasprintf("%scontexts: [{name: dev, context: {cluster: c, user: u}}]\n"
	                    "users: [{name: u, user: {as: admin, token: t}}]\n",
	                    base);
	e = load_err(text);
	ASSERT_HAS(e, "user \"u\": impersonation");
	free(e);
	free(text);

	text = ck_xasprintf("%scontexts: [{name: dev, context: {cluster: c, user: u}}]\n"
	                    "users: [{name: u, user: {token: \"a\\r\\nX-Injected: 1\"}}]\n",
	                    base);
	e = load_err(text);
	ASSERT_HAS(e, "user \"u\": token: contains control characters");
	ASSERT_LACKS(e, "Injected");
	free(e);
	free(text);
}
END_TEST

START_TEST(test_exec_config_errors)
{
	static const char head[] = "current-context: dev\n"
	                           "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
	                           "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
	                           "users: [{name: u, user: {exec: ";
	struct {
		const char *exec, *want;
	} cases[] = {
	    {"{apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never}",
	     "exec: command is not set"},
	    {"{command: x, interactiveMode: Never}", "exec: apiVersion is not set"},
	    {"{command: x, apiVersion: client.authentication.k8s.io/v1alpha1}",
	     "exec: apiVersion \"client.authentication.k8s.io/v1alpha1\" is not supported"},
	    {"{command: x, apiVersion: client.authentication.k8s.io/v1}",
	     "exec: interactiveMode must be set"},
	    {"{command: x, apiVersion: client.authentication.k8s.io/v1, interactiveMode: Always}",
	     "exec: interactiveMode Always"},
	    {"{command: x, apiVersion: client.authentication.k8s.io/v1beta1, env: [{value: v}]}",
	     "exec: env[0]: name is missing"},
	    {"{command: x, apiVersion: client.authentication.k8s.io/v1beta1, args: [[1]]}",
	     "exec: args[0]: expected a string"},
	};
	for (size_t i = 0; i < CK_ARRAY_LEN(cases); i++) {
		char *text = ck_xasprintf("%s%s}}]\n", head, cases[i].exec);
		char *e = load_err(text);
		ASSERT_HAS(e, "kubeconfig " FIX "/inline.yaml: user \"u\": ");
		ASSERT_HAS(e, cases[i].want);
		free(e);
		free(text);
	}
	/* v1beta1 defaults interactiveMode to IfAvailable; the plugin is not run at load. */
	char *err = NULL;
	char *text = ck_xasprintf("%s%s}}]\n", head,
	                          "{command: x, apiVersion: client.authentication.k8s.io/v1beta1}");
	ck_config_t *c = load_text(text, NULL, &err);
	ck_assert_msg(c != NULL, "%s", err);
	struct ck_config_view v;
	ck_config_view(c, &v);
	ck_assert(v.has_exec);
	ck_config_free(c);
	free(text);
}
END_TEST

/*
 * Files named in a kubeconfig are read by one bounded reader: a FIFO (or any file
 * that is not a regular file) is refused without blocking, a file over 1 MiB is
 * refused, and the message names the file and the kubeconfig field. Before, a FIFO
 * as certificate-authority blocked the load forever (and a tokenFile FIFO blocked
 * the client's loop thread at each re-read); the alarm turns that into a failure.
 */
START_TEST(test_named_files_bounded_and_regular)
{
	alarm(10);
	char *fifo = ck_xasprintf("%s/fifo", tmpdir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	char *big = ck_xasprintf("%s/big.pem", tmpdir);
	FILE *f = fopen(big, "w");
	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < 1100; i++)
		fprintf(f, "%01023d\n", 0);
	fclose(f);
	write_file(tmpdir, "ok.pem", "fake CA\n");

	struct {
		const char *cluster, *user, *want;
		const char *file;
	} cases[] = {
	    {"certificate-authority: %s", "token: t", "certificate-authority: ", fifo},
	    {"certificate-authority: %s", "token: t", "certificate-authority: ", big},
	    {"certificate-authority: %s/ok.pem", "tokenFile: %s", "tokenFile: ", fifo},
	    {"certificate-authority: %s/ok.pem",
	     "client-certificate: %s/ok.pem\n    client-key: %s", "client-key: ", fifo},
	};
	for (size_t i = 0; i < CK_ARRAY_LEN(cases); i++) {
		char *cl = ck_xasprintf(cases[i].cluster, i < 2 ? cases[i].file : tmpdir);
		char *us = i == 3 ? ck_xasprintf(cases[i].user, tmpdir, cases[i].file)
		                  : ck_xasprintf(cases[i].user, cases[i].file);
		char *text =
		    ck_xasprintf("current-context: c\n"
		                 "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
		                 "clusters:\n- name: c\n  cluster:\n    server: https://h:1\n"
		                 "    %s\n"
		                 "users:\n- name: u\n  user:\n    %s\n",
		                 cl, us);
		char *err = load_err(text);
		ASSERT_HAS(err, cases[i].want);
		ASSERT_HAS(err, cases[i].file);
		ASSERT_HAS(err, cases[i].file == big ? "larger than 1048576 bytes"
		                                     : "not a regular file (a FIFO)");
		free(err);
		free(text);
		free(cl);
		free(us);
	}
	free(fifo);
	free(big);
	alarm(0);
}
END_TEST

/*
 * A server URL with user information (user:password@) is refused, and the message
 * does not repeat the password: the daemon printed the whole URL in its "Starting"
 * line, and curl would have sent it as basic auth.
 */
START_TEST(test_server_userinfo_refused)
{
	const char *servers[] = {"https://admin:hunter2@h:6443", "https://admin@h:6443/prefix",
	                         "admin:hunter2@10.0.0.1"};
	for (size_t i = 0; i < CK_ARRAY_LEN(servers); i++) {
		char *text = ck_xasprintf("current-context: c\n"
		                          "clusters: [{name: c, cluster: {server: '%s'}}]\n"
		                          "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
		                          "users: [{name: u, user: {token: t}}]\n",
		                          servers[i]);
		char *err = load_err(text);
		ASSERT_HAS(err, "user information");
		ASSERT_LACKS(err, "hunter2");
		ASSERT_LACKS(err, "admin");
		free(err);
		free(text);
	}
	/* --master the same. */
	char *err = NULL;
	ck_config_load_opts_t o = {.kubeconfig = FIX "/basic.yaml",
	                           .master = "https://admin:hunter2@h:6443"};
	ck_assert_ptr_null(ck_config_load(&o, &err));
	ASSERT_HAS(err, "--master");
	ASSERT_HAS(err, "user information");
	ASSERT_LACKS(err, "hunter2");
	free(err);
}
END_TEST

START_TEST(test_malformed_yaml_position)
{
	char *err = NULL;
	ck_config_load_opts_t o = {.kubeconfig = FIX "/malformed.yaml"};
	ck_assert_ptr_null(ck_config_load(&o, &err));
	ASSERT_HAS(err, "kubeconfig " FIX "/malformed.yaml: line ");
	ASSERT_HAS(err, ", column ");
	/* The unterminated string runs to the end; where it started is what helps. */
	ASSERT_HAS(err, "line 7, column 1: found unexpected end of stream while scanning a quoted "
	                "scalar (started at line 5, column 13)");
	free(err);
}
END_TEST

START_TEST(test_explicit_path_missing_and_context_override)
{
	char *err = NULL;
	ck_config_load_opts_t o = {.kubeconfig = FIX "/nope.yaml"};
	/* Set up everything else: an explicit path must not fall back to any of it. */
	setenv("KUBECONFIG", FIX "/basic.yaml", 1);
	ck_assert_ptr_null(ck_config_load(&o, &err));
	ck_assert_str_eq(err, "kubeconfig " FIX "/nope.yaml: No such file or directory");
	free(err);
	err = NULL;

	o.kubeconfig = FIX "/basic.yaml";
	o.context = "missing";
	ck_assert_ptr_null(ck_config_load(&o, &err));
	ck_assert_str_eq(err, "kubeconfig " FIX "/basic.yaml: context \"missing\" not found");
	free(err);
	err = NULL;

	/* The other context names a user that does not exist. */
	o.context = "other";
	ck_assert_ptr_null(ck_config_load(&o, &err));
	ck_assert_str_eq(err, "kubeconfig " FIX
	                      "/basic.yaml: context \"other\": user \"nobody\" not found");
	free(err);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Source order and merging                                                                 */

START_TEST(test_kubeconfig_env_merge)
{
	char *err = NULL;
	/* A missing file in the list is skipped; duplicates are read once. */
	setenv("KUBECONFIG",
	       FIX "/merge-a.yaml:" FIX "/missing.yaml::" FIX "/merge-b/config:" FIX
	           "/merge-a.yaml",
	       1);
	ck_config_load_opts_t o = {0};
	ck_config_t *c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	struct ck_config_view v;
	ck_config_view(c, &v);
	ck_assert_str_eq(v.source, "kubeconfig " FIX "/merge-a.yaml:" FIX "/merge-b/config");
	ck_assert_str_eq(v.context, "ctx-a"); /* the first current-context wins */
	ck_assert_str_eq(v.server, "https://a.test:6443");
	ck_config_free(c);

	/* A context only the second file has; its CA resolves against merge-b/. */
	o.context = "ctx-b";
	c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_config_view(c, &v);
	ck_assert_str_eq(v.server, "https://only-b.test:6443");
	ASSERT_HAS(v.ca_pem, "ZmFrZSBDQSBCCg==");
	ck_cred_t cr;
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "token-b");
	ck_cred_clear(&cr);
	ck_config_free(c);

	/* Whole entries: ctx-both is a's (namespace from-a, cluster shared). */
	o.context = "ctx-both";
	c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_config_view(c, &v);
	ck_assert_str_eq(v.namespace, "from-a");
	ck_assert_str_eq(v.server, "https://a.test:6443");
	ck_config_free(c);

	/* b's context points at entries that a defined first: a's cluster and user win. */
	o.context = "ctx-mixed";
	c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_config_view(c, &v);
	ck_assert_str_eq(v.server, "https://a.test:6443");
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "token-a");
	ck_cred_clear(&cr);
	ck_config_free(c);

	/* Order matters: b first. */
	setenv("KUBECONFIG", FIX "/merge-b/config:" FIX "/merge-a.yaml", 1);
	o.context = NULL;
	c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_config_view(c, &v);
	ck_assert_str_eq(v.context, "ctx-b");
	ck_config_free(c);

	/* A malformed file in the list is an error naming it. */
	setenv("KUBECONFIG", FIX "/merge-a.yaml:" FIX "/malformed.yaml", 1);
	ck_assert_ptr_null(ck_config_load(&o, &err));
	ASSERT_HAS(err, "kubeconfig " FIX "/malformed.yaml: line 7");
	free(err);
}
END_TEST

START_TEST(test_home_config_and_master)
{
	char *err = NULL;
	ck_config_load_opts_t o = {0};
	/* Nothing anywhere: an error that says where it looked. */
	ck_assert_ptr_null(ck_config_load(&o, &err));
	ASSERT_HAS(err, "no configuration");
	ASSERT_HAS(err, tmpdir);
	free(err);
	err = NULL;

	/* --master alone: a server, no credentials (client-go's BuildConfigFromFlags). */
	o.master = "http://127.0.0.1:8080/";
	ck_config_t *c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	struct ck_config_view v;
	ck_config_view(c, &v);
	ck_assert_str_eq(v.server, "http://127.0.0.1:8080");
	ck_assert_str_eq(v.source, "--master");
	ck_cred_t cr;
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_ptr_null(cr.token);
	ck_assert_ptr_null(cr.cert_pem);
	ck_cred_clear(&cr);
	ck_config_free(c);

	/* ~/.kube/config, with the --master override of its server. */
	char *kdir = ck_xasprintf("%s/.kube", tmpdir);
	mkdir(kdir, 0700);
	char *text = NULL;
	ck_assert_int_eq(ck_file_read_all(FIX "/merge-a.yaml", &text, NULL, NULL), 0);
	write_file(kdir, "config", text);
	free(text);
	o.master = "https://override.test:6443";
	c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_config_view(c, &v);
	ck_assert_str_eq(v.server, "https://override.test:6443");
	ck_assert_str_eq(v.context, "ctx-a");
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "token-a");
	ck_cred_clear(&cr);
	ck_config_free(c);

	/* A bad --master is reported as such. */
	o.master = "ftp://x";
	ck_assert_ptr_null(ck_config_load(&o, &err));
	ASSERT_HAS(err, "--master: server \"ftp://x\"");
	free(err);
	err = NULL;

	/* $KUBECONFIG set: ~/.kube/config is never read, as in client-go. */
	setenv("KUBECONFIG", FIX "/none-1.yaml:" FIX "/none-2.yaml", 1);
	o.master = NULL;
	ck_assert_ptr_null(ck_config_load(&o, &err));
	ASSERT_HAS(err, "no existing file in $KUBECONFIG");
	free(err);
	free(kdir);
}
END_TEST

static void make_sa_dir(const char *token)
{
	write_file(tmpdir, "token", token);
	write_file(tmpdir, "ca.crt",
	           "-----BEGIN CERTIFICATE-----\nSA\n-----END CERTIFICATE-----\n");
	write_file(tmpdir, "namespace", "kube-system\n");
}

START_TEST(test_in_cluster)
{
	ck_clk_fake_t fc;
	ck_clk_fake_init(&fc, 5, 0);
	make_sa_dir("sa-token-1\n");
	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	setenv("CKUBE_SERVICEACCOUNT_DIR", tmpdir, 1);
	char *err = NULL;
	ck_config_load_opts_t o = {.clock = &fc.base};
	ck_config_t *c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	struct ck_config_view v;
	ck_config_view(c, &v);
	ck_assert_str_eq(v.server, "https://[fd00::1]:443");
	ck_assert_str_eq(v.source, "in-cluster");
	ck_assert_str_eq(v.context, "");
	ck_assert_str_eq(v.namespace, "kube-system");
	ASSERT_HAS(v.ca_pem, "SA");
	ck_cred_t cr;
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "sa-token-1");
	unsigned g1 = cr.generation;
	ck_assert_uint_ne(g1, 0);
	ck_cred_clear(&cr);

	write_file(tmpdir, "token", "sa-token-2");
	ck_clk_fake_advance(&fc, 30 * CK_NS_PER_SEC);
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "sa-token-1");
	ck_cred_clear(&cr);
	ck_clk_fake_advance(&fc, 30 * CK_NS_PER_SEC);
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "sa-token-2");
	ck_assert_uint_ne(cr.generation, g1);
	ck_cred_clear(&cr);
	ck_config_free(c);

	/* IPv4, an explicit folder and --master; POD_NAMESPACE wins over the file. */
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	unsetenv("CKUBE_SERVICEACCOUNT_DIR");
	setenv("POD_NAMESPACE", "from-env", 1);
	o.sa_dir = tmpdir;
	c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_config_view(c, &v);
	ck_assert_str_eq(v.server, "https://10.96.0.1:443");
	ck_assert_str_eq(v.namespace, "from-env");
	ck_config_free(c);
	o.master = "https://elsewhere:6443";
	c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_config_view(c, &v);
	ck_assert_str_eq(v.server, "https://elsewhere:6443");
	ck_config_free(c);
	o.master = NULL;

	/* In-cluster comes before ~/.kube/config, and when $KUBECONFIG names no file. */
	setenv("KUBECONFIG", FIX "/none.yaml", 1);
	c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_config_view(c, &v);
	ck_assert_str_eq(v.source, "in-cluster");
	ck_config_free(c);
	unsetenv("KUBECONFIG");

	/* A missing CA is an error naming the file. */
	char *ca = ck_xasprintf("%s/ca.crt", tmpdir);
	unlink(ca);
	ck_assert_ptr_null(ck_config_load(&o, &err));
	ASSERT_HAS(err, "in-cluster: ");
	ASSERT_HAS(err, ca);
	free(err);
	err = NULL;
	free(ca);

	/* No token file: in-cluster is not possible, and nothing else is configured. */
	char *tok = ck_xasprintf("%s/token", tmpdir);
	unlink(tok);
	free(tok);
	ck_assert_ptr_null(ck_config_load(&o, &err));
	ASSERT_HAS(err, "no configuration");
	free(err);
}
END_TEST

START_TEST(test_in_cluster_token_kept_on_failure)
{
	ck_clk_fake_t fc;
	ck_clk_fake_init(&fc, 0, 0);
	make_sa_dir("keep-me");
	setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
	char *err = NULL;
	ck_config_load_opts_t o = {.clock = &fc.base, .sa_dir = tmpdir};
	ck_config_t *c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	char *tok = ck_xasprintf("%s/token", tmpdir);
	unlink(tok);
	ck_clk_fake_advance(&fc, 120 * CK_NS_PER_SEC);
	ck_cred_t cr;
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "keep-me");
	ck_cred_clear(&cr);
	/* Recovers as soon as the file is back (retried on each call while failing). */
	write_file(tmpdir, "token", "back");
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "back");
	ck_cred_clear(&cr);
	free(tok);
	ck_config_free(c);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Exec plugins                                                                             */

static int plugin_runs(void)
{
	char *s = read_file(tmpdir, "count");
	int n = s ? atoi(s) : 0;
	free(s);
	return n;
}

/* A kubeconfig whose user runs the test plugin in the given mode. */
static ck_config_t *exec_config(const char *command, const char *mode, const char *api,
                                const char *expiry, const ck_config_load_opts_t *o, char **err)
{
	char *text = ck_xasprintf("current-context: c\n"
	                          "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
	                          "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
	                          "users:\n"
	                          "- name: u\n"
	                          "  user:\n"
	                          "    exec:\n"
	                          "      apiVersion: %s\n"
	                          "      command: %s\n"
	                          "      installHint: 'try: apt install the-plugin'\n"
	                          "      interactiveMode: Never\n"
	                          "      env:\n"
	                          "      - {name: PLUGIN_MODE, value: '%s'}\n"
	                          "      - {name: PLUGIN_API, value: '%s'}\n"
	                          "      - {name: PLUGIN_EXPIRY, value: '%s'}\n",
	                          api, command, mode, api, expiry ? expiry : "");
	ck_config_t *c = load_text(text, o, err);
	free(text);
	return c;
}

START_TEST(test_exec_token_cluster_info_and_env)
{
	char *err = NULL;
	ck_config_load_opts_t o = {.kubeconfig = FIX "/exec.yaml"};
	ck_config_t *c = ck_config_load(&o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(plugin_runs(), 0); /* not run at load */
	ck_cred_t cr;
	ck_assert_msg(ck_config_credentials(c, false, &cr, &err) == 0, "%s", err);
	ck_assert_str_eq(cr.token, "tok-1");
	ck_assert_uint_ne(cr.generation, 0);
	ck_cred_clear(&cr);
	/* The plugin's env went to the child only. */
	ck_assert_ptr_null(getenv("PLUGIN_MODE"));

	/* Arguments went as an argv array, no shell splitting. */
	char *args = read_file(tmpdir, "args");
	ck_assert_str_eq(args, "--flag\nvalue with spaces\n");
	free(args);
	char *in = read_file(tmpdir, "stdin");
	ck_assert_str_eq(in, "");
	free(in);

	char *info = read_file(tmpdir, "info");
	char *ca = read_file(FIX, "ca.pem");
	ck_sbuf_t want = CK_SBUF_INIT;
	ck_sbuf_puts(&want,
	             "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
	             "\"ExecCredential\",\"spec\":{\"interactive\":false,\"cluster\":{"
	             "\"server\":\"https://exec.test:6443\",\"tls-server-name\":\"api.exec.test\","
	             "\"certificate-authority-data\":\"");
	/* base64 of ca.pem, computed independently by the fixture tool */
	ck_sbuf_puts(&want,
	             "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tClptRnJaU0JqYkhWemRHVnlJRU5CCi0tLS0tRU5E"
	             "IENFUlRJRklDQVRFLS0tLS0K");
	ck_sbuf_puts(&want, "\",\"config\":{\"audience\":\"my-cluster\",\"retries\":3,\"nested\":{"
	                    "\"enabled\":true,\"list\":[\"a\",\"b\"]}}}}}");
	ck_assert_str_eq(info, ck_sbuf_cstr(&want));
	ck_sbuf_free(&want);
	free(ca);
	free(info);
	ck_config_free(c);
}
END_TEST

START_TEST(test_exec_cache_expiry_and_refresh)
{
	ck_clk_fake_t fc;
	/* 2029-12-31T23:00:00Z; the credential expires an hour later. */
	ck_clk_fake_init(&fc, 0, WALL_START * (int64_t)CK_NS_PER_SEC);
	char *err = NULL;
	ck_config_load_opts_t o = {.clock = &fc.base};
	ck_config_t *c =
	    exec_config("../exec-plugin.sh", "token", "client.authentication.k8s.io/v1",
	                "2030-01-01T00:00:00Z", &o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_cred_t cr;
	ck_assert_msg(ck_config_credentials(c, false, &cr, &err) == 0, "%s", err);
	ck_assert_str_eq(cr.token, "tok-1");
	unsigned g1 = cr.generation;
	ck_cred_clear(&cr);

	/* Cached until the expiry. */
	ck_clk_fake_advance(&fc, 3599 * CK_NS_PER_SEC);
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "tok-1");
	ck_assert_uint_eq(cr.generation, g1);
	ck_assert_int_eq(plugin_runs(), 1);
	ck_cred_clear(&cr);

	/* Expired: the plugin runs again. */
	ck_clk_fake_advance(&fc, 1 * CK_NS_PER_SEC);
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "tok-2");
	unsigned g2 = cr.generation;
	ck_assert_uint_ne(g2, g1);
	ck_assert_int_eq(plugin_runs(), 2);
	ck_cred_clear(&cr);

	/* A 401: forced refresh. */
	ck_assert_int_eq(ck_config_credentials(c, true, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "tok-3");
	ck_assert_uint_ne(cr.generation, g2);
	ck_cred_clear(&cr);
	ck_config_free(c);
}
END_TEST

START_TEST(test_exec_no_expiry_and_cert)
{
	char *err = NULL;
	/* The kubeconfig's env entry overrides our own variable of the same name, in the
	 * child only. */
	setenv("PLUGIN_MODE", "fail", 1);
	/* v1beta1, no expiry: cached for good, until a 401. */
	ck_config_t *c = exec_config("../exec-plugin.sh", "cert",
	                             "client.authentication.k8s.io/v1beta1", NULL, NULL, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_cred_t cr;
	ck_assert_msg(ck_config_credentials(c, false, &cr, &err) == 0, "%s", err);
	ck_assert_ptr_null(cr.token);
	ck_assert_str_eq(cr.cert_pem, "CERT-1\n");
	ck_assert_uint_eq(cr.cert_len, 7);
	ck_assert_str_eq(cr.key_pem, "KEY-1\n");
	ck_assert_uint_eq(cr.key_len, 6);
	ck_cred_clear(&cr);
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.cert_pem, "CERT-1\n");
	ck_assert_int_eq(plugin_runs(), 1);
	ck_assert_str_eq(getenv("PLUGIN_MODE"), "fail");
	ck_cred_clear(&cr);
	ck_config_free(c);
}
END_TEST

START_TEST(test_exec_failure_keeps_secrets_out)
{
	char *err = NULL;
	ck_config_t *c = exec_config("../exec-plugin.sh", "fail", "client.authentication.k8s.io/v1",
	                             NULL, NULL, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_cred_t cr;
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), -1);
	ck_assert_ptr_null(cr.token);
	ck_assert_str_eq(err,
	                 "kubeconfig " FIX "/inline.yaml: user \"u\": exec plugin \"" FIX
	                 "/../exec-plugin.sh\": failed with exit code 3: login failed: account "
	                 "locked; try: apt install the-plugin");
	free(err);
	err = NULL;
	ck_config_free(c);

	const char *modes[] = {"garbage", "badversion", "nostatus", "onlycert"};
	const char *wants[] = {"output is not valid JSON", "returned apiVersion", "no status",
	                       "only one of clientCertificateData"};
	for (size_t i = 0; i < CK_ARRAY_LEN(modes); i++) {
		c = exec_config("../exec-plugin.sh", modes[i], "client.authentication.k8s.io/v1",
		                NULL, NULL, &err);
		ck_assert_msg(c != NULL, "%s", err);
		ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), -1);
		ASSERT_HAS(err, wants[i]);
		ASSERT_LACKS(err, "SECRET");
		free(err);
		err = NULL;
		ck_config_free(c);
	}

	c = exec_config("../exec-plugin.sh", "token", "client.authentication.k8s.io/v1", "tomorrow",
	                NULL, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), -1);
	ASSERT_HAS(err, "status.expirationTimestamp \"tomorrow\" is not RFC 3339");
	free(err);
	ck_config_free(c);
}
END_TEST

/*
 * The plugin's output is read with the library's bounded JSON reader: 400,000
 * nested arrays (800 KB, under the output cap) crashed the daemon when yajl_tree
 * freed them, one stack frame per level. Malformed and truncated output gives an
 * error that names the byte offset and never quotes the output.
 */
START_TEST(test_exec_deep_nesting_and_truncated_output)
{
	const char *modes[] = {"deep", "truncated", "notobject", "garbage"};
	const char *wants[] = {
	    "output is not valid JSON: JSON nested deeper than 256 levels at byte 256",
	    "output is not valid JSON: malformed JSON after byte 89: parse error: premature EOF",
	    "output is not a JSON object but an array",
	    "output is not valid JSON: malformed JSON after byte 0: lexical error"};
	for (size_t i = 0; i < CK_ARRAY_LEN(modes); i++) {
		char *err = NULL;
		ck_config_t *c = exec_config("../exec-plugin.sh", modes[i],
		                             "client.authentication.k8s.io/v1", NULL, NULL, &err);
		ck_assert_msg(c != NULL, "%s", err);
		ck_cred_t cr;
		ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), -1);
		ck_assert_ptr_null(cr.token);
		ASSERT_HAS(err, wants[i]);
		ASSERT_LACKS(err, "SECRET");
		ASSERT_LACKS(err, "near");
		free(err);
		ck_config_free(c);
	}
}
END_TEST

START_TEST(test_exec_missing_binary)
{
	char *err = NULL;
	ck_config_t *c = exec_config("csc-no-such-plugin-binary", "token",
	                             "client.authentication.k8s.io/v1", NULL, NULL, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_cred_t cr;
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), -1);
	ck_assert_str_eq(err,
	                 "kubeconfig " FIX "/inline.yaml: user \"u\": exec plugin "
	                 "\"csc-no-such-plugin-binary\": executable not found: try: apt install "
	                 "the-plugin");
	free(err);
	ck_config_free(c);

	/* A path with a slash resolves against the kubeconfig's folder, not PATH. */
	err = NULL;
	c = exec_config("./missing-plugin.sh", "token", "client.authentication.k8s.io/v1", NULL,
	                NULL, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), -1);
	ASSERT_HAS(err, "\"" FIX "/./missing-plugin.sh\": executable not found");
	free(err);
	ck_config_free(c);
}
END_TEST

START_TEST(test_exec_timeout_and_size_limit)
{
	char *err = NULL;
	ck_config_load_opts_t o = {.exec_timeout_ms = 300};
	ck_config_t *c = exec_config("../exec-plugin.sh", "sleep",
	                             "client.authentication.k8s.io/v1", NULL, &o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_cred_t cr;
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), -1);
	ASSERT_HAS(err, "timed out after 300 ms and was killed");
	free(err);
	err = NULL;
	ck_config_free(c);

	c = exec_config("../exec-plugin.sh", "big", "client.authentication.k8s.io/v1", NULL, NULL,
	                &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), -1);
	ASSERT_HAS(err, "output larger than");
	ASSERT_LACKS(err, "xxxx");
	free(err);
	ck_config_free(c);
}
END_TEST

START_TEST(test_exec_refresh_failure_then_recovery)
{
	/* A failed refresh is an error; the next call after the backoff tries again. */
	ck_clk_fake_t fc;
	ck_clk_fake_init(&fc, 0, WALL_START * (int64_t)CK_NS_PER_SEC);
	char *err = NULL;
	ck_config_load_opts_t o = {.clock = &fc.base};
	ck_config_t *c =
	    exec_config("../exec-plugin.sh", "token", "client.authentication.k8s.io/v1",
	                "2029-12-31T23:00:10Z", &o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_cred_t cr;
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "tok-1");
	ck_cred_clear(&cr);
	/* Make the next run fail: the count file becomes a folder the plugin cannot write. */
	char *count = ck_xasprintf("%s/count", tmpdir);
	unlink(count);
	mkdir(count, 0700);
	ck_clk_fake_advance(&fc, 11 * CK_NS_PER_SEC);
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), -1);
	ASSERT_HAS(err, "failed with exit code");
	free(err);
	err = NULL;
	rmdir(count);
	ck_clk_fake_advance(&fc, 1 * CK_NS_PER_SEC);
	ck_assert_msg(ck_config_credentials(c, false, &cr, &err) == 0, "%s", err);
	ck_assert_str_eq(cr.token, "tok-1"); /* the count restarted */
	ck_cred_clear(&cr);
	free(count);
	ck_config_free(c);
}
END_TEST

/*
 * peek never runs the plugin: it says when a run is needed, and after a failed run
 * it answers with that run's error for 1 s, 2 s, 4 s ... 30 s (doubling per
 * failure), instead of asking for a run per request. A good run resets the backoff.
 */
START_TEST(test_exec_peek_and_backoff)
{
	ck_clk_fake_t fc;
	ck_clk_fake_init(&fc, 0, WALL_START * (int64_t)CK_NS_PER_SEC);
	char *err = NULL;
	ck_config_load_opts_t o = {.clock = &fc.base};
	ck_config_t *c = exec_config("../exec-plugin.sh", "fail", "client.authentication.k8s.io/v1",
	                             NULL, &o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_cred_t cr;
	ck_assert_int_eq(ck_config_credentials_peek(c, CK_CRED_CURRENT, &cr, &err),
	                 CK_CONFIG_NEED_EXEC);
	ck_assert_ptr_null(err);
	ck_assert_ptr_null(cr.token);
	ck_assert_int_eq(plugin_runs(), 0);

	ck_assert_int_eq(ck_config_exec_run(c, &err), -1);
	ck_assert_int_eq(plugin_runs(), 1);
	ASSERT_HAS(err, "failed with exit code 3: login failed: account locked; try: apt install");
	char *first = err;
	err = NULL;
	/* In the backoff: the same error, for every kind of ask, and no run. */
	const ck_cred_want_t wants[] = {CK_CRED_CURRENT, CK_CRED_REFRESH, CK_CRED_LAST};
	for (size_t i = 0; i < CK_ARRAY_LEN(wants); i++) {
		ck_assert_int_eq(ck_config_credentials_peek(c, wants[i], &cr, &err), -1);
		ck_assert_str_eq(err, first);
		free(err);
		err = NULL;
	}
	ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), -1);
	ck_assert_str_eq(err, first);
	free(err);
	err = NULL;
	ck_assert_int_eq(plugin_runs(), 1);

	/* 1 s, then 2 s, 4 s, ... up to 30 s between runs. */
	const int steps[] = {1, 2, 4, 8, 16, 30, 30};
	for (size_t i = 0; i < CK_ARRAY_LEN(steps); i++) {
		ck_clk_fake_advance(&fc, (uint64_t)(steps[i] - 1) * CK_NS_PER_SEC);
		ck_assert_int_eq(ck_config_credentials_peek(c, CK_CRED_CURRENT, &cr, &err), -1);
		free(err);
		err = NULL;
		ck_clk_fake_advance(&fc, 1 * CK_NS_PER_SEC);
		ck_assert_int_eq(ck_config_credentials_peek(c, CK_CRED_CURRENT, &cr, &err),
		                 CK_CONFIG_NEED_EXEC);
		ck_assert_int_eq(ck_config_credentials(c, false, &cr, &err), -1);
		free(err);
		err = NULL;
		ck_assert_int_eq(plugin_runs(), (int)i + 2);
	}
	free(first);
	ck_config_free(c);

	/* A good run: the credential is then served from the cache. */
	ck_clk_fake_init(&fc, 0, WALL_START * (int64_t)CK_NS_PER_SEC);
	c = exec_config("../exec-plugin.sh", "token", "client.authentication.k8s.io/v1",
	                "2029-12-31T23:00:10Z", &o, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(ck_config_exec_run(c, &err), 0);
	ck_assert_int_eq(ck_config_credentials_peek(c, CK_CRED_CURRENT, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "tok-9");
	ck_cred_clear(&cr);
	ck_assert_int_eq(ck_config_credentials_peek(c, CK_CRED_REFRESH, &cr, &err),
	                 CK_CONFIG_NEED_EXEC);
	/* Expired: CURRENT wants a run, LAST still answers with what the run gave. */
	ck_clk_fake_advance(&fc, 10 * CK_NS_PER_SEC);
	ck_assert_int_eq(ck_config_credentials_peek(c, CK_CRED_CURRENT, &cr, &err),
	                 CK_CONFIG_NEED_EXEC);
	ck_assert_int_eq(ck_config_credentials_peek(c, CK_CRED_LAST, &cr, &err), 0);
	ck_assert_str_eq(cr.token, "tok-9");
	ck_cred_clear(&cr);
	ck_assert_int_eq(plugin_runs(), 9);

	/* After a cancel every run fails at once, without starting the plugin. */
	ck_config_exec_cancel(c);
	ck_assert_int_eq(ck_config_exec_run(c, &err), -1);
	ASSERT_HAS(err, "cancelled");
	free(err);
	ck_assert_int_eq(plugin_runs(), 9);
	ck_config_free(c);
}
END_TEST

/* A cancel stops a run in progress: the plugin is killed, not waited for. */
typedef struct cancel_run {
	ck_config_t *c;
	int rc;
	char *err;
} cancel_run_t;

static void *cancel_run_main(void *arg)
{
	cancel_run_t *r = arg;
	r->rc = ck_config_exec_run(r->c, &r->err);
	return NULL;
}

START_TEST(test_exec_cancel_kills_the_run)
{
	char *err = NULL;
	ck_config_t *c = exec_config("../exec-plugin.sh", "sleep",
	                             "client.authentication.k8s.io/v1", NULL, NULL, &err);
	ck_assert_msg(c != NULL, "%s", err);
	cancel_run_t r = {.c = c};
	pthread_t th;
	pthread_create(&th, NULL, cancel_run_main, &r);
	/* Until the plugin has started (it counts its run first). */
	for (int i = 0; i < 1000 && plugin_runs() == 0; i++)
		usleep(5000);
	ck_assert_int_eq(plugin_runs(), 1);
	uint64_t t0 = ck_clk_mono_ns(ck_clk_real());
	ck_config_exec_cancel(c);
	pthread_join(th, NULL);
	/* The plugin sleeps 30 s; well under that means it was killed (no speed asserted). */
	ck_assert(ck_clk_mono_ns(ck_clk_real()) - t0 < 20 * CK_NS_PER_SEC);
	ck_assert_int_eq(r.rc, -1);
	ASSERT_HAS(r.err, "cancelled");
	free(r.err);
	ck_config_free(c);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Regressions found by tests/fuzz/fuzz_kubeconfig.c                                        */

/* -data fields may decode to bytes with NULs: the credentials copy cert_len/key_len
 * bytes (they used to be copied as strings, cut at the NUL, while cert_len/key_len
 * kept the full length: ck_cred_clear() then wiped past the end of the copy). */
START_TEST(test_fuzz_cert_data_with_nul_bytes)
{
	static const char text[] = "current-context: c\n"
	                           "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
	                           "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
	                           "users:\n"
	                           "- name: u\n"
	                           "  user:\n"
	                           "    client-certificate-data: Y2VydAB0YWls\n" /* cert\0tail */
	                           "    client-key-data: a2V5AHRhaWw=\n";        /* key\0tail */
	char *err = NULL;
	ck_config_t *c = load_text(text, NULL, &err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_cred_t cr;
	ck_assert_msg(ck_config_credentials(c, false, &cr, &err) == 0, "%s", err);
	ck_assert_uint_eq(cr.cert_len, 9);
	ck_assert(memcmp(cr.cert_pem, "cert\0tail", 10) == 0);
	ck_assert_uint_eq(cr.key_len, 8);
	ck_assert(memcmp(cr.key_pem, "key\0tail", 9) == 0);
	ck_cred_clear(&cr);
	ck_assert_int_eq(ck_config_credentials_peek(c, CK_CRED_CURRENT, &cr, &err), 0);
	ck_assert_uint_eq(cr.key_len, 8);
	ck_assert(memcmp(cr.key_pem, "key\0tail", 9) == 0);
	ck_cred_clear(&cr);
	ck_config_free(c);
}
END_TEST

/* Aliases in the exec extension: nine levels of nine aliases would expand to
 * gigabytes of KUBERNETES_EXEC_INFO (this used to run until memory ran out); now
 * a bounded error, while a few aliases are still fine. */
static char *alias_config(int levels)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(
	    &b, "x:\n  l0: &l0 [aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbb]\n");
	for (int i = 1; i <= levels; i++) {
		ck_sbuf_printf(&b, "  l%d: &l%d [", i, i);
		for (int j = 0; j < 9; j++)
			ck_sbuf_printf(&b, "%s*l%d", j ? ", " : "", i - 1);
		ck_sbuf_puts(&b, "]\n");
	}
	ck_sbuf_printf(&b,
	               "current-context: c\n"
	               "clusters:\n"
	               "- name: c\n"
	               "  cluster:\n"
	               "    server: https://h:1\n"
	               "    extensions:\n"
	               "    - name: client.authentication.k8s.io/exec\n"
	               "      extension: {bomb: *l%d}\n"
	               "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
	               "users:\n"
	               "- name: u\n"
	               "  user:\n"
	               "    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x,\n"
	               "           provideClusterInfo: true}\n",
	               levels);
	return ck_sbuf_steal(&b);
}

START_TEST(test_fuzz_exec_extension_alias_bomb)
{
	char *text = alias_config(9);
	char *e = load_err(text);
	ck_assert_str_eq(e, "kubeconfig " FIX "/inline.yaml: cluster \"c\": extensions: "
	                    "client.authentication.k8s.io/exec: larger than 65536 bytes as JSON");
	free(e);
	free(text);

	/* 9 * 9 copies of l0 (about 5 KiB): under the limit. */
	char *err = NULL;
	text = alias_config(2);
	ck_config_t *c = load_text(text, NULL, &err);
	ck_assert_msg(c != NULL, "%s", err);
	struct ck_config_view v;
	ck_config_view(c, &v);
	ck_assert(v.has_exec);
	ck_config_free(c);
	free(text);
}
END_TEST

Suite *suite_config(void)
{
	Suite *s = suite_create("config");
	TCase *t = tcase_create("kubeconfig");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_basic_token_and_ca_file);
	tcase_add_test(t, test_client_cert_files_and_insecure);
	tcase_add_test(t, test_data_fields_win_and_decode);
	tcase_add_test(t, test_token_wins_over_token_file_and_basic_auth);
	tcase_add_test(t, test_token_file_reread_with_fake_clock);
	tcase_add_test(t, test_error_messages);
	tcase_add_test(t, test_exec_config_errors);
	tcase_add_test(t, test_malformed_yaml_position);
	tcase_add_test(t, test_named_files_bounded_and_regular);
	tcase_add_test(t, test_server_userinfo_refused);
	tcase_add_test(t, test_explicit_path_missing_and_context_override);
	tcase_add_test(t, test_kubeconfig_env_merge);
	tcase_add_test(t, test_home_config_and_master);
	tcase_add_test(t, test_fuzz_cert_data_with_nul_bytes);
	tcase_add_test(t, test_fuzz_exec_extension_alias_bomb);
	suite_add_tcase(s, t);

	t = tcase_create("in-cluster");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_in_cluster);
	tcase_add_test(t, test_in_cluster_token_kept_on_failure);
	suite_add_tcase(s, t);

	t = tcase_create("exec");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_exec_token_cluster_info_and_env);
	tcase_add_test(t, test_exec_cache_expiry_and_refresh);
	tcase_add_test(t, test_exec_no_expiry_and_cert);
	tcase_add_test(t, test_exec_failure_keeps_secrets_out);
	tcase_add_test(t, test_exec_missing_binary);
	tcase_add_test(t, test_exec_deep_nesting_and_truncated_output);
	tcase_add_test(t, test_exec_timeout_and_size_limit);
	tcase_add_test(t, test_exec_refresh_failure_then_recovery);
	tcase_add_test(t, test_exec_peek_and_backoff);
	tcase_add_test(t, test_exec_cancel_kills_the_run);
	suite_add_tcase(s, t);
	return s;
}
