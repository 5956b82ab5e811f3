/*
 * export: what libckube exports, and nothing else.
 *
 * The library is built with -fvisibility=hidden; every public function and
 * variable carries CKUBE_API, so the shared library's dynamic symbol table and
 * the static archive's global symbols are exactly the documented API, all
 * prefixed ck_ (tests/lib/check_symbols.sh fails on anything else).
 */
#ifndef CKUBE_EXPORT_H
#define CKUBE_EXPORT_H

#if defined(__GNUC__)
#define CKUBE_API __attribute__((visibility("default")))
#else
#define CKUBE_API
#endif

#endif
