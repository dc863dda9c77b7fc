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
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cpu/alloc.h"
#include "base/threadpool.h"
#include "harness.h"
#include "util.h"

#define THREADS 4

/* Workers start fn together, once all are created, so their work overlaps. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool go;
} start_gate;

typedef struct worker {
    pthread_t th;
    int id;
    void *ctx;
    void (*fn)(struct worker *);
    start_gate *gate;
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
    pthread_mutex_lock(&w->gate->mu);
    while (!w->gate->go) pthread_cond_wait(&w->gate->cv, &w->gate->mu);
    pthread_mutex_unlock(&w->gate->mu);
    w->fn(w);
    return NULL;
}

/* Run fn on n threads (each with its id and ctx); join them. Returns the
 * first worker's failure message, or NULL when all passed. */
static const char *run_workers(int n, void (*fn)(worker *), void *ctx, worker *ws) {
    start_gate gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    for (int i = 0; i < n; i++) {
        ws[i] = (worker){.id = i, .ctx = ctx, .fn = fn, .gate = &gate};
        if (pthread_create(&ws[i].th, NULL, worker_main, &ws[i]) != 0) {
            snprintf(ws[i].err, sizeof ws[i].err, "pthread_create failed");
            ws[i].fn = NULL;
        }
    }
    pthread_mutex_lock(&gate.mu);
    gate.go = true;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
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

/* The sharing probe (threadpool.c) from several threads at once: one of
 * them probes, the others take the verdict (ThreadSanitizer checks the
 * probe's buffer is never written by two). */
static void probe_work(worker *w) {
    for (int i = 0; i < 200; i++) {
        int v = musa_pool_sharing_cheap();
        if (v != 0 && v != 1) failf(w, "verdict %d", v);
    }
}

TEST(sharing_probe_forced_and_from_several_threads) {
    int saved = musa_get_num_threads();
    CHECK_OK(musa_set_num_threads(2));
    musa_pool_force_sharing(1);
    CHECK(musa_pool_sharing_cheap());
    musa_pool_force_sharing(0);
    CHECK(!musa_pool_sharing_cheap());
    musa_pool_force_sharing(-1);
    CHECK_WORKERS(THREADS, probe_work, NULL);
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

/* ---- plans ---- */

/* softmax(x, 1) + softmax(x, 0): two independent heavy branches (plans
 * pair no GEMMs), then an add. */
static musa_tensor *two_branches(musa_tensor *x) {
    musa_tensor *a = musa_softmax(x, 1);
    musa_tensor *b = musa_softmax(x, 0);
    musa_tensor *y = musa_add(a, b);
    musa_tensor_release(a), musa_tensor_release(b);
    return y;
}

/* y = sum(relu(x @ w + b) * 0.5, dim 1): a matmul heading a fused group. */
static musa_tensor *mlp_block(musa_tensor *x, musa_tensor *w, musa_tensor *b) {
    musa_tensor *h = musa_matmul(x, w);
    musa_tensor *hb = musa_add(h, b);
    musa_tensor *r = musa_relu(hb);
    musa_tensor *half = musa_number(0.5);
    musa_tensor *m = musa_mul(r, half);
    int64_t d = 1;
    musa_tensor *s = musa_sum(m, 1, &d, false);
    release_all(5, h, hb, r, half, m);
    return s;
}

typedef struct {
    musa_tensor *(*f)(musa_tensor *x, void *fctx);
    void *fctx;
} unary_fn;

static musa_tensor *call_two_branches(musa_tensor *x, void *fctx) {
    MUSA_UNUSED(fctx);
    return two_branches(x);
}

static musa_tensor *call_mlp(musa_tensor *x, void *fctx) {
    musa_tensor **wb = fctx;
    return mlp_block(x, wb[0], wb[1]);
}

/* Parameter values of g bound to tensor t, and of any other tensor. */
static void count_params(const musa_graph *g, const musa_tensor *t, int *of_t, int *others) {
    *of_t = *others = 0;
    for (int v = 0; v < musa_graph_num_values(g); v++)
        if (musa_graph_value_kind(g, v) == MUSA_VALUE_PARAM)
            (musa_graph_value_tensor(g, v) == t ? of_t : others)[0]++;
}

/* Capture f on a meta tensor shaped like x, optimise, build. NULL on any
 * failure (the error set); *gout receives the graph the plan needs. With
 * `param`, *params_of counts the captured graph's values bound to it. */
static musa_plan *compile_counting(unary_fn f, const musa_tensor *x, const musa_plan_options *opt,
                                   musa_graph **gout, const musa_tensor *param, int *params_of,
                                   int *params_other) {
    musa_graph *g = musa_graph_new();
    musa_tensor *m =
        musa_empty_meta(musa_tensor_dtype(x), musa_tensor_ndim(x), musa_tensor_shape(x));
    int rc = !g || !m ? MUSA_ERR_NOMEM : musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC);
    if (!rc) rc = musa_graph_add_input(g, m, "x");
    musa_tensor *y = rc ? NULL : f.f(m, f.fctx);
    if (y) rc = musa_graph_set_outputs(g, 1, &y);
    int rc2 = g ? musa_graph_capture_end(g) : MUSA_OK;
    musa_tensor_release(y), musa_tensor_release(m);
    if (param) count_params(g, param, params_of, params_other);
    musa_pass_ctx ctx = {.fusion_level = 1, .verify = true};
    musa_plan *p = NULL;
    if (!rc && !rc2 && y && !musa_graph_optimize(g, &ctx)) p = musa_plan_build(g, opt);
    if (!p) {
        musa_graph_free(g);
        return NULL;
    }
    *gout = g;
    return p;
}

static musa_plan *compile(unary_fn f, const musa_tensor *x, const musa_plan_options *opt,
                          musa_graph **gout) {
    return compile_counting(f, x, opt, gout, NULL, NULL, NULL);
}

typedef struct {
    musa_plan *p;
    musa_tensor **xs;   /* [THREADS] each thread's input */
    musa_tensor **refs; /* [THREADS] its serial result */
    int rounds;
} plan_job;

static void run_plan_rounds(worker *w) {
    plan_job *j = w->ctx;
    for (int r = 0; r < j->rounds && !w->err[0]; r++) {
        musa_tensor *out = NULL;
        if (musa_plan_run(j->p, 1, &j->xs[w->id], 1, &out))
            failf(w, "thread %d run %d: %s", w->id, r, musa_last_error());
        else if (!same_values(out, j->refs[w->id]))
            failf(w, "thread %d run %d: output differs from the serial run", w->id, r);
        musa_tensor_release(out);
    }
}

/* Run p on THREADS threads at once, thread i on xs[i], each output equal to
 * a serial run's. */
static const char *plan_from_threads(musa_plan *p, musa_tensor **xs, int rounds) {
    static char msg[300];
    musa_tensor *refs[THREADS] = {NULL};
    for (int i = 0; i < THREADS; i++)
        if (musa_plan_run(p, 1, &xs[i], 1, &refs[i])) {
            snprintf(msg, sizeof msg, "serial run: %s", musa_last_error());
            for (int k = 0; k < i; k++) musa_tensor_release(refs[k]);
            return msg;
        }
    plan_job j = {p, xs, refs, rounds};
    worker ws[THREADS];
    const char *e = run_workers(THREADS, run_plan_rounds, &j, ws);
    if (e) snprintf(msg, sizeof msg, "%s", e);
    for (int i = 0; i < THREADS; i++) musa_tensor_release(refs[i]);
    return e ? msg : NULL;
}

TEST(parallel_plan_steps_match_a_serial_plan) {
    int saved = musa_get_num_threads();
    CHECK_OK(musa_set_num_threads(2));
    useed(11);
    int64_t xs[2] = {192, 192}; /* big enough for a softmax to be a task of its own */
    musa_tensor *x[THREADS];
    for (int i = 0; i < THREADS; i++) x[i] = rnd(MUSA_DTYPE_FLOAT32, 2, xs, -1, 1, L_CONTIG);
    unary_fn f = {call_two_branches, NULL};
    musa_graph *g1 = NULL, *g2 = NULL;
    musa_plan_options serial = {.num_threads = 1, .memory_arena = true};
    musa_plan_options par = {.num_threads = 2, .memory_arena = true};
    musa_plan *p1 = compile(f, x[0], &serial, &g1), *p2 = compile(f, x[0], &par, &g2);
    CHECK(p1 && p2);
    CHECK(musa_plan_get_stats(p1)->parallel_steps == 0);
    CHECK(musa_plan_get_stats(p2)->parallel_steps == 1);
    for (int i = 0; i < THREADS; i++) {
        musa_tensor *o1 = NULL, *o2 = NULL;
        CHECK_OK(musa_plan_run(p1, 1, &x[i], 1, &o1));
        CHECK_OK(musa_plan_run(p2, 1, &x[i], 1, &o2));
        bool same = same_values(o1, o2);
        musa_tensor_release(o1), musa_tensor_release(o2);
        CHECK_MSG(same, "input %d: the parallel plan differs from the serial one", i);
    }
    CHECK(musa_plan_get_stats(p2)->parallel_tasks == 2u * THREADS);
    /* and the parallel plan run by several threads at once */
    const char *e = plan_from_threads(p2, x, 5);
    CHECK_MSG(!e, "%s", e);
    CHECK(musa_plan_get_stats(p2)->runs == (uint64_t)THREADS * 7);
    musa_plan_free(p1), musa_plan_free(p2);
    musa_graph_free(g1), musa_graph_free(g2);
    for (int i = 0; i < THREADS; i++) musa_tensor_release(x[i]);
    CHECK_OK(musa_set_num_threads(saved));
}

TEST(one_plan_run_from_several_threads) {
    useed(12);
    int64_t xs[2] = {64, 32}, wsh[2] = {32, 24}, bs[1] = {24};
    musa_tensor *x[THREADS];
    for (int i = 0; i < THREADS; i++) x[i] = rnd(MUSA_DTYPE_FLOAT32, 2, xs, -1, 1, L_CONTIG);
    musa_tensor *wb[2] = {rnd(MUSA_DTYPE_FLOAT32, 2, wsh, -1, 1, L_CONTIG),
                          rnd(MUSA_DTYPE_FLOAT32, 1, bs, -1, 1, L_CONTIG)};
    unary_fn f = {call_mlp, wb};
    musa_graph *g = NULL;
    musa_plan *p = compile(f, x[0], NULL, &g); /* defaults: arena on, all threads */
    CHECK(p);
    CHECK(musa_plan_get_stats(p)->fused_groups == 1);
    const char *e = plan_from_threads(p, x, 8);
    CHECK_MSG(!e, "%s", e);
    CHECK(musa_plan_get_stats(p)->runs == (uint64_t)THREADS * 9);
    musa_plan_free(p);
    musa_graph_free(g);
    for (int i = 0; i < THREADS; i++) musa_tensor_release(x[i]);
    release_all(2, wb[0], wb[1]);
}

typedef struct {
    musa_tensor **xs, **wb, **eager; /* inputs, shared parameters, serial eager results */
} capture_job;

/* mlp_block(x, w, b) summed over 4 uses: each capture meets w and b often. */
static musa_tensor *call_mlp4(musa_tensor *x, void *fctx) {
    musa_tensor **wb = fctx, *acc = mlp_block(x, wb[0], wb[1]);
    for (int k = 1; k < 4 && acc; k++) {
        musa_tensor *y = mlp_block(x, wb[0], wb[1]), *s = y ? musa_add(acc, y) : NULL;
        musa_tensor_release(acc), musa_tensor_release(y);
        acc = s;
    }
    return acc;
}

static void capture_and_run(worker *w) {
    capture_job *j = w->ctx;
    for (int r = 0; r < 3 && !w->err[0]; r++) {
        musa_graph *g = NULL;
        int of_w = 0, others = 0;
        musa_plan *p = compile_counting((unary_fn){call_mlp4, j->wb}, j->xs[w->id], NULL, &g,
                                        j->wb[0], &of_w, &others);
        musa_tensor *out = NULL;
        if (!p)
            failf(w, "thread %d: compile failed: %s", w->id, musa_last_error());
        else if (of_w != 1 || others != 1) /* w and b, each bound once */
            failf(w, "thread %d: the graph binds w %d times and %d other tensors", w->id, of_w,
                  others);
        else if (musa_plan_run(p, 1, &j->xs[w->id], 1, &out))
            failf(w, "thread %d: run failed: %s", w->id, musa_last_error());
        else if (!same_values(out, j->eager[w->id]))
            failf(w, "thread %d: the compiled result differs from eager", w->id);
        musa_tensor_release(out);
        musa_plan_free(p);
        musa_graph_free(g);
    }
}

TEST(captures_on_several_threads_at_once) {
    useed(13);
    int64_t xs[2] = {16, 32}, wsh[2] = {32, 24}, bs[1] = {24};
    musa_tensor *x[THREADS], *eager[THREADS];
    musa_tensor *wb[2] = {rnd(MUSA_DTYPE_FLOAT32, 2, wsh, -1, 1, L_CONTIG),
                          rnd(MUSA_DTYPE_FLOAT32, 1, bs, -1, 1, L_CONTIG)};
    for (int i = 0; i < THREADS; i++) {
        x[i] = rnd(MUSA_DTYPE_FLOAT32, 2, xs, -1, 1, L_CONTIG);
        eager[i] = call_mlp4(x[i], wb);
    }
    capture_job j = {x, wb, eager};
    CHECK_WORKERS(THREADS, capture_and_run, &j);
    for (int i = 0; i < THREADS; i++) musa_tensor_release(x[i]), musa_tensor_release(eager[i]);
    release_all(2, wb[0], wb[1]);
}

/* ---- backward on several threads, sharing a leaf ---- */

/* A float32 tensor of small integers in [lo, hi] (exact in any sum here). */
static musa_tensor *int_valued(int ndim, const int64_t *shape, int lo, int hi) {
    int64_t n = numel_of(ndim, shape);
    double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = lo + (int)(urand() * (hi - lo + 1));
    musa_tensor *t = from_list(MUSA_DTYPE_FLOAT32, ndim, shape, v);
    free(v);
    return t;
}

typedef struct {
    musa_tensor *w;   /* the shared leaf (8, 6) */
    musa_tensor **xs; /* [THREADS] integer-valued inputs (5, 8) */
    musa_tensor **ys; /* [THREADS] graphs built beforehand, or NULL */
    int rounds;
    pthread_barrier_t start; /* each round's backward passes start together */
} backward_job;

/* sum of USES products x @ w: d/dw = USES x^T @ ones, integers; w is used
 * USES times, so each pass accumulates into its leaf node repeatedly. */
#define USES 6
static musa_tensor *loss_of(musa_tensor *x, musa_tensor *w) {
    musa_tensor *acc = NULL;
    for (int k = 0; k < USES; k++) {
        musa_tensor *m = musa_matmul(x, w),
                    *a = acc && m ? musa_add(acc, m) : musa_tensor_retain(m);
        musa_tensor_release(acc), musa_tensor_release(m);
        if (!(acc = a)) return NULL;
    }
    musa_tensor *s = musa_sum(acc, 0, NULL, false);
    musa_tensor_release(acc);
    return s;
}

static void backward_prebuilt(worker *w) {
    backward_job *j = w->ctx;
    for (int r = 0; r < j->rounds; r++) { /* every round, even after a failure: the barrier */
        pthread_barrier_wait(&j->start);
        if (musa_backward(1, &j->ys[w->id], NULL, true, false))
            failf(w, "thread %d round %d: backward failed: %s", w->id, r, musa_last_error());
    }
}

static void forward_and_backward(worker *w) {
    backward_job *j = w->ctx;
    for (int r = 0; r < j->rounds && !w->err[0]; r++) {
        musa_tensor *y = loss_of(j->xs[w->id], j->w);
        if (!y || musa_backward(1, &y, NULL, false, false))
            failf(w, "thread %d round %d: %s", w->id, r, musa_last_error());
        musa_tensor_release(y);
        /* .grad may be fetched meanwhile (its values are still being summed) */
        musa_tensor_release(musa_tensor_grad(j->w));
    }
}

/* The sum over threads of rounds * d sum(x_i @ w)/dw, computed serially
 * on a copy of w. */
static musa_tensor *serial_grad(musa_tensor *w, musa_tensor **xs, int rounds) {
    bool prev = musa_set_grad_enabled(false);
    musa_tensor *c = musa_clone(w);
    musa_set_grad_enabled(prev);
    musa_tensor_set_requires_grad(c, true);
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < THREADS; i++) {
            musa_tensor *y = loss_of(xs[i], c);
            int rc = y ? musa_backward(1, &y, NULL, false, false) : MUSA_ERR_RUNTIME;
            musa_tensor_release(y);
            if (rc) {
                musa_tensor_release(c);
                return NULL;
            }
        }
    musa_tensor *g = musa_tensor_grad(c);
    musa_tensor_release(c);
    return g;
}

