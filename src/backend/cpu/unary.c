/*
 * unary.c - unary elementwise kernels. Each op is one line per compute
 * kind (float, double, integer); the macros expand them into contiguous
 * (vectorisable) and strided loops for every dtype the op accepts.
 *
 * float16/bfloat16 compute in float and round once on store. Integer
 * negation and abs go through unsigned arithmetic so INT_MIN wraps instead
 * of being undefined.
 */
#include <math.h>

#include "chain.h"
#include "elem.h"
#include "vmath.h"
#include "iter.h"
#include "kernels.h"

/* Generic integer expressions test `x < 0` on unsigned types too. */
#pragma GCC diagnostic ignored "-Wtype-limits"

/* Same-dtype loop: x is the loaded value, EXPR the result. Every element
 * goes through one fixed-length block loop (vectorised with libmvec's SIMD
 * functions; contiguous runs in blocks of MUSA_VBLK, then MUSA_VTAIL), the
 * last partial block and strided runs through a padded local copy: an
 * element's result never depends on where a thread's range or a fused tile
 * starts, or on the layout (scalar libm and its SIMD variants can differ
 * in the last bit). */
#define DEF_U(NAME, SN, T, C, EXPR) DEF_U_SIMD(NAME, SN, T, C, EXPR, omp simd)
/* ... calling libm: a 64-byte vector a step (vmath.h) */
#define DEF_UM(NAME, SN, T, C, EXPR)                                                               \
    DEF_U_SIMD(NAME, SN, T, C, EXPR, omp simd simdlen(MUSA_SIMD_LANES_##C))
#define DEF_U_SIMD(NAME, SN, T, C, EXPR, PRAGMA)                                                   \
    static inline                                                                                  \
        __attribute__((always_inline)) void NAME##_##SN##_blk(T *o, const T *a, const int K) {     \
        MUSA_PRAGMA(PRAGMA) for (int k = 0; k < K; k++) {                                          \
            C x = LD_##SN(a[k]);                                                                   \
            o[k] = ST_##SN(EXPR);                                                                  \
        }                                                                                          \
    }                                                                                              \
    DEF_U_LOOP(NAME, SN, T)
/* float16/bfloat16 through the float32 block of the same op: widened into
 * a float block, computed there, rounded back; each a tight loop. Inline,
 * the conversions sat between libmvec calls and spilled (bfloat16 erf-gelu
 * took 147 us over 2^18 elements against 77 us in float32). The same
 * float operations on the same values: the same bits as before. */
#define DEF_UM_LOW(NAME, SN, T, C, EXPR)                                                           \
    static inline                                                                                  \
        __attribute__((always_inline)) void NAME##_##SN##_blk(T *o, const T *a, const int K) {     \
        float fa[MUSA_VBLK], fo[MUSA_VBLK];                                                        \
        _Pragma("omp simd") for (int k = 0; k < K; k++) fa[k] = LD_##SN(a[k]);                     \
        NAME##_f32_blk(fo, fa, K);                                                                 \
        _Pragma("omp simd") for (int k = 0; k < K; k++) o[k] = ST_##SN(fo[k]);                     \
    }                                                                                              \
    DEF_U_LOOP(NAME, SN, T)
#define DEF_U_LOW(NAME, SN, T, C, EXPR) DEF_U(NAME, SN, T, C, EXPR)
/* The strided loop around a block function. */
#define DEF_U_LOOP(NAME, SN, T)                                                                    \
    static void NAME##_##SN(void *ctx, int64_t n, char **p, const int64_t *s) {                    \
        (void)ctx;                                                                                 \
        int64_t i0 = 0;                                                                            \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {                            \
            for (; i0 + MUSA_VBLK <= n; i0 += MUSA_VBLK)                                           \
                NAME##_##SN##_blk((T *)p[0] + i0, (const T *)p[1] + i0, MUSA_VBLK);                \
            for (; i0 + MUSA_VTAIL <= n; i0 += MUSA_VTAIL)                                         \
                NAME##_##SN##_blk((T *)p[0] + i0, (const T *)p[1] + i0, MUSA_VTAIL);               \
        }                                                                                          \
        for (; i0 < n; i0 += MUSA_VTAIL) {                                                         \
            T ib[MUSA_VTAIL], ob[MUSA_VTAIL];                                                      \
            int64_t m = n - i0 < MUSA_VTAIL ? n - i0 : MUSA_VTAIL;                                 \
            for (int64_t k = 0; k < MUSA_VTAIL; k++)                                               \
                ib[k] = *(const T *)(p[1] + (i0 + (k < m ? k : 0)) * s[1]);                        \
            NAME##_##SN##_blk(ob, ib, MUSA_VTAIL);                                                 \
            for (int64_t k = 0; k < m; k++) *(T *)(p[0] + (i0 + k) * s[0]) = ob[k];                \
        }                                                                                          \
    }

