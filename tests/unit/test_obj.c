/*
 * Objects: the builder packs one allocation, sorts labels, keeps the last of a
 * repeated key; lookups, keys, reference counting across threads.
 */
#include <ckube/base.h>
#include <ckube/obj.h>
#include <ckube/types.h>

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const thing_fields[] = {"spec.size", "spec.name", "status.tags"};
static const ck_type_t thing = {"example.com", "v1",         "Thing", "things",
                                true,          thing_fields, 3,       true};
static const ck_type_t core_thing = {"", "v1", "Node", "nodes", false, NULL, 0, false};

static void set(ck_obj_builder_t *b, const char *f, const char *v)
{
	ck_obj_builder_set_meta(b, f, v, strlen(v));
}

static ck_obj_t *build_sample(ck_obj_builder_t *b)
{
	set(b, "namespace", "ns1");
	set(b, "name", "obj1");
	set(b, "uid", "u-1");
	set(b, "resourceVersion", "42");
	set(b, "creationTimestamp", "2024-01-01T00:00:00Z");
	ck_obj_builder_set_generation(b, 7);
	ck_obj_builder_add_label(b, "zeta", 4, "z", 1);
	ck_obj_builder_add_label(b, "alpha", 5, "a", 1);
	ck_obj_builder_add_label(b, "mid", 3, "m1", 2);
	ck_obj_builder_add_label(b, "mid", 3, "m2", 2);
	ck_obj_builder_add_annotation(b, "note", 4, "hello", 5);
	ck_obj_builder_add_owner(b);
	ck_obj_builder_set_owner(b, "apiVersion", "v1", 2);
	ck_obj_builder_set_owner(b, "kind", "A", 1);
	ck_obj_builder_set_owner(b, "name", "a", 1);
	ck_obj_builder_set_owner(b, "uid", "ua", 2);
	ck_obj_builder_add_owner(b);
	ck_obj_builder_set_owner(b, "kind", "Foo", 3);
	ck_obj_builder_set_owner(b, "uid", "uf", 2);
	ck_obj_builder_set_owner_bool(b, "controller", true);
	ck_obj_builder_set_owner_bool(b, "blockOwnerDeletion", true);
	ck_obj_builder_set_field(b, 0, CK_VAL_INT, false, 12, 0, NULL, 0);
	ck_obj_builder_set_field(b, 1, CK_VAL_STRING, false, 0, 0, "big", 3);
	ck_obj_builder_set_field(b, 2, CK_VAL_JSON, false, 0, 0, "[\"x\"]", 5);
	return ck_obj_builder_finish(b);
}

