/*
 * norm.c - op tests for batch, layer and group normalisation against
 * float64 references computed here with plain loops: forward (training and
 * eval), the fused backward ops, the *_apply ops remat recomputes with, and
 * malformed operands through the generic API.
 */
#include "../util.h"

/* ---- normalisation ---- */

/* reference: normalise groups of `m` consecutive-by-index elements chosen by key(i) */
static void norm_ref(const double *x, int64_t n, int64_t nstat,
                     int64_t (*key)(int64_t, const int64_t *), const int64_t *geo, double eps,
                     double *mean, double *inv) {
    double *s = calloc((size_t)nstat, sizeof(double)), *c = calloc((size_t)nstat, sizeof(double));
    for (int64_t i = 0; i < n; i++) s[key(i, geo)] += x[i], c[key(i, geo)] += 1;
    for (int64_t k = 0; k < nstat; k++) mean[k] = s[k] / c[k], s[k] = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = x[i] - mean[key(i, geo)];
        s[key(i, geo)] += d * d;
    }
    for (int64_t k = 0; k < nstat; k++) inv[k] = 1 / sqrt(s[k] / c[k] + eps);
    free(s), free(c);
}

static int64_t key_bn(int64_t i, const int64_t *g) {
    return (i / g[2]) % g[1];
} /* channel */
static int64_t key_ln(int64_t i, const int64_t *g) {
    return i / g[0];
} /* row of D */
static int64_t key_gn(int64_t i, const int64_t *g) {
    return i / (g[1] / g[3] * g[2]);
} /* (n, group) */

typedef struct {
    const char *name;
    int64_t (*key)(int64_t, const int64_t *);
} norm_kind;

/* y and its (mean, invstd) outputs against the reference */
static bool check_norm_forward(const char *op, musa_tensor *x, musa_tensor *w, musa_tensor *b,
                               const void *attrs_v, int64_t (*key)(int64_t, const int64_t *),
                               const int64_t *geo, int64_t nstat,
                               int64_t (*wkey)(int64_t, const int64_t *)) {
    (void)attrs_v;
    int id = musa_op_lookup(op);
    musa_tensor *in[3] = {x, w, b}, *out[3] = {NULL, NULL, NULL};
    musa_attrs *a = musa_attrs_new(id);
    musa_attrs_set_float(a, "eps", 1e-5);
    musa_attrs_set_int(a, "groups", geo[3]);
    musa_attrs_set_int(a, "ndims", geo[4]);
    int rc = musa_op_call(id, 3, in, a, out);
    musa_attrs_free(a);
    if (rc) {
        harness_fail(__FILE__, __LINE__, "%s: %s", op, musa_last_error());
        return false;
    }
    int64_t n = musa_tensor_numel(x);
    double *xv = values(x), *wv = values(w), *bv = values(b),
           *mean = malloc(sizeof(double) * (size_t)nstat),
           *inv = malloc(sizeof(double) * (size_t)nstat),
           *want = malloc(sizeof(double) * (size_t)n);
    norm_ref(xv, n, nstat, key, geo, 1e-5, mean, inv);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = key(i, geo), c = wkey(i, geo);
        want[i] = (xv[i] - mean[k]) * inv[k] * wv[c] + bv[c];
    }
    bool ok = near(op, out[0], want, n, 4) && near("mean", out[1], mean, nstat, 4) &&
              near("invstd", out[2], inv, nstat, 8);
    free(xv), free(wv), free(bv), free(mean), free(inv), free(want);
    release_all(3, out[0], out[1], out[2]);
    return ok;
}

static int64_t wkey_bn(int64_t i, const int64_t *g) {
    return (i / g[2]) % g[1];
}
static int64_t wkey_ln(int64_t i, const int64_t *g) {
    return i % g[0];
}

