/*
 * elementwise.c - op tests for unary and binary elementwise ops, where,
 * clamp, cast, clone and the in-place variants: every dtype the op takes,
 * contiguous / transposed / strided / 0-d / empty / large inputs,
 * broadcasting, promotion, and the errors.
 */
#include "../util.h"

/* ---- unary ---- */

typedef enum { K_SAME, K_FLOAT, K_PRED } ukind;

typedef struct {
    const char *name;
    musa_tensor *(*fn)(musa_tensor *);
    double (*ref)(double);
    ukind kind;
    double lo, hi;
} ucase;

static musa_dtype unary_out_dtype(ukind k, musa_dtype in) {
    if (k == K_PRED) return MUSA_DTYPE_BOOL;
    if (k == K_FLOAT && !musa_dtype_is_floating(in)) return MUSA_DTYPE_FLOAT32;
    return in;
}

static void run_unary(const ucase *c) {
    static const struct {
        int ndim;
        int64_t shape[2];
        layout lay;
    } shapes[] = {{2, {5, 7}, L_CONTIG}, {2, {7, 5}, L_TRANSPOSED}, {2, {4, 6}, L_STRIDED},
                  {0, {0}, L_CONTIG},    {2, {3, 0}, L_CONTIG},     {2, {300, 301}, L_CONTIG}};
    for (int di = 0; di < 9; di++) {
        musa_dtype dt = ALL_DTYPES[di];
        if (dt == MUSA_DTYPE_BOOL && c->kind == K_SAME) {
            musa_tensor *b = rnd(dt, 1, (int64_t[]){3}, 0, 2, L_CONTIG);
            CHECK_ERR(FAILS(c->fn(b)), MUSA_ERR_TYPE, "bool");
            musa_tensor_release(b);
            continue;
        }
        for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++) {
            if (si == 5 && dt != MUSA_DTYPE_FLOAT32) continue; /* the parallel path once */
            musa_tensor *x =
                rnd(dt, shapes[si].ndim, shapes[si].shape, c->lo, c->hi, shapes[si].lay);
            musa_tensor *y = c->fn(x);
            CHECK_MSG(y, "%s(%s): %s", c->name, musa_dtype_name(dt), musa_last_error());
            musa_dtype od = unary_out_dtype(c->kind, dt);
            CHECK_MSG(musa_tensor_dtype(y) == od, "%s(%s) gave %s, expected %s", c->name,
                      musa_dtype_name(dt), musa_dtype_name(musa_tensor_dtype(y)),
                      musa_dtype_name(od));
            CHECK(same_shape(y, shapes[si].ndim, shapes[si].shape));
            int64_t n = musa_tensor_numel(x);
            double *xv = values(x), *yv = values(y),
                   *want = malloc(sizeof(double) * (size_t)(n + 1));
            for (int64_t i = 0; i < n; i++) {
                double r = c->ref(xv[i]);
                want[i] = musa_dtype_is_floating(od) ? r : wrap_to(r, od);
            }
            char what[64];
            snprintf(what, sizeof what, "%s shape#%d", c->name, si);
            bool ok = close_to(what, od, yv, want, n, __FILE__, __LINE__);
            free(xv), free(yv), free(want);
            release_all(2, x, y);
            if (!ok) return;
        }
    }
    musa_clear_error();
    CHECK_ERR(FAILS(c->fn(NULL)), MUSA_ERR_VALUE, "NULL");
}

