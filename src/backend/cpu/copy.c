/*
 * copy.c - strided copy with dtype conversion for every (dst, src) pair:
 * the kernel behind cast, clone, contiguous and copy_.
 */
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
        [MUSA_DTYPE_BOOL] = copy_##DN##_b,                                                         \
    }
    [MUSA_DTYPE_FLOAT32] = ROW(f32), [MUSA_DTYPE_FLOAT64] = ROW(f64),
    [MUSA_DTYPE_FLOAT16] = ROW(f16), [MUSA_DTYPE_BFLOAT16] = ROW(bf16),
    [MUSA_DTYPE_INT64] = ROW(i64),   [MUSA_DTYPE_INT32] = ROW(i32),
    [MUSA_DTYPE_INT8] = ROW(i8),     [MUSA_DTYPE_UINT8] = ROW(u8),
    [MUSA_DTYPE_BOOL] = ROW(b),
#undef ROW
};

int musa_cpu_copy(const musa_kview *dst, const musa_kview *src) {
    const musa_kview *ops[2] = {dst, src};
    musa_iter it;
    musa_iter_init(&it, ops, 2);
    musa_iter_run(&it, MUSA_GRAIN_CHEAP, copy_loops[dst->dtype][src->dtype], NULL);
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
