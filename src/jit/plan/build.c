/*
 * plan/build.c - lowering an optimised graph to a plan (musa_plan_build).
 *
 * The build runs as named phases, each a pass over the graph or over what
 * the phases before it made:
 *   groups      fusion groups: their members in program order, and the
 *               values that live only inside their group (tile buffers);
 *   emit        instructions in program order: one per non-view node, one
 *               per fusion group at its last member, one per run of
 *               consecutive independent update nodes of one op and one set
 *               of attributes (a multi-tensor update); views get none;
 *   schedule    steps in program order, a heavy instruction paired with a
 *               later independent one into a parallel step; instructions
 *               are then renumbered into step order;
 *   liveness    per value, the step that writes it and the last that reads
 *               its root;
 *   slots       inputs, parameters and constants; write-backs computed
 *               straight into their target; output buffers;
 *   buffers     arena buffers, with in-place reuse for elementwise kernels and
 *               collectives;
 *   arena       offsets (best fit by size and lifetime, memory.c), then the
 *               places of views;
 *   lower       kernel calls and fused tiles, and the steps' scratch (lower.c).
 *
 * Invariants: the build is linear in the size of the graph, plus sorts and
 * the overlapping lifetimes the best fit visits (memory.c): phases read
 * tables the earlier ones filled once (the members of each instruction,
 * each instruction's step, each value's first and last step) and never
 * scan the node list per instruction. Tables used only while building live
 * in a scratch arena freed at the end; what the plan keeps is in its own.
 */
#include "builder.h"

#include "../../backend/cpu/kernels.h"
#include "../../base/threadpool.h"

#define WINDOW 8 /* how far ahead a concurrent partner is looked for */

/* What buf_of says about a root value that has no arena buffer (arena
 * buffers are numbered from 0). */
typedef enum musa_buf_place {
    MUSA_BUF_NONE = -1,   /* none yet (or never: an internal value, an input, ...) */
    MUSA_BUF_OUTPUT = -2, /* the root of an output: a buffer of its own, handed to the caller */
    MUSA_BUF_TARGET = -3, /* a write-back computed straight into its mutation target */
    MUSA_BUF_LOAN = -4,   /* the root of loaned outputs only: an arena buffer to come */
} musa_buf_place;

/* ---- groups ---- */

/* Fusion groups (gsize, gfirst, glast, their members), the producer's group
 * of each value, and which values stay inside their group: made in a group
 * of several members, read only by members of that group (views count as
 * reads), and not an output. */
static int plan_groups(builder *b) {
    const musa_graph *g = b->g;
    int64_t nn = b->nn, nv = b->nv;
    b->gsize = TMP_NEW(b, int32_t, nn + 1);
    b->gfirst = TMP_NEW(b, int32_t, nn + 1);
    b->glast = TMP_NEW(b, int32_t, nn + 1);
    b->gstart = TMP_NEW(b, int32_t, nn + 1);
    b->gmember = TMP_NEW(b, int32_t, nn + 1);
    b->vgroup = TMP_NEW(b, int32_t, nv + 1);
    b->is_out = TMP_NEW(b, uint8_t, nv + 1);
    b->internal = TMP_NEW(b, uint8_t, nv + 1);
    b->out_root = TMP_NEW(b, uint8_t, nv + 1);
    int32_t *fill = TMP_NEW(b, int32_t, nn + 1);
    if (!b->gsize || !b->gfirst || !b->glast || !b->gstart || !b->gmember || !b->vgroup ||
        !b->is_out || !b->internal || !b->out_root || !fill)
        return nomem();
    int32_t *gsize = b->gsize;
    for (int64_t i = 0; i < nn; i++) b->glast[i] = -1;
    for (int64_t i = 0; i < nn; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead || n->group < 0) continue;
        if (!gsize[n->group]++) b->gfirst[n->group] = (int32_t)i;
        b->glast[n->group] = (int32_t)i;
    }
    for (int64_t k = 0; k < nn; k++) b->gstart[k + 1] = b->gstart[k] + gsize[k];
    for (int64_t i = 0; i < nn; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (!n->dead && n->group >= 0)
            b->gmember[b->gstart[n->group] + fill[n->group]++] = (int32_t)i;
    }
    for (int64_t v = 0; v < nv; v++) {
        b->vgroup[v] = -1;
        const musa_gvalue *x = &g->values.data[v];
        if (x->kind == MUSA_V_NODE && x->producer >= 0) {
            const musa_gnode *n = &g->nodes.data[x->producer];
            if (!n->dead && n->group >= 0 && gsize[n->group] > 1) b->vgroup[v] = n->group;
        }
    }
    for (int64_t i = 0; i < g->outputs.len; i++) b->is_out[g->outputs.data[i]] = 1;
    for (int64_t i = 0; i < g->mutations.len; i++) b->is_out[g->mutations.data[i].value] = 1;
    for (int64_t i = 0; i < g->breaks.len; i++) b->is_out[g->breaks.data[i].value] = 1;
    for (int64_t i = 0; i < g->outputs.len; i++)
        b->out_root[g->values.data[g->outputs.data[i]].root] = 1;
    for (int64_t v = 0; v < nv; v++)
        b->internal[v] = b->vgroup[v] >= 0 && !b->is_out[v] && g->values.data[v].root == v;
    for (int64_t i = 0; i < nn; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) {
            int32_t v = n->in[k], vg = b->vgroup[v];
            if (vg >= 0 && (n->group != vg || gsize[n->group] <= 1)) b->internal[v] = 0;
            /* a view of a group value also reads it */
            int32_t r = g->values.data[v].root;
            if (r != v && b->vgroup[r] >= 0) b->internal[r] = 0;
        }
    }
    for (int64_t v = 0; v < nv; v++) {
        int32_t r = g->values.data[v].root;
        if (r != v && b->is_out[v]) b->internal[r] = 0;
    }
    return MUSA_OK;
}

