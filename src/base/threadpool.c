/*
 * threadpool.c - a pthread pool with one FIFO task queue (see threadpool.h).
 *
 * Invariants:
 * - every task in the queue has group->pending counting it;
 * - `queued` equals the number of tasks in the queue (read without the lock
 *   only as a hint for spinning);
 * - a worker touches a task's group only before the decrement that may
 *   release the waiter, never after it;
 * - n_workers and num_threads change only under resize_mu (or in the
 *   pool's once-init) and are read without a lock, hence atomics: a task
 *   submitted while a resize stops the workers waits in the queue until
 *   the new workers start or its group's waiter runs it.
 */
#include "threadpool.h"

#include <omp.h>
#include <pthread.h>
#include <stdalign.h>
#include <time.h>
#include <unistd.h>

#define SPIN_ITERS 4000 /* pause loops before sleeping: a few microseconds */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    pthread_cond_t done_cv;
    musa_task *head, *tail;
    atomic_int queued;
    pthread_t threads[MUSA_MAX_THREADS];
    atomic_int n_workers;   /* worker threads running */
    atomic_int num_threads; /* n_workers + 1 (the caller) */
    bool stop;
    atomic_uint_fast64_t run_by_workers, run_by_callers;
} pool = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .work_cv = PTHREAD_COND_INITIALIZER,
    .done_cv = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t resize_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int tls_serial_depth; /* >0: inside a task or parallel body */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static musa_task *queue_pop_locked(void) {
    musa_task *t = pool.head;
    if (!t) return NULL;
    pool.head = t->next;
    if (pool.head)
        pool.head->prev = NULL;
    else
        pool.tail = NULL;
    atomic_fetch_sub(&pool.queued, 1);
    return t;
}

static void task_finish(musa_task *t) {
    musa_task_group *g = t->group;
    if (atomic_fetch_sub(&g->pending, 1) == 1) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_broadcast(&pool.done_cv);
        pthread_mutex_unlock(&pool.mu);
    }
}

static void run_task(musa_task *t) {
    tls_serial_depth++;
    t->fn(t->ctx);
    tls_serial_depth--;
    task_finish(t);
}

static void *worker_main(void *arg) {
    MUSA_UNUSED(arg);
    tls_serial_depth = 1; /* kernels inside tasks run serially */
    for (;;) {
        for (int i = 0;
             i < SPIN_ITERS && atomic_load_explicit(&pool.queued, memory_order_relaxed) == 0; i++)
            cpu_relax();
        pthread_mutex_lock(&pool.mu);
        while (!pool.head && !pool.stop) pthread_cond_wait(&pool.work_cv, &pool.mu);
        if (!pool.head && pool.stop) {
            pthread_mutex_unlock(&pool.mu);
            break;
        }
        musa_task *t = queue_pop_locked();
        pthread_mutex_unlock(&pool.mu);
        t->fn(t->ctx);
        atomic_fetch_add_explicit(&pool.run_by_workers, 1, memory_order_relaxed);
        task_finish(t);
    }
    return NULL;
}

/* Start n_threads - 1 workers; none may be running. */
static void start_workers(int n_threads) {
    pool.stop = false; /* no worker reads it now: the last ones were joined */
    int n = 0;
    for (int i = 0; i < n_threads - 1; i++) {
        if (pthread_create(&pool.threads[i], NULL, worker_main, NULL) != 0) break;
        n++;
    }
    /* If the system refused threads, the calling thread still does all work. */
    atomic_store_explicit(&pool.n_workers, n, memory_order_relaxed);
    atomic_store_explicit(&pool.num_threads, n + 1, memory_order_relaxed);
}

/* Stop and join every worker; they finish the queued tasks first. */
static void stop_workers(void) {
    int n = atomic_load_explicit(&pool.n_workers, memory_order_relaxed);
    atomic_store_explicit(&pool.n_workers, 0, memory_order_relaxed); /* submitters run inline */
    pthread_mutex_lock(&pool.mu);
    pool.stop = true;
    pthread_cond_broadcast(&pool.work_cv);
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < n; i++) pthread_join(pool.threads[i], NULL);
}

