/*
 * Unit tests for pkg/kinds/kinds.c: each built-in descriptor decodes a realistic
 * object as the API server returns it (managedFields, annotations and the fields
 * it does not keep included) and keeps exactly its fields; the Secret
 * descriptor without data keeps no secret material.
 */
#include <ckube/decode.h>
#include <ckube/kinds.h>
#include <ckube/types.h>

#include <check.h>
#include <stdlib.h>
#include <string.h>

static ck_obj_t *decode(const ck_type_t *t, const char *json)
{
	char *err = NULL;
	ck_obj_t *o = ck_dec_object(t, json, strlen(json), &err);
	ck_assert_msg(o != NULL, "%s: %s", t->kind, err ? err : "?");
	ck_assert_ptr_eq(o->type, t);
	ck_assert_uint_eq(o->nfields, t->nfields);
	return o;
}

static void assert_json(const ck_obj_t *o, size_t i, const char *want)
{
	const ck_val_t *v = ck_obj_field(o, i);
	ck_assert_int_eq(v->type, CK_VAL_JSON);
	ck_assert_str_eq(v->u.s, want);
}

static void assert_str(const ck_obj_t *o, size_t i, const char *want)
{
	const ck_val_t *v = ck_obj_field(o, i);
	ck_assert_int_eq(v->type, CK_VAL_STRING);
	ck_assert_str_eq(v->u.s, want);
}

static void assert_int(const ck_obj_t *o, size_t i, int64_t want)
{
	const ck_val_t *v = ck_obj_field(o, i);
	ck_assert_int_eq(v->type, CK_VAL_INT);
	ck_assert_int_eq(v->u.i, want);
}

/* Every kept field's text, to check that a value appears in none of them. */
static bool any_field_contains(const ck_obj_t *o, const char *needle)
{
	for (size_t i = 0; i < o->nfields; i++) {
		const ck_val_t *v = ck_obj_field(o, i);
		if ((v->type == CK_VAL_STRING || v->type == CK_VAL_JSON) && strstr(v->u.s, needle))
			return true;
	}
	return false;
}

START_TEST(test_configmap)
{
	const char *json =
	    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"app-config\","
	    "\"namespace\":\"default\",\"uid\":\"0f6e2a9c-1b3d-4c5e-8f70-a1b2c3d4e5f6\","
	    "\"resourceVersion\":\"48213\",\"creationTimestamp\":\"2024-05-02T10:11:12Z\","
	    "\"labels\":{\"app\":\"web\"},\"managedFields\":[{\"manager\":\"kubectl\","
	    "\"operation\":\"Apply\",\"fieldsV1\":{\"f:data\":{}}}]},"
	    "\"data\":{\"app.properties\":\"color=blue\\nsize=3\\n\",\"mode\":\"fast\"},"
	    "\"binaryData\":{\"logo.png\":\"iVBORw0KGgo=\"}}";
	ck_obj_t *o = decode(&ck_type_configmap, json);
	ck_assert_str_eq(o->name, "app-config");
	ck_assert_str_eq(ck_obj_label(o, "app"), "web");
	assert_json(o, CK_CONFIGMAP_DATA,
	            "{\"app.properties\":\"color=blue\\nsize=3\\n\",\"mode\":\"fast\"}");
	assert_json(o, CK_CONFIGMAP_BINARY_DATA, "{\"logo.png\":\"iVBORw0KGgo=\"}");
	ck_assert_str_eq(ck_configmap_data_json(o),
	                 "{\"app.properties\":\"color=blue\\nsize=3\\n\",\"mode\":\"fast\"}");
	ck_assert_str_eq(ck_configmap_binary_data_json(o), "{\"logo.png\":\"iVBORw0KGgo=\"}");
	ck_obj_unref(o);

	/* The same kind with its annotations kept (examples/configmap-hash does this):
	 * the fields are laid out alike, so the typed accessors still read them. */
	ck_type_t with_ann = ck_type_configmap;
	with_ann.keep_annotations = true;
	o = decode(&with_ann, json);
	ck_assert_str_eq(ck_configmap_data_json(o),
	                 "{\"app.properties\":\"color=blue\\nsize=3\\n\",\"mode\":\"fast\"}");
	ck_obj_unref(o);

	/* An absent map reads as absent, null as null; both NULL through accessors. */
	o = decode(&ck_type_configmap, "{\"metadata\":{\"name\":\"empty\"},\"binaryData\":null}");
	ck_assert_int_eq(ck_obj_field(o, CK_CONFIGMAP_DATA)->type, CK_VAL_ABSENT);
	ck_assert_int_eq(ck_obj_field(o, CK_CONFIGMAP_BINARY_DATA)->type, CK_VAL_NULL);
	ck_assert_ptr_null(ck_configmap_data_json(o));
	ck_assert_ptr_null(ck_configmap_binary_data_json(o));
	ck_obj_unref(o);
}
END_TEST

