/*
 * libFuzzer target for command-line parsing (ck_flag_parse, ck_flag_parse_duration):
 * the input, split at NUL bytes, is argv[1..] for a set holding one flag of every
 * kind. A command line comes from a person or a manifest's args:, and a typo must
 * give one clear line, never a crash or a value outside the flag's range.
 *
 * Invariants: OK leaves every integer inside [min, max] and first_arg in
 * [1, argc]; ERROR always comes with a non-empty one-line message; HELP writes the
 * usage (to a memory stream). Each argument is also parsed as a duration alone.
 */
#include <ckube/base.h>
#include <ckube/flag.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size + 1);
	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';
	char *argv[MAX_ARGS + 2];
	int argc = 0;
	argv[argc++] = "fuzz";
	for (char *p = copy; argc <= MAX_ARGS && p <= copy + size; p += strlen(p) + 1)
		argv[argc++] = p;
	argv[argc] = NULL;

	const char *s = "default";
	bool b = false;
	int64_t i = 2, d = 30000;
	double f = 5.0;
	ck_flagset_t *fs = ck_flagset_new("fuzz");
	ck_flag_string(fs, "kubeconfig", &s, "a path");
	ck_flag_bool(fs, "leader-elect", &b, "a bool");
	ck_flag_int(fs, "workers", &i, 1, 64, "an int in range");
	ck_flag_double(fs, "kube-api-qps", &f, "a double");
	ck_flag_duration(fs, "resync", &d, "a duration");

	char *mem = NULL;
	size_t memlen = 0;
	FILE *help = open_memstream(&mem, &memlen);
	int first = -1;
	char *err = NULL;
	ck_flag_result_t r = ck_flag_parse(fs, argc, argv, help, &first, &err);
	if (help != NULL)
		fclose(help);
	switch (r) {
	case CK_FLAG_OK:
		if (i < 1 || i > 64 || first < 1 || first > argc || err != NULL)
			__builtin_trap();
		break;
	case CK_FLAG_ERROR:
		if (err == NULL || err[0] == '\0' || strchr(err, '\n') != NULL)
			__builtin_trap();
		break;
	case CK_FLAG_HELP:
		if (help != NULL && memlen == 0)
			__builtin_trap();
		break;
	default:
		__builtin_trap();
	}
	for (int k = 1; k < argc; k++) {
		int64_t ms = 0;
		(void)ck_flag_parse_duration(argv[k], &ms);
	}
	free(err);
	free(mem);
	ck_flagset_free(fs);
	free(copy);
	return 0;
}
