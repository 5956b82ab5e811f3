/*
 * conditions: set, find and remove status conditions in JSON (see
 * <ckube/conditions.h>). The input array is copied element by element with
 * ck_json_write, so what this file does not touch keeps its exact text.
 */
#include <ckube/conditions.h>

#include <stdlib.h>
#include <string.h>

static const ck_json_t *find(const ck_json_t *conds, const char *type)
{
	if (type == NULL)
		return NULL;
	for (size_t i = 0; i < ck_json_len(conds); i++) {
		const ck_json_t *c = ck_json_at(conds, i);
		const char *t = ck_json_str(ck_json_get(c, CK_PATH("type")));
		if (t != NULL && strcmp(t, type) == 0)
			return c;
	}
	return NULL;
}

static int check_array(const ck_json_t *conds, char **err)
{
	ck_json_type_t t = ck_json_type(conds);
	if (t == CK_JSON_ABSENT || t == CK_JSON_NULL || t == CK_JSON_ARRAY)
		return 0;
	return ck_err_set(err, "conditions: status.conditions is %s, not an array",
	                  ck_json_type_name(t));
}

/* Reads element c into out; the strings are borrowed from c. */
static void read_cond(const ck_json_t *c, ck_condition_t *out)
{
	memset(out, 0, sizeof(*out));
	out->type = ck_json_str(ck_json_get(c, CK_PATH("type")));
	out->status = ck_json_str(ck_json_get(c, CK_PATH("status")));
	out->reason = ck_json_str(ck_json_get(c, CK_PATH("reason")));
	out->message = ck_json_str(ck_json_get(c, CK_PATH("message")));
	out->last_transition_time = ck_json_str(ck_json_get(c, CK_PATH("lastTransitionTime")));
	int64_t g = 0;
	if (ck_json_get_int64(ck_json_get(c, CK_PATH("observedGeneration")), &g) == CK_JSON_OK)
		out->observed_generation = g;
}

bool ck_conditions_find(const ck_json_t *conditions, const char *type, ck_condition_t *out)
{
	const ck_json_t *c = find(conditions, type);
	if (c == NULL)
		return false;
	read_cond(c, out);
	return true;
}

static bool has_status(const ck_json_t *conds, const char *type, const char *status)
{
	ck_condition_t c;
	return ck_conditions_find(conds, type, &c) && c.status != NULL &&
	       strcmp(c.status, status) == 0;
}

bool ck_conditions_is_true(const ck_json_t *conditions, const char *type)
{
	return has_status(conditions, type, "True");
}

bool ck_conditions_is_false(const ck_json_t *conditions, const char *type)
{
	return has_status(conditions, type, "False");
}

