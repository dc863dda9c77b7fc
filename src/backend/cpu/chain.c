/*
 * chain.c - runs a float32 elementwise chain in registers (chain.h).
 *
 * The accumulator is MUSA_CHAIN_N / 16 vectors of 16 floats (GCC's vector
 * extension: AVX-512 registers here, pairs of AVX2 registers elsewhere),
 * indexed only by constants so that it stays in registers across the
 * instruction switch: per instruction and block, a switch on its code and
 * one on its source or operation, all of them the same from block to block.
 */
#include "chain.h"

#include <string.h>

#define VL 16
#define NV (MUSA_CHAIN_N / VL)

typedef float v16 __attribute__((vector_size(VL * sizeof(float))));
typedef float v16u __attribute__((vector_size(VL * sizeof(float)), aligned(4)));

#define EACH _Pragma("GCC unroll 8") for (int u = 0; u < NV; u++)

static inline v16 ld(const float *p) {
    return *(const v16u *)p;
}
static inline void st(float *p, v16 v) {
    *(v16u *)p = v;
}

/* The source operand of an instruction into t. */
static inline __attribute__((always_inline)) void
fetch(v16 *t, const v16 *acc, const musa_chain_ins *in, const float *const *ext, int64_t i,
      const v16 *scal, float (*slot)[MUSA_CHAIN_N]) {
    switch (in->src) {
    case MUSA_CH_EXT:
        EACH t[u] = ld(ext[in->idx] + i + u * VL);
        break;
    case MUSA_CH_SCALAR:
        EACH t[u] = scal[in->idx];
        break;
    case MUSA_CH_SLOT:
        EACH t[u] = ld(slot[in->idx] + u * VL);
        break;
    default:
        EACH t[u] = acc[u];
        break;
    }
}

/* acc = a op b for the register ops; BLK2 and the powers handled apart. */
static inline __attribute__((always_inline)) void arith(v16 *acc, const v16 *a, const v16 *b,
                                                        int op) {
    switch (op) {
    case MUSA_CHOP_ADD:
        EACH acc[u] = a[u] + b[u];
        break;
    case MUSA_CHOP_SUB:
        EACH acc[u] = a[u] - b[u];
        break;
    case MUSA_CHOP_MUL:
        EACH acc[u] = a[u] * b[u];
        break;
    default:
        EACH acc[u] = a[u] / b[u];
        break;
    }
}

/* One block of MUSA_CHAIN_N elements at element i of every operand. */
static void run_block(const musa_chain *c, const float *const *ext, int64_t i, const v16 *scal) {
    v16 acc[NV], t[NV];
    float slot[MUSA_CHAIN_SPILL][MUSA_CHAIN_N] __attribute__((aligned(64)));
    float buf[2][MUSA_CHAIN_N] __attribute__((aligned(64)));
    EACH acc[u] = (v16){0};
    for (int k = 0; k < c->n_ins; k++) {
        const musa_chain_ins *in = &c->ins[k];
        switch (in->code) {
        case MUSA_CH_LOAD:
            fetch(t, acc, in, ext, i, scal, slot);
            EACH acc[u] = t[u];
            break;
        case MUSA_CH_BIN:
        case MUSA_CH_BINR: {
            bool rev = in->code == MUSA_CH_BINR;
            if (in->op == MUSA_CHOP_POW2) {
                EACH acc[u] = acc[u] * acc[u];
                break;
            }
            if (in->op == MUSA_CHOP_POW3) {
                EACH acc[u] = acc[u] * acc[u] * acc[u];
                break;
            }
            fetch(t, acc, in, ext, i, scal, slot);
            if (in->op == MUSA_CHOP_BLK2) {
                EACH st(buf[0] + u * VL, rev ? t[u] : acc[u]),
                    st(buf[1] + u * VL, rev ? acc[u] : t[u]);
                in->blk2(buf[0], buf[0], buf[1]);
                EACH acc[u] = ld(buf[0] + u * VL);
            } else if (rev) {
                arith(acc, t, acc, in->op);
            } else {
                arith(acc, acc, t, in->op);
            }
            break;
        }
        case MUSA_CH_UNARY:
            EACH st(buf[0] + u * VL, acc[u]);
            in->blk1(buf[0], buf[0]);
            EACH acc[u] = ld(buf[0] + u * VL);
            break;
        case MUSA_CH_SPILL:
            EACH st(slot[in->idx] + u * VL, acc[u]);
            break;
        default: /* MUSA_CH_STORE */
            EACH st((float *)ext[in->idx] + i + u * VL, acc[u]);
            break;
        }
    }
}

void musa_chain_run(const musa_chain *c, int64_t n, char *const *ext) {
    v16 scal[MUSA_CHAIN_SCAL];
    for (int k = 0; k < c->n_scal; k++) /* (not 0 + s: that makes -0 +0) */
        for (int l = 0; l < VL; l++) scal[k][l] = c->scal[k];
    const float *p[MUSA_CHAIN_EXT];
    for (int k = 0; k < c->n_ext; k++) p[k] = (const float *)ext[k];
    int64_t i = 0;
    for (; i + MUSA_CHAIN_N <= n; i += MUSA_CHAIN_N) run_block(c, p, i, scal);
    if (i == n) return;
    /* the tail: inputs padded with their first element, outputs through a block */
    int64_t m = n - i;
    float tail[MUSA_CHAIN_EXT][MUSA_CHAIN_N] __attribute__((aligned(64)));
    const float *q[MUSA_CHAIN_EXT];
    for (int k = 0; k < c->n_ext; k++) {
        q[k] = tail[k];
        if (!(c->ext_in >> k & 1)) continue;
        memcpy(tail[k], p[k] + i, (size_t)m * sizeof(float));
        for (int64_t j = m; j < MUSA_CHAIN_N; j++) tail[k][j] = p[k][i];
    }
    run_block(c, q, 0, scal);
    for (int k = 0; k < c->n_ext; k++)
        if (!(c->ext_in >> k & 1)) memcpy((float *)p[k] + i, tail[k], (size_t)m * sizeof(float));
}
