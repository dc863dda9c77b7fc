/*
 * onnx_ops.c - the ONNX ops musa's C importer reads, each as calls of musa's
 * public ops (so each is recorded as graph nodes, checked by those ops'
 * inference, and runs in plans like any captured code). The table at the
 * end lists every op with its input and output counts and attributes,
 * which onnx.c checks at load. Semantics follow the ONNX operator docs for
 * opsets 7 to 18; where an opset changed an op (axes from an attribute to
 * an input, Softmax's axis), both forms are read.
 *
 * Handlers name intermediate tensors with T() (released after the node)
 * and give their outputs with put(): a handler never releases anything.
 */
#include "onnx.h"

#include <math.h>
#include <stdio.h>

#include "../tensor/tensor.h"

#ifdef MUSA_HAVE_ONNX

#define ARGS        onnx_build *b, const onnx_node *n, musa_tensor **in, int n_out, musa_tensor **out
#define UNUSED_ARGS (void)b, (void)n, (void)in, (void)n_out, (void)out
#define T(expr)     onnx_tmp(b, (expr))
#define NUM(v)      T(musa_number(v))
#define ERR         musa_last_error_code()
/* evaluate expr into a temp named v, returning the error if it failed */
#define LET(v, expr)                                                                               \
    musa_tensor *v = T(expr);                                                                      \
    if (!v) return ERR

static int put(musa_tensor **out, musa_tensor *v) {
    if (!v) return ERR;
    *out = musa_tensor_retain(v);
    return MUSA_OK;
}

#define FAIL(code, ...) onnx_fail(b, n, code, __VA_ARGS__)

/* axis a of rank nd (negatives count from the end) into *out, checked */
static int axis_of(onnx_build *b, const onnx_node *n, int64_t a, int nd, int64_t *out) {
    int64_t r = a < 0 ? a + nd : a;
    if (r < 0 || r >= (nd ? nd : 1))
        return FAIL(MUSA_ERR_INDEX, "axis %lld is out of range for %d dims", (long long)a, nd);
    *out = r;
    return MUSA_OK;
}

/* ---- elementwise ---- */

#define UNARY(name, call)                                                                          \
    static int op_##name(ARGS) {                                                                   \
        UNUSED_ARGS;                                                                               \
        musa_tensor *x = in[0];                                                                    \
        return put(out, T(call));                                                                  \
    }
UNARY(Neg, musa_neg(x))
UNARY(Abs, musa_abs(x))
UNARY(Sign, musa_sign(x))
UNARY(Exp, musa_exp(x))
UNARY(Log, musa_log(x))
UNARY(Sqrt, musa_sqrt(x))
UNARY(Reciprocal, musa_reciprocal(x))
UNARY(Sin, musa_sin(x))
UNARY(Cos, musa_cos(x))
UNARY(Tanh, musa_tanh(x))
UNARY(Sigmoid, musa_sigmoid(x))
UNARY(Erf, musa_erf(x))
UNARY(Relu, musa_relu(x))
UNARY(Floor, musa_floor(x))
UNARY(Ceil, musa_ceil(x))
UNARY(Round, musa_round(x))
UNARY(Not, musa_logical_not(x))
UNARY(IsNaN, musa_isnan(x))
UNARY(Asin, musa_asin(x))
UNARY(Acos, musa_acos(x))
UNARY(Atan, musa_atan(x))
UNARY(Asinh, musa_asinh(x))
UNARY(Acosh, musa_acosh(x))
UNARY(Atanh, musa_atanh(x))
UNARY(Identity, musa_tensor_retain(x))
UNARY(Softplus, musa_softplus(x, 1.0, 20.0))
UNARY(LeakyRelu, musa_leaky_relu(x, onnx_attr_float(n, "alpha", 0.01)))
UNARY(Elu, musa_elu(x, onnx_attr_float(n, "alpha", 1.0)))

static int op_Softsign(ARGS) {
    UNUSED_ARGS;
    LET(a, musa_abs(in[0]));
    LET(d, musa_add(a, NUM(1.0)));
    return put(out, T(musa_div(in[0], d)));
}

static int op_IsInf(ARGS) {
    UNUSED_ARGS;
    bool pos = onnx_attr_int(n, "detect_positive", 1), neg = onnx_attr_int(n, "detect_negative", 1);
    LET(inf, musa_isinf(in[0]));
    if (pos && neg) return put(out, inf);
    LET(zero, musa_zeros_like(in[0]));
    LET(side, pos ? musa_gt(in[0], zero) : neg ? musa_lt(in[0], zero) : musa_ne(zero, zero));
    return put(out, T(musa_logical_and(inf, side)));
}

static int op_Selu(ARGS) {
    UNUSED_ARGS;
    double alpha = onnx_attr_float(n, "alpha", 1.67326319217681884765625);
    double gamma = onnx_attr_float(n, "gamma", 1.05070102214813232421875);
    musa_tensor *x = in[0];
    LET(em1, musa_sub(T(musa_exp(x)), NUM(1.0)));
    LET(neg, musa_mul(em1, NUM(alpha)));
    LET(pos, musa_gt(x, NUM(0.0)));
    LET(w, musa_where(pos, x, neg));
    return put(out, T(musa_mul(w, NUM(gamma))));
}

static int op_HardSigmoid(ARGS) {
    UNUSED_ARGS;
    double lo = 0, hi = 1;
    LET(y, musa_add(T(musa_mul(in[0], NUM(onnx_attr_float(n, "alpha", 0.2)))),
                    NUM(onnx_attr_float(n, "beta", 0.5))));
    return put(out, T(musa_clamp(y, &lo, &hi)));
}

static int op_HardSwish(ARGS) {
    UNUSED_ARGS;
    double lo = 0, hi = 1;
    LET(y, musa_add(T(musa_mul(in[0], NUM(1.0 / 6.0))), NUM(0.5)));
    return put(out, T(musa_mul(in[0], T(musa_clamp(y, &lo, &hi)))));
}

static int op_PRelu(ARGS) {
    UNUSED_ARGS;
    LET(pos, musa_ge(in[0], NUM(0.0)));
    return put(out, T(musa_where(pos, in[0], T(musa_mul(in[0], in[1])))));
}

static int op_ThresholdedRelu(ARGS) {
    UNUSED_ARGS;
    LET(keep, musa_gt(in[0], NUM(onnx_attr_float(n, "alpha", 1.0))));
    return put(out, T(musa_where(keep, in[0], T(musa_zeros_like(in[0])))));
}

/* sinh, cosh: (e^x -/+ e^-x) / 2; tan: sin / cos */
static int hyperbolic(onnx_build *b, musa_tensor **in, musa_tensor **out, bool cosh) {
    LET(ep, musa_exp(in[0]));
    LET(em, musa_exp(T(musa_neg(in[0]))));
    return put(out, T(musa_mul(T(cosh ? musa_add(ep, em) : musa_sub(ep, em)), NUM(0.5))));
}
static int op_Sinh(ARGS) {
    UNUSED_ARGS;
    return hyperbolic(b, in, out, false);
}
static int op_Cosh(ARGS) {
    UNUSED_ARGS;
    return hyperbolic(b, in, out, true);
}
static int op_Tan(ARGS) {
    UNUSED_ARGS;
    return put(out, T(musa_div(T(musa_sin(in[0])), T(musa_cos(in[0])))));
}

static int op_Celu(ARGS) { /* max(0, x) + min(0, alpha (exp(x / alpha) - 1)) */
    UNUSED_ARGS;
    double alpha = onnx_attr_float(n, "alpha", 1.0), zero = 0;
    if (alpha == 0) return FAIL(MUSA_ERR_VALUE, "alpha is 0");
    LET(e,
        musa_mul(T(musa_sub(T(musa_exp(T(musa_div(in[0], NUM(alpha))))), NUM(1.0))), NUM(alpha)));
    return put(out, T(musa_add(T(musa_clamp(in[0], &zero, NULL)), T(musa_clamp(e, NULL, &zero)))));
}

static int op_Shrink(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    double lambd = onnx_attr_float(n, "lambd", 0.5), bias = onnx_attr_float(n, "bias", 0.0);
    LET(hi,
        musa_where(T(musa_gt(x, NUM(lambd))), T(musa_sub(x, NUM(bias))), T(musa_zeros_like(x))));
    return put(out, T(musa_where(T(musa_lt(x, NUM(-lambd))), T(musa_add(x, NUM(bias))), hi)));
}

#define BINARY(name, call)                                                                         \
    static int op_##name(ARGS) {                                                                   \
        UNUSED_ARGS;                                                                               \
        return put(out, T(call(in[0], in[1])));                                                    \
    }
BINARY(Add, musa_add)
BINARY(Sub, musa_sub)
BINARY(Mul, musa_mul)
BINARY(Equal, musa_eq)
BINARY(Less, musa_lt)
BINARY(LessOrEqual, musa_le)
BINARY(Greater, musa_gt)
BINARY(GreaterOrEqual, musa_ge)
BINARY(And, musa_logical_and)
BINARY(Or, musa_logical_or)
BINARY(Xor, musa_logical_xor)
BINARY(MatMul, musa_matmul)

static int op_Div(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0], *y = in[1];
    if (musa_is_float((musa_dtype)x->dtype)) return put(out, T(musa_div(x, y)));
    /* integers: truncation toward zero = floor, plus one where the signs
     * differ and the division is not exact */
    LET(q, musa_floor_divide(x, y));
    LET(inexact, musa_ne(T(musa_remainder(x, y)), NUM(0.0)));
    LET(differ, musa_logical_xor(T(musa_lt(x, NUM(0.0))), T(musa_lt(y, NUM(0.0)))));
    LET(fix, musa_cast(T(musa_logical_and(inexact, differ)), (musa_dtype)q->dtype));
    return put(out, T(musa_add(q, fix)));
}

static int op_Pow(ARGS) {
    UNUSED_ARGS;
    LET(y, musa_pow(in[0], in[1]));
    return put(out, y->dtype == in[0]->dtype ? y : T(musa_cast(y, (musa_dtype)in[0]->dtype)));
}

static int op_Mod(ARGS) {
    UNUSED_ARGS;
    bool f = onnx_attr_int(n, "fmod", 0);
    if (!f && musa_is_float((musa_dtype)in[0]->dtype))
        return FAIL(MUSA_ERR_VALUE, "fmod=0 on floating inputs (ONNX requires fmod=1 there)");
    return put(out, T(f ? musa_fmod(in[0], in[1]) : musa_remainder(in[0], in[1])));
}

/* Max, Min, Sum, Mean: folds over any number of inputs */
static int variadic(onnx_build *b, const onnx_node *n, musa_tensor **in, musa_tensor **out,
                    musa_tensor *(*fn)(musa_tensor *, musa_tensor *), bool mean) {
    musa_tensor *acc = in[0];
    for (int i = 1; i < n->n_in; i++)
        if (!(acc = T(fn(acc, in[i])))) return ERR;
    if (mean && !(acc = T(musa_div(acc, NUM((double)n->n_in))))) return ERR;
    return put(out, acc == in[0] ? T(musa_tensor_retain(acc)) : acc);
}
static int op_Max(ARGS) {
    UNUSED_ARGS;
    return variadic(b, n, in, out, musa_maximum, false);
}
static int op_Min(ARGS) {
    UNUSED_ARGS;
    return variadic(b, n, in, out, musa_minimum, false);
}
static int op_Sum(ARGS) {
    UNUSED_ARGS;
    return variadic(b, n, in, out, musa_add, false);
}
static int op_Mean(ARGS) {
    UNUSED_ARGS;
    return variadic(b, n, in, out, musa_add, true);
}

static int op_Where(ARGS) {
    UNUSED_ARGS;
    return put(out, T(musa_where(in[0], in[1], in[2])));
}

static int op_Clip(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    if (onnx_opset(b) < 11) {
        double lo = onnx_attr_float(n, "min", -INFINITY), hi = onnx_attr_float(n, "max", INFINITY);
        return put(out, T(musa_clamp(x, &lo, &hi)));
    }
    for (int i = 1; i < 3; i++) {
        musa_tensor *bound = i < n->n_in ? in[i] : NULL;
        if (!bound) continue;
        if (onnx_known(b, i)) { /* a number: clamp keeps x's dtype */
            double v;
            int cnt, rc = onnx_doubles(b, n, i, bound, &v, 1, &cnt);
            if (rc) return rc;
            if (cnt != 1) return FAIL(MUSA_ERR_VALUE, "input %d must hold one value", i);
            if (!(x = T(musa_clamp(x, i == 1 ? &v : NULL, i == 2 ? &v : NULL)))) return ERR;
        } else if (!(x = T(i == 1 ? musa_maximum(x, bound) : musa_minimum(x, bound)))) {
            return ERR;
        }
    }
    return put(out, x == in[0] ? T(musa_tensor_retain(x)) : x);
}

static int op_Cast(ARGS) {
    UNUSED_ARGS;
    int64_t to = onnx_attr_int(n, "to", 0);
    int dt = musa_onnx_dtype(to);
    if (dt < 0)
        return FAIL(MUSA_ERR_TYPE, "Cast to ONNX type %lld, which musa does not have",
                    (long long)to);
    return put(out, T(musa_cast(in[0], (musa_dtype)dt)));
}

static int op_CastLike(ARGS) {
    UNUSED_ARGS;
    return put(out, T(musa_cast(in[0], (musa_dtype)in[1]->dtype)));
}

/* ---- reductions ---- */

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_SUMSQ, R_LOGSUMEXP, R_LOGSUM };

static int reduce(onnx_build *b, const onnx_node *n, musa_tensor **in, musa_tensor **out,
                  int kind) {
    musa_tensor *x = in[0];
    int64_t axes[MUSA_MAX_DIMS];
    int k = 0, rc;
    if (onnx_has_attr(n, "axes")) {
        k = onnx_attr_ints(n, "axes", axes, MUSA_MAX_DIMS);
        if (k > MUSA_MAX_DIMS) return FAIL(MUSA_ERR_VALUE, "%d axes", k);
    } else if (n->n_in > 1 && in[1] && (rc = onnx_ints(b, n, 1, in[1], axes, MUSA_MAX_DIMS, &k))) {
        return rc;
    }
    if (!k) {
        if (onnx_attr_int(n, "noop_with_empty_axes", 0)) return put(out, T(musa_tensor_retain(x)));
        for (int d = 0; d < x->ndim; d++) axes[k++] = d;
    }
    for (int i = 0; i < k; i++)
        if ((rc = axis_of(b, n, axes[i], x->ndim, &axes[i]))) return rc;
    bool keep = onnx_attr_int(n, "keepdims", 1);
    if (!x->ndim) k = 0; /* a scalar reduces to itself */
    switch (kind) {
    case R_SUM:
        return put(out, T(musa_sum(x, k, axes, keep)));
    case R_MEAN:
        return put(out, T(musa_mean(x, k, axes, keep)));
    case R_MAX:
        return put(out, T(musa_amax(x, k, axes, keep)));
    case R_MIN:
        return put(out, T(musa_amin(x, k, axes, keep)));
    case R_PROD:
        return put(out, T(musa_prod(x, k, axes, keep)));
    case R_L1:
        return put(out, T(musa_sum(T(musa_abs(x)), k, axes, keep)));
    case R_L2:
        return put(out, T(musa_sqrt(T(musa_sum(T(musa_mul(x, x)), k, axes, keep)))));
    case R_SUMSQ:
        return put(out, T(musa_sum(T(musa_mul(x, x)), k, axes, keep)));
    case R_LOGSUMEXP:
        return put(out, T(musa_logsumexp(x, k, axes, keep)));
    default:
        return put(out, T(musa_log(T(musa_sum(x, k, axes, keep)))));
    }
}
#define REDUCE(name, kind)                                                                         \
    static int op_##name(ARGS) {                                                                   \
        UNUSED_ARGS;                                                                               \
        return reduce(b, n, in, out, kind);                                                        \
    }
