/*
 * predicate: the ready-made predicates judge updates only; a predicate handler
 * behind an informer fed by the fake source passes an event only when every
 * predicate does, drops (never converts) a failing update, and passes resyncs
 * only when asked.
 */
#include "tests/unit/test_cache_util.h"

#include <ckube/predicate.h>

#include <check.h>
#include <ev.h>

static const ck_type_t annot_type = {.group = "test.example.com",
                                     .version = "v1",
                                     .kind = "Widget",
                                     .resource = "widgets",
                                     .namespaced = true,
                                     .keep_annotations = true};

/* An object with a generation, one label and one annotation (NULL: none). */
static ck_obj_t *mk(const char *rv, int64_t gen, const char *label, const char *annot)
{
	ck_obj_builder_t *b = ck_obj_builder_new(&annot_type);
	bset(b, "namespace", "ns");
	bset(b, "name", "a");
	bset(b, "resourceVersion", rv);
	ck_obj_builder_set_generation(b, gen);
	if (label != NULL)
		ck_obj_builder_add_label(b, "l", 1, label, strlen(label));
	if (annot != NULL)
		ck_obj_builder_add_annotation(b, "a", 1, annot, strlen(annot));
	ck_obj_t *o = ck_obj_builder_finish(b);
	ck_obj_builder_free(b);
	return o;
}

START_TEST(test_ready_made)
{
	ck_obj_t *base = mk("1", 1, "x", "p"), *gen = mk("2", 2, "x", "p"),
	         *lab = mk("3", 1, "y", "p"), *ann = mk("4", 1, "x", "q"),
	         *same = mk("1", 1, "x", "p"), *nolab = mk("5", 1, NULL, "p");
	const ck_predicate_t *g = ck_predicate_generation_changed(),
	                     *l = ck_predicate_labels_changed(),
	                     *a = ck_predicate_annotations_changed(),
	                     *r = ck_predicate_resource_version_changed();
	const ck_predicate_t *one[1];
#define UPD(p, o, n) (one[0] = (p), ck_predicates_update(one, 1, (o), (n)))
	ck_assert(UPD(g, base, gen));
	ck_assert(!UPD(g, base, lab));
	ck_assert(!UPD(g, base, ann));
	ck_assert(UPD(l, base, lab));
	ck_assert(UPD(l, base, nolab));
	ck_assert(!UPD(l, base, gen));
	ck_assert(UPD(a, base, ann));
	ck_assert(!UPD(a, base, lab));
	ck_assert(UPD(r, base, gen));
	ck_assert(!UPD(r, base, same)); /* a resync */
	/* Adds and deletes always pass the ready-made ones. */
	const ck_predicate_t *all[] = {g, l, a, r};
	ck_assert(ck_predicates_create(all, 4, base));
	ck_assert(ck_predicates_delete(all, 4, base));
	ck_assert(ck_predicates_delete(all, 4, NULL));
	/* AND: one failing predicate is enough. */
	ck_assert(!ck_predicates_update(all, 4, base, gen));
	const ck_predicate_t *gr[] = {g, r};
	ck_assert(ck_predicates_update(gr, 2, base, gen));
	ck_assert(ck_predicates_update(NULL, 0, base, same));
	ck_obj_unref(base);
	ck_obj_unref(gen);
	ck_obj_unref(lab);
	ck_obj_unref(ann);
	ck_obj_unref(same);
	ck_obj_unref(nolab);
}
END_TEST

static bool refuse_named_b(void *ud, const ck_obj_t *obj)
{
	(*(int *)ud)++;
	return strcmp(obj->name, "b") != 0;
}

START_TEST(test_handler_behind_informer)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	ck_cache_fake_lw_t *fake = ck_cache_fake_lw_new();
	ck_cache_informer_t *inf =
	    ck_cache_informer_new(loop, &annot_type, ck_cache_fake_lw_source(fake), NULL);
	int calls = 0;
	ck_predicate_t custom = {.create = refuse_named_b, .del = refuse_named_b, .ud = &calls};
	const ck_predicate_t *preds[] = {ck_predicate_generation_changed(), &custom};
	rec_t rec = {0};
	ck_cache_predicate_handler_t ph = {
	    .preds = preds, .npreds = 2, .handler = rec_handler, .handler_ud = &rec};
	ck_cache_informer_add_handler(inf, ck_cache_predicate_handler(), &ph);
	ck_assert_int_eq(ck_cache_informer_start(inf, NULL), 0);

	ck_cache_fake_req_t *l = ck_cache_fake_lw_last(fake, false);
	ck_cache_fake_req_item(l, mk("1", 1, "x", NULL));
	ck_cache_fake_req_meta(l, "1", NULL);
	ck_cache_fake_req_finish(l, 200, NULL, NULL, 0);
	ck_cache_fake_req_t *w = ck_cache_fake_lw_last(fake, true);
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mk("2", 1, "y", NULL)); /* labels only */
	ck_cache_fake_req_event(w, CK_WATCH_MODIFIED, mk("3", 2, "y", NULL)); /* spec */
	ck_cache_fake_req_event(w, CK_WATCH_ADDED, mkobj_t(&annot_type, "ns", "b", "4", NULL));
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mkobj_t(&annot_type, "ns", "b", "5", NULL));
	ck_cache_fake_req_event(w, CK_WATCH_DELETED, mk("6", 2, "y", NULL));
	cache_informer_drain(inf);
	ck_assert_str_eq(rec_text(&rec), "add ns/a 1 initial\n"
	                                 "update ns/a 2->3\n"
	                                 "delete ns/a 6\n");
	ck_assert_int_eq(calls, 4); /* create a, create b, delete b, delete a */

	ck_cache_informer_free(inf);
	ck_cache_fake_lw_free(fake);
	ev_loop_destroy(loop);
	rec_reset(&rec);
}
END_TEST

Suite *suite_predicate(void)
{
	Suite *s = suite_create("predicate");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_ready_made);
	tcase_add_test(tc, test_handler_behind_informer);
	suite_add_tcase(s, tc);
	return s;
}
