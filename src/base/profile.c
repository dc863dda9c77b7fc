/*
 * profile.c - the profiler's recorder and its Chrome trace writer (see
 * profile.h and the Profiler section of musa.h).
 *
 * Each thread records into its own buffer (events and an arena for their
 * detail strings) under the buffer's lock, which only a start, a stop's
 * snapshot and the thread itself take. Buffers are listed in `reg`; a
 * thread's exit marks its buffer dead, and the next start frees dead
 * buffers and empties live ones. A stop copies every buffer's events into
 * one snapshot sorted by start, which the readers and the writer use.
 */
#define _GNU_SOURCE
#include "profile.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "dtype.h"
#include "sbuf.h"

atomic_int musa_prof_flags_;

typedef struct prof_thread {
    pthread_mutex_t mu;
    int tid;
    char label[32]; /* the lane's name, or "" */
    bool dead;      /* its thread exited (under reg.mu) */
    musa_profile_event *ev;
    int64_t n, cap;
    musa_arena strings;
    struct prof_thread *next;
} prof_thread;

static struct {
    pthread_mutex_t mu; /* guards everything here */
    prof_thread *threads;
    int64_t t_start;          /* musa_prof_now() at the start */
    musa_profile_event *snap; /* the stopped session, sorted */
    int64_t n_snap;
    bool running;
} reg = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const char *(*_Atomic location_fn)(void);

void musa_profiler_set_location_fn(const char *(*fn)(void)) {
    atomic_store(&location_fn, fn);
}

static _Thread_local prof_thread *tl_buf;
static _Thread_local char tl_label[32];
static _Thread_local bool tl_no_location;

void musa_prof_thread_setup(const char *label, bool locations) {
    snprintf(tl_label, sizeof tl_label, "%s", label ? label : "");
    tl_no_location = !locations;
    if (tl_buf) { /* the trace writer reads labels under reg.mu */
        pthread_mutex_lock(&reg.mu);
        memcpy(tl_buf->label, tl_label, sizeof tl_label);
        pthread_mutex_unlock(&reg.mu);
    }
}
static pthread_key_t tl_key;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;
/* the session's start time (read without reg.mu) */
static atomic_int_fast64_t cur_start;

static void thread_exit(void *arg) {
    prof_thread *b = arg;
    pthread_mutex_lock(&reg.mu);
    b->dead = true;
    pthread_mutex_unlock(&reg.mu);
}

static void make_key(void) {
    pthread_key_create(&tl_key, thread_exit);
}

int64_t musa_prof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + 1;
}

/* The calling thread's buffer, made on first use; NULL without memory. */
static prof_thread *my_buffer(void) {
    if (MUSA_LIKELY(tl_buf != NULL)) return tl_buf;
    prof_thread *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    pthread_mutex_init(&b->mu, NULL);
    musa_arena_init(&b->strings, 16384);
    b->tid = (int)syscall(SYS_gettid);
    memcpy(b->label, tl_label, sizeof tl_label);
    pthread_once(&tl_once, make_key);
    pthread_setspecific(tl_key, b);
    pthread_mutex_lock(&reg.mu);
    b->next = reg.threads;
    reg.threads = b;
    pthread_mutex_unlock(&reg.mu);
    tl_buf = b;
    return b;
}

/* Append e (detail copied, and its name with copy_name) to the calling
 * thread's buffer if the session that began before t0 is still recording.
 * With MUSA_PROFILE_STACK its location is `loc` (copied) when given, else
 * for ops and ranges the location function's. */
