/*
 * attention.c - fused scaled dot-product attention, forward and backward:
 * softmax(q k^T * scale, masked) v for each matrix of a batch, a block of
 * query rows at a time, without materialising the (Tq x Tk) probabilities
 * of the whole batch.
 *
 * Forward, per (batch matrix, block of BQ query rows): S = scale Q K^T
 * (one product), masked to -inf (causal: keys after the row; a bool mask:
 * where it is false), softmax by softmax.c's own row code, O = P V (one
 * product); each row's log-sum-exp (lse) is kept for the backward, which
 * recomputes P = exp(S - lse) instead of saving it. Backward, per batch
 * matrix (its key-side gradients sum over every query block, so a matrix
 * is one task): dV += P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)),
 * dQ = scale dS K, dK += scale dS^T Q.
 *
 * Arithmetic is float64 for float64 data, float32 for the rest (bfloat16
 * operands are widened when packed, results rounded once when stored). Operands are
 * read in place when they are float32 with unit-stride rows (attention's
 * heads are usually strided views of a projection: (B, T, H, E) seen as
 * (B, H, T, E)), else packed. The products (attention_mm.h: small float32
 * ones on our own kernels, the rest on BLAS; causal ones skip what lies
 * past the diagonal) run on one thread (its task's) and tasks write
 * disjoint outputs, so results do not depend on the thread count: eager
 * calls and plans agree bit for bit. A mask that is exactly the causal
 * triangle runs as causal. With the attribute `exact` (the attention pass's
 * default), float32 calls compute the written-out ops' bits instead (see
 * "eager's bits" below).
 */
#include <cblas.h>
#include <dnnl.h>
#include <math.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <string.h>

#include "attention_mm.h"
#include "nnutil.h"
#include "vmath.h"

#define BQ 64 /* query rows per block */

typedef struct {
    char *p;        /* element [0, 0] of the current batch matrix */
    int64_t rs, cs; /* row and column strides (elements) */
    int64_t bs[MUSA_MAX_DIMS];
    int dt;
} amat;

/* A slot's own run of tasks: it takes them first, in order, then helps
 * the other slots with theirs (as musa_parallel_for's threads do), so a
 * head's inputs are mostly read by the core that the row-split kernels
 * before it wrote them on. */
typedef struct {
    alignas(64) _Atomic int64_t next;
    int64_t end;
} att_range;

typedef struct {
    int64_t nb, bshape[MUSA_MAX_DIMS], BH, Tq, Tk, E, Ev;
    double scale;
    bool causal, f64; /* float64 data: float64 arithmetic */
    int exact;        /* musa_attrs_attention's: 0, or eager's bits (float32) */
    int64_t bq;       /* query rows per block: BQ, or all of them for eager's bits */
    bool plus_zero;   /* musa_attrs_attention's: outputs + 0.0 (store_rows) */
    amat q, k, v, o, g, dq, dk, dv, mask;
    char *lse;
    int64_t lse_bs[MUSA_MAX_DIMS];
    bool has_mask;
    size_t slot_bytes;
    char *scratch;
    int64_t slots;
    att_range *runs; /* slot s's own tasks, [slots] */
} att_job;

/* View v (batch dims first, then rows and columns) as an amat; a bool mask
 * of fewer dims broadcasts from the right over (batch..., Tq, Tk). */
static amat amat_of(const musa_kview *v, int nb) {
    amat m = {.p = v->data, .dt = v->dtype};
    int off = nb + 2 - v->ndim; /* dims the view lacks on the left */
    for (int d = 0; d < nb; d++) {
        int s = d - off;
        m.bs[d] = s >= 0 && v->shape[s] != 1 ? v->strides[s] : 0;
    }
    int r = nb - off, c = nb + 1 - off;
    m.rs = r >= 0 && v->shape[r] != 1 ? v->strides[r] : 0;
    m.cs = c >= 0 && v->shape[c] != 1 ? v->strides[c] : 0;
    return m;
}

/* Element offset of batch matrix bh (last batch dim fastest). */
static int64_t batch_off(const att_job *j, const int64_t *bs, int64_t bh) {
    int64_t off = 0;
    for (int d = (int)j->nb - 1; d >= 0; d--) {
        off += (bh % j->bshape[d]) * bs[d];
        bh /= j->bshape[d];
    }
    return off;
}

