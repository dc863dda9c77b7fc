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
        if (!g->nodes.data[i].dead && (musa_ops[g->nodes.data[i].op].flags & MUSA_OPF_ORDERED))
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
int musa_graph_mutation_target(const musa_graph *g, int i) {
    return g && i >= 0 && i < g->mutations.len ? g->mutations.data[i].target : -1;
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
        return musa_err(MUSA_ERR_INDEX, "[jit] break %d of %lld", i,
                        g ? (long long)g->breaks.len : 0LL);
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

/* ---- values, nodes and attributes by id (errors name the bad id) ---- */

/* Value `v` of g, or NULL with MUSA_ERR_INDEX set, prefixed [fn]. */
static const musa_gvalue *value_or_err(const musa_graph *g, int v, const char *fn) {
    if (!g) {
        musa_err(MUSA_ERR_VALUE, "[%s] graph is NULL", fn);
        return NULL;
    }
    if (v < 0 || v >= g->values.len) {
        musa_err(MUSA_ERR_INDEX, "[%s] graph has no value %%%d (it has %lld)", fn, v,
                 (long long)g->values.len);
        return NULL;
    }
    return &g->values.data[v];
}

/* Live node `n` of g, or NULL with MUSA_ERR_INDEX set, prefixed [fn]. */
static const musa_gnode *node_or_err(const musa_graph *g, int n, const char *fn) {
    if (!g) {
        musa_err(MUSA_ERR_VALUE, "[%s] graph is NULL", fn);
        return NULL;
    }
    if (n < 0 || n >= g->nodes.len) {
        musa_err(MUSA_ERR_INDEX, "[%s] graph has no node %d (it has %lld)", fn, n,
                 (long long)g->nodes.len);
        return NULL;
    }
    if (g->nodes.data[n].dead) {
        musa_err(MUSA_ERR_INDEX, "[%s] node %d was removed by a pass", fn, n);
        return NULL;
    }
    return &g->nodes.data[n];
}

int musa_graph_value_dtype(const musa_graph *g, int value) {
    const musa_gvalue *v = value_or_err(g, value, "graph_value_dtype");
    return v ? v->dtype : musa_last_error_code();
}

int musa_graph_value_shape(const musa_graph *g, int value, int64_t *dims, int *syms) {
    const musa_gvalue *v = value_or_err(g, value, "graph_value_shape");
    if (!v) return musa_last_error_code();
    for (int d = 0; d < v->ndim; d++) {
        if (dims) dims[d] = v->shape[d];
        if (syms) syms[d] = v->sym[d] >= 0 && v->sym[d] < g->syms.len ? v->sym[d] : -1;
    }
    return v->ndim;
}

const char *musa_graph_value_name(const musa_graph *g, int value) {
    const musa_gvalue *v = value_or_err(g, value, "graph_value_name");
    return v ? v->name : NULL;
}

int musa_graph_num_symbols(const musa_graph *g) {
    return g ? (int)g->syms.len : 0;
}

int musa_graph_symbol(const musa_graph *g, int i, const char **name, int64_t *lo, int64_t *hi,
                      int64_t *traced) {
    if (!g) return musa_err(MUSA_ERR_VALUE, "[graph_symbol] graph is NULL");
    if (i < 0 || i >= g->syms.len)
        return musa_err(MUSA_ERR_INDEX, "[graph_symbol] graph has no symbol %d (it has %lld)", i,
                        (long long)g->syms.len);
    const musa_gsym *y = &g->syms.data[i];
    if (name) *name = y->name;
    if (lo) *lo = y->lo;
    if (hi) *hi = y->hi;
    if (traced) *traced = y->traced;
    return MUSA_OK;
}

int musa_graph_node_num_inputs(const musa_graph *g, int node) {
    const musa_gnode *n = node_or_err(g, node, "graph_node_num_inputs");
    return n ? n->n_in : musa_last_error_code();
}

int musa_graph_node_input(const musa_graph *g, int node, int k) {
    const musa_gnode *n = node_or_err(g, node, "graph_node_input");
    if (!n) return musa_last_error_code();
    if (k < 0 || k >= n->n_in)
        return musa_err(MUSA_ERR_INDEX,
                        "[graph_node_input] node %d (%s) has no input %d (it has %d)", node,
                        musa_ops[n->op].name, k, n->n_in);
    return n->in[k];
}

int musa_graph_node_num_outputs(const musa_graph *g, int node) {
    const musa_gnode *n = node_or_err(g, node, "graph_node_num_outputs");
    return n ? n->n_out : musa_last_error_code();
}

int musa_graph_node_output(const musa_graph *g, int node, int k) {
    const musa_gnode *n = node_or_err(g, node, "graph_node_output");
    if (!n) return musa_last_error_code();
    if (k < 0 || k >= n->n_out)
        return musa_err(MUSA_ERR_INDEX,
                        "[graph_node_output] node %d (%s) has no output %d (it has %d)", node,
                        musa_ops[n->op].name, k, n->n_out);
    return n->out[k];
}

const char *musa_graph_node_loc(const musa_graph *g, int node) {
    const musa_gnode *n = node_or_err(g, node, "graph_node_loc");
    return n ? n->loc : NULL;
}

/* The fields of n's attribute record; an op without attributes has none
 * (its record kind `none` holds a placeholder field). */
static const musa_attr_field *node_fields(const musa_gnode *n) {
    musa_attrs_kind kind = musa_ops[n->op].attrs_kind;
    static const musa_attr_field no_fields[1] = {{NULL, 0, 0, 0}};
    return kind == MUSA_ATTRS_none ? no_fields : musa_attrs_desc_of(kind)->fields;
}

static int attr_count(const musa_gnode *n) {
    int c = 0;
    for (const musa_attr_field *f = node_fields(n); f->name; f++) c++;
    return c;
}

int musa_graph_node_attr_count(const musa_graph *g, int node) {
    const musa_gnode *n = node_or_err(g, node, "graph_node_attr_count");
    return n ? attr_count(n) : musa_last_error_code();
}

int musa_graph_node_attr(const musa_graph *g, int node, int i, const char **name, int *type) {
    const musa_gnode *n = node_or_err(g, node, "graph_node_attr");
    if (!n) return musa_last_error_code();
    int c = attr_count(n);
    if (i < 0 || i >= c)
        return musa_err(MUSA_ERR_INDEX,
                        "[graph_node_attr] node %d (%s) has no attribute %d (it has %d)", node,
                        musa_ops[n->op].name, i, c);
    const musa_attr_field *f = &node_fields(n)[i];
    if (name) *name = f->name;
    if (type) *type = (int)f->type;
    return MUSA_OK;
}

/* Where attribute `name` of node `node` lives, if it has that type; else
 * NULL with the error set: MUSA_ERR_VALUE when the op has no such attribute,
 * MUSA_ERR_TYPE when it has another type. */
static const void *attr_slot(const musa_graph *g, int node, const char *name, musa_attr_type type,
                             const char *fn) {
    const musa_gnode *n = node_or_err(g, node, fn);
    if (!n) return NULL;
    const char *op = musa_ops[n->op].name;
    if (!name) {
        musa_err(MUSA_ERR_VALUE, "[%s] attribute name is NULL", fn);
        return NULL;
    }
    const musa_attr_field *f = node_fields(n);
    while (f->name && strcmp(f->name, name)) f++;
    if (!f->name) {
        musa_err(MUSA_ERR_VALUE, "[%s] node %d (%s) has no attribute '%s'", fn, node, op, name);
        return NULL;
    }
    if (f->type != type) {
        musa_err(MUSA_ERR_TYPE, "[%s] attribute '%s' of node %d (%s) is %s, not %s", fn, name, node,
                 op, musa_attr_type_name(f->type), musa_attr_type_name(type));
        return NULL;
    }
    return (const char *)n->attrs + f->offset;
}

int musa_graph_node_attr_int(const musa_graph *g, int node, const char *name, int64_t *out) {
    const int64_t *p = attr_slot(g, node, name, MUSA_ATTR_INT, "graph_node_attr_int");
    if (!p) return musa_last_error_code();
    if (out) *out = *p;
    return MUSA_OK;
}

int musa_graph_node_attr_float(const musa_graph *g, int node, const char *name, double *out) {
    const double *p = attr_slot(g, node, name, MUSA_ATTR_FLOAT, "graph_node_attr_float");
    if (!p) return musa_last_error_code();
    if (out) *out = *p;
    return MUSA_OK;
}

int musa_graph_node_attr_bool(const musa_graph *g, int node, const char *name, bool *out) {
    const bool *p = attr_slot(g, node, name, MUSA_ATTR_BOOL, "graph_node_attr_bool");
    if (!p) return musa_last_error_code();
    if (out) *out = *p;
    return MUSA_OK;
}

int musa_graph_node_attr_dtype(const musa_graph *g, int node, const char *name, musa_dtype *out) {
    const int32_t *p = attr_slot(g, node, name, MUSA_ATTR_DTYPE, "graph_node_attr_dtype");
    if (!p) return musa_last_error_code();
    if (out) *out = (musa_dtype)*p;
    return MUSA_OK;
}

int musa_graph_node_attr_ints(const musa_graph *g, int node, const char *name, int64_t *values,
                              int *n) {
    const musa_ints *p = attr_slot(g, node, name, MUSA_ATTR_INTS, "graph_node_attr_ints");
    if (!p) return musa_last_error_code();
    if (values) memcpy(values, p->v, sizeof(int64_t) * (size_t)p->n);
    if (n) *n = p->n;
    return MUSA_OK;
}