static void append(musa_profile_event e, int64_t t0, const char *detail, bool copy_name,
                   const char *loc) {
    prof_thread *b = my_buffer();
    if (!b) return;
    e.location = "";
    bool stack = (musa_prof_on() & MUSA_PROFILE_STACK) != 0;
    const char *(*where)(void) = atomic_load(&location_fn);
    if (stack && !loc && where && !tl_no_location &&
        (e.kind == MUSA_PROFILE_OP || e.kind == MUSA_PROFILE_RANGE)) {
        const char *w = where(); /* outside the buffer's lock: it may run Python */
        if (w) e.location = w;
    }
    pthread_mutex_lock(&b->mu);
    /* under b->mu a start cannot run (it takes every buffer's lock), so the
     * session read here holds until the append is done */
    int64_t start = atomic_load(&cur_start);
    if (musa_prof_on() && t0 >= start) {
        if (b->n == b->cap) {
            int64_t cap = b->cap ? b->cap * 2 : 1024;
            musa_profile_event *ev = realloc(b->ev, (size_t)cap * sizeof *ev);
            if (!ev) goto out;
            b->ev = ev, b->cap = cap;
        }
        e.start_ns = t0 - start;
        e.tid = b->tid;
        e.detail = "";
        if (copy_name && !(e.name = musa_arena_strdup(&b->strings, e.name))) goto out;
        if (stack && loc && *loc && !(e.location = musa_arena_strdup(&b->strings, loc)))
            e.location = "";
        if (detail && *detail) {
            char *d = musa_arena_strdup(&b->strings, detail);
            if (d) e.detail = d;
        }
        b->ev[b->n++] = e;
    }
out:
    pthread_mutex_unlock(&b->mu);
}

void musa_prof_complete(int kind, const char *name, int64_t t0, const char *detail) {
    int64_t t1 = musa_prof_now();
    append((musa_profile_event){.name = name, .kind = kind, .dur_ns = t1 - t0}, t0, detail, false,
           NULL);
}

void musa_prof_complete_copy(int kind, const char *name, int64_t t0, const char *detail) {
    musa_prof_complete_at(kind, name, t0, detail, NULL);
}

void musa_prof_complete_at(int kind, const char *name, int64_t t0, const char *detail,
                           const char *location) {
    int64_t t1 = musa_prof_now();
    append((musa_profile_event){.name = name ? name : "", .kind = kind, .dur_ns = t1 - t0}, t0,
           detail, true, location);
}

bool musa_prof_shape_append(char *buf, size_t size, size_t *len, musa_dtype dtype, int ndim,
                            const int64_t *shape) {
    if (*len >= size) return false;
    size_t at = *len;
    int w = snprintf(buf + at, size - at, "%s%s[", at ? ", " : "",
                     musa_dtype_valid(dtype) ? musa_dtype_name(dtype) : "NULL");
    for (int d = 0; d < ndim && w >= 0 && (size_t)w < size - at; d++) {
        int k = snprintf(buf + at + (size_t)w, size - at - (size_t)w, "%s%lld", d ? ", " : "",
                         (long long)shape[d]);
        w = k < 0 ? k : w + k;
    }
    if (w >= 0 && (size_t)w < size - at) {
        int k = snprintf(buf + at + (size_t)w, size - at - (size_t)w, "]");
        w = k < 0 ? k : w + k;
    }
    if (w < 0 || (size_t)w >= size - at) {
        if (size > 4) memcpy(buf + size - 4, "...", 4);
        *len = size;
        return false;
    }
    *len = at + (size_t)w;
    return true;
}

void musa_prof_memory(int64_t bytes, int64_t total) {
    if (!(musa_prof_on() & MUSA_PROFILE_MEMORY)) return;
    append((musa_profile_event){.name = "[memory]",
                                .kind = MUSA_PROFILE_MEMORY_EV,
                                .bytes = bytes,
                                .total_bytes = total},
           musa_prof_now(), NULL, false, NULL);
}

int musa_profiler_start(int flags) {
    if (flags & ~(MUSA_PROFILE_SHAPES | MUSA_PROFILE_MEMORY | MUSA_PROFILE_STACK))
        return musa_err(MUSA_ERR_VALUE, "[profiler] unknown flags 0x%x", (unsigned)flags);
    pthread_mutex_lock(&reg.mu);
    if (reg.running) {
        pthread_mutex_unlock(&reg.mu);
        return musa_err(MUSA_ERR_RUNTIME, "[profiler] already running; stop it first");
    }
    free(reg.snap);
    reg.snap = NULL, reg.n_snap = 0;
    for (prof_thread **pp = &reg.threads; *pp;) {
        prof_thread *b = *pp;
        pthread_mutex_lock(&b->mu);
        b->n = 0;
        musa_arena_free(&b->strings);
        musa_arena_init(&b->strings, 16384);
        pthread_mutex_unlock(&b->mu);
        if (b->dead) { /* its thread is gone: nobody else holds it */
            *pp = b->next;
            pthread_mutex_destroy(&b->mu);
            free(b->ev);
            free(b);
            continue;
        }
        pp = &b->next;
    }
    reg.t_start = musa_prof_now();
    atomic_store(&cur_start, reg.t_start);
    reg.running = true;
    atomic_store(&musa_prof_flags_, MUSA_PROFILE_ON | flags);
    pthread_mutex_unlock(&reg.mu);
    return MUSA_OK;
}

