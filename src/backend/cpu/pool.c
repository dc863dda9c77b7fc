/*
 * pool.c - 2-d pooling: max (with the flat spatial index of each maximum,
 * as PyTorch returns it), average (with PyTorch's divisor rules), adaptive
 * average, and the backward ops of the average poolings. Inputs are
 * (N, C, H, W) or (C, H, W), contiguous; planes run in parallel.
 */
#include "nnutil.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

typedef struct {
    int64_t planes, H, W, Ho, Wo;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    bool ceil_mode, count_include_pad;
    bool adaptive; /* adaptive average pooling: windows from the sizes alone */
} pool_geom;

static void pgeom(pool_geom *g, const int64_t *in_shape, int in_nd, const int64_t *out_shape,
                  const musa_attrs_pool *a) {
    g->H = in_shape[in_nd - 2], g->W = in_shape[in_nd - 1];
    g->Ho = out_shape[in_nd - 2], g->Wo = out_shape[in_nd - 1];
    g->planes = 1;
    for (int d = 0; d < in_nd - 2; d++) g->planes *= in_shape[d];
    g->kh = a->kernel.v[0], g->kw = a->kernel.v[1];
    g->sh = a->stride.v[0], g->sw = a->stride.v[1];
    g->ph = a->padding.v[0], g->pw = a->padding.v[1];
    g->dh = a->dilation.n ? a->dilation.v[0] : 1, g->dw = a->dilation.n ? a->dilation.v[1] : 1;
    g->ceil_mode = a->ceil_mode;
    g->count_include_pad = a->count_include_pad;
}

typedef struct {
    const pool_geom *g;
    const char *x;
    char *y;
    int64_t *idx;
} pool_job;

/* ---- max ---- */

#define DEF_MAXPOOL(SUF, T)                                                                        \
    static void maxpool_##SUF(void *arg, int64_t p0, int64_t p1) {                                 \
        const pool_job *j = arg;                                                                   \
        const pool_geom *g = j->g;                                                                 \
        for (int64_t p = p0; p < p1; p++) {                                                        \
            const T *x = (const T *)j->x + p * g->H * g->W;                                        \
            T *y = (T *)j->y + p * g->Ho * g->Wo;                                                  \
            int64_t *ix = j->idx + p * g->Ho * g->Wo;                                              \
            for (int64_t oy = 0; oy < g->Ho; oy++)                                                 \
                for (int64_t ox = 0; ox < g->Wo; ox++) {                                           \
                    T best = 0;                                                                    \
                    int64_t bi = -1;                                                               \
                    for (int64_t ky = 0; ky < g->kh; ky++) {                                       \
                        int64_t iy = oy * g->sh - g->ph + ky * g->dh;                              \
                        if (iy < 0 || iy >= g->H) continue;                                        \
                        for (int64_t kx = 0; kx < g->kw; kx++) {                                   \
                            int64_t jx = ox * g->sw - g->pw + kx * g->dw;                          \
                            if (jx < 0 || jx >= g->W) continue;                                    \
                            T v = x[iy * g->W + jx];                                               \
                            if (bi < 0 || v > best || (v != v && best == best)) {                  \
                                best = v;                                                          \
                                bi = iy * g->W + jx;                                               \
                            }                                                                      \
                        }                                                                          \
                    }                                                                              \
                    /* a window of padding only: max's identity, as PyTorch */                     \
                    y[oy * g->Wo + ox] = bi < 0 ? (T)-INFINITY : best;                             \
                    ix[oy * g->Wo + ox] = bi;                                                      \
                }                                                                                  \
        }                                                                                          \
    }
DEF_MAXPOOL(f32, float)
DEF_MAXPOOL(f64, double)

/* Planes per chunk: about 32K window reads each. The product saturates
 * (an adaptive window over a huge input times the output plane overflowed
 * int64: found by fuzz_op_call, UBSan). */
static int64_t plane_grain(const pool_geom *g) {
    int64_t work = 1;
    const int64_t f[4] = {g->Ho, g->Wo, g->kh, g->kw};
    for (int i = 0; i < 4 && work; i++)
        if (!musa_mul_i64(work, f[i], &work)) return 1;
    return work >= 32768 ? 1 : 32768 / (work + 1);
}

