/*
 * foo_sync: what sample-controller writes for a Foo -- the Deployment it asks for
 * and the status that reports it -- and the checks the CRD's schema cannot state.
 * The Foo kind itself (descriptor, accessors, structs, validation) is generated
 * from deploy/crd.yaml into api/samplecontroller/v1alpha1/foo.h.
 */
#ifndef CSC_FOO_SYNC_H
#define CSC_FOO_SYNC_H

#include "api/samplecontroller/v1alpha1/foo.h"

#include <ckube/base.h>
#include <ckube/obj.h>
#include <ckube/patch.h>

#include <stdbool.h>
#include <stdint.h>

/*
 * The longest condition reason and message, in bytes, that we write and read back.
 * What we write must read back whole, or the desired status would never compare
 * equal to the server's and every sync would write again (an endless write loop).
 * So longer text is cut, at a UTF-8 character boundary, identically when written,
 * read back and compared.
 */
#define FOO_CONDITION_REASON_MAX  127
#define FOO_CONDITION_MESSAGE_MAX 511

/* One condition as read back from status.conditions. */
typedef struct foo_condition {
	char status[16]; /* "True" / "False" / "Unknown" / "" when absent */
	char reason[FOO_CONDITION_REASON_MAX + 1];
	char message[FOO_CONDITION_MESSAGE_MAX + 1];
	char last_transition_time[40];
	int64_t observed_generation;
} foo_condition_t;

/*
 * Finds the condition of the given type; returns false if absent or unparsable.
 * Longer reason/message are cut as FOO_CONDITION_*_MAX says.
 */
bool foo_condition_get(const ck_obj_t *foo, const char *type, foo_condition_t *out);

/*
 * Checks what of a Foo's metadata its Deployment carries: the name is the value of
 * the Deployment's "controller" label, so at most 63 characters (a Foo's own name
 * may be a 253-character subdomain; deploy/crd.yaml refuses longer ones with a CEL
 * rule, which the generated validation does not check, and a CRD without it does
 * not). Returns 0, or -1 with a new message in *err.
 */
#define FOO_NAME_MAX 63
int foo_validate_name(const ck_obj_t *foo, char **err);

/*
 * The Deployment this Foo asks for (upstream's newDeployment), as a body for
 * ck_client_create_body_sync / ck_client_update_body_sync: name
 * spec.deploymentName in the Foo's namespace, labels and selector {app: nginx,
 * controller: <foo name>}, one nginx:latest container, replicas from spec
 * (omitted when unset), controller ownerReference to the Foo (its only one).
 * Borrows foo (as read from the server: it needs its uid). Returns a new builder,
 * free with ck_patch_free(), or NULL with a new message in *err.
 */
ck_patch_t *foo_new_deployment(const ck_obj_t *foo, char **err);

/* The status to write, compared with the current one to skip no-op writes. */
typedef struct foo_desired_status {
	int64_t available_replicas;
	int64_t observed_generation;
	const char *ready_status;  /* "True" / "False" */
	const char *ready_reason;  /* cut to FOO_CONDITION_REASON_MAX bytes */
	const char *ready_message; /* cut to FOO_CONDITION_MESSAGE_MAX bytes */
} foo_desired_status_t;

/*
 * true if foo's current status already says what st says (reason and message
 * compared as written, i.e. cut). Borrows both. Conditions other than Ready are
 * not ours and do not count.
 */
bool foo_status_equal(const ck_obj_t *foo, const foo_desired_status_t *st);
/*
 * Appends the body of PUT .../foos/<name>/status: the Foo's identity with its
 * resourceVersion (optimistic concurrency: a stale cache yields 409) and the new
 * status. lastTransitionTime is kept from the current condition when its status
 * did not change, else now_wall_ns. The PUT replaces the whole status, so the
 * conditions other writers set are re-emitted unchanged, in their order; only
 * Ready is replaced (appended when absent). Borrows foo and st.
 */
void foo_status_update_json(const ck_obj_t *foo, const foo_desired_status_t *st,
                            int64_t now_wall_ns, ck_sbuf_t *out);

#endif
