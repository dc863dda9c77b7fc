/*
 * gradcheck_ops.c - every differentiable op passes gradcheck and
 * gradgradcheck in float64, on inputs that include broadcasting and
 * non-contiguous layouts. One TEST(grad_<op>) per op; test_autograd.c
 * fails the run when a differentiable op has none.
 */
#include "gradcheck.h"

#define GC(name, n, gg, ...)                                                                       \
    do {                                                                                           \
        musa_tensor *ins_[] = {__VA_ARGS__};                                                       \
        if (!check_grads(#name, f_##name, n, ins_, gg)) return;                                    \
    } while (0)

/* ---- unary: a transposed (3,4) input; domains avoid kinks ---- */
#define UNARY_GC(NAME, LO, HI)                                                                     \
    static musa_tensor *f_##NAME(musa_tensor *const *in) {                                         \
        return musa_##NAME(in[0]);                                                                 \
    }                                                                                              \
    TEST(grad_##NAME) {                                                                            \
        GC(NAME, 1, true, in64(2, S(3, 4), LO, HI, L_TRANSPOSED));                                 \
    }

UNARY_GC(neg, -2, 2)
UNARY_GC(abs, 0.2, 2)
UNARY_GC(sign, 0.2, 2)
UNARY_GC(exp, -2, 2)
UNARY_GC(expm1, -2, 2)
UNARY_GC(log, 0.5, 3)
UNARY_GC(log1p, -0.5, 3)
UNARY_GC(sqrt, 0.5, 3)
UNARY_GC(rsqrt, 0.5, 3)
UNARY_GC(reciprocal, 0.5, 3)
UNARY_GC(sin, -3, 3)
UNARY_GC(cos, -3, 3)
UNARY_GC(tanh, -2, 2)
UNARY_GC(sigmoid, -3, 3)
UNARY_GC(erf, -2, 2)
UNARY_GC(erfc, -2, 2)
UNARY_GC(i0, -3, 3)
UNARY_GC(i0e, -3, 3)
UNARY_GC(i1, -3, 3)
UNARY_GC(i1e, -3, 3)
UNARY_GC(bessel_j0, -3, 3)
UNARY_GC(bessel_j1, -3, 3)
UNARY_GC(bessel_y0, 0.5, 3)
UNARY_GC(bessel_y1, 0.5, 3)
UNARY_GC(modified_bessel_k0, 0.5, 3)
UNARY_GC(modified_bessel_k1, 0.5, 3)
UNARY_GC(scaled_modified_bessel_k0, 0.5, 3)
UNARY_GC(scaled_modified_bessel_k1, 0.5, 3)
UNARY_GC(airy_ai, -3, 3)
/* Ai' is an internal row (Ai's backward): called by name */
static musa_tensor *f_airy_ai_prime(musa_tensor *const *in) {
    musa_tensor *out = NULL;
    return musa_op_call(musa_op_lookup("airy_ai_prime"), 1, in, NULL, &out) ? NULL : out;
}
TEST(grad_airy_ai_prime) {
    GC(airy_ai_prime, 1, true, in64(2, S(3, 4), -3, 3, L_TRANSPOSED));
}
UNARY_GC(asin, -0.8, 0.8)
UNARY_GC(acos, -0.8, 0.8)
UNARY_GC(atan, -3, 3)
UNARY_GC(asinh, -3, 3)
UNARY_GC(acosh, 1.5, 4)
UNARY_GC(atanh, -0.8, 0.8)
UNARY_GC(relu, 0.1, 2)
UNARY_GC(floor, 0.1, 0.9)
UNARY_GC(ceil, 0.1, 0.9)
UNARY_GC(round, 0.1, 0.4)
UNARY_GC(trunc, 0.1, 0.9)

/* gelu, exact and tanh forms: gradcheck runs the formulas in primitives
 * (grad mode is on), gradgradcheck differentiates them again */
static musa_tensor *f_gelu(musa_tensor *const *in) {
    return musa_gelu(in[0], false);
}
static musa_tensor *f_gelu_tanh(musa_tensor *const *in) {
    return musa_gelu(in[0], true);
}
TEST(grad_gelu) {
    GC(gelu, 1, true, in64(2, S(3, 4), -3, 3, L_TRANSPOSED));
    GC(gelu_tanh, 1, true, in64(2, S(3, 4), -3, 3, L_STRIDED));
}

TEST(grad_relu_negative_side) {
    /* relu on negative inputs: gradient 0, second derivative 0 */
    GC(relu, 1, true, in64(2, S(3, 4), -2, -0.1, L_STRIDED));
}

/* ---- binary: (3,4) transposed against a broadcast (4,) ---- */
#define BINARY_GC(NAME, ALO, AHI, BLO, BHI)                                                        \
    static musa_tensor *f_##NAME(musa_tensor *const *in) {                                         \
        return musa_##NAME(in[0], in[1]);                                                          \
    }                                                                                              \
    TEST(grad_##NAME) {                                                                            \
        GC(NAME, 2, true, in64(2, S(3, 4), ALO, AHI, L_TRANSPOSED),                                \
           in64(1, S(4), BLO, BHI, L_CONTIG));                                                     \
        GC(NAME, 2, true, in64(2, S(2, 1), ALO, AHI, L_CONTIG),                                    \
           in64(2, S(1, 3), BLO, BHI, L_STRIDED));                                                 \
    }

