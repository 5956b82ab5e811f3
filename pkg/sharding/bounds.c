/*
 * bounds: where the buckets' ranges start, and the epoch rule (see
 * sharding_internal.h). Pure functions; sharding.c keeps them in the bounds
 * object and applies them.
 *
 * Why not equal ranges: FNV-1a mixes a name's last bytes into the high bits only
 * through the final multiplications, so names that differ only at the end
 * ("app-1" ... "app-30") fall next to each other (30 of them into 1 of 4 equal
 * ranges). Cutting at the quantiles of the hashes actually seen puts about the
 * same number of names in every bucket whatever their spelling.
 */
#include "pkg/sharding/sharding_internal.h"
#include <ckube/base.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned __int128 u128;

/* bounds[nb] is 0 for 2^64; as a 128-bit number. */
static u128 end_of(const uint64_t *bounds, uint32_t nb, uint32_t i)
{
	return i == nb ? (u128)1 << 64 : bounds[i];
}

void sh_equal_bounds(uint64_t *bounds, uint32_t nb)
{
	for (uint32_t i = 0; i < nb; i++)
		bounds[i] = (uint64_t)(((u128)i << 64) / nb);
	bounds[nb] = 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The index of the first hash of bucket k: k * floor(n / nb) + min(k, n % nb). */
static size_t cut_index(uint32_t k, size_t n, uint32_t nb)
{
	size_t r = n % nb;
	return (size_t)k * (n / nb) + (k < r ? k : r);
}

void sh_balanced_bounds(uint64_t *hashes, size_t n, uint32_t nb, uint64_t *bounds)
{
	if (n == 0) {
		sh_equal_bounds(bounds, nb);
		return;
	}
	qsort(hashes, n, sizeof(*hashes), cmp_u64);
	bounds[0] = 0;
	bounds[nb] = 0;
	/* Cut k (1..nb-1) goes before hash q(k): the first n % nb buckets hold one
	 * hash more than the others. Consecutive buckets, so the fuller ones spread
	 * round-robin over the replicas' home buckets (b % N), as do the empty ones
	 * when there are fewer hashes than buckets. The cuts sharing one q split the
	 * gap before hashes[q] evenly: midway for one cut. */
	for (uint32_t k = 1; k < nb;) {
		size_t q = cut_index(k, n, nb);
		uint32_t c = 1;
		while (k + c < nb && cut_index(k + c, n, nb) == q)
			c++;
		u128 lo = q == 0 ? 0 : hashes[q - 1];
		u128 hi = q == n ? (u128)1 << 64 : hashes[q];
		for (uint32_t j = 0; j < c; j++)
			bounds[k + j] = (uint64_t)(lo + (hi - lo) * (j + 1) / (c + 1));
		k += c;
	}
	/* Equal or adjacent hashes can leave two cuts equal: keep them strictly
	 * increasing, up then down from 2^64 (nb - 1 <= 1023 cuts in 2^64: the room
	 * is always there), in 128 bits so that nothing wraps. */
	u128 *c = ck_xcalloc(nb + 1, sizeof(*c));
	for (uint32_t k = 0; k <= nb; k++)
		c[k] = end_of(bounds, nb, k);
	for (uint32_t k = 1; k < nb; k++)
		if (c[k] <= c[k - 1])
			c[k] = c[k - 1] + 1;
	for (uint32_t k = nb - 1; k >= 1; k--)
		if (c[k] >= c[k + 1])
			c[k] = c[k + 1] - 1;
	for (uint32_t k = 1; k < nb; k++)
		bounds[k] = (uint64_t)c[k];
	free(c);
}

uint32_t sh_bucket_of(const uint64_t *bounds, uint32_t nb, uint64_t h)
{
	/* The last bucket whose start is <= h (bounds[0] is 0). */
	uint32_t lo = 0, hi = nb;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (bounds[mid] <= h)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

size_t sh_max_load(const uint64_t *bounds, uint32_t nb, const uint64_t *hashes, size_t n)
{
	size_t *load = ck_xcalloc(nb, sizeof(*load)), max = 0;
	for (size_t k = 0; k < n; k++) {
		size_t l = ++load[sh_bucket_of(bounds, nb, hashes[k])];
		max = l > max ? l : max;
	}
	free(load);
	return max;
}

bool sh_bounds_skewed(size_t max_load, size_t n, uint32_t nb, uint32_t skew_pct)
{
	/* max > ideal * pct / 100 and max >= ideal + 2, ideal = n / nb, in integers. */
	return (u128)max_load * nb * 100 > (u128)n * skew_pct &&
	       (u128)max_load * nb >= (u128)n + 2u * nb;
}

bool sh_bucket_changed(const uint64_t *a, const uint64_t *b, uint32_t i)
{
	return a[i] != b[i] || a[i + 1] != b[i + 1];
}

char *sh_bounds_format(const uint64_t *bounds, uint32_t nb)
{
	ck_sbuf_t b = CK_SBUF_INIT;
	for (uint32_t k = 1; k < nb; k++)
		ck_sbuf_printf(&b, "%s0x%016" PRIx64, k > 1 ? "," : "", bounds[k]);
	return ck_sbuf_steal(&b);
}

int sh_bounds_parse(const char *text, uint32_t nb, uint64_t *bounds, char **err)
{
	int rc = -1;
	uint64_t *out = ck_xcalloc(nb + 1, sizeof(*out));
	const char *p = text;
	uint32_t k = 1;

	if (nb > 1 || p[0] != '\0') {
		for (;; k++) {
			char *end = NULL;
			if (k >= nb) {
				ck_err_set(err, "more than %u boundaries (for %u buckets)", nb - 1,
				           nb);
				goto out;
			}
			if (p[0] != '0' || p[1] != 'x' || strspn(p + 2, "0123456789abcdef") != 16) {
				ck_err_set(
				    err,
				    "boundary %u (column %zu): not 0x and 16 lowercase hex digits",
				    k, (size_t)(p - text) + 1);
				goto out;
			}
			errno = 0;
			out[k] = strtoull(p + 2, &end, 16);
			if (out[k] <= out[k - 1]) {
				ck_err_set(err,
				           "boundary %u (column %zu): 0x%016" PRIx64
				           " does not follow the previous one (0x%016" PRIx64 ")",
				           k, (size_t)(p - text) + 1, out[k], out[k - 1]);
				goto out;
			}
			p = end;
			if (*p == '\0')
				break;
			if (*p != ',') {
				ck_err_set(err,
				           "column %zu: '%c' where ',' or the end was expected",
				           (size_t)(p - text) + 1, *p);
				goto out;
			}
			p++;
		}
		if (k != nb - 1) {
			ck_err_set(err, "%u boundaries, but %u buckets need %u", k, nb, nb - 1);
			goto out;
		}
	}
	out[0] = 0;
	out[nb] = 0;
	memcpy(bounds, out, (nb + 1) * sizeof(*out));
	rc = 0;
out:
	free(out);
	return rc;
}

int sh_epoch_parse(const char *text, uint64_t *epoch, char **err)
{
	char *end = NULL;
	if (text == NULL || text[0] < '0' || text[0] > '9') {
		ck_err_set(err, "epoch \"%s\" is not a decimal number", text != NULL ? text : "");
		return -1;
	}
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (*end != '\0' || errno != 0) {
		ck_err_set(err, "epoch \"%s\" is not a decimal number below 2^64", text);
		return -1;
	}
	*epoch = v;
	return 0;
}

sh_gate_t sh_acquire_gate(uint64_t epoch, const uint64_t *lease_epoch, uint32_t nb)
{
	sh_gate_t g = SH_GATE_OPEN;
	for (uint32_t k = 0; k < nb; k++) {
		if (lease_epoch[k] > epoch)
			return SH_GATE_STALE;
		if (lease_epoch[k] < epoch)
			g = SH_GATE_WAIT;
	}
	return g;
}
