/*
 * status: the outcome of an API call. A non-2xx answer carries the server's
 * metav1.Status (code, reason, message, details), decoded, so callers ask
 * "not found?", "conflict?" without string matching. A transport failure (no
 * HTTP answer: DNS, connect, TLS, reset, timeout) is distinct: http_code 0.
 */
#ifndef CKUBE_KUBE_STATUS_H
#define CKUBE_KUBE_STATUS_H

#include <ckube/export.h>

#include <stdbool.h>
#include <stddef.h>

typedef struct ck_status {
	int code;                /* Status.code, or the HTTP status when the body had none */
	char *status;            /* "Failure" / "Success" */
	char *reason;            /* "NotFound", "Conflict", "Expired", "Gone", ... */
	char *message;           /* the server's message */
	char *details_name;      /* details.name */
	char *details_kind;      /* details.kind */
	char *details_group;     /* details.group */
	int retry_after_seconds; /* details.retryAfterSeconds, or the Retry-After header */
	char *causes;            /* details.causes[*].reason, ','-joined, or NULL */
} ck_status_t;

/* Frees the strings inside s (not s itself) and zeroes it. */
CKUBE_API void ck_status_clear(ck_status_t *s);

/*
 * Parses a complete JSON body as metav1.Status into *out (cleared first).
 * Returns 0 if the body was a Status object, -1 otherwise (out then holds
 * only code = http_code and a message made from the body's first bytes).
 */
CKUBE_API int ck_status_parse(const char *body, size_t len, int http_code, ck_status_t *out);

/* Borrows s; true if one of details.causes has this reason ("NamespaceTerminating"). */
CKUBE_API bool ck_status_has_cause(const ck_status_t *s, const char *reason);
/* The predicates behind ck_result_is_gone / ck_result_is_rv_too_large, for a bare Status such as a
 * watch ERROR event's (borrows s). */
CKUBE_API bool ck_status_is_gone(const ck_status_t *s);
CKUBE_API bool ck_status_is_rv_too_large(const ck_status_t *s);

/* The kind of failure, from the status code and reason. */
typedef struct ck_result ck_result_t;

struct ck_obj;

/*
 * The result of one request. Zero-initialise, pass to a call, read, then
 * ck_result_clear(). error is NULL on success.
 */
struct ck_result {
	int http_code;      /* 0 when no HTTP answer arrived (transport error) */
	int transport_code; /* CURLcode when http_code == 0, else 0 */
	/* On a transport error: the HTTP status whose head had arrived before the
	 * connection failed (200: a watch cut mid-stream), else 0. */
	int head_code;
	char *error;        /* NULL on success; else a full human-readable message */
	ck_status_t status; /* decoded on non-2xx */
	struct ck_obj *obj; /* decoded object on 2xx where one is returned (new ref) */
	char *body;         /* raw body when the caller asked for it (new string) */
	size_t body_len;
};

/*
 * Names: ck_result_* ask about a request's outcome (apimachinery's errors.IsNotFound
 * and friends), ck_status_* about a bare Status (a watch ERROR event's), and
 * ck_err_* (<ckube/base.h>) only build error strings.
 */
CKUBE_API void ck_result_clear(ck_result_t *r);

CKUBE_API bool ck_result_ok(const ck_result_t *r);
CKUBE_API bool ck_result_is_transport(const ck_result_t *r);
/* A transport error before any answer: the connection could not be made (refused,
 * unreachable) -- the server is down or restarting, not our request wrong. */
CKUBE_API bool ck_result_is_connection_refused(const ck_result_t *r);
/* A transport error: the request's deadline passed (curl's timeout, or the client's
 * total timeout_ms across rate limiter, retries and Retry-After). */
CKUBE_API bool ck_result_is_timeout(const ck_result_t *r);
CKUBE_API bool ck_result_is_not_found(const ck_result_t *r);      /* 404 */
CKUBE_API bool ck_result_is_conflict(const ck_result_t *r);       /* 409, reason Conflict */
CKUBE_API bool ck_result_is_already_exists(const ck_result_t *r); /* 409, reason AlreadyExists */
CKUBE_API bool ck_result_is_gone(const ck_result_t *r);           /* 410, or reason Expired/Gone */
CKUBE_API bool ck_result_is_forbidden(const ck_result_t *r);      /* 403 */
CKUBE_API bool ck_result_is_invalid(const ck_result_t *r);        /* 422, reason Invalid */
CKUBE_API bool ck_result_is_unauthorized(const ck_result_t *r);   /* 401 */
CKUBE_API bool ck_result_is_too_many_requests(const ck_result_t *r); /* 429 */
CKUBE_API bool ck_result_is_server_error(const ck_result_t *r);      /* >= 500 */
/* "too large resource version": 504 with reason Timeout and cause ResourceVersionTooLarge,
 * or the message containing "Too large resource version". */
CKUBE_API bool ck_result_is_rv_too_large(const ck_result_t *r);
/* Namespace is being terminated (events to it must not be retried). */
CKUBE_API bool ck_result_is_namespace_terminating(const ck_result_t *r);

#endif
