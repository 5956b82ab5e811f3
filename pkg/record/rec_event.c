/*
 * rec_event: the core/v1 Event the poster thread handles: construction from a
 * caller's reference, cache keys, names and the JSON sent to the API server.
 */
#include "pkg/base/hash.h"
#include "pkg/record/rec_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_or_empty(const char *s)
{
	return ck_xstrdup(s ? s : "");
}

rec_event_t *rec_event_new(const ck_record_ref_t *ref, const char *type, const char *reason,
                           const char *message, int64_t wall_ns)
{
	rec_event_t *e = ck_xcalloc(1, sizeof(*e));
	const char *obj_ns = ref->ns ? ref->ns : "";

	e->name = ck_xstrdup("");
	/* Cluster-scoped objects' events live in "default", as in client-go. */
	e->ns = ck_xstrdup(*obj_ns ? obj_ns : "default");
	e->io_api_version = dup_or_empty(ref->api_version);
	e->io_kind = dup_or_empty(ref->kind);
	e->io_ns = ck_xstrdup(obj_ns);
	e->io_name = dup_or_empty(ref->name);
	e->io_uid = dup_or_empty(ref->uid);
	e->io_rv = dup_or_empty(ref->resource_version);
	e->type = dup_or_empty(type);
	e->reason = dup_or_empty(reason);
	e->message = rec_message_clean(message ? message : "", REC_MAX_MESSAGE);
	e->first_ns = e->last_ns = wall_ns;
	e->count = 1;
	return e;
}

rec_event_t *rec_event_dup(const rec_event_t *s)
{
	rec_event_t *e = ck_xcalloc(1, sizeof(*e));
	*e = *s;
	e->name = ck_xstrdup(s->name);
	e->ns = ck_xstrdup(s->ns);
	e->io_api_version = ck_xstrdup(s->io_api_version);
	e->io_kind = ck_xstrdup(s->io_kind);
	e->io_ns = ck_xstrdup(s->io_ns);
	e->io_name = ck_xstrdup(s->io_name);
	e->io_uid = ck_xstrdup(s->io_uid);
	e->io_rv = ck_xstrdup(s->io_rv);
	e->type = ck_xstrdup(s->type);
	e->reason = ck_xstrdup(s->reason);
	e->message = ck_xstrdup(s->message);
	return e;
}

void rec_event_free(rec_event_t *e)
{
	if (e == NULL)
		return;
	free(e->name);
	free(e->ns);
	free(e->io_api_version);
	free(e->io_kind);
	free(e->io_ns);
	free(e->io_name);
	free(e->io_uid);
	free(e->io_rv);
	free(e->type);
	free(e->reason);
	free(e->message);
	free(e);
}

void rec_event_set_message(rec_event_t *e, char *msg)
{
	free(e->message);
	e->message = msg;
}

/*
 * Returns the length of the valid UTF-8 sequence at p (at most avail bytes), or 0
 * if it is not one: overlong forms, surrogates and values past U+10FFFF are invalid.
 */
static size_t utf8_seq_len(const unsigned char *p, size_t avail)
{
	unsigned char c = p[0];
	size_t n;
	uint32_t min, cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2, min = 0x80, cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3, min = 0x800, cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4, min = 0x10000, cp = c & 0x07;
	} else {
		return 0;
	}
	if (avail < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

char *rec_message_clean(const char *s, size_t max)
{
	static const char repl[] = "\xef\xbf\xbd"; /* U+FFFD */
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s);
	ck_sbuf_t out = CK_SBUF_INIT;

	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq_len(p + i, len - i);
		const char *src = n ? s + i : repl;
		size_t srclen = n ? n : 3;

		/* Stop before a character that would not fit whole. */
		if (out.len + srclen > max)
			break;
		ck_sbuf_append(&out, src, srclen);
		i += n ? n : 1;
	}
	return ck_sbuf_steal(&out);
}

static uint64_t key_add(uint64_t h, const char *s)
{
	s = s ? s : "";
	return ck_hash_combine(h, ck_hash_bytes(s, strlen(s)));
}

/* Distinct starting values: the three kinds of key never meet in one cache today,
 * but an aggregate key and an event key share the dedup cache. */
enum { KEY_EVENT = 1, KEY_AGGREGATE, KEY_SPAM };