#define UNARY_TEST(NAME, EXPR, KIND, LO, HI)                                                       \
    static double ref_##NAME(double x) {                                                           \
        return (EXPR);                                                                             \
    }                                                                                              \
    TEST(op_##NAME) {                                                                              \
        ucase c = {#NAME, musa_##NAME, ref_##NAME, KIND, LO, HI};                                  \
        run_unary(&c);                                                                             \
    }

UNARY_TEST(neg, -x, K_SAME, -5, 5)
UNARY_TEST(abs, fabs(x), K_SAME, -5, 5)
UNARY_TEST(sign, (double)((x > 0) - (x < 0)), K_SAME, -3, 3)
UNARY_TEST(exp, exp(x), K_FLOAT, -4, 4)
UNARY_TEST(expm1, expm1(x), K_FLOAT, -2, 2)
UNARY_TEST(log, log(x), K_FLOAT, 0.05, 6)
UNARY_TEST(log1p, log1p(x), K_FLOAT, -0.5, 5)
UNARY_TEST(sqrt, sqrt(x), K_FLOAT, 0, 9)
UNARY_TEST(rsqrt, 1 / sqrt(x), K_FLOAT, 0.1, 9)
UNARY_TEST(reciprocal, 1 / x, K_FLOAT, 0.25, 4)
UNARY_TEST(sin, sin(x), K_FLOAT, -4, 4)
UNARY_TEST(cos, cos(x), K_FLOAT, -4, 4)
UNARY_TEST(tanh, tanh(x), K_FLOAT, -4, 4)
UNARY_TEST(sigmoid, 1 / (1 + exp(-x)), K_FLOAT, -6, 6)
UNARY_TEST(erf, erf(x), K_FLOAT, -3, 3)
UNARY_TEST(erfc, erfc(x), K_FLOAT, -3, 6)
/* I_n(x) = 1/pi int_0^pi exp(x cos t) cos(n t) dt by the trapezoid rule,
 * exponentially convergent for this periodic integrand: a reference
 * independent of the kernel's series (|x| <= 20) and asymptotic expansion */
static double bessel_ref(double x, int n) {
    const int N = 64;
    double s = 0;
    for (int k = 0; k <= N; k++) {
        double t = M_PI * k / N, w = (k == 0 || k == N) ? 0.5 : 1;
        s += w * exp(x * cos(t)) * cos(n * t);
    }
    return s / N;
}
UNARY_TEST(i0, bessel_ref(x, 0), K_FLOAT, -11, 11) /* float16 holds I0 to 11.6 */
UNARY_TEST(i0e, bessel_ref(x, 0) * exp(-fabs(x)), K_FLOAT, -30, 30)
UNARY_TEST(i1, bessel_ref(x, 1), K_FLOAT, -11, 11)
UNARY_TEST(i1e, bessel_ref(x, 1) * exp(-fabs(x)), K_FLOAT, -30, 30)
/* J and Y against libm's (glibc's j0, j1, y0, y1: another implementation);
 * K_n(x) = int_0^inf exp(-x cosh t) cosh(n t) dt by a fixed-step trapezoid
 * (the kernel picks its step and its end from x) */
static double bessel_k_ref(double x, int n) {
    if (x == 0) return INFINITY;
    double s = 0, h = 1.0 / 8; /* error about exp(x - pi^2 / h); exp(-0.1 cosh 8) is 0 */
    for (int k = 0; k < 8 * 8; k++) s += (k ? 1 : 0.5) * exp(-x * cosh(k * h)) * cosh(n * k * h);
    return s * h;
}
/* Ai(x) = Ai(0) f(x) + Ai'(0) g(x), the Maclaurin series in long double
 * (the kernel: double-double from -10 to 2, K_1/3 above, the asymptotic
 * expansion below -10); at +-5 the terms cancel 3 to 6 of its 19 digits */
static double airy_ref(double x) {
    long double x3 = (long double)x * x * x, f = 1, g = x, sf = 1, sg = x;
    for (int k = 1; k < 60; k++) {
        f *= x3 / ((3.0L * k - 1) * (3.0L * k));
        g *= x3 / ((3.0L * k) * (3.0L * k + 1));
        sf += f, sg += g;
    }
    return (double)(0.355028053887817239260L * sf - 0.258819403792806798405L * sg);
}
UNARY_TEST(airy_ai, airy_ref(x), K_FLOAT, -5, 5)
/* Ai' (an internal row) against central differences of Ai in each region */
TEST(op_airy_ai_prime) {
    const double xv[6] = {-25, -10.5, -3, 0.5, 3, 12};
    musa_tensor *x = from_list(MUSA_DTYPE_FLOAT64, 1, S(6), xv), *d = NULL;
    CHECK_OK(musa_op_call(musa_op_lookup("airy_ai_prime"), 1, &x, NULL, &d));
    double *dv = values(d);
    for (int i = 0; i < 6; i++) {
        double h = 1e-5, v[2];
        for (int s = 0; s < 2; s++) {
            musa_tensor *p =
                from_list(MUSA_DTYPE_FLOAT64, 1, S(1), (double[]){xv[i] + (s ? h : -h)});
            musa_tensor *a = musa_airy_ai(p);
            CHECK_OK(musa_tensor_item(a, &v[s]));
            release_all(2, p, a);
        }
        double want = (v[1] - v[0]) / (2 * h);
        CHECK_MSG(fabs(dv[i] - want) < 1e-7 * fabs(want) + 1e-12,
                  "Ai'(%g) = %.12g, differences %.12g", xv[i], dv[i], want);
    }
    free(dv);
    release_all(2, x, d);
}
UNARY_TEST(bessel_j0, j0(x), K_FLOAT, -30, 30)
UNARY_TEST(bessel_j1, j1(x), K_FLOAT, -30, 30)
UNARY_TEST(bessel_y0, x == 0 ? -INFINITY : y0(x), K_FLOAT, 0.1, 30)
UNARY_TEST(bessel_y1, x == 0 ? -INFINITY : y1(x), K_FLOAT, 0.1, 30)
UNARY_TEST(modified_bessel_k0, bessel_k_ref(x, 0), K_FLOAT, 0.1, 10)
UNARY_TEST(modified_bessel_k1, bessel_k_ref(x, 1), K_FLOAT, 0.1, 10)
UNARY_TEST(scaled_modified_bessel_k0, bessel_k_ref(x, 0) * exp(x), K_FLOAT, 0.1, 10)
UNARY_TEST(scaled_modified_bessel_k1, bessel_k_ref(x, 1) * exp(x), K_FLOAT, 0.1, 10)
UNARY_TEST(asin, asin(x), K_FLOAT, -0.95, 0.95)
UNARY_TEST(acos, acos(x), K_FLOAT, -0.95, 0.95)
UNARY_TEST(atan, atan(x), K_FLOAT, -4, 4)
UNARY_TEST(asinh, asinh(x), K_FLOAT, -4, 4)
UNARY_TEST(acosh, acosh(x), K_FLOAT, 1, 5)
UNARY_TEST(atanh, atanh(x), K_FLOAT, -0.9, 0.9)
UNARY_TEST(relu, x < 0 ? 0 : x, K_SAME, -3, 3)
UNARY_TEST(floor, floor(x), K_SAME, -5, 5)
UNARY_TEST(ceil, ceil(x), K_SAME, -5, 5)
UNARY_TEST(round, nearbyint(x), K_SAME, -5, 5)
UNARY_TEST(trunc, trunc(x), K_SAME, -5, 5)
UNARY_TEST(logical_not, x == 0, K_PRED, -2, 2)
UNARY_TEST(isnan, x != x, K_PRED, -2, 2)
UNARY_TEST(isinf, isinf(x) != 0, K_PRED, -2, 2)

TEST(unary_special_values) {
    double v[6] = {NAN, INFINITY, -INFINITY, 0.5, -0.5, 2.5};
    musa_tensor *x = from_list(MUSA_DTYPE_FLOAT32, 1, (int64_t[]){6}, v);
    musa_tensor *n = musa_isnan(x), *i = musa_isinf(x), *r = musa_round(x), *s = musa_sigmoid(x);
    double *nv = values(n), *iv = values(i), *rv = values(r), *sv = values(s);
    CHECK(nv && iv && rv && sv);
    CHECK(nv[0] == 1 && nv[1] == 0 && iv[1] == 1 && iv[2] == 1 && iv[0] == 0);
    CHECK(rv[3] == 0 && rv[4] == 0 && rv[5] == 2); /* half to even */
    CHECK(sv[1] == 1 && sv[2] == 0 && sv[0] != sv[0]);
    free(nv), free(iv), free(rv), free(sv);
    release_all(5, x, n, i, r, s);
}

/* ---- binary ---- */

typedef enum { B_ARITH, B_DIV, B_CMP, B_LOGIC } bkind;

typedef struct {
    const char *name;
    musa_tensor *(*fn)(musa_tensor *, musa_tensor *);
    double (*ref)(double, double);
    bkind kind;
    double alo, ahi, blo, bhi;
    bool nonzero_b, no_bool;
} bcase;

static musa_dtype binary_out_dtype(bkind k, musa_dtype t) {
    if (k == B_CMP || k == B_LOGIC) return MUSA_DTYPE_BOOL;
    if (k == B_DIV && !musa_dtype_is_floating(t)) return MUSA_DTYPE_FLOAT32;
    return t;
}

static musa_tensor *rnd_b(const bcase *c, musa_dtype dt, int nd, const int64_t *s, layout l) {
    musa_tensor *b = rnd(dt, nd, s, c->blo, c->bhi, l);
    if (!c->nonzero_b || !b) return b;
    /* replace zeros with ones so integer division is defined */
    musa_tensor *zero = musa_number_int(0), *one = musa_ones_like(b), *z = musa_eq(b, zero);
    musa_tensor *r = musa_where(z, one, b);
    release_all(4, b, zero, one, z);
    return r;
}

static void run_binary(const bcase *c) {
    static const struct {
        int na, nb;
        int64_t sa[3], sb[3];
        layout la;
        int nout;
        int64_t so[3];
    } cases[] = {
        {2, 2, {4, 5}, {4, 5}, L_CONTIG, 2, {4, 5}},
        {2, 2, {4, 1}, {1, 5}, L_CONTIG, 2, {4, 5}},
        {1, 3, {4}, {2, 3, 4}, L_CONTIG, 3, {2, 3, 4}},
        {2, 1, {3, 4}, {4}, L_TRANSPOSED, 2, {3, 4}},
        {0, 2, {0}, {2, 3}, L_CONTIG, 2, {2, 3}},
        {2, 1, {0, 3}, {3}, L_CONTIG, 2, {0, 3}},
        {3, 1, {2, 3, 4}, {4}, L_STRIDED, 3, {2, 3, 4}},
        {2, 2, {200, 300}, {200, 300}, L_CONTIG, 2, {200, 300}},
        {2, 0, {200, 300}, {0}, L_CONTIG, 2, {200, 300}},
    };
    for (int di = 0; di < 9; di++) {
        musa_dtype dt = ALL_DTYPES[di];
        if (c->kind == B_LOGIC && dt != MUSA_DTYPE_BOOL && dt != MUSA_DTYPE_FLOAT32 &&
            dt != MUSA_DTYPE_INT64)
            continue;
        if (dt == MUSA_DTYPE_BOOL && c->no_bool) {
            musa_tensor *a = rnd(dt, 1, (int64_t[]){3}, 0, 2, L_CONTIG);
            CHECK_ERR(FAILS(c->fn(a, a)), MUSA_ERR_TYPE, "bool");
            musa_tensor_release(a);
            continue;
        }
        for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
            if (ci >= 7 && dt != MUSA_DTYPE_FLOAT32) continue;
            musa_tensor *a = rnd(dt, cases[ci].na, cases[ci].sa, c->alo, c->ahi, cases[ci].la);
            musa_tensor *b = rnd_b(c, dt, cases[ci].nb, cases[ci].sb, L_CONTIG);
            musa_tensor *y = c->fn(a, b);
            CHECK_MSG(y, "%s(%s) case %d: %s", c->name, musa_dtype_name(dt), ci, musa_last_error());
            musa_dtype od = binary_out_dtype(c->kind, dt);
            CHECK_MSG(musa_tensor_dtype(y) == od, "%s(%s) gave %s", c->name, musa_dtype_name(dt),
                      musa_dtype_name(musa_tensor_dtype(y)));
            CHECK_MSG(same_shape(y, cases[ci].nout, cases[ci].so), "%s case %d shape", c->name, ci);
            int64_t n = musa_tensor_numel(y);
            double *av = values(a), *bv = values(b), *yv = values(y);
            double *want = malloc(sizeof(double) * (size_t)(n + 1));
            int64_t idx[3], ia[3], ib[3];
            for (int64_t i = 0; i < n; i++) {
                unravel(i, cases[ci].nout, cases[ci].so, idx);
                for (int k = 0; k < cases[ci].na; k++) {
                    int off = cases[ci].nout - cases[ci].na;
                    ia[k] = cases[ci].sa[k] == 1 ? 0 : idx[k + off];
                }
                for (int k = 0; k < cases[ci].nb; k++) {
                    int off = cases[ci].nout - cases[ci].nb;
                    ib[k] = cases[ci].sb[k] == 1 ? 0 : idx[k + off];
                }
                double r = c->ref(av[ravel(cases[ci].na, cases[ci].sa, ia)],
                                  bv[ravel(cases[ci].nb, cases[ci].sb, ib)]);
                want[i] = musa_dtype_is_floating(od) ? r : wrap_to(r, od);
            }
            char what[64];
            snprintf(what, sizeof what, "%s case %d", c->name, ci);
            bool ok = close_to(what, od, yv, want, n, __FILE__, __LINE__);
            free(av), free(bv), free(yv), free(want);
            release_all(3, a, b, y);
            if (!ok) return;
        }
    }
    /* shape errors name the op and both shapes */
    musa_tensor *a = musa_zeros(2, (int64_t[]){2, 3}, MUSA_DTYPE_FLOAT32);
    musa_tensor *b = musa_zeros(2, (int64_t[]){4, 3}, MUSA_DTYPE_FLOAT32);
    char expect[96];
    snprintf(expect, sizeof expect, "[%s] shapes (2, 3) and (4, 3) cannot be broadcast", c->name);
    CHECK_ERR(FAILS(c->fn(a, b)), MUSA_ERR_VALUE, expect);
    CHECK_ERR(FAILS(c->fn(a, NULL)), MUSA_ERR_VALUE, "input 1 is NULL");
    release_all(2, a, b);
}

