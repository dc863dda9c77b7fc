/*
 * binary.c - binary elementwise kernels (arithmetic, comparisons, logical,
 * bitwise), where and clamp. Inputs arrive already promoted to one dtype.
 *
 * Each loop has a contiguous path, two scalar-broadcast paths (x op c and
 * c op x, the common cases in models) and a strided path. Integer
 * arithmetic goes through uint64 so overflow wraps; integer division by
 * zero raises a flag the kernel turns into MUSA_ERR_ZERO_DIVISION.
 */
#include <math.h>
#include <stdatomic.h>

#include "chain.h"
#include "elem.h"
#include "vmath.h"
#include "iter.h"
#include "kernels.h"

/* The generic integer expressions compare unsigned values with 0 (e.g. the
 * exponent sign check for uint8); that is intended. */
#pragma GCC diagnostic ignored "-Wtype-limits"

typedef struct {
    atomic_int zero_div;  /* set by integer division by zero */
    atomic_int neg_power; /* set by integer ** negative integer */
} binary_flags;

#define FLAG(field)                                                                                \
    (atomic_store_explicit(&((binary_flags *)ctx)->field, 1, memory_order_relaxed), 0)

/* As the unary loops (unary.c): fixed-length blocks, broadcast scalars
 * spread over a block, and padded local copies for tails and strided runs,
 * so an element's result never depends on its position. Contiguous runs
 * take blocks of MUSA_VTAIL in place before their last partial block: an
 * attention head's rows of 32 floats (`q + 0` over a (8, 64, 4, 32) view
 * of a (8, 4, 64, 32) tensor) went element by element through the copies,
 * 40 us where the copy of the same view takes 4. */
#define DEF_B(NAME, SN, T, C, OT, OST, EXPR) DEF_B_SIMD(NAME, SN, T, C, OT, OST, EXPR, omp simd)
/* ... calling libm: a 64-byte vector a step (vmath.h) */
#define DEF_BM(NAME, SN, T, C, OT, OST, EXPR)                                                      \
    DEF_B_SIMD(NAME, SN, T, C, OT, OST, EXPR, omp simd simdlen(MUSA_SIMD_LANES_##C))
#define DEF_B_SIMD(NAME, SN, T, C, OT, OST, EXPR, PRAGMA)                                          \
    static inline __attribute__((always_inline)) void NAME##_##SN##_blk(                           \
        void *ctx, OT *o, const T *pa, const T *pb, const int K) {                                 \
        (void)ctx;                                                                                 \
        MUSA_PRAGMA(PRAGMA) for (int k = 0; k < K; k++) {                                          \
            C a = LD_##SN(pa[k]), b = LD_##SN(pb[k]);                                              \
            o[k] = OST(EXPR);                                                                      \
        }                                                                                          \
    }                                                                                              \
    DEF_B_LOOP(NAME, SN, T, OT)
/* float16/bfloat16 of an op calling libm: through its float32 block (as
 * unary.c's DEF_UM_LOW; the same bits) */
#define DEF_BM_LOW(NAME, SN, T, C, OT, OST, EXPR)                                                  \
    static inline __attribute__((always_inline)) void NAME##_##SN##_blk(                           \
        void *ctx, OT *o, const T *pa, const T *pb, const int K) {                                 \
        float fa[MUSA_VBLK], fb[MUSA_VBLK], fo[MUSA_VBLK];                                         \
        _Pragma("omp simd") for (int k = 0; k < K; k++) fa[k] = LD_##SN(pa[k]),                    \
                                                        fb[k] = LD_##SN(pb[k]);                    \
        NAME##_f32_blk(ctx, fo, fa, fb, K);                                                        \
        _Pragma("omp simd") for (int k = 0; k < K; k++) o[k] = OST(fo[k]);                         \
    }                                                                                              \
    DEF_B_LOOP(NAME, SN, T, OT)
