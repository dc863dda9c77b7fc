/*
 * onnx_ops.h - what the files of ONNX ops share (onnx_ops_math.c: the
 * elementwise ops, reductions and Einsum; onnx_ops_conv.c: convolutions
 * and pools; onnx_ops_nn.c: Gemm, normalisations, softmax, losses, Resize,
 * LSTM and GRU; onnx_ops_shape.c:
 * shapes, indexing and constants). Each op is calls of musa's public ops,
 * so it is recorded as graph nodes, checked by those ops' inference and run
 * in plans like any captured code. Each file ends with its rows of the op
 * table (inputs and outputs counts, attributes, the inputs read as numbers),
 * which onnx.c checks at load. Semantics follow the ONNX operator docs for
 * opsets 1 to 18; where an opset changed an op (axes from an attribute to an
 * input, Softmax's axis), both forms are read.
 *
 * Handlers name intermediate tensors with T() (released after the node)
 * and give their outputs with put(): a handler never releases anything.
 */
#ifndef MUSA_IO_ONNX_OPS_H
#define MUSA_IO_ONNX_OPS_H

#include <math.h>
#include <stdio.h>

#include "../tensor/tensor.h"
#include "onnx.h"

#define ARGS        onnx_build *b, const onnx_node *n, musa_tensor **in, int n_out, musa_tensor **out
#define UNUSED_ARGS (void)b, (void)n, (void)in, (void)n_out, (void)out
#define T(expr)     onnx_tmp(b, (expr))
#define NUM(v)      T(musa_number(v))
#define ERR         musa_last_error_code()
/* evaluate expr (a new reference) into a temp named v, returning the error
 * if it failed */
#define LET(v, expr)                                                                               \
    musa_tensor *v = T(expr);                                                                      \
    if (!v) return ERR
/* the same for a helper whose result is a temp already (T inside it): LET
 * would list it twice, and the node's end would release it twice (a use
 * after free under ASan in ConvTranspose over 3-d input, GatherElements,
 * ScatterElements and an asymmetric AveragePool) */
#define HAVE(v, expr)                                                                              \
    musa_tensor *v = (expr);                                                                       \
    if (!v) return ERR

static inline int put(musa_tensor **out, musa_tensor *v) {
    if (!v) return ERR;
    *out = musa_tensor_retain(v);
    return MUSA_OK;
}

#define FAIL(code, ...) onnx_fail(b, n, code, __VA_ARGS__)

/* axis a of rank nd (negatives count from the end) into *out, checked */
static inline int axis_of(onnx_build *b, const onnx_node *n, int64_t a, int nd, int64_t *out) {
    int64_t r = a < 0 ? a + nd : a;
    if (r < 0 || r >= (nd ? nd : 1))
        return FAIL(MUSA_ERR_INDEX, "axis %lld is out of range for %d dims", (long long)a, nd);
    *out = r;
    return MUSA_OK;
}

#define GEOM_MAX ((int64_t)1 << 16) /* the largest kernel, stride, dilation or pad read */

/* x padded by ONNX-order pads (begins, then ends) on its last nd dims (a
 * temp of b; negative pads crop) */
musa_tensor *onnx_pad_spatial(onnx_build *b, musa_tensor *x, int nd, const int64_t *pads,
                              double value);

/* rows of the op table */
#define U(name)                                                                                    \
    { #name, 1, 1, 1, 1, "", false, 0, op_##name }
#define B2(name)                                                                                   \
    { #name, 2, 2, 1, 1, "", false, 0, op_##name }
#define RED(name)                                                                                  \
    { #name, 1, 2, 1, 1, "axes:ints,keepdims:i,noop_with_empty_axes:i", false, 2, op_##name }
#define GEOM "auto_pad:s,dilations:ints,kernel_shape:ints,pads:ints,strides:ints"
#define RNN                                                                                        \
    "activation_alpha:floats,activation_beta:floats,activations:strings,clip:f,direction:s,"       \
    "hidden_size:i,layout:i"

#endif
