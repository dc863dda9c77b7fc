/*
 * remat.c - rematerialisation: a value that is read early and again much
 * later (a forward activation that the backward reads) is recomputed just
 * before its late reads, so its buffer dies after the early ones.
 *
 * Two modes, one mechanism (clone the producer chain before the first late
 * read, point the late reads at the clone):
 * - Always: cheap values - views, non-random elementwise nodes and ONEPASS
 *   ops (norms, softmax: a pass or two over their data) - read 16 nodes or
 *   more after their first read (8 under a budget: GPT-tiny's second MLP's
 *   activation, read 15 nodes later by its weight gradient, at the peak),
 *   recomputed from values live at the late
 *   read anyway, directly or through a chain of up to 3 cheap nodes
 *   (relu(batch_norm(conv_out)) from conv_out, which the norm's backward
 *   keeps). No value is kept alive longer, and no decision needs sizes.
 *   Functions of the weights alone (autocast's weight casts) are kept:
 *   eager casts a weight once per step, and so does a plan.
 *   Then, without a budget, the budget mode's search restricted to such
 *   cheap values (chains of up to 3) and to values of at least 1/32 of the
 *   estimated peak ("peak mode"): while a value live across the peak and
 *   not read there can be recomputed at its next read and that lowers the
 *   peak, up to 16 times. (GPT-tiny's second GELU output, read by its
 *   weight gradient 15 nodes later, across the plan's peak: 1 MiB of 7.17.)
 *   Its estimate counts an elementwise node's output in the buffer of an
 *   input that dies there, as the planner lays them out.
 * - With a budget (musa_pass_ctx.remat_budget, from musa.Config's
 *   memory_budget): while the estimated peak of live intermediate bytes is
 *   over it, a value live across the peak and not read there (itself or
 *   through a view) whose producer is deterministic (matmuls and
 *   convolutions included: activation checkpointing) and recomputable from
 *   values live at its next read is recomputed there, if that lowers the
 *   peak; the views of it that later reads see (q, k and v split from one
 *   projection) are made again from the clone, and a clone writes the
 *   layout its original wrote (a matmul writing permuted rows, simplify.c).
 *   Of those, the one that frees the most bytes per unit of estimated
 *   recompute time (a softmax's probabilities from the scores' matmul
 *   before a 4x larger product's output). The estimate counts each node
 *   value's bytes from its producer to its last read, outputs and mutated
 *   values to the end; fusion and the planner's layout move the real
 *   figure, so the caller checks the plan and may ask again with less.
 *
 * Recomputed values are bitwise the originals (same kernels, same inputs;
 * a batch or layer norm whose mean and invstd are live at the late read is
 * recomputed as batch_norm_apply / layer_norm_apply from them, one pass
 * instead of three, writing what the forward wrote).
 * Invariants: graphs with breaks are left alone (breaks index nodes); graph
 * outputs, mutation and break values are never recomputed; the graph stays
 * topologically ordered (clones come right before their first reader).
 */
#include "../graph.h"

#define GAP          16 /* cheap mode: a read this many nodes after the first is "late" */
#define GAP_BUDGET   8  /* the same under a budget */
#define DEPTH        3  /* cheap mode: longest chain recomputed for one value */
#define DEPTH_BIG    12 /* budget mode */
#define MAX_CHAIN    16
#define MAX_VIEWS    16 /* budget mode: views of a recomputed value cloned with it */
#define MAX_CLONE    (MAX_CHAIN + MAX_VIEWS)
#define MAX_ROUNDS   4096 /* budget mode: values recomputed at most */
#define ROUNDS_CHEAP 16   /* peak mode: the same */
#define MIN_SHARE    32   /* peak mode: a value recomputed frees this share of the peak or more */

typedef struct remat {
    musa_graph *g;
    int32_t *pos;   /* node -> position in the final order (clones: their reader's) */
    int32_t *first; /* value -> position of its first read (INT32_MAX: none) */
    int32_t *last;  /* value -> position of its last read (-1: none) */
    uint8_t *keep;  /* value is an output / mutation value or target */
    int64_t nv, cap_nodes;
    bool any_op; /* budget mode: every deterministic op may be recomputed */
} remat;

