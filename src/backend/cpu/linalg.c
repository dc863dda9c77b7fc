/*
 * linalg.c - the LAPACK kernels of the linear algebra rows: solve, slogdet,
 * lu_factor, cholesky, solve_triangular (BLAS's trsm), eigh, svd and qr, in
 * float32 and float64.
 *
 * OpenBLAS exports the Fortran LAPACK interface: every argument by pointer,
 * matrices column-major, and a hidden length after the arguments for each
 * character argument (gfortran's convention; passing it is always safe).
 * A kernel copies one matrix of the batch at a time into column-major
 * scratch, so any input layout works (transposed, strided, broadcast
 * batches), lets LAPACK factor it there in place, and writes the results
 * to the outputs through their strides. The scratch of one matrix serves
 * the whole batch; the workspace functions size it, asking LAPACK for its
 * optimal work array (lwork = -1) where that depends on its block sizes.
 */
#include <cblas.h> /* blasint: LAPACK's integer in this OpenBLAS build */
#include <math.h>
#include <stdio.h>

#include "elem.h"
#include "kernels.h"

/* ---- the LAPACK routines used (reference LAPACK, as OpenBLAS exports them) ---- */

typedef blasint lp_int;

void sgesv_(const lp_int *n, const lp_int *nrhs, float *a, const lp_int *lda, lp_int *ipiv,
            float *b, const lp_int *ldb, lp_int *info);
void dgesv_(const lp_int *n, const lp_int *nrhs, double *a, const lp_int *lda, lp_int *ipiv,
            double *b, const lp_int *ldb, lp_int *info);
void sgetrf_(const lp_int *m, const lp_int *n, float *a, const lp_int *lda, lp_int *ipiv,
             lp_int *info);
void dgetrf_(const lp_int *m, const lp_int *n, double *a, const lp_int *lda, lp_int *ipiv,
             lp_int *info);
void spotrf_(const char *uplo, const lp_int *n, float *a, const lp_int *lda, lp_int *info,
             size_t uplo_len);
void dpotrf_(const char *uplo, const lp_int *n, double *a, const lp_int *lda, lp_int *info,
             size_t uplo_len);
void ssyevd_(const char *jobz, const char *uplo, const lp_int *n, float *a, const lp_int *lda,
             float *w, float *work, const lp_int *lwork, lp_int *iwork, const lp_int *liwork,
             lp_int *info, size_t jobz_len, size_t uplo_len);
void dsyevd_(const char *jobz, const char *uplo, const lp_int *n, double *a, const lp_int *lda,
             double *w, double *work, const lp_int *lwork, lp_int *iwork, const lp_int *liwork,
             lp_int *info, size_t jobz_len, size_t uplo_len);
void sgesdd_(const char *jobz, const lp_int *m, const lp_int *n, float *a, const lp_int *lda,
             float *s, float *u, const lp_int *ldu, float *vt, const lp_int *ldvt, float *work,
             const lp_int *lwork, lp_int *iwork, lp_int *info, size_t jobz_len);
void dgesdd_(const char *jobz, const lp_int *m, const lp_int *n, double *a, const lp_int *lda,
             double *s, double *u, const lp_int *ldu, double *vt, const lp_int *ldvt, double *work,
             const lp_int *lwork, lp_int *iwork, lp_int *info, size_t jobz_len);
void sgeqrf_(const lp_int *m, const lp_int *n, float *a, const lp_int *lda, float *tau, float *work,
             const lp_int *lwork, lp_int *info);
void dgeqrf_(const lp_int *m, const lp_int *n, double *a, const lp_int *lda, double *tau,
             double *work, const lp_int *lwork, lp_int *info);
void sorgqr_(const lp_int *m, const lp_int *n, const lp_int *k, float *a, const lp_int *lda,
             const float *tau, float *work, const lp_int *lwork, lp_int *info);
void dorgqr_(const lp_int *m, const lp_int *n, const lp_int *k, double *a, const lp_int *lda,
             const double *tau, double *work, const lp_int *lwork, lp_int *info);

/* Each wrapper calls the float32 or float64 routine for dtype dt on
 * scratch arrays of that dtype, and returns LAPACK's info. */

