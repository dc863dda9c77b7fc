/*
 * grad_linalg.c - backward formulas of the LAPACK rows, as PyTorch states
 * them (FunctionsManual.cpp), written with public op functions so that
 * they are differentiable again and run in symbolic mode. They assume what
 * PyTorch's assume: A invertible (solve, slogdet, cholesky, qr), distinct
 * eigenvalues (eigh) and distinct non-zero singular values (svd).
 *
 * A missing output gradient (NULL) counts as zero, except where a formula
 * has a cheaper form without it (svd of S alone).
 */
#include "grad_util.h"

#define T(expr) musa_tmp(&t, (expr))

/* Release the temporaries and check the results: every input that needs a
 * gradient has one, or the formula failed (the last error says why). */
static int finish(const musa_grad_args *a, musa_tensor **gin, musa_temps *t) {
    musa_temps_release(t);
    bool ok = true;
    for (int i = 0; i < a->n_in; i++) ok &= !a->needs[i] || gin[i] != NULL;
    if (ok) return MUSA_OK;
    for (int i = 0; i < a->n_in; i++) musa_tensor_release(gin[i]), gin[i] = NULL;
    return musa_last_error_code() ? musa_last_error_code() : MUSA_ERR_RUNTIME;
}

/* The matrix transpose of the last two dims (a view). */
static musa_tensor *mT(musa_tensor *x) {
    return x ? musa_transpose(x, -2, -1) : NULL;
}

static musa_tensor *mm(musa_tensor *a, musa_tensor *b) {
    return musa_matmul(a, b);
}

/* The n by n identity in x's dtype. */
static musa_tensor *eye_like(const musa_tensor *x, int64_t n) {
    return x ? musa_eye(n, n, (musa_dtype)x->dtype) : NULL;
}

/* diag_embed: v (.., n) as diagonal matrices (.., n, n). */
static musa_tensor *diag_of(musa_tensor *v, musa_tensor *eye) {
    musa_temps t = {0};
    musa_tensor *r = v ? musa_mul(T(musa_unsqueeze(v, v->ndim)), eye) : NULL;
    musa_temps_release(&t);
    return r;
}

/* E_ij = v_j - v_i for v (.., k): (.., k, k), zero on the diagonal. */
static musa_tensor *pairwise_diff(musa_tensor *v) {
    musa_temps t = {0};
    musa_tensor *r =
        v ? musa_sub(T(musa_unsqueeze(v, v->ndim - 1)), T(musa_unsqueeze(v, v->ndim))) : NULL;
    musa_temps_release(&t);
    return r;
}

static musa_tensor *scaled(musa_tensor *x, double s) {
    musa_temps t = {0};
    musa_tensor *r = x ? musa_mul(x, T(musa_scalar(s, (musa_dtype)x->dtype))) : NULL;
    musa_temps_release(&t);
    return r;
}

/* X = solve(A, B): gB = solve(A^T, g), gA = -gB X^T. */
int grad_linalg_solve(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    musa_tensor *g = a->gout[0];
    if (!g) return MUSA_OK;
    musa_tensor *gb = T(musa_linalg_solve_matrices(T(mT(a->in[0])), g));
    if (a->needs[0]) gin[0] = musa_neg(T(mm(gb, T(mT(a->out[0])))));
    if (a->needs[1]) gin[1] = musa_tensor_retain(gb);
    return finish(a, gin, &t);
}

/* X = A^{-1} B (left) or B A^{-1}: gB = A^{-T} g or g A^{-T}, a triangular
 * solve with A^T (the other triangle); gA = -gB X^T or -X^T gB, on A's
 * triangle (off its diagonal when that is taken as ones). */
int grad_linalg_solve_triangular(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    const musa_attrs_trsolve *at = a->attrs;
    musa_tensor *g = a->gout[0], *X = a->out[0];
    if (!g) return MUSA_OK;
    musa_tensor *gb = T(
        musa_linalg_solve_triangular(T(mT(a->in[0])), g, !at->upper, at->left, at->unitriangular));
    if (a->needs[0]) {
        musa_tensor *ga = T(at->left ? mm(gb, T(mT(X))) : mm(T(mT(X)), gb));
        int64_t k = at->unitriangular ? 1 : 0;
        gin[0] = musa_neg(T(at->upper ? musa_triu(ga, k) : musa_tril(ga, -k)));
    }
    if (a->needs[1]) gin[1] = musa_tensor_retain(gb);
    return finish(a, gin, &t);
}

/* Rows r0..r1 and columns c0..c1 of the last two dims (a view). */
static musa_tensor *block(musa_tensor *x, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    musa_temps t = {0};
    musa_tensor *r =
        x ? musa_slice(T(musa_slice(x, x->ndim - 2, r0, r1, 1)), x->ndim - 1, c0, c1, 1) : NULL;
    musa_temps_release(&t);
    return r;
}

