/* Static graphs: capture (trace and symbolic), the IR and its verifier,
 * passes, plans (fusion, memory planning, concurrency) and their errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "jit/graph.h"
#include "jit/plan.h"
#include "jit/plan/internal.h"
#include "util.h"

static const char *fake_location(void) {
    return "model.py:7";
}

static bool near_values(const musa_tensor *a, const musa_tensor *b, double tol) {
    if (a->numel != b->numel) return false;
    double *x = values(a), *y = values(b);
    bool ok = x && y;
    for (int64_t i = 0; ok && i < a->numel; i++) ok = fabs(x[i] - y[i]) <= tol * (1 + fabs(y[i]));
    free(x), free(y);
    return ok;
}

/* Run a one-input, one-output plan on x: bitwise equal to ref? */
static bool run_same(musa_plan *p, musa_tensor *x, const musa_tensor *ref) {
    musa_tensor *out = NULL;
    bool ok = musa_plan_run(p, 1, &x, 1, &out) == MUSA_OK && same_values(out, ref);
    musa_tensor_release(out);
    return ok;
}

/* y = sum(relu(x @ w + b) * 0.5, dim 1); the block the tests reuse. */
static musa_tensor *mlp_block(musa_tensor *x, musa_tensor *w, musa_tensor *b) {
    musa_tensor *h = musa_matmul(x, w);
    musa_tensor *hb = musa_add(h, b);
    musa_tensor *r = musa_relu(hb);
    musa_tensor *half = musa_number(0.5);
    musa_tensor *m = musa_mul(r, half);
    int64_t d = 1;
    musa_tensor *s = musa_sum(m, 1, &d, false);
    musa_tensor_release(h), musa_tensor_release(hb), musa_tensor_release(r);
    musa_tensor_release(half), musa_tensor_release(m);
    return s;
}

/* Capture f(x) with params w, b in `mode`, optimise at `level`, build. */
static musa_graph *capture_block(int mode, musa_tensor *x, musa_tensor *w, musa_tensor *b,
                                 musa_tensor **eager_out) {
    musa_graph *g = musa_graph_new();
    if (!g) return NULL;
    musa_tensor *in = mode == MUSA_CAPTURE_SYMBOLIC
                          ? musa_empty_meta((musa_dtype)x->dtype, x->ndim, x->shape)
                          : musa_tensor_retain(x);
    if (musa_graph_capture_begin(g, mode) || musa_graph_add_input(g, in, "x")) {
        musa_graph_free(g);
        musa_tensor_release(in);
        return NULL;
    }
    musa_tensor *y = mlp_block(in, w, b);
    int rc = y ? musa_graph_set_outputs(g, 1, &y) : musa_last_error_code();
    int rc2 = musa_graph_capture_end(g);
    if (eager_out)
        *eager_out = y;
    else
        musa_tensor_release(y);
    musa_tensor_release(in);
    if (rc || rc2) {
        musa_graph_free(g);
        return NULL;
    }
    return g;
}

TEST(trace_records_nodes_and_plan_matches_eager) {
    useed(1);
    int64_t xs[2] = {16, 32}, ws[2] = {32, 24}, bs[1] = {24};
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, xs, -1, 1, L_CONTIG);
    musa_tensor *w = rnd(MUSA_DTYPE_FLOAT32, 2, ws, -1, 1, L_CONTIG);
    musa_tensor *b = rnd(MUSA_DTYPE_FLOAT32, 1, bs, -1, 1, L_CONTIG);
    musa_tensor *eager = NULL;
    musa_graph *g = capture_block(MUSA_CAPTURE_TRACE, x, w, b, &eager);
    CHECK(g && eager);
    CHECK(musa_graph_node_count(g) == 6); /* matmul, add, relu, cast of 0.5, mul, sum */
    CHECK_OK(musa_graph_verify(g));
    char *text = musa_graph_text(g), *json = musa_graph_json(g);
    CHECK(text && strstr(text, "= matmul(%0, %1") && strstr(text, "relu(") &&
          strstr(text, "sum(") && strstr(text, "dims=[1]"));
    CHECK(json && strstr(json, "{\"op\": \"matmul\", \"inputs\": [\"%x\", \"%1\"], \"outputs\": "
                               "[\"%2\"], \"attrs\": {\"transpose_a\": false, \"transpose_b\": "
                               "false}}"));
    free(text), free(json);
    for (int level = 0; level <= 2; level++) {
        musa_graph *g2 = capture_block(MUSA_CAPTURE_TRACE, x, w, b, NULL);
        musa_pass_ctx ctx = {.fusion_level = level, .verify = true};
        CHECK_OK(musa_graph_optimize(g2, &ctx));
        musa_plan *p = musa_plan_build(g2, NULL);
        CHECK(p);
        musa_tensor *out = NULL;
        CHECK_OK(musa_plan_run(p, 1, &x, 1, &out));
        CHECK(same_values(out, eager));
        /* level 1: the chain + bias, relu, * 0.5; level 2: with the matmul
         * heading it and the row sum ending it */
        CHECK(musa_plan_get_stats(p)->fused_groups == (level ? 1 : 0));
        CHECK_MSG(musa_plan_get_stats(p)->fused_nodes == (level == 2 ? 5
                                                          : level    ? 3
                                                                     : 0),
                  "level %d: %lld fused nodes", level,
                  (long long)musa_plan_get_stats(p)->fused_nodes);
        musa_tensor_release(out);
        musa_plan_free(p);
        musa_graph_free(g2);
    }
    musa_graph_free(g);
    musa_tensor_release(eager), musa_tensor_release(x), musa_tensor_release(w),
        musa_tensor_release(b);
}

/* The JSON names an input %name only where the name is an identifier no
 * other input shares. */
TEST(graph_json_names_inputs_by_unique_identifiers) {
    const char *names[3][2] = {{"a", "b"}, {"x", "x"}, {"x.1", "2y"}};
    const char *want[3] = {"\"inputs\": [\"%a\", \"%b\"]", "\"inputs\": [\"%0\", \"%1\"]",
                           "\"inputs\": [\"%0\", \"%1\"]"};
    int64_t n = 3;
    for (int c = 0; c < 3; c++) {
        musa_graph *g = musa_graph_new();
        musa_tensor *x = musa_ones(1, &n, MUSA_DTYPE_FLOAT32),
                    *y = musa_ones(1, &n, MUSA_DTYPE_FLOAT32);
        CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_TRACE));
        CHECK_OK(musa_graph_add_input(g, x, names[c][0]));
        CHECK_OK(musa_graph_add_input(g, y, names[c][1]));
        musa_tensor *z = musa_add(x, y);
        CHECK_OK(musa_graph_set_outputs(g, 1, &z));
        CHECK_OK(musa_graph_capture_end(g));
        char *json = musa_graph_json(g);
        CHECK_MSG(json && strstr(json, want[c]), "case %d: %s", c, json ? json : "NULL");
        free(json);
        musa_tensor_release(x), musa_tensor_release(y), musa_tensor_release(z);
        musa_graph_free(g);
    }
}

