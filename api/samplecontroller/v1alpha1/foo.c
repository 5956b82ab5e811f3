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

const ck_type_t ktype_foo = {
    .group = FOO_GROUP,
    .version = FOO_VERSION,
    .kind = FOO_KIND,
    .resource = "foos",
    .namespaced = true,
    .fields = foo_fields,
    .nfields = FOO_NFIELDS,
    .keep_annotations = false,
};

const char *foo_spec_deployment_name(const ck_obj_t *foo)
{
	const ck_val_t *v = ck_obj_field(foo, FOO_SPEC_DEPLOYMENT_NAME);
	return v->type == CK_VAL_STRING ? v->u.s : "";
}

bool foo_spec_replicas(const ck_obj_t *foo, int64_t *out)
{
	const ck_val_t *v = ck_obj_field(foo, FOO_SPEC_REPLICAS);
	if (v->type != CK_VAL_INT)
		return false;
	*out = v->u.i;
	return true;
}

static int64_t int_field(const ck_obj_t *o, size_t i)
{
	const ck_val_t *v = ck_obj_field(o, i);
	return v->type == CK_VAL_INT ? v->u.i : 0;
}

int64_t foo_status_available_replicas(const ck_obj_t *foo)
{
	return int_field(foo, FOO_STATUS_AVAILABLE_REPLICAS);
}

int64_t foo_status_observed_generation(const ck_obj_t *foo)
{
	return int_field(foo, FOO_STATUS_OBSERVED_GENERATION);
}

/*
 * Returns the length of the longest prefix of s of at most max bytes that does
 * not end inside a UTF-8 sequence. A cut mid-character would be invalid UTF-8,
 * which the API server replaces with U+FFFD: what we read back would then never
 * equal what we wrote.
 */
static size_t utf8_cut_len(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);
	if (n <= max)
		return n;
	/* s[max] is the first byte left out: back up while it continues a character. */
	while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
		max--;
	return max;
}

/* Copies the string v into dst (cap bytes), cut like what we write. */
static void copy_str(char *dst, size_t cap, yajl_val v)
{
	const char *s = YAJL_IS_STRING(v) ? YAJL_GET_STRING(v) : "";
	size_t n = utf8_cut_len(s, cap - 1);
	memcpy(dst, s, n);
	dst[n] = '\0';
}

/* true if got (as read back, already cut) is want once cut to max bytes. */
static bool cut_equal(const char *got, const char *want, size_t max)
{
	size_t n = utf8_cut_len(want, max);
	return strlen(got) == n && memcmp(got, want, n) == 0;
}

