/*
 * model_read.c - reading a saved model's header members back into a graph
 * (model_save.c writes them; docs/format.md has the layout).
 *
 * It trusts nothing: every member is checked for type and range and for
 * unknown names, ops and attribute fields must exist, and each node is
 * added through the op's own inference (which checks attribute values and
 * shapes exactly as for a live call); the outputs it infers must match what
 * the file recorded. The graph is then verified. Errors name the file, the
 * member path and the byte offset.
 */
#include <math.h>
#include <stdio.h>

#include "../backend/attrs.h"
#include "../tensor/tensor.h"
#include "model.h"

static const char *LOAD = "musa_model_load";

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

/* A custom op's attributes: {"name": "mylib::scale"}, registered in this
 * process under that name. */
static int read_custom(loader *L, const musa_json *attrs, const char *p, musa_attrs_any *rec) {
    static const char *const keys[] = {"name"};
    const musa_json *name;
    int rc;
    if ((rc = musa_file_check_keys(L->f, LOAD, attrs, p, keys, 1)) ||
        (rc = member(L, attrs, "name", MUSA_JSON_STRING, p, &name)))
        return rc;
    int index = strlen(name->str) == name->len ? musa_custom_op_find(name->str) : -1;
    if (index < 0)
        return musa_file_bad(L->f, LOAD, name,
                             "%s: custom op \"%.64s\" is not registered in this process "
                             "(musa_op_register it before loading)",
                             p, name->str);
    musa_attrs_init(MUSA_ATTRS_custom, rec);
    rec->custom.index = index;
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
        if (op == MUSA_OP_custom) {
            rc = read_custom(L, attrs, pa, &rec);
            if (rc) break;
        } else if ((rc = read_attrs(L, attrs, pa, (musa_op_id)op, &rec))) {
            break;
        }
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
    static const char *const c_keys[] = {"fusion_level", "num_threads",   "memory_arena",
                                         "disabled",     "channels_last", "fuse_attention",
                                         "winograd"};
    int rc = musa_file_check_keys(f, LOAD, c, "config", c_keys, 7);
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
    bool flag[3]; /* optional booleans: absent means false */
    static const char *const flags[3] = {"channels_last", "fuse_attention", "winograd"};
    for (int i = 0; i < 3; i++) {
        const musa_json *b = musa_json_get(c, flags[i]);
        if (b && b->type != MUSA_JSON_BOOL)
            return musa_file_bad(f, LOAD, b, "config.%s must be a boolean", flags[i]);
        flag[i] = b && b->boolean;
    }
    m->ctx = (musa_pass_ctx){.fusion_level = (int)fl,
                             .disabled = m->disabled[0] ? m->disabled : NULL,
                             .channels_last = flag[0],
                             .fuse_attention = flag[1],
                             .winograd = flag[2]};
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
                       : ((const musa_ints *)((const char *)gn->attrs + fd->offset))->n;
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

int musa_model_read(musa_model *m, const musa_file *f) {
    const musa_json *gj = musa_json_get(musa_file_json(f), "graph");
    if (!gj) return musa_file_bad(f, LOAD, musa_file_json(f), "the header has no \"graph\"");
    loader L = {.f = f, .g = m->g};
    int rc = read_graph(&L, gj);
    free(L.vmap);
    if (!rc) rc = read_config(m, f);
    if (!rc) rc = read_dynamic(m, f);
    return rc;
}
