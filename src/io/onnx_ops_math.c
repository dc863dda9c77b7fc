/*
 * onnx_ops_math.c - ONNX ops: elementwise math, reductions and Einsum
 * (onnx_ops.h says how the files of ops are written).
 */
#include "onnx_ops.h"

#ifdef MUSA_HAVE_ONNX

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

/* ---- this file's rows of the op table ---- */

const onnx_op onnx_ops_math[] = {
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
    {"Einsum", 1, -1, 1, 1, "equation:s", false, 0, op_Einsum},
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
};
const int onnx_ops_math_n = (int)(sizeof onnx_ops_math / sizeof *onnx_ops_math);

#endif
