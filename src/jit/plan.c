/*
 * plan.c - lowering an optimised graph to a plan (schedule, memory plan,
 * fused-tile instructions) and the executor.
 */
#include "plan.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>

#include "../backend/cpu/alloc.h"
#include "../backend/cpu/kernels.h"
#include "../base/threadpool.h"

enum { SLOT_ARENA = 0, SLOT_SCRATCH = 1, SLOT_TILE = 2, SLOT_IO = 3 };
enum { I_KERNEL = 0, I_FUSED = 1 };

#define ALIGN 64
#define TILE_ELEMS 8192      /* elements per fused tile (elementwise groups) */
#define HEAVY_ELEMS 4096     /* outputs at least this big may run as concurrent tasks... */
#define SOLO_ELEMS 65536     /* ...and at most this big: larger kernels use every thread alone */
#define WINDOW 8             /* how far ahead a concurrent partner is looked for */

static size_t align_up(size_t x) {
    return (x + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

typedef struct kref {
    uint32_t slot;
    int64_t off; /* bytes from the slot's base */
} kref;

/* One kernel call: views (outputs first, then inputs) and where their data is. */
typedef struct kcall {
    musa_kernel_fn kernel;
    musa_op_id op;
    const void *attrs;
    const char *name;
    const char *loc;
    int32_t n_in, n_out;
    musa_kview *kv;
    kref *ref;
    uint8_t *cut; /* fused members: this view is cut along dim 0 per tile */
    size_t scratch;
} kcall;

typedef struct fused {
    int n;
    kcall *m;
    int64_t rows;      /* extent of dim 0 of the group's shape */
    int64_t tile_rows; /* rows per tile */
    bool serial;       /* a matmul/conv heads it: tiles in order, the head parallel inside */
    size_t chunk_bytes; /* tile buffers + member scratch, per chunk */
    size_t tile_bytes;  /* tile buffers, per chunk */
    int max_chunks;
} fused;

typedef struct instr {
    uint8_t kind;
    int32_t node; /* the (last) node it runs */
    kcall k;      /* I_KERNEL */
    fused *f;     /* I_FUSED */
    size_t scratch_off;
} instr;

typedef struct step {
    int32_t first, count;
    bool parallel;
} step;

typedef struct pout {
    int32_t value;
    int32_t root_slot; /* output buffer slot, or -1 when it aliases an input/param/const */
} pout;

struct musa_plan {
    const musa_graph *g;
    musa_arena arena;
    instr *instrs;
    int n_instrs;
    step *steps;
    int n_steps;
    int n_slots;
    int n_inputs;
    int32_t *param_vals; /* PARAM/CONST values by slot - SLOT_IO - n_inputs */
    int n_params;
    int32_t *out_roots; /* output buffer slots: their root value */
    int32_t *out_first; /* the step that first writes each (allocated just before it) */
    int32_t *out_order; /* output buffers by first step: a run walks it with a cursor */
    int n_out_roots;
    char *mem;          /* arena + scratch, kept between runs (made on the first run) */
    size_t mem_block;
    musa_plan_buffer *bufs;
    int n_bufs;
    size_t arena_bytes, scratch_bytes;
    musa_plan_stats stats;
    musa_plan_options opt;
    pthread_mutex_t lock;
    /* per value: where its data is */
    kref *vloc;
};

/* ---- helpers ---- */

static size_t value_bytes(const musa_gvalue *v) {
    size_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= (size_t)v->shape[d];
    return n * musa_dtype_info[v->dtype].size;
}

static void kview_of(const musa_gvalue *v, musa_kview *kv) {
    memset(kv, 0, sizeof *kv);
    kv->dtype = v->dtype;
    kv->ndim = v->ndim;
    for (int d = 0; d < v->ndim; d++) kv->shape[d] = v->shape[d], kv->strides[d] = v->strides[d];
}

/* ---- build ---- */

typedef struct builder {
    const musa_graph *g;
    musa_plan *p;
    int32_t *node_instr; /* node -> instruction index (group members: the group's) */
    int32_t *vstep;      /* value -> step that writes it (-1: before the plan) */
    int32_t *vlast;      /* value -> last step reading it (n_steps: after the plan) */
    uint8_t *internal;   /* value lives only inside its fused group */
    uint8_t *is_out;     /* value is a graph output, mutation value or break value */
    int32_t *buf_of;     /* root value -> buffer index, or -1 */
} builder;

static int fill_kcall(builder *b, kcall *k, const musa_gnode *n) {
    const musa_graph *g = b->g;
    const musa_op_info *info = &musa_ops[n->op];
    musa_arena *A = &b->p->arena;
    k->kernel = info->kernel;
    k->op = (musa_op_id)n->op;
    k->attrs = &n->attrs;
    k->name = info->name;
    k->loc = n->loc;
    k->n_in = n->n_in;
    k->n_out = n->n_out;
    int nk = n->n_in + n->n_out;
    k->kv = MUSA_ARENA_NEW(A, musa_kview, nk);
    k->ref = MUSA_ARENA_NEW(A, kref, nk);
    k->cut = MUSA_ARENA_NEW(A, uint8_t, nk);
    if (!k->kv || !k->ref || !k->cut) return MUSA_ERR_NOMEM;
    for (int j = 0; j < n->n_out; j++) kview_of(&g->values.data[n->out[j]], &k->kv[j]);
    for (int i = 0; i < n->n_in; i++) kview_of(&g->values.data[n->in[i]], &k->kv[n->n_out + i]);
    if (info->workspace)
        k->scratch = info->workspace(k->kv, n->n_out, k->kv + n->n_out, n->n_in, k->attrs);
    return MUSA_OK;
}

/* Fused group made of nodes mem[0..cnt). */
static int build_fused(builder *b, fused *f, const int32_t *mem, int cnt) {
    const musa_graph *g = b->g;
    musa_arena *A = &b->p->arena;
    f->n = cnt;
    f->m = MUSA_ARENA_NEW(A, kcall, cnt);
    if (!f->m) return MUSA_ERR_NOMEM;
    const musa_gnode *first = &g->nodes.data[mem[0]];
    const musa_op_info *finfo = &musa_ops[first->op];
    f->serial = !(finfo->flags & MUSA_OPF_ELEMENTWISE);
    /* The group's shape: the output of its first member (every elementwise
     * member has it; a tail reduction cuts the same dim 0). */
    const musa_gvalue *gs = &g->values.data[first->out[0]];
    bool has_red = false;
    for (int i = 0; i < cnt; i++)
        has_red |= (musa_ops[g->nodes.data[mem[i]].op].flags & MUSA_OPF_REDUCTION) != 0;
    int64_t numel = 1;
    for (int d = 0; d < gs->ndim; d++) numel *= gs->shape[d];
    /* Flatten pure elementwise groups whose operands are all full and
     * contiguous, or single elements: tiles are then plain runs. */
    bool flat = !f->serial && !has_red;
    for (int i = 0; flat && i < cnt; i++) {
        const musa_gnode *n = &g->nodes.data[mem[i]];
        for (int k = 0; flat && k < n->n_in + n->n_out; k++) {
            int32_t v = k < n->n_out ? n->out[k] : n->in[k - n->n_out];
            const musa_gvalue *x = &g->values.data[v];
            musa_kview kv;
            kview_of(x, &kv);
            bool full = musa_shape_equal(x->ndim, x->shape, gs->ndim, gs->shape) &&
                        musa_kview_contiguous(&kv);
            int64_t ne = 1;
            for (int d = 0; d < x->ndim; d++) ne *= x->shape[d];
            flat = full || ne == 1;
        }
    }
    int64_t inner = 1;
    for (int d = 1; d < gs->ndim; d++) inner *= gs->shape[d];
    f->rows = flat ? numel : gs->shape[0];
    if (flat) inner = 1;
    int64_t per = f->serial ? MUSA_HEAD_TILE_ELEMS : TILE_ELEMS;
    f->tile_rows = inner > 0 ? MUSA_MAX(1, per / inner) : f->rows;
    if (f->tile_rows > f->rows) f->tile_rows = f->rows ? f->rows : 1;
    size_t tile_off = 0, member_scratch = 0;
    for (int i = 0; i < cnt; i++) {
        const musa_gnode *n = &g->nodes.data[mem[i]];
        const musa_op_info *info = &musa_ops[n->op];
        kcall *k = &f->m[i];
        int rc = fill_kcall(b, k, n);
        if (rc) return rc;
        bool ew = (info->flags & MUSA_OPF_ELEMENTWISE) != 0;
        for (int q = 0; q < k->n_out + k->n_in; q++) {
            int32_t v = q < k->n_out ? n->out[q] : n->in[q - k->n_out];
            const musa_gvalue *x = &g->values.data[v];
            musa_kview *kv = &k->kv[q];
            if (flat) {
                int64_t ne = 1;
                for (int d = 0; d < x->ndim; d++) ne *= x->shape[d];
                bool full = musa_shape_equal(x->ndim, x->shape, gs->ndim, gs->shape);
                if (full) {
                    kv->ndim = 1, kv->shape[0] = numel, kv->strides[0] = 1;
                } else {
                    kv->ndim = 0;
                    (void)ne;
                }
            }
            if (b->internal[v]) {
                b->p->vloc[v].slot = SLOT_TILE;
                k->ref[q] = b->p->vloc[v];
                k->cut[q] = 1;
                continue;
            }
            k->ref[q] = b->p->vloc[v]; /* patched after memory planning */
            if (q < k->n_out)
                k->cut[q] = 1;
            else if (ew)
                k->cut[q] = kv->ndim == (flat ? 1 : gs->ndim) && kv->ndim > 0 &&
                            kv->shape[0] == f->rows && kv->strides[0] != 0;
            else
                k->cut[q] = q == k->n_out; /* head / reduction: input 0 only */
        }
        /* Tile buffers for internal outputs: tile_rows rows of the value. */
        for (int j = 0; j < k->n_out; j++) {
            int32_t v = n->out[j];
            if (!b->internal[v]) continue;
            const musa_gvalue *x = &g->values.data[v];
            size_t row_bytes = musa_dtype_info[x->dtype].size * (size_t)(flat ? 1 : inner);
            b->p->vloc[v].off = (int64_t)tile_off;
            k->ref[j].off = (int64_t)tile_off;
            tile_off += align_up(row_bytes * (size_t)f->tile_rows);
        }
        if (info->workspace) {
            /* scratch for a full tile */
            musa_kview kvs[8 + MUSA_MAX_OUTPUTS];
            int nk = k->n_out + k->n_in;
            if (nk <= (int)(sizeof kvs / sizeof kvs[0])) {
                for (int q = 0; q < nk; q++) {
                    kvs[q] = k->kv[q];
                    if (k->cut[q] && kvs[q].ndim > 0) kvs[q].shape[0] = f->tile_rows;
                }
                size_t s = info->workspace(kvs, k->n_out, kvs + k->n_out, k->n_in, k->attrs);
                k->scratch = MUSA_MAX(k->scratch, s);
            }
        }
        member_scratch = MUSA_MAX(member_scratch, k->scratch);
    }
    /* Inputs that read an internal value take its tile reference. */
    for (int i = 0; i < cnt; i++) {
        const musa_gnode *n = &g->nodes.data[mem[i]];
        kcall *k = &f->m[i];
        for (int q = k->n_out; q < k->n_out + k->n_in; q++) {
            int32_t v = n->in[q - k->n_out];
            if (b->internal[v]) k->ref[q] = b->p->vloc[v], k->cut[q] = 1;
        }
    }
    f->tile_bytes = tile_off;
    f->chunk_bytes = tile_off + align_up(member_scratch);
    f->max_chunks = f->serial ? 1 : MUSA_MAX(1, musa_pool_threads());
    return MUSA_OK;
}

static int cmp_buf_size(const void *a, const void *b) {
    const musa_plan_buffer *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->first - y->first;
}

/* Best fit: each buffer (largest first) takes the smallest gap between
 * buffers already placed whose lifetimes overlap its own. */
static size_t assign_offsets(musa_plan_buffer *bufs, int n, bool reuse) {
    size_t total = 0;
    if (!reuse) {
        for (int i = 0; i < n; i++) bufs[i].offset = total, total += align_up(bufs[i].bytes);
        return total;
    }
    int *order = malloc(sizeof(int) * (size_t)(n ? n : 1));
    musa_plan_buffer *sorted = malloc(sizeof *sorted * (size_t)(n ? n : 1));
    int *placed = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!order || !sorted || !placed) {
        free(order), free(sorted), free(placed);
        for (int i = 0; i < n; i++) bufs[i].offset = total, total += align_up(bufs[i].bytes);
        return total;
    }
    memcpy(sorted, bufs, sizeof *sorted * (size_t)n);
    /* remember original positions through the value id */
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_buf_size);
    int np = 0;
    for (int i = 0; i < n; i++) {
        musa_plan_buffer *x = &sorted[i];
        size_t need = align_up(x->bytes);
        /* overlapping placed buffers, by offset */
        int m = 0;
        for (int j = 0; j < np; j++) {
            musa_plan_buffer *y = &sorted[placed[j]];
            if (y->first <= x->last && x->first <= y->last) order[m++] = placed[j];
        }
        for (int a = 1; a < m; a++) /* insertion sort by offset */
            for (int c = a; c > 0 && sorted[order[c]].offset < sorted[order[c - 1]].offset; c--) {
                int t = order[c];
                order[c] = order[c - 1], order[c - 1] = t;
            }
        size_t best = SIZE_MAX, best_gap = SIZE_MAX, cur = 0;
        for (int a = 0; a < m; a++) {
            musa_plan_buffer *y = &sorted[order[a]];
            if (y->offset >= cur && y->offset - cur >= need && y->offset - cur < best_gap)
                best = cur, best_gap = y->offset - cur;
            size_t end = y->offset + align_up(y->bytes);
            if (end > cur) cur = end;
        }
        x->offset = best != SIZE_MAX ? best : cur;
        if (x->offset + need > total) total = x->offset + need;
        placed[np++] = i;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (sorted[j].value == bufs[i].value) bufs[i].offset = sorted[j].offset;
    free(order), free(sorted), free(placed);
    return total;
}

static bool heavy_node(const musa_graph *g, const musa_gnode *n) {
    const musa_op_info *info = &musa_ops[n->op];
    if (info->flags & (MUSA_OPF_ELEMENTWISE | MUSA_OPF_VIEW | MUSA_OPF_RANDOM | MUSA_OPF_THREADS))
        return false; /* THREADS: in a task it would run single-threaded, rounding otherwise */
    const musa_gvalue *o = &g->values.data[n->out[0]];
    int64_t ne = 1;
    for (int d = 0; d < o->ndim; d++) ne *= o->shape[d];
    /* Measured on ResNet-18 training (2 threads): two convolutions as
     * single-threaded tasks ran 15% slower than one after the other with
     * both threads each; concurrency pays for mid-sized kernels only. */
    if (ne > SOLO_ELEMS) return false;
    return ne >= HEAVY_ELEMS || (info->attrs_kind == MUSA_ATTRS_matmul && ne >= 64);
}

/* Worth a task of its own: a big kernel, or a group that a big kernel heads. */
static bool heavy(const musa_graph *g, const instr *in, const int32_t *first_member) {
    if (in->kind == I_KERNEL) return heavy_node(g, &g->nodes.data[in->node]);
    return heavy_node(g, &g->nodes.data[first_member[g->nodes.data[in->node].group]]);
}

/* Whether mutation target <- value can be computed in place into the
 * target: same dtype, shape and contiguous layout, value a root, and every
 * read of the old target done before the value's step, or within the same
 * (non-parallel) instruction by the elementwise node that makes the value or
 * by fused members that run no later than it, reading the same elements. */
static bool mutation_in_place(const builder *b, int32_t t, int32_t v, const int32_t *istep,
                              int32_t *mem) {
    const musa_graph *g = b->g;
    const musa_gvalue *tv = &g->values.data[t], *vv = &g->values.data[v];
    if (vv->root != v || vv->kind != MUSA_V_NODE || vv->producer < 0 || tv->dtype != vv->dtype ||
        !musa_shape_equal(tv->ndim, tv->shape, vv->ndim, vv->shape) || b->buf_of[v] != -1)
        return false;
    musa_kview kv;
    kview_of(tv, &kv);
    if (!musa_kview_contiguous(&kv) || tv->offset != 0) return false;
    for (int64_t i = 0; i < g->outputs.len; i++)
        if (g->values.data[g->outputs.data[i]].root == v) return false;
    int32_t in = b->node_instr[vv->producer];
    if (in < 0) return false;
    int32_t s = istep[in];
    if (b->p->steps[s].parallel) return false;
    if (b->vlast[t] < s) return true;
    if (b->vlast[t] > s) return false;
    /* Reads in the producing step: only by the producer's instruction. */
    const instr *ins = &b->p->instrs[in];
    int cnt = 0;
    for (int64_t j = 0; j < g->nodes.len; j++)
        if (b->node_instr[j] == in) mem[cnt++] = (int32_t)j;
    for (int c = 0; c < cnt; c++) {
        const musa_gnode *n = &g->nodes.data[mem[c]];
        bool reads = false, same = true, paired = true;
        for (int k = 0; k < n->n_in; k++) {
            const musa_gvalue *x = &g->values.data[n->in[k]];
            if (x->root != t) continue;
            reads = true;
            same = same && n->in[k] == t;
            paired = paired && k == vv->out_index;
        }
        if (!reads) continue;
        /* An update (INPLACE) may write its output j over its input j only. */
        uint32_t fl = musa_ops[n->op].flags;
        bool update_pair = (fl & MUSA_OPF_INPLACE) && mem[c] == vv->producer && paired;
        if (!same || !((fl & MUSA_OPF_ELEMENTWISE) || update_pair)) return false;
        if (ins->kind == I_FUSED && mem[c] > vv->producer) return false;
        if (ins->kind == I_KERNEL && mem[c] != vv->producer) return false;
        const musa_gvalue *o = &g->values.data[n->out[0]];
        if (!musa_shape_equal(o->ndim, o->shape, tv->ndim, tv->shape)) return false;
    }
    return true;
}

/* Lowest offset (best fit) for `bytes` of scratch at step s, among the
 * arena buffers live at s; grows the arena when no gap fits. */
static size_t place_scratch(musa_plan *p, int s, size_t bytes) {
    size_t need = align_up(bytes), best = SIZE_MAX, best_gap = SIZE_MAX, cur = 0;
    int n = 0;
    for (int k = 0; k < p->n_bufs; k++) n += p->bufs[k].first <= s && s <= p->bufs[k].last;
    const musa_plan_buffer **live = malloc(sizeof *live * (size_t)(n ? n : 1));
    if (!live) { /* no room to look: at the end */
        size_t off = align_up(p->arena_bytes);
        p->arena_bytes = off + need;
        return off;
    }
    n = 0;
    for (int k = 0; k < p->n_bufs; k++)
        if (p->bufs[k].first <= s && s <= p->bufs[k].last) live[n++] = &p->bufs[k];
    for (int a = 1; a < n; a++) /* by offset */
        for (int c = a; c > 0 && live[c]->offset < live[c - 1]->offset; c--) {
            const musa_plan_buffer *t = live[c];
            live[c] = live[c - 1], live[c - 1] = t;
        }
    for (int a = 0; a < n; a++) {
        if (live[a]->offset >= cur && live[a]->offset - cur >= need &&
            live[a]->offset - cur < best_gap)
            best = cur, best_gap = live[a]->offset - cur;
        size_t end = live[a]->offset + align_up(live[a]->bytes);
        if (end > cur) cur = end;
    }
    free(live);
    size_t off = best != SIZE_MAX ? best : cur;
    if (off + need > p->arena_bytes) p->arena_bytes = off + need;
    return off;
}

/* Instruction i draws random numbers (its place in the order is fixed). */
static bool instr_random(const builder *b, int i) {
    for (int64_t j = 0; j < b->g->nodes.len; j++)
        if (b->node_instr[j] == i && (musa_ops[b->g->nodes.data[j].op].flags & MUSA_OPF_RANDOM))
            return true;
    return false;
}

/* Every value instruction i reads is made by an emitted instruction (or is
 * no instruction's: inputs, parameters, constants). */
static bool inputs_ready(const builder *b, int i, const uint8_t *emitted) {
    const musa_graph *g = b->g;
    for (int64_t j = 0; j < g->nodes.len; j++) {
        if (b->node_instr[j] != i) continue;
        const musa_gnode *n = &g->nodes.data[j];
        for (int k = 0; k < n->n_in; k++) {
            int32_t r = g->values.data[n->in[k]].root, pr = g->values.data[r].producer;
            if (pr < 0) continue;
            int32_t src = b->node_instr[pr];
            if (src >= 0 && src != i && !emitted[src]) return false;
        }
    }
    return true;
}

musa_plan *musa_plan_build(const musa_graph *g, const musa_plan_options *opt) {
    if (!g) {
        musa_err(MUSA_ERR_VALUE, "[jit] plan_build: graph is NULL");
        return NULL;
    }
    if (g->capturing) {
        musa_err(MUSA_ERR_RUNTIME, "[jit] plan_build: the graph is still capturing");
        return NULL;
    }
    musa_plan *p = musa_calloc(1, sizeof *p, "plan_build");
    if (!p) return NULL;
    musa_arena_init(&p->arena, 0);
    pthread_mutex_init(&p->lock, NULL);
    p->g = g;
    if (opt) p->opt = *opt;
    int threads = p->opt.num_threads > 0 ? p->opt.num_threads : musa_get_num_threads();
    if (threads > musa_pool_threads()) threads = musa_pool_threads();
    int64_t nv = g->values.len, nn = g->nodes.len;
    builder b = {.g = g, .p = p};
    musa_arena *A = &p->arena;
    b.node_instr = MUSA_ARENA_NEW(A, int32_t, nn + 1);
    b.vstep = MUSA_ARENA_NEW(A, int32_t, nv + 1);
    b.vlast = MUSA_ARENA_NEW(A, int32_t, nv + 1);
    b.internal = MUSA_ARENA_NEW(A, uint8_t, nv + 1);
    b.is_out = MUSA_ARENA_NEW(A, uint8_t, nv + 1);
    b.buf_of = MUSA_ARENA_NEW(A, int32_t, nv + 1);
    p->vloc = MUSA_ARENA_NEW(A, kref, nv + 1);
    int32_t *gsize = MUSA_ARENA_NEW(A, int32_t, nn + 1);   /* members per group id */
    int32_t *glast = MUSA_ARENA_NEW(A, int32_t, nn + 1);   /* last member per group id */
    int32_t *vgroup = MUSA_ARENA_NEW(A, int32_t, nv + 1);  /* producer's group */
    int32_t *gfirst = MUSA_ARENA_NEW(A, int32_t, nn + 1);  /* first member per group id */
    p->instrs = MUSA_ARENA_NEW(A, instr, nn + 1);
    p->steps = MUSA_ARENA_NEW(A, step, nn + 1);
    if (!b.node_instr || !b.vstep || !b.vlast || !b.internal || !b.is_out || !b.buf_of ||
        !p->vloc || !gsize || !glast || !vgroup || !gfirst || !p->instrs || !p->steps)
        goto nomem;

    /* Groups: members and last member. */
    for (int64_t i = 0; i < nn; i++) glast[i] = -1;
    for (int64_t i = 0; i < nn; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead || n->group < 0) continue;
        if (!gsize[n->group]++) gfirst[n->group] = (int32_t)i;
        glast[n->group] = (int32_t)i;
    }
    for (int64_t v = 0; v < nv; v++) {
        vgroup[v] = -1;
        b.buf_of[v] = -1;
        const musa_gvalue *x = &g->values.data[v];
        if (x->kind == MUSA_V_NODE && x->producer >= 0) {
            const musa_gnode *n = &g->nodes.data[x->producer];
            if (!n->dead && n->group >= 0 && gsize[n->group] > 1) vgroup[v] = n->group;
        }
    }
    for (int64_t i = 0; i < g->outputs.len; i++) b.is_out[g->outputs.data[i]] = 1;
    for (int64_t i = 0; i < g->mutations.len; i++) b.is_out[g->mutations.data[i].value] = 1;
    for (int64_t i = 0; i < g->breaks.len; i++) b.is_out[g->breaks.data[i].value] = 1;
    /* Internal: produced in a group, read only by members of that group. */
    for (int64_t v = 0; v < nv; v++)
        b.internal[v] = vgroup[v] >= 0 && !b.is_out[v] && g->values.data[v].root == v;
    for (int64_t i = 0; i < nn; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) {
            int32_t v = n->in[k];
            if (vgroup[v] >= 0 && (n->group != vgroup[v] || gsize[n->group] <= 1))
                b.internal[v] = 0;
            /* a view of a group value also reads it */
            int32_t r = g->values.data[v].root;
            if (r != v && vgroup[r] >= 0) b.internal[r] = 0;
        }
    }
    for (int64_t v = 0; v < nv; v++) {
        int32_t r = g->values.data[v].root;
        if (r != v && b.is_out[v]) b.internal[r] = 0;
    }

    /* Instructions, in program order; a group is emitted at its last member. */
    int ni = 0;
    int32_t *mem = MUSA_ARENA_NEW(A, int32_t, nn + 1);
    if (!mem) goto nomem;
    for (int64_t i = 0; i < nn; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        b.node_instr[i] = -1;
        if (n->dead) continue;
        const musa_op_info *info = &musa_ops[n->op];
        if (info->flags & MUSA_OPF_VIEW) {
            p->stats.views++;
            continue;
        }
        if (n->group >= 0 && gsize[n->group] > 1) {
            if (glast[n->group] != (int32_t)i) continue;
            int cnt = 0;
            for (int64_t j = 0; j <= i; j++)
                if (!g->nodes.data[j].dead && g->nodes.data[j].group == n->group)
                    mem[cnt++] = (int32_t)j;
            instr *in = &p->instrs[ni];
            in->kind = I_FUSED;
            in->node = (int32_t)i;
            in->f = MUSA_ARENA_NEW(A, fused, 1);
            if (!in->f) goto nomem;
            for (int c = 0; c < cnt; c++) b.node_instr[mem[c]] = ni;
            p->stats.fused_groups++;
            p->stats.fused_nodes += cnt;
            ni++;
            continue;
        }
        instr *in = &p->instrs[ni];
        in->kind = I_KERNEL;
        in->node = (int32_t)i;
        b.node_instr[i] = ni++;
        p->stats.kernels++;
    }
    p->n_instrs = ni;

    /* Schedule: program order (it keeps lifetimes short). With more than
     * one thread, a heavy instruction is paired with the next heavy one, up
     * to WINDOW instructions ahead, whose inputs are all ready and that
     * draws no random numbers: the pair runs as one parallel step. */
    instr *sorted = MUSA_ARENA_NEW(A, instr, ni + 1);
    int32_t *order = MUSA_ARENA_NEW(A, int32_t, ni + 1);
    uint8_t *emitted = MUSA_ARENA_NEW(A, uint8_t, ni + 1);
    if (!sorted || !order || !emitted) goto nomem;
    int ns = 0, w = 0;
    for (int i = 0; i < ni; i++) {
        if (emitted[i]) continue;
        int partner = -1;
        if (threads >= 2 && heavy(g, &p->instrs[i], gfirst) && !instr_random(&b, i))
            for (int j = i + 1; j < ni && j <= i + WINDOW && partner < 0; j++)
                if (!emitted[j] && heavy(g, &p->instrs[j], gfirst) && !instr_random(&b, j) &&
                    inputs_ready(&b, j, emitted))
                    partner = j;
        p->steps[ns] = (step){.first = w, .count = partner < 0 ? 1 : 2, .parallel = partner >= 0};
        order[w++] = i;
        emitted[i] = 1;
        if (partner >= 0) {
            order[w++] = partner;
            emitted[partner] = 1;
            p->stats.parallel_steps++;
        }
        ns++;
    }
    p->n_steps = ns;
    int32_t *remap = MUSA_ARENA_NEW(A, int32_t, ni + 1); /* old instr -> new index */
    if (!remap) goto nomem;
    for (int i = 0; i < ni; i++) sorted[i] = p->instrs[order[i]], remap[order[i]] = i;
    for (int64_t j = 0; j < nn; j++)
        if (b.node_instr[j] >= 0) b.node_instr[j] = remap[b.node_instr[j]];
    p->instrs = sorted;
    int32_t *istep = MUSA_ARENA_NEW(A, int32_t, ni + 1);
    if (!istep) goto nomem;
    for (int s = 0; s < ns; s++)
        for (int c = 0; c < p->steps[s].count; c++) istep[p->steps[s].first + c] = s;

    /* Liveness per value, then per root. */
    for (int64_t v = 0; v < nv; v++) b.vstep[v] = -1, b.vlast[v] = -1;
    for (int64_t j = 0; j < nn; j++) {
        const musa_gnode *n = &g->nodes.data[j];
        if (n->dead || b.node_instr[j] < 0) continue;
        int s = istep[b.node_instr[j]];
        for (int q = 0; q < n->n_out; q++) b.vstep[n->out[q]] = s;
        for (int k = 0; k < n->n_in; k++) {
            int32_t r = g->values.data[n->in[k]].root;
            if (s > b.vlast[r]) b.vlast[r] = s;
        }
    }
    for (int64_t v = 0; v < nv; v++)
        if (b.is_out[v]) b.vlast[g->values.data[v].root] = ns;

    /* Slots: arena, scratch, tile, inputs, params/consts, output buffers. */
    p->n_inputs = (int)g->inputs.len;
    int slot = SLOT_IO;
    for (int64_t i = 0; i < g->inputs.len; i++)
        p->vloc[g->inputs.data[i]] = (kref){(uint32_t)slot++, 0};
    p->param_vals = MUSA_ARENA_NEW(A, int32_t, nv + 1);
    p->out_roots = MUSA_ARENA_NEW(A, int32_t, nv + 1);
    p->out_first = MUSA_ARENA_NEW(A, int32_t, nv + 1);
    p->out_order = MUSA_ARENA_NEW(A, int32_t, nv + 1);
    p->bufs = MUSA_ARENA_NEW(A, musa_plan_buffer, nv + 1);
    if (!p->param_vals || !p->out_roots || !p->out_first || !p->out_order || !p->bufs) goto nomem;
    for (int64_t v = 0; v < nv; v++) {
        const musa_gvalue *x = &g->values.data[v];
        if (x->kind == MUSA_V_PARAM || x->kind == MUSA_V_CONST) {
            p->param_vals[p->n_params++] = (int32_t)v;
            p->vloc[v] = (kref){(uint32_t)slot++, 0};
        }
    }
    /* A write-back whose new value can be computed straight into its target
     * (every read of the old value is done by then) is: no copy, no buffer. */
    uint8_t *direct = MUSA_ARENA_NEW(A, uint8_t, nv + 1);
    if (!direct) goto nomem;
    for (int64_t i = 0; i < g->mutations.len; i++) {
        const musa_gmutation *m = &g->mutations.data[i];
        if (mutation_in_place(&b, m->target, m->value, istep, mem)) {
            direct[m->value] = 1;
            p->vloc[m->value] = p->vloc[m->target];
            b.buf_of[m->value] = -3;
            p->stats.inplace++;
        }
    }
    /* Roots of outputs get their own buffers (handed to the caller). */
    for (int64_t i = 0; i < g->outputs.len + g->breaks.len; i++) {
        int32_t v = i < g->outputs.len ? g->outputs.data[i]
                                       : g->breaks.data[i - g->outputs.len].value;
        int32_t r = g->values.data[v].root;
        const musa_gvalue *x = &g->values.data[r];
        if (x->kind != MUSA_V_NODE || direct[r]) continue;
        bool have = false;
        for (int k = 0; k < p->n_out_roots && !have; k++) have = p->out_roots[k] == r;
        if (have) continue;
        p->out_first[p->n_out_roots] = b.vstep[r] < 0 ? 0 : b.vstep[r];
        p->out_roots[p->n_out_roots++] = r;
        p->vloc[r] = (kref){(uint32_t)slot++, 0};
        b.buf_of[r] = -2; /* not in the arena */
    }
    p->n_slots = slot;
    for (int k = 0; k < p->n_out_roots; k++) { /* insertion sort by first step */
        int c = k;
        for (; c > 0 && p->out_first[p->out_order[c - 1]] > p->out_first[k]; c--)
            p->out_order[c] = p->out_order[c - 1];
        p->out_order[c] = k;
    }

    /* Arena buffers, with in-place reuse for elementwise kernels. */
    size_t naive = 0;
    for (int i = 0; i < ni; i++) {
        instr *in = &p->instrs[i];
        int s = istep[i];
        for (int64_t j = 0; j < nn; j++) {
            if (b.node_instr[j] != i) continue;
            const musa_gnode *n = &g->nodes.data[j];
            const musa_op_info *info = &musa_ops[n->op];
            for (int q = 0; q < n->n_out; q++) {
                int32_t v = n->out[q];
                const musa_gvalue *x = &g->values.data[v];
                naive += align_up(value_bytes(x));
                if (b.internal[v] || b.buf_of[v] != -1) continue;
                if (b.vlast[v] < s) b.vlast[v] = s; /* written even if unread */
                /* In place: an elementwise kernel's input root of the same
                 * size and layout dies here, read by nothing else in it. */
                if (in->kind == I_KERNEL && (info->flags & MUSA_OPF_ELEMENTWISE) &&
                    n->n_out == 1 && !p->steps[s].parallel && p->opt.memory_arena) {
                    for (int k = 0; k < n->n_in && b.buf_of[v] == -1; k++) {
                        int32_t iv = n->in[k];
                        const musa_gvalue *y = &g->values.data[iv];
                        if (y->root != iv || y->kind != MUSA_V_NODE || b.buf_of[iv] < 0 ||
                            b.vlast[iv] != s || y->dtype != x->dtype ||
                            !musa_shape_equal(y->ndim, y->shape, x->ndim, x->shape))
                            continue;
                        bool alone = true;
                        for (int k2 = 0; k2 < n->n_in; k2++)
                            if (k2 != k && g->values.data[n->in[k2]].root == iv &&
                                n->in[k2] != iv)
                                alone = false;
                        if (!alone) continue;
                        int bi = b.buf_of[iv];
                        b.buf_of[v] = bi;
                        if (b.vlast[v] > p->bufs[bi].last) p->bufs[bi].last = b.vlast[v];
                        p->stats.inplace++;
                    }
                }
                if (b.buf_of[v] != -1) continue;
                musa_plan_buffer *pb = &p->bufs[p->n_bufs];
                pb->value = v;
                pb->bytes = value_bytes(x);
                pb->first = s;
                pb->last = b.vlast[v];
                b.buf_of[v] = p->n_bufs++;
            }
        }
    }
    /* A buffer reused in place lives until its last owner's last read. */
    for (int64_t v = 0; v < nv; v++)
        if (b.buf_of[v] >= 0 && b.vlast[v] > p->bufs[b.buf_of[v]].last)
            p->bufs[b.buf_of[v]].last = b.vlast[v];
    p->arena_bytes = assign_offsets(p->bufs, p->n_bufs, p->opt.memory_arena);
    for (int64_t v = 0; v < nv; v++)
        if (b.buf_of[v] >= 0) p->vloc[v] = (kref){SLOT_ARENA, (int64_t)p->bufs[b.buf_of[v]].offset};
    /* Views: their root's place plus their own offset. */
    for (int64_t v = 0; v < nv; v++) {
        const musa_gvalue *x = &g->values.data[v];
        if (x->root == v) continue;
        kref r = p->vloc[x->root];
        p->vloc[v] = (kref){r.slot, r.off + x->offset * (int64_t)musa_dtype_info[x->dtype].size};
    }
    p->stats.naive_bytes = naive;
    p->stats.arena_bytes = p->arena_bytes;
    for (int s = 0; s < ns; s++) {
        size_t live = 0;
        for (int k = 0; k < p->n_bufs; k++)
            if (p->bufs[k].first <= s && s <= p->bufs[k].last) live += align_up(p->bufs[k].bytes);
        if (live > p->stats.live_peak_bytes) p->stats.live_peak_bytes = live;
    }

    /* Kernel calls and scratch. */
    size_t scratch = 0;
    for (int s = 0; s < ns; s++) {
        size_t step_scratch = 0;
        for (int c = 0; c < p->steps[s].count; c++) {
            instr *in = &p->instrs[p->steps[s].first + c];
            int rc;
            if (in->kind == I_KERNEL) {
                const musa_gnode *n = &g->nodes.data[in->node];
                if ((rc = fill_kcall(&b, &in->k, n))) goto fail;
                for (int j = 0; j < n->n_out; j++) in->k.ref[j] = p->vloc[n->out[j]];
                for (int k = 0; k < n->n_in; k++) in->k.ref[n->n_out + k] = p->vloc[n->in[k]];
                in->scratch_off = step_scratch;
                step_scratch += align_up(in->k.scratch);
            } else {
                int cnt = 0;
                for (int64_t j = 0; j < nn; j++)
                    if (b.node_instr[j] == p->steps[s].first + c) mem[cnt++] = (int32_t)j;
                if ((rc = build_fused(&b, in->f, mem, cnt))) goto fail;
                in->scratch_off = step_scratch;
                step_scratch += in->f->chunk_bytes * (size_t)in->f->max_chunks;
            }
        }
        scratch = MUSA_MAX(scratch, step_scratch);
        /* The step's scratch goes in the arena, in a gap of buffers live at
         * this step, so workspaces reuse memory activations left. */
        size_t off = step_scratch ? place_scratch(p, s, step_scratch) : 0;
        for (int c = 0; c < p->steps[s].count; c++) p->instrs[p->steps[s].first + c].scratch_off += off;
    }
    p->scratch_bytes = scratch;
    p->stats.scratch_bytes = scratch;
    p->stats.held_bytes = p->arena_bytes;
    p->stats.instructions = ni;
    return p;