/* A = P L U, L (m, k) unit lower and U (k, n) upper packed in LU (m, n),
 * k = min(m, n); gL = tril(gLU, -1), gU = triu(gLU) cut to those shapes.
 * With L1, U1 the leading k by k blocks, L2 = L[k:] (tall), U2 = U[:, k:]
 * (wide) and phi = tril(L1^T gL1, -1) + triu(gU1 U1^T)
 * - tril(gU2 U2^T, -1) - triu(L2^T gL2):
 * gA = P [L1^{-T} phi U1^{-T}, L1^{-T} gU2] (wide) or
 * P [L1^{-T} phi U1^{-T}; gL2 U1^{-T}] (tall); the square case has
 * neither part. (Differentiate A1 = P L1 U1 and the rest, A2 = P L1 U2 or
 * P L2 U1, and collect the terms in dA.) P applies as the one-hot matrix
 * of the permutation the row returns. */
int grad_linalg_lu_factor(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    musa_tensor *g = a->gout[0], *LU = a->out[0], *perm = a->out[3];
    if (!g) return MUSA_OK;
    int64_t m = LU->shape[LU->ndim - 2], n = LU->shape[LU->ndim - 1], k = m < n ? m : n;
    musa_tensor *lu1 = T(block(LU, 0, k, 0, k)), *g1 = T(block(g, 0, k, 0, k));
    musa_tensor *L1 = T(musa_add(T(musa_tril(lu1, -1)), T(eye_like(LU, k))));
    musa_tensor *U1 = T(musa_triu(lu1, 0));
    musa_tensor *phi = T(musa_add(T(musa_tril(T(mm(T(mT(L1)), T(musa_tril(g1, -1)))), -1)),
                                  T(musa_triu(T(mm(T(musa_triu(g1, 0)), T(mT(U1)))), 0))));
    musa_tensor *rest = NULL; /* gU2 (wide) or gL2 (tall) */
    if (m < n) {
        rest = T(block(g, 0, m, m, n));
        phi = T(musa_sub(phi, T(musa_tril(T(mm(rest, T(mT(T(block(LU, 0, m, m, n)))))), -1))));
    } else if (m > n) {
        rest = T(block(g, n, m, 0, n));
        phi = T(musa_sub(phi, T(musa_triu(T(mm(T(mT(T(block(LU, n, m, 0, n)))), rest)), 0))));
    }
    /* L1^{-T} phi U1^{-T}: L1^T is unit upper, and Y U1^T = Z solves on the right */
    musa_tensor *y = T(musa_linalg_solve_triangular(T(mT(lu1)), phi, true, true, true));
    musa_tensor *ga = T(musa_linalg_solve_triangular(T(mT(U1)), y, false, false, false));
    if (m < n) {
        musa_tensor *x2 = T(musa_linalg_solve_triangular(T(mT(lu1)), rest, true, true, true));
        ga = T(musa_cat(2, (musa_tensor *[]){ga, x2}, -1));
    } else if (m > n) {
        musa_tensor *x2 = T(musa_linalg_solve_triangular(T(mT(U1)), rest, false, false, false));
        ga = T(musa_cat(2, (musa_tensor *[]){ga, x2}, -2));
    }
    /* P^T X = X[perm]: the one-hot rows pt[i, j] = (perm[i] == j); gA = pt^T gA' */
    musa_tensor *cols = T(musa_arange(0, (double)m, 1, MUSA_DTYPE_INT64));
    musa_tensor *pt =
        T(musa_cast(T(musa_eq(T(musa_unsqueeze(perm, perm->ndim)), cols)), (musa_dtype)LU->dtype));
    gin[0] = mm(T(mT(pt)), ga);
    return finish(a, gin, &t);
}

/* logabsdet: g A^{-T}, A^{-T} = solve(A^T, I). sign is piecewise constant. */
int grad_linalg_slogdet(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    musa_tensor *g = a->gout[1], *A = a->in[0];
    if (!g) return MUSA_OK;
    musa_tensor *inv_t =
        T(musa_linalg_solve_matrices(T(mT(A)), T(eye_like(A, A->shape[A->ndim - 1]))));
    musa_tensor *gm = T(musa_unsqueeze(T(musa_unsqueeze(g, g->ndim)), g->ndim + 1));
    gin[0] = musa_mul(gm, inv_t);
    return finish(a, gin, &t);
}

/* A = L L^T (Murray 2016, arXiv 1602.07527; PyTorch's cholesky_backward):
 * P = Phi(L^T gL), Phi taking the lower triangle with half the diagonal,
 * symmetrised; gA = L^{-T} P L^{-1}. With upper, U = L^T and gU = gL^T. */
