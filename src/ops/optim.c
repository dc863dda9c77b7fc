/*
 * optim.c - the public optimizer updates: each packs its options into the
 * op row's attributes and dispatches the row (sgd_update, adam_update,
 * rmsprop_update, and Adagrad's to ASGD's) with the parameter and its state as provided outputs, so
 * they are written in place. The arithmetic is the rows' kernels
 * (backend/cpu/optim.c); going through the dispatcher means eager calls,
 * captures, profiling and saved graphs all see the same op.
 */
#include "op.h"

/* Dispatch an update row over n inputs; outputs are the first n - 2. */
static int update(musa_op_id op, int n, musa_tensor **in, const void *attrs) {
    for (int i = 0; i < n; i++)
        if (!in[i]) return musa_err(MUSA_ERR_VALUE, "[%s] input %d is NULL", musa_ops[op].name, i);
    musa_tensor *out[MUSA_MAX_OUTPUTS] = {NULL};
    for (int j = 0; j < n - 2; j++) out[j] = in[j];
    return musa_dispatch(op, n, in, attrs, out);
}

int musa_sgd_update(musa_tensor *param, musa_tensor *momentum_buffer, musa_tensor *grad,
                    musa_tensor *lr, const musa_sgd_options *o, bool fresh) {
    if (!o) return musa_err(MUSA_ERR_VALUE, "[sgd_update] options are NULL");
    musa_attrs_sgd a = {o->momentum, o->dampening, o->weight_decay,
                        o->nesterov, o->maximize,  fresh};
    musa_tensor *in[4] = {param};
    int n = 1;
    if (o->momentum != 0) in[n++] = momentum_buffer;
    in[n++] = grad;
    in[n++] = lr;
    return update(MUSA_OP_sgd_update, n, in, &a);
}

int musa_adam_update(musa_tensor *param, musa_tensor *exp_avg, musa_tensor *exp_avg_sq,
                     musa_tensor *max_exp_avg_sq, musa_tensor *step, musa_tensor *grad,
                     musa_tensor *lr, const musa_adam_options *o) {
    if (!o) return musa_err(MUSA_ERR_VALUE, "[adam_update] options are NULL");
    musa_attrs_adam a = {o->beta1,   o->beta2,    o->eps,      o->weight_decay,
                         o->amsgrad, o->maximize, o->decoupled};
    musa_tensor *in[7] = {param, exp_avg, exp_avg_sq};
    int n = 3;
    if (o->amsgrad) in[n++] = max_exp_avg_sq;
    in[n++] = step;
    in[n++] = grad;
    in[n++] = lr;
    return update(MUSA_OP_adam_update, n, in, &a);
}

int musa_rmsprop_update(musa_tensor *param, musa_tensor *square_avg, musa_tensor *momentum_buffer,
                        musa_tensor *grad_avg, musa_tensor *step, musa_tensor *grad,
                        musa_tensor *lr, const musa_rmsprop_options *o) {
    if (!o) return musa_err(MUSA_ERR_VALUE, "[rmsprop_update] options are NULL");
    musa_attrs_rmsprop a = {o->alpha,    o->eps,      o->weight_decay,
                            o->momentum, o->centered, o->maximize};
    musa_tensor *in[7] = {param, square_avg};
    int n = 2;
    if (o->momentum > 0) in[n++] = momentum_buffer;
    if (o->centered) in[n++] = grad_avg;
    in[n++] = step;
    in[n++] = grad;
    in[n++] = lr;
    return update(MUSA_OP_rmsprop_update, n, in, &a);
}

/* The rows whose operands are fixed: (param, state..., grad, lr). */
static int update_fixed(musa_op_id op, int n, musa_tensor **in, const void *options,
                        const void *attrs) {
    if (!options) return musa_err(MUSA_ERR_VALUE, "[%s] options are NULL", musa_ops[op].name);
    return update(op, n, in, attrs);
}

