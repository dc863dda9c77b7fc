/*
 * engine.c - the backward engine: musa_backward and musa_grad.
 *
 * One run:
 *   1. collect the nodes reachable from the roots' edges (iterative DFS) and
 *      count, for each, the edges that feed it (its dependencies);
 *   2. for musa_grad, mark the nodes some requested input depends on, and
 *      where to capture each requested gradient;
 *   3. seed the roots' gradients, then run nodes from a ready stack: sum the
 *      gradients buffered for a node's outputs, run its hooks, call its
 *      backward formula, and pass each input gradient along its edge;
 *   4. AccumulateGrad nodes add into .grad (musa_backward only).
 * Grad mode is off during the run unless create_graph, which records the
 * backward formulas themselves (they are ordinary ops). Nothing recurses.
 *
 * Threads: a run claims each op node it reaches (run_owner), so two runs
 * through one op node fail cleanly instead of corrupting each other. A
 * leaf's AccumulateGrad node is shared by every graph that uses the leaf,
 * and runs on several threads may pass through it at once: its task lives
 * in the run's own `leaves` map, never in the node, and its .grad is
 * updated under musa_leaf_grad_lock.
 */
#include <pthread.h>
#include <stdio.h>

#include "../base/arena.h"
#include "../base/profile.h"
#include "../base/vec.h"
#include "autograd.h"

typedef struct {
    musa_node *node;   /* borrowed (the graph keeps it alive) */
    int deps;          /* edges from reachable nodes not yet delivered */
    bool needed;       /* musa_grad: some requested input depends on it */
    musa_tensor **buf; /* [n_out] summed incoming gradients */
} task;

typedef MUSA_VEC(int64_t) i64_vec;

typedef struct {
    MUSA_VEC(task) tasks;
    uint64_t id;      /* claims op nodes: node->run_owner == id while in this run */
    musa_map leaves;  /* AccumulateGrad node address -> its task index */
    musa_arena arena; /* gradient buffers of this run */
    bool create_graph, retain_graph, accumulate;
    /* musa_grad captures: (node, output_nr) -> result slot */
    int n_cap;
    musa_node **cap_node;
    int *cap_nr;
    musa_tensor **cap_out;
} run;

static atomic_uint_fast64_t run_ids = 1;

/* The task of node n in this run, claiming n on first sight. -1: out of
 * memory; -2: another thread's backward is running through n. */
static int64_t task_of(run *r, musa_node *n, bool *created) {
    if (n->kind == MUSA_NODE_ACCUMULATE) { /* shared between runs: not claimed */
        uint64_t *k = musa_map_get(&r->leaves, (uint64_t)(uintptr_t)n);
        *created = k == NULL;
        if (k) return (int64_t)*k;
        task t = {.node = n};
        if (musa_vec_push(&r->tasks, t)) return -1;
        if (musa_map_put(&r->leaves, (uint64_t)(uintptr_t)n, (uint64_t)(r->tasks.len - 1))) {
            r->tasks.len--;
            return -1;
        }
        return r->tasks.len - 1;
    }
    uint_fast64_t owner = atomic_load_explicit(&n->run_owner, memory_order_acquire);
    if (owner == r->id) {
        *created = false;
        return n->run_slot;
    }
    uint_fast64_t expected = 0;
    if (owner != 0 || !atomic_compare_exchange_strong(&n->run_owner, &expected, r->id)) return -2;
    task t = {.node = n};
    if (musa_vec_push(&r->tasks, t)) {
        atomic_store(&n->run_owner, 0);
        return -1;
    }
    n->run_slot = r->tasks.len - 1;
    *created = true;
    return n->run_slot;
}

/* Node n's task index in this run, or -1 if the run does not reach n. */
static int64_t slot_of(const run *r, const musa_node *n) {
    if (n->kind == MUSA_NODE_ACCUMULATE) {
        const uint64_t *k = musa_map_get(&r->leaves, (uint64_t)(uintptr_t)n);
        return k ? (int64_t)*k : -1;
    }
    return atomic_load_explicit(&n->run_owner, memory_order_relaxed) == r->id ? n->run_slot : -1;
}