nomem:
    musa_err_nomem("plan_build", 0);
fail:
    musa_plan_free(p);
    return NULL;
}

void musa_plan_free(musa_plan *p) {
    if (!p) return;
    musa_cpu_free_exact(p->mem, p->mem_block);
    pthread_mutex_destroy(&p->lock);
    musa_arena_free(&p->arena);
    free(p);
}

const musa_plan_stats *musa_plan_get_stats(const musa_plan *p) {
    static const musa_plan_stats none;
    return p ? &p->stats : &none;
}

int musa_plan_buffers(const musa_plan *p, const musa_plan_buffer **out) {
    if (!out) return 0;
    *out = p ? p->bufs : NULL;
    return p ? p->n_bufs : 0;
}

/* ---- execution ---- */

typedef struct run_ctx {
    musa_plan *p;
    char **base;
    char *scratch;
    int rc;
    const char *fail_loc;
    const char *fail_name;
} run_ctx;

static int call_kernel(const kcall *k, musa_kview *kv, char *scratch) {
    musa_kctx ctx = {.scratch = k->scratch ? scratch : NULL,
                     .scratch_bytes = k->scratch,
                     .op_name = k->name};
    if (musa_kviews_all_empty(kv, k->n_out)) return MUSA_OK; /* nothing to write */
    if (MUSA_UNLIKELY(musa_profile_hook != NULL)) musa_profile_hook(k->op, true);
    int rc = k->kernel(&ctx, kv, kv + k->n_out, k->n_in, k->attrs);
    if (MUSA_UNLIKELY(musa_profile_hook != NULL)) musa_profile_hook(k->op, false);
    return rc;
}

