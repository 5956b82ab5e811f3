/*
 * rec_kube: the recorder's sink on top of the REST client. The poster thread calls
 * the client's blocking verbs, which hand the request to the client's loop; the
 * answers are mapped to the retry decisions the recorder makes.
 */
#include "pkg/kube/client.h"
#include "pkg/kube/status.h"
#include "pkg/kube/types.h"
#include "pkg/record/rec_internal.h"

#include <stdlib.h>
#include <string.h>

/*
 * The order matters: a namespace being deleted answers 403 (not retried, quietly),
 * a patch of an expired event 404 (create it instead), and only transport errors,
 * 429 and 5xx are worth another try.
 */
static record_sink_result_t classify(int rc, const kresult_t *res)
{
	if (rc == 0)
		return RECORD_SINK_OK;
	if (kerr_is_already_exists(res))
		return RECORD_SINK_ALREADY_EXISTS;
	if (kerr_is_namespace_terminating(res))
		return RECORD_SINK_NS_TERMINATING;
	if (kerr_is_not_found(res))
		return RECORD_SINK_NOT_FOUND;
	if (kerr_is_transport(res) || kerr_is_server_error(res) || kerr_is_too_many_requests(res))
		return RECORD_SINK_RETRY;
	return RECORD_SINK_REJECTED;
}

/*
 * Events are best effort: a short per-request timeout keeps one stuck write (a
 * network cut) from holding record_free() past its shutdown bound.
 */
#define REC_REQUEST_TIMEOUT_MS 5000

static record_sink_result_t finish(int rc, kresult_t *res, const char *what, char **err)
{
	record_sink_result_t result = classify(rc, res);

	if (result != RECORD_SINK_OK && err != NULL)
		*err = xasprintf("%s: %s", what, res->error ? res->error : "request failed");
	kresult_clear(res);
	return result;
}

static record_sink_result_t kc_create(void *ud, const char *ns, const char *body, char **err)
{
	kresult_t res = {0};
	char *q = kwrite_opts_query(NULL, false);
	kreq_spec_t spec = {.method = "POST",
	                    .type = &ktype_event,
	                    .ns = ns,
	                    .query = q,
	                    .body = body,
	                    .body_len = strlen(body),
	                    .decode = KDEC_OBJECT,
	                    .timeout_ms = REC_REQUEST_TIMEOUT_MS};
	int rc = kclient_do_sync(ud, &spec, &res);
	free(q);
	return finish(rc, &res, "creating event", err);
}

static record_sink_result_t kc_patch(void *ud, const char *ns, const char *name, const char *body,
                                     char **err)
{
	kresult_t res = {0};
	/* Strategic merge patch, as client-go sends for events (same effect here). */
	char *q = kwrite_opts_query(NULL, false);
	kreq_spec_t spec = {.method = "PATCH",
	                    .type = &ktype_event,
	                    .ns = ns,
	                    .name = name,
	                    .query = q,
	                    .content_type = kpatch_content_type(KPATCH_STRATEGIC),
	                    .body = body,
	                    .body_len = strlen(body),
	                    .decode = KDEC_OBJECT,
	                    .timeout_ms = REC_REQUEST_TIMEOUT_MS};
	int rc = kclient_do_sync(ud, &spec, &res);
	free(q);
	return finish(rc, &res, "patching event", err);
}

void rec_sink_kclient(kclient_t *c, record_sink_t *out)
{
	out->create = kc_create;
	out->patch = kc_patch;
	out->ud = c;
}
