/*
 * optim.c - optimizer updates (SGD, Adam/AdamW, RMSprop) over a list of
 * parameters in one call: one pass over each parameter's memory, no
 * temporaries, no op dispatch per step. The formulas and their order of
 * operations are PyTorch's (torch.optim, single-tensor path), computed in
 * the parameter's dtype, so results agree with it to rounding.
 *
 * Parameters, gradients and state must be contiguous, of one floating
 * dtype (float32 or float64) and the same shape. The writes are not
 * recorded by autograd (like updates under no_grad) and bump the version
 * counters.
 */
#include <math.h>

#include "../base/threadpool.h"
#include "op.h"

#define GRAIN 16384

static int check(const char *who, int i, musa_tensor *p, musa_tensor *g, musa_tensor *const *state,
                 int n_state) {
    if (!p || !g)
        return musa_err(MUSA_ERR_VALUE, "[%s] parameter %d or its gradient is NULL", who, i);
    if (p->dtype != MUSA_DTYPE_FLOAT32 && p->dtype != MUSA_DTYPE_FLOAT64)
        return musa_err(MUSA_ERR_TYPE, "[%s] parameter %d is %s; float32 and float64 are supported",
                        who, i, musa_dtype_name((musa_dtype)p->dtype));
    musa_tensor *all[8] = {p, g};
    for (int k = 0; k < n_state; k++) all[2 + k] = state[k];
    for (int k = 0; k < 2 + n_state; k++) {
        musa_tensor *t = all[k];
        if (!t) continue;
        const char *what = k == 0 ? "parameter" : k == 1 ? "gradient" : "state";
        if (!t->storage)
            return musa_err(MUSA_ERR_VALUE, "[%s] %s %d has no storage (meta)", who, what, i);
        if (t->dtype != p->dtype)
            return musa_err(MUSA_ERR_TYPE, "[%s] %s %d is %s but the parameter is %s", who, what, i,
                            musa_dtype_name((musa_dtype)t->dtype),
                            musa_dtype_name((musa_dtype)p->dtype));
        if (!musa_shape_equal(t->ndim, t->shape, p->ndim, p->shape)) {
            char s1[128], s2[128];
            return musa_err(MUSA_ERR_VALUE, "[%s] %s %d has shape %s but the parameter has %s", who,
                            what, i, musa_shape_str(t->ndim, t->shape, s1, sizeof s1),
                            musa_shape_str(p->ndim, p->shape, s2, sizeof s2));
        }
        if (!musa_tensor_is_contiguous(t))
            return musa_err(MUSA_ERR_VALUE, "[%s] %s %d is not contiguous", who, what, i);
    }
    return MUSA_OK;
}

static void bump(musa_tensor *t) {
    if (t) musa_tensor_bump_version(t);
}

/* ---- SGD ---- */

typedef struct {
    void *p, *g, *buf;
    bool fresh;
    const musa_sgd_options *o;
} sgd_job;

#define DEF_SGD(SUF, T)                                                                            \
    static void sgd_##SUF(void *arg, int64_t i0, int64_t i1) {                                     \
        const sgd_job *j = arg;                                                                    \
        const musa_sgd_options *o = j->o;                                                          \
        T *p = j->p, *g = j->g, *buf = j->buf;                                                     \
        T lr = (T)o->lr, wd = (T)o->weight_decay, mom = (T)o->momentum,                            \
          damp = (T)(1 - o->dampening);                                                            \
        for (int64_t i = i0; i < i1; i++) {                                                        \
            T d = o->maximize ? -g[i] : g[i];                                                      \
            if (wd != 0) d = d + p[i] * wd;                                                        \
            if (buf) {                                                                             \
                T b = j->fresh ? d : buf[i] * mom + d * damp;                                      \
                buf[i] = b;                                                                        \
                d = o->nesterov ? d + b * mom : b;                                                 \
            }                                                                                      \
            p[i] = p[i] + d * -lr;                                                                 \
        }                                                                                          \
    }
DEF_SGD(f32, float)
DEF_SGD(f64, double)

