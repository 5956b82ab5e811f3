/*
 * Unit tests of ckube-gen's run-time half (pkg/gen/gen.c, gen_validate.c) through
 * the code it generates for tests/unit/crd/widget.yaml, a CRD that uses every
 * schema feature the generator maps (the Makefile generates it into
 * build/gen/tests/widget/v1/widget.{h,c}): accessors, reading kept fields into
 * structs, the JSON and patch encoders, and validation with its exact messages.
 */
#include "v1/widget.h"
#include <ckube/decode.h>
#include <ckube/json.h>

#include <check.h>
#include <locale.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "é": two bytes, one character. */
#define E_ACUTE "\xc3\xa9"
/* An emoji: four bytes, one character. */
#define GRIN "\xf0\x9f\x98\x80"

#define HEAD                                                                                       \
	"\"apiVersion\":\"example.ckube.io/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w\"," \
	"\"namespace\":\"ns\"}"

/* Every property of the schema, in schema order, as the API server would send it. */
#define DATA "{\"a\":\"1\",\"b\":\"two\"}"
#define SPEC                                                                                       \
	"{\"name\":\"web\",\"timeout\":\"30s\",\"description\":\"h" E_ACUTE                        \
	"llo\",\"replicas\":3,"                                                                    \
	"\"weight\":50,\"priority\":-2,\"retries\":0,\"level\":2,\"ratio\":0.25,\"paused\":false," \
	"\"mode\":\"Slow\",\"template\":{\"image\":\"nginx:1.25\",\"pullPolicy\":"                 \
	"\"IfNotPresent\"},"                                                                       \
	"\"tags\":[\"a\",\"b\"],\"ports\":[80,443],\"items\":[{\"name\":\"x\",\"count\":1,"        \
	"\"resources\":{\"cpu\":2}},{\"name\":\"y\"}],\"labels\":{\"app\":\"web\",\"t\":\"\"},"    \
	"\"selectors\":{\"s1\":{\"match\":\"a=b\",\"weight\":3},\"s2\":{\"match\":\"c\"}},"        \
	"\"maxUnavailable\":\"50%\",\"config\":{\"k\":[1,{\"z\":null}],\"s\":\"x\\\"y\"},"         \
	"\"matrix\":[[1,2],[]],\"URLPath\":\"/x/y\"}"
#define STATUS                                                                                     \
	"{\"observedGeneration\":7,\"podIP\":\"10.0.0.1\",\"conditions\":[{\"type\":\"Ready\","    \
	"\"status\":\"True\",\"reason\":\"Ok\",\"message\":\"all good\","                          \
	"\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}"
#define FULL "{" HEAD ",\"data\":" DATA ",\"spec\":" SPEC ",\"status\":" STATUS "}"

static ck_obj_t *decode(const char *json)
{
	char *err = NULL;
	ck_obj_t *o = ck_dec_object(&widget_type, json, strlen(json), &err);
	ck_assert_msg(o != NULL, "decode %s: %s", json, err ? err : "?");
	return o;
}

/* A Widget with these members (JSON text without braces) besides its head. */
static ck_obj_t *widget_with(const char *members)
{
	char *json = ck_xasprintf("{" HEAD "%s%s}", members[0] ? "," : "", members);
	ck_obj_t *o = decode(json);
	free(json);
	return o;
}

/* ---------------------------------------------------------------- accessors */

START_TEST(test_descriptor)
{
	ck_assert_str_eq(widget_type.group, "example.ckube.io");
	ck_assert_str_eq(widget_type.version, "v1");
	ck_assert_str_eq(widget_type.kind, "Widget");
	ck_assert_str_eq(widget_type.resource, "widgets");
	ck_assert(widget_type.namespaced);
	ck_assert_str_eq(WIDGET_API_VERSION, "example.ckube.io/v1");
	/* Leaves only: apiVersion, kind and metadata dropped, spec.template expanded. */
	static const char *const want[] = {
	    "data",
	    "spec.name",
	    "spec.timeout",
	    "spec.description",
	    "spec.replicas",
	    "spec.weight",
	    "spec.priority",
	    "spec.retries",
	    "spec.level",
	    "spec.ratio",
	    "spec.paused",
	    "spec.mode",
	    "spec.template.image",
	    "spec.template.pullPolicy",
	    "spec.tags",
	    "spec.ports",
	    "spec.items",
	    "spec.labels",
	    "spec.selectors",
	    "spec.maxUnavailable",
	    "spec.config",
	    "spec.matrix",
	    "spec.URLPath",
	    "status.observedGeneration",
	    "status.podIP",
	    "status.conditions",
	};
	ck_assert_uint_eq(widget_type.nfields, sizeof(want) / sizeof(want[0]));
	ck_assert_uint_eq(widget_type.nfields, WIDGET_NFIELDS);
	for (size_t i = 0; i < widget_type.nfields; i++)
		ck_assert_str_eq(widget_type.fields[i], want[i]);
	ck_assert_int_eq(ck_type_field_index(&widget_type, "spec.template.image"),
	                 WIDGET_SPEC_TEMPLATE_IMAGE);
	ck_assert_int_eq(ck_type_field_index(&widget_type, "spec.URLPath"), WIDGET_SPEC_URL_PATH);
	ck_assert_int_eq(ck_type_field_index(&widget_type, "status.podIP"), WIDGET_STATUS_POD_IP);
	ck_assert_int_eq(ck_type_field_index(&widget_type, "spec.template"), -1);
	ck_assert_int_eq(ck_type_field_index(&widget_type, "metadata"), -1);
}
END_TEST

