/*
 * nn.c - the public neural-network functions: wrappers of the nn primitive
 * ops (convolution, pooling, normalisation, softmax, cross-entropy,
 * linear) and compositions of primitives (activations, the other losses,
 * embedding, dropout, batch-norm running statistics).
 *
 * Compositions on float16/bfloat16 inputs compute in float32 and round
 * once at the end (LOWP_WRAP), like the fused kernels do.
 */
#include <math.h>

#include "op.h"

#define T(expr) musa_tmp(&t, (expr))
#define NUM(v)  T(musa_number(v))

/* Run `expr` (which uses x) on a float32 copy of a float16/bfloat16 x and
 * round the result back once. */
#define LOWP_WRAP(x, expr)                                                                         \
    do {                                                                                           \
        if ((x) && musa_is_low_float((musa_dtype)(x)->dtype)) {                                    \
            musa_dtype orig_ = (musa_dtype)(x)->dtype;                                             \
            musa_tensor *keep_ = (x);                                                              \
            (x) = musa_cast(keep_, MUSA_DTYPE_FLOAT32);                                            \
            musa_tensor *r_ = (expr);                                                              \
            musa_tensor_release(x);                                                                \
            (x) = keep_;                                                                           \
            musa_tensor *c_ = musa_cast(r_, orig_);                                                \
            musa_tensor_release(r_);                                                               \
            return c_;                                                                             \
        }                                                                                          \
    } while (0)

static int set2(musa_ints *dst, const int64_t *v, const char *where) {
    memset(dst, 0, sizeof *dst);
    if (!v) return MUSA_OK; /* default */
    dst->n = 2;
    dst->v[0] = v[0], dst->v[1] = v[1];
    MUSA_UNUSED(where);
    return MUSA_OK;
}

static musa_tensor *reduce_loss(musa_tensor *l, musa_reduction r) {
    if (!l) return NULL;
    switch (r) {
    case MUSA_REDUCTION_NONE:
        return musa_tensor_retain(l);
    case MUSA_REDUCTION_SUM:
        return musa_sum(l, 0, NULL, false);
    case MUSA_REDUCTION_MEAN:
        return musa_mean(l, 0, NULL, false);
    default:
        musa_err(MUSA_ERR_VALUE, "[loss] unknown reduction %d", (int)r);
        return NULL;
    }
}

/* ---- convolution ---- */

musa_tensor *musa_conv2d(musa_tensor *x, musa_tensor *w, musa_tensor *b, const int64_t *stride,
                         const int64_t *padding, const int64_t *dilation, int64_t groups) {
    musa_attrs_conv a;
    musa_attrs_init(MUSA_ATTRS_conv, &a);
    set2(&a.stride, stride, "conv2d"), set2(&a.padding, padding, "conv2d"),
        set2(&a.dilation, dilation, "conv2d");
    a.groups = groups;
    musa_tensor *in[3] = {x, w, b};
    return musa_call(MUSA_OP_conv2d, b ? 3 : 2, in, &a);
}

musa_tensor *musa_conv1d(musa_tensor *x, musa_tensor *w, musa_tensor *b, int64_t stride,
                         int64_t padding, int64_t dilation, int64_t groups) {
    if (!x || !w) return NULL;
    if (x->ndim != 3 || w->ndim != 3) {
        musa_err(
            MUSA_ERR_VALUE,
            "[conv1d] input must be (N, C, L) and weight (Cout, C/groups, k); got %d and %d dims",
            x->ndim, w->ndim);
        return NULL;
    }
    musa_temps t = {0};
    musa_tensor *x4 = T(musa_unsqueeze(x, 2)), *w4 = T(musa_unsqueeze(w, 2));
    int64_t s[2] = {1, stride}, p[2] = {0, padding}, d[2] = {1, dilation};
    musa_tensor *y = T(musa_conv2d(x4, w4, b, s, p, d, groups));
    musa_tensor *r = musa_squeeze(y, 1, (int64_t[]){2});
    musa_temps_release(&t);
    return r;
}