static void make_backward_inputs(backward_job *j, musa_tensor **xs) {
    int64_t xsh[2] = {5, 8}, wsh[2] = {8, 6};
    j->w = int_valued(2, wsh, -3, 3);
    musa_tensor_set_requires_grad(j->w, true);
    for (int i = 0; i < THREADS; i++) xs[i] = int_valued(2, xsh, -4, 4);
    j->xs = xs;
}

TEST(backward_of_prebuilt_graphs_sharing_a_leaf) {
    useed(14);
    musa_tensor *xs[THREADS], *ys[THREADS];
    backward_job j = {.ys = ys, .rounds = 5};
    pthread_barrier_init(&j.start, NULL, THREADS);
    make_backward_inputs(&j, xs);
    for (int i = 0; i < THREADS; i++) CHECK((ys[i] = loss_of(xs[i], j.w)));
    CHECK_WORKERS(THREADS, backward_prebuilt, &j);
    pthread_barrier_destroy(&j.start);
    musa_tensor *got = musa_tensor_grad(j.w), *want = serial_grad(j.w, xs, j.rounds);
    CHECK(got && want);
    bool same = same_values(got, want);
    release_all(2, got, want);
    CHECK_MSG(same, "the accumulated .grad differs from the serial sum");
    for (int i = 0; i < THREADS; i++) musa_tensor_release(xs[i]), musa_tensor_release(ys[i]);
    musa_tensor_release(j.w);
}

