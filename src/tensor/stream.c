/*
 * stream.c - streams and events (musa_stream_*, musa_event_*; see musa.h
 * and stream.h).
 *
 * Invariants:
 * - g.mu guards the registry of live streams, every stream's `issued`
 *   counter and queue order, every storage's use records and the retired
 *   list; a stream's mu guards its queue, its error and `stop`; lock order
 *   is g.mu before a stream's mu, and nobody waits while holding g.mu;
 * - a stream's tasks run in sequence order (queued under g.mu in the order
 *   their numbers were taken), and `done` only grows;
 * - a task depends only on work submitted before it, so waits never cycle;
 * - a worker never drops a storage reference: finished tasks move their
 *   storages to g.retired, which user threads release (retire_drain).
 */
#include "stream.h"

#include <pthread.h>
#include <stdio.h>

#include "../base/profile.h"
#include "../base/threadpool.h"

#define MAX_READERS 4 /* reading streams remembered per storage */

atomic_int musa_streams_live_;
_Thread_local bool musa_on_stream_worker;

typedef struct use {
    uint64_t stream; /* id; 0: none */
    uint64_t seq;
} use;

struct musa_storage_sync {
    use writer;
    use readers[MAX_READERS];
};

typedef struct task {
    musa_stream_work w;
    uint64_t seq;
    int n_deps, n_holds;
    use *deps;
    musa_storage **holds;
    struct task *next;
} task;

struct musa_stream {
    atomic_int refs; /* the owner's and waiters' */
    uint64_t id;
    int threads;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    task *head, *tail;
    uint64_t issued;           /* under g.mu */
    atomic_uint_fast64_t done; /* the last finished task's number */
    bool stop;                 /* under mu */
    bool orphan;               /* in a forked child: no worker thread */
    int err_code;              /* the first failure since the last synchronize */
    uint64_t err_seq;          /* its task; 0: none */
    char err_msg[512];
    struct musa_stream *next; /* registry, under g.mu */
};

typedef struct retired {
    musa_storage **holds;
    int n;
    struct retired *next;
} retired;

static struct {
    pthread_mutex_t mu;
    musa_stream *live;
    uint64_t next_id;
    retired *retired;
    atomic_bool have_retired;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .next_id = 1};

static _Thread_local musa_stream *tl_current;

/* Release storage references in one list; the caller holds no lock. */
static void release_holds(musa_storage **h, int n) {
    for (int i = 0; i < n; i++) musa_storage_release(h[i]);
    free(h);
}

/* Release what finished tasks held. */
static void retire_drain(void) {
    if (!atomic_load_explicit(&g.have_retired, memory_order_acquire)) return;
    pthread_mutex_lock(&g.mu);
    retired *r = g.retired;
    g.retired = NULL;
    atomic_store(&g.have_retired, false);
    pthread_mutex_unlock(&g.mu);
    while (r) {
        retired *n = r->next;
        release_holds(r->holds, r->n);
        free(r);
        r = n;
    }
}

/* The live stream with this id, retained, or NULL (gone: its work is done).
 * Under g.mu. */
static musa_stream *lookup_locked(uint64_t id) {
    for (musa_stream *s = g.live; s; s = s->next)
        if (s->id == id) {
            atomic_fetch_add(&s->refs, 1);
            return s;
        }
    return NULL;
}

static void stream_destroy(musa_stream *s);

static void stream_release(musa_stream *s) {
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) stream_destroy(s);
}

static bool use_done(use u) {
    if (!u.stream) return true;
    musa_stream *s = lookup_locked(u.stream);
    if (!s) return true;
    bool done = atomic_load(&s->done) >= u.seq;
    atomic_fetch_sub(&s->refs, 1); /* never the last: the owner holds one */
    return done;
}

/* Wait until stream `id` has finished task `seq`. Returns the failure of
 * that work or of work before it on the stream (MUSA_OK otherwise), and
 * its message in msg. */
