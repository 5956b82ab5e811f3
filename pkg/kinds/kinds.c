/*
 * kinds: the descriptors of kinds.h and their accessors.
 *
 * Design note. The field order of each array is the order of its index enum in
 * kinds.h; the static assertions keep the two in step. What each kind keeps is
 * what a typical controller of it reads and nothing more (see kinds.h for why);
 * lists and maps are kept whole as JSON because controllers compare or look
 * through them rarely, and parsing them on demand costs less than keeping a
 * parsed tree per cached object.
 */
#include <ckube/kinds.h>

#include <ckube/json.h>

#include <ckube/base.h>
#include <ckube/types.h>

#include <stddef.h>
#include <string.h>

/* ================================================================ any kind */

/* Whether objects decoded with a have their fields where t says: an equal
 * descriptor, one that differs only in keeping annotations, or one that keeps
 * t's fields first and more after them (ck_type_deployment_with_template). */
static bool same_layout(const ck_type_t *a, const ck_type_t *t)
{
	if (a == t)
		return true;
	if (a == NULL || a->nfields < t->nfields)
		return false;
	ck_type_t u = *t;
	u.keep_annotations = a->keep_annotations;
	u.nfields = a->nfields;
	u.fields = a->fields;
	if (!ck_type_equal(a, &u))
		return false;
	for (size_t i = 0; i < t->nfields; i++) {
		const char *x = a->fields[i], *y = t->fields[i];
		if (x != y && (x == NULL || y == NULL || strcmp(x, y) != 0))
			return false;
	}
	return true;
}

static const ck_val_t *field_of(const ck_obj_t *obj, const ck_type_t *t, size_t i)
{
	if (obj == NULL || t == NULL || i >= t->nfields || !same_layout(obj->type, t))
		return NULL;
	return ck_obj_field(obj, i);
}

bool ck_kind_bool(const ck_obj_t *obj, const ck_type_t *t, size_t i, bool *out)
{
	const ck_val_t *v = field_of(obj, t, i);
	if (v == NULL || v->type != CK_VAL_BOOL)
		return false;
	*out = v->u.b;
	return true;
}

bool ck_kind_i64(const ck_obj_t *obj, const ck_type_t *t, size_t i, int64_t *out)
{
	const ck_val_t *v = field_of(obj, t, i);
	if (v == NULL || v->type != CK_VAL_INT)
		return false;
	*out = v->u.i;
	return true;
}

bool ck_kind_double(const ck_obj_t *obj, const ck_type_t *t, size_t i, double *out)
{
	const ck_val_t *v = field_of(obj, t, i);
	if (v == NULL || (v->type != CK_VAL_DOUBLE && v->type != CK_VAL_INT))
		return false;
	/* A JSON number without a fraction decodes as an integer: 2 is a number too. */
	*out = v->type == CK_VAL_INT ? (double)v->u.i : v->u.d;
	return true;
}

const ck_val_t *ck_kind_val(const ck_obj_t *obj, const ck_type_t *t, size_t i)
{
	const ck_val_t *v = field_of(obj, t, i);
	return v == NULL || v->type == CK_VAL_ABSENT || v->type == CK_VAL_NULL ? NULL : v;
}

bool ck_kind_i32(const ck_obj_t *obj, const ck_type_t *t, size_t i, int32_t *out)
{
	int64_t v;
	if (!ck_kind_i64(obj, t, i, &v) || v < INT32_MIN || v > INT32_MAX)
		return false;
	*out = (int32_t)v;
	return true;
}

static const char *get_text(const ck_obj_t *obj, const ck_type_t *t, size_t i, ck_val_type_t type)
{
	const ck_val_t *v = field_of(obj, t, i);
	if (v == NULL || v->type != type)
		return NULL;
	return v->u.s;
}

const char *ck_kind_str(const ck_obj_t *obj, const ck_type_t *t, size_t i)
{
	return get_text(obj, t, i, CK_VAL_STRING);
}

const char *ck_kind_json(const ck_obj_t *obj, const ck_type_t *t, size_t i)
{
	return get_text(obj, t, i, CK_VAL_JSON);
}

bool ck_kind_condition_true(const ck_obj_t *obj, const ck_type_t *t, size_t i,
                            const char *cond_type)
{
	const char *json = ck_kind_json(obj, t, i);
	if (json == NULL || cond_type == NULL)
		return false;
	ck_json_doc_t *doc = ck_json_parse(json, strlen(json), NULL);
	const ck_json_t *list = ck_json_root(doc);
	bool result = false;
	for (size_t k = 0; k < ck_json_len(list); k++) {
		const ck_json_t *c = ck_json_at(list, k);
		const char *ty = ck_json_str(ck_json_get(c, CK_PATH("type")));
		if (ty == NULL || strcmp(ty, cond_type) != 0)
			continue;
		const char *st = ck_json_str(ck_json_get(c, CK_PATH("status")));
		result = st != NULL && strcmp(st, "True") == 0;
		break;
	}
	ck_json_doc_free(doc);
	return result;
}

