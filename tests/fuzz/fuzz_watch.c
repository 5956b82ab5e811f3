/*
 * libFuzzer target for the watch stream's framing: a stream of newline-delimited
 * events decoded whole must give the same transcript of callbacks (and the same
 * error) as the same bytes split in two at EVERY byte offset. The HTTP layer hands
 * the decoder whatever a read returned, so a split can fall inside a key, a
 * multi-byte UTF-8 sequence, an escape, a number or the newline between events;
 * fuzz_decode.c covers random multi-chunk splits, this one every single split.
 *
 * Byte 0 picks the kind, byte 1 the object-size limit; the rest is the stream.
 * Inputs are short (-max_len=1024 in run_fuzz_watch.sh): the work is quadratic.
 */
#include <ckube/base.h>
#include <ckube/decode.h>
#include <ckube/status.h>
#include <ckube/types.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_object(void *ud, ck_obj_t *obj)
{
	ck_sbuf_printf(ud, "obj %s/%s rv=%s uid=%s gen=%lld n=%zu/%zu/%zu/%zu\n", obj->ns,
	               obj->name, obj->rv, obj->uid, (long long)obj->generation, obj->nlabels,
	               obj->nannotations, obj->nowners, obj->nfields);
	ck_obj_unref(obj);
}

static void on_meta(void *ud, const char *rv, const char *cont, int64_t remaining)
{
	ck_sbuf_printf(ud, "meta %s %s %lld\n", rv, cont, (long long)remaining);
}

static void on_event(void *ud, ck_watch_type_t t, ck_obj_t *obj, const ck_status_t *st)
{
	ck_sbuf_printf(ud, "event %s\n", ck_watch_type_name(t));
	if (obj != NULL)
		on_object(ud, obj);
	if (st != NULL)
		ck_sbuf_printf(ud, "st %d %s %s %d\n", st->code, st->reason ? st->reason : "-",
		               st->message ? st->message : "-", st->retry_after_seconds);
}

static const ck_dec_cb_t cbs = {on_object, on_meta, on_event};

/* Decodes buf in (at most) two feeds split at cut; the transcript goes to out. */
static void run(const ck_type_t *t, size_t max, const char *buf, size_t len, size_t cut,
                ck_sbuf_t *out)
{
	ck_dec_t *d = ck_dec_new(t, CK_DEC_WATCH, &cbs, out, max);
	char *err = NULL;
	int rc = ck_dec_feed(d, buf, cut, &err);
	if (rc == 0 && cut < len)
		rc = ck_dec_feed(d, buf + cut, len - cut, &err);
	if (rc == 0)
		rc = ck_dec_finish(d, &err);
	/* The excerpt shows the bytes yajl had at hand, which depend on the split. */
	char *near = err ? strstr(err, " (near \"") : NULL;
	if (near != NULL)
		*near = '\0';
	ck_sbuf_printf(out, "rc %d %s bytes %llu\n", rc, err ? err : "",
	               rc == 0 ? (unsigned long long)ck_dec_bytes(d) : 0ULL);
	free(err);
	ck_dec_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	static const ck_type_t *const kinds[] = {&ck_type_deployment, &ck_type_event,
	                                         &ck_type_lease};
	const ck_type_t *t = kinds[data[0] % 3];
	size_t max = data[1] < 128 ? 0 : (size_t)data[1] * 8; /* 0 = the default limit */
	const char *buf = (const char *)data + 2;
	size_t len = size - 2;

	ck_sbuf_t whole = CK_SBUF_INIT, split = CK_SBUF_INIT;
	run(t, max, buf, len, len, &whole);
	for (size_t cut = 0; cut < len; cut++) {
		ck_sbuf_reset(&split);
		run(t, max, buf, len, cut, &split);
		if (strcmp(ck_sbuf_cstr(&whole), ck_sbuf_cstr(&split)) != 0) {
			fprintf(stderr, "split at %zu of %zu differs\nwhole:\n%s\nsplit:\n%s\n",
			        cut, len, ck_sbuf_cstr(&whole), ck_sbuf_cstr(&split));
			__builtin_trap();
		}
	}
	ck_sbuf_free(&whole);
	ck_sbuf_free(&split);
	return 0;
}
