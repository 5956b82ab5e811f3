/*
 * The fake API server (<ckube/fake.h>) against the real one: the same requests
 * sent to both, their answers compared -- status code, reason, message and
 * details -- for the errors a controller branches on (404 NotFound, 409
 * AlreadyExists, 409 Conflict on a stale update and on a failed precondition,
 * 422 Invalid, 400 for a namespace that differs from the URL's) and for the
 * server-set fields it reads (generation on a spec change and a metadata change,
 * resourceVersion changing).
 *
 * Both clients run on the fake env's loop thread (ck_fake_env_run creates the
 * real one there); the test's thread makes the blocking calls, as workers do.
 */
#include <ckube/fake.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const cm_fields[] = {"data"};
static const ck_type_t t_cm = {"", "v1", "ConfigMap", "configmaps", true, cm_fields, 1, false};
static const ck_type_t t_ns = {"", "v1", "Namespace", "namespaces", false, NULL, 0, false};
static const char *const dep_fields[] = {"spec.replicas"};
static const ck_type_t t_dep = {"apps",     "v1", "Deployment", "deployments", true,
                                dep_fields, 1,    false};

typedef struct both {
	ck_fake_t *fake;
	ck_fake_env_t *env;
	ck_client_t *real;
	char *err;
	char ns[64];
} both_t;

static void real_new(void *ud)
{
	both_t *b = ud;
	ck_config_load_opts_t lo = {.kubeconfig = getenv("KUBECONFIG")};
	ck_config_t *cfg = ck_config_load(&lo, &b->err);
	if (cfg != NULL)
		b->real = ck_client_new(ck_fake_env_loop(b->env), cfg, NULL, &b->err);
}

static void real_free(void *ud)
{
	both_t *b = ud;
	ck_client_free(b->real);
}

/* One answer, for comparing. */
typedef struct ans {
	int rc, code;
	char reason[64], message[512], name[64], kind[64], group[64], causes[128];
	char rv[32];
	int64_t generation;
} ans_t;

static void take(ans_t *a, int rc, ck_result_t *r)
{
	memset(a, 0, sizeof(*a));
	a->rc = rc;
	a->code = r->http_code;
	snprintf(a->reason, sizeof(a->reason), "%s", r->status.reason ? r->status.reason : "");
	snprintf(a->message, sizeof(a->message), "%s", r->status.message ? r->status.message : "");
	snprintf(a->name, sizeof(a->name), "%s",
	         r->status.details_name ? r->status.details_name : "");
	snprintf(a->kind, sizeof(a->kind), "%s",
	         r->status.details_kind ? r->status.details_kind : "");
	snprintf(a->group, sizeof(a->group), "%s",
	         r->status.details_group ? r->status.details_group : "");
	snprintf(a->causes, sizeof(a->causes), "%s", r->status.causes ? r->status.causes : "");
	if (r->obj != NULL) {
		snprintf(a->rv, sizeof(a->rv), "%s", r->obj->rv);
		a->generation = r->obj->generation;
	}
	ck_result_clear(r);
}

/* Compares everything but what is the server's own (uids, resourceVersions): the
 * message up to cut (NULL = whole). */
static void same(const char *what, const ans_t *real, const ans_t *fake, const char *cut)
{
	ck_assert_msg(real->rc == fake->rc && real->code == fake->code, "%s: real %d, fake %d",
	              what, real->code, fake->code);
	ck_assert_msg(strcmp(real->reason, fake->reason) == 0, "%s: reason: real %s, fake %s", what,
	              real->reason, fake->reason);
	size_t n = strlen(real->message);
	if (cut != NULL && strstr(real->message, cut) != NULL)
		n = (size_t)(strstr(real->message, cut) - real->message) + strlen(cut);
	ck_assert_msg(strncmp(real->message, fake->message, n) == 0 &&
	                  (cut != NULL || strlen(fake->message) == n),
	              "%s: message:\n real %s\n fake %s", what, real->message, fake->message);
	ck_assert_msg(strcmp(real->name, fake->name) == 0 && strcmp(real->kind, fake->kind) == 0 &&
	                  strcmp(real->group, fake->group) == 0,
	              "%s: details: real %s/%s/%s, fake %s/%s/%s", what, real->name, real->kind,
	              real->group, fake->name, fake->kind, fake->group);
	ck_assert_msg(strcmp(real->causes, fake->causes) == 0, "%s: causes: real %s, fake %s", what,
	              real->causes, fake->causes);
	ck_assert_msg(real->generation == fake->generation, "%s: generation: real %lld, fake %lld",
	              what, (long long)real->generation, (long long)fake->generation);
}

