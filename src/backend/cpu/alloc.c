/*
 * alloc.c - caching allocator (see alloc.h).
 *
 * Invariants: a cached block's first 8 bytes hold the free-list link; all
 * other bytes of cached blocks are poisoned under AddressSanitizer, so a
 * use after free is still caught although the memory is not returned.
 * current_bytes counts blocks handed out and not yet freed.
 *
 * Small blocks (the first TL_CLASSES size classes, up to 1 KiB) also have a
 * per-thread cache in front of the shared lists, so the per-op tensors of
 * eager code take no lock; a thread's cache returns to the shared lists when
 * the thread exits. Statistics are atomics, exact at any time.
 */
#include "alloc.h"

#include "../../base/profile.h"

#include <pthread.h>
#include <stdatomic.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

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
    pthread_mutex_t mu; /* guards lists */
    free_block *lists[N_CLASSES];
    atomic_size_t current, peak, cached;
    atomic_size_t hwm; /* the most ever in use (peak, never reset) */
    atomic_uint_fast64_t allocs, system_allocs;
} A = {.mu = PTHREAD_MUTEX_INITIALIZER};

#define TL_CLASSES 10 /* classes up to 1 KiB */
#define TL_MAX     64 /* blocks per class per thread */

typedef struct {
    free_block *head[TL_CLASSES];
    int count[TL_CLASSES];
    bool registered;
} thread_cache;

static _Thread_local thread_cache tc;
static pthread_key_t tc_key;
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;

static void note_alloc(size_t cls) {
    size_t cur = atomic_fetch_add(&A.current, cls) + cls;
    size_t peak = atomic_load(&A.peak);
    if (cur > peak) {
        while (cur > peak && !atomic_compare_exchange_weak(&A.peak, &peak, cur)) {
        }
        size_t hwm = atomic_load(&A.hwm);
        while (cur > hwm && !atomic_compare_exchange_weak(&A.hwm, &hwm, cur)) {
        }
    }
    atomic_fetch_add_explicit(&A.allocs, 1, memory_order_relaxed);
    if (MUSA_UNLIKELY(musa_prof_on())) musa_prof_memory((int64_t)cls, (int64_t)cur);
}

static void note_free(size_t cls) {
    size_t cur = atomic_fetch_sub(&A.current, cls) - cls;
    if (MUSA_UNLIKELY(musa_prof_on())) musa_prof_memory(-(int64_t)cls, (int64_t)cur);
}

/* Move a thread cache's blocks to the shared lists. */
static void drain_thread_cache(void *arg) {
    thread_cache *c = arg;
    pthread_mutex_lock(&A.mu);
    for (int i = 0; i < TL_CLASSES; i++) {
        while (c->head[i]) {
            free_block *b = c->head[i];
            UNPOISON(b, sizeof *b);
            c->head[i] = b->next;
            b->next = A.lists[i];
            A.lists[i] = b;
        }
        c->count[i] = 0;
    }
    pthread_mutex_unlock(&A.mu);
}

/* glibc's malloc, in its default state, gives the top of its heap back to
 * the system once more than 128 KiB there is free, and serves blocks from
 * 128 KiB with mmap, raising both limits only as big blocks are freed. The
 * scratch buffers oneDNN's sgemm takes and frees on every call then made
 * some training loops grow and trim the heap each step: a page fault per
 * step and a backward pass of the digits MLP 2.5x slower (an Adam loop
 * calling loss.item() each step; which loops suffer depends on what lies
 * at the heap's top). Start glibc where its own adjustment ends (mmap from
 * 32 MiB, trim past 64 MiB free): memory stays in the process's heap for
 * reuse, which moves no peak. Settings the user made (MALLOC_*_ variables,
 * GLIBC_TUNABLES) win; MUSA_MALLOC_TUNE=0 keeps glibc's defaults. */
#if defined(__GLIBC__)
__attribute__((constructor)) static void tune_malloc(void) {
    const char *own = getenv("MUSA_MALLOC_TUNE"), *tunables = getenv("GLIBC_TUNABLES");
    if ((own && !strcmp(own, "0")) || getenv("MALLOC_MMAP_THRESHOLD_") ||
        getenv("MALLOC_TRIM_THRESHOLD_") || (tunables && strstr(tunables, "glibc.malloc.")))
        return;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
}
#endif

