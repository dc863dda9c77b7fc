/*
 * linalg_lapack.c - the LAPACK rows (solve, slogdet, cholesky, eigh, svd,
 * qr) checked by what their results must satisfy, computed here with the
 * test's own loops (A X = B, L L^T = A, A V = V diag(w), U diag(S) Vh = A,
 * orthonormal columns, triangles), on batched, transposed and strided
 * inputs in float32 and float64; plus known values, empty matrices and
 * the errors (singular, not positive-definite, dtypes, shapes).
 */
#include "../util.h"

/* Batches of random matrices with `shift` added to the diagonal (well
 * conditioned for shift > 0), float64 values in row-major order. */
static double *rand_mats(int64_t batch, int64_t m, int64_t n, double shift) {
    double *v = malloc(sizeof(double) * (size_t)(batch * m * n + 1));
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                v[(b * m + i) * n + j] = 2 * urand() - 1 + (i == j ? shift : 0);
    return v;
}

/* A tensor holding v (row-major, `shape`), laid out as asked: contiguous,
 * a transposed view (last two dims), or a strided view (every other row). */
static musa_tensor *tensor_of(musa_dtype dt, int nd, const int64_t *shape, const double *v,
                              layout lay) {
    int64_t n = numel_of(nd, shape), m = shape[nd - 2], c = shape[nd - 1];
    int64_t nb = n ? n / (m * c) : 0; /* matrices */
    if (lay == L_CONTIG) return from_list(dt, nd, shape, v);
    int64_t s[4];
    memcpy(s, shape, sizeof(int64_t) * (size_t)nd);
    double *w = calloc((size_t)(2 * n + 1), sizeof(double));
    musa_tensor *base, *r;
    if (lay == L_TRANSPOSED) {
        s[nd - 2] = c, s[nd - 1] = m;
        for (int64_t b = 0; b < nb; b++)
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < c; j++) w[(b * c + j) * m + i] = v[(b * m + i) * c + j];
        base = from_list(dt, nd, s, w);
        r = musa_transpose(base, -2, -1);
    } else { /* rows 0, 2, 4, ... of a tensor with twice the rows */
        s[nd - 2] = 2 * m;
        for (int64_t b = 0; b < nb; b++)
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < c; j++)
                    w[(b * 2 * m + 2 * i) * c + j] = v[(b * m + i) * c + j];
        base = from_list(dt, nd, s, w);
        r = musa_slice(base, nd - 2, 0, 2 * m, 2);
    }
    musa_tensor_release(base);
    free(w);
    return r;
}

/* c (batch, m, n) = a (batch, m, k) b (batch, k, n), with a or b read
 * transposed (their stored shapes (k, m) / (n, k)) when asked. */
static void bmm(const double *a, const double *b, double *c, int64_t batch, int64_t m, int64_t k,
                int64_t n, bool ta, bool tb) {
    for (int64_t z = 0; z < batch; z++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t p = 0; p < k; p++) {
                    double x = ta ? a[(z * k + p) * m + i] : a[(z * m + i) * k + p];
                    double y = tb ? b[(z * n + j) * k + p] : b[(z * k + p) * n + j];
                    s += x * y;
                }
                c[(z * m + i) * n + j] = s;
            }
}

/* Worst |got - want| over n values. */
static double max_diff(const double *got, const double *want, int64_t n) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs(got[i] - want[i]));
    return d;
}

/* Whether q (batch, m, k) has orthonormal columns. */
static double ortho_err(const double *q, int64_t batch, int64_t m, int64_t k) {
    double *g = malloc(sizeof(double) * (size_t)(batch * k * k + 1)), e = 0;
    bmm(q, q, g, batch, k, m, k, true, false);
    for (int64_t z = 0; z < batch; z++)
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < k; j++) e = fmax(e, fabs(g[(z * k + i) * k + j] - (i == j)));
    free(g);
    return e;
}

static double tol_of(musa_dtype dt) {
    return dt == MUSA_DTYPE_FLOAT32 ? 2e-4 : 1e-11;
}

static const musa_dtype LA_DTYPES[2] = {MUSA_DTYPE_FLOAT32, MUSA_DTYPE_FLOAT64};

/* ---- solve ---- */

