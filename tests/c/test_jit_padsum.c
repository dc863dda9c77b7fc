/* Pass "padsum": sums of zero pads (a split's gradient) become cats with
 * eager's bits, signed zeros included. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "jit/graph.h"
#include "jit/plan.h"
#include "util.h"

/* How many live nodes of g run op. */
static int count_op(const musa_graph *g, const char *op) {
    int n = 0;
    for (int i = 0; g && i < musa_graph_num_nodes(g); i++) {
        const char *o = musa_graph_node_op(g, i);
        n += o && !strcmp(o, op);
    }
    return n;
}

/* A GRU's gate gradients: pieces of (rows, 12) along dim 1, each zero-padded
 * to the whole and summed, twice (the second sum shares two of the pads,
 * and leaves the first 4 columns zero). */
static musa_tensor *pad_sums(musa_tensor *x) {
    musa_temps t = {0};
    musa_tensor *a = musa_tmp(&t, musa_mul(x, musa_tmp(&t, musa_number(-1))));
    musa_tensor *b = musa_tmp(&t, musa_tanh(x)), *c = musa_tmp(&t, musa_exp(x));
    int64_t pa[2] = {0, 8}, pb[2] = {4, 4}, pc[2] = {8, 0};
    musa_tensor *ppa = musa_tmp(&t, musa_pad(a, 2, pa, 0));
    musa_tensor *ppb = musa_tmp(&t, musa_pad(b, 2, pb, 0));
    musa_tensor *ppc = musa_tmp(&t, musa_pad(c, 2, pc, 0));
    musa_tensor *s1 = musa_tmp(&t, musa_add(musa_tmp(&t, musa_add(ppc, ppa)), ppb));
    musa_tensor *s2 = musa_tmp(&t, musa_add(ppc, ppb));
    musa_tensor *y = musa_mul(s1, s2);
    musa_temps_release(&t);
    return y;
}

TEST(sums_of_zero_pads_become_cats_with_eager_bits) {
    int64_t sh[2] = {6, 4};
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, sh, -2, 2, L_CONTIG);
    float *d = musa_tensor_data(x);
    d[0] = -0.0f, d[5] = 0.0f, d[6] = NAN; /* -x of +0.0 is -0.0: the sum makes it +0.0 */
    musa_tensor *ref = pad_sums(x);
    musa_graph *g = NULL;
    musa_plan *p = jit_compile_unary(pad_sums, x, 0, NULL, &g);
    CHECK(p);
    int pads = count_op(g, "pad"), cats = count_op(g, "cat");
    CHECK_MSG(cats == 2 && pads == 1, "%d cats, %d pads", cats, pads); /* s2 keeps its left edge */
    musa_tensor *out = NULL;
    CHECK(p && musa_plan_run(p, 1, &x, 1, &out) == MUSA_OK);
    CHECK(out && ref &&
          !memcmp(musa_tensor_data(out), musa_tensor_data(ref), 6 * 12 * sizeof(float)));
    release_all(3, out, ref, x);
    musa_plan_free(p);
    musa_graph_free(g);
}

/* An RNN's input-projection gradient: each step's gate sum (as pad_sums)
 * padded into the whole sequence along dim 0, and the steps summed. */
#define N_STEPS 5
static musa_tensor *sequence_sum(musa_tensor *x) { /* x: (N_STEPS, 4, 4) */
    musa_tensor *total = NULL;
    for (int s = 0; s < N_STEPS; s++) {
        musa_temps t = {0};
        musa_tensor *xs = musa_tmp(&t, musa_select(x, 0, s));
        musa_tensor *a = musa_tmp(&t, musa_mul(xs, musa_tmp(&t, musa_number(-1))));
        int64_t pa[2] = {0, 8}, pb[2] = {4, 4}, pc[2] = {8, 0};
        musa_tensor *gate = musa_tmp(
            &t, musa_add(musa_tmp(&t, musa_add(musa_tmp(&t, musa_pad(a, 2, pa, 0)),
                                               musa_tmp(&t, musa_pad(musa_tmp(&t, musa_tanh(xs)), 2,
                                                                     pb, 0)))),
                         musa_tmp(&t, musa_pad(musa_tmp(&t, musa_exp(xs)), 2, pc, 0))));
        int64_t pt[6] = {0, 0, 0, 0, s, N_STEPS - 1 - s};
        musa_tensor *step = musa_tmp(&t, musa_pad(musa_tmp(&t, musa_unsqueeze(gate, 0)), 6, pt, 0));
        musa_tensor *next = total ? musa_add(total, step) : musa_tensor_retain(step);
        musa_tensor_release(total);
        total = next;
        musa_temps_release(&t);
    }
    musa_tensor *two = musa_number(2), *y = musa_mul(total, two);
    release_all(2, two, total);
    return y;
}

TEST(a_sum_of_cats_needs_no_second_add_of_zero) {
    int64_t sh[3] = {N_STEPS, 4, 4};
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 3, sh, -2, 2, L_CONTIG);
    ((float *)musa_tensor_data(x))[1] = 0.0f; /* -x: -0.0 */
    musa_tensor *ref = sequence_sum(x);
    musa_graph *g = NULL;
    musa_plan *p = jit_compile_unary(sequence_sum, x, 0, NULL, &g);
    CHECK(p);
    int pads = count_op(g, "pad"), cats = count_op(g, "cat"), adds = count_op(g, "add");
    /* a cat per step and one for the sequence; +0.0 for the steps' pieces only */
    CHECK_MSG(pads == 0 && cats == N_STEPS + 1 && adds == 3 * N_STEPS, "%d pads, %d cats, %d adds",
              pads, cats, adds);
    musa_tensor *out = NULL;
    CHECK(p && musa_plan_run(p, 1, &x, 1, &out) == MUSA_OK);
    CHECK(out && ref &&
          !memcmp(musa_tensor_data(out), musa_tensor_data(ref), N_STEPS * 4 * 12 * sizeof(float)));
    release_all(3, out, ref, x);
    musa_plan_free(p);
    musa_graph_free(g);
}