TEST(forward_and_backward_per_thread_sharing_a_leaf) {
    useed(15);
    musa_tensor *xs[THREADS];
    backward_job j = {.rounds = 6};
    make_backward_inputs(&j, xs);
    CHECK_WORKERS(THREADS, forward_and_backward, &j);
    musa_tensor *got = musa_tensor_grad(j.w), *want = serial_grad(j.w, xs, j.rounds);
    CHECK(got && want);
    bool same = same_values(got, want);
    release_all(2, got, want);
    CHECK_MSG(same, "the accumulated .grad differs from the serial sum");
    for (int i = 0; i < THREADS; i++) musa_tensor_release(xs[i]);
    musa_tensor_release(j.w);
}

typedef struct {
    backward_job b;
    musa_tensor **want; /* [THREADS] serial musa_grad results */
} grad_job;

static void grad_per_thread(worker *w) {
    grad_job *j = w->ctx;
    for (int r = 0; r < 4 && !w->err[0]; r++) {
        musa_tensor *y = loss_of(j->b.xs[w->id], j->b.w), *g = NULL;
        if (!y || musa_grad(1, &y, NULL, 1, &j->b.w, false, false, false, &g))
            failf(w, "thread %d: musa_grad failed: %s", w->id, musa_last_error());
        else if (!same_values(g, j->want[w->id]))
            failf(w, "thread %d: musa_grad differs from the serial result", w->id);
        musa_tensor_release(y), musa_tensor_release(g);
    }
}

