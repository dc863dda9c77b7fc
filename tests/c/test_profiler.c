/*
 * test_profiler.c - the profiler's C API (musa_profiler_* in musa.h): op
 * events with shapes, user ranges and their nesting, memory events, the
 * Chrome trace read back with the project's JSON reader, sessions, errors,
 * and several threads recording while another starts and stops it (the
 * races show under `bash run.sh tsan`).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "io/json.h"
#include "util.h"

/* Events of the last session named `name` (and of `kind`, unless -1). */
static int count_events(const char *name, int kind) {
    int n = 0;
    musa_profile_event e;
    for (int64_t i = 0; i < musa_profiler_num_events(); i++)
        if (!musa_profiler_get_event(i, &e) && !strcmp(e.name, name) &&
            (kind < 0 || e.kind == kind))
            n++;
    return n;
}

static bool find_event(const char *name, musa_profile_event *out) {
    for (int64_t i = 0; i < musa_profiler_num_events(); i++)
        if (!musa_profiler_get_event(i, out) && !strcmp(out->name, name)) return true;
    return false;
}

TEST(profiler_records_each_op_with_its_shapes) {
    int64_t shape[2] = {2, 3};
    CHECK(musa_profiler_start(MUSA_PROFILE_SHAPES) == MUSA_OK);
    CHECK(musa_profiler_enabled());
    musa_tensor *a = musa_ones(2, shape, MUSA_DTYPE_FLOAT32);
    musa_tensor *b = musa_add(a, a);
    musa_tensor *c = musa_add(b, a);
    musa_tensor *d = musa_mul(c, b);
    CHECK(musa_profiler_stop() == MUSA_OK);
    CHECK(!musa_profiler_enabled());
    musa_tensor *e = musa_add(d, d); /* after stop: not recorded */
    CHECK(count_events("add", MUSA_PROFILE_OP) == 2);
    CHECK(count_events("mul", MUSA_PROFILE_OP) == 1);
    musa_profile_event ev;
    CHECK(find_event("mul", &ev));
    CHECK_MSG(!strcmp(ev.detail, "float32[2, 3], float32[2, 3]"), "detail '%s'", ev.detail);
    CHECK(ev.tid == (int)syscall(SYS_gettid) && ev.dur_ns > 0 && ev.start_ns >= 0);
    /* events in start order */
    int64_t last = -1;
    for (int64_t i = 0; i < musa_profiler_num_events(); i++) {
        CHECK(musa_profiler_get_event(i, &ev) == MUSA_OK);
        CHECK(ev.start_ns >= last);
        last = ev.start_ns;
    }
    /* without MUSA_PROFILE_SHAPES, no detail */
    CHECK(musa_profiler_start(0) == MUSA_OK);
    musa_tensor_release(musa_add(a, a));
    CHECK(musa_profiler_stop() == MUSA_OK);
    CHECK(find_event("add", &ev) && !strcmp(ev.detail, ""));
    musa_tensor_release(a), musa_tensor_release(b), musa_tensor_release(c);
    musa_tensor_release(d), musa_tensor_release(e);
}

TEST(profiler_ranges_enclose_what_runs_inside_them) {
    CHECK(musa_profiler_range_begin() == 0); /* off: nothing to pair */
    int64_t n = 5;
    musa_tensor *a = musa_ones(1, &n, MUSA_DTYPE_FLOAT64);
    CHECK(musa_profiler_start(0) == MUSA_OK);
    int64_t outer = musa_profiler_range_begin();
    CHECK(outer > 0);
    char name[32];
    snprintf(name, sizeof name, "step %d", 7); /* the profiler keeps a copy */
    musa_tensor *b = musa_exp(a);
    musa_profiler_range_end(name, outer);
    memset(name, 'x', sizeof name - 1);
    CHECK(musa_profiler_stop() == MUSA_OK);
    musa_profile_event r, op;
    CHECK(find_event("step 7", &r) && r.kind == MUSA_PROFILE_RANGE);
    CHECK(find_event("exp", &op));
    CHECK(r.start_ns <= op.start_ns && op.start_ns + op.dur_ns <= r.start_ns + r.dur_ns);
    /* the range precedes what it contains */
    musa_profile_event first;
    CHECK(musa_profiler_get_event(0, &first) == MUSA_OK && first.kind == MUSA_PROFILE_RANGE);
    /* a range begun in an earlier session is dropped */
    CHECK(musa_profiler_start(0) == MUSA_OK);
    int64_t early = musa_profiler_range_begin();
    CHECK(musa_profiler_stop() == MUSA_OK);
    CHECK(musa_profiler_start(0) == MUSA_OK);
    musa_profiler_range_end("stale", early);
    CHECK(musa_profiler_stop() == MUSA_OK);
    CHECK(musa_profiler_num_events() == 0);
    musa_tensor_release(a), musa_tensor_release(b);
}

