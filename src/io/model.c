/*
 * model.c - saved compiled models: a captured graph written into a .musa
 * file of kind "model" (musa_model_save), and the runtime that loads one
 * and runs it without Python (musa_model_load / musa_model_run).
 *
 * The file's "graph" member (docs/format.md) lists the graph's inputs
 * (name, dtype, shape, which dims follow a dynamic size), its leaves
 * (parameters and constants: indices into the file's tensors), its nodes in
 * order (op by its ops.def name, typed attributes by field name, inputs by
 * value index, the outputs' dtypes and shapes, the user's source line), its
 * outputs and mutations. Value indices count inputs, then leaves, then each
 * node's outputs in order, so a node can only name values made before it:
 * a file cannot express a cycle. "config" holds the pass and plan options
 * the model was compiled with; "dynamic" the symbol's range and the
 * integer attributes that follow it.
 *
 * Loading trusts nothing: every member is checked for type and range, ops
 * and attribute names must exist, and each node is added through the op's
 * own inference (which checks attribute values and shapes exactly as for a
 * live call); the outputs it infers must match what the file recorded. The
 * graph is then verified. Errors name the file, the member path and the
 * byte offset.
 *
 * A run checks its inputs (count, dtype, rank, fixed dims, dynamic dims in
 * range and equal), then runs the plan for those shapes: one plan for a
 * static model, else one per size seen (respecialised, optimised and
 * planned as musa.jit does for a live dynamic model), the most recent
 * MODEL_PLANS kept. Runs are serialised by a lock.
 */
#include <pthread.h>
#include <stdio.h>

#include "../backend/attrs.h"
#include "../base/sbuf.h"
#include "../jit/graph.h"
#include "../tensor/tensor.h"
#include "file.h"

#define MODEL_PLANS 8 /* plans kept per dynamic model */

static const char *SAVE = "musa_model_save";
static const char *LOAD = "musa_model_load";

/* ======================================================================== */
/* Saving                                                                   */
/* ======================================================================== */

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
    if (info->attrs_kind == MUSA_ATTRS_none) {
        musa_sb_printf(b, "}");
        return;
    }
    const musa_attrs_desc *d = musa_attrs_desc_of(info->attrs_kind);
    const char *rec = (const char *)&n->attrs;
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
    musa_model_save_options def = {.fusion_level = 1, .memory_arena = true};
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

/* ======================================================================== */
/* Loading                                                                  */
/* ======================================================================== */

typedef struct variant {
    int64_t shapes[8][MUSA_MAX_DIMS]; /* first min(n_inputs, 8) inputs' shapes (a key hint) */
    int64_t size;                     /* the dynamic size it serves */
    musa_graph *g;
    musa_plan *plan;
    uint64_t used; /* run counter at the last use */
} variant;

struct musa_model {
    musa_graph *g; /* as loaded: before segmenting and passes */
    char *header;  /* the file's header text */
    musa_pass_ctx ctx;
    char disabled[256];
    musa_plan_options popt;
    /* dynamic: the symbol 0 range and the attributes that follow it */
    bool dynamic;
    int64_t lo, hi, traced;
    int n_slopes;
    musa_attr_override *base; /* [n_slopes] values at the traced size */
    int64_t (*slope)[MUSA_MAX_ATTR_INTS];
    variant v[MODEL_PLANS];
    int n_v;
    uint64_t runs;
    pthread_mutex_t lock;
};

typedef struct loader {
    const musa_file *f;
    musa_graph *g;
    int32_t n_values; /* file value ids so far */
    int32_t *vmap;    /* file value id -> graph value id */
    int64_t vcap;
} loader;

static int member(const loader *L, const musa_json *obj, const char *key, int type,
                  const char *path, const musa_json **out) {
    const musa_json *v = musa_json_get(obj, key);
    if (!v) return musa_file_bad(L->f, LOAD, obj, "%s.%s is missing", path, key);
    if (v->type != type)
        return musa_file_bad(L->f, LOAD, v, "%s.%s must be %s, not %s", path, key,
                             type == MUSA_JSON_ARRAY    ? "an array"
                             : type == MUSA_JSON_OBJECT ? "an object"
                                                        : musa_json_type_name(type),
                             musa_json_type_name(v->type));
    *out = v;
    return MUSA_OK;
}

static int push_value(loader *L, int32_t gid) {
    if (L->n_values >= L->vcap) {
        int64_t cap = L->vcap ? L->vcap * 2 : 64;
        int32_t *m = realloc(L->vmap, sizeof(int32_t) * (size_t)cap);
        if (!m) return musa_err_nomem(LOAD, sizeof(int32_t) * (size_t)cap);
        L->vmap = m, L->vcap = cap;
    }
    L->vmap[L->n_values++] = gid;
    return MUSA_OK;
}

/* dtype name -> dtype, or an error naming path */
static int read_dtype(const loader *L, const musa_json *v, const char *path, int *out) {
    if (!v || v->type != MUSA_JSON_STRING)
        return musa_file_bad(L->f, LOAD, v, "%s must be a dtype name", path);
    int d = musa_dtype_from_name(v->str);
    if (d < 0) return musa_file_bad(L->f, LOAD, v, "%s: unknown dtype \"%.40s\"", path, v->str);
    *out = d;
    return MUSA_OK;
}

