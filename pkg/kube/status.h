/*
 * status: the outcome of an API call. A non-2xx answer carries the server's
 * metav1.Status (code, reason, message, details), decoded, so callers ask
 * "not found?", "conflict?" without string matching. A transport failure (no
 * HTTP answer: DNS, connect, TLS, reset, timeout) is distinct: http_code 0.
 */
#ifndef CSC_KUBE_STATUS_H
#define CSC_KUBE_STATUS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct kstatus {
	int code;                /* Status.code, or the HTTP status when the body had none */
	char *status;            /* "Failure" / "Success" */
	char *reason;            /* "NotFound", "Conflict", "Expired", "Gone", ... */
	char *message;           /* the server's message */
	char *details_name;      /* details.name */
	char *details_kind;      /* details.kind */
	char *details_group;     /* details.group */
	int retry_after_seconds; /* details.retryAfterSeconds, or the Retry-After header */
	char *causes;            /* details.causes[*].reason, ','-joined, or NULL */
} kstatus_t;

/* Frees the strings inside s (not s itself) and zeroes it. */
void kstatus_clear(kstatus_t *s);

/*
 * Parses a complete JSON body as metav1.Status into *out (cleared first).
 * Returns 0 if the body was a Status object, -1 otherwise (out then holds
 * only code = http_code and a message made from the body's first bytes).
 */
int kstatus_parse(const char *body, size_t len, int http_code, kstatus_t *out);

/* Borrows s; true if one of details.causes has this reason ("NamespaceTerminating"). */
bool kstatus_has_cause(const kstatus_t *s, const char *reason);
/* The predicates behind kerr_is_gone / kerr_is_rv_too_large, for a bare Status such as a
 * watch ERROR event's (borrows s). */
bool kstatus_is_gone(const kstatus_t *s);
bool kstatus_is_rv_too_large(const kstatus_t *s);

/* The kind of failure, from the status code and reason. */
typedef struct kresult kresult_t;

struct kobj;

/*
 * The result of one request. Zero-initialise, pass to a call, read, then
 * kresult_clear(). error is NULL on success.
 */
struct kresult {
	int http_code;      /* 0 when no HTTP answer arrived (transport error) */
	int transport_code; /* CURLcode when http_code == 0, else 0 */
	char *error;        /* NULL on success; else a full human-readable message */
	kstatus_t status;   /* decoded on non-2xx */
	struct kobj *obj;   /* decoded object on 2xx where one is returned (new ref) */
	char *body;         /* raw body when the caller asked for it (new string) */
	size_t body_len;
};

void kresult_clear(kresult_t *r);

bool kresult_ok(const kresult_t *r);
bool kerr_is_transport(const kresult_t *r);
bool kerr_is_not_found(const kresult_t *r);         /* 404 */
bool kerr_is_conflict(const kresult_t *r);          /* 409, reason Conflict */
bool kerr_is_already_exists(const kresult_t *r);    /* 409, reason AlreadyExists */
bool kerr_is_gone(const kresult_t *r);              /* 410, or reason Expired/Gone */
bool kerr_is_forbidden(const kresult_t *r);         /* 403 */
bool kerr_is_unauthorized(const kresult_t *r);      /* 401 */
bool kerr_is_too_many_requests(const kresult_t *r); /* 429 */
bool kerr_is_server_error(const kresult_t *r);      /* >= 500 */
/* "too large resource version": 504 with reason Timeout and cause ResourceVersionTooLarge,
 * or the message containing "Too large resource version". */
bool kerr_is_rv_too_large(const kresult_t *r);
/* Namespace is being terminated (events to it must not be retried). */
bool kerr_is_namespace_terminating(const kresult_t *r);

#endif
