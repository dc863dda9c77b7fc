/*
 * grad_reduce.c - backward formulas of reductions and matmul, and the
 * helpers that broadcast a reduction's gradient back.
 */
#include <math.h>

#include "grad_util.h"

#define G       (a->gout[0])
#define X       (a->in[0])
#define Y       (a->out[0])
#define T(expr) musa_tmp(&t, (expr))
#define NUM(v)  T(musa_number(v))

musa_tensor *grad_expand_reduced(const musa_grad_args *a, musa_tensor *g, const musa_ints *dims,
                                 bool keepdim) {
    const musa_meta *m = &a->in_meta[0];
    if (!g) return NULL;
    musa_tensor *cur = musa_tensor_retain(g);
    if (!keepdim) { /* put the reduced dims back as size 1 */
        bool mask[MUSA_MAX_DIMS] = {false};
        for (int d = 0; d < m->ndim; d++) mask[d] = dims->n == 0;
        for (int i = 0; i < dims->n; i++) mask[dims->v[i]] = true;
        for (int d = 0; d < m->ndim && cur; d++) {
            if (!mask[d]) continue;
            musa_tensor *u = musa_unsqueeze(cur, d);
            musa_tensor_release(cur);
            cur = u;
        }
    }
    musa_tensor *e = musa_expand(cur, m->ndim, m->shape);
    musa_tensor_release(cur);
    return e;
}

musa_tensor *grad_output_or_zeros(const musa_grad_args *a, int j, const musa_tensor *like) {
    if (a->gout[j]) return musa_tensor_retain(a->gout[j]);
    return musa_zeros_like(like);
}

int grad_sum(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_reduce *r = a->attrs;
    musa_temps t = {0};
    musa_tensor *e = T(grad_expand_reduced(a, G, &r->dims, r->keepdim));
    gin[0] = e && e->dtype != a->in_meta[0].dtype ? musa_cast(e, (musa_dtype)a->in_meta[0].dtype)
                                                  : musa_tensor_retain(e);
    musa_temps_release(&t);
    return gin[0] ? MUSA_OK : musa_last_error_code();
}

/* prod: g * prod / x, computed without dividing by zero: with z zeros in a
 * slice, z = 0 gives prod/x, z = 1 gives the product of the others at the
 * zero and 0 elsewhere, z >= 2 gives 0. */
int grad_prod(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_reduce *r = a->attrs;
    musa_temps t = {0};
    musa_tensor *zero = NUM(0), *one = NUM(1);
    musa_tensor *is0 = T(musa_eq(X, zero));
    musa_tensor *nz = T(musa_where(is0, one, X));
    musa_tensor *p_nz = T(musa_prod(nz, r->dims.n, r->dims.v, true));
    musa_tensor *zc = T(musa_sum(is0, r->dims.n, r->dims.v, true));
    musa_tensor *no_zero = T(musa_div(p_nz, nz));
    musa_tensor *one_zero_here = T(musa_logical_and(T(musa_eq(zc, one)), is0));
    musa_tensor *d =
        T(musa_where(T(musa_eq(zc, zero)), no_zero, T(musa_where(one_zero_here, p_nz, zero))));
    musa_tensor *g = T(grad_expand_reduced(a, G, &r->dims, r->keepdim));
    gin[0] = musa_mul(g, d);
    musa_temps_release(&t);
    return gin[0] ? MUSA_OK : musa_last_error_code();
}

/* amax/amin: the gradient is shared evenly among the elements that attain
 * the extremum. */
int grad_extremum(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_reduce *r = a->attrs;
    musa_temps t = {0};
    musa_tensor *ye = T(grad_expand_reduced(a, Y, &r->dims, r->keepdim));
    musa_tensor *mask = T(musa_cast(T(musa_eq(X, ye)), (musa_dtype)a->in_meta[0].dtype));
    musa_tensor *count = T(musa_sum(mask, r->dims.n, r->dims.v, true));
    musa_tensor *ge = T(grad_expand_reduced(a, G, &r->dims, r->keepdim));
    gin[0] = musa_div(T(musa_mul(ge, mask)), count);
    musa_temps_release(&t);
    return gin[0] ? MUSA_OK : musa_last_error_code();
}

