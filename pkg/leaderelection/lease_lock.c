/*
 * lease_lock: the election record stored in a coordination.k8s.io/v1 Lease,
 * through the blocking client calls (the elector has its own thread).
 *
 * Optimistic concurrency: the lock remembers the resourceVersion of the Lease it
 * last read or wrote, and every write carries it, so a write over a version that
 * moved on fails with 409 Conflict. Writes are JSON merge patches of spec plus
 * metadata.resourceVersion rather than PUTs of a whole object: the decoded Lease
 * keeps only the fields the election needs, and a PUT of that would wipe whatever
 * else the object carries (annotations, finalizers, owner references set by
 * others); the resourceVersion in the patch is checked by the server exactly as a
 * PUT's is. A caller may add one annotation of its own to every write
 * (le_lock_lease_annotate: pkg/sharding's epoch), merged in beside the others.
 */
#include "pkg/leaderelection/le_internal.h"
#include <ckube/client.h>
#include <ckube/types.h>

#include <stdlib.h>
#include <string.h>

typedef struct lease_lock {
	le_lock_t base;
	ck_client_t *client; /* borrowed */
	char *ns;
	char *name;
	char *rv; /* resourceVersion last read or written; NULL before */
	/* le_lock_lease_annotate: the key (NULL: none), its hook, and its value on
	 * the Lease last read or written (NULL when absent). Decoded with type, a
	 * Lease descriptor that keeps annotations. */
	char *ann_key;
	le_annotate_fn ann_fn;
	void *ann_ud;
	char *ann_stored;
	ck_type_t type;
} lease_lock_t;

/* Maps a failed call to a lock code and sets *err from the client's message. */
static int lock_fail(const ck_result_t *res, const char *what, char **err)
{
	int rc = LE_LOCK_ERROR;
	if (ck_result_is_not_found(res))
		rc = LE_LOCK_NOT_FOUND;
	else if (ck_result_is_conflict(res) || ck_result_is_already_exists(res))
		rc = LE_LOCK_CONFLICT;
	ck_err_set(err, "%s: %s", what, res->error != NULL ? res->error : "request failed");
	return rc;
}

void le_record_from_lease(const ck_obj_t *obj, le_record_t *out)
{
	int32_t v;
	const char *s;
	le_record_clear(out);
	if ((s = ck_lease_holder_identity(obj)) != NULL) {
		free(out->holder);
		out->holder = ck_xstrdup(s);
	}
	if (ck_lease_duration_seconds(obj, &v))
		out->lease_duration_s = v;
	if ((s = ck_lease_acquire_time(obj)) != NULL) {
		free(out->acquire_time);
		out->acquire_time = ck_xstrdup(s);
	}
	if ((s = ck_lease_renew_time(obj)) != NULL) {
		free(out->renew_time);
		out->renew_time = ck_xstrdup(s);
	}
	if (ck_lease_transitions(obj, &v))
		out->transitions = v;
}

/* Reads the Lease's spec into *out and remembers its resourceVersion. */
static void lock_take(lease_lock_t *l, const ck_obj_t *obj, le_record_t *out)
{
	free(l->rv);
	l->rv = ck_xstrdup(obj->rv);
	if (l->ann_key != NULL) {
		const char *v = ck_obj_annotation(obj, l->ann_key);
		free(l->ann_stored);
		l->ann_stored = v != NULL ? ck_xstrdup(v) : NULL;
	}
	if (out != NULL)
		le_record_from_lease(obj, out);
}

/* "spec":{...}; absent times as null (a merge patch then removes them). */
static void put_spec(ck_sbuf_t *b, const le_record_t *rec)
{
	ck_sbuf_puts(b, "\"spec\":{\"holderIdentity\":");
	ck_sbuf_put_json_str(b, rec->holder);
	ck_sbuf_printf(b, ",\"leaseDurationSeconds\":%lld", (long long)rec->lease_duration_s);
	ck_sbuf_puts(b, ",\"acquireTime\":");
	if (rec->acquire_time[0] != '\0')
		ck_sbuf_put_json_str(b, rec->acquire_time);
	else
		ck_sbuf_puts(b, "null");
	ck_sbuf_puts(b, ",\"renewTime\":");
	if (rec->renew_time[0] != '\0')
		ck_sbuf_put_json_str(b, rec->renew_time);
	else
		ck_sbuf_puts(b, "null");
	ck_sbuf_printf(b, ",\"leaseTransitions\":%lld}", (long long)rec->transitions);
}

static int lock_do(lease_lock_t *l, ck_req_spec_t *spec, const char *what, uint32_t timeout_ms,
                   le_record_t *out, char **err)
{
	int result;
	ck_result_t res;
	memset(&res, 0, sizeof(res));
	spec->type = &l->type;
	spec->ns = l->ns;
	spec->decode = CK_DEC_OBJECT;
	spec->timeout_ms = timeout_ms;
	/* A controller's writes may keep the shared client's limiter busy for seconds;
	 * a renewal waiting behind them would miss its deadline and lose the lease
	 * (the first chaos run lost it 7 times at 20 QPS). */
	spec->unthrottled = true;
	if (ck_client_do_sync(l->client, spec, &res) != 0) {
		result = lock_fail(&res, what, err);
		goto out;
	}
	if (res.obj == NULL) {
		result = LE_LOCK_ERROR;
		ck_err_set(err, "%s: the answer carried no Lease", what);
		goto out;
	}
	lock_take(l, res.obj, out);
	result = LE_LOCK_OK;
out:
	ck_result_clear(&res);
	return result;
}