BINARY_GC(add, -2, 2, -2, 2)
BINARY_GC(sub, -2, 2, -2, 2)
BINARY_GC(mul, -2, 2, -2, 2)
BINARY_GC(div, -2, 2, 0.5, 2)
BINARY_GC(pow, 0.5, 2, -1, 2)
BINARY_GC(maximum, -2, 2, -2, 2)
BINARY_GC(minimum, -2, 2, -2, 2)
BINARY_GC(fmod, 0.1, 3.9, 1.0, 1.0 + 1e-3)
BINARY_GC(remainder, -3.9, -0.1, 1.0, 1.0 + 1e-3)
BINARY_GC(copysign, 0.2, 2, -2, -0.2)

/* the incomplete gamma functions in both arguments (first order: their
 * derivative rows are not differentiable) */
static musa_tensor *f_igamma(musa_tensor *const *in) {
    return musa_igamma(in[0], in[1]);
}
static musa_tensor *f_igammac(musa_tensor *const *in) {
    return musa_igammac(in[0], in[1]);
}
TEST(grad_igamma) {
    GC(igamma, 2, false, in64(2, S(3, 4), 0.5, 3, L_TRANSPOSED), in64(1, S(4), 0.3, 4, L_CONTIG));
    GC(igamma, 2, false, in64(2, S(2, 1), 20, 40, L_CONTIG), in64(2, S(1, 3), 25, 35, L_STRIDED));
}
TEST(grad_igammac) {
    GC(igammac, 2, false, in64(2, S(3, 4), 0.5, 3, L_TRANSPOSED), in64(1, S(4), 0.3, 4, L_CONTIG));
}

/* standard_gamma: a sample's gradient is the implicit one, dx/da along the
 * sample's quantile P(a, x) fixed: checked against -(dP/da) / (dP/dx) by
 * central differences of igamma, and backward(x) against it */
