/*
 * iter.h - the elementwise iterator: broadcasts inputs to the output's
 * shape, orders dims so the innermost loop walks the output's smallest
 * stride, merges dims that are contiguous for every operand, and runs a 1-D
 * inner loop over the rest, in parallel above a size threshold.
 *
 * Invariants: operand 0 is the output; inputs have ndim <= the output's and
 * broadcast to it (inference checked that); strides handed to loops are in
 * bytes and may be 0 (broadcast) or negative (internal flipped views).
 */
#ifndef MUSA_CPU_ITER_H
#define MUSA_CPU_ITER_H

#include "../kernel.h"

#define MUSA_ITER_MAX_OPS 4

typedef struct musa_iter {
    int nops;
    int ndim;                                          /* >= 1 after coalescing */
    int64_t shape[MUSA_MAX_DIMS];                      /* dim 0 is innermost */
    int64_t strides[MUSA_MAX_DIMS][MUSA_ITER_MAX_OPS]; /* bytes, [dim][operand] */
    char *data[MUSA_ITER_MAX_OPS];
    int64_t esize[MUSA_ITER_MAX_OPS]; /* element sizes, bytes */
    int64_t numel;
} musa_iter;

/* ops[0] is the output; pointers so callers need not copy views. */
void musa_iter_init(musa_iter *it, const musa_kview *const *ops, int nops);
/* Run fn over every element; ranges of at least `grain` elements go to the
 * thread pool when numel > grain. */
void musa_iter_run(const musa_iter *it, int64_t grain, musa_loop_fn fn, void *ctx);
/* The same for elementwise loops, which touch operand k only at
 * p[k] + i * s[k] (not gather's or scatter's, which offset a pointer by an
 * index): where inputs are transposed against the output (contiguous along
 * another dim than the output's innermost), fn runs on the rows of tiles
 * whose transposed inputs were first gathered into contiguous local rows
 * (iter.c). */
void musa_iter_run_elementwise(const musa_iter *it, int64_t grain, musa_loop_fn fn, void *ctx);

/* d[a * ds1 + b * es] = s[b * ss0 + a * es] for b < n0, a < n1 (bytes; es
 * of 1, 2, 4 or 8): a tile of n1 rows of n0 elements read along its
 * columns, for tiles that fit L1. */
void musa_tile_transpose(char *d, int64_t ds1, const char *s, int64_t ss0, int64_t n0, int64_t n1,
                         int64_t es);

/* Default grains: cheap ops (add, copy) and expensive ones (exp, tanh). */
#define MUSA_GRAIN_CHEAP 32768
#define MUSA_GRAIN_MATH  4096

#endif
