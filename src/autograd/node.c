/*
 * node.c - recording the tape: the dispatcher hook that makes a node per
 * differentiable op, saved tensors, the autograd meta of tensors and its
 * public accessors, gradient hooks, custom nodes, and node lifetime.
 */
#include <pthread.h>
#include <stdio.h>

#include "../base/tlcache.h"
#include "autograd.h"

_Thread_local const char *musa_anomaly_file;
_Thread_local int musa_anomaly_line;
static atomic_uint_fast64_t next_seq;

/* ---- node lifetime: a trampoline instead of recursion ---- */

typedef struct {
    musa_node **items;
    int64_t len, cap;
    bool draining;
    bool registered; /* dead_key points at this thread's list */
} dead_list;

static _Thread_local dead_list dead;
static pthread_key_t dead_key; /* frees a thread's buffer when the thread exits */
static pthread_once_t dead_once = PTHREAD_ONCE_INIT;

static void dead_list_free(void *arg) {
    dead_list *d = arg;
    free(d->items);
    d->items = NULL;
    d->cap = d->len = 0;
    d->registered = false; /* a later release (another key's destructor) registers again */
}

static void make_dead_key(void) {
    pthread_key_create(&dead_key, dead_list_free);
}

pthread_mutex_t musa_leaf_grad_lock = PTHREAD_MUTEX_INITIALIZER;

/* Guards every leaf's grad_acc, a weak pointer: one thread may look it up
 * and take a reference while another drops the node's last one. */
static pthread_mutex_t grad_acc_lock = PTHREAD_MUTEX_INITIALIZER;

static void node_destroy(musa_node *n) {
    for (int i = 0; i < n->n_in; i++) musa_node_release(n->next[i].node);
    musa_node_release_saved(n);
    musa_hook *h = n->pre_hooks;
    while (h) {
        musa_hook *nx = h->next;
        if (h->free_ctx) h->free_ctx(h->ctx);
        free(h);
        h = nx;
    }
    if (n->kind == MUSA_NODE_ACCUMULATE && n->variable) {
        struct musa_autograd_meta *m = n->variable->autograd;
        pthread_mutex_lock(&grad_acc_lock);
        if (m && m->grad_acc == n) m->grad_acc = NULL;
        pthread_mutex_unlock(&grad_acc_lock);
        musa_tensor_release(n->variable);
    }
    if (n->custom_free) n->custom_free(n->custom_ctx);
    free(n->name);
    free(n->trace);
    if (n->alloc_size <= MUSA_TL_NODE_SIZE)
        musa_tl_free(MUSA_TL_NODE, n);
    else
        free(n);
}

musa_node *musa_node_retain(musa_node *n) {
    if (n) atomic_fetch_add_explicit(&n->refcount, 1, memory_order_relaxed);
    return n;
}

void musa_node_release(musa_node *n) {
    if (!n || atomic_fetch_sub_explicit(&n->refcount, 1, memory_order_acq_rel) != 1) return;
    if (dead.len == dead.cap) {
        int64_t cap = dead.cap ? dead.cap * 2 : 256;
        musa_node **p = realloc(dead.items, sizeof *p * (size_t)cap);
        if (!p) { /* cannot defer: destroy now (recursion only under OOM) */
            node_destroy(n);
            return;
        }
        dead.items = p, dead.cap = cap;
        if (!dead.registered) {
            pthread_once(&dead_once, make_dead_key);
            pthread_setspecific(dead_key, &dead);
            dead.registered = true;
        }
    }
    dead.items[dead.len++] = n;
    if (dead.draining) return;
    dead.draining = true;
    while (dead.len > 0) node_destroy(dead.items[--dead.len]);
    dead.draining = false;
    if (dead.cap > 4096) { /* do not keep a huge buffer after freeing a long chain */
        free(dead.items);
        dead.items = NULL;
        dead.cap = 0;
    }
}

void musa_node_release_saved(musa_node *n) {
    for (int i = 0; i < n->n_in; i++) {
        musa_tensor_release(n->saved_in[i].t);
        n->saved_in[i].t = NULL;
    }
    for (int j = 0; j < n->n_out; j++) {
        musa_tensor_release(n->saved_out[j].t);
        n->saved_out[j].t = NULL;
    }
}