static int read_shape(const loader *L, const musa_json *obj, const char *path, int *ndim,
                      int64_t *shape, int8_t *sym) {
    const musa_json *s;
    char p[96];
    int rc = member(L, obj, "shape", MUSA_JSON_ARRAY, path, &s);
    if (rc) return rc;
    if (s->n > MUSA_MAX_DIMS)
        return musa_file_bad(L->f, LOAD, s, "%s.shape has %d dims; at most %d", path, s->n,
                             MUSA_MAX_DIMS);
    for (int d = 0; d < s->n; d++) {
        snprintf(p, sizeof p, "%s.shape[%d]", path, d);
        if ((rc = musa_file_int(L->f, LOAD, &s->kid[d], p, 0, INT64_MAX, &shape[d]))) return rc;
    }
    *ndim = s->n;
    memset(sym, -1, MUSA_MAX_DIMS);
    const musa_json *y = musa_json_get(obj, "sym");
    if (!y) return MUSA_OK;
    if (y->type != MUSA_JSON_ARRAY || y->n != s->n)
        return musa_file_bad(L->f, LOAD, y, "%s.sym must be an array of %d symbol indices", path,
                             s->n);
    for (int d = 0; d < y->n; d++) {
        int64_t k;
        snprintf(p, sizeof p, "%s.sym[%d]", path, d);
        if ((rc = musa_file_int(L->f, LOAD, &y->kid[d], p, -1, (int64_t)L->g->syms.len - 1, &k)))
            return rc;
        sym[d] = (int8_t)k;
    }
    return MUSA_OK;
}

/* A value id of the file, defined before this point. */
static int read_vid(const loader *L, const musa_json *v, const char *path, int32_t *out) {
    int64_t k;
    int rc = musa_file_int(L->f, LOAD, v, path, 0, (int64_t)L->n_values - 1, &k);
    if (rc) return rc;
    *out = L->vmap[k];
    return MUSA_OK;
}

static int read_symbols(loader *L, const musa_json *gj) {
    const musa_json *arr;
    int rc = member(L, gj, "symbols", MUSA_JSON_ARRAY, "graph", &arr);
    if (rc) return rc;
    if (arr->n > 1)
        return musa_file_bad(L->f, LOAD, arr,
                             "graph.symbols has %d symbols; this build handles one", arr->n);
    for (int i = 0; i < arr->n; i++) {
        const musa_json *s = &arr->kid[i], *name;
        char p[64];
        snprintf(p, sizeof p, "graph.symbols[%d]", i);
        int64_t lo, hi, tr;
        static const char *const s_keys[] = {"name", "lo", "hi", "traced"};
        if (s->type != MUSA_JSON_OBJECT)
            return musa_file_bad(L->f, LOAD, s, "%s must be an object", p);
        if ((rc = musa_file_check_keys(L->f, LOAD, s, p, s_keys, 4)) ||
            (rc = member(L, s, "name", MUSA_JSON_STRING, p, &name)))
            return rc;
        if ((rc = musa_file_int(L->f, LOAD, musa_json_get(s, "lo"), "lo", 0, INT64_MAX, &lo)) ||
            (rc = musa_file_int(L->f, LOAD, musa_json_get(s, "hi"), "hi", lo, INT64_MAX, &hi)) ||
            (rc = musa_file_int(L->f, LOAD, musa_json_get(s, "traced"), "traced", lo, hi, &tr)))
            return rc;
        if (musa_graph_add_symbol(L->g, name->str, lo, hi, tr) < 0)
            return musa_file_bad(L->f, LOAD, s, "%s: %s", p, musa_last_error());
    }
    return MUSA_OK;
}

static int read_inputs(loader *L, const musa_json *gj) {
    const musa_json *arr;
    int rc = member(L, gj, "inputs", MUSA_JSON_ARRAY, "graph", &arr);
    if (rc) return rc;
    for (int i = 0; i < arr->n; i++) {
        const musa_json *in = &arr->kid[i], *name = musa_json_get(in, "name");
        char p[64];
        snprintf(p, sizeof p, "graph.inputs[%d]", i);
        static const char *const in_keys[] = {"name", "dtype", "shape", "sym"};
        if (in->type == MUSA_JSON_OBJECT &&
            (rc = musa_file_check_keys(L->f, LOAD, in, p, in_keys, 4)))
            return rc;
        if (in->type != MUSA_JSON_OBJECT)
            return musa_file_bad(L->f, LOAD, in, "%s must be an object", p);
        int dt, nd;
        int64_t shape[MUSA_MAX_DIMS];
        int8_t sym[MUSA_MAX_DIMS];
        if ((rc = read_dtype(L, musa_json_get(in, "dtype"), p, &dt)) ||
            (rc = read_shape(L, in, p, &nd, shape, sym)))
            return rc;
        if (name && name->type != MUSA_JSON_NULL &&
            (name->type != MUSA_JSON_STRING || strlen(name->str) != name->len))
            return musa_file_bad(L->f, LOAD, name, "%s.name must be a string or null", p);
        int64_t numel;
        if (musa_shape_check(LOAD, nd, shape, &numel))
            return musa_file_bad(L->f, LOAD, in, "%s: %s", p, musa_last_error());
        int32_t id = musa_graph_new_value(L->g, MUSA_V_INPUT, (musa_dtype)dt, nd, shape);
        if (id < 0 || musa_vec_push(&L->g->inputs, id)) return musa_err_nomem(LOAD, 64);
        musa_gvalue *v = &L->g->values.data[id];
        memcpy(v->sym, sym, sizeof v->sym);
        if (name && name->type == MUSA_JSON_STRING &&
            !(v->name = musa_arena_strdup(&L->g->arena, name->str)))
            return MUSA_ERR_NOMEM;
        if ((rc = push_value(L, id))) return rc;
    }
    return MUSA_OK;
}