START_TEST(test_accessors_present)
{
	ck_obj_t *o = widget_with(
	    "\"data\":{\"k\":\"v\"},\"spec\":{\"name\":\"web\",\"replicas\":0,\"weight\":7,"
	    "\"ratio\":1,\"paused\":false,\"mode\":\"Fast\",\"template\":{\"pullPolicy\":\"Never\"}"
	    ","
	    "\"tags\":[\"a\"],\"labels\":{\"x\":\"y\"},\"maxUnavailable\":\"50%\","
	    "\"config\":{\"a\":[1,null]},\"matrix\":[[1],[]],\"URLPath\":\"/u\"},"
	    "\"status\":{\"observedGeneration\":4,\"podIP\":\"10.1.2.3\",\"conditions\":[]}");
	int64_t i = 99;
	double d = 99;
	bool b = true;
	ck_assert_str_eq(widget_data_json(o), "{\"k\":\"v\"}");
	ck_assert_str_eq(widget_spec_name(o), "web");
	/* Present and zero: true, where absent is false. */
	ck_assert(widget_spec_replicas(o, &i));
	ck_assert_int_eq(i, 0);
	ck_assert(widget_spec_weight(o, &i));
	ck_assert_int_eq(i, 7);
	/* A number without a fraction is a number too. */
	ck_assert(widget_spec_ratio(o, &d));
	ck_assert_double_eq(d, 1.0);
	ck_assert(widget_spec_paused(o, &b));
	ck_assert(!b);
	ck_assert_str_eq(widget_spec_mode(o), "Fast");
	ck_assert_str_eq(widget_spec_template_pull_policy(o), "Never");
	ck_assert_ptr_null(widget_spec_template_image(o));
	ck_assert_str_eq(widget_spec_tags_json(o), "[\"a\"]");
	ck_assert_str_eq(widget_spec_labels_json(o), "{\"x\":\"y\"}");
	const ck_val_t *v = widget_spec_max_unavailable(o);
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(v->type, CK_VAL_STRING);
	ck_assert_str_eq(v->u.s, "50%");
	v = widget_spec_config(o);
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(v->type, CK_VAL_JSON);
	ck_assert_str_eq(v->u.s, "{\"a\":[1,null]}");
	v = widget_spec_matrix(o);
	ck_assert_ptr_nonnull(v);
	ck_assert_str_eq(v->u.s, "[[1],[]]");
	ck_assert_str_eq(widget_spec_url_path(o), "/u");
	ck_assert(widget_status_observed_generation(o, &i));
	ck_assert_int_eq(i, 4);
	ck_assert_str_eq(widget_status_pod_ip(o), "10.1.2.3");
	ck_assert_str_eq(widget_status_conditions_json(o), "[]");

	/* Absent: false / NULL, and *out zeroed (not left as it was). */
	i = 99;
	ck_assert(!widget_spec_priority(o, &i));
	ck_assert_int_eq(i, 0);
	i = 99;
	ck_assert(!widget_spec_retries(o, &i));
	ck_assert_int_eq(i, 0);
	ck_assert_ptr_null(widget_spec_description(o));
	ck_assert_ptr_null(widget_spec_timeout(o));
	ck_assert_ptr_null(widget_spec_ports_json(o));
	ck_assert_ptr_null(widget_spec_items_json(o));
	ck_assert_ptr_null(widget_spec_selectors_json(o));
	ck_obj_unref(o);

	/* Integer maxUnavailable: the kept value is an integer. */
	o = widget_with("\"spec\":{\"maxUnavailable\":3}");
	v = widget_spec_max_unavailable(o);
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(v->type, CK_VAL_INT);
	ck_assert_int_eq(v->u.i, 3);
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_accessors_absent_null_wrong_type)
{
	int64_t i;
	double d;
	bool b;
	/* No spec at all. */
	ck_obj_t *o = widget_with("");
	i = 5;
	ck_assert(!widget_spec_replicas(o, &i));
	ck_assert_int_eq(i, 0);
	ck_assert_ptr_null(widget_spec_name(o));
	ck_assert_ptr_null(widget_spec_max_unavailable(o));
	ck_assert_ptr_null(widget_data_json(o));
	ck_obj_unref(o);

	/* Explicit nulls read as absent. */
	o = widget_with("\"data\":null,\"spec\":{\"name\":null,\"replicas\":null,\"ratio\":null,"
	                "\"paused\":null,\"tags\":null,\"maxUnavailable\":null,\"config\":null}");
	i = 5;
	ck_assert(!widget_spec_replicas(o, &i));
	ck_assert_int_eq(i, 0);
	d = 5;
	ck_assert(!widget_spec_ratio(o, &d));
	ck_assert_double_eq(d, 0);
	b = true;
	ck_assert(!widget_spec_paused(o, &b));
	ck_assert(!b);
	ck_assert_ptr_null(widget_spec_name(o));
	ck_assert_ptr_null(widget_spec_tags_json(o));
	ck_assert_ptr_null(widget_spec_max_unavailable(o));
	ck_assert_ptr_null(widget_spec_config(o));
	ck_assert_ptr_null(widget_data_json(o));
	ck_obj_unref(o);

	/* Another JSON type than the schema's: false / NULL, *out zeroed. */
	o = widget_with("\"spec\":{\"name\":7,\"replicas\":\"3\",\"weight\":2.5,\"ratio\":\"x\","
	                "\"paused\":\"true\",\"mode\":[\"Fast\"],\"tags\":\"a\",\"ports\":80}");
	ck_assert_ptr_null(widget_spec_name(o));
	i = 5;
	ck_assert(!widget_spec_replicas(o, &i));
	ck_assert_int_eq(i, 0);
	i = 5;
	ck_assert(!widget_spec_weight(o, &i));
	ck_assert_int_eq(i, 0);
	d = 5;
	ck_assert(!widget_spec_ratio(o, &d));
	ck_assert_double_eq(d, 0);
	b = true;
	ck_assert(!widget_spec_paused(o, &b));
	ck_assert(!b);
	ck_assert_ptr_null(widget_spec_mode(o));
	ck_assert_ptr_null(widget_spec_tags_json(o));
	ck_assert_ptr_null(widget_spec_ports_json(o));
	ck_obj_unref(o);

	/* An object of another kind. */
	const char *cm =
	    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\","
	    "\"namespace\":\"ns\"},\"data\":{\"k\":\"v\"}}";
	char *err = NULL;
	o = ck_dec_object(&ck_type_configmap, cm, strlen(cm), &err);
	ck_assert_ptr_nonnull(o);
	ck_assert_ptr_null(widget_data_json(o));
	ck_assert_ptr_null(widget_spec_name(o));
	i = 5;
	ck_assert(!widget_spec_replicas(o, &i));
	ck_assert_int_eq(i, 0);
	ck_obj_unref(o);
}
END_TEST

/* ---------------------------------------------------------------- reading */