bool musa_profiler_enabled(void) {
    return musa_prof_on() != 0;
}

static int by_start(const void *a, const void *b) {
    const musa_profile_event *x = a, *y = b;
    if (x->start_ns != y->start_ns) return x->start_ns < y->start_ns ? -1 : 1;
    if (x->dur_ns != y->dur_ns) return x->dur_ns > y->dur_ns ? -1 : 1; /* enclosing first */
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    return 0;
}

int musa_profiler_stop(void) {
    pthread_mutex_lock(&reg.mu);
    if (!reg.running) {
        pthread_mutex_unlock(&reg.mu);
        return musa_err(MUSA_ERR_RUNTIME, "[profiler] not running");
    }
    atomic_store(&musa_prof_flags_, 0);
    reg.running = false;
    int64_t n = 0;
    for (prof_thread *b = reg.threads; b; b = b->next) {
        pthread_mutex_lock(&b->mu);
        n += b->n;
        pthread_mutex_unlock(&b->mu);
    }
    int rc = MUSA_OK;
    reg.snap = malloc((size_t)(n ? n : 1) * sizeof *reg.snap);
    if (!reg.snap) {
        rc = musa_err_nomem("profiler", (size_t)n * sizeof *reg.snap);
    } else {
        int64_t k = 0;
        for (prof_thread *b = reg.threads; b; b = b->next) {
            pthread_mutex_lock(&b->mu);
            for (int64_t i = 0; i < b->n && k < n; i++) reg.snap[k++] = b->ev[i];
            pthread_mutex_unlock(&b->mu);
        }
        qsort(reg.snap, (size_t)k, sizeof *reg.snap, by_start);
        reg.n_snap = k;
    }
    pthread_mutex_unlock(&reg.mu);
    return rc;
}

int64_t musa_profiler_num_events(void) {
    pthread_mutex_lock(&reg.mu);
    int64_t n = reg.running ? -1 : reg.n_snap;
    pthread_mutex_unlock(&reg.mu);
    return n;
}

int musa_profiler_get_event(int64_t i, musa_profile_event *e) {
    if (!e) return musa_err(MUSA_ERR_VALUE, "[profiler] get_event: NULL event");
    pthread_mutex_lock(&reg.mu);
    int rc = MUSA_OK;
    if (reg.running)
        rc = musa_err(MUSA_ERR_RUNTIME, "[profiler] stop it before reading its events");
    else if (i < 0 || i >= reg.n_snap)
        rc = musa_err(MUSA_ERR_INDEX, "[profiler] event %lld of %lld", (long long)i,
                      (long long)reg.n_snap);
    else
        *e = reg.snap[i];
    pthread_mutex_unlock(&reg.mu);
    return rc;
}

int64_t musa_profiler_range_begin(void) {
    return musa_prof_on() ? musa_prof_now() : 0;
}

void musa_profiler_range_end(const char *name, int64_t begin) {
    if (begin > 0 && musa_prof_on()) musa_prof_complete_copy(MUSA_PROFILE_RANGE, name, begin, NULL);
}

/* ---- the Chrome trace ---- */

static const char *category(int kind) {
    static const char *const names[] = {"op",     "plan",  "backward", "user_annotation",
                                        "memory", "stream"};
    return kind >= 0 && kind < MUSA_ARRAY_LEN(names) ? names[kind] : "other";
}

