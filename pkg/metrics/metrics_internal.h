/*
 * metrics internals shared by the files of pkg/metrics; not part of the public API.
 */
#ifndef CSC_METRICS_INTERNAL_H
#define CSC_METRICS_INTERNAL_H

#include <ckube/metrics.h>

/* Like ck_metrics_registry_add_collector, but takes ud: free_ud(ud) runs at registry free. */
void metrics_registry_add_collector_owned(ck_metrics_registry_t *reg, ck_metrics_collector_fn fn,
                                          void *ud, void (*free_ud)(void *));

#endif
