/*
 * json_merge: JSON merge patch (RFC 7386), deep equality and containment over
 * parsed documents.
 *
 * One mechanism for everything that merges a partial object into a whole one: the
 * create-or-update helpers (what the live object would become with the fields a
 * controller owns, and whether it already holds them) and the fake API server's
 * merge PATCH. The trees are immutable
 * (json.c), so a merge is written out as new text rather than done in place.
 *
 * Repeated keys: a document may hold a key twice; as everywhere in json.h the last
 * one wins, so only a key's last occurrence is read and the output holds each key
 * once. Members keep the target's order, with the patch's new members after them
 * in the patch's order: a merge that changes nothing reproduces the target's
 * members in their order (ck_json_equal is what says "nothing changed", not a
 * byte comparison).
 *
 * Cost: member lookups are linear (ck_json_member), so merging or comparing two
 * objects of n members takes O(n^2) steps: fine for the objects controllers
 * write (a ConfigMap of 2,000 keys is 4 million short comparisons).
 */
#include <ckube/json.h>

#include <string.h>

/* Is member i of object v the last occurrence of its key (the one that counts)? */
static bool member_counts(const ck_json_t *v, size_t i)
{
	size_t klen;
	const char *key = ck_json_key(v, i, &klen);
	return ck_json_member(v, key, klen) == ck_json_at(v, i);
}

static bool numbers_equal(const ck_json_t *a, const ck_json_t *b)
{
	const char *ta, *tb;
	ck_json_get_number_text(a, &ta);
	ck_json_get_number_text(b, &tb);
	if (strcmp(ta, tb) == 0)
		return true;
	/* 1 and 1.0 are one number to the API server (Go's float64 in unstructured). */
	int64_t ia, ib;
	if (ck_json_get_int64(a, &ia) == CK_JSON_OK && ck_json_get_int64(b, &ib) == CK_JSON_OK)
		return ia == ib;
	double da, db;
	return ck_json_get_double(a, &da) == CK_JSON_OK &&
	       ck_json_get_double(b, &db) == CK_JSON_OK && da == db;
}

/* Distinct keys of an object (a repeated key counted once). */
static size_t distinct_members(const ck_json_t *v)
{
	size_t n = 0;
	for (size_t i = 0; i < ck_json_len(v); i++)
		n += member_counts(v, i);
	return n;
}

bool ck_json_equal(const ck_json_t *a, const ck_json_t *b)
{
	ck_json_type_t t = ck_json_type(a);
	if (t != ck_json_type(b))
		return false;
	switch (t) {
	case CK_JSON_ABSENT:
	case CK_JSON_NULL:
		return true;
	case CK_JSON_BOOL: {
		bool x = false, y = false;
		ck_json_get_bool(a, &x);
		ck_json_get_bool(b, &y);
		return x == y;
	}
	case CK_JSON_NUMBER:
		return numbers_equal(a, b);
	case CK_JSON_STRING: {
		const char *x, *y;
		size_t lx, ly;
		ck_json_get_string(a, &x, &lx);
		ck_json_get_string(b, &y, &ly);
		return lx == ly && memcmp(x, y, lx) == 0;
	}
	case CK_JSON_ARRAY:
		if (ck_json_len(a) != ck_json_len(b))
			return false;
		for (size_t i = 0; i < ck_json_len(a); i++)
			if (!ck_json_equal(ck_json_at(a, i), ck_json_at(b, i)))
				return false;
		return true;
	case CK_JSON_OBJECT:
		if (distinct_members(a) != distinct_members(b))
			return false;
		for (size_t i = 0; i < ck_json_len(a); i++) {
			size_t klen;
			const char *key = ck_json_key(a, i, &klen);
			if (member_counts(a, i) &&
			    !ck_json_equal(ck_json_at(a, i), ck_json_member(b, key, klen)))
				return false;
		}
		return true;
	}
	return false;
}

/* Writes target with patch merged in; a NULL target is absent (the patch is then
 * written with its nulls dropped). */
static void merge_into(const ck_json_t *target, const ck_json_t *patch, ck_sbuf_t *out);

int ck_json_merge_patch(const ck_json_t *target, const ck_json_t *patch, ck_sbuf_t *out)
{
	if (patch == NULL || out == NULL)
		return -1;
	merge_into(target, patch, out);
	return 0;
}

static void merge_into(const ck_json_t *target, const ck_json_t *patch, ck_sbuf_t *out)
{
	if (ck_json_type(patch) != CK_JSON_OBJECT) {
		ck_json_write(patch, out); /* a non-object patch replaces the target whole */
		return;
	}
	/* A target that is not an object merges as {} (RFC 7386, section 2). */
	bool tobj = ck_json_type(target) == CK_JSON_OBJECT;
	bool first = true;
	ck_sbuf_putc(out, '{');
	for (size_t i = 0; tobj && i < ck_json_len(target); i++) {
		if (!member_counts(target, i))
			continue;
		size_t klen;
		const char *key = ck_json_key(target, i, &klen);
		const ck_json_t *pv = ck_json_member(patch, key, klen);
		if (ck_json_is_null(pv))
			continue; /* null deletes the member */
		if (!first)
			ck_sbuf_putc(out, ',');
		first = false;
		ck_sbuf_put_json_strn(out, key, klen);
		ck_sbuf_putc(out, ':');
		if (pv == NULL)
			ck_json_write(ck_json_at(target, i), out);
		else
			merge_into(ck_json_at(target, i), pv, out);
	}
	for (size_t i = 0; i < ck_json_len(patch); i++) {
		size_t klen;
		const char *key = ck_json_key(patch, i, &klen);
		const ck_json_t *pv = ck_json_at(patch, i);
		if (!member_counts(patch, i) || ck_json_is_null(pv) ||
		    (tobj && ck_json_member(target, key, klen) != NULL))
			continue;
		if (!first)
			ck_sbuf_putc(out, ',');
		first = false;
		ck_sbuf_put_json_strn(out, key, klen);
		ck_sbuf_putc(out, ':');
		merge_into(NULL, pv, out); /* nested nulls are dropped, not kept */
	}
	ck_sbuf_putc(out, '}');
}

bool ck_json_contains(const ck_json_t *whole, const ck_json_t *part)
{
	switch (ck_json_type(part)) {
	case CK_JSON_OBJECT:
		if (ck_json_type(whole) != CK_JSON_OBJECT)
			return false;
		for (size_t i = 0; i < ck_json_len(part); i++) {
			if (!member_counts(part, i))
				continue;
			size_t klen;
			const char *key = ck_json_key(part, i, &klen);
			const ck_json_t *pv = ck_json_at(part, i),
			                *wv = ck_json_member(whole, key, klen);
			/* null asks for the member's absence, as in a merge patch. */
			if (ck_json_is_null(pv) ? wv != NULL : !ck_json_contains(wv, pv))
				return false;
		}
		return true;
	case CK_JSON_ARRAY:
		/* Same length: an element someone else added is drift, not a default
		 * (the server never adds list elements by defaulting). */
		if (ck_json_type(whole) != CK_JSON_ARRAY || ck_json_len(whole) != ck_json_len(part))
			return false;
		for (size_t i = 0; i < ck_json_len(part); i++)
			if (!ck_json_contains(ck_json_at(whole, i), ck_json_at(part, i)))
				return false;
		return true;
	default:
		return ck_json_equal(whole, part);
	}
}