static bool recomputable(const musa_gnode *n, bool any_op) {
    uint32_t f = musa_ops[n->op].flags;
    if ((f & (MUSA_OPF_ORDERED | MUSA_OPF_CREATION | MUSA_OPF_INPLACE)) || n->n_in == 0)
        return false;
    return any_op || (f & (MUSA_OPF_ELEMENTWISE | MUSA_OPF_VIEW | MUSA_OPF_ONEPASS));
}

/* Reads (first, last) of every value in the current node order; a view's
 * reads keep its root. Also marks kept values. */
static void scan(remat *r) {
    musa_graph *g = r->g;
    for (int64_t v = 0; v < r->nv; v++) r->last[v] = -1, r->first[v] = INT32_MAX, r->keep[v] = 0;
    for (int64_t i = 0; i < g->nodes.len; i++) {
        r->pos[i] = (int32_t)i;
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) {
            int32_t v = n->in[k], root = g->values.data[v].root;
            r->last[v] = (int32_t)i;
            if (root != v) r->last[root] = (int32_t)i;
            if (r->first[v] == INT32_MAX) r->first[v] = (int32_t)i;
        }
    }
    for (int64_t i = 0; i < g->outputs.len; i++) r->keep[g->outputs.data[i]] = 1;
    for (int64_t i = 0; i < g->mutations.len; i++)
        r->keep[g->mutations.data[i].value] = r->keep[g->mutations.data[i].target] = 1;
}

/* Can value v be recomputed at position at from values live there? Appends
 * the producers to chain (inputs first). */
static bool plan_chain(remat *r, int32_t v, int32_t at, int depth, int32_t *chain, int *n) {
    const musa_gvalue *x = &r->g->values.data[v];
    if (x->kind != MUSA_V_NODE || (v < r->nv && r->last[v] >= at)) return true; /* live there */
    if (depth == 0 || x->producer < 0 || *n >= MAX_CHAIN || v >= r->nv || r->keep[v]) return false;
    const musa_gnode *p = &r->g->nodes.data[x->producer];
    if (p->dead || !recomputable(p, r->any_op)) return false;
    for (int k = 0; k < p->n_in; k++)
        if (!plan_chain(r, p->in[k], at, depth - 1, chain, n)) return false;
    for (int i = 0; i < *n; i++)
        if (chain[i] == x->producer) return true;
    if (*n >= MAX_CHAIN) return false; /* the inputs' chains filled it */
    chain[(*n)++] = x->producer;
    return true;
}

/* The chain that recomputes output j of node i at position at (node i
 * last), or 0 when there is none. */
static int chain_for(remat *r, int64_t i, int32_t at, int depth, int32_t *chain) {
    const musa_gnode *n0 = &r->g->nodes.data[i];
    int cn = 0;
    for (int k = 0; k < n0->n_in; k++)
        if (!plan_chain(r, n0->in[k], at, depth - 1, chain, &cn)) return 0;
    if (cn + 1 > MAX_CHAIN) return 0;
    chain[cn++] = (int32_t)i;
    return cn;
}

/* Clone chain[0..cn) right before node `at` and point the reads at or
 * after `at` of output j of chain[cn - nviews - 1] (the value recomputed),
 * and of the outputs of the views after it (views of that value that late
 * reads see: chain[cn - nviews..cn), in node order), to the clones. */
