/*
 * graph.c - the IR core: making and freeing graphs, values and nodes, the
 * editing helpers passes use (replace_uses, analyse, compact), and the
 * op-inference probe behind add_node, the verifier and split0_ok.
 *
 * Invariants kept here:
 * - a value's id is its index in g->values and never changes; compact drops
 *   dead nodes and renumbers only nodes (producers and break positions
 *   follow);
 * - every node made here has outputs inferred by the op's own infer on meta
 *   tensors (musa_graph_infer_into), so no pass computes a shape by hand;
 * - a value's root is itself unless a VIEW node made it, and then it is the
 *   root of the view's input.
 * Capture is capture.c, the verifier verify.c, the printers print.c and the
 * public accessors graph_api.c.
 */
#include "graph.h"

musa_graph *musa_graph_new(void) {
    musa_graph *g = musa_calloc(1, sizeof *g, "graph_new");
    if (!g) return NULL;
    musa_arena_init(&g->arena, 0);
    return g;
}

void musa_graph_free(musa_graph *g) {
    if (!g) return;
    if (g->capturing) musa_graph_capture_end(g);
    for (int64_t i = 0; i < g->values.len; i++) musa_tensor_release(g->values.data[i].tensor);
    musa_vec_free(&g->values);
    musa_vec_free(&g->nodes);
    musa_vec_free(&g->inputs);
    musa_vec_free(&g->outputs);
    musa_vec_free(&g->mutations);
    musa_vec_free(&g->breaks);
    musa_vec_free(&g->syms);
    for (int64_t i = 0; i < g->grad_undo.len; i++)
        musa_tensor_release(g->grad_undo.data[i].leaf),
            musa_tensor_release(g->grad_undo.data[i].old);
    musa_vec_free(&g->grad_undo);
    musa_map_free(&g->origin);
    musa_map_free(&g->bound);
    musa_map_free(&g->bound_storage);
    musa_arena_free(&g->arena);
    free(g);
}

/* ---- values ---- */

static void set_contiguous(musa_gvalue *v) {
    musa_contiguous_strides(v->ndim, v->shape, v->strides);
    v->offset = 0;
}

int32_t musa_graph_new_value(musa_graph *g, musa_vkind kind, musa_dtype dtype, int ndim,
                             const int64_t *shape) {
    musa_gvalue v;
    memset(&v, 0, sizeof v);
    v.kind = (int8_t)kind;
    v.dtype = (int8_t)dtype;
    v.ndim = (int8_t)ndim;
    v.producer = -1;
    memset(v.sym, -1, sizeof v.sym);
    for (int i = 0; i < ndim; i++) v.shape[i] = shape[i];
    set_contiguous(&v);
    v.root = (int32_t)g->values.len;
    if (musa_vec_push(&g->values, v)) return -1;
    return v.root;
}

int32_t musa_graph_const(musa_graph *g, musa_tensor *t) {
    int32_t id = musa_graph_new_value(g, MUSA_V_CONST, (musa_dtype)t->dtype, t->ndim, t->shape);
    if (id < 0) return -1;
    musa_gvalue *v = &g->values.data[id];
    for (int i = 0; i < t->ndim; i++) v->strides[i] = t->strides[i];
    v->tensor = musa_tensor_retain(t);
    return id;
}

/* ---- editing ---- */

musa_tensor *musa_graph_meta(const musa_graph *g, int32_t id, bool tagged) {
    const musa_gvalue *v = &g->values.data[id];
    musa_tensor *t = musa_tensor_meta((musa_dtype)v->dtype, v->ndim, v->shape);
    if (!t) return NULL;
    for (int i = 0; i < v->ndim; i++) t->strides[i] = v->strides[i];
    t->offset = v->offset;
    if (v->kind == MUSA_V_CONST && v->tensor) t->flags |= v->tensor->flags & MUSA_TF_NUMBER;
    if (tagged) t->trace_tag = (g->tag << 32) | (uint64_t)(id + 1);
    return t;
}

