/*
 * base: the few things every module needs: allocation that cannot fail, error
 * strings, a growable buffer and an injectable monotonic clock.
 *
 * Allocation failure aborts (DESIGN.md: one ck_xmalloc family); every other failure
 * is reported through a `char **err` out-parameter that receives a new string
 * naming what failed and why. `err` may be NULL when the caller does not care.
 */
#ifndef CKUBE_BASE_H
#define CKUBE_BASE_H

#include <ckube/export.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define CK_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define CK_NORETURN     __attribute__((noreturn))
#else
#define CK_PRINTF(a, b)
#define CK_NORETURN
#endif

#define CK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Returns new memory, free with free(). Never returns NULL. */
CKUBE_API void *ck_xmalloc(size_t n);
/* Returns new zeroed memory, free with free(). */
CKUBE_API void *ck_xcalloc(size_t nmemb, size_t size);
/* Takes p (may be NULL), returns new memory, free with free(). */
CKUBE_API void *ck_xrealloc(void *p, size_t n);
/* Borrows s; returns a new string (NULL if s is NULL), free with free(). */
CKUBE_API char *ck_xstrdup(const char *s);
/* Borrows s; returns a new string of at most n bytes, free with free(). */
CKUBE_API char *ck_xstrndup(const char *s, size_t n);
/* Returns a new formatted string, free with free(). */
CKUBE_API char *ck_xasprintf(const char *fmt, ...) CK_PRINTF(1, 2);
CKUBE_API char *ck_xvasprintf(const char *fmt, va_list ap);

/* Prints "ck_fatal: <msg>" and aborts. Only for impossible states. */
CKUBE_API CK_NORETURN void ck_fatal(const char *fmt, ...) CK_PRINTF(1, 2);

/*
 * Sets *err to a new formatted message, free with free(). Keeps an existing
 * message (the first, innermost cause wins). No-op if err is NULL.
 * Returns -1 so callers can write `return ck_err_set(err, ...)`.
 */
CKUBE_API int ck_err_set(char **err, const char *fmt, ...) CK_PRINTF(2, 3);
/*
 * Prefixes an existing *err with context: "<ctx>: <old>". No-op if err or *err
 * is NULL. Returns -1.
 */
CKUBE_API int ck_err_wrap(char **err, const char *fmt, ...) CK_PRINTF(2, 3);

/* A growable byte buffer; always NUL-terminated when len > 0 or after ck_sbuf_cstr. */
typedef struct ck_sbuf {
	char *data;
	size_t len;
	size_t cap;
} ck_sbuf_t;

#define CK_SBUF_INIT                                                                               \
	{                                                                                          \
		NULL, 0, 0                                                                         \
	}
/* Borrows p; appends n bytes. */
CKUBE_API void ck_sbuf_append(ck_sbuf_t *b, const void *p, size_t n);
CKUBE_API void ck_sbuf_puts(ck_sbuf_t *b, const char *s);
CKUBE_API void ck_sbuf_putc(ck_sbuf_t *b, char c);
CKUBE_API void ck_sbuf_printf(ck_sbuf_t *b, const char *fmt, ...) CK_PRINTF(2, 3);
/* Appends s as a JSON string literal, quotes included, escaping as needed. */
CKUBE_API void ck_sbuf_put_json_str(ck_sbuf_t *b, const char *s);
/* Same for len bytes of s, which may hold NULs (escaped as \u0000). */
CKUBE_API void ck_sbuf_put_json_strn(ck_sbuf_t *b, const char *s, size_t len);
/* Appends n bytes of p (borrowed) in standard base64 with padding (RFC 4648). */
CKUBE_API void ck_sbuf_put_base64(ck_sbuf_t *b, const void *p, size_t n);
/* Returns the buffer's text (borrowed; "" when empty). */
CKUBE_API const char *ck_sbuf_cstr(ck_sbuf_t *b);
/* Returns the buffer's memory (caller frees with free()) and resets b. */
CKUBE_API char *ck_sbuf_steal(ck_sbuf_t *b);
CKUBE_API void ck_sbuf_reset(ck_sbuf_t *b);
CKUBE_API void ck_sbuf_free(ck_sbuf_t *b);

