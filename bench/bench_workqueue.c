/*
 * Benchmark of pkg/workqueue: prints figures, asserts nothing about speed.
 *
 *   add+get+done per key, one thread
 *   the same with 2 and 8 workers (each adds, gets and finishes), and with one
 *     producer thread feeding 2 and 8 workers
 *   add_after with 100,000 delayed keys pending
 *   memory per queued key and per delayed key
 *   allocations per add+get+done once warm (counted by wrapping malloc)
 *   the plain queue beside the priority queue: adds+gets per second with 1000 and
 *     50,000 keys queued, at one priority, at controller-runtime's two (0 and -100)
 *     and at 16 (the Go peers: client-go's plain queue in bench/peers/workqueue,
 *     controller-runtime's priority queue in bench/peers/priorityqueue)
 *
 * Build and run: bash bench/bench_workqueue.sh
 * Only some parts: bench_workqueue single workers after memory priority (any of them).
 */
#include <ckube/base.h>
#include <ckube/workqueue.h>

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- Counting allocations: wrap glibc's allocator entry points. ------------------------ */

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);

static _Atomic unsigned long n_allocs;

void *malloc(size_t n)
{
	atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
	return __libc_realloc(p, n);
}

/* ---- Helpers ------------------------------------------------------------------------- */

enum { NKEYS = 4096 };
static char keys[NKEYS][32];

static uint64_t now_ns(void)
{
	return ck_clk_mono_ns(ck_clk_real());
}

/* Unnamed: no metrics, as client-go's queue without a metrics provider (what the Go
 * benchmark runs); bench_single times a named queue, whose metrics are on, too. */
static ck_wq_t *new_queue(void)
{
	ck_wq_options_t o = {.name = NULL};
	return ck_wq_new(&o);
}

/* ---- add+get+done, one thread ---------------------------------------------------------- */

static void bench_single(void)
{
	enum { N = 2000000, WARM = 10000 };
	ck_wq_t *q = new_queue();
	for (int i = 0; i < WARM; i++) {
		ck_wq_add(q, keys[i % NKEYS]);
		ck_wq_done(q, ck_wq_get(q));
	}
	unsigned long a0 = atomic_load(&n_allocs);
	uint64_t t0 = now_ns();
	for (int i = 0; i < N; i++) {
		ck_wq_add(q, keys[i % NKEYS]);
		ck_wq_done(q, ck_wq_get(q));
	}
	uint64_t t1 = now_ns();
	unsigned long allocs = atomic_load(&n_allocs) - a0;
	printf("add+get+done, 1 thread:              %7.1f ns/key   (%d keys)\n",
	       (double)(t1 - t0) / N, N);
	printf("allocations per add+get+done (warm): %7.4f        (%lu in %d)\n",
	       (double)allocs / N, allocs, N);

	/* Batched: 1000 adds, then 1000 get+done, so the queue is not always empty. */
	t0 = now_ns();
	for (int r = 0; r < N / 1000; r++) {
		for (int i = 0; i < 1000; i++)
			ck_wq_add(q, keys[(r * 1000 + i) % NKEYS]);
		for (int i = 0; i < 1000; i++)
			ck_wq_done(q, ck_wq_get(q));
	}
	t1 = now_ns();
	printf("add+get+done, 1 thread, 1000 queued: %7.1f ns/key\n", (double)(t1 - t0) / N);
	ck_wq_free(q);

	/* A named queue: latency histograms on (three clock reads per key). */
	ck_wq_options_t o = {.name = "bench"};
	q = ck_wq_new(&o);
	t0 = now_ns();
	for (int i = 0; i < N; i++) {
		ck_wq_add(q, keys[i % NKEYS]);
		ck_wq_done(q, ck_wq_get(q));
	}
	t1 = now_ns();
	printf("add+get+done, 1 thread, metrics on:  %7.1f ns/key\n", (double)(t1 - t0) / N);
	ck_wq_free(q);
}

/* ---- Several workers -------------------------------------------------------------------- */

typedef struct worker_arg {
	ck_wq_t *q;
	int id;
	int n;
	int nworkers;
	unsigned long got;
} worker_arg_t;

/* Each worker adds its own keys and takes whatever is queued. */
static void *mixed_worker(void *p)
{
	worker_arg_t *w = p;
	int per = NKEYS / w->nworkers;
	for (int i = 0; i < w->n; i++) {
		/* Take one key per key this add produced: an add that was ignored (the key is
		 * already dirty while another worker processes it, which a preempted worker on
		 * 2 cores makes possible) produced none, and waiting for one would hang. */
		if (ck_wq_add(w->q, keys[w->id * per + i % per]) != 1)
			continue;
		const char *k = ck_wq_get(w->q);
		if (k == NULL)
			break;
		w->got++;
		ck_wq_done(w->q, k);
	}
	return NULL;
}