static int read_leaves(loader *L, const musa_json *gj) {
    const musa_json *arr;
    int rc = member(L, gj, "leaves", MUSA_JSON_ARRAY, "graph", &arr);
    if (rc) return rc;
    for (int i = 0; i < arr->n; i++) {
        const musa_json *lf = &arr->kid[i], *kind, *num = musa_json_get(lf, "number");
        char p[64];
        snprintf(p, sizeof p, "graph.leaves[%d]", i);
        static const char *const lf_keys[] = {"kind", "tensor", "number"};
        if (lf->type == MUSA_JSON_OBJECT &&
            (rc = musa_file_check_keys(L->f, LOAD, lf, p, lf_keys, 3)))
            return rc;
        if (lf->type != MUSA_JSON_OBJECT)
            return musa_file_bad(L->f, LOAD, lf, "%s must be an object", p);
        if ((rc = member(L, lf, "kind", MUSA_JSON_STRING, p, &kind))) return rc;
        bool param = !strcmp(kind->str, "param");
        if (!param && strcmp(kind->str, "const"))
            return musa_file_bad(L->f, LOAD, kind,
                                 "%s.kind must be \"param\" or \"const\", not \"%.20s\"", p,
                                 kind->str);
        if (num && num->type != MUSA_JSON_BOOL)
            return musa_file_bad(L->f, LOAD, num, "%s.number must be a boolean", p);
        int64_t t;
        char pt[80];
        snprintf(pt, sizeof pt, "%s.tensor", p);
        if ((rc = musa_file_int(L->f, LOAD, musa_json_get(lf, "tensor"), pt, 0,
                                musa_file_num_tensors(L->f) - 1, &t)))
            return rc;
        musa_tensor *x = musa_file_tensor(L->f, t);
        if (!x) return MUSA_ERR_NOMEM;
        if (num && num->boolean) {
            if (x->ndim != 0) {
                musa_tensor_release(x);
                return musa_file_bad(L->f, LOAD, num, "%s: a number must be a 0-d tensor", p);
            }
            x->flags |= MUSA_TF_NUMBER;
        }
        int32_t id = musa_graph_new_value(L->g, param ? MUSA_V_PARAM : MUSA_V_CONST,
                                          (musa_dtype)x->dtype, x->ndim, x->shape);
        if (id < 0) {
            musa_tensor_release(x);
            return MUSA_ERR_NOMEM;
        }
        musa_gvalue *v = &L->g->values.data[id];
        for (int d = 0; d < x->ndim; d++) v->strides[d] = x->strides[d];
        v->tensor = x; /* the reference from musa_file_tensor */
        if ((rc = push_value(L, id))) return rc;
    }
    return MUSA_OK;
}

static int read_attrs(const loader *L, const musa_json *a, const char *path, musa_op_id op,
                      musa_attrs_any *rec) {
    musa_attrs_kind kind = musa_ops[op].attrs_kind;
    musa_attrs_init(kind, rec);
    if (a->type != MUSA_JSON_OBJECT)
        return musa_file_bad(L->f, LOAD, a, "%s must be an object", path);
    char *base = (char *)rec;
    for (int i = 0; i < a->n; i++) {
        const musa_json *v = &a->kid[i];
        const musa_attr_field *f =
            kind == MUSA_ATTRS_none ? NULL : musa_attrs_field(kind, a->key[i]);
        if (!f)
            return musa_file_bad(L->f, LOAD, v, "%s: op %s has no attribute \"%.40s\"", path,
                                 musa_ops[op].name, a->key[i]);
        char p[128];
        snprintf(p, sizeof p, "%s.%s", path, f->name);
        void *dst = base + f->offset;
        int rc = MUSA_OK;
        switch (f->type) {
        case MUSA_ATTR_BOOL:
            if (v->type != MUSA_JSON_BOOL)
                return musa_file_bad(L->f, LOAD, v, "%s must be a boolean", p);
            *(bool *)dst = v->boolean;
            break;
        case MUSA_ATTR_INT:
            rc = musa_file_int(L->f, LOAD, v, p, INT64_MIN, INT64_MAX, (int64_t *)dst);
            break;
        case MUSA_ATTR_FLOAT:
            if (v->type == MUSA_JSON_NUMBER)
                *(double *)dst = v->num;
            else if (v->type == MUSA_JSON_STRING &&
                     (!strcmp(v->str, "nan") || !strcmp(v->str, "inf") || !strcmp(v->str, "-inf")))
                *(double *)dst = v->str[0] == 'n' ? NAN : v->str[0] == '-' ? -INFINITY : INFINITY;
            else
                return musa_file_bad(L->f, LOAD, v,
                                     "%s must be a number (or \"nan\", \"inf\", \"-inf\")", p);
            break;
        case MUSA_ATTR_DTYPE: {
            int d = -1;
            if (v->type != MUSA_JSON_NULL && (rc = read_dtype(L, v, p, &d))) return rc;
            *(int32_t *)dst = d;
            break;
        }
        case MUSA_ATTR_INTS: {
            musa_ints *out = dst;
            if (v->type != MUSA_JSON_ARRAY || v->n > MUSA_MAX_ATTR_INTS)
                return musa_file_bad(L->f, LOAD, v, "%s must be an array of at most %d integers", p,
                                     MUSA_MAX_ATTR_INTS);
            out->n = v->n;
            for (int k = 0; k < v->n && !rc; k++)
                rc = musa_file_int(L->f, LOAD, &v->kid[k], p, INT64_MIN, INT64_MAX, &out->v[k]);
            break;
        }
        }
        if (rc) return rc;
    }
    return MUSA_OK;
}