static lp_int lp_gesv(int dt, lp_int n, lp_int nrhs, void *a, lp_int lda, lp_int *ipiv, void *b,
                      lp_int ldb) {
    lp_int info = 0;
    if (dt == MUSA_DTYPE_FLOAT32)
        sgesv_(&n, &nrhs, a, &lda, ipiv, b, &ldb, &info);
    else
        dgesv_(&n, &nrhs, a, &lda, ipiv, b, &ldb, &info);
    return info;
}

static lp_int lp_getrf(int dt, lp_int m, lp_int n, void *a, lp_int lda, lp_int *ipiv) {
    lp_int info = 0;
    if (dt == MUSA_DTYPE_FLOAT32)
        sgetrf_(&m, &n, a, &lda, ipiv, &info);
    else
        dgetrf_(&m, &n, a, &lda, ipiv, &info);
    return info;
}

static lp_int lp_potrf(int dt, char uplo, lp_int n, void *a, lp_int lda) {
    lp_int info = 0;
    if (dt == MUSA_DTYPE_FLOAT32)
        spotrf_(&uplo, &n, a, &lda, &info, 1);
    else
        dpotrf_(&uplo, &n, a, &lda, &info, 1);
    return info;
}

static lp_int lp_syevd(int dt, char uplo, lp_int n, void *a, lp_int lda, void *w, void *work,
                       lp_int lwork, lp_int *iwork, lp_int liwork) {
    lp_int info = 0;
    char jobz = 'V';
    if (dt == MUSA_DTYPE_FLOAT32)
        ssyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, &info, 1, 1);
    else
        dsyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, &info, 1, 1);
    return info;
}

static lp_int lp_gesdd(int dt, char jobz, lp_int m, lp_int n, void *a, lp_int lda, void *s, void *u,
                       lp_int ldu, void *vt, lp_int ldvt, void *work, lp_int lwork, lp_int *iwork) {
    lp_int info = 0;
    if (dt == MUSA_DTYPE_FLOAT32)
        sgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info, 1);
    else
        dgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info, 1);
    return info;
}

static lp_int lp_geqrf(int dt, lp_int m, lp_int n, void *a, lp_int lda, void *tau, void *work,
                       lp_int lwork) {
    lp_int info = 0;
    if (dt == MUSA_DTYPE_FLOAT32)
        sgeqrf_(&m, &n, a, &lda, tau, work, &lwork, &info);
    else
        dgeqrf_(&m, &n, a, &lda, tau, work, &lwork, &info);
    return info;
}

static lp_int lp_orgqr(int dt, lp_int m, lp_int n, lp_int k, void *a, lp_int lda, const void *tau,
                       void *work, lp_int lwork) {
    lp_int info = 0;
    if (dt == MUSA_DTYPE_FLOAT32)
        sorgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, &info);
    else
        dorgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, &info);
    return info;
}

/* The work array size a query (lwork = -1) wrote into work[0]. A float32
 * query answers in a float, which may round the size down: add a margin. */
static int64_t queried(int dt, const double *work) {
    double w = dt == MUSA_DTYPE_FLOAT32 ? (double)*(const float *)work : work[0];
    return (int64_t)w + (int64_t)(w * 1e-6) + 1;
}

/* ---- matrices of a batched view ---- */

/* A view as a batch of items: its last `item_dims` dims (0: scalars,
 * 1: vectors, taken as one column, 2: matrices) and the batch dims before. */
typedef struct {
    musa_kview batch; /* the batch dims; the data pointer is item 0's */
    int64_t rows, cols, rs, cs;
    size_t es;
} items;

static items items_of(const musa_kview *v, int item_dims) {
    items m = {.batch = *v, .rows = 1, .cols = 1};
    int nd = v->ndim;
    if (item_dims >= 1) m.rows = v->shape[nd - item_dims], m.rs = v->strides[nd - item_dims];
    if (item_dims == 2) m.cols = v->shape[nd - 1], m.cs = v->strides[nd - 1];
    m.batch.ndim = nd - item_dims;
    m.es = musa_dtype_info[v->dtype].size;
    return m;
}

static int64_t batch_count(const items *m) {
    return musa_kview_numel(&m->batch);
}

