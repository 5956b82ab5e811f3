/*
 * types: descriptors of the built-in kinds this project uses, with typed
 * accessors over their kept fields.
 *
 *   ck_type_deployment  apps/v1 Deployment (replicas and status)
 *   ck_type_deployment_with_template  the same, and its pod template's containers
 *   ck_type_event       core/v1 Event (what an event recorder reads back)
 *   ck_type_lease       coordination.k8s.io/v1 Lease (leader election)
 *
 * Accessors borrow the object and return false / NULL when the field is absent,
 * null, of another JSON type, or out of range, or when the object is of another
 * kind (one whose descriptor is not ck_type_equal to the accessor's, or an
 * extension of it: one that keeps the same fields first and more after them, as
 * ck_type_deployment_with_template extends ck_type_deployment). Returned
 * strings are borrowed from the object (valid while you hold a reference).
 *
 * More kinds (Pod, Service, ConfigMap, ...) and how to describe your own: kinds.h.
 */
#ifndef CKUBE_KUBE_TYPES_H
#define CKUBE_KUBE_TYPES_H

#include <ckube/export.h>

#include <ckube/obj.h>

#include <stdbool.h>
#include <stdint.h>

CKUBE_API extern const ck_type_t ck_type_deployment, ck_type_deployment_with_template,
    ck_type_event, ck_type_lease;

/*
 * true when a and b (borrowed) describe the same thing, whatever their
 * addresses: the same group, version, resource, kind and scope, the same kept
 * fields in the same order, and the same keep_annotations. Objects decoded with
 * one then read the same through the other's field indexes, which is why the
 * accessors here and in kinds.h accept an object of any equal descriptor, and why
 * a cache factory may share one informer between them. NULL equals only NULL.
 * Any thread.
 */
CKUBE_API bool ck_type_equal(const ck_type_t *a, const ck_type_t *b);

/* Indexes into ck_type_deployment.fields (and ck_obj_t.fields). */
enum {
	CK_DEPLOYMENT_SPEC_REPLICAS,
	CK_DEPLOYMENT_STATUS_AVAILABLE_REPLICAS,
	CK_DEPLOYMENT_STATUS_READY_REPLICAS,
	CK_DEPLOYMENT_STATUS_REPLICAS,
	CK_DEPLOYMENT_STATUS_UPDATED_REPLICAS,
	CK_DEPLOYMENT_STATUS_OBSERVED_GENERATION,
	CK_DEPLOYMENT_NFIELDS,
	/* Kept only by ck_type_deployment_with_template: spec.template.spec.containers
	 * as compact JSON, which lets a controller compare the pod template it wants
	 * with the one it has. About 180 bytes per object for a one-container template,
	 * more than a quarter of a cached Deployment, so the plain descriptor (which
	 * the sample-controller needs) does not keep it. */
	CK_DEPLOYMENT_SPEC_TEMPLATE_CONTAINERS = CK_DEPLOYMENT_NFIELDS,
	CK_DEPLOYMENT_WITH_TEMPLATE_NFIELDS,
};

CKUBE_API bool ck_deployment_spec_replicas(const ck_obj_t *d, int32_t *out);
CKUBE_API bool ck_deployment_status_available_replicas(const ck_obj_t *d, int32_t *out);
CKUBE_API bool ck_deployment_status_ready_replicas(const ck_obj_t *d, int32_t *out);
CKUBE_API bool ck_deployment_status_replicas(const ck_obj_t *d, int32_t *out);
CKUBE_API bool ck_deployment_status_updated_replicas(const ck_obj_t *d, int32_t *out);
CKUBE_API bool ck_deployment_status_observed_generation(const ck_obj_t *d, int64_t *out);
/* Compact JSON array text, or NULL (absent or null, or d was decoded with
 * ck_type_deployment, which does not keep it). */
CKUBE_API const char *ck_deployment_template_containers_json(const ck_obj_t *d);

/* Indexes into ck_type_event.fields. */
enum {
	CK_EVENT_COUNT,
	CK_EVENT_FIRST_TIMESTAMP,
	CK_EVENT_LAST_TIMESTAMP,
	CK_EVENT_MESSAGE,
	CK_EVENT_REASON,
	CK_EVENT_TYPE,
	CK_EVENT_INVOLVED_OBJECT, /* compact JSON object */
	CK_EVENT_SOURCE,          /* compact JSON object {component, host} */
	CK_EVENT_NFIELDS,
};

CKUBE_API bool ck_event_count(const ck_obj_t *e, int32_t *out);
CKUBE_API const char *ck_event_first_timestamp(const ck_obj_t *e);
CKUBE_API const char *ck_event_last_timestamp(const ck_obj_t *e);
CKUBE_API const char *ck_event_message(const ck_obj_t *e);
CKUBE_API const char *ck_event_reason(const ck_obj_t *e);
/* "Normal" / "Warning" */
CKUBE_API const char *ck_event_type(const ck_obj_t *e);
CKUBE_API const char *ck_event_involved_object_json(const ck_obj_t *e);
CKUBE_API const char *ck_event_source_json(const ck_obj_t *e);

/* Indexes into ck_type_lease.fields. */
enum {
	CK_LEASE_SPEC_HOLDER_IDENTITY,
	CK_LEASE_SPEC_LEASE_DURATION_SECONDS,
	CK_LEASE_SPEC_ACQUIRE_TIME,
	CK_LEASE_SPEC_RENEW_TIME,
	CK_LEASE_SPEC_LEASE_TRANSITIONS,
	CK_LEASE_NFIELDS,
};

CKUBE_API const char *ck_lease_holder_identity(const ck_obj_t *l);
CKUBE_API bool ck_lease_duration_seconds(const ck_obj_t *l, int32_t *out);
/* MicroTime text ("2024-05-02T10:11:12.123456Z"), or NULL. */
CKUBE_API const char *ck_lease_acquire_time(const ck_obj_t *l);
CKUBE_API const char *ck_lease_renew_time(const ck_obj_t *l);
/* The same, parsed to wall-clock nanoseconds; false if absent or unparsable. */
CKUBE_API bool ck_lease_acquire_time_ns(const ck_obj_t *l, int64_t *wall_ns);
CKUBE_API bool ck_lease_renew_time_ns(const ck_obj_t *l, int64_t *wall_ns);
CKUBE_API bool ck_lease_transitions(const ck_obj_t *l, int32_t *out);

#endif
