/*
 * syntax: the integer reading and the syntax-error message both JSON readers use
 * (see syntax.h).
 */
#include "pkg/codec/syntax.h"

#include <ckube/base.h>

#include <stdbool.h>
#include <string.h>

ck_codec_int_t ck_codec_i_parse_int(const char *s, size_t l, int64_t *out)
{
	size_t i = 0;
	bool neg = l > 0 && s[0] == '-', over = false;
	if (neg)
		i++;
	if (i == l)
		return CK_CODEC_INT_NOT_INTEGER;
	uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
	for (; i < l; i++) {
		unsigned c = (unsigned char)s[i] - '0';
		if (c > 9)
			return CK_CODEC_INT_NOT_INTEGER;
		/* Past the limit the digits are still read: "1e999" is not an integer at
		 * all, "99999999999999999999" is one out of range. */
		if (over || v > (lim - c) / 10)
			over = true;
		else
			v = v * 10 + c;
	}
	if (over)
		return CK_CODEC_INT_RANGE;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return CK_CODEC_INT_OK;
}

char *ck_codec_i_syntax_error(yajl_handle h, uint64_t good_end, const char *near)
{
	unsigned char *ye = yajl_get_error(h, 0, NULL, 0);
	size_t yl = ye ? strlen((char *)ye) : 0;
	while (yl > 0 && (ye[yl - 1] == '\n' || ye[yl - 1] == ' '))
		yl--;
	bool q = near != NULL && near[0] != '\0';
	/* "after byte N": the input is valid JSON up to N, the next token is not. */
	char *msg = ck_xasprintf("malformed JSON after byte %llu: %.*s%s%s%s",
	                         (unsigned long long)good_end, (int)yl, ye ? (char *)ye : "",
	                         q ? " (near \"" : "", q ? near : "", q ? "\")" : "");
	if (ye)
		yajl_free_error(h, ye);
	return msg;
}