/* ================================================================ core/v1 */

static const char *const configmap_fields[] = {
    [CK_CONFIGMAP_DATA] = "data",
    [CK_CONFIGMAP_BINARY_DATA] = "binaryData",
};
_Static_assert(CK_ARRAY_LEN(configmap_fields) == CK_CONFIGMAP_NFIELDS, "configmap fields");

const ck_type_t ck_type_configmap = {
    .group = "",
    .version = "v1",
    .kind = "ConfigMap",
    .resource = "configmaps",
    .namespaced = true,
    .fields = configmap_fields,
    .nfields = CK_CONFIGMAP_NFIELDS,
};

const char *ck_configmap_data_json(const ck_obj_t *cm)
{
	return ck_kind_json(cm, &ck_type_configmap, CK_CONFIGMAP_DATA);
}

const char *ck_configmap_binary_data_json(const ck_obj_t *cm)
{
	return ck_kind_json(cm, &ck_type_configmap, CK_CONFIGMAP_BINARY_DATA);
}

static const char *const secret_fields[] = {
    [CK_SECRET_TYPE] = "type",
};
_Static_assert(CK_ARRAY_LEN(secret_fields) == CK_SECRET_NFIELDS, "secret fields");

const ck_type_t ck_type_secret = {
    .group = "",
    .version = "v1",
    .kind = "Secret",
    .resource = "secrets",
    .namespaced = true,
    .fields = secret_fields,
    .nfields = CK_SECRET_NFIELDS,
};

/* No stringData: the API server never returns it (see kinds.h). */
static const char *const secret_with_data_fields[] = {
    [CK_SECRET_WITH_DATA_TYPE] = "type",
    [CK_SECRET_WITH_DATA_DATA] = "data",
};
_Static_assert(CK_ARRAY_LEN(secret_with_data_fields) == CK_SECRET_WITH_DATA_NFIELDS,
               "secret with data fields");

const ck_type_t ck_type_secret_with_data = {
    .group = "",
    .version = "v1",
    .kind = "Secret",
    .resource = "secrets",
    .namespaced = true,
    .fields = secret_with_data_fields,
    .nfields = CK_SECRET_WITH_DATA_NFIELDS,
};

const char *ck_secret_type(const ck_obj_t *s)
{
	const char *v = ck_kind_str(s, &ck_type_secret, CK_SECRET_TYPE);
	return v ? v : ck_kind_str(s, &ck_type_secret_with_data, CK_SECRET_WITH_DATA_TYPE);
}

const char *ck_secret_data_json(const ck_obj_t *s)
{
	return ck_kind_json(s, &ck_type_secret_with_data, CK_SECRET_WITH_DATA_DATA);
}

static const char *const pod_fields[] = {
    [CK_POD_SPEC_NODE_NAME] = "spec.nodeName",        [CK_POD_SPEC_CONTAINERS] = "spec.containers",
    [CK_POD_STATUS_PHASE] = "status.phase",           [CK_POD_STATUS_REASON] = "status.reason",
    [CK_POD_STATUS_POD_IP] = "status.podIP",          [CK_POD_STATUS_HOST_IP] = "status.hostIP",
    [CK_POD_STATUS_CONDITIONS] = "status.conditions",
};
_Static_assert(CK_ARRAY_LEN(pod_fields) == CK_POD_NFIELDS, "pod fields");

const ck_type_t ck_type_pod = {
    .group = "",
    .version = "v1",
    .kind = "Pod",
    .resource = "pods",
    .namespaced = true,
    .fields = pod_fields,
    .nfields = CK_POD_NFIELDS,
};

const char *ck_pod_node_name(const ck_obj_t *p)
{
	const char *v = ck_kind_str(p, &ck_type_pod, CK_POD_SPEC_NODE_NAME);
	return v && v[0] ? v : NULL;
}

const char *ck_pod_containers_json(const ck_obj_t *p)
{
	return ck_kind_json(p, &ck_type_pod, CK_POD_SPEC_CONTAINERS);
}

const char *ck_pod_phase(const ck_obj_t *p)
{
	return ck_kind_str(p, &ck_type_pod, CK_POD_STATUS_PHASE);
}

const char *ck_pod_ip(const ck_obj_t *p)
{
	return ck_kind_str(p, &ck_type_pod, CK_POD_STATUS_POD_IP);
}

const char *ck_pod_conditions_json(const ck_obj_t *p)
{
	return ck_kind_json(p, &ck_type_pod, CK_POD_STATUS_CONDITIONS);
}

