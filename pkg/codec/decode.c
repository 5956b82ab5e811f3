/*
 * decode: streaming JSON -> ck_obj_t with yajl callbacks.
 *
 * Design note. yajl tokenises and calls us per token; it keeps a partial token
 * (a string, a number, a UTF-8 sequence cut by a chunk boundary) in its own
 * buffer, so we feed it chunks exactly as they arrive. We keep:
 *
 *   - a stack of frames, one per JSON container we care about, each with a
 *     context (list, item, metadata, labels, ownerReferences, a node of the
 *     kind's field trie, a Status's details, ...);
 *   - the meaning of the last map key ("pending key"), which tells what the next
 *     value is for;
 *   - a skip counter: a value nobody wants (managedFields, spec.template, ...) is
 *     skipped by counting brackets, with no frame and no allocation;
 *   - a capture writer: a kept path naming an object or array is re-serialised as
 *     compact JSON into a buffer, then stored as CK_VAL_JSON.
 *
 * Scalars at kept paths go straight into a kobj_builder, which packs one object
 * into one allocation when its closing brace arrives.
 *
 * Memory bound: the input is fed to yajl in slices that never let the current
 * "unit" grow past max_object_bytes, so neither yajl's token buffer nor our own
 * buffers can outgrow the limit by more than a constant. A unit is an object (a
 * list item), a watch event, a List's metadata, a value skipped outside those
 * (an unknown field of a List), or else one token with the blanks before it.
 * Every unit starts at or after the end of the previous token, so a unit never
 * starts before the one whose budget cut the current slice: the budget only
 * grows inside a slice, and the offset of a size error is the unit's start plus
 * the limit, however the input was chunked. Depth is bounded apart
 * (CK_DEC_MAX_DEPTH): a unit of max_object_bytes of '[' would otherwise push that
 * many levels on yajl's stack, and twice that on the capture stack.
 *
 * Watch events: "type" normally precedes "object", but if it does not, the object
 * is decoded both as a kind object and as a metav1.Status (the two share no
 * buffers), annotations are kept, and the choice is made at the event's closing
 * brace.
 */
#include <ckube/decode.h>

#include "pkg/codec/decode_internal.h"
#include "pkg/codec/syntax.h"
#include "pkg/meta/obj_internal.h"
#include <ckube/base.h>

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

/* Contexts of structural frames. Arrays: C_ITEMS, C_OWNERS, C_FINALIZERS, C_CAUSES. */
enum {
	C_LIST,      /* a List's top-level map */
	C_LIST_META, /* the List's metadata */
	C_ITEMS,     /* the List's items array */
	C_EVENT,     /* a watch event's map */
	C_OBJ,       /* an object's top-level map */
	C_META,      /* the object's metadata */
	C_LABELS,
	C_ANNOTS,
	C_OWNERS,
	C_OWNER,
	C_FINALIZERS, /* metadata.finalizers */
	C_NODE,       /* a map at an inner node of the field trie */
	C_DETAILS,    /* Status.details */
	C_CAUSES,     /* Status.details.causes */
	C_CAUSE,
};

/* What the value after the last map key is for. */
enum {
	PK_NONE, /* nothing: skip it */
	PK_LIST_META,
	PK_ITEMS,
	PK_LM_RV,
	PK_LM_CONT,
	PK_LM_REMAIN,
	PK_EV_TYPE,
	PK_EV_OBJECT,
	PK_META,
	PK_META_STR, /* sub: index into meta_keys */
	PK_GEN,
	PK_LABELS,
	PK_ANNOTS,
	PK_LABEL_VAL,
	PK_ANNOT_VAL,
	PK_OWNERS,
	PK_OWNER_STR,  /* sub: index into owner_keys */
	PK_OWNER_BOOL, /* sub: 0 controller, 1 blockOwnerDeletion */
	PK_FINALIZERS,
	PK_NODE,  /* node: trie node (or -1); st: Status field (or ST_NONE) */
	PK_D_STR, /* sub: 0 name, 1 kind, 2 group */
	PK_D_RETRY,
	PK_D_CAUSES,
	PK_CAUSE_REASON,
};

/* Top-level fields of a metav1.Status. */
enum { ST_NONE, ST_KIND, ST_CODE, ST_STATUS, ST_REASON, ST_MESSAGE, ST_DETAILS };

static const char *const meta_keys[] = {
    "namespace", "name", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
};
static const char *const owner_keys[] = {"apiVersion", "kind", "name", "uid"};

typedef struct frame {
	uint8_t ctx;
	int32_t node;
} frame_t;

/* The kind's kept paths as a trie of path segments. */
typedef struct tnode {
	const char *seg;
	size_t len;
	int32_t field; /* index into type->fields when a path ends here, else -1 */
	int32_t child; /* first child, or -1 */
	int32_t next;  /* next sibling, or -1 */
} tnode_t;

/* What the current unit is, for the size limit and its message. */
enum {
	U_NONE,     /* a token outside any of the below, with the blanks before it */
	U_OBJECT,   /* an object, a list item */
	U_EVENT,    /* a watch event */
	U_LISTMETA, /* a List's metadata */
	U_SKIPPED,  /* a value skipped outside any of the above */
};

static const char *const unit_names[] = {
    "value outside any object", "object", "watch event", "list metadata", "skipped value",
};

/* A capture level: is it a map, and has it had an element yet. */
typedef struct caplvl {
	bool map;
	bool first;
} caplvl_t;

struct ck_dec {
	const ck_type_t *type;
	ck_dec_mode_t mode;
	const ck_dec_cb_t *cb;
	void *ud;
	size_t max;
	bool status_only; /* ck_dec_i_status_parse: the object is a Status, build no kobj */