static char *item_at(const items *m, int64_t b) {
    return musa_kview_elem(&m->batch, b, m->es);
}

/* Copy item b into column-major dst (leading dim ld), in the same dtype. */
static void load_cm(void *dst, int64_t ld, const items *m, int64_t b) {
    const char *p = item_at(m, b);
    if (m->es == 8) {
        double *d = dst;
        for (int64_t j = 0; j < m->cols; j++)
            for (int64_t i = 0; i < m->rows; i++)
                d[i + j * ld] = *(const double *)(p + (i * m->rs + j * m->cs) * 8);
    } else {
        float *d = dst;
        for (int64_t j = 0; j < m->cols; j++)
            for (int64_t i = 0; i < m->rows; i++)
                d[i + j * ld] = *(const float *)(p + (i * m->rs + j * m->cs) * 4);
    }
}

/* Which part of a column-major result an output takes; the rest is zero. */
typedef enum { ALL, LOWER, UPPER } part;

/* Write column-major src (leading dim ld) into item b: element (i, j) of
 * the item is src[i + j ld], or zero outside the part. */
static void store_cm(const items *m, int64_t b, const void *src, int64_t ld, part p) {
    char *o = item_at(m, b);
    for (int64_t j = 0; j < m->cols; j++)
        for (int64_t i = 0; i < m->rows; i++) {
            bool keep = p == ALL || (p == LOWER ? i >= j : i <= j);
            char *e = o + (i * m->rs + j * m->cs) * (int64_t)m->es;
            if (m->es == 8)
                *(double *)e = keep ? ((const double *)src)[i + j * ld] : 0.0;
            else
                *(float *)e = keep ? ((const float *)src)[i + j * ld] : 0.0f;
        }
}

/* Set item b to the identity (of its rows and cols). */
static void store_identity(const items *m, int64_t b) {
    char *o = item_at(m, b);
    for (int64_t j = 0; j < m->cols; j++)
        for (int64_t i = 0; i < m->rows; i++) {
            char *e = o + (i * m->rs + j * m->cs) * (int64_t)m->es;
            if (m->es == 8)
                *(double *)e = i == j;
            else
                *(float *)e = i == j;
        }
}

static void store_scalar(const items *m, int64_t b, double v) {
    char *e = item_at(m, b);
    if (m->es == 8)
        *(double *)e = v;
    else
        *(float *)e = (float)v;
}

static double cm_get(int dt, const void *a, int64_t i) {
    return dt == MUSA_DTYPE_FLOAT32 ? (double)((const float *)a)[i] : ((const double *)a)[i];
}

/* Whether the n values at a are all finite. */
static bool all_finite(int dt, const void *a, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(cm_get(dt, a, i))) return false;
    return true;
}

/* The iterative eigen/singular value solvers are refused non-finite input:
 * gesdd loops forever on some matrices with an infinity (the fuzzer found a
 * float32 3 by 3 one), and a NaN could only give NaNs or a failure. */
static int non_finite(const musa_kctx *ctx, const char *at) {
    return musa_err(MUSA_ERR_LINALG,
                    "[%s] the algorithm failed to converge because the input matrix contains "
                    "non-finite values (NaN or inf)%s",
                    ctx->op_name, at);
}

static int64_t max1(int64_t n) {
    return n > 1 ? n : 1;
}

/* Carve `bytes` from the scratch cursor, keeping 64-byte alignment. */
static void *carve(char **cur, size_t bytes) {
    void *p = *cur;
    *cur += (bytes + 63) & ~(size_t)63;
    return p;
}

/* " (batch element 3)" for batched inputs, "" for one matrix: where the
 * failing matrix is. */
static const char *where(const items *m, int64_t b, char *buf, size_t size) {
    if (m->batch.ndim == 0) return "";
    snprintf(buf, size, " (batch element %lld)", (long long)b);
    return buf;
}

static int failed(const musa_kctx *ctx, const char *routine, lp_int info) {
    return musa_err(MUSA_ERR_RUNTIME, "[%s] LAPACK's %s failed (info = %d)", ctx->op_name, routine,
                    (int)info);
}

