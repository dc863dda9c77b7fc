/*
 * print.c - the text and JSON forms of a graph.
 *
 * Both skip what the live graph does not refer to (dead nodes, their values,
 * constants a pass folded away), print values as %<id> with their ids
 * unchanged, and print dims that follow a dynamic dim by the symbol's name
 * (text) or under "symbolic" (JSON). Strings are malloc'd; running out of
 * memory gives NULL with the error set, never a truncated form. The JSON
 * names an input by its Python argument (%x) where that is an identifier
 * no other input shares, and gives every value its "id".
 */
#include "graph.h"

#include <stdio.h>

#include "../base/sbuf.h"

/* A dim that follows a dynamic dim prints as its symbol when it equals it,
 * else as ~N (N at the traced size, affine in the symbol). */
static void sb_dim(musa_sbuf *b, const musa_graph *g, const musa_gvalue *v, int d) {
    int s = v->sym[d];
    if (s >= 0 && s < g->syms.len) {
        const musa_gsym *y = &g->syms.data[s];
        if (v->shape[d] == y->traced)
            musa_sb_printf(b, "%s", y->name);
        else
            musa_sb_printf(b, "~%lld", (long long)v->shape[d]);
        return;
    }
    musa_sb_printf(b, "%lld", (long long)v->shape[d]);
}

static void sb_type(musa_sbuf *b, const musa_graph *g, const musa_gvalue *v) {
    musa_sb_printf(b, "%s[", musa_dtype_name((musa_dtype)v->dtype));
    for (int d = 0; d < v->ndim; d++) {
        if (d) musa_sb_printf(b, ", ");
        sb_dim(b, g, v, d);
    }
    musa_sb_printf(b, "]");
}

static const char *kind_name(int k) {
    static const char *names[] = {"node", "input", "param", "const"};
    return names[k];
}

static void sb_const(musa_sbuf *b, const musa_graph *g, const musa_gvalue *v) {
    if (v->tensor && v->tensor->numel == 1 && v->tensor->storage) {
        double x = 0;
        if (!musa_tensor_item(v->tensor, &x)) {
            musa_sb_printf(b, "%.17g", x);
            return;
        }
    }
    sb_type(b, g, v);
}

/* Values the live graph refers to (printing skips the rest: consts a pass
 * folded away, values of dead nodes). NULL on OOM means "all". */
static uint8_t *referenced(const musa_graph *g) {
    uint8_t *r = calloc((size_t)(g->values.len ? g->values.len : 1), 1);
    if (!r) return NULL;
    for (int64_t i = 0; i < g->inputs.len; i++) r[g->inputs.data[i]] = 1;
    for (int64_t i = 0; i < g->outputs.len; i++) r[g->outputs.data[i]] = 1;
    for (int64_t i = 0; i < g->mutations.len; i++)
        r[g->mutations.data[i].target] = r[g->mutations.data[i].value] = 1;
    for (int64_t i = 0; i < g->nodes.len; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) r[n->in[k]] = 1;
        for (int j = 0; j < n->n_out; j++) r[n->out[j]] = 1;
    }
    return r;
}