TEST(op_linalg_solve) {
    for (int d = 0; d < 2; d++)
        for (int lay = 0; lay < L_COUNT; lay++) {
            musa_dtype dt = LA_DTYPES[d];
            double *av = rand_mats(3, 4, 4, 4), *bv = rand_mats(3, 4, 2, 0);
            musa_tensor *a = tensor_of(dt, 3, S(3, 4, 4), av, (layout)lay);
            musa_tensor *b = tensor_of(dt, 3, S(3, 4, 2), bv, (layout)(L_COUNT - 1 - lay));
            musa_tensor *x = musa_linalg_solve(a, b);
            CHECK_MSG(x, "solve %s: %s", musa_dtype_name(dt), musa_last_error());
            CHECK_SHAPE(x, 3, 3, 4, 2);
            CHECK(musa_tensor_dtype(x) == dt);
            double *xv = values(x), ax[24];
            bmm(av, xv, ax, 3, 4, 4, 2, false, false);
            double e = max_diff(ax, bv, 24);
            CHECK_MSG(e < 10 * tol_of(dt), "solve %s layout %d: |A X - B| = %g",
                      musa_dtype_name(dt), lay, e);
            free(av), free(bv), free(xv);
            release_all(3, a, b, x);
        }
    /* a vector right-hand side, and a batch of A broadcast against one B */
    double av[4] = {2, 1, 1, 3}, bv[2] = {3, 5};
    musa_tensor *a = from_list(MUSA_DTYPE_FLOAT64, 2, S(2, 2), av);
    musa_tensor *b = from_list(MUSA_DTYPE_FLOAT64, 1, S(2), bv);
    musa_tensor *x = musa_linalg_solve(a, b);
    CHECK_SHAPE(x, 1, 2);
    CHECK(near("solve vector", x, (double[]){0.8, 1.4}, 2, 1));
    musa_tensor *a3 = musa_expand(a, 3, S(4, 2, 2)), *b2 = musa_unsqueeze(b, 1);
    musa_tensor *x3 = musa_linalg_solve(a3, b2);
    CHECK_SHAPE(x3, 3, 4, 2, 1);
    /* empty: no unknowns, and no batch */
    musa_tensor *e0 = musa_zeros(2, S(0, 0), MUSA_DTYPE_FLOAT64),
                *e1 = musa_zeros(2, S(0, 3), MUSA_DTYPE_FLOAT64);
    musa_tensor *xe = musa_linalg_solve(e0, e1);
    CHECK_SHAPE(xe, 2, 0, 3);
    musa_tensor *eb = musa_zeros(3, S(0, 2, 2), MUSA_DTYPE_FLOAT32),
                *ebb = musa_zeros(3, S(0, 2, 1), MUSA_DTYPE_FLOAT32);
    musa_tensor *xeb = musa_linalg_solve(eb, ebb);
    CHECK_SHAPE(xeb, 3, 0, 2, 1);
    /* errors */
    double sv[9] = {1, 2, 3, 2, 4, 6, 1, 0, 1}; /* row 2 = 2 row 1 */
    musa_tensor *sing = from_list(MUSA_DTYPE_FLOAT64, 2, S(3, 3), sv),
                *rhs = musa_ones(2, S(3, 1), MUSA_DTYPE_FLOAT64);
    CHECK_ERR(FAILS(musa_linalg_solve(sing, rhs)), MUSA_ERR_LINALG,
              "[linalg_solve] the matrix A is singular");
    musa_tensor *i3 = musa_eye(3, 3, MUSA_DTYPE_FLOAT64);
    musa_tensor *sb = musa_stack(2, (musa_tensor *[]){i3, sing}, 0);
    CHECK_ERR(FAILS(musa_linalg_solve(sb, rhs)), MUSA_ERR_LINALG, "(batch element 1)");
    musa_tensor *rect = musa_zeros(2, S(2, 3), MUSA_DTYPE_FLOAT64);
    CHECK_ERR(FAILS(musa_linalg_solve(rect, rhs)), MUSA_ERR_VALUE,
              "[linalg_solve] A must be batches of square matrices, but they are 2 by 3 matrices");
    musa_tensor *r4 = musa_ones(2, S(4, 1), MUSA_DTYPE_FLOAT64);
    CHECK_ERR(FAILS(musa_linalg_solve(sing, r4)), MUSA_ERR_VALUE,
              "incompatible shapes of A and B for the equation A X = B: (3, 3) and (4, 1)");
    musa_tensor *ia = musa_ones(2, S(2, 2), MUSA_DTYPE_INT64);
    CHECK_ERR(FAILS(musa_linalg_solve(ia, ia)), MUSA_ERR_TYPE,
              "[linalg_solve] expected a float32 or float64 tensor (LAPACK's types), got int64");
    musa_tensor *one = musa_ones(1, S(3), MUSA_DTYPE_FLOAT64);
    CHECK_ERR(FAILS(musa_linalg_solve(one, one)), MUSA_ERR_VALUE,
              "A must have at least 2 dimensions, got 1");
    /* inv names itself */
    CHECK_ERR(FAILS(musa_linalg_inv(sing)), MUSA_ERR_LINALG,
              "[linalg_inv] the matrix A is singular");
    CHECK_ERR(FAILS(musa_linalg_inv(rect)), MUSA_ERR_VALUE,
              "[linalg_inv] A must be batches of square");
    release_all(18, a, b, x, a3, b2, x3, e0, e1, xe, eb, ebb, xeb, sing, rhs, sb, rect, r4, ia);
    release_all(2, one, i3);
}