TEST(grad_standard_gamma) {
    musa_manual_seed(5);
    musa_tensor *a = from_list(MUSA_DTYPE_FLOAT64, 1, S(4), (double[]){0.3, 1, 4, 60});
    CHECK_OK(musa_tensor_set_requires_grad(a, true));
    musa_tensor *x = musa_standard_gamma(a), *s = musa_sum(x, 0, NULL, false);
    CHECK_OK(musa_backward(1, &s, NULL, false, false));
    musa_tensor *ga = musa_tensor_grad(a);
    double *g = values(ga), *av = values(a), *xv = values(x);
    for (int i = 0; i < 4; i++) {
        double h = 1e-6 * av[i], k = 1e-6 * xv[i];
        double q[4][2] = {
            {av[i] + h, xv[i]}, {av[i] - h, xv[i]}, {av[i], xv[i] + k}, {av[i], xv[i] - k}};
        double p[4];
        for (int j = 0; j < 4; j++) {
            musa_tensor *ta = from_list(MUSA_DTYPE_FLOAT64, 1, S(1), &q[j][0]);
            musa_tensor *tx = from_list(MUSA_DTYPE_FLOAT64, 1, S(1), &q[j][1]);
            musa_tensor *tp = musa_igamma(ta, tx);
            CHECK_OK(musa_tensor_item(tp, &p[j]));
            release_all(3, ta, tx, tp);
        }
        double want = -((p[0] - p[1]) / (2 * h)) / ((p[2] - p[3]) / (2 * k));
        CHECK_MSG(fabs(g[i] - want) < 1e-5 * fabs(want), "a %g x %g: grad %.10g, differences %.10g",
                  av[i], xv[i], g[i], want);
    }
    free(g), free(av), free(xv);
    release_all(4, a, x, s, ga);
}

static musa_tensor *f_where(musa_tensor *const *in) {
    musa_tensor *c = from_list(MUSA_DTYPE_BOOL, 1, S(4), (double[]){1, 0, 0, 1});
    musa_tensor *r = musa_where(c, in[0], in[1]);
    musa_tensor_release(c);
    return r;
}
TEST(grad_where) {
    GC(where, 2, true, in64(2, S(3, 4), -2, 2, L_TRANSPOSED), in64(1, S(1), -2, 2, L_CONTIG));
}

static musa_tensor *f_clamp(musa_tensor *const *in) {
    double lo = -0.6, hi = 0.6;
    return musa_clamp(in[0], &lo, &hi);
}
TEST(grad_clamp) {
    GC(clamp, 1, true, in64(2, S(3, 4), -1, 1, L_TRANSPOSED));
}

static musa_tensor *f_cast(musa_tensor *const *in) {
    /* through the op (musa_cast to the same dtype is a no-op) */
    musa_attrs *a = musa_attrs_new(musa_op_lookup("cast"));
    musa_attrs_set_dtype(a, "dtype", MUSA_DTYPE_FLOAT64);
    musa_tensor *out[1] = {NULL};
    musa_op_call(musa_op_lookup("cast"), 1, in, a, out);
    musa_attrs_free(a);
    return out[0];
}
TEST(grad_cast) {
    GC(cast, 1, true, in64(2, S(3, 4), -1, 1, L_STRIDED));
}

static musa_tensor *f_clone(musa_tensor *const *in) {
    return musa_clone(in[0]);
}
TEST(grad_clone) {
    GC(clone, 1, true, in64(2, S(3, 4), -1, 1, L_TRANSPOSED));
}

/* ---- reductions ---- */
static musa_tensor *f_sum(musa_tensor *const *in) {
    return musa_sum(in[0], 2, S(0, 2), false);
}
static musa_tensor *f_sum_all(musa_tensor *const *in) {
    return musa_sum(in[0], 0, NULL, true);
}
TEST(grad_sum) {
    GC(sum, 1, true, in64(3, S(2, 3, 4), -1, 1, L_TRANSPOSED));
    GC(sum_all, 1, true, in64(2, S(3, 4), -1, 1, L_STRIDED));
}

static musa_tensor *f_prod(musa_tensor *const *in) {
    return musa_prod(in[0], 1, S(1), false);
}
static musa_tensor *f_prod_zero(musa_tensor *const *in) {
    /* one exact zero in the first row, two in the second */
    musa_tensor *mask = from_list(MUSA_DTYPE_FLOAT64, 2, S(2, 3), (double[]){1, 0, 1, 0, 1, 0});
    musa_tensor *x = musa_mul(in[0], mask), *r = musa_prod(x, 1, S(1), true);
    release_all(2, mask, x);
    return r;
}
TEST(grad_prod) {
    GC(prod, 1, true, in64(2, S(3, 4), 0.5, 1.5, L_TRANSPOSED));
    GC(prod_zero, 1, true, in64(2, S(2, 3), 0.5, 1.5, L_CONTIG));
}