/* ---- emit ---- */

/* An update row with a multi-tensor form, in no fusion group. */
static bool is_update(const builder *b, const musa_gnode *n) {
    const musa_op_info *info = &musa_ops[n->op];
    return (info->flags & MUSA_OPF_INPLACE) && cpu_update_has_multi(info->kernel) &&
           !(n->group >= 0 && b->gsize[n->group] > 1);
}

/* Whether update node n may join instruction `open`, the run of update
 * rows emitted last: the same op and attributes, and no input written by a
 * row of the run (the rows run at once). */
static bool joins_run(const builder *b, int open, const musa_gnode *n) {
    const musa_graph *g = b->g;
    const musa_gnode *head = &g->nodes.data[b->members[b->mstart[open]]];
    if (n->op != head->op || n->n_in != head->n_in ||
        !musa_attrs_equal(musa_ops[n->op].attrs_kind, n->attrs, head->attrs))
        return false;
    for (int k = 0; k < n->n_in; k++)
        if (b->run_of[g->values.data[n->in[k]].root] == open + 1) return false;
    return true;
}

/* Instructions in program order: a kernel per node that is no view and in
 * no group of several members, a fused instruction per such group, emitted
 * at its last member, and a multi-tensor update per run of update nodes
 * that may run together (joins_run) with nothing but views between them.
 * Fills node_instr, the members of each instruction, whether it draws
 * random numbers, and the counts in the stats. */
