/*
 * copy.c - strided copy with dtype conversion for every (dst, src) pair:
 * the kernel behind cast, clone, contiguous and copy_.
 */
#include <stdint.h>
#include <string.h>

#include "../../base/threadpool.h"
#include "elem.h"
#include "iter.h"
#include "kernels.h"

#define DEF_COPY(DN, DT, SN, ST)                                                                   \
    static void copy_##DN##_##SN(void *ctx, int64_t n, char **p, const int64_t *s) {               \
        (void)ctx;                                                                                 \
        if (s[0] == (int64_t)sizeof(DT) && s[1] == (int64_t)sizeof(ST)) {                          \
            DT *o = (DT *)p[0];                                                                    \
            const ST *a = (const ST *)p[1];                                                        \
            for (int64_t i = 0; i < n; i++) o[i] = ST_##DN(LD_##SN(a[i]));                         \
        } else if (s[1] == 0) {                                                                    \
            DT v = ST_##DN(LD_##SN(*(const ST *)p[1]));                                            \
            for (int64_t i = 0; i < n; i++) *(DT *)(p[0] + i * s[0]) = v;                          \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                        \
                *(DT *)(p[0] + i * s[0]) = ST_##DN(LD_##SN(*(const ST *)(p[1] + i * s[1])));       \
        }                                                                                          \
    }

#define DEF_COPY_FROM(SN, ST, SC, SE)                                                              \
    DEF_COPY(f32, float, SN, ST)                                                                   \
    DEF_COPY(f64, double, SN, ST)                                                                  \
    DEF_COPY(f16, musa_f16, SN, ST)                                                                \
    DEF_COPY(bf16, musa_bf16, SN, ST)                                                              \
    DEF_COPY(i64, int64_t, SN, ST)                                                                 \
    DEF_COPY(i32, int32_t, SN, ST)                                                                 \
    DEF_COPY(i16, int16_t, SN, ST)                                                                 \
    DEF_COPY(i8, int8_t, SN, ST)                                                                   \
    DEF_COPY(u8, uint8_t, SN, ST)                                                                  \
    DEF_COPY(b, uint8_t, SN, ST)
MUSA_FOR_DTYPES(DEF_COPY_FROM)

/* copy_loops[dst][src] */
static const musa_loop_fn copy_loops[MUSA_DTYPE_COUNT][MUSA_DTYPE_COUNT] = {
#define ROW(DN)                                                                                    \
    {                                                                                              \
        [MUSA_DTYPE_FLOAT32] = copy_##DN##_f32, [MUSA_DTYPE_FLOAT64] = copy_##DN##_f64,            \
        [MUSA_DTYPE_FLOAT16] = copy_##DN##_f16, [MUSA_DTYPE_BFLOAT16] = copy_##DN##_bf16,          \
        [MUSA_DTYPE_INT64] = copy_##DN##_i64, [MUSA_DTYPE_INT32] = copy_##DN##_i32,                \
        [MUSA_DTYPE_INT8] = copy_##DN##_i8, [MUSA_DTYPE_UINT8] = copy_##DN##_u8,                   \
        [MUSA_DTYPE_INT16] = copy_##DN##_i16, [MUSA_DTYPE_BOOL] = copy_##DN##_b,                   \
    }
    [MUSA_DTYPE_FLOAT32] = ROW(f32), [MUSA_DTYPE_FLOAT64] = ROW(f64),
    [MUSA_DTYPE_FLOAT16] = ROW(f16), [MUSA_DTYPE_BFLOAT16] = ROW(bf16),
    [MUSA_DTYPE_INT64] = ROW(i64),   [MUSA_DTYPE_INT32] = ROW(i32),
    [MUSA_DTYPE_INT8] = ROW(i8),     [MUSA_DTYPE_UINT8] = ROW(u8),
    [MUSA_DTYPE_INT16] = ROW(i16),   [MUSA_DTYPE_BOOL] = ROW(b),
#undef ROW
};

