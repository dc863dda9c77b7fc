/*
 * threadpool.h - musa's one thread pool: parallel_for for kernels (intra-op)
 * and task groups for the graph scheduler (inter-op).
 *
 * The pool has num_threads - 1 workers; the calling thread is the last one.
 * Nesting never oversubscribes: a parallel_for started inside a pool task or
 * inside another parallel_for body runs serially on its own thread.
 */
#ifndef MUSA_THREADPOOL_H
#define MUSA_THREADPOOL_H

#include "base.h"

#include <stdatomic.h>

#define MUSA_MAX_THREADS 256

typedef void (*musa_range_fn)(void *ctx, int64_t begin, int64_t end);

/* Run fn(ctx, b, e) over disjoint ranges covering [0, n), each at least
 * `grain` long (except the last), on up to musa_pool_threads() threads.
 * Returns when every range is done. Ranges never overlap, so fn may write
 * disjoint output regions without locks. */
void musa_parallel_for(int64_t n, int64_t grain, musa_range_fn fn, void *ctx);

/* The pending interrupt (musa_interrupt): kernels' long loops poll it,
 * musa_interrupt_take() consumes it where an op reports the failure. */
extern atomic_int musa_interrupt_flag;
static inline bool musa_interrupt_pending(void) {
    return atomic_load_explicit(&musa_interrupt_flag, memory_order_relaxed) != 0;
}
static inline bool musa_interrupt_take(void) {
    return atomic_exchange_explicit(&musa_interrupt_flag, 0, memory_order_relaxed) != 0;
}

/* Threads a kernel running on this thread may use: the pool size (or the
 * thread's cap) on a free thread, 1 inside a pool task or a parallel_for
 * body. */
int musa_pool_intra_threads(void);
/* Cap the threads kernels started on the calling thread use (a stream's
 * worker: its own share of the cores); 0 removes the cap. */
void musa_pool_set_thread_cap(int n);

/* Resize the pool to n threads in all (n >= 1); blocks while it joins.
 * Other threads may use the pool meanwhile: their tasks run on the caller
 * (or wait in the queue for the new workers). */
void musa_pool_resize(int n);
int musa_pool_threads(void);

/* Task groups. A task lives in memory the submitter owns until the group's
 * wait returns. */
typedef struct musa_task_group {
    atomic_int_fast64_t pending; /* tasks submitted and not yet finished */
} musa_task_group;

typedef struct musa_task {
    void (*fn)(void *ctx);
    void *ctx;
    musa_task_group *group;
    struct musa_task *next, *prev; /* queue links, owned by the pool */
} musa_task;

void musa_task_group_init(musa_task_group *g);
/* Queue t (fn and ctx set by the caller) as part of g. */
void musa_task_submit(musa_task_group *g, musa_task *t);
/* Help run queued tasks until every task of g has finished. */
void musa_task_group_wait(musa_task_group *g);
/* Whether a core can write lines another core has just read at a few
 * times the speed of its own cache: a probe (32 KiB read on OpenMP's
 * thread 1, then rewritten here, against rewritten after a read here;
 * cheap under 4x + 1 us), rerun at most every 100 ms. Call it on a free
 * thread (not inside a task or a parallel_for body). The 2-core VM this
 * was built on switches between states: writing 64 KiB the other core had
 * read took 1.8 us in one and 8.7 in the other, against 0.66 locally
 * (bench_cores). sgemm in matmul.c splits small GEMMs over the cores
 * only while it is cheap; the split never changes results. */
bool musa_pool_sharing_cheap(void);
/* Tests: 1 or 0 fixes musa_pool_sharing_cheap's answer, -1 probes again. */
void musa_pool_force_sharing(int verdict);
/* Counters for tests and benchmarks: tasks run by workers / by waiters. */
void musa_pool_counters(uint64_t *by_workers, uint64_t *by_callers);

#endif
