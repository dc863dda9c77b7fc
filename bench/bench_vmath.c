/*
 * bench_vmath.c - the vector math libraries the elementwise kernels could
 * call, side by side in one run: glibc's libmvec at 256 bits (the 8-lane
 * float / 4-lane double functions GCC calls when it tunes for 256-bit
 * vectors), libmvec at 512 bits (what the kernels call on AVX-512, see
 * MUSA_SIMD_MATH in src/backend/cpu/vmath.h), and, when built with libsleef-dev, SLEEF 3's 1-ulp
 * ("u10") functions for AVX-512 and AVX2 (Sleef_tanhf16_u10avx512f, ...).
 *
 * For each function and dtype: nanoseconds per element over 8192 elements
 * (cache resident, one thread, CPU time, best of 15 rounds), and the largest
 * error in ulp over a sweep of inputs (every 4099th float32 bit pattern;
 * 2^18 float64 patterns across all exponents) against libm in long double.
 * It prints figures; it never fails. docs/benchmarks.md has a run. The
 * columns mean what they say in a GCC build for AVX-512 (MUSA_NATIVE on such
 * a CPU); elsewhere the program says what is missing. Two last lines time
 * musa's own float32 exp and erf (src/backend/cpu/vmath.c, what the
 * kernels call on AVX-512) the same way, 16 lanes at a time.
 *
 *     ./build/bench_vmath
 */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* sleef.h declares its AVX2 and AVX-512 functions only where the build
 * enables those instructions (MUSA_NATIVE on such a CPU) */
#if defined(MUSA_HAVE_SLEEF) && defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
#define WITH_SLEEF 1
#include <sleef.h>
#endif

#define N 8192

#define SIMD1(f, T) _Pragma("omp declare simd notinbranch") extern T f(T)
SIMD1(expf, float);
SIMD1(logf, float);
SIMD1(sinf, float);
SIMD1(tanhf, float);
SIMD1(erff, float);
SIMD1(exp, double);
SIMD1(log, double);
SIMD1(sin, double);
SIMD1(tanh, double);
SIMD1(erf, double);

typedef void (*vfn)(void *o, const void *a, int n); /* n: a multiple of 16 */

/* libmvec: simdlen picks the variant (8 or 16 float lanes, 4 or 8 double) */
#define PRAGMA(x) _Pragma(#x)
#define MVEC(F, T, LANES, TAG)                                                                     \
    static void TAG##_##F(void *o, const void *a, int n) {                                         \
        T *y = o;                                                                                  \
        const T *x = a;                                                                            \
        PRAGMA(omp simd simdlen(LANES)) for (int i = 0; i < n; i++) y[i] = F(x[i]);                \
    }
#define MVEC_ALL(F, D)                                                                             \
    MVEC(F, float, 8, mv256f)                                                                      \
    MVEC(D, double, 4, mv256d) MVEC(F, float, 16, mv512f) MVEC(D, double, 8, mv512d)
MVEC_ALL(expf, exp)
MVEC_ALL(logf, log)
MVEC_ALL(sinf, sin)
MVEC_ALL(tanhf, tanh)
MVEC_ALL(erff, erf)

#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
SIMD1(musa_expf, float); /* src/backend/cpu/vmath.c, in musa_static */
SIMD1(musa_erff, float);
MVEC(musa_expf, float, 16, musa512f)
MVEC(musa_erff, float, 16, musa512f)
#define WITH_MUSA_MATH 1
#endif

#ifdef WITH_SLEEF
#define SLEEF(NAME, T, W, LD, ST, SFX)                                                             \
    static void NAME(void *o, const void *a, int n) {                                              \
        for (int i = 0; i < n; i += W) ST((T *)o + i, SFX(LD((const T *)a + i)));                  \
    }