static musa_tensor *f_amax(musa_tensor *const *in) {
    return musa_amax(in[0], 1, S(-1), false);
}
static musa_tensor *f_amin(musa_tensor *const *in) {
    return musa_amin(in[0], 2, S(0, 1), true);
}
TEST(grad_amax) {
    GC(amax, 1, true, in64(2, S(3, 4), -2, 2, L_TRANSPOSED));
}
TEST(grad_amin) {
    GC(amin, 1, true, in64(2, S(3, 4), -2, 2, L_STRIDED));
}

static musa_tensor *f_max_dim(musa_tensor *const *in) {
    musa_tensor *v = NULL, *i = NULL;
    musa_max_dim(in[0], 0, false, &v, &i);
    musa_tensor_release(i);
    return v;
}
static musa_tensor *f_min_dim(musa_tensor *const *in) {
    musa_tensor *v = NULL, *i = NULL;
    musa_min_dim(in[0], -1, true, &v, &i);
    musa_tensor_release(i);
    return v;
}
TEST(grad_max_dim) {
    GC(max_dim, 1, true, in64(2, S(3, 4), -2, 2, L_TRANSPOSED));
}
TEST(grad_min_dim) {
    GC(min_dim, 1, true, in64(2, S(3, 4), -2, 2, L_CONTIG));
}

static musa_tensor *f_norm_list(musa_tensor *const *in) {
    return musa_norm_list(2, in);
}
TEST(grad_norm_list) {
    GC(norm_list, 2, true, in64(2, S(3, 2), -2, 2, L_TRANSPOSED), in64(1, S(4), -2, 2, L_STRIDED));
}

/* ---- matmul ---- */
static musa_tensor *f_matmul(musa_tensor *const *in) {
    return musa_matmul(in[0], in[1]);
}
static musa_tensor *f_matmul_t(musa_tensor *const *in) {
    int op = musa_op_lookup("matmul");
    musa_attrs *a = musa_attrs_new(op);
    musa_attrs_set_bool(a, "transpose_a", true);
    musa_attrs_set_bool(a, "transpose_b", true);
    musa_tensor *out[1] = {NULL};
    musa_op_call(op, 2, in, a, out);
    musa_attrs_free(a);
    return out[0];
}
static musa_tensor *f_matmul_ta(musa_tensor *const *in) {
    int op = musa_op_lookup("matmul");
    musa_attrs *a = musa_attrs_new(op);
    musa_attrs_set_bool(a, "transpose_a", true);
    musa_tensor *out[1] = {NULL};
    musa_op_call(op, 2, in, a, out);
    musa_attrs_free(a);
    return out[0];
}
TEST(grad_matmul) {
    GC(matmul, 2, true, in64(2, S(3, 4), -1, 1, L_TRANSPOSED), in64(2, S(4, 2), -1, 1, L_STRIDED));
    GC(matmul, 2, true, in64(1, S(4), -1, 1, L_CONTIG), in64(2, S(4, 3), -1, 1, L_CONTIG));
    GC(matmul, 2, true, in64(3, S(2, 3, 4), -1, 1, L_CONTIG), in64(1, S(4), -1, 1, L_CONTIG));
    GC(matmul, 2, true, in64(1, S(3), -1, 1, L_CONTIG), in64(1, S(3), -1, 1, L_STRIDED));
    GC(matmul, 2, true, in64(3, S(2, 2, 3), -1, 1, L_CONTIG), in64(2, S(3, 2), -1, 1, L_CONTIG));
    GC(matmul, 2, true, in64(4, S(2, 1, 2, 3), -1, 1, L_CONTIG),
       in64(3, S(2, 3, 2), -1, 1, L_TRANSPOSED));
    GC(matmul_t, 2, true, in64(2, S(4, 3), -1, 1, L_CONTIG), in64(2, S(2, 4), -1, 1, L_CONTIG));
    GC(matmul_ta, 2, true, in64(3, S(2, 4, 3), -1, 1, L_CONTIG), in64(2, S(4, 2), -1, 1, L_CONTIG));
}

