/*
 * test_streams.c - streams and events: work issued under a stream gives
 * the results of a synchronous run; host reads, synchronous ops and other
 * streams wait for the work on what they touch; events order and time
 * work; failures surface at the next synchronisation; compiled runs queue
 * as one task; and a stress test of random programs over several streams,
 * events and host reads, compared with the same program run synchronously.
 *
 * `bash run.sh tsan` runs these under ThreadSanitizer.
 */
#include <stdio.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

/* A chain of matmuls and elementwise ops on small integers: exact in
 * float32 whichever threads run it, so any interleaving gives equal bits. */
static musa_tensor *chain(musa_tensor *x, musa_tensor *w, int n) {
    musa_tensor *y = musa_tensor_retain(x);
    const double lo = -4, hi = 4;
    for (int i = 0; i < n && y; i++) {
        musa_tensor *m = musa_matmul(y, w);
        musa_tensor *c = m ? musa_clamp(m, &lo, &hi) : NULL;
        musa_tensor *r = c ? musa_add(c, x) : NULL;
        release_all(3, y, m, c);
        y = r;
    }
    return y;
}

static musa_tensor *ints(int64_t r, int64_t c, double lo, double hi) {
    musa_tensor *t = rnd(MUSA_DTYPE_FLOAT32, 2, S(r, c), lo, hi, L_CONTIG);
    musa_tensor *f = t ? musa_floor(t) : NULL;
    musa_tensor_release(t);
    return f;
}

TEST(stream_results_equal_synchronous) {
    useed(1);
    musa_tensor *x = ints(64, 64, -2, 2), *w = ints(64, 64, -1, 2);
    musa_tensor *want = chain(x, w, 6);
    CHECK(want);
    musa_stream *s = musa_stream_new(1);
    CHECK(s);
    CHECK(musa_stream_current() == NULL);
    CHECK(musa_stream_set_current(s) == NULL);
    CHECK(musa_stream_current() == s);
    musa_tensor *got = chain(x, w, 6);
    CHECK(musa_stream_set_current(NULL) == s);
    CHECK(got);
    /* a host read waits for the stream: no synchronize needed */
    CHECK(same_values(got, want));
    CHECK_OK(musa_stream_synchronize(s));
    CHECK(musa_stream_query(s));
    CHECK(musa_stream_id(s) >= 1);
    CHECK(musa_stream_threads(s) == 1);
    musa_stream_free(s);
    release_all(4, x, w, want, got);
}

TEST(stream_bad_arguments) {
    CHECK_ERR(musa_stream_new(0) != NULL, MUSA_ERR_VALUE, "threads must be 1 to");
    CHECK_ERR(musa_stream_new(100000) != NULL, MUSA_ERR_VALUE, "threads must be 1 to");
    CHECK_ERR(!musa_event_record(NULL, NULL), MUSA_ERR_VALUE, "event is NULL");
    CHECK_ERR(!musa_event_synchronize(NULL), MUSA_ERR_VALUE, "event is NULL");
    CHECK_ERR(!musa_stream_wait_event(NULL, NULL), MUSA_ERR_VALUE, "event is NULL");
    CHECK_OK(musa_stream_synchronize(NULL)); /* the default stream: nothing pending */
    CHECK(musa_stream_query(NULL));
    CHECK_OK(musa_synchronize());
    musa_stream_free(NULL);
}

/* Stream A writes x in place; stream B reads x; the default stream writes x
 * while B's read may be pending. Each sees what a synchronous run sees. */