static int read_nodes(loader *L, const musa_json *gj) {
    const musa_json *arr;
    int rc = member(L, gj, "nodes", MUSA_JSON_ARRAY, "graph", &arr);
    if (rc) return rc;
    int32_t *in = NULL;
    int in_cap = 0;
    for (int i = 0; i < arr->n && !rc; i++) {
        const musa_json *n = &arr->kid[i], *opj, *ins, *attrs, *outs,
                        *loc = musa_json_get(n, "loc");
        char p[64];
        snprintf(p, sizeof p, "graph.nodes[%d]", i);
        if (n->type != MUSA_JSON_OBJECT) {
            rc = musa_file_bad(L->f, LOAD, n, "%s must be an object", p);
            break;
        }
        static const char *const n_keys[] = {"op", "in", "attrs", "out", "loc"};
        if ((rc = musa_file_check_keys(L->f, LOAD, n, p, n_keys, 5)) ||
            (rc = member(L, n, "op", MUSA_JSON_STRING, p, &opj)) ||
            (rc = member(L, n, "in", MUSA_JSON_ARRAY, p, &ins)) ||
            (rc = member(L, n, "attrs", MUSA_JSON_OBJECT, p, &attrs)) ||
            (rc = member(L, n, "out", MUSA_JSON_ARRAY, p, &outs)))
            break;
        int op = musa_op_lookup(opj->str);
        if (op < 0) {
            musa_clear_error();
            rc = musa_file_bad(L->f, LOAD, opj, "%s: unknown op \"%.40s\" (saved by a newer musa?)",
                               p, opj->str);
            break;
        }
        if (loc && (loc->type != MUSA_JSON_STRING || strlen(loc->str) != loc->len)) {
            rc = musa_file_bad(L->f, LOAD, loc, "%s.loc must be a string", p);
            break;
        }
        if (ins->n > in_cap) {
            int32_t *m = realloc(in, sizeof(int32_t) * (size_t)ins->n);
            if (!m) {
                rc = musa_err_nomem(LOAD, sizeof(int32_t) * (size_t)ins->n);
                break;
            }
            in = m, in_cap = ins->n;
        }
        for (int k = 0; k < ins->n && !rc; k++) {
            char pk[80];
            snprintf(pk, sizeof pk, "%s.in[%d]", p, k);
            rc = read_vid(L, &ins->kid[k], pk, &in[k]);
        }
        if (rc) break;
        musa_attrs_any rec;
        char pa[80];
        snprintf(pa, sizeof pa, "%s.attrs", p);
        if ((rc = read_attrs(L, attrs, pa, (musa_op_id)op, &rec))) break;
        int32_t out[MUSA_MAX_OUTPUTS];
        musa_clear_error();
        int32_t node = musa_graph_add_node(L->g, (musa_op_id)op, ins->n, in, &rec, out);
        if (node < 0) {
            char why[400];
            snprintf(why, sizeof why, "%s", musa_last_error());
            rc = musa_file_bad(L->f, LOAD, n, "%s (%s): %s", p, opj->str, why);
            break;
        }
        musa_gnode *gn = &L->g->nodes.data[node];
        if (loc && !(gn->loc = musa_arena_strdup(&L->g->arena, loc->str))) {
            rc = MUSA_ERR_NOMEM;
            break;
        }
        if (outs->n != gn->n_out) {
            rc = musa_file_bad(L->f, LOAD, outs, "%s (%s) records %d outputs; the op makes %d", p,
                               opj->str, outs->n, gn->n_out);
            break;
        }
        for (int j = 0; j < gn->n_out && !rc; j++) {
            musa_gvalue *v = &L->g->values.data[out[j]];
            int dt, nd;
            int64_t shape[MUSA_MAX_DIMS];
            int8_t sym[MUSA_MAX_DIMS];
            char pj[80];
            snprintf(pj, sizeof pj, "%s.out[%d]", p, j);
            if (outs->kid[j].type != MUSA_JSON_OBJECT) {
                rc = musa_file_bad(L->f, LOAD, &outs->kid[j], "%s must be an object", pj);
                break;
            }
            static const char *const o_keys[] = {"dtype", "shape", "sym"};
            if ((rc = musa_file_check_keys(L->f, LOAD, &outs->kid[j], pj, o_keys, 3)) ||
                (rc = read_dtype(L, musa_json_get(&outs->kid[j], "dtype"), pj, &dt)) ||
                (rc = read_shape(L, &outs->kid[j], pj, &nd, shape, sym)))
                break;
            if (dt != v->dtype || !musa_shape_equal(nd, shape, v->ndim, v->shape)) {
                char s1[128], s2[128];
                rc = musa_file_bad(L->f, LOAD, &outs->kid[j],
                                   "%s (%s): the file records %s%s, but the op infers %s%s", pj,
                                   opj->str, musa_dtype_name((musa_dtype)dt),
                                   musa_shape_str(nd, shape, s1, sizeof s1),
                                   musa_dtype_name((musa_dtype)v->dtype),
                                   musa_shape_str(v->ndim, v->shape, s2, sizeof s2));
                break;
            }
            memcpy(v->sym, sym, sizeof v->sym);
            rc = push_value(L, out[j]);
        }
    }
    free(in);
    return rc;
}