musa_tensor *musa_conv_transpose2d(musa_tensor *x, musa_tensor *w, musa_tensor *b,
                                   const int64_t *stride, const int64_t *padding,
                                   const int64_t *output_padding, const int64_t *dilation,
                                   int64_t groups) {
    if (!x || !w) return NULL;
    if (x->ndim != 4 || w->ndim != 4) {
        musa_err(MUSA_ERR_VALUE, "[conv_transpose2d] input and weight must be 4-d");
        return NULL;
    }
    int64_t s[2] = {1, 1}, p[2] = {0, 0}, op[2] = {0, 0}, d[2] = {1, 1};
    for (int i = 0; i < 2; i++) {
        if (stride) s[i] = stride[i];
        if (padding) p[i] = padding[i];
        if (output_padding) op[i] = output_padding[i];
        if (dilation) d[i] = dilation[i];
        if (s[i] < 1 || d[i] < 1 || p[i] < 0) {
            musa_err(MUSA_ERR_VALUE,
                     "[conv_transpose2d] stride and dilation must be >= 1 and padding >= 0, got "
                     "stride %lld, dilation %lld, padding %lld",
                     (long long)s[i], (long long)d[i], (long long)p[i]);
            return NULL;
        }
        if (op[i] < 0 || (op[i] >= s[i] && op[i] >= d[i])) {
            musa_err(
                MUSA_ERR_VALUE,
                "[conv_transpose2d] output_padding %lld must be smaller than stride or dilation",
                (long long)op[i]);
            return NULL;
        }
    }
    if (groups < 1 || x->shape[1] != w->shape[0]) {
        musa_err(MUSA_ERR_VALUE,
                 "[conv_transpose2d] input has %lld channels but the weight expects %lld",
                 (long long)x->shape[1], (long long)w->shape[0]);
        return NULL;
    }
    musa_attrs_conv a;
    musa_attrs_init(MUSA_ATTRS_conv, &a);
    a.stride.n = a.padding.n = a.dilation.n = 2;
    a.groups = groups;
    a.shape.n = 4;
    a.shape.v[0] = x->shape[0];
    a.shape.v[1] = w->shape[1] * groups;
    for (int i = 0; i < 2; i++) {
        a.stride.v[i] = s[i], a.padding.v[i] = p[i], a.dilation.v[i] = d[i];
        /* (in - 1) s - 2 p + d (k - 1) + op + 1, in checked arithmetic: huge
         * strides, paddings and dilations must not overflow */
        int64_t grow, span, size;
        if (__builtin_mul_overflow(x->shape[2 + i] - 1, s[i], &grow) ||
            __builtin_mul_overflow(d[i], w->shape[2 + i] - 1, &span) ||
            __builtin_add_overflow(grow, span, &size) ||
            __builtin_sub_overflow(size, p[i], &size) ||
            __builtin_sub_overflow(size, p[i], &size) ||
            __builtin_add_overflow(size, op[i] + 1, &size)) {
            musa_err(MUSA_ERR_VALUE,
                     "[conv_transpose2d] the output size overflows (stride %lld, padding %lld, "
                     "dilation %lld)",
                     (long long)s[i], (long long)p[i], (long long)d[i]);
            return NULL;
        }
        a.shape.v[2 + i] = size;
        if (a.shape.v[2 + i] < 1) {
            musa_err(MUSA_ERR_VALUE, "[conv_transpose2d] the output would be empty");
            return NULL;
        }
    }
    musa_tensor *y = musa_call2(MUSA_OP_conv2d_backward_input, x, w, &a);
    if (!y || !b) return y;
    musa_temps t = {0};
    musa_tensor *bv = T(musa_reshape(b, 4, (int64_t[]){1, -1, 1, 1}));
    musa_tensor *r = musa_add(y, bv);
    musa_tensor_release(y);
    musa_temps_release(&t);
    return r;
}

/* ---- pooling ---- */

static void pool_attrs(musa_attrs_pool *a, const int64_t *kernel, const int64_t *stride,
                       const int64_t *padding, const int64_t *dilation, bool ceil_mode) {
    musa_attrs_init(MUSA_ATTRS_pool, a);
    set2(&a->kernel, kernel, "pool"), set2(&a->stride, stride, "pool");
    set2(&a->padding, padding, "pool"), set2(&a->dilation, dilation, "pool");
    a->ceil_mode = ceil_mode;
}