/* The same call on both: c is the client, each call's body uses ns. */
#define BOTH(what, cut, call)                                                                      \
	do {                                                                                       \
		ans_t ra, fa;                                                                      \
		ck_result_t r = {0};                                                               \
		ck_client_t *c = b.real;                                                           \
		take(&ra, (call), &r);                                                             \
		c = ck_fake_env_client(b.env);                                                     \
		take(&fa, (call), &r);                                                             \
		same(what, &ra, &fa, cut);                                                         \
		last_real = ra;                                                                    \
		last_fake = fa;                                                                    \
	} while (0)

static int stale_update(ck_client_t *c, const char *ns, const char *rv, ck_result_t *r)
{
	char body[256];
	snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"%s\"}}",
	         rv);
	return ck_client_update_sync(c, &t_cm, ns, "a", body, NULL, r);
}

static int stale_patch(ck_client_t *c, const char *ns, const char *rv, ck_result_t *r)
{
	char body[256];
	snprintf(body, sizeof(body),
	         "{\"metadata\":{\"resourceVersion\":\"%s\"},\"data\":{\"k\":\"z\"}}", rv);
	return ck_client_patch_sync(c, &t_cm, ns, "a", CK_PATCH_MERGE, body, NULL, r);
}

/* The event types a watch delivers, as "ADDED,MODIFIED,..." (loop thread). */
static void on_event(void *ud, ck_watch_type_t type, ck_obj_t *obj, const ck_status_t *st)
{
	char *log = ud;
	size_t n = strlen(log);
	snprintf(log + n, 256 - n, "%s%s", n ? "," : "", ck_watch_type_name(type));
	ck_obj_unref(obj);
}

/* Watches t_cm in ns from rv with a label selector for 2 s; the types into log. */
static int watch_types(ck_client_t *c, const char *ns, const char *rv, char log[256])
{
	ck_list_opts_t o = {.resource_version = rv, .label_selector = "l=1", .timeout_seconds = 2};
	char *q = ck_list_opts_query(&o, true);
	ck_req_spec_t spec = {.method = "GET",
	                      .type = &t_cm,
	                      .ns = ns,
	                      .query = q,
	                      .decode = CK_DEC_WATCH,
	                      .is_watch = true};
	static const ck_dec_cb_t cb = {.on_event = on_event};
	ck_result_t r = {0};
	log[0] = '\0';
	int rc = ck_client_do_sync_stream(c, &spec, &cb, log, &r);
	ck_result_clear(&r);
	free(q);
	return rc;
}

