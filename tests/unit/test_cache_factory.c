/*
 * Unit tests for pkg/cache/factory.c's sharing rule: one informer per
 * group/version/resource whatever descriptor object names it, and a refusal,
 * with a reason naming the resource, for a descriptor of the same resource that
 * keeps other fields. On the fake list/watch source; the loop is never run.
 */
#include "test_cache_util.h"

#include <ckube/kinds.h>
#include <ckube/log.h>
#include <ckube/types.h>

#include <check.h>
#include <ev.h>
#include <unistd.h>

/* Two modules' own descriptors of ConfigMaps: equal, at different addresses. */
static const char *const mod_a_fields[] = {"data", "binaryData"};
static const ck_type_t mod_a_configmap = {
    .group = "",
    .version = "v1",
    .kind = "ConfigMap",
    .resource = "configmaps",
    .namespaced = true,
    .fields = mod_a_fields,
    .nfields = 2,
};
static const char *const mod_b_fields[] = {"data", "binaryData"};
static const ck_type_t mod_b_configmap = {
    .group = "",
    .version = "v1",
    .kind = "ConfigMap",
    .resource = "configmaps",
    .namespaced = true,
    .fields = mod_b_fields,
    .nfields = 2,
};
/* A third keeps only data. */
static const char *const mod_c_fields[] = {"data"};
static const ck_type_t mod_c_configmap = {
    .group = "",
    .version = "v1",
    .kind = "ConfigMap",
    .resource = "configmaps",
    .namespaced = true,
    .fields = mod_c_fields,
    .nfields = 1,
};

typedef struct lws {
	ck_cache_fake_lw_t *fake;
	int made;
	char ns[32]; /* the namespace the last source was made for */
} lws_t;

static ck_cache_lw_t *make_lw(void *ud, const ck_type_t *t, const char *ns)
{
	lws_t *l = ud;
	(void)t;
	snprintf(l->ns, sizeof(l->ns), "%s", ns ? ns : "");
	l->made++;
	return ck_cache_fake_lw_source(l->fake);
}

typedef struct fx {
	struct ev_loop *loop;
	ck_clk_fake_t clk;
	lws_t lws;
	ck_cache_factory_t *fac;
} fx_t;

static void fx_init(fx_t *f)
{
	memset(f, 0, sizeof(*f));
	f->loop = ev_loop_new(EVFLAG_AUTO);
	ck_clk_fake_init(&f->clk, CK_NS_PER_SEC, 0);
	f->lws.fake = ck_cache_fake_lw_new();
	ck_cache_factory_opts_t o = {
	    .clock = &f->clk.base, .ns = "default", .lw_new = make_lw, .lw_ud = &f->lws};
	f->fac = ck_cache_factory_new(f->loop, NULL, &o);
}

static void fx_free(fx_t *f)
{
	ck_cache_factory_free(f->fac);
	ck_cache_fake_lw_free(f->lws.fake);
	ev_loop_destroy(f->loop);
}

static ck_obj_t *mkcm(const ck_type_t *t, const char *name, const char *data_json)
{
	ck_obj_builder_t *b = ck_obj_builder_new(t);
	bset(b, "namespace", "default");
	bset(b, "name", name);
	bset(b, "resourceVersion", "5");
	ck_obj_builder_set_field(b, 0, CK_VAL_JSON, false, 0, 0, data_json, strlen(data_json));
	ck_obj_t *o = ck_obj_builder_finish(b);
	ck_obj_builder_free(b);
	return o;
}

START_TEST(test_equal_descriptors_share_one_informer_and_watch)
{
	fx_t f;
	fx_init(&f);
	char *err = NULL;
	ck_cache_informer_t *a = ck_cache_factory_informer_err(f.fac, &mod_a_configmap, &err);
	ck_cache_informer_t *b = ck_cache_factory_informer_err(f.fac, &mod_b_configmap, &err);
	ck_cache_informer_t *builtin = ck_cache_factory_informer(f.fac, &ck_type_configmap);
	ck_assert_ptr_null(err);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_eq(a, b);
	ck_assert_ptr_eq(a, builtin);
	ck_assert_int_eq(f.lws.made, 1);
	/* The informer keeps the first descriptor asked for. */
	ck_assert_ptr_eq(ck_cache_informer_type(a), &mod_a_configmap);

	/* Another resource still gets its own. */
	ck_cache_informer_t *pods = ck_cache_factory_informer(f.fac, &ck_type_pod);
	ck_assert_ptr_nonnull(pods);
	ck_assert_ptr_ne(pods, a);
	ck_assert_int_eq(f.lws.made, 2);

	ck_assert_int_eq(ck_cache_factory_start(f.fac, NULL), 0);
	/* One list for the configmaps, one for the pods: nothing for b or builtin. */
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.lws.fake, false), 2);
	ck_cache_factory_shutdown(f.fac);
	fx_free(&f);
}
END_TEST

