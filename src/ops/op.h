/*
 * op.h - the op layer: the op enum and info table generated from ops.def,
 * inference results, the dispatcher, and the thread-local dispatch state.
 *
 * Invariants:
 * - musa_ops[op] is the only description of an op; passes and the executor
 *   ask its flags, never lists of op names;
 * - musa_dispatch is the only path from a public op function to a kernel,
 *   so validation, recording, autograd and profiling happen in one place.
 */
#ifndef MUSA_OP_H
#define MUSA_OP_H

#include "../tensor/tensor.h"

enum musa_op_flags {
    MUSA_OPF_ELEMENTWISE = 1u << 0, /* out[i] depends on inputs at i (broadcast) */
    MUSA_OPF_COMMUTATIVE = 1u << 1, /* f(a, b) == f(b, a) */
    MUSA_OPF_NO_BOOL = 1u << 2,     /* rejects bool operands */
    MUSA_OPF_NONDIFF = 1u << 3,     /* no gradient flows through it */
    MUSA_OPF_REDUCTION = 1u << 4,   /* reduces dims of input 0 */
    MUSA_OPF_VIEW = 1u << 5,        /* output aliases input 0; no kernel */
    MUSA_OPF_RANDOM = 1u << 6,      /* draws from the generator at run time */
    MUSA_OPF_CREATION = 1u << 7,    /* no tensor inputs */
    MUSA_OPF_CONTIG = 1u << 8,      /* the kernel gets contiguous inputs and outputs */
    MUSA_OPF_ONEPASS = 1u << 9,     /* not elementwise, but a pass or two over its data:
                                       cheap enough to recompute (remat) */
    MUSA_OPF_THREADS = 1u << 10,    /* results depend on the threads it runs on: a plan
                                       never runs it as a single-threaded task */
    MUSA_OPF_AMP_LOW = 1u << 12,    /* autocast runs it in the low dtype (GEMM-shaped) */
    MUSA_OPF_AMP_F32 = 1u << 13,    /* autocast runs it in float32 (range, accuracy) */
    MUSA_OPF_INPLACE = 1u << 11,    /* an update: output j is the new value of input j
                                       (n_out of them, from inference), computed element by
                                       element, each element read before it is written, so
                                       output j may share input j's memory (optimizers) */
    MUSA_OPF_EFFECT = 1u << 14,     /* acts outside the process (collectives): runs once per
                                       call, in program order, on the calling thread */
    MUSA_OPF_OVERWRITE = 1u << 15,  /* not elementwise, but its kernel reads each row of an
                                       input of the output's layout before it writes that
                                       row of the output: a plan may put the output in that
                                       input's buffer when the input dies there */
};
/* Ops whose calls are events, not values: never merged, folded, dropped,
 * recomputed, run as tasks or queued on a stream, and run in program order. */
#define MUSA_OPF_ORDERED (MUSA_OPF_RANDOM | MUSA_OPF_EFFECT)

typedef enum musa_op_id {
#define OP(name, n_in, n_out, attrs, infer, kernel, ws, flags, grad, save, fn, py) MUSA_OP_##name,
#include "ops.def"
#undef OP
    MUSA_OP_COUNT
} musa_op_id;

#define MUSA_MAX_OUTPUTS 6

/* The op table's version, saved with every model (src/io/model_save.c). Bump it
 * when an op's meaning changes (its inputs, attributes or results), so that
 * a model saved by a newer build fails to load here with a clear message
 * instead of computing something else. Adding an op needs no bump: a
 * model using it fails on its name. */
#define MUSA_OP_TABLE_VERSION 1

/* What inference decides about one call. */
typedef struct musa_infer {
    int8_t n_out; /* outputs of this call: the row's n_out, or set by inference (n_out -1) */
    int8_t out_dtype[MUSA_MAX_OUTPUTS];
    int8_t out_ndim[MUSA_MAX_OUTPUTS];
    int64_t out_shape[MUSA_MAX_OUTPUTS][MUSA_MAX_DIMS];
    int64_t view_strides[MUSA_MAX_DIMS]; /* VIEW ops: layout in input 0's storage */
    int64_t view_offset;
    int8_t *in_dtype; /* [n_in]: dtype to cast each input to first, or -1 (as is) */
} musa_infer;

/* Output j of an inference: dtype dt, ndim dims of shape. */
static inline void musa_infer_out(musa_infer *r, int j, musa_dtype dt, int ndim,
                                  const int64_t *shape) {
    r->out_dtype[j] = (int8_t)dt;
    r->out_ndim[j] = (int8_t)ndim;
    if (ndim) memcpy(r->out_shape[j], shape, sizeof(int64_t) * (size_t)ndim);
}

typedef struct musa_op_info musa_op_info;

/* Shape and dtype of a tensor, as autograd remembers its op's inputs. */
typedef struct musa_meta {
    int8_t dtype;
    int8_t ndim;
    int64_t shape[MUSA_MAX_DIMS];
} musa_meta;