static const char secret_json[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"db-credentials\","
    "\"namespace\":\"prod\",\"uid\":\"5a1e0c7d-2f3b-4a69-9d8e-7c6b5a4f3e2d\","
    "\"resourceVersion\":\"99120\",\"annotations\":{\"kubectl.kubernetes.io/"
    "last-applied-configuration\":\"{\\\"data\\\":{\\\"password\\\":\\\"czNjcjN0\\\"}}\"},"
    "\"managedFields\":[{\"manager\":\"kubectl\",\"fieldsV1\":{\"f:data\":{\"f:password\":{}}}}]},"
    "\"type\":\"kubernetes.io/basic-auth\","
    "\"data\":{\"password\":\"czNjcjN0\",\"username\":\"YWRtaW4=\"},"
    "\"stringData\":{\"token\":\"plain-text-token\"}}";

START_TEST(test_secret_keeps_no_data)
{
	ck_obj_t *o = decode(&ck_type_secret, secret_json);
	ck_assert_uint_eq(o->nfields, 1);
	assert_str(o, CK_SECRET_TYPE, "kubernetes.io/basic-auth");
	ck_assert_str_eq(ck_secret_type(o), "kubernetes.io/basic-auth");
	ck_assert_ptr_null(ck_secret_data_json(o));
	ck_assert_int_eq(ck_type_field_index(&ck_type_secret, "data"), -1);
	/* Not in a field, nor in the annotations (dropped), nor anywhere in the object. */
	ck_assert(!any_field_contains(o, "czNjcjN0"));
	ck_assert_uint_eq(o->nannotations, 0);
	char *mem = memmem(o, ck_obj_size(o), "czNjcjN0", 8);
	ck_assert_ptr_null(mem);
	ck_assert_ptr_null(memmem(o, ck_obj_size(o), "YWRtaW4=", 8));
	ck_assert_ptr_null(memmem(o, ck_obj_size(o), "plain-text-token", 16));
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_secret_with_data)
{
	ck_obj_t *o = decode(&ck_type_secret_with_data, secret_json);
	assert_str(o, CK_SECRET_WITH_DATA_TYPE, "kubernetes.io/basic-auth");
	assert_json(o, CK_SECRET_WITH_DATA_DATA,
	            "{\"password\":\"czNjcjN0\",\"username\":\"YWRtaW4=\"}");
	ck_assert_str_eq(ck_secret_type(o), "kubernetes.io/basic-auth");
	ck_assert_str_eq(ck_secret_data_json(o),
	                 "{\"password\":\"czNjcjN0\",\"username\":\"YWRtaW4=\"}");
	/* stringData is write-only on the server; it is not kept even if sent. */
	ck_assert(!any_field_contains(o, "plain-text-token"));
	ck_obj_unref(o);
}
END_TEST

static const char pod_json[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-7d9f8c6b5-x2kqp\","
    "\"generateName\":\"web-7d9f8c6b5-\",\"namespace\":\"default\","
    "\"uid\":\"c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f\",\"resourceVersion\":\"77301\","
    "\"labels\":{\"app\":\"web\",\"pod-template-hash\":\"7d9f8c6b5\"},"
    "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
    "\"name\":\"web-7d9f8c6b5\",\"uid\":\"aa-bb\",\"controller\":true,"
    "\"blockOwnerDeletion\":true}]},"
    "\"spec\":{\"volumes\":[{\"name\":\"kube-api-access-abcde\",\"projected\":{}}],"
    "\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx:1.27\",\"ports\":[{"
    "\"containerPort\":80,\"protocol\":\"TCP\"}],\"resources\":{\"limits\":{\"cpu\":\"500m\"}}}],"
    "\"restartPolicy\":\"Always\",\"nodeName\":\"worker-2\",\"serviceAccountName\":\"default\"},"
    "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Initialized\","
    "\"status\":\"True\"},{\"type\":\"Ready\",\"status\":\"True\","
    "\"lastTransitionTime\":\"2024-05-02T10:12:00Z\"},{\"type\":\"PodScheduled\","
    "\"status\":\"True\"}],\"hostIP\":\"10.0.0.12\",\"podIP\":\"10.244.1.17\","
    "\"podIPs\":[{\"ip\":\"10.244.1.17\"}],\"startTime\":\"2024-05-02T10:11:50Z\","
    "\"containerStatuses\":[{\"name\":\"nginx\",\"ready\":true,\"restartCount\":0}],"
    "\"qosClass\":\"Burstable\"}}";

START_TEST(test_pod)
{
	ck_obj_t *o = decode(&ck_type_pod, pod_json);
	assert_str(o, CK_POD_SPEC_NODE_NAME, "worker-2");
	assert_json(
	    o, CK_POD_SPEC_CONTAINERS,
	    "[{\"name\":\"nginx\",\"image\":\"nginx:1.27\",\"ports\":[{\"containerPort\":80,"
	    "\"protocol\":\"TCP\"}],\"resources\":{\"limits\":{\"cpu\":\"500m\"}}}]");
	assert_str(o, CK_POD_STATUS_PHASE, "Running");
	ck_assert_int_eq(ck_obj_field(o, CK_POD_STATUS_REASON)->type, CK_VAL_ABSENT);
	assert_str(o, CK_POD_STATUS_POD_IP, "10.244.1.17");
	assert_str(o, CK_POD_STATUS_HOST_IP, "10.0.0.12");
	assert_json(o, CK_POD_STATUS_CONDITIONS,
	            "[{\"type\":\"Initialized\",\"status\":\"True\"},{\"type\":\"Ready\","
	            "\"status\":\"True\",\"lastTransitionTime\":\"2024-05-02T10:12:00Z\"},"
	            "{\"type\":\"PodScheduled\",\"status\":\"True\"}]");
	ck_assert_str_eq(ck_pod_node_name(o), "worker-2");
	ck_assert_str_eq(ck_pod_phase(o), "Running");
	ck_assert_str_eq(ck_pod_ip(o), "10.244.1.17");
	ck_assert_ptr_nonnull(strstr(ck_pod_containers_json(o), "nginx:1.27"));
	ck_assert_ptr_nonnull(strstr(ck_pod_conditions_json(o), "PodScheduled"));
	ck_assert(ck_pod_ready(o));
	ck_assert_str_eq(ck_obj_controller_ref(o)->kind, "ReplicaSet");
	/* Not kept: what a typical controller does not read. */
	ck_assert(!any_field_contains(o, "Burstable"));
	ck_assert(!any_field_contains(o, "kube-api-access"));
	/* Another kind's accessors refuse a pod. */
	ck_assert_ptr_null(ck_service_type(o));
	ck_assert(!ck_node_ready(o));
	ck_obj_unref(o);

	/* Pending: unscheduled, not ready. */
	o = decode(
	    &ck_type_pod,
	    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\"},\"spec\":{"
	    "\"containers\":[]},\"status\":{\"phase\":\"Pending\",\"conditions\":[{"
	    "\"type\":\"PodScheduled\",\"status\":\"False\",\"reason\":\"Unschedulable\"}]}}");
	ck_assert_ptr_null(ck_pod_node_name(o));
	ck_assert_ptr_null(ck_pod_ip(o));
	ck_assert(!ck_pod_ready(o));
	ck_assert_str_eq(ck_pod_containers_json(o), "[]");
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_service)
{
	const char *json =
	    "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"web\","
	    "\"namespace\":\"default\",\"resourceVersion\":\"5120\"},\"spec\":{\"type\":"
	    "\"NodePort\","
	    "\"clusterIP\":\"10.96.14.3\",\"clusterIPs\":[\"10.96.14.3\"],\"ports\":[{\"name\":"
	    "\"http\",\"protocol\":\"TCP\",\"port\":80,\"targetPort\":8080,\"nodePort\":30080}],"
	    "\"selector\":{\"app\":\"web\"},\"sessionAffinity\":\"None\","
	    "\"ipFamilies\":[\"IPv4\"]},\"status\":{\"loadBalancer\":{}}}";
	ck_obj_t *o = decode(&ck_type_service, json);
	assert_str(o, CK_SERVICE_SPEC_TYPE, "NodePort");
	assert_str(o, CK_SERVICE_SPEC_CLUSTER_IP, "10.96.14.3");
	assert_json(o, CK_SERVICE_SPEC_PORTS,
	            "[{\"name\":\"http\",\"protocol\":\"TCP\",\"port\":80,\"targetPort\":8080,"
	            "\"nodePort\":30080}]");
	assert_json(o, CK_SERVICE_SPEC_SELECTOR, "{\"app\":\"web\"}");
	ck_assert_str_eq(ck_service_type(o), "NodePort");
	ck_assert_str_eq(ck_service_cluster_ip(o), "10.96.14.3");
	ck_assert_str_eq(ck_service_selector_json(o), "{\"app\":\"web\"}");
	ck_assert_ptr_nonnull(strstr(ck_service_ports_json(o), "30080"));
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_namespace)
{
	const char *json = "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":"
	                   "\"team-a\",\"uid\":\"9f\",\"resourceVersion\":\"812\",\"labels\":{"
	                   "\"kubernetes.io/metadata.name\":\"team-a\"},\"deletionTimestamp\":"
	                   "\"2024-05-02T11:00:00Z\"},\"spec\":{\"finalizers\":[\"kubernetes\"]},"
	                   "\"status\":{\"phase\":\"Terminating\"}}";
	ck_obj_t *o = decode(&ck_type_namespace, json);
	ck_assert(!ck_type_namespace.namespaced);
	assert_str(o, CK_NAMESPACE_STATUS_PHASE, "Terminating");
	ck_assert_str_eq(ck_namespace_phase(o), "Terminating");
	ck_assert_str_eq(o->deletion_timestamp, "2024-05-02T11:00:00Z");
	char *key = ck_obj_key_dup(o);
	ck_assert_str_eq(key, "team-a");
	free(key);
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_node)
{
	const char *json =
	    "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"worker-2\","
	    "\"resourceVersion\":\"66001\",\"labels\":{\"kubernetes.io/hostname\":\"worker-2\"}},"
	    "\"spec\":{\"podCIDR\":\"10.244.1.0/24\",\"unschedulable\":true,\"taints\":[{\"key\":"
	    "\"node.kubernetes.io/unschedulable\",\"effect\":\"NoSchedule\"}]},"
	    "\"status\":{\"capacity\":{\"cpu\":\"4\"},\"conditions\":[{\"type\":\"MemoryPressure\","
	    "\"status\":\"False\"},{\"type\":\"Ready\",\"status\":\"True\",\"reason\":"
	    "\"KubeletReady\"}],\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.12\"},"
	    "{\"type\":\"Hostname\",\"address\":\"worker-2\"}],\"nodeInfo\":{\"kubeletVersion\":"
	    "\"v1.30.0\"},\"images\":[{\"names\":[\"nginx:1.27\"],\"sizeBytes\":70000000}]}}";
	ck_obj_t *o = decode(&ck_type_node, json);
	ck_assert_int_eq(ck_obj_field(o, CK_NODE_SPEC_UNSCHEDULABLE)->type, CK_VAL_BOOL);
	ck_assert(ck_obj_field(o, CK_NODE_SPEC_UNSCHEDULABLE)->u.b);
	assert_json(o, CK_NODE_STATUS_CONDITIONS,
	            "[{\"type\":\"MemoryPressure\",\"status\":\"False\"},{\"type\":\"Ready\","
	            "\"status\":\"True\",\"reason\":\"KubeletReady\"}]");
	assert_json(o, CK_NODE_STATUS_ADDRESSES,
	            "[{\"type\":\"InternalIP\",\"address\":\"10.0.0.12\"},{\"type\":\"Hostname\","
	            "\"address\":\"worker-2\"}]");
	ck_assert(ck_node_unschedulable(o));
	ck_assert(ck_node_ready(o));
	ck_assert(
	    !ck_kind_condition_true(o, &ck_type_node, CK_NODE_STATUS_CONDITIONS, "MemoryPressure"));
	ck_assert(!ck_kind_condition_true(o, &ck_type_node, CK_NODE_STATUS_CONDITIONS, "NoSuch"));
	ck_assert_ptr_nonnull(strstr(ck_node_addresses_json(o), "InternalIP"));
	ck_assert_ptr_nonnull(strstr(ck_node_conditions_json(o), "KubeletReady"));
	ck_assert(!any_field_contains(o, "sizeBytes"));
	ck_obj_unref(o);

	/* Schedulable: the field is absent. */
	o = decode(&ck_type_node, "{\"metadata\":{\"name\":\"n\"},\"status\":{\"conditions\":[{"
	                          "\"type\":\"Ready\",\"status\":\"Unknown\"}]}}");
	ck_assert_int_eq(ck_obj_field(o, CK_NODE_SPEC_UNSCHEDULABLE)->type, CK_VAL_ABSENT);
	ck_assert(!ck_node_unschedulable(o));
	ck_assert(!ck_node_ready(o));
	ck_assert_ptr_null(ck_node_addresses_json(o));
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_serviceaccount)
{
	const char *json = "{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\",\"metadata\":{"
	                   "\"name\":\"builder\",\"namespace\":\"ci\",\"resourceVersion\":\"301\"},"
	                   "\"secrets\":[{\"name\":\"builder-token-x7k2p\"}],"
	                   "\"imagePullSecrets\":[{\"name\":\"registry-creds\"}],"
	                   "\"automountServiceAccountToken\":false}";
	ck_obj_t *o = decode(&ck_type_serviceaccount, json);
	assert_json(o, CK_SERVICEACCOUNT_SECRETS, "[{\"name\":\"builder-token-x7k2p\"}]");
	assert_json(o, CK_SERVICEACCOUNT_IMAGE_PULL_SECRETS, "[{\"name\":\"registry-creds\"}]");
	ck_assert_str_eq(ck_kind_json(o, &ck_type_serviceaccount, CK_SERVICEACCOUNT_SECRETS),
	                 "[{\"name\":\"builder-token-x7k2p\"}]");
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_replicaset)
{
	const char *json =
	    "{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"metadata\":{\"name\":"
	    "\"web-7d9f8c6b5\",\"namespace\":\"default\",\"generation\":4,\"annotations\":{"
	    "\"deployment.kubernetes.io/revision\":\"3\"}},\"spec\":{\"replicas\":3,\"selector\":{"
	    "\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"spec\":{\"containers\":[]}}},"
	    "\"status\":{\"replicas\":3,\"fullyLabeledReplicas\":3,\"readyReplicas\":2,"
	    "\"availableReplicas\":2,\"observedGeneration\":4}}";
	ck_obj_t *o = decode(&ck_type_replicaset, json);
	assert_int(o, CK_REPLICASET_SPEC_REPLICAS, 3);
	assert_int(o, CK_REPLICASET_STATUS_REPLICAS, 3);
	assert_int(o, CK_REPLICASET_STATUS_READY_REPLICAS, 2);
	assert_int(o, CK_REPLICASET_STATUS_AVAILABLE_REPLICAS, 2);
	assert_int(o, CK_REPLICASET_STATUS_OBSERVED_GENERATION, 4);
	int32_t v = 0;
	int64_t g = 0;
	ck_assert(ck_kind_i32(o, &ck_type_replicaset, CK_REPLICASET_STATUS_READY_REPLICAS, &v));
	ck_assert_int_eq(v, 2);
	ck_assert(
	    ck_kind_i64(o, &ck_type_replicaset, CK_REPLICASET_STATUS_OBSERVED_GENERATION, &g));
	ck_assert(g == o->generation);
	/* Typed reads check the kind and the index. */
	ck_assert(!ck_kind_i32(o, &ck_type_statefulset, CK_STATEFULSET_SPEC_REPLICAS, &v));
	ck_assert(!ck_kind_i32(o, &ck_type_replicaset, CK_REPLICASET_NFIELDS, &v));
	ck_assert_ptr_null(ck_kind_str(o, &ck_type_replicaset, CK_REPLICASET_SPEC_REPLICAS));
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_statefulset)
{
	const char *json =
	    "{\"apiVersion\":\"apps/v1\",\"kind\":\"StatefulSet\",\"metadata\":{\"name\":\"db\","
	    "\"namespace\":\"prod\",\"generation\":7},\"spec\":{\"replicas\":3,\"serviceName\":"
	    "\"db\",\"template\":{\"spec\":{\"containers\":[{\"name\":\"pg\"}]}},"
	    "\"volumeClaimTemplates\":[{\"metadata\":{\"name\":\"data\"}}]},"
	    "\"status\":{\"observedGeneration\":7,\"replicas\":3,\"readyReplicas\":3,"
	    "\"currentReplicas\":1,\"updatedReplicas\":2,\"currentRevision\":\"db-5d8f7c\","
	    "\"updateRevision\":\"db-6b9a1e\",\"collisionCount\":0,\"availableReplicas\":3}}";
	ck_obj_t *o = decode(&ck_type_statefulset, json);
	assert_int(o, CK_STATEFULSET_SPEC_REPLICAS, 3);
	assert_int(o, CK_STATEFULSET_STATUS_REPLICAS, 3);
	assert_int(o, CK_STATEFULSET_STATUS_READY_REPLICAS, 3);
	assert_int(o, CK_STATEFULSET_STATUS_AVAILABLE_REPLICAS, 3);
	assert_int(o, CK_STATEFULSET_STATUS_CURRENT_REPLICAS, 1);
	assert_int(o, CK_STATEFULSET_STATUS_UPDATED_REPLICAS, 2);
	assert_int(o, CK_STATEFULSET_STATUS_OBSERVED_GENERATION, 7);
	assert_str(o, CK_STATEFULSET_STATUS_CURRENT_REVISION, "db-5d8f7c");
	assert_str(o, CK_STATEFULSET_STATUS_UPDATE_REVISION, "db-6b9a1e");
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_daemonset)
{
	const char *json =
	    "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":"
	    "\"node-exporter\",\"namespace\":\"monitoring\",\"generation\":2},\"spec\":{"
	    "\"selector\":{\"matchLabels\":{\"app\":\"node-exporter\"}},\"template\":{}},"
	    "\"status\":{\"currentNumberScheduled\":5,\"numberMisscheduled\":0,"
	    "\"desiredNumberScheduled\":5,\"numberReady\":4,\"observedGeneration\":2,"
	    "\"updatedNumberScheduled\":5,\"numberAvailable\":4,\"numberUnavailable\":1}}";
	ck_obj_t *o = decode(&ck_type_daemonset, json);
	assert_int(o, CK_DAEMONSET_STATUS_DESIRED_NUMBER_SCHEDULED, 5);
	assert_int(o, CK_DAEMONSET_STATUS_CURRENT_NUMBER_SCHEDULED, 5);
	assert_int(o, CK_DAEMONSET_STATUS_UPDATED_NUMBER_SCHEDULED, 5);
	assert_int(o, CK_DAEMONSET_STATUS_NUMBER_READY, 4);
	assert_int(o, CK_DAEMONSET_STATUS_NUMBER_AVAILABLE, 4);
	assert_int(o, CK_DAEMONSET_STATUS_OBSERVED_GENERATION, 2);
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_job)
{
	const char *json =
	    "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"migrate-42\","
	    "\"namespace\":\"prod\",\"labels\":{\"batch.kubernetes.io/job-name\":\"migrate-42\"}},"
	    "\"spec\":{\"parallelism\":2,\"completions\":4,\"backoffLimit\":6,\"suspend\":false,"
	    "\"template\":{\"spec\":{\"restartPolicy\":\"Never\"}}},\"status\":{\"conditions\":[{"
	    "\"type\":\"Complete\",\"status\":\"True\",\"lastTransitionTime\":"
	    "\"2024-05-02T10:20:00Z\"}],\"startTime\":\"2024-05-02T10:11:12Z\","
	    "\"completionTime\":\"2024-05-02T10:20:00Z\",\"succeeded\":4,\"ready\":0}}";
	ck_obj_t *o = decode(&ck_type_job, json);
	assert_int(o, CK_JOB_SPEC_COMPLETIONS, 4);
	assert_int(o, CK_JOB_SPEC_PARALLELISM, 2);
	bool b = true;
	ck_assert(ck_kind_bool(o, &ck_type_job, CK_JOB_SPEC_SUSPEND, &b));
	ck_assert(!b);
	/* status.active and .failed are omitted when zero. */
	ck_assert_int_eq(ck_obj_field(o, CK_JOB_STATUS_ACTIVE)->type, CK_VAL_ABSENT);
	assert_int(o, CK_JOB_STATUS_SUCCEEDED, 4);
	ck_assert_int_eq(ck_obj_field(o, CK_JOB_STATUS_FAILED)->type, CK_VAL_ABSENT);
	assert_str(o, CK_JOB_STATUS_START_TIME, "2024-05-02T10:11:12Z");
	assert_str(o, CK_JOB_STATUS_COMPLETION_TIME, "2024-05-02T10:20:00Z");
	assert_json(o, CK_JOB_STATUS_CONDITIONS,
	            "[{\"type\":\"Complete\",\"status\":\"True\",\"lastTransitionTime\":"
	            "\"2024-05-02T10:20:00Z\"}]");
	ck_assert(ck_job_finished(o));
	ck_obj_unref(o);

	o = decode(&ck_type_job, "{\"metadata\":{\"name\":\"j\",\"namespace\":\"n\"},\"status\":"
	                         "{\"active\":1}}");
	assert_int(o, CK_JOB_STATUS_ACTIVE, 1);
	ck_assert(!ck_job_finished(o));
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_equal_descriptor_reads_alike)
{
	/* A module's own copy of a built-in descriptor: the built-in accessors read
	 * objects decoded with it (a shared informer may have been made with it). */
	static const char *const fields[] = {"spec.nodeName",    "spec.containers", "status.phase",
	                                     "status.reason",    "status.podIP",    "status.hostIP",
	                                     "status.conditions"};
	static const ck_type_t my_pod = {
	    .group = "",
	    .version = "v1",
	    .kind = "Pod",
	    .resource = "pods",
	    .namespaced = true,
	    .fields = fields,
	    .nfields = 7,
	};
	ck_assert(ck_type_equal(&my_pod, &ck_type_pod));
	ck_assert(!ck_type_equal(&ck_type_secret, &ck_type_secret_with_data));
	ck_assert(!ck_type_equal(&ck_type_pod, NULL));
	ck_obj_t *o = decode(&my_pod, pod_json);
	ck_assert_str_eq(ck_pod_phase(o), "Running");
	ck_assert(ck_pod_ready(o));
	ck_obj_unref(o);
}
END_TEST

Suite *suite_kinds(void);
Suite *suite_kinds(void)
{
	Suite *s = suite_create("kinds");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_configmap);
	tcase_add_test(tc, test_secret_keeps_no_data);
	tcase_add_test(tc, test_secret_with_data);
	tcase_add_test(tc, test_pod);
	tcase_add_test(tc, test_service);
	tcase_add_test(tc, test_namespace);
	tcase_add_test(tc, test_node);
	tcase_add_test(tc, test_serviceaccount);
	tcase_add_test(tc, test_equal_descriptor_reads_alike);
	suite_add_tcase(s, tc);
	TCase *ta = tcase_create("workloads");
	tcase_add_test(ta, test_replicaset);
	tcase_add_test(ta, test_statefulset);
	tcase_add_test(ta, test_daemonset);
	tcase_add_test(ta, test_job);
	suite_add_tcase(s, ta);
	return s;
}