/* Loop with a bool output. */
#define DEF_UB(NAME, SN, T, C, EXPR)                                                               \
    static void NAME##_##SN(void *ctx, int64_t n, char **p, const int64_t *s) {                    \
        (void)ctx;                                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                          \
            C x = LD_##SN(*(const T *)(p[1] + i * s[1]));                                          \
            *(uint8_t *)(p[0] + i * s[0]) = (uint8_t)((EXPR) != 0);                                \
        }                                                                                          \
    }

/* An op defined for floats (FE: float expr, DE: double expr) and
 * integers (IE), or floats only. */
#define UNARY_ALL(NAME, FE, DE, IE)                                                                \
    DEF_U(NAME, f32, float, float, FE)                                                             \
    DEF_U(NAME, f64, double, double, DE)                                                           \
    DEF_U(NAME, f16, musa_f16, float, FE)                                                          \
    DEF_U(NAME, bf16, musa_bf16, float, FE)                                                        \
    DEF_U(NAME, i64, int64_t, int64_t, IE)                                                         \
    DEF_U(NAME, i32, int32_t, int32_t, IE)                                                         \
    DEF_U(NAME, i16, int16_t, int16_t, IE)                                                         \
    DEF_U(NAME, i8, int8_t, int8_t, IE)                                                            \
    DEF_U(NAME, u8, uint8_t, uint8_t, IE)                                                          \
    static const musa_loop_fn loops_##NAME[MUSA_DTYPE_COUNT] = {                                   \
        [MUSA_DTYPE_FLOAT32] = NAME##_f32, [MUSA_DTYPE_FLOAT64] = NAME##_f64,                      \
        [MUSA_DTYPE_FLOAT16] = NAME##_f16, [MUSA_DTYPE_BFLOAT16] = NAME##_bf16,                    \
        [MUSA_DTYPE_INT64] = NAME##_i64,   [MUSA_DTYPE_INT32] = NAME##_i32,                        \
        [MUSA_DTYPE_INT8] = NAME##_i8,     [MUSA_DTYPE_UINT8] = NAME##_u8,                         \
        [MUSA_DTYPE_INT16] = NAME##_i16};                                                          \
    DEF_KERNEL(NAME, MUSA_GRAIN_CHEAP)

#define UNARY_FLOAT(NAME, FE, DE) UNARY_FLOAT_LOOPS(NAME, FE, DE, DEF_U)
/* ... whose expressions call libm (vmath.h) */
#define UNARY_MATH(NAME, FE, DE) UNARY_FLOAT_LOOPS(NAME, FE, DE, DEF_UM)
#define UNARY_FLOAT_LOOPS(NAME, FE, DE, DEF)                                                       \
    UNARY_FLOAT_TABLE(NAME, FE, DE, DEF)                                                           \
    DEF_KERNEL(NAME, MUSA_GRAIN_MATH)
/* The loops and their table loops_NAME, for a kernel written by hand. */
#define UNARY_FLOAT_TABLE(NAME, FE, DE, DEF)                                                       \
    DEF(NAME, f32, float, float, FE)                                                               \
    DEF(NAME, f64, double, double, DE)                                                             \
    DEF##_LOW(NAME, f16, musa_f16, float, FE)                                                      \
        DEF##_LOW(NAME, bf16, musa_bf16, float,                                                    \
                  FE) static const musa_loop_fn loops_##NAME[MUSA_DTYPE_COUNT] = {                 \
            [MUSA_DTYPE_FLOAT32] = NAME##_f32,                                                     \
            [MUSA_DTYPE_FLOAT64] = NAME##_f64,                                                     \
            [MUSA_DTYPE_FLOAT16] = NAME##_f16,                                                     \
            [MUSA_DTYPE_BFLOAT16] = NAME##_bf16};

