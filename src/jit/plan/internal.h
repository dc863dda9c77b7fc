/*
 * plan/internal.h - what a plan holds, shared by its builder (build.c, with
 * the memory placement in memory.c) and its executor (run.c). Nothing
 * outside src/jit/plan/ includes it.
 *
 * A plan is a list of instructions (a kernel call, a fused group of them,
 * or a run of update rows as one multi-tensor kernel) cut into steps; a
 * step runs one instruction, or two concurrently.
 * Every buffer an instruction touches is a kref: a slot and a byte offset
 * from that slot's base. Slots are numbered in a fixed order: the arena, the
 * steps' scratch, a fused group's tile buffers, then one slot per graph
 * input, per parameter or constant (param_vals), and per output buffer
 * (out_roots). The builder fills every kref once; a run only fills the slot
 * bases and patches the kernel views' data pointers, so nothing in the plan
 * is laid out again after the build.
 */
#ifndef MUSA_JIT_PLAN_INTERNAL_H
#define MUSA_JIT_PLAN_INTERNAL_H

#include <pthread.h>

#include "../../backend/cpu/chain.h"
#include "../plan.h"

/* Slots (the first four; inputs, parameters and outputs follow). */
typedef enum musa_plan_slot {
    MUSA_SLOT_ARENA = 0,   /* the arena: intermediates */
    MUSA_SLOT_SCRATCH = 1, /* kernel workspaces: offsets in the arena too */
    MUSA_SLOT_TILE = 2,    /* a fused group's tile buffer, relative to its chunk */
    MUSA_SLOT_IO = 3,      /* the first input's slot */
} musa_plan_slot;

typedef enum musa_instr_kind {
    MUSA_INSTR_KERNEL = 0, /* one kernel call */
    MUSA_INSTR_FUSED = 1,  /* a fusion group run tile by tile */
    MUSA_INSTR_MULTI = 2,  /* update rows of one op and attributes: one multi-tensor kernel */
} musa_instr_kind;

/* Views a run copies onto its stack for one kernel call (kcall.kv). */
#define MUSA_PLAN_KV_STACK (8 + MUSA_MAX_OUTPUTS)

/* A call of nk views shares its list with equal calls (interned by lower.c,
 * read-only, copied onto the stack at each run); longer lists are the
 * call's own, patched in place. */
static inline bool musa_plan_kv_shared(int nk) {
    return nk <= MUSA_PLAN_KV_STACK;
}

#define MUSA_PLAN_ALIGN 64 /* bytes: every buffer, tile and scratch starts aligned */

/* Sizes saturate at SIZE_MAX (no allocation meets it): a value or
 * workspace of an expanded tensor's 2^62 elements wrapped to a few bytes
 * of arena, which its kernel overran. */
static inline size_t musa_plan_align(size_t x) {
    return x > SIZE_MAX - (MUSA_PLAN_ALIGN - 1)
               ? SIZE_MAX
               : (x + MUSA_PLAN_ALIGN - 1) & ~(size_t)(MUSA_PLAN_ALIGN - 1);
}

typedef struct kref {
    uint32_t slot; /* musa_plan_slot, or an input, parameter or output slot */
    int64_t off;   /* bytes from the slot's base */
} kref;

/* One kernel call: views (outputs first, then inputs) and where their data is. */
typedef struct kcall {
    musa_kernel_fn kernel;
    musa_op_id op;
    const void *attrs; /* the node's attribute record (in the graph) */
    const char *name;
    const char *loc;
    int32_t n_in, n_out;
    musa_kview *kv; /* [n_out + n_in] with at most MUSA_PLAN_KV_STACK: a list shared with
                     * equal calls (lower.c), read-only, copied onto the stack at each
                     * run; longer lists and update rows: its own, data pointers patched
                     * at each run */
    kref *ref;      /* [n_out + n_in] */
    uint8_t *cut;   /* [n_out + n_in] fused members: this view is cut along dim 0 per tile;
                     * MUSA_CUT_STREAM on an output: written past the caches (run_tiles) */
    size_t scratch; /* bytes of workspace */
    int64_t *lean;  /* [n_out + n_in] a lean member of a flat group (its kernel's loop runs on
                     * each tile directly, musa_loop_resolve_fn): bytes per element of each
                     * operand, 0 for a single element; NULL: the kernel runs */
} kcall;

/* Whether kernel call k is a convolution that runs oneDNN's Winograd
 * primitive (attribute winograd, pass "winograd"; lower.c). */
bool musa_plan_kcall_winograd(const kcall *k);

/* A fused member's output that no later member reads, in a flat group too
 * large for the caches, goes through a staging tile and then to memory with
 * non-temporal stores: no read for ownership of the destination, and the
 * caches keep the tiles. */
#define MUSA_CUT_STREAM 2