static int wait_use(use u, char *msg, size_t size) {
    if (!u.stream) return MUSA_OK;
    pthread_mutex_lock(&g.mu);
    musa_stream *s = lookup_locked(u.stream);
    pthread_mutex_unlock(&g.mu);
    if (!s) return MUSA_OK;
    int rc = MUSA_OK;
    if (atomic_load(&s->done) < u.seq) {
        pthread_mutex_lock(&s->mu);
        while (atomic_load(&s->done) < u.seq) pthread_cond_wait(&s->done_cv, &s->mu);
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_lock(&s->mu);
    if (s->err_seq && s->err_seq <= u.seq) {
        rc = s->err_code;
        snprintf(msg, size, "work on stream %llu failed: %.440s", (unsigned long long)s->id,
                 s->err_msg);
    }
    pthread_mutex_unlock(&s->mu);
    stream_release(s);
    return rc;
}

/* ---- the worker ---- */

static void run_task(musa_stream *s, task *t) {
    char msg[512] = "";
    int rc = MUSA_OK;
    for (int i = 0; i < t->n_deps && !rc; i++) rc = wait_use(t->deps[i], msg, sizeof msg);
    pthread_mutex_lock(&s->mu);
    bool skip = s->err_seq != 0; /* a failure before it: skipped until synchronize */
    pthread_mutex_unlock(&s->mu);
    if (!rc && !skip) {
        int64_t t0 = MUSA_UNLIKELY(musa_prof_on()) ? musa_prof_now() : 0;
        rc = t->w.fn(t->w.ctx);
        if (rc) snprintf(msg, sizeof msg, "%s", musa_last_error());
        if (MUSA_UNLIKELY(t0)) musa_prof_complete(MUSA_PROFILE_STREAM, t->w.name, t0, NULL);
    }
    if (t->w.free_ctx) t->w.free_ctx(t->w.ctx);
    free(t->deps);
    retired *r = t->n_holds ? malloc(sizeof *r) : NULL;
    if (r) {
        r->holds = t->holds, r->n = t->n_holds;
        pthread_mutex_lock(&g.mu);
        r->next = g.retired;
        g.retired = r;
        atomic_store_explicit(&g.have_retired, true, memory_order_release);
        pthread_mutex_unlock(&g.mu);
    } else if (t->n_holds) {
        /* no memory for the record: keep the references (a leak of a few
         * blocks) rather than release them here */
        musa_err_nomem("stream", sizeof *r);
    } else {
        free(t->holds);
    }
    /* Freed before the task is reported done: a waiter may fork next, and
     * under ASan (GCC 12) a thread inside the allocator at a fork leaves
     * the child its locks held (docs/design.md, "Fork"). */
    uint64_t seq = t->seq;
    free(t);
    pthread_mutex_lock(&s->mu);
    if (rc && !s->err_seq) {
        s->err_code = rc;
        s->err_seq = seq;
        snprintf(s->err_msg, sizeof s->err_msg, "%s", msg);
    }
    atomic_store(&s->done, seq);
    pthread_cond_broadcast(&s->done_cv);
    pthread_mutex_unlock(&s->mu);
}

static void *worker_main(void *arg) {
    musa_stream *s = arg;
    musa_on_stream_worker = true;
    musa_pool_set_thread_cap(s->threads);
    char label[32];
    snprintf(label, sizeof label, "stream %llu", (unsigned long long)s->id);
    musa_prof_thread_setup(label, false);
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->head && !s->stop) pthread_cond_wait(&s->work_cv, &s->mu);
        task *t = s->head;
        if (t) {
            s->head = t->next;
            if (!s->head) s->tail = NULL;
        }
        pthread_mutex_unlock(&s->mu);
        if (!t) break; /* stopping, with nothing queued */
        run_task(s, t);
    }
    return NULL;
}

/* ---- streams ---- */

/* At exit, work still queued finishes before the libraries it uses are torn
 * down. In a forked child the workers are gone: streams are forgotten there
 * (their pending work never runs in the child), and g.mu, held across the
 * fork, is remade. */
static void at_exit(void) {
    (void)musa_synchronize();
}

