/*
 * norm.c - batch, layer and group normalisation: forward (y, mean, invstd)
 * and fused backward (gx, gweight, gbias).
 *
 * Statistics are two-pass in float64 (mean, then the mean squared
 * deviation), so float64 inputs keep their accuracy. Backward passes never
 * materialise x-hat: it is recomputed from x, mean and invstd on the fly.
 * Weight and bias gradients of layer norm (sums over rows) run in a second,
 * column-parallel pass instead of per-thread partial buffers.
 */
#include <math.h>

#include "elem.h"
#include "nnutil.h"

/* ws_norm: staging for low-precision outputs only. */
MUSA_WS(ws_norm) {
    MUSA_UNUSED(in), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    return nn_ws_outputs(out, n_out, 0);
}

/* Chunks of rows the layer norm backward splits into (one per thread). */
/* Layer norm backward's row chunks: each sums its rows' gweight and gbias
 * terms in the element type, in row order; the chunks' sums then add up in
 * float64. Chunks are fixed by R alone (at least 32 rows, at most 64
 * chunks), so the results do not depend on the thread count. */
static int64_t ln_chunk_rows(int64_t R) {
    int64_t r = (R + 63) / 64;
    return r < 32 ? 32 : r;
}

static int64_t ln_chunks(int64_t R) {
    return R ? (R + ln_chunk_rows(R) - 1) / ln_chunk_rows(R) : 1;
}

static void rows_d(const musa_kview *x, int64_t ndims, int64_t *R, int64_t *D) {
    *D = 1;
    for (int d = x->ndim - (int)ndims; d < x->ndim; d++) *D *= x->shape[d];
    *R = *D ? musa_kview_numel(x) / *D : 0;
}

/* Layer norm backward: staging plus the partial sums of gweight, gbias. */
MUSA_WS(ws_layer_norm_backward) {
    MUSA_UNUSED(n_in);
    int64_t R, D;
    rows_d(&in[1], ((const musa_attrs_norm *)attrs)->ndims, &R, &D);
    int64_t chunks = ln_chunks(R);
    return nn_ws_outputs(out, n_out, nn_align(nn_bytes2(D, 2 * chunks, sizeof(double))));
}

typedef struct {
    int64_t outer, C, inner; /* batch/group: (N, C, S); layer: (R, D, 1) */
    int64_t groups;
    double eps;
    const char *x, *gy, *w, *b, *mean, *invstd;
    char *y, *gx, *gw, *gb, *omean, *oinvstd;
    double *part; /* layer norm backward: (chunks, 2, D) partial sums; batch
                   * norm over rows: (chunks, 2, C) */
    int64_t chunks;
    int64_t rows; /* batch norm over rows, layer norm backward: rows per chunk */
    int pass;     /* batch norm over rows: 0 sums x, 1 sums (x - mean)^2 */
    void *coef;   /* batch norm over rows: per-channel coefficients (4, C) */
} norm_job;

/* The three outputs of a norm kernel claimed (staged if need be) and the
 * job's pointers set: forward (x, w, b) -> (y, mean, invstd); backward
 * (gy, x, w, mean, invstd) -> (gx, gw, gb). */
static norm_job norm_fwd_job(musa_kview *out, const musa_kview *in, nn_out o[3], char **ws) {
    for (int k = 0; k < 3; k++) o[k] = nn_out_begin(&out[k], ws);
    return (norm_job){.x = in[0].data,
                      .w = in[1].data,
                      .b = in[2].data,
                      .y = o[0].data,
                      .omean = o[1].data,
                      .oinvstd = o[2].data};
}
static norm_job norm_bwd_job(musa_kview *out, const musa_kview *in, nn_out o[3], char **ws) {
    for (int k = 0; k < 3; k++) o[k] = nn_out_begin(&out[k], ws);
    return (norm_job){.gy = in[0].data,
                      .x = in[1].data,
                      .w = in[2].data,
                      .mean = in[3].data,
                      .invstd = in[4].data,
                      .gx = o[0].data,
                      .gw = o[1].data,
                      .gb = o[2].data};
}
static void norm_end(nn_out o[3]) {
    for (int k = 0; k < 3; k++) nn_out_end(&o[k]);
}

/* A variance below 0 (rounding) is 0; NaN, from an inf or NaN among the
 * values, stays NaN, so every output of that group is NaN, as in
 * PyTorch (it became 0, and the group's finite values came out inf). */
static double clamp_var(double v) {
    return v < 0 ? 0 : v;
}

/* ---- batch norm: statistics per channel over (N, S) ---- */

/* Batch norm sums each channel in interleaved float64 partials
 * (NN_LANES_FOR_W, nnutil.h) across all its planes, totalled in order
 * afterwards: 16 partials for planes under BN_WIDE elements, BN_WIDE from
 * there on. A horizontal reduction per plane cost more than the sums on
 * ResNet-18's 4x4 planes (bfloat16 (32, 512, 4, 4): forward 425 -> 119 us,
 * backward 310 -> 104 us); one vector of partials per plane (longer
 * planes' omp simd reduction, before) waits on its adds' latency, where
 * BN_WIDE partials are eight independent AVX-512 chains (float32
 * (32, 256, 8, 8): forward 112 -> 84 us with the blocks below). Layer
 * norm sums each row this way (partials in the statistics' type; below). */
#define BN_WIDE     64
#define BN_PARTIALS 1024 /* float64 partials of a block of channels */

static inline int bn_lanes(int64_t S) {
    return S >= BN_WIDE ? BN_WIDE : NN_LANES;
}

static inline double bn_lanes_total(const double *a, int lanes) {
    double s = 0;
    for (int k = 0; k < lanes; k++) s += a[k];
    return s;
}

