/*
 * softmax.c - softmax and log-softmax along any dim (numerically stable:
 * the row max is subtracted), their fused backward ops, and fused
 * cross-entropy over class indices (ignore_index, label smoothing,
 * none/mean/sum reduction) with its backward.
 *
 * A contiguous input is seen as (outer, D, inner) around the dim. With
 * inner = 1 each row is contiguous and exp vectorises through libmvec;
 * otherwise blocks of up to 256 inner columns are processed together, each
 * vector load walking the block. Sums accumulate in float64 (in SIMD lanes
 * for contiguous rows).
 */
#include <math.h>
#include <stdatomic.h>

#include "nnutil.h"
#include "vmath.h"

typedef struct {
    int64_t outer, D, inner;
    const char *x, *g;
    char *y;
    bool log;
} sm_job;

static void split_dim(const musa_kview *v, int64_t dim, int64_t *outer, int64_t *D,
                      int64_t *inner) {
    *outer = 1, *inner = 1, *D = v->ndim ? v->shape[dim] : 1;
    for (int d = 0; d < dim; d++) *outer *= v->shape[d];
    for (int d = (int)dim + 1; d < v->ndim; d++) *inner *= v->shape[d];
}

#define BLK 256

/* Row maximum (NaN need not win here: a NaN reaches every output through
 * exp and the sum anyway). An all -inf row gives 0, which keeps exp finite
 * (the outputs are then NaN for softmax, as in PyTorch). *masked: some
 * x - max is below MUSA_EXP_ZERO (-inf included), so the row's exps go
 * through musa_exp_masked (vmath.h). */
#define DEF_ROW_MAX(SUF, SFX, T)                                                                   \
    static inline T row_max_##SUF(const T *x, int64_t n, bool *masked) {                           \
        T m = -INFINITY, lo = INFINITY;                                                            \
        _Pragma("omp simd reduction(max : m) reduction(min : lo)") for (int64_t i = 0; i < n;      \
                                                                        i++) {                     \
            m = x[i] > m ? x[i] : m;                                                               \
            lo = x[i] < lo ? x[i] : lo;                                                            \
        }                                                                                          \
        m = m == -INFINITY ? 0 : m;                                                                \
        *masked = lo - m < MUSA_EXP_ZERO_##SFX;                                                    \
        return m;                                                                                  \
    }
DEF_ROW_MAX(f32, f, float)
DEF_ROW_MAX(f64, d, double)

/* The float64 sum of a contiguous row, and of its products with another,
 * in interleaved partials folded by a tree (nnutil.h): a softmax row of 64
 * spent more time in a per-row horizontal reduction (sixteen dependent
 * adds) than in its exps. */
#define DEF_ROW_SUM(SUF, T)                                                                        \
    static inline double row_sum_##SUF(const T *e, int64_t n) {                                    \
        double a[NN_LANES] = {0};                                                                  \
        NN_LANES_FOR(n, a[k_] += e[i]);                                                            \
        return nn_lanes_fold(a);                                                                   \
    }
#define DEF_ROW_DOT(SUF, T)                                                                        \
    static inline double row_dot_##SUF(const T *g, const T *y, int64_t n) {                        \
        double a[NN_LANES] = {0};                                                                  \
        NN_LANES_FOR(n, a[k_] += (double)g[i] * y[i]);                                             \
        return nn_lanes_fold(a);                                                                   \
    }
#ifdef __AVX512F__
#include <immintrin.h>
/* The same partials in two registers (lanes 0-7 and 8-15), the same tail
 * and tree: the generic loop's bits */
static inline double row_sum_f32(const float *e, int64_t n) {
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + NN_LANES <= n; i += NN_LANES) {
        __m512 v = _mm512_loadu_ps(e + i);
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        hi = _mm512_add_pd(
            hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
    }
    double a[NN_LANES];
    _mm512_storeu_pd(a, lo), _mm512_storeu_pd(a + 8, hi);
    for (int k = 0; i + k < n; k++) a[k] += e[i + k];
    return nn_lanes_fold(a);
}
#else
DEF_ROW_SUM(f32, float)
#endif
DEF_ROW_SUM(f64, double)
DEF_ROW_DOT(f32, float)
DEF_ROW_DOT(f64, double)