START_TEST(test_get_full)
{
	ck_obj_t *o = decode(FULL);
	widget_t w;
	memset(&w, 0xA5, sizeof(w)); /* get zeroes it first */
	char *err = NULL;
	ck_assert_int_eq(widget_get(o, &w, &err), 0);
	ck_assert_ptr_null(err);

	ck_assert(w.has_data);
	ck_assert_uint_eq(w.data_len, 2);
	ck_assert_str_eq(w.data_keys[0], "a");
	ck_assert_str_eq(w.data[0], "1");
	ck_assert_str_eq(w.data_keys[1], "b");
	ck_assert_str_eq(w.data[1], "two");

	const widget_spec_t *s = &w.spec;
	ck_assert(w.has_spec);
	ck_assert_str_eq(s->name, "web");
	ck_assert_str_eq(s->timeout, "30s");
	ck_assert_str_eq(s->description, "h" E_ACUTE "llo");
	ck_assert(s->has_replicas && s->replicas == 3);
	ck_assert(s->has_weight && s->weight == 50);
	ck_assert(s->has_priority && s->priority == -2);
	ck_assert(s->has_retries && s->retries == 0);
	ck_assert(s->has_level && s->level == 2);
	ck_assert(s->has_ratio);
	ck_assert_double_eq(s->ratio, 0.25);
	ck_assert(s->has_paused && !s->paused);
	ck_assert_str_eq(s->mode, "Slow");
	ck_assert(s->has_template);
	ck_assert_str_eq(s->template.image, "nginx:1.25");
	ck_assert_str_eq(s->template.pull_policy, "IfNotPresent");
	ck_assert(s->has_tags);
	ck_assert_uint_eq(s->tags_len, 2);
	ck_assert_str_eq(s->tags[0], "a");
	ck_assert_str_eq(s->tags[1], "b");
	ck_assert(s->has_ports);
	ck_assert_uint_eq(s->ports_len, 2);
	ck_assert_int_eq(s->ports[0], 80);
	ck_assert_int_eq(s->ports[1], 443);
	ck_assert(s->has_items);
	ck_assert_uint_eq(s->items_len, 2);
	ck_assert_str_eq(s->items[0].name, "x");
	ck_assert(s->items[0].has_count && s->items[0].count == 1);
	ck_assert(s->items[0].has_resources);
	ck_assert(s->items[0].resources.has_cpu && s->items[0].resources.cpu == 2);
	ck_assert_str_eq(s->items[1].name, "y");
	ck_assert(!s->items[1].has_count && s->items[1].count == 0);
	ck_assert(!s->items[1].has_resources && !s->items[1].resources.has_cpu);
	ck_assert(s->has_labels);
	ck_assert_uint_eq(s->labels_len, 2);
	ck_assert_str_eq(s->labels_keys[0], "app");
	ck_assert_str_eq(s->labels[0], "web");
	ck_assert_str_eq(s->labels_keys[1], "t");
	ck_assert_str_eq(s->labels[1], "");
	ck_assert(s->has_selectors);
	ck_assert_uint_eq(s->selectors_len, 2);
	ck_assert_str_eq(s->selectors_keys[0], "s1");
	ck_assert_str_eq(s->selectors[0].match, "a=b");
	ck_assert(s->selectors[0].has_weight && s->selectors[0].weight == 3);
	ck_assert_str_eq(s->selectors_keys[1], "s2");
	ck_assert_str_eq(s->selectors[1].match, "c");
	ck_assert(!s->selectors[1].has_weight);
	/* Kept JSON: compact text, a string with its quotes. */
	ck_assert_str_eq(s->max_unavailable, "\"50%\"");
	ck_assert_str_eq(s->config, "{\"k\":[1,{\"z\":null}],\"s\":\"x\\\"y\"}");
	ck_assert_str_eq(s->matrix, "[[1,2],[]]");
	ck_assert_str_eq(s->url_path, "/x/y");

	ck_assert(w.has_status);
	ck_assert(w.status.has_observed_generation && w.status.observed_generation == 7);
	ck_assert_str_eq(w.status.pod_ip, "10.0.0.1");
	ck_assert(w.status.has_conditions);
	ck_assert_uint_eq(w.status.conditions_len, 1);
	const widget_status_conditions_item_t *c = &w.status.conditions[0];
	ck_assert_str_eq(c->type, "Ready");
	ck_assert_str_eq(c->status, "True");
	ck_assert_str_eq(c->reason, "Ok");
	ck_assert_str_eq(c->message, "all good");
	ck_assert_str_eq(c->last_transition_time, "2026-01-01T00:00:00Z");

	/* Written back: what was read, in schema order. */
	ck_sbuf_t b = CK_SBUF_INIT;
	widget_to_json(&w, &b);
	ck_assert_str_eq(ck_sbuf_cstr(&b),
	                 "{\"data\":" DATA ",\"spec\":" SPEC ",\"status\":" STATUS "}");
	ck_sbuf_reset(&b);
	widget_spec_to_json(&w.spec, &b);
	ck_assert_str_eq(ck_sbuf_cstr(&b), SPEC);
	ck_sbuf_reset(&b);
	widget_status_to_json(&w.status, &b);
	ck_assert_str_eq(ck_sbuf_cstr(&b), STATUS);
	ck_sbuf_free(&b);

	/* And as a whole body: the object as it came. */
	ck_patch_t *p = widget_patch_new("ns", "w");
	ck_assert_int_eq(widget_to_patch(&w, p), 0);
	size_t len = 0;
	char *body = ck_patch_build(p, &len, &err);
	ck_assert_msg(body != NULL, "%s", err ? err : "?");
	ck_assert_str_eq(body, FULL);
	ck_assert_uint_eq(len, strlen(FULL));
	free(body);
	ck_patch_free(p);

	/* Clear frees it all (LSan checks) and zeroes the struct. */
	widget_clear(&w);
	widget_t zero;
	memset(&zero, 0, sizeof(zero));
	ck_assert_mem_eq(&w, &zero, sizeof(w));
	widget_clear(&w); /* again: nothing left to free */
	widget_clear(NULL);
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_get_spec_and_status)
{
	ck_obj_t *o = decode(FULL);
	widget_spec_t s;
	widget_status_t st;
	char *err = NULL;
	ck_assert_int_eq(widget_spec_get(o, &s, &err), 0);
	ck_assert_int_eq(widget_status_get(o, &st, &err), 0);
	ck_assert_ptr_null(err);
	ck_sbuf_t b = CK_SBUF_INIT;
	widget_spec_to_json(&s, &b);
	ck_assert_str_eq(ck_sbuf_cstr(&b), SPEC);
	ck_sbuf_reset(&b);
	widget_status_to_json(&st, &b);
	ck_assert_str_eq(ck_sbuf_cstr(&b), STATUS);
	ck_sbuf_free(&b);

	/* Into a patch body of its own. */
	ck_patch_t *p = ck_patch_new();
	ck_assert_int_eq(widget_spec_to_patch(&s, p), 0);
	char *body = ck_patch_build(p, NULL, &err);
	ck_assert_str_eq(body, "{\"spec\":" SPEC "}");
	free(body);
	ck_patch_free(p);
	p = widget_patch_new("ns", "w");
	ck_assert_int_eq(widget_status_to_patch(&st, p), 0);
	body = ck_patch_build(p, NULL, &err);
	ck_assert_str_eq(body, "{" HEAD ",\"status\":" STATUS "}");
	free(body);
	ck_patch_free(p);

	widget_spec_clear(&s);
	widget_status_clear(&st);
	ck_assert_ptr_null(s.name);
	ck_assert_ptr_null(s.items);
	ck_assert_ptr_null(s.labels_keys);
	ck_assert_uint_eq(s.items_len, 0);
	ck_assert(!s.has_items);
	ck_assert_ptr_null(st.conditions);
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_get_has_flags)
{
	/* Nothing but metadata: every flag false, the struct all zero. */
	ck_obj_t *o = widget_with("");
	widget_t w;
	memset(&w, 0xA5, sizeof(w));
	char *err = NULL;
	ck_assert_int_eq(widget_get(o, &w, &err), 0);
	widget_t zero;
	memset(&zero, 0, sizeof(zero));
	ck_assert_mem_eq(&w, &zero, sizeof(w));
	ck_sbuf_t b = CK_SBUF_INIT;
	widget_to_json(&w, &b);
	ck_assert_str_eq(ck_sbuf_cstr(&b), "{}");
	ck_sbuf_reset(&b);
	widget_clear(&w);
	ck_obj_unref(o);

	/* Some members present, some null, some of another type, some empty. */
	o = widget_with(
	    "\"spec\":{\"template\":{\"pullPolicy\":\"Never\"},\"replicas\":null,"
	    "\"paused\":\"yes\",\"weight\":1.5,\"tags\":[],\"labels\":{},\"ports\":\"x\","
	    "\"items\":null,\"selectors\":[],\"maxUnavailable\":3,\"config\":null}");
	ck_assert_int_eq(widget_get(o, &w, &err), 0);
	const widget_spec_t *s = &w.spec;
	ck_assert(w.has_spec);
	ck_assert(!w.has_status);
	ck_assert(!w.has_data);
	/* A nested object is present when one of its fields is. */
	ck_assert(s->has_template);
	ck_assert_ptr_null(s->template.image);
	ck_assert_str_eq(s->template.pull_policy, "Never");
	ck_assert(!s->has_replicas);
	ck_assert(!s->has_paused);
	ck_assert(!s->has_weight && s->weight == 0);
	ck_assert(s->has_tags);
	ck_assert_uint_eq(s->tags_len, 0);
	ck_assert(s->has_labels);
	ck_assert_uint_eq(s->labels_len, 0);
	ck_assert(!s->has_ports);
	ck_assert_ptr_null(s->ports);
	ck_assert_uint_eq(s->ports_len, 0);
	ck_assert(!s->has_items);
	ck_assert_ptr_null(s->items);
	ck_assert(!s->has_selectors); /* an array where a map is expected */
	ck_assert_ptr_null(s->selectors);
	ck_assert_ptr_null(s->selectors_keys);
	ck_assert_str_eq(s->max_unavailable, "3");
	ck_assert_ptr_null(s->config);
	widget_to_json(&w, &b);
	ck_assert_str_eq(ck_sbuf_cstr(&b), "{\"spec\":{\"template\":{\"pullPolicy\":\"Never\"},"
	                                   "\"tags\":[],\"labels\":{},\"maxUnavailable\":3}}");
	ck_sbuf_reset(&b);
	widget_clear(&w);
	ck_obj_unref(o);

	/* Only status: spec absent. */
	o = widget_with("\"status\":{\"observedGeneration\":0}");
	ck_assert_int_eq(widget_get(o, &w, &err), 0);
	ck_assert(!w.has_spec);
	ck_assert(w.has_status);
	ck_assert(w.status.has_observed_generation);
	ck_assert_int_eq(w.status.observed_generation, 0);
	widget_to_json(&w, &b);
	ck_assert_str_eq(ck_sbuf_cstr(&b), "{\"status\":{\"observedGeneration\":0}}");
	ck_sbuf_free(&b);
	widget_clear(&w);
	ck_obj_unref(o);
	ck_assert_ptr_null(err);
}
END_TEST

START_TEST(test_get_elements_of_another_type)
{
	/* An element of another type stays zero; the list keeps its length and positions. */
	ck_obj_t *o = widget_with(
	    "\"spec\":{\"tags\":[\"a\",1,\"c\"],\"ports\":[80,\"x\",443,1.5],"
	    "\"items\":[5,{\"name\":\"b\",\"count\":\"2\",\"resources\":7}],"
	    "\"labels\":{\"k\":1,\"l\":\"v\"},\"selectors\":{\"a\":1,\"b\":{\"match\":\"m\"}}}");
	widget_spec_t s;
	char *err = NULL;
	ck_assert_int_eq(widget_spec_get(o, &s, &err), 0);
	ck_assert_uint_eq(s.tags_len, 3);
	ck_assert_str_eq(s.tags[0], "a");
	ck_assert_ptr_null(s.tags[1]);
	ck_assert_str_eq(s.tags[2], "c");
	ck_assert_uint_eq(s.ports_len, 4);
	ck_assert_int_eq(s.ports[0], 80);
	ck_assert_int_eq(s.ports[1], 0);
	ck_assert_int_eq(s.ports[2], 443);
	ck_assert_int_eq(s.ports[3], 0);
	ck_assert_uint_eq(s.items_len, 2);
	ck_assert_ptr_null(s.items[0].name);
	ck_assert(!s.items[0].has_count);
	ck_assert_str_eq(s.items[1].name, "b");
	ck_assert(!s.items[1].has_count);
	ck_assert(!s.items[1].has_resources);
	ck_assert_uint_eq(s.labels_len, 2);
	ck_assert_str_eq(s.labels_keys[0], "k");
	ck_assert_ptr_null(s.labels[0]);
	ck_assert_str_eq(s.labels_keys[1], "l");
	ck_assert_str_eq(s.labels[1], "v");
	ck_assert_uint_eq(s.selectors_len, 2);
	ck_assert_str_eq(s.selectors_keys[0], "a");
	ck_assert_ptr_null(s.selectors[0].match);
	ck_assert_str_eq(s.selectors_keys[1], "b");
	ck_assert_str_eq(s.selectors[1].match, "m");
	widget_spec_clear(&s);
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_get_int_or_string)
{
	struct {
		const char *json, *want; /* want NULL: left absent */
	} cases[] = {
	    {"3", "3"},
	    {"-1", "-1"},
	    {"\"50%\"", "\"50%\""},
	    {"\"\"", "\"\""},
	    {"null", NULL},
	    /* Another type than an integer or a string is left absent (gen.h), as a
	     * string where an integer is expected is. */
	    {"true", NULL},
	    {"2.5", NULL},
	    {"{\"a\":1}", NULL},
	    {"[1]", NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *m = ck_xasprintf("\"spec\":{\"maxUnavailable\":%s}", cases[i].json);
		ck_obj_t *o = widget_with(m);
		widget_spec_t s;
		char *err = NULL;
		ck_assert_int_eq(widget_spec_get(o, &s, &err), 0);
		ck_assert_msg(cases[i].want == NULL
		                  ? s.max_unavailable == NULL
		                  : s.max_unavailable != NULL &&
		                        strcmp(s.max_unavailable, cases[i].want) == 0,
		              "maxUnavailable %s: got %s", cases[i].json,
		              s.max_unavailable ? s.max_unavailable : "(absent)");
		widget_spec_clear(&s);
		ck_obj_unref(o);
		free(m);
	}
	/* Any JSON is kept as it is where the schema allows any (preserve-unknown-fields). */
	ck_obj_t *o = widget_with("\"spec\":{\"config\":{\"a\":{\"b\":[true,null,1.5e3]}}}");
	widget_spec_t s;
	ck_assert_int_eq(widget_spec_get(o, &s, NULL), 0);
	ck_assert_str_eq(s.config, "{\"a\":{\"b\":[true,null,1.5e3]}}");
	widget_spec_clear(&s);
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_get_bad_kept_json)
{
	/* A kept field whose JSON cannot be parsed (an object not from the decoder):
	 * -1 with a message, what was read is kept, and clear frees it all. */
	ck_obj_builder_t *bld = ck_obj_builder_new(&widget_type);
	ck_obj_builder_set_meta(bld, "name", "w", 1);
	ck_obj_builder_set_field(bld, WIDGET_SPEC_NAME, CK_VAL_STRING, false, 0, 0, "web", 3);
	ck_obj_builder_set_field(bld, WIDGET_SPEC_ITEMS, CK_VAL_JSON, false, 0, 0, "[{bad", 5);
	ck_obj_builder_set_field(bld, WIDGET_SPEC_TAGS, CK_VAL_JSON, false, 0, 0, "[\"t\"]", 5);
	ck_obj_t *o = ck_obj_builder_finish(bld);
	ck_obj_builder_free(bld);
	widget_spec_t s;
	char *err = NULL;
	ck_assert_int_eq(widget_spec_get(o, &s, &err), -1);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, "items: ") != NULL, "%s", err);
	ck_assert_str_eq(s.name, "web");
	ck_assert(!s.has_items);
	ck_assert_uint_eq(s.tags_len, 1);
	ck_assert_str_eq(s.tags[0], "t");
	widget_spec_clear(&s);
	free(err);
	err = NULL;
	/* Validation says the same, naming the field's path. */
	ck_assert_int_eq(widget_validate_spec(o, &err), -1);
	ck_assert_msg(strncmp(err, "spec.items: ", 12) == 0, "%s", err);
	free(err);
	ck_obj_unref(o);
}
END_TEST

