/*
 * base: allocation, error strings, buffers, clocks, time formats, randomness.
 */
#include <ckube/base.h>
#include <ckube/version.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static CK_NORETURN void oom(size_t n)
{
	fprintf(stderr, "fatal: out of memory allocating %zu bytes\n", n);
	abort();
}

void *ck_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (p == NULL)
		oom(n);
	return p;
}

void *ck_xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
	if (p == NULL)
		oom(nmemb * size);
	return p;
}

void *ck_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (q == NULL)
		oom(n);
	return q;
}

char *ck_xstrdup(const char *s)
{
	if (s == NULL)
		return NULL;
	size_t n = strlen(s);
	char *d = ck_xmalloc(n + 1);
	memcpy(d, s, n + 1);
	return d;
}

char *ck_xstrndup(const char *s, size_t n)
{
	if (s == NULL)
		return NULL;
	size_t len = strnlen(s, n);
	char *d = ck_xmalloc(len + 1);
	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

char *ck_xvasprintf(const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		ck_fatal("vsnprintf failed for format \"%s\"", fmt);
	char *s = ck_xmalloc((size_t)n + 1);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	return s;
}

char *ck_xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = ck_xvasprintf(fmt, ap);
	va_end(ap);
	return s;
}

void ck_fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("fatal: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

int ck_err_set(char **err, const char *fmt, ...)
{
	if (err == NULL || *err != NULL)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	*err = ck_xvasprintf(fmt, ap);
	va_end(ap);
	return -1;
}

int ck_err_wrap(char **err, const char *fmt, ...)
{
	if (err == NULL || *err == NULL)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	char *ctx = ck_xvasprintf(fmt, ap);
	va_end(ap);
	char *n = ck_xasprintf("%s: %s", ctx, *err);
	free(ctx);
	free(*err);
	*err = n;
	return -1;
}

static void sbuf_grow(ck_sbuf_t *b, size_t extra)
{
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	b->data = ck_xrealloc(b->data, cap);
	b->cap = cap;
}

void ck_sbuf_append(ck_sbuf_t *b, const void *p, size_t n)
{
	sbuf_grow(b, n);
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void ck_sbuf_puts(ck_sbuf_t *b, const char *s)
{
	ck_sbuf_append(b, s, strlen(s));
}

void ck_sbuf_putc(ck_sbuf_t *b, char c)
{
	ck_sbuf_append(b, &c, 1);
}

void ck_sbuf_printf(ck_sbuf_t *b, const char *fmt, ...)
{
	va_list ap, ap2;
	va_start(ap, fmt);
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n > 0) {
		sbuf_grow(b, (size_t)n);
		vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
		b->len += (size_t)n;
	}
	va_end(ap);
}

void ck_sbuf_put_base64(ck_sbuf_t *b, const void *data, size_t n)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = data;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		char q[4] = {tab[v >> 18 & 63], tab[v >> 12 & 63],
		             i + 1 < n ? tab[v >> 6 & 63] : '=', i + 2 < n ? tab[v & 63] : '='};
		ck_sbuf_append(b, q, 4);
	}
}

void ck_sbuf_put_json_strn(ck_sbuf_t *b, const char *str, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)str;
	ck_sbuf_putc(b, '"');
	/* Copy runs that need no escaping in one append each. */
	size_t run = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		ck_sbuf_append(b, s + run, i - run);
		run = i + 1;
		switch (c) {
		case '"':
			ck_sbuf_append(b, "\\\"", 2);
			break;
		case '\\':
			ck_sbuf_append(b, "\\\\", 2);
			break;
		case '\n':
			ck_sbuf_append(b, "\\n", 2);
			break;
		case '\r':
			ck_sbuf_append(b, "\\r", 2);
			break;
		case '\t':
			ck_sbuf_append(b, "\\t", 2);
			break;
		default: {
			char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			ck_sbuf_append(b, u, 6);
		}
		}
	}
	ck_sbuf_append(b, s + run, len - run);
	ck_sbuf_putc(b, '"');
}

void ck_sbuf_put_json_str(ck_sbuf_t *b, const char *s)
{
	ck_sbuf_put_json_strn(b, s, strlen(s));
}