static inline char *at(const amat *m, int64_t base, int64_t r) {
    return m->p + (base + r * m->rs) * (int64_t)musa_dtype_info[m->dt].size;
}

/* Whether n rows of m (cols wide) are a GEMM operand as they lie: of the
 * compute dtype cdt, unit column stride, rows apart by at least a row
 * (then *ld is their stride). */
static bool in_place(const amat *m, int cdt, int64_t n, int64_t cols, int64_t *ld) {
    if (m->dt != cdt || (m->cs != 1 && cols != 1) || (n != 1 && m->rs < cols)) return false;
    *ld = n == 1 ? (cols ? cols : 1) : m->rs;
    return true;
}

/* Keys row i of a block may see: causal rows see keys up to themselves. */
static int64_t keys_of(const att_job *j, int64_t i) {
    return j->causal ? (i + 1 < j->Tk ? i + 1 : j->Tk) : j->Tk;
}

/* Whether the mask keeps exactly what causal attention keeps (keys up to
 * the query's own position) in every batch matrix: the usual decoder mask,
 * a tril(ones(T, T)) buffer, or the written-out form's
 * masked_fill(triu(..., 1), -inf) that the attention pass hands over. A
 * check of Tq Tk bytes per call, against products of Tq Tk E
 * multiply-adds that causal attention halves. */
static bool mask_is_causal(const att_job *j) {
    for (int d = 0; d < j->nb; d++)
        if (j->mask.bs[d] != 0 && j->bshape[d] != 1) return false;
    const bool *m = (const bool *)j->mask.p;
    for (int64_t i = 0; i < j->Tq; i++) {
        const bool *row = m + i * j->mask.rs;
        bool ok = true;
        for (int64_t c = 0; c < j->Tk; c++) ok &= row[c * j->mask.cs] == (c <= i);
        if (!ok) return false;
    }
    return true;
}

/* Scratch for a transposed operand (K or V, Tk rows) of a task's products,
 * elements of es bytes. */
static size_t pack_bytes(const att_job *j, size_t es) {
    return nn_align(nn_bytes2(j->Tk, MUSA_MAX(j->E, j->Ev), es));
}

/* A product's band (attention_mm.h): causal attention's, or none. */
static int band_of(const att_job *j, int band) {
    return j->causal ? band : ATT_FULL;
}