/* ---------------------------------------------------------------- writing */

START_TEST(test_to_json_filled)
{
	char *tags[] = {"a", "b\"c"};
	int64_t ports[] = {80, -1};
	widget_spec_items_item_t items[2];
	memset(items, 0, sizeof(items));
	items[0].name = "x";
	items[0].count = 0;
	items[0].has_count = true;
	items[1].name = "y";
	items[1].resources.cpu = 2;
	items[1].resources.has_cpu = true;
	items[1].has_resources = true;
	char *lkeys[] = {"app", NULL, "tier"};
	char *lvals[] = {"web", "lost", "fe"};
	char *skeys[] = {"s"};
	widget_spec_selectors_value_t sels[1] = {{.match = "m", .weight = 1, .has_weight = true}};

	widget_spec_t s;
	memset(&s, 0, sizeof(s));
	s.name = "web";
	s.replicas = 3;
	s.has_replicas = true;
	s.weight = 9; /* without has_weight: absent, not written */
	s.ratio = 0.5;
	s.has_ratio = true;
	s.paused = false;
	s.has_paused = true;
	s.mode = "Fast";
	s.template.image = "nginx";
	s.has_template = true;
	s.tags = tags; /* without has_tags: items count anyway */
	s.tags_len = 2;
	s.ports = ports;
	s.ports_len = 2;
	s.has_ports = true;
	s.items = items;
	s.items_len = 2;
	s.has_items = true;
	s.labels_keys = lkeys; /* an entry without a key cannot be written */
	s.labels = lvals;
	s.labels_len = 3;
	s.has_labels = true;
	s.selectors_keys = skeys;
	s.selectors = sels;
	s.selectors_len = 1;
	s.max_unavailable = "\"25%\"";
	s.config = "{\"a\":1}";
	s.url_path = "/p";
	const char *want =
	    "{\"name\":\"web\",\"replicas\":3,\"ratio\":0.5,\"paused\":false,\"mode\":\"Fast\","
	    "\"template\":{\"image\":\"nginx\"},\"tags\":[\"a\",\"b\\\"c\"],\"ports\":[80,-1],"
	    "\"items\":[{\"name\":\"x\",\"count\":0},{\"name\":\"y\",\"resources\":{\"cpu\":2}}],"
	    "\"labels\":{\"app\":\"web\",\"tier\":\"fe\"},\"selectors\":{\"s\":{\"match\":\"m\","
	    "\"weight\":1}},\"maxUnavailable\":\"25%\",\"config\":{\"a\":1},\"URLPath\":\"/p\"}";
	ck_sbuf_t b = CK_SBUF_INIT;
	widget_spec_to_json(&s, &b);
	ck_assert_str_eq(ck_sbuf_cstr(&b), want);
	ck_sbuf_free(&b);

	/* Into a patch: under spec, after what the body already holds. */
	ck_patch_t *p = widget_patch_new("ns", "w");
	ck_assert_int_eq(widget_spec_to_patch(&s, p), 0);
	char *err = NULL;
	char *body = ck_patch_build(p, NULL, &err);
	ck_assert_msg(body != NULL, "%s", err ? err : "?");
	char *full = ck_xasprintf("{" HEAD ",\"spec\":%s}", want);
	ck_assert_str_eq(body, full);
	free(full);
	free(body);
	ck_patch_free(p);

	/* The whole kind: each present member at the top. */
	char *dkeys[] = {"k"};
	char *dvals[] = {"v"};
	widget_t w;
	memset(&w, 0, sizeof(w));
	w.data_keys = dkeys;
	w.data = dvals;
	w.data_len = 1;
	w.has_data = true;
	w.spec.name = "a";
	w.has_spec = true; /* status left absent: not written */
	b = (ck_sbuf_t)CK_SBUF_INIT;
	widget_to_json(&w, &b);
	ck_assert_str_eq(ck_sbuf_cstr(&b), "{\"data\":{\"k\":\"v\"},\"spec\":{\"name\":\"a\"}}");
	ck_sbuf_free(&b);
	p = ck_patch_new();
	ck_assert_int_eq(widget_to_patch(&w, p), 0);
	body = ck_patch_build(p, NULL, &err);
	ck_assert_str_eq(body, "{\"data\":{\"k\":\"v\"},\"spec\":{\"name\":\"a\"}}");
	free(body);
	ck_patch_free(p);

	/* A status of its own, with an empty list kept as []. */
	widget_status_t st;
	memset(&st, 0, sizeof(st));
	st.observed_generation = 2;
	st.has_observed_generation = true;
	st.has_conditions = true;
	p = ck_patch_new();
	ck_assert_int_eq(widget_status_to_patch(&st, p), 0);
	body = ck_patch_build(p, NULL, &err);
	ck_assert_str_eq(body, "{\"status\":{\"observedGeneration\":2,\"conditions\":[]}}");
	free(body);
	ck_patch_free(p);
	ck_assert_ptr_null(err);
}
END_TEST

START_TEST(test_to_patch_bad_kept_json)
{
	widget_spec_t s;
	memset(&s, 0, sizeof(s));
	s.name = "web";
	s.config = "{bad";
	ck_patch_t *p = widget_patch_new("ns", "w");
	ck_assert_int_eq(widget_spec_to_patch(&s, p), -1);
	ck_assert_ptr_nonnull(ck_patch_error(p));
	char *err = NULL;
	ck_assert_ptr_null(ck_patch_build(p, NULL, &err));
	ck_assert_ptr_nonnull(err);
	free(err);
	ck_patch_free(p);

	/* The whole kind: the same, and the error is sticky. */
	widget_t w;
	memset(&w, 0, sizeof(w));
	w.spec.max_unavailable = "3 4";
	w.has_spec = true;
	p = ck_patch_new();
	ck_assert_int_eq(widget_to_patch(&w, p), -1);
	ck_assert_ptr_nonnull(ck_patch_error(p));
	ck_assert_int_eq(ck_patch_set_string(p, CK_PATH("x"), "y"), -1);
	ck_patch_free(p);

	/* And checking the struct says so, naming where. */
	err = NULL;
	ck_assert_int_eq(widget_spec_check(&s, &err), -1);
	ck_assert_msg(err != NULL && strncmp(err, "spec: ", 6) == 0, "%s", err ? err : "-");
	free(err);
}
END_TEST