/* What a backward formula sees. Entries of in/out are the saved forward
 * tensors (NULL where the op's save mask did not keep them); gout[j] is the
 * gradient of output j (NULL means zero); needs[i] says whether input i
 * wants a gradient. */
typedef struct musa_grad_args {
    musa_tensor *const *in;
    musa_tensor *const *out;
    musa_tensor *const *gout;
    const void *attrs;
    const musa_meta *in_meta; /* [n_in] */
    const bool *needs;        /* [n_in] */
    int n_in;
} musa_grad_args;

/* Compute gin[i] (a new reference, or NULL for "no gradient") for each
 * input i with needs[i]. Written with public op functions only, so it is
 * itself differentiable and can run in symbolic mode. */
typedef int (*musa_grad_fn)(const musa_grad_args *a, musa_tensor **gin);

/* Validate inputs and attrs (which it may normalise in place, e.g. wrap
 * negative dims) and fill r. Returns MUSA_OK or an error naming the op. */
typedef int (*musa_infer_fn)(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                             musa_infer *r);

struct musa_op_info {
    const char *name;
    int n_in;  /* -1: variadic */
    int n_out; /* -1: decided per call by inference (INPLACE updates) */
    musa_attrs_kind attrs_kind;
    musa_infer_fn infer;
    musa_kernel_fn kernel;       /* CPU kernel; cpu_none for VIEW ops */
    musa_loop_resolve_fn loop;   /* the kernel's loop resolver (cpu_<kernel>_loop), or NULL */
    musa_workspace_fn workspace; /* NULL: no scratch */
    uint32_t flags;
    musa_grad_fn grad; /* grad_none for NONDIFF ops */
    uint32_t save;     /* bits 0-7: inputs kept (0xff: all); bits 8-9: outputs kept */
};

#define MUSA_SAVE_ALL_IN 0xffu
static inline bool musa_op_saves_input(const musa_op_info *op, int i) {
    return (op->save & 0xffu) == MUSA_SAVE_ALL_IN || (i < 8 && (op->save >> i) & 1u);
}
static inline bool musa_op_saves_output(const musa_op_info *op, int j) {
    return (op->save >> (8 + j)) & 1u;
}

extern const musa_op_info musa_ops[MUSA_OP_COUNT];

/* Start an inference record: inputs kept as they are (in_dtype[n_in] all
 * -1), the row's output count. */
static inline void musa_infer_init(musa_infer *r, const musa_op_info *op, int8_t *in_dtype,
                                   int n_in) {
    r->n_out = (int8_t)op->n_out;
    r->view_offset = 0;
    r->in_dtype = in_dtype;
    if (n_in > 0) memset(in_dtype, -1, (size_t)n_in);
}

/* After inference: the call's output count must be in range (INPLACE rows
 * set it from their inputs). */
static inline int musa_infer_check_outputs(const musa_op_info *op, const musa_infer *r) {
    if (r->n_out < 1 || r->n_out > MUSA_MAX_OUTPUTS)
        return musa_err(MUSA_ERR_RUNTIME, "[%s] inference gave %d outputs", op->name, r->n_out);
    return MUSA_OK;
}

/* ---- thread-local dispatch state ---- */

typedef enum musa_mode {
    MUSA_MODE_EAGER = 0,    /* run kernels */
    MUSA_MODE_TRACE = 1,    /* run kernels and record nodes */
    MUSA_MODE_SYMBOLIC = 2, /* record only; tensors are meta */
} musa_mode;

typedef struct musa_tls_state {
    musa_mode mode;
    bool grad_disabled;   /* grad mode is on when false (the default) */
    bool anomaly;         /* anomaly detection */
    bool anomaly_forward; /* ... and NaN checks on every op's outputs */
    void *recorder;       /* graph being recorded (trace/symbolic), owned by jit */
    int8_t autocast;      /* 0: off; else the low dtype + 1 (musa_autocast_set) */
} musa_tls_state;

extern _Thread_local musa_tls_state musa_tls;

/* Hooks filled by upper layers; NULL when absent. */
/* Attach autograd history to fresh outputs. Called when grad mode is on, the
 * op is differentiable and some input requires grad. */
extern int (*musa_autograd_hook)(musa_op_id op, int n_in, musa_tensor *const *in, const void *attrs,
                                 int n_out, musa_tensor **out);
/* Called before an op writes into a provided output that requires grad
 * (grad mode on): fails for leaves that require grad. */
extern int (*musa_autograd_inplace_hook)(musa_op_id op, musa_tensor *t);
/* Writes into a view while recording (out of place on the base; node.c). */
extern int (*musa_autograd_inplace_view_hook)(musa_op_id op, int n_in, musa_tensor *const *in,
                                              const void *attrs, musa_tensor *view);
/* Record a node (trace and symbolic modes). */
/* `provided` has bit j set when output j was written in place (out[j] given). */
extern int (*musa_record_hook)(void *recorder, musa_op_id op, int n_in, musa_tensor *const *in,
                               const void *attrs, int n_out, musa_tensor **out, unsigned provided);
