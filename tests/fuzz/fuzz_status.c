/*
 * libFuzzer target for the Status decoder (ck_status_parse) and the error
 * classification built on it: every 4xx/5xx body the server (or a proxy in front
 * of it) sends goes through here, and a watch ERROR event's object too.
 *
 * Bytes 0-1 give the HTTP code (100..599); the rest is the body. Invariants: a
 * body that is a Status gives 0, anything else -1 with code == the HTTP code and a
 * message made from the body that holds no control byte (it goes to logs and
 * Events); the predicates never crash on any result.
 */
#include <ckube/base.h>
#include <ckube/status.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *s)
{
	if (s == NULL)
		return;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	int code = 100 + ((data[0] << 8 | data[1]) % 500);
	const char *body = (const char *)data + 2;
	size_t len = size - 2;

	ck_result_t res = {0};
	int rc = ck_status_parse(body, len, code, &res.status);
	res.http_code = code;
	if (rc != 0 && res.status.code != code)
		__builtin_trap();
	if (rc != 0 && res.status.message == NULL)
		__builtin_trap();
	if (rc != 0)
		check_text(res.status.message);
	(void)ck_status_is_gone(&res.status);
	(void)ck_status_is_rv_too_large(&res.status);
	(void)ck_status_has_cause(&res.status, "NamespaceTerminating");
	(void)ck_result_is_gone(&res);
	(void)ck_result_is_rv_too_large(&res);
	(void)ck_result_is_conflict(&res);
	(void)ck_result_is_already_exists(&res);
	(void)ck_result_is_namespace_terminating(&res);
	(void)ck_result_is_too_many_requests(&res);
	ck_result_clear(&res);
	return 0;
}
