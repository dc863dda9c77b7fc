/*
 * vmath.c - musa's own float32 exp and erf for the kernels (vmath.h:
 * MUSA_EXPF, MUSA_ERFF), on builds with AVX-512F, VL and DQ; elsewhere
 * the kernels call libm's expf and erff (libmvec's vector versions).
 *
 * ---- exp ----
 *
 * e^x = 2^n e^r with n = round(x log2 e) and r = x - n ln 2 (ln 2 in two
 * parts, so r is exact to a few units of the last place of x), e^r by
 * Horner's rule over the Taylor terms to r^7 (|r| <= ln 2 / 2: the first
 * term left out is under 2^-27 of the sum), and 2^n applied by an exact
 * scaling that rounds once, denormals included (vscalefps; two products by
 * powers of two in the scalar function). x is
 * clamped to [-104, 89] first: below, e^x rounds to +0 (e^-104 is under half
 * the smallest denormal), above, to +inf (e^88.73 overflows); -inf gives +0
 * and +inf gives +inf through the clamp, NaN stays NaN.
 *
 * At most 0.94 ulp over every float (checked exhaustively against double
 * exp; 0.88 in tests/c/ops/math_accuracy.c's sweep against long double),
 * where libmvec's AVX-512 expf reaches 2.47; one thread, 16 lanes in cache,
 * 1.5x its speed (bench_vmath).
 *
 * ---- erf ----
 *
 * erf(t) for t = |x| below 4 is a polynomial of degree 5 in t - center on
 * 32 intervals of width 1/8 (tools/vmath_fit.py makes the tables and says
 * how): the interval's coefficients are looked up by index, 16 lanes from
 * two registers each (vpermt2ps), or gathered in the narrower variants.
 * t is clamped to 4 (erf rounds to 1 from 3.92 on), the sign put back.
 * Interval 0 computes t + t q(t), so small arguments keep their relative
 * accuracy. Against long double libm: at most 0.97 ulp over every float,
 * where libmvec's AVX-512 erff reaches 3.98; 2x its speed (bench_vmath).
 *
 * ---- both ----
 *
 * Every variant runs the same IEEE operations in the same order (but for
 * the scalar exp's last scaling: two products where the vectors use
 * vscalefps, one rounding either way), so the scalar function and the
 * vector ones (the 4-, 8- and 16-lane x86 vector ABI variants GCC calls
 * from `omp declare simd` loops) give the same bits for every input, with
 * or without FTZ and DAZ (checked exhaustively): an element's result never
 * depends on the loop that computes it or on where in the loop it falls.
 *
 * This file must not see the `omp declare simd` declarations (vmath.h): on
 * a definition they make GCC generate clones of its own.
 */
#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512DQ__)

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define EXP_L2E 1.44269504088896341f
#define EXP_HI  0.693145751953125f      /* ln 2, its high bits (exact times n) */
#define EXP_LO  1.42860682030941723e-6f /* ln 2 - EXP_HI */
#define EXP_MAX 89.0f
#define EXP_MIN (-104.0f)
#define EXP_C7  (1.0f / 5040)
#define EXP_C6  (1.0f / 720)
#define EXP_C5  (1.0f / 120)
#define EXP_C4  (1.0f / 24)
#define EXP_C3  (1.0f / 6)
#define EXP_C2  0.5f

float musa_expf(float x);