/* ---- views ---- */
static musa_tensor *f_view(musa_tensor *const *in) {
    return musa_view(in[0], 2, S(2, 6));
}
static musa_tensor *f_reshape_t(musa_tensor *const *in) {
    return musa_reshape(in[0], 1, S(12));
}
TEST(grad_view) {
    GC(view, 1, true, in64(2, S(3, 4), -1, 1, L_CONTIG));
    GC(reshape_t, 1, true, in64(2, S(3, 4), -1, 1, L_TRANSPOSED));
}
static musa_tensor *f_permute(musa_tensor *const *in) {
    return musa_permute(in[0], 3, S(2, 0, 1));
}
TEST(grad_permute) {
    GC(permute, 1, true, in64(3, S(2, 3, 2), -1, 1, L_STRIDED));
}
static musa_tensor *f_slice(musa_tensor *const *in) {
    return musa_slice(in[0], 1, 1, 7, 2);
}
static musa_tensor *f_slice0(musa_tensor *const *in) {
    return musa_slice(in[0], 0, -2, 3, 1);
}
TEST(grad_slice) {
    GC(slice, 1, true, in64(2, S(2, 7), -1, 1, L_CONTIG));
    GC(slice0, 1, true, in64(2, S(3, 2), -1, 1, L_TRANSPOSED));
}
static musa_tensor *f_select(musa_tensor *const *in) {
    return musa_select(in[0], 1, -1);
}
TEST(grad_select) {
    GC(select, 1, true, in64(2, S(3, 4), -1, 1, L_TRANSPOSED));
}
static musa_tensor *f_expand(musa_tensor *const *in) {
    return musa_expand(in[0], 3, S(2, 3, 4));
}
TEST(grad_expand) {
    GC(expand, 1, true, in64(2, S(3, 1), -1, 1, L_CONTIG));
}
static musa_tensor *f_squeeze(musa_tensor *const *in) {
    return musa_squeeze(in[0], 0, NULL);
}
TEST(grad_squeeze) {
    GC(squeeze, 1, true, in64(3, S(3, 1, 2), -1, 1, L_CONTIG));
}
static musa_tensor *f_unsqueeze(musa_tensor *const *in) {
    return musa_unsqueeze(in[0], 1);
}
TEST(grad_unsqueeze) {
    GC(unsqueeze, 1, true, in64(2, S(3, 2), -1, 1, L_TRANSPOSED));
}

/* as_strided: overlapping windows (gradients sum); as_strided_scatter:
 * both operands, copying and accumulating */
static musa_tensor *f_as_strided(musa_tensor *const *in) {
    return musa_as_strided(in[0], 2, S(3, 3), S(2, 1), 1);
}
TEST(grad_as_strided) {
    GC(as_strided, 1, true, in64(1, S(9), -1, 1, L_CONTIG));
}
static musa_tensor *f_as_strided_scatter(musa_tensor *const *in) {
    return musa_as_strided_scatter(in[0], in[1], 2, S(2, 2), S(3, 1), 1);
}
TEST(grad_as_strided_scatter) {
    GC(as_strided_scatter, 2, true, in64(2, S(3, 3), -1, 1, L_TRANSPOSED),
       in64(2, S(2, 2), -1, 1, L_CONTIG));
}

/* ---- data movement ---- */
static musa_tensor *f_cat(musa_tensor *const *in) {
    return musa_cat(2, in, 1);
}
TEST(grad_cat) {
    GC(cat, 2, true, in64(2, S(2, 3), -1, 1, L_TRANSPOSED), in64(2, S(2, 1), -1, 1, L_CONTIG));
}

