/*
 * attention_mm.c - the float32 products of fused attention on one thread,
 * as register-blocked AVX-512 kernels (see attention_mm.h).
 *
 * Attention's products are small (a block of 64 query rows against a head
 * of 32 to 128 columns), where a BLAS call costs as much as its arithmetic
 * (dnnl_sgemm: 2.2 us for a 64 x 64 x 32 product, 120 GFLOP/s), and causal
 * attention needs only the lower triangle of its scores. A kernel here
 * keeps a block of 8 (or 4) rows by up to 64 columns of C in registers and
 * streams the reduction through them; a block computes only the columns
 * and reduction range its rows need. Blocks overlap the triangle by at
 * most a block's height: the extra columns are masked by the caller, and
 * the extra reduction terms are exact zeros.
 */
#include "attention_mm.h"

#include "../../base/base.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

#define SMALL 128 /* the largest M, N and K taken here */

#ifdef __AVX512F__
/* C rows [0, mr) (mr <= MR), nv 16-column vectors (the last masked by
 * `last`) = alpha sum_{k0 <= k < k1} A(r, k) B(k, :) [+ C]. Rows past mr
 * repeat row 0 and are not stored. MR and NV are constants at every call,
 * so acc stays in registers. */
static inline __attribute__((always_inline)) void block(const int MR, const int NV, int64_t mr,
                                                        const float *A, int64_t ars, int64_t acs,
                                                        const float *B, int64_t ldb, int64_t k0,
                                                        int64_t k1, __mmask16 last, float *C,
                                                        int64_t ldc, float alpha, bool accumulate) {
    __m512 acc[8][4];
    const float *ar[8];
    for (int r = 0; r < MR; r++) {
        ar[r] = A + (r < mr ? r : 0) * ars;
        for (int v = 0; v < NV; v++) acc[r][v] = _mm512_setzero_ps();
    }
    for (int64_t k = k0; k < k1; k++) {
        __m512 b[4];
        const float *bk = B + k * ldb;
        for (int v = 0; v < NV; v++)
            b[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(last, bk + 16 * v)
                               : _mm512_loadu_ps(bk + 16 * v);
        for (int r = 0; r < MR; r++) {
            __m512 a = _mm512_set1_ps(ar[r][k * acs]);
            for (int v = 0; v < NV; v++) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
        }
    }
    __m512 al = _mm512_set1_ps(alpha);
    for (int r = 0; r < MR; r++) {
        if (r >= mr) break;
        for (int v = 0; v < NV; v++) {
            __mmask16 m = v == NV - 1 ? last : (__mmask16)0xFFFF;
            float *c = C + r * ldc + 16 * v;
            __m512 o = accumulate ? _mm512_fmadd_ps(al, acc[r][v], _mm512_maskz_loadu_ps(m, c))
                                  : _mm512_mul_ps(al, acc[r][v]);
            _mm512_mask_storeu_ps(c, m, o);
        }
    }
}

/* The 16 x 16 block at dst (ld) = the transpose of the nr x nc block at
 * src (lds), zeros outside it; only the first nc rows of dst are stored. */
static inline void tr16(float *dst, int64_t ld, const float *src, int64_t lds, int nr, int nc) {
    __m512 r[16], t[16];
    __mmask16 m = (__mmask16)(0xFFFFu >> (16 - nc));
    for (int i = 0; i < 16; i++)
        r[i] = i < nr ? _mm512_maskz_loadu_ps(m, src + i * lds) : _mm512_setzero_ps();
    for (int i = 0; i < 16; i += 2) { /* pairs of rows interleaved */
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* 4 x 4 blocks within each lane */
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int h = 0; h < 16; h += 8) /* lanes across row groups 4 apart */
        for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xDD);
        }
    for (int i = 0; i < 8; i++) { /* and 8 apart */
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    }
    __mmask16 w = (__mmask16)(0xFFFFu >> (16 - nr));
    for (int i = 0; i < nc; i++) _mm512_mask_storeu_ps(dst + i * ld, w, r[i]);
}