static int clone_chain(remat *r, const int32_t *chain, int cn, int nviews, int j, int32_t at) {
    musa_graph *g = r->g;
    int32_t map_from[MAX_CLONE * MUSA_MAX_OUTPUTS], map_to[MAX_CLONE * MUSA_MAX_OUTPUTS];
    int nm = 0, np = cn - nviews, first_view = 0; /* np: the producers' nodes */
    if (g->nodes.len + cn > r->cap_nodes)
        return musa_err(MUSA_ERR_RUNTIME, "[jit] remat: node budget exhausted");
    for (int c = 0; c < cn; c++) {
        musa_gnode src = g->nodes.data[chain[c]];
        int32_t ins[64];
        if (src.n_in > 64) return MUSA_ERR_NOT_IMPLEMENTED;
        for (int k = 0; k < src.n_in; k++) {
            ins[k] = src.in[k];
            for (int q = 0; q < nm; q++)
                if (map_from[q] == ins[k]) ins[k] = map_to[q];
        }
        int32_t outs[MUSA_MAX_OUTPUTS], id;
        /* a batch norm whose statistics live on: y again from them, one pass */
        bool apply = (src.op == MUSA_OP_batch_norm || src.op == MUSA_OP_layer_norm) &&
                     src.n_in == 3 && src.n_out == 3 &&
                     (c < np - 1 || j == 0) && /* not when its statistics are the target */
                     src.out[1] < r->nv && src.out[2] < r->nv && r->last[src.out[1]] >= at &&
                     r->last[src.out[2]] >= at;
        if (apply) {
            int32_t ain[5] = {ins[0], src.out[1], src.out[2], ins[1], ins[2]};
            id = musa_graph_add_node(g,
                                     src.op == MUSA_OP_batch_norm ? MUSA_OP_batch_norm_apply
                                                                  : MUSA_OP_layer_norm_apply,
                                     5, ain, src.attrs, outs);
        } else {
            id = musa_graph_add_node(g, (musa_op_id)src.op, src.n_in, ins, src.attrs, outs);
        }
        if (id < 0) return id;
        g->nodes.data[id].loc = src.loc;
        g->nodes.data[id].recomputed = true;
        /* a product written in another layout (a matmul writing its rows
         * permuted, simplify.c) is written the same way again: the views
         * cloned after it are views only of that layout */
        for (int q = 0; !apply && !(musa_ops[src.op].flags & MUSA_OPF_VIEW) && q < src.n_out; q++) {
            musa_gvalue *o = &g->values.data[outs[q]];
            const musa_gvalue *was = &g->values.data[src.out[q]];
            memcpy(o->strides, was->strides, sizeof o->strides);
            o->offset = was->offset;
        }
        r->pos[id] = at;
        if (c == np) first_view = nm;
        for (int q = 0; q < (apply ? 1 : src.n_out); q++)
            map_from[nm] = src.out[q], map_to[nm++] = outs[q];
    }
    const musa_gnode *n0 = &g->nodes.data[chain[np - 1]];
    int32_t v = n0->out[j], clone = -1;
    for (int q = 0; q < nm; q++)
        if (map_from[q] == v) clone = map_to[q];
    if (clone < 0)
        return musa_err(MUSA_ERR_RUNTIME, "[jit] remat: the clone of %%%d is missing", v);
    /* the values redirected: v, then its views' */
    int32_t from[1 + MAX_CLONE * MUSA_MAX_OUTPUTS], to[1 + MAX_CLONE * MUSA_MAX_OUTPUTS];
    int nfrom = 1;
    from[0] = v, to[0] = clone;
    for (int q = nviews ? first_view : nm; q < nm; q++)
        from[nfrom] = map_from[q], to[nfrom++] = map_to[q];
    int32_t new_last = r->first[v];
    for (int64_t u = 0; u < at; u++) { /* original nodes only: clones are past nn0 */
        const musa_gnode *un = &g->nodes.data[u];
        for (int k = 0; !un->dead && k < un->n_in; k++)
            if (g->values.data[un->in[k]].root == v && u > new_last) new_last = (int32_t)u;
    }
    for (int64_t u = at; u < g->nodes.len; u++) {
        musa_gnode *un = &g->nodes.data[u];
        if (un->dead || r->pos[u] != u) continue; /* a clone reads its own chain */
        for (int k = 0; k < un->n_in; k++)
            for (int q = 0; q < nfrom; q++)
                if (un->in[k] == from[q]) {
                    un->in[k] = to[q];
                    break;
                }
        /* a view now of the clone (or of a view of it) has the clone's
         * storage: without this its reads kept v's buffer alive to them */
        if (musa_ops[un->op].flags & MUSA_OPF_VIEW)
            for (int q = 0; q < un->n_out; q++)
                g->values.data[un->out[q]].root = g->values.data[un->in[0]].root;
    }
    r->last[v] = new_last;
    for (int c = 0; c < np; c++) /* inputs of the chain are read at `at` now */
        for (int k = 0; k < g->nodes.data[chain[c]].n_in; k++) {
            int32_t in = g->nodes.data[chain[c]].in[k];
            if (in < r->nv && r->last[in] < at) r->last[in] = at;
        }
    return MUSA_OK;
}