static void fork_prepare(void) {
    pthread_mutex_lock(&g.mu);
}

static void fork_parent(void) {
    pthread_mutex_unlock(&g.mu);
}

static void fork_child(void) {
    pthread_mutex_init(&g.mu, NULL);
    for (musa_stream *s = g.live; s; s = s->next) { /* no worker here: nothing will run */
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->work_cv, NULL);
        pthread_cond_init(&s->done_cv, NULL);
        s->orphan = true;
        s->head = s->tail = NULL; /* (tasks leaked) */
        atomic_store(&s->done, s->issued);
    }
    g.live = NULL;
    g.retired = NULL; /* (leaked in the child: its storages may be in use) */
    atomic_store(&g.have_retired, false);
    atomic_store(&musa_streams_live_, 0);
    tl_current = NULL;
}

static void install_handlers(void) {
    atexit(at_exit);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

musa_stream *musa_stream_new(int threads) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install_handlers);
    if (threads < 1 || threads > MUSA_MAX_THREADS) {
        musa_err(MUSA_ERR_VALUE, "[Stream] threads must be 1 to %d, got %d", MUSA_MAX_THREADS,
                 threads);
        return NULL;
    }
    musa_stream *s = musa_calloc(1, sizeof *s, "Stream");
    if (!s) return NULL;
    atomic_init(&s->refs, 1);
    atomic_init(&s->done, 0);
    s->threads = threads;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    pthread_cond_init(&s->done_cv, NULL);
    pthread_mutex_lock(&g.mu);
    s->id = g.next_id++;
    pthread_mutex_unlock(&g.mu);
    if (pthread_create(&s->thread, NULL, worker_main, s)) {
        pthread_cond_destroy(&s->work_cv);
        pthread_cond_destroy(&s->done_cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        musa_err(MUSA_ERR_RUNTIME, "[Stream] could not start a worker thread");
        return NULL;
    }
    pthread_mutex_lock(&g.mu);
    s->next = g.live;
    g.live = s;
    atomic_fetch_add(&musa_streams_live_, 1);
    pthread_mutex_unlock(&g.mu);
    return s;
}