int musa_max_pool2d(musa_tensor *x, const int64_t *kernel, const int64_t *stride,
                    const int64_t *padding, const int64_t *dilation, bool ceil_mode,
                    musa_tensor **values, musa_tensor **indices) {
    if (!values) return musa_err(MUSA_ERR_VALUE, "[max_pool2d] output pointer is NULL");
    musa_attrs_pool a;
    pool_attrs(&a, kernel, stride, padding, dilation, ceil_mode);
    musa_tensor *out[2] = {NULL, NULL};
    *values = NULL;
    if (indices) *indices = NULL;
    int rc = musa_dispatch(MUSA_OP_max_pool2d, 1, &x, &a, out);
    if (rc) return rc;
    *values = out[0];
    if (indices)
        *indices = out[1];
    else
        musa_tensor_release(out[1]);
    return MUSA_OK;
}

musa_tensor *musa_avg_pool2d(musa_tensor *x, const int64_t *kernel, const int64_t *stride,
                             const int64_t *padding, bool ceil_mode, bool count_include_pad) {
    musa_attrs_pool a;
    pool_attrs(&a, kernel, stride, padding, NULL, ceil_mode);
    a.count_include_pad = count_include_pad;
    return musa_call1(MUSA_OP_avg_pool2d, x, &a);
}

musa_tensor *musa_adaptive_avg_pool2d(musa_tensor *x, int64_t out_h, int64_t out_w) {
    musa_attrs_pool a;
    int64_t k[2] = {out_h, out_w};
    pool_attrs(&a, k, NULL, NULL, NULL, false);
    return musa_call1(MUSA_OP_adaptive_avg_pool2d, x, &a);
}

/* ---- normalisation ---- */

/* weight/bias default to ones/zeros shaped `shape` */
static musa_tensor *affine_or(musa_tensor *p, int nd, const int64_t *shape, double v, musa_dtype dt,
                              musa_temps *t) {
    if (p) return p;
    return musa_tmp(t, musa_full(nd, shape, v, musa_is_float(dt) ? dt : MUSA_DTYPE_FLOAT32));
}

musa_tensor *musa_batch_norm(musa_tensor *x, musa_tensor *running_mean, musa_tensor *running_var,
                             musa_tensor *weight, musa_tensor *bias, bool training, double momentum,
                             double eps) {
    if (!x) return NULL;
    if (x->ndim < 2) {
        musa_err(MUSA_ERR_VALUE, "[batch_norm] input must be (N, C, ...), got %d dims", x->ndim);
        return NULL;
    }
    musa_temps t = {0};
    int64_t C = x->shape[1];
    musa_tensor *w = affine_or(weight, 1, &C, 1, (musa_dtype)x->dtype, &t);
    musa_tensor *b = affine_or(bias, 1, &C, 0, (musa_dtype)x->dtype, &t);
    musa_tensor *y = NULL;
    if (training) {
        musa_attrs_norm a = {.eps = eps, .groups = 1, .ndims = 1};
        musa_tensor *in[3] = {x, w, b}, *out[3] = {NULL, NULL, NULL};
        if (musa_dispatch(MUSA_OP_batch_norm, 3, in, &a, out)) goto done;
        y = out[0];
        musa_tmp(&t, out[1]), musa_tmp(&t, out[2]);
        if (running_mean && running_var) { /* running statistics, outside autograd */
            bool prev = musa_set_grad_enabled(false);
            double m = (double)(x->numel / (C ? C : 1));
            musa_tensor *var =
                T(musa_sub(T(musa_reciprocal(T(musa_mul(out[2], out[2])))), NUM(eps)));
            musa_tensor *unbiased = T(musa_mul(var, NUM(m > 1 ? m / (m - 1) : 1)));
            int rc = musa_mul_(running_mean, NUM(1 - momentum));
            if (!rc) rc = musa_add_(running_mean, T(musa_mul(out[1], NUM(momentum))));
            if (!rc) rc = musa_mul_(running_var, NUM(1 - momentum));
            if (!rc) rc = musa_add_(running_var, T(musa_mul(unbiased, NUM(momentum))));
            musa_set_grad_enabled(prev);
            if (rc) {
                musa_tensor_release(y);
                y = NULL;
            }
        }
    } else {
        if (!running_mean || !running_var) {
            musa_err(MUSA_ERR_VALUE, "[batch_norm] evaluation needs running_mean and running_var");
            goto done;
        }
        int64_t bshape[MUSA_MAX_DIMS];
        for (int d = 0; d < x->ndim; d++) bshape[d] = d == 1 ? C : 1;
        /* y = x * scale + shift with scale = w / sqrt(var + eps), shift = b - mean * scale */
        musa_tensor *scale = T(musa_mul(w, T(musa_rsqrt(T(musa_add(running_var, NUM(eps)))))));
        musa_tensor *shift = T(musa_sub(b, T(musa_mul(running_mean, scale))));
        musa_tensor *xs = T(musa_mul(x, T(musa_reshape(scale, x->ndim, bshape))));
        y = musa_add(xs, T(musa_reshape(shift, x->ndim, bshape)));
    }
done:
    musa_temps_release(&t);
    return y;
}

