/*
 * flowcontrol: a token bucket, as client-go's flowcontrol.NewTokenBucketRateLimiter
 * and golang.org/x/time/rate's Limiter (public; implemented in pkg/flowcontrol).
 *
 * A bucket holds up to `burst` tokens and refills at `qps` tokens a second. A
 * caller reserves one token and is told how long to wait before using it; the
 * count may go negative, so every waiter is spaced 1/qps after the one before
 * it, first come first served, without a queue. Time is passed in (monotonic
 * nanoseconds) so that a fake clock can drive it in tests.
 *
 * Two users, two of rate.Limiter's ways: the REST client waits (rate.Limiter.Wait:
 * reserve, and give the token back with ck_tb_unreserve when the request is
 * cancelled before it was sent); the workqueue's bucket limiter only reserves
 * (Reserve().Delay(): the item is re-added after the delay, nothing to give back).
 *
 * Not thread-safe: the owner serialises calls (the client's bucket lives on the
 * loop thread; the workqueue's limiter holds its own mutex).
 */
#ifndef CKUBE_FLOWCONTROL_H
#define CKUBE_FLOWCONTROL_H

#include <ckube/export.h>

#include <stdbool.h>
#include <stdint.h>

typedef struct ck_tb {
	double qps;    /* tokens per second; <= 0 disables the bucket */
	double burst;  /* capacity */
	double tokens; /* may be negative: tokens promised to waiters */
	uint64_t last_ns;
} ck_tb_t;

/* A full bucket at now_ns. qps < 0 disables limiting (every reservation is free). */
CKUBE_API void ck_tb_init(ck_tb_t *b, double qps, int burst, uint64_t now_ns);
/* True when the bucket limits anything. */
CKUBE_API bool ck_tb_enabled(const ck_tb_t *b);
/* What ck_tb_reserve returns when the wait does not fit in 64 bits of nanoseconds. */
#define CK_TB_NEVER UINT64_MAX

/* Takes one token; returns the nanoseconds to wait before using it (0 = now;
 * CK_TB_NEVER when qps is so small that the wait would overflow). */
CKUBE_API uint64_t ck_tb_reserve(ck_tb_t *b, uint64_t now_ns);
/* Gives back a token reserved but not used (a cancelled waiter). */
CKUBE_API void ck_tb_unreserve(ck_tb_t *b, uint64_t now_ns);

#endif
