/*
 * infer_shape.c - inference for matmul, views, data movement and creation.
 * View inference also computes the output's strides and offset within
 * input 0's storage; the dispatcher turns that into a view tensor (or a
 * meta view in symbolic mode) without a kernel.
 */
#include "op.h"

#include <math.h>
#include <stdio.h>

static int need_index_dtype(const musa_op_info *op, musa_tensor *const *in, int i, musa_infer *r) {
    musa_dtype d = (musa_dtype)in[i]->dtype;
    if (d == MUSA_DTYPE_INT64) return MUSA_OK;
    if (d == MUSA_DTYPE_INT32 || d == MUSA_DTYPE_INT16 || d == MUSA_DTYPE_UINT8 ||
        d == MUSA_DTYPE_INT8) {
        r->in_dtype[i] = MUSA_DTYPE_INT64;
        return MUSA_OK;
    }
    return musa_err(MUSA_ERR_TYPE, "[%s] index must be an integer tensor, got %s", op->name,
                    musa_dtype_name(d));
}

/* ---- matmul ---- */

int infer_matmul(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                 musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_matmul *at = attrs;
    const musa_tensor *a = in[0], *b = in[1];
    char sa[128], sb[128];
    if (a->ndim == 0 || b->ndim == 0)
        return musa_err(MUSA_ERR_VALUE, "[%s] both arguments need at least 1 dim, got %d and %d",
                        op->name, a->ndim, b->ndim);
    if ((at->transpose_a && a->ndim < 2) || (at->transpose_b && b->ndim < 2))
        return musa_err(MUSA_ERR_VALUE, "[%s] transpose flags need a 2-d or larger operand",
                        op->name);
    musa_dtype t = musa_promote_types((musa_dtype)a->dtype, (musa_dtype)b->dtype);
    if (t == MUSA_DTYPE_BOOL)
        return musa_err(MUSA_ERR_TYPE, "[%s] bool tensors are not supported", op->name);
    int64_t M = 1, Ka, Kb, N = 1;
    if (a->ndim == 1)
        Ka = a->shape[0];
    else {
        M = a->shape[a->ndim - (at->transpose_a ? 1 : 2)];
        Ka = a->shape[a->ndim - (at->transpose_a ? 2 : 1)];
    }
    if (b->ndim == 1)
        Kb = b->shape[0];
    else {
        Kb = b->shape[b->ndim - (at->transpose_b ? 1 : 2)];
        N = b->shape[b->ndim - (at->transpose_b ? 2 : 1)];
    }
    if (Ka != Kb)
        return musa_err(MUSA_ERR_VALUE, "[%s] shapes %s and %s cannot be multiplied (%lld != %lld)",
                        op->name, musa_shape_str(a->ndim, a->shape, sa, sizeof sa),
                        musa_shape_str(b->ndim, b->shape, sb, sizeof sb), (long long)Ka,
                        (long long)Kb);
    int nb = 0;
    int64_t batch[MUSA_MAX_DIMS];
    int na_b = a->ndim > 2 ? a->ndim - 2 : 0, nb_b = b->ndim > 2 ? b->ndim - 2 : 0;
    int rc = musa_broadcast_shape(op->name, na_b, a->shape, nb_b, b->shape, &nb, batch);
    if (rc) return rc;
    int64_t shape[MUSA_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < nb; i++) shape[n++] = batch[i];
    if (a->ndim > 1) shape[n++] = M;
    if (b->ndim > 1) shape[n++] = N;
    r->in_dtype[0] = r->in_dtype[1] = (int8_t)t;
    musa_infer_out(r, 0, t, n, shape);
    return MUSA_OK;
}

/* ---- views ---- */

/* Resolve one -1 entry of `shape` for `numel` elements. */
static int resolve_shape(const musa_op_info *op, int64_t numel, musa_ints *shape) {
    int infer_at = -1;
    int64_t known = 1;
    char buf[160];
    for (int i = 0; i < shape->n; i++) {
        if (shape->v[i] == -1) {
            if (infer_at >= 0)
                return musa_err(MUSA_ERR_VALUE, "[%s] only one dim can be -1", op->name);
            infer_at = i;
        } else if (shape->v[i] < 0) {
            return musa_err(MUSA_ERR_VALUE, "[%s] invalid size %lld in dim %d", op->name,
                            (long long)shape->v[i], i);
        } else if (!musa_mul_i64(known, shape->v[i], &known)) {
            return musa_err(MUSA_ERR_VALUE, "[%s] shape overflows int64", op->name);
        }
    }
    if (infer_at >= 0) {
        if (known == 0)
            return musa_err(MUSA_ERR_VALUE,
                            "[%s] cannot infer the -1 in shape %s for a tensor of %lld elements: "
                            "it could be any value",
                            op->name, musa_shape_str(shape->n, shape->v, buf, sizeof buf),
                            (long long)numel);
        if (numel % known != 0)
            return musa_err(MUSA_ERR_VALUE, "[%s] shape %s is invalid for input of size %lld",
                            op->name, musa_shape_str(shape->n, shape->v, buf, sizeof buf),
                            (long long)numel);
        shape->v[infer_at] = numel / known;
    } else if (known != numel) {
        return musa_err(MUSA_ERR_VALUE, "[%s] shape %s is invalid for input of size %lld", op->name,
                        musa_shape_str(shape->n, shape->v, buf, sizeof buf), (long long)numel);
    }
    return MUSA_OK;
}

