/*
 * foo_sync: the JSON sample-controller writes for a Foo, and the status it
 * compares with, on top of the generated Foo kind.
 */
#include "cmd/sample-controller/foo_sync.h"

#include <ckube/applyconfig.h>
#include <ckube/controllerutil.h>
#include <ckube/json.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Copies s (NULL reads as "") into dst (cap bytes), cut like what we write. */
static void copy_str(char *dst, size_t cap, const char *s)
{
	if (s == NULL)
		s = "";
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
	foo_status_t st;
	bool found = false;
	/* Through the generated struct: status.conditions as typed items. */
	if (foo_status_get(foo, &st, NULL) != 0)
		goto out;
	for (size_t i = 0; i < st.conditions_len; i++) {
		const foo_status_conditions_item_t *c = &st.conditions[i];
		if (c->type == NULL || strcmp(c->type, type) != 0)
			continue;
		copy_str(out->status, sizeof(out->status), c->status);
		copy_str(out->reason, sizeof(out->reason), c->reason);
		copy_str(out->message, sizeof(out->message), c->message);
		copy_str(out->last_transition_time, sizeof(out->last_transition_time),
		         c->last_transition_time);
		out->observed_generation = c->observed_generation;
		found = true;
		break;
	}
out:
	foo_status_clear(&st);
	return found;
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

ck_patch_t *foo_new_deployment(const ck_obj_t *foo, char **err)
{
	const char *dname = foo_spec_deployment_name(foo);
	int64_t replicas = 0;
	bool has_replicas = foo_spec_replicas(foo, &replicas);
	if (has_replicas && (replicas < 0 || replicas > INT32_MAX)) {
		ck_err_set(err, "spec.replicas: %lld is not an int32", (long long)replicas);
		return NULL;
	}
	/* Set in the order of the hand-written body this replaced, so that the bytes
	 * sent did not change (test_new_deployment_bytes). The owner references are
	 * the Foo's alone, as upstream's newDeployment sets them (existing NULL). */
	ck_patch_t *d = ck_ac_deployment(foo->ns, dname ? dname : "");
	ck_ac_label(d, "app", "nginx");
	ck_ac_label(d, "controller", foo->name);
	if (ck_patch_set_controller_reference(d, foo, NULL, err) != 0)
		goto fail;
	if (has_replicas)
		ck_ac_deployment_replicas(d, (int32_t)replicas);
	ck_ac_deployment_selector(d, "app", "nginx");
	ck_ac_deployment_selector(d, "controller", foo->name);
	ck_ac_deployment_template_label(d, "app", "nginx");
	ck_ac_deployment_template_label(d, "controller", foo->name);
	ck_ac_deployment_container(d, ck_ac_container("nginx", "nginx:latest"));
	if (ck_patch_error(d) == NULL)
		return d;
	ck_err_set(err, "deployment of foo %s/%s: %s", foo->ns, foo->name, ck_patch_error(d));
fail:
	ck_patch_free(d);
	return NULL;
}

bool foo_status_equal(const ck_obj_t *foo, const foo_desired_status_t *st)
{
	int64_t avail, gen;
	foo_status_available_replicas(foo, &avail);
	foo_status_observed_generation(foo, &gen);
	if (avail != st->available_replicas || gen != st->observed_generation)
		return false;
	foo_condition_t c;
	if (!foo_condition_get(foo, "Ready", &c))
		return false;
	return strcmp(c.status, st->ready_status) == 0 &&
	       cut_equal(c.reason, st->ready_reason, FOO_CONDITION_REASON_MAX) &&
	       cut_equal(c.message, st->ready_message, FOO_CONDITION_MESSAGE_MAX) &&
	       c.observed_generation == st->observed_generation;
}

/* Appends our Ready condition, reason and message cut as foo_sync.h says. */
static void put_ready(ck_sbuf_t *out, const foo_desired_status_t *st, const char *ltt)
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

void foo_status_update_json(const ck_obj_t *foo, const foo_desired_status_t *st,
                            int64_t now_wall_ns, ck_sbuf_t *out)
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
	 * unchanged and in place (as kept text, byte for byte), and replace only Ready
	 * (its duplicates dropped: the list is a map keyed by type). The kept field
	 * holds the whole array. */
	const char *text = foo_status_conditions_json(foo);
	ck_json_doc_t *d = text ? ck_json_parse(text, strlen(text), NULL) : NULL;
	const ck_json_t *root = ck_json_root(d);
	size_t n = ck_json_type(root) == CK_JSON_ARRAY ? ck_json_len(root) : 0;
	bool ready_done = false, first = true;
	for (size_t i = 0; i < n; i++) {
		const ck_json_t *c = ck_json_at(root, i);
		const char *ts = ck_json_str(ck_json_get(c, CK_PATH("type")));
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
			ck_json_write(c, out);
		}
	}
	if (!ready_done) {
		if (!first)
			ck_sbuf_putc(out, ',');
		put_ready(out, st, ltt);
	}
	ck_sbuf_puts(out, "]}}");
	ck_json_doc_free(d);
}