START_TEST(test_same_answers)
{
	both_t b = {0};
	char *err = NULL;
	b.fake = ck_fake_new(NULL);
	ck_fake_register(b.fake, &t_cm);
	ck_fake_register(b.fake, &t_dep);
	b.env = ck_fake_env_new(b.fake, NULL, &err);
	ck_assert_msg(b.env != NULL, "%s", err);
	ck_fake_env_run(b.env, real_new, &b);
	ck_assert_msg(b.real != NULL, "real client: %s", b.err);
	snprintf(b.ns, sizeof(b.ns), "fake-it-%08llx", (unsigned long long)(ck_rand_u64() >> 32));
	ans_t last_real, last_fake;
	char body[512];
	const char *ns = b.ns;
	{
		ck_result_t r = {0};
		snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"%s\"}}", ns);
		ck_assert_int_eq(ck_client_create_sync(b.real, &t_ns, NULL, body, NULL, &r), 0);
		ck_result_clear(&r);
	}

	BOTH("get absent", NULL, ck_client_get_sync(c, &t_cm, ns, "absent", &r));
	ck_assert_int_eq(last_fake.code, 404);
	BOTH("create", NULL,
	     ck_client_create_sync(
	         c, &t_cm, ns, "{\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"v\"}}", NULL, &r));
	/* The create's resourceVersion, stale once the
	 * object has changed. */
	char rv_real[32], rv_fake[32];
	snprintf(rv_real, sizeof(rv_real), "%s", last_real.rv);
	snprintf(rv_fake, sizeof(rv_fake), "%s", last_fake.rv);
	BOTH("create again", NULL,
	     ck_client_create_sync(c, &t_cm, ns, "{\"metadata\":{\"name\":\"a\"}}", NULL, &r));
	ck_assert_str_eq(last_fake.reason, "AlreadyExists");
	BOTH("update", NULL,
	     ck_client_patch_sync(c, &t_cm, ns, "a", CK_PATCH_MERGE, "{\"data\":{\"k\":\"w\"}}",
	                          NULL, &r));
	BOTH("update stale", NULL, stale_update(c, ns, c == b.real ? rv_real : rv_fake, &r));
	ck_assert_str_eq(last_fake.reason, "Conflict");
	BOTH("create without a name", NULL,
	     ck_client_create_sync(c, &t_cm, ns, "{\"metadata\":{}}", NULL, &r));
	ck_assert_int_eq(last_fake.code, 422);
	BOTH("create in another namespace", NULL,
	     ck_client_create_sync(c, &t_cm, ns,
	                           "{\"metadata\":{\"name\":\"b\",\"namespace\":\"elsewhere\"}}",
	                           NULL, &r));
	ck_assert_int_eq(last_fake.code, 400);
	BOTH("delete with a wrong uid", "the UID in record (",
	     ck_client_delete_sync(
	         c, &t_cm, ns, "a",
	         &(ck_delete_opts_t){.precondition_uid = "nope", .grace_period_seconds = -1}, &r));
	ck_assert_str_eq(last_fake.reason, "Conflict");
	BOTH("patch absent", NULL,
	     ck_client_patch_sync(c, &t_cm, ns, "absent", CK_PATCH_MERGE, "{}", NULL, &r));
	BOTH("update absent", NULL,
	     ck_client_update_sync(c, &t_cm, ns, "absent", "{\"metadata\":{\"name\":\"absent\"}}",
	                           NULL, &r));

	BOTH("merge patch with a stale resourceVersion", NULL,
	     stale_patch(c, ns, c == b.real ? rv_real : rv_fake, &r));
	ck_assert_str_eq(last_fake.reason, "Conflict");
	BOTH("apply without a field manager", NULL,
	     ck_client_patch_sync(c, &t_cm, ns, "a", CK_PATCH_APPLY,
	                          "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
	                          "{\"name\":\"a\"}}",
	                          NULL, &r));
	ck_assert_int_eq(last_fake.code, 422);
	BOTH("apply creates", NULL,
	     ck_client_patch_sync(c, &t_cm, ns, "applied", CK_PATCH_APPLY,
	                          "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
	                          "{\"name\":\"applied\"},\"data\":{\"x\":\"1\"}}",
	                          &(ck_write_opts_t){.field_manager = "it"}, &r));
	ck_assert_int_eq(last_fake.code, 201);
	BOTH("delete", NULL, ck_client_delete_sync(c, &t_cm, ns, "applied", NULL, &r));
	BOTH("delete again", NULL, ck_client_delete_sync(c, &t_cm, ns, "applied", NULL, &r));
	ck_assert_int_eq(last_fake.code, 404);

	/* Held by a finalizer: no new one may be added while it is being deleted. */
	BOTH("create held", NULL,
	     ck_client_create_sync(c, &t_cm, ns,
	                           "{\"metadata\":{\"name\":\"held\",\"finalizers\":[\"it/a\"]}}",
	                           NULL, &r));
	BOTH("delete held", NULL, ck_client_delete_sync(c, &t_cm, ns, "held", NULL, &r));
	BOTH("add a finalizer while deleted", NULL,
	     ck_client_patch_sync(c, &t_cm, ns, "held", CK_PATCH_MERGE,
	                          "{\"metadata\":{\"finalizers\":[\"it/a\",\"it/z\",\"it/b\"]}}",
	                          NULL, &r));
	ck_assert_int_eq(last_fake.code, 422);
	BOTH("release held", NULL,
	     ck_client_patch_sync(c, &t_cm, ns, "held", CK_PATCH_MERGE,
	                          "{\"metadata\":{\"finalizers\":null}}", NULL, &r));

	/* A selecting watch: an object leaving the selector is DELETED, one entering it
	 * ADDED, a change outside it nothing. */
	BOTH("labelled", NULL,
	     ck_client_create_sync(c, &t_cm, ns,
	                           "{\"metadata\":{\"name\":\"l\",\"labels\":{\"l\":\"1\"}}}", NULL,
	                           &r));
	snprintf(rv_real, sizeof(rv_real), "%s", last_real.rv);
	snprintf(rv_fake, sizeof(rv_fake), "%s", last_fake.rv);
	BOTH("label off", NULL,
	     ck_client_patch_sync(c, &t_cm, ns, "l", CK_PATCH_MERGE,
	                          "{\"metadata\":{\"labels\":{\"l\":null}}}", NULL, &r));
	BOTH("change outside", NULL,
	     ck_client_patch_sync(c, &t_cm, ns, "l", CK_PATCH_MERGE, "{\"data\":{\"x\":\"1\"}}",
	                          NULL, &r));
	BOTH("label on", NULL,
	     ck_client_patch_sync(c, &t_cm, ns, "l", CK_PATCH_MERGE,
	                          "{\"metadata\":{\"labels\":{\"l\":\"1\"}}}", NULL, &r));
	BOTH("change inside", NULL,
	     ck_client_patch_sync(c, &t_cm, ns, "l", CK_PATCH_MERGE, "{\"data\":{\"x\":\"2\"}}",
	                          NULL, &r));
	BOTH("delete labelled", NULL, ck_client_delete_sync(c, &t_cm, ns, "l", NULL, &r));
	char real_log[256], fake_log[256];
	ck_assert_int_eq(watch_types(b.real, ns, rv_real, real_log), 0);
	ck_assert_int_eq(watch_types(ck_fake_env_client(b.env), ns, rv_fake, fake_log), 0);
	ck_assert_msg(strcmp(real_log, fake_log) == 0, "watch: real %s, fake %s", real_log,
	              fake_log);
	ck_assert_str_eq(fake_log, "DELETED,ADDED,MODIFIED,DELETED");

	/* generation: 1 on create, +1 on a spec change, not on a label change. */
	const char *dep =
	    "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"replicas\":%d,\"selector\":{"
	    "\"matchLabels\":"
	    "{\"app\":\"d\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"d\"}},\"spec\":"
	    "{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}}}";
	char d1[512], d2[512];
	snprintf(d1, sizeof(d1), dep, 1);
	snprintf(d2, sizeof(d2), dep, 2);
	BOTH("create deployment", NULL, ck_client_create_sync(c, &t_dep, ns, d1, NULL, &r));
	ck_assert_int_eq(last_fake.generation, 1);
	BOTH("spec change", NULL,
	     ck_client_patch_sync(c, &t_dep, ns, "d", CK_PATCH_MERGE, "{\"spec\":{\"replicas\":2}}",
	                          NULL, &r));
	ck_assert_int_eq(last_fake.generation, 2);
	BOTH("label change", NULL,
	     ck_client_patch_sync(c, &t_dep, ns, "d", CK_PATCH_MERGE,
	                          "{\"metadata\":{\"labels\":{\"x\":\"y\"}}}", NULL, &r));
	ck_assert_int_eq(last_fake.generation, 2);
	BOTH("status through the main resource", NULL,
	     ck_client_patch_sync(c, &t_dep, ns, "d", CK_PATCH_MERGE,
	                          "{\"status\":{\"observedGeneration\":7}}", NULL, &r));
	(void)d2;

	{
		ck_result_t r = {0};
		ck_client_delete_sync(b.real, &t_ns, NULL, ns, NULL, &r);
		ck_result_clear(&r);
	}
	ck_fake_env_run(b.env, real_free, &b);
	ck_fake_env_free(b.env);
	ck_fake_free(b.fake);
	free(b.err);
}
END_TEST

Suite *suite_fake(void)
{
	Suite *s = suite_create("fake");
	TCase *tc = tcase_create("same-answers");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_same_answers);
	suite_add_tcase(s, tc);
	return s;
}