/* One-thread GEMMs of the two compute dtypes (row-major, BLAS arguments). */
static inline void gemm_f32(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha,
                            const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                            float *C, int64_t ldc) {
    musa_cpu_omp_threads(1);
    dnnl_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
static inline void gemm_f64(char ta, char tb, int64_t M, int64_t N, int64_t K, double alpha,
                            const double *A, int64_t lda, const double *B, int64_t ldb, double beta,
                            double *C, int64_t ldc) {
    cblas_dgemm(CblasRowMajor, ta == 'N' ? CblasNoTrans : CblasTrans,
                tb == 'N' ? CblasNoTrans : CblasTrans, (blasint)M, (blasint)N, (blasint)K, alpha, A,
                (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}

#define T         float
#define SIMD_MATH MUSA_SIMD_MATH(float)
#define CDT       MUSA_DTYPE_FLOAT32
#define SUF(n)    n##_f32
#define GEMM      gemm_f32
#define FASTMM    att_mm_f32
#define EXPM      musa_exp_masked_f
#define SMROWS    musa_cpu_softmax_rows_f32
#include "attention_impl.h"
#define T               double
#define SIMD_MATH       MUSA_SIMD_MATH(double)
#define CDT             MUSA_DTYPE_FLOAT64
#define SUF(n)          n##_f64
#define GEMM            gemm_f64
#define FASTMM(p, pack) ((void)(pack), false)
#define EXPM            musa_exp_masked_d
#define SMROWS          musa_cpu_softmax_rows_f64
#include "attention_impl.h"

/* ---- eager's bits (musa_attrs_attention.exact, float32) ----
 *
 * The attention pass fuses written-out attention by default only where the
 * fused node can compute what the written-out ops compute, bit for bit: the
 * same operations in the same order, scheduled a head at a time so that the
 * probabilities stay in cache and are never stored. Each element of a
 * product sums its terms in order with fused multiply-adds from zero, on
 * attention_mm.c's kernels, as dnnl_sgemm does for the written-out products
 * in the range the pass allows (musa_cpu_attention_exact_ok, checked once a
 * process by probe_sums). The scale is applied as the graph applied it
 * (`* c`, `/ c`, or not at all), the mask as where(mask, -inf), then
 * softmax's own row code; the backward is softmax_backward's row formula,
 * where(mask, 0), the scale again, and the four products of the matmuls'
 * gradients. The backward recomputes P the same way (its bits are the
 * forward's), so it needs all of a head's query rows in one block: the
 * key-side gradients sum over them in one chain. Causal attention skips
 * the scores past the diagonal (-inf replaces them) and, in the products
 * whose other operand holds no inf or NaN, the masked terms (exact_mm). */
enum { ATT_EXACT_NONE = 1, ATT_EXACT_MUL, ATT_EXACT_DIV };

/* x[0, n) scaled as the written-out scores were */
static void scale_exact(const att_job *j, float *x, int64_t n) {
    float c = (float)j->scale;
    if (j->exact == ATT_EXACT_MUL) {
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) x[i] = x[i] * c;
    } else if (j->exact == ATT_EXACT_DIV) {
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) x[i] = x[i] / c;
    }
}

/* Whether rows x cols of x (ld) hold a value whose bits b give b & mask ==
 * want: 16 lanes of flags, folded once (a reduction folded per row cost a
 * tenth of the backward). */
static bool any_bits(const float *x, int64_t rows, int64_t cols, int64_t ld, uint32_t mask,
                     uint32_t want) {
    typedef uint32_t v16u __attribute__((vector_size(64)));
    v16u f = {0}, m = (v16u){0} + mask, w = (v16u){0} + want; /* (broadcasts) */
    uint32_t tail = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ld;
        int64_t c = 0;
        for (; c + 16 <= cols; c += 16) {
            v16u b;
            memcpy(&b, xr + c, sizeof b);
            f |= (v16u)((b & m) == w);
        }
        for (; c < cols; c++) {
            uint32_t b;
            memcpy(&b, xr + c, sizeof b);
            tail |= (b & mask) == want;
        }
    }
    for (int k = 0; k < 16; k++) tail |= f[k];
    return tail != 0;
}

/* no inf or NaN: no exponent of all ones */
static bool all_finite(const float *x, int64_t rows, int64_t cols, int64_t ld) {
    return !any_bits(x, rows, cols, ld, 0x7f800000u, 0x7f800000u);
}

static bool has_negative_zero(const float *x, int64_t rows, int64_t cols, int64_t ld) {
    return any_bits(x, rows, cols, ld, 0xffffffffu, 0x80000000u);
}

/* C (M x N, ldc) = op(A) op(B) over the reduction K, on this thread.
 * band (ATT_K_BELOW or ATT_K_ABOVE, diag 0) skips the terms where A holds
 * a masked +-0 of causal attention, when that gives the whole sum's bits:
 * `finite` says B holds no inf or NaN (0 times one is NaN); a skipped term
 * is then a signed zero, which leaves a sum unchanged except a -0, which a
 * +0 term after it turns into +0. Skipped leading terms leave the sum at
 * its +0 start; skipped trailing ones are redone in full when a result is
 * -0. */
static void exact_mm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, bool at,
                     const float *B, int64_t ldb, bool bt, float *C, int64_t ldc, char *pack,
                     int band, bool finite) {
    att_mm p = {.M = M,
                .N = N,
                .K = K,
                .A = A,
                .lda = lda,
                .at = at,
                .B = B,
                .ldb = ldb,
                .bt = bt,
                .C = C,
                .ldc = ldc,
                .alpha = 1,
                .band = finite ? band : ATT_FULL};
    mm_f32(&p, pack);
    if (p.band == ATT_K_BELOW && has_negative_zero(C, M, N, ldc)) {
        p.band = ATT_FULL;
        mm_f32(&p, pack);
    }
}

#ifdef __AVX512F__
/* Whether this oneDNN's sgemm sums as attention_mm.c's kernels do, on a few
 * products of the range the pass allows, every layout (once a process: a
 * oneDNN that sums otherwise turns the mode off instead of breaking the
 * bits). */