/* x[i] for i < S into partials a (bn_lanes(S) of them) */
#define BN_SUM(S, a, ...)                                                                          \
    do {                                                                                           \
        if ((S) >= BN_WIDE)                                                                        \
            NN_LANES_FOR_W(BN_WIDE, S, __VA_ARGS__);                                               \
        else                                                                                       \
            NN_LANES_FOR(S, __VA_ARGS__);                                                          \
    } while (0)

/* Channels go in blocks, each pass sweeping the block image by image: the
 * block's planes of one image are adjacent in memory, so a pass streams
 * through them, where one channel at a time read N planes a whole image
 * apart (the first pass over a (32, 64, 32, 32) float32 input waited on
 * memory most of its time). A block holds about BN_BLOCK_BYTES of x (and
 * gy), so the later passes find it in L2. A channel's sums see its planes
 * in order whatever block or thread range it falls in, so results do not
 * depend on the thread count. Measured with the partials above, 2 threads,
 * (32, C, H, W) inputs beyond the LLC, forward / backward in us: float32
 * 32x32 511-573 -> 462-501 / 838-914 -> 640-664, 16x16 168-205 -> 195 /
 * 434-453 -> 461-477 (the one loss), 4x4 104 -> 70 / 141-154 -> 107;
 * bfloat16 32x32 391-401 -> 330-343 / 578-585 -> 462-476, 8x8 128 -> 93 /
 * 170-177 -> 117-120. */
#define BN_BLOCK       64 /* channels at most */
#define BN_BLOCK_BYTES ((int64_t)256 << 10)

static int64_t bn_block(int64_t N, int64_t S, size_t es, int arrays) {
    int64_t per = N * S * (int64_t)es * arrays, cb = per > 0 ? BN_BLOCK_BYTES / per : BN_BLOCK;
    int64_t most = BN_PARTIALS / bn_lanes(S);
    return cb < 1 ? 1 : cb > most ? most : cb;
}

/* T: the element type of x, y, gy, gx (loaded with LD into the compute
 * type CT, stored with ST); W: weight, bias, statistics and their gradients.
 * bfloat16 elements take float32 weights and statistics. */