/* n's task; n must be in this run. */
static inline task *task_at(run *r, const musa_node *n) {
    return &r->tasks.data[slot_of(r, n)];
}

static int claim_error(int64_t k, const char *who) {
    if (k == -1) return musa_err_nomem(who, 0);
    return musa_err(MUSA_ERR_RUNTIME,
                    "[%s] another thread is running backward through the same graph; "
                    "concurrent passes over shared nodes are not supported",
                    who);
}

/* Discover the graph under `roots` and count dependencies. */
static int discover(run *r, musa_node **roots, int n_roots) {
    MUSA_VEC(musa_node *) stack = {0};
    int rc = MUSA_OK;
    for (int i = 0; i < n_roots && !rc; i++) {
        bool created;
        int64_t k = task_of(r, roots[i], &created);
        if (k < 0)
            rc = claim_error(k, "backward");
        else if (created)
            rc = musa_vec_push(&stack, roots[i]);
    }
    while (!rc && stack.len) {
        musa_node *n = stack.data[--stack.len];
        for (int i = 0; i < n->n_in && !rc; i++) {
            musa_node *m = n->next[i].node;
            if (!m) continue;
            bool created;
            int64_t k = task_of(r, m, &created);
            if (k < 0) {
                rc = claim_error(k, "backward");
                break;
            }
            r->tasks.data[k].deps++;
            if (created) rc = musa_vec_push(&stack, m);
        }
    }
    musa_vec_free(&stack);
    return rc;
}

/* musa_grad: a node must run if a capture point lies below it (strictly:
 * a capture node itself runs only if another capture lies below it). The
 * parents of capture nodes are marked, then "needed" propagates up the
 * reverse edges, iteratively. */
static int mark_needed(run *r) {
    int64_t nt = r->tasks.len;
    /* reverse adjacency in CSR form */
    int64_t *count = calloc((size_t)nt + 1, sizeof *count);
    if (!count) return musa_err_nomem("grad", 0);
    for (int64_t k = 0; k < nt; k++) {
        musa_node *n = r->tasks.data[k].node;
        for (int i = 0; i < n->n_in; i++)
            if (n->next[i].node) count[slot_of(r, n->next[i].node) + 1]++;
    }
    for (int64_t k = 0; k < nt; k++) count[k + 1] += count[k];
    int64_t *parents = malloc(sizeof *parents * (size_t)(count[nt] + 1));
    int64_t *fill = calloc((size_t)nt, sizeof *fill);
    int64_t *stack = malloc(sizeof *stack * (size_t)(nt + 1));
    if (!parents || !fill || !stack) {
        free(count), free(parents), free(fill), free(stack);
        return musa_err_nomem("grad", 0);
    }
    for (int64_t k = 0; k < nt; k++) {
        musa_node *n = r->tasks.data[k].node;
        for (int i = 0; i < n->n_in; i++) {
            if (!n->next[i].node) continue;
            int64_t c = slot_of(r, n->next[i].node);
            parents[count[c] + fill[c]++] = k;
        }
    }
    int64_t sp = 0;
    for (int c = 0; c < r->n_cap; c++) {
        int64_t ix = slot_of(r, r->cap_node[c]);
        if (ix < 0) continue; /* not in this graph */
        for (int64_t p = count[ix]; p < count[ix + 1]; p++) {
            int64_t q = parents[p];
            if (r->tasks.data[q].needed) continue;
            r->tasks.data[q].needed = true;
            stack[sp++] = q;
        }
    }
    while (sp) {
        int64_t k = stack[--sp];
        for (int64_t p = count[k]; p < count[k + 1]; p++) {
            int64_t q = parents[p];
            if (r->tasks.data[q].needed) continue;
            r->tasks.data[q].needed = true;
            stack[sp++] = q;
        }
    }
    free(count), free(parents), free(fill), free(stack);
    return MUSA_OK;
}

/* buf = buf + g (g borrowed). */
static int accumulate_into(musa_tensor **buf, musa_tensor *g) {
    if (!*buf) {
        *buf = musa_tensor_retain(g);
        return MUSA_OK;
    }
    musa_tensor *s = musa_add(*buf, g);
    if (!s) return musa_last_error_code();
    musa_tensor_release(*buf);
    *buf = s;
    return MUSA_OK;
}

