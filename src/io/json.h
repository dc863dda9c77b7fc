/*
 * json.h - a strict JSON reader for the headers of .musa files.
 *
 * It reads RFC 8259 JSON into a tree in an arena, and trusts nothing:
 * nesting deeper than MUSA_JSON_MAX_DEPTH, invalid UTF-8, control bytes in
 * strings, lone surrogates, duplicate object keys, leading zeros, trailing
 * text and numbers out of double range are errors that give the byte offset.
 * The recursion is bounded by the depth cap, and every node is paid for by
 * at least one byte of input, so a header of N bytes costs O(N) memory.
 *
 *     musa_arena a; musa_arena_init(&a, 0);
 *     const musa_json *root;
 *     char why[160];
 *     if (musa_json_parse(&a, text, len, &root, why, sizeof why)) ... why ...
 *     const musa_json *v = musa_json_get(root, "kind");
 *     musa_arena_free(&a);   // the tree goes with the arena
 */
#ifndef MUSA_IO_JSON_H
#define MUSA_IO_JSON_H

#include "../base/arena.h"

#define MUSA_JSON_MAX_DEPTH 64

typedef enum musa_json_type {
    MUSA_JSON_NULL = 0,
    MUSA_JSON_BOOL,
    MUSA_JSON_NUMBER,
    MUSA_JSON_STRING,
    MUSA_JSON_ARRAY,
    MUSA_JSON_OBJECT,
} musa_json_type;

typedef struct musa_json musa_json;
struct musa_json {
    int8_t type;      /* musa_json_type */
    bool boolean;     /* BOOL */
    bool is_int;      /* NUMBER: an integer literal that fits int64 (then i holds it) */
    int32_t n;        /* ARRAY, OBJECT: members */
    uint32_t off;     /* byte offset of the value in the text */
    int64_t i;        /* NUMBER with is_int */
    double num;       /* NUMBER */
    const char *str;  /* STRING: unescaped UTF-8, NUL-terminated (may hold NUL: see len) */
    size_t len;       /* STRING: bytes */
    musa_json *kid;   /* ARRAY, OBJECT: [n] */
    const char **key; /* OBJECT: [n] member names */
};

/* Parse text[0..len) (need not be NUL-terminated; len < 2^32). On failure
 * returns MUSA_ERR_VALUE with "byte N: what" in why[] (the last error is
 * not set: callers add their context). */
int musa_json_parse(musa_arena *a, const char *text, size_t len, const musa_json **root, char *why,
                    size_t why_len);

/* Member `key` of an object, or NULL (not an object, or no such key). */
const musa_json *musa_json_get(const musa_json *obj, const char *key);
/* "null", "boolean", "number", "string", "array" or "object". */
const char *musa_json_type_name(int type);

#endif
