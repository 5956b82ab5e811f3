/*
 * cache_dump: --cache-dump-file. On SIGUSR1 the control thread writes the key of
 * every object in every informer's cache to that file, one "<resource> <key>" line
 * each, sorted per informer as the store lists it. Written beside the file and
 * renamed over it, so a reader never sees half a dump.
 *
 * Why: a sharded replica must cache exactly the objects of its buckets; the
 * informer metrics give counts, a dump gives the objects themselves, for tests
 * (tests/envtest/sharded_check.py) and for a person asking "what does this replica
 * hold?" without attaching a debugger.
 */
#include "pkg/manager/manager_internal.h"
#include <ckube/log.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mgr_cache_dump(ck_manager_t *d, char **err)
{
	const char *path = d->opt.cache_dump_file;
	char *tmp = ck_xasprintf("%s.tmp", path);
	size_t total = 0;
	int rc = -1, werr = 0; /* the errno of the first write that failed */
	FILE *f = fopen(tmp, "we");
	if (f == NULL) {
		ck_err_set(err, "cache dump: %s: %s", tmp, strerror(errno));
		goto out;
	}
	for (size_t i = 0; i < d->ninformers; i++) {
		ck_cache_informer_t *inf = d->informers[i];
		ck_cache_objs_t objs;
		ck_cache_store_list(ck_cache_informer_store(inf), &objs);
		for (size_t k = 0; k < objs.n; k++) {
			char *key = ck_obj_key_dup(objs.items[k]);
			if (fprintf(f, "%s %s\n", ck_cache_informer_name(inf), key) < 0 &&
			    werr == 0)
				werr = errno;
			free(key);
		}
		total += objs.n;
		ck_cache_objs_free(&objs);
	}
	/* A write that failed midway (ENOSPC) must not leave a truncated dump renamed
	 * into place as if whole; the error names its first cause. A failure held in
	 * stdio's buffer shows at fclose. */
	if (werr == 0 && ferror(f))
		werr = EIO;
	if (fclose(f) != 0 && werr == 0)
		werr = errno;
	if (werr != 0) {
		ck_err_set(err, "cache dump: writing %s: %s", tmp, strerror(werr));
		goto out;
	}
	if (rename(tmp, path) != 0) {
		ck_err_set(err, "cache dump: renaming %s to %s: %s", tmp, path, strerror(errno));
		goto out;
	}
	CK_LOG_INFO("Caches dumped", CK_KV_STR("file", path), CK_KV_UINT("objects", total));
	rc = 0;
out:
	if (rc != 0)
		unlink(tmp);
	free(tmp);
	return rc;
}
