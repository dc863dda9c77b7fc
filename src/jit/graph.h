/*
 * graph.h - the static graph IR, its capture from the dispatcher, and the
 * compiled plan.
 *
 * Files: graph.c (the IR core: values, nodes, editing helpers), capture.c
 * (the record hook, inputs, outputs, breaks), verify.c, print.c (text and
 * JSON), graph_api.c (the public accessors of musa.h), segment.c (segments
 * and re-specialisation), plan/, autodiff.c, interp.c and passes/.
 *
 * A graph is a list of values and a list of nodes in topological order.
 * Values are graph inputs, parameters (module tensors bound by reference),
 * constants (owned tensors, e.g. Python numbers), or node outputs. Nodes name
 * an op of the one op table (ops.def) and carry that op's typed attribute
 * record; there is no second list of ops anywhere in the jit.
 *
 * Capture: musa_graph_capture_begin() switches this thread's dispatcher to
 * trace (compute and record) or symbolic (record only, meta tensors) mode
 * and installs the graph as the recorder. Every op that runs through
 * musa_dispatch is appended as a node; tensors map to values through their
 * trace_tag, except tensors bound by reference (parameters), which map
 * through a map in the graph (they are shared with other threads' captures,
 * so a capture never writes into them). In-place writes rename: the written tensor maps to a fresh
 * value, and a write into an input or parameter becomes a mutation, written
 * back after the plan runs. A host read of a tensor value (bool(), item())
 * while capturing is recorded as a break: the point where the graph splits,
 * and the value seen.
 *
 * Invariants:
 * - node inputs refer to values defined earlier (inputs, params, consts, or
 *   outputs of earlier nodes); musa_graph_verify checks this and every
 *   node's shapes and dtypes against the op's own inference;
 * - values hold a layout (strides and an element offset) relative to their
 *   root: the value whose buffer they alias (themselves unless produced by a
 *   VIEW op);
 * - everything a graph owns is in its arena, except the param/const tensors
 *   (references released by musa_graph_free).
 */
#ifndef MUSA_JIT_GRAPH_H
#define MUSA_JIT_GRAPH_H

#include "../base/arena.h"
#include "../base/vec.h"
#include "../ops/op.h"

typedef enum musa_vkind {
    MUSA_V_NODE = 0, /* output of a node */
    MUSA_V_INPUT,    /* graph input, bound at each run */
    MUSA_V_PARAM,    /* captured tensor, bound by reference (read at each run) */
    MUSA_V_CONST,    /* owned constant tensor */
} musa_vkind;

typedef struct musa_gvalue {
    int8_t kind; /* musa_vkind */
    int8_t dtype;
    int8_t ndim;
    int8_t out_index; /* which output of the producer */
    int32_t producer; /* node index, -1 unless kind == NODE */
    int64_t shape[MUSA_MAX_DIMS];
    int64_t strides[MUSA_MAX_DIMS]; /* layout in the root's buffer, in elements */
    int64_t offset;                 /* element offset in the root's buffer */
    int32_t root;                   /* value whose buffer this is (itself unless a view) */
    int32_t uses;                   /* node inputs + graph outputs using it (musa_graph_analyse) */
    int8_t sym[MUSA_MAX_DIMS];      /* symbol a dim follows (dynamic dims), or -1 */
    musa_tensor *tensor;            /* PARAM, CONST: reference held */
    const char *name;               /* inputs: their name; else NULL */
    const char *loc;                /* user's file:line where it was made, or NULL */
} musa_gvalue;

/* Bytes of value x's shape in its dtype (saturating: sizes past any budget). */
static inline int64_t musa_gvalue_bytes(const musa_gvalue *x) {
    int64_t n = musa_dtype_info[x->dtype].size;
    for (int d = 0; d < x->ndim; d++)
        if (!musa_mul_i64(n, x->shape[d], &n)) return INT64_MAX / 4;
    return n;
}