/* ---------------------------------------------------------------- validation */

typedef int (*validate_fn)(const ck_obj_t *, char **);

/* The message of fn on a Widget with these members, or NULL when valid. */
static char *validate_with(validate_fn fn, const char *members)
{
	ck_obj_t *o = widget_with(members);
	char *err = NULL;
	int rc = fn(o, &err);
	ck_assert_msg(rc == 0 || rc == -1, "rc %d", rc);
	ck_assert_msg((rc == 0) == (err == NULL), "%s: rc %d with message %s", members, rc,
	              err ? err : "(none)");
	ck_obj_unref(o);
	return err;
}

static void expect(validate_fn fn, const char *members, const char *want)
{
	char *got = validate_with(fn, members);
	ck_assert_msg(want == NULL ? got == NULL : got != NULL && strcmp(got, want) == 0,
	              "%s:\n want %s\n got  %s", members, want ? want : "(valid)",
	              got ? got : "(valid)");
	free(got);
}

/* widget_validate_spec of a Widget with this spec. */
static void expect_spec(const char *spec, const char *want)
{
	char *m = ck_xasprintf("\"spec\":%s", spec);
	expect(widget_validate_spec, m, want);
	free(m);
}

/* The required name, for specs that test something else. */
#define N "\"name\":\"a\","

/*
 * Kept JSON keeps the shape its schema states: an object without properties must
 * be an object, an array of arrays an array, a map a JSON object. Another shape is
 * refused by validation, not read into the struct, and not returned by accessors
 * (before, "config":"str" and "labels":["x"] read back and validated as given).
 */
START_TEST(test_kept_json_shape)
{
	expect_spec("{" N "\"config\":\"str\"}", "spec.config: must be an object");
	expect_spec("{" N "\"config\":[1]}", "spec.config: must be an object");
	expect_spec("{" N "\"matrix\":{\"a\":1}}", "spec.matrix: must be an array");
	expect_spec("{" N "\"matrix\":3}", "spec.matrix: must be an array");
	expect_spec("{" N "\"config\":{\"any\":[true]},\"matrix\":[[\"a\"]]}", NULL);

	ck_obj_t *o = widget_with("\"spec\":{\"name\":\"a\",\"config\":\"str\","
	                          "\"matrix\":{\"a\":1},\"labels\":[\"x\"]}");
	ck_assert_ptr_null(widget_spec_config(o));
	ck_assert_ptr_null(widget_spec_matrix(o));
	ck_assert_ptr_null(widget_spec_labels_json(o));
	widget_spec_t sp;
	ck_assert_int_eq(widget_spec_get(o, &sp, NULL), 0);
	ck_assert_ptr_null(sp.config);
	ck_assert_ptr_null(sp.matrix);
	ck_assert_str_eq(sp.name, "a");
	widget_spec_clear(&sp);
	ck_obj_unref(o);
}
END_TEST

START_TEST(test_validate_valid)
{
	expect_spec(SPEC, NULL);
	expect_spec("{\"name\":\"a\"}", NULL);
	expect(widget_validate, "\"data\":" DATA ",\"spec\":" SPEC, NULL);
	expect(widget_validate_status,
	       "\"status\":{\"observedGeneration\":7,\"conditions\":[{\"type\":\"Ready\","
	       "\"status\":\"Unknown\"}]}",
	       NULL);
}
END_TEST

START_TEST(test_validate_types)
{
	expect_spec("{\"name\":7}", "spec.name: must be a string");
	expect_spec("{\"name\":{\"a\":1}}", "spec.name: must be a string");
	expect_spec("{" N "\"replicas\":\"3\"}", "spec.replicas: must be an integer");
	expect_spec("{" N "\"replicas\":2.5}", "spec.replicas: must be an integer");
	expect_spec("{" N "\"replicas\":[1]}", "spec.replicas: must be an integer");
	expect_spec("{" N "\"ratio\":\"0.5\"}", "spec.ratio: must be a number");
	expect_spec("{" N "\"ratio\":true}", "spec.ratio: must be a number");
	expect_spec("{" N "\"paused\":\"true\"}", "spec.paused: must be a boolean");
	expect_spec("{" N "\"paused\":0}", "spec.paused: must be a boolean");
	expect_spec("{" N "\"tags\":\"a\"}", "spec.tags: must be an array");
	expect_spec("{" N "\"tags\":{\"a\":\"b\"}}", "spec.tags: must be an array");
	expect_spec("{" N "\"labels\":[\"a\"]}", "spec.labels: must be an object");
	expect_spec("{" N "\"labels\":\"a\"}", "spec.labels: must be an object");
	expect_spec("{" N "\"items\":[5]}", "spec.items[0]: must be an object");
	expect_spec("{" N "\"items\":[{\"name\":\"a\",\"resources\":[]}]}",
	            "spec.items[0].resources: must be an object");
}
END_TEST

START_TEST(test_validate_int_bounds)
{
	/* minimum and maximum, inclusive */
	expect_spec("{" N "\"replicas\":1}", NULL);
	expect_spec("{" N "\"replicas\":10}", NULL);
	expect_spec("{" N "\"replicas\":0}", "spec.replicas: 0 is not in 1..10");
	expect_spec("{" N "\"replicas\":11}", "spec.replicas: 11 is not in 1..10");
	/* exclusiveMinimum with an inclusive maximum */
	expect_spec("{" N "\"weight\":1}", NULL);
	expect_spec("{" N "\"weight\":100}", NULL);
	expect_spec("{" N "\"weight\":0}", "spec.weight: 0 is not more than 0");
	expect_spec("{" N "\"weight\":-3}", "spec.weight: -3 is not more than 0");
	expect_spec("{" N "\"weight\":101}", "spec.weight: 101 is more than the maximum 100");
	/* exclusiveMaximum alone */
	expect_spec("{" N "\"priority\":4}", NULL);
	expect_spec("{" N "\"priority\":-9223372036854775808}", NULL);
	expect_spec("{" N "\"priority\":5}", "spec.priority: 5 is not less than 5");
	/* minimum alone */
	expect_spec("{" N "\"retries\":0}", NULL);
	expect_spec("{" N "\"retries\":-1}", "spec.retries: -1 is less than the minimum 0");
	/* inside an array and a map */
	expect_spec("{" N "\"ports\":[80,0]}", "spec.ports[1]: 0 is not in 1..65535");
	expect_spec("{" N "\"selectors\":{\"x\":{\"match\":\"m\",\"weight\":11}}}",
	            "spec.selectors[x].weight: 11 is more than the maximum 10");
	expect_spec("{" N "\"items\":[{\"name\":\"a\",\"count\":-1}]}",
	            "spec.items[0].count: -1 is less than the minimum 0");
	expect_spec("{" N
	            "\"items\":[{\"name\":\"a\"},{\"name\":\"b\",\"resources\":{\"cpu\":-2}}]}",
	            "spec.items[1].resources.cpu: -2 is less than the minimum 0");
}
END_TEST

START_TEST(test_validate_number_bounds)
{
	expect_spec("{" N "\"ratio\":0}", NULL);
	expect_spec("{" N "\"ratio\":0.999}", NULL);
	expect_spec("{" N "\"ratio\":1}", "spec.ratio: 1 is not less than 1");
	expect_spec("{" N "\"ratio\":1.5}", "spec.ratio: 1.5 is not less than 1");
	expect_spec("{" N "\"ratio\":-0.5}", "spec.ratio: -0.5 is less than the minimum 0");
}
END_TEST

START_TEST(test_validate_enum)
{
	expect_spec("{" N "\"mode\":\"Fast\"}", NULL);
	expect_spec("{" N "\"mode\":\"Medium\"}",
	            "spec.mode: \"Medium\" is not one of \"Fast\", \"Slow\"");
	expect_spec("{" N "\"mode\":\"fast\"}",
	            "spec.mode: \"fast\" is not one of \"Fast\", \"Slow\"");
	expect_spec("{" N "\"mode\":\"\"}", "spec.mode: \"\" is not one of \"Fast\", \"Slow\"");
	expect_spec("{" N "\"level\":3}", NULL);
	expect_spec("{" N "\"level\":4}", "spec.level: 4 is not one of 1, 2, 3");
	expect_spec("{" N "\"level\":\"2\"}", "spec.level: must be an integer");
	expect_spec("{" N "\"template\":{\"image\":\"i\",\"pullPolicy\":\"Sometimes\"}}",
	            "spec.template.pullPolicy: \"Sometimes\" is not one of \"Always\", "
	            "\"IfNotPresent\", \"Never\"");
	expect(widget_validate_status,
	       "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"Maybe\"}]}",
	       "status.conditions[0].status: \"Maybe\" is not one of \"True\", \"False\", "
	       "\"Unknown\"");
}
END_TEST

/*
 * Patterns match UTF-8 characters in whatever locale the thread is in, and leave
 * that locale as it was.
 */