	yajl_handle h;
	uint64_t slice_base; /* absolute offset of the slice being parsed */
	uint64_t total;      /* bytes consumed so far */
	uint64_t unit_start; /* where the current unit began (see the design note) */
	uint8_t unit;        /* U_NONE, ... */
	size_t depth;        /* containers open, at most CK_DEC_MAX_DEPTH */
	uint64_t last_top_end;
	uint64_t good_end;    /* where the last token accepted ended */
	bool pending_garbage; /* WATCH: non-blank bytes after the last event */
	bool dead, finished;
	char *err;
	unsigned char tail[24]; /* the last bytes before the slice, for error excerpts */
	size_t ntail;

	tnode_t *nodes;
	size_t nnodes;
	int32_t meta_node; /* trie node for "metadata", or -1 */
	/* The kept field "metadata.finalizers" of a descriptor that lists it, or -1:
	 * finalizers are always kept in ck_obj_t, and also written to that field as
	 * JSON text (finbuf), as the descriptor asks. */
	int32_t fin_field;
	ck_sbuf_t finbuf;
	size_t nfins;

	frame_t *frames;
	size_t nframes, capframes;
	uint8_t pk, sub, pst;
	int32_t pnode;
	size_t skip;

	caplvl_t caps[CK_DEC_MAX_DEPTH]; /* the depth limit bounds the capture too */
	size_t ncaps;
	int32_t cap_field;
	ck_sbuf_t capbuf;

	ck_obj_builder_t *b;
	bool want_kobj, want_status, keep_annots;
	size_t nlabels, nannots, nowners;
	ck_sbuf_t key; /* the current label/annotation key */

	/* CK_DEC_LIST */
	ck_sbuf_t lm_rv, lm_cont;
	int64_t lm_remain;
	bool lm_emitted;

	/* CK_DEC_WATCH */
	int ev_type; /* -1 until seen */
	bool ev_have_obj;

	/* Status of a watch ERROR event or of ck_dec_i_status_parse. */
	ck_status_t st;
	bool st_kind_ok;
	bool st_seen_obj;
};

static const char *const watch_names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

const char *ck_watch_type_name(ck_watch_type_t t)
{
	if ((size_t)t < CK_ARRAY_LEN(watch_names))
		return watch_names[t];
	return "UNKNOWN";
}

/* ---- helpers ---- */

#define KEYIS(k, l, lit) ((l) == sizeof(lit) - 1 && memcmp((k), (lit), sizeof(lit) - 1) == 0)

static uint64_t pos(const ck_dec_t *d)
{
	return d->slice_base + yajl_get_bytes_consumed(d->h);
}

/* Records a decoding error and returns 0, which makes yajl stop. */
static int fail(ck_dec_t *d, const char *fmt, ...) CK_PRINTF(2, 3);
static int fail(ck_dec_t *d, const char *fmt, ...)
{
	if (d->err == NULL) {
		va_list ap;
		va_start(ap, fmt);
		char *msg = ck_xvasprintf(fmt, ap);
		va_end(ap);
		d->err = ck_xasprintf("%s at byte %llu", msg, (unsigned long long)pos(d));
		free(msg);
	}
	return 0;
}

static int32_t trie_child(const ck_dec_t *d, int32_t node, const unsigned char *k, size_t l)
{
	if (node < 0)
		return -1;
	for (int32_t c = d->nodes[node].child; c >= 0; c = d->nodes[c].next)
		if (d->nodes[c].len == l && memcmp(d->nodes[c].seg, k, l) == 0)
			return c;
	return -1;
}

static int32_t trie_add(ck_dec_t *d, int32_t parent, const char *seg, size_t len)
{
	int32_t c = trie_child(d, parent, (const unsigned char *)seg, len);
	if (c >= 0)
		return c;
	tnode_t *n = &d->nodes[d->nnodes];
	n->seg = seg;
	n->len = len;
	n->field = -1;
	n->child = -1;
	n->next = d->nodes[parent].child;
	d->nodes[parent].child = (int32_t)d->nnodes;
	return (int32_t)d->nnodes++;
}

/* Builds the trie of the kind's dotted paths. Node 0 is the object's root. */
static void trie_build(ck_dec_t *d)
{
	size_t cap = 1;
	for (size_t i = 0; i < d->type->nfields; i++)
		cap += strlen(d->type->fields[i]) + 1; /* a bound on the segments */
	d->nodes = ck_xcalloc(cap, sizeof(*d->nodes));
	d->nodes[0] = (tnode_t){"", 0, -1, -1, -1};
	d->nnodes = 1;
	for (size_t i = 0; i < d->type->nfields; i++) {
		const char *p = d->type->fields[i];
		int32_t n = 0;
		for (;;) {
			const char *dot = strchr(p, '.');
			size_t len = dot ? (size_t)(dot - p) : strlen(p);
			n = trie_add(d, n, p, len);
			if (dot == NULL)
				break;
			p = dot + 1;
		}
		/* With nested kept paths ("spec" and "spec.replicas"), the first wins. */
		if (d->nodes[n].field < 0 && d->nodes[n].child < 0)
			d->nodes[n].field = (int32_t)i;
	}
	d->meta_node = trie_child(d, 0, (const unsigned char *)"metadata", 8);
	int32_t fin = trie_child(d, d->meta_node, (const unsigned char *)"finalizers", 10);
	d->fin_field = fin >= 0 ? d->nodes[fin].field : -1;
}

static void push(ck_dec_t *d, uint8_t ctx, int32_t node)
{
	if (d->nframes == d->capframes) {
		d->capframes = d->capframes ? d->capframes * 2 : 16;
		d->frames = ck_xrealloc(d->frames, d->capframes * sizeof(*d->frames));
	}
	d->frames[d->nframes++] = (frame_t){ctx, node};
}

static frame_t *top(ck_dec_t *d)
{
	return &d->frames[d->nframes - 1];
}

static bool ctx_is_array(uint8_t c)
{
	return c == C_ITEMS || c == C_OWNERS || c == C_FINALIZERS || c == C_CAUSES;
}

/* An integer JSON number; false if it has a fraction/exponent or overflows. */
static bool parse_int(const char *s, size_t l, int64_t *out)
{
	return ck_codec_i_parse_int(s, l, out) == CK_CODEC_INT_OK;
}

