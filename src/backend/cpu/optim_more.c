/*
 * optim_more.c - CPU kernels of the update rows for Adagrad, Adadelta,
 * Adamax, NAdam, RAdam and ASGD, in the form of optim.c (its file comment
 * holds for these): prepared rows run by cpu_update_row, and the same
 * rows in the multi-tensor form. The formulas follow torch.optim's
 * single-tensor path; what is the same for every element of a step (bias
 * corrections, NAdam's momentum schedule, RAdam's rectification, ASGD's
 * eta and mu) is computed once per row, in float64, when it is prepared.
 *
 * Row operands (in; out = the first n - 2, their new values):
 *   adagrad  (p, sum, step, g, lr)
 *   adadelta (p, square_avg, acc_delta, step, g, lr)
 *   adamax   (p, exp_avg, exp_inf, step, g, lr)
 *   nadam    (p, exp_avg, exp_avg_sq, mu_product, step, g, lr)
 *   radam    (p, exp_avg, exp_avg_sq, step, g, lr)
 *   asgd     (p, ax, eta, mu, step, g, lr)
 *   rprop    (p, prev, step_size, step, g, lr)
 * Scalar state (step, mu_product, eta, mu) is 0-d float64.
 */
#include <math.h>

#include "optim.h"

/* The loop of one optimizer for one dtype: BODY(CT, LD, ST, SQRT) is the
 * element's update, with pi, gi (the gradient, negated for maximize), the
 * state s0/s1 (and outputs), and c[] as CT in scope. */
#define DEF_GEN(NAME, SUF, T, CT, LD, ST, SQRT, BODY)                                              \
    static void NAME##_##SUF(void *arg, int64_t i0, int64_t i1) {                                  \
        const gen_job *j = arg;                                                                    \
        const T *p = j->p, *g = j->g, *s0 = j->s[0], *s1 = j->s[1];                                \
        T *p_out = j->p_out, *s0_out = j->s_out[0], *s1_out = j->s_out[1];                         \
        CT c[10];                                                                                  \
        for (int k = 0; k < 10; k++) c[k] = (CT)j->c[k];                                           \
        const bool maximize = j->maximize;                                                         \
        (void)s1, (void)s1_out;                                                                    \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                                    \
            CT pi = LD(p[i]);                                                                      \
            CT gi = maximize ? -LD(g[i]) : LD(g[i]);                                               \
            BODY(CT, LD, ST, SQRT)                                                                 \
        }                                                                                          \
    }

#define DEF_GEN_ALL(NAME, BODY)                                                                    \
    DEF_GEN(NAME, f32, float, float, LD_f32, ST_f32, sqrtf, BODY)                                  \
    DEF_GEN(NAME, f64, double, double, LD_f64, ST_f64, sqrt, BODY)                                 \
    DEF_GEN(NAME, bf16, musa_bf16, float, LD_bf16, ST_bf16, sqrtf, BODY)                           \
    DEF_GEN(NAME, f16, musa_f16, float, LD_f16, ST_f16, sqrtf, BODY)

/* weight decay added to the gradient (c[WD] == 0: none) */
#define DECAY_G(WD)                                                                                \
    if (c[WD] != 0) gi = gi + pi * c[WD];

/* Adagrad: c = {-clr, wd, eps} */
#define ADAGRAD_BODY(CT, LD, ST, SQRT)                                                             \
    DECAY_G(1) CT si = LD(s0[i]) + gi * gi;                                                        \
    s0_out[i] = ST(si);                                                                            \
    p_out[i] = ST(pi + c[0] * (gi / (SQRT(si) + c[2])));
DEF_GEN_ALL(adagrad, ADAGRAD_BODY)

/* Adadelta: c = {-lr, rho, 1 - rho, eps, wd} */
#define ADADELTA_BODY(CT, LD, ST, SQRT)                                                            \
    DECAY_G(4) CT sa = LD(s0[i]) * c[1] + c[2] * gi * gi;                                          \
    CT delta = SQRT(LD(s1[i]) + c[3]) / SQRT(sa + c[3]) * gi;                                      \
    s0_out[i] = ST(sa);                                                                            \
    s1_out[i] = ST(LD(s1[i]) * c[1] + c[2] * delta * delta);                                       \
    p_out[i] = ST(pi + c[0] * delta);
DEF_GEN_ALL(adadelta, ADADELTA_BODY)