static bool sums_agree;
static void probe_sums(void) {
    static const int shapes[][3] = {{16, 2, 1},   {16, 16, 16},  {64, 64, 32},
                                    {64, 32, 64}, {33, 17, 100}, {128, 128, 128}};
    enum { MOST = 128 * 128 };
    float *a = musa_malloc(sizeof(float) * 4 * MOST, "attention"); /* a, b, pack */
    float *c1 = musa_malloc(sizeof(float) * 2 * MOST, "attention");
    if (!a || !c1) { /* the mode stays off */
        free(a), free(c1);
        musa_clear_error();
        return;
    }
    float *b = a + MOST, *c2 = c1 + MOST;
    char *pack = (char *)(b + MOST);
    int had = musa_cpu_omp_threads(1); /* dnnl_sgemm on one thread, as in a head's task */
    uint32_t x = 12345u;
    for (int i = 0; i < 2 * MOST; i++) { /* values in [-1, 1), rounding in every sum */
        x = x * 1664525u + 1013904223u;
        a[i] = (float)(x >> 8) / (float)(1u << 23) - 1.0f;
    }
    bool ok = true;
    for (size_t s = 0; ok && s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; ok && t < 4; t++) {
            int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            bool ta = t & 1, tb = t >> 1;
            int64_t lda = ta ? M : K, ldb = tb ? K : N;
            dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1, a, lda, b, ldb, 0, c1, N);
            exact_mm(M, N, K, a, lda, ta, b, ldb, tb, c2, N, pack, ATT_FULL, false);
            ok = !memcmp(c1, c2, sizeof(float) * (size_t)(M * N));
        }
    musa_cpu_omp_threads(had);
    sums_agree = ok;
    free(a), free(c1);
}
#endif

bool musa_cpu_attention_exact_ok(int dtype, int64_t Tq, int64_t Tk, int64_t E, int64_t Ev) {
#ifdef __AVX512F__
    /* The written-out products' shapes (M x N x K; eager runs them on
     * dnnl_sgemm): Tq x Tk x E, Tq x Ev x Tk, Tq x Tk x Ev, Tk x Ev x Tq,
     * Tq x E x Tk and E x Tk x Tq or Tk x E x Tq. Measured here, one
     * thread, K up to 128, all four layouts: dnnl_sgemm sums each element
     * in order with fused multiply-adds when M >= 16 and N >= 2; below 16
     * rows, or in one column, other kernels sum otherwise (19 or 20 of 84 K and
     * layout pairs at every M < 16). At most 128: attention_mm.c's kernels
     * take every product. */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (dtype != MUSA_DTYPE_FLOAT32 || Tq < 16 || Tk < 16 || E < 16 || Ev < 2 || Tq > 128 ||
        Tk > 128 || E > 128 || Ev > 128)
        return false;
    pthread_once(&once, probe_sums);
    return sums_agree;
#else
    MUSA_UNUSED(dtype), MUSA_UNUSED(Tq), MUSA_UNUSED(Tk), MUSA_UNUSED(E), MUSA_UNUSED(Ev);
    return false;
#endif
}

/* P (Tq x Tk) of batch matrix bh: q k^T (causal: not past the diagonal,
 * which -inf replaces), scaled, masked, softmax. */
static void exact_probs(const att_job *j, int64_t bh, const float *Q, int64_t ldq, const float *K,
                        int64_t ldk, float *P, float *lse, char *pack) {
    int64_t Tq = j->Tq, Tk = j->Tk;
    exact_mm(Tq, Tk, j->E, Q, ldq, false, K, ldk, true, P, Tk, pack, band_of(j, ATT_COLS), true);
    scale_exact(j, P, Tq * Tk);
    for (int64_t r = 0; r < Tq; r++) fill_masked_f32(j, bh, r, Tk, P + r * Tk, -INFINITY);
    musa_cpu_softmax_rows_f32(P, Tq, Tk, lse);
}

