/*
 * client_stats: the client's figures: requests per verb and code, and per verb
 * and resource, latency and rate-limiter wait histograms per verb, and what
 * curl's connections did. Separate because it is
 * read from any thread (under stats_mu, its own lock) and feeds only metrics and
 * tests; nothing in a request's course depends on it.
 *
 * Design note. That the client really uses one connection is measured, not
 * assumed: ck_client_conn_stats_snapshot counts the connections curl opened and
 * the HTTP version of every response head, and the integration test holds the
 * client to one connection, all HTTP/2.
 */
#include "pkg/rest/client_internal.h"

#include <stdlib.h>
#include <string.h>

static const double latency_bounds[CK_CLIENT_LATENCY_NBUCKETS] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
};

/* Index in methods[] of a method_static() pointer. */
static size_t method_index(const char *m)
{
	for (size_t i = 0; i < NMETHODS; i++)
		if (m == ck_client_i_methods[i])
			return i;
	ck_fatal("client: method %s not from method_static", m);
}

/* Adds secs to histogram h. stats_mu held. */
static void hist_add(lat_hist_t *h, double secs)
{
	for (size_t k = 0; k < CK_CLIENT_LATENCY_NBUCKETS; k++)
		if (secs <= latency_bounds[k])
			h->counts[k]++;
	h->sum += secs;
	h->count++;
}

/* Counts one attempt of method on resource ("" for a raw path). stats_mu held. */
static void res_stat_add(ck_client_t *c, const char *method, const char *resource)
{
	size_t i;
	for (i = 0; i < c->nres_stats; i++)
		if (c->res_stats[i].method == method &&
		    strcmp(c->res_stats[i].resource, resource) == 0)
			break;
	if (i == c->nres_stats) {
		if (c->nres_stats == c->capres_stats) {
			c->capres_stats = c->capres_stats ? c->capres_stats * 2 : 16;
			c->res_stats =
			    ck_xrealloc(c->res_stats, c->capres_stats * sizeof(*c->res_stats));
		}
		c->res_stats[c->nres_stats++] = (res_stat_entry_t){method, ck_xstrdup(resource), 0};
	}
	c->res_stats[i].count++;
}

void ck_client_i_stats_record(ck_client_t *c, const char *method, const char *resource, int code,
                              bool timed, double secs)
{
	pthread_mutex_lock(&c->stats_mu);
	res_stat_add(c, method, resource ? resource : "");
	size_t i;
	for (i = 0; i < c->nstats; i++)
		if (c->stats[i].method == method && c->stats[i].code == code)
			break;
	if (i == c->nstats) {
		if (c->nstats == c->capstats) {
			c->capstats = c->capstats ? c->capstats * 2 : 16;
			c->stats = ck_xrealloc(c->stats, c->capstats * sizeof(*c->stats));
		}
		c->stats[c->nstats++] = (stat_entry_t){method, code, 0};
	}
	c->stats[i].count++;
	if (timed)
		hist_add(&c->lat[method_index(method)], secs);
	pthread_mutex_unlock(&c->stats_mu);
}

void ck_client_i_stats_rate_limited(ck_client_t *c, const char *method, double secs)
{
	pthread_mutex_lock(&c->stats_mu);
	hist_add(&c->rl[method_index(method)], secs);
	pthread_mutex_unlock(&c->stats_mu);
}

void ck_client_i_stats_free(ck_client_t *c)
{
	for (size_t i = 0; i < c->nres_stats; i++)
		free(c->res_stats[i].resource);
	free(c->res_stats);
	free(c->stats);
}

/*
 * Adds the current attempt's new connections to the figures, once per attempt.
 * CURLINFO_NUM_CONNECTS is known once the transfer has connected; waiting for
 * the attempt to end would leave out a watch's connection for as long as it
 * streams, so this runs at the response head, and at the end for attempts that
 * never got one. Loop thread.
 */
void ck_client_i_conn_count(ck_req_t *r)
{
	if (r->conn_counted || r->easy == NULL)
		return;
	r->conn_counted = true;
	long n = 0;
	if (curl_easy_getinfo(r->easy, CURLINFO_NUM_CONNECTS, &n) != CURLE_OK || n <= 0)
		return;
	pthread_mutex_lock(&r->c->stats_mu);
	r->c->conn.connections += (uint64_t)n;
	pthread_mutex_unlock(&r->c->stats_mu);
}

