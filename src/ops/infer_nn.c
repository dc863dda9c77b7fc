/*
 * infer_nn.c - inference for the neural network families: convolution,
 * pooling, normalisation, softmax, cross-entropy and linear. Attributes are
 * normalised here (two spatial values for stride/padding/dilation, defaults
 * filled in) so kernels and the IR see one canonical form.
 */
#include "op.h"

/* The result dtype for the listed inputs (integers promote to float32).
 * Kernels compute in float32 or float64 only: float16/bfloat16 inputs
 * arrive as float32 and the result is rounded once when stored. */
static musa_dtype float_inputs(musa_tensor *const *in, const int *which, int n, musa_infer *r) {
    musa_dtype t = (musa_dtype)in[which[0]]->dtype;
    for (int i = 1; i < n; i++) t = musa_promote_types(t, (musa_dtype)in[which[i]]->dtype);
    if (!musa_is_float(t)) t = MUSA_DTYPE_FLOAT32;
    musa_dtype c = musa_is_low_float(t) ? MUSA_DTYPE_FLOAT32 : t;
    for (int i = 0; i < n; i++) r->in_dtype[which[i]] = (int8_t)c;
    return t;
}

/* As float_inputs, for the ops whose kernels multiply bfloat16 on oneDNN
 * (linear, the convolutions): bfloat16 inputs arrive as bfloat16. */
static musa_dtype gemm_inputs(musa_tensor *const *in, const int *which, int n, musa_infer *r) {
    musa_dtype t = float_inputs(in, which, n, r);
    if (t == MUSA_DTYPE_BFLOAT16)
        for (int i = 0; i < n; i++) r->in_dtype[which[i]] = (int8_t)t;
    return t;
}

/* Fill a 2-value attribute: empty gets `def`, one value is repeated. */
static int pair(const musa_op_info *op, const char *what, musa_ints *v, int64_t def, int64_t min) {
    if (v->n == 0)
        v->v[0] = v->v[1] = def;
    else if (v->n == 1)
        v->v[1] = v->v[0];
    else if (v->n != 2)
        return musa_err(MUSA_ERR_VALUE, "[%s] %s takes 1 or 2 values, got %d", op->name, what,
                        v->n);
    v->n = 2;
    for (int i = 0; i < 2; i++)
        if (v->v[i] < min)
            return musa_err(MUSA_ERR_VALUE, "[%s] %s must be >= %lld, got %lld", op->name, what,
                            (long long)min, (long long)v->v[i]);
    return MUSA_OK;
}

static int conv_attrs(const musa_op_info *op, musa_attrs_conv *a) {
    int rc;
    if ((rc = pair(op, "stride", &a->stride, 1, 1))) return rc;
    if ((rc = pair(op, "padding", &a->padding, 0, 0))) return rc;
    if ((rc = pair(op, "dilation", &a->dilation, 1, 1))) return rc;
    if (a->groups < 1)
        return musa_err(MUSA_ERR_VALUE, "[%s] groups must be >= 1, got %lld", op->name,
                        (long long)a->groups);
    return MUSA_OK;
}

/* The dilated kernel span d (k - 1) + 1 and the padded size in + 2 p,
 * overflow-checked (dilation and padding come from the user). */
static int span_and_padded(const musa_op_info *op, int64_t in, int64_t k, int64_t p, int64_t d,
                           int64_t *span, int64_t *padded) {
    if (!musa_mul_i64(d, k - 1, span) || !musa_add_i64(*span, 1, span) ||
        !musa_mul_i64(p, 2, padded) || !musa_add_i64(in, *padded, padded))
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] kernel size %lld with dilation %lld and padding %lld on a dim of "
                        "%lld overflows int64",
                        op->name, (long long)k, (long long)d, (long long)p, (long long)in);
    return MUSA_OK;
}

/* Spatial output size; an error when the kernel does not fit. */
static int conv_out(const musa_op_info *op, int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                    int64_t *out) {
    int64_t span = 0, padded = 0;
    if (k < 1)
        return musa_err(MUSA_ERR_VALUE, "[%s] the weight's kernel size must be >= 1, got %lld",
                        op->name, (long long)k);
    int rc = span_and_padded(op, in, k, p, d, &span, &padded);
    if (rc) return rc;
    if (padded < span)
        return musa_err(
            MUSA_ERR_VALUE,
            "[%s] kernel size %lld (dilated to %lld) is larger than the padded input size %lld",
            op->name, (long long)k, (long long)span, (long long)padded);
    *out = (padded - span) / s + 1;
    return MUSA_OK;
}