musa_tensor *musa_layer_norm(musa_tensor *x, int ndims, musa_tensor *weight, musa_tensor *bias,
                             double eps) {
    if (!x) return NULL;
    if (ndims < 1 || ndims > x->ndim) {
        musa_err(MUSA_ERR_VALUE, "[layer_norm] cannot normalise the last %d dims of a %d-d input",
                 ndims, x->ndim);
        return NULL;
    }
    musa_temps t = {0};
    const int64_t *ns = &x->shape[x->ndim - ndims];
    musa_tensor *w = affine_or(weight, ndims, ns, 1, (musa_dtype)x->dtype, &t);
    musa_tensor *b = affine_or(bias, ndims, ns, 0, (musa_dtype)x->dtype, &t);
    musa_attrs_norm a = {.eps = eps, .groups = 1, .ndims = ndims};
    musa_tensor *in[3] = {x, w, b};
    musa_tensor *y = musa_call(MUSA_OP_layer_norm, 3, in, &a);
    musa_temps_release(&t);
    return y;
}

musa_tensor *musa_group_norm(musa_tensor *x, int64_t groups, musa_tensor *weight, musa_tensor *bias,
                             double eps) {
    if (!x) return NULL;
    if (x->ndim < 2) {
        musa_err(MUSA_ERR_VALUE, "[group_norm] input must be (N, C, ...), got %d dims", x->ndim);
        return NULL;
    }
    musa_temps t = {0};
    int64_t C = x->shape[1];
    musa_tensor *w = affine_or(weight, 1, &C, 1, (musa_dtype)x->dtype, &t);
    musa_tensor *b = affine_or(bias, 1, &C, 0, (musa_dtype)x->dtype, &t);
    musa_attrs_norm a = {.eps = eps, .groups = groups, .ndims = 1};
    musa_tensor *in[3] = {x, w, b};
    musa_tensor *y = musa_call(MUSA_OP_group_norm, 3, in, &a);
    musa_temps_release(&t);
    return y;
}

/* ---- softmax and losses ---- */

musa_tensor *musa_softmax(musa_tensor *x, int64_t dim) {
    musa_attrs_dim a = {.dim = dim};
    return musa_call1(MUSA_OP_softmax, x, &a);
}

musa_tensor *musa_log_softmax(musa_tensor *x, int64_t dim) {
    musa_attrs_dim a = {.dim = dim};
    return musa_call1(MUSA_OP_log_softmax, x, &a);
}