static void stream_destroy(musa_stream *s) {
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    if (!s->orphan) pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->work_cv);
    pthread_cond_destroy(&s->done_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void musa_stream_free(musa_stream *s) {
    if (!s) return;
    int rc = musa_stream_synchronize(s);
    MUSA_UNUSED(rc); /* an error nobody collected dies with the stream */
    if (tl_current == s) tl_current = NULL;
    pthread_mutex_lock(&g.mu);
    for (musa_stream **p = &g.live; *p; p = &(*p)->next)
        if (*p == s) { /* (not found in a forked child: forgotten there) */
            *p = s->next;
            atomic_fetch_sub(&musa_streams_live_, 1);
            break;
        }
    pthread_mutex_unlock(&g.mu);
    stream_release(s);
}

uint64_t musa_stream_id(const musa_stream *s) {
    return s ? s->id : 0;
}

int musa_stream_threads(const musa_stream *s) {
    return s ? s->threads : 0;
}

musa_stream *musa_stream_set_current(musa_stream *s) {
    musa_stream *prev = tl_current;
    tl_current = s && !s->orphan ? s : NULL; /* a forked child runs its work itself */
    return prev;
}

musa_stream *musa_stream_current(void) {
    return tl_current;
}

/* The number of the last task submitted to s. */
static uint64_t issued(musa_stream *s) {
    pthread_mutex_lock(&g.mu);
    uint64_t n = s->issued;
    pthread_mutex_unlock(&g.mu);
    return n;
}

bool musa_stream_query(musa_stream *s) {
    return !s || atomic_load(&s->done) >= issued(s);
}

int musa_stream_synchronize(musa_stream *s) {
    if (!s) return MUSA_OK; /* the default stream is always done */
    uint64_t n = issued(s);
    pthread_mutex_lock(&s->mu);
    while (atomic_load(&s->done) < n) pthread_cond_wait(&s->done_cv, &s->mu);
    int rc = s->err_code;
    char msg[512];
    if (s->err_seq) snprintf(msg, sizeof msg, "%s", s->err_msg);
    s->err_code = 0, s->err_seq = 0;
    pthread_mutex_unlock(&s->mu);
    retire_drain();
    if (rc)
        return musa_err(rc, "[stream %llu] work on the stream failed: %s",
                        (unsigned long long)s->id, msg);
    return MUSA_OK;
}

int musa_synchronize(void) {
    pthread_mutex_lock(&g.mu);
    int n = 0;
    for (musa_stream *s = g.live; s; s = s->next) n++;
    musa_stream **all = n ? malloc(sizeof *all * (size_t)n) : NULL;
    if (n && !all) {
        pthread_mutex_unlock(&g.mu);
        return musa_err_nomem("synchronize", sizeof *all * (size_t)n);
    }
    int k = 0;
    for (musa_stream *s = g.live; s; s = s->next) {
        atomic_fetch_add(&s->refs, 1);
        all[k++] = s;
    }
    pthread_mutex_unlock(&g.mu);
    int rc = MUSA_OK;
    char first[1024] = "";
    for (int i = 0; i < k; i++) {
        int r = musa_stream_synchronize(all[i]);
        if (r && !rc) rc = r, snprintf(first, sizeof first, "%s", musa_last_error());
        stream_release(all[i]);
    }
    free(all);
    retire_drain();
    if (rc) musa_err(rc, "%s", first);
    return rc;
}

/* ---- submitting ---- */

static struct musa_storage_sync *sync_of(musa_storage *st) {
    return atomic_load_explicit(&st->sync, memory_order_acquire);
}

static void add_dep(task *t, use u, uint64_t self) {
    if (!u.stream || u.stream == self || use_done(u)) return;
    for (int i = 0; i < t->n_deps; i++)
        if (t->deps[i].stream == u.stream) {
            if (u.seq > t->deps[i].seq) t->deps[i].seq = u.seq;
            return;
        }
    t->deps[t->n_deps++] = u;
}

static bool listed(musa_storage *const *v, int n, const musa_storage *st) {
    for (int i = 0; i < n; i++)
        if (v[i] == st) return true;
    return false;
}

int musa_stream_submit(musa_stream *s, const musa_stream_work *w, int n_reads,
                       musa_storage *const *reads, int n_writes, musa_storage *const *writes,
                       uint64_t *seq) {
    retire_drain();
    int n_st = n_reads + n_writes;
    task *t = calloc(1, sizeof *t);
    int cap = n_reads + n_writes * (1 + MAX_READERS) + 1;
    use *deps = t ? calloc((size_t)cap, sizeof *deps) : NULL;
    musa_storage **holds = t && n_st ? calloc((size_t)n_st, sizeof *holds) : NULL;
    bool ok = t && deps && (holds || !n_st);
    /* records for storages that have none (harmless if we fail later) */
    for (int i = 0; ok && i < n_st; i++) {
        musa_storage *st = i < n_reads ? reads[i] : writes[i - n_reads];
        if (!st || sync_of(st)) continue;
        struct musa_storage_sync *sy = calloc(1, sizeof *sy), *none = NULL;
        if (!sy) {
            ok = false;
            break;
        }
        if (!atomic_compare_exchange_strong(&st->sync, &none, sy)) free(sy);
    }
    if (!ok) {
        free(t), free(deps), free(holds);
        if (w->free_ctx) w->free_ctx(w->ctx);
        return musa_err_nomem("stream", sizeof *t);
    }
    t->w = *w;
    t->deps = deps;
    t->holds = holds;
    pthread_mutex_lock(&g.mu);
    t->seq = ++s->issued;
    use me = {s->id, t->seq};
    if (w->dep_stream) add_dep(t, (use){w->dep_stream, w->dep_seq}, s->id);
    for (int i = 0; i < n_writes; i++) {
        musa_storage *st = writes[i];
        if (!st || listed(writes, i, st)) continue;
        struct musa_storage_sync *sy = sync_of(st);
        add_dep(t, sy->writer, s->id);
        for (int k = 0; k < MAX_READERS; k++) add_dep(t, sy->readers[k], s->id);
        sy->writer = me;
        memset(sy->readers, 0, sizeof sy->readers);
        atomic_fetch_add(&st->refcount, 1);
        holds[t->n_holds++] = st;
    }
    for (int i = 0; i < n_reads; i++) {
        musa_storage *st = reads[i];
        if (!st || listed(reads, i, st) || listed(writes, n_writes, st)) continue;
        struct musa_storage_sync *sy = sync_of(st);
        add_dep(t, sy->writer, s->id);
        int slot = -1;
        for (int k = 0; k < MAX_READERS && slot < 0; k++)
            if (sy->readers[k].stream == s->id) slot = k;
        for (int k = 0; k < MAX_READERS && slot < 0; k++)
            if (use_done(sy->readers[k])) slot = k;
        if (slot < 0) { /* full: this task waits for the oldest, and replaces it */
            add_dep(t, sy->readers[0], s->id);
            memmove(sy->readers, sy->readers + 1, sizeof(use) * (MAX_READERS - 1));
            slot = MAX_READERS - 1;
        }
        sy->readers[slot] = me;
        atomic_fetch_add(&st->refcount, 1);
        holds[t->n_holds++] = st;
    }
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = t;
    else
        s->head = t;
    s->tail = t;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&g.mu);
    if (seq) *seq = me.seq;
    return MUSA_OK;
}