TEST(stream_cross_stream_hazards) {
    useed(2);
    musa_tensor *x0 = ints(128, 128, -2, 2), *w = ints(128, 128, -1, 2);
    musa_tensor *one = musa_full(0, NULL, 1.0, MUSA_DTYPE_FLOAT32);
    /* synchronous reference */
    musa_tensor *x = musa_clone(x0);
    for (int i = 0; i < 5; i++) CHECK_OK(musa_add_(x, one));
    musa_tensor *want_b = chain(x, w, 3);
    CHECK_OK(musa_fill_(x, 7));
    musa_tensor *want_x = musa_clone(x);
    musa_tensor_release(x);

    musa_stream *a = musa_stream_new(1), *b = musa_stream_new(1);
    x = musa_clone(x0);
    musa_stream_set_current(a);
    for (int i = 0; i < 5; i++) CHECK_OK(musa_add_(x, one)); /* read-modify-write on A */
    musa_stream_set_current(b);
    musa_tensor *got_b = chain(x, w, 3); /* reads x: waits for A's writes */
    musa_stream_set_current(NULL);
    CHECK_OK(musa_fill_(x, 7)); /* a write: waits for B's reads */
    CHECK(same_values(got_b, want_b));
    CHECK(same_values(x, want_x));
    CHECK_OK(musa_synchronize());
    musa_stream_free(a), musa_stream_free(b);
    release_all(7, x0, w, one, want_b, want_x, x, got_b);
}

/* A tensor released while its stream still reads it lives until the work is
 * done; the memory is back once the stream is synchronised. */
TEST(stream_released_tensor_stays_alive) {
    useed(3);
    musa_alloc_stats st0, st1;
    musa_synchronize();
    musa_alloc_get_stats(&st0);
    musa_stream *s = musa_stream_new(1);
    musa_tensor *x = ints(256, 256, -2, 2), *w = ints(256, 256, -1, 2);
    musa_tensor *want = chain(x, w, 4);
    musa_stream_set_current(s);
    musa_tensor *got = chain(x, w, 4);
    musa_stream_set_current(NULL);
    release_all(2, x, w); /* the queued work still uses them */
    CHECK_OK(musa_stream_synchronize(s));
    CHECK(same_values(got, want));
    release_all(2, got, want);
    musa_alloc_get_stats(&st1);
    CHECK_MSG(st1.current_bytes == st0.current_bytes, "%zu bytes live before, %zu after",
              st0.current_bytes, st1.current_bytes);
    musa_stream_free(s);
}

/* A kernel's failure on a stream: later work on it is skipped, the error
 * comes back from synchronize (once) and from reading what failed work was
 * to produce; then the stream works again. */
TEST(stream_errors_surface_at_synchronization) {
    musa_tensor *a = musa_full(1, S(4), 6, MUSA_DTYPE_INT32);
    musa_tensor *z = musa_full(1, S(4), 0, MUSA_DTYPE_INT32);
    musa_stream *s = musa_stream_new(1);
    musa_stream_set_current(s);
    musa_tensor *bad = musa_floor_divide(a, z); /* checked in the kernel: fails later */
    musa_tensor *later = bad ? musa_add(bad, a) : NULL;
    musa_stream_set_current(NULL);
    CHECK(bad && later); /* issuing succeeded */
    int64_t v;
    CHECK_ERR(!musa_tensor_item_int(later, &v), MUSA_ERR_ZERO_DIVISION, "failed: [floor_divide]");
    CHECK_ERR(!musa_stream_synchronize(s), MUSA_ERR_ZERO_DIVISION, "division by zero");
    CHECK_OK(musa_stream_synchronize(s)); /* reported once */
    musa_stream_set_current(s);
    musa_tensor *ok = musa_add(a, a);
    musa_stream_set_current(NULL);
    musa_tensor *twelve = musa_full(1, S(4), 12, MUSA_DTYPE_INT32);
    CHECK(same_values(ok, twelve));
    musa_stream_free(s);
    release_all(6, a, z, bad, later, ok, twelve);
}

