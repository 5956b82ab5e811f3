/*
 * Streaming decoder: recorded API JSON (tests/fixtures/json) fed whole, split in
 * two at every byte offset and fed one byte at a time must give identical
 * results; plus the edge cases (type after object, limits, malformed input).
 */
#include <ckube/base.h>
#include <ckube/decode.h>
#include <ckube/types.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURES "../fixtures/json/"

static char *fixture(const char *name, size_t *len)
{
	char *buf = NULL, *err = NULL;
	char path[256];
	snprintf(path, sizeof(path), FIXTURES "%s", name);
	if (ck_file_read_all(path, &buf, len, &err) != 0)
		ck_abort_msg("reading %s: %s", path, err);
	return buf;
}

/* Appends a canonical text of an object: everything it holds. */
static void dump_obj(ck_sbuf_t *o, const ck_obj_t *obj)
{
	ck_sbuf_printf(o, "obj %s ns=%s name=%s uid=%s rv=%s gen=%lld ct=%s dt=%s\n",
	               obj->type->kind, obj->ns, obj->name, obj->uid, obj->rv,
	               (long long)obj->generation, obj->creation_timestamp,
	               obj->deletion_timestamp ? obj->deletion_timestamp : "(null)");
	for (size_t i = 0; i < obj->nlabels; i++)
		ck_sbuf_printf(o, " label %s=%s\n", obj->labels[i].key, obj->labels[i].value);
	for (size_t i = 0; i < obj->nannotations; i++)
		ck_sbuf_printf(o, " annot %s=%s\n", obj->annotations[i].key,
		               obj->annotations[i].value);
	for (size_t i = 0; i < obj->nowners; i++) {
		const ck_obj_owner_t *w = &obj->owners[i];
		ck_sbuf_printf(o, " owner %s %s %s %s c=%d b=%d\n", w->api_version, w->kind,
		               w->name, w->uid, w->controller, w->block_owner_deletion);
	}
	for (size_t i = 0; i < obj->nfields; i++) {
		const ck_val_t *v = &obj->fields[i];
		ck_sbuf_printf(o, " field %s ", obj->type->fields[i]);
		switch (v->type) {
		case CK_VAL_ABSENT:
			ck_sbuf_puts(o, "absent");
			break;
		case CK_VAL_NULL:
			ck_sbuf_puts(o, "null");
			break;
		case CK_VAL_BOOL:
			ck_sbuf_printf(o, "bool %d", v->u.b);
			break;
		case CK_VAL_INT:
			ck_sbuf_printf(o, "int %lld", (long long)v->u.i);
			break;
		case CK_VAL_DOUBLE:
			ck_sbuf_printf(o, "double %.17g", v->u.d);
			break;
		case CK_VAL_STRING:
			ck_sbuf_printf(o, "string %s", v->u.s);
			break;
		case CK_VAL_JSON:
			ck_sbuf_printf(o, "json %s", v->u.s);
			break;
		}
		ck_sbuf_putc(o, '\n');
	}
	ck_sbuf_printf(o, " size %zu\n", ck_obj_size(obj));
}

typedef struct rec {
	ck_sbuf_t out;
	size_t nobj, nmeta, nevents;
	ck_obj_t *objs[16];
	size_t nkept;
	bool full_errors;
} rec_t;

static void keep(rec_t *r, ck_obj_t *obj)
{
	if (r->nkept < CK_ARRAY_LEN(r->objs))
		r->objs[r->nkept++] = obj;
	else
		ck_obj_unref(obj);
}

static void on_object(void *ud, ck_obj_t *obj)
{
	rec_t *r = ud;
	r->nobj++;
	dump_obj(&r->out, obj);
	keep(r, obj);
}

static void on_list_meta(void *ud, const char *rv, const char *cont, int64_t remaining)
{
	rec_t *r = ud;
	r->nmeta++;
	ck_sbuf_printf(&r->out, "listmeta rv=%s continue=%s remaining=%lld\n", rv, cont,
	               (long long)remaining);
}

static void on_event(void *ud, ck_watch_type_t type, ck_obj_t *obj, const ck_status_t *st)
{
	rec_t *r = ud;
	r->nevents++;
	ck_sbuf_printf(&r->out, "event %s\n", ck_watch_type_name(type));
	if (obj != NULL) {
		dump_obj(&r->out, obj);
		keep(r, obj);
	}
	if (st != NULL)
		ck_sbuf_printf(&r->out, " status code=%d status=%s reason=%s message=%s retry=%d\n",
		               st->code, st->status ? st->status : "", st->reason ? st->reason : "",
		               st->message ? st->message : "", st->retry_after_seconds);
}

static const ck_dec_cb_t cbs = {on_object, on_list_meta, on_event};

static void rec_free(rec_t *r)
{
	for (size_t i = 0; i < r->nkept; i++)
		ck_obj_unref(r->objs[i]);
	ck_sbuf_free(&r->out);
	memset(r, 0, sizeof(*r));
}

/*
 * Decodes buf fed in chunks: split at each offset in cuts[0..ncuts). Returns 0,
 * or -1 with the error appended to r->out (so that error results compare too).
 */
static int run(const ck_type_t *t, ck_dec_mode_t mode, const char *buf, size_t len,
               const size_t *cuts, size_t ncuts, size_t max, rec_t *r)
{
	ck_dec_t *d = ck_dec_new(t, mode, &cbs, r, max);
	char *err = NULL;
	size_t at = 0;
	int rc = 0;
	for (size_t i = 0; i <= ncuts && rc == 0; i++) {
		size_t end = i < ncuts ? cuts[i] : len;
		rc = ck_dec_feed(d, buf + at, end - at, &err);
		at = end;
	}
	if (rc == 0)
		rc = ck_dec_finish(d, &err);
	if (rc != 0) {
		/* The excerpt shows the bytes at hand where yajl noticed, which depends on
		 * the chunking; the message and offset before it must not. */
		char *near = strstr(err, " (near \"");
		ck_sbuf_printf(&r->out, "error %.*s\n", near ? (int)(near - err) : (int)strlen(err),
		               err);
		if (r->full_errors)
			ck_sbuf_printf(&r->out, "full %s\n", err);
	}
	ck_assert_uint_eq(ck_dec_bytes(d), rc == 0 ? len : ck_dec_bytes(d));
	free(err);
	ck_dec_free(d);
	return rc;
}