#define DEF_BN(SUF, T, W, CT, LD, ST)                                                              \
    /* channels cb..ce: y = (x - mean) * scale + b from the stored (rounded)                       \
     * mean and invstd, so batch_norm_apply reproduces the forward's y bit for                     \
     * bit; not x * scale + (b - mean * scale), whose shift cancels against                        \
     * x * scale when invstd is large (as group_norm, gn_fwd) */                                   \
    static void bn_normalize_##SUF(const T *x, T *y, int64_t N, int64_t C_, int64_t S, int64_t cb, \
                                   int64_t ce, const W *w, const W *b, const W *mean,              \
                                   const W *invstd) {                                              \
        CT scale[BN_BLOCK], mu[BN_BLOCK], bias[BN_BLOCK];                                          \
        for (int64_t c = cb; c < ce; c++) {                                                        \
            scale[c - cb] = (CT)((double)w[c] * invstd[c]);                                        \
            mu[c - cb] = (CT)mean[c], bias[c - cb] = (CT)b[c];                                     \
        }                                                                                          \
        for (int64_t n = 0; n < N; n++)                                                            \
            for (int64_t c = cb; c < ce; c++) {                                                    \
                const T *p = x + (n * C_ + c) * S;                                                 \
                T *q = y + (n * C_ + c) * S;                                                       \
                CT sc = scale[c - cb], m = mu[c - cb], bb = bias[c - cb];                          \
                for (int64_t i = 0; i < S; i++) q[i] = ST((LD(p[i]) - m) * sc + bb);               \
            }                                                                                      \
    }                                                                                              \
    static void bn_fwd_##SUF(void *arg, int64_t c0, int64_t c1) {                                  \
        const norm_job *j = arg;                                                                   \
        const T *x = (const T *)j->x;                                                              \
        const W *w = (const W *)j->w, *b = (const W *)j->b;                                        \
        T *y = (T *)j->y;                                                                          \
        W *mo = (W *)j->omean, *io = (W *)j->oinvstd;                                              \
        int64_t N = j->outer, C_ = j->C, S = j->inner, cbk = bn_block(N, S, sizeof(T), 1);         \
        double m = (double)(N * S);                                                                \
        for (int64_t cb = c0; cb < c1; cb += cbk) {                                                \
            int64_t ce = cb + cbk < c1 ? cb + cbk : c1;                                            \
            double mean[BN_BLOCK], a[BN_PARTIALS];                                                 \
            int L = bn_lanes(S);                                                                   \
            memset(a, 0, sizeof a);                                                                \
            for (int64_t n = 0; n < N; n++)                                                        \
                for (int64_t c = cb; c < ce; c++) {                                                \
                    const T *p = x + (n * C_ + c) * S;                                             \
                    double *a1 = a + (c - cb) * L;                                                 \
                    BN_SUM(S, a1, a1[k_] += (double)LD(p[i]));                                     \
                }                                                                                  \
            for (int64_t c = cb; c < ce; c++)                                                      \
                mean[c - cb] = m > 0 ? bn_lanes_total(a + (c - cb) * L, L) / m : 0;                \
            memset(a, 0, sizeof a);                                                                \
            for (int64_t n = 0; n < N; n++)                                                        \
                for (int64_t c = cb; c < ce; c++) {                                                \
                    const T *p = x + (n * C_ + c) * S;                                             \
                    double *a2 = a + (c - cb) * L, mu = mean[c - cb];                              \
                    BN_SUM(S, a2, a2[k_] += ((double)LD(p[i]) - mu) * ((double)LD(p[i]) - mu));    \
                }                                                                                  \
            for (int64_t c = cb; c < ce; c++) {                                                    \
                double ss = bn_lanes_total(a + (c - cb) * L, L);                                   \
                double inv = 1.0 / sqrt(clamp_var(m > 0 ? ss / m : 0) + j->eps);                   \
                mo[c] = (W)mean[c - cb];                                                           \
                io[c] = (W)inv;                                                                    \
            }                                                                                      \
            bn_normalize_##SUF(x, y, N, C_, S, cb, ce, w, b, mo, io);                              \
        }                                                                                          \
    }                                                                                              \
    /* y from the statistics the forward stored: what the forward wrote */                         \
    static void bn_apply_##SUF(void *arg, int64_t c0, int64_t c1) {                                \
        const norm_job *j = arg;                                                                   \
        int64_t cbk = bn_block(j->outer, j->inner, sizeof(T), 1);                                  \
        for (int64_t cb = c0; cb < c1; cb += cbk)                                                  \
            bn_normalize_##SUF((const T *)j->x, (T *)j->y, j->outer, j->C, j->inner, cb,           \
                               cb + cbk < c1 ? cb + cbk : c1, (const W *)j->w, (const W *)j->b,    \
                               (const W *)j->mean, (const W *)j->invstd);                          \
    }                                                                                              \
    static void bn_bwd_##SUF(void *arg, int64_t c0, int64_t c1) {                                  \
        const norm_job *j = arg;                                                                   \
        const T *x = (const T *)j->x, *gy = (const T *)j->gy;                                      \
        const W *w = (const W *)j->w, *mean = (const W *)j->mean, *invstd = (const W *)j->invstd;  \
        T *gx = (T *)j->gx;                                                                        \
        W *gw = (W *)j->gw, *gb = (W *)j->gb;                                                      \
        int64_t N = j->outer, C_ = j->C, S = j->inner, cbk = bn_block(N, S, sizeof(T), 2);         \
        double m = (double)(N * S);                                                                \
        for (int64_t cb = c0; cb < c1; cb += cbk) {                                                \
            int64_t ce = cb + cbk < c1 ? cb + cbk : c1;                                            \
            double sg[BN_BLOCK], sgx[BN_BLOCK], a[2][BN_PARTIALS];                                 \
            int L = bn_lanes(S);                                                                   \
            memset(a, 0, sizeof a);                                                                \
            for (int64_t n = 0; n < N; n++)                                                        \
                for (int64_t c = cb; c < ce; c++) {                                                \
                    const T *p = x + (n * C_ + c) * S, *g = gy + (n * C_ + c) * S;                 \
                    double mu = mean[c], *a1 = a[0] + (c - cb) * L, *a2 = a[1] + (c - cb) * L;     \
                    BN_SUM(S, a1, a1[k_] += (double)LD(g[i]);                                      \
                           a2[k_] += (double)LD(g[i]) * ((double)LD(p[i]) - mu));                  \
                }                                                                                  \
            for (int64_t c = cb; c < ce; c++) {                                                    \
                sg[c - cb] = bn_lanes_total(a[0] + (c - cb) * L, L);                               \
                sgx[c - cb] = bn_lanes_total(a[1] + (c - cb) * L, L);                              \
            }                                                                                      \
            CT k[BN_BLOCK], av[BN_BLOCK], bv[BN_BLOCK], mt[BN_BLOCK];                              \
            for (int64_t c = cb; c < ce; c++) {                                                    \
                int64_t r = c - cb;                                                                \
                double inv = invstd[c];                                                            \
                gb[c] = (W)sg[r];                                                                  \
                gw[c] = (W)(sgx[r] * inv);                                                         \
                k[r] = (CT)(w[c] * inv), av[r] = (CT)(sg[r] / m);                                  \
                bv[r] = (CT)(inv * inv * sgx[r] / m), mt[r] = (CT)(double)mean[c];                 \
            }                                                                                      \
            for (int64_t n = 0; n < N; n++)                                                        \
                for (int64_t c = cb; c < ce; c++) {                                                \
                    const T *p = x + (n * C_ + c) * S, *g = gy + (n * C_ + c) * S;                 \
                    T *q = gx + (n * C_ + c) * S;                                                  \
                    int64_t r = c - cb;                                                            \
                    CT kc = k[r], ac = av[r], bc = bv[r], mc = mt[r];                              \
                    _Pragma("omp simd") for (int64_t i = 0; i < S; i++) q[i] =                     \
                        ST(kc * (LD(g[i]) - ac - (LD(p[i]) - mc) * bc));                           \
                }                                                                                  \
        }                                                                                          \
    }
DEF_BN(f32, float, float, float, LD_f32, ST_f32)
DEF_BN(f64, double, double, double, LD_f64, ST_f64)
DEF_BN(bf16, musa_bf16, float, float, LD_bf16, ST_bf16)

/* ---- batch norm over rows: x is (M, C), channels innermost (S == 1) ----
 *
 * BatchNorm1d's input, and channels-last activations (the jit's layout pass
 * views an NHWC tensor as (N H W, C) rows). The loops above would walk each
 * channel down a column, a cache line per element; these run along rows,
 * vectorised over channels. Rows are cut into chunks fixed by M alone (not
 * by the thread count, so results do not depend on it); each chunk sums into
 * its own float64 partials, which are added in chunk order. Same two-pass
 * statistics and the same normalisation formula as above, so
 * batch_norm_apply still reproduces the forward bit for bit. */