static int read_graph(loader *L, const musa_json *gj) {
    int rc;
    if (gj->type != MUSA_JSON_OBJECT)
        return musa_file_bad(L->f, LOAD, gj, "graph must be an object");
    static const char *const g_keys[] = {"op_table", "symbols", "inputs",   "leaves",
                                         "nodes",    "outputs", "mutations"};
    if ((rc = musa_file_check_keys(L->f, LOAD, gj, "graph", g_keys, 7))) return rc;
    int64_t ver;
    if ((rc = musa_file_int(L->f, LOAD, musa_json_get(gj, "op_table"), "graph.op_table", 1,
                            INT64_MAX, &ver)))
        return rc;
    if (ver > MUSA_OP_TABLE_VERSION)
        return musa_file_bad(L->f, LOAD, musa_json_get(gj, "op_table"),
                             "graph.op_table is version %lld; this build of musa has version %d "
                             "(the file needs a newer musa)",
                             (long long)ver, MUSA_OP_TABLE_VERSION);
    if ((rc = read_symbols(L, gj)) || (rc = read_inputs(L, gj)) || (rc = read_leaves(L, gj)) ||
        (rc = read_nodes(L, gj)))
        return rc;
    const musa_json *outs, *muts;
    if ((rc = member(L, gj, "outputs", MUSA_JSON_ARRAY, "graph", &outs)) ||
        (rc = member(L, gj, "mutations", MUSA_JSON_ARRAY, "graph", &muts)))
        return rc;
    for (int i = 0; i < outs->n; i++) {
        int32_t id;
        char p[64];
        snprintf(p, sizeof p, "graph.outputs[%d]", i);
        if ((rc = read_vid(L, &outs->kid[i], p, &id))) return rc;
        if (musa_vec_push(&L->g->outputs, id)) return MUSA_ERR_NOMEM;
    }
    for (int i = 0; i < muts->n; i++) {
        const musa_json *m = &muts->kid[i];
        char p[64];
        snprintf(p, sizeof p, "graph.mutations[%d]", i);
        if (m->type != MUSA_JSON_ARRAY || m->n != 2)
            return musa_file_bad(L->f, LOAD, m, "%s must be a [target, value] pair", p);
        musa_gmutation mu;
        if ((rc = read_vid(L, &m->kid[0], p, &mu.target)) ||
            (rc = read_vid(L, &m->kid[1], p, &mu.value)))
            return rc;
        const musa_gvalue *t = &L->g->values.data[mu.target], *v = &L->g->values.data[mu.value];
        if ((t->kind != MUSA_V_INPUT && t->kind != MUSA_V_PARAM) || t->dtype != v->dtype ||
            !musa_shape_equal(t->ndim, t->shape, v->ndim, v->shape))
            return musa_file_bad(
                L->f, LOAD, m,
                "%s: the target must be an input or parameter of the value's dtype and shape", p);
        if (musa_vec_push(&L->g->mutations, mu)) return MUSA_ERR_NOMEM;
    }
    musa_graph_analyse(L->g);
    if ((rc = musa_graph_verify(L->g))) {
        char why[400];
        snprintf(why, sizeof why, "%s", musa_last_error());
        return musa_file_bad(L->f, LOAD, gj, "graph: %s", why);
    }
    return MUSA_OK;
}

static int read_config(musa_model *m, const musa_file *f) {
    const musa_json *c = musa_json_get(musa_file_json(f), "config"), *dis;
    if (!c || c->type != MUSA_JSON_OBJECT)
        return musa_file_bad(f, LOAD, c ? c : musa_file_json(f), "config must be an object");
    int64_t fl, nt;
    static const char *const c_keys[] = {"fusion_level", "num_threads", "memory_arena", "disabled"};
    int rc = musa_file_check_keys(f, LOAD, c, "config", c_keys, 4);
    if (rc) return rc;
    if ((rc = musa_file_int(f, LOAD, musa_json_get(c, "fusion_level"), "config.fusion_level", 0, 2,
                            &fl)) ||
        (rc = musa_file_int(f, LOAD, musa_json_get(c, "num_threads"), "config.num_threads", 0, 4096,
                            &nt)))
        return rc;
    const musa_json *ar = musa_json_get(c, "memory_arena");
    if (!ar || ar->type != MUSA_JSON_BOOL)
        return musa_file_bad(f, LOAD, ar ? ar : c, "config.memory_arena must be a boolean");
    dis = musa_json_get(c, "disabled");
    if (!dis || dis->type != MUSA_JSON_STRING || dis->len >= sizeof m->disabled ||
        strlen(dis->str) != dis->len)
        return musa_file_bad(f, LOAD, dis ? dis : c,
                             "config.disabled must be a string of pass names");
    snprintf(m->disabled, sizeof m->disabled, "%s", dis->str);
    m->ctx =
        (musa_pass_ctx){.fusion_level = (int)fl, .disabled = m->disabled[0] ? m->disabled : NULL};
    m->popt = (musa_plan_options){.num_threads = (int)nt, .memory_arena = ar->boolean};
    return MUSA_OK;
}

