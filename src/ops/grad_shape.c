/*
 * grad_shape.c - backward formulas of views and data movement ops.
 */
#include <math.h>

#include "grad_util.h"

#define G       (a->gout[0])
#define Y       (a->out[0])
#define T(expr) musa_tmp(&t, (expr))

#define RET(expr)                                                                                  \
    do {                                                                                           \
        gin[0] = (expr);                                                                           \
        musa_temps_release(&t);                                                                    \
        return gin[0] ? MUSA_OK : musa_last_error_code();                                          \
    } while (0)

int grad_view(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    RET(musa_reshape(G, a->in_meta[0].ndim, a->in_meta[0].shape));
}

int grad_squeeze(const musa_grad_args *a, musa_tensor **gin) {
    return grad_view(a, gin);
}

int grad_permute(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_dims *d = a->attrs;
    int64_t inv[MUSA_MAX_DIMS];
    for (int i = 0; i < d->dims.n; i++) inv[d->dims.v[i]] = i;
    musa_temps t = {0};
    RET(musa_permute(G, d->dims.n, inv));
}

int grad_expand(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    RET(musa_sum_to_size(G, a->in_meta[0].ndim, a->in_meta[0].shape));
}

int grad_unsqueeze(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_dim *d = a->attrs;
    musa_temps t = {0};
    RET(musa_squeeze(G, 1, &d->dim));
}

/* Place g at [start, start + len*step) with stride `step` along dim of a
 * zero tensor shaped like input 0, using only differentiable ops: interleave
 * g with step-1 zero slots, then pad to the input's size. */
static musa_tensor *embed(const musa_grad_args *a, musa_tensor *g, int64_t dim, int64_t start,
                          int64_t step) {
    const musa_meta *m = &a->in_meta[0];
    musa_temps t = {0};
    int64_t len = g->ndim ? g->shape[dim] : 0, size = m->shape[dim];
    musa_tensor *cur = g;
    /* With one element the step does not matter (and may be 2^31: no
     * (len, step) interleave that large) */
    if (step > 1 && len > 1) {
        musa_tensor *u = T(musa_unsqueeze(g, dim + 1));
        if (!u) {
            musa_temps_release(&t);
            return NULL;
        }
        int64_t zshape[MUSA_MAX_DIMS];
        memcpy(zshape, u->shape, sizeof(int64_t) * (size_t)u->ndim);
        zshape[dim + 1] = step - 1;
        musa_tensor *z = T(musa_zeros(u->ndim, zshape, (musa_dtype)g->dtype));
        musa_tensor *both[2] = {u, z};
        musa_tensor *c = T(musa_cat(2, both, dim + 1)); /* (.., len, step, ..) */
        int64_t shape[MUSA_MAX_DIMS];
        memcpy(shape, g->shape, sizeof(int64_t) * (size_t)g->ndim);
        shape[dim] = len * step;
        cur = T(musa_reshape(c, g->ndim, shape));
        if (!cur) { /* NULLs propagated from the first failure */
            musa_temps_release(&t);
            return NULL;
        }
    }
    int64_t filled = cur->shape[dim];
    /* pads for the last dims, last dim first; only `dim` is non-zero */
    int64_t pads[2 * MUSA_MAX_DIMS] = {0};
    int k = m->ndim - 1 - (int)dim;
    pads[2 * k] = start;
    pads[2 * k + 1] = size - start - filled; /* may be negative: crop the tail zeros */
    musa_tensor *r = musa_pad(cur, 2 * (k + 1), pads, 0);
    musa_temps_release(&t);
    return r;
}

int grad_slice(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_slice *s = a->attrs;
    musa_temps t = {0};
    RET(embed(a, G, s->dim, s->start, s->step));
}

int grad_select(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_select *s = a->attrs;
    musa_temps t = {0};
    RET(embed(a, T(musa_unsqueeze(G, s->dim)), s->dim, s->index, 1));
}

int grad_cat(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_dim *d = a->attrs;
    int64_t at = 0;
    int rc = MUSA_OK;
    for (int i = 0; i < a->n_in; i++) {
        int64_t len = a->in_meta[i].shape[d->dim];
        gin[i] = NULL;
        if (a->needs[i] && !rc) {
            musa_tensor *s = musa_slice(G, d->dim, at, at + len, 1);
            if (s && s->dtype != a->in_meta[i].dtype) {
                musa_tensor *c = musa_cast(s, (musa_dtype)a->in_meta[i].dtype);
                musa_tensor_release(s);
                s = c;
            }
            if (!(gin[i] = s)) rc = musa_last_error_code();
        }
        at += len;
    }
    return rc;
}