musa_tensor *musa_cross_entropy(musa_tensor *logits, musa_tensor *target, int64_t ignore_index,
                                double label_smoothing, musa_reduction reduction) {
    if (!logits || !target) return NULL;
    if (!musa_is_float((musa_dtype)target->dtype)) {
        musa_attrs_xent a = {.ignore_index = ignore_index,
                             .label_smoothing = label_smoothing,
                             .reduction = (int64_t)reduction};
        return musa_call2(MUSA_OP_cross_entropy, logits, target, &a);
    }
    /* class probabilities: -sum(p_smoothed log_softmax(x)) over the class dim */
    int64_t cls = logits->ndim == 1 ? 0 : 1, C = logits->shape[cls];
    if (!(label_smoothing >= 0 && label_smoothing <= 1)) {
        musa_err(MUSA_ERR_VALUE, "[cross_entropy] label_smoothing must be in [0, 1], got %g",
                 label_smoothing);
        return NULL;
    }
    if (!musa_shape_equal(target->ndim, target->shape, logits->ndim, logits->shape)) {
        musa_err(MUSA_ERR_VALUE, "[cross_entropy] probability targets must have the logits' shape");
        return NULL;
    }
    musa_temps t = {0};
    musa_tensor *lp = T(musa_log_softmax(logits, cls));
    musa_tensor *p = target;
    if (label_smoothing > 0)
        p = T(musa_add(T(musa_mul(target, NUM(1 - label_smoothing))),
                       NUM(label_smoothing / (double)C)));
    musa_tensor *l = T(musa_neg(T(musa_sum(T(musa_mul(p, lp)), 1, &cls, false))));
    musa_tensor *r = reduce_loss(l, reduction);
    musa_temps_release(&t);
    return r;
}

musa_tensor *musa_nll_loss(musa_tensor *logp, musa_tensor *target, int64_t ignore_index,
                           musa_reduction reduction) {
    if (!logp || !target) return NULL;
    if (logp->ndim != 2 || target->ndim != 1 || target->shape[0] != logp->shape[0]) {
        musa_err(MUSA_ERR_VALUE, "[nll_loss] expects log-probabilities (N, C) and targets (N)");
        return NULL;
    }
    musa_temps t = {0};
    musa_tensor *keep = T(musa_ne(target, T(musa_number_int(ignore_index))));
    musa_tensor *safe = T(musa_where(keep, target, T(musa_number_int(0))));
    int64_t C = logp->shape[1];
    musa_tensor *bad = T(musa_logical_or(T(musa_lt(safe, T(musa_number_int(0)))),
                                         T(musa_ge(safe, T(musa_number_int(C))))));
    musa_tensor *anybad = T(musa_amax(T(musa_cast(bad, MUSA_DTYPE_INT32)), 0, NULL, false));
    int64_t b = 0;
    musa_tensor *r = NULL;
    if (anybad && anybad->storage && !musa_tensor_item_int(anybad, &b) && b) {
        musa_err(MUSA_ERR_INDEX, "[nll_loss] a target is out of bounds for %lld classes",
                 (long long)C);
        goto done;
    }
    /* Recorded into a graph, the check above is not: there the gather
     * refuses a bad target when the plan runs. */
    musa_tensor *picked =
        T(musa_squeeze(T(musa_gather(logp, 1, T(musa_unsqueeze(safe, 1)))), 1, (int64_t[]){1}));
    musa_tensor *w = T(musa_cast(keep, (musa_dtype)logp->dtype));
    musa_tensor *l = T(musa_neg(T(musa_mul(picked, w))));
    if (reduction == MUSA_REDUCTION_MEAN)
        r = musa_div(T(musa_sum(l, 0, NULL, false)), T(musa_sum(w, 0, NULL, false)));
    else
        r = reduce_loss(l, reduction);
done:
    musa_temps_release(&t);
    return r;
}

musa_tensor *musa_mse_loss(musa_tensor *a, musa_tensor *b, musa_reduction reduction) {
    musa_temps t = {0};
    musa_tensor *d = T(musa_sub(a, b));
    musa_tensor *r = reduce_loss(T(musa_mul(d, d)), reduction);
    musa_temps_release(&t);
    return r;
}

musa_tensor *musa_l1_loss(musa_tensor *a, musa_tensor *b, musa_reduction reduction) {
    musa_temps t = {0};
    musa_tensor *r = reduce_loss(T(musa_abs(T(musa_sub(a, b)))), reduction);
    musa_temps_release(&t);
    return r;
}

