/*
 * configmap-hash: hashes each labelled ConfigMap's data, and the data of the
 * Secret its annotation names, into an annotation (configmap-hash.h; main.c says
 * how).
 */
#include "configmap-hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	for (const unsigned char *b = p; n--; b++)
		h = (h ^ *b) * 0x100000001b3ULL;
	return h;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Base64 (a Secret's data) into out, which has room for n bytes. */
static size_t unbase64(const char *in, size_t n, unsigned char *out)
{
	size_t len = 0;
	unsigned acc = 0, bits = 0;
	for (size_t i = 0; i < n; i++) {
		const char *p = in[i] ? strchr(B64, in[i]) : NULL;
		if (p == NULL)
			continue; /* '=' padding */
		acc = acc << 6 | (unsigned)(p - B64);
		if ((bits += 6) >= 8)
			out[len++] = (unsigned char)(acc >> (bits -= 8));
	}
	return len;
}

/* Hashes the map in obj's "data": key, 0, value, 0 for each, keys sorted. */
static uint64_t hash_data(uint64_t h, const ck_obj_t *obj, bool secret)
{
	ck_json_doc_t *doc = ck_json_parse_field_path(obj, "data", NULL);
	const ck_json_t *m = ck_json_root(doc);
	size_t n = ck_json_len(m), *idx = ck_xcalloc(n + 1, sizeof(*idx));
	for (size_t i = 0; i < n; i++) { /* insertion sort of the keys */
		size_t j = i;
		for (;
		     j > 0 && strcmp(ck_json_key(m, idx[j - 1], NULL), ck_json_key(m, i, NULL)) > 0;
		     j--)
			idx[j] = idx[j - 1];
		idx[j] = i;
	}
	for (size_t i = 0; i < n; i++) {
		size_t klen, vlen;
		const char *k = ck_json_key(m, idx[i], &klen), *v;
		if (ck_json_get_string(ck_json_at(m, idx[i]), &v, &vlen) != CK_JSON_OK)
			continue;
		unsigned char *raw = ck_xmalloc(vlen + 1);
		size_t rlen = secret ? unbase64(v, vlen, raw) : (memcpy(raw, v, vlen), vlen);
		h = fnv(fnv(fnv(fnv(h, k, klen), "", 1), raw, rlen), "", 1);
		free(raw);
	}
	free(idx);
	ck_json_doc_free(doc);
	return h;
}

int configmap_hash_reconcile(void *ud, const char *key, char **err)
{
	configmap_hash_t *ctl = ud;
	char *ns = NULL, *name = NULL;
	ck_obj_key_split(key, &ns, &name);
	ck_obj_t *cm = ck_cache_lister_get(ctl->configmaps, ns, name);
	int rc = 0;
	const char *label = cm ? ck_obj_label(cm, CONFIGMAP_HASH_LABEL) : NULL;
	if (label == NULL || strcmp(label, "true") != 0)
		goto out;
	uint64_t h = hash_data(0xcbf29ce484222325ULL, cm, false);
	const char *sname = ck_obj_annotation(cm, CONFIGMAP_HASH_SECRET_ANN);
	ck_obj_t *secret = sname ? ck_cache_lister_get(ctl->secrets, ns, sname) : NULL;
	if (secret != NULL)
		h = hash_data(h, secret, true);
	ck_obj_unref(secret);
	char want[32];
	snprintf(want, sizeof(want), "fnv64a:%016llx", (unsigned long long)h);
	const char *have = ck_obj_annotation(cm, CONFIGMAP_HASH_ANN);
	if (have != NULL && strcmp(have, want) == 0)
		goto out;
	ck_patch_t *p = ck_patch_new();
	ck_patch_set_string(p, CK_PATH("metadata", "annotations", CONFIGMAP_HASH_ANN), want);
	ck_result_t res = {0};
	if (ck_client_merge_patch_sync(ctl->client, &ck_type_configmap, ns, name, p, NULL, &res) !=
	    0) {
		*err = ck_xstrdup(res.error);
		rc = -1;
	} else {
		ck_record_event(ctl->recorder, cm, CK_RECORD_NORMAL, "HashUpdated",
		                "hash is now %s", want);
	}
	ck_result_clear(&res);
	ck_patch_free(p);
out:
	ck_obj_unref(cm);
	free(ns);
	free(name);
	return rc;
}

static void on_configmap(void *ud, ck_controller_t *c, const ck_obj_t *cm)
{
	(void)ud;
	const char *label = ck_obj_label(cm, CONFIGMAP_HASH_LABEL);
	if (label != NULL && strcmp(label, "true") == 0)
		ck_controller_enqueue_obj(c, cm);
}

/* A Secret changed: the labelled ConfigMaps of its namespace that name it. */
static void on_secret(void *ud, ck_controller_t *c, const ck_obj_t *secret)
{
	const configmap_hash_t *ctl = ud;
	ck_cache_objs_t l = {0};
	ck_cache_lister_list_ns(ctl->configmaps, secret->ns, NULL, &l);
	for (size_t i = 0; i < l.n; i++) {
		const char *sname = ck_obj_annotation(l.items[i], CONFIGMAP_HASH_SECRET_ANN);
		if (sname != NULL && strcmp(sname, secret->name) == 0)
			on_configmap(ud, c, l.items[i]);
	}
	ck_cache_objs_free(&l);
}

void configmap_hash_configmap_type(ck_type_t *t)
{
	*t = ck_type_configmap;
	t->keep_annotations = true;
}

void configmap_hash_setup(configmap_hash_t *h, ck_manager_t *m)
{
	configmap_hash_configmap_type(&h->configmap_type);
	ck_controller_t *c =
	    ck_manager_add_controller(m, "ConfigMaps", configmap_hash_reconcile, h);
	h->client = ck_manager_client(m);
	h->recorder = ck_manager_recorder(m);
	h->configmaps = ck_cache_informer_lister(
	    ck_controller_watch_map(c, &h->configmap_type, on_configmap, h));
	h->secrets = ck_cache_informer_lister(
	    ck_controller_watch_map(c, &ck_type_secret_with_data, on_secret, h));
}