START_TEST(test_shared_informer_serves_every_equal_descriptor)
{
	fx_t f;
	fx_init(&f);
	ck_cache_informer_t *a = ck_cache_factory_informer(f.fac, &mod_a_configmap);
	ck_assert_int_eq(ck_cache_factory_start(f.fac, NULL), 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.lws.fake, false), 1);
	ck_cache_fake_req_t *l = ck_cache_fake_lw_last(f.lws.fake, false);
	ck_assert_str_eq(f.lws.ns, "default");
	ck_cache_fake_req_item(l, mkcm(&mod_a_configmap, "app", "{\"k\":\"v\"}"));
	ck_cache_fake_req_meta(l, "10", NULL);
	ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
	cache_informer_drain(a);
	ck_assert(ck_cache_informer_has_synced(a));

	/* Asked for after start, by another module: the same, already synced cache;
	 * no second list, and its field indexes and the built-in accessors read it. */
	ck_cache_informer_t *b = ck_cache_factory_informer(f.fac, &ck_type_configmap);
	ck_assert_ptr_eq(a, b);
	ck_assert_int_eq(ck_cache_factory_start(f.fac, NULL), 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.lws.fake, false), 1);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.lws.fake, true), 1);
	ck_obj_t *o = ck_cache_lister_get(ck_cache_informer_lister(b), "default", "app");
	ck_assert_ptr_nonnull(o);
	ck_assert_str_eq(ck_configmap_data_json(o), "{\"k\":\"v\"}");
	ck_obj_unref(o);
	ck_assert_ptr_null(ck_cache_factory_sync_reason(f.fac));
	fx_free(&f);
}
END_TEST

START_TEST(test_other_field_list_refused_with_reason)
{
	fx_t f;
	fx_init(&f);
	ck_cache_informer_t *a = ck_cache_factory_informer(f.fac, &mod_a_configmap);
	ck_assert_ptr_nonnull(a);

	char *err = NULL;
	ck_assert_ptr_null(ck_cache_factory_informer_err(f.fac, &mod_c_configmap, &err));
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, "configmaps") != NULL, "%s", err);
	ck_assert_msg(strstr(err, "keeps 2 fields where this one (kind ConfigMap) keeps 1"), "%s",
	              err);
	free(err);
	err = NULL;

	/* The two Secret descriptors of kinds.h cannot share one factory. */
	ck_assert_ptr_nonnull(ck_cache_factory_informer_err(f.fac, &ck_type_secret, &err));
	ck_assert_ptr_null(ck_cache_factory_informer_err(f.fac, &ck_type_secret_with_data, &err));
	ck_assert_msg(strstr(err, "secrets: ") == err, "%s", err);
	ck_assert_msg(strstr(err, "keeps 1 field where this one (kind Secret) keeps 2"), "%s", err);
	free(err);
	err = NULL;

	/* A field named differently: the message names the first difference. */
	static const char *const other_fields[] = {"data", "immutable"};
	static const ck_type_t other = {
	    .group = "",
	    .version = "v1",
	    .kind = "ConfigMap",
	    .resource = "configmaps",
	    .namespaced = true,
	    .fields = other_fields,
	    .nfields = 2,
	};
	ck_assert_ptr_null(ck_cache_factory_informer_err(f.fac, &other, &err));
	ck_assert_msg(strstr(err, "\"binaryData\" as field 1") && strstr(err, "\"immutable\""),
	              "%s", err);
	free(err);

	/* Without err: NULL too, and the reason is logged. */
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	ck_log_set_fd(fds[1]);
	ck_assert_ptr_null(ck_cache_factory_informer(f.fac, &other));
	ck_log_set_fd(2);
	close(fds[1]);
	char buf[2048];
	ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	ck_assert(n > 0);
	buf[n] = '\0';
	ck_assert_msg(strstr(buf, "Shared informer refused") && strstr(buf, "configmaps"), "%s",
	              buf);

	/* The refusals made no informer, list/watch source or watch. */
	ck_assert_int_eq(f.lws.made, 2);
	ck_assert_int_eq(ck_cache_factory_start(f.fac, NULL), 0);
	ck_assert_uint_eq(ck_cache_fake_lw_count(f.lws.fake, false), 2);
	fx_free(&f);
}
END_TEST

START_TEST(test_no_source_is_an_error)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	ck_cache_factory_t *fac = ck_cache_factory_new(loop, NULL, NULL);
	char *err = NULL;
	ck_assert_ptr_null(ck_cache_factory_informer_err(fac, &ck_type_pod, &err));
	ck_assert_msg(err && strstr(err, "pods") && strstr(err, "no client"), "%s", err);
	free(err);
	ck_cache_factory_free(fac);
	ev_loop_destroy(loop);
}
END_TEST

Suite *suite_cache_factory(void);
Suite *suite_cache_factory(void)
{
	Suite *s = suite_create("cache_factory");
	TCase *tc = tcase_create("sharing");
	tcase_add_test(tc, test_equal_descriptors_share_one_informer_and_watch);
	tcase_add_test(tc, test_shared_informer_serves_every_equal_descriptor);
	tcase_add_test(tc, test_other_field_list_refused_with_reason);
	tcase_add_test(tc, test_no_source_is_an_error);
	suite_add_tcase(s, tc);
	return s;
}