/* In a forked child the workers are gone: the child runs its tasks on the
 * calling thread (submitters run inline, waiters help), and a resize starts
 * new workers instead of joining the parent's. Tasks queued at the fork
 * belonged to the parent's threads and are dropped. */
static void fork_child(void) {
    pthread_mutex_init(&pool.mu, NULL);
    pthread_cond_init(&pool.work_cv, NULL);
    pthread_cond_init(&pool.done_cv, NULL);
    pthread_mutex_init(&resize_mu, NULL);
    pool.head = pool.tail = NULL;
    atomic_store(&pool.queued, 0);
    atomic_store(&pool.n_workers, 0);
    atomic_store(&pool.num_threads, 1);
    pool.stop = false;
}

static void pool_init(void) {
    pthread_atfork(NULL, NULL, fork_child);
    int n = 0;
    const char *env = getenv("MUSA_NUM_THREADS");
    if (env) n = atoi(env);
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0) n = 1;
    if (n > MUSA_MAX_THREADS) n = MUSA_MAX_THREADS;
    start_workers(n);
}

static void ensure_pool(void) {
    pthread_once(&pool_once, pool_init);
}

void musa_pool_resize(int n) {
    ensure_pool();
    if (n < 1) n = 1;
    if (n > MUSA_MAX_THREADS) n = MUSA_MAX_THREADS;
    pthread_mutex_lock(&resize_mu);
    if (n != atomic_load_explicit(&pool.num_threads, memory_order_relaxed)) {
        stop_workers();
        start_workers(n);
    }
    pthread_mutex_unlock(&resize_mu);
}

int musa_pool_threads(void) {
    ensure_pool();
    return atomic_load_explicit(&pool.num_threads, memory_order_relaxed);
}

static _Thread_local int tls_thread_cap; /* 0: none */

void musa_pool_set_thread_cap(int n) {
    tls_thread_cap = n > 0 ? n : 0;
}

int musa_pool_intra_threads(void) {
    if (tls_serial_depth > 0) return 1;
    int n = musa_pool_threads();
    return tls_thread_cap && tls_thread_cap < n ? tls_thread_cap : n;
}

void musa_task_group_init(musa_task_group *g) {
    atomic_init(&g->pending, 0);
}

static void enqueue_locked(musa_task *t) {
    t->next = NULL;
    t->prev = pool.tail;
    if (pool.tail)
        pool.tail->next = t;
    else
        pool.head = t;
    pool.tail = t;
    atomic_fetch_add(&pool.queued, 1);
}

void musa_task_submit(musa_task_group *g, musa_task *t) {
    ensure_pool();
    t->group = g;
    atomic_fetch_add(&g->pending, 1);
    if (atomic_load_explicit(&pool.n_workers, memory_order_relaxed) == 0) {
        /* no workers (or a resize is stopping them): run now, on this thread */
        atomic_fetch_add_explicit(&pool.run_by_callers, 1, memory_order_relaxed);
        run_task(t);
        return;
    }
    pthread_mutex_lock(&pool.mu);
    enqueue_locked(t);
    pthread_cond_signal(&pool.work_cv);
    pthread_mutex_unlock(&pool.mu);
}

