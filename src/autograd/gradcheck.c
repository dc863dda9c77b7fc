/*
 * gradcheck.c - compare autograd's Jacobian with central finite
 * differences (musa_gradcheck), and the same for the gradient of the
 * gradient (musa_gradgradcheck).
 *
 * The numerical Jacobian perturbs each element of each checked input in
 * place through its data pointer and restores it exactly, so version
 * counters (and the graphs of other evaluations) are unaffected.
 */
#include <math.h>
#include <stdio.h>

#include "autograd.h"

#define MAX_OUT 8

typedef struct {
    int n;
    musa_tensor *t[MAX_OUT];
} outs;

static void outs_release(outs *o) {
    for (int i = 0; i < o->n; i++) musa_tensor_release(o->t[i]);
    o->n = 0;
}

static int eval(musa_func fn, void *ctx, int n_in, musa_tensor *const *in, outs *o) {
    o->n = 0;
    memset(o->t, 0, sizeof o->t);
    int rc = fn(ctx, n_in, in, &o->n, o->t);
    if (!rc && (o->n < 1 || o->n > MAX_OUT))
        rc =
            musa_err(MUSA_ERR_VALUE, "[gradcheck] the function returned %d outputs (1..%d allowed)",
                     o->n, MAX_OUT);
    for (int i = 0; !rc && i < o->n; i++)
        if (!o->t[i]) rc = musa_err(MUSA_ERR_VALUE, "[gradcheck] output %d is NULL", i);
    if (rc) outs_release(o);
    return rc;
}

/* Values of t as doubles (row-major). */
static double *values(musa_tensor *t) {
    bool prev = musa_set_grad_enabled(false);
    musa_tensor *d = musa_cast(t, MUSA_DTYPE_FLOAT64);
    musa_set_grad_enabled(prev);
    double *v = malloc(sizeof(double) * (size_t)(t->numel ? t->numel : 1));
    if (!d || !v || musa_tensor_copy_to(d, v, sizeof(double) * (size_t)t->numel)) {
        free(v);
        v = NULL;
    }
    musa_tensor_release(d);
    return v;
}

static char *elem_ptr(musa_tensor *t, int64_t e) {
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (e % t->shape[d]) * t->strides[d];
        e /= t->shape[d];
    }
    return (char *)musa_tensor_data(t) + off * (int64_t)musa_dtype_info[t->dtype].size;
}

int musa_gradcheck(musa_func fn, void *ctx, int n_in, musa_tensor *const *inputs, double eps,
                   double atol, double rtol) {
    if (!fn || n_in < 1 || !inputs) return musa_err(MUSA_ERR_VALUE, "[gradcheck] bad arguments");
    if (eps <= 0) eps = 1e-6;
    if (atol < 0) atol = 1e-5;
    if (rtol < 0) rtol = 1e-3;
    int checked[64], nc = 0;
    musa_tensor *cin[64];
    if (n_in > 64) return musa_err(MUSA_ERR_VALUE, "[gradcheck] at most 64 inputs");
    for (int i = 0; i < n_in; i++) {
        musa_tensor *t = inputs[i];
        if (!t) return musa_err(MUSA_ERR_VALUE, "[gradcheck] input %d is NULL", i);
        if (!(t->flags & MUSA_TF_REQUIRES_GRAD)) continue;
        if (t->dtype != MUSA_DTYPE_FLOAT64)
            return musa_err(MUSA_ERR_TYPE,
                            "[gradcheck] input %d is %s; gradcheck needs float64 inputs", i,
                            musa_dtype_name((musa_dtype)t->dtype));
        for (int d = 0; d < t->ndim; d++)
            if (t->strides[d] == 0 && t->shape[d] > 1)
                return musa_err(MUSA_ERR_VALUE,
                                "[gradcheck] input %d has overlapping elements (an "
                                "expanded view); pass a contiguous copy",
                                i);
        checked[nc] = i;
        cin[nc++] = t;
    }
    if (nc == 0) return musa_err(MUSA_ERR_VALUE, "[gradcheck] no input requires grad");

    outs base;
    int rc = eval(fn, ctx, n_in, inputs, &base);
    if (rc) return rc;
    int64_t on[MAX_OUT];
    for (int o = 0; o < base.n; o++) on[o] = base.t[o]->numel;

    /* numerical: num[o][c] is numel(in_c) x numel(out_o), row = input element */
    double *num[MAX_OUT][64] = {{NULL}};
    for (int c = 0; c < nc && !rc; c++) {
        musa_tensor *x = cin[c];
        for (int o = 0; o < base.n; o++)
            if (!(num[o][c] = calloc((size_t)(x->numel * on[o] + 1), sizeof(double))))
                rc = musa_err_nomem("gradcheck", 0);
        for (int64_t e = 0; e < x->numel && !rc; e++) {
            /* outputs may alias the input (views), so read each evaluation's
             * values before the next perturbation */
            char *p = elem_ptr(x, e);
            double orig = *(double *)p;
            double *vp[MAX_OUT] = {NULL}, *vm[MAX_OUT] = {NULL};
            for (int side = 0; side < 2 && !rc; side++) {
                outs o;
                *(double *)p = side == 0 ? orig + eps : orig - eps;
                rc = eval(fn, ctx, n_in, inputs, &o);
                for (int k = 0; !rc && k < base.n; k++) {
                    double **dst = side == 0 ? &vp[k] : &vm[k];
                    if (!(*dst = values(o.t[k]))) rc = musa_last_error_code();
                }
                if (!rc) outs_release(&o);
                *(double *)p = orig;
            }
            for (int o = 0; o < base.n && !rc; o++)
                for (int64_t k = 0; k < on[o]; k++)
                    num[o][c][e * on[o] + k] = (vp[o][k] - vm[o][k]) / (2 * eps);
            for (int o = 0; o < MAX_OUT; o++) free(vp[o]), free(vm[o]);
        }
    }

    /* analytical: one musa_grad per output element, with a one-hot gradient */
    for (int o = 0; o < base.n && !rc; o++) {
        musa_tensor *y = base.t[o];
        if (!musa_is_float((musa_dtype)y->dtype)) continue;
        bool differentiable = y->flags & MUSA_TF_REQUIRES_GRAD;
        for (int64_t k = 0; k < on[o] && !rc; k++) {
            musa_tensor *res[64] = {NULL};
            if (differentiable) {
                musa_tensor *onehot = musa_zeros_like(y);
                if (!onehot) {
                    rc = musa_last_error_code();
                    break;
                }
                musa_store_f64(elem_ptr(onehot, k), (musa_dtype)onehot->dtype, 1.0);
                rc = musa_grad(1, &y, &onehot, nc, cin, true, false, true, res);
                musa_tensor_release(onehot);
            }
            for (int c = 0; c < nc && !rc; c++) {
                double *g = res[c] ? values(res[c]) : NULL;
                for (int64_t e = 0; e < cin[c]->numel && !rc; e++) {
                    double a = g ? g[e] : 0.0, n = num[o][c][e * on[o] + k];
                    if (fabs(a - n) > atol + rtol * fabs(n) || a != a) {
                        rc = musa_err(MUSA_ERR_VALUE,
                                      "[gradcheck] Jacobian mismatch for output %d with respect to "
                                      "input %d, input element %lld, output element %lld: "
                                      "numerical %.10g, analytical %.10g",
                                      o, checked[c], (long long)e, (long long)k, n, a);
                    }
                }
                free(g);
            }
            for (int c = 0; c < nc; c++) musa_tensor_release(res[c]);
        }
    }
    for (int o = 0; o < MAX_OUT; o++)
        for (int c = 0; c < 64; c++) free(num[o][c]);
    outs_release(&base);
    return rc;
}

