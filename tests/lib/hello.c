/*
 * A program of a libckube user, built only from the installed headers and
 * pkg-config (tests/lib/run.sh). It defines generic names that the library uses
 * internally (fatal, xmalloc, chash_find, rand_u64): with the library's symbol
 * hygiene they must not clash, linked dynamically or statically.
 */
#include <ckube/ckube.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fatal(const char *msg);
void *xmalloc(size_t n);
int chash_find(int x);
unsigned long rand_u64(void);

void fatal(const char *msg)
{
	fprintf(stderr, "hello: %s\n", msg);
	exit(3);
}

void *xmalloc(size_t n)
{
	return calloc(1, n);
}

int chash_find(int x)
{
	return x + 1;
}

unsigned long rand_u64(void)
{
	return 4;
}

int main(void)
{
	if (ck_version_number() != CKUBE_VERSION_NUM ||
	    strcmp(ck_version(), CKUBE_VERSION_STRING) != 0)
		fatal("library and headers disagree on the version");
	/* Something real from the library: parse a kubeconfig from text. */
	static const char kc[] =
	    "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "
	    "\"https://127.0.0.1:6443\"}\nusers:\n- name: u\n  user: {token: t}\n"
	    "contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n";
	char *err = NULL;
	ck_config_t *cfg = ck_config_load_text(kc, sizeof(kc) - 1, "inline", NULL, &err);
	if (cfg == NULL)
		fatal(err);
	struct ck_config_view v;
	ck_config_view(cfg, &v);
	printf("libckube %s server %s %d %lu\n", ck_version(), v.server, chash_find(1), rand_u64());
	ck_config_free(cfg);
	free(xmalloc(8));
	return 0;
}