/* Final order: each clone right before the node whose position it took;
 * nodes whose outputs nobody reads any more (originals of values now only
 * recomputed) die. */
static int reorder(remat *r, int64_t nn0) {
    return musa_graph_place(r->g, nn0, r->pos);
}

/* A node of parameters and constants only (autocast's weight casts): its
 * output is weight-sized work done once per step, as eager does it;
 * recomputing it for the backward would do that work twice. */
static bool of_weights(const musa_graph *g, const musa_gnode *n) {
    for (int k = 0; k < n->n_in; k++) {
        int kind = g->values.data[g->values.data[n->in[k]].root].kind;
        if (kind != MUSA_V_PARAM && kind != MUSA_V_CONST) return false;
    }
    return true;
}

/* Cheap mode (see the file comment). */
static int remat_cheap(remat *r, int gap, int *changed) {
    musa_graph *g = r->g;
    int64_t nn0 = g->nodes.len;
    int rc = MUSA_OK;
    for (int64_t i = 0; i < nn0 && !rc; i++) {
        musa_gnode n0 = g->nodes.data[i];
        if (n0.dead || !recomputable(&n0, false) || of_weights(g, &n0)) continue;
        /* a one-pass op's other outputs are its statistics (a value per row
         * or channel): too small to pay for another pass over its input */
        int nj = (musa_ops[n0.op].flags & MUSA_OPF_ONEPASS) ? 1 : n0.n_out;
        for (int j = 0; j < nj && !rc; j++) {
            int32_t v = n0.out[j];
            if (r->keep[v] || r->first[v] == INT32_MAX || r->last[v] <= r->first[v] + gap) continue;
            /* reads of v at or after `at` are late */
            int32_t at = -1;
            for (int64_t u = r->first[v] + gap; u < nn0 && at < 0; u++) {
                const musa_gnode *un = &g->nodes.data[u];
                for (int k = 0; !un->dead && k < un->n_in; k++)
                    if (un->in[k] == v) at = (int32_t)u;
            }
            if (at < 0 || r->last[g->values.data[v].root] > r->last[v]) continue; /* views of v */
            int32_t chain[MAX_CHAIN];
            int cn = chain_for(r, i, at, DEPTH, chain);
            if (!cn) continue;
            rc = clone_chain(r, chain, cn, 0, j, at);
            *changed += cn;
        }
    }
    return rc || !*changed ? rc : reorder(r, nn0);
}

/* Bytes of node values live at each position: a value from its producer to
 * its last read (kept values to the end); views and updated state take no
 * bytes. */
static void profile(const remat *r, int64_t *live) {
    const musa_graph *g = r->g;
    int64_t nn = g->nodes.len;
    for (int64_t i = 0; i <= nn; i++) live[i] = 0;
    for (int64_t v = 0; v < r->nv; v++) {
        const musa_gvalue *x = &g->values.data[v];
        if (x->kind != MUSA_V_NODE || x->root != v || x->producer < 0 ||
            g->nodes.data[x->producer].dead ||
            (musa_ops[g->nodes.data[x->producer].op].flags & MUSA_OPF_INPLACE))
            continue; /* an update's outputs are its state, written in place */
        int64_t end = r->keep[v] ? nn - 1 : MUSA_MAX(r->last[v], x->producer);
        int64_t b = musa_gvalue_bytes(x);
        live[x->producer] += b, live[end + 1] -= b;
    }
    /* Without a budget: an elementwise node writes over an input root of its
     * size that dies there, as the planner does (plan/build.c), so that input
     * ends a node early. (GPT-tiny's estimate otherwise peaked at a GELU's
     * backward, which writes in place, rather than where its plan does, and
     * kept the second block's GELU output. Under a budget the Python side
     * checks the plan and asks again; there the adjustment led a deep tanh
     * MLP's plan to 2.79 MB where it had reached 2.58.) */
    for (int64_t i = 0; i < nn && !r->any_op; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead || n->n_out != 1 ||
            !(musa_ops[n->op].flags & (MUSA_OPF_ELEMENTWISE | MUSA_OPF_OVERWRITE)))
            continue;
        int64_t b = musa_gvalue_bytes(&g->values.data[n->out[0]]);
        for (int k = 0; k < n->n_in; k++) {
            int32_t v = g->values.data[n->in[k]].root;
            const musa_gvalue *x = &g->values.data[v];
            if (v < r->nv && x->kind == MUSA_V_NODE && x->producer >= 0 && x->producer < i &&
                !r->keep[v] && r->last[v] == i && musa_gvalue_bytes(x) == b &&
                !(musa_ops[g->nodes.data[x->producer].op].flags & MUSA_OPF_INPLACE)) {
                live[i] -= b, live[i + 1] += b;
                break;
            }
        }
    }
    for (int64_t i = 1; i <= nn; i++) live[i] += live[i - 1];
}

