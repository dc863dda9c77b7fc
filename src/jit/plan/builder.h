/*
 * builder.h - the plan builder's state, shared by its phases: build.c (the
 * phases up to the arena) and lower.c (kernel calls and fused tiles).
 */
#ifndef MUSA_PLAN_BUILDER_H
#define MUSA_PLAN_BUILDER_H

#include "internal.h"

typedef struct builder {
    const musa_graph *g;
    musa_plan *p;
    musa_arena tmp; /* the tables below; freed when the build ends */
    int64_t nv, nn; /* values, nodes */
    int threads;    /* threads a parallel step may use */
    int slot;       /* next free slot */
    /* groups */
    int32_t *gsize;    /* [nn] members per group id */
    int32_t *gfirst;   /* [nn] first member per group id */
    int32_t *glast;    /* [nn] last member per group id, -1: none */
    int32_t *gstart;   /* [nn + 1] group id -> its first entry in gmember */
    int32_t *gmember;  /* [nn] members of each group, in program order, group by group */
    int32_t *vgroup;   /* [nv] group of the producer when it has several members, else -1 */
    uint8_t *is_out;   /* [nv] a graph output, mutation value or break value */
    uint8_t *internal; /* [nv] lives only inside its fused group */
    uint8_t *out_root; /* [nv] the root of a graph output */
    /* emit: instructions are numbered in program order until the schedule
     * renumbers node_instr, mstart and members into step order */
    instr *emitted;      /* [ni] in program order; the plan keeps them in step order */
    int ni;              /* instructions */
    int32_t *node_instr; /* [nn] node -> instruction (group members: the group's), -1: none */
    int32_t *mstart;     /* [ni + 1] instruction -> its first entry in members */
    int32_t *members;    /* [nn] the nodes each instruction runs, each in program order */
    uint8_t *random;     /* [ni] the instruction draws random numbers (program order) */
    int32_t *run_of;     /* [nv] 1 + the update instruction whose rows write the value, or 0 */
    /* schedule */
    int32_t *istep; /* [ni] instruction -> step */
    /* liveness */
    int32_t *vstep; /* [nv] step that writes the value, -1: before the plan */
    int32_t *vlast; /* [nv] last step that reads the root, n_steps: after the plan, -1: none */
    /* slots, buffers */
    int32_t *buf_of; /* [nv] root -> its arena buffer, or a musa_buf_place */
    bool peak_order; /* the arena may take the peak-first order (memory.c) */
    bool peak_won;   /* it did */
} builder;

static inline int nomem(void) {
    return musa_err_nomem("plan_build", 0);
}

#define TMP_NEW(b, T, n)  MUSA_ARENA_NEW(&(b)->tmp, T, n)
#define PLAN_NEW(b, T, n) MUSA_ARENA_NEW(&(b)->p->arena, T, n)

static inline int64_t numel(const musa_gvalue *v) {
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= v->shape[d];
    return n;
}

/* Kernel calls with their views and places, fused groups with their tiles,
 * and each step's scratch: the last phase (lower.c). */
int musa_plan_lower(builder *b);

#endif
