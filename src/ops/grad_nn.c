/*
 * grad_nn.c - backward formulas of the neural network ops.
 *
 * Convolution and pooling backward are ops of their own whose formulas are
 * the forward ops again (each is the other's adjoint), so gradients of any
 * order exist. Normalisation, softmax and cross-entropy use their fused
 * backward kernels for ordinary backward; when a higher-order graph is
 * being recorded (grad mode on inside backward, i.e. create_graph), they
 * use compositions of primitives instead, which autograd can differentiate
 * again. Both give the same values.
 */
#include "grad_util.h"

#define G       (a->gout[0])
#define T(expr) musa_tmp(&t, (expr))
#define NUM(v)  T(musa_number(v))

static int done1(musa_tensor **gin, int i, musa_tensor *v, musa_temps *t) {
    gin[i] = v;
    musa_temps_release(t);
    return v ? MUSA_OK : musa_last_error_code();
}

/* ---- convolution ---- */

static musa_attrs_conv conv_with_shape(const void *attrs, const musa_meta *m) {
    musa_attrs_conv c = *(const musa_attrs_conv *)attrs;
    memset(&c.shape, 0, sizeof c.shape);
    c.shape.n = m->ndim;
    memcpy(c.shape.v, m->shape, sizeof(int64_t) * (size_t)m->ndim);
    return c;
}

static musa_tensor *conv_call(musa_op_id op, musa_tensor *p, musa_tensor *q,
                              const musa_attrs_conv *c) {
    return musa_call2(op, p, q, c);
}

int grad_conv2d(const musa_grad_args *a, musa_tensor **gin) {
    int rc = MUSA_OK;
    for (int i = 0; i < a->n_in; i++) gin[i] = NULL;
    if (a->needs[0]) {
        musa_attrs_conv c = conv_with_shape(a->attrs, &a->in_meta[0]);
        if (!(gin[0] = conv_call(MUSA_OP_conv2d_backward_input, G, a->in[1], &c)))
            rc = musa_last_error_code();
    }
    if (!rc && a->needs[1]) {
        musa_attrs_conv c = conv_with_shape(a->attrs, &a->in_meta[1]);
        if (!(gin[1] = conv_call(MUSA_OP_conv2d_backward_weight, a->in[0], G, &c)))
            rc = musa_last_error_code();
    }
    if (!rc && a->n_in == 3 && a->needs[2]) {
        int64_t dims[3] = {0, 2, 3};
        if (!(gin[2] = musa_sum(G, 3, dims, false))) rc = musa_last_error_code();
    }
    return rc;
}

/* y = conv_bwd_input(gy, w):  d/dgy = conv2d(G, w),  d/dw = conv_bwd_weight(G, gy) */
int grad_conv2d_backward_input(const musa_grad_args *a, musa_tensor **gin) {
    musa_attrs_conv c = *(const musa_attrs_conv *)a->attrs;
    gin[0] = gin[1] = NULL;
    if (a->needs[0] && !(gin[0] = conv_call(MUSA_OP_conv2d, G, a->in[1], &c)))
        return musa_last_error_code();
    if (a->needs[1]) {
        musa_attrs_conv cw = conv_with_shape(a->attrs, &a->in_meta[1]);
        if (!(gin[1] = conv_call(MUSA_OP_conv2d_backward_weight, G, a->in[0], &cw)))
            return musa_last_error_code();
    }
    return MUSA_OK;
}

/* y = conv_bwd_weight(x, gy):  d/dx = conv_bwd_input(gy, G),  d/dgy = conv2d(x, G) */
int grad_conv2d_backward_weight(const musa_grad_args *a, musa_tensor **gin) {
    gin[0] = gin[1] = NULL;
    if (a->needs[0]) {
        musa_attrs_conv cx = conv_with_shape(a->attrs, &a->in_meta[0]);
        if (!(gin[0] = conv_call(MUSA_OP_conv2d_backward_input, a->in[1], G, &cx)))
            return musa_last_error_code();
    }
    if (a->needs[1]) {
        musa_attrs_conv c = *(const musa_attrs_conv *)a->attrs;
        if (!(gin[1] = conv_call(MUSA_OP_conv2d, a->in[0], G, &c))) return musa_last_error_code();
    }
    return MUSA_OK;
}

