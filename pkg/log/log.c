/*
 * log: klog-style text and JSON lines.
 *
 * Design note. Each call formats its whole line into a private buffer and then
 * writes it under one mutex, so that nothing interleaves even when a line is longer
 * than PIPE_BUF or write(2) returns short. Formatting happens outside the lock; the
 * lock only covers the write. The settings are atomics so that reading them on every
 * call costs a plain load and a late change is not a data race.
 */
#include "pkg/log/log_internal.h"
#include <ckube/log.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_level;
static _Atomic int log_fmt = CK_LOG_FORMAT_TEXT;
static _Atomic int log_fd = 2;
static _Atomic int log_utc;
static const ck_clk_t *_Atomic log_clock;
static pthread_mutex_t log_write_lock = PTHREAD_MUTEX_INITIALIZER;

void ck_log_set_verbosity(int level)
{
	atomic_store_explicit(&log_level, level, memory_order_relaxed);
}

int ck_log_verbosity(void)
{
	return atomic_load_explicit(&log_level, memory_order_relaxed);
}

int ck_log_v_enabled(int level)
{
	return level <= atomic_load_explicit(&log_level, memory_order_relaxed);
}

void ck_log_set_format(ck_log_format_t format)
{
	atomic_store(&log_fmt, (int)format);
}

int ck_log_format_parse(const char *name, ck_log_format_t *out, char **err)
{
	if (name != NULL && strcmp(name, "text") == 0) {
		*out = CK_LOG_FORMAT_TEXT;
		return 0;
	}
	if (name != NULL && strcmp(name, "json") == 0) {
		*out = CK_LOG_FORMAT_JSON;
		return 0;
	}
	return ck_err_set(err, "--log-format \"%s\": unknown format (want \"text\" or \"json\")",
	                  name ? name : "");
}

void ck_log_set_fd(int fd)
{
	atomic_store(&log_fd, fd);
}

void ck_log_set_clock(const ck_clk_t *clock)
{
	atomic_store(&log_clock, clock);
}

void ck_log_set_utc(int utc)
{
	atomic_store(&log_utc, utc ? 1 : 0);
}

/* The kernel thread id, cached per thread: one syscall per thread, not per line. */
static int log_tid(void)
{
	static _Thread_local int tid;
	if (tid == 0)
		tid = (int)syscall(SYS_gettid);
	return tid;
}

/* --- UTF-8 and quoting. --- */

/*
 * Decodes one UTF-8 sequence at p (n bytes available) the way Go does: overlong
 * forms, surrogates and values above U+10FFFF are invalid. Returns its length and
 * sets *r, or returns 0 for an invalid first byte (the caller escapes that byte).
 */
static size_t utf8_decode(const unsigned char *p, size_t n, uint32_t *r)
{
	if (p[0] < 0x80) {
		*r = p[0];
		return 1;
	}
	size_t len;
	uint32_t c, min;
	if (p[0] >= 0xC2 && p[0] <= 0xDF) {
		len = 2, c = p[0] & 0x1F, min = 0x80;
	} else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
		len = 3, c = p[0] & 0x0F, min = 0x800;
	} else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
		len = 4, c = p[0] & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		c = (c << 6) | (p[i] & 0x3F);
	}
	if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
		return 0;
	*r = c;
	return len;
}

/*
 * Go's unicode.IsPrint for runes at or above U+0080, approximated without Unicode
 * tables: the C1 controls, spaces other than U+0020, format characters, private use
 * and noncharacters are not printable; every other rune is (including unassigned
 * ones, which Go would escape).
 */