TEST(linalg_inv_and_det) {
    double av[9] = {2, -1, 0, -1, 2, -1, 0, -1, 2};
    musa_tensor *a = from_list(MUSA_DTYPE_FLOAT64, 2, S(3, 3), av);
    musa_tensor *i = musa_linalg_inv(a), *d = musa_linalg_det(a);
    CHECK(near("inv", i, (double[]){0.75, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.75}, 9, 1));
    CHECK(near("det", d, (double[]){4}, 1, 1));
    /* a batch of n matrices of n by n: I is not taken for a batch of vectors */
    musa_tensor *a3 = musa_expand(a, 3, S(3, 3, 3)), *i3 = musa_linalg_inv(a3);
    CHECK_SHAPE(i3, 3, 3, 3, 3);
    CHECK(near("batched inv", i3, (double[]){0.75, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.75,
                                             0.75, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.75,
                                             0.75, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.75},
               27, 1));
    release_all(2, a3, i3);
    musa_tensor *e = musa_zeros(3, S(2, 0, 0), MUSA_DTYPE_FLOAT32), *de = musa_linalg_det(e);
    CHECK(near("det of 0 by 0", de, (double[]){1, 1}, 2, 1));
    release_all(5, a, i, d, e, de);
}

/* ---- slogdet ---- */

/* det of a 3 by 3 matrix by cofactors */
static double det3(const double *m) {
    return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
           m[2] * (m[3] * m[7] - m[4] * m[6]);
}

TEST(op_linalg_slogdet) {
    for (int d = 0; d < 2; d++)
        for (int lay = 0; lay < L_COUNT; lay++) {
            musa_dtype dt = LA_DTYPES[d];
            double *av = rand_mats(4, 3, 3, 0.3);
            musa_tensor *a = tensor_of(dt, 3, S(4, 3, 3), av, (layout)lay), *s = NULL, *l = NULL;
            CHECK_OK(musa_linalg_slogdet(a, &s, &l));
            CHECK_SHAPE(s, 1, 4);
            double sw[4], lw[4];
            for (int b = 0; b < 4; b++) {
                double v = det3(av + 9 * b);
                sw[b] = v > 0 ? 1 : -1, lw[b] = log(fabs(v));
            }
            CHECK(near("slogdet sign", s, sw, 4, 1));
            CHECK(near("slogdet logabsdet", l, lw, 4, 10));
            free(av);
            release_all(3, a, s, l);
        }
    /* a row swap: det -1; singular: (0, -inf); 0 by 0: (1, 0) */
    double pv[8] = {0, 1, 1, 0, 1, 2, 2, 4};
    musa_tensor *p = from_list(MUSA_DTYPE_FLOAT64, 3, S(2, 2, 2), pv), *s = NULL, *l = NULL;
    CHECK_OK(musa_linalg_slogdet(p, &s, &l));
    CHECK(near("sign", s, (double[]){-1, 0}, 2, 1));
    double *lv = values(l);
    CHECK_MSG(fabs(lv[0]) < 1e-15 && isinf(lv[1]) && lv[1] < 0, "logabsdet %g %g", lv[0], lv[1]);
    free(lv);
    musa_tensor *e = musa_zeros(2, S(0, 0), MUSA_DTYPE_FLOAT64), *se = NULL, *le = NULL;
    CHECK_OK(musa_linalg_slogdet(e, &se, &le));
    CHECK_SHAPE(se, 0);
    CHECK(near("empty sign", se, (double[]){1}, 1, 1) &&
          near("empty log", le, (double[]){0}, 1, 1));
    musa_tensor *r = musa_zeros(2, S(2, 3), MUSA_DTYPE_FLOAT64), *x = NULL, *y = NULL;
    CHECK_ERR(musa_linalg_slogdet(r, &x, &y) == MUSA_OK, MUSA_ERR_VALUE,
              "[linalg_slogdet] A must be batches of square");
    CHECK(!x && !y);
    musa_tensor *h = musa_zeros(2, S(2, 2), MUSA_DTYPE_FLOAT16);
    CHECK_ERR(musa_linalg_slogdet(h, &x, &y) == MUSA_OK, MUSA_ERR_TYPE, "got float16");
    CHECK_ERR(musa_linalg_slogdet(p, NULL, &y) == MUSA_OK, MUSA_ERR_VALUE,
              "output pointers are NULL");
    release_all(8, p, s, l, e, se, le, r, h);
}

/* ---- cholesky ---- */

/* SPD batches: M M^T + n I from random M. */
static double *spd_mats(int64_t batch, int64_t n) {
    double *m = rand_mats(batch, n, n, 0), *a = malloc(sizeof(double) * (size_t)(batch * n * n));
    bmm(m, m, a, batch, n, n, n, false, true);
    for (int64_t z = 0; z < batch; z++)
        for (int64_t i = 0; i < n; i++) a[(z * n + i) * n + i] += (double)n;
    free(m);
    return a;
}

