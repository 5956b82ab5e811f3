/*
 * kinds: descriptors of the built-in kinds controllers watch most, with the
 * fields a controller typically reads, and typed reads of a kept field for any
 * kind (these and your own).
 *
 *   core/v1   ck_type_configmap, ck_type_secret, ck_type_secret_with_data,
 *             ck_type_pod, ck_type_service, ck_type_namespace, ck_type_node,
 *             ck_type_serviceaccount
 *   apps/v1   ck_type_replicaset, ck_type_statefulset, ck_type_daemonset
 *             (ck_type_deployment is in types.h)
 *   batch/v1  ck_type_job
 *
 * They live apart from types.h because types.h holds what the library itself
 * uses (events, leases) and the sample controller's Deployment, whose field
 * indexes other code depends on; these are for applications.
 *
 * Each descriptor keeps little on purpose: every cached object pays for every
 * kept field, and a cluster has many pods. When you need another field, describe
 * the kind yourself (below) rather than reading it from the API server per object.
 *
 * Describing any other kind (a CRD, or a built-in with other fields), from
 * outside the library:
 *
 *   static const char *const widget_fields[] = {
 *           [WIDGET_SPEC_SIZE] = "spec.size",           // a scalar
 *           [WIDGET_SPEC_PORTS] = "spec.ports",         // an array: kept as JSON text
 *           [WIDGET_DATA] = "data",                     // a top-level field works too
 *           [WIDGET_STATUS_PHASE] = "status.phase",
 *   };
 *   static const ck_type_t widget_type = {
 *           .group = "example.com", .version = "v1", .kind = "Widget",
 *           .resource = "widgets",                      // the plural, as in the URL
 *           .namespaced = true,
 *           .fields = widget_fields, .nfields = CK_ARRAY_LEN(widget_fields),
 *   };
 *
 * - The descriptor and its strings must outlive every object and informer made
 *   with it: make them static const.
 * - fields are dotted paths from the object's root: "spec.x", "status.y.z", and
 *   top-level ones such as "data", "type" or "secrets" alike. Metadata is always
 *   kept (see obj.h) and needs no path; annotations only with keep_annotations.
 * - obj->fields[i] is fields[i]: give the indexes an enum as below and read them
 *   with ck_obj_field or the ck_kind_* functions.
 * - A path absent from an object reads as CK_VAL_ABSENT, an explicit JSON null as
 *   CK_VAL_NULL; the typed reads below return false / NULL for both.
 * - A path naming a JSON object or array (a map such as "data", a list such as
 *   "spec.containers") is kept whole as CK_VAL_JSON: compact JSON text, to parse
 *   with any JSON parser when needed.
 * - Two descriptors naming the same group/version/resource with the same field
 *   list are interchangeable (ck_type_equal): a factory shares one informer
 *   between them. With a different field list the factory refuses the second
 *   (see ck_cache_factory_informer_err in cache.h).
 *
 * Accessors borrow the object and return false / NULL when the field is absent,
 * null, of another JSON type, out of range, or when the object is of another
 * kind (one not ck_type_equal to the descriptor). Returned strings are borrowed
 * from the object (valid while you hold a reference). Objects are immutable:
 * every function here may be called from any thread.
 */
#ifndef CKUBE_KUBE_KINDS_H
#define CKUBE_KUBE_KINDS_H

#include <ckube/export.h>

#include <ckube/obj.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ================================================================ any kind */

/*
 * Typed reads of kept field i of obj, which must have been decoded with t or a
 * descriptor with the same fields (a copy that also keeps annotations will do;
 * borrowed). false / NULL as described above, and when obj is of another kind. _double takes any
 * number (an integer too); _str is for JSON
 * strings, _json for objects and arrays (compact JSON text); _i32 also fails when the integer does
 * not fit.
 */
CKUBE_API bool ck_kind_bool(const ck_obj_t *obj, const ck_type_t *t, size_t i, bool *out);
CKUBE_API bool ck_kind_i32(const ck_obj_t *obj, const ck_type_t *t, size_t i, int32_t *out);
CKUBE_API bool ck_kind_i64(const ck_obj_t *obj, const ck_type_t *t, size_t i, int64_t *out);
CKUBE_API bool ck_kind_double(const ck_obj_t *obj, const ck_type_t *t, size_t i, double *out);
CKUBE_API const char *ck_kind_str(const ck_obj_t *obj, const ck_type_t *t, size_t i);
CKUBE_API const char *ck_kind_json(const ck_obj_t *obj, const ck_type_t *t, size_t i);
/* The kept value whatever its type (borrowed), or NULL when absent or null. */
CKUBE_API const ck_val_t *ck_kind_val(const ck_obj_t *obj, const ck_type_t *t, size_t i);

