/*
 * vmath.h - tells GCC that glibc's libmvec has SIMD versions of the libm
 * functions the kernels call, so contiguous loops over expf, tanhf, erff,
 * ... vectorise (calls to _ZGVeN16v_expf and friends on AVX-512, the SSE/AVX2
 * variants elsewhere). libmvec is part of glibc (2.35+ for erf, tanh,
 * expm1, log1p); its documented error is at most 4 ulp, inside the float32
 * and float64 tolerances the op tests use (tests/c/ops/math_accuracy.c
 * holds the kernels to it; docs/design.md, "Numerics", has the figures).
 *
 * Include after <math.h>; needs -fopenmp-simd and linking with -lmvec.
 */
#ifndef MUSA_CPU_VMATH_H
#define MUSA_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define MUSA_SIMD_DECL1(f, T) _Pragma("omp declare simd notinbranch") extern T f(T);
#define MUSA_SIMD_DECL2(f, T) _Pragma("omp declare simd notinbranch") extern T f(T, T);

MUSA_SIMD_DECL1(expf, float)
MUSA_SIMD_DECL1(expm1f, float)
MUSA_SIMD_DECL1(logf, float)
MUSA_SIMD_DECL1(log1pf, float)
MUSA_SIMD_DECL1(sinf, float)
MUSA_SIMD_DECL1(cosf, float)
MUSA_SIMD_DECL1(tanhf, float)
MUSA_SIMD_DECL1(erff, float)
MUSA_SIMD_DECL2(powf, float)
MUSA_SIMD_DECL1(exp, double)
MUSA_SIMD_DECL1(expm1, double)
MUSA_SIMD_DECL1(log, double)
MUSA_SIMD_DECL1(log1p, double)
MUSA_SIMD_DECL1(sin, double)
MUSA_SIMD_DECL1(cos, double)
MUSA_SIMD_DECL1(tanh, double)
MUSA_SIMD_DECL1(erf, double)
MUSA_SIMD_DECL2(pow, double)

/* float32 exp and erf: musa's own (vmath.c: at most 0.94 and 0.97 ulp, 1.5x
 * and 2x libmvec's speed, the same bits from their scalar and vector
 * versions) where the build has AVX-512F, VL and DQ, libmvec's expf and
 * erff elsewhere. Every float32 exp and erf in the kernels goes through
 * MUSA_EXPF and MUSA_ERFF. const: no side effects and no errno, as GCC knows
 * of expf, so their loops vectorise the same way. */
#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#define MUSA_OWN_VMATH 1
_Pragma("omp declare simd notinbranch") extern float musa_expf(float) __attribute__((const));
_Pragma("omp declare simd notinbranch") extern float musa_erff(float) __attribute__((const));
#define MUSA_EXPF musa_expf
#define MUSA_ERFF musa_erff
#else
#define MUSA_EXPF expf
#define MUSA_ERFF erff
#endif

/* The pragma for a loop over elements of compute type C (float, double)
 * that calls these functions: one 64-byte vector of elements per step.
 * GCC's tuning prefers 256-bit vectors even on AVX-512, so a plain
 * `omp simd` loop calls the 8-lane float functions; their 16-lane AVX-512
 * versions run tanhf 2x and expf, logf 1.3x faster (bench_vmath). Loops
 * without libm calls stay at 256 bits: neg and abs, memory-bound, ran 3-5%
 * slower at 512. Without AVX-512 a step is two or four calls of the
 * narrower variants. */
#define MUSA_SIMD_LANES_float  16
#define MUSA_SIMD_LANES_double 8
#define MUSA_PRAGMA(x)         MUSA_PRAGMA_(x)
#define MUSA_PRAGMA_(x)        _Pragma(#x)
#define MUSA_SIMD_MATH(C, ...) MUSA_PRAGMA(omp simd simdlen(MUSA_SIMD_LANES_##C) __VA_ARGS__)

/* v[i] = F(v[i]) for i < n (an lvalue array of T, n elements), every
 * element through a whole vector of F's SIMD variant, the last ones
 * through a copy padded with ones. A loop of variable length ends in a tail
 * that may call the scalar function, whose last bit can differ; where a
 * caller's run ends depends on its thread's range or a plan's tile, so an
 * element's bits would too. MUSA_SIMD_WHOLE elements at a time: a
 * multiple of every vector width in use. The pad is 1, in range for every
 * F used here (exp, log): libmvec hands a whole vector with one lane out of
 * range (log(0) = -inf) to its scalar fallback, and zero padding sent
 * every short cross-entropy block there. */