#define BINARY_TEST(NAME, EXPR, KIND, ALO, AHI, BLO, BHI, NZ, NB)                                  \
    static double ref_##NAME(double a, double b) {                                                 \
        return (EXPR);                                                                             \
    }                                                                                              \
    TEST(op_##NAME) {                                                                              \
        bcase c = {#NAME, musa_##NAME, ref_##NAME, KIND, ALO, AHI, BLO, BHI, NZ, NB};              \
        run_binary(&c);                                                                            \
    }

static double py_floordiv(double a, double b) {
    return floor(a / b);
}
static double py_rem(double a, double b) {
    double r = fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

BINARY_TEST(add, a + b, B_ARITH, -5, 5, -5, 5, false, false)
BINARY_TEST(sub, a - b, B_ARITH, -5, 5, -5, 5, false, true)
BINARY_TEST(mul, a *b, B_ARITH, -5, 5, -5, 5, false, false)
BINARY_TEST(div, a / b, B_DIV, -5, 5, 0.5, 4, true, false)
BINARY_TEST(floor_divide, py_floordiv(a, b), B_ARITH, -9, 9, -4, 4, true, true)
BINARY_TEST(pow, pow(a, b), B_ARITH, 0.5, 3, 0, 3, false, true)
BINARY_TEST(maximum, a > b ? a : b, B_ARITH, -5, 5, -5, 5, false, false)
BINARY_TEST(minimum, a < b ? a : b, B_ARITH, -5, 5, -5, 5, false, false)
BINARY_TEST(fmod, fmod(a, b), B_ARITH, -9, 9, -4, 4, true, true)
BINARY_TEST(remainder, py_rem(a, b), B_ARITH, -9, 9, -4, 4, true, true)
BINARY_TEST(copysign, copysign(a, b), B_DIV, -5, 5, -5, 5, false, false)
BINARY_TEST(eq, a == b, B_CMP, -2, 2, -2, 2, false, false)
BINARY_TEST(ne, a != b, B_CMP, -2, 2, -2, 2, false, false)
BINARY_TEST(lt, a < b, B_CMP, -2, 2, -2, 2, false, false)
BINARY_TEST(le, a <= b, B_CMP, -2, 2, -2, 2, false, false)
BINARY_TEST(gt, a > b, B_CMP, -2, 2, -2, 2, false, false)
BINARY_TEST(ge, a >= b, B_CMP, -2, 2, -2, 2, false, false)
BINARY_TEST(logical_and, (a != 0) && (b != 0), B_LOGIC, -1, 2, -1, 2, false, false)
BINARY_TEST(logical_or, (a != 0) || (b != 0), B_LOGIC, -1, 2, -1, 2, false, false)
BINARY_TEST(logical_xor, (a != 0) != (b != 0), B_LOGIC, -1, 2, -1, 2, false, false)

TEST(binary_integer_errors_and_wrapping) {
    musa_tensor *a = from_list(MUSA_DTYPE_INT64, 1, (int64_t[]){2}, (double[]){7, -7});
    musa_tensor *z = from_list(MUSA_DTYPE_INT64, 1, (int64_t[]){2}, (double[]){2, 0});
    CHECK_ERR(FAILS(musa_floor_divide(a, z)), MUSA_ERR_ZERO_DIVISION,
              "[floor_divide] integer division by zero");
    CHECK_ERR(FAILS(musa_fmod(a, z)), MUSA_ERR_ZERO_DIVISION, "[fmod] integer division by zero");
    CHECK_ERR(FAILS(musa_remainder(a, z)), MUSA_ERR_ZERO_DIVISION, "division by zero");
    musa_tensor *neg = musa_number_int(-1);
    CHECK_ERR(FAILS(musa_pow(a, neg)), MUSA_ERR_VALUE, "negative integer powers");
    /* INT64_MIN // -1 and -INT64_MIN wrap instead of trapping */
    int64_t mn = INT64_MIN;
    musa_tensor *m = musa_from_data(&mn, 0, NULL, MUSA_DTYPE_INT64);
    musa_tensor *q = musa_floor_divide(m, neg), *ng = musa_neg(m), *ab = musa_abs(m);
    int64_t qv, nv, av;
    CHECK_OK(musa_tensor_item_int(q, &qv));
    CHECK_OK(musa_tensor_item_int(ng, &nv));
    CHECK_OK(musa_tensor_item_int(ab, &av));
    CHECK(qv == INT64_MIN && nv == INT64_MIN && av == INT64_MIN);
    /* int8 arithmetic wraps modulo 256 */
    musa_tensor *i8 = from_list(MUSA_DTYPE_INT8, 1, (int64_t[]){1}, (double[]){100});
    musa_tensor *s = musa_add(i8, i8);
    int64_t sv;
    CHECK_OK(musa_tensor_item_int(s, &sv));
    CHECK(sv == -56);
    release_all(9, a, z, neg, m, q, ng, ab, i8, s);
}

TEST(binary_type_promotion) {
    struct {
        musa_dtype a;
        int kind_b; /* 0 tensor (1-d), 1 0-d tensor, 2 number */
        musa_dtype b;
        musa_tensor *(*fn)(musa_tensor *, musa_tensor *);
        musa_dtype want;
    } cases[] = {
        {MUSA_DTYPE_FLOAT32, 1, MUSA_DTYPE_FLOAT64, musa_add, MUSA_DTYPE_FLOAT32},
        {MUSA_DTYPE_INT32, 2, MUSA_DTYPE_FLOAT64, musa_mul, MUSA_DTYPE_FLOAT32},
        {MUSA_DTYPE_INT64, 1, MUSA_DTYPE_INT32, musa_add, MUSA_DTYPE_INT64},
        {MUSA_DTYPE_BOOL, 0, MUSA_DTYPE_BOOL, musa_add, MUSA_DTYPE_BOOL},
        {MUSA_DTYPE_BOOL, 2, MUSA_DTYPE_INT64, musa_add, MUSA_DTYPE_INT64},
        {MUSA_DTYPE_UINT8, 0, MUSA_DTYPE_INT8, musa_add, MUSA_DTYPE_INT16},
        {MUSA_DTYPE_INT16, 0, MUSA_DTYPE_UINT8, musa_mul, MUSA_DTYPE_INT16},
        {MUSA_DTYPE_INT16, 1, MUSA_DTYPE_INT32, musa_add, MUSA_DTYPE_INT16},
        {MUSA_DTYPE_INT16, 0, MUSA_DTYPE_INT32, musa_add, MUSA_DTYPE_INT32},
        {MUSA_DTYPE_FLOAT16, 0, MUSA_DTYPE_BFLOAT16, musa_add, MUSA_DTYPE_FLOAT32},
        {MUSA_DTYPE_INT32, 0, MUSA_DTYPE_FLOAT64, musa_sub, MUSA_DTYPE_FLOAT64},
        {MUSA_DTYPE_INT32, 1, MUSA_DTYPE_FLOAT64, musa_sub, MUSA_DTYPE_FLOAT64},
        {MUSA_DTYPE_INT8, 2, MUSA_DTYPE_INT64, musa_mul, MUSA_DTYPE_INT8},
        {MUSA_DTYPE_INT64, 0, MUSA_DTYPE_INT64, musa_div, MUSA_DTYPE_FLOAT32},
        {MUSA_DTYPE_FLOAT16, 2, MUSA_DTYPE_FLOAT64, musa_mul, MUSA_DTYPE_FLOAT16},
        {MUSA_DTYPE_INT32, 2, MUSA_DTYPE_FLOAT64, musa_lt, MUSA_DTYPE_BOOL},
    };
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        musa_tensor *a = musa_ones(1, (int64_t[]){3}, cases[i].a);
        musa_tensor *b = cases[i].kind_b == 0             ? musa_ones(1, (int64_t[]){3}, cases[i].b)
                         : cases[i].kind_b == 1           ? musa_scalar(1, cases[i].b)
                         : cases[i].b == MUSA_DTYPE_INT64 ? musa_number_int(1)
                                                          : musa_number(1.5);
        musa_tensor *y = cases[i].fn(a, b);
        CHECK_MSG(y && musa_tensor_dtype(y) == cases[i].want, "promotion case %d: got %s, want %s",
                  i, y ? musa_dtype_name(musa_tensor_dtype(y)) : "error",
                  musa_dtype_name(cases[i].want));
        release_all(3, a, b, y);
    }
    /* the value of int32 tensor * 1.5 is computed in float32 */
    musa_tensor *a = from_list(MUSA_DTYPE_INT32, 1, (int64_t[]){2}, (double[]){3, -2});
    musa_tensor *h = musa_number(1.5), *y = musa_mul(a, h);
    double *v = values(y);
    CHECK(v && v[0] == 4.5 && v[1] == -3);
    free(v);
    release_all(3, a, h, y);
}

TEST(op_where) {
    for (int lay = 0; lay < 2; lay++) {
        musa_tensor *c =
            rnd(MUSA_DTYPE_BOOL, 2, (int64_t[]){4, 5}, 0, 2, lay ? L_TRANSPOSED : L_CONTIG);
        musa_tensor *a = rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){4, 1}, -3, 3, L_CONTIG);
        musa_tensor *b = rnd(MUSA_DTYPE_INT32, 1, (int64_t[]){5}, -3, 3, L_CONTIG);
        musa_tensor *y = musa_where(c, a, b);
        CHECK(y && musa_tensor_dtype(y) == MUSA_DTYPE_FLOAT32);
        CHECK_SHAPE(y, 2, 4, 5);
        double *cv = values(c), *av = values(a), *bv = values(b), *yv = values(y), want[20];
        for (int i = 0; i < 20; i++) want[i] = cv[i] ? av[i / 5] : bv[i % 5];
        CHECK_CLOSE("where", MUSA_DTYPE_FLOAT32, yv, want, 20);
        free(cv), free(av), free(bv), free(yv);
        release_all(4, c, a, b, y);
    }
    /* every dtype (bytewise select), with each side full or a scalar (the
     * contiguous loops: masked_fill is where(mask, value, x)) */
    for (int di = 0; di < 9; di++)
        for (int sides = 0; sides < 4; sides++) {
            bool a_full = sides & 1, b_full = sides & 2;
            musa_tensor *c = rnd(MUSA_DTYPE_BOOL, 1, (int64_t[]){37}, 0, 2, L_CONTIG);
            musa_tensor *a = rnd(ALL_DTYPES[di], a_full, (int64_t[]){37}, 0, 9, L_CONTIG);
            musa_tensor *b = rnd(ALL_DTYPES[di], b_full, (int64_t[]){37}, 0, 9, L_CONTIG);
            musa_tensor *y = musa_where(c, a, b);
            double *cv = values(c), *av = values(a), *bv = values(b), *yv = values(y), want[37];
            CHECK(yv);
            for (int i = 0; i < 37; i++) want[i] = cv[i] ? av[a_full ? i : 0] : bv[b_full ? i : 0];
            CHECK_CLOSE("where dtypes", ALL_DTYPES[di], yv, want, 37);
            free(cv), free(av), free(bv), free(yv);
            release_all(4, c, a, b, y);
        }
    musa_tensor *c = musa_zeros(1, (int64_t[]){3}, MUSA_DTYPE_BOOL);
    musa_tensor *a = musa_zeros(1, (int64_t[]){4}, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_where(c, a, a)), MUSA_ERR_VALUE, "[where] shapes");
    release_all(2, c, a);
}