static int run_kernel_instr(run_ctx *r, instr *in) {
    kcall *k = &in->k;
    int nk = k->n_out + k->n_in;
    for (int q = 0; q < nk; q++) k->kv[q].data = r->base[k->ref[q].slot] + k->ref[q].off;
    int rc = call_kernel(k, k->kv, r->scratch + in->scratch_off);
    if (rc) r->fail_loc = k->loc, r->fail_name = k->name;
    return rc;
}

typedef struct fused_ctx {
    run_ctx *r;
    instr *in;
    int64_t tiles;
    int chunks;
    atomic_int rc;
    const kcall *failed;
} fused_ctx;

static int run_tiles(fused_ctx *fc, int64_t t0, int64_t t1, char *chunk) {
    fused *f = fc->in->f;
    run_ctx *r = fc->r;
    musa_kview kv[8 + MUSA_MAX_OUTPUTS];
    for (int64_t t = t0; t < t1; t++) {
        int64_t r0 = t * f->tile_rows, rows = MUSA_MIN(f->tile_rows, f->rows - r0);
        for (int i = 0; i < f->n; i++) {
            const kcall *k = &f->m[i];
            int nk = k->n_out + k->n_in;
            for (int q = 0; q < nk; q++) {
                kv[q] = k->kv[q];
                if (k->ref[q].slot == SLOT_TILE) {
                    kv[q].data = chunk + k->ref[q].off;
                    if (kv[q].ndim > 0) kv[q].shape[0] = rows;
                    continue;
                }
                kv[q].data = r->base[k->ref[q].slot] + k->ref[q].off;
                if (k->cut[q] && kv[q].ndim > 0) {
                    kv[q].data += r0 * kv[q].strides[0] * (int64_t)musa_dtype_info[kv[q].dtype].size;
                    kv[q].shape[0] = rows;
                }
            }
            int rc = call_kernel(k, kv, chunk + f->tile_bytes);
            if (rc) {
                fc->failed = k;
                return rc;
            }
        }
    }
    return MUSA_OK;
}