/* The whole-buffer result must equal every two-way split and the byte-wise feed. */
static void check_all_splits(const ck_type_t *t, ck_dec_mode_t mode, const char *buf, size_t len,
                             const char *expect_whole)
{
	rec_t whole = {0};
	run(t, mode, buf, len, NULL, 0, 0, &whole);
	if (expect_whole != NULL)
		ck_assert_str_eq(ck_sbuf_cstr(&whole.out), expect_whole);
	for (size_t cut = 0; cut <= len; cut++) {
		rec_t r = {0};
		run(t, mode, buf, len, &cut, 1, 0, &r);
		if (strcmp(ck_sbuf_cstr(&r.out), ck_sbuf_cstr(&whole.out)) != 0)
			ck_abort_msg("split at %zu differs:\n%s\n--- whole:\n%s", cut,
			             ck_sbuf_cstr(&r.out), ck_sbuf_cstr(&whole.out));
		rec_free(&r);
	}
	size_t *cuts = ck_xmalloc(len * sizeof(*cuts));
	for (size_t i = 0; i < len; i++)
		cuts[i] = i;
	rec_t r = {0};
	run(t, mode, buf, len, cuts, len, 0, &r);
	ck_assert_str_eq(ck_sbuf_cstr(&r.out), ck_sbuf_cstr(&whole.out));
	rec_free(&r);
	free(cuts);
	rec_free(&whole);
}

START_TEST(test_single_object)
{
	size_t len;
	char *buf = fixture("deployment.json", &len);
	rec_t r = {0};
	ck_assert_int_eq(run(&ck_type_deployment, CK_DEC_OBJECT, buf, len, NULL, 0, 0, &r), 0);
	ck_assert_uint_eq(r.nobj, 1);
	ck_obj_t *o = r.objs[0];
	ck_assert_ptr_eq(o->type, &ck_type_deployment);
	ck_assert_str_eq(o->ns, "default");
	ck_assert_str_eq(o->name, "example-foo");
	ck_assert_str_eq(o->uid, "3c5e1d2a-8f4b-4c6d-9e0f-1a2b3c4d5e6f");
	ck_assert_str_eq(o->rv, "4711");
	ck_assert_int_eq(o->generation, 2);
	ck_assert_str_eq(o->creation_timestamp, "2024-05-02T10:11:12Z");
	ck_assert_ptr_null(o->deletion_timestamp);
	ck_assert_uint_eq(o->nlabels, 2);
	ck_assert_str_eq(ck_obj_label(o, "app"), "nginx");
	ck_assert_str_eq(ck_obj_label(o, "controller"), "example-foo");
	/* Deployments do not keep annotations. */
	ck_assert_uint_eq(o->nannotations, 0);
	ck_assert_ptr_null(ck_obj_annotation(o, "deployment.kubernetes.io/revision"));
	const ck_obj_owner_t *c = ck_obj_controller_ref(o);
	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(c->kind, "Foo");
	ck_assert_str_eq(c->api_version, "samplecontroller.k8s.io/v1alpha1");
	ck_assert_str_eq(c->uid, "9a1f3c6e-2b7d-4e1a-8f0c-5d6e7f8a9b0c");
	ck_assert(c->block_owner_deletion);
	int32_t v;
	int64_t g;
	ck_assert(ck_deployment_spec_replicas(o, &v) && v == 1);
	ck_assert(ck_deployment_status_available_replicas(o, &v) && v == 1);
	ck_assert(ck_deployment_status_ready_replicas(o, &v) && v == 1);
	ck_assert(ck_deployment_status_replicas(o, &v) && v == 1);
	ck_assert(ck_deployment_status_updated_replicas(o, &v) && v == 1);
	ck_assert(ck_deployment_status_observed_generation(o, &g) && g == 2);
	/* The plain descriptor does not keep the pod template. */
	ck_assert_ptr_null(ck_deployment_template_containers_json(o));
	/* managedFields (most of the bytes) are not kept: the object is small. */
	ck_assert_uint_lt(ck_obj_size(o), 640);
	ck_assert_uint_gt(ck_obj_size(o), 300);
	check_all_splits(&ck_type_deployment, CK_DEC_OBJECT, buf, len, NULL);

	/* With the template: the containers too, and the plain accessors read it. */
	rec_t rt = {0};
	ck_assert_int_eq(
	    run(&ck_type_deployment_with_template, CK_DEC_OBJECT, buf, len, NULL, 0, 0, &rt), 0);
	ck_obj_t *ot = rt.objs[0];
	ck_assert_str_eq(ck_deployment_template_containers_json(ot),
	                 "[{\"name\":\"nginx\",\"image\":\"nginx:latest\",\"resources\":{},"
	                 "\"terminationMessagePath\":\"/dev/termination-log\","
	                 "\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"Always\"}]");
	ck_assert(ck_deployment_spec_replicas(ot, &v) && v == 1);
	ck_assert(ck_deployment_status_observed_generation(ot, &g) && g == 2);
	ck_assert_uint_gt(ck_obj_size(ot), ck_obj_size(o) + 150);
	/* An extension whose first fields differ is another layout: not read. */
	static const char *const swapped[] = {"status.availableReplicas", "spec.replicas"};
	ck_type_t other = ck_type_deployment;
	other.fields = swapped;
	other.nfields = 2;
	rec_t rs = {0};
	ck_assert_int_eq(run(&other, CK_DEC_OBJECT, buf, len, NULL, 0, 0, &rs), 0);
	ck_assert(!ck_deployment_spec_replicas(rs.objs[0], &v));
	rec_free(&rs);
	rec_free(&rt);
	rec_free(&r);
	check_all_splits(&ck_type_deployment_with_template, CK_DEC_OBJECT, buf, len, NULL);
	free(buf);
}
END_TEST

START_TEST(test_list)
{
	size_t len;
	char *buf = fixture("deployment_list.json", &len);
	rec_t r = {0};
	ck_assert_int_eq(run(&ck_type_deployment, CK_DEC_LIST, buf, len, NULL, 0, 0, &r), 0);
	ck_assert_uint_eq(r.nobj, 3);
	ck_assert_uint_eq(r.nmeta, 1);
	/* The list meta precedes the items in the API server's output, and is emitted
	 * as soon as it closes: first in the record. */
	ck_assert(strncmp(ck_sbuf_cstr(&r.out),
	                  "listmeta rv=5123 continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NTEy"
	                  "Mywic3RhcnQiOiJ0ZWFtLWEvY2FjaGVcdTAwMDAifQ remaining=2\n",
	                  strlen("listmeta rv=5123 continue=")) == 0);
	ck_assert_str_eq(r.objs[0]->name, "web");
	ck_assert_str_eq(r.objs[1]->name, "api");
	ck_assert_ptr_null(ck_obj_controller_ref(r.objs[1]));
	ck_assert_uint_eq(r.objs[1]->nowners, 0);
	ck_assert_str_eq(r.objs[2]->ns, "team-a");
	int32_t v;
	ck_assert(ck_deployment_spec_replicas(r.objs[2], &v) && v == 4);
	ck_assert(ck_deployment_status_ready_replicas(r.objs[2], &v) && v == 3);
	char key[64];
	ck_assert_uint_eq(ck_obj_key(r.objs[2], key, sizeof(key)), strlen("team-a/cache"));
	ck_assert_str_eq(key, "team-a/cache");
	rec_free(&r);
	check_all_splits(&ck_type_deployment, CK_DEC_LIST, buf, len, NULL);
	free(buf);
}
END_TEST

