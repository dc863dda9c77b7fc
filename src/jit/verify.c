/*
 * verify.c - the IR verifier: structure, order, and every live node against
 * its op's own inference.
 *
 * It checks that params and consts hold tensors, roots are roots, graph
 * inputs are INPUT values, every node has its op's arity and reads only
 * values defined before it, every output is defined once by its producer,
 * outputs and mutations refer to defined values, and that re-running the
 * op's inference gives the recorded dtypes and shapes. The graph is left as
 * it was: inference writes into output values, which are restored.
 */
#include "graph.h"

int musa_graph_verify(const musa_graph *g) {
    if (!g) return musa_err(MUSA_ERR_VALUE, "[jit verify] graph is NULL");
    int64_t nv = g->values.len;
    char *defined = musa_calloc((size_t)(nv ? nv : 1), 1, "verify");
    if (!defined) return MUSA_ERR_NOMEM;
    int rc = MUSA_OK;
    for (int64_t i = 0; i < nv; i++) {
        const musa_gvalue *v = &g->values.data[i];
        if (v->kind != MUSA_V_NODE) defined[i] = 1;
        if ((v->kind == MUSA_V_PARAM || v->kind == MUSA_V_CONST) && !v->tensor) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit verify] %%%lld is a %s without a tensor",
                          (long long)i, v->kind == MUSA_V_PARAM ? "param" : "const");
            goto done;
        }
        if (v->root < 0 || v->root >= nv || g->values.data[v->root].root != v->root) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit verify] %%%lld has a bad root %d", (long long)i,
                          v->root);
            goto done;
        }
    }
    for (int64_t i = 0; i < g->inputs.len; i++)
        if (g->values.data[g->inputs.data[i]].kind != MUSA_V_INPUT) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit verify] input %lld is not an input value",
                          (long long)i);
            goto done;
        }
    for (int64_t i = 0; i < g->nodes.len; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        const musa_op_info *info = &musa_ops[n->op];
        /* n_out -1 (update rows): inference sets it per call, checked below */
        bool n_out_ok = info->n_out >= 0 ? n->n_out == info->n_out
                                         : n->n_out >= 1 && n->n_out <= MUSA_MAX_OUTPUTS;
        if (n->op < 0 || n->op >= MUSA_OP_COUNT || !n_out_ok ||
            (info->n_in >= 0 && n->n_in != info->n_in)) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit verify] node %lld (%s) has a bad arity",
                          (long long)i, info->name);
            goto done;
        }
        for (int k = 0; k < n->n_in; k++) {
            if (n->in[k] < 0 || n->in[k] >= nv || !defined[n->in[k]]) {
                rc = musa_err(MUSA_ERR_RUNTIME,
                              "[jit verify] node %lld (%s) reads %%%d before it is defined",
                              (long long)i, info->name, n->in[k]);
                goto done;
            }
        }
        /* The op's own inference must agree with the recorded outputs. */
        musa_gvalue saved[MUSA_MAX_OUTPUTS];
        for (int j = 0; j < n->n_out; j++) saved[j] = g->values.data[n->out[j]];
        musa_gnode copy = *n;
        musa_attrs_any own;
        musa_gnode_private_attrs(&copy, &own);
        int r2 = musa_graph_infer_into((musa_graph *)g, &copy, NULL);
        bool same = r2 == MUSA_OK;
        for (int j = 0; j < n->n_out; j++) {
            musa_gvalue *v = &g->values.data[n->out[j]];
            if (same && (v->dtype != saved[j].dtype ||
                         !musa_shape_equal(v->ndim, v->shape, saved[j].ndim, saved[j].shape)))
                same = false;
            *v = saved[j];
        }
        if (!same) {
            if (r2 == MUSA_OK)
                rc = musa_err(MUSA_ERR_RUNTIME,
                              "[jit verify] node %lld (%s): outputs disagree with the op's "
                              "inference",
                              (long long)i, info->name);
            else
                rc = musa_err(r2, "[jit verify] node %lld (%s): %s", (long long)i, info->name,
                              musa_last_error());
            goto done;
        }
        for (int j = 0; j < n->n_out; j++) {
            int32_t o = n->out[j];
            if (o < 0 || o >= nv || defined[o] || g->values.data[o].producer != (int32_t)i) {
                rc = musa_err(MUSA_ERR_RUNTIME,
                              "[jit verify] node %lld (%s) output %d is defined twice or has "
                              "another producer",
                              (long long)i, info->name, j);
                goto done;
            }
            defined[o] = 1;
        }
    }
    for (int64_t i = 0; i < g->outputs.len; i++)
        if (!defined[g->outputs.data[i]]) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit verify] output %lld (%%%d) is never defined",
                          (long long)i, g->outputs.data[i]);
            goto done;
        }
    for (int64_t i = 0; i < g->mutations.len; i++) {
        const musa_gmutation *m = &g->mutations.data[i];
        if (!defined[m->value] || m->target < 0 || m->target >= nv ||
            (g->values.data[m->target].kind != MUSA_V_INPUT &&
             g->values.data[m->target].kind != MUSA_V_PARAM)) {
            rc =
                musa_err(MUSA_ERR_RUNTIME, "[jit verify] mutation %lld is malformed", (long long)i);
            goto done;
        }
    }
done:
    free(defined);
    return rc;
}