/* The strided loop around a block function. */
#define DEF_B_LOOP(NAME, SN, T, OT)                                                                \
    static void NAME##_##SN(void *ctx, int64_t n, char **p, const int64_t *s) {                    \
        const int64_t es = (int64_t)sizeof(T), eo = (int64_t)sizeof(OT);                           \
        int64_t i0 = 0;                                                                            \
        T sa[MUSA_VBLK], sb[MUSA_VBLK];                                                            \
        if (s[0] == eo && (s[1] == es || s[1] == 0) && (s[2] == es || s[2] == 0) &&                \
            n >= MUSA_VTAIL) {                                                                     \
            int nf = n >= MUSA_VBLK ? MUSA_VBLK : MUSA_VTAIL;                                      \
            if (!s[1])                                                                             \
                for (int k = 0; k < nf; k++) sa[k] = *(const T *)p[1];                             \
            if (!s[2])                                                                             \
                for (int k = 0; k < nf; k++) sb[k] = *(const T *)p[2];                             \
            for (; i0 + MUSA_VBLK <= n; i0 += MUSA_VBLK)                                           \
                NAME##_##SN##_blk(ctx, (OT *)p[0] + i0, s[1] ? (const T *)p[1] + i0 : sa,          \
                                  s[2] ? (const T *)p[2] + i0 : sb, MUSA_VBLK);                    \
            for (; i0 + MUSA_VTAIL <= n; i0 += MUSA_VTAIL)                                         \
                NAME##_##SN##_blk(ctx, (OT *)p[0] + i0, s[1] ? (const T *)p[1] + i0 : sa,          \
                                  s[2] ? (const T *)p[2] + i0 : sb, MUSA_VTAIL);                   \
        }                                                                                          \
        for (; i0 < n; i0 += MUSA_VTAIL) {                                                         \
            OT ob[MUSA_VTAIL];                                                                     \
            int64_t m = n - i0 < MUSA_VTAIL ? n - i0 : MUSA_VTAIL;                                 \
            for (int64_t k = 0; k < MUSA_VTAIL; k++) {                                             \
                int64_t j = i0 + (k < m ? k : 0);                                                  \
                sa[k] = *(const T *)(p[1] + j * s[1]);                                             \
                sb[k] = *(const T *)(p[2] + j * s[2]);                                             \
            }                                                                                      \
            NAME##_##SN##_blk(ctx, ob, sa, sb, MUSA_VTAIL);                                        \
            for (int64_t k = 0; k < m; k++) *(OT *)(p[0] + (i0 + k) * s[0]) = ob[k];               \
        }                                                                                          \
    }

/* Same-dtype result. FE: float expr (also f16/bf16), DE: double, IE: ints,
 * BE: bool (omit with 0 to reject). */
#define BIN_FLOATS(NAME, FE, DE)                                                                   \
    DEF_B(NAME, f32, float, float, float, ST_f32, FE)                                              \
    DEF_B(NAME, f64, double, double, double, ST_f64, DE)                                           \
    DEF_B(NAME, f16, musa_f16, float, musa_f16, ST_f16, FE)                                        \
    DEF_B(NAME, bf16, musa_bf16, float, musa_bf16, ST_bf16, FE)
#define BIN_FLOATS_M(NAME, FE, DE) /* calling libm */                                              \
    DEF_BM(NAME, f32, float, float, float, ST_f32, FE)                                             \
    DEF_BM(NAME, f64, double, double, double, ST_f64, DE)                                          \
    DEF_BM_LOW(NAME, f16, musa_f16, float, musa_f16, ST_f16, FE)                                   \
    DEF_BM_LOW(NAME, bf16, musa_bf16, float, musa_bf16, ST_bf16, FE)
#define BIN_INTS(NAME, IE)                                                                         \
    DEF_B(NAME, i64, int64_t, int64_t, int64_t, ST_i64, IE)                                        \
    DEF_B(NAME, i32, int32_t, int32_t, int32_t, ST_i32, IE)                                        \
    DEF_B(NAME, i16, int16_t, int16_t, int16_t, ST_i16, IE)                                        \
    DEF_B(NAME, i8, int8_t, int8_t, int8_t, ST_i8, IE)                                             \
    DEF_B(NAME, u8, uint8_t, uint8_t, uint8_t, ST_u8, IE)
#define FLOAT_ENTRIES(NAME)                                                                        \
    [MUSA_DTYPE_FLOAT32] = NAME##_f32, [MUSA_DTYPE_FLOAT64] = NAME##_f64,                          \
    [MUSA_DTYPE_FLOAT16] = NAME##_f16, [MUSA_DTYPE_BFLOAT16] = NAME##_bf16
#define INT_ENTRIES(NAME)                                                                          \
    [MUSA_DTYPE_INT64] = NAME##_i64, [MUSA_DTYPE_INT32] = NAME##_i32,                              \
    [MUSA_DTYPE_INT8] = NAME##_i8, [MUSA_DTYPE_UINT8] = NAME##_u8, [MUSA_DTYPE_INT16] = NAME##_i16