/* ---- pooling ---- */

/* Whether an output window along one dim reads no input (its taps all in
 * the padding, or stepped over by the dilation). */
static bool pool_dim_has_empty(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p,
                               int64_t d) {
    for (int64_t o = 0; o < out; o++) {
        bool any = false;
        for (int64_t q = 0; q < k && !any; q++) {
            int64_t i = o * s - p + q * d;
            any = i >= 0 && i < in;
        }
        if (!any) return true;
    }
    return false;
}

/* max: each output's gradient goes to the input position it came from; a
 * window that read no input (its index -1, its value -inf) passes none */
int grad_max_pool2d(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    if (!G) return done1(gin, 0, NULL, &t);
    const musa_meta *m = &a->in_meta[0];
    const musa_attrs_pool *at = a->attrs;
    int64_t planes = 1, hw = m->shape[m->ndim - 2] * m->shape[m->ndim - 1];
    for (int d = 0; d < m->ndim - 2; d++) planes *= m->shape[d];
    int64_t flat_in[2] = {planes, hw}, flat_out[2] = {planes, -1};
    musa_tensor *z = T(musa_zeros(2, flat_in, (musa_dtype)G->dtype));
    musa_tensor *idx = T(musa_reshape(a->out[1], 2, flat_out)),
                *g = T(musa_reshape(G, 2, flat_out));
    bool empty = false;
    for (int i = 0; i < 2 && a->out[1]; i++) {
        int d = a->out[1]->ndim - 2 + i;
        empty = empty ||
                pool_dim_has_empty(m->shape[m->ndim - 2 + i], a->out[1]->shape[d], at->kernel.v[i],
                                   at->stride.v[i], at->padding.v[i], at->dilation.v[i]);
    }
    if (empty && idx && g) {
        musa_tensor *none = T(musa_lt(idx, T(musa_number_int(0))));
        idx = T(musa_where(none, T(musa_number_int(0)), idx));
        g = T(musa_masked_fill(g, none, 0.0));
    }
    musa_tensor *s = T(musa_scatter_add(z, 1, idx, g));
    return done1(gin, 0, musa_reshape(s, m->ndim, m->shape), &t);
}

static musa_attrs_pool pool_with_shape(const void *attrs, const musa_meta *m) {
    musa_attrs_pool p = *(const musa_attrs_pool *)attrs;
    memset(&p.shape, 0, sizeof p.shape);
    p.shape.n = m->ndim;
    memcpy(p.shape.v, m->shape, sizeof(int64_t) * (size_t)m->ndim);
    return p;
}

int grad_avg_pool2d(const musa_grad_args *a, musa_tensor **gin) {
    musa_attrs_pool p = pool_with_shape(a->attrs, &a->in_meta[0]);
    gin[0] = musa_call1(MUSA_OP_avg_pool2d_backward, G, &p);
    return gin[0] ? MUSA_OK : musa_last_error_code();
}

int grad_avg_pool2d_backward(const musa_grad_args *a, musa_tensor **gin) {
    gin[0] = musa_call1(MUSA_OP_avg_pool2d, G, a->attrs);
    return gin[0] ? MUSA_OK : musa_last_error_code();
}

int grad_adaptive_avg_pool2d(const musa_grad_args *a, musa_tensor **gin) {
    musa_attrs_pool p = pool_with_shape(a->attrs, &a->in_meta[0]);
    gin[0] = musa_call1(MUSA_OP_adaptive_avg_pool2d_backward, G, &p);
    return gin[0] ? MUSA_OK : musa_last_error_code();
}

int grad_adaptive_avg_pool2d_backward(const musa_grad_args *a, musa_tensor **gin) {
    gin[0] = musa_call1(MUSA_OP_adaptive_avg_pool2d, G, a->attrs);
    return gin[0] ? MUSA_OK : musa_last_error_code();
}

/* ---- normalisation ---- */

/* The fused kernels serve first-order backward (grad mode is off inside a
 * plain backward); compositions serve create_graph and the rare case where
 * the statistics outputs themselves carry gradients. */
