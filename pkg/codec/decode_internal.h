/*
 * decode_internal: what status.c needs from the decoder; not a public header.
 */
#ifndef CKUBE_CODEC_DECODE_INTERNAL_H
#define CKUBE_CODEC_DECODE_INTERNAL_H

#include <ckube/status.h>

#include <stddef.h>

/*
 * Decodes a complete body as a metav1.Status into *st (which must be zeroed or
 * cleared). Returns 0 if the body is a JSON object whose kind is "Status", else -1
 * (st then holds whatever Status fields were seen, possibly none).
 */
int ck_dec_i_status_parse(const char *buf, size_t len, ck_status_t *st);

#endif
