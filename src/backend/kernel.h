/*
 * kernel.h - the ABI between the op layer and the backends.
 *
 * A kernel sees plain "kernel views" - a data pointer, dtype, shape and
 * strides - never tensors, refcounts or autograd. That keeps backends below
 * the tensor layer and lets the static-graph executor call the very same
 * kernels on buffers it planned itself.
 *
 * Invariants: kernels never allocate; scratch memory comes in ctx->scratch,
 * sized by the op's workspace function. Kernels run on the caller's thread
 * and may use musa_parallel_for. Outputs are written in full; inputs are
 * never written (in-place ops pass the same view as input and output, and
 * only for ops whose kernels read each element before writing it).
 */
#ifndef MUSA_KERNEL_H
#define MUSA_KERNEL_H

#include "../base/base.h"
#include "attrs.h"

typedef struct musa_kview {
    char *data;                     /* first element (NULL for meta) */
    int32_t dtype;                  /* musa_dtype */
    int32_t ndim;                   /* 0..MUSA_MAX_DIMS */
    int64_t shape[MUSA_MAX_DIMS];   /* elements per dim */
    int64_t strides[MUSA_MAX_DIMS]; /* in elements */
} musa_kview;

typedef struct musa_kctx {
    void *scratch;        /* 64-byte aligned workspace, or NULL */
    size_t scratch_bytes; /* as asked for by the op's workspace function */
    const char *op_name;  /* for error messages */
} musa_kctx;

/* Run an op: out[0..n_out), in[0..n_in). Returns MUSA_OK or a status with
 * the last error set (e.g. integer division by zero). */
typedef int (*musa_kernel_fn)(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                              const void *attrs);
/* Scratch bytes the kernel needs for these operands (0 if none). */
typedef size_t (*musa_workspace_fn)(const musa_kview *out, int n_out, const musa_kview *in,
                                    int n_in, const void *attrs);

/* An elementwise kernel's inner loop over n elements: p[k] points at
 * operand k's first element (output first, then the inputs) and s[k] is its
 * stride in bytes (0: one element for all). */
typedef void (*musa_loop_fn)(void *ctx, int64_t n, char **p, const int64_t *s);

/* The loop an elementwise kernel would run on these views, for callers that
 * walk contiguous runs themselves (a plan's fused tiles): the same loop on
 * the same elements, so the same bits. The loop takes a NULL ctx. NULL when
 * the kernel must run whole for these dtypes (integer arithmetic, which
 * reports division by zero through its ctx). It reads the views' dtypes,
 * and the data of inputs with ndim 0 where that data is not NULL (pow's
 * scalar exponent); with NULL data it still says whether a loop exists.
 * Kernels that have one define cpu_<name>_loop next to cpu_<name>. */
typedef musa_loop_fn (*musa_loop_resolve_fn)(const musa_kview *out, const musa_kview *in,
                                             const void *attrs);

/* The product of the other dims of an empty view may overflow (a view of
 * shape (0, 2^62, 4) is valid), so these helpers look for a zero first. */
static inline bool musa_kview_empty(const musa_kview *v) {
    for (int i = 0; i < v->ndim; i++)
        if (v->shape[i] == 0) return true;
    return false;
}

/* Whether every one of n views is empty. Callers skip the kernel then: it
 * would write nothing, and so kernels may take a non-empty output, whose
 * dims' products fit int64, for granted. */
static inline bool musa_kviews_all_empty(const musa_kview *v, int n) {
    for (int i = 0; i < n; i++)
        if (!musa_kview_empty(&v[i])) return false;
    return true;
}

static inline int64_t musa_kview_numel(const musa_kview *v) {
    if (musa_kview_empty(v)) return 0;
    int64_t n = 1;
    for (int i = 0; i < v->ndim; i++) n *= v->shape[i];
    return n;
}

/* Set v's strides to row-major for its shape (as musa_contiguous_strides). */
static inline void musa_contiguous_strides_k(musa_kview *v) {
    int64_t s = 1;
    for (int i = v->ndim - 1; i >= 0; i--) {
        v->strides[i] = s;
        if (!musa_mul_i64(s, v->shape[i] ? v->shape[i] : 1, &s)) s = v->strides[i];
    }
}

/* Row-major (size-1 dims may have any stride); an empty view addresses no
 * element and counts as contiguous, as in PyTorch. */
static inline bool musa_kview_contiguous(const musa_kview *v) {
    if (musa_kview_empty(v)) return true;
    int64_t expect = 1;
    for (int i = v->ndim - 1; i >= 0; i--) {
        if (v->shape[i] != 1 && v->strides[i] != expect) return false;
        expect *= v->shape[i];
    }
    return true;
}

#endif