TEST(op_linalg_cholesky) {
    for (int d = 0; d < 2; d++)
        for (int lay = 0; lay < L_COUNT; lay++)
            for (int upper = 0; upper < 2; upper++) {
                musa_dtype dt = LA_DTYPES[d];
                double *av = spd_mats(2, 4);
                musa_tensor *a = tensor_of(dt, 3, S(2, 4, 4), av, (layout)lay);
                musa_tensor *l = musa_linalg_cholesky(a, upper);
                CHECK_MSG(l, "cholesky: %s", musa_last_error());
                double *lv = values(l), llt[32];
                for (int z = 0; z < 2; z++)
                    for (int i = 0; i < 4; i++)
                        for (int j = 0; j < 4; j++) {
                            bool zero_part = upper ? i > j : i < j;
                            CHECK_MSG(!zero_part || lv[z * 16 + i * 4 + j] == 0, "triangle");
                            CHECK_MSG(zero_part || upper || i != j || lv[z * 16 + i * 5] > 0,
                                      "diag");
                        }
                bmm(lv, lv, llt, 2, 4, 4, 4, upper, !upper); /* L L^T or U^T U */
                double e = max_diff(llt, av, 32);
                CHECK_MSG(e < 20 * tol_of(dt), "cholesky %s upper %d: |L L^T - A| = %g",
                          musa_dtype_name(dt), upper, e);
                free(av), free(lv);
                release_all(2, a, l);
            }
    /* only one triangle is read */
    double av[4] = {4, 99, 2, 5}, bv[4] = {4, 2, -99, 5};
    musa_tensor *a = from_list(MUSA_DTYPE_FLOAT64, 2, S(2, 2), av),
                *b = from_list(MUSA_DTYPE_FLOAT64, 2, S(2, 2), bv);
    musa_tensor *l = musa_linalg_cholesky(a, false), *u = musa_linalg_cholesky(b, true);
    CHECK(near("lower", l, (double[]){2, 0, 1, 2}, 4, 1));
    CHECK(near("upper", u, (double[]){2, 1, 0, 2}, 4, 1));
    /* not positive-definite: the failing minor's order, and where */
    double nv[9] = {1, 0, 0, 0, -1, 0, 0, 0, 1};
    musa_tensor *np = from_list(MUSA_DTYPE_FLOAT64, 2, S(3, 3), nv);
    CHECK_ERR(FAILS(musa_linalg_cholesky(np, false)), MUSA_ERR_LINALG,
              "[linalg_cholesky] The factorization could not be completed because the input is not "
              "positive-definite (the leading minor of order 2 is not positive-definite)");
    musa_tensor *i3 = musa_eye(3, 3, MUSA_DTYPE_FLOAT64);
    musa_tensor *bat = musa_stack(2, (musa_tensor *[]){i3, np}, 0);
    CHECK_ERR(FAILS(musa_linalg_cholesky(bat, false)), MUSA_ERR_LINALG, "(batch element 1)");
    musa_tensor *r = musa_zeros(2, S(3, 2), MUSA_DTYPE_FLOAT32),
                *i = musa_ones(2, S(2, 2), MUSA_DTYPE_INT32);
    CHECK_ERR(FAILS(musa_linalg_cholesky(r, false)), MUSA_ERR_VALUE, "3 by 2 matrices");
    CHECK_ERR(FAILS(musa_linalg_cholesky(i, false)), MUSA_ERR_TYPE, "got int32");
    musa_tensor *e = musa_zeros(3, S(2, 0, 0), MUSA_DTYPE_FLOAT64),
                *le = musa_linalg_cholesky(e, false);
    CHECK_SHAPE(le, 3, 2, 0, 0);
    release_all(11, a, b, l, u, np, bat, r, i, e, le, i3);
}

/* ---- lu_factor ---- */