static bool use_fused(const musa_grad_args *a) {
    return !musa_is_grad_enabled() && !a->gout[1] && !a->gout[2];
}

static int fused_norm(musa_op_id op, const musa_grad_args *a, musa_tensor **gin) {
    musa_tensor *in[5] = {G, a->in[0], a->in[1], a->out[1], a->out[2]};
    musa_tensor *out[3] = {NULL, NULL, NULL};
    int rc = musa_dispatch(op, 5, in, a->attrs, out);
    if (rc) return rc;
    for (int i = 0; i < 3; i++) {
        if (a->needs[i])
            gin[i] = out[i];
        else
            musa_tensor_release(out[i]), gin[i] = NULL;
    }
    return MUSA_OK;
}

/* The composition for create_graph. The input is seen in two layouts: a
 * statistics view (reduced over rdims, mean/invstd broadcast as st_shape)
 * and an affine view (the weight broadcast as w_shape; gw/gb sum wdims).
 * For batch and layer norm both views are the input's own shape. */
typedef struct {
    int s_nd, nr, st_nd, a_nd, w_nd, nw;
    int64_t s_shape[MUSA_MAX_DIMS], rdims[MUSA_MAX_DIMS], st_shape[MUSA_MAX_DIMS];
    int64_t a_shape[MUSA_MAX_DIMS], w_shape[MUSA_MAX_DIMS], wdims[MUSA_MAX_DIMS];
} norm_view;

static int composite_norm(const musa_grad_args *a, const norm_view *v, musa_tensor **gin) {
    musa_temps t = {0};
    const musa_meta *xm = &a->in_meta[0], *wm = &a->in_meta[1];
#define TO_S(x) T(musa_reshape((x), v->s_nd, v->s_shape))
#define TO_A(x) T(musa_reshape((x), v->a_nd, v->a_shape))
    musa_tensor *mean = T(musa_reshape(a->out[1], v->st_nd, v->st_shape));
    musa_tensor *inv = T(musa_reshape(a->out[2], v->st_nd, v->st_shape));
    musa_tensor *w = T(musa_reshape(a->in[1], v->w_nd, v->w_shape));
    musa_tensor *xs = TO_S(a->in[0]);
    musa_tensor *xhat = T(musa_mul(T(musa_sub(xs, mean)), inv));
    musa_tensor *g = G ? G : T(musa_zeros(xm->ndim, xm->shape, (musa_dtype)xm->dtype));
    musa_tensor *ga = TO_A(g);
    musa_tensor *gw = NULL, *gb = NULL, *gx = NULL;
    if (a->needs[1]) gw = T(musa_sum(T(musa_mul(ga, TO_A(xhat))), v->nw, v->wdims, false));
    if (a->needs[2]) gb = T(musa_sum(ga, v->nw, v->wdims, false));
    if (a->needs[0]) {
        /* gx = inv (gh - mean(gh) - xhat mean(gh xhat)) + the statistics' own gradients */
        musa_tensor *gh = TO_S(T(musa_mul(ga, w)));
        musa_tensor *m1 = T(musa_mean(gh, v->nr, v->rdims, true));
        musa_tensor *m2 = T(musa_mean(T(musa_mul(gh, xhat)), v->nr, v->rdims, true));
        gx = T(musa_mul(inv, T(musa_sub(T(musa_sub(gh, m1)), T(musa_mul(xhat, m2))))));
        musa_tensor *cnt = T(musa_sum(T(musa_ones_like(xs)), v->nr, v->rdims, true));
        if (a->gout[1]) /* d mean/dx = 1/count */
            gx = T(
                musa_add(gx, T(musa_div(T(musa_reshape(a->gout[1], v->st_nd, v->st_shape)), cnt))));
        if (a->gout[2]) { /* d invstd/dx = -invstd^3 (x - mean) / count */
            musa_tensor *gi = T(musa_reshape(a->gout[2], v->st_nd, v->st_shape));
            musa_tensor *k =
                T(musa_div(T(musa_mul(gi, T(musa_mul(inv, T(musa_mul(inv, inv)))))), cnt));
            gx = T(musa_sub(gx, T(musa_mul(k, T(musa_sub(xs, mean))))));
        }
    }
#undef TO_S
#undef TO_A
    gin[0] = gx ? musa_reshape(gx, xm->ndim, xm->shape) : NULL;
    gin[1] = gw ? musa_reshape(gw, wm->ndim, wm->shape) : NULL;
    gin[2] = gb ? musa_reshape(gb, wm->ndim, wm->shape) : NULL;
    int rc = MUSA_OK;
    for (int i = 0; i < 3; i++)
        if (a->needs[i] && !gin[i]) rc = musa_last_error_code();
    if (rc)
        for (int i = 0; i < 3; i++) musa_tensor_release(gin[i]), gin[i] = NULL;
    musa_temps_release(&t);
    return rc;
}

