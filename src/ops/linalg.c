/*
 * linalg.c - the public functions of the LAPACK rows (ops.def's "linear
 * algebra" block) and the compositions built on them: inv = solve(A, I),
 * det = sign exp(logabsdet). Compositions check their operands first, so
 * their errors name them rather than the row they call.
 */
#include <stdio.h>

#include "op.h"

#define T(expr) musa_tmp(&t, (expr))

/* Run a one-input row with n outputs into *res[0..n) (all NULL on failure). */
static int run_outs(musa_op_id op, musa_tensor *a, const void *attrs, int n, musa_tensor **res[]) {
    for (int j = 0; j < n; j++)
        if (!res[j])
            return musa_err(MUSA_ERR_VALUE, "[%s] output pointers are NULL", musa_ops[op].name);
    for (int j = 0; j < n; j++) *res[j] = NULL;
    musa_tensor *out[MUSA_MAX_OUTPUTS] = {NULL};
    int rc = musa_dispatch(op, 1, &a, attrs, out);
    for (int j = 0; j < n && !rc; j++) *res[j] = out[j];
    return rc;
}

/* Whether B is a vector right-hand side of A X = B, as PyTorch decides:
 * 1-d, or A's shape without its last dim. */
static bool rhs_is_vector(const musa_tensor *a, const musa_tensor *b) {
    if (b->ndim == 1) return true;
    if (b->ndim != a->ndim - 1) return false;
    return musa_shape_equal(b->ndim, b->shape, b->ndim, a->shape);
}

/* x with its batch dims (all but the last two) broadcast to batch[0..nb). */
static musa_tensor *expand_batch(musa_tensor *x, int nb, const int64_t *batch) {
    int64_t shape[MUSA_MAX_DIMS];
    memcpy(shape, batch, sizeof(int64_t) * (size_t)nb);
    shape[nb] = x->shape[x->ndim - 2], shape[nb + 1] = x->shape[x->ndim - 1];
    if (musa_shape_equal(nb + 2, shape, x->ndim, x->shape)) return musa_tensor_retain(x);
    return musa_expand(x, nb + 2, shape);
}

/* Row op applied to a and b (matrices) with their batch dims broadcast
 * against each other first. */
static musa_tensor *call_batched(musa_op_id op, musa_tensor *a, musa_tensor *b, const void *attrs) {
    if (!a || !b) return NULL;
    musa_temps t = {0};
    musa_tensor *am = a, *bm = b;
    if (a->ndim >= 2 && b->ndim >= 2) { /* else inference reports the shapes */
        int nb = 0;
        int64_t batch[MUSA_MAX_DIMS];
        if (musa_broadcast_shape(musa_ops[op].name, a->ndim - 2, a->shape, b->ndim - 2, b->shape,
                                 &nb, batch))
            return NULL;
        am = T(expand_batch(a, nb, batch));
        bm = T(expand_batch(b, nb, batch));
    }
    musa_tensor *x = am && bm ? musa_call2(op, am, bm, attrs) : NULL;
    musa_temps_release(&t);
    return x;
}

musa_tensor *musa_linalg_solve_matrices(musa_tensor *a, musa_tensor *b) {
    return call_batched(MUSA_OP_linalg_solve, a, b, NULL);
}

musa_tensor *musa_linalg_solve(musa_tensor *a, musa_tensor *b) {
    if (!a || !b) return NULL;
    if (!(a->ndim >= 2 && rhs_is_vector(a, b))) return musa_linalg_solve_matrices(a, b);
    musa_temps t = {0};
    musa_tensor *x = T(musa_linalg_solve_matrices(a, T(musa_unsqueeze(b, b->ndim))));
    int64_t last = x ? x->ndim - 1 : 0;
    musa_tensor *r = x ? musa_squeeze(x, 1, &last) : NULL;
    musa_temps_release(&t);
    return r;
}

int musa_linalg_lu_factor(musa_tensor *a, musa_tensor **lu, musa_tensor **pivots,
                          musa_tensor **info, musa_tensor **perm) {
    musa_tensor *p = NULL;
    int rc = run_outs(MUSA_OP_linalg_lu_factor, a, NULL, 4,
                      (musa_tensor * *[]){lu, pivots, info, perm ? perm : &p});
    musa_tensor_release(p);
    return rc;
}