TEST(stream_events) {
    useed(4);
    musa_event *e0 = musa_event_new(true), *e1 = musa_event_new(true), *plain = musa_event_new(0);
    CHECK(e0 && e1 && plain);
    double ms;
    CHECK(musa_event_query(e0)); /* never recorded: nothing to wait for */
    CHECK_ERR(!musa_event_elapsed_time(e0, e1, &ms), MUSA_ERR_VALUE, "must be recorded first");
    musa_stream *s = musa_stream_new(1), *t = musa_stream_new(1);
    musa_tensor *x = ints(128, 128, -2, 2), *w = ints(128, 128, -1, 2);
    CHECK_OK(musa_event_record(e0, s));
    musa_stream_set_current(s);
    musa_tensor *y = chain(x, w, 8);
    musa_stream_set_current(NULL);
    CHECK_OK(musa_event_record(e1, s));
    CHECK_OK(musa_event_record(plain, s));
    CHECK_ERR(!musa_event_elapsed_time(e0, plain, &ms), MUSA_ERR_VALUE, "enable_timing");
    CHECK_OK(musa_event_synchronize(e1));
    CHECK(musa_event_query(e1));
    CHECK_OK(musa_event_elapsed_time(e0, e1, &ms));
    CHECK_MSG(ms >= 0, "elapsed %g ms", ms);
    /* t waits for e1, then reads y */
    CHECK_OK(musa_stream_wait_event(t, e1));
    CHECK_OK(musa_stream_wait_stream(t, s));
    CHECK_OK(musa_stream_wait_stream(NULL, s)); /* the host waits */
    CHECK(musa_stream_query(s));
    musa_stream_set_current(t);
    musa_tensor *y2 = musa_add(y, y);
    musa_stream_set_current(NULL);
    CHECK_OK(musa_event_record(e0, NULL)); /* default stream: complete at once */
    CHECK(musa_event_query(e0));
    CHECK_OK(musa_stream_wait_event(NULL, e0));
    musa_tensor *want = musa_add(y, y);
    CHECK(same_values(y2, want));
    musa_stream_free(s), musa_stream_free(t);
    musa_event_free(e0), musa_event_free(e1), musa_event_free(plain);
    release_all(5, x, w, y, y2, want);
}

/* A compiled function run under a stream is one queued task; its result
 * and the parameter it updates equal a synchronous run's. */
static musa_plan *compile_affine(musa_tensor *w, musa_graph **gout) {
    musa_graph *g = musa_graph_new();
    musa_tensor *m = musa_empty_meta(MUSA_DTYPE_FLOAT32, 2, S(32, 32));
    int rc = !g || !m ? MUSA_ERR_NOMEM : musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC);
    if (!rc) rc = musa_graph_add_input(g, m, "x");
    musa_tensor *h = rc ? NULL : musa_matmul(m, w);
    musa_tensor *y = h ? musa_relu(h) : NULL;
    if (y) rc = musa_graph_set_outputs(g, 1, &y);
    int rc2 = g ? musa_graph_capture_end(g) : MUSA_OK;
    release_all(3, m, h, y);
    musa_pass_ctx ctx = {.fusion_level = 2, .verify = true};
    musa_plan *p = NULL;
    if (!rc && !rc2 && y && !musa_graph_optimize(g, &ctx)) p = musa_plan_build(g, NULL);
    if (!p) {
        musa_graph_free(g);
        return NULL;
    }
    *gout = g;
    return p;
}

/* Runs queued on a stream equal synchronous runs; freeing the plan with a
 * run queued waits for it. */
