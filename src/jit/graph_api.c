/*
 * graph_api.c - the public accessors of musa.h over a graph: counts, values,
 * nodes, breaks and symbols, for front ends and tests.
 *
 * Every accessor takes any graph pointer and any id: NULL graphs and ids out
 * of range give a sentinel (0, -1, NULL, false) or an error status, never a
 * crash. Nothing here changes a graph except add_symbol and set_symbolic.
 */
#include "graph.h"

#include <stdio.h>

musa_tensor *musa_empty_meta(musa_dtype dtype, int ndim, const int64_t *shape) {
    if (!musa_dtype_valid((int)dtype)) {
        musa_err(MUSA_ERR_TYPE, "[meta] invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (ndim < 0 || ndim > MUSA_MAX_DIMS || (ndim && !shape)) {
        musa_err(MUSA_ERR_VALUE, "[meta] ndim must be in 0..%d, got %d", MUSA_MAX_DIMS, ndim);
        return NULL;
    }
    return musa_tensor_meta(dtype, ndim, shape);
}

int musa_graph_node_count(const musa_graph *g) {
    int c = 0;
    if (!g) return 0;
    for (int64_t i = 0; i < g->nodes.len; i++) c += !g->nodes.data[i].dead;
    return c;
}
int musa_graph_num_nodes(const musa_graph *g) {
    return g ? (int)g->nodes.len : 0;
}
const char *musa_graph_node_op(const musa_graph *g, int node) {
    if (!g || node < 0 || node >= g->nodes.len || g->nodes.data[node].dead) return NULL;
    return musa_ops[g->nodes.data[node].op].name;
}
int musa_graph_node_group(const musa_graph *g, int node) {
    return g && node >= 0 && node < g->nodes.len ? g->nodes.data[node].group : -1;
}
int musa_graph_num_values(const musa_graph *g) {
    return g ? (int)g->values.len : 0;
}
static const musa_gvalue *value_at(const musa_graph *g, int v) {
    return g && v >= 0 && v < g->values.len ? &g->values.data[v] : NULL;
}
int musa_graph_value_kind(const musa_graph *g, int value) {
    const musa_gvalue *v = value_at(g, value);
    return v ? v->kind : -1;
}
int musa_graph_value_ndim(const musa_graph *g, int value) {
    const musa_gvalue *v = value_at(g, value);
    return v ? v->ndim : -1;
}
int musa_graph_value_producer(const musa_graph *g, int value) {
    const musa_gvalue *v = value_at(g, value);
    return v ? v->producer : -1;
}
musa_tensor *musa_graph_value_tensor(const musa_graph *g, int value) {
    const musa_gvalue *v = value_at(g, value);
    return v ? v->tensor : NULL;
}
int musa_graph_input(const musa_graph *g, int i) {
    return g && i >= 0 && i < g->inputs.len ? g->inputs.data[i] : -1;
}
bool musa_graph_has_random(const musa_graph *g) {
    if (!g) return false;
    for (int64_t i = 0; i < g->nodes.len; i++)
        if (!g->nodes.data[i].dead && (musa_ops[g->nodes.data[i].op].flags & MUSA_OPF_RANDOM))
            return true;
    return false;
}
int musa_graph_num_inputs(const musa_graph *g) {
    return g ? (int)g->inputs.len : 0;
}
int musa_graph_num_outputs(const musa_graph *g) {
    return g ? (int)g->outputs.len : 0;
}
int musa_graph_output(const musa_graph *g, int i) {
    return g && i >= 0 && i < g->outputs.len ? g->outputs.data[i] : -1;
}
int musa_graph_num_mutations(const musa_graph *g) {
    return g ? (int)g->mutations.len : 0;
}
bool musa_graph_requires_grad(const musa_graph *g) {
    return g && g->requires_grad;
}
int musa_graph_num_breaks(const musa_graph *g) {
    return g ? (int)g->breaks.len : 0;
}
int musa_graph_break(const musa_graph *g, int i, int *value, int *at_node, int *kind,
                     double *outcome, const char **loc) {
    if (!g || i < 0 || i >= g->breaks.len)
        return musa_err(MUSA_ERR_INDEX, "[jit] break %d of %lld", i, g ? (long long)g->breaks.len : 0LL);
    const musa_gbreak *b = &g->breaks.data[i];
    if (value) *value = b->value;
    if (at_node) *at_node = b->at_node;
    if (kind) *kind = b->kind;
    if (outcome) *outcome = b->outcome;
    if (loc) *loc = b->loc;
    return MUSA_OK;
}

int musa_graph_add_symbol(musa_graph *g, const char *name, int64_t lo, int64_t hi, int64_t traced) {
    if (!g || !name || lo > hi || traced < lo || traced > hi)
        return musa_err(MUSA_ERR_VALUE, "[jit] add_symbol: bad symbol or range [%lld, %lld]",
                        (long long)lo, (long long)hi);
    if (g->syms.len >= 100) return musa_err(MUSA_ERR_VALUE, "[jit] add_symbol: too many symbols");
    musa_gsym y = {.lo = lo, .hi = hi, .traced = traced};
    snprintf(y.name, sizeof y.name, "%s", name);
    if (musa_vec_push(&g->syms, y)) return MUSA_ERR_NOMEM;
    return (int)g->syms.len - 1;
}

int musa_graph_set_symbolic(musa_graph *g, int value, int dim, int sym) {
    if (!g || value < 0 || value >= g->values.len || sym < 0 || sym >= g->syms.len)
        return musa_err(MUSA_ERR_VALUE, "[jit] set_symbolic: bad value or symbol");
    musa_gvalue *v = &g->values.data[value];
    if (dim < 0 || dim >= v->ndim)
        return musa_err(MUSA_ERR_INDEX, "[jit] set_symbolic: %%%d has no dim %d", value, dim);
    v->sym[dim] = (int8_t)sym;
    return MUSA_OK;
}
