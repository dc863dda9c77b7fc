/*
 * math_accuracy.c - the transcendental kernels (exp, expm1, log, log1p, sin,
 * cos, tanh, erf, sigmoid) in float32 and float64 against libm's long double
 * functions (x87, a 64-bit significand: 11 bits beyond float64), over the
 * whole number line and its edges:
 *
 * - a sweep: every 8191st float32 bit pattern; 2^19 float64 patterns, one
 *   per 2^45 step of the bit space (every exponent, both signs) with a
 *   scrambled significand;
 * - edges: zeros, denormals, the normal boundary, infinities, NaN, the
 *   largest finite values, where exp overflows and underflows, where tanh
 *   and erf saturate, arguments near 1 and -1 for log and log1p, large
 *   arguments for sin and cos.
 *
 * Finite inputs must land within MAX_ULP units in the last place of the
 * exact result (an infinity counts as the next power of two past the
 * largest finite value, so an overflow one ulp early is one ulp off); zeros,
 * infinities and NaN must give exactly C99 Annex F's answer, zero signs
 * included. MAX_ULP is libmvec's documented bound (docs/design.md,
 * "Numerics", lists what each function measures here). Every value also
 * goes through a strided view (the kernels' padded tail path) and must match
 * the contiguous result bit for bit. With MUSA_PRINT_ULP set in the
 * environment each function prints its largest error (the figures in the
 * docs come from there).
 */
#include <float.h>
#include <stdint.h>

#include "../util.h"

#define MAX_ULP 4.0L

typedef struct {
    const char *name;
    musa_tensor *(*fn)(musa_tensor *);
    long double (*ref)(long double);
} mcase;

static long double sigmoidl(long double x) {
    return 1.0L / (1.0L + expl(-x));
}

static const mcase CASES[] = {
    {"exp", musa_exp, expl},
    {"expm1", musa_expm1, expm1l},
    {"log", musa_log, logl},
    {"log1p", musa_log1p, log1pl},
    {"sin", musa_sin, sinl},
    {"cos", musa_cos, cosl},
    {"tanh", musa_tanh, tanhl},
    {"erf", musa_erf, erfl},
    {"sigmoid", musa_sigmoid, sigmoidl},
};

/* Edge inputs, as doubles (those beyond float32's range become infinities
 * there, which the special-value rule then checks). */
static const double EDGES[] = {
    0.0, -0.0, 0x1p-149, -0x1p-149, 0x1p-1074, -0x1p-1074, 0x1.fffffcp-127, FLT_MIN, -FLT_MIN,
    DBL_MIN, -DBL_MIN, 0x1p-30, -0x1p-30, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, INFINITY, -INFINITY, NAN,
    -NAN, FLT_MAX, -FLT_MAX, DBL_MAX, -DBL_MAX,
    /* exp: float32 overflow (ln FLT_MAX = 88.7228...), the normal and
     * denormal underflow edges, float64's */
    88.72283, 88.72284, 89.0, -87.33655, -103.27893, -103.97208, -104.0, -150.0, 709.782712893384,
    709.79, -708.3964185322641, -744.44007, -745.1332191019412, -746.0, 1e4, -1e4,
    /* tanh and erf saturate; sigmoid's tails */
    7.9, -7.9, 9.01, -9.02, 19.06, -19.06, 3.92, -3.92, 5.9, -5.9, 27.3, -27.3, 40.0, -40.0,
    /* log and log1p near their zeros and poles */
    1.0 + 0x1p-23, 1.0 - 0x1p-24, 1.0 + 0x1p-52, 1.0 - 0x1p-53, -1.0 + 0x1p-24, -1.0 + 0x1p-53,
    -0.999999, -1.5,
    /* sin and cos: near multiples of pi/2, and large */
    1.5707963, 3.1415927, 6.2831855, 1.5707963267948966, 3.141592653589793, 1e6, -1e6, 1e22, 1e38,
    1e300};