/* Adamax: c = {b1, 1 - b1, b2, eps, wd, -clr}; the infinity norm keeps NaN */
#define ADAMAX_BODY(CT, LD, ST, SQRT)                                                              \
    DECAY_G(4) CT ea = LD(s0[i]) * c[0] + gi * c[1];                                               \
    CT a = LD(s1[i]) * c[2];                                                                       \
    CT b = (gi < 0 ? -gi : gi) + c[3];                                                             \
    CT ei = (a != a || a > b) ? a : b;                                                             \
    s0_out[i] = ST(ea);                                                                            \
    s1_out[i] = ST(ei);                                                                            \
    p_out[i] = ST(pi + c[5] * (ea / ei));
DEF_GEN_ALL(adamax, ADAMAX_BODY)

/* NAdam: c = {b1, 1 - b1, b2, 1 - b2, eps, wd (coupled), decay (decoupled),
 * bc2, -lr (1 - mu) / (1 - mu_product), -lr mu_next / (1 - mu_product mu_next)} */
#define NADAM_BODY(CT, LD, ST, SQRT)                                                               \
    pi = pi * c[6];                                                                                \
    DECAY_G(5) CT ea = LD(s0[i]) * c[0] + gi * c[1];                                               \
    CT va = LD(s1[i]) * c[2] + c[3] * gi * gi;                                                     \
    CT denom = SQRT(va / c[7]) + c[4];                                                             \
    s0_out[i] = ST(ea);                                                                            \
    s1_out[i] = ST(va);                                                                            \
    p_out[i] = ST(pi + c[8] * (gi / denom) + c[9] * (ea / denom));
DEF_GEN_ALL(nadam, NADAM_BODY)

/* RAdam: c = {b1, 1 - b1, b2, 1 - b2, eps, wd (coupled), decay (decoupled),
 * bc1, lr, sqrt(bc2) rect (-1: the unrectified step)} */
#define RADAM_BODY(CT, LD, ST, SQRT)                                                               \
    pi = pi * c[6];                                                                                \
    DECAY_G(5) CT ea = LD(s0[i]) * c[0] + gi * c[1];                                               \
    CT va = LD(s1[i]) * c[2] + c[3] * gi * gi;                                                     \
    s0_out[i] = ST(ea);                                                                            \
    s1_out[i] = ST(va);                                                                            \
    CT bea = ea / c[7];                                                                            \
    p_out[i] =                                                                                     \
        ST(c[9] < 0 ? pi + bea * c[8] * -1 : pi + bea * c[8] * (c[9] / (SQRT(va) + c[4])) * -1);
DEF_GEN_ALL(radam, RADAM_BODY)

/* ASGD: c = {wd, 1 - lambd eta, -eta, mu} */
#define ASGD_BODY(CT, LD, ST, SQRT)                                                                \
    DECAY_G(0) pi = pi * c[1];                                                                     \
    pi = pi + gi * c[2];                                                                           \
    p_out[i] = ST(pi);                                                                             \
    s0_out[i] = ST(c[3] != 1 ? LD(s0[i]) + (pi - LD(s0[i])) * c[3] : pi);
DEF_GEN_ALL(asgd, ASGD_BODY)

/* Rprop: c = {etaplus, etaminus, step_size_min, step_size_max}; s0 the
 * previous gradient, s1 the step sizes. As torch's: the factor by the sign
 * of g * prev (1 for 0), the gradient zeroed where the factor is etaminus,
 * p -= sign(g) step. */
#define RPROP_BODY(CT, LD, ST, SQRT)                                                               \
    CT prod = gi * LD(s0[i]);                                                                      \
    CT f = prod > 0 ? c[0] : prod < 0 ? c[1] : (CT)1;                                              \
    CT ss = LD(s1[i]) * f;                                                                         \
    ss = ss < c[2] ? c[2] : ss > c[3] ? c[3] : ss;                                                 \
    gi = f == c[1] ? (CT)0 : gi;                                                                   \
    CT sg = gi > 0 ? (CT)1 : gi < 0 ? (CT)-1 : gi;                                                 \
    s0_out[i] = ST(gi);                                                                            \
    s1_out[i] = ST(ss);                                                                            \
    p_out[i] = ST(pi - sg * ss);
DEF_GEN_ALL(rprop, RPROP_BODY)

