/*
 * nn.c - the neural network functions bound from the C API: convolutions,
 * pooling, normalisation, softmax, the losses and the activations with
 * options. musa.nn.functional wraps most of them (they are not exported to
 * the musa namespace: NN). Same conventions as ops.c.
 */
#include <math.h>
#include <string.h>

#include "pymusa.h"

#define FM (PM_FN | PM_METH)

/* ---- neural network functions ---- */

/* for musa.nn.functional, which wraps them: not in the musa namespace */
#define NN (PM_FN | PM_NOEXPORT)

static int reduction_of(PyObject *o, musa_reduction *r, const char *who) {
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (s && !strcmp(s, "mean"))
        *r = MUSA_REDUCTION_MEAN;
    else if (s && !strcmp(s, "sum"))
        *r = MUSA_REDUCTION_SUM;
    else if (s && !strcmp(s, "none"))
        *r = MUSA_REDUCTION_NONE;
    else {
        PyErr_Format(PyExc_ValueError, "[%s] reduction must be 'none', 'mean' or 'sum', got %R",
                     who, o);
        return -1;
    }
    return 0;
}

/* int or pair -> 2 values; errors read "[who] what must be ..." */
static int pair_of(pm_arg *x, int64_t dflt, int64_t out[2], const char *who, const char *what) {
    if (x->n < 0)
        out[0] = out[1] = dflt;
    else if (x->n == 1)
        out[0] = out[1] = x->v[0];
    else if (x->n == 2)
        out[0] = x->v[0], out[1] = x->v[1];
    else {
        PyErr_Format(PyExc_ValueError, "[%s] %s must be an int or a pair of ints, got %d values",
                     who, what, x->n);
        return -1;
    }
    return 0;
}