int grad_linalg_cholesky(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    bool upper = ((const musa_attrs_uplo *)a->attrs)->upper;
    musa_tensor *g = a->gout[0], *L = a->out[0];
    if (!g) return MUSA_OK;
    if (upper) L = T(mT(L)), g = T(mT(g));
    musa_tensor *Lt = T(mT(L));
    musa_tensor *p = T(musa_tril(T(mm(Lt, g)), 0));
    p = T(scaled(T(musa_add(p, T(mT(T(musa_tril(p, -1)))))), 0.5));
    musa_tensor *y = T(musa_linalg_solve_triangular(Lt, p, true, true, false)); /* L^{-T} P */
    /* (L^{-T} (L^{-T} P)^T)^T */
    gin[0] = mT(T(musa_linalg_solve_triangular(Lt, T(mT(y)), true, true, false)));
    return finish(a, gin, &t);
}

/* A = V diag(w) V^T: gA = V (diag(gw) + skew(V^T gV) / 2 / E) V^T with
 * E_ij = w_j - w_i (1 on the diagonal, where skew is 0). */
int grad_linalg_eigh(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    musa_tensor *w = a->out[0], *V = a->out[1], *gw = a->gout[0], *gV = a->gout[1];
    if (!gw && !gV) return MUSA_OK;
    musa_tensor *eye = T(eye_like(V, w->shape[w->ndim - 1]));
    musa_tensor *inner = NULL;
    if (gV) {
        musa_tensor *x = T(mm(T(mT(V)), gV));
        musa_tensor *skew = T(scaled(T(musa_sub(x, T(mT(x)))), 0.5));
        inner = T(musa_div(skew, T(musa_add(T(pairwise_diff(w)), eye))));
    }
    if (gw) {
        musa_tensor *d = T(diag_of(gw, eye));
        inner = inner ? T(musa_add(inner, d)) : d;
    }
    gin[0] = mm(T(mm(V, inner)), T(mT(V)));
    return finish(a, gin, &t);
}

/* The core of the SVD formula (PyTorch's svd_backward, real case), with U
 * (.., m, k), S (.., k), Vh (.., k, n) reduced:
 *   gA = U [(skew(U^T gU) S + S skew(Vh gVh^T)) / E + diag(gS)] Vh
 *        + (I - U U^T) gU S^{-1} Vh       (m > n)
 *        + U S^{-1} gVh (I - Vh^T Vh)     (m < n)
 * with E_ij = S_j^2 - S_i^2 (1 on the diagonal). */
static musa_tensor *svd_backward(musa_tensor *gU, musa_tensor *gS, musa_tensor *gVh, musa_tensor *U,
                                 musa_tensor *S, musa_tensor *Vh) {
    musa_temps t = {0};
    int64_t m = U->shape[U->ndim - 2], n = Vh->shape[Vh->ndim - 1], k = S->shape[S->ndim - 1];
    musa_tensor *r = NULL;
    musa_tensor *s_row = T(musa_unsqueeze(S, S->ndim - 1)), *s_col = T(musa_unsqueeze(S, S->ndim));
    if (!gU && !gVh) { /* singular values alone: U diag(gS) Vh, no division by E */
        r = mm(U, T(musa_mul(T(musa_unsqueeze(gS, gS->ndim)), Vh)));
        musa_temps_release(&t);
        return r;
    }
    bool has_gu = gU != NULL, has_gvh = gVh != NULL;
    if (!gU) gU = T(musa_zeros_like(U));
    if (!gVh) gVh = T(musa_zeros_like(Vh));
    musa_tensor *eye = T(eye_like(S, k));
    musa_tensor *uu = T(mm(T(mT(U)), gU)), *vv = T(mm(Vh, T(mT(gVh))));
    musa_tensor *uhgu = T(musa_sub(uu, T(mT(uu)))), *vhgv = T(musa_sub(vv, T(mT(vv))));
    musa_tensor *e = T(pairwise_diff(T(musa_mul(S, S))));
    musa_tensor *num = T(musa_add(T(musa_mul(uhgu, s_row)), T(musa_mul(s_col, vhgv))));
    musa_tensor *core = T(musa_div(num, T(musa_add(e, eye))));
    if (gS) core = T(musa_add(core, T(diag_of(gS, eye))));
    if (m > n && has_gu) { /* [U core + (I - U U^T) gU S^{-1}] Vh */
        musa_tensor *gus = T(musa_div(gU, s_row));
        musa_tensor *x = T(musa_add(T(mm(U, core)), gus));
        x = T(musa_sub(x, T(mm(U, T(mm(T(mT(U)), gus))))));
        r = mm(x, Vh);
    } else if (m < n && has_gvh) { /* U [core Vh + S^{-1} gVh (I - Vh^T Vh)] */
        musa_tensor *sgv = T(musa_div(gVh, s_col));
        musa_tensor *x = T(musa_add(T(mm(core, Vh)), sgv));
        x = T(musa_sub(x, T(mm(T(mm(sgv, T(mT(Vh)))), Vh))));
        r = mm(U, x);
    } else {
        r = mm(T(mm(U, core)), Vh);
    }
    musa_temps_release(&t);
    return r;
}