static int read_dynamic(musa_model *m, const musa_file *f) {
    const musa_json *d = musa_json_get(musa_file_json(f), "dynamic");
    if (!d || d->type != MUSA_JSON_ARRAY)
        return musa_file_bad(f, LOAD, d ? d : musa_file_json(f), "dynamic must be an array");
    m->dynamic = m->g->syms.len > 0;
    if (m->dynamic) {
        const musa_gsym *y = &m->g->syms.data[0];
        m->lo = y->lo, m->hi = y->hi, m->traced = y->traced;
        bool any = false;
        for (int64_t i = 0; i < m->g->inputs.len; i++)
            for (int k = 0; k < m->g->values.data[m->g->inputs.data[i]].ndim; k++)
                any |= m->g->values.data[m->g->inputs.data[i]].sym[k] == 0;
        if (!any)
            return musa_file_bad(f, LOAD, d,
                                 "the graph declares a dynamic size that no input dim follows");
    } else if (d->n) {
        return musa_file_bad(f, LOAD, d, "dynamic attributes in a graph without a dynamic size");
    }
    m->n_slopes = d->n;
    m->base = calloc((size_t)d->n + 1, sizeof *m->base);
    m->slope = calloc((size_t)d->n + 1, sizeof *m->slope);
    if (!m->base || !m->slope) return musa_err_nomem(LOAD, sizeof *m->base * (size_t)d->n);
    int n_nodes = (int)m->g->nodes.len;
    for (int i = 0; i < d->n; i++) {
        const musa_json *s = &d->kid[i], *field = musa_json_get(s, "field"),
                        *vals = musa_json_get(s, "values"), *sl = musa_json_get(s, "slope");
        char p[64];
        snprintf(p, sizeof p, "dynamic[%d]", i);
        static const char *const d_keys[] = {"node", "field", "values", "slope"};
        if (s->type != MUSA_JSON_OBJECT)
            return musa_file_bad(f, LOAD, s, "%s must be an object", p);
        int64_t node;
        int rc = musa_file_check_keys(f, LOAD, s, p, d_keys, 4);
        if (!rc)
            rc = musa_file_int(f, LOAD, musa_json_get(s, "node"), "node", 0, n_nodes - 1, &node);
        if (rc) return rc;
        const musa_gnode *gn = &m->g->nodes.data[node];
        musa_attrs_kind kind = musa_ops[gn->op].attrs_kind;
        const musa_attr_field *fd =
            field && field->type == MUSA_JSON_STRING && kind != MUSA_ATTRS_none
                ? musa_attrs_field(kind, field->str)
                : NULL;
        if (!fd || (fd->type != MUSA_ATTR_INT && fd->type != MUSA_ATTR_INTS))
            return musa_file_bad(f, LOAD, field ? field : s,
                                 "%s.field must name an integer attribute of node %lld (%s)", p,
                                 (long long)node, musa_ops[gn->op].name);
        int want = fd->type == MUSA_ATTR_INT
                       ? 1
                       : ((const musa_ints *)((const char *)&gn->attrs + fd->offset))->n;
        if (!vals || !sl || vals->type != MUSA_JSON_ARRAY || sl->type != MUSA_JSON_ARRAY ||
            vals->n != want || sl->n != want)
            return musa_file_bad(f, LOAD, s, "%s: values and slope must be arrays of %d integers",
                                 p, want);
        m->base[i] = (musa_attr_override){.node = (int)node, .field = fd->name, .n = want};
        for (int k = 0; k < want; k++)
            if ((rc = musa_file_int(f, LOAD, &vals->kid[k], "values", INT64_MIN / 4, INT64_MAX / 4,
                                    &m->base[i].v[k])) ||
                (rc = musa_file_int(f, LOAD, &sl->kid[k], "slope", -(1 << 20), 1 << 20,
                                    &m->slope[i][k])))
                return rc;
    }
    return MUSA_OK;
}

void musa_model_free(musa_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_v; i++) musa_plan_free(m->v[i].plan), musa_graph_free(m->v[i].g);
    musa_graph_free(m->g);
    free(m->header), free(m->base), free(m->slope);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static musa_model *load_file(musa_file *f) {
    if (!f) return NULL;
    musa_model *m = calloc(1, sizeof *m);
    loader L = {.f = f};
    int rc = m ? MUSA_OK : musa_err_nomem(LOAD, sizeof *m);
    if (!rc) {
        pthread_mutex_init(&m->lock, NULL);
        if (strcmp(musa_file_kind(f), "model"))
            rc = musa_file_bad(f, LOAD, musa_json_get(musa_file_json(f), "kind"),
                               "the file holds a \"%s\", not a model (musa.load reads it)",
                               musa_file_kind(f));
    }
    const musa_json *gj = rc ? NULL : musa_json_get(musa_file_json(f), "graph");
    if (!rc && !gj) rc = musa_file_bad(f, LOAD, musa_file_json(f), "the header has no \"graph\"");
    if (!rc && !(m->g = L.g = musa_graph_new())) rc = MUSA_ERR_NOMEM;
    if (!rc) rc = read_graph(&L, gj);
    if (!rc) rc = read_config(m, f);
    if (!rc) rc = read_dynamic(m, f);
    if (!rc && !(m->header = strdup(musa_file_header(f))))
        rc = musa_err_nomem(LOAD, strlen(musa_file_header(f)));
    free(L.vmap);
    musa_file_close(f);
    if (rc) {
        musa_model_free(m);
        return NULL;
    }
    return m;
}