/* ---- solve: A X = B by LU with partial pivoting (gesv) ---- */

MUSA_WS(ws_linalg_solve) {
    MUSA_UNUSED(out), MUSA_UNUSED(n_out), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    size_t es = musa_dtype_info[in[0].dtype].size;
    int64_t n = in[0].shape[in[0].ndim - 1], k = in[1].shape[in[1].ndim - 1];
    return (size_t)(n * n + n * k) * es + (size_t)n * sizeof(lp_int) + 3 * 64;
}

int cpu_linalg_solve(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                     const void *attrs) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    items A = items_of(&in[0], 2), B = items_of(&in[1], 2), X = items_of(&out[0], 2);
    int dt = in[0].dtype;
    lp_int n = (lp_int)A.rows, k = (lp_int)B.cols, ld = (lp_int)max1(n);
    char *cur = ctx->scratch;
    void *a = carve(&cur, (size_t)(n * n) * A.es), *x = carve(&cur, (size_t)(n * k) * A.es);
    lp_int *ipiv = carve(&cur, (size_t)n * sizeof(lp_int));
    for (int64_t b = 0, nb = batch_count(&X); b < nb; b++) {
        load_cm(a, ld, &A, b);
        load_cm(x, ld, &B, b);
        lp_int info = lp_gesv(dt, n, k, a, ld, ipiv, x, ld);
        char at[48];
        if (info > 0)
            return musa_err(MUSA_ERR_LINALG,
                            "[%s] the matrix A is singular%s: U[%d,%d] of its LU factorization is "
                            "zero, so the system has no unique solution",
                            ctx->op_name, where(&A, b, at, sizeof at), (int)info - 1,
                            (int)info - 1);
        if (info < 0) return failed(ctx, "gesv", info);
        store_cm(&X, b, x, ld, ALL);
    }
    return MUSA_OK;
}

/* ---- slogdet: sign and log |det| from the LU factors (getrf) ---- */

MUSA_WS(ws_linalg_slogdet) {
    MUSA_UNUSED(out), MUSA_UNUSED(n_out), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    size_t es = musa_dtype_info[in[0].dtype].size;
    int64_t n = in[0].shape[in[0].ndim - 1];
    return (size_t)(n * n) * es + (size_t)n * sizeof(lp_int) + 2 * 64;
}

int cpu_linalg_slogdet(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                       const void *attrs) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    items A = items_of(&in[0], 2), S = items_of(&out[0], 0), L = items_of(&out[1], 0);
    int dt = in[0].dtype;
    lp_int n = (lp_int)A.rows, ld = (lp_int)max1(n);
    char *cur = ctx->scratch;
    void *a = carve(&cur, (size_t)(n * n) * A.es);
    lp_int *ipiv = carve(&cur, (size_t)n * sizeof(lp_int));
    for (int64_t b = 0, nb = batch_count(&S); b < nb; b++) {
        double sign = 1, logabs = 0; /* the empty product: det of a 0 by 0 matrix is 1 */
        bool nan_pivot = false;
        if (n > 0) {
            load_cm(a, ld, &A, b);
            lp_int info = lp_getrf(dt, n, n, a, ld, ipiv);
            if (info < 0) return failed(ctx, "getrf", info);
            for (lp_int i = 0; i < n; i++) {
                double u = cm_get(dt, a, (int64_t)i * (ld + 1));
                if (ipiv[i] != i + 1) sign = -sign; /* each row swap flips the sign */
                if (u < 0) sign = -sign;
                nan_pivot |= u != u;
                logabs += log(fabs(u));
            }
            /* as in PyTorch: a NaN pivot has sign 0 (and logabs is NaN); a
             * singular matrix has sign 0 and logabs -inf */
            if (nan_pivot)
                sign = 0;
            else if (info > 0)
                sign = 0, logabs = -INFINITY;
        }
        store_scalar(&S, b, sign);
        store_scalar(&L, b, logabs);
    }
    return MUSA_OK;
}

