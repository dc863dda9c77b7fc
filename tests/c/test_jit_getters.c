/* Static graphs through the C getters: values, nodes and attributes, and
 * their errors for bad ids and wrong attribute types. */
#include "harness.h"
#include "jit/graph.h"
#include "util.h"

static const char *fake_location(void) {
    return "model.py:7";
}

/* The node of g running `op` (the first), or -1. */
static int find_node(const musa_graph *g, const char *op) {
    for (int i = 0; i < musa_graph_num_nodes(g); i++) {
        const char *name = musa_graph_node_op(g, i);
        if (name && !strcmp(name, op)) return i;
    }
    return -1;
}

/* sum(cast(slice(clamp(x, -1, 1), 1, 2, 10, 2), float64), dim 1, keepdim):
 * one attribute of every type. */
static musa_graph *capture_attr_chain(void) {
    int64_t xs[2] = {8, 12}, dim = 1;
    double lo = -1, hi = 1;
    musa_graph *g = musa_graph_new();
    musa_tensor *x = musa_empty_meta(MUSA_DTYPE_FLOAT32, 2, xs);
    musa_jit_set_location_hook(fake_location);
    musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC);
    musa_graph_add_input(g, x, "x");
    musa_temps t = {0};
    musa_tensor *c = musa_tmp(&t, musa_clamp(x, &lo, &hi));
    musa_tensor *s = musa_tmp(&t, musa_slice(c, 1, 2, 10, 2));
    musa_tensor *d = musa_tmp(&t, musa_cast(s, MUSA_DTYPE_FLOAT64));
    musa_tensor *y = musa_tmp(&t, musa_sum(d, 1, &dim, true));
    int rc = y ? musa_graph_set_outputs(g, 1, &y) : musa_last_error_code();
    int rc2 = musa_graph_capture_end(g);
    musa_jit_set_location_hook(NULL);
    musa_temps_release(&t);
    musa_tensor_release(x);
    if (rc || rc2) {
        musa_graph_free(g);
        return NULL;
    }
    return g;
}

