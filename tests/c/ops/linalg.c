/*
 * linalg.c - matmul tests: NumPy semantics for 1-d/2-d/batched operands,
 * broadcasting batches, transposed and strided views, empty dims, every
 * dtype, the transpose attributes, and shape errors.
 */
#include "../util.h"
#include "base/threadpool.h"

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

/* float32 GEMMs from MUSA_SPLIT_GEMM_MACS to MUSA_SMALL_GEMM_MACS run on two
 * threads as bands of rows or columns when the cores share data cheaply
 * (matmul.c): the bytes must equal one call's (the split forced off), for
 * each transpose, uneven and narrow bands, random shapes, and linear's
 * accumulation onto the bias. */
TEST(matmul_bands_equal_one_call) {
    enum { FIXED = 6, SHAPES = 60 };
    int64_t shapes[SHAPES][3] = {{64, 128, 128}, {100, 1000, 20}, {20, 1000, 100},
                                 {33, 200, 130}, {128, 128, 120}, {17, 2000, 40}};
    uint64_t rng = 12345;
    for (int s = FIXED; s < SHAPES;) { /* random shapes in the banded range */
        int64_t d[3];
        for (int i = 0; i < 3; i++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            d[i] = 1 + (int64_t)((rng >> 33) % (i == 1 ? 3000 : 300));
        }
        double macs = (double)d[0] * (double)d[1] * (double)d[2];
        if (macs < (5 << 17) || macs >= (1 << 21) || (d[0] < 32 && d[2] < 32)) continue;
        memcpy(shapes[s++], d, sizeof d);
    }
    int saved = musa_get_num_threads();
    /* 4 threads: bands of 16 rows from 64 (a band of 8 rounded otherwise) */
    for (int th = 2; th <= 4 && !harness_failed(); th += 2)
        for (int s = 0; s < SHAPES; s++)
            for (int l = 0; l < 4; l++) {
                CHECK_OK(musa_set_num_threads(th));
                int64_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
                musa_tensor *a = rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){M, K}, -2, 2,
                                     (l & 1) ? L_TRANSPOSED : L_CONTIG);
                musa_tensor *b = rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){K, N}, -2, 2,
                                     (l & 2) ? L_TRANSPOSED : L_CONTIG);
                musa_tensor *w = rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){N, K}, -2, 2, L_CONTIG);
                musa_tensor *bias = rnd(MUSA_DTYPE_FLOAT32, 1, (int64_t[]){N}, -2, 2, L_CONTIG);
                musa_tensor *y[2], *z[2];
                for (int t = 0; t < 2; t++) {
                    musa_pool_force_sharing(t); /* 0: one call; 1: bands */
                    y[t] = musa_matmul(a, b);
                    z[t] = musa_linear(a, w, bias);
                }
                musa_pool_force_sharing(-1);
                CHECK_MSG(y[0] && y[1] && z[0] && z[1], "%s", musa_last_error());
                if (harness_failed()) break;
                for (int t = 0; t < 2; t++) {
                    musa_tensor *p = t ? z[0] : y[0], *q = t ? z[1] : y[1];
                    CHECK_MSG(memcmp(musa_tensor_data(p), musa_tensor_data(q),
                                     (size_t)(M * N) * sizeof(float)) == 0,
                              "%s (%lld x %lld x %lld), layouts %d, %d threads: bands differ from "
                              "one call",
                              t ? "linear" : "matmul", (long long)M, (long long)K, (long long)N, l,
                              th);
                }
                release_all(8, a, b, w, bias, y[0], y[1], z[0], z[1]);
                if (harness_failed()) break;
            }
    CHECK_OK(musa_set_num_threads(saved));
}