/* Estimated time to run node n again, in multiply-adds at the GEMM rate:
 * a product (matmul, linear, convolution) counts its multiply-adds, any
 * other node the bytes it reads and writes at BYTE_COST each (a pass over
 * memory on this machine costs about what 8 multiply-adds a byte do).
 * Doubles: sizes past any budget must not overflow. */
#define BYTE_COST 8.0
static double node_cost(const musa_graph *g, const musa_gnode *n) {
    const musa_gvalue *out = &g->values.data[n->out[0]];
    double outn = (double)musa_gvalue_bytes(out) / musa_dtype_info[out->dtype].size, k = 0;
    const musa_gvalue *a = &g->values.data[n->in[0]];
    if (n->n_in >= 2 && n->op == MUSA_OP_matmul && a->ndim) /* a's columns, or rows if transposed */
        k = (double)a->shape[a->ndim - 1 - (a->ndim > 1 && n->attrs->matmul.transpose_a)];
    else if (n->n_in >= 2 && n->op == MUSA_OP_linear && a->ndim)
        k = (double)a->shape[a->ndim - 1];
    else if (n->n_in >= 2 && n->op == MUSA_OP_conv2d) { /* in channels per group x kernel */
        const musa_gvalue *w = &g->values.data[n->in[1]];
        k = 1;
        for (int d = 1; d < w->ndim; d++) k *= (double)w->shape[d];
    }
    if (k > 0) return outn * k;
    double bytes = 0;
    for (int i = 0; i < n->n_in; i++) bytes += (double)musa_gvalue_bytes(&g->values.data[n->in[i]]);
    for (int q = 0; q < n->n_out; q++)
        bytes += (double)musa_gvalue_bytes(&g->values.data[n->out[q]]);
    return bytes * BYTE_COST;
}

/* Budget mode: the views of root value v made before `at` that reads at or
 * after `at` see, directly or through later views (q, k and v split from
 * one projection and read again by attention's backward), appended in node
 * order to chain after its n nodes; vfirst/vnext list each root's view
 * nodes in node order. Returns how many, or -1 when they do not fit or one
 * is an output or mutation value. */
static int late_views(const remat *r, const int32_t *vfirst, const int32_t *vnext, int32_t v,
                      int32_t at, int32_t *chain, int n) {
    const musa_graph *g = r->g;
    int32_t fam[4 * MAX_VIEWS];
    uint8_t need[4 * MAX_VIEWS] = {0};
    int nf = 0, nv = 0;
    for (int32_t w = vfirst[v]; w >= 0 && w < at; w = vnext[w]) {
        if (nf == 4 * MAX_VIEWS) return -1;
        fam[nf++] = w;
    }
    for (int f = nf - 1; f >= 0; f--) { /* a needed view needs the view it reads */
        const musa_gnode *w = &g->nodes.data[fam[f]];
        for (int q = 0; q < w->n_out; q++) {
            if (r->keep[w->out[q]]) return -1;
            if (r->last[w->out[q]] >= at) need[f] = 1;
        }
        int32_t src = g->values.data[w->in[0]].producer;
        for (int e = 0; need[f] && e < f; e++)
            if (fam[e] == src) need[e] = 1;
    }
    for (int f = 0; f < nf; f++) {
        if (!need[f]) continue;
        if (nv == MAX_VIEWS || n + nv == MAX_CLONE) return -1;
        chain[n + nv++] = fam[f];
    }
    return nv;
}