int musa_graph_infer_into(musa_graph *g, musa_gnode *n, int32_t *fresh_out) {
    const musa_op_info *info = &musa_ops[n->op];
    musa_tensor *tin_buf[8], **tin = tin_buf;
    int8_t dt_buf[8], *dt = dt_buf;
    int rc = MUSA_OK;
    if (n->n_in > 8) {
        tin = musa_calloc((size_t)n->n_in, sizeof *tin, info->name);
        dt = musa_malloc((size_t)n->n_in, info->name);
        if (!tin || !dt) {
            free(tin), free(dt);
            return MUSA_ERR_NOMEM;
        }
    }
    int made = 0;
    for (; made < n->n_in; made++)
        if (!(tin[made] = musa_graph_meta(g, n->in[made], false))) {
            rc = musa_last_error_code();
            goto done;
        }
    musa_infer r;
    musa_infer_init(&r, info, dt, n->n_in);
    if ((rc = info->infer(info, tin, n->n_in, n->attrs, &r)) ||
        (rc = musa_infer_check_outputs(info, &r))) {
        musa_err_prefix(info->name);
        goto done;
    }
    if (fresh_out) {
        n->n_out = r.n_out;
    } else if (n->n_out != r.n_out) {
        rc = musa_err(MUSA_ERR_VALUE, "[%s] node has %d outputs but its inputs give %d", info->name,
                      n->n_out, r.n_out);
        goto done;
    }
    for (int i = 0; i < n->n_in; i++)
        if (dt[i] >= 0 && dt[i] != tin[i]->dtype) {
            rc = musa_err(MUSA_ERR_TYPE, "[%s] input %d (%%%d) is %s but the op wants %s",
                          info->name, i, n->in[i], musa_dtype_name((musa_dtype)tin[i]->dtype),
                          musa_dtype_name((musa_dtype)dt[i]));
            goto done;
        }
    for (int j = 0; j < r.n_out; j++) {
        int32_t id = n->out[j];
        if (fresh_out) {
            id = musa_graph_new_value(g, MUSA_V_NODE, (musa_dtype)r.out_dtype[j], r.out_ndim[j],
                                      r.out_shape[j]);
            if (id < 0) {
                rc = MUSA_ERR_NOMEM;
                goto done;
            }
            fresh_out[j] = id;
        }
        musa_gvalue *v = &g->values.data[id];
        v->dtype = r.out_dtype[j];
        v->ndim = r.out_ndim[j];
        for (int d = 0; d < v->ndim; d++) v->shape[d] = r.out_shape[j][d];
        set_contiguous(v);
        v->root = id;
        if (info->flags & MUSA_OPF_VIEW) {
            const musa_gvalue *src = &g->values.data[n->in[0]];
            v->root = src->root;
            v->offset = r.view_offset;
            for (int d = 0; d < v->ndim; d++) v->strides[d] = r.view_strides[d];
        }
    }
done:
    for (int i = 0; i < made; i++) musa_tensor_release(tin[i]);
    if (tin != tin_buf) free(tin);
    if (dt != dt_buf) free(dt);
    return rc;
}

int32_t musa_graph_add_node(musa_graph *g, musa_op_id op, int n_in, const int32_t *in,
                            const void *attrs, int32_t *out) {
    const musa_op_info *info = &musa_ops[op];
    if (info->n_in >= 0 && n_in != info->n_in)
        return musa_err(MUSA_ERR_VALUE, "[%s] takes %d tensor inputs, got %d", info->name,
                        info->n_in, n_in);
    for (int i = 0; i < n_in; i++)
        if (in[i] < 0 || in[i] >= g->values.len)
            return musa_err(MUSA_ERR_VALUE, "[%s] input %d is not a value of the graph", info->name,
                            i);
    musa_gnode n;
    memset(&n, 0, sizeof n);
    n.op = (int16_t)op;
    n.n_in = n_in;
    n.group = -1;
    n.in = n_in ? MUSA_ARENA_NEW(&g->arena, int32_t, n_in) : NULL;
    if (n_in && !n.in) return MUSA_ERR_NOMEM;
    if (n_in) memcpy(n.in, in, sizeof(int32_t) * (size_t)n_in); /* creation ops: both NULL */
    int rc = musa_graph_set_attrs(g, &n, attrs);
    if (rc) return rc;
    int32_t fresh[MUSA_MAX_OUTPUTS];
    rc = musa_graph_infer_into(g, &n, fresh);
    if (rc) return rc;
    int32_t id = (int32_t)g->nodes.len;
    for (int j = 0; j < n.n_out; j++) {
        n.out[j] = fresh[j];
        g->values.data[fresh[j]].producer = id;
        g->values.data[fresh[j]].out_index = (int8_t)j;
        if (out) out[j] = fresh[j];
    }
    if (musa_vec_push(&g->nodes, n)) return MUSA_ERR_NOMEM;
    return id;
}

