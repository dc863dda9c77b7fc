/*
 * nn.c - op tests for the neural network families against float64
 * references computed here with plain loops: pooling, softmax,
 * cross-entropy, linear, gelu; known answers; errors. Convolution:
 * conv.c; normalisation: norm.c.
 */
#include "../util.h"

/* ---- pooling ---- */

static void pool_ref(bool is_max, const double *x, int64_t P, int64_t H, int64_t W, int64_t kh,
                     int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t Ho,
                     int64_t Wo, bool cip, double *y, double *idx) {
    for (int64_t p = 0; p < P; p++)
        for (int64_t oy = 0; oy < Ho; oy++)
            for (int64_t ox = 0; ox < Wo; ox++) {
                double best = -INFINITY, sum = 0;
                int64_t bi = -1, cnt = 0;
                int64_t hs = oy * sh - ph, ws = ox * sw - pw;
                int64_t he = hs + kh < H + ph ? hs + kh : H + ph,
                        we = ws + kw < W + pw ? ws + kw : W + pw;
                int64_t pool_size = (he - hs) * (we - ws);
                for (int64_t iy = hs; iy < hs + kh; iy++)
                    for (int64_t ix = ws; ix < ws + kw; ix++) {
                        if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                        double v = x[p * H * W + iy * W + ix];
                        if (v > best) best = v, bi = iy * W + ix;
                        sum += v, cnt++;
                    }
                int64_t o = p * Ho * Wo + oy * Wo + ox;
                y[o] = is_max ? best : sum / (double)(cip ? pool_size : cnt);
                if (idx) idx[o] = (double)bi;
            }
}

TEST(op_max_pool2d) {
    for (int di = 0; di < 4; di++) {
        musa_tensor *x = rnd(FLOAT_DTYPES[di], 4, S(2, 3, 7, 8), -5, 5, L_TRANSPOSED);
        for (int ceil_mode = 0; ceil_mode < 2; ceil_mode++) {
            musa_tensor *y = NULL, *ix = NULL;
            CHECK_OK(musa_max_pool2d(x, S(3, 2), S(2, 2), S(1, 0), NULL, ceil_mode, &y, &ix));
            int64_t Ho = musa_tensor_shape(y)[2], Wo = musa_tensor_shape(y)[3];
            CHECK(Ho == (ceil_mode ? 4 : 4) && Wo == (ceil_mode ? 4 : 4));
            double *xv = values(x), want[6 * 16], wi[6 * 16];
            pool_ref(true, xv, 6, 7, 8, 3, 2, 2, 2, 1, 0, Ho, Wo, true, want, wi);
            CHECK(near("max_pool2d", y, want, 6 * Ho * Wo, 1));
            double *iv = values(ix);
            for (int i = 0; i < 6 * Ho * Wo; i++) CHECK(iv[i] == wi[i]);
            free(xv), free(iv);
            release_all(2, y, ix);
        }
        musa_tensor_release(x);
    }
    /* ceil_mode adds a last, partial window */
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 3, S(1, 5, 5), -1, 1, L_CONTIG), *y = NULL;
    CHECK_OK(musa_max_pool2d(x, S(2, 2), NULL, NULL, NULL, true, &y, NULL));
    CHECK_SHAPE(y, 3, 1, 3, 3);
    musa_tensor *none = NULL;
    CHECK_ERR(musa_max_pool2d(x, S(2, 2), NULL, S(2, 0), NULL, false, &none, NULL) == MUSA_OK,
              MUSA_ERR_VALUE, "padding 2 should be at most half the kernel size 2");
    CHECK(none == NULL);
    release_all(2, x, y);
}

TEST(op_avg_pool2d) {
    for (int cip = 0; cip < 2; cip++)
        for (int di = 0; di < 2; di++) {
            musa_tensor *x = rnd(FLOAT_DTYPES[di], 4, S(2, 2, 6, 7), -5, 5, L_CONTIG);
            musa_tensor *y = musa_avg_pool2d(x, S(3, 3), S(2, 2), S(1, 1), false, cip);
            CHECK(y);
            int64_t Ho = musa_tensor_shape(y)[2], Wo = musa_tensor_shape(y)[3];
            double *xv = values(x), want[4 * 16];
            pool_ref(false, xv, 4, 6, 7, 3, 3, 2, 2, 1, 1, Ho, Wo, cip, want, NULL);
            CHECK(near("avg_pool2d", y, want, 4 * Ho * Wo, 2));
            free(xv);
            release_all(2, x, y);
        }
}

static musa_tensor *pool_bwd(const char *op, musa_tensor *g, const int64_t *kernel,
                             const int64_t *in_shape, int nd) {
    int id = musa_op_lookup(op);
    musa_attrs *a = musa_attrs_new(id);
    musa_attrs_set_ints(a, "kernel", 2, kernel);
    musa_attrs_set_ints(a, "shape", nd, in_shape);
    musa_tensor *out[1] = {NULL};
    musa_op_call(id, 1, &g, a, out);
    musa_attrs_free(a);
    return out[0];
}

TEST(op_avg_pool2d_backward) {
    /* adjoint identity: <avg_pool(x), g> = <x, avg_pool_backward(g)> */
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 4, S(2, 3, 6, 6), -1, 1, L_CONTIG);
    musa_tensor *y = musa_avg_pool2d(x, S(2, 3), NULL, NULL, false, true);
    musa_tensor *g = rnd(MUSA_DTYPE_FLOAT64, 4, musa_tensor_shape(y), -1, 1, L_CONTIG);
    musa_tensor *gx = pool_bwd("avg_pool2d_backward", g, S(2, 3), S(2, 3, 6, 6), 4);
    CHECK(gx && same_shape(gx, 4, S(2, 3, 6, 6)));
    CHECK_NEAR(dot(y, g), dot(x, gx), 1e-12);
    release_all(4, x, y, g, gx);
}