REDUCE(ReduceSum, R_SUM)
REDUCE(ReduceMean, R_MEAN)
REDUCE(ReduceMax, R_MAX)
REDUCE(ReduceMin, R_MIN)
REDUCE(ReduceProd, R_PROD)
REDUCE(ReduceL1, R_L1)
REDUCE(ReduceL2, R_L2)
REDUCE(ReduceSumSquare, R_SUMSQ)
REDUCE(ReduceLogSumExp, R_LOGSUMEXP)
REDUCE(ReduceLogSum, R_LOGSUM)

static int arg_reduce(onnx_build *b, const onnx_node *n, musa_tensor **in, musa_tensor **out,
                      bool max) {
    musa_tensor *x = in[0];
    int64_t ax = 0;
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", 0), x->ndim, &ax);
    if (rc) return rc;
    bool keep = onnx_attr_int(n, "keepdims", 1);
    if (!onnx_attr_int(n, "select_last_index", 0))
        return put(out, T(max ? musa_argmax(x, ax, keep) : musa_argmin(x, ax, keep)));
    /* the last index: the first in the flipped order, counted from the end */
    LET(f, musa_flip(x, 1, &ax));
    LET(i, max ? musa_argmax(f, ax, keep) : musa_argmin(f, ax, keep));
    return put(out, T(musa_sub(T(musa_number_int(x->shape[ax] - 1)), i)));
}
static int op_ArgMax(ARGS) {
    UNUSED_ARGS;
    return arg_reduce(b, n, in, out, true);
}
static int op_ArgMin(ARGS) {
    UNUSED_ARGS;
    return arg_reduce(b, n, in, out, false);
}

/* ---- linear algebra and nn ---- */

static int op_Gemm(ARGS) {
    UNUSED_ARGS;
    musa_tensor *A = in[0], *B = in[1], *C = n->n_in > 2 ? in[2] : NULL;
    if (A->ndim != 2 || B->ndim != 2)
        return FAIL(MUSA_ERR_VALUE, "A and B must be matrices; they have %d and %d dims", A->ndim,
                    B->ndim);
    double alpha = onnx_attr_float(n, "alpha", 1.0), beta = onnx_attr_float(n, "beta", 1.0);
    bool ta = onnx_attr_int(n, "transA", 0), tb = onnx_attr_int(n, "transB", 0);
    if (ta && !(A = T(musa_transpose(A, 0, 1)))) return ERR;
    /* the usual layer: x W^T + b in one GEMM */
    if (tb && alpha == 1.0 && beta == 1.0 && (!C || (C->ndim == 1 && C->shape[0] == B->shape[0])))
        return put(out, T(musa_linear(A, B, C)));
    if (tb && !(B = T(musa_transpose(B, 0, 1)))) return ERR;
    LET(y, musa_matmul(A, B));
    if (alpha != 1.0 && !(y = T(musa_mul(y, NUM(alpha))))) return ERR;
    if (C && beta != 0.0) {
        musa_tensor *c = beta == 1.0 ? C : T(musa_mul(C, NUM(beta)));
        if (!c || !(y = T(musa_add(y, c)))) return ERR;
    }
    return put(out, y);
}

#define GEOM_MAX ((int64_t)1 << 16) /* the largest kernel, stride, dilation or pad read */

/* The spatial pads (begins, then ends) of a convolution or pool over x's
 * last nd dims: from pads, or by auto_pad (SAME_*: output = ceil(in / stride)). */
static int spatial_pads(onnx_build *b, const onnx_node *n, const musa_tensor *x, int nd,
                        const int64_t *k, const int64_t *st, const int64_t *dl, int64_t *pads) {
    const char *auto_pad = onnx_attr_str(n, "auto_pad", "NOTSET");
    for (int i = 0; i < 2 * nd; i++) pads[i] = 0;
    if (!strcmp(auto_pad, "NOTSET")) {
        int np = onnx_attr_ints(n, "pads", pads, 2 * nd);
        if (np && np != 2 * nd)
            return FAIL(MUSA_ERR_VALUE, "pads has %d values; %d spatial dims need %d", np, nd,
                        2 * nd);
        for (int i = 0; i < 2 * nd; i++)
            if (pads[i] < 0 || pads[i] > GEOM_MAX)
                return FAIL(MUSA_ERR_VALUE, "pads must be in [0, 2^16]");
        return MUSA_OK;
    }
    if (!strcmp(auto_pad, "VALID")) return MUSA_OK;
    bool upper = !strcmp(auto_pad, "SAME_UPPER");
    if (!upper && strcmp(auto_pad, "SAME_LOWER"))
        return FAIL(MUSA_ERR_VALUE,
                    "auto_pad '%.40s' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", auto_pad);
    for (int i = 0; i < nd; i++) {
        int64_t size = x->shape[x->ndim - nd + i], o = (size + st[i] - 1) / st[i];
        int64_t total = (o - 1) * st[i] + (k[i] - 1) * dl[i] + 1 - size;
        if (total < 0) total = 0;
        pads[i] = upper ? total / 2 : total - total / 2;
        pads[i + nd] = total - pads[i];
    }
    return MUSA_OK;
}

/* x padded by ONNX-order pads (begins, then ends) on its last nd dims */
static musa_tensor *pad_spatial(onnx_build *b, musa_tensor *x, int nd, const int64_t *pads,
                                double value) {
    int64_t tp[2 * MUSA_MAX_DIMS];
    for (int i = 0; i < nd; i++) { /* musa_pad lists the last dim first */
        tp[2 * i] = pads[nd - 1 - i];
        tp[2 * i + 1] = pads[2 * nd - 1 - i];
    }
    return T(musa_pad(x, 2 * nd, tp, value));
}

/* The geometry attributes of Conv, ConvTranspose and the pools: nd
 * spatial dims, kernel, strides and dilations (defaults 1) and pads. For 1
 * or 2 dims also as 2-d (1-d runs as 2-d on a height-1 view); 3-d runs as
 * 2-d ops over depth slabs (conv3d and friends below) from the raw fields. */
typedef struct geom {
    int nd;
    int64_t k[2], st[2], dl[2], pads[4];     /* 2-d; pads: top, left, bottom, right */
    int64_t rk[3], rst[3], rdl[3], rpads[6]; /* as given: pads begins, then ends */
} geom;

static int read_geom(onnx_build *b, const onnx_node *n, const musa_tensor *x, const int64_t *wk,
                     geom *g) {
    int nd = x->ndim - 2;
    if (nd < 1 || nd > 3)
        return FAIL(MUSA_ERR_VALUE, "a %d-d input: 1 to 3 spatial dims are read", x->ndim);
    int64_t k[MUSA_MAX_DIMS], st[MUSA_MAX_DIMS], dl[MUSA_MAX_DIMS], pads[2 * MUSA_MAX_DIMS];
    int nk = onnx_attr_ints(n, "kernel_shape", k, MUSA_MAX_DIMS);
    if (!nk && wk) memcpy(k, wk, sizeof(int64_t) * (size_t)nd), nk = nd;
    int ns = onnx_attr_ints(n, "strides", st, MUSA_MAX_DIMS);
    int ndl = onnx_attr_ints(n, "dilations", dl, MUSA_MAX_DIMS);
    if (nk != nd || (ns && ns != nd) || (ndl && ndl != nd))
        return FAIL(MUSA_ERR_VALUE,
                    "kernel_shape, strides and dilations must have %d values (the input's spatial "
                    "dims); they have %d, %d and %d",
                    nd, nk, ns, ndl);
    for (int i = 0; i < nd; i++) {
        if (!ns) st[i] = 1;
        if (!ndl) dl[i] = 1;
        if (k[i] < 1 || st[i] < 1 || dl[i] < 1 || k[i] > GEOM_MAX || st[i] > GEOM_MAX ||
            dl[i] > GEOM_MAX)
            return FAIL(MUSA_ERR_VALUE, "kernel_shape, strides and dilations must be in [1, 2^16]");
    }
    int rc = spatial_pads(b, n, x, nd, k, st, dl, pads);
    if (rc) return rc;
    g->nd = nd;
    for (int i = 0; i < nd; i++) {
        g->rk[i] = k[i], g->rst[i] = st[i], g->rdl[i] = dl[i];
        g->rpads[i] = pads[i], g->rpads[3 + i] = pads[nd + i];
    }
    if (nd == 3) return MUSA_OK;
    int off = 2 - nd; /* 1-d: height 1, no padding */
    for (int i = 0; i < 2; i++)
        g->k[i] = 1, g->st[i] = 1, g->dl[i] = 1, g->pads[i] = g->pads[i + 2] = 0;
    for (int i = 0; i < nd; i++) {
        g->k[off + i] = k[i], g->st[off + i] = st[i], g->dl[off + i] = dl[i];
        g->pads[off + i] = pads[i], g->pads[2 + off + i] = pads[nd + i];
    }
    return MUSA_OK;
}

static musa_tensor *as_2d(onnx_build *b, musa_tensor *x, int nd) {
    return nd == 1 ? T(musa_unsqueeze(x, 2)) : x;
}

static int from_2d(onnx_build *b, musa_tensor **out, musa_tensor *y, int nd) {
    if (!y) return ERR;
    return put(out, nd == 1 ? T(musa_squeeze(y, 1, (int64_t[]){2})) : y);
}

static bool symmetric(const geom *g) {
    return g->pads[0] == g->pads[2] && g->pads[1] == g->pads[3];
}

/* ---- 3-d: 2-d ops over depth slabs ---- */

/* (N, C, D, H, W) -> (N*D, C, H, W) and back */
static musa_tensor *planes_of(onnx_build *b, musa_tensor *x) {
    static const int64_t perm[5] = {0, 2, 1, 3, 4};
    int64_t s4[4] = {x->shape[0] * x->shape[2], x->shape[1], x->shape[3], x->shape[4]};
    return T(musa_reshape(T(musa_permute(x, 5, perm)), 4, s4));
}
static musa_tensor *volume_of(onnx_build *b, musa_tensor *y, int64_t N, int64_t D) {
    static const int64_t perm[5] = {0, 2, 1, 3, 4};
    int64_t s5[5] = {N, D, y->shape[1], y->shape[2], y->shape[3]};
    return T(musa_permute(T(musa_reshape(y, 5, s5)), 5, perm));
}

static musa_tensor *add_bias3(onnx_build *b, musa_tensor *y, musa_tensor *bias) {
    if (!y || !bias) return y;
    int64_t shape[4] = {bias->shape[0], 1, 1, 1};
    return T(musa_add(y, T(musa_reshape(bias, 4, shape))));
}

/* depth tap t's slab of xp: xp[:, :, t*dl :: st][:count] */
static musa_tensor *depth_slab(onnx_build *b, musa_tensor *xp, const geom *g, int64_t t,
                               int64_t count) {
    return T(
        musa_slice(xp, 2, t * g->rdl[0], t * g->rdl[0] + g->rst[0] * (count - 1) + 1, g->rst[0]));
}

/* Conv over (N, C, D, H, W): the sum over depth taps of 2-d convolutions */
static int conv3d(onnx_build *b, const onnx_node *n, musa_tensor *x, musa_tensor *w,
                  musa_tensor *bias, const geom *g, musa_tensor **out) {
    musa_tensor *xp = pad_spatial(b, x, 3, g->rpads, 0.0);
    if (!xp) return ERR;
    int64_t reach = g->rdl[0] * (g->rk[0] - 1) + 1, D = xp->shape[2];
    if (D < reach)
        return FAIL(MUSA_ERR_VALUE, "the kernel depth reaches %lld; the padded input has %lld",
                    (long long)reach, (long long)D);
    int64_t od = (D - reach) / g->rst[0] + 1, zero[2] = {0, 0};
    musa_tensor *acc = NULL;
    for (int64_t t = 0; t < g->rk[0]; t++) {
        musa_tensor *slab = depth_slab(b, xp, g, t, od), *p = slab ? planes_of(b, slab) : NULL;
        musa_tensor *wt = T(musa_select(w, 2, t));
        musa_tensor *y = p && wt ? T(musa_conv2d(p, wt, NULL, g->rst + 1, zero, g->rdl + 1,
                                                 onnx_attr_int(n, "group", 1)))
                                 : NULL;
        if (!y || !(acc = acc ? T(musa_add(acc, y)) : y)) return ERR;
    }
    return put(out, add_bias3(b, volume_of(b, acc, x->shape[0], od), bias));
}

/* ConvTranspose over (N, C, D, H, W): each depth tap's 2-d transposed
 * convolution of every input plane, added at depths d*stride + t*dilation;
 * then ONNX's begin/end pads (negative: zeros added) and the bias. */
static int conv_transpose3d(onnx_build *b, const onnx_node *n, musa_tensor *x, musa_tensor *w,
                            musa_tensor *bias, const geom *g, const int64_t *begin,
                            const int64_t *end, musa_tensor **out) {
    int64_t N = x->shape[0], D = x->shape[2];
    int64_t full = (D - 1) * g->rst[0] + (g->rk[0] - 1) * g->rdl[0] + 1, zero[2] = {0, 0};
    LET(p, planes_of(b, x));
    musa_tensor *acc = NULL;
    int64_t *ix = malloc(sizeof(int64_t) * (size_t)(D + 1));
    if (!ix) return musa_err_nomem("onnx ConvTranspose", 8 * (size_t)D);
    for (int64_t t = 0; t < g->rk[0]; t++) {
        musa_tensor *wt = T(musa_select(w, 2, t));
        musa_tensor *y = wt ? T(musa_conv_transpose2d(p, wt, NULL, g->rst + 1, zero, zero,
                                                      g->rdl + 1, onnx_attr_int(n, "group", 1)))
                            : NULL;
        musa_tensor *v = y ? volume_of(b, y, N, D) : NULL;
        if (v && !acc) {
            int64_t shape[5] = {N, v->shape[1], full, v->shape[3], v->shape[4]};
            acc = T(musa_zeros(5, shape, (musa_dtype)v->dtype));
        }
        for (int64_t d = 0; d < D; d++) ix[d] = d * g->rst[0] + t * g->rdl[0];
        musa_tensor *it = v && acc ? T(onnx_const(ix, 1, &D, MUSA_DTYPE_INT64)) : NULL;
        if (!it || !(acc = T(musa_index_add(acc, 2, it, v)))) {
            free(ix);
            return ERR;
        }
    }
    free(ix);
    int64_t pads[6];
    for (int i = 0; i < 3; i++) pads[i] = -begin[i], pads[3 + i] = -end[i]; /* negative pads crop */
    return put(out, add_bias3(b, pad_spatial(b, acc, 3, pads, 0.0), bias));
}

/* The output length of a pool over `size` with pads pb, pe (ceil_mode: no
 * window may start in the end padding), and the end padding it needs. */
static int64_t pool_len(int64_t size, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                        bool ceil_mode, int64_t *end_pad) {
    int64_t reach = d * (k - 1) + 1, span = size + pb + pe - reach;
    if (span < 0) return -1;
    int64_t o = (span + (ceil_mode ? s - 1 : 0)) / s + 1;
    if (ceil_mode && (o - 1) * s >= size + pb) o--;
    int64_t need = (o - 1) * s + reach - size - pb;
    *end_pad = need > pe ? need : pe;
    return o;
}