int grad_gather(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_dim *d = a->attrs;
    musa_temps t = {0};
    gin[1] = NULL;
    RET(musa_scatter_add(T(grad_zeros_like_input(a, 0)), d->dim, a->in[1], G));
}

static int grad_scatter_common(const musa_grad_args *a, musa_tensor **gin, bool add) {
    const musa_attrs_dim *d = a->attrs;
    musa_temps t = {0};
    int rc = MUSA_OK;
    gin[0] = gin[1] = gin[2] = NULL;
    if (a->needs[0]) {
        /* scatter overwrote those positions: no gradient flows to them */
        musa_tensor *z = T(musa_zeros(a->in[1]->ndim, a->in[1]->shape, (musa_dtype)G->dtype));
        gin[0] = add ? musa_tensor_retain(G) : musa_scatter(G, d->dim, a->in[1], z);
        if (!gin[0]) rc = musa_last_error_code();
    }
    if (a->needs[2] && !rc && !(gin[2] = musa_gather(G, d->dim, a->in[1])))
        rc = musa_last_error_code();
    if (rc) musa_tensor_release(gin[0]), gin[0] = NULL;
    musa_temps_release(&t);
    return rc;
}

int grad_scatter(const musa_grad_args *a, musa_tensor **gin) {
    return grad_scatter_common(a, gin, false);
}
int grad_scatter_add(const musa_grad_args *a, musa_tensor **gin) {
    return grad_scatter_common(a, gin, true);
}

/* The reducing scatters' gradients start empty, and reach src only where it
 * has index's shape, as in PyTorch. */
static int scatter_red_begin(const musa_grad_args *a, musa_tensor **gin) {
    const musa_tensor *i = a->in[1], *s = a->in[2];
    gin[0] = gin[1] = gin[2] = NULL;
    if (!a->needs[2] ||
        (i->ndim == s->ndim && !memcmp(i->shape, s->shape, sizeof(int64_t) * i->ndim)))
        return MUSA_OK;
    return musa_err(MUSA_ERR_NOT_IMPLEMENTED,
                    "[scatter_reduce] the gradient of src is implemented only for src of index's "
                    "shape");
}

/* scatter_amax/amin (PyTorch's scatter_reduce backward): the gradient is
 * shared evenly among the values equal to the result, x's and src's. */
int grad_scatter_extremum(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_dim *d = a->attrs;
    musa_tensor *x = a->in[0], *index = a->in[1], *src = a->in[2];
    int rc = scatter_red_begin(a, gin);
    if (rc) return rc;
    musa_temps t = {0};
    musa_dtype dt = (musa_dtype)G->dtype;
    musa_tensor *x_is = T(musa_cast(T(musa_eq(x, Y)), dt));
    musa_tensor *src_is = T(musa_cast(T(musa_eq(src, T(musa_gather(Y, d->dim, index)))), dt));
    musa_tensor *share = T(musa_div(G, T(musa_scatter_add(x_is, d->dim, index, src_is))));
    if (a->needs[0] && !(gin[0] = musa_mul(x_is, share))) rc = musa_last_error_code();
    if (!rc && a->needs[2] && !(gin[2] = musa_mul(src_is, T(musa_gather(share, d->dim, index)))))
        rc = musa_last_error_code();
    if (rc) musa_tensor_release(gin[0]), gin[0] = NULL;
    musa_temps_release(&t);
    return rc;
}

/* scatter_prod (PyTorch's formula): x gets g times the product of the
 * others, computed with x's zeros as ones; a src value gets g times the
 * result over itself, or, when it is the only zero at its position, the
 * product with it as one; with two zeros or more there, 0. */
int grad_scatter_prod(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_dim *d = a->attrs;
    musa_tensor *x = a->in[0], *index = a->in[1], *src = a->in[2];
    int rc = scatter_red_begin(a, gin);
    if (rc) return rc;
    musa_temps t = {0};
    musa_tensor *one = T(musa_number(1.0)), *zero = T(musa_number(0.0));
    if (a->needs[0]) {
        musa_tensor *x1 = T(musa_where(T(musa_eq(x, zero)), one, x));
        musa_tensor *r = T(musa_scatter_prod(x1, d->dim, index, src));
        if (!(gin[0] = musa_div(T(musa_mul(G, r)), x1))) rc = musa_last_error_code();
    }
    if (!rc && a->needs[2]) {
        musa_tensor *src0 = T(musa_eq(src, zero));
        musa_tensor *zeros = T(musa_gather(
            T(musa_scatter_add(T(musa_zeros(x->ndim, x->shape, (musa_dtype)x->dtype)), d->dim,
                               index, T(musa_cast(src0, (musa_dtype)x->dtype)))),
            d->dim, index));
        musa_tensor *single = T(musa_logical_and(src0, T(musa_eq(zeros, one))));
        musa_tensor *without =
            T(musa_scatter_prod(x, d->dim, index, T(musa_where(single, one, src))));
        musa_tensor *lone = T(musa_gather(T(musa_mul(G, without)), d->dim, index));
        musa_tensor *rest = T(musa_div(T(musa_gather(T(musa_mul(G, Y)), d->dim, index)),
                                       T(musa_where(src0, one, src))));
        if (!(gin[2] = musa_where(single, lone, rest))) rc = musa_last_error_code();
    }
    if (rc) musa_tensor_release(gin[0]), gin[0] = NULL;
    musa_temps_release(&t);
    return rc;
}

