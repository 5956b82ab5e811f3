/*
 * Rate limiters for the work queue: per-item exponential backoff, one shared token
 * bucket, and the maximum of several. Each has its own mutex: limiters are called
 * outside the queue's lock (ck_wq_add_rate_limited asks the limiter first, then adds).
 */
#include "pkg/workqueue/wq_internal.h"
#include <ckube/base.h>
#include <ckube/flowcontrol.h>
#include <ckube/workqueue.h>

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

uint64_t ck_wq_ratelimiter_when(ck_wq_ratelimiter_t *rl, const char *item)
{
	return rl->ops->when(rl, item);
}

void ck_wq_ratelimiter_forget(ck_wq_ratelimiter_t *rl, const char *item)
{
	rl->ops->forget(rl, item);
}

unsigned ck_wq_ratelimiter_num_requeues(ck_wq_ratelimiter_t *rl, const char *item)
{
	return rl->ops->num_requeues(rl, item);
}

void ck_wq_ratelimiter_free(ck_wq_ratelimiter_t *rl)
{
	if (rl != NULL)
		rl->ops->free(rl);
}

/* ---- Exponential, per item ---------------------------------------------------------- */

typedef struct failure {
	wq_hnode_t node; /* first: the table hands back node pointers */
	unsigned count;
	char key[];
} failure_t;

/* Per-item failure counts, shared by the exponential and the fast/slow limiters:
 * only the delay a count maps to differs. */
typedef struct exp_limiter {
	ck_wq_ratelimiter_t base;
	pthread_mutex_t mu;
	uint64_t base_ns;
	uint64_t max_ns;
	/* Fast/slow: the first max_fast failures wait base_ns, later ones max_ns, as
	 * client-go's ItemFastSlowRateLimiter. */
	bool fast_slow;
	unsigned max_fast;
	wq_htab_t failures;
} exp_limiter_t;

static failure_t *exp_find(exp_limiter_t *e, const char *item, size_t len, uint64_t h)
{
	return (failure_t *)wq_htab_find(&e->failures, item, len, h);
}

/* base·2^n, computed without overflow: anything past max_ns is max_ns. */
static uint64_t exp_delay(const exp_limiter_t *e, unsigned n)
{
	if (e->fast_slow)
		return n < e->max_fast ? e->base_ns : e->max_ns;
	if (e->base_ns == 0)
		return 0;
	if (n >= 64 || e->base_ns > (UINT64_MAX >> n))
		return e->max_ns;
	uint64_t d = e->base_ns << n;
	return d > e->max_ns ? e->max_ns : d;
}

static uint64_t exp_when(ck_wq_ratelimiter_t *rl, const char *item)
{
	exp_limiter_t *e = (exp_limiter_t *)rl;
	size_t len = strlen(item);
	uint64_t h = ck_hash_bytes(item, len);

	pthread_mutex_lock(&e->mu);
	failure_t *f = exp_find(e, item, len, h);
	if (f == NULL) {
		f = ck_xmalloc(sizeof(*f) + len + 1);
		memcpy(f->key, item, len + 1);
		f->node.hash = h;
		f->node.key = f->key;
		f->node.len = len;
		f->count = 0;
		wq_htab_insert(&e->failures, &f->node);
	}
	unsigned n = f->count;
	if (f->count < UINT32_MAX)
		f->count++;
	pthread_mutex_unlock(&e->mu);
	return exp_delay(e, n);
}

static void exp_forget(ck_wq_ratelimiter_t *rl, const char *item)
{
	exp_limiter_t *e = (exp_limiter_t *)rl;
	size_t len = strlen(item);
	uint64_t h = ck_hash_bytes(item, len);

	pthread_mutex_lock(&e->mu);
	failure_t *f = exp_find(e, item, len, h);
	if (f != NULL) {
		wq_htab_remove(&e->failures, &f->node);
		free(f);
	}
	pthread_mutex_unlock(&e->mu);
}

static unsigned exp_num_requeues(ck_wq_ratelimiter_t *rl, const char *item)
{
	exp_limiter_t *e = (exp_limiter_t *)rl;
	size_t len = strlen(item);
	uint64_t h = ck_hash_bytes(item, len);

	pthread_mutex_lock(&e->mu);
	failure_t *f = exp_find(e, item, len, h);
	unsigned n = f == NULL ? 0 : f->count;
	pthread_mutex_unlock(&e->mu);
	return n;
}