START_TEST(test_pattern_locale)
{
	locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
	ck_assert_ptr_nonnull(c);
	locale_t old = uselocale(c);
	ck_gen_pattern_t p = {.source = "^.{3}$", .ere = "^[^\n]{3}$"};
	ck_assert_int_eq(ck_gen_pattern_match(&p, "\u00e9\u00e9\u00e9"), 1);
	ck_assert_int_eq(ck_gen_pattern_match(&p, "\u00e9a"), 0);
	ck_assert_ptr_eq(uselocale((locale_t)0), c);
	/* Released, it compiles again on next use. */
	ck_gen_pattern_release(&p);
	ck_assert_ptr_null(atomic_load(&p.re));
	ck_assert_int_eq(ck_gen_pattern_match(&p, "abc"), 1);
	ck_gen_pattern_release(&p);
	/* An expression that does not compile: remembered (not compiled again on
	 * every match), and released like any other. */
	ck_gen_pattern_t bad = {.source = "(", .ere = "("};
	ck_assert_int_eq(ck_gen_pattern_match(&bad, "x"), -1);
	void *failed = atomic_load(&bad.re);
	ck_assert_ptr_nonnull(failed);
	ck_assert_int_eq(ck_gen_pattern_match(&bad, "y"), -1);
	ck_assert_ptr_eq(atomic_load(&bad.re), failed);
	ck_gen_pattern_release(&bad);
	ck_assert_ptr_null(atomic_load(&bad.re));
	ck_assert_int_eq(ck_gen_pattern_match(&bad, "x"), -1);
	ck_gen_pattern_release(&bad);
	ck_assert_ptr_eq(uselocale((locale_t)0), c);
	/* Patterns matched by byte (all atoms ASCII) give the answers matching by
	 * character gives: no byte of "é" is a letter, "é" is not two of anything. */
	static const struct {
		const char *ere, *s;
		int want;
	} ascii[] = {
	    {"^[a-z]+$", "\u00e9", 0}, {"^[a-z]+$", "a\u00e9", 0}, {"a", "\u00e9a", 1},
	    {"^[a-z0-9-]*$", "", 1},   {"^x{2}$", "\u00e9", 0},    {"^\\.$", ".", 1},
	    {"^\\.$", "\u00e9", 0},
	};
	for (size_t i = 0; i < sizeof(ascii) / sizeof(ascii[0]); i++) {
		ck_gen_pattern_t q = {.source = ascii[i].ere, .ere = ascii[i].ere};
		ck_assert_msg(ck_gen_pattern_match(&q, ascii[i].s) == ascii[i].want, "%s on %s",
		              ascii[i].ere, ascii[i].s);
		ck_gen_pattern_release(&q);
	}
	uselocale(old);
	freelocale(c);
}
END_TEST

START_TEST(test_validate_pattern)
{
	expect_spec("{" N "\"timeout\":\"30s\"}", NULL);
	expect_spec("{" N "\"timeout\":\"100ms\"}", NULL);
	expect_spec("{" N "\"timeout\":\"abc\"}",
	            "spec.timeout: \"abc\" does not match the pattern '^[0-9]+(ms|s)$'");
	expect_spec("{" N "\"timeout\":\"30\"}",
	            "spec.timeout: \"30\" does not match the pattern '^[0-9]+(ms|s)$'");
	expect_spec("{" N "\"timeout\":\"30sx\"}",
	            "spec.timeout: \"30sx\" does not match the pattern '^[0-9]+(ms|s)$'");
	/* A well-known pattern is named. */
	const char *label = " is not a valid DNS-1123 label (lower case alphanumerics and '-', "
	                    "starting and ending with an alphanumeric)";
	expect_spec("{\"name\":\"web-1\"}", NULL);
	expect_spec("{\"name\":\"0\"}", NULL);
	const char *bad[] = {"Web", "-web", "web-", "a.b", "a_b", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *spec = ck_xasprintf("{\"name\":\"%s\"}", bad[i]);
		char *want = ck_xasprintf("spec.name: \"%s\"%s", bad[i], label);
		expect_spec(spec, want);
		free(want);
		free(spec);
	}
}
END_TEST

START_TEST(test_validate_length)
{
	/* Counted in characters: é is two bytes, the emoji four. */
	expect_spec("{" N "\"description\":\"ab\"}", NULL);
	expect_spec("{" N "\"description\":\"" E_ACUTE E_ACUTE "\"}", NULL);
	expect_spec("{" N "\"description\":\"" GRIN GRIN GRIN GRIN GRIN GRIN GRIN GRIN GRIN GRIN
	            "\"}",
	            NULL);
	expect_spec("{" N "\"description\":\"a\"}", "spec.description: 1 characters, at least 2");
	expect_spec("{" N "\"description\":\"" E_ACUTE "\"}",
	            "spec.description: 1 characters, at least 2");
	expect_spec("{" N "\"description\":\"" GRIN "\"}",
	            "spec.description: 1 characters, at least 2");
	expect_spec("{" N "\"description\":\"abcdefghij\"}", NULL);
	expect_spec("{" N "\"description\":\"abcdefghijk\"}",
	            "spec.description: 11 characters, at most 10");
	expect_spec("{" N "\"description\":\"" E_ACUTE E_ACUTE E_ACUTE E_ACUTE E_ACUTE E_ACUTE
	                E_ACUTE E_ACUTE E_ACUTE E_ACUTE E_ACUTE "\"}",
	            "spec.description: 11 characters, at most 10");
	expect_spec("{" N "\"template\":{\"image\":\"\"}}",
	            "spec.template.image: 0 characters, at least 1");
	expect_spec("{" N "\"tags\":[\"a\",\"\"]}", "spec.tags[1]: 0 characters, at least 1");
	/* maxLength comes before the pattern. */
	char name[80];
	memset(name, 'a', 64);
	name[64] = '\0';
	char *spec = ck_xasprintf("{\"name\":\"%s\"}", name);
	expect_spec(spec, "spec.name: 64 characters, at most 63");
	free(spec);
	name[63] = '\0';
	spec = ck_xasprintf("{\"name\":\"%s\"}", name);
	expect_spec(spec, NULL);
	free(spec);
}
END_TEST

START_TEST(test_validate_items)
{
	expect_spec("{" N "\"tags\":[\"a\",\"b\",\"c\"]}", NULL);
	expect_spec("{" N "\"tags\":[]}", NULL);
	expect_spec("{" N "\"tags\":[\"a\",\"b\",\"c\",\"d\"]}", "spec.tags: 4 items, at most 3");
	expect_spec("{" N "\"tags\":[\"a\",1]}", "spec.tags[1]: must be a string");
	expect_spec("{" N "\"ports\":[1]}", NULL);
	expect_spec("{" N "\"ports\":[]}", "spec.ports: 0 items, at least 1");
	expect_spec("{" N "\"ports\":[80,\"443\"]}", "spec.ports[1]: must be an integer");
}
END_TEST

START_TEST(test_validate_map)
{
	expect_spec("{" N "\"labels\":{\"a\":\"12345\",\"b\":\"\"}}", NULL);
	expect_spec("{" N "\"labels\":{}}", "spec.labels: 0 properties, at least 1");
	expect_spec("{" N "\"labels\":{\"a\":\"1\",\"b\":\"2\",\"c\":\"3\"}}",
	            "spec.labels: 3 properties, at most 2");
	expect_spec("{" N "\"labels\":{\"ok\":\"1\",\"k\":\"123456\"}}",
	            "spec.labels[k]: 6 characters, at most 5");
	expect_spec("{" N "\"labels\":{\"k\":1}}", "spec.labels[k]: must be a string");
	expect_spec("{" N "\"selectors\":{\"s\":{\"match\":\"m\"},\"t\":{\"weight\":1}}}",
	            "spec.selectors[t].match: required");
	expect_spec("{" N "\"selectors\":{\"s\":5}}", "spec.selectors[s]: must be an object");
	expect(widget_validate, "\"data\":{\"a\":\"x\",\"b\":1},\"spec\":{\"name\":\"a\"}",
	       "data[b]: must be a string");
}
END_TEST

START_TEST(test_validate_required)
{
	/* An empty spec keeps no field: it cannot be told from no spec. */
	expect_spec("{}", "spec: required");
	expect_spec("{\"replicas\":1}", "spec.name: required");
	expect_spec("{\"name\":null,\"replicas\":1}", "spec.name: required");
	/* Inside array items and map values. */
	expect_spec("{" N "\"items\":[{\"name\":\"a\"},{\"count\":1}]}",
	            "spec.items[1].name: required");
	expect_spec("{" N "\"items\":[{\"name\":\"a\"},{\"name\":null}]}",
	            "spec.items[1].name: required");
	expect(widget_validate_status, "\"status\":{\"conditions\":[{\"status\":\"True\"}]}",
	       "status.conditions[0].type: required");
	/* A nested object (expanded into kept fields) present without its required field. */
	expect_spec("{" N "\"template\":{\"pullPolicy\":\"Always\"}}",
	            "spec.template.image: required");
	/* It is not required itself. */
	expect_spec("{" N "\"replicas\":2}", NULL);
	/* spec is required at the top. */
	expect(widget_validate_spec, "", "spec: required");
	expect(widget_validate_spec, "\"spec\":null", "spec: required");
	expect(widget_validate_status, "", NULL); /* status is not */
}
END_TEST

