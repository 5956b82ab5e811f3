/*
 * flag: Go-compatible command-line flags.
 */
#include <ckube/flag.h>

#include <ckube/base.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum { F_STRING, F_BOOL, F_INT, F_DOUBLE, F_DURATION } ftype_t;

typedef struct flag {
	const char *name;
	const char *usage;
	ftype_t type;
	void *target;
	int64_t min, max;
	char *def; /* default, formatted for usage */
} flag_t;

struct ck_flagset {
	const char *prog;
	flag_t *flags;
	size_t n, cap;
};

ck_flagset_t *ck_flagset_new(const char *prog)
{
	ck_flagset_t *fs = ck_xcalloc(1, sizeof(*fs));
	fs->prog = prog;
	return fs;
}

void ck_flagset_free(ck_flagset_t *fs)
{
	if (fs == NULL)
		return;
	for (size_t i = 0; i < fs->n; i++)
		free(fs->flags[i].def);
	free(fs->flags);
	free(fs);
}

static flag_t *add(ck_flagset_t *fs, const char *name, ftype_t t, void *target, const char *usage)
{
	for (size_t i = 0; i < fs->n; i++)
		if (strcmp(fs->flags[i].name, name) == 0)
			ck_fatal("flag redefined: %s", name);
	if (fs->n == fs->cap) {
		fs->cap = fs->cap ? fs->cap * 2 : 16;
		fs->flags = ck_xrealloc(fs->flags, fs->cap * sizeof(flag_t));
	}
	flag_t *f = &fs->flags[fs->n++];
	memset(f, 0, sizeof(*f));
	f->name = name;
	f->usage = usage;
	f->type = t;
	f->target = target;
	return f;
}

static char *format_duration(int64_t ms)
{
	if (ms == 0)
		return ck_xstrdup("0s");
	if (ms % 3600000 == 0)
		return ck_xasprintf("%lldh0m0s", (long long)(ms / 3600000));
	if (ms % 60000 == 0)
		return ck_xasprintf("%lldm0s", (long long)(ms / 60000));
	if (ms % 1000 == 0)
		return ck_xasprintf("%llds", (long long)(ms / 1000));
	return ck_xasprintf("%lldms", (long long)ms);
}

void ck_flag_string(ck_flagset_t *fs, const char *name, const char **target, const char *usage)
{
	flag_t *f = add(fs, name, F_STRING, target, usage);
	f->def = ck_xasprintf("\"%s\"", *target ? *target : "");
}

void ck_flag_bool(ck_flagset_t *fs, const char *name, bool *target, const char *usage)
{
	flag_t *f = add(fs, name, F_BOOL, target, usage);
	f->def = ck_xstrdup(*target ? "true" : "false");
}

void ck_flag_int(ck_flagset_t *fs, const char *name, int64_t *target, int64_t min, int64_t max,
                 const char *usage)
{
	flag_t *f = add(fs, name, F_INT, target, usage);
	f->min = min;
	f->max = max;
	f->def = ck_xasprintf("%lld", (long long)*target);
}

void ck_flag_double(ck_flagset_t *fs, const char *name, double *target, const char *usage)
{
	flag_t *f = add(fs, name, F_DOUBLE, target, usage);
	f->def = ck_xasprintf("%g", *target);
}

void ck_flag_duration(ck_flagset_t *fs, const char *name, int64_t *target_ms, const char *usage)
{
	flag_t *f = add(fs, name, F_DURATION, target_ms, usage);
	f->def = format_duration(*target_ms);
}

int ck_flag_parse_duration(const char *s, int64_t *ms)
{
	/* Go: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+, or "0". Units ns us µs ms s m h. */
	const char *p = s;
	bool neg = false;
	double total_ns = 0;
	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	if (strcmp(p, "0") == 0) {
		*ms = 0;
		return 0;
	}
	if (*p == '\0')
		return -1;
	while (*p) {
		char *end;
		if (!((*p >= '0' && *p <= '9') || *p == '.'))
			return -1;
		errno = 0;
		double v = strtod(p, &end);
		if (end == p || errno != 0)
			return -1;
		p = end;
		double unit;
		if (strncmp(p, "ns", 2) == 0)
			unit = 1, p += 2;
		else if (strncmp(p, "us", 2) == 0)
			unit = 1e3, p += 2;
		else if (strncmp(p, "\xc2\xb5s", 3) == 0)
			unit = 1e3, p += 3;
		else if (strncmp(p, "ms", 2) == 0)
			unit = 1e6, p += 2;
		else if (*p == 's')
			unit = 1e9, p += 1;
		else if (*p == 'm')
			unit = 60e9, p += 1;
		else if (*p == 'h')
			unit = 3600e9, p += 1;
		else
			return -1;
		total_ns += v * unit;
	}
	if (total_ns / 1e6 > 9.2e15)
		return -1;
	*ms = (int64_t)llround(total_ns / 1e6) * (neg ? -1 : 1);
	return 0;
}

/*
 * A user's text as a message quotes it: control bytes and DEL as \xNN, '"' and '\\'
 * escaped, at most 128 bytes, so that an error stays one line (an argument can
 * hold anything a shell or a manifest's args: passes, newlines included).
 */
