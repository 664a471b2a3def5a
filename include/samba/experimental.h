/* samba/experimental.h: the experimental tier of the C interface.
 *
 * The rule (as zstd's ZSTD_STATIC_LINKING_ONLY): the declarations below are
 * visible only when SAMBA_EXPERIMENTAL is defined before samba.h (or this
 * header) is included:
 *
 *     #define SAMBA_EXPERIMENTAL
 *     #include <samba.h>
 *
 * Experimental functions may change or disappear between minor versions;
 * every other function of samba.h is stable: it never changes within a major
 * version (a changed signature is a new name, suffix _v2). A function leaves
 * this tier by moving, unchanged, into its area's header. Experimental
 * functions follow the conventions stated in samba.h all the same.
 * Part of the C interface; include <samba.h>. */
#ifndef SAMBA_EXPERIMENTAL_H
#define SAMBA_EXPERIMENTAL_H
#include "core.h"
#endif /* SAMBA_EXPERIMENTAL_H */

/* A separate guard, so a translation unit may include samba.h first without
 * and then with SAMBA_EXPERIMENTAL. */
#if defined(SAMBA_EXPERIMENTAL) && !defined(SAMBA_EXPERIMENTAL_H_DECLARED)
#define SAMBA_EXPERIMENTAL_H_DECLARED

#ifdef __cplusplus
extern "C" {
#endif

/* The signature of op `name` as one line of text, the form the schema's
 * error messages use: "add(a, b, *, alpha: float = 1)". Experimental: the
 * notation may change. BORROWED static string, valid for the life of the
 * process. Errors: NULL_POINTER, NOT_FOUND. */
SAMBA_API samba_status samba_op_signature(const char* name, const char** out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SAMBA_EXPERIMENTAL && !SAMBA_EXPERIMENTAL_H_DECLARED */
