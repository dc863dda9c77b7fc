/*
 * dtype.c - the dtype traits table, promotion, and scalar load/store.
 */
#include "dtype.h"

const musa_dtype_traits musa_dtype_info[MUSA_DTYPE_COUNT] = {
    [MUSA_DTYPE_FLOAT32] = {"float32", 4, MUSA_CAT_FLOAT, 11, true},
    [MUSA_DTYPE_FLOAT64] = {"float64", 8, MUSA_CAT_FLOAT, 12, true},
    [MUSA_DTYPE_FLOAT16] = {"float16", 2, MUSA_CAT_FLOAT, 10, true},
    [MUSA_DTYPE_BFLOAT16] = {"bfloat16", 2, MUSA_CAT_FLOAT, 10, true},
    [MUSA_DTYPE_INT64] = {"int64", 8, MUSA_CAT_INT, 4, true},
    [MUSA_DTYPE_INT32] = {"int32", 4, MUSA_CAT_INT, 3, true},
    [MUSA_DTYPE_INT16] = {"int16", 2, MUSA_CAT_INT, 2, true},
    [MUSA_DTYPE_INT8] = {"int8", 1, MUSA_CAT_INT, 1, true},
    [MUSA_DTYPE_UINT8] = {"uint8", 1, MUSA_CAT_INT, 1, false},
    [MUSA_DTYPE_BOOL] = {"bool", 1, MUSA_CAT_BOOL, 0, false},
};

const char *musa_dtype_name(musa_dtype d) {
    return musa_dtype_valid((int)d) ? musa_dtype_info[d].name : "?";
}

size_t musa_dtype_size(musa_dtype d) {
    return musa_dtype_valid((int)d) ? musa_dtype_info[d].size : 0;
}

bool musa_dtype_is_floating(musa_dtype d) {
    return musa_dtype_valid((int)d) && musa_is_float(d);
}

int musa_dtype_from_name(const char *name) {
    static const struct {
        const char *name;
        musa_dtype d;
    } aliases[] = {
        {"float", MUSA_DTYPE_FLOAT32}, {"double", MUSA_DTYPE_FLOAT64},
        {"half", MUSA_DTYPE_FLOAT16},  {"long", MUSA_DTYPE_INT64},
        {"int", MUSA_DTYPE_INT32},     {"bf16", MUSA_DTYPE_BFLOAT16},
        {"fp16", MUSA_DTYPE_FLOAT16},  {"fp32", MUSA_DTYPE_FLOAT32},
        {"fp64", MUSA_DTYPE_FLOAT64},  {"short", MUSA_DTYPE_INT16},
    };
    if (!name) return -1;
    for (int d = 0; d < MUSA_DTYPE_COUNT; d++)
        if (!strcmp(name, musa_dtype_info[d].name)) return d;
    for (int i = 0; i < MUSA_ARRAY_LEN(aliases); i++)
        if (!strcmp(name, aliases[i].name)) return (int)aliases[i].d;
    return -1;
}

musa_dtype musa_promote_types(musa_dtype a, musa_dtype b) {
    if (a == b) return a;
    const musa_dtype_traits *ta = &musa_dtype_info[a], *tb = &musa_dtype_info[b];
    if (ta->category != tb->category) return ta->category > tb->category ? a : b;
    if (ta->category == MUSA_CAT_FLOAT) {
        if (ta->rank == tb->rank) return MUSA_DTYPE_FLOAT32; /* float16 with bfloat16 */
        return ta->rank > tb->rank ? a : b;
    }
    /* Integers: uint8 with int8 needs a wider signed type. */
    if (ta->rank == tb->rank) return MUSA_DTYPE_INT16;
    return ta->rank > tb->rank ? a : b;
}

musa_dtype musa_default_dtype(int category) {
    switch (category) {
    case MUSA_CAT_BOOL:
        return MUSA_DTYPE_BOOL;
    case MUSA_CAT_INT:
        return MUSA_DTYPE_INT64;
    default:
        return MUSA_DTYPE_FLOAT32;
    }
}

