/*
 * ops/custom.c - ops registered at run time (musa_op_register): eager
 * calls (the gradients: grad/custom.c), a missing backward, two outputs, symbolic
 * capture into a plan, saved models that name them (and a load that fails
 * naming an unregistered one), and every registration and callback error.
 */
#include <stdio.h>
#include <unistd.h>

#include "harness.h"
#include "io/crc32c.h"
#include "util.h"

TEST(op_custom) {
    CHECK(custom_cube3_op() >= 0);
    CHECK(musa_custom_op_find("test::cube3") == custom_cube3_op());
    CHECK(!strcmp(musa_custom_op_name(custom_cube3_op()), "test::cube3"));
    CHECK(musa_custom_op_find("test::nope") == -1 && musa_custom_op_name(9999) == NULL);
    int64_t shape[2] = {2, 3};
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, shape, -2, 2, L_CONTIG);
    /* a transposed input reaches the forward contiguous */
    musa_tensor *xt = musa_transpose(x, 0, 1);
    musa_tensor *y = custom_cube3(x), *yt = custom_cube3(xt);
    CHECK(y && yt);
    for (int i = 0; i < 6; i++) {
        float v = ((const float *)musa_tensor_data(x))[i];
        CHECK(((const float *)musa_tensor_data(y))[i] == v * v * 3);
    }
    musa_tensor *ytt = musa_transpose(y, 0, 1);
    CHECK(same_values(yt, ytt));
    /* an empty input */
    int64_t zero = 0;
    musa_tensor *e = musa_empty(1, &zero, MUSA_DTYPE_FLOAT32), *ye = custom_cube3(e);
    CHECK(ye && musa_tensor_numel(ye) == 0);
    musa_tensor_release(x), musa_tensor_release(xt), musa_tensor_release(y);
    musa_tensor_release(yt), musa_tensor_release(ytt), musa_tensor_release(e);
    musa_tensor_release(ye);
}

/* no backward: a backward pass through it fails naming it */
TEST(custom_op_without_backward_fails_in_backward_naming_it) {
    musa_custom_op def = {.name = "test::nograd",
                          .n_in = 1,
                          .n_out = 1,
                          .infer = custom_same_as_input,
                          .forward = custom_cube3_forward};
    int op = musa_op_register(&def);
    CHECK(op >= 0);
    int64_t n = 4;
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 1, &n, -1, 1, L_CONTIG), *y = NULL;
    musa_tensor_set_requires_grad(x, true);
    CHECK_OK(musa_custom_op_call(op, 1, &x, 1, &y));
    musa_tensor *s = musa_sum(y, 0, NULL, false);
    CHECK(musa_backward(1, &s, NULL, false, false) == MUSA_ERR_VALUE);
    CHECK_MSG(strstr(musa_last_error(), "test::nograd") &&
                  strstr(musa_last_error(), "has no backward function"),
              "%s", musa_last_error());
    musa_tensor_release(x), musa_tensor_release(y), musa_tensor_release(s);
}

/* two outputs: (max(x, 0), min(x, 0)) */
static int split_infer(void *u, int n_in, const musa_tensor *const *in, musa_dtype *dt, int *ndim,
                       int64_t (*shape)[MUSA_MAX_DIMS]) {
    for (int j = 0; j < 2; j++) {
        int rc = custom_same_as_input(u, n_in, in, dt + j, ndim + j, shape + j);
        if (rc) return rc;
    }
    return MUSA_OK;
}

static int split_forward(void *u, int n_in, musa_tensor *const *in, int n_out,
                         musa_tensor *const *out) {
    (void)u, (void)n_in, (void)n_out;
    const float *x = musa_tensor_data(in[0]);
    float *p = musa_tensor_data(out[0]), *m = musa_tensor_data(out[1]);
    for (int64_t i = 0; i < musa_tensor_numel(in[0]); i++)
        p[i] = x[i] > 0 ? x[i] : 0, m[i] = x[i] < 0 ? x[i] : 0;
    return MUSA_OK;
}