static uint64_t key_source_object(uint64_t h, const rec_source_t *s, const rec_event_t *e)
{
	h = key_add(h, s->component);
	h = key_add(h, s->host);
	h = key_add(h, e->io_kind);
	h = key_add(h, e->io_ns);
	h = key_add(h, e->io_name);
	/* client-go's event key has the fieldPath here; we never set one. */
	h = key_add(h, e->io_uid);
	return key_add(h, e->io_api_version);
}

uint64_t rec_key_event(const rec_source_t *s, const rec_event_t *e)
{
	uint64_t h = key_source_object(KEY_EVENT, s, e);
	h = key_add(h, e->type);
	h = key_add(h, e->reason);
	return key_add(h, e->message);
}

uint64_t rec_key_aggregate(const rec_source_t *s, const rec_event_t *e)
{
	uint64_t h = key_source_object(KEY_AGGREGATE, s, e);
	h = key_add(h, e->type);
	h = key_add(h, e->reason);
	h = key_add(h, s->reporting_controller);
	return key_add(h, s->reporting_instance);
}

uint64_t rec_key_spam(const rec_source_t *s, const rec_event_t *e)
{
	uint64_t h = key_source_object(KEY_SPAM, s, e);
	/* One bucket per type, as client-go's getSpamKey since 2024: Normal events
	 * (Synced on every change) must not starve the Warning a person needs. */
	return key_add(h, e->type);
}

uint64_t rec_key_message(const char *msg)
{
	return ck_hash_bytes(msg, strlen(msg));
}

char *rec_event_name(const char *obj_name, int64_t ns)
{
	char suffix[24];
	int sl = snprintf(suffix, sizeof(suffix), ".%" PRIx64, (uint64_t)ns);
	size_t keep = strlen(obj_name);

	/*
	 * client-go does not cut, so an object with a 250-byte name gets events the
	 * server refuses. Keep the name a valid subdomain: cut the object part and
	 * drop the separators a cut may leave at its end.
	 */
	if (keep + (size_t)sl > REC_MAX_NAME) {
		keep = REC_MAX_NAME - (size_t)sl;
		while (keep > 0 && (obj_name[keep - 1] == '.' || obj_name[keep - 1] == '-'))
			keep--;
	}
	return ck_xasprintf("%.*s%s", (int)keep, obj_name, suffix);
}

static void json_kv_str(ck_sbuf_t *b, bool *first, const char *k, const char *v, bool omit_empty)
{
	if (omit_empty && (v == NULL || *v == '\0'))
		return;
	if (!*first)
		ck_sbuf_putc(b, ',');
	*first = false;
	ck_sbuf_put_json_str(b, k);
	ck_sbuf_putc(b, ':');
	ck_sbuf_put_json_str(b, v ? v : "");
}

static void json_kv_time(ck_sbuf_t *b, bool *first, const char *k, int64_t ns)
{
	char ts[32];
	ck_time_format_rfc3339(ns, ts);
	json_kv_str(b, first, k, ts, false);
}

void rec_json_create(ck_sbuf_t *b, const rec_source_t *s, const rec_event_t *e)
{
	bool first = true, f2;

	ck_sbuf_putc(b, '{');
	json_kv_str(b, &first, "apiVersion", "v1", false);
	json_kv_str(b, &first, "kind", "Event", false);

	ck_sbuf_puts(b, ",\"metadata\":{");
	f2 = true;
	json_kv_str(b, &f2, "name", e->name, false);
	json_kv_str(b, &f2, "namespace", e->ns, false);
	ck_sbuf_putc(b, '}');

	/* ObjectReference fields are all omitempty in Go. */
	ck_sbuf_puts(b, ",\"involvedObject\":{");
	f2 = true;
	json_kv_str(b, &f2, "kind", e->io_kind, true);
	json_kv_str(b, &f2, "namespace", e->io_ns, true);
	json_kv_str(b, &f2, "name", e->io_name, true);
	json_kv_str(b, &f2, "uid", e->io_uid, true);
	json_kv_str(b, &f2, "apiVersion", e->io_api_version, true);
	json_kv_str(b, &f2, "resourceVersion", e->io_rv, true);
	ck_sbuf_putc(b, '}');

	json_kv_str(b, &first, "reason", e->reason, false);
	json_kv_str(b, &first, "message", e->message, false);

	ck_sbuf_puts(b, ",\"source\":{");
	f2 = true;
	json_kv_str(b, &f2, "component", s->component, true);
	json_kv_str(b, &f2, "host", s->host, true);
	ck_sbuf_putc(b, '}');

	json_kv_time(b, &first, "firstTimestamp", e->first_ns);
	json_kv_time(b, &first, "lastTimestamp", e->last_ns);
	ck_sbuf_printf(b, ",\"count\":%" PRId32, e->count);
	json_kv_str(b, &first, "type", e->type, false);
	/* A legacy (core/v1) event: eventTime stays null, the timestamps above rule. */
	ck_sbuf_puts(b, ",\"eventTime\":null");
	json_kv_str(b, &first, "reportingComponent", s->reporting_controller, false);
	json_kv_str(b, &first, "reportingInstance", s->reporting_instance, false);
	ck_sbuf_putc(b, '}');
}

