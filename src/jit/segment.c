/*
 * segment.c - cutting a captured graph at its breaks, fingerprinting a
 * stretch of nodes, and re-specialising a graph to other input shapes.
 *
 * A segment is a new graph holding nodes [begin, end) of a capture. Its
 * inputs are the capture's first n_inputs inputs (same order; -1: all)
 * followed by the node values
 * made before `begin` that the segment reads ("carried" values, by id order).
 * Parameters and constants are shared by reference. The segment asked to
 * writes every mutation back (the others change no input or parameter).
 */
#include "graph.h"

/* Copy value v of g into s as kind `kind` (keeping shape, layout, tensor). */
static int32_t copy_value(musa_graph *s, const musa_gvalue *v, musa_vkind kind) {
    int32_t id = musa_graph_new_value(s, kind, (musa_dtype)v->dtype, v->ndim, v->shape);
    if (id < 0) return -1;
    musa_gvalue *c = &s->values.data[id];
    c->loc = v->loc;
    if (kind == MUSA_V_PARAM || kind == MUSA_V_CONST) {
        for (int d = 0; d < v->ndim; d++) c->strides[d] = v->strides[d];
        c->tensor = musa_tensor_retain(v->tensor);
    }
    if (v->name) c->name = musa_arena_strdup(&s->arena, v->name);
    return id;
}

/* Rematerialisation: a value the segment reads that a cheap node (a view,
 * or elementwise and not random) made from values the segment takes anyway
 * is recomputed in the segment instead of carried in. Nodes are visited
 * last to first, so chains unwind; each choice lowers the carried set by
 * one value and adds none. */
static void choose_remat(const musa_graph *g, int begin, uint8_t *need, const uint8_t *keep,
                         uint8_t *remat) {
    for (int32_t i = begin - 1; i >= 0; i--) {
        const musa_gnode *n = &g->nodes.data[i];
        uint32_t f = musa_ops[n->op].flags;
        if (n->dead || n->n_out != 1 || !(f & (MUSA_OPF_ELEMENTWISE | MUSA_OPF_VIEW)) ||
            (f & MUSA_OPF_ORDERED))
            continue;
        int32_t v = n->out[0];
        if (!need[v] || keep[v]) continue;
        bool ok = true;
        for (int k = 0; k < n->n_in && ok; k++) {
            const musa_gvalue *u = &g->values.data[n->in[k]];
            ok = u->kind != MUSA_V_NODE || need[n->in[k]];
        }
        if (!ok) continue;
        remat[i] = 1;
        need[v] = 0;
        for (int k = 0; k < n->n_in; k++) need[n->in[k]] = 1; /* params, consts: copied in */
    }
}

/* Whether value r is one of the first n_inputs graph inputs (which the
 * segment takes) and no mutation writes it (a view of it made again later
 * would read the new data). */
static bool taken_input(const musa_graph *g, int32_t r, int n_inputs) {
    for (int64_t i = 0; i < g->mutations.len; i++)
        if (g->mutations.data[i].target == r) return false;
    for (int64_t i = 0; i < n_inputs && i < g->inputs.len; i++)
        if (g->inputs.data[i] == r) return true;
    return false;
}

/* The view nodes that make value v from its root, last first, into chain;
 * their count, or -1 unless v is a view (in a chain of at most cap nodes)
 * made before begin of a node value made before begin or of an input the
 * segment takes (taken_input). */
static int view_chain(const musa_graph *g, int begin, int32_t v, int32_t *chain, int cap,
                      int n_inputs) {
    const musa_gvalue *x = &g->values.data[v];
    int32_t r = x->root;
    if (r == v || x->kind != MUSA_V_NODE || x->producer < 0 || x->producer >= begin) return -1;
    const musa_gvalue *root = &g->values.data[r];
    if (root->kind == MUSA_V_INPUT
            ? !taken_input(g, r, n_inputs)
            : root->kind != MUSA_V_NODE || root->producer < 0 || root->producer >= begin)
        return -1;
    int n = 0;
    for (int32_t u = v; u != r;) {
        const musa_gvalue *y = &g->values.data[u];
        if (y->kind != MUSA_V_NODE || y->producer < 0 || n == cap) return -1;
        const musa_gnode *p = &g->nodes.data[y->producer];
        if (p->dead || !(musa_ops[p->op].flags & MUSA_OPF_VIEW) || p->n_in < 1) return -1;
        chain[n++] = y->producer;
        u = p->in[0];
    }
    return n;
}

