/*
 * matmul.c - NumPy-semantics matmul on GEMM libraries.
 *
 * float32 calls oneDNN's dnnl_sgemm (measured faster than OpenBLAS here,
 * see bench/bench_core.c), float64 calls cblas_dgemm, bfloat16 runs
 * oneDNN's bfloat16 matmul primitive (matmul_dnnl.c: float32 accumulation,
 * rounded once) on operands it can read in place; float16, and bfloat16
 * otherwise, are converted to float32 in the workspace, multiplied there and
 * rounded once,
 * and integers use a plain int64-accumulating loop. Operands whose layout a
 * GEMM can take directly (row- or column-major matrices, i.e. transposed
 * views) are passed with the transpose flag and no copy; others are copied
 * into the workspace. Batches broadcast; when the right operand is one
 * matrix for the whole batch and the left batch is contiguous, the batch is
 * folded into a single tall GEMM.
 */
#include <cblas.h>
#include <dnnl.h>
#include <omp.h>
#include <stdatomic.h>

#include "../../base/threadpool.h"
#include "elem.h"
#include "kernels.h"
#include "nnutil.h"
#include "matmul_dnnl.h"

typedef struct {
    int64_t rows, cols, rs, cs; /* strides in elements */
} mat2;

typedef struct {
    mat2 a, b, c;
    int nb; /* batch dims */
    int64_t bshape[MUSA_MAX_DIMS];
    int64_t sa[MUSA_MAX_DIMS], sb[MUSA_MAX_DIMS], sc[MUSA_MAX_DIMS]; /* batch strides */
    int64_t batch;                                                   /* product of bshape */
} mm_plan;

static void plan(const musa_kview *out, const musa_kview *a, const musa_kview *b,
                 const musa_attrs_matmul *at, mm_plan *p) {
    memset(p, 0, sizeof *p);
    int na = a->ndim, nbd = b->ndim, no = out->ndim;
    if (na == 1)
        p->a = (mat2){1, a->shape[0], 0, a->strides[0]};
    else {
        p->a = (mat2){a->shape[na - 2], a->shape[na - 1], a->strides[na - 2], a->strides[na - 1]};
        if (at->transpose_a) p->a = (mat2){p->a.cols, p->a.rows, p->a.cs, p->a.rs};
    }
    if (nbd == 1)
        p->b = (mat2){b->shape[0], 1, b->strides[0], 0};
    else {
        p->b =
            (mat2){b->shape[nbd - 2], b->shape[nbd - 1], b->strides[nbd - 2], b->strides[nbd - 1]};
        if (at->transpose_b) p->b = (mat2){p->b.cols, p->b.rows, p->b.cs, p->b.rs};
    }
    int tail = (na > 1) + (nbd > 1);
    p->nb = no - tail;
    int64_t crs = na > 1 ? out->strides[p->nb] : 0;
    int64_t ccs = nbd > 1 ? out->strides[no - 1] : 0;
    p->c = (mat2){p->a.rows, p->b.cols, crs, ccs};
    p->batch = 1;
    for (int i = 0; i < p->nb; i++) {
        p->bshape[i] = out->shape[i];
        p->batch *= out->shape[i];
        p->sc[i] = out->strides[i];
        int ia = i - (p->nb - (na - 2)), ib = i - (p->nb - (nbd - 2));
        p->sa[i] = (na > 2 && ia >= 0 && a->shape[ia] != 1) ? a->strides[ia] : 0;
        p->sb[i] = (nbd > 2 && ib >= 0 && b->shape[ib] != 1) ? b->strides[ib] : 0;
    }
}

/* Fold the batch into the rows of A and C when B is shared and the batch
 * walks A and C like extra rows. */
static void fold_batch(mm_plan *p) {
    if (p->nb == 0 || p->batch <= 1) return;
    for (int i = 0; i < p->nb; i++)
        if (p->sb[i] != 0) return;
    int64_t ra = p->a.rs * p->a.rows, rc = p->c.rs * p->c.rows;
    for (int i = p->nb - 1; i >= 0; i--) {
        if (p->bshape[i] == 1) continue;
        if (p->sa[i] != ra || p->sc[i] != rc) return;
        ra *= p->bshape[i];
        rc *= p->bshape[i];
    }
    p->a.rows *= p->batch;
    p->c.rows *= p->batch;
    p->nb = 0;
    p->batch = 1;
}

