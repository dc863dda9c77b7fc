/*
 * autograd.h - the tape: nodes, edges, saved tensors, the autograd meta of
 * tensors, and the hook the dispatcher calls to record a node.
 *
 * Invariants:
 * - a tensor's meta holds a strong reference to its grad_fn; a node holds
 *   strong references to the nodes of its next edges and to its saved
 *   inputs; saved outputs are detached aliases (no cycle), re-attached to
 *   this node only while unpacked for a create_graph backward;
 * - a leaf's AccumulateGrad node is referenced weakly from the leaf's meta
 *   (the node holds the leaf strongly), so it lives exactly as long as some
 *   graph uses it;
 * - nodes die through a thread-local trampoline, never by recursion, so
 *   freeing a chain of any length uses constant C stack.
 */
#ifndef MUSA_AUTOGRAD_H
#define MUSA_AUTOGRAD_H

#include <pthread.h>

#include "../ops/op.h"

typedef struct musa_hook {
    musa_hook_fn fn;
    void *ctx;
    void (*free_ctx)(void *ctx);
    int id;
    int output_nr;          /* which output of the node it watches */
    bool post;              /* leaf: called with the leaf after .grad accumulated */
    musa_tensor *retain_to; /* retain_grad: weak pointer to the tensor, else NULL */
    struct musa_hook *next;
} musa_hook;

typedef struct musa_edge {
    musa_node *node; /* strong; NULL when the input needs no gradient */
    int input_nr;    /* which output of `node` (its forward output index) */
} musa_edge;

typedef struct musa_saved {
    musa_tensor *t;   /* strong; outputs are stored detached; NULL if not kept */
    uint64_t version; /* storage version when saved */
} musa_saved;

enum { MUSA_NODE_OP, MUSA_NODE_ACCUMULATE, MUSA_NODE_CUSTOM };

struct musa_node {
    atomic_int_fast32_t refcount;
    uint8_t kind;
    bool released;                  /* saved tensors freed by a backward without retain_graph */
    musa_op_id op;                  /* MUSA_NODE_OP */
    int n_in;                       /* next edges = forward inputs */
    int n_out;                      /* forward outputs = incoming gradients */
    uint64_t seq;                   /* creation order */
    size_t alloc_size;              /* bytes of this node's allocation */
    atomic_uint_fast64_t run_owner; /* id of the backward run using run_slot, or 0 */
    int64_t run_slot;               /* that run's task index for this node */
    musa_edge *next;                /* [n_in] */
    musa_saved *saved_in;           /* [n_in] */
    musa_saved *saved_out;          /* [n_out] */
    musa_meta *in_meta;             /* [n_in] */
    musa_meta *out_meta;            /* [n_out] */
    void *attrs;                    /* the op's attrs record (trailing storage) */
    musa_hook *pre_hooks;           /* hooks on this node's outputs */
    musa_tensor *variable;          /* MUSA_NODE_ACCUMULATE: the leaf (strong) */
    /* MUSA_NODE_CUSTOM */
    musa_custom_backward custom_fn;
    void *custom_ctx;
    void (*custom_free)(void *ctx);
    char *name;  /* custom nodes: owned copy */
    char *trace; /* anomaly mode: where the forward op ran (owned) */
};

struct musa_autograd_meta {
    bool requires_grad;
    bool retains_grad;
    musa_node *grad_fn; /* strong */
    int output_nr;
    musa_node *grad_acc;   /* weak: leaf only */
    musa_tensor *grad;     /* strong */
    musa_hook *hooks;      /* leaf hooks (run by AccumulateGrad) */
    uint64_t view_version; /* views: storage version when grad_fn was set */
};

/* Held while a leaf's .grad pointer is read or replaced: backward passes on
 * several threads accumulate into one leaf (musa_tensor_grad and set_grad
 * take it too). The values of .grad are accumulated in place under it, so
 * reading them while another thread's backward runs is the caller's race. */
extern pthread_mutex_t musa_leaf_grad_lock;

/* Take / drop a reference to a node. Dropping is iterative (trampoline). */
musa_node *musa_node_retain(musa_node *n);
void musa_node_release(musa_node *n);

/* The autograd meta of t, created on first use (NULL only on OOM). */
struct musa_autograd_meta *musa_autograd_meta_of(musa_tensor *t);

/* The edge a gradient for t flows along (its grad_fn, or its leaf
 * accumulator, created on demand). A new reference in e->node. */
int musa_gradient_edge(musa_tensor *t, musa_edge *e);

/* Unpack a saved tensor for a backward run: checks the version (error
 * names the op) and, for outputs under create_graph, re-attaches this node
 * as the grad_fn. Returns a new reference. */
int musa_saved_unpack(musa_node *node, bool is_output, int index, bool create_graph,
                      musa_tensor **out);

/* Release every saved tensor of a node. */
void musa_node_release_saved(musa_node *n);

/* A view's history is regenerated from its base (as_strided of the base's
 * current history) when the storage was written since it was set, or the
 * base started requiring grad after the view was made. */
int musa_view_refresh(musa_tensor *t);

/* Make sure the dispatcher hooks are installed (idempotent). */
void musa_autograd_init(void);

/* Thread-local anomaly state. */
extern _Thread_local const char *musa_anomaly_file;
extern _Thread_local int musa_anomaly_line;

#endif