static void fused_chunk(void *ctx, int64_t c0, int64_t c1) {
    fused_ctx *fc = ctx;
    for (int64_t c = c0; c < c1; c++) {
        int64_t t0 = c * fc->tiles / fc->chunks, t1 = (c + 1) * fc->tiles / fc->chunks;
        char *chunk = fc->r->scratch + fc->in->scratch_off + (size_t)c * fc->in->f->chunk_bytes;
        int rc = run_tiles(fc, t0, t1, chunk);
        if (rc) {
            int expected = 0;
            atomic_compare_exchange_strong(&fc->rc, &expected, rc);
            return;
        }
    }
}

static int run_fused_instr(run_ctx *r, instr *in) {
    fused *f = in->f;
    fused_ctx fc = {.r = r, .in = in};
    atomic_init(&fc.rc, 0);
    fc.tiles = f->tile_rows ? (f->rows + f->tile_rows - 1) / f->tile_rows : 0;
    if (fc.tiles == 0) return MUSA_OK;
    int chunks = f->serial ? 1 : musa_pool_intra_threads();
    if (chunks > f->max_chunks) chunks = f->max_chunks;
    if (chunks > fc.tiles) chunks = (int)fc.tiles;
    if (chunks < 1) chunks = 1;
    fc.chunks = chunks;
    if (chunks == 1)
        fused_chunk(&fc, 0, 1);
    else
        musa_parallel_for(chunks, 1, fused_chunk, &fc);
    int rc = atomic_load(&fc.rc);
    if (rc && fc.failed) r->fail_loc = fc.failed->loc, r->fail_name = fc.failed->name;
    return rc;
}

