/* Optimizer updates in plans: consecutive update nodes of one op with equal
 * attributes, none reading what another writes, become one multi-tensor
 * instruction; other updates stay apart; compiled updates are bitwise the
 * eager ones, row by row. */
#include "harness.h"
#include "jit/graph.h"
#include "jit/plan.h"
#include "util.h"

/* Bitwise equality of two contiguous tensors of one dtype and shape. */
static bool same_bytes(const musa_tensor *a, const musa_tensor *b) {
    size_t n = (size_t)musa_tensor_numel(a) * musa_dtype_size(musa_tensor_dtype(a));
    return musa_tensor_numel(a) == musa_tensor_numel(b) &&
           musa_tensor_dtype(a) == musa_tensor_dtype(b) &&
           (n == 0 || !memcmp(musa_tensor_data(a), musa_tensor_data(b), n));
}

#define N_PARAMS 8

/* Parameter sizes: 1 element, above the kernels' grain (16,384), empty, ... */
static const int64_t SIZES[N_PARAMS] = {1, 40000, 1, 33, 700, 700, 0, 64};

/* The rows of a step (param, buffer, grad, lr), as the capture calls them:
 * one musa_update_multi per set of attributes, in this order:
 *   momentum 0.9: rows 0-3; row 2's gradient is param 0 (just updated by
 *                 row 0, so row 2 cannot run with rows 0 and 1);
 *   momentum 0.5: rows 4-6; row 4's gradient is param 5 before row 5
 *                 updates it (they run together; param 5's new value then
 *                 goes to a buffer and is written back after the plan);
 *   momentum 0.9: row 7 alone.
 * Param 1 is float64 (a run may mix dtypes); param 6 is empty. */
typedef struct step_rows {
    musa_tensor *p[N_PARAMS], *buf[N_PARAMS], *lr;
} step_rows;

static int grad_of(int r) {
    return r == 2 ? -1 : r == 4 ? -2 : r; /* -1: param 0, -2: param 5 */
}

static int run_step(step_rows *s, musa_tensor *const *g, musa_attrs *m9, musa_attrs *m5,
                    bool multi) {
    int op = musa_op_lookup("sgd_update");
    musa_tensor *rows[N_PARAMS * 4];
    for (int r = 0; r < N_PARAMS; r++) {
        musa_tensor **row = rows + r * 4;
        row[0] = s->p[r], row[1] = s->buf[r];
        row[2] = grad_of(r) == -1 ? s->p[0] : grad_of(r) == -2 ? s->p[5] : g[r];
        row[3] = s->lr;
    }
    const int first[3] = {0, 4, 7}, count[3] = {4, 3, 1};
    for (int k = 0; k < 3; k++) {
        musa_attrs *at = k == 1 ? m5 : m9;
        int rc;
        if (multi) {
            rc = musa_update_multi(op, at, count[k], 4, rows + first[k] * 4);
        } else {
            for (int r = first[k]; r < first[k] + count[k]; r++) {
                musa_tensor *outs[6] = {rows[r * 4], rows[r * 4 + 1]};
                if ((rc = musa_op_call(op, 4, rows + r * 4, at, outs))) return rc;
            }
            rc = MUSA_OK;
        }
        if (rc) return rc;
    }
    return MUSA_OK;
}

static void rows_new(step_rows *s) {
    for (int r = 0; r < N_PARAMS; r++) {
        musa_dtype dt = r == 1 ? MUSA_DTYPE_FLOAT64 : MUSA_DTYPE_FLOAT32;
        s->p[r] = rnd(dt, 1, &SIZES[r], -1, 1, L_CONTIG);
        s->buf[r] = rnd(dt, 1, &SIZES[r], -1, 1, L_CONTIG);
    }
    s->lr = musa_full(0, NULL, 0.05, MUSA_DTYPE_FLOAT64);
}

static void rows_clone(step_rows *d, const step_rows *s) {
    for (int r = 0; r < N_PARAMS; r++)
        d->p[r] = musa_clone(s->p[r]), d->buf[r] = musa_clone(s->buf[r]);
    d->lr = musa_clone(s->lr);
}

