/*
 * onnx.h - ONNX models in C: what onnx.c (reading, validating),
 * onnx_build.c (a musa graph per input signature) and onnx_ops_*.c (each
 * ONNX op as musa op calls) share. docs/onnx.md describes the importer; model.c runs the
 * graphs it builds as it runs a .musa model's.
 *
 * The importer trusts nothing. Loading parses the protobuf (a schema of
 * fixed depth, src/io/onnx/onnx.proto) and checks everything before any
 * tensor is allocated: the opset, every node's op, domain, input and output
 * counts and attribute names and types against the op's row, that every
 * value a node reads was made before it (so the graph has no cycle), the
 * names are unique, and every initializer's data fills its dims exactly.
 * What depends on the input shapes (ranks, an axis in range, a Reshape
 * that fits) is checked when a graph is built for them, by the op's own
 * handler or by musa's inference of the op it calls; every error names the
 * node and its op.
 */
#ifndef MUSA_IO_ONNX_H
#define MUSA_IO_ONNX_H

#include "../base/base.h"

typedef struct musa_onnx musa_onnx;
typedef struct onnx_node onnx_node;
typedef struct onnx_build onnx_build;

/* An op the importer handles: its ONNX name, the counts of inputs and
 * outputs a node may have, its attributes ("name:type,...", type one of
 * i f s t ints floats strings tensors), whether it reads only shapes, and the function making its
 * outputs from its inputs (absent optional inputs are NULL; outputs the
 * node names must be set to new references). */
typedef struct onnx_op {
    const char *name;
    int8_t in_min, in_max, out_min, out_max;
    const char *attrs;
    bool meta;    /* reads only its input's shape (Shape, Size): known outputs */
    uint8_t host; /* bit i: input i is read as numbers (shapes, axes, sizes) */
    int (*run)(onnx_build *b, const onnx_node *n, musa_tensor **in, int n_out, musa_tensor **out);
} onnx_op;

/* A node as read: its op's row, and its inputs' and outputs' value ids
 * (-1 for an absent optional one, named ""). */
struct Onnx__NodeProto;
struct onnx_node {
    const struct Onnx__NodeProto *p;
    const onnx_op *op;
    int n_in, n_out;
    int32_t *in, *out;
};

/* The op table, in four files of ops (onnx_ops.h): every op's row once. */
extern const onnx_op onnx_ops_math[], onnx_ops_conv[], onnx_ops_nn[], onnx_ops_shape[];
extern const int onnx_ops_math_n, onnx_ops_conv_n, onnx_ops_nn_n, onnx_ops_shape_n;

/* Attribute values of node n (the types were checked at load). Each
 * returns `def` (or leaves *out as is and returns 0) when absent. */
int64_t onnx_attr_int(const onnx_node *n, const char *name, int64_t def);
double onnx_attr_float(const onnx_node *n, const char *name, double def);
const char *onnx_attr_str(const onnx_node *n, const char *name, const char *def);
/* An ints attribute: its count (0 when absent), the values into v[0..max). */
int onnx_attr_ints(const onnx_node *n, const char *name, int64_t *v, int max);
/* A floats attribute's count, values into v[0..max). */
int onnx_attr_floats(const onnx_node *n, const char *name, float *v, int max);
/* A tensor attribute as a new musa tensor (NULL with no error when absent,
 * NULL with an error for bad data). */
musa_tensor *onnx_attr_tensor(onnx_build *b, const onnx_node *n, const char *name, bool *absent);
bool onnx_has_attr(const onnx_node *n, const char *name);

/* Node n's name (or its first output's) and op, for messages. */
const char *onnx_node_name(const onnx_node *n);
const char *onnx_node_op(const onnx_node *n);
int64_t onnx_opset(const onnx_build *b);

/* Fail for node n: "[onnx] FILE: node 'N' (Op): <what>". */
int onnx_fail(const onnx_build *b, const onnx_node *n, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Whether input i of the node being built is known while building (an
 * initializer, a constant, or computed from those and from shapes only). */
bool onnx_known(const onnx_build *b, int i);
/* Read input t (known while building: else an error naming the input) as
 * at most max integers (or doubles); the count into *n. */
int onnx_ints(onnx_build *b, const onnx_node *n, int i, musa_tensor *t, int64_t *v, int max,
              int *count);
int onnx_doubles(onnx_build *b, const onnx_node *n, int i, musa_tensor *t, double *v, int max,
                 int *count);
/* Keep t (a new reference, or NULL after a failed call) until node n is
 * built, then release it: handlers name intermediate results with it and
 * never release them. Returns t. */
musa_tensor *onnx_tmp(onnx_build *b, musa_tensor *t);
/* A constant tensor made while building (not recorded: a parameter of the
 * graph). */
musa_tensor *onnx_const(const void *data, int ndim, const int64_t *shape, musa_dtype dtype);

/* musa's dtype for ONNX's TensorProto.DataType code, or -1. */
int musa_onnx_dtype(int64_t code);

/* Load from bytes, or (data NULL) from the file at path, mapped only while
 * it is parsed. path names the file in messages and locates external
 * data; NULL for bytes in memory. */
musa_onnx *musa_onnx_read(const void *data, size_t size, const char *path);
void musa_onnx_free(musa_onnx *o);
int musa_onnx_num_inputs(const musa_onnx *o);
int musa_onnx_num_outputs(const musa_onnx *o);
/* Input i: name, dtype, rank, dims (-1: free), and the name of each free
 * dim (NULL: none). */
int musa_onnx_input(const musa_onnx *o, int i, const char **name, musa_dtype *dtype, int *ndim,
                    int64_t *dims, const char **dim_params);
/* Check inputs against the model's signature (dtypes, ranks, fixed dims,
 * equal sizes for equal dim names). */
int musa_onnx_check_inputs(const musa_onnx *o, int n_in, musa_tensor *const *in);
/* The key of a plan for these (checked) inputs: every input's dims, and
 * the values of inputs that ops read as numbers (the graph is built for
 * those values). Returns the key's length, or a negative status. */
int musa_onnx_key(const musa_onnx *o, int n_in, musa_tensor *const *in, int64_t *key, int max);
/* Capture the model for inputs of these shapes into a new graph (symbolic:
 * nothing is computed but what is known while building). */
musa_graph *musa_onnx_capture(musa_onnx *o, int n_in, musa_tensor *const *in);

#endif
