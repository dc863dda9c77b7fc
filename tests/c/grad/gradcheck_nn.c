/*
 * gradcheck_nn.c - gradcheck (and gradgradcheck) rows for the neural
 * network ops, in float64, with groups, strides, padding and dilation.
 */
#include "gradcheck.h"

#define GC(fn, n, gg, ...)                                                                         \
    do {                                                                                           \
        musa_tensor *ins_[] = {__VA_ARGS__};                                                       \
        if (!check_grads(#fn, fn, n, ins_, gg)) return;                                            \
    } while (0)

static musa_tensor *f_conv(musa_tensor *const *in) {
    return musa_conv2d(in[0], in[1], in[2], S(2, 1), S(1, 0), S(1, 2), 2);
}
static musa_tensor *f_conv_1x1(musa_tensor *const *in) {
    return musa_conv2d(in[0], in[1], NULL, NULL, NULL, NULL, 1);
}
TEST(grad_conv2d) {
    GC(f_conv, 3, true, in64(4, S(2, 4, 5, 5), -1, 1, L_CONTIG),
       in64(4, S(4, 2, 2, 2), -1, 1, L_CONTIG), in64(1, S(4), -1, 1, L_CONTIG));
    GC(f_conv_1x1, 2, true, in64(4, S(1, 3, 2, 3), -1, 1, L_TRANSPOSED),
       in64(4, S(2, 3, 1, 1), -1, 1, L_CONTIG));
}

static musa_tensor *conv_bwd(const char *op, musa_tensor *a, musa_tensor *b, const int64_t *shape) {
    int id = musa_op_lookup(op);
    musa_attrs *at = musa_attrs_new(id);
    musa_attrs_set_ints(at, "stride", 2, S(2, 2));
    musa_attrs_set_ints(at, "padding", 2, S(1, 1));
    musa_attrs_set_ints(at, "shape", 4, shape);
    musa_tensor *in[2] = {a, b}, *out[1] = {NULL};
    musa_op_call(id, 2, in, at, out);
    musa_attrs_free(at);
    return out[0];
}
static musa_tensor *f_bwd_in(musa_tensor *const *in) {
    return conv_bwd("conv2d_backward_input", in[0], in[1], S(1, 2, 5, 5));
}
static musa_tensor *f_bwd_w(musa_tensor *const *in) {
    return conv_bwd("conv2d_backward_weight", in[0], in[1], S(3, 2, 3, 3));
}
TEST(grad_conv2d_backward_input) {
    GC(f_bwd_in, 2, true, in64(4, S(1, 3, 3, 3), -1, 1, L_CONTIG),
       in64(4, S(3, 2, 3, 3), -1, 1, L_CONTIG));
}
TEST(grad_conv2d_backward_weight) {
    GC(f_bwd_w, 2, true, in64(4, S(1, 2, 5, 5), -1, 1, L_CONTIG),
       in64(4, S(1, 3, 3, 3), -1, 1, L_CONTIG));
}

static musa_tensor *f_maxpool(musa_tensor *const *in) {
    musa_tensor *v = NULL;
    musa_max_pool2d(in[0], S(2, 2), S(1, 2), S(1, 0), NULL, false, &v, NULL);
    return v;
}
TEST(grad_max_pool2d) {
    GC(f_maxpool, 1, true, in64(4, S(1, 2, 4, 4), -3, 3, L_TRANSPOSED));
}

static musa_tensor *f_avgpool(musa_tensor *const *in) {
    return musa_avg_pool2d(in[0], S(3, 2), S(2, 1), S(1, 1), true, false);
}
TEST(grad_avg_pool2d) {
    GC(f_avgpool, 1, true, in64(4, S(1, 2, 5, 4), -1, 1, L_CONTIG));
}

static musa_tensor *f_avgpool_bwd(musa_tensor *const *in) {
    int id = musa_op_lookup("avg_pool2d_backward");
    musa_attrs *a = musa_attrs_new(id);
    musa_attrs_set_ints(a, "kernel", 2, S(2, 2));
    musa_attrs_set_ints(a, "shape", 3, S(2, 4, 5));
    musa_tensor *out[1] = {NULL};
    musa_op_call(id, 1, in, a, out);
    musa_attrs_free(a);
    return out[0];
}
TEST(grad_avg_pool2d_backward) {
    GC(f_avgpool_bwd, 1, true, in64(3, S(2, 2, 2), -1, 1, L_CONTIG));
}

static musa_tensor *f_adaptive(musa_tensor *const *in) {
    return musa_adaptive_avg_pool2d(in[0], 2, 3);
}
TEST(grad_adaptive_avg_pool2d) {
    GC(f_adaptive, 1, true, in64(4, S(1, 2, 5, 4), -1, 1, L_TRANSPOSED));
}

static musa_tensor *f_adaptive_bwd(musa_tensor *const *in) {
    int id = musa_op_lookup("adaptive_avg_pool2d_backward");
    musa_attrs *a = musa_attrs_new(id);
    musa_attrs_set_ints(a, "kernel", 2, S(2, 3));
    musa_attrs_set_ints(a, "shape", 3, S(1, 5, 4));
    musa_tensor *out[1] = {NULL};
    musa_op_call(id, 1, in, a, out);
    musa_attrs_free(a);
    return out[0];
}
TEST(grad_adaptive_avg_pool2d_backward) {
    GC(f_adaptive_bwd, 1, true, in64(3, S(1, 2, 3), -1, 1, L_CONTIG));
}

static musa_tensor *f_bn(musa_tensor *const *in) {
    return musa_batch_norm(in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5);
}
static musa_tensor *f_ln(musa_tensor *const *in) {
    return musa_layer_norm(in[0], 2, in[1], in[2], 1e-5);
}
static musa_tensor *f_gn(musa_tensor *const *in) {
    return musa_group_norm(in[0], 2, in[1], in[2], 1e-5);
}
TEST(grad_batch_norm) {
    GC(f_bn, 3, true, in64(3, S(3, 2, 2), -2, 2, L_TRANSPOSED), in64(1, S(2), 0.5, 2, L_CONTIG),
       in64(1, S(2), -1, 1, L_CONTIG));
}
TEST(grad_layer_norm) {
    GC(f_ln, 3, true, in64(3, S(2, 2, 3), -2, 2, L_CONTIG), in64(2, S(2, 3), 0.5, 2, L_CONTIG),
       in64(2, S(2, 3), -1, 1, L_CONTIG));
}
TEST(grad_group_norm) {
    GC(f_gn, 3, true, in64(3, S(2, 4, 2), -2, 2, L_CONTIG), in64(1, S(4), 0.5, 2, L_CONTIG),
       in64(1, S(4), -1, 1, L_CONTIG));
}

static musa_tensor *f_softmax(musa_tensor *const *in) {
    return musa_softmax(in[0], 0);
}
static musa_tensor *f_log_softmax(musa_tensor *const *in) {
    return musa_log_softmax(in[0], -1);
}
TEST(grad_softmax) {
    GC(f_softmax, 1, true, in64(2, S(3, 4), -2, 2, L_TRANSPOSED));
}
TEST(grad_log_softmax) {
    GC(f_log_softmax, 1, true, in64(2, S(3, 4), -2, 2, L_CONTIG));
}

static musa_tensor *f_xent(musa_tensor *const *in) {
    musa_tensor *t = from_list(MUSA_DTYPE_INT64, 1, S(4), (double[]){2, -100, 0, 2});
    musa_tensor *l = musa_cross_entropy(in[0], t, -100, 0.15, MUSA_REDUCTION_MEAN);
    musa_tensor_release(t);
    return l;
}
TEST(grad_cross_entropy) {
    GC(f_xent, 1, true, in64(2, S(4, 3), -2, 2, L_TRANSPOSED));
}

static musa_tensor *f_linear(musa_tensor *const *in) {
    return musa_linear(in[0], in[1], in[2]);
}
TEST(grad_linear) {
    GC(f_linear, 3, true, in64(3, S(2, 2, 3), -1, 1, L_CONTIG),
       in64(2, S(2, 3), -1, 1, L_TRANSPOSED), in64(1, S(2), -1, 1, L_CONTIG));
}

/* attention: the fused backward kernel (gradcheck) and the composition
 * create_graph takes (gradgradcheck), causal and with a bool mask */
static musa_tensor *f_attn_causal(musa_tensor *const *in) {
    return musa_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.7, true);
}
static musa_tensor *f_attn_mask(musa_tensor *const *in) {
    musa_tensor *m = from_list(MUSA_DTYPE_BOOL, 2, S(2, 3), (double[]){1, 0, 1, 0, 1, 1});
    musa_tensor *y = musa_scaled_dot_product_attention(in[0], in[1], in[2], m, 0.7, false);
    musa_tensor_release(m);
    return y;
}
TEST(grad_scaled_dot_product_attention) {
    GC(f_attn_causal, 3, true, in64(3, S(2, 3, 2), -1, 1, L_CONTIG),
       in64(3, S(2, 4, 2), -1, 1, L_TRANSPOSED), in64(3, S(2, 4, 3), -1, 1, L_CONTIG));
    GC(f_attn_mask, 3, true, in64(3, S(2, 2, 4), -1, 1, L_STRIDED),
       in64(3, S(2, 3, 4), -1, 1, L_CONTIG), in64(3, S(2, 3, 2), -1, 1, L_CONTIG));
}

/* resample along the middle dim, index with a repeat; x and weight both
 * take gradients */
static musa_tensor *f_resample(musa_tensor *const *in) {
    musa_tensor *i = from_list(MUSA_DTYPE_INT64, 2, S(3, 2), (double[]){0, 1, 3, 3, 2, 0});
    musa_tensor *r = musa_resample(in[0], 1, i, in[1]);
    musa_tensor_release(i);
    return r;
}
TEST(grad_resample) {
    GC(f_resample, 2, true, in64(3, S(2, 4, 3), -1, 1, L_TRANSPOSED),
       in64(2, S(3, 2), -1, 1, L_CONTIG));
}

static musa_tensor *f_resample_bwd(musa_tensor *const *in) {
    musa_tensor *i = from_list(MUSA_DTYPE_INT64, 2, S(3, 2), (double[]){0, 1, 3, 3, 2, 0});
    int id = musa_op_lookup("resample_backward");
    musa_attrs *a = musa_attrs_new(id);
    musa_attrs_set_int(a, "dim", -1);
    musa_attrs_set_int(a, "size", 5);
    musa_tensor *args[3] = {in[0], i, in[1]}, *out[1] = {NULL};
    musa_op_call(id, 3, args, a, out);
    musa_attrs_free(a);
    musa_tensor_release(i);
    return out[0];
}
TEST(grad_resample_backward) {
    GC(f_resample_bwd, 2, true, in64(2, S(2, 3), -1, 1, L_CONTIG),
       in64(2, S(3, 2), -1, 1, L_CONTIG));
}