bool ck_pod_ready(const ck_obj_t *p)
{
	return ck_kind_condition_true(p, &ck_type_pod, CK_POD_STATUS_CONDITIONS, "Ready");
}

static const char *const service_fields[] = {
    [CK_SERVICE_SPEC_TYPE] = "spec.type",
    [CK_SERVICE_SPEC_CLUSTER_IP] = "spec.clusterIP",
    [CK_SERVICE_SPEC_PORTS] = "spec.ports",
    [CK_SERVICE_SPEC_SELECTOR] = "spec.selector",
};
_Static_assert(CK_ARRAY_LEN(service_fields) == CK_SERVICE_NFIELDS, "service fields");

const ck_type_t ck_type_service = {
    .group = "",
    .version = "v1",
    .kind = "Service",
    .resource = "services",
    .namespaced = true,
    .fields = service_fields,
    .nfields = CK_SERVICE_NFIELDS,
};

const char *ck_service_type(const ck_obj_t *s)
{
	return ck_kind_str(s, &ck_type_service, CK_SERVICE_SPEC_TYPE);
}

const char *ck_service_cluster_ip(const ck_obj_t *s)
{
	return ck_kind_str(s, &ck_type_service, CK_SERVICE_SPEC_CLUSTER_IP);
}

const char *ck_service_ports_json(const ck_obj_t *s)
{
	return ck_kind_json(s, &ck_type_service, CK_SERVICE_SPEC_PORTS);
}

const char *ck_service_selector_json(const ck_obj_t *s)
{
	return ck_kind_json(s, &ck_type_service, CK_SERVICE_SPEC_SELECTOR);
}

static const char *const namespace_fields[] = {
    [CK_NAMESPACE_STATUS_PHASE] = "status.phase",
};
_Static_assert(CK_ARRAY_LEN(namespace_fields) == CK_NAMESPACE_NFIELDS, "namespace fields");

const ck_type_t ck_type_namespace = {
    .group = "",
    .version = "v1",
    .kind = "Namespace",
    .resource = "namespaces",
    .namespaced = false,
    .fields = namespace_fields,
    .nfields = CK_NAMESPACE_NFIELDS,
};

const char *ck_namespace_phase(const ck_obj_t *ns)
{
	return ck_kind_str(ns, &ck_type_namespace, CK_NAMESPACE_STATUS_PHASE);
}

static const char *const node_fields[] = {
    [CK_NODE_SPEC_UNSCHEDULABLE] = "spec.unschedulable",
    [CK_NODE_STATUS_CONDITIONS] = "status.conditions",
    [CK_NODE_STATUS_ADDRESSES] = "status.addresses",
};
_Static_assert(CK_ARRAY_LEN(node_fields) == CK_NODE_NFIELDS, "node fields");

const ck_type_t ck_type_node = {
    .group = "",
    .version = "v1",
    .kind = "Node",
    .resource = "nodes",
    .namespaced = false,
    .fields = node_fields,
    .nfields = CK_NODE_NFIELDS,
};

bool ck_node_unschedulable(const ck_obj_t *n)
{
	bool v = false;
	return ck_kind_bool(n, &ck_type_node, CK_NODE_SPEC_UNSCHEDULABLE, &v) && v;
}

const char *ck_node_conditions_json(const ck_obj_t *n)
{
	return ck_kind_json(n, &ck_type_node, CK_NODE_STATUS_CONDITIONS);
}

const char *ck_node_addresses_json(const ck_obj_t *n)
{
	return ck_kind_json(n, &ck_type_node, CK_NODE_STATUS_ADDRESSES);
}

bool ck_node_ready(const ck_obj_t *n)
{
	return ck_kind_condition_true(n, &ck_type_node, CK_NODE_STATUS_CONDITIONS, "Ready");
}

static const char *const serviceaccount_fields[] = {
    [CK_SERVICEACCOUNT_SECRETS] = "secrets",
    [CK_SERVICEACCOUNT_IMAGE_PULL_SECRETS] = "imagePullSecrets",
};
_Static_assert(CK_ARRAY_LEN(serviceaccount_fields) == CK_SERVICEACCOUNT_NFIELDS,
               "serviceaccount fields");

const ck_type_t ck_type_serviceaccount = {
    .group = "",
    .version = "v1",
    .kind = "ServiceAccount",
    .resource = "serviceaccounts",
    .namespaced = true,
    .fields = serviceaccount_fields,
    .nfields = CK_SERVICEACCOUNT_NFIELDS,
};

/* ================================================================ apps/v1, batch/v1 */