/* ---- lu_factor: A = P L U with partial pivoting (getrf), any m by n ----
 * Outputs: L and U packed in one m by n matrix (L's unit diagonal not
 * stored), LAPACK's 1-based pivots (k = min(m, n) of them: row i was
 * swapped with row pivots[i] - 1, in order), info (0, or i + 1 when U[i, i]
 * is exactly zero: the factorization is complete, but U is singular), and
 * the permutation those swaps make (A[perm] = L U), for the gradient and
 * for P. */

MUSA_WS(ws_linalg_lu_factor) {
    MUSA_UNUSED(out), MUSA_UNUSED(n_out), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    int64_t m = in[0].shape[in[0].ndim - 2], n = in[0].shape[in[0].ndim - 1];
    return (size_t)(m * n) * musa_dtype_info[in[0].dtype].size +
           (size_t)(m < n ? m : n) * sizeof(lp_int) + 2 * 64;
}

int cpu_linalg_lu_factor(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                         const void *attrs) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    items A = items_of(&in[0], 2), LU = items_of(&out[0], 2), PIV = items_of(&out[1], 1),
          INFO = items_of(&out[2], 0), PERM = items_of(&out[3], 1);
    lp_int m = (lp_int)A.rows, n = (lp_int)A.cols, k = m < n ? m : n, ld = (lp_int)max1(m);
    char *cur = ctx->scratch;
    void *a = carve(&cur, (size_t)m * (size_t)n * A.es);
    lp_int *ipiv = carve(&cur, (size_t)k * sizeof(lp_int));
    for (int64_t b = 0, nb = batch_count(&LU); b < nb; b++) {
        lp_int info = 0;
        if (k > 0) {
            load_cm(a, ld, &A, b);
            info = lp_getrf(in[0].dtype, m, n, a, ld, ipiv);
            if (info < 0) return failed(ctx, "getrf", info);
            store_cm(&LU, b, a, ld, ALL);
        }
        int32_t *piv = (int32_t *)item_at(&PIV, b);
        int64_t *perm = (int64_t *)item_at(&PERM, b);
        for (lp_int i = 0; i < m; i++) perm[i * PERM.rs] = i;
        for (lp_int i = 0; i < k; i++) {
            piv[i * PIV.rs] = (int32_t)ipiv[i];
            int64_t j = ipiv[i] - 1, t = perm[i * PERM.rs];
            perm[i * PERM.rs] = perm[j * PERM.rs], perm[j * PERM.rs] = t;
        }
        *(int32_t *)item_at(&INFO, b) = (int32_t)info;
    }
    return MUSA_OK;
}

/* ---- cholesky: A = L L^T (potrf) ---- */

MUSA_WS(ws_linalg_cholesky) {
    MUSA_UNUSED(out), MUSA_UNUSED(n_out), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    int64_t n = in[0].shape[in[0].ndim - 1];
    return (size_t)(n * n) * musa_dtype_info[in[0].dtype].size;
}

int cpu_linalg_cholesky(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                        const void *attrs) {
    MUSA_UNUSED(n_in);
    bool upper = ((const musa_attrs_uplo *)attrs)->upper;
    items A = items_of(&in[0], 2), L = items_of(&out[0], 2);
    lp_int n = (lp_int)A.rows, ld = (lp_int)max1(n);
    void *a = ctx->scratch;
    for (int64_t b = 0, nb = batch_count(&L); b < nb; b++) {
        load_cm(a, ld, &A, b);
        lp_int info = lp_potrf(in[0].dtype, upper ? 'U' : 'L', n, a, ld);
        char at[48];
        if (info > 0)
            return musa_err(MUSA_ERR_LINALG,
                            "[%s] The factorization could not be completed because the input is "
                            "not positive-definite (the leading minor of order %d is not "
                            "positive-definite)%s",
                            ctx->op_name, (int)info, where(&A, b, at, sizeof at));
        if (info < 0) return failed(ctx, "potrf", info);
        store_cm(&L, b, a, ld, upper ? UPPER : LOWER);
    }
    return MUSA_OK;
}

/* ---- solve_triangular: A X = B or X A = B for triangular A (trsm). No
 * check for a zero on the diagonal: it gives infinities and NaNs, as in
 * PyTorch (and BLAS) ---- */

