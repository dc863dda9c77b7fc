/*
 * json.c - the strict JSON reader of json.h: recursive descent, depth
 * capped, members collected in a growable array and copied into the arena
 * when their container closes.
 */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "../base/vec.h"

typedef struct parser {
    musa_arena *a;
    const unsigned char *s;
    size_t len, pos;
    char *why;
    size_t why_len;
    bool failed;
} parser;

static int fail(parser *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(parser *p, size_t at, const char *fmt, ...) {
    if (p->failed) return MUSA_ERR_VALUE;
    p->failed = true;
    int n = snprintf(p->why, p->why_len, "byte %zu: ", at);
    if (n >= 0 && (size_t)n < p->why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->why + n, p->why_len - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return MUSA_ERR_VALUE;
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

/* A byte for messages: printable as itself, else in hex. */
static const char *show(unsigned char c, char buf[8]) {
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, 8, "'%c'", c);
    else
        snprintf(buf, 8, "0x%02x", c);
    return buf;
}

static int parse_value(parser *p, musa_json *out, int depth);

static bool literal(parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n)) return false;
    p->pos += n;
    return true;
}

static int parse_number(parser *p, musa_json *out) {
    size_t start = p->pos, i = p->pos;
    bool is_int = true;
    if (i < p->len && p->s[i] == '-') i++;
    if (i >= p->len || p->s[i] < '0' || p->s[i] > '9')
        return fail(p, start, "a number needs digits after '-'");
    if (p->s[i] == '0' && i + 1 < p->len && p->s[i + 1] >= '0' && p->s[i + 1] <= '9')
        return fail(p, start, "numbers have no leading zeros");
    while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    if (i < p->len && p->s[i] == '.') {
        is_int = false;
        i++;
        if (i >= p->len || p->s[i] < '0' || p->s[i] > '9')
            return fail(p, i, "a fraction needs digits after '.'");
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        is_int = false;
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (i >= p->len || p->s[i] < '0' || p->s[i] > '9')
            return fail(p, i, "an exponent needs digits");
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    size_t n = i - start;
    if (n > 400) return fail(p, start, "a number of %zu characters is too long", n);
    char buf[401];
    memcpy(buf, p->s + start, n);
    buf[n] = 0;
    errno = 0;
    out->type = MUSA_JSON_NUMBER;
    out->num = strtod(buf, NULL);
    if (isinf(out->num)) return fail(p, start, "number %s is out of range", buf);
    if (is_int) {
        errno = 0;
        long long v = strtoll(buf, NULL, 10);
        out->is_int = errno != ERANGE;
        out->i = out->is_int ? (int64_t)v : 0;
    }
    p->pos = i;
    return MUSA_OK;
}

static int hex4(parser *p, size_t at, uint32_t *v) {
    if (p->len - at < 4) return fail(p, at, "\\u needs four hex digits");
    *v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char c = p->s[at + (size_t)k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return fail(p, at, "\\u needs four hex digits");
        *v = *v * 16 + (uint32_t)d;
    }
    return MUSA_OK;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xc0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3f)), 2;
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    size_t k;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf)
        k = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        k = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        k = 4, cp = c & 0x07;
    else
        return 0;
    if (n < k) return 0;
    for (size_t j = 1; j < k; j++) {
        if ((s[j] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[j] & 0x3f);
    }
    if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0; /* overlong, beyond Unicode, or a surrogate */
    return k;
}

static int parse_string(parser *p, const char **str, size_t *len) {
    size_t start = p->pos++; /* the opening quote */
    /* The unescaped string is never longer than its source. */
    size_t end = p->pos;
    while (end < p->len && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->len) return fail(p, start, "unterminated string");
    char *o = musa_arena_alloc(p->a, end - p->pos + 1, 1);
    if (!o) return fail(p, start, "out of memory");
    size_t n = 0;
    char b[8];
    while (p->s[p->pos] != '"') {
        unsigned char c = p->s[p->pos];
        if (c < 0x20) return fail(p, p->pos, "control byte %s in a string", show(c, b));
        if (c != '\\') {
            size_t k = utf8_len(p->s + p->pos, p->len - p->pos);
            if (!k) return fail(p, p->pos, "invalid UTF-8 in a string");
            memcpy(o + n, p->s + p->pos, k);
            n += k, p->pos += k;
            continue;
        }
        size_t at = p->pos;
        unsigned char e = p->s[p->pos + 1];
        p->pos += 2;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char to[] = "\"\\/\b\f\n\r\t";
            o[n++] = to[simple - "\"\\/bfnrt"];
            continue;
        }
        if (e != 'u') return fail(p, at, "unknown escape \\%s", show(e, b));
        uint32_t cp, lo;
        if (hex4(p, p->pos, &cp)) return MUSA_ERR_VALUE;
        p->pos += 4;
        if (cp >= 0xdc00 && cp <= 0xdfff) return fail(p, at, "lone low surrogate \\u%04x", cp);
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (p->len - p->pos < 6 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u' ||
                hex4(p, p->pos + 2, &lo) || lo < 0xdc00 || lo > 0xdfff) {
                p->failed = false; /* a hex4 failure here is the pair's fault */
                return fail(p, at, "high surrogate \\u%04x without its low half", cp);
            }
            p->pos += 6;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        n += put_utf8(o + n, cp);
    }
    p->pos++; /* the closing quote */
    o[n] = 0;
    *str = o, *len = n;
    return MUSA_OK;
}

/* Members of an array or object, collected until it closes. */
typedef MUSA_VEC(musa_json) json_vec;
typedef MUSA_VEC(const char *) key_vec;