size_t musa_gnode_attrs_size(const musa_gnode *n) {
    musa_attrs_kind kind = musa_ops[n->op].attrs_kind;
    return kind == MUSA_ATTRS_none ? 0 : musa_attrs_desc_of(kind)->size;
}

int musa_graph_set_attrs(musa_graph *g, musa_gnode *n, const void *src) {
    size_t size = musa_gnode_attrs_size(n);
    n->attrs = NULL;
    if (!size) return MUSA_OK;
    n->attrs = musa_arena_alloc(&g->arena, size, _Alignof(musa_attrs_any));
    if (!n->attrs)
        return musa_err(MUSA_ERR_NOMEM, "[jit] out of memory for %s's attributes",
                        musa_ops[n->op].name);
    if (src)
        memcpy(n->attrs, src, size);
    else
        musa_attrs_init(musa_ops[n->op].attrs_kind, n->attrs);
    return MUSA_OK;
}

void musa_gnode_private_attrs(musa_gnode *copy, musa_attrs_any *buf) {
    if (!copy->attrs) return;
    memcpy(buf, copy->attrs, musa_gnode_attrs_size(copy));
    copy->attrs = buf;
}

int musa_graph_infer_node(musa_graph *g, int32_t n) {
    return musa_graph_infer_into(g, &g->nodes.data[n], NULL);
}

int musa_graph_refresh_view(musa_graph *g, int32_t i) {
    const musa_gnode *n = &g->nodes.data[i];
    if (!(musa_ops[n->op].flags & MUSA_OPF_VIEW)) return MUSA_OK;
    if (g->values.data[n->out[0]].root == g->values.data[n->in[0]].root) return MUSA_OK;
    return musa_graph_infer_node(g, i);
}

bool musa_gvalue_same_layout(const musa_gvalue *a, const musa_gvalue *b) {
    if (a->dtype != b->dtype || a->offset != b->offset ||
        !musa_shape_equal(a->ndim, a->shape, b->ndim, b->shape))
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->strides[d] != b->strides[d]) return false;
    return true;
}

void musa_graph_replace_uses(musa_graph *g, int32_t from, int32_t to) {
    for (int64_t i = 0; i < g->nodes.len; i++) {
        musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] == from) n->in[k] = to;
    }
    for (int64_t i = 0; i < g->outputs.len; i++)
        if (g->outputs.data[i] == from) g->outputs.data[i] = to;
    for (int64_t i = 0; i < g->mutations.len; i++)
        if (g->mutations.data[i].value == from) g->mutations.data[i].value = to;
    for (int64_t i = 0; i < g->breaks.len; i++)
        if (g->breaks.data[i].value == from) g->breaks.data[i].value = to;
}

bool musa_graph_escapes(const musa_graph *g, int32_t v) {
    for (int64_t i = 0; i < g->outputs.len; i++)
        if (g->outputs.data[i] == v) return true;
    for (int64_t i = 0; i < g->mutations.len; i++)
        if (g->mutations.data[i].value == v) return true;
    for (int64_t i = 0; i < g->breaks.len; i++)
        if (g->breaks.data[i].value == v) return true;
    return false;
}

int32_t musa_graph_producer(const musa_graph *g, int32_t v, int op) {
    const musa_gvalue *x = &g->values.data[v];
    if (x->kind != MUSA_V_NODE || x->producer < 0 || x->producer >= g->nodes.len) return -1;
    const musa_gnode *p = &g->nodes.data[x->producer];
    if (p->dead || p->op != op || p->out[x->out_index] != v) return -1;
    return x->producer;
}

int64_t musa_graph_uses(const musa_graph *g, int32_t v, int skip) {
    int64_t u = musa_graph_escapes(g, v);
    for (int64_t k = 0; k < g->nodes.len; k++) {
        const musa_gnode *m = &g->nodes.data[k];
        for (int q = 0; !m->dead && m->op != skip && q < m->n_in; q++) u += m->in[q] == v;
    }
    return u;
}

void musa_graph_analyse(musa_graph *g) {
    for (int64_t i = 0; i < g->values.len; i++) g->values.data[i].uses = 0;
    for (int64_t i = 0; i < g->nodes.len; i++) {
        musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) g->values.data[n->in[k]].uses++;
    }
    for (int64_t i = 0; i < g->outputs.len; i++) g->values.data[g->outputs.data[i]].uses++;
    for (int64_t i = 0; i < g->mutations.len; i++)
        g->values.data[g->mutations.data[i].value].uses++;
    for (int64_t i = 0; i < g->breaks.len; i++) g->values.data[g->breaks.data[i].value].uses++;
}