typedef struct musa_gnode {
    int16_t op; /* musa_op_id */
    int8_t n_out;
    bool dead; /* removed by a pass; skipped everywhere, compacted by musa_graph_compact */
    /* A cast the capture appended to round an op's float32 output into the
     * low-precision dtype eager's kernel wrote (capture.c): static autodiff
     * treats the op and this cast as eager's one tape node. */
    bool rounding;
    /* Made by the remat pass to recompute a value just before its late
     * reads: the scheduler does not hoist it (plan/build.c). */
    bool recomputed;
    int32_t n_in;
    int32_t *in; /* [n_in], arena */
    int32_t out[MUSA_MAX_OUTPUTS];
    int32_t group; /* fusion group (musa_fuse), or -1 */
    /* The op's attribute record, in the graph's arena and only as large as
     * its kind (musa_attrs_desc_of(kind)->size); NULL for ops without
     * attributes. Nodes are many (a recurrent model's step has thousands,
     * in two graphs) and a whole musa_attrs_any is 688 bytes. A copy of a
     * node shares the record: see musa_gnode_private_attrs. */
    musa_attrs_any *attrs;
    const char *loc;
} musa_gnode;

/* A dynamic dim: a name, its range, and the size the capture saw. */
typedef struct musa_gsym {
    char name[16];
    int64_t lo, hi, traced;
} musa_gsym;

typedef struct musa_gmutation {
    int32_t target; /* INPUT or PARAM value written in place */
    int32_t value;  /* its final value, copied into it after the plan ran */
} musa_gmutation;

typedef enum musa_break_kind {
    MUSA_BREAK_BOOL = 0, /* bool(t): outcome is 0 or 1 */
    MUSA_BREAK_SCALAR,   /* item()/float()/int(): the exact value */
    MUSA_BREAK_DATA,     /* numpy(), tolist(), printing: not supported in a capture */
} musa_break_kind;

typedef struct musa_gbreak {
    int32_t value;   /* the value read on the host */
    int32_t at_node; /* nodes before this index ran before the read */
    int8_t kind;     /* musa_break_kind */
    double outcome;  /* what the read returned while capturing */
    const char *loc;
} musa_gbreak;

typedef struct musa_grad_undo {
    musa_tensor *leaf, *old; /* both retained; old may be NULL */
} musa_grad_undo;

struct musa_graph {
    musa_arena arena;
    MUSA_VEC(musa_gvalue) values;
    MUSA_VEC(musa_gnode) nodes;
    MUSA_VEC(int32_t) inputs;
    MUSA_VEC(int32_t) outputs;
    MUSA_VEC(musa_gmutation) mutations;
    MUSA_VEC(musa_gbreak) breaks;
    MUSA_VEC(musa_gsym) syms;
    /* capture state */
    uint64_t tag;           /* capture id, high 32 bits of trace_tag */
    uint32_t epoch;         /* stamped on tensors made while recording (musa_tensor_epoch) */
    musa_map origin;        /* value id of a renamed tensor -> first value it had (mutations) */
    musa_map bound;         /* address of a param/const tensor the graph holds -> its value now */
    musa_map bound_storage; /* storage address -> the first bound tensor on it (aliases) */
    int capture_error;      /* first error met while recording (sticky) */
    char capture_msg[512];
    bool capturing;
    musa_mode mode; /* of the running (or last) capture */
    musa_mode prev_mode;
    void *prev_recorder;
    bool requires_grad; /* an input or param required grad while grad mode was on */
    /* symbolic captures: each leaf whose .grad changed, with the .grad it had
     * (both retained), oldest first; musa_graph_restore_grads undoes them */
    MUSA_VEC(musa_grad_undo) grad_undo;
    const char *loc_override; /* recorded nodes take this location (autodiff) */
};

musa_graph *musa_graph_new(void);
void musa_graph_free(musa_graph *g);

/* ---- capture (capture.c) ---- */

