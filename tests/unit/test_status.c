/*
 * Status: decoding recorded metav1.Status bodies and the error predicates.
 */
#include <ckube/base.h>
#include <ckube/status.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURES "../fixtures/json/"

/* Fills r as the transport would for an HTTP answer with this fixture's body. */
static void answer(ck_result_t *r, int http_code, const char *name)
{
	char path[256], *buf = NULL, *err = NULL;
	size_t len = 0;
	snprintf(path, sizeof(path), FIXTURES "%s", name);
	if (ck_file_read_all(path, &buf, &len, &err) != 0)
		ck_abort_msg("reading %s: %s", path, err);
	memset(r, 0, sizeof(*r));
	r->http_code = http_code;
	ck_assert_int_eq(ck_status_parse(buf, len, http_code, &r->status), 0);
	r->error = ck_xasprintf("HTTP %d: %s", http_code, r->status.message);
	free(buf);
}

START_TEST(test_not_found)
{
	ck_result_t r;
	answer(&r, 404, "status_404.json");
	ck_assert_int_eq(r.status.code, 404);
	ck_assert_str_eq(r.status.status, "Failure");
	ck_assert_str_eq(r.status.reason, "NotFound");
	ck_assert_str_eq(r.status.message, "deployments.apps \"nope\" not found");
	ck_assert_str_eq(r.status.details_name, "nope");
	ck_assert_str_eq(r.status.details_group, "apps");
	ck_assert_str_eq(r.status.details_kind, "deployments");
	ck_assert(ck_result_is_not_found(&r));
	ck_assert(!ck_result_is_conflict(&r) && !ck_result_is_gone(&r) &&
	          !ck_result_is_forbidden(&r));
	ck_assert(!ck_result_ok(&r) && !ck_result_is_transport(&r) &&
	          !ck_result_is_server_error(&r));
	ck_result_clear(&r);
	ck_assert_ptr_null(r.error);
	ck_assert_ptr_null(r.status.reason);
	ck_assert_int_eq(r.http_code, 0);
}
END_TEST

START_TEST(test_conflicts)
{
	ck_result_t r;
	answer(&r, 409, "status_409_conflict.json");
	ck_assert(ck_result_is_conflict(&r));
	ck_assert(!ck_result_is_already_exists(&r));
	ck_result_clear(&r);
	answer(&r, 409, "status_409_exists.json");
	ck_assert(ck_result_is_already_exists(&r));
	ck_assert(!ck_result_is_conflict(&r)); /* a known reason other than Conflict decides */
	ck_assert(!ck_result_is_not_found(&r));
	ck_result_clear(&r);
}
END_TEST

START_TEST(test_forbidden_gone_throttled)
{
	ck_result_t r;
	answer(&r, 403, "status_403.json");
	ck_assert(ck_result_is_forbidden(&r));
	ck_assert(!ck_result_is_namespace_terminating(&r));
	ck_assert(!ck_result_is_unauthorized(&r));
	ck_result_clear(&r);

	answer(&r, 403, "status_403_terminating.json");
	ck_assert(ck_result_is_forbidden(&r));
	ck_assert(ck_result_is_namespace_terminating(&r));
	ck_assert(ck_status_has_cause(&r.status, "NamespaceTerminating"));
	ck_assert(!ck_status_has_cause(&r.status, "Namespace"));
	ck_result_clear(&r);

	answer(&r, 410, "status_410.json");
	ck_assert(ck_result_is_gone(&r));
	ck_assert(ck_status_is_gone(&r.status));
	ck_assert_str_eq(r.status.reason, "Expired");
	ck_result_clear(&r);

	answer(&r, 429, "status_429.json");
	ck_assert(ck_result_is_too_many_requests(&r));
	ck_assert_int_eq(r.status.retry_after_seconds, 2);
	ck_assert_ptr_null(r.status.causes); /* the cause had no reason */
	ck_result_clear(&r);

	answer(&r, 504, "status_504_rv_too_large.json");
	ck_assert(ck_result_is_rv_too_large(&r));
	ck_assert(ck_status_is_rv_too_large(&r.status));
	ck_assert(ck_result_is_server_error(&r));
	ck_assert_int_eq(r.status.retry_after_seconds, 1);
	ck_result_clear(&r);
}
END_TEST

/* Bodies that are not a Status keep the HTTP code; the reason follows from it. */
/* Recorded from a real API server (tests/fixtures/json/capture.sh). */
START_TEST(test_real_bodies)
{
	ck_result_t r;
	answer(&r, 404, "real_status_404.json");
	ck_assert(ck_result_is_not_found(&r));
	ck_assert_str_eq(r.status.details_name, "nope");
	ck_result_clear(&r);
	answer(&r, 409, "real_status_409_exists.json");
	ck_assert(ck_result_is_already_exists(&r) && !ck_result_is_conflict(&r));
	ck_result_clear(&r);
	answer(&r, 409, "real_status_409_conflict.json");
	ck_assert(ck_result_is_conflict(&r) && !ck_result_is_already_exists(&r));
	ck_result_clear(&r);
	answer(&r, 403, "real_status_403.json");
	ck_assert(ck_result_is_forbidden(&r) && !ck_result_is_namespace_terminating(&r));
	ck_assert_ptr_nonnull(strstr(r.status.message, "cannot list resource \"deployments\""));
	ck_result_clear(&r);
	answer(&r, 504, "real_status_504_rv_too_large.json");
	ck_assert(ck_result_is_rv_too_large(&r) && ck_result_is_server_error(&r));
	ck_assert_str_eq(r.status.causes, "ResourceVersionTooLarge");
	ck_assert_int_eq(r.status.retry_after_seconds, 1);
	ck_result_clear(&r);
}
END_TEST