TEST(op_clamp) {
    double lo = -1.5, hi = 2;
    for (int di = 0; di < 8; di++) {
        musa_dtype dt = ALL_DTYPES[di];
        musa_tensor *x = rnd(dt, 2, (int64_t[]){6, 7}, -4, 4, L_TRANSPOSED);
        for (int mode = 0; mode < 3; mode++) {
            musa_tensor *y = musa_clamp(x, mode != 1 ? &lo : NULL, mode != 2 ? &hi : NULL);
            /* -1.5 is fractional: an integer tensor clamped by it computes in float32 */
            musa_dtype od = musa_dtype_is_floating(dt) || mode == 1 ? dt : MUSA_DTYPE_FLOAT32;
            CHECK_MSG(y && musa_tensor_dtype(y) == od, "clamp %s", musa_dtype_name(dt));
            double *xv = values(x), *yv = values(y), want[42];
            for (int i = 0; i < 42; i++) {
                double v = xv[i];
                if (mode != 1 && v < lo) v = lo;
                if (mode != 2 && v > hi) v = hi;
                want[i] = v;
            }
            CHECK_CLOSE("clamp", od, yv, want, 42);
            free(xv), free(yv);
            musa_tensor_release(y);
        }
        musa_tensor_release(x);
    }
    /* integer bounds keep an integer tensor's dtype */
    double ilo = -2, ihi = 3;
    musa_tensor *x = from_list(MUSA_DTYPE_INT32, 1, (int64_t[]){3}, (double[]){-9, 1, 9});
    musa_tensor *y = musa_clamp(x, &ilo, &ihi);
    double *yv = values(y);
    CHECK(y && musa_tensor_dtype(y) == MUSA_DTYPE_INT32 && yv[0] == -2 && yv[1] == 1 && yv[2] == 3);
    free(yv);
    musa_tensor *b = musa_zeros(1, (int64_t[]){2}, MUSA_DTYPE_BOOL);
    CHECK_ERR(FAILS(musa_clamp(b, &ilo, NULL)), MUSA_ERR_TYPE, "[clamp] bool");
    release_all(3, x, y, b);
}