static int check_grad_shape(musa_node *n, int i, const musa_meta *m, musa_tensor *g) {
    if (musa_shape_equal(g->ndim, g->shape, m->ndim, m->shape)) return MUSA_OK;
    char s1[128], s2[128];
    return musa_err(MUSA_ERR_RUNTIME,
                    "[autograd] %s returned a gradient of shape %s for input %d of shape %s",
                    musa_node_name(n), musa_shape_str(g->ndim, g->shape, s1, sizeof s1), i,
                    musa_shape_str(m->ndim, m->shape, s2, sizeof s2));
}

/* Anomaly mode: fail if g holds NaN or inf. */
static int check_finite(musa_node *n, int i, musa_tensor *g) {
    if (!musa_is_float((musa_dtype)g->dtype) || !g->storage) return MUSA_OK;
    bool prev = musa_set_grad_enabled(false);
    musa_tensor *fin = musa_isnan(g), *inf = musa_isinf(g);
    musa_tensor *bad = musa_logical_or(fin, inf), *bi = musa_cast(bad, MUSA_DTYPE_INT32);
    musa_tensor *any = musa_amax(bi, 0, NULL, false);
    int64_t v = 0;
    int rc = any ? musa_tensor_item_int(any, &v) : musa_last_error_code();
    musa_set_grad_enabled(prev);
    musa_tensor_release(fin), musa_tensor_release(inf), musa_tensor_release(bad);
    musa_tensor_release(bi), musa_tensor_release(any);
    if (rc || !v || g->numel == 0) return rc;
    return musa_err(MUSA_ERR_RUNTIME,
                    "[anomaly] %s returned NaN or inf in the gradient of input %d; the forward op "
                    "was %s",
                    musa_node_name(n), i, n->trace ? n->trace : "(not recorded in anomaly mode)");
}

/* Run the hooks on output j's gradient (may replace *g); retain_grad
 * copies are taken last, so .grad sees what the user's hooks made of it. */
static int run_pre_hooks(musa_node *n, int j, musa_tensor **g) {
    for (musa_hook *h = n->pre_hooks; h; h = h->next) {
        if (h->output_nr != j || h->retain_to) continue;
        musa_tensor *rep = NULL;
        int rc = h->fn(h->ctx, *g, &rep);
        if (rc) return rc;
        if (rep) {
            musa_tensor_release(*g);
            *g = rep;
        }
    }
    for (musa_hook *h = n->pre_hooks; h; h = h->next) {
        if (h->output_nr != j || !h->retain_to) continue;
        struct musa_autograd_meta *m = h->retain_to->autograd;
        if (!m) continue;
        musa_tensor *c = musa_clone(*g);
        if (!c) return musa_last_error_code();
        musa_tensor_release(m->grad);
        m->grad = c;
    }
    return MUSA_OK;
}

static int run_leaf_hooks(musa_tensor *v, musa_tensor **g) {
    struct musa_autograd_meta *m = v->autograd;
    for (musa_hook *h = m ? m->hooks : NULL; h; h = h->next) {
        if (h->post) continue;
        musa_tensor *rep = NULL;
        int rc = h->fn(h->ctx, *g, &rep);
        if (rc) return rc;
        if (rep) {
            musa_tensor_release(*g);
            *g = rep;
        }
    }
    return MUSA_OK;
}

/* After the leaf's .grad took this run's gradient: post-accumulate hooks,
 * called with the leaf (outside the leaf lock: they may read .grad). */
static int run_post_hooks(musa_tensor *v) {
    struct musa_autograd_meta *m = v->autograd;
    for (musa_hook *h = m ? m->hooks : NULL; h; h = h->next) {
        if (!h->post) continue;
        int rc = h->fn(h->ctx, v, NULL);
        if (rc) return rc;
    }
    return MUSA_OK;
}

/* Backward passes on several threads may reach one leaf (graphs that share
 * a parameter): its .grad is read and written under musa_leaf_grad_lock. */