DEF(conv2d, NN, "input:T weight:T bias:T=None stride:I=1 padding:I=0 dilation:I=1 groups:i=1") {
    int64_t s[2], p[2], d[2];
    if (pair_of(&a[3], 1, s, who, "stride") || pair_of(&a[4], 0, p, who, "padding") ||
        pair_of(&a[5], 1, d, who, "dilation"))
        return NULL;
    return pm_ret(musa_conv2d(a[0].t, a[1].t, a[2].t, s, p, d, a[6].i));
}
DEF(conv1d, NN, "input:T weight:T bias:T=None stride:i=1 padding:i=0 dilation:i=1 groups:i=1") {
    return pm_ret(musa_conv1d(a[0].t, a[1].t, a[2].t, a[3].i, a[4].i, a[5].i, a[6].i));
}
DEF(conv_transpose2d, NN,
    "input:T weight:T bias:T=None stride:I=1 padding:I=0 output_padding:I=0 groups:i=1 "
    "dilation:I=1") {
    int64_t s[2], p[2], op[2], d[2];
    if (pair_of(&a[3], 1, s, who, "stride") || pair_of(&a[4], 0, p, who, "padding") ||
        pair_of(&a[5], 0, op, who, "output_padding") || pair_of(&a[7], 1, d, who, "dilation"))
        return NULL;
    return pm_ret(musa_conv_transpose2d(a[0].t, a[1].t, a[2].t, s, p, op, d, a[6].i));
}
DEF(max_pool2d, NN,
    "input:T kernel_size:I stride:I=None padding:I=0 dilation:I=1 ceil_mode:b=False "
    "return_indices:b=False") {
    int64_t k[2], s[2], p[2], d[2];
    if (a[1].n < 0) {
        PyErr_Format(PyExc_TypeError, "[%s] kernel_size is required", who);
        return NULL;
    }
    if (pair_of(&a[1], 1, k, who, "kernel_size") || pair_of(&a[3], 0, p, who, "padding") ||
        pair_of(&a[4], 1, d, who, "dilation"))
        return NULL;
    if (a[2].n < 0 || (a[2].n == 0))
        s[0] = k[0], s[1] = k[1];
    else if (pair_of(&a[2], 1, s, who, "stride"))
        return NULL;
    musa_tensor *v = NULL, *i = NULL;
    int rc = musa_max_pool2d(a[0].t, k, s, p, d, a[5].b, &v, a[6].b ? &i : NULL);
    if (a[6].b) return pm_pair(rc, v, i);
    return rc ? pm_raise() : pm_wrap(v);
}
DEF(avg_pool2d, NN,
    "input:T kernel_size:I stride:I=None padding:I=0 ceil_mode:b=False count_include_pad:b=True") {
    int64_t k[2], s[2], p[2];
    if (a[1].n < 0) {
        PyErr_Format(PyExc_TypeError, "[%s] kernel_size is required", who);
        return NULL;
    }
    if (pair_of(&a[1], 1, k, who, "kernel_size") || pair_of(&a[3], 0, p, who, "padding"))
        return NULL;
    if (a[2].n <= 0)
        s[0] = k[0], s[1] = k[1];
    else if (pair_of(&a[2], 1, s, who, "stride"))
        return NULL;
    return pm_ret(musa_avg_pool2d(a[0].t, k, s, p, a[4].b, a[5].b));
}
DEF(adaptive_avg_pool2d, NN, "input:T output_size:I") {
    int64_t o[2];
    if (pair_of(&a[1], 1, o, who, "output_size")) return NULL;
    return pm_ret(musa_adaptive_avg_pool2d(a[0].t, o[0], o[1]));
}
DEF(batch_norm, NN,
    "input:T running_mean:T=None running_var:T=None weight:T=None bias:T=None training:b=False "
    "momentum:f=0.1 "
    "eps:f=1e-05") {
    return pm_ret(musa_batch_norm(a[0].t, a[1].t, a[2].t, a[3].t, a[4].t, a[5].b, a[6].f, a[7].f));
}
DEF(layer_norm, NN, "input:T normalized_shape:I weight:T=None bias:T=None eps:f=1e-05") {
    musa_tensor *x = a[0].t;
    int k = a[1].n, nd = musa_tensor_ndim(x);
    if (k < 1 || k > nd) {
        PyErr_Format(PyExc_ValueError,
                     "[layer_norm] normalized_shape has %d dims but the input has %d", k, nd);
        return NULL;
    }
    for (int i = 0; i < k; i++)
        if (musa_tensor_shape(x)[nd - k + i] != a[1].v[i]) {
            PyErr_Format(PyExc_ValueError,
                         "[layer_norm] normalized_shape[%d] = %lld does not match the input's size "
                         "%lld at dim %d",
                         i, (long long)a[1].v[i], (long long)musa_tensor_shape(x)[nd - k + i],
                         nd - k + i);
            return NULL;
        }
    return pm_ret(musa_layer_norm(x, k, a[2].t, a[3].t, a[4].f));
}
DEF(group_norm, NN, "input:T num_groups:i weight:T=None bias:T=None eps:f=1e-05") {
    return pm_ret(musa_group_norm(a[0].t, a[1].i, a[2].t, a[3].t, a[4].f));
}
/* The fused kernel (F.scaled_dot_product_attention picks it, or the
 * composition for what it does not take: float masks, dropout, float64) */
