/*
 * linalg.c - matmul tests: NumPy semantics for 1-d/2-d/batched operands,
 * broadcasting batches, transposed and strided views, empty dims, every
 * dtype, the transpose attributes, and shape errors.
 */
#include "../util.h"

/* Reference product of (.., M, K) and (.., K, N) value arrays. */
static void ref_mm(const double *a, const double *b, double *c, int64_t M, int64_t K, int64_t N) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += a[i * K + k] * b[k * N + j];
            c[i * N + j] = s;
        }
}

typedef struct {
    int na;
    int64_t sa[4];
    int nb;
    int64_t sb[4];
    layout la, lb;
} mm_case;

static void check_case(const mm_case *c, musa_dtype dt) {
    musa_tensor *a = rnd(dt, c->na, c->sa, -2, 2, c->la), *b = rnd(dt, c->nb, c->sb, -2, 2, c->lb);
    musa_tensor *y = musa_matmul(a, b);
    CHECK_MSG(y, "matmul %s: %s", musa_dtype_name(dt), musa_last_error());
    CHECK(musa_tensor_dtype(y) == dt);
    /* Expand both to (batch.., M, K) / (.., K, N) with the test's own code. */
    int64_t M = c->na == 1 ? 1 : c->sa[c->na - 2], K = c->sa[c->na - 1];
    int64_t N = c->nb == 1 ? 1 : c->sb[c->nb - 1];
    int nba = c->na > 2 ? c->na - 2 : 0, nbb = c->nb > 2 ? c->nb - 2 : 0;
    int nbo = nba > nbb ? nba : nbb;
    int64_t bshape[4];
    for (int i = 0; i < nbo; i++) {
        int ia = i - (nbo - nba), ib = i - (nbo - nbb);
        int64_t da = ia >= 0 ? c->sa[ia] : 1, db = ib >= 0 ? c->sb[ib] : 1;
        bshape[i] = da > db ? da : db;
    }
    int64_t nbatch = numel_of(nbo, bshape);
    double *av = values(a), *bv = values(b), *yv = values(y);
    double *want = malloc(sizeof(double) * (size_t)(nbatch * M * N + 1));
    for (int64_t bi = 0; bi < nbatch; bi++) {
        int64_t idx[4], ia_idx[4], ib_idx[4];
        unravel(bi, nbo, bshape, idx);
        for (int i = 0; i < nba; i++) ia_idx[i] = c->sa[i] == 1 ? 0 : idx[i + nbo - nba];
        for (int i = 0; i < nbb; i++) ib_idx[i] = c->sb[i] == 1 ? 0 : idx[i + nbo - nbb];
        int64_t oa = ravel(nba, c->sa, ia_idx) * M * K, ob = ravel(nbb, c->sb, ib_idx) * K * N;
        ref_mm(av + oa, bv + ob, want + bi * M * N, M, K, N);
    }
    int64_t n = musa_tensor_numel(y);
    CHECK_MSG(n == nbatch * M * N, "matmul output size %lld", (long long)n);
    double scale = musa_dtype_is_floating(dt) ? 1 + (double)K / 8 : 1; /* accumulation error */
    for (int64_t i = 0; i < n; i++) {
        double tol = (tol_abs(dt) + tol_rel(dt) * fabs(want[i])) * scale;
        CHECK_MSG(fabs(yv[i] - want[i]) <= tol, "matmul %s: out[%lld] = %.9g, want %.9g",
                  musa_dtype_name(dt), (long long)i, yv[i], want[i]);
    }
    free(av), free(bv), free(yv), free(want);
    release_all(3, a, b, y);
}