TEST(symbolic_capture_computes_nothing_and_runs_real_data) {
    useed(2);
    int64_t xs[2] = {8, 12}, ws[2] = {12, 6}, bs[1] = {6};
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, xs, -1, 1, L_CONTIG);
    musa_tensor *w = rnd(MUSA_DTYPE_FLOAT32, 2, ws, -1, 1, L_CONTIG);
    musa_tensor *b = rnd(MUSA_DTYPE_FLOAT32, 1, bs, -1, 1, L_CONTIG);
    musa_tensor *meta_out = NULL;
    musa_graph *g = capture_block(MUSA_CAPTURE_SYMBOLIC, x, w, b, &meta_out);
    CHECK(g && meta_out && musa_tensor_is_meta(meta_out));
    musa_tensor *ref = mlp_block(x, w, b);
    musa_pass_ctx ctx = {.fusion_level = 1, .verify = true};
    CHECK_OK(musa_graph_optimize(g, &ctx));
    musa_plan *p = musa_plan_build(g, NULL);
    musa_tensor *out = NULL;
    CHECK_OK(musa_plan_run(p, 1, &x, 1, &out));
    CHECK(same_values(out, ref));
    /* parameters are bound by reference: a new w changes the result */
    musa_tensor *two = musa_number(2.0);
    CHECK_OK(musa_mul_(w, two));
    musa_tensor_release(two);
    musa_tensor *ref2 = mlp_block(x, w, b), *out2 = NULL;
    CHECK_OK(musa_plan_run(p, 1, &x, 1, &out2));
    CHECK(same_values(out2, ref2));
    /* wrong input shape: a clear error */
    int64_t bad[2] = {9, 12};
    musa_tensor *xb = musa_zeros(2, bad, MUSA_DTYPE_FLOAT32), *o3 = NULL;
    CHECK_ERR(musa_plan_run(p, 1, &xb, 1, &o3) == MUSA_OK, MUSA_ERR_VALUE,
              "input 0 x is float32(9, 12) but the plan was compiled for float32(8, 12)");
    musa_tensor_release(xb);
    musa_tensor_release(out), musa_tensor_release(out2), musa_tensor_release(ref),
        musa_tensor_release(ref2), musa_tensor_release(meta_out);
    musa_plan_free(p);
    musa_graph_free(g);
    musa_tensor_release(x), musa_tensor_release(w), musa_tensor_release(b);
}

/* The gelu-tanh chain on x: 10 elementwise nodes. */
static musa_tensor *gelu_chain(musa_tensor *x) {
    musa_temps t = {0};
    musa_tensor *x3 = musa_tmp(&t, musa_pow(x, musa_tmp(&t, musa_number(3))));
    musa_tensor *a = musa_tmp(&t, musa_mul(x3, musa_tmp(&t, musa_number(0.044715))));
    musa_tensor *s = musa_tmp(&t, musa_add(x, a));
    musa_tensor *k = musa_tmp(&t, musa_mul(s, musa_tmp(&t, musa_number(0.79788456))));
    musa_tensor *th = musa_tmp(&t, musa_tanh(k));
    musa_tensor *one = musa_tmp(&t, musa_add(th, musa_tmp(&t, musa_number(1))));
    musa_tensor *h = musa_tmp(&t, musa_mul(x, musa_tmp(&t, musa_number(0.5))));
    musa_tensor *y = musa_mul(h, one);
    musa_temps_release(&t);
    return y;
}

TEST(fused_elementwise_chain_is_bitwise_eager) {
    useed(3);
    int64_t shapes[3][3] = {{100003, 0, 0}, {7, 333, 0}, {3, 5, 2000}};
    int nds[3] = {1, 2, 3};
    for (int c = 0; c < 3; c++) {
        musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, nds[c], shapes[c], -4, 4, L_CONTIG);
        musa_tensor *ref = gelu_chain(x);
        musa_graph *g = NULL;
        musa_plan *p = jit_compile_unary(gelu_chain, x, 1, NULL, &g);
        CHECK(p);
        const musa_plan_stats *st = musa_plan_get_stats(p);
        CHECK_MSG(st->fused_groups == 1 && st->kernels == 0, "groups %d kernels %d",
                  st->fused_groups, st->kernels);
        CHECK(st->arena_bytes == 0); /* every intermediate lives in tiles */
        CHECK(run_same(p, x, ref));
        /* every member calls its kernel's loop directly (lean), in L1 tiles */
        char *text = musa_plan_text(p);
        CHECK_MSG(text && strstr(text, "tiles of 1024 rows") && strstr(text, ", 8 lean"), "%s",
                  text ? text : "(no text)");
        free(text);
        musa_plan_free(p);
        musa_graph_free(g);
        musa_tensor_release(ref), musa_tensor_release(x);
    }
}

/* Which kernels have loop resolvers (the plan's lean members): elementwise
 * ones, for the dtypes whose loops need nothing from the kernel. */
TEST(loop_resolvers_cover_elementwise_kernels_only) {
    int64_t n = 8;
    musa_kview v[4] = {{.dtype = MUSA_DTYPE_FLOAT32, .ndim = 1, .shape = {n}, .strides = {1}}};
    v[1] = v[2] = v[3] = v[0];
    CHECK(musa_ops[MUSA_OP_tanh].loop && musa_ops[MUSA_OP_tanh].loop(v, v + 1, NULL));
    CHECK(musa_ops[MUSA_OP_mul].loop && musa_ops[MUSA_OP_mul].loop(v, v + 1, NULL));
    CHECK(musa_ops[MUSA_OP_pow].loop(v, v + 1, NULL)); /* no exponent data: the general loop */
    CHECK(!musa_ops[MUSA_OP_matmul].loop && !musa_ops[MUSA_OP_sum].loop);
    CHECK(!musa_ops[MUSA_OP_view].loop); /* a view: cpu_none */
    for (int q = 0; q < 4; q++) v[q].dtype = MUSA_DTYPE_INT32;
    CHECK(musa_ops[MUSA_OP_neg].loop(v, v + 1, NULL));   /* integer negation wraps: no errors */
    CHECK(!musa_ops[MUSA_OP_mul].loop(v, v + 1, NULL));  /* integer arithmetic: the kernel */
    CHECK(!musa_ops[MUSA_OP_tanh].loop(v, v + 1, NULL)); /* no int32 tanh: the kernel says so */
}

