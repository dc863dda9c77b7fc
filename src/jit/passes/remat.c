/*
 * remat.c - rematerialisation: a cheap value that is read early and again
 * much later (a forward activation that the backward reads) is recomputed
 * just before its late reads, so its buffer dies after the early ones.
 *
 * Cheap: views, non-random elementwise nodes, and ONEPASS ops (norms,
 * softmax: a pass or two over their data). A value is recomputed only from
 * values that are live at the late read anyway, directly or through a short
 * chain of cheap nodes (relu(batch_norm(conv_out)) from conv_out, which the
 * norm's backward keeps), so no new value is kept alive longer: memory only
 * drops. Each clone chain is placed right before the first late read.
 *
 * Invariants: graphs with breaks are left alone (breaks index nodes); graph
 * outputs, mutation and break values are never recomputed; the graph stays
 * topologically ordered (clones come right before their first reader).
 */
#include "../graph.h"

#define GAP       16 /* a read this many nodes after the value is "late" */
#define DEPTH     3  /* longest chain of cheap nodes recomputed for one value */
#define MAX_CHAIN 8

typedef struct remat {
    musa_graph *g;
    int32_t *pos;  /* node -> position in the final order (clones: their reader's) */
    int32_t *last; /* value -> position of its last read */
    uint8_t *keep; /* value is an output / mutation / break value */
    int64_t nv;
} remat;

static bool cheap(const musa_gnode *n) {
    uint32_t f = musa_ops[n->op].flags;
    return !(f & (MUSA_OPF_RANDOM | MUSA_OPF_CREATION)) && n->n_in > 0 &&
           (f & (MUSA_OPF_ELEMENTWISE | MUSA_OPF_VIEW | MUSA_OPF_ONEPASS));
}

/* Can value v be recomputed at position at from values live there? Appends
 * the producers to chain (inputs first). */
static bool plan_chain(remat *r, int32_t v, int32_t at, int depth, int32_t *chain, int *n) {
    const musa_gvalue *x = &r->g->values.data[v];
    if (x->kind != MUSA_V_NODE || (v < r->nv && r->last[v] >= at)) return true; /* live there */
    if (depth == 0 || x->producer < 0 || *n >= MAX_CHAIN || v >= r->nv || r->keep[v]) return false;
    const musa_gnode *p = &r->g->nodes.data[x->producer];
    if (p->dead || !cheap(p)) return false;
    for (int k = 0; k < p->n_in; k++)
        if (!plan_chain(r, p->in[k], at, depth - 1, chain, n)) return false;
    for (int i = 0; i < *n; i++)
        if (chain[i] == x->producer) return true;
    chain[(*n)++] = x->producer;
    return true;
}

