/*
 * syntax: what the codec's two JSON readers share (internal, not installed): the
 * document reader (json.c) and the streaming typed decoder (decode.c) read
 * integers and report yajl's syntax errors the same way.
 */
#ifndef CKUBE_CODEC_SYNTAX_H
#define CKUBE_CODEC_SYNTAX_H

#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_parse.h>

typedef enum {
	CK_CODEC_INT_OK,
	CK_CODEC_INT_NOT_INTEGER, /* empty, a fraction, an exponent, anything not -?digits */
	CK_CODEC_INT_RANGE,       /* an integer outside int64_t */
} ck_codec_int_t;

/* Reads the JSON number s[0..l) as an int64_t into *out (untouched unless OK). */
ck_codec_int_t ck_codec_i_parse_int(const char *s, size_t l, int64_t *out);

/* Returns a new "malformed JSON after byte <good_end>: <yajl's message>" string,
 * with ' (near "<near>")' when near is not empty (the caller's printable excerpt;
 * secrets pass ""). h is the parser that failed. */
char *ck_codec_i_syntax_error(yajl_handle h, uint64_t good_end, const char *near);

#endif