/* dst (rows x cols, ld) = the transpose of src (cols x rows, lds), in
 * 16 x 16 blocks (a scalar loop was a fifth of a 64-key product's time,
 * and gathers a sixth). */
static void transpose(float *dst, int64_t ld, const float *src, int64_t lds, int64_t rows,
                      int64_t cols) {
    for (int64_t c = 0; c < cols; c += 16)
        for (int64_t r = 0; r < rows; r += 16)
            tr16(dst + r * ld + c, ld, src + c * lds + r, lds, (int)MUSA_MIN(16, cols - c),
                 (int)MUSA_MIN(16, rows - r));
}

#endif

/* Columns row i of C needs. */
static inline int64_t cols_to(const att_mm *p, int64_t i) {
    return p->band == ATT_COLS ? i + p->diag + 1 : p->N;
}

bool att_mm_f32(const att_mm *p, float *pack) {
#ifndef __AVX512F__
    MUSA_UNUSED(p), MUSA_UNUSED(pack);
    return false;
#else
    int64_t M = p->M, N = p->N, K = p->K;
    /* Larger products stream B from beyond L1 for every block of rows:
     * BLAS packs and tiles them better (measured: 2-4x slower here at
     * 1024 keys). Up to 128 x 128, B and a transposed copy stay in L1. A
     * taller C reads a transposed A (P^T, dS^T) down rows 4 KiB apart at
     * 1024 keys: 5-9% slower than BLAS there. */
    if (K > SMALL || N > SMALL || M > SMALL) return false;
    /* columns any row needs */
    int64_t ncols = M ? MUSA_MIN(N, cols_to(p, M - 1)) : 0;
    if (ncols <= 0) return true;
    const float *B = p->B, *A = p->A;
    int64_t ldb = p->ldb, ars = p->at ? 1 : p->lda, acs = p->at ? p->lda : 1;
    if (p->bt) { /* B stored transposed: copy its rows to columns */
        transpose(pack, ncols, B, p->ldb, K, ncols);
        B = pack, ldb = ncols;
    }
    float alpha = (float)p->alpha, *C = p->C;
    for (int64_t i = 0; i < M; i += 8) {
        int64_t mr = MUSA_MIN(8, M - i), last_row = i + mr - 1;
        int64_t n = MUSA_MIN(ncols, cols_to(p, last_row));
        int64_t k0 = p->band == ATT_K_ABOVE ? MUSA_MAX(0, i - p->diag) : 0;
        int64_t k1 = p->band == ATT_K_BELOW ? MUSA_MIN(K, last_row + p->diag + 1) : K;
        if (k1 < k0) k1 = k0;
        const float *Ai = A + i * ars;
        float *Ci = C + i * p->ldc;
        for (int64_t c0 = 0; c0 < n; c0 += 64) {
            int64_t w = MUSA_MIN(64, n - c0);
            int nv = (int)((w + 15) / 16);
            __mmask16 last = (__mmask16)(0xFFFFu >> (16 * nv - w));
            const float *Bc = B + c0;
            float *Cc = Ci + c0;
            switch (nv) {
            case 1:
                block(8, 1, mr, Ai, ars, acs, Bc, ldb, k0, k1, last, Cc, p->ldc, alpha,
                      p->accumulate);
                break;
            case 2:
                block(8, 2, mr, Ai, ars, acs, Bc, ldb, k0, k1, last, Cc, p->ldc, alpha,
                      p->accumulate);
                break;
            default: /* 3 or 4 vectors: two blocks of 4 rows */
                for (int64_t h = 0; h < mr; h += 4) {
                    const float *Ah = Ai + h * ars;
                    float *Ch = Cc + h * p->ldc;
                    if (nv == 3)
                        block(4, 3, MUSA_MIN(4, mr - h), Ah, ars, acs, Bc, ldb, k0, k1, last, Ch,
                              p->ldc, alpha, p->accumulate);
                    else
                        block(4, 4, MUSA_MIN(4, mr - h), Ah, ars, acs, Bc, ldb, k0, k1, last, Ch,
                              p->ldc, alpha, p->accumulate);
                }
            }
        }
    }
    return true;
#endif
}
