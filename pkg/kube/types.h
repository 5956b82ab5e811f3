/*
 * types: descriptors of the built-in kinds this project uses, with typed
 * accessors over their kept fields.
 *
 *   ktype_deployment  apps/v1 Deployment
 *   ktype_event       core/v1 Event (what an event recorder reads back)
 *   ktype_lease       coordination.k8s.io/v1 Lease (leader election)
 *
 * Accessors borrow the object and return false / NULL when the field is absent,
 * null, of another JSON type, or out of range, or when the object is of another
 * kind. Returned strings are borrowed from the object (valid while you hold a
 * reference).
 */
#ifndef CSC_KUBE_TYPES_H
#define CSC_KUBE_TYPES_H

#include "pkg/kube/obj.h"

#include <stdbool.h>
#include <stdint.h>

extern const ktype_t ktype_deployment, ktype_event, ktype_lease;

/* Indexes into ktype_deployment.fields (and kobj_t.fields). */
enum {
	DEPLOYMENT_SPEC_REPLICAS,
	DEPLOYMENT_STATUS_AVAILABLE_REPLICAS,
	DEPLOYMENT_STATUS_READY_REPLICAS,
	DEPLOYMENT_STATUS_REPLICAS,
	DEPLOYMENT_STATUS_UPDATED_REPLICAS,
	DEPLOYMENT_STATUS_OBSERVED_GENERATION,
	/* spec.template.spec.containers as compact JSON: lets a controller compare the
	 * pod template it wants with the one it has. About 200 bytes per object for a
	 * one-container template (the largest kept field). */
	DEPLOYMENT_SPEC_TEMPLATE_CONTAINERS,
	DEPLOYMENT_NFIELDS,
};

bool deployment_spec_replicas(const kobj_t *d, int32_t *out);
bool deployment_status_available_replicas(const kobj_t *d, int32_t *out);
bool deployment_status_ready_replicas(const kobj_t *d, int32_t *out);
bool deployment_status_replicas(const kobj_t *d, int32_t *out);
bool deployment_status_updated_replicas(const kobj_t *d, int32_t *out);
bool deployment_status_observed_generation(const kobj_t *d, int64_t *out);
/* Compact JSON array text, or NULL (absent or null). */
const char *deployment_template_containers_json(const kobj_t *d);

/* Indexes into ktype_event.fields. */
enum {
	EVENT_COUNT,
	EVENT_FIRST_TIMESTAMP,
	EVENT_LAST_TIMESTAMP,
	EVENT_MESSAGE,
	EVENT_REASON,
	EVENT_TYPE,
	EVENT_INVOLVED_OBJECT, /* compact JSON object */
	EVENT_SOURCE,          /* compact JSON object {component, host} */
	EVENT_NFIELDS,
};

bool event_count(const kobj_t *e, int32_t *out);
const char *event_first_timestamp(const kobj_t *e);
const char *event_last_timestamp(const kobj_t *e);
const char *event_message(const kobj_t *e);
const char *event_reason(const kobj_t *e);
/* "Normal" / "Warning" */
const char *event_type(const kobj_t *e);
const char *event_involved_object_json(const kobj_t *e);
const char *event_source_json(const kobj_t *e);

/* Indexes into ktype_lease.fields. */
enum {
	LEASE_SPEC_HOLDER_IDENTITY,
	LEASE_SPEC_LEASE_DURATION_SECONDS,
	LEASE_SPEC_ACQUIRE_TIME,
	LEASE_SPEC_RENEW_TIME,
	LEASE_SPEC_LEASE_TRANSITIONS,
	LEASE_NFIELDS,
};

const char *lease_holder_identity(const kobj_t *l);
bool lease_duration_seconds(const kobj_t *l, int32_t *out);
/* MicroTime text ("2024-05-02T10:11:12.123456Z"), or NULL. */
const char *lease_acquire_time(const kobj_t *l);
const char *lease_renew_time(const kobj_t *l);
/* The same, parsed to wall-clock nanoseconds; false if absent or unparsable. */
bool lease_acquire_time_ns(const kobj_t *l, int64_t *wall_ns);
bool lease_renew_time_ns(const kobj_t *l, int64_t *wall_ns);
bool lease_transitions(const kobj_t *l, int32_t *out);

#endif