/* Rows of one dtype, contiguous in both operands (the iterator's dim 0)
 * but strided between them: a permuted copy such as attention's
 * transpose(1, 2).contiguous(), whose rows are one head's 32 floats. A
 * memcpy per row, walking the outer dims by carries: through the
 * iterator's loop calls, one per 128-byte row, a (8, 64, 4, 32) copy took
 * 28 us. */
typedef struct {
    const musa_iter *it;
    size_t row_bytes;
} rows_job;

static void copy_rows(void *arg, int64_t r0, int64_t r1) {
    const rows_job *j = arg;
    const musa_iter *it = j->it;
    int64_t idx[MUSA_MAX_DIMS] = {0}, rem = r0;
    char *d = it->data[0], *s = it->data[1];
    for (int k = 1; k < it->ndim; k++) {
        idx[k] = rem % it->shape[k], rem /= it->shape[k];
        d += idx[k] * it->strides[k][0], s += idx[k] * it->strides[k][1];
    }
    for (int64_t r = r0; r < r1; r++) {
        memmove(d, s, j->row_bytes);         /* (copy_ may overlap its source) */
        for (int k = 1; k < it->ndim; k++) { /* carry into the next dim */
            d += it->strides[k][0], s += it->strides[k][1];
            if (++idx[k] < it->shape[k]) break;
            d -= it->shape[k] * it->strides[k][0], s -= it->shape[k] * it->strides[k][1];
            idx[k] = 0;
        }
    }
}

/* A transpose: dst contiguous along the iterator's dim 0, src along dim 1.
 * Element by element, each read of src lands on another cache line (a
 * 512 x 512 float32 transpose took 180 us); in TILE x TILE tiles both
 * sides reuse their lines: 70 us (104 us with 32 x 32 tiles, whose 32
 * source rows 2 KB apart fall into two of L1's sets). Tasks are tiles,
 * over the outer dims too. */
#define TILE 16

typedef struct {
    const musa_iter *it;
    int64_t nt0, nt1; /* tiles along dims 0 and 1 */
} tiles_job;

static void copy_tiles(void *arg, int64_t t0, int64_t t1) {
    const tiles_job *j = arg;
    const musa_iter *it = j->it;
    int64_t per = j->nt0 * j->nt1;
    size_t es = (size_t)it->strides[0][0];
    for (int64_t t = t0; t < t1; t++) {
        int64_t o = t / per, i1 = t % per / j->nt0, i0 = t % j->nt0;
        char *d = it->data[0];
        const char *s = it->data[1];
        for (int k = 2; k < it->ndim; k++) {
            int64_t x = o % it->shape[k];
            o /= it->shape[k];
            d += x * it->strides[k][0], s += x * it->strides[k][1];
        }
        int64_t b0 = i0 * TILE, a0 = i1 * TILE;
        int64_t n0 = MUSA_MIN(TILE, it->shape[0] - b0), n1 = MUSA_MIN(TILE, it->shape[1] - a0);
        d += b0 * it->strides[0][0] + a0 * it->strides[1][0];
        s += b0 * it->strides[0][1] + a0 * it->strides[1][1];
        musa_tile_transpose(d, it->strides[1][0], s, it->strides[0][1], n0, n1, (int64_t)es);
    }
}

