/*
 * onnx_model.h - a loaded ONNX model's structures, shared by onnx.c (reading
 * and validating the file) and onnx_build.c (the signature, and capturing
 * the model into a musa graph for one set of input shapes).
 */
#ifndef MUSA_IO_ONNX_MODEL_H
#define MUSA_IO_ONNX_MODEL_H

#include "../base/vec.h"
#include "onnx.h"
#include "onnx.pb-c.h"

#define MAX_FILE      ((size_t)INT32_MAX) /* protobuf's limit on a message */
#define OPSET_MIN     1
#define OPSET_MAX     18
#define MAX_VALUES    (1 << 24)
#define MAX_NODE_ARGS 1024
#define MAX_SPAN      ((int64_t)1 << 40) /* the product of an input's nonzero dims */

/* AttributeProto.type codes */
enum { A_FLOAT = 1, A_INT, A_STRING, A_TENSOR, A_GRAPH, A_FLOATS, A_INTS, A_STRINGS, A_TENSORS };

typedef struct onnx_input {
    int32_t value;
    const char *name;
    musa_dtype dtype;
    int ndim;
    bool by_value;                     /* an op reads it as numbers: part of the key */
    int64_t dims[MUSA_MAX_DIMS];       /* -1: free */
    const char *params[MUSA_MAX_DIMS]; /* a free dim's name, or NULL */
} onnx_input;

struct musa_onnx {
    Onnx__ModelProto *proto;
    char *where; /* "[onnx] FILE" */
    char *dir;   /* the file's directory (external data), or NULL */
    int64_t opset;
    int n_values;
    const char **names;
    musa_map by_name;     /* name hash -> value id */
    musa_tensor **consts; /* initializers, by value id */
    onnx_node *nodes;
    int n_nodes;
    onnx_input *inputs;
    int n_inputs;
    int32_t *outputs;
    int n_outputs;
};

struct onnx_build {
    musa_onnx *o;
    const onnx_node *node; /* being built */
    const bool *in_known;  /* its inputs' */
    bool formatted;        /* the last error already names the node */
    musa_tensor **temps;   /* onnx_tmp's, released after each node */
    int n_temps, cap_temps;
};

/* A musa tensor of TensorProto t, checked at load (NULL and an error on
 * failure; `what` names it in messages). */
musa_tensor *onnx_make_tensor(const musa_onnx *o, const Onnx__TensorProto *t, const char *what);
/* The op-table row of an ONNX op name, or NULL. */
const onnx_op *onnx_find_op(const char *name);

#endif
