/*
 * kernels.h - declarations of every CPU kernel named in the op table, and
 * the copy primitive shared by casts, clones and the dispatcher.
 *
 * The declarations are generated from ops/ops.def (a pure data file; this is
 * the one place the backend reads it) so that each kernel definition is
 * checked against the kernel ABI in backend/kernel.h.
 */
#ifndef MUSA_CPU_KERNELS_H
#define MUSA_CPU_KERNELS_H

#include <stdatomic.h>

#include "../kernel.h"

/* The first out-of-range index (or target) that a parallel loop met. The
 * flag is separate because every int64 value, INT64_MIN included, can be
 * such an index: none can serve as a "no bad index" marker. */
typedef struct musa_bad_index {
    atomic_bool seen;
    atomic_llong value; /* valid once seen */
} musa_bad_index;

static inline void musa_bad_index_init(musa_bad_index *b) {
    atomic_init(&b->seen, false);
    atomic_init(&b->value, 0);
}

/* Note v unless an earlier bad index was noted. */
static inline void musa_bad_index_note(musa_bad_index *b, int64_t v) {
    bool expect = false;
    if (atomic_compare_exchange_strong(&b->seen, &expect, true)) atomic_store(&b->value, v);
}

/* Each kernel, and its loop resolver (musa_loop_resolve_fn), which only the
 * elementwise kernels of unary.c and binary.c define: the declaration is
 * weak, so the address of one that no file defines is NULL. */
#define OP(name, n_in, n_out, attrs, infer, kernel, ws, flags, grad, save, fn, py)                 \
    int kernel(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in_,             \
               const void *attrs_);                                                                \
    __attribute__((weak))                                                                          \
    musa_loop_fn kernel##_loop(const musa_kview *out, const musa_kview *in, const void *attrs_);
#include "../../ops/ops.def"
#undef OP

#define MUSA_WS(name)                                                                              \
    size_t name(const musa_kview *out, int n_out, const musa_kview *in, int n_in, const void *attrs)
MUSA_WS(ws_matmul);
MUSA_WS(ws_sort);
MUSA_WS(ws_linalg_solve);
MUSA_WS(ws_linalg_slogdet);
MUSA_WS(ws_linalg_cholesky);
MUSA_WS(ws_linalg_solve_triangular);
MUSA_WS(ws_linalg_lu_factor);
MUSA_WS(ws_linalg_eigh);
MUSA_WS(ws_linalg_svd);
MUSA_WS(ws_linalg_qr);
MUSA_WS(ws_conv2d);
MUSA_WS(ws_conv2d_bwd_input);
MUSA_WS(ws_conv2d_bwd_weight);
/* Whether a convolution of this kind (MUSA_CONV_FWD, _BWD_DATA, _BWD_WEIGHTS
 * of conv_dnnl.h) runs channels-last on a oneDNN primitive: xs the NHWC
 * activation (x, or the gradient of x for _BWD_DATA), ws the weight, attrs
 * a musa_attrs_conv, dtype float32 or bfloat16 (conv.c; builds and caches
 * the primitive). */
bool musa_cpu_conv_channels_last_ok(int kind, const int64_t *xs, const int64_t *ws,
                                    const void *attrs, int dtype, bool bias);
/* The workspace of such a convolution on oneDNN with attrs as they are (xs
 * in the layout attrs give), or (size_t)-1 when it has no primitive for it;
 * *wino (may be NULL) says whether it is the Winograd one (attrs'
 * winograd, where oneDNN has one). */
size_t musa_cpu_conv_dnnl_workspace(int kind, const int64_t *xs, const int64_t *ws,
                                    const void *attrs, int dtype, bool bias, bool *wino);
MUSA_WS(ws_norm);
MUSA_WS(ws_layer_norm_backward);
MUSA_WS(ws_scaled_dot_product_attention);
MUSA_WS(ws_scaled_dot_product_attention_backward);
MUSA_WS(ws_linear);
MUSA_WS(ws_xent);

/* GEMMs of fewer multiply-adds than this run on one OpenMP thread: below
 * it, the second thread's fork and join cost more than its half of the work
 * saves. Measured with dnnl_sgemm on the 2-core machine: 64x64x128 took 5.9
 * us on one thread and 9.3 us on two, 128x128x128 21.1 and 19.7 us,
 * 128x256x128 42.5 and 27.3 us. float32 ones from 655,360 multiply-adds up
 * split into bands on musa's pool instead (sgemm in matmul.c). Neither
 * choice changes the bits, so eager calls and plans agree whichever they
 * make. */
#define MUSA_SMALL_GEMM_MACS (1 << 21)
/* The fewest rows of C that one dnnl_sgemm call of a cut product may take.
 * A call over fewer than 16 rows of A can run other kernels, whose sums
 * round otherwise: products cut into pieces of 8 to 15 rows differed from
 * one call in 47 of 600 random shapes here, pieces of 16 rows or more in
 * none of 1,300 (both transposes, 1 and 2 threads); column pieces of 8
 * were equal in all 600 tried. Found as 8-row bands of a 33 x 200 x 130
 * linear on 4 threads, and as a fused head's last tile of 2 rows (18 x 64
 * x 4096). Row bands (sgemm in matmul.c) and the tiles of a product heading
 * a fused group (at least 16 rows, passes/fuse.c; the last one takes the
 * rest, plan/lower.c) keep to it, so cutting never changes the bits. */
#define MUSA_GEMM_MIN_ROWS 16
/* Set OpenMP's thread count (oneDNN reads it) for a GEMM of `macs`
 * multiply-adds: one thread below MUSA_SMALL_GEMM_MACS, else every thread
 * this thread may use (matmul.c). Returns the count it had before. */
