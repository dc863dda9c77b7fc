/*
 * infer_reduce.c - inference for reductions. Normalises the dims list in
 * the attrs (wrapped, sorted, no repeats; empty means all dims) so kernels,
 * CSE and the printed IR all see one canonical form.
 */
#include "op.h"

/* Normalise dims in place; fills `mask` with the reduced dims. */
static int normalise_dims(const musa_op_info *op, int ndim, musa_ints *dims, bool *mask) {
    for (int d = 0; d < MUSA_MAX_DIMS; d++) mask[d] = dims->n == 0;
    if (dims->n < 0 || dims->n > MUSA_MAX_DIMS)
        return musa_err(MUSA_ERR_VALUE, "[%s] too many dims (%d)", op->name, dims->n);
    for (int i = 0; i < dims->n; i++) {
        int64_t d;
        int rc = musa_wrap_dim(op->name, dims->v[i], ndim, &d);
        if (rc) return rc;
        if (ndim == 0) continue;
        if (mask[d])
            return musa_err(MUSA_ERR_VALUE, "[%s] dim %lld appears more than once", op->name,
                            (long long)d);
        mask[d] = true;
    }
    musa_ints canon;
    memset(&canon, 0, sizeof canon);
    for (int d = 0; d < ndim; d++)
        if (mask[d]) canon.v[canon.n++] = d;
    *dims = canon;
    return MUSA_OK;
}

static void reduced_shape(const musa_tensor *x, const bool *mask, bool keepdim, int8_t *ndim,
                          int64_t *shape) {
    int n = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (!mask[d])
            shape[n++] = x->shape[d];
        else if (keepdim)
            shape[n++] = 1;
    }
    *ndim = (int8_t)n;
}

int infer_reduce(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                 musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_reduce *a = attrs;
    const musa_tensor *x = in[0];
    musa_dtype dt = (musa_dtype)x->dtype;
    if ((op->flags & MUSA_OPF_NO_BOOL) && dt == MUSA_DTYPE_BOOL)
        return musa_err(MUSA_ERR_TYPE, "[%s] bool tensors are not supported", op->name);
    bool mask[MUSA_MAX_DIMS];
    int rc = normalise_dims(op, x->ndim, &a->dims, mask);
    if (rc) return rc;
    bool extremum = !(op == &musa_ops[MUSA_OP_sum] || op == &musa_ops[MUSA_OP_prod]);
    if (extremum) {
        for (int d = 0; d < x->ndim; d++)
            if (mask[d] && x->shape[d] == 0)
                return musa_err(MUSA_ERR_VALUE,
                                "[%s] cannot reduce over dim %d of size 0 (no identity)", op->name,
                                d);
    } else if (!musa_is_float(dt)) {
        dt = MUSA_DTYPE_INT64; /* integer and bool sums/products accumulate in int64 */
    }
    reduced_shape(x, mask, a->keepdim, &r->out_ndim[0], r->out_shape[0]);
    r->out_dtype[0] = (int8_t)dt;
    return MUSA_OK;
}

int infer_reduce_dim(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                     musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_dim *a = attrs;
    const musa_tensor *x = in[0];
    if (x->dtype == MUSA_DTYPE_BOOL)
        return musa_err(MUSA_ERR_TYPE, "[%s] bool tensors are not supported", op->name);
    int64_t d;
    int rc = musa_wrap_dim(op->name, a->dim, x->ndim, &d);
    if (rc) return rc;
    a->dim = d;
    bool mask[MUSA_MAX_DIMS] = {false};
    if (x->ndim) {
        mask[d] = true;
        if (x->shape[d] == 0)
            return musa_err(MUSA_ERR_VALUE, "[%s] cannot reduce over dim %lld of size 0", op->name,
                            (long long)d);
    }
    reduced_shape(x, mask, a->keepdim, &r->out_ndim[0], r->out_shape[0]);
    if (op->n_out == 2) {
        r->out_dtype[0] = x->dtype;
        r->out_dtype[1] = MUSA_DTYPE_INT64;
        r->out_ndim[1] = r->out_ndim[0];
        memcpy(r->out_shape[1], r->out_shape[0], sizeof r->out_shape[0]);
    } else {
        r->out_dtype[0] = MUSA_DTYPE_INT64;
    }
    return MUSA_OK;
}

int infer_norm_list(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                    musa_infer *r) {
    MUSA_UNUSED(attrs);
    if (n_in < 1) return musa_err(MUSA_ERR_VALUE, "[%s] needs at least one tensor", op->name);
    musa_dtype dt = (musa_dtype)in[0]->dtype;
    for (int i = 0; i < n_in; i++) {
        musa_dtype di = (musa_dtype)in[i]->dtype;
        if (!musa_is_float(di))
            return musa_err(MUSA_ERR_TYPE,
                            "[%s] tensor %d has dtype %s; a floating dtype is needed", op->name, i,
                            musa_dtype_name(di));
        dt = musa_promote_types(dt, di);
    }
    if (musa_is_low_float(dt)) dt = MUSA_DTYPE_FLOAT32;
    r->out_dtype[0] = (int8_t)dt;
    r->out_ndim[0] = 0;
    return MUSA_OK;
}