/* 2^k for k in [-126, 127], exactly */
static inline float pow2f(int k) {
    uint32_t b = (uint32_t)(k + 127) << 23;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

float musa_expf(float x) {
    if (x != x) return x + x;
    x = x > EXP_MAX ? EXP_MAX : x < EXP_MIN ? EXP_MIN : x;
    float n = rintf(x * EXP_L2E);
    float r = fmaf(-n, EXP_HI, x);
    r = fmaf(-n, EXP_LO, r);
    float p = fmaf(EXP_C7, r, EXP_C6);
    p = fmaf(p, r, EXP_C5);
    p = fmaf(p, r, EXP_C4);
    p = fmaf(p, r, EXP_C3);
    p = fmaf(p, r, EXP_C2);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    /* p 2^n as vscalefps makes it: two exact powers of two, the first
     * product exact (p 2^(n/2) stays normal for n in [-150, 128]), so one
     * rounding, by the hardware, under the same MXCSR modes as the vector
     * variants (a denormal result flushes in both where FTZ is set) */
    int k = (int)n, k1 = k / 2;
    return p * pow2f(k1) * pow2f(k - k1);
}

/* The vector body (PS the intrinsics' prefix, V the float type; it needs no
 * integer type or table: VECTOR_VARIANTS below). max(c, x) and min(c, x)
 * return x when x is NaN. */
#define VEXP_BODY(PS, V, VI, SI, LOOKUP, x)                                                        \
    do {                                                                                           \
        x = PS##_min_ps(PS##_set1_ps(EXP_MAX), PS##_max_ps(PS##_set1_ps(EXP_MIN), x));             \
        V n_ = PS##_roundscale_ps(PS##_mul_ps(x, PS##_set1_ps(EXP_L2E)),                           \
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);                  \
        V r_ = PS##_fnmadd_ps(n_, PS##_set1_ps(EXP_HI), x);                                        \
        r_ = PS##_fnmadd_ps(n_, PS##_set1_ps(EXP_LO), r_);                                         \
        V p_ = PS##_fmadd_ps(PS##_set1_ps(EXP_C7), r_, PS##_set1_ps(EXP_C6));                      \
        p_ = PS##_fmadd_ps(p_, r_, PS##_set1_ps(EXP_C5));                                          \
        p_ = PS##_fmadd_ps(p_, r_, PS##_set1_ps(EXP_C4));                                          \
        p_ = PS##_fmadd_ps(p_, r_, PS##_set1_ps(EXP_C3));                                          \
        p_ = PS##_fmadd_ps(p_, r_, PS##_set1_ps(EXP_C2));                                          \
        p_ = PS##_fmadd_ps(p_, r_, PS##_set1_ps(1.0f));                                            \
        p_ = PS##_fmadd_ps(p_, r_, PS##_set1_ps(1.0f));                                            \
        x = PS##_scalef_ps(p_, n_);                                                                \
    } while (0)

/* The x86-64 vector function ABI names of `omp declare simd notinbranch`
 * for musa_F: b (SSE, 4 lanes), c (AVX, 8), d (AVX2, 8), e (AVX-512, 16),
 * each running BODY(prefix, float type, int type, bits, LOOKUP_n, x) at its
 * width (LOOKUP_n: the table lookup of that width, where BODY has one). */
#define VECTOR_VARIANTS(F, BODY)                                                                   \
    __m128 _ZGVbN4v_musa_##F(__m128 x);                                                            \
    __m256 _ZGVcN8v_musa_##F(__m256 x);                                                            \
    __m256 _ZGVdN8v_musa_##F(__m256 x);                                                            \
    __m512 _ZGVeN16v_musa_##F(__m512 x);                                                           \
    __m128 _ZGVbN4v_musa_##F(__m128 x) {                                                           \
        BODY(_mm, __m128, __m128i, 128, LOOKUP4, x);                                               \
        return x;                                                                                  \
    }                                                                                              \
    __m256 _ZGVdN8v_musa_##F(__m256 x) {                                                           \
        BODY(_mm256, __m256, __m256i, 256, LOOKUP8, x);                                            \
        return x;                                                                                  \
    }                                                                                              \
    __m256 _ZGVcN8v_musa_##F(__m256 x) {                                                           \
        return _ZGVdN8v_musa_##F(x);                                                               \
    }                                                                                              \
    __m512 _ZGVeN16v_musa_##F(__m512 x) {                                                          \
        BODY(_mm512, __m512, __m512i, 512, LOOKUP16, x);                                           \
        return x;                                                                                  \
    }

VECTOR_VARIANTS(expf, VEXP_BODY)

/* ---- erf ---- */