TEST(op_adaptive_avg_pool2d) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 4, S(2, 3, 7, 5), -1, 1, L_TRANSPOSED);
    musa_tensor *y = musa_adaptive_avg_pool2d(x, 3, 2);
    CHECK_SHAPE(y, 4, 2, 3, 3, 2);
    double *xv = values(x), want[36];
    for (int p = 0; p < 6; p++)
        for (int oy = 0; oy < 3; oy++)
            for (int ox = 0; ox < 2; ox++) {
                int h0 = oy * 7 / 3, h1 = ((oy + 1) * 7 + 2) / 3, w0 = ox * 5 / 2,
                    w1 = ((ox + 1) * 5 + 1) / 2;
                double s = 0;
                for (int iy = h0; iy < h1; iy++)
                    for (int ix = w0; ix < w1; ix++) s += xv[p * 35 + iy * 5 + ix];
                want[p * 6 + oy * 2 + ox] = s / ((h1 - h0) * (w1 - w0));
            }
    CHECK(near("adaptive_avg_pool2d", y, want, 36, 2));
    musa_tensor *g1 = musa_adaptive_avg_pool2d(x, 1, 1); /* global pooling = mean */
    musa_tensor *m = musa_mean(x, 2, S(2, 3), true);
    double *a = values(g1);
    CHECK(near("global pool", m, a, 6, 2));
    free(xv), free(a);
    release_all(4, x, y, g1, m);
}

TEST(op_adaptive_avg_pool2d_backward) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 3, S(2, 7, 5), -1, 1, L_CONTIG);
    musa_tensor *y = musa_adaptive_avg_pool2d(x, 3, 4);
    musa_tensor *g = rnd(MUSA_DTYPE_FLOAT64, 3, S(2, 3, 4), -1, 1, L_CONTIG);
    musa_tensor *gx = pool_bwd("adaptive_avg_pool2d_backward", g, S(3, 4), S(2, 7, 5), 3);
    CHECK(gx);
    CHECK_NEAR(dot(y, g), dot(x, gx), 1e-12);
    release_all(4, x, y, g, gx);
}

/* Regression (fuzz_op_call, adaptive-pool-backward-gradient-shape): the
 * pool backward rows took a gradient of any shape and the kernels indexed
 * it by the forward output's shape (heap overflow). */
TEST(pool_backward_checks_the_gradient_shape) {
    musa_tensor *g = musa_ones(3, S(4, 7, 3), MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(pool_bwd("adaptive_avg_pool2d_backward", g, S(4, 4), S(5, 5, 3), 3)),
              MUSA_ERR_VALUE,
              "[adaptive_avg_pool2d_backward] gradient has shape (4, 7, 3), but pooling (5, 5, 3) "
              "gives (5, 4, 4)");
    CHECK_ERR(FAILS(pool_bwd("avg_pool2d_backward", g, S(2, 2), S(4, 14, 8), 3)), MUSA_ERR_VALUE,
              "[avg_pool2d_backward] gradient has shape (4, 7, 3), but pooling (4, 14, 8) gives "
              "(4, 7, 4)");
    musa_tensor *ok = pool_bwd("avg_pool2d_backward", g, S(2, 2), S(4, 14, 6), 3);
    CHECK(ok && same_shape(ok, 3, S(4, 14, 6)));
    release_all(2, g, ok);
}

/* resample: rows of x along dim picked by index (m, K), times weight,
 * summed over the K taps left to right with each product rounded */