static musa_tensor *index_2x2(void) {
    return from_list(MUSA_DTYPE_INT64, 2, S(2, 2), (double[]){0, 2, 2, 1});
}
static musa_tensor *f_gather(musa_tensor *const *in) {
    musa_tensor *i = index_2x2(), *r = musa_gather(in[0], 1, i);
    musa_tensor_release(i);
    return r;
}
TEST(grad_gather) {
    GC(gather, 1, true, in64(2, S(2, 3), -1, 1, L_TRANSPOSED));
}
static musa_tensor *f_scatter(musa_tensor *const *in) {
    musa_tensor *i = from_list(MUSA_DTYPE_INT64, 2, S(2, 2), (double[]){0, 2, 1, 0});
    musa_tensor *r = musa_scatter(in[0], 1, i, in[1]);
    musa_tensor_release(i);
    return r;
}
static musa_tensor *f_scatter_add(musa_tensor *const *in) {
    musa_tensor *i = index_2x2(), *r = musa_scatter_add(in[0], 1, i, in[1]);
    musa_tensor_release(i);
    return r;
}
/* the reducing scatters: src has index's shape; index_2x2 hits (0, 2) twice */
#define F_SCATTER_RED(NAME)                                                                        \
    static musa_tensor *f_##NAME(musa_tensor *const *in) {                                         \
        musa_tensor *i = index_2x2(), *r = musa_##NAME(in[0], 1, i, in[1]);                        \
        musa_tensor_release(i);                                                                    \
        return r;                                                                                  \
    }
