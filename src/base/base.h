/*
 * base.h - the bottom layer every other file includes: the public header, the
 * internal error helpers, and a few macros.
 *
 * Invariants: nothing here depends on any other musa layer. MUSA_ASSERT guards
 * internal invariants only; input-dependent failures return a status through
 * musa_err() and never abort.
 */
#ifndef MUSA_BASE_H
#define MUSA_BASE_H

#include "musa.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MUSA_LIKELY(x)    __builtin_expect(!!(x), 1)
#define MUSA_UNLIKELY(x)  __builtin_expect(!!(x), 0)
#define MUSA_MIN(a, b)    ((a) < (b) ? (a) : (b))
#define MUSA_MAX(a, b)    ((a) > (b) ? (a) : (b))
#define MUSA_ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define MUSA_UNUSED(x)    ((void)(x))

/* Internal invariant check: a failure is a bug in musa, never bad input. */
#define MUSA_ASSERT(x)                                                                             \
    do {                                                                                           \
        if (MUSA_UNLIKELY(!(x))) musa_internal_abort(__FILE__, __LINE__, #x);                      \
    } while (0)

_Noreturn void musa_internal_abort(const char *file, int line, const char *what);

/* Set the thread-local last error and return `code` (a negative MUSA_ERR_*).
 * The message should start with "[function] ". */
int musa_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Convenience for the most common failure: out of memory in `where`. */
int musa_err_nomem(const char *where, size_t bytes);
/* "(2, 3)" into buf; returns buf. */
char *musa_shape_str(int ndim, const int64_t *shape, char *buf, size_t size);

/* Prepend "[where] " context to the current error message if it lacks one. */
void musa_err_prefix(const char *where);

/* Overflow-checked arithmetic on sizes; return false on overflow. */
static inline bool musa_mul_i64(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool musa_add_i64(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool musa_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
/* Saturating at SIZE_MAX (INT64_MAX): memory sizes computed from shapes,
 * which expanded views make as large as 2^62 elements without memory; a
 * size that wrapped instead gave a small buffer that a kernel overran,
 * while no allocation meets SIZE_MAX. */
static inline size_t musa_sat_add_size(size_t a, size_t b) {
    size_t r;
    return __builtin_add_overflow(a, b, &r) ? SIZE_MAX : r;
}
static inline size_t musa_sat_mul_size(size_t a, size_t b) {
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}
static inline int64_t musa_sat_mul_i64(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* malloc wrappers that set the last error on failure. */
void *musa_malloc(size_t bytes, const char *where);
void *musa_calloc(size_t n, size_t size, const char *where);
void *musa_realloc(void *p, size_t bytes, const char *where);

/* Monotonic clock in nanoseconds. */
uint64_t musa_now_ns(void);

#endif
