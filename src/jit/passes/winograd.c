/*
 * winograd.c - pass "winograd": convolutions that may run on oneDNN's
 * Winograd primitive (the pipeline runs it only with musa_pass_ctx's
 * winograd, which musa.Config(winograd=True) sets).
 *
 * oneDNN's Winograd primitive (F(4x4, 3x3): float32, 3x3 kernels of
 * stride 1 and no dilation) does a convolution and its two backward
 * products in about half the time of the direct one here
 * (docs/benchmarks.md), but it rounds differently (the transforms add and
 * subtract scaled tiles) and it needs a large workspace, the transformed
 * input, weight and output tiles: 7 to 120 MiB a call in a CIFAR ResNet-18
 * at batch 32, several times the activations of the small late layers.
 *
 * This pass gives attribute winograd=true to every convolution node
 * (forward, or either backward) oneDNN has such a primitive for. The plan
 * then decides (lower.c, fit_winograd): a step's workspace goes in a gap of
 * the arena, and a convolution whose Winograd workspace would find none and
 * grow the arena runs the direct primitive instead, so the option costs no
 * memory. The kernel, too, runs direct where oneDNN declines the shape.
 */
#include "../../backend/cpu/conv_dnnl.h"
#include "../../backend/cpu/kernels.h"
#include "../graph.h"

/* Whether convolution node n, asked for Winograd, would run oneDNN's
 * Winograd primitive (float32; the kernel decides the shapes). */
static bool winograd_ok(const musa_graph *g, const musa_gnode *n) {
    const int64_t *x, *w;
    int kind = musa_pass_conv_dims(g, n, &x, &w);
    if (kind < 0 || g->values.data[n->in[0]].dtype != MUSA_DTYPE_FLOAT32) return false;
    musa_attrs_conv with = n->attrs->conv;
    with.winograd = true;
    bool used = false;
    musa_cpu_conv_dnnl_workspace(kind, x, w, &with, MUSA_DTYPE_FLOAT32,
                                 kind == MUSA_CONV_FWD && n->n_in == 3, &used);
    return used;
}

int musa_pass_winograd(musa_graph *g, musa_pass_ctx *ctx) {
    if (!g) return musa_err(MUSA_ERR_VALUE, "[winograd] graph is NULL");
    for (int64_t i = 0; i < g->nodes.len; i++) {
        musa_gnode *n = &g->nodes.data[i];
        if (!winograd_ok(g, n) || n->attrs->conv.winograd) continue;
        musa_attrs_conv a = n->attrs->conv;
        a.winograd = true;
        int rc = musa_graph_set_attrs(g, n, &a);
        if (rc) return rc;
        if (ctx) ctx->changes++;
    }
    return MUSA_OK;
}