static int rune_is_print(uint32_t r)
{
	static const struct {
		uint32_t lo, hi;
	} np[] = {
	    {0x80, 0xA0},       {0xAD, 0xAD},        {0x600, 0x605},     {0x61C, 0x61C},
	    {0x6DD, 0x6DD},     {0x70F, 0x70F},      {0x1680, 0x1680},   {0x180E, 0x180E},
	    {0x2000, 0x200F},   {0x2028, 0x202F},    {0x205F, 0x206F},   {0x3000, 0x3000},
	    {0xD800, 0xF8FF},   {0xFDD0, 0xFDEF},    {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},
	    {0x110BD, 0x110BD}, {0x13430, 0x1343F},  {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A},
	    {0xE0000, 0xE0FFF}, {0xF0000, 0x10FFFF},
	};
	if ((r & 0xFFFE) == 0xFFFE)
		return 0;
	for (size_t i = 0; i < CK_ARRAY_LEN(np); i++)
		if (r >= np[i].lo && r <= np[i].hi)
			return 0;
	return 1;
}

void ck_log_quote(ck_sbuf_t *out, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	ck_sbuf_putc(out, '"');
	while (n > 0) {
		uint32_t r;
		size_t len = utf8_decode(p, n, &r);
		if (len == 0) {
			char e[4] = {'\\', 'x', hex[p[0] >> 4], hex[p[0] & 15]};
			ck_sbuf_append(out, e, 4);
			p++, n--;
			continue;
		}
		if (r == '"' || r == '\\') {
			char e[2] = {'\\', (char)r};
			ck_sbuf_append(out, e, 2);
		} else if ((r >= 0x20 && r < 0x7F) || (r >= 0x80 && rune_is_print(r))) {
			ck_sbuf_append(out, p, len);
		} else {
			const char *esc = NULL;
			switch (r) {
			case '\a':
				esc = "\\a";
				break;
			case '\b':
				esc = "\\b";
				break;
			case '\f':
				esc = "\\f";
				break;
			case '\n':
				esc = "\\n";
				break;
			case '\r':
				esc = "\\r";
				break;
			case '\t':
				esc = "\\t";
				break;
			case '\v':
				esc = "\\v";
				break;
			default:
				break;
			}
			if (esc != NULL)
				ck_sbuf_puts(out, esc);
			else if (r < 0x20 || r == 0x7F)
				ck_sbuf_printf(out, "\\x%02x", (unsigned)r);
			else if (r < 0x10000)
				ck_sbuf_printf(out, "\\u%04x", (unsigned)r);
			else
				ck_sbuf_printf(out, "\\U%08x", (unsigned)r);
		}
		p += len, n -= len;
	}
	ck_sbuf_putc(out, '"');
}

/* A JSON string literal; invalid UTF-8 becomes U+FFFD so the line stays valid JSON. */
static void json_quote(ck_sbuf_t *out, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	ck_sbuf_putc(out, '"');
	while (n > 0) {
		uint32_t r;
		size_t len = utf8_decode(p, n, &r);
		if (len == 0) {
			ck_sbuf_puts(out, "\\ufffd");
			p++, n--;
			continue;
		}
		switch (r) {
		case '"':
			ck_sbuf_puts(out, "\\\"");
			break;
		case '\\':
			ck_sbuf_puts(out, "\\\\");
			break;
		case '\n':
			ck_sbuf_puts(out, "\\n");
			break;
		case '\r':
			ck_sbuf_puts(out, "\\r");
			break;
		case '\t':
			ck_sbuf_puts(out, "\\t");
			break;
		default:
			if (r < 0x20) {
				char u[6] = {'\\', 'u', '0', '0', hex[r >> 4], hex[r & 15]};
				ck_sbuf_append(out, u, 6);
			} else {
				ck_sbuf_append(out, p, len);
			}
		}
		p += len, n -= len;
	}
	ck_sbuf_putc(out, '"');
}

/* --- Lines. --- */

static int key_is_secret(const char *key)
{
	static const char *const secret[] = {"token",      "authorization",   "password",
	                                     "client-key", "client-key-data", "bearer-token"};
	if (key == NULL)
		return 0;
	for (size_t i = 0; i < CK_ARRAY_LEN(secret); i++)
		if (strcasecmp(key, secret[i]) == 0)
			return 1;
	return 0;
}