/* MaxPool / AveragePool over (N, C, D, H, W) */
static int pool3d(onnx_build *b, const onnx_node *n, musa_tensor *x, const geom *g, bool max,
                  bool ceil_mode, musa_tensor **out) {
    int64_t outs[3], pads[6], N = x->shape[0], C = x->shape[1];
    for (int i = 0; i < 3; i++) {
        pads[i] = g->rpads[i];
        outs[i] = pool_len(x->shape[2 + i], g->rk[i], g->rst[i], g->rdl[i], g->rpads[i],
                           g->rpads[3 + i], ceil_mode, &pads[3 + i]);
        if (outs[i] < 1) return FAIL(MUSA_ERR_VALUE, "the window is larger than the padded input");
    }
    if (!max && (g->rdl[0] != 1 || g->rdl[1] != 1 || g->rdl[2] != 1))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "a dilated AveragePool");
    bool include = onnx_attr_int(n, "count_include_pad", 0);
    int64_t zero[2] = {0, 0};
    /* the pooled planes of each depth tap, combined: max, or sums */
    musa_tensor *srcs[2] = {pad_spatial(b, x, 3, pads, max ? -INFINITY : 0.0), NULL};
    if (!srcs[0]) return ERR;
    if (!max) { /* the count of cells each window averages: ones where they count */
        int64_t shape[5] = {1, 1, x->shape[2], x->shape[3], x->shape[4]}, inner[6], outer[6];
        for (int i = 0; i < 6; i++)
            inner[i] = include ? g->rpads[i] : 0, outer[i] = pads[i] - inner[i];
        musa_tensor *ones = T(musa_ones(5, shape, (musa_dtype)x->dtype));
        musa_tensor *m = ones ? pad_spatial(b, ones, 3, inner, 1.0) : NULL;
        if (!m || !(srcs[1] = pad_spatial(b, m, 3, outer, 0.0))) return ERR;
    }
    musa_tensor *res[2] = {NULL, NULL};
    for (int j = 0; j < (max ? 1 : 2); j++)
        for (int64_t t = 0; t < g->rk[0]; t++) {
            musa_tensor *slab = depth_slab(b, srcs[j], g, t, outs[0]);
            int64_t s4[4] = {slab ? slab->shape[0] : 0, (slab ? slab->shape[1] : 0) * outs[0],
                             slab ? slab->shape[3] : 0, slab ? slab->shape[4] : 0};
            musa_tensor *p = slab ? T(musa_reshape(slab, 4, s4)) : NULL, *y = NULL;
            if (p && max) {
                int rc =
                    musa_max_pool2d(p, g->rk + 1, g->rst + 1, zero, g->rdl + 1, false, &y, NULL);
                if (rc) return rc;
                y = T(y);
            } else if (p) { /* window sums: averages over the full window, times its area */
                y = T(musa_mul(T(musa_avg_pool2d(p, g->rk + 1, g->rst + 1, zero, false, true)),
                               NUM((double)(g->rk[1] * g->rk[2]))));
            }
            if (!y ||
                !(res[j] = !res[j] ? y : T(max ? musa_maximum(res[j], y) : musa_add(res[j], y))))
                return ERR;
        }
    int64_t s5[5] = {N, C, outs[0], outs[1], outs[2]}, c5[5] = {1, 1, outs[0], outs[1], outs[2]};
    LET(y, musa_reshape(res[0], 5, s5));
    if (max) return put(out, y);
    return put(out, T(musa_div(y, T(musa_reshape(res[1], 5, c5)))));
}

static int op_Conv(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0], *w = in[1], *bias = n->n_in > 2 ? in[2] : NULL;
    if (w->ndim != x->ndim)
        return FAIL(MUSA_ERR_VALUE, "the weight has %d dims; a %d-d input needs %d", w->ndim,
                    x->ndim, x->ndim);
    geom g;
    int rc = read_geom(b, n, x, w->shape + 2, &g);
    if (rc) return rc;
    if (g.nd == 3) return conv3d(b, n, x, w, bias, &g, out);
    musa_tensor *x2 = as_2d(b, x, g.nd), *w2 = as_2d(b, w, g.nd);
    if (!x2 || !w2) return ERR;
    int64_t pad[2] = {g.pads[0], g.pads[1]};
    if (!symmetric(&g)) { /* asymmetric: pad explicitly first */
        if (!(x2 = pad_spatial(b, x2, 2, g.pads, 0.0))) return ERR;
        pad[0] = pad[1] = 0;
    }
    return from_2d(
        b, out, T(musa_conv2d(x2, w2, bias, g.st, pad, g.dl, onnx_attr_int(n, "group", 1))), g.nd);
}

static int op_ConvTranspose(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0], *w = in[1], *bias = n->n_in > 2 ? in[2] : NULL;
    if (w->ndim != x->ndim)
        return FAIL(MUSA_ERR_VALUE, "the weight has %d dims; a %d-d input needs %d", w->ndim,
                    x->ndim, x->ndim);
    const char *auto_pad = onnx_attr_str(n, "auto_pad", "NOTSET");
    bool same = !strncmp(auto_pad, "SAME_", 5), upper = !strcmp(auto_pad, "SAME_UPPER");
    geom g;
    int rc = read_geom(b, n, x, w->shape + 2, &g);
    if (rc) return rc;
    int nd = g.nd, off = 2 - nd;
    int64_t op[MUSA_MAX_DIMS] = {0}, os[MUSA_MAX_DIMS];
    int nop = onnx_attr_ints(n, "output_padding", op, MUSA_MAX_DIMS);
    int nos = onnx_attr_ints(n, "output_shape", os, MUSA_MAX_DIMS);
    if ((nop && nop != nd) || (nos && nos > nd + 2) || (nos && nos < nd))
        return FAIL(MUSA_ERR_VALUE, "output_padding and output_shape need %d values", nd);
    for (int i = 0; i < nd; i++)
        if (op[i] < 0 || op[i] > GEOM_MAX ||
            (nos && (os[nos - nd + i] < 0 || os[nos - nd + i] > ((int64_t)1 << 40))))
            return FAIL(MUSA_ERR_VALUE, "output_padding or output_shape out of range");
    /* the full result (no padding) is (in - 1) stride + (k - 1) dilation + 1
     * long; ONNX's pads crop it at both ends (begin, end: negative adds
     * zeros), output_padding extends the end */
    int64_t begin[3], end[3];
    bool plain = true; /* musa's own padding does it: symmetric, small output_padding */
    for (int i = 0; i < nd; i++) {
        int64_t size = x->shape[2 + i];
        int64_t full = (size - 1) * g.rst[i] + (g.rk[i] - 1) * g.rdl[i] + 1;
        begin[i] = same ? 0 : g.rpads[i], end[i] = (same ? 0 : g.rpads[3 + i]) - op[i];
        if (nos || same) { /* pads from the asked size */
            int64_t want = nos ? os[nos - nd + i] : size * g.rst[i];
            int64_t total = full + op[i] - want;
            begin[i] = total < 0 ? 0 : (same && upper) ? total / 2 : total - total / 2;
            end[i] = total - begin[i] - op[i];
        }
        plain &=
            begin[i] == end[i] + op[i] && begin[i] >= 0 && (op[i] < g.rst[i] || op[i] < g.rdl[i]);
    }
    if (nd == 3) return conv_transpose3d(b, n, x, w, bias, &g, begin, end, out);
    for (int i = 1; i >= 0; i--) { /* to 2-d: 1-d is height 1 */
        begin[i] = i < off ? 0 : begin[i - off], end[i] = i < off ? 0 : end[i - off];
        op[i] = i < off ? 0 : op[i - off];
    }
    musa_tensor *x2 = as_2d(b, x, nd), *w2 = as_2d(b, w, nd);
    if (!x2 || !w2) return ERR;
    int64_t groups = onnx_attr_int(n, "group", 1);
    if (plain) { /* symmetric pads: musa's own */
        int64_t pad[2] = {begin[0], begin[1]}, outpad[2] = {op[0], op[1]};
        return from_2d(b, out,
                       T(musa_conv_transpose2d(x2, w2, bias, g.st, pad, outpad, g.dl, groups)), nd);
    }
    /* else the full result without bias, cropped or extended with zeros, then the bias */
    int64_t zero[2] = {0, 0};
    LET(y, musa_conv_transpose2d(x2, w2, NULL, g.st, zero, zero, g.dl, groups));
    int64_t pads[4] = {-begin[0], -begin[1], -end[0], -end[1]}; /* negative pads crop */
    musa_tensor *c = pad_spatial(b, y, 2, pads, 0.0);
    if (c && bias) {
        int64_t shape[3] = {bias->shape[0], 1, 1};
        c = T(musa_add(c, T(musa_reshape(bias, 3, shape))));
    }
    return from_2d(b, out, c, nd);
}

static int pool(onnx_build *b, const onnx_node *n, musa_tensor **in, musa_tensor **out, bool max) {
    musa_tensor *x = in[0];
    geom g;
    int rc = read_geom(b, n, x, NULL, &g);
    if (rc) return rc;
    bool ceil_mode = onnx_attr_int(n, "ceil_mode", 0);
    if (g.nd == 3) {
        if (max && n->n_out > 1 && n->out[1] >= 0)
            return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "the Indices output of a 3-d MaxPool");
        if (!musa_is_float((musa_dtype)x->dtype))
            return FAIL(MUSA_ERR_TYPE, "a 3-d pool of %s", musa_dtype_name((musa_dtype)x->dtype));
        return pool3d(b, n, x, &g, max, ceil_mode, out);
    }
    musa_dtype dt = (musa_dtype)x->dtype;
    musa_tensor *x2 = as_2d(b, x, g.nd);
    if (x2 && !musa_is_float(dt)) x2 = T(musa_cast(x2, MUSA_DTYPE_FLOAT32));
    if (!x2) return ERR;
    bool sym = symmetric(&g) && 2 * g.pads[0] <= g.k[0] && 2 * g.pads[1] <= g.k[1];
    int64_t pad[2] = {sym ? g.pads[0] : 0, sym ? g.pads[1] : 0};
    musa_tensor *y;
    bool want_idx = max && n->n_out > 1 && n->out[1] >= 0;
    if (want_idx && (g.nd != 2 || g.pads[0] || g.pads[1] || g.pads[2] || g.pads[3]))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "the Indices output of a padded or 1-d MaxPool");
    /* uneven pads: padded explicitly, the end also over ceil_mode's overhang
     * (pool_len: no window starts in the end padding), then pooled without */
    int64_t full[4] = {g.pads[0], g.pads[1], g.pads[2], g.pads[3]};
    for (int i = 0; !sym && i < 2; i++)
        if (pool_len(x2->shape[2 + i], g.k[i], g.st[i], g.dl[i], g.pads[i], g.pads[2 + i],
                     ceil_mode, &full[2 + i]) < 1)
            return FAIL(MUSA_ERR_VALUE, "the window is larger than the padded input");
    bool ceil2 = sym && ceil_mode;
    if (max) {
        if (!sym && !(x2 = pad_spatial(b, x2, 2, full, -INFINITY))) return ERR;
        musa_tensor *v = NULL, *idx = NULL;
        if ((rc = musa_max_pool2d(x2, g.k, g.st, pad, g.dl, ceil2, &v, want_idx ? &idx : NULL)))
            return rc;
        y = T(v);
        if (want_idx) { /* ONNX's: flat over the whole tensor, row- or column-major planes */
            int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
            musa_tensor *i = T(idx);
            if (i && onnx_attr_int(n, "storage_order", 0)) { /* h*W + w -> w*H + h */
                musa_tensor *h = T(musa_floor_divide(i, T(musa_number_int(W))));
                musa_tensor *w = T(musa_remainder(i, T(musa_number_int(W))));
                i = h && w ? T(musa_add(T(musa_mul(w, T(musa_number_int(H)))), h)) : NULL;
            }
            int64_t nc = N * C, base_shape[4] = {N, C, 1, 1};
            musa_tensor *base =
                T(musa_reshape(T(musa_mul(T(musa_arange(0, (double)nc, 1, MUSA_DTYPE_INT64)),
                                          T(musa_number_int(H * W)))),
                               4, base_shape));
            if (!i || !base || (rc = put(out + 1, T(musa_add(i, base))))) return rc ? rc : ERR;
        }
    } else {
        if (g.dl[0] != 1 || g.dl[1] != 1)
            return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "a dilated AveragePool");
        bool include = onnx_attr_int(n, "count_include_pad", 0);
        if (sym) {
            y = T(musa_avg_pool2d(x2, g.k, g.st, pad, ceil_mode, include));
        } else { /* window means over zeros, over the means of a mask of the cells that count */
            int64_t inner[4], outer[4];
            for (int i = 0; i < 4; i++)
                inner[i] = include ? g.pads[i] : 0, outer[i] = full[i] - inner[i];
            LET(xp, pad_spatial(b, x2, 2, full, 0.0));
            musa_tensor *ones = T(musa_ones_like(x2)),
                        *m = ones ? pad_spatial(b, ones, 2, inner, 1.0) : NULL;
            musa_tensor *mask = m ? pad_spatial(b, m, 2, outer, 0.0) : NULL;
            musa_tensor *sums = T(musa_avg_pool2d(xp, g.k, g.st, pad, false, true));
            musa_tensor *cnt = mask ? T(musa_avg_pool2d(mask, g.k, g.st, pad, false, true)) : NULL;
            y = sums && cnt ? T(musa_div(sums, cnt)) : NULL;
        }
    }
    if (y && !musa_is_float(dt)) y = T(musa_cast(y, dt));
    return from_2d(b, out, y, g.nd);
}
static int op_MaxPool(ARGS) {
    UNUSED_ARGS;
    return pool(b, n, in, out, true);
}
static int op_AveragePool(ARGS) {
    UNUSED_ARGS;
    return pool(b, n, in, out, false);
}

static int global_pool(onnx_build *b, const onnx_node *n, musa_tensor **in, musa_tensor **out,
                       bool max) {
    musa_tensor *x = in[0];
    if (x->ndim < 3)
        return FAIL(MUSA_ERR_VALUE, "the input has %d dims; at least 3 are needed", x->ndim);
    int64_t dims[MUSA_MAX_DIMS];
    for (int d = 2; d < x->ndim; d++) dims[d - 2] = d;
    return put(out, T(max ? musa_amax(x, x->ndim - 2, dims, true)
                          : musa_mean(x, x->ndim - 2, dims, true)));
}
static int op_GlobalAveragePool(ARGS) {
    UNUSED_ARGS;
    return global_pool(b, n, in, out, false);
}
static int op_GlobalMaxPool(ARGS) {
    UNUSED_ARGS;
    return global_pool(b, n, in, out, true);
}

static int op_BatchNormalization(ARGS) {
    UNUSED_ARGS;
    if (onnx_attr_int(n, "training_mode", 0))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "training_mode=1 (the importer runs inference)");
    if (in[0]->ndim < 2)
        return FAIL(MUSA_ERR_VALUE, "the input has %d dims; at least 2 are needed", in[0]->ndim);
    return put(out, T(musa_batch_norm(in[0], in[3], in[4], in[1], in[2], false, 0.0,
                                      onnx_attr_float(n, "epsilon", 1e-5))));
}

static int op_InstanceNormalization(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    if (x->ndim < 3)
        return FAIL(MUSA_ERR_VALUE, "the input has %d dims; at least 3 are needed", x->ndim);
    return put(
        out, T(musa_group_norm(x, x->shape[1], in[1], in[2], onnx_attr_float(n, "epsilon", 1e-5))));
}

