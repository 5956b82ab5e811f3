/* ratelimit: the token bucket of <ckube/flowcontrol.h>. */
#include <ckube/flowcontrol.h>

#include <math.h>

void ck_tb_init(ck_tb_t *b, double qps, int burst, uint64_t now_ns)
{
	b->qps = qps;
	b->burst = burst < 1 ? 1 : burst;
	b->tokens = b->burst;
	b->last_ns = now_ns;
}

bool ck_tb_enabled(const ck_tb_t *b)
{
	return b->qps > 0;
}

/* Adds what accrued since the last call; a clock that went backwards adds nothing. */
static void tb_refill(ck_tb_t *b, uint64_t now_ns)
{
	if (now_ns <= b->last_ns)
		return;
	b->tokens += (double)(now_ns - b->last_ns) * b->qps / 1e9;
	if (b->tokens > b->burst)
		b->tokens = b->burst;
	b->last_ns = now_ns;
}

uint64_t ck_tb_reserve(ck_tb_t *b, uint64_t now_ns)
{
	if (!ck_tb_enabled(b))
		return 0;
	tb_refill(b, now_ns);
	b->tokens -= 1.0;
	if (b->tokens >= 0)
		return 0;
	/* ceil so that the waiter never wakes a hair before its token exists; a wait
	 * past what uint64_t holds (a tiny qps) is "never", not undefined behaviour. */
	double wait = ceil(-b->tokens * 1e9 / b->qps);
	return wait < 18e18 ? (uint64_t)wait : CK_TB_NEVER;
}

void ck_tb_unreserve(ck_tb_t *b, uint64_t now_ns)
{
	if (!ck_tb_enabled(b))
		return;
	tb_refill(b, now_ns);
	b->tokens += 1.0;
	if (b->tokens > b->burst)
		b->tokens = b->burst;
}