int cpu_max_pool2d(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                   const void *attrs) {
    MUSA_UNUSED(n_in);
    pool_geom g;
    pgeom(&g, in[0].shape, in[0].ndim, out[0].shape, attrs);
    char *ws = ctx->scratch;
    nn_out y = nn_out_begin(&out[0], &ws);
    pool_job j = {&g, in[0].data, y.data, (int64_t *)out[1].data};
    musa_parallel_for(g.planes, plane_grain(&g),
                      in[0].dtype == MUSA_DTYPE_FLOAT64 ? maxpool_f64 : maxpool_f32, &j);
    nn_out_end(&y);
    return MUSA_OK;
}

/* ---- average: PyTorch's window and divisor rules; adaptive windows are
 * [floor(o H / Ho), ceil((o + 1) H / Ho)) ---- */

/* Adaptive window o of n outputs over an input dim of size in:
 * [floor(o in / n), ceil((o + 1) in / n)). The products overflow int64
 * for an empty input of a huge dim (found by fuzz_op_call, UBSan): those
 * take 128-bit arithmetic, the rest int64 division (128-bit divisions of
 * every bound were about a tenth of the time of pooling 16384 rows of 100
 * to 7 outputs). */
static inline void adaptive_bounds(int64_t o, int64_t in, int64_t n, int64_t *b0, int64_t *b1) {
    int64_t hi;
    if (!__builtin_mul_overflow(o + 1, in, &hi) && !__builtin_add_overflow(hi, n - 1, &hi)) {
        *b0 = o * in / n, *b1 = hi / n;
        return;
    }
    typedef __int128 wide;
    *b0 = (int64_t)((wide)o * in / n);
    *b1 = (int64_t)(((wide)(o + 1) * in + n - 1) / n);
}

static inline void avg_window(const pool_geom *g, int64_t oy, int64_t ox, int64_t *h0, int64_t *h1,
                              int64_t *w0, int64_t *w1, double *div) {
    if (g->adaptive) {
        adaptive_bounds(oy, g->H, g->Ho, h0, h1);
        adaptive_bounds(ox, g->W, g->Wo, w0, w1);
        *div = (double)(*h1 - *h0) * (double)(*w1 - *w0);
        return;
    }
    int64_t hs = oy * g->sh - g->ph, ws = ox * g->sw - g->pw;
    int64_t he = hs + g->kh < g->H + g->ph ? hs + g->kh : g->H + g->ph;
    int64_t we = ws + g->kw < g->W + g->pw ? ws + g->kw : g->W + g->pw;
    int64_t pool_size = (he - hs) * (we - ws);
    hs = hs < 0 ? 0 : hs, ws = ws < 0 ? 0 : ws;
    he = he > g->H ? g->H : he, we = we > g->W ? g->W : we;
    *h0 = hs, *h1 = he, *w0 = ws, *w1 = we;
    *div = (double)(g->count_include_pad ? pool_size : (he - hs) * (we - ws));
}

#ifdef __AVX512F__
/* A window whose runs are shorter than NN_LANES, in two registers holding
 * partials 0-7 and 8-15: the same additions as the loop below (a run's
 * element k into partial k, runs in order, zeros past the run's end) and
 * nn_lanes_fold's tree, so the same bits. The loop's scalar stores to the
 * partials stalled the fold's vector loads (store forwarding): 11 ns a
 * window, pooling a (16384, 100) input to 7 outputs at 2.3x PyTorch's time. */