static int parse_container(parser *p, musa_json *out, int depth, bool object) {
    size_t start = p->pos++;
    char close = object ? '}' : ']';
    json_vec kids = {0};
    key_vec keys = {0};
    musa_map names = {0}; /* object: hash of a member name -> its index */
    int rc = MUSA_OK;
    char b[8];
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        goto done;
    }
    for (;;) {
        skip_ws(p);
        musa_json kid = {0};
        if (object) {
            if (p->pos >= p->len || p->s[p->pos] != '"') {
                rc = fail(p, p->pos, "expected a member name in the object at byte %zu", start);
                goto done;
            }
            const char *key;
            size_t klen, kat = p->pos;
            if ((rc = parse_string(p, &key, &klen))) goto done;
            if (strlen(key) != klen) {
                rc = fail(p, kat, "a member name holds a NUL character");
                goto done;
            }
            /* duplicates: a hash of each name (linear in the member count;
             * a quadratic scan let a crafted header stall the reader) */
            uint64_t h = musa_hash_bytes(key, klen, 0x6a736f6eu) & ~1ull;
            uint64_t *seen = musa_map_get(&names, h);
            if (seen) {
                bool dup = !strcmp(keys.data[*seen], key);
                for (int64_t j = 0; !dup && j < keys.len; j++) /* a hash collision: scan */
                    dup = !strcmp(keys.data[j], key);
                if (dup) {
                    rc = fail(p, kat, "duplicate member name \"%.64s\"", key);
                    goto done;
                }
            } else if (musa_map_put(&names, h, (uint64_t)keys.len)) {
                rc = fail(p, p->pos, "out of memory");
                goto done;
            }
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                rc = fail(p, p->pos, "expected ':' after member name \"%.64s\"", key);
                goto done;
            }
            p->pos++;
            if (musa_vec_push(&keys, key)) {
                rc = fail(p, p->pos, "out of memory");
                goto done;
            }
            skip_ws(p);
        }
        if ((rc = parse_value(p, &kid, depth + 1))) goto done;
        if (kids.len >= INT32_MAX || musa_vec_push(&kids, kid)) {
            rc = fail(p, p->pos, "out of memory");
            goto done;
        }
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            break;
        }
        rc = p->pos >= p->len
                 ? fail(p, start, "unterminated %s", object ? "object" : "array")
                 : fail(p, p->pos, "expected ',' or '%c', found %s", close, show(p->s[p->pos], b));
        goto done;
    }
done:
    if (!rc) {
        out->type = object ? MUSA_JSON_OBJECT : MUSA_JSON_ARRAY;
        out->n = (int32_t)kids.len;
        if (kids.len) {
            out->kid = MUSA_ARENA_NEW(p->a, musa_json, kids.len);
            if (object) out->key = MUSA_ARENA_NEW(p->a, const char *, keys.len);
            if (!out->kid || (object && !out->key))
                rc = fail(p, start, "out of memory");
            else {
                memcpy(out->kid, kids.data, sizeof(musa_json) * (size_t)kids.len);
                if (object) memcpy(out->key, keys.data, sizeof(char *) * (size_t)keys.len);
            }
        }
    }
    musa_vec_free(&kids);
    musa_vec_free(&keys);
    musa_map_free(&names);
    return rc;
}

static int parse_value(parser *p, musa_json *out, int depth) {
    skip_ws(p);
    out->off = (uint32_t)p->pos;
    if (depth > MUSA_JSON_MAX_DEPTH)
        return fail(p, p->pos, "nesting deeper than %d levels", MUSA_JSON_MAX_DEPTH);
    if (p->pos >= p->len) return fail(p, p->pos, "unexpected end of the text");
    unsigned char c = p->s[p->pos];
    char b[8];
    switch (c) {
    case '{':
        return parse_container(p, out, depth, true);
    case '[':
        return parse_container(p, out, depth, false);
    case '"':
        out->type = MUSA_JSON_STRING;
        return parse_string(p, &out->str, &out->len);
    case 't':
    case 'f':
        if (!literal(p, c == 't' ? "true" : "false")) break;
        out->type = MUSA_JSON_BOOL;
        out->boolean = c == 't';
        return MUSA_OK;
    case 'n':
        if (!literal(p, "null")) break;
        out->type = MUSA_JSON_NULL;
        return MUSA_OK;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, out);
    }
    return fail(p, p->pos, "unexpected %s", show(c, b));
}

int musa_json_parse(musa_arena *a, const char *text, size_t len, const musa_json **root, char *why,
                    size_t why_len) {
    parser p = {
        .a = a, .s = (const unsigned char *)text, .len = len, .why = why, .why_len = why_len};
    *root = NULL;
    if (why_len) why[0] = 0;
    if (len >= UINT32_MAX) return fail(&p, 0, "a text of %zu bytes is too long", len);
    musa_json *r = MUSA_ARENA_NEW(a, musa_json, 1);
    if (!r) return fail(&p, 0, "out of memory");
    if (parse_value(&p, r, 0)) return MUSA_ERR_VALUE;
    skip_ws(&p);
    if (p.pos != len) return fail(&p, p.pos, "text after the end of the value");
    *root = r;
    return MUSA_OK;
}

const musa_json *musa_json_get(const musa_json *obj, const char *key) {
    if (!obj || obj->type != MUSA_JSON_OBJECT) return NULL;
    for (int32_t i = 0; i < obj->n; i++)
        if (!strcmp(obj->key[i], key)) return &obj->kid[i];
    return NULL;
}

const char *musa_json_type_name(int type) {
    static const char *const names[] = {"null", "boolean", "number", "string", "array", "object"};
    return type >= 0 && type < MUSA_ARRAY_LEN(names) ? names[type] : "?";
}