/* Budget mode: one value recomputed per round, until the peak fits or
 * nothing helps: of the values whose recomputation lowers the estimated
 * peak, the one that frees the most bytes per unit of recompute time
 * (node_cost of its chain), the larger on a tie. */
static int remat_budget(remat *r, int64_t budget, int *changed) {
    musa_graph *g = r->g;
    int rc = MUSA_OK;
    int64_t *live = NULL, *pre = NULL, *suf = NULL;
    int32_t *after = NULL; /* value -> its first read after the peak (a root: or of a view of it) */
    uint8_t *blocked = NULL; /* value is read at the peak (a root: or a view of it) */
    int32_t *vfirst = NULL, *vnext = NULL, *vlast = NULL; /* each root's view nodes */
    int64_t last_peak = 0;
    for (int round = 0; round < MAX_ROUNDS && !rc; round++) {
        int64_t nn = g->nodes.len;
        r->nv = g->values.len;
        free(live), free(after), free(blocked), free(vfirst), free(vnext), free(vlast);
        free(pre), free(suf);
        live = musa_malloc(sizeof(int64_t) * (size_t)(nn + 1), "remat");
        pre = musa_malloc(sizeof(int64_t) * (size_t)(nn + 1), "remat");
        suf = musa_malloc(sizeof(int64_t) * (size_t)(nn + 1), "remat");
        after = musa_malloc(sizeof(int32_t) * (size_t)r->nv, "remat");
        blocked = musa_calloc((size_t)r->nv, 1, "remat");
        vfirst = musa_malloc(sizeof(int32_t) * (size_t)r->nv, "remat");
        vlast = musa_malloc(sizeof(int32_t) * (size_t)r->nv, "remat");
        vnext = musa_malloc(sizeof(int32_t) * (size_t)(nn + 1), "remat");
        if (!live || !pre || !suf || !after || !blocked || !vfirst || !vlast || !vnext) {
            rc = MUSA_ERR_NOMEM;
            break;
        }
        scan(r);
        profile(r, live);
        int64_t peak_at = 0;
        for (int64_t i = 1; i < nn; i++)
            if (live[i] > live[peak_at]) peak_at = i;
        if (nn == 0 || live[peak_at] <= budget) break;
        /* without a budget: while each round lowers the peak, a few times */
        if (budget == 0 && ((round > 0 && live[peak_at] >= last_peak) || round == ROUNDS_CHEAP))
            break;
        last_peak = live[peak_at];
        /* the highest level up to and from each step */
        for (int64_t i = 0; i < nn; i++) pre[i] = MUSA_MAX(live[i], i ? pre[i - 1] : 0);
        for (int64_t i = nn - 1; i >= 0; i--)
            suf[i] = MUSA_MAX(live[i], i + 1 < nn ? suf[i + 1] : 0);
        for (int64_t v = 0; v < r->nv; v++) after[v] = vfirst[v] = vlast[v] = -1;
        for (int64_t u = 0; u < nn; u++) {
            const musa_gnode *un = &g->nodes.data[u];
            vnext[u] = -1;
            if (!un->dead && (musa_ops[un->op].flags & MUSA_OPF_VIEW) && un->n_out > 0) {
                int32_t root = g->values.data[un->out[0]].root;
                if (vlast[root] >= 0)
                    vnext[vlast[root]] = (int32_t)u;
                else
                    vfirst[root] = (int32_t)u;
                vlast[root] = (int32_t)u;
            }
            for (int k = 0; !un->dead && k < un->n_in; k++) {
                int32_t v = un->in[k], root = g->values.data[v].root;
                if (u == peak_at) blocked[v] = blocked[root] = 1;
                if (u > peak_at && after[v] < 0) after[v] = (int32_t)u;
                if (u > peak_at && after[root] < 0) after[root] = (int32_t)u;
            }
        }
        /* the best candidate: live across the peak, not read there */
        int64_t best_gain = 0, best_i = -1;
        double best_cost = 1;
        int best_j = 0, best_cn = 0, best_views = 0;
        int32_t best_at = -1, best_chain[MAX_CLONE];
        for (int64_t i = 0; i < peak_at; i++) {
            const musa_gnode *n = &g->nodes.data[i];
            if (n->dead || !recomputable(n, r->any_op) || (!r->any_op && of_weights(g, n)))
                continue;
            /* without a budget, as in cheap mode: a one-pass op's statistics stay */
            int nj = !r->any_op && (musa_ops[n->op].flags & MUSA_OPF_ONEPASS) ? 1 : n->n_out;
            for (int j = 0; j < nj; j++) {
                int32_t v = n->out[j], at = after[v];
                const musa_gvalue *x = &g->values.data[v];
                if (r->keep[v] || x->root != v || blocked[v] || at < 0) continue;
                int64_t b = musa_gvalue_bytes(x);
                if (!r->any_op && b < live[peak_at] / MIN_SHARE) continue;
                int32_t chain[MAX_CLONE];
                int cn = chain_for(r, i, at, r->any_op ? DEPTH_BIG : DEPTH, chain);
                if (!cn) continue;
                int nviews = vfirst[v] >= 0 ? late_views(r, vfirst, vnext, v, at, chain, cn) : 0;
                if (nviews < 0) continue;
                /* the chain's other values are new, briefly live at `at` */
                int64_t extra = 0;
                double cost = 1;
                for (int c = 0; c < cn; c++) {
                    const musa_gnode *cnode = &g->nodes.data[chain[c]];
                    cost += node_cost(g, cnode);
                    for (int q = 0; c + 1 < cn && q < cnode->n_out; q++)
                        extra += musa_gvalue_bytes(&g->values.data[cnode->out[q]]);
                }
                if (live[at] + extra >= live[peak_at]) continue;
                /* without a budget, the estimate must fall by a quarter of the
                 * value at least: the steps where it stays live keep their
                 * levels. A training-mode batch norm's output (8 MiB, no
                 * backward) was recomputed for its statistics' updates, a
                 * whole pass more, and the peak fell by 768 bytes. */
                if (!r->any_op &&
                    live[peak_at] - MUSA_MAX(live[at] + extra, MUSA_MAX(pre[i], suf[at])) < b / 4)
                    continue;
                /* b / cost against best_gain / best_cost */
                double mine = (double)b * best_cost, theirs = (double)best_gain * cost;
                if (best_i >= 0 && (mine < theirs || (mine == theirs && b <= best_gain))) continue;
                best_gain = b, best_cost = cost, best_i = i, best_j = j, best_at = at;
                best_cn = cn + nviews, best_views = nviews;
                memcpy(best_chain, chain, sizeof(int32_t) * (size_t)best_cn);
            }
        }
        if (best_i < 0) break; /* nothing lowers the peak */
        rc = clone_chain(r, best_chain, best_cn, best_views, best_j, best_at);
        if (!rc) rc = reorder(r, nn);
        *changed += best_cn;
    }
    free(live), free(after), free(blocked), free(vfirst), free(vnext), free(vlast);
    free(pre), free(suf);
    return rc;
}