static inline double short_fold(__m512d lo, __m512d hi) {
    __m512d a = _mm512_add_pd(lo, hi);                                                  /* +8 */
    __m256d b = _mm256_add_pd(_mm512_castpd512_pd256(a), _mm512_extractf64x4_pd(a, 1)); /* +4 */
    __m128d c = _mm_add_pd(_mm256_castpd256_pd128(b), _mm256_extractf128_pd(b, 1));     /* +2 */
    return _mm_cvtsd_f64(c) + _mm_cvtsd_f64(_mm_unpackhi_pd(c, c));
}
static inline void short_add_f32(__m512d *lo, __m512d *hi, const float *r, __mmask16 m) {
    __m512 v = _mm512_maskz_loadu_ps(m, r);
    *lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    *hi = _mm512_add_pd(
        *hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}
static inline void short_add_f64(__m512d *lo, __m512d *hi, const double *r, __mmask16 m) {
    *lo = _mm512_add_pd(*lo, _mm512_maskz_loadu_pd((__mmask8)m, r));
    *hi = _mm512_add_pd(*hi, _mm512_maskz_loadu_pd((__mmask8)(m >> 8), r + 8));
}
#define SHORT_WINDOW(SUF)                                                                          \
    do {                                                                                           \
        bool whole_ = w0 == 0 && w1 == W;                                                          \
        int64_t run_ = whole_ ? (h1 - h0) * W : w1 - w0;                                           \
        if (run_ < NN_LANES) {                                                                     \
            __mmask16 m_ = (__mmask16)((1u << run_) - 1);                                          \
            __m512d lo_ = _mm512_setzero_pd(), hi_ = _mm512_setzero_pd();                          \
            for (int64_t iy = h0; iy < (whole_ ? h0 + 1 : h1); iy++)                               \
                short_add_##SUF(&lo_, &hi_, x + iy * W + w0, m_);                                  \
            return short_fold(lo_, hi_);                                                           \
        }                                                                                          \
    } while (0)
#else
#define SHORT_WINDOW(SUF) ((void)0)
#endif

/* The sum of a window: 16 interleaved float64 partials (nnutil.h) folded by
 * a tree, a window of whole rows as one contiguous run (a global pool of a
 * 4x4 plane is one run of 16), otherwise row by row, column i of a row
 * adding into partial i % 16: vector loads, and no chain of dependent adds
 * the length of the window. */
#define DEF_WINDOW_SUM(SUF, T)                                                                     \
    static inline double window_sum_##SUF(const T *x, int64_t W, int64_t h0, int64_t h1,           \
                                          int64_t w0, int64_t w1) {                                \
        SHORT_WINDOW(SUF);                                                                         \
        double a[NN_LANES] = {0};                                                                  \
        if (w0 == 0 && w1 == W) {                                                                  \
            const T *r = x + h0 * W;                                                               \
            NN_LANES_FOR((h1 - h0) * W, a[k_] += r[i]);                                            \
        } else {                                                                                   \
            for (int64_t iy = h0; iy < h1; iy++) {                                                 \
                const T *r = x + iy * W + w0;                                                      \
                NN_LANES_FOR(w1 - w0, a[k_] += r[i]);                                              \
            }                                                                                      \
        }                                                                                          \
        return nn_lanes_fold(a);                                                                   \
    }
DEF_WINDOW_SUM(f32, float)
DEF_WINDOW_SUM(f64, double)

/* A pool to one output per plane computes its window once per chunk of
 * planes; a global one (that window the whole plane) writes each plane's
 * gradient in one pass. */