TEST(stream_runs_plans) {
    useed(5);
    musa_tensor *w = ints(32, 32, -1, 2), *x = ints(32, 32, -2, 2);
    musa_graph *g = NULL;
    musa_plan *p = compile_affine(w, &g);
    CHECK(p);
    musa_tensor *want = NULL;
    CHECK_OK(musa_plan_run(p, 1, &x, 1, &want));
    musa_stream *s = musa_stream_new(1);
    musa_tensor *got[4] = {NULL};
    musa_stream_set_current(s);
    for (int i = 0; i < 3; i++) CHECK_OK(musa_plan_run(p, 1, &x, 1, &got[i]));
    musa_tensor *sum = musa_add(got[0], got[2]); /* queued after the runs */
    musa_stream_set_current(NULL);
    musa_tensor *want2 = musa_add(want, want);
    for (int i = 0; i < 3; i++) CHECK(same_values(got[i], want));
    CHECK(same_values(sum, want2));
    musa_stream_set_current(s);
    CHECK_OK(musa_plan_run(p, 1, &x, 1, &got[3]));
    musa_stream_set_current(NULL);
    musa_plan_free(p); /* waits for the queued run */
    musa_graph_free(g);
    CHECK(same_values(got[3], want));
    musa_stream_free(s);
    release_all(9, w, x, want, got[0], got[1], got[2], got[3], sum, want2);
}

/* Trace lanes: a stream's kernels are events of kind STREAM on its worker's
 * thread, named "stream N" in the Chrome trace. */
TEST(stream_profiler_lanes) {
    useed(7);
    musa_tensor *x = ints(64, 64, -2, 2), *w = ints(64, 64, -1, 2);
    musa_stream *s = musa_stream_new(1);
    CHECK_OK(musa_profiler_start(0));
    musa_stream_set_current(s);
    musa_tensor *y = musa_matmul(x, w);
    musa_stream_set_current(NULL);
    CHECK_OK(musa_stream_synchronize(s));
    CHECK_OK(musa_profiler_stop());
    int issued = 0, ran = 0, ran_tid = 0, op_tid = 0;
    for (int64_t i = 0; i < musa_profiler_num_events(); i++) {
        musa_profile_event e;
        CHECK_OK(musa_profiler_get_event(i, &e));
        if (strcmp(e.name, "matmul")) continue;
        if (e.kind == MUSA_PROFILE_OP) issued++, op_tid = e.tid;
        if (e.kind == MUSA_PROFILE_STREAM) ran++, ran_tid = e.tid;
    }
    CHECK_MSG(issued == 1 && ran == 1, "issued %d, ran %d", issued, ran);
    CHECK(ran_tid != op_tid);
    char path[] = "/tmp/musa_stream_traceXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(musa_profiler_write_chrome_trace(path));
    FILE *f = fopen(path, "rb");
    CHECK(f);
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    remove(path);
    buf[n] = 0;
    char label[64];
    snprintf(label, sizeof label, "\"stream %llu %d\"", (unsigned long long)musa_stream_id(s),
             ran_tid);
    CHECK_MSG(strstr(buf, label), "no lane named %s", label);
    CHECK(strstr(buf, "\"cat\": \"stream\""));
    musa_stream_free(s);
    release_all(3, x, w, y);
}

/* ---- the stress test ----
 *
 * A random program over NT tensors: each step picks an op (add, sub, max,
 * matmul+clamp, in-place add, fill, copy), its operands and a stream (one of
 * NS, or the default), and now and then records an event and makes another
 * stream wait for it, makes a stream wait for another, reads a tensor on
 * the host or synchronises. The same program run with no streams is the
 * reference; every value is a small integer, so results are exact. */

#define NT    6
#define NS    3
#define STEPS 160

typedef struct {
    int op, a, b, dst, stream, extra;
} step_t;

static void make_program(step_t *prog, uint64_t seed) {
    useed(seed);
    for (int i = 0; i < STEPS; i++)
        prog[i] = (step_t){.op = (int)(urand() * 10),
                           .a = (int)(urand() * NT),
                           .b = (int)(urand() * NT),
                           .dst = (int)(urand() * NT),
                           .stream = (int)(urand() * (NS + 1)) - 1,
                           .extra = (int)(urand() * NS)};
}

/* Run the program; with streams NULL everything is synchronous. Returns
 * false (with the harness told) on a failed call. */
