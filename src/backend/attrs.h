/*
 * attrs.h - typed op attributes generated from attrs.def, and the field
 * descriptors that let generic code (setters by name, hashing, printing,
 * JSON, the .musa loader) handle every record the same way.
 */
#ifndef MUSA_ATTRS_H
#define MUSA_ATTRS_H

#include "../base/base.h"

/* A short list of int64 (dims, shapes, pads); MUSA_MAX_ATTR_INTS is in musa.h. */
typedef struct musa_ints {
    int32_t n;
    int64_t v[MUSA_MAX_ATTR_INTS];
} musa_ints;

/* The field types; their values are the public MUSA_ATTR_TYPE_* of musa.h. */
typedef enum musa_attr_type {
    MUSA_ATTR_BOOL = MUSA_ATTR_TYPE_BOOL,
    MUSA_ATTR_INT = MUSA_ATTR_TYPE_INT,
    MUSA_ATTR_FLOAT = MUSA_ATTR_TYPE_FLOAT,
    MUSA_ATTR_INTS = MUSA_ATTR_TYPE_INTS,
    MUSA_ATTR_DTYPE = MUSA_ATTR_TYPE_DTYPE,
} musa_attr_type;

#define MUSA_ATTR_CTYPE_BOOL  bool
#define MUSA_ATTR_CTYPE_INT   int64_t
#define MUSA_ATTR_CTYPE_FLOAT double
#define MUSA_ATTR_CTYPE_INTS  musa_ints
#define MUSA_ATTR_CTYPE_DTYPE int32_t

#define F(TYPE, name, def) MUSA_ATTR_CTYPE_##TYPE name;
#define MUSA_ATTRS(kind, fields)                                                                   \
    typedef struct musa_attrs_##kind {                                                             \
        fields                                                                                     \
    } musa_attrs_##kind;
#include "attrs.def"
#undef MUSA_ATTRS
#undef F

typedef enum musa_attrs_kind {
#define MUSA_ATTRS(kind, fields) MUSA_ATTRS_##kind,
#include "attrs.def"
#undef MUSA_ATTRS
    MUSA_ATTRS_KIND_COUNT
} musa_attrs_kind;

/* Storage big enough for any record. */
typedef union musa_attrs_any {
#define MUSA_ATTRS(kind, fields) musa_attrs_##kind kind;
#include "attrs.def"
#undef MUSA_ATTRS
} musa_attrs_any;

typedef struct musa_attr_field {
    const char *name;
    musa_attr_type type;
    size_t offset;
    double def; /* default (INTS: always empty) */
} musa_attr_field;

typedef struct musa_attrs_desc {
    const char *name;              /* "reduce" */
    size_t size;                   /* sizeof(musa_attrs_<kind>) */
    const musa_attr_field *fields; /* terminated by a NULL name */
} musa_attrs_desc;

/* "bool", "int", "float", "ints" or "dtype" (for error messages). */
const char *musa_attr_type_name(musa_attr_type type);

/* The descriptor of a record kind (never NULL for a valid kind). */
const musa_attrs_desc *musa_attrs_desc_of(musa_attrs_kind kind);

/* Zero the record (padding included) and set the defaults. */
void musa_attrs_init(musa_attrs_kind kind, void *rec);
const musa_attr_field *musa_attrs_field(musa_attrs_kind kind, const char *name);
uint64_t musa_attrs_hash(musa_attrs_kind kind, const void *rec);
bool musa_attrs_equal(musa_attrs_kind kind, const void *a, const void *b);
/* "dims=[0, 1], keepdim=false" into buf (snprintf semantics); `json` gives
 * {"dims": [0, 1], "keepdim": false}. */
int musa_attrs_format(musa_attrs_kind kind, const void *rec, bool json, char *buf, size_t size);

#endif