int musa_pass_remat(musa_graph *g, musa_pass_ctx *ctx) {
    if (g->breaks.len) return MUSA_OK;
    int64_t nn0 = g->nodes.len, nv0 = g->values.len;
    remat r = {.g = g, .nv = nv0};
    r.pos = musa_malloc(sizeof(int32_t) * (size_t)(nn0 * (MAX_CHAIN + 1) + 16), "remat");
    r.last = musa_malloc(sizeof(int32_t) * (size_t)(nv0 ? nv0 : 1), "remat");
    r.keep = musa_calloc((size_t)(nv0 ? nv0 : 1), 1, "remat");
    int32_t *first = musa_malloc(sizeof(int32_t) * (size_t)(nv0 ? nv0 : 1), "remat");
    if (!r.pos || !r.last || !r.keep || !first) {
        free(r.pos), free(r.last), free(r.keep), free(first);
        return MUSA_ERR_NOMEM;
    }
    for (int64_t v = 0; v < nv0; v++) r.last[v] = -1, first[v] = INT32_MAX;
    for (int64_t i = 0; i < nn0; i++) {
        r.pos[i] = (int32_t)i;
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) {
            int32_t v = n->in[k], root = g->values.data[v].root;
            r.last[v] = (int32_t)i;
            if (root != v) r.last[root] = (int32_t)i; /* a view's reads keep its root */
            if (first[v] == INT32_MAX) first[v] = (int32_t)i;
        }
    }
    for (int64_t i = 0; i < g->outputs.len; i++) r.keep[g->outputs.data[i]] = 1;
    for (int64_t i = 0; i < g->mutations.len; i++)
        r.keep[g->mutations.data[i].value] = r.keep[g->mutations.data[i].target] = 1;
    int rc = MUSA_OK, changed = 0;
    for (int64_t i = 0; i < nn0 && !rc; i++) {
        musa_gnode n0 = g->nodes.data[i];
        if (n0.dead || !cheap(&n0)) continue;
        for (int j = 0; j < n0.n_out && !rc; j++) {
            int32_t v = n0.out[j];
            if (r.keep[v] || first[v] == INT32_MAX || r.last[v] <= first[v] + GAP) continue;
            /* reads of v at or after `at` are late */
            int32_t at = -1;
            for (int64_t u = first[v] + GAP; u < nn0 && at < 0; u++) {
                const musa_gnode *un = &g->nodes.data[u];
                for (int k = 0; !un->dead && k < un->n_in; k++)
                    if (un->in[k] == v) at = (int32_t)u;
            }
            if (at < 0 || r.last[g->values.data[v].root] > r.last[v]) continue; /* views of v */
            int32_t chain[MAX_CHAIN];
            int cn = 0;
            bool ok = true;
            for (int k = 0; k < n0.n_in && ok; k++)
                ok = plan_chain(&r, n0.in[k], at, DEPTH - 1, chain, &cn);
            if (!ok || cn + 1 > MAX_CHAIN) continue;
            chain[cn++] = (int32_t)i;
            /* Clone the chain (in order) right before node `at`. */
            int32_t map_from[MAX_CHAIN * MUSA_MAX_OUTPUTS], map_to[MAX_CHAIN * MUSA_MAX_OUTPUTS];
            int nm = 0;
            for (int c = 0; c < cn && !rc; c++) {
                musa_gnode src = g->nodes.data[chain[c]];
                int32_t ins[64];
                if (src.n_in > 64) {
                    rc = MUSA_ERR_NOT_IMPLEMENTED;
                    break;
                }
                for (int k = 0; k < src.n_in; k++) {
                    ins[k] = src.in[k];
                    for (int q = 0; q < nm; q++)
                        if (map_from[q] == ins[k]) ins[k] = map_to[q];
                }
                int32_t outs[MUSA_MAX_OUTPUTS];
                int32_t id =
                    musa_graph_add_node(g, (musa_op_id)src.op, src.n_in, ins, &src.attrs, outs);
                if (id < 0) {
                    rc = id;
                    break;
                }
                g->nodes.data[id].loc = src.loc;
                r.pos[id] = at;
                for (int q = 0; q < src.n_out; q++)
                    map_from[nm] = src.out[q], map_to[nm++] = outs[q];
            }
            if (rc) break;
            /* Late reads take the clone; v now dies at its last early read. */
            int32_t clone = map_to[nm - n0.n_out + j];
            int32_t new_last = first[v];
            for (int64_t u = 0; u < nn0; u++) {
                musa_gnode *un = &g->nodes.data[u];
                for (int k = 0; !un->dead && k < un->n_in; k++) {
                    if (un->in[k] != v) continue;
                    if (u >= at)
                        un->in[k] = clone;
                    else if (u > new_last)
                        new_last = (int32_t)u;
                }
            }
            r.last[v] = new_last;
            for (int c = 0; c < cn; c++) /* inputs of the chain are read at `at` now */
                for (int k = 0; k < g->nodes.data[chain[c]].n_in; k++) {
                    int32_t in = g->nodes.data[chain[c]].in[k];
                    if (in < nv0 && r.last[in] < at) r.last[in] = at;
                }
            changed += cn;
        }
    }
    if (!rc && changed) {
        /* Final order: each clone right before the node whose position it took. */
        int64_t nn = g->nodes.len;
        int32_t *order = musa_malloc(sizeof(int32_t) * (size_t)nn, "remat");
        musa_gnode *nodes = musa_malloc(sizeof(musa_gnode) * (size_t)nn, "remat");
        if (!order || !nodes) {
            rc = MUSA_ERR_NOMEM;
        } else {
            int64_t w = 0;
            for (int64_t i = 0; i < nn0; i++) {
                for (int64_t c = nn0; c < nn; c++)
                    if (r.pos[c] == i) order[w++] = (int32_t)c;
                order[w++] = (int32_t)i;
            }
            for (int64_t k = 0; k < nn; k++) nodes[k] = g->nodes.data[order[k]];
            memcpy(g->nodes.data, nodes, sizeof(musa_gnode) * (size_t)nn);
            for (int64_t k = 0; k < nn; k++)
                for (int q = 0; q < g->nodes.data[k].n_out; q++)
                    g->values.data[g->nodes.data[k].out[q]].producer = (int32_t)k;
        }
        free(order), free(nodes);
    }
    if (ctx) ctx->changes += changed;
    free(r.pos), free(r.last), free(r.keep), free(first);
    return rc;
}