static double parse_double(const char *s, size_t l)
{
	char tmp[64];
	char *heap = NULL, *p = tmp;
	if (l >= sizeof(tmp))
		p = heap = ck_xmalloc(l + 1);
	memcpy(p, s, l);
	p[l] = '\0';
	double v = strtod(p, NULL);
	free(heap);
	return v;
}

static void set_str(char **dst, const unsigned char *s, size_t l)
{
	free(*dst);
	*dst = ck_xstrndup((const char *)s, l);
}

/* ---- units, objects, events ---- */

/* Starts a unit at the '{' or '[' just read; only ever called outside a unit. */
static void unit_begin(ck_dec_t *d, uint8_t unit)
{
	d->unit_start = pos(d) - 1;
	d->unit = unit;
}

static void unit_end(ck_dec_t *d)
{
	d->unit_start = pos(d);
	d->unit = U_NONE;
}

/*
 * Called for every token. Remembers where the last good token ended: yajl's own
 * error offsets move with chunk boundaries, this one does not. Outside a unit
 * the size limit applies to each token alone: a huge string there is refused, a
 * long list of items is not.
 *
 * Scalars and keys inside a skipped value (managedFields: half the bytes of a
 * typical object) do not come here: yajl_get_bytes_consumed is a call into the
 * library per token, and dropping it there makes the decoder 5% faster
 * (bench/bench_decode.sh: 79% -> 84% of yajl with no-op callbacks). Brackets
 * still do, so an error inside a skipped value is reported after its last good
 * bracket: still a fixed offset, whatever the chunking.
 */
static inline void token_seen(ck_dec_t *d)
{
	uint64_t p = pos(d);
	d->good_end = p;
	if (d->unit == U_NONE)
		d->unit_start = p;
}

static void object_begin(ck_dec_t *d)
{
	d->nlabels = d->nannots = d->nowners = d->nfins = 0;
	if (d->want_kobj)
		ck_obj_builder_reset(d->b);
	if (d->want_status) {
		ck_status_clear(&d->st);
		d->st_kind_ok = false;
	}
}

static void emit_list_meta(ck_dec_t *d)
{
	if (d->lm_emitted)
		return;
	d->lm_emitted = true;
	if (d->cb->on_list_meta)
		d->cb->on_list_meta(d->ud, ck_sbuf_cstr(&d->lm_rv), ck_sbuf_cstr(&d->lm_cont),
		                    d->lm_remain);
}

static void emit_object(ck_dec_t *d)
{
	ck_obj_t *o = ck_obj_builder_finish(d->b);
	if (d->cb->on_object)
		d->cb->on_object(d->ud, o);
	else
		ck_obj_unref(o);
}

static void event_begin(ck_dec_t *d)
{
	d->ev_type = -1;
	d->ev_have_obj = false;
}

static void event_object_begin(ck_dec_t *d)
{
	bool known = d->ev_type >= 0;
	d->want_kobj = !known || d->ev_type != CK_WATCH_ERROR;
	d->want_status = !known || d->ev_type == CK_WATCH_ERROR;
	d->keep_annots = d->type->keep_annotations || !known || d->ev_type == CK_WATCH_BOOKMARK;
	object_begin(d);
}

static int event_end(ck_dec_t *d)
{
	if (d->ev_type < 0)
		return fail(d, "watch event without a \"type\"");
	ck_watch_type_t t = (ck_watch_type_t)d->ev_type;
	if (t == CK_WATCH_ERROR) {
		/* want_status was set when the object began (the type was unknown, or ERROR);
		 * without an object the Status is empty, which still ends the watch. */
		if (!d->ev_have_obj || !d->want_status)
			ck_status_clear(&d->st);
		if (d->cb->on_event)
			d->cb->on_event(d->ud, t, NULL, &d->st);
		ck_status_clear(&d->st);
		return 1;
	}
	if (!d->ev_have_obj || !d->want_kobj)
		return fail(d, "watch event %s without an object", ck_watch_type_name(t));
	if (!d->type->keep_annotations && t != CK_WATCH_BOOKMARK)
		ck_obj_builder_clear_annotations(d->b);
	ck_obj_t *o = ck_obj_builder_finish(d->b);
	if (d->cb->on_event)
		d->cb->on_event(d->ud, t, o, NULL);
	else
		ck_obj_unref(o);
	return 1;
}

/* ---- the capture writer ---- */

static void cap_sep(ck_dec_t *d)
{
	caplvl_t *l = &d->caps[d->ncaps - 1];
	if (!l->map) {
		if (!l->first)
			ck_sbuf_putc(&d->capbuf, ',');
		l->first = false;
	}
}

/* cb_start checked the depth, so the fixed capture stack has room. */
static void cap_open(ck_dec_t *d, bool map)
{
	if (d->ncaps > 0)
		cap_sep(d);
	ck_sbuf_putc(&d->capbuf, map ? '{' : '[');
	if (d->ncaps == CK_ARRAY_LEN(d->caps))
		ck_fatal("decode: capture deeper than the depth limit");
	d->caps[d->ncaps++] = (caplvl_t){map, true};
}

static void cap_close(ck_dec_t *d)
{
	caplvl_t *l = &d->caps[--d->ncaps];
	ck_sbuf_putc(&d->capbuf, l->map ? '}' : ']');
	if (d->ncaps == 0) {
		ck_obj_builder_set_field(d->b, (size_t)d->cap_field, CK_VAL_JSON, false, 0, 0,
		                         ck_sbuf_cstr(&d->capbuf), d->capbuf.len);
		ck_sbuf_reset(&d->capbuf);
	}
}

static void cap_key(ck_dec_t *d, const unsigned char *k, size_t l)
{
	caplvl_t *lv = &d->caps[d->ncaps - 1];
	if (!lv->first)
		ck_sbuf_putc(&d->capbuf, ',');
	lv->first = false;
	ck_sbuf_put_json_strn(&d->capbuf, (const char *)k, l);
	ck_sbuf_putc(&d->capbuf, ':');
}

