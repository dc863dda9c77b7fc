/*
 * kernels.c - the CPU kernels of the dist_* rows: contiguous views (the
 * rows are CONTIG) handed to the communication layer (comm.c).
 *
 * MUSA_REDUCE_AVG travels as a sum and is divided here, in the tensor's
 * dtype (16-bit floats through float32, rounding once).
 */
#include <string.h>

#include "../backend/kernel.h"
#include "../base/dtype.h"
#include "comm.h"
#include "musa.h"

static size_t view_bytes(const musa_kview *v) {
    return (size_t)musa_kview_numel(v) * musa_dtype_info[v->dtype].size;
}

/* dst = src / the world size (dst may be src): n elements of a floating
 * dtype, one pass */
static void average_into(char *dst, const char *src, int64_t n, int dtype) {
    double d = musa_comm_size();
    switch (dtype) {
    case MUSA_DTYPE_FLOAT32: {
        float *q = (float *)dst, f = (float)d;
        const float *p = (const float *)src;
        for (int64_t i = 0; i < n; i++) q[i] = p[i] / f;
        break;
    }
    case MUSA_DTYPE_FLOAT64: {
        double *q = (double *)dst;
        const double *p = (const double *)src;
        for (int64_t i = 0; i < n; i++) q[i] = p[i] / d;
        break;
    }
    case MUSA_DTYPE_FLOAT16: {
        musa_f16 *q = (musa_f16 *)dst;
        const musa_f16 *p = (const musa_f16 *)src;
        for (int64_t i = 0; i < n; i++) q[i] = (musa_f16)((float)p[i] / (float)d);
        break;
    }
    case MUSA_DTYPE_BFLOAT16: {
        musa_bf16 *q = (musa_bf16 *)dst;
        const musa_bf16 *p = (const musa_bf16 *)src;
        for (int64_t i = 0; i < n; i++) q[i] = musa_f32_to_bf16(musa_bf16_to_f32(p[i]) / (float)d);
        break;
    }
    default:
        break; /* inference refused AVG for other dtypes */
    }
}

static void average(musa_kview *x) {
    average_into(x->data, x->data, musa_kview_numel(x), x->dtype);
}

/* Every rank must pass one dtype and shape: a small all-reduce of each
 * rank's (dtype, ndim, shape) and their negations, with MAX, gives the
 * largest and smallest of each over the ranks; all agree iff both equal
 * this rank's. Every rank sees the same extremes, so all fail together. */
static int check_peers(const char *who, const musa_kview *x) {
    enum { N = 2 + MUSA_MAX_DIMS };
    int64_t sig[2 * N];
    for (int i = 0; i < N; i++) {
        int64_t v = i == 0 ? x->dtype : i == 1 ? x->ndim : i - 2 < x->ndim ? x->shape[i - 2] : -1;
        sig[i] = v, sig[N + i] = -v;
    }
    int64_t mine[N];
    memcpy(mine, sig, sizeof mine);
    int rc = musa_comm_allreduce(who, NULL, sig, 2 * N, MUSA_DTYPE_INT64, MUSA_REDUCE_MAX);
    if (rc) return rc;
    bool same_dtype = sig[0] == mine[0] && -sig[N] == mine[0], same = same_dtype;
    for (int i = 1; i < N; i++) same = same && sig[i] == mine[i] && -sig[N + i] == mine[i];
    if (same) return MUSA_OK;
    char s[128];
    return musa_err(MUSA_ERR_VALUE,
                    "[%s] the ranks passed tensors of different %s: rank %d has %s %s, another "
                    "rank does not (every rank must pass the same dtype and shape)",
                    who, same_dtype ? "shapes" : "dtypes", musa_comm_rank(),
                    musa_dtype_info[x->dtype].name, musa_shape_str(x->ndim, x->shape, s, sizeof s));
}

int cpu_dist_all_reduce(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                        const void *attrs) {
    (void)n_in;
    const musa_attrs_dist *a = attrs;
    int rc = a->check ? check_peers(ctx->op_name, in) : MUSA_OK;
    const void *send = in->data == out->data ? NULL : in->data;
    if (!rc)
        rc = musa_comm_allreduce(ctx->op_name, send, out->data, musa_kview_numel(out), out->dtype,
                                 (int)a->op);
    if (!rc && a->op == MUSA_REDUCE_AVG) average(out);
    return rc;
}

int cpu_dist_broadcast(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                       const void *attrs) {
    (void)n_in;
    const musa_attrs_dist *a = attrs;
    int rc = a->check ? check_peers(ctx->op_name, in) : MUSA_OK;
    size_t bytes = view_bytes(out);
    if (!rc && out->data != in->data && bytes) memcpy(out->data, in->data, bytes);
    if (!rc) rc = musa_comm_broadcast(ctx->op_name, out->data, (int64_t)bytes, (int)a->src);
    return rc;
}

int cpu_dist_all_gather(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                        const void *attrs) {
    (void)n_in;
    const musa_attrs_dist *a = attrs;
    int rc = a->check ? check_peers(ctx->op_name, in) : MUSA_OK;
    if (!rc) rc = musa_comm_allgather(ctx->op_name, in->data, out->data, (int64_t)view_bytes(in));
    return rc;
}

int cpu_dist_reduce_scatter(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                            const void *attrs) {
    (void)n_in;
    const musa_attrs_dist *a = attrs;
    int rc = a->check ? check_peers(ctx->op_name, in) : MUSA_OK;
    if (!rc)
        rc = musa_comm_reduce_scatter(ctx->op_name, in->data, out->data, musa_kview_numel(out),
                                      out->dtype, (int)a->op);
    if (!rc && a->op == MUSA_REDUCE_AVG) average(out);
    return rc;
}

/* Pack the inputs into out, then reduce out in place, in flight. AVG
 * divides as it packs (as PyTorch's DDP does), so the sum is the mean and
 * the wait has nothing left to do. */
int cpu_dist_all_reduce_start(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                              const void *attrs) {
    const musa_attrs_dist *a = attrs;
    char *at = out->data;
    for (int i = 0; i < n_in; i++) {
        size_t b = view_bytes(&in[i]);
        if (a->op == MUSA_REDUCE_AVG)
            average_into(at, in[i].data, musa_kview_numel(&in[i]), in[i].dtype);
        else if (b && at != in[i].data) /* a plan may give out the input's buffer */
            memcpy(at, in[i].data, b);
        at += b;
    }
    int64_t n = musa_kview_numel(out);
    if (!n) return musa_comm_ready(ctx->op_name);
    return musa_comm_start(ctx->op_name, out->data, n, out->dtype, (int)a->op);
}

int cpu_dist_all_reduce_wait(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                             const void *attrs) {
    (void)n_in, (void)attrs;
    int64_t n = musa_kview_numel(in);
    int rc = n ? musa_comm_finish(ctx->op_name, in->data) : musa_comm_ready(ctx->op_name);
    if (!rc && n && out->data != in->data) memcpy(out->data, in->data, view_bytes(in));
    return rc;
}
