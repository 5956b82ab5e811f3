/*
 * bench_record: heap bytes the event recorder's correlator holds per entry (prints
 * figures; asserts nothing).
 *
 *   bench_record [foos]      (default 1000)
 *
 * The load is what sample-controller emits while it brings up <foos> Foos: a Normal
 * "Synced" event each time it writes a Foo's status (three times per Foo here: 0/1,
 * then 1/1 replicas available, then once more after a resync found a change -- the
 * same event key each time, with the Foo's resourceVersion moving on), and for every
 * tenth Foo a Warning "ErrResourceExists" naming its Deployment. Events go through a
 * sink that answers OK at once, on a fake clock, so nothing but the correlator's
 * caches stay allocated once the queue is flushed.
 *
 * Measured with glibc's mallinfo2() (in-use bytes, all arenas, malloc's own chunk
 * headers and rounding included, as the daemon pays them) after the recorder was
 * made (its fixed part: the queue and the caches' bucket arrays) and after the
 * load. Run with GLIBC_TUNABLES=glibc.malloc.tcache_count=0 (bench_record.sh does),
 * or chunks parked in the poster thread's tcache count as in use.
 */
#include <ckube/base.h>
#include <ckube/log.h>
#include <ckube/record.h>

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

static ck_record_sink_result_t ok_create(void *ud, const char *ns, const char *body, char **err)
{
	return CK_RECORD_SINK_OK;
}

static ck_record_sink_result_t ok_patch(void *ud, const char *ns, const char *name,
                                        const char *body, char **err)
{
	return CK_RECORD_SINK_OK;
}

static size_t heap_in_use(void)
{
	return mallinfo2().uordblks;
}

int main(int argc, char **argv)
{
	int nfoo = argc > 1 ? atoi(argv[1]) : 1000;
	static const ck_record_sink_t sink = {ok_create, ok_patch, NULL};
	ck_clk_fake_t clk;
	char *err = NULL;

	if (nfoo <= 0) {
		fprintf(stderr, "usage: bench_record [foos]\n");
		return 2;
	}
	ck_clk_fake_init(&clk, 1000 * CK_NS_PER_SEC, 1700000000LL * (int64_t)CK_NS_PER_SEC);
	ck_record_opts_t o = {
	    .component = "sample-controller",
	    .reporting_controller = "samplecontroller.k8s.io/sample-controller",
	    .reporting_instance = "sample-controller-7d9f8b6c5d-x2x7q",
	    .clock = &clk.base,
	    .sink = &sink,
	};

	size_t h0 = heap_in_use();
	ck_record_t *r = ck_record_new(NULL, &o, &err);
	if (r == NULL) {
		fprintf(stderr, "bench_record: %s\n", err);
		return 1;
	}
	size_t h1 = heap_in_use();

	size_t keys = 0;
	for (int pass = 0; pass < 3; pass++) {
		for (int i = 0; i < nfoo; i++) {
			char name[32], uid[40], rv[16];
			snprintf(name, sizeof(name), "foo-%d", i + 1);
			snprintf(uid, sizeof(uid), "3f2b%04x-9c1e-4d7a-8e55-%012x", i & 0xffff,
			         (unsigned)i * 2654435761u);
			snprintf(rv, sizeof(rv), "%d", 1000000 + pass * nfoo + i);
			ck_record_ref_t ref = {
			    "samplecontroller.k8s.io/v1alpha1", "Foo", "bench-1", name, uid, rv};
			ck_record_event_ref(r, &ref, CK_RECORD_NORMAL, "Synced",
			                    "Foo synced successfully");
			if (pass == 0 && i % 10 == 0) {
				ck_record_event_ref(r, &ref, CK_RECORD_WARNING, "ErrResourceExists",
				                    "Resource \"%s\" already exists and is not "
				                    "managed by Foo",
				                    name);
			}
			if (pass == 0)
				keys += 1 + (i % 10 == 0);
			/* The queue holds 1000: keep it from overflowing. */
			if (i % 500 == 499 && ck_record_flush(r, 60000) != 0) {
				fprintf(stderr, "bench_record: flush timed out\n");
				return 1;
			}
		}
		if (ck_record_flush(r, 60000) != 0) {
			fprintf(stderr, "bench_record: flush timed out\n");
			return 1;
		}
		ck_clk_fake_advance(&clk, 30 * CK_NS_PER_SEC);
	}
	size_t h2 = heap_in_use();

	ck_record_stats_t st;
	ck_record_stats(r, &st);
	/* Each distinct event holds three cache entries: its dedup record, its
	 * aggregation record and (per object and type) its spam bucket. */
	double per_event = (double)(h2 - h1) / (double)keys;
	printf("record: %d Foos, %zu distinct events (%llu created, %llu patched, %llu dropped)\n",
	       nfoo, keys, (unsigned long long)st.posted, (unsigned long long)st.patched,
	       (unsigned long long)(st.dropped_spam + st.failed));
	printf("record: fixed (queue, bucket arrays): %zu B\n", h1 - h0);
	printf("record: correlator caches: %zu B, %.0f B per distinct event, %.0f B per cache "
	       "entry (3 per event), %.0f B per Foo\n",
	       h2 - h1, per_event, per_event / 3, (double)(h2 - h1) / nfoo);
	ck_record_free(r);
	return 0;
}