int musa_adagrad_update(musa_tensor *param, musa_tensor *sum, musa_tensor *step, musa_tensor *grad,
                        musa_tensor *lr, const musa_adagrad_options *o) {
    musa_attrs_adagrad a = {0};
    if (o) a = (musa_attrs_adagrad){o->lr_decay, o->weight_decay, o->eps, o->maximize};
    musa_tensor *in[5] = {param, sum, step, grad, lr};
    return update_fixed(MUSA_OP_adagrad_update, 5, in, o, &a);
}

int musa_adadelta_update(musa_tensor *param, musa_tensor *square_avg, musa_tensor *acc_delta,
                         musa_tensor *step, musa_tensor *grad, musa_tensor *lr,
                         const musa_adadelta_options *o) {
    musa_attrs_adadelta a = {0};
    if (o) a = (musa_attrs_adadelta){o->rho, o->eps, o->weight_decay, o->maximize};
    musa_tensor *in[6] = {param, square_avg, acc_delta, step, grad, lr};
    return update_fixed(MUSA_OP_adadelta_update, 6, in, o, &a);
}

int musa_adamax_update(musa_tensor *param, musa_tensor *exp_avg, musa_tensor *exp_inf,
                       musa_tensor *step, musa_tensor *grad, musa_tensor *lr,
                       const musa_adamax_options *o) {
    musa_attrs_adamax a = {0};
    if (o) a = (musa_attrs_adamax){o->beta1, o->beta2, o->eps, o->weight_decay, o->maximize};
    musa_tensor *in[6] = {param, exp_avg, exp_inf, step, grad, lr};
    return update_fixed(MUSA_OP_adamax_update, 6, in, o, &a);
}

int musa_nadam_update(musa_tensor *param, musa_tensor *exp_avg, musa_tensor *exp_avg_sq,
                      musa_tensor *mu_product, musa_tensor *step, musa_tensor *grad,
                      musa_tensor *lr, const musa_nadam_options *o) {
    musa_attrs_nadam a = {0};
    if (o)
        a = (musa_attrs_nadam){o->beta1,          o->beta2,     o->eps,     o->weight_decay,
                               o->momentum_decay, o->decoupled, o->maximize};
    musa_tensor *in[7] = {param, exp_avg, exp_avg_sq, mu_product, step, grad, lr};
    return update_fixed(MUSA_OP_nadam_update, 7, in, o, &a);
}

int musa_radam_update(musa_tensor *param, musa_tensor *exp_avg, musa_tensor *exp_avg_sq,
                      musa_tensor *step, musa_tensor *grad, musa_tensor *lr,
                      const musa_radam_options *o) {
    musa_attrs_radam a = {0};
    if (o)
        a = (musa_attrs_radam){o->beta1,        o->beta2,     o->eps,
                               o->weight_decay, o->decoupled, o->maximize};
    musa_tensor *in[6] = {param, exp_avg, exp_avg_sq, step, grad, lr};
    return update_fixed(MUSA_OP_radam_update, 6, in, o, &a);
}

int musa_rprop_update(musa_tensor *param, musa_tensor *prev, musa_tensor *step_size,
                      musa_tensor *step, musa_tensor *grad, musa_tensor *lr,
                      const musa_rprop_options *o) {
    musa_attrs_rprop a = {0};
    if (o)
        a = (musa_attrs_rprop){o->etaminus, o->etaplus, o->step_size_min, o->step_size_max,
                               o->maximize};
    musa_tensor *in[6] = {param, prev, step_size, step, grad, lr};
    return update_fixed(MUSA_OP_rprop_update, 6, in, o, &a);
}

int musa_asgd_update(musa_tensor *param, musa_tensor *ax, musa_tensor *eta, musa_tensor *mu,
                     musa_tensor *step, musa_tensor *grad, musa_tensor *lr,
                     const musa_asgd_options *o) {
    musa_attrs_asgd a = {0};
    if (o) a = (musa_attrs_asgd){o->lambd, o->alpha, o->t0, o->weight_decay, o->maximize};
    musa_tensor *in[7] = {param, ax, eta, mu, step, grad, lr};
    return update_fixed(MUSA_OP_asgd_update, 7, in, o, &a);
}