static void exp_free(ck_wq_ratelimiter_t *rl)
{
	exp_limiter_t *e = (exp_limiter_t *)rl;
	if (e->failures.slots != NULL)
		for (size_t i = 0; i <= e->failures.mask; i++)
			free(e->failures.slots[i]);
	wq_htab_free(&e->failures);
	pthread_mutex_destroy(&e->mu);
	free(e);
}

static const ck_wq_ratelimiter_ops_t exp_ops = {exp_when, exp_forget, exp_num_requeues, exp_free};

ck_wq_ratelimiter_t *ck_wq_ratelimiter_exponential_new(uint64_t base_ns, uint64_t max_ns)
{
	exp_limiter_t *e = ck_xcalloc(1, sizeof(*e));
	e->base.ops = &exp_ops;
	pthread_mutex_init(&e->mu, NULL);
	e->base_ns = base_ns;
	e->max_ns = max_ns;
	return &e->base;
}

ck_wq_ratelimiter_t *ck_wq_ratelimiter_fast_slow_new(uint64_t fast_ns, uint64_t slow_ns,
                                                     unsigned max_fast)
{
	exp_limiter_t *e = (exp_limiter_t *)ck_wq_ratelimiter_exponential_new(fast_ns, slow_ns);
	e->fast_slow = true;
	e->max_fast = max_fast;
	return &e->base;
}

/* ---- At most a given delay ---------------------------------------------------------- */

typedef struct max_wait_limiter {
	ck_wq_ratelimiter_t base;
	ck_wq_ratelimiter_t *inner;
	uint64_t max_ns;
} max_wait_limiter_t;

static uint64_t mw_when(ck_wq_ratelimiter_t *rl, const char *item)
{
	max_wait_limiter_t *m = (max_wait_limiter_t *)rl;
	uint64_t d = ck_wq_ratelimiter_when(m->inner, item);
	return d > m->max_ns ? m->max_ns : d;
}

static void mw_forget(ck_wq_ratelimiter_t *rl, const char *item)
{
	ck_wq_ratelimiter_forget(((max_wait_limiter_t *)rl)->inner, item);
}

static unsigned mw_num_requeues(ck_wq_ratelimiter_t *rl, const char *item)
{
	return ck_wq_ratelimiter_num_requeues(((max_wait_limiter_t *)rl)->inner, item);
}

static void mw_free(ck_wq_ratelimiter_t *rl)
{
	max_wait_limiter_t *m = (max_wait_limiter_t *)rl;
	ck_wq_ratelimiter_free(m->inner);
	free(m);
}

static const ck_wq_ratelimiter_ops_t mw_ops = {mw_when, mw_forget, mw_num_requeues, mw_free};

ck_wq_ratelimiter_t *ck_wq_ratelimiter_max_wait_new(ck_wq_ratelimiter_t *inner, uint64_t max_ns)
{
	max_wait_limiter_t *m = ck_xcalloc(1, sizeof(*m));
	m->base.ops = &mw_ops;
	m->inner = inner;
	m->max_ns = max_ns;
	return &m->base;
}

/* ---- Token bucket, shared ----------------------------------------------------------- */

typedef struct bucket_limiter {
	ck_wq_ratelimiter_t base;
	pthread_mutex_t mu; /* ck_tb_t is not thread-safe; workers call when() at once */
	const ck_clk_t *clock;
	ck_tb_t tb;
} bucket_limiter_t;

/*
 * Reserve one token, as workqueue's BucketRateLimiter does with
 * golang.org/x/time/rate's Reserve().Delay(): the k-th request past an empty
 * bucket waits k/qps, and the token is never given back. A wait too long to
 * represent is "never".
 */
static uint64_t bucket_when(ck_wq_ratelimiter_t *rl, const char *item)
{
	bucket_limiter_t *b = (bucket_limiter_t *)rl;
	(void)item;

	pthread_mutex_lock(&b->mu);
	uint64_t wait = ck_tb_reserve(&b->tb, ck_clk_mono_ns(b->clock));
	pthread_mutex_unlock(&b->mu);
	return wait == CK_TB_NEVER ? CK_WQ_DELAY_NEVER : wait;
}

static void bucket_forget(ck_wq_ratelimiter_t *rl, const char *item)
{
	(void)rl;
	(void)item;
}

static unsigned bucket_num_requeues(ck_wq_ratelimiter_t *rl, const char *item)
{
	(void)rl;
	(void)item;
	return 0;
}

static void bucket_free(ck_wq_ratelimiter_t *rl)
{
	bucket_limiter_t *b = (bucket_limiter_t *)rl;
	pthread_mutex_destroy(&b->mu);
	free(b);
}