/* A predicate on any dtype: FE on floats, IE on integers and bool. */
#define UNARY_PRED(NAME, FE, IE)                                                                   \
    DEF_UB(NAME, f32, float, float, FE)                                                            \
    DEF_UB(NAME, f64, double, double, FE)                                                          \
    DEF_UB(NAME, f16, musa_f16, float, FE)                                                         \
    DEF_UB(NAME, bf16, musa_bf16, float, FE)                                                       \
    DEF_UB(NAME, i64, int64_t, int64_t, IE)                                                        \
    DEF_UB(NAME, i32, int32_t, int32_t, IE)                                                        \
    DEF_UB(NAME, i16, int16_t, int16_t, IE)                                                        \
    DEF_UB(NAME, i8, int8_t, int8_t, IE)                                                           \
    DEF_UB(NAME, u8, uint8_t, uint8_t, IE)                                                         \
    DEF_UB(NAME, b, uint8_t, uint8_t, IE)                                                          \
    static const musa_loop_fn loops_##NAME[MUSA_DTYPE_COUNT] = {                                   \
        [MUSA_DTYPE_FLOAT32] = NAME##_f32, [MUSA_DTYPE_FLOAT64] = NAME##_f64,                      \
        [MUSA_DTYPE_FLOAT16] = NAME##_f16, [MUSA_DTYPE_BFLOAT16] = NAME##_bf16,                    \
        [MUSA_DTYPE_INT64] = NAME##_i64,   [MUSA_DTYPE_INT32] = NAME##_i32,                        \
        [MUSA_DTYPE_INT8] = NAME##_i8,     [MUSA_DTYPE_UINT8] = NAME##_u8,                         \
        [MUSA_DTYPE_INT16] = NAME##_i16,   [MUSA_DTYPE_BOOL] = NAME##_b};                          \
    DEF_KERNEL(NAME, MUSA_GRAIN_CHEAP)

#define DEF_KERNEL(NAME, GRAIN)                                                                    \
    int cpu_##NAME(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,          \
                   const void *attrs) {                                                            \
        (void)n_in, (void)attrs;                                                                   \
        return unary_run(ctx, out, in, loops_##NAME, GRAIN);                                       \
    }                                                                                              \
    musa_loop_fn cpu_##NAME##_loop(const musa_kview *out, const musa_kview *in,                    \
                                   const void *attrs) {                                            \
        (void)out, (void)attrs;                                                                    \
        return loops_##NAME[in[0].dtype];                                                          \
    }

static int unary_run(const musa_kctx *ctx, musa_kview *out, const musa_kview *in,
                     const musa_loop_fn *loops, int64_t grain) {
    musa_loop_fn fn = loops[in[0].dtype];
    if (!fn)
        return musa_err(MUSA_ERR_TYPE, "[%s] no CPU kernel for %s", ctx->op_name,
                        musa_dtype_name((musa_dtype)in[0].dtype));
    const musa_kview *ops[2] = {&out[0], &in[0]};
    musa_iter it;
    musa_iter_init(&it, ops, 2);
    musa_iter_run_elementwise(&it, grain, fn, NULL);
    return MUSA_OK;
}

/* Integer helpers that wrap instead of overflowing. */
#define INEG(x) ((int64_t)(0u - (uint64_t)(int64_t)(x)))
#define IABS(x) ((x) < 0 ? INEG(x) : (int64_t)(x))

UNARY_ALL(neg, -x, -x, INEG(x))
UNARY_ALL(abs, fabsf(x), fabs(x), IABS(x))
UNARY_ALL(sign, (float)((x > 0) - (x < 0)), (double)((x > 0) - (x < 0)), (x > 0) - (x < 0))
UNARY_ALL(relu, x < 0 ? 0.0f : x, x < 0 ? 0.0 : x, x < 0 ? 0 : x)
/* floor, ceil and trunc from the nearest integer (nearbyint, in the
 * default rounding mode) stepped back by one where it passed x: the same
 * values as floorf/ceilf/truncf, signed zeros, infinities and NaN
 * included (r - 1 and r + 1 are exact wherever r != x: below 2^23), in a
 * loop GCC vectorises; it keeps floorf itself scalar (a 4M-float floor took
 * 785 us, round 243) */
