/*
 * infer_elementwise.c - validation and shape/dtype inference for unary,
 * binary and ternary elementwise ops, casts and clones.
 *
 * Promotion rules (documented in musa.h) live here and in
 * musa_result_type: kernels then see operands of the dtype they expect.
 */
#include "op.h"

#include <math.h>

static void set_out(musa_infer *r, int j, musa_dtype dt, int ndim, const int64_t *shape) {
    r->out_dtype[j] = (int8_t)dt;
    r->out_ndim[j] = (int8_t)ndim;
    if (ndim) memcpy(r->out_shape[j], shape, sizeof(int64_t) * (size_t)ndim);
}

static int reject_bool(const musa_op_info *op, musa_dtype dt) {
    if ((op->flags & MUSA_OPF_NO_BOOL) && dt == MUSA_DTYPE_BOOL)
        return musa_err(MUSA_ERR_TYPE, "[%s] bool tensors are not supported%s", op->name,
                        !strcmp(op->name, "sub") || !strcmp(op->name, "neg")
                            ? "; use logical_not or logical_xor"
                            : "");
    return MUSA_OK;
}

int infer_unary_same(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                     musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    int rc = reject_bool(op, (musa_dtype)in[0]->dtype);
    if (rc) return rc;
    set_out(r, 0, (musa_dtype)in[0]->dtype, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

int infer_unary_float(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                      musa_infer *r) {
    MUSA_UNUSED(op), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    musa_dtype dt = (musa_dtype)in[0]->dtype;
    if (!musa_is_float(dt)) {
        dt = MUSA_DTYPE_FLOAT32;
        r->in_dtype[0] = (int8_t)dt;
    }
    set_out(r, 0, dt, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

int infer_unary_bool(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                     musa_infer *r) {
    MUSA_UNUSED(op), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    set_out(r, 0, MUSA_DTYPE_BOOL, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

/* The bitwise ops, gcd and lcm: integer (and, unless NOBOOL, bool) dtypes
 * only; the message names the operands' dtypes. */
static int reject_float(const musa_op_info *op, musa_dtype dt, musa_tensor *const *in, int n) {
    if (!musa_is_float(dt)) return MUSA_OK;
    return musa_err(MUSA_ERR_TYPE, "[%s] %s tensors only (got %s%s%s)", op->name,
                    (op->flags & MUSA_OPF_NO_BOOL) ? "integer" : "integer or bool",
                    musa_dtype_name((musa_dtype)in[0]->dtype), n > 1 ? " and " : "",
                    n > 1 ? musa_dtype_name((musa_dtype)in[1]->dtype) : "");
}

int infer_unary_bits(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                     musa_infer *r) {
    int rc = reject_float(op, (musa_dtype)in[0]->dtype, in, 1);
    return rc ? rc : infer_unary_same(op, in, n_in, attrs, r);
}

/* Broadcast the shapes of n inputs into r's output 0. */
static int broadcast_all(const musa_op_info *op, musa_tensor *const *in, int n, musa_infer *r) {
    int nd = in[0]->ndim;
    int64_t shape[MUSA_MAX_DIMS];
    memcpy(shape, in[0]->shape, sizeof shape);
    for (int i = 1; i < n; i++) {
        int rc = musa_broadcast_shape(op->name, nd, shape, in[i]->ndim, in[i]->shape, &nd, shape);
        if (rc) return rc;
    }
    r->out_ndim[0] = (int8_t)nd;
    memcpy(r->out_shape[0], shape, sizeof shape);
    return MUSA_OK;
}

static int binary_common(const musa_op_info *op, musa_tensor *const *in, musa_infer *r,
                         musa_dtype compute, musa_dtype out) {
    int rc = reject_bool(op, compute);
    if (rc) return rc;
    if ((rc = broadcast_all(op, in, 2, r))) return rc;
    r->in_dtype[0] = r->in_dtype[1] = (int8_t)compute;
    r->out_dtype[0] = (int8_t)out;
    return MUSA_OK;
}

int infer_binary_arith(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                       musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    musa_dtype t = musa_result_type(2, in);
    return binary_common(op, in, r, t, t);
}

int infer_binary_div(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                     musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    musa_dtype t = musa_result_type(2, in);
    if (!musa_is_float(t)) t = MUSA_DTYPE_FLOAT32; /* true division */
    return binary_common(op, in, r, t, t);
}

int infer_binary_compare(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                         musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    return binary_common(op, in, r, musa_result_type(2, in), MUSA_DTYPE_BOOL);
}

int infer_binary_logical(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                         musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    return binary_common(op, in, r, MUSA_DTYPE_BOOL, MUSA_DTYPE_BOOL);
}

int infer_binary_bits(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                      musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    musa_dtype t = musa_result_type(2, in);
    int rc = reject_float(op, t, in, 2);
    return rc ? rc : binary_common(op, in, r, t, t);
}

/* standard_gamma, poisson (one parameter tensor) and binomial (count and
 * prob, broadcast): floating parameters, promoted to one dtype, which the
 * samples take. */
int infer_sampler(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                  musa_infer *r) {
    MUSA_UNUSED(attrs);
    for (int k = 0; k < n_in; k++)
        if (!musa_is_float((musa_dtype)in[k]->dtype))
            return musa_err(MUSA_ERR_TYPE, "[%s] expected floating point parameters, got %s%s%s",
                            op->name, musa_dtype_name((musa_dtype)in[0]->dtype),
                            n_in > 1 ? " and " : "",
                            n_in > 1 ? musa_dtype_name((musa_dtype)in[1]->dtype) : "");
    int rc = broadcast_all(op, in, n_in, r);
    if (rc) return rc;
    musa_dtype dt = musa_result_type(n_in, in);
    for (int k = 0; k < n_in; k++) r->in_dtype[k] = (int8_t)dt;
    r->out_dtype[0] = (int8_t)dt;
    return MUSA_OK;
}

int infer_where(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    int rc = broadcast_all(op, in, 3, r);
    if (rc) return rc;
    musa_dtype t = musa_result_type(2, in + 1);
    r->in_dtype[0] = MUSA_DTYPE_BOOL;
    r->in_dtype[1] = r->in_dtype[2] = (int8_t)t;
    r->out_dtype[0] = (int8_t)t;
    return MUSA_OK;
}

int infer_clamp(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_clamp *a = attrs;
    musa_dtype dt = (musa_dtype)in[0]->dtype;
    int rc = reject_bool(op, dt);
    if (rc) return rc;
    if (a->has_min && a->has_max && a->min > a->max) {
        /* PyTorch allows it (everything becomes max); so do we. */
    }
    if (!musa_is_float(dt) &&
        ((a->has_min && a->min != floor(a->min)) || (a->has_max && a->max != floor(a->max)))) {
        dt = MUSA_DTYPE_FLOAT32;
        r->in_dtype[0] = (int8_t)dt;
    }
    set_out(r, 0, dt, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

int infer_cast(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
               musa_infer *r) {
    MUSA_UNUSED(n_in);
    musa_attrs_cast *a = attrs;
    if (!musa_dtype_valid(a->dtype))
        return musa_err(MUSA_ERR_TYPE, "[%s] invalid dtype %d", op->name, (int)a->dtype);
    set_out(r, 0, (musa_dtype)a->dtype, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

int infer_clone(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                musa_infer *r) {
    MUSA_UNUSED(op), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    set_out(r, 0, (musa_dtype)in[0]->dtype, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}
