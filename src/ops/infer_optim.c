/*
 * infer_optim.c - inference for the optimizer update rows (sgd_update,
 * adam_update, rmsprop_update, adagrad_update, adadelta_update,
 * adamax_update, nadam_update, radam_update, asgd_update, rprop_update).
 *
 * An update row takes (param, state..., grad, lr): the parameter, then the
 * state it keeps (the 0-d float64 step counter last, where the optimizer
 * counts steps), then the gradient and the learning rate as a 0-d tensor.
 * Its outputs are the new values of the first n_out inputs - the parameter
 * and its state - so in eager mode they are written in place (the caller
 * passes the inputs as provided outputs) and in a graph they are renamed
 * values that the plan writes back. Which optional state exists follows
 * from the attributes (momentum, amsgrad, centered), so the input count
 * is checked against them here and n_out is set per call.
 */
#include "op.h"

/* Check the common layout: n_out updated inputs (the last n_scal of them
 * 0-d float64 scalar state: step counters, ASGD's eta and mu, NAdam's mu
 * product), then grad and lr. Output j is input j's new value. */
static int infer_update(const musa_op_info *op, musa_tensor *const *in, int n_in, int n_out,
                        int n_scal, musa_infer *r) {
    char s1[128], s2[128];
    if (n_in != n_out + 2)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] takes %d inputs with these options (param, %d state tensors, grad, "
                        "lr), got %d",
                        op->name, n_out + 2, n_out - 1, n_in);
    const musa_tensor *p = in[0], *g = in[n_out], *lr = in[n_out + 1];
    if (!musa_is_float((musa_dtype)p->dtype))
        return musa_err(MUSA_ERR_TYPE,
                        "[%s] parameter is %s; float32, float64, float16 and bfloat16 are "
                        "supported",
                        op->name, musa_dtype_name((musa_dtype)p->dtype));
    int n_tensor_state = n_out - n_scal;
    for (int i = 1; i <= n_tensor_state; i++) {
        const musa_tensor *t = i < n_tensor_state ? in[i] : g;
        const char *what = i < n_tensor_state ? "state tensor" : "gradient";
        int k = i < n_tensor_state ? i : n_out;
        if (t->dtype != p->dtype)
            return musa_err(MUSA_ERR_TYPE, "[%s] %s (input %d) is %s but the parameter is %s",
                            op->name, what, k, musa_dtype_name((musa_dtype)t->dtype),
                            musa_dtype_name((musa_dtype)p->dtype));
        if (!musa_shape_equal(t->ndim, t->shape, p->ndim, p->shape))
            return musa_err(MUSA_ERR_VALUE,
                            "[%s] %s (input %d) has shape %s but the parameter has %s", op->name,
                            what, k, musa_shape_str(t->ndim, t->shape, s1, sizeof s1),
                            musa_shape_str(p->ndim, p->shape, s2, sizeof s2));
    }
    for (int k = n_tensor_state; k < n_out; k++) {
        const musa_tensor *st = in[k];
        if (st->ndim != 0 || st->dtype != MUSA_DTYPE_FLOAT64)
            return musa_err(MUSA_ERR_VALUE,
                            "[%s] %s (input %d) must be a 0-d float64 tensor, got %s %s", op->name,
                            k == n_out - 1 ? "step" : "scalar state", k,
                            musa_dtype_name((musa_dtype)st->dtype),
                            musa_shape_str(st->ndim, st->shape, s1, sizeof s1));
    }
    if (lr->ndim != 0 || !musa_is_float((musa_dtype)lr->dtype))
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] lr (input %d) must be a 0-d floating tensor, got %s %s", op->name,
                        n_out + 1, musa_dtype_name((musa_dtype)lr->dtype),
                        musa_shape_str(lr->ndim, lr->shape, s1, sizeof s1));
    r->in_dtype[n_out + 1] = MUSA_DTYPE_FLOAT64;
    r->n_out = (int8_t)n_out;
    for (int j = 0; j < n_out; j++) {
        r->out_dtype[j] = in[j]->dtype;
        r->out_ndim[j] = in[j]->ndim;
        if (in[j]->ndim)
            memcpy(r->out_shape[j], in[j]->shape, sizeof(int64_t) * (size_t)in[j]->ndim);
    }
    return MUSA_OK;
}

/* A hyperparameter must satisfy ok (NaN never does). */
static int hyper(const musa_op_info *op, const char *what, double v, bool ok) {
    if (ok) return MUSA_OK;
    return musa_err(MUSA_ERR_VALUE, "[%s] invalid %s: %g", op->name, what, v);
}

int infer_sgd_update(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                     musa_infer *r) {
    const musa_attrs_sgd *a = attrs;
    int rc;
    if ((rc = hyper(op, "momentum", a->momentum, a->momentum >= 0)) ||
        (rc = hyper(op, "dampening", a->dampening, a->dampening == a->dampening)) ||
        (rc = hyper(op, "weight_decay", a->weight_decay, a->weight_decay >= 0)))
        return rc;
    if (a->nesterov && (a->momentum <= 0 || a->dampening != 0))
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] Nesterov momentum requires a momentum and zero dampening", op->name);
    return infer_update(op, in, n_in, a->momentum != 0 ? 2 : 1, 0, r);
}