TEST(op_batch_norm) {
    for (int di = 0; di < 4; di++) {
        musa_dtype dt = FLOAT_DTYPES[di];
        musa_tensor *x = rnd(dt, 4, S(4, 3, 5, 2), -2, 3, L_TRANSPOSED);
        musa_tensor *w = rnd(dt, 1, S(3), 0.5, 2, L_CONTIG), *b = rnd(dt, 1, S(3), -1, 1, L_CONTIG);
        CHECK(
            check_norm_forward("batch_norm", x, w, b, NULL, key_bn, S(0, 3, 10, 1, 1), 3, wkey_bn));
        release_all(3, x, w, b);
    }
    musa_tensor *one = musa_zeros(2, S(1, 3), MUSA_DTYPE_FLOAT32),
                *w = musa_ones(1, S(3), MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_batch_norm(one, NULL, NULL, w, NULL, true, 0.1, 1e-5)), MUSA_ERR_VALUE,
              "more than 1 value per channel");
    musa_tensor *w4 = musa_ones(1, S(4), MUSA_DTYPE_FLOAT32),
                *x = musa_zeros(2, S(2, 3), MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_batch_norm(x, NULL, NULL, w4, NULL, true, 0.1, 1e-5)), MUSA_ERR_VALUE,
              "[batch_norm] weight has shape (4,), expected (3,)");
    release_all(4, one, w, w4, x);
}

TEST(batch_norm_running_stats_and_eval) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 3, S(5, 2, 3), -2, 3, L_CONTIG);
    musa_tensor *rm = musa_zeros(1, S(2), MUSA_DTYPE_FLOAT64),
                *rv = musa_ones(1, S(2), MUSA_DTYPE_FLOAT64);
    musa_tensor *y = musa_batch_norm(x, rm, rv, NULL, NULL, true, 0.1, 1e-5);
    CHECK(y);
    double *xv = values(x), *rmv = values(rm), *rvv = values(rv);
    for (int c = 0; c < 2; c++) {
        double s = 0, ss = 0;
        for (int n = 0; n < 5; n++)
            for (int k = 0; k < 3; k++) s += xv[(n * 2 + c) * 3 + k];
        double mean = s / 15;
        for (int n = 0; n < 5; n++)
            for (int k = 0; k < 3; k++) ss += pow(xv[(n * 2 + c) * 3 + k] - mean, 2);
        CHECK_NEAR(rmv[c], 0.1 * mean, 1e-12);
        CHECK_NEAR(rvv[c], 0.9 + 0.1 * ss / 14, 1e-9); /* unbiased */
    }
    /* eval uses the running statistics */
    musa_tensor *e = musa_batch_norm(x, rm, rv, NULL, NULL, false, 0.1, 1e-5);
    double *ev = values(e);
    CHECK_NEAR(ev[4], (xv[4] - rmv[1]) / sqrt(rvv[1] + 1e-5), 1e-9);
    free(xv), free(rmv), free(rvv), free(ev);
    release_all(5, x, rm, rv, y, e);
}

TEST(op_layer_norm) {
    for (int di = 0; di < 4; di++) {
        musa_dtype dt = FLOAT_DTYPES[di];
        musa_tensor *x = rnd(dt, 3, S(3, 4, 5), -2, 3, L_STRIDED);
        musa_tensor *w = rnd(dt, 2, S(4, 5), 0.5, 2, L_CONTIG),
                    *b = rnd(dt, 2, S(4, 5), -1, 1, L_CONTIG);
        CHECK(
            check_norm_forward("layer_norm", x, w, b, NULL, key_ln, S(20, 0, 0, 1, 2), 3, wkey_ln));
        release_all(3, x, w, b);
    }
}

TEST(op_group_norm) {
    for (int di = 0; di < 4; di++) {
        musa_dtype dt = FLOAT_DTYPES[di];
        musa_tensor *x = rnd(dt, 3, S(2, 6, 4), -2, 3, L_TRANSPOSED);
        musa_tensor *w = rnd(dt, 1, S(6), 0.5, 2, L_CONTIG), *b = rnd(dt, 1, S(6), -1, 1, L_CONTIG);
        CHECK(
            check_norm_forward("group_norm", x, w, b, NULL, key_gn, S(0, 6, 4, 3, 1), 6, wkey_bn));
        release_all(3, x, w, b);
    }
    musa_tensor *x = musa_zeros(3, S(2, 6, 4), MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_group_norm(x, 4, NULL, NULL, 1e-5)), MUSA_ERR_VALUE,
              "6 channels are not divisible into 4 groups");
    musa_tensor_release(x);
}

