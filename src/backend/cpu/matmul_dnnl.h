/*
 * matmul_dnnl.h - bfloat16 GEMMs on oneDNN's matmul primitive (float32
 * accumulation), used by matmul.c and linear when oneDNN can build one.
 */
#ifndef MUSA_CPU_MATMUL_DNNL_H
#define MUSA_CPU_MATMUL_DNNL_H

#include "../kernel.h"

/* C (M x N, row stride ldc) = A B (+ bias row of N), BLAS conventions: A is
 * M x K read with ta ('N': row stride lda, 'T': column stride lda), B is
 * K x N likewise. Compared as bytes: zero it before filling. */
/* GEMMs of fewer multiply-adds than this run on one thread: below it, the
 * second thread's fork and join cost more than its half of the work saves.
 * Measured with dnnl_sgemm on the 2-core machine: 64x64x128 took 5.9 us on
 * one thread and 9.3 us on two, 128x128x128 21.1 and 19.7 us, 128x256x128
 * 42.5 and 27.3 us. The choice depends on the shape only, so eager calls
 * and plans make the same one. */
#define MUSA_SMALL_GEMM_MACS (1 << 21)

typedef struct {
    int64_t M, N, K, lda, ldb, ldc;
    char ta, tb;
    bool bias;
} musa_gemm_shape;

/* Scratch bytes for this GEMM, or (size_t)-1 when oneDNN cannot run it. */
size_t musa_dnnl_gemm_bf16_workspace(const musa_gemm_shape *s);

/* Run it on bfloat16 buffers (bias: N values, or NULL when !s->bias).
 * Returns MUSA_OK, or a status after which the caller may fall back. */
int musa_dnnl_gemm_bf16(const musa_gemm_shape *s, const void *a, const void *b, const void *bias,
                        void *c, void *scratch, size_t scratch_bytes);

#endif