static bool run_program(const step_t *prog, musa_tensor **t, musa_stream **streams, double *reads) {
    const double lo = -8, hi = 8;
    musa_event *ev = musa_event_new(false);
    for (int i = 0; i < STEPS; i++) {
        const step_t *p = &prog[i];
        musa_stream_set_current(streams && p->stream >= 0 ? streams[p->stream] : NULL);
        musa_tensor *r = NULL;
        int rc = MUSA_OK;
        switch (p->op) {
        case 0:
            r = musa_add(t[p->a], t[p->b]);
            break;
        case 1:
            r = musa_sub(t[p->a], t[p->b]);
            break;
        case 2:
            r = musa_maximum(t[p->a], t[p->b]);
            break;
        case 3: {
            musa_tensor *m = musa_matmul(t[p->a], t[p->b]);
            r = m ? musa_clamp(m, &lo, &hi) : NULL;
            musa_tensor_release(m);
            break;
        }
        case 4:
            rc = musa_add_(t[p->dst], t[p->a]);
            break;
        case 5:
            rc = musa_fill_(t[p->dst], (double)(i % 5) - 2);
            break;
        case 6:
            rc = musa_copy_(t[p->dst], t[p->a]);
            break;
        case 7: { /* an event on this stream, waited for by another */
            musa_stream *me = streams && p->stream >= 0 ? streams[p->stream] : NULL;
            rc = streams ? musa_event_record(ev, me) : MUSA_OK;
            if (!rc && streams) rc = musa_stream_wait_event(streams[p->extra], ev);
            break;
        }
        case 8: /* a host read */
            musa_stream_set_current(NULL);
            rc = musa_tensor_get(t[p->a], (const int64_t[]){p->b % 48, p->dst % 48}, &reads[i]);
            break;
        default: /* a stream waits for another, or everything synchronises */
            if (streams && p->stream >= 0)
                rc = musa_stream_wait_stream(streams[p->stream], streams[p->extra]);
            else if (streams)
                rc = musa_synchronize();
        }
        musa_stream_set_current(NULL);
        if (p->op <= 3) {
            if (!r) rc = musa_last_error_code();
            musa_tensor_release(t[p->dst]);
            t[p->dst] = r;
        }
        if (rc) {
            harness_fail(__FILE__, __LINE__, "step %d (op %d) failed: %s", i, p->op,
                         musa_last_error());
            musa_event_free(ev);
            return false;
        }
    }
    musa_event_free(ev);
    return true;
}

TEST(stream_stress_random_programs) {
    musa_stream *streams[NS];
    for (int k = 0; k < NS; k++) CHECK((streams[k] = musa_stream_new(1)));
    step_t prog[STEPS];
    for (uint64_t round = 0; round < 12; round++) {
        make_program(prog, 100 + round);
        musa_tensor *ref[NT], *got[NT];
        useed(1000 + round);
        for (int i = 0; i < NT; i++) ref[i] = ints(48, 48, -3, 3);
        for (int i = 0; i < NT; i++) got[i] = musa_clone(ref[i]);
        double rr[STEPS] = {0}, rg[STEPS] = {0};
        bool ok = run_program(prog, ref, NULL, rr) && run_program(prog, got, streams, rg);
        for (int i = 0; ok && i < NT; i++)
            if (!same_values(ref[i], got[i])) {
                harness_fail(__FILE__, __LINE__, "round %d: tensor %d differs", (int)round, i);
                ok = false;
            }
        for (int i = 0; ok && i < STEPS; i++)
            if (prog[i].op == 8 && rr[i] != rg[i]) {
                harness_fail(__FILE__, __LINE__, "round %d: host read at step %d: %g, want %g",
                             (int)round, i, rg[i], rr[i]);
                ok = false;
            }
        for (int i = 0; i < NT; i++) musa_tensor_release(ref[i]), musa_tensor_release(got[i]);
        if (!ok) break;
    }
    for (int k = 0; k < NS; k++) musa_stream_free(streams[k]);
}