/* Reference conversion: float sources saturate into integers, integer
 * sources wrap modulo 2^bits (as C and PyTorch do). */
static double cast_ref(double v, musa_dtype s, musa_dtype d) {
    bool int_src = !musa_dtype_is_floating(s) && s != MUSA_DTYPE_BOOL;
    return int_src ? wrap_to(v, d) : round_to(v, d);
}

TEST(op_cast) {
    static const double probe[] = {0,
                                   1,
                                   -1,
                                   0.5,
                                   -0.5,
                                   1.5,
                                   2.5,
                                   -2.5,
                                   127.6,
                                   -128.9,
                                   255.5,
                                   300,
                                   -300,
                                   1e10,
                                   -1e10,
                                   65519,
                                   65520,
                                   1e-8,
                                   3.14159265358979,
                                   1.00390625,
                                   1.005859375,
                                   NAN,
                                   INFINITY,
                                   -INFINITY};
    int n = (int)(sizeof probe / sizeof probe[0]);
    for (int si = 0; si < 9; si++)
        for (int di = 0; di < 9; di++) {
            musa_dtype s = ALL_DTYPES[si], d = ALL_DTYPES[di];
            musa_tensor *x64 = musa_from_data(probe, 1, (int64_t[]){n}, MUSA_DTYPE_FLOAT64);
            musa_tensor *x = musa_cast(x64, s);
            double *xv = values(x); /* what the source dtype holds */
            musa_tensor *y = musa_cast(x, d);
            CHECK(y && musa_tensor_dtype(y) == d);
            double *yv = values(y), want[64];
            for (int i = 0; i < n; i++) want[i] = cast_ref(xv[i], s, d);
            for (int i = 0; i < n; i++) {
                bool same = (yv[i] == want[i]) || (yv[i] != yv[i] && want[i] != want[i]);
                CHECK_MSG(same, "cast %s -> %s of %.17g gave %.17g, expected %.17g",
                          musa_dtype_name(s), musa_dtype_name(d), xv[i], yv[i], want[i]);
            }
            free(xv), free(yv);
            release_all(3, x64, x, y);
        }
    /* float64 -> bfloat16 rounds once (1 + 2^-8 + 2^-30 rounds up, not to even) */
    double v = 1.0 + 1.0 / 256 + 1.0 / 1073741824.0;
    musa_tensor *x = musa_from_data(&v, 0, NULL, MUSA_DTYPE_FLOAT64);
    musa_tensor *y = musa_cast(x, MUSA_DTYPE_BFLOAT16);
    double got;
    CHECK_OK(musa_tensor_item(y, &got));
    CHECK_NEAR(got, 1.0078125, 0);
    musa_tensor *bad = NULL;
    musa_attrs *at = musa_attrs_new(musa_op_lookup("cast"));
    CHECK_ERR(musa_attrs_set_dtype(at, "dtype", (musa_dtype)42) == MUSA_OK, MUSA_ERR_TYPE,
              "invalid dtype");
    musa_attrs_free(at);
    release_all(3, x, y, bad);
}