int musa_pass_remat(musa_graph *g, musa_pass_ctx *ctx) {
    if (g->breaks.len) return MUSA_OK;
    int64_t budget = ctx ? ctx->remat_budget : 0;
    /* every round adds at most MAX_CLONE nodes */
    int64_t cap = g->nodes.len * (MAX_CHAIN + 1) + 16 + (budget > 0 ? MAX_ROUNDS * MAX_CLONE : 0);
    int64_t nv = g->values.len + cap * MUSA_MAX_OUTPUTS;
    remat r = {.g = g, .nv = g->values.len, .cap_nodes = cap};
    r.pos = musa_malloc(sizeof(int32_t) * (size_t)cap, "remat");
    r.first = musa_malloc(sizeof(int32_t) * (size_t)nv, "remat");
    r.last = musa_malloc(sizeof(int32_t) * (size_t)nv, "remat");
    r.keep = musa_calloc((size_t)nv, 1, "remat");
    int rc = MUSA_ERR_NOMEM, changed = 0;
    if (r.pos && r.first && r.last && r.keep) {
        scan(&r);
        rc = remat_cheap(&r, budget > 0 ? GAP_BUDGET : GAP, &changed);
        if (!rc) {
            r.any_op = budget > 0;
            rc = remat_budget(&r, budget, &changed);
        }
    }
    if (ctx) ctx->changes += changed;
    free(r.pos), free(r.first), free(r.last), free(r.keep);
    return rc;
}
