/*
 * alloc.c - caching allocator (see alloc.h).
 *
 * Invariants: a cached block's first 8 bytes hold the free-list link; all
 * other bytes of cached blocks are poisoned under AddressSanitizer, so a
 * use after free is still caught although the memory is not returned.
 * current_bytes counts blocks handed out and not yet freed.
 */
#include "alloc.h"

#include <pthread.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define N_CLASSES      (8 + 64 * 4)
#define MAX_CACHED_BLK ((size_t)1 << 32) /* bigger blocks go straight back */

typedef struct free_block {
    struct free_block *next;
} free_block;

static struct {
    pthread_mutex_t mu;
    free_block *lists[N_CLASSES];
    size_t current, peak, cached;
    uint64_t allocs, system_allocs;
} A = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int class_index(size_t bytes, size_t *class_bytes) {
    if (bytes <= 512) {
        size_t k = bytes ? (bytes + 63) / 64 : 1;
        *class_bytes = k * 64;
        return (int)k - 1;
    }
    int k = 63 - __builtin_clzll((unsigned long long)(bytes - 1)); /* 2^k < bytes <= 2^(k+1) */
    size_t base = (size_t)1 << k, quarter = base / 4;
    size_t step = (bytes - base + quarter - 1) / quarter; /* 1..4 */
    *class_bytes = base + step * quarter;
    return 8 + (k - 9) * 4 + (int)(step - 1);
}

size_t musa_cpu_alloc_class_size(size_t bytes) {
    size_t c;
    class_index(bytes, &c);
    return c;
}

static void drop_cache_locked(void) {
    for (int i = 0; i < N_CLASSES; i++) {
        free_block *b = A.lists[i];
        while (b) {
            UNPOISON(b, sizeof *b);
            free_block *next = b->next;
            free(b);
            b = next;
        }
        A.lists[i] = NULL;
    }
    A.cached = 0;
}

void *musa_cpu_alloc(size_t bytes, size_t *block_bytes) {
    if (bytes > ((size_t)1 << 62)) {
        musa_err_nomem("alloc", bytes);
        return NULL;
    }
    size_t cls;
    int idx = class_index(bytes, &cls);
    pthread_mutex_lock(&A.mu);
    free_block *b = A.lists[idx];
    if (b) {
        UNPOISON(b, cls);
        A.lists[idx] = b->next;
        A.cached -= cls;
    }
    A.allocs++;
    if (!b) {
        A.system_allocs++;
        b = aligned_alloc(64, cls);
        if (!b && A.cached) { /* give the cache back and try once more */
            drop_cache_locked();
            b = aligned_alloc(64, cls);
        }
        if (!b) {
            A.allocs--;
            pthread_mutex_unlock(&A.mu);
            musa_err_nomem("alloc", bytes);
            return NULL;
        }
    }
    A.current += cls;
    if (A.current > A.peak) A.peak = A.current;
    pthread_mutex_unlock(&A.mu);
    *block_bytes = cls;
    return b;
}

void musa_cpu_free(void *p, size_t block_bytes) {
    if (!p) return;
    size_t cls;
    int idx = class_index(block_bytes, &cls);
    MUSA_ASSERT(cls == block_bytes);
    pthread_mutex_lock(&A.mu);
    A.current -= cls;
    if (cls > MAX_CACHED_BLK) {
        pthread_mutex_unlock(&A.mu);
        free(p);
        return;
    }
    free_block *b = p;
    b->next = A.lists[idx];
    A.lists[idx] = b;
    A.cached += cls;
    POISON((char *)p + sizeof *b, cls - sizeof *b);
    pthread_mutex_unlock(&A.mu);
}

void musa_alloc_get_stats(musa_alloc_stats *s) {
    pthread_mutex_lock(&A.mu);
    s->current_bytes = A.current;
    s->peak_bytes = A.peak;
    s->cached_bytes = A.cached;
    s->alloc_count = A.allocs;
    s->system_allocs = A.system_allocs;
    pthread_mutex_unlock(&A.mu);
}

void musa_alloc_reset_peak(void) {
    pthread_mutex_lock(&A.mu);
    A.peak = A.current;
    pthread_mutex_unlock(&A.mu);
}

void musa_alloc_empty_cache(void) {
    pthread_mutex_lock(&A.mu);
    drop_cache_locked();
    pthread_mutex_unlock(&A.mu);
}