static const char *quoted(const char *s, size_t n, char out[600])
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	for (size_t k = 0; k < n && k < 128; k++) {
		unsigned char c = (unsigned char)s[k];
		if (c < 0x20 || c == 0x7f) {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		} else {
			if (c == '"' || c == '\\')
				out[o++] = '\\';
			out[o++] = (char)c;
		}
	}
	if (n > 128) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return out;
}

static int set_value(flag_t *f, const char *val, char **err)
{
	char *end, qb[600];
	const char *q = quoted(val, strlen(val), qb);
	switch (f->type) {
	case F_STRING:
		*(const char **)f->target = val;
		return 0;
	case F_BOOL:
		if (!strcmp(val, "true") || !strcmp(val, "1") || !strcmp(val, "t") ||
		    !strcmp(val, "T") || !strcmp(val, "TRUE") || !strcmp(val, "True")) {
			*(bool *)f->target = true;
			return 0;
		}
		if (!strcmp(val, "false") || !strcmp(val, "0") || !strcmp(val, "f") ||
		    !strcmp(val, "F") || !strcmp(val, "FALSE") || !strcmp(val, "False")) {
			*(bool *)f->target = false;
			return 0;
		}
		return ck_err_set(err, "invalid boolean value \"%s\" for flag -%s", q, f->name);
	case F_INT: {
		errno = 0;
		long long v = strtoll(val, &end, 0);
		if (*val == '\0' || *end != '\0' || errno != 0)
			return ck_err_set(err, "invalid value \"%s\" for flag -%s: not an integer",
			                  q, f->name);
		if (v < f->min || v > f->max)
			return ck_err_set(
			    err, "invalid value \"%s\" for flag -%s: must be in %lld..%lld", q,
			    f->name, (long long)f->min, (long long)f->max);
		*(int64_t *)f->target = v;
		return 0;
	}
	case F_DOUBLE: {
		errno = 0;
		double v = strtod(val, &end);
		if (*val == '\0' || *end != '\0' || errno != 0 || isnan(v))
			return ck_err_set(err, "invalid value \"%s\" for flag -%s: not a number", q,
			                  f->name);
		*(double *)f->target = v;
		return 0;
	}
	case F_DURATION: {
		int64_t ms;
		if (ck_flag_parse_duration(val, &ms) != 0)
			return ck_err_set(
			    err,
			    "invalid value \"%s\" for flag -%s: not a duration (e.g. 30s, "
			    "1m30s, 500ms)",
			    q, f->name);
		*(int64_t *)f->target = ms;
		return 0;
	}
	}
	return ck_err_set(err, "flag -%s: unknown type", f->name);
}

static flag_t *lookup(ck_flagset_t *fs, const char *name, size_t len)
{
	for (size_t i = 0; i < fs->n; i++)
		if (strlen(fs->flags[i].name) == len && strncmp(fs->flags[i].name, name, len) == 0)
			return &fs->flags[i];
	return NULL;
}

ck_flag_result_t ck_flag_parse(ck_flagset_t *fs, int argc, char **argv, FILE *help_out,
                               int *first_arg, char **err)
{
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-' || a[1] == '\0')
			break;
		a++;
		if (*a == '-') {
			a++;
			if (*a == '\0') { /* "--" */
				i++;
				break;
			}
		}
		if (*a == '-' || *a == '=') {
			char qb[600];
			ck_err_set(err, "bad flag syntax: %s",
			           quoted(argv[i], strlen(argv[i]), qb));
			return CK_FLAG_ERROR;
		}
		const char *eq = strchr(a, '=');
		size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
		flag_t *f = lookup(fs, a, nlen);
		if (f == NULL) {
			if ((nlen == 1 && a[0] == 'h') || (nlen == 4 && !strncmp(a, "help", 4))) {
				ck_flag_usage(fs, help_out);
				return CK_FLAG_HELP;
			}
			char qb[600];
			ck_err_set(err, "flag provided but not defined: -%s", quoted(a, nlen, qb));
			return CK_FLAG_ERROR;
		}
		const char *val;
		if (eq) {
			val = eq + 1;
		} else if (f->type == F_BOOL) {
			val = "true";
		} else {
			if (i + 1 >= argc) {
				ck_err_set(err, "flag needs an argument: -%s", f->name);
				return CK_FLAG_ERROR;
			}
			val = argv[++i];
		}
		if (set_value(f, val, err) != 0)
			return CK_FLAG_ERROR;
	}
	if (first_arg)
		*first_arg = i;
	return CK_FLAG_OK;
}

static int cmp_flag(const void *a, const void *b)
{
	return strcmp(((const flag_t *)a)->name, ((const flag_t *)b)->name);
}

void ck_flag_usage(ck_flagset_t *fs, FILE *out)
{
	qsort(fs->flags, fs->n, sizeof(flag_t), cmp_flag);
	fprintf(out, "Usage of %s:\n", fs->prog);
	for (size_t i = 0; i < fs->n; i++) {
		const flag_t *f = &fs->flags[i];
		static const char *tn[] = {"string", "", "int", "float", "duration"};
		fprintf(out, "  -%s %s\n    \t%s", f->name, tn[f->type], f->usage);
		if (!(f->type == F_BOOL && strcmp(f->def, "false") == 0) &&
		    strcmp(f->def, "\"\"") != 0)
			fprintf(out, " (default %s)", f->def);
		fputc('\n', out);
	}
}
