/*
 * nnutil.h - helpers for the neural network kernels.
 *
 * Those kernels get contiguous inputs of their compute dtype (float32, or
 * float64 for float64 ops: inference casts float16/bfloat16 inputs to
 * float32). Outputs of another dtype (float16/bfloat16) are computed into a
 * staging area of the workspace and rounded once when copied out.
 */
#ifndef MUSA_CPU_NNUTIL_H
#define MUSA_CPU_NNUTIL_H

#include "../../base/dtype.h"
#include "../../base/threadpool.h"
#include "kernels.h"

static inline int nn_cdt(int dtype) {
    return dtype == MUSA_DTYPE_FLOAT64 ? MUSA_DTYPE_FLOAT64 : MUSA_DTYPE_FLOAT32;
}
static inline size_t nn_es(int cdt) {
    return cdt == MUSA_DTYPE_FLOAT64 ? 8 : 4;
}
/* Workspace sizes saturate at SIZE_MAX (base.h's musa_sat_*). */
static inline size_t nn_align(size_t n) {
    return n > SIZE_MAX - 63 ? SIZE_MAX : (n + 63) & ~(size_t)63;
}
/* count items of es bytes (count < 0 counts as none). */
static inline size_t nn_bytes(int64_t count, size_t es) {
    return count <= 0 ? 0 : musa_sat_mul_size((size_t)count, es);
}
/* a * b items of es bytes. */
static inline size_t nn_bytes2(int64_t a, int64_t b, size_t es) {
    return a <= 0 || b <= 0 ? 0 : musa_sat_mul_size(musa_sat_mul_size((size_t)a, (size_t)b), es);
}

/* Bytes of staging an output needs (0 when it can be written directly). */
static inline size_t nn_stage_bytes(const musa_kview *o) {
    int cdt = nn_cdt(o->dtype);
    if (o->dtype == cdt && musa_kview_contiguous(o)) return 0;
    return nn_align(nn_bytes(musa_kview_numel(o), nn_es(cdt)));
}

typedef struct {
    musa_kview *out;
    void *data; /* where the kernel writes (compute dtype, contiguous) */
    bool staged;
} nn_out;

/* Claim output o: its own memory or `*ws` (advanced past what is used). */
static inline nn_out nn_out_begin(musa_kview *o, char **ws) {
    nn_out r = {o, o->data, false};
    size_t b = nn_stage_bytes(o);
    if (b) {
        r.data = *ws;
        r.staged = true;
        *ws += b;
    }
    return r;
}

/* Copy a staged output into the real one (rounding to its dtype). */
static inline void nn_out_end(nn_out *r) {
    if (!r->staged) return;
    musa_kview s = *r->out;
    s.data = r->data;
    s.dtype = nn_cdt(r->out->dtype);
    musa_contiguous_strides_k(&s);
    musa_cpu_copy(r->out, &s);
}

/* Staging bytes for every output, plus `extra`. */
static inline size_t nn_ws_outputs(const musa_kview *out, int n_out, size_t extra) {
    size_t b = extra;
    for (int j = 0; j < n_out; j++) b = musa_sat_add_size(b, nn_stage_bytes(&out[j]));
    return b;
}

/* Interleaved partial sums: NN_LANES_FOR runs its statement for i < S with
 * k_ = i % NN_LANES, the partial that element i adds into. The loop over
 * the partials vectorises, and a row's sum needs no horizontal reduction
 * per vector: the caller totals the partials once (in order, or by
 * nn_lanes_fold). The norms' statistics and softmax's row sums use it. */
#define NN_LANES             16
#define NN_LANES_FOR(S, ...) NN_LANES_FOR_W(NN_LANES, S, __VA_ARGS__)
/* ... with L partials (a constant: the loop over them vectorises) */
#define NN_LANES_FOR_W(L, S, ...)                                                                  \
    do {                                                                                           \
        int64_t i0_ = 0;                                                                           \
        for (; i0_ + (L) <= (S); i0_ += (L))                                                       \
            _Pragma("omp simd") for (int k_ = 0; k_ < (L); k_++) {                                 \
                int64_t i = i0_ + k_;                                                              \
                __VA_ARGS__;                                                                       \
            }                                                                                      \
        for (int k_ = 0; i0_ + k_ < (S); k_++) {                                                   \
            int64_t i = i0_ + k_;                                                                  \
            __VA_ARGS__;                                                                           \
        }                                                                                          \
    } while (0)

/* The total of NN_LANES partials as a pairwise tree (a[k] += a[k + w] for
 * w = 8, 4, 2, 1): four dependent adds instead of sixteen. Overwrites a. */
static inline double nn_lanes_fold(double *a) {
    _Pragma("omp simd") for (int k = 0; k < 8; k++) a[k] += a[k + 8];
    _Pragma("omp simd") for (int k = 0; k < 4; k++) a[k] += a[k + 4];
    a[0] += a[2], a[1] += a[3];
    return a[0] + a[1];
}

#endif