START_TEST(test_validate_int_or_string)
{
	expect_spec("{" N "\"maxUnavailable\":3}", NULL);
	expect_spec("{" N "\"maxUnavailable\":\"50%\"}", NULL);
	expect_spec("{" N "\"maxUnavailable\":null}", NULL);
	const char *bad[] = {"true", "2.5", "{\"a\":1}", "[3]"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *spec = ck_xasprintf("{" N "\"maxUnavailable\":%s}", bad[i]);
		expect_spec(spec, "spec.maxUnavailable: must be an integer or a string");
		free(spec);
	}
	/* Any JSON where the schema keeps any. */
	expect_spec("{" N "\"config\":{\"a\":[1,{\"b\":null}]},\"matrix\":[[1],[2,3]]}", NULL);
}
END_TEST

START_TEST(test_validate_null_is_absent)
{
	expect_spec("{\"name\":\"a\",\"timeout\":null,\"description\":null,\"replicas\":null,"
	            "\"ratio\":null,\"paused\":null,\"mode\":null,\"template\":null,\"tags\":null,"
	            "\"ports\":null,\"items\":null,\"labels\":null,\"selectors\":null,"
	            "\"maxUnavailable\":null,\"config\":null,\"matrix\":null,\"URLPath\":null}",
	            NULL);
	/* Inside kept JSON too; and a nested object of nulls is absent. */
	expect_spec("{" N "\"items\":[{\"name\":\"a\",\"count\":null,\"resources\":null}],"
	            "\"labels\":{\"k\":null},\"template\":{\"image\":null,\"pullPolicy\":null},"
	            "\"selectors\":{\"s\":{\"match\":\"m\",\"weight\":null}}}",
	            NULL);
	expect(widget_validate, "\"data\":null,\"spec\":{\"name\":\"a\"},\"status\":null", NULL);
}
END_TEST

START_TEST(test_validate_whole_vs_parts)
{
	const char *bad_status = "\"spec\":{\"name\":\"a\"},\"status\":{\"conditions\":[{\"type\":"
	                         "\"Ready\",\"status\":\"Yes\"}]}";
	const char *msg = "status.conditions[0].status: \"Yes\" is not one of \"True\", \"False\", "
	                  "\"Unknown\"";
	expect(widget_validate_spec, bad_status, NULL);
	expect(widget_validate_status, bad_status, msg);
	expect(widget_validate, bad_status, msg);
	/* The first violation in schema order: data, then spec, then status. */
	expect(widget_validate,
	       "\"data\":{\"k\":true},\"spec\":{\"name\":\"A\"},\"status\":{\"conditions\":[{}]}",
	       "data[k]: must be a string");
	expect(widget_validate, "\"spec\":{\"replicas\":0},\"status\":{\"conditions\":[{}]}",
	       "spec.name: required");
	/* spec is required of the whole object too, whatever else it holds. */
	expect(widget_validate, "\"status\":{\"observedGeneration\":1}", "spec: required");
	expect(widget_validate, "\"data\":{\"k\":\"v\"}", "spec: required");
	expect(widget_validate, "", "spec: required");
}
END_TEST

START_TEST(test_validate_long_values_cut)
{
	/* 300 bytes of é: cut at 253 bytes would split one, so 252 (126 of them). */
	ck_sbuf_t v = CK_SBUF_INIT, want = CK_SBUF_INIT;
	for (int i = 0; i < 150; i++)
		ck_sbuf_puts(&v, E_ACUTE);
	ck_sbuf_puts(&want, "spec.timeout: \"");
	for (int i = 0; i < 126; i++)
		ck_sbuf_puts(&want, E_ACUTE);
	ck_sbuf_puts(&want, "...\" (300 bytes) does not match the pattern '^[0-9]+(ms|s)$'");
	char *spec = ck_xasprintf("{" N "\"timeout\":\"%s\"}", ck_sbuf_cstr(&v));
	expect_spec(spec, ck_sbuf_cstr(&want));
	free(spec);
	ck_sbuf_reset(&v);
	ck_sbuf_reset(&want);

	/* "x" first: byte 253 starts a character, so the cut is at 253. */
	ck_sbuf_puts(&v, "x");
	for (int i = 0; i < 150; i++)
		ck_sbuf_puts(&v, E_ACUTE);
	ck_sbuf_puts(&want, "spec.timeout: \"x");
	for (int i = 0; i < 126; i++)
		ck_sbuf_puts(&want, E_ACUTE);
	ck_sbuf_puts(&want, "...\" (301 bytes) does not match the pattern '^[0-9]+(ms|s)$'");
	spec = ck_xasprintf("{" N "\"timeout\":\"%s\"}", ck_sbuf_cstr(&v));
	expect_spec(spec, ck_sbuf_cstr(&want));
	free(spec);
	ck_sbuf_reset(&v);
	ck_sbuf_reset(&want);

	/* Exactly 253 bytes: whole. 254: cut. */
	char a[256];
	memset(a, 'a', sizeof(a));
	a[253] = '\0';
	spec = ck_xasprintf("{" N "\"timeout\":\"%s\"}", a);
	char *w =
	    ck_xasprintf("spec.timeout: \"%s\" does not match the pattern '^[0-9]+(ms|s)$'", a);
	expect_spec(spec, w);
	free(w);
	free(spec);
	a[253] = 'a';
	a[254] = '\0';
	spec = ck_xasprintf("{" N "\"timeout\":\"%s\"}", a);
	a[253] = '\0';
	w = ck_xasprintf("spec.timeout: \"%s...\" (254 bytes) does not match the pattern "
	                 "'^[0-9]+(ms|s)$'",
	                 a);
	expect_spec(spec, w);
	free(w);
	free(spec);

	/* An enum's message quotes the value's JSON text, cut the same way: "x" and
	 * 150 é are 303 bytes of JSON; 253 would split an é, so 252. */
	ck_sbuf_puts(&v, "x");
	for (int i = 0; i < 150; i++)
		ck_sbuf_puts(&v, E_ACUTE);
	ck_sbuf_puts(&want, "spec.mode: \"x");
	for (int i = 0; i < 125; i++)
		ck_sbuf_puts(&want, E_ACUTE);
	ck_sbuf_puts(&want, "...\" (303 bytes) is not one of \"Fast\", \"Slow\"");
	spec = ck_xasprintf("{" N "\"mode\":\"%s\"}", ck_sbuf_cstr(&v));
	expect_spec(spec, ck_sbuf_cstr(&want));
	free(spec);
	ck_sbuf_free(&v);
	ck_sbuf_free(&want);
}
END_TEST

/* ---------------------------------------------------------------- checking structs */

