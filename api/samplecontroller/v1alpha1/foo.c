/*
 * Foo: descriptor, accessors and the JSON the controller writes.
 */
#include "api/samplecontroller/v1alpha1/foo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

static const char *const foo_fields[FOO_NFIELDS] = {
    [FOO_SPEC_DEPLOYMENT_NAME] = "spec.deploymentName",
    [FOO_SPEC_REPLICAS] = "spec.replicas",
    [FOO_STATUS_AVAILABLE_REPLICAS] = "status.availableReplicas",
    [FOO_STATUS_OBSERVED_GENERATION] = "status.observedGeneration",
    [FOO_STATUS_CONDITIONS] = "status.conditions",
};

const ktype_t ktype_foo = {
    .group = FOO_GROUP,
    .version = FOO_VERSION,
    .kind = FOO_KIND,
    .resource = "foos",
    .namespaced = true,
    .fields = foo_fields,
    .nfields = FOO_NFIELDS,
    .keep_annotations = false,
};

const char *foo_spec_deployment_name(const kobj_t *foo)
{
	const kval_t *v = kobj_field(foo, FOO_SPEC_DEPLOYMENT_NAME);
	return v->type == KVAL_STRING ? v->u.s : "";
}

bool foo_spec_replicas(const kobj_t *foo, int64_t *out)
{
	const kval_t *v = kobj_field(foo, FOO_SPEC_REPLICAS);
	if (v->type != KVAL_INT)
		return false;
	*out = v->u.i;
	return true;
}

static int64_t int_field(const kobj_t *o, size_t i)
{
	const kval_t *v = kobj_field(o, i);
	return v->type == KVAL_INT ? v->u.i : 0;
}

int64_t foo_status_available_replicas(const kobj_t *foo)
{
	return int_field(foo, FOO_STATUS_AVAILABLE_REPLICAS);
}

int64_t foo_status_observed_generation(const kobj_t *foo)
{
	return int_field(foo, FOO_STATUS_OBSERVED_GENERATION);
}

static void copy_str(char *dst, size_t cap, yajl_val v)
{
	dst[0] = '\0';
	const char *s = YAJL_IS_STRING(v) ? YAJL_GET_STRING(v) : NULL;
	if (s != NULL)
		snprintf(dst, cap, "%s", s);
}

bool foo_condition_get(const kobj_t *foo, const char *type, foo_condition_t *out)
{
	memset(out, 0, sizeof(*out));
	const kval_t *v = kobj_field(foo, FOO_STATUS_CONDITIONS);
	if (v->type != KVAL_JSON)
		return false;
	bool found = false;
	yajl_val root = yajl_tree_parse(v->u.s, NULL, 0);
	if (!YAJL_IS_ARRAY(root))
		goto out;
	for (size_t i = 0; i < YAJL_GET_ARRAY(root)->len; i++) {
		yajl_val c = YAJL_GET_ARRAY(root)->values[i];
		const char *tp[] = {"type", NULL};
		yajl_val t = yajl_tree_get(c, tp, yajl_t_string);
		const char *ts = t ? YAJL_GET_STRING(t) : NULL;
		if (ts == NULL || strcmp(ts, type) != 0)
			continue;
		const char *sp[] = {"status", NULL}, *rp[] = {"reason", NULL},
		           *mp[] = {"message", NULL}, *lp[] = {"lastTransitionTime", NULL},
		           *gp[] = {"observedGeneration", NULL};
		copy_str(out->status, sizeof(out->status), yajl_tree_get(c, sp, yajl_t_string));
		copy_str(out->reason, sizeof(out->reason), yajl_tree_get(c, rp, yajl_t_string));
		copy_str(out->message, sizeof(out->message), yajl_tree_get(c, mp, yajl_t_string));
		copy_str(out->last_transition_time, sizeof(out->last_transition_time),
		         yajl_tree_get(c, lp, yajl_t_string));
		yajl_val g = yajl_tree_get(c, gp, yajl_t_number);
		if (g != NULL && YAJL_IS_INTEGER(g))
			out->observed_generation = YAJL_GET_INTEGER(g);
		found = true;
		break;
	}
out:
	yajl_tree_free(root);
	return found;
}

bool dns1123_subdomain_valid(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 253)
		return false;
	/* Labels of [a-z0-9-], each starting and ending alphanumeric, joined by dots. */
	size_t label = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (c == '.') {
			if (label == 0 || s[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!alnum && c != '-')
			return false;
		if (label == 0 && c == '-')
			return false;
		label++;
	}
	return s[n - 1] != '-' && s[n - 1] != '.';
}