START_TEST(test_not_a_status)
{
	ck_status_t s = {0};
	const char *html = "<html><body>\n502 Bad Gateway</body></html>";
	ck_assert_int_eq(ck_status_parse(html, strlen(html), 502, &s), -1);
	ck_assert_int_eq(s.code, 502);
	ck_assert_str_eq(s.message, "the server answered HTTP 502: <html><body> 502 Bad "
	                            "Gateway</body></html>");
	ck_status_clear(&s);

	/* The API server's plain-text 404 for a resource it does not serve. */
	const char *plain = "404 page not found\n";
	ck_assert_int_eq(ck_status_parse(plain, strlen(plain), 404, &s), -1);
	ck_assert_str_eq(s.message, "the server answered HTTP 404: 404 page not found");
	ck_status_clear(&s);

	ck_assert_int_eq(ck_status_parse("", 0, 404, &s), -1);
	ck_assert_str_eq(s.reason, "NotFound");
	ck_assert_str_eq(s.message, "the server answered HTTP 404 with an empty body");
	ck_result_t r = {.http_code = 404, .error = ck_xstrdup("x"), .status = s};
	memset(&s, 0, sizeof(s)); /* moved into r */
	ck_assert(ck_result_is_not_found(&r));
	ck_result_clear(&r);

	/* JSON, but not a Status. */
	const char *j = "{\"kind\":\"Deployment\",\"code\":1}";
	ck_assert_int_eq(ck_status_parse(j, strlen(j), 500, &s), -1);
	ck_assert_int_eq(s.code, 500);
	ck_assert_str_eq(s.reason, "InternalError");
	ck_status_clear(&s);

	/* A Status without a code takes the HTTP one; a long body is cut. */
	const char *nc = "{\"kind\":\"Status\",\"reason\":\"Gone\"}";
	ck_assert_int_eq(ck_status_parse(nc, strlen(nc), 410, &s), 0);
	ck_assert_int_eq(s.code, 410);
	ck_status_clear(&s);
	char big[1000];
	memset(big, 'a', sizeof(big));
	ck_assert_int_eq(ck_status_parse(big, sizeof(big), 500, &s), -1);
	ck_assert_uint_lt(strlen(s.message), 300);
	ck_status_clear(&s);
	ck_status_clear(NULL);
}
END_TEST

START_TEST(test_predicates)
{
	ck_result_t r = {0};
	/* A transport error: no HTTP answer. */
	r.transport_code = 7;
	r.error = ck_xstrdup("connecting to 127.0.0.1:6443: Connection refused");
	ck_assert(ck_result_is_transport(&r));
	ck_assert(!ck_result_is_not_found(&r) && !ck_result_is_server_error(&r) &&
	          !ck_result_ok(&r));
	ck_result_clear(&r);

	r.http_code = 200;
	ck_assert(ck_result_ok(&r));
	ck_assert(!ck_result_is_transport(&r) && !ck_result_is_not_found(&r));

	/* An unknown reason falls back to the code; a known other reason does not. */
	r.http_code = 404;
	r.error = ck_xstrdup("e");
	r.status.reason = ck_xstrdup("SomethingNew");
	ck_assert(ck_result_is_not_found(&r));
	free(r.status.reason);
	r.status.reason = ck_xstrdup("MethodNotAllowed");
	ck_assert(!ck_result_is_not_found(&r));
	free(r.status.reason);
	r.status.reason = NULL;
	r.http_code = 429;
	r.status.code = 429;
	ck_assert(ck_result_is_too_many_requests(&r));
	r.http_code = r.status.code = 401;
	ck_assert(ck_result_is_unauthorized(&r));
	r.http_code = r.status.code = 410;
	ck_assert(ck_result_is_gone(&r));
	r.http_code = r.status.code = 503;
	ck_assert(ck_result_is_server_error(&r));
	/* Old servers: a Timeout whose message names the problem. */
	r.http_code = r.status.code = 504;
	r.status.reason = ck_xstrdup("Timeout");
	r.status.message = ck_xstrdup("Timeout: Too large resource version: 10, current: 5");
	ck_assert(ck_result_is_rv_too_large(&r));
	ck_result_clear(&r);
}
END_TEST

Suite *suite_status(void)
{
	Suite *s = suite_create("status");
	TCase *tc = tcase_create("status");
	tcase_add_test(tc, test_not_found);
	tcase_add_test(tc, test_conflicts);
	tcase_add_test(tc, test_forbidden_gone_throttled);
	tcase_add_test(tc, test_real_bodies);
	tcase_add_test(tc, test_not_a_status);
	tcase_add_test(tc, test_predicates);
	suite_add_tcase(s, tc);
	return s;
}
