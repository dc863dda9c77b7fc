/*
 * custom.c - ops defined outside musa (musa_op_register): the registry, and
 * the op-table row `custom` that runs them. A call is an ordinary dispatch
 * of `custom` whose attribute is the registered index, so custom ops go
 * through inference, autograd, capture and plans like every other op; its
 * infer, kernel and formula below forward to the registered callbacks.
 *
 * Invariants: entries are only appended (an index stays valid for the
 * process), under a lock; readers take a snapshot pointer under the same
 * lock, and an entry never moves (a fixed array of MUSA_CUSTOM_MAX_OPS).
 * The callbacks' tensors are views of the kernel's memory, valid during the
 * call only. infer and forward run outside captures, autograd and autocast
 * (quiet_begin); backward runs as a formula, recorded like any other.
 */
#include <pthread.h>
#include <stdio.h>

#include "op.h"

#define MUSA_CUSTOM_MAX_OPS 1024

typedef struct custom_entry {
    musa_custom_op def;
    char name[MUSA_CUSTOM_NAME_MAX];
    char backward[MUSA_CUSTOM_NAME_MAX + 8]; /* its autograd node's name: "mylib::fBackward" */
} custom_entry;

static struct {
    pthread_mutex_t mu;
    custom_entry ops[MUSA_CUSTOM_MAX_OPS];
    int n;
} reg = {.mu = PTHREAD_MUTEX_INITIALIZER};

static bool valid_name(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= MUSA_CUSTOM_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == ':' || c == '.'))
            return false;
    }
    return true;
}

int musa_op_register(const musa_custom_op *def) {
    if (!def) return musa_err(MUSA_ERR_VALUE, "[op_register] NULL definition");
    if (!valid_name(def->name))
        return musa_err(MUSA_ERR_VALUE,
                        "[op_register] the name must be 1 to %d characters of letters, digits, "
                        "'_', ':' and '.' (such as \"mylib::scale\"), got \"%.80s\"",
                        MUSA_CUSTOM_NAME_MAX - 1, def->name ? def->name : "(null)");
    if (def->n_in < 0 || def->n_in > MUSA_CUSTOM_MAX_INPUTS || def->n_out < 1 ||
        def->n_out > MUSA_CUSTOM_MAX_OUTPUTS)
        return musa_err(MUSA_ERR_VALUE,
                        "[op_register] %s: %d inputs and %d outputs; 0 to %d inputs and 1 to %d "
                        "outputs are allowed",
                        def->name, def->n_in, def->n_out, MUSA_CUSTOM_MAX_INPUTS,
                        MUSA_CUSTOM_MAX_OUTPUTS);
    if (!def->infer || !def->forward)
        return musa_err(MUSA_ERR_VALUE, "[op_register] %s needs an infer and a forward function",
                        def->name);
    pthread_mutex_lock(&reg.mu);
    int rc = MUSA_OK;
    for (int i = 0; i < reg.n && !rc; i++)
        if (!strcmp(reg.ops[i].name, def->name))
            rc = musa_err(MUSA_ERR_VALUE, "[op_register] %s is registered already", def->name);
    if (!rc && reg.n == MUSA_CUSTOM_MAX_OPS)
        rc = musa_err(MUSA_ERR_VALUE, "[op_register] %s: the %d custom ops are all taken",
                      def->name, MUSA_CUSTOM_MAX_OPS);
    if (!rc) {
        custom_entry *e = &reg.ops[reg.n];
        e->def = *def;
        snprintf(e->name, sizeof e->name, "%s", def->name);
        snprintf(e->backward, sizeof e->backward, "%sBackward", def->name);
        e->def.name = e->name;
        rc = reg.n++;
    }
    pthread_mutex_unlock(&reg.mu);
    return rc;
}

