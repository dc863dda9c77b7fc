/*
 * optim.c - CPU kernels of the optimizer update rows: one pass over a
 * parameter and its state, no temporaries. The formulas and their order of
 * operations are PyTorch's (torch.optim, single-tensor path), computed in
 * the parameter's dtype, so results agree with it to rounding; eager and
 * compiled steps run this same code, so they agree bitwise.
 *
 * Operands (see ops/infer_optim.c): in = (param, state..., grad, lr), out =
 * the new (param, state...). The dispatcher hands contiguous views (CONTIG);
 * out[j] may be in[j]'s memory (INPLACE), so each element of an input is
 * read before that element of the output is written. lr is a 0-d float64;
 * step counters are 0-d float64 and count this step.
 */
#include <math.h>

#include "../../base/threadpool.h"
#include "kernels.h"

#define GRAIN 16384

static double scalar(const musa_kview *v) {
    return *(const double *)v->data;
}

/* ---- SGD: in (p, [buf], g, lr) ---- */

typedef struct {
    const void *p, *g, *buf;
    void *p_out, *buf_out;
    double lr;
    const musa_attrs_sgd *o;
} sgd_job;

#define DEF_SGD(SUF, T)                                                                            \
    static void sgd_##SUF(void *arg, int64_t i0, int64_t i1) {                                     \
        const sgd_job *j = arg;                                                                    \
        const musa_attrs_sgd *o = j->o;                                                            \
        const T *p = j->p, *g = j->g, *buf = j->buf;                                               \
        T *p_out = j->p_out, *buf_out = j->buf_out;                                                \
        T lr = (T)j->lr, wd = (T)o->weight_decay, mom = (T)o->momentum,                            \
          damp = (T)(1 - o->dampening);                                                            \
        const bool maximize = o->maximize, fresh = o->fresh, nesterov = o->nesterov;               \
        if (!buf) {                                                                                \
            _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                                \
                T pi = p[i];                                                                       \
                T d = maximize ? -g[i] : g[i];                                                     \
                if (wd != 0) d = d + pi * wd;                                                      \
                p_out[i] = pi + d * -lr;                                                           \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                                    \
            T pi = p[i];                                                                           \
            T d = maximize ? -g[i] : g[i];                                                         \
            if (wd != 0) d = d + pi * wd;                                                          \
            T b = fresh ? d : buf[i] * mom + d * damp;                                             \
            buf_out[i] = b;                                                                        \
            d = nesterov ? d + b * mom : b;                                                        \
            p_out[i] = pi + d * -lr;                                                               \
        }                                                                                          \
    }
DEF_SGD(f32, float)
DEF_SGD(f64, double)

int cpu_sgd_update(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                   const void *attrs) {
    (void)ctx;
    const musa_attrs_sgd *o = attrs;
    bool mom = o->momentum != 0;
    sgd_job j = {in[0].data,
                 in[n_in - 2].data,
                 mom ? in[1].data : NULL,
                 out[0].data,
                 mom ? out[1].data : NULL,
                 scalar(&in[n_in - 1]),
                 o};
    musa_parallel_for(musa_kview_numel(&in[0]), GRAIN,
                      in[0].dtype == MUSA_DTYPE_FLOAT64 ? sgd_f64 : sgd_f32, &j);
    return MUSA_OK;
}

/* ---- Adam / AdamW: in (p, m, v, [vmax], step, g, lr) ---- */

typedef struct {
    const void *p, *g, *m, *v, *vmax;
    void *p_out, *m_out, *v_out, *vmax_out;
    double lr, step_size, bc2_sqrt;
    const musa_attrs_adam *o;
} adam_job;

#define DEF_ADAM(SUF, T)                                                                           \
    static void adam_##SUF(void *arg, int64_t i0, int64_t i1) {                                    \
        const adam_job *j = arg;                                                                   \
        const musa_attrs_adam *o = j->o;                                                           \
        const T *p = j->p, *g = j->g, *m = j->m, *v = j->v, *vmax = j->vmax;                       \
        T *p_out = j->p_out, *m_out = j->m_out, *v_out = j->v_out, *vmax_out = j->vmax_out;        \
        T a1 = (T)o->beta1, b1 = (T)(1 - o->beta1), b2 = (T)o->beta2, c2 = (T)(1 - o->beta2),      \
          wd = (T)o->weight_decay;                                                                 \
        T decay = (T)(1 - j->lr * o->weight_decay), ss = (T)-j->step_size, bc = (T)j->bc2_sqrt,    \
          eps = (T)o->eps;                                                                         \
        const bool maximize = o->maximize, decoupled = o->decoupled;                               \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                                    \
            T pi = p[i];                                                                           \
            T gi = maximize ? -g[i] : g[i];                                                        \
            if (decoupled) {                                                                       \
                if (wd != 0) pi = pi * decay;                                                      \
            } else if (wd != 0) {                                                                  \
                gi = gi + pi * wd;                                                                 \
            }                                                                                      \
            T mi = m[i] * a1 + gi * b1;                                                            \
            T vi = v[i] * b2 + c2 * gi * gi;                                                       \
            m_out[i] = mi;                                                                         \
            v_out[i] = vi;                                                                         \
            T vv = vi;                                                                             \
            if (vmax) {                                                                            \
                vv = vmax[i] > vv ? vmax[i] : vv;                                                  \
                vmax_out[i] = vv;                                                                  \
            }                                                                                      \
            T denom = (T)sqrt(vv) / bc + eps;                                                      \
            p_out[i] = pi + ss * mi / denom;                                                       \
        }                                                                                          \
    }