/*
 * Looks up the condition of type cond_type (borrowed) in kept field i, a
 * conditions array as in status.conditions, and returns true when its status is
 * "True". false when it is "False" or "Unknown", absent, or the field is not such
 * an array. Parses the JSON text on each call (microseconds for a few conditions).
 */
CKUBE_API bool ck_kind_condition_true(const ck_obj_t *obj, const ck_type_t *t, size_t i,
                                      const char *cond_type);

/* ================================================================ core/v1 */

CKUBE_API extern const ck_type_t ck_type_configmap;

/* Indexes into ck_type_configmap.fields. */
enum {
	CK_CONFIGMAP_DATA,        /* JSON object of string values */
	CK_CONFIGMAP_BINARY_DATA, /* JSON object of base64 values */
	CK_CONFIGMAP_NFIELDS,
};

/* Compact JSON object text ({"key":"value",...}), or NULL (absent or null). */
CKUBE_API const char *ck_configmap_data_json(const ck_obj_t *cm);
CKUBE_API const char *ck_configmap_binary_data_json(const ck_obj_t *cm);

/*
 * Secrets, two ways. ck_type_secret keeps only the type (and metadata): a
 * controller that only needs to know a Secret exists, or react to its changes,
 * holds no secret material in memory (nor in core dumps or debug output).
 * ck_type_secret_with_data also keeps data, for the controllers that must read
 * it. Neither keeps stringData: it is write-only -- the API server merges it
 * into data on write and never returns it, so it is never in a list or watch.
 *
 * Both name the resource "secrets" with different fields, so one factory serves
 * one of them: ask it for the other and it refuses (cache.h).
 */
CKUBE_API extern const ck_type_t ck_type_secret, ck_type_secret_with_data;

/* Indexes into ck_type_secret.fields. */
enum {
	CK_SECRET_TYPE, /* "Opaque", "kubernetes.io/tls", ... */
	CK_SECRET_NFIELDS,
};

/* Indexes into ck_type_secret_with_data.fields (CK_SECRET_TYPE is the same). */
enum {
	CK_SECRET_WITH_DATA_TYPE = CK_SECRET_TYPE,
	CK_SECRET_WITH_DATA_DATA, /* JSON object of base64 values */
	CK_SECRET_WITH_DATA_NFIELDS,
};

/* Either Secret descriptor. */
CKUBE_API const char *ck_secret_type(const ck_obj_t *s);
/* ck_type_secret_with_data only: compact JSON object of base64 values, or NULL. */
CKUBE_API const char *ck_secret_data_json(const ck_obj_t *s);

CKUBE_API extern const ck_type_t ck_type_pod;

/* Indexes into ck_type_pod.fields. */
enum {
	CK_POD_SPEC_NODE_NAME,
	CK_POD_SPEC_CONTAINERS, /* JSON array: images, ports, resources of each container */
	CK_POD_STATUS_PHASE,    /* "Pending", "Running", "Succeeded", "Failed", "Unknown" */
	CK_POD_STATUS_REASON,   /* e.g. "Evicted" */
	CK_POD_STATUS_POD_IP,
	CK_POD_STATUS_HOST_IP,
	CK_POD_STATUS_CONDITIONS, /* JSON array */
	CK_POD_NFIELDS,
};

/* NULL while the pod is not scheduled. */
CKUBE_API const char *ck_pod_node_name(const ck_obj_t *p);
CKUBE_API const char *ck_pod_containers_json(const ck_obj_t *p);
CKUBE_API const char *ck_pod_phase(const ck_obj_t *p);
CKUBE_API const char *ck_pod_ip(const ck_obj_t *p);
CKUBE_API const char *ck_pod_conditions_json(const ck_obj_t *p);
/* The Ready condition is True (what a Service's endpoints go by). */
CKUBE_API bool ck_pod_ready(const ck_obj_t *p);

CKUBE_API extern const ck_type_t ck_type_service;

/* Indexes into ck_type_service.fields. */
enum {
	CK_SERVICE_SPEC_TYPE,       /* "ClusterIP", "NodePort", "LoadBalancer", "ExternalName" */
	CK_SERVICE_SPEC_CLUSTER_IP, /* "None" for a headless service */
	CK_SERVICE_SPEC_PORTS,      /* JSON array */
	CK_SERVICE_SPEC_SELECTOR,   /* JSON object of labels */
	CK_SERVICE_NFIELDS,
};

CKUBE_API const char *ck_service_type(const ck_obj_t *s);
CKUBE_API const char *ck_service_cluster_ip(const ck_obj_t *s);
CKUBE_API const char *ck_service_ports_json(const ck_obj_t *s);
CKUBE_API const char *ck_service_selector_json(const ck_obj_t *s);

/* Cluster-scoped. */
CKUBE_API extern const ck_type_t ck_type_namespace;

