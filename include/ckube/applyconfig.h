/*
 * applyconfig: typed bodies for the built-in kinds a controller writes most
 * (client-go's apply configurations), on top of the patch builder: each
 * constructor returns a ck_patch_t from ck_patch_new_object() and each setter
 * is one ck_patch_* call at the right path, so a body mixes typed setters with
 * ck_patch_set_* for anything not covered, and is sent with any of the
 * builder's helpers (ck_client_apply_sync, ck_create_or_update_sync, ...).
 * Errors are the builder's: sticky, checked once at the end.
 *
 * Lists (containers, ports, env, args) are built one way only: an element is
 * a builder of its own (ck_ac_container) or a setter's arguments, appended at
 * the end with ck_patch_append; elements keep the order of the calls, so
 * element i is the i-th appended.
 *
 * Defaults. The setters write what the API server would default where leaving
 * it out would make a create-or-update see a change on every call: a Service
 * port's protocol (TCP) and targetPort (the port), a container port's protocol
 * (TCP). Other defaults (a container's imagePullPolicy, terminationMessagePath,
 * a Deployment's strategy, ...) are not written: a Deployment is best sent with
 * server-side apply, whose list merging by container name is what it needs.
 */
#ifndef CKUBE_APPLYCONFIG_H
#define CKUBE_APPLYCONFIG_H

#include <ckube/export.h>

#include <ckube/patch.h>

#include <stddef.h>
#include <stdint.h>

/* Any object: metadata.labels[key] / metadata.annotations[key] (borrowed, copied). */
CKUBE_API int ck_ac_label(ck_patch_t *p, const char *key, const char *value);
CKUBE_API int ck_ac_annotation(ck_patch_t *p, const char *key, const char *value);

/* apps/v1 Deployment ns/name: a new builder, free with ck_patch_free(). */
CKUBE_API ck_patch_t *ck_ac_deployment(const char *ns, const char *name);
CKUBE_API int ck_ac_deployment_replicas(ck_patch_t *d, int32_t replicas);
/* spec.selector.matchLabels[key] */
CKUBE_API int ck_ac_deployment_selector(ck_patch_t *d, const char *key, const char *value);
/* spec.template.metadata.labels[key] */
CKUBE_API int ck_ac_deployment_template_label(ck_patch_t *d, const char *key, const char *value);
/* Appends container (taken, freed also on error) to spec.template.spec.containers. */
CKUBE_API int ck_ac_deployment_container(ck_patch_t *d, ck_patch_t *container);

/* A container element {name, image}: a new builder, given to ck_ac_deployment_container. */
CKUBE_API ck_patch_t *ck_ac_container(const char *name, const char *image);
/* Appends to ports {name (NULL: left out), containerPort, protocol (NULL: "TCP")}. */
CKUBE_API int ck_ac_container_port(ck_patch_t *c, const char *name, int32_t port,
                                   const char *protocol);
/* Appends to env {name, value}. */
CKUBE_API int ck_ac_container_env(ck_patch_t *c, const char *name, const char *value);
/* Appends to args. */
CKUBE_API int ck_ac_container_arg(ck_patch_t *c, const char *arg);
/* resources.requests[resource] = quantity ("cpu", "100m") */
CKUBE_API int ck_ac_container_request(ck_patch_t *c, const char *resource, const char *quantity);
/* resources.limits[resource] = quantity */
CKUBE_API int ck_ac_container_limit(ck_patch_t *c, const char *resource, const char *quantity);

/* v1 Service ns/name. */
CKUBE_API ck_patch_t *ck_ac_service(const char *ns, const char *name);
/* spec.type: "ClusterIP", "NodePort", "LoadBalancer", "ExternalName". */
CKUBE_API int ck_ac_service_type(ck_patch_t *s, const char *type);
/* spec.selector[key] */
CKUBE_API int ck_ac_service_selector(ck_patch_t *s, const char *key, const char *value);
/* Appends to spec.ports {name (NULL: left out), protocol (NULL: "TCP"), port,
 * targetPort (0: port)}. */
CKUBE_API int ck_ac_service_port(ck_patch_t *s, const char *name, int32_t port, int32_t target_port,
                                 const char *protocol);

/* v1 ConfigMap ns/name; data[key] = value. */
CKUBE_API ck_patch_t *ck_ac_configmap(const char *ns, const char *name);
CKUBE_API int ck_ac_configmap_data(ck_patch_t *cm, const char *key, const char *value);

/* v1 Secret ns/name. */
CKUBE_API ck_patch_t *ck_ac_secret(const char *ns, const char *name);
/* type ("Opaque", "kubernetes.io/tls", ...) */
CKUBE_API int ck_ac_secret_type(ck_patch_t *s, const char *type);
/* stringData[key] = value (text; the server stores it base64 in data). */
CKUBE_API int ck_ac_secret_string_data(ck_patch_t *s, const char *key, const char *value);
/* data[key] = len bytes of value (borrowed; any bytes), written base64. */
CKUBE_API int ck_ac_secret_data(ck_patch_t *s, const char *key, const void *value, size_t len);

#endif