static const ck_wq_ratelimiter_ops_t bucket_ops = {bucket_when, bucket_forget, bucket_num_requeues,
                                                   bucket_free};

ck_wq_ratelimiter_t *ck_wq_ratelimiter_bucket_new(const ck_clk_t *clock, double qps, int burst,
                                                  char **err)
{
	if (!isfinite(qps) || qps <= 0) {
		ck_err_set(err,
		           "workqueue: bucket rate limiter: qps must be a positive number, got %g",
		           qps);
		return NULL;
	}
	if (burst < 1) {
		ck_err_set(err, "workqueue: bucket rate limiter: burst must be at least 1, got %d",
		           burst);
		return NULL;
	}
	bucket_limiter_t *b = ck_xcalloc(1, sizeof(*b));
	b->base.ops = &bucket_ops;
	pthread_mutex_init(&b->mu, NULL);
	b->clock = clock != NULL ? clock : ck_clk_real();
	ck_tb_init(&b->tb, qps, burst, ck_clk_mono_ns(b->clock));
	return &b->base;
}

/* ---- Max of several ----------------------------------------------------------------- */

typedef struct max_limiter {
	ck_wq_ratelimiter_t base;
	size_t n;
	ck_wq_ratelimiter_t *limiters[];
} max_limiter_t;

static uint64_t max_when(ck_wq_ratelimiter_t *rl, const char *item)
{
	max_limiter_t *m = (max_limiter_t *)rl;
	uint64_t d = 0;
	/* Ask every limiter, not just until one is large: each must record the failure. */
	for (size_t i = 0; i < m->n; i++) {
		uint64_t x = ck_wq_ratelimiter_when(m->limiters[i], item);
		if (x > d)
			d = x;
	}
	return d;
}

static void max_forget(ck_wq_ratelimiter_t *rl, const char *item)
{
	max_limiter_t *m = (max_limiter_t *)rl;
	for (size_t i = 0; i < m->n; i++)
		ck_wq_ratelimiter_forget(m->limiters[i], item);
}

static unsigned max_num_requeues(ck_wq_ratelimiter_t *rl, const char *item)
{
	max_limiter_t *m = (max_limiter_t *)rl;
	unsigned r = 0;
	for (size_t i = 0; i < m->n; i++) {
		unsigned x = ck_wq_ratelimiter_num_requeues(m->limiters[i], item);
		if (x > r)
			r = x;
	}
	return r;
}

static void max_free(ck_wq_ratelimiter_t *rl)
{
	max_limiter_t *m = (max_limiter_t *)rl;
	for (size_t i = 0; i < m->n; i++)
		ck_wq_ratelimiter_free(m->limiters[i]);
	free(m);
}

static const ck_wq_ratelimiter_ops_t max_ops = {max_when, max_forget, max_num_requeues, max_free};

ck_wq_ratelimiter_t *ck_wq_ratelimiter_max_of_new(ck_wq_ratelimiter_t *const *limiters, size_t n)
{
	max_limiter_t *m = ck_xcalloc(1, sizeof(*m) + n * sizeof(m->limiters[0]));
	m->base.ops = &max_ops;
	m->n = n;
	for (size_t i = 0; i < n; i++)
		m->limiters[i] = limiters[i];
	return &m->base;
}

/* ---- Presets ------------------------------------------------------------------------ */

static ck_wq_ratelimiter_t *exp_and_bucket(const ck_clk_t *clock, double qps, int burst)
{
	ck_wq_ratelimiter_t *parts[2];
	parts[0] = ck_wq_ratelimiter_exponential_new(5 * CK_NS_PER_MS, 1000 * CK_NS_PER_SEC);
	parts[1] = ck_wq_ratelimiter_bucket_new(clock, qps, burst, NULL);
	if (parts[1] == NULL)
		ck_fatal("workqueue: preset bucket %g/%d refused", qps, burst);
	return ck_wq_ratelimiter_max_of_new(parts, 2);
}

ck_wq_ratelimiter_t *ck_wq_ratelimiter_default_new(const ck_clk_t *clock)
{
	return exp_and_bucket(clock, 10, 100);
}

ck_wq_ratelimiter_t *ck_wq_ratelimiter_controller_new(const ck_clk_t *clock, double qps, int burst)
{
	if (!(qps > 0) || burst < 1)
		return NULL;
	return exp_and_bucket(clock, qps, burst);
}