void musa_graph_compact(musa_graph *g) {
    int64_t w = 0;
    for (int64_t i = 0; i < g->nodes.len; i++) {
        if (g->nodes.data[i].dead) {
            /* its outputs have no producer now: their old index would name
             * another node, or lie past the table's end */
            for (int j = 0; j < g->nodes.data[i].n_out; j++)
                g->values.data[g->nodes.data[i].out[j]].producer = -1;
            continue;
        }
        musa_gnode *n = &g->nodes.data[i];
        for (int j = 0; j < n->n_out; j++) g->values.data[n->out[j]].producer = (int32_t)w;
        for (int64_t b = 0; b < g->breaks.len; b++)
            if (g->breaks.data[b].at_node == (int32_t)i) g->breaks.data[b].at_node = (int32_t)w;
        g->nodes.data[w++] = *n;
    }
    for (int64_t b = 0; b < g->breaks.len; b++)
        if (g->breaks.data[b].at_node > (int32_t)w) g->breaks.data[b].at_node = (int32_t)w;
    g->nodes.len = w;
}

void musa_graph_shrink(musa_graph *g) {
    musa_vec_shrink(&g->values);
    musa_vec_shrink(&g->nodes);
    musa_vec_shrink(&g->inputs);
    musa_vec_shrink(&g->outputs);
}

int musa_graph_place(musa_graph *g, int64_t nn0, const int32_t *pos) {
    int64_t nn = g->nodes.len, extra = nn - nn0;
    if (extra <= 0) return MUSA_OK;
    /* counting sort of the new nodes by position, stable */
    int64_t *start = musa_calloc((size_t)(nn0 + 2), sizeof(int64_t), "jit");
    int32_t *placed = musa_malloc(sizeof(int32_t) * (size_t)extra, "jit"); /* by position */
    musa_gnode *nodes = musa_malloc(sizeof(musa_gnode) * (size_t)nn, "jit");
    if (!start || !placed || !nodes) {
        free(start), free(placed), free(nodes);
        return MUSA_ERR_NOMEM;
    }
    for (int64_t c = nn0; c < nn; c++) start[pos[c] + 1]++;
    for (int64_t i = 0; i <= nn0; i++) start[i + 1] += start[i];
    for (int64_t c = nn0; c < nn; c++) placed[start[pos[c]]++] = (int32_t)c;
    int64_t w = 0, k = 0;
    for (int64_t i = 0; i <= nn0; i++) {
        int64_t end = start[i]; /* after the scatter: the end of position i's group */
        while (k < end) nodes[w++] = g->nodes.data[placed[k++]];
        if (i < nn0) nodes[w++] = g->nodes.data[i];
    }
    memcpy(g->nodes.data, nodes, sizeof(musa_gnode) * (size_t)nn);
    for (int64_t n = 0; n < nn; n++)
        for (int q = 0; q < g->nodes.data[n].n_out; q++)
            g->values.data[g->nodes.data[n].out[q]].producer = (int32_t)n;
    for (int64_t b = 0; b < g->breaks.len; b++) { /* a break stays before the same node */
        int32_t at = g->breaks.data[b].at_node;
        if (at >= 0 && at <= nn0)
            g->breaks.data[b].at_node = (int32_t)(at + (at ? start[at - 1] : 0));
    }
    free(start), free(placed), free(nodes);
    return MUSA_OK;
}

bool musa_graph_pairable(const musa_graph *g, const musa_gnode *n) {
    const musa_op_info *info = &musa_ops[n->op];
    /* THREADS: in a task it would run single-threaded, rounding otherwise.
     * INPLACE: an update paired with an earlier reader of its parameter (a
     * matmul of the backward) could not write in place: it took an arena
     * buffer and a copy back, for no gain (updates are memory bound).
     * REDUCTION, CREATION: cheap passes, never worth a task. */
    if (n->n_out < 1 ||
        (info->flags & (MUSA_OPF_ELEMENTWISE | MUSA_OPF_VIEW | MUSA_OPF_ORDERED | MUSA_OPF_THREADS |
                        MUSA_OPF_INPLACE | MUSA_OPF_REDUCTION | MUSA_OPF_CREATION)))
        return false;
    /* GEMMs (attention's kernels included) are never paired. Measured on the 2-core AMD machine,
     * when a GEMM under MUSA_SMALL_GEMM_MACS still ran on one thread: pairing the MLP's (64 x 128
     * outputs) made its step 25-38 us slower (110 against 72 us). The products themselves got no
     * slower; what the main thread did next with memory the other core had touched did (the
     * profiler: the SGD update 3.0 -> 20.2 us, relu's backward 1.2 -> 5.5 us), as bench_cores
     * measures: a core writing 64 KiB that the other just read takes 9.0 us against 0.7. Larger
     * GEMMs run on every thread alone, and pairing them (as two one-thread tasks) made GPT-tiny's
     * step 5% slower (9.7 against 9.3 ms, three runs each). */
    if (info->attrs_kind == MUSA_ATTRS_matmul || info->attrs_kind == MUSA_ATTRS_attention ||
        n->op == MUSA_OP_linear)
        return false;
    const musa_gvalue *o = &g->values.data[n->out[0]];
    int64_t ne = 1;
    for (int d = 0; d < o->ndim; d++) ne *= o->shape[d];
    return ne >= MUSA_HEAVY_ELEMS && ne <= MUSA_SOLO_ELEMS;
}

