/*
 * base: the few things every module needs: allocation that cannot fail, error
 * strings, a growable buffer and an injectable monotonic clock.
 *
 * Allocation failure aborts (DESIGN.md: one xmalloc family); every other failure
 * is reported through a `char **err` out-parameter that receives a new string
 * naming what failed and why. `err` may be NULL when the caller does not care.
 */
#ifndef CSC_BASE_H
#define CSC_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define CSC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define CSC_NORETURN     __attribute__((noreturn))
#else
#define CSC_PRINTF(a, b)
#define CSC_NORETURN
#endif

#define CSC_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Returns new memory, free with free(). Never returns NULL. */
void *xmalloc(size_t n);
/* Returns new zeroed memory, free with free(). */
void *xcalloc(size_t nmemb, size_t size);
/* Takes p (may be NULL), returns new memory, free with free(). */
void *xrealloc(void *p, size_t n);
/* Borrows s; returns a new string (NULL if s is NULL), free with free(). */
char *xstrdup(const char *s);
/* Borrows s; returns a new string of at most n bytes, free with free(). */
char *xstrndup(const char *s, size_t n);
/* Returns a new formatted string, free with free(). */
char *xasprintf(const char *fmt, ...) CSC_PRINTF(1, 2);
char *xvasprintf(const char *fmt, va_list ap);

/* Prints "fatal: <msg>" and aborts. Only for impossible states. */
CSC_NORETURN void fatal(const char *fmt, ...) CSC_PRINTF(1, 2);

/*
 * Sets *err to a new formatted message, free with free(). Keeps an existing
 * message (the first, innermost cause wins). No-op if err is NULL.
 * Returns -1 so callers can write `return err_set(err, ...)`.
 */
int err_set(char **err, const char *fmt, ...) CSC_PRINTF(2, 3);
/*
 * Prefixes an existing *err with context: "<ctx>: <old>". No-op if err or *err
 * is NULL. Returns -1.
 */
int err_wrap(char **err, const char *fmt, ...) CSC_PRINTF(2, 3);

/* A growable byte buffer; always NUL-terminated when len > 0 or after sbuf_cstr. */
typedef struct sbuf {
	char *data;
	size_t len;
	size_t cap;
} sbuf_t;

#define SBUF_INIT                                                                                  \
	{                                                                                          \
		NULL, 0, 0                                                                         \
	}
/* Borrows p; appends n bytes. */
void sbuf_append(sbuf_t *b, const void *p, size_t n);
void sbuf_puts(sbuf_t *b, const char *s);
void sbuf_putc(sbuf_t *b, char c);
void sbuf_printf(sbuf_t *b, const char *fmt, ...) CSC_PRINTF(2, 3);
/* Appends s as a JSON string literal, quotes included, escaping as needed. */
void sbuf_put_json_str(sbuf_t *b, const char *s);
/* Same for len bytes of s, which may hold NULs (escaped as \u0000). */
void sbuf_put_json_strn(sbuf_t *b, const char *s, size_t len);
/* Returns the buffer's text (borrowed; "" when empty). */
const char *sbuf_cstr(sbuf_t *b);
/* Returns the buffer's memory (caller frees with free()) and resets b. */
char *sbuf_steal(sbuf_t *b);
void sbuf_reset(sbuf_t *b);
void sbuf_free(sbuf_t *b);

/*
 * Monotonic and wall clocks, injectable so that backoff, rate limiting and delays
 * are tested without sleeping. A clk_t is a vtable plus state; clk_real() is the
 * process-wide real clock (immutable, thread-safe). A fake clock is advanced by hand.
 */
typedef struct clk clk_t;
struct clk {
	/* Monotonic nanoseconds. */
	uint64_t (*mono_ns)(const clk_t *c);
	/* Wall-clock nanoseconds since the Unix epoch. */
	int64_t (*wall_ns)(const clk_t *c);
};

/* Returns the real clock (static, never freed). */
const clk_t *clk_real(void);
static inline uint64_t clk_mono_ns(const clk_t *c)
{
	return c->mono_ns(c);
}
static inline int64_t clk_wall_ns(const clk_t *c)
{
	return c->wall_ns(c);
}

/* A fake clock for tests. Thread-safe (atomic). */
typedef struct clk_fake {
	clk_t base;
	_Atomic uint64_t mono;
	_Atomic int64_t wall;
} clk_fake_t;
void clk_fake_init(clk_fake_t *f, uint64_t mono_ns, int64_t wall_ns);
void clk_fake_advance(clk_fake_t *f, uint64_t ns);

#define NS_PER_MS  1000000ULL
#define NS_PER_SEC 1000000000ULL

/* Formats wall ns as RFC 3339 with seconds ("2026-11-29T12:00:00Z") into out[32]. */
void time_format_rfc3339(int64_t wall_ns, char out[32]);
/* Formats wall ns as RFC 3339 with microseconds (MicroTime) into out[40]. */
void time_format_rfc3339_micro(int64_t wall_ns, char out[40]);
/* Parses RFC 3339 ("...Z" or with offset, optional fraction). Returns 0 or -1. */
int time_parse_rfc3339(const char *s, int64_t *wall_ns);

/* Returns a uniformly random 64-bit value (thread-safe, seeded from the OS). */
uint64_t rand_u64(void);
/* Returns a random double in [0, 1). */
double rand_unit(void);

/* Reads a whole file into a new NUL-terminated buffer (free with free()). */
int file_read_all(const char *path, char **out, size_t *len, char **err);

#endif