START_TEST(test_spec_check)
{
	widget_spec_t s;
	memset(&s, 0, sizeof(s));
	char *err = NULL;
	ck_assert_int_eq(widget_spec_check(&s, &err), -1);
	ck_assert_str_eq(err, "spec.name: required");
	free(err);
	err = NULL;

	s.name = "web";
	s.replicas = 11; /* without has_replicas: absent, not checked */
	ck_assert_int_eq(widget_spec_check(&s, &err), 0);
	ck_assert_ptr_null(err);
	s.has_replicas = true;
	ck_assert_int_eq(widget_spec_check(&s, &err), -1);
	ck_assert_str_eq(err, "spec.replicas: 11 is not in 1..10");
	free(err);
	err = NULL;
	s.replicas = 10;

	s.ratio = 1;
	s.has_ratio = true;
	ck_assert_int_eq(widget_spec_check(&s, &err), -1);
	ck_assert_str_eq(err, "spec.ratio: 1 is not less than 1");
	free(err);
	err = NULL;
	s.ratio = 0.5;

	s.description = E_ACUTE E_ACUTE E_ACUTE E_ACUTE E_ACUTE E_ACUTE E_ACUTE E_ACUTE E_ACUTE
	    E_ACUTE; /* 10 characters, 20 bytes */
	s.mode = "Fast";
	s.max_unavailable = "\"10%\"";
	ck_assert_int_eq(widget_spec_check(&s, &err), 0);
	s.max_unavailable = "true";
	ck_assert_int_eq(widget_spec_check(&s, &err), -1);
	ck_assert_str_eq(err, "spec.maxUnavailable: must be an integer or a string");
	free(err);
	err = NULL;
	s.max_unavailable = "7";

	widget_spec_items_item_t items[2];
	memset(items, 0, sizeof(items));
	items[0].name = "a";
	items[1].count = 1;
	items[1].has_count = true;
	s.items = items;
	s.items_len = 2;
	ck_assert_int_eq(widget_spec_check(&s, &err), -1);
	ck_assert_str_eq(err, "spec.items[1].name: required");
	free(err);
	err = NULL;
	items[1].name = "b";

	char *keys[] = {"long"};
	char *vals[] = {"123456"};
	s.labels_keys = keys;
	s.labels = vals;
	s.labels_len = 1;
	ck_assert_int_eq(widget_spec_check(&s, &err), -1);
	ck_assert_str_eq(err, "spec.labels[long]: 6 characters, at most 5");
	free(err);
	err = NULL;
	vals[0] = "12345";

	s.has_template = true; /* present, so its required image is required */
	ck_assert_int_eq(widget_spec_check(&s, &err), -1);
	ck_assert_str_eq(err, "spec.template.image: required");
	free(err);
	err = NULL;
	s.template.image = "nginx";
	s.template.pull_policy = "Sometimes";
	ck_assert_int_eq(widget_spec_check(&s, &err), -1);
	ck_assert_str_eq(err, "spec.template.pullPolicy: \"Sometimes\" is not one of \"Always\", "
	                      "\"IfNotPresent\", \"Never\"");
	free(err);
	err = NULL;
	s.template.pull_policy = "Never";
	ck_assert_int_eq(widget_spec_check(&s, &err), 0);

	/* The whole kind, and status alone. */
	widget_t w;
	memset(&w, 0, sizeof(w));
	ck_assert_int_eq(widget_check(&w, &err), -1);
	ck_assert_str_eq(err, "spec: required");
	free(err);
	err = NULL;
	w.spec = s;
	w.has_spec = true;
	ck_assert_int_eq(widget_check(&w, &err), 0);
	widget_status_conditions_item_t conds[1];
	memset(conds, 0, sizeof(conds));
	conds[0].type = "Ready";
	conds[0].status = "Maybe";
	w.status.conditions = conds;
	w.status.conditions_len = 1;
	w.has_status = true;
	ck_assert_int_eq(widget_check(&w, &err), -1);
	ck_assert_str_eq(err, "status.conditions[0].status: \"Maybe\" is not one of \"True\", "
	                      "\"False\", \"Unknown\"");
	free(err);
	err = NULL;
	ck_assert_int_eq(widget_status_check(&w.status, &err), -1);
	ck_assert_str_eq(err, "status.conditions[0].status: \"Maybe\" is not one of \"True\", "
	                      "\"False\", \"Unknown\"");
	free(err);
	err = NULL;
	conds[0].status = "False";
	ck_assert_int_eq(widget_status_check(&w.status, &err), 0);
	ck_assert_int_eq(widget_check(&w, &err), 0);
	ck_assert_ptr_null(err);
}
END_TEST

/* ---------------------------------------------------------------- threads */

/*
 * Two threads validate with a pattern nobody used before, released together, so
 * that both may compile it at once (ck_gen_pattern_t.re is made on first use):
 * ThreadSanitizer checks the publication, both get the same answers.
 */
#define ROUNDS 32

static ck_gen_pattern_t fresh[ROUNDS];
static ck_gen_schema_t fresh_schema[ROUNDS];

typedef struct racer {
	pthread_barrier_t *start;
	const ck_obj_t *bad_obj, *good_obj;
	const ck_json_t *good, *bad;
	char *msgs[ROUNDS + 1];
	int rc[ROUNDS + 1];
	int good_rc;
} racer_t;

static void *race(void *arg)
{
	racer_t *r = arg;
	pthread_barrier_wait(r->start);
	r->rc[0] = widget_validate(r->bad_obj, &r->msgs[0]);
	r->good_rc = widget_validate_status(r->good_obj, NULL);
	for (int i = 0; i < ROUNDS; i++) {
		pthread_barrier_wait(r->start);
		r->rc[i + 1] = ck_gen_validate_json(&fresh_schema[i], "x", r->bad, &r->msgs[i + 1]);
		r->good_rc |= ck_gen_validate_json(&fresh_schema[i], "x", r->good, NULL);
	}
	return NULL;
}

START_TEST(test_pattern_first_use_concurrent)
{
	for (int i = 0; i < ROUNDS; i++) {
		fresh[i] = (ck_gen_pattern_t){.source = "^[a-z]+[0-9]?$", .ere = "^[a-z]+[0-9]?$"};
		fresh_schema[i] = (ck_gen_schema_t){
		    .kind = CK_GEN_STRING, .size = sizeof(char *), .pattern = &fresh[i]};
	}
	ck_json_doc_t *good = ck_json_parse("\"abc1\"", 6, NULL);
	ck_json_doc_t *bad = ck_json_parse("\"ab12\"", 6, NULL);
	ck_assert_ptr_nonnull(good);
	ck_assert_ptr_nonnull(bad);
	/* status.podIP's pattern is used by no other test. */
	ck_obj_t *bad_obj =
	    widget_with("\"spec\":{\"name\":\"a\"},\"status\":{\"podIP\":\"10.0.0.300x\"}");
	ck_obj_t *good_obj =
	    widget_with("\"spec\":{\"name\":\"a\"},\"status\":{\"podIP\":\"10.0.0.1\"}");
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, 2);
	racer_t r[2];
	memset(r, 0, sizeof(r));
	pthread_t t[2];
	for (int i = 0; i < 2; i++) {
		r[i].start = &start;
		r[i].bad_obj = bad_obj;
		r[i].good_obj = good_obj;
		r[i].good = ck_json_root(good);
		r[i].bad = ck_json_root(bad);
		ck_assert_int_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(r[i].good_rc, 0);
		ck_assert_int_eq(r[i].rc[0], -1);
		ck_assert_str_eq(r[i].msgs[0], "status.podIP: \"10.0.0.300x\" does not match the "
		                               "pattern '^[0-9]{1,3}(\\.[0-9]{1,3}){3}$'");
		for (int k = 1; k <= ROUNDS; k++) {
			ck_assert_int_eq(r[i].rc[k], -1);
			ck_assert_str_eq(r[i].msgs[k],
			                 "x: \"ab12\" does not match the pattern '^[a-z]+[0-9]?$'");
		}
		for (int k = 0; k <= ROUNDS; k++)
			free(r[i].msgs[k]);
	}
	/* Compiled once each, and kept (reachable: no leak). */
	for (int i = 0; i < ROUNDS; i++)
		ck_assert_ptr_nonnull(atomic_load(&fresh[i].re));
	ck_json_doc_free(good);
	ck_json_doc_free(bad);
	ck_obj_unref(good_obj);
	ck_obj_unref(bad_obj);
}
END_TEST

Suite *suite_gen(void)
{
	Suite *s = suite_create("gen");
	/* First, so that under CK_FORK=no its patterns are still unused. */
	TCase *tc = tcase_create("threads");
	tcase_add_test(tc, test_pattern_first_use_concurrent);
	suite_add_tcase(s, tc);
	tc = tcase_create("access");
	tcase_add_test(tc, test_descriptor);
	tcase_add_test(tc, test_accessors_present);
	tcase_add_test(tc, test_accessors_absent_null_wrong_type);
	suite_add_tcase(s, tc);
	tc = tcase_create("struct");
	tcase_add_test(tc, test_get_full);
	tcase_add_test(tc, test_get_spec_and_status);
	tcase_add_test(tc, test_get_has_flags);
	tcase_add_test(tc, test_get_elements_of_another_type);
	tcase_add_test(tc, test_get_int_or_string);
	tcase_add_test(tc, test_get_bad_kept_json);
	tcase_add_test(tc, test_to_json_filled);
	tcase_add_test(tc, test_to_patch_bad_kept_json);
	suite_add_tcase(s, tc);
	tc = tcase_create("validate");
	tcase_add_test(tc, test_kept_json_shape);
	tcase_add_test(tc, test_validate_valid);
	tcase_add_test(tc, test_validate_types);
	tcase_add_test(tc, test_validate_int_bounds);
	tcase_add_test(tc, test_validate_number_bounds);
	tcase_add_test(tc, test_validate_enum);
	tcase_add_test(tc, test_validate_pattern);
	tcase_add_test(tc, test_pattern_locale);
	tcase_add_test(tc, test_validate_length);
	tcase_add_test(tc, test_validate_items);
	tcase_add_test(tc, test_validate_map);
	tcase_add_test(tc, test_validate_required);
	tcase_add_test(tc, test_validate_int_or_string);
	tcase_add_test(tc, test_validate_null_is_absent);
	tcase_add_test(tc, test_validate_whole_vs_parts);
	tcase_add_test(tc, test_validate_long_values_cut);
	tcase_add_test(tc, test_spec_check);
	suite_add_tcase(s, tc);
	return s;
}