static int plan_emit(builder *b) {
    const musa_graph *g = b->g;
    musa_plan *p = b->p;
    int64_t nn = b->nn;
    b->emitted = TMP_NEW(b, instr, nn + 1);
    b->node_instr = TMP_NEW(b, int32_t, nn + 1);
    b->mstart = TMP_NEW(b, int32_t, nn + 1);
    b->members = TMP_NEW(b, int32_t, nn + 1);
    b->random = TMP_NEW(b, uint8_t, nn + 1);
    b->run_of = TMP_NEW(b, int32_t, b->nv + 1);
    if (!b->emitted || !b->node_instr || !b->mstart || !b->members || !b->random || !b->run_of)
        return nomem();
    int ni = 0, nm = 0, open = -1; /* open: the last instruction, while update rows may join it */
    for (int64_t i = 0; i < nn; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        b->node_instr[i] = -1;
        if (n->dead) continue;
        if (musa_ops[n->op].flags & MUSA_OPF_VIEW) {
            p->stats.views++;
            continue;
        }
        bool update = is_update(b, n);
        if (update && open >= 0 && joins_run(b, open, n)) {
            b->members[nm++] = (int32_t)i;
            b->node_instr[i] = open;
            b->emitted[open].node = (int32_t)i;
            for (int q = 0; q < n->n_out; q++) b->run_of[n->out[q]] = open + 1;
            continue;
        }
        open = -1; /* anything else ends a run, a fused group's earlier members included */
        bool group = n->group >= 0 && b->gsize[n->group] > 1;
        if (group && b->glast[n->group] != (int32_t)i) continue;
        instr *in = &b->emitted[ni];
        in->node = (int32_t)i;
        b->mstart[ni] = nm;
        if (group) {
            in->kind = MUSA_INSTR_FUSED;
            if (!(in->f = PLAN_NEW(b, fused, 1))) return nomem();
            int32_t first = b->gstart[n->group], cnt = b->gsize[n->group];
            for (int c = 0; c < cnt; c++) b->members[nm++] = b->gmember[first + c];
            p->stats.fused_groups++;
            p->stats.fused_nodes += cnt;
        } else {
            in->kind = MUSA_INSTR_KERNEL;
            b->members[nm++] = (int32_t)i;
            p->stats.kernels++;
        }
        for (int c = b->mstart[ni]; c < nm; c++) {
            b->node_instr[b->members[c]] = ni;
            b->random[ni] |=
                (musa_ops[g->nodes.data[b->members[c]].op].flags & MUSA_OPF_ORDERED) != 0;
        }
        if (update) {
            open = ni;
            for (int q = 0; q < n->n_out; q++) b->run_of[n->out[q]] = open + 1;
        }
        ni++;
    }
    b->mstart[ni] = nm;
    b->ni = p->n_instrs = ni;
    /* runs of several update rows become multi-tensor instructions */
    for (int k = 0; k < ni; k++) {
        int cnt = b->mstart[k + 1] - b->mstart[k];
        if (b->emitted[k].kind != MUSA_INSTR_KERNEL || cnt < 2) continue;
        b->emitted[k].kind = MUSA_INSTR_MULTI;
        p->stats.kernels--;
        p->stats.multi_updates++;
        p->stats.multi_nodes += cnt;
    }
    return MUSA_OK;
}

/* ---- schedule ---- */

/* Worth a task of its own: a big kernel, or a group that a big kernel heads
 * (a multi-tensor update never: it is one parallel loop over every row). */
static bool heavy(const builder *b, int i) {
    const musa_graph *g = b->g;
    const instr *in = &b->emitted[i];
    if (in->kind == MUSA_INSTR_MULTI) return false;
    if (in->kind == MUSA_INSTR_KERNEL) return musa_graph_pairable(g, &g->nodes.data[in->node]);
    return musa_graph_pairable(g, &g->nodes.data[b->gfirst[g->nodes.data[in->node].group]]);
}

/* Every value instruction i reads is made by an emitted instruction (or is
 * no instruction's: inputs, parameters, constants). */
static bool inputs_ready(const builder *b, int i, const uint8_t *done) {
    const musa_graph *g = b->g;
    for (int c = b->mstart[i]; c < b->mstart[i + 1]; c++) {
        const musa_gnode *n = &g->nodes.data[b->members[c]];
        for (int k = 0; k < n->n_in; k++) {
            int32_t r = g->values.data[n->in[k]].root, pr = g->values.data[r].producer;
            if (pr < 0) continue;
            int32_t src = b->node_instr[pr];
            if (src >= 0 && src != i && !done[src]) return false;
        }
    }
    return true;
}

/* Instruction i recomputes a value (the remat pass placed it right before
 * the value's late reads, so that the value is not live before them). */
static bool recomputes(const builder *b, int i) {
    for (int c = b->mstart[i]; c < b->mstart[i + 1]; c++)
        if (b->g->nodes.data[b->members[c]].recomputed) return true;
    return false;
}

/* Steps in program order (it keeps lifetimes short). With more than one
 * thread, a heavy instruction is paired with the next heavy one, up to
 * WINDOW instructions ahead, whose inputs are all ready, that draws no
 * random numbers and that does not recompute a value (hoisted, the value
 * would be live over the instructions it skips: GPT-tiny's recomputed layer
 * norm, paired with the backward at its plan's peak, added 0.25 MiB there):
 * the pair runs as one parallel step. Then the plan takes
 * the instructions in step order, and node_instr, the members and istep
 * follow that numbering. */