/* One task a batch matrix (bq is Tq). */
static void fwd_exact(att_job *j, int64_t bh, char *ws) {
    int64_t Tq = j->Tq, Tk = j->Tk, Ev = j->Ev;
    int64_t qb = batch_off(j, j->q.bs, bh), kb = batch_off(j, j->k.bs, bh);
    int64_t vb = batch_off(j, j->v.bs, bh), ob = batch_off(j, j->o.bs, bh);
    int64_t ldq, ldk, ldv, ldo;
    float *O = out_rows_f32(&j->o, ob, 0, Tq, Ev, &ws, &ldo);
    const float *Q = rows_f32(&j->q, qb, 0, Tq, j->E, &ws, &ldq);
    const float *K = rows_f32(&j->k, kb, 0, Tk, j->E, &ws, &ldk);
    const float *V = rows_f32(&j->v, vb, 0, Tk, Ev, &ws, &ldv);
    float *P = (float *)ws;
    char *pack = ws + nn_align((size_t)(Tq * Tk) * sizeof(float));
    exact_probs(j, bh, Q, ldq, K, ldk, P, lse_row_f32(j, bh, 0), pack);
    /* causal: P is +0 past the diagonal when its row holds no NaN, and a
     * row that does is NaN throughout */
    exact_mm(Tq, Ev, Tk, P, Tk, false, V, ldv, false, O, ldo, pack, band_of(j, ATT_K_BELOW),
             j->causal && all_finite(V, Tk, Ev, ldv));
    store_rows_f32(j, &j->o, ob, 0, Tq, Ev, O);
}

static void bwd_exact(att_job *j, int64_t bh, char *ws) {
    int64_t Tq = j->Tq, Tk = j->Tk, E = j->E, Ev = j->Ev;
    int64_t qb = batch_off(j, j->q.bs, bh), kb = batch_off(j, j->k.bs, bh);
    int64_t vb = batch_off(j, j->v.bs, bh), gb = batch_off(j, j->g.bs, bh);
    int64_t dqb = batch_off(j, j->dq.bs, bh), dkb = batch_off(j, j->dk.bs, bh);
    int64_t dvb = batch_off(j, j->dv.bs, bh), ldq, ldk, ldv, ldg, lddq, lddk, lddv;
    float *dK = out_rows_f32(&j->dk, dkb, 0, Tk, E, &ws, &lddk);
    float *dV = out_rows_f32(&j->dv, dvb, 0, Tk, Ev, &ws, &lddv);
    float *dQ = out_rows_f32(&j->dq, dqb, 0, Tq, E, &ws, &lddq);
    const float *K = rows_f32(&j->k, kb, 0, Tk, E, &ws, &ldk);
    const float *V = rows_f32(&j->v, vb, 0, Tk, Ev, &ws, &ldv);
    const float *Q = rows_f32(&j->q, qb, 0, Tq, E, &ws, &ldq);
    const float *G = rows_f32(&j->g, gb, 0, Tq, Ev, &ws, &ldg);
    float *P = (float *)ws;
    ws += nn_align((size_t)(Tq * Tk) * sizeof(float));
    float *dS = (float *)ws;
    ws += nn_align((size_t)(Tq * Tk) * sizeof(float));
    float *lse = (float *)ws; /* recomputed and not needed */
    char *pack = ws + nn_align((size_t)Tq * sizeof(float));
    exact_probs(j, bh, Q, ldq, K, ldk, P, lse, pack);
    /* causal: P and dS are +-0 past the diagonal (P's rows when they hold
     * no NaN), terms the key-side sums meet first and dS K meets last */
    bool c = j->causal;
    int above = band_of(j, ATT_K_ABOVE), below = band_of(j, ATT_K_BELOW);
    exact_mm(Tk, Ev, Tq, P, Tk, true, G, ldg, false, dV, lddv, pack, above,
             c && all_finite(G, Tq, Ev, ldg) && all_finite(P, Tq, Tk, Tk)); /* P^T dO */
    exact_mm(Tq, Tk, Ev, G, ldg, false, V, ldv, true, dS, Tk, pack, ATT_FULL,
             false); /* dP = dO V^T, whole: softmax's backward reads it times P */
    musa_cpu_softmax_backward_rows_f32(dS, dS, P, Tq, Tk);
    for (int64_t r = 0; r < Tq; r++) fill_masked_f32(j, bh, r, Tk, dS + r * Tk, 0.0f);
    scale_exact(j, dS, Tq * Tk);
    exact_mm(Tq, E, Tk, dS, Tk, false, K, ldk, false, dQ, lddq, pack, below,
             c && all_finite(K, Tk, E, ldk)); /* dS K */
    exact_mm(Tk, E, Tq, dS, Tk, true, Q, ldq, false, dK, lddk, pack, above,
             c && all_finite(Q, Tq, E, ldq)); /* dS^T Q */
    store_rows_f32(j, &j->dq, dqb, 0, Tq, E, dQ);
    store_rows_f32(j, &j->dk, dkb, 0, Tk, E, dK);
    store_rows_f32(j, &j->dv, dvb, 0, Tk, Ev, dV);
}