/* ---- synchronous code waits ---- */

int musa_storage_wait(musa_storage *st, bool write) {
    retire_drain();
    if (!st || !sync_of(st)) return MUSA_OK;
    use need[1 + MAX_READERS];
    int n = 0;
    pthread_mutex_lock(&g.mu);
    struct musa_storage_sync *sy = sync_of(st);
    if (sy->writer.stream) need[n++] = sy->writer;
    for (int k = 0; write && k < MAX_READERS; k++)
        if (sy->readers[k].stream) need[n++] = sy->readers[k];
    pthread_mutex_unlock(&g.mu);
    int rc = MUSA_OK;
    char msg[512];
    for (int i = 0; i < n; i++) {
        int r = wait_use(need[i], msg, sizeof msg);
        if (r && !rc) rc = musa_err(r, "[stream] %s", msg);
    }
    if (n) { /* forget finished work, so the next wait is a load */
        pthread_mutex_lock(&g.mu);
        if (use_done(sy->writer)) sy->writer = (use){0, 0};
        for (int k = 0; k < MAX_READERS; k++)
            if (use_done(sy->readers[k])) sy->readers[k] = (use){0, 0};
        pthread_mutex_unlock(&g.mu);
    }
    retire_drain();
    return rc;
}

int musa_storages_wait(int n, musa_storage *const *st, bool write) {
    int rc = MUSA_OK;
    for (int i = 0; i < n; i++) {
        int r = st[i] ? musa_storage_wait(st[i], write) : MUSA_OK;
        if (r && !rc) rc = r;
    }
    return rc;
}

void musa_storage_sync_free(musa_storage *st) {
    free(atomic_load_explicit(&st->sync, memory_order_relaxed));
}

/* ---- events ---- */

typedef struct mark {
    atomic_int refs;
    atomic_int_fast64_t ns; /* when the stream reached it; 0: not yet */
} mark;

struct musa_event {
    bool timing;
    bool recorded;
    use at; /* stream 0: recorded on the default stream (complete) */
    mark *m;
};

static void mark_release(void *m_) {
    mark *m = m_;
    if (m && atomic_fetch_sub(&m->refs, 1) == 1) free(m);
}

/* A task that only orders: an event's place, a wait's barrier. */
static int nothing(void *ctx) {
    MUSA_UNUSED(ctx);
    return MUSA_OK;
}

