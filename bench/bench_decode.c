/*
 * Benchmark of the streaming decoder (pkg/codec/decode.c): prints figures, asserts
 * nothing about speed.
 *
 * Builds in memory a DeploymentList of N (default 10,000) realistic Deployments
 * (the shape the API server returns, ~3.2 KB each, most of it managedFields), then
 * decodes it with CK_DEC_LIST fed in 16 KiB chunks (what curl hands over) and prints:
 *   MB/s and objects/s on one core (best of several runs),
 *   peak RSS growth while decoding, with the objects dropped at once and kept,
 *   bytes held per decoded object (ck_obj_size, and malloc's usable size),
 *   and, as the limit the decoder is measured against, yajl parsing the same input in
 *   the same chunks with callbacks that do nothing (the decoder is built on yajl, so
 *   its speed is that rate less the work of building objects).
 *
 * Build and run: bash bench/bench_decode.sh [N]
 */
#include <ckube/base.h>
#include <ckube/decode.h>
#include <ckube/types.h>

#include "api/samplecontroller/v1alpha1/foo.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <yajl/yajl_parse.h>

/* One list item; placeholders: name, namespace, uid, resourceVersion, generation,
 * label, owner name, spec.replicas, selector label, template label, status x5,
 * ReplicaSet name. */
static const char item_fmt[] =
    "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"%s\",\"resourceVersion\":"
    "\"%llu\",\"generation\":%d,\"creationTimestamp\":\"2024-05-02T10:11:12Z\",\"labels\":{\""
    "app\":\"nginx\",\"controller\":\"%s\"},\"annotations\":{\"deployment.kubernetes.io/revis"
    "ion\":\"1\"},\"ownerReferences\":[{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\","
    "\"kind\":\"Foo\",\"name\":\"%s\",\"uid\":\"9a1f3c6e-2b7d-4e1a-8f0c-5d6e7f8a9b0c\",\"cont"
    "roller\":true,\"blockOwnerDeletion\":true}],\"managedFields\":[{\"manager\":\"sample-con"
    "troller\",\"operation\":\"Update\",\"apiVersion\":\"apps/v1\",\"time\":\"2024-05-02T10:1"
    "1:12Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{\"f:ownerReferences\":"
    "{\".\":{},\"k:{\\\"uid\\\":\\\"9a1f3c6e-2b7d-4e1a-8f0c-5d6e7f8a9b0c\\\"}\":{}}},\"f:spec"
    "\":{\"f:progressDeadlineSeconds\":{},\"f:replicas\":{},\"f:revisionHistoryLimit\":{},\"f"
    ":selector\":{},\"f:strategy\":{\"f:rollingUpdate\":{\".\":{},\"f:maxSurge\":{},\"f:maxUn"
    "available\":{}},\"f:type\":{}},\"f:template\":{\"f:metadata\":{\"f:labels\":{\".\":{},\""
    "f:app\":{},\"f:controller\":{}}},\"f:spec\":{\"f:containers\":{\"k:{\\\"name\\\":\\\"ngi"
    "nx\\\"}\":{\".\":{},\"f:image\":{},\"f:imagePullPolicy\":{},\"f:name\":{},\"f:resources"
    "\":{},\"f:terminationMessagePath\":{},\"f:terminationMessagePolicy\":{}}},\"f:dnsPolicy"
    "\":{},\"f:restartPolicy\":{},\"f:schedulerName\":{},\"f:securityContext\":{},\"f:termina"
    "tionGracePeriodSeconds\":{}}}}}},{\"manager\":\"kube-controller-manager\",\"operation\":"
    "\"Update\",\"apiVersion\":\"apps/v1\",\"time\":\"2024-05-02T10:11:20Z\",\"fieldsType\":"
    "\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{\"f:annotations\":{\".\":{},\"f:deployment.ku"
    "bernetes.io/revision\":{}}},\"f:status\":{\"f:availableReplicas\":{},\"f:conditions\":{"
    "\".\":{},\"k:{\\\"type\\\":\\\"Available\\\"}\":{\".\":{},\"f:lastTransitionTime\":{},\""
    "f:lastUpdateTime\":{},\"f:message\":{},\"f:reason\":{},\"f:status\":{},\"f:type\":{}},\""
    "k:{\\\"type\\\":\\\"Progressing\\\"}\":{\".\":{},\"f:lastTransitionTime\":{},\"f:lastUpd"
    "ateTime\":{},\"f:message\":{},\"f:reason\":{},\"f:status\":{},\"f:type\":{}}},\"f:observ"
    "edGeneration\":{},\"f:readyReplicas\":{},\"f:replicas\":{},\"f:updatedReplicas\":{}}},\""
    "subresource\":\"status\"}]},\"spec\":{\"replicas\":%d,\"selector\":{\"matchLabels\":{\"a"
    "pp\":\"nginx\",\"controller\":\"%s\"}},\"template\":{\"metadata\":{\"creationTimestamp\""
    ":null,\"labels\":{\"app\":\"nginx\",\"controller\":\"%s\"}},\"spec\":{\"containers\":[{"
    "\"name\":\"nginx\",\"image\":\"nginx:latest\",\"resources\":{},\"terminationMessagePath"
    "\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\""
    "Always\"}],\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,\"dnsPolicy"
    "\":\"ClusterFirst\",\"securityContext\":{},\"schedulerName\":\"default-scheduler\"}},\"s"
    "trategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxUnavailable\":\"25%%\",\"m"
    "axSurge\":\"25%%\"}},\"revisionHistoryLimit\":10,\"progressDeadlineSeconds\":600},\"stat"
    "us\":{\"observedGeneration\":%d,\"replicas\":%d,\"updatedReplicas\":%d,\"readyReplicas\""
    ":%d,\"availableReplicas\":%d,\"conditions\":[{\"type\":\"Available\",\"status\":\"True\""
    ",\"lastUpdateTime\":\"2024-05-02T10:11:20Z\",\"lastTransitionTime\":\"2024-05-02T10:11:2"
    "0Z\",\"reason\":\"MinimumReplicasAvailable\",\"message\":\"Deployment has minimum availa"
    "bility.\"},{\"type\":\"Progressing\",\"status\":\"True\",\"lastUpdateTime\":\"2024-05-02"
    "T10:11:20Z\",\"lastTransitionTime\":\"2024-05-02T10:11:12Z\",\"reason\":\"NewReplicaSetA"
    "vailable\",\"message\":\"ReplicaSet \\\"%s-7c5ddbdf54\\\" has successfully progressed.\""
    "}]}}";