START_TEST(test_watch)
{
	size_t len;
	char *buf = fixture("deployment_watch.json", &len);
	rec_t r = {0};
	ck_assert_int_eq(run(&ck_type_deployment, CK_DEC_WATCH, buf, len, NULL, 0, 0, &r), 0);
	ck_assert_uint_eq(r.nevents, 5);
	ck_assert_uint_eq(r.nkept, 4);
	const char *out = ck_sbuf_cstr(&r.out);
	const char *a = strstr(out, "event ADDED"), *m = strstr(out, "event MODIFIED"),
	           *b = strstr(out, "event BOOKMARK"), *dl = strstr(out, "event DELETED"),
	           *e = strstr(out, "event ERROR");
	ck_assert(a && m && b && dl && e && a < m && m < b && b < dl && dl < e);
	/* ADDED and MODIFIED: annotations not kept for Deployments. */
	ck_assert_uint_eq(r.objs[0]->nannotations, 0);
	int32_t v;
	ck_assert(ck_deployment_status_ready_replicas(r.objs[0], &v) && v == 0);
	ck_assert(ck_deployment_status_ready_replicas(r.objs[1], &v) && v == 2);
	/* BOOKMARK: only metadata, annotations kept so the end of initial events shows. */
	ck_obj_t *bm = r.objs[2];
	ck_assert_str_eq(bm->rv, "6002");
	ck_assert_str_eq(bm->name, "");
	ck_assert_str_eq(bm->creation_timestamp, "");
	ck_assert_str_eq(ck_obj_annotation(bm, "k8s.io/initial-events-end"), "true");
	ck_assert_int_eq(ck_obj_field(bm, CK_DEPLOYMENT_SPEC_REPLICAS)->type, CK_VAL_ABSENT);
	ck_assert_ptr_null(ck_deployment_template_containers_json(bm));
	ck_assert(!ck_deployment_spec_replicas(bm, &v));
	/* DELETED carries its deletionTimestamp. */
	ck_assert_str_eq(r.objs[3]->deletion_timestamp, "2024-05-02T11:00:00Z");
	ck_assert_ptr_nonnull(strstr(out, "status code=410 status=Failure reason=Expired "
	                                  "message=too old resource version: 5123 (6004)"));
	rec_free(&r);
	check_all_splits(&ck_type_deployment, CK_DEC_WATCH, buf, len, NULL);
	free(buf);
}
END_TEST

/* "type" usually precedes "object"; when it follows, the event must still decode. */
START_TEST(test_watch_type_after_object)
{
	const char *in =
	    "{\"object\":{\"kind\":\"Deployment\",\"metadata\":{\"name\":\"a\",\"namespace\":\"n\","
	    "\"annotations\":{\"x\":\"y\"}},\"status\":{\"replicas\":3}},\"type\":\"MODIFIED\"}\n"
	    "{\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
	    "\"status\":\"Failure\",\"message\":\"gone\",\"reason\":\"Expired\","
	    "\"details\":{\"retryAfterSeconds\":3},\"code\":410},\"type\":\"ERROR\"}\n"
	    "{\"object\":{\"metadata\":{\"resourceVersion\":\"9\",\"annotations\":"
	    "{\"k8s.io/initial-events-end\":\"true\"}}},\"type\":\"BOOKMARK\"}\n";
	rec_t r = {0};
	ck_assert_int_eq(run(&ck_type_deployment, CK_DEC_WATCH, in, strlen(in), NULL, 0, 0, &r), 0);
	ck_assert_uint_eq(r.nevents, 3);
	ck_assert_uint_eq(r.nkept, 2);
	int32_t v;
	ck_assert_str_eq(r.objs[0]->name, "a");
	ck_assert(ck_deployment_status_replicas(r.objs[0], &v) && v == 3);
	ck_assert_uint_eq(r.objs[0]->nannotations, 0); /* dropped once the type was known */
	ck_assert_str_eq(ck_obj_annotation(r.objs[1], "k8s.io/initial-events-end"), "true");
	ck_assert_ptr_nonnull(strstr(ck_sbuf_cstr(&r.out), "event ERROR\n status code=410 "
	                                                   "status=Failure reason=Expired "
	                                                   "message=gone retry=3\n"));
	rec_free(&r);
	check_all_splits(&ck_type_deployment, CK_DEC_WATCH, in, strlen(in), NULL);
}
END_TEST

START_TEST(test_watch_errors)
{
	static const struct {
		const char *in;
		const char *want;
	} cases[] = {
	    {"{\"type\":\"SOMETHING\",\"object\":{}}", "unknown watch event type \"SOMETHING\""},
	    {"{\"object\":{}}", "watch event without a \"type\""},
	    {"{\"type\":\"ADDED\"}", "watch event ADDED without an object"},
	    {"[1]", "watch event is not a JSON object"},
	    {"{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"ADDED\",\"obj",
	     "input truncated inside a watch event"},
	    {"{\"type\":\"ADDED\",\"object\":{}}\ntru", "malformed JSON"},
	    {"{\"type\":\"ADDED\",\"object\":{}}\n{]", "malformed JSON after byte 30: parse error"},
	};
	for (size_t i = 0; i < CK_ARRAY_LEN(cases); i++) {
		rec_t r = {.full_errors = true};
		ck_assert_int_eq(run(&ck_type_deployment, CK_DEC_WATCH, cases[i].in,
		                     strlen(cases[i].in), NULL, 0, 0, &r),
		                 -1);
		if (strstr(ck_sbuf_cstr(&r.out), cases[i].want) == NULL)
			ck_abort_msg("case %zu: want \"%s\" in:\n%s", i, cases[i].want,
			             ck_sbuf_cstr(&r.out));
		rec_free(&r);
		/* The same error, at the same byte, however the input is cut. */
		check_all_splits(&ck_type_deployment, CK_DEC_WATCH, cases[i].in,
		                 strlen(cases[i].in), NULL);
	}
	/* A clean end between events, and an empty stream, are not errors. */
	const char *ok[] = {"", "\n", "{\"type\":\"ADDED\",\"object\":{}}\n \n"};
	for (size_t i = 0; i < CK_ARRAY_LEN(ok); i++) {
		rec_t r = {0};
		ck_assert_int_eq(
		    run(&ck_type_deployment, CK_DEC_WATCH, ok[i], strlen(ok[i]), NULL, 0, 0, &r),
		    0);
		rec_free(&r);
	}
}
END_TEST

