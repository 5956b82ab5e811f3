/*
 * types: the built-in kinds' descriptors and accessors.
 *
 * Design note. Each kind keeps only what its users read, because every cached
 * object pays for every kept field. The field order below is the order of the
 * index enums in types.h; the static assertions keep the two in step.
 */
#include <ckube/types.h>

#include <ckube/kinds.h>

#include <ckube/base.h>

#include <stddef.h>
#include <string.h>

static const char *const deployment_fields[] = {
    [CK_DEPLOYMENT_SPEC_REPLICAS] = "spec.replicas",
    [CK_DEPLOYMENT_STATUS_AVAILABLE_REPLICAS] = "status.availableReplicas",
    [CK_DEPLOYMENT_STATUS_READY_REPLICAS] = "status.readyReplicas",
    [CK_DEPLOYMENT_STATUS_REPLICAS] = "status.replicas",
    [CK_DEPLOYMENT_STATUS_UPDATED_REPLICAS] = "status.updatedReplicas",
    [CK_DEPLOYMENT_STATUS_OBSERVED_GENERATION] = "status.observedGeneration",
    [CK_DEPLOYMENT_SPEC_TEMPLATE_CONTAINERS] = "spec.template.spec.containers",
};
_Static_assert(CK_ARRAY_LEN(deployment_fields) == CK_DEPLOYMENT_WITH_TEMPLATE_NFIELDS,
               "deployment fields");

/* Both share one field list: the plain descriptor keeps its first
 * CK_DEPLOYMENT_NFIELDS entries, so its accessors read either kind of object. */
const ck_type_t ck_type_deployment = {
    .group = "apps",
    .version = "v1",
    .kind = "Deployment",
    .resource = "deployments",
    .namespaced = true,
    .fields = deployment_fields,
    .nfields = CK_DEPLOYMENT_NFIELDS,
    .keep_annotations = false,
};

const ck_type_t ck_type_deployment_with_template = {
    .group = "apps",
    .version = "v1",
    .kind = "Deployment",
    .resource = "deployments",
    .namespaced = true,
    .fields = deployment_fields,
    .nfields = CK_DEPLOYMENT_WITH_TEMPLATE_NFIELDS,
    .keep_annotations = false,
};

static const char *const event_fields[] = {
    [CK_EVENT_COUNT] = "count",
    [CK_EVENT_FIRST_TIMESTAMP] = "firstTimestamp",
    [CK_EVENT_LAST_TIMESTAMP] = "lastTimestamp",
    [CK_EVENT_MESSAGE] = "message",
    [CK_EVENT_REASON] = "reason",
    [CK_EVENT_TYPE] = "type",
    [CK_EVENT_INVOLVED_OBJECT] = "involvedObject",
    [CK_EVENT_SOURCE] = "source",
};
_Static_assert(CK_ARRAY_LEN(event_fields) == CK_EVENT_NFIELDS, "event fields");

const ck_type_t ck_type_event = {
    .group = "",
    .version = "v1",
    .kind = "Event",
    .resource = "events",
    .namespaced = true,
    .fields = event_fields,
    .nfields = CK_EVENT_NFIELDS,
    .keep_annotations = false,
};

static const char *const lease_fields[] = {
    [CK_LEASE_SPEC_HOLDER_IDENTITY] = "spec.holderIdentity",
    [CK_LEASE_SPEC_LEASE_DURATION_SECONDS] = "spec.leaseDurationSeconds",
    [CK_LEASE_SPEC_ACQUIRE_TIME] = "spec.acquireTime",
    [CK_LEASE_SPEC_RENEW_TIME] = "spec.renewTime",
    [CK_LEASE_SPEC_LEASE_TRANSITIONS] = "spec.leaseTransitions",
};
_Static_assert(CK_ARRAY_LEN(lease_fields) == CK_LEASE_NFIELDS, "lease fields");

const ck_type_t ck_type_lease = {
    .group = "coordination.k8s.io",
    .version = "v1",
    .kind = "Lease",
    .resource = "leases",
    .namespaced = true,
    .fields = lease_fields,
    .nfields = CK_LEASE_NFIELDS,
    .keep_annotations = false,
};

static bool str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

bool ck_type_equal(const ck_type_t *a, const ck_type_t *b)
{
	if (a == b)
		return true;
	if (a == NULL || b == NULL)
		return false;
	if (!str_eq(a->group, b->group) || !str_eq(a->version, b->version) ||
	    !str_eq(a->resource, b->resource) || !str_eq(a->kind, b->kind) ||
	    a->namespaced != b->namespaced || a->keep_annotations != b->keep_annotations ||
	    a->nfields != b->nfields)
		return false;
	for (size_t i = 0; i < a->nfields; i++)
		if (!str_eq(a->fields[i], b->fields[i]))
			return false;
	return true;
}

