/*
 * ck_hash_bytes: a keyed 64-bit hash for the library's hash tables (see hash.h for
 * why it is keyed). 16 bytes per step: the two words, each XORed with key material,
 * are multiplied to 128 bits and the halves folded, so every input bit reaches
 * every output bit within a step and the final fold.
 */
#include "pkg/base/hash.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static uint64_t hash_key[4];

/* 128-bit product folded to 64 bits: the low bits depend on every input bit. */
static inline uint64_t fold(uint64_t a, uint64_t b)
{
	unsigned __int128 r = (unsigned __int128)a * b;
	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t load64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* Before main(), so that no table is ever filled under another key. getrandom() must
 * not block start-up on a machine whose entropy pool is not ready: a key from the
 * clock, the PID and ASLR'd addresses is still not computable from outside. */
__attribute__((constructor)) static void hash_key_init(void)
{
	if (getrandom(hash_key, sizeof(hash_key), GRND_NONBLOCK) == (ssize_t)sizeof(hash_key))
		return;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	hash_key[0] = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ULL ^ (uint64_t)ts.tv_sec;
	hash_key[1] = (uint64_t)(uintptr_t)&ts ^ ((uint64_t)getpid() << 32);
	hash_key[2] = (uint64_t)(uintptr_t)&hash_key_init * 0xff51afd7ed558ccdULL;
	hash_key[3] = fold(hash_key[0] | 1, hash_key[1] | 1) ^ hash_key[2];
}

uint64_t ck_hash_bytes(const void *p, size_t n)
{
	const unsigned char *s = p;
	/* The length goes in first: the zero padding of the last block is then unambiguous. */
	uint64_t h = hash_key[0] ^ ((uint64_t)n * 0x9E3779B97F4A7C15ULL);
	uint64_t a = 0, b = 0;

	while (n > 16) {
		h = fold(load64(s) ^ hash_key[1], load64(s + 8) ^ h);
		s += 16;
		n -= 16;
	}
	if (n > 8) {
		a = load64(s);
		memcpy(&b, s + 8, n - 8);
	} else if (n > 0) {
		memcpy(&a, s, n);
	}
	h = fold(a ^ hash_key[1], b ^ h ^ hash_key[2]);
	return fold(h ^ hash_key[3], 0x9E3779B97F4A7C15ULL);
}

uint64_t ck_hash_combine(uint64_t h, uint64_t part)
{
	return fold(h ^ hash_key[2], part ^ hash_key[3]);
}