MUSA_WS(ws_linalg_solve_triangular) {
    MUSA_UNUSED(out), MUSA_UNUSED(n_out), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    size_t es = musa_dtype_info[in[0].dtype].size;
    const musa_kview *b = &in[1];
    int64_t n = in[0].shape[in[0].ndim - 1];
    return (size_t)(n * n + b->shape[b->ndim - 2] * b->shape[b->ndim - 1]) * es + 2 * 64;
}

int cpu_linalg_solve_triangular(const musa_kctx *ctx, musa_kview *out, const musa_kview *in,
                                int n_in, const void *attrs) {
    MUSA_UNUSED(n_in);
    const musa_attrs_trsolve *at = attrs;
    items A = items_of(&in[0], 2), B = items_of(&in[1], 2), X = items_of(&out[0], 2);
    int64_t n = A.rows, lda = max1(n), ldx = max1(X.rows);
    if (n == 0 || X.rows == 0 || X.cols == 0) return MUSA_OK; /* nothing to solve */
    char *cur = ctx->scratch;
    void *a = carve(&cur, (size_t)(n * n) * A.es),
         *x = carve(&cur, (size_t)(X.rows * X.cols) * A.es);
    CBLAS_SIDE side = at->left ? CblasLeft : CblasRight;
    CBLAS_UPLO uplo = at->upper ? CblasUpper : CblasLower;
    CBLAS_DIAG diag = at->unitriangular ? CblasUnit : CblasNonUnit;
    for (int64_t b = 0, nb = batch_count(&X); b < nb; b++) {
        load_cm(a, lda, &A, b);
        load_cm(x, ldx, &B, b);
        if (in[0].dtype == MUSA_DTYPE_FLOAT32)
            cblas_strsm(CblasColMajor, side, uplo, CblasNoTrans, diag, (blasint)X.rows,
                        (blasint)X.cols, 1.0f, a, (blasint)lda, x, (blasint)ldx);
        else
            cblas_dtrsm(CblasColMajor, side, uplo, CblasNoTrans, diag, (blasint)X.rows,
                        (blasint)X.cols, 1.0, a, (blasint)lda, x, (blasint)ldx);
        store_cm(&X, b, x, ldx, ALL);
    }
    return MUSA_OK;
}

/* ---- eigh: eigenvalues (ascending) and eigenvectors of a symmetric
 * matrix from one triangle (syevd, divide and conquer) ---- */

typedef struct {
    int64_t lwork, liwork;
} eigh_sizes;

static eigh_sizes eigh_query(int dt, lp_int n) {
    double work[2] = {0, 0}, dummy = 0;
    lp_int iwork = 0;
    lp_int ld = (lp_int)max1(n);
    lp_syevd(dt, 'L', n, &dummy, ld, &dummy, work, -1, &iwork, -1);
    return (eigh_sizes){queried(dt, work), (int64_t)iwork + 1};
}

MUSA_WS(ws_linalg_eigh) {
    MUSA_UNUSED(out), MUSA_UNUSED(n_out), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    int dt = in[0].dtype;
    size_t es = musa_dtype_info[dt].size;
    int64_t n = in[0].shape[in[0].ndim - 1];
    eigh_sizes q = eigh_query(dt, (lp_int)n);
    return (size_t)(n * n + n + q.lwork) * es + (size_t)q.liwork * sizeof(lp_int) + 4 * 64;
}

int cpu_linalg_eigh(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                    const void *attrs) {
    MUSA_UNUSED(n_in);
    bool upper = ((const musa_attrs_uplo *)attrs)->upper;
    items A = items_of(&in[0], 2), W = items_of(&out[0], 1), V = items_of(&out[1], 2);
    int dt = in[0].dtype;
    lp_int n = (lp_int)A.rows, ld = (lp_int)max1(n);
    eigh_sizes q = eigh_query(dt, n);
    char *cur = ctx->scratch;
    void *a = carve(&cur, (size_t)(n * n) * A.es), *w = carve(&cur, (size_t)n * A.es);
    void *work = carve(&cur, (size_t)q.lwork * A.es);
    lp_int *iwork = carve(&cur, (size_t)q.liwork * sizeof(lp_int));
    for (int64_t b = 0, nb = batch_count(&V); b < nb; b++) {
        load_cm(a, ld, &A, b);
        char at[48];
        if (!all_finite(dt, a, (int64_t)n * n)) return non_finite(ctx, where(&A, b, at, sizeof at));
        lp_int info = lp_syevd(dt, upper ? 'U' : 'L', n, a, ld, w, work, (lp_int)q.lwork, iwork,
                               (lp_int)q.liwork);
        if (info > 0)
            return musa_err(MUSA_ERR_LINALG,
                            "[%s] the algorithm failed to converge%s: the input is ill-conditioned "
                            "or has too many repeated eigenvalues (error code %d)",
                            ctx->op_name, where(&A, b, at, sizeof at), (int)info);
        if (info < 0) return failed(ctx, "syevd", info);
        store_cm(&W, b, w, n, ALL);
        store_cm(&V, b, a, ld, ALL);
    }
    return MUSA_OK;
}

