/*
 * alloc.h - the caching CPU allocator.
 *
 * Blocks are 64-byte aligned and rounded up to a size class (multiples of 64
 * bytes up to 512, then four classes per power of two, so at most 25% is
 * wasted). Freed blocks go to a per-class free list and are handed out again
 * before the system is asked. Statistics count class sizes.
 */
#ifndef MUSA_CPU_ALLOC_H
#define MUSA_CPU_ALLOC_H

#include "../../base/base.h"

/* A block of at least `bytes`; *block_bytes receives its class size, which
 * must be passed back to musa_cpu_free. NULL (MUSA_ERR_NOMEM set) on failure. */
void *musa_cpu_alloc(size_t bytes, size_t *block_bytes);
void musa_cpu_free(void *p, size_t block_bytes);
/* A block of exactly `bytes` (rounded to 64), never cached: for long-lived
 * big blocks such as a plan's arena, where size classes would waste up to a
 * quarter. Counted in the statistics; free with musa_cpu_free_exact. */
void *musa_cpu_alloc_exact(size_t bytes, size_t *block_bytes);
void musa_cpu_free_exact(void *p, size_t block_bytes);
/* The class size a request of `bytes` is rounded to. */
size_t musa_cpu_alloc_class_size(size_t bytes);

#endif