/* Can a GEMM read this matrix directly? Sets the transpose flag and the
 * leading dimension (row-major convention). */
static bool gemm_layout(const mat2 *m, char *trans, int64_t *ld) {
    int64_t r = m->rows, c = m->cols;
    if ((m->cs == 1 || c == 1) && (r == 1 || m->rs >= (c > 1 ? c : 1))) {
        *trans = 'N';
        *ld = r == 1 ? (c > 1 ? c : 1) : m->rs;
        return *ld >= 1;
    }
    if ((m->rs == 1 || r == 1) && (c == 1 || m->cs >= (r > 1 ? r : 1))) {
        *trans = 'T';
        *ld = c == 1 ? (r > 1 ? r : 1) : m->cs;
        return *ld >= 1;
    }
    return false;
}

static bool is_lowp(int dt) {
    return dt == MUSA_DTYPE_FLOAT16 || dt == MUSA_DTYPE_BFLOAT16;
}

/* The batch dims for one primitive call over the whole batch (at most
 * MUSA_GEMM_BATCH_DIMS of them; the output's strides never 0). */
static bool whole_batch(const mm_plan *p, musa_gemm_shape *s) {
    if (p->batch <= 1 || p->nb < 1 || p->nb > MUSA_GEMM_BATCH_DIMS) return false;
    s->nb = p->nb;
    for (int i = 0; i < p->nb; i++) {
        s->bd[i] = p->bshape[i], s->sa[i] = p->sa[i], s->sb[i] = p->sb[i], s->sc[i] = p->sc[i];
        if (!s->sc[i] && s->bd[i] > 1) return false;
    }
    return true;
}

/* The bfloat16 GEMM on oneDNN (matmul_dnnl.c), when every operand is
 * GEMM-readable in place: of the whole batch in one call where oneDNN
 * takes its strides, else of one batch matrix; its scratch bytes in *ws.
 * (A float32 batch of small matrices gained nothing from the primitive
 * here: 46 us against 47 for 32 products of 64x32x64, slower for
 * transposed ones.) */
static bool bf16_gemm(const mm_plan *p, int dt, musa_gemm_shape *s, size_t *ws) {
    char tc;
    int64_t ldc;
    memset(s, 0, sizeof *s);
    if (dt != MUSA_DTYPE_BFLOAT16 || p->a.cols == 0 || !gemm_layout(&p->a, &s->ta, &s->lda) ||
        !gemm_layout(&p->b, &s->tb, &s->ldb) || !gemm_layout(&p->c, &tc, &ldc) || tc != 'N')
        return false;
    s->M = p->c.rows, s->N = p->c.cols, s->K = p->a.cols, s->ldc = ldc;
    if (whole_batch(p, s) && (*ws = musa_dnnl_gemm_workspace(s)) != (size_t)-1) return true;
    s->nb = 0; /* one matrix a call */
    *ws = musa_dnnl_gemm_workspace(s);
    return *ws != (size_t)-1;
}

/* Workspace in elements of the compute type, laid out [A | B | C]. Each
 * part is within its operand's elements; their sum in bytes saturates
 * (ws_bytes): two expanded operands of 2^61 elements each wrapped it to 8
 * bytes, which the packs overran. */
static void ws_parts(const mm_plan *p, int dt, int64_t *na, int64_t *nb, int64_t *nc) {
    char t;
    int64_t ld;
    bool low = is_lowp(dt);
    *na = (low || !gemm_layout(&p->a, &t, &ld)) ? p->a.rows * p->a.cols : 0;
    *nb = (low || !gemm_layout(&p->b, &t, &ld)) ? p->b.rows * p->b.cols : 0;
    *nc = (low || !gemm_layout(&p->c, &t, &ld) || t != 'N') ? p->c.rows * p->c.cols : 0;
}

