/*
 * random.h - the global counter-based generator (Philox4x32-10).
 *
 * A kernel reserves a range of counters when it runs (not when it is
 * recorded), so a random op inside a compiled plan draws fresh numbers on
 * every run, exactly as the eager op would.
 */
#ifndef MUSA_CPU_RANDOM_H
#define MUSA_CPU_RANDOM_H

#include "../../base/base.h"

/* Reserve `blocks` 128-bit counter blocks; returns the key and first block. */
void musa_rng_reserve(uint64_t blocks, uint64_t *seed, uint64_t *first_block);

/* Philox4x32-10 of the 128-bit counter (block, sub) under key `seed`: four
 * uint32 outputs. sub 0 is musa_philox's block; a sampler that draws an
 * unbounded number of values for one element walks sub 0, 1, 2, ... of the
 * element's block (sample.c). */
/* The ten rounds on the counter words c0..c3 (uint32_t lvalues) under key
 * words k0, k1 (uint32_t lvalues, consumed): a macro on plain scalars, so a
 * loop over many counters around it vectorises (fill.c). */
#define MUSA_PHILOX_ROUNDS(c0, c1, c2, c3, k0, k1)                                                 \
    for (int r_ = 0; r_ < 10; r_++) {                                                              \
        uint64_t p0_ = (uint64_t)0xD2511F53u * (c0), p1_ = (uint64_t)0xCD9E8D57u * (c2);           \
        uint32_t n0_ = (uint32_t)(p1_ >> 32) ^ (c1) ^ (k0),                                        \
                 n2_ = (uint32_t)(p0_ >> 32) ^ (c3) ^ (k1);                                        \
        (c1) = (uint32_t)p1_;                                                                      \
        (c3) = (uint32_t)p0_;                                                                      \
        (c0) = n0_;                                                                                \
        (c2) = n2_;                                                                                \
        (k0) += 0x9E3779B9u;                                                                       \
        (k1) += 0xBB67AE85u;                                                                       \
    }

static inline void musa_philox_sub(uint64_t seed, uint64_t block, uint64_t sub, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32);
    uint32_t c2 = (uint32_t)sub, c3 = (uint32_t)(sub >> 32);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    MUSA_PHILOX_ROUNDS(c0, c1, c2, c3, k0, k1)
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* Philox4x32-10 of counter `block` under key `seed`: four uint32 outputs. */
static inline void musa_philox(uint64_t seed, uint64_t block, uint32_t out[4]) {
    musa_philox_sub(seed, block, 0, out);
}

#endif