/* ---- scalars ---- */

enum { V_NULL, V_BOOL, V_NUM, V_STR };

typedef struct sval {
	int kind;
	bool b;
	const unsigned char *s; /* V_NUM: number text; V_STR: unescaped string */
	size_t l;
} sval_t;

static void set_kval(ck_dec_t *d, int32_t field, const sval_t *v)
{
	size_t i = (size_t)field;
	switch (v->kind) {
	case V_NULL:
		ck_obj_builder_set_field(d->b, i, CK_VAL_NULL, false, 0, 0, NULL, 0);
		break;
	case V_BOOL:
		ck_obj_builder_set_field(d->b, i, CK_VAL_BOOL, v->b, 0, 0, NULL, 0);
		break;
	case V_NUM: {
		int64_t n;
		if (parse_int((const char *)v->s, v->l, &n))
			ck_obj_builder_set_field(d->b, i, CK_VAL_INT, false, n, 0, NULL, 0);
		else
			ck_obj_builder_set_field(d->b, i, CK_VAL_DOUBLE, false, 0,
			                         parse_double((const char *)v->s, v->l), NULL, 0);
		break;
	}
	case V_STR:
		ck_obj_builder_set_field(d->b, i, CK_VAL_STRING, false, 0, 0, (const char *)v->s,
		                         v->l);
		break;
	}
}

static bool sval_int(const sval_t *v, int64_t *out)
{
	return v->kind == V_NUM && parse_int((const char *)v->s, v->l, out);
}

static void status_scalar(ck_dec_t *d, const sval_t *v)
{
	int64_t n;
	switch (d->pst) {
	case ST_KIND:
		if (v->kind == V_STR)
			d->st_kind_ok = KEYIS(v->s, v->l, "Status");
		break;
	case ST_CODE:
		if (sval_int(v, &n) && n >= INT_MIN && n <= INT_MAX)
			d->st.code = (int)n;
		break;
	case ST_STATUS:
		if (v->kind == V_STR)
			set_str(&d->st.status, v->s, v->l);
		break;
	case ST_REASON:
		if (v->kind == V_STR)
			set_str(&d->st.reason, v->s, v->l);
		break;
	case ST_MESSAGE:
		if (v->kind == V_STR)
			set_str(&d->st.message, v->s, v->l);
		break;
	default:
		break;
	}
}

/* One string of metadata.finalizers: into the object, and into the kept field's
 * text when the descriptor also lists "metadata.finalizers". */
static int add_finalizer(ck_dec_t *d, const sval_t *v)
{
	if (++d->nfins > 65535)
		return fail(d, "too many finalizers");
	ck_obj_builder_add_finalizer(d->b, (const char *)v->s, v->l);
	if (d->fin_field >= 0) {
		if (d->nfins > 1)
			ck_sbuf_putc(&d->finbuf, ',');
		ck_sbuf_put_json_strn(&d->finbuf, (const char *)v->s, v->l);
	}
	return 1;
}

static int on_scalar(ck_dec_t *d, const sval_t *v)
{
	if (d->nframes == 0) {
		if (d->mode == CK_DEC_WATCH)
			return fail(d, "watch event is not a JSON object");
		return fail(d, "expected a JSON object");
	}
	frame_t *f = top(d);
	if (ctx_is_array(f->ctx)) {
		if (f->ctx == C_ITEMS && v->kind != V_NULL)
			return fail(d, "list item is not a JSON object");
		if (f->ctx == C_FINALIZERS && v->kind == V_STR)
			return add_finalizer(d, v);
		return 1;
	}
	int64_t n;
	switch (d->pk) {
	case PK_LM_RV:
		if (v->kind == V_STR) {
			ck_sbuf_reset(&d->lm_rv);
			ck_sbuf_append(&d->lm_rv, v->s, v->l);
		}
		break;
	case PK_LM_CONT:
		if (v->kind == V_STR) {
			ck_sbuf_reset(&d->lm_cont);
			ck_sbuf_append(&d->lm_cont, v->s, v->l);
		}
		break;
	case PK_LM_REMAIN:
		if (sval_int(v, &n))
			d->lm_remain = n;
		break;
	case PK_EV_TYPE: {
		if (v->kind != V_STR)
			return fail(d, "watch event type is not a string");
		for (size_t i = 0; i < CK_ARRAY_LEN(watch_names); i++) {
			if (v->l == strlen(watch_names[i]) &&
			    memcmp(v->s, watch_names[i], v->l) == 0) {
				d->ev_type = (int)i;
				return 1;
			}
		}
		return fail(d, "unknown watch event type \"%.*s\"", (int)(v->l > 64 ? 64 : v->l),
		            (const char *)v->s);
	}
	case PK_META_STR:
		if (v->kind == V_STR)
			ck_obj_builder_set_meta(d->b, meta_keys[d->sub], (const char *)v->s, v->l);
		break;
	case PK_GEN:
		if (sval_int(v, &n))
			ck_obj_builder_set_generation(d->b, n);
		break;
	case PK_LABEL_VAL:
		if (v->kind != V_STR)
			break;
		if (++d->nlabels > 65535)
			return fail(d, "too many labels");
		ck_obj_builder_add_label(d->b, d->key.data, d->key.len, (const char *)v->s, v->l);
		break;
	case PK_ANNOT_VAL:
		if (v->kind != V_STR)
			break;
		if (++d->nannots > 65535)
			return fail(d, "too many annotations");
		ck_obj_builder_add_annotation(d->b, d->key.data, d->key.len, (const char *)v->s,
		                              v->l);
		break;
	case PK_OWNER_STR:
		if (v->kind == V_STR)
			ck_obj_builder_set_owner(d->b, owner_keys[d->sub], (const char *)v->s,
			                         v->l);
		break;
	case PK_FINALIZERS: /* null or a scalar where the list belongs */
		if (d->fin_field >= 0)
			set_kval(d, d->fin_field, v);
		break;
	case PK_OWNER_BOOL:
		if (v->kind == V_BOOL)
			ck_obj_builder_set_owner_bool(
			    d->b, d->sub ? "blockOwnerDeletion" : "controller", v->b);
		break;
	case PK_NODE:
		if (d->pnode >= 0 && d->nodes[d->pnode].field >= 0)
			set_kval(d, d->nodes[d->pnode].field, v);
		if (d->pst != ST_NONE)
			status_scalar(d, v);
		break;
	case PK_D_STR:
		if (v->kind == V_STR) {
			char **dst[] = {&d->st.details_name, &d->st.details_kind,
			                &d->st.details_group};
			set_str(dst[d->sub], v->s, v->l);
		}
		break;
	case PK_D_RETRY:
		if (sval_int(v, &n) && n >= 0 && n <= INT_MAX)
			d->st.retry_after_seconds = (int)n;
		break;
	case PK_CAUSE_REASON:
		if (v->kind == V_STR) {
			ck_sbuf_t c = CK_SBUF_INIT;
			if (d->st.causes != NULL) {
				ck_sbuf_puts(&c, d->st.causes);
				ck_sbuf_putc(&c, ',');
			}
			ck_sbuf_append(&c, v->s, v->l);
			free(d->st.causes);
			d->st.causes = ck_sbuf_steal(&c);
		}
		break;
	default:
		break;
	}
	return 1;
}