static int mark_fire(void *m_) {
    mark *m = m_;
    atomic_store(&m->ns, musa_prof_now());
    return MUSA_OK;
}

musa_event *musa_event_new(bool enable_timing) {
    musa_event *e = musa_calloc(1, sizeof *e, "Event");
    if (e) e->timing = enable_timing;
    return e;
}

void musa_event_free(musa_event *e) {
    if (!e) return;
    mark_release(e->m);
    free(e);
}

int musa_event_record(musa_event *e, musa_stream *s) {
    if (!e) return musa_err(MUSA_ERR_VALUE, "[Event.record] event is NULL");
    mark *m = NULL;
    if (e->timing) {
        if (!(m = musa_calloc(1, sizeof *m, "Event.record"))) return MUSA_ERR_NOMEM;
        atomic_init(&m->refs, s ? 2 : 1);
        atomic_init(&m->ns, s ? 0 : musa_prof_now());
    }
    use at = {0, 0};
    if (s) {
        musa_stream_work w = {
            .name = "Event.record", .fn = m ? mark_fire : NULL, .free_ctx = mark_release, .ctx = m};
        if (!m) w.fn = nothing;
        uint64_t seq;
        int rc = musa_stream_submit(s, &w, 0, NULL, 0, NULL, &seq);
        if (rc) {
            mark_release(m);
            return rc;
        }
        at = (use){s->id, seq};
    }
    mark_release(e->m);
    e->m = m;
    e->at = at;
    e->recorded = true;
    return MUSA_OK;
}

bool musa_event_query(const musa_event *e) {
    if (!e || !e->recorded) return true;
    pthread_mutex_lock(&g.mu);
    bool done = use_done(e->at);
    pthread_mutex_unlock(&g.mu);
    return done;
}

int musa_event_synchronize(const musa_event *e) {
    if (!e) return musa_err(MUSA_ERR_VALUE, "[Event.synchronize] event is NULL");
    if (!e->recorded) return MUSA_OK;
    char msg[512];
    int rc = wait_use(e->at, msg, sizeof msg);
    retire_drain();
    return rc ? musa_err(rc, "[Event.synchronize] %s", msg) : MUSA_OK;
}

int musa_stream_wait_event(musa_stream *s, const musa_event *e) {
    if (!e) return musa_err(MUSA_ERR_VALUE, "[Stream.wait_event] event is NULL");
    if (!e->recorded || !e->at.stream) return MUSA_OK; /* nothing pending to wait for */
    if (!s) return musa_event_synchronize(e);          /* the host waits */
    if (e->at.stream == s->id) return MUSA_OK;         /* in order already */
    musa_stream_work w = {.name = "Stream.wait_event",
                          .fn = nothing,
                          .dep_stream = e->at.stream,
                          .dep_seq = e->at.seq};
    return musa_stream_submit(s, &w, 0, NULL, 0, NULL, NULL);
}

int musa_stream_wait_stream(musa_stream *s, musa_stream *other) {
    if (!other || other == s) return MUSA_OK; /* the default stream's work is done */
    musa_event e = {.recorded = true, .at = {other->id, issued(other)}};
    return musa_stream_wait_event(s, &e);
}

int musa_event_elapsed_time(const musa_event *start, const musa_event *end, double *ms) {
    if (!start || !end || !ms)
        return musa_err(MUSA_ERR_VALUE, "[Event.elapsed_time] NULL event or result");
    if (!start->timing || !end->timing)
        return musa_err(MUSA_ERR_VALUE, "[Event.elapsed_time] both events need "
                                        "enable_timing=True");
    if (!start->recorded || !end->recorded)
        return musa_err(MUSA_ERR_VALUE, "[Event.elapsed_time] both events must be recorded first");
    int64_t a = atomic_load(&start->m->ns), b = atomic_load(&end->m->ns);
    if (!a || !b)
        return musa_err(MUSA_ERR_RUNTIME, "[Event.elapsed_time] an event has not completed yet; "
                                          "synchronize it first");
    *ms = (double)(b - a) / 1e6;
    return MUSA_OK;
}
