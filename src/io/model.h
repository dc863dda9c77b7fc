/*
 * model.h - what the saved-model files of src/io share: the loaded model
 * and its plans per dynamic size. model_save.c writes a graph into a .musa
 * file, model_read.c reads one back (the graph, config and dynamic
 * members, validated), model.c is the runtime (load, inputs, run).
 */
#ifndef MUSA_IO_MODEL_H
#define MUSA_IO_MODEL_H

#include <pthread.h>

#include "../jit/graph.h"
#include "file.h"

#define MODEL_PLANS 8 /* plans kept per dynamic model */

typedef struct variant {
    int64_t size;  /* the dynamic size it serves */
    int64_t *dims; /* an ONNX model's key (musa_onnx_key; owned) */
    int n_dims;
    musa_graph *g;
    musa_plan *plan;
    uint64_t used; /* run counter at the last use */
} variant;

struct musa_onnx;

struct musa_model {
    musa_graph *g;          /* as loaded: before segmenting and passes (an ONNX model:
                             * as captured for the last new input signature) */
    struct musa_onnx *onnx; /* an ONNX model (onnx.c), else NULL */
    char *header;           /* the file's header text */
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

/* Read f's graph, config and dynamic members into m (its g, ctx, popt and
 * dynamic fields); every problem is musa_file_bad naming musa_model_load. */
int musa_model_read(musa_model *m, const musa_file *f);

#endif