static size_t ws_bytes(int64_t na, int64_t nb, int64_t nc, size_t es) {
    return musa_sat_add_size(musa_sat_add_size(nn_bytes(na, es), nn_bytes(nb, es)),
                             nn_bytes(nc, es));
}

MUSA_WS(ws_matmul) {
    MUSA_UNUSED(n_in), MUSA_UNUSED(n_out);
    int dt = in[0].dtype;
    if (!musa_is_float((musa_dtype)dt)) return 0;
    mm_plan p;
    plan(&out[0], &in[0], &in[1], attrs, &p);
    fold_batch(&p);
    musa_gemm_shape gs;
    size_t bws;
    if (bf16_gemm(&p, dt, &gs, &bws)) return bws;
    int64_t na, nb, nc;
    ws_parts(&p, dt, &na, &nb, &nc);
    return ws_bytes(na, nb, nc, dt == MUSA_DTYPE_FLOAT64 ? 8 : 4);
}

/* Copy a strided matrix of dtype `dt` into a contiguous float/double one. */
static void pack(const char *src, int dt, const mat2 *m, void *dst, int cdt) {
    musa_kview s = {.data = (char *)src,
                    .dtype = dt,
                    .ndim = 2,
                    .shape = {m->rows, m->cols},
                    .strides = {m->rs, m->cs}};
    musa_kview d = {
        .data = dst, .dtype = cdt, .ndim = 2, .shape = {m->rows, m->cols}, .strides = {m->cols, 1}};
    musa_cpu_copy(&d, &s);
}

static void unpack(const void *src, int cdt, const mat2 *m, char *dst, int dt) {
    musa_kview s = {.data = (char *)src,
                    .dtype = cdt,
                    .ndim = 2,
                    .shape = {m->rows, m->cols},
                    .strides = {m->cols, 1}};
    musa_kview d = {.data = dst,
                    .dtype = dt,
                    .ndim = 2,
                    .shape = {m->rows, m->cols},
                    .strides = {m->rs, m->cs}};
    musa_cpu_copy(&d, &s);
}

static bool small_gemm(int64_t M, int64_t N, int64_t K) {
    return (double)M * (double)N * (double)K < MUSA_SMALL_GEMM_MACS;
}

int musa_cpu_omp_threads(int n) {
    int had = omp_get_max_threads();
    if (had != n) omp_set_num_threads(n);
    return had;
}

int musa_cpu_gemm_threads(double macs) {
    return musa_cpu_omp_threads(macs < MUSA_SMALL_GEMM_MACS ? 1 : musa_pool_intra_threads());
}

/* float32 C = alpha A B + beta C on dnnl_sgemm. A GEMM under
 * MUSA_SMALL_GEMM_MACS (one OpenMP thread) and of at least
 * MUSA_SPLIT_GEMM_MACS runs as one single-threaded dnnl_sgemm per band of
 * C's rows (or of its columns, when it has more of them and fewer than 32
 * rows) on musa's pool, while musa_pool_sharing_cheap says the cores share
 * data cheaply. Row bands match the rows an elementwise op that reads C
 * next gives each thread. Each band runs the same K loop; the bits equal
 * one call's on every shape and transpose tried (test
 * matmul_bands_equal_one_call: 60 shapes, 4 layouts, matmul and linear).
 * Measured on the 2-core machine, one call against two bands: 64x128x128
 * 8.5 -> 5.9 us, 64x80x128 5.7 -> 4.3, 128x128x120 16.4 -> 9.7,
 * 100x1000x20 25.0 -> 15.4; at 64x64x128 (524,288) 4.6 both ways. Above
 * MUSA_SMALL_GEMM_MACS, oneDNN's own two threads were as fast as two bands
 * (128^3 10.0 against 10.1 us, 512x128x384 99.8 against 101.7). */
#define MUSA_SPLIT_GEMM_MACS (5 << 17)
typedef struct {
    char ta, tb;
    int64_t M, N, K, lda, ldb, ldc, band, bands;
    float alpha, beta;
    const float *A, *B;
    float *C;
    bool rows;
    atomic_int rc;
} sgemm_job;