static void text_value(ck_sbuf_t *out, const ck_log_kv_t *kv)
{
	switch (kv->type) {
	case CK_LOG_KV_STR:
		if (kv->v.s == NULL)
			ck_sbuf_puts(out, "<nil>");
		else
			ck_log_quote(out, kv->v.s);
		break;
	case CK_LOG_KV_INT:
		ck_sbuf_printf(out, "%lld", (long long)kv->v.i);
		break;
	case CK_LOG_KV_UINT:
		ck_sbuf_printf(out, "%llu", (unsigned long long)kv->v.u);
		break;
	case CK_LOG_KV_BOOL:
		ck_sbuf_puts(out, kv->v.b ? "true" : "false");
		break;
	case CK_LOG_KV_OBJ: {
		const char *name = kv->v.obj.name ? kv->v.obj.name : "";
		if (kv->v.obj.ns != NULL && kv->v.obj.ns[0] != '\0') {
			char *ref = ck_xasprintf("%s/%s", kv->v.obj.ns, name);
			ck_log_quote(out, ref);
			free(ref);
		} else {
			ck_log_quote(out, name);
		}
		break;
	}
	case CK_LOG_KV_NONE_:
		break;
	}
}

static void json_value(ck_sbuf_t *out, const ck_log_kv_t *kv)
{
	switch (kv->type) {
	case CK_LOG_KV_STR:
		if (kv->v.s == NULL)
			ck_sbuf_puts(out, "null");
		else
			json_quote(out, kv->v.s);
		break;
	case CK_LOG_KV_INT:
		ck_sbuf_printf(out, "%lld", (long long)kv->v.i);
		break;
	case CK_LOG_KV_UINT:
		ck_sbuf_printf(out, "%llu", (unsigned long long)kv->v.u);
		break;
	case CK_LOG_KV_BOOL:
		ck_sbuf_puts(out, kv->v.b ? "true" : "false");
		break;
	case CK_LOG_KV_OBJ:
		ck_sbuf_puts(out, "{\"name\":");
		json_quote(out, kv->v.obj.name ? kv->v.obj.name : "");
		if (kv->v.obj.ns != NULL && kv->v.obj.ns[0] != '\0') {
			ck_sbuf_puts(out, ",\"namespace\":");
			json_quote(out, kv->v.obj.ns);
		}
		ck_sbuf_putc(out, '}');
		break;
	case CK_LOG_KV_NONE_:
		break;
	}
}

static const char *base_name(const char *file)
{
	if (file == NULL)
		return "???";
	const char *slash = strrchr(file, '/');
	return slash ? slash + 1 : file;
}

static void format_text(ck_sbuf_t *out, int64_t wall_ns, int tid, ck_log_severity_t sev,
                        const char *file, int line, const char *err, const char *msg,
                        const ck_log_kv_t *kvs)
{
	static const char letters[] = "IWEF";
	time_t secs = (time_t)(wall_ns / (int64_t)CK_NS_PER_SEC);
	long us = (long)((wall_ns % (int64_t)CK_NS_PER_SEC) / 1000);
	if (us < 0) {
		secs--;
		us += 1000000;
	}
	struct tm tm;
	if (atomic_load(&log_utc))
		gmtime_r(&secs, &tm);
	else
		localtime_r(&secs, &tm);
	ck_sbuf_printf(out, "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] ", letters[sev & 3],
	               tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us, tid,
	               base_name(file), line);
	ck_log_quote(out, msg ? msg : "");
	if (err != NULL) {
		ck_sbuf_puts(out, " err=");
		ck_log_quote(out, err);
	}
	for (const ck_log_kv_t *kv = kvs; kv && kv->type != CK_LOG_KV_NONE_; kv++) {
		ck_sbuf_putc(out, ' ');
		ck_sbuf_puts(out, kv->key ? kv->key : "");
		ck_sbuf_putc(out, '=');
		if (key_is_secret(kv->key))
			ck_sbuf_puts(out, "\"<redacted>\"");
		else
			text_value(out, kv);
	}
	ck_sbuf_putc(out, '\n');
}