static musa_tensor *broadcast_chain(musa_tensor *x) {
    /* (x - mean over rows) * 2 + a per-column ramp, then exp; then row sums */
    musa_temps t = {0};
    int64_t d = 0, one = 1;
    musa_tensor *mu = musa_tmp(&t, musa_mean(x, 1, &d, true));
    musa_tensor *c = musa_tmp(&t, musa_sub(x, mu));
    musa_tensor *r = musa_tmp(&t, musa_arange(0, (double)x->shape[1], 1, MUSA_DTYPE_FLOAT32));
    musa_tensor *s = musa_tmp(&t, musa_mul(c, musa_tmp(&t, musa_number(2))));
    musa_tensor *e = musa_tmp(&t, musa_exp(musa_tmp(&t, musa_div(musa_tmp(&t, musa_add(s, r)),
                                                                 musa_tmp(&t, musa_number(50))))));
    musa_tensor *y = musa_sum(e, 1, &one, false);
    musa_temps_release(&t);
    return y;
}

TEST(fused_broadcast_and_row_reduction_match_eager) {
    useed(4);
    int64_t xs[2] = {300, 257};
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, xs, -1, 1, L_CONTIG);
    musa_tensor *ref = broadcast_chain(x);
    musa_graph *g = NULL;
    musa_plan *p = jit_compile_unary(broadcast_chain, x, 1, NULL, &g);
    CHECK(p);
    const musa_plan_stats *st = musa_plan_get_stats(p);
    CHECK(st->fused_groups >= 1 && st->fused_nodes >= 4);
    musa_tensor *out = NULL;
    CHECK_OK(musa_plan_run(p, 1, &x, 1, &out));
    CHECK(near_values(out, ref, 1e-6));
    musa_tensor_release(out);
    musa_plan_free(p);
    musa_graph_free(g);
    musa_tensor_release(ref), musa_tensor_release(x);
}

/* Many same-size intermediates that die one after another. */
static musa_tensor *long_chain(musa_tensor *x) {
    musa_tensor *cur = musa_tensor_retain(x);
    for (int i = 0; i < 12; i++) {
        musa_tensor *k = musa_number(1.0 + 0.01 * i);
        musa_tensor *n = (i % 3 == 2) ? musa_matmul(cur, x) : musa_mul(cur, k);
        musa_tensor_release(k);
        musa_tensor_release(cur);
        cur = n;
    }
    return cur;
}

TEST(memory_plan_reuses_and_never_overlaps_live_buffers) {
    useed(5);
    int64_t xs[2] = {64, 64};
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, xs, -0.2, 0.2, L_CONTIG);
    musa_tensor *ref = long_chain(x);
    for (int arena = 0; arena <= 1; arena++) {
        musa_graph *g = NULL;
        musa_plan_options opt = {.num_threads = 1, .memory_arena = arena, .poison = true};
        musa_plan *p = jit_compile_unary(long_chain, x, 0, &opt, &g);
        CHECK(p);
        const musa_plan_stats *st = musa_plan_get_stats(p);
        const musa_plan_buffer *b;
        int n = musa_plan_buffers(p, &b);
        CHECK(n > 0);
        CHECK(st->arena_bytes <= st->naive_bytes);
        CHECK(st->arena_bytes >= st->live_peak_bytes || !arena);
        if (arena)
            CHECK_MSG(st->arena_bytes < st->naive_bytes / 2, "arena %zu naive %zu", st->arena_bytes,
                      st->naive_bytes);
        if (arena) CHECK(st->inplace > 0);
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) {
                bool live = b[i].first <= b[j].last && b[j].first <= b[i].last;
                bool mem = b[i].offset < b[j].offset + b[j].bytes &&
                           b[j].offset < b[i].offset + b[i].bytes;
                CHECK_MSG(!(live && mem), "buffers %d and %d overlap while both live", i, j);
            }
        /* poisoned dead buffers would corrupt the result if the plan were wrong */
        CHECK(run_same(p, x, ref));
        musa_plan_free(p);
        musa_graph_free(g);
    }
    musa_tensor_release(ref), musa_tensor_release(x);
}

/* The plain best fit the planner's lifetime index must reproduce bit for
 * bit: in each of the planner's orders (largest first; bytes x steps
 * first; longest-lived first; those live at the peak step first, by first
 * step), each buffer in the smallest gap between the
 * placed buffers whose lifetimes overlap its own (by offset, ties in
 * placement order), and of those the smallest arena (ties: the earlier
 * order). qsort sees the same array as the planner's, so ties in the order
 * come out in the same sequence. */
static int cmp_size_then_first(const void *a, const void *b) {
    const musa_plan_buffer *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->first - y->first;
}

static int cmp_area_first(const void *a, const void *b) {
    const musa_plan_buffer *x = a, *y = b;
    double ax = (double)x->bytes * (x->last - x->first + 1),
           ay = (double)y->bytes * (y->last - y->first + 1);
    return ax != ay ? (ax < ay ? 1 : -1) : cmp_size_then_first(a, b);
}

static int cmp_span_first(const void *a, const void *b) {
    const musa_plan_buffer *x = a, *y = b;
    int sx = x->last - x->first, sy = y->last - y->first;
    return sx != sy ? (sx < sy ? 1 : -1) : cmp_size_then_first(a, b);
}

/* value: 1 when live at the peak step (set by reference_one_order) */
static int cmp_peak_first(const void *a, const void *b) {
    const musa_plan_buffer *x = a, *y = b;
    if (x->value != y->value) return x->value ? -1 : 1;
    if (x->value && x->first != y->first) return x->first < y->first ? -1 : 1;
    return cmp_size_then_first(a, b);
}

/* The first step at which the most (aligned) bytes are live. */
static int peak_step_of(const musa_plan_buffer *bufs, int n) {
    int last = 0, at = 0;
    size_t best = 0;
    for (int i = 0; i < n; i++) last = MUSA_MAX(last, bufs[i].last);
    for (int s = 0; s <= last; s++) {
        size_t live = 0;
        for (int i = 0; i < n; i++)
            if (bufs[i].first <= s && s <= bufs[i].last) live += musa_plan_align(bufs[i].bytes);
        if (live > best) best = live, at = s;
    }
    return at;
}

static size_t gap_among(const musa_plan_buffer *const *live, int m, size_t need) {
    size_t best = SIZE_MAX, best_size = SIZE_MAX, cur = 0;
    for (int a = 0; a < m; a++) {
        if (live[a]->offset >= cur && live[a]->offset - cur >= need &&
            live[a]->offset - cur < best_size)
            best = cur, best_size = live[a]->offset - cur;
        cur = MUSA_MAX(cur, live[a]->offset + musa_plan_align(live[a]->bytes));
    }
    return best != SIZE_MAX ? best : cur;
}

/* Stable sort of live[0..m) by offset. */
static void by_offset_stable(const musa_plan_buffer **live, int m) {
    for (int a = 1; a < m; a++)
        for (int c = a; c > 0 && live[c]->offset < live[c - 1]->offset; c--) {
            const musa_plan_buffer *t = live[c];
            live[c] = live[c - 1], live[c - 1] = t;
        }
}