/* ---- prepared rows ---- */

/* The state tensors and the element loop of a row: n_state tensors after
 * the parameter, then the scalars, the gradient and lr. */
static void gen_common(update_job *j, musa_kview *out, const musa_kview *in, int n_in, int n_state,
                       bool maximize) {
    gen_job *gj = &j->u.gen;
    memset(gj, 0, sizeof *gj);
    gj->p = in[0].data, gj->p_out = out[0].data, gj->g = in[n_in - 2].data;
    for (int k = 0; k < n_state; k++) gj->s[k] = in[1 + k].data, gj->s_out[k] = out[1 + k].data;
    gj->maximize = maximize;
    update_arrays(j, ARRS, OUT_ARR, in[0].dtype);
}

/* Scalar state k (after the n_state tensors) gets value v. */
static void set_scalar(update_job *j, musa_kview *out, int n_state, int k, double v) {
    j->scal_out[k] = (double *)out[1 + n_state + k].data;
    j->scal[k] = v;
    if (k + 1 > j->n_scal) j->n_scal = k + 1;
}

static void adagrad_prepare(update_job *j, musa_kview *out, const musa_kview *in, int n_in,
                            const void *attrs) {
    const musa_attrs_adagrad *o = attrs;
    gen_common(j, out, in, n_in, 1, o->maximize);
    double step = scalar(&in[2]) + 1, lr = scalar(&in[n_in - 1]);
    double *c = j->u.gen.c;
    c[0] = -(lr / (1 + (step - 1) * o->lr_decay)), c[1] = o->weight_decay, c[2] = o->eps;
    j->fn = PICK(adagrad, in[0].dtype);
    j->n_scal = 0;
    set_scalar(j, out, 1, 0, step);
}

static void adadelta_prepare(update_job *j, musa_kview *out, const musa_kview *in, int n_in,
                             const void *attrs) {
    const musa_attrs_adadelta *o = attrs;
    gen_common(j, out, in, n_in, 2, o->maximize);
    double *c = j->u.gen.c;
    c[0] = -scalar(&in[n_in - 1]), c[1] = o->rho, c[2] = 1 - o->rho, c[3] = o->eps;
    c[4] = o->weight_decay;
    j->fn = PICK(adadelta, in[0].dtype);
    j->n_scal = 0;
    set_scalar(j, out, 2, 0, scalar(&in[3]) + 1);
}

static void adamax_prepare(update_job *j, musa_kview *out, const musa_kview *in, int n_in,
                           const void *attrs) {
    const musa_attrs_adamax *o = attrs;
    gen_common(j, out, in, n_in, 2, o->maximize);
    double step = scalar(&in[3]) + 1, lr = scalar(&in[n_in - 1]);
    double *c = j->u.gen.c;
    c[0] = o->beta1, c[1] = 1 - o->beta1, c[2] = o->beta2, c[3] = o->eps, c[4] = o->weight_decay;
    c[5] = -(lr / (1 - pow(o->beta1, step)));
    j->fn = PICK(adamax, in[0].dtype);
    j->n_scal = 0;
    set_scalar(j, out, 2, 0, step);
}

/* The weight-decay coefficients NAdam and RAdam share: c[5] on the
 * gradient, or c[6] on the parameter (decoupled, AdamW's form). */
static void decay_coefs(double *c, double wd, bool decoupled, double lr) {
    c[5] = decoupled ? 0 : wd;
    c[6] = decoupled ? 1 - lr * wd : 1;
}

static void nadam_prepare(update_job *j, musa_kview *out, const musa_kview *in, int n_in,
                          const void *attrs) {
    const musa_attrs_nadam *o = attrs;
    gen_common(j, out, in, n_in, 2, o->maximize);
    double step = scalar(&in[4]) + 1, lr = scalar(&in[n_in - 1]), prod = scalar(&in[3]);
    double mu = o->beta1 * (1 - 0.5 * pow(0.96, step * o->momentum_decay));
    double mu_next = o->beta1 * (1 - 0.5 * pow(0.96, (step + 1) * o->momentum_decay));
    prod *= mu;
    double *c = j->u.gen.c;
    c[0] = o->beta1, c[1] = 1 - o->beta1, c[2] = o->beta2, c[3] = 1 - o->beta2, c[4] = o->eps;
    decay_coefs(c, o->weight_decay, o->decoupled, lr);
    c[7] = 1 - pow(o->beta2, step);
    c[8] = -lr * (1 - mu) / (1 - prod);
    c[9] = -lr * mu_next / (1 - prod * mu_next);
    j->fn = PICK(nadam, in[0].dtype);
    j->n_scal = 0;
    set_scalar(j, out, 2, 0, prod);
    set_scalar(j, out, 2, 1, step);
}