TEST(op_linalg_lu_factor) {
    /* A[perm] = L U for square, wide and tall matrices in every layout */
    const int64_t shapes[3][2] = {{4, 4}, {3, 5}, {5, 3}};
    for (int d = 0; d < 2; d++)
        for (int lay = 0; lay < L_COUNT; lay++)
            for (int sh = 0; sh < 3; sh++) {
                musa_dtype dt = LA_DTYPES[d];
                int64_t m = shapes[sh][0], n = shapes[sh][1], k = m < n ? m : n;
                double *av = rand_mats(2, m, n, 0);
                musa_tensor *a = tensor_of(dt, 3, S(2, m, n), av, (layout)lay);
                musa_tensor *lu = NULL, *piv = NULL, *info = NULL, *perm = NULL;
                CHECK_OK(musa_linalg_lu_factor(a, &lu, &piv, &info, &perm));
                CHECK_SHAPE(lu, 3, 2, m, n);
                CHECK_SHAPE(piv, 2, 2, k);
                CHECK_SHAPE(info, 1, 2);
                CHECK_SHAPE(perm, 2, 2, m);
                CHECK(musa_tensor_dtype(piv) == MUSA_DTYPE_INT32 &&
                      musa_tensor_dtype(perm) == MUSA_DTYPE_INT64);
                double *luv = values(lu), *pv = values(perm), *iv = values(info), e = 0;
                for (int64_t z = 0; z < 2; z++) {
                    CHECK(iv[z] == 0);
                    for (int64_t i = 0; i < m; i++)
                        for (int64_t j = 0; j < n; j++) {
                            double s = 0; /* (L U)[i, j] */
                            for (int64_t p = 0; p < k; p++) {
                                double l = p < i ? luv[(z * m + i) * n + p] : p == i ? 1 : 0;
                                double u = p <= j ? luv[(z * m + p) * n + j] : 0;
                                s += l * u;
                            }
                            int64_t src = (int64_t)pv[z * m + i];
                            e = fmax(e, fabs(s - av[(z * m + src) * n + j]));
                        }
                }
                CHECK_MSG(e < 10 * tol_of(dt), "lu %s %lldx%lld layout %d: |L U - A[perm]| = %g",
                          musa_dtype_name(dt), (long long)m, (long long)n, lay, e);
                free(av), free(luv), free(pv), free(iv);
                release_all(5, a, lu, piv, info, perm);
            }
    /* known pivots and a singular U: info, and the factorization still done */
    double sv[4] = {1, 2, 3, 6};
    musa_tensor *s = from_list(MUSA_DTYPE_FLOAT64, 2, S(2, 2), sv);
    musa_tensor *lu = NULL, *piv = NULL, *info = NULL;
    CHECK_OK(musa_linalg_lu_factor(s, &lu, &piv, &info, NULL));
    CHECK(near("lu", lu, (double[]){3, 6, 1.0 / 3, 0}, 4, 1));
    CHECK(near("pivots", piv, (double[]){2, 2}, 2, 0));
    CHECK(near("info", info, (double[]){2}, 1, 0));
    musa_tensor *p = NULL, *l = NULL, *u = NULL;
    CHECK_OK(musa_linalg_lu(s, &p, &l, &u));
    CHECK(near("P", p, (double[]){0, 1, 1, 0}, 4, 0));
    CHECK(near("L", l, (double[]){1, 0, 1.0 / 3, 1}, 4, 1));
    /* empty, errors */
    musa_tensor *e = musa_zeros(3, S(2, 0, 3), MUSA_DTYPE_FLOAT32), *elu = NULL, *ep = NULL,
                *ei = NULL;
    CHECK_OK(musa_linalg_lu_factor(e, &elu, &ep, &ei, NULL));
    CHECK_SHAPE(elu, 3, 2, 0, 3);
    CHECK_SHAPE(ep, 2, 2, 0);
    musa_tensor *i = musa_ones(2, S(2, 2), MUSA_DTYPE_INT32), *x = NULL;
    CHECK_ERR(musa_linalg_lu_factor(i, &x, &x, &x, NULL) == MUSA_OK, MUSA_ERR_TYPE, "got int32");
    CHECK_ERR(musa_linalg_lu_factor(s, NULL, &x, &x, NULL) == MUSA_OK, MUSA_ERR_VALUE, "NULL");
    release_all(12, s, lu, piv, info, p, l, u, e, elu, ep, ei, i);
}

/* ---- solve_triangular ---- */

TEST(op_linalg_solve_triangular) {
    /* A holds values everywhere: only the triangle asked for (and the
     * diagonal unless unitriangular) may be read */
    for (int d = 0; d < 2; d++)
        for (int lay = 0; lay < L_COUNT; lay++)
            for (int mode = 0; mode < 8; mode++) {
                bool upper = mode & 1, left = mode & 2, unit = mode & 4;
                musa_dtype dt = LA_DTYPES[d];
                double *av = rand_mats(2, 4, 4, 4),
                       *bv = rand_mats(2, left ? 4 : 3, left ? 3 : 4, 0);
                double tv[32], tx[24];
                for (int z = 0; z < 2; z++)
                    for (int i = 0; i < 4; i++)
                        for (int j = 0; j < 4; j++) {
                            bool in = upper ? i <= j : i >= j;
                            tv[z * 16 + i * 4 + j] = i == j && unit ? 1
                                                     : in           ? av[z * 16 + i * 4 + j]
                                                                    : 0;
                        }
                musa_tensor *a = tensor_of(dt, 3, S(2, 4, 4), av, (layout)lay);
                musa_tensor *b = tensor_of(dt, 3, left ? S(2, 4, 3) : S(2, 3, 4), bv,
                                           (layout)(L_COUNT - 1 - lay));
                musa_tensor *x = musa_linalg_solve_triangular(a, b, upper, left, unit);
                CHECK_MSG(x, "solve_triangular %s: %s", musa_dtype_name(dt), musa_last_error());
                double *xv = values(x);
                if (left)
                    bmm(tv, xv, tx, 2, 4, 4, 3, false, false); /* T X */
                else
                    bmm(xv, tv, tx, 2, 3, 4, 4, false, false); /* X T */
                double e = max_diff(tx, bv, 24);
                CHECK_MSG(e < 10 * tol_of(dt),
                          "solve_triangular %s layout %d mode %d: |T X - B| = %g",
                          musa_dtype_name(dt), lay, mode, e);
                free(av), free(bv), free(xv);
                release_all(3, a, b, x);
            }
    /* known values; a batch of B against one A; empty */
    double av[4] = {2, 0, 1, 4}, bv[2] = {2, 9};
    musa_tensor *a = from_list(MUSA_DTYPE_FLOAT64, 2, S(2, 2), av);
    musa_tensor *b = from_list(MUSA_DTYPE_FLOAT64, 2, S(2, 1), bv);
    musa_tensor *x = musa_linalg_solve_triangular(a, b, false, true, false);
    CHECK(near("lower", x, (double[]){1, 2}, 2, 1));
    musa_tensor *b3 = musa_expand(b, 3, S(5, 2, 1));
    musa_tensor *x3 = musa_linalg_solve_triangular(a, b3, false, true, false);
    CHECK_SHAPE(x3, 3, 5, 2, 1);
    musa_tensor *e0 = musa_zeros(2, S(0, 0), MUSA_DTYPE_FLOAT32),
                *e1 = musa_zeros(2, S(0, 3), MUSA_DTYPE_FLOAT32);
    musa_tensor *xe = musa_linalg_solve_triangular(e0, e1, true, true, false);
    CHECK_SHAPE(xe, 2, 0, 3);
    /* errors: shapes for the side asked, dtypes, NULL */
    CHECK_ERR(FAILS(musa_linalg_solve_triangular(a, b, true, false, false)), MUSA_ERR_VALUE,
              "[linalg_solve_triangular] incompatible shapes of A and B for the equation X A = B: "
              "(2, 2) and (2, 1)");
    musa_tensor *ia = musa_ones(2, S(2, 2), MUSA_DTYPE_INT32);
    CHECK_ERR(FAILS(musa_linalg_solve_triangular(ia, ia, true, true, false)), MUSA_ERR_TYPE,
              "got int32");
    CHECK(musa_linalg_solve_triangular(NULL, b, true, true, false) == NULL);
    release_all(8, a, b, x, b3, x3, e0, e1, xe);
    musa_tensor_release(ia);
}

