/*
 * matmul_dnnl.h - GEMMs on oneDNN's matmul primitive: bfloat16 ones
 * (float32 accumulation) for matmul.c and linear, and float32 linear (its
 * bias added in the kernel's epilogue), when oneDNN can build one.
 */
#ifndef MUSA_CPU_MATMUL_DNNL_H
#define MUSA_CPU_MATMUL_DNNL_H

#include "../kernel.h"

/* C (M x N, row stride ldc) = A B (+ bias row of N), BLAS conventions: A is
 * M x K read with ta ('N': row stride lda, 'T': column stride lda), B is
 * K x N likewise. Compared as bytes: zero it before filling. */
#define MUSA_GEMM_BATCH_DIMS 4

typedef struct {
    int64_t M, N, K, lda, ldb, ldc;
    char ta, tb;
    bool bias;
    bool f32; /* float32 operands and product; else bfloat16 */
    /* nb > 0: a batch of products in one call, over nb batch dims of sizes
     * bd, each operand at strides sa, sb, sc (elements) along them; a stride
     * of 0 broadcasts that operand (a and b only). nb == 0: one product. */
    int nb;
    int64_t bd[MUSA_GEMM_BATCH_DIMS], sa[MUSA_GEMM_BATCH_DIMS], sb[MUSA_GEMM_BATCH_DIMS],
        sc[MUSA_GEMM_BATCH_DIMS];
} musa_gemm_shape;

/* Scratch bytes for this GEMM, or (size_t)-1 when oneDNN cannot run it. */
size_t musa_dnnl_gemm_workspace(const musa_gemm_shape *s);

/* Run it on buffers of its dtype (bias: N values, or NULL when !s->bias).
 * Returns MUSA_OK, or a status after which the caller may fall back. */
int musa_dnnl_gemm(const musa_gemm_shape *s, const void *a, const void *b, const void *bias,
                   void *c, void *scratch, size_t scratch_bytes);

#endif