#define BINARY_ARITH(NAME, FE, DE, IE, BE)                                                         \
    BIN_FLOATS(NAME, FE, DE)                                                                       \
    BIN_INTS(NAME, IE)                                                                             \
    DEF_B(NAME, b, uint8_t, uint8_t, uint8_t, ST_b, BE)                                            \
    static const musa_loop_fn loops_##NAME[MUSA_DTYPE_COUNT] = {                                   \
        FLOAT_ENTRIES(NAME), INT_ENTRIES(NAME), [MUSA_DTYPE_BOOL] = NAME##_b};                     \
    DEF_KERNEL(NAME)

#define BINARY_NUMERIC(NAME, FE, DE, IE)                                                           \
    BIN_FLOATS(NAME, FE, DE)                                                                       \
    BIN_INTS(NAME, IE)                                                                             \
    static const musa_loop_fn loops_##NAME[MUSA_DTYPE_COUNT] = {FLOAT_ENTRIES(NAME),               \
                                                                INT_ENTRIES(NAME)};                \
    DEF_KERNEL(NAME)

#define BINARY_FLOAT(NAME, FE, DE)                                                                 \
    BIN_FLOATS(NAME, FE, DE)                                                                       \
    static const musa_loop_fn loops_##NAME[MUSA_DTYPE_COUNT] = {FLOAT_ENTRIES(NAME)};              \
    DEF_KERNEL(NAME)

/* Comparisons: any dtype in, bool out. */
#define BINARY_CMP(NAME, OPR)                                                                      \
    DEF_B(NAME, f32, float, float, uint8_t, (uint8_t), a OPR b)                                    \
    DEF_B(NAME, f64, double, double, uint8_t, (uint8_t), a OPR b)                                  \
    DEF_B(NAME, f16, musa_f16, float, uint8_t, (uint8_t), a OPR b)                                 \
    DEF_B(NAME, bf16, musa_bf16, float, uint8_t, (uint8_t), a OPR b)                               \
    DEF_B(NAME, i64, int64_t, int64_t, uint8_t, (uint8_t), a OPR b)                                \
    DEF_B(NAME, i32, int32_t, int32_t, uint8_t, (uint8_t), a OPR b)                                \
    DEF_B(NAME, i16, int16_t, int16_t, uint8_t, (uint8_t), a OPR b)                                \
    DEF_B(NAME, i8, int8_t, int8_t, uint8_t, (uint8_t), a OPR b)                                   \
    DEF_B(NAME, u8, uint8_t, uint8_t, uint8_t, (uint8_t), a OPR b)                                 \
    DEF_B(NAME, b, uint8_t, uint8_t, uint8_t, (uint8_t), a OPR b)                                  \
    static const musa_loop_fn loops_##NAME[MUSA_DTYPE_COUNT] = {                                   \
        FLOAT_ENTRIES(NAME), INT_ENTRIES(NAME), [MUSA_DTYPE_BOOL] = NAME##_b};                     \
    DEF_KERNEL(NAME)

/* Logical ops: inputs are bool (inference casts them). */
#define BINARY_LOGIC(NAME, EXPR)                                                                   \
    DEF_B(NAME, b, uint8_t, uint8_t, uint8_t, (uint8_t), EXPR)                                     \
    static const musa_loop_fn loops_##NAME[MUSA_DTYPE_COUNT] = {[MUSA_DTYPE_BOOL] = NAME##_b};     \
    DEF_KERNEL(NAME)

/* Bitwise ops: integers, and bool where the expression keeps 0/1 values. */
#define BINARY_BITS(NAME, EXPR)                                                                    \
    BIN_INTS(NAME, EXPR)                                                                           \
    DEF_B(NAME, b, uint8_t, uint8_t, uint8_t, ST_b, EXPR)                                          \
    static const musa_loop_fn loops_##NAME[MUSA_DTYPE_COUNT] = {                                   \
        INT_ENTRIES(NAME), [MUSA_DTYPE_BOOL] = NAME##_b};                                          \
    DEF_KERNEL(NAME)
#define BINARY_SHIFT(NAME, EXPR)                                                                   \
    BIN_INTS(NAME, EXPR)                                                                           \
    static const musa_loop_fn loops_##NAME[MUSA_DTYPE_COUNT] = {INT_ENTRIES(NAME)};                \
    DEF_KERNEL(NAME)