TEST(grad_on_several_threads_sharing_an_input) {
    useed(16);
    musa_tensor *xs[THREADS], *want[THREADS] = {NULL};
    grad_job j = {.want = want};
    make_backward_inputs(&j.b, xs);
    for (int i = 0; i < THREADS; i++) {
        musa_tensor *y = loss_of(xs[i], j.b.w);
        CHECK_OK(musa_grad(1, &y, NULL, 1, &j.b.w, false, false, false, &want[i]));
        musa_tensor_release(y);
    }
    CHECK_WORKERS(THREADS, grad_per_thread, &j);
    musa_tensor *g = musa_tensor_grad(j.b.w);
    CHECK(!g); /* musa_grad never accumulates */
    for (int i = 0; i < THREADS; i++) release_all(2, xs[i], want[i]);
    musa_tensor_release(j.b.w);
}

/* ---- eager ops on shared, read-only inputs ---- */

#define N_EAGER 7

typedef struct {
    musa_tensor *x, *w, *img, *k; /* shared inputs */
    musa_tensor *want[N_EAGER];   /* serial results */
} eager_job;

/* Result i of the eager workload (a new reference, or NULL). */
static musa_tensor *eager_op(eager_job *j, int i) {
    int64_t d = 1, one[2] = {1, 1};
    musa_tensor *t, *r;
    switch (i) {
    case 0:
        return musa_matmul(j->x, j->w);
    case 1:
        return musa_add(j->x, j->w);
    case 2:
        return musa_exp(j->x);
    case 3:
        return musa_sum(j->x, 1, &d, false);
    case 4:
        return musa_softmax(j->x, 1);
    case 5:
        return musa_conv2d(j->img, j->k, NULL, one, one, one, 1);
    default:
        t = musa_transpose(j->x, 0, 1);
        r = t ? musa_contiguous(t) : NULL;
        musa_tensor_release(t);
        return r;
    }
}