static size_t reference_one_order(musa_plan_buffer *bufs, int n,
                                  int (*cmp)(const void *, const void *)) {
    musa_plan_buffer *sorted = malloc(sizeof *sorted * (size_t)n);
    const musa_plan_buffer **live = malloc(sizeof *live * (size_t)n);
    memcpy(sorted, bufs, sizeof *sorted * (size_t)n);
    int peak = cmp == cmp_peak_first ? peak_step_of(bufs, n) : 0;
    for (int i = 0; i < n; i++) {
        sorted[i].offset = (size_t)i;
        if (cmp == cmp_peak_first)
            sorted[i].value = sorted[i].first <= peak && peak <= sorted[i].last;
    }
    qsort(sorted, (size_t)n, sizeof *sorted, cmp);
    int *index = malloc(sizeof *index * (size_t)n);
    for (int i = 0; i < n; i++) index[i] = (int)sorted[i].offset, sorted[i].offset = 0;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        musa_plan_buffer *x = &sorted[i];
        int m = 0;
        for (int j = 0; j < i; j++)
            if (sorted[j].first <= x->last && x->first <= sorted[j].last) live[m++] = &sorted[j];
        by_offset_stable(live, m);
        x->offset = gap_among(live, m, musa_plan_align(x->bytes));
        total = MUSA_MAX(total, x->offset + musa_plan_align(x->bytes));
    }
    for (int i = 0; i < n; i++) bufs[index[i]].offset = sorted[i].offset;
    free(sorted), free(live), free(index);
    return total;
}

/* The smallest arena of the orders; *order_won: which order gave it. */
static size_t reference_best_fit(musa_plan_buffer *bufs, int n, int *order_won) {
    int (*const cmps[4])(const void *, const void *) = {cmp_size_then_first, cmp_area_first,
                                                        cmp_span_first, cmp_peak_first};
    musa_plan_buffer *t = malloc(sizeof *t * (size_t)n);
    size_t best = SIZE_MAX;
    for (int o = 0; o < 4; o++) {
        memcpy(t, bufs, sizeof *t * (size_t)n);
        size_t total = reference_one_order(t, n, cmps[o]);
        if (total < best) best = total, *order_won = o, memcpy(bufs, t, sizeof *t * (size_t)n);
    }
    free(t);
    return best;
}

TEST(memory_placement_matches_the_plain_best_fit) {
    useed(11);
    int wins[4] = {0};
    for (int trial = 0; trial < 60; trial++) {
        int n = 1 + (int)(urand() * 300), steps = 1 + (int)(urand() * 200);
        musa_plan_buffer *a = calloc((size_t)n, sizeof *a), *b = calloc((size_t)n, sizeof *b);
        size_t *bytes = calloc((size_t)steps, sizeof *bytes);
        size_t *off = calloc((size_t)steps, sizeof *off),
               *ref_off = calloc((size_t)steps, sizeof *ref_off);
        const musa_plan_buffer **live = malloc(sizeof *live * (size_t)n);
        for (int i = 0; i < n; i++) {
            a[i].value = i;
            a[i].bytes = (size_t)(urand() * 5) * 100; /* ties, and empty buffers */
            a[i].first = (int)(urand() * steps);
            int span = urand() < 0.1 ? steps : 3; /* a few live long */
            a[i].last = MUSA_MIN(steps, a[i].first + (int)(urand() * span));
        }
        for (int s = 0; s < steps; s++) bytes[s] = urand() < 0.5 ? 0 : (size_t)(urand() * 700);
        memcpy(b, a, sizeof *a * (size_t)n);
        int won = 0;
        size_t total = musa_plan_assign_offsets(a, n, true, true, NULL),
               ref = reference_best_fit(b, n, &won);
        wins[won]++;
        CHECK_MSG(total == ref, "trial %d: arena %zu, the plain best fit %zu", trial, total, ref);
        for (int i = 0; i < n; i++)
            CHECK_MSG(a[i].offset == b[i].offset, "trial %d buffer %d: offset %zu, expected %zu",
                      trial, i, a[i].offset, b[i].offset);
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) {
                bool both = a[i].first <= a[j].last && a[j].first <= a[i].last;
                bool shared = a[i].offset < a[j].offset + a[j].bytes &&
                              a[j].offset < a[i].offset + a[i].bytes;
                CHECK_MSG(!(both && shared), "trial %d: buffers %d and %d overlap", trial, i, j);
            }
        size_t arena = total, ref_arena = total;
        musa_plan_place_scratch(a, n, steps, bytes, off, &arena);
        for (int s = 0; s < steps; s++) {
            int m = 0;
            for (int k = 0; k < n; k++)
                if (a[k].first <= s && s <= a[k].last) live[m++] = &a[k];
            by_offset_stable(live, m);
            ref_off[s] = bytes[s] ? gap_among(live, m, musa_plan_align(bytes[s])) : 0;
            if (bytes[s]) ref_arena = MUSA_MAX(ref_arena, ref_off[s] + musa_plan_align(bytes[s]));
            CHECK_MSG(off[s] == ref_off[s], "trial %d step %d: scratch at %zu, expected %zu", trial,
                      s, off[s], ref_off[s]);
        }
        CHECK(arena == ref_arena);
        free(a), free(b), free(bytes), free(off), free(ref_off), free(live);
    }
    /* every order gave the smallest arena somewhere: none is dead weight */
    CHECK_MSG(wins[0] && wins[1] && wins[2] && wins[3], "orders won %d, %d, %d, %d trials", wins[0],
              wins[1], wins[2], wins[3]);
}

/* Two independent heavy kernels (softmax: GEMMs are never paired) and a
 * node that reads both. */
static musa_tensor *two_branches(musa_tensor *x) {
    musa_tensor *a = musa_softmax(x, 1);
    musa_tensor *b = musa_softmax(x, 0);
    musa_tensor *y = musa_add(a, b);
    musa_tensor_release(a), musa_tensor_release(b);
    return y;
}

TEST(independent_branches_run_concurrently_with_serial_results) {
    if (musa_get_num_threads() < 2) musa_set_num_threads(2);
    useed(6);
    int64_t xs[2] = {192, 192};
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, xs, -1, 1, L_CONTIG);
    musa_tensor *outs[2] = {NULL, NULL};
    for (int th = 1; th <= 2; th++) {
        musa_graph *g = NULL;
        musa_plan_options opt = {.num_threads = th, .memory_arena = true};
        musa_plan *p = jit_compile_unary(two_branches, x, 1, &opt, &g);
        CHECK(p);
        const musa_plan_stats *st = musa_plan_get_stats(p);
        CHECK(st->parallel_steps == (th == 2 ? 1 : 0));
        CHECK_OK(musa_plan_run(p, 1, &x, 1, &outs[th - 1]));
        CHECK(st->parallel_tasks == (th == 2 ? 2u : 0u));
        musa_plan_free(p);
        musa_graph_free(g);
    }
    CHECK(same_values(outs[0], outs[1]));
    musa_tensor *ref = two_branches(x);
    CHECK(near_values(outs[0], ref, 1e-5));
    musa_tensor_release(ref), musa_tensor_release(outs[0]), musa_tensor_release(outs[1]);
    musa_tensor_release(x);
}