static void format_json(ck_sbuf_t *out, int64_t wall_ns, ck_log_severity_t sev, int v,
                        const char *file, int line, const char *err, const char *msg,
                        const ck_log_kv_t *kvs)
{
	/* Seconds with microseconds, trailing zeros dropped like Go's shortest float. */
	int64_t secs = wall_ns / (int64_t)CK_NS_PER_SEC;
	long us = (long)((wall_ns % (int64_t)CK_NS_PER_SEC) / 1000);
	if (us < 0) {
		secs--;
		us += 1000000;
	}
	ck_sbuf_printf(out, "{\"ts\":%lld", (long long)secs);
	if (us != 0) {
		char frac[8];
		snprintf(frac, sizeof(frac), "%06ld", us);
		for (int i = 5; i > 0 && frac[i] == '0'; i--)
			frac[i] = '\0';
		ck_sbuf_printf(out, ".%s", frac);
	}
	ck_sbuf_printf(out, ",\"caller\":");
	char *caller = ck_xasprintf("%s:%d", base_name(file), line);
	json_quote(out, caller);
	free(caller);
	ck_sbuf_puts(out, ",\"msg\":");
	json_quote(out, msg ? msg : "");
	if (sev < CK_LOG_SEV_ERROR)
		ck_sbuf_printf(out, ",\"v\":%d", v);
	if (err != NULL) {
		ck_sbuf_puts(out, ",\"err\":");
		json_quote(out, err);
	}
	for (const ck_log_kv_t *kv = kvs; kv && kv->type != CK_LOG_KV_NONE_; kv++) {
		ck_sbuf_putc(out, ',');
		json_quote(out, kv->key ? kv->key : "");
		ck_sbuf_putc(out, ':');
		if (key_is_secret(kv->key))
			ck_sbuf_puts(out, "\"<redacted>\"");
		else
			json_value(out, kv);
	}
	ck_sbuf_puts(out, "}\n");
}

/* Writes all of buf; a short write continues where it stopped. Failures drop the line. */
static void write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				struct pollfd pfd = {.fd = fd, .events = POLLOUT};
				if (poll(&pfd, 1, 1000) > 0)
					continue;
			}
			return; /* nowhere to report it: logging must not fail the caller */
		}
		buf += n;
		len -= (size_t)n;
	}
}

void ck_log_emit(ck_log_severity_t sev, int v, const char *file, int line, const char *err,
                 const char *msg, const ck_log_kv_t *kvs)
{
	const ck_clk_t *clock = atomic_load(&log_clock);
	int64_t now = ck_clk_wall_ns(clock ? clock : ck_clk_real());
	ck_sbuf_t b = CK_SBUF_INIT;
	if (atomic_load(&log_fmt) == CK_LOG_FORMAT_JSON)
		format_json(&b, now, sev, v, file, line, err, msg, kvs);
	else
		format_text(&b, now, log_tid(), sev, file, line, err, msg, kvs);
	pthread_mutex_lock(&log_write_lock);
	write_all(atomic_load(&log_fd), b.data, b.len);
	pthread_mutex_unlock(&log_write_lock);
	ck_sbuf_free(&b);
	if (sev == CK_LOG_SEV_FATAL)
		_exit(255);
}

/* --- Key trace. --- */

/*
 * The traced key, split once into its parts so that objects match without
 * building their key. Published through one atomic pointer: off is a NULL
 * pointer, so the check every step makes is a relaxed load and a compare. A key
 * replaced while a step may still read it cannot be freed safely without a
 * reclamation scheme; it is set once or a few times per process, so the old ones
 * are kept on a list (reachable: not a leak to LeakSanitizer).
 */