/* Start recording this thread's op calls into g (mode TRACE or SYMBOLIC). */
int musa_graph_capture_begin(musa_graph *g, int mode);
/* Stop recording. Returns g's capture error if one happened. */
int musa_graph_capture_end(musa_graph *g);
/* Declare t a graph input named `name` (may be NULL). */
int musa_graph_add_input(musa_graph *g, musa_tensor *t, const char *name);
/* Mark the tensors t[0..n) as the graph outputs (in order). Tensors the
 * graph has not seen become parameters. */
int musa_graph_set_outputs(musa_graph *g, int n, musa_tensor *const *t);
/* The value a tensor maps to in g (capturing), or -1. */
int musa_graph_value_of(const musa_graph *g, const musa_tensor *t);
/* A host read of t while capturing (called by the Python binding). Returns
 * MUSA_OK, or an error for reads that cannot be captured. */
int musa_graph_host_read(musa_graph *g, const musa_tensor *t, int kind, double value);
/* The graph this thread is recording into, or NULL. */
musa_graph *musa_graph_recording(void);

/* Where the user is: set by the Python layer to a function returning the
 * current "file:line" (a string that lives as long as the process), or NULL. */
extern const char *(*musa_jit_location_hook)(void);
/* ---- building and editing (graph.c, for passes) ---- */

/* Append a value; returns its id or -1 (out of memory). */
int32_t musa_graph_new_value(musa_graph *g, musa_vkind kind, musa_dtype dtype, int ndim,
                             const int64_t *shape);
/* A constant holding t (a reference is taken). */
int32_t musa_graph_const(musa_graph *g, musa_tensor *t);
/* Append node op(in) with attrs (NULL: defaults), inferring its outputs'
 * shapes, dtypes and layouts with the op's own inference. The outputs are
 * new values, returned in out (may be NULL). Returns the node index or a
 * negative status with the error set. */
int32_t musa_graph_add_node(musa_graph *g, musa_op_id op, int n_in, const int32_t *in,
                            const void *attrs, int32_t *out);
/* Give node n a record of its op's attribute kind in g's arena: a copy of
 * src, or the kind's defaults (src NULL); none for an op without
 * attributes. A pass that changes a node's op calls this after. */
int musa_graph_set_attrs(musa_graph *g, musa_gnode *n, const void *src);
/* Bytes of n's attribute record (0: the op has none). */
size_t musa_gnode_attrs_size(const musa_gnode *n);
/* Point a copy of a node at a private copy of its record, held in buf: a
 * probe that infers the copy (inference may normalise attributes), or a
 * pass that may restore them, leaves the node's own record as it was. */
void musa_gnode_private_attrs(musa_gnode *copy, musa_attrs_any *buf);
/* Re-run inference for node n (after a pass changed its inputs); its output
 * values take the result. */
int musa_graph_infer_node(musa_graph *g, int32_t n);
/* Run n's op inference on meta tensors of its inputs. With fresh_out, the
 * outputs are new values (ids written there); else n's output values are
 * overwritten (dtype, shape, layout). Returns a status with the op's error
 * set. The op's infer may normalise n->attrs: probes pass a copy of n
 * (musa_gnode_private_attrs). */
int musa_graph_infer_into(musa_graph *g, musa_gnode *n, int32_t *fresh_out);
/* A view node whose input moved to another buffer (a pass replaced it)
 * takes that buffer's root and offset: re-inferred. No-op otherwise. */
int musa_graph_refresh_view(musa_graph *g, int32_t n);
/* Same dtype, shape, strides and offset. */
bool musa_gvalue_same_layout(const musa_gvalue *a, const musa_gvalue *b);
/* A meta tensor standing for value id, its layout included; `tagged`: the
 * recorder maps it back to id (for ops recorded into g, e.g. autodiff). */
