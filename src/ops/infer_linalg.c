/*
 * infer_linalg.c - inference for the LAPACK rows: batches of float32 or
 * float64 matrices, square where the factorization needs it, small enough
 * for LAPACK's 32-bit integers. The messages follow PyTorch's wording.
 */
#include "op.h"

/* Whether LAPACK's 32-bit sizes can index an m by n array (lwork too). */
static int lapack_sized(const char *who, const char *what, int64_t m, int64_t n) {
    if (m > INT32_MAX || n > INT32_MAX || (m > 0 && n > INT32_MAX / m))
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] %s needs %lld by %lld arrays, too large for LAPACK's 32-bit sizes",
                        who, what, (long long)m, (long long)n);
    return MUSA_OK;
}

int musa_linalg_check(const char *who, const musa_tensor *x, musa_dtype dt, const char *what,
                      bool square) {
    if (dt != MUSA_DTYPE_FLOAT32 && dt != MUSA_DTYPE_FLOAT64)
        return musa_err(MUSA_ERR_TYPE,
                        "[%s] expected a float32 or float64 tensor (LAPACK's types), got %s", who,
                        musa_dtype_name(dt));
    if (x->ndim < 2)
        return musa_err(MUSA_ERR_VALUE, "[%s] %s must have at least 2 dimensions, got %d", who,
                        what, x->ndim);
    int64_t m = x->shape[x->ndim - 2], n = x->shape[x->ndim - 1];
    if (square && m != n)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] %s must be batches of square matrices, but they are %lld by %lld "
                        "matrices",
                        who, what, (long long)m, (long long)n);
    return lapack_sized(who, what, m, n);
}

static int check_one(const musa_op_info *op, musa_tensor *const *in, bool square) {
    return musa_linalg_check(op->name, in[0], (musa_dtype)in[0]->dtype, "A", square);
}

/* The batch dims of x followed by `k` more sizes. */
static int with_batch(const musa_tensor *x, int k, const int64_t *more, int64_t *shape) {
    int nb = x->ndim > 2 ? x->ndim - 2 : 0; /* callers checked ndim >= 2 */
    for (int i = 0; i < nb; i++) shape[i] = x->shape[i];
    for (int i = 0; i < k; i++) shape[nb + i] = more[i];
    return nb + k;
}

/* A X = B (left) or X A = B: A (.., n, n), B (.., n, k) or (.., k, n) with
 * A's batch dims (the public functions broadcast them); dtypes promote;
 * X is shaped like B. */
static int infer_system(const musa_op_info *op, musa_tensor *const *in, bool left, musa_infer *r) {
    const musa_tensor *a = in[0], *b = in[1];
    musa_dtype t = musa_promote_types((musa_dtype)a->dtype, (musa_dtype)b->dtype);
    int rc = musa_linalg_check(op->name, a, t, "A", true);
    if (rc || (rc = musa_linalg_check(op->name, b, t, "B", false))) return rc;
    int64_t n = a->shape[a->ndim - 1], bn = b->shape[b->ndim - (left ? 2 : 1)];
    bool same_batch = a->ndim == b->ndim && bn == n;
    for (int i = 0; same_batch && i < a->ndim - 2; i++) same_batch = a->shape[i] == b->shape[i];
    if (!same_batch) {
        char sa[128], sb[128];
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] incompatible shapes of A and B for the equation %s: %s and %s",
                        op->name, left ? "A X = B" : "X A = B",
                        musa_shape_str(a->ndim, a->shape, sa, sizeof sa),
                        musa_shape_str(b->ndim, b->shape, sb, sizeof sb));
    }
    r->in_dtype[0] = r->in_dtype[1] = (int8_t)t;
    musa_infer_out(r, 0, t, b->ndim, b->shape);
    return MUSA_OK;
}

int infer_linalg_solve(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                       musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    return infer_system(op, in, true, r);
}

int infer_linalg_solve_triangular(const musa_op_info *op, musa_tensor *const *in, int n_in,
                                  void *attrs, musa_infer *r) {
    MUSA_UNUSED(n_in);
    return infer_system(op, in, ((const musa_attrs_trsolve *)attrs)->left, r);
}

/* lu_factor(A), A (.., m, n): LU (.., m, n), int32 pivots (.., k) with
 * k = min(m, n), int32 info (..) and the int64 permutation (.., m). */