/* 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere */
musa_tensor *musa_smooth_l1_loss(musa_tensor *a, musa_tensor *b, double beta,
                                 musa_reduction reduction) {
    if (!(beta >= 0)) {
        musa_err(MUSA_ERR_VALUE, "[smooth_l1_loss] beta must be >= 0, got %g", beta);
        return NULL;
    }
    if (beta == 0) return musa_l1_loss(a, b, reduction);
    musa_temps t = {0};
    musa_tensor *d = T(musa_sub(a, b)), *ad = T(musa_abs(d));
    musa_tensor *quad = T(musa_div(T(musa_mul(T(musa_mul(d, d)), NUM(0.5))), NUM(beta)));
    musa_tensor *lin = T(musa_sub(ad, NUM(0.5 * beta)));
    musa_tensor *r = reduce_loss(T(musa_where(T(musa_lt(ad, NUM(beta))), quad, lin)), reduction);
    musa_temps_release(&t);
    return r;
}

/* -(y log p + (1 - y) log(1 - p)), logs clamped at -100 as PyTorch does */
/* log(x), -inf at 0, with a finite gradient at 0: log reads 1 there, so the
 * zero gradient a clamp passes back does not meet 1/0. */
static musa_tensor *safe_log(musa_temps *temps, musa_tensor *x) {
    musa_temps t = {0};
    musa_tensor *pos = T(musa_gt(x, NUM(0)));
    musa_tensor *r = musa_where(pos, T(musa_log(T(musa_where(pos, x, NUM(1))))), NUM(-INFINITY));
    musa_temps_release(&t);
    return musa_tmp(temps, r);
}

/* w * f, and 0 where w is 0 even when f is infinite. */
static musa_tensor *weighted(musa_temps *temps, musa_tensor *w, musa_tensor *f) {
    musa_temps t = {0};
    musa_tensor *r = musa_where(T(musa_eq(w, NUM(0))), NUM(0), T(musa_mul(w, f)));
    musa_temps_release(&t);
    return musa_tmp(temps, r);
}

musa_tensor *musa_binary_cross_entropy(musa_tensor *p, musa_tensor *y, musa_reduction reduction) {
    if (!p || !y) return NULL;
    musa_temps t = {0};
    /* probabilities must be probabilities, checked where values are at hand
     * (not in symbolic mode; a plan does not check them) */
    if (p->storage && p->numel && musa_tls.mode != MUSA_MODE_SYMBOLIC) {
        bool prev = musa_set_grad_enabled(false);
        musa_tensor *mn = T(musa_amin(p, 0, NULL, false)), *mx = T(musa_amax(p, 0, NULL, false));
        musa_set_grad_enabled(prev);
        double a = 0, b = 0;
        if (!mn || !mx || musa_tensor_item(mn, &a) || musa_tensor_item(mx, &b) ||
            !(a >= 0 && b <= 1)) {
            if (mn && mx)
                musa_err(MUSA_ERR_VALUE,
                         "[binary_cross_entropy] all elements of input should be between 0 and 1, "
                         "got values in [%g, %g]",
                         a, b);
            musa_temps_release(&t);
            return NULL;
        }
    }
    if (musa_tls.mode != MUSA_MODE_EAGER && p->numel) {
        /* Recorded into a graph, the check above is not: there each value
         * multiplies a one gathered at index 0 where it is a probability
         * and at 1, which the plan refuses, where it is not (NaN too). */
        musa_tensor *ok = T(musa_logical_and(T(musa_ge(p, NUM(0))), T(musa_le(p, NUM(1)))));
        musa_tensor *idx = T(musa_cast(T(musa_logical_not(ok)), MUSA_DTYPE_INT64));
        musa_tensor *one = T(musa_ones(1, (int64_t[]){1}, (musa_dtype)p->dtype));
        musa_tensor *got = T(musa_gather(one, 0, T(musa_flatten(idx, 0, -1))));
        p = T(musa_mul(p, T(musa_reshape(got, p->ndim, p->shape))));
    }
    double lo = -100;
    musa_tensor *q = T(musa_sub(NUM(1), p));
    musa_tensor *lp = T(musa_clamp(safe_log(&t, p), &lo, NULL));
    musa_tensor *l1p = T(musa_clamp(safe_log(&t, q), &lo, NULL));
    musa_tensor *l =
        T(musa_neg(T(musa_add(T(musa_mul(y, lp)), T(musa_mul(T(musa_sub(NUM(1), y)), l1p))))));
    musa_tensor *r = reduce_loss(l, reduction);
    musa_temps_release(&t);
    return r;
}

