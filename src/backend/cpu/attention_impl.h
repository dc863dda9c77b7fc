/*
 * attention_impl.h - the dtype-generic part of attention.c, included once
 * per compute dtype with T (float or double; SIMD_MATH its vector-math
 * pragma), CDT (its musa dtype),
 * SUF(name) (name with the dtype's suffix), GEMM (one-thread GEMM, BLAS
 * arguments, row-major), FASTMM (attention_mm.h's kernels for the dtype, or
 * none), EXPM (musa_exp_masked_*) and SMROWS (softmax.c's row softmax with
 * log-sum-exp); it undefines them at its end.
 */
/* C (M x N, ldc) = alpha op(A) op(B) + beta C on this thread. K == 0 is an
 * empty sum (C = beta C), which sgemm would not take. */
static void SUF(sg)(char ta, char tb, int64_t M, int64_t N, int64_t K, T alpha, const T *A,
                    int64_t lda, const T *B, int64_t ldb, T beta, T *C, int64_t ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t c = 0; c < N; c++) C[i * ldc + c] = beta == 0 ? 0 : beta * C[i * ldc + c];
        return;
    }
    GEMM(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Product p (attention_mm.h) on this thread: the dtype's own kernels when it
 * has them, else BLAS over the whole product (the bounds are only skips). */
static void SUF(mm)(const att_mm *p, char *pack) {
    if (p->M == 0 || p->N == 0 || FASTMM(p, (T *)pack)) return;
    SUF(sg)
    (p->at ? 'T' : 'N', p->bt ? 'T' : 'N', p->M, p->N, p->K, (T)p->alpha, p->A, p->lda, p->B,
     p->ldb, p->accumulate ? 1 : 0, p->C, p->ldc);
}

/* Rows [r0, r0 + n) of matrix m (cols wide) at batch offset base, as a
 * compute-dtype matrix with unit column stride: its own memory when it is one,
 * else a packed copy in *ws. Sets *ld. */
static const T *SUF(rows)(const amat *m, int64_t base, int64_t r0, int64_t n, int64_t cols,
                          char **ws, int64_t *ld) {
    if (in_place(m, CDT, n, cols, ld)) return (const T *)at(m, base, r0);
    T *d = (T *)*ws;
    *ws += nn_align((size_t)(n * cols) * sizeof(T));
    musa_kview s = {.data = at(m, base, r0),
                    .dtype = m->dt,
                    .ndim = 2,
                    .shape = {n, cols},
                    .strides = {m->rs, m->cs}};
    musa_kview t = {
        .data = (char *)d, .dtype = CDT, .ndim = 2, .shape = {n, cols}, .strides = {cols, 1}};
    musa_cpu_copy(&t, &s);
    *ld = cols ? cols : 1;
    return d;
}

/* Where rows [r0, r0 + n) of output m get written: in place when of the
 * compute dtype with unit column stride, else a staging block in *ws (store_rows then
 * rounds it into m). */
static T *SUF(out_rows)(const amat *m, int64_t base, int64_t r0, int64_t n, int64_t cols, char **ws,
                        int64_t *ld) {
    if (in_place(m, CDT, n, cols, ld)) return (T *)at(m, base, r0);
    T *d = (T *)*ws;
    *ws += nn_align((size_t)(n * cols) * sizeof(T));
    *ld = cols ? cols : 1;
    return d;
}

static void SUF(store_rows)(const att_job *j, const amat *m, int64_t base, int64_t r0, int64_t n,
                            int64_t cols, T *src) {
    bool in_place = (const char *)src == at(m, base, r0);
    if (j->plus_zero) { /* -0 becomes +0, nothing else changes */
        int64_t ld = in_place ? m->rs : cols;
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < cols; c++) src[r * ld + c] += (T)0;
    }
    if (in_place) return;
    musa_kview s = {
        .data = (char *)src, .dtype = CDT, .ndim = 2, .shape = {n, cols}, .strides = {cols, 1}};
    musa_kview t = {.data = at(m, base, r0),
                    .dtype = m->dt,
                    .ndim = 2,
                    .shape = {n, cols},
                    .strides = {m->rs, m->cs}};
    musa_cpu_copy(&t, &s);
}

/* Keys [0, kn) that query row i may not see (past the diagonal when causal,
 * False in the mask) get `fill` in row s. */
static void SUF(fill_masked)(const att_job *j, int64_t bh, int64_t i, int64_t kn, T *s, T fill) {
    for (int64_t c = keys_of(j, i); c < kn; c++) s[c] = fill;
    if (!j->has_mask) return;
    const bool *m = (const bool *)j->mask.p + batch_off(j, j->mask.bs, bh) + i * j->mask.rs;
    int64_t c = 0;
    if (j->mask.cs == 1) /* eight keys a word: masks come in runs (a branch per key
                          * was a fifth of a 64-key forward) */
        for (; c + 8 <= kn; c += 8) {
            uint64_t w;
            memcpy(&w, m + c, 8);
            if (w == 0x0101010101010101u) continue;
            for (int e = 0; e < 8; e++)
                if (!w || !m[c + e]) s[c + e] = fill;
        }
    for (; c < kn; c++)
        if (!m[c * j->mask.cs]) s[c] = fill;
}