static int accumulate_leaf_locked(run *r, musa_node *n, musa_tensor *g);

static int accumulate_leaf(run *r, musa_node *n, musa_tensor *g) {
    pthread_mutex_lock(&musa_leaf_grad_lock);
    int rc = accumulate_leaf_locked(r, n, g);
    pthread_mutex_unlock(&musa_leaf_grad_lock);
    return rc;
}

static int accumulate_leaf_locked(run *r, musa_node *n, musa_tensor *g) {
    musa_tensor *v = n->variable;
    struct musa_autograd_meta *m = musa_autograd_meta_of(v);
    if (!m) return MUSA_ERR_NOMEM;
    int rc = check_grad_shape(n, 0, &n->out_meta[0], g);
    if (rc) return rc;
    if (!m->grad) {
        musa_record_grad_change(v, NULL);
        /* keep g itself unless someone else holds it (then a later in-place
         * accumulation would write through to them) or it is a broadcast
         * view (.grad must be writable in place) */
        if ((atomic_load(&g->refcount) > 1 || !musa_tensor_is_contiguous(g)) && !r->create_graph)
            m->grad = musa_clone(g);
        else
            m->grad = musa_tensor_retain(g);
        if (m->grad && m->grad->dtype != v->dtype) {
            musa_tensor *c = musa_cast(m->grad, (musa_dtype)v->dtype);
            musa_tensor_release(m->grad);
            m->grad = c;
        }
        return m->grad ? MUSA_OK : musa_last_error_code();
    }
    /* in place, unless .grad shares the variable's memory (x.grad = x.detach()):
     * accumulating would then write into the variable */
    if (!r->create_graph && !musa_tensor_may_overlap(m->grad, v)) return musa_add_(m->grad, g);
    musa_tensor *s = musa_add(m->grad, g);
    if (!s) return musa_last_error_code();
    musa_record_grad_change(v, m->grad);
    musa_tensor_release(m->grad);
    m->grad = s;
    return MUSA_OK;
}

/* Call an op node's formula. gin[i]: new references or NULL. */
static int call_formula(run *r, musa_node *n, musa_tensor **gout, musa_tensor **gin) {
    const musa_op_info *info = &musa_ops[n->op];
    musa_tensor *in_buf[8], **in = in_buf, *out[MUSA_MAX_OUTPUTS] = {NULL, NULL};
    bool needs_buf[8], *needs = needs_buf;
    if (n->n_in > 8) {
        in = calloc((size_t)n->n_in, sizeof *in);
        needs = calloc((size_t)n->n_in, sizeof *needs);
        if (!in || !needs) {
            free(in), free(needs);
            return musa_err_nomem("backward", 0);
        }
    }
    int rc = MUSA_OK;
    for (int i = 0; i < n->n_in; i++) {
        in[i] = NULL;
        needs[i] = n->next[i].node != NULL;
        if (needs[i] && r->cap_node) { /* musa_grad: only gradients someone needs */
            musa_node *m = n->next[i].node;
            task *t = task_at(r, m);
            bool captured = false;
            for (int c = 0; c < r->n_cap && !captured; c++) captured = r->cap_node[c] == m;
            needs[i] = t->needed || captured;
        }
        if (!rc && musa_op_saves_input(info, i))
            rc = musa_saved_unpack(n, false, i, r->create_graph, &in[i]);
    }
    for (int j = 0; j < n->n_out && !rc; j++)
        if (musa_op_saves_output(info, j))
            rc = musa_saved_unpack(n, true, j, r->create_graph, &out[j]);
    if (!rc) {
        musa_grad_args a = {.in = in,
                            .out = out,
                            .gout = gout,
                            .attrs = n->attrs,
                            .in_meta = n->in_meta,
                            .needs = needs,
                            .n_in = n->n_in};
        rc = info->grad(&a, gin);
        if (rc) musa_err_prefix(info->name);
    }
    for (int i = 0; i < n->n_in; i++) musa_tensor_release(in[i]);
    for (int j = 0; j < n->n_out; j++) musa_tensor_release(out[j]);
    if (in != in_buf) free(in), free(needs);
    return rc;
}