int musa_custom_op_find(const char *name) {
    if (!name) return -1;
    pthread_mutex_lock(&reg.mu);
    int found = -1;
    for (int i = 0; i < reg.n && found < 0; i++)
        if (!strcmp(reg.ops[i].name, name)) found = i;
    pthread_mutex_unlock(&reg.mu);
    return found;
}

/* The registered op `index`, or NULL with an error naming `who`. */
static const musa_custom_op *entry(int64_t index, const char *who) {
    pthread_mutex_lock(&reg.mu);
    const musa_custom_op *d = index >= 0 && index < reg.n ? &reg.ops[index].def : NULL;
    int n = reg.n;
    pthread_mutex_unlock(&reg.mu);
    if (!d)
        musa_err(MUSA_ERR_VALUE, "[%s] no custom op has index %lld (%d registered)", who,
                 (long long)index, n);
    return d;
}

const char *musa_custom_op_name(int index) {
    const musa_custom_op *d = entry(index, "custom_op_name");
    if (!d) musa_clear_error();
    return d ? d->name : NULL;
}

const char *musa_custom_op_backward_name(int64_t index) {
    pthread_mutex_lock(&reg.mu);
    const char *s = index >= 0 && index < reg.n ? reg.ops[index].backward : NULL;
    pthread_mutex_unlock(&reg.mu);
    return s;
}

int musa_custom_op_call(int index, int n_in, musa_tensor *const *in, int n_out, musa_tensor **out) {
    const musa_custom_op *d = entry(index, "custom_op_call");
    if (!d) return musa_last_error_code();
    if (n_in != d->n_in || n_out != d->n_out || (n_in && !in) || !out)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] takes %d inputs and %d outputs, called with %d and %d", d->name,
                        d->n_in, d->n_out, n_in, n_out);
    for (int j = 0; j < n_out; j++) out[j] = NULL;
    musa_attrs_custom a;
    musa_attrs_init(MUSA_ATTRS_custom, &a);
    a.index = index;
    return musa_dispatch(MUSA_OP_custom, n_in, in, &a, out);
}

/* ---- the op-table row ---- */

/* A user function runs outside any capture, without autograd or autocast,
 * and synchronously (no current stream: its results must be there when it
 * returns): what it does inside (musa ops on its inputs, reading their
 * data) is the op's own business, not part of the caller's graph or tape. */
typedef struct quiet {
    musa_tls_state tls;
    musa_stream *stream;
} quiet;

static quiet quiet_begin(void) {
    quiet saved = {musa_tls, musa_stream_set_current(NULL)};
    musa_tls.mode = MUSA_MODE_EAGER;
    musa_tls.recorder = NULL;
    musa_tls.grad_disabled = true;
    musa_tls.autocast = 0;
    return saved;
}

static void quiet_end(quiet saved) {
    musa_tls = saved.tls;
    musa_stream_set_current(saved.stream);
}

int infer_custom(const musa_op_info *op, musa_tensor *const *in, int n_in, void *attrs,
                 musa_infer *r) {
    (void)op;
    const musa_custom_op *d = entry(((musa_attrs_custom *)attrs)->index, "custom");
    if (!d) return musa_last_error_code();
    if (n_in != d->n_in)
        return musa_err(MUSA_ERR_VALUE, "[%s] takes %d inputs, got %d", d->name, d->n_in, n_in);
    musa_dtype dt[MUSA_CUSTOM_MAX_OUTPUTS];
    int nd[MUSA_CUSTOM_MAX_OUTPUTS];
    int64_t shape[MUSA_CUSTOM_MAX_OUTPUTS][MUSA_MAX_DIMS];
    for (int j = 0; j < d->n_out; j++) dt[j] = MUSA_DTYPE_FLOAT32, nd[j] = -1;
    musa_clear_error();
    quiet saved = quiet_begin();
    int rc = d->infer(d->user, n_in, (const musa_tensor *const *)in, dt, nd, shape);
    quiet_end(saved);
    if (rc) {
        if (musa_last_error_code() == MUSA_OK)
            return musa_err(rc < 0 ? rc : MUSA_ERR_VALUE, "[%s] infer failed (status %d)", d->name,
                            rc);
        musa_err_prefix(d->name);
        return musa_last_error_code();
    }
    r->n_out = (int8_t)d->n_out;
    for (int j = 0; j < d->n_out; j++) {
        if (!musa_dtype_valid(dt[j]) || nd[j] < 0 || nd[j] > MUSA_MAX_DIMS)
            return musa_err(MUSA_ERR_VALUE, "[%s] infer gave output %d dtype %d and %d dims",
                            d->name, j, (int)dt[j], nd[j]);
        r->out_dtype[j] = (int8_t)dt[j];
        r->out_ndim[j] = (int8_t)nd[j];
        for (int k = 0; k < nd[j]; k++) {
            if (shape[j][k] < 0)
                return musa_err(MUSA_ERR_VALUE, "[%s] infer gave output %d dim %d = %lld", d->name,
                                j, k, (long long)shape[j][k]);
            r->out_shape[j][k] = shape[j][k];
        }
    }
    return MUSA_OK;
}