/* Check x (N, C, H, W) against weight (Cout, C/groups, kh, kw); output size. */
static int conv_check(const musa_op_info *op, const musa_attrs_conv *a, const int64_t *xs,
                      const int64_t *ws, int64_t *out_shape) {
    char s1[128], s2[128];
    int64_t C = xs[1], Cout = ws[0];
    if (C % a->groups || Cout % a->groups)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] %lld input and %lld output channels are not divisible by groups %lld",
                        op->name, (long long)C, (long long)Cout, (long long)a->groups);
    int64_t wc;
    if (!musa_mul_i64(ws[1], a->groups, &wc) || wc != C)
        return musa_err(
            MUSA_ERR_VALUE,
            "[%s] input %s has %lld channels but weight %s expects %lld (x %lld groups)", op->name,
            musa_shape_str(4, xs, s1, sizeof s1), (long long)C,
            musa_shape_str(4, ws, s2, sizeof s2), (long long)ws[1], (long long)a->groups);
    out_shape[0] = xs[0];
    out_shape[1] = Cout;
    for (int i = 0; i < 2; i++) {
        int rc = conv_out(op, xs[2 + i], ws[2 + i], a->stride.v[i], a->padding.v[i],
                          a->dilation.v[i], &out_shape[2 + i]);
        if (rc) return rc;
    }
    return MUSA_OK;
}

/* With channels_last, the activations (x, y and their gradients) are NHWC
 * tensors: (N, H, W, C). The checks work on NCHW: xs as NCHW into buf. */
static const int64_t *nchw_of(const musa_attrs_conv *a, const int64_t *xs, int64_t *buf) {
    if (!a->channels_last) return xs;
    buf[0] = xs[0], buf[1] = xs[3], buf[2] = xs[1], buf[3] = xs[2];
    return buf;
}

/* An NCHW activation shape in the op's layout, in place. */
static int64_t *layout_of(const musa_attrs_conv *a, int64_t *s) {
    if (a->channels_last) {
        int64_t c = s[1];
        s[1] = s[2], s[2] = s[3], s[3] = c;
    }
    return s;
}

static int need_ndim(const musa_op_info *op, const char *what, const musa_tensor *t, int ndim) {
    if (t->ndim != ndim)
        return musa_err(MUSA_ERR_VALUE, "[%s] %s must have %d dims, got %d", op->name, what, ndim,
                        t->ndim);
    return MUSA_OK;
}

int infer_conv2d(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                 musa_infer *r) {
    musa_attrs_conv *a = attrs;
    if (n_in != 2 && n_in != 3)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] takes input, weight and an optional bias, got %d tensors", op->name,
                        n_in);
    int rc = conv_attrs(op, a);
    if (rc || (rc = need_ndim(op, "input", in[0], 4)) || (rc = need_ndim(op, "weight", in[1], 4)))
        return rc;
    if (n_in == 3 && (in[2]->ndim != 1 || in[2]->shape[0] != in[1]->shape[0]))
        return musa_err(MUSA_ERR_VALUE, "[%s] bias must have shape (%lld,)", op->name,
                        (long long)in[1]->shape[0]);
    int64_t out[4], xs[4];
    if ((rc = conv_check(op, a, nchw_of(a, in[0]->shape, xs), in[1]->shape, out))) return rc;
    musa_dtype t = gemm_inputs(in, (int[]){0, 1, 2}, n_in, r);
    musa_infer_out(r, 0, t, 4, layout_of(a, out));
    return MUSA_OK;
}

int infer_conv2d_bwd_input(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                           musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_conv *a = attrs;
    int rc = conv_attrs(op, a);
    if (rc || (rc = need_ndim(op, "gradient", in[0], 4)) ||
        (rc = need_ndim(op, "weight", in[1], 4)))
        return rc;
    if (a->shape.n != 4)
        return musa_err(MUSA_ERR_VALUE, "[%s] shape must give the input's 4 dims", op->name);
    int64_t out[4], xs[4];
    if ((rc = conv_check(op, a, nchw_of(a, a->shape.v, xs), in[1]->shape, out))) return rc;
    layout_of(a, out);
    for (int i = 0; i < 4; i++)
        if (out[i] != in[0]->shape[i]) {
            char s1[128], s2[128];
            return musa_err(MUSA_ERR_VALUE, "[%s] gradient has shape %s, the convolution gives %s",
                            op->name, musa_shape_str(4, in[0]->shape, s1, sizeof s1),
                            musa_shape_str(4, out, s2, sizeof s2));
        }
    musa_dtype t = gemm_inputs(in, (int[]){0, 1}, 2, r);
    musa_infer_out(r, 0, t, 4, a->shape.v);
    return MUSA_OK;
}

int infer_conv2d_bwd_weight(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                            musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_conv *a = attrs;
    int rc = conv_attrs(op, a);
    if (rc || (rc = need_ndim(op, "input", in[0], 4)) || (rc = need_ndim(op, "gradient", in[1], 4)))
        return rc;
    if (a->shape.n != 4)
        return musa_err(MUSA_ERR_VALUE, "[%s] shape must give the weight's 4 dims", op->name);
    int64_t out[4], xs[4];
    if ((rc = conv_check(op, a, nchw_of(a, in[0]->shape, xs), a->shape.v, out))) return rc;
    layout_of(a, out);
    for (int i = 0; i < 4; i++)
        if (out[i] != in[1]->shape[i])
            return musa_err(MUSA_ERR_VALUE, "[%s] gradient does not match the convolution's output",
                            op->name);
    musa_dtype t = gemm_inputs(in, (int[]){0, 1}, 2, r);
    musa_infer_out(r, 0, t, 4, a->shape.v);
    return MUSA_OK;
}

/* ---- pooling ---- */