#define MUSA_SIMD_WHOLE 16
#define MUSA_SIMD_APPLY(T, v, n, F)                                                                \
    do {                                                                                           \
        int64_t i_ = 0, n_ = (n);                                                                  \
        for (; i_ + MUSA_SIMD_WHOLE <= n_; i_ += MUSA_SIMD_WHOLE) {                                \
            T *w_ = (v) + i_;                                                                      \
            MUSA_SIMD_MATH(T) for (int k_ = 0; k_ < MUSA_SIMD_WHOLE; k_++) w_[k_] = F(w_[k_]);     \
        }                                                                                          \
        if (i_ < n_) {                                                                             \
            T t_[MUSA_SIMD_WHOLE];                                                                 \
            for (int k_ = 0; k_ < MUSA_SIMD_WHOLE; k_++) t_[k_] = 1;                               \
            memcpy(t_, (v) + i_, sizeof(T) * (size_t)(n_ - i_));                                   \
            MUSA_SIMD_MATH(T) for (int k_ = 0; k_ < MUSA_SIMD_WHOLE; k_++) t_[k_] = F(t_[k_]);     \
            memcpy((v) + i_, t_, sizeof(T) * (size_t)(n_ - i_));                                   \
        }                                                                                          \
    } while (0)

/* exp(x) for loops whose inputs are often -inf: softmax over masked
 * scores, where a causal mask makes half of each row -inf. libmvec's vector
 * exp hands every lane outside its range (-inf included, or any x below
 * about -87 in float32) to a scalar fallback: float32 softmax over the
 * (8, 4, 64, 64) scores of a causal mask took 168 us against 47 us without
 * -inf. Below MUSA_EXP_ZERO exp rounds to +0 in the type (the true value
 * is under a tenth of the smallest denormal), so those lanes have their
 * bits cleared before the call (exp(+0)) and after it (+0): the same bits
 * as exp(x), NaN included. The masks are integer ANDs, not selects: with
 * selects GCC sees that those lanes' results are constants and hands the
 * call x again. */
#define MUSA_EXP_ZERO_f (-110.0f)
#define MUSA_EXP_ZERO_d (-770.0)
#define MUSA_EXP_MASKED_FN(SFX, T, U, EXP)                                                         \
    static inline __attribute__((always_inline)) T musa_exp_masked_##SFX(T x) {                    \
        U keep = -(U) !(x < MUSA_EXP_ZERO_##SFX), b;                                               \
        memcpy(&b, &x, sizeof b);                                                                  \
        b &= keep;                                                                                 \
        memcpy(&x, &b, sizeof b);                                                                  \
        x = EXP(x);                                                                                \
        memcpy(&b, &x, sizeof b);                                                                  \
        b &= keep;                                                                                 \
        memcpy(&x, &b, sizeof b);                                                                  \
        return x;                                                                                  \
    }
#ifdef MUSA_OWN_VMATH
/* musa's own exp has no scalar fallback: it clamps, and every x below
 * -104 gives +0, the masked function's answer (the two agree bit for bit
 * on all 2^32 inputs), so the masks would be work for nothing */
static inline float musa_exp_masked_f(float x) {
    return musa_expf(x);
}
#else
MUSA_EXP_MASKED_FN(f, float, uint32_t, MUSA_EXPF)
#endif
MUSA_EXP_MASKED_FN(d, double, uint64_t, exp)

/* GELU, x Phi(x): exact (with erf) or with the tanh approximation, as
 * PyTorch defines them, and their derivatives times an incoming gradient g
 * (gelu_backward). One definition for the forward and backward kernels. */
#define MUSA_GELU_FNS(SFX, T, ERF, EXP, TANH)                                                      \
    static inline T musa_gelu_erf_##SFX(T x) {                                                     \
        return (T)0.5 * x * ((T)1 + ERF(x * (T)0.70710678118654752440));                           \
    }                                                                                              \
    static inline T musa_gelu_tanh_##SFX(T x) {                                                    \
        T u = (T)0.79788456080286535588 * (x + (T)0.044715 * x * x * x);                           \
        return (T)0.5 * x * ((T)1 + TANH(u));                                                      \
    }                                                                                              \
    static inline T musa_gelu_erf_grad_##SFX(T g, T x) {                                           \
        T cdf = (T)0.5 * ((T)1 + ERF(x * (T)0.70710678118654752440));                              \
        T pdf = EXP((T)-0.5 * x * x) * (T)0.39894228040143267794;                                  \
        return g * (cdf + x * pdf);                                                                \
    }                                                                                              \
    static inline T musa_gelu_tanh_grad_##SFX(T g, T x) {                                          \
        T x2 = x * x, t = TANH((T)0.79788456080286535588 * (x + (T)0.044715 * x2 * x));            \
        T du = (T)0.79788456080286535588 * ((T)1 + (T)(3 * 0.044715) * x2);                        \
        return g * ((T)0.5 * ((T)1 + t) + (T)0.5 * x * ((T)1 - t * t) * du);                       \
    }
MUSA_GELU_FNS(f, float, MUSA_ERFF, MUSA_EXPF, tanhf)
MUSA_GELU_FNS(d, double, erf, exp, tanh)

#endif