int infer_adam_update(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                      musa_infer *r) {
    const musa_attrs_adam *a = attrs;
    int rc;
    if ((rc = hyper(op, "beta1", a->beta1, a->beta1 >= 0 && a->beta1 < 1)) ||
        (rc = hyper(op, "beta2", a->beta2, a->beta2 >= 0 && a->beta2 < 1)) ||
        (rc = hyper(op, "eps", a->eps, a->eps >= 0)) ||
        (rc = hyper(op, "weight_decay", a->weight_decay, a->weight_decay >= 0)))
        return rc;
    return infer_update(op, in, n_in, a->amsgrad ? 5 : 4, 1, r);
}

int infer_rmsprop_update(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                         musa_infer *r) {
    const musa_attrs_rmsprop *a = attrs;
    int rc;
    if ((rc = hyper(op, "alpha", a->alpha, a->alpha >= 0)) ||
        (rc = hyper(op, "eps", a->eps, a->eps >= 0)) ||
        (rc = hyper(op, "momentum", a->momentum, a->momentum >= 0)) ||
        (rc = hyper(op, "weight_decay", a->weight_decay, a->weight_decay >= 0)))
        return rc;
    return infer_update(op, in, n_in, 3 + (a->momentum > 0) + a->centered, 1, r);
}

/* beta1 and beta2 of the Adam family */
static int betas(const musa_op_info *op, double b1, double b2) {
    int rc = hyper(op, "beta1", b1, b1 >= 0 && b1 < 1);
    return rc ? rc : hyper(op, "beta2", b2, b2 >= 0 && b2 < 1);
}

int infer_adagrad_update(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                         musa_infer *r) {
    const musa_attrs_adagrad *a = attrs;
    int rc;
    if ((rc = hyper(op, "lr_decay", a->lr_decay, a->lr_decay >= 0)) ||
        (rc = hyper(op, "eps", a->eps, a->eps >= 0)) ||
        (rc = hyper(op, "weight_decay", a->weight_decay, a->weight_decay >= 0)))
        return rc;
    return infer_update(op, in, n_in, 3, 1, r);
}

int infer_adadelta_update(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                          musa_infer *r) {
    const musa_attrs_adadelta *a = attrs;
    int rc;
    if ((rc = hyper(op, "rho", a->rho, a->rho >= 0 && a->rho <= 1)) ||
        (rc = hyper(op, "eps", a->eps, a->eps >= 0)) ||
        (rc = hyper(op, "weight_decay", a->weight_decay, a->weight_decay >= 0)))
        return rc;
    return infer_update(op, in, n_in, 4, 1, r);
}

int infer_adamax_update(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                        musa_infer *r) {
    const musa_attrs_adamax *a = attrs;
    int rc;
    if ((rc = betas(op, a->beta1, a->beta2)) || (rc = hyper(op, "eps", a->eps, a->eps >= 0)) ||
        (rc = hyper(op, "weight_decay", a->weight_decay, a->weight_decay >= 0)))
        return rc;
    return infer_update(op, in, n_in, 4, 1, r);
}

int infer_nadam_update(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                       musa_infer *r) {
    const musa_attrs_nadam *a = attrs;
    int rc;
    if ((rc = betas(op, a->beta1, a->beta2)) || (rc = hyper(op, "eps", a->eps, a->eps >= 0)) ||
        (rc = hyper(op, "weight_decay", a->weight_decay, a->weight_decay >= 0)) ||
        (rc = hyper(op, "momentum_decay", a->momentum_decay, a->momentum_decay >= 0)))
        return rc;
    return infer_update(op, in, n_in, 5, 2, r);
}

int infer_radam_update(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                       musa_infer *r) {
    const musa_attrs_radam *a = attrs;
    int rc;
    if ((rc = betas(op, a->beta1, a->beta2)) || (rc = hyper(op, "eps", a->eps, a->eps >= 0)) ||
        (rc = hyper(op, "weight_decay", a->weight_decay, a->weight_decay >= 0)))
        return rc;
    return infer_update(op, in, n_in, 4, 1, r);
}

int infer_rprop_update(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                       musa_infer *r) {
    const musa_attrs_rprop *a = attrs;
    if (!(a->etaminus > 0 && a->etaminus < 1 && a->etaplus > 1))
        return musa_err(
            MUSA_ERR_VALUE,
            "[%s] invalid eta values: etaminus %g and etaplus %g (need 0 < etaminus < 1 "
            "< etaplus)",
            op->name, a->etaminus, a->etaplus);
    int rc;
    if ((rc = hyper(op, "step_size_min", a->step_size_min, a->step_size_min >= 0)) ||
        (rc = hyper(op, "step_size_max", a->step_size_max, a->step_size_max >= a->step_size_min)))
        return rc;
    return infer_update(op, in, n_in, 4, 1, r);
}

int infer_asgd_update(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                      musa_infer *r) {
    const musa_attrs_asgd *a = attrs;
    int rc;
    if ((rc = hyper(op, "lambd", a->lambd, a->lambd >= 0)) ||
        (rc = hyper(op, "alpha", a->alpha, a->alpha == a->alpha)) ||
        (rc = hyper(op, "t0", a->t0, a->t0 == a->t0)) ||
        (rc = hyper(op, "weight_decay", a->weight_decay, a->weight_decay >= 0)))
        return rc;
    return infer_update(op, in, n_in, 5, 3, r);
}