TEST(op_resample) {
    for (int lay = 0; lay < 2; lay++) { /* a transposed view, and contiguous */
        musa_tensor *x =
            rnd(MUSA_DTYPE_FLOAT32, 3, S(2, 5, 3), -4, 4, lay ? L_CONTIG : L_TRANSPOSED);
        musa_tensor *i =
            from_list(MUSA_DTYPE_INT32, 2, S(4, 2), (double[]){0, 1, 4, 4, 2, 0, 3, 3});
        musa_tensor *w = from_list(MUSA_DTYPE_FLOAT64, 2, S(4, 2),
                                   (double[]){0.25, 0.75, 1, 0, -0.5, 1.5, 0.1, 0.2});
        musa_tensor *y = musa_resample(x, 1, i, w);
        CHECK_SHAPE(y, 3, 2, 4, 3);
        CHECK(y && musa_tensor_dtype(y) == MUSA_DTYPE_FLOAT32);
        double *xv = values(x), *yv = values(y), *iv = values(i), *wv = values(w), want[24];
        for (int o = 0; o < 2; o++)
            for (int j = 0; j < 4; j++)
                for (int c = 0; c < 3; c++) {
                    float a = (float)xv[o * 15 + (int)iv[2 * j] * 3 + c] * (float)wv[2 * j];
                    float b = (float)xv[o * 15 + (int)iv[2 * j + 1] * 3 + c] * (float)wv[2 * j + 1];
                    want[o * 12 + j * 3 + c] = a + b;
                }
        for (int k = 0; xv && yv && k < 24; k++) CHECK(yv[k] == want[k]); /* bit for bit */
        free(xv), free(yv), free(iv), free(wv);
        release_all(4, x, i, w, y);
    }
    /* the last dim, three taps, bfloat16 in and out (computed in float32) */
    musa_tensor *x = rnd(MUSA_DTYPE_BFLOAT16, 2, S(3, 4), -4, 4, L_CONTIG);
    musa_tensor *i = from_list(MUSA_DTYPE_INT64, 2, S(2, 3), (double[]){0, 1, 2, 3, 3, 0});
    musa_tensor *w =
        from_list(MUSA_DTYPE_FLOAT32, 2, S(2, 3), (double[]){0.5, 0.25, 0.25, 1, 2, -1});
    musa_tensor *y = musa_resample(x, -1, i, w);
    CHECK_SHAPE(y, 2, 3, 2);
    CHECK(y && musa_tensor_dtype(y) == MUSA_DTYPE_BFLOAT16);
    double *xv = values(x), want[6];
    for (int r = 0; xv && r < 3; r++) {
        want[r * 2] = 0.5 * xv[r * 4] + 0.25 * xv[r * 4 + 1] + 0.25 * xv[r * 4 + 2];
        want[r * 2 + 1] = xv[r * 4 + 3] + 2 * xv[r * 4 + 3] - xv[r * 4];
    }
    CHECK(near("resample bfloat16", y, want, 6, 1));
    free(xv);
    /* empty: no outputs, and an input with no rows around the dim */
    musa_tensor *i0 = musa_zeros(2, S(0, 2), MUSA_DTYPE_INT64),
                *w0 = musa_zeros(2, S(0, 2), MUSA_DTYPE_FLOAT32);
    musa_tensor *y0 = musa_resample(x, 1, i0, w0);
    CHECK_SHAPE(y0, 2, 3, 0);
    musa_tensor *xe = musa_zeros(2, S(0, 4), MUSA_DTYPE_FLOAT32);
    musa_tensor *ye = musa_resample(xe, 1, i, w);
    CHECK_SHAPE(ye, 2, 0, 2);
    /* bad input: the op and the values named, nothing written */
    musa_tensor *bad = from_list(MUSA_DTYPE_INT64, 2, S(2, 3), (double[]){0, 1, 2, 3, 4, 0});
    CHECK_ERR(FAILS(musa_resample(x, 1, bad, w)), MUSA_ERR_INDEX,
              "[resample] index 4 is out of bounds for a dim of size 4");
    musa_tensor *neg = from_list(MUSA_DTYPE_INT64, 2, S(1, 1), (double[]){-1});
    musa_tensor *w1 = musa_ones(2, S(1, 1), MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_resample(x, 1, neg, w1)), MUSA_ERR_INDEX, "index -1 is out of bounds");
    CHECK_ERR(FAILS(musa_resample(x, 1, i, w1)), MUSA_ERR_VALUE,
              "[resample] index and weight must both be (outputs, taps) with at least one tap, "
              "got (2, 3) and (1, 1)");
    musa_tensor *ik = musa_zeros(2, S(2, 0), MUSA_DTYPE_INT64),
                *wk = musa_zeros(2, S(2, 0), MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_resample(x, 1, ik, wk)), MUSA_ERR_VALUE, "at least one tap");
    musa_tensor *xi = musa_zeros(2, S(3, 4), MUSA_DTYPE_INT64);
    CHECK_ERR(FAILS(musa_resample(xi, 1, i, w)), MUSA_ERR_TYPE,
              "[resample] input and weight must be floating point, got int64 and float32");
    CHECK_ERR(FAILS(musa_resample(x, 1, w, w)), MUSA_ERR_TYPE, "index must be an integer tensor");
    musa_tensor *s = musa_number(2.0);
    CHECK_ERR(FAILS(musa_resample(s, 0, i, w)), MUSA_ERR_VALUE, "no dim to resample");
    CHECK_ERR(FAILS(musa_resample(x, 2, i, w)), MUSA_ERR_INDEX, "dim 2");
    release_all(15, x, i, w, y, i0, w0, y0, xe, ye, bad, neg, w1, ik, wk, xi);
    musa_tensor_release(s);
}

/* resample_backward is resample's adjoint: <resample(x), g> = <x, back(g)>,
 * with repeated indices adding up */
TEST(op_resample_backward) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 3, S(2, 5, 3), -1, 1, L_CONTIG);
    musa_tensor *i = from_list(MUSA_DTYPE_INT64, 2, S(4, 2), (double[]){0, 1, 4, 4, 2, 0, 3, 3});
    musa_tensor *w = rnd(MUSA_DTYPE_FLOAT64, 2, S(4, 2), -1, 1, L_CONTIG);
    musa_tensor *y = musa_resample(x, 1, i, w);
    musa_tensor *g = rnd(MUSA_DTYPE_FLOAT64, 3, S(2, 4, 3), -1, 1, L_TRANSPOSED);
    int id = musa_op_lookup("resample_backward");
    musa_attrs *a = musa_attrs_new(id);
    musa_attrs_set_int(a, "dim", 1);
    musa_attrs_set_int(a, "size", 5);
    musa_tensor *in[3] = {g, i, w}, *out[1] = {NULL};
    CHECK(musa_op_call(id, 3, in, a, out) == MUSA_OK);
    CHECK_SHAPE(out[0], 3, 2, 5, 3);
    CHECK_NEAR(dot(y, g), dot(x, out[0]), 1e-12);
    musa_attrs_set_int(a, "size", 4); /* index 4 no longer fits */
    musa_tensor *bad[1] = {NULL};
    CHECK_ERR(musa_op_call(id, 3, in, a, bad) == MUSA_OK, MUSA_ERR_INDEX,
              "[resample_backward] index 4 is out of bounds for a dim of size 4");
    musa_tensor *in2[3] = {x, i, w}; /* a gradient of 5 rows for 4 outputs */
    CHECK_ERR(musa_op_call(id, 3, in2, a, bad) == MUSA_OK, MUSA_ERR_VALUE,
              "[resample_backward] the gradient has 5 rows in dim 1 for 4 outputs");
    musa_attrs_free(a);
    release_all(6, x, i, w, y, g, out[0]);
}

