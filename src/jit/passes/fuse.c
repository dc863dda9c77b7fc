/*
 * fuse.c - fusion: assigns nodes to groups that the plan runs as one
 * fused-tile instruction (plan/build.c).
 *
 * By fusion level (ctx->fusion_level; musa.Config(fusion_level=)):
 * 0 - none;
 * 1 - elementwise chains: maximal runs of ELEMENTWISE nodes whose outputs
 *     all have the group's shape (inputs may broadcast into it);
 * 2 - (the default) also:
 *   - such a run ended by a REDUCTION over dims other than dim 0, whose
 *     input is the run's value (each tile then holds whole rows of it);
 *   - such a run headed by a node that splits along dim 0 (matmul rows,
 *     conv images, softmax over another dim: musa_graph_split0_ok; not ops
 *     flagged THREADS, whose rounding depends on how they run), whose
 *     output the run consumes: the epilogue (bias, activation) runs on each
 *     tile of the head's output while it is in cache;
 *   - row-wise normalisations inside a run (softmax and log_softmax over a
 *     dim other than 0, batch_norm_apply): the scores of attention,
 *     (q @ k^T) * scale, masked, softmax, are one group, as is a
 *     normalisation followed by its activation.
 *
 * Memory: a group runs at the position of its last member, so a node that
 * joins a group across other work (a node no flat group takes, such as a
 * matmul, between the group's last member and it) holds every input the
 * group read until then. A chain of gradient sums (the 32 per-step products
 * of an LSTM's recurrent weight, each added to the running sum as it is
 * made) became one group that ran after the last product: all 32 products
 * (1 MiB each) were live at once, and the step's arena was 42.5 MB (11.8 MB
 * now). So a node joins across other work only while the inputs the group
 * read from outside (their bytes, counted once per member) are at most the
 * size of the node's output; otherwise the group is sealed (the node reads
 * it) and the node starts another.
 *
 * Invariants: a group runs at the position of its last member, so a group
 * is sealed as soon as a node outside it reads one of its values (nothing
 * outside may read a member before the group ran, and no member may depend
 * on a node that read the group). Members keep program order. Numerics do
 * not change: each member is the op's own kernel on a slice of rows.
 */
#include "../graph.h"

/* A product (matmul, linear, convolution: the GEMM-shaped ops) heads a
 * group only when its whole output is one head tile, so the group never
 * cuts it: products cut into tiles of MUSA_HEAD_TILE_ELEMS ran slower than
 * the whole product followed by its epilogue as a pass of its own (linear
 * + GELU, 2 threads, best of 100, eager / cut into tiles / whole:
 * 512x128x512 287 / 365 / 281 us, 4096x256x1024 7.4 / 10.5-11.3 / 7.6 ms,
 * 32768x64x128 2.76 / 3.53-3.61 / 2.69-2.74 ms, 256x1024x1024 1.59 /
 * 2.15-2.26 / 1.60 ms): each tile is a smaller GEMM that streams the
 * whole weight again. The epilogue's pass then runs over the product's
 * output in place where it dies there, so the group saved no memory
 * either. */
static bool cut_product(const musa_gnode *head, int64_t out_elems) {
    return (musa_ops[head->op].flags & MUSA_OPF_AMP_LOW) && out_elems > MUSA_HEAD_TILE_ELEMS;
}

typedef struct group {
    int32_t first; /* first member */
    int32_t ndim;
    int64_t shape[MUSA_MAX_DIMS];
    bool sealed;
    bool headed;
    int32_t members;
    int64_t work_at;  /* `work` when the last member joined */
    size_t ext_bytes; /* node values (views: their own bytes) members read from outside,
                       * once per member */
} group;

/* Bytes of the node values that member n reads from outside group gi (-1:
 * every one; not inputs, parameters or constants: those live through the
 * whole run). */
static size_t outside_bytes(const musa_graph *g, const musa_gnode *n, const int32_t *vgroup,
                            int32_t gi) {
    size_t b = 0;
    for (int k = 0; k < n->n_in; k++) {
        const musa_gvalue *x = &g->values.data[n->in[k]];
        if (g->values.data[x->root].kind != MUSA_V_NODE ||
            (gi >= 0 && (vgroup[n->in[k]] == gi || vgroup[x->root] == gi)))
            continue;
        b += (size_t)musa_gvalue_bytes(x);
    }
    return b;
}

/* Whether a node whose output is o may join open group gr at this point:
 * right after its last member, or holding little (see "Memory" above). */
static bool join_ok(const group *gr, const musa_gvalue *o, int64_t work) {
    return gr->work_at == work || gr->ext_bytes <= (size_t)musa_gvalue_bytes(o);
}

/* pow's kernel picks its loop from the exponent's view (a*a for one
 * scalar 2): an exponent of several elements broadcast along rows, (5, 1)
 * against (5, 5000), looks like one scalar in a tile of one row, where the
 * whole op's view does not (test_jit_fuzz seed 28211: 1/a against powf,
 * 1 ulp). Such a pow runs alone, on the whole tensors, as eager's does. */