/* S (n x kn, ld kn) = scale Q[i0:i0+n] K[:kn]^T, then -inf where masked
 * (pack: scratch for K^T). */
static void SUF(scores)(const att_job *j, int64_t bh, int64_t i0, int64_t n, int64_t kn, const T *Q,
                        int64_t ldq, const T *K, int64_t ldk, T *S, char *pack) {
    att_mm prod_scores = {.M = n,
                          .N = kn,
                          .K = j->E,
                          .A = Q,
                          .lda = ldq,
                          .B = K,
                          .ldb = ldk,
                          .bt = true,
                          .C = S,
                          .ldc = kn,
                          .alpha = j->scale,
                          .band = band_of(j, ATT_COLS),
                          .diag = i0};
    SUF(mm)(&prod_scores, pack);
    for (int64_t r = 0; r < n; r++) SUF(fill_masked)(j, bh, i0 + r, kn, S + r * kn, -INFINITY);
}

static T *SUF(lse_row)(const att_job *j, int64_t bh, int64_t i) {
    return (T *)j->lse + batch_off(j, j->lse_bs, bh) + i;
}

static void SUF(fwd_task)(att_job *j, int64_t t, char *ws) {
    int64_t nqb = (j->Tq + BQ - 1) / BQ, bh = t / nqb, i0 = (t % nqb) * BQ;
    int64_t n = j->Tq - i0 < BQ ? j->Tq - i0 : BQ;
    int64_t kn = keys_of(j, i0 + n - 1);
    int64_t qb = batch_off(j, j->q.bs, bh), kb = batch_off(j, j->k.bs, bh);
    int64_t vb = batch_off(j, j->v.bs, bh), ob = batch_off(j, j->o.bs, bh);
    T *lse = SUF(lse_row)(j, bh, i0);
    int64_t ldq, ldk, ldv, ldo;
    T *O = SUF(out_rows)(&j->o, ob, i0, n, j->Ev, &ws, &ldo);
    if (kn == 0) { /* no keys: an empty sum, as softmax over nothing */
        for (int64_t r = 0; r < n; r++) {
            lse[r] = -INFINITY;
            for (int64_t c = 0; c < j->Ev; c++) O[r * ldo + c] = 0;
        }
        SUF(store_rows)(j, &j->o, ob, i0, n, j->Ev, O);
        return;
    }
    const T *Q = SUF(rows)(&j->q, qb, i0, n, j->E, &ws, &ldq);
    const T *K = SUF(rows)(&j->k, kb, 0, kn, j->E, &ws, &ldk);
    const T *V = SUF(rows)(&j->v, vb, 0, kn, j->Ev, &ws, &ldv);
    T *S = (T *)ws;
    char *pack = ws + nn_align((size_t)(n * kn) * sizeof(T));
    SUF(scores)(j, bh, i0, n, kn, Q, ldq, K, ldk, S, pack);
    SMROWS(S, n, kn, lse);
    att_mm prod_pv = {.M = n,
                      .N = j->Ev,
                      .K = kn,
                      .A = S,
                      .lda = kn,
                      .B = V,
                      .ldb = ldv,
                      .C = O,
                      .ldc = ldo,
                      .alpha = 1,
                      .band = band_of(j, ATT_K_BELOW),
                      .diag = i0};
    SUF(mm)(&prod_pv, pack);
    SUF(store_rows)(j, &j->o, ob, i0, n, j->Ev, O);
}