#define MUSA_FLOOR_STEP(r, x, one) ((r) > (x) ? (r) - (one) : (r))
#define MUSA_CEIL_STEP(r, x, one)  ((r) < (x) ? (r) + (one) : (r))
static inline float floor_f(float x) {
    float r = nearbyintf(x);
    return MUSA_FLOOR_STEP(r, x, 1.0f);
}
static inline double floor_d(double x) {
    double r = nearbyint(x);
    return MUSA_FLOOR_STEP(r, x, 1.0);
}
/* (ceil's result has x's sign: -1 + 1 is +0, ceil(-0.7) -0) */
static inline float ceil_f(float x) {
    float r = nearbyintf(x);
    return copysignf(MUSA_CEIL_STEP(r, x, 1.0f), x);
}
static inline double ceil_d(double x) {
    double r = nearbyint(x);
    return copysign(MUSA_CEIL_STEP(r, x, 1.0), x);
}
UNARY_ALL(floor, floor_f(x), floor_d(x), x)
UNARY_ALL(ceil, ceil_f(x), ceil_d(x), x)
UNARY_ALL(round, nearbyintf(x), nearbyint(x), x)
UNARY_ALL(trunc, x < 0 ? ceil_f(x) : floor_f(x), x < 0 ? ceil_d(x) : floor_d(x), x)

UNARY_MATH(exp, MUSA_EXPF(x), exp(x))
UNARY_MATH(expm1, expm1f(x), expm1(x))
UNARY_MATH(log, logf(x), log(x))
UNARY_MATH(log1p, log1pf(x), log1p(x))
UNARY_FLOAT(sqrt, sqrtf(x), sqrt(x))
UNARY_FLOAT(rsqrt, 1.0f / sqrtf(x), 1.0 / sqrt(x))
UNARY_FLOAT(reciprocal, 1.0f / x, 1.0 / x)
UNARY_MATH(sin, sinf(x), sin(x))
UNARY_MATH(cos, cosf(x), cos(x))
UNARY_MATH(tanh, tanhf(x), tanh(x))
/* sigmoid from e = exp(-|x|): 1 / (1 + e) for x >= 0, e / (1 + e) below, so
 * the negative tail keeps its relative accuracy down to the denormals
 * (1 / (1 + exp(-x)) gave 0 below -88.7 in float32 as exp(-x) overflowed). */
static inline float logistic_f(float x) {
    float e = MUSA_EXPF(-fabsf(x));
    return (x < 0 ? e : 1.0f) / (1.0f + e);
}
static inline double logistic_d(double x) {
    double e = exp(-fabs(x));
    return (x < 0 ? e : 1.0) / (1.0 + e);
}
UNARY_MATH(sigmoid, logistic_f(x), logistic_d(x))
UNARY_MATH(erf, MUSA_ERFF(x), erf(x))
/* 1 - erf(x) without the cancellation: erfc(5) is 1.5e-12, where float32's
 * 1 - erf(5) is 0 */
UNARY_FLOAT(erfc, erfcf(x), erfc(x))
/* Bessel functions (bessel.c), in double */
#define UNARY_BESSEL(NAME, EXPR) UNARY_FLOAT(NAME, (float)(EXPR), EXPR)
UNARY_BESSEL(i0, musa_bessel_i_f64(x, 0, 0))
UNARY_BESSEL(i0e, musa_bessel_i_f64(x, 0, 1))
UNARY_BESSEL(i1, musa_bessel_i_f64(x, 1, 0))
UNARY_BESSEL(i1e, musa_bessel_i_f64(x, 1, 1))
UNARY_BESSEL(bessel_j0, musa_bessel_j_f64(x, 0))
UNARY_BESSEL(bessel_j1, musa_bessel_j_f64(x, 1))
UNARY_BESSEL(bessel_y0, musa_bessel_y_f64(x, 0))
UNARY_BESSEL(bessel_y1, musa_bessel_y_f64(x, 1))
UNARY_BESSEL(modified_bessel_k0, musa_bessel_k_f64(x, 0, 0))
UNARY_BESSEL(modified_bessel_k1, musa_bessel_k_f64(x, 1, 0))
UNARY_BESSEL(scaled_modified_bessel_k0, musa_bessel_k_f64(x, 0, 1))
UNARY_BESSEL(scaled_modified_bessel_k1, musa_bessel_k_f64(x, 1, 1))
UNARY_BESSEL(airy_ai, musa_airy_ai_f64(x, 0))
UNARY_BESSEL(airy_ai_prime, musa_airy_ai_f64(x, 1))
UNARY_FLOAT(asin, asinf(x), asin(x))
UNARY_FLOAT(acos, acosf(x), acos(x))
UNARY_FLOAT(atan, atanf(x), atan(x))
UNARY_FLOAT(asinh, asinhf(x), asinh(x))
UNARY_FLOAT(acosh, acoshf(x), acosh(x))
UNARY_FLOAT(atanh, atanhf(x), atanh(x))

