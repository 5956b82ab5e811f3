/*
 * selector: label selectors as `kubectl -l` and the API server read them, for
 * filtering cached objects locally (listers). A small hand-written parser: the
 * grammar is a comma-separated list of requirements, each a key, an operator
 * and values, with blanks allowed between tokens.
 */
#include <ckube/cache.h>

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef enum sel_op {
	OP_EQ,
	OP_NE,
	OP_IN,
	OP_NOTIN,
	OP_EXISTS,
	OP_NOT_EXISTS,
	OP_GT,
	OP_LT,
} sel_op_t;

typedef struct sel_req {
	sel_op_t op;
	char *key;
	char **vals;
	size_t nvals;
	int64_t num; /* OP_GT / OP_LT */
} sel_req_t;

struct ck_cache_selector {
	sel_req_t *reqs;
	size_t n;
};

static bool key_char(int c)
{
	return isalnum(c) || c == '.' || c == '_' || c == '-' || c == '/';
}
static bool val_char(int c)
{
	return isalnum(c) || c == '.' || c == '_' || c == '-';
}

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* Reads a run of chars accepted by ok; returns a new string (maybe empty). */
static char *read_run(const char **pp, bool (*ok)(int))
{
	const char *p = *pp;
	while (*p != '\0' && ok((unsigned char)*p))
		p++;
	char *s = ck_xstrndup(*pp, (size_t)(p - *pp));
	*pp = p;
	return s;
}

static void req_add_val(sel_req_t *r, char *v)
{
	r->vals = ck_xrealloc(r->vals, (r->nvals + 1) * sizeof(char *));
	r->vals[r->nvals++] = v;
}

static void req_clear(sel_req_t *r)
{
	free(r->key);
	for (size_t i = 0; i < r->nvals; i++)
		free(r->vals[i]);
	free(r->vals);
}

void ck_cache_selector_free(ck_cache_selector_t *sel)
{
	if (sel == NULL)
		return;
	for (size_t i = 0; i < sel->n; i++)
		req_clear(&sel->reqs[i]);
	free(sel->reqs);
	free(sel);
}

/* The word w at p, followed by a blank or '('. */
static bool word_at(const char *p, const char *w)
{
	size_t n = strlen(w);
	return strncmp(p, w, n) == 0 && (p[n] == ' ' || p[n] == '\t' || p[n] == '(');
}

/* Parses "(a, b)" into r. */
static int parse_set(const char *s, const char **pp, sel_req_t *r, char **err)
{
	const char *p = skip_ws(*pp);
	if (*p != '(')
		return ck_err_set(err, "label selector \"%s\": expected '(' at offset %zu", s,
		                  (size_t)(p - s));
	p = skip_ws(p + 1);
	if (*p == ')')
		return ck_err_set(err, "label selector \"%s\": empty value set for key %s", s,
		                  r->key);
	for (;;) {
		p = skip_ws(p);
		req_add_val(r, read_run(&p, val_char));
		p = skip_ws(p);
		if (*p == ',') {
			p++;
			continue;
		}
		if (*p == ')')
			break;
		return ck_err_set(err, "label selector \"%s\": expected ',' or ')' at offset %zu",
		                  s, (size_t)(p - s));
	}
	*pp = p + 1;
	return 0;
}

static int parse_req(const char *s, const char **pp, sel_req_t *r, char **err)
{
	const char *p = skip_ws(*pp);
	bool neg = false;
	if (*p == '!') {
		neg = true;
		p = skip_ws(p + 1);
	}
	r->key = read_run(&p, key_char);
	if (r->key[0] == '\0')
		return ck_err_set(err, "label selector \"%s\": expected a key at offset %zu", s,
		                  (size_t)(p - s));
	p = skip_ws(p);
	if (neg) {
		r->op = OP_NOT_EXISTS;
	} else if (*p == ',' || *p == '\0') {
		r->op = OP_EXISTS;
	} else if (p[0] == '=' || (p[0] == '!' && p[1] == '=')) {
		r->op = p[0] == '=' ? OP_EQ : OP_NE;
		p += (p[0] == '!' || p[1] == '=') ? 2 : 1;
		p = skip_ws(p);
		req_add_val(r, read_run(&p, val_char));
	} else if (p[0] == '>' || p[0] == '<') {
		r->op = p[0] == '>' ? OP_GT : OP_LT;
		p = skip_ws(p + 1);
		char *v = read_run(&p, val_char);
		char *end;
		errno = 0;
		long long n = strtoll(v, &end, 10);
		bool bad = v[0] == '\0' || *end != '\0' || errno != 0;
		free(v);
		if (bad)
			return ck_err_set(err,
			                  "label selector \"%s\": key %s: '%c' needs an integer", s,
			                  r->key, r->op == OP_GT ? '>' : '<');
		r->num = n;
	} else if (word_at(p, "in") || word_at(p, "notin")) {
		r->op = p[0] == 'i' ? OP_IN : OP_NOTIN;
		p += r->op == OP_IN ? 2 : 5;
		if (parse_set(s, &p, r, err) != 0)
			return -1;
	} else {
		return ck_err_set(err, "label selector \"%s\": unexpected '%c' at offset %zu", s,
		                  *p, (size_t)(p - s));
	}
	*pp = skip_ws(p);
	return 0;
}

ck_cache_selector_t *ck_cache_selector_parse(const char *s, char **err)
{
	ck_cache_selector_t *sel = ck_xcalloc(1, sizeof(*sel));
	if (s == NULL)
		return sel;
	const char *p = skip_ws(s);
	if (*p == '\0')
		return sel;
	for (;;) {
		sel->reqs = ck_xrealloc(sel->reqs, (sel->n + 1) * sizeof(*sel->reqs));
		sel_req_t *r = &sel->reqs[sel->n++];
		memset(r, 0, sizeof(*r));
		if (parse_req(s, &p, r, err) != 0)
			goto fail;
		if (*p == '\0')
			break;
		if (*p != ',') {
			ck_err_set(err, "label selector \"%s\": expected ',' at offset %zu", s,
			           (size_t)(p - s));
			goto fail;
		}
		p++;
	}
	return sel;
fail:
	ck_cache_selector_free(sel);
	return NULL;
}

static bool in_vals(const sel_req_t *r, const char *v)
{
	for (size_t i = 0; i < r->nvals; i++)
		if (strcmp(r->vals[i], v) == 0)
			return true;
	return false;
}

bool ck_cache_selector_matches(const ck_cache_selector_t *sel, const ck_obj_t *obj)
{
	if (sel == NULL)
		return true;
	for (size_t i = 0; i < sel->n; i++) {
		const sel_req_t *r = &sel->reqs[i];
		const char *v = ck_obj_label(obj, r->key);
		bool ok;
		switch (r->op) {
		case OP_EQ:
		case OP_IN:
			ok = v != NULL && in_vals(r, v);
			break;
		case OP_NE:
		case OP_NOTIN:
			ok = v == NULL || !in_vals(r, v);
			break;
		case OP_EXISTS:
			ok = v != NULL;
			break;
		case OP_NOT_EXISTS:
			ok = v == NULL;
			break;
		case OP_GT:
		case OP_LT: {
			char *end;
			errno = 0;
			long long n = v ? strtoll(v, &end, 10) : 0;
			if (v == NULL || v[0] == '\0' || *end != '\0' || errno != 0)
				ok = false;
			else
				ok = r->op == OP_GT ? n > r->num : n < r->num;
			break;
		}
		default:
			ok = false;
		}
		if (!ok)
			return false;
	}
	return true;
}