/* ---- softmax, cross-entropy, linear ---- */

static void softmax_ref(const double *x, int64_t outer, int64_t D, int64_t inner, bool take_log,
                        double *y) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double m = -INFINITY, s = 0;
            for (int64_t d = 0; d < D; d++) m = fmax(m, x[(o * D + d) * inner + i]);
            for (int64_t d = 0; d < D; d++) s += exp(x[(o * D + d) * inner + i] - m);
            for (int64_t d = 0; d < D; d++) {
                double v = x[(o * D + d) * inner + i] - m;
                y[(o * D + d) * inner + i] = take_log ? v - log(s) : exp(v) / s;
            }
        }
}

static void softmax_case(bool lg) {
    for (int di = 0; di < 4; di++)
        for (int dim = 0; dim < 3; dim++) {
            musa_tensor *x =
                rnd(FLOAT_DTYPES[di], 3, S(3, 5, 300), -5, 5, dim == 1 ? L_TRANSPOSED : L_CONTIG);
            musa_tensor *y = lg ? musa_log_softmax(x, dim) : musa_softmax(x, dim);
            int64_t outer = dim == 0 ? 1 : dim == 1 ? 3 : 15, D = dim == 0 ? 3 : dim == 1 ? 5 : 300;
            int64_t inner = 4500 / outer / D;
            double *xv = values(x), *want = malloc(sizeof(double) * 4500);
            softmax_ref(xv, outer, D, inner, lg, want);
            bool ok = near(lg ? "log_softmax" : "softmax", y, want, 4500, 4);
            free(xv), free(want);
            release_all(2, x, y);
            if (!ok) return;
        }
    /* large logits do not overflow */
    musa_tensor *x = from_list(MUSA_DTYPE_FLOAT32, 1, S(2), (double[]){1000, 1001});
    musa_tensor *y = lg ? musa_log_softmax(x, 0) : musa_softmax(x, 0);
    double want[2] = {lg ? -1.3132616875182228 : 0.2689414213699951,
                      lg ? -0.31326168751822286 : 0.7310585786300049};
    CHECK(near("softmax of large logits", y, want, 2, 1));
    release_all(2, x, y);
}

TEST(op_softmax) {
    softmax_case(false);
}
TEST(op_log_softmax) {
    softmax_case(true);
}

static void softmax_bwd_case(bool lg) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 2, S(4, 7), -3, 3, L_CONTIG);
    musa_tensor *g = rnd(MUSA_DTYPE_FLOAT64, 2, S(4, 7), -1, 1, L_CONTIG);
    musa_tensor *y = lg ? musa_log_softmax(x, 1) : musa_softmax(x, 1);
    int id = musa_op_lookup(lg ? "log_softmax_backward" : "softmax_backward");
    musa_attrs *a = musa_attrs_new(id);
    musa_attrs_set_int(a, "dim", -1);
    musa_tensor *in[2] = {g, y}, *out[1] = {NULL};
    CHECK_OK(musa_op_call(id, 2, in, a, out));
    musa_attrs_free(a);
    double *gv = values(g), *yv = values(y), want[28];
    for (int r = 0; r < 4; r++) {
        double s = 0;
        for (int c = 0; c < 7; c++) s += lg ? gv[r * 7 + c] : gv[r * 7 + c] * yv[r * 7 + c];
        for (int c = 0; c < 7; c++) {
            int k = r * 7 + c;
            want[k] = lg ? gv[k] - exp(yv[k]) * s : yv[k] * (gv[k] - s);
        }
    }
    CHECK(near("softmax backward", out[0], want, 28, 1));
    free(gv), free(yv);
    release_all(4, x, g, y, out[0]);
}

TEST(op_softmax_backward) {
    softmax_bwd_case(false);
}
TEST(op_log_softmax_backward) {
    softmax_bwd_case(true);
}

static double xent_ref(const double *x, const int64_t *t, int64_t N, int64_t C, int64_t ignore,
                       double eps, int reduction, double *per) {
    double total = 0;
    int64_t count = 0;
    for (int64_t n = 0; n < N; n++) {
        per[n] = 0;
        if (t[n] == ignore) continue;
        double m = -INFINITY, s = 0, sx = 0;
        for (int64_t c = 0; c < C; c++) m = fmax(m, x[n * C + c]);
        for (int64_t c = 0; c < C; c++) s += exp(x[n * C + c] - m), sx += x[n * C + c];
        double lse = m + log(s);
        per[n] = (1 - eps) * (lse - x[n * C + t[n]]) + eps * (lse - sx / C);
        total += per[n], count++;
    }
    return reduction == 1 ? total / count : total;
}

