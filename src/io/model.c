/*
 * model.c - the runtime of saved models: musa_model_load (the file read by
 * model_read.c), its accessors, and musa_model_run.
 *
 * A run checks its inputs (count, dtype, rank, fixed dims, dynamic dims in
 * range and equal), then runs the plan for those shapes: one plan for a
 * static model, else one per size seen (respecialised, optimised and
 * planned as musa.jit does for a live dynamic model), the most recent
 * MODEL_PLANS kept. Runs are serialised by a lock.
 */
#include <stdio.h>
#include <strings.h>

#include "../tensor/tensor.h"
#include "model.h"
#include "onnx.h"

static const char *LOAD = "musa_model_load";

void musa_model_free(musa_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_v; i++)
        musa_plan_free(m->v[i].plan), musa_graph_free(m->v[i].g), free(m->v[i].dims);
    musa_graph_free(m->g);
    musa_onnx_free(m->onnx);
    free(m->header), free(m->base), free(m->slope);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static musa_model *load_file(musa_file *f) {
    if (!f) return NULL;
    musa_model *m = calloc(1, sizeof *m);
    int rc = m ? MUSA_OK : musa_err_nomem(LOAD, sizeof *m);
    if (!rc) {
        pthread_mutex_init(&m->lock, NULL);
        if (strcmp(musa_file_kind(f), "model"))
            rc = musa_file_bad(f, LOAD, musa_json_get(musa_file_json(f), "kind"),
                               "the file holds a \"%s\", not a model (musa.load reads it)",
                               musa_file_kind(f));
    }
    if (!rc && !(m->g = musa_graph_new())) rc = MUSA_ERR_NOMEM;
    if (!rc) rc = musa_model_read(m, f);
    if (!rc && !(m->header = strdup(musa_file_header(f))))
        rc = musa_err_nomem(LOAD, strlen(musa_file_header(f)));
    musa_file_close(f);
    if (rc) {
        musa_model_free(m);
        return NULL;
    }
    return m;
}

/* ---- ONNX models (onnx.c) ---- */

static musa_model *load_onnx(const void *data, size_t size, const char *path) {
    musa_model *m = calloc(1, sizeof *m);
    if (!m) {
        musa_err_nomem(LOAD, sizeof *m);
        return NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    m->ctx.fusion_level = 2;
    m->popt.memory_arena = true;
    if (!(m->onnx = musa_onnx_read(data, size, path)) ||
        !(m->header = strdup("{\"kind\": \"onnx\"}"))) {
        if (m->onnx) musa_err_nomem(LOAD, 32);
        musa_model_free(m);
        return NULL;
    }
    return m;
}

static bool ends_with_onnx(const char *path) {
    size_t n = strlen(path);
    return n >= 5 && !strcasecmp(path + n - 5, ".onnx");
}

/* Bytes that start like a ModelProto (a field tag of ir_version, producer,
 * domain, model_version, doc_string, graph or opset_import), not a .musa
 * file's magic. */
static bool looks_like_onnx(const unsigned char *d, size_t size) {
    static const unsigned char tags[] = {0x08, 0x12, 0x1a, 0x22, 0x28, 0x32, 0x3a, 0x42};
    return size && memchr(tags, d[0], sizeof tags);
}

musa_model *musa_model_load(const char *path, int flags) {
    if (path && ends_with_onnx(path)) return load_onnx(NULL, 0, path);
    musa_file *f = musa_file_open(path, flags);
    if (!f) musa_err_prefix(LOAD);
    return load_file(f);
}

musa_model *musa_model_load_memory(const void *data, size_t size) {
    if (data && looks_like_onnx(data, size)) return load_onnx(data, size, NULL);
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
    if (m && m->onnx) return musa_onnx_num_inputs(m->onnx);
    return m ? (int)m->g->inputs.len : 0;
}

int musa_model_num_outputs(const musa_model *m) {
    if (m && m->onnx) return musa_onnx_num_outputs(m->onnx);
    return m ? (int)m->g->outputs.len : 0;
}

int musa_model_input(const musa_model *m, int i, const char **name, musa_dtype *dtype, int *ndim,
                     int64_t *dims, int64_t *lo, int64_t *hi) {
    if (!m || i < 0 || i >= musa_model_num_inputs(m))
        return musa_err(MUSA_ERR_INDEX, "[musa_model_input] input %d is out of range for %d", i,
                        musa_model_num_inputs(m));
    if (m->onnx) {
        if (lo) *lo = 0;
        if (hi) *hi = 0;
        return musa_onnx_input(m->onnx, i, name, dtype, ndim, dims, NULL);
    }
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
    int64_t key[2 * 64 * MUSA_MAX_DIMS];
    int nk = m->onnx ? musa_onnx_key(m->onnx, n_in, in, key, 2 * 64 * MUSA_MAX_DIMS) : 0;
    if (nk < 0) return NULL;
    for (int i = 0; i < m->n_v; i++)
        if (m->onnx
                ? m->v[i].n_dims == nk && !memcmp(m->v[i].dims, key, sizeof(int64_t) * (size_t)nk)
                : !m->dynamic || m->v[i].size == size) {
            m->v[i].used = ++m->runs;
            return m->v[i].plan;
        }
    variant nv = {.size = size};
    int rc;
    if (m->onnx) { /* captured anew for these shapes; the graph kept for musa_model_graph */
        musa_graph *g = musa_onnx_capture(m->onnx, n_in, in);
        nv.dims = g ? malloc(sizeof(int64_t) * ((size_t)nk + 1)) : NULL;
        rc = !g         ? musa_last_error_code()
             : !nv.dims ? musa_err_nomem("musa_model_run", 64)
                        : MUSA_OK;
        if (!rc) {
            memcpy(nv.dims, key, sizeof(int64_t) * (size_t)nk);
            nv.n_dims = nk;
            rc = build_variant(m, g, &nv);
        }
        if (rc) {
            free(nv.dims);
            musa_graph_free(g);
        } else {
            musa_graph_free(m->g);
            m->g = g;
        }
    } else if (!m->dynamic) {
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
        musa_plan_free(m->v[slot].plan), musa_graph_free(m->v[slot].g), free(m->v[slot].dims);
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
    if (n_out != musa_model_num_outputs(m))
        return musa_err(MUSA_ERR_VALUE,
                        "[musa_model_run] the model has %d outputs, room for %d given",
                        musa_model_num_outputs(m), n_out);
    int64_t size = -1;
    if (m->onnx && n_in > 64)
        return musa_err(MUSA_ERR_VALUE,
                        "[musa_model_run] %d inputs; an ONNX model takes at most 64", n_in);
    int rc = m->onnx ? musa_onnx_check_inputs(m->onnx, n_in, inputs)
                     : check_inputs(m, n_in, inputs, &size);
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