#define SLEEF_ALL(F)                                                                               \
    SLEEF(sl512f_##F, float, 16, _mm512_loadu_ps, _mm512_storeu_ps, Sleef_##F##f16_u10avx512f)     \
    SLEEF(sl512d_##F, double, 8, _mm512_loadu_pd, _mm512_storeu_pd, Sleef_##F##d8_u10avx512f)      \
    SLEEF(sl256f_##F, float, 8, _mm256_loadu_ps, _mm256_storeu_ps, Sleef_##F##f8_u10avx2)          \
    SLEEF(sl256d_##F, double, 4, _mm256_loadu_pd, _mm256_storeu_pd, Sleef_##F##d4_u10avx2)
SLEEF_ALL(exp)
SLEEF_ALL(log)
SLEEF_ALL(sin)
SLEEF_ALL(tanh)
SLEEF_ALL(erf)
#define SL(F, K) sl##K##_##F
#else
#define SL(F, K) NULL
#endif

static const struct {
    const char *name;
    long double (*ref)(long double);
    double lo, hi; /* the timed inputs */
    vfn f[2][4];   /* [float, double][libmvec 256, libmvec 512, SLEEF 512, SLEEF 256] */
} FNS[] = {
#define ROW(F, LO, HI, REF)                                                                        \
    {#F,                                                                                           \
     REF,                                                                                          \
     LO,                                                                                           \
     HI,                                                                                           \
     {{mv256f_##F##f, mv512f_##F##f, SL(F, 512f), SL(F, 256f)},                                    \
      {mv256d_##F, mv512d_##F, SL(F, 512d), SL(F, 256d)}}},
    ROW(exp, -10, 10, expl) ROW(log, 0.01, 100, logl) ROW(sin, -10, 10, sinl)
        ROW(tanh, -5, 5, tanhl) ROW(erf, -4, 4, erfl)
#undef ROW
};
static const char *COLS[4] = {"libmvec 256", "libmvec 512", "SLEEF u10 512", "SLEEF u10 256"};

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double ns_per_elem(vfn f, void *o, const void *a) {
    double best = 1e30;
    for (int r = 0; r < 15; r++) {
        double t = cpu_now();
        for (int k = 0; k < 20; k++) f(o, a, N);
        t = (cpu_now() - t) / 20;
        best = t < best ? t : best;
    }
    return best * 1e9 / N;
}

/* The sweep's inputs as doubles (n a multiple of 16). */
static double *sweep(int dbl, int64_t *n_out) {
    int64_t n = dbl ? (1 << 18) : (int64_t)((1ull << 32) / 4099) / 16 * 16;
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        if (dbl) {
            uint64_t b = ((uint64_t)i << 46) | (((uint64_t)i * 0x9E3779B97F4A7C15ull) >> 18);
            memcpy(&v[i], &b, sizeof b);
        } else {
            uint32_t b = (uint32_t)((uint64_t)i * 4099);
            float f;
            memcpy(&f, &b, sizeof f);
            v[i] = f;
        }
    }
    *n_out = n;
    return v;
}

/* Largest error in ulp of finite results whose exact value is finite and
 * in range (the kernels' test, tests/c/ops/math_accuracy.c, also checks
 * the special values). */
static double max_ulp(vfn f, int dbl, const double *x, const long double *ref, int64_t n) {
    int p = dbl ? DBL_MANT_DIG : FLT_MANT_DIG, emin = dbl ? DBL_MIN_EXP : FLT_MIN_EXP;
    size_t es = dbl ? sizeof(double) : sizeof(float);
    char *in = malloc(es * (size_t)n), *out = malloc(es * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        if (dbl)
            ((double *)in)[i] = x[i];
        else
            ((float *)in)[i] = (float)x[i];
    }
    for (int64_t i = 0; i < n; i += 16) f(out + i * es, in + i * es, 16);
    long double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        long double r = ref[i], y = dbl ? ((double *)out)[i] : ((float *)out)[i];
        double rr = dbl ? (double)r : (double)(float)r;
        if (!isfinite(rr) || !isfinite(y)) continue;
        int e = emin;
        if (r != 0) frexpl(r, &e);
        long double err = fabsl(y - r) / ldexpl(1.0L, (e < emin ? emin : e) - p);
        worst = err > worst ? err : worst;
    }
    free(in), free(out);
    return (double)worst;
}

int main(void) {
    int have512 = __builtin_cpu_supports("avx512f"),
        have256 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    printf("vector math, one thread: ns per element (8192 cached elements) / max ulp "
           "(sweep)%s\n",
           have512 ? "" : "\n(no AVX-512 on this CPU: its columns are skipped)");
#if !defined(__AVX512F__) || defined(__clang__)
    printf("(not a GCC build for AVX-512: the libmvec columns are other variants or none)\n");
#endif
#ifndef WITH_SLEEF
    printf("(no SLEEF columns: they need libsleef-dev and a build for AVX-512)\n");
#endif
    printf("%-14s", "");
    for (int c = 0; c < 4; c++) printf(" %17s", COLS[c]);
    printf("\n");
    static float af[N], of[N];
    static double ad[N], od[N];
    for (int dbl = 0; dbl < 2; dbl++) {
        int64_t n;
        double *x = sweep(dbl, &n);
        long double *ref = malloc(sizeof(long double) * (size_t)n);
        for (size_t k = 0; k < sizeof FNS / sizeof FNS[0]; k++) {
            for (int i = 0; i < N; i++) {
                double v = FNS[k].lo +
                           (FNS[k].hi - FNS[k].lo) * (i * 0.61803398875 - (int)(i * 0.61803398875));
                af[i] = (float)v, ad[i] = v;
            }
            for (int64_t i = 0; i < n; i++)
                ref[i] = FNS[k].ref(dbl ? (long double)x[i] : (long double)(float)x[i]);
            printf("%-6s %-7s", FNS[k].name, dbl ? "float64" : "float32");
            for (int c = 0; c < 4; c++) {
                vfn f = FNS[k].f[dbl][c];
                if (!f || (!have512 && (c == 1 || c == 2)) || (!have256 && c == 3)) {
                    printf(" %17s", "-");
                    continue;
                }
                double t = dbl ? ns_per_elem(f, od, ad) : ns_per_elem(f, of, af);
                printf(" %8.3f / %5.2f ", t, max_ulp(f, dbl, x, ref, n));
            }
            printf("\n");
        }
        free(x), free(ref);
    }
#ifdef WITH_MUSA_MATH
    if (have512) {
        static const struct {
            const char *name;
            vfn f;
            long double (*ref)(long double);
            double lo, hi;
        } OWN[] = {{"exp", musa512f_musa_expf, expl, -10, 10},
                   {"erf", musa512f_musa_erff, erfl, -4, 4}};
        int64_t n;
        double *x = sweep(0, &n);
        long double *ref = malloc(sizeof(long double) * (size_t)n);
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < N; i++)
                af[i] = (float)(OWN[k].lo + (OWN[k].hi - OWN[k].lo) *
                                                (i * 0.61803398875 - (int)(i * 0.61803398875)));
            for (int64_t i = 0; i < n; i++) ref[i] = OWN[k].ref((long double)(float)x[i]);
            printf("%-6s float32 musa's own (vmath.c, 16 lanes): %8.3f / %5.2f\n", OWN[k].name,
                   ns_per_elem(OWN[k].f, of, af), max_ulp(OWN[k].f, 0, x, ref, n));
        }
        free(x), free(ref);
    }
#endif
    return 0;
}
