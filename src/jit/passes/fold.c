/*
 * fold.c - constant folding (pass "fold").
 *
 * A live node whose inputs are all constants (CONST values: parameters are
 * bound by reference and may change between runs, so they never count), or
 * a creation op without inputs, is run now by the eager dispatcher, and its
 * outputs become CONST values. The node dies; its inputs stay as values.
 *
 * Invariants:
 * - random ops are never folded (the plan must draw from the generator);
 * - a non-view node is folded only when its outputs hold at most
 *   FOLD_MAX_NUMEL elements in all; a view of a constant shares the
 *   constant's storage and costs nothing, so views fold at any size;
 * - a node whose outputs nothing uses is left for dce;
 * - the dispatcher runs in eager mode, with no recorder and no autograd,
 *   whatever this thread is capturing; the thread's state is restored;
 * - folded constants are real tensors, never wrapped numbers (the
 *   dispatcher settled every dtype while capturing, so a folded
 *   cast(number) is simply a constant of the cast's dtype);
 * - a failed evaluation leaves the node as it was (its error is cleared);
 * - nodes are visited in order, so a chain of constant nodes folds in one
 *   sweep, and a view whose input was replaced re-derives its root first.
 * ctx->changes counts folded nodes.
 */
#include "../graph.h"

#define FOLD_MAX_NUMEL ((int64_t)1 << 16)

static bool is_const(const musa_graph *g, int32_t v) {
    const musa_gvalue *x = &g->values.data[v];
    return x->kind == MUSA_V_CONST && x->tensor && x->tensor->storage;
}

/* Elements in node n's outputs, or -1 on overflow. */
static int64_t out_numel(const musa_graph *g, const musa_gnode *n) {
    int64_t total = 0;
    for (int j = 0; j < n->n_out; j++) {
        const musa_gvalue *v = &g->values.data[n->out[j]];
        int64_t m = 1;
        for (int d = 0; d < v->ndim; d++)
            if (!musa_mul_i64(m, v->shape[d], &m)) return -1;
        if (!musa_add_i64(total, m, &total)) return -1;
    }
    return total;
}

static bool used(const musa_graph *g, const musa_gnode *n) {
    for (int j = 0; j < n->n_out; j++)
        if (g->values.data[n->out[j]].uses > 0) return true;
    return false;
}

static bool foldable(const musa_graph *g, const musa_gnode *n) {
    uint32_t f = musa_ops[n->op].flags;
    if (f & MUSA_OPF_ORDERED) return false;
    if (n->n_in == 0 && !(f & MUSA_OPF_CREATION)) return false;
    for (int k = 0; k < n->n_in; k++)
        if (!is_const(g, n->in[k])) return false;
    if (f & MUSA_OPF_VIEW) return true;
    int64_t total = out_numel(g, n);
    return total >= 0 && total <= FOLD_MAX_NUMEL;
}

/* Run node n eagerly on its constants' tensors. On success outs[] hold new
 * references (true); on failure they are NULL and the error is cleared. */
static bool evaluate(const musa_graph *g, const musa_gnode *n, musa_tensor **outs) {
    musa_tensor *buf[8], **ins = buf;
    if (n->n_in > 8 && !(ins = musa_calloc((size_t)n->n_in, sizeof *ins, "fold"))) {
        musa_clear_error();
        return false;
    }
    for (int k = 0; k < n->n_in; k++) ins[k] = g->values.data[n->in[k]].tensor;
    musa_tls_state saved = musa_tls;
    musa_tls.mode = MUSA_MODE_EAGER;
    musa_tls.recorder = NULL;
    musa_tls.grad_disabled = true;
    int rc = musa_dispatch((musa_op_id)n->op, n->n_in, ins, n->attrs, outs);
    musa_tls = saved;
    if (ins != buf) free(ins);
    if (rc == MUSA_OK) return true;
    for (int j = 0; j < MUSA_MAX_OUTPUTS; j++) {
        musa_tensor_release(outs[j]);
        outs[j] = NULL;
    }
    musa_clear_error();
    return false;
}

/* Whether eager results match the recorded outputs (they should; a
 * mismatch leaves the node alone rather than change a consumer's input). */
static bool results_match(const musa_graph *g, const musa_gnode *n, musa_tensor *const *outs) {
    for (int j = 0; j < n->n_out; j++) {
        const musa_gvalue *v = &g->values.data[n->out[j]];
        if (!outs[j] || outs[j]->dtype != v->dtype ||
            !musa_shape_equal(outs[j]->ndim, outs[j]->shape, v->ndim, v->shape))
            return false;
    }
    return true;
}

/* Fold node i: 1 when folded, 0 when left alone, or MUSA_ERR_NOMEM (set)
 * when a constant could not be added. */
static int fold_node(musa_graph *g, int32_t i) {
    musa_tensor *outs[MUSA_MAX_OUTPUTS] = {NULL};
    int32_t consts[MUSA_MAX_OUTPUTS] = {0};
    const musa_gnode *n = &g->nodes.data[i]; /* nodes do not move here; values may */
    int rc = 0;
    if (!evaluate(g, n, outs) || !results_match(g, n, outs)) goto done;
    for (int j = 0; j < n->n_out; j++) {
        outs[j]->flags &= (uint8_t)~MUSA_TF_NUMBER;
        if ((consts[j] = musa_graph_const(g, outs[j])) < 0) {
            rc = MUSA_ERR_NOMEM;
            goto done;
        }
        g->values.data[consts[j]].loc = n->loc;
    }
    /* All constants exist before any use moves: a failure above changes
     * nothing a consumer sees. */
    for (int j = 0; j < n->n_out; j++) musa_graph_replace_uses(g, n->out[j], consts[j]);
    g->nodes.data[i].dead = true;
    rc = 1;
done:
    for (int j = 0; j < MUSA_MAX_OUTPUTS; j++) musa_tensor_release(outs[j]);
    return rc;
}

int musa_pass_fold(musa_graph *g, musa_pass_ctx *ctx) {
    if (!g) return musa_err(MUSA_ERR_VALUE, "[fold] graph is NULL");
    musa_graph_analyse(g); /* use counts: a fold moves uses only off dead nodes */
    int folded = 0;
    for (int64_t i = 0; i < g->nodes.len; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        int rc = musa_graph_refresh_view(g, (int32_t)i);
        if (rc) return rc;
        if (!used(g, n) || !foldable(g, n)) continue;
        if ((rc = fold_node(g, (int32_t)i)) < 0) return rc;
        folded += rc;
    }
    if (folded) musa_graph_analyse(g);
    if (ctx) ctx->changes += folded;
    return MUSA_OK;
}