int grad_index_select(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_dim *d = a->attrs;
    musa_temps t = {0};
    gin[1] = NULL;
    RET(musa_index_add(T(grad_zeros_like_input(a, 0)), d->dim, a->in[1], G));
}

/* d weight[j, k] = the sum over every other dim of g[.., j, ..] times
 * x[.., index[j, k], ..], in weight's dtype: for resample, x is its input
 * and g its output's gradient; for resample_backward, x is the gradient of
 * its output and g its input. */
static musa_tensor *resample_weight_grad(musa_tensor *g, musa_tensor *x, musa_tensor *index,
                                         int64_t dim, musa_dtype dtype) {
    musa_temps t = {0};
    int64_t K = index->shape[1], dims[MUSA_MAX_DIMS];
    int nd = 0;
    for (int e = 0; e < x->ndim; e++)
        if (e != dim) dims[nd++] = e;
    musa_tensor **cols = musa_calloc((size_t)K, sizeof *cols, "resample");
    musa_tensor *r = NULL;
    int64_t k = 0;
    for (; cols && k < K; k++) {
        musa_tensor *ik = T(musa_contiguous(T(musa_select(index, 1, k))));
        musa_tensor *sel = ik ? T(musa_index_select(x, dim, ik)) : NULL;
        musa_tensor *p = sel ? T(musa_mul(g, sel)) : NULL;
        if (!p || !(cols[k] = T(musa_sum(p, nd, dims, false)))) break;
    }
    if (cols && k == K) {
        musa_tensor *w = T(musa_stack((int)K, cols, 1));
        r = w && (musa_dtype)w->dtype != dtype ? musa_cast(w, dtype) : musa_tensor_retain(w);
    }
    free(cols);
    musa_temps_release(&t);
    return r;
}

/* The two directions differ in which tensor is resampled where: each is
 * the other's adjoint, and the weight's gradient pairs the same two
 * tensors. */
static int resample_grads(const musa_grad_args *a, musa_tensor **gin, musa_op_id adjoint,
                          musa_tensor *g, musa_tensor *x) {
    musa_attrs_resample r = *(const musa_attrs_resample *)a->attrs;
    musa_tensor *in[3] = {G, a->in[1], a->in[2]};
    gin[0] = gin[1] = gin[2] = NULL;
    if (a->needs[0] && !(gin[0] = musa_call(adjoint, 3, in, &r))) return musa_last_error_code();
    if (a->needs[2] &&
        !(gin[2] = resample_weight_grad(g, x, a->in[1], r.dim, (musa_dtype)a->in_meta[2].dtype))) {
        musa_tensor_release(gin[0]);
        gin[0] = NULL;
        return musa_last_error_code();
    }
    return MUSA_OK;
}

int grad_resample(const musa_grad_args *a, musa_tensor **gin) {
    return resample_grads(a, gin, MUSA_OP_resample_backward, G, a->in[0]);
}

int grad_resample_backward(const musa_grad_args *a, musa_tensor **gin) {
    return resample_grads(a, gin, MUSA_OP_resample, a->in[0], G);
}

int grad_index_add(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_dim *d = a->attrs;
    int rc = MUSA_OK;
    gin[0] = a->needs[0] ? musa_tensor_retain(G) : NULL;
    gin[1] = NULL;
    gin[2] = NULL;
    if (a->needs[2]) {
        musa_tensor *s = musa_index_select(G, d->dim, a->in[1]);
        if (s && a->in_meta[2].ndim != s->ndim) { /* 0-d input, 1-element source */
            musa_tensor *r = musa_reshape(s, a->in_meta[2].ndim, a->in_meta[2].shape);
            musa_tensor_release(s);
            s = r;
        }
        if (!(gin[2] = s)) rc = musa_last_error_code();
    }
    return rc;
}