static void sb_us(musa_sbuf *sb, int64_t ns) {
    musa_sb_printf(sb, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
}

int musa_profiler_write_chrome_trace(const char *path) {
    if (!path) return musa_err(MUSA_ERR_VALUE, "[profiler] write_chrome_trace: NULL path");
    pthread_mutex_lock(&reg.mu);
    if (reg.running) {
        pthread_mutex_unlock(&reg.mu);
        return musa_err(MUSA_ERR_RUNTIME, "[profiler] stop it before writing a trace");
    }
    int pid = (int)getpid();
    musa_sbuf sb = {0};
    musa_sb_printf(&sb, "{\"traceEvents\": [\n");
    musa_sb_printf(&sb,
                   "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"tid\": 0, "
                   "\"args\": {\"name\": \"musa\"}}",
                   pid);
    /* name each thread that recorded something, once (threads are few) */
    int *tids = NULL, n_tids = 0;
    for (int64_t i = 0; i < reg.n_snap; i++) {
        int t = reg.snap[i].tid, k = 0;
        while (k < n_tids && tids[k] != t) k++;
        if (k < n_tids) continue;
        int *grown = realloc(tids, (size_t)(n_tids + 1) * sizeof *tids);
        if (!grown) break; /* the names are decoration; the events follow */
        tids = grown, tids[n_tids++] = t;
        const char *label = "";
        for (prof_thread *b = reg.threads; b && !*label; b = b->next)
            if (b->tid == t) label = b->label;
        musa_sb_printf(&sb,
                       ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, "
                       "\"args\": {\"name\": \"%s %d\"}}",
                       pid, t,
                       *label     ? label
                       : t == pid ? "main thread"
                                  : "thread",
                       t);
    }
    free(tids);
    for (int64_t i = 0; i < reg.n_snap; i++) {
        const musa_profile_event *e = &reg.snap[i];
        musa_sb_printf(&sb, ",\n{\"name\": ");
        musa_sb_json_str(&sb, e->name);
        musa_sb_printf(&sb,
                       ", \"cat\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": ", category(e->kind),
                       pid, e->tid);
        sb_us(&sb, e->start_ns);
        if (e->kind == MUSA_PROFILE_MEMORY_EV) {
            musa_sb_printf(&sb,
                           ", \"ph\": \"i\", \"s\": \"t\", \"args\": {\"bytes\": %lld, "
                           "\"total_bytes\": %lld}}",
                           (long long)e->bytes, (long long)e->total_bytes);
            musa_sb_printf(&sb,
                           ",\n{\"name\": \"allocated bytes\", \"ph\": \"C\", \"pid\": %d, "
                           "\"tid\": 0, \"ts\": ",
                           pid);
            sb_us(&sb, e->start_ns);
            musa_sb_printf(&sb, ", \"args\": {\"bytes\": %lld}}", (long long)e->total_bytes);
            continue;
        }
        musa_sb_printf(&sb, ", \"ph\": \"X\", \"dur\": ");
        sb_us(&sb, e->dur_ns);
        musa_sb_printf(&sb, ", \"args\": {");
        if (*e->detail) {
            musa_sb_printf(&sb, "\"input_shapes\": ");
            musa_sb_json_str(&sb, e->detail);
        }
        if (*e->location) {
            musa_sb_printf(&sb, "%s\"location\": ", *e->detail ? ", " : "");
            musa_sb_json_str(&sb, e->location);
        }
        musa_sb_printf(&sb, "}}");
    }
    musa_sb_printf(&sb, "\n], \"displayTimeUnit\": \"ms\"}\n");
    pthread_mutex_unlock(&reg.mu);
    char *text = musa_sb_finish(&sb, "profiler");
    if (!text) return MUSA_ERR_NOMEM;
    FILE *f = fopen(path, "wb");
    int rc = MUSA_OK;
    if (!f) {
        rc = musa_err(MUSA_ERR_IO, "[profiler] cannot write %s: %s", path, strerror(errno));
    } else {
        size_t len = strlen(text);
        bool ok = fwrite(text, 1, len, f) == len;
        if (fclose(f) != 0) ok = false;
        if (!ok)
            rc = musa_err(MUSA_ERR_IO, "[profiler] writing %s failed: %s", path, strerror(errno));
    }
    free(text);
    return rc;
}