static int pool_out(const musa_op_info *op, int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                    bool ceil_mode, int64_t *out) {
    if (p > k / 2)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] padding %lld should be at most half the kernel size %lld", op->name,
                        (long long)p, (long long)k);
    int64_t span = 0, padded = 0;
    int rc = span_and_padded(op, in, k, p, d, &span, &padded);
    if (rc) return rc;
    int64_t num = padded - span;
    if (num < 0)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] kernel size %lld is larger than the padded input size %lld", op->name,
                        (long long)span, (long long)padded);
    int64_t o = num / s + (ceil_mode && num % s) + 1, start;
    /* the last window must start inside (its start may pass int64: then it does not) */
    if (ceil_mode && (!musa_mul_i64(o - 1, s, &start) || start >= in + p)) o--;
    *out = o;
    return MUSA_OK;
}

static int pool_attrs(const musa_op_info *op, musa_attrs_pool *a, bool adaptive) {
    int rc;
    if (a->kernel.n == 0)
        return musa_err(MUSA_ERR_VALUE, "[%s] %s is required", op->name,
                        adaptive ? "output_size" : "kernel_size");
    if ((rc = pair(op, adaptive ? "output_size" : "kernel_size", &a->kernel, 1, 1))) return rc;
    if (adaptive) return MUSA_OK;
    if (a->stride.n == 0) a->stride = a->kernel;
    if ((rc = pair(op, "stride", &a->stride, 1, 1))) return rc;
    if ((rc = pair(op, "padding", &a->padding, 0, 0))) return rc;
    if ((rc = pair(op, "dilation", &a->dilation, 1, 1))) return rc;
    return MUSA_OK;
}

static int pool_input(const musa_op_info *op, const musa_tensor *x) {
    if (x->ndim != 3 && x->ndim != 4)
        return musa_err(MUSA_ERR_VALUE, "[%s] input must be (C, H, W) or (N, C, H, W), got %d dims",
                        op->name, x->ndim);
    return MUSA_OK;
}

int infer_pool2d(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                 musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_pool *a = attrs;
    const musa_tensor *x = in[0];
    int rc = pool_input(op, x);
    if (rc || (rc = pool_attrs(op, a, false))) return rc;
    bool is_max = op == &musa_ops[MUSA_OP_max_pool2d];
    if (!is_max && (a->dilation.v[0] != 1 || a->dilation.v[1] != 1))
        return musa_err(MUSA_ERR_VALUE, "[%s] dilation is not supported", op->name);
    int64_t shape[4];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    for (int i = 0; i < 2; i++) {
        int d = x->ndim - 2 + i;
        if ((rc = pool_out(op, x->shape[d], a->kernel.v[i], a->stride.v[i], a->padding.v[i],
                           a->dilation.v[i], a->ceil_mode, &shape[d])))
            return rc;
    }
    musa_dtype t = float_inputs(in, (int[]){0}, 1, r);
    musa_infer_out(r, 0, t, x->ndim, shape);
    if (is_max) musa_infer_out(r, 1, MUSA_DTYPE_INT64, x->ndim, shape);
    return MUSA_OK;
}

int infer_adaptive_pool2d(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                          musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_pool *a = attrs;
    const musa_tensor *x = in[0];
    int rc = pool_input(op, x);
    if (rc || (rc = pool_attrs(op, a, true))) return rc;
    int64_t shape[4];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[x->ndim - 2] = a->kernel.v[0];
    shape[x->ndim - 1] = a->kernel.v[1];
    musa_dtype t = float_inputs(in, (int[]){0}, 1, r);
    musa_infer_out(r, 0, t, x->ndim, shape);
    return MUSA_OK;
}

/* avg/adaptive backward: gradient in, input-shaped gradient out. */
int infer_pool2d_backward(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                          musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_pool *a = attrs;
    bool adaptive = op == &musa_ops[MUSA_OP_adaptive_avg_pool2d_backward];
    int rc = pool_attrs(op, a, adaptive);
    if (rc) return rc;
    if (a->shape.n != in[0]->ndim || (a->shape.n != 3 && a->shape.n != 4))
        return musa_err(MUSA_ERR_VALUE, "[%s] shape must give the input's dims", op->name);
    if ((rc = musa_shape_check(op->name, a->shape.n, a->shape.v, NULL))) return rc;
    /* The kernels index the gradient by the forward output of an input of
     * that shape: it must have exactly that shape. */
    int n = a->shape.n;
    int64_t expect[4];
    memcpy(expect, a->shape.v, sizeof(int64_t) * (size_t)n);
    for (int i = 0; i < 2; i++) {
        int d = n - 2 + i;
        if (adaptive) {
            expect[d] = a->kernel.v[i];
        } else if (a->dilation.v[i] != 1) {
            return musa_err(MUSA_ERR_VALUE, "[%s] dilation is not supported", op->name);
        } else if ((rc = pool_out(op, a->shape.v[d], a->kernel.v[i], a->stride.v[i],
                                  a->padding.v[i], 1, a->ceil_mode, &expect[d]))) {
            return rc;
        }
    }
    if (!musa_shape_equal(in[0]->ndim, in[0]->shape, n, expect)) {
        char s1[128], s2[128], s3[128];
        return musa_err(MUSA_ERR_VALUE, "[%s] gradient has shape %s, but pooling %s gives %s",
                        op->name, musa_shape_str(in[0]->ndim, in[0]->shape, s1, sizeof s1),
                        musa_shape_str(n, a->shape.v, s2, sizeof s2),
                        musa_shape_str(n, expect, s3, sizeof s3));
    }
    musa_dtype t = float_inputs(in, (int[]){0}, 1, r);
    musa_infer_out(r, 0, t, a->shape.n, a->shape.v);
    return MUSA_OK;
}

