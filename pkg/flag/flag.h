/*
 * flag: command-line flags the way Go's flag package reads them, so a controller
 * written on pkg/ takes the same command lines as its Go original:
 *   -name value, --name value, -name=value, --name=value; bool flags as -name,
 *   -name=true|false (never a separate value); "--" ends flags; durations as Go
 *   writes them ("30s", "1m30s", "500ms", "2h").
 *
 * Flags are registered against caller-owned variables, then flag_parse() fills
 * them. Errors are one line naming the flag and the bad value.
 */
#ifndef CSC_FLAG_H
#define CSC_FLAG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct flagset flagset_t;

/* Borrows name (must outlive the set). Returns a new set, free with flagset_free(). */
flagset_t *flagset_new(const char *prog);
void flagset_free(flagset_t *fs);

/* Each borrows name/usage (static strings) and the target, which must outlive the set.
 * The target's current value is the default shown in usage. String targets hold a
 * borrowed pointer into argv or the default. */
void flag_string(flagset_t *fs, const char *name, const char **target, const char *usage);
void flag_bool(flagset_t *fs, const char *name, bool *target, const char *usage);
void flag_int(flagset_t *fs, const char *name, int64_t *target, int64_t min, int64_t max,
              const char *usage);
void flag_double(flagset_t *fs, const char *name, double *target, const char *usage);
/* Durations in milliseconds. */
void flag_duration(flagset_t *fs, const char *name, int64_t *target_ms, const char *usage);

typedef enum flag_result {
	FLAG_OK = 0,
	FLAG_HELP = 1,  /* -h / -help / --help given: usage printed to out */
	FLAG_ERROR = 2, /* *err set */
} flag_result_t;

/*
 * Parses argv[1..]. Positional arguments (after flags or "--") are counted in
 * *nargs and left at argv[*first_arg]. Returns FLAG_OK, FLAG_HELP, or FLAG_ERROR
 * with a new message in *err (free with free()).
 */
flag_result_t flag_parse(flagset_t *fs, int argc, char **argv, FILE *help_out, int *first_arg,
                         char **err);

/* Writes the usage text (flags sorted by name, with defaults) to out. */
void flag_usage(flagset_t *fs, FILE *out);

/* Parses a Go duration string into milliseconds. Returns 0 or -1. */
int flag_parse_duration(const char *s, int64_t *ms);

#endif