double musa_load_f64(const void *p, musa_dtype d) {
    switch (d) {
    case MUSA_DTYPE_FLOAT32:
        return *(const float *)p;
    case MUSA_DTYPE_FLOAT64:
        return *(const double *)p;
    case MUSA_DTYPE_FLOAT16:
        return (double)*(const musa_f16 *)p;
    case MUSA_DTYPE_BFLOAT16:
        return musa_bf16_to_f32(*(const musa_bf16 *)p);
    case MUSA_DTYPE_INT64:
        return (double)*(const int64_t *)p;
    case MUSA_DTYPE_INT32:
        return *(const int32_t *)p;
    case MUSA_DTYPE_INT16:
        return *(const int16_t *)p;
    case MUSA_DTYPE_INT8:
        return *(const int8_t *)p;
    case MUSA_DTYPE_UINT8:
        return *(const uint8_t *)p;
    case MUSA_DTYPE_BOOL:
        return *(const uint8_t *)p != 0;
    default:
        return 0;
    }
}

void musa_store_f64(void *p, musa_dtype d, double v) {
    switch (d) {
    case MUSA_DTYPE_FLOAT32:
        *(float *)p = (float)v;
        break;
    case MUSA_DTYPE_FLOAT64:
        *(double *)p = v;
        break;
    case MUSA_DTYPE_FLOAT16:
        *(musa_f16 *)p = MUSA_TO_F16(v);
        break;
    case MUSA_DTYPE_BFLOAT16:
        *(musa_bf16 *)p = musa_f64_to_bf16(v);
        break;
    case MUSA_DTYPE_INT64:
        *(int64_t *)p = musa_sat_i64(v);
        break;
    case MUSA_DTYPE_INT32:
        *(int32_t *)p = musa_sat_i32(v);
        break;
    case MUSA_DTYPE_INT16:
        *(int16_t *)p = musa_sat_i16(v);
        break;
    case MUSA_DTYPE_INT8:
        *(int8_t *)p = musa_sat_i8(v);
        break;
    case MUSA_DTYPE_UINT8:
        *(uint8_t *)p = musa_sat_u8(v);
        break;
    case MUSA_DTYPE_BOOL:
        *(uint8_t *)p = v != 0;
        break;
    default:
        break;
    }
}

int64_t musa_load_i64(const void *p, musa_dtype d) {
    switch (d) {
    case MUSA_DTYPE_INT64:
        return *(const int64_t *)p;
    case MUSA_DTYPE_INT32:
        return *(const int32_t *)p;
    case MUSA_DTYPE_INT16:
        return *(const int16_t *)p;
    case MUSA_DTYPE_INT8:
        return *(const int8_t *)p;
    case MUSA_DTYPE_UINT8:
    case MUSA_DTYPE_BOOL:
        return *(const uint8_t *)p;
    default:
        return musa_sat_i64(musa_load_f64(p, d));
    }
}

void musa_store_i64(void *p, musa_dtype d, int64_t v) {
    switch (d) {
    case MUSA_DTYPE_INT64:
        *(int64_t *)p = v;
        break;
    case MUSA_DTYPE_INT32:
        *(int32_t *)p = (int32_t)(uint32_t)v;
        break;
    case MUSA_DTYPE_INT16:
        *(int16_t *)p = (int16_t)(uint16_t)v;
        break;
    case MUSA_DTYPE_INT8:
        *(int8_t *)p = (int8_t)(uint8_t)v;
        break;
    case MUSA_DTYPE_UINT8:
        *(uint8_t *)p = (uint8_t)v;
        break;
    case MUSA_DTYPE_BOOL:
        *(uint8_t *)p = v != 0;
        break;
    default:
        musa_store_f64(p, d, (double)v);
        break;
    }
}