TEST(graph_getters_describe_values_nodes_and_attributes) {
    musa_graph *g = capture_attr_chain();
    CHECK(g);
    int nclamp = find_node(g, "clamp"), nslice = find_node(g, "slice");
    int ncast = find_node(g, "cast"), nsum = find_node(g, "sum");
    CHECK(nclamp >= 0 && nslice >= 0 && ncast >= 0 && nsum >= 0);
    /* values: the input, and the sum's output */
    int x = musa_graph_input(g, 0), y = musa_graph_output(g, 0);
    int64_t dims[MUSA_MAX_DIMS];
    int syms[MUSA_MAX_DIMS];
    CHECK(musa_graph_value_dtype(g, x) == MUSA_DTYPE_FLOAT32);
    CHECK(musa_graph_value_shape(g, x, dims, syms) == 2 && dims[0] == 8 && dims[1] == 12);
    CHECK(syms[0] == -1 && syms[1] == -1);
    CHECK(musa_graph_value_name(g, x) && !strcmp(musa_graph_value_name(g, x), "x"));
    CHECK(musa_graph_value_dtype(g, y) == MUSA_DTYPE_FLOAT64);
    CHECK(musa_graph_value_shape(g, y, dims, NULL) == 2 && dims[0] == 8 && dims[1] == 1);
    CHECK(musa_graph_value_shape(g, y, NULL, NULL) == 2);
    musa_clear_error();
    CHECK(musa_graph_value_name(g, y) == NULL && musa_last_error_code() == MUSA_OK);
    /* nodes: inputs, outputs, location */
    CHECK(musa_graph_node_num_inputs(g, nclamp) == 1 && musa_graph_node_input(g, nclamp, 0) == x);
    CHECK(musa_graph_node_num_outputs(g, nsum) == 1 && musa_graph_node_output(g, nsum, 0) == y);
    CHECK(musa_graph_node_input(g, nsum, 0) == musa_graph_node_output(g, ncast, 0));
    CHECK(musa_graph_node_loc(g, nsum) && !strcmp(musa_graph_node_loc(g, nsum), "model.py:7"));
    /* attributes: names and types in record order, then typed values */
    const char *name = NULL;
    int type = -1;
    CHECK(musa_graph_node_attr_count(g, nsum) == 2);
    CHECK_OK(musa_graph_node_attr(g, nsum, 0, &name, &type));
    CHECK(!strcmp(name, "dims") && type == MUSA_ATTR_TYPE_INTS);
    CHECK_OK(musa_graph_node_attr(g, nsum, 1, &name, &type));
    CHECK(!strcmp(name, "keepdim") && type == MUSA_ATTR_TYPE_BOOL);
    int64_t v[MUSA_MAX_ATTR_INTS], i64 = 0;
    int n = 0;
    bool b = false;
    double f = 0;
    musa_dtype dt = MUSA_DTYPE_BOOL;
    CHECK_OK(musa_graph_node_attr_ints(g, nsum, "dims", v, &n));
    CHECK(n == 1 && v[0] == 1);
    CHECK_OK(musa_graph_node_attr_bool(g, nsum, "keepdim", &b));
    CHECK(b);
    CHECK_OK(musa_graph_node_attr_int(g, nslice, "start", &i64));
    CHECK(i64 == 2);
    CHECK_OK(musa_graph_node_attr_int(g, nslice, "step", &i64));
    CHECK(i64 == 2);
    CHECK_OK(musa_graph_node_attr_float(g, nclamp, "min", &f));
    CHECK(f == -1);
    CHECK_OK(musa_graph_node_attr_dtype(g, ncast, "dtype", &dt));
    CHECK(dt == MUSA_DTYPE_FLOAT64);
    CHECK_OK(musa_graph_node_attr_int(g, nslice, "end", NULL)); /* a check only */
    /* symbols */
    CHECK(musa_graph_num_symbols(g) == 0);
    int s0 = musa_graph_add_symbol(g, "s0", 1, 64, 8);
    CHECK(s0 == 0 && musa_graph_num_symbols(g) == 1);
    CHECK_OK(musa_graph_set_symbolic(g, x, 0, s0));
    CHECK(musa_graph_value_shape(g, x, dims, syms) == 2 && syms[0] == s0 && syms[1] == -1);
    int64_t lo = 0, hi = 0, traced = 0;
    CHECK_OK(musa_graph_symbol(g, s0, &name, &lo, &hi, &traced));
    CHECK(!strcmp(name, "s0") && lo == 1 && hi == 64 && traced == 8);
    CHECK_OK(musa_graph_symbol(g, s0, NULL, NULL, NULL, NULL));
    musa_graph_free(g);
}

