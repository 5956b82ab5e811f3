/*
 * reactor: client-go's PrependReactor for the fake API server -- functions a test
 * hangs on a verb and resource to inject an error or latency -- and the action
 * log and counts a test reads back.
 *
 * Design note. The log records every attempt the server receives (so a retried
 * request counts twice, as the server sees it). Reactors are copied out under
 * the lock and called without it, so one may call back into the fake (seed,
 * inspect, clear its own counts).
 */
#include "pkg/fake/fake_internal.h"

#include <stdlib.h>
#include <string.h>

void ck_fake_prepend_reactor(ck_fake_t *f, const char *verb, const char *resource,
                             ck_fake_reactor_fn fn, void *ud)
{
	freactor_t *re = ck_xcalloc(1, sizeof(*re));
	re->verb = verb && strcmp(verb, "*") != 0 ? ck_xstrdup(verb) : NULL;
	re->resource = resource && strcmp(resource, "*") != 0 ? ck_xstrdup(resource) : NULL;
	re->fn = fn;
	re->ud = ud;
	pthread_mutex_lock(&f->mu);
	re->next = f->reactors;
	f->reactors = re;
	pthread_mutex_unlock(&f->mu);
}

static void reactors_free(freactor_t *re)
{
	while (re != NULL) {
		freactor_t *next = re->next;
		free(re->verb);
		free(re->resource);
		free(re);
		re = next;
	}
}

void ck_fake_clear_reactors(ck_fake_t *f)
{
	pthread_mutex_lock(&f->mu);
	freactor_t *re = f->reactors;
	f->reactors = NULL;
	pthread_mutex_unlock(&f->mu);
	reactors_free(re);
}

void fake_reactors_free(ck_fake_t *f)
{
	reactors_free(f->reactors);
	f->reactors = NULL;
	for (size_t i = 0; i < f->nactions; i++)
		free(f->actions[i]);
	free(f->actions);
	f->actions = NULL;
	f->nactions = f->capactions = 0;
}

/* "resource" or "resource/status" matches pattern res (NULL = any)? */
static bool res_matches(const char *pattern, const char *resource, const char *sub)
{
	if (pattern == NULL)
		return true;
	size_t n = strlen(resource);
	if (strncmp(pattern, resource, n) != 0)
		return false;
	if (pattern[n] == '\0')
		return true;
	return pattern[n] == '/' && sub != NULL && strcmp(pattern + n + 1, sub) == 0;
}

bool fake_react(ck_fake_t *f, const freq_t *q, fans_t *a, uint32_t *delay_ms)
{
	char *line =
	    ck_xasprintf("%s %s%s%s %s/%s", q->verb, q->resource, q->sub ? "/" : "",
	                 q->sub ? q->sub : "", q->ns[0] ? q->ns : "-", q->name ? q->name : "-");
	/* Copy the matching reactors under the lock; call them without it. */
	size_t n = 0, cap = 0;
	freactor_t *match = NULL;
	pthread_mutex_lock(&f->mu);
	if (f->nactions == f->capactions) {
		f->capactions = f->capactions ? 2 * f->capactions : 64;
		f->actions = ck_xrealloc(f->actions, f->capactions * sizeof(*f->actions));
	}
	f->actions[f->nactions++] = line;
	for (freactor_t *re = f->reactors; re != NULL; re = re->next) {
		if ((re->verb != NULL && strcmp(re->verb, q->verb) != 0) ||
		    !res_matches(re->resource, q->resource, q->sub))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 4;
			match = ck_xrealloc(match, cap * sizeof(*match));
		}
		match[n++] = *re;
	}
	pthread_mutex_unlock(&f->mu);

	ck_fake_action_t act = {
	    .verb = q->verb,
	    .group = q->group,
	    .version = q->version,
	    .resource = q->resource,
	    .ns = q->ns,
	    .name = q->name ? q->name : "",
	    .subresource = q->sub ? q->sub : "",
	    .content_type = q->ctype ? q->ctype : "",
	    .body = q->body ? q->body : "",
	    .body_len = q->body_len,
	    .query = q->query ? q->query : "",
	};
	bool answered = false;
	*delay_ms = 0;
	for (size_t i = 0; i < n && !answered; i++) {
		ck_fake_answer_t out = {0};
		match[i].fn(match[i].ud, &act, &out);
		*delay_ms += out.delay_ms;
		if (out.code != 0) {
			answered = true;
			a->code = out.code;
			a->retry_after = out.retry_after;
			if (out.body != NULL) {
				ck_sbuf_reset(&a->body);
				ck_sbuf_puts(&a->body, out.body);
			} else {
				fake_status(a, out.code, out.reason ? out.reason : "",
				            out.message ? out.message : "", NULL, NULL);
			}
		}
		free(out.body);
	}
	free(match);
	return answered;
}

size_t ck_fake_count(ck_fake_t *f, const char *verb, const char *resource)
{
	if (verb != NULL && strcmp(verb, "*") == 0)
		verb = NULL;
	if (resource != NULL && strcmp(resource, "*") == 0)
		resource = NULL;
	size_t n = 0;
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->nactions; i++) {
		const char *line = f->actions[i];
		const char *sp = strchr(line, ' ');
		const char *sp2 = strchr(sp + 1, ' ');
		if (verb != NULL &&
		    ((size_t)(sp - line) != strlen(verb) || strncmp(line, verb, strlen(verb)) != 0))
			continue;
		if (resource != NULL) {
			/* "foos" counts foos and foos/status; "foos/status" the subresource alone.
			 */
			size_t rl = strlen(resource), have = (size_t)(sp2 - sp - 1);
			if (!(strncmp(sp + 1, resource, rl) == 0 &&
			      (rl == have || (strchr(resource, '/') == NULL && sp[1 + rl] == '/'))))
				continue;
		}
		n++;
	}
	pthread_mutex_unlock(&f->mu);
	return n;
}

char *ck_fake_actions(ck_fake_t *f)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->nactions; i++) {
		ck_sbuf_puts(&b, f->actions[i]);
		ck_sbuf_putc(&b, '\n');
	}
	pthread_mutex_unlock(&f->mu);
	ck_sbuf_cstr(&b);
	return ck_sbuf_steal(&b);
}

void ck_fake_clear_actions(ck_fake_t *f)
{
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->nactions; i++)
		free(f->actions[i]);
	f->nactions = 0;
	pthread_mutex_unlock(&f->mu);
}