/* ---- normalisation ---- */

static musa_dtype stat_dtype(musa_dtype t) {
    return musa_is_low_float(t) ? MUSA_DTYPE_FLOAT32 : t;
}

/* layer_norm and layer_norm_apply: when x, weight and bias (inputs
 * `which`) are all the float16/bfloat16 result dtype, they arrive as they
 * are (the kernels read and write such rows directly, norm.c), so the
 * inference gives the same answer on the graph's recorded inputs. */
static void low_float_rows(musa_tensor *const *in, const int *which, int n, musa_dtype t,
                           musa_infer *r) {
    if (!musa_is_low_float(t)) return;
    for (int i = 0; i < n; i++)
        if (in[which[i]]->dtype != (int8_t)t) return;
    for (int i = 0; i < n; i++) r->in_dtype[which[i]] = (int8_t)t;
}

static int check_affine(const musa_op_info *op, musa_tensor *const *in, int nd,
                        const int64_t *shape) {
    for (int i = 1; i <= 2; i++) {
        bool ok = in[i]->ndim == nd;
        for (int d = 0; ok && d < nd; d++) ok = in[i]->shape[d] == shape[d];
        if (!ok) {
            char s1[128], s2[128];
            return musa_err(MUSA_ERR_VALUE, "[%s] %s has shape %s, expected %s", op->name,
                            i == 1 ? "weight" : "bias",
                            musa_shape_str(in[i]->ndim, in[i]->shape, s1, sizeof s1),
                            musa_shape_str(nd, shape, s2, sizeof s2));
        }
    }
    return MUSA_OK;
}

static int norm_eps(const musa_op_info *op, const musa_attrs_norm *a) {
    if (!(a->eps >= 0))
        return musa_err(MUSA_ERR_VALUE, "[%s] eps must be >= 0, got %g", op->name, a->eps);
    return MUSA_OK;
}

/* Batch norm of a bfloat16 input with bfloat16 or float32 weights (the
 * autocast case: float32 parameters): the kernel reads and writes bfloat16
 * elements itself, with float32 weights and statistics, and the output
 * keeps the input's dtype (PyTorch's mixed batch norm). */
static bool bf16_norm(const musa_tensor *x, const musa_tensor *w, const musa_tensor *b) {
    return x->dtype == MUSA_DTYPE_BFLOAT16 &&
           (w->dtype == MUSA_DTYPE_BFLOAT16 || w->dtype == MUSA_DTYPE_FLOAT32) &&
           (!b || b->dtype == MUSA_DTYPE_BFLOAT16 || b->dtype == MUSA_DTYPE_FLOAT32);
}

int infer_batch_norm(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                     musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_norm *a = attrs;
    const musa_tensor *x = in[0];
    int rc = norm_eps(op, a);
    if (rc) return rc;
    if (x->ndim < 2)
        return musa_err(MUSA_ERR_VALUE, "[%s] input must be (N, C, ...), got %d dims", op->name,
                        x->ndim);
    if ((rc = check_affine(op, in, 1, &x->shape[1]))) return rc;
    int64_t m = x->numel / (x->shape[1] ? x->shape[1] : 1);
    if (m <= 1 && x->numel > 0)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] expected more than 1 value per channel when training, got input %s",
                        op->name, "of that shape");
    if (bf16_norm(in[0], in[1], in[2])) {
        r->in_dtype[1] = r->in_dtype[2] = (int8_t)MUSA_DTYPE_FLOAT32;
        musa_infer_out(r, 0, MUSA_DTYPE_BFLOAT16, x->ndim, x->shape);
        musa_infer_out(r, 1, MUSA_DTYPE_FLOAT32, 1, &x->shape[1]);
        musa_infer_out(r, 2, MUSA_DTYPE_FLOAT32, 1, &x->shape[1]);
        return MUSA_OK;
    }
    musa_dtype t = float_inputs(in, (int[]){0, 1, 2}, 3, r);
    musa_infer_out(r, 0, t, x->ndim, x->shape);
    musa_infer_out(r, 1, stat_dtype(t), 1, &x->shape[1]);
    musa_infer_out(r, 2, stat_dtype(t), 1, &x->shape[1]);
    return MUSA_OK;
}

int infer_layer_norm(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                     musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_norm *a = attrs;
    const musa_tensor *x = in[0];
    int rc = norm_eps(op, a);
    if (rc) return rc;
    if (a->ndims < 1 || a->ndims > x->ndim)
        return musa_err(MUSA_ERR_VALUE, "[%s] cannot normalise the last %lld dims of a %d-d input",
                        op->name, (long long)a->ndims, x->ndim);
    int lead = x->ndim - (int)a->ndims;
    if ((rc = check_affine(op, in, (int)a->ndims, &x->shape[lead]))) return rc;
    musa_dtype t = float_inputs(in, (int[]){0, 1, 2}, 3, r);
    low_float_rows(in, (int[]){0, 1, 2}, 3, t, r);
    musa_infer_out(r, 0, t, x->ndim, x->shape);
    musa_infer_out(r, 1, stat_dtype(t), lead, x->shape);
    musa_infer_out(r, 2, stat_dtype(t), lead, x->shape);
    return MUSA_OK;
}