static void sgemm_bands(void *ctx, int64_t b, int64_t e) {
    sgemm_job *j = (sgemm_job *)ctx;
    musa_cpu_omp_threads(1);
    for (int64_t i = b; i < e; i++) {
        int64_t o = i * j->band, n = i + 1 < j->bands ? j->band : (j->rows ? j->M : j->N) - o;
        dnnl_status_t st;
        if (j->rows)
            st = dnnl_sgemm(j->ta, j->tb, n, j->N, j->K, j->alpha,
                            j->A + (j->ta == 'N' ? o * j->lda : o), j->lda, j->B, j->ldb, j->beta,
                            j->C + o * j->ldc, j->ldc);
        else
            st = dnnl_sgemm(j->ta, j->tb, j->M, n, j->K, j->alpha, j->A, j->lda,
                            j->B + (j->tb == 'N' ? o : o * j->ldb), j->ldb, j->beta, j->C + o,
                            j->ldc);
        if (st != dnnl_success) atomic_store(&j->rc, (int)st);
    }
}

static dnnl_status_t sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha,
                           const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                           float *C, int64_t ldc) {
    double macs = (double)M * (double)N * (double)K;
    int threads = musa_pool_intra_threads();
    if (macs >= MUSA_SPLIT_GEMM_MACS && macs < MUSA_SMALL_GEMM_MACS && threads > 1 &&
        MUSA_MAX(M, N) >= 32 && musa_pool_sharing_cheap()) {
        sgemm_job j = {.ta = ta,
                       .tb = tb,
                       .M = M,
                       .N = N,
                       .K = K,
                       .lda = lda,
                       .ldb = ldb,
                       .ldc = ldc,
                       .alpha = alpha,
                       .beta = beta,
                       .A = A,
                       .B = B,
                       .C = C,
                       .rows = M >= 32 || M >= N};
        /* bands of a multiple of 8, the last one taking the rest; row bands
         * of at least MUSA_GEMM_MIN_ROWS */
        int64_t len = j.rows ? M : N;
        j.band = MUSA_MAX(len / threads / 8 * 8, j.rows ? MUSA_GEMM_MIN_ROWS : 8);
        j.bands = len / j.band;
        atomic_init(&j.rc, 0);
        musa_parallel_for(j.bands, 1, sgemm_bands, &j);
        return (dnnl_status_t)atomic_load(&j.rc);
    }
    musa_cpu_gemm_threads(macs);
    return dnnl_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* One GEMM C = A B for float32/float64 data (es = 4 or 8). */
static int gemm_float(int cdt, const mat2 *A, const char *a, const mat2 *B, const char *b,
                      const mat2 *C, char *c, char *ws, int64_t wa, int64_t wb, int64_t wc,
                      int src_dt) {
    size_t es = cdt == MUSA_DTYPE_FLOAT64 ? 8 : 4;
    int64_t M = C->rows, N = C->cols, K = A->cols;
    if (K == 0) { /* an empty sum: zeros, whatever A's and B's (degenerate) strides */
        musa_kview z = {
            .data = c, .dtype = src_dt, .ndim = 2, .shape = {M, N}, .strides = {C->rs, C->cs}};
        musa_cpu_fill(&z, 0);
        return MUSA_OK;
    }
    mat2 a2 = *A, b2 = *B, c2 = *C;
    const char *pa = a, *pb = b;
    char *pc = c;
    /* ws is NULL when nothing is packed: no arithmetic on it then */
    char *wsa = ws, *wsb = wb ? ws + (size_t)wa * es : NULL;
    char *wsc = wc ? ws + (size_t)(wa + wb) * es : NULL;
    if (wa) {
        pack(a, src_dt, A, wsa, cdt);
        a2 = (mat2){M, K, K, 1};
        pa = wsa;
    }
    if (wb) {
        pack(b, src_dt, B, wsb, cdt);
        b2 = (mat2){K, N, N, 1};
        pb = wsb;
    }
    if (wc) {
        c2 = (mat2){M, N, N, 1};
        pc = wsc;
    }
    char ta, tb, tc;
    int64_t lda, ldb, ldc;
    bool ok = gemm_layout(&a2, &ta, &lda) && gemm_layout(&b2, &tb, &ldb) &&
              gemm_layout(&c2, &tc, &ldc) && tc == 'N';
    if (!ok) /* packing makes every operand GEMM-readable; a bug if not */
        return musa_err(MUSA_ERR_RUNTIME,
                        "[matmul] internal: no GEMM layout for (%lld x %lld) @ (%lld x %lld)",
                        (long long)M, (long long)K, (long long)K, (long long)N);
    if (cdt == MUSA_DTYPE_FLOAT32) {
        dnnl_status_t st = sgemm(ta, tb, M, N, K, 1.0f, (const float *)pa, lda, (const float *)pb,
                                 ldb, 0.0f, (float *)pc, ldc);
        if (st != dnnl_success)
            return musa_err(MUSA_ERR_RUNTIME, "[matmul] dnnl_sgemm failed with status %d", (int)st);
    } else {
        cblas_dgemm(CblasRowMajor, ta == 'N' ? CblasNoTrans : CblasTrans,
                    tb == 'N' ? CblasNoTrans : CblasTrans, (int)M, (int)N, (int)K, 1.0,
                    (const double *)pa, (int)lda, (const double *)pb, (int)ldb, 0.0, (double *)pc,
                    (int)ldc);
    }
    if (wc) unpack(wsc, cdt, C, c, src_dt);
    return MUSA_OK;
}

#define DEF_IMM(SN, T, C_, E)                                                                      \
    static void imm_##SN(const mat2 *A, const char *a, const mat2 *B, const char *b,               \
                         const mat2 *C, char *c) {                                                 \
        for (int64_t i = 0; i < C->rows; i++)                                                      \
            for (int64_t j = 0; j < C->cols; j++) {                                                \
                uint64_t acc = 0;                                                                  \
                for (int64_t k = 0; k < A->cols; k++)                                              \
                    acc += (uint64_t)(int64_t) *                                                   \
                           (const T *)(a + (i * A->rs + k * A->cs) * (int64_t)sizeof(T)) *         \
                           (uint64_t)(int64_t) *                                                   \
                           (const T *)(b + (k * B->rs + j * B->cs) * (int64_t)sizeof(T));          \
                *(T *)(c + (i * C->rs + j * C->cs) * (int64_t)sizeof(T)) = ST_##SN((int64_t)acc);  \
            }                                                                                      \
    }
