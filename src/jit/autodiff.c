/*
 * autodiff.c - static autodiff: the backward graph, built by running the op
 * table's backward formulas (the same ones eager autograd runs) in symbolic
 * mode with this graph as the recorder.
 *
 * For each node, last to first, that has a gradient for one of its outputs
 * and an input that depends on a value being differentiated, the formula is
 * called with meta tensors standing for the node's input and output values
 * and for the output gradients. Every op the formula calls is recorded as a
 * new node of the same graph, reading those values. Gradients reaching one
 * value from several uses are summed with recorded adds, in the order the
 * eager engine sums them (later consumers first).
 *
 * Invariants: forward nodes are untouched; new nodes are appended after
 * them; a value gets a gradient only if it depends on a `wrt` value, so
 * unused gradients are never built (and DCE removes formula by-products).
 */
#include "graph.h"

/* A meta tensor standing for value v, tagged so that the recorder maps it
 * back to v. */
static musa_tensor *stand_in(musa_graph *g, int32_t v) {
    return musa_graph_meta(g, v, true);
}

/* grad[v] += gv (recorded). */
static int accumulate(musa_graph *g, int32_t *grad, int32_t v, musa_tensor *gt) {
    int32_t gv = musa_graph_value_of(g, gt);
    if (gv < 0)
        return musa_err(MUSA_ERR_RUNTIME, "[autodiff] a backward formula returned a tensor the "
                                          "graph did not record");
    if (grad[v] < 0) {
        grad[v] = gv;
        return MUSA_OK;
    }
    musa_tensor *a = stand_in(g, grad[v]);
    musa_tensor *s = a ? musa_add(a, gt) : NULL;
    int32_t sv = s ? musa_graph_value_of(g, s) : -1;
    musa_tensor_release(a), musa_tensor_release(s);
    if (sv < 0) return musa_last_error_code() ? musa_last_error_code() : MUSA_ERR_RUNTIME;
    grad[v] = sv;
    return MUSA_OK;
}

static int backward_node(musa_graph *g, int32_t ni, int32_t *grad, const uint8_t *dep) {
    musa_gnode n = g->nodes.data[ni]; /* copy: recording grows g->nodes */
    const musa_op_info *info = &musa_ops[n.op];
    musa_tensor *in_buf[8], **in = in_buf, *out[MUSA_MAX_OUTPUTS] = {0},
                            *gout[MUSA_MAX_OUTPUTS] = {0};
    musa_tensor *gin_buf[8], **gin = gin_buf;
    musa_meta meta_buf[8], *meta = meta_buf;
    bool needs_buf[8], *needs = needs_buf;
    int rc = MUSA_OK, made = 0;
    if (n.n_in > 8) {
        in = musa_calloc((size_t)n.n_in, sizeof *in, "autodiff");
        gin = musa_calloc((size_t)n.n_in, sizeof *gin, "autodiff");
        meta = musa_calloc((size_t)n.n_in, sizeof *meta, "autodiff");
        needs = musa_calloc((size_t)n.n_in, sizeof *needs, "autodiff");
        if (!in || !gin || !meta || !needs) {
            rc = MUSA_ERR_NOMEM;
            goto done;
        }
    }
    for (int i = 0; i < n.n_in; i++) gin[i] = NULL;
    for (; made < n.n_in; made++) {
        int32_t v = n.in[made];
        const musa_gvalue *x = &g->values.data[v];
        if (!(in[made] = stand_in(g, v))) {
            rc = musa_last_error_code();
            goto done;
        }
        meta[made].dtype = x->dtype;
        meta[made].ndim = x->ndim;
        memcpy(meta[made].shape, x->shape, sizeof meta[made].shape);
        needs[made] = dep[v] && musa_is_float((musa_dtype)x->dtype);
    }
    for (int j = 0; j < n.n_out; j++) {
        if (!(out[j] = stand_in(g, n.out[j])) ||
            (grad[n.out[j]] >= 0 && !(gout[j] = stand_in(g, grad[n.out[j]])))) {
            rc = musa_last_error_code();
            goto done;
        }
    }
    musa_grad_args args = {.in = in,
                           .out = out,
                           .gout = gout,
                           .attrs = &n.attrs,
                           .in_meta = meta,
                           .needs = needs,
                           .n_in = n.n_in};
    g->loc_override = n.loc; /* backward nodes point at their forward op's line */
    rc = info->grad(&args, gin);
    g->loc_override = NULL;
    if (rc) {
        musa_err_prefix(info->name);
        goto done;
    }
    for (int i = n.n_in - 1; i >= 0 && !rc; i--)
        if (needs[i] && gin[i]) rc = accumulate(g, grad, n.in[i], gin[i]);
done:
    for (int i = 0; i < made; i++) musa_tensor_release(in[i]);
    for (int i = 0; gin && i < n.n_in; i++) musa_tensor_release(gin[i]);
    for (int j = 0; j < MUSA_MAX_OUTPUTS; j++)
        musa_tensor_release(out[j]), musa_tensor_release(gout[j]);
    if (in != in_buf) free(in);
    if (gin != gin_buf) free(gin);
    if (meta != meta_buf) free(meta);
    if (needs != needs_buf) free(needs);
    return rc;
}