int infer_group_norm(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                     musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_norm *a = attrs;
    const musa_tensor *x = in[0];
    int rc = norm_eps(op, a);
    if (rc) return rc;
    if (x->ndim < 2)
        return musa_err(MUSA_ERR_VALUE, "[%s] input must be (N, C, ...), got %d dims", op->name,
                        x->ndim);
    if (a->groups < 1 || x->shape[1] % a->groups)
        return musa_err(MUSA_ERR_VALUE, "[%s] %lld channels are not divisible into %lld groups",
                        op->name, (long long)x->shape[1], (long long)a->groups);
    if ((rc = check_affine(op, in, 1, &x->shape[1]))) return rc;
    musa_dtype t = float_inputs(in, (int[]){0, 1, 2}, 3, r);
    int64_t st[2] = {x->shape[0], a->groups};
    musa_infer_out(r, 0, t, x->ndim, x->shape);
    musa_infer_out(r, 1, stat_dtype(t), 2, st);
    musa_infer_out(r, 2, stat_dtype(t), 2, st);
    return MUSA_OK;
}

/* Input i of a norm backward must have the given shape. */
static int check_shape(const musa_op_info *op, const musa_tensor *t, const char *what, int nd,
                       const int64_t *shape) {
    if (musa_shape_equal(t->ndim, t->shape, nd, shape)) return MUSA_OK;
    char s1[128], s2[128];
    return musa_err(MUSA_ERR_VALUE, "[%s] %s has shape %s, expected %s", op->name, what,
                    musa_shape_str(t->ndim, t->shape, s1, sizeof s1),
                    musa_shape_str(nd, shape, s2, sizeof s2));
}

/* (gy, x, weight, mean, invstd) -> (gx, gweight, gbias). The kernels index
 * weight and the statistics by x's channels or rows, so every shape is
 * checked against x as the forward op makes them. */
/* batch_norm_apply(x, mean, invstd, weight, bias): y from the statistics a
 * batch_norm stored (remat's recomputation of y). */
int infer_batch_norm_apply(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                           musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    const musa_tensor *x = in[0];
    if (x->ndim < 2)
        return musa_err(MUSA_ERR_VALUE, "[%s] input must be (N, C, ...), got %d dims", op->name,
                        x->ndim);
    static const char *what[5] = {NULL, "mean", "invstd", "weight", "bias"};
    for (int i = 1; i < 5; i++) {
        int rc = check_shape(op, in[i], what[i], 1, &x->shape[1]);
        if (rc) return rc;
    }
    if (bf16_norm(x, in[3], in[4])) {
        for (int i = 1; i < 5; i++) r->in_dtype[i] = (int8_t)MUSA_DTYPE_FLOAT32;
        musa_infer_out(r, 0, MUSA_DTYPE_BFLOAT16, x->ndim, x->shape);
        return MUSA_OK;
    }
    musa_dtype t = float_inputs(in, (int[]){0, 3, 4}, 3, r);
    r->in_dtype[1] = r->in_dtype[2] = (int8_t)stat_dtype(t);
    low_float_rows(in, (int[]){0, 3, 4}, 3, t, r);
    musa_infer_out(r, 0, t, x->ndim, x->shape);
    return MUSA_OK;
}

/* layer_norm_apply(x, mean, invstd, weight, bias): y from the statistics a
 * layer_norm stored (remat's recomputation of y). */
int infer_layer_norm_apply(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                           musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_norm *a = attrs;
    const musa_tensor *x = in[0];
    if (a->ndims < 1 || a->ndims > x->ndim)
        return musa_err(MUSA_ERR_VALUE, "[%s] cannot normalise the last %lld dims of a %d-d input",
                        op->name, (long long)a->ndims, x->ndim);
    int lead = x->ndim - (int)a->ndims, rc;
    if ((rc = check_shape(op, in[1], "mean", lead, x->shape)) ||
        (rc = check_shape(op, in[2], "invstd", lead, x->shape)) ||
        (rc = check_shape(op, in[3], "weight", (int)a->ndims, &x->shape[lead])) ||
        (rc = check_shape(op, in[4], "bias", (int)a->ndims, &x->shape[lead])))
        return rc;
    musa_dtype t = float_inputs(in, (int[]){0, 3, 4}, 3, r);
    r->in_dtype[1] = r->in_dtype[2] = (int8_t)stat_dtype(t);
    low_float_rows(in, (int[]){0, 3, 4}, 3, t, r);
    musa_infer_out(r, 0, t, x->ndim, x->shape);
    return MUSA_OK;
}