/* A node all of whose incoming gradients were "none": nothing to compute,
 * but its children still wait for this edge. */
static int pass_through(run *r, musa_node *n, i64_vec *ready) {
    int rc = MUSA_OK;
    if (!r->retain_graph && n->kind != MUSA_NODE_ACCUMULATE) { /* (shared, saves nothing) */
        n->released = true;
        musa_node_release_saved(n);
    }
    for (int i = 0; i < n->n_in; i++) {
        musa_edge *e = &n->next[i];
        if (!e->node) continue;
        int64_t child = slot_of(r, e->node);
        if (--r->tasks.data[child].deps == 0 && !rc) rc = musa_vec_push(ready, child);
    }
    return rc;
}

/* A slice's gradient written into the slice of its input's gradient
 * buffer, which is zeros elsewhere, rather than padded to the input's shape
 * by the formula and then added: the pieces of a split (attention's q, k
 * and v) cost one fill and a slice each, not a padded tensor and a
 * full-size add each. Eager runs only (a capture records the formula's
 * ops), unit steps, and a buffer this run owns alone (made here, or a
 * tensor nothing else holds); else *done stays false and the formula runs.
 * The sums are the formula's: each element gets its slices' values added
 * to zeros or to what arrived before, in the same order. */
static int slice_into(run *r, musa_node *n, musa_tensor *g, bool *done) {
    *done = false;
    const musa_attrs_slice *a = n->attrs;
    const musa_meta *m = &n->in_meta[0];
    musa_edge *e = &n->next[0];
    if (n->n_in != 1 || !e->node || r->create_graph || musa_tls.anomaly ||
        musa_tls.mode != MUSA_MODE_EAGER || a->step != 1 || !g || !g->storage ||
        g->dtype != m->dtype || g->ndim != m->ndim || a->dim < 0 || a->dim >= m->ndim ||
        a->start < 0 || a->start + g->shape[a->dim] > m->shape[a->dim])
        return MUSA_OK;
    task *dst = task_at(r, e->node);
    if (!dst->buf && !(dst->buf = MUSA_ARENA_NEW(&r->arena, musa_tensor *, e->node->n_out)))
        return musa_err_nomem("backward", 0);
    musa_tensor **slot = &dst->buf[e->input_nr], *acc = *slot;
    if (acc && !(atomic_load(&acc->refcount) == 1 && acc->storage &&
                 atomic_load(&acc->storage->refcount) == 1 && !acc->view_base &&
                 acc->dtype == g->dtype && musa_tensor_is_contiguous(acc) &&
                 musa_shape_equal(acc->ndim, acc->shape, m->ndim, m->shape)))
        return MUSA_OK; /* shared, or not laid out as the input: the formula's way */
    int64_t d = a->dim, end = a->start + g->shape[d], size = m->shape[d];
    musa_tensor *fresh = acc ? NULL : musa_empty(m->ndim, m->shape, (musa_dtype)m->dtype);
    if (!acc && !fresh) return musa_last_error_code();
    musa_tensor *into = acc ? acc : fresh;
    int rc = MUSA_OK;
    /* a new buffer: zeros around the slice, g in it; else g added in place */
    for (int side = 0; !acc && side < 2 && !rc; side++) {
        int64_t b0 = side ? end : 0, b1 = side ? size : a->start;
        if (b0 == b1) continue;
        musa_tensor *z = musa_slice(into, d, b0, b1, 1);
        rc = z ? musa_zero_(z) : musa_last_error_code();
        musa_tensor_release(z);
    }
    musa_tensor *part = rc ? NULL : musa_slice(into, d, a->start, end, 1);
    if (!rc) rc = !part ? musa_last_error_code() : acc ? musa_add_(part, g) : musa_copy_(part, g);
    musa_tensor_release(part);
    if (rc) {
        musa_tensor_release(fresh);
        return rc;
    }
    if (fresh) *slot = fresh;
    *done = true;
    return MUSA_OK;
}