#define DEF_AVGPOOL(SUF, T)                                                                        \
    static void avgpool_##SUF(void *arg, int64_t p0, int64_t p1) {                                 \
        const pool_job *j = arg;                                                                   \
        const pool_geom *g = j->g;                                                                 \
        bool one = g->Ho == 1 && g->Wo == 1;                                                       \
        int64_t h0 = 0, h1 = 0, w0 = 0, w1 = 0;                                                    \
        double div = 0;                                                                            \
        if (one) avg_window(g, 0, 0, &h0, &h1, &w0, &w1, &div);                                    \
        for (int64_t p = p0; p < p1; p++) {                                                        \
            const T *x = (const T *)j->x + p * g->H * g->W;                                        \
            T *y = (T *)j->y + p * g->Ho * g->Wo;                                                  \
            for (int64_t oy = 0; oy < g->Ho; oy++)                                                 \
                for (int64_t ox = 0; ox < g->Wo; ox++) {                                           \
                    if (!one) avg_window(g, oy, ox, &h0, &h1, &w0, &w1, &div);                     \
                    double s = h0 < h1 && w0 < w1 ? window_sum_##SUF(x, g->W, h0, h1, w0, w1) : 0; \
                    y[oy * g->Wo + ox] = (T)(div > 0 ? s / div : 0);                               \
                }                                                                                  \
        }                                                                                          \
    }                                                                                              \
    static void avgpool_bwd_##SUF(void *arg, int64_t p0, int64_t p1) {                             \
        const pool_job *j = arg;                                                                   \
        const pool_geom *g = j->g;                                                                 \
        int64_t hw = g->H * g->W, h0 = 0, h1 = 0, w0 = 0, w1 = 0;                                  \
        double div = 0;                                                                            \
        bool global = false;                                                                       \
        if (g->Ho == 1 && g->Wo == 1) {                                                            \
            avg_window(g, 0, 0, &h0, &h1, &w0, &w1, &div);                                         \
            global = h0 == 0 && h1 == g->H && w0 == 0 && w1 == g->W;                               \
        }                                                                                          \
        for (int64_t p = p0; p < p1; p++) {                                                        \
            const T *gy = (const T *)j->x + p * g->Ho * g->Wo;                                     \
            T *gx = (T *)j->y + p * hw;                                                            \
            if (global) {                                                                          \
                T v = div > 0 ? (T)(gy[0] / div) : (T)0;                                           \
                for (int64_t i = 0; i < hw; i++) gx[i] = v;                                        \
                continue;                                                                          \
            }                                                                                      \
            memset(gx, 0, sizeof(T) * (size_t)hw);                                                 \
            for (int64_t oy = 0; oy < g->Ho; oy++)                                                 \
                for (int64_t ox = 0; ox < g->Wo; ox++) {                                           \
                    avg_window(g, oy, ox, &h0, &h1, &w0, &w1, &div);                               \
                    T v = div > 0 ? (T)(gy[oy * g->Wo + ox] / div) : (T)0;                         \
                    for (int64_t iy = h0; iy < h1 && w0 < w1; iy++)                                \
                        for (int64_t jx = w0; jx < w1; jx++) gx[iy * g->W + jx] += v;              \
                }                                                                                  \
        }                                                                                          \
    }
DEF_AVGPOOL(f32, float)
DEF_AVGPOOL(f64, double)

/* Forward (x -> y) or backward (gy -> gx) of average or adaptive average
 * pooling; the input side of the geometry is x's. */
static int avg_run(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, const void *attrs,
                   bool backward, bool adaptive) {
    pool_geom g;
    const musa_kview *x = backward ? &out[0] : &in[0], *y = backward ? &in[0] : &out[0];
    pgeom(&g, x->shape, x->ndim, y->shape, attrs);
    g.adaptive = adaptive;
    if (adaptive)
        g.kh = g.H / (g.Ho ? g.Ho : 1) + 1, g.kw = g.W / (g.Wo ? g.Wo : 1) + 1; /* for the grain */
    char *ws = ctx->scratch;
    nn_out o = nn_out_begin(&out[0], &ws);
    pool_job j = {&g, in[0].data, o.data, NULL};
    bool f64 = in[0].dtype == MUSA_DTYPE_FLOAT64;
    musa_range_fn fn =
        backward ? (f64 ? avgpool_bwd_f64 : avgpool_bwd_f32) : (f64 ? avgpool_f64 : avgpool_f32);
    musa_parallel_for(g.planes, plane_grain(&g), fn, &j);
    nn_out_end(&o);
    return MUSA_OK;
}

int cpu_avg_pool2d(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                   const void *attrs) {
    MUSA_UNUSED(n_in);
    return avg_run(ctx, out, in, attrs, false, false);
}
int cpu_avg_pool2d_backward(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                            const void *attrs) {
    MUSA_UNUSED(n_in);
    return avg_run(ctx, out, in, attrs, true, false);
}
int cpu_adaptive_avg_pool2d(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                            const void *attrs) {
    MUSA_UNUSED(n_in);
    return avg_run(ctx, out, in, attrs, false, true);
}
int cpu_adaptive_avg_pool2d_backward(const musa_kctx *ctx, musa_kview *out, const musa_kview *in,
                                     int n_in, const void *attrs) {
    MUSA_UNUSED(n_in);
    return avg_run(ctx, out, in, attrs, true, true);
}