/* A response head arrived for the current attempt (the first status line). */
void ck_client_i_conn_response(ck_req_t *r)
{
	long v = CURL_HTTP_VERSION_NONE;
	curl_easy_getinfo(r->easy, CURLINFO_HTTP_VERSION, &v);
	ck_client_i_conn_count(r);
	ck_client_conn_stats_t *s = &r->c->conn;
	pthread_mutex_lock(&r->c->stats_mu);
	s->responses++;
	switch (v) {
	case CURL_HTTP_VERSION_1_0:
		s->responses_http1++;
		s->last_http_version = 10;
		break;
	case CURL_HTTP_VERSION_1_1:
		s->responses_http1++;
		s->last_http_version = 11;
		break;
	case CURL_HTTP_VERSION_2_0:
		s->responses_http2++;
		s->last_http_version = 20;
		break;
	case CURL_HTTP_VERSION_3:
		s->responses_http3++;
		s->last_http_version = 30;
		break;
	default:
		s->last_http_version = 0;
		break;
	}
	pthread_mutex_unlock(&r->c->stats_mu);
}

void ck_client_stats_foreach(ck_client_t *c, ck_client_request_stat_cb cb, void *ud)
{
	pthread_mutex_lock(&c->stats_mu);
	size_t n = c->nstats;
	stat_entry_t *copy = ck_xmalloc((n ? n : 1) * sizeof(*copy));
	if (n)
		memcpy(copy, c->stats, n * sizeof(*copy));
	pthread_mutex_unlock(&c->stats_mu);
	for (size_t i = 0; i < n; i++)
		cb(ud, copy[i].method, copy[i].code, copy[i].count);
	free(copy);
}

/* Fills *out from h (a copy) and the shared bucket bounds. */
static void latency_fill(ck_client_latency_t *out, const char *verb, const lat_hist_t *h)
{
	out->verb = verb;
	memcpy(out->bounds, latency_bounds, sizeof(latency_bounds));
	memcpy(out->counts, h->counts, sizeof(out->counts));
	out->sum = h->sum;
	out->count = h->count;
}

void ck_client_latency_snapshot(ck_client_t *c, ck_client_latency_t *out)
{
	lat_hist_t total = {0};
	pthread_mutex_lock(&c->stats_mu);
	for (size_t m = 0; m < NMETHODS; m++) {
		for (size_t k = 0; k < CK_CLIENT_LATENCY_NBUCKETS; k++)
			total.counts[k] += c->lat[m].counts[k];
		total.sum += c->lat[m].sum;
		total.count += c->lat[m].count;
	}
	pthread_mutex_unlock(&c->stats_mu);
	latency_fill(out, NULL, &total);
}

/* Calls cb per verb of hists (a copy taken under stats_mu) that has a count. */
static void hists_foreach(ck_client_t *c, const lat_hist_t *hists, ck_client_latency_cb cb,
                          void *ud)
{
	lat_hist_t copy[NMETHODS];
	pthread_mutex_lock(&c->stats_mu);
	memcpy(copy, hists, sizeof(copy));
	pthread_mutex_unlock(&c->stats_mu);
	for (size_t m = 0; m < NMETHODS; m++) {
		if (copy[m].count == 0)
			continue;
		ck_client_latency_t lat;
		latency_fill(&lat, ck_client_i_methods[m], &copy[m]);
		cb(ud, &lat);
	}
}

void ck_client_latency_foreach(ck_client_t *c, ck_client_latency_cb cb, void *ud)
{
	hists_foreach(c, c->lat, cb, ud);
}

void ck_client_rate_limiter_foreach(ck_client_t *c, ck_client_latency_cb cb, void *ud)
{
	hists_foreach(c, c->rl, cb, ud);
}

void ck_client_resource_stats_foreach(ck_client_t *c, ck_client_resource_stat_cb cb, void *ud)
{
	pthread_mutex_lock(&c->stats_mu);
	size_t n = c->nres_stats;
	res_stat_entry_t *copy = ck_xcalloc(n ? n : 1, sizeof(*copy));
	for (size_t i = 0; i < n; i++)
		copy[i] =
		    (res_stat_entry_t){c->res_stats[i].method, ck_xstrdup(c->res_stats[i].resource),
		                       c->res_stats[i].count};
	pthread_mutex_unlock(&c->stats_mu);
	for (size_t i = 0; i < n; i++) {
		cb(ud, copy[i].method, copy[i].resource, copy[i].count);
		free(copy[i].resource);
	}
	free(copy);
}

void ck_client_conn_stats_snapshot(ck_client_t *c, ck_client_conn_stats_t *out)
{
	pthread_mutex_lock(&c->stats_mu);
	*out = c->conn;
	pthread_mutex_unlock(&c->stats_mu);
}