/* Strides for viewing (oshape, ostride) as nshape without copying; false if
 * impossible. Dims are grouped into contiguous chunks of the old layout and
 * each chunk must map onto whole new dims. */
static bool view_strides(int on, const int64_t *oshape, const int64_t *ostride, int nn,
                         const int64_t *nshape, int64_t numel, int64_t *nstride) {
    if (numel == 0 || on == 0) {
        musa_contiguous_strides(nn, nshape, nstride);
        return true;
    }
    int view_d = nn - 1;
    int64_t chunk_base = ostride[on - 1], tensor_numel = 1, view_numel = 1;
    for (int td = on - 1; td >= 0; td--) {
        tensor_numel *= oshape[td];
        if (td == 0 || (oshape[td - 1] != 1 && ostride[td - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || nshape[view_d] == 1)) {
                nstride[view_d] = view_numel * chunk_base;
                view_numel *= nshape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (td > 0) {
                chunk_base = ostride[td - 1];
                tensor_numel = view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

int infer_view(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
               musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_shape *a = attrs;
    const musa_tensor *x = in[0];
    if (a->shape.n > MUSA_MAX_DIMS)
        return musa_err(MUSA_ERR_VALUE, "[%s] at most %d dims", op->name, MUSA_MAX_DIMS);
    int rc = resolve_shape(op, x->numel, &a->shape);
    if (rc) return rc;
    if (!view_strides(x->ndim, x->shape, x->strides, a->shape.n, a->shape.v, x->numel,
                      r->view_strides))
        return musa_err(MUSA_ERR_RUNTIME,
                        "[%s] the shape is not compatible with the input's size and strides "
                        "(at least one dim spans two contiguous chunks); use reshape",
                        op->name);
    musa_infer_out(r, 0, (musa_dtype)x->dtype, a->shape.n, a->shape.v);
    r->view_offset = x->offset;
    return MUSA_OK;
}

int musa_view_possible(const musa_tensor *x, int ndim, const int64_t *shape) {
    int64_t st[MUSA_MAX_DIMS];
    return view_strides(x->ndim, x->shape, x->strides, ndim, shape, x->numel, st);
}

int infer_permute(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                  musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_dims *a = attrs;
    const musa_tensor *x = in[0];
    if (a->dims.n != x->ndim)
        return musa_err(MUSA_ERR_VALUE, "[%s] got %d dims for a %d-d tensor", op->name, a->dims.n,
                        x->ndim);
    bool seen[MUSA_MAX_DIMS] = {false};
    int64_t shape[MUSA_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        int64_t d;
        int rc = musa_wrap_dim(op->name, a->dims.v[i], x->ndim, &d);
        if (rc) return rc;
        if (seen[d])
            return musa_err(MUSA_ERR_VALUE, "[%s] dim %lld repeats", op->name, (long long)d);
        seen[d] = true;
        a->dims.v[i] = d;
        shape[i] = x->shape[d];
        r->view_strides[i] = x->strides[d];
    }
    musa_infer_out(r, 0, (musa_dtype)x->dtype, x->ndim, shape);
    r->view_offset = x->offset;
    return MUSA_OK;
}

int infer_slice(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_slice *a = attrs;
    const musa_tensor *x = in[0];
    if (x->ndim == 0) return musa_err(MUSA_ERR_INDEX, "[%s] cannot slice a 0-d tensor", op->name);
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, x->ndim, &d);
    if (rc) return rc;
    if (a->step <= 0)
        return musa_err(MUSA_ERR_VALUE, "[%s] step must be positive, got %lld", op->name,
                        (long long)a->step);
    int64_t size = x->shape[d], start = a->start, end = a->end;
    if (start < 0) start = start < -size ? 0 : start + size;
    if (end < 0) end = end < -size ? 0 : end + size;
    if (start > size) start = size;
    if (end > size) end = size;
    if (end < start) end = start;
    int64_t len = end > start ? (end - start - 1) / a->step + 1 : 0; /* step may be INT64_MAX */
    a->dim = d, a->start = start, a->end = end;
    int64_t shape[MUSA_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    memcpy(r->view_strides, x->strides, sizeof r->view_strides);
    shape[d] = len;
    /* The products overflow only where they do not matter: a step past
     * the dim (len <= 1) or an empty x, whose strides may be anything. */
    if (!musa_mul_i64(x->strides[d], a->step, &r->view_strides[d]))
        r->view_strides[d] = x->strides[d];
    int64_t off = 0;
    if (!len || !musa_mul_i64(start, x->strides[d], &off) || !musa_add_i64(x->offset, off, &off))
        off = x->offset;
    r->view_offset = off;
    musa_infer_out(r, 0, (musa_dtype)x->dtype, x->ndim, shape);
    return MUSA_OK;
}

int infer_select(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                 musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_select *a = attrs;
    const musa_tensor *x = in[0];
    if (x->ndim == 0) return musa_err(MUSA_ERR_INDEX, "[%s] cannot index a 0-d tensor", op->name);
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, x->ndim, &d);
    if (rc) return rc;
    int64_t size = x->shape[d], i = a->index;
    if (i < -size || i >= size)
        return musa_err(MUSA_ERR_INDEX,
                        "[%s] index %lld is out of bounds for dim %lld with size %lld", op->name,
                        (long long)i, (long long)d, (long long)size);
    if (i < 0) i += size;
    a->dim = d, a->index = i;
    int64_t shape[MUSA_MAX_DIMS];
    int n = 0;
    for (int k = 0; k < x->ndim; k++) {
        if (k == d) continue;
        shape[n] = x->shape[k];
        r->view_strides[n++] = x->strides[k];
    }
    int64_t off; /* overflows only for an empty x (its strides may be anything) */
    if (!musa_mul_i64(i, x->strides[d], &off) || !musa_add_i64(x->offset, off, &off))
        off = x->offset;
    r->view_offset = off;
    musa_infer_out(r, 0, (musa_dtype)x->dtype, n, shape);
    return MUSA_OK;
}

int infer_expand(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                 musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_shape *a = attrs;
    const musa_tensor *x = in[0];
    int n = a->shape.n;
    if (n < x->ndim || n > MUSA_MAX_DIMS)
        return musa_err(MUSA_ERR_VALUE, "[%s] cannot expand a %d-d tensor to %d dims", op->name,
                        x->ndim, n);
    int64_t shape[MUSA_MAX_DIMS];
    for (int i = n - 1; i >= 0; i--) {
        int xi = i - (n - x->ndim);
        int64_t want = a->shape.v[i];
        if (xi < 0) {
            if (want < 0)
                return musa_err(MUSA_ERR_VALUE,
                                "[%s] size -1 is not allowed in a new leading dim %d", op->name, i);
            shape[i] = want;
            r->view_strides[i] = 0;
            continue;
        }
        int64_t have = x->shape[xi];
        if (want == -1) want = have;
        if (want < 0)
            return musa_err(MUSA_ERR_VALUE, "[%s] invalid size %lld", op->name, (long long)want);
        if (have == want) {
            shape[i] = have;
            r->view_strides[i] = x->strides[xi];
        } else if (have == 1) {
            shape[i] = want;
            r->view_strides[i] = 0;
        } else {
            return musa_err(
                MUSA_ERR_VALUE,
                "[%s] the expanded size %lld must match the existing size %lld at dim %d", op->name,
                (long long)want, (long long)have, i);
        }
        a->shape.v[i] = shape[i];
    }
    r->view_offset = x->offset;
    musa_infer_out(r, 0, (musa_dtype)x->dtype, n, shape);
    return MUSA_OK;
}

int infer_squeeze(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                  musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_dims *a = attrs;
    const musa_tensor *x = in[0];
    bool drop[MUSA_MAX_DIMS] = {false};
    for (int i = 0; i < a->dims.n; i++) {
        int64_t d;
        int rc = musa_wrap_dim(op->name, a->dims.v[i], x->ndim, &d);
        if (rc) return rc;
        if (x->ndim && x->shape[d] == 1) drop[d] = true;
    }
    if (a->dims.n == 0)
        for (int d = 0; d < x->ndim; d++) drop[d] = x->shape[d] == 1;
    int64_t shape[MUSA_MAX_DIMS];
    int n = 0;
    musa_ints canon;
    memset(&canon, 0, sizeof canon);
    for (int d = 0; d < x->ndim; d++) {
        if (drop[d]) {
            canon.v[canon.n++] = d;
            continue;
        }
        shape[n] = x->shape[d];
        r->view_strides[n++] = x->strides[d];
    }
    a->dims = canon;
    r->view_offset = x->offset;
    musa_infer_out(r, 0, (musa_dtype)x->dtype, n, shape);
    return MUSA_OK;
}

int infer_unsqueeze(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                    musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_dim *a = attrs;
    const musa_tensor *x = in[0];
    if (x->ndim >= MUSA_MAX_DIMS)
        return musa_err(MUSA_ERR_VALUE, "[%s] a tensor has at most %d dims", op->name,
                        MUSA_MAX_DIMS);
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, x->ndim + 1, &d);
    if (rc) return rc;
    a->dim = d;
    int64_t shape[MUSA_MAX_DIMS];
    int n = 0;
    for (int k = 0; k <= x->ndim; k++) {
        if (k == d) {
            shape[n] = 1;
            /* any stride does for a size-1 dim; this one keeps the view
             * contiguous when x is (an empty x's product may overflow) */
            int64_t st = 1;
            if (k < x->ndim && !musa_mul_i64(x->shape[k], x->strides[k], &st)) st = x->strides[k];
            r->view_strides[n++] = st;
        }
        if (k < x->ndim) {
            shape[n] = x->shape[k];
            r->view_strides[n++] = x->strides[k];
        }
    }
    r->view_offset = x->offset;
    musa_infer_out(r, 0, (musa_dtype)x->dtype, n, shape);
    return MUSA_OK;
}

int infer_as_strided(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                     musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_strided *a = attrs;
    if (a->shape.n != a->strides.n || a->shape.n > MUSA_MAX_DIMS)
        return musa_err(MUSA_ERR_VALUE, "[%s] shape has %d dims but strides has %d", op->name,
                        a->shape.n, a->strides.n);
    for (int i = 0; i < a->strides.n; i++)
        if (a->strides.v[i] < 0)
            return musa_err(MUSA_ERR_VALUE, "[%s] negative stride %lld", op->name,
                            (long long)a->strides.v[i]);
    if (a->offset < 0)
        return musa_err(MUSA_ERR_VALUE, "[%s] negative offset %lld", op->name,
                        (long long)a->offset);
    memcpy(r->view_strides, a->strides.v, sizeof(int64_t) * (size_t)a->strides.n);
    r->view_offset = a->offset;
    /* for the backward: where the input starts (-1: not contiguous, no gradient) */
    a->base_offset = musa_tensor_is_contiguous(in[0]) ? in[0]->offset : -1;
    musa_infer_out(r, 0, (musa_dtype)in[0]->dtype, a->shape.n, a->shape.v);
    return musa_shape_check(op->name, a->shape.n, a->shape.v, NULL);
}

/* A copy of input 0 with the region (shape, strides, offset), taken in its
 * row-major element order, replaced by (or, accumulating, added to) input 1. */
int infer_as_strided_scatter(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                             musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_strided *a = attrs;
    const musa_tensor *x = in[0], *src = in[1];
    if (a->shape.n != a->strides.n || a->shape.n > MUSA_MAX_DIMS)
        return musa_err(MUSA_ERR_VALUE, "[%s] shape has %d dims but strides has %d", op->name,
                        a->shape.n, a->strides.n);
    if (!musa_shape_equal(src->ndim, src->shape, a->shape.n, a->shape.v)) {
        char s1[128], s2[128];
        return musa_err(MUSA_ERR_VALUE, "[%s] source shape %s does not match the region shape %s",
                        op->name, musa_shape_str(src->ndim, src->shape, s1, sizeof s1),
                        musa_shape_str(a->shape.n, a->shape.v, s2, sizeof s2));
    }
    int64_t numel = src->numel, last = a->offset, step;
    bool past = false; /* the region's last element is past int64 */
    for (int i = 0; i < a->shape.n; i++) {
        if (a->strides.v[i] < 0) return musa_err(MUSA_ERR_VALUE, "[%s] negative stride", op->name);
        if (numel && (!musa_mul_i64(a->shape.v[i] - 1, a->strides.v[i], &step) ||
                      !musa_add_i64(last, step, &last)))
            past = true;
    }
    if (numel && past)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] the region reaches past element 2^63 of an input with %lld elements",
                        op->name, (long long)x->numel);
    if (numel && (a->offset < 0 || last >= x->numel))
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] the region reaches element %lld of an input with %lld elements",
                        op->name, (long long)last, (long long)x->numel);
    if (a->accumulate && !musa_is_float((musa_dtype)x->dtype))
        return musa_err(MUSA_ERR_TYPE, "[%s] accumulating needs a floating input, got %s", op->name,
                        musa_dtype_name((musa_dtype)x->dtype));
    r->in_dtype[1] = x->dtype; /* the source is cast to the input's dtype */
    musa_infer_out(r, 0, (musa_dtype)x->dtype, x->ndim, x->shape);
    return MUSA_OK;
}

