/*
 * rec_kube: the recorder's sink on top of the REST client. The poster thread calls
 * the client's blocking verbs, which hand the request to the client's loop; the
 * answers are mapped to the retry decisions the recorder makes. It writes core/v1
 * or events.k8s.io/v1 Events, as the recorder chose by discovery (below).
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
	if (ck_result_is_already_exists(res))
		return CK_RECORD_SINK_ALREADY_EXISTS;
	if (ck_result_is_namespace_terminating(res))
		return CK_RECORD_SINK_NS_TERMINATING;
	if (ck_result_is_not_found(res))
		return CK_RECORD_SINK_NOT_FOUND;
	if (ck_result_is_transport(res) || ck_result_is_server_error(res) ||
	    ck_result_is_too_many_requests(res))
		return CK_RECORD_SINK_RETRY;
	return CK_RECORD_SINK_REJECTED;
}

/*
 * Events are best effort: a short per-request timeout keeps one stuck write (a
 * network cut) from holding ck_record_free() past its shutdown bound.
 */
#define REC_REQUEST_TIMEOUT_MS 5000

/* events.k8s.io/v1 Events; only the path matters (answers are not read). */
static const ck_type_t events_v1_type = {
    .group = "events.k8s.io",
    .version = "v1",
    .kind = "Event",
    .resource = "events",
    .namespaced = true,
};

/* The group version's discovery document: /apis/events.k8s.io/v1/ (the empty
 * resource leaves the trailing slash, which the server serves alike). */
static const ck_type_t events_v1_discovery = {
    .group = "events.k8s.io",
    .version = "v1",
    .kind = "APIResourceList",
    .resource = "",
    .namespaced = false,
};

static const ck_type_t *event_type(const rec_kclient_t *kc)
{
	return kc->api == CK_RECORD_API_EVENTS_V1 ? &events_v1_type : &ck_type_event;
}

static ck_record_sink_result_t finish(rec_kclient_t *kc, int rc, ck_result_t *res, const char *what,
                                      char **err)
{
	ck_record_sink_result_t result = classify(rc, res);

	kc->last_http = res->http_code;
	if (result != CK_RECORD_SINK_OK && err != NULL)
		*err = ck_xasprintf("%s: %s", what, res->error ? res->error : "request failed");
	ck_result_clear(res);
	return result;
}

static ck_record_sink_result_t rec_kclient_create(void *ud, const char *ns, const char *body,
                                                  char **err)
{
	rec_kclient_t *kc = ud;
	ck_result_t res = {0};
	char *q = ck_write_opts_query(NULL, false);
	ck_req_spec_t spec = {.method = "POST",
	                      .type = event_type(kc),
	                      .ns = ns,
	                      .query = q,
	                      .body = body,
	                      .body_len = strlen(body),
	                      .decode = CK_DEC_OBJECT,
	                      .timeout_ms = REC_REQUEST_TIMEOUT_MS};
	int rc = ck_client_do_sync(kc->c, &spec, &res);
	free(q);
	return finish(kc, rc, &res, "creating event", err);
}

static ck_record_sink_result_t rec_kclient_patch(void *ud, const char *ns, const char *name,
                                                 const char *body, char **err)
{
	rec_kclient_t *kc = ud;
	ck_result_t res = {0};
	/* Strategic merge patch, as client-go sends for events (same effect here). */
	char *q = ck_write_opts_query(NULL, false);
	ck_req_spec_t spec = {.method = "PATCH",
	                      .type = event_type(kc),
	                      .ns = ns,
	                      .name = name,
	                      .query = q,
	                      .content_type = ck_patch_content_type(CK_PATCH_STRATEGIC),
	                      .body = body,
	                      .body_len = strlen(body),
	                      .decode = CK_DEC_OBJECT,
	                      .timeout_ms = REC_REQUEST_TIMEOUT_MS};
	int rc = ck_client_do_sync(kc->c, &spec, &res);
	free(q);
	return finish(kc, rc, &res, "patching event", err);
}

void rec_sink_kclient(rec_kclient_t *kc, ck_record_sink_t *out)
{
	out->create = rec_kclient_create;
	out->patch = rec_kclient_patch;
	out->ud = kc;
}

ck_record_api_t rec_kclient_discover(rec_kclient_t *kc, char **why)
{
	ck_result_t res = {0};
	ck_req_spec_t spec = {.method = "GET",
	                      .type = &events_v1_discovery,
	                      .no_decode = true,
	                      .timeout_ms = REC_REQUEST_TIMEOUT_MS};
	int rc = ck_client_do_sync(kc->c, &spec, &res);
	ck_record_api_t api = rc == 0 ? CK_RECORD_API_EVENTS_V1 : CK_RECORD_API_CORE_V1;
	if (why != NULL)
		*why = rc == 0 ? ck_xstrdup("events.k8s.io/v1 served")
		               : ck_xasprintf("events.k8s.io/v1 not usable (HTTP %d: %s)",
		                              res.http_code, res.error ? res.error : "failed");
	ck_result_clear(&res);
	return api;
}