/* ---- eigh ---- */

TEST(op_linalg_eigh) {
    for (int d = 0; d < 2; d++)
        for (int lay = 0; lay < L_COUNT; lay++) {
            musa_dtype dt = LA_DTYPES[d];
            double *av = spd_mats(3, 5);
            for (int z = 0; z < 3; z++) av[z * 25 + 1] -= 7; /* indefinite, not symmetric: */
            musa_tensor *a = tensor_of(dt, 3, S(3, 5, 5), av, (layout)lay), *w = NULL, *v = NULL;
            for (int z = 0; z < 3; z++) av[z * 25 + 1] += 7; /* the lower triangle's matrix */
            CHECK_OK(musa_linalg_eigh(a, false, &w, &v));
            CHECK_SHAPE(w, 2, 3, 5);
            CHECK_SHAPE(v, 3, 3, 5, 5);
            double *wv = values(w), *vv = values(v), av_[75], vd[75];
            bmm(av, vv, av_, 3, 5, 5, 5, false, false);
            for (int z = 0; z < 3; z++)
                for (int i = 0; i < 5; i++)
                    for (int j = 0; j < 5; j++)
                        vd[z * 25 + i * 5 + j] = vv[z * 25 + i * 5 + j] * wv[z * 5 + j];
            for (int z = 0; z < 3; z++)
                for (int j = 0; j + 1 < 5; j++)
                    CHECK_MSG(wv[z * 5 + j] <= wv[z * 5 + j + 1], "ascending");
            double e = max_diff(av_, vd, 75), o = ortho_err(vv, 3, 5, 5);
            CHECK_MSG(e < 50 * tol_of(dt) && o < 10 * tol_of(dt),
                      "eigh %s: |A V - V w| = %g, |V^T V - I| = %g", musa_dtype_name(dt), e, o);
            free(av), free(wv), free(vv);
            release_all(3, a, w, v);
        }
    /* upper reads the upper triangle */
    double av[4] = {2, 1, -50, 2};
    musa_tensor *a = from_list(MUSA_DTYPE_FLOAT64, 2, S(2, 2), av), *w = NULL, *v = NULL;
    CHECK_OK(musa_linalg_eigh(a, true, &w, &v));
    CHECK(near("eigh upper", w, (double[]){1, 3}, 2, 1));
    musa_tensor *r = musa_zeros(2, S(2, 3), MUSA_DTYPE_FLOAT64), *x = NULL, *y = NULL;
    CHECK_ERR(musa_linalg_eigh(r, false, &x, &y) == MUSA_OK, MUSA_ERR_VALUE,
              "[linalg_eigh] A must be batches of square");
    musa_tensor *i = musa_ones(3, S(2, 2, 2), MUSA_DTYPE_INT64);
    CHECK_ERR(musa_linalg_eigh(i, false, &x, &y) == MUSA_OK, MUSA_ERR_TYPE, "got int64");
    double nv[4] = {NAN, 0, 0, 1};
    musa_tensor *nn = from_list(MUSA_DTYPE_FLOAT64, 3, S(1, 2, 2), nv);
    CHECK_ERR(musa_linalg_eigh(nn, false, &x, &y) == MUSA_OK, MUSA_ERR_LINALG,
              "non-finite values (NaN or inf) (batch element 0)");
    musa_tensor_release(nn);
    musa_tensor *e = musa_zeros(2, S(0, 0), MUSA_DTYPE_FLOAT32);
    CHECK_OK(musa_linalg_eigh(e, false, &x, &y));
    CHECK_SHAPE(x, 1, 0);
    release_all(8, a, w, v, r, i, e, x, y);
}