/* One allocation: the struct, its arrays, then the attrs record. */
static musa_node *node_new(int kind, int n_in, int n_out, size_t attrs_size) {
    size_t sz = sizeof(musa_node) +
                (size_t)n_in * (sizeof(musa_edge) + sizeof(musa_saved) + sizeof(musa_meta)) +
                (size_t)n_out * (sizeof(musa_saved) + sizeof(musa_meta)) + attrs_size;
    musa_node *n = sz <= MUSA_TL_NODE_SIZE
                       ? musa_tl_alloc(MUSA_TL_NODE, MUSA_TL_NODE_SIZE, "autograd")
                       : musa_malloc(sz, "autograd");
    if (!n) return NULL;
    memset(n, 0, sz);
    n->alloc_size = sz;
    atomic_init(&n->refcount, 1);
    n->kind = (uint8_t)kind;
    n->n_in = n_in;
    n->n_out = n_out;
    n->seq = atomic_fetch_add(&next_seq, 1);
    char *p = (char *)(n + 1);
    n->in_meta = (musa_meta *)p, p += sizeof(musa_meta) * (size_t)n_in;
    n->out_meta = (musa_meta *)p, p += sizeof(musa_meta) * (size_t)n_out;
    n->next = (musa_edge *)p, p += sizeof(musa_edge) * (size_t)n_in;
    n->saved_in = (musa_saved *)p, p += sizeof(musa_saved) * (size_t)n_in;
    n->saved_out = (musa_saved *)p, p += sizeof(musa_saved) * (size_t)n_out;
    n->attrs = p; /* records hold int64/double: every offset above is 8-aligned */
    return n;
}

static void set_meta(musa_meta *m, const musa_tensor *t) {
    m->dtype = t->dtype;
    m->ndim = t->ndim;
    memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
}

static char *make_trace(const char *what) {
    char buf[512];
    if (musa_anomaly_file)
        snprintf(buf, sizeof buf, "%s at %s:%d", what, musa_anomaly_file, musa_anomaly_line);
    else
        snprintf(buf, sizeof buf, "%s", what);
    return strdup(buf);
}

/* ---- autograd meta ---- */

static void meta_free(musa_tensor *t) {
    struct musa_autograd_meta *m = t->autograd;
    t->autograd = NULL;
    if (m->retains_grad && m->grad_fn) { /* drop the retain hook pointing at t */
        musa_hook **pp = &m->grad_fn->pre_hooks;
        while (*pp) {
            if ((*pp)->retain_to == t) {
                musa_hook *h = *pp;
                *pp = h->next;
                free(h);
            } else {
                pp = &(*pp)->next;
            }
        }
    }
    musa_hook *h = m->hooks;
    while (h) {
        musa_hook *nx = h->next;
        if (h->free_ctx) h->free_ctx(h->ctx);
        free(h);
        h = nx;
    }
    musa_tensor_release(m->grad);
    musa_node_release(m->grad_fn);
    musa_tl_free(MUSA_TL_META, m);
}

struct musa_autograd_meta *musa_autograd_meta_of(musa_tensor *t) {
    if (t->autograd) return t->autograd;
    musa_autograd_init();
    t->autograd = musa_tl_alloc(MUSA_TL_META, sizeof *t->autograd, "autograd");
    if (t->autograd) memset(t->autograd, 0, sizeof *t->autograd);
    return t->autograd;
}

/* A reference to n unless its count already reached zero (it is being
 * destroyed, and its destroy will find grad_acc no longer pointing at it). */