TEST(mutations_write_back_into_inputs) {
    int64_t s[1] = {5};
    musa_tensor *x = musa_ones(1, s, MUSA_DTYPE_FLOAT32);
    musa_graph *g = musa_graph_new();
    CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_TRACE));
    CHECK_OK(musa_graph_add_input(g, x, "x"));
    musa_tensor *two = musa_number(2);
    CHECK_OK(musa_mul_(x, two));       /* x = 2 */
    musa_tensor *y = musa_add(x, two); /* reads the new x: 4 */
    CHECK_OK(musa_graph_set_outputs(g, 1, &y));
    CHECK_OK(musa_graph_capture_end(g));
    CHECK(musa_graph_num_mutations(g) == 1);
    CHECK(musa_graph_mutation_target(g, 0) == musa_graph_input(g, 0));
    CHECK(musa_graph_value_kind(g, musa_graph_mutation_target(g, 0)) == MUSA_VALUE_INPUT);
    CHECK(musa_graph_mutation_target(g, 1) == -1 && musa_graph_mutation_target(g, -1) == -1);
    CHECK(musa_graph_mutation_target(NULL, 0) == -1);
    musa_plan *p = musa_plan_build(g, NULL);
    musa_tensor *out = NULL;
    CHECK_OK(musa_plan_run(p, 1, &x, 1, &out)); /* x: 2 -> 4, y = 6 */
    double *xv = values(x), *ov = values(out);
    CHECK(xv && ov && xv[3] == 4 && ov[4] == 6);
    free(xv), free(ov);
    musa_tensor_release(out), musa_tensor_release(y), musa_tensor_release(two);
    musa_plan_free(p);
    musa_graph_free(g);
    musa_tensor_release(x);
}

/* z = exp(x + 1) lent from the arena (loaned_outputs 1), y = 2 (x + 1)
 * returned in a buffer of its own: a run reuses the arena when nothing
 * holds z, takes a new one when something does, and a held z outlives its
 * plan. */
TEST(loaned_outputs_live_in_the_arena_and_are_never_written_over_while_held) {
    int64_t n = 1000;
    musa_tensor *m = musa_empty_meta(MUSA_DTYPE_FLOAT32, 1, &n);
    musa_graph *g = musa_graph_new();
    CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC));
    CHECK_OK(musa_graph_add_input(g, m, "x"));
    musa_tensor *one = musa_number(1), *two = musa_number(2);
    musa_tensor *h = musa_add(m, one);
    musa_tensor *outs[2] = {musa_mul(h, two), musa_exp(h)};
    CHECK_OK(musa_graph_set_outputs(g, 2, outs));
    CHECK_OK(musa_graph_capture_end(g));
    musa_tensor_release(outs[0]), musa_tensor_release(outs[1]), musa_tensor_release(h);
    musa_tensor_release(m);
    for (int bad = -1; bad <= 3; bad += 4) {
        musa_plan_options o = {.memory_arena = true, .loaned_outputs = bad};
        CHECK_ERR(musa_plan_build(g, &o) != NULL, MUSA_ERR_VALUE, "is outside 0..2");
    }
    musa_plan_options o = {.memory_arena = true, .loaned_outputs = 1};
    musa_plan *p = musa_plan_build(g, &o);
    CHECK(p && musa_plan_output_loaned(p, 1) && !musa_plan_output_loaned(p, 0));
    CHECK(musa_plan_get_stats(p)->loaned_bytes == 4032); /* 4000 bytes, 64-aligned */
    useed(11);
    musa_tensor *x[3], *want[3], *r[3][2];
    for (int i = 0; i < 3; i++) {
        x[i] = rnd(MUSA_DTYPE_FLOAT32, 1, &n, -2, 2, L_CONTIG);
        musa_tensor *xi = musa_add(x[i], one);
        want[i] = musa_exp(xi);
        musa_tensor_release(xi);
    }
    CHECK_OK(musa_plan_run(p, 1, &x[0], 2, r[0]));
    CHECK(same_values(r[0][1], want[0]));
    /* z of run 0 is held: run 1 takes a new block and leaves it intact */
    CHECK_OK(musa_plan_run(p, 1, &x[1], 2, r[1]));
    CHECK(musa_plan_get_stats(p)->arena_renewals == 1);
    CHECK(same_values(r[0][1], want[0]) && same_values(r[1][1], want[1]));
    CHECK(musa_tensor_data(r[0][1]) != musa_tensor_data(r[1][1]));
    void *at = musa_tensor_data(r[1][1]);
    for (int k = 0; k < 2; k++) musa_tensor_release(r[0][k]), musa_tensor_release(r[1][k]);
    /* nothing held: run 2 reuses run 1's block */
    CHECK_OK(musa_plan_run(p, 1, &x[2], 2, r[2]));
    CHECK(musa_plan_get_stats(p)->arena_renewals == 1 && musa_tensor_data(r[2][1]) == at);
    musa_plan_free(p); /* r[2] keeps its block */
    CHECK(same_values(r[2][1], want[2]));
    for (int i = 0; i < 3; i++) musa_tensor_release(x[i]), musa_tensor_release(want[i]);
    musa_tensor_release(r[2][0]), musa_tensor_release(r[2][1]);
    musa_tensor_release(one), musa_tensor_release(two);
    musa_graph_free(g);
}

TEST(capture_refuses_writes_through_views_and_data_reads) {
    int64_t s[2] = {2, 3};
    musa_tensor *x = musa_zeros(2, s, MUSA_DTYPE_FLOAT32);
    musa_graph *g = musa_graph_new();
    CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_TRACE));
    CHECK_OK(musa_graph_add_input(g, x, "x"));
    musa_tensor *y = musa_add(x, x);
    musa_tensor *row = musa_select(y, 0, 1);
    musa_tensor *one = musa_number(1);
    CHECK_OK(musa_add_(row, one)); /* eager still works */
    CHECK_ERR(musa_graph_capture_end(g) == MUSA_OK, MUSA_ERR_NOT_IMPLEMENTED, "shares memory");
    musa_graph_free(g);
    musa_tensor_release(row), musa_tensor_release(y), musa_tensor_release(one);
    g = musa_graph_new();
    CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_TRACE));
    CHECK_OK(musa_graph_add_input(g, x, "x"));
    musa_jit_set_location_hook(fake_location);
    CHECK_OK(musa_graph_host_read(g, x, MUSA_READ_DATA, 0));
    musa_jit_set_location_hook(NULL);
    CHECK_ERR(musa_graph_capture_end(g) == MUSA_OK, MUSA_ERR_NOT_IMPLEMENTED, "model.py:7");
    musa_graph_free(g);
    /* no nesting, no capture twice */
    musa_graph *a = musa_graph_new(), *b = musa_graph_new();
    CHECK_OK(musa_graph_capture_begin(a, MUSA_CAPTURE_TRACE));
    CHECK_ERR(musa_graph_capture_begin(b, MUSA_CAPTURE_TRACE) == MUSA_OK, MUSA_ERR_RUNTIME,
              "nested");
    CHECK_OK(musa_graph_capture_end(a));
    CHECK_ERR(musa_graph_capture_begin(a, 7) == MUSA_OK, MUSA_ERR_VALUE, "mode");
    musa_graph_free(a), musa_graph_free(b);
    musa_tensor_release(x);
}