/* A fork copies the lock as it is: had another thread held it (a stream's
 * worker, allocating, while the main thread forks DataLoader workers), the
 * child's first allocation outside its thread cache would wait for ever.
 * The forking thread takes it across the fork. Registered at load, so
 * handlers registered later (the streams', whose lock may be held by a
 * thread that then allocates) take theirs first. */
static void fork_prepare(void) {
    pthread_mutex_lock(&A.mu);
}

static void fork_parent(void) {
    pthread_mutex_unlock(&A.mu);
}

static void fork_child(void) {
    pthread_mutex_init(&A.mu, NULL);
}

__attribute__((constructor)) static void install_fork_handlers(void) {
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void make_tc_key(void) {
    pthread_key_create(&tc_key, drain_thread_cache);
}

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

/* The size of class `idx` (inverse of class_index). */
static size_t class_size(int idx) {
    if (idx < 8) return (size_t)(idx + 1) * 64;
    int k = 9 + (idx - 8) / 4, step = (idx - 8) % 4 + 1;
    size_t base = (size_t)1 << k;
    return base + (size_t)step * (base / 4);
}

static void drop_cache_locked(void) {
    size_t dropped = 0;
    /* The calling thread's own cache goes too; other threads' caches stay
     * (and stay counted) until those threads exit. */
    for (int i = 0; i < TL_CLASSES; i++) {
        while (tc.head[i]) {
            free_block *b = tc.head[i];
            UNPOISON(b, sizeof *b);
            tc.head[i] = b->next;
            free(b);
            dropped += class_size(i);
        }
        tc.count[i] = 0;
    }
    for (int i = 0; i < N_CLASSES; i++) {
        free_block *b = A.lists[i];
        while (b) {
            UNPOISON(b, sizeof *b);
            free_block *next = b->next;
            free(b);
            dropped += class_size(i);
            b = next;
        }
        A.lists[i] = NULL;
    }
    atomic_fetch_sub(&A.cached, dropped);
}

/* The cache's bound. Blocks of one class serve only that class, so a
 * process whose shapes keep changing (random programs, sequences of varying
 * length, evaluation batches) would keep a block of every class it ever
 * freed (5,000 of the jit fuzzer's programs, none over 240 MB at once: 366
 * MB cached and growing). On a miss, the blocks in use, the cached ones and
 * the new one may take at most twice the most ever in use (or what is in use with the new block,
 * if more) plus TRIM_SLACK; cached blocks go back to the system, the
 * classes used longest ago first, until they fit. A loop of fixed shapes
 * needs more than its peak, since classes in use at different times each
 * keep their blocks (ResNet-18's eager step: 401 MB of blocks for a 278 MB
 * peak; at 1.25x it missed 7 times a step), but it stops missing after its
 * first step and never trims under this bound. The per-thread caches of
 * small blocks stay. */
#define TRIM_SLACK ((size_t)16 << 20)

static uint64_t class_tick[N_CLASSES]; /* under A.mu: when the class was last taken or given */
static uint64_t tick;

static void trim_cache_locked(size_t need) {
    size_t cur = atomic_load(&A.current), cached = atomic_load(&A.cached);
    size_t base = MUSA_MAX(atomic_load(&A.hwm), musa_sat_add_size(cur, need));
    size_t limit = musa_sat_add_size(musa_sat_mul_size(base, 2), TRIM_SLACK);
    size_t dropped = 0;
    while (musa_sat_add_size(cur + need, cached - dropped) > limit) {
        int old = -1;
        for (int i = TL_CLASSES; i < N_CLASSES; i++)
            if (A.lists[i] && (old < 0 || class_tick[i] < class_tick[old])) old = i;
        if (old < 0) break;
        free_block *b = A.lists[old];
        UNPOISON(b, sizeof *b);
        A.lists[old] = b->next;
        free(b);
        dropped += class_size(old);
    }
    atomic_fetch_sub(&A.cached, dropped);
}

void *musa_cpu_alloc(size_t bytes, size_t *block_bytes) {
    if (bytes > ((size_t)1 << 62)) {
        musa_err_nomem("alloc", bytes);
        return NULL;
    }
    size_t cls;
    int idx = class_index(bytes, &cls);
    *block_bytes = cls;
    free_block *b = NULL;
    if (idx < TL_CLASSES && tc.head[idx]) {
        b = tc.head[idx];
        UNPOISON(b, cls);
        tc.head[idx] = b->next;
        tc.count[idx]--;
        atomic_fetch_sub(&A.cached, cls);
        note_alloc(cls);
        return b;
    }
    pthread_mutex_lock(&A.mu);
    class_tick[idx] = ++tick;
    b = A.lists[idx];
    if (b) {
        UNPOISON(b, cls);
        A.lists[idx] = b->next;
        atomic_fetch_sub(&A.cached, cls);
    }
    if (!b) {
        atomic_fetch_add(&A.system_allocs, 1);
        trim_cache_locked(cls);
        b = aligned_alloc(64, cls);
        if (!b && atomic_load(&A.cached)) { /* give the cache back and try once more */
            drop_cache_locked();
            b = aligned_alloc(64, cls);
        }
        if (!b) {
            pthread_mutex_unlock(&A.mu);
            musa_err_nomem("alloc", bytes);
            return NULL;
        }
    }
    pthread_mutex_unlock(&A.mu);
    note_alloc(cls);
    return b;
}

void *musa_cpu_alloc_exact(size_t bytes, size_t *block_bytes) {
    if (bytes > ((size_t)1 << 62)) { /* it took 64 bytes and reported success */
        musa_err_nomem("alloc", bytes);
        return NULL;
    }
    size_t blk = bytes ? (bytes + 63) & ~(size_t)63 : 64;
    void *p = aligned_alloc(64, blk);
    if (!p) {
        musa_err_nomem("alloc", bytes);
        return NULL;
    }
    atomic_fetch_add(&A.system_allocs, 1);
    note_alloc(blk);
    *block_bytes = blk;
    return p;
}

void musa_cpu_free_exact(void *p, size_t block_bytes) {
    if (!p) return;
    note_free(block_bytes);
    free(p);
}

void musa_cpu_free(void *p, size_t block_bytes) {
    if (!p) return;
    size_t cls;
    int idx = class_index(block_bytes, &cls);
    MUSA_ASSERT(cls == block_bytes);
    note_free(cls);
    if (cls > MAX_CACHED_BLK) {
        free(p);
        return;
    }
    free_block *b = p;
    atomic_fetch_add(&A.cached, cls);
    if (idx < TL_CLASSES && tc.count[idx] < TL_MAX) {
        if (!tc.registered) {
            pthread_once(&tc_once, make_tc_key);
            pthread_setspecific(tc_key, &tc);
            tc.registered = true;
        }
        b->next = tc.head[idx];
        tc.head[idx] = b;
        tc.count[idx]++;
        POISON((char *)p + sizeof *b, cls - sizeof *b);
        return;
    }
    pthread_mutex_lock(&A.mu);
    class_tick[idx] = ++tick;
    b->next = A.lists[idx];
    A.lists[idx] = b;
    POISON((char *)p + sizeof *b, cls - sizeof *b);
    pthread_mutex_unlock(&A.mu);
}

void musa_alloc_get_stats(musa_alloc_stats *s) {
    s->current_bytes = atomic_load(&A.current);
    s->peak_bytes = atomic_load(&A.peak);
    s->cached_bytes = atomic_load(&A.cached);
    s->alloc_count = atomic_load(&A.allocs);
    s->system_allocs = atomic_load(&A.system_allocs);
}

void musa_alloc_reset_peak(void) {
    atomic_store(&A.peak, atomic_load(&A.current));
}

void musa_alloc_empty_cache(void) {
    pthread_mutex_lock(&A.mu);
    drop_cache_locked();
    pthread_mutex_unlock(&A.mu);
}

void musa_alloc_trim(void) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

size_t musa_alloc_size(size_t bytes) {
    return musa_cpu_alloc_class_size(bytes);
}
