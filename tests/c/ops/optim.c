/*
 * optim.c - the optimizer update rows (sgd_update, adam_update,
 * rmsprop_update; and Adagrad's to ASGD's at the end): two steps against float64 references written
 * here from PyTorch's documented formulas, for float32/float64, contiguous and strided parameters,
 * 0-d and empty parameters, every optional state; the functional form (new outputs, inputs
 * untouched); and the errors.
 */
#include "../util.h"

static musa_tensor *scalar64(double v) {
    return musa_full(0, NULL, v, MUSA_DTYPE_FLOAT64);
}

/* Copy of t's values (the reference's state). */
static double *copy_of(const musa_tensor *t) {
    return values(t);
}

static bool near_all(const char *what, musa_dtype dt, const musa_tensor *t, const double *want) {
    double *got = values(t);
    int64_t n = musa_tensor_numel(t);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        double tol = 4 * (tol_abs(dt) + tol_rel(dt) * fabs(want[i]));
        if (!(fabs(got[i] - want[i]) <= tol)) {
            harness_fail(__FILE__, __LINE__, "%s %s [%lld] = %.9g, want %.9g", what,
                         musa_dtype_name(dt), (long long)i, got[i], want[i]);
            ok = false;
        }
    }
    free(got);
    return ok;
}

/* ---- SGD ---- */

static void sgd_case(musa_dtype dt, int ndim, const int64_t *shape, layout lay, double mom,
                     double damp, double wd, bool nesterov, bool maximize) {
    musa_tensor *p = rnd(dt, ndim, shape, -1, 1, lay), *buf = musa_zeros(ndim, shape, dt);
    musa_tensor *lr = scalar64(0.1);
    double *rp = copy_of(p), *rb = copy_of(buf);
    int64_t n = musa_tensor_numel(p);
    musa_sgd_options o = {mom, damp, wd, nesterov, maximize};
    for (int step = 0; step < 2; step++) {
        musa_tensor *g = rnd(dt, ndim, shape, -1, 1, L_CONTIG);
        double *gv = values(g);
        bool fresh = step == 0;
        CHECK_MSG(musa_sgd_update(p, mom != 0 ? buf : NULL, g, lr, &o, fresh) == MUSA_OK, "%s",
                  musa_last_error());
        for (int64_t i = 0; i < n; i++) {
            double d = maximize ? -gv[i] : gv[i];
            d += wd * rp[i];
            if (mom != 0) {
                rb[i] = fresh ? d : mom * rb[i] + (1 - damp) * d;
                d = nesterov ? d + mom * rb[i] : rb[i];
            }
            rp[i] -= 0.1 * d;
        }
        free(gv);
        musa_tensor_release(g);
        if (!near_all("sgd_update param", dt, p, rp)) break;
        if (mom != 0 && !near_all("sgd_update momentum_buffer", dt, buf, rb)) break;
    }
    free(rp), free(rb);
    release_all(3, p, buf, lr);
}

