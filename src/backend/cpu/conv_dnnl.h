/*
 * conv_dnnl.h - float32 and bfloat16 convolutions on oneDNN primitives (forward,
 * backward data, backward weights), used by conv.c when oneDNN supports
 * the case; conv.c's im2col + GEMM path is the reference and fallback.
 */
#ifndef MUSA_CPU_CONV_DNNL_H
#define MUSA_CPU_CONV_DNNL_H

#include <dnnl.h>

#include "../kernel.h"

/* The CPU engine every oneDNN primitive here uses (created once), or NULL
 * when oneDNN has none. */
dnnl_engine_t musa_dnnl_engine(void);

enum { MUSA_CONV_FWD, MUSA_CONV_BWD_DATA, MUSA_CONV_BWD_WEIGHTS };

typedef struct {
    int64_t N, C, H, W, Co, kh, kw, Ho, Wo, sh, sw, ph, pw, dh, dw, groups;
    int64_t bf16; /* 1: bfloat16 buffers (float32 accumulation), 0: float32 */
    int64_t nhwc; /* 1: x, y and their gradients are NHWC buffers (no reorders) */
    int64_t wino; /* 1: oneDNN's Winograd algorithm (float32 3x3 stride 1; else no primitive) */
} musa_conv_shape;

/* Workspace the oneDNN path needs for this convolution, or (size_t)-1 when
 * oneDNN cannot run it (then use im2col). */
size_t musa_dnnl_conv_workspace(int kind, const musa_conv_shape *s, bool bias);

/* Run it. Pointers are contiguous NCHW (NHWC with s->nhwc) / OIHW float32
 * (bfloat16 with s->bf16) buffers:
 *   fwd:          a = x, b = w, c = bias or NULL, out = y
 *   bwd data:     a = gy, b = w, out = gx
 *   bwd weights:  a = x, b = gy, out = gw
 * Returns MUSA_OK, or a status after which the caller may fall back. */
int musa_dnnl_conv(int kind, const musa_conv_shape *s, const void *a, const void *b, const void *c,
                   void *out, void *scratch, size_t scratch_bytes);

#endif