static int plan_schedule(builder *b) {
    musa_plan *p = b->p;
    int ni = b->ni;
    p->steps = PLAN_NEW(b, step, ni + 1);
    p->instrs = PLAN_NEW(b, instr, ni + 1);
    int32_t *order = TMP_NEW(b, int32_t, ni + 1); /* step order -> program order */
    uint8_t *done = TMP_NEW(b, uint8_t, ni + 1);
    int32_t *remap = TMP_NEW(b, int32_t, ni + 1); /* program order -> step order */
    int32_t *mstart = TMP_NEW(b, int32_t, ni + 1);
    int32_t *members = TMP_NEW(b, int32_t, b->mstart[ni] + 1);
    b->istep = TMP_NEW(b, int32_t, ni + 1);
    if (!p->steps || !p->instrs || !order || !done || !remap || !mstart || !members || !b->istep)
        return nomem();
    int ns = 0, w = 0;
    for (int i = 0; i < ni; i++) {
        if (done[i]) continue;
        int partner = -1;
        if (b->threads >= 2 && heavy(b, i) && !b->random[i])
            for (int j = i + 1; j < ni && j <= i + WINDOW && partner < 0; j++)
                if (!done[j] && heavy(b, j) && !b->random[j] && !recomputes(b, j) &&
                    inputs_ready(b, j, done))
                    partner = j;
        p->steps[ns] = (step){.first = w, .count = partner < 0 ? 1 : 2, .parallel = partner >= 0};
        order[w++] = i;
        done[i] = 1;
        if (partner >= 0) {
            order[w++] = partner;
            done[partner] = 1;
            p->stats.parallel_steps++;
        }
        ns++;
    }
    p->n_steps = ns;
    int nm = 0;
    for (int i = 0; i < ni; i++) {
        int32_t old = order[i];
        p->instrs[i] = b->emitted[old];
        remap[old] = i;
        mstart[i] = nm;
        for (int c = b->mstart[old]; c < b->mstart[old + 1]; c++) members[nm++] = b->members[c];
    }
    mstart[ni] = nm;
    b->mstart = mstart, b->members = members;
    for (int64_t j = 0; j < b->nn; j++)
        if (b->node_instr[j] >= 0) b->node_instr[j] = remap[b->node_instr[j]];
    for (int s = 0; s < ns; s++)
        for (int c = 0; c < p->steps[s].count; c++) b->istep[p->steps[s].first + c] = s;
    return MUSA_OK;
}

/* ---- liveness ---- */

/* vstep: the step writing each value; vlast: the last step reading each
 * root (n_steps for roots of outputs, write-backs and breaks). */
static int plan_liveness(builder *b) {
    const musa_graph *g = b->g;
    int64_t nv = b->nv;
    b->vstep = TMP_NEW(b, int32_t, nv + 1);
    b->vlast = TMP_NEW(b, int32_t, nv + 1);
    if (!b->vstep || !b->vlast) return nomem();
    for (int64_t v = 0; v < nv; v++) b->vstep[v] = -1, b->vlast[v] = -1;
    for (int64_t j = 0; j < b->nn; j++) {
        const musa_gnode *n = &g->nodes.data[j];
        if (n->dead || b->node_instr[j] < 0) continue;
        int s = b->istep[b->node_instr[j]];
        for (int q = 0; q < n->n_out; q++) b->vstep[n->out[q]] = s;
        for (int k = 0; k < n->n_in; k++) {
            int32_t r = g->values.data[n->in[k]].root;
            if (s > b->vlast[r]) b->vlast[r] = s;
        }
    }
    for (int64_t v = 0; v < nv; v++)
        if (b->is_out[v]) b->vlast[g->values.data[v].root] = b->p->n_steps;
    return MUSA_OK;
}

/* ---- slots ---- */