static int op_LayerNormalization(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0], *w = in[1], *bias = n->n_in > 2 ? in[2] : NULL;
    int64_t ax = 0;
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", -1), x->ndim, &ax);
    if (rc) return rc;
    double eps = onnx_attr_float(n, "epsilon", 1e-5);
    int k = x->ndim - (int)ax;
    const int64_t *tail = x->shape + ax;
    /* scale and bias broadcast to the normalised shape */
    if (!musa_shape_equal(w->ndim, w->shape, k, tail) && !(w = T(musa_expand(w, k, tail))))
        return ERR;
    if (bias && !musa_shape_equal(bias->ndim, bias->shape, k, tail) &&
        !(bias = T(musa_expand(bias, k, tail))))
        return ERR;
    if ((rc = put(out, T(musa_layer_norm(x, k, w, bias, eps))))) return rc;
    if (n_out < 2) return MUSA_OK;
    int64_t dims[MUSA_MAX_DIMS];
    for (int i = 0; i < k; i++) dims[i] = ax + i;
    LET(mean, musa_mean(x, k, dims, true));
    LET(dev, musa_sub(x, mean));
    LET(var, musa_mean(T(musa_mul(dev, dev)), k, dims, true));
    if ((rc = put(out + 1, mean))) return rc;
    return n_out > 2 ? put(out + 2, T(musa_rsqrt(T(musa_add(var, NUM(eps)))))) : MUSA_OK;
}

static int softmax(onnx_build *b, const onnx_node *n, musa_tensor **in, musa_tensor **out,
                   bool log) {
    musa_tensor *x = in[0];
    bool old = onnx_opset(b) < 13; /* before 13: over the 2-d view [:axis] x [axis:] */
    int64_t ax = 0;
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", old ? 1 : -1), x->ndim, &ax);
    if (rc) return rc;
    if (!x->ndim) ax = 0;
    if (!old || ax == x->ndim - 1 || !x->ndim)
        return put(out, T(log ? musa_log_softmax(x, ax) : musa_softmax(x, ax)));
    int64_t lead = 1, shape2[2];
    for (int d = 0; d < ax; d++) lead *= x->shape[d];
    shape2[0] = lead, shape2[1] = lead ? musa_tensor_numel(x) / lead : 0;
    LET(x2, musa_reshape(x, 2, shape2));
    LET(y, log ? musa_log_softmax(x2, 1) : musa_softmax(x2, 1));
    return put(out, T(musa_reshape(y, x->ndim, x->shape)));
}
static int op_Softmax(ARGS) {
    UNUSED_ARGS;
    return softmax(b, n, in, out, false);
}
static int op_LogSoftmax(ARGS) {
    UNUSED_ARGS;
    return softmax(b, n, in, out, true);
}

static int op_Dropout(ARGS) {
    UNUSED_ARGS;
    if (n->n_in > 2 && in[2]) { /* training_mode: only a ratio of 0 keeps it deterministic */
        double t, ratio = onnx_attr_float(n, "ratio", 0.5);
        int cnt, rc = onnx_doubles(b, n, 2, in[2], &t, 1, &cnt);
        if (!rc && in[1]) rc = onnx_doubles(b, n, 1, in[1], &ratio, 1, &cnt);
        if (rc) return rc;
        if (t != 0 && ratio != 0)
            return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "training_mode true with ratio %g (random masks)",
                        ratio);
    }
    int rc = put(out, T(musa_tensor_retain(in[0])));
    if (rc || n_out < 2) return rc;
    return put(out + 1, T(musa_full(in[0]->ndim, in[0]->shape, 1.0, MUSA_DTYPE_BOOL)));
}

static int op_Hardmax(ARGS) { /* 1 at the first maximum along axis */
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    bool old = onnx_opset(b) < 13; /* before 13: over the 2-d view [:axis] x [axis:] */
    int64_t ax = 0;
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", old ? 1 : -1), x->ndim, &ax);
    if (rc) return rc;
    musa_tensor *v = x;
    if (old && x->ndim) {
        int64_t lead = 1, shape2[2];
        for (int d = 0; d < ax; d++) lead *= x->shape[d]; /* dims were bounded by build_node */
        shape2[0] = lead, shape2[1] = lead ? musa_tensor_numel(x) / lead : 0;
        if (!(v = T(musa_reshape(x, 2, shape2)))) return ERR;
        ax = 1;
    }
    LET(i, musa_argmax(v, ax, true));
    LET(y, musa_scatter(T(musa_zeros_like(v)), ax, i, T(musa_ones_like(i))));
    return put(out, v == x ? y : T(musa_reshape(y, x->ndim, x->shape)));
}

static int op_MeanVarianceNormalization(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t axes[MUSA_MAX_DIMS] = {0, 2, 3};
    int k = onnx_has_attr(n, "axes") ? onnx_attr_ints(n, "axes", axes, MUSA_MAX_DIMS) : 3, rc;
    if (k > MUSA_MAX_DIMS) return FAIL(MUSA_ERR_VALUE, "%d axes", k);
    for (int i = 0; i < k; i++)
        if ((rc = axis_of(b, n, axes[i], x->ndim, &axes[i]))) return rc;
    LET(mean, musa_mean(x, k, axes, true));
    LET(dev, musa_sub(x, mean));
    LET(var, musa_mean(T(musa_mul(dev, dev)), k, axes, true));
    return put(out, T(musa_div(dev, T(musa_sqrt(T(musa_add(var, NUM(1e-9))))))));
}

/* NegativeLogLikelihoodLoss of log-probabilities logp (N, C, d...) and
 * class indices (N, d...), with weight, ignore_index and reduction */
static int nll(onnx_build *b, const onnx_node *n, musa_tensor *logp, musa_tensor **in,
               musa_tensor **out) {
    musa_tensor *target = in[1], *weight = n->n_in > 2 ? in[2] : NULL;
    if (logp->ndim < 2 || target->ndim != logp->ndim - 1)
        return FAIL(MUSA_ERR_VALUE, "the input must be (N, C, ...) and the target (N, ...)");
    const char *red = onnx_attr_str(n, "reduction", "mean");
    if (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none"))
        return FAIL(MUSA_ERR_VALUE, "reduction '%.20s' is not none, sum or mean", red);
    bool has_ign = onnx_has_attr(n, "ignore_index");
    musa_tensor *ign =
        has_ign ? T(musa_eq(target, T(musa_number_int(onnx_attr_int(n, "ignore_index", 0)))))
                : NULL;
    musa_tensor *safe = target;
    if (has_ign && (!ign || !(safe = T(musa_where(ign, T(musa_zeros_like(target)), target)))))
        return ERR;
    LET(safe64, musa_cast(safe, MUSA_DTYPE_INT64));
    LET(picked, musa_neg(T(musa_squeeze(T(musa_gather(logp, 1, T(musa_unsqueeze(safe64, 1)))), 1,
                                        (int64_t[]){1}))));
    musa_tensor *w;
    if (weight) {
        int64_t flat = musa_tensor_numel(safe64);
        w = T(musa_reshape(T(musa_index_select(weight, 0, T(musa_reshape(safe64, 1, &flat)))),
                           safe64->ndim, safe64->shape));
    } else {
        w = T(musa_ones_like(picked));
    }
    if (w && has_ign) w = T(musa_where(ign, T(musa_zeros_like(w)), w));
    if (!w) return ERR;
    LET(loss, musa_mul(picked, w));
    if (red[0] == 'n') return put(out, loss);
    LET(total, musa_sum(loss, 0, NULL, false));
    return put(out, red[0] == 's' ? total : T(musa_div(total, T(musa_sum(w, 0, NULL, false)))));
}
static int op_NegativeLogLikelihoodLoss(ARGS) {
    UNUSED_ARGS;
    return nll(b, n, in[0], in, out);
}
static int op_SoftmaxCrossEntropyLoss(ARGS) {
    UNUSED_ARGS;
    if (in[0]->ndim < 2) return FAIL(MUSA_ERR_VALUE, "the scores must be (N, C, ...)");
    LET(logp, musa_log_softmax(in[0], 1));
    int rc = nll(b, n, logp, in, out);
    return rc || n_out < 2 ? rc : put(out + 1, logp);
}

static int op_OneHot(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0], *values = in[2];
    double depth, vals[2];
    int cnt, rc = onnx_doubles(b, n, 1, in[1], &depth, 1, &cnt);
    if (rc) return rc;
    if (!(depth >= 1) || depth > (double)(1 << 24))
        return FAIL(MUSA_ERR_VALUE, "depth %g must be in [1, 2^16]", depth);
    if (musa_tensor_numel(values) != 2) return FAIL(MUSA_ERR_VALUE, "values must hold (off, on)");
    if (x->ndim + 1 > MUSA_MAX_DIMS) return FAIL(MUSA_ERR_VALUE, "too many dims");
    int64_t d = (int64_t)depth, ax = 0;
    if ((rc = axis_of(b, n, onnx_attr_int(n, "axis", -1), x->ndim + 1, &ax))) return rc;
    (void)vals;
    LET(x64, musa_cast(x, MUSA_DTYPE_INT64));
    LET(idx, musa_where(T(musa_lt(x64, NUM(0.0))), T(musa_add(x64, T(musa_number_int(d)))), x64));
    /* out-of-range indices give all "off" (ONNX): a row of one_hot(depth + 1), the extra dropped */
    LET(okay, musa_logical_and(T(musa_ge(idx, NUM(0.0))), T(musa_lt(idx, T(musa_number_int(d))))));
    LET(cls, musa_where(okay, idx, T(musa_full_like(idx, (double)d))));
    LET(oh, musa_slice(T(musa_one_hot(cls, d + 1)), x->ndim, 0, d, 1));
    int64_t perm[MUSA_MAX_DIMS];
    for (int i = 0, k = 0; i <= x->ndim; i++) perm[i] = i == ax ? x->ndim : k++;
    LET(moved, musa_permute(oh, x->ndim + 1, perm));
    LET(off, musa_select(values, 0, 0));
    LET(on, musa_select(values, 0, 1));
    return put(out, T(musa_where(T(musa_eq(moved, NUM(1.0))), on, off)));
}

static int depth_space(onnx_build *b, const onnx_node *n, musa_tensor **in, musa_tensor **out,
                       bool to_depth) {
    musa_tensor *x = in[0];
    int64_t bs = onnx_attr_int(n, "blocksize", 0);
    if (x->ndim != 4 || bs < 1 || bs > GEOM_MAX)
        return FAIL(MUSA_ERR_VALUE, "a 4-d input and a blocksize in [1, 2^16] are needed");
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3], big;
    if (!musa_mul_i64(C, bs * bs, &big) || !musa_mul_i64(H, bs, &big) || !musa_mul_i64(W, bs, &big))
        return FAIL(MUSA_ERR_VALUE, "blocksize %lld overflows the dims", (long long)bs);
    if (to_depth) {
        if (H % bs || W % bs) return FAIL(MUSA_ERR_VALUE, "H and W must divide by blocksize");
        int64_t s6[6] = {N, C, H / bs, bs, W / bs, bs}, p[6] = {0, 3, 5, 1, 2, 4};
        int64_t s4[4] = {N, C * bs * bs, H / bs, W / bs};
        return put(out, T(musa_reshape(T(musa_permute(T(musa_reshape(x, 6, s6)), 6, p)), 4, s4)));
    }
    if (C % (bs * bs)) return FAIL(MUSA_ERR_VALUE, "C must divide by blocksize^2");
    bool dcr = !strcmp(onnx_attr_str(n, "mode", "DCR"), "DCR");
    int64_t c = C / (bs * bs), s4[4] = {N, c, H * bs, W * bs};
    int64_t dcr6[6] = {N, bs, bs, c, H, W}, crd6[6] = {N, c, bs, bs, H, W};
    int64_t dcrp[6] = {0, 3, 4, 1, 5, 2}, crdp[6] = {0, 1, 4, 2, 5, 3};
    LET(r, musa_reshape(x, 6, dcr ? dcr6 : crd6));
    return put(out, T(musa_reshape(T(musa_permute(r, 6, dcr ? dcrp : crdp)), 4, s4)));
}
static int op_DepthToSpace(ARGS) {
    UNUSED_ARGS;
    return depth_space(b, n, in, out, false);
}
static int op_SpaceToDepth(ARGS) {
    UNUSED_ARGS;
    return depth_space(b, n, in, out, true);
}

/* ---- Einsum ---- */

/* Labels are bytes: letters as themselves, the ellipsis's dims as 1..8 (right-aligned). */
typedef struct ein_term {
    int n;
    unsigned char lab[2 * MUSA_MAX_DIMS]; /* a pair's result may name 16 before the check */
} ein_term;

/* Parse term `s` (len chars) for an operand of ndim dims (-1: the output, with
 * `ell` ellipsis dims) into t. */
static int ein_parse(onnx_build *b, const onnx_node *n, const char *s, size_t len, int ndim,
                     int ell, ein_term *t) {
    int letters = 0, dots = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (dots || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.')
                return FAIL(MUSA_ERR_VALUE, "a malformed ellipsis in the equation");
            dots = 1, i += 2;
        } else if ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')) {
            letters++;
        } else if (s[i] != ' ') {
            return FAIL(MUSA_ERR_VALUE, "'%c' in the equation", s[i]);
        }
    }
    int e = ndim >= 0 ? ndim - letters : ell;
    if (e < 0 || (!dots && ndim >= 0 && e) || letters + (dots ? e : 0) > MUSA_MAX_DIMS)
        return FAIL(MUSA_ERR_VALUE, "a term of the equation does not fit its operand's %d dims",
                    ndim);
    t->n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            for (int k = 0; k < (dots ? e : 0); k++)
                t->lab[t->n++] = (unsigned char)(ell - e + k + 1);
            i += 2;
        } else if (s[i] != ' ') {
            t->lab[t->n++] = (unsigned char)s[i];
        }
    }
    return MUSA_OK;
}

static int ein_find(const ein_term *t, unsigned char c) {
    for (int i = 0; i < t->n; i++)
        if (t->lab[i] == c) return i;
    return -1;
}

/* x reduced to unique labels: repeated labels become their diagonal, labels
 * no one else needs (not in keep) are summed. */
static musa_tensor *ein_single(onnx_build *b, const onnx_node *n, musa_tensor *x, ein_term *t,
                               const bool *keep) {
    for (int i = 0; i < t->n; i++) /* diagonals, one repeated pair at a time */
        for (int j = i + 1; j < t->n; j++) {
            if (t->lab[i] != t->lab[j]) continue;
            if (x->shape[i] != x->shape[j]) {
                FAIL(MUSA_ERR_VALUE, "a repeated label has sizes %lld and %lld",
                     (long long)x->shape[i], (long long)x->shape[j]);
                return NULL;
            }
            musa_tensor *c = T(musa_contiguous(x));
            if (!c) return NULL;
            int64_t shape[MUSA_MAX_DIMS], strides[MUSA_MAX_DIMS], st = 1;
            int64_t full[MUSA_MAX_DIMS];
            for (int d = c->ndim - 1; d >= 0; d--) full[d] = st, st *= c->shape[d];
            int k = 0;
            for (int d = 0; d < c->ndim; d++) {
                if (d == j) continue;
                shape[k] = c->shape[d];
                strides[k++] = full[d] + (d == i ? full[j] : 0);
            }
            if (!(x = T(musa_as_strided(c, k, shape, strides, 0)))) return NULL;
            memmove(t->lab + j, t->lab + j + 1, (size_t)(t->n - j - 1));
            t->n--, j--;
        }
    int64_t dims[MUSA_MAX_DIMS];
    int k = 0, m = 0;
    for (int i = 0; i < t->n; i++) {
        if (keep[t->lab[i]])
            t->lab[m++] = t->lab[i];
        else
            dims[k++] = i;
    }
    t->n = m;
    return k ? T(musa_sum(x, k, dims, false)) : x;
}