static void eager_work(worker *w) {
    eager_job *j = w->ctx;
    for (int r = 0; r < 4 && !w->err[0]; r++)
        for (int i = 0; i < N_EAGER && !w->err[0]; i++) {
            int op = (i + w->id) % N_EAGER; /* threads run different ops at once */
            musa_tensor *got = eager_op(j, op);
            if (!got)
                failf(w, "thread %d: op %d failed: %s", w->id, op, musa_last_error());
            else if (!same_values(got, j->want[op]))
                failf(w, "thread %d: op %d differs from the serial result", w->id, op);
            musa_tensor_release(got);
        }
}

TEST(eager_ops_on_shared_inputs) {
    useed(17);
    int64_t xs[2] = {64, 64}, is[4] = {2, 3, 16, 16}, ks[4] = {4, 3, 3, 3};
    eager_job j = {rnd(MUSA_DTYPE_FLOAT32, 2, xs, -1, 1, L_CONTIG),
                   rnd(MUSA_DTYPE_FLOAT32, 2, xs, -1, 1, L_CONTIG),
                   rnd(MUSA_DTYPE_FLOAT32, 4, is, -1, 1, L_CONTIG),
                   rnd(MUSA_DTYPE_FLOAT32, 4, ks, -1, 1, L_CONTIG)};
    for (int i = 0; i < N_EAGER; i++) CHECK((j.want[i] = eager_op(&j, i)));
    CHECK_WORKERS(THREADS, eager_work, &j);
    for (int i = 0; i < N_EAGER; i++) musa_tensor_release(j.want[i]);
    release_all(4, j.x, j.w, j.img, j.k);
}

