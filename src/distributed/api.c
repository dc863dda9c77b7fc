/*
 * api.c - the collectives as ops: inference of the dist_* rows and the
 * public functions of musa.h's "Distributed" section.
 *
 * The public functions call the rows through the dispatcher, so captures
 * record them; in-place collectives pass the tensor as the provided output
 * (the kernels then reduce in place, MPI_IN_PLACE).
 */
#include "../ops/op.h"
#include "comm.h"

static int check_op(const musa_op_info *op, const musa_attrs_dist *a, musa_dtype t) {
    if (a->op < MUSA_REDUCE_SUM || a->op > MUSA_REDUCE_MIN)
        return musa_err(MUSA_ERR_VALUE, "[%s] unknown reduce op %lld (SUM 0, AVG 1, MAX 2, MIN 3)",
                        op->name, (long long)a->op);
    if (a->op == MUSA_REDUCE_AVG && !musa_is_float(t))
        return musa_err(MUSA_ERR_TYPE, "[%s] AVG needs a floating dtype, not %s", op->name,
                        musa_dtype_info[t].name);
    return MUSA_OK;
}

/* The group must be up when a call is checked, so a capture fails where
 * eager would. */
static int ready(const musa_op_info *op, const musa_tensor *x, const musa_attrs_dist *a) {
    int rc = musa_comm_ready(op->name);
    return rc ? rc : check_op(op, a, (musa_dtype)x->dtype);
}

int infer_dist_same(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                    musa_infer *r) {
    (void)n_in;
    const musa_attrs_dist *a = attrs;
    int rc = ready(op, in[0], a);
    if (rc) return rc;
    if (op == &musa_ops[MUSA_OP_dist_broadcast] && (a->src < 0 || a->src >= musa_comm_size()))
        return musa_err(MUSA_ERR_VALUE, "[%s] src %lld is not a rank of this group (size %d)",
                        op->name, (long long)a->src, musa_comm_size());
    if (op == &musa_ops[MUSA_OP_dist_all_reduce_wait] && in[0]->ndim != 1)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] expects the 1-D tensor dist_all_reduce_start returned, got %d dims",
                        op->name, in[0]->ndim);
    musa_infer_out(r, 0, (musa_dtype)in[0]->dtype, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

int infer_dist_gather(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                      musa_infer *r) {
    (void)n_in;
    int rc = ready(op, in[0], attrs);
    if (rc) return rc;
    const musa_tensor *x = in[0];
    if (x->ndim >= MUSA_MAX_DIMS)
        return musa_err(MUSA_ERR_VALUE, "[%s] the result would have more than %d dims", op->name,
                        MUSA_MAX_DIMS);
    int64_t shape[MUSA_MAX_DIMS] = {musa_comm_size()};
    memcpy(shape + 1, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    int64_t numel;
    if (!musa_mul_i64(x->numel, shape[0], &numel))
        return musa_err(MUSA_ERR_VALUE, "[%s] result is too large", op->name);
    musa_infer_out(r, 0, (musa_dtype)x->dtype, x->ndim + 1, shape);
    return MUSA_OK;
}

int infer_dist_scatter(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                       musa_infer *r) {
    (void)n_in;
    int rc = ready(op, in[0], attrs);
    if (rc) return rc;
    const musa_tensor *x = in[0];
    int size = musa_comm_size();
    if (x->ndim == 0 || x->shape[0] % size)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] the first dim must split into %d equal blocks (one per rank), "
                        "but the input has shape %s",
                        op->name, size, musa_shape_str(x->ndim, x->shape, (char[128]){0}, 128));
    int64_t shape[MUSA_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[0] /= size;
    musa_infer_out(r, 0, (musa_dtype)x->dtype, x->ndim, shape);
    return MUSA_OK;
}

int infer_dist_start(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                     musa_infer *r) {
    if (n_in < 1) return musa_err(MUSA_ERR_VALUE, "[%s] needs at least one tensor", op->name);
    int rc = ready(op, in[0], attrs);
    if (rc) return rc;
    int64_t total = 0;
    for (int i = 0; i < n_in; i++) {
        if (in[i]->dtype != in[0]->dtype)
            return musa_err(MUSA_ERR_TYPE,
                            "[%s] tensor %d is %s but tensor 0 is %s: one message "
                            "holds one dtype",
                            op->name, i, musa_dtype_info[in[i]->dtype].name,
                            musa_dtype_info[in[0]->dtype].name);
        if (!musa_add_i64(total, in[i]->numel, &total))
            return musa_err(MUSA_ERR_VALUE, "[%s] result is too large", op->name);
    }
    musa_infer_out(r, 0, (musa_dtype)in[0]->dtype, 1, &total);
    return MUSA_OK;
}

/* ---- public functions ---- */

static musa_attrs_dist dist_attrs(int op, int src, bool check) {
    musa_attrs_dist a;
    musa_attrs_init(MUSA_ATTRS_dist, &a);
    a.op = op, a.src = src, a.check = check;
    return a;
}

static int in_place(musa_op_id id, musa_tensor *t, musa_attrs_dist a) {
    if (!t)
        return musa_last_error_code()
                   ? musa_last_error_code()
                   : musa_err(MUSA_ERR_VALUE, "[%s] tensor is NULL", musa_ops[id].name);
    musa_tensor *in[1] = {t}, *out[1] = {t};
    return musa_dispatch(id, 1, in, &a, out);
}

int musa_dist_all_reduce(musa_tensor *t, musa_reduce_op op) {
    return in_place(MUSA_OP_dist_all_reduce, t, dist_attrs(op, 0, true));
}

int musa_dist_broadcast(musa_tensor *t, int src) {
    return in_place(MUSA_OP_dist_broadcast, t, dist_attrs(MUSA_REDUCE_SUM, src, true));
}

musa_tensor *musa_dist_all_gather(musa_tensor *t) {
    musa_attrs_dist a = dist_attrs(MUSA_REDUCE_SUM, 0, true);
    return musa_call(MUSA_OP_dist_all_gather, 1, &t, &a);
}

musa_tensor *musa_dist_reduce_scatter(musa_tensor *t, musa_reduce_op op) {
    musa_attrs_dist a = dist_attrs(op, 0, true);
    return musa_call(MUSA_OP_dist_reduce_scatter, 1, &t, &a);
}

musa_tensor *musa_dist_all_reduce_start(int n, musa_tensor *const *tensors, musa_reduce_op op) {
    if (n < 1 || !tensors) {
        musa_err(MUSA_ERR_VALUE, "[dist_all_reduce_start] needs a non-empty list of tensors");
        return NULL;
    }
    musa_attrs_dist a = dist_attrs(op, 0, false);
    return musa_call(MUSA_OP_dist_all_reduce_start, n, tensors, &a);
}

/* The result is flat itself (finished in place), as a new reference:
 * callers own what they get either way, and nothing is copied. */
musa_tensor *musa_dist_all_reduce_wait(musa_tensor *flat, musa_reduce_op op) {
    if (in_place(MUSA_OP_dist_all_reduce_wait, flat, dist_attrs(op, 0, false))) return NULL;
    return musa_tensor_retain(flat);
}