static const char *const replicaset_fields[] = {
    [CK_REPLICASET_SPEC_REPLICAS] = "spec.replicas",
    [CK_REPLICASET_STATUS_REPLICAS] = "status.replicas",
    [CK_REPLICASET_STATUS_READY_REPLICAS] = "status.readyReplicas",
    [CK_REPLICASET_STATUS_AVAILABLE_REPLICAS] = "status.availableReplicas",
    [CK_REPLICASET_STATUS_OBSERVED_GENERATION] = "status.observedGeneration",
};
_Static_assert(CK_ARRAY_LEN(replicaset_fields) == CK_REPLICASET_NFIELDS, "replicaset fields");

const ck_type_t ck_type_replicaset = {
    .group = "apps",
    .version = "v1",
    .kind = "ReplicaSet",
    .resource = "replicasets",
    .namespaced = true,
    .fields = replicaset_fields,
    .nfields = CK_REPLICASET_NFIELDS,
};

static const char *const statefulset_fields[] = {
    [CK_STATEFULSET_SPEC_REPLICAS] = "spec.replicas",
    [CK_STATEFULSET_STATUS_REPLICAS] = "status.replicas",
    [CK_STATEFULSET_STATUS_READY_REPLICAS] = "status.readyReplicas",
    [CK_STATEFULSET_STATUS_AVAILABLE_REPLICAS] = "status.availableReplicas",
    [CK_STATEFULSET_STATUS_CURRENT_REPLICAS] = "status.currentReplicas",
    [CK_STATEFULSET_STATUS_UPDATED_REPLICAS] = "status.updatedReplicas",
    [CK_STATEFULSET_STATUS_OBSERVED_GENERATION] = "status.observedGeneration",
    [CK_STATEFULSET_STATUS_CURRENT_REVISION] = "status.currentRevision",
    [CK_STATEFULSET_STATUS_UPDATE_REVISION] = "status.updateRevision",
};
_Static_assert(CK_ARRAY_LEN(statefulset_fields) == CK_STATEFULSET_NFIELDS, "statefulset fields");

const ck_type_t ck_type_statefulset = {
    .group = "apps",
    .version = "v1",
    .kind = "StatefulSet",
    .resource = "statefulsets",
    .namespaced = true,
    .fields = statefulset_fields,
    .nfields = CK_STATEFULSET_NFIELDS,
};

static const char *const daemonset_fields[] = {
    [CK_DAEMONSET_STATUS_DESIRED_NUMBER_SCHEDULED] = "status.desiredNumberScheduled",
    [CK_DAEMONSET_STATUS_CURRENT_NUMBER_SCHEDULED] = "status.currentNumberScheduled",
    [CK_DAEMONSET_STATUS_UPDATED_NUMBER_SCHEDULED] = "status.updatedNumberScheduled",
    [CK_DAEMONSET_STATUS_NUMBER_READY] = "status.numberReady",
    [CK_DAEMONSET_STATUS_NUMBER_AVAILABLE] = "status.numberAvailable",
    [CK_DAEMONSET_STATUS_OBSERVED_GENERATION] = "status.observedGeneration",
};
_Static_assert(CK_ARRAY_LEN(daemonset_fields) == CK_DAEMONSET_NFIELDS, "daemonset fields");

const ck_type_t ck_type_daemonset = {
    .group = "apps",
    .version = "v1",
    .kind = "DaemonSet",
    .resource = "daemonsets",
    .namespaced = true,
    .fields = daemonset_fields,
    .nfields = CK_DAEMONSET_NFIELDS,
};

static const char *const job_fields[] = {
    [CK_JOB_SPEC_COMPLETIONS] = "spec.completions",
    [CK_JOB_SPEC_PARALLELISM] = "spec.parallelism",
    [CK_JOB_SPEC_SUSPEND] = "spec.suspend",
    [CK_JOB_STATUS_ACTIVE] = "status.active",
    [CK_JOB_STATUS_SUCCEEDED] = "status.succeeded",
    [CK_JOB_STATUS_FAILED] = "status.failed",
    [CK_JOB_STATUS_START_TIME] = "status.startTime",
    [CK_JOB_STATUS_COMPLETION_TIME] = "status.completionTime",
    [CK_JOB_STATUS_CONDITIONS] = "status.conditions",
};
_Static_assert(CK_ARRAY_LEN(job_fields) == CK_JOB_NFIELDS, "job fields");

const ck_type_t ck_type_job = {
    .group = "batch",
    .version = "v1",
    .kind = "Job",
    .resource = "jobs",
    .namespaced = true,
    .fields = job_fields,
    .nfields = CK_JOB_NFIELDS,
};

bool ck_job_finished(const ck_obj_t *j)
{
	return ck_kind_condition_true(j, &ck_type_job, CK_JOB_STATUS_CONDITIONS, "Complete") ||
	       ck_kind_condition_true(j, &ck_type_job, CK_JOB_STATUS_CONDITIONS, "Failed");
}