int musa_graph_autodiff(musa_graph *g, int n_out, const int *outs, const int *gouts, int n_wrt,
                        const int *wrt, int *grads) {
    if (!g || g->capturing)
        return musa_err(MUSA_ERR_RUNTIME, "[autodiff] the graph is NULL or still capturing");
    if (n_out < 0 || n_wrt < 0 || (n_out && (!outs || !gouts)) || (n_wrt && (!wrt || !grads)))
        return musa_err(MUSA_ERR_VALUE, "[autodiff] bad output, gradient or wrt arrays");
    int64_t nv = g->values.len, nn = g->nodes.len;
    for (int k = 0; k < n_out; k++)
        if (outs[k] < 0 || outs[k] >= nv || gouts[k] < 0 || gouts[k] >= nv)
            return musa_err(MUSA_ERR_VALUE, "[autodiff] output %d or its gradient is not a value",
                            k);
    for (int k = 0; k < n_wrt; k++)
        if (wrt[k] < 0 || wrt[k] >= nv)
            return musa_err(MUSA_ERR_VALUE, "[autodiff] wrt %d is not a value", k);
    /* dep[v]: v depends on a wrt value (only those get gradients). Values
     * made from here on (backward nodes) are never differentiated. */
    uint8_t *dep = musa_calloc((size_t)(nv ? nv : 1), 1, "autodiff");
    int32_t *grad = musa_malloc(sizeof(int32_t) * (size_t)(nv ? nv : 1), "autodiff");
    if (!dep || !grad) {
        free(dep), free(grad);
        return MUSA_ERR_NOMEM;
    }
    for (int64_t v = 0; v < nv; v++) grad[v] = -1;
    for (int k = 0; k < n_wrt; k++) dep[wrt[k]] = 1;
    for (int64_t i = 0; i < nn; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead || (musa_ops[n->op].flags & MUSA_OPF_NONDIFF)) continue;
        bool d = false;
        for (int k = 0; k < n->n_in && !d; k++) d = dep[n->in[k]];
        for (int j = 0; j < n->n_out && d; j++)
            dep[n->out[j]] = musa_is_float((musa_dtype)g->values.data[n->out[j]].dtype);
    }
    /* Record the formulas into g, symbolically, without autograd. */
    musa_tls_state saved = musa_tls;
    int rc = musa_graph_capture_resume(g, MUSA_MODE_SYMBOLIC);
    musa_tls.grad_disabled = true;
    musa_tls.anomaly_forward = false;
    for (int k = 0; k < n_out && !rc; k++) {
        if (!dep[outs[k]]) continue;
        if (grad[outs[k]] < 0)
            grad[outs[k]] = gouts[k];
        else {
            musa_tensor *gt = stand_in(g, gouts[k]);
            rc = gt ? accumulate(g, grad, outs[k], gt) : musa_last_error_code();
            musa_tensor_release(gt);
        }
    }
    for (int64_t i = nn - 1; i >= 0 && !rc; i--) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead || (musa_ops[n->op].flags & MUSA_OPF_NONDIFF)) continue;
        bool has_grad = false, wants = false;
        for (int j = 0; j < n->n_out; j++) has_grad |= grad[n->out[j]] >= 0;
        for (int k = 0; k < n->n_in; k++) wants |= dep[n->in[k]] != 0;
        if (has_grad && wants) rc = backward_node(g, (int32_t)i, grad, dep);
    }
    int rc2 = musa_graph_capture_end(g);
    musa_tls = saved;
    if (!rc) rc = rc2;
    for (int k = 0; k < n_wrt && !rc; k++) grads[k] = grad[wrt[k]];
    free(dep), free(grad);
    return rc;
}
