/*
 * status_parse: an API server's error body -> metav1.Status (ck_status_parse of
 * <ckube/status.h>).
 *
 * Lives in the codec, not in pkg/meta with the rest of status.c: it runs the
 * streaming decoder (ck_dec_i_status_parse), and meta sits below the codec.
 */
#include <ckube/status.h>

#include "pkg/codec/decode_internal.h"
#include <ckube/base.h>

#include <stddef.h>

/* The reason apimachinery assumes for a bare HTTP status, so the predicates work. */
static const char *reason_for_code(int code)
{
	switch (code) {
	case 400:
		return "BadRequest";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "NotFound";
	case 405:
		return "MethodNotAllowed";
	case 406:
		return "NotAcceptable";
	case 409:
		return "Conflict";
	case 410:
		return "Gone";
	case 413:
		return "RequestEntityTooLarge";
	case 415:
		return "UnsupportedMediaType";
	case 422:
		return "Invalid";
	case 429:
		return "TooManyRequests";
	case 500:
		return "InternalError";
	case 503:
		return "ServiceUnavailable";
	case 504:
		return "Timeout";
	default:
		return "";
	}
}

int ck_status_parse(const char *body, size_t len, int http_code, ck_status_t *out)
{
	ck_status_clear(out);
	if (body != NULL && len > 0 && ck_dec_i_status_parse(body, len, out) == 0) {
		if (out->code == 0)
			out->code = http_code;
		return 0;
	}
	/* Not a Status (a proxy's HTML page, plain text, nothing): keep the code and
	 * the start of the body so the message still says something true. */
	ck_status_clear(out);
	out->code = http_code;
	out->status = ck_xstrdup("Failure");
	out->reason = ck_xstrdup(reason_for_code(http_code));
	ck_sbuf_t m = CK_SBUF_INIT;
	size_t n = body == NULL ? 0 : len;
	/* "404 page not found\n": the newline would end up as a stray space. */
	while (n > 0 && (body[n - 1] == '\n' || body[n - 1] == '\r' || body[n - 1] == ' ' ||
	                 body[n - 1] == '\t'))
		n--;
	if (n == 0) {
		ck_sbuf_printf(&m, "the server answered HTTP %d with an empty body", http_code);
	} else {
		ck_sbuf_printf(&m, "the server answered HTTP %d: ", http_code);
		size_t max = n < 256 ? n : 256;
		for (size_t i = 0; i < max; i++) {
			unsigned char c = (unsigned char)body[i];
			ck_sbuf_putc(&m, c == '\n' || c == '\r' || c == '\t' ? ' '
			                 : c < 0x20 || c == 0x7f             ? '?'
			                                                     : (char)c);
		}
		if (n > max)
			ck_sbuf_puts(&m, "...");
	}
	out->message = ck_sbuf_steal(&m);
	return -1;
}