static int execute(run *r, int64_t k, i64_vec *ready) {
    task *tk = &r->tasks.data[k];
    musa_node *n = tk->node;
    int rc = MUSA_OK;
    bool any = false;
    for (int j = 0; tk->buf && j < n->n_out && !any; j++) any = tk->buf[j] != NULL;
    if (!any) return pass_through(r, n, ready);
    /* hooks, then captures, see the summed gradient of each output */
    for (int j = 0; j < n->n_out && !rc; j++)
        if (tk->buf[j] && n->pre_hooks) rc = run_pre_hooks(n, j, &tk->buf[j]);
    for (int c = 0; c < r->n_cap && !rc; c++) {
        if (r->cap_node[c] != n || !tk->buf[r->cap_nr[c]]) continue;
        musa_tensor *g = musa_tensor_retain(tk->buf[r->cap_nr[c]]);
        if (n->kind == MUSA_NODE_ACCUMULATE) rc = run_leaf_hooks(n->variable, &g);
        musa_tensor_release(r->cap_out[c]);
        r->cap_out[c] = g;
    }
    if (rc) return rc;
    if (r->cap_node && !tk->needed) return pass_through(r, n, ready);

    if (n->kind == MUSA_NODE_ACCUMULATE) {
        if (!r->accumulate || !tk->buf[0]) return MUSA_OK;
        musa_tensor *g = tk->buf[0]; /* taken over, so .grad can keep it without a copy */
        tk->buf[0] = NULL;
        rc = run_leaf_hooks(n->variable, &g);
        if (!rc) rc = accumulate_leaf(r, n, g);
        musa_tensor_release(g);
        return rc ? rc : run_post_hooks(n->variable);
    }

    if (n->kind == MUSA_NODE_OP && n->op == MUSA_OP_slice) {
        bool done;
        rc = slice_into(r, n, tk->buf[0], &done);
        if (rc || done) { /* its gradient is delivered: release and count down as any node */
            int rc2 = pass_through(r, n, ready);
            return rc ? rc : rc2;
        }
    }
    musa_tensor *gin_buf[8] = {NULL}, **gin = gin_buf;
    if (n->n_in > 8 && !(gin = calloc((size_t)n->n_in, sizeof *gin)))
        return musa_err_nomem("backward", 0);
    if (n->kind == MUSA_NODE_CUSTOM) {
        rc = n->custom_fn(n->custom_ctx, n->n_out, tk->buf, n->n_in, gin);
        if (rc) musa_err_prefix(musa_node_name(n));
    } else {
        /* NaNs inside a formula are reported per node below, naming the
         * forward op, rather than by the forward check of each op */
        bool fwd_check = musa_tls.anomaly_forward;
        musa_tls.anomaly_forward = false;
        rc = call_formula(r, n, tk->buf, gin);
        musa_tls.anomaly_forward = fwd_check;
    }
    if (!r->retain_graph) {
        n->released = true;
        musa_node_release_saved(n);
    }
    for (int i = 0; i < n->n_in && !rc; i++) {
        musa_edge *e = &n->next[i];
        if (!e->node || !gin[i]) continue;
        rc = check_grad_shape(n, i, &n->in_meta[i], gin[i]);
        if (!rc && musa_tls.anomaly) rc = check_finite(n, i, gin[i]);
        if (rc) break;
        task *dst = task_at(r, e->node);
        if (!dst->buf && !(dst->buf = MUSA_ARENA_NEW(&r->arena, musa_tensor *, e->node->n_out))) {
            rc = musa_err_nomem("backward", 0);
            break;
        }
        rc = accumulate_into(&dst->buf[e->input_nr], gin[i]);
    }
    /* deliver dependency counts for every edge, even without a gradient */
    for (int i = 0; i < n->n_in; i++) {
        musa_edge *e = &n->next[i];
        if (!e->node) continue;
        int64_t child = slot_of(r, e->node);
        if (--r->tasks.data[child].deps == 0 && !rc) rc = musa_vec_push(ready, child);
    }
    for (int i = 0; i < n->n_in; i++) musa_tensor_release(gin[i]);
    if (gin != gin_buf) free(gin);
    return rc;
}

static int run_engine_(run *r, int n_roots, musa_tensor *const *roots, musa_tensor *const *grads,
                       const char *who);