/* ---- split along dim 0 ---- */

bool musa_graph_row_reduction(const musa_graph *g, const musa_gnode *n) {
    const musa_op_info *info = &musa_ops[n->op];
    if (!(info->flags & MUSA_OPF_REDUCTION) || info->attrs_kind != MUSA_ATTRS_reduce ||
        info->n_out != 1 || n->n_in != 1)
        return false;
    const musa_gvalue *x = &g->values.data[n->in[0]];
    const musa_attrs_reduce *a = &n->attrs->reduce;
    if (x->ndim < 2 || a->dims.n == 0) return false;
    for (int i = 0; i < a->dims.n; i++) {
        int64_t d = a->dims.v[i] < 0 ? a->dims.v[i] + x->ndim : a->dims.v[i];
        if (d == 0) return false;
    }
    return true;
}

/* Ops whose output row i (along dim 0) is computed from row i of input 0
 * alone, the other inputs read whole: the shape probe below cannot tell
 * (softmax or cumsum along dim 0 keep the shape but mix rows). */
static bool rows_independent(const musa_graph *g, const musa_gnode *n) {
    switch (n->op) {
    case MUSA_OP_matmul:
    case MUSA_OP_linear:
    case MUSA_OP_conv2d:
    case MUSA_OP_max_pool2d:
    case MUSA_OP_avg_pool2d:
    case MUSA_OP_adaptive_avg_pool2d:
    case MUSA_OP_batch_norm_apply: /* statistics per channel, given */
        return true;
    case MUSA_OP_softmax:
    case MUSA_OP_log_softmax: {
        int nd = g->values.data[n->in[0]].ndim;
        int64_t d = n->attrs->dim.dim < 0 ? n->attrs->dim.dim + nd : n->attrs->dim.dim;
        return d != 0;
    }
    default:
        return musa_graph_row_reduction(g, n);
    }
}

bool musa_graph_split0_ok(const musa_graph *g, int32_t ni) {
    const musa_gnode *n = &g->nodes.data[ni];
    const musa_op_info *info = &musa_ops[n->op];
    if (info->flags & (MUSA_OPF_VIEW | MUSA_OPF_ORDERED | MUSA_OPF_CREATION)) return false;
    if (!rows_independent(g, n)) return false;
    if (n->n_in < 1 || info->n_out != 1) return false;
    const musa_gvalue *x = &g->values.data[n->in[0]];
    const musa_gvalue *y = &g->values.data[n->out[0]];
    if (x->ndim < 2 || y->ndim < 1 || x->shape[0] != y->shape[0] || x->shape[0] < 2) return false;
    /* Ask the op: with input 0 cut to one row, is the output one row of it? */
    musa_graph *tmp = (musa_graph *)g;
    int64_t saved = x->shape[0];
    tmp->values.data[n->in[0]].shape[0] = 1;
    musa_gnode copy = *n;
    musa_attrs_any own;
    musa_gnode_private_attrs(&copy, &own);
    musa_gvalue out_saved = *y;
    int rc = musa_graph_infer_into(tmp, &copy, NULL);
    const musa_gvalue *r = &g->values.data[n->out[0]];
    bool ok = rc == MUSA_OK && r->ndim == out_saved.ndim && r->shape[0] == 1;
    for (int d = 1; ok && d < r->ndim; d++) ok = r->shape[d] == out_saved.shape[d];
    tmp->values.data[n->out[0]] = out_saved;
    tmp->values.data[n->in[0]].shape[0] = saved;
    if (rc) musa_clear_error(); /* the probe's error is not the caller's */
    return ok;
}