/* Views carried in from earlier nodes. Eager's tape saves a view, which
 * keeps its base alive and is read with its own strides. Where the views
 * of one base that the segment reads cover at least the base's bytes (q,
 * k and v cut from one matmul), the base is carried instead and the views
 * are made again here: no copies, no more memory, and the ops that read
 * them see eager's strides (a GEMM's rounding can follow its operands'
 * layout, so a contiguous copy gave other bits than eager). A view of an
 * input the segment takes anyway is always made again: a compiled
 * function's backward read k^T, a view of its argument (q, k and v cut
 * from one tensor), as a contiguous copy, and dnnl_sgemm rounded its
 * product of 13 rows otherwise than eager's over the view (jit fuzzer,
 * seed 1592892). */
static void carry_bases(const musa_graph *g, int begin, uint8_t *need, const uint8_t *keep,
                        uint8_t *remat, int n_inputs) {
    int64_t nv = g->values.len;
    int64_t *cover = musa_calloc((size_t)(nv ? nv : 1), sizeof *cover, "segment");
    if (!cover) return; /* an optimisation: without it the views are copied out */
    int32_t chain[16];
    for (int pass = 0; pass < 2; pass++)
        for (int64_t v = 0; v < nv; v++) {
            if (!need[v] || keep[v]) continue;
            int n = view_chain(g, begin, (int32_t)v, chain, 16, n_inputs);
            if (n < 0) continue;
            int32_t r = g->values.data[v].root;
            bool input = g->values.data[r].kind == MUSA_V_INPUT;
            if (pass == 0) {
                cover[r] += musa_gvalue_bytes(&g->values.data[v]);
                continue;
            }
            if (!input && cover[r] < musa_gvalue_bytes(&g->values.data[r])) continue;
            for (int k = 0; k < n; k++) remat[chain[k]] = 1;
            need[v] = 0;
            need[r] = 1;
        }
    free(cover);
}

/* Append a copy of g's node n to s (attrs: n's, or replacements), its
 * inputs through map; map takes its outputs. */
static int copy_node(musa_graph *s, const musa_graph *g, const musa_gnode *n, const void *attrs,
                     int32_t *map) {
    int32_t ins[64] = {0}, *in = ins;
    if (n->n_in > 64 && !(in = musa_malloc(sizeof(int32_t) * (size_t)n->n_in, "segment")))
        return MUSA_ERR_NOMEM;
    for (int k = 0; k < n->n_in; k++) in[k] = map[n->in[k]];
    int32_t out[MUSA_MAX_OUTPUTS];
    int32_t id =
        musa_graph_add_node(s, (musa_op_id)n->op, n->n_in, in, attrs ? attrs : n->attrs, out);
    if (in != ins) free(in);
    if (id < 0) return id;
    s->nodes.data[id].loc = n->loc;
    s->nodes.data[id].rounding = n->rounding;
    for (int j = 0; j < n->n_out; j++) {
        map[n->out[j]] = out[j];
        s->values.data[out[j]].loc = g->values.data[n->out[j]].loc;
    }
    return MUSA_OK;
}