START_TEST(test_builder)
{
	ck_obj_builder_t *b = ck_obj_builder_new(&thing);
	ck_obj_t *o = build_sample(b);
	ck_assert_uint_eq(atomic_load(&o->refs), 1);
	ck_assert_ptr_eq(o->type, &thing);
	ck_assert_str_eq(o->ns, "ns1");
	ck_assert_str_eq(o->name, "obj1");
	ck_assert_str_eq(o->uid, "u-1");
	ck_assert_str_eq(o->rv, "42");
	ck_assert_int_eq(o->generation, 7);
	ck_assert_ptr_null(o->deletion_timestamp);
	ck_assert_uint_eq(o->nlabels, 3);
	ck_assert_str_eq(o->labels[0].key, "alpha");
	ck_assert_str_eq(o->labels[1].key, "mid");
	ck_assert_str_eq(o->labels[2].key, "zeta");
	ck_assert_str_eq(ck_obj_label(o, "mid"), "m2");
	ck_assert_str_eq(ck_obj_label(o, "zeta"), "z");
	ck_assert_ptr_null(ck_obj_label(o, "nope"));
	ck_assert_ptr_null(ck_obj_label(o, "a"));
	ck_assert_str_eq(ck_obj_annotation(o, "note"), "hello");
	ck_assert_uint_eq(o->nowners, 2);
	const ck_obj_owner_t *c = ck_obj_controller_ref(o);
	ck_assert_ptr_eq(c, &o->owners[1]);
	ck_assert_str_eq(c->kind, "Foo");
	ck_assert_str_eq(c->api_version, ""); /* absent strings are "", never NULL */
	ck_assert(c->block_owner_deletion);
	ck_assert(!o->owners[0].controller);
	ck_assert_uint_eq(o->nfields, 3);
	ck_assert_int_eq(ck_obj_field(o, 0)->u.i, 12);
	ck_assert_str_eq(ck_obj_field(o, 1)->u.s, "big");
	ck_assert_int_eq(ck_obj_field(o, 2)->type, CK_VAL_JSON);
	ck_assert_int_eq(ck_obj_field(o, 3)->type, CK_VAL_ABSENT);
	ck_assert_int_eq(ck_type_field_index(&thing, "spec.name"), 1);
	ck_assert_int_eq(ck_type_field_index(&thing, "spec"), -1);

	/* Every string lives inside the object's one block. */
	const char *lo = (const char *)o, *hi = lo + ck_obj_size(o);
	const char *strs[] = {o->ns,
	                      o->name,
	                      o->uid,
	                      o->rv,
	                      o->labels[2].value,
	                      o->owners[1].uid,
	                      ck_obj_field(o, 2)->u.s};
	for (size_t i = 0; i < CK_ARRAY_LEN(strs); i++)
		ck_assert(strs[i] >= lo && strs[i] + strlen(strs[i]) < hi);

	/* The builder was reset by finish: the next object starts empty. */
	ck_obj_t *e = ck_obj_builder_finish(b);
	ck_assert_str_eq(e->name, "");
	ck_assert_uint_eq(e->nlabels, 0);
	ck_assert_uint_eq(e->nowners, 0);
	ck_assert_int_eq(ck_obj_field(e, 0)->type, CK_VAL_ABSENT);
	ck_assert_uint_eq(ck_obj_size(e), ck_obj_size(e));
	/* An empty object costs the struct plus its field array only. */
	ck_assert_uint_le(ck_obj_size(e), sizeof(ck_obj_t) + 8 + 3 * sizeof(ck_val_t));

	/* Setting a string twice, clearing annotations, deletionTimestamp. */
	set(b, "name", "first");
	set(b, "name", "second");
	set(b, "deletionTimestamp", "2024-01-02T00:00:00Z");
	ck_obj_builder_add_annotation(b, "k", 1, "v", 1);
	ck_obj_builder_clear_annotations(b);
	ck_obj_t *x = ck_obj_builder_finish(b);
	ck_assert_str_eq(x->name, "second");
	ck_assert_str_eq(x->deletion_timestamp, "2024-01-02T00:00:00Z");
	ck_assert_uint_eq(x->nannotations, 0);
	ck_assert_uint_eq(ck_obj_size(x), ck_obj_size(e) + strlen("second") + 1 +
	                                      strlen("2024-01-02T00:00:00Z") + 1);

	ck_obj_unref(x);
	ck_obj_unref(e);
	ck_obj_unref(o);
	ck_obj_builder_free(b);
	ck_obj_builder_free(NULL);
	ck_obj_unref(NULL);
	ck_assert_ptr_null(ck_obj_ref(NULL));
}
END_TEST

/* Finalizers: kept in order inside the block; none costs nothing but the struct's
 * pointer and count (the bench's per-object figure). */
START_TEST(test_finalizers)
{
	ck_obj_builder_t *b = ck_obj_builder_new(&core_thing);
	ck_obj_t *none = ck_obj_builder_finish(b);
	ck_assert_ptr_null(none->finalizers);
	ck_assert_uint_eq(none->nfinalizers, 0);
	ck_assert(!ck_obj_has_finalizer(none, "a"));
	ck_assert_uint_eq(ck_obj_size(none), (sizeof(ck_obj_t) + 7) & ~(size_t)7);

	set(b, "name", "n");
	ck_obj_builder_add_finalizer(b, "example.com/b", 13);
	ck_obj_builder_add_finalizer(b, "kubernetes", 10);
	ck_obj_builder_add_finalizer(b, "", 0);
	ck_obj_t *o = ck_obj_builder_finish(b);
	ck_assert_uint_eq(o->nfinalizers, 3);
	ck_assert_str_eq(o->finalizers[0], "example.com/b");
	ck_assert_str_eq(o->finalizers[1], "kubernetes");
	ck_assert_str_eq(o->finalizers[2], "");
	ck_assert(ck_obj_has_finalizer(o, "kubernetes"));
	ck_assert(!ck_obj_has_finalizer(o, "kube"));
	ck_assert(!ck_obj_has_finalizer(NULL, "kubernetes"));
	ck_assert(!ck_obj_has_finalizer(o, NULL));
	const char *lo = (const char *)o, *hi = lo + ck_obj_size(o);
	for (size_t i = 0; i < 2; i++)
		ck_assert(o->finalizers[i] >= lo &&
		          o->finalizers[i] + strlen(o->finalizers[i]) < hi);
	ck_assert((const char *)o->finalizers >= lo && (const char *)(o->finalizers + 3) <= hi);
	ck_assert_uint_eq(ck_obj_size(o), ck_obj_size(none) + 3 * sizeof(char *) + 2 + 14 + 11);
	/* The builder is reset: the next object has none. */
	ck_obj_t *e = ck_obj_builder_finish(b);
	ck_assert_uint_eq(e->nfinalizers, 0);
	ck_obj_unref(e);
	ck_obj_unref(o);
	ck_obj_unref(none);
	ck_obj_builder_free(b);
}
END_TEST