char *musa_graph_text(const musa_graph *g) {
    if (!g) {
        musa_err(MUSA_ERR_VALUE, "[jit] graph is NULL");
        return NULL;
    }
    musa_sbuf b = {0};
    char attrs[1024];
    uint8_t *ref = referenced(g);
    musa_sb_printf(&b, "graph(");
    for (int64_t i = 0; i < g->inputs.len; i++) {
        const musa_gvalue *v = &g->values.data[g->inputs.data[i]];
        musa_sb_printf(&b, "%s%%%d", i ? ", " : "", g->inputs.data[i]);
        if (v->name) musa_sb_printf(&b, " \"%s\"", v->name);
        musa_sb_printf(&b, ": ");
        sb_type(&b, g, v);
    }
    musa_sb_printf(&b, ") {\n");
    for (int64_t i = 0; i < g->syms.len; i++) {
        const musa_gsym *y = &g->syms.data[i];
        musa_sb_printf(&b, "  # %s in [%lld, %lld] (traced at %lld)\n", y->name, (long long)y->lo,
                       (long long)y->hi, (long long)y->traced);
    }
    for (int64_t i = 0; i < g->values.len; i++) {
        const musa_gvalue *v = &g->values.data[i];
        if ((v->kind != MUSA_V_PARAM && v->kind != MUSA_V_CONST) || (ref && !ref[i])) continue;
        musa_sb_printf(&b, "  %%%lld = %s ", (long long)i, kind_name(v->kind));
        if (v->kind == MUSA_V_CONST)
            sb_const(&b, g, v);
        else
            sb_type(&b, g, v);
        musa_sb_printf(&b, "\n");
    }
    for (int64_t i = 0; i < g->nodes.len; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        const musa_op_info *info = &musa_ops[n->op];
        musa_sb_printf(&b, "  ");
        for (int j = 0; j < n->n_out; j++) musa_sb_printf(&b, "%s%%%d", j ? ", " : "", n->out[j]);
        /* a custom op by its registered name: custom[mylib::scale](%0) */
        const char *custom =
            n->op == MUSA_OP_custom ? musa_custom_op_name((int)n->attrs->custom.index) : NULL;
        musa_sb_printf(&b, " = %s%s%s%s(", info->name, custom ? "[" : "", custom ? custom : "",
                       custom ? "]" : "");
        for (int k = 0; k < n->n_in; k++) musa_sb_printf(&b, "%s%%%d", k ? ", " : "", n->in[k]);
        if (info->attrs_kind != MUSA_ATTRS_none && !custom) {
            musa_attrs_format(info->attrs_kind, n->attrs, false, attrs, sizeof attrs);
            if (attrs[0]) musa_sb_printf(&b, "%s%s", n->n_in ? ", " : "", attrs);
        }
        musa_sb_printf(&b, ")  # ");
        for (int j = 0; j < n->n_out; j++) {
            if (j) musa_sb_printf(&b, ", ");
            sb_type(&b, g, &g->values.data[n->out[j]]);
        }
        if (n->group >= 0) musa_sb_printf(&b, " fused:%d", n->group);
        if (n->loc) musa_sb_printf(&b, "  %s", n->loc);
        musa_sb_printf(&b, "\n");
    }
    for (int64_t i = 0; i < g->mutations.len; i++)
        musa_sb_printf(&b, "  write %%%d <- %%%d\n", g->mutations.data[i].target,
                       g->mutations.data[i].value);
    musa_sb_printf(&b, "  return (");
    for (int64_t i = 0; i < g->outputs.len; i++)
        musa_sb_printf(&b, "%s%%%d", i ? ", " : "", g->outputs.data[i]);
    musa_sb_printf(&b, ")\n}\n");
    free(ref);
    return musa_sb_finish(&b, "graph_text");
}

/* The JSON name of a value: an input named by a Python identifier that
 * no other input shares is %name (%x for def f(x, y)); the rest %<id>. */
