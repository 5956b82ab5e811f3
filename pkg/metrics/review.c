/*
 * review: the reviewer that asks the API server, for the secure metrics server:
 * a TokenReview of the caller's bearer token, then a SubjectAccessReview of the
 * user it names for a non-resource path and verb. Both are blocking client calls
 * from the server's thread (never the client's loop thread).
 *
 * Design note. The answers are read as raw JSON (keep_body, no_decode) rather than
 * through the object decoder: a review's answer has no name, namespace or
 * resourceVersion, only a status whose shape is fixed here.
 */
#include <stdlib.h>
#include <string.h>

#include <ckube/client.h>
#include <ckube/json.h>

#include "pkg/metrics/metrics_internal.h"

/* controller-runtime's TokenAccessReviewTimeout; the same for the access review. */
#define REVIEW_TIMEOUT_MS 10000

static const ck_type_t token_review_type = {
    .group = "authentication.k8s.io",
    .version = "v1",
    .kind = "TokenReview",
    .resource = "tokenreviews",
};
static const ck_type_t access_review_type = {
    .group = "authorization.k8s.io",
    .version = "v1",
    .kind = "SubjectAccessReview",
    .resource = "subjectaccessreviews",
};

/* POSTs body as a new t; returns the answer's document, or NULL with *err. */
static ck_json_doc_t *post_review(ck_client_t *c, const ck_type_t *t, const ck_sbuf_t *body,
                                  char **err)
{
	ck_result_t res = {0};
	ck_json_doc_t *doc = NULL;
	ck_req_spec_t spec = {.method = "POST",
	                      .type = t,
	                      .body = body->data,
	                      .body_len = body->len,
	                      .decode = CK_DEC_OBJECT,
	                      .keep_body = true,
	                      .no_decode = true,
	                      .timeout_ms = REVIEW_TIMEOUT_MS};
	if (ck_client_do_sync(c, &spec, &res) != 0) {
		ck_err_set(err, "creating a %s: %s", t->kind, res.error ? res.error : "failed");
		goto out;
	}
	char *why = NULL;
	doc = ck_json_parse(res.body ? res.body : "", res.body_len, &why);
	if (doc == NULL) {
		ck_err_set(err, "reading the %s answer: %s", t->kind, why);
		free(why);
	}
out:
	ck_result_clear(&res);
	return doc;
}

static int kube_authenticate(void *ud, const char *token, ck_metrics_user_t *user, char **reason,
                             char **err)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\","
	                 "\"spec\":{\"token\":");
	ck_sbuf_put_json_str(&b, token);
	ck_sbuf_puts(&b, "}}");
	ck_json_doc_t *doc = post_review(ud, &token_review_type, &b, err);
	/* The body holds the token: wipe it. */
	ck_secure_zero(b.data, b.len);
	ck_sbuf_free(&b);
	if (doc == NULL)
		return CK_METRICS_REVIEW_FAILED;

	const ck_json_t *st = ck_json_get(ck_json_root(doc), CK_PATH("status"));
	bool ok = false;
	ck_json_get_bool(ck_json_get(st, CK_PATH("authenticated")), &ok);
	if (!ok) {
		const char *why = ck_json_str(ck_json_get(st, CK_PATH("error")));
		if (why != NULL && why[0] != '\0')
			*reason = ck_xstrdup(why);
		ck_json_doc_free(doc);
		return CK_METRICS_REVIEW_NO;
	}
	const ck_json_t *u = ck_json_get(st, CK_PATH("user"));
	const char *s = ck_json_str(ck_json_get(u, CK_PATH("username")));
	user->name = ck_xstrdup(s ? s : "");
	s = ck_json_str(ck_json_get(u, CK_PATH("uid")));
	user->uid = s ? ck_xstrdup(s) : NULL;
	const ck_json_t *g = ck_json_get(u, CK_PATH("groups"));
	size_t n = ck_json_len(g);
	user->groups = n ? ck_xcalloc(n, sizeof(char *)) : NULL;
	for (size_t i = 0; i < n; i++)
		if ((s = ck_json_str(ck_json_at(g, i))) != NULL)
			user->groups[user->ngroups++] = ck_xstrdup(s);
	const ck_json_t *x = ck_json_get(u, CK_PATH("extra"));
	if (ck_json_type(x) == CK_JSON_OBJECT && ck_json_len(x) > 0)
		user->extra_json = ck_json_to_text(x);
	ck_json_doc_free(doc);
	return CK_METRICS_REVIEW_YES;
}

static int kube_authorize(void *ud, const ck_metrics_user_t *user, const char *path,
                          const char *verb, char **reason, char **err)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	ck_sbuf_puts(&b, "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":"
	                 "\"SubjectAccessReview\",\"spec\":{\"nonResourceAttributes\":{\"path\":");
	ck_sbuf_put_json_str(&b, path);
	ck_sbuf_puts(&b, ",\"verb\":");
	ck_sbuf_put_json_str(&b, verb);
	ck_sbuf_puts(&b, "},\"user\":");
	ck_sbuf_put_json_str(&b, user->name ? user->name : "");
	ck_sbuf_puts(&b, ",\"groups\":[");
	for (size_t i = 0; i < user->ngroups; i++) {
		if (i)
			ck_sbuf_putc(&b, ',');
		ck_sbuf_put_json_str(&b, user->groups[i]);
	}
	ck_sbuf_putc(&b, ']');
	if (user->uid != NULL) {
		ck_sbuf_puts(&b, ",\"uid\":");
		ck_sbuf_put_json_str(&b, user->uid);
	}
	if (user->extra_json != NULL) {
		ck_sbuf_puts(&b, ",\"extra\":");
		ck_sbuf_puts(&b, user->extra_json);
	}
	ck_sbuf_puts(&b, "}}");
	ck_json_doc_t *doc = post_review(ud, &access_review_type, &b, err);
	ck_sbuf_free(&b);
	if (doc == NULL)
		return CK_METRICS_REVIEW_FAILED;

	const ck_json_t *st = ck_json_get(ck_json_root(doc), CK_PATH("status"));
	bool allowed = false;
	ck_json_get_bool(ck_json_get(st, CK_PATH("allowed")), &allowed);
	if (!allowed) {
		const char *why = ck_json_str(ck_json_get(st, CK_PATH("reason")));
		const char *eval = ck_json_str(ck_json_get(st, CK_PATH("evaluationError")));
		if (eval != NULL && eval[0] != '\0')
			*reason = ck_xasprintf("%s (evaluation error: %s)", why ? why : "", eval);
		else if (why != NULL && why[0] != '\0')
			*reason = ck_xstrdup(why);
	}
	ck_json_doc_free(doc);
	return allowed ? CK_METRICS_REVIEW_YES : CK_METRICS_REVIEW_NO;
}

void ck_metrics_kube_reviewer(struct ck_client *c, ck_metrics_reviewer_t *out)
{
	*out = (ck_metrics_reviewer_t){kube_authenticate, kube_authorize, c};
}