/* stable form: max(x, 0) - x y + log(1 + exp(-|x|)), with max(x, 0) - x y
 * as x (1 - y) or -x y by the sign of x, each 0 when its weight is (so
 * x = +-inf with the matching target gives 0, not inf - inf) */
musa_tensor *musa_binary_cross_entropy_with_logits(musa_tensor *x, musa_tensor *y,
                                                   musa_reduction reduction) {
    if (!x || !y) return NULL;
    musa_temps t = {0};
    musa_tensor *lin = T(musa_where(T(musa_ge(x, NUM(0))), weighted(&t, T(musa_sub(NUM(1), y)), x),
                                    weighted(&t, y, T(musa_neg(x)))));
    musa_tensor *l = T(musa_add(lin, T(musa_log1p(T(musa_exp(T(musa_neg(T(musa_abs(x))))))))));
    musa_tensor *r = reduce_loss(l, reduction);
    musa_temps_release(&t);
    return r;
}

/* ---- activations ---- */

musa_tensor *musa_gelu(musa_tensor *x, bool tanh_approximation) {
    musa_attrs_gelu a = {.tanh = tanh_approximation};
    return musa_call1(MUSA_OP_gelu, x, &a);
}

musa_tensor *musa_silu(musa_tensor *x) {
    LOWP_WRAP(x, musa_silu(x));
    musa_temps t = {0};
    musa_tensor *r = musa_mul(x, T(musa_sigmoid(x)));
    musa_temps_release(&t);
    return r;
}

musa_tensor *musa_leaky_relu(musa_tensor *x, double slope) {
    LOWP_WRAP(x, musa_leaky_relu(x, slope));
    musa_temps t = {0};
    musa_tensor *r = musa_where(T(musa_gt(x, NUM(0))), x, T(musa_mul(x, NUM(slope))));
    musa_temps_release(&t);
    return r;
}

musa_tensor *musa_elu(musa_tensor *x, double alpha) {
    LOWP_WRAP(x, musa_elu(x, alpha));
    musa_temps t = {0};
    musa_tensor *r =
        musa_where(T(musa_gt(x, NUM(0))), x, T(musa_mul(T(musa_expm1(x)), NUM(alpha))));
    musa_temps_release(&t);
    return r;
}

/* log(1 + exp(beta x)) / beta, linear above threshold */
musa_tensor *musa_softplus(musa_tensor *x, double beta, double threshold) {
    LOWP_WRAP(x, musa_softplus(x, beta, threshold));
    musa_temps t = {0};
    musa_tensor *bx = T(musa_mul(x, NUM(beta)));
    /* exp of the clamped value: the branch where() drops must stay finite, or
     * its zero gradient times exp's infinite one is NaN */
    musa_tensor *soft =
        T(musa_div(T(musa_log1p(T(musa_exp(T(musa_minimum(bx, NUM(threshold))))))), NUM(beta)));
    musa_tensor *r = musa_where(T(musa_gt(bx, NUM(threshold))), x, soft);
    musa_temps_release(&t);
    return r;
}

musa_tensor *musa_hardtanh(musa_tensor *x, double min_val, double max_val) {
    return musa_clamp(x, &min_val, &max_val);
}

/* ---- embedding, dropout, linear ---- */

