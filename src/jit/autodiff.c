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
 * eager engine sums them: the nodes run in the engine's order (engine.c: its
 * discovery from the roots and its ready stack, here with the caller's use
 * of each output as a root: engine_order), each adding its inputs'
 * gradients first to last. For a function of one output that is eager's
 * order whatever the caller's graph around it; with several, eager's
 * depends on how the caller's backward reaches them, and this is the order
 * of a caller that sums them or feeds them to one op. An op whose
 * low-precision output the capture recorded as a float32 value and a
 * rounding cast (capture.c) is one node here, as on eager's tape: its
 * formula sees the rounded output and that output's gradient, so it saves
 * and computes what eager does, bit for bit.
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

/* The value eager's tape node has for output v of a forward node: the
 * rounding cast's output where the capture appended one, else v. */
static int32_t eager_out(const int32_t *rounded, int32_t v) {
    return rounded[v] >= 0 ? rounded[v] : v;
}

static int backward_node(musa_graph *g, int32_t ni, int32_t *grad, const uint8_t *dep,
                         const int32_t *rounded) {
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
        int32_t o = eager_out(rounded, n.out[j]);
        if (!(out[j] = stand_in(g, o)) || (grad[o] >= 0 && !(gout[j] = stand_in(g, grad[o])))) {
            rc = musa_last_error_code();
            goto done;
        }
    }
    musa_grad_args args = {.in = in,
                           .out = out,
                           .gout = gout,
                           .attrs = n.attrs,
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
    for (int i = 0; i < n.n_in && !rc; i++)
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

/* The node eager's tape would hold for value v (its grad_fn): the live,
 * differentiable node that made it, when v depends on a wrt value; else
 * -1 (a leaf, a constant, or a value no gradient reaches). */
static int32_t tape_node(const musa_graph *g, const uint8_t *dep, int32_t v) {
    const musa_gvalue *x = &g->values.data[v];
    if (!dep[v] || x->kind != MUSA_V_NODE || x->producer < 0) return -1;
    const musa_gnode *n = &g->nodes.data[x->producer];
    if (n->rounding && !n->dead) return tape_node(g, dep, n->in[0]); /* part of its op's node */
    return n->dead || (musa_ops[n->op].flags & MUSA_OPF_NONDIFF) ? -1 : x->producer;
}

/* The order in which eager's engine (engine.c: discover, then the ready
 * stack) would run the forward nodes' backward formulas, as order[0..*count).
 * The caller's use of each output is a node too, encoded -(k + 1) for output
 * k: a caller reaches every output, so an output's node waits for that use
 * as well as for the function's own uses of it, and the caller's gradient
 * for output k joins the sum when that use runs. The uses are ready first,
 * in output order, and the stack runs the last first: as eager's engine
 * does for a caller that sums the outputs (loss = o1 + o2 + o3, or the
 * roots of one backward call) or feeds them to one op. Nodes no output's
 * gradient reaches are left out. */
static int engine_order(const musa_graph *g, const uint8_t *dep, int n_out, const int *outs,
                        int32_t *order, int64_t *count) {
    int64_t nn = g->nodes.len, nt = 0, cap = nn + n_out + 1;
    int32_t *task = musa_malloc(sizeof(int32_t) * (size_t)cap, "autodiff");
    int32_t *deps = musa_calloc((size_t)cap, sizeof(int32_t), "autodiff");
    int32_t *stack = musa_malloc(sizeof(int32_t) * (size_t)cap, "autodiff");
    if (!task || !deps || !stack) {
        free(task), free(deps), free(stack);
        return MUSA_ERR_NOMEM;
    }
    for (int64_t i = 0; i < nn; i++) task[i] = -1;
    int64_t sp = 0, done = 0;
    /* discovery from the outputs' nodes, each depending on the caller's use */
    for (int k = 0; k < n_out; k++) {
        int32_t r = tape_node(g, dep, outs[k]);
        if (r < 0) continue;
        deps[r]++;
        if (task[r] < 0) task[r] = (int32_t)nt++, stack[sp++] = r;
    }
    while (sp) {
        const musa_gnode *n = &g->nodes.data[stack[--sp]];
        for (int i = 0; i < n->n_in; i++) {
            int32_t m = tape_node(g, dep, n->in[i]);
            if (m < 0) continue;
            deps[m]++;
            if (task[m] < 0) task[m] = (int32_t)nt++, stack[sp++] = m;
        }
    }
    /* the ready stack: the caller's uses, then each node as its last
     * consumer runs */
    int32_t *ready = stack;
    int64_t nr = 0;
    for (int k = 0; k < n_out; k++) ready[nr++] = -(k + 1);
    while (nr) {
        int32_t ni = ready[--nr];
        order[done++] = ni;
        if (ni < 0) {
            int32_t m = tape_node(g, dep, outs[-ni - 1]);
            if (m >= 0 && --deps[m] == 0) ready[nr++] = m;
            continue;
        }
        const musa_gnode *n = &g->nodes.data[ni];
        for (int i = 0; i < n->n_in; i++) {
            int32_t m = tape_node(g, dep, n->in[i]);
            if (m >= 0 && --deps[m] == 0) ready[nr++] = m;
        }
    }
    *count = done;
    free(task), free(deps), free(stack);
    return MUSA_OK;
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
    int32_t *rounded = musa_malloc(sizeof(int32_t) * (size_t)(nv ? nv : 1), "autodiff");
    if (!dep || !grad || !rounded) {
        free(dep), free(grad), free(rounded);
        return MUSA_ERR_NOMEM;
    }
    for (int64_t v = 0; v < nv; v++) grad[v] = rounded[v] = -1;
    for (int64_t i = 0; i < nn; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->rounding && !n->dead && n->n_in == 1) rounded[n->in[0]] = n->out[0];
    }
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
    int32_t *order =
        rc ? NULL : musa_malloc(sizeof(int32_t) * (size_t)(nn + n_out + 1), "autodiff");
    int64_t n_order = 0;
    if (!rc) rc = order ? engine_order(g, dep, n_out, outs, order, &n_order) : MUSA_ERR_NOMEM;
    for (int64_t t = 0; t < n_order && !rc; t++) {
        if (order[t] < 0) { /* the caller's use of output k: its gradient */
            int k = -order[t] - 1;
            if (!dep[outs[k]]) continue;
            if (grad[outs[k]] < 0) {
                grad[outs[k]] = gouts[k];
                continue;
            }
            musa_tensor *gt = stand_in(g, gouts[k]);
            rc = gt ? accumulate(g, grad, outs[k], gt) : musa_last_error_code();
            musa_tensor_release(gt);
            continue;
        }
        const musa_gnode *n = &g->nodes.data[order[t]];
        bool has_grad = false;
        for (int j = 0; j < n->n_out; j++) has_grad |= grad[eager_out(rounded, n->out[j])] >= 0;
        if (has_grad) rc = backward_node(g, order[t], grad, dep, rounded);
    }
    free(order);
    int rc2 = musa_graph_capture_end(g);
    musa_tls = saved;
    if (!rc) rc = rc2;
    for (int k = 0; k < n_wrt && !rc; k++) grads[k] = grad[wrt[k]];
    free(dep), free(grad), free(rounded);
    return rc;
}