int infer_linalg_lu_factor(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                           musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    int rc = check_one(op, in, false);
    if (rc) return rc;
    const musa_tensor *a = in[0];
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], k = m < n ? m : n;
    int64_t shape[MUSA_MAX_DIMS];
    musa_infer_out(r, 0, (musa_dtype)a->dtype, a->ndim, a->shape);
    musa_infer_out(r, 1, MUSA_DTYPE_INT32, with_batch(a, 1, &k, shape), shape);
    musa_infer_out(r, 2, MUSA_DTYPE_INT32, a->ndim - 2, a->shape);
    musa_infer_out(r, 3, MUSA_DTYPE_INT64, with_batch(a, 1, &m, shape), shape);
    return MUSA_OK;
}

/* slogdet(A): sign and logabsdet, each shaped like A's batch. */
int infer_linalg_slogdet(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                         musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    int rc = check_one(op, in, true);
    if (rc) return rc;
    musa_dtype dt = (musa_dtype)in[0]->dtype;
    musa_infer_out(r, 0, dt, in[0]->ndim - 2, in[0]->shape);
    musa_infer_out(r, 1, dt, in[0]->ndim - 2, in[0]->shape);
    return MUSA_OK;
}

int infer_linalg_cholesky(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                          musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    int rc = check_one(op, in, true);
    if (rc) return rc;
    musa_infer_out(r, 0, (musa_dtype)in[0]->dtype, in[0]->ndim, in[0]->shape);
    return MUSA_OK;
}

/* eigh(A): eigenvalues (.., n) and eigenvectors (.., n, n). */
int infer_linalg_eigh(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                      musa_infer *r) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    int rc = check_one(op, in, true);
    if (rc) return rc;
    const musa_tensor *a = in[0];
    int64_t n = a->shape[a->ndim - 1], shape[MUSA_MAX_DIMS];
    musa_dtype dt = (musa_dtype)a->dtype;
    musa_infer_out(r, 0, dt, with_batch(a, 1, &n, shape), shape);
    musa_infer_out(r, 1, dt, a->ndim, a->shape);
    return MUSA_OK;
}

/* svd(A), A (.., m, n), k = min(m, n): U (.., m, k or m), S (.., k),
 * Vh (.., k or n, n). */
int infer_linalg_svd(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                     musa_infer *r) {
    MUSA_UNUSED(n_in);
    int rc = check_one(op, in, false);
    if (rc) return rc;
    bool full = ((const musa_attrs_svd *)attrs)->full_matrices;
    const musa_tensor *a = in[0];
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], k = m < n ? m : n;
    if (full &&
        ((rc = lapack_sized(op->name, "U", m, m)) || (rc = lapack_sized(op->name, "Vh", n, n))))
        return rc;
    int64_t shape[MUSA_MAX_DIMS];
    musa_dtype dt = (musa_dtype)a->dtype;
    musa_infer_out(r, 0, dt, with_batch(a, 2, (int64_t[]){m, full ? m : k}, shape), shape);
    musa_infer_out(r, 1, dt, with_batch(a, 1, &k, shape), shape);
    musa_infer_out(r, 2, dt, with_batch(a, 2, (int64_t[]){full ? n : k, n}, shape), shape);
    return MUSA_OK;
}

/* qr(A), A (.., m, n), k = min(m, n): reduced Q (.., m, k), R (.., k, n);
 * complete Q (.., m, m), R (.., m, n); r: R only, Q empty (0,). */
int infer_linalg_qr(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                    musa_infer *r) {
    MUSA_UNUSED(n_in);
    int rc = check_one(op, in, false);
    if (rc) return rc;
    int64_t mode = ((const musa_attrs_qr *)attrs)->mode;
    if (mode != MUSA_QR_REDUCED && mode != MUSA_QR_COMPLETE && mode != MUSA_QR_R)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] mode must be %d (reduced), %d (complete) or %d (r), got %lld",
                        op->name, MUSA_QR_REDUCED, MUSA_QR_COMPLETE, MUSA_QR_R, (long long)mode);
    const musa_tensor *a = in[0];
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], k = m < n ? m : n;
    if (mode == MUSA_QR_COMPLETE && (rc = lapack_sized(op->name, "Q", m, m))) return rc;
    int64_t shape[MUSA_MAX_DIMS], none = 0;
    musa_dtype dt = (musa_dtype)a->dtype;
    if (mode == MUSA_QR_R)
        musa_infer_out(r, 0, dt, 1, &none);
    else
        musa_infer_out(r, 0, dt,
                       with_batch(a, 2, (int64_t[]){m, mode == MUSA_QR_COMPLETE ? m : k}, shape),
                       shape);
    musa_infer_out(
        r, 1, dt, with_batch(a, 2, (int64_t[]){mode == MUSA_QR_COMPLETE ? m : k, n}, shape), shape);
    return MUSA_OK;
}
