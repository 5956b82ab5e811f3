/*
 * libFuzzer target for the streaming decoder and ck_status_parse.
 *
 * Input: byte 0 picks the mode (OBJECT/LIST/WATCH) and the kind, byte 1 the
 * object-size limit, bytes 2-3 seed the chunking; the rest is the JSON. Each
 * input is decoded twice, whole and in random chunks, and the two transcripts of
 * callbacks (and error) must be identical: a chunk may end anywhere.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_GNU_SOURCE -I. \
 *     tests/fuzz/fuzz_decode.c pkg/base/base.c pkg/meta/obj.c pkg/codec/decode.c \
 *     pkg/meta/status.c pkg/codec/status_parse.c pkg/kinds/types.c -lyajl -pthread -o fuzz_decode
 *   mkdir -p corpus && cp tests/fixtures/json/*.json corpus/   # seeds need the 4-byte header
 *   ./fuzz_decode -max_len=65536 corpus
 * (bash tests/fuzz/run_fuzz_decode.sh does all of this.)
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

static void dump(ck_sbuf_t *o, const ck_obj_t *obj)
{
	ck_sbuf_printf(o, "obj %s|%s|%s|%s|%lld|%s|%s\n", obj->ns, obj->name, obj->uid, obj->rv,
	               (long long)obj->generation, obj->creation_timestamp,
	               obj->deletion_timestamp ? obj->deletion_timestamp : "-");
	for (size_t i = 0; i < obj->nlabels; i++)
		ck_sbuf_printf(o, "l %s=%s\n", obj->labels[i].key, obj->labels[i].value);
	for (size_t i = 0; i < obj->nannotations; i++)
		ck_sbuf_printf(o, "a %s=%s\n", obj->annotations[i].key, obj->annotations[i].value);
	for (size_t i = 0; i < obj->nowners; i++)
		ck_sbuf_printf(o, "o %s %s %s %s %d %d\n", obj->owners[i].api_version,
		               obj->owners[i].kind, obj->owners[i].name, obj->owners[i].uid,
		               obj->owners[i].controller, obj->owners[i].block_owner_deletion);
	for (size_t i = 0; i < obj->nfields; i++) {
		const ck_val_t *v = ck_obj_field(obj, i);
		switch (v->type) {
		case CK_VAL_BOOL:
			ck_sbuf_printf(o, "f%zu b %d\n", i, v->u.b);
			break;
		case CK_VAL_INT:
			ck_sbuf_printf(o, "f%zu i %lld\n", i, (long long)v->u.i);
			break;
		case CK_VAL_DOUBLE:
			ck_sbuf_printf(o, "f%zu d %.17g\n", i, v->u.d);
			break;
		case CK_VAL_STRING:
		case CK_VAL_JSON:
			ck_sbuf_printf(o, "f%zu s %s\n", i, v->u.s);
			break;
		default:
			ck_sbuf_printf(o, "f%zu t %d\n", i, (int)v->type);
			break;
		}
	}
	/* Touch the lookups too. */
	if (obj->nlabels > 0 && ck_obj_label(obj, obj->labels[0].key) == NULL)
		__builtin_trap();
	char key[16];
	ck_obj_key(obj, key, sizeof(key));
	free(ck_obj_key_dup(obj));
	ck_sbuf_printf(o, "size %zu\n", ck_obj_size(obj));
}

static void on_object(void *ud, ck_obj_t *obj)
{
	dump(ud, obj);
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
		ck_sbuf_printf(ud, "st %d %s %s %s %d %s\n", st->code,
		               st->reason ? st->reason : "-", st->message ? st->message : "-",
		               st->status ? st->status : "-", st->retry_after_seconds,
		               st->causes ? st->causes : "-");
}

static const ck_dec_cb_t cbs = {on_object, on_meta, on_event};

static void run(const ck_type_t *t, ck_dec_mode_t mode, size_t max, const char *buf, size_t len,
                uint32_t seed, ck_sbuf_t *out)
{
	ck_dec_t *d = ck_dec_new(t, mode, &cbs, out, max);
	char *err = NULL;
	size_t at = 0;
	int rc = 0;
	while (at < len && rc == 0) {
		size_t n = len - at;
		if (seed != 0) {
			seed = seed * 1103515245u + 12345u;
			size_t c = 1 + (seed >> 16) % 64;
			n = c < n ? c : n;
		}
		rc = ck_dec_feed(d, buf + at, n, &err);
		at += n;
	}
	if (rc == 0)
		rc = ck_dec_finish(d, &err);
	/* The excerpt shows the bytes yajl had at hand, which depend on the chunking. */
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
	if (size < 4)
		return 0;
	static const ck_type_t *const kinds[] = {&ck_type_deployment, &ck_type_event,
	                                         &ck_type_lease};
	ck_dec_mode_t mode = (ck_dec_mode_t)(data[0] % 3);
	const ck_type_t *t = kinds[(data[0] / 3) % 3];
	size_t max = data[1] < 128 ? 0 : (size_t)data[1] * 8; /* 0 = the default limit */
	uint32_t seed = (uint32_t)data[2] << 8 | data[3] | 1u;
	const char *buf = (const char *)data + 4;
	size_t len = size - 4;

	ck_sbuf_t whole = CK_SBUF_INIT, chunked = CK_SBUF_INIT;
	run(t, mode, max, buf, len, 0, &whole);
	run(t, mode, max, buf, len, seed, &chunked);
	if (strcmp(ck_sbuf_cstr(&whole), ck_sbuf_cstr(&chunked)) != 0) {
		fprintf(stderr, "whole:\n%s\nchunked:\n%s\n", ck_sbuf_cstr(&whole),
		        ck_sbuf_cstr(&chunked));
		__builtin_trap();
	}
	ck_sbuf_free(&whole);
	ck_sbuf_free(&chunked);

	ck_status_t st = {0};
	ck_status_parse(buf, len, 500, &st);
	ck_status_is_gone(&st);
	ck_status_is_rv_too_large(&st);
	ck_status_has_cause(&st, "NamespaceTerminating");
	ck_status_clear(&st);
	return 0;
}