TEST(op_sgd_update) {
    const int64_t s2[] = {5, 7}, s0[] = {0, 3};
    musa_dtype dts[] = {MUSA_DTYPE_FLOAT32, MUSA_DTYPE_FLOAT64};
    for (int k = 0; k < 2; k++) {
        sgd_case(dts[k], 2, s2, L_CONTIG, 0, 0, 0, false, false);
        sgd_case(dts[k], 2, s2, L_STRIDED, 0.9, 0, 0.01, false, false);
        sgd_case(dts[k], 2, s2, L_TRANSPOSED, 0.9, 0.1, 0, false, true);
        sgd_case(dts[k], 2, s2, L_CONTIG, 0.9, 0, 0.01, true, false);
        sgd_case(dts[k], 0, NULL, L_CONTIG, 0.5, 0, 0, false, false);
        sgd_case(dts[k], 2, s0, L_CONTIG, 0.9, 0, 0, false, false);
    }
    /* errors name the op and the input; nothing is written */
    const int64_t s[] = {4};
    musa_tensor *p = musa_ones(1, s, MUSA_DTYPE_FLOAT32), *g = musa_ones(1, s, MUSA_DTYPE_FLOAT32);
    musa_tensor *g64 = musa_ones(1, s, MUSA_DTYPE_FLOAT64), *lr = scalar64(0.1);
    musa_tensor *g3 = musa_ones(1, (int64_t[]){3}, MUSA_DTYPE_FLOAT32);
    musa_tensor *lr1 = musa_full(1, (int64_t[]){1}, 0.1, MUSA_DTYPE_FLOAT64);
    musa_tensor *pi = musa_ones(1, s, MUSA_DTYPE_INT64);
    musa_sgd_options o = {0};
    CHECK_ERR(musa_sgd_update(p, NULL, g64, lr, &o, false) == MUSA_OK, MUSA_ERR_TYPE,
              "[sgd_update] gradient (input 1) is float64 but the parameter is float32");
    CHECK_ERR(musa_sgd_update(p, NULL, g3, lr, &o, false) == MUSA_OK, MUSA_ERR_VALUE,
              "[sgd_update] gradient (input 1) has shape (3,) but the parameter has (4,)");
    CHECK_ERR(musa_sgd_update(p, NULL, g, lr1, &o, false) == MUSA_OK, MUSA_ERR_VALUE,
              "[sgd_update] lr (input 2) must be a 0-d floating tensor");
    CHECK_ERR(musa_sgd_update(pi, NULL, g, lr, &o, false) == MUSA_OK, MUSA_ERR_TYPE,
              "[sgd_update] parameter is int64");
    CHECK_ERR(musa_sgd_update(p, NULL, NULL, lr, &o, false) == MUSA_OK, MUSA_ERR_VALUE,
              "[sgd_update] input 1 is NULL");
    o.momentum = 0.9;
    CHECK_ERR(musa_sgd_update(p, NULL, g, lr, &o, false) == MUSA_OK, MUSA_ERR_VALUE,
              "[sgd_update] input 1 is NULL");
    o.momentum = -1;
    CHECK_ERR(musa_sgd_update(p, g, g, lr, &o, false) == MUSA_OK, MUSA_ERR_VALUE,
              "[sgd_update] invalid momentum: -1");
    o = (musa_sgd_options){.momentum = 0.9, .dampening = 0.5, .nesterov = true};
    CHECK_ERR(musa_sgd_update(p, g, g, lr, &o, false) == MUSA_OK, MUSA_ERR_VALUE,
              "Nesterov momentum requires a momentum and zero dampening");
    CHECK_ERR(musa_sgd_update(p, NULL, g, lr, NULL, false) == MUSA_OK, MUSA_ERR_VALUE,
              "[sgd_update] options are NULL");
    /* through the generic API: the input count must match the options */
    int op = musa_op_lookup("sgd_update");
    CHECK(op >= 0 && musa_op_num_outputs(op) == -1);
    musa_attrs *at = musa_attrs_new(op);
    CHECK_OK(musa_attrs_set_number(at, "momentum", 0.9));
    CHECK_ERR(musa_attrs_set_number(at, "nesterov_", 1) == MUSA_OK, MUSA_ERR_VALUE,
              "has no attribute 'nesterov_'");
    musa_tensor *ins[3] = {p, g, lr}, *outs[6] = {NULL};
    CHECK_ERR(musa_op_call(op, 3, ins, at, outs) == MUSA_OK, MUSA_ERR_VALUE,
              "[sgd_update] takes 4 inputs with these options");
    /* the functional form: fresh outputs, inputs untouched */
    CHECK_OK(musa_attrs_set_number(at, "momentum", 0));
    double before = 0, after = 0;
    CHECK_OK(musa_op_call(op, 3, ins, at, outs));
    CHECK(outs[0] && outs[0] != p && outs[1] == NULL);
    double *pv = values(p), *ov = values(outs[0]);
    before = pv[0], after = ov[0];
    CHECK_NEAR(before, 1.0, 0);
    CHECK_NEAR(after, 0.9, 1e-6);
    free(pv), free(ov);
    musa_attrs_free(at);
    release_all(9, p, g, g64, lr, g3, lr1, pi, outs[0], NULL);
}

/* ---- Adam / AdamW ---- */