static int run_instr(run_ctx *r, instr *in) {
    return in->kind == I_KERNEL ? run_kernel_instr(r, in) : run_fused_instr(r, in);
}

typedef struct par_ctx {
    run_ctx *r;
    step *s;
    atomic_int rc;
} par_ctx;

static void par_body(void *ctx, int64_t b, int64_t e) {
    par_ctx *pc = ctx;
    for (int64_t c = b; c < e; c++) {
        int rc = run_instr(pc->r, &pc->r->p->instrs[pc->s->first + c]);
        if (rc) {
            int expected = 0;
            atomic_compare_exchange_strong(&pc->rc, &expected, rc);
        }
    }
}

/* The instructions of a parallel step on the OpenMP team that kernels use
 * (its threads are awake right after a kernel; a separate pool would wait
 * for them to stop spinning); kernels inside run on one thread each. */
static int run_parallel(run_ctx *r, step *s) {
    par_ctx pc = {.r = r, .s = s};
    atomic_init(&pc.rc, 0);
    musa_parallel_for(s->count, 1, par_body, &pc);
    r->p->stats.parallel_tasks += (uint64_t)s->count;
    return atomic_load(&pc.rc);
}

static int check_input(const musa_plan *p, int i, const musa_tensor *t) {
    const musa_gvalue *v = &p->g->values.data[p->g->inputs.data[i]];
    char s1[128], s2[128];
    const char *nm = v->name ? v->name : "";
    if (!t) return musa_err(MUSA_ERR_VALUE, "[jit] input %d%s%s is NULL", i, *nm ? " " : "", nm);
    if (!t->storage)
        return musa_err(MUSA_ERR_VALUE, "[jit] input %d%s%s is a meta tensor", i, *nm ? " " : "",
                        nm);
    if (t->dtype != v->dtype || !musa_shape_equal(t->ndim, t->shape, v->ndim, v->shape))
        return musa_err(MUSA_ERR_VALUE,
                        "[jit] input %d%s%s is %s%s but the plan was compiled for %s%s", i,
                        *nm ? " " : "", nm, musa_dtype_name((musa_dtype)t->dtype),
                        musa_shape_str(t->ndim, t->shape, s1, sizeof s1),
                        musa_dtype_name((musa_dtype)v->dtype),
                        musa_shape_str(v->ndim, v->shape, s2, sizeof s2));
    if (!musa_tensor_is_contiguous(t))
        return musa_err(MUSA_ERR_VALUE, "[jit] input %d%s%s must be contiguous", i,
                        *nm ? " " : "", nm);
    return MUSA_OK;
}