/* ---- svd: A = U diag(S) Vh, reduced or full (gesdd) ---- */

typedef struct {
    lp_int m, n, k, ucols, vrows;
    char jobz;
    int64_t lwork;
} svd_dims;

static svd_dims svd_plan(int dt, const musa_kview *a, bool full) {
    svd_dims d;
    d.m = (lp_int)a->shape[a->ndim - 2], d.n = (lp_int)a->shape[a->ndim - 1];
    d.k = d.m < d.n ? d.m : d.n;
    d.ucols = full ? d.m : d.k, d.vrows = full ? d.n : d.k;
    d.jobz = full ? 'A' : 'S';
    double work[2] = {0, 0}, dummy[2] = {0, 0};
    lp_int iwork = 0;
    lp_gesdd(dt, d.jobz, d.m, d.n, dummy, (lp_int)max1(d.m), dummy, dummy, (lp_int)max1(d.m), dummy,
             (lp_int)max1(d.vrows), work, -1, &iwork);
    d.lwork = queried(dt, work);
    return d;
}

MUSA_WS(ws_linalg_svd) {
    MUSA_UNUSED(out), MUSA_UNUSED(n_out), MUSA_UNUSED(n_in);
    int dt = in[0].dtype;
    size_t es = musa_dtype_info[dt].size;
    svd_dims d = svd_plan(dt, &in[0], ((const musa_attrs_svd *)attrs)->full_matrices);
    int64_t elems =
        (int64_t)d.m * d.n + d.k + (int64_t)d.m * d.ucols + (int64_t)d.vrows * d.n + d.lwork;
    return (size_t)elems * es + (size_t)(8 * d.k) * sizeof(lp_int) + 6 * 64;
}

int cpu_linalg_svd(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                   const void *attrs) {
    MUSA_UNUSED(n_in);
    int dt = in[0].dtype;
    svd_dims d = svd_plan(dt, &in[0], ((const musa_attrs_svd *)attrs)->full_matrices);
    items A = items_of(&in[0], 2), U = items_of(&out[0], 2), S = items_of(&out[1], 1),
          Vh = items_of(&out[2], 2);
    lp_int lda = (lp_int)max1(d.m), ldvt = (lp_int)max1(d.vrows);
    char *cur = ctx->scratch;
    void *a = carve(&cur, (size_t)d.m * (size_t)d.n * A.es);
    void *s = carve(&cur, (size_t)d.k * A.es);
    void *u = carve(&cur, (size_t)d.m * (size_t)d.ucols * A.es);
    void *vt = carve(&cur, (size_t)d.vrows * (size_t)d.n * A.es);
    void *work = carve(&cur, (size_t)d.lwork * A.es);
    lp_int *iwork = carve(&cur, (size_t)(8 * d.k) * sizeof(lp_int));
    for (int64_t b = 0, nb = batch_count(&A); b < nb; b++) {
        if (d.k == 0) { /* nothing to factor; full U and Vh are identities */
            store_identity(&U, b);
            store_identity(&Vh, b);
            continue;
        }
        load_cm(a, lda, &A, b);
        char at[48];
        if (!all_finite(dt, a, (int64_t)d.m * d.n))
            return non_finite(ctx, where(&A, b, at, sizeof at));
        lp_int info = lp_gesdd(dt, d.jobz, d.m, d.n, a, lda, s, u, lda, vt, ldvt, work,
                               (lp_int)d.lwork, iwork);
        if (info > 0)
            return musa_err(MUSA_ERR_LINALG,
                            "[%s] the algorithm failed to converge%s: the input is ill-conditioned "
                            "or has too many repeated singular values (error code %d)",
                            ctx->op_name, where(&A, b, at, sizeof at), (int)info);
        if (info < 0) return failed(ctx, "gesdd", info);
        store_cm(&U, b, u, lda, ALL);
        store_cm(&S, b, s, d.k, ALL);
        store_cm(&Vh, b, vt, ldvt, ALL);
    }
    return MUSA_OK;
}

