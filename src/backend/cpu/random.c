/*
 * random.c - the generator state: a seed and an atomic block offset.
 */
#include "random.h"

#include <stdatomic.h>

static _Atomic uint64_t g_seed = 67280421310721ull;
static _Atomic uint64_t g_offset = 0;

void musa_rng_reserve(uint64_t blocks, uint64_t *seed, uint64_t *first_block) {
    *seed = atomic_load(&g_seed);
    *first_block = atomic_fetch_add(&g_offset, blocks);
}

void musa_manual_seed(uint64_t seed) {
    atomic_store(&g_seed, seed);
    atomic_store(&g_offset, 0);
}

uint64_t musa_initial_seed(void) {
    return atomic_load(&g_seed);
}

void musa_get_rng_state(uint64_t *seed, uint64_t *offset) {
    *seed = atomic_load(&g_seed);
    *offset = atomic_load(&g_offset);
}

void musa_set_rng_state(uint64_t seed, uint64_t offset) {
    atomic_store(&g_seed, seed);
    atomic_store(&g_offset, offset);
}
