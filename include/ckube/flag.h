/*
 * flag: command-line flags the way Go's flag package reads them, so a controller
 * written on pkg/ takes the same command lines as its Go original:
 *   -name value, --name value, -name=value, --name=value; bool flags as -name,
 *   -name=true|false (never a separate value); "--" ends flags; durations as Go
 *   writes them ("30s", "1m30s", "500ms", "2h").
 *
 * Flags are registered against caller-owned variables, then ck_flag_parse() fills
 * them. Errors are one line naming the flag and the bad value.
 */
#ifndef CKUBE_FLAG_H
#define CKUBE_FLAG_H

#include <ckube/export.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ck_flagset ck_flagset_t;

/* Borrows prog, the program name of usage and messages (must outlive the set). Returns
 * a new set, free with ck_flagset_free(). */
CKUBE_API ck_flagset_t *ck_flagset_new(const char *prog);
CKUBE_API void ck_flagset_free(ck_flagset_t *fs);

/* Each borrows name/usage (static strings) and the target, which must outlive the set.
 * The target's current value is the default shown in usage. String targets hold a
 * borrowed pointer into argv or the default. */
CKUBE_API void ck_flag_string(ck_flagset_t *fs, const char *name, const char **target,
                              const char *usage);
CKUBE_API void ck_flag_bool(ck_flagset_t *fs, const char *name, bool *target, const char *usage);
CKUBE_API void ck_flag_int(ck_flagset_t *fs, const char *name, int64_t *target, int64_t min,
                           int64_t max, const char *usage);
CKUBE_API void ck_flag_double(ck_flagset_t *fs, const char *name, double *target,
                              const char *usage);
/* Durations in milliseconds. */
CKUBE_API void ck_flag_duration(ck_flagset_t *fs, const char *name, int64_t *target_ms,
                                const char *usage);

typedef enum ck_flag_result {
	CK_FLAG_OK = 0,
	CK_FLAG_HELP = 1,  /* -h / -help / --help given: usage printed to out */
	CK_FLAG_ERROR = 2, /* *err set */
} ck_flag_result_t;

/*
 * Parses argv[1..]. Positional arguments (after the flags or "--") are left in place:
 * *first_arg is set to the index of the first one (argc when there is none). Usage
 * goes to help_out on -h/--help. Returns CK_FLAG_OK, CK_FLAG_HELP, or CK_FLAG_ERROR
 * with a new message in *err (free with free()).
 */
CKUBE_API ck_flag_result_t ck_flag_parse(ck_flagset_t *fs, int argc, char **argv, FILE *help_out,
                                         int *first_arg, char **err);

/* Writes the usage text (flags sorted by name, with defaults) to out. */
CKUBE_API void ck_flag_usage(ck_flagset_t *fs, FILE *out);

/* Parses a Go duration string into milliseconds. Returns 0 or -1. */
CKUBE_API int ck_flag_parse_duration(const char *s, int64_t *ms);

#endif
