/*
 * model_save.c - a captured graph written into a .musa file of kind
 * "model" (musa_model_save); model_read.c reads it back.
 *
 * The file's "graph" member (docs/format.md) lists the graph's inputs
 * (name, dtype, shape, which dims follow a dynamic size), its leaves
 * (parameters and constants: indices into the file's tensors), its nodes in
 * order (op by its ops.def name, typed attributes by field name, inputs by
 * value index, the outputs' dtypes and shapes, the user's source line), its
 * outputs and mutations. Value indices count inputs, then leaves, then each
 * node's outputs in order, so a node can only name values made before it:
 * a file cannot express a cycle. "config" holds the pass and plan options
 * the model was compiled with; "dynamic" the integer attributes that follow
 * the dynamic size.
 */
#include <stdio.h>

#include "../backend/attrs.h"
#include "../base/sbuf.h"
#include "model.h"

static const char *SAVE = "musa_model_save";

static void sb_shape(musa_sbuf *b, const musa_gvalue *v, bool syms) {
    musa_sb_printf(b, "\"dtype\": \"%s\", \"shape\": [", musa_dtype_name((musa_dtype)v->dtype));
    for (int d = 0; d < v->ndim; d++)
        musa_sb_printf(b, "%s%lld", d ? ", " : "", (long long)v->shape[d]);
    musa_sb_printf(b, "]");
    bool any = false;
    for (int d = 0; syms && d < v->ndim; d++) any |= v->sym[d] >= 0;
    if (!any) return;
    musa_sb_printf(b, ", \"sym\": [");
    for (int d = 0; d < v->ndim; d++) musa_sb_printf(b, "%s%d", d ? ", " : "", v->sym[d]);
    musa_sb_printf(b, "]");
}

static void sb_attrs(musa_sbuf *b, const musa_gnode *n) {
    const musa_op_info *info = &musa_ops[n->op];
    musa_sb_printf(b, "{");
    if (n->op == MUSA_OP_custom) { /* by name: indices belong to the process */
        const char *name = musa_custom_op_name((int)n->attrs->custom.index);
        musa_sb_printf(b, "\"name\": ");
        musa_sb_json_str(b, name ? name : "");
        musa_sb_printf(b, "}");
        return;
    }
    if (info->attrs_kind == MUSA_ATTRS_none) {
        musa_sb_printf(b, "}");
        return;
    }
    const musa_attrs_desc *d = musa_attrs_desc_of(info->attrs_kind);
    const char *rec = (const char *)n->attrs;
    for (const musa_attr_field *f = d->fields; f->name; f++) {
        musa_sb_printf(b, "%s\"%s\": ", f == d->fields ? "" : ", ", f->name);
        const void *p = rec + f->offset;
        switch (f->type) {
        case MUSA_ATTR_BOOL:
            musa_sb_printf(b, "%s", *(const bool *)p ? "true" : "false");
            break;
        case MUSA_ATTR_INT:
            musa_sb_printf(b, "%lld", (long long)*(const int64_t *)p);
            break;
        case MUSA_ATTR_FLOAT:
            musa_sb_json_num(b, *(const double *)p);
            break;
        case MUSA_ATTR_DTYPE: {
            int32_t dt = *(const int32_t *)p;
            if (dt < 0)
                musa_sb_printf(b, "null");
            else
                musa_sb_json_str(b, musa_dtype_name((musa_dtype)dt));
            break;
        }
        case MUSA_ATTR_INTS: {
            const musa_ints *v = p;
            musa_sb_printf(b, "[");
            for (int i = 0; i < v->n; i++)
                musa_sb_printf(b, "%s%lld", i ? ", " : "", (long long)v->v[i]);
            musa_sb_printf(b, "]");
            break;
        }
        }
    }
    musa_sb_printf(b, "}");
}

/* The "graph", "config" and "dynamic" members of g's file; tensors go to w.
 * vid maps g's value ids to the file's (-1: not saved); nid node ids. */