static void own_layout(norm_view *v, const musa_meta *m) {
    v->s_nd = v->a_nd = v->st_nd = v->w_nd = m->ndim;
    memcpy(v->s_shape, m->shape, sizeof(int64_t) * (size_t)m->ndim);
    memcpy(v->a_shape, m->shape, sizeof(int64_t) * (size_t)m->ndim);
}

int grad_batch_norm(const musa_grad_args *a, musa_tensor **gin) {
    if (use_fused(a)) return fused_norm(MUSA_OP_batch_norm_backward, a, gin);
    const musa_meta *m = &a->in_meta[0];
    norm_view v = {0};
    own_layout(&v, m);
    for (int d = 0; d < m->ndim; d++) {
        v.st_shape[d] = v.w_shape[d] = d == 1 ? m->shape[1] : 1;
        if (d != 1) v.rdims[v.nr++] = d, v.wdims[v.nw++] = d;
    }
    return composite_norm(a, &v, gin);
}

int grad_layer_norm(const musa_grad_args *a, musa_tensor **gin) {
    if (use_fused(a)) return fused_norm(MUSA_OP_layer_norm_backward, a, gin);
    const musa_meta *m = &a->in_meta[0];
    int lead = m->ndim - (int)((const musa_attrs_norm *)a->attrs)->ndims;
    norm_view v = {0};
    own_layout(&v, m);
    for (int d = 0; d < m->ndim; d++) {
        v.st_shape[d] = d < lead ? m->shape[d] : 1;
        v.w_shape[d] = d < lead ? 1 : m->shape[d];
        if (d >= lead)
            v.rdims[v.nr++] = d;
        else
            v.wdims[v.nw++] = d;
    }
    return composite_norm(a, &v, gin);
}

int grad_group_norm(const musa_grad_args *a, musa_tensor **gin) {
    if (use_fused(a)) return fused_norm(MUSA_OP_group_norm_backward, a, gin);
    const musa_meta *m = &a->in_meta[0];
    int64_t G_ = ((const musa_attrs_norm *)a->attrs)->groups, N = m->shape[0], C = m->shape[1];
    int64_t S = 1;
    for (int d = 2; d < m->ndim; d++) S *= m->shape[d];
    norm_view v = {.s_nd = 3,
                   .s_shape = {N, G_, C / G_ * S},
                   .nr = 1,
                   .rdims = {2},
                   .st_nd = 3,
                   .st_shape = {N, G_, 1},
                   .a_nd = 3,
                   .a_shape = {N, C, S},
                   .w_nd = 3,
                   .w_shape = {1, C, 1},
                   .nw = 2,
                   .wdims = {0, 2}};
    return composite_norm(a, &v, gin);
}

/* ---- softmax ---- */

int grad_softmax(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_dim *d = a->attrs;
    musa_temps t = {0};
    if (!musa_is_grad_enabled())
        return done1(gin, 0, musa_call2(MUSA_OP_softmax_backward, G, a->out[0], d), &t);
    musa_tensor *y = a->out[0];
    musa_tensor *s = T(musa_sum(T(musa_mul(G, y)), 1, &d->dim, true));
    return done1(gin, 0, musa_mul(y, T(musa_sub(G, s))), &t);
}

int grad_log_softmax(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_dim *d = a->attrs;
    musa_temps t = {0};
    if (!musa_is_grad_enabled())
        return done1(gin, 0, musa_call2(MUSA_OP_log_softmax_backward, G, a->out[0], d), &t);
    musa_tensor *s = T(musa_sum(G, 1, &d->dim, true));
    return done1(gin, 0, musa_sub(G, T(musa_mul(T(musa_exp(a->out[0])), s))), &t);
}