/* The float64 values of the inputs for one dtype: the sweep, then EDGES. */
static double *inputs(musa_dtype dt, int64_t *n_out) {
    int64_t nsweep = dt == MUSA_DTYPE_FLOAT32 ? (int64_t)((1ull << 32) / 8191 + 1) : (1 << 19);
    int64_t nedge = (int64_t)(sizeof EDGES / sizeof EDGES[0]), n = nsweep + nedge;
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < nsweep; i++) {
        if (dt == MUSA_DTYPE_FLOAT32) {
            uint32_t b = (uint32_t)((uint64_t)i * 8191);
            float f;
            memcpy(&f, &b, sizeof f);
            v[i] = f;
        } else {
            uint64_t b = ((uint64_t)i << 45) | (((uint64_t)i * 0x9E3779B97F4A7C15ull) >> 19);
            memcpy(&v[i], &b, sizeof b);
        }
    }
    for (int64_t i = 0; i < nedge; i++)
        v[nsweep + i] = dt == MUSA_DTYPE_FLOAT32 ? (double)(float)EDGES[i] : EDGES[i];
    *n_out = n;
    return v;
}

/* y's error against the exact r in units of the last place of a format with
 * p significand bits and normal exponents (frexp's) from emin to emax;
 * +-inf, and anything beyond it, stands for +-2^emax. */
static long double ulp_error(long double r, double y, int p, int emin, int emax) {
    long double big = ldexpl(1.0L, emax);
    long double R = fabsl(r) > big ? copysignl(big, r) : r, Y = isinf(y) ? copysignl(big, y) : y;
    int e = emin;
    if (R != 0) frexpl(R, &e);
    if (e < emin) e = emin;
    if (e > emax) e = emax;
    return fabsl(Y - R) / ldexpl(1.0L, e - p);
}

static bool same_special(double y, double want) {
    if (isnan(want)) return isnan(y);
    return y == want && signbit(y) == signbit(want);
}

static void check_case(const mcase *c, musa_dtype dt) {
    bool f32 = dt == MUSA_DTYPE_FLOAT32;
    int p = f32 ? FLT_MANT_DIG : DBL_MANT_DIG, emin = f32 ? FLT_MIN_EXP : DBL_MIN_EXP,
        emax = f32 ? FLT_MAX_EXP : DBL_MAX_EXP;
    int64_t n;
    double *xv = inputs(dt, &n);
    /* the same values contiguous, and at every other element of a wider tensor */
    double *wide = calloc((size_t)(2 * n), sizeof(double));
    for (int64_t i = 0; i < n; i++) wide[2 * i] = xv[i];
    musa_tensor *x = from_list(dt, 1, (int64_t[]){n}, xv);
    musa_tensor *w = from_list(dt, 1, (int64_t[]){2 * n}, wide);
    musa_tensor *xs = musa_slice(w, 0, 0, 2 * n, 2);
    musa_tensor *y = c->fn(x), *ys = c->fn(xs);
    double *yv = values(y), *ysv = values(ys);
    long double worst = 0;
    double worst_x = 0;
    const char *bad = NULL;
    double bad_x = 0, bad_y = 0, bad_want = 0;
    for (int64_t i = 0; i < n && yv && ysv && !bad; i++) {
        double xi = f32 ? (double)(float)xv[i] : xv[i];
        long double r = c->ref((long double)xi);
        double want = f32 ? (double)(float)r : (double)r;
        if (memcmp(&yv[i], &ysv[i], sizeof(double)) != 0 && !(isnan(yv[i]) && isnan(ysv[i])))
            bad = "the strided view differs from the contiguous tensor";
        else if (xi == 0 || isinf(xi) || isnan(xi) || isinf(r) || isnan(r))
            bad = same_special(yv[i], want) ? NULL : "a special value is wrong";
        else if (isnan(yv[i]))
            bad = "NaN for a number";
        if (bad) {
            bad_x = xi, bad_y = yv[i], bad_want = want;
        } else if (!isinf(want) || yv[i] != want) {
            long double e = ulp_error(r, yv[i], p, emin, emax);
            if (e > worst) worst = e, worst_x = xi;
        }
    }
    CHECK_MSG(yv && ysv, "%s(%s): %s", c->name, musa_dtype_name(dt), musa_last_error());
    CHECK_MSG(!bad, "%s(%s) at %a: %s (got %a, expected %a)", c->name, musa_dtype_name(dt), bad_x,
              bad, bad_y, bad_want);
    if (getenv("MUSA_PRINT_ULP"))
        fprintf(stderr, "%s %s %.3Lf ulp at %a\n", c->name, musa_dtype_name(dt), worst, worst_x);
    CHECK_MSG(worst <= MAX_ULP, "%s(%s): %.2Lf ulp at %a (more than %.0Lf)", c->name,
              musa_dtype_name(dt), worst, worst_x, MAX_ULP);
    free(xv), free(wide), free(yv), free(ysv);
    release_all(5, x, w, xs, y, ys);
}