/* The float64 sum of exp(x[d] - m) over a contiguous row, each value also
 * stored to y[d] when y is given (y may be x). The exps go a block at a
 * time (into y, or a buffer), each block then summed while in L1; a row
 * with masked elements takes musa_exp_masked. */
#define DEF_EXP_SUM(SUF, T, EXP, EXPM)                                                             \
    /* e[i] = exp(x[i] - m) for a row shorter than a vector (n < L, e.g. 10                        \
     * classes): one vector call over the row padded with -inf (exp 0), not                        \
     * n scalar ones (the loops below never reach their vector body) */                            \
    static inline void exp_short_##SUF(T *e, const T *x, int64_t n, T m) {                         \
        enum { L = MUSA_SIMD_LANES_##T };                                                          \
        T t[L];                                                                                    \
        for (int i = 0; i < L; i++) t[i] = i < n ? x[i] - m : (T)-INFINITY;                        \
        MUSA_SIMD_MATH(T) for (int i = 0; i < L; i++) e[i] = EXPM(t[i]);                           \
    }                                                                                              \
    static inline double exp_sum_##SUF(T *y, const T *x, int64_t n, T m, bool masked) {            \
        double s = 0;                                                                              \
        if (n < MUSA_SIMD_LANES_##T) {                                                             \
            T e[MUSA_SIMD_LANES_##T];                                                              \
            exp_short_##SUF(e, x, n, m);                                                           \
            for (int64_t d = 0; d < n; d++) s += e[d];                                             \
            for (int64_t d = 0; y && d < n; d++) y[d] = e[d];                                      \
            return s;                                                                              \
        }                                                                                          \
        T buf[BLK];                                                                                \
        for (int64_t d0 = 0; d0 < n; d0 += BLK) {                                                  \
            int64_t k = n - d0 < BLK ? n - d0 : BLK;                                               \
            T *e = y ? y + d0 : buf;                                                               \
            const T *xs = x + d0;                                                                  \
            if (masked) {                                                                          \
                MUSA_SIMD_MATH(T) for (int64_t i = 0; i < k; i++) e[i] = EXPM(xs[i] - m);          \
            } else {                                                                               \
                MUSA_SIMD_MATH(T) for (int64_t i = 0; i < k; i++) e[i] = EXP(xs[i] - m);           \
            }                                                                                      \
            s += row_sum_##SUF(e, k);                                                              \
        }                                                                                          \
        return s;                                                                                  \
    }
DEF_EXP_SUM(f32, float, MUSA_EXPF, musa_exp_masked_f)
DEF_EXP_SUM(f64, double, exp, musa_exp_masked_d)

/* Rows shorter than a vector (D < MUSA_SIMD_LANES), R contiguous ones at a
 * time (R D <= BLK): m[r] each row's max (0 for a row of -inf, as
 * row_max), e (R x D, may be x) the exps of x - m[r] in one vector loop,
 * s[r] each row's float64 sum (exact for so few terms, in any order).
 * Row by row, the vector helpers' padded buffers and partial sums cost a
 * stalled load per row: softmax over (64, 10) took 4.0 us. */
#define DEF_SHORT_ROWS(SUF, T, EXPM)                                                               \
    static inline void short_rows_##SUF(T *e, const T *x, int64_t R, int64_t D, T *m, double *s) { \
        for (int64_t r = 0; r < R; r++) {                                                          \
            T v = -INFINITY;                                                                       \
            for (int64_t d = 0; d < D; d++) v = x[r * D + d] > v ? x[r * D + d] : v;               \
            m[r] = v == -INFINITY ? 0 : v;                                                         \
        }                                                                                          \
        for (int64_t r = 0; r < R; r++)                                                            \
            for (int64_t d = 0; d < D; d++) e[r * D + d] = x[r * D + d] - m[r];                    \
        MUSA_SIMD_APPLY(T, e, R *D, EXPM); /* whole vectors: bits independent of R */              \
        for (int64_t r = 0; r < R; r++) {                                                          \
            double a = 0;                                                                          \
            for (int64_t d = 0; d < D; d++) a += e[r * D + d];                                     \
            s[r] = a;                                                                              \
        }                                                                                          \
    }