musa_model *musa_model_load(const char *path, int flags) {
    musa_file *f = musa_file_open(path, flags);
    if (!f) musa_err_prefix(LOAD);
    return load_file(f);
}

musa_model *musa_model_load_memory(const void *data, size_t size) {
    musa_file *f = musa_file_open_memory(data, size);
    return load_file(f);
}

const char *musa_model_header(const musa_model *m) {
    return m ? m->header : NULL;
}

const musa_graph *musa_model_graph(const musa_model *m) {
    return m ? m->g : NULL;
}

int musa_model_num_inputs(const musa_model *m) {
    return m ? (int)m->g->inputs.len : 0;
}

int musa_model_num_outputs(const musa_model *m) {
    return m ? (int)m->g->outputs.len : 0;
}

int musa_model_input(const musa_model *m, int i, const char **name, musa_dtype *dtype, int *ndim,
                     int64_t *dims, int64_t *lo, int64_t *hi) {
    if (!m || i < 0 || i >= m->g->inputs.len)
        return musa_err(MUSA_ERR_INDEX, "[musa_model_input] input %d is out of range for %d", i,
                        m ? (int)m->g->inputs.len : 0);
    const musa_gvalue *v = &m->g->values.data[m->g->inputs.data[i]];
    if (name) *name = v->name;
    if (dtype) *dtype = (musa_dtype)v->dtype;
    if (ndim) *ndim = v->ndim;
    for (int d = 0; dims && d < v->ndim; d++) dims[d] = v->sym[d] >= 0 ? -1 : v->shape[d];
    if (lo) *lo = m->dynamic ? m->lo : 0;
    if (hi) *hi = m->dynamic ? m->hi : 0;
    return MUSA_OK;
}

/* ---- running ---- */

static const char *input_name(const musa_model *m, int i, char *buf, size_t n) {
    const char *name = m->g->values.data[m->g->inputs.data[i]].name;
    if (name) return name;
    snprintf(buf, n, "input %d", i);
    return buf;
}

/* Check the inputs against the signature; the dynamic size into *size. */
static int check_inputs(const musa_model *m, int n_in, musa_tensor *const *in, int64_t *size) {
    static const char *who = "musa_model_run";
    if (n_in != m->g->inputs.len)
        return musa_err(MUSA_ERR_VALUE, "[%s] the model takes %lld inputs, got %d", who,
                        (long long)m->g->inputs.len, n_in);
    *size = -1;
    const char *size_from = NULL;
    char nb[32], nb2[32], s1[128], s2[128];
    for (int i = 0; i < n_in; i++) {
        const musa_gvalue *v = &m->g->values.data[m->g->inputs.data[i]];
        const musa_tensor *t = in[i];
        const char *name = input_name(m, i, nb, sizeof nb);
        if (!t) return musa_err(MUSA_ERR_VALUE, "[%s] %s is NULL", who, name);
        if (t->dtype != v->dtype)
            return musa_err(MUSA_ERR_TYPE, "[%s] %s is %s; the model was saved for %s", who, name,
                            musa_dtype_name((musa_dtype)t->dtype),
                            musa_dtype_name((musa_dtype)v->dtype));
        if (t->ndim != v->ndim)
            return musa_err(MUSA_ERR_VALUE,
                            "[%s] %s has %d dims %s; the model was saved for %d dims %s", who, name,
                            t->ndim, musa_shape_str(t->ndim, t->shape, s1, sizeof s1), v->ndim,
                            musa_shape_str(v->ndim, v->shape, s2, sizeof s2));
        for (int d = 0; d < v->ndim; d++) {
            if (v->sym[d] < 0) {
                if (t->shape[d] != v->shape[d])
                    return musa_err(
                        MUSA_ERR_VALUE,
                        "[%s] %s dim %d is %lld; the model was saved for %lld (a fixed dim)", who,
                        name, d, (long long)t->shape[d], (long long)v->shape[d]);
                continue;
            }
            if (t->shape[d] < m->lo || t->shape[d] > m->hi)
                return musa_err(MUSA_ERR_VALUE,
                                "[%s] %s dim %d is %lld, outside its dynamic range [%lld, %lld]",
                                who, name, d, (long long)t->shape[d], (long long)m->lo,
                                (long long)m->hi);
            if (*size >= 0 && t->shape[d] != *size)
                return musa_err(
                    MUSA_ERR_VALUE,
                    "[%s] %s dim %d is %lld but %s has %lld: both follow one dynamic size", who,
                    name, d, (long long)t->shape[d], size_from, (long long)*size);
            *size = t->shape[d];
            size_from = input_name(m, i, nb2, sizeof nb2);
        }
    }
    return MUSA_OK;
}