static int op_Einsum(ARGS) {
    UNUSED_ARGS;
    const char *eq = onnx_attr_str(n, "equation", "");
    const char *arrow = strstr(eq, "->");
    size_t lhs = arrow ? (size_t)(arrow - eq) : strlen(eq);
    ein_term t[16], o;
    musa_tensor *x[16];
    if (n->n_in > 16) return FAIL(MUSA_ERR_VALUE, "at most 16 operands");
    int ell = 0, count[256] = {0}, rc;
    const char *s = eq;
    for (int i = 0; i < n->n_in; i++) { /* the operands' terms, split at commas */
        const char *comma = memchr(s, ',', (size_t)(eq + lhs - s));
        size_t len = comma ? (size_t)(comma - s) : (size_t)(eq + lhs - s);
        if ((comma != NULL) != (i + 1 < n->n_in))
            return FAIL(MUSA_ERR_VALUE, "the equation '%.60s' has not %d terms", eq, n->n_in);
        int letters = 0;
        for (size_t k = 0; k < len; k++) letters += s[k] != '.' && s[k] != ' ';
        int e = in[i]->ndim - letters;
        if ((rc = ein_parse(b, n, s, len, in[i]->ndim, e > 0 ? e : 0, &t[i]))) return rc;
        ell = e > ell && memchr(s, '.', len) ? e : ell;
        x[i] = in[i];
        s += len + 1;
    }
    for (int i = 0; i < n->n_in; i++) { /* ellipsis labels right-aligned across operands */
        int e = 0;
        for (int k = 0; k < t[i].n; k++) e += t[i].lab[k] < 16;
        for (int k = 0; k < t[i].n; k++)
            if (t[i].lab[k] < 16) t[i].lab[k] = (unsigned char)(t[i].lab[k] + ell - e);
        for (int k = 0; k < t[i].n; k++) count[t[i].lab[k]]++;
    }
    if (arrow) {
        if ((rc = ein_parse(b, n, arrow + 2, strlen(arrow + 2), -1, ell, &o))) return rc;
    } else { /* implicit: the ellipsis, then labels seen once, sorted */
        o.n = 0;
        for (int k = 1; k <= ell; k++) o.lab[o.n++] = (unsigned char)k;
        for (int c = 'A'; c <= 'z'; c++)
            if (count[c] == 1 && o.n < MUSA_MAX_DIMS) o.lab[o.n++] = (unsigned char)c;
    }
    bool keep[256];
    for (int i = 0; i < n->n_in; i++) { /* each alone: what the others and the output need */
        memset(keep, 0, sizeof keep);
        for (int k = 0; k < o.n; k++) keep[o.lab[k]] = true;
        for (int j = 0; j < n->n_in; j++)
            for (int k = 0; j != i && k < t[j].n; k++) keep[t[j].lab[k]] = true;
        if (!(x[i] = ein_single(b, n, x[i], &t[i], keep))) return ERR;
    }
    musa_tensor *acc = x[0];
    ein_term at = t[0];
    for (int i = 1; i < n->n_in; i++) { /* contract pairs left to right with batched matmuls */
        memset(keep, 0, sizeof keep);
        for (int k = 0; k < o.n; k++) keep[o.lab[k]] = true;
        for (int j = i + 1; j < n->n_in; j++)
            for (int k = 0; k < t[j].n; k++) keep[t[j].lab[k]] = true;
        musa_tensor *y = x[i];
        const ein_term *yt = &t[i];
        int64_t pa[MUSA_MAX_DIMS], pb[MUSA_MAX_DIMS], bs[MUSA_MAX_DIMS], ms[MUSA_MAX_DIMS];
        int64_t ns[MUSA_MAX_DIMS], B = 1, M = 1, K = 1, N = 1;
        int nb = 0, nm = 0, nn = 0, nk = 0, na = 0, nbb = 0;
        ein_term rt = {0};
        unsigned char kl[MUSA_MAX_DIMS];
        for (int k = 0; k < at.n; k++) { /* batch: in both and kept */
            int j = ein_find(yt, at.lab[k]);
            if (j < 0 || !keep[at.lab[k]]) continue;
            int64_t sa = acc->shape[k], sb = y->shape[j], sz = sa > sb ? sa : sb;
            if (sa != sb && sa != 1 && sb != 1)
                return FAIL(MUSA_ERR_VALUE, "label '%c' has sizes %lld and %lld",
                            at.lab[k] > 16 ? at.lab[k] : '.', (long long)sa, (long long)sb);
            if (!musa_mul_i64(B, sz, &B)) return FAIL(MUSA_ERR_VALUE, "the batch dims overflow");
            pa[na++] = k, pb[nbb++] = j, bs[nb++] = sz, rt.lab[rt.n++] = at.lab[k];
        }
        for (int k = 0; k < at.n; k++) /* acc only, kept */
            if (ein_find(yt, at.lab[k]) < 0)
                pa[na++] = k, ms[nm++] = acc->shape[k], M *= acc->shape[k],
                rt.lab[rt.n++] = at.lab[k];
        for (int k = 0; k < at.n; k++) { /* contracted: in both, not kept */
            int j = ein_find(yt, at.lab[k]);
            if (j < 0 || keep[at.lab[k]]) continue;
            if (acc->shape[k] != y->shape[j])
                return FAIL(MUSA_ERR_VALUE, "contracted label '%c' has sizes %lld and %lld",
                            at.lab[k], (long long)acc->shape[k], (long long)y->shape[j]);
            pa[na++] = k, pb[nbb++] = j, kl[nk++] = at.lab[k], K *= acc->shape[k];
        }
        (void)kl;
        for (int j = 0; j < yt->n; j++) /* y only */
            if (ein_find(&at, yt->lab[j]) < 0)
                pb[nbb++] = j, ns[nn++] = y->shape[j], N *= y->shape[j],
                rt.lab[rt.n++] = yt->lab[j];
        if (rt.n > MUSA_MAX_DIMS) return FAIL(MUSA_ERR_VALUE, "more than %d labels", MUSA_MAX_DIMS);
        /* batch dims broadcast: expand the size-1 side */
        int64_t ea[MUSA_MAX_DIMS], eb[MUSA_MAX_DIMS];
        for (int k = 0; k < acc->ndim; k++) ea[k] = acc->shape[k];
        for (int k = 0; k < y->ndim; k++) eb[k] = y->shape[k];
        for (int k = 0; k < nb; k++) ea[pa[k]] = bs[k], eb[pb[k]] = bs[k];
        LET(a2, musa_reshape(T(musa_permute(T(musa_expand(acc, acc->ndim, ea)), acc->ndim, pa)), 3,
                             (int64_t[]){B, M, K}));
        int64_t pb2[MUSA_MAX_DIMS]; /* y as (batch, contracted, y only) */
        int q = 0;
        for (int k = 0; k < nb; k++) pb2[q++] = pb[k];
        for (int k = nb; k < nbb; k++) /* pb holds batch, contracted, y-only in that order */
            pb2[q++] = pb[k];
        LET(b2, musa_reshape(T(musa_permute(T(musa_expand(y, y->ndim, eb)), y->ndim, pb2)), 3,
                             (int64_t[]){B, K, N}));
        int64_t shape[MUSA_MAX_DIMS];
        int r = 0;
        for (int k = 0; k < nb; k++) shape[r++] = bs[k];
        for (int k = 0; k < nm; k++) shape[r++] = ms[k];
        for (int k = 0; k < nn; k++) shape[r++] = ns[k];
        if (!(acc = T(musa_reshape(T(musa_matmul(a2, b2)), r, shape)))) return ERR;
        at = rt;
    }
    memset(keep, 0, sizeof keep);
    for (int k = 0; k < o.n; k++) keep[o.lab[k]] = true;
    if (!(acc = ein_single(b, n, acc, &at, keep))) return ERR;
    if (at.n != o.n) return FAIL(MUSA_ERR_VALUE, "the output names a label no operand has");
    int64_t perm[MUSA_MAX_DIMS];
    for (int k = 0; k < o.n; k++) {
        int j = ein_find(&at, o.lab[k]);
        if (j < 0) return FAIL(MUSA_ERR_VALUE, "the output names a label no operand has");
        perm[k] = j;
    }
    return put(out, o.n ? T(musa_permute(acc, o.n, perm)) : acc);
}

/* ---- shapes ---- */

static int op_Shape(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t start = onnx_attr_int(n, "start", 0), end = onnx_attr_int(n, "end", x->ndim);
    if (start < 0) start += x->ndim;
    if (end < 0) end += x->ndim;
    start = start < 0 ? 0 : start > x->ndim ? x->ndim : start;
    end = end < start ? start : end > x->ndim ? x->ndim : end;
    int64_t len = end - start;
    return put(out, T(onnx_const(x->shape + start, 1, &len, MUSA_DTYPE_INT64)));
}

static int op_Size(ARGS) {
    UNUSED_ARGS;
    int64_t numel = musa_tensor_numel(in[0]);
    return put(out, T(onnx_const(&numel, 0, NULL, MUSA_DTYPE_INT64)));
}

static int op_Reshape(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t shape[MUSA_MAX_DIMS];
    int k, rc;
    if (onnx_opset(b) < 5) return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "Reshape before opset 5");
    if ((rc = onnx_ints(b, n, 1, in[1], shape, MUSA_MAX_DIMS, &k))) return rc;
    bool allowzero = onnx_attr_int(n, "allowzero", 0);
    for (int i = 0; i < k; i++)
        if (shape[i] == 0 && !allowzero) {
            if (i >= x->ndim)
                return FAIL(MUSA_ERR_VALUE,
                            "shape[%d] is 0 (copy the input's dim) but the input has %d dims", i,
                            x->ndim);
            shape[i] = x->shape[i];
        }
    return put(out, T(musa_reshape(x, k, shape)));
}

static int op_Flatten(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t ax = onnx_attr_int(n, "axis", 1);
    if (ax < 0) ax += x->ndim;
    if (ax < 0 || ax > x->ndim)
        return FAIL(MUSA_ERR_INDEX, "axis %lld is out of range for %d dims",
                    (long long)onnx_attr_int(n, "axis", 1), x->ndim);
    int64_t shape[2] = {1, 1};
    for (int d = 0; d < x->ndim; d++) shape[d >= ax] *= x->shape[d];
    return put(out, T(musa_reshape(x, 2, shape)));
}

/* axes from the attribute (older opsets) or input 1 */
static int axes_of(onnx_build *b, const onnx_node *n, musa_tensor **in, int64_t *axes, int *k) {
    *k = 0;
    if (onnx_has_attr(n, "axes")) {
        *k = onnx_attr_ints(n, "axes", axes, MUSA_MAX_DIMS);
        return *k > MUSA_MAX_DIMS ? FAIL(MUSA_ERR_VALUE, "%d axes", *k) : MUSA_OK;
    }
    return n->n_in > 1 && in[1] ? onnx_ints(b, n, 1, in[1], axes, MUSA_MAX_DIMS, k) : MUSA_OK;
}

static int op_Squeeze(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t axes[MUSA_MAX_DIMS];
    int k, rc = axes_of(b, n, in, axes, &k);
    if (rc) return rc;
    for (int i = 0; i < k; i++) {
        if ((rc = axis_of(b, n, axes[i], x->ndim, &axes[i]))) return rc;
        if (x->shape[axes[i]] != 1)
            return FAIL(MUSA_ERR_VALUE, "dim %lld has size %lld, not 1", (long long)axes[i],
                        (long long)x->shape[axes[i]]);
    }
    return put(out, T(musa_squeeze(x, k, axes)));
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int op_Unsqueeze(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t axes[MUSA_MAX_DIMS];
    int k, rc = axes_of(b, n, in, axes, &k);
    if (rc) return rc;
    if (x->ndim + k > MUSA_MAX_DIMS)
        return FAIL(MUSA_ERR_VALUE, "%d dims and %d more exceed musa's %d", x->ndim, k,
                    MUSA_MAX_DIMS);
    for (int i = 0; i < k; i++)
        if ((rc = axis_of(b, n, axes[i], x->ndim + k, &axes[i]))) return rc;
    qsort(axes, (size_t)k, sizeof *axes, cmp_i64);
    for (int i = 0; i < k; i++) {
        if (i && axes[i] == axes[i - 1])
            return FAIL(MUSA_ERR_VALUE, "axis %lld is repeated", (long long)axes[i]);
        if (!(x = T(musa_unsqueeze(x, axes[i])))) return ERR;
    }
    return put(out, k ? x : T(musa_tensor_retain(x)));
}

static int op_Transpose(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t perm[MUSA_MAX_DIMS];
    int k = onnx_attr_ints(n, "perm", perm, MUSA_MAX_DIMS);
    if (!k)
        for (int d = 0; d < x->ndim; d++) perm[d] = x->ndim - 1 - d;
    else if (k != x->ndim)
        return FAIL(MUSA_ERR_VALUE, "perm has %d entries for %d dims", k, x->ndim);
    return put(out, T(musa_permute(x, x->ndim, perm)));
}

static int op_Expand(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t shape[MUSA_MAX_DIMS], xs[MUSA_MAX_DIMS], target[MUSA_MAX_DIMS];
    int k, rc = onnx_ints(b, n, 1, in[1], shape, MUSA_MAX_DIMS, &k);
    if (rc) return rc;
    int nd = k > x->ndim ? k : x->ndim;
    for (int d = 0; d < nd; d++) { /* numpy broadcasting of x's shape and `shape` */
        int64_t a = d < nd - x->ndim ? 1 : x->shape[d - (nd - x->ndim)];
        int64_t s = d < nd - k ? 1 : shape[d - (nd - k)];
        if (a != s && a != 1 && s != 1)
            return FAIL(MUSA_ERR_VALUE, "the input's dim of size %lld does not broadcast to %lld",
                        (long long)a, (long long)s);
        xs[d] = a, target[d] = s == 1 ? a : s;
    }
    LET(r, musa_reshape(x, nd, xs));
    return put(out, T(musa_expand(r, nd, target)));
}

static int op_Slice(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t st[MUSA_MAX_DIMS], en[MUSA_MAX_DIMS], ax[MUSA_MAX_DIMS], sp[MUSA_MAX_DIMS];
    int ns, ne, na = 0, nsp = 0, rc;
    if (onnx_opset(b) < 10) {
        ns = onnx_attr_ints(n, "starts", st, MUSA_MAX_DIMS);
        ne = onnx_attr_ints(n, "ends", en, MUSA_MAX_DIMS);
        na = onnx_attr_ints(n, "axes", ax, MUSA_MAX_DIMS);
    } else if ((rc = onnx_ints(b, n, 1, in[1], st, MUSA_MAX_DIMS, &ns)) ||
               (rc = onnx_ints(b, n, 2, in[2], en, MUSA_MAX_DIMS, &ne)) ||
               (n->n_in > 3 && in[3] && (rc = onnx_ints(b, n, 3, in[3], ax, MUSA_MAX_DIMS, &na))) ||
               (n->n_in > 4 && in[4] &&
                (rc = onnx_ints(b, n, 4, in[4], sp, MUSA_MAX_DIMS, &nsp)))) {
        return rc;
    }
    if (ns != ne || ns > MUSA_MAX_DIMS || (na && na != ns) || (nsp && nsp != ns))
        return FAIL(MUSA_ERR_VALUE, "starts, ends, axes and steps have %d, %d, %d and %d values",
                    ns, ne, na, nsp);
    for (int i = 0; i < ns; i++) {
        int64_t a = na ? ax[i] : i, step = nsp ? sp[i] : 1;
        if ((rc = axis_of(b, n, a, x->ndim, &a))) return rc;
        if (!step) return FAIL(MUSA_ERR_VALUE, "step 0 on axis %lld", (long long)a);
        int64_t size = x->shape[a], s = st[i], e = en[i];
        if (step > 0) {
            if (!(x = T(musa_slice(x, a, s, e, step)))) return ERR;
            continue;
        }
        /* negative step: clamp as ONNX does, then slice the flipped dim */
        s = s < 0 ? (s < -size ? 0 : s + size) : (s > size - 1 ? size - 1 : s); /* [0, size-1] */
        e = e < 0 ? (e < -size ? -1 : e + size) : (e > size - 1 ? size - 1 : e);
        int64_t len = s > e ? s - e : 0;
        LET(f, musa_flip(x, 1, &a));
        if (!(x = T(musa_slice(f, a, size - 1 - s, size - 1 - s + len,
                               step == INT64_MIN ? INT64_MAX : -step))))
            return ERR;
    }
    return put(out, ns ? x : T(musa_tensor_retain(x)));
}

static int op_Gather(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0], *idx = in[1];
    int64_t ax = 0;
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", 0), x->ndim, &ax);
    if (rc) return rc;
    if (musa_is_float((musa_dtype)idx->dtype) || idx->dtype == MUSA_DTYPE_BOOL)
        return FAIL(MUSA_ERR_TYPE, "indices are %s; integers are needed",
                    musa_dtype_name((musa_dtype)idx->dtype));
    if (!idx->ndim && onnx_known(b, 1)) { /* one index: a view */
        int64_t i;
        int cnt;
        if ((rc = onnx_ints(b, n, 1, idx, &i, 1, &cnt))) return rc;
        if (i < -x->shape[ax] || i >= x->shape[ax])
            return FAIL(MUSA_ERR_INDEX, "index %lld is out of range for a dim of size %lld",
                        (long long)i, (long long)x->shape[ax]);
        return put(out, T(musa_select(x, ax, i)));
    }
    if (x->ndim - 1 + idx->ndim > MUSA_MAX_DIMS)
        return FAIL(MUSA_ERR_VALUE, "the result would have more than %d dims", MUSA_MAX_DIMS);
    int64_t flat = musa_tensor_numel(idx), shape[MUSA_MAX_DIMS];
    LET(i64, idx->dtype == MUSA_DTYPE_INT64 ? musa_tensor_retain(idx)
                                            : musa_cast(idx, MUSA_DTYPE_INT64));
    LET(i1, musa_reshape(i64, 1, &flat));
    LET(sel, musa_index_select(x, ax, i1));
    int k = 0;
    for (int d = 0; d < ax; d++) shape[k++] = x->shape[d];
    for (int d = 0; d < idx->ndim; d++) shape[k++] = idx->shape[d];
    for (int d = (int)ax + 1; d < x->ndim; d++) shape[k++] = x->shape[d];
    return put(out, T(musa_reshape(sel, k, shape)));
}

