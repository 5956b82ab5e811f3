/*
 * conditions: status.conditions kept right, as apimachinery's
 * meta.SetStatusCondition / FindStatusCondition / RemoveStatusCondition /
 * IsStatusConditionTrue do it for []metav1.Condition.
 *
 * The conditions come in as a JSON node (the array of status.conditions as
 * read, e.g. from a kept field with ck_json_parse_field_path(obj,
 * "status.conditions", ...); NULL or null when there are none) and go out as a
 * new array's JSON text, to be put into a status patch with
 * ck_patch_set_conditions and sent to the status subresource
 * (ck_client_status_merge_patch_sync: the list is replaced whole).
 *
 * Setting a condition of a type not present appends it with lastTransitionTime
 * now; for one present, lastTransitionTime changes only when status changes
 * (it is the time of the transition, not of the last write), and reason,
 * message and observedGeneration are replaced. The other conditions, and
 * members this header does not know, stay as they were. "now" is the clock's
 * wall time (ck_clk_t, NULL for the real one) as RFC 3339 in UTC to the second,
 * the form the API server stores ("2024-05-01T10:00:00Z").
 */
#ifndef CKUBE_CONDITIONS_H
#define CKUBE_CONDITIONS_H

#include <ckube/export.h>

#include <ckube/base.h>
#include <ckube/json.h>
#include <ckube/patch.h>

#include <stdbool.h>
#include <stdint.h>

typedef struct ck_condition {
	const char *type;   /* required, e.g. "Ready" */
	const char *status; /* required: "True", "False" or "Unknown" */
	const char *reason; /* CamelCase; NULL: "" */
	const char *message;
	int64_t observed_generation; /* the generation this is about; 0: left out */
	/* Set by ck_conditions_find; ignored by ck_conditions_set (NULL: now). */
	const char *last_transition_time;
} ck_condition_t;

/*
 * Appends to out the conditions array with cond set (see the top of this file).
 * Borrows all; conditions may be NULL or null (none). *changed (may be NULL) is
 * true when anything but other conditions' order differs from the input.
 * Returns 0, or -1 with *err (and nothing appended) when cond lacks a type, has
 * another status than True/False/Unknown, or conditions is not an array.
 */
CKUBE_API int ck_conditions_set(const ck_json_t *conditions, const ck_condition_t *cond,
                                const ck_clk_t *clk, ck_sbuf_t *out, bool *changed, char **err);
/* Appends the array without the conditions of type type; *changed as above.
 * Returns 0, or -1 with *err when conditions is not an array. */
CKUBE_API int ck_conditions_remove(const ck_json_t *conditions, const char *type, ck_sbuf_t *out,
                                   bool *changed, char **err);
/* Fills *out with the condition of type type (strings borrowed from the document;
 * absent members NULL, observed_generation 0) and returns true, or returns false. */
CKUBE_API bool ck_conditions_find(const ck_json_t *conditions, const char *type,
                                  ck_condition_t *out);
/* Whether the condition of type type exists with status "True" / "False". */
CKUBE_API bool ck_conditions_is_true(const ck_json_t *conditions, const char *type);
CKUBE_API bool ck_conditions_is_false(const ck_json_t *conditions, const char *type);
/* Sets status.conditions of p to the array text json (len bytes), as
 * ck_patch_set_raw. */
CKUBE_API int ck_patch_set_conditions(ck_patch_t *p, const char *json, size_t len);

#endif