/* ---- data movement ---- */

int infer_cat(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
              musa_infer *r) {
    musa_attrs_dim *a = attrs;
    if (n_in < 1)
        return musa_err(MUSA_ERR_VALUE, "[%s] needs a non-empty list of tensors", op->name);
    const musa_tensor *x0 = in[0];
    if (x0->ndim == 0) return musa_err(MUSA_ERR_VALUE, "[%s] cannot join 0-d tensors", op->name);
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, x0->ndim, &d);
    if (rc) return rc;
    a->dim = d;
    int64_t shape[MUSA_MAX_DIMS];
    memcpy(shape, x0->shape, sizeof shape);
    shape[d] = 0;
    for (int i = 0; i < n_in; i++) {
        const musa_tensor *x = in[i];
        char s1[128], s2[128];
        bool ok = x->ndim == x0->ndim;
        for (int k = 0; ok && k < x0->ndim; k++) ok = k == d || x->shape[k] == x0->shape[k];
        if (!ok)
            return musa_err(MUSA_ERR_VALUE,
                            "[%s] tensor %d has shape %s; expected %s except in dim %lld", op->name,
                            i, musa_shape_str(x->ndim, x->shape, s1, sizeof s1),
                            musa_shape_str(x0->ndim, x0->shape, s2, sizeof s2), (long long)d);
        if (!musa_add_i64(shape[d], x->shape[d], &shape[d]))
            return musa_err(MUSA_ERR_VALUE, "[%s] result is too large", op->name);
    }
    musa_dtype t = musa_result_type(n_in, in);
    for (int i = 0; i < n_in; i++) r->in_dtype[i] = (int8_t)t;
    musa_infer_out(r, 0, t, x0->ndim, shape);
    return MUSA_OK;
}

