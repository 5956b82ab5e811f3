/*
 * types: the built-in kinds' descriptors and accessors.
 *
 * Design note. Each kind keeps only what its users read, because every cached
 * object pays for every kept field. The field order below is the order of the
 * index enums in types.h; the static assertions keep the two in step.
 */
#include "pkg/kube/types.h"

#include "pkg/base/base.h"

#include <stddef.h>

static const char *const deployment_fields[] = {
    [DEPLOYMENT_SPEC_REPLICAS] = "spec.replicas",
    [DEPLOYMENT_STATUS_AVAILABLE_REPLICAS] = "status.availableReplicas",
    [DEPLOYMENT_STATUS_READY_REPLICAS] = "status.readyReplicas",
    [DEPLOYMENT_STATUS_REPLICAS] = "status.replicas",
    [DEPLOYMENT_STATUS_UPDATED_REPLICAS] = "status.updatedReplicas",
    [DEPLOYMENT_STATUS_OBSERVED_GENERATION] = "status.observedGeneration",
    [DEPLOYMENT_SPEC_TEMPLATE_CONTAINERS] = "spec.template.spec.containers",
};
_Static_assert(CSC_ARRAY_LEN(deployment_fields) == DEPLOYMENT_NFIELDS, "deployment fields");

const ktype_t ktype_deployment = {
    .group = "apps",
    .version = "v1",
    .kind = "Deployment",
    .resource = "deployments",
    .namespaced = true,
    .fields = deployment_fields,
    .nfields = DEPLOYMENT_NFIELDS,
    .keep_annotations = false,
};

static const char *const event_fields[] = {
    [EVENT_COUNT] = "count",
    [EVENT_FIRST_TIMESTAMP] = "firstTimestamp",
    [EVENT_LAST_TIMESTAMP] = "lastTimestamp",
    [EVENT_MESSAGE] = "message",
    [EVENT_REASON] = "reason",
    [EVENT_TYPE] = "type",
    [EVENT_INVOLVED_OBJECT] = "involvedObject",
    [EVENT_SOURCE] = "source",
};
_Static_assert(CSC_ARRAY_LEN(event_fields) == EVENT_NFIELDS, "event fields");

const ktype_t ktype_event = {
    .group = "",
    .version = "v1",
    .kind = "Event",
    .resource = "events",
    .namespaced = true,
    .fields = event_fields,
    .nfields = EVENT_NFIELDS,
    .keep_annotations = false,
};

static const char *const lease_fields[] = {
    [LEASE_SPEC_HOLDER_IDENTITY] = "spec.holderIdentity",
    [LEASE_SPEC_LEASE_DURATION_SECONDS] = "spec.leaseDurationSeconds",
    [LEASE_SPEC_ACQUIRE_TIME] = "spec.acquireTime",
    [LEASE_SPEC_RENEW_TIME] = "spec.renewTime",
    [LEASE_SPEC_LEASE_TRANSITIONS] = "spec.leaseTransitions",
};
_Static_assert(CSC_ARRAY_LEN(lease_fields) == LEASE_NFIELDS, "lease fields");

const ktype_t ktype_lease = {
    .group = "coordination.k8s.io",
    .version = "v1",
    .kind = "Lease",
    .resource = "leases",
    .namespaced = true,
    .fields = lease_fields,
    .nfields = LEASE_NFIELDS,
    .keep_annotations = false,
};

/* The field, or NULL when obj is not of kind t. */
static const kval_t *field_of(const kobj_t *obj, const ktype_t *t, size_t i)
{
	if (obj == NULL || obj->type != t)
		return NULL;
	return kobj_field(obj, i);
}

static bool get_i64(const kobj_t *obj, const ktype_t *t, size_t i, int64_t *out)
{
	const kval_t *v = field_of(obj, t, i);
	if (v == NULL || v->type != KVAL_INT)
		return false;
	*out = v->u.i;
	return true;
}

static bool get_i32(const kobj_t *obj, const ktype_t *t, size_t i, int32_t *out)
{
	int64_t v;
	if (!get_i64(obj, t, i, &v) || v < INT32_MIN || v > INT32_MAX)
		return false;
	*out = (int32_t)v;
	return true;
}

