/*
 * interp.c - running a graph through the dispatcher, node by node, on real
 * tensors: eager semantics, autograd included. Compiled training uses it for
 * gradients with create_graph (the replay records the tape that higher-order
 * gradients need); it is also the reference a plan must agree with.
 *
 * Invariants: nodes run out of place in order (the graph is SSA; mutations
 * are not written back), parameters and constants are the graph's own
 * tensors, so the tape reaches the parameters that require grad.
 */
#include "graph.h"

#include <stdio.h>

int musa_graph_run_eager(const musa_graph *g, int n_in, musa_tensor *const *inputs, int n_req,
                         const int *values, musa_tensor **out) {
    if (!g || (n_in && !inputs) || (n_req && (!values || !out)))
        return musa_err(MUSA_ERR_VALUE, "[jit] run_eager: bad arguments");
    if (n_in != g->inputs.len)
        return musa_err(MUSA_ERR_VALUE, "[jit] run_eager: the graph takes %lld inputs, got %d",
                        (long long)g->inputs.len, n_in);
    for (int k = 0; k < n_req; k++) {
        out[k] = NULL;
        if (values[k] < 0 || values[k] >= g->values.len)
            return musa_err(MUSA_ERR_VALUE, "[jit] run_eager: %d is not a value", values[k]);
    }
    int64_t nv = g->values.len;
    musa_tensor **env = musa_calloc((size_t)(nv ? nv : 1), sizeof *env, "run_eager");
    if (!env) return MUSA_ERR_NOMEM;
    int rc = MUSA_OK;
    for (int i = 0; i < n_in; i++) env[g->inputs.data[i]] = musa_tensor_retain(inputs[i]);
    for (int64_t v = 0; v < nv; v++)
        if (g->values.data[v].tensor) env[v] = musa_tensor_retain(g->values.data[v].tensor);
    for (int64_t i = 0; i < g->nodes.len && !rc; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        musa_tensor *ins_buf[8], **ins = ins_buf, *outs[MUSA_MAX_OUTPUTS] = {0};
        if (n->n_in > 8 && !(ins = musa_malloc(sizeof *ins * (size_t)n->n_in, "run_eager"))) {
            rc = MUSA_ERR_NOMEM;
            break;
        }
        for (int k = 0; k < n->n_in; k++) ins[k] = env[n->in[k]];
        rc = musa_dispatch((musa_op_id)n->op, n->n_in, ins, n->attrs, outs);
        if (ins != ins_buf) free(ins);
        for (int j = 0; j < n->n_out; j++) {
            if (!rc)
                env[n->out[j]] = outs[j];
            else
                musa_tensor_release(outs[j]);
        }
        if (rc && n->loc) {
            char msg[900];
            snprintf(msg, sizeof msg, "%s", musa_last_error());
            rc = musa_err(rc, "%s (recorded at %s)", msg, n->loc);
        }
    }
    for (int k = 0; k < n_req && !rc; k++) {
        if (!env[values[k]]) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit] run_eager: value %%%d is never computed",
                          values[k]);
            break;
        }
        out[k] = musa_tensor_retain(env[values[k]]);
    }
    if (rc)
        for (int k = 0; k < n_req; k++) musa_tensor_release(out[k]), out[k] = NULL;
    for (int64_t v = 0; v < nv; v++) musa_tensor_release(env[v]);
    free(env);
    return rc;
}