/* index must have x's ndim and sizes <= limit's sizes outside dim (or all dims). */
static int check_index_shape(const musa_op_info *op, const musa_tensor *index,
                             const musa_tensor *limit, int64_t dim, bool all_dims,
                             const char *what) {
    if (index->ndim != limit->ndim && !(index->ndim <= 1 && limit->ndim <= 1))
        return musa_err(MUSA_ERR_VALUE, "[%s] index has %d dims but %s has %d", op->name,
                        index->ndim, what, limit->ndim);
    /* A 0-d tensor next to a 1-d one counts as size 1 (the kernels walk
     * the index's shape through the other's strides) */
    int n = index->ndim > limit->ndim ? index->ndim : limit->ndim;
    for (int k = 0; k < n; k++) {
        int64_t is = k < index->ndim ? index->shape[k] : 1,
                ls = k < limit->ndim ? limit->shape[k] : 1;
        if ((all_dims || k != dim) && is > ls)
            return musa_err(MUSA_ERR_VALUE, "[%s] index size %lld exceeds %s size %lld in dim %d",
                            op->name, (long long)is, what, (long long)ls, k);
    }
    return MUSA_OK;
}

int infer_gather(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                 musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_dim *a = attrs;
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, in[0]->ndim, &d);
    if (rc || (rc = need_index_dtype(op, in, 1, r))) return rc;
    a->dim = d;
    if ((rc = check_index_shape(op, in[1], in[0], d, false, "input"))) return rc;
    musa_infer_out(r, 0, (musa_dtype)in[0]->dtype, in[1]->ndim, in[1]->shape);
    return MUSA_OK;
}