int infer_norm_backward(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                        musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_norm *a = attrs;
    const musa_tensor *gy = in[0], *x = in[1];
    int rc;
    if ((rc = check_shape(op, gy, "gradient", x->ndim, x->shape))) return rc;
    if ((rc = norm_eps(op, a))) return rc;
    int64_t wshape[MUSA_MAX_DIMS], sshape[MUSA_MAX_DIMS];
    int wn, sn;
    if (op == &musa_ops[MUSA_OP_layer_norm_backward]) {
        if (a->ndims < 1 || a->ndims > x->ndim)
            return musa_err(MUSA_ERR_VALUE,
                            "[%s] cannot normalise the last %lld dims of a %d-d input", op->name,
                            (long long)a->ndims, x->ndim);
        sn = x->ndim - (int)a->ndims, wn = (int)a->ndims;
        memcpy(sshape, x->shape, sizeof(int64_t) * (size_t)sn);
        memcpy(wshape, x->shape + sn, sizeof(int64_t) * (size_t)wn);
    } else {
        if (x->ndim < 2)
            return musa_err(MUSA_ERR_VALUE, "[%s] input must be (N, C, ...), got %d dims", op->name,
                            x->ndim);
        wn = 1, wshape[0] = x->shape[1];
        if (op == &musa_ops[MUSA_OP_group_norm_backward]) {
            if (a->groups < 1 || x->shape[1] % a->groups)
                return musa_err(MUSA_ERR_VALUE,
                                "[%s] %lld channels are not divisible into %lld groups", op->name,
                                (long long)x->shape[1], (long long)a->groups);
            sn = 2, sshape[0] = x->shape[0], sshape[1] = a->groups;
        } else {
            sn = 1, sshape[0] = x->shape[1];
        }
    }
    if ((rc = check_shape(op, in[2], "weight", wn, wshape)) ||
        (rc = check_shape(op, in[3], "mean", sn, sshape)) ||
        (rc = check_shape(op, in[4], "invstd", sn, sshape)))
        return rc;
    if (op == &musa_ops[MUSA_OP_batch_norm_backward] && gy->dtype == MUSA_DTYPE_BFLOAT16 &&
        bf16_norm(x, in[2], NULL)) { /* (gy, x, weight, mean, invstd) */
        r->in_dtype[2] = r->in_dtype[3] = r->in_dtype[4] = (int8_t)MUSA_DTYPE_FLOAT32;
        musa_infer_out(r, 0, MUSA_DTYPE_BFLOAT16, x->ndim, x->shape);
        musa_infer_out(r, 1, MUSA_DTYPE_FLOAT32, wn, wshape);
        musa_infer_out(r, 2, MUSA_DTYPE_FLOAT32, wn, wshape);
        return MUSA_OK;
    }
    musa_dtype t = float_inputs(in, (int[]){0, 1, 2}, 3, r);
    r->in_dtype[3] = r->in_dtype[4] = (int8_t)stat_dtype(t); /* float32 or float64 */
    musa_infer_out(r, 0, t, x->ndim, x->shape);
    musa_infer_out(r, 1, t, wn, wshape);
    musa_infer_out(r, 2, t, wn, wshape);
    return MUSA_OK;
}

/* ---- softmax ---- */

int infer_softmax(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                  musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_dim *a = attrs;
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, in[0]->ndim, &d);
    if (rc) return rc;
    a->dim = d;
    musa_dtype t = float_inputs(in, (int[]){0}, 1, r);
    musa_infer_out(r, 0, t, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

int infer_softmax_backward(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                           musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_dim *a = attrs;
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, in[1]->ndim, &d);
    if (rc) return rc;
    a->dim = d;
    if (!musa_shape_equal(in[0]->ndim, in[0]->shape, in[1]->ndim, in[1]->shape))
        return musa_err(MUSA_ERR_VALUE, "[%s] gradient and output shapes differ", op->name);
    musa_dtype t = float_inputs(in, (int[]){0, 1}, 2, r);
    musa_infer_out(r, 0, t, in[1]->ndim, in[1]->shape);
    return MUSA_OK;
}

/* ---- cross-entropy ---- */

/* logits (N, C, d...) or (C); target (N, d...) or (); returns the target shape */
static int xent_shapes(const musa_op_info *op, const musa_tensor *x, const musa_tensor *t, int *tn,
                       int64_t *tshape) {
    char s1[128], s2[128];
    if (x->ndim < 1) return musa_err(MUSA_ERR_VALUE, "[%s] logits need at least 1 dim", op->name);
    int n = 0;
    for (int d = 0; d < x->ndim; d++)
        if (d != (x->ndim == 1 ? 0 : 1)) tshape[n++] = x->shape[d];
    bool ok = t->ndim == n;
    for (int d = 0; ok && d < n; d++) ok = t->shape[d] == tshape[d];
    if (!ok)
        return musa_err(MUSA_ERR_VALUE, "[%s] target has shape %s; for logits %s it must be %s",
                        op->name, musa_shape_str(t->ndim, t->shape, s1, sizeof s1),
                        musa_shape_str(x->ndim, x->shape, s2, sizeof s2),
                        musa_shape_str(n, tshape, s1, sizeof s1));
    *tn = n;
    return MUSA_OK;
}

