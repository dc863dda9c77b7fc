/* Graph nodes hold their attribute records out of line (graph.h): sized to
 * the op's kind, NULL for ops without attributes, and private to a probe's
 * copy of a node. A plan's kernel calls of one op on equal shapes share one
 * list of views (plan/lower.c). */
#include <string.h>

#include "harness.h"
#include "jit/graph.h"
#include "jit/plan.h"
#include "jit/plan/internal.h"
#include "util.h"

/* A graph with input x (1, 2, 8, 8) float32. */
static musa_graph *image_graph(int32_t *x) {
    musa_graph *g = musa_graph_new();
    int64_t sh[4] = {1, 2, 8, 8};
    *x = g ? musa_graph_new_value(g, MUSA_V_INPUT, MUSA_DTYPE_FLOAT32, 4, sh) : -1;
    return g;
}

TEST(node_records_are_sized_to_their_kind) {
    int32_t x;
    musa_graph *g = image_graph(&x);
    CHECK(g && x >= 0);
    int32_t r = musa_graph_add_node(g, MUSA_OP_relu, 1, &x, NULL, NULL);
    CHECK(r >= 0);
    CHECK(g->nodes.data[r].attrs == NULL);
    CHECK(musa_gnode_attrs_size(&g->nodes.data[r]) == 0);
    musa_attrs_pool pa;
    musa_attrs_init(MUSA_ATTRS_pool, &pa);
    pa.kernel.n = 1, pa.kernel.v[0] = 2;
    int32_t p = musa_graph_add_node(g, MUSA_OP_max_pool2d, 1, &x, &pa, NULL);
    CHECK(p >= 0);
    const musa_gnode *n = &g->nodes.data[p];
    CHECK(n->attrs != NULL && (const void *)n->attrs != (const void *)&pa);
    CHECK(musa_gnode_attrs_size(n) == sizeof(musa_attrs_pool));
    /* the inference normalised the node's own record: stride from kernel, pairs */
    CHECK(n->attrs->pool.stride.n == 2);
    CHECK(n->attrs->pool.stride.v[1] == 2);
    CHECK(pa.stride.n == 0);
    CHECK(g->values.data[n->out[0]].shape[3] == 4);
    /* a node is small: the record is not inline (it was 752 bytes) */
    CHECK(sizeof(musa_gnode) <= 80);
    musa_graph_free(g);
}

TEST(a_probe_copy_of_a_node_has_a_private_record) {
    int32_t x;
    musa_graph *g = image_graph(&x);
    CHECK(g && x >= 0);
    musa_attrs_pool pa;
    musa_attrs_init(MUSA_ATTRS_pool, &pa);
    pa.kernel.n = 2, pa.kernel.v[0] = pa.kernel.v[1] = 2;
    int32_t p = musa_graph_add_node(g, MUSA_OP_avg_pool2d, 1, &x, &pa, NULL);
    CHECK(p >= 0);
    musa_gnode copy = g->nodes.data[p];
    CHECK(copy.attrs == g->nodes.data[p].attrs); /* a struct copy shares it */
    musa_attrs_any own;
    musa_gnode_private_attrs(&copy, &own);
    CHECK(copy.attrs == &own);
    copy.attrs->pool.kernel.v[1] = 4; /* the probe edits its copy, then infers it */
    CHECK_OK(musa_graph_infer_into(g, &copy, NULL));
    CHECK(g->nodes.data[p].attrs->pool.kernel.v[1] == 2);
    CHECK(g->values.data[copy.out[0]].shape[3] == 3); /* (8 - 4) / 2 + 1 */
    CHECK_OK(musa_graph_infer_node(g, p));
    CHECK(g->values.data[copy.out[0]].shape[3] == 4);
    musa_graph_free(g);
}