bool foo_condition_get(const ck_obj_t *foo, const char *type, foo_condition_t *out)
{
	memset(out, 0, sizeof(*out));
	const ck_val_t *v = ck_obj_field(foo, FOO_STATUS_CONDITIONS);
	if (v->type != CK_VAL_JSON)
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

int foo_validate_name(const ck_obj_t *foo, char **err)
{
	size_t n = strlen(foo->name);
	if (n <= FOO_NAME_MAX)
		return 0;
	return ck_err_set(err,
	                  "metadata.name: %zu characters, at most %d: the Deployment carries it "
	                  "as the value of its \"controller\" label",
	                  n, FOO_NAME_MAX);
}

int foo_validate_spec(const ck_obj_t *foo, char **err)
{
	const ck_val_t *name = ck_obj_field(foo, FOO_SPEC_DEPLOYMENT_NAME);
	if (name->type != CK_VAL_ABSENT && name->type != CK_VAL_NULL && name->type != CK_VAL_STRING)
		return ck_err_set(err, "spec.deploymentName: must be a string");
	if (name->type == CK_VAL_STRING && name->u.s[0] != '\0' &&
	    !dns1123_subdomain_valid(name->u.s)) {
		/* The message becomes the Ready condition's: quote at most a valid name's
		 * length so that it always fits FOO_CONDITION_MESSAGE_MAX, whole. */
		size_t n = utf8_cut_len(name->u.s, 253);
		char more[48] = "";
		if (name->u.s[n] != '\0')
			snprintf(more, sizeof(more), "...\" (%zu bytes)", strlen(name->u.s));
		else
			snprintf(more, sizeof(more), "\"");
		return ck_err_set(err,
		                  "spec.deploymentName: \"%.*s%s is not a valid DNS-1123 subdomain "
		                  "(lower case alphanumerics, '-' and '.', at most 253 characters)",
		                  (int)n, name->u.s, more);
	}
	const ck_val_t *rep = ck_obj_field(foo, FOO_SPEC_REPLICAS);
	if (rep->type == CK_VAL_ABSENT || rep->type == CK_VAL_NULL)
		return 0;
	if (rep->type != CK_VAL_INT)
		return ck_err_set(err, "spec.replicas: must be an integer");
	if (rep->u.i < 1 || rep->u.i > 10)
		return ck_err_set(err, "spec.replicas: %lld is not in 1..10", (long long)rep->u.i);
	return 0;
}

void foo_new_deployment_json(const ck_obj_t *foo, ck_sbuf_t *out)
{
	const char *dname = foo_spec_deployment_name(foo);
	int64_t replicas = 0;
	bool has_replicas = foo_spec_replicas(foo, &replicas);

	ck_sbuf_puts(out,
	             "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":");
	ck_sbuf_put_json_str(out, dname);
	ck_sbuf_puts(out, ",\"namespace\":");
	ck_sbuf_put_json_str(out, foo->ns);
	ck_sbuf_puts(out, ",\"labels\":{\"app\":\"nginx\",\"controller\":");
	ck_sbuf_put_json_str(out, foo->name);
	ck_sbuf_puts(out, "},\"ownerReferences\":[{\"apiVersion\":\"" FOO_API_VERSION
	                  "\",\"kind\":\"" FOO_KIND "\",\"name\":");
	ck_sbuf_put_json_str(out, foo->name);
	ck_sbuf_puts(out, ",\"uid\":");
	ck_sbuf_put_json_str(out, foo->uid);
	ck_sbuf_puts(out, ",\"controller\":true,\"blockOwnerDeletion\":true}]},\"spec\":{");
	if (has_replicas)
		ck_sbuf_printf(out, "\"replicas\":%lld,", (long long)replicas);
	ck_sbuf_puts(out, "\"selector\":{\"matchLabels\":{\"app\":\"nginx\",\"controller\":");
	ck_sbuf_put_json_str(out, foo->name);
	ck_sbuf_puts(
	    out, "}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"nginx\",\"controller\":");
	ck_sbuf_put_json_str(out, foo->name);
	ck_sbuf_puts(
	    out,
	    "}},\"spec\":{\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx:latest\"}]}}}}");
}

bool foo_status_equal(const ck_obj_t *foo, const foo_status_t *st)
{
	if (foo_status_available_replicas(foo) != st->available_replicas)
		return false;
	if (foo_status_observed_generation(foo) != st->observed_generation)
		return false;
	foo_condition_t c;
	if (!foo_condition_get(foo, "Ready", &c))
		return false;
	return strcmp(c.status, st->ready_status) == 0 &&
	       cut_equal(c.reason, st->ready_reason, FOO_CONDITION_REASON_MAX) &&
	       cut_equal(c.message, st->ready_message, FOO_CONDITION_MESSAGE_MAX) &&
	       c.observed_generation == st->observed_generation;
}

/*
 * Appends v as JSON. Numbers keep their original text, so nothing is rounded.
 * Recursive: v comes from a kept field, which the decoder refused to nest deeper
 * than CK_DEC_MAX_DEPTH, so the depth (and the stack) is bounded.
 */
static void put_json(ck_sbuf_t *out, yajl_val v)
{
	if (YAJL_IS_STRING(v)) {
		ck_sbuf_put_json_str(out, YAJL_GET_STRING(v));
	} else if (YAJL_IS_NUMBER(v)) {
		ck_sbuf_puts(out, YAJL_GET_NUMBER(v));
	} else if (YAJL_IS_OBJECT(v)) {
		ck_sbuf_putc(out, '{');
		for (size_t i = 0; i < YAJL_GET_OBJECT(v)->len; i++) {
			if (i > 0)
				ck_sbuf_putc(out, ',');
			ck_sbuf_put_json_str(out, YAJL_GET_OBJECT(v)->keys[i]);
			ck_sbuf_putc(out, ':');
			put_json(out, YAJL_GET_OBJECT(v)->values[i]);
		}
		ck_sbuf_putc(out, '}');
	} else if (YAJL_IS_ARRAY(v)) {
		ck_sbuf_putc(out, '[');
		for (size_t i = 0; i < YAJL_GET_ARRAY(v)->len; i++) {
			if (i > 0)
				ck_sbuf_putc(out, ',');
			put_json(out, YAJL_GET_ARRAY(v)->values[i]);
		}
		ck_sbuf_putc(out, ']');
	} else if (YAJL_IS_TRUE(v)) {
		ck_sbuf_puts(out, "true");
	} else if (YAJL_IS_FALSE(v)) {
		ck_sbuf_puts(out, "false");
	} else {
		ck_sbuf_puts(out, "null");
	}
}

/* Appends our Ready condition, reason and message cut as foo.h says. */
static void put_ready(ck_sbuf_t *out, const foo_status_t *st, const char *ltt)
{
	ck_sbuf_puts(out, "{\"type\":\"Ready\",\"status\":");
	ck_sbuf_put_json_str(out, st->ready_status);
	ck_sbuf_puts(out, ",\"reason\":");
	ck_sbuf_put_json_strn(out, st->ready_reason,
	                      utf8_cut_len(st->ready_reason, FOO_CONDITION_REASON_MAX));
	ck_sbuf_puts(out, ",\"message\":");
	ck_sbuf_put_json_strn(out, st->ready_message,
	                      utf8_cut_len(st->ready_message, FOO_CONDITION_MESSAGE_MAX));
	ck_sbuf_puts(out, ",\"lastTransitionTime\":");
	ck_sbuf_put_json_str(out, ltt);
	ck_sbuf_printf(out, ",\"observedGeneration\":%lld}", (long long)st->observed_generation);
}

void foo_status_update_json(const ck_obj_t *foo, const foo_status_t *st, int64_t now_wall_ns,
                            ck_sbuf_t *out)
{
	foo_condition_t cur;
	char ltt[40];
	if (foo_condition_get(foo, "Ready", &cur) && strcmp(cur.status, st->ready_status) == 0 &&
	    cur.last_transition_time[0] != '\0') {
		snprintf(ltt, sizeof(ltt), "%s", cur.last_transition_time);
	} else {
		ck_time_format_rfc3339(now_wall_ns, ltt);
	}
	ck_sbuf_puts(out, "{\"apiVersion\":\"" FOO_API_VERSION "\",\"kind\":\"" FOO_KIND
	                  "\",\"metadata\":{\"name\":");
	ck_sbuf_put_json_str(out, foo->name);
	ck_sbuf_puts(out, ",\"namespace\":");
	ck_sbuf_put_json_str(out, foo->ns);
	ck_sbuf_puts(out, ",\"resourceVersion\":");
	ck_sbuf_put_json_str(out, foo->rv);
	ck_sbuf_printf(out, "},\"status\":{\"availableReplicas\":%lld,\"observedGeneration\":%lld,",
	               (long long)st->available_replicas, (long long)st->observed_generation);
	ck_sbuf_puts(out, "\"conditions\":[");

	/* The PUT replaces status.conditions whole: re-emit what other writers set,
	 * unchanged and in place, and replace only Ready (its duplicates dropped: the
	 * list is a map keyed by type). The kept field holds the whole array. */
	const ck_val_t *v = ck_obj_field(foo, FOO_STATUS_CONDITIONS);
	yajl_val root = v->type == CK_VAL_JSON ? yajl_tree_parse(v->u.s, NULL, 0) : NULL;
	size_t n = YAJL_IS_ARRAY(root) ? YAJL_GET_ARRAY(root)->len : 0;
	bool ready_done = false, first = true;
	for (size_t i = 0; i < n; i++) {
		yajl_val c = YAJL_GET_ARRAY(root)->values[i];
		const char *tp[] = {"type", NULL};
		yajl_val t = yajl_tree_get(c, tp, yajl_t_string);
		const char *ts = t ? YAJL_GET_STRING(t) : NULL;
		bool is_ready = ts != NULL && strcmp(ts, "Ready") == 0;
		if (is_ready && ready_done)
			continue;
		if (!first)
			ck_sbuf_putc(out, ',');
		first = false;
		if (is_ready) {
			put_ready(out, st, ltt);
			ready_done = true;
		} else {
			put_json(out, c);
		}
	}
	if (!ready_done) {
		if (!first)
			ck_sbuf_putc(out, ',');
		put_ready(out, st, ltt);
	}
	ck_sbuf_puts(out, "]}}");
	yajl_tree_free(root);
}