/* Controller references compared by group, kind and name (and uid when both have one). */
START_TEST(test_controller_of)
{
	static const ck_type_t thing_v2 = {.group = "example.com",
	                                   .version = "v2",
	                                   .kind = "Thing",
	                                   .resource = "things",
	                                   .namespaced = true};
	ck_obj_builder_t *b = ck_obj_builder_new(&core_thing);
	set(b, "name", "child");
	ck_obj_builder_add_owner(b); /* not the controller */
	ck_obj_builder_set_owner(b, "apiVersion", "example.com/v1", 14);
	ck_obj_builder_set_owner(b, "kind", "Other", 5);
	ck_obj_builder_set_owner(b, "name", "o", 1);
	ck_obj_builder_add_owner(b);
	ck_obj_builder_set_owner(b, "apiVersion", "example.com/v1", 14);
	ck_obj_builder_set_owner(b, "kind", "Thing", 5);
	ck_obj_builder_set_owner(b, "name", "t", 1);
	ck_obj_builder_set_owner(b, "uid", "u1", 2);
	ck_obj_builder_set_owner_bool(b, "controller", true);
	ck_obj_t *child = ck_obj_builder_finish(b);
	ck_assert_ptr_eq(ck_obj_controller_of(child, "example.com", "Thing"), &child->owners[1]);
	ck_assert_ptr_null(ck_obj_controller_of(child, "example.org", "Thing"));
	ck_assert_ptr_null(ck_obj_controller_of(child, "", "Thing"));
	ck_assert_ptr_null(ck_obj_controller_of(child, NULL, "Thing"));
	ck_assert_ptr_null(ck_obj_controller_of(child, "example.com", "Other"));
	ck_assert_ptr_null(ck_obj_controller_of(child, "example.com", NULL));
	ck_assert(ck_api_version_has_group("v1", ""));
	ck_assert(ck_api_version_has_group("v1", NULL));
	ck_assert(!ck_api_version_has_group("apps/v1", ""));
	ck_assert(ck_api_version_has_group("apps/v1", "apps"));
	ck_assert(!ck_api_version_has_group("apps/v1", "app"));
	ck_assert(!ck_api_version_has_group("apps/v1", "apps/v1"));

	ck_obj_builder_t *ob = ck_obj_builder_new(&thing_v2);
	set(ob, "name", "t");
	set(ob, "uid", "u1");
	ck_obj_t *owner = ck_obj_builder_finish(ob); /* v2: the version does not matter */
	ck_assert(ck_obj_is_controlled_by(child, owner));
	set(ob, "name", "t");
	set(ob, "uid", "u2");
	ck_obj_t *recreated = ck_obj_builder_finish(ob);
	ck_assert(!ck_obj_is_controlled_by(child, recreated));
	set(ob, "name", "t");
	ck_obj_t *nouid = ck_obj_builder_finish(ob);
	ck_assert(ck_obj_is_controlled_by(child, nouid));
	set(ob, "name", "o");
	ck_obj_t *other = ck_obj_builder_finish(ob);
	ck_assert(!ck_obj_is_controlled_by(child, other));
	ck_assert(!ck_obj_is_controlled_by(child, NULL));
	ck_assert(!ck_obj_is_controlled_by(owner, owner)); /* no controller at all */
	ck_obj_unref(other);
	ck_obj_unref(nouid);
	ck_obj_unref(recreated);
	ck_obj_unref(owner);
	ck_obj_unref(child);
	ck_obj_builder_free(ob);
	ck_obj_builder_free(b);
}
END_TEST

