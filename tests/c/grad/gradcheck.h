/*
 * gradcheck.h - the helpers of the gradcheck rows (gradcheck_ops.c,
 * gradcheck_nn.c): float64 inputs that require grad, and a check that runs
 * gradcheck then (optionally) gradgradcheck on a function of them.
 */
#ifndef MUSA_TESTS_GRADCHECK_H
#define MUSA_TESTS_GRADCHECK_H

#include "../util.h"

typedef musa_tensor *(*apply_fn)(musa_tensor *const *in);
typedef struct {
    apply_fn f;
} closure;

static inline int call(void *ctx, int n, musa_tensor *const *in, int *n_out, musa_tensor **out) {
    (void)n;
    out[0] = ((closure *)ctx)->f(in);
    *n_out = 1;
    return out[0] ? MUSA_OK : musa_last_error_code();
}

/* float64 input requiring grad */
static inline musa_tensor *in64(int nd, const int64_t *shape, double lo, double hi, layout lay) {
    musa_tensor *t = rnd(MUSA_DTYPE_FLOAT64, nd, shape, lo, hi, lay);
    if (t && musa_tensor_set_requires_grad(t, true)) {
        musa_tensor_release(t);
        return NULL;
    }
    return t;
}

/* gradcheck, then gradgradcheck; releases the inputs */
static inline bool check_grads(const char *name, apply_fn f, int n, musa_tensor **in, bool gg) {
    closure c = {f};
    bool ok = true;
    for (int i = 0; i < n; i++) ok &= in[i] != NULL;
    int rc = ok ? musa_gradcheck(call, &c, n, in, 1e-6, 1e-5, 1e-3) : musa_last_error_code();
    if (rc == MUSA_OK && gg) rc = musa_gradgradcheck(call, &c, n, in, 1e-6, 1e-5, 1e-3);
    if (rc != MUSA_OK) harness_fail(__FILE__, __LINE__, "%s: %s", name, musa_last_error());
    for (int i = 0; i < n; i++) musa_tensor_release(in[i]);
    return rc == MUSA_OK;
}

#endif