TEST(plan_errors_name_the_recorded_line) {
    int64_t s[1] = {4};
    double nv[4] = {7, 8, 9, 10}, dv[4] = {1, 2, 3, 4};
    musa_tensor *n = from_list(MUSA_DTYPE_INT64, 1, s, nv);
    musa_tensor *d = from_list(MUSA_DTYPE_INT64, 1, s, dv);
    musa_graph *g = musa_graph_new();
    musa_jit_set_location_hook(fake_location);
    CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_TRACE));
    CHECK_OK(musa_graph_add_input(g, n, "n"));
    CHECK_OK(musa_graph_add_input(g, d, "d"));
    musa_tensor *q = musa_floor_divide(n, d);
    CHECK_OK(musa_graph_set_outputs(g, 1, &q));
    CHECK_OK(musa_graph_capture_end(g));
    musa_jit_set_location_hook(NULL);
    musa_plan *p = musa_plan_build(g, NULL);
    musa_tensor *in[2] = {n, musa_zeros(1, s, MUSA_DTYPE_INT64)}, *out = NULL;
    CHECK_ERR(musa_plan_run(p, 2, in, 1, &out) == MUSA_OK, MUSA_ERR_ZERO_DIVISION, "model.py:7");
    CHECK(out == NULL);
    musa_tensor_release(in[1]), musa_tensor_release(q);
    musa_plan_free(p);
    musa_graph_free(g);
    musa_tensor_release(n), musa_tensor_release(d);
}

TEST(host_reads_become_breaks_and_segments_compose) {
    int64_t s[1] = {6};
    musa_tensor *x = musa_arange(0, 6, 1, MUSA_DTYPE_FLOAT32);
    musa_graph *g = musa_graph_new();
    CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_TRACE));
    CHECK_OK(musa_graph_add_input(g, x, "x"));
    musa_tensor *sq = musa_mul(x, x);
    musa_tensor *tot = musa_sum(sq, 0, NULL, false);
    double v;
    CHECK_OK(musa_tensor_item(tot, &v));
    CHECK_OK(musa_graph_host_read(g, tot, MUSA_READ_BOOL, v > 10));
    musa_tensor *y = musa_div(sq, tot);
    CHECK_OK(musa_graph_set_outputs(g, 1, &y));
    CHECK_OK(musa_graph_capture_end(g));
    CHECK(musa_graph_num_breaks(g) == 1);
    int bv, at, kind;
    double outcome;
    CHECK_OK(musa_graph_break(g, 0, &bv, &at, &kind, &outcome, NULL));
    CHECK(bv == musa_graph_value_of(g, tot) || bv >= 0);
    CHECK(at == 2 && kind == MUSA_READ_BOOL && outcome == 1);
    int outs0[2] = {bv, musa_graph_value_of(g, sq)};
    int *car0 = NULL, *car1 = NULL, nc0 = 0, nc1 = 0;
    musa_graph *s0 = musa_graph_segment(g, 0, at, 2, outs0, NULL, &car0, &nc0);
    int outs1[1] = {musa_graph_output(g, 0)};
    musa_graph *s1 =
        musa_graph_segment(g, at, musa_graph_num_nodes(g), 1, outs1, NULL, &car1, &nc1);
    CHECK(s0 && s1 && nc0 == 0 && nc1 == 2);
    musa_plan *p0 = musa_plan_build(s0, NULL), *p1 = musa_plan_build(s1, NULL);
    musa_tensor *o0[2] = {NULL, NULL}, *o1 = NULL;
    CHECK_OK(musa_plan_run(p0, 1, &x, 2, o0));
    /* the second segment takes x, then the carried values in id order */
    musa_tensor *in1[3] = {x, car1[0] == outs0[0] ? o0[0] : o0[1],
                           car1[1] == outs0[1] ? o0[1] : o0[0]};
    CHECK_OK(musa_plan_run(p1, 3, in1, 1, &o1));
    CHECK(same_values(o1, y));
    CHECK(musa_graph_fingerprint(g, 0, at) == musa_graph_fingerprint(g, 0, at));
    CHECK(musa_graph_fingerprint(g, 0, at) != musa_graph_fingerprint(g, at, 4));
    free(car0), free(car1);
    musa_tensor_release(o0[0]), musa_tensor_release(o0[1]), musa_tensor_release(o1);
    musa_plan_free(p0), musa_plan_free(p1);
    musa_graph_free(s0), musa_graph_free(s1), musa_graph_free(g);
    musa_tensor_release(sq), musa_tensor_release(tot), musa_tensor_release(y);
    musa_tensor_release(x);
    (void)s;
}

/* Regression: copying a node without tensor inputs (a creation op, like
 * the zeros and fills a whole training step makes for optimizer state and
 * batch-norm statistics) into a segment called memcpy(NULL, ..., 0), which
 * UBSan's nonnull check aborts the sanitizer build on. */
TEST(segments_copy_nodes_without_inputs) {
    musa_tensor *x = musa_arange(0, 4, 1, MUSA_DTYPE_FLOAT32);
    musa_graph *g = musa_graph_new();
    CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_TRACE));
    CHECK_OK(musa_graph_add_input(g, x, "x"));
    musa_tensor *two = musa_full(1, (int64_t[]){4}, 2, MUSA_DTYPE_FLOAT32);
    musa_tensor *y = musa_mul(x, two);
    CHECK_OK(musa_graph_set_outputs(g, 1, &y));
    CHECK_OK(musa_graph_capture_end(g));
    CHECK(musa_graph_node_op(g, 0) && !strcmp(musa_graph_node_op(g, 0), "full"));
    int out = musa_graph_output(g, 0), *carried = NULL, nc = -1;
    musa_graph *s = musa_graph_segment(g, 0, musa_graph_num_nodes(g), 1, &out, NULL, &carried, &nc);
    CHECK_MSG(s, "%s", musa_last_error());
    CHECK(nc == 0 && musa_graph_node_count(s) == 2);
    musa_plan *p = musa_plan_build(s, NULL);
    CHECK(p && run_same(p, x, y));
    free(carried);
    musa_plan_free(p);
    musa_graph_free(s), musa_graph_free(g);
    release_all(3, x, two, y);
}