START_TEST(test_keys)
{
	ck_obj_builder_t *b = ck_obj_builder_new(&thing);
	ck_obj_t *o = build_sample(b);
	char buf[32];
	ck_assert_uint_eq(ck_obj_key(o, buf, sizeof(buf)), 8);
	ck_assert_str_eq(buf, "ns1/obj1");
	ck_assert_uint_eq(ck_obj_key(o, buf, 4), 8);
	ck_assert_str_eq(buf, "ns1");
	char *k = ck_obj_key_dup(o);
	ck_assert_str_eq(k, "ns1/obj1");
	free(k);
	ck_obj_unref(o);
	ck_obj_builder_reset(b);
	set(b, "name", "only");
	o = ck_obj_builder_finish(b); /* namespaced kind, no namespace: the name alone */
	k = ck_obj_key_dup(o);
	ck_assert_str_eq(k, "only");
	free(k);
	ck_obj_unref(o);
	ck_obj_builder_free(b);

	char *ns, *name;
	ck_assert_int_eq(ck_obj_key_split("a/b", &ns, &name), 0);
	ck_assert_str_eq(ns, "a");
	ck_assert_str_eq(name, "b");
	free(ns);
	free(name);
	ck_assert_int_eq(ck_obj_key_split("b", &ns, &name), 0);
	ck_assert_str_eq(ns, "");
	ck_assert_str_eq(name, "b");
	free(ns);
	free(name);
	ck_assert_int_eq(ck_obj_key_split("a/b/c", &ns, &name), -1);
	ck_assert_ptr_null(ns);
	ck_assert_ptr_null(name);

	ck_assert_uint_eq(ck_type_api_version(&ck_type_deployment, buf, sizeof(buf)), 7);
	ck_assert_str_eq(buf, "apps/v1");
	ck_type_api_version(&core_thing, buf, sizeof(buf));
	ck_assert_str_eq(buf, "v1");
	ck_type_api_version(&ck_type_lease, buf, sizeof(buf));
	ck_assert_str_eq(buf, "coordination.k8s.io/v1");
	ck_assert_int_eq(
	    ck_type_field_index(&ck_type_deployment_with_template, "spec.template.spec.containers"),
	    CK_DEPLOYMENT_SPEC_TEMPLATE_CONTAINERS);
	/* The plain descriptor does not keep the template (a quarter of a Deployment). */
	ck_assert_int_eq(ck_type_field_index(&ck_type_deployment, "spec.template.spec.containers"),
	                 -1);
}
END_TEST

/* Labels in reverse order (not what the server sends) still sort; many keys. */
START_TEST(test_many_labels)
{
	ck_obj_builder_t *b = ck_obj_builder_new(&core_thing);
	char k[16], v[16];
	for (int i = 999; i >= 0; i--) {
		int kl = snprintf(k, sizeof(k), "k%04d", i);
		int vl = snprintf(v, sizeof(v), "v%d", i);
		ck_obj_builder_add_label(b, k, (size_t)kl, v, (size_t)vl);
	}
	ck_obj_builder_add_label(b, "k0500", 5, "last", 4);
	ck_obj_t *o = ck_obj_builder_finish(b);
	ck_assert_uint_eq(o->nlabels, 1000);
	for (size_t i = 1; i < o->nlabels; i++)
		ck_assert_int_lt(strcmp(o->labels[i - 1].key, o->labels[i].key), 0);
	ck_assert_str_eq(ck_obj_label(o, "k0000"), "v0");
	ck_assert_str_eq(ck_obj_label(o, "k0999"), "v999");
	ck_assert_str_eq(ck_obj_label(o, "k0500"), "last");
	ck_obj_unref(o);
	ck_obj_builder_free(b);
}
END_TEST

static void *ref_worker(void *arg)
{
	ck_obj_t *o = arg;
	for (int i = 0; i < 100000; i++) {
		ck_obj_t *r = ck_obj_ref(o);
		if (strcmp(r->name, "obj1") != 0)
			abort();
		ck_obj_unref(r);
	}
	ck_obj_unref(o);
	return NULL;
}

START_TEST(test_refcount_threads)
{
	ck_obj_builder_t *b = ck_obj_builder_new(&thing);
	ck_obj_t *o = build_sample(b);
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		ck_obj_ref(o);
		pthread_create(&th[i], NULL, ref_worker, o);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	ck_assert_uint_eq(atomic_load(&o->refs), 1);
	ck_obj_unref(o); /* the last reference frees; ASan reports a leak otherwise */
	ck_obj_builder_free(b);
}
END_TEST

Suite *suite_obj(void)
{
	Suite *s = suite_create("obj");
	TCase *tc = tcase_create("obj");
	tcase_add_test(tc, test_builder);
	tcase_add_test(tc, test_keys);
	tcase_add_test(tc, test_finalizers);
	tcase_add_test(tc, test_controller_of);
	tcase_add_test(tc, test_many_labels);
	tcase_add_test(tc, test_refcount_threads);
	suite_add_tcase(s, tc);
	return s;
}