static void make_item(ck_sbuf_t *b, size_t i)
{
	char name[32], ns[32], uid[48];
	snprintf(name, sizeof(name), "app-%05zu", i);
	snprintf(ns, sizeof(ns), "team-%03zu", i % 97);
	snprintf(uid, sizeof(uid), "%08zx-1b2c-4d3e-8f4a-%012zx", i * 2654435761u % 0xffffffffu, i);
	int gen = 1 + (int)(i % 5), rep = 1 + (int)(i % 10), ready = (int)(i % 10);
	ck_sbuf_printf(b, item_fmt, name, ns, uid, (unsigned long long)(100000 + i), gen, name,
	               name, rep, name, name, gen, rep, rep, ready, ready, name);
}

/* One Foo as the API server returns it once the daemon has reconciled it: created with
 * kubectl (client-side apply annotation not used: `kubectl create`), status written by
 * the daemon (observedGeneration, one Ready condition). Placeholders: name, namespace,
 * uid, resourceVersion, name (deploymentName), replicas x2. */
static const char foo_fmt[] =
    "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\",\"metadata\":{\"cre"
    "ationTimestamp\":\"2026-12-04T15:45:14Z\",\"generation\":1,\"managedFields\":[{\"apiVe"
    "rsion\":\"samplecontroller.k8s.io/v1alpha1\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{"
    "\"f:spec\":{\".\":{},\"f:deploymentName\":{},\"f:replicas\":{}}},\"manager\":\"kubectl-c"
    "reate\",\"operation\":\"Update\",\"time\":\"2026-12-04T15:45:14Z\"},{\"apiVersion\":\"s"
    "amplecontroller.k8s.io/v1alpha1\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:status\":"
    "{\".\":{},\"f:availableReplicas\":{},\"f:conditions\":{\".\":{},\"k:{\\\"type\\\":\\\"Ready"
    "\\\"}\":{\".\":{},\"f:lastTransitionTime\":{},\"f:message\":{},\"f:observedGeneration\":"
    "{},\"f:reason\":{},\"f:status\":{},\"f:type\":{}}},\"f:observedGeneration\":{}}},\"manage"
    "r\":\"sample-controller\",\"operation\":\"Update\",\"subresource\":\"status\",\"time\":"
    "\"2026-12-04T15:45:31Z\"}],\"name\":\"%s\",\"namespace\":\"%s\",\"resourceVersion\":\""
    "%llu\",\"uid\":\"%s\"},\"spec\":{\"deploymentName\":\"%s\",\"replicas\":%d},\"status\""
    ":{\"availableReplicas\":%d,\"conditions\":[{\"lastTransitionTime\":\"2026-12-04T15:45:31Z"
    "\",\"message\":\"Deployment has the desired available replicas\",\"observedGeneration\":1,"
    "\"reason\":\"DeploymentAvailable\",\"status\":\"True\",\"type\":\"Ready\"}],\"observedGen"
    "eration\":1}}";