DEF_SHORT_ROWS(f32, float, musa_exp_masked_f)
DEF_SHORT_ROWS(f64, double, musa_exp_masked_d)

/* Forward over work items: (outer row) x (inner block). */
#define DEF_SOFTMAX(SUF, SFX, T, EXP, EXPM, LOG)                                                   \
    static void sm_fwd_##SUF(void *arg, int64_t w0, int64_t w1) {                                  \
        const sm_job *j = arg;                                                                     \
        int64_t nb = (j->inner + BLK - 1) / BLK;                                                   \
        T mx[BLK];                                                                                 \
        double sum[BLK];                                                                           \
        if (j->inner == 1 && j->D > 0 && j->D < MUSA_SIMD_LANES_##T) { /* short rows (w: rows) */  \
            T e[BLK];                                                                              \
            for (int64_t w = w0; w < w1; w += BLK / j->D) {                                        \
                int64_t R = w1 - w < BLK / j->D ? w1 - w : BLK / j->D;                             \
                const T *x = (const T *)j->x + w * j->D;                                           \
                T *y = (T *)j->y + w * j->D;                                                       \
                short_rows_##SUF(e, x, R, j->D, mx, sum);                                          \
                for (int64_t r = 0; r < R; r++) {                                                  \
                    T ls = (T)log(sum[r]), inv = (T)(1.0 / sum[r]);                                \
                    for (int64_t d = 0; d < j->D; d++) {                                           \
                        int64_t k = r * j->D + d;                                                  \
                        y[k] = j->log ? (x[k] - mx[r]) - ls : e[k] * inv;                          \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (int64_t w = w0; w < w1; w++) {                                                        \
            int64_t o = w / nb, c0 = (w % nb) * BLK,                                               \
                    n = j->inner - c0 < BLK ? j->inner - c0 : BLK;                                 \
            const T *x = (const T *)j->x + o * j->D * j->inner + c0;                               \
            T *y = (T *)j->y + o * j->D * j->inner + c0;                                           \
            if (j->inner == 1) { /* contiguous row: vectorised passes */                           \
                bool masked;                                                                       \
                T m = row_max_##SUF(x, j->D, &masked);                                             \
                if (j->log) {                                                                      \
                    double s = exp_sum_##SUF(NULL, x, j->D, m, masked);                            \
                    T ls = (T)log(s); /* x - m is exact near the max; m + ls would round */        \
                    _Pragma("omp simd") for (int64_t d = 0; d < j->D; d++) y[d] = (x[d] - m) - ls; \
                } else {                                                                           \
                    double s = exp_sum_##SUF(y, x, j->D, m, masked);                               \
                    T inv = (T)(1.0 / s);                                                          \
                    _Pragma("omp simd") for (int64_t d = 0; d < j->D; d++) y[d] *= inv;            \
                }                                                                                  \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t i = 0; i < n; i++) mx[i] = -INFINITY, sum[i] = 0;                         \
            for (int64_t d = 0; d < j->D; d++)                                                     \
                for (int64_t i = 0; i < n; i++) {                                                  \
                    T v = x[d * j->inner + i];                                                     \
                    mx[i] = v > mx[i] || v != v ? v : mx[i];                                       \
                }                                                                                  \
            for (int64_t i = 0; i < n; i++)                                                        \
                if (mx[i] == -INFINITY) mx[i] = 0;                                                 \
            for (int64_t d = 0; d < j->D; d++) {                                                   \
                T *yr = y + d * j->inner;                                                          \
                const T *xr = x + d * j->inner;                                                    \
                for (int64_t i = 0; i < n; i++) {                                                  \
                    yr[i] = EXP(xr[i] - mx[i]);                                                    \
                    sum[i] += yr[i];                                                               \
                }                                                                                  \
            }                                                                                      \
            for (int64_t d = 0; d < j->D; d++) {                                                   \
                T *yr = y + d * j->inner;                                                          \
                const T *xr = x + d * j->inner;                                                    \
                for (int64_t i = 0; i < n; i++)                                                    \
                    yr[i] = j->log ? xr[i] - mx[i] - (T)log(sum[i]) : (T)(yr[i] / sum[i]);         \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* backward: softmax gx = y (g - sum(g y)); log-softmax gx = g - exp(y) sum(g) */              \
    static void sm_bwd_##SUF(void *arg, int64_t w0, int64_t w1) {                                  \
        const sm_job *j = arg;                                                                     \
        int64_t nb = (j->inner + BLK - 1) / BLK;                                                   \
        double acc[BLK];                                                                           \
        for (int64_t w = w0; w < w1; w++) {                                                        \
            int64_t o = w / nb, c0 = (w % nb) * BLK,                                               \
                    n = j->inner - c0 < BLK ? j->inner - c0 : BLK;                                 \
            size_t off = (size_t)(o * j->D * j->inner + c0);                                       \
            const T *g = (const T *)j->g + off, *yv = (const T *)j->x + off;                       \
            T *gx = (T *)j->y + off;                                                               \
            if (j->inner == 1) { /* contiguous row */                                              \
                double a = 0;                                                                      \
                if (j->log) {                                                                      \
                    T lo = INFINITY;                                                               \
                    a = row_sum_##SUF(g, j->D);                                                    \
                    _Pragma("omp simd reduction(min : lo)") for (int64_t d = 0; d < j->D; d++)     \
                        lo = yv[d] < lo ? yv[d] : lo;                                              \
                    T at = (T)a;                                                                   \
                    if (lo < MUSA_EXP_ZERO_##SFX) {                                                \
                        MUSA_SIMD_MATH(T)                                                          \
                        for (int64_t d = 0; d < j->D; d++) gx[d] = g[d] - EXPM(yv[d]) * at;        \
                    } else {                                                                       \
                        MUSA_SIMD_MATH(T)                                                          \
                        for (int64_t d = 0; d < j->D; d++) gx[d] = g[d] - EXP(yv[d]) * at;         \
                    }                                                                              \
                } else {                                                                           \
                    a = row_dot_##SUF(g, yv, j->D);                                                \
                    T at = (T)a;                                                                   \
                    _Pragma("omp simd") for (int64_t d = 0; d < j->D; d++) gx[d] =                 \
                        yv[d] * (g[d] - at);                                                       \
                }                                                                                  \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t i = 0; i < n; i++) acc[i] = 0;                                            \
            for (int64_t d = 0; d < j->D; d++)                                                     \
                for (int64_t i = 0; i < n; i++) {                                                  \
                    int64_t k = d * j->inner + i;                                                  \
                    acc[i] += j->log ? (double)g[k] : (double)g[k] * yv[k];                        \
                }                                                                                  \
            for (int64_t d = 0; d < j->D; d++)                                                     \
                for (int64_t i = 0; i < n; i++) {                                                  \
                    int64_t k = d * j->inner + i;                                                  \
                    gx[k] =                                                                        \
                        j->log ? (T)(g[k] - EXP(yv[k]) * acc[i]) : (T)(yv[k] * (g[k] - acc[i]));   \
                }                                                                                  \
        }                                                                                          \
    }
DEF_SOFTMAX(f32, f, float, MUSA_EXPF, musa_exp_masked_f, logf)
DEF_SOFTMAX(f64, d, double, exp, musa_exp_masked_d, log)

#define DEF_SOFTMAX_ROWS(SUF, T)                                                                   \
    void musa_cpu_softmax_rows_##SUF(T *x, int64_t n, int64_t len, T *lse) {                       \
        double ms[64], ss[64]; /* the logs, 64 rows at a time, in one vector loop */               \
        for (int64_t r0 = 0; r0 < n; r0 += 64) {                                                   \
            int64_t k = n - r0 < 64 ? n - r0 : 64;                                                 \
            for (int64_t q = 0; q < k; q++) {                                                      \
                T *y = x + (r0 + q) * len;                                                         \
                bool masked;                                                                       \
                T m = row_max_##SUF(y, len, &masked);                                              \
                double s = exp_sum_##SUF(y, y, len, m, masked);                                    \
                T inv = (T)(1.0 / s);                                                              \
                _Pragma("omp simd") for (int64_t d = 0; d < len; d++) y[d] *= inv;                 \
                ms[q] = (double)m, ss[q] = s;                                                      \
            }                                                                                      \
            MUSA_SIMD_APPLY(double, ss, k, log);                                                   \
            for (int64_t q = 0; q < k; q++) lse[r0 + q] = (T)(ms[q] + ss[q]);                      \
        }                                                                                          \
    }
DEF_SOFTMAX_ROWS(f32, float)
DEF_SOFTMAX_ROWS(f64, double)

/* softmax_backward's contiguous-row formula (sm_bwd) over n rows of len:
 * gx = y (g - sum(g y)), gx may be g. For fused attention's eager-bits
 * mode (attention.c). */
void musa_cpu_softmax_backward_rows_f32(float *gx, const float *g, const float *y, int64_t n,
                                        int64_t len) {
    for (int64_t r = 0; r < n; r++) {
        const float *gr = g + r * len, *yr = y + r * len;
        float *o = gx + r * len, at = (float)row_dot_f32(gr, yr, len);
        _Pragma("omp simd") for (int64_t d = 0; d < len; d++) o[d] = yr[d] * (gr[d] - at);
    }
}

static int softmax_run(const musa_kctx *ctx, musa_kview *out, const musa_kview *x,
                       const musa_kview *g, int64_t dim, bool log, bool backward) {
    char *ws = ctx->scratch;
    nn_out y = nn_out_begin(&out[0], &ws);
    sm_job j = {.log = log, .y = y.data};
    split_dim(x, dim, &j.outer, &j.D, &j.inner);
    j.x = x->data;
    j.g = g ? g->data : NULL;
    int64_t items = j.outer * ((j.inner + BLK - 1) / BLK);
    int64_t per = j.D * (j.inner < BLK ? j.inner : BLK) + 1;
    bool f64 = x->dtype == MUSA_DTYPE_FLOAT64;
    musa_range_fn fn = backward ? (f64 ? sm_bwd_f64 : sm_bwd_f32) : (f64 ? sm_fwd_f64 : sm_fwd_f32);
    if (musa_kview_numel(x) > 0) musa_parallel_for(items, per >= 8192 ? 1 : 8192 / per, fn, &j);
    nn_out_end(&y);
    return MUSA_OK;
}

int cpu_softmax(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                const void *attrs) {
    MUSA_UNUSED(n_in);
    return softmax_run(ctx, out, &in[0], NULL, ((const musa_attrs_dim *)attrs)->dim, false, false);
}
int cpu_log_softmax(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                    const void *attrs) {
    MUSA_UNUSED(n_in);
    return softmax_run(ctx, out, &in[0], NULL, ((const musa_attrs_dim *)attrs)->dim, true, false);
}
/* in = (gradient, forward output) */
int cpu_softmax_backward(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                         const void *attrs) {
    MUSA_UNUSED(n_in);
    return softmax_run(ctx, out, &in[1], &in[0], ((const musa_attrs_dim *)attrs)->dim, false, true);
}
int cpu_log_softmax_backward(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                             const void *attrs) {
    MUSA_UNUSED(n_in);
    return softmax_run(ctx, out, &in[1], &in[0], ((const musa_attrs_dim *)attrs)->dim, true, true);
}

/* ---- cross-entropy over class indices ---- */

typedef struct {
    int64_t N, C, S; /* logits (N, C, S); targets (N, S) */
    const char *x;
    const int64_t *t;
    const char *g; /* backward: loss gradient (0-d or (N, S)) */
    char *out;
    double *loss; /* per sample, forward */
    const musa_attrs_xent *a;
    double scale; /* backward: 1/count (mean) or 1 */
    bool g_per_sample;
    musa_bad_index bad; /* first bad target */
} xe_job;

static inline bool xe_target(xe_job *j, int64_t t) {
    if (t == j->a->ignore_index) return false;
    if (t < 0 || t >= j->C) {
        musa_bad_index_note(&j->bad, t);
        return false;
    }
    return true;
}

#define DEF_XENT(SUF, T, EXP)                                                                      \
    /* short contiguous rows (S == 1, C < a vector), a block at a time:                            \
     * short_rows' exps and sums, then each row as below */                                        \
    static bool xe_short_##SUF(xe_job *j, int64_t r0, int64_t r1) {                                \
        if (j->S != 1 || j->C < 1 || j->C >= MUSA_SIMD_LANES_##T) return false;                    \
        double eps = j->a->label_smoothing, s[BLK];                                                \
        T m[BLK], buf[BLK];                                                                        \
        int64_t C = j->C, step = BLK / C;                                                          \
        for (int64_t b = r0; b < r1; b += step) {                                                  \
            int64_t R = r1 - b < step ? r1 - b : step;                                             \
            const T *x = (const T *)j->x + b * C;                                                  \
            T *gx = j->out ? (T *)j->out + b * C : NULL;                                           \
            short_rows_##SUF(gx ? gx : buf, x, R, C, m, s);                                        \
            if (!gx) MUSA_SIMD_APPLY(double, s, R, log);                                           \
            for (int64_t q = 0; q < R; q++) {                                                      \
                int64_t r = b + q, t = j->t[r];                                                    \
                const T *xr = x + q * C;                                                           \
                if (!gx) { /* forward: the loss */                                                 \
                    if (!xe_target(j, t)) {                                                        \
                        j->loss[r] = 0;                                                            \
                        continue;                                                                  \
                    }                                                                              \
                    double lse = s[q], sx = 0; /* the log of the sum, vectorised above */          \
                    double loss = (1 - eps) * (lse - ((double)xr[t] - (double)m[q]));              \
                    if (eps != 0) {                                                                \
                        _Pragma("omp simd reduction(+ : sx)") for (int64_t c = 0; c < C; c++)      \
                            sx += xr[c];                                                           \
                        loss += eps * (lse - (sx / (double)C - (double)m[q]));                     \
                    }                                                                              \
                    j->loss[r] = loss;                                                             \
                    continue;                                                                      \
                }                                                                                  \
                T *g = gx + q * C;                                                                 \
                if (!xe_target(j, t)) {                                                            \
                    for (int64_t c = 0; c < C; c++) g[c] = 0;                                      \
                    continue;                                                                      \
                }                                                                                  \
                double gs =                                                                        \
                    (j->g_per_sample ? ((const T *)j->g)[r] : ((const T *)j->g)[0]) * j->scale;    \
                T k = (T)(gs / s[q]), u = (T)(eps / (double)C * gs);                               \
                _Pragma("omp simd") for (int64_t c = 0; c < C; c++) g[c] = g[c] * k - u;           \
                g[t] -= (T)((1 - eps) * gs);                                                       \
            }                                                                                      \
        }                                                                                          \
        return true;                                                                               \
    }                                                                                              \
    static void xe_fwd_##SUF(void *arg, int64_t r0, int64_t r1) {                                  \
        xe_job *j = arg;                                                                           \
        double eps = j->a->label_smoothing;                                                        \
        if (xe_short_##SUF(j, r0, r1)) return;                                                     \
        for (int64_t r = r0; r < r1; r++) {                                                        \
            int64_t n = r / j->S, s = r % j->S, t = j->t[r];                                       \
            const T *x = (const T *)j->x + n * j->C * j->S + s;                                    \
            if (!xe_target(j, t)) {                                                                \
                j->loss[r] = 0;                                                                    \
                continue;                                                                          \
            }                                                                                      \
            T m = -INFINITY;                                                                       \
            double se = 0, sx = 0;                                                                 \
            if (j->S == 1) { /* contiguous row */                                                  \
                bool masked;                                                                       \
                m = row_max_##SUF(x, j->C, &masked);                                               \
                se = exp_sum_##SUF(NULL, x, j->C, m, masked);                                      \
                if (eps != 0) /* the smoothing term's sum: a pass only where it counts */          \
                    _Pragma("omp simd reduction(+ : sx)") for (int64_t c = 0; c < j->C; c++) sx += \
                        x[c];                                                                      \
            } else {                                                                               \
                for (int64_t c = 0; c < j->C; c++) m = x[c * j->S] > m ? x[c * j->S] : m;          \
                for (int64_t c = 0; c < j->C; c++) {                                               \
                    se += EXP(x[c * j->S] - m);                                                    \
                    sx += x[c * j->S];                                                             \
                }                                                                                  \
            }                                                                                      \
            /* relative to the max, so logits near the float range keep their                      \
             * difference; the smoothing term only when it has weight (a -inf                      \
             * logit of a masked class would give 0 * inf) */                                      \
            double lse = log(se);                                                                  \
            double loss = (1 - eps) * (lse - ((double)x[t * j->S] - (double)m));                   \
            if (eps != 0) loss += eps * (lse - (sx / (double)j->C - (double)m));                   \
            j->loss[r] = loss;                                                                     \
        }                                                                                          \
    }                                                                                              \
    static void xe_bwd_##SUF(void *arg, int64_t r0, int64_t r1) {                                  \
        xe_job *j = arg;                                                                           \
        double eps = j->a->label_smoothing;                                                        \
        if (xe_short_##SUF(j, r0, r1)) return;                                                     \
        for (int64_t r = r0; r < r1; r++) {                                                        \
            int64_t n = r / j->S, s = r % j->S, t = j->t[r];                                       \
            const T *x = (const T *)j->x + n * j->C * j->S + s;                                    \
            T *gx = (T *)j->out + n * j->C * j->S + s;                                             \
            if (!xe_target(j, t)) {                                                                \
                for (int64_t c = 0; c < j->C; c++) gx[c * j->S] = 0;                               \
                continue;                                                                          \
            }                                                                                      \
            double gs =                                                                            \
                (j->g_per_sample ? ((const T *)j->g)[r] : ((const T *)j->g)[0]) * j->scale;        \
            if (j->S == 1) { /* contiguous row: gx = (softmax - smoothed one-hot) gs, the          \
                              * exps stored by the pass that sums them (one exp per element) */    \
                bool masked;                                                                       \
                T m = row_max_##SUF(x, j->C, &masked);                                             \
                double se = exp_sum_##SUF(gx, x, j->C, m, masked);                                 \
                T k = (T)(gs / se), u = (T)(eps / (double)j->C * gs);                              \
                _Pragma("omp simd") for (int64_t c = 0; c < j->C; c++) gx[c] = gx[c] * k - u;      \
                gx[t] -= (T)((1 - eps) * gs);                                                      \
                continue;                                                                          \
            }                                                                                      \
            T m = -INFINITY;                                                                       \
            for (int64_t c = 0; c < j->C; c++) m = x[c * j->S] > m ? x[c * j->S] : m;              \
            double se = 0;                                                                         \
            for (int64_t c = 0; c < j->C; c++) se += EXP(x[c * j->S] - m);                         \
            double inv = 1.0 / se;                                                                 \
            for (int64_t c = 0; c < j->C; c++) {                                                   \
                double p = EXP(x[c * j->S] - m) * inv;                                             \
                double target = (c == t ? 1 - eps : 0) + eps / (double)j->C;                       \
                gx[c * j->S] = (T)((p - target) * gs);                                             \
            }                                                                                      \
        }                                                                                          \
    }
DEF_XENT(f32, float, MUSA_EXPF)
DEF_XENT(f64, double, exp)

static void xe_geom(const musa_kview *x, int64_t *N, int64_t *C, int64_t *S) {
    if (x->ndim == 1) {
        *N = 1, *C = x->shape[0], *S = 1;
        return;
    }
    *N = x->shape[0], *C = x->shape[1], *S = 1;
    for (int d = 2; d < x->ndim; d++) *S *= x->shape[d];
}

MUSA_WS(ws_xent) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    int64_t N, C, S;
    xe_geom(&in[0], &N, &C, &S);
    /* N * S <= the input's elements, which fit int64 */
    return nn_ws_outputs(out, n_out, nn_align(nn_bytes(N * S + 1, sizeof(double))));
}

static int xe_error(const musa_kctx *ctx, xe_job *j) {
    if (!atomic_load(&j->bad.seen)) return MUSA_OK;
    return musa_err(MUSA_ERR_INDEX, "[%s] target %lld is out of bounds for %lld classes",
                    ctx->op_name, (long long)atomic_load(&j->bad.value), (long long)j->C);
}

static int64_t xe_count(xe_job *j) {
    int64_t k = 0;
    for (int64_t r = 0; r < j->N * j->S; r++) k += j->t[r] != j->a->ignore_index;
    return k;
}

int cpu_cross_entropy(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                      const void *attrs) {
    MUSA_UNUSED(n_in);
    xe_job j = {.x = in[0].data, .t = (const int64_t *)in[1].data, .a = attrs};
    musa_bad_index_init(&j.bad);
    xe_geom(&in[0], &j.N, &j.C, &j.S);
    j.loss = ctx->scratch;
    char *ws = (char *)ctx->scratch + nn_align(sizeof(double) * (size_t)(j.N * j.S + 1));
    nn_out o = nn_out_begin(&out[0], &ws);
    int64_t rows = j.N * j.S;
    musa_parallel_for(rows, j.C >= 4096 ? 1 : 4096 / (j.C + 1) + 1,
                      in[0].dtype == MUSA_DTYPE_FLOAT64 ? xe_fwd_f64 : xe_fwd_f32, &j);
    int rc = xe_error(ctx, &j);
    if (rc) return rc;
    bool f64 = out[0].dtype == MUSA_DTYPE_FLOAT64;
    if (j.a->reduction == 0) {
        for (int64_t r = 0; r < rows; r++) {
            if (f64)
                ((double *)o.data)[r] = j.loss[r];
            else
                ((float *)o.data)[r] = (float)j.loss[r];
        }
    } else {
        double total = 0;
        for (int64_t r = 0; r < rows; r++) total += j.loss[r];
        if (j.a->reduction == 1) total /= (double)xe_count(&j); /* 0/0 = NaN, as PyTorch */
        if (f64)
            *(double *)o.data = total;
        else
            *(float *)o.data = (float)total;
    }
    nn_out_end(&o);
    return MUSA_OK;
}

/* in = (loss gradient, logits, target) */
int cpu_cross_entropy_backward(const musa_kctx *ctx, musa_kview *out, const musa_kview *in,
                               int n_in, const void *attrs) {
    MUSA_UNUSED(n_in);
    xe_job j = {.x = in[1].data, .t = (const int64_t *)in[2].data, .g = in[0].data, .a = attrs};
    musa_bad_index_init(&j.bad);
    xe_geom(&in[1], &j.N, &j.C, &j.S);
    char *ws = ctx->scratch;
    nn_out gx = nn_out_begin(&out[0], &ws);
    j.out = gx.data;
    j.g_per_sample = j.a->reduction == 0;
    j.scale = j.a->reduction == 1 ? 1.0 / (double)xe_count(&j) : 1.0;
    musa_parallel_for(j.N * j.S, j.C >= 4096 ? 1 : 4096 / (j.C + 1) + 1,
                      in[1].dtype == MUSA_DTYPE_FLOAT64 ? xe_bwd_f64 : xe_bwd_f32, &j);
    int rc = xe_error(ctx, &j);
    if (!rc) nn_out_end(&gx);
    return rc;
}
