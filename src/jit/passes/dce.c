/*
 * dce.c - dead code elimination (pass "dce").
 *
 * The roots of liveness are the graph outputs, the values mutations write
 * back, and the values breaks read on the host. Nodes are walked backwards:
 * a node is live when one of its outputs is live, or when it draws random
 * numbers; a live node makes its inputs live. Every other node is marked
 * dead, and the node list is compacted (value ids do not change).
 *
 * Invariants:
 * - random nodes stay even when unused: each draw advances the generator,
 *   so dropping one would change the numbers later draws see, and the plan
 *   would no longer match eager;
 * - a view is live through its input, so a live view keeps the node that
 *   made its buffer;
 * - values (CONST and PARAM tensors included) are never removed.
 * ctx->changes counts the nodes this pass removed.
 */
#include "../graph.h"

static void mark_roots(const musa_graph *g, uint8_t *live) {
    for (int64_t i = 0; i < g->outputs.len; i++) live[g->outputs.data[i]] = 1;
    for (int64_t i = 0; i < g->mutations.len; i++) live[g->mutations.data[i].value] = 1;
    for (int64_t i = 0; i < g->breaks.len; i++) live[g->breaks.data[i].value] = 1;
}

static bool node_live(const musa_gnode *n, const uint8_t *live) {
    if (musa_ops[n->op].flags & MUSA_OPF_ORDERED) return true;
    for (int j = 0; j < n->n_out; j++)
        if (live[n->out[j]]) return true;
    return false;
}

int musa_pass_dce(musa_graph *g, musa_pass_ctx *ctx) {
    if (!g) return musa_err(MUSA_ERR_VALUE, "[dce] graph is NULL");
    int64_t nv = g->values.len;
    uint8_t *live = musa_calloc((size_t)(nv ? nv : 1), 1, "dce");
    if (!live) return MUSA_ERR_NOMEM;
    mark_roots(g, live);
    int removed = 0;
    for (int64_t i = g->nodes.len - 1; i >= 0; i--) {
        musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        if (!node_live(n, live)) {
            n->dead = true;
            removed++;
            continue;
        }
        for (int k = 0; k < n->n_in; k++) live[n->in[k]] = 1;
    }
    free(live);
    musa_graph_compact(g);
    musa_graph_analyse(g);
    if (ctx) ctx->changes += removed;
    return MUSA_OK;
}