START_TEST(test_errors)
{
	static const struct {
		ck_dec_mode_t mode;
		const char *in;
		const char *want;
	} cases[] = {
	    {CK_DEC_OBJECT, "", "malformed JSON after byte 0: parse error: premature EOF"},
	    {CK_DEC_OBJECT, "[]", "expected a JSON object"},
	    {CK_DEC_OBJECT, "{\"metadata\":{\"name\":\"a\"}", "input truncated inside an object"},
	    {CK_DEC_OBJECT, "{\"a\":1} x",
	     "malformed JSON after byte 7: parse error: trailing garbage (near \"{\"a\":1} x\")"},
	    {CK_DEC_OBJECT, "{\"a\":\"\xff\"}", "malformed JSON"},
	    {CK_DEC_LIST, "{\"items\":[1]}", "list item is not a JSON object"},
	    {CK_DEC_LIST, "{\"items\":[{}", "input truncated inside a list"},
	};
	for (size_t i = 0; i < CK_ARRAY_LEN(cases); i++) {
		rec_t r = {.full_errors = true};
		ck_assert_int_eq(run(&ck_type_deployment, cases[i].mode, cases[i].in,
		                     strlen(cases[i].in), NULL, 0, 0, &r),
		                 -1);
		if (strstr(ck_sbuf_cstr(&r.out), cases[i].want) == NULL)
			ck_abort_msg("case %zu: want \"%s\" in:\n%s", i, cases[i].want,
			             ck_sbuf_cstr(&r.out));
		rec_free(&r);
		check_all_splits(&ck_type_deployment, cases[i].mode, cases[i].in,
		                 strlen(cases[i].in), NULL);
	}
	/* After an error the decoder stays dead. */
	rec_t r = {0};
	ck_dec_t *d = ck_dec_new(&ck_type_deployment, CK_DEC_OBJECT, &cbs, &r, 0);
	char *err = NULL;
	ck_assert_int_eq(ck_dec_feed(d, "]", 1, &err), -1);
	free(err);
	err = NULL;
	ck_assert_int_eq(ck_dec_feed(d, "{}", 2, &err), -1);
	ck_assert_ptr_nonnull(err);
	free(err);
	ck_dec_free(d);
	ck_assert_uint_eq(r.nobj, 0);
	rec_free(&r);
}
END_TEST

/* An object over the limit is an error, whatever the chunking; at the limit it is fine. */
START_TEST(test_max_object_bytes)
{
	const char *item = "{\"metadata\":{\"name\":\"0123456789\"}}"; /* 34 bytes */
	size_t il = strlen(item);
	ck_sbuf_t in = CK_SBUF_INIT;
	ck_sbuf_puts(&in, "{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[");
	for (int i = 0; i < 50; i++) {
		if (i)
			ck_sbuf_putc(&in, ',');
		ck_sbuf_puts(&in, item);
	}
	ck_sbuf_puts(&in, "]}");
	rec_t r = {0};
	ck_assert_int_eq(run(&ck_type_deployment, CK_DEC_LIST, in.data, in.len, NULL, 0, il, &r),
	                 0);
	ck_assert_uint_eq(r.nobj, 50);
	rec_free(&r);
	ck_assert_int_eq(
	    run(&ck_type_deployment, CK_DEC_LIST, in.data, in.len, NULL, 0, il - 1, &r), -1);
	ck_assert_uint_eq(r.nobj, 0);
	char want[64];
	snprintf(want, sizeof(want), "larger than the limit of %zu bytes", il - 1);
	ck_assert_msg(strstr(ck_sbuf_cstr(&r.out), want) != NULL, "%s", ck_sbuf_cstr(&r.out));
	/* The error names the object: its name had been read when the limit was hit. */
	ck_assert_msg(strstr(ck_sbuf_cstr(&r.out), "object \"0123456789\" larger than") != NULL,
	              "%s", ck_sbuf_cstr(&r.out));
	rec_free(&r);
	/* A watch event too large names namespace/name (metadata comes first). */
	ck_sbuf_t ev = CK_SBUF_INIT;
	ck_sbuf_puts(&ev, "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"big\","
	                  "\"namespace\":\"ns1\",\"annotations\":{\"a\":\"");
	for (int i = 0; i < 5000; i++)
		ck_sbuf_putc(&ev, 'x');
	ck_sbuf_puts(&ev, "\"}}}}\n");
	ck_assert_int_eq(run(&ck_type_deployment, CK_DEC_WATCH, ev.data, ev.len, NULL, 0, 4096, &r),
	                 -1);
	ck_assert_msg(strstr(ck_sbuf_cstr(&r.out),
	                     "watch event \"ns1/big\" larger than the limit of 4096 bytes") != NULL,
	              "%s", ck_sbuf_cstr(&r.out));
	rec_free(&r);
	ck_sbuf_free(&ev);
	/* A huge string is refused before it is buffered whole. */
	ck_sbuf_t big = CK_SBUF_INIT;
	ck_sbuf_puts(&big, "{\"metadata\":{\"name\":\"");
	for (int i = 0; i < 100000; i++)
		ck_sbuf_putc(&big, 'x');
	ck_dec_t *d = ck_dec_new(&ck_type_deployment, CK_DEC_OBJECT, &cbs, &r, 1000);
	char *err = NULL;
	ck_assert_int_eq(ck_dec_feed(d, big.data, big.len, &err), -1);
	ck_assert_uint_le(ck_dec_bytes(d), 1000);
	free(err);
	ck_dec_free(d);
	ck_sbuf_free(&big);
	ck_sbuf_free(&in);
	rec_free(&r);
}
END_TEST

/*
 * Feeds buf whole, split in two at every offset (every len/509th on long input),
 * in three pieces, and in pieces of 1, 3 and 4096 bytes: each must fail with the
 * same error, and that error must contain want.
 */