static void rows_free(step_rows *s) {
    for (int r = 0; r < N_PARAMS; r++) musa_tensor_release(s->p[r]), musa_tensor_release(s->buf[r]);
    musa_tensor_release(s->lr);
}

TEST(update_runs_become_multi_tensor_instructions_bitwise_eager) {
    useed(11);
    int op = musa_op_lookup("sgd_update");
    musa_attrs *m9 = musa_attrs_new(op), *m5 = musa_attrs_new(op);
    CHECK_OK(musa_attrs_set_number(m9, "momentum", 0.9));
    CHECK_OK(musa_attrs_set_number(m5, "momentum", 0.5));
    CHECK_OK(musa_attrs_set_number(m5, "weight_decay", 0.01));
    step_rows c, e; /* compiled, eager */
    rows_new(&c);
    rows_clone(&e, &c);
    /* capture one step symbolically: the gradients are the graph's inputs */
    musa_graph *g = musa_graph_new();
    musa_tensor *gm[N_PARAMS];
    CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC));
    for (int r = 0; r < N_PARAMS; r++) {
        gm[r] = musa_empty_meta(musa_tensor_dtype(c.p[r]), 1, &SIZES[r]);
        CHECK_OK(musa_graph_add_input(g, gm[r], "g"));
    }
    CHECK_MSG(run_step(&c, gm, m9, m5, true) == MUSA_OK, "%s", musa_last_error());
    CHECK_OK(musa_graph_set_outputs(g, 0, NULL));
    CHECK_OK(musa_graph_capture_end(g));
    musa_pass_ctx ctx = {.fusion_level = 1, .verify = true};
    CHECK_OK(musa_graph_optimize(g, &ctx));
    for (int threads = 1; threads <= 2; threads++) {
        musa_plan_options opt = {.num_threads = threads, .memory_arena = true};
        musa_plan *p = musa_plan_build(g, &opt);
        CHECK(p);
        /* rows 0-1, rows 2-3 (row 2 reads row 0's new param), rows 4-6 (other
         * attributes); row 7 alone is a kernel */
        const musa_plan_stats *st = musa_plan_get_stats(p);
        CHECK_MSG(st->multi_updates == 3 && st->multi_nodes == 7 && st->kernels == 1,
                  "multi %d (%d nodes), kernels %d", st->multi_updates, st->multi_nodes,
                  st->kernels);
        char *text = musa_plan_text(p);
        CHECK_MSG(strstr(text, "multi[sgd_update x2, 40001 elements]") &&
                      strstr(text, "multi[sgd_update x2, 34 elements]") &&
                      strstr(text, "multi[sgd_update x3, 1400 elements]"),
                  "%s", text);
        free(text);
        /* every parameter and buffer is updated in place but param 5 */
        CHECK_MSG(st->inplace == 2 * N_PARAMS - 1, "%d in place", st->inplace);
        for (int step = 0; step < 2; step++) {
            musa_tensor *grads[N_PARAMS];
            for (int r = 0; r < N_PARAMS; r++)
                grads[r] = rnd(musa_tensor_dtype(c.p[r]), 1, &SIZES[r], -1, 1, L_CONTIG);
            CHECK_MSG(musa_plan_run(p, N_PARAMS, grads, 0, NULL) == MUSA_OK, "%s",
                      musa_last_error());
            CHECK_OK(run_step(&e, grads, m9, m5, false));
            for (int r = 0; r < N_PARAMS; r++) {
                CHECK_MSG(same_bytes(c.p[r], e.p[r]) && same_bytes(c.buf[r], e.buf[r]),
                          "%d threads, step %d: row %d differs from eager", threads, step, r);
                musa_tensor_release(grads[r]);
            }
        }
        musa_plan_free(p);
    }
    musa_graph_free(g);
    for (int r = 0; r < N_PARAMS; r++) musa_tensor_release(gm[r]);
    rows_free(&c), rows_free(&e);
    musa_attrs_free(m9), musa_attrs_free(m5);
}