/*
 * Monotonic and wall clocks, injectable so that backoff, rate limiting and delays
 * are tested without sleeping. A ck_clk_t is a vtable plus state; ck_clk_real() is the
 * process-wide real clock (immutable, thread-safe). A fake clock is advanced by hand.
 */
typedef struct ck_clk ck_clk_t;
struct ck_clk {
	/* Monotonic nanoseconds. */
	uint64_t (*mono_ns)(const ck_clk_t *c);
	/* Wall-clock nanoseconds since the Unix epoch. */
	int64_t (*wall_ns)(const ck_clk_t *c);
};

/* Returns the real clock (static, never freed). */
CKUBE_API const ck_clk_t *ck_clk_real(void);
static inline uint64_t ck_clk_mono_ns(const ck_clk_t *c)
{
	return c->mono_ns(c);
}
static inline int64_t ck_clk_wall_ns(const ck_clk_t *c)
{
	return c->wall_ns(c);
}

/* A fake clock for tests. Thread-safe (atomic). */
typedef struct ck_clk_fake {
	ck_clk_t base;
	_Atomic uint64_t mono;
	_Atomic int64_t wall;
} ck_clk_fake_t;
CKUBE_API void ck_clk_fake_init(ck_clk_fake_t *f, uint64_t mono_ns, int64_t wall_ns);
CKUBE_API void ck_clk_fake_advance(ck_clk_fake_t *f, uint64_t ns);

#define CK_NS_PER_MS  1000000ULL
#define CK_NS_PER_SEC 1000000000ULL

/* Formats wall ns as RFC 3339 with seconds ("2026-11-29T12:00:00Z") into out[32]. */
CKUBE_API void ck_time_format_rfc3339(int64_t wall_ns, char out[32]);
/* Formats wall ns as RFC 3339 with microseconds (MicroTime) into out[40]. */
CKUBE_API void ck_time_format_rfc3339_micro(int64_t wall_ns, char out[40]);
/* Parses RFC 3339 ("...Z" or with offset, optional fraction). Returns 0 or -1. */
CKUBE_API int ck_time_parse_rfc3339(const char *s, int64_t *wall_ns);

/* Returns a uniformly random 64-bit value (thread-safe, seeded from the OS). */
CKUBE_API uint64_t ck_rand_u64(void);
/* Returns a random double in [0, 1). */
CKUBE_API double ck_rand_unit(void);

/*
 * Secrets (tokens, keys, passwords, Authorization headers, exec plugin output).
 * A plain memset() before free() is a dead store the compiler removes at -O2;
 * these use explicit_bzero(), which it may not.
 */
/* Overwrites n bytes of p with zeros (p may be NULL when n is 0). */
CKUBE_API void ck_secure_zero(void *p, size_t n);
/* Takes p (NULL is a no-op): wipes n bytes of it, or strlen(p) when n is 0, then
 * frees it. For binary secrets pass their length: a NUL inside would stop strlen. */
CKUBE_API void ck_secret_free(void *p, size_t n);

/*
 * Reads a whole file into *out, a new NUL-terminated buffer (free with free(), or
 * with ck_secret_free when it holds a secret); *len (may be NULL) gets its length.
 * Any kind of file, blocking (a FIFO is read until its writer closes it), no size
 * limit: for files the user hands over directly (--kubeconfig <(...)). Returns 0,
 * or -1 with *err naming the path.
 */
CKUBE_API int ck_file_read_all(const char *path, char **out, size_t *len, char **err);

/* The limit ck_file_read_bounded is meant for: certificates, keys, tokens. */
#define CK_FILE_MAX_BYTES (1024u * 1024u)
/*
 * The same for files a configuration names (a kubeconfig's certificate-authority,
 * client-certificate, client-key, tokenFile; the service account's files), which
 * may be read on an event loop: only a regular file, opened with O_NONBLOCK so that
 * a FIFO cannot block even the open ("<path>: not a regular file (a FIFO)"), and at
 * most max_bytes ("<path>: larger than N bytes"). Returns 0, or -1 with *err naming
 * the path; the caller adds the field that named it.
 */
CKUBE_API int ck_file_read_bounded(const char *path, size_t max_bytes, char **out, size_t *len,
                                   char **err);

#endif