musa_tensor *musa_graph_meta(const musa_graph *g, int32_t id, bool tagged);
/* Replace every use of value `from` (node inputs, outputs, mutations, breaks)
 * by `to`. */
void musa_graph_replace_uses(musa_graph *g, int32_t from, int32_t to);
/* Recount uses and roots. */
void musa_graph_analyse(musa_graph *g);
/* Drop dead nodes; their outputs get producer -1 (value ids stay). */
void musa_graph_compact(musa_graph *g);
/* Give back the tables' spare capacity (a graph done growing: captured or
 * optimised). Nodes are some 750 bytes (their attribute record inline), so
 * doubling left up to half of a large graph's tables unused. */
void musa_graph_shrink(musa_graph *g);
/* Move the nodes appended since nn0 into place: node k >= nn0 goes right
 * before original node pos[k] (pos[k] == nn0: at the end), new nodes with
 * one position in the order they were added. Producers follow; a break
 * stays before the node it was before. */
int musa_graph_place(musa_graph *g, int64_t nn0, const int32_t *pos);
/* Whether v is a graph output, a mutation's value or a break's value. */
bool musa_graph_escapes(const musa_graph *g, int32_t v);
/* The live node running `op` that produces v, or -1. */
int32_t musa_graph_producer(const musa_graph *g, int32_t v, int op);
/* How many live node inputs read v, plus one if it escapes; reads by nodes
 * of op `skip` (or -1) do not count. A scan of the graph: for passes that
 * ask about few values. */
int64_t musa_graph_uses(const musa_graph *g, int32_t v, int skip);
static inline int64_t musa_graph_uses_of(const musa_graph *g, int32_t v) {
    return musa_graph_uses(g, v, -1);
}
/* Check structure, order, and every node against its op's inference
 * (verify.c). */
int musa_graph_verify(const musa_graph *g);
/* Number of live nodes (graph_api.c). */
int musa_graph_node_count(const musa_graph *g);

/* ---- printing (print.c) ---- */

/* Readable text, one node per line:
 *   %3 = add(%1, %2)  # float32[4, 8]  model.py:12
 * Returns a malloc'd string or NULL. */
char *musa_graph_text(const musa_graph *g);
/* JSON: {"inputs": [...], "nodes": [{"op": "add", "inputs": ["%1", "%2"],
 * "outputs": ["%3"], "attrs": {...}}, ...], "outputs": [...]}. malloc'd. */
char *musa_graph_json(const musa_graph *g);

/* ---- passes ---- */

typedef int (*musa_pass_fn)(musa_graph *g, musa_pass_ctx *ctx);

typedef struct musa_pass {
    const char *name;
    musa_pass_fn fn;
    int min_fusion_level;
} musa_pass;

int musa_pass_simplify(musa_graph *g, musa_pass_ctx *ctx);
int musa_pass_padsum(musa_graph *g, musa_pass_ctx *ctx);
int musa_pass_cse(musa_graph *g, musa_pass_ctx *ctx);
int musa_pass_fold(musa_graph *g, musa_pass_ctx *ctx);
int musa_pass_dce(musa_graph *g, musa_pass_ctx *ctx);
int musa_pass_remat(musa_graph *g, musa_pass_ctx *ctx);
int musa_pass_fuse(musa_graph *g, musa_pass_ctx *ctx);
int musa_pass_channels_last(musa_graph *g, musa_pass_ctx *ctx);
int musa_pass_winograd(musa_graph *g, musa_pass_ctx *ctx);
/* A convolution node's kind (MUSA_CONV_FWD, _BWD_DATA, _BWD_WEIGHTS of
 * backend/cpu/conv_dnnl.h) with its input's (N, C, H, W) and weight's dims
 * (a backward op's missing operand from its attribute shape), as the node
 * holds them; -1 for any other node, a dead one, or operands not 4-d
 * (layout.c; the channels_last and winograd passes). */
int musa_pass_conv_dims(const musa_graph *g, const musa_gnode *n, const int64_t **x,
                        const int64_t **w);
