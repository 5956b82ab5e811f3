/*
 * log_internal: what the library's own modules share with pkg/log, not part of the
 * public API (log.h).
 *
 * The key trace's switch, read inline: in the hot paths (a workqueue add, a delta
 * popped) a step then costs one relaxed load and no call when tracing is off,
 * where ck_log_trace_on() costs a call (measured: 8 ns more per add+get+forget+done
 * of a workqueue, about 10%, with the call; nothing measurable inline). Programs
 * use CK_LOG_TRACE, which calls ck_log_trace_on().
 */
#ifndef CKUBE_LOG_INTERNAL_H
#define CKUBE_LOG_INTERNAL_H

#include <ckube/log.h>

#include <stdatomic.h>
#include <stdbool.h>

struct log_trace_key;
/* The traced key, NULL when off (pkg/log/log.c). Hidden: never exported. */
extern struct log_trace_key *_Atomic log_trace_cur_ __attribute__((visibility("hidden")));

/* true while a key is traced: ck_log_trace_on(), inline. */
static inline bool log_trace_on(void)
{
	return atomic_load_explicit(&log_trace_cur_, memory_order_relaxed) != NULL;
}

/* CK_LOG_TRACE and CK_LOG_TRACE_PARTS with the inline check. */
#define LOG_TRACE(key, step, ...)                                                                  \
	do {                                                                                       \
		if (log_trace_on() && ck_log_trace_match(key))                                     \
			ck_log_trace_emit(                                                         \
			    LOG_FILE_, __LINE__, (step),                                           \
			    (const ck_log_kv_t[]){CK_LOG_KV_END_, ##__VA_ARGS__, CK_LOG_KV_END_} + \
			        1);                                                                \
	} while (0)
#define LOG_TRACE_PARTS(ns, name, step, ...)                                                       \
	do {                                                                                       \
		if (log_trace_on() && ck_log_trace_match_parts((ns), (name)))                      \
			ck_log_trace_emit(                                                         \
			    LOG_FILE_, __LINE__, (step),                                           \
			    (const ck_log_kv_t[]){CK_LOG_KV_END_, ##__VA_ARGS__, CK_LOG_KV_END_} + \
			        1);                                                                \
	} while (0)

#endif