musa_graph *musa_graph_segment(const musa_graph *g, int begin, int end, int n_out, const int *outs,
                               const musa_segment_options *opt, int **carried, int *n_carried) {
    if (!g || !carried || !n_carried || n_out < 0 || (n_out && !outs)) {
        musa_err(MUSA_ERR_VALUE, "[jit] segment: NULL graph or arrays");
        return NULL;
    }
    if (g->capturing) {
        musa_err(MUSA_ERR_RUNTIME, "[jit] segment: the graph is still capturing");
        return NULL;
    }
    musa_segment_options o = {.mutations = end == g->nodes.len, .n_inputs = -1, .remat = false};
    if (opt) o = *opt;
    bool mutations = o.mutations;
    int n_inputs = o.n_inputs;
    int64_t nv = g->values.len;
    if (begin < 0 || end > g->nodes.len || begin > end) {
        musa_err(MUSA_ERR_VALUE, "[jit] segment [%d, %d) is outside the graph's %lld nodes", begin,
                 end, (long long)g->nodes.len);
        return NULL;
    }
    musa_graph *s = musa_graph_new();
    int32_t *map = musa_malloc(sizeof(int32_t) * (size_t)(nv ? nv : 1), "segment");
    uint8_t *need = musa_calloc((size_t)(nv ? nv : 1), 1, "segment");
    int32_t *car = musa_malloc(sizeof(int32_t) * (size_t)(nv ? nv : 1), "segment");
    uint8_t *keep = musa_calloc((size_t)(nv ? nv : 1), 1, "segment");
    uint8_t *remat = musa_calloc((size_t)(g->nodes.len ? g->nodes.len : 1), 1, "segment");
    int nc = 0;
    if (!s || !map || !need || !car || !keep || !remat) goto fail;
    for (int64_t v = 0; v < nv; v++) map[v] = -1;
    /* Values read here but made by earlier nodes (roots of views included). */
    for (int32_t i = begin; i < end; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) need[n->in[k]] = 1;
    }
    for (int k = 0; k < n_out; k++) {
        if (outs[k] < 0 || outs[k] >= nv) {
            musa_err(MUSA_ERR_VALUE, "[jit] segment output %%%d is not a value", outs[k]);
            goto fail;
        }
        need[outs[k]] = keep[outs[k]] = 1;
    }
    /* One segment writes every mutation back (the last one, for a cut at
     * breaks: a run that stops at an unseen outcome has changed nothing). */
    bool last = mutations;
    for (int64_t i = 0; last && i < g->mutations.len; i++) {
        need[g->mutations.data[i].target] = need[g->mutations.data[i].value] = 1;
        keep[g->mutations.data[i].value] = 1;
    }
    if (n_inputs < 0 || n_inputs > g->inputs.len) n_inputs = (int)g->inputs.len;
    carry_bases(g, begin, need, keep, remat, n_inputs);
    if (o.remat) choose_remat(g, begin, need, keep, remat);
    for (int64_t i = 0; i < n_inputs; i++) {
        int32_t v = g->inputs.data[i];
        if ((map[v] = copy_value(s, &g->values.data[v], MUSA_V_INPUT)) < 0 ||
            musa_vec_push(&s->inputs, map[v]))
            goto fail;
    }
    for (int64_t v = 0; v < nv; v++) {
        const musa_gvalue *x = &g->values.data[v];
        if (!need[v] || map[v] >= 0) continue;
        if (x->kind == MUSA_V_INPUT) {
            musa_err(MUSA_ERR_VALUE, "[jit] the segment reads input %%%lld, which it does not take",
                     (long long)v);
            goto fail;
        }
        if (x->kind == MUSA_V_PARAM || x->kind == MUSA_V_CONST) {
            if ((map[v] = copy_value(s, x, (musa_vkind)x->kind)) < 0) goto fail;
        } else if (x->kind == MUSA_V_NODE && x->producer < begin) {
            /* carried in as a contiguous input (the earlier segment outputs it) */
            if ((map[v] = copy_value(s, x, MUSA_V_INPUT)) < 0 || musa_vec_push(&s->inputs, map[v]))
                goto fail;
            car[nc++] = (int32_t)v;
        }
    }
    for (int32_t i = 0; i < begin; i++)
        if (remat[i] && copy_node(s, g, &g->nodes.data[i], NULL, map)) goto fail;
    for (int32_t i = begin; i < end; i++)
        if (!g->nodes.data[i].dead && copy_node(s, g, &g->nodes.data[i], NULL, map)) goto fail;
    for (int k = 0; k < n_out; k++) {
        if (map[outs[k]] < 0) {
            musa_err(MUSA_ERR_VALUE, "[jit] segment output %%%d is made after the segment",
                     outs[k]);
            goto fail;
        }
        if (musa_vec_push(&s->outputs, map[outs[k]])) goto fail;
    }
    for (int64_t i = 0; last && i < g->mutations.len; i++) {
        const musa_gmutation *m = &g->mutations.data[i];
        musa_gmutation mm = {map[m->target], map[m->value]};
        if (mm.target < 0 || musa_vec_push(&s->mutations, mm)) goto fail;
    }
    s->requires_grad = g->requires_grad;
    free(map), free(need), free(keep), free(remat);
    *carried = car;
    *n_carried = nc;
    return s;
fail:
    if (musa_last_error_code() == MUSA_OK) musa_err_nomem("segment", 0);
    musa_graph_free(s);
    free(map), free(need), free(car), free(keep), free(remat);
    return NULL;
}

