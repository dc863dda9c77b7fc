/*
 * optim.h - what the optimizer update kernels share (optim.c: SGD, Adam,
 * RMSprop and the multi-tensor form; optim_more.c: Adagrad, Adadelta,
 * Adamax, NAdam, RAdam, ASGD): the prepared row and its element loops.
 */
#ifndef MUSA_CPU_OPTIM_H
#define MUSA_CPU_OPTIM_H

#include "../../base/threadpool.h"
#include "elem.h"
#include "kernels.h"

#define OPTIM_GRAIN 16384

/* The element loop for the parameter's dtype: float32 and float64 compute
 * in it; float16 and bfloat16 (parameter, state and gradient alike) in
 * float32, rounded once on each store. */
#define PICK(fn, dt)                                                                               \
    ((dt) == MUSA_DTYPE_FLOAT64    ? fn##_f64                                                      \
     : (dt) == MUSA_DTYPE_BFLOAT16 ? fn##_bf16                                                     \
     : (dt) == MUSA_DTYPE_FLOAT16  ? fn##_f16                                                      \
                                   : fn##_f32)

static inline double scalar(const musa_kview *v) {
    return *(const double *)v->data;
}

typedef struct {
    const void *p, *g, *buf;
    void *p_out, *buf_out;
    double lr;
    const musa_attrs_sgd *o;
} sgd_job;

typedef struct {
    const void *p, *g, *m, *v, *vmax;
    void *p_out, *m_out, *v_out, *vmax_out;
    double lr, step_size, bc2_sqrt;
    const musa_attrs_adam *o;
} adam_job;

typedef struct {
    const void *p, *g, *sq, *buf, *gavg;
    void *p_out, *sq_out, *buf_out, *gavg_out;
    double lr;
    const musa_attrs_rmsprop *o;
} rms_job;

/* The optimizers of optim_more.c: up to three state tensors and the
 * step's coefficients (each optimizer says what c[] holds). */
typedef struct {
    const void *p, *g, *s[3];
    void *p_out, *s_out[3];
    double c[10];
    bool maximize;
} gen_job;

/* One row of an update, prepared to run: fn(&u, i0, i1) updates elements
 * [i0, i1) of the row; its scalar state (the step counter, where the
 * optimizer counts steps) is written once every element is done. */
typedef struct update_job {
    musa_range_fn fn;    /* the row's element loop, over u */
    int64_t numel;       /* elements of the parameter */
    int n_arr, out_arr;  /* u begins with n_arr array pointers; out_arr is the new parameter's */
    size_t es;           /* their element size */
    bool stream;         /* write the new parameter with non-temporal stores (update_part) */
    int64_t start;       /* multi-tensor form: the row's first element in the joint range */
    int n_scal;          /* scalar state (step counters, ASGD's eta and mu, NAdam's mu product) */
    double *scal_out[3]; /* where each goes */
    double scal[3];      /* its new value */
    union {
        sgd_job sgd;
        adam_job adam;
        rms_job rms;
        gen_job gen;
    } u;
} update_job;

/* Each job begins with its arrays (operands, then new values), the new
 * parameter's at OUT_ARR: update_part moves them by pointer. */
enum { SGD_ARRS = 5, SGD_OUT = 3, ARRS = 9, OUT_ARR = 5 };
_Static_assert(offsetof(sgd_job, p_out) == SGD_OUT * sizeof(void *) &&
                   offsetof(sgd_job, buf_out) == (SGD_ARRS - 1) * sizeof(void *),
               "sgd_job begins with its arrays");
_Static_assert(offsetof(adam_job, p_out) == OUT_ARR * sizeof(void *) &&
                   offsetof(adam_job, vmax_out) == (ARRS - 1) * sizeof(void *),
               "adam_job begins with its arrays");
_Static_assert(offsetof(rms_job, p_out) == OUT_ARR * sizeof(void *) &&
                   offsetof(rms_job, gavg_out) == (ARRS - 1) * sizeof(void *),
               "rms_job begins with its arrays");
_Static_assert(offsetof(gen_job, p_out) == OUT_ARR * sizeof(void *) &&
                   offsetof(gen_job, s_out[2]) == (ARRS - 1) * sizeof(void *),
               "gen_job begins with its arrays");

static inline void update_arrays(update_job *j, int n_arr, int out_arr, int dtype) {
    j->n_arr = n_arr, j->out_arr = out_arr;
    j->es = musa_dtype_info[dtype].size;
    j->stream = false;
}

/* Fill j from a row's operands (see the file comment); cannot fail. */
typedef void (*prepare_fn)(update_job *j, musa_kview *out, const musa_kview *in, int n_in,
                           const void *attrs);

/* Run one prepared row as one parallel loop (the op-table kernels). */
int cpu_update_row(prepare_fn prepare, musa_kview *out, const musa_kview *in, int n_in,
                   const void *attrs);
/* optim_more.c's prepare function for its kernels, or NULL. */
prepare_fn cpu_update_more_prepare(musa_kernel_fn kernel);

#endif
