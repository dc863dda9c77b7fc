/*
 * cse.c - common subexpression elimination (pass "cse").
 *
 * Two live nodes compute the same values when they run the same op on the
 * same inputs (in order, or swapped for a commutative binary op) with equal
 * attribute records. Nodes are visited in order and keyed by a hash of op,
 * inputs and attrs; a hit is confirmed by full comparison, and the later
 * node's outputs are replaced by the earlier node's, which it duplicates.
 *
 * Invariants:
 * - random ops are never merged (each call draws new numbers); creation
 *   ops with equal attrs are;
 * - a merge never makes two graph outputs share a buffer (eager returns
 *   separate tensors); such a node enters the table as a new entry;
 * - inputs are the same when they are the same value, or two one-element
 *   constants of equal dtype, shape, number flag and bytes (two Python
 *   numbers of one value); the constants themselves are left alone;
 * - a node's inputs are final when it enters the table: a merge rewrites
 *   only consumers of the dropped node, which come after it;
 * - hash collisions chain through the entry list (next index);
 * - a view whose input was replaced re-derives its root and offset before
 *   it is keyed; merged nodes are marked dead (dce compacts).
 * ctx->changes counts merged nodes.
 */
#include "../graph.h"

typedef struct cse_entry {
    int32_t node; /* node index */
    int32_t next; /* entry index of the next node with the same hash, or -1 */
} cse_entry;

/* The bytes of a one-element CONST (zero-padded), or false if v is not one. */
static bool scalar_bits(const musa_graph *g, int32_t v, uint64_t *bits) {
    const musa_gvalue *x = &g->values.data[v];
    const musa_tensor *t = x->tensor;
    if (x->kind != MUSA_V_CONST || !t || !t->storage || t->numel != 1) return false;
    *bits = 0;
    if (musa_tensor_copy_to(t, bits, sizeof *bits)) {
        musa_clear_error();
        return false;
    }
    return true;
}

static uint8_t number_flag(const musa_gvalue *x) {
    return (uint8_t)(x->tensor->flags & MUSA_TF_NUMBER);
}

static bool same_input(const musa_graph *g, int32_t a, int32_t b) {
    if (a == b) return true;
    uint64_t ba, bb;
    if (!scalar_bits(g, a, &ba) || !scalar_bits(g, b, &bb) || ba != bb) return false;
    const musa_gvalue *x = &g->values.data[a], *y = &g->values.data[b];
    return x->dtype == y->dtype && number_flag(x) == number_flag(y) &&
           musa_shape_equal(x->ndim, x->shape, y->ndim, y->shape);
}

/* Hash key of an input: its id, or for a one-element constant its contents
 * (so inputs same_input calls equal hash equally). */
static uint64_t input_key(const musa_graph *g, int32_t v) {
    uint64_t bits;
    if (!scalar_bits(g, v, &bits)) return (uint64_t)v;
    const musa_gvalue *x = &g->values.data[v];
    uint64_t seed = musa_hash_u64(bits) ^ ((uint64_t)(uint8_t)x->dtype << 8) ^
                    ((uint64_t)number_flag(x) << 16) ^ (1ull << 63);
    return musa_hash_bytes(x->shape, sizeof(int64_t) * (size_t)x->ndim, seed);
}

static bool commutes(const musa_gnode *n) {
    return (musa_ops[n->op].flags & MUSA_OPF_COMMUTATIVE) && n->n_in == 2;
}

static uint64_t node_hash(const musa_graph *g, const musa_gnode *n) {
    musa_attrs_kind kind = musa_ops[n->op].attrs_kind;
    uint64_t h = musa_hash_u64(((uint64_t)(uint16_t)n->op << 32) | (uint32_t)n->n_in);
    if (commutes(n)) { /* order-free: hash the keys sorted */
        uint64_t k0 = input_key(g, n->in[0]), k1 = input_key(g, n->in[1]);
        h = musa_hash_u64(h ^ (k0 < k1 ? k0 : k1));
        h = musa_hash_u64(h ^ (k0 < k1 ? k1 : k0));
    } else {
        for (int k = 0; k < n->n_in; k++) h = musa_hash_u64(h ^ input_key(g, n->in[k]));
    }
    if (kind != MUSA_ATTRS_none) h = musa_hash_u64(h ^ musa_attrs_hash(kind, n->attrs));
    return h == UINT64_MAX ? 0 : h; /* the map reserves UINT64_MAX */
}