/* ---- containers ---- */

/*
 * Skips the container just opened. Outside a unit (an unknown field of a List)
 * the skipped value becomes one, so that it too is bounded by the limit.
 */
static void skip_begin(ck_dec_t *d)
{
	d->skip = 1;
	if (d->unit == U_NONE)
		unit_begin(d, U_SKIPPED);
}

static int on_open(ck_dec_t *d, bool map)
{
	if (d->nframes == 0) {
		if (!map)
			return fail(d, d->mode == CK_DEC_WATCH ? "watch event is not a JSON object"
			                                       : "expected a JSON object");
		switch (d->mode) {
		case CK_DEC_OBJECT:
			push(d, C_OBJ, 0);
			unit_begin(d, U_OBJECT);
			d->want_kobj = !d->status_only;
			d->want_status = d->status_only;
			d->keep_annots = d->type->keep_annotations;
			d->st_seen_obj = true;
			object_begin(d);
			break;
		case CK_DEC_LIST:
			push(d, C_LIST, -1);
			break;
		case CK_DEC_WATCH:
			push(d, C_EVENT, -1);
			unit_begin(d, U_EVENT);
			event_begin(d);
			break;
		}
		return 1;
	}
	frame_t *f = top(d);
	if (ctx_is_array(f->ctx)) {
		if (!map) {
			if (f->ctx == C_ITEMS)
				return fail(d, "list item is not a JSON object");
			skip_begin(d);
			return 1;
		}
		switch (f->ctx) {
		case C_ITEMS:
			push(d, C_OBJ, 0);
			unit_begin(d, U_OBJECT);
			d->want_kobj = true;
			d->want_status = false;
			d->keep_annots = d->type->keep_annotations;
			object_begin(d);
			break;
		case C_OWNERS:
			if (++d->nowners > 65535)
				return fail(d, "too many ownerReferences");
			push(d, C_OWNER, -1);
			ck_obj_builder_add_owner(d->b);
			break;
		case C_CAUSES:
			push(d, C_CAUSE, -1);
			break;
		default: /* an object among the finalizers: not one, skipped */
			skip_begin(d);
			break;
		}
		return 1;
	}
	switch (d->pk) {
	case PK_LIST_META:
		if (map) {
			push(d, C_LIST_META, -1);
			unit_begin(d, U_LISTMETA);
		} else {
			skip_begin(d);
		}
		break;
	case PK_ITEMS:
		if (!map)
			push(d, C_ITEMS, -1);
		else
			skip_begin(d);
		break;
	case PK_EV_OBJECT:
		if (map) {
			push(d, C_OBJ, 0);
			event_object_begin(d);
		} else {
			skip_begin(d);
		}
		break;
	case PK_META:
		if (map)
			push(d, C_META, d->meta_node);
		else
			skip_begin(d);
		break;
	case PK_LABELS:
		if (map)
			push(d, C_LABELS, -1);
		else
			skip_begin(d);
		break;
	case PK_ANNOTS:
		if (map)
			push(d, C_ANNOTS, -1);
		else
			skip_begin(d);
		break;
	case PK_OWNERS:
		if (!map)
			push(d, C_OWNERS, -1);
		else
			skip_begin(d);
		break;
	case PK_FINALIZERS:
		if (map) {
			skip_begin(d);
			break;
		}
		push(d, C_FINALIZERS, -1);
		if (d->fin_field >= 0) {
			ck_sbuf_reset(&d->finbuf);
			ck_sbuf_putc(&d->finbuf, '[');
		}
		break;
	case PK_NODE:
		if (d->pnode >= 0 && d->want_kobj) {
			const tnode_t *n = &d->nodes[d->pnode];
			if (n->field >= 0) {
				d->cap_field = n->field;
				cap_open(d, map);
			} else if (map) {
				push(d, C_NODE, d->pnode);
			} else {
				skip_begin(d);
			}
		} else if (d->pst == ST_DETAILS && map) {
			push(d, C_DETAILS, -1);
		} else {
			skip_begin(d);
		}
		break;
	case PK_D_CAUSES:
		if (!map)
			push(d, C_CAUSES, -1);
		else
			skip_begin(d);
		break;
	default:
		skip_begin(d);
		break;
	}
	return 1;
}