#define DEF_KERNEL(NAME)                                                                           \
    int cpu_##NAME(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,          \
                   const void *attrs) {                                                            \
        (void)n_in, (void)attrs;                                                                   \
        return binary_run(ctx, out, in, loops_##NAME);                                             \
    }                                                                                              \
    musa_loop_fn cpu_##NAME##_loop(const musa_kview *out, const musa_kview *in,                    \
                                   const void *attrs) {                                            \
        (void)out, (void)attrs;                                                                    \
        return float_loop(loops_##NAME, in);                                                       \
    }

/* The loop of a binary kernel for cpu_<name>_loop: float operands only (the
 * integer loops report errors through binary_flags). */
static musa_loop_fn float_loop(const musa_loop_fn *loops, const musa_kview *in) {
    return musa_is_float((musa_dtype)in[0].dtype) ? loops[in[0].dtype] : NULL;
}

static int binary_run(const musa_kctx *ctx, musa_kview *out, const musa_kview *in,
                      const musa_loop_fn *loops) {
    musa_loop_fn fn = loops[in[0].dtype];
    if (!fn)
        return musa_err(MUSA_ERR_TYPE, "[%s] no CPU kernel for %s", ctx->op_name,
                        musa_dtype_name((musa_dtype)in[0].dtype));
    binary_flags flags;
    atomic_init(&flags.zero_div, 0);
    atomic_init(&flags.neg_power, 0);
    const musa_kview *ops[3] = {&out[0], &in[0], &in[1]};
    musa_iter it;
    musa_iter_init(&it, ops, 3);
    musa_iter_run_elementwise(&it, MUSA_GRAIN_CHEAP, fn, &flags);
    if (atomic_load(&flags.zero_div))
        return musa_err(MUSA_ERR_ZERO_DIVISION, "[%s] integer division by zero", ctx->op_name);
    if (atomic_load(&flags.neg_power))
        return musa_err(MUSA_ERR_VALUE, "[%s] integers to negative integer powers are not allowed",
                        ctx->op_name);
    return MUSA_OK;
}

/* ---- integer helpers (wrapping, checked) ---- */
#define U64(x)     ((uint64_t)(int64_t)(x))
#define IADD(a, b) ((int64_t)(U64(a) + U64(b)))
#define ISUB(a, b) ((int64_t)(U64(a) - U64(b)))
#define IMUL(a, b) ((int64_t)(U64(a) * U64(b)))

/* Shifts by a count outside [0, bits) are defined as NumPy and PyTorch 2
 * define them: a left shift gives 0, a right shift the sign (0 or -1); in
 * range, a left shift wraps (through uint64) and a right shift of a
 * negative value is arithmetic. */
#define SHIFT_OUT(a, b) ((b) < 0 || (uint64_t)(b) >= 8 * sizeof(a))
#define ISHL(a, b)      (SHIFT_OUT(a, b) ? 0 : (int64_t)(U64(a) << (b)))
#define ISHR(a, b)      (SHIFT_OUT(a, b) ? -((a) < 0) : (a) >> (b))

/* gcd and lcm on magnitudes as uint64 (|INT64_MIN| is 2^63): defined for
 * every pair; gcd(0, 0) = 0 and lcm with a 0 is 0, as in PyTorch; lcm
 * wraps to the dtype. */
static inline uint64_t ugcd(uint64_t a, uint64_t b) {
    while (a) {
        uint64_t c = a;
        a = b % a;
        b = c;
    }
    return b;
}
#define UABS(a)    ((a) < 0 ? 0 - (uint64_t)(int64_t)(a) : (uint64_t)(int64_t)(a))
#define igcd(a, b) ((int64_t)ugcd(UABS(a), UABS(b)))
#define ilcm(a, b) (igcd(a, b) ? (int64_t)(UABS(a) / ugcd(UABS(a), UABS(b)) * UABS(b)) : 0)

static inline int64_t ifloordiv(int64_t a, int64_t b) {
    if (b == -1) return (int64_t)(0u - (uint64_t)a);
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}
static inline int64_t ifmod(int64_t a, int64_t b) {
    return b == -1 ? 0 : a % b;
}
static inline int64_t iremainder(int64_t a, int64_t b) {
    if (b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}
static inline int64_t ipow(int64_t a, int64_t b) {
    uint64_t r = 1, base = (uint64_t)a;
    while (b > 0) {
        if (b & 1) r *= base;
        base *= base;
        b >>= 1;
    }
    return (int64_t)r;
}

/* Python-style floor division on floats (as PyTorch computes it). */
#define DEF_FFLOORDIV(NAME, T, FMOD, FLOOR, COPYSIGN)                                              \
    static inline T NAME(T a, T b) {                                                               \
        if (b == 0) return a / b;                                                                  \
        T mod = FMOD(a, b), div = (a - mod) / b;                                                   \
        if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;                                            \
        if (div == 0) return COPYSIGN((T)0, a / b);                                                \
        T fl = FLOOR(div);                                                                         \
        if (div - fl > (T)0.5) fl += 1;                                                            \
        return fl;                                                                                 \
    }
DEF_FFLOORDIV(ffloordivf, float, fmodf, floorf, copysignf)
DEF_FFLOORDIV(ffloordiv, double, fmod, floor, copysign)

#define DEF_FREM(NAME, T, FMOD)                                                                    \
    static inline T NAME(T a, T b) {                                                               \
        T r = FMOD(a, b);                                                                          \
        if (r != 0 && ((r < 0) != (b < 0))) r += b;                                                \
        return r;                                                                                  \
    }
DEF_FREM(fremf, float, fmodf)
DEF_FREM(frem, double, fmod)

#define FMAX(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) > (b) ? (a) : (b))
#define FMIN(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) < (b) ? (a) : (b))

// clang-format off
BINARY_ARITH(add, a + b, a + b, IADD(a, b), a | b)
BINARY_NUMERIC(sub, a - b, a - b, ISUB(a, b))
BINARY_ARITH(mul, a * b, a * b, IMUL(a, b), a & b)
BINARY_FLOAT(div, a / b, a / b)
BINARY_FLOAT(copysign, copysignf(a, b), copysign(a, b))
/* the incomplete gamma family (gamma.c), in double for every dtype */
BINARY_FLOAT(igamma, (float)musa_igamma_f64(a, b), musa_igamma_f64(a, b))
BINARY_FLOAT(igammac, (float)musa_igammac_f64(a, b), musa_igammac_f64(a, b))
BINARY_FLOAT(igamma_grad_x, (float)musa_igamma_grad_x_f64(a, b), musa_igamma_grad_x_f64(a, b))
BINARY_FLOAT(igamma_grad_a, (float)musa_igamma_grad_a_f64(a, b), musa_igamma_grad_a_f64(a, b))
BINARY_FLOAT(standard_gamma_grad, (float)musa_standard_gamma_grad_f64(a, b),
             musa_standard_gamma_grad_f64(a, b))
BINARY_NUMERIC(floor_divide, ffloordivf(a, b), ffloordiv(a, b),
               b == 0 ? FLAG(zero_div) : ifloordiv(a, b))
/* pow: a float tensor to one scalar exponent 2, 3, 0.5 or -1 takes the
 * loops PyTorch takes (a*a, a*a*a, sqrt, 1/a): one or two roundings instead
 * of a powf call per element. */
BIN_FLOATS(pow, powf(a, b), pow(a, b))
BIN_INTS(pow, b < 0 ? FLAG(neg_power) : ipow(a, b))
BIN_FLOATS(pow_2, ((void)b, a * a), ((void)b, a * a))
BIN_FLOATS(pow_3, ((void)b, a * a * a), ((void)b, a * a * a))
/* sqrt, with pow's answers where they differ: pow(-inf, 0.5) = +inf, pow(-0, 0.5) = +0 */
BIN_FLOATS(pow_half, ((void)b, a == -INFINITY ? INFINITY : sqrtf(a) + 0.0f),
           ((void)b, a == -INFINITY ? INFINITY : sqrt(a) + 0.0))
BIN_FLOATS(pow_m1, ((void)b, 1.0f / a), ((void)b, 1.0 / a))
static const musa_loop_fn loops_pow[MUSA_DTYPE_COUNT] = {FLOAT_ENTRIES(pow), INT_ENTRIES(pow)};
static const musa_loop_fn loops_pow_2[MUSA_DTYPE_COUNT] = {FLOAT_ENTRIES(pow_2)};
static const musa_loop_fn loops_pow_3[MUSA_DTYPE_COUNT] = {FLOAT_ENTRIES(pow_3)};
static const musa_loop_fn loops_pow_half[MUSA_DTYPE_COUNT] = {FLOAT_ENTRIES(pow_half)};
static const musa_loop_fn loops_pow_m1[MUSA_DTYPE_COUNT] = {FLOAT_ENTRIES(pow_m1)};

/* pow's loops for this exponent: the fast ones for a float tensor to one
 * scalar 2, 3, 0.5 or -1 (read where its data is there). */
static const musa_loop_fn *pow_loops(const musa_kview *out, const musa_kview *in) {
    const musa_kview *e = &in[1];
    bool scalar = musa_is_float((musa_dtype)in[0].dtype) && in[0].dtype == e->dtype && e->data;
    for (int d = 0; scalar && d < e->ndim; d++) scalar = e->shape[d] == 1 || e->strides[d] == 0;
    if (scalar && musa_kview_numel(out) > 0) {
        double b = musa_load_f64(e->data, (musa_dtype)e->dtype);
        if (b == 2) return loops_pow_2;
        if (b == 3) return loops_pow_3;
        if (b == 0.5) return loops_pow_half;
        if (b == -1) return loops_pow_m1;
    }
    return loops_pow;
}

int cpu_pow(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
            const void *attrs) {
    (void)n_in, (void)attrs;
    return binary_run(ctx, out, in, pow_loops(out, in));
}

musa_loop_fn cpu_pow_loop(const musa_kview *out, const musa_kview *in, const void *attrs) {
    (void)attrs;
    return float_loop(pow_loops(out, in), in);
}
BINARY_ARITH(maximum, FMAX(a, b), FMAX(a, b), a > b ? a : b, a | b)
BINARY_ARITH(minimum, FMIN(a, b), FMIN(a, b), a < b ? a : b, a & b)
BINARY_NUMERIC(fmod, fmodf(a, b), fmod(a, b), b == 0 ? FLAG(zero_div) : ifmod(a, b))
BINARY_NUMERIC(remainder, fremf(a, b), frem(a, b), b == 0 ? FLAG(zero_div) : iremainder(a, b))

BINARY_CMP(eq, ==)
BINARY_CMP(ne, !=)
BINARY_CMP(lt, <)
BINARY_CMP(le, <=)
BINARY_CMP(gt, >)
BINARY_CMP(ge, >=)

BINARY_LOGIC(logical_and, a && b)
BINARY_LOGIC(logical_or, a || b)
BINARY_LOGIC(logical_xor, (a != 0) != (b != 0))

BINARY_BITS(bitwise_and, a & b)
BINARY_BITS(bitwise_or, a | b)
BINARY_BITS(bitwise_xor, a ^ b)
BINARY_SHIFT(bitwise_left_shift, ISHL(a, b))
BINARY_SHIFT(bitwise_right_shift, ISHR(a, b))
BINARY_SHIFT(gcd, igcd(a, b))
BINARY_SHIFT(lcm, ilcm(a, b))
// clang-format on

/* ---- where: bytewise select, any dtype ---- */

#define DEF_WHERE(BITS)                                                                            \
    static void where_##BITS(void *ctx, int64_t n, char **p, const int64_t *s) {                   \
        (void)ctx;                                                                                 \
        typedef uint##BITS##_t T;                                                                  \
        const int64_t es = (int64_t)sizeof(T);                                                     \
        if (s[0] == es && s[1] == 1 && (s[2] == es || s[2] == 0) && (s[3] == es || s[3] == 0)) {   \
            /* contiguous, either side possibly a scalar (relu's backward, masked_fill's           \
             * where(mask, value, x)): vectorisable */                                             \
            T *o = (T *)p[0];                                                                      \
            const uint8_t *c = (const uint8_t *)p[1];                                              \
            const T *a = (const T *)p[2], *b = (const T *)p[3];                                    \
            const T a0 = *a, b0 = *b;                                                              \
            if (s[2] && s[3])                                                                      \
                for (int64_t i = 0; i < n; i++) o[i] = c[i] ? a[i] : b[i];                         \
            else if (s[2])                                                                         \
                for (int64_t i = 0; i < n; i++) o[i] = c[i] ? a[i] : b0;                           \
            else if (s[3])                                                                         \
                for (int64_t i = 0; i < n; i++) o[i] = c[i] ? a0 : b[i];                           \
            else                                                                                   \
                for (int64_t i = 0; i < n; i++) o[i] = c[i] ? a0 : b0;                             \
            return;                                                                                \
        }                                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                          \
            uint8_t c = *(const uint8_t *)(p[1] + i * s[1]);                                       \
            T a = *(const T *)(p[2] + i * s[2]), b = *(const T *)(p[3] + i * s[3]);                \
            *(T *)(p[0] + i * s[0]) = c ? a : b;                                                   \
        }                                                                                          \
    }
