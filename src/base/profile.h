/*
 * profile.h - the profiler's recorder (the C API is musa_profiler_* in
 * musa.h): timed events per thread, written by the layers above at the
 * points they own - the dispatcher (each eager op), the plan executor (each
 * instruction), the autograd engine (each backward node), the allocator
 * (each allocation and free) and user ranges.
 *
 *     if (MUSA_UNLIKELY(musa_prof_on())) t0 = musa_prof_now();
 *     ... the work ...
 *     if (t0) musa_prof_complete(MUSA_PROFILE_OP, name, t0, shapes_or_NULL);
 *
 * Invariants: off, a hot path pays one relaxed load and a predictable
 * branch. Each thread appends to its own buffer under its own (uncontended)
 * lock; a buffer lives until its thread exits and a later start drops it,
 * so a thread's pointer to its buffer never dangles. Names passed as
 * `name` must live as long as the process (op and node names, interned
 * plan names); `detail` strings are copied.
 */
#ifndef MUSA_PROFILE_H
#define MUSA_PROFILE_H

#include <stdatomic.h>

#include "base.h"

extern atomic_int musa_prof_flags_; /* MUSA_PROFILE_ON | the start flags; 0 when off */

#define MUSA_PROFILE_ON (1 << 30)

static inline int musa_prof_on(void) {
    return atomic_load_explicit(&musa_prof_flags_, memory_order_relaxed);
}

/* Monotonic nanoseconds (never 0). */
int64_t musa_prof_now(void);

/* A complete event [t0, now) on the calling thread; dropped when the
 * profiler stopped or restarted since t0. */
void musa_prof_complete(int kind, const char *name, int64_t t0, const char *detail);

/* The same with a copy of `name`, for names that may die before the
 * events are read (user ranges, custom autograd nodes). */
void musa_prof_complete_copy(int kind, const char *name, int64_t t0, const char *detail);

/* The same with a copy of `name` and, under MUSA_PROFILE_STACK, the
 * event's location ("file:line", copied; NULL: as musa_prof_complete_copy):
 * a plan instruction's, whose names and graph may be freed before the
 * events are read. */
void musa_prof_complete_at(int kind, const char *name, int64_t t0, const char *detail,
                           const char *location);

/* Append "float32[64, 128]" (after ", " unless *len is 0) to buf, of size
 * bytes with *len used: the entries of a MUSA_PROFILE_SHAPES detail. False
 * when it does not fit: buf then ends in "..." and *len is size. */
bool musa_prof_shape_append(char *buf, size_t size, size_t *len, musa_dtype dtype, int ndim,
                            const int64_t *shape);

/* Name the calling thread's lane in traces ("stream 1"); a thread made by
 * musa that must not call the location function (it may run Python) says
 * so with locations = false. */
void musa_prof_thread_setup(const char *label, bool locations);

/* An allocation (bytes > 0) or free (bytes < 0), with the allocator's
 * current bytes after it; only while MUSA_PROFILE_MEMORY is on. */
void musa_prof_memory(int64_t bytes, int64_t total);

#endif