int infer_scatter(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                  musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_dim *a = attrs;
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, in[0]->ndim, &d);
    if (rc || (rc = need_index_dtype(op, in, 1, r))) return rc;
    a->dim = d;
    if ((rc = check_index_shape(op, in[1], in[0], d, false, "input"))) return rc;
    if ((rc = check_index_shape(op, in[1], in[2], d, true, "src"))) return rc;
    r->in_dtype[2] = in[0]->dtype;
    musa_infer_out(r, 0, (musa_dtype)in[0]->dtype, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

int infer_index_select(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                       musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_dim *a = attrs;
    const musa_tensor *x = in[0], *idx = in[1];
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, x->ndim, &d);
    if (rc || (rc = need_index_dtype(op, in, 1, r))) return rc;
    a->dim = d;
    if (idx->ndim > 1)
        return musa_err(MUSA_ERR_VALUE, "[%s] index must be 0-d or 1-d, got %d dims", op->name,
                        idx->ndim);
    int64_t shape[MUSA_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    if (x->ndim)
        shape[d] = idx->numel;
    else if (idx->numel != 1)
        return musa_err(MUSA_ERR_VALUE, "[%s] a 0-d input takes one index", op->name);
    musa_infer_out(r, 0, (musa_dtype)x->dtype, x->ndim, shape);
    return MUSA_OK;
}

int infer_index_add(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                    musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_dim *a = attrs;
    const musa_tensor *x = in[0], *idx = in[1], *src = in[2];
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, x->ndim, &d);
    if (rc || (rc = need_index_dtype(op, in, 1, r))) return rc;
    a->dim = d;
    if (idx->ndim > 1)
        return musa_err(MUSA_ERR_VALUE, "[%s] index must be 0-d or 1-d, got %d dims", op->name,
                        idx->ndim);
    bool ok = src->ndim == x->ndim || (x->ndim == 0 && src->ndim <= 1);
    for (int k = 0; ok && k < x->ndim; k++)
        ok = src->shape[k] == (k == d ? idx->numel : x->shape[k]);
    /* a 0-d input takes one source element per index (a 0-d source: one index) */
    if (ok && x->ndim == 0) ok = (src->ndim ? src->shape[0] : 1) == idx->numel;
    if (!ok) {
        char s1[128], s2[128];
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] source shape %s must match input shape %s with %lld rows in dim %lld",
                        op->name, musa_shape_str(src->ndim, src->shape, s1, sizeof s1),
                        musa_shape_str(x->ndim, x->shape, s2, sizeof s2), (long long)idx->numel,
                        (long long)d);
    }
    r->in_dtype[2] = x->dtype;
    musa_infer_out(r, 0, (musa_dtype)x->dtype, x->ndim, x->shape);
    return MUSA_OK;
}

/* ---- resample: weighted taps along one dim ---- */

/* The checks both directions share: x (the input, or the gradient of the
 * output) floating point with a dim to resample; index (m, K) of integers
 * and weight (m, K) floating point, K >= 1. Sets the compute dtypes. */
