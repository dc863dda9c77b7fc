/*
 * resample.c - weighted taps along one dim, and their adjoint.
 *
 * x is viewed as (outer, n, inner) around the dim, the result as
 * (outer, m, inner); index and weight are (m, K):
 *
 *   out[o, j, i] = x[o, index[j, 0], i] * weight[j, 0] + ...
 *                  + x[o, index[j, K-1], i] * weight[j, K-1]
 *
 * summed left to right, each product rounded (no fused multiply-add), so a
 * linear interpolation is a * w0 + b * w1 as PyTorch computes it. The
 * backward adds g[o, j, i] * weight[j, k] into row index[j, k] of a zeroed
 * gradient, j and then k ascending. Work splits over (o, block of inner)
 * columns, which no two tasks share, so neither result depends on the
 * thread count. Inputs arrive contiguous in float32 or float64 (inference
 * casts the rest); low-precision outputs are staged and rounded once.
 */
#include "iter.h"
#include "nnutil.h"

#define BLOCK 512 /* inner elements per task: columns of a wide resample split */

typedef struct {
    const char *x;     /* (outer, n, inner): the input, or the gradient */
    const int64_t *ix; /* (m, K) */
    const char *w;     /* (m, K) */
    char *out;         /* (outer, m, inner), or (outer, n, inner) backward */
    int64_t n, m, K, inner, blocks;
} rs_job;

#define DEF_RESAMPLE(T, SUF)                                                                       \
    static void resample_##SUF(void *arg, int64_t t0, int64_t t1) {                                \
        const rs_job *j = arg;                                                                     \
        const T *w = (const T *)j->w;                                                              \
        for (int64_t t = t0; t < t1; t++) {                                                        \
            int64_t o = t / j->blocks, i0 = t % j->blocks * BLOCK;                                 \
            int64_t len = MUSA_MIN(BLOCK, j->inner - i0);                                          \
            const T *x = (const T *)j->x + o * j->n * j->inner + i0;                               \
            T *y = (T *)j->out + o * j->m * j->inner + i0;                                         \
            if (j->inner == 1) { /* the last dim: a gather per tap, two taps inlined */            \
                if (j->K == 2)                                                                     \
                    for (int64_t r = 0; r < j->m; r++)                                             \
                        y[r] = x[j->ix[2 * r]] * w[2 * r] + x[j->ix[2 * r + 1]] * w[2 * r + 1];    \
                else                                                                               \
                    for (int64_t r = 0; r < j->m; r++) {                                           \
                        const int64_t *ix = j->ix + r * j->K;                                      \
                        const T *wr = w + r * j->K;                                                \
                        T acc = x[ix[0]] * wr[0];                                                  \
                        for (int64_t k = 1; k < j->K; k++) acc = acc + x[ix[k]] * wr[k];           \
                        y[r] = acc;                                                                \
                    }                                                                              \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t r = 0; r < j->m; r++, y += j->inner) {                                    \
                const int64_t *ix = j->ix + r * j->K;                                              \
                const T *wr = w + r * j->K;                                                        \
                const T *s = x + ix[0] * j->inner;                                                 \
                T w0 = wr[0];                                                                      \
                for (int64_t i = 0; i < len; i++) y[i] = s[i] * w0;                                \
                for (int64_t k = 1; k < j->K; k++) {                                               \
                    const T *sk = x + ix[k] * j->inner;                                            \
                    T wk = wr[k];                                                                  \
                    for (int64_t i = 0; i < len; i++) y[i] = y[i] + sk[i] * wk;                    \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void resample_bwd_##SUF(void *arg, int64_t t0, int64_t t1) {                            \
        const rs_job *j = arg;                                                                     \
        const T *w = (const T *)j->w;                                                              \
        for (int64_t t = t0; t < t1; t++) {                                                        \
            int64_t o = t / j->blocks, i0 = t % j->blocks * BLOCK;                                 \
            int64_t len = MUSA_MIN(BLOCK, j->inner - i0);                                          \
            const T *g = (const T *)j->x + o * j->m * j->inner + i0;                               \
            T *gx = (T *)j->out + o * j->n * j->inner + i0;                                        \
            for (int64_t r = 0; r < j->n; r++)                                                     \
                for (int64_t i = 0; i < len; i++) gx[r * j->inner + i] = 0;                        \
            if (j->inner == 1) {                                                                   \
                for (int64_t r = 0; r < j->m; r++)                                                 \
                    for (int64_t k = 0; k < j->K; k++)                                             \
                        gx[j->ix[r * j->K + k]] += g[r] * w[r * j->K + k];                         \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t r = 0; r < j->m; r++, g += j->inner) {                                    \
                const int64_t *ix = j->ix + r * j->K;                                              \
                const T *wr = w + r * j->K;                                                        \
                for (int64_t k = 0; k < j->K; k++) {                                               \
                    T *d = gx + ix[k] * j->inner;                                                  \
                    T wk = wr[k];                                                                  \
                    for (int64_t i = 0; i < len; i++) d[i] = d[i] + g[i] * wk;                     \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

DEF_RESAMPLE(float, f32)
DEF_RESAMPLE(double, f64)

static int run(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, const void *attrs,
               bool backward) {
    const musa_attrs_resample *a = attrs;
    int d = (int)a->dim;
    const musa_kview *x = &in[0], *big = backward ? &out[0] : &in[0];
    int64_t m = in[1].shape[0], K = in[1].shape[1], n = big->shape[d];
    const int64_t *ix = (const int64_t *)in[1].data;
    for (int64_t e = 0; e < m * K; e++) /* every index, before anything is written */
        if (ix[e] < 0 || ix[e] >= n)
            return musa_err(MUSA_ERR_INDEX,
                            "[%s] index %lld is out of bounds for a dim of size %lld", ctx->op_name,
                            (long long)ix[e], (long long)n);
    int64_t outer = 1, inner = 1;
    for (int e = 0; e < d; e++) outer *= x->shape[e];
    for (int e = d + 1; e < x->ndim; e++) inner *= x->shape[e];
    char *ws = ctx->scratch;
    nn_out o = nn_out_begin(&out[0], &ws);
    int64_t blocks = inner ? (inner + BLOCK - 1) / BLOCK : 0;
    rs_job j = {x->data, ix, in[2].data, o.data, n, m, K, inner, blocks};
    int64_t per = MUSA_MIN(inner, BLOCK) * MUSA_MAX(m * K, n); /* work of one column */
    bool f64 = x->dtype == MUSA_DTYPE_FLOAT64;
    musa_range_fn fn = backward ? (f64 ? resample_bwd_f64 : resample_bwd_f32)
                                : (f64 ? resample_f64 : resample_f32);
    if (outer > 0 && blocks > 0 && per > 0) /* (else the result is empty) */
        musa_parallel_for(outer * blocks, MUSA_MAX(1, MUSA_GRAIN_CHEAP / per), fn, &j);
    nn_out_end(&o);
    return MUSA_OK;
}

int cpu_resample(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                 const void *attrs) {
    MUSA_UNUSED(n_in);
    return run(ctx, out, in, attrs, false);
}

int cpu_resample_backward(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                          const void *attrs) {
    MUSA_UNUSED(n_in);
    return run(ctx, out, in, attrs, true);
}