/* Slots of the inputs, then of the parameters and constants. */
static int plan_slots(builder *b) {
    const musa_graph *g = b->g;
    musa_plan *p = b->p;
    int64_t nv = b->nv;
    p->n_inputs = (int)g->inputs.len;
    b->slot = MUSA_SLOT_IO;
    for (int64_t i = 0; i < g->inputs.len; i++)
        p->vloc[g->inputs.data[i]] = (kref){(uint32_t)b->slot++, 0};
    p->param_vals = PLAN_NEW(b, int32_t, nv + 1);
    b->buf_of = TMP_NEW(b, int32_t, nv + 1);
    if (!p->param_vals || !b->buf_of) return nomem();
    for (int64_t v = 0; v < nv; v++) {
        b->buf_of[v] = MUSA_BUF_NONE;
        const musa_gvalue *x = &g->values.data[v];
        if (x->kind == MUSA_V_PARAM || x->kind == MUSA_V_CONST) {
            p->param_vals[p->n_params++] = (int32_t)v;
            p->vloc[v] = (kref){(uint32_t)b->slot++, 0};
        }
    }
    return MUSA_OK;
}

/* Whether mutation target <- value can be computed in place into the
 * target: same dtype, shape and contiguous layout, value a root, and every
 * read of the old target done before the value's step, or within the same
 * (non-parallel) instruction by the elementwise node that makes the value or
 * by fused members that run no later than it, reading the same elements. */
static bool mutation_in_place(const builder *b, int32_t t, int32_t v) {
    const musa_graph *g = b->g;
    const musa_gvalue *tv = &g->values.data[t], *vv = &g->values.data[v];
    if (vv->root != v || vv->kind != MUSA_V_NODE || vv->producer < 0 || tv->dtype != vv->dtype ||
        !musa_shape_equal(tv->ndim, tv->shape, vv->ndim, vv->shape) ||
        b->buf_of[v] != MUSA_BUF_NONE)
        return false;
    musa_kview kv;
    musa_plan_kview_of(tv, &kv);
    if (!musa_kview_contiguous(&kv) || tv->offset != 0) return false;
    if (b->out_root[v]) return false;
    int32_t in = b->node_instr[vv->producer];
    if (in < 0) return false;
    int32_t s = b->istep[in];
    if (b->p->steps[s].parallel) return false;
    if (b->vlast[t] < s) return true;
    if (b->vlast[t] > s) return false;
    /* Reads in the producing step: only by the producer's instruction. */
    const instr *ins = &b->p->instrs[in];
    for (int c = b->mstart[in]; c < b->mstart[in + 1]; c++) {
        int32_t j = b->members[c];
        const musa_gnode *n = &g->nodes.data[j];
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
        bool update_pair = (fl & MUSA_OPF_INPLACE) && j == vv->producer && paired;
        if (!same || !((fl & MUSA_OPF_ELEMENTWISE) || update_pair)) return false;
        if (ins->kind == MUSA_INSTR_FUSED && j > vv->producer) return false;
        /* a kernel's other nodes: none; a multi-tensor update's other rows run at once */
        if (ins->kind != MUSA_INSTR_FUSED && j != vv->producer) return false;
        const musa_gvalue *o = &g->values.data[n->out[0]];
        if (!musa_shape_equal(o->ndim, o->shape, tv->ndim, tv->shape)) return false;
    }
    return true;
}

/* A write-back whose new value can be computed straight into its target
 * (every read of the old value is done by then) is: no copy, no buffer. */
static void plan_write_backs(builder *b) {
    const musa_graph *g = b->g;
    musa_plan *p = b->p;
    for (int64_t i = 0; i < g->mutations.len; i++) {
        const musa_gmutation *m = &g->mutations.data[i];
        if (mutation_in_place(b, m->target, m->value)) {
            p->vloc[m->value] = p->vloc[m->target];
            b->buf_of[m->value] = MUSA_BUF_TARGET;
            p->stats.inplace++;
        }
    }
}

/* Roots of loaned outputs (musa_plan_options.loaned_outputs) that only
 * loaned outputs return: they stay without a place, so that the buffers
 * phase plans them in the arena, live to the plan's end. */