static void check_error_splits(const ck_type_t *t, ck_dec_mode_t mode, const char *buf, size_t len,
                               size_t max, const char *want)
{
	rec_t whole = {0};
	ck_assert_int_eq(run(t, mode, buf, len, NULL, 0, max, &whole), -1);
	const char *w = ck_sbuf_cstr(&whole.out);
	if (strstr(w, want) == NULL)
		ck_abort_msg("want \"%s\" in:\n%s", want, w);
	size_t step = len > 4096 ? len / 509 : 1;
	for (size_t cut = 0; cut <= len; cut += step) {
		size_t cuts[2] = {cut, cut + (len - cut) / 2};
		for (size_t n = 1; n <= 2; n++) {
			rec_t r = {0};
			ck_assert_int_eq(run(t, mode, buf, len, cuts, n, max, &r), -1);
			if (strcmp(ck_sbuf_cstr(&r.out), w) != 0)
				ck_abort_msg("cut at %zu,%zu differs:\n%s\n--- whole:\n%s", cuts[0],
				             n == 2 ? cuts[1] : len, ck_sbuf_cstr(&r.out), w);
			rec_free(&r);
		}
	}
	static const size_t sizes[] = {1, 3, 4096};
	size_t *cuts = ck_xmalloc((len + 1) * sizeof(*cuts));
	for (size_t i = 0; i < CK_ARRAY_LEN(sizes); i++) {
		size_t n = 0;
		for (size_t at = sizes[i]; at < len; at += sizes[i])
			cuts[n++] = at;
		rec_t r = {0};
		ck_assert_int_eq(run(t, mode, buf, len, cuts, n, max, &r), -1);
		if (strcmp(ck_sbuf_cstr(&r.out), w) != 0)
			ck_abort_msg("pieces of %zu differ:\n%s\n--- whole:\n%s", sizes[i],
			             ck_sbuf_cstr(&r.out), w);
		rec_free(&r);
	}
	free(cuts);
	rec_free(&whole);
}

/*
 * The offset just after the bracket that opens level CK_DEC_MAX_DEPTH + 1, where the
 * decoder must refuse; strings are skipped (our inputs escape nothing but '"').
 */
static size_t too_deep_at(const char *s, size_t len)
{
	size_t depth = 0;
	bool str = false;
	for (size_t i = 0; i < len; i++) {
		if (str) {
			if (s[i] == '\\')
				i++;
			else if (s[i] == '"')
				str = false;
		} else if (s[i] == '"') {
			str = true;
		} else if (s[i] == '[' || s[i] == '{') {
			if (++depth > CK_DEC_MAX_DEPTH)
				return i + 1;
		} else if (s[i] == ']' || s[i] == '}') {
			depth--;
		}
	}
	ck_abort_msg("input is not too deep");
	return 0;
}

/*
 * Nesting past CK_DEC_MAX_DEPTH is refused wherever it is: outside any item (where
 * each token used to reset the size budget, so a body of brackets grew yajl's
 * stack without bound), in skipped and in kept fields of an item, in a watch
 * event's object and in its unknown fields.
 */
START_TEST(test_max_depth)
{
	static const struct {
		ck_dec_mode_t mode;
		const char *prefix;
		const char *level; /* repeated */
	} cases[] = {
	    {CK_DEC_LIST, "{\"kind\":\"DeploymentList\",\"x\":", "["},
	    {CK_DEC_LIST, "{\"x\":", "{\"k\":["},
	    {CK_DEC_LIST, "{\"metadata\":{\"x\":", "["},
	    {CK_DEC_LIST, "{\"items\":[{\"metadata\":{\"name\":\"a\"},\"x\":", "["},
	    {CK_DEC_LIST,
	     "{\"items\":[{\"spec\":{\"template\":{\"spec\":{\"containers\":", "[{\"a\":"},
	    {CK_DEC_WATCH, "{\"type\":\"ADDED\",\"object\":{\"x\":", "["},
	    {CK_DEC_WATCH,
	     "{\"type\":\"ADDED\",\"object\":{\"spec\":{\"template\":{\"spec\":"
	     "{\"containers\":",
	     "["},
	    {CK_DEC_WATCH, "{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"ADDED\",\"x\":", "["},
	    {CK_DEC_WATCH, "{\"x\":", "{\"y\":"},
	    {CK_DEC_OBJECT, "{\"status\":", "["},
	};
	for (size_t i = 0; i < CK_ARRAY_LEN(cases); i++) {
		/* Never closed: the refusal must come long before the end. */
		ck_sbuf_t in = CK_SBUF_INIT;
		ck_sbuf_puts(&in, cases[i].prefix);
		for (int l = 0; l < 300; l++)
			ck_sbuf_puts(&in, cases[i].level);
		char want[96];
		snprintf(want, sizeof(want), "JSON nested deeper than %d levels at byte %zu\n",
		         CK_DEC_MAX_DEPTH, too_deep_at(in.data, in.len));
		check_error_splits(&ck_type_deployment, cases[i].mode, in.data, in.len, 0, want);
		ck_sbuf_free(&in);
	}
	/* A million brackets outside any item: refused at the same byte, whole or cut. */
	ck_sbuf_t in = CK_SBUF_INIT;
	ck_sbuf_puts(&in, "{\"x\":");
	for (int l = 0; l < 1000000; l++)
		ck_sbuf_putc(&in, '[');
	char want[96];
	snprintf(want, sizeof(want), "at byte %d\n", 5 + CK_DEC_MAX_DEPTH);
	check_error_splits(&ck_type_deployment, CK_DEC_LIST, in.data, in.len, 0, want);
	ck_sbuf_free(&in);

	/* Exactly CK_DEC_MAX_DEPTH levels decode, skipped or kept (the list, the items
	 * array, the item, spec, template, spec: 6 levels above containers). */
	for (int kept = 0; kept < 2; kept++) {
		ck_sbuf_reset(&in);
		int above = kept ? 6 : 3;
		ck_sbuf_puts(&in,
		             kept ? "{\"items\":[{\"spec\":{\"template\":{\"spec\":{\"containers\":"
		                  : "{\"items\":[{\"x\":");
		for (int l = 0; l < CK_DEC_MAX_DEPTH - above; l++)
			ck_sbuf_putc(&in, '[');
		for (int l = 0; l < CK_DEC_MAX_DEPTH - above; l++)
			ck_sbuf_putc(&in, ']');
		ck_sbuf_puts(&in, kept ? "}}}}]}" : "}]}");
		rec_t r = {0};
		ck_assert_int_eq(run(&ck_type_deployment_with_template, CK_DEC_LIST, in.data,
		                     in.len, NULL, 0, 0, &r),
		                 0);
		ck_assert_uint_eq(r.nobj, 1);
		const char *c = ck_deployment_template_containers_json(r.objs[0]);
		if (kept)
			ck_assert_uint_eq(strlen(c), 2 * (CK_DEC_MAX_DEPTH - above));
		else
			ck_assert_ptr_null(c);
		rec_free(&r);
		check_all_splits(&ck_type_deployment_with_template, CK_DEC_LIST, in.data, in.len,
		                 NULL);
	}
	ck_sbuf_free(&in);
}
END_TEST