static void *consumer(void *p)
{
	worker_arg_t *w = p;
	const char *k;
	while ((k = ck_wq_get(w->q)) != NULL) {
		w->got++;
		ck_wq_done(w->q, k);
	}
	return NULL;
}

static void bench_workers(int nworkers)
{
	enum { N = 400000 };
	pthread_t th[8];
	worker_arg_t args[8];

	/* Every worker is producer and consumer. */
	ck_wq_t *q = new_queue();
	uint64_t t0 = now_ns();
	for (int i = 0; i < nworkers; i++) {
		args[i] = (worker_arg_t){.q = q, .id = i, .n = N / nworkers, .nworkers = nworkers};
		pthread_create(&th[i], NULL, mixed_worker, &args[i]);
	}
	/* Total gets equal total adds; shut down once all are done to release any straggler. */
	unsigned long got = 0;
	for (int i = 0; i < nworkers; i++) {
		pthread_join(th[i], NULL);
		got += args[i].got;
		if (i == 0)
			ck_wq_shutdown(q);
	}
	uint64_t t1 = now_ns();
	printf("add+get+done, %d workers (each adds): %6.1f ns/key   (%lu keys)\n", nworkers,
	       (double)(t1 - t0) / (double)got, got);
	ck_wq_free(q);

	/* One producer (the event loop's role), nworkers consumers. */
	q = new_queue();
	for (int i = 0; i < nworkers; i++) {
		args[i] = (worker_arg_t){.q = q};
		pthread_create(&th[i], NULL, consumer, &args[i]);
	}
	t0 = now_ns();
	for (int i = 0; i < N; i++)
		ck_wq_add(q, keys[i % NKEYS]);
	ck_wq_shutdown_with_drain(q);
	got = 0;
	for (int i = 0; i < nworkers; i++) {
		pthread_join(th[i], NULL);
		got += args[i].got;
	}
	t1 = now_ns();
	printf("1 producer -> %d workers:             %6.1f ns/add  (%d adds, %lu processed)\n",
	       nworkers, (double)(t1 - t0) / N, N, got);
	printf("1 producer -> %d workers, per get:    %6.1f ns/key  (adds of a queued key are "
	       "merged)\n",
	       nworkers, (double)(t1 - t0) / (double)got);
	ck_wq_free(q);
}

/* ---- add_after with many pending ---------------------------------------------------------- */

static void bench_add_after(void)
{
	enum { PENDING = 100000, M = 100000 };
	char key[48];
	ck_wq_t *q = new_queue();
	const int64_t hour = 3600 * (int64_t)CK_NS_PER_SEC;
	for (int i = 0; i < PENDING; i++) {
		snprintf(key, sizeof(key), "default/pending-%d", i);
		ck_wq_add_after(q, key, hour + (int64_t)(ck_rand_u64() % CK_NS_PER_SEC));
	}
	/* Pre-format the keys so that only the queue is timed. */
	char(*fresh)[48] = ck_xmalloc(M * sizeof(*fresh));
	int64_t *jitter = ck_xmalloc(M * sizeof(*jitter));
	for (int i = 0; i < M; i++) {
		snprintf(fresh[i], sizeof(fresh[i]), "default/fresh-%d", i);
		jitter[i] = (int64_t)(ck_rand_u64() % CK_NS_PER_SEC);
	}

	uint64_t t0 = now_ns();
	for (int i = 0; i < M; i++)
		ck_wq_add_after(q, fresh[i], hour + jitter[i]);
	uint64_t t1 = now_ns();
	printf("add_after new key, %d..%d pending: %6.1f ns/op\n", PENDING, PENDING + M,
	       (double)(t1 - t0) / M);

	/* Same keys again, each with an earlier time: lookup + sift up. */
	t0 = now_ns();
	for (int i = 0; i < M; i++)
		ck_wq_add_after(q, fresh[i], hour / 2 + jitter[i]);
	t1 = now_ns();
	printf("add_after pending key, earlier time: %6.1f ns/op\n", (double)(t1 - t0) / M);

	/* And later: lookup only, the earlier time is kept. */
	t0 = now_ns();
	for (int i = 0; i < M; i++)
		ck_wq_add_after(q, fresh[i], 2 * hour);
	t1 = now_ns();
	printf("add_after pending key, later time:   %6.1f ns/op   (%zu waiting)\n",
	       (double)(t1 - t0) / M, ck_wq_waiting_len(q));
	free(fresh);
	free(jitter);
	ck_wq_free(q);
}

/* ---- Memory per key ------------------------------------------------------------------------- */