/* ---- cross-entropy ---- */

int grad_cross_entropy(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_xent *x = a->attrs;
    musa_temps t = {0};
    gin[1] = NULL;
    if (!musa_is_grad_enabled()) {
        musa_tensor *in[3] = {G, a->in[0], a->in[1]};
        return done1(gin, 0, musa_call(MUSA_OP_cross_entropy_backward, 3, in, x), &t);
    }
    /* composition, for (N, C) or (C) logits: (softmax - smoothed one-hot) * g / count */
    musa_tensor *logits = a->in[0], *target = a->in[1];
    if (logits->ndim > 2)
        return musa_err(
            MUSA_ERR_NOT_IMPLEMENTED,
            "[cross_entropy] gradients of higher order are only implemented for (N, C) logits");
    int64_t C = logits->shape[logits->ndim - 1], cls = logits->ndim - 1;
    double eps = x->label_smoothing;
    musa_tensor *keep = T(musa_ne(target, T(musa_number_int(x->ignore_index))));
    musa_tensor *safe = T(musa_where(keep, target, T(musa_number_int(0))));
    musa_tensor *oh = T(musa_cast(T(musa_one_hot(safe, C)), (musa_dtype)logits->dtype));
    musa_tensor *p = T(musa_call1(MUSA_OP_softmax, logits, &(musa_attrs_dim){.dim = cls}));
    musa_tensor *tgt = T(musa_add(T(musa_mul(oh, NUM(1 - eps))), NUM(eps / (double)C)));
    musa_tensor *w = T(musa_cast(keep, (musa_dtype)logits->dtype)); /* (N) or () */
    musa_tensor *g = G;
    if (x->reduction == 1) g = T(musa_div(G, T(musa_sum(w, 0, NULL, false))));
    musa_tensor *scale = T(musa_unsqueeze(T(musa_mul(w, g)), -1));
    return done1(gin, 0, musa_mul(T(musa_sub(p, tgt)), scale), &t);
}

/* ---- linear ---- */

int grad_linear(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    const musa_meta *xm = &a->in_meta[0];
    int64_t K = a->in_meta[1].shape[1], N = a->in_meta[1].shape[0], M = 1;
    for (int d = 0; d + 1 < xm->ndim; d++) M *= xm->shape[d]; /* rows (explicit: K or N may be 0) */
    int rc = MUSA_OK;
    for (int i = 0; i < a->n_in; i++) gin[i] = NULL;
    /* the weight's gradient first: in a compiled step, x is often read
     * here for the last time (or recomputed for this read), and then dies
     * before the input's gradient is allocated */
    if (a->needs[1]) {
        int64_t gs[2] = {M, N}, xs[2] = {M, K};
        musa_tensor *g2 = T(musa_reshape(G, 2, gs)), *x2 = T(musa_reshape(a->in[0], 2, xs));
        musa_attrs_matmul at = {.transpose_a = true};
        if (!(gin[1] = musa_call2(MUSA_OP_matmul, g2, x2, &at))) rc = musa_last_error_code();
    }
    if (!rc && a->n_in == 3 && a->needs[2]) {
        int64_t gs[2] = {M, N};
        int64_t zero = 0;
        if (!(gin[2] = musa_sum(T(musa_reshape(G, 2, gs)), 1, &zero, false)))
            rc = musa_last_error_code();
    }
    if (!rc && a->needs[0] && !(gin[0] = musa_matmul(G, a->in[1]))) rc = musa_last_error_code();
    if (rc)
        for (int i = 0; i < a->n_in; i++) musa_tensor_release(gin[i]), gin[i] = NULL;
    musa_temps_release(&t);
    return rc;
}

/* x scaled as the attention's attributes say: by scale, or divided by it
 * (exact 3: the attention pass's `/ d`). */
static musa_tensor *attention_scaled(const musa_attrs_attention *at, musa_tensor *x,
                                     musa_temps *tp) {
    musa_tensor *c = musa_tmp(tp, musa_number(at->scale));
    return at->exact == 3 ? musa_div(x, c) : musa_mul(x, c);
}