static int graph_members(const musa_graph *g, const musa_model_save_options *o, musa_file_writer *w,
                         char **graph_json, char **config_json, char **dynamic_json) {
    int rc = MUSA_OK;
    int64_t nv = g->values.len, nn = g->nodes.len;
    int32_t *vid = malloc(sizeof(int32_t) * (size_t)(nv + 1));
    int32_t *nid = malloc(sizeof(int32_t) * (size_t)(nn + 1));
    uint8_t *used = calloc((size_t)nv + 1, 1);
    musa_sbuf b = {0}, c = {0}, dy = {0};
    if (!vid || !nid || !used) {
        rc = musa_err_nomem(SAVE, sizeof(int32_t) * (size_t)(nv + nn));
        goto done;
    }
    for (int64_t i = 0; i < nv; i++) vid[i] = -1;
    for (int64_t i = 0; i < g->outputs.len; i++) used[g->outputs.data[i]] = 1;
    for (int64_t i = 0; i < g->mutations.len; i++)
        used[g->mutations.data[i].target] = used[g->mutations.data[i].value] = 1;
    for (int64_t i = 0; i < nn; i++)
        for (int k = 0; !g->nodes.data[i].dead && k < g->nodes.data[i].n_in; k++)
            used[g->nodes.data[i].in[k]] = 1;
    int32_t next = 0;
    musa_sb_printf(&b, "{\"op_table\": %d, \"symbols\": [", MUSA_OP_TABLE_VERSION);
    for (int64_t s = 0; s < g->syms.len; s++) {
        const musa_gsym *y = &g->syms.data[s];
        musa_sb_printf(&b, "%s{\"name\": ", s ? ", " : "");
        musa_sb_json_str(&b, y->name);
        musa_sb_printf(&b, ", \"lo\": %lld, \"hi\": %lld, \"traced\": %lld}", (long long)y->lo,
                       (long long)y->hi, (long long)y->traced);
    }
    musa_sb_printf(&b, "], \"inputs\": [");
    for (int64_t i = 0; i < g->inputs.len; i++) {
        const musa_gvalue *v = &g->values.data[g->inputs.data[i]];
        vid[g->inputs.data[i]] = next++;
        musa_sb_printf(&b, "%s{\"name\": ", i ? ", " : "");
        if (v->name)
            musa_sb_json_str(&b, v->name);
        else
            musa_sb_printf(&b, "null");
        musa_sb_printf(&b, ", ");
        sb_shape(&b, v, true);
        musa_sb_printf(&b, "}");
    }
    musa_sb_printf(&b, "], \"leaves\": [");
    bool first = true;
    for (int64_t i = 0; i < nv; i++) {
        const musa_gvalue *v = &g->values.data[i];
        if ((v->kind != MUSA_V_PARAM && v->kind != MUSA_V_CONST) || !used[i]) continue;
        int64_t t = musa_file_writer_add_tensor(w, v->tensor);
        if (t < 0) {
            rc = (int)t;
            goto done;
        }
        vid[i] = next++;
        musa_sb_printf(&b, "%s{\"kind\": \"%s\", \"tensor\": %lld, \"number\": %s}",
                       first ? "" : ", ", v->kind == MUSA_V_PARAM ? "param" : "const", (long long)t,
                       (v->tensor->flags & MUSA_TF_NUMBER) ? "true" : "false");
        first = false;
    }
    musa_sb_printf(&b, "], \"nodes\": [");
    first = true;
    for (int64_t i = 0; i < nn; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        musa_sb_printf(&b, "%s{\"op\": \"%s\", \"in\": [", first ? "" : ", ", musa_ops[n->op].name);
        for (int k = 0; k < n->n_in; k++) {
            if (vid[n->in[k]] < 0) {
                rc = musa_err(MUSA_ERR_VALUE, "[%s] node %lld reads %%%d, which is not saved", SAVE,
                              (long long)i, n->in[k]);
                goto done;
            }
            musa_sb_printf(&b, "%s%d", k ? ", " : "", vid[n->in[k]]);
        }
        musa_sb_printf(&b, "], \"attrs\": ");
        sb_attrs(&b, n);
        musa_sb_printf(&b, ", \"out\": [");
        for (int j = 0; j < n->n_out; j++) {
            vid[n->out[j]] = next++;
            musa_sb_printf(&b, "%s{", j ? ", " : "");
            sb_shape(&b, &g->values.data[n->out[j]], true);
            musa_sb_printf(&b, "}");
        }
        musa_sb_printf(&b, "]");
        if (n->loc) {
            musa_sb_printf(&b, ", \"loc\": ");
            musa_sb_json_str(&b, n->loc);
        }
        musa_sb_printf(&b, "}");
        first = false;
    }
    /* node ids in the file: the live nodes, counted */
    for (int64_t i = 0, k = 0; i < nn; i++) nid[i] = g->nodes.data[i].dead ? -1 : (int32_t)k++;
    musa_sb_printf(&b, "], \"outputs\": [");
    for (int64_t i = 0; i < g->outputs.len; i++)
        musa_sb_printf(&b, "%s%d", i ? ", " : "", vid[g->outputs.data[i]]);
    musa_sb_printf(&b, "], \"mutations\": [");
    for (int64_t i = 0; i < g->mutations.len; i++)
        musa_sb_printf(&b, "%s[%d, %d]", i ? ", " : "", vid[g->mutations.data[i].target],
                       vid[g->mutations.data[i].value]);
    musa_sb_printf(&b, "]}");

    musa_sb_printf(
        &c, "{\"fusion_level\": %d, \"memory_arena\": %s, \"num_threads\": %d, \"disabled\": ",
        o->fusion_level, o->memory_arena ? "true" : "false", o->num_threads);
    musa_sb_json_str(&c, o->disabled ? o->disabled : "");
    if (o->channels_last) musa_sb_printf(&c, ", \"channels_last\": true");
    if (o->fuse_attention) musa_sb_printf(&c, ", \"fuse_attention\": true");
    if (o->winograd) musa_sb_printf(&c, ", \"winograd\": true");
    musa_sb_printf(&c, "}");

    musa_sb_printf(&dy, "[");
    for (int s = 0; s < o->n_slopes; s++) {
        const musa_attr_slope *sl = &o->slopes[s];
        if (sl->node < 0 || sl->node >= nn || nid[sl->node] < 0 || !sl->field || sl->n < 0 ||
            sl->n > MUSA_MAX_ATTR_INTS) {
            rc = musa_err(MUSA_ERR_VALUE, "[%s] slope %d names no live node's attribute", SAVE, s);
            goto done;
        }
        musa_sb_printf(&dy, "%s{\"node\": %d, \"field\": ", s ? ", " : "", nid[sl->node]);
        musa_sb_json_str(&dy, sl->field);
        musa_sb_printf(&dy, ", \"values\": [");
        for (int k = 0; k < sl->n; k++)
            musa_sb_printf(&dy, "%s%lld", k ? ", " : "", (long long)sl->values[k]);
        musa_sb_printf(&dy, "], \"slope\": [");
        for (int k = 0; k < sl->n; k++)
            musa_sb_printf(&dy, "%s%lld", k ? ", " : "", (long long)sl->slope[k]);
        musa_sb_printf(&dy, "]}");
    }
    musa_sb_printf(&dy, "]");
done:
    *graph_json = musa_sb_finish(&b, SAVE);
    *config_json = musa_sb_finish(&c, SAVE);
    *dynamic_json = musa_sb_finish(&dy, SAVE);
    if (!rc && (!*graph_json || !*config_json || !*dynamic_json)) rc = MUSA_ERR_NOMEM;
    free(vid), free(nid), free(used);
    return rc;
}