static char *tensor_data(const musa_tensor *t) {
    return t->storage
               ? (char *)t->storage->data + (size_t)t->offset * musa_dtype_info[t->dtype].size
               : NULL;
}

int musa_plan_run(musa_plan *p, int n_in, musa_tensor *const *inputs, int n_out,
                  musa_tensor **outputs) {
    if (!p) return musa_err(MUSA_ERR_VALUE, "[jit] plan is NULL");
    if ((n_in && !inputs) || (n_out && !outputs))
        return musa_err(MUSA_ERR_VALUE, "[jit] plan_run: NULL input or output array");
    const musa_graph *g = p->g;
    if (n_in != p->n_inputs)
        return musa_err(MUSA_ERR_VALUE, "[jit] the plan takes %d inputs, got %d", p->n_inputs,
                        n_in);
    if (n_out != (int)g->outputs.len)
        return musa_err(MUSA_ERR_VALUE, "[jit] the plan has %lld outputs, got room for %d",
                        (long long)g->outputs.len, n_out);
    for (int i = 0; i < n_out; i++) outputs[i] = NULL;
    for (int i = 0; i < n_in; i++) {
        int rc = check_input(p, i, inputs[i]);
        if (rc) return rc;
    }
    char *base_buf[64], **base = base_buf;
    musa_tensor *roots_buf[16], **roots = roots_buf;
    if (p->n_slots > 64 && !(base = musa_calloc((size_t)p->n_slots, sizeof *base, "plan_run")))
        return MUSA_ERR_NOMEM;
    if (p->n_out_roots > 16 &&
        !(roots = musa_calloc((size_t)p->n_out_roots, sizeof *roots, "plan_run"))) {
        if (base != base_buf) free(base);
        return MUSA_ERR_NOMEM;
    }
    for (int k = 0; k < p->n_out_roots; k++) roots[k] = NULL;
    int rc = MUSA_OK;
    size_t total = p->arena_bytes; /* data and the steps' scratch */
    pthread_mutex_lock(&p->lock);
    if (total && !p->mem && !(p->mem = musa_cpu_alloc_exact(total, &p->mem_block))) {
        rc = MUSA_ERR_NOMEM;
        goto done;
    }
    char *mem = p->mem;
    base[SLOT_ARENA] = mem;
    base[SLOT_SCRATCH] = mem; /* scratch offsets are arena offsets */
    base[SLOT_TILE] = NULL;
    int slot = SLOT_IO;
    for (int i = 0; i < n_in; i++) base[slot++] = tensor_data(inputs[i]);
    for (int k = 0; k < p->n_params; k++)
        base[slot++] = tensor_data(g->values.data[p->param_vals[k]].tensor);
    int out_slot0 = slot, next_out = 0;
    run_ctx r = {.p = p, .base = base, .scratch = base[SLOT_SCRATCH]};
    for (int s = 0; s < p->n_steps && !rc; s++) {
        /* Output buffers appear when first written, as eager allocates them. */
        for (; next_out < p->n_out_roots && !rc; next_out++) {
            int k = p->out_order[next_out];
            if (p->out_first[k] != s) break;
            const musa_gvalue *v = &g->values.data[p->out_roots[k]];
            if (!(roots[k] = musa_tensor_alloc((musa_dtype)v->dtype, v->ndim, v->shape)))
                rc = musa_last_error_code();
            else
                base[out_slot0 + k] = tensor_data(roots[k]);
        }
        if (rc) break;
        step *st = &p->steps[s];
        rc = st->parallel ? run_parallel(&r, st) : run_instr(&r, &p->instrs[st->first]);
        if (p->opt.poison && !rc)
            for (int k = 0; k < p->n_bufs; k++)
                if (p->bufs[k].last == s)
                    memset(mem + p->bufs[k].offset, 0xff, p->bufs[k].bytes);
    }
    for (int k = 0; k < p->n_out_roots && !rc; k++) { /* outputs no step writes */
        if (roots[k]) continue;
        const musa_gvalue *v = &g->values.data[p->out_roots[k]];
        if (!(roots[k] = musa_tensor_alloc((musa_dtype)v->dtype, v->ndim, v->shape)))
            rc = musa_last_error_code();
        else
            base[out_slot0 + k] = tensor_data(roots[k]);
    }
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", musa_last_error());
        if (r.fail_loc)
            rc = musa_err(rc, "%s (compiled %s, recorded at %s)", msg, r.fail_name, r.fail_loc);
        goto done;
    }
    /* Mutations: write final values back into inputs and parameters. */
    for (int64_t i = 0; i < g->mutations.len; i++) {
        const musa_gmutation *m = &g->mutations.data[i];
        const musa_gvalue *tv = &g->values.data[m->target];
        musa_tensor *target = tv->kind == MUSA_V_PARAM ? tv->tensor : NULL;
        for (int k = 0; k < n_in && !target; k++)
            if (g->inputs.data[k] == m->target) target = inputs[k];
        if (!target) continue;
        musa_kview kd, ks;
        musa_tensor_kview(target, &kd);
        kview_of(&g->values.data[m->value], &ks);
        kref lr = p->vloc[m->value];
        ks.data = base[lr.slot] + lr.off;
        if (ks.data == kd.data) continue;
        if ((rc = musa_cpu_copy(&kd, &ks))) goto done;
        musa_tensor_bump_version(target);
    }
    /* Outputs. */
    for (int i = 0; i < n_out; i++) {
        int32_t v = g->outputs.data[i];
        const musa_gvalue *x = &g->values.data[v];
        const musa_gvalue *root = &g->values.data[x->root];
        musa_tensor *src = NULL;
        if (root->kind == MUSA_V_NODE) {
            for (int k = 0; k < p->n_out_roots; k++)
                if (p->out_roots[k] == x->root) src = roots[k];
        } else if (root->kind == MUSA_V_INPUT) {
            for (int k = 0; k < n_in; k++)
                if (g->inputs.data[k] == x->root) src = inputs[k];
        } else {
            src = root->tensor;
        }
        if (!src) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit] output %d has no buffer", i);
            goto done;
        }
        musa_tensor *o;
        if (x->root == v && root->kind != MUSA_V_CONST)
            o = musa_tensor_retain(src);
        else if (root->kind == MUSA_V_CONST && x->root == v)
            o = musa_clone(src);
        else
            o = musa_tensor_view_of(src, x->ndim, x->shape, x->strides, src->offset + x->offset);
        if (!o) {
            rc = musa_last_error_code();
            goto done;
        }
        outputs[i] = o;
    }
    p->stats.runs++;