const char *ck_sbuf_cstr(ck_sbuf_t *b)
{
	if (b->data == NULL)
		return "";
	return b->data;
}

char *ck_sbuf_steal(ck_sbuf_t *b)
{
	char *d = b->data ? b->data : ck_xstrdup("");
	b->data = NULL;
	b->len = b->cap = 0;
	return d;
}

void ck_sbuf_reset(ck_sbuf_t *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void ck_sbuf_free(ck_sbuf_t *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

static uint64_t real_mono_ns(const ck_clk_t *c)
{
	(void)c;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * CK_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

static int64_t real_wall_ns(const ck_clk_t *c)
{
	(void)c;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * (int64_t)CK_NS_PER_SEC + ts.tv_nsec;
}

static const ck_clk_t real_clock = {real_mono_ns, real_wall_ns};

const ck_clk_t *ck_clk_real(void)
{
	return &real_clock;
}

static uint64_t fake_mono_ns(const ck_clk_t *c)
{
	const ck_clk_fake_t *f = (const ck_clk_fake_t *)c;
	return atomic_load(&((ck_clk_fake_t *)f)->mono);
}

static int64_t fake_wall_ns(const ck_clk_t *c)
{
	const ck_clk_fake_t *f = (const ck_clk_fake_t *)c;
	return atomic_load(&((ck_clk_fake_t *)f)->wall);
}

void ck_clk_fake_init(ck_clk_fake_t *f, uint64_t mono_ns, int64_t wall_ns)
{
	f->base.mono_ns = fake_mono_ns;
	f->base.wall_ns = fake_wall_ns;
	atomic_init(&f->mono, mono_ns);
	atomic_init(&f->wall, wall_ns);
}

void ck_clk_fake_advance(ck_clk_fake_t *f, uint64_t ns)
{
	atomic_fetch_add(&f->mono, ns);
	atomic_fetch_add(&f->wall, (int64_t)ns);
}

void ck_time_format_rfc3339(int64_t wall_ns, char out[32])
{
	time_t t = (time_t)(wall_ns / (int64_t)CK_NS_PER_SEC);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void ck_time_format_rfc3339_micro(int64_t wall_ns, char out[40])
{
	time_t t = (time_t)(wall_ns / (int64_t)CK_NS_PER_SEC);
	long us = (long)((wall_ns % (int64_t)CK_NS_PER_SEC) / 1000);
	struct tm tm;
	char head[24];
	gmtime_r(&t, &tm);
	if (strftime(head, sizeof(head), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
		head[0] = 0;
	snprintf(out, 40, "%.20s.%06ldZ", head, us % 1000000);
}

int ck_time_parse_rfc3339(const char *s, int64_t *wall_ns)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	int y, mo, d, h, mi, sec, n = 0;
	if (s == NULL ||
	    sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6)
		return -1;
	const char *p = s + n;
	int64_t frac = 0;
	if (*p == '.') {
		int64_t scale = 100000000;
		for (p++; *p >= '0' && *p <= '9'; p++) {
			frac += (*p - '0') * scale;
			scale /= 10;
		}
	}
	long off = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		/* Exactly "HH:MM": sscanf would take "-1:00" as well, and stepping over six
		 * bytes of a shorter offset ran past the string's end (found by fuzz_exec). */
		for (int i = 1; i <= 5; i++)
			if (i == 3 ? p[i] != ':' : (p[i] < '0' || p[i] > '9'))
				return -1;
		long oh = (p[1] - '0') * 10 + (p[2] - '0'), om = (p[4] - '0') * 10 + (p[5] - '0');
		off = (oh * 3600L + om * 60L) * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return -1;
	}
	if (*p != '\0')
		return -1;
	/* Out-of-range fields would be normalised by timegm into another instant. */
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || h < 0 ||
	    mi < 0 || sec < 0 || y < 0 || labs(off) >= 86400)
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	time_t t = timegm(&tm);
	/* Nanoseconds since 1970 in 64 bits end in 2262 (as Go's UnixNano). */
	int64_t secs = (int64_t)t - off;
	if (secs > INT64_MAX / (int64_t)CK_NS_PER_SEC - 1 ||
	    secs < INT64_MIN / (int64_t)CK_NS_PER_SEC + 1)
		return -1;
	*wall_ns = secs * (int64_t)CK_NS_PER_SEC + frac;
	return 0;
}

/* xorshift128+ per thread, seeded from getrandom: cheap and good enough for jitter. */
static _Thread_local uint64_t rng_s[2];
static _Thread_local int rng_seeded;

uint64_t ck_rand_u64(void)
{
	if (!rng_seeded) {
		if (getrandom(rng_s, sizeof(rng_s), 0) != (ssize_t)sizeof(rng_s)) {
			rng_s[0] = (uint64_t)real_mono_ns(NULL) ^ (uint64_t)(uintptr_t)&rng_s;
			rng_s[1] = (uint64_t)getpid() * 0x9E3779B97F4A7C15ULL;
		}
		if (rng_s[0] == 0 && rng_s[1] == 0)
			rng_s[0] = 1;
		rng_seeded = 1;
	}
	uint64_t s1 = rng_s[0];
	const uint64_t s0 = rng_s[1];
	rng_s[0] = s0;
	s1 ^= s1 << 23;
	rng_s[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
	return rng_s[1] + s0;
}

double ck_rand_unit(void)
{
	return (double)(ck_rand_u64() >> 11) / (double)(1ULL << 53);
}

/* ---- Secrets ------------------------------------------------------------------------ */

void ck_secure_zero(void *p, size_t n)
{
	if (p != NULL && n > 0)
		explicit_bzero(p, n);
}

void ck_secret_free(void *p, size_t n)
{
	if (p == NULL)
		return;
	explicit_bzero(p, n ? n : strlen(p));
	free(p);
}

/* What kind of file mode is, for "not a regular file (a FIFO)". */
static const char *file_kind(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a plain file";
}

/*
 * Reads fd to its end, at most max bytes (SIZE_MAX: no limit). The chunks are
 * wiped as they are copied, so a secret leaves no copy on the stack.
 */
static int fd_read_all(int fd, const char *path, size_t max, char **out, size_t *len, char **err)
{
	int result = -1;
	ck_sbuf_t b = CK_SBUF_INIT;
	char chunk[65536];
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ck_err_set(err, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		if ((size_t)n > max - b.len) {
			ck_err_set(err, "%s: larger than %zu bytes", path, max);
			goto out;
		}
		ck_sbuf_append(&b, chunk, (size_t)n);
	}
	if (len)
		*len = b.len;
	ck_sbuf_cstr(&b);
	*out = ck_sbuf_steal(&b);
	result = 0;
out:
	ck_secure_zero(chunk, sizeof(chunk));
	if (b.data != NULL)
		ck_secure_zero(b.data, b.cap);
	ck_sbuf_free(&b);
	return result;
}

int ck_file_read_all(const char *path, char **out, size_t *len, char **err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ck_err_set(err, "%s: %s", path, strerror(errno));
	int r = fd_read_all(fd, path, SIZE_MAX, out, len, err);
	close(fd);
	return r;
}

int ck_file_read_bounded(const char *path, size_t max_bytes, char **out, size_t *len, char **err)
{
	/* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return ck_err_set(err, "%s: %s", path, strerror(errno));
	int result = -1;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		ck_err_set(err, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		ck_err_set(err, "%s: not a regular file (%s)", path, file_kind(st.st_mode));
		goto out;
	}
	if ((uintmax_t)st.st_size > max_bytes) {
		ck_err_set(err, "%s: larger than %zu bytes", path, max_bytes);
		goto out;
	}
	/* A regular file never blocks; the limit still holds if it grows meanwhile. */
	result = fd_read_all(fd, path, max_bytes, out, len, err);
out:
	close(fd);
	return result;
}

/* ---- Version ------------------------------------------------------------------------ */

const char *ck_version(void)
{
	return CKUBE_VERSION_STRING;
}

unsigned ck_version_number(void)
{
	return CKUBE_VERSION_NUM;
}