static int plan_loans(builder *b) {
    const musa_graph *g = b->g;
    musa_plan *p = b->p;
    int64_t n_out = g->outputs.len;
    int64_t first = n_out - p->opt.loaned_outputs; /* checked: 0..n_out */
    if (first == n_out) return MUSA_OK;
    uint8_t *kept = TMP_NEW(b, uint8_t, b->nv + 1); /* roots something else returns */
    p->loan_roots = PLAN_NEW(b, int32_t, n_out - first + 1);
    if (!kept || !p->loan_roots) return nomem();
    for (int64_t i = 0; i < first; i++) kept[g->values.data[g->outputs.data[i]].root] = 1;
    for (int64_t i = 0; i < g->breaks.len; i++)
        kept[g->values.data[g->breaks.data[i].value].root] = 1;
    for (int64_t i = first; i < n_out; i++) {
        int32_t r = g->values.data[g->outputs.data[i]].root;
        const musa_gvalue *x = &g->values.data[r];
        if (kept[r] || x->kind != MUSA_V_NODE || b->buf_of[r] != MUSA_BUF_NONE || x->producer < 0 ||
            b->node_instr[x->producer] < 0)
            continue; /* returned otherwise too, an input or parameter, placed, or unwritten */
        kept[r] = 1;
        b->buf_of[r] = MUSA_BUF_LOAN;
        p->loan_roots[p->n_loans++] = r;
    }
    return MUSA_OK;
}

/* Roots of outputs and breaks get buffers of their own (handed to the
 * caller), in slots after the parameters; out_order lists them by the step
 * that first writes them. */
static int plan_outputs(builder *b) {
    const musa_graph *g = b->g;
    musa_plan *p = b->p;
    int64_t nv = b->nv;
    int ns = p->n_steps;
    p->out_roots = PLAN_NEW(b, int32_t, nv + 1);
    p->out_first = PLAN_NEW(b, int32_t, nv + 1);
    p->out_order = PLAN_NEW(b, int32_t, nv + 1);
    int32_t *at =
        TMP_NEW(b, int32_t, ns + 2); /* output buffers by first step: counts, then starts */
    if (!p->out_roots || !p->out_first || !p->out_order || !at) return nomem();
    int rc = plan_loans(b);
    if (rc) return rc;
    for (int64_t i = 0; i < g->outputs.len + g->breaks.len; i++) {
        int32_t v =
            i < g->outputs.len ? g->outputs.data[i] : g->breaks.data[i - g->outputs.len].value;
        int32_t r = g->values.data[v].root;
        if (g->values.data[r].kind != MUSA_V_NODE || b->buf_of[r] != MUSA_BUF_NONE)
            continue; /* an input, parameter or constant; written into a target; seen */
        p->out_first[p->n_out_roots] = b->vstep[r] < 0 ? 0 : b->vstep[r];
        p->out_roots[p->n_out_roots++] = r;
        p->vloc[r] = (kref){(uint32_t)b->slot++, 0};
        b->buf_of[r] = MUSA_BUF_OUTPUT;
    }
    p->n_slots = b->slot;
    /* by first step, in order of appearance within a step (a counting sort) */
    for (int k = 0; k < p->n_out_roots; k++) at[p->out_first[k] + 1]++;
    for (int s = 0; s <= ns; s++) at[s + 1] += at[s];
    for (int k = 0; k < p->n_out_roots; k++) p->out_order[at[p->out_first[k]]++] = k;
    return MUSA_OK;
}

/* ---- buffers ---- */

/* Whether view y reads every byte of its root r, in order (a reshape of
 * a whole contiguous buffer): a kernel writing y's layout over it writes r. */
static bool covers(const musa_gvalue *y, const musa_gvalue *r) {
    musa_kview kv;
    musa_plan_kview_of(y, &kv);
    return y->offset == 0 && musa_kview_contiguous(&kv) &&
           musa_plan_value_bytes(y) == musa_plan_value_bytes(r);
}

/* An arena buffer for each root that instructions write and that has no
 * place yet, in step order; an elementwise kernel writes into the buffer of
 * an input root of the same dtype and shape that dies at its step (and that
 * no other input of it reads through a view) instead. */