static void bench_memory(void)
{
	enum { N = 100000 };
	char key[48];
	for (int delayed = 0; delayed < 2; delayed++) {
		malloc_trim(0);
		size_t before = mallinfo2().uordblks;
		ck_wq_t *q = new_queue();
		for (int i = 0; i < N; i++) {
			snprintf(key, sizeof(key), "default/example-foo-%06d", i);
			if (delayed)
				ck_wq_add_after(q, key, 3600 * (int64_t)CK_NS_PER_SEC);
			else
				ck_wq_add(q, key);
		}
		size_t after = mallinfo2().uordblks;
		printf("memory per %s key (%zu-byte keys):  %6.1f bytes   (%d keys)\n",
		       delayed ? "delayed" : "queued ", strlen(key), (double)(after - before) / N,
		       N);
		ck_wq_free(q);
	}
}

/* ---- Plain queue beside the priority queue ---------------------------------------------- */

/*
 * One thread: `depth` adds, then `depth` get+done, repeated; one add and one get per
 * key. Distinct keys, so every add queues one (none is merged). nprio 0: the plain
 * queue; else a priority queue whose adds take priorities from prios (nprio values,
 * drawn before timing).
 */
static double prio_rate(size_t depth, const int *prios, size_t nprio, unsigned long *allocs)
{
	enum { TOTAL = 2000000 };
	char(*k)[32] = ck_xmalloc(depth * sizeof(*k));
	int *p = ck_xmalloc(depth * sizeof(*p));
	for (size_t i = 0; i < depth; i++) {
		snprintf(k[i], sizeof(k[i]), "default/foo-%zu", i);
		p[i] = nprio > 0 ? prios[ck_rand_u64() % nprio] : 0;
	}
	ck_wq_t *q = ck_wq_new(&(ck_wq_options_t){.priority = nprio > 0});
	size_t rounds = TOTAL / depth;
	unsigned long a0 = atomic_load(&n_allocs);
	uint64_t t0 = now_ns();
	for (size_t r = 0; r < rounds; r++) {
		if (nprio == 0)
			for (size_t i = 0; i < depth; i++)
				ck_wq_add(q, k[i]);
		else
			for (size_t i = 0; i < depth; i++)
				ck_wq_add_with_opts(q, k[i], &(ck_wq_add_opts_t){.priority = p[i]});
		for (size_t i = 0; i < depth; i++)
			ck_wq_done(q, ck_wq_get(q));
	}
	uint64_t t1 = now_ns();
	if (allocs != NULL)
		*allocs = atomic_load(&n_allocs) - a0;
	ck_wq_free(q);
	free(k);
	free(p);
	/* An add and a get per key: (adds + gets) per second. */
	return 2.0 * (double)(rounds * depth) / ((double)(t1 - t0) / (double)CK_NS_PER_SEC);
}

static void bench_priority(void)
{
	static const int one[] = {0}, two[] = {0, -100};
	int sixteen[16];
	for (int i = 0; i < 16; i++)
		sixteen[i] = i * 10 - 100;
	static const size_t depths[] = {1000, 50000};
	unsigned long plain_allocs = 0, prio_allocs = 0;
	for (size_t d = 0; d < 2; d++) {
		size_t n = depths[d];
		printf("plain queue, %5zu queued:              %6.2f M adds+gets/s\n", n,
		       prio_rate(n, NULL, 0, d == 0 ? &plain_allocs : NULL) / 1e6);
		printf("priority queue, %5zu queued, 1 prio:   %6.2f M adds+gets/s\n", n,
		       prio_rate(n, one, 1, NULL) / 1e6);
		printf("priority queue, %5zu queued, 2 prios:  %6.2f M adds+gets/s\n", n,
		       prio_rate(n, two, 2, d == 0 ? &prio_allocs : NULL) / 1e6);
		printf("priority queue, %5zu queued, 16 prios: %6.2f M adds+gets/s\n", n,
		       prio_rate(n, sixteen, 16, NULL) / 1e6);
	}
	/* The same for both: only 256 idle items are kept for reuse, so a queue that empties
	 * from 1000 keys allocates most of them again on the next round. One line each, so
	 * that bench_workqueue.sh sets each beside its Go peer's (client-go's plain queue,
	 * controller-runtime's priority queue at 2 priorities). */
	printf("allocations per key, 1000 queued, plain:    %6.3f\n",
	       (double)plain_allocs / 2000000.0);
	printf("allocations per key, 1000 queued, priority: %6.3f\n",
	       (double)prio_allocs / 2000000.0);
}

static bool wanted(int argc, char **argv, const char *part)
{
	if (argc < 2)
		return true;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], part) == 0)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	for (int i = 0; i < NKEYS; i++)
		snprintf(keys[i], sizeof(keys[i]), "default/foo-%d", i);
	printf("pkg/workqueue benchmark (%ld CPUs online)\n", sysconf(_SC_NPROCESSORS_ONLN));
	if (wanted(argc, argv, "single"))
		bench_single();
	if (wanted(argc, argv, "workers")) {
		bench_workers(2);
		bench_workers(8);
	}
	if (wanted(argc, argv, "after"))
		bench_add_after();
	if (wanted(argc, argv, "memory"))
		bench_memory();
	if (wanted(argc, argv, "priority"))
		bench_priority();
	return 0;
}
