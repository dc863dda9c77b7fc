/*
 * test_threads.c - musa called from several threads at once: the thread
 * pool and parallel_for, parallel plan steps, one plan run by many threads,
 * captures on several threads, backward passes sharing a leaf, eager ops on
 * shared inputs, and the allocator's caches.
 *
 * Each test runs its work on THREADS threads. A worker never calls CHECK
 * (the harness is single-threaded): it records its first failure in its
 * own slot, and the main thread reports it after the join. Results are
 * compared with a serial run of the same work, bitwise; where the order of
 * floating-point additions differs between threads (gradient accumulation)
 * the values are small integers, so every order sums exactly.
 *
 * These tests run in every build; `bash run.sh tsan` runs them under
 * ThreadSanitizer, which is where the races they look for show up.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "base/threadpool.h"
#include "harness.h"
#include "util.h"

#define THREADS 4

typedef struct worker {
    pthread_t th;
    int id;
    void *ctx;
    void (*fn)(struct worker *);
    char err[256]; /* first failure, or "" */
} worker;

static void failf(worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failf(worker *w, const char *fmt, ...) {
    if (w->err[0]) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(w->err, sizeof w->err - 1, fmt, ap);
    va_end(ap);
    if (n <= 0) snprintf(w->err, sizeof w->err, "failed");
}

static void *worker_main(void *arg) {
    worker *w = arg;
    w->fn(w);
    return NULL;
}

/* Run fn on n threads (each with its id and ctx); join them. Returns the
 * first worker's failure message, or NULL when all passed. */
static const char *run_workers(int n, void (*fn)(worker *), void *ctx, worker *ws) {
    for (int i = 0; i < n; i++) {
        ws[i] = (worker){.id = i, .ctx = ctx, .fn = fn};
        if (pthread_create(&ws[i].th, NULL, worker_main, &ws[i]) != 0) {
            snprintf(ws[i].err, sizeof ws[i].err, "pthread_create failed");
            ws[i].fn = NULL;
        }
    }
    for (int i = 0; i < n; i++)
        if (ws[i].fn) pthread_join(ws[i].th, NULL);
    for (int i = 0; i < n; i++)
        if (ws[i].err[0]) return ws[i].err;
    return NULL;
}

#define CHECK_WORKERS(n, fn, ctx)                                                                  \
    do {                                                                                           \
        worker ws_[THREADS + 1];                                                                   \
        const char *e_ = run_workers((n), (fn), (ctx), ws_);                                       \
        CHECK_MSG(!e_, "%s", e_);                                                                  \
    } while (0)

/* ---- the pool: parallel_for and task groups from several callers ---- */

typedef struct {
    atomic_int *hits;
    int64_t n;
} mark_ctx;

static void mark(void *arg, int64_t b, int64_t e) {
    mark_ctx *c = arg;
    for (int64_t i = b; i < e; i++) atomic_fetch_add_explicit(&c->hits[i], 1, memory_order_relaxed);
}

static void bump(void *arg) {
    atomic_fetch_add((atomic_int *)arg, 1);
}

/* parallel_for over several sizes, then a task group, many times. */
static void pool_work(worker *w) {
    atomic_int *hits = calloc(4000, sizeof *hits);
    if (!hits) failf(w, "out of memory");
    for (int round = 0; round < 30 && !w->err[0]; round++) {
        int64_t n = 1 + (round * 997 + w->id * 131) % 3999;
        for (int64_t i = 0; i < n; i++) atomic_store(&hits[i], 0);
        mark_ctx c = {hits, n};
        musa_parallel_for(n, 1 + round % 9, mark, &c);
        for (int64_t i = 0; i < n; i++)
            if (atomic_load(&hits[i]) != 1)
                failf(w, "thread %d round %d: index %lld hit %d times", w->id, round, (long long)i,
                      atomic_load(&hits[i]));
        atomic_int counter = 0;
        musa_task tasks[16];
        musa_task_group g;
        musa_task_group_init(&g);
        for (int k = 0; k < 16; k++) {
            tasks[k].fn = bump;
            tasks[k].ctx = &counter;
            musa_task_submit(&g, &tasks[k]);
        }
        musa_task_group_wait(&g);
        if (atomic_load(&counter) != 16)
            failf(w, "thread %d round %d: %d of 16 tasks ran", w->id, round, atomic_load(&counter));
    }
    free(hits);
}

TEST(pool_from_several_threads) {
    int saved = musa_get_num_threads();
    CHECK_OK(musa_set_num_threads(3));
    CHECK_WORKERS(THREADS, pool_work, NULL);
    CHECK_OK(musa_set_num_threads(saved));
}

static void resize_or_work(worker *w) {
    if (w->id > 0) {
        pool_work(w);
        return;
    }
    for (int i = 0; i < 12; i++)
        if (musa_set_num_threads(1 + i % 3) || musa_get_num_threads() < 1)
            failf(w, "set_num_threads(%d) failed: %s", 1 + i % 3, musa_last_error());
}

TEST(pool_resized_while_other_threads_use_it) {
    int saved = musa_get_num_threads();
    CHECK_WORKERS(THREADS, resize_or_work, NULL);
    CHECK_OK(musa_set_num_threads(saved));
}