static void plan_buffers(builder *b) {
    const musa_graph *g = b->g;
    musa_plan *p = b->p;
    size_t naive = 0;
    for (int i = 0; i < b->ni; i++) {
        const instr *in = &p->instrs[i];
        int s = b->istep[i];
        for (int c = b->mstart[i]; c < b->mstart[i + 1]; c++) {
            const musa_gnode *n = &g->nodes.data[b->members[c]];
            const musa_op_info *info = &musa_ops[n->op];
            for (int q = 0; q < n->n_out; q++) {
                int32_t v = n->out[q];
                const musa_gvalue *x = &g->values.data[v];
                naive += musa_plan_align(musa_plan_value_bytes(x));
                if (b->buf_of[v] == MUSA_BUF_LOAN) b->buf_of[v] = MUSA_BUF_NONE;
                if (b->internal[v] || b->buf_of[v] != MUSA_BUF_NONE) continue;
                if (b->vlast[v] < s) b->vlast[v] = s; /* written even if unread */
                /* elementwise kernels, collectives (which work in place,
                 * MPI_IN_PLACE) and OVERWRITE kernels (row by row: the
                 * cross-entropy gradient over its logits) may write over an
                 * input that dies here */
                if (in->kind == MUSA_INSTR_KERNEL &&
                    (info->flags & (MUSA_OPF_ELEMENTWISE | MUSA_OPF_EFFECT | MUSA_OPF_OVERWRITE)) &&
                    n->n_out == 1 && !p->steps[s].parallel && p->opt.memory_arena) {
                    for (int k = 0; k < n->n_in && b->buf_of[v] == MUSA_BUF_NONE; k++) {
                        int32_t iv = n->in[k], r = g->values.data[iv].root;
                        const musa_gvalue *y = &g->values.data[iv], *ry = &g->values.data[r];
                        if (ry->kind != MUSA_V_NODE || b->buf_of[r] < 0 || b->vlast[r] != s ||
                            !musa_gvalue_same_layout(y, x) || (r != iv && !covers(y, ry)))
                            continue; /* (a matmul may write a permuted layout: simplify.c) */
                        bool alone = true;
                        for (int k2 = 0; k2 < n->n_in; k2++)
                            if (k2 != k && g->values.data[n->in[k2]].root == r && n->in[k2] != iv)
                                alone = false;
                        if (!alone) continue;
                        int bi = b->buf_of[r];
                        b->buf_of[v] = bi;
                        if (b->vlast[v] > p->bufs[bi].last) p->bufs[bi].last = b->vlast[v];
                        p->stats.inplace++;
                    }
                }
                if (b->buf_of[v] != MUSA_BUF_NONE) continue;
                musa_plan_buffer *pb = &p->bufs[p->n_bufs];
                pb->value = v;
                pb->bytes = musa_plan_value_bytes(x);
                pb->first = s;
                pb->last = b->vlast[v];
                b->buf_of[v] = p->n_bufs++;
            }
        }
    }
    /* A buffer reused in place lives until its last owner's last read. */
    for (int64_t v = 0; v < b->nv; v++)
        if (b->buf_of[v] >= 0 && b->vlast[v] > p->bufs[b->buf_of[v]].last)
            p->bufs[b->buf_of[v]].last = b->vlast[v];
    p->stats.naive_bytes = naive;
}

/* ---- arena ---- */

/* Offsets of the arena buffers; every value in one takes its place, views
 * their root's plus their own offset. */
static int plan_arena(builder *b) {
    const musa_graph *g = b->g;
    musa_plan *p = b->p;
    p->arena_bytes = musa_plan_assign_offsets(p->bufs, p->n_bufs, p->opt.memory_arena,
                                              b->peak_order, &b->peak_won);
    for (int64_t v = 0; v < b->nv; v++)
        if (b->buf_of[v] >= 0)
            p->vloc[v] = (kref){MUSA_SLOT_ARENA, (int64_t)p->bufs[b->buf_of[v]].offset};
    for (int64_t v = 0; v < b->nv; v++) {
        const musa_gvalue *x = &g->values.data[v];
        if (x->root == v) continue;
        kref r = p->vloc[x->root];
        p->vloc[v] = (kref){r.slot, r.off + x->offset * (int64_t)musa_dtype_info[x->dtype].size};
    }
    p->stats.arena_bytes = p->arena_bytes;
    /* the largest live set: buffers enter at their first step, leave after their last */
    int ns = p->n_steps;
    size_t *delta = TMP_NEW(b, size_t, ns + 2);
    if (!delta) return nomem();
    for (int k = 0; k < p->n_bufs; k++) {
        delta[p->bufs[k].first] += musa_plan_align(p->bufs[k].bytes);
        delta[p->bufs[k].last + 1] -= musa_plan_align(p->bufs[k].bytes);
    }
    size_t live = 0;
    for (int s = 0; s < ns; s++) {
        live += delta[s];
        if (live > p->stats.live_peak_bytes) p->stats.live_peak_bytes = live;
    }
    return MUSA_OK;
}

