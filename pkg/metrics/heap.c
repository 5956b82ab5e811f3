/*
 * The heap collector: what malloc holds, as Go's go_memstats_heap_* say it for a Go
 * program. RSS alone cannot tell a leak from an allocator that keeps freed pages
 * (glibc returns little of a fragmented heap), so a memory figure that falls when
 * the program frees is needed to judge growth (make chaos judges on it).
 *
 * glibc only (mallinfo2, 2.33 and later); elsewhere the collector writes nothing.
 * Under a sanitizer, whose allocator bypasses glibc's, the figures are glibc's own
 * few arenas, not the program's heap.
 */
#include <stdlib.h>

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#include <malloc.h>
#define HAVE_MALLINFO2 1
#endif

#include "pkg/metrics/metrics_internal.h"
#include <ckube/metrics.h>

static void heap_collect(void *ud, ck_sbuf_t *out)
{
	(void)ud;
#ifdef HAVE_MALLINFO2
	/* Walks every arena under its lock: cheap next to a scrape's other work. */
	struct mallinfo2 mi = mallinfo2();
	ck_metrics_write_header(
	    out, "process_malloc_free_bytes",
	    "Bytes malloc holds free in its arenas (not returned to the system).",
	    CK_METRICS_GAUGE);
	ck_metrics_write_sample(out, "process_malloc_free_bytes", NULL, 0, (double)mi.fordblks);
	ck_metrics_write_header(out, "process_malloc_inuse_bytes",
	                        "Bytes allocated with malloc and not yet freed (arenas and mmap).",
	                        CK_METRICS_GAUGE);
	ck_metrics_write_sample(out, "process_malloc_inuse_bytes", NULL, 0,
	                        (double)mi.uordblks + (double)mi.hblkhd);
#else
	(void)out;
#endif
}

void ck_metrics_registry_add_heap_collector(ck_metrics_registry_t *reg)
{
	metrics_registry_add_collector_owned(reg, heap_collect, NULL, NULL);
}