static void radam_prepare(update_job *j, musa_kview *out, const musa_kview *in, int n_in,
                          const void *attrs) {
    const musa_attrs_radam *o = attrs;
    gen_common(j, out, in, n_in, 2, o->maximize);
    double step = scalar(&in[3]) + 1, lr = scalar(&in[n_in - 1]);
    double bc1 = 1 - pow(o->beta1, step), bc2 = 1 - pow(o->beta2, step);
    double rho_inf = 2 / (1 - o->beta2) - 1;
    double rho_t = rho_inf - 2 * step * pow(o->beta2, step) / bc2;
    double *c = j->u.gen.c;
    c[0] = o->beta1, c[1] = 1 - o->beta1, c[2] = o->beta2, c[3] = 1 - o->beta2, c[4] = o->eps;
    decay_coefs(c, o->weight_decay, o->decoupled, lr);
    c[7] = bc1, c[8] = lr, c[9] = -1;
    if (rho_t > 5) { /* the variance is tractable: rectify, folding sqrt(bc2) in */
        double rect =
            sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
        c[9] = sqrt(bc2) * rect;
    }
    j->fn = PICK(radam, in[0].dtype);
    j->n_scal = 0;
    set_scalar(j, out, 2, 0, step);
}

static void asgd_prepare(update_job *j, musa_kview *out, const musa_kview *in, int n_in,
                         const void *attrs) {
    const musa_attrs_asgd *o = attrs;
    gen_common(j, out, in, n_in, 1, o->maximize);
    double eta = scalar(&in[2]), mu = scalar(&in[3]), step = scalar(&in[4]) + 1;
    double lr = scalar(&in[n_in - 1]);
    double *c = j->u.gen.c;
    c[0] = o->weight_decay, c[1] = 1 - o->lambd * eta, c[2] = -eta, c[3] = mu;
    j->fn = PICK(asgd, in[0].dtype);
    j->n_scal = 0;
    set_scalar(j, out, 1, 0, lr / pow(1 + o->lambd * lr * step, o->alpha));
    set_scalar(j, out, 1, 1, 1 / fmax(1, step - o->t0));
    set_scalar(j, out, 1, 2, step);
}

/* ---- the kernels of the op table ---- */

static void rprop_prepare(update_job *j, musa_kview *out, const musa_kview *in, int n_in,
                          const void *attrs) {
    const musa_attrs_rprop *o = attrs;
    gen_common(j, out, in, n_in, 2, o->maximize);
    double *c = j->u.gen.c;
    c[0] = o->etaplus, c[1] = o->etaminus, c[2] = o->step_size_min, c[3] = o->step_size_max;
    j->fn = PICK(rprop, in[0].dtype);
    j->n_scal = 0;
    set_scalar(j, out, 2, 0, scalar(&in[3]) + 1);
}

#define DEF_KERNEL(NAME)                                                                           \
    int cpu_##NAME##_update(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in, \
                            const void *attrs) {                                                   \
        (void)ctx;                                                                                 \
        return cpu_update_row(NAME##_prepare, out, in, n_in, attrs);                               \
    }
DEF_KERNEL(adagrad)
DEF_KERNEL(adadelta)
DEF_KERNEL(adamax)
DEF_KERNEL(nadam)
DEF_KERNEL(radam)
DEF_KERNEL(asgd)
DEF_KERNEL(rprop)

prepare_fn cpu_update_more_prepare(musa_kernel_fn kernel) {
    if (kernel == cpu_adagrad_update) return adagrad_prepare;
    if (kernel == cpu_adadelta_update) return adadelta_prepare;
    if (kernel == cpu_adamax_update) return adamax_prepare;
    if (kernel == cpu_nadam_update) return nadam_prepare;
    if (kernel == cpu_radam_update) return radam_prepare;
    if (kernel == cpu_asgd_update) return asgd_prepare;
    if (kernel == cpu_rprop_update) return rprop_prepare;
    return NULL;
}