int musa_linalg_lu(musa_tensor *a, musa_tensor **p, musa_tensor **l, musa_tensor **u) {
    if (!p || !l || !u) return musa_err(MUSA_ERR_VALUE, "[linalg_lu] output pointers are NULL");
    *p = *l = *u = NULL;
    musa_tensor *lu = NULL, *piv = NULL, *info = NULL, *perm = NULL;
    int rc = musa_linalg_lu_factor(a, &lu, &piv, &info, &perm);
    if (rc) return rc;
    musa_temps t = {0};
    int nd = lu->ndim;
    int64_t m = lu->shape[nd - 2], n = lu->shape[nd - 1], k = m < n ? m : n;
    musa_dtype dt = (musa_dtype)lu->dtype;
    /* L: the strict lower part of LU's first k columns, ones on the
     * diagonal; U: the upper part of its first k rows */
    musa_tensor *l0 = T(musa_slice(lu, nd - 1, 0, k, 1));
    *l = musa_add(T(musa_tril(l0, -1)), T(musa_eye(m, k, dt)));
    *u = musa_triu(T(musa_slice(lu, nd - 2, 0, k, 1)), 0);
    /* P with A = P L U: P[j, i] = (perm[i] == j) */
    musa_tensor *cols = T(musa_arange(0, (double)m, 1, MUSA_DTYPE_INT64));
    musa_tensor *pt = T(musa_cast(T(musa_eq(T(musa_unsqueeze(perm, perm->ndim)), cols)), dt));
    *p = musa_contiguous(T(musa_transpose(pt, -2, -1)));
    musa_temps_release(&t);
    musa_tensor_release(lu), musa_tensor_release(piv), musa_tensor_release(info),
        musa_tensor_release(perm);
    if (*p && *l && *u) return MUSA_OK;
    musa_tensor_release(*p), musa_tensor_release(*l), musa_tensor_release(*u);
    *p = *l = *u = NULL;
    return musa_last_error_code() ? musa_last_error_code() : MUSA_ERR_RUNTIME;
}

musa_tensor *musa_linalg_solve_triangular(musa_tensor *a, musa_tensor *b, bool upper, bool left,
                                          bool unitriangular) {
    musa_attrs_trsolve at;
    musa_attrs_init(MUSA_ATTRS_trsolve, &at);
    at.upper = upper, at.left = left, at.unitriangular = unitriangular;
    return call_batched(MUSA_OP_linalg_solve_triangular, a, b, &at);
}

int musa_linalg_slogdet(musa_tensor *a, musa_tensor **sign, musa_tensor **logabsdet) {
    return run_outs(MUSA_OP_linalg_slogdet, a, NULL, 2, (musa_tensor * *[]){sign, logabsdet});
}

musa_tensor *musa_linalg_cholesky(musa_tensor *a, bool upper) {
    musa_attrs_uplo at;
    musa_attrs_init(MUSA_ATTRS_uplo, &at);
    at.upper = upper;
    return musa_call1(MUSA_OP_linalg_cholesky, a, &at);
}

int musa_linalg_eigh(musa_tensor *a, bool upper, musa_tensor **eigenvalues,
                     musa_tensor **eigenvectors) {
    musa_attrs_uplo at;
    musa_attrs_init(MUSA_ATTRS_uplo, &at);
    at.upper = upper;
    return run_outs(MUSA_OP_linalg_eigh, a, &at, 2, (musa_tensor * *[]){eigenvalues, eigenvectors});
}

int musa_linalg_svd(musa_tensor *a, bool full_matrices, musa_tensor **u, musa_tensor **s,
                    musa_tensor **vh) {
    musa_attrs_svd at;
    musa_attrs_init(MUSA_ATTRS_svd, &at);
    at.full_matrices = full_matrices;
    return run_outs(MUSA_OP_linalg_svd, a, &at, 3, (musa_tensor * *[]){u, s, vh});
}

int musa_linalg_qr(musa_tensor *a, musa_qr_mode mode, musa_tensor **q, musa_tensor **r) {
    musa_attrs_qr at;
    musa_attrs_init(MUSA_ATTRS_qr, &at);
    at.mode = mode;
    return run_outs(MUSA_OP_linalg_qr, a, &at, 2, (musa_tensor * *[]){q, r});
}

/* The last error, raised by row `row` inside composition `who`, under
 * who's name: "[linalg_solve] the matrix A is singular" from inv reads
 * "[linalg_inv] the matrix A is singular". */
static void rename_error(const char *row, const char *who) {
    const char *msg = musa_last_error();
    size_t n = strlen(row);
    if (msg[0] != '[' || strncmp(msg + 1, row, n) || msg[n + 1] != ']') return;
    char rest[1024];
    snprintf(rest, sizeof rest, "%s", msg + n + 2);
    musa_err(musa_last_error_code(), "[%s]%s", who, rest);
}

musa_tensor *musa_linalg_inv(musa_tensor *a) {
    if (!a || musa_linalg_check("linalg_inv", a, (musa_dtype)a->dtype, "A", true)) return NULL;
    musa_temps t = {0};
    int64_t n = a->shape[a->ndim - 1];
    musa_tensor *r = musa_linalg_solve_matrices(a, T(musa_eye(n, n, (musa_dtype)a->dtype)));
    if (!r) rename_error("linalg_solve", "linalg_inv");
    musa_temps_release(&t);
    return r;
}

musa_tensor *musa_linalg_det(musa_tensor *a) {
    if (!a || musa_linalg_check("linalg_det", a, (musa_dtype)a->dtype, "A", true)) return NULL;
    musa_temps t = {0};
    musa_tensor *sign = NULL, *logabs = NULL;
    musa_tensor *r = NULL;
    if (!musa_linalg_slogdet(a, &sign, &logabs)) {
        T(sign), T(logabs);
        r = musa_mul(sign, T(musa_exp(logabs)));
    }
    musa_temps_release(&t);
    return r;
}