#define BN_ROW_CHUNKS 64
#define DEF_BN_ROWS(SUF, T, W, CT, LD, ST)                                                         \
    /* partials of chunks [k0, k1): sum x (what 0), sum (x - mean)^2 (what 1) */                   \
    static void bnr_sums_##SUF(void *arg, int64_t k0, int64_t k1) {                                \
        const norm_job *j = arg;                                                                   \
        const T *x = (const T *)j->x;                                                              \
        int64_t C = j->C, M = j->outer;                                                            \
        const double *mean = j->part + 2 * j->chunks * C; /* set before pass 1 */                  \
        for (int64_t k = k0; k < k1; k++) {                                                        \
            double *s = j->part + 2 * k * C, *ss = s + C;                                          \
            int64_t r1 = (k + 1) * j->rows < M ? (k + 1) * j->rows : M;                            \
            for (int64_t c = 0; c < 2 * C; c++) s[c] = 0;                                          \
            for (int64_t r = k * j->rows; r < r1; r++) {                                           \
                const T *p = x + r * C;                                                            \
                if (!j->pass) {                                                                    \
                    _Pragma("omp simd") for (int64_t c = 0; c < C; c++) s[c] += LD(p[c]);          \
                } else {                                                                           \
                    _Pragma("omp simd") for (int64_t c = 0; c < C; c++) {                          \
                        double d = LD(p[c]) - mean[c];                                             \
                        ss[c] += d * d;                                                            \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* y = (x - mean) * scale + b over chunks [k0, k1), as bn_normalize;                           \
     * coef holds (scale, mean, b) */                                                              \
    static void bnr_norm_##SUF(void *arg, int64_t k0, int64_t k1) {                                \
        const norm_job *j = arg;                                                                   \
        const CT *scale = j->coef, *mu = scale + j->C, *bias = mu + j->C;                          \
        int64_t C = j->C, r1 = k1 * j->rows < j->outer ? k1 * j->rows : j->outer;                  \
        for (int64_t r = k0 * j->rows; r < r1; r++) {                                              \
            const T *p = (const T *)j->x + r * C;                                                  \
            T *q = (T *)j->y + r * C;                                                              \
            _Pragma("omp simd") for (int64_t c = 0; c < C; c++) q[c] =                             \
                ST((LD(p[c]) - mu[c]) * scale[c] + bias[c]);                                       \
        }                                                                                          \
    }                                                                                              \
    /* the forward's coefficients of each channel, from the stored statistics */                   \
    static void bnr_coef_##SUF(norm_job *j, const W *mean, const W *invstd) {                      \
        const W *w = (const W *)j->w, *b = (const W *)j->b;                                        \
        CT *scale = j->coef, *mu = scale + j->C, *bias = mu + j->C;                                \
        for (int64_t c = 0; c < j->C; c++) {                                                       \
            scale[c] = (CT)((double)w[c] * invstd[c]);                                             \
            mu[c] = (CT)mean[c], bias[c] = (CT)b[c];                                               \
        }                                                                                          \
    }                                                                                              \
    static void bnr_fwd_##SUF(norm_job *j) {                                                       \
        int64_t C = j->C;                                                                          \
        double m = (double)j->outer, *mean = j->part + 2 * j->chunks * C;                          \
        W *mo = (W *)j->omean, *io = (W *)j->oinvstd;                                              \
        for (int pass = 0; pass < 2; pass++) {                                                     \
            j->pass = pass;                                                                        \
            musa_parallel_for(j->chunks, 1, bnr_sums_##SUF, j);                                    \
            for (int64_t c = 0; c < C; c++) {                                                      \
                double t = 0;                                                                      \
                for (int64_t k = 0; k < j->chunks; k++) t += j->part[(2 * k + pass) * C + c];      \
                if (!pass) {                                                                       \
                    mean[c] = m > 0 ? t / m : 0;                                                   \
                    mo[c] = (W)mean[c];                                                            \
                } else {                                                                           \
                    io[c] = (W)(1.0 / sqrt(clamp_var(m > 0 ? t / m : 0) + j->eps));                \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        bnr_coef_##SUF(j, mo, io);                                                                 \
        musa_parallel_for(j->chunks, 1, bnr_norm_##SUF, j);                                        \
    }                                                                                              \
    static void bnr_apply_##SUF(norm_job *j) {                                                     \
        bnr_coef_##SUF(j, (const W *)j->mean, (const W *)j->invstd);                               \
        musa_parallel_for(j->chunks, 1, bnr_norm_##SUF, j);                                        \
    }                                                                                              \
    /* backward: partials of sum gy (s) and sum gy (x - mean) (ss) */                              \
    static void bnr_bsums_##SUF(void *arg, int64_t k0, int64_t k1) {                               \
        const norm_job *j = arg;                                                                   \
        const W *mean = (const W *)j->mean;                                                        \
        int64_t C = j->C, M = j->outer;                                                            \
        for (int64_t k = k0; k < k1; k++) {                                                        \
            double *s = j->part + 2 * k * C, *ss = s + C;                                          \
            int64_t r1 = (k + 1) * j->rows < M ? (k + 1) * j->rows : M;                            \
            for (int64_t c = 0; c < 2 * C; c++) s[c] = 0;                                          \
            for (int64_t r = k * j->rows; r < r1; r++) {                                           \
                const T *p = (const T *)j->x + r * C, *g = (const T *)j->gy + r * C;               \
                _Pragma("omp simd") for (int64_t c = 0; c < C; c++) {                              \
                    s[c] += LD(g[c]);                                                              \
                    ss[c] += LD(g[c]) * (LD(p[c]) - (double)mean[c]);                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* gx = k (gy - a - (x - mean) bcoef) over chunks; coef holds (k, a, bcoef, mean) */           \
    static void bnr_bgx_##SUF(void *arg, int64_t k0, int64_t k1) {                                 \
        const norm_job *j = arg;                                                                   \
        int64_t C = j->C, r1 = k1 * j->rows < j->outer ? k1 * j->rows : j->outer;                  \
        const CT *kk = j->coef, *a = kk + C, *bc = a + C, *mt = bc + C;                            \
        for (int64_t r = k0 * j->rows; r < r1; r++) {                                              \
            const T *p = (const T *)j->x + r * C, *g = (const T *)j->gy + r * C;                   \
            T *q = (T *)j->gx + r * C;                                                             \
            _Pragma("omp simd") for (int64_t c = 0; c < C; c++) q[c] =                             \
                ST(kk[c] * (LD(g[c]) - a[c] - (LD(p[c]) - mt[c]) * bc[c]));                        \
        }                                                                                          \
    }                                                                                              \
    static void bnr_bwd_##SUF(norm_job *j) {                                                       \
        int64_t C = j->C;                                                                          \
        double m = (double)j->outer;                                                               \
        const W *w = (const W *)j->w, *invstd = (const W *)j->invstd, *mean = (const W *)j->mean;  \
        W *gw = (W *)j->gw, *gb = (W *)j->gb;                                                      \
        CT *kk = j->coef, *a = kk + C, *bc = a + C, *mt = bc + C;                                  \
        musa_parallel_for(j->chunks, 1, bnr_bsums_##SUF, j);                                       \
        for (int64_t c = 0; c < C; c++) {                                                          \
            double sg = 0, sgx = 0, inv = invstd[c];                                               \
            for (int64_t k = 0; k < j->chunks; k++)                                                \
                sg += j->part[2 * k * C + c], sgx += j->part[(2 * k + 1) * C + c];                 \
            gb[c] = (W)sg;                                                                         \
            gw[c] = (W)(sgx * inv);                                                                \
            kk[c] = (CT)(w[c] * inv), a[c] = (CT)(sg / m), bc[c] = (CT)(inv * inv * sgx / m);      \
            mt[c] = (CT)mean[c];                                                                   \
        }                                                                                          \
        musa_parallel_for(j->chunks, 1, bnr_bgx_##SUF, j);                                         \
    }
DEF_BN_ROWS(f32, float, float, float, LD_f32, ST_f32)
DEF_BN_ROWS(f64, double, double, double, LD_f64, ST_f64)
DEF_BN_ROWS(bf16, musa_bf16, float, float, LD_bf16, ST_bf16)

/* Run the rows form of kind (BN_FWD, BN_BWD, BN_APPLY) for x's dtype, with
 * its partials and coefficients allocated here. */
typedef void (*bnr_fn)(norm_job *);
static int bn_rows(norm_job *j, int dt, int kind, const char *op) {
    static const bnr_fn f[3][3] = {{bnr_fwd_f32, bnr_bwd_f32, bnr_apply_f32},
                                   {bnr_fwd_f64, bnr_bwd_f64, bnr_apply_f64},
                                   {bnr_fwd_bf16, bnr_bwd_bf16, bnr_apply_bf16}};
    int64_t M = j->outer, C = j->C;
    j->rows = M / BN_ROW_CHUNKS + 1;
    j->chunks = (M + j->rows - 1) / j->rows;
    size_t bytes = sizeof(double) * (size_t)((2 * j->chunks + 1) * C + 4 * C);
    j->part = malloc(bytes ? bytes : 1);
    if (!j->part)
        return musa_err(MUSA_ERR_NOMEM, "[%s] out of memory for %zu bytes of partial sums", op,
                        bytes);
    j->coef = j->part + (2 * j->chunks + 1) * C; /* 4 C doubles hold 4 C of any CT */
    f[dt == MUSA_DTYPE_FLOAT64 ? 1 : dt == MUSA_DTYPE_BFLOAT16 ? 2 : 0][kind](j);
    free(j->part);
    j->part = NULL;
    return MUSA_OK;
}

static int64_t chan_grain(int64_t per) {
    return per >= 16384 ? 1 : 16384 / (per + 1) + 1;
}

static void nc_s(const musa_kview *x, int64_t *N, int64_t *C, int64_t *S) {
    *N = x->shape[0], *C = x->shape[1], *S = 1;
    for (int d = 2; d < x->ndim; d++) *S *= x->shape[d];
}

/* The loop for x's dtype: bfloat16 inputs arrive as bfloat16 (with float32
 * weights; their outputs, contiguous as CONTIG ops' are, are written
 * directly), others as float32 or float64. */
typedef void (*bn_fn)(void *, int64_t, int64_t);
enum { BN_FWD, BN_BWD, BN_APPLY };
static bn_fn bn_loop(int dt, int kind) {
    static const bn_fn f[3][3] = {{bn_fwd_f32, bn_bwd_f32, bn_apply_f32},
                                  {bn_fwd_f64, bn_bwd_f64, bn_apply_f64},
                                  {bn_fwd_bf16, bn_bwd_bf16, bn_apply_bf16}};
    return f[dt == MUSA_DTYPE_FLOAT64 ? 1 : dt == MUSA_DTYPE_BFLOAT16 ? 2 : 0][kind];
}

int cpu_batch_norm(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                   const void *attrs) {
    MUSA_UNUSED(n_in);
    char *ws = ctx->scratch;
    nn_out o[3];
    bool bf = in[0].dtype == MUSA_DTYPE_BFLOAT16;
    norm_job j = norm_fwd_job(out, in, o, &ws);
    if (bf) j.y = out[0].data, o[0].staged = false;
    j.eps = ((const musa_attrs_norm *)attrs)->eps;
    nc_s(&in[0], &j.outer, &j.C, &j.inner);
    int rc = MUSA_OK;
    if (j.inner == 1 && j.C > 1)
        rc = bn_rows(&j, in[0].dtype, BN_FWD, ctx->op_name);
    else
        musa_parallel_for(j.C, chan_grain(j.outer * j.inner), bn_loop(in[0].dtype, BN_FWD), &j);
    norm_end(o);
    return rc;
}

int cpu_batch_norm_backward(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                            const void *attrs) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    char *ws = ctx->scratch;
    nn_out o[3];
    bool bf = in[1].dtype == MUSA_DTYPE_BFLOAT16;
    norm_job j = norm_bwd_job(out, in, o, &ws);
    if (bf) j.gx = out[0].data, o[0].staged = false;
    nc_s(&in[1], &j.outer, &j.C, &j.inner);
    int rc = MUSA_OK;
    if (j.inner == 1 && j.C > 1)
        rc = bn_rows(&j, in[1].dtype, BN_BWD, ctx->op_name);
    else
        musa_parallel_for(j.C, chan_grain(j.outer * j.inner), bn_loop(in[1].dtype, BN_BWD), &j);
    norm_end(o);
    return rc;
}

/* batch_norm_apply(x, mean, invstd, weight, bias) -> y: the forward's y
 * from its statistics, one pass (remat recomputes y with it). */
int cpu_batch_norm_apply(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                         const void *attrs) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    char *ws = ctx->scratch;
    nn_out y = nn_out_begin(&out[0], &ws);
    bool bf = in[0].dtype == MUSA_DTYPE_BFLOAT16;
    norm_job j = {.x = in[0].data,
                  .mean = in[1].data,
                  .invstd = in[2].data,
                  .w = in[3].data,
                  .b = in[4].data,
                  .y = bf ? out[0].data : y.data};
    if (bf) y.staged = false;
    nc_s(&in[0], &j.outer, &j.C, &j.inner);
    int rc = MUSA_OK;
    if (j.inner == 1 && j.C > 1)
        rc = bn_rows(&j, in[0].dtype, BN_APPLY, ctx->op_name);
    else
        musa_parallel_for(j.C, chan_grain(j.outer * j.inner), bn_loop(in[0].dtype, BN_APPLY), &j);
    nn_out_end(&y);
    return rc;
}

/* ---- layer norm: statistics per row over the last D elements ---- */

/* The forward and layer_norm_apply: T the elements of x, y, weight and
 * bias (loaded with LD into W, float or double; stored with ST, rounding
 * once), W the statistics. float16/bfloat16 rows are read and written as
 * they are; through float32 copies on each side, a bfloat16 (512, 512)
 * layer norm took 2.3x the float32 one. The float arithmetic is the
 * float32 kernel's, so the values are those copies' bit for bit. */

#define DEF_LN_FWD(SUF, T, W, LD, ST)                                                              \
    /* one row: (x - mean) * invstd * w + b, from the rounded statistics */                        \
    static inline void ln_normalize_##SUF(const T *p, T *q, int64_t D, W mu, W iv, const T *w,     \
                                          const T *b) {                                            \
        _Pragma("omp simd") for (int64_t i = 0; i < D; i++) q[i] =                                 \
            ST((LD(p[i]) - mu) * iv * LD(w[i]) + LD(b[i]));                                        \
    }                                                                                              \
    static void ln_fwd_##SUF(void *arg, int64_t r0, int64_t r1) {                                  \
        const norm_job *j = arg;                                                                   \
        const T *w = (const T *)j->w, *b = (const T *)j->b;                                        \
        int64_t D = j->C;                                                                          \
        for (int64_t r = r0; r < r1; r++) {                                                        \
            const T *p = (const T *)j->x + r * D;                                                  \
            /* the statistics in W (float for float32 and the 16-bit floats), two                  \
             * passes (the variance of centred values), each over NN_LANES                         \
             * interleaved partial sums: the same order whatever T's width, so a                   \
             * bfloat16 row gives its float32 widening's statistics */                             \
            W acc[NN_LANES] = {0}, s = 0, ss = 0;                                                  \
            NN_LANES_FOR(D, acc[k_] += LD(p[i]));                                                  \
            for (int l = 0; l < NN_LANES; l++) s += acc[l], acc[l] = 0;                            \
            W mu = D ? s / (W)D : 0;                                                               \
            NN_LANES_FOR(D, W d = LD(p[i]) - mu; acc[k_] += d * d);                                \
            for (int l = 0; l < NN_LANES; l++) ss += acc[l];                                       \
            W iv = (W)(1.0 / sqrt(clamp_var(D ? (double)ss / (double)D : 0) + j->eps));            \
            ln_normalize_##SUF(p, (T *)j->y + r * D, D, mu, iv, w, b);                             \
            ((W *)j->omean)[r] = mu;                                                               \
            ((W *)j->oinvstd)[r] = iv;                                                             \
        }                                                                                          \
    }                                                                                              \
    /* y from the statistics the forward stored: what the forward wrote */                         \
    static void ln_apply_##SUF(void *arg, int64_t r0, int64_t r1) {                                \
        const norm_job *j = arg;                                                                   \
        int64_t D = j->C;                                                                          \
        for (int64_t r = r0; r < r1; r++)                                                          \
            ln_normalize_##SUF((const T *)j->x + r * D, (T *)j->y + r * D, D,                      \
                               ((const W *)j->mean)[r], ((const W *)j->invstd)[r],                 \
                               (const T *)j->w, (const T *)j->b);                                  \
    }
DEF_LN_FWD(f32, float, float, LD_f32, ST_f32)
DEF_LN_FWD(f64, double, double, LD_f64, ST_f64)
DEF_LN_FWD(bf16, musa_bf16, float, LD_bf16, ST_bf16)
DEF_LN_FWD(f16, musa_f16, float, LD_f16, ST_f16)

#define DEF_LN_BWD(SUF, T)                                                                         \
    /* one pass per chunk of rows: gx, plus this chunk's sums of gweight and                       \
     * gbias (in T, in its workspace slot; float64 across chunks) */                               \
    static void ln_bwd_##SUF(void *arg, int64_t k0, int64_t k1) {                                  \
        const norm_job *j = arg;                                                                   \
        const T *w = (const T *)j->w;                                                              \
        int64_t D = j->C, R = j->outer, rows = j->rows;                                            \
        for (int64_t k = k0; k < k1; k++) {                                                        \
            T *aw = (T *)j->part + (size_t)(2 * k * D), *ab = aw + D;                              \
            for (int64_t i = 0; i < 2 * D; i++) aw[i] = 0;                                         \
            int64_t r1 = (k + 1) * rows < R ? (k + 1) * rows : R;                                  \
            for (int64_t r = k * rows; r < r1; r++) {                                              \
                const T *p = (const T *)j->x + r * D, *g = (const T *)j->gy + r * D;               \
                T *q = (T *)j->gx + r * D;                                                         \
                T mu = ((const T *)j->mean)[r], inv = ((const T *)j->invstd)[r];                   \
                T s1 = 0, s2 = 0;                                                                  \
                _Pragma("omp simd reduction(+ : s1, s2)") for (int64_t i = 0; i < D; i++) {        \
                    T gh = g[i] * w[i];                                                            \
                    s1 += gh;                                                                      \
                    s2 += gh * ((p[i] - mu) * inv);                                                \
                }                                                                                  \
                T a = s1 / (T)D, c = s2 / (T)D;                                                    \
                _Pragma("omp simd") for (int64_t i = 0; i < D; i++) {                              \
                    T xh = (p[i] - mu) * inv;                                                      \
                    q[i] = inv * (g[i] * w[i] - a - xh * c);                                       \
                    aw[i] += g[i] * xh;                                                            \
                    ab[i] += g[i];                                                                 \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
DEF_LN_BWD(f32, float)
DEF_LN_BWD(f64, double)

/* The forward (or apply) loop for x's dtype. */
static musa_range_fn ln_loop(musa_dtype dt, bool apply) {
    switch (dt) {
    case MUSA_DTYPE_FLOAT64:
        return apply ? ln_apply_f64 : ln_fwd_f64;
    case MUSA_DTYPE_BFLOAT16:
        return apply ? ln_apply_bf16 : ln_fwd_bf16;
    case MUSA_DTYPE_FLOAT16:
        return apply ? ln_apply_f16 : ln_fwd_f16;
    default:
        return apply ? ln_apply_f32 : ln_fwd_f32;
    }
}

int cpu_layer_norm(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                   const void *attrs) {
    MUSA_UNUSED(n_in);
    const musa_attrs_norm *a = attrs;
    char *ws = ctx->scratch;
    nn_out o[3];
    norm_job j = norm_fwd_job(out, in, o, &ws);
    j.eps = a->eps;
    rows_d(&in[0], a->ndims, &j.outer, &j.C);
    if (musa_is_low_float((musa_dtype)in[0].dtype)) /* y written as it is (see DEF_LN_FWD) */
        j.y = out[0].data, o[0].staged = false;
    musa_parallel_for(j.outer, chan_grain(j.C), ln_loop((musa_dtype)in[0].dtype, false), &j);
    norm_end(o);
    return MUSA_OK;
}

/* layer_norm_apply(x, mean, invstd, weight, bias) -> y: the forward's y
 * from its statistics, one pass (remat recomputes y with it). */
int cpu_layer_norm_apply(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                         const void *attrs) {
    MUSA_UNUSED(n_in);
    char *ws = ctx->scratch;
    nn_out y = nn_out_begin(&out[0], &ws);
    norm_job j = {.x = in[0].data,
                  .mean = in[1].data,
                  .invstd = in[2].data,
                  .w = in[3].data,
                  .b = in[4].data,
                  .y = y.data};
    rows_d(&in[0], ((const musa_attrs_norm *)attrs)->ndims, &j.outer, &j.C);
    if (musa_is_low_float((musa_dtype)in[0].dtype)) j.y = out[0].data, y.staged = false;
    musa_parallel_for(j.outer, chan_grain(j.C), ln_loop((musa_dtype)in[0].dtype, true), &j);
    nn_out_end(&y);
    return MUSA_OK;
}

int cpu_layer_norm_backward(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                            const void *attrs) {
    MUSA_UNUSED(n_in);
    const musa_attrs_norm *a = attrs;
    char *ws = ctx->scratch;
    nn_out o[3];
    norm_job j = norm_bwd_job(out, in, o, &ws);
    rows_d(&in[1], a->ndims, &j.outer, &j.C);
    j.part = (double *)ws;
    j.chunks = ln_chunks(j.outer);
    j.rows = ln_chunk_rows(j.outer);
    bool f64 = in[1].dtype == MUSA_DTYPE_FLOAT64;
    musa_parallel_for(j.chunks, 1, f64 ? ln_bwd_f64 : ln_bwd_f32, &j);
    const float *pf = (const float *)(void *)j.part;
    for (int64_t i = 0; i < j.C; i++) {
        double aw = 0, ab = 0;
        for (int64_t k = 0; k < j.chunks; k++) {
            size_t w = (size_t)(2 * k * j.C + i), b = w + (size_t)j.C;
            aw += f64 ? j.part[w] : pf[w], ab += f64 ? j.part[b] : pf[b];
        }
        if (f64)
            ((double *)o[1].data)[i] = aw, ((double *)o[2].data)[i] = ab;
        else
            ((float *)o[1].data)[i] = (float)aw, ((float *)o[2].data)[i] = (float)ab;
    }
    norm_end(o);
    return MUSA_OK;
}

/* ---- group norm: statistics per (sample, group); a contiguous block ---- */

#define DEF_GN(SUF, T)                                                                             \
    static void gn_fwd_##SUF(void *arg, int64_t k0, int64_t k1) {                                  \
        const norm_job *j = arg;                                                                   \
        int64_t C = j->C, S = j->inner, G = j->groups, Cg = C / G, m = Cg * S;                     \
        for (int64_t k = k0; k < k1; k++) {                                                        \
            int64_t n = k / G, g = k % G;                                                          \
            const T *p = (const T *)j->x + (n * C + g * Cg) * S;                                   \
            T *q = (T *)j->y + (n * C + g * Cg) * S;                                               \
            double s = 0, ss = 0;                                                                  \
            _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < m; i++) s += p[i];        \
            double mean = m ? s / (double)m : 0;                                                   \
            _Pragma("omp simd reduction(+ : ss)") for (int64_t i = 0; i < m; i++) {                \
                double d = p[i] - mean;                                                            \
                ss += d * d;                                                                       \
            }                                                                                      \
            double inv = 1.0 / sqrt(clamp_var(m ? ss / (double)m : 0) + j->eps);                   \
            /* (x - mean) * scale + b, not x * scale + (b - mean * scale): with a                  \
             * tiny eps the shift is huge (a constant group, eps 1e-12: 2e6, where                 \
             * float32's spacing is 0.25) and cancels against x * scale */                         \
            T mt = (T)mean;                                                                        \
            for (int64_t c = 0; c < Cg; c++) {                                                     \
                double w = ((const T *)j->w)[g * Cg + c];                                          \
                T scale = (T)(w * inv), b = ((const T *)j->b)[g * Cg + c];                         \
                for (int64_t i = 0; i < S; i++) q[c * S + i] = (p[c * S + i] - mt) * scale + b;    \
            }                                                                                      \
            ((T *)j->omean)[k] = (T)mean;                                                          \
            ((T *)j->oinvstd)[k] = (T)inv;                                                         \
        }                                                                                          \
    }                                                                                              \
    static void gn_bwd_x_##SUF(void *arg, int64_t k0, int64_t k1) {                                \
        const norm_job *j = arg;                                                                   \
        int64_t C = j->C, S = j->inner, G = j->groups, Cg = C / G, m = Cg * S;                     \
        for (int64_t k = k0; k < k1; k++) {                                                        \
            int64_t n = k / G, g = k % G;                                                          \
            const T *p = (const T *)j->x + (n * C + g * Cg) * S;                                   \
            const T *gy = (const T *)j->gy + (n * C + g * Cg) * S;                                 \
            T *q = (T *)j->gx + (n * C + g * Cg) * S;                                              \
            double mu = ((const T *)j->mean)[k], inv = ((const T *)j->invstd)[k], s1 = 0, s2 = 0;  \
            for (int64_t c = 0; c < Cg; c++) {                                                     \
                double w = ((const T *)j->w)[g * Cg + c];                                          \
                _Pragma("omp simd reduction(+ : s1, s2)") for (int64_t i = 0; i < S; i++) {        \
                    double gh = gy[c * S + i] * w;                                                 \
                    s1 += gh;                                                                      \
                    s2 += gh * (p[c * S + i] - mu) * inv;                                          \
                }                                                                                  \
            }                                                                                      \
            double a = s1 / (double)m, cc = s2 / (double)m;                                        \
            for (int64_t c = 0; c < Cg; c++) {                                                     \
                double w = ((const T *)j->w)[g * Cg + c];                                          \
                for (int64_t i = 0; i < S; i++) {                                                  \
                    double xh = (p[c * S + i] - mu) * inv;                                         \
                    q[c * S + i] = (T)(inv * (gy[c * S + i] * w - a - xh * cc));                   \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void gn_bwd_w_##SUF(void *arg, int64_t c0, int64_t c1) {                                \
        const norm_job *j = arg;                                                                   \
        int64_t N = j->outer, C = j->C, S = j->inner, G = j->groups, Cg = C / G;                   \
        for (int64_t c = c0; c < c1; c++) {                                                        \
            double aw = 0, ab = 0;                                                                 \
            for (int64_t n = 0; n < N; n++) {                                                      \
                int64_t k = n * G + c / Cg;                                                        \
                double mu = ((const T *)j->mean)[k], inv = ((const T *)j->invstd)[k];              \
                const T *p = (const T *)j->x + (n * C + c) * S,                                    \
                        *g = (const T *)j->gy + (n * C + c) * S;                                   \
                _Pragma("omp simd reduction(+ : aw, ab)") for (int64_t i = 0; i < S; i++) {        \
                    aw += g[i] * (p[i] - mu) * inv;                                                \
                    ab += g[i];                                                                    \
                }                                                                                  \
            }                                                                                      \
            ((T *)j->gw)[c] = (T)aw;                                                               \
            ((T *)j->gb)[c] = (T)ab;                                                               \
        }                                                                                          \
    }
DEF_GN(f32, float)
DEF_GN(f64, double)

int cpu_group_norm(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                   const void *attrs) {
    MUSA_UNUSED(n_in);
    const musa_attrs_norm *a = attrs;
    char *ws = ctx->scratch;
    nn_out o[3];
    norm_job j = norm_fwd_job(out, in, o, &ws);
    j.eps = a->eps;
    j.groups = a->groups;
    nc_s(&in[0], &j.outer, &j.C, &j.inner);
    musa_parallel_for(j.outer * j.groups, chan_grain(j.C / j.groups * j.inner),
                      in[0].dtype == MUSA_DTYPE_FLOAT64 ? gn_fwd_f64 : gn_fwd_f32, &j);
    norm_end(o);
    return MUSA_OK;
}

int cpu_group_norm_backward(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                            const void *attrs) {
    MUSA_UNUSED(n_in);
    const musa_attrs_norm *a = attrs;
    char *ws = ctx->scratch;
    nn_out o[3];
    norm_job j = norm_bwd_job(out, in, o, &ws);
    j.groups = a->groups;
    nc_s(&in[1], &j.outer, &j.C, &j.inner);
    bool f64 = in[1].dtype == MUSA_DTYPE_FLOAT64;
    musa_parallel_for(j.outer * j.groups, chan_grain(j.C / j.groups * j.inner),
                      f64 ? gn_bwd_x_f64 : gn_bwd_x_f32, &j);
    musa_parallel_for(j.C, chan_grain(j.outer * j.inner), f64 ? gn_bwd_w_f64 : gn_bwd_w_f32, &j);
    norm_end(o);
    return MUSA_OK;
}
