/*
 * obj_internal: what the decoder needs from obj.c beyond <ckube/obj.h>; not a
 * public header.
 */
#ifndef CKUBE_META_OBJ_INTERNAL_H
#define CKUBE_META_OBJ_INTERNAL_H

#include <ckube/obj.h>

#include <stddef.h>

/*
 * Writes " \"namespace/name\"" (or " \"name\"") of the object b is building, as far
 * as its metadata has been read, into out (cap bytes, always terminated); "" when
 * no name was read yet. Borrows b. The decoder's size-limit error then says which
 * object was too large: the API server writes metadata before spec and status.
 */
void ck_obj_i_builder_ident(const ck_obj_builder_t *b, char *out, size_t cap);

#endif
