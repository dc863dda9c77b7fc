/* Float32 elementwise groups run in registers (backend/cpu/chain.h): the
 * same bits as eager for every operation a chain knows, scalars on either
 * side, spilled and stored intermediates, tails and streamed outputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "jit/graph.h"
#include "jit/plan.h"
#include "util.h"

#define NUM(v) musa_tmp(&t, musa_number(v))

/* Two outputs of x and w (same shape), every kind of chain instruction:
 * a is written out and read again later (stored and spilled), 2 - a and
 * 1.5 / e take the scalar on the left, w and tanh(x) are loaded in the
 * middle, maximum, copysign and the general pow run block functions, x ** 2
 * and x ** 3 the register powers, and z * -0.0 needs the scalar's sign. */
static void chain_fn(musa_tensor *x, musa_tensor *w, musa_tensor **y) {
    musa_temps t = {0};
    musa_tensor *a = musa_mul(x, NUM(3));
    musa_tensor *b = musa_tmp(&t, musa_sub(NUM(2), a));
    musa_tensor *c = musa_tmp(&t, musa_div(b, w));
    musa_tensor *d = musa_tmp(&t, musa_maximum(c, x));
    musa_tensor *e = musa_tmp(&t, musa_pow(d, NUM(2)));
    musa_tensor *f = musa_tmp(&t, musa_sigmoid(musa_tmp(&t, musa_div(NUM(1.5), e))));
    musa_tensor *h = musa_tmp(&t, musa_tanh(x));
    musa_tensor *k = musa_tmp(&t, musa_mul(f, h));
    musa_tensor *m = musa_tmp(&t, musa_sub(k, a));
    musa_tensor *p = musa_tmp(&t, musa_pow(musa_tmp(&t, musa_abs(m)), NUM(1.7)));
    musa_tensor *q = musa_tmp(&t, musa_add(musa_tmp(&t, musa_pow(w, NUM(3))), p));
    musa_tensor *r = musa_tmp(&t, musa_copysign(q, m));
    musa_tensor *z = musa_tmp(&t, musa_mul(musa_tmp(&t, musa_exp(r)), NUM(-0.0)));
    y[0] = a;
    y[1] = musa_add(musa_tmp(&t, musa_minimum(z, r)), musa_tmp(&t, musa_neg(z)));
    musa_temps_release(&t);
}

/* The same bits, any NaN equal to any NaN (as the jit fuzzer compares): an
 * operation on two NaNs returns one of them, which one depending on the
 * order its instruction takes them in, in eager's loops as in a chain. */
static bool same_bits(const musa_tensor *a, const musa_tensor *b) {
    if (!a || !b || musa_tensor_numel(a) != musa_tensor_numel(b)) return false;
    const float *x = musa_tensor_data(a), *y = musa_tensor_data(b);
    for (int64_t i = 0; i < musa_tensor_numel(a); i++)
        if (memcmp(&x[i], &y[i], sizeof(float)) && !(isnan(x[i]) && isnan(y[i]))) return false;
    return true;
}

/* Builds the plan of chain_fn for x's shape (fusion level 1). */
static musa_plan *build(const musa_tensor *x, musa_graph **gout) {
    musa_graph *g = musa_graph_new();
    musa_tensor *mx = musa_empty_meta(MUSA_DTYPE_FLOAT32, x->ndim, x->shape);
    musa_tensor *mw = musa_empty_meta(MUSA_DTYPE_FLOAT32, x->ndim, x->shape);
    musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC);
    musa_graph_add_input(g, mx, "x");
    musa_graph_add_input(g, mw, "w");
    musa_tensor *y[2] = {NULL, NULL};
    chain_fn(mx, mw, y);
    if (y[0] && y[1]) musa_graph_set_outputs(g, 2, y);
    int rc = musa_graph_capture_end(g);
    musa_tensor_release(y[0]), musa_tensor_release(y[1]);
    musa_tensor_release(mx), musa_tensor_release(mw);
    musa_pass_ctx ctx = {.fusion_level = 1, .verify = true};
    if (rc || musa_graph_optimize(g, &ctx)) {
        musa_graph_free(g);
        return NULL;
    }
    *gout = g;
    return musa_plan_build(g, NULL);
}

