/*
 * file.h - the .musa container inside the library: what the model and
 * object layers built on it need beyond the public musa_file_* calls of
 * musa.h (docs/format.md has the layout).
 *
 * A musa_file is a validated file: every check of the container (prelude,
 * CRCs, header JSON, storages, tensors) passed before anything was
 * allocated for its tensors. What a kind keeps in its own header members
 * ("graph", "object", ...) is checked by that kind's reader, which reports
 * problems through musa_file_bad so that every message names the file, the
 * member and the byte offset.
 */
#ifndef MUSA_IO_FILE_H
#define MUSA_IO_FILE_H

#include "json.h"

/* Limits of what a reader accepts (a writer never makes more). */
#define MUSA_FILE_MAX_HEADER  (16u << 20) /* header JSON bytes */
#define MUSA_FILE_MAX_TENSORS (1 << 22)   /* storages, and tensors */
#define MUSA_FILE_PRELUDE     64          /* bytes before the header */

/* The parsed header (the tree lives as long as f). */
const musa_json *musa_file_json(const musa_file *f);
/* Report a problem with header value `at` of f: sets MUSA_ERR_IO with
 * "[who] NAME: header byte N (member): what" and returns MUSA_ERR_IO. */
int musa_file_bad(const musa_file *f, const char *who, const musa_json *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Every member of object o is one of keys[0..n); else musa_file_bad
 * naming `what` and the unknown member. */
int musa_file_check_keys(const musa_file *f, const char *who, const musa_json *o, const char *what,
                         const char *const *keys, int n);
/* Integers in the header: `v` must be an integer in [lo, hi]; else
 * musa_file_bad naming `what`. */
int musa_file_int(const musa_file *f, const char *who, const musa_json *v, const char *what,
                  int64_t lo, int64_t hi, int64_t *out);

#endif