/* ---- gradgradcheck: gradcheck of (inputs, grad_outputs) -> vjp ---- */

typedef struct {
    musa_func fn;
    void *ctx;
    int n_in; /* original inputs */
    int n_go; /* grad_outputs appended after them */
} gg_ctx;

static int vjp_fn(void *p, int n, musa_tensor *const *in, int *n_out, musa_tensor **out) {
    gg_ctx *g = p;
    MUSA_UNUSED(n);
    outs o;
    int rc = eval(g->fn, g->ctx, g->n_in, in, &o);
    if (rc) return rc;
    musa_tensor *ys[MAX_OUT], *gos[MAX_OUT], *xs[64];
    int ny = 0, nx = 0;
    for (int j = 0; j < o.n; j++)
        if (musa_is_float((musa_dtype)o.t[j]->dtype) && (o.t[j]->flags & MUSA_TF_REQUIRES_GRAD)) {
            ys[ny] = o.t[j];
            gos[ny] = in[g->n_in + ny];
            ny++;
        }
    for (int i = 0; i < g->n_in; i++)
        if (in[i]->flags & MUSA_TF_REQUIRES_GRAD) xs[nx++] = in[i];
    musa_tensor *res[64] = {NULL};
    if (ny) rc = musa_grad(ny, ys, gos, nx, xs, true, true, true, res);
    *n_out = 0;
    for (int i = 0; i < nx && !rc && *n_out < MAX_OUT; i++) {
        out[(*n_out)++] = res[i] ? res[i] : musa_zeros_like(xs[i]);
        res[i] = NULL;
    }
    for (int i = 0; i < nx; i++) musa_tensor_release(res[i]);
    outs_release(&o);
    return rc;
}

int musa_gradgradcheck(musa_func fn, void *ctx, int n_in, musa_tensor *const *inputs, double eps,
                       double atol, double rtol) {
    if (!fn || n_in < 1 || !inputs || n_in > 32)
        return musa_err(MUSA_ERR_VALUE, "[gradgradcheck] bad arguments");
    outs o;
    int rc = eval(fn, ctx, n_in, inputs, &o);
    if (rc) return rc;
    musa_tensor *all[64];
    int n = 0;
    for (int i = 0; i < n_in; i++) all[n++] = inputs[i];
    gg_ctx g = {fn, ctx, n_in, 0};
    for (int j = 0; j < o.n && !rc; j++) {
        if (!musa_is_float((musa_dtype)o.t[j]->dtype) || !(o.t[j]->flags & MUSA_TF_REQUIRES_GRAD))
            continue;
        musa_tensor *go = musa_randn(o.t[j]->ndim, o.t[j]->shape, MUSA_DTYPE_FLOAT64);
        if (!go || (rc = musa_tensor_set_requires_grad(go, true))) {
            rc = rc ? rc : musa_last_error_code();
            musa_tensor_release(go);
            break;
        }
        all[n++] = go;
        g.n_go++;
    }
    outs_release(&o);
    if (!rc) rc = musa_gradcheck(vjp_fn, &g, n, all, eps, atol, rtol);
    if (rc && strncmp(musa_last_error(), "[gradcheck]", 11) == 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", musa_last_error() + 11);
        musa_err(rc, "[gradgradcheck]%s", msg);
    }
    for (int i = n_in; i < n; i++) musa_tensor_release(all[i]);
    return rc;
}
