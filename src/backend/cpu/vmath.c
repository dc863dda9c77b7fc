/*
 * vexp.c - musa_expf: float32 exp for the kernels (vmath.h, MUSA_EXPF), on
 * builds with AVX-512F and AVX-512VL; elsewhere the kernels call libm's
 * expf (libmvec's vector versions).
 *
 * e^x = 2^n e^r with n = round(x log2 e) and r = x - n ln 2 (ln 2 in two
 * parts, so r is exact to a few units of the last place of x), e^r by
 * Horner's rule over the Taylor terms to r^7 (|r| <= ln 2 / 2: the first
 * term left out is under 2^-27 of the sum), and 2^n applied by an exact
 * scaling that rounds once, denormals included (vscalefps, ldexpf). x is
 * clamped to [-104, 89] first: below, e^x rounds to +0 (e^-104 is under half
 * the smallest denormal), above, to +inf (e^88.73 overflows); -inf gives +0
 * and +inf gives +inf through the clamp, NaN stays NaN.
 *
 * Against long double libm (tests/c/ops/math_accuracy.c): at most 0.92 ulp
 * over every float, where libmvec's AVX-512 expf reaches 2.47; one thread,
 * 16 lanes in cache, 1.5x its speed (bench_vmath).
 *
 * Every variant runs the same IEEE operations in the same order, so the
 * scalar function and the vector ones (the 4-, 8- and 16-lane x86 vector
 * ABI variants GCC calls from `omp declare simd` loops) give the same bits
 * for every input: an element's exp never depends on the loop that
 * computes it or on where in the loop it falls.
 *
 * This file must not see the `omp declare simd` declaration of musa_expf
 * (vmath.h): on a definition it makes GCC generate clones of its own.
 */
#if defined(__AVX512F__) && defined(__AVX512VL__)

#include <immintrin.h>
#include <math.h>

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
    return ldexpf(p, (int)n);
}

/* The vector body over W-bit registers (PS the intrinsics' prefix, V the
 * type). max(c, x) and min(c, x) return x when x is NaN. */
#define VEXP_BODY(PS, V, x)                                                                        \
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

/* x86-64 vector function ABI names of `omp declare simd notinbranch`:
 * b (SSE, 4 lanes), c (AVX, 8), d (AVX2, 8), e (AVX-512, 16). */
__m128 _ZGVbN4v_musa_expf(__m128 x);
__m256 _ZGVcN8v_musa_expf(__m256 x);
__m256 _ZGVdN8v_musa_expf(__m256 x);
__m512 _ZGVeN16v_musa_expf(__m512 x);

__m128 _ZGVbN4v_musa_expf(__m128 x) {
    VEXP_BODY(_mm, __m128, x);
    return x;
}

__m256 _ZGVdN8v_musa_expf(__m256 x) {
    VEXP_BODY(_mm256, __m256, x);
    return x;
}

__m256 _ZGVcN8v_musa_expf(__m256 x) {
    return _ZGVdN8v_musa_expf(x);
}

__m512 _ZGVeN16v_musa_expf(__m512 x) {
    VEXP_BODY(_mm512, __m512, x);
    return x;
}

#else
typedef int musa_vexp_unused; /* (ISO C wants a declaration in every file) */
#endif