static int on_close(ck_dec_t *d)
{
	frame_t f = d->frames[--d->nframes];
	switch (f.ctx) {
	case C_OBJ:
		if (d->nframes == 0) { /* CK_DEC_OBJECT */
			unit_end(d);
			if (d->want_kobj)
				emit_object(d);
		} else if (top(d)->ctx == C_ITEMS) {
			unit_end(d);
			emit_object(d);
		} else {
			d->ev_have_obj = true; /* emitted when the event closes */
		}
		break;
	case C_EVENT:
		unit_end(d);
		d->last_top_end = pos(d);
		return event_end(d);
	case C_LIST_META:
		unit_end(d);
		emit_list_meta(d);
		break;
	case C_LIST:
		emit_list_meta(d);
		break;
	case C_FINALIZERS:
		if (d->fin_field >= 0) {
			ck_sbuf_putc(&d->finbuf, ']');
			ck_obj_builder_set_field(d->b, (size_t)d->fin_field, CK_VAL_JSON, false, 0,
			                         0, d->finbuf.data, d->finbuf.len);
		}
		break;
	default:
		break;
	}
	return 1;
}

/* ---- yajl callbacks ---- */

static int cb_null(void *ctx)
{
	ck_dec_t *d = ctx;
	if (d->skip)
		return 1;
	token_seen(d);
	if (d->ncaps) {
		cap_sep(d);
		ck_sbuf_append(&d->capbuf, "null", 4);
		return 1;
	}
	sval_t v = {V_NULL, false, NULL, 0};
	return on_scalar(d, &v);
}

static int cb_bool(void *ctx, int b)
{
	ck_dec_t *d = ctx;
	if (d->skip)
		return 1;
	token_seen(d);
	if (d->ncaps) {
		cap_sep(d);
		ck_sbuf_puts(&d->capbuf, b ? "true" : "false");
		return 1;
	}
	sval_t v = {V_BOOL, b != 0, NULL, 0};
	return on_scalar(d, &v);
}

static int cb_number(void *ctx, const char *s, size_t l)
{
	ck_dec_t *d = ctx;
	if (d->skip)
		return 1;
	token_seen(d);
	if (d->ncaps) {
		cap_sep(d);
		ck_sbuf_append(&d->capbuf, s, l);
		return 1;
	}
	sval_t v = {V_NUM, false, (const unsigned char *)s, l};
	return on_scalar(d, &v);
}

static int cb_string(void *ctx, const unsigned char *s, size_t l)
{
	ck_dec_t *d = ctx;
	if (d->skip)
		return 1;
	token_seen(d);
	if (d->ncaps) {
		cap_sep(d);
		ck_sbuf_put_json_strn(&d->capbuf, (const char *)s, l);
		return 1;
	}
	sval_t v = {V_STR, false, s, l};
	return on_scalar(d, &v);
}

static int cb_start(ck_dec_t *d, bool map)
{
	token_seen(d);
	/* Counted here, skipped or not: yajl's stack grows either way. */
	if (d->depth == CK_DEC_MAX_DEPTH)
		return fail(d, "JSON nested deeper than %d levels", CK_DEC_MAX_DEPTH);
	d->depth++;
	if (d->skip) {
		d->skip++;
		return 1;
	}
	if (d->ncaps) {
		cap_open(d, map);
		return 1;
	}
	return on_open(d, map);
}

static int cb_start_map(void *ctx)
{
	return cb_start(ctx, true);
}
static int cb_start_array(void *ctx)
{
	return cb_start(ctx, false);
}

static int cb_end(void *ctx)
{
	ck_dec_t *d = ctx;
	token_seen(d);
	d->depth--;
	if (d->skip) {
		if (--d->skip == 0 && d->unit == U_SKIPPED)
			unit_end(d);
		return 1;
	}
	if (d->ncaps) {
		cap_close(d);
		return 1;
	}
	return on_close(d);
}

static void key_meta(ck_dec_t *d, const unsigned char *k, size_t l)
{
	for (size_t i = 0; i < CK_ARRAY_LEN(meta_keys); i++) {
		if (l == strlen(meta_keys[i]) && memcmp(k, meta_keys[i], l) == 0) {
			d->pk = PK_META_STR;
			d->sub = (uint8_t)i;
			return;
		}
	}
	if (KEYIS(k, l, "managedFields"))
		return; /* never kept, whatever the descriptor says */
	if (KEYIS(k, l, "labels")) {
		d->pk = PK_LABELS;
	} else if (KEYIS(k, l, "annotations")) {
		if (d->keep_annots)
			d->pk = PK_ANNOTS;
	} else if (KEYIS(k, l, "ownerReferences")) {
		d->pk = PK_OWNERS;
	} else if (KEYIS(k, l, "finalizers")) {
		d->pk = PK_FINALIZERS;
	} else if (KEYIS(k, l, "generation")) {
		d->pk = PK_GEN;
	} else {
		int32_t n = trie_child(d, d->meta_node, k, l);
		if (n >= 0) {
			d->pk = PK_NODE;
			d->pnode = n;
		}
	}
}

static void key_obj(ck_dec_t *d, const unsigned char *k, size_t l)
{
	if (d->want_kobj) {
		if (KEYIS(k, l, "metadata")) {
			d->pk = PK_META;
			return;
		}
		d->pnode = trie_child(d, 0, k, l);
	}
	if (d->want_status) {
		if (KEYIS(k, l, "kind"))
			d->pst = ST_KIND;
		else if (KEYIS(k, l, "code"))
			d->pst = ST_CODE;
		else if (KEYIS(k, l, "status"))
			d->pst = ST_STATUS;
		else if (KEYIS(k, l, "reason"))
			d->pst = ST_REASON;
		else if (KEYIS(k, l, "message"))
			d->pst = ST_MESSAGE;
		else if (KEYIS(k, l, "details"))
			d->pst = ST_DETAILS;
	}
	if (d->pnode >= 0 || d->pst != ST_NONE)
		d->pk = PK_NODE;
}