/*
 * Outside items, a value the decoder skips is bounded like an object: a long
 * unknown string or array in a List's own fields or its metadata is refused at
 * the unit's start plus the limit, however the input is cut.
 */
START_TEST(test_max_bytes_outside_items)
{
	static const struct {
		ck_dec_mode_t mode;
		const char *prefix; /* then 3000 bytes of fill, then suffix */
		const char *fill;
		const char *suffix;
		const char *what;
		size_t start; /* where the bounded unit starts */
	} cases[] = {
	    {CK_DEC_LIST, "{\"kind\":\"List\",\"x\":\"", "a", "\"}", "value outside any object",
	     18 /* after the "x" key */},
	    {CK_DEC_LIST, "{\"items\":[],\"x\":[", "1,", "1]}", "skipped value", 16},
	    {CK_DEC_LIST, "{\"x\":{\"y\":[\"", "a", "\"]}}", "skipped value", 5},
	    {CK_DEC_LIST, "{\"metadata\":{\"x\":[", "1,", "1]}}", "list metadata", 12},
	    {CK_DEC_WATCH, "{\"type\":\"ADDED\",\"x\":\"", "a", "\"}", "watch event", 0},
	    {CK_DEC_WATCH, "{\"type\":\"ADDED\",\"object\":{}}\n{\"x\":[", "1,", "1]}",
	     "watch event", 29},
	};
	const size_t max = 1000;
	for (size_t i = 0; i < CK_ARRAY_LEN(cases); i++) {
		ck_sbuf_t in = CK_SBUF_INIT;
		ck_sbuf_puts(&in, cases[i].prefix);
		while (in.len < 3000)
			ck_sbuf_puts(&in, cases[i].fill);
		ck_sbuf_puts(&in, cases[i].suffix);
		char want[128];
		snprintf(want, sizeof(want), "%s larger than the limit of %zu bytes at byte %zu\n",
		         cases[i].what, max, cases[i].start + max);
		check_error_splits(&ck_type_deployment, cases[i].mode, in.data, in.len, max, want);
		ck_sbuf_free(&in);
	}
	/* Within the limit, the same shapes decode. */
	const char *ok = "{\"kind\":\"List\",\"x\":[1,[2],{\"a\":\"b\"}],\"metadata\":"
	                 "{\"resourceVersion\":\"7\",\"y\":[{}]},\"items\":[{}],\"z\":\"s\"}";
	rec_t r = {0};
	ck_assert_int_eq(run(&ck_type_deployment, CK_DEC_LIST, ok, strlen(ok), NULL, 0, 64, &r), 0);
	ck_assert_uint_eq(r.nobj, 1);
	ck_assert_uint_eq(r.nmeta, 1);
	rec_free(&r);
}
END_TEST

/* Kept JSON is re-serialised compactly with correct escaping; scalars keep their types. */
START_TEST(test_capture_and_scalars)
{
	static const char *const fields[] = {"spec.a", "spec.b", "spec.c", "spec.d",
	                                     "spec.e", "spec.f", "spec.g", "metadata.finalizers",
	                                     "x"};
	static const ck_type_t t = {"example.com",        "v1", "Thing", "things", false, fields,
	                            CK_ARRAY_LEN(fields), true};
	const char *in = "{ \"metadata\" : { \"name\" : \"n\", \"namespace\": \"ignored\", "
	                 "\"finalizers\": [\"a/b\"], \"annotations\": {\"b\":\"2\", \"a\":\"1\", "
	                 "\"b\":\"3\"}, \"managedFields\": [{\"manager\": \"m\"}] },\n"
	                 " \"spec\": { \"a\": [1, 2.5e3, -7, true, null, {\"k\\u0000\": "
	                 "\"q\\\"\\\\\\n\\u0001\\u00e9\"}, [], {}],\n"
	                 " \"b\": 9223372036854775807, \"c\": 9223372036854775808, \"d\": -1.5,"
	                 " \"e\": \"s\", \"f\": false, \"g\": null, \"zz\": {\"a\": [1]} },"
	                 " \"x\": {\"y\": {}} }";
	ck_obj_t *o = ck_dec_object(&t, in, strlen(in), NULL);
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(ck_obj_field(o, 0)->type, CK_VAL_JSON);
	ck_assert_str_eq(ck_obj_field(o, 0)->u.s, "[1,2.5e3,-7,true,null,{\"k\\u0000\":"
	                                          "\"q\\\"\\\\\\n\\u0001\xc3\xa9\"},[],{}]");
	ck_assert_int_eq(ck_obj_field(o, 1)->type, CK_VAL_INT);
	ck_assert(ck_obj_field(o, 1)->u.i == INT64_MAX);
	ck_assert_int_eq(ck_obj_field(o, 2)->type, CK_VAL_DOUBLE);
	ck_assert_int_eq(ck_obj_field(o, 3)->type, CK_VAL_DOUBLE);
	ck_assert(ck_obj_field(o, 3)->u.d == -1.5);
	ck_assert_int_eq(ck_obj_field(o, 4)->type, CK_VAL_STRING);
	ck_assert_str_eq(ck_obj_field(o, 4)->u.s, "s");
	ck_assert_int_eq(ck_obj_field(o, 5)->type, CK_VAL_BOOL);
	ck_assert(!ck_obj_field(o, 5)->u.b);
	ck_assert_int_eq(ck_obj_field(o, 6)->type, CK_VAL_NULL);
	ck_assert_str_eq(ck_obj_field(o, 7)->u.s, "[\"a/b\"]");
	/* Listed as a field, finalizers are also kept in the object itself. */
	ck_assert_uint_eq(o->nfinalizers, 1);
	ck_assert_str_eq(o->finalizers[0], "a/b");
	ck_assert_str_eq(ck_obj_field(o, 8)->u.s, "{\"y\":{}}");
	ck_assert_int_eq(ck_obj_field(o, 99)->type, CK_VAL_ABSENT);
	/* keep_annotations: sorted, the last of a repeated key wins. */
	ck_assert_uint_eq(o->nannotations, 2);
	ck_assert_str_eq(o->annotations[0].key, "a");
	ck_assert_str_eq(ck_obj_annotation(o, "b"), "3");
	ck_assert_str_eq(o->ns, "ignored");
	char key[8];
	/* Cluster-scoped: the key is the name alone; a short buffer still says the size. */
	ck_assert_uint_eq(ck_obj_key(o, key, 1), 1);
	char *k = ck_obj_key_dup(o);
	ck_assert_str_eq(k, "n");
	free(k);
	ck_obj_unref(o);
	check_all_splits(&t, CK_DEC_OBJECT, in, strlen(in), NULL);
}
END_TEST

