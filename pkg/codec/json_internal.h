/*
 * json_internal: the JSON reader's mode for secrets; not a public header.
 */
#ifndef CKUBE_CODEC_JSON_INTERNAL_H
#define CKUBE_CODEC_JSON_INTERNAL_H

#include <ckube/json.h>

/*
 * As ck_json_parse, for text that holds secrets (an exec plugin's
 * ExecCredential): the same depth bound; an error names the byte offset but
 * quotes nothing of the text; the document's memory and the parser's buffers are
 * wiped before they are freed (free with ck_json_doc_free as usual).
 */
ck_json_doc_t *ck_json_i_parse_secret(const char *text, size_t len, char **err);

#endif