TEST(custom_op_with_two_outputs) {
    musa_custom_op def = {.name = "test::split_sign",
                          .n_in = 1,
                          .n_out = 2,
                          .infer = split_infer,
                          .forward = split_forward};
    int op = musa_op_register(&def);
    CHECK(op >= 0);
    int64_t n = 5;
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 1, &n, -1, 1, L_CONTIG), *y[2] = {NULL};
    CHECK_OK(musa_custom_op_call(op, 1, &x, 2, y));
    musa_tensor *sum = musa_add(y[0], y[1]);
    CHECK(same_values(sum, x));
    musa_tensor *one[1];
    CHECK(musa_custom_op_call(op, 1, &x, 1, one) == MUSA_ERR_VALUE);
    CHECK(strstr(musa_last_error(), "[test::split_sign] takes 1 inputs and 2 outputs"));
    musa_tensor_release(x), musa_tensor_release(y[0]), musa_tensor_release(y[1]);
    musa_tensor_release(sum);
}

/* f(x) = relu(custom_cube3(x * 2)) + 1, captured symbolically */
static musa_graph *capture_f(musa_tensor *x_real, musa_tensor **eager) {
    musa_graph *g = musa_graph_new();
    int64_t shape[2];
    memcpy(shape, musa_tensor_shape(x_real), sizeof shape);
    musa_tensor *x = musa_empty_meta(MUSA_DTYPE_FLOAT32, 2, shape);
    if (musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC) || musa_graph_add_input(g, x, "x"))
        return NULL;
    musa_tensor *two = musa_number(2), *one = musa_number(1);
    musa_tensor *a = musa_mul(x, two), *b = custom_cube3(a), *c = musa_relu(b),
                *y = musa_add(c, one);
    int rc = musa_graph_set_outputs(g, 1, &y);
    rc |= musa_graph_capture_end(g);
    musa_tensor_release(x), musa_tensor_release(a), musa_tensor_release(b);
    musa_tensor_release(c), musa_tensor_release(y);
    /* the same eagerly */
    a = musa_mul(x_real, two), b = custom_cube3(a), c = musa_relu(b);
    *eager = musa_add(c, one);
    musa_tensor_release(a), musa_tensor_release(b), musa_tensor_release(c);
    musa_tensor_release(two), musa_tensor_release(one);
    if (rc) musa_graph_free(g), g = NULL;
    return g;
}

TEST(custom_op_is_a_graph_node_in_plans_and_saved_models) {
    int64_t shape[2] = {4, 3};
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, shape, -1, 1, L_CONTIG), *eager = NULL;
    musa_graph *g = capture_f(x, &eager);
    CHECK(g && eager);
    char *text = g ? musa_graph_text(g) : NULL;
    CHECK_MSG(text && strstr(text, "custom[test::cube3](%"), "%s", text ? text : "NULL");
    free(text);
    char path[64];
    snprintf(path, sizeof path, "/tmp/musa_custom_%d.musa", (int)getpid());
    CHECK_OK(musa_model_save(g, path, NULL));
    musa_pass_ctx ctx = {.fusion_level = 2, .verify = true};
    CHECK_OK(musa_graph_optimize(g, &ctx));
    musa_plan *p = musa_plan_build(g, NULL);
    musa_tensor *out = NULL;
    CHECK(p && musa_plan_run(p, 1, &x, 1, &out) == MUSA_OK);
    CHECK(same_values(out, eager));
    musa_tensor_release(out);
    musa_plan_free(p);
    musa_graph_free(g);
    /* the saved model names the op and runs it */
    musa_model *m = musa_model_load(path, 0);
    CHECK(m != NULL);
    CHECK(m && strstr(musa_model_header(m), "\"name\": \"test::cube3\""));
    out = NULL;
    CHECK(m && musa_model_run(m, 1, &x, 1, &out) == MUSA_OK && same_values(out, eager));
    musa_tensor_release(out);
    musa_model_free(m);
    /* a file naming an op this process lacks: the load fails naming it */
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    static uint8_t buf[1 << 20];
    size_t len = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    uint8_t *at = NULL;
    for (size_t i = 0; i + 11 <= len && !at; i++)
        if (!memcmp(buf + i, "test::cube3", 11)) at = buf + i;
    CHECK(at != NULL);
    if (at) {
        memcpy(at, "test::cubeX", 11);
        /* the header's CRC (prelude bytes 40..44) and then the prelude's (48..52) */
        uint64_t hlen;
        memcpy(&hlen, buf + 16, 8);
        uint32_t hcrc = musa_crc32c(0, buf + 64, hlen);
        memcpy(buf + 40, &hcrc, 4);
        uint32_t pcrc = musa_crc32c(0, buf, 48);
        memcpy(buf + 48, &pcrc, 4);
        musa_model *bad = musa_model_load_memory(buf, len);
        CHECK(bad == NULL);
        CHECK_MSG(strstr(musa_last_error(), "custom op \"test::cubeX\" is not registered"), "%s",
                  musa_last_error());
        musa_model_free(bad);
    }
    remove(path);
    musa_tensor_release(x), musa_tensor_release(eager);
}