DEF_WHERE(8)
DEF_WHERE(16)
DEF_WHERE(32)
DEF_WHERE(64)

/* where's loop moves elements of out's size */
static musa_loop_fn where_loop(const musa_kview *out) {
    switch (musa_dtype_info[out[0].dtype].size) {
    case 1:
        return where_8;
    case 2:
        return where_16;
    case 4:
        return where_32;
    default:
        return where_64;
    }
}

int cpu_where(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
              const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    const musa_kview *ops[4] = {&out[0], &in[0], &in[1], &in[2]};
    musa_iter it;
    musa_iter_init(&it, ops, 4);
    musa_iter_run_elementwise(&it, MUSA_GRAIN_CHEAP, where_loop(out), NULL);
    return MUSA_OK;
}

musa_loop_fn cpu_where_loop(const musa_kview *out, const musa_kview *in, const void *attrs) {
    MUSA_UNUSED(in), MUSA_UNUSED(attrs);
    return where_loop(out);
}

/* ---- clamp ---- */

typedef struct {
    double lo, hi;    /* float bounds (+-inf when absent) */
    int64_t ilo, ihi; /* integer bounds */
} clamp_bounds;

/* (contiguous runs as loops of their own, which vectorise: with the
 * strides left variable, clamping 4M float32 took 640 us, PyTorch 241) */