MUSA_FOR_INTS(DEF_IMM)

typedef struct {
    const mm_plan *p;
    const char *a, *b;
    char *c;
    size_t es;
    int dt, cdt;
    bool prim; /* a per-matrix oneDNN matmul primitive (bfloat16) */
    const musa_gemm_shape *gs;
    const musa_kctx *ctx;
    int64_t wa, wb, wc;
    _Atomic int rc; /* the first failure */
} mm_job;

/* Batch matrices [b0, b1) of a matmul. */
static void mm_slices(void *arg, int64_t b0, int64_t b1) {
    mm_job *j = arg;
    const mm_plan *p = j->p;
    for (int64_t bi = b0; bi < b1 && atomic_load(&j->rc) == MUSA_OK; bi++) {
        int64_t oa = 0, ob = 0, oc = 0, rest = bi;
        for (int i = p->nb - 1; i >= 0; i--) { /* bi's batch index, last dim fastest */
            int64_t k = rest % p->bshape[i];
            rest /= p->bshape[i];
            oa += k * p->sa[i], ob += k * p->sb[i], oc += k * p->sc[i];
        }
        const char *pa = j->a + (size_t)oa * j->es, *pb = j->b + (size_t)ob * j->es;
        char *pc = j->c + (size_t)oc * j->es;
        int rc = MUSA_OK;
        switch (j->dt) {
        case MUSA_DTYPE_INT64:
            imm_i64(&p->a, pa, &p->b, pb, &p->c, pc);
            break;
        case MUSA_DTYPE_INT32:
            imm_i32(&p->a, pa, &p->b, pb, &p->c, pc);
            break;
        case MUSA_DTYPE_INT16:
            imm_i16(&p->a, pa, &p->b, pb, &p->c, pc);
            break;
        case MUSA_DTYPE_INT8:
            imm_i8(&p->a, pa, &p->b, pb, &p->c, pc);
            break;
        case MUSA_DTYPE_UINT8:
            imm_u8(&p->a, pa, &p->b, pb, &p->c, pc);
            break;
        default:
            if (j->prim) {
                rc =
                    musa_dnnl_gemm(j->gs, pa, pb, NULL, pc, j->ctx->scratch, j->ctx->scratch_bytes);
                if (rc) rc = musa_err(rc, "[matmul] oneDNN bfloat16 matmul primitive failed");
            } else {
                rc = gemm_float(j->cdt, &p->a, pa, &p->b, pb, &p->c, pc, j->ctx->scratch, j->wa,
                                j->wb, j->wc, j->dt);
            }
        }
        if (rc) {
            int ok = MUSA_OK;
            atomic_compare_exchange_strong(&j->rc, &ok, rc);
        }
    }
}

