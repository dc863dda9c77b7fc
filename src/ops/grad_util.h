/*
 * grad_util.h - helpers shared by the backward formulas (grad_*.c).
 *
 * Every helper follows the op conventions: it returns a new reference or
 * NULL, and NULL inputs give NULL without touching the last error.
 */
#ifndef MUSA_GRAD_UTIL_H
#define MUSA_GRAD_UTIL_H

#include "op.h"

/* Zeros with the shape and dtype of input i. */
static inline musa_tensor *grad_zeros_like_input(const musa_grad_args *a, int i) {
    const musa_meta *m = &a->in_meta[i];
    return musa_zeros(m->ndim, m->shape, (musa_dtype)m->dtype);
}

/* g reduced to input i's shape (undoing broadcasting), in its dtype. */
static inline musa_tensor *grad_to_input(const musa_grad_args *a, int i, musa_tensor *g) {
    const musa_meta *m = &a->in_meta[i];
    musa_tensor *s = musa_sum_to_size(g, m->ndim, m->shape);
    if (!s || s->dtype == m->dtype) return s;
    musa_tensor *c = musa_cast(s, (musa_dtype)m->dtype);
    musa_tensor_release(s);
    return c;
}

/* g, a reduction's output gradient, broadcast back over the reduced dims of
 * input 0 (dims canonical: sorted, non-negative; empty = all). */
musa_tensor *grad_expand_reduced(const musa_grad_args *a, musa_tensor *g, const musa_ints *dims,
                                 bool keepdim);

/* Gradient of output 0, or zeros shaped like it when absent. */
musa_tensor *grad_output_or_zeros(const musa_grad_args *a, int j, const musa_tensor *like);

#endif