TEST(op_cross_entropy) {
    double tv[6] = {2, 0, -100, 4, 1, 4};
    for (int di = 0; di < 4; di++)
        for (int red = 0; red < 3; red++)
            for (int sm = 0; sm < 2; sm++) {
                musa_tensor *x = rnd(FLOAT_DTYPES[di], 2, S(6, 5), -4, 4, L_TRANSPOSED);
                musa_tensor *t = from_list(MUSA_DTYPE_INT64, 1, S(6), tv);
                musa_tensor *l = musa_cross_entropy(x, t, -100, sm ? 0.2 : 0, (musa_reduction)red);
                CHECK(l);
                double *xv = values(x), per[6];
                int64_t ti[6];
                for (int i = 0; i < 6; i++) ti[i] = (int64_t)tv[i];
                double total = xent_ref(xv, ti, 6, 5, -100, sm ? 0.2 : 0, red, per);
                CHECK(red == 0 ? near("cross_entropy none", l, per, 6, 4)
                               : near("cross_entropy", l, &total, 1, 8));
                free(xv);
                release_all(3, x, t, l);
            }
    /* K-dim: logits (N, C, L), targets (N, L) */
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 3, S(2, 4, 3), -2, 2, L_CONTIG);
    musa_tensor *t = from_list(MUSA_DTYPE_INT64, 2, S(2, 3), (double[]){0, 3, 1, 2, 2, 0});
    musa_tensor *l = musa_cross_entropy(x, t, -100, 0, MUSA_REDUCTION_NONE);
    musa_tensor *xp = musa_permute(x, 3, S(0, 2, 1)), *x2 = musa_reshape(xp, 2, S(6, 4));
    musa_tensor *t2 = musa_reshape(t, 1, S(6)),
                *l2 = musa_cross_entropy(x2, t2, -100, 0, MUSA_REDUCTION_NONE);
    double *lv = values(l2);
    CHECK(near("K-dim cross_entropy", l, lv, 6, 1));
    free(lv);
    musa_tensor *badt = from_list(MUSA_DTYPE_INT64, 1, S(6), (double[]){0, 1, 2, 3, 7, 3});
    CHECK_ERR(FAILS(musa_cross_entropy(x2, badt, -100, 0, MUSA_REDUCTION_MEAN)), MUSA_ERR_INDEX,
              "[cross_entropy] target 7 is out of bounds for 4 classes");
    musa_tensor *ft = musa_zeros(1, S(6), MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_cross_entropy(x2, ft, -100, 0, MUSA_REDUCTION_MEAN)), MUSA_ERR_VALUE,
              "probability targets must have the logits' shape");
    /* probabilities: a one-hot target gives the index loss */
    musa_tensor *oh = musa_one_hot(t2, 4), *ohf = musa_cast(oh, MUSA_DTYPE_FLOAT64);
    musa_tensor *lp = musa_cross_entropy(x2, ohf, -100, 0.1, MUSA_REDUCTION_SUM),
                *li = musa_cross_entropy(x2, t2, -100, 0.1, MUSA_REDUCTION_SUM);
    double liv;
    musa_tensor_item(li, &liv);
    CHECK(near("probability targets", lp, &liv, 1, 1));
    release_all(14, x, t, l, xp, x2, t2, l2, badt, ft, oh, ohf, lp, li, NULL);
}

TEST(op_cross_entropy_backward) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 2, S(5, 4), -2, 2, L_CONTIG);
    musa_tensor *t = from_list(MUSA_DTYPE_INT64, 1, S(5), (double[]){1, -100, 3, 0, 3});
    musa_tensor_set_requires_grad(x, true);
    for (int red = 0; red < 3; red++) {
        musa_tensor *g[2] = {NULL, NULL};
        for (int create = 0; create < 2; create++) {
            musa_tensor *l = musa_cross_entropy(x, t, -100, 0.1, (musa_reduction)red);
            musa_tensor *go = musa_ones_like(l);
            CHECK_OK(musa_grad(1, &l, &go, 1, &x, false, create, false, &g[create]));
            release_all(2, l, go);
        }
        double *a = values(g[0]), *b = values(g[1]);
        CHECK_CLOSE("cross_entropy fused vs composite backward", MUSA_DTYPE_FLOAT64, a, b, 20);
        CHECK(a[4] == 0 && a[5] == 0); /* the ignored row */
        free(a), free(b);
        release_all(2, g[0], g[1]);
    }
    release_all(2, x, t);
}

TEST(op_linear) {
    for (int di = 0; di < 4; di++) {
        musa_dtype dt = FLOAT_DTYPES[di];
        musa_tensor *x = rnd(dt, 3, S(2, 3, 5), -1, 1, L_TRANSPOSED);
        musa_tensor *w = rnd(dt, 2, S(4, 5), -1, 1, L_CONTIG),
                    *b = rnd(dt, 1, S(4), -1, 1, L_CONTIG);
        for (int hb = 0; hb < 2; hb++) {
            musa_tensor *y = musa_linear(x, w, hb ? b : NULL);
            CHECK(y && same_shape(y, 3, S(2, 3, 4)));
            double *xv = values(x), *wv = values(w), *bv = values(b), want[24];
            for (int r = 0; r < 6; r++)
                for (int o = 0; o < 4; o++) {
                    double s = hb ? bv[o] : 0;
                    for (int k = 0; k < 5; k++) s += xv[r * 5 + k] * wv[o * 5 + k];
                    want[r * 4 + o] = s;
                }
            CHECK(near("linear", y, want, 24, 3));
            free(xv), free(wv), free(bv);
            musa_tensor_release(y);
        }
        release_all(3, x, w, b);
    }
    musa_tensor *x = musa_zeros(2, S(2, 3), MUSA_DTYPE_FLOAT32),
                *w = musa_zeros(2, S(4, 5), MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_linear(x, w, NULL)), MUSA_ERR_VALUE,
              "[linear] input (2, 3) and weight (4, 5) do not fit");
    release_all(2, x, w);
}