int musa_cpu_copy(const musa_kview *dst, const musa_kview *src) {
    const musa_kview *ops[2] = {dst, src};
    musa_iter it;
    musa_iter_init(&it, ops, 2);
    int64_t es = (int64_t)musa_dtype_info[dst->dtype].size;
    if (dst->dtype == src->dtype && it.ndim > 1 && it.numel > 0 && it.strides[0][0] == es &&
        it.strides[0][1] == es && it.shape[0] < MUSA_GRAIN_CHEAP) {
        rows_job j = {&it, (size_t)(it.shape[0] * es)};
        int64_t rows = it.numel / it.shape[0];
        musa_parallel_for(rows, MUSA_MAX(1, MUSA_GRAIN_CHEAP / it.shape[0]), copy_rows, &j);
        return MUSA_OK;
    }
    if (dst->dtype == src->dtype && it.ndim > 1 && it.numel > 0 && it.strides[0][0] == es &&
        it.strides[1][1] == es && it.shape[0] >= TILE && it.shape[1] >= TILE &&
        (es == 1 || es == 2 || es == 4 || es == 8)) {
        tiles_job j = {&it, (it.shape[0] + TILE - 1) / TILE, (it.shape[1] + TILE - 1) / TILE};
        int64_t tasks = it.numel / (it.shape[0] * it.shape[1]) * j.nt0 * j.nt1;
        musa_parallel_for(tasks, MUSA_MAX(1, MUSA_GRAIN_CHEAP / (TILE * TILE)), copy_tiles, &j);
        return MUSA_OK;
    }
    musa_iter_run_elementwise(&it, MUSA_GRAIN_CHEAP, copy_loops[dst->dtype][src->dtype], NULL);
    return MUSA_OK;
}

int cpu_cast(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
             const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    return musa_cpu_copy(&out[0], &in[0]);
}

int cpu_none(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
             const void *attrs) {
    MUSA_UNUSED(out), MUSA_UNUSED(in), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    return musa_err(MUSA_ERR_RUNTIME, "[%s] is a view op and has no kernel", ctx->op_name);
}

/* as_strided_scatter: out = in[0] (row-major copy), then the region
 * (shape, strides, offset in out's elements) = in[1], or += in[1] when
 * accumulating (serially, so overlapping positions sum). */
#define DEF_ACC(SUF, T)                                                                            \
    static void acc_##SUF(const musa_kview *region, const musa_kview *src) {                       \
        int64_t idx[MUSA_MAX_DIMS] = {0}, n = musa_kview_numel(region);                            \
        int nd = region->ndim;                                                                     \
        for (int64_t k = 0; k < n; k++) {                                                          \
            int64_t ro = 0, so = 0;                                                                \
            for (int d = 0; d < nd; d++)                                                           \
                ro += idx[d] * region->strides[d], so += idx[d] * src->strides[d];                 \
            T *o = (T *)region->data + ro;                                                         \
            *o = ST_##SUF(LD_##SUF(*o) + LD_##SUF(((const T *)src->data)[so]));                    \
            for (int d = nd - 1; d >= 0; d--) {                                                    \
                if (++idx[d] < region->shape[d]) break;                                            \
                idx[d] = 0;                                                                        \
            }                                                                                      \
        }                                                                                          \
    }
DEF_ACC(f32, float)
DEF_ACC(f64, double)
DEF_ACC(f16, musa_f16)
DEF_ACC(bf16, musa_bf16)

int cpu_as_strided_scatter(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                           const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(n_in);
    const musa_attrs_strided *a = attrs;
    int rc = musa_cpu_copy(&out[0], &in[0]);
    /* An empty region may have any offset (inference checks it only when
     * the region has elements): no pointer is formed from it then. */
    if (rc || musa_kview_empty(&in[1])) return rc;
    musa_kview region = out[0];
    region.ndim = a->shape.n;
    region.data += (size_t)a->offset * musa_dtype_info[out[0].dtype].size;
    for (int i = 0; i < a->shape.n; i++)
        region.shape[i] = a->shape.v[i], region.strides[i] = a->strides.v[i];
    if (!a->accumulate) return musa_cpu_copy(&region, &in[1]);
    switch (out[0].dtype) {
    case MUSA_DTYPE_FLOAT32:
        acc_f32(&region, &in[1]);
        break;
    case MUSA_DTYPE_FLOAT64:
        acc_f64(&region, &in[1]);
        break;
    case MUSA_DTYPE_FLOAT16:
        acc_f16(&region, &in[1]);
        break;
    default:
        acc_bf16(&region, &in[1]);
        break;
    }
    return MUSA_OK;
}