TEST(profiler_memory_events_carry_the_running_total) {
    int64_t n = 1000;
    CHECK(musa_profiler_start(MUSA_PROFILE_MEMORY) == MUSA_OK);
    musa_tensor *a = musa_zeros(1, &n, MUSA_DTYPE_FLOAT32);
    musa_tensor_release(a);
    CHECK(musa_profiler_stop() == MUSA_OK);
    int64_t want = (int64_t)musa_alloc_size(4000);
    bool alloc = false, freed = false;
    int64_t total_after_alloc = -1;
    musa_profile_event e;
    for (int64_t i = 0; i < musa_profiler_num_events(); i++) {
        CHECK(musa_profiler_get_event(i, &e) == MUSA_OK);
        if (e.kind != MUSA_PROFILE_MEMORY_EV) continue;
        CHECK(e.dur_ns == 0 && e.total_bytes >= 0);
        if (e.bytes == want && !alloc) alloc = true, total_after_alloc = e.total_bytes;
        if (e.bytes == -want && alloc) {
            freed = true;
            CHECK(e.total_bytes == total_after_alloc - want);
        }
    }
    CHECK_MSG(alloc && freed, "allocation %d, free %d of %lld bytes", alloc, freed,
              (long long)want);
    /* without the flag: no memory events */
    CHECK(musa_profiler_start(0) == MUSA_OK);
    musa_tensor_release(musa_zeros(1, &n, MUSA_DTYPE_FLOAT32));
    CHECK(musa_profiler_stop() == MUSA_OK);
    CHECK(count_events("[memory]", -1) == 0);
}

static const char *here(void) {
    return "caller.c:42";
}

TEST(profiler_stack_records_the_location_function_s_answer) {
    int64_t n = 2;
    musa_tensor *a = musa_ones(1, &n, MUSA_DTYPE_FLOAT32);
    musa_profiler_set_location_fn(here);
    for (int flags = 0; flags <= MUSA_PROFILE_STACK; flags += MUSA_PROFILE_STACK) {
        CHECK(musa_profiler_start(flags) == MUSA_OK);
        musa_tensor_release(musa_neg(a));
        CHECK(musa_profiler_stop() == MUSA_OK);
        musa_profile_event e;
        CHECK(find_event("neg", &e));
        CHECK_MSG(!strcmp(e.location, flags ? "caller.c:42" : ""), "location '%s'", e.location);
    }
    musa_profiler_set_location_fn(NULL);
    CHECK(musa_profiler_start(MUSA_PROFILE_STACK) == MUSA_OK);
    musa_tensor_release(musa_neg(a));
    CHECK(musa_profiler_stop() == MUSA_OK);
    musa_profile_event e;
    CHECK(find_event("neg", &e) && !strcmp(e.location, ""));
    musa_tensor_release(a);
}

/* the graph's recorded line: a buffer overwritten after the run */
static char plan_line[32];
static const char *plan_here(void) {
    return plan_line;
}

/* A plan instruction's event: its (last) node's inputs under
 * MUSA_PROFILE_SHAPES, that node's line under MUSA_PROFILE_STACK, and a name
 * and line of its own. Both are read after the plan (which holds a fused
 * group's name) and the graph are freed, and the line's buffer rewritten
 * (ASan saw the name read after free before). */
TEST(profiler_plan_events_carry_shapes_and_lines_and_outlive_the_plan) {
    int64_t s[2] = {4, 8};
    musa_tensor *x = musa_ones(2, s, MUSA_DTYPE_FLOAT32);
    musa_graph *g = musa_graph_new();
    snprintf(plan_line, sizeof plan_line, "model.py:3");
    musa_jit_set_location_hook(plan_here);
    CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_TRACE));
    CHECK_OK(musa_graph_add_input(g, x, "x"));
    musa_tensor *sum = musa_add(x, x);
    musa_tensor *y = musa_relu(sum);
    CHECK_OK(musa_graph_set_outputs(g, 1, &y));
    CHECK_OK(musa_graph_capture_end(g));
    musa_jit_set_location_hook(NULL);
    musa_pass_ctx ctx = {.fusion_level = 2, .verify = true};
    CHECK_OK(musa_graph_optimize(g, &ctx));
    musa_plan *p = musa_plan_build(g, NULL);
    CHECK(p != NULL);
    musa_tensor *out = NULL;
    for (int flags = 0; flags <= (MUSA_PROFILE_SHAPES | MUSA_PROFILE_STACK); flags += 5) {
        CHECK(musa_profiler_start(flags) == MUSA_OK);
        CHECK_OK(musa_plan_run(p, 1, &x, 1, &out));
        musa_tensor_release(out);
        CHECK(musa_profiler_stop() == MUSA_OK);
        if (!flags) {
            musa_profile_event e;
            CHECK(find_event("fused(add, relu)", &e) && e.kind == MUSA_PROFILE_PLAN);
            CHECK_MSG(!strcmp(e.detail, "") && !strcmp(e.location, ""), "'%s' '%s'", e.detail,
                      e.location);
        }
    }
    musa_plan_free(p);
    musa_graph_free(g);
    snprintf(plan_line, sizeof plan_line, "rewritten");
    musa_profile_event e;
    CHECK(count_events("fused(add, relu)", MUSA_PROFILE_PLAN) == 1);
    CHECK(find_event("fused(add, relu)", &e));
    CHECK_MSG(!strcmp(e.detail, "float32[4, 8]"), "detail '%s'", e.detail);
    CHECK_MSG(!strcmp(e.location, "model.py:3"), "location '%s'", e.location);
    musa_tensor_release(x), musa_tensor_release(sum), musa_tensor_release(y);
}