/* x with the values that take functions' special paths in its first lanes */
static musa_tensor *input(int64_t n, double lo, double hi) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 1, &n, lo, hi, L_CONTIG);
    const float special[] = {NAN,    INFINITY, -INFINITY, 0.0f,    -0.0f,
                             1e-40f, -1e-40f,  88.0f,     -100.0f, 1e30f};
    float *d = musa_tensor_data(x);
    for (int64_t i = 0; i < n && i < (int64_t)(sizeof special / sizeof special[0]); i++)
        d[(i * 7) % n] = special[i];
    return x;
}

/* A run of p on (x, w) gives ref's bits. */
static bool runs_to(musa_plan *p, musa_tensor *x, musa_tensor *w, musa_tensor **ref) {
    musa_tensor *in[2] = {x, w}, *out[2] = {NULL, NULL};
    bool ok = musa_plan_run(p, 2, in, 2, out) == MUSA_OK && same_bits(out[0], ref[0]) &&
              same_bits(out[1], ref[1]);
    release_all(2, out[0], out[1]);
    return ok;
}

/* Frees what a test made: the plan, its graph, the references and inputs. */
static void release_case(musa_plan *p, musa_graph *g, musa_tensor **ref, musa_tensor *x,
                         musa_tensor *w) {
    musa_plan_free(p);
    musa_graph_free(g);
    release_all(4, ref[0], ref[1], x, w);
}

TEST(chains_run_every_member_kind_bitwise_eager) {
    useed(11);
    /* tails of every length class; 3M floats (12 MB) streams its outputs */
    const int64_t sizes[] = {2, 5, 127, 128, 129, 1000, 100003, 3 << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        musa_tensor *x = input(n, -3, 3), *w = input(n, 0.5, 2), *ref[2] = {NULL, NULL};
        chain_fn(x, w, ref);
        musa_graph *g = NULL;
        musa_plan *p = build(x, &g);
        CHECK(p);
        if (!p) break;
        char *text = musa_plan_text(p);
        CHECK_MSG(musa_plan_get_stats(p)->chains == 1, "n %lld: %d chains\n%s", (long long)n,
                  musa_plan_get_stats(p)->chains, text ? text : "");
        free(text);
        for (int run = 0; run < 2; run++) /* the second run reuses the resolved program */
            CHECK_MSG(runs_to(p, x, w, ref), "n %lld run %d", (long long)n, run);
        release_case(p, g, ref, x, w);
    }
}

/* MUSA_NO_CHAIN=1 keeps the tiles (benchmarks compare the two): the same bits. */
TEST(no_chain_switch_runs_tiles_with_the_same_bits) {
    useed(12);
    int64_t n = 4099;
    musa_tensor *x = input(n, -3, 3), *w = input(n, 0.5, 2), *ref[2] = {NULL, NULL};
    chain_fn(x, w, ref);
    setenv("MUSA_NO_CHAIN", "1", 1);
    musa_graph *g = NULL;
    musa_plan *p = build(x, &g);
    unsetenv("MUSA_NO_CHAIN");
    CHECK(p && musa_plan_get_stats(p)->chains == 0 && musa_plan_get_stats(p)->fused_groups >= 1);
    CHECK(p && runs_to(p, x, w, ref));
    release_case(p, g, ref, x, w);
}

/* A float64 group, or an int member, keeps its tiles. */
TEST(chains_take_float32_groups_only) {
    int64_t n = 1000;
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 1, &n, -1, 1, L_CONTIG);
    musa_graph *g = musa_graph_new();
    musa_tensor *m = musa_empty_meta(MUSA_DTYPE_FLOAT64, 1, &n);
    musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC);
    musa_graph_add_input(g, m, "x");
    musa_temps t = {0};
    musa_tensor *y = musa_mul(musa_tmp(&t, musa_tanh(m)), NUM(2));
    musa_temps_release(&t);
    musa_graph_set_outputs(g, 1, &y);
    CHECK_OK(musa_graph_capture_end(g));
    musa_pass_ctx ctx = {.fusion_level = 1, .verify = true};
    CHECK_OK(musa_graph_optimize(g, &ctx));
    musa_plan *p = musa_plan_build(g, NULL);
    CHECK(p && musa_plan_get_stats(p)->fused_groups == 1 && musa_plan_get_stats(p)->chains == 0);
    musa_plan_free(p);
    musa_graph_free(g);
    musa_tensor_release(y), musa_tensor_release(m), musa_tensor_release(x);
}