static void SUF(bwd_task)(att_job *j, int64_t bh, char *ws) {
    int64_t qb = batch_off(j, j->q.bs, bh), kb = batch_off(j, j->k.bs, bh);
    int64_t vb = batch_off(j, j->v.bs, bh), ob = batch_off(j, j->o.bs, bh);
    int64_t gb = batch_off(j, j->g.bs, bh), dqb = batch_off(j, j->dq.bs, bh);
    int64_t dkb = batch_off(j, j->dk.bs, bh), dvb = batch_off(j, j->dv.bs, bh);
    int64_t Tk = j->Tk, ldk, ldv, lddk, lddv;
    T *dK = SUF(out_rows)(&j->dk, dkb, 0, Tk, j->E, &ws, &lddk);
    T *dV = SUF(out_rows)(&j->dv, dvb, 0, Tk, j->Ev, &ws, &lddv);
    for (int64_t r = 0; r < Tk; r++) {
        memset(dK + r * lddk, 0, sizeof(T) * (size_t)j->E);
        memset(dV + r * lddv, 0, sizeof(T) * (size_t)j->Ev);
    }
    const T *K = SUF(rows)(&j->k, kb, 0, Tk, j->E, &ws, &ldk);
    const T *V = SUF(rows)(&j->v, vb, 0, Tk, j->Ev, &ws, &ldv);
    int64_t bq = j->Tq < BQ ? j->Tq : BQ;
    T *P = (T *)ws;
    ws += nn_align((size_t)(bq * Tk) * sizeof(T));
    T *dP = (T *)ws;
    ws += nn_align((size_t)(bq * Tk) * sizeof(T));
    T *D = (T *)ws;
    ws += nn_align((size_t)bq * sizeof(T));
    char *pack = ws; /* transposed operands */
    char *blk = ws + pack_bytes(j, sizeof(T));
    for (int64_t i0 = 0; i0 < j->Tq; i0 += BQ) {
        char *w = blk;
        int64_t n = j->Tq - i0 < BQ ? j->Tq - i0 : BQ, kn = keys_of(j, i0 + n - 1);
        int64_t ldq, ldg, ldo, lddq;
        T *dQ = SUF(out_rows)(&j->dq, dqb, i0, n, j->E, &w, &lddq);
        if (kn == 0) {
            for (int64_t r = 0; r < n; r++) memset(dQ + r * lddq, 0, sizeof(T) * (size_t)j->E);
            SUF(store_rows)(j, &j->dq, dqb, i0, n, j->E, dQ);
            continue;
        }
        const T *Q = SUF(rows)(&j->q, qb, i0, n, j->E, &w, &ldq);
        const T *G = SUF(rows)(&j->g, gb, i0, n, j->Ev, &w, &ldg);
        const T *O = SUF(rows)(&j->o, ob, i0, n, j->Ev, &w, &ldo);
        const T *lse = SUF(lse_row)(j, bh, i0);
        SUF(scores)(j, bh, i0, n, kn, Q, ldq, K, ldk, P, pack);
        for (int64_t r = 0; r < n; r++) {
            T *p = P + r * kn, l = lse[r];
            SIMD_MATH
            for (int64_t c = 0; c < kn; c++) p[c] = EXPM(p[c] - l);
            double d = 0; /* rowsum(dO * O) = rowsum(dP * P) */
            const T *gr = G + r * ldg, *orow = O + r * ldo;
            _Pragma("omp simd reduction(+ : d)") for (int64_t c = 0; c < j->Ev; c++) d +=
                (double)gr[c] * orow[c];
            D[r] = (T)d;
        }
        /* causal: P and dS are zero past the diagonal */
        att_mm prod_dv = {.M = kn,
                          .N = j->Ev,
                          .K = n,
                          .A = P,
                          .lda = kn,
                          .at = true,
                          .B = G,
                          .ldb = ldg,
                          .C = dV,
                          .ldc = lddv,
                          .alpha = 1,
                          .accumulate = true,
                          .band = band_of(j, ATT_K_ABOVE),
                          .diag = i0};
        SUF(mm)(&prod_dv, pack);
        att_mm prod_dp = {.M = n,
                          .N = kn,
                          .K = j->Ev,
                          .A = G,
                          .lda = ldg,
                          .B = V,
                          .ldb = ldv,
                          .bt = true,
                          .C = dP,
                          .ldc = kn,
                          .alpha = 1,
                          .band = band_of(j, ATT_COLS),
                          .diag = i0};
        SUF(mm)(&prod_dp, pack);
        for (int64_t r = 0; r < n; r++) {
            T *p = P + r * kn, *dp = dP + r * kn, d = D[r];
            /* where P is 0 (a masked key: a constant score) the gradient is 0,
             * not 0 times a NaN; a row that sees no key (lse -inf, P NaN)
             * gets 0 throughout, as masked_fill's backward gives in the
             * written-out form; past the causal diagonal dP was not computed */
            int64_t kr = lse[r] == -INFINITY ? 0 : keys_of(j, i0 + r);
            _Pragma("omp simd") for (int64_t c = 0; c < kr; c++) dp[c] =
                p[c] == 0 ? 0 : p[c] * (dp[c] - d);
            if (kr < kn) memset(dp + kr, 0, sizeof(T) * (size_t)(kn - kr));
        }
        att_mm prod_dq = {.M = n,
                          .N = j->E,
                          .K = kn,
                          .A = dP,
                          .lda = kn,
                          .B = K,
                          .ldb = ldk,
                          .C = dQ,
                          .ldc = lddq,
                          .alpha = j->scale,
                          .band = band_of(j, ATT_K_BELOW),
                          .diag = i0};
        SUF(mm)(&prod_dq, pack);
        att_mm prod_dk = {.M = kn,
                          .N = j->E,
                          .K = n,
                          .A = dP,
                          .lda = kn,
                          .at = true,
                          .B = Q,
                          .ldb = ldq,
                          .C = dK,
                          .ldc = lddk,
                          .alpha = j->scale,
                          .accumulate = true,
                          .band = band_of(j, ATT_K_ABOVE),
                          .diag = i0};
        SUF(mm)(&prod_dk, pack);
        SUF(store_rows)(j, &j->dq, dqb, i0, n, j->E, dQ);
    }
    SUF(store_rows)(j, &j->dk, dkb, 0, Tk, j->E, dK);
    SUF(store_rows)(j, &j->dv, dvb, 0, Tk, j->Ev, dV);
}

#undef T
#undef SIMD_MATH
#undef CDT
#undef SUF
#undef GEMM
#undef FASTMM
#undef EXPM
#undef SMROWS