/* Indexes into ck_type_namespace.fields. */
enum {
	CK_NAMESPACE_STATUS_PHASE, /* "Active" or "Terminating" */
	CK_NAMESPACE_NFIELDS,
};

CKUBE_API const char *ck_namespace_phase(const ck_obj_t *ns);

/* Cluster-scoped. */
CKUBE_API extern const ck_type_t ck_type_node;

/* Indexes into ck_type_node.fields. */
enum {
	CK_NODE_SPEC_UNSCHEDULABLE, /* bool, absent when schedulable */
	CK_NODE_STATUS_CONDITIONS,  /* JSON array */
	CK_NODE_STATUS_ADDRESSES,   /* JSON array of {type, address} */
	CK_NODE_NFIELDS,
};

/* true when cordoned; false when schedulable (the field is then usually absent). */
CKUBE_API bool ck_node_unschedulable(const ck_obj_t *n);
CKUBE_API const char *ck_node_conditions_json(const ck_obj_t *n);
CKUBE_API const char *ck_node_addresses_json(const ck_obj_t *n);
/* The Ready condition is True. */
CKUBE_API bool ck_node_ready(const ck_obj_t *n);

CKUBE_API extern const ck_type_t ck_type_serviceaccount;

/* Indexes into ck_type_serviceaccount.fields. Both are lists of references by
 * name, never the secrets' contents. */
enum {
	CK_SERVICEACCOUNT_SECRETS,            /* JSON array of object references */
	CK_SERVICEACCOUNT_IMAGE_PULL_SECRETS, /* JSON array of {name} */
	CK_SERVICEACCOUNT_NFIELDS,
};

/* ================================================================ apps/v1, batch/v1 */

/* Read with ck_kind_i32/_i64(obj, &ck_type_x, CK_X_..., &out). */
CKUBE_API extern const ck_type_t ck_type_replicaset, ck_type_statefulset, ck_type_daemonset,
    ck_type_job;

/* Indexes into ck_type_replicaset.fields. */
enum {
	CK_REPLICASET_SPEC_REPLICAS,
	CK_REPLICASET_STATUS_REPLICAS,
	CK_REPLICASET_STATUS_READY_REPLICAS,
	CK_REPLICASET_STATUS_AVAILABLE_REPLICAS,
	CK_REPLICASET_STATUS_OBSERVED_GENERATION, /* int64 */
	CK_REPLICASET_NFIELDS,
};

/* Indexes into ck_type_statefulset.fields. */
enum {
	CK_STATEFULSET_SPEC_REPLICAS,
	CK_STATEFULSET_STATUS_REPLICAS,
	CK_STATEFULSET_STATUS_READY_REPLICAS,
	CK_STATEFULSET_STATUS_AVAILABLE_REPLICAS,
	CK_STATEFULSET_STATUS_CURRENT_REPLICAS,
	CK_STATEFULSET_STATUS_UPDATED_REPLICAS,
	CK_STATEFULSET_STATUS_OBSERVED_GENERATION, /* int64 */
	/* A rollout is complete when the two revisions are equal. */
	CK_STATEFULSET_STATUS_CURRENT_REVISION,
	CK_STATEFULSET_STATUS_UPDATE_REVISION,
	CK_STATEFULSET_NFIELDS,
};

/* Indexes into ck_type_daemonset.fields. A DaemonSet has no spec.replicas: it
 * wants one pod per eligible node, desiredNumberScheduled. */
enum {
	CK_DAEMONSET_STATUS_DESIRED_NUMBER_SCHEDULED,
	CK_DAEMONSET_STATUS_CURRENT_NUMBER_SCHEDULED,
	CK_DAEMONSET_STATUS_UPDATED_NUMBER_SCHEDULED,
	CK_DAEMONSET_STATUS_NUMBER_READY,
	CK_DAEMONSET_STATUS_NUMBER_AVAILABLE,
	CK_DAEMONSET_STATUS_OBSERVED_GENERATION, /* int64 */
	CK_DAEMONSET_NFIELDS,
};

/* Indexes into ck_type_job.fields. */
enum {
	CK_JOB_SPEC_COMPLETIONS,
	CK_JOB_SPEC_PARALLELISM,
	CK_JOB_SPEC_SUSPEND, /* bool */
	CK_JOB_STATUS_ACTIVE,
	CK_JOB_STATUS_SUCCEEDED,
	CK_JOB_STATUS_FAILED,
	CK_JOB_STATUS_START_TIME,      /* RFC 3339 text */
	CK_JOB_STATUS_COMPLETION_TIME, /* RFC 3339 text, set when it succeeded */
	CK_JOB_STATUS_CONDITIONS,      /* JSON array: "Complete", "Failed", "Suspended" */
	CK_JOB_NFIELDS,
};

/* The Complete or the Failed condition is True: the job will run no more pods. */
CKUBE_API bool ck_job_finished(const ck_obj_t *j);

#endif
