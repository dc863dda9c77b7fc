/*
 * plan.h - a compiled graph: a flat list of steps over planned buffers, run
 * by one loop that calls kernels directly (no dispatcher, no tape, no
 * allocation per op).
 *
 * Lowering (musa_plan_build) takes an optimised graph and:
 * - turns each fusion group into one fused-tile instruction, each run of
 *   consecutive independent update nodes of one op and one set of
 *   attributes into one multi-tensor update, and every other non-view node
 *   into a kernel instruction; view nodes become aliases;
 * - schedules in program order, pairing (with more than one thread) an
 *   independent mid-sized heavy kernel with the next such one into a step
 *   run concurrently on the OpenMP team;
 * - plans memory: liveness over the steps, one arena, best-fit offsets by
 *   size and lifetime, in-place reuse where an elementwise input dies at its
 *   consumer. Inputs, parameters, constants and outputs are never reused.
 *
 * The code: plan/build.c (the phases of the build), plan/memory.c (best
 * fit in the arena), plan/run.c (the executor), sharing plan/internal.h.
 *
 * Invariants: every buffer an instruction touches is (slot, byte offset):
 * the arena, an input, a parameter or constant, an output buffer, or a
 * fused group's tile scratch; runs fill the slot bases, then patch the kernel
 * views' data pointers. A plan holds a lock while it runs (its kernel views
 * are patched in place), so concurrent calls of one plan run one at a time,
 * and keeps its arena between runs; output buffers are allocated when first
 * written; write-backs that can happen in place do.
 */
#ifndef MUSA_JIT_PLAN_H
#define MUSA_JIT_PLAN_H

#include "graph.h"

/* Lower g (already optimised) to a plan. g must outlive the plan. */
musa_plan *musa_plan_build(const musa_graph *g, const musa_plan_options *opt);
void musa_plan_free(musa_plan *p);
/* Run: inputs in graph input order (contiguous, of the graph's dtypes and
 * shapes); outputs receive new references. */
int musa_plan_run(musa_plan *p, int n_in, musa_tensor *const *inputs, int n_out,
                  musa_tensor **outputs);
const musa_plan_stats *musa_plan_get_stats(const musa_plan *p);
bool musa_plan_output_loaned(const musa_plan *p, int i);
/* The arena buffers (count returned; *out points into the plan). */
int musa_plan_buffers(const musa_plan *p, const musa_plan_buffer **out);
/* Readable listing of the steps. malloc'd. */
char *musa_plan_text(const musa_plan *p);

#endif