/* ---- the allocator ---- */

#define HANDOFF 8

typedef struct {
    pthread_mutex_t mu;
    musa_tensor *slot[HANDOFF]; /* tensors made on one thread, freed on another */
} alloc_job;

/* Element count of allocation k of thread id: small (thread-cached) to 400 KB. */
static int64_t alloc_len(int id, int k) {
    static const int64_t sizes[] = {1, 3, 16, 100, 255, 256, 1000, 4096, 30000, 100000};
    return sizes[(k * 7 + id * 3) % 10];
}

/* Fill t with a value that names its maker; check it is still there. */
static void stamp(musa_tensor *t, float v) {
    float *p = musa_tensor_data(t);
    for (int64_t i = 0; i < musa_tensor_numel(t); i++) p[i] = v;
}

static bool stamped(const musa_tensor *t, float v) {
    const float *p = musa_tensor_data(t);
    for (int64_t i = 0; i < musa_tensor_numel(t); i++)
        if (p[i] != v) return false;
    return true;
}

static void alloc_work(worker *w) {
    alloc_job *j = w->ctx;
    musa_tensor *live[6] = {NULL};
    float mine = (float)(w->id + 1);
    for (int k = 0; k < 300 && !w->err[0]; k++) {
        int s = k % 6;
        if (live[s] && !stamped(live[s], mine)) failf(w, "thread %d: a live block changed", w->id);
        musa_tensor_release(live[s]);
        int64_t n = alloc_len(w->id, k);
        if (!(live[s] = musa_empty(1, &n, MUSA_DTYPE_FLOAT32))) {
            failf(w, "thread %d: alloc of %lld floats failed", w->id, (long long)n);
            break;
        }
        stamp(live[s], mine);
        if (k % 5 == 0) { /* swap one with whatever another thread left */
            musa_tensor *t = musa_empty(1, &n, MUSA_DTYPE_FLOAT32), *old;
            if (!t) continue;
            stamp(t, -mine);
            pthread_mutex_lock(&j->mu);
            old = j->slot[k % HANDOFF];
            j->slot[k % HANDOFF] = t;
            pthread_mutex_unlock(&j->mu);
            if (old && ((float *)musa_tensor_data(old))[0] >= 0)
                failf(w, "thread %d: a handed-off block changed", w->id);
            musa_tensor_release(old);
        }
        if (w->id == 0 && k % 50 == 0) musa_alloc_empty_cache();
    }
    for (int s = 0; s < 6; s++) musa_tensor_release(live[s]);
}