int musa_optim_sgd(int n, musa_tensor *const *params, musa_tensor *const *grads,
                   musa_tensor *const *bufs, const bool *fresh, const musa_sgd_options *o) {
    if (n < 0 || (n && (!params || !grads)) || !o)
        return musa_err(MUSA_ERR_VALUE, "[optim_sgd] bad arguments");
    if (o->momentum != 0 && !bufs)
        return musa_err(MUSA_ERR_VALUE, "[optim_sgd] momentum %g needs momentum buffers",
                        o->momentum);
    if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
        return musa_err(MUSA_ERR_VALUE,
                        "[optim_sgd] Nesterov momentum requires a momentum and zero dampening");
    for (int i = 0; i < n; i++) {
        musa_tensor *b = o->momentum != 0 ? bufs[i] : NULL;
        if (o->momentum != 0 && !b)
            return musa_err(MUSA_ERR_VALUE, "[optim_sgd] momentum buffer %d is NULL", i);
        int rc = check("optim_sgd", i, params[i], grads[i], &b, 1);
        if (rc) return rc;
    }
    for (int i = 0; i < n; i++) {
        musa_tensor *p = params[i], *b = o->momentum != 0 ? bufs[i] : NULL;
        sgd_job j = {musa_tensor_data(p), musa_tensor_data(grads[i]),
                     b ? musa_tensor_data(b) : NULL, fresh && fresh[i], o};
        musa_parallel_for(p->numel, GRAIN, p->dtype == MUSA_DTYPE_FLOAT64 ? sgd_f64 : sgd_f32, &j);
        bump(p), bump(b);
    }
    return MUSA_OK;
}

/* ---- Adam / AdamW ---- */

typedef struct {
    void *p, *g, *m, *v, *vmax;
    double step_size, bc2_sqrt;
    const musa_adam_options *o;
} adam_job;

#define DEF_ADAM(SUF, T)                                                                           \
    static void adam_##SUF(void *arg, int64_t i0, int64_t i1) {                                    \
        const adam_job *j = arg;                                                                   \
        const musa_adam_options *o = j->o;                                                         \
        T *p = j->p, *g = j->g, *m = j->m, *v = j->v, *vmax = j->vmax;                             \
        T a1 = (T)o->beta1, b1 = (T)(1 - o->beta1), b2 = (T)o->beta2, c2 = (T)(1 - o->beta2),      \
          wd = (T)o->weight_decay;                                                                 \
        T decay = (T)(1 - o->lr * o->weight_decay), ss = (T)-j->step_size, bc = (T)j->bc2_sqrt,    \
          eps = (T)o->eps;                                                                         \
        for (int64_t i = i0; i < i1; i++) {                                                        \
            T gi = o->maximize ? -g[i] : g[i];                                                     \
            if (o->decoupled) {                                                                    \
                if (wd != 0) p[i] = p[i] * decay;                                                  \
            } else if (wd != 0) {                                                                  \
                gi = gi + p[i] * wd;                                                               \
            }                                                                                      \
            m[i] = m[i] * a1 + gi * b1;                                                            \
            v[i] = v[i] * b2 + c2 * gi * gi;                                                       \
            T vv = v[i];                                                                           \
            if (vmax) {                                                                            \
                vmax[i] = vmax[i] > vv ? vmax[i] : vv;                                             \
                vv = vmax[i];                                                                      \
            }                                                                                      \
            T denom = (T)sqrt(vv) / bc + eps;                                                      \
            p[i] = p[i] + ss * m[i] / denom;                                                       \
        }                                                                                          \
    }
DEF_ADAM(f32, float)
DEF_ADAM(f64, double)

int musa_optim_adam(int n, musa_tensor *const *params, musa_tensor *const *grads,
                    musa_tensor *const *exp_avg, musa_tensor *const *exp_avg_sq,
                    musa_tensor *const *max_exp_avg_sq, const int64_t *steps,
                    const musa_adam_options *o) {
    if (n < 0 || (n && (!params || !grads || !exp_avg || !exp_avg_sq || !steps)) || !o)
        return musa_err(MUSA_ERR_VALUE, "[optim_adam] bad arguments");
    if (o->amsgrad && !max_exp_avg_sq)
        return musa_err(MUSA_ERR_VALUE, "[optim_adam] amsgrad needs max_exp_avg_sq");
    if (!(o->lr >= 0) || !(o->eps >= 0) || !(o->beta1 >= 0 && o->beta1 < 1) ||
        !(o->beta2 >= 0 && o->beta2 < 1))
        return musa_err(MUSA_ERR_VALUE,
                        "[optim_adam] invalid hyperparameters (lr %g, betas (%g, %g), eps %g)",
                        o->lr, o->beta1, o->beta2, o->eps);
    for (int i = 0; i < n; i++) {
        musa_tensor *st[3] = {exp_avg[i], exp_avg_sq[i], o->amsgrad ? max_exp_avg_sq[i] : NULL};
        if (!st[0] || !st[1] || (o->amsgrad && !st[2]))
            return musa_err(MUSA_ERR_VALUE, "[optim_adam] state of parameter %d is NULL", i);
        if (steps[i] < 1)
            return musa_err(MUSA_ERR_VALUE, "[optim_adam] step %lld of parameter %d must be >= 1",
                            (long long)steps[i], i);
        int rc = check("optim_adam", i, params[i], grads[i], st, 3);
        if (rc) return rc;
    }
    for (int i = 0; i < n; i++) {
        musa_tensor *p = params[i], *vm = o->amsgrad ? max_exp_avg_sq[i] : NULL;
        double bc1 = 1 - pow(o->beta1, (double)steps[i]), bc2 = 1 - pow(o->beta2, (double)steps[i]);
        adam_job j = {musa_tensor_data(p),
                      musa_tensor_data(grads[i]),
                      musa_tensor_data(exp_avg[i]),
                      musa_tensor_data(exp_avg_sq[i]),
                      vm ? musa_tensor_data(vm) : NULL,
                      o->lr / bc1,
                      sqrt(bc2),
                      o};
        musa_parallel_for(p->numel, GRAIN, p->dtype == MUSA_DTYPE_FLOAT64 ? adam_f64 : adam_f32,
                          &j);
        bump(p), bump(exp_avg[i]), bump(exp_avg_sq[i]), bump(vm);
    }
    return MUSA_OK;
}