/* A tensor over a kernel view's memory (valid while the kernel runs). */
static musa_tensor *view_tensor(const musa_kview *v) {
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= v->shape[d];
    if (n == 0 || !v->data) return musa_empty(v->ndim, v->shape, v->dtype);
    return musa_from_blob(v->data, v->ndim, v->shape, v->strides, v->dtype, NULL, NULL);
}

int cpu_custom(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
               const void *attrs) {
    (void)ctx;
    const musa_custom_op *d = entry(((const musa_attrs_custom *)attrs)->index, "custom");
    if (!d) return musa_last_error_code();
    musa_tensor *ti[MUSA_CUSTOM_MAX_INPUTS] = {NULL}, *to[MUSA_CUSTOM_MAX_OUTPUTS] = {NULL};
    int rc = MUSA_OK;
    for (int i = 0; i < n_in && !rc; i++)
        if (!(ti[i] = view_tensor(&in[i]))) rc = musa_last_error_code();
    for (int j = 0; j < d->n_out && !rc; j++)
        if (!(to[j] = view_tensor(&out[j]))) rc = musa_last_error_code();
    if (!rc) {
        musa_clear_error();
        quiet saved = quiet_begin();
        rc = d->forward(d->user, n_in, ti, d->n_out, to);
        quiet_end(saved);
        if (rc && musa_last_error_code() == MUSA_OK)
            rc = musa_err(rc < 0 ? rc : MUSA_ERR_RUNTIME, "[%s] forward failed (status %d)",
                          d->name, rc);
        else if (rc)
            musa_err_prefix(d->name), rc = musa_last_error_code();
    }
    for (int i = 0; i < n_in; i++) musa_tensor_release(ti[i]);
    for (int j = 0; j < d->n_out; j++) musa_tensor_release(to[j]);
    return rc;
}

int grad_custom(const musa_grad_args *a, musa_tensor **gin) {
    const musa_custom_op *d = entry(((const musa_attrs_custom *)a->attrs)->index, "custom");
    if (!d) return musa_last_error_code();
    if (!d->backward)
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] has no backward function: register one to differentiate it", d->name);
    musa_clear_error();
    int rc = d->backward(d->user, a->n_in, a->in, d->n_out, a->out, a->gout, gin);
    if (rc) {
        for (int i = 0; i < a->n_in; i++) musa_tensor_release(gin[i]), gin[i] = NULL;
        if (musa_last_error_code() == MUSA_OK)
            return musa_err(rc < 0 ? rc : MUSA_ERR_RUNTIME, "[%s] backward failed (status %d)",
                            d->name, rc);
        musa_err_prefix(d->name);
        return musa_last_error_code();
    }
    for (int i = 0; i < a->n_in; i++)
        if (gin[i] && !a->needs[i]) musa_tensor_release(gin[i]), gin[i] = NULL;
    return MUSA_OK;
}