static bool str_eq(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

/* RFC 3339 in UTC to the second, as metav1.Time is serialised. */
static void put_now(ck_sbuf_t *out, const ck_clk_t *clk)
{
	char buf[32];
	ck_time_format_rfc3339(ck_clk_wall_ns(clk ? clk : ck_clk_real()), buf);
	ck_sbuf_put_json_str(out, buf);
}

/* The new element: known members in metav1.Condition's order, then the others
 * the old element had. */
static void put_cond(ck_sbuf_t *out, const ck_condition_t *c, const ck_json_t *old, bool transition,
                     const ck_clk_t *clk)
{
	ck_sbuf_puts(out, "{\"type\":");
	ck_sbuf_put_json_str(out, c->type);
	ck_sbuf_puts(out, ",\"status\":");
	ck_sbuf_put_json_str(out, c->status);
	if (c->observed_generation != 0)
		ck_sbuf_printf(out, ",\"observedGeneration\":%lld",
		               (long long)c->observed_generation);
	ck_sbuf_puts(out, ",\"lastTransitionTime\":");
	const ck_json_t *ltt = ck_json_get(old, CK_PATH("lastTransitionTime"));
	if (!transition && ck_json_type(ltt) == CK_JSON_STRING)
		ck_json_write(ltt, out);
	else
		put_now(out, clk);
	ck_sbuf_puts(out, ",\"reason\":");
	ck_sbuf_put_json_str(out, c->reason ? c->reason : "");
	ck_sbuf_puts(out, ",\"message\":");
	ck_sbuf_put_json_str(out, c->message ? c->message : "");
	static const char *const known[] = {"type",   "status",  "observedGeneration",
	                                    "reason", "message", "lastTransitionTime"};
	for (size_t i = 0; i < ck_json_len(old); i++) {
		size_t kl;
		const char *k = ck_json_key(old, i, &kl);
		bool skip = false;
		for (size_t j = 0; j < CK_ARRAY_LEN(known) && !skip; j++)
			skip = kl == strlen(known[j]) && memcmp(k, known[j], kl) == 0;
		if (skip)
			continue;
		ck_sbuf_putc(out, ',');
		ck_sbuf_put_json_strn(out, k, kl);
		ck_sbuf_putc(out, ':');
		ck_json_write(ck_json_at(old, i), out);
	}
	ck_sbuf_putc(out, '}');
}

int ck_conditions_set(const ck_json_t *conditions, const ck_condition_t *cond, const ck_clk_t *clk,
                      ck_sbuf_t *out, bool *changed, char **err)
{
	if (cond == NULL || cond->type == NULL || cond->type[0] == '\0')
		return ck_err_set(err, "conditions: a condition needs a type");
	if (cond->status == NULL ||
	    (strcmp(cond->status, "True") != 0 && strcmp(cond->status, "False") != 0 &&
	     strcmp(cond->status, "Unknown") != 0))
		return ck_err_set(err,
		                  "conditions: condition %s: status \"%s\" is not True, False or "
		                  "Unknown",
		                  cond->type, cond->status ? cond->status : "(null)");
	if (check_array(conditions, err) < 0)
		return -1;
	const ck_json_t *old = find(conditions, cond->type);
	ck_condition_t cur = {0};
	if (old != NULL)
		read_cond(old, &cur);
	bool transition = old == NULL || !str_eq(cur.status, cond->status);
	bool differ = transition || !str_eq(cur.reason, cond->reason) ||
	              !str_eq(cur.message, cond->message) ||
	              cur.observed_generation != cond->observed_generation ||
	              cur.last_transition_time == NULL;
	if (changed != NULL)
		*changed = differ;
	ck_sbuf_putc(out, '[');
	size_t n = 0;
	for (size_t i = 0; i < ck_json_len(conditions); i++) {
		const ck_json_t *c = ck_json_at(conditions, i);
		if (n++ > 0)
			ck_sbuf_putc(out, ',');
		if (c == old)
			put_cond(out, cond, old, transition, clk);
		else
			ck_json_write(c, out);
	}
	if (old == NULL) {
		if (n > 0)
			ck_sbuf_putc(out, ',');
		put_cond(out, cond, NULL, true, clk);
	}
	ck_sbuf_putc(out, ']');
	return 0;
}

int ck_conditions_remove(const ck_json_t *conditions, const char *type, ck_sbuf_t *out,
                         bool *changed, char **err)
{
	if (check_array(conditions, err) < 0)
		return -1;
	bool removed = false;
	size_t n = 0;
	ck_sbuf_putc(out, '[');
	for (size_t i = 0; i < ck_json_len(conditions); i++) {
		const ck_json_t *c = ck_json_at(conditions, i);
		const char *t = ck_json_str(ck_json_get(c, CK_PATH("type")));
		if (t != NULL && type != NULL && strcmp(t, type) == 0) {
			removed = true;
			continue;
		}
		if (n++ > 0)
			ck_sbuf_putc(out, ',');
		ck_json_write(c, out);
	}
	ck_sbuf_putc(out, ']');
	if (changed != NULL)
		*changed = removed;
	return 0;
}

int ck_patch_set_conditions(ck_patch_t *p, const char *json, size_t len)
{
	return ck_patch_set_raw(p, CK_PATH("status", "conditions"), json, len);
}