musa_tensor *musa_embedding(musa_tensor *weight, musa_tensor *indices, int64_t padding_idx) {
    if (!weight || !indices) return NULL;
    if (weight->ndim != 2) {
        musa_err(MUSA_ERR_VALUE, "[embedding] weight must be (num_embeddings, dim), got %d dims",
                 weight->ndim);
        return NULL;
    }
    if (indices->ndim >= MUSA_MAX_DIMS) { /* the result has one dim more */
        musa_err(MUSA_ERR_VALUE, "[embedding] indices have %d dims; at most %d are supported",
                 indices->ndim, MUSA_MAX_DIMS - 1);
        return NULL;
    }
    musa_temps t = {0};
    int64_t flat = -1, n = weight->shape[0];
    musa_tensor *idx = T(musa_reshape(indices, 1, &flat));
    /* negative indices are out of range here (index_select would wrap them):
     * they become n, which the kernel rejects, so no host read is needed and
     * a compiled model checks its indices as it runs */
    musa_tensor *safe = T(musa_where(T(musa_lt(idx, NUM(0))), T(musa_number_int(n)), idx));
    musa_tensor *rows = T(musa_index_select(weight, 0, safe));
    if (!rows && safe && musa_last_error_code() == MUSA_ERR_INDEX) {
        musa_err(MUSA_ERR_INDEX, "[embedding] index out of range: indices must be in [0, %lld)",
                 (long long)n);
        musa_temps_release(&t);
        return NULL;
    }
    if (padding_idx >= 0 && rows) { /* the padding row takes no gradient: route it through detach */
        musa_tensor *keep = T(musa_unsqueeze(T(musa_ne(idx, T(musa_number_int(padding_idx)))), 1));
        rows = T(musa_where(keep, rows, T(musa_detach(rows))));
    }
    int64_t shape[MUSA_MAX_DIMS];
    int nd = indices->ndim;
    memcpy(shape, indices->shape, sizeof(int64_t) * (size_t)nd);
    shape[nd] = weight->shape[1];
    musa_tensor *r = musa_reshape(rows, nd + 1, shape);
    musa_temps_release(&t);
    return r;
}

musa_tensor *musa_dropout(musa_tensor *x, double p, bool training) {
    if (!x) return NULL;
    if (!(p >= 0 && p <= 1)) {
        musa_err(MUSA_ERR_VALUE, "[dropout] p must be in [0, 1], got %g", p);
        return NULL;
    }
    if (!training || p == 0) return musa_tensor_retain(x);
    musa_temps t = {0};
    if (p == 1) { /* all dropped: zeros that keep the history, as x * 0 */
        musa_tensor *r = musa_mul(x, NUM(0));
        musa_temps_release(&t);
        return r;
    }
    musa_dtype dt = musa_is_float((musa_dtype)x->dtype) ? (musa_dtype)x->dtype : MUSA_DTYPE_FLOAT32;
    musa_tensor *u = T(musa_rand(x->ndim, x->shape, dt));
    /* the scaled mask is the one tensor the multiply keeps for backward */
    musa_tensor *mask = T(musa_where(T(musa_ge(u, NUM(p))), NUM(1.0 / (1.0 - p)), NUM(0)));
    musa_tensor *r = musa_mul(x, T(musa_cast(mask, dt)));
    musa_temps_release(&t);
    return r;
}

musa_tensor *musa_linear(musa_tensor *x, musa_tensor *weight, musa_tensor *bias) {
    musa_tensor *in[3] = {x, weight, bias};
    return musa_call(MUSA_OP_linear, bias ? 3 : 2, in, NULL);
}

musa_tensor *musa_scaled_dot_product_attention(musa_tensor *q, musa_tensor *k, musa_tensor *v,
                                               musa_tensor *mask, double scale, bool causal) {
    if (!q || !k || !v) return NULL;
    if (mask && causal) {
        musa_err(MUSA_ERR_VALUE,
                 "[scaled_dot_product_attention] pass either a mask or causal, not both");
        return NULL;
    }
    if (isnan(scale)) {
        musa_err(MUSA_ERR_VALUE, "[scaled_dot_product_attention] scale is NaN");
        return NULL;
    }
    musa_attrs_attention a = {.scale = scale, .causal = causal};
    musa_tensor *in[4] = {q, k, v, mask};
    return musa_call(MUSA_OP_scaled_dot_product_attention, mask ? 4 : 3, in, &a);
}
