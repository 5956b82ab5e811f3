/*
 * apply: the fake's model of server-side apply -- the applied object merged
 * into the stored one. Objects merge member by member; a list of objects merges
 * element by element when its field has a well-known merge key (as the API's
 * x-kubernetes-list-map-keys say: containers and env by name, conditions by
 * type, container ports by containerPort+protocol, service ports by
 * port+protocol, volumeMounts by mountPath, ownerReferences by uid), finalizers
 * as a set; any other list, and any scalar, is replaced by the applied value.
 *
 * Design note. This is what a controller that applies the fields it owns needs
 * from the server: its fields set, the others' kept. It is not field ownership:
 * there are no managedFields, no conflicts between managers and no removal of a
 * field a manager stopped applying (fake.h says so).
 */
#include "pkg/fake/fake_internal.h"

#include <string.h>

/* The member names that key a list's elements, or NULL (atomic list). */
static const char *const *list_keys(const char *field, const ck_json_t *el)
{
	static const char *const by_name[] = {"name", NULL};
	static const char *const by_type[] = {"type", NULL};
	static const char *const by_cport[] = {"containerPort", "protocol", NULL};
	static const char *const by_port[] = {"port", "protocol", NULL};
	static const char *const by_mount[] = {"mountPath", NULL};
	static const char *const by_uid[] = {"uid", NULL};
	if (field == NULL)
		return NULL;
	if (strcmp(field, "containers") == 0 || strcmp(field, "initContainers") == 0 ||
	    strcmp(field, "ephemeralContainers") == 0 || strcmp(field, "env") == 0 ||
	    strcmp(field, "volumes") == 0 || strcmp(field, "imagePullSecrets") == 0)
		return by_name;
	if (strcmp(field, "conditions") == 0)
		return by_type;
	if (strcmp(field, "ports") == 0)
		return ck_json_member(el, "containerPort", 13) ? by_cport : by_port;
	if (strcmp(field, "volumeMounts") == 0)
		return by_mount;
	if (strcmp(field, "ownerReferences") == 0)
		return by_uid;
	return NULL;
}

/* The element's key as text ("TCP" for an absent protocol, as the API defaults). */
static void elem_key(const ck_json_t *el, const char *const *keys, ck_sbuf_t *out)
{
	for (size_t i = 0; keys[i] != NULL; i++) {
		const ck_json_t *v = ck_json_member(el, keys[i], strlen(keys[i]));
		if (v != NULL)
			ck_json_write(v, out);
		else if (strcmp(keys[i], "protocol") == 0)
			ck_sbuf_puts(out, "\"TCP\"");
		ck_sbuf_putc(out, '|');
	}
}

static const ck_json_t *find_elem(const ck_json_t *arr, const char *const *keys, const char *key)
{
	for (size_t i = 0; i < ck_json_len(arr); i++) {
		ck_sbuf_t k = CK_SBUF_INIT;
		elem_key(ck_json_at(arr, i), keys, &k);
		bool eq = strcmp(ck_sbuf_cstr(&k), key) == 0;
		ck_sbuf_free(&k);
		if (eq)
			return ck_json_at(arr, i);
	}
	return NULL;
}

static bool in_array(const ck_json_t *arr, const ck_json_t *v)
{
	for (size_t i = 0; i < ck_json_len(arr); i++)
		if (ck_json_equal(ck_json_at(arr, i), v))
			return true;
	return false;
}

static void merge_list(const ck_json_t *live, const ck_json_t *applied, const char *field,
                       ck_sbuf_t *out)
{
	const ck_json_t *first =
	    ck_json_at(applied, 0) ? ck_json_at(applied, 0) : ck_json_at(live, 0);
	bool set = field != NULL && strcmp(field, "finalizers") == 0;
	const char *const *keys =
	    ck_json_type(first) == CK_JSON_OBJECT ? list_keys(field, first) : NULL;
	if (ck_json_type(live) != CK_JSON_ARRAY || (!set && keys == NULL)) {
		ck_json_write(applied, out);
		return;
	}
	size_t n = 0;
	ck_sbuf_putc(out, '[');
	for (size_t i = 0; i < ck_json_len(live); i++) {
		const ck_json_t *el = ck_json_at(live, i);
		if (n++)
			ck_sbuf_putc(out, ',');
		if (set) {
			ck_json_write(el, out);
			continue;
		}
		ck_sbuf_t k = CK_SBUF_INIT;
		elem_key(el, keys, &k);
		fake_apply_merge(el, find_elem(applied, keys, ck_sbuf_cstr(&k)), NULL, out);
		ck_sbuf_free(&k);
	}
	for (size_t i = 0; i < ck_json_len(applied); i++) {
		const ck_json_t *el = ck_json_at(applied, i);
		bool known;
		if (set) {
			known = in_array(live, el);
		} else {
			ck_sbuf_t k = CK_SBUF_INIT;
			elem_key(el, keys, &k);
			known = find_elem(live, keys, ck_sbuf_cstr(&k)) != NULL;
			ck_sbuf_free(&k);
		}
		if (known)
			continue;
		if (n++)
			ck_sbuf_putc(out, ',');
		ck_json_write(el, out);
	}
	ck_sbuf_putc(out, ']');
}

void fake_apply_merge(const ck_json_t *live, const ck_json_t *applied, const char *field,
                      ck_sbuf_t *out)
{
	if (applied == NULL) {
		if (live != NULL)
			ck_json_write(live, out);
		else
			ck_sbuf_puts(out, "null");
		return;
	}
	if (ck_json_type(applied) == CK_JSON_ARRAY) {
		merge_list(live, applied, field, out);
		return;
	}
	if (ck_json_type(applied) != CK_JSON_OBJECT) {
		ck_json_write(applied, out);
		return;
	}
	/* An object onto anything but an object: the applied members alone (a live
	 * scalar has no members to keep). */
	size_t n = 0;
	ck_sbuf_putc(out, '{');
	for (size_t i = 0; i < ck_json_len(live); i++) {
		size_t kl = 0;
		const char *k = ck_json_key(live, i, &kl);
		const ck_json_t *av = ck_json_member(applied, k, kl);
		if (ck_json_is_null(av))
			continue; /* an applied null removes the field */
		if (n++)
			ck_sbuf_putc(out, ',');
		ck_sbuf_put_json_strn(out, k, kl);
		ck_sbuf_putc(out, ':');
		fake_apply_merge(ck_json_at(live, i), av, k, out);
	}
	for (size_t i = 0; i < ck_json_len(applied); i++) {
		size_t kl = 0;
		const char *k = ck_json_key(applied, i, &kl);
		const ck_json_t *av = ck_json_at(applied, i);
		if (ck_json_member(live, k, kl) != NULL || ck_json_is_null(av))
			continue;
		if (n++)
			ck_sbuf_putc(out, ',');
		ck_sbuf_put_json_strn(out, k, kl);
		ck_sbuf_putc(out, ':');
		ck_json_write(av, out);
	}
	ck_sbuf_putc(out, '}');
}