static bool exponent_tiles(const musa_graph *g, const musa_gnode *n) {
    if (n->op != MUSA_OP_pow) return true;
    const musa_gvalue *e = &g->values.data[n->in[1]], *o = &g->values.data[n->out[0]];
    int64_t count = 1;
    for (int d = 0; d < e->ndim; d++) count *= e->shape[d];
    return count == 1 || musa_shape_equal(e->ndim, e->shape, o->ndim, o->shape);
}

static bool fusible_ew(const musa_graph *g, const musa_gnode *n) {
    const musa_op_info *info = &musa_ops[n->op];
    return (info->flags & MUSA_OPF_ELEMENTWISE) &&
           !(info->flags & (MUSA_OPF_ORDERED | MUSA_OPF_VIEW | MUSA_OPF_CREATION)) &&
           info->n_out == 1 && g->values.data[n->out[0]].ndim > 0 && exponent_tiles(g, n);
}

static bool same_shape(const group *gr, const musa_gvalue *v) {
    return musa_shape_equal(gr->ndim, gr->shape, v->ndim, v->shape);
}

/* A row-wise normalisation that may sit inside a run (fusion level 2). */
static bool rowwise_member(const musa_graph *g, int32_t i) {
    const musa_gnode *n = &g->nodes.data[i];
    return (n->op == MUSA_OP_softmax || n->op == MUSA_OP_log_softmax ||
            n->op == MUSA_OP_batch_norm_apply) &&
           musa_graph_split0_ok(g, i);
}

/* Made by a kernel the planner would run as a task of its own. */
static bool heavy_producer(const musa_graph *g, const musa_gvalue *x) {
    return x->kind == MUSA_V_NODE && x->producer >= 0 &&
           musa_graph_pairable(g, &g->nodes.data[x->producer]);
}

