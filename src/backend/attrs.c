/*
 * attrs.c - field descriptors for every attrs.def record, and the generic
 * operations on records built from them.
 *
 * Each record's descriptor array is generated inside its own function so
 * that a local typedef can name the record for offsetof.
 */
#include "attrs.h"

#include <stdio.h>

#include "../base/dtype.h"
#include "../base/vec.h"

#define F(TYPE, name, def) {#name, MUSA_ATTR_##TYPE, offsetof(rec_t, name), (double)(def)},
#define MUSA_ATTRS(kind, fields)                                                                   \
    static const musa_attrs_desc *desc_##kind(void) {                                              \
        typedef musa_attrs_##kind rec_t;                                                           \
        static const musa_attr_field f[] = {fields{NULL, 0, 0, 0}};                                \
        static const musa_attrs_desc d = {#kind, sizeof(rec_t), f};                                \
        return &d;                                                                                 \
    }
#include "attrs.def"
#undef MUSA_ATTRS
#undef F

const char *musa_attr_type_name(musa_attr_type type) {
    static const char *names[] = {[MUSA_ATTR_BOOL] = "bool",
                                  [MUSA_ATTR_INT] = "int",
                                  [MUSA_ATTR_FLOAT] = "float",
                                  [MUSA_ATTR_INTS] = "ints",
                                  [MUSA_ATTR_DTYPE] = "dtype"};
    return (unsigned)type < sizeof names / sizeof names[0] ? names[type] : "?";
}

const musa_attrs_desc *musa_attrs_desc_of(musa_attrs_kind kind) {
    switch (kind) {
#define MUSA_ATTRS(kind, fields)                                                                   \
    case MUSA_ATTRS_##kind:                                                                        \
        return desc_##kind();
#include "attrs.def"
#undef MUSA_ATTRS
    default:
        return desc_none();
    }
}

void musa_attrs_init(musa_attrs_kind kind, void *rec) {
    const musa_attrs_desc *d = musa_attrs_desc_of(kind);
    memset(rec, 0, d->size);
    for (const musa_attr_field *f = d->fields; f->name; f++) {
        char *p = (char *)rec + f->offset;
        switch (f->type) {
        case MUSA_ATTR_BOOL:
            *(bool *)p = f->def != 0;
            break;
        case MUSA_ATTR_INT:
            /* INT64_MAX does not survive the trip through double exactly. */
            *(int64_t *)p = f->def >= 9.2e18 ? INT64_MAX : (int64_t)f->def;
            break;
        case MUSA_ATTR_FLOAT:
            *(double *)p = f->def;
            break;
        case MUSA_ATTR_DTYPE:
            *(int32_t *)p = (int32_t)f->def;
            break;
        case MUSA_ATTR_INTS:
            break;
        }
    }
}

const musa_attr_field *musa_attrs_field(musa_attrs_kind kind, const char *name) {
    for (const musa_attr_field *f = musa_attrs_desc_of(kind)->fields; f->name; f++)
        if (!strcmp(f->name, name)) return f;
    return NULL;
}

/* Records are zeroed before fields are set, and musa_ints entries past n are
 * kept zero by every setter, so bytewise hashing and comparison are exact.
 * Records of kind none hold nothing and may be NULL (a graph node's). */
uint64_t musa_attrs_hash(musa_attrs_kind kind, const void *rec) {
    if (kind == MUSA_ATTRS_none) return (uint64_t)kind;
    return musa_hash_bytes(rec, musa_attrs_desc_of(kind)->size, (uint64_t)kind);
}

bool musa_attrs_equal(musa_attrs_kind kind, const void *a, const void *b) {
    return kind == MUSA_ATTRS_none || memcmp(a, b, musa_attrs_desc_of(kind)->size) == 0;
}

#define APPEND(...)                                                                                \
    do {                                                                                           \
        int k_ = snprintf(buf + (n < size ? n : size), n < size ? size - n : 0, __VA_ARGS__);      \
        if (k_ > 0) n += (size_t)k_;                                                               \
    } while (0)

int musa_attrs_format(musa_attrs_kind kind, const void *rec, bool json, char *buf, size_t size) {
    size_t n = 0;
    if (size) buf[0] = '\0';
    if (json) APPEND("{");
    bool first = true;
    for (const musa_attr_field *f = musa_attrs_desc_of(kind)->fields; f->name; f++) {
        if (kind == MUSA_ATTRS_none) break;
        const char *p = (const char *)rec + f->offset;
        APPEND(json ? "%s\"%s\": " : "%s%s=", first ? "" : ", ", f->name);
        first = false;
        switch (f->type) {
        case MUSA_ATTR_BOOL:
            APPEND("%s", *(const bool *)p ? "true" : "false");
            break;
        case MUSA_ATTR_INT:
            APPEND("%lld", (long long)*(const int64_t *)p);
            break;
        case MUSA_ATTR_FLOAT: {
            double v = *(const double *)p;
            if (json && !isfinite(v))
                APPEND("\"%s\"", v != v ? "nan" : v > 0 ? "inf" : "-inf");
            else
                APPEND("%.17g", v);
            break;
        }
        case MUSA_ATTR_DTYPE:
            APPEND(json ? "\"%s\"" : "%s", musa_dtype_name((musa_dtype) * (const int32_t *)p));
            break;
        case MUSA_ATTR_INTS: {
            const musa_ints *v = (const musa_ints *)p;
            APPEND("[");
            for (int i = 0; i < v->n; i++) APPEND("%s%lld", i ? ", " : "", (long long)v->v[i]);
            APPEND("]");
            break;
        }
        }
    }
    if (json) APPEND("}");
    return (int)n;
}
