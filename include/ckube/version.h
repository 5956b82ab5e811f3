/*
 * version: which libckube a program was compiled against, and which it runs with.
 *
 * The macros are the headers' version; ck_version() and ck_version_number() are
 * the library's, so a program can refuse to run on an older shared library than
 * it was built for. The soname changes with CKUBE_VERSION_MAJOR (libckube.so.0
 * while it is 0: any 0.x release may change the API). The Makefile checks that
 * these numbers match the VERSION file.
 */
#ifndef CKUBE_VERSION_H
#define CKUBE_VERSION_H

#include <ckube/export.h>

#define CKUBE_VERSION_MAJOR  0
#define CKUBE_VERSION_MINOR  1
#define CKUBE_VERSION_PATCH  0
#define CKUBE_VERSION_STRING "0.1.0"
/* One comparable number: 0x00MMmmpp. */
#define CKUBE_VERSION_NUM                                                                          \
	((CKUBE_VERSION_MAJOR << 16) | (CKUBE_VERSION_MINOR << 8) | CKUBE_VERSION_PATCH)

/* The library's version as "MAJOR.MINOR.PATCH"; a static string. Any thread. */
CKUBE_API const char *ck_version(void);

/* The library's CKUBE_VERSION_NUM. Any thread. */
CKUBE_API unsigned ck_version_number(void);

#endif