int grad_pad(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_pad *p = a->attrs;
    int64_t neg[2 * MUSA_MAX_DIMS];
    for (int i = 0; i < p->pads.n; i++) neg[i] = -p->pads.v[i];
    musa_temps t = {0};
    RET(musa_pad(G, p->pads.n, neg, 0));
}

int grad_flip(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_dims *d = a->attrs;
    musa_temps t = {0};
    RET(musa_flip(G, d->dims.n, d->dims.v));
}

int grad_tril(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    RET(musa_tril(G, ((const musa_attrs_tri *)a->attrs)->k));
}

int grad_triu(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    RET(musa_triu(G, ((const musa_attrs_tri *)a->attrs)->k));
}

/* The gradient of a prefix sum is the suffix sum of the gradient. */
int grad_cumsum(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_dim *d = a->attrs;
    musa_temps t = {0};
    if (a->in_meta[0].ndim == 0) RET(musa_tensor_retain(G));
    musa_tensor *f = T(musa_flip(G, 1, &d->dim));
    musa_tensor *c = T(musa_cumsum(f, d->dim));
    if (c && c->dtype != a->in_meta[0].dtype) c = T(musa_cast(c, (musa_dtype)a->in_meta[0].dtype));
    RET(musa_flip(c, 1, &d->dim));
}

/* The pairs (i, j) of a scan's line as a (n, n) matrix: the line moved last
 * and unsqueezed at -1 (as rows i) or -2 (as columns j); `upper` is 1 where
 * j >= i. The differentiable (create_graph) forms of the scan gradients below
 * use them: O(n^2) per line, where the first-order ops are O(n). */
static musa_tensor *scan_rows(musa_temps *t, musa_tensor *v, int64_t dim, int64_t last,
                              int64_t at) {
    return musa_tmp(t, musa_unsqueeze(musa_tmp(t, musa_transpose(v, dim, last)), at));
}
static musa_tensor *scan_upper(musa_temps *t, int64_t n, musa_dtype dt) {
    return musa_tmp(t, musa_triu(musa_tmp(t, musa_ones(2, (int64_t[]){n, n}, dt)), 0));
}
/* The line moved back from last to dim, after summing the pairs over j. */
static musa_tensor *scan_back(musa_temps *t, musa_tensor *pairs, int64_t dim, int64_t last) {
    return musa_transpose(musa_tmp(t, musa_sum(pairs, 1, (int64_t[]){-1}, false)), dim, last);
}

/* cumprod: an op of its own computes the gradient (exact with zeros in x).
 * Recording (create_graph), gx_i = sum_{j >= i} g_j prod_{k <= j, k != i} x_k
 * instead, with the products a cumprod of rows of x whose i-th entry is 1:
 * exact with zeros too, and differentiable again. */
int grad_cumprod(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    const musa_attrs_dim *d = a->attrs;
    if (!musa_is_grad_enabled() || a->in_meta[0].ndim == 0) {
        if (a->in_meta[0].ndim == 0) RET(musa_tensor_retain(G));
        musa_tensor *in[2] = {a->in[0], G};
        RET(musa_call(MUSA_OP_cumprod_backward, 2, in, a->attrs));
    }
    int64_t last = a->in_meta[0].ndim - 1, n = a->in_meta[0].shape[d->dim];
    musa_dtype dt = (musa_dtype)a->in[0]->dtype;
    musa_tensor *eye = T(musa_eye(n, n, dt));
    musa_tensor *rows = scan_rows(&t, a->in[0], d->dim, last, -2); /* (..., 1, n): x_k */
    musa_tensor *others = T(musa_add(T(musa_mul(rows, T(musa_sub(T(musa_number(1)), eye)))), eye));
    musa_tensor *prods = T(musa_cumprod(others, -1)); /* [i, j] = prod_{k <= j, k != i} x_k */
    musa_tensor *g = scan_rows(&t, G, d->dim, last, -2);
    RET(scan_back(&t, T(musa_mul(T(musa_mul(prods, scan_upper(&t, n, dt))), g)), d->dim, last));
}

/* cummax/cummin: each output's gradient goes to where its value came from
 * (summed where several outputs share one). */
int grad_cumext(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_dim *d = a->attrs;
    musa_temps t = {0};
    if (!G) RET(NULL);
    if (a->in_meta[0].ndim == 0) RET(musa_tensor_retain(G));
    RET(musa_scatter_add(T(grad_zeros_like_input(a, 0)), d->dim, a->out[1], G));
}

