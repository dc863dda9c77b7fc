/*
 * sbuf.h - a growable string: printf onto the end, JSON-quoted strings and
 * numbers, and a finish that turns running out of memory into one error.
 *
 *     musa_sbuf b = {0};
 *     musa_sb_printf(&b, "{\"n\": %d}", 3);
 *     char *s = musa_sb_finish(&b, "graph_json");   // malloc'd, or NULL + error
 *
 * Invariants: after a failed growth `oom` is set, every later append is a
 * no-op, and musa_sb_finish frees the buffer and reports MUSA_ERR_NOMEM. So
 * a builder is never handed out truncated.
 */
#ifndef MUSA_SBUF_H
#define MUSA_SBUF_H

#include "base.h"

typedef struct musa_sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} musa_sbuf;

void musa_sb_printf(musa_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* n bytes as they are. */
void musa_sb_put(musa_sbuf *b, const void *s, size_t n);
/* s as a JSON string: quoted, with '"', '\\' and control bytes escaped. */
void musa_sb_json_str(musa_sbuf *b, const char *s);
/* v as a JSON number that reads back to the same double (%.17g); NaN and
 * the infinities, which JSON lacks, as the strings "nan", "inf", "-inf". */
void musa_sb_json_num(musa_sbuf *b, double v);
/* The NUL-terminated string (malloc'd; the caller frees it), or NULL with
 * MUSA_ERR_NOMEM set naming `where` if any append ran out of memory. */
char *musa_sb_finish(musa_sbuf *b, const char *where);

#endif
