/*
 * workqueue_depth by priority for priority queues (see wq_internal.h for the rules).
 */
#include "pkg/workqueue/wq_internal.h"

void wq_prio_depth_add(wq_prio_depth_t *d, int prio, int64_t delta)
{
	if (d->exceeded) {
		d->rest += delta;
		return;
	}
	if (d->n > 0 && d->prio[d->last] == prio) {
		d->depth[d->last] += delta;
		return;
	}
	for (size_t i = 0; i < d->n; i++) {
		if (d->prio[i] == prio) {
			d->last = i;
			d->depth[i] += delta;
			return;
		}
	}
	if (d->n == WQ_PRIO_LABELS_MAX) {
		/* One priority too many: from now on one series, holding the whole depth. */
		d->exceeded = 1;
		d->rest = delta;
		for (size_t i = 0; i < d->n; i++)
			d->rest += d->depth[i];
		d->n = 0;
		return;
	}
	d->last = d->n++;
	d->prio[d->last] = prio;
	d->depth[d->last] = delta;
}