static void adam_case(musa_dtype dt, int ndim, const int64_t *shape, layout lay, double wd,
                      bool amsgrad, bool maximize, bool decoupled) {
    musa_tensor *p = rnd(dt, ndim, shape, -1, 1, lay);
    musa_tensor *m = musa_zeros(ndim, shape, dt), *v = musa_zeros(ndim, shape, dt);
    musa_tensor *vm = musa_zeros(ndim, shape, dt), *step = scalar64(0), *lr = scalar64(0.01);
    int64_t n = musa_tensor_numel(p);
    double *rp = copy_of(p), *rm = copy_of(m), *rv = copy_of(v), *rvm = copy_of(vm);
    const double b1 = 0.8, b2 = 0.95, eps = 1e-6;
    musa_adam_options o = {b1, b2, eps, wd, amsgrad, maximize, decoupled};
    for (int t = 1; t <= 2; t++) {
        musa_tensor *g = rnd(dt, ndim, shape, -1, 1, L_CONTIG);
        double *gv = values(g);
        CHECK_MSG(musa_adam_update(p, m, v, amsgrad ? vm : NULL, step, g, lr, &o) == MUSA_OK, "%s",
                  musa_last_error());
        double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
        for (int64_t i = 0; i < n; i++) {
            double gi = maximize ? -gv[i] : gv[i];
            if (decoupled)
                rp[i] *= 1 - 0.01 * wd;
            else
                gi += wd * rp[i];
            rm[i] = b1 * rm[i] + (1 - b1) * gi;
            rv[i] = b2 * rv[i] + (1 - b2) * gi * gi;
            double vv = rv[i];
            if (amsgrad) vv = rvm[i] = fmax(rvm[i], vv);
            rp[i] -= 0.01 / bc1 * rm[i] / (sqrt(vv) / sqrt(bc2) + eps);
        }
        free(gv);
        musa_tensor_release(g);
        double s = 0;
        CHECK_OK(musa_tensor_item(step, &s));
        CHECK_NEAR(s, t, 0);
        if (!near_all("adam_update param", dt, p, rp) ||
            !near_all("adam_update exp_avg", dt, m, rm) ||
            !near_all("adam_update exp_avg_sq", dt, v, rv))
            break;
        if (amsgrad && !near_all("adam_update max_exp_avg_sq", dt, vm, rvm)) break;
    }
    free(rp), free(rm), free(rv), free(rvm);
    release_all(6, p, m, v, vm, step, lr);
}