/* Shared by musa_backward and musa_grad. Backward ops run in the dtypes the
 * forward recorded: autocast is off while it runs. */
static int run_engine(run *r, int n_roots, musa_tensor *const *roots, musa_tensor *const *grads,
                      const char *who) {
    int8_t autocast = musa_tls.autocast;
    musa_tls.autocast = 0;
    int rc = run_engine_(r, n_roots, roots, grads, who);
    musa_tls.autocast = autocast;
    return rc;
}

static int run_engine_(run *r, int n_roots, musa_tensor *const *roots, musa_tensor *const *grads,
                       const char *who) {
    musa_arena_init(&r->arena, 64 * 1024);
    r->id = atomic_fetch_add(&run_ids, 1);
    musa_edge *edges = calloc((size_t)(n_roots ? n_roots : 1), sizeof *edges);
    musa_node **rn = calloc((size_t)(n_roots ? n_roots : 1), sizeof *rn);
    musa_tensor **seed = calloc((size_t)(n_roots ? n_roots : 1), sizeof *seed);
    i64_vec ready = {0};
    int rc = (!edges || !rn || !seed) ? musa_err_nomem(who, 0) : MUSA_OK;
    for (int i = 0; i < n_roots && !rc; i++) {
        musa_tensor *t = roots[i];
        if (!t) {
            rc = musa_err(MUSA_ERR_VALUE, "[%s] root %d is NULL", who, i);
            break;
        }
        if (!(t->flags & MUSA_TF_REQUIRES_GRAD)) {
            rc = musa_err(MUSA_ERR_RUNTIME,
                          "[%s] tensor %d does not require grad and has no grad_fn", who, i);
            break;
        }
        musa_tensor *g = grads ? grads[i] : NULL;
        if (!g) {
            if (t->numel != 1) {
                char s[128];
                rc = musa_err(
                    MUSA_ERR_RUNTIME,
                    "[%s] grad can be implicitly created only for outputs with one element; "
                    "tensor %d has shape %s, so pass its gradient",
                    who, i, musa_shape_str(t->ndim, t->shape, s, sizeof s));
                break;
            }
            seed[i] = musa_ones_like(t);
        } else {
            if (!musa_shape_equal(g->ndim, g->shape, t->ndim, t->shape)) {
                char s1[128], s2[128];
                rc = musa_err(MUSA_ERR_VALUE,
                              "[%s] gradient %d has shape %s but its tensor has shape %s", who, i,
                              musa_shape_str(g->ndim, g->shape, s1, sizeof s1),
                              musa_shape_str(t->ndim, t->shape, s2, sizeof s2));
                break;
            }
            seed[i] = musa_tensor_retain(g);
        }
        if (!seed[i] || (rc = musa_gradient_edge(t, &edges[i]))) {
            rc = rc ? rc : musa_last_error_code();
            break;
        }
        rn[i] = edges[i].node;
    }
    if (!rc) rc = discover(r, rn, n_roots);
    if (!rc && r->cap_node) rc = mark_needed(r);
    for (int i = 0; i < n_roots && !rc; i++) {
        task *tk = task_at(r, rn[i]);
        if (!tk->buf && !(tk->buf = MUSA_ARENA_NEW(&r->arena, musa_tensor *, rn[i]->n_out)))
            rc = musa_err_nomem(who, 0);
        else
            rc = accumulate_into(&tk->buf[edges[i].input_nr], seed[i]);
    }
    for (int64_t k = 0; k < r->tasks.len && !rc; k++)
        if (r->tasks.data[k].deps == 0) rc = musa_vec_push(&ready, k);
    while (!rc && ready.len) {
        int64_t k = ready.data[--ready.len];
        if (MUSA_LIKELY(!musa_prof_on())) {
            rc = execute(r, k, &ready);
        } else {
            musa_node *n = r->tasks.data[k].node;
            int64_t t0 = musa_prof_now();
            rc = execute(r, k, &ready);
            if (n->kind == MUSA_NODE_CUSTOM) /* its name dies with the node */
                musa_prof_complete_copy(MUSA_PROFILE_BACKWARD, musa_node_name(n), t0, NULL);
            else
                musa_prof_complete(MUSA_PROFILE_BACKWARD, musa_node_name(n), t0, NULL);
        }
        task *tk = &r->tasks.data[k];
        for (int j = 0; tk->buf && j < tk->node->n_out; j++) musa_tensor_release(tk->buf[j]);
        tk->buf = NULL;
    }
    for (int64_t k = 0; k < r->tasks.len; k++) { /* after an error, drop what is left */
        task *tk = &r->tasks.data[k];
        for (int j = 0; tk->buf && j < tk->node->n_out; j++) musa_tensor_release(tk->buf[j]);
        if (tk->node->kind != MUSA_NODE_ACCUMULATE)
            atomic_store_explicit(&tk->node->run_owner, 0, memory_order_release);
    }
    musa_map_free(&r->leaves);
    musa_arena_free(&r->arena);
    for (int i = 0; i < n_roots; i++) {
        musa_tensor_release(seed[i]);
        musa_node_release(edges[i].node);
    }
    free(edges), free(rn), free(seed);
    musa_vec_free(&ready);
    musa_vec_free(&r->tasks);
    return rc;
}