int musa_pass_attention(musa_graph *g, musa_pass_ctx *ctx);

/* The pipeline table (NULL-terminated) and a runner. */
extern const musa_pass musa_pass_table[];
int musa_graph_optimize(musa_graph *g, musa_pass_ctx *ctx);
/* Run one pass by name. */
int musa_graph_run_pass(musa_graph *g, const char *name, musa_pass_ctx *ctx);

/* ---- segments and re-specialisation (segment.c) ---- */

/* Nodes [begin, end) of g as a graph of their own, with outputs outs. Its
 * inputs are g's inputs then the values made before `begin` that it reads;
 * *carried (malloc'd, *n_carried entries) lists those values' ids in g. */
musa_graph *musa_graph_segment(const musa_graph *g, int begin, int end, int n_out, const int *outs,
                               const musa_segment_options *opt, int **carried, int *n_carried);
/* Hash of nodes [begin, end): ops, attrs, value ids, constants' values and
 * parameters' identities. Equal captures of equal code hash equal. */
uint64_t musa_graph_fingerprint(const musa_graph *g, int begin, int end);

/* A copy of g with input i of shape shapes[i] (same rank), the given
 * attributes replaced, and every node re-inferred. NULL with the op's error
 * if the graph does not hold at those shapes. */
musa_graph *musa_graph_respecialize(const musa_graph *g, const int64_t (*shapes)[MUSA_MAX_DIMS],
                                    int n_over, const musa_attr_override *over);

/* Elements per tile of a fused group headed by a matmul (plan/build.c, passes/fuse.c). */
#define MUSA_HEAD_TILE_ELEMS 65536

/* Output elements from which a non-elementwise kernel counts as heavy
 * (musa_graph_pairable): smaller kernels are too short for a task of their
 * own to pay for handing it to the OpenMP team. At 4096 (the first value,
 * not measured) a GRU's training step (2 layers, hidden 128, batch 16, 40
 * steps) paired 80 gate-gradient pads of 6144 elements: 4.00 ms a step
 * against 3.65-3.88 ms unpaired and 3.97 ms on one thread, and with another
 * process on the second core each pair's barrier waited for a descheduled
 * thread (steps of 4 to 700 ms). At 16384 the LSTM, GRU and transformer
 * encoder steps measured here were as fast or faster (LSTM 13.6-13.8 ms
 * against 14.0-14.2), and MLP, GPT-tiny and ResNet-18 plans lost only
 * GPT-tiny's pair of embedding-gradient index_adds (8192 elements). */
#define MUSA_HEAVY_ELEMS 16384
/* Output elements above which a heavy kernel runs alone with every thread:
 * on ResNet-18 training (2 threads) two convolutions as single-threaded
 * tasks ran 15% slower than one after the other with both threads each. */
#define MUSA_SOLO_ELEMS 65536

/* Whether node n is worth a task of its own in a parallel step. The planner
 * (plan/build.c) pairs such an instruction (or a group it heads) with an
 * independent one; fusion (passes/fuse.c) keeps two of them feeding one
 * node in groups of their own, so that they stay independent. One
 * predicate for both, so fusion never serialises branches the planner
 * would run concurrently, nor splits groups for branches it would not. */
bool musa_graph_pairable(const musa_graph *g, const musa_gnode *n);

/* A reduction over dims other than 0 (and not all dims) of a value with
 * at least 2 dims: row i of its output is made from row i of its input. */
bool musa_graph_row_reduction(const musa_graph *g, const musa_gnode *n);

/* Whether node n computes the same values when input 0 and every output are
 * cut along dim 0 (matmul rows, conv images, softmax over another dim): the
 * op must be one whose rows are independent (a list in graph.c), and its
 * inference, asked with input 0 cut to one row, must give one row. */
bool musa_graph_split0_ok(const musa_graph *g, int32_t n);

#endif