/* Scratch of one task: staging and packs of every operand (an upper bound;
 * unused parts cost nothing) and the score blocks. */
static size_t slot_bytes(const att_job *j, bool bwd) {
    size_t f = j->f64 ? sizeof(double) : sizeof(float);
    int64_t bq = j->Tq < j->bq ? j->Tq : j->bq, Tk = j->Tk, E = j->E, Ev = j->Ev;
    /* saturating (nnutil.h): an expanded key of 2^62 rows wrapped these
     * sizes to a few bytes, which the packs then overran */
    size_t kv = musa_sat_add_size(nn_align(nn_bytes2(Tk, E, f)), nn_align(nn_bytes2(Tk, Ev, f)));
    size_t r = nn_align(nn_bytes2(bq, E > Ev ? E : Ev, f));
    size_t rows = musa_sat_add_size(musa_sat_add_size(musa_sat_add_size(r, r), r),
                                    nn_align(nn_bytes2(bq, Ev, f)));
    size_t s = nn_align(nn_bytes2(bq, Tk, f));
    size_t pk = pack_bytes(j, f);
    if (!bwd) return musa_sat_add_size(musa_sat_add_size(kv, rows), musa_sat_add_size(s, pk));
    return musa_sat_add_size(musa_sat_add_size(musa_sat_add_size(kv, kv), rows),
                             musa_sat_add_size(musa_sat_add_size(s, s),
                                               musa_sat_add_size(nn_align((size_t)bq * f), pk)));
}

/* Tasks of a call: a batch matrix each backward, a block of query rows
 * each forward. */
static int64_t job_tasks(const att_job *j, bool bwd) {
    return bwd ? j->BH : j->BH * ((j->Tq + j->bq - 1) / j->bq);
}

static void att_run(void *arg, int64_t s0, int64_t s1, bool bwd) {
    att_job *j = arg;
    for (int64_t s = s0; s < s1; s++) {
        char *ws = j->scratch + (size_t)s * j->slot_bytes;
        for (int64_t k = 0; k < j->slots; k++) {
            att_range *r = &j->runs[(s + k) % j->slots]; /* its own run, then the others' */
            for (int64_t t; (t = atomic_fetch_add(&r->next, 1)) < r->end;) {
                if (musa_interrupt_pending()) return; /* reported by the caller */
                if (j->f64)
                    (bwd ? bwd_task_f64 : fwd_task_f64)(j, t, ws);
                else if (j->exact)
                    (bwd ? bwd_exact : fwd_exact)(j, t, ws);
                else
                    (bwd ? bwd_task_f32 : fwd_task_f32)(j, t, ws);
            }
        }
    }
}
static void fwd_slots(void *arg, int64_t s0, int64_t s1) {
    att_run(arg, s0, s1, false);
}
static void bwd_slots(void *arg, int64_t s0, int64_t s1) {
    att_run(arg, s0, s1, true);
}

/* The job of a call: forward in = (q, k, v[, mask]), out = (o, lse);
 * backward in = (g, q, k, v, o, lse[, mask]), out = (dq, dk, dv). */