static void make_foo(ck_sbuf_t *b, size_t i)
{
	char name[32], ns[32], uid[48];
	snprintf(name, sizeof(name), "foo-%05zu", i);
	snprintf(ns, sizeof(ns), "team-%03zu", i % 97);
	snprintf(uid, sizeof(uid), "%08zx-7d2e-4b1a-9c3f-%012zx", i * 2246822519u % 0xffffffffu, i);
	int rep = 1 + (int)(i % 3);
	ck_sbuf_printf(b, foo_fmt, name, ns, (unsigned long long)(300000 + i), uid, name, rep, rep);
}

/* Where the bytes of one cached object go: the fixed header, the kept-field slots,
 * then the strings and tables packed after them in the same allocation. */
static void budget(const char *what, const ck_obj_t *o)
{
	size_t str = 0, fstr = 0;
	const char *ids[] = {o->ns, o->name, o->uid, o->rv, o->creation_timestamp};
	for (size_t i = 0; i < CK_ARRAY_LEN(ids); i++)
		str += strlen(ids[i]) + 1;
	size_t lab = 0;
	for (size_t i = 0; i < o->nlabels; i++)
		lab += strlen(o->labels[i].key) + strlen(o->labels[i].value) + 2;
	size_t own = 0;
	for (size_t i = 0; i < o->nowners; i++)
		own += strlen(o->owners[i].api_version) + strlen(o->owners[i].kind) +
		       strlen(o->owners[i].name) + strlen(o->owners[i].uid) + 4;
	for (size_t i = 0; i < o->nfields; i++)
		if (o->fields[i].type == CK_VAL_STRING || o->fields[i].type == CK_VAL_JSON)
			fstr += strlen(o->fields[i].u.s) + 1;
	size_t total = ck_obj_size(o);
	size_t parts = sizeof(ck_obj_t) + o->nfields * sizeof(ck_val_t) +
	               o->nlabels * sizeof(ck_obj_kv_t) + o->nowners * sizeof(ck_obj_owner_t) +
	               str + lab + own + fstr;
	printf("  budget of one %s, %zu bytes (malloc usable %zu):\n", what, total,
	       malloc_usable_size((void *)o));
	char label[64];
	printf("    %-44s %4zu\n", "header (ck_obj_t)", sizeof(ck_obj_t));
	snprintf(label, sizeof(label), "kept-field slots, %u x %zu", o->nfields, sizeof(ck_val_t));
	printf("    %-44s %4zu\n", label, o->nfields * sizeof(ck_val_t));
	printf("    %-44s %4zu\n", "namespace, name, uid, rv, creation time", str);
	snprintf(label, sizeof(label), "labels: %u slots + text", o->nlabels);
	printf("    %-44s %4zu\n", label, o->nlabels * sizeof(ck_obj_kv_t) + lab);
	snprintf(label, sizeof(label), "ownerReferences: %u slots + text", o->nowners);
	printf("    %-44s %4zu\n", label, o->nowners * sizeof(ck_obj_owner_t) + own);
	printf("    %-44s %4zu\n", "kept string and JSON fields' text", fstr);
	printf("    %-44s %4zd\n", "alignment and padding", (ssize_t)total - (ssize_t)parts);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long maxrss_kib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

typedef struct sink {
	bool keep;
	ck_obj_t **objs;
	size_t n;
	size_t held, usable;
} sink_t;

static void on_object(void *ud, ck_obj_t *obj)
{
	sink_t *s = ud;
	if (s->keep) {
		s->held += ck_obj_size(obj);
		s->usable += malloc_usable_size(obj);
		s->objs[s->n] = obj;
	} else {
		ck_obj_unref(obj);
	}
	s->n++;
}

static void on_meta(void *ud, const char *rv, const char *cont, int64_t remaining) {}

static double decode(const ck_type_t *t, const ck_sbuf_t *in, sink_t *s)
{
	ck_dec_cb_t cb = {.on_object = on_object, .on_list_meta = on_meta};
	char *err = NULL;
	double t0 = now_s();
	ck_dec_t *d = ck_dec_new(t, CK_DEC_LIST, &cb, s, 0);
	for (size_t off = 0; off < in->len; off += 16384) {
		size_t n = in->len - off < 16384 ? in->len - off : 16384;
		if (ck_dec_feed(d, in->data + off, n, &err) != 0)
			ck_fatal("decode: %s", err);
	}
	if (ck_dec_finish(d, &err) != 0)
		ck_fatal("decode: %s", err);
	ck_dec_free(d);
	return now_s() - t0;
}

/* ---- yajl with no-op callbacks: the rate the decoder's own parser allows. --------------- */

static int nop_null(void *ud)
{
	return 1;
}
static int nop_bool(void *ud, int v)
{
	return 1;
}
static int nop_number(void *ud, const char *s, size_t n)
{
	return 1;
}
static int nop_string(void *ud, const unsigned char *s, size_t n)
{
	return 1;
}

static double yajl_nop(const ck_sbuf_t *in)
{
	/* Numbers as text, as the decoder asks for them (yajl_number, not integer/double). */
	static const yajl_callbacks nop = {
	    .yajl_null = nop_null,
	    .yajl_boolean = nop_bool,
	    .yajl_number = nop_number,
	    .yajl_string = nop_string,
	    .yajl_start_map = nop_null,
	    .yajl_map_key = nop_string,
	    .yajl_end_map = nop_null,
	    .yajl_start_array = nop_null,
	    .yajl_end_array = nop_null,
	};
	double t0 = now_s();
	yajl_handle h = yajl_alloc(&nop, NULL, NULL);
	for (size_t off = 0; off < in->len; off += 16384) {
		size_t n = in->len - off < 16384 ? in->len - off : 16384;
		if (yajl_parse(h, (const unsigned char *)in->data + off, n) != yajl_status_ok)
			ck_fatal("yajl: parse error");
	}
	if (yajl_complete_parse(h) != yajl_status_ok)
		ck_fatal("yajl: parse error at the end");
	yajl_free(h);
	return now_s() - t0;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 10000;
	ck_sbuf_t in = CK_SBUF_INIT;
	ck_sbuf_puts(&in, "{\"kind\":\"DeploymentList\",\"apiVersion\":\"apps/v1\",\"metadata\":"
	                  "{\"resourceVersion\":\"200000\",\"continue\":\"\"},\"items\":[");
	for (size_t i = 0; i < n; i++) {
		if (i)
			ck_sbuf_putc(&in, ',');
		make_item(&in, i);
	}
	ck_sbuf_puts(&in, "]}");
	printf("decode: DeploymentList of %zu items, %.1f MB, %.0f bytes per item\n", n,
	       (double)in.len / 1e6, (double)in.len / (double)n);

	/* Pass 1: objects dropped as they arrive: the decoder's own memory. */
	long rss0 = maxrss_kib();
	sink_t drop = {0};
	double best = 1e9;
	for (int r = 0; r < 5; r++) {
		drop.n = 0;
		double t = decode(&ck_type_deployment, &in, &drop);
		if (t < best)
			best = t;
	}
	long rss1 = maxrss_kib();
	double best_nop = 1e9;
	for (int r = 0; r < 5; r++) {
		double t = yajl_nop(&in);
		if (t < best_nop)
			best_nop = t;
	}
	printf("  speed (best of 5, one core): %.1f MB/s, %.0f objects/s\n",
	       (double)in.len / best / 1e6, (double)n / best);
	printf("  yajl with no-op callbacks, same input and chunks (best of 5): %.1f MB/s; "
	       "the decoder runs at %.0f%% of it\n",
	       (double)in.len / best_nop / 1e6, 100.0 * best_nop / best);
	printf("  peak RSS growth while decoding, objects dropped: %ld KiB (input buffer %zu KiB "
	       "not counted)\n",
	       rss1 - rss0, in.len / 1024);

	/* Pass 2: objects kept, as an informer's cache would (the sample-controller's
	 * descriptor, ck_type_deployment). */
	sink_t keep = {.keep = true, .objs = ck_xcalloc(n, sizeof(ck_obj_t *))};
	double t = decode(&ck_type_deployment, &in, &keep);
	long rss2 = maxrss_kib();
	printf("  kept: %zu objects decoded in %.3f s (%.1f MB/s)\n", keep.n, t,
	       (double)in.len / t / 1e6);
	printf("  bytes held per Deployment: %.0f (kobj_size), %.0f (malloc usable size)\n",
	       (double)keep.held / (double)n, (double)keep.usable / (double)n);
	printf("  peak RSS growth with objects kept: %ld KiB (%.0f bytes per object)\n",
	       rss2 - rss1, (double)(rss2 - rss1) * 1024.0 / (double)n);
	/* Not a speed assertion: a benchmark of a decoder that decodes wrongly is void. */
	for (size_t i = 0; i < keep.n; i++) {
		char name[32];
		int32_t rep;
		snprintf(name, sizeof(name), "app-%05zu", i);
		if (strcmp(keep.objs[i]->name, name) != 0 ||
		    !ck_deployment_spec_replicas(keep.objs[i], &rep) || rep != 1 + (int)(i % 10) ||
		    strcmp(ck_obj_label(keep.objs[i], "controller"), name) != 0 ||
		    ck_obj_controller_ref(keep.objs[i]) == NULL)
			ck_fatal("object %zu decoded wrongly", i);
		ck_obj_unref(keep.objs[i]);
	}

	/* Pass 3: ck_type_deployment_with_template, which keeps the pod template too. */
	sink_t tmpl = {.keep = true, .objs = keep.objs};
	decode(&ck_type_deployment_with_template, &in, &tmpl);
	size_t containers = 0;
	for (size_t i = 0; i < tmpl.n; i++) {
		const char *c = ck_deployment_template_containers_json(tmpl.objs[i]);
		if (c == NULL)
			ck_fatal("object %zu: no containers kept", i);
		containers += strlen(c) + 1;
		ck_obj_unref(tmpl.objs[i]);
	}
	printf("  with the pod template (ck_type_deployment_with_template): %.0f bytes per "
	       "Deployment, of which spec.template.spec.containers JSON %.0f\n",
	       (double)tmpl.held / (double)n, (double)containers / (double)n);
	/* The daemon's other cache: Foos, as its descriptor keeps them. */
	ck_sbuf_t foos = CK_SBUF_INIT;
	ck_sbuf_puts(&foos, "{\"kind\":\"FooList\",\"apiVersion\":\"samplecontroller.k8s.io/"
	                    "v1alpha1\",\"metadata\":{\"resourceVersion\":\"400000\"},\"items\":[");
	for (size_t i = 0; i < n; i++) {
		if (i)
			ck_sbuf_putc(&foos, ',');
		make_foo(&foos, i);
	}
	ck_sbuf_puts(&foos, "]}");
	sink_t kf = {.keep = true, .objs = keep.objs};
	decode(&foo_type, &foos, &kf);
	printf(
	    "  Foos: %.0f bytes of JSON each; bytes held per Foo: %.0f (kobj_size), %.0f (malloc "
	    "usable size)\n",
	    (double)foos.len / (double)n, (double)kf.held / (double)n,
	    (double)kf.usable / (double)n);

	/* Where the bytes go, for the first object of each. */
	sink_t one = {.keep = true, .objs = ck_xcalloc(n, sizeof(ck_obj_t *))};
	decode(&ck_type_deployment, &in, &one);
	budget("Deployment (ck_type_deployment)", one.objs[0]);
	budget("Foo (foo_type)", kf.objs[0]);
	for (size_t i = 0; i < n; i++) {
		ck_obj_unref(kf.objs[i]);
		ck_obj_unref(one.objs[i]);
	}
	free(one.objs);
	ck_sbuf_free(&foos);
	free(keep.objs);
	ck_sbuf_free(&in);
	return 0;
}