/* max_dim/min_dim: the value gradient goes to the selected index. */
int grad_dim_extremum(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_dim *d = a->attrs;
    musa_temps t = {0};
    if (!G || a->in_meta[0].ndim == 0) { /* 0-d input: the value is the input */
        gin[0] = G ? musa_tensor_retain(G) : NULL;
        return MUSA_OK;
    }
    musa_tensor *idx = a->out[1], *g = G;
    if (!d->keepdim) {
        idx = T(musa_unsqueeze(idx, d->dim));
        g = T(musa_unsqueeze(g, d->dim));
    }
    gin[0] = musa_scatter(T(grad_zeros_like_input(a, 0)), d->dim, idx, g);
    musa_temps_release(&t);
    return gin[0] ? MUSA_OK : musa_last_error_code();
}

/* d ||(x_1..x_n)|| / d x_i = g x_i / norm (0 where the norm is 0). */
int grad_norm_list(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    musa_tensor *zero = NUM(0);
    musa_tensor *safe = T(musa_where(T(musa_eq(Y, zero)), NUM(1), Y));
    musa_tensor *scale = T(musa_where(T(musa_eq(Y, zero)), zero, T(musa_div(G, safe))));
    int rc = MUSA_OK;
    for (int i = 0; i < a->n_in; i++) {
        gin[i] = NULL;
        if (!a->needs[i]) continue;
        musa_tensor *gi = musa_mul(a->in[i], scale);
        if (gi && gi->dtype != a->in_meta[i].dtype) {
            musa_tensor *c = musa_cast(gi, (musa_dtype)a->in_meta[i].dtype);
            musa_tensor_release(gi);
            gi = c;
        }
        if (!(gin[i] = gi)) rc = musa_last_error_code();
    }
    musa_temps_release(&t);
    return rc;
}

/* ---- matmul ---- */

static musa_tensor *mm(musa_tensor *x, musa_tensor *y, bool ta, bool tb) {
    musa_attrs_matmul at = {.transpose_a = ta, .transpose_b = tb};
    return musa_call2(MUSA_OP_matmul, x, y, &at);
}

/* With A (.., M, K) and B (.., K, N) the operands as matrices (1-d ones
 * promoted as NumPy does) and G (.., M, N): dA = G B^T and dB = A^T G, with
 * the transpose flags folded into the products, then batch dims summed
 * away and the promoted dims removed. */
int grad_matmul(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_matmul *at = a->attrs;
    musa_temps t = {0};
    musa_tensor *A = a->in[0], *B = a->in[1], *g = G;
    int na = a->in_meta[0].ndim, nb = a->in_meta[1].ndim;
    if (na == 1) A = T(musa_unsqueeze(A, 0));
    if (nb == 1) B = T(musa_unsqueeze(B, 1));
    if (na == 1) g = T(musa_unsqueeze(g, g->ndim - (nb == 1 ? 0 : 1)));
    if (nb == 1) g = T(musa_unsqueeze(g, -1));
    int rc = MUSA_OK;
    gin[0] = gin[1] = NULL;
    if (a->needs[0]) {
        /* dA_eff = G B_eff^T; dA = ta ? dA_eff^T = B_eff G^T : dA_eff */
        musa_tensor *d = at->transpose_a
                             ? (at->transpose_b ? mm(B, g, true, true) : mm(B, g, false, true))
                             : mm(g, B, false, !at->transpose_b);
        d = T(d);
        if (na == 1) d = T(musa_squeeze(d, 1, (int64_t[]){-2}));
        if (!(gin[0] = grad_to_input(a, 0, d))) rc = musa_last_error_code();
    }
    if (a->needs[1] && !rc) {
        /* dB_eff = A_eff^T G; dB = tb ? dB_eff^T = G^T A_eff : dB_eff */
        musa_tensor *d = at->transpose_b
                             ? (at->transpose_a ? mm(g, A, true, true) : mm(g, A, true, false))
                             : mm(A, g, !at->transpose_a, false);
        d = T(d);
        if (nb == 1) d = T(musa_squeeze(d, 1, (int64_t[]){-1}));
        if (!(gin[1] = grad_to_input(a, 1, d))) rc = musa_last_error_code();
    }
    if (rc) {
        musa_tensor_release(gin[0]), musa_tensor_release(gin[1]);
        gin[0] = gin[1] = NULL;
    }
    musa_temps_release(&t);
    return rc;
}