/* Full U and Vh: only their first k columns (rows) take part (the rest are
 * not unique), as PyTorch narrows them. */
int grad_linalg_svd(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    bool full = ((const musa_attrs_svd *)a->attrs)->full_matrices;
    musa_tensor *U = a->out[0], *S = a->out[1], *Vh = a->out[2];
    musa_tensor *gU = a->gout[0], *gS = a->gout[1], *gVh = a->gout[2];
    if (!gU && !gS && !gVh) return MUSA_OK;
    int64_t k = S->shape[S->ndim - 1];
    if (full) {
        U = T(musa_slice(U, -1, 0, k, 1)), Vh = T(musa_slice(Vh, -2, 0, k, 1));
        if (gU) gU = T(musa_slice(gU, -1, 0, k, 1));
        if (gVh) gVh = T(musa_slice(gVh, -2, 0, k, 1));
    }
    if (!gS) gS = T(musa_zeros_like(S));
    gin[0] = U && Vh && gS ? svd_backward(gU, gS, gVh, U, S, Vh) : NULL;
    return finish(a, gin, &t);
}

/* QR of a square or tall A (m >= n), reduced (PyTorch's earlier
 * linalg_qr_backward): M = R gR^T - gQ^T Q, copied from its lower triangle
 * to the upper; gA = (gQ + Q M) R^{-T}. */
static musa_tensor *qr_backward_tall(musa_tensor *gQ, musa_tensor *gR, musa_tensor *Q,
                                     musa_tensor *R) {
    musa_temps t = {0};
    musa_tensor *m = T(musa_sub(T(mm(R, T(mT(gR)))), T(mm(T(mT(gQ)), Q))));
    m = T(musa_add(T(musa_tril(m, 0)), T(mT(T(musa_tril(m, -1))))));
    musa_tensor *rhs = T(musa_add(gQ, T(mm(Q, m))));
    musa_tensor *r = mT(T(musa_linalg_solve_matrices(R, T(mT(rhs))))); /* rhs R^{-T} */
    musa_temps_release(&t);
    return r;
}

/* m < n: A = [X | Y] with X = Q R1 square and Y = Q R2, R = [R1 | R2]:
 * X's gradient is the square case's with gQ + Y gR2^T, and Y's is Q gR2. */
int grad_linalg_qr(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    int64_t mode = ((const musa_attrs_qr *)a->attrs)->mode;
    musa_tensor *Q = a->out[0], *R = a->out[1], *gQ = a->gout[0], *gR = a->gout[1];
    if (!gQ && !gR) return MUSA_OK;
    if (mode == MUSA_QR_R)
        return musa_err(MUSA_ERR_NOT_IMPLEMENTED,
                        "[linalg_qr] the gradient depends on Q, which mode 'r' does not compute; "
                        "use mode 'reduced' to differentiate through linalg_qr");
    int64_t m = Q->shape[Q->ndim - 2], n = R->shape[R->ndim - 1];
    if (mode == MUSA_QR_COMPLETE && m > n)
        return musa_err(MUSA_ERR_NOT_IMPLEMENTED,
                        "[linalg_qr] the QR decomposition is not differentiable when mode is "
                        "'complete' and m > n (%lld > %lld): Q's last %lld columns are not unique",
                        (long long)m, (long long)n, (long long)(m - n));
    if (!gQ) gQ = T(musa_zeros_like(Q));
    if (!gR) gR = T(musa_zeros_like(R));
    if (m >= n) {
        gin[0] = qr_backward_tall(gQ, gR, Q, R);
        return finish(a, gin, &t);
    }
    musa_tensor *r1 = T(musa_slice(R, -1, 0, m, 1)), *r2 = T(musa_slice(R, -1, m, n, 1));
    musa_tensor *gr1 = T(musa_slice(gR, -1, 0, m, 1)), *gr2 = T(musa_slice(gR, -1, m, n, 1));
    musa_tensor *y = T(mm(Q, r2));
    musa_tensor *gq = T(musa_add(gQ, T(mm(y, T(mT(gr2))))));
    musa_tensor *parts[2] = {T(qr_backward_tall(gq, gr1, Q, r1)), T(mm(Q, gr2))};
    gin[0] = parts[0] && parts[1] ? musa_cat(2, parts, -1) : NULL;
    return finish(a, gin, &t);
}