static int fail_infer(void *u, int n_in, const musa_tensor *const *in, musa_dtype *dt, int *ndim,
                      int64_t (*shape)[MUSA_MAX_DIMS]) {
    (void)u, (void)n_in, (void)in, (void)dt, (void)shape;
    ndim[0] = 99; /* a rank musa cannot hold */
    return MUSA_OK;
}

static int fail_forward(void *u, int n_in, musa_tensor *const *in, int n_out,
                        musa_tensor *const *out) {
    (void)u, (void)n_in, (void)in, (void)n_out, (void)out;
    return 7; /* no message set: musa names the op and the status */
}

TEST(custom_op_registration_and_callback_errors) {
    musa_custom_op ok = {.name = "test::e0",
                         .n_in = 1,
                         .n_out = 1,
                         .infer = custom_same_as_input,
                         .forward = custom_cube3_forward};
    musa_custom_op bad = ok;
    CHECK(musa_op_register(NULL) == MUSA_ERR_VALUE);
    bad.name = "has space";
    CHECK(musa_op_register(&bad) == MUSA_ERR_VALUE && strstr(musa_last_error(), "has space"));
    bad.name = "";
    CHECK(musa_op_register(&bad) == MUSA_ERR_VALUE);
    bad = ok, bad.n_out = 7;
    CHECK(musa_op_register(&bad) == MUSA_ERR_VALUE && strstr(musa_last_error(), "7 outputs"));
    bad = ok, bad.n_in = -1;
    CHECK(musa_op_register(&bad) == MUSA_ERR_VALUE);
    bad = ok, bad.forward = NULL;
    CHECK(musa_op_register(&bad) == MUSA_ERR_VALUE &&
          strstr(musa_last_error(), "needs an infer and a forward"));
    CHECK(musa_op_register(&ok) >= 0);
    CHECK(musa_op_register(&ok) == MUSA_ERR_VALUE &&
          strstr(musa_last_error(), "registered already"));
    int64_t n = 3;
    musa_tensor *x = musa_ones(1, &n, MUSA_DTYPE_INT64), *y = NULL;
    /* infer's own error, prefixed with the op's name */
    CHECK(musa_custom_op_call(musa_custom_op_find("test::e0"), 1, &x, 1, &y) == MUSA_ERR_TYPE);
    CHECK_MSG(strstr(musa_last_error(), "[test::e0] expects float32 or float64, got int64"), "%s",
              musa_last_error());
    musa_custom_op r = ok;
    r.name = "test::e1", r.infer = fail_infer;
    int e1 = musa_op_register(&r);
    musa_tensor *xf = musa_ones(1, &n, MUSA_DTYPE_FLOAT32);
    CHECK(musa_custom_op_call(e1, 1, &xf, 1, &y) == MUSA_ERR_VALUE);
    CHECK(strstr(musa_last_error(), "[test::e1] infer gave output 0 dtype"));
    r.name = "test::e2", r.infer = custom_same_as_input, r.forward = fail_forward;
    int e2 = musa_op_register(&r);
    CHECK(musa_custom_op_call(e2, 1, &xf, 1, &y) == MUSA_ERR_RUNTIME);
    CHECK(strstr(musa_last_error(), "[test::e2] forward failed (status 7)"));
    CHECK(musa_custom_op_call(12345, 1, &xf, 1, &y) == MUSA_ERR_VALUE);
    CHECK(strstr(musa_last_error(), "no custom op has index 12345"));
    /* the generic entry point with a bad index attribute */
    musa_attrs *a = musa_attrs_new(musa_op_lookup("custom"));
    CHECK(a != NULL);
    CHECK_OK(musa_attrs_set_int(a, "index", -5));
    musa_tensor *outs[6] = {NULL};
    CHECK(musa_op_call(musa_op_lookup("custom"), 1, &xf, a, outs) == MUSA_ERR_VALUE);
    musa_attrs_free(a);
    CHECK(y == NULL);
    musa_tensor_release(x), musa_tensor_release(xf);
}