TEST(op_clone) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT16, 3, (int64_t[]){3, 4, 5}, -2, 2, L_TRANSPOSED);
    musa_tensor *y = musa_clone(x);
    CHECK(y && musa_tensor_is_contiguous(y) && !musa_tensor_shares_storage(x, y));
    double *xv = values(x), *yv = values(y);
    CHECK_CLOSE("clone", MUSA_DTYPE_FLOAT64, yv, xv, 60);
    free(xv), free(yv);
    release_all(2, x, y);
}

/* contiguous() of permuted views: the row copies (rows contiguous on both
 * sides) and the tiled transposes (rows contiguous in the source along
 * another dim) of copy.c, for every element size, edges that are not whole
 * tiles, batch dims and a flipped outer dim; each element is checked by
 * index against the view. */
TEST(copy_rows_and_tiles) {
    const musa_dtype dts[5] = {MUSA_DTYPE_BOOL, MUSA_DTYPE_FLOAT16, MUSA_DTYPE_FLOAT32,
                               MUSA_DTYPE_INT32, MUSA_DTYPE_FLOAT64};
    const struct {
        int ndim;
        int64_t shape[4], perm[4];
        bool flip0;
    } cases[] = {
        {2, {37, 50}, {1, 0}, false},
        {2, {16, 16}, {1, 0}, false},
        {3, {3, 20, 45}, {0, 2, 1}, false},
        {3, {3, 20, 45}, {2, 0, 1}, true},
        {4, {2, 5, 17, 33}, {0, 2, 1, 3}, false},
        {4, {2, 5, 17, 33}, {1, 0, 2, 3}, true},
        {2, {1, 40}, {1, 0}, false},
    };
    for (int di = 0; di < 5; di++)
        for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
            musa_tensor *x = rnd(dts[di], cases[c].ndim, cases[c].shape, -9, 9, L_CONTIG);
            musa_tensor *f =
                cases[c].flip0 ? musa_flip(x, 1, (int64_t[]){0}) : musa_tensor_retain(x);
            musa_tensor *v = musa_permute(f, cases[c].ndim, cases[c].perm);
            musa_tensor *y = musa_contiguous(v);
            CHECK(y && musa_tensor_is_contiguous(y));
            int64_t n = y ? musa_tensor_numel(y) : 0, idx[4] = {0};
            int bad = 0;
            for (int64_t i = 0; i < n; i++) {
                int64_t r = i;
                for (int d = cases[c].ndim - 1; d >= 0; d--)
                    idx[d] = r % musa_tensor_shape(y)[d], r /= musa_tensor_shape(y)[d];
                double a = 0, b = 1;
                musa_tensor_get(y, idx, &a), musa_tensor_get(v, idx, &b);
                bad += a != b;
            }
            CHECK_MSG(!bad, "%s case %d: %d elements differ", musa_dtype_name(dts[di]), c, bad);
            release_all(4, x, f, v, y);
        }
}

