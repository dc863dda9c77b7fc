/* Graph nodes hold their attribute records out of line (graph.h): sized to
 * the op's kind, NULL for ops without attributes, and private to a probe's
 * copy of a node. */
#include <string.h>

#include "harness.h"
#include "jit/graph.h"

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