int musa_cpu_gemm_threads(double macs);

/* Set OpenMP's thread count to n; returns the count it had before. oneDNN
 * fixes a primitive's thread count when it creates it, from this setting:
 * create a primitive under the count it will run with (a primitive created
 * after a small GEMM had left it at 1 ran on one thread for ever after:
 * ResNet-18's 4x4 backward-data convolutions took 2x as long in eager mode
 * as the same convolution in a plan). */
int musa_cpu_omp_threads(int n);

/* Softmax of n contiguous rows of `len` values, in place, by the softmax
 * kernel's own row code; lse[r] gets row r's log-sum-exp (max + log(sum
 * of exps)): -inf for a row of -inf, whose values are NaN as softmax makes
 * them. For fused kernels (attention.c). */
void musa_cpu_softmax_rows_f32(float *x, int64_t n, int64_t len, float *lse);
void musa_cpu_softmax_rows_f64(double *x, int64_t n, int64_t len, double *lse);
/* Whether fused attention can give eager's bits (attrs exact, attention.c)
 * for float32 q (.., Tq, E), k (.., Tk, E), v (.., Tk, Ev): its products
 * then run on attention_mm.c's kernels, which sum like dnnl_sgemm. */
bool musa_cpu_attention_exact_ok(int dtype, int64_t Tq, int64_t Tk, int64_t E, int64_t Ev);
void musa_cpu_softmax_backward_rows_f32(float *gx, const float *g, const float *y, int64_t n,
                                        int64_t len);

/* C = alpha A B + beta C for float32 (oneDNN) or float64 (BLAS), row-major,
 * with transpose flags 'N'/'T'. Uses the threads this thread may use. */
int musa_cpu_gemm(int dtype, char ta, char tb, int64_t M, int64_t N, int64_t K, double alpha,
                  const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C,
                  int64_t ldc);

/* dst[...] = src broadcast to dst's shape, converting dtypes (rounding to
 * nearest even for float16/bfloat16, saturating float->int). Any layouts;
 * dst must not partially overlap src. */
int musa_cpu_copy(const musa_kview *dst, const musa_kview *src);

/* dst += src (src broadcast to dst; same dtype). */
int musa_cpu_add_into(const musa_kview *dst, const musa_kview *src);
/* o[k] += a[k] for k < n, both contiguous of dtype dt, on the calling
 * thread: add's own loop, so the same bits as musa_cpu_add_into. */
void musa_cpu_add_run(musa_dtype dt, void *o, const void *a, int64_t n);
/* Set every element of v to value (converted like musa_cast). */
void musa_cpu_fill(const musa_kview *v, double value);
/* Address of element `linear` (row-major order) of v. */
static inline char *musa_kview_elem(const musa_kview *v, int64_t linear, size_t es) {
    int64_t off = 0;
    for (int d = v->ndim - 1; d >= 0; d--) {
        off += (linear % v->shape[d]) * v->strides[d];
        linear /= v->shape[d];
    }
    return v->data + off * (int64_t)es;
}

/* The regularised incomplete gamma functions and their derivatives, in
 * double (gamma.c): P(a, x), Q(a, x) = 1 - P, dP/dx, dP/da, and dx/da
 * along P(a, x) fixed (the reparameterisation gradient of a Gamma(a)
 * sample x). */
double musa_lgamma_f64(double x); /* log |Gamma(x)|, thread-safe (lgamma_r) */
double musa_igamma_f64(double a, double x);
double musa_igammac_f64(double a, double x);
double musa_igamma_grad_x_f64(double a, double x);
double musa_igamma_grad_a_f64(double a, double x);
double musa_standard_gamma_grad_f64(double a, double x);

/* Bessel functions of orders nu = 0 and 1, in double (bessel.c): I_nu
 * (scaled: exp(-|x|) I_nu), J_nu, Y_nu and K_nu (scaled: exp(x) K_nu). */
double musa_bessel_i_f64(double x, int nu, int scaled);
double musa_bessel_j_f64(double x, int nu);
double musa_bessel_y_f64(double x, int nu);
double musa_bessel_k_f64(double x, int nu, int scaled);
double musa_airy_ai_f64(double x, int deriv); /* Ai(x), or Ai'(x) if deriv */

/* Write fn(ctx, i) for every element i of v (row-major order), converted to
 * v's dtype, in parallel (fill.c). */
typedef double (*musa_value_fn)(const void *ctx, int64_t i);
void musa_cpu_generate(const musa_kview *v, musa_value_fn fn, const void *ctx, int64_t grain);

/* Tell oneDNN (OpenMP) and BLAS how many threads they may use. */
void musa_cpu_set_library_threads(int n);

/* ---- the multi-tensor form of the update kernels (optim.c) ---- */

/* Whether `kernel` (an INPLACE update row's) has a multi-tensor form. */
bool cpu_update_has_multi(musa_kernel_fn kernel);
/* Scratch bytes cpu_update_multi needs for n_rows rows (its prepared rows). */
size_t cpu_update_multi_workspace(int n_rows);
/* Run `kernel`'s update over n_rows rows that share the attributes, as one
 * parallel loop over all their elements. rows[r] is row r's views as the
 * kernel takes them, outputs first: n_in - 2 outputs, then n_in inputs
 * (contiguous, as for the kernel). Rows must not write what another row
 * reads or writes. Results are bitwise those of the kernel run row by row.
 * ctx->scratch holds cpu_update_multi_workspace(n_rows) bytes. Fails
 * (MUSA_ERR_RUNTIME) only for a kernel without this form or no scratch. */
int cpu_update_multi(const musa_kctx *ctx, musa_kernel_fn kernel, int n_rows,
                     musa_kview *const *rows, int n_in, const void *attrs);

#endif