/* Unary and binary loops over views whose contiguous runs are shorter
 * than a block (an attention head's rows: 16 to 63 elements) take blocks
 * of MUSA_VTAIL in place, then a padded copy for the rest: the bits equal
 * those over a contiguous copy of the view (libm calls included), for run
 * lengths of whole tail blocks, a part of one, and both. */
TEST(short_runs_equal_contiguous) {
    const int64_t lens[4] = {32, 48, 17, 40};
    for (int li = 0; li < 4; li++)
        for (int dt = 0; dt < 2; dt++) {
            musa_dtype t = dt ? MUSA_DTYPE_FLOAT64 : MUSA_DTYPE_FLOAT32;
            musa_tensor *x = rnd(t, 4, (int64_t[]){2, 3, 5, lens[li]}, -4, 4, L_CONTIG);
            musa_tensor *v = musa_permute(x, 4, (int64_t[]){0, 2, 1, 3}), *c = musa_contiguous(v);
            musa_tensor *s = musa_scalar(0.5, t);
            musa_tensor *r[2][3];
            for (int k = 0; k < 2; k++) {
                musa_tensor *in = k ? c : v;
                r[k][0] = musa_tanh(in), r[k][1] = musa_add(in, s), r[k][2] = musa_mul(in, c);
            }
            for (int j = 0; j < 3; j++) {
                double *a = values(r[0][j]), *b = values(r[1][j]);
                int64_t n = musa_tensor_numel(c);
                CHECK_MSG(memcmp(a, b, sizeof(double) * (size_t)n) == 0, "run %lld, %s, op %d",
                          (long long)lens[li], musa_dtype_name(t), j);
                free(a), free(b);
            }
            release_all(10, x, v, c, s, r[0][0], r[0][1], r[0][2], r[1][0], r[1][1], r[1][2]);
        }
}

