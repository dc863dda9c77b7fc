/*
 * optim.c - the optimizer update rows (sgd_update, adam_update,
 * rmsprop_update): two steps against float64 references written here from
 * PyTorch's documented formulas, for float32/float64, contiguous and
 * strided parameters, 0-d and empty parameters, every optional state; the
 * functional form (new outputs, inputs untouched); and the errors.
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