static const char *get_str(const kobj_t *obj, const ktype_t *t, size_t i, kval_type_t type)
{
	const kval_t *v = field_of(obj, t, i);
	if (v == NULL || v->type != type)
		return NULL;
	return v->u.s;
}

bool deployment_spec_replicas(const kobj_t *d, int32_t *out)
{
	return get_i32(d, &ktype_deployment, DEPLOYMENT_SPEC_REPLICAS, out);
}

bool deployment_status_available_replicas(const kobj_t *d, int32_t *out)
{
	return get_i32(d, &ktype_deployment, DEPLOYMENT_STATUS_AVAILABLE_REPLICAS, out);
}

bool deployment_status_ready_replicas(const kobj_t *d, int32_t *out)
{
	return get_i32(d, &ktype_deployment, DEPLOYMENT_STATUS_READY_REPLICAS, out);
}

bool deployment_status_replicas(const kobj_t *d, int32_t *out)
{
	return get_i32(d, &ktype_deployment, DEPLOYMENT_STATUS_REPLICAS, out);
}

bool deployment_status_updated_replicas(const kobj_t *d, int32_t *out)
{
	return get_i32(d, &ktype_deployment, DEPLOYMENT_STATUS_UPDATED_REPLICAS, out);
}

bool deployment_status_observed_generation(const kobj_t *d, int64_t *out)
{
	return get_i64(d, &ktype_deployment, DEPLOYMENT_STATUS_OBSERVED_GENERATION, out);
}

const char *deployment_template_containers_json(const kobj_t *d)
{
	return get_str(d, &ktype_deployment, DEPLOYMENT_SPEC_TEMPLATE_CONTAINERS, KVAL_JSON);
}

bool event_count(const kobj_t *e, int32_t *out)
{
	return get_i32(e, &ktype_event, EVENT_COUNT, out);
}

const char *event_first_timestamp(const kobj_t *e)
{
	return get_str(e, &ktype_event, EVENT_FIRST_TIMESTAMP, KVAL_STRING);
}

const char *event_last_timestamp(const kobj_t *e)
{
	return get_str(e, &ktype_event, EVENT_LAST_TIMESTAMP, KVAL_STRING);
}

const char *event_message(const kobj_t *e)
{
	return get_str(e, &ktype_event, EVENT_MESSAGE, KVAL_STRING);
}

const char *event_reason(const kobj_t *e)
{
	return get_str(e, &ktype_event, EVENT_REASON, KVAL_STRING);
}

const char *event_type(const kobj_t *e)
{
	return get_str(e, &ktype_event, EVENT_TYPE, KVAL_STRING);
}

const char *event_involved_object_json(const kobj_t *e)
{
	return get_str(e, &ktype_event, EVENT_INVOLVED_OBJECT, KVAL_JSON);
}

const char *event_source_json(const kobj_t *e)
{
	return get_str(e, &ktype_event, EVENT_SOURCE, KVAL_JSON);
}

const char *lease_holder_identity(const kobj_t *l)
{
	return get_str(l, &ktype_lease, LEASE_SPEC_HOLDER_IDENTITY, KVAL_STRING);
}

bool lease_duration_seconds(const kobj_t *l, int32_t *out)
{
	return get_i32(l, &ktype_lease, LEASE_SPEC_LEASE_DURATION_SECONDS, out);
}

const char *lease_acquire_time(const kobj_t *l)
{
	return get_str(l, &ktype_lease, LEASE_SPEC_ACQUIRE_TIME, KVAL_STRING);
}

const char *lease_renew_time(const kobj_t *l)
{
	return get_str(l, &ktype_lease, LEASE_SPEC_RENEW_TIME, KVAL_STRING);
}

static bool parse_time(const char *s, int64_t *wall_ns)
{
	return s != NULL && time_parse_rfc3339(s, wall_ns) == 0;
}

bool lease_acquire_time_ns(const kobj_t *l, int64_t *wall_ns)
{
	return parse_time(lease_acquire_time(l), wall_ns);
}

bool lease_renew_time_ns(const kobj_t *l, int64_t *wall_ns)
{
	return parse_time(lease_renew_time(l), wall_ns);
}

bool lease_transitions(const kobj_t *l, int32_t *out)
{
	return get_i32(l, &ktype_lease, LEASE_SPEC_LEASE_TRANSITIONS, out);
}