/* ---- the phases in order ---- */

static musa_plan *build_once(const musa_graph *g, const musa_plan_options *opt, bool peak_order,
                             bool *peak_won);

musa_plan *musa_plan_build(const musa_graph *g, const musa_plan_options *opt) {
    if (!g) {
        musa_err(MUSA_ERR_VALUE, "[jit] plan_build: graph is NULL");
        return NULL;
    }
    if (g->capturing) {
        musa_err(MUSA_ERR_RUNTIME, "[jit] plan_build: the graph is still capturing");
        return NULL;
    }
    if (opt && (opt->loaned_outputs < 0 || opt->loaned_outputs > g->outputs.len)) {
        musa_err(MUSA_ERR_VALUE, "[jit] plan_build: loaned_outputs %d is outside 0..%lld",
                 opt->loaned_outputs, (long long)g->outputs.len);
        return NULL;
    }
    bool peak_won = false;
    musa_plan *p = build_once(g, opt, true, &peak_won);
    /* The arena's order is chosen before the steps' scratch is known, and
     * the peak-first order packs the peak's buffers without the gaps where
     * the peak step's scratch would go: where it won and the scratch then
     * grew the arena, the plan is built again without it and the smaller
     * one kept (a deep tanh MLP's step under a memory budget: 1.71 MB
     * against 1.51 MB). */
    if (p && peak_won && p->stats.held_bytes > p->stats.arena_bytes) {
        musa_plan *q = build_once(g, opt, false, NULL);
        if (q && q->stats.held_bytes < p->stats.held_bytes) {
            musa_plan_free(p);
            p = q;
        } else if (q) {
            musa_plan_free(q);
        }
    }
    return p;
}

static musa_plan *build_once(const musa_graph *g, const musa_plan_options *opt, bool peak_order,
                             bool *peak_won) {
    musa_plan *p = musa_calloc(1, sizeof *p, "plan_build");
    if (!p) return NULL;
    musa_arena_init(&p->arena, 0);
    pthread_mutex_init(&p->lock, NULL);
    p->g = g;
    if (opt) p->opt = *opt;
    builder b = {.g = g, .p = p, .nv = g->values.len, .nn = g->nodes.len, .peak_order = peak_order};
    musa_arena_init(&b.tmp, 0);
    b.threads = p->opt.num_threads > 0 ? p->opt.num_threads : musa_get_num_threads();
    if (b.threads > musa_pool_threads()) b.threads = musa_pool_threads();
    p->vloc = PLAN_NEW(&b, kref, b.nv + 1);
    p->bufs = TMP_NEW(&b, musa_plan_buffer, b.nv + 1); /* the plan keeps n_bufs of them */
    int rc = !p->vloc || !p->bufs ? nomem() : MUSA_OK;
    if (!rc) rc = plan_groups(&b);
    if (!rc) rc = plan_emit(&b);
    if (!rc) rc = plan_schedule(&b);
    if (!rc) rc = plan_liveness(&b);
    if (!rc) rc = plan_slots(&b);
    if (!rc) plan_write_backs(&b);
    if (!rc) rc = plan_outputs(&b);
    if (!rc) plan_buffers(&b);
    for (int k = 0; !rc && k < p->n_loans; k++) {
        int32_t r = p->loan_roots[k];
        if (b.buf_of[r] < 0) /* every loan root's producer runs (plan_loans) */
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit] internal: loaned output %%%d has no buffer", r);
        else
            p->stats.loaned_bytes += musa_plan_align(musa_plan_value_bytes(&g->values.data[r]));
    }
    if (!rc) rc = plan_arena(&b);
    if (!rc) rc = musa_plan_lower(&b);
    if (!rc) { /* the buffers, out of the builder's scratch (sized for every value) */
        musa_plan_buffer *keep = PLAN_NEW(&b, musa_plan_buffer, p->n_bufs + 1);
        if (keep) memcpy(keep, p->bufs, sizeof *keep * (size_t)p->n_bufs);
        rc = keep ? MUSA_OK : nomem();
        p->bufs = keep;
    }
    musa_arena_free(&b.tmp);
    if (rc) {
        musa_plan_free(p);
        return NULL;
    }
    if (peak_won) *peak_won = b.peak_won;
    return p;
}