TEST(verifier_rejects_malformed_graphs) {
    int64_t s[1] = {3};
    musa_tensor *x = musa_zeros(1, s, MUSA_DTYPE_FLOAT32);
    musa_graph *g = musa_graph_new();
    CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_TRACE));
    CHECK_OK(musa_graph_add_input(g, x, "x"));
    musa_tensor *a = musa_exp(x), *b = musa_neg(a);
    CHECK_OK(musa_graph_set_outputs(g, 1, &b));
    CHECK_OK(musa_graph_capture_end(g));
    CHECK_OK(musa_graph_verify(g));
    /* use before definition */
    g->nodes.data[0].in[0] = g->nodes.data[1].out[0];
    CHECK_ERR(musa_graph_verify(g) == MUSA_OK, MUSA_ERR_RUNTIME, "before it is defined");
    g->nodes.data[0].in[0] = 0;
    /* a shape that disagrees with the op's inference */
    g->values.data[g->nodes.data[1].out[0]].shape[0] = 4;
    CHECK_ERR(musa_graph_verify(g) == MUSA_OK, MUSA_ERR_RUNTIME, "disagree");
    g->values.data[g->nodes.data[1].out[0]].shape[0] = 3;
    CHECK_OK(musa_graph_verify(g));
    /* passes: unknown names are errors */
    musa_pass_ctx ctx = {.fusion_level = 1};
    CHECK_ERR(musa_graph_run_pass(g, "nope", &ctx) == MUSA_OK, MUSA_ERR_VALUE,
              "unknown pass 'nope'");
    /* the pipeline's names, in order, end with NULL; every name runs */
    int np = 0;
    while (musa_graph_pass_name(np)) np++;
    CHECK(np >= 6 && !strcmp(musa_graph_pass_name(0), "attention") &&
          !strcmp(musa_graph_pass_name(1), "simplify") && !musa_graph_pass_name(-1));
    CHECK(!strcmp(musa_graph_pass_name(np - 1), "fuse"));
    musa_graph_free(g);
    musa_tensor_release(a), musa_tensor_release(b), musa_tensor_release(x);
}

/* loss = sum(tanh(x @ w) * w2); gradients of w by static autodiff, against
 * eager autograd. */
TEST(static_autodiff_matches_eager_autograd) {
    useed(7);
    int64_t xs[2] = {6, 5}, ws[2] = {5, 4};
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 2, xs, -1, 1, L_CONTIG);
    musa_tensor *w = rnd(MUSA_DTYPE_FLOAT64, 2, ws, -1, 1, L_CONTIG);
    musa_tensor *w2 = rnd(MUSA_DTYPE_FLOAT64, 1, ws + 1, -1, 1, L_CONTIG);
    musa_tensor_set_requires_grad(w, true);
    musa_graph *g = musa_graph_new();
    musa_tensor *m = musa_empty_meta(MUSA_DTYPE_FLOAT64, 2, xs);
    CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC));
    CHECK_OK(musa_graph_add_input(g, m, "x"));
    musa_temps t = {0};
    musa_tensor *loss = musa_tmp(
        &t, musa_sum(musa_tmp(&t, musa_mul(musa_tmp(&t, musa_tanh(musa_tmp(&t, musa_matmul(m, w)))),
                                           w2)),
                     0, NULL, false));
    CHECK_OK(musa_graph_set_outputs(g, 1, &loss));
    CHECK_OK(musa_graph_capture_end(g));
    int n_fwd = musa_graph_num_nodes(g);
    int out = musa_graph_output(g, 0), wv = -1;
    for (int v = 0; v < musa_graph_num_values(g); v++)
        if (musa_graph_value_tensor(g, v) == w) wv = v;
    CHECK(wv >= 0);
    int gin = musa_graph_new_input(g, out, "g"), gw = -1;
    CHECK(gin >= 0);
    CHECK_OK(musa_graph_autodiff(g, 1, &out, &gin, 1, &wv, &gw));
    CHECK(gw >= 0 && musa_graph_num_nodes(g) > n_fwd);
    CHECK_OK(musa_graph_verify(g));
    /* the backward alone, planned: inputs x, g, then what it carries */
    int *carried = NULL, nc = 0;
    musa_segment_options so = {.mutations = false, .n_inputs = -1, .remat = true};
    musa_graph *bwd =
        musa_graph_segment(g, n_fwd, musa_graph_num_nodes(g), 1, &gw, &so, &carried, &nc);
    CHECK(bwd);
    /* with remat the backward recomputes tanh's cheap users from what it
     * takes anyway: whatever it carries is a forward value */
    for (int i = 0; i < nc; i++) CHECK(musa_graph_value_producer(g, carried[i]) < n_fwd);
    musa_plan *p = musa_plan_build(bwd, NULL);
    CHECK(p);
    musa_tensor *one = musa_ones(0, NULL, MUSA_DTYPE_FLOAT64);
    musa_tensor *ins[8] = {x, one};
    /* carried values come from an eager replay of the forward */
    musa_tensor *vals[6] = {NULL};
    CHECK(nc <= 6);
    CHECK_OK(musa_graph_run_eager(g, 2, ins, nc, carried, vals));
    for (int i = 0; i < nc; i++) ins[2 + i] = vals[i];
    musa_tensor *grad = NULL;
    CHECK_OK(musa_plan_run(p, 2 + nc, ins, 1, &grad));
    musa_tensor *loss_e = musa_sum(
        musa_tmp(&t, musa_mul(musa_tmp(&t, musa_tanh(musa_tmp(&t, musa_matmul(x, w)))), w2)), 0,
        NULL, false);
    CHECK_OK(musa_backward(1, &loss_e, NULL, false, false));
    musa_tensor *gw_eager = musa_tensor_grad(w);
    bool agree = near_values(grad, gw_eager, 1e-12);
    musa_tensor_release(gw_eager);
    CHECK(agree);
    for (int i = 0; i < nc; i++) musa_tensor_release(vals[i]);
    musa_tensor_release(grad), musa_tensor_release(loss_e), musa_tensor_release(one);
    musa_temps_release(&t);
    free(carried);
    musa_plan_free(p);
    musa_graph_free(bwd), musa_graph_free(g);
    musa_tensor_release(m), musa_tensor_release(x), musa_tensor_release(w), musa_tensor_release(w2);
}

/* exp(x) is read at once and again 20 nodes later, where x is still live:
 * remat recomputes it there, so its buffer dies early. */