#define DEF_CLAMP_F(SN, T, C)                                                                      \
    static void clamp_##SN(void *ctx, int64_t n, char **p, const int64_t *s) {                     \
        const clamp_bounds *cb = ctx;                                                              \
        const C lo = (C)cb->lo, hi = (C)cb->hi;                                                    \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {                            \
            T *o = (T *)p[0];                                                                      \
            const T *v = (const T *)p[1];                                                          \
            for (int64_t i = 0; i < n; i++) {                                                      \
                C x = LD_##SN(v[i]);                                                               \
                x = x < lo ? lo : x;                                                               \
                o[i] = ST_##SN(x > hi ? hi : x);                                                   \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                          \
            C x = LD_##SN(*(const T *)(p[1] + i * s[1]));                                          \
            x = x < lo ? lo : x;                                                                   \
            x = x > hi ? hi : x;                                                                   \
            *(T *)(p[0] + i * s[0]) = ST_##SN(x);                                                  \
        }                                                                                          \
    }
#define DEF_CLAMP_I(SN, T, C)                                                                      \
    static void clamp_##SN(void *ctx, int64_t n, char **p, const int64_t *s) {                     \
        const clamp_bounds *cb = ctx;                                                              \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {                            \
            T *o = (T *)p[0];                                                                      \
            const T *v = (const T *)p[1];                                                          \
            const int64_t ilo = cb->ilo, ihi = cb->ihi;                                            \
            for (int64_t i = 0; i < n; i++) {                                                      \
                int64_t x = LD_##SN(v[i]);                                                         \
                x = x < ilo ? ilo : x;                                                             \
                o[i] = ST_##SN(x > ihi ? ihi : x);                                                 \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                          \
            int64_t x = LD_##SN(*(const T *)(p[1] + i * s[1]));                                    \
            x = x < cb->ilo ? cb->ilo : x;                                                         \
            x = x > cb->ihi ? cb->ihi : x;                                                         \
            *(T *)(p[0] + i * s[0]) = ST_##SN(x);                                                  \
        }                                                                                          \
    }