/* logcumsumexp: an op of its own, a stable reverse scan. Recording
 * (create_graph), gx_i = sum_{j >= i} g_j exp(x_i - y_j) over the pairs,
 * each factor at most 1 (the others are exp(-inf) = 0: no overflow, no
 * NaN gradient), differentiable again. */
int grad_logcumsumexp(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    const musa_attrs_dim *d = a->attrs;
    if (!musa_is_grad_enabled() || a->in_meta[0].ndim == 0) {
        if (a->in_meta[0].ndim == 0) RET(musa_tensor_retain(G));
        musa_tensor *in[3] = {a->in[0], Y, G};
        RET(musa_call(MUSA_OP_logcumsumexp_backward, 3, in, a->attrs));
    }
    int64_t last = a->in_meta[0].ndim - 1, n = a->in_meta[0].shape[d->dim];
    musa_dtype dt = (musa_dtype)a->in[0]->dtype;
    musa_tensor *xi = scan_rows(&t, a->in[0], d->dim, last, -1); /* (..., n, 1): x_i */
    musa_tensor *yj = scan_rows(&t, Y, d->dim, last, -2);        /* (..., 1, n): y_j */
    musa_tensor *upper = T(musa_ne(scan_upper(&t, n, dt), T(musa_number(0))));
    musa_tensor *diff = T(musa_where(upper, T(musa_sub(xi, yj)), T(musa_number(-INFINITY))));
    musa_tensor *g = scan_rows(&t, G, d->dim, last, -2);
    RET(scan_back(&t, T(musa_mul(T(musa_exp(diff)), g)), d->dim, last));
}

/* sort/topk: values go back to where they came from (out[1] = indices). */
static int scatter_back(const musa_grad_args *a, musa_tensor **gin, int64_t dim) {
    musa_temps t = {0};
    if (!G) RET(NULL);
    if (a->in_meta[0].ndim == 0) RET(musa_reshape(G, 0, NULL));
    RET(musa_scatter(T(grad_zeros_like_input(a, 0)), dim, a->out[1], G));
}

int grad_sort(const musa_grad_args *a, musa_tensor **gin) {
    return scatter_back(a, gin, ((const musa_attrs_sort *)a->attrs)->dim);
}

int grad_topk(const musa_grad_args *a, musa_tensor **gin) {
    return scatter_back(a, gin, ((const musa_attrs_topk *)a->attrs)->dim);
}

/* as_strided(x): the gradient lands on x's elements at the region's
 * positions (summed where the region overlaps itself). Needs x contiguous
 * at forward time (the infer function records where it started). */
int grad_as_strided(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_strided *s = a->attrs;
    if (s->base_offset < 0)
        return musa_err(MUSA_ERR_NOT_IMPLEMENTED,
                        "[as_strided] backward through a view of a non-contiguous tensor");
    musa_attrs_strided r = *s;
    r.offset = s->offset - s->base_offset;
    r.accumulate = true;
    musa_temps t = {0};
    musa_tensor *in[2] = {T(grad_zeros_like_input(a, 0)), G};
    RET(musa_call(MUSA_OP_as_strided_scatter, 2, in, &r));
}

/* out = x with region := src (or += src): x gets g outside the region (all
 * of g when accumulating); src gets g's region. */
int grad_as_strided_scatter(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_strided *s = a->attrs;
    musa_temps t = {0};
    gin[0] = gin[1] = NULL;
    musa_tensor *g = T(musa_contiguous(G));
    if (g && g->offset) g = T(musa_clone(g)); /* region offsets count from the first element */
    if (!g) {
        musa_temps_release(&t);
        return musa_last_error_code();
    }
    if (a->needs[0]) {
        if (s->accumulate) {
            gin[0] = musa_tensor_retain(g);
        } else {
            musa_attrs_strided z = *s;
            const musa_meta *m = &a->in_meta[1];
            musa_tensor *in[2] = {g, T(musa_zeros(m->ndim, m->shape, (musa_dtype)g->dtype))};
            gin[0] = musa_call(MUSA_OP_as_strided_scatter, 2, in, &z);
        }
    }
    if (a->needs[1]) {
        musa_tensor *v =
            g ? T(musa_as_strided(g, s->shape.n, s->shape.v, s->strides.v, s->offset)) : NULL;
        gin[1] = v ? grad_to_input(a, 1, v) : NULL;
    }
    musa_temps_release(&t);
    if ((a->needs[0] && !gin[0]) || (a->needs[1] && !gin[1])) {
        musa_tensor_release(gin[0]), musa_tensor_release(gin[1]);
        gin[0] = gin[1] = NULL;
        return musa_last_error_code();
    }
    return MUSA_OK;
}