void rec_json_patch(ck_sbuf_t *b, const rec_event_t *e)
{
	bool first = true;

	ck_sbuf_printf(b, "{\"count\":%" PRId32, e->count);
	first = false;
	json_kv_time(b, &first, "lastTimestamp", e->last_ns);
	json_kv_str(b, &first, "message", e->message, false);
	ck_sbuf_putc(b, '}');
}

/* ---------------------------------------------------------------- events.k8s.io/v1 */

static void json_kv_micro(ck_sbuf_t *b, bool *first, const char *k, int64_t ns)
{
	char ts[40];
	ck_time_format_rfc3339_micro(ns, ts);
	json_kv_str(b, first, k, ts, false);
}

/* series is what a repetition looks like in events.k8s.io/v1: the server refuses
 * a series with a count below 2, so a first occurrence carries none. */
static void json_series(ck_sbuf_t *b, const rec_event_t *e)
{
	bool f2 = false;
	ck_sbuf_printf(b, "\"series\":{\"count\":%" PRId32, e->count);
	json_kv_micro(b, &f2, "lastObservedTime", e->last_ns);
	ck_sbuf_putc(b, '}');
}

void rec_json_create_v1(ck_sbuf_t *b, const rec_source_t *s, const rec_event_t *e)
{
	bool first = true, f2;

	ck_sbuf_putc(b, '{');
	json_kv_str(b, &first, "apiVersion", "events.k8s.io/v1", false);
	json_kv_str(b, &first, "kind", "Event", false);

	ck_sbuf_puts(b, ",\"metadata\":{");
	f2 = true;
	json_kv_str(b, &f2, "name", e->name, false);
	json_kv_str(b, &f2, "namespace", e->ns, false);
	ck_sbuf_putc(b, '}');

	/* The first occurrence: eventTime is required, the deprecated* timestamps,
	 * count and source must stay unset (the server converts for core/v1 readers). */
	json_kv_micro(b, &first, "eventTime", e->first_ns);
	if (e->count > 1) {
		ck_sbuf_putc(b, ',');
		json_series(b, e);
	}
	json_kv_str(b, &first, "reportingController", s->reporting_controller, false);
	json_kv_str(b, &first, "reportingInstance", s->reporting_instance, false);
	/* Our recording calls have no action (client-go's legacy EventRecorder neither);
	 * the server requires one, and the reason is the closest word for it. */
	json_kv_str(b, &first, "action", e->reason, false);
	json_kv_str(b, &first, "reason", e->reason, false);

	ck_sbuf_puts(b, ",\"regarding\":{");
	f2 = true;
	json_kv_str(b, &f2, "kind", e->io_kind, true);
	json_kv_str(b, &f2, "namespace", e->io_ns, true);
	json_kv_str(b, &f2, "name", e->io_name, true);
	json_kv_str(b, &f2, "uid", e->io_uid, true);
	json_kv_str(b, &f2, "apiVersion", e->io_api_version, true);
	json_kv_str(b, &f2, "resourceVersion", e->io_rv, true);
	ck_sbuf_putc(b, '}');

	json_kv_str(b, &first, "note", e->message, false);
	json_kv_str(b, &first, "type", e->type, false);
	ck_sbuf_putc(b, '}');
}

void rec_json_patch_v1(ck_sbuf_t *b, const rec_event_t *e)
{
	/* Only the series: events.k8s.io/v1 makes note (and every other field but
	 * series) immutable after create. */
	ck_sbuf_putc(b, '{');
	json_series(b, e);
	ck_sbuf_putc(b, '}');
}
