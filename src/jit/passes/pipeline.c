/*
 * pipeline.c - the pass table and its runner.
 *
 * Passes run in table order; each can be disabled by name (a comma-separated
 * list in ctx->disabled), and passes below their min_fusion_level are
 * skipped. With ctx->verify (debug builds by default) the verifier runs after
 * every pass and an error names the pass that broke the graph.
 */
#include <stdio.h>

#include "../graph.h"

const musa_pass musa_pass_table[] = {
    /* first (eager's bits, or with ctx->fuse_attention the fused formulas):
     * simplify then lets its kernels write permuted results, as it does for
     * matmuls */
    {"attention", musa_pass_attention, 0},
    {"simplify", musa_pass_simplify, 0},
    {"padsum", musa_pass_padsum, 0}, /* sums of zero pads: a split's gradient */
    {"cse", musa_pass_cse, 0},
    {"fold", musa_pass_fold, 0},
    {"simplify", musa_pass_simplify, 0}, /* again: folding exposes x * 1, x @ I */
    {"dce", musa_pass_dce, 0},
    {"remat", musa_pass_remat, 0},
    {"channels_last", musa_pass_channels_last, 0}, /* only with ctx->channels_last */
    {"winograd", musa_pass_winograd, 0},           /* only with ctx->winograd */
    {"fuse", musa_pass_fuse, 1},
    {NULL, NULL, 0},
};

static bool disabled(const char *list, const char *name) {
    if (!list) return false;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && *p == ' ') p++, len--;
        while (len && p[len - 1] == ' ') len--;
        if (len == n && !strncmp(p, name, n)) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

static int run(musa_graph *g, const musa_pass *ps, musa_pass_ctx *ctx) {
    if (g->capturing)
        return musa_err(MUSA_ERR_RUNTIME, "[jit] pass '%s': the graph is still capturing",
                        ps->name);
    int rc = ps->fn(g, ctx);
    if (rc) {
        musa_err_prefix(ps->name);
        return rc;
    }
    if (ctx->verify && (rc = musa_graph_verify(g))) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", musa_last_error());
        return musa_err(rc, "[jit] the graph is invalid after pass '%s': %s", ps->name, msg);
    }
    return MUSA_OK;
}

int musa_graph_optimize(musa_graph *g, musa_pass_ctx *ctx) {
    if (!g || !ctx) return musa_err(MUSA_ERR_VALUE, "[jit] optimize: graph or context is NULL");
#ifndef NDEBUG
    ctx->verify = true; /* debug builds verify after every pass */
#endif
    int rc;
    if (ctx->verify && (rc = musa_graph_verify(g))) return rc;
    for (const musa_pass *ps = musa_pass_table; ps->name; ps++) {
        if (ctx->fusion_level < ps->min_fusion_level || disabled(ctx->disabled, ps->name)) continue;
        if (ps->fn == musa_pass_channels_last && !ctx->channels_last) continue;
        if (ps->fn == musa_pass_winograd && !ctx->winograd) continue;
        if ((rc = run(g, ps, ctx))) return rc;
    }
    musa_graph_shrink(g);
    return MUSA_OK;
}

const char *musa_graph_pass_name(int i) {
    int n = 0;
    while (musa_pass_table[n].name) n++;
    return i >= 0 && i < n ? musa_pass_table[i].name : NULL;
}

int musa_graph_run_pass(musa_graph *g, const char *name, musa_pass_ctx *ctx) {
    if (!g || !name || !ctx) return musa_err(MUSA_ERR_VALUE, "[jit] run_pass: NULL argument");
    for (const musa_pass *ps = musa_pass_table; ps->name; ps++)
        if (!strcmp(ps->name, name)) return run(g, ps, ctx);
    char known[256] = "";
    for (const musa_pass *ps = musa_pass_table; ps->name; ps++) {
        strncat(known, ps->name, sizeof known - strlen(known) - 1);
        if (ps[1].name) strncat(known, ", ", sizeof known - strlen(known) - 1);
    }
    return musa_err(MUSA_ERR_VALUE, "[jit] unknown pass '%s' (passes: %s)", name, known);
}