TEST(profiler_misuse_is_an_error) {
    CHECK(musa_profiler_stop() == MUSA_ERR_RUNTIME);
    CHECK(strstr(musa_last_error(), "not running"));
    CHECK(musa_profiler_start(64) == MUSA_ERR_VALUE);
    CHECK(musa_profiler_start(0) == MUSA_OK);
    CHECK(musa_profiler_start(0) == MUSA_ERR_RUNTIME);
    CHECK(strstr(musa_last_error(), "already running"));
    musa_profile_event e;
    CHECK(musa_profiler_num_events() == -1);
    CHECK(musa_profiler_get_event(0, &e) == MUSA_ERR_RUNTIME);
    CHECK(musa_profiler_write_chrome_trace("/tmp/musa_never.json") == MUSA_ERR_RUNTIME);
    CHECK(musa_profiler_stop() == MUSA_OK);
    CHECK(musa_profiler_get_event(musa_profiler_num_events(), &e) == MUSA_ERR_INDEX);
    CHECK(musa_profiler_get_event(-1, &e) == MUSA_ERR_INDEX);
    CHECK(musa_profiler_get_event(0, NULL) == MUSA_ERR_VALUE);
    CHECK(musa_profiler_write_chrome_trace("/nonexistent-dir/t.json") == MUSA_ERR_IO);
    CHECK(strstr(musa_last_error(), "/nonexistent-dir/t.json"));
}

/* Read a file whole (NUL-terminated); NULL on failure. */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) free(s), s = NULL;
    fclose(f);
    if (s) s[n] = 0, *len = (size_t)n;
    return s;
}

TEST(profiler_chrome_trace_is_valid_trace_event_json) {
    int64_t n = 64;
    musa_tensor *a = musa_ones(1, &n, MUSA_DTYPE_FLOAT32);
    CHECK(musa_profiler_start(MUSA_PROFILE_SHAPES | MUSA_PROFILE_MEMORY) == MUSA_OK);
    int64_t r = musa_profiler_range_begin();
    musa_tensor *b = musa_mul(a, a);
    musa_profiler_range_end("a \"quoted\"\\name\n", r);
    CHECK(musa_profiler_stop() == MUSA_OK);
    char path[64];
    snprintf(path, sizeof path, "/tmp/musa_trace_%d.json", (int)getpid());
    CHECK(musa_profiler_write_chrome_trace(path) == MUSA_OK);
    size_t len = 0;
    char *text = slurp(path, &len);
    CHECK(text != NULL);
    musa_arena arena;
    musa_arena_init(&arena, 0);
    const musa_json *root = NULL;
    char why[160] = "";
    CHECK_MSG(text && !musa_json_parse(&arena, text, len, &root, why, sizeof why), "%s", why);
    const musa_json *evs = root ? musa_json_get(root, "traceEvents") : NULL;
    CHECK(evs && evs->type == MUSA_JSON_ARRAY);
    int complete = 0, instants = 0, counters = 0, threads = 0;
    bool range = false, mul = false;
    for (int i = 0; evs && i < evs->n; i++) {
        const musa_json *e = &evs->kid[i], *ph = musa_json_get(e, "ph");
        const musa_json *pid = musa_json_get(e, "pid"), *tid = musa_json_get(e, "tid");
        CHECK(ph && ph->type == MUSA_JSON_STRING && pid && pid->is_int && pid->i == getpid());
        CHECK(tid && tid->is_int && musa_json_get(e, "name"));
        const musa_json *ts = musa_json_get(e, "ts"), *args = musa_json_get(e, "args");
        const char *name = musa_json_get(e, "name")->str;
        if (!strcmp(ph->str, "M")) {
            threads += !strcmp(name, "thread_name");
            continue;
        }
        CHECK(ts && ts->type == MUSA_JSON_NUMBER && ts->num >= 0);
        CHECK(args && args->type == MUSA_JSON_OBJECT);
        if (!strcmp(ph->str, "X")) {
            const musa_json *dur = musa_json_get(e, "dur"), *cat = musa_json_get(e, "cat");
            CHECK(dur && dur->type == MUSA_JSON_NUMBER && dur->num >= 0);
            CHECK(cat && cat->type == MUSA_JSON_STRING);
            complete++;
            range |= !strcmp(name, "a \"quoted\"\\name\n") && !strcmp(cat->str, "user_annotation");
            if (!strcmp(name, "mul")) {
                const musa_json *shapes = musa_json_get(args, "input_shapes");
                mul = shapes && !strcmp(shapes->str, "float32[64], float32[64]");
            }
        } else if (!strcmp(ph->str, "i")) {
            const musa_json *bytes = musa_json_get(args, "bytes");
            CHECK(bytes && bytes->is_int && musa_json_get(args, "total_bytes"));
            instants++;
        } else {
            CHECK(!strcmp(ph->str, "C") && musa_json_get(args, "bytes"));
            counters++;
        }
    }
    CHECK(range && mul && threads == 1);
    CHECK(complete == 2 && instants >= 1 && counters == instants);
    musa_arena_free(&arena);
    free(text);
    remove(path);
    musa_tensor_release(a), musa_tensor_release(b);
}