TEST(graph_getters_refuse_bad_ids_and_wrong_attribute_types) {
    musa_graph *g = capture_attr_chain();
    CHECK(g);
    int nsum = find_node(g, "sum"), nv = musa_graph_num_values(g), nn = musa_graph_num_nodes(g);
    int64_t dims[MUSA_MAX_DIMS], i64 = 42;
    /* values out of range, and no graph */
    CHECK_ERR(musa_graph_value_dtype(g, -1) >= 0, MUSA_ERR_INDEX, "no value %-1");
    CHECK_ERR(musa_graph_value_dtype(g, nv) >= 0, MUSA_ERR_INDEX, "[graph_value_dtype]");
    CHECK_ERR(musa_graph_value_shape(g, nv, dims, NULL) >= 0, MUSA_ERR_INDEX, "graph has no value");
    CHECK_ERR(musa_graph_value_shape(NULL, 0, dims, NULL) >= 0, MUSA_ERR_VALUE, "NULL");
    CHECK_ERR(musa_graph_value_name(g, -5) != NULL, MUSA_ERR_INDEX, "no value %-5");
    CHECK_ERR(musa_graph_symbol(g, 0, NULL, NULL, NULL, NULL) == MUSA_OK, MUSA_ERR_INDEX,
              "no symbol 0");
    CHECK_ERR(musa_graph_symbol(NULL, 0, NULL, NULL, NULL, NULL) == MUSA_OK, MUSA_ERR_VALUE,
              "NULL");
    CHECK(musa_graph_num_symbols(NULL) == 0);
    /* nodes, inputs and outputs out of range */
    CHECK_ERR(musa_graph_node_num_inputs(g, -1) >= 0, MUSA_ERR_INDEX, "no node -1");
    CHECK_ERR(musa_graph_node_num_outputs(g, nn) >= 0, MUSA_ERR_INDEX, "no node");
    CHECK_ERR(musa_graph_node_input(g, nsum, 1) >= 0, MUSA_ERR_INDEX, "(sum) has no input 1");
    CHECK_ERR(musa_graph_node_output(g, nsum, -1) >= 0, MUSA_ERR_INDEX, "has no output -1");
    CHECK_ERR(musa_graph_node_loc(g, nn) != NULL, MUSA_ERR_INDEX, "no node");
    CHECK_ERR(musa_graph_node_attr_count(NULL, 0) >= 0, MUSA_ERR_VALUE, "NULL");
    CHECK_ERR(musa_graph_node_attr(g, nsum, 2, NULL, NULL) == MUSA_OK, MUSA_ERR_INDEX,
              "has no attribute 2");
    /* attributes: missing, of another type, or of an op without attributes */
    CHECK_ERR(musa_graph_node_attr_int(g, nsum, "dims", &i64) == MUSA_OK, MUSA_ERR_TYPE,
              "attribute 'dims' of node");
    CHECK_ERR(musa_graph_node_attr_int(g, nsum, "dims", &i64) == MUSA_OK, MUSA_ERR_TYPE,
              "(sum) is ints, not int");
    CHECK(i64 == 42); /* left alone */
    CHECK_ERR(musa_graph_node_attr_float(g, nsum, "keepdim", NULL) == MUSA_OK, MUSA_ERR_TYPE,
              "is bool, not float");
    CHECK_ERR(musa_graph_node_attr_bool(g, nsum, "nope", NULL) == MUSA_OK, MUSA_ERR_VALUE,
              "(sum) has no attribute 'nope'");
    CHECK_ERR(musa_graph_node_attr_ints(g, nsum, NULL, NULL, NULL) == MUSA_OK, MUSA_ERR_VALUE,
              "attribute name is NULL");
    CHECK_ERR(musa_graph_node_attr_dtype(g, nn + 3, "dtype", NULL) == MUSA_OK, MUSA_ERR_INDEX,
              "no node");
    /* a node a pass removed answers as no node */
    g->nodes.data[nsum].dead = true;
    CHECK(musa_graph_node_op(g, nsum) == NULL);
    CHECK_ERR(musa_graph_node_num_inputs(g, nsum) >= 0, MUSA_ERR_INDEX, "removed by a pass");
    CHECK_ERR(musa_graph_node_attr_ints(g, nsum, "dims", NULL, NULL) == MUSA_OK, MUSA_ERR_INDEX,
              "removed by a pass");
    g->nodes.data[nsum].dead = false;
    /* an op without attributes has none (not its record's placeholder) */
    int64_t xs[1] = {4};
    musa_graph *g2 = musa_graph_new();
    musa_tensor *m = musa_empty_meta(MUSA_DTYPE_FLOAT32, 1, xs);
    CHECK_OK(musa_graph_capture_begin(g2, MUSA_CAPTURE_SYMBOLIC));
    CHECK_OK(musa_graph_add_input(g2, m, NULL));
    musa_tensor *r = musa_relu(m);
    CHECK_OK(musa_graph_set_outputs(g2, 1, &r));
    CHECK_OK(musa_graph_capture_end(g2));
    int nrelu = find_node(g2, "relu");
    CHECK(nrelu >= 0 && musa_graph_node_attr_count(g2, nrelu) == 0);
    CHECK_ERR(musa_graph_node_attr_bool(g2, nrelu, "unused_", NULL) == MUSA_OK, MUSA_ERR_VALUE,
              "(relu) has no attribute 'unused_'");
    CHECK(musa_graph_value_name(g2, musa_graph_input(g2, 0)) == NULL);
    musa_tensor_release(r), musa_tensor_release(m);
    musa_graph_free(g2);
    musa_graph_free(g);
}