static int xent_attrs(const musa_op_info *op, const musa_attrs_xent *a) {
    if (a->reduction < 0 || a->reduction > 2)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] reduction must be none (0), mean (1) or sum (2), got %lld", op->name,
                        (long long)a->reduction);
    if (!(a->label_smoothing >= 0 && a->label_smoothing <= 1))
        return musa_err(MUSA_ERR_VALUE, "[%s] label_smoothing must be in [0, 1], got %g", op->name,
                        a->label_smoothing);
    return MUSA_OK;
}

static int index_target(const musa_op_info *op, musa_tensor *const *in, int i, musa_infer *r) {
    musa_dtype d = (musa_dtype)in[i]->dtype;
    if (musa_is_float(d) || d == MUSA_DTYPE_BOOL)
        return musa_err(MUSA_ERR_TYPE,
                        "[%s] target must hold class indices (an integer tensor), got %s; "
                        "use cross_entropy with probabilities for soft targets",
                        op->name, musa_dtype_name(d));
    r->in_dtype[i] = MUSA_DTYPE_INT64;
    return MUSA_OK;
}

int infer_cross_entropy(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                        musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_xent *a = attrs;
    int tn, rc = xent_attrs(op, a);
    int64_t ts[MUSA_MAX_DIMS];
    if (rc || (rc = xent_shapes(op, in[0], in[1], &tn, ts)) || (rc = index_target(op, in, 1, r)))
        return rc;
    musa_dtype t = float_inputs(in, (int[]){0}, 1, r);
    if (a->reduction == 0)
        musa_infer_out(r, 0, t, tn, ts);
    else
        musa_infer_out(r, 0, t, 0, NULL);
    return MUSA_OK;
}

/* (grad of the loss, logits, target) -> grad of the logits */
int infer_cross_entropy_bwd(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                            musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_xent *a = attrs;
    int tn, rc = xent_attrs(op, a);
    int64_t ts[MUSA_MAX_DIMS];
    if (rc || (rc = xent_shapes(op, in[1], in[2], &tn, ts)) || (rc = index_target(op, in, 2, r)))
        return rc;
    /* the kernel reads the loss gradient per sample (reduction none) or once */
    if (a->reduction == 0 ? !musa_shape_equal(in[0]->ndim, in[0]->shape, tn, ts)
                          : in[0]->ndim != 0) {
        char s1[128], s2[128];
        return musa_err(MUSA_ERR_VALUE, "[%s] the loss gradient has shape %s, expected %s",
                        op->name, musa_shape_str(in[0]->ndim, in[0]->shape, s1, sizeof s1),
                        musa_shape_str(a->reduction == 0 ? tn : 0, ts, s2, sizeof s2));
    }
    musa_dtype t = float_inputs(in, (int[]){0, 1}, 2, r);
    musa_infer_out(r, 0, t, in[1]->ndim, in[1]->shape);
    return MUSA_OK;
}

/* ---- linear ---- */

int infer_linear(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                 musa_infer *r) {
    MUSA_UNUSED(attrs);
    if (n_in != 2 && n_in != 3)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] takes input, weight and an optional bias, got %d tensors", op->name,
                        n_in);
    const musa_tensor *x = in[0], *w = in[1];
    char s1[128], s2[128];
    if (x->ndim < 1 || w->ndim != 2 || x->shape[x->ndim - 1] != w->shape[1])
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] input %s and weight %s do not fit: the weight must be (out, %lld)",
                        op->name, musa_shape_str(x->ndim, x->shape, s1, sizeof s1),
                        musa_shape_str(w->ndim, w->shape, s2, sizeof s2),
                        (long long)(x->ndim ? x->shape[x->ndim - 1] : 0));
    if (n_in == 3 && (in[2]->ndim != 1 || in[2]->shape[0] != w->shape[0]))
        return musa_err(MUSA_ERR_VALUE, "[%s] bias must have shape (%lld,)", op->name,
                        (long long)w->shape[0]);
    musa_dtype t = gemm_inputs(in, (int[]){0, 1, 2}, n_in, r);
    int64_t shape[MUSA_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[x->ndim - 1] = w->shape[0];
    musa_infer_out(r, 0, t, x->ndim, shape);
    return MUSA_OK;
}

/* scaled_dot_product_attention(q, k, v[, mask]) -> (out, lse): q (..., Tq,
 * E), k (..., Tk, E), v (..., Tk, Ev) with equal batch dims; a bool mask
 * (True: attend) broadcasts to (..., Tq, Tk). out is (..., Tq, Ev) in the
 * inputs' dtype, lse (..., Tq) in the compute dtype: float64 for float64,
 * else float32 (bfloat16 arrives as is, float16 as float32). */