TEST(math_accuracy_float32) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0] && !harness_failed(); i++)
        check_case(&CASES[i], MUSA_DTYPE_FLOAT32);
}

TEST(math_accuracy_float64) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0] && !harness_failed(); i++)
        check_case(&CASES[i], MUSA_DTYPE_FLOAT64);
}

#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#include <immintrin.h>

/* musa's float32 exp and erf (src/backend/cpu/vmath.c), which the kernels
 * call on such builds: each one's scalar function and its 4-, 8- and
 * 16-lane vector variants (what GCC calls from loops of different widths)
 * must give the same bits for every input, NaN aside (a NaN for a NaN), or
 * an element's result would depend on the loop that computed it. Every
 * 257th bit pattern, both signs, and the edges. */
#define OWN_VARIANTS(F)                                                                            \
    float musa_##F(float);                                                                         \
    __m128 _ZGVbN4v_musa_##F(__m128);                                                              \
    __m256 _ZGVdN8v_musa_##F(__m256);                                                              \
    __m512 _ZGVeN16v_musa_##F(__m512);
OWN_VARIANTS(expf)
OWN_VARIANTS(erff)

typedef struct {
    const char *name;
    float (*s)(float);
    __m128 (*b4)(__m128);
    __m256 (*d8)(__m256);
    __m512 (*e16)(__m512);
} own_fn;

static void check_variants(const own_fn *f) {
    enum { L = 16 };
    int64_t nsweep = (int64_t)((1ull << 32) / 257) / L * L;
    int64_t nedge = (int64_t)(sizeof EDGES / sizeof EDGES[0]), n = nsweep + (nedge + L - 1) / L * L;
    int64_t differ = 0;
    float first_x = 0, xs[L], s[L], v16[L], v8[L], v4[L];
    for (int64_t i0 = 0; i0 < n; i0 += L) {
        for (int l = 0; l < L; l++) {
            int64_t i = i0 + l;
            if (i < nsweep) {
                uint32_t b = (uint32_t)((uint64_t)i * 257);
                memcpy(&xs[l], &b, sizeof b);
            } else {
                xs[l] = i - nsweep < nedge ? (float)EDGES[i - nsweep] : 0.0f;
            }
            s[l] = f->s(xs[l]);
        }
        _mm512_storeu_ps(v16, f->e16(_mm512_loadu_ps(xs)));
        for (int h = 0; h < L; h += 8) _mm256_storeu_ps(v8 + h, f->d8(_mm256_loadu_ps(xs + h)));
        for (int q = 0; q < L; q += 4) _mm_storeu_ps(v4 + q, f->b4(_mm_loadu_ps(xs + q)));
        for (int l = 0; l < L; l++) {
            bool same = isnan(xs[l]) ? isnan(s[l]) && isnan(v16[l]) && isnan(v8[l]) && isnan(v4[l])
                                     : !memcmp(&s[l], &v16[l], 4) && !memcmp(&s[l], &v8[l], 4) &&
                                           !memcmp(&s[l], &v4[l], 4);
            if (!same && !differ++) first_x = xs[l];
        }
    }
    CHECK_MSG(differ == 0, "musa_%s: %lld inputs where the variants differ, the first %a", f->name,
              (long long)differ, first_x);
}

TEST(musa_expf_and_erff_scalar_and_vector_variants_agree) {
    const own_fn fns[] = {
        {"expf", musa_expf, _ZGVbN4v_musa_expf, _ZGVdN8v_musa_expf, _ZGVeN16v_musa_expf},
        {"erff", musa_erff, _ZGVbN4v_musa_erff, _ZGVdN8v_musa_erff, _ZGVeN16v_musa_erff},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) check_variants(&fns[i]);
}
#endif