done:
    if (rc)
        for (int i = 0; i < n_out; i++)
            if (outputs[i]) musa_tensor_release(outputs[i]), outputs[i] = NULL;
    pthread_mutex_unlock(&p->lock);
    for (int k = 0; k < p->n_out_roots; k++) musa_tensor_release(roots[k]);
    if (base != base_buf) free(base);
    if (roots != roots_buf) free(roots);
    return rc;
}

char *musa_plan_text(const musa_plan *p) {
    if (!p) {
        musa_err(MUSA_ERR_VALUE, "[jit] plan is NULL");
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    if (!s) {
        musa_err_nomem("plan_text", cap);
        return NULL;
    }
    s[0] = 0;
#define APPEND(...)                                                                                \
    do {                                                                                           \
        int n_ = snprintf(NULL, 0, __VA_ARGS__);                                                   \
        if (len + (size_t)n_ + 1 > cap) {                                                          \
            cap = (len + (size_t)n_ + 1) * 2;                                                      \
            char *q_ = realloc(s, cap);                                                            \
            if (!q_) {                                                                             \
                free(s);                                                                           \
                musa_err_nomem("plan_text", cap);                                                  \
                return NULL;                                                                       \
            }                                                                                      \
            s = q_;                                                                                \
        }                                                                                          \
        len += (size_t)snprintf(s + len, cap - len, __VA_ARGS__);                                  \
    } while (0)
    APPEND("plan: %d steps, %d instructions, arena %zu bytes with scratch (data %zu, naive %zu), "
           "scratch %zu\n",
           p->n_steps, p->n_instrs, p->arena_bytes, p->stats.arena_bytes, p->stats.naive_bytes,
           p->scratch_bytes);
    for (int st = 0; st < p->n_steps; st++) {
        const step *sp = &p->steps[st];
        APPEND("  %d%s:", st, sp->parallel ? " (parallel)" : "");
        for (int c = 0; c < sp->count; c++) {
            const instr *in = &p->instrs[sp->first + c];
            if (in->kind == I_KERNEL) {
                APPEND(" %s", in->k.name);
            } else {
                APPEND(" fused[");
                for (int i = 0; i < in->f->n; i++) APPEND("%s%s", i ? "," : "", in->f->m[i].name);
                APPEND("] tiles of %lld rows", (long long)in->f->tile_rows);
            }
        }
        APPEND("\n");
    }
#undef APPEND
    return s;
}