int foo_validate_spec(const kobj_t *foo, char **err)
{
	const kval_t *name = kobj_field(foo, FOO_SPEC_DEPLOYMENT_NAME);
	if (name->type != KVAL_ABSENT && name->type != KVAL_NULL && name->type != KVAL_STRING)
		return err_set(err, "spec.deploymentName: must be a string");
	if (name->type == KVAL_STRING && name->u.s[0] != '\0' &&
	    !dns1123_subdomain_valid(name->u.s))
		return err_set(err,
		               "spec.deploymentName: \"%s\" is not a valid DNS-1123 subdomain "
		               "(lower case alphanumerics, '-' and '.', at most 253 characters)",
		               name->u.s);
	const kval_t *rep = kobj_field(foo, FOO_SPEC_REPLICAS);
	if (rep->type == KVAL_ABSENT || rep->type == KVAL_NULL)
		return 0;
	if (rep->type != KVAL_INT)
		return err_set(err, "spec.replicas: must be an integer");
	if (rep->u.i < 1 || rep->u.i > 10)
		return err_set(err, "spec.replicas: %lld is not in 1..10", (long long)rep->u.i);
	return 0;
}

void foo_new_deployment_json(const kobj_t *foo, sbuf_t *out)
{
	const char *dname = foo_spec_deployment_name(foo);
	int64_t replicas = 0;
	bool has_replicas = foo_spec_replicas(foo, &replicas);

	sbuf_puts(out,
	          "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":");
	sbuf_put_json_str(out, dname);
	sbuf_puts(out, ",\"namespace\":");
	sbuf_put_json_str(out, foo->ns);
	sbuf_puts(out, ",\"labels\":{\"app\":\"nginx\",\"controller\":");
	sbuf_put_json_str(out, foo->name);
	sbuf_puts(out, "},\"ownerReferences\":[{\"apiVersion\":\"" FOO_API_VERSION
	               "\",\"kind\":\"" FOO_KIND "\",\"name\":");
	sbuf_put_json_str(out, foo->name);
	sbuf_puts(out, ",\"uid\":");
	sbuf_put_json_str(out, foo->uid);
	sbuf_puts(out, ",\"controller\":true,\"blockOwnerDeletion\":true}]},\"spec\":{");
	if (has_replicas)
		sbuf_printf(out, "\"replicas\":%lld,", (long long)replicas);
	sbuf_puts(out, "\"selector\":{\"matchLabels\":{\"app\":\"nginx\",\"controller\":");
	sbuf_put_json_str(out, foo->name);
	sbuf_puts(out,
	          "}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"nginx\",\"controller\":");
	sbuf_put_json_str(out, foo->name);
	sbuf_puts(
	    out,
	    "}},\"spec\":{\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx:latest\"}]}}}}");
}

bool foo_status_equal(const kobj_t *foo, const foo_status_t *st)
{
	if (foo_status_available_replicas(foo) != st->available_replicas)
		return false;
	if (foo_status_observed_generation(foo) != st->observed_generation)
		return false;
	foo_condition_t c;
	if (!foo_condition_get(foo, "Ready", &c))
		return false;
	return strcmp(c.status, st->ready_status) == 0 && strcmp(c.reason, st->ready_reason) == 0 &&
	       strcmp(c.message, st->ready_message) == 0 &&
	       c.observed_generation == st->observed_generation;
}

void foo_status_update_json(const kobj_t *foo, const foo_status_t *st, int64_t now_wall_ns,
                            sbuf_t *out)
{
	foo_condition_t cur;
	char ltt[40];
	if (foo_condition_get(foo, "Ready", &cur) && strcmp(cur.status, st->ready_status) == 0 &&
	    cur.last_transition_time[0] != '\0') {
		snprintf(ltt, sizeof(ltt), "%s", cur.last_transition_time);
	} else {
		time_format_rfc3339(now_wall_ns, ltt);
	}
	sbuf_puts(out, "{\"apiVersion\":\"" FOO_API_VERSION "\",\"kind\":\"" FOO_KIND
	               "\",\"metadata\":{\"name\":");
	sbuf_put_json_str(out, foo->name);
	sbuf_puts(out, ",\"namespace\":");
	sbuf_put_json_str(out, foo->ns);
	sbuf_puts(out, ",\"resourceVersion\":");
	sbuf_put_json_str(out, foo->rv);
	sbuf_printf(out, "},\"status\":{\"availableReplicas\":%lld,\"observedGeneration\":%lld,",
	            (long long)st->available_replicas, (long long)st->observed_generation);
	sbuf_puts(out, "\"conditions\":[{\"type\":\"Ready\",\"status\":");
	sbuf_put_json_str(out, st->ready_status);
	sbuf_puts(out, ",\"reason\":");
	sbuf_put_json_str(out, st->ready_reason);
	sbuf_puts(out, ",\"message\":");
	sbuf_put_json_str(out, st->ready_message);
	sbuf_puts(out, ",\"lastTransitionTime\":");
	sbuf_put_json_str(out, ltt);
	sbuf_printf(out, ",\"observedGeneration\":%lld}]}}", (long long)st->observed_generation);
}