/* ---- qr: A = Q R by Householder reflections (geqrf, then orgqr) ---- */

typedef struct {
    lp_int m, n, k, qcols; /* qcols: columns of Q (0 in mode 'r') */
    int64_t lwork;
} qr_dims;

static qr_dims qr_plan(int dt, const musa_kview *a, int64_t mode) {
    qr_dims d;
    d.m = (lp_int)a->shape[a->ndim - 2], d.n = (lp_int)a->shape[a->ndim - 1];
    d.k = d.m < d.n ? d.m : d.n;
    d.qcols = mode == MUSA_QR_REDUCED ? d.k : mode == MUSA_QR_COMPLETE ? d.m : 0;
    double work[2] = {0, 0}, dummy[2] = {0, 0};
    lp_int ld = (lp_int)max1(d.m);
    lp_geqrf(dt, d.m, d.n, dummy, ld, dummy, work, -1);
    d.lwork = queried(dt, work);
    if (d.qcols > 0) {
        lp_orgqr(dt, d.m, d.qcols, d.k, dummy, ld, dummy, work, -1);
        int64_t l = queried(dt, work);
        d.lwork = l > d.lwork ? l : d.lwork;
    }
    return d;
}

MUSA_WS(ws_linalg_qr) {
    MUSA_UNUSED(out), MUSA_UNUSED(n_out), MUSA_UNUSED(n_in);
    int dt = in[0].dtype;
    qr_dims d = qr_plan(dt, &in[0], ((const musa_attrs_qr *)attrs)->mode);
    int64_t elems = (int64_t)d.m * d.n + (int64_t)d.m * d.qcols + d.k + d.lwork;
    return (size_t)elems * musa_dtype_info[dt].size + 4 * 64;
}

int cpu_linalg_qr(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                  const void *attrs) {
    MUSA_UNUSED(n_in);
    int dt = in[0].dtype;
    qr_dims d = qr_plan(dt, &in[0], ((const musa_attrs_qr *)attrs)->mode);
    items A = items_of(&in[0], 2), R = items_of(&out[1], 2);
    items Q = d.qcols ? items_of(&out[0], 2) : A; /* mode 'r': Q is (0,), never written */
    lp_int ld = (lp_int)max1(d.m);
    size_t es = A.es;
    char *cur = ctx->scratch;
    char *a = carve(&cur, (size_t)d.m * (size_t)d.n * es);
    char *q = carve(&cur, (size_t)d.m * (size_t)d.qcols * es);
    void *tau = carve(&cur, (size_t)d.k * es);
    void *work = carve(&cur, (size_t)d.lwork * es);
    for (int64_t b = 0, nb = batch_count(&A); b < nb; b++) {
        load_cm(a, ld, &A, b);
        lp_int info = d.k ? lp_geqrf(dt, d.m, d.n, a, ld, tau, work, (lp_int)d.lwork) : 0;
        if (info < 0) return failed(ctx, "geqrf", info);
        store_cm(&R, b, a, ld, UPPER); /* R is the upper triangle; reflectors lie below */
        if (d.qcols == 0) continue;
        /* orgqr builds Q in place from the reflectors in the first k columns */
        memcpy(q, a, (size_t)d.m * (size_t)d.k * es);
        info = lp_orgqr(dt, d.m, d.qcols, d.k, q, ld, tau, work, (lp_int)d.lwork);
        if (info < 0) return failed(ctx, "orgqr", info);
        store_cm(&Q, b, q, ld, ALL);
    }
    return MUSA_OK;
}
