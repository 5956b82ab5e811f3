/*
 * The library's one hash function for its hash tables (internal: not installed).
 *
 * Keys of the store, the workqueue and the event correlator are names chosen by
 * whoever may create objects in the cluster. With a fixed, public function a tenant
 * can compute names that all land in one probe run and turn every lookup into a
 * scan of the whole table. The function is keyed with 256 bits from getrandom(),
 * drawn once when the library is loaded, so bucket positions differ from process to
 * process and cannot be computed from outside -- the defence Go's maps (a random
 * seed per map) and redis (SipHash with a random key) use. It is a fast mixing
 * function, not a cryptographic PRF: it keeps names from being aimed at a bucket, it
 * does not make hashes safe to publish (never expose them).
 *
 * One caller also takes a hash as the identity of what it hashed: the event
 * correlator (pkg/record) keeps 64-bit hashes of its keys instead of the keys, so two
 * keys with one hash are one entry there. It accepts that with the odds in record.h
 * (about 2^-52 per new key, by chance); aiming two names at one hash on purpose
 * needs the per-process key, which never leaves the process. A change that weakens
 * the mixing or the key must keep that caller in mind.
 *
 * Thread-safe: the key is written once before main() and only read afterwards.
 */
#ifndef CKUBE_PKG_BASE_HASH_H
#define CKUBE_PKG_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* Hash of the n bytes at p (p may be NULL when n is 0). Equal inputs give equal
 * hashes within one process only. */
uint64_t ck_hash_bytes(const void *p, size_t n);

/* Combines a running hash with the hash of one more part (for keys of several
 * strings, as metric label values): ck_hash_combine(ck_hash_combine(0, a), b). */
uint64_t ck_hash_combine(uint64_t h, uint64_t part);

#endif