F_SCATTER_RED(scatter_prod)
F_SCATTER_RED(scatter_amax)
F_SCATTER_RED(scatter_amin)
TEST(grad_scatter_prod) {
    GC(scatter_prod, 2, true, in64(2, S(2, 3), 0.5, 2, L_CONTIG),
       in64(2, S(2, 2), -2, 2, L_CONTIG));
}
TEST(grad_scatter_amax) {
    GC(scatter_amax, 2, true, in64(2, S(2, 3), -1, 1, L_CONTIG), in64(2, S(2, 2), -1, 1, L_CONTIG));
}
TEST(grad_scatter_amin) {
    GC(scatter_amin, 2, true, in64(2, S(2, 3), -1, 1, L_CONTIG), in64(2, S(2, 2), -1, 1, L_CONTIG));
}
TEST(grad_scatter) {
    GC(scatter, 2, true, in64(2, S(2, 3), -1, 1, L_CONTIG), in64(2, S(2, 2), -1, 1, L_TRANSPOSED));
}
TEST(grad_scatter_add) {
    GC(scatter_add, 2, true, in64(2, S(2, 3), -1, 1, L_CONTIG), in64(2, S(2, 2), -1, 1, L_CONTIG));
}
static musa_tensor *f_index_select(musa_tensor *const *in) {
    musa_tensor *i = from_list(MUSA_DTYPE_INT64, 1, S(3), (double[]){2, 0, 2});
    musa_tensor *r = musa_index_select(in[0], 0, i);
    musa_tensor_release(i);
    return r;
}
TEST(grad_index_select) {
    GC(index_select, 1, true, in64(2, S(3, 2), -1, 1, L_TRANSPOSED));
}
static musa_tensor *f_index_add(musa_tensor *const *in) {
    musa_tensor *i = from_list(MUSA_DTYPE_INT64, 1, S(3), (double[]){1, 1, 0});
    musa_tensor *r = musa_index_add(in[0], 1, i, in[1]);
    musa_tensor_release(i);
    return r;
}
TEST(grad_index_add) {
    GC(index_add, 2, true, in64(2, S(2, 2), -1, 1, L_CONTIG),
       in64(2, S(2, 3), -1, 1, L_TRANSPOSED));
}
static musa_tensor *f_pad(musa_tensor *const *in) {
    return musa_pad(in[0], 4, S(1, -1, 2, 0), 0.5);
}
TEST(grad_pad) {
    GC(pad, 1, true, in64(2, S(2, 3), -1, 1, L_TRANSPOSED));
}
static musa_tensor *f_flip(musa_tensor *const *in) {
    return musa_flip(in[0], 2, S(0, 1));
}
TEST(grad_flip) {
    GC(flip, 1, true, in64(2, S(2, 3), -1, 1, L_STRIDED));
}
static musa_tensor *f_tril(musa_tensor *const *in) {
    return musa_tril(in[0], 0);
}
static musa_tensor *f_triu(musa_tensor *const *in) {
    return musa_triu(in[0], 1);
}
TEST(grad_tril) {
    GC(tril, 1, true, in64(2, S(3, 3), -1, 1, L_TRANSPOSED));
}
TEST(grad_triu) {
    GC(triu, 1, true, in64(3, S(2, 2, 3), -1, 1, L_CONTIG));
}
static musa_tensor *f_cumsum(musa_tensor *const *in) {
    return musa_cumsum(in[0], 1);
}
TEST(grad_cumsum) {
    GC(cumsum, 1, true, in64(2, S(2, 4), -1, 1, L_TRANSPOSED));
}
static musa_tensor *f_cumprod(musa_tensor *const *in) {
    return musa_cumprod(in[0], 1);
}
TEST(grad_cumprod) { /* second order through the pairwise form */
    GC(cumprod, 1, true, in64(2, S(2, 4), -1, 1, L_TRANSPOSED));
}
static musa_tensor *f_logcumsumexp(musa_tensor *const *in) {
    return musa_logcumsumexp(in[0], 0);
}
TEST(grad_logcumsumexp) { /* second order through the pairwise form */
    GC(logcumsumexp, 1, true, in64(2, S(3, 4), -2, 2, L_TRANSPOSED));
}
static musa_tensor *f_cummax(musa_tensor *const *in) {
    musa_tensor *v = NULL, *i = NULL;
    if (musa_cummax(in[0], 1, &v, &i)) return NULL;
    musa_tensor_release(i);
    return v;
}
static musa_tensor *f_cummin(musa_tensor *const *in) {
    musa_tensor *v = NULL, *i = NULL;
    if (musa_cummin(in[0], 0, &v, &i)) return NULL;
    musa_tensor_release(i);
    return v;
}
TEST(grad_cummax) {
    GC(cummax, 1, true, in64(2, S(2, 5), -1, 1, L_TRANSPOSED));
}
TEST(grad_cummin) {
    GC(cummin, 1, true, in64(2, S(4, 2), -1, 1, L_CONTIG));
}
static musa_tensor *f_sort(musa_tensor *const *in) {
    musa_tensor *v = NULL, *i = NULL;
    musa_sort(in[0], 1, true, &v, &i);
    musa_tensor_release(i);
    return v;
}
static musa_tensor *f_topk(musa_tensor *const *in) {
    musa_tensor *v = NULL, *i = NULL;
    musa_topk(in[0], 2, 0, false, &v, &i);
    musa_tensor_release(i);
    return v;
}
TEST(grad_sort) {
    GC(sort, 1, true, in64(2, S(2, 4), -1, 1, L_TRANSPOSED));
}
TEST(grad_topk) {
    GC(topk, 1, true, in64(2, S(4, 2), -1, 1, L_CONTIG));
}

/* composites get their gradients from their primitives */
static musa_tensor *f_logsumexp(musa_tensor *const *in) {
    return musa_logsumexp(in[0], 1, S(1), false);
}
static musa_tensor *f_var(musa_tensor *const *in) {
    return musa_var(in[0], 1, S(0), 1, true);
}
static musa_tensor *f_norm3(musa_tensor *const *in) {
    return musa_norm(in[0], 3, 0, NULL, false);
}
TEST(grad_composites) {
    GC(logsumexp, 1, true, in64(2, S(3, 4), -2, 2, L_TRANSPOSED));
    GC(var, 1, true, in64(2, S(3, 4), -2, 2, L_CONTIG));
    GC(norm3, 1, true, in64(2, S(2, 3), 0.5, 2, L_CONTIG));
}