TEST(op_adam_update) {
    const int64_t s2[] = {6, 5}, s0[] = {2, 0};
    musa_dtype dts[] = {MUSA_DTYPE_FLOAT32, MUSA_DTYPE_FLOAT64};
    for (int k = 0; k < 2; k++) {
        adam_case(dts[k], 2, s2, L_CONTIG, 0, false, false, false);
        adam_case(dts[k], 2, s2, L_STRIDED, 0.1, true, false, false);
        adam_case(dts[k], 2, s2, L_TRANSPOSED, 0.1, false, true, true);
        adam_case(dts[k], 0, NULL, L_CONTIG, 0, true, false, true);
        adam_case(dts[k], 2, s0, L_CONTIG, 0, false, false, false);
    }
    const int64_t s[] = {3};
    musa_tensor *p = musa_ones(1, s, MUSA_DTYPE_FLOAT32), *m = musa_zeros(1, s, MUSA_DTYPE_FLOAT32);
    musa_tensor *v = musa_zeros(1, s, MUSA_DTYPE_FLOAT32), *lr = scalar64(0.1);
    musa_tensor *st32 = musa_zeros(0, NULL, MUSA_DTYPE_FLOAT32), *st = scalar64(0);
    musa_tensor *m64 = musa_zeros(1, s, MUSA_DTYPE_FLOAT64);
    musa_adam_options o = {0.9, 0.999, 1e-8, 0, false, false, false};
    CHECK_ERR(musa_adam_update(p, m, v, NULL, st32, p, lr, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[adam_update] step (input 3) must be a 0-d float64 tensor, got float32");
    CHECK_ERR(musa_adam_update(p, m64, v, NULL, st, p, lr, &o) == MUSA_OK, MUSA_ERR_TYPE,
              "[adam_update] state tensor (input 1) is float64 but the parameter is float32");
    o.amsgrad = true;
    CHECK_ERR(musa_adam_update(p, m, v, NULL, st, p, lr, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[adam_update] input 3 is NULL");
    o.amsgrad = false, o.beta1 = 1;
    CHECK_ERR(musa_adam_update(p, m, v, NULL, st, p, lr, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[adam_update] invalid beta1: 1");
    o.beta1 = 0.9, o.eps = NAN;
    CHECK_ERR(musa_adam_update(p, m, v, NULL, st, p, lr, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[adam_update] invalid eps: nan");
    double s0v = -1;
    CHECK_OK(musa_tensor_item(st, &s0v));
    CHECK_NEAR(s0v, 0, 0); /* failed calls wrote nothing */
    release_all(7, p, m, v, lr, st32, st, m64);
}

/* ---- RMSprop ---- */

static void rms_case(musa_dtype dt, int ndim, const int64_t *shape, layout lay, double wd,
                     double mom, bool centered, bool maximize) {
    musa_tensor *p = rnd(dt, ndim, shape, -1, 1, lay);
    musa_tensor *sq = musa_zeros(ndim, shape, dt), *buf = musa_zeros(ndim, shape, dt);
    musa_tensor *ga = musa_zeros(ndim, shape, dt), *step = scalar64(0), *lr = scalar64(0.01);
    int64_t n = musa_tensor_numel(p);
    double *rp = copy_of(p), *rs = copy_of(sq), *rb = copy_of(buf), *ra = copy_of(ga);
    const double alpha = 0.9, eps = 1e-6;
    musa_rmsprop_options o = {alpha, eps, wd, mom, centered, maximize};
    for (int t = 1; t <= 2; t++) {
        musa_tensor *g = rnd(dt, ndim, shape, -1, 1, L_CONTIG);
        double *gv = values(g);
        CHECK_MSG(musa_rmsprop_update(p, sq, mom > 0 ? buf : NULL, centered ? ga : NULL, step, g,
                                      lr, &o) == MUSA_OK,
                  "%s", musa_last_error());
        for (int64_t i = 0; i < n; i++) {
            double gi = (maximize ? -gv[i] : gv[i]) + wd * rp[i];
            rs[i] = alpha * rs[i] + (1 - alpha) * gi * gi;
            double avg = rs[i];
            if (centered) {
                ra[i] = alpha * ra[i] + (1 - alpha) * gi;
                avg -= ra[i] * ra[i];
            }
            avg = sqrt(avg) + eps;
            if (mom > 0) {
                rb[i] = mom * rb[i] + gi / avg;
                rp[i] -= 0.01 * rb[i];
            } else {
                rp[i] -= 0.01 * gi / avg;
            }
        }
        free(gv);
        musa_tensor_release(g);
        double s = 0;
        CHECK_OK(musa_tensor_item(step, &s));
        CHECK_NEAR(s, t, 0);
        if (!near_all("rmsprop_update param", dt, p, rp) ||
            !near_all("rmsprop_update square_avg", dt, sq, rs))
            break;
        if (mom > 0 && !near_all("rmsprop_update momentum_buffer", dt, buf, rb)) break;
        if (centered && !near_all("rmsprop_update grad_avg", dt, ga, ra)) break;
    }
    free(rp), free(rs), free(rb), free(ra);
    release_all(6, p, sq, buf, ga, step, lr);
}

TEST(op_rmsprop_update) {
    const int64_t s2[] = {4, 9}, s0[] = {0};
    musa_dtype dts[] = {MUSA_DTYPE_FLOAT32, MUSA_DTYPE_FLOAT64};
    for (int k = 0; k < 2; k++) {
        rms_case(dts[k], 2, s2, L_CONTIG, 0, 0, false, false);
        rms_case(dts[k], 2, s2, L_STRIDED, 0.1, 0.9, false, false);
        rms_case(dts[k], 2, s2, L_TRANSPOSED, 0, 0.5, true, true);
        rms_case(dts[k], 2, s2, L_CONTIG, 0, 0, true, false);
        rms_case(dts[k], 0, NULL, L_CONTIG, 0, 0.9, true, false);
        rms_case(dts[k], 1, s0, L_CONTIG, 0, 0.9, false, false);
    }
    const int64_t s[] = {3};
    musa_tensor *p = musa_ones(1, s, MUSA_DTYPE_FLOAT64),
                *sq = musa_zeros(1, s, MUSA_DTYPE_FLOAT64);
    musa_tensor *st = scalar64(0), *lr = scalar64(0.1);
    musa_rmsprop_options o = {0.99, 1e-8, 0, 0, true, false};
    CHECK_ERR(musa_rmsprop_update(p, sq, NULL, NULL, st, p, lr, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[rmsprop_update] input 2 is NULL");
    o.centered = false, o.alpha = -0.5;
    CHECK_ERR(musa_rmsprop_update(p, sq, NULL, NULL, st, p, lr, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[rmsprop_update] invalid alpha: -0.5");
    release_all(4, p, sq, st, lr);
}

/* ---- Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD ----
 *
 * Each runs eight steps through its public function on a parameter (and
 * zero or given state) against a float64 reference of torch.optim's
 * single-tensor formulas, for float32/float64 and contiguous, strided, 0-d
 * and empty parameters. */

typedef struct {
    double wd, a, b, c; /* weight decay and the optimizer's own settings */
    bool flag, maximize;
} more_opts;

typedef struct {
    double *p, *s0, *s1; /* reference parameter and state */
    double scal[3];      /* reference scalar state (the step counter last) */
} more_ref;

#define RPROP_MIN 0.12 /* the step sizes start in [0.1, 0.3]: clamping runs */

static int more_call(const char *name, musa_tensor *p, musa_tensor *s0, musa_tensor *s1,
                     musa_tensor **sc, musa_tensor *g, musa_tensor *lr, const more_opts *o) {
    if (!strcmp(name, "adagrad")) {
        musa_adagrad_options q = {o->a, o->wd, 1e-10, o->maximize};
        return musa_adagrad_update(p, s0, sc[0], g, lr, &q);
    }
    if (!strcmp(name, "adadelta")) {
        musa_adadelta_options q = {o->a, 1e-6, o->wd, o->maximize};
        return musa_adadelta_update(p, s0, s1, sc[0], g, lr, &q);
    }
    if (!strcmp(name, "adamax")) {
        musa_adamax_options q = {o->a, o->b, 1e-8, o->wd, o->maximize};
        return musa_adamax_update(p, s0, s1, sc[0], g, lr, &q);
    }
    if (!strcmp(name, "nadam")) {
        musa_nadam_options q = {o->a, o->b, 1e-8, o->wd, o->c, o->flag, o->maximize};
        return musa_nadam_update(p, s0, s1, sc[0], sc[1], g, lr, &q);
    }
    if (!strcmp(name, "radam")) {
        musa_radam_options q = {o->a, o->b, 1e-8, o->wd, o->flag, o->maximize};
        return musa_radam_update(p, s0, s1, sc[0], g, lr, &q);
    }
    if (!strcmp(name, "rprop")) { /* a etaplus, b etaminus, c step_size_max; min RPROP_MIN */
        musa_rprop_options q = {o->b, o->a, RPROP_MIN, o->c, o->maximize};
        return musa_rprop_update(p, s0, s1, sc[0], g, lr, &q);
    }
    musa_asgd_options q = {o->a, o->b, o->c, o->wd, o->maximize};
    return musa_asgd_update(p, s0, sc[0], sc[1], sc[2], g, lr, &q);
}

/* One reference step of element i (scalars advance in more_ref_scalars). */
static void more_ref_elem(const char *name, more_ref *r, int64_t i, double g, double lr,
                          const more_opts *o) {
    double p = r->p[i];
    if (o->maximize) g = -g;
    double step = r->scal[!strcmp(name, "nadam") ? 1 : !strcmp(name, "asgd") ? 2 : 0] + 1;
    bool decoupled = o->flag && (!strcmp(name, "nadam") || !strcmp(name, "radam"));
    if (decoupled)
        p *= 1 - lr * o->wd;
    else
        g += o->wd * p;
    if (!strcmp(name, "adagrad")) {
        double clr = lr / (1 + (step - 1) * o->a);
        r->s0[i] += g * g;
        p -= clr * g / (sqrt(r->s0[i]) + 1e-10);
    } else if (!strcmp(name, "adadelta")) {
        double rho = o->a;
        r->s0[i] = rho * r->s0[i] + (1 - rho) * g * g;
        double delta = sqrt(r->s1[i] + 1e-6) / sqrt(r->s0[i] + 1e-6) * g;
        r->s1[i] = rho * r->s1[i] + (1 - rho) * delta * delta;
        p -= lr * delta;
    } else if (!strcmp(name, "adamax")) {
        r->s0[i] = o->a * r->s0[i] + (1 - o->a) * g;
        r->s1[i] = fmax(o->b * r->s1[i], fabs(g) + 1e-8);
        p -= lr / (1 - pow(o->a, step)) * r->s0[i] / r->s1[i];
    } else if (!strcmp(name, "nadam")) {
        double mu = o->a * (1 - 0.5 * pow(0.96, step * o->c));
        double mu_next = o->a * (1 - 0.5 * pow(0.96, (step + 1) * o->c));
        double prod = r->scal[0] * mu;
        r->s0[i] = o->a * r->s0[i] + (1 - o->a) * g;
        r->s1[i] = o->b * r->s1[i] + (1 - o->b) * g * g;
        double denom = sqrt(r->s1[i] / (1 - pow(o->b, step))) + 1e-8;
        p -= lr * (1 - mu) / (1 - prod) * g / denom;
        p -= lr * mu_next / (1 - prod * mu_next) * r->s0[i] / denom;
    } else if (!strcmp(name, "radam")) {
        r->s0[i] = o->a * r->s0[i] + (1 - o->a) * g;
        r->s1[i] = o->b * r->s1[i] + (1 - o->b) * g * g;
        double bc1 = 1 - pow(o->a, step), bc2 = 1 - pow(o->b, step);
        double rho_inf = 2 / (1 - o->b) - 1, rho_t = rho_inf - 2 * step * pow(o->b, step) / bc2;
        double m = r->s0[i] / bc1;
        if (rho_t > 5) {
            double rect =
                sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
            p -= m * lr * sqrt(bc2) / (sqrt(r->s1[i]) + 1e-8) * rect;
        } else {
            p -= m * lr;
        }
    } else if (!strcmp(name, "rprop")) {
        double prod = g * r->s0[i], f = prod > 0 ? o->a : prod < 0 ? o->b : 1;
        double ss = fmin(fmax(r->s1[i] * f, RPROP_MIN), o->c);
        if (f == o->b) g = 0; /* a flipped sign: this step skipped */
        p -= (g > 0 ? 1 : g < 0 ? -1 : 0) * ss;
        r->s0[i] = g, r->s1[i] = ss;
    } else { /* asgd: eta and mu from the state */
        double eta = r->scal[0], mu = r->scal[1];
        p *= 1 - o->a * eta;
        p -= eta * g;
        r->s0[i] = mu != 1 ? r->s0[i] + (p - r->s0[i]) * mu : p;
    }
    r->p[i] = p;
}

static void more_ref_scalars(const char *name, more_ref *r, double lr, const more_opts *o) {
    if (!strcmp(name, "nadam")) {
        double step = r->scal[1] + 1;
        r->scal[0] *= o->a * (1 - 0.5 * pow(0.96, step * o->c));
        r->scal[1] = step;
    } else if (!strcmp(name, "asgd")) {
        double step = r->scal[2] + 1;
        r->scal[0] = lr / pow(1 + o->a * lr * step, o->b);
        r->scal[1] = 1 / fmax(1, step - o->c);
        r->scal[2] = step;
    } else {
        r->scal[0] += 1;
    }
}

static void more_case(const char *name, int n_state, int n_scal, musa_dtype dt, int ndim,
                      const int64_t *shape, layout lay, const more_opts *o) {
    musa_tensor *p = rnd(dt, ndim, shape, -1, 1, lay);
    /* adadelta's and adamax's second state starts positive to exercise it */
    musa_tensor *s0 = musa_zeros(ndim, shape, dt), *s1 = rnd(dt, ndim, shape, 0.1, 0.3, L_CONTIG);
    const double init[3][3] = {{0, 0, 0}, {1, 0, 0}, {0.01, 1, 0}}; /* by n_scal - 1 */
    musa_tensor *sc[3] = {NULL};
    more_ref r = {copy_of(p), copy_of(s0), copy_of(s1), {0, 0, 0}};
    for (int k = 0; k < n_scal; k++) sc[k] = scalar64(r.scal[k] = init[n_scal - 1][k]);
    musa_tensor *lr = scalar64(0.01);
    int64_t n = musa_tensor_numel(p);
    for (int t = 1; t <= 8 && !harness_failed(); t++) {
        musa_tensor *g = rnd(dt, ndim, shape, -1, 1, L_CONTIG);
        double *gv = values(g);
        CHECK_MSG(more_call(name, p, s0, n_state > 1 ? s1 : NULL, sc, g, lr, o) == MUSA_OK,
                  "%s: %s", name, musa_last_error());
        for (int64_t i = 0; i < n; i++) more_ref_elem(name, &r, i, gv[i], 0.01, o);
        more_ref_scalars(name, &r, 0.01, o);
        free(gv);
        musa_tensor_release(g);
        char what[64];
        snprintf(what, sizeof what, "%s_update param", name);
        if (!near_all(what, dt, p, r.p) || !near_all(what, dt, s0, r.s0)) break;
        if (n_state > 1 && !near_all(what, dt, s1, r.s1)) break;
        for (int k = 0; k < n_scal; k++) {
            double v = 0;
            CHECK_OK(musa_tensor_item(sc[k], &v));
            CHECK_MSG(fabs(v - r.scal[k]) <= 1e-12 * fabs(r.scal[k]), "%s scalar %d: %g, want %g",
                      name, k, v, r.scal[k]);
        }
    }
    free(r.p), free(r.s0), free(r.s1);
    release_all(6, p, s0, s1, sc[0], sc[1], sc[2]);
    musa_tensor_release(lr);
}

static void more_all(const char *name, int n_state, int n_scal, const more_opts *plain,
                     const more_opts *other) {
    const int64_t s2[] = {5, 7}, s0[] = {0};
    musa_dtype dts[] = {MUSA_DTYPE_FLOAT32, MUSA_DTYPE_FLOAT64};
    for (int k = 0; k < 2 && !harness_failed(); k++) {
        more_case(name, n_state, n_scal, dts[k], 2, s2, L_CONTIG, plain);
        more_case(name, n_state, n_scal, dts[k], 2, s2, L_STRIDED, other);
        more_case(name, n_state, n_scal, dts[k], 0, NULL, L_CONTIG, other);
        more_case(name, n_state, n_scal, dts[k], 1, s0, L_CONTIG, plain);
    }
}

TEST(op_adagrad_update) {
    more_all("adagrad", 1, 1, &(more_opts){0},
             &(more_opts){.wd = 0.1, .a = 0.05, .maximize = true});
    musa_tensor *p = musa_ones(1, (int64_t[]){3}, MUSA_DTYPE_FLOAT32), *st = scalar64(0);
    musa_tensor *lr = scalar64(0.1), *s = musa_zeros(1, (int64_t[]){2}, MUSA_DTYPE_FLOAT32);
    musa_adagrad_options o = {0, 0, 1e-10, false};
    CHECK_ERR(musa_adagrad_update(p, s, st, p, lr, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[adagrad_update] state tensor (input 1) has shape (2,) but the parameter has (3,)");
    o.lr_decay = -1;
    CHECK_ERR(musa_adagrad_update(p, p, st, p, lr, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[adagrad_update] invalid lr_decay: -1");
    CHECK_ERR(musa_adagrad_update(p, p, st, p, lr, NULL) == MUSA_OK, MUSA_ERR_VALUE,
              "[adagrad_update] options are NULL");
    release_all(4, p, st, lr, s);
}

TEST(op_adadelta_update) {
    more_all("adadelta", 2, 1, &(more_opts){.a = 0.9}, &(more_opts){.wd = 0.1, .a = 0.5});
    musa_tensor *p = musa_ones(1, (int64_t[]){3}, MUSA_DTYPE_FLOAT64), *st = scalar64(0);
    musa_adadelta_options o = {1.5, 1e-6, 0, false};
    CHECK_ERR(musa_adadelta_update(p, p, p, st, p, st, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[adadelta_update] invalid rho: 1.5");
    release_all(2, p, st);
}

TEST(op_adamax_update) {
    more_all("adamax", 2, 1, &(more_opts){.a = 0.9, .b = 0.999},
             &(more_opts){.wd = 0.1, .a = 0.8, .b = 0.9, .maximize = true});
    musa_tensor *p = musa_ones(1, (int64_t[]){3}, MUSA_DTYPE_FLOAT64), *st = scalar64(0);
    musa_adamax_options o = {0.9, 1, 1e-8, 0, false};
    CHECK_ERR(musa_adamax_update(p, p, p, st, p, st, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[adamax_update] invalid beta2: 1");
    release_all(2, p, st);
}

TEST(op_nadam_update) {
    more_all("nadam", 2, 2, &(more_opts){.a = 0.9, .b = 0.999, .c = 4e-3},
             &(more_opts){.wd = 0.1, .a = 0.9, .b = 0.99, .c = 0.1, .flag = true});
    more_all("nadam", 2, 2, &(more_opts){.wd = 0.05, .a = 0.9, .b = 0.999, .c = 4e-3},
             &(more_opts){.a = 0.8, .b = 0.99, .c = 4e-3, .maximize = true});
    musa_tensor *p = musa_ones(1, (int64_t[]){3}, MUSA_DTYPE_FLOAT64), *st = scalar64(0);
    musa_tensor *st32 = musa_zeros(0, NULL, MUSA_DTYPE_FLOAT32);
    musa_nadam_options o = {0.9, 0.999, 1e-8, 0, 4e-3, false, false};
    CHECK_ERR(musa_nadam_update(p, p, p, st32, st, p, st, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[nadam_update] scalar state (input 3) must be a 0-d float64 tensor, got float32");
    o.momentum_decay = -1;
    CHECK_ERR(musa_nadam_update(p, p, p, st, st, p, st, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[nadam_update] invalid momentum_decay: -1");
    release_all(3, p, st, st32);
}

TEST(op_radam_update) {
    /* beta2 0.8: rho_t passes 5 at step 8, so both branches run */
    more_all("radam", 2, 1, &(more_opts){.a = 0.9, .b = 0.8},
             &(more_opts){.wd = 0.1, .a = 0.9, .b = 0.8, .flag = true});
    more_all("radam", 2, 1, &(more_opts){.wd = 0.1, .a = 0.8, .b = 0.999, .maximize = true},
             &(more_opts){.a = 0.9, .b = 0.5});
    musa_tensor *p = musa_ones(1, (int64_t[]){3}, MUSA_DTYPE_FLOAT64), *st = scalar64(0);
    musa_radam_options o = {-0.1, 0.999, 1e-8, 0, false, false};
    CHECK_ERR(musa_radam_update(p, p, p, st, p, st, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[radam_update] invalid beta1: -0.1");
    release_all(2, p, st);
}

TEST(op_asgd_update) {
    more_all("asgd", 1, 3, &(more_opts){.a = 1e-4, .b = 0.75, .c = 1e6},
             &(more_opts){.wd = 0.1, .a = 0.01, .b = 0.5, .c = 1, .maximize = true});
    musa_tensor *p = musa_ones(1, (int64_t[]){3}, MUSA_DTYPE_FLOAT64), *st = scalar64(0);
    musa_asgd_options o = {-1, 0.75, 1e6, 0, false};
    CHECK_ERR(musa_asgd_update(p, p, st, st, st, p, st, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[asgd_update] invalid lambd: -1");
    o.lambd = 1e-4;
    CHECK_ERR(musa_asgd_update(p, p, st, st, NULL, p, st, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[asgd_update] input 4 is NULL");
    release_all(2, p, st);
}

TEST(op_rprop_update) {
    more_all("rprop", 2, 1, &(more_opts){.a = 1.2, .b = 0.5, .c = 50},
             &(more_opts){.a = 1.5, .b = 0.3, .c = 0.25, .maximize = true});
    musa_tensor *p = musa_ones(1, (int64_t[]){3}, MUSA_DTYPE_FLOAT64), *st = scalar64(0);
    musa_rprop_options o = {1.5, 1.2, 1e-6, 50, false};
    CHECK_ERR(musa_rprop_update(p, p, p, st, p, st, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[rprop_update] invalid eta values: etaminus 1.5 and etaplus 1.2");
    o = (musa_rprop_options){0.5, 1.2, 1, 0.5, false};
    CHECK_ERR(musa_rprop_update(p, p, p, st, p, st, &o) == MUSA_OK, MUSA_ERR_VALUE,
              "[rprop_update] invalid step_size_max: 0.5");
    CHECK_ERR(musa_rprop_update(p, p, p, st, p, st, NULL) == MUSA_OK, MUSA_ERR_VALUE,
              "[rprop_update] options are NULL");
    release_all(2, p, st);
}