DEF_CLAMP_F(f32, float, float)
DEF_CLAMP_F(f64, double, double)
DEF_CLAMP_F(f16, musa_f16, float)
DEF_CLAMP_F(bf16, musa_bf16, float)
DEF_CLAMP_I(i64, int64_t, int64_t)
DEF_CLAMP_I(i32, int32_t, int32_t)
DEF_CLAMP_I(i16, int16_t, int16_t)
DEF_CLAMP_I(i8, int8_t, int8_t)
DEF_CLAMP_I(u8, uint8_t, uint8_t)

int cpu_clamp(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
              const void *attrs) {
    MUSA_UNUSED(n_in);
    static const musa_loop_fn loops[MUSA_DTYPE_COUNT] = {FLOAT_ENTRIES(clamp), INT_ENTRIES(clamp)};
    const musa_attrs_clamp *a = attrs;
    musa_loop_fn fn = loops[in[0].dtype];
    if (!fn) return musa_err(MUSA_ERR_TYPE, "[%s] no CPU kernel for bool", ctx->op_name);
    clamp_bounds cb = {a->has_min ? a->min : -INFINITY, a->has_max ? a->max : INFINITY,
                       a->has_min ? musa_sat_i64(ceil(a->min)) : INT64_MIN,
                       a->has_max ? musa_sat_i64(floor(a->max)) : INT64_MAX};
    if (a->has_min && a->min != a->min) cb.ilo = 0; /* NaN bound: nothing sensible; keep defined */
    const musa_kview *ops[2] = {&out[0], &in[0]};
    musa_iter it;
    musa_iter_init(&it, ops, 2);
    musa_iter_run_elementwise(&it, MUSA_GRAIN_CHEAP, fn, &cb);
    return MUSA_OK;
}