/* The compiled form of g (segmented, optimised, planned) into v. */
static int build_variant(musa_model *m, const musa_graph *g, variant *v) {
    musa_segment_options so = {.mutations = true, .n_inputs = -1};
    int *carried = NULL, nc = 0;
    v->g = musa_graph_segment(g, 0, (int)g->nodes.len, (int)g->outputs.len, g->outputs.data, &so,
                              &carried, &nc);
    free(carried);
    if (!v->g) return musa_last_error_code();
    musa_pass_ctx ctx = m->ctx;
    int rc = musa_graph_optimize(v->g, &ctx);
    if (!rc && !(v->plan = musa_plan_build(v->g, &m->popt))) rc = musa_last_error_code();
    if (rc) {
        musa_graph_free(v->g);
        v->g = NULL;
    }
    return rc;
}

/* The plan for this call (built on first use). Called with the lock held. */
static musa_plan *plan_for(musa_model *m, int n_in, musa_tensor *const *in, int64_t size) {
    for (int i = 0; i < m->n_v; i++)
        if (!m->dynamic || m->v[i].size == size) {
            m->v[i].used = ++m->runs;
            return m->v[i].plan;
        }
    variant nv = {.size = size};
    int rc;
    if (!m->dynamic) {
        rc = build_variant(m, m->g, &nv);
    } else {
        int64_t(*shapes)[MUSA_MAX_DIMS] = calloc((size_t)n_in + 1, sizeof *shapes);
        musa_attr_override *over = calloc((size_t)m->n_slopes + 1, sizeof *over);
        if (!shapes || !over) {
            free(shapes), free(over);
            musa_err_nomem("musa_model_run", 64);
            return NULL;
        }
        for (int i = 0; i < n_in; i++)
            memcpy(shapes[i], in[i]->shape, sizeof(int64_t) * (size_t)in[i]->ndim);
        bool overflow = false; /* attributes affine in the size: checked arithmetic */
        for (int s = 0; s < m->n_slopes; s++) {
            over[s] = m->base[s];
            for (int k = 0; k < over[s].n; k++) {
                int64_t step;
                overflow |= !musa_mul_i64(m->slope[s][k], size - m->traced, &step) ||
                            !musa_add_i64(over[s].v[k], step, &over[s].v[k]);
            }
        }
        if (overflow) {
            free(shapes), free(over);
            musa_err(MUSA_ERR_VALUE,
                     "[musa_model_run] at dynamic size %lld an attribute that follows the size "
                     "overflows 64 bits",
                     (long long)size);
            return NULL;
        }
        musa_graph *g = musa_graph_respecialize(m->g, (const int64_t(*)[MUSA_MAX_DIMS])shapes,
                                                m->n_slopes, over);
        free(shapes), free(over);
        if (!g) {
            musa_err_prefix("musa_model_run");
            return NULL;
        }
        rc = build_variant(m, g, &nv);
        musa_graph_free(g);
    }
    if (rc) return NULL;
    int slot = m->n_v;
    if (slot == MODEL_PLANS) { /* replace the least recently used */
        slot = 0;
        for (int i = 1; i < m->n_v; i++)
            if (m->v[i].used < m->v[slot].used) slot = i;
        musa_plan_free(m->v[slot].plan), musa_graph_free(m->v[slot].g);
    } else {
        m->n_v++;
    }
    nv.used = ++m->runs;
    m->v[slot] = nv;
    return nv.plan;
}

int musa_model_run(musa_model *m, int n_in, musa_tensor *const *inputs, int n_out,
                   musa_tensor **outputs) {
    if (!m || (n_in && !inputs) || (n_out && !outputs))
        return musa_err(MUSA_ERR_VALUE, "[musa_model_run] model, inputs and outputs must be given");
    for (int j = 0; j < n_out; j++) outputs[j] = NULL;
    if (n_out != m->g->outputs.len)
        return musa_err(MUSA_ERR_VALUE,
                        "[musa_model_run] the model has %lld outputs, room for %d given",
                        (long long)m->g->outputs.len, n_out);
    int64_t size;
    int rc = check_inputs(m, n_in, inputs, &size);
    if (rc) return rc;
    /* plans take contiguous inputs */
    musa_tensor **in = calloc((size_t)n_in + 1, sizeof *in);
    if (!in) return musa_err_nomem("musa_model_run", sizeof *in * (size_t)n_in);
    for (int i = 0; i < n_in && !rc; i++)
        if (!(in[i] = musa_tensor_is_contiguous(inputs[i]) ? musa_tensor_retain(inputs[i])
                                                           : musa_contiguous(inputs[i])))
            rc = musa_last_error_code();
    if (!rc) {
        pthread_mutex_lock(&m->lock);
        musa_plan *p = plan_for(m, n_in, in, size);
        rc = p ? musa_plan_run(p, n_in, in, n_out, outputs) : musa_last_error_code();
        pthread_mutex_unlock(&m->lock);
    }
    /* writes into a non-contiguous input's copy go back into it */
    for (int i = 0; i < n_in; i++) {
        if (!rc && in[i] != inputs[i] && musa_tensor_version(in[i]) != 0)
            rc = musa_copy_(inputs[i], in[i]);
        musa_tensor_release(in[i]);
    }
    free(in);
    return rc;
}
