/*
 * test_autograd.c - the dynamic graph: coverage of gradcheck rows for
 * every differentiable op (the rows live in grad/), known answers, the
 * engine's behaviours and errors, higher order, hooks, anomaly mode, deep
 * graphs, and training on real data.
 */
#include "../../examples/mlp_train.h"
#include "harness.h"
#include "ops/op.h"
#include "util.h"

bool harness_has_test(const char *name);

TEST(every_differentiable_op_has_a_gradcheck_row) {
    int missing = 0;
    for (int op = 0; op < MUSA_OP_COUNT; op++) {
        if (musa_ops[op].flags & MUSA_OPF_NONDIFF) continue;
        char name[96];
        snprintf(name, sizeof name, "grad_%s", musa_ops[op].name);
        if (!harness_has_test(name)) {
            fprintf(stderr, "  differentiable op %s has no gradcheck (expected TEST(%s))\n",
                    musa_ops[op].name, name);
            missing++;
        }
    }
    CHECK_MSG(missing == 0, "%d differentiable ops without gradcheck", missing);
}

static musa_tensor *leaf(double v) {
    musa_tensor *t = from_list(MUSA_DTYPE_FLOAT32, 1, (int64_t[]){1}, &v);
    musa_tensor_set_requires_grad(t, true);
    return t;
}

static double grad_of(musa_tensor *t) {
    musa_tensor *g = musa_tensor_grad(t);
    double v = NAN;
    if (g) musa_tensor_item(g, &v);
    musa_tensor_release(g);
    return v;
}