TEST(op_matmul) {
    static const mm_case cases[] = {
        {2, {3, 4}, 2, {4, 5}, L_CONTIG, L_CONTIG},
        {2, {3, 4}, 2, {4, 5}, L_TRANSPOSED, L_TRANSPOSED},
        {2, {3, 4}, 2, {4, 5}, L_STRIDED, L_STRIDED},
        {1, {4}, 2, {4, 5}, L_CONTIG, L_CONTIG},
        {2, {3, 4}, 1, {4}, L_CONTIG, L_STRIDED},
        {1, {6}, 1, {6}, L_CONTIG, L_CONTIG},
        {3, {2, 3, 4}, 2, {4, 5}, L_CONTIG, L_CONTIG},
        {3, {2, 3, 4}, 3, {2, 4, 5}, L_TRANSPOSED, L_CONTIG},
        {4, {2, 1, 3, 4}, 3, {5, 4, 2}, L_CONTIG, L_CONTIG},
        {3, {2, 1, 4}, 2, {4, 3}, L_CONTIG, L_CONTIG},
        {2, {3, 0}, 2, {0, 5}, L_CONTIG, L_CONTIG},
        {2, {0, 4}, 2, {4, 5}, L_CONTIG, L_CONTIG},
        {2, {65, 130}, 2, {130, 67}, L_CONTIG, L_TRANSPOSED},
        {1, {4}, 3, {2, 4, 3}, L_CONTIG, L_CONTIG},
    };
    musa_dtype dts[] = {MUSA_DTYPE_FLOAT32,  MUSA_DTYPE_FLOAT64, MUSA_DTYPE_FLOAT16,
                        MUSA_DTYPE_BFLOAT16, MUSA_DTYPE_INT64,   MUSA_DTYPE_INT32};
    for (int d = 0; d < 6; d++)
        for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
            check_case(&cases[i], dts[d]);
            if (harness_failed()) {
                fprintf(stderr, "  (case %d, %s)\n", i, musa_dtype_name(dts[d]));
                return;
            }
        }
}

TEST(matmul_transpose_attrs_and_errors) {
    musa_tensor *a = rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){4, 3}, -1, 1, L_CONTIG);
    musa_tensor *b = rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){5, 4}, -1, 1, L_CONTIG);
    int op = musa_op_lookup("matmul");
    musa_attrs *at = musa_attrs_new(op);
    CHECK_OK(musa_attrs_set_bool(at, "transpose_a", true));
    CHECK_OK(musa_attrs_set_bool(at, "transpose_b", true));
    musa_tensor *in[2] = {a, b}, *out[1] = {NULL};
    CHECK_OK(musa_op_call(op, 2, in, at, out));
    CHECK_SHAPE(out[0], 2, 3, 5);
    musa_tensor *at_ = musa_transpose(a, 0, 1), *bt = musa_transpose(b, 0, 1);
    musa_tensor *ref = musa_matmul(at_, bt);
    double *g = values(out[0]), *w = values(ref);
    CHECK_CLOSE("transpose attrs", MUSA_DTYPE_FLOAT32, g, w, 15);
    free(g), free(w);
    CHECK_ERR(musa_attrs_set_int(at, "transpose_a", 1) == MUSA_OK, MUSA_ERR_TYPE,
              "is bool, not int");
    CHECK_ERR(musa_attrs_set_bool(at, "nope", 1) == MUSA_OK, MUSA_ERR_VALUE,
              "has no attribute 'nope'");
    musa_attrs_free(at);
    CHECK_ERR(FAILS(musa_matmul(a, a)), MUSA_ERR_VALUE,
              "[matmul] shapes (4, 3) and (4, 3) cannot be multiplied (3 != 4)");
    musa_tensor *s = musa_scalar(1, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_matmul(s, a)), MUSA_ERR_VALUE, "at least 1 dim");
    musa_tensor *bo = musa_zeros(2, (int64_t[]){2, 2}, MUSA_DTYPE_BOOL);
    CHECK_ERR(FAILS(musa_matmul(bo, bo)), MUSA_ERR_TYPE, "bool");
    musa_tensor *x3 = musa_zeros(3, (int64_t[]){2, 3, 4}, MUSA_DTYPE_FLOAT32);
    musa_tensor *y3 = musa_zeros(3, (int64_t[]){3, 4, 5}, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_matmul(x3, y3)), MUSA_ERR_VALUE, "cannot be broadcast");
    /* float32 with float64 promotes */
    musa_tensor *d = musa_ones(2, (int64_t[]){3, 2}, MUSA_DTYPE_FLOAT64);
    musa_tensor *p = musa_matmul(a, d);
    CHECK(p && musa_tensor_dtype(p) == MUSA_DTYPE_FLOAT64);
    release_all(12, a, b, out[0], at_, bt, ref, s, bo, x3, y3, d, p);
}