/* Void the running capture: something ran that cannot be recorded (e.g. an
 * op whose output shape depends on the data). Set by src/jit. */
extern void (*musa_record_refuse_hook)(void *recorder, const char *why);
/* A leaf's .grad is about to change while recording symbolically (the engine
 * or set_grad): the recorder keeps the old one, so a capture that fails can
 * put it back (musa_graph_restore_grads). */
extern void (*musa_record_grad_hook)(void *recorder, musa_tensor *leaf, musa_tensor *old_grad);
static inline void musa_record_grad_change(musa_tensor *leaf, musa_tensor *old_grad) {
    if (musa_tls.mode == MUSA_MODE_SYMBOLIC && musa_tls.recorder && musa_record_grad_hook)
        musa_record_grad_hook(musa_tls.recorder, leaf, old_grad);
}

/* The autograd node name of custom op `index` ("mylib::fBackward", living
 * as long as the process), or NULL (ops/custom.c). */
const char *musa_custom_op_backward_name(int64_t index);

/* Tensor flag used by autograd; the dispatcher tests it without knowing
 * the autograd meta. */
enum { MUSA_TF_REQUIRES_GRAD = 2 };

/* ---- the dispatcher ---- */

/* Run op on inputs. attrs points to the op's record (NULL: defaults).
 * out has n_out entries: NULL entries receive new references, non-NULL
 * entries are written in place. NULL inputs fail at once, keeping the
 * last error as is. */
int musa_dispatch(musa_op_id op, int n_in, musa_tensor *const *in, const void *attrs,
                  musa_tensor **out);

/* The checks of a provided output j (in place / out=) against the inferred
 * result r: not meta (outside symbolic mode), the result's shape, a dtype
 * the result casts to, no overlapping elements. Sets the error naming op. */
int musa_check_provided_out(const musa_op_info *info, int j, const musa_tensor *o,
                            const musa_infer *r);

/* The long-op hook (musa_set_long_op_hook) around a kernel touching `elems`
 * elements, inputs and outputs counted: begin calls it when set and the
 * work is long enough, and says whether it did; end undoes what begin did. */
bool musa_long_op_begin(int64_t elems);
void musa_long_op_end(bool began);

/* The public attribute record (musa_attrs_new): an op's record, tagged. */
struct musa_attrs {
    int op;
    musa_attrs_any rec;
};

/* Run a single-output op and return its output (new reference) or NULL. */
musa_tensor *musa_call(musa_op_id op, int n_in, musa_tensor *const *in, const void *attrs);

static inline musa_tensor *musa_call1(musa_op_id op, musa_tensor *x, const void *attrs) {
    return musa_call(op, 1, &x, attrs);
}
static inline musa_tensor *musa_call2(musa_op_id op, musa_tensor *a, musa_tensor *b,
                                      const void *attrs) {
    musa_tensor *in[2] = {a, b};
    return musa_call(op, 2, in, attrs);
}

/* Temporaries in op compositions: collect, then release together. */
typedef struct musa_temps {
    musa_tensor *t[48];
    int n;
} musa_temps;
static inline musa_tensor *musa_tmp(musa_temps *s, musa_tensor *t) {
    if (s->n < (int)(sizeof s->t / sizeof s->t[0])) {
        s->t[s->n++] = t;
        return t;
    }
    /* a composition longer than the list: fail the op, never abort */
    musa_tensor_release(t);
    musa_err(MUSA_ERR_RUNTIME, "[internal] an op composition needs more than %d temporaries",
             (int)(sizeof s->t / sizeof s->t[0]));
    return NULL;
}
static inline void musa_temps_release(musa_temps *s) {
    for (int i = 0; i < s->n; i++) musa_tensor_release(s->t[i]);
    s->n = 0;
}

/* Whether x can be viewed as `shape` without a copy (ops/infer_shape.c). */
int musa_view_possible(const musa_tensor *x, int ndim, const int64_t *shape);

/* Check that x (whose dtype is, or promotes to, dt) is a batch of float32
 * or float64 matrices (square if asked) that LAPACK can take; errors read
 * "[who] <what> must ..." (ops/infer_linalg.c). */
int musa_linalg_check(const char *who, const musa_tensor *x, musa_dtype dt, const char *what,
                      bool square);
/* musa_linalg_solve for matrix right-hand sides only: B (.., n, k) is never
 * taken for a batch of vectors, whatever its shape (ops/linalg.c). The
 * backward formulas and inv use it. */
musa_tensor *musa_linalg_solve_matrices(musa_tensor *a, musa_tensor *b);

/* Infer functions, one per family (ops/infer_*.c), and backward formulas
 * (ops/grad_*.c). */
#define OP(name, n_in, n_out, attrs, infer, kernel, ws, flags, grad, save, fn, py)                 \
    int infer(const musa_op_info *op, musa_tensor *const *in, int n_in_, void *attrs_,             \
              musa_infer *r);                                                                      \
    int grad(const musa_grad_args *a, musa_tensor **gin);
#include "ops.def"
#undef OP

#endif