DEF(scaled_dot_product_attention, NN,
    "query:T key:T value:T attn_mask:T=None scale:f=1.0 is_causal:b=False") {
    return pm_ret(
        musa_scaled_dot_product_attention(a[0].t, a[1].t, a[2].t, a[3].t, a[4].f, a[5].b));
}
DEF(softmax, FM | PM_OUT, "input:T dim:i") {
    return pm_ret(musa_softmax(a[0].t, a[1].i));
}
DEF(log_softmax, FM | PM_OUT, "input:T dim:i") {
    return pm_ret(musa_log_softmax(a[0].t, a[1].i));
}
DEF(cross_entropy, NN,
    "input:T target:T weight:T=None * ignore_index:i=-100 reduction:O=None label_smoothing:f=0") {
    if (a[2].t) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "[cross_entropy] class weights are not supported yet");
        return NULL;
    }
    musa_reduction r = MUSA_REDUCTION_MEAN;
    if (a[4].o != Py_None && reduction_of(a[4].o, &r, who)) return NULL;
    return pm_ret(musa_cross_entropy(a[0].t, a[1].t, a[3].i, a[5].f, r));
}
DEF(nll_loss, NN, "input:T target:T weight:T=None * ignore_index:i=-100 reduction:O=None") {
    if (a[2].t) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "[nll_loss] class weights are not supported yet");
        return NULL;
    }
    musa_reduction r = MUSA_REDUCTION_MEAN;
    if (a[4].o != Py_None && reduction_of(a[4].o, &r, who)) return NULL;
    return pm_ret(musa_nll_loss(a[0].t, a[1].t, a[3].i, r));
}
#define LOSS(name)                                                                                 \
    DEF(name, NN, "input:T target:T * reduction:O=None") {                                         \
        musa_reduction r = MUSA_REDUCTION_MEAN;                                                    \
        if (a[2].o != Py_None && reduction_of(a[2].o, &r, who)) return NULL;                       \
        return pm_ret(musa_##name(a[0].t, a[1].t, r));                                             \
    }
LOSS(mse_loss)
LOSS(l1_loss)
LOSS(binary_cross_entropy)
LOSS(binary_cross_entropy_with_logits)
DEF(smooth_l1_loss, NN, "input:T target:T * reduction:O=None beta:f=1.0") {
    musa_reduction r = MUSA_REDUCTION_MEAN;
    if (a[2].o != Py_None && reduction_of(a[2].o, &r, who)) return NULL;
    return pm_ret(musa_smooth_l1_loss(a[0].t, a[1].t, a[3].f, r));
}
DEF(gelu, NN, "input:T * approximate:O=None") {
    bool tanh_ = false;
    if (a[1].o != Py_None) {
        const char *s = PyUnicode_Check(a[1].o) ? PyUnicode_AsUTF8(a[1].o) : NULL;
        if (s && !strcmp(s, "tanh"))
            tanh_ = true;
        else if (!s || strcmp(s, "none")) {
            PyErr_Format(PyExc_ValueError, "[gelu] approximate must be 'none' or 'tanh', got %R",
                         a[1].o);
            return NULL;
        }
    }
    return pm_ret(musa_gelu(a[0].t, tanh_));
}
DEF(silu, NN, "input:T") {
    return pm_ret(musa_silu(a[0].t));
}
DEF(leaky_relu, NN, "input:T negative_slope:f=0.01") {
    return pm_ret(musa_leaky_relu(a[0].t, a[1].f));
}
DEF(elu, NN, "input:T alpha:f=1.0") {
    return pm_ret(musa_elu(a[0].t, a[1].f));
}
DEF(softplus, NN, "input:T beta:f=1.0 threshold:f=20.0") {
    return pm_ret(musa_softplus(a[0].t, a[1].f, a[2].f));
}
DEF(hardtanh, NN, "input:T min_val:f=-1.0 max_val:f=1.0") {
    return pm_ret(musa_hardtanh(a[0].t, a[1].f, a[2].f));
}
DEF(embedding, NN, "input:T weight:T padding_idx:O=None") {
    int64_t p = -1;
    if (a[2].o != Py_None) {
        if (pm_int64(a[2].o, &p, who, "padding_idx")) return NULL;
        int64_t num = musa_tensor_ndim(a[1].t) ? musa_tensor_shape(a[1].t)[0] : 0;
        if (p < -num || p >= num) {
            PyErr_Format(PyExc_ValueError,
                         "[embedding] padding_idx %lld must be within the %lld embeddings",
                         (long long)p, (long long)num);
            return NULL;
        }
        if (p < 0) p += num;
    }
    return pm_ret(musa_embedding(a[1].t, a[0].t, p));
}
DEF(dropout, NN, "input:T p:f=0.5 training:b=True") {
    if (a[1].f < 0 || a[1].f > 1) {
        char msg[96]; /* PyErr_Format has no %g */
        snprintf(msg, sizeof msg,
                 "[dropout] dropout probability has to be between 0 and 1, but got %g", a[1].f);
        PyErr_SetString(PyExc_ValueError, msg);
        return NULL;
    }
    return pm_ret(musa_dropout(a[0].t, a[1].f, a[2].b));
}
DEF(linear, NN, "input:T weight:T bias:T=None") {
    return pm_ret(musa_linear(a[0].t, a[1].t, a[2].t));
}