/* tools/vmath_fit.py: largest relative error of the fits 0.487 x 2^-24 */
static const float ERF_E[32] __attribute__((aligned(64))) = {
    1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
static const float ERF_CENTER[32] __attribute__((aligned(64))) = {
    0.0f,    0.1875f, 0.3125f, 0.4375f, 0.5625f, 0.6875f, 0.8125f, 0.9375f,
    1.0625f, 1.1875f, 1.3125f, 1.4375f, 1.5625f, 1.6875f, 1.8125f, 1.9375f,
    2.0625f, 2.1875f, 2.3125f, 2.4375f, 2.5625f, 2.6875f, 2.8125f, 2.9375f,
    3.0625f, 3.1875f, 3.3125f, 3.4375f, 3.5625f, 3.6875f, 3.8125f, 3.9375f};
static const float ERF_C0[32] __attribute__((aligned(64))) = {
    0.000000000e+00f, 2.091176808e-01f, 3.414686322e-01f, 4.638981223e-01f, 5.736744404e-01f,
    6.690846682e-01f, 7.494640350e-01f, 8.151023984e-01f, 8.670582771e-01f, 9.069217443e-01f,
    9.365685582e-01f, 9.579405785e-01f, 9.728746414e-01f, 9.829897285e-01f, 9.896306396e-01f,
    9.938567877e-01f, 9.964637756e-01f, 9.980224967e-01f, 9.989259243e-01f, 9.994334579e-01f,
    9.997098446e-01f, 9.998556972e-01f, 9.999303222e-01f, 9.999673367e-01f, 9.999851584e-01f,
    9.999934435e-01f, 9.999971986e-01f, 9.999988079e-01f, 9.999995232e-01f, 9.999998212e-01f,
    9.999999404e-01f, 1.000000000e+00f};
static const float ERF_C1[32] __attribute__((aligned(64))) = {
    1.283791661e-01f, 1.089398861e+00f, 1.023395419e+00f, 9.318121076e-01f, 8.223212957e-01f,
    7.033687234e-01f, 5.831131935e-01f, 4.685445726e-01f, 3.649028838e-01f, 2.754431665e-01f,
    2.015185058e-01f, 1.428980231e-01f, 9.821228683e-02f, 6.542348117e-02f, 4.224057496e-02f,
    2.643347532e-02f, 1.603271440e-02f, 9.425146505e-03f, 5.370286293e-03f, 2.965753898e-03f,
    1.587453764e-03f, 8.235601126e-04f, 4.141120007e-04f, 2.018220839e-04f, 9.533400589e-05f,
    4.364708730e-05f, 1.936827903e-05f, 8.330192031e-06f, 3.472541039e-06f, 1.403033480e-06f,
    5.494358106e-07f, 2.085423318e-07f};
static const float ERF_C2[32] __attribute__((aligned(64))) = {
    2.551305442e-07f,  -2.042659074e-01f, -3.198094666e-01f, -4.076537192e-01f, -4.625388384e-01f,
    -4.835711718e-01f, -4.737889767e-01f, -4.392578304e-01f, -3.877172768e-01f, -3.271140158e-01f,
    -2.644762993e-01f, -2.053878009e-01f, -1.534850597e-01f, -1.104143411e-01f, -7.657517493e-02f,
    -5.119571462e-02f, -3.309281915e-02f, -2.060508355e-02f, -1.241630130e-02f, -7.230137475e-03f,
    -4.081606865e-03f, -2.198633505e-03f, -1.136955689e-03f, -5.641146563e-04f, -2.918072278e-04f,
    -1.326099737e-04f, -6.814386143e-05f, -1.736351237e-06f, -5.459250588e-06f, -1.038573919e-05f,
    -1.253305345e-05f, -2.713706635e-05f};
static const float ERF_C3[32] __attribute__((aligned(64))) = {
    -3.761402965e-01f, -3.376547694e-01f, -2.744646370e-01f, -1.916341484e-01f, -1.005875170e-01f,
    -1.281716209e-02f, 6.222867593e-02f,  1.183685064e-01f,  1.529977769e-01f,  1.671168357e-01f,
    1.642681658e-01f,  1.492278129e-01f,  1.271072626e-01f,  1.023960784e-01f,  7.843141258e-02f,
    5.734280869e-02f,  4.012315720e-02f,  2.692545578e-02f,  1.735574566e-02f,  1.075857878e-02f,
    6.420000922e-03f,  3.691008547e-03f,  2.045782050e-03f,  1.093728701e-03f,  5.643027253e-04f,
    2.810899750e-04f,  1.352225081e-04f,  6.284494884e-05f,  2.822290662e-05f,  1.225064352e-05f,
    5.140791927e-06f,  2.085880396e-06f};
static const float ERF_C4[32] __attribute__((aligned(64))) = {
    2.650166862e-04f,  1.003513709e-01f,  1.489737481e-01f,  1.747239232e-01f,  1.788356006e-01f,
    1.665127277e-01f,  1.345083416e-01f,  9.037327766e-02f,  4.963205755e-02f,  1.504838839e-02f,
    -2.297078073e-02f, -4.445281252e-02f, -4.227510095e-02f, -4.704546556e-02f, -4.263733327e-02f,
    -4.239019379e-02f, -2.516764589e-02f, -2.513199113e-02f, -1.644960791e-02f, -1.048685890e-02f,
    -4.062796012e-03f, -7.237342186e-03f, -8.174304850e-03f, -7.298069540e-03f, -8.005311829e-04f,
    -1.737337210e-03f, 6.130316760e-04f,  -5.607761443e-03f, -1.461889595e-03f, 1.046451391e-03f,
    2.128613647e-03f,  5.385644734e-03f};
static const float ERF_C5[32] __attribute__((aligned(64))) = {
    1.110651270e-01f,  1.045433134e-01f,  5.622656643e-02f,  1.301232725e-02f,  -2.302733436e-02f,
    -4.221038893e-02f, -5.573720112e-02f, -7.183037698e-02f, -6.692728400e-02f, -5.186270177e-02f,
    -4.088149592e-02f, -2.332204022e-02f, -6.835229695e-03f, 2.489709063e-03f,  9.439369664e-03f,
    1.231381949e-02f,  1.308187936e-02f,  1.167195477e-02f,  9.486430325e-03f,  7.209428120e-03f,
    5.136060528e-03f,  3.433662700e-03f,  2.183394739e-03f,  1.328949467e-03f,  7.723643794e-04f,
    4.289933131e-04f,  2.288707910e-04f,  1.169249736e-04f,  5.758134648e-05f,  2.725731247e-05f,
    1.241650170e-05f,  5.451571724e-06f};

#define ERF_MAX 4.0f

float musa_erff(float x);

float musa_erff(float x) {
    if (x != x) return x + x;
    float t = fabsf(x);
    t = t > ERF_MAX ? ERF_MAX : t;
    int i = (int)(t * 8.0f);
    i = i > 31 ? 31 : i;
    float d = t - ERF_CENTER[i];
    float p = fmaf(ERF_C5[i], d, ERF_C4[i]);
    p = fmaf(p, d, ERF_C3[i]);
    p = fmaf(p, d, ERF_C2[i]);
    p = fmaf(p, d, ERF_C1[i]);
    p = fmaf(p, d, fmaf(ERF_E[i], d, ERF_C0[i]));
    return copysignf(p, x);
}

/* The vector body: PS the intrinsics' prefix, V and VI the float and int
 * types, LOOKUP(table, index) the coefficients of the lanes' intervals.
 * The index is clamped to [0, 31] (a NaN's conversion gives INT_MIN, and a
 * gather must stay in the table); the sign goes back by OR. */
#define VERF_BODY(PS, V, VI, SI, LOOKUP, x)                                                        \
    do {                                                                                           \
        V sign_ = PS##_and_ps(x, PS##_castsi##SI##_ps(PS##_set1_epi32((int)0x80000000)));          \
        V t_ = PS##_andnot_ps(sign_, x);                                                           \
        t_ = PS##_min_ps(PS##_set1_ps(ERF_MAX), t_);                                               \
        VI i_ = PS##_cvttps_epi32(PS##_mul_ps(t_, PS##_set1_ps(8.0f)));                            \
        i_ = PS##_max_epi32(PS##_min_epi32(i_, PS##_set1_epi32(31)), PS##_setzero_si##SI());       \
        V d_ = PS##_sub_ps(t_, LOOKUP(ERF_CENTER, i_));                                            \
        V p_ = PS##_fmadd_ps(LOOKUP(ERF_C5, i_), d_, LOOKUP(ERF_C4, i_));                          \
        p_ = PS##_fmadd_ps(p_, d_, LOOKUP(ERF_C3, i_));                                            \
        p_ = PS##_fmadd_ps(p_, d_, LOOKUP(ERF_C2, i_));                                            \
        p_ = PS##_fmadd_ps(p_, d_, LOOKUP(ERF_C1, i_));                                            \
        p_ = PS##_fmadd_ps(p_, d_, PS##_fmadd_ps(LOOKUP(ERF_E, i_), d_, LOOKUP(ERF_C0, i_)));      \
        x = PS##_or_ps(p_, sign_);                                                                 \
    } while (0)

#define LOOKUP16(T, i) _mm512_permutex2var_ps(_mm512_load_ps(T), i, _mm512_load_ps(T + 16))
#define LOOKUP8(T, i)  _mm256_i32gather_ps(T, i, 4)
#define LOOKUP4(T, i)  _mm_i32gather_ps(T, i, 4)

VECTOR_VARIANTS(erff, VERF_BODY)

#else
typedef int musa_vmath_unused; /* (ISO C wants a declaration in every file) */
#endif