TEST(a_node_whose_op_changes_gets_a_record_of_the_new_kind) {
    int32_t x;
    musa_graph *g = image_graph(&x);
    CHECK(g && x >= 0);
    int32_t r = musa_graph_add_node(g, MUSA_OP_relu, 1, &x, NULL, NULL);
    CHECK(r >= 0);
    musa_gnode *n = &g->nodes.data[r];
    n->op = MUSA_OP_sum;
    musa_attrs_reduce ra;
    musa_attrs_init(MUSA_ATTRS_reduce, &ra);
    ra.dims.n = 1, ra.dims.v[0] = -1;
    CHECK_OK(musa_graph_set_attrs(g, n, &ra));
    CHECK(musa_gnode_attrs_size(n) == sizeof(musa_attrs_reduce));
    CHECK_OK(musa_graph_infer_node(g, r));
    CHECK(g->values.data[n->out[0]].ndim == 3);
    CHECK_OK(musa_graph_set_attrs(g, n, NULL)); /* defaults: all dims */
    CHECK(n->attrs->reduce.dims.n == 0);
    musa_graph_free(g);
}

/* y = x; then y = y @ w five times, and once (y @ w2) with w2 of another
 * shape: the five products of equal shapes share one list of views, the
 * other has its own, and the plan computes what eager does (each call's
 * data pointers are its own, set on the stack at each run). */
TEST(kernel_calls_of_equal_shapes_share_their_views) {
    useed(11);
    int64_t xs[2] = {4, 8}, ws[2] = {8, 8}, w2s[2] = {8, 3};
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, xs, -1, 1, L_CONTIG);
    musa_tensor *w = rnd(MUSA_DTYPE_FLOAT32, 2, ws, -1, 1, L_CONTIG);
    musa_tensor *w2 = rnd(MUSA_DTYPE_FLOAT32, 2, w2s, -1, 1, L_CONTIG);
    musa_graph *g = musa_graph_new();
    CHECK(g);
    CHECK_OK(musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC));
    musa_tensor *in = musa_empty_meta(MUSA_DTYPE_FLOAT32, 2, xs);
    CHECK_OK(musa_graph_add_input(g, in, "x"));
    musa_tensor *y = musa_tensor_retain(in);
    for (int i = 0; i < 5; i++) {
        musa_tensor *t = musa_matmul(y, w);
        musa_tensor_release(y);
        y = t;
    }
    musa_tensor *z = musa_matmul(y, w2);
    CHECK(z);
    CHECK_OK(musa_graph_set_outputs(g, 1, &z));
    CHECK_OK(musa_graph_capture_end(g));
    musa_tensor_release(y), musa_tensor_release(z), musa_tensor_release(in);
    musa_plan *p = musa_plan_build(g, NULL);
    CHECK(p);
    const musa_kview *lists[8];
    int n = 0;
    for (int i = 0; i < p->n_instrs && n < 8; i++)
        if (p->instrs[i].kind == MUSA_INSTR_KERNEL && p->instrs[i].k.op == MUSA_OP_matmul)
            lists[n++] = p->instrs[i].k.kv;
    CHECK(n == 6);
    for (int i = 1; i < 5; i++) CHECK(lists[i] == lists[0]);
    CHECK(lists[5] != lists[0]);
    CHECK(lists[5][0].shape[1] == 3 && lists[0][0].shape[1] == 8);
    musa_tensor *ref = musa_tensor_retain(x);
    for (int i = 0; i < 5; i++) {
        musa_tensor *t = musa_matmul(ref, w);
        musa_tensor_release(ref);
        ref = t;
    }
    musa_tensor *ref2 = musa_matmul(ref, w2), *out = NULL, *out2 = NULL;
    CHECK_OK(musa_plan_run(p, 1, &x, 1, &out));
    CHECK(same_values(out, ref2));
    CHECK_OK(musa_plan_run(p, 1, &x, 1, &out2)); /* a second run: the same */
    CHECK(same_values(out2, ref2));
    CHECK(lists[0][0].data == NULL); /* runs never write the shared list */
    musa_tensor_release(out), musa_tensor_release(out2), musa_tensor_release(ref),
        musa_tensor_release(ref2);
    musa_plan_free(p);
    musa_graph_free(g);
    musa_tensor_release(x), musa_tensor_release(w), musa_tensor_release(w2);
}