static int cb_map_key(void *ctx, const unsigned char *k, size_t l)
{
	ck_dec_t *d = ctx;
	if (d->skip)
		return 1;
	token_seen(d);
	if (d->ncaps) {
		cap_key(d, k, l);
		return 1;
	}
	d->pk = PK_NONE;
	d->pnode = -1;
	d->pst = ST_NONE;
	frame_t *f = top(d);
	switch (f->ctx) {
	case C_LIST:
		if (KEYIS(k, l, "metadata"))
			d->pk = PK_LIST_META;
		else if (KEYIS(k, l, "items"))
			d->pk = PK_ITEMS;
		break;
	case C_LIST_META:
		if (KEYIS(k, l, "resourceVersion"))
			d->pk = PK_LM_RV;
		else if (KEYIS(k, l, "continue"))
			d->pk = PK_LM_CONT;
		else if (KEYIS(k, l, "remainingItemCount"))
			d->pk = PK_LM_REMAIN;
		break;
	case C_EVENT:
		if (KEYIS(k, l, "type"))
			d->pk = PK_EV_TYPE;
		else if (KEYIS(k, l, "object"))
			d->pk = PK_EV_OBJECT;
		break;
	case C_OBJ:
		key_obj(d, k, l);
		break;
	case C_META:
		key_meta(d, k, l);
		break;
	case C_LABELS:
	case C_ANNOTS:
		ck_sbuf_reset(&d->key);
		ck_sbuf_append(&d->key, k, l);
		d->pk = f->ctx == C_LABELS ? PK_LABEL_VAL : PK_ANNOT_VAL;
		break;
	case C_OWNER:
		for (size_t i = 0; i < CK_ARRAY_LEN(owner_keys); i++) {
			if (l == strlen(owner_keys[i]) && memcmp(k, owner_keys[i], l) == 0) {
				d->pk = PK_OWNER_STR;
				d->sub = (uint8_t)i;
				return 1;
			}
		}
		if (KEYIS(k, l, "controller")) {
			d->pk = PK_OWNER_BOOL;
			d->sub = 0;
		} else if (KEYIS(k, l, "blockOwnerDeletion")) {
			d->pk = PK_OWNER_BOOL;
			d->sub = 1;
		}
		break;
	case C_NODE:
		d->pnode = trie_child(d, f->node, k, l);
		if (d->pnode >= 0)
			d->pk = PK_NODE;
		break;
	case C_DETAILS:
		if (KEYIS(k, l, "name")) {
			d->pk = PK_D_STR;
			d->sub = 0;
		} else if (KEYIS(k, l, "kind")) {
			d->pk = PK_D_STR;
			d->sub = 1;
		} else if (KEYIS(k, l, "group")) {
			d->pk = PK_D_STR;
			d->sub = 2;
		} else if (KEYIS(k, l, "retryAfterSeconds")) {
			d->pk = PK_D_RETRY;
		} else if (KEYIS(k, l, "causes")) {
			d->pk = PK_D_CAUSES;
		}
		break;
	case C_CAUSE:
		if (KEYIS(k, l, "reason"))
			d->pk = PK_CAUSE_REASON;
		break;
	default:
		break;
	}
	return 1;
}

static const yajl_callbacks callbacks = {
    .yajl_null = cb_null,
    .yajl_boolean = cb_bool,
    .yajl_number = cb_number,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_map_key,
    .yajl_end_map = cb_end,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_end,
};

/* ---- public API ---- */

ck_dec_t *ck_dec_new(const ck_type_t *t, ck_dec_mode_t mode, const ck_dec_cb_t *cb, void *ud,
                     size_t max_object_bytes)
{
	ck_dec_t *d = ck_xcalloc(1, sizeof(*d));
	d->type = t;
	d->mode = mode;
	d->cb = cb;
	d->ud = ud;
	d->max = max_object_bytes ? max_object_bytes : CK_DEC_DEFAULT_MAX_OBJECT;
	d->lm_remain = -1;
	d->ev_type = -1;
	d->pnode = -1;
	trie_build(d);
	d->b = ck_obj_builder_new(t);
	d->h = yajl_alloc(&callbacks, NULL, d);
	if (d->h == NULL)
		ck_fatal("yajl_alloc failed");
	if (mode == CK_DEC_WATCH)
		yajl_config(d->h, yajl_allow_multiple_values, 1);
	return d;
}

void ck_dec_free(ck_dec_t *d)
{
	if (d == NULL)
		return;
	yajl_free(d->h);
	ck_obj_builder_free(d->b);
	free(d->nodes);
	free(d->frames);
	ck_sbuf_free(&d->capbuf);
	ck_sbuf_free(&d->finbuf);
	ck_sbuf_free(&d->key);
	ck_sbuf_free(&d->lm_rv);
	ck_sbuf_free(&d->lm_cont);
	ck_status_clear(&d->st);
	free(d->err);
	free(d);
}

uint64_t ck_dec_bytes(const ck_dec_t *d)
{
	return d->total;
}

/* Keeps the last bytes of the input, so an excerpt does not depend on chunking. */
static void tail_push(ck_dec_t *d, const unsigned char *buf, size_t len)
{
	size_t cap = sizeof(d->tail);
	if (len >= cap) {
		memcpy(d->tail, buf + len - cap, cap);
		d->ntail = cap;
		return;
	}
	size_t keep = d->ntail + len > cap ? cap - len : d->ntail;
	memmove(d->tail, d->tail + d->ntail - keep, keep);
	memcpy(d->tail + keep, buf, len);
	d->ntail = keep + len;
}

/* The up to 24 bytes of input that precede the failure, unprintables as '.'. */
static void excerpt(ck_dec_t *d, const unsigned char *buf, size_t at, char out[32])
{
	unsigned char tmp[sizeof(d->tail)];
	size_t n = 0;
	size_t from_slice = at < sizeof(tmp) ? at : sizeof(tmp);
	size_t from_tail =
	    sizeof(tmp) - from_slice < d->ntail ? sizeof(tmp) - from_slice : d->ntail;
	memcpy(tmp, d->tail + d->ntail - from_tail, from_tail);
	n = from_tail;
	if (from_slice > 0)
		memcpy(tmp + n, buf + at - from_slice, from_slice);
	n += from_slice;
	for (size_t i = 0; i < n; i++)
		out[i] = tmp[i] >= 0x20 && tmp[i] < 0x7f ? (char)tmp[i] : '.';
	out[n] = '\0';
}

