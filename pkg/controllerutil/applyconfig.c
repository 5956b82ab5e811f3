/*
 * applyconfig: typed setters over the patch builder (see <ckube/applyconfig.h>).
 * Each is one path and one builder call; lists go through ck_patch_append.
 */
#include <ckube/applyconfig.h>

#include <ckube/base.h>
#include <ckube/kinds.h>
#include <ckube/types.h>

#include <stdlib.h>

int ck_ac_label(ck_patch_t *p, const char *key, const char *value)
{
	return ck_patch_set_string(p, CK_PATH("metadata", "labels", key), value);
}

int ck_ac_annotation(ck_patch_t *p, const char *key, const char *value)
{
	return ck_patch_set_string(p, CK_PATH("metadata", "annotations", key), value);
}

/* ---- Deployment ---- */

ck_patch_t *ck_ac_deployment(const char *ns, const char *name)
{
	return ck_patch_new_object(&ck_type_deployment, ns, name);
}

int ck_ac_deployment_replicas(ck_patch_t *d, int32_t replicas)
{
	return ck_patch_set_int(d, CK_PATH("spec", "replicas"), replicas);
}

int ck_ac_deployment_selector(ck_patch_t *d, const char *key, const char *value)
{
	return ck_patch_set_string(d, CK_PATH("spec", "selector", "matchLabels", key), value);
}

int ck_ac_deployment_template_label(ck_patch_t *d, const char *key, const char *value)
{
	return ck_patch_set_string(d, CK_PATH("spec", "template", "metadata", "labels", key),
	                           value);
}

int ck_ac_deployment_container(ck_patch_t *d, ck_patch_t *container)
{
	return ck_patch_append(d, CK_PATH("spec", "template", "spec", "containers"), container);
}

ck_patch_t *ck_ac_container(const char *name, const char *image)
{
	ck_patch_t *c = ck_patch_new();
	ck_patch_set_string(c, CK_PATH("name"), name);
	ck_patch_set_string(c, CK_PATH("image"), image);
	return c;
}

int ck_ac_container_port(ck_patch_t *c, const char *name, int32_t port, const char *protocol)
{
	ck_patch_t *e = ck_patch_new();
	if (name != NULL)
		ck_patch_set_string(e, CK_PATH("name"), name);
	ck_patch_set_int(e, CK_PATH("containerPort"), port);
	ck_patch_set_string(e, CK_PATH("protocol"), protocol ? protocol : "TCP");
	return ck_patch_append(c, CK_PATH("ports"), e);
}

int ck_ac_container_env(ck_patch_t *c, const char *name, const char *value)
{
	ck_patch_t *e = ck_patch_new();
	ck_patch_set_string(e, CK_PATH("name"), name);
	ck_patch_set_string(e, CK_PATH("value"), value);
	return ck_patch_append(c, CK_PATH("env"), e);
}

int ck_ac_container_arg(ck_patch_t *c, const char *arg)
{
	return ck_patch_append_string(c, CK_PATH("args"), arg);
}

int ck_ac_container_request(ck_patch_t *c, const char *resource, const char *quantity)
{
	return ck_patch_set_string(c, CK_PATH("resources", "requests", resource), quantity);
}

int ck_ac_container_limit(ck_patch_t *c, const char *resource, const char *quantity)
{
	return ck_patch_set_string(c, CK_PATH("resources", "limits", resource), quantity);
}

/* ---- Service ---- */

ck_patch_t *ck_ac_service(const char *ns, const char *name)
{
	return ck_patch_new_object(&ck_type_service, ns, name);
}

int ck_ac_service_type(ck_patch_t *s, const char *type)
{
	return ck_patch_set_string(s, CK_PATH("spec", "type"), type);
}

int ck_ac_service_selector(ck_patch_t *s, const char *key, const char *value)
{
	return ck_patch_set_string(s, CK_PATH("spec", "selector", key), value);
}

int ck_ac_service_port(ck_patch_t *s, const char *name, int32_t port, int32_t target_port,
                       const char *protocol)
{
	/* Members in the order the server writes them, so that a body reads like the
	 * object it becomes. */
	ck_patch_t *e = ck_patch_new();
	if (name != NULL)
		ck_patch_set_string(e, CK_PATH("name"), name);
	ck_patch_set_string(e, CK_PATH("protocol"), protocol ? protocol : "TCP");
	ck_patch_set_int(e, CK_PATH("port"), port);
	ck_patch_set_int(e, CK_PATH("targetPort"), target_port ? target_port : port);
	return ck_patch_append(s, CK_PATH("spec", "ports"), e);
}

/* ---- ConfigMap, Secret ---- */

ck_patch_t *ck_ac_configmap(const char *ns, const char *name)
{
	return ck_patch_new_object(&ck_type_configmap, ns, name);
}

int ck_ac_configmap_data(ck_patch_t *cm, const char *key, const char *value)
{
	return ck_patch_set_string(cm, CK_PATH("data", key), value);
}

ck_patch_t *ck_ac_secret(const char *ns, const char *name)
{
	return ck_patch_new_object(&ck_type_secret, ns, name);
}

int ck_ac_secret_type(ck_patch_t *s, const char *type)
{
	return ck_patch_set_string(s, CK_PATH("type"), type);
}

int ck_ac_secret_string_data(ck_patch_t *s, const char *key, const char *value)
{
	return ck_patch_set_string(s, CK_PATH("stringData", key), value);
}

int ck_ac_secret_data(ck_patch_t *s, const char *key, const void *value, size_t len)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_put_base64(&b, value, len);
	int rc = ck_patch_set_stringn(s, CK_PATH("data", key), b.data ? b.data : "", b.len);
	ck_sbuf_free(&b);
	return rc;
}