/* The accessors are ck_kind_* (kinds.c) with the kind and index filled in. */

bool ck_deployment_spec_replicas(const ck_obj_t *d, int32_t *out)
{
	return ck_kind_i32(d, &ck_type_deployment, CK_DEPLOYMENT_SPEC_REPLICAS, out);
}

bool ck_deployment_status_available_replicas(const ck_obj_t *d, int32_t *out)
{
	return ck_kind_i32(d, &ck_type_deployment, CK_DEPLOYMENT_STATUS_AVAILABLE_REPLICAS, out);
}

bool ck_deployment_status_ready_replicas(const ck_obj_t *d, int32_t *out)
{
	return ck_kind_i32(d, &ck_type_deployment, CK_DEPLOYMENT_STATUS_READY_REPLICAS, out);
}

bool ck_deployment_status_replicas(const ck_obj_t *d, int32_t *out)
{
	return ck_kind_i32(d, &ck_type_deployment, CK_DEPLOYMENT_STATUS_REPLICAS, out);
}

bool ck_deployment_status_updated_replicas(const ck_obj_t *d, int32_t *out)
{
	return ck_kind_i32(d, &ck_type_deployment, CK_DEPLOYMENT_STATUS_UPDATED_REPLICAS, out);
}

bool ck_deployment_status_observed_generation(const ck_obj_t *d, int64_t *out)
{
	return ck_kind_i64(d, &ck_type_deployment, CK_DEPLOYMENT_STATUS_OBSERVED_GENERATION, out);
}

const char *ck_deployment_template_containers_json(const ck_obj_t *d)
{
	return ck_kind_json(d, &ck_type_deployment_with_template,
	                    CK_DEPLOYMENT_SPEC_TEMPLATE_CONTAINERS);
}

bool ck_event_count(const ck_obj_t *e, int32_t *out)
{
	return ck_kind_i32(e, &ck_type_event, CK_EVENT_COUNT, out);
}

const char *ck_event_first_timestamp(const ck_obj_t *e)
{
	return ck_kind_str(e, &ck_type_event, CK_EVENT_FIRST_TIMESTAMP);
}

const char *ck_event_last_timestamp(const ck_obj_t *e)
{
	return ck_kind_str(e, &ck_type_event, CK_EVENT_LAST_TIMESTAMP);
}

const char *ck_event_message(const ck_obj_t *e)
{
	return ck_kind_str(e, &ck_type_event, CK_EVENT_MESSAGE);
}

const char *ck_event_reason(const ck_obj_t *e)
{
	return ck_kind_str(e, &ck_type_event, CK_EVENT_REASON);
}

const char *ck_event_type(const ck_obj_t *e)
{
	return ck_kind_str(e, &ck_type_event, CK_EVENT_TYPE);
}

const char *ck_event_involved_object_json(const ck_obj_t *e)
{
	return ck_kind_json(e, &ck_type_event, CK_EVENT_INVOLVED_OBJECT);
}

const char *ck_event_source_json(const ck_obj_t *e)
{
	return ck_kind_json(e, &ck_type_event, CK_EVENT_SOURCE);
}

const char *ck_lease_holder_identity(const ck_obj_t *l)
{
	return ck_kind_str(l, &ck_type_lease, CK_LEASE_SPEC_HOLDER_IDENTITY);
}

bool ck_lease_duration_seconds(const ck_obj_t *l, int32_t *out)
{
	return ck_kind_i32(l, &ck_type_lease, CK_LEASE_SPEC_LEASE_DURATION_SECONDS, out);
}

const char *ck_lease_acquire_time(const ck_obj_t *l)
{
	return ck_kind_str(l, &ck_type_lease, CK_LEASE_SPEC_ACQUIRE_TIME);
}

const char *ck_lease_renew_time(const ck_obj_t *l)
{
	return ck_kind_str(l, &ck_type_lease, CK_LEASE_SPEC_RENEW_TIME);
}

static bool parse_time(const char *s, int64_t *wall_ns)
{
	return s != NULL && ck_time_parse_rfc3339(s, wall_ns) == 0;
}

bool ck_lease_acquire_time_ns(const ck_obj_t *l, int64_t *wall_ns)
{
	return parse_time(ck_lease_acquire_time(l), wall_ns);
}

bool ck_lease_renew_time_ns(const ck_obj_t *l, int64_t *wall_ns)
{
	return parse_time(ck_lease_renew_time(l), wall_ns);
}

bool ck_lease_transitions(const ck_obj_t *l, int32_t *out)
{
	return ck_kind_i32(l, &ck_type_lease, CK_LEASE_SPEC_LEASE_TRANSITIONS, out);
}