/* metadata.finalizers and deletionTimestamp are always kept, whatever the
 * descriptor lists; what is not a string among the finalizers is skipped. */
START_TEST(test_finalizers_kept)
{
	const char *in = "{\"metadata\":{\"name\":\"n\",\"namespace\":\"ns\","
	                 "\"deletionTimestamp\":\"2024-01-02T00:00:00Z\","
	                 "\"finalizers\":[\"example.com/x\",{\"a\":[1]},[\"no\"],7,null,"
	                 "\"kubernetes\\u0000\"],\"labels\":{\"a\":\"b\"}},"
	                 "\"data\":{\"k\":\"v\"}}";
	ck_obj_t *o = ck_dec_object(&ck_type_deployment, in, strlen(in), NULL);
	ck_assert_ptr_nonnull(o);
	ck_assert_uint_eq(o->nfinalizers, 2);
	ck_assert_str_eq(o->finalizers[0], "example.com/x");
	ck_assert_str_eq(o->finalizers[1], "kubernetes"); /* as far as C can read it */
	ck_assert_str_eq(o->deletion_timestamp, "2024-01-02T00:00:00Z");
	ck_assert_str_eq(ck_obj_label(o, "a"), "b");
	ck_assert(ck_obj_has_finalizer(o, "example.com/x"));
	ck_obj_unref(o);
	check_all_splits(&ck_type_deployment, CK_DEC_OBJECT, in, strlen(in), NULL);

	/* null, an object or a string where the list belongs: no finalizers. */
	const char *odd[] = {"{\"metadata\":{\"name\":\"n\",\"finalizers\":null}}",
	                     "{\"metadata\":{\"name\":\"n\",\"finalizers\":{\"x\":\"y\"}}}",
	                     "{\"metadata\":{\"name\":\"n\",\"finalizers\":\"x\"}}",
	                     "{\"metadata\":{\"name\":\"n\",\"finalizers\":[]}}"};
	for (size_t i = 0; i < CK_ARRAY_LEN(odd); i++) {
		char *err = NULL;
		o = ck_dec_object(&ck_type_deployment, odd[i], strlen(odd[i]), &err);
		ck_assert_msg(o != NULL, "%s: %s", odd[i], err);
		ck_assert_uint_eq(o->nfinalizers, 0);
		ck_assert_ptr_null(o->finalizers);
		ck_assert_str_eq(o->name, "n");
		ck_obj_unref(o);
	}
}
END_TEST

START_TEST(test_event_and_lease)
{
	size_t len;
	char *buf = fixture("event.json", &len);
	char *err = NULL;
	ck_obj_t *e = ck_dec_object(&ck_type_event, buf, len, &err);
	ck_assert_msg(e != NULL, "%s", err);
	int32_t v;
	ck_assert(ck_event_count(e, &v) && v == 3);
	ck_assert_str_eq(ck_event_reason(e), "Synced");
	ck_assert_str_eq(ck_event_message(e), "Foo synced successfully");
	ck_assert_str_eq(ck_event_type(e), "Normal");
	ck_assert_str_eq(ck_event_first_timestamp(e), "2024-05-02T10:11:13Z");
	ck_assert_str_eq(ck_event_last_timestamp(e), "2024-05-02T10:15:13Z");
	ck_assert_str_eq(ck_event_source_json(e), "{\"component\":\"sample-controller\"}");
	ck_assert_ptr_nonnull(strstr(ck_event_involved_object_json(e), "\"kind\":\"Foo\""));
	/* Accessors of another kind refuse. */
	ck_assert(!ck_deployment_spec_replicas(e, &v));
	ck_assert_ptr_null(ck_lease_holder_identity(e));
	ck_obj_unref(e);
	free(buf);

	buf = fixture("lease.json", &len);
	ck_obj_t *l = ck_dec_object(&ck_type_lease, buf, len, &err);
	ck_assert_msg(l != NULL, "%s", err);
	ck_assert_str_eq(l->ns, "kube-system");
	ck_assert_str_eq(ck_lease_holder_identity(l),
	                 "node-1_5f2c9e7a-3b1d-4e6f-a8c0-d2e4f6a8b0c1");
	ck_assert(ck_lease_duration_seconds(l, &v) && v == 15);
	ck_assert(ck_lease_transitions(l, &v) && v == 2);
	ck_assert_str_eq(ck_lease_renew_time(l), "2024-05-02T10:11:12.345678Z");
	int64_t ns;
	ck_assert(ck_lease_renew_time_ns(l, &ns));
	ck_assert(ns % CK_NS_PER_SEC == 345678000);
	ck_assert(ck_lease_acquire_time_ns(l, &ns));
	ck_assert(ns % CK_NS_PER_SEC == 0);
	ck_obj_unref(l);
	free(buf);
	ck_assert_ptr_null(err);
}
END_TEST

/* ---- Recorded from a real API server (tests/fixtures/json/capture.sh) ---- */

START_TEST(test_real_object)
{
	size_t len;
	char *buf = fixture("real_deployment.json", &len);
	char *err = NULL;
	ck_obj_t *o = ck_dec_object(&ck_type_deployment, buf, len, &err);
	ck_assert_msg(o != NULL, "%s", err);
	ck_assert_str_eq(o->name, "web");
	ck_assert_str_eq(o->ns, "dec-fixtures");
	ck_assert_uint_eq(strlen(o->uid), 36);
	ck_assert_str_ne(o->rv, "");
	ck_assert_int_eq(o->generation, 2); /* scaled once */
	ck_assert_str_eq(ck_obj_label(o, "controller"), "web");
	const ck_obj_owner_t *c = ck_obj_controller_ref(o);
	ck_assert(c != NULL && strcmp(c->kind, "ConfigMap") == 0 && strcmp(c->name, "owner") == 0);
	int32_t v;
	int64_t g;
	ck_assert(ck_deployment_spec_replicas(o, &v) && v == 3);
	ck_assert(ck_deployment_status_ready_replicas(o, &v) && v == 3);
	ck_assert(ck_deployment_status_observed_generation(o, &g) && g == 2);
	ck_assert_ptr_null(ck_deployment_template_containers_json(o));
	ck_assert_uint_lt(ck_obj_size(o), 1024);
	ck_obj_unref(o);
	check_all_splits(&ck_type_deployment, CK_DEC_OBJECT, buf, len, NULL);

	/* With annotations kept, the server's escapes (\u003c, \t) come out decoded. */
	static const ck_type_t with_annots = {"apps", "v1", "Deployment", "deployments", true,
	                                      NULL,   0,    true};
	o = ck_dec_object(&with_annots, buf, len, &err);
	ck_assert_ptr_nonnull(o);
	ck_assert_str_eq(ck_obj_annotation(o, "note"), "caf\xc3\xa9 \"quoted\" <tag> & tab\t");
	ck_assert_ptr_nonnull(
	    ck_obj_annotation(o, "kubectl.kubernetes.io/last-applied-configuration"));
	ck_obj_unref(o);
	free(buf);
}
END_TEST