/* index with negatives counted from the end of x's dim ax, as int64 */
static musa_tensor *wrap_index(onnx_build *b, musa_tensor *idx, int64_t size) {
    musa_tensor *i = idx->dtype == MUSA_DTYPE_INT64 ? idx : T(musa_cast(idx, MUSA_DTYPE_INT64));
    if (!i) return NULL;
    musa_tensor *neg = T(musa_lt(i, NUM(0.0)));
    return neg ? T(musa_where(neg, T(musa_add(i, T(musa_number_int(size)))), i)) : NULL;
}

static int op_GatherElements(ARGS) {
    UNUSED_ARGS;
    int64_t ax = 0;
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", 0), in[0]->ndim, &ax);
    if (rc) return rc;
    LET(i, wrap_index(b, in[1], in[0]->shape[ax]));
    return put(out, T(musa_gather(in[0], ax, i)));
}

static int op_ScatterElements(ARGS) {
    UNUSED_ARGS;
    int64_t ax = 0;
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", 0), in[0]->ndim, &ax);
    if (rc) return rc;
    const char *red = onnx_attr_str(n, "reduction", "none");
    if (strcmp(red, "none") && strcmp(red, "add"))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "reduction '%.20s'", red);
    LET(i, wrap_index(b, in[1], in[0]->shape[ax]));
    return put(out, T(red[0] == 'a' ? musa_scatter_add(in[0], ax, i, in[2])
                                    : musa_scatter(in[0], ax, i, in[2])));
}

static int op_Concat(ARGS) {
    UNUSED_ARGS;
    int64_t ax = 0; /* before opset 4 the axis could be left out: 1 */
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", onnx_opset(b) < 4 ? 1 : 0), in[0]->ndim, &ax);
    if (rc) return rc;
    return put(out, T(musa_cat(n->n_in, in, ax)));
}

static int op_Split(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t ax = 0, sizes[64];
    int k = 0, rc = axis_of(b, n, onnx_attr_int(n, "axis", 0), x->ndim, &ax);
    if (rc) return rc;
    if (onnx_has_attr(n, "split"))
        k = onnx_attr_ints(n, "split", sizes, 64);
    else if (n->n_in > 1 && in[1] && (rc = onnx_ints(b, n, 1, in[1], sizes, 64, &k)))
        return rc;
    if (!k) { /* equal pieces, the last smaller */
        int64_t parts = onnx_attr_int(n, "num_outputs", n_out), dim = x->shape[ax];
        if (parts != n_out)
            return FAIL(MUSA_ERR_VALUE, "num_outputs %lld for %d outputs", (long long)parts, n_out);
        int64_t each = (dim + parts - 1) / parts;
        for (k = 0; k < n_out; k++)
            sizes[k] = each * (k + 1) <= dim ? each : (dim > each * k ? dim - each * k : 0);
    }
    if (k != n_out) return FAIL(MUSA_ERR_VALUE, "%d split sizes for %d outputs", k, n_out);
    int64_t total = 0;
    for (int i = 0; i < k; i++) {
        if (sizes[i] < 0 || sizes[i] > x->shape[ax])
            return FAIL(MUSA_ERR_VALUE, "split size %lld for a dim of %lld", (long long)sizes[i],
                        (long long)x->shape[ax]);
        total += sizes[i];
    }
    if (total != x->shape[ax])
        return FAIL(MUSA_ERR_VALUE, "split sizes sum to %lld for a dim of %lld", (long long)total,
                    (long long)x->shape[ax]);
    for (int64_t i = 0, at = 0; i < k; at += sizes[i], i++)
        if ((rc = put(out + i, T(musa_slice(x, ax, at, at + sizes[i], 1))))) return rc;
    return MUSA_OK;
}

static int op_Tile(ARGS) {
    UNUSED_ARGS;
    int64_t reps[MUSA_MAX_DIMS];
    int k, rc = onnx_ints(b, n, 1, in[1], reps, MUSA_MAX_DIMS, &k);
    if (rc) return rc;
    if (k != in[0]->ndim)
        return FAIL(MUSA_ERR_VALUE, "repeats has %d values for %d dims", k, in[0]->ndim);
    return put(out, T(musa_repeat(in[0], k, reps)));
}

static int op_Pad(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int nd = x->ndim, k, rc;
    int64_t pads[2 * MUSA_MAX_DIMS], axes[MUSA_MAX_DIMS];
    double value = 0;
    if (onnx_opset(b) < 11) {
        k = onnx_attr_ints(n, "pads", pads, 2 * MUSA_MAX_DIMS);
        value = onnx_attr_float(n, "value", 0.0);
    } else {
        if ((rc = onnx_ints(b, n, 1, in[1], pads, 2 * MUSA_MAX_DIMS, &k))) return rc;
        int cnt = 0;
        if (n->n_in > 2 && in[2] && (rc = onnx_doubles(b, n, 2, in[2], &value, 1, &cnt))) return rc;
    }
    int na = 0;
    if (n->n_in > 3 && in[3] && (rc = onnx_ints(b, n, 3, in[3], axes, MUSA_MAX_DIMS, &na)))
        return rc;
    if (!na)
        for (int d = 0; d < nd; d++) axes[na++] = d;
    if (k != 2 * na) return FAIL(MUSA_ERR_VALUE, "pads has %d values for %d axes", k, na);
    int64_t full[2 * MUSA_MAX_DIMS] = {0}; /* begins then ends, per dim */
    for (int i = 0; i < na; i++) {
        int64_t a = 0;
        if ((rc = axis_of(b, n, axes[i], nd, &a))) return rc;
        full[a] = pads[i], full[nd + a] = pads[na + i];
    }
    const char *mode = onnx_attr_str(n, "mode", "constant");
    if (!strcmp(mode, "constant")) return put(out, pad_spatial(b, x, nd, full, value));
    bool reflect = !strcmp(mode, "reflect");
    if (!reflect && strcmp(mode, "edge"))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "mode '%.20s' (constant, reflect and edge are read)",
                    mode);
    for (int d = 0; d < nd; d++) { /* rows picked by index: reflected or repeated edges */
        int64_t lo = full[d], hi = full[nd + d], size = x->shape[d], len;
        if (!lo && !hi) continue;
        if (lo < 0 || hi < 0)
            return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "negative pads with mode %s", mode);
        if (!musa_add_i64(size, lo, &len) || !musa_add_i64(len, hi, &len) ||
            len > ((int64_t)1 << 40))
            return FAIL(MUSA_ERR_VALUE, "pads %lld, %lld make a dim of more than 2^40",
                        (long long)lo, (long long)hi);
        if (!size || (reflect && (lo >= size || hi >= size)))
            return FAIL(MUSA_ERR_VALUE, "pads %lld, %lld on a dim of size %lld with mode %s",
                        (long long)lo, (long long)hi, (long long)size, mode);
        int64_t *ix = malloc(sizeof(int64_t) * (size_t)len);
        if (!ix) return musa_err_nomem("onnx Pad", (size_t)len * 8);
        for (int64_t i = 0; i < len; i++) {
            int64_t j = i - lo;
            if (reflect)
                j = j < 0 ? -j : j >= size ? 2 * (size - 1) - j : j;
            else
                j = j < 0 ? 0 : j >= size ? size - 1 : j;
            ix[i] = j;
        }
        musa_tensor *it = T(onnx_const(ix, 1, &len, MUSA_DTYPE_INT64));
        free(ix);
        if (!it || !(x = T(musa_index_select(x, d, it)))) return ERR;
    }
    return put(out, x == in[0] ? T(musa_tensor_retain(x)) : x);
}

static int op_Constant(ARGS) {
    UNUSED_ARGS;
    bool absent;
    musa_tensor *t = T(onnx_attr_tensor(b, n, "value", &absent));
    if (!absent) return put(out, t);
    if (onnx_has_attr(n, "value_float")) {
        float v = (float)onnx_attr_float(n, "value_float", 0);
        return put(out, T(onnx_const(&v, 0, NULL, MUSA_DTYPE_FLOAT32)));
    }
    if (onnx_has_attr(n, "value_int")) {
        int64_t v = onnx_attr_int(n, "value_int", 0);
        return put(out, T(onnx_const(&v, 0, NULL, MUSA_DTYPE_INT64)));
    }
    if (onnx_has_attr(n, "value_ints")) {
        int64_t cnt = onnx_attr_ints(n, "value_ints", NULL, 0);
        int64_t *v = malloc(sizeof(int64_t) * (size_t)(cnt + 1));
        if (!v) return musa_err_nomem("onnx Constant", 8 * (size_t)cnt);
        onnx_attr_ints(n, "value_ints", v, (int)cnt);
        int rc = put(out, T(onnx_const(v, 1, &cnt, MUSA_DTYPE_INT64)));
        free(v);
        return rc;
    }
    if (onnx_has_attr(n, "value_floats")) {
        int64_t cnt = onnx_attr_floats(n, "value_floats", NULL, 0);
        float *v = malloc(sizeof(float) * (size_t)(cnt + 1));
        if (!v) return musa_err_nomem("onnx Constant", 4 * (size_t)cnt);
        onnx_attr_floats(n, "value_floats", v, (int)cnt);
        int rc = put(out, T(onnx_const(v, 1, &cnt, MUSA_DTYPE_FLOAT32)));
        free(v);
        return rc;
    }
    return FAIL(MUSA_ERR_VALUE, "no value (value, value_float(s) or value_int(s)) is given");
}

static int op_ConstantOfShape(ARGS) {
    UNUSED_ARGS;
    int64_t shape[MUSA_MAX_DIMS];
    int k, rc = onnx_ints(b, n, 0, in[0], shape, MUSA_MAX_DIMS, &k);
    if (rc) return rc;
    for (int i = 0; i < k; i++)
        if (shape[i] < 0) return FAIL(MUSA_ERR_VALUE, "shape[%d] is %lld", i, (long long)shape[i]);
    bool absent;
    musa_tensor *v = T(onnx_attr_tensor(b, n, "value", &absent));
    if (!absent && !v) return ERR;
    if (v && musa_tensor_numel(v) != 1)
        return FAIL(MUSA_ERR_VALUE, "value holds %lld elements; one is needed",
                    (long long)musa_tensor_numel(v));
    double fill = 0;
    if (v) {
        LET(f, musa_cast(v, MUSA_DTYPE_FLOAT64));
        fill = *(const double *)musa_tensor_data(f);
    }
    return put(out, T(musa_full(k, shape, fill, v ? (musa_dtype)v->dtype : MUSA_DTYPE_FLOAT32)));
}

static int op_Range(ARGS) {
    UNUSED_ARGS;
    double v[3];
    for (int i = 0; i < 3; i++) {
        int cnt, rc = onnx_doubles(b, n, i, in[i], &v[i], 1, &cnt);
        if (rc) return rc;
        if (cnt != 1) return FAIL(MUSA_ERR_VALUE, "input %d must be a scalar", i);
    }
    if (v[2] == 0) return FAIL(MUSA_ERR_VALUE, "delta is 0");
    double count = ceil((v[1] - v[0]) / v[2]);
    if (count <= 0) {
        int64_t zero = 0;
        return put(out, T(musa_empty(1, &zero, (musa_dtype)in[0]->dtype)));
    }
    return put(out, T(musa_arange(v[0], v[1], v[2], (musa_dtype)in[0]->dtype)));
}

static int op_Trilu(ARGS) {
    UNUSED_ARGS;
    int64_t k = 0;
    int cnt, rc;
    if (n->n_in > 1 && in[1] && (rc = onnx_ints(b, n, 1, in[1], &k, 1, &cnt))) return rc;
    return put(out, T(onnx_attr_int(n, "upper", 1) ? musa_triu(in[0], k) : musa_tril(in[0], k)));
}