int musa_cpu_add_into(const musa_kview *dst, const musa_kview *src) {
    const musa_kview *ops[3] = {dst, dst, src};
    musa_iter it;
    musa_iter_init(&it, ops, 3);
    binary_flags flags;
    atomic_init(&flags.zero_div, 0);
    atomic_init(&flags.neg_power, 0);
    musa_iter_run_elementwise(&it, MUSA_GRAIN_CHEAP, loops_add[dst->dtype], &flags);
    return MUSA_OK;
}

void musa_cpu_add_run(musa_dtype dt, void *o, const void *a, int64_t n) {
    binary_flags flags;
    atomic_init(&flags.zero_div, 0);
    atomic_init(&flags.neg_power, 0);
    int64_t es = (int64_t)musa_dtype_info[dt].size, s[3] = {es, es, es};
    char *p[3] = {o, o, (char *)a};
    loops_add[dt](&flags, n, p, s);
}

/* ---- gelu_backward(grad, x): the derivative of GELU (vmath.h) ---- */

BIN_FLOATS_M(gelu_erf_grad, musa_gelu_erf_grad_f(a, b), musa_gelu_erf_grad_d(a, b))
BIN_FLOATS_M(gelu_tanh_grad, musa_gelu_tanh_grad_f(a, b), musa_gelu_tanh_grad_d(a, b))
static const musa_loop_fn *gelu_grad_loops(const void *attrs) {
    static const musa_loop_fn erf_loops[MUSA_DTYPE_COUNT] = {FLOAT_ENTRIES(gelu_erf_grad)};
    static const musa_loop_fn tanh_loops[MUSA_DTYPE_COUNT] = {FLOAT_ENTRIES(gelu_tanh_grad)};
    return ((const musa_attrs_gelu *)attrs)->tanh ? tanh_loops : erf_loops;
}
int cpu_gelu_backward(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                      const void *attrs) {
    MUSA_UNUSED(n_in);
    return binary_run(ctx, out, in, gelu_grad_loops(attrs));
}
musa_loop_fn cpu_gelu_backward_loop(const musa_kview *out, const musa_kview *in,
                                    const void *attrs) {
    MUSA_UNUSED(out);
    return float_loop(gelu_grad_loops(attrs), in);
}

/* ---- chains (chain.h): the float32 loops a chain may run ---- */

#define CHAIN_BLK(NAME)                                                                            \
    static void NAME##_chain(float *o, const float *a, const float *b) {                           \
        NAME##_f32_blk(NULL, o, a, b, MUSA_CHAIN_N);                                               \
    }
#define CHAIN_BINARY(X) X(pow) X(maximum) X(minimum) X(copysign) X(gelu_erf_grad) X(gelu_tanh_grad)
CHAIN_BINARY(CHAIN_BLK)

bool cpu_binary_chain_op(musa_loop_fn fn, musa_chain_ins *ins) {
    static const struct {
        musa_loop_fn fn;
        musa_chain_op op;
    } reg[] = {{add_f32, MUSA_CHOP_ADD}, {sub_f32, MUSA_CHOP_SUB},    {mul_f32, MUSA_CHOP_MUL},
               {div_f32, MUSA_CHOP_DIV}, {pow_2_f32, MUSA_CHOP_POW2}, {pow_3_f32, MUSA_CHOP_POW3}};
    for (size_t k = 0; k < sizeof reg / sizeof reg[0]; k++)
        if (fn == reg[k].fn) {
            ins->op = (uint8_t)reg[k].op;
            return true;
        }
#define CHAIN_CASE(NAME)                                                                           \
    if (fn == NAME##_f32) {                                                                        \
        ins->op = MUSA_CHOP_BLK2, ins->blk2 = NAME##_chain;                                        \
        return true;                                                                               \
    }
    CHAIN_BINARY(CHAIN_CASE)
#undef CHAIN_CASE
    return false;
}