static bool retain_if_alive(musa_node *n) {
    int_fast32_t c = atomic_load_explicit(&n->refcount, memory_order_relaxed);
    while (c > 0)
        if (atomic_compare_exchange_weak_explicit(&n->refcount, &c, c + 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            return true;
    return false;
}

/* The leaf's accumulator (a new reference), made on first use; graphs
 * recorded on several threads share it. NULL on OOM. */
static musa_node *accumulator(musa_tensor *t) {
    struct musa_autograd_meta *m = musa_autograd_meta_of(t);
    if (!m) return NULL;
    pthread_mutex_lock(&grad_acc_lock);
    musa_node *n = m->grad_acc;
    if (n && !retain_if_alive(n)) n = NULL;
    if (!n && (n = node_new(MUSA_NODE_ACCUMULATE, 0, 1, 0))) {
        n->variable = musa_tensor_retain(t);
        set_meta(&n->out_meta[0], t);
        m->grad_acc = n; /* weak */
    }
    pthread_mutex_unlock(&grad_acc_lock);
    return n;
}

int musa_gradient_edge(musa_tensor *t, musa_edge *e) {
    if (t->view_base) {
        int rc = musa_view_refresh(t);
        if (rc) return rc;
    }
    struct musa_autograd_meta *m = t->autograd;
    if (m && m->grad_fn) {
        e->node = musa_node_retain(m->grad_fn);
        e->input_nr = m->output_nr;
        return MUSA_OK;
    }
    e->node = accumulator(t);
    e->input_nr = 0;
    return e->node ? MUSA_OK : MUSA_ERR_NOMEM;
}

/* ---- saved tensors ---- */

static void save(musa_saved *s, musa_tensor *t, bool detached) {
    s->version = musa_tensor_version(t);
    if (!detached) {
        s->t = musa_tensor_retain(t);
        return;
    }
    /* a plain alias of the output: same storage and version counter, no meta */
    s->t = musa_tensor_view_of(t, t->ndim, t->shape, t->strides, t->offset);
}

int musa_saved_unpack(musa_node *node, bool is_output, int index, bool create_graph,
                      musa_tensor **out) {
    musa_saved *s = is_output ? &node->saved_out[index] : &node->saved_in[index];
    const char *op = musa_ops[node->op].name;
    *out = NULL;
    if (node->released || !s->t)
        return musa_err(MUSA_ERR_RUNTIME,
                        "[%s] trying to backward through the graph a second time (its saved "
                        "tensors were freed after the first backward); pass retain_graph=true "
                        "to the first backward to keep them",
                        op);
    uint64_t v = musa_tensor_version(s->t);
    if (v != s->version)
        return musa_err(MUSA_ERR_RUNTIME,
                        "[%s] a tensor saved for backward was modified in place: version %llu, "
                        "expected %llu",
                        op, (unsigned long long)v, (unsigned long long)s->version);
    if (!is_output || !create_graph) {
        *out = musa_tensor_retain(s->t);
        return MUSA_OK;
    }
    /* re-attach: gradients of gradients flow through this output to this node */
    musa_tensor *t =
        musa_tensor_view_of(s->t, s->t->ndim, s->t->shape, s->t->strides, s->t->offset);
    if (!t) return musa_last_error_code();
    struct musa_autograd_meta *m = musa_autograd_meta_of(t);
    if (!m) {
        musa_tensor_release(t);
        return MUSA_ERR_NOMEM;
    }
    m->requires_grad = true;
    m->grad_fn = musa_node_retain(node);
    m->output_nr = index;
    t->flags |= MUSA_TF_REQUIRES_GRAD;
    *out = t;
    return MUSA_OK;
}

/* ---- the dispatcher hooks ---- */

static bool differentiable(const musa_tensor *t) {
    return musa_is_float((musa_dtype)t->dtype);
}

static int attach_output(musa_tensor *t, musa_node *n, int j) {
    struct musa_autograd_meta *m = musa_autograd_meta_of(t);
    if (!m) return MUSA_ERR_NOMEM;
    musa_node *old = m->grad_fn;
    m->grad_fn = musa_node_retain(n);
    m->output_nr = j;
    m->requires_grad = true;
    if (t->view_base) m->view_version = musa_tensor_version(t);
    t->flags |= MUSA_TF_REQUIRES_GRAD;
    musa_node_release(old); /* in place: the tensor's history moves on */
    return MUSA_OK;
}

/* ---- views and in-place writes through them ----
 *
 * A view made by a differentiable view op knows its base (t->view_base).
 * Writing into a view while recording is done out of place on the base:
 *     r = op(inputs)                              (recorded)
 *     b' = as_strided_scatter(base, r, view region) (recorded)
 * then b' is copied into the base's memory, the base takes b''s history,
 * and the view's history becomes as_strided(base). Other views of the base
 * notice the write through the storage version and regenerate their
 * history from the base when next used (musa_view_refresh). */

static int take_history(musa_tensor *t, musa_tensor *from) {
    struct musa_autograd_meta *fm = from->autograd;
    if (!fm || !fm->grad_fn) return MUSA_OK;
    struct musa_autograd_meta *m = musa_autograd_meta_of(t);
    if (!m) return MUSA_ERR_NOMEM;
    musa_node *old = m->grad_fn;
    m->grad_fn = musa_node_retain(fm->grad_fn);
    m->output_nr = fm->output_nr;
    m->requires_grad = true;
    m->view_version = musa_tensor_version(t);
    t->flags |= MUSA_TF_REQUIRES_GRAD;
    musa_node_release(old);
    return MUSA_OK;
}

static void region_of(const musa_tensor *v, musa_attrs_strided *a, int64_t offset) {
    musa_attrs_init(MUSA_ATTRS_strided, a);
    a->shape.n = a->strides.n = v->ndim;
    memcpy(a->shape.v, v->shape, sizeof(int64_t) * (size_t)v->ndim);
    memcpy(a->strides.v, v->strides, sizeof(int64_t) * (size_t)v->ndim);
    a->offset = offset;
}

int musa_view_refresh(musa_tensor *t) {
    musa_tensor *b = t->view_base;
    if (!b || !(b->flags & MUSA_TF_REQUIRES_GRAD)) return MUSA_OK;
    struct musa_autograd_meta *m = t->autograd;
    if (m && m->grad_fn && m->view_version == musa_tensor_version(t)) return MUSA_OK;
    musa_attrs_strided a;
    region_of(t, &a, t->offset);
    bool prev = musa_set_grad_enabled(true);
    musa_tensor *g = musa_call(MUSA_OP_as_strided, 1, &b, &a);
    musa_set_grad_enabled(prev);
    if (!g) return musa_last_error_code();
    int rc = take_history(t, g);
    musa_tensor_release(g);
    return rc;
}

static int inplace_view(musa_op_id op, int n_in, musa_tensor *const *in, const void *attrs,
                        musa_tensor *v) {
    const char *name = musa_ops[op].name;
    musa_tensor *b = v->view_base;
    if (b->autograd && b->autograd->requires_grad && !b->autograd->grad_fn)
        return musa_err(
            MUSA_ERR_RUNTIME,
            "[%s] a view of a leaf tensor that requires grad is used in an in-place operation "
            "(wrap it in no_grad, or work on a clone)",
            name);
    if (!musa_tensor_is_contiguous(b))
        return musa_err(
            MUSA_ERR_NOT_IMPLEMENTED,
            "[%s] writing into a view of a non-contiguous tensor while recording gradients", name);
    musa_tensor *out[MUSA_MAX_OUTPUTS] = {NULL};
    int rc = musa_dispatch(op, n_in, in, attrs, out);
    for (int j = 1; j < MUSA_MAX_OUTPUTS; j++) musa_tensor_release(out[j]);
    if (rc) return rc;
    musa_tensor *r = out[0];
    if (r->dtype != v->dtype) {
        musa_tensor *c = musa_cast(r, (musa_dtype)v->dtype);
        musa_tensor_release(r);
        if (!(r = c)) return musa_last_error_code();
    }
    musa_attrs_strided a;
    region_of(v, &a, v->offset - b->offset);
    musa_tensor *pair[2] = {b, r};
    musa_tensor *nb = musa_call(MUSA_OP_as_strided_scatter, 2, pair, &a);
    musa_tensor_release(r);
    if (!nb) return musa_last_error_code();
    bool prev = musa_set_grad_enabled(false);
    rc = musa_copy_(b, nb); /* the write itself; bumps the version */
    musa_set_grad_enabled(prev);
    if (!rc) rc = take_history(b, nb);
    musa_tensor_release(nb);
    return rc ? rc : musa_view_refresh(v);
}

static int record(musa_op_id op, int n_in, musa_tensor *const *in, const void *attrs, int n_out,
                  musa_tensor **out) {
    const musa_op_info *info = &musa_ops[op];
    size_t asz =
        info->attrs_kind == MUSA_ATTRS_none ? 0 : musa_attrs_desc_of(info->attrs_kind)->size;
    musa_node *n = node_new(MUSA_NODE_OP, n_in, n_out, asz);
    if (!n) return MUSA_ERR_NOMEM;
    n->op = op;
    if (asz) memcpy(n->attrs, attrs, asz);
    for (int i = 0; i < n_in; i++) {
        set_meta(&n->in_meta[i], in[i]);
        int rc = in[i]->view_base ? musa_view_refresh(in[i]) : MUSA_OK;
        if (!rc && (in[i]->flags & MUSA_TF_REQUIRES_GRAD))
            rc = musa_gradient_edge(in[i], &n->next[i]);
        if (rc) {
            musa_node_release(n);
            return rc;
        }
        if (musa_op_saves_input(info, i)) save(&n->saved_in[i], in[i], false);
    }
    for (int j = 0; j < n_out; j++) {
        set_meta(&n->out_meta[j], out[j]);
        if (musa_op_saves_output(info, j)) save(&n->saved_out[j], out[j], true);
    }
    if (musa_tls.anomaly) n->trace = make_trace(info->name);
    int rc = MUSA_OK;
    for (int j = 0; j < n_out && !rc; j++)
        if (differentiable(out[j])) rc = attach_output(out[j], n, j);
    musa_node_release(n); /* the outputs hold it now */
    return rc;
}

/* Before an op writes into t in place (grad mode on). */
static int check_inplace(musa_op_id op, musa_tensor *t) {
    struct musa_autograd_meta *m = t->autograd;
    if (m && m->requires_grad && !m->grad_fn)
        return musa_err(MUSA_ERR_RUNTIME,
                        "[%s] a leaf tensor that requires grad is used in an in-place operation "
                        "(wrap it in no_grad, or work on a clone)",
                        musa_ops[op].name);
    return MUSA_OK;
}

static void install(void) {
    musa_autograd_hook = record;
    musa_autograd_inplace_hook = check_inplace;
    musa_autograd_inplace_view_hook = inplace_view;
    musa_tensor_autograd_free_hook = meta_free;
}

__attribute__((constructor)) static void autograd_ctor(void) {
    install();
}

void musa_autograd_init(void) {
    if (!musa_autograd_hook) install();
}

/* ---- public accessors ---- */

int musa_tensor_set_requires_grad(musa_tensor *t, bool requires_grad) {
    if (!t) return musa_err(MUSA_ERR_VALUE, "[requires_grad_] tensor is NULL");
    struct musa_autograd_meta *m = t->autograd;
    if (m && m->grad_fn) {
        if (requires_grad) return MUSA_OK;
        return musa_err(MUSA_ERR_RUNTIME,
                        "[requires_grad_] you can only change requires_grad of leaf tensors; use "
                        "detach() to get a tensor without history");
    }
    if (requires_grad && !musa_is_float((musa_dtype)t->dtype))
        return musa_err(
            MUSA_ERR_RUNTIME,
            "[requires_grad_] only floating point tensors can require gradients, got %s",
            musa_dtype_name((musa_dtype)t->dtype));
    if (!requires_grad && !m) return MUSA_OK;
    if (!(m = musa_autograd_meta_of(t))) return MUSA_ERR_NOMEM;
    if (requires_grad && t->view_base && !(t->view_base->flags & MUSA_TF_REQUIRES_GRAD)) {
        /* A view of a base that does not require grad becomes a root of its
         * own. Kept, the link made a reference cycle once the base took
         * history from an in-place write of a value computed from this leaf
         * (base -> its grad_fn -> ... -> this leaf -> view_base -> base). */
        musa_tensor *b = t->view_base;
        t->view_base = NULL;
        musa_tensor_release(b);
    }
    m->requires_grad = requires_grad;
    if (requires_grad)
        t->flags |= MUSA_TF_REQUIRES_GRAD;
    else
        t->flags &= (uint8_t)~MUSA_TF_REQUIRES_GRAD;
    return MUSA_OK;
}

bool musa_tensor_requires_grad(const musa_tensor *t) {
    return t && (t->flags & MUSA_TF_REQUIRES_GRAD);
}

bool musa_tensor_is_leaf(const musa_tensor *t) {
    return t && !(t->autograd && t->autograd->grad_fn);
}

bool musa_tensor_retains_grad(const musa_tensor *t) {
    return t && t->autograd && t->autograd->grad_fn && t->autograd->retains_grad;
}

musa_tensor *musa_tensor_grad(const musa_tensor *t) {
    if (!t || !t->autograd) return NULL;
    pthread_mutex_lock(&musa_leaf_grad_lock);
    musa_tensor *g = musa_tensor_retain(t->autograd->grad);
    pthread_mutex_unlock(&musa_leaf_grad_lock);
    return g;
}

int musa_tensor_set_grad(musa_tensor *t, musa_tensor *grad) {
    if (!t) return musa_err(MUSA_ERR_VALUE, "[set_grad] tensor is NULL");
    struct musa_autograd_meta *m = musa_autograd_meta_of(t);
    if (!m) return MUSA_ERR_NOMEM;
    musa_tensor *g = NULL;
    if (grad) {
        char s1[128], s2[128];
        if (!musa_shape_equal(grad->ndim, grad->shape, t->ndim, t->shape))
            return musa_err(MUSA_ERR_VALUE,
                            "[set_grad] gradient of shape %s for a tensor of shape %s",
                            musa_shape_str(grad->ndim, grad->shape, s1, sizeof s1),
                            musa_shape_str(t->ndim, t->shape, s2, sizeof s2));
        if (grad == t)
            return musa_err(MUSA_ERR_RUNTIME, "[set_grad] a tensor cannot be its own gradient");
        g = musa_cast(grad, (musa_dtype)t->dtype);
        if (!g) return musa_last_error_code();
    }
    musa_record_grad_change(t, m->grad);
    pthread_mutex_lock(&musa_leaf_grad_lock);
    musa_tensor *old = m->grad;
    m->grad = g;
    pthread_mutex_unlock(&musa_leaf_grad_lock);
    musa_tensor_release(old);
    return MUSA_OK;
}

static int retain_hook(void *ctx, musa_tensor *grad, musa_tensor **replace) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(grad), MUSA_UNUSED(replace);
    return MUSA_OK; /* the engine handles retain hooks itself (see retain_to) */
}

int musa_tensor_retain_grad(musa_tensor *t) {
    if (!t) return musa_err(MUSA_ERR_VALUE, "[retain_grad] tensor is NULL");
    if (!musa_tensor_requires_grad(t))
        return musa_err(MUSA_ERR_RUNTIME, "[retain_grad] can't retain_grad on a tensor that has "
                                          "requires_grad=false");
    struct musa_autograd_meta *m = t->autograd;
    if (!m->grad_fn || m->retains_grad) return MUSA_OK; /* leaves keep .grad anyway */
    musa_hook *h = musa_calloc(1, sizeof *h, "retain_grad");
    if (!h) return MUSA_ERR_NOMEM;
    h->fn = retain_hook;
    h->output_nr = m->output_nr;
    h->retain_to = t;
    h->id = -1;
    h->next = m->grad_fn->pre_hooks;
    m->grad_fn->pre_hooks = h;
    m->retains_grad = true;
    return MUSA_OK;
}

static int hook_ids;

static int add_hook(musa_tensor *t, musa_hook_fn fn, void *ctx, void (*free_ctx)(void *ctx),
                    bool post) {
    const char *who = post ? "register_post_accumulate_grad_hook" : "register_hook";
    int rc = MUSA_OK;
    if (!t || !fn)
        rc = musa_err(MUSA_ERR_VALUE, "[%s] tensor or hook is NULL", who);
    else if (!musa_tensor_requires_grad(t))
        rc = musa_err(MUSA_ERR_RUNTIME,
                      "[%s] cannot register a hook on a tensor that doesn't require gradient", who);
    else if (post && t->autograd->grad_fn)
        rc = musa_err(MUSA_ERR_RUNTIME,
                      "[%s] post accumulate grad hooks cannot be registered on non-leaf tensors",
                      who);
    musa_hook *h = rc ? NULL : musa_calloc(1, sizeof *h, "register_hook");
    if (!h) { /* the hook's context is the caller's no more */
        if (free_ctx) free_ctx(ctx);
        return rc ? rc : MUSA_ERR_NOMEM;
    }
    struct musa_autograd_meta *m = t->autograd;
    h->fn = fn, h->ctx = ctx, h->free_ctx = free_ctx, h->post = post;
    h->id = __atomic_fetch_add(&hook_ids, 1, __ATOMIC_RELAXED);
    musa_hook **list = m->grad_fn ? &m->grad_fn->pre_hooks : &m->hooks;
    h->output_nr = m->grad_fn ? m->output_nr : 0;
    /* append, so hooks run in registration order */
    while (*list) list = &(*list)->next;
    *list = h;
    return h->id;
}

int musa_tensor_register_hook(musa_tensor *t, musa_hook_fn fn, void *ctx,
                              void (*free_ctx)(void *ctx)) {
    return add_hook(t, fn, ctx, free_ctx, false);
}

int musa_tensor_register_post_accumulate_hook(musa_tensor *t, musa_hook_fn fn, void *ctx,
                                              void (*free_ctx)(void *ctx)) {
    return add_hook(t, fn, ctx, free_ctx, true);
}

int musa_tensor_remove_hook(musa_tensor *t, int hook_id) {
    if (!t || !t->autograd)
        return musa_err(MUSA_ERR_VALUE, "[remove_hook] no such hook %d", hook_id);
    struct musa_autograd_meta *m = t->autograd;
    musa_hook **lists[2] = {&m->hooks, m->grad_fn ? &m->grad_fn->pre_hooks : NULL};
    for (int k = 0; k < 2; k++) {
        for (musa_hook **pp = lists[k]; pp && *pp; pp = &(*pp)->next) {
            if ((*pp)->id != hook_id) continue;
            musa_hook *h = *pp;
            *pp = h->next;
            if (h->free_ctx) h->free_ctx(h->ctx);
            free(h);
            return MUSA_OK;
        }
    }
    return musa_err(MUSA_ERR_VALUE, "[remove_hook] no such hook %d", hook_id);
}

musa_node *musa_tensor_grad_fn(const musa_tensor *t) {
    return t && t->autograd ? t->autograd->grad_fn : NULL;
}

static char backward_names[MUSA_OP_COUNT][48];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void make_names(void) {
    for (int op = 0; op < MUSA_OP_COUNT; op++) {
        char *o = backward_names[op];
        const char *s = musa_ops[op].name;
        bool up = true;
        int k = 0;
        for (; *s && k < 36; s++) {
            if (*s == '_') {
                up = true;
                continue;
            }
            o[k++] = up && *s >= 'a' && *s <= 'z' ? (char)(*s - 32) : *s;
            up = false;
        }
        memcpy(o + k, "Backward", 9);
    }
}

const char *musa_node_name(const musa_node *n) {
    if (!n) return "";
    if (n->kind == MUSA_NODE_ACCUMULATE) return "AccumulateGrad";
    if (n->kind == MUSA_NODE_CUSTOM) return n->name ? n->name : "CustomBackward";
    if (n->op == MUSA_OP_custom && n->attrs) { /* an op registered at run time: by its name */
        const char *s = musa_custom_op_backward_name(((const musa_attrs_custom *)n->attrs)->index);
        if (s) return s;
    }
    pthread_once(&names_once, make_names);
    return backward_names[n->op];
}

int musa_node_num_next(const musa_node *n) {
    return n ? n->n_in : 0;
}

musa_node *musa_node_next(const musa_node *n, int i, int *input_nr) {
    if (!n || i < 0 || i >= n->n_in) return NULL;
    if (input_nr) *input_nr = n->next[i].input_nr;
    return n->next[i].node;
}

musa_tensor *musa_node_variable(const musa_node *n) {
    return n && n->kind == MUSA_NODE_ACCUMULATE ? n->variable : NULL;
}

int musa_node_num_outputs(const musa_node *n) {
    return n ? n->n_out : 0;
}

int musa_node_attrs(const musa_node *n, char *buf, size_t size) {
    if (size) buf[0] = 0;
    if (!n || n->kind != MUSA_NODE_OP || !n->attrs) return 0;
    musa_attrs_kind kind = musa_ops[n->op].attrs_kind;
    return kind == MUSA_ATTRS_none ? 0 : musa_attrs_format(kind, n->attrs, false, buf, size);
}

musa_tensor *musa_node_saved(const musa_node *n, bool is_output, int i) {
    if (!n || n->kind != MUSA_NODE_OP || n->released || i < 0 ||
        i >= (is_output ? n->n_out : n->n_in))
        return NULL;
    const musa_saved *s = is_output ? n->saved_out : n->saved_in;
    return s && s[i].t ? musa_tensor_retain(s[i].t) : NULL;
}

/* ---- custom nodes ---- */

int musa_custom_node(const char *name, int n_in, musa_tensor *const *inputs, int n_out,
                     musa_tensor *const *outputs, musa_custom_backward backward, void *ctx,
                     void (*free_ctx)(void *ctx)) {
    int rc = MUSA_OK;
    if (n_in < 0 || n_out < 1 || (n_in && !inputs) || !outputs || !backward)
        rc = musa_err(MUSA_ERR_VALUE, "[custom_node] bad arguments");
    for (int i = 0; !rc && i < n_in; i++)
        if (!inputs[i]) rc = musa_err(MUSA_ERR_VALUE, "[custom_node] input %d is NULL", i);
    for (int j = 0; !rc && j < n_out; j++) {
        if (!outputs[j])
            rc = musa_err(MUSA_ERR_VALUE, "[custom_node] output %d is NULL", j);
        else if (outputs[j]->autograd && outputs[j]->autograd->grad_fn)
            rc = musa_err(MUSA_ERR_RUNTIME, "[custom_node] output %d already has a grad_fn", j);
    }
    musa_node *n = rc ? NULL : node_new(MUSA_NODE_CUSTOM, n_in, n_out, 0);
    if (!n) { /* from here on the node owns ctx (freed with it) */
        if (free_ctx) free_ctx(ctx);
        return rc ? rc : MUSA_ERR_NOMEM;
    }
    n->name = strdup(name ? name : "CustomBackward");
    n->custom_fn = backward;
    n->custom_ctx = ctx;
    n->custom_free = free_ctx;
    for (int i = 0; i < n_in && !rc; i++) {
        set_meta(&n->in_meta[i], inputs[i]);
        if (inputs[i]->flags & MUSA_TF_REQUIRES_GRAD)
            rc = musa_gradient_edge(inputs[i], &n->next[i]);
    }
    for (int j = 0; j < n_out; j++) set_meta(&n->out_meta[j], outputs[j]);
    if (musa_tls.anomaly) n->trace = make_trace(n->name);
    for (int j = 0; j < n_out && !rc; j++)
        if (differentiable(outputs[j])) rc = attach_output(outputs[j], n, j);
    musa_node_release(n);
    return rc;
}

/* ---- anomaly mode ---- */

void musa_set_anomaly_enabled(bool enabled, bool check_forward) {
    musa_tls.anomaly = enabled;
    musa_tls.anomaly_forward = enabled && check_forward;
}

bool musa_is_anomaly_enabled(void) {
    return musa_tls.anomaly;
}

void musa_set_anomaly_location(const char *file, int line) {
    musa_anomaly_file = file;
    musa_anomaly_line = line;
}