/* Builds the error for a failed yajl call on buf[0..len). */
static void yajl_failed(ck_dec_t *d, const unsigned char *buf, size_t len)
{
	if (d->err != NULL)
		return; /* one of our callbacks refused: its message says why */
	size_t at = buf != NULL ? yajl_get_bytes_consumed(d->h) : 0;
	char ex[32] = "";
	excerpt(d, buf, at > len ? len : at, ex);
	d->err = ck_codec_i_syntax_error(d->h, d->good_end, ex);
}

static int dead_error(ck_dec_t *d, char **err)
{
	d->dead = true;
	ck_err_set(err, "decoding %s: %s", d->type->resource ? d->type->resource : "object",
	           d->err ? d->err : "decoder failed");
	return -1;
}

/* WATCH: remembers whether bytes after the last event are more than blanks. */
static void watch_tail(ck_dec_t *d, const unsigned char *buf, size_t len)
{
	if (d->mode != CK_DEC_WATCH || d->nframes != 0)
		return;
	uint64_t from = d->last_top_end > d->slice_base ? d->last_top_end - d->slice_base : 0;
	if (from < len && d->last_top_end >= d->slice_base)
		d->pending_garbage = false; /* an event ended in this slice */
	for (uint64_t i = from; i < len; i++) {
		unsigned char c = buf[i];
		if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
			d->pending_garbage = true;
			return;
		}
	}
}

int ck_dec_feed(ck_dec_t *d, const char *buf, size_t len, char **err)
{
	if (d->dead || d->finished) {
		if (d->err == NULL)
			d->err = ck_xstrdup("decoder used after it finished");
		return dead_error(d, err);
	}
	const unsigned char *p = (const unsigned char *)buf;
	while (len > 0) {
		uint64_t used = d->total - d->unit_start;
		if (used >= d->max) {
			/* Name the object when its metadata came first, as the API server
			 * writes it: "which Deployment" is what an operator needs. */
			char who[336] = ""; /* " \"ns/name\"": 63 + 253 and quotes */
			if ((d->unit == U_OBJECT || d->unit == U_EVENT) && d->want_kobj)
				ck_obj_i_builder_ident(d->b, who, sizeof(who));
			d->err = ck_xasprintf(
			    "%s%s larger than the limit of %zu bytes at byte %llu",
			    unit_names[d->unit], who, d->max, (unsigned long long)d->total);
			return dead_error(d, err);
		}
		uint64_t budget = d->max - used;
		size_t n = len < budget ? len : (size_t)budget;
		d->slice_base = d->total;
		yajl_status s = yajl_parse(d->h, p, n);
		if (s != yajl_status_ok) {
			yajl_failed(d, p, n);
			return dead_error(d, err);
		}
		watch_tail(d, p, n);
		tail_push(d, p, n);
		d->total += n;
		p += n;
		len -= n;
	}
	return 0;
}

int ck_dec_finish(ck_dec_t *d, char **err)
{
	if (d->dead || d->finished) {
		if (d->err == NULL)
			d->err = ck_xstrdup("decoder used after it finished");
		return dead_error(d, err);
	}
	d->finished = true;
	d->slice_base = d->total;
	if (d->mode == CK_DEC_WATCH && d->nframes == 0 && !d->pending_garbage)
		return 0; /* between events: a clean end (yajl would call it premature) */
	if (d->nframes > 0) {
		d->err = ck_xasprintf("input truncated inside %s at byte %llu",
		                      d->mode == CK_DEC_WATCH  ? "a watch event"
		                      : d->mode == CK_DEC_LIST ? "a list"
		                                               : "an object",
		                      (unsigned long long)d->total);
		return dead_error(d, err);
	}
	yajl_status s = yajl_complete_parse(d->h);
	if (s != yajl_status_ok) {
		yajl_failed(d, NULL, 0);
		return dead_error(d, err);
	}
	return 0;
}

typedef struct one {
	ck_obj_t *obj;
} one_t;

static void one_cb(void *ud, ck_obj_t *obj)
{
	one_t *o = ud;
	ck_obj_unref(o->obj);
	o->obj = obj;
}

ck_obj_t *ck_dec_object(const ck_type_t *t, const char *buf, size_t len, char **err)
{
	one_t o = {NULL};
	ck_dec_cb_t cb = {.on_object = one_cb};
	ck_dec_t *d = ck_dec_new(t, CK_DEC_OBJECT, &cb, &o, 0);
	if (ck_dec_feed(d, buf, len, err) < 0 || ck_dec_finish(d, err) < 0) {
		ck_obj_unref(o.obj);
		o.obj = NULL;
	} else if (o.obj == NULL) {
		ck_err_set(err, "decoding %s: no object in the input", t->resource);
	}
	ck_dec_free(d);
	return o.obj;
}

static const ck_type_t status_type = {"", "v1", "Status", "status", false, NULL, 0, false};

int ck_dec_i_status_parse(const char *buf, size_t len, ck_status_t *st)
{
	ck_dec_cb_t cb = {0};
	ck_dec_t *d = ck_dec_new(&status_type, CK_DEC_OBJECT, &cb, NULL, 0);
	d->status_only = true;
	int rc = -1;
	if (ck_dec_feed(d, buf, len, NULL) == 0 && ck_dec_finish(d, NULL) == 0 && d->st_seen_obj &&
	    d->st_kind_ok)
		rc = 0;
	/* Hand over what was decoded, even from a body that is not quite a Status. */
	*st = d->st;
	memset(&d->st, 0, sizeof(d->st));
	ck_dec_free(d);
	return rc;
}