static void wait_pending(musa_task_group *g) {
    for (int i = 0; i < SPIN_ITERS && atomic_load(&g->pending) > 0; i++) cpu_relax();
    if (atomic_load(&g->pending) == 0) return;
    pthread_mutex_lock(&pool.mu);
    while (atomic_load(&g->pending) > 0) pthread_cond_wait(&pool.done_cv, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
}

void musa_task_group_wait(musa_task_group *g) {
    /* Help: run queued tasks of this group while any remain. */
    while (atomic_load(&g->pending) > 0) {
        musa_task *t = NULL;
        pthread_mutex_lock(&pool.mu);
        for (musa_task *q = pool.head; q; q = q->next) {
            if (q->group == g) {
                t = q;
                break;
            }
        }
        if (t) {
            if (t->prev)
                t->prev->next = t->next;
            else
                pool.head = t->next;
            if (t->next)
                t->next->prev = t->prev;
            else
                pool.tail = t->prev;
            atomic_fetch_sub(&pool.queued, 1);
        }
        pthread_mutex_unlock(&pool.mu);
        if (!t) break;
        atomic_fetch_add_explicit(&pool.run_by_callers, 1, memory_order_relaxed);
        run_task(t);
    }
    wait_pending(g);
}

void musa_pool_counters(uint64_t *by_workers, uint64_t *by_callers) {
    if (by_workers) *by_workers = atomic_load(&pool.run_by_workers);
    if (by_callers) *by_callers = atomic_load(&pool.run_by_callers);
}

/* ---- parallel_for ---- */

#define SERIAL_PIECE ((int64_t)1 << 20) /* units between interrupt checks, serially */

/* A parallel loop's chunks, in one contiguous run per team thread: thread
 * t claims the chunks of run t first, in order, then those left in the
 * other runs (so a late thread takes fewer). Every loop over the same
 * range cuts it the same way, so a thread works on the part of the data
 * that it touched in the loop before, still in its core's caches. */
typedef struct {
    musa_range_fn fn;
    void *ctx;
    int64_t chunk;
    int team;
    struct {
        alignas(64) atomic_int_fast64_t next; /* the run's next unit (one cache line each) */
        int64_t end;
    } run[MUSA_MAX_THREADS];
} pf_job;

atomic_int musa_interrupt_flag;

void musa_interrupt(void) {
    atomic_store_explicit(&musa_interrupt_flag, 1, memory_order_relaxed);
}

static void pf_runner(pf_job *j, int self) {
    for (int k = 0; k < j->team; k++) {
        int r = (self + k) % j->team; /* its own run, then the others' */
        for (;;) {
            if (musa_interrupt_pending()) return; /* the op reports it */
            int64_t b = atomic_fetch_add(&j->run[r].next, j->chunk), e = j->run[r].end;
            if (b >= e) break;
            j->fn(j->ctx, b, b + j->chunk < e ? b + j->chunk : e);
        }
    }
}

/* Intra-op work runs on OpenMP: oneDNN's GEMMs already use its thread
 * team, and a second team of pthreads waking while OpenMP's threads still
 * spin after a GEMM fights them for the cores (measured: an add after
 * an OpenMP region ran at 0.65 of memcpy bandwidth on the pthread pool, 0.82
 * when the same team did both; see docs/design.md). Each thread takes its
 * own contiguous run of chunks first (pf_job): on the 2-core machine,
 * GPT-tiny's step ran 7 % faster eager and 3-5 % compiled than when every
 * chunk went to whichever thread claimed it next, because a core reading
 * what the other core just wrote pays for moving the lines (bench_cores). */
void musa_parallel_for(int64_t n, int64_t grain, musa_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int threads = musa_pool_intra_threads();
    /* under two grains there is one chunk: a team of one thread would only
     * add a parallel region's cost */
    if (threads <= 1 || n / grain < 2) {
        /* serially, in pieces of SERIAL_PIECE units at most, so a long loop
         * can be interrupted between them (ranges never change results) */
        int64_t piece = grain > SERIAL_PIECE ? grain : SERIAL_PIECE;
        tls_serial_depth++;
        for (int64_t b = 0; b < n && !(b && musa_interrupt_pending()); b += piece)
            fn(ctx, b, n - b < piece ? n : b + piece);
        tls_serial_depth--;
        return;
    }
    int64_t max_chunks = n / grain;
    int64_t chunks = (int64_t)threads * 4 < max_chunks ? (int64_t)threads * 4 : max_chunks;
    if (chunks > threads) chunks -= chunks % threads; /* as many chunks for each thread */
    int64_t chunk = (n + chunks - 1) / chunks, cap = grain > SERIAL_PIECE ? grain : SERIAL_PIECE;
    int team = chunks < threads ? (int)chunks : threads;
    pf_job job; /* not zeroed: only the team's runs are used */
    job.fn = fn, job.ctx = ctx, job.chunk = chunk < cap ? chunk : cap, job.team = team;
    /* run t: units [n t / team, n (t + 1) / team), on chunk boundaries */
    int64_t n_chunks = (n + job.chunk - 1) / job.chunk;
    for (int t = 0; t < team; t++) {
        int64_t c0 = n_chunks * t / team, c1 = n_chunks * (t + 1) / team;
        atomic_init(&job.run[t].next, c0 * job.chunk);
        job.run[t].end = c1 * job.chunk < n ? c1 * job.chunk : n;
    }
#pragma omp parallel num_threads(team)
    {
        tls_serial_depth++;
        pf_runner(&job, omp_get_thread_num());
        tls_serial_depth--;
    }
}

/* ---- whether a core writes what the other has read cheaply ---- */

#define PROBE_WORDS    ((32 << 10) / 8)
#define PROBE_EVERY_NS 100000000LL /* a verdict is kept for 100 ms */

static alignas(64) uint64_t probe_buf[PROBE_WORDS];
static volatile uint64_t probe_sink;
static atomic_int_fast64_t probe_at; /* CLOCK_MONOTONIC ns of the last probe; 0: never */
static atomic_int probe_verdict = 1; /* the last probe's answer */
static atomic_int probe_forced = -1; /* musa_pool_force_sharing */
static atomic_flag probe_busy = ATOMIC_FLAG_INIT; /* one probe at a time: probe_buf is shared */

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t probe_write_ns(uint64_t v) {
    int64_t t0 = mono_ns();
    for (size_t i = 0; i < PROBE_WORDS; i++) probe_buf[i] = v + i;
    return mono_ns() - t0;
}

static void probe_read(void) {
    uint64_t s = 0;
    for (size_t i = 0; i < PROBE_WORDS; i++) s += probe_buf[i];
    probe_sink = s;
}

/* This thread rewriting 32 KiB that OpenMP's thread 1 (the one that runs
 * a parallel_for's second run) has just read, against rewriting them after
 * reading them itself: the median of 3 against the best of 3, after one
 * empty region (the first region after an idle spell may wake thread 1 on
 * this core, where its read costs nothing). The write is the costly
 * direction: reading a line the other core wrote took 1.5x (fast state)
 * and 3.7x (slow state) a local read, writing one the other core read 2.8x
 * and 13x (bench_cores). Here, 32 KiB: 0.2 us locally, 0.5-1.0 us after
 * the other core's read in the fast state, 3.8-4.7 us in the slow one. */
static bool probe_sharing(void) {
    int64_t local = INT64_MAX, remote[3];
    bool two = false;
#pragma omp parallel num_threads(2)
    if (omp_get_thread_num() == 1) two = true;
    if (!two) return true; /* no second thread: nothing to share */
    for (uint64_t r = 0; r < 3; r++) {
        probe_write_ns(r);
        probe_read();
        int64_t t = probe_write_ns(r << 20);
        local = t < local ? t : local;
#pragma omp parallel num_threads(2)
        if (omp_get_thread_num() == 1) probe_read();
        remote[r] = probe_write_ns(r << 40);
    }
    int64_t lo = MUSA_MIN(remote[0], remote[1]), hi = MUSA_MAX(remote[0], remote[1]);
    int64_t median = remote[2] < lo ? lo : remote[2] > hi ? hi : remote[2];
    return median < 4 * local + 1000;
}

bool musa_pool_sharing_cheap(void) {
    int forced = atomic_load_explicit(&probe_forced, memory_order_relaxed);
    if (forced >= 0) return forced;
    int_fast64_t now = mono_ns(), at = atomic_load_explicit(&probe_at, memory_order_relaxed);
    if ((at && now - at < PROBE_EVERY_NS) || !atomic_compare_exchange_strong(&probe_at, &at, now) ||
        atomic_flag_test_and_set(&probe_busy))
        return atomic_load_explicit(&probe_verdict, memory_order_relaxed);
    bool cheap = probe_sharing();
    atomic_store_explicit(&probe_verdict, cheap, memory_order_relaxed);
    atomic_flag_clear(&probe_busy);
    return cheap;
}

void musa_pool_force_sharing(int verdict) {
    atomic_store(&probe_forced, verdict < 0 ? -1 : verdict > 0);
}