static int attention_operands(const musa_op_info *op, musa_tensor *const *in, int n_in,
                              musa_infer *r, musa_dtype *t) {
    const musa_tensor *q = in[0], *k = in[1], *v = in[2];
    char s1[128], s2[128], s3[128];
    int nd = q->ndim;
    bool ok = nd >= 2 && k->ndim == nd && v->ndim == nd && k->shape[nd - 1] == q->shape[nd - 1] &&
              v->shape[nd - 2] == k->shape[nd - 2];
    for (int d = 0; ok && d < nd - 2; d++)
        ok = k->shape[d] == q->shape[d] && v->shape[d] == q->shape[d];
    if (!ok)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] query %s, key %s and value %s do not fit: they need the same batch "
                        "dims, query and key the same last dim, key and value the same length",
                        op->name, musa_shape_str(q->ndim, q->shape, s1, sizeof s1),
                        musa_shape_str(k->ndim, k->shape, s2, sizeof s2),
                        musa_shape_str(v->ndim, v->shape, s3, sizeof s3));
    musa_dtype c = (musa_dtype)q->dtype;
    for (int i = 1; i < 3; i++) c = musa_promote_types(c, (musa_dtype)in[i]->dtype);
    if (!musa_is_float(c))
        return musa_err(MUSA_ERR_TYPE, "[%s] query, key and value must be floating point, got %s",
                        op->name, musa_dtype_name(c));
    *t = c;
    c = c == MUSA_DTYPE_BFLOAT16 || c == MUSA_DTYPE_FLOAT64 ? c : MUSA_DTYPE_FLOAT32;
    for (int i = 0; i < 3; i++) r->in_dtype[i] = (int8_t)c;
    if (n_in == 3) return MUSA_OK;
    const musa_tensor *m = in[n_in - 1];
    int64_t full[MUSA_MAX_DIMS];
    memcpy(full, q->shape, sizeof(int64_t) * (size_t)nd);
    full[nd - 1] = k->shape[nd - 2];
    ok = m->dtype == MUSA_DTYPE_BOOL && m->ndim <= nd;
    for (int d = 0; ok && d < m->ndim; d++) {
        int64_t s = m->shape[m->ndim - 1 - d];
        ok = s == 1 || s == full[nd - 1 - d];
    }
    if (!ok)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] the mask must be bool and broadcast to the scores' shape %s, got %s "
                        "%s",
                        op->name, musa_shape_str(nd, full, s1, sizeof s1),
                        musa_dtype_name((musa_dtype)m->dtype),
                        musa_shape_str(m->ndim, m->shape, s2, sizeof s2));
    return MUSA_OK;
}

/* The attribute `exact` (0: the fused formulas; 1-3: the written-out
 * ops' bits, with no scale, `* scale` or `/ scale`: the attention pass's) */
static int attention_attrs(const musa_op_info *op, const void *attrs) {
    const musa_attrs_attention *a = attrs;
    if (a && (a->exact < 0 || a->exact > 3))
        return musa_err(MUSA_ERR_VALUE, "[%s] exact must be 0, 1, 2 or 3, got %lld", op->name,
                        (long long)a->exact);
    return MUSA_OK;
}

int infer_attention(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                    musa_infer *r) {
    int rc = attention_attrs(op, attrs);
    if (rc) return rc;
    if (n_in != 3 && n_in != 4)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] takes query, key, value and an optional mask, got %d "
                        "tensors",
                        op->name, n_in);
    musa_dtype t;
    rc = attention_operands(op, in, n_in, r, &t);
    if (rc) return rc;
    int nd = in[0]->ndim;
    int64_t shape[MUSA_MAX_DIMS];
    memcpy(shape, in[0]->shape, sizeof(int64_t) * (size_t)nd);
    shape[nd - 1] = in[2]->shape[nd - 1];
    musa_infer_out(r, 0, t, nd, shape);
    musa_infer_out(r, 1, t == MUSA_DTYPE_FLOAT64 ? t : MUSA_DTYPE_FLOAT32, nd - 1, shape);
    return MUSA_OK;
}

/* (g, q, k, v, out, lse[, mask]) -> (dq, dk, dv), in the dtype of the
 * forward's result (float16 ones computed in float32, rounded once). */
int infer_attention_backward(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                             musa_infer *r) {
    int rc = attention_attrs(op, attrs);
    if (rc) return rc;
    if (n_in != 6 && n_in != 7)
        return musa_err(MUSA_ERR_VALUE, "[%s] takes 6 or 7 tensors, got %d", op->name, n_in);
    musa_infer sub = *r;
    sub.in_dtype = r->in_dtype + 1;
    musa_tensor *fw[4] = {in[1], in[2], in[3], in[n_in - 1]};
    musa_dtype t;
    rc = attention_operands(op, fw, n_in == 7 ? 4 : 3, &sub, &t);
    if (rc) return rc;
    const musa_tensor *g = in[0], *o = in[4], *lse = in[5];
    int nd = in[1]->ndim;
    bool ok = g->ndim == nd && o->ndim == nd && lse->ndim == nd - 1;
    for (int d = 0; ok && d < nd; d++) {
        int64_t want = d == nd - 1 ? in[3]->shape[d] : in[1]->shape[d];
        ok = g->shape[d] == want && o->shape[d] == want && (d == nd - 1 || lse->shape[d] == want);
    }
    if (!ok)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] the gradient, output or log-sum-exp do not fit "
                        "the query and value",
                        op->name);
    int8_t c = r->in_dtype[1];
    r->in_dtype[0] = r->in_dtype[4] = c;
    r->in_dtype[5] = c == MUSA_DTYPE_FLOAT64 ? c : MUSA_DTYPE_FLOAT32;
    for (int i = 0; i < 3; i++) musa_infer_out(r, i, t, nd, in[1 + i]->shape);
    return MUSA_OK;
}