static bool same_inputs(const musa_graph *g, const musa_gnode *a, const musa_gnode *b, bool swap) {
    for (int k = 0; k < a->n_in; k++)
        if (!same_input(g, a->in[k], b->in[swap ? 1 - k : k])) return false;
    return true;
}

/* Output types and layouts agree too (they follow from the rest; checked so
 * a merge can never change what a consumer sees). */
static bool same_outputs(const musa_graph *g, const musa_gnode *a, const musa_gnode *b) {
    for (int j = 0; j < a->n_out; j++)
        if (!musa_gvalue_same_layout(&g->values.data[a->out[j]], &g->values.data[b->out[j]]))
            return false;
    return true;
}

static bool same_node(const musa_graph *g, const musa_gnode *a, const musa_gnode *b) {
    musa_attrs_kind kind = musa_ops[a->op].attrs_kind;
    if (a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out) return false;
    if (kind != MUSA_ATTRS_none && !musa_attrs_equal(kind, a->attrs, b->attrs)) return false;
    if (!same_inputs(g, a, b, false) && !(commutes(a) && same_inputs(g, a, b, true))) return false;
    return same_outputs(g, a, b);
}

/* Whether merging would put a graph output of drop into the buffer of
 * another graph output (eager returns them as separate tensors). */
static bool outputs_would_alias(const musa_graph *g, const musa_gnode *keep,
                                const musa_gnode *drop) {
    for (int j = 0; j < drop->n_out; j++) {
        int32_t from = drop->out[j], root = g->values.data[keep->out[j]].root;
        if (g->values.data[from].root == root) continue;
        bool is_out = false, other = false;
        for (int64_t i = 0; i < g->outputs.len; i++) {
            int32_t o = g->outputs.data[i];
            is_out = is_out || o == from;
            other = other || (o != from && g->values.data[o].root == root);
        }
        if (is_out && other) return true;
    }
    return false;
}

/* Uses of node drop's outputs read node keep's instead; drop dies. */
static void merge(musa_graph *g, int32_t keep, int32_t drop) {
    musa_gnode *d = &g->nodes.data[drop];
    for (int j = 0; j < d->n_out; j++)
        musa_graph_replace_uses(g, d->out[j], g->nodes.data[keep].out[j]);
    d->dead = true;
}

int musa_pass_cse(musa_graph *g, musa_pass_ctx *ctx) {
    if (!g) return musa_err(MUSA_ERR_VALUE, "[cse] graph is NULL");
    musa_map heads = {0}; /* hash -> index of the newest entry with it */
    MUSA_VEC(cse_entry) entries = {0};
    int rc = MUSA_OK, merged = 0;
    for (int64_t i = 0; i < g->nodes.len; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        if ((rc = musa_graph_refresh_view(g, (int32_t)i))) break;
        if (musa_ops[n->op].flags & MUSA_OPF_ORDERED) continue;
        uint64_t h = node_hash(g, n);
        if (h == UINT64_MAX) h = 0; /* the map's empty-slot key (same_node sorts collisions) */
        uint64_t *head = musa_map_get(&heads, h);
        int32_t first = head ? (int32_t)*head : -1, e = first;
        while (e >= 0 && !same_node(g, &g->nodes.data[entries.data[e].node], n))
            e = entries.data[e].next;
        if (e >= 0 && !outputs_would_alias(g, &g->nodes.data[entries.data[e].node], n)) {
            merge(g, entries.data[e].node, (int32_t)i);
            merged++;
            continue;
        }
        cse_entry entry = {(int32_t)i, first};
        if ((rc = musa_vec_push(&entries, entry))) break;
        if ((rc = musa_map_put(&heads, h, (uint64_t)(entries.len - 1)))) break;
    }
    musa_map_free(&heads);
    musa_vec_free(&entries);
    if (rc) return rc;
    if (merged) musa_graph_analyse(g);
    if (ctx) ctx->changes += merged;
    return MUSA_OK;
}