/* GELU (vmath.h): the attribute picks the exact or the tanh form. */
UNARY_FLOAT_TABLE(gelu_erf, musa_gelu_erf_f(x), musa_gelu_erf_d(x), DEF_UM)
UNARY_FLOAT_TABLE(gelu_tanh, musa_gelu_tanh_f(x), musa_gelu_tanh_d(x), DEF_UM)
static const musa_loop_fn *gelu_loops(const void *attrs) {
    return ((const musa_attrs_gelu *)attrs)->tanh ? loops_gelu_tanh : loops_gelu_erf;
}
int cpu_gelu(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
             const void *attrs) {
    MUSA_UNUSED(n_in);
    return unary_run(ctx, out, in, gelu_loops(attrs), MUSA_GRAIN_MATH);
}
musa_loop_fn cpu_gelu_loop(const musa_kview *out, const musa_kview *in, const void *attrs) {
    MUSA_UNUSED(out);
    return gelu_loops(attrs)[in[0].dtype];
}

UNARY_PRED(logical_not, x == 0, x == 0)
UNARY_PRED(isnan, x != x, 0 * x)
UNARY_PRED(isinf, isinf(x), 0 * x)

/* ~x: integers and bool (logical not). */
DEF_U(bitwise_not, i64, int64_t, int64_t, ~x)
DEF_U(bitwise_not, i32, int32_t, int32_t, ~x)
DEF_U(bitwise_not, i16, int16_t, int16_t, ~x)
DEF_U(bitwise_not, i8, int8_t, int8_t, ~x)
DEF_U(bitwise_not, u8, uint8_t, uint8_t, ~x)
DEF_U(bitwise_not, b, uint8_t, uint8_t, !x)
static const musa_loop_fn loops_bitwise_not[MUSA_DTYPE_COUNT] = {
    [MUSA_DTYPE_INT64] = bitwise_not_i64, [MUSA_DTYPE_INT32] = bitwise_not_i32,
    [MUSA_DTYPE_INT16] = bitwise_not_i16, [MUSA_DTYPE_INT8] = bitwise_not_i8,
    [MUSA_DTYPE_UINT8] = bitwise_not_u8,  [MUSA_DTYPE_BOOL] = bitwise_not_b};
DEF_KERNEL(bitwise_not, MUSA_GRAIN_CHEAP)

/* ---- chains (chain.h): the float32 block of each loop a chain may run ---- */

#define CHAIN_BLK(NAME)                                                                            \
    static void NAME##_chain(float *o, const float *a) {                                           \
        NAME##_f32_blk(o, a, MUSA_CHAIN_N);                                                        \
    }
/* (clang-format rewraps this list differently on each run) */
// clang-format off
#define CHAIN_UNARY(X)                                                                             \
    X(neg) X(abs) X(relu) X(exp) X(expm1) X(log) X(log1p) X(sqrt) X(rsqrt) X(reciprocal) X(sin)   \
    X(cos) X(tanh) X(sigmoid) X(erf) X(gelu_erf) X(gelu_tanh)
// clang-format on
CHAIN_UNARY(CHAIN_BLK)

bool cpu_unary_chain_op(musa_loop_fn fn, musa_chain_ins *ins) {
#define CHAIN_CASE(NAME)                                                                           \
    if (fn == NAME##_f32) {                                                                        \
        ins->op = MUSA_CHOP_BLK1, ins->blk1 = NAME##_chain;                                        \
        return true;                                                                               \
    }
    CHAIN_UNARY(CHAIN_CASE)
#undef CHAIN_CASE
    return false;
}
