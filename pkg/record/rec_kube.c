/*
 * rec_kube: the recorder's sink on top of the REST client. The poster thread calls
 * the client's blocking verbs, which hand the request to the client's loop; the
 * answers are mapped to the retry decisions the recorder makes.
 */
#include "pkg/record/rec_internal.h"
#include <ckube/client.h>
#include <ckube/status.h>
#include <ckube/types.h>

#include <stdlib.h>
#include <string.h>

/*
 * The order matters: a namespace being deleted answers 403 (not retried, quietly),
 * a patch of an expired event 404 (create it instead), and only transport errors,
 * 429 and 5xx are worth another try.
 */
static ck_record_sink_result_t classify(int rc, const ck_result_t *res)
{
	if (rc == 0)
		return CK_RECORD_SINK_OK;
	if (ck_err_is_already_exists(res))
		return CK_RECORD_SINK_ALREADY_EXISTS;
	if (ck_err_is_namespace_terminating(res))
		return CK_RECORD_SINK_NS_TERMINATING;
	if (ck_err_is_not_found(res))
		return CK_RECORD_SINK_NOT_FOUND;
	if (ck_err_is_transport(res) || ck_err_is_server_error(res) ||
	    ck_err_is_too_many_requests(res))
		return CK_RECORD_SINK_RETRY;
	return CK_RECORD_SINK_REJECTED;
}

/*
 * Events are best effort: a short per-request timeout keeps one stuck write (a
 * network cut) from holding ck_record_free() past its shutdown bound.
 */
#define REC_REQUEST_TIMEOUT_MS 5000

static ck_record_sink_result_t finish(int rc, ck_result_t *res, const char *what, char **err)
{
	ck_record_sink_result_t result = classify(rc, res);

	if (result != CK_RECORD_SINK_OK && err != NULL)
		*err = ck_xasprintf("%s: %s", what, res->error ? res->error : "request failed");
	ck_result_clear(res);
	return result;
}

static ck_record_sink_result_t kc_create(void *ud, const char *ns, const char *body, char **err)
{
	ck_result_t res = {0};
	char *q = ck_write_opts_query(NULL, false);
	ck_req_spec_t spec = {.method = "POST",
	                      .type = &ck_type_event,
	                      .ns = ns,
	                      .query = q,
	                      .body = body,
	                      .body_len = strlen(body),
	                      .decode = CK_DEC_OBJECT,
	                      .timeout_ms = REC_REQUEST_TIMEOUT_MS};
	int rc = ck_client_do_sync(ud, &spec, &res);
	free(q);
	return finish(rc, &res, "creating event", err);
}

static ck_record_sink_result_t kc_patch(void *ud, const char *ns, const char *name,
                                        const char *body, char **err)
{
	ck_result_t res = {0};
	/* Strategic merge patch, as client-go sends for events (same effect here). */
	char *q = ck_write_opts_query(NULL, false);
	ck_req_spec_t spec = {.method = "PATCH",
	                      .type = &ck_type_event,
	                      .ns = ns,
	                      .name = name,
	                      .query = q,
	                      .content_type = ck_patch_content_type(CK_PATCH_STRATEGIC),
	                      .body = body,
	                      .body_len = strlen(body),
	                      .decode = CK_DEC_OBJECT,
	                      .timeout_ms = REC_REQUEST_TIMEOUT_MS};
	int rc = ck_client_do_sync(ud, &spec, &res);
	free(q);
	return finish(rc, &res, "patching event", err);
}

void rec_sink_kclient(ck_client_t *c, ck_record_sink_t *out)
{
	out->create = kc_create;
	out->patch = kc_patch;
	out->ud = c;
}
