/*
 * vec.c - growth for MUSA_VEC and the uint64 hash map (see vec.h).
 */
#include "vec.h"

int musa_vec_grow_(void **data, int64_t *cap, int64_t need, size_t elem) {
    int64_t ncap = *cap ? *cap : 8;
    while (ncap < need) {
        if (ncap > INT64_MAX / 2) return musa_err_nomem("vec", SIZE_MAX);
        ncap *= 2;
    }
    size_t bytes;
    if (!musa_mul_size((size_t)ncap, elem, &bytes)) return musa_err_nomem("vec", SIZE_MAX);
    void *p = musa_realloc(*data, bytes, "vec");
    if (!p) return MUSA_ERR_NOMEM;
    *data = p;
    *cap = ncap;
    return 0;
}

void musa_vec_shrink_(void **data, int64_t *cap, int64_t len, size_t elem) {
    if (*cap <= len || len <= 0) return;
    void *p = realloc(*data, (size_t)len * elem); /* len * elem <= cap * elem: no overflow */
    if (!p) return;
    *data = p;
    *cap = len;
}

static int map_rehash(musa_map *m, int64_t ncap) {
    uint64_t *keys = musa_malloc(sizeof(uint64_t) * (size_t)ncap, "map");
    uint64_t *vals = musa_malloc(sizeof(uint64_t) * (size_t)ncap, "map");
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return MUSA_ERR_NOMEM;
    }
    memset(keys, 0xff, sizeof(uint64_t) * (size_t)ncap);
    for (int64_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == UINT64_MAX) continue;
        int64_t j = (int64_t)(musa_hash_u64(m->keys[i]) & (uint64_t)(ncap - 1));
        while (keys[j] != UINT64_MAX) j = (j + 1) & (ncap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = ncap;
    return 0;
}

int musa_map_put(musa_map *m, uint64_t key, uint64_t val) {
    MUSA_ASSERT(key != UINT64_MAX);
    if ((m->len + 1) * 2 > m->cap) {
        int rc = map_rehash(m, m->cap ? m->cap * 2 : 16);
        if (rc) return rc;
    }
    int64_t j = (int64_t)(musa_hash_u64(key) & (uint64_t)(m->cap - 1));
    while (m->keys[j] != UINT64_MAX && m->keys[j] != key) j = (j + 1) & (m->cap - 1);
    if (m->keys[j] == UINT64_MAX) m->len++;
    m->keys[j] = key;
    m->vals[j] = val;
    return 0;
}

uint64_t *musa_map_get(const musa_map *m, uint64_t key) {
    if (!m->cap) return NULL;
    int64_t j = (int64_t)(musa_hash_u64(key) & (uint64_t)(m->cap - 1));
    while (m->keys[j] != UINT64_MAX) {
        if (m->keys[j] == key) return &m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return NULL;
}

void musa_map_free(musa_map *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

uint64_t musa_hash_bytes(const void *p, size_t n, uint64_t seed) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return musa_hash_u64(h);
}