/* Elementwise ops with an input transposed against the output run in
 * tiles (iter.c): the transposed inputs gathered into local rows first.
 * Every dtype width, edges that are not whole tiles, a batch dim, a
 * broadcast operand beside a transposed one, three inputs (where), a cast,
 * and a size that runs on several threads: each result equals the same op
 * over contiguous copies, bit for bit. */
TEST(transposed_inputs_in_tiles) {
    const struct {
        musa_dtype dt;
        int ndim;
        int64_t shape[3], perm[3];
    } cases[] = {
        {MUSA_DTYPE_FLOAT32, 2, {37, 50}, {1, 0}},
        {MUSA_DTYPE_FLOAT64, 3, {3, 20, 45}, {0, 2, 1}},
        {MUSA_DTYPE_FLOAT16, 2, {33, 64}, {1, 0}},
        {MUSA_DTYPE_INT8, 3, {2, 40, 17}, {0, 2, 1}},
        {MUSA_DTYPE_FLOAT32, 2, {300, 250}, {1, 0}},
        {MUSA_DTYPE_INT64, 3, {20, 2, 30}, {2, 1, 0}},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        musa_dtype dt = cases[c].dt;
        musa_tensor *x = rnd(dt, cases[c].ndim, cases[c].shape, -9, 9, L_CONTIG);
        musa_tensor *v = musa_permute(x, cases[c].ndim, cases[c].perm), *vc = musa_contiguous(v);
        const int64_t *sh = musa_tensor_shape(vc);
        musa_tensor *y = rnd(dt, cases[c].ndim, sh, -9, 9, L_CONTIG);
        musa_tensor *row = rnd(dt, 1, &sh[cases[c].ndim - 1], -9, 9, L_CONTIG);
        musa_tensor *r[2][5];
        for (int k = 0; k < 2; k++) {
            musa_tensor *in = k ? vc : v;
            musa_tensor *cond = musa_gt(in, y);
            r[k][0] = musa_sub(in, y), r[k][1] = musa_add(y, in), r[k][2] = musa_mul(in, row);
            r[k][3] = musa_where(cond, in, y);
            r[k][4] =
                musa_cast(in, dt == MUSA_DTYPE_FLOAT64 ? MUSA_DTYPE_FLOAT32 : MUSA_DTYPE_FLOAT64);
            musa_tensor_release(cond);
        }
        for (int j = 0; j < 5; j++) {
            CHECK(r[0][j] && r[1][j]);
            double *a = values(r[0][j]), *b = values(r[1][j]);
            CHECK_MSG(memcmp(a, b, sizeof(double) * (size_t)musa_tensor_numel(vc)) == 0,
                      "case %d, op %d", c, j);
            free(a), free(b);
        }
        release_all(5, x, v, vc, y, row);
        for (int j = 0; j < 5; j++) release_all(2, r[0][j], r[1][j]);
    }
}

TEST(inplace_ops) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, -2, 2, L_CONTIG);
    musa_tensor *b = rnd(MUSA_DTYPE_FLOAT32, 1, (int64_t[]){4}, -2, 2, L_CONTIG);
    double *x0 = values(x), *bv = values(b);
    uint64_t v0 = musa_tensor_version(x);
    CHECK_OK(musa_add_(x, b));
    CHECK(musa_tensor_version(x) == v0 + 1);
    CHECK_OK(musa_mul_(x, b));
    CHECK_OK(musa_sub_(x, b));
    double *xv = values(x), want[12];
    for (int i = 0; i < 12; i++)
        want[i] = (double)(float)((float)((float)(x0[i] + bv[i % 4]) * (float)bv[i % 4]) -
                                  (float)bv[i % 4]);
    CHECK_CLOSE("in place", MUSA_DTYPE_FLOAT32, xv, want, 12);
    free(x0), free(xv), free(bv);
    /* the result must broadcast to self's shape and cast to its dtype */
    musa_tensor *big = musa_zeros(2, (int64_t[]){2, 4}, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(musa_add_(b, big) == MUSA_OK, MUSA_ERR_VALUE,
              "[add] output has shape (4,) but the result has shape");
    musa_tensor *xi = musa_zeros(1, (int64_t[]){4}, MUSA_DTYPE_INT64);
    CHECK_ERR(musa_add_(xi, b) == MUSA_OK, MUSA_ERR_TYPE,
              "result type float32 can't be cast to the output type int64");
    musa_tensor *ex = musa_expand(b, 2, (int64_t[]){3, 4});
    CHECK_ERR(musa_mul_(ex, b) == MUSA_OK, MUSA_ERR_VALUE, "overlap");
    /* in place on a float tensor from an int one converts */
    musa_tensor *ones = musa_ones(1, (int64_t[]){4}, MUSA_DTYPE_INT32);
    CHECK_OK(musa_copy_(b, ones));
    double *ov = values(b);
    CHECK(ov[0] == 1 && ov[3] == 1);
    free(ov);
    /* partially overlapping views: y[1:] += y[:-1] must read the old values */
    musa_tensor *y = musa_arange(0, 6, 1, MUSA_DTYPE_FLOAT32);
    musa_tensor *hi = musa_slice(y, 0, 1, 6, 1), *lo = musa_slice(y, 0, 0, 5, 1);
    CHECK_OK(musa_add_(hi, lo));
    double *yv = values(y), yw[6] = {0, 1, 3, 5, 7, 9};
    CHECK_CLOSE("overlap", MUSA_DTYPE_FLOAT32, yv, yw, 6);
    free(yv);
    CHECK_OK(musa_fill_(y, 2.5));
    CHECK_OK(musa_zero_(lo));
    yv = values(y);
    CHECK(yv[0] == 0 && yv[4] == 0 && yv[5] == 2.5);
    free(yv);
    release_all(9, x, b, big, xi, ex, ones, y, hi, lo);
}