static int resample_operands(const musa_op_info *op, musa_tensor *const *in, musa_attrs_resample *a,
                             musa_infer *r) {
    const musa_tensor *x = in[0], *idx = in[1], *w = in[2];
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, x->ndim, &d);
    if (rc || (rc = need_index_dtype(op, in, 1, r))) return rc;
    a->dim = d;
    if (x->ndim == 0)
        return musa_err(MUSA_ERR_VALUE, "[%s] a 0-d input has no dim to resample", op->name);
    if (!musa_is_float((musa_dtype)x->dtype) || !musa_is_float((musa_dtype)w->dtype))
        return musa_err(
            MUSA_ERR_TYPE, "[%s] input and weight must be floating point, got %s and %s", op->name,
            musa_dtype_name((musa_dtype)x->dtype), musa_dtype_name((musa_dtype)w->dtype));
    if (idx->ndim != 2 || !musa_shape_equal(idx->ndim, idx->shape, w->ndim, w->shape) ||
        idx->shape[1] < 1) {
        char s1[128], s2[128];
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] index and weight must both be (outputs, taps) with at least one "
                        "tap, got %s and %s",
                        op->name, musa_shape_str(idx->ndim, idx->shape, s1, sizeof s1),
                        musa_shape_str(w->ndim, w->shape, s2, sizeof s2));
    }
    int8_t c = x->dtype == MUSA_DTYPE_FLOAT64 ? MUSA_DTYPE_FLOAT64 : MUSA_DTYPE_FLOAT32;
    r->in_dtype[0] = r->in_dtype[2] = c;
    return MUSA_OK;
}

/* resample: m rows along dim out. resample_backward: the gradient of
 * resample's output in (m rows), its input's gradient out (`size` rows). */
int infer_resample(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                   musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_resample *a = attrs;
    int rc = resample_operands(op, in, a, r);
    if (rc) return rc;
    const musa_tensor *x = in[0];
    int64_t rows = in[1]->shape[0];
    if (op != &musa_ops[MUSA_OP_resample_backward]) {
        a->size = x->shape[a->dim];
    } else if (a->size < 0 || x->shape[a->dim] != rows) {
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] the gradient has %lld rows in dim %lld for %lld outputs; size %lld",
                        op->name, (long long)x->shape[a->dim], (long long)a->dim, (long long)rows,
                        (long long)a->size);
    } else {
        rows = a->size;
    }
    int64_t shape[MUSA_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[a->dim] = rows;
    if ((rc = musa_shape_check(op->name, x->ndim, shape, NULL))) return rc;
    musa_infer_out(r, 0, (musa_dtype)x->dtype, x->ndim, shape);
    return MUSA_OK;
}

int infer_pad(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
              musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_pad *a = attrs;
    const musa_tensor *x = in[0];
    if (a->pads.n % 2 || a->pads.n / 2 > x->ndim)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] needs an even number of pads, at most 2 per dim "
                        "(%d given for %d dims)",
                        op->name, a->pads.n, x->ndim);
    int64_t shape[MUSA_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    for (int i = 0; i < a->pads.n / 2; i++) {
        int d = x->ndim - 1 - i;
        int64_t s;
        if (!musa_add_i64(x->shape[d], a->pads.v[2 * i], &s) ||
            !musa_add_i64(s, a->pads.v[2 * i + 1], &s))
            return musa_err(MUSA_ERR_VALUE, "[%s] padding (%lld, %lld) overflows dim %d", op->name,
                            (long long)a->pads.v[2 * i], (long long)a->pads.v[2 * i + 1], d);
        if (s < 0)
            return musa_err(MUSA_ERR_VALUE, "[%s] padding (%lld, %lld) makes dim %d negative",
                            op->name, (long long)a->pads.v[2 * i], (long long)a->pads.v[2 * i + 1],
                            d);
        shape[d] = s;
    }
    if (x->dtype == MUSA_DTYPE_BOOL && a->value != 0 && a->value != 1)
        return musa_err(MUSA_ERR_VALUE, "[%s] pad value %g for a bool tensor", op->name, a->value);
    musa_infer_out(r, 0, (musa_dtype)x->dtype, x->ndim, shape);
    return musa_shape_check(op->name, x->ndim, shape, NULL);
}

int infer_flip(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
               musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_dims *a = attrs;
    const musa_tensor *x = in[0];
    bool seen[MUSA_MAX_DIMS] = {false};
    for (int i = 0; i < a->dims.n; i++) {
        int64_t d;
        int rc = musa_wrap_dim(op->name, a->dims.v[i], x->ndim, &d);
        if (rc) return rc;
        if (x->ndim && seen[d])
            return musa_err(MUSA_ERR_VALUE, "[%s] dim %lld appears more than once", op->name,
                            (long long)d);
        seen[d] = true;
        a->dims.v[i] = d;
    }
    musa_infer_out(r, 0, (musa_dtype)x->dtype, x->ndim, x->shape);
    return MUSA_OK;
}