static double gelu_ref(double x, bool th) {
    if (th) return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x / sqrt(2)));
}

static double gelu_grad_ref(double x, bool th) {
    if (!th) return 0.5 * (1 + erf(x / sqrt(2))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
    double t = tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * sqrt(2 / M_PI) * (1 + 3 * 0.044715 * x * x);
}

/* gelu: one kernel, float32 and float64, both forms, a transposed input
 * with the edges (signed zeros, infinities, NaN, saturated tails) */
TEST(op_gelu) {
    static const musa_dtype dts[2] = {MUSA_DTYPE_FLOAT32, MUSA_DTYPE_FLOAT64};
    for (int d = 0; d < 2; d++)
        for (int th = 0; th < 2; th++) {
            musa_tensor *x = rnd(dts[d], 2, S(9, 7), -6, 6, L_TRANSPOSED);
            double *xv = values(x), want[63];
            for (int i = 0; i < 63; i++) want[i] = gelu_ref(xv[i], th);
            musa_tensor *y = musa_gelu(x, th);
            double *yv = values(y);
            CHECK_CLOSE("gelu", dts[d], yv, want, 63);
            free(xv), free(yv);
            release_all(2, x, y);
        }
    double e[7] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 30, -30};
    musa_tensor *x = from_list(MUSA_DTYPE_FLOAT32, 1, S(7), e), *y = musa_gelu(x, false),
                *z = musa_gelu(x, true);
    double *yv = values(y), *zv = values(z);
    for (int k = 0; k < 2; k++) {
        double *v = k ? zv : yv;
        CHECK(v[0] == 0 && v[1] == 0 && signbit(v[1]) && v[2] == INFINITY && isnan(v[4]) &&
              v[5] == 30 && v[6] == 0);
        CHECK(v[3] == 0 || isnan(v[3])); /* -inf * 0: PyTorch gives nan (erf) and 0 (tanh) */
    }
    free(yv), free(zv);
    release_all(3, x, y, z);
}

/* gelu_backward(grad, x) through the op table: the derivative times grad,
 * with a broadcast grad */
TEST(op_gelu_backward) {
    int id = musa_op_lookup("gelu_backward");
    for (int th = 0; th < 2; th++) {
        musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 2, S(5, 6), -5, 5, L_STRIDED);
        musa_tensor *g = rnd(MUSA_DTYPE_FLOAT64, 1, S(6), -1, 1, L_CONTIG);
        musa_attrs *a = musa_attrs_new(id);
        CHECK_OK(musa_attrs_set_bool(a, "tanh", th));
        musa_tensor *in[2] = {g, x}, *out[1] = {NULL};
        CHECK_OK(musa_op_call(id, 2, in, a, out));
        musa_attrs_free(a);
        double *xv = values(x), *gv = values(g), want[30];
        for (int i = 0; i < 30; i++) want[i] = gv[i % 6] * gelu_grad_ref(xv[i], th);
        CHECK(near("gelu backward", out[0], want, 30, 4));
        free(xv), free(gv);
        release_all(3, x, g, out[0]);
    }
    musa_tensor *x = musa_zeros(1, S(3), MUSA_DTYPE_FLOAT32),
                *g = musa_zeros(1, S(4), MUSA_DTYPE_FLOAT32), *in[2] = {g, x}, *out[1] = {NULL};
    CHECK_ERR(musa_op_call(id, 2, in, NULL, out) == MUSA_OK, MUSA_ERR_VALUE,
              "[gelu_backward] shapes (4,) and (3,) cannot be broadcast");
    release_all(2, x, g);
}

TEST(activations_and_losses) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 1, S(40), -4, 4, L_CONTIG),
                *y = rnd(MUSA_DTYPE_FLOAT64, 1, S(40), -4, 4, L_CONTIG);
    double *xv = values(x), *yv = values(y);
    struct {
        musa_tensor *t;
        double (*ref)(double, double);
    } cases[9];
    int nc = 0;