int cpu_matmul(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
               const void *attrs) {
    MUSA_UNUSED(n_in);
    mm_plan p;
    plan(&out[0], &in[0], &in[1], attrs, &p);
    fold_batch(&p);
    int dt = in[0].dtype;
    size_t es = musa_dtype_info[dt].size;
    if (p.c.rows == 0 || p.c.cols == 0 || p.batch == 0) return MUSA_OK;
    int64_t wa = 0, wb = 0, wc = 0;
    int cdt = dt == MUSA_DTYPE_FLOAT64 ? MUSA_DTYPE_FLOAT64 : MUSA_DTYPE_FLOAT32;
    musa_gemm_shape gs;
    size_t bws;
    bool bf16 = bf16_gemm(&p, dt, &gs, &bws);
    if (bf16 && ctx->scratch_bytes < bws)
        return musa_err(MUSA_ERR_RUNTIME, "[matmul] internal: workspace of %zu bytes is short",
                        ctx->scratch_bytes);
    if (musa_is_float((musa_dtype)dt) && !bf16) {
        ws_parts(&p, dt, &wa, &wb, &wc);
        if (ctx->scratch_bytes < ws_bytes(wa, wb, wc, cdt == MUSA_DTYPE_FLOAT64 ? 8 : 4))
            return musa_err(MUSA_ERR_RUNTIME, "[matmul] internal: workspace of %zu bytes is short",
                            ctx->scratch_bytes);
    }
    mm_job j = {.p = &p,
                .a = in[0].data,
                .b = in[1].data,
                .c = out[0].data,
                .es = es,
                .dt = dt,
                .cdt = cdt,
                .prim = bf16,
                .gs = &gs,
                .ctx = ctx,
                .wa = wa,
                .wb = wb,
                .wc = wc};
    atomic_init(&j.rc, MUSA_OK);
    /* a batch of small matrices (attention's heads) runs its matrices in
     * parallel, one thread each, instead of each on every thread: only when
     * nothing is packed in the workspace, which the matrices would share */
    bool spread = p.batch > 1 && small_gemm(p.c.rows, p.c.cols, p.a.cols) &&
                  (dt == MUSA_DTYPE_FLOAT32 || (bf16 && bws == 0)) && wa + wb + wc == 0;
    if (bf16 && gs.nb > 0) { /* the whole batch in one primitive call */
        int rc = musa_dnnl_gemm(&gs, j.a, j.b, NULL, j.c, ctx->scratch, ctx->scratch_bytes);
        return rc ? musa_err(rc, "[matmul] oneDNN bfloat16 matmul primitive failed") : MUSA_OK;
    }
    if (!spread) {
        mm_slices(&j, 0, p.batch);
        return atomic_load(&j.rc);
    }
    musa_parallel_for(p.batch, 1, mm_slices, &j);
    int rc = atomic_load(&j.rc); /* a worker's message stayed on its thread */
    return rc ? musa_err(rc, "[matmul] the product of a batch matrix failed (%s)",
                         musa_status_name(rc))
              : MUSA_OK;
}