/* The hook's metadata.annotations member (with a leading comma), or -1 with *err
 * when the hook refuses the write. stored: NULL on create. */
static int put_annotation(lease_lock_t *l, ck_sbuf_t *b, const char *stored, char **err)
{
	char *value = NULL;
	if (l->ann_key == NULL)
		return 0;
	if (l->ann_fn(l->ann_ud, stored, &value, err) != 0)
		return -1;
	ck_sbuf_puts(b, ",\"annotations\":{");
	ck_sbuf_put_json_str(b, l->ann_key);
	ck_sbuf_putc(b, ':');
	ck_sbuf_put_json_str(b, value);
	ck_sbuf_putc(b, '}');
	free(value);
	return 0;
}

static int lease_get(le_lock_t *base, uint32_t timeout_ms, le_record_t *out, char **err)
{
	lease_lock_t *l = (lease_lock_t *)base;
	ck_req_spec_t spec;
	memset(&spec, 0, sizeof(spec));
	spec.method = "GET";
	spec.name = l->name;
	return lock_do(l, &spec, "get", timeout_ms, out, err);
}

static int lease_create(le_lock_t *base, uint32_t timeout_ms, const le_record_t *rec, char **err)
{
	lease_lock_t *l = (lease_lock_t *)base;
	ck_sbuf_t body = CK_SBUF_INIT;
	ck_req_spec_t spec;
	char *query = NULL;
	int rc;

	ck_sbuf_puts(&body, "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
	                    "\"metadata\":{\"name\":");
	ck_sbuf_put_json_str(&body, l->name);
	ck_sbuf_puts(&body, ",\"namespace\":");
	ck_sbuf_put_json_str(&body, l->ns);
	if (put_annotation(l, &body, NULL, err) != 0) {
		rc = LE_LOCK_CONFLICT;
		goto out;
	}
	ck_sbuf_puts(&body, "},");
	put_spec(&body, rec);
	ck_sbuf_putc(&body, '}');

	query = ck_write_opts_query(NULL, false);
	memset(&spec, 0, sizeof(spec));
	spec.method = "POST";
	spec.query = query;
	spec.body = ck_sbuf_cstr(&body);
	spec.body_len = body.len;
	rc = lock_do(l, &spec, "create", timeout_ms, NULL, err);
out:
	ck_sbuf_free(&body);
	free(query);
	return rc;
}

static int lease_update(le_lock_t *base, uint32_t timeout_ms, const le_record_t *rec, char **err)
{
	lease_lock_t *l = (lease_lock_t *)base;
	ck_sbuf_t body = CK_SBUF_INIT;
	ck_req_spec_t spec;
	char *query = NULL;
	int rc;

	if (l->rv == NULL || l->rv[0] == '\0') {
		/* Never write blind: without a version the write would win any race. */
		ck_err_set(err, "update: the lease was not read yet");
		return LE_LOCK_CONFLICT;
	}
	ck_sbuf_puts(&body, "{\"metadata\":{\"resourceVersion\":");
	ck_sbuf_put_json_str(&body, l->rv);
	if (put_annotation(l, &body, l->ann_stored, err) != 0) {
		rc = LE_LOCK_CONFLICT;
		goto out;
	}
	ck_sbuf_puts(&body, "},");
	put_spec(&body, rec);
	ck_sbuf_putc(&body, '}');

	query = ck_write_opts_query(NULL, false);
	memset(&spec, 0, sizeof(spec));
	spec.method = "PATCH";
	spec.name = l->name;
	spec.query = query;
	spec.content_type = ck_patch_content_type(CK_PATCH_MERGE);
	spec.body = ck_sbuf_cstr(&body);
	spec.body_len = body.len;
	rc = lock_do(l, &spec, "update", timeout_ms, NULL, err);
out:
	ck_sbuf_free(&body);
	free(query);
	return rc;
}

static void lease_free(le_lock_t *base)
{
	lease_lock_t *l = (lease_lock_t *)base;
	if (l == NULL)
		return;
	free(l->base.desc);
	free(l->ns);
	free(l->name);
	free(l->rv);
	free(l->ann_key);
	free(l->ann_stored);
	free(l);
}

static const le_lock_ops_t lease_ops = {
    .get = lease_get,
    .create = lease_create,
    .update = lease_update,
    .free = lease_free,
};

le_lock_t *le_lock_lease_new(struct ck_client *c, const char *ns, const char *name)
{
	lease_lock_t *l = ck_xcalloc(1, sizeof(*l));
	l->base.ops = &lease_ops;
	l->base.desc = ck_xasprintf("%s/%s", ns, name);
	l->client = c;
	l->ns = ck_xstrdup(ns);
	l->name = ck_xstrdup(name);
	l->type = ck_type_lease;
	return &l->base;
}

void le_lock_lease_annotate(le_lock_t *base, const char *key, le_annotate_fn fn, void *ud)
{
	lease_lock_t *l = (lease_lock_t *)base;
	free(l->ann_key);
	l->ann_key = ck_xstrdup(key);
	l->ann_fn = fn;
	l->ann_ud = ud;
	/* Read back what the hook wrote, and what others wrote. */
	l->type.keep_annotations = true;
}