int musa_backward(int n, musa_tensor *const *roots, musa_tensor *const *grad_roots,
                  bool retain_graph, bool create_graph) {
    if (n < 1 || !roots) return musa_err(MUSA_ERR_VALUE, "[backward] needs at least one root");
    run r = {.create_graph = create_graph,
             .retain_graph = retain_graph || create_graph,
             .accumulate = true};
    bool prev = musa_set_grad_enabled(create_graph);
    int rc = run_engine(&r, n, roots, grad_roots, "backward");
    musa_set_grad_enabled(prev);
    return rc;
}

int musa_grad(int n_out, musa_tensor *const *outputs, musa_tensor *const *grad_outputs, int n_in,
              musa_tensor *const *inputs, bool retain_graph, bool create_graph, bool allow_unused,
              musa_tensor **results) {
    if (n_out < 1 || !outputs || n_in < 1 || !inputs || !results)
        return musa_err(MUSA_ERR_VALUE, "[grad] needs outputs, inputs and a results array");
    for (int i = 0; i < n_in; i++) results[i] = NULL;
    run r = {.create_graph = create_graph,
             .retain_graph = retain_graph || create_graph,
             .accumulate = false,
             .n_cap = n_in};
    r.cap_node = calloc((size_t)n_in, sizeof *r.cap_node);
    r.cap_nr = calloc((size_t)n_in, sizeof *r.cap_nr);
    r.cap_out = calloc((size_t)n_in, sizeof *r.cap_out);
    int rc = (!r.cap_node || !r.cap_nr || !r.cap_out) ? musa_err_nomem("grad", 0) : MUSA_OK;
    for (int i = 0; i < n_in && !rc; i++) {
        musa_tensor *t = inputs[i];
        if (!t || !(t->flags & MUSA_TF_REQUIRES_GRAD)) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[grad] input %d does not require grad", i);
            break;
        }
        musa_edge e;
        if ((rc = musa_gradient_edge(t, &e))) break;
        r.cap_node[i] = e.node; /* keeps the accumulator alive during the run */
        r.cap_nr[i] = e.input_nr;
    }
    bool prev = musa_set_grad_enabled(create_graph);
    if (!rc) rc = run_engine(&r, n_out, outputs, grad_outputs, "grad");
    musa_set_grad_enabled(prev);
    for (int i = 0; i < n_in && !rc; i++) {
        if (r.cap_out[i]) continue;
        if (!allow_unused)
            rc = musa_err(MUSA_ERR_RUNTIME,
                          "[grad] input %d was not used in the graph of the outputs; pass "
                          "allow_unused to get NULL for it",
                          i);
    }
    for (int i = 0; i < n_in; i++) {
        if (!rc)
            results[i] = r.cap_out[i];
        else
            musa_tensor_release(r.cap_out[i]);
        if (r.cap_node) musa_node_release(r.cap_node[i]);
    }
    free(r.cap_node), free(r.cap_nr), free(r.cap_out);
    return rc;
}
