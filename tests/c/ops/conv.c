/*
 * conv.c - op tests for convolution against float64 references computed
 * here with plain loops: conv2d and its two backward ops (oneDNN and the
 * im2col path), channels-last and Winograd forms, conv1d and the
 * transposed convolution; errors. Pooling and the other neural network
 * families: nn.c.
 */
#include "../util.h"

typedef struct {
    int64_t N, C, H, W, Co, kh, kw, sh, sw, ph, pw, dh, dw, g, Ho, Wo;
} cg;

static cg make_cg(const int64_t *xs, const int64_t *ws, const int64_t *st, const int64_t *pd,
                  const int64_t *dl, int64_t g) {
    cg c = {xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], st[0],
            st[1], pd[0], pd[1], dl[0], dl[1], g,     0,     0};
    c.Ho = (c.H + 2 * c.ph - c.dh * (c.kh - 1) - 1) / c.sh + 1;
    c.Wo = (c.W + 2 * c.pw - c.dw * (c.kw - 1) - 1) / c.sw + 1;
    return c;
}

/* visit every (output, input, weight) triple of the convolution */
#define CONV_LOOP(c, BODY)                                                                         \
    for (int64_t n = 0; n < c.N; n++)                                                              \
        for (int64_t co = 0; co < c.Co; co++)                                                      \
            for (int64_t oy = 0; oy < c.Ho; oy++)                                                  \
                for (int64_t ox = 0; ox < c.Wo; ox++)                                              \
                    for (int64_t ci = 0; ci < c.C / c.g; ci++)                                     \
                        for (int64_t ky = 0; ky < c.kh; ky++)                                      \
                            for (int64_t kx = 0; kx < c.kw; kx++) {                                \
                                int64_t iy = oy * c.sh - c.ph + ky * c.dh;                         \
                                int64_t ix = ox * c.sw - c.pw + kx * c.dw;                         \
                                if (iy < 0 || iy >= c.H || ix < 0 || ix >= c.W) continue;          \
                                int64_t cin = co / (c.Co / c.g) * (c.C / c.g) + ci;                \
                                int64_t yi = ((n * c.Co + co) * c.Ho + oy) * c.Wo + ox;            \
                                int64_t xi = ((n * c.C + cin) * c.H + iy) * c.W + ix;              \
                                int64_t wi = ((co * (c.C / c.g) + ci) * c.kh + ky) * c.kw + kx;    \
                                BODY;                                                              \
                            }

