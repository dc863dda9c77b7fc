/*
 * sample.c - the samplers whose draws per element vary (rejection
 * methods): standard_gamma, poisson and binomial.
 *
 * Element i of a call draws from its own stream: Philox counters (block
 * first + i, sub 0, 1, 2, ...) of the call's reserved range (one block per
 * element), two 53-bit uniforms per counter. So, as for the other random
 * kernels (fill.c), values never depend on how the work is split between
 * threads, and a compiled plan draws fresh values on every run.
 *
 * The methods, all in double:
 * - Gamma(alpha), alpha >= 1: Marsaglia and Tsang (2000), a normal
 *   transformed by d (1 + c z)^3 with a squeeze; alpha < 1 boosts:
 *   Gamma(alpha + 1) U^(1/alpha), in logarithms. Results are at least the
 *   output dtype's smallest normal number, as PyTorch's, so that log
 *   densities stay finite.
 * - Poisson(rate): rate < 10 multiplies uniforms until the product falls
 *   below e^-rate; above, Hormann's transformed rejection with squeeze
 *   (PTRS, 1993).
 * - Binomial(count, prob): on min(prob, 1 - prob), then mirrored; a mean
 *   under 10 inverts the distribution function step by step; above,
 *   Hormann's BTRS (1993).
 * Parameters are checked first (the kernel fails naming the first bad
 * value and its element): alpha > 0, rate >= 0, count a non-negative
 * integer, prob in [0, 1]; NaN fails each. An infinite alpha or rate gives
 * inf.
 */
#include <float.h>
#include <math.h>

#include "elem.h"
#include "kernels.h"
#include "random.h"

/* elements per parallel chunk at least: a draw costs tens to hundreds of ns */
#define SAMPLE_GRAIN 256

typedef struct {
    uint64_t seed, block, sub;
    uint32_t r[4];
    int left; /* uniforms left in r: 2, 1 or 0 */
} stream;

static void stream_init(stream *s, uint64_t seed, uint64_t block) {
    s->seed = seed, s->block = block, s->sub = 0, s->left = 0;
}

/* A uniform in [0, 1) with 53 random bits. */
static double uniform(stream *s) {
    if (!s->left) musa_philox_sub(s->seed, s->block, s->sub++, s->r), s->left = 2;
    int l = (2 - s->left--) * 2;
    return (double)((((uint64_t)s->r[l] << 32) | s->r[l + 1]) >> 11) * (1.0 / 9007199254740992.0);
}

static double normal(stream *s) {
    double u1 = 1.0 - uniform(s), u2 = uniform(s); /* u1 in (0, 1] */
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

typedef struct {
    uint64_t seed, first;
    const musa_kview *a, *b; /* parameters, broadcast to the output */
    const musa_kview *out;
    double tiny; /* the output dtype's smallest normal number */
} sample_ctx;

/* Parameter p's element for output element i (p broadcast to out). */
static double param(const musa_kview *p, const musa_kview *out, int64_t i) {
    int64_t off = 0;
    for (int d = out->ndim - 1, dp = p->ndim - 1; d >= 0; d--, dp--) {
        int64_t k = i % out->shape[d];
        i /= out->shape[d];
        if (dp >= 0 && p->shape[dp] != 1) off += k * p->strides[dp];
    }
    return musa_load_f64(p->data + off * (int64_t)musa_dtype_info[p->dtype].size,
                         (musa_dtype)p->dtype);
}

/* ---- Gamma ---- */

static double gamma_draw(stream *s, double alpha) {
    if (isinf(alpha)) return INFINITY;
    double boost = 0; /* log U / alpha, for alpha < 1 */
    if (alpha < 1) {
        boost = log(1.0 - uniform(s)) / alpha;
        alpha += 1;
    }
    double d = alpha - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double z, v;
        do {
            z = normal(s);
            v = 1 + c * z;
        } while (v <= 0);
        v = v * v * v;
        double u = 1.0 - uniform(s), z2 = z * z;
        if (u < 1 - 0.0331 * z2 * z2 || log(u) < 0.5 * z2 + d * (1 - v + log(v)))
            return boost ? exp(log(d * v) + boost) : d * v;
    }
}

static double gamma_value(const void *ctx, int64_t i) {
    const sample_ctx *c = ctx;
    stream s;
    stream_init(&s, c->seed, c->first + (uint64_t)i);
    double x = gamma_draw(&s, param(c->a, c->out, i));
    return x < c->tiny ? c->tiny : x;
}

/* ---- Poisson ---- */

static double poisson_draw(stream *s, double rate) {
    if (rate == 0 || isinf(rate)) return rate;
    if (rate < 10) {
        double limit = exp(-rate), prod = 1;
        int64_t k = -1;
        do {
            prod *= uniform(s);
            k++;
        } while (prod > limit);
        return (double)k;
    }
    double slam = sqrt(rate), loglam = log(rate);
    double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
    double inv_alpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2);
    for (;;) {
        double u = uniform(s) - 0.5, v = uniform(s), us = 0.5 - fabs(u);
        double k = floor((2 * a / us + b) * u + rate + 0.43);
        if (us >= 0.07 && v <= vr) return k;
        if (k < 0 || (us < 0.013 && v > us)) continue;
        if (log(v) + log(inv_alpha) - log(a / (us * us) + b) <=
            -rate + k * loglam - musa_lgamma_f64(k + 1))
            return k;
    }
}