int musa_pass_fuse(musa_graph *g, musa_pass_ctx *ctx) {
    int level = ctx ? ctx->fusion_level : 2;
    if (level <= 0) return MUSA_OK;
    int64_t nn = g->nodes.len, nv = g->values.len;
    group *gs = musa_calloc((size_t)(nn ? nn : 1), sizeof *gs, "fuse");
    int32_t *vgroup = musa_malloc(sizeof(int32_t) * (size_t)(nv ? nv : 1), "fuse");
    int32_t *read = musa_calloc((size_t)(nv ? nv : 1), sizeof(int32_t), "fuse");
    int64_t *wpos = musa_calloc((size_t)(nn ? nn : 1), sizeof(int64_t), "fuse");
    if (!gs || !vgroup || !read || !wpos) {
        free(gs), free(vgroup), free(read), free(wpos);
        return MUSA_ERR_NOMEM;
    }
    int64_t work = 0; /* nodes seen so far that no flat group takes (matmuls, reductions, ...) */
    for (int64_t v = 0; v < nv; v++) vgroup[v] = -1;
    int ngroups = 0;
    for (int64_t i = 0; i < nn; i++) {
        musa_gnode *n = &g->nodes.data[i];
        n->group = -1;
        if (n->dead) continue;
        int32_t join = -1;
        if (fusible_ew(g, n)) {
            const musa_gvalue *o = &g->values.data[n->out[0]];
            /* Two heavy producers (musa_graph_pairable: alone or heading a
             * group) feeding one node are independent branches the planner
             * runs concurrently: joining either would serialise them, so the
             * node starts its own group. */
            int heavy_inputs = 0;
            for (int k = 0; k < n->n_in; k++) {
                const musa_gvalue *x = &g->values.data[n->in[k]];
                int32_t gi = vgroup[n->in[k]];
                if (gi >= 0 ? gs[gi].headed && musa_graph_pairable(g, &g->nodes.data[gs[gi].first])
                            : heavy_producer(g, x))
                    heavy_inputs++;
            }
            bool branches = heavy_inputs >= 2;
            /* an open group producing one of the inputs, with this shape */
            for (int k = 0; k < n->n_in && join < 0 && !branches; k++) {
                int32_t gi = vgroup[n->in[k]];
                if (gi >= 0 && !gs[gi].sealed && same_shape(&gs[gi], o) &&
                    join_ok(&gs[gi], o, work))
                    join = gi;
            }
            /* or a matmul/conv whose output nobody read yet: it heads a group */
            if (join < 0 && !branches && level >= 2) {
                for (int k = 0; k < n->n_in && join < 0; k++) {
                    const musa_gvalue *x = &g->values.data[n->in[k]];
                    if (x->kind != MUSA_V_NODE || x->root != n->in[k] || vgroup[n->in[k]] >= 0 ||
                        read[n->in[k]] || !musa_shape_equal(x->ndim, x->shape, o->ndim, o->shape))
                        continue;
                    int32_t h = x->producer;
                    musa_gnode *hn = &g->nodes.data[h];
                    /* Heads cut into tiles of at least 16 rows: a conv of one
                     * image at a time runs slower than the whole batch. */
                    int64_t inner = 1;
                    for (int d = 1; d < o->ndim; d++) inner *= o->shape[d];
                    /* THREADS: a different batch picks other kernels, other rounding */
                    if (hn->group >= 0 ||
                        (musa_ops[hn->op].flags & (MUSA_OPF_ELEMENTWISE | MUSA_OPF_THREADS)) ||
                        inner * 16 > MUSA_HEAD_TILE_ELEMS || !musa_graph_split0_ok(g, h) ||
                        cut_product(hn, inner * o->shape[0]))
                        continue;
                    group head = {.work_at = wpos[h],
                                  .ext_bytes = outside_bytes(g, hn, vgroup, -1)};
                    if (!join_ok(&head, o, work)) continue;
                    group *gr = &gs[ngroups];
                    *gr = head;
                    gr->first = h;
                    gr->ndim = o->ndim;
                    memcpy(gr->shape, o->shape, sizeof gr->shape);
                    gr->headed = true;
                    gr->members = 1;
                    hn->group = ngroups;
                    vgroup[hn->out[0]] = ngroups;
                    join = ngroups++;
                }
            }
            if (join < 0) { /* start a group */
                group *gr = &gs[ngroups];
                gr->first = (int32_t)i;
                gr->ndim = o->ndim;
                memcpy(gr->shape, o->shape, sizeof gr->shape);
                join = ngroups++;
            }
            /* inputs from other open groups: merge them in (none was read) */
            for (int k = 0; k < n->n_in && !branches; k++) {
                int32_t gi = vgroup[n->in[k]];
                if (gi < 0 || gi == join || gs[gi].sealed || !same_shape(&gs[gi], o) ||
                    gs[gi].headed || !join_ok(&gs[gi], o, work))
                    continue;
                gs[join].ext_bytes += gs[gi].ext_bytes;
                for (int64_t j = gs[gi].first; j < i; j++) {
                    musa_gnode *m = &g->nodes.data[j];
                    if (m->dead || m->group != gi) continue;
                    m->group = join;
                    gs[join].members++;
                    for (int q = 0; q < m->n_out; q++) vgroup[m->out[q]] = join;
                }
                if (gs[gi].first < gs[join].first && !gs[join].headed)
                    gs[join].first = gs[gi].first;
                gs[gi].sealed = true;
                gs[gi].members = 0;
            }
            n->group = join;
            gs[join].members++;
            vgroup[n->out[0]] = join;
        } else if (level >= 2 && rowwise_member(g, (int32_t)i)) {
            /* joins the open group that made its input, of its shape */
            int32_t gi = vgroup[n->in[0]];
            const musa_gvalue *o = &g->values.data[n->out[0]];
            if (gi >= 0 && !gs[gi].sealed && same_shape(&gs[gi], o) &&
                same_shape(&gs[gi], &g->values.data[n->in[0]]) && join_ok(&gs[gi], o, work)) {
                n->group = gi;
                gs[gi].members++;
                vgroup[n->out[0]] = gi;
                join = gi;
            }
        } else if (level >= 2 && musa_graph_row_reduction(g, n)) {
            int32_t gi = vgroup[n->in[0]];
            if (gi >= 0 && !gs[gi].sealed && same_shape(&gs[gi], &g->values.data[n->in[0]]) &&
                join_ok(&gs[gi], &g->values.data[n->out[0]], work)) {
                n->group = gi;
                gs[gi].members++;
                gs[gi].sealed = true; /* a reduction ends its group */
                vgroup[n->out[0]] = gi;
                join = gi;
            }
        }
        if (!(musa_ops[n->op].flags & MUSA_OPF_VIEW) && !fusible_ew(g, n)) work++;
        wpos[i] = work;
        if (join >= 0) {
            gs[join].ext_bytes += outside_bytes(g, n, vgroup, join);
            gs[join].work_at = work;
        }
        /* Reading a value of another group seals that group. */
        for (int k = 0; k < n->n_in; k++) {
            int32_t v = n->in[k];
            read[v]++;
            int32_t r = g->values.data[v].root;
            int32_t gi = vgroup[v] >= 0 ? vgroup[v] : vgroup[r];
            if (gi >= 0 && gi != join) gs[gi].sealed = true;
            if (r != v) read[r]++;
        }
    }
    /* Groups of one node, or a head with nothing after it, are plain nodes. */
    int changed = 0;
    for (int64_t i = 0; i < nn; i++) {
        musa_gnode *n = &g->nodes.data[i];
        if (n->dead || n->group < 0) continue;
        if (gs[n->group].members < 2)
            n->group = -1;
        else
            changed++;
    }
    if (ctx) ctx->changes += changed;
    free(gs), free(vgroup), free(read), free(wpos);
    return MUSA_OK;
}