int musa_model_save(const musa_graph *g, const char *path, const musa_model_save_options *opt) {
    musa_model_save_options def = {.fusion_level = 2, .memory_arena = true};
    const musa_model_save_options *o = opt ? opt : &def;
    if (!g || !path) return musa_err(MUSA_ERR_VALUE, "[%s] graph and path must be given", SAVE);
    if (g->capturing) return musa_err(MUSA_ERR_RUNTIME, "[%s] the graph is still capturing", SAVE);
    if (g->breaks.len)
        return musa_err(MUSA_ERR_NOT_IMPLEMENTED,
                        "[%s] the graph reads a tensor value on the host at %s (a graph break); "
                        "a saved model is one graph without breaks",
                        SAVE, g->breaks.data[0].loc ? g->breaks.data[0].loc : "an unknown line");
    if (o->fusion_level < 0 || o->fusion_level > 2 || o->num_threads < 0)
        return musa_err(MUSA_ERR_VALUE, "[%s] fusion_level %d or num_threads %d out of range", SAVE,
                        o->fusion_level, o->num_threads);
    int rc = musa_graph_verify(g);
    if (rc) return rc;
    musa_file_writer *w = musa_file_writer_new("model");
    if (!w) return MUSA_ERR_NOMEM;
    char *gj = NULL, *cj = NULL, *dj = NULL;
    rc = graph_members(g, o, w, &gj, &cj, &dj);
    if (!rc) rc = musa_file_writer_set_json(w, "graph", gj);
    if (!rc) rc = musa_file_writer_set_json(w, "config", cj);
    if (!rc) rc = musa_file_writer_set_json(w, "dynamic", dj);
    if (!rc && o->extra_key)
        rc = musa_file_writer_set_json(w, o->extra_key, o->extra_json ? o->extra_json : "null");
    if (!rc) rc = musa_file_writer_save(w, path);
    free(gj), free(cj), free(dj);
    musa_file_writer_free(w);
    return rc;
}
