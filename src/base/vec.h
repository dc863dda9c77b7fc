/*
 * vec.h - a growable array for any element type, and an open-addressing
 * hash map from uint64 keys to uint64 values.
 *
 *     MUSA_VEC(int64_t) v = {0};
 *     if (musa_vec_push(&v, 42)) goto fail;   // nonzero status on OOM
 *     ... v.data[i], v.len ...
 *     musa_vec_free(&v);
 *
 * Invariants: len <= cap; data is NULL iff cap == 0.
 */
#ifndef MUSA_VEC_H
#define MUSA_VEC_H

#include "base.h"

#define MUSA_VEC(T)                                                                                \
    struct {                                                                                       \
        T *data;                                                                                   \
        int64_t len, cap;                                                                          \
    }

/* Grow *data so it holds at least `need` elements of `elem` bytes. */
int musa_vec_grow_(void **data, int64_t *cap, int64_t need, size_t elem);

#define musa_vec_reserve(v, n)                                                                     \
    ((n) <= (v)->cap ? 0 : musa_vec_grow_((void **)&(v)->data, &(v)->cap, (n), sizeof(*(v)->data)))
#define musa_vec_push(v, x)                                                                        \
    (musa_vec_reserve((v), (v)->len + 1) ? MUSA_ERR_NOMEM : ((v)->data[(v)->len++] = (x), 0))
/* Give back the capacity past len (a graph done growing); never fails: a
 * block realloc cannot shrink stays as it is. */
void musa_vec_shrink_(void **data, int64_t *cap, int64_t len, size_t elem);
#define musa_vec_shrink(v)                                                                         \
    musa_vec_shrink_((void **)&(v)->data, &(v)->cap, (v)->len, sizeof(*(v)->data))
#define musa_vec_free(v)                                                                           \
    do {                                                                                           \
        free((v)->data);                                                                           \
        (v)->data = NULL;                                                                          \
        (v)->len = (v)->cap = 0;                                                                   \
    } while (0)

/* uint64 -> uint64 map with linear probing. Key UINT64_MAX is reserved. */
typedef struct musa_map {
    uint64_t *keys;
    uint64_t *vals;
    int64_t cap; /* power of two, or 0 */
    int64_t len;
} musa_map;

/* Insert or overwrite. Returns 0 or MUSA_ERR_NOMEM. */
int musa_map_put(musa_map *m, uint64_t key, uint64_t val);
/* Pointer to the value for key, or NULL. */
uint64_t *musa_map_get(const musa_map *m, uint64_t key);
void musa_map_free(musa_map *m);

/* 64-bit mixing hash (splitmix64 finaliser) and byte hashing (FNV-1a then mix). */
static inline uint64_t musa_hash_u64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}
uint64_t musa_hash_bytes(const void *p, size_t n, uint64_t seed);

#endif
