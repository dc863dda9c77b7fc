/*
 * prim_cache.h - the cache of built oneDNN primitives that conv_dnnl.c and
 * matmul_dnnl.c keep (building one costs milliseconds of JIT): at most
 * `max` entries, least recently used first out.
 *
 * Why eviction and not a full cache that refuses: a caller that finds no
 * entry falls back to another path (im2col, sgemm with the bias written
 * first, float32 copies of bfloat16 operands), whose rounding differs, so
 * the bits of a product depended on how many other shapes the process had
 * met (a model run by musa-run differed from the same model in a Python
 * process that had run 500 fuzz programs). Now every shape gets its
 * primitive.
 *
 * An entry embeds musa_prim_node first. Entries handed out are counted
 * (refs): one evicted while a kernel runs it is freed by the last release.
 */
#ifndef MUSA_CPU_PRIM_CACHE_H
#define MUSA_CPU_PRIM_CACHE_H

#include <pthread.h>
#include <stdbool.h>

typedef struct musa_prim_node {
    struct musa_prim_node *next;
    int refs;
    bool retired; /* evicted while in use: freed by the last release */
} musa_prim_node;

typedef struct {
    pthread_mutex_t mu;
    musa_prim_node *head; /* most recently used first */
    int len, max;
    void (*destroy)(musa_prim_node *); /* frees an entry and what it built */
} musa_prim_cache;

#define MUSA_PRIM_CACHE_INIT(max_, destroy_)                                                       \
    { PTHREAD_MUTEX_INITIALIZER, NULL, 0, (max_), (destroy_) }

/* The entry `match` accepts (moved to the front), else one from `make`
 * (NULL: out of memory), inserted first, the least recently used entry
 * evicted when the cache is full; held (release it) or NULL. make runs
 * under the cache's lock. */
musa_prim_node *musa_prim_cache_get(musa_prim_cache *c,
                                    bool (*match)(const musa_prim_node *, const void *),
                                    musa_prim_node *(*make)(const void *), const void *key);
void musa_prim_cache_release(musa_prim_cache *c, musa_prim_node *n);

#endif
