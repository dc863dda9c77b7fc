/*
 * util.h - helpers for the op tests: a test-local random generator, random
 * tensors in several layouts, reading values back as doubles, and
 * tolerance checks per dtype (float64 1e-7; float32 rtol 1.3e-6 atol 1e-5;
 * float16 1e-3; bfloat16 1.6e-2).
 */
#ifndef MUSA_TEST_UTIL_H
#define MUSA_TEST_UTIL_H

#include <stdint.h>
#include <stdlib.h>

#include "harness.h"

typedef enum { L_CONTIG, L_TRANSPOSED, L_STRIDED, L_COUNT } layout;

extern const musa_dtype ALL_DTYPES[9];
extern const musa_dtype FLOAT_DTYPES[4];

double urand(void);        /* [0, 1) from the test generator */
void useed(uint64_t seed); /* reseed it */

/* A random tensor of `dtype` with values uniform in [lo, hi) (rounded for
 * integers, 0/1 for bool), laid out as asked: contiguous, the transpose of
 * a contiguous tensor (needs ndim >= 2), or every other element of a wider
 * tensor along the last dim. */
musa_tensor *rnd(musa_dtype dtype, int ndim, const int64_t *shape, double lo, double hi,
                 layout lay);
/* A tensor from a list of doubles (converted to dtype), row-major. */
/* A shape literal: S(3, 4). */
#define S(...) ((const int64_t[]){__VA_ARGS__})

musa_tensor *from_list(musa_dtype dtype, int ndim, const int64_t *shape, const double *v);

/* All values of t as doubles in row-major order (caller frees), or NULL. */
double *values(const musa_tensor *t);
/* All values of an integer tensor as int64, exactly. */
int64_t *ivalues(const musa_tensor *t);

/* Tolerances for comparing a dtype's results with a float64 reference. */
double tol_rel(musa_dtype d);
double tol_abs(musa_dtype d);
/* Compare n values against a reference with dtype tolerances; on mismatch
 * report the first bad index via harness_fail and return false. */
bool close_to(const char *what, musa_dtype d, const double *got, const double *want, int64_t n,
              const char *file, int line);
#define CHECK_CLOSE(what, d, got, want, n)                                                         \
    do {                                                                                           \
        if (!close_to((what), (d), (got), (want), (n), __FILE__, __LINE__)) return;                \
    } while (0)

/* Compare t with want (n values) using dtype tolerances scaled by
 * `scale`; NaN matches NaN. Reports via harness_fail. */
bool near(const char *what, musa_tensor *t, const double *want, int64_t n, double scale);

bool same_shape(const musa_tensor *t, int ndim, const int64_t *shape);
/* The sum of a * b over every element (broadcasting), as a double: adjoint
 * checks, <A x, z> = <x, A^T z>. NaN when an op fails. */
double dot(musa_tensor *a, musa_tensor *b);
/* a and b (either may be NULL: false) have one dtype and shape and equal
 * values bit for bit, NaN equal to NaN. */
bool same_values(const musa_tensor *a, const musa_tensor *b);

/* A custom op for the tests, "test::cube3": y = 3 x^2 (float32 or float64,
 * written on the raw data), its gradient 6 x g with musa ops. Registered
 * on first use; custom_same_as_input and custom_cube3_forward serve other
 * test ops too. */
int custom_cube3_op(void);
musa_tensor *custom_cube3(musa_tensor *x);
int custom_same_as_input(void *u, int n_in, const musa_tensor *const *in, musa_dtype *dt, int *ndim,
                         int64_t (*shape)[MUSA_MAX_DIMS]);
int custom_cube3_forward(void *u, int n_in, musa_tensor *const *in, int n_out,
                         musa_tensor *const *out);
#define CHECK_SHAPE(t, ndim, ...)                                                                  \
    do {                                                                                           \
        const int64_t s_[] = {__VA_ARGS__};                                                        \
        CHECK_MSG(same_shape((t), (ndim), s_), "unexpected shape for %s", #t);                     \
    } while (0)

/* Round a double to what dtype d can hold (the reference for casts). */
double round_to(double v, musa_dtype d);

/* An exact integer result as an integer dtype holds it (wrapping modulo
 * 2^bits, as integer arithmetic does); floats and bool go through round_to. */
double wrap_to(double v, musa_dtype d);
/* An int64 wrapped to integer dtype d (bool: nonzero), exactly. */
int64_t wrap_int(int64_t i, musa_dtype d);

/* Row-major multi-index helpers. */
void unravel(int64_t i, int ndim, const int64_t *shape, int64_t *idx);
int64_t ravel(int ndim, const int64_t *shape, const int64_t *idx);
int64_t numel_of(int ndim, const int64_t *shape);

/* Release a list of tensors (NULLs allowed). */
void release_all(int n, ...);

/* The plan of f(x) for x's shape: captured symbolically, optimised at
 * fusion `level` (verified), built with opt (NULL: defaults); the graph in
 * *gout (the caller frees both). NULL if any step fails. */
musa_plan *jit_compile_unary(musa_tensor *(*f)(musa_tensor *), musa_tensor *x, int level,
                             const musa_plan_options *opt, musa_graph **gout);

#endif