int infer_tri(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
              musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    if (in[0]->ndim < 2)
        return musa_err(MUSA_ERR_VALUE, "[%s] needs at least 2 dims, got %d", op->name,
                        in[0]->ndim);
    musa_infer_out(r, 0, (musa_dtype)in[0]->dtype, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

int infer_cumsum(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                 musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_dim *a = attrs;
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, in[0]->ndim, &d);
    if (rc) return rc;
    a->dim = d;
    musa_dtype dt = (musa_dtype)in[0]->dtype;
    if (!musa_is_float(dt)) dt = MUSA_DTYPE_INT64;
    musa_infer_out(r, 0, dt, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

/* cummax/cummin: the running extremum (input's dtype) and its index (int64). */
int infer_cumext(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                 musa_infer *r) {
    int rc = infer_cumsum(op, in, n_in, attrs, r);
    if (rc) return rc;
    r->n_out = 2;
    musa_infer_out(r, 0, (musa_dtype)in[0]->dtype, in[0]->ndim, in[0]->shape);
    musa_infer_out(r, 1, MUSA_DTYPE_INT64, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

/* logcumsumexp: floating (integers become the default float). */
int infer_logcumsumexp(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                       musa_infer *r) {
    int rc = infer_cumsum(op, in, n_in, attrs, r);
    if (rc) return rc;
    musa_dtype dt = (musa_dtype)in[0]->dtype;
    musa_infer_out(r, 0, musa_is_float(dt) ? dt : musa_default_dtype(MUSA_CAT_FLOAT), in[0]->ndim,
                   in[0]->shape);
    return MUSA_OK;
}

/* cumprod_backward(x, g), logcumsumexp_backward(x, y, g): x's gradient,
 * x's dtype and shape (the others alike). */
int infer_cumprod_backward(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                           musa_infer *r) {
    char s1[128], s2[128];
    for (int i = 1; i < n_in; i++)
        if (!musa_shape_equal(in[0]->ndim, in[0]->shape, in[i]->ndim, in[i]->shape))
            return musa_err(MUSA_ERR_VALUE, "[%s] input %d has shape %s but the input has %s",
                            op->name, i, musa_shape_str(in[i]->ndim, in[i]->shape, s1, sizeof s1),
                            musa_shape_str(in[0]->ndim, in[0]->shape, s2, sizeof s2));
    int rc = infer_cumsum(op, in, n_in, attrs, r);
    if (rc) return rc;
    musa_infer_out(r, 0, (musa_dtype)in[0]->dtype, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

int infer_sort(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
               musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_sort *a = attrs;
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, in[0]->ndim, &d);
    if (rc) return rc;
    a->dim = d;
    musa_infer_out(r, 0, (musa_dtype)in[0]->dtype, in[0]->ndim, in[0]->shape);
    musa_infer_out(r, 1, MUSA_DTYPE_INT64, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

int infer_topk(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
               musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_topk *a = attrs;
    const musa_tensor *x = in[0];
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, x->ndim, &d);
    if (rc) return rc;
    a->dim = d;
    int64_t size = x->ndim ? x->shape[d] : 1;
    /* a 0-d input has one value, and no shape for fewer */
    if (a->k < (x->ndim ? 0 : 1) || a->k > size)
        return musa_err(MUSA_ERR_VALUE, "[%s] k = %lld is out of range for a dim of size %lld",
                        op->name, (long long)a->k, (long long)size);
    int64_t shape[MUSA_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    if (x->ndim) shape[d] = a->k;
    musa_infer_out(r, 0, (musa_dtype)x->dtype, x->ndim, shape);
    musa_infer_out(r, 1, MUSA_DTYPE_INT64, x->ndim, shape);
    return MUSA_OK;
}

/* ---- creation ---- */

static int check_dtype(const musa_op_info *op, int32_t dt) {
    if (!musa_dtype_valid(dt))
        return musa_err(MUSA_ERR_TYPE, "[%s] invalid dtype %d", op->name, (int)dt);
    return MUSA_OK;
}

/* Whether v converts to an integer dtype without overflow (floats and bool
 * take any value, as in PyTorch). */
static bool fits_dtype(musa_dtype dt, double v) {
    switch (dt) {
    case MUSA_DTYPE_INT64:
        return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    case MUSA_DTYPE_INT32:
        return v >= -2147483648.0 && v <= 2147483647.0;
    case MUSA_DTYPE_INT16:
        return v >= -32768 && v <= 32767;
    case MUSA_DTYPE_INT8:
        return v >= -128 && v <= 127;
    case MUSA_DTYPE_UINT8:
        return v >= 0 && v <= 255;
    default:
        return true;
    }
}

int infer_full(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
               musa_infer *r) {
    MUSA_UNUSED(in), MUSA_UNUSED(n_in);
    musa_attrs_full *a = attrs;
    int rc = check_dtype(op, a->dtype);
    if (rc || (rc = musa_shape_check(op->name, a->shape.n, a->shape.v, NULL))) return rc;
    if (!fits_dtype((musa_dtype)a->dtype, a->value))
        return musa_err(MUSA_ERR_VALUE, "[%s] value %g cannot be converted to %s without overflow",
                        op->name, a->value, musa_dtype_name((musa_dtype)a->dtype));
    musa_infer_out(r, 0, (musa_dtype)a->dtype, a->shape.n, a->shape.v);
    return MUSA_OK;
}

int infer_arange(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                 musa_infer *r) {
    MUSA_UNUSED(in), MUSA_UNUSED(n_in);
    musa_attrs_arange *a = attrs;
    int rc = check_dtype(op, a->dtype);
    if (rc) return rc;
    if (!isfinite(a->start) || !isfinite(a->end) || !isfinite(a->step))
        return musa_err(MUSA_ERR_VALUE, "[%s] start, end and step must be finite", op->name);
    if (a->step == 0) return musa_err(MUSA_ERR_VALUE, "[%s] step must be nonzero", op->name);
    double n = ceil((a->end - a->start) / a->step);
    if (n < 0)
        return musa_err(MUSA_ERR_VALUE, "[%s] end %g is on the wrong side of start %g for step %g",
                        op->name, a->end, a->start, a->step);
    if (n > 4.0e18) return musa_err(MUSA_ERR_VALUE, "[%s] too many elements", op->name);
    int64_t count = (int64_t)n;
    /* integer dtypes step in integers from the truncated start, as PyTorch
     * and NumPy do (the count still comes from the values given) */
    if (!musa_is_float((musa_dtype)a->dtype)) {
        if (trunc(a->step) == 0)
            return musa_err(MUSA_ERR_VALUE,
                            "[%s] step %g truncates to 0 in an integer dtype; it must be nonzero",
                            op->name, a->step);
        a->start = trunc(a->start), a->step = trunc(a->step);
    }
    musa_infer_out(r, 0, (musa_dtype)a->dtype, 1, &count);
    return MUSA_OK;
}

int infer_linspace(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                   musa_infer *r) {
    MUSA_UNUSED(in), MUSA_UNUSED(n_in);
    musa_attrs_linspace *a = attrs;
    int rc = check_dtype(op, a->dtype);
    if (rc) return rc;
    if (a->steps < 0)
        return musa_err(MUSA_ERR_VALUE, "[%s] steps must be non-negative, got %lld", op->name,
                        (long long)a->steps);
    musa_infer_out(r, 0, (musa_dtype)a->dtype, 1, &a->steps);
    return MUSA_OK;
}

int infer_eye(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
              musa_infer *r) {
    MUSA_UNUSED(in), MUSA_UNUSED(n_in);
    musa_attrs_eye *a = attrs;
    int rc = check_dtype(op, a->dtype);
    if (rc) return rc;
    if (a->m < 0) a->m = a->n;
    if (a->n < 0) return musa_err(MUSA_ERR_VALUE, "[%s] n must be non-negative", op->name);
    int64_t shape[2] = {a->n, a->m};
    musa_infer_out(r, 0, (musa_dtype)a->dtype, 2, shape);
    return musa_shape_check(op->name, 2, shape, NULL);
}

int infer_random(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                 musa_infer *r) {
    MUSA_UNUSED(in), MUSA_UNUSED(n_in);
    musa_attrs_random *a = attrs;
    int rc = check_dtype(op, a->dtype);
    if (rc || (rc = musa_shape_check(op->name, a->shape.n, a->shape.v, NULL))) return rc;
    bool is_int = op == &musa_ops[MUSA_OP_randint];
    if (!is_int && !musa_is_float((musa_dtype)a->dtype))
        return musa_err(MUSA_ERR_TYPE, "[%s] needs a floating dtype, got %s", op->name,
                        musa_dtype_name((musa_dtype)a->dtype));
    if (is_int) {
        if (a->dtype == MUSA_DTYPE_BOOL)
            return musa_err(MUSA_ERR_TYPE, "[%s] bool is not supported", op->name);
        if (a->low != floor(a->low) || a->high != floor(a->high) || !(a->low < a->high) ||
            a->high - a->low > 9.0e15)
            return musa_err(MUSA_ERR_VALUE,
                            "[%s] low (%g) and high (%g) must be integers with low < high",
                            op->name, a->low, a->high);
    }
    musa_infer_out(r, 0, (musa_dtype)a->dtype, a->shape.n, a->shape.v);
    return MUSA_OK;
}

int infer_bernoulli(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                    musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    if (!musa_is_float((musa_dtype)in[0]->dtype))
        return musa_err(MUSA_ERR_TYPE, "[%s] probabilities must be floating, got %s", op->name,
                        musa_dtype_name((musa_dtype)in[0]->dtype));
    musa_infer_out(r, 0, (musa_dtype)in[0]->dtype, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

int infer_detach(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                 musa_infer *r) {
    MUSA_UNUSED(op), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    const musa_tensor *x = in[0];
    musa_infer_out(r, 0, (musa_dtype)x->dtype, x->ndim, x->shape);
    memcpy(r->view_strides, x->strides, sizeof(int64_t) * (size_t)x->ndim);
    r->view_offset = x->offset;
    return MUSA_OK;
}