static bool json_named(const musa_graph *g, int32_t id) {
    const musa_gvalue *v = &g->values.data[id];
    const char *s = v->kind == MUSA_V_INPUT ? v->name : NULL;
    if (!s || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_'))
            return false;
    for (int64_t i = 0; i < g->inputs.len; i++) {
        const musa_gvalue *o = &g->values.data[g->inputs.data[i]];
        if (g->inputs.data[i] != id && o->name && !strcmp(o->name, s)) return false;
    }
    return true;
}

static void sb_value_ref(musa_sbuf *b, const musa_graph *g, int32_t id) {
    if (json_named(g, id))
        musa_sb_printf(b, "\"%%%s\"", g->values.data[id].name);
    else
        musa_sb_printf(b, "\"%%%d\"", id);
}

static void sb_value_list(musa_sbuf *b, const musa_graph *g, const int32_t *ids, int64_t n) {
    musa_sb_printf(b, "[");
    for (int64_t i = 0; i < n; i++) {
        if (i) musa_sb_printf(b, ", ");
        sb_value_ref(b, g, ids[i]);
    }
    musa_sb_printf(b, "]");
}

static void sb_json_type(musa_sbuf *b, const musa_graph *g, const musa_gvalue *v) {
    musa_sb_printf(b, "\"dtype\": \"%s\", \"shape\": [", musa_dtype_name((musa_dtype)v->dtype));
    bool sym = false;
    for (int d = 0; d < v->ndim; d++) {
        musa_sb_printf(b, "%s%lld", d ? ", " : "", (long long)v->shape[d]);
        sym |= v->sym[d] >= 0 && v->sym[d] < g->syms.len;
    }
    musa_sb_printf(b, "]");
    if (!sym) return;
    musa_sb_printf(b, ", \"symbolic\": [");
    for (int d = 0; d < v->ndim; d++)
        musa_sb_printf(b, "%s%s%s%s", d ? ", " : "", v->sym[d] >= 0 ? "\"" : "",
                       v->sym[d] >= 0 && v->sym[d] < g->syms.len ? g->syms.data[v->sym[d]].name
                                                                 : "null",
                       v->sym[d] >= 0 ? "\"" : "");
    musa_sb_printf(b, "]");
}

char *musa_graph_json(const musa_graph *g) {
    if (!g) {
        musa_err(MUSA_ERR_VALUE, "[jit] graph is NULL");
        return NULL;
    }
    musa_sbuf b = {0};
    char attrs[1024];
    uint8_t *ref = referenced(g);
    musa_sb_printf(&b, "{\"inputs\": ");
    sb_value_list(&b, g, g->inputs.data, g->inputs.len);
    musa_sb_printf(&b, ", \"values\": {");
    bool first_value = true;
    for (int64_t i = 0; i < g->values.len; i++) {
        const musa_gvalue *v = &g->values.data[i];
        if (ref && !ref[i]) continue;
        musa_sb_printf(&b, "%s", first_value ? "" : ", ");
        sb_value_ref(&b, g, (int32_t)i);
        musa_sb_printf(&b, ": {\"id\": %lld, \"kind\": \"%s\", ", (long long)i, kind_name(v->kind));
        first_value = false;
        sb_json_type(&b, g, v);
        if (v->kind == MUSA_V_CONST && v->tensor && v->tensor->numel == 1) {
            double x = 0;
            if (!musa_tensor_item(v->tensor, &x) && x == x && x - x == 0)
                musa_sb_printf(&b, ", \"value\": %.17g", x);
        }
        musa_sb_printf(&b, "}");
    }
    musa_sb_printf(&b, "}, \"nodes\": [");
    bool first = true;
    for (int64_t i = 0; i < g->nodes.len; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        const musa_op_info *info = &musa_ops[n->op];
        musa_sb_printf(&b, "%s{\"op\": \"%s\", \"inputs\": ", first ? "" : ", ", info->name);
        first = false;
        sb_value_list(&b, g, n->in, n->n_in);
        musa_sb_printf(&b, ", \"outputs\": ");
        sb_value_list(&b, g, n->out, n->n_out);
        if (info->attrs_kind != MUSA_ATTRS_none)
            musa_attrs_format(info->attrs_kind, n->attrs, true, attrs, sizeof attrs);
        else
            snprintf(attrs, sizeof attrs, "{}");
        musa_sb_printf(&b, ", \"attrs\": %s", attrs);
        if (n->loc) {
            musa_sb_printf(&b, ", \"loc\": ");
            musa_sb_json_str(&b, n->loc);
        }
        musa_sb_printf(&b, "}");
    }
    musa_sb_printf(&b, "], \"outputs\": ");
    sb_value_list(&b, g, g->outputs.data, g->outputs.len);
    musa_sb_printf(&b, ", \"mutations\": [");
    for (int64_t i = 0; i < g->mutations.len; i++) {
        musa_sb_printf(&b, "%s{\"target\": ", i ? ", " : "");
        sb_value_ref(&b, g, g->mutations.data[i].target);
        musa_sb_printf(&b, ", \"value\": ");
        sb_value_ref(&b, g, g->mutations.data[i].value);
        musa_sb_printf(&b, "}");
    }
    musa_sb_printf(&b, "]}");
    free(ref);
    return musa_sb_finish(&b, "graph_json");
}