typedef struct log_trace_key {
	char *key;        /* "ns/name" or "name" */
	const char *ns;   /* into split: "" when cluster-scoped */
	const char *name; /* into split */
	char *split;      /* "ns\0name" */
	struct log_trace_key *retired;
} trace_key_t;

/* Read inline by the other modules (log_internal.h). */
struct log_trace_key *_Atomic log_trace_cur_;
static trace_key_t *trace_retired; /* under trace_set_lock */
static pthread_mutex_t trace_set_lock = PTHREAD_MUTEX_INITIALIZER;

static int trace_key_check(const char *key, char **err)
{
	const char *slash = strchr(key, '/');
	const char *why = NULL;
	for (const char *p = key; *p != '\0' && why == NULL; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			why = "it contains a space or control character";
	if (why == NULL && slash != NULL &&
	    (slash == key || slash[1] == '\0' || strchr(slash + 1, '/') != NULL))
		why = "want \"namespace/name\", or \"name\" for a cluster-scoped object";
	if (why == NULL)
		return 0;
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, "trace key ");
	ck_log_quote(&b, key);
	ck_sbuf_printf(&b, ": %s", why);
	if (err != NULL)
		*err = ck_sbuf_steal(&b);
	else
		ck_sbuf_free(&b);
	return -1;
}

int ck_log_set_trace_key(const char *key, char **err)
{
	trace_key_t *t = NULL;
	if (key != NULL && key[0] != '\0') {
		if (trace_key_check(key, err) != 0)
			return -1;
		t = ck_xcalloc(1, sizeof(*t));
		t->key = ck_xstrdup(key);
		t->split = ck_xstrdup(key);
		char *slash = strchr(t->split, '/');
		if (slash != NULL) {
			*slash = '\0';
			t->ns = t->split;
			t->name = slash + 1;
		} else {
			t->ns = "";
			t->name = t->split;
		}
	}
	pthread_mutex_lock(&trace_set_lock);
	trace_key_t *old = atomic_exchange_explicit(&log_trace_cur_, t, memory_order_acq_rel);
	if (old != NULL) {
		old->retired = trace_retired;
		trace_retired = old;
	}
	pthread_mutex_unlock(&trace_set_lock);
	return 0;
}

char *ck_log_trace_key(void)
{
	const trace_key_t *t = atomic_load_explicit(&log_trace_cur_, memory_order_acquire);
	return t != NULL ? ck_xstrdup(t->key) : NULL;
}

bool ck_log_trace_on(void)
{
	return log_trace_on();
}

/* The current key, or NULL: the relaxed load decides the common case (off). */
static const trace_key_t *trace_get(void)
{
	if (atomic_load_explicit(&log_trace_cur_, memory_order_relaxed) == NULL)
		return NULL;
	return atomic_load_explicit(&log_trace_cur_, memory_order_acquire);
}

bool ck_log_trace_match(const char *key)
{
	const trace_key_t *t = trace_get();
	return t != NULL && key != NULL && strcmp(t->key, key) == 0;
}

bool ck_log_trace_match_parts(const char *ns, const char *name)
{
	const trace_key_t *t = trace_get();
	return t != NULL && name != NULL && strcmp(t->name, name) == 0 &&
	       strcmp(t->ns, ns != NULL ? ns : "") == 0;
}

void ck_log_trace_emit(const char *file, int line, const char *step, const ck_log_kv_t *kvs)
{
	const trace_key_t *t = trace_get();
	size_t n = 0;
	while (kvs != NULL && kvs[n].type != CK_LOG_KV_NONE_)
		n++;
	/* key and step first, then the step's pairs and the terminator. */
	ck_log_kv_t *all = ck_xcalloc(n + 3, sizeof(*all));
	all[0] = CK_KV_STR("key", t != NULL ? t->key : "");
	all[1] = CK_KV_STR("step", step);
	if (n > 0)
		memcpy(all + 2, kvs, n * sizeof(*all));
	ck_log_emit(CK_LOG_SEV_INFO, 0, file, line, NULL, "Trace", all);
	free(all);
}