static int op_CumSum(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t ax = 0;
    int cnt, rc = onnx_ints(b, n, 1, in[1], &ax, 1, &cnt);
    if (rc || (rc = axis_of(b, n, ax, x->ndim, &ax))) return rc;
    bool rev = onnx_attr_int(n, "reverse", 0), excl = onnx_attr_int(n, "exclusive", 0);
    musa_tensor *s = rev ? T(musa_flip(x, 1, &ax)) : x;
    if (!s) return ERR;
    LET(y, musa_cumsum(s, ax));
    musa_tensor *r = excl ? T(musa_sub(y, s)) : y;
    if (r && rev) r = T(musa_flip(r, 1, &ax));
    if (r && r->dtype != x->dtype) r = T(musa_cast(r, (musa_dtype)x->dtype));
    return put(out, r);
}

static int op_TopK(ARGS) {
    UNUSED_ARGS;
    int64_t k = 0, ax = 0;
    int cnt, rc = onnx_ints(b, n, 1, in[1], &k, 1, &cnt);
    if (rc || (rc = axis_of(b, n, onnx_attr_int(n, "axis", -1), in[0]->ndim, &ax))) return rc;
    musa_tensor *v = NULL, *i = NULL;
    if ((rc = musa_topk(in[0], k, ax, onnx_attr_int(n, "largest", 1), &v, &i))) return rc;
    v = T(v), i = T(i);
    if (!v || !i) return ERR;
    if ((rc = put(out, v))) return rc;
    return n_out > 1 ? put(out + 1, i) : MUSA_OK;
}

/* ---- Resize (nearest and linear) ---- */

static int op_Resize(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int nd = x->ndim, rc, cnt = 0;
    const char *mode = onnx_attr_str(n, "mode", "nearest");
    bool v10 = onnx_opset(b) < 11; /* Resize-10 is Upsample's: asymmetric, nearest by floor */
    const char *ctm =
        onnx_attr_str(n, "coordinate_transformation_mode", v10 ? "asymmetric" : "half_pixel");
    const char *nearest = onnx_attr_str(n, "nearest_mode", v10 ? "floor" : "round_prefer_floor");
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
        return FAIL(MUSA_ERR_VALUE, "mode '%.20s' is not nearest, linear or cubic", mode);
    if (onnx_attr_int(n, "antialias", 0) || !strcmp(ctm, "tf_crop_and_resize"))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "antialias or tf_crop_and_resize");
    static const char *const cmodes[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                         "asymmetric", "tf_half_pixel_for_nn"};
    int cmode = 0; /* the coordinate transformation, by its index in cmodes */
    while (cmode < 5 && strcmp(ctm, cmodes[cmode])) cmode++;
    if (cmode == 5)
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "coordinate_transformation_mode '%.30s'", ctm);
    if (strcmp(onnx_attr_str(n, "keep_aspect_ratio_policy", "stretch"), "stretch"))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "keep_aspect_ratio_policy other than stretch");
    double scale[MUSA_MAX_DIMS];
    int64_t size[MUSA_MAX_DIMS], axes[MUSA_MAX_DIMS];
    int na = onnx_attr_ints(n, "axes", axes, MUSA_MAX_DIMS);
    if (na > nd) return FAIL(MUSA_ERR_VALUE, "%d axes for %d dims", na, nd);
    if (!na)
        for (int d = 0; d < nd; d++) axes[na++] = d;
    for (int i = 0; i < na; i++)
        if ((rc = axis_of(b, n, axes[i], nd, &axes[i]))) return rc;
    for (int d = 0; d < nd; d++) scale[d] = 1, size[d] = x->shape[d];
    int si = onnx_opset(b) < 11 ? 1 : 2; /* scales' input */
    double sv[MUSA_MAX_DIMS];
    int64_t zv[MUSA_MAX_DIMS];
    if (n->n_in > 3 && in[3] && musa_tensor_numel(in[3])) {
        if ((rc = onnx_ints(b, n, 3, in[3], zv, MUSA_MAX_DIMS, &cnt))) return rc;
        if (cnt != na) return FAIL(MUSA_ERR_VALUE, "sizes has %d values for %d axes", cnt, na);
        for (int i = 0; i < na; i++) {
            if (zv[i] < 0) return FAIL(MUSA_ERR_VALUE, "sizes[%d] is %lld", i, (long long)zv[i]);
            size[axes[i]] = zv[i];
            scale[axes[i]] = x->shape[axes[i]] ? (double)zv[i] / (double)x->shape[axes[i]] : 1;
        }
    } else if (n->n_in > si && in[si]) {
        if ((rc = onnx_doubles(b, n, si, in[si], sv, MUSA_MAX_DIMS, &cnt))) return rc;
        if (cnt != na) return FAIL(MUSA_ERR_VALUE, "scales has %d values for %d axes", cnt, na);
        for (int i = 0; i < na; i++) {
            if (!(sv[i] > 0) || sv[i] > 1e6)
                return FAIL(MUSA_ERR_VALUE, "scales[%d] is %g", i, sv[i]);
            scale[axes[i]] = sv[i];
            size[axes[i]] = (int64_t)floor((double)x->shape[axes[i]] * sv[i]);
        }
    } else {
        return FAIL(MUSA_ERR_VALUE, "neither scales nor sizes is given");
    }
    int64_t total = (int64_t)musa_dtype_size((musa_dtype)x->dtype); /* the result's bytes */
    for (int d = 0; d < nd; d++)
        if (!musa_mul_i64(total, size[d], &total) || total > ((int64_t)1 << 46))
            return FAIL(MUSA_ERR_VALUE, "the output dims ask for more than 2^46 bytes");
    for (int d = 0; d < nd; d++) {
        if (size[d] == x->shape[d] && scale[d] == 1.0) continue;
        int64_t in_size = x->shape[d], out_size = size[d];
        if (!in_size) return FAIL(MUSA_ERR_VALUE, "resizing an empty dim");
        if (out_size > ((int64_t)1 << 40))
            return FAIL(MUSA_ERR_VALUE, "an output dim of %lld", (long long)out_size);
        /* each output reads `taps` inputs (nearest 1, linear 2, cubic 4) with weights */
        int taps = mode[0] == 'n' ? 1 : mode[0] == 'l' ? 2 : 4;
        size_t cnt = (size_t)out_size * (size_t)taps + 1;
        int64_t *ix = malloc(sizeof(int64_t) * cnt);
        float *w = malloc(sizeof(float) * cnt);
        if (!ix || !w) {
            free(ix), free(w);
            return musa_err_nomem("onnx Resize", cnt * 12);
        }
        double A = onnx_attr_float(n, "cubic_coeff_a", -0.75);
        bool exclude = onnx_attr_int(n, "exclude_outside", 0);
        for (int64_t o = 0; o < out_size; o++) { /* the source coordinate of output o */
            double s = scale[d], c;
            switch (cmode) {
            case 0:
                c = ((double)o + 0.5) / s - 0.5;
                break;
            case 1:
                c = out_size > 1 ? ((double)o + 0.5) / s - 0.5 : 0;
                break;
            case 2:
                c = out_size > 1 ? (double)o * (double)(in_size - 1) / ((double)in_size * s - 1)
                                 : 0;
                break;
            case 3:
                c = (double)o / s;
                break;
            default:
                c = ((double)o + 0.5) / s;
                break;
            }
            int64_t *oi = ix + o * taps;
            float *ow = w + o * taps;
            if (taps == 1) {
                double f = floor(c), r;
                if (!strcmp(nearest, "floor"))
                    r = f;
                else if (!strcmp(nearest, "ceil"))
                    r = ceil(c);
                else if (c == f + 0.5)
                    r = !strcmp(nearest, "round_prefer_ceil") ? f + 1 : f;
                else
                    r = round(c);
                oi[0] = r < 0 ? 0 : r > (double)(in_size - 1) ? in_size - 1 : (int64_t)r;
                ow[0] = 1;
            } else if (taps == 2) {
                c = c < 0 ? 0 : c > (double)(in_size - 1) ? (double)(in_size - 1) : c;
                oi[0] = (int64_t)floor(c);
                oi[1] = oi[0] + 1 < in_size ? oi[0] + 1 : in_size - 1;
                ow[1] = (float)(c - (double)oi[0]);
                ow[0] = 1 - ow[1];
            } else { /* Keys' cubic with coefficient A over taps floor(c) - 1 .. + 2 */
                double base = floor(c), t = c - base, ws[4], total = 0;
                for (int j = 0; j < 4; j++) {
                    double dd = fabs(t - (double)(j - 1)), tap = base + (double)(j - 1);
                    ws[j] = dd <= 1  ? ((A + 2) * dd - (A + 3)) * dd * dd + 1
                            : dd < 2 ? ((A * dd - 5 * A) * dd + 8 * A) * dd - 4 * A
                                     : 0;
                    if (exclude && (tap < 0 || tap > (double)(in_size - 1))) ws[j] = 0;
                    total += ws[j];
                    oi[j] = tap < 0 ? 0 : tap > (double)(in_size - 1) ? in_size - 1 : (int64_t)tap;
                }
                for (int j = 0; j < 4; j++)
                    ow[j] = (float)(exclude && total != 0 ? ws[j] / total : ws[j]);
            }
        }
        int64_t ishape[2] = {out_size, taps}, wshape[MUSA_MAX_DIMS + 1];
        for (int e = 0; e < nd; e++) wshape[e] = e == d ? out_size : 1;
        musa_tensor *it = T(onnx_const(ix, 2, ishape, MUSA_DTYPE_INT64));
        musa_tensor *wt = T(onnx_const(w, 2, ishape, MUSA_DTYPE_FLOAT32));
        free(ix), free(w);
        if (!it || !wt) return ERR;
        musa_tensor *acc = NULL;
        for (int j = 0; j < taps; j++) { /* sum over taps of rows times weights */
            musa_tensor *ij = T(musa_contiguous(T(musa_select(it, 1, j))));
            musa_tensor *xj = ij ? T(musa_index_select(x, d, ij)) : NULL;
            if (!xj) return ERR;
            if (taps == 1) {
                acc = xj;
                break;
            }
            musa_tensor *wj = T(musa_cast(T(musa_reshape(T(musa_select(wt, 1, j)), nd, wshape)),
                                          (musa_dtype)x->dtype));
            musa_tensor *term = wj ? T(musa_mul(xj, wj)) : NULL;
            if (!term || !(acc = acc ? T(musa_add(acc, term)) : term)) return ERR;
        }
        x = acc;
    }
    return put(out, x == in[0] ? T(musa_tensor_retain(x)) : x);
}

/* ---- recurrent layers: LSTM and GRU ---- */

/* Check the recurrent attributes this importer reads: default activations,
 * no clipping, sequence_lens only of full length. */
static int check_recurrent(onnx_build *b, const onnx_node *n, musa_tensor **in, int64_t *dirs,
                           int64_t hidden) {
    const char *dir = onnx_attr_str(n, "direction", "forward");
    *dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
    if (*dirs == 1 && strcmp(dir, "forward") && strcmp(dir, "reverse"))
        return FAIL(MUSA_ERR_VALUE, "direction '%.20s'", dir);
    if (onnx_has_attr(n, "activations") || onnx_has_attr(n, "clip") ||
        onnx_attr_int(n, "input_forget", 0))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED,
                    "activations, clip or input_forget (the C importer reads the defaults)");
    musa_tensor *x = in[0], *w = in[1];
    if (n->n_in > 4 && in[4]) { /* sequence_lens: read, and only full lengths run */
        int64_t lens[64];
        int cnt, rc = onnx_ints(b, n, 4, in[4], lens, 64, &cnt);
        int64_t seq = x->ndim == 3 ? x->shape[onnx_attr_int(n, "layout", 0) ? 1 : 0] : -1;
        for (int i = 0; !rc && i < cnt; i++)
            if (lens[i] != seq)
                return FAIL(MUSA_ERR_NOT_IMPLEMENTED,
                            "sequence_lens %lld shorter than the sequence (%lld): every sequence "
                            "runs to the end",
                            (long long)lens[i], (long long)seq);
        if (rc) return rc;
    }
    if (onnx_attr_int(n, "layout", 0) & ~1) return FAIL(MUSA_ERR_VALUE, "layout must be 0 or 1");
    if (x->ndim != 3 || w->ndim != 3 || w->shape[0] != *dirs || in[2]->ndim != 3)
        return FAIL(MUSA_ERR_VALUE,
                    "X must be (seq, batch, input), W and R (%lld, gates*hidden, ...)",
                    (long long)*dirs);
    if (onnx_attr_int(n, "hidden_size", hidden) != hidden)
        return FAIL(MUSA_ERR_VALUE, "hidden_size %lld does not match R's %lld",
                    (long long)onnx_attr_int(n, "hidden_size", hidden), (long long)hidden);
    return MUSA_OK;
}

/* slice i of the direction-first tensor t (dirs, ...) or NULL */
static musa_tensor *dir_of(onnx_build *b, musa_tensor *t, int64_t d) {
    return t ? T(musa_select(t, 0, d)) : NULL;
}

