/*
 * attention_mm.h - the products of fused attention (attention.c), described
 * once for both compute dtypes and run by small register-blocked float32
 * kernels (attention_mm.c) or by BLAS.
 *
 * Each product is C (M x N) = alpha sum_k A(i, k) B(k, c) [+ C], with A
 * and B row-major of leading dimensions lda and ldb, as BLAS takes them:
 * A(i, k) = A[i lda + k], or A[k lda + i] when at (A is stored
 * transposed); B likewise with bt. Causal attention makes part of A or C
 * structurally known, and a product may skip it (band, with diag the
 * query row of C's or A's row 0):
 * - ATT_COLS: row i needs only columns c <= i + diag (the rest of its C
 *   row is left unwritten: the caller masks it);
 * - ATT_K_BELOW: A(i, k) is exactly zero for k > i + diag (probabilities
 *   or their gradients past the diagonal): those terms add nothing;
 * - ATT_K_ABOVE: A(i, k) is exactly zero for k < i - diag (the same,
 *   transposed: rows are keys, the reduction runs over queries).
 */
#ifndef MUSA_ATTENTION_MM_H
#define MUSA_ATTENTION_MM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { ATT_FULL, ATT_COLS, ATT_K_BELOW, ATT_K_ABOVE };

typedef struct {
    int64_t M, N, K;
    const void *A;
    int64_t lda;
    const void *B;
    int64_t ldb;
    bool at, bt;
    void *C;
    int64_t ldc;
    double alpha;
    bool accumulate; /* C += ... instead of C = ... */
    int band;        /* ATT_FULL or one of the bounds above */
    int64_t diag;    /* the bound's offset */
} att_mm;

/* Runs p on this thread with the register-blocked float32 kernels, using
 * pack (K x N floats: a copy of B when it is stored transposed); false when
 * this build has none (no AVX-512) or p is larger than they take (M, N or
 * K over 128), and the caller takes BLAS. Every C element sums its k in
 * increasing order with fused multiply-adds, whatever the blocking around
 * it: results depend on the operands' values and shapes alone. */
bool att_mm_f32(const att_mm *p, float *pack);

#endif