uint64_t musa_graph_fingerprint(const musa_graph *g, int begin, int end) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    if (!g) return 0;
    if (begin < 0) begin = 0;
    for (int32_t i = begin; i < end && i < g->nodes.len; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        const musa_op_info *info = &musa_ops[n->op];
        h = musa_hash_u64(h ^ (uint64_t)n->op);
        h = musa_hash_u64(h ^ musa_attrs_hash(info->attrs_kind, n->attrs));
        for (int k = 0; k < n->n_in; k++) {
            const musa_gvalue *v = &g->values.data[n->in[k]];
            h = musa_hash_u64(h ^ (uint64_t)n->in[k]);
            if (v->kind == MUSA_V_PARAM) h = musa_hash_u64(h ^ (uint64_t)(uintptr_t)v->tensor);
            if (v->kind == MUSA_V_CONST && v->tensor) {
                double x = 0;
                if (v->tensor->numel == 1 && !musa_tensor_item(v->tensor, &x))
                    h = musa_hash_bytes(&x, sizeof x, h);
                else
                    h = musa_hash_u64(h ^ (uint64_t)(uintptr_t)v->tensor);
            }
        }
        for (int j = 0; j < n->n_out; j++) h = musa_hash_u64(h ^ (uint64_t)n->out[j]);
    }
    return h;
}

musa_graph *musa_graph_respecialize(const musa_graph *g, const int64_t (*shapes)[MUSA_MAX_DIMS],
                                    int n_over, const musa_attr_override *over) {
    if (!g || (g->inputs.len && !shapes) || n_over < 0 || (n_over && !over)) {
        musa_err(MUSA_ERR_VALUE, "[jit] respecialize: NULL graph or arrays");
        return NULL;
    }
    int64_t nv = g->values.len;
    musa_graph *s = musa_graph_new();
    int32_t *map = musa_malloc(sizeof(int32_t) * (size_t)(nv ? nv : 1), "respecialize");
    if (!s || !map) goto fail;
    for (int64_t v = 0; v < nv; v++) map[v] = -1;
    for (int64_t i = 0; i < g->inputs.len; i++) {
        int32_t v = g->inputs.data[i];
        musa_gvalue x = g->values.data[v];
        for (int d = 0; d < x.ndim; d++) x.shape[d] = shapes[i][d];
        if ((map[v] = copy_value(s, &x, MUSA_V_INPUT)) < 0 || musa_vec_push(&s->inputs, map[v]))
            goto fail;
    }
    for (int64_t v = 0; v < nv; v++) {
        const musa_gvalue *x = &g->values.data[v];
        if (map[v] < 0 && (x->kind == MUSA_V_PARAM || x->kind == MUSA_V_CONST) &&
            (map[v] = copy_value(s, x, (musa_vkind)x->kind)) < 0)
            goto fail;
    }
    for (int64_t i = 0; i < g->nodes.len; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        musa_attrs_any a;
        memset(&a, 0, sizeof a);
        if (n->attrs) memcpy(&a, n->attrs, musa_gnode_attrs_size(n));
        for (int k = 0; k < n_over; k++) {
            if (over[k].node != i) continue;
            const musa_attr_field *f = musa_attrs_field(musa_ops[n->op].attrs_kind, over[k].field);
            if (!f) {
                musa_err(MUSA_ERR_VALUE, "[jit] op %s has no attribute '%s'", musa_ops[n->op].name,
                         over[k].field);
                goto fail;
            }
            if (f->type == MUSA_ATTR_INTS) {
                musa_ints *p = (musa_ints *)((char *)&a + f->offset);
                for (int q = 0; q < p->n && q < over[k].n; q++) p->v[q] = over[k].v[q];
            } else if (f->type == MUSA_ATTR_INT) {
                *(int64_t *)((char *)&a + f->offset) = over[k].v[0];
            }
        }
        if (copy_node(s, g, n, &a, map)) goto fail;
    }
    for (int64_t i = 0; i < g->outputs.len; i++)
        if (musa_vec_push(&s->outputs, map[g->outputs.data[i]])) goto fail;
    for (int64_t i = 0; i < g->mutations.len; i++) {
        musa_gmutation m = {map[g->mutations.data[i].target], map[g->mutations.data[i].value]};
        if (musa_vec_push(&s->mutations, m)) goto fail;
    }
    s->requires_grad = g->requires_grad;
    free(map);
    return s;
fail:
    if (musa_last_error_code() == MUSA_OK) musa_err_nomem("respecialize", 0);
    musa_graph_free(s);
    free(map);
    return NULL;
}