/* ---- RMSprop ---- */

typedef struct {
    void *p, *g, *sq, *buf, *gavg;
    const musa_rmsprop_options *o;
} rms_job;

#define DEF_RMS(SUF, T)                                                                            \
    static void rms_##SUF(void *arg, int64_t i0, int64_t i1) {                                     \
        const rms_job *j = arg;                                                                    \
        const musa_rmsprop_options *o = j->o;                                                      \
        T *p = j->p, *g = j->g, *sq = j->sq, *buf = j->buf, *ga = j->gavg;                         \
        T al = (T)o->alpha, c = (T)(1 - o->alpha), wd = (T)o->weight_decay, eps = (T)o->eps;       \
        T lr = (T)o->lr, mom = (T)o->momentum;                                                     \
        for (int64_t i = i0; i < i1; i++) {                                                        \
            T gi = o->maximize ? -g[i] : g[i];                                                     \
            if (wd != 0) gi = gi + p[i] * wd;                                                      \
            sq[i] = sq[i] * al + c * gi * gi;                                                      \
            T avg;                                                                                 \
            if (ga) {                                                                              \
                ga[i] = ga[i] * al + gi * c;                                                       \
                avg = (T)sqrt(sq[i] + -1 * ga[i] * ga[i]);                                         \
            } else {                                                                               \
                avg = (T)sqrt(sq[i]);                                                              \
            }                                                                                      \
            avg = avg + eps;                                                                       \
            if (buf) {                                                                             \
                buf[i] = buf[i] * mom + gi / avg;                                                  \
                p[i] = p[i] + buf[i] * -lr;                                                        \
            } else {                                                                               \
                p[i] = p[i] + -lr * gi / avg;                                                      \
            }                                                                                      \
        }                                                                                          \
    }
DEF_RMS(f32, float)
DEF_RMS(f64, double)

int musa_optim_rmsprop(int n, musa_tensor *const *params, musa_tensor *const *grads,
                       musa_tensor *const *square_avg, musa_tensor *const *momentum_buf,
                       musa_tensor *const *grad_avg, const musa_rmsprop_options *o) {
    if (n < 0 || (n && (!params || !grads || !square_avg)) || !o)
        return musa_err(MUSA_ERR_VALUE, "[optim_rmsprop] bad arguments");
    if ((o->momentum > 0 && !momentum_buf) || (o->centered && !grad_avg))
        return musa_err(MUSA_ERR_VALUE,
                        "[optim_rmsprop] momentum needs momentum_buf and centered needs grad_avg");
    for (int i = 0; i < n; i++) {
        musa_tensor *st[3] = {square_avg[i], o->momentum > 0 ? momentum_buf[i] : NULL,
                              o->centered ? grad_avg[i] : NULL};
        if (!st[0] || (o->momentum > 0 && !st[1]) || (o->centered && !st[2]))
            return musa_err(MUSA_ERR_VALUE, "[optim_rmsprop] state of parameter %d is NULL", i);
        int rc = check("optim_rmsprop", i, params[i], grads[i], st, 3);
        if (rc) return rc;
    }
    for (int i = 0; i < n; i++) {
        musa_tensor *p = params[i], *b = o->momentum > 0 ? momentum_buf[i] : NULL,
                    *ga = o->centered ? grad_avg[i] : NULL;
        rms_job j = {musa_tensor_data(p),
                     musa_tensor_data(grads[i]),
                     musa_tensor_data(square_avg[i]),
                     b ? musa_tensor_data(b) : NULL,
                     ga ? musa_tensor_data(ga) : NULL,
                     o};
        musa_parallel_for(p->numel, GRAIN, p->dtype == MUSA_DTYPE_FLOAT64 ? rms_f64 : rms_f32, &j);
        bump(p), bump(square_avg[i]), bump(b), bump(ga);
    }
    return MUSA_OK;
}
