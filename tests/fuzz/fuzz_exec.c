/*
 * libFuzzer target for the exec credential plugin's output reader
 * (ck_config_i_exec_parse): whatever a plugin prints on stdout becomes the
 * credential of every request, so a broken or hostile plugin must give a clear
 * error, never a crash, a leak, or a message that quotes its output (the output
 * may hold a secret).
 *
 * The input is parsed twice into one config (a second run of the same plugin), so
 * the "same credential, same generation" path runs too. Invariants: 0 with no
 * message, or -1 with a message that names the plugin's command and is short (the
 * reader quotes at most a bounded apiVersion, kind or timestamp, never the body, a
 * token or a key). LSan checks that a rejected credential is not leaked. The
 * input is handed over with its length, not NUL-terminated, as the runner does.
 */
#include "pkg/clientcmd/config_internal.h"
#include <ckube/base.h>
#include <ckube/config.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char kubeconfig[] =
    "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
    "clusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:6443\n"
    "contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n"
    "users:\n- name: u\n  user:\n    exec:\n"
    "      apiVersion: client.authentication.k8s.io/v1\n"
    "      command: fuzz-plugin\n      interactiveMode: Never\n";

static ck_config_t *cfg;

static void check(int rc, char *err)
{
	if (rc == 0 && err != NULL)
		__builtin_trap();
	if (rc != 0 && (err == NULL || strstr(err, "fuzz-plugin") == NULL || strlen(err) > 400))
		__builtin_trap();
	free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (cfg == NULL) {
		char *err = NULL;
		cfg = ck_config_load_text(kubeconfig, sizeof(kubeconfig) - 1, "/fuzz/kubeconfig",
		                          NULL, &err);
		if (cfg == NULL)
			__builtin_trap();
	}
	for (int round = 0; round < 2; round++) {
		char *err = NULL;
		int rc = ck_config_i_exec_parse(cfg, (const char *)data, size, &err);
		check(rc, err);
	}
	return 0;
}