/* ---- svd ---- */

static void check_svd(musa_dtype dt, int64_t m, int64_t n, layout lay, bool full) {
    int64_t k = m < n ? m : n, uc = full ? m : k, vr = full ? n : k;
    double *av = rand_mats(2, m, n, 0);
    musa_tensor *a = tensor_of(dt, 3, (int64_t[]){2, m, n}, av, lay), *u = NULL, *s = NULL,
                *vh = NULL;
    CHECK_OK(musa_linalg_svd(a, full, &u, &s, &vh));
    CHECK_SHAPE(u, 3, 2, m, uc);
    CHECK_SHAPE(s, 2, 2, k);
    CHECK_SHAPE(vh, 3, 2, vr, n);
    double *uv = values(u), *sv = values(s), *vv = values(vh);
    double *us = malloc(sizeof(double) * (size_t)(2 * m * k)),
           *vk = malloc(sizeof(double) * (size_t)(2 * k * n));
    double *usv = malloc(sizeof(double) * (size_t)(2 * m * n));
    for (int z = 0; z < 2; z++) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < k; j++)
                us[(z * m + i) * k + j] = uv[(z * m + i) * uc + j] * sv[z * k + j];
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < n; j++) vk[(z * k + i) * n + j] = vv[(z * vr + i) * n + j];
        for (int64_t j = 0; j < k; j++) {
            CHECK_MSG(sv[z * k + j] >= 0, "S >= 0");
            CHECK_MSG(j == 0 || sv[z * k + j] <= sv[z * k + j - 1], "S descending");
        }
    }
    bmm(us, vk, usv, 2, m, k, n, false, false);
    double e = max_diff(usv, av, 2 * m * n), ou = ortho_err(uv, 2, m, uc),
           ov = ortho_err(vv, 2, n, vr);
    (void)ov;
    /* Vh's rows are orthonormal: check Vh^T's columns */
    double *vt = malloc(sizeof(double) * (size_t)(2 * vr * n));
    for (int z = 0; z < 2; z++)
        for (int64_t i = 0; i < vr; i++)
            for (int64_t j = 0; j < n; j++) vt[(z * n + j) * vr + i] = vv[(z * vr + i) * n + j];
    ov = ortho_err(vt, 2, n, vr);
    CHECK_MSG(e < 20 * tol_of(dt) && ou < 20 * tol_of(dt) && ov < 20 * tol_of(dt),
              "svd %s %lldx%lld full %d: |U S Vh - A| = %g, U %g, Vh %g", musa_dtype_name(dt),
              (long long)m, (long long)n, full, e, ou, ov);
    free(av), free(uv), free(sv), free(vv), free(us), free(vk), free(usv), free(vt);
    release_all(4, a, u, s, vh);
}

TEST(op_linalg_svd) {
    for (int d = 0; d < 2; d++)
        for (int lay = 0; lay < L_COUNT; lay++)
            for (int full = 0; full < 2; full++) {
                check_svd(LA_DTYPES[d], 5, 3, (layout)lay, full);
                check_svd(LA_DTYPES[d], 3, 5, (layout)lay, full);
                check_svd(LA_DTYPES[d], 4, 4, (layout)lay, full);
                if (harness_failed()) return;
            }
    /* 0 by 3: full U and Vh are identities */
    musa_tensor *e = musa_zeros(2, S(0, 3), MUSA_DTYPE_FLOAT64), *u = NULL, *s = NULL, *vh = NULL;
    CHECK_OK(musa_linalg_svd(e, true, &u, &s, &vh));
    CHECK_SHAPE(u, 2, 0, 0);
    CHECK(near("identity Vh", vh, (double[]){1, 0, 0, 0, 1, 0, 0, 0, 1}, 9, 1));
    /* an infinity: LAPACK's gesdd never returns on this one (found by the fuzzer) */
    double hv[9] = {1, 1, 1, 1, 1, 1, -INFINITY, 1, 1};
    musa_tensor *h = from_list(MUSA_DTYPE_FLOAT32, 2, S(3, 3), hv), *hu = NULL, *hs = NULL,
                *hvh = NULL;
    CHECK_ERR(musa_linalg_svd(h, false, &hu, &hs, &hvh) == MUSA_OK, MUSA_ERR_LINALG,
              "[linalg_svd] the algorithm failed to converge because the input matrix contains "
              "non-finite values (NaN or inf)");
    musa_tensor_release(h);
    musa_tensor *i = musa_ones(2, S(2, 2), MUSA_DTYPE_UINT8),
                *one = musa_ones(1, S(3), MUSA_DTYPE_FLOAT32);
    musa_tensor *x = NULL, *y = NULL, *z = NULL;
    CHECK_ERR(musa_linalg_svd(i, false, &x, &y, &z) == MUSA_OK, MUSA_ERR_TYPE,
              "[linalg_svd] expected a float32 or float64");
    CHECK_ERR(musa_linalg_svd(one, false, &x, &y, &z) == MUSA_OK, MUSA_ERR_VALUE,
              "at least 2 dimensions");
    release_all(6, e, u, s, vh, i, one);
}