START_TEST(test_real_lists)
{
	size_t len;
	char *buf = fixture("real_deployment_list_page.json", &len);
	rec_t r = {0};
	ck_assert_int_eq(run(&ck_type_deployment, CK_DEC_LIST, buf, len, NULL, 0, 0, &r), 0);
	ck_assert_uint_eq(r.nmeta, 1);
	ck_assert_uint_eq(r.nobj, 1);
	ck_assert_ptr_nonnull(strstr(ck_sbuf_cstr(&r.out), " continue=eyJ"));
	ck_assert_ptr_nonnull(strstr(ck_sbuf_cstr(&r.out), " remaining=1\n"));
	ck_assert_str_eq(r.objs[0]->name, "cache");
	rec_free(&r);
	check_all_splits(&ck_type_deployment, CK_DEC_LIST, buf, len, NULL);
	free(buf);

	buf = fixture("real_deployment_list.json", &len);
	ck_assert_int_eq(run(&ck_type_deployment, CK_DEC_LIST, buf, len, NULL, 0, 0, &r), 0);
	ck_assert_uint_eq(r.nobj, 2);
	ck_assert_ptr_nonnull(strstr(ck_sbuf_cstr(&r.out), " continue= remaining=-1\n"));
	ck_assert_str_eq(r.objs[1]->name, "web");
	rec_free(&r);
	check_all_splits(&ck_type_deployment, CK_DEC_LIST, buf, len, NULL);
	free(buf);
}
END_TEST

START_TEST(test_real_watch)
{
	size_t len;
	char *buf = fixture("real_deployment_watch.json", &len);
	rec_t r = {0};
	ck_assert_int_eq(run(&ck_type_deployment, CK_DEC_WATCH, buf, len, NULL, 0, 0, &r), 0);
	ck_assert_uint_eq(r.nevents, 4);
	ck_assert_uint_eq(r.nkept, 4);
	const char *out = ck_sbuf_cstr(&r.out);
	const char *b = strstr(out, "event BOOKMARK"), *a = strstr(out, "event ADDED"),
	           *m = strstr(out, "event MODIFIED"), *dl = strstr(out, "event DELETED");
	ck_assert(b && a && m && dl && b < a && a < m && m < dl);
	ck_assert_str_eq(ck_obj_annotation(r.objs[0], "k8s.io/initial-events-end"), "true");
	ck_assert_str_ne(r.objs[0]->rv, "");
	ck_assert_str_eq(r.objs[1]->name, "web");
	ck_assert_uint_eq(r.objs[1]->nannotations, 0);
	int32_t v;
	ck_assert(ck_deployment_status_ready_replicas(r.objs[2], &v) && v == 3);
	ck_assert_str_eq(r.objs[3]->name, "api");
	rec_free(&r);
	check_all_splits(&ck_type_deployment, CK_DEC_WATCH, buf, len, NULL);
	free(buf);

	buf = fixture("real_watch_410.json", &len);
	ck_assert_int_eq(run(&ck_type_deployment, CK_DEC_WATCH, buf, len, NULL, 0, 0, &r), 0);
	ck_assert_uint_eq(r.nevents, 1);
	ck_assert_ptr_nonnull(strstr(ck_sbuf_cstr(&r.out),
	                             "event ERROR\n status code=410 "
	                             "status=Failure reason=Expired "
	                             "message=too old resource version: 1 ("));
	rec_free(&r);
	check_all_splits(&ck_type_deployment, CK_DEC_WATCH, buf, len, NULL);
	free(buf);
}
END_TEST

/* The scheduler's events (events.k8s.io style): no count, null timestamps. */
START_TEST(test_real_event_and_lease)
{
	size_t len;
	char *buf = fixture("real_event.json", &len);
	ck_obj_t *e = ck_dec_object(&ck_type_event, buf, len, NULL);
	ck_assert_ptr_nonnull(e);
	int32_t v;
	ck_assert(!ck_event_count(e, &v));
	ck_assert_int_eq(ck_obj_field(e, CK_EVENT_FIRST_TIMESTAMP)->type, CK_VAL_NULL);
	ck_assert_ptr_null(ck_event_first_timestamp(e));
	ck_assert_str_eq(ck_event_reason(e), "Scheduled");
	ck_assert_str_eq(ck_event_type(e), "Normal");
	ck_assert_str_eq(ck_event_source_json(e), "{}");
	ck_assert_ptr_nonnull(strstr(ck_event_involved_object_json(e), "\"kind\":\"Pod\""));
	ck_obj_unref(e);
	check_all_splits(&ck_type_event, CK_DEC_OBJECT, buf, len, NULL);
	free(buf);

	buf = fixture("real_lease.json", &len);
	ck_obj_t *l = ck_dec_object(&ck_type_lease, buf, len, NULL);
	ck_assert_ptr_nonnull(l);
	ck_assert_str_eq(ck_lease_holder_identity(l),
	                 "node-1_5f2c9e7a-3b1d-4e6f-a8c0-d2e4f6a8b0c1");
	ck_assert(ck_lease_duration_seconds(l, &v) && v == 15);
	ck_assert(ck_lease_transitions(l, &v) && v == 2);
	ck_assert_str_eq(ck_lease_acquire_time(l), "2024-05-02T10:00:00.000000Z");
	ck_obj_unref(l);
	free(buf);
}
END_TEST

Suite *suite_decode(void)
{
	Suite *s = suite_create("decode");
	TCase *tc = tcase_create("decode");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_single_object);
	tcase_add_test(tc, test_list);
	tcase_add_test(tc, test_watch);
	tcase_add_test(tc, test_watch_type_after_object);
	tcase_add_test(tc, test_watch_errors);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_max_object_bytes);
	tcase_add_test(tc, test_max_depth);
	tcase_add_test(tc, test_max_bytes_outside_items);
	tcase_add_test(tc, test_capture_and_scalars);
	tcase_add_test(tc, test_finalizers_kept);
	tcase_add_test(tc, test_event_and_lease);
	tcase_add_test(tc, test_real_object);
	tcase_add_test(tc, test_real_lists);
	tcase_add_test(tc, test_real_watch);
	tcase_add_test(tc, test_real_event_and_lease);
	suite_add_tcase(s, tc);
	return s;
}