/* The fused backward ops agree with autograd through the compositions
 * (which run when a higher-order graph is recorded). */
static void norm_backward_matches(const char *fwd) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 3, S(4, 6, 3), -2, 3, L_CONTIG);
    musa_tensor *w = rnd(MUSA_DTYPE_FLOAT64, strcmp(fwd, "layer_norm") ? 1 : 2,
                         strcmp(fwd, "layer_norm") ? S(6) : S(6, 3), 0.5, 2, L_CONTIG);
    musa_tensor *b =
        rnd(MUSA_DTYPE_FLOAT64, musa_tensor_ndim(w), musa_tensor_shape(w), -1, 1, L_CONTIG);
    musa_tensor *g = rnd(MUSA_DTYPE_FLOAT64, 3, S(4, 6, 3), -1, 1, L_CONTIG);
    musa_tensor *ins[3] = {x, w, b};
    for (int i = 0; i < 3; i++) musa_tensor_set_requires_grad(ins[i], true);
    musa_tensor *res[2][3];
    for (int create = 0; create < 2; create++) {
        musa_tensor *y = !strcmp(fwd, "batch_norm")
                             ? musa_batch_norm(x, NULL, NULL, w, b, true, 0.1, 1e-5)
                         : !strcmp(fwd, "layer_norm") ? musa_layer_norm(x, 2, w, b, 1e-5)
                                                      : musa_group_norm(x, 3, w, b, 1e-5);
        CHECK(y);
        CHECK_OK(musa_grad(1, &y, &g, 3, ins, false, create, false, res[create]));
        musa_tensor_release(y);
    }
    for (int i = 0; i < 3; i++) {
        double *a = values(res[0][i]), *c = values(res[1][i]);
        CHECK_CLOSE(fwd, MUSA_DTYPE_FLOAT64, a, c, musa_tensor_numel(res[0][i]));
        free(a), free(c);
        release_all(2, res[0][i], res[1][i]);
    }
    release_all(4, x, w, b, g);
}

TEST(op_batch_norm_backward) {
    norm_backward_matches("batch_norm");
}

/* batch_norm_apply from the forward's statistics writes the forward's y bit
 * for bit: float32, float64, and bfloat16 input with float32 weights */
TEST(op_batch_norm_apply) {
    static const musa_dtype xd[3] = {MUSA_DTYPE_FLOAT32, MUSA_DTYPE_FLOAT64, MUSA_DTYPE_BFLOAT16};
    static const musa_dtype wd[3] = {MUSA_DTYPE_FLOAT32, MUSA_DTYPE_FLOAT64, MUSA_DTYPE_FLOAT32};
    int fwd = musa_op_lookup("batch_norm"), app = musa_op_lookup("batch_norm_apply");
    for (int k = 0; k < 3; k++) {
        musa_tensor *x = rnd(xd[k], 4, S(3, 4, 5, 6), -3, 5, L_CONTIG);
        musa_tensor *w = rnd(wd[k], 1, S(4), 0.5, 2, L_CONTIG),
                    *b = rnd(wd[k], 1, S(4), -1, 1, L_CONTIG);
        musa_attrs *a = musa_attrs_new(fwd);
        musa_tensor *in[3] = {x, w, b}, *out[3] = {NULL, NULL, NULL}, *y2[1] = {NULL};
        CHECK_OK(musa_op_call(fwd, 3, in, a, out));
        CHECK(musa_tensor_dtype(out[0]) == xd[k] && musa_tensor_dtype(out[1]) == wd[k]);
        musa_tensor *ain[5] = {x, out[1], out[2], w, b};
        musa_attrs *aa = musa_attrs_new(app);
        CHECK_OK(musa_op_call(app, 5, ain, aa, y2));
        musa_attrs_free(aa);
        double *yv = values(out[0]), *av = values(y2[0]);
        CHECK(musa_tensor_dtype(y2[0]) == xd[k] && !memcmp(yv, av, sizeof(double) * 360));
        free(yv), free(av);
        musa_attrs_free(a);
        release_all(7, x, w, b, out[0], out[1], out[2], y2[0]);
    }
    musa_tensor *x = musa_zeros(3, S(2, 3, 4), MUSA_DTYPE_FLOAT32),
                *s = musa_zeros(1, S(4), MUSA_DTYPE_FLOAT32);
    musa_tensor *in[5] = {x, s, s, s, s}, *y[1] = {NULL};
    CHECK_ERR(musa_op_call(app, 5, in, NULL, y) == MUSA_OK, MUSA_ERR_VALUE,
              "[batch_norm_apply] mean");
    release_all(2, x, s);
}
/* layer_norm_apply from the forward's statistics writes the forward's y
 * bit for bit (float32, float64, bfloat16) */