/* The attention's probabilities from its inputs, with public ops (the
 * differentiable form for create_graph): softmax(q k^T scale, masked). */
static musa_tensor *attention_probs(const musa_grad_args *a, musa_temps *tp) {
#define TT(expr) musa_tmp(tp, (expr))
    const musa_attrs_attention *at = a->attrs;
    musa_tensor *q = a->in[0], *k = a->in[1];
    int nd = q->ndim;
    musa_tensor *s =
        TT(attention_scaled(at, TT(musa_matmul(q, TT(musa_transpose(k, nd - 2, nd - 1)))), tp));
    musa_tensor *allowed = a->n_in == 4 ? a->in[3] : NULL;
    if (at->causal) {
        int64_t sh[2] = {q->shape[nd - 2], k->shape[nd - 2]};
        allowed = TT(musa_tril(TT(musa_ones(2, sh, MUSA_DTYPE_BOOL)), 0));
    }
    if (allowed) s = TT(musa_masked_fill(s, TT(musa_logical_not(allowed)), -INFINITY));
    return TT(musa_softmax(s, -1));
#undef TT
}

/* out = P v with P = softmax(scale q k^T, masked); lse = logsumexp of the
 * masked scores. dv = P^T dout, dS = P (dout v^T - rowsum(dout out) +
 * dlse), dq = scale dS k, dk = scale dS^T q. Without create_graph (and with
 * no gradient for lse) the fused backward kernel recomputes P per block. */
int grad_attention(const musa_grad_args *a, musa_tensor **gin) {
    for (int i = 0; i < a->n_in; i++) gin[i] = NULL;
    int rc = MUSA_OK;
    musa_temps t = {0};
    musa_tensor *g3[3] = {NULL, NULL, NULL};
    if (!musa_is_grad_enabled() && G && !a->gout[1]) {
        musa_tensor *in[7] = {G, a->in[0], a->in[1], a->in[2], a->out[0], a->out[1], NULL};
        if (a->n_in == 4) in[6] = a->in[3];
        rc = musa_dispatch(MUSA_OP_scaled_dot_product_attention_backward, a->n_in == 4 ? 7 : 6, in,
                           a->attrs, g3);
    } else {
        const musa_attrs_attention *at = a->attrs;
        musa_tensor *q = a->in[0], *k = a->in[1], *v = a->in[2];
        int nd = q->ndim;
        int64_t last = -1;
        musa_tensor *p = attention_probs(a, &t);
        musa_tensor *g = G ? G : T(grad_output_or_zeros(a, 0, a->out[0]));
        musa_tensor *gp = T(musa_matmul(g, T(musa_transpose(v, nd - 2, nd - 1))));
        musa_tensor *d = T(musa_sum(T(musa_mul(g, a->out[0])), 1, &last, true));
        musa_tensor *inner = T(musa_sub(gp, d));
        if (a->gout[1]) inner = T(musa_add(inner, T(musa_unsqueeze(a->gout[1], -1))));
        musa_tensor *ds = T(musa_mul(p, inner));
        g3[0] = attention_scaled(at, T(musa_matmul(ds, k)), &t);
        g3[1] = attention_scaled(at, T(musa_matmul(T(musa_transpose(ds, nd - 2, nd - 1)), q)), &t);
        g3[2] = musa_matmul(T(musa_transpose(p, nd - 2, nd - 1)), g);
        if (!g3[0] || !g3[1] || !g3[2]) rc = musa_last_error_code();
    }
    for (int i = 0; i < 3; i++) {
        if (!rc && a->needs[i] && g3[i] && g3[i]->dtype != a->in_meta[i].dtype) {
            musa_tensor *c = musa_cast(g3[i], (musa_dtype)a->in_meta[i].dtype);
            if (!c) rc = musa_last_error_code();
            musa_tensor_release(g3[i]);
            g3[i] = c;
        }
        if (!rc && a->needs[i])
            gin[i] = g3[i];
        else
            musa_tensor_release(g3[i]);
    }
    for (int i = 0; rc && i < 3; i++) musa_tensor_release(gin[i]), gin[i] = NULL;
    musa_temps_release(&t);
    return rc;
}