/* ---- qr ---- */

static void check_qr(musa_dtype dt, int64_t m, int64_t n, layout lay, musa_qr_mode mode) {
    int64_t k = m < n ? m : n, qc = mode == MUSA_QR_COMPLETE ? m : k, rr = qc;
    double *av = rand_mats(2, m, n, 0);
    musa_tensor *a = tensor_of(dt, 3, (int64_t[]){2, m, n}, av, lay), *q = NULL, *r = NULL;
    CHECK_OK(musa_linalg_qr(a, mode, &q, &r));
    CHECK_SHAPE(q, 3, 2, m, qc);
    CHECK_SHAPE(r, 3, 2, rr, n);
    double *qv = values(q), *rv = values(r), *qr = malloc(sizeof(double) * (size_t)(2 * m * n));
    for (int z = 0; z < 2; z++)
        for (int64_t i = 0; i < rr; i++)
            for (int64_t j = 0; j < i && j < n; j++)
                CHECK_MSG(rv[(z * rr + i) * n + j] == 0, "R upper");
    bmm(qv, rv, qr, 2, m, qc, n, false, false);
    double e = max_diff(qr, av, 2 * m * n), o = ortho_err(qv, 2, m, qc);
    CHECK_MSG(e < 20 * tol_of(dt) && o < 20 * tol_of(dt),
              "qr %s %lldx%lld mode %d: |Q R - A| = %g, |Q^T Q - I| = %g", musa_dtype_name(dt),
              (long long)m, (long long)n, mode, e, o);
    free(av), free(qv), free(rv), free(qr);
    release_all(3, a, q, r);
}

TEST(op_linalg_qr) {
    for (int d = 0; d < 2; d++)
        for (int lay = 0; lay < L_COUNT; lay++)
            for (int mode = 0; mode < 2; mode++) {
                check_qr(LA_DTYPES[d], 5, 3, (layout)lay, (musa_qr_mode)mode);
                check_qr(LA_DTYPES[d], 3, 5, (layout)lay, (musa_qr_mode)mode);
                if (harness_failed()) return;
            }
    double av[6] = {3, 1, 4, 1, 5, 9};
    musa_tensor *a = from_list(MUSA_DTYPE_FLOAT64, 2, S(3, 2), av), *q = NULL, *r = NULL,
                *q2 = NULL, *r2 = NULL;
    CHECK_OK(musa_linalg_qr(a, MUSA_QR_R, &q, &r));
    CHECK_SHAPE(q, 1, 0);
    CHECK_OK(musa_linalg_qr(a, MUSA_QR_REDUCED, &q2, &r2));
    CHECK(same_values(r, r2));
    musa_tensor *x = NULL, *y = NULL;
    CHECK_ERR(musa_linalg_qr(a, (musa_qr_mode)7, &x, &y) == MUSA_OK, MUSA_ERR_VALUE,
              "[linalg_qr] mode must be 0 (reduced), 1 (complete) or 2 (r), got 7");
    musa_tensor *i = musa_ones(2, S(2, 2), MUSA_DTYPE_INT64);
    CHECK_ERR(musa_linalg_qr(i, MUSA_QR_REDUCED, &x, &y) == MUSA_OK, MUSA_ERR_TYPE, "got int64");
    /* empty: 3 by 0 complete Q is the identity */
    musa_tensor *e = musa_zeros(2, S(3, 0), MUSA_DTYPE_FLOAT64);
    CHECK_OK(musa_linalg_qr(e, MUSA_QR_COMPLETE, &x, &y));
    CHECK(near("identity Q", x, (double[]){1, 0, 0, 0, 1, 0, 0, 0, 1}, 9, 1));
    CHECK_SHAPE(y, 2, 3, 0);
    /* an empty matrix with a side past LAPACK's 32-bit sizes (the fuzzer:
     * the side wrapped negative and the kernel carved a negative size) */
    musa_tensor *wide = musa_zeros(2, S(0, 3000000000LL), MUSA_DTYPE_FLOAT32), *u = NULL, *s = NULL,
                *vh = NULL;
    CHECK_ERR(musa_linalg_qr(wide, MUSA_QR_R, &u, &s) == MUSA_OK, MUSA_ERR_VALUE,
              "[linalg_qr] A needs 0 by 3000000000 arrays, too large for LAPACK's 32-bit sizes");
    CHECK_ERR(musa_linalg_svd(wide, false, &u, &s, &vh) == MUSA_OK, MUSA_ERR_VALUE,
              "[linalg_svd] A needs 0 by 3000000000 arrays");
    /* lu_factor runs its kernel here: its info output is not empty */
    CHECK_ERR(musa_linalg_lu_factor(wide, &u, &s, &vh, NULL) == MUSA_OK, MUSA_ERR_VALUE,
              "[linalg_lu_factor] A needs 0 by 3000000000 arrays");
    release_all(10, a, q, r, q2, r2, i, e, x, y, wide);
}