#define ACT(call, expr)                                                                            \
    do {                                                                                           \
        cases[nc].t = (call);                                                                      \
        double *v = values(cases[nc].t), w[40];                                                    \
        for (int i = 0; i < 40; i++) {                                                             \
            double a = xv[i];                                                                      \
            (void)yv;                                                                              \
            w[i] = (expr);                                                                         \
        }                                                                                          \
        CHECK_CLOSE(#call, MUSA_DTYPE_FLOAT64, v, w, 40);                                          \
        free(v);                                                                                   \
        musa_tensor_release(cases[nc].t);                                                          \
    } while (0)
    ACT(musa_gelu(x, false), 0.5 * a * (1 + erf(a / sqrt(2))));
    ACT(musa_gelu(x, true), 0.5 * a * (1 + tanh(sqrt(2 / M_PI) * (a + 0.044715 * a * a * a))));
    ACT(musa_silu(x), a / (1 + exp(-a)));
    ACT(musa_leaky_relu(x, 0.1), a > 0 ? a : 0.1 * a);
    ACT(musa_elu(x, 1.5), a > 0 ? a : 1.5 * expm1(a));
    ACT(musa_softplus(x, 2, 5), 2 * a > 5 ? a : log1p(exp(2 * a)) / 2);
    ACT(musa_hardtanh(x, -1, 2), fmin(fmax(a, -1), 2));
    (void)cases;
    /* losses */
    double mse = 0, l1 = 0, sl1 = 0;
    for (int i = 0; i < 40; i++) {
        double d = xv[i] - yv[i];
        mse += d * d / 40, l1 += fabs(d) / 40,
            sl1 += (fabs(d) < 1.5 ? 0.5 * d * d / 1.5 : fabs(d) - 0.75) / 40;
    }
    musa_tensor *lm = musa_mse_loss(x, y, MUSA_REDUCTION_MEAN),
                *ll = musa_l1_loss(x, y, MUSA_REDUCTION_MEAN);
    musa_tensor *ls = musa_smooth_l1_loss(x, y, 1.5, MUSA_REDUCTION_MEAN);
    CHECK(near("mse", lm, &mse, 1, 1) && near("l1", ll, &l1, 1, 1) &&
          near("smooth_l1", ls, &sl1, 1, 1));
    musa_tensor *p = musa_sigmoid(x), *tgt = musa_rand(1, S(40), MUSA_DTYPE_FLOAT64);
    musa_tensor *bce = musa_binary_cross_entropy(p, tgt, MUSA_REDUCTION_SUM);
    musa_tensor *bcel = musa_binary_cross_entropy_with_logits(x, tgt, MUSA_REDUCTION_SUM);
    double bv;
    musa_tensor_item(bce, &bv);
    CHECK(near("bce with logits vs bce", bcel, &bv, 1, 10));
    CHECK_ERR(FAILS(musa_binary_cross_entropy(x, tgt, MUSA_REDUCTION_SUM)), MUSA_ERR_VALUE,
              "[binary_cross_entropy] all elements of input should be between 0 and 1");
    free(xv), free(yv);
    release_all(10, x, y, lm, ll, ls, p, tgt, bce, bcel, NULL);
}

TEST(embedding_and_dropout) {
    musa_tensor *w = rnd(MUSA_DTYPE_FLOAT32, 2, S(5, 3), -1, 1, L_CONTIG);
    musa_tensor *idx = from_list(MUSA_DTYPE_INT64, 2, S(2, 2), (double[]){4, 0, 2, 4});
    musa_tensor_set_requires_grad(w, true);
    musa_tensor *e = musa_embedding(w, idx, 4);
    CHECK_SHAPE(e, 3, 2, 2, 3);
    double *ev = values(e), *wv = values(w);
    CHECK(ev[0] == wv[12] && ev[3] == wv[0] && ev[6] == wv[6]);
    musa_tensor *s = musa_sum(e, 0, NULL, false);
    CHECK_OK(musa_backward(1, &s, NULL, false, false));
    musa_tensor *g = musa_tensor_grad(w);
    double *gv = values(g);
    CHECK(gv[0] == 1 && gv[6] == 1 && gv[12] == 0 && gv[3] == 0); /* padding row: no gradient */
    free(ev), free(wv), free(gv);
    musa_tensor *x = musa_ones(1, S(100000), MUSA_DTYPE_FLOAT32);
    musa_tensor *d = musa_dropout(x, 0.25, true), *ev2 = musa_dropout(x, 0.25, false);
    double *dv = values(d);
    int zeros = 0;
    for (int i = 0; i < 100000; i++) {
        zeros += dv[i] == 0;
        CHECK(dv[i] == 0 || fabs(dv[i] - 1 / 0.75) < 1e-6);
    }
    CHECK_MSG(abs(zeros - 25000) < 800, "dropout zeroed %d of 100000", zeros);
    CHECK(ev2 == x);
    free(dv);
    release_all(9, w, idx, e, s, g, x, d, ev2, NULL);
}

/* Regression (fuzz_op_call): output-size arithmetic with user-sized
 * dilation, padding and stride overflowed int64; conv2d with dilation
 * 2^62 + 1 returned a shape instead of an error. */
TEST(conv_and_pool_sizes_do_not_overflow) {
    const int64_t big = ((int64_t)1 << 62) + 1;
    musa_tensor *x = musa_ones(4, S(1, 1, 5, 5), MUSA_DTYPE_FLOAT32);
    musa_tensor *w = musa_ones(4, S(1, 1, 3, 3), MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_conv2d(x, w, NULL, NULL, NULL, S(big, 1), 1)), MUSA_ERR_VALUE,
              "[conv2d] kernel size 3 with dilation 4611686018427387905 and padding 0 on a dim of "
              "5 overflows int64");
    CHECK_ERR(FAILS(musa_conv2d(x, w, NULL, NULL, S(big, 0), NULL, 1)), MUSA_ERR_VALUE,
              "overflows int64");
    CHECK_ERR(FAILS(musa_conv2d(x, w, NULL, NULL, NULL, NULL, big)), MUSA_ERR_VALUE,
              "not divisible by groups");
    musa_tensor *w0 = musa_ones(4, S(1, 1, 0, 3), MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_conv2d(x, w0, NULL, NULL, NULL, NULL, 1)), MUSA_ERR_VALUE,
              "[conv2d] the weight's kernel size must be >= 1, got 0");
    /* a huge but representable stride is fine: one output position */
    musa_tensor *y = musa_conv2d(x, w, NULL, S(INT64_MAX, INT64_MAX), NULL, NULL, 1);
    CHECK(y);
    CHECK_SHAPE(y, 4, 1, 1, 1, 1);
    musa_tensor *p = NULL;
    CHECK_ERR(musa_max_pool2d(x, S(3, 3), NULL, NULL, S(big, 1), false, &p, NULL) == MUSA_OK,
              MUSA_ERR_VALUE, "[max_pool2d] kernel size 3 with dilation 4611686018427387905");
    CHECK_ERR(musa_max_pool2d(x, S(2, 2), NULL, NULL, S(big, 1), false, &p, NULL) == MUSA_OK,
              MUSA_ERR_VALUE, "[max_pool2d] kernel size 4611686018427387906 is larger than");
    CHECK_OK(musa_max_pool2d(x, S(2, 2), S(INT64_MAX, INT64_MAX), NULL, NULL, true, &p, NULL));
    CHECK_SHAPE(p, 4, 1, 1, 1, 1);
    CHECK_ERR(FAILS(musa_avg_pool2d(x, S(INT64_MAX, 1), NULL, S(INT64_MAX / 2, 0), false, true)),
              MUSA_ERR_VALUE,
              "[avg_pool2d] kernel size 9223372036854775807 with dilation 1 and "
              "padding 4611686018427387903 on a dim of 5 overflows int64");
    release_all(5, x, w, w0, y, p);
}