int musa_cpu_gemm(int dtype, char ta, char tb, int64_t M, int64_t N, int64_t K, double alpha,
                  const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C,
                  int64_t ldc) {
    if (M == 0 || N == 0) return MUSA_OK;
    if (K == 0) { /* C = beta C */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                if (dtype == MUSA_DTYPE_FLOAT32) {
                    float *c = (float *)C + i * ldc + j;
                    *c = beta == 0 ? 0.0f : (float)(beta * *c);
                } else {
                    double *c = (double *)C + i * ldc + j;
                    *c = beta == 0 ? 0.0 : beta * *c;
                }
            }
        return MUSA_OK;
    }
    if (dtype == MUSA_DTYPE_FLOAT32) {
        dnnl_status_t st = sgemm(ta, tb, M, N, K, (float)alpha, (const float *)A, lda,
                                 (const float *)B, ldb, (float)beta, (float *)C, ldc);
        if (st != dnnl_success)
            return musa_err(MUSA_ERR_RUNTIME, "[gemm] dnnl_sgemm failed with status %d", (int)st);
        return MUSA_OK;
    }
    cblas_dgemm(CblasRowMajor, ta == 'N' ? CblasNoTrans : CblasTrans,
                tb == 'N' ? CblasNoTrans : CblasTrans, (int)M, (int)N, (int)K, alpha, A, (int)lda,
                B, (int)ldb, beta, C, (int)ldc);
    return MUSA_OK;
}