TEST(known_answers) {
    musa_tensor *x = leaf(3), *y = leaf(-2);
    musa_tensor *z = musa_mul(x, y);
    CHECK(!strcmp(musa_node_name(musa_tensor_grad_fn(z)), "MulBackward"));
    CHECK_OK(musa_backward(1, &z, NULL, false, false));
    CHECK(grad_of(x) == -2 && grad_of(y) == 3);
    /* sum(x @ w): d/dx = row sums of w broadcast over rows, d/dw = column sums of x */
    musa_tensor *a =
        from_list(MUSA_DTYPE_FLOAT64, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    musa_tensor *w =
        from_list(MUSA_DTYPE_FLOAT64, 2, (int64_t[]){3, 2}, (double[]){1, -1, 2, 0, 0.5, 3});
    musa_tensor_set_requires_grad(a, true);
    musa_tensor_set_requires_grad(w, true);
    musa_tensor *m = musa_matmul(a, w), *s = musa_sum(m, 0, NULL, false);
    CHECK_OK(musa_backward(1, &s, NULL, false, false));
    musa_tensor *ga = musa_tensor_grad(a), *gw = musa_tensor_grad(w);
    double *gav = values(ga), *gwv = values(gw);
    double wa[6] = {0, 2, 3.5, 0, 2, 3.5}, ww[6] = {5, 5, 7, 7, 9, 9};
    CHECK_CLOSE("dsum/dx", MUSA_DTYPE_FLOAT64, gav, wa, 6);
    CHECK_CLOSE("dsum/dw", MUSA_DTYPE_FLOAT64, gwv, ww, 6);
    free(gav), free(gwv);
    release_all(10, x, y, z, a, w, m, s, ga, gw, NULL);
}

/* Autocast through the C API: the policy flags, float32 gradients of a
 * float32 leaf, backward not autocast, the dtype check. */
TEST(autocast_policy_and_gradients) {
    musa_tensor *a = rnd(MUSA_DTYPE_FLOAT32, 2, S(3, 4), -1, 1, L_CONTIG);
    musa_tensor *w = rnd(MUSA_DTYPE_FLOAT32, 2, S(4, 5), -1, 1, L_CONTIG);
    CHECK_OK(musa_tensor_set_requires_grad(w, true));
    CHECK(!musa_autocast_enabled() && musa_autocast_dtype() == MUSA_DTYPE_BFLOAT16);
    CHECK_OK(musa_autocast_set(true, MUSA_DTYPE_BFLOAT16));
    musa_tensor *c = musa_matmul(a, w), *s = musa_softmax(c, -1), *r = musa_relu(c);
    CHECK(c && s && r);
    CHECK(musa_tensor_dtype(c) == MUSA_DTYPE_BFLOAT16 &&
          musa_tensor_dtype(s) == MUSA_DTYPE_FLOAT32 &&
          musa_tensor_dtype(r) == MUSA_DTYPE_BFLOAT16);
    musa_tensor *l = musa_sum(s, 0, NULL, false);
    CHECK_OK(musa_backward(1, &l, NULL, false, false)); /* inside the region: not autocast */
    musa_tensor *g = musa_tensor_grad(w);
    CHECK(g && musa_tensor_dtype(g) == MUSA_DTYPE_FLOAT32);
    CHECK_ERR(musa_autocast_set(true, MUSA_DTYPE_FLOAT64) == MUSA_OK, MUSA_ERR_VALUE,
              "[autocast] dtype must be bfloat16 or float16 on the CPU, got float64");
    CHECK(musa_autocast_enabled()); /* a refused setting changes nothing */
    /* a parameter updated in place between uses: each use sees its new
     * value, and the cache keeps one cast of it, not one per version */
    size_t held = 0;
    for (int it = 0; it < 20; it++) {
        bool prev = musa_set_grad_enabled(false);
        musa_tensor *one = musa_ones(0, NULL, MUSA_DTYPE_FLOAT32);
        CHECK_OK(musa_add_(w, one));
        musa_set_grad_enabled(prev);
        musa_tensor *ci = musa_matmul(a, w);
        CHECK(ci && musa_tensor_dtype(ci) == MUSA_DTYPE_BFLOAT16);
        release_all(2, one, ci);
        musa_alloc_stats st;
        musa_alloc_get_stats(&st);
        if (it == 1) held = st.current_bytes;
        if (it > 1) CHECK(st.current_bytes == held);
    }
    CHECK_OK(musa_autocast_set(false, MUSA_DTYPE_BFLOAT16));
    musa_autocast_clear_cache();
    musa_tensor *c2 = musa_matmul(a, w);
    CHECK(c2 && musa_tensor_dtype(c2) == MUSA_DTYPE_FLOAT32);
    release_all(8, a, w, c, s, r, l, g, c2);
}

TEST(accumulation_and_shared_inputs) {
    musa_tensor *x = leaf(2);
    musa_tensor *y = musa_mul(x, x); /* x used twice: 2x */
    musa_tensor *z = musa_add(y, x); /* + 1 */
    CHECK_OK(musa_backward(1, &z, NULL, true, false));
    CHECK(grad_of(x) == 5);
    CHECK_OK(musa_backward(1, &z, NULL, false, false)); /* retained: accumulates */
    CHECK(grad_of(x) == 10);
    CHECK_ERR(musa_backward(1, &z, NULL, false, false) == MUSA_OK, MUSA_ERR_RUNTIME,
              "[mul] trying to backward through the graph a second time");
    release_all(3, x, y, z);
}

TEST(inplace_after_save_is_detected) {
    musa_tensor *x = leaf(1), *y = leaf(2);
    musa_tensor *a = musa_add(x, y); /* non-leaf */
    musa_tensor *z = musa_mul(a, y);
    musa_tensor *one = musa_number(1);
    CHECK_OK(musa_add_(a, one)); /* a was saved by mul */
    CHECK_ERR(musa_backward(1, &z, NULL, false, false) == MUSA_OK, MUSA_ERR_RUNTIME,
              "[mul] a tensor saved for backward was modified in place: version 1, expected 0");
    /* in place on a leaf that requires grad is refused before writing */
    CHECK_ERR(musa_add_(x, one) == MUSA_OK, MUSA_ERR_RUNTIME, "a leaf tensor that requires grad");
    double v;
    musa_tensor_item(x, &v);
    CHECK(v == 1);
    /* ... but allowed under no_grad */
    bool prev = musa_set_grad_enabled(false);
    CHECK_OK(musa_add_(x, one));
    musa_set_grad_enabled(prev);
    release_all(5, x, y, a, z, one);
}

TEST(inplace_ops_record_history) {
    musa_tensor *x = leaf(3);
    musa_tensor *a = musa_mul(x, x); /* 9, d/dx = 6 */
    musa_tensor *b = leaf(2);
    CHECK_OK(musa_mul_(a, b)); /* a = 2x^2: the mul formula needs a's old value */
    CHECK(!strcmp(musa_node_name(musa_tensor_grad_fn(a)), "MulBackward"));
    CHECK_OK(musa_backward(1, &a, NULL, false, false));
    CHECK(grad_of(x) == 12 && grad_of(b) == 9);
    release_all(3, x, a, b);
}

static void check_grad_values(const char *what, musa_tensor *t, const double *want, int n) {
    musa_tensor *g = musa_tensor_grad(t);
    CHECK_MSG(g, "%s: no gradient", what);
    double *v = values(g);
    CHECK_CLOSE(what, MUSA_DTYPE_FLOAT32, v, want, n);
    free(v);
    musa_tensor_release(g);
}

TEST(inplace_writes_into_views) {
    float ones[3] = {1, 1, 1};
    musa_tensor *x = musa_from_data(ones, 1, (int64_t[]){3}, MUSA_DTYPE_FLOAT32);
    musa_tensor_set_requires_grad(x, true);
    musa_tensor *one = musa_number(1), *zero = musa_number(0);
    /* y = 1 * x; y[0:1] *= 0: the base's history moves on */
    musa_tensor *y = musa_mul(x, one), *v = musa_slice(y, 0, 0, 1, 1);
    CHECK_OK(musa_mul_(v, zero));
    musa_tensor *s = musa_sum(y, 0, NULL, false);
    CHECK_OK(musa_backward(1, &s, NULL, false, false));
    check_grad_values("through the base", x, (double[]){0, 1, 1}, 3);
    release_all(3, y, v, s);
    /* a buffer that does not require grad, filled with rows that do */
    musa_tensor_set_grad(x, NULL);
    musa_tensor *buf = musa_zeros(2, (int64_t[]){2, 3}, MUSA_DTYPE_FLOAT32);
    for (int r = 0; r < 2; r++) {
        musa_tensor *row = musa_select(buf, 0, r), *k = musa_number(r + 2), *val = musa_mul(x, k);
        CHECK_OK(musa_copy_(row, val));
        release_all(3, row, k, val);
    }
    CHECK(musa_tensor_requires_grad(buf));
    s = musa_sum(buf, 0, NULL, false);
    CHECK_OK(musa_backward(1, &s, NULL, false, false));
    check_grad_values("rows copied in", x, (double[]){5, 5, 5}, 3);
    release_all(2, buf, s);
    /* a view taken before the write sees the new history */
    musa_tensor_set_grad(x, NULL);
    musa_tensor *z = musa_mul(x, one), *tail = musa_slice(z, 0, 1, 3, 1),
                *head = musa_select(z, 0, 0);
    CHECK_OK(musa_mul_(head, zero));
    musa_tensor *t1 = musa_sum(tail, 0, NULL, false), *t2 = musa_sum(z, 0, NULL, false),
                *tot = musa_add(t1, t2);
    CHECK_OK(musa_backward(1, &tot, NULL, false, false));
    check_grad_values("old view", x, (double[]){0, 2, 2}, 3);
    release_all(6, z, tail, head, t1, t2, tot);
    /* writing into a view of a leaf that requires grad is refused */
    musa_tensor *lv = musa_slice(x, 0, 0, 1, 1);
    CHECK_ERR(musa_mul_(lv, zero) == MUSA_OK, MUSA_ERR_RUNTIME,
              "a view of a leaf tensor that requires grad");
    release_all(4, lv, x, one, zero);
}

TEST(grad_api_and_allow_unused) {
    musa_tensor *x = leaf(2), *y = leaf(5), *u = leaf(7);
    musa_tensor *z = musa_mul(musa_tensor_retain(x) ? x : NULL, y);
    musa_tensor_release(x);
    musa_tensor *res[3];
    musa_tensor *ins[3] = {x, y, u};
    CHECK_ERR(musa_grad(1, &z, NULL, 3, ins, true, false, false, res) == MUSA_OK, MUSA_ERR_RUNTIME,
              "input 2 was not used");
    CHECK_OK(musa_grad(1, &z, NULL, 3, ins, true, false, true, res));
    double a, b;
    musa_tensor_item(res[0], &a), musa_tensor_item(res[1], &b);
    CHECK(a == 5 && b == 2 && res[2] == NULL);
    CHECK(musa_tensor_grad(x) == NULL); /* grad() does not accumulate */
    release_all(2, res[0], res[1]);
    /* a non-scalar root needs its gradient */
    musa_tensor *v = musa_expand(x, 1, (int64_t[]){3});
    CHECK_ERR(musa_backward(1, &v, NULL, false, false) == MUSA_OK, MUSA_ERR_RUNTIME,
              "grad can be implicitly created only for outputs with one element");
    musa_tensor *c = musa_zeros(1, (int64_t[]){1}, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(musa_backward(1, &c, NULL, false, false) == MUSA_OK, MUSA_ERR_RUNTIME,
              "does not require grad");
    release_all(6, x, y, u, z, v, c);
}

TEST(requires_grad_rules) {
    musa_tensor *i = musa_zeros(1, (int64_t[]){2}, MUSA_DTYPE_INT64);
    CHECK_ERR(musa_tensor_set_requires_grad(i, true) == MUSA_OK, MUSA_ERR_RUNTIME,
              "only floating point tensors can require gradients");
    musa_tensor *x = leaf(1), *y = musa_exp(x);
    CHECK_ERR(musa_tensor_set_requires_grad(y, false) == MUSA_OK, MUSA_ERR_RUNTIME, "leaf");
    CHECK(musa_tensor_is_leaf(x) && !musa_tensor_is_leaf(y));
    musa_tensor *d = musa_detach(y);
    CHECK(d && !musa_tensor_requires_grad(d) && musa_tensor_shares_storage(d, y));
    bool prev = musa_set_grad_enabled(false);
    musa_tensor *n = musa_exp(x);
    CHECK(!musa_tensor_requires_grad(n) && !musa_is_grad_enabled());
    musa_set_grad_enabled(prev);
    /* integer outputs of differentiable-input ops do not require grad */
    musa_tensor *v = NULL, *ix = NULL;
    CHECK_OK(musa_max_dim(y, 0, false, &v, &ix));
    CHECK(musa_tensor_requires_grad(v) && !musa_tensor_requires_grad(ix));
    release_all(7, i, x, y, d, n, v, ix);
}

static int double_it(void *ctx, musa_tensor *g, musa_tensor **rep) {
    (*(int *)ctx)++;
    musa_tensor *two = musa_number(2);
    *rep = musa_mul(g, two);
    musa_tensor_release(two);
    return *rep ? MUSA_OK : musa_last_error_code();
}

TEST(hooks_and_retain_grad) {
    int calls = 0;
    musa_tensor *x = leaf(3);
    musa_tensor *h = musa_mul(x, x); /* non-leaf */
    CHECK(musa_tensor_register_hook(h, double_it, &calls, NULL) >= 0);
    int id = musa_tensor_register_hook(x, double_it, &calls, NULL);
    CHECK(id >= 0);
    CHECK_OK(musa_tensor_retain_grad(h));
    musa_tensor *z = musa_mul(h, x); /* x^3 */
    CHECK_OK(musa_backward(1, &z, NULL, false, false));
    /* dz/dh = x = 3, doubled by h's hook = 6; then dh/dx = 2x: 36; plus h = 9
     * directly; x's hook doubles the sum: (36 + 9) * 2 = 90 */
    CHECK(calls == 2);
    CHECK_MSG(grad_of(x) == 90, "x.grad = %g", grad_of(x));
    CHECK(grad_of(h) == 6);
    CHECK_OK(musa_tensor_remove_hook(x, id));
    CHECK_ERR(musa_tensor_remove_hook(x, id) == MUSA_OK, MUSA_ERR_VALUE, "no such hook");
    release_all(3, x, h, z);
}

TEST(higher_order) {
    musa_tensor *x = leaf(2);
    musa_tensor *x2 = musa_mul(x, x), *y = musa_mul(x2, x); /* x^3 */
    musa_tensor *g1 = NULL, *g2 = NULL, *g3 = NULL;
    CHECK_OK(musa_grad(1, &y, NULL, 1, &x, true, true, false, &g1));  /* 3x^2 = 12 */
    CHECK_OK(musa_grad(1, &g1, NULL, 1, &x, true, true, false, &g2)); /* 6x = 12 */
    CHECK_OK(musa_grad(1, &g2, NULL, 1, &x, true, true, false, &g3)); /* 6 */
    double a, b, c;
    musa_tensor_item(g1, &a), musa_tensor_item(g2, &b), musa_tensor_item(g3, &c);
    CHECK(a == 12 && b == 12 && c == 6);
    /* through saved outputs (exp keeps its output): d2/dx2 exp(x) = exp(x) */
    musa_tensor *e = musa_exp(x), *ge = NULL, *gge = NULL;
    CHECK_OK(musa_grad(1, &e, NULL, 1, &x, true, true, false, &ge));
    CHECK_OK(musa_grad(1, &ge, NULL, 1, &x, false, false, false, &gge));
    double v;
    musa_tensor_item(gge, &v);
    CHECK_NEAR(v, exp(2.0), 1e-5);
    release_all(9, x, x2, y, g1, g2, g3, e, ge, gge);
}

TEST(anomaly_mode_names_the_forward_op) {
    musa_set_anomaly_enabled(true, false);
    musa_set_anomaly_location("model.py", 42);
    musa_tensor *x = leaf(0);
    musa_tensor *s = musa_sqrt(x); /* d/dx sqrt at 0 = inf */
    musa_set_anomaly_location(NULL, 0);
    CHECK_ERR(musa_backward(1, &s, NULL, false, false) == MUSA_OK, MUSA_ERR_RUNTIME,
              "[anomaly] SqrtBackward returned NaN or inf in the gradient of input 0; the forward "
              "op was sqrt at model.py:42");
    /* forward NaN detection */
    musa_set_anomaly_enabled(true, true);
    musa_tensor *m = leaf(-1);
    CHECK_ERR(FAILS(musa_log(m)), MUSA_ERR_RUNTIME, "[anomaly] log produced NaN in its output");
    musa_set_anomaly_enabled(false, false);
    musa_tensor *l = musa_log(m); /* off again: NaN is just a value */
    CHECK(l != NULL);
    release_all(4, x, s, m, l);
}

typedef struct {
    int calls;
} sq_ctx;

/* y = x^2 computed outside the op table, gradient 2 x g */
static int square_backward(void *ctx, int n_out, musa_tensor *const *gout, int n_in,
                           musa_tensor **gin) {
    (void)n_out, (void)n_in;
    sq_ctx *c = ctx;
    c->calls++;
    musa_tensor *x = c ? NULL : NULL;
    (void)x;
    musa_tensor *two = musa_number(2);
    gin[0] = musa_mul(gout[0], two);
    musa_tensor_release(two);
    return gin[0] ? MUSA_OK : musa_last_error_code();
}

TEST(custom_nodes) {
    sq_ctx c = {0};
    musa_tensor *x = leaf(4);
    bool prev = musa_set_grad_enabled(false);
    musa_tensor *y = musa_mul(x, x);
    musa_set_grad_enabled(prev);
    CHECK_OK(musa_custom_node("TwiceBackward", 1, &x, 1, &y, square_backward, &c, NULL));
    CHECK(!strcmp(musa_node_name(musa_tensor_grad_fn(y)), "TwiceBackward"));
    int nr = -1;
    musa_node *next = musa_node_next(musa_tensor_grad_fn(y), 0, &nr);
    CHECK(next && !strcmp(musa_node_name(next), "AccumulateGrad") && musa_node_variable(next) == x);
    CHECK_OK(musa_backward(1, &y, NULL, false, false));
    CHECK(c.calls == 1 && grad_of(x) == 2);
    release_all(2, x, y);
}

TEST(deep_chain_backward_and_free) {
    /* a chain of 1,000,000 ops: neither backward nor freeing may recurse */
    musa_tensor *x = leaf(0), *c = musa_number(1);
    musa_tensor *y = musa_tensor_retain(x);
    const int n = 1000000;
    for (int i = 0; i < n; i++) {
        musa_tensor *next = musa_add(y, c);
        musa_tensor_release(y);
        y = next;
        if (!y) break;
    }
    CHECK(y != NULL);
    CHECK_OK(musa_backward(1, &y, NULL, false, false));
    CHECK(grad_of(x) == 1);
    musa_tensor_release(y); /* frees the million nodes */
    release_all(2, x, c);
}

TEST(graph_freed_without_leaks) {
    /* ASan's leak checker runs this binary: nodes must die with their tensors */
    for (int k = 0; k < 100; k++) {
        musa_tensor *x = leaf(1.5);
        musa_tensor *a = musa_exp(x), *b = musa_mul(a, x), *s = musa_sum(b, 0, NULL, false);
        if (k % 2) CHECK_OK(musa_backward(1, &s, NULL, k % 4 == 1, false));
        release_all(4, x, a, b, s);
    }
}

/* Bytes of tensor storage alive now (the allocator's count). */
static size_t live_bytes(void) {
    musa_alloc_stats st;
    musa_alloc_get_stats(&st);
    return st.current_bytes;
}

/* Regression (fuzz_op_call, autograd-inplace-empty-output-cycle): writing
 * in place into an empty tensor saved that very tensor for backward (an
 * empty tensor overlaps nothing, so the dispatcher did not clone it) and
 * then gave it the node as grad_fn: a cycle neither ever left. */
TEST(inplace_into_empty_tensor_makes_no_cycle) {
    size_t before = live_bytes();
    musa_tensor *x = musa_zeros(2, (int64_t[]){3, 0}, MUSA_DTYPE_FLOAT64);
    musa_tensor *y = leaf(2);
    musa_tensor *out[1] = {x};
    CHECK_OK(musa_op_call(musa_op_lookup("pow"), 2, (musa_tensor *[]){x, y}, NULL, out));
    CHECK(musa_tensor_grad_fn(x) != NULL);
    release_all(2, x, y);
    CHECK_MSG(live_bytes() == before, "%zu bytes still held", live_bytes() - before);
}

/* Regression (fuzz_op_call, autograd-leaf-view-of-base-cycle): a view that
 * was made a leaf requiring grad kept its base (which does not require
 * grad) as view_base. A value computed from the leaf and written into
 * another view of the base gave the base a history leading back to the
 * leaf, and the leaf held the base: a cycle. The leaf is now its own root. */
TEST(leaf_view_of_a_plain_base_makes_no_cycle) {
    size_t before = live_bytes();
    musa_tensor *b = musa_ones(2, (int64_t[]){2, 2}, MUSA_DTYPE_FLOAT32);
    musa_tensor *t = musa_transpose(b, 0, 1); /* a view of b, taken first */
    musa_tensor *v = musa_permute(b, 2, (int64_t[]){0, 1});
    CHECK_OK(musa_tensor_set_requires_grad(v, true));
    musa_tensor *out[1] = {t};
    CHECK_OK(musa_op_call(musa_op_lookup("cos"), 1, &v, NULL, out));
    CHECK(musa_tensor_requires_grad(b));
    musa_tensor *s = musa_sum(b, 0, NULL, false);
    CHECK_OK(musa_backward(1, &s, NULL, false, false));
    check_grad_values("through the base", v, (double[]){-sin(1.0), -sin(1.0), -sin(1.0), -sin(1.0)},
                      4);
    /* views of the leaf now have it as their base: writing into them is refused */
    musa_tensor *w = musa_transpose(v, 0, 1);
    out[0] = w;
    CHECK_ERR(musa_op_call(musa_op_lookup("cos"), 1, &v, NULL, out) == MUSA_OK, MUSA_ERR_RUNTIME,
              "a view of a leaf tensor that requires grad");
    musa_tensor_set_grad(v, NULL);
    release_all(5, b, t, v, s, w);
    CHECK_MSG(live_bytes() == before, "%zu bytes still held", live_bytes() - before);
}

TEST(training_mlp_on_digits) {
    static digits_data d;
    CHECK(digits_load("data/digits.csv.gz", &d) == 0);
    mlp_result r;
    CHECK(mlp_train(&d, 20, 0, &r) == 0);
    printf("  held-out accuracy %.3f, final train loss %.4f\n", r.test_accuracy, r.train_loss);
    CHECK_MSG(r.test_accuracy >= 0.90, "accuracy %.3f", r.test_accuracy);
}

/* Regression (fuzz_op_call, slice-backward-huge-step): the backward of a
 * slice with step 2^31 built a (len, step) interleave of zeros even for one
 * element; it failed to allocate and the formula dereferenced the NULL. */
TEST(slice_backward_with_a_huge_step) {
    musa_tensor *x = musa_arange(0, 16, 1, MUSA_DTYPE_FLOAT64);
    CHECK_OK(musa_tensor_set_requires_grad(x, true));
    musa_tensor *y = musa_slice(x, 0, -1, INT64_MAX, (int64_t)1 << 40);
    CHECK(y && musa_tensor_numel(y) == 1);
    musa_tensor *s = musa_sum(y, 0, NULL, false);
    CHECK_OK(musa_backward(1, &s, NULL, false, false));
    double want[16] = {0};
    want[15] = 1;
    musa_tensor *g = musa_tensor_grad(x);
    double *gv = values(g);
    CHECK(gv);
    CHECK_CLOSE("slice grad", MUSA_DTYPE_FLOAT64, gv, want, 16);
    free(gv);
    release_all(4, x, y, s, g);
}