static const struct {
    int64_t x[4], w[4], st[2], pd[2], dl[2], g;
} conv_cases[] = {
    {{2, 4, 7, 6}, {6, 2, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 2}, /* groups, stride, dilation */
    {{3, 3, 5, 5}, {4, 3, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1}, /* 1x1: GEMM on the input */
    {{1, 4, 6, 6}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 4}, /* depthwise, batch 1 */
    {{2, 3, 8, 8}, {5, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1},
    {{2, 2, 3, 3}, {3, 2, 3, 3}, {1, 1}, {2, 2}, {1, 1}, 1}, /* padding wider than the input */
    /* strides that drop the input's last row and column (oneDNN: negative
     * right padding): a ResNet shortcut, and a 3x3 unpadded */
    {{2, 4, 8, 8}, {6, 4, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1},
    {{2, 3, 8, 7}, {4, 3, 3, 3}, {2, 2}, {0, 0}, {1, 1}, 1},
    /* small output planes: bfloat16 weight gradients as one GEMM (conv.c) */
    {{3, 5, 4, 4}, {6, 5, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
    {{2, 3, 4, 5}, {4, 3, 3, 2}, {1, 1}, {2, 1}, {2, 2}, 1},
};

TEST(op_conv2d) {
    musa_dtype dts[4] = {MUSA_DTYPE_FLOAT32, MUSA_DTYPE_FLOAT64, MUSA_DTYPE_FLOAT16,
                         MUSA_DTYPE_BFLOAT16};
    for (int k = 0; k < (int)(sizeof conv_cases / sizeof conv_cases[0]); k++)
        for (int di = 0; di < 4; di++) {
            cg c = make_cg(conv_cases[k].x, conv_cases[k].w, conv_cases[k].st, conv_cases[k].pd,
                           conv_cases[k].dl, conv_cases[k].g);
            musa_tensor *x =
                rnd(dts[di], 4, conv_cases[k].x, -1, 1, k % 2 ? L_TRANSPOSED : L_CONTIG);
            musa_tensor *w = rnd(dts[di], 4, conv_cases[k].w, -1, 1, L_CONTIG);
            musa_tensor *b = rnd(dts[di], 1, &c.Co, -1, 1, L_CONTIG);
            musa_tensor *y = musa_conv2d(x, w, k == 1 ? NULL : b, conv_cases[k].st,
                                         conv_cases[k].pd, conv_cases[k].dl, c.g);
            CHECK_MSG(y, "conv case %d: %s", k, musa_last_error());
            CHECK(same_shape(y, 4, (int64_t[]){c.N, c.Co, c.Ho, c.Wo}) &&
                  musa_tensor_dtype(y) == dts[di]);
            double *xv = values(x), *wv = values(w), *bv = values(b);
            int64_t n = c.N * c.Co * c.Ho * c.Wo;
            double *want = calloc((size_t)n, sizeof(double));
            for (int64_t i = 0; i < n && k != 1; i++) want[i] = bv[(i / (c.Ho * c.Wo)) % c.Co];
            CONV_LOOP(c, want[yi] += xv[xi] * wv[wi]);
            char what[64];
            snprintf(what, sizeof what, "conv2d case %d", k);
            bool ok = near(what, y, want, n, 4);
            free(xv), free(wv), free(bv), free(want);
            release_all(4, x, w, b, y);
            if (!ok) return;
        }
    /* a convolution worked by hand */
    musa_tensor *x =
        from_list(MUSA_DTYPE_FLOAT32, 4, S(1, 1, 3, 3), (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
    musa_tensor *w = from_list(MUSA_DTYPE_FLOAT32, 4, S(1, 1, 2, 2), (double[]){1, 0, 0, -1});
    musa_tensor *y = musa_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
    CHECK(near("conv by hand", y, (double[]){-4, -4, -4, -4}, 4, 1));
    musa_tensor *bad = musa_zeros(4, S(3, 2, 2, 2), MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_conv2d(x, bad, NULL, NULL, NULL, NULL, 1)), MUSA_ERR_VALUE,
              "[conv2d] input (1, 1, 3, 3) has 1 channels but weight (3, 2, 2, 2) expects 2");
    musa_tensor *big = musa_zeros(4, S(1, 1, 5, 5), MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_conv2d(x, big, NULL, NULL, NULL, NULL, 1)), MUSA_ERR_VALUE,
              "larger than the padded input");
    CHECK_ERR(FAILS(musa_conv2d(x, w, NULL, NULL, S(-1, 0), NULL, 1)), MUSA_ERR_VALUE,
              "padding must be >= 0");
    CHECK_ERR(FAILS(musa_conv2d(x, w, NULL, S(0, 1), NULL, NULL, 1)), MUSA_ERR_VALUE,
              "stride must be >= 1");
    musa_tensor *x3 = musa_zeros(3, S(1, 3, 3), MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_conv2d(x3, w, NULL, NULL, NULL, NULL, 1)), MUSA_ERR_VALUE,
              "input must have 4 dims");
    release_all(6, x, w, y, bad, big, x3);
}

static void conv_backward_case(bool weight) {
    for (int k = 0; k < (int)(sizeof conv_cases / sizeof conv_cases[0]); k++)
        for (int d = 0; d < 2; d++) {
            musa_dtype dt = d ? MUSA_DTYPE_FLOAT64 : MUSA_DTYPE_FLOAT32;
            cg c = make_cg(conv_cases[k].x, conv_cases[k].w, conv_cases[k].st, conv_cases[k].pd,
                           conv_cases[k].dl, conv_cases[k].g);
            musa_tensor *x = rnd(dt, 4, conv_cases[k].x, -1, 1, L_CONTIG);
            musa_tensor *w = rnd(dt, 4, conv_cases[k].w, -1, 1, L_CONTIG);
            musa_tensor *gy = rnd(dt, 4, (int64_t[]){c.N, c.Co, c.Ho, c.Wo}, -1, 1, L_TRANSPOSED);
            int op = musa_op_lookup(weight ? "conv2d_backward_weight" : "conv2d_backward_input");
            musa_attrs *a = musa_attrs_new(op);
            musa_attrs_set_ints(a, "stride", 2, conv_cases[k].st);
            musa_attrs_set_ints(a, "padding", 2, conv_cases[k].pd);
            musa_attrs_set_ints(a, "dilation", 2, conv_cases[k].dl);
            musa_attrs_set_int(a, "groups", c.g);
            musa_attrs_set_ints(a, "shape", 4, weight ? conv_cases[k].w : conv_cases[k].x);
            musa_tensor *in[2] = {weight ? x : gy, weight ? gy : w}, *out[1] = {NULL};
            CHECK_OK(musa_op_call(op, 2, in, a, out));
            musa_attrs_free(a);
            double *xv = values(x), *wv = values(w), *gv = values(gy);
            int64_t n = weight ? musa_tensor_numel(w) : musa_tensor_numel(x);
            double *want = calloc((size_t)n, sizeof(double));
            if (weight)
                CONV_LOOP(c, want[wi] += gv[yi] * xv[xi])
            else
                CONV_LOOP(c, want[xi] += gv[yi] * wv[wi])
            bool ok = near(weight ? "conv2d_backward_weight" : "conv2d_backward_input", out[0],
                           want, n, 8);
            free(xv), free(wv), free(gv), free(want);
            release_all(4, x, w, gy, out[0]);
            if (!ok) return;
        }
}

TEST(op_conv2d_backward_input) {
    conv_backward_case(false);
}
TEST(op_conv2d_backward_weight) {
    conv_backward_case(true);
}

/* float32 convolutions run on oneDNN; the same cases on the im2col path */
TEST(conv2d_im2col_path) {
    setenv("MUSA_CONV_IM2COL", "1", 1);
    op_conv2d();
    conv_backward_case(false);
    conv_backward_case(true);
    unsetenv("MUSA_CONV_IM2COL");
}

/* An NCHW tensor as an NHWC one, or back (perm {0, 3, 1, 2}). */
static musa_tensor *relaid(musa_tensor *t, const int64_t *perm) {
    musa_tensor *v = musa_permute(t, 4, perm), *c = musa_contiguous(v);
    musa_tensor_release(v);
    return c;
}

/* The three convolution ops with channels_last attrs on NHWC tensors give
 * the NCHW ops' results, laid out NHWC; without oneDNN (float64) they fail
 * cleanly, naming the op. */
TEST(conv2d_channels_last) {
    static const int64_t to_cl[4] = {0, 2, 3, 1}, to_std[4] = {0, 3, 1, 2};
    const char *ops[3] = {"conv2d", "conv2d_backward_input", "conv2d_backward_weight"};
    for (int k = 0; k < (int)(sizeof conv_cases / sizeof conv_cases[0]); k++)
        for (int op = 0; op < 3; op++)
            for (int d = 0; d < 2; d++) {
                musa_dtype dt = d ? MUSA_DTYPE_BFLOAT16 : MUSA_DTYPE_FLOAT32;
                cg c = make_cg(conv_cases[k].x, conv_cases[k].w, conv_cases[k].st, conv_cases[k].pd,
                               conv_cases[k].dl, conv_cases[k].g);
                int64_t ys[4] = {c.N, c.Co, c.Ho, c.Wo};
                musa_tensor *x = rnd(dt, 4, conv_cases[k].x, -1, 1, L_CONTIG);
                musa_tensor *w = rnd(dt, 4, conv_cases[k].w, -1, 1, L_CONTIG);
                musa_tensor *gy = rnd(dt, 4, ys, -1, 1, L_CONTIG);
                musa_tensor *a0 = op == 1 ? gy : x, *a1 = op == 2 ? gy : w;
                int id = musa_op_lookup(ops[op]);
                musa_attrs *a = musa_attrs_new(id);
                musa_attrs_set_ints(a, "stride", 2, conv_cases[k].st);
                musa_attrs_set_ints(a, "padding", 2, conv_cases[k].pd);
                musa_attrs_set_ints(a, "dilation", 2, conv_cases[k].dl);
                musa_attrs_set_int(a, "groups", c.g);
                if (op)
                    musa_attrs_set_ints(a, "shape", 4, op == 2 ? conv_cases[k].w : conv_cases[k].x);
                musa_tensor *want = NULL, *got = NULL, *in[2] = {a0, a1};
                CHECK_OK(musa_op_call(id, 2, in, a, &want));
                /* the same op on NHWC activations */
                musa_tensor *c0 = relaid(a0, to_cl), *c1 = op == 2 ? relaid(a1, to_cl) : a1;
                if (op == 1) {
                    int64_t s[4] = {c.N, conv_cases[k].x[2], conv_cases[k].x[3],
                                    conv_cases[k].x[1]};
                    musa_attrs_set_ints(a, "shape", 4, s);
                }
                musa_attrs_set_bool(a, "channels_last", true);
                musa_tensor *cin[2] = {c0, c1};
                int rc = musa_op_call(id, 2, cin, a, &got);
                CHECK_MSG(rc == MUSA_OK, "%s case %d: %s", ops[op], k, musa_last_error());
                if (rc == MUSA_OK) {
                    musa_tensor *back = op == 2 ? got : relaid(got, to_std);
                    int64_t n = musa_tensor_numel(want);
                    double *wv = values(want);
                    char what[64];
                    snprintf(what, sizeof what, "%s channels_last case %d", ops[op], k);
                    CHECK(near(what, back, wv, n, 8));
                    free(wv);
                    if (back != got) musa_tensor_release(back);
                    musa_tensor_release(got);
                }
                musa_attrs_free(a);
                if (c1 != a1) musa_tensor_release(c1);
                release_all(5, x, w, gy, want, c0);
            }
    /* float64 has no oneDNN primitive: a clean error, no fallback */
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 4, S(1, 5, 5, 3), -1, 1, L_CONTIG);
    musa_tensor *w = rnd(MUSA_DTYPE_FLOAT64, 4, S(2, 3, 3, 3), -1, 1, L_CONTIG), *y = NULL;
    int id = musa_op_lookup("conv2d");
    musa_attrs *a = musa_attrs_new(id);
    musa_attrs_set_bool(a, "channels_last", true);
    CHECK_ERR(musa_op_call(id, 2, (musa_tensor *[]){x, w}, a, &y) == MUSA_OK,
              MUSA_ERR_NOT_IMPLEMENTED, "[conv2d] channels_last runs only on oneDNN's primitives");
    /* shapes are checked in the NHWC reading: 3 channels, not 5 */
    musa_tensor *w5 = rnd(MUSA_DTYPE_FLOAT32, 4, S(2, 5, 3, 3), -1, 1, L_CONTIG);
    musa_tensor *x32 = rnd(MUSA_DTYPE_FLOAT32, 4, S(1, 5, 5, 3), -1, 1, L_CONTIG);
    CHECK_ERR(musa_op_call(id, 2, (musa_tensor *[]){x32, w5}, a, &y) == MUSA_OK, MUSA_ERR_VALUE,
              "has 3 channels but weight");
    musa_attrs_free(a);
    release_all(4, x, w, w5, x32);
}

/* Attribute winograd: the three convolution ops of 64 channels or more, 3x3
 * and stride 1, run oneDNN's Winograd primitive (results within float32
 * tolerance of float64 loops, and not the direct primitive's bits, so
 * another algorithm ran); shapes it does not serve (32 channels, stride 2)
 * run the direct primitive, bit for bit. */
TEST(conv2d_winograd) {
    static const struct {
        int64_t x[4], w[4], st[2], pd[2];
        bool wino;
    } cases[] = {
        {{2, 64, 8, 8}, {64, 64, 3, 3}, {1, 1}, {1, 1}, true},
        {{1, 64, 7, 10}, {80, 64, 3, 3}, {1, 1}, {0, 1}, true},
        {{2, 32, 8, 8}, {32, 32, 3, 3}, {1, 1}, {1, 1}, false},
        {{2, 64, 8, 8}, {64, 64, 3, 3}, {2, 2}, {1, 1}, false},
    };
    const char *ops[3] = {"conv2d", "conv2d_backward_input", "conv2d_backward_weight"};
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++)
        for (int op = 0; op < 3; op++) {
            cg c = make_cg(cases[k].x, cases[k].w, cases[k].st, cases[k].pd, S(1, 1), 1);
            int64_t ys[4] = {c.N, c.Co, c.Ho, c.Wo};
            musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 4, cases[k].x, -1, 1, L_CONTIG);
            musa_tensor *w = rnd(MUSA_DTYPE_FLOAT32, 4, cases[k].w, -1, 1, L_CONTIG);
            musa_tensor *gy = rnd(MUSA_DTYPE_FLOAT32, 4, ys, -1, 1, L_CONTIG);
            musa_tensor *b = rnd(MUSA_DTYPE_FLOAT32, 1, &c.Co, -1, 1, L_CONTIG);
            musa_tensor *in[3] = {op == 1 ? gy : x, op == 2 ? gy : w, b}, *direct = NULL,
                        *wino = NULL;
            int n_in = op ? 2 : 3, id = musa_op_lookup(ops[op]);
            musa_attrs *a = musa_attrs_new(id);
            musa_attrs_set_ints(a, "stride", 2, cases[k].st);
            musa_attrs_set_ints(a, "padding", 2, cases[k].pd);
            if (op) musa_attrs_set_ints(a, "shape", 4, op == 2 ? cases[k].w : cases[k].x);
            CHECK_OK(musa_op_call(id, n_in, in, a, &direct));
            musa_attrs_set_bool(a, "winograd", true);
            CHECK_OK(musa_op_call(id, n_in, in, a, &wino));
            musa_attrs_free(a);
            double *xv = values(x), *wv = values(w), *gv = values(gy), *bv = values(b);
            int64_t n = musa_tensor_numel(op == 0 ? gy : op == 1 ? x : w);
            double *want = calloc((size_t)n, sizeof(double));
            if (op == 0) {
                for (int64_t i = 0; i < n; i++) want[i] = bv[(i / (c.Ho * c.Wo)) % c.Co];
                CONV_LOOP(c, want[yi] += xv[xi] * wv[wi]);
            } else if (op == 1) {
                CONV_LOOP(c, want[xi] += gv[yi] * wv[wi]);
            } else {
                CONV_LOOP(c, want[wi] += gv[yi] * xv[xi]);
            }
            char what[80];
            snprintf(what, sizeof what, "%s winograd case %d", ops[op], k);
            CHECK(near(what, wino, want, n, 8));
            CHECK_MSG(same_values(wino, direct) != cases[k].wino,
                      "%s case %d: Winograd %s the direct primitive's bits", ops[op], k,
                      cases[k].wino ? "gave" : "changed");
            free(xv), free(wv), free(gv), free(bv), free(want);
            release_all(6, x, w, gy, b, direct, wino);
        }
}

TEST(conv1d_and_transpose) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 3, S(2, 3, 9), -1, 1, L_CONTIG);
    musa_tensor *w = rnd(MUSA_DTYPE_FLOAT64, 3, S(4, 3, 3), -1, 1, L_CONTIG);
    musa_tensor *y = musa_conv1d(x, w, NULL, 2, 1, 1, 1);
    CHECK_SHAPE(y, 3, 2, 4, 5);
    double *xv = values(x), *wv = values(w), *yv = values(y);
    for (int n = 0; n < 2; n++)
        for (int co = 0; co < 4; co++)
            for (int o = 0; o < 5; o++) {
                double s = 0;
                for (int ci = 0; ci < 3; ci++)
                    for (int k = 0; k < 3; k++) {
                        int i = o * 2 - 1 + k;
                        if (i >= 0 && i < 9)
                            s += xv[(n * 3 + ci) * 9 + i] * wv[(co * 3 + ci) * 3 + k];
                    }
                CHECK_NEAR(yv[(n * 4 + co) * 5 + o], s, 1e-12);
            }
    free(xv), free(wv), free(yv);
    /* conv_transpose2d is the adjoint of conv2d: <conv(x, w), z> = <x, convT(z, w)> */
    musa_tensor *a = rnd(MUSA_DTYPE_FLOAT64, 4, S(2, 3, 7, 6), -1, 1, L_CONTIG);
    musa_tensor *k = rnd(MUSA_DTYPE_FLOAT64, 4, S(4, 3, 3, 3), -1, 1, L_CONTIG);
    musa_tensor *ca = musa_conv2d(a, k, NULL, S(2, 2), S(1, 1), NULL, 1);
    musa_tensor *z = rnd(MUSA_DTYPE_FLOAT64, 4, musa_tensor_shape(ca), -1, 1, L_CONTIG);
    musa_tensor *tz = musa_conv_transpose2d(z, k, NULL, S(2, 2), S(1, 1), S(0, 1), NULL, 1);
    CHECK_SHAPE(tz, 4, 2, 3, 7, 6);
    CHECK_NEAR(dot(ca, z), dot(a, tz), 1e-10);
    release_all(8, x, w, y, a, k, ca, z, tz);
}