/* ---- threads ---- */

#define WORKERS 3

typedef struct {
    atomic_bool *stop;
    atomic_int ops;
} ops_ctx;

static void *op_loop(void *arg) {
    ops_ctx *c = arg;
    int64_t n = 32;
    musa_tensor *a = musa_ones(1, &n, MUSA_DTYPE_FLOAT32);
    while (!atomic_load(c->stop)) {
        int64_t r = musa_profiler_range_begin();
        musa_tensor *b = musa_add(a, a);
        musa_profiler_range_end("worker", r);
        musa_tensor_release(b);
        atomic_fetch_add(&c->ops, 1);
    }
    musa_tensor_release(a);
    return NULL;
}

/* Threads record while the main thread starts, stops and reads the
 * profiler again and again; then one quiet session sees every thread. */
TEST(profiler_threads_record_while_it_starts_and_stops) {
    atomic_bool stop;
    atomic_init(&stop, false);
    ops_ctx c[WORKERS];
    pthread_t th[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        c[i].stop = &stop;
        atomic_init(&c[i].ops, 0);
        CHECK(pthread_create(&th[i], NULL, op_loop, &c[i]) == 0);
    }
    for (int round = 0; round < 40; round++) {
        CHECK(musa_profiler_start(round % 2 ? MUSA_PROFILE_SHAPES : MUSA_PROFILE_MEMORY) ==
              MUSA_OK);
        usleep(200);
        CHECK(musa_profiler_stop() == MUSA_OK);
        musa_profile_event e;
        for (int64_t i = 0; i < musa_profiler_num_events(); i++)
            CHECK(musa_profiler_get_event(i, &e) == MUSA_OK && e.name && e.detail);
    }
    CHECK(musa_profiler_start(0) == MUSA_OK);
    int before[WORKERS];
    for (int i = 0; i < WORKERS; i++) before[i] = atomic_load(&c[i].ops);
    for (int i = 0; i < WORKERS; i++) /* each worker ran ops during this session */
        while (atomic_load(&c[i].ops) < before[i] + 20) usleep(100);
    CHECK(musa_profiler_stop() == MUSA_OK);
    atomic_store(&stop, true);
    for (int i = 0; i < WORKERS; i++) pthread_join(th[i], NULL);
    int tids[16], n_tids = 0;
    musa_profile_event e;
    for (int64_t i = 0; i < musa_profiler_num_events(); i++) {
        CHECK(musa_profiler_get_event(i, &e) == MUSA_OK);
        if (strcmp(e.name, "worker")) continue;
        int k = 0;
        while (k < n_tids && tids[k] != e.tid) k++;
        if (k == n_tids && n_tids < 16) tids[n_tids++] = e.tid;
    }
    CHECK_MSG(n_tids == WORKERS, "%d threads recorded ranges", n_tids);
    /* the workers are gone: the next start drops their buffers */
    CHECK(musa_profiler_start(0) == MUSA_OK);
    CHECK(musa_profiler_stop() == MUSA_OK);
    CHECK(musa_profiler_num_events() == 0);
}