static void job_of(att_job *j, const musa_kview *out, const musa_kview *in, int n_in, bool bwd,
                   const void *attrs) {
    const musa_attrs_attention *a = attrs;
    const musa_kview *q = &in[bwd], *k = &in[bwd + 1], *v = &in[bwd + 2];
    memset(j, 0, sizeof *j);
    j->nb = q->ndim - 2;
    j->BH = 1;
    for (int d = 0; d < j->nb; d++) j->bshape[d] = q->shape[d], j->BH *= q->shape[d];
    j->Tq = q->shape[q->ndim - 2], j->E = q->shape[q->ndim - 1];
    j->Tk = k->shape[k->ndim - 2], j->Ev = v->shape[v->ndim - 1];
    j->scale = a->scale, j->causal = a->causal, j->f64 = q->dtype == MUSA_DTYPE_FLOAT64;
    /* eager's bits are float32's (the pass asks for them only there) */
    j->exact = j->f64 ? 0 : (int)a->exact;
    j->bq = j->exact ? MUSA_MAX(j->Tq, 1) : BQ;
    j->plus_zero = a->plus_zero;
    int nb = (int)j->nb;
    j->q = amat_of(q, nb), j->k = amat_of(k, nb), j->v = amat_of(v, nb);
    j->has_mask = n_in == (bwd ? 7 : 4);
    if (j->has_mask) j->mask = amat_of(&in[n_in - 1], nb);
    const musa_kview *lse = bwd ? &in[5] : &out[1];
    j->lse = lse->data;
    for (int d = 0; d < nb; d++) j->lse_bs[d] = lse->shape[d] != 1 ? lse->strides[d] : 0;
    if (bwd) {
        j->g = amat_of(&in[0], nb), j->o = amat_of(&in[4], nb);
        j->dq = amat_of(&out[0], nb), j->dk = amat_of(&out[1], nb), j->dv = amat_of(&out[2], nb);
    } else {
        j->o = amat_of(&out[0], nb);
    }
    j->slot_bytes = slot_bytes(j, bwd);
}

static size_t ws_att(const musa_kview *out, const musa_kview *in, int n_in, const void *attrs,
                     bool bwd) {
    att_job j;
    job_of(&j, out, in, n_in, bwd, attrs);
    int64_t tasks = job_tasks(&j, bwd);
    int64_t slots = musa_pool_threads() < tasks ? musa_pool_threads() : tasks;
    if (slots <= 0) return 0;
    return musa_sat_mul_size((size_t)slots, j.slot_bytes);
}

MUSA_WS(ws_scaled_dot_product_attention) {
    MUSA_UNUSED(n_out);
    return ws_att(out, in, n_in, attrs, false);
}
MUSA_WS(ws_scaled_dot_product_attention_backward) {
    MUSA_UNUSED(n_out);
    return ws_att(out, in, n_in, attrs, true);
}

static int att_call(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                    const void *attrs, bool bwd) {
    att_job j;
    job_of(&j, out, in, n_in, bwd, attrs);
    int64_t tasks = job_tasks(&j, bwd);
    if (tasks == 0) return MUSA_OK;
    if (j.has_mask && !j.causal && mask_is_causal(&j)) /* the same scores, fewer products */
        j.has_mask = false, j.causal = true;
    /* float64 runs OpenBLAS's dgemm, whose own threads are not for calls
     * from several threads at once: one slot */
    int64_t slots = j.f64 ? 1 : musa_pool_intra_threads();
    if (slots > tasks) slots = tasks;
    if (j.slot_bytes && (size_t)slots * j.slot_bytes > ctx->scratch_bytes)
        slots = (int64_t)(ctx->scratch_bytes / j.slot_bytes);
    if (slots < 1)
        return musa_err(MUSA_ERR_RUNTIME, "[%s] internal: workspace of %zu bytes is short",
                        ctx->op_name, ctx->scratch_bytes);
    j.scratch = ctx->scratch;
    att_range runs[MUSA_MAX_THREADS];
    j.slots = slots, j.runs = runs;
    for (int64_t s = 0; s < slots; s++) {
        int64_t per = tasks / slots, extra = tasks % slots; /* no product to overflow */
        atomic_init(&runs[s].next, per * s + MUSA_MIN(s, extra));
        runs[s].end = per * (s + 1) + MUSA_MIN(s + 1, extra);
    }
    musa_parallel_for(slots, 1, bwd ? bwd_slots : fwd_slots, &j);
    return MUSA_OK; /* an interrupt left work undone: the dispatcher reports it */
}

int cpu_scaled_dot_product_attention(const musa_kctx *ctx, musa_kview *out, const musa_kview *in,
                                     int n_in, const void *attrs) {
    return att_call(ctx, out, in, n_in, attrs, false);
}

int cpu_scaled_dot_product_attention_backward(const musa_kctx *ctx, musa_kview *out,
                                              const musa_kview *in, int n_in, const void *attrs) {
    return att_call(ctx, out, in, n_in, attrs, true);
}