void musa_cpu_set_library_threads(int n) {
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

/* ---- linear: y = x W^T + b ---- */

/* A bfloat16 linear, or a float32 one with a bias, as one oneDNN matmul,
 * the bias added in its epilogue (x W^T + b); or false: oneDNN cannot run
 * it, or musa_cpu_gemm below does it better. Float32 with a bias,
 * measured here on 2 threads (oneDNN 2.6): the primitive ran 354-417
 * GFLOP/s on GPT-tiny's forward products (512 rows, K and N 128 to 512)
 * against 319-340 for sgemm with the bias written first and accumulated
 * onto; without a bias sgemm was as fast or faster on half of them
 * (399 against 371 GFLOP/s for 512 x 128 x 512), so it keeps them.
 * Small ones (under MUSA_SMALL_GEMM_MACS) take sgemm too: a primitive
 * call costs ~1.6 us more (its stream and memory objects), and the MLP's
 * 64-row linears took 8.6, 14.4 and 4.7 us a call (eager) against 7.1,
 * 12.6 and 3.2.
 * float64 takes musa_cpu_gemm. The choice depends on the inputs alone: a
 * float32 product whose output is float16 (a float16 linear, its inputs
 * arriving as float32 copies) or not contiguous is computed into a staged
 * float32 buffer and rounded once, as a graph runs it (a float32 linear,
 * then a cast): with the output's dtype choosing the kernel, eager took
 * sgemm where the plan took the primitive, 1 ulp apart in float16
 * (test_jit_fuzz seed 108541). *staged: that buffer's bytes. */
static bool linear_dnnl(const musa_kview *out, const musa_kview *in, int n_in, musa_gemm_shape *s,
                        size_t *ws, size_t *staged) {
    int64_t K = in[1].shape[1], N = in[1].shape[0];
    memset(s, 0, sizeof *s);
    int dt = in[0].dtype;
    *staged = dt == MUSA_DTYPE_FLOAT32 ? nn_stage_bytes(&out[0]) : 0;
    int64_t M = K ? musa_kview_numel(&in[0]) / K : 0;
    bool f32_prim = dt == MUSA_DTYPE_FLOAT32 && n_in == 3 && !small_gemm(M, N, K);
    if (!(dt == MUSA_DTYPE_BFLOAT16 || f32_prim) || !K || !N ||
        (dt == MUSA_DTYPE_BFLOAT16 && (out[0].dtype != dt || !musa_kview_contiguous(&out[0]))))
        return false;
    *s = (musa_gemm_shape){.M = M,
                           .N = N,
                           .K = K,
                           .lda = K,
                           .ldb = K,
                           .ldc = N,
                           .ta = 'N',
                           .tb = 'T',
                           .bias = n_in == 3,
                           .f32 = dt == MUSA_DTYPE_FLOAT32};
    *ws = s->M ? musa_dnnl_gemm_workspace(s) : 0;
    return *ws != (size_t)-1;
}

/* Float32 copies of bfloat16 inputs oneDNN could not take: bytes. */
static size_t lowp_copies(const musa_kview *in, int n_in) {
    if (in[0].dtype != MUSA_DTYPE_BFLOAT16) return 0;
    size_t b = 0;
    for (int i = 0; i < n_in; i++) b += nn_align((size_t)musa_kview_numel(&in[i]) * 4);
    return b;
}

MUSA_WS(ws_linear) {
    MUSA_UNUSED(attrs);
    musa_gemm_shape s;
    size_t bws, staged;
    if (linear_dnnl(out, in, n_in, &s, &bws, &staged)) return staged ? nn_align(bws) + staged : bws;
    return nn_ws_outputs(out, n_out, lowp_copies(in, n_in));
}

int cpu_linear(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
               const void *attrs) {
    MUSA_UNUSED(attrs);
    musa_gemm_shape s;
    size_t bws, staged;
    if (linear_dnnl(out, in, n_in, &s, &bws, &staged)) {
        if (!s.M) return MUSA_OK;
        char *ws = staged ? (char *)ctx->scratch + nn_align(bws) : NULL; /* staged: scratch set */
        if (staged && ctx->scratch_bytes < nn_align(bws) + staged)
            return musa_err(MUSA_ERR_RUNTIME, "[%s] internal: workspace of %zu bytes is short",
                            ctx->op_name, ctx->scratch_bytes);
        nn_out y = staged ? nn_out_begin(&out[0], &ws) : (nn_out){&out[0], out[0].data, false};
        int rc = musa_dnnl_gemm(&s, in[0].data, in[1].data, n_in == 3 ? in[2].data : NULL, y.data,
                                ctx->scratch, bws);
        if (!rc) nn_out_end(&y);
        return rc ? musa_err(rc, "[%s] oneDNN matmul primitive failed", ctx->op_name) : MUSA_OK;
    }
    int cdt = nn_cdt(out[0].dtype);
    size_t es = nn_es(cdt);
    int64_t K = in[1].shape[1], N = in[1].shape[0], M = K ? musa_kview_numel(&in[0]) / K : 0;
    if (!K) M = musa_kview_numel(&out[0]) / (N ? N : 1);
    char *ws = ctx->scratch;
    const char *x = in[0].data, *w = in[1].data, *b = n_in == 3 ? in[2].data : NULL;
    size_t need = nn_ws_outputs(out, 1, lowp_copies(in, n_in));
    if (need > ctx->scratch_bytes) /* planned for the primitive (a switch flipped since) */
        return musa_err(MUSA_ERR_RUNTIME, "[%s] internal: workspace of %zu bytes is short (%zu)",
                        ctx->op_name, ctx->scratch_bytes, need);
    if (in[0].dtype == MUSA_DTYPE_BFLOAT16) { /* bfloat16 oneDNN could not take: float32 copies */
        const char **src[3] = {&x, &w, &b};
        for (int i = 0; i < n_in; i++) {
            musa_kview d = in[i];
            d.data = ws, d.dtype = MUSA_DTYPE_FLOAT32;
            musa_contiguous_strides_k(&d);
            musa_cpu_copy(&d, &in[i]);
            *src[i] = ws;
            ws += nn_align((size_t)musa_kview_numel(&in[i]) * 4);
        }
    }
    nn_out y = nn_out_begin(&out[0], &ws);
    double beta = 0;
    if (b) {
        for (int64_t i = 0; i < M; i++) memcpy(y.data + (size_t)(i * N) * es, b, (size_t)N * es);
        beta = 1;
    }
    int rc = musa_cpu_gemm(cdt, 'N', 'T', M, N, K, 1.0, x, K, w, K, beta, y.data, N);
    nn_out_end(&y);
    return rc;
}