TEST(allocator_caches_under_concurrent_alloc_and_free) {
    musa_alloc_stats before, after;
    musa_alloc_get_stats(&before);
    alloc_job j = {.mu = PTHREAD_MUTEX_INITIALIZER};
    CHECK_WORKERS(THREADS, alloc_work, &j);
    for (int i = 0; i < HANDOFF; i++) musa_tensor_release(j.slot[i]);
    musa_alloc_get_stats(&after);
    CHECK_MSG(after.current_bytes == before.current_bytes, "current_bytes %zu, was %zu",
              after.current_bytes, before.current_bytes);
    CHECK(after.alloc_count >= before.alloc_count + THREADS * 300);
}

/* Under ThreadSanitizer the build runs OpenMP on LLVM's libomp, whose
 * fork handler, in a child forked from a threaded process under TSan's
 * runtime, faulted in 1 of 200 children in one CI run (in libomp's own
 * vsnprintf, not in musa; TSan does not support fork from multithreaded
 * programs reliably). The allocator's fork handlers are checked by the
 * normal and the ASan builds, which run this test. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#endif

/* A thread allocating blocks past the per-thread caches (so the shared
 * lists' lock) while the main thread forks: each child allocates and
 * exits. A child given the lock as another thread held it at the fork
 * would wait for ever; alarm() turns that into a failed exit. Without the
 * fork handlers 56 of 200 children hung here. */
#ifndef UNDER_TSAN
static atomic_bool fork_stop;

static void *alloc_loop(void *arg) {
    (void)arg;
    while (!atomic_load(&fork_stop)) {
        size_t got;
        void *p = musa_cpu_alloc(8192, &got);
        if (p) musa_cpu_free(p, got);
    }
    return NULL;
}
#endif

TEST(fork_while_another_thread_allocates) {
#ifndef UNDER_TSAN /* see above */
    size_t got;
    void *warm = musa_cpu_alloc(8192, &got); /* cached from here on: no malloc in the loop */
    CHECK(warm != NULL);
    musa_cpu_free(warm, got);
    pthread_t t;
    atomic_store(&fork_stop, false);
    CHECK(pthread_create(&t, NULL, alloc_loop, NULL) == 0);
    int stuck = 0;
    for (int k = 0; k < 200; k++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            alarm(2);
            size_t b;
            void *p = musa_cpu_alloc(8192, &b);
            if (p) musa_cpu_free(p, b);
            _exit(p ? 0 : 2);
        }
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        stuck += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    atomic_store(&fork_stop, true);
    pthread_join(t, NULL);
    CHECK_MSG(stuck == 0, "%d of 200 forked children did not allocate and exit", stuck);
#endif
}
