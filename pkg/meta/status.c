/*
 * status: metav1.Status and the error predicates. Decoding a Status body
 * (ck_status_parse) is the codec's: pkg/codec/status_parse.c.
 *
 * Design note. The predicates follow apimachinery's errors package: a Status
 * reason the server knows decides; only when the reason is empty or unknown does
 * the HTTP code decide (a 404 whose reason is, say, "MethodNotAllowed" is not
 * "not found"). The code used is Status.code, else the HTTP status.
 */
#include <ckube/status.h>

#include <ckube/base.h>
#include <ckube/obj.h>

#include <stdlib.h>
#include <string.h>

void ck_status_clear(ck_status_t *s)
{
	if (s == NULL)
		return;
	free(s->status);
	free(s->reason);
	free(s->message);
	free(s->details_name);
	free(s->details_kind);
	free(s->details_group);
	free(s->causes);
	memset(s, 0, sizeof(*s));
}

bool ck_status_has_cause(const ck_status_t *s, const char *reason)
{
	if (s == NULL || s->causes == NULL || reason == NULL || reason[0] == '\0')
		return false;
	size_t n = strlen(reason);
	for (const char *p = s->causes; (p = strstr(p, reason)) != NULL; p += n) {
		bool starts = p == s->causes || p[-1] == ',';
		bool ends = p[n] == '\0' || p[n] == ',';
		if (starts && ends)
			return true;
	}
	return false;
}

void ck_result_clear(ck_result_t *r)
{
	if (r == NULL)
		return;
	ck_obj_unref(r->obj);
	free(r->body);
	free(r->error);
	ck_status_clear(&r->status);
	memset(r, 0, sizeof(*r));
}

bool ck_result_ok(const ck_result_t *r)
{
	return r->error == NULL && r->http_code >= 200 && r->http_code < 300;
}

bool ck_result_is_transport(const ck_result_t *r)
{
	return r->http_code == 0 && r->error != NULL;
}

/* CURLE_COULDNT_CONNECT (7), without pulling curl.h into every user of status. */
#define TRANSPORT_COULDNT_CONNECT    7
#define TRANSPORT_OPERATION_TIMEDOUT 28 /* CURLE_OPERATION_TIMEDOUT */

bool ck_result_is_connection_refused(const ck_result_t *r)
{
	return ck_result_is_transport(r) && r->head_code == 0 &&
	       r->transport_code == TRANSPORT_COULDNT_CONNECT;
}

bool ck_result_is_timeout(const ck_result_t *r)
{
	return ck_result_is_transport(r) && r->transport_code == TRANSPORT_OPERATION_TIMEDOUT;
}

static const char *const known_reasons[] = {
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
};

static const char *st_reason(const ck_status_t *s)
{
	return s->reason ? s->reason : "";
}

static bool reason_is(const ck_status_t *s, const char *reason)
{
	return strcmp(st_reason(s), reason) == 0;
}

static bool reason_known(const ck_status_t *s)
{
	for (size_t i = 0; i < CK_ARRAY_LEN(known_reasons); i++)
		if (reason_is(s, known_reasons[i]))
			return true;
	return false;
}

/* Reason `reason`, or an unknown reason with HTTP code `code`. */
static bool st_is(const ck_status_t *s, const char *reason, int code)
{
	if (reason_is(s, reason))
		return true;
	return !reason_known(s) && s->code == code;
}

/* The status to judge: the decoded one, with the HTTP code when it had none. */
static ck_status_t api_status(const ck_result_t *r)
{
	ck_status_t s = r->status;
	if (s.code == 0)
		s.code = r->http_code;
	return s;
}

/* No API answer, or a 2xx, is never an API error. */
static bool is_api_error(const ck_result_t *r)
{
	return r->http_code != 0 && r->http_code >= 300;
}

bool ck_result_is_not_found(const ck_result_t *r)
{
	ck_status_t s = api_status(r);
	return is_api_error(r) && st_is(&s, "NotFound", 404);
}

bool ck_result_is_conflict(const ck_result_t *r)
{
	ck_status_t s = api_status(r);
	return is_api_error(r) && st_is(&s, "Conflict", 409);
}

bool ck_result_is_already_exists(const ck_result_t *r)
{
	return is_api_error(r) && reason_is(&r->status, "AlreadyExists");
}

bool ck_status_is_gone(const ck_status_t *s)
{
	return s != NULL && (reason_is(s, "Expired") || st_is(s, "Gone", 410));
}

bool ck_result_is_gone(const ck_result_t *r)
{
	ck_status_t s = api_status(r);
	return is_api_error(r) && ck_status_is_gone(&s);
}

bool ck_result_is_invalid(const ck_result_t *r)
{
	ck_status_t s = api_status(r);
	return is_api_error(r) && st_is(&s, "Invalid", 422);
}

bool ck_result_is_forbidden(const ck_result_t *r)
{
	ck_status_t s = api_status(r);
	return is_api_error(r) && st_is(&s, "Forbidden", 403);
}

bool ck_result_is_unauthorized(const ck_result_t *r)
{
	ck_status_t s = api_status(r);
	return is_api_error(r) && st_is(&s, "Unauthorized", 401);
}

/* Like apimachinery: the reason, or the code 429 whatever the reason. */
bool ck_result_is_too_many_requests(const ck_result_t *r)
{
	ck_status_t s = api_status(r);
	return is_api_error(r) && (reason_is(&s, "TooManyRequests") || s.code == 429);
}

bool ck_result_is_server_error(const ck_result_t *r)
{
	ck_status_t s = api_status(r);
	return is_api_error(r) && s.code >= 500;
}

/*
 * The cause ResourceVersionTooLarge; or, from servers that predate the cause
 * (1.17-1.18), a Timeout whose message says so.
 */
bool ck_status_is_rv_too_large(const ck_status_t *s)
{
	if (s == NULL)
		return false;
	if (ck_status_has_cause(s, "ResourceVersionTooLarge"))
		return true;
	return st_is(s, "Timeout", 504) && s->message != NULL &&
	       strstr(s->message, "Too large resource version") != NULL;
}

bool ck_result_is_rv_too_large(const ck_result_t *r)
{
	ck_status_t s = api_status(r);
	return is_api_error(r) && ck_status_is_rv_too_large(&s);
}

bool ck_result_is_namespace_terminating(const ck_result_t *r)
{
	if (!is_api_error(r))
		return false;
	if (ck_status_has_cause(&r->status, "NamespaceTerminating"))
		return true;
	return r->status.message != NULL &&
	       strstr(r->status.message, "because it is being terminated") != NULL;
}