static int recurrent(onnx_build *b, const onnx_node *n, musa_tensor **in, int n_out,
                     musa_tensor **out, bool lstm) {
    int64_t gates = lstm ? 4 : 3, hidden = in[2]->ndim == 3 ? in[2]->shape[2] : 0, dirs;
    int rc = check_recurrent(b, n, in, &dirs, hidden);
    if (rc) return rc;
    /* layout 1 (batch first): the same on transposed views */
    bool bf = onnx_attr_int(n, "layout", 0);
    musa_tensor *x = bf ? T(musa_transpose(in[0], 0, 1)) : in[0];
    for (int i = 5; bf && i < 7 && i < n->n_in; i++)
        if (in[i] && !(in[i] = T(musa_transpose(in[i], 0, 1)))) return ERR;
    if (!x) return ERR;
    int64_t seq = x->shape[0], batch = x->shape[1];
    bool reverse = !strcmp(onnx_attr_str(n, "direction", "forward"), "reverse");
    bool lbr = onnx_attr_int(n, "linear_before_reset", 0);
    musa_tensor *ys[2] = {NULL, NULL}, *hs[2], *cs[2];
    for (int64_t d = 0; d < dirs; d++) {
        musa_tensor *W = dir_of(b, in[1], d), *R = dir_of(b, in[2], d);
        musa_tensor *B = n->n_in > 3 ? dir_of(b, in[3], d) : NULL;
        musa_tensor *h = n->n_in > 5 ? dir_of(b, in[5], d) : NULL;
        musa_tensor *c = lstm && n->n_in > 6 ? dir_of(b, in[6], d) : NULL;
        musa_tensor *P = lstm && n->n_in > 7 ? dir_of(b, in[7], d) : NULL; /* peepholes i, o, f */
        musa_tensor *pi = P ? T(musa_slice(P, 0, 0, hidden, 1)) : NULL;
        musa_tensor *po = P ? T(musa_slice(P, 0, hidden, 2 * hidden, 1)) : NULL;
        musa_tensor *pf = P ? T(musa_slice(P, 0, 2 * hidden, 3 * hidden, 1)) : NULL;
        if (P && (!pi || !po || !pf)) return ERR;
        if (!W || !R) return ERR;
        int64_t hb[2] = {batch, hidden};
        if (!h && !(h = T(musa_full(2, hb, 0.0, (musa_dtype)x->dtype)))) return ERR;
        if (lstm && !c && !(c = T(musa_full(2, hb, 0.0, (musa_dtype)x->dtype)))) return ERR;
        /* x W^T + Wb for all steps at once; R b added per step */
        musa_tensor *Wb = B ? T(musa_slice(B, 0, 0, gates * hidden, 1)) : NULL;
        musa_tensor *Rb = B ? T(musa_slice(B, 0, gates * hidden, 2 * gates * hidden, 1)) : NULL;
        LET(xw, musa_linear(x, W, Wb)); /* (seq, batch, gates*hidden) */
        musa_tensor **steps = calloc((size_t)seq + 1, sizeof *steps);
        if (!steps) return musa_err_nomem("onnx recurrent", 8 * (size_t)seq);
        rc = MUSA_OK;
        bool back = reverse || d == 1;
        for (int64_t s = 0; s < seq && !rc; s++) {
            int64_t t = back ? seq - 1 - s : s;
            musa_tensor *xt = T(musa_select(xw, 0, t));
            if (!xt) {
                rc = ERR;
                break;
            }
            if (lstm) { /* gates i, o, f, c */
                musa_tensor *g = T(musa_add(xt, T(musa_linear(h, R, Rb))));
                musa_tensor *ai = g ? T(musa_slice(g, 1, 0, hidden, 1)) : NULL;
                musa_tensor *ao = g ? T(musa_slice(g, 1, hidden, 2 * hidden, 1)) : NULL;
                musa_tensor *af = g ? T(musa_slice(g, 1, 2 * hidden, 3 * hidden, 1)) : NULL;
                musa_tensor *gc =
                    g ? T(musa_tanh(T(musa_slice(g, 1, 3 * hidden, 4 * hidden, 1)))) : NULL;
                if (P && ai && af) { /* the input and forget gates see the old cell */
                    ai = T(musa_add(ai, T(musa_mul(pi, c))));
                    af = T(musa_add(af, T(musa_mul(pf, c))));
                }
                musa_tensor *gi = ai ? T(musa_sigmoid(ai)) : NULL;
                musa_tensor *gf = af ? T(musa_sigmoid(af)) : NULL;
                if (!gi || !ao || !gf || !gc) {
                    rc = ERR;
                    break;
                }
                c = T(musa_add(T(musa_mul(gf, c)), T(musa_mul(gi, gc))));
                if (P && c) ao = T(musa_add(ao, T(musa_mul(po, c)))); /* the output gate, the new */
                musa_tensor *go = ao ? T(musa_sigmoid(ao)) : NULL;
                h = c && go ? T(musa_mul(go, T(musa_tanh(c)))) : NULL;
            } else { /* gates z, r, h */
                musa_tensor *hr = T(musa_linear(h, R, lbr ? Rb : NULL));
                if (!hr) {
                    rc = ERR;
                    break;
                }
                musa_tensor *xz = T(musa_slice(xt, 1, 0, hidden, 1)),
                            *xr = T(musa_slice(xt, 1, hidden, 2 * hidden, 1));
                musa_tensor *xh = T(musa_slice(xt, 1, 2 * hidden, 3 * hidden, 1));
                musa_tensor *hz = T(musa_slice(hr, 1, 0, hidden, 1)),
                            *hrr = T(musa_slice(hr, 1, hidden, 2 * hidden, 1));
                musa_tensor *hh = T(musa_slice(hr, 1, 2 * hidden, 3 * hidden, 1));
                if (!lbr && Rb && hz && hrr) { /* R b on z and r; on h inside the reset */
                    hz = T(musa_add(hz, T(musa_slice(Rb, 0, 0, hidden, 1))));
                    hrr = T(musa_add(hrr, T(musa_slice(Rb, 0, hidden, 2 * hidden, 1))));
                }
                musa_tensor *z = T(musa_sigmoid(T(musa_add(xz, hz))));
                musa_tensor *r = T(musa_sigmoid(T(musa_add(xr, hrr))));
                if (!z || !r || !xh || !hh) {
                    rc = ERR;
                    break;
                }
                musa_tensor *cand;
                if (lbr) {
                    cand = T(musa_tanh(T(musa_add(xh, T(musa_mul(r, hh))))));
                } else { /* (r * h) R_h^T + Rb_h */
                    musa_tensor *Rh = T(musa_slice(R, 0, 2 * hidden, 3 * hidden, 1));
                    musa_tensor *Rbh = Rb ? T(musa_slice(Rb, 0, 2 * hidden, 3 * hidden, 1)) : NULL;
                    cand = Rh ? T(musa_tanh(
                                    T(musa_add(xh, T(musa_linear(T(musa_mul(r, h)), Rh, Rbh))))))
                              : NULL;
                }
                if (!cand) {
                    rc = ERR;
                    break;
                }
                /* h = (1 - z) * cand + z * h */
                h = T(musa_add(T(musa_mul(T(musa_sub(NUM(1.0), z)), cand)), T(musa_mul(z, h))));
            }
            if (!h) {
                rc = ERR;
                break;
            }
            steps[t] = h;
        }
        musa_tensor *y = rc ? NULL : T(musa_stack((int)seq, steps, 0)); /* (seq, batch, hidden) */
        free(steps);
        if (rc || !y) return rc ? rc : ERR;
        ys[d] = y, hs[d] = h, cs[d] = c;
    }
    /* Y (seq, dirs, batch, hidden), Y_h and Y_c (dirs, batch, hidden); batch
     * first with layout 1: (batch, seq, dirs, hidden), (batch, dirs, hidden) */
    static const int64_t bf_y[4] = {2, 0, 1, 3};
    musa_tensor *y = n_out > 0 && n->out[0] >= 0 ? T(musa_stack((int)dirs, ys, 1)) : NULL;
    if (y && (rc = put(out, bf ? T(musa_permute(y, 4, bf_y)) : y))) return rc;
    musa_tensor **last[2] = {hs, cs};
    for (int j = 1; j < (lstm ? 3 : 2); j++)
        if (n_out > j && n->out[j] >= 0 &&
            (rc = put(out + j, T(musa_stack((int)dirs, last[j - 1], bf ? 1 : 0)))))
            return rc;
    return MUSA_OK;
}
static int op_LSTM(ARGS) {
    UNUSED_ARGS;
    return recurrent(b, n, in, n_out, out, true);
}
static int op_GRU(ARGS) {
    UNUSED_ARGS;
    return recurrent(b, n, in, n_out, out, false);
}

/* ---- the table ---- */

#define U(name)                                                                                    \
    { #name, 1, 1, 1, 1, "", false, 0, op_##name }
#define B2(name)                                                                                   \
    { #name, 2, 2, 1, 1, "", false, 0, op_##name }
#define RED(name)                                                                                  \
    { #name, 1, 2, 1, 1, "axes:ints,keepdims:i,noop_with_empty_axes:i", false, 2, op_##name }
#define GEOM "auto_pad:s,dilations:ints,kernel_shape:ints,pads:ints,strides:ints"
#define RNN                                                                                        \
    "activation_alpha:floats,activation_beta:floats,activations:strings,clip:f,direction:s,"       \
    "hidden_size:i,layout:i"

const onnx_op musa_onnx_ops[] = {
    U(Neg),
    U(Abs),
    U(Sign),
    U(Exp),
    U(Log),
    U(Sqrt),
    U(Reciprocal),
    U(Sin),
    U(Cos),
    U(Tanh),
    U(Sigmoid),
    U(Erf),
    U(Relu),
    U(Floor),
    U(Ceil),
    U(Round),
    U(Not),
    U(IsNaN),
    U(Asin),
    U(Acos),
    U(Atan),
    U(Asinh),
    U(Acosh),
    U(Atanh),
    U(Identity),
    U(Softplus),
    U(Softsign),
    U(HardSwish),
    U(Sinh),
    U(Cosh),
    U(Tan),
    {"Celu", 1, 1, 1, 1, "alpha:f", false, 0, op_Celu},
    {"Shrink", 1, 1, 1, 1, "bias:f,lambd:f", false, 0, op_Shrink},
    {"Hardmax", 1, 1, 1, 1, "axis:i", false, 0, op_Hardmax},
    {"MeanVarianceNormalization", 1, 1, 1, 1, "axes:ints", false, 0, op_MeanVarianceNormalization},
    {"NegativeLogLikelihoodLoss", 2, 3, 1, 1, "ignore_index:i,reduction:s", false, 0,
     op_NegativeLogLikelihoodLoss},
    {"SoftmaxCrossEntropyLoss", 2, 3, 1, 2, "ignore_index:i,reduction:s", false, 0,
     op_SoftmaxCrossEntropyLoss},
    {"OneHot", 3, 3, 1, 1, "axis:i", false, 2, op_OneHot},
    {"Einsum", 1, -1, 1, 1, "equation:s", false, 0, op_Einsum},
    {"DepthToSpace", 1, 1, 1, 1, "blocksize:i,mode:s", false, 0, op_DepthToSpace},
    {"SpaceToDepth", 1, 1, 1, 1, "blocksize:i", false, 0, op_SpaceToDepth},
    {"IsInf", 1, 1, 1, 1, "detect_negative:i,detect_positive:i", false, 0, op_IsInf},
    {"LeakyRelu", 1, 1, 1, 1, "alpha:f", false, 0, op_LeakyRelu},
    {"Elu", 1, 1, 1, 1, "alpha:f", false, 0, op_Elu},
    {"Selu", 1, 1, 1, 1, "alpha:f,gamma:f", false, 0, op_Selu},
    {"HardSigmoid", 1, 1, 1, 1, "alpha:f,beta:f", false, 0, op_HardSigmoid},
    {"ThresholdedRelu", 1, 1, 1, 1, "alpha:f", false, 0, op_ThresholdedRelu},
    B2(PRelu),
    B2(Add),
    B2(Sub),
    B2(Mul),
    B2(Div),
    B2(Pow),
    B2(Equal),
    B2(Less),
    B2(LessOrEqual),
    B2(Greater),
    B2(GreaterOrEqual),
    B2(And),
    B2(Or),
    B2(Xor),
    B2(MatMul),
    B2(CastLike),
    {"Mod", 2, 2, 1, 1, "fmod:i", false, 0, op_Mod},
    {"Max", 1, -1, 1, 1, "", false, 0, op_Max},
    {"Min", 1, -1, 1, 1, "", false, 0, op_Min},
    {"Sum", 1, -1, 1, 1, "", false, 0, op_Sum},
    {"Mean", 1, -1, 1, 1, "", false, 0, op_Mean},
    {"Where", 3, 3, 1, 1, "", false, 0, op_Where},
    {"Clip", 1, 3, 1, 1, "max:f,min:f", false, 6, op_Clip},
    {"Cast", 1, 1, 1, 1, "saturate:i,to:i", false, 0, op_Cast},
    RED(ReduceSum),
    RED(ReduceMean),
    RED(ReduceMax),
    RED(ReduceMin),
    RED(ReduceProd),
    RED(ReduceL1),
    RED(ReduceL2),
    RED(ReduceSumSquare),
    RED(ReduceLogSumExp),
    RED(ReduceLogSum),
    {"ArgMax", 1, 1, 1, 1, "axis:i,keepdims:i,select_last_index:i", false, 0, op_ArgMax},
    {"ArgMin", 1, 1, 1, 1, "axis:i,keepdims:i,select_last_index:i", false, 0, op_ArgMin},
    {"Gemm", 2, 3, 1, 1, "alpha:f,beta:f,transA:i,transB:i", false, 0, op_Gemm},
    {"Conv", 2, 3, 1, 1, GEOM ",group:i", false, 0, op_Conv},
    {"ConvTranspose", 2, 3, 1, 1, GEOM ",group:i,output_padding:ints,output_shape:ints", false, 0,
     op_ConvTranspose},
    {"MaxPool", 1, 1, 1, 2, GEOM ",ceil_mode:i,storage_order:i", false, 0, op_MaxPool},
    {"AveragePool", 1, 1, 1, 1, GEOM ",ceil_mode:i,count_include_pad:i", false, 0, op_AveragePool},
    U(GlobalAveragePool),
    U(GlobalMaxPool),
    {"BatchNormalization", 5, 5, 1, 5, "epsilon:f,momentum:f,training_mode:i,spatial:i", false, 0,
     op_BatchNormalization},
    {"InstanceNormalization", 3, 3, 1, 1, "epsilon:f", false, 0, op_InstanceNormalization},
    {"LayerNormalization", 2, 3, 1, 3, "axis:i,epsilon:f,stash_type:i", false, 0,
     op_LayerNormalization},
    {"Softmax", 1, 1, 1, 1, "axis:i", false, 0, op_Softmax},
    {"LogSoftmax", 1, 1, 1, 1, "axis:i", false, 0, op_LogSoftmax},
    {"Dropout", 1, 3, 1, 2, "ratio:f,seed:i", false, 6, op_Dropout},
    {"Shape", 1, 1, 1, 1, "end:i,start:i", true, 0, op_Shape},
    {"Size", 1, 1, 1, 1, "", true, 0, op_Size},
    {"Reshape", 2, 2, 1, 1, "allowzero:i", false, 2, op_Reshape},
    {"Flatten", 1, 1, 1, 1, "axis:i", false, 0, op_Flatten},
    {"Squeeze", 1, 2, 1, 1, "axes:ints", false, 2, op_Squeeze},
    {"Unsqueeze", 1, 2, 1, 1, "axes:ints", false, 2, op_Unsqueeze},
    {"Transpose", 1, 1, 1, 1, "perm:ints", false, 0, op_Transpose},
    {"Expand", 2, 2, 1, 1, "", false, 2, op_Expand},
    {"Slice", 1, 5, 1, 1, "axes:ints,ends:ints,starts:ints", false, 30, op_Slice},
    {"Gather", 2, 2, 1, 1, "axis:i", false, 0, op_Gather},
    {"GatherElements", 2, 2, 1, 1, "axis:i", false, 0, op_GatherElements},
    {"ScatterElements", 3, 3, 1, 1, "axis:i,reduction:s", false, 0, op_ScatterElements},
    {"Concat", 1, -1, 1, 1, "axis:i", false, 0, op_Concat},
    {"Split", 1, 2, 1, 64, "axis:i,num_outputs:i,split:ints", false, 2, op_Split},
    {"Tile", 2, 2, 1, 1, "", false, 2, op_Tile},
    {"Pad", 1, 4, 1, 1, "mode:s,pads:ints,value:f", false, 14, op_Pad},
    {"Constant", 0, 0, 1, 1,
     "value:t,value_float:f,value_floats:floats,value_int:i,value_ints:ints", false, 0,
     op_Constant},
    {"ConstantOfShape", 1, 1, 1, 1, "value:t", false, 1, op_ConstantOfShape},
    {"Range", 3, 3, 1, 1, "", false, 7, op_Range},
    {"Trilu", 1, 2, 1, 1, "upper:i", false, 2, op_Trilu},
    {"CumSum", 2, 2, 1, 1, "exclusive:i,reverse:i", false, 2, op_CumSum},
    {"TopK", 2, 2, 1, 2, "axis:i,largest:i,sorted:i", false, 2, op_TopK},
    {"Resize", 1, 4, 1, 1,
     "antialias:i,axes:ints,coordinate_transformation_mode:s,cubic_coeff_a:f,exclude_outside:i,"
     "extrapolation_value:f,keep_aspect_ratio_policy:s,mode:s,nearest_mode:s",
     false, 14, op_Resize},
    {"LSTM", 3, 8, 0, 3, RNN ",input_forget:i", false, 16, op_LSTM},
    {"GRU", 3, 6, 0, 2, RNN ",linear_before_reset:i", false, 16, op_GRU},
};
const int musa_onnx_num_ops = (int)(sizeof musa_onnx_ops / sizeof *musa_onnx_ops);

const char *musa_onnx_op(int i) {
    return i >= 0 && i < musa_onnx_num_ops ? musa_onnx_ops[i].name : NULL;
}

#else

const char *musa_onnx_op(int i) {
    (void)i;
    return NULL;
}

#endif