/* Regression: the cross-entropy kernels kept the first bad target in an
 * atomic whose "none seen" value was INT64_MIN, so a target equal to
 * INT64_MIN was scored 0 but still counted in the mean (forward) and got
 * no gradient (backward), with no error. */
TEST(cross_entropy_refuses_int64_min_targets) {
    musa_tensor *x = musa_zeros(2, S(3, 4), MUSA_DTYPE_FLOAT32);
    musa_tensor *t = musa_from_data((int64_t[]){1, INT64_MIN, 2}, 1, S(3), MUSA_DTYPE_INT64);
    CHECK_ERR(FAILS(musa_cross_entropy(x, t, -100, 0, MUSA_REDUCTION_MEAN)), MUSA_ERR_INDEX,
              "[cross_entropy] target -9223372036854775808 is out of bounds for 4 classes");
    int op = musa_op_lookup("cross_entropy_backward");
    musa_tensor *g = musa_ones(0, NULL, MUSA_DTYPE_FLOAT32), *out[1] = {NULL};
    CHECK_ERR(musa_op_call(op, 3, (musa_tensor *[]){g, x, t}, NULL, out) == MUSA_OK, MUSA_ERR_INDEX,
              "[cross_entropy_backward] target -9223372036854775808 is out of bounds");
    CHECK(out[0] == NULL);
    /* ignore_index may be INT64_MIN itself: then those targets are skipped */
    musa_tensor *l = musa_cross_entropy(x, t, INT64_MIN, 0, MUSA_REDUCTION_MEAN);
    double v = 0;
    CHECK(l);
    CHECK_OK(musa_tensor_item(l, &v));
    CHECK(fabs(v - log(4.0)) < 1e-6);
    release_all(4, x, t, g, l);
}

/* Regression (found reading the embedding code for the fuzzer): 8-d
 * indices made embedding write shape[8] past its stack array. */
TEST(embedding_refuses_indices_with_max_dims) {
    musa_tensor *w = musa_ones(2, S(4, 2), MUSA_DTYPE_FLOAT32);
    musa_tensor *i = musa_zeros(8, S(1, 1, 1, 1, 1, 1, 1, 2), MUSA_DTYPE_INT64);
    CHECK_ERR(FAILS(musa_embedding(w, i, -1)), MUSA_ERR_VALUE,
              "[embedding] indices have 8 dims; at most 7 are supported");
    musa_tensor *i7 = musa_zeros(7, S(1, 1, 1, 1, 1, 1, 2), MUSA_DTYPE_INT64);
    musa_tensor *e = musa_embedding(w, i7, -1);
    CHECK(e && musa_tensor_ndim(e) == 8);
    release_all(4, w, i, i7, e);
}

/* Regression (found auditing the backward rows after the pool one): the
 * cross-entropy backward read the loss gradient per sample, or once,
 * without checking its shape (a 0-d gradient with reduction none was read
 * as N values). */
TEST(cross_entropy_backward_checks_the_loss_gradient) {
    musa_tensor *x = musa_zeros(2, S(3, 4), MUSA_DTYPE_FLOAT32);
    musa_tensor *t = musa_zeros(1, S(3), MUSA_DTYPE_INT64);
    musa_tensor *g0 = musa_ones(0, NULL, MUSA_DTYPE_FLOAT32),
                *g3 = musa_ones(1, S(3), MUSA_DTYPE_FLOAT32);
    int op = musa_op_lookup("cross_entropy_backward");
    musa_attrs *a = musa_attrs_new(op);
    musa_tensor *out[1] = {NULL};
    CHECK_OK(musa_attrs_set_int(a, "reduction", 0));
    CHECK_ERR(musa_op_call(op, 3, (musa_tensor *[]){g0, x, t}, a, out) == MUSA_OK, MUSA_ERR_VALUE,
              "[cross_entropy_backward] the loss gradient has shape (), expected (3,)");
    CHECK_OK(musa_op_call(op, 3, (musa_tensor *[]){g3, x, t}, a, out));
    musa_tensor_release(out[0]);
    out[0] = NULL;
    CHECK_OK(musa_attrs_set_int(a, "reduction", 2));
    CHECK_ERR(musa_op_call(op, 3, (musa_tensor *[]){g3, x, t}, a, out) == MUSA_OK, MUSA_ERR_VALUE,
              "the loss gradient has shape (3,), expected ()");
    musa_attrs_free(a);
    release_all(4, x, t, g0, g3);
}