static double poisson_value(const void *ctx, int64_t i) {
    const sample_ctx *c = ctx;
    stream s;
    stream_init(&s, c->seed, c->first + (uint64_t)i);
    return poisson_draw(&s, param(c->a, c->out, i));
}

/* ---- binomial ---- */

/* Binomial(n, p) for p <= 1/2. */
static double binomial_low(stream *s, double n, double p) {
    double q = 1 - p;
    if (n * p < 10) {
        /* inversion: walk the probabilities P(k) until u falls in one; a u
         * past their rounded sum (or past where they underflow) starts again */
        double p0 = exp(n * log1p(-p)), r = p / q;
        for (;;) {
            double u = uniform(s), pk = p0;
            for (double k = 0; k <= n && pk > 0; k++) {
                if (u < pk) return k;
                u -= pk;
                pk *= (n - k) / (k + 1) * r;
            }
        }
    }
    double spq = sqrt(n * p * q);
    double b = 1.15 + 2.53 * spq, a = -0.0873 + 0.0248 * b + 0.01 * p, c = n * p + 0.5;
    double vr = 0.92 - 4.2 / b, alpha = (2.83 + 5.1 / b) * spq, lpq = log(p / q);
    double m = floor((n + 1) * p), h = musa_lgamma_f64(m + 1) + musa_lgamma_f64(n - m + 1);
    for (;;) {
        double u = uniform(s) - 0.5, v = uniform(s), us = 0.5 - fabs(u);
        double k = floor((2 * a / us + b) * u + c);
        if (k < 0 || k > n) continue;
        if (us >= 0.07 && v <= vr) return k;
        v = log(v * alpha / (a / (us * us) + b));
        if (v <= h - musa_lgamma_f64(k + 1) - musa_lgamma_f64(n - k + 1) + (k - m) * lpq) return k;
    }
}

static double binomial_value(const void *ctx, int64_t i) {
    const sample_ctx *c = ctx;
    stream s;
    stream_init(&s, c->seed, c->first + (uint64_t)i);
    double n = param(c->a, c->out, i), p = param(c->b, c->out, i);
    if (n == 0 || p == 0) return 0;
    if (p == 1) return n;
    return p <= 0.5 ? binomial_low(&s, n, p) : n - binomial_low(&s, n, 1 - p);
}

/* ---- the kernels ---- */

typedef bool (*valid_fn)(double v);
static bool positive(double v) {
    return v > 0; /* false for NaN */
}
static bool non_negative(double v) {
    return v >= 0;
}
static bool count_ok(double v) {
    return v >= 0 && isfinite(v) && v == floor(v);
}
static bool prob_ok(double v) {
    return v >= 0 && v <= 1;
}

/* The first element of p that fails ok: MUSA_ERR_VALUE naming it. */
static int check(const musa_kctx *ctx, const musa_kview *p, valid_fn ok, const char *what) {
    int64_t n = musa_kview_numel(p);
    size_t es = musa_dtype_info[p->dtype].size;
    for (int64_t i = 0; i < n; i++) {
        double v = musa_load_f64(musa_kview_elem(p, i, es), (musa_dtype)p->dtype);
        if (!ok(v))
            return musa_err(MUSA_ERR_VALUE, "[%s] %s, got %g at element %lld", ctx->op_name, what,
                            v, (long long)i);
    }
    return MUSA_OK;
}

static int run(musa_kview *out, const musa_kview *a, const musa_kview *b, musa_value_fn fn) {
    sample_ctx c = {.a = a, .b = b, .out = out};
    c.tiny = out->dtype == MUSA_DTYPE_FLOAT64   ? DBL_MIN
             : out->dtype == MUSA_DTYPE_FLOAT16 ? 6.103515625e-05 /* 2^-14 */
                                                : FLT_MIN;        /* float32, bfloat16 */
    musa_rng_reserve((uint64_t)musa_kview_numel(out), &c.seed, &c.first);
    musa_cpu_generate(out, fn, &c, SAMPLE_GRAIN);
    return MUSA_OK;
}

int cpu_standard_gamma(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                       const void *attrs) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    int rc = check(ctx, &in[0], positive, "alpha must be positive");
    return rc ? rc : run(&out[0], &in[0], NULL, gamma_value);
}

int cpu_poisson(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                const void *attrs) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    int rc = check(ctx, &in[0], non_negative, "rates must be non-negative");
    return rc ? rc : run(&out[0], &in[0], NULL, poisson_value);
}

int cpu_binomial(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                 const void *attrs) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    int rc = check(ctx, &in[0], count_ok, "count must hold non-negative whole numbers");
    if (!rc) rc = check(ctx, &in[1], prob_ok, "prob must lie in [0, 1]");
    return rc ? rc : run(&out[0], &in[0], &in[1], binomial_value);
}
