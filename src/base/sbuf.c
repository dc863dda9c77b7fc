/*
 * sbuf.c - the growable string of sbuf.h.
 */
#include "sbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

static bool sb_grow(musa_sbuf *b, size_t extra) {
    if (b->oom) return false;
    if (b->p && b->len + extra < b->cap) return true;
    size_t cap = (b->cap ? b->cap * 2 : 1024) + extra;
    char *q = realloc(b->p, cap);
    if (!q) {
        b->oom = true;
        return false;
    }
    b->p = q, b->cap = cap;
    return true;
}

void musa_sb_printf(musa_sbuf *b, const char *fmt, ...) {
    for (;;) {
        if (b->oom) return;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        if (!sb_grow(b, (size_t)n + 1)) return;
    }
}

void musa_sb_put(musa_sbuf *b, const void *s, size_t n) {
    if (!sb_grow(b, n + 1)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void musa_sb_json_str(musa_sbuf *b, const char *s) {
    musa_sb_put(b, "\"", 1);
    for (const char *r = s; *r; r++) {
        unsigned char c = (unsigned char)*r;
        if (c == '"' || c == '\\')
            musa_sb_printf(b, "\\%c", c);
        else if (c == '\n')
            musa_sb_put(b, "\\n", 2);
        else if (c < 0x20 || c == 0x7f)
            musa_sb_printf(b, "\\u%04x", c);
        else
            musa_sb_put(b, r, 1);
    }
    musa_sb_put(b, "\"", 1);
}

void musa_sb_json_num(musa_sbuf *b, double v) {
    if (isnan(v))
        musa_sb_printf(b, "\"nan\"");
    else if (isinf(v))
        musa_sb_printf(b, v > 0 ? "\"inf\"" : "\"-inf\"");
    else if (fabs(v) < 9.007199254740992e15 && v == (double)(int64_t)v && !(v == 0 && signbit(v)))
        musa_sb_printf(b, "%lld", (long long)v); /* integers print as integers */
    else
        musa_sb_printf(b, "%.17g", v);
}

char *musa_sb_finish(musa_sbuf *b, const char *where) {
    if (b->oom) {
        size_t cap = b->cap;
        free(b->p);
        b->p = NULL, b->len = b->cap = 0;
        musa_err_nomem(where, cap);
        return NULL;
    }
    if (!b->p) musa_sb_put(b, "", 0);
    if (b->oom) return musa_sb_finish(b, where);
    char *s = b->p;
    b->p = NULL, b->len = b->cap = 0;
    return s;
}