DEF_ADAM(f32, float)
DEF_ADAM(f64, double)

int cpu_adam_update(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                    const void *attrs) {
    (void)ctx;
    const musa_attrs_adam *o = attrs;
    int s = o->amsgrad ? 4 : 3; /* the step counter's position */
    double step = scalar(&in[s]) + 1, lr = scalar(&in[n_in - 1]);
    double bc1 = 1 - pow(o->beta1, step), bc2 = 1 - pow(o->beta2, step);
    adam_job j = {in[0].data,
                  in[n_in - 2].data,
                  in[1].data,
                  in[2].data,
                  o->amsgrad ? in[3].data : NULL,
                  out[0].data,
                  out[1].data,
                  out[2].data,
                  o->amsgrad ? out[3].data : NULL,
                  lr,
                  lr / bc1,
                  sqrt(bc2),
                  o};
    musa_parallel_for(musa_kview_numel(&in[0]), GRAIN,
                      in[0].dtype == MUSA_DTYPE_FLOAT64 ? adam_f64 : adam_f32, &j);
    *(double *)out[s].data = step;
    return MUSA_OK;
}

/* ---- RMSprop: in (p, square_avg, [buf], [grad_avg], step, g, lr) ---- */

typedef struct {
    const void *p, *g, *sq, *buf, *gavg;
    void *p_out, *sq_out, *buf_out, *gavg_out;
    double lr;
    const musa_attrs_rmsprop *o;
} rms_job;

#define DEF_RMS(SUF, T)                                                                            \
    static void rms_##SUF(void *arg, int64_t i0, int64_t i1) {                                     \
        const rms_job *j = arg;                                                                    \
        const musa_attrs_rmsprop *o = j->o;                                                        \
        const T *p = j->p, *g = j->g, *sq = j->sq, *buf = j->buf, *ga = j->gavg;                   \
        T *p_out = j->p_out, *sq_out = j->sq_out, *buf_out = j->buf_out, *ga_out = j->gavg_out;    \
        T al = (T)o->alpha, c = (T)(1 - o->alpha), wd = (T)o->weight_decay, eps = (T)o->eps;       \
        T lr = (T)j->lr, mom = (T)o->momentum;                                                     \
        const bool maximize = o->maximize;                                                         \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                                    \
            T pi = p[i];                                                                           \
            T gi = maximize ? -g[i] : g[i];                                                        \
            if (wd != 0) gi = gi + pi * wd;                                                        \
            T si = sq[i] * al + c * gi * gi;                                                       \
            sq_out[i] = si;                                                                        \
            T avg;                                                                                 \
            if (ga) {                                                                              \
                T ai = ga[i] * al + gi * c;                                                        \
                ga_out[i] = ai;                                                                    \
                avg = (T)sqrt(si + -1 * ai * ai);                                                  \
            } else {                                                                               \
                avg = (T)sqrt(si);                                                                 \
            }                                                                                      \
            avg = avg + eps;                                                                       \
            if (buf) {                                                                             \
                T bi = buf[i] * mom + gi / avg;                                                    \
                buf_out[i] = bi;                                                                   \
                p_out[i] = pi + bi * -lr;                                                          \
            } else {                                                                               \
                p_out[i] = pi + -lr * gi / avg;                                                    \
            }                                                                                      \
        }                                                                                          \
    }
DEF_RMS(f32, float)
DEF_RMS(f64, double)

int cpu_rmsprop_update(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                       const void *attrs) {
    (void)ctx;
    const musa_attrs_rmsprop *o = attrs;
    bool mom = o->momentum > 0;
    int b = mom ? 2 : -1, a = o->centered ? 2 + mom : -1, s = 2 + mom + o->centered;
    rms_job j = {in[0].data,
                 in[n_in - 2].data,
                 in[1].data,
                 b >= 0 ? in[b].data : NULL,
                 a >= 0 ? in[a].data : NULL,
                 out[0].data,
                 out[1].data,
                 b >= 0 ? out[b].data : NULL,
                 a >= 0 ? out[a].data : NULL,
                 scalar(&in[n_in - 1]),
                 o};
    musa_parallel_for(musa_kview_numel(&in[0]), GRAIN,
                      in[0].dtype == MUSA_DTYPE_FLOAT64 ? rms_f64 : rms_f32, &j);
    *(double *)out[s].data = scalar(&in[s]) + 1;
    return MUSA_OK;
}