typedef struct fused {
    int n;              /* members */
    kcall *m;           /* [n], in program order */
    int64_t rows;       /* extent of dim 0 of the group's shape */
    int64_t tile_rows;  /* rows per tile */
    int64_t tiles;      /* the last one takes the rows left (a head's: however many) */
    bool serial;        /* a matmul/conv heads it: tiles in order, the head parallel inside */
    size_t chunk_bytes; /* tile buffers + member scratch, per chunk */
    size_t tile_bytes;  /* tile buffers, per chunk */
    size_t stage_off;   /* the staging tile of streamed outputs, from the chunk's start */
    int max_chunks;
    musa_loop_fn *loop; /* [n] the lean members' loops, resolved at each run; NULL: none is lean */
    musa_chain *chain;  /* a flat float32 group in registers (chain.h); NULL: tiles only */
    kref *chain_ext;    /* [chain->n_ext] where each full operand is (cut per tile) */
    kref *chain_scal;   /* [chain->n_scal] where each single element is */
    bool chain_on;      /* this run's loops are all ones a chain knows (set at each run) */
} fused;

/* Consecutive update nodes (INPLACE rows) of one op with equal attributes,
 * none reading what another writes: one cpu_update_multi call, one
 * parallel loop over all their elements. */
typedef struct multi {
    int n;             /* rows: the update nodes, in program order */
    kcall *m;          /* [n] each row's kernel call (its views, patched at each run) */
    musa_kview **rows; /* [n] m[r].kv, as cpu_update_multi takes them */
    size_t scratch;    /* bytes of workspace: the prepared rows */
} multi;

typedef struct instr {
    uint8_t kind;       /* musa_instr_kind */
    int32_t node;       /* the (last) node it runs */
    kcall k;            /* MUSA_INSTR_KERNEL */
    fused *f;           /* MUSA_INSTR_FUSED */
    multi *u;           /* MUSA_INSTR_MULTI */
    size_t scratch_off; /* bytes from the scratch slot's base */
    const char *pname;  /* the profiler's name for it (set at the first profiled run) */
} instr;

typedef struct step {
    int32_t first, count; /* instructions [first, first + count) */
    bool parallel;        /* run them concurrently (count == 2) */
} step;

struct musa_plan {
    const musa_graph *g;
    musa_arena arena; /* everything below, except mem */
    instr *instrs;    /* [n_instrs], in step order */
    int n_instrs;
    step *steps; /* [n_steps] */
    int n_steps;
    int n_slots;
    int n_inputs;
    int32_t *param_vals; /* PARAM/CONST values by slot - MUSA_SLOT_IO - n_inputs */
    int n_params;
    int32_t *out_roots; /* output buffer slots: their root value */
    int32_t *out_first; /* the step that first writes each (allocated just before it) */
    int32_t *out_order; /* output buffers by first step: a run walks it with a cursor */
    int n_out_roots;
    int32_t *loan_roots; /* roots of loaned outputs placed in the arena */
    int n_loans;
    musa_storage *mem;      /* arena + scratch, kept between runs (made on the first run);
                             * loaned outputs hold it too */
    musa_plan_buffer *bufs; /* [n_bufs] arena buffers */
    int n_bufs;
    size_t arena_bytes, scratch_bytes;
    musa_plan_stats stats;
    musa_plan_options opt;
    pthread_mutex_t lock;
    atomic_int queued;    /* runs queued on streams and not finished (musa_plan_free waits) */
    atomic_int runs_here; /* 1: runs stay on the caller under streams (run.c); -1: no; 0: unknown */
    bool pnames;          /* instrs[].pname set */
    kref *vloc;           /* [values] where each value's data is */
};

static inline size_t musa_plan_value_bytes(const musa_gvalue *v) {
    size_t n = 1;
    for (int d = 0; d < v->ndim; d++) n = musa_sat_mul_size(n, (size_t)v->shape[d]);
    return musa_sat_mul_size(n, musa_dtype_info[v->dtype].size);
}

/* A kernel view of v's layout (no data pointer yet). */
static inline void musa_plan_kview_of(const musa_gvalue *v, musa_kview *kv) {
    memset(kv, 0, sizeof *kv);
    kv->dtype = v->dtype;
    kv->ndim = v->ndim;
    for (int d = 0; d < v->ndim; d++) kv->shape[d] = v->shape[d], kv->strides[d] = v->strides[d];
}

/* ---- memory placement (memory.c) ---- */

/* Arena offsets for bufs[0..n) (their bytes and lifetimes set): with
 * `reuse`, best fit in the best of a few orders (largest first, and
 * others: memory.c; the order that stacks the buffers live at the peak
 * only with peak_order, *peak_won (when not NULL) set when it gave the
 * offsets); without, one after another. Returns the arena's size in bytes.
 * Cannot fail: short of memory to plan with, it lays the buffers out one
 * after another. */
size_t musa_plan_assign_offsets(musa_plan_buffer *bufs, int n, bool reuse, bool peak_order,
                                bool *peak_won);
/* Scratch of bytes[s] for each step s < n_steps, placed in the arena in the
 * lowest best-fitting gap between the buffers live at s (off[s]; 0 where
 * bytes[s] is 0); *arena_bytes grows where no gap fits. Cannot fail (short
 * of memory, scratch goes at the end). */
void musa_plan_place_scratch(const musa_plan_buffer *bufs, int n_bufs, int n_steps,
                             const size_t *bytes, size_t *off, size_t *arena_bytes);

#endif