static musa_tensor *long_lived(musa_tensor *x) {
    musa_tensor *e = musa_exp(x), *cur = musa_mul(e, e);
    for (int i = 0; i < 20; i++) {
        musa_tensor *n = musa_matmul(cur, x);
        musa_tensor_release(cur);
        cur = n;
    }
    musa_tensor *y = musa_add(cur, e), *z = musa_add(y, x);
    musa_tensor_release(e), musa_tensor_release(cur), musa_tensor_release(y);
    return z;
}

TEST(remat_recomputes_long_lived_cheap_values) {
    useed(8);
    int64_t s[2] = {16, 16};
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, s, -0.2, 0.2, L_CONTIG);
    musa_tensor *ref = long_lived(x);
    size_t arena[2];
    for (int on = 0; on <= 1; on++) {
        musa_graph *g = musa_graph_new();
        musa_tensor *m = musa_empty_meta(MUSA_DTYPE_FLOAT32, 2, s);
        CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC));
        CHECK_OK(musa_graph_add_input(g, m, "x"));
        musa_tensor *y = long_lived(m);
        CHECK_OK(musa_graph_set_outputs(g, 1, &y));
        CHECK_OK(musa_graph_capture_end(g));
        musa_pass_ctx ctx = {.fusion_level = 0, .verify = true, .disabled = on ? NULL : "remat"};
        CHECK_OK(musa_graph_optimize(g, &ctx));
        int exps = 0;
        for (int i = 0; i < musa_graph_num_nodes(g); i++) {
            const char *op = musa_graph_node_op(g, i);
            exps += op && !strcmp(op, "exp");
        }
        CHECK_MSG(exps == 1 + on, "%d exp nodes with remat %d", exps, on);
        musa_plan_options o = {.num_threads = 1, .memory_arena = true};
        musa_plan *p = musa_plan_build(g, &o);
        CHECK(run_same(p, x, ref));
        arena[on] = musa_plan_get_stats(p)->arena_bytes;
        musa_tensor_release(y), musa_tensor_release(m);
        musa_plan_free(p);
        musa_graph_free(g);
    }
    CHECK_MSG(arena[1] < arena[0], "arena %zu with remat, %zu without", arena[1], arena[0]);
    musa_tensor_release(ref), musa_tensor_release(x);
}

/* s = x @ x, then s = s + (x + k) @ x for k = 1..K-1: each product made
 * after the sum so far, as an LSTM sums its recurrent weight's gradient.
 * The adds joined one fused group that ran after the last product, every
 * product live at once (K of them); now the running sum is written as it
 * goes and the arena holds a few. */
#define N_PRODUCTS 12
static musa_tensor *product_sum(musa_tensor *x) {
    musa_temps t = {0};
    musa_tensor *s = musa_matmul(x, x);
    for (int k = 1; k < N_PRODUCTS && s; k++) {
        musa_tensor *y = musa_tmp(&t, musa_add(x, musa_tmp(&t, musa_number(k))));
        musa_tensor *next = musa_add(s, musa_tmp(&t, musa_matmul(y, x)));
        musa_tensor_release(s);
        s = next;
    }
    musa_temps_release(&t);
    return s;
}

TEST(fusion_does_not_hold_products_until_a_late_group) {
    useed(9);
    int64_t sh[2] = {64, 64};
    size_t product = 64 * 64 * sizeof(float);
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, sh, -1, 1, L_CONTIG);
    musa_tensor *ref = product_sum(x);
    musa_graph *g = NULL;
    musa_plan_options o = {.num_threads = 1, .memory_arena = true};
    musa_plan *p = jit_compile_unary(product_sum, x, 2, &o, &g);
    CHECK(p);
    if (p) {
        CHECK(run_same(p, x, ref));
        size_t arena = musa_plan_get_stats(p)->arena_bytes;
        CHECK_MSG(arena <= 4 * product, "arena %zu bytes: %.1f products", arena,
                  (double)arena / (double)product);
    }
    /* the graph gave back its tables' spare room once optimised */
    CHECK(g && g->nodes.cap == g->nodes.len && g->values.cap == g->values.len);
    musa_plan_free(p);
    musa_graph_free(g);
    musa_tensor_release(ref), musa_tensor_release(x);
}

TEST(c_api_refuses_null_and_bad_arguments) {
    CHECK(musa_graph_num_nodes(NULL) == 0 && musa_graph_node_op(NULL, 0) == NULL);
    CHECK(musa_graph_value_of(NULL, NULL) == -1 && musa_graph_output(NULL, 0) == -1);
    CHECK(!musa_graph_requires_grad(NULL) && !musa_graph_has_random(NULL));
    CHECK_ERR(musa_graph_verify(NULL) == MUSA_OK, MUSA_ERR_VALUE, "NULL");
    CHECK_ERR(musa_graph_text(NULL) != NULL, MUSA_ERR_VALUE, "NULL");
    CHECK_ERR(musa_graph_capture_begin(NULL, MUSA_CAPTURE_TRACE) == MUSA_OK, MUSA_ERR_VALUE,
              "NULL");
    CHECK_ERR(musa_graph_capture_end(NULL) == MUSA_OK, MUSA_ERR_RUNTIME, "no capture");
    CHECK_ERR(musa_graph_set_outputs(NULL, 1, NULL) == MUSA_OK, MUSA_ERR_VALUE, "NULL");
    CHECK_ERR(musa_plan_build(NULL, NULL) != NULL, MUSA_ERR_VALUE, "NULL");
    CHECK_ERR(musa_plan_run(NULL, 0, NULL, 0, NULL) == MUSA_OK, MUSA_ERR_VALUE, "NULL");
    CHECK_ERR(musa_graph_autodiff(NULL, 0, NULL, NULL, 0, NULL, NULL) == MUSA_OK, MUSA_ERR_RUNTIME,
              "NULL");
    int *c = NULL, nc = 0;
    CHECK_ERR(musa_graph_segment(NULL, 0, 0, 0, NULL, NULL, &c, &nc) != NULL, MUSA_ERR_VALUE,
              "NULL");
    musa_plan_free(NULL);
    musa_graph_free(NULL);
    CHECK(musa_plan_get_stats(NULL)->runs == 0);
    /* a graph that is still capturing cannot be planned or differentiated */
    musa_graph *g = musa_graph_new();
    CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_TRACE));
    CHECK_ERR(musa_plan_build(g, NULL) != NULL, MUSA_ERR_RUNTIME, "still capturing");
    CHECK_OK(musa_graph_capture_end(g));
    CHECK_ERR(musa_graph_add_symbol(g, "s", 5, 1, 3) >= 0, MUSA_ERR_VALUE, "range");
    CHECK_ERR(musa_graph_set_symbolic(g, 99, 0, 0) == MUSA_OK, MUSA_ERR_VALUE, "bad value");
    musa_graph_free(g);
}