TEST(op_layer_norm_apply) {
    static const musa_dtype dts[3] = {MUSA_DTYPE_FLOAT32, MUSA_DTYPE_FLOAT64, MUSA_DTYPE_BFLOAT16};
    int fwd = musa_op_lookup("layer_norm"), app = musa_op_lookup("layer_norm_apply");
    for (int k = 0; k < 3; k++) {
        musa_tensor *x = rnd(dts[k], 3, S(3, 4, 10), -3, 5, L_CONTIG);
        musa_tensor *w = rnd(dts[k], 1, S(10), 0.5, 2, L_CONTIG),
                    *b = rnd(dts[k], 1, S(10), -1, 1, L_CONTIG);
        musa_attrs *a = musa_attrs_new(fwd), *aa = musa_attrs_new(app);
        CHECK_OK(musa_attrs_set_int(a, "ndims", 1));
        CHECK_OK(musa_attrs_set_int(aa, "ndims", 1));
        musa_tensor *in[3] = {x, w, b}, *out[3] = {NULL, NULL, NULL}, *y2[1] = {NULL};
        CHECK_OK(musa_op_call(fwd, 3, in, a, out));
        musa_tensor *ain[5] = {x, out[1], out[2], w, b};
        CHECK_OK(musa_op_call(app, 5, ain, aa, y2));
        double *yv = values(out[0]), *av = values(y2[0]);
        CHECK(musa_tensor_dtype(y2[0]) == dts[k] && !memcmp(yv, av, sizeof(double) * 120));
        free(yv), free(av);
        musa_attrs_free(a), musa_attrs_free(aa);
        release_all(7, x, w, b, out[0], out[1], out[2], y2[0]);
    }
    musa_tensor *x = musa_zeros(2, S(2, 3), MUSA_DTYPE_FLOAT32),
                *s = musa_zeros(1, S(3), MUSA_DTYPE_FLOAT32);
    musa_tensor *in[5] = {x, s, s, s, s}, *y[1] = {NULL};
    CHECK_ERR(musa_op_call(app, 5, in, NULL, y) == MUSA_OK, MUSA_ERR_VALUE,
              "[layer_norm_apply] mean");
    release_all(2, x, s);
}

TEST(op_layer_norm_backward) {
    norm_backward_matches("layer_norm");
}
TEST(op_group_norm_backward) {
    norm_backward_matches("group_norm");
}

/* The fused norm backwards through the generic API: every operand's shape
 * is checked against x before a kernel indexes it (they read and wrote out
 * of bounds). */
TEST(norm_backward_rejects_malformed_operands) {
    const int64_t xs[] = {2, 4, 3}, c4[] = {4}, c5[] = {5}, ng[] = {2, 2}, rows[] = {2, 4};
    musa_tensor *x = musa_ones(3, xs, MUSA_DTYPE_FLOAT32),
                *gy = musa_ones(3, xs, MUSA_DTYPE_FLOAT32);
    musa_tensor *w4 = musa_ones(1, c4, MUSA_DTYPE_FLOAT32),
                *w5 = musa_ones(1, c5, MUSA_DTYPE_FLOAT32);
    musa_tensor *s4 = musa_ones(1, c4, MUSA_DTYPE_FLOAT32),
                *s5 = musa_ones(1, c5, MUSA_DTYPE_FLOAT32);
    musa_tensor *sg = musa_ones(2, ng, MUSA_DTYPE_FLOAT32),
                *sr = musa_ones(2, rows, MUSA_DTYPE_FLOAT32);
    musa_tensor *w3 = musa_ones(1, (int64_t[]){3}, MUSA_DTYPE_FLOAT32),
                *x1 = musa_ones(1, c4, MUSA_DTYPE_FLOAT32);
    musa_tensor *out[3] = {NULL};
    int bn = musa_op_lookup("batch_norm_backward"), gn = musa_op_lookup("group_norm_backward");
    int ln = musa_op_lookup("layer_norm_backward");
    musa_attrs *a = musa_attrs_new(bn);
#define CALL(op, ...) musa_op_call(op, 5, (musa_tensor *[]){__VA_ARGS__}, a, out)
    CHECK_ERR(CALL(bn, gy, x, w5, s4, s4) == MUSA_OK, MUSA_ERR_VALUE,
              "[batch_norm_backward] weight has shape (5,), expected (4,)");
    CHECK_ERR(CALL(bn, gy, x, w4, s5, s4) == MUSA_OK, MUSA_ERR_VALUE,
              "[batch_norm_backward] mean has shape (5,)");
    CHECK_ERR(CALL(bn, gy, x, w4, s4, s5) == MUSA_OK, MUSA_ERR_VALUE, "invstd has shape (5,)");
    CHECK_ERR(CALL(bn, x1, x1, w4, s4, s4) == MUSA_OK, MUSA_ERR_VALUE, "input must be (N, C, ...)");
    CHECK_ERR(CALL(bn, w4, x, w4, s4, s4) == MUSA_OK, MUSA_ERR_VALUE, "gradient has shape (4,)");
    CHECK_OK(CALL(bn, gy, x, w4, s4, s4));
    release_all(3, out[0], out[1], out[2]);
    out[0] = out[1] = out[2] = NULL;
    musa_attrs_free(a);
    a = musa_attrs_new(gn);
    CHECK_OK(musa_attrs_set_int(a, "groups", 3));
    CHECK_ERR(CALL(gn, gy, x, w4, sg, sg) == MUSA_OK, MUSA_ERR_VALUE,
              "4 channels are not divisible into 3 groups");
    CHECK_OK(musa_attrs_set_int(a, "groups", 2));
    CHECK_ERR(CALL(gn, gy, x, w4, s4, sg) == MUSA_OK, MUSA_ERR_VALUE,
              "[group_norm_backward] mean has shape (4,), expected (2, 2)");
    CHECK_OK(CALL(gn, gy, x, w4, sg, sg));
    release_all(3, out[0], out[1], out[2]);
    out[0] = out[1] = out[2] = NULL;
    musa_attrs_free(a);
    a = musa_attrs_new(ln);
    CHECK_OK(musa_attrs_set_int(a, "ndims", 4));
    CHECK_ERR(CALL(ln, gy, x, w3, sr, sr) == MUSA_OK, MUSA_ERR_VALUE,
              "cannot normalise the last 4 dims");
    CHECK_OK(musa_attrs_set_int(a, "ndims", 1));
    CHECK_ERR(CALL(ln, gy, x, w4, sr, sr) == MUSA_OK, MUSA_ERR_VALUE,
              "[layer_norm_backward] weight has shape (4,), expected (3,)");
    CHECK_ERR(CALL(ln, gy, x, w3, s4, sr) == MUSA_OK, MUSA_ERR_VALUE,
              "mean has shape (4,), expected (2, 4)");
    CHECK_OK(CALL(ln, gy, x, w3, sr, sr));
    release_all(3, out[0], out[1], out[2]);
#undef CALL
    musa_attrs_free(a);
    release_all(10, x, gy, w4, w5, s4, s5, sg, sr, w3, x1);
}
