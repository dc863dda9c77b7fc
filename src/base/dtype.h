/*
 * dtype.h - per-dtype traits in one designated-initialiser table, the C
 * element types kernels use, and exact conversions for float16/bfloat16.
 *
 * Invariants: musa_dtype_info[d].size is the storage size of one element;
 * float16 is stored as IEEE binary16 (musa_f16), bfloat16 as the top 16 bits
 * of a float32. Conversions to float16/bfloat16 round to nearest even, once.
 */
#ifndef MUSA_DTYPE_H
#define MUSA_DTYPE_H

#include "base.h"

#include <math.h>

/* clang before 15 has _Float16 on x86 only with AVX512-FP16; elsewhere
 * (say -march=native on a CPU it does not know, such as AMD Zen 5) its
 * storage-only __fp16 serves: arithmetic promotes to float, and float <->
 * __fp16 conversions round to nearest even (F16C), as _Float16's do. It
 * cannot be a parameter or a return type, so kernels pass float16 values by
 * pointer only, and a double must not be converted to it directly: clang 14
 * calls libgcc's __truncdfhf2 with another ABI and gets garbage (0.1 became
 * 3.7e-5). MUSA_TO_F16(v) converts any real v correctly in both builds. */
#if defined(__clang__) && __clang_major__ < 15 && defined(__x86_64__) && !defined(__AVX512FP16__)
#define MUSA_F16_STORAGE_ONLY 1
typedef __fp16 musa_f16;
#else
#define MUSA_F16_STORAGE_ONLY 0
typedef _Float16 musa_f16;
#endif

#if MUSA_F16_STORAGE_ONLY
/* A float that rounds to the same float16 as v: v rounded to float with
 * rounding to odd (toward zero, then the last bit set when inexact), which
 * keeps float16's single rounding exact (float has 13 more bits). */
static inline float musa_f16_via_float(double v) {
    float f = (float)v;
    if (v == v && (double)f != v) {
        uint32_t u;
        memcpy(&u, &f, 4);
        if (fabs((double)f) > fabs(v)) u--; /* rounded away from zero: step back */
        u |= 1;
        memcpy(&f, &u, 4);
    }
    return f;
}
#define MUSA_TO_F16(v)                                                                             \
    _Generic((v), double : (musa_f16)musa_f16_via_float((double)(v)), default : (musa_f16)(v))
#else
#define MUSA_TO_F16(v) ((musa_f16)(v))
#endif
typedef uint16_t musa_bf16;

enum musa_dtype_category { MUSA_CAT_BOOL = 0, MUSA_CAT_INT = 1, MUSA_CAT_FLOAT = 2 };

typedef struct musa_dtype_traits {
    const char *name; /* "float32" */
    size_t size;      /* bytes per element */
    int category;     /* enum musa_dtype_category */
    int rank;         /* order within the promotion lattice */
    bool is_signed;
} musa_dtype_traits;

extern const musa_dtype_traits musa_dtype_info[MUSA_DTYPE_COUNT];

static inline bool musa_dtype_valid(int d) {
    return d >= 0 && d < MUSA_DTYPE_COUNT;
}
static inline bool musa_is_float(musa_dtype d) {
    return musa_dtype_info[d].category == MUSA_CAT_FLOAT;
}
static inline bool musa_is_low_float(musa_dtype d) {
    return d == MUSA_DTYPE_FLOAT16 || d == MUSA_DTYPE_BFLOAT16;
}

static inline float musa_bf16_to_f32(musa_bf16 b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline musa_bf16 musa_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    /* both results, then a select: loops that store bfloat16 vectorise */
    uint32_t nan = (u >> 16) | 0x40u; /* quiet NaN */
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (musa_bf16)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

/* float16 held as its 16 bits (buffers of raw words: the collectives) */
static inline float musa_f16_bits_to_f32(uint16_t h) {
    musa_f16 x;
    memcpy(&x, &h, 2);
    return (float)x;
}
static inline uint16_t musa_f32_to_f16_bits(float f) {
    musa_f16 x = (musa_f16)f;
    uint16_t h;
    memcpy(&h, &x, 2);
    return h;
}

/* double -> bfloat16 with a single rounding: round to float32 with
 * round-to-odd, then to bfloat16 with round-to-nearest-even. */
static inline musa_bf16 musa_f64_to_bf16(double d) {
    float f = (float)d;
    if (isfinite(f) && (double)f != d) {
        uint32_t u;
        memcpy(&u, &f, 4);
        if (fabs((double)f) > fabs(d)) u -= 1; /* truncate toward zero */
        u |= 1;                                /* sticky bit: round to odd */
        memcpy(&f, &u, 4);
    }
    return musa_f32_to_bf16(f);
}

/* Float to integer conversions saturate, and NaN becomes 0 (C leaves this
 * undefined, so every cast in musa goes through these). */
#define MUSA_DEF_SAT(NAME, T, LO, HI)                                                              \
    static inline T NAME(double x) {                                                               \
        if (x != x) return 0;                                                                      \
        if (x <= (double)(LO)) return (LO);                                                        \
        if (x >= (double)(HI)) return (HI);                                                        \
        return (T)x;                                                                               \
    }
MUSA_DEF_SAT(musa_sat_i32, int32_t, INT32_MIN, INT32_MAX)
MUSA_DEF_SAT(musa_sat_i16, int16_t, INT16_MIN, INT16_MAX)
MUSA_DEF_SAT(musa_sat_i8, int8_t, INT8_MIN, INT8_MAX)
MUSA_DEF_SAT(musa_sat_u8, uint8_t, 0, UINT8_MAX)
#undef MUSA_DEF_SAT
static inline int64_t musa_sat_i64(double x) {
    if (x != x) return 0;
    if (x >= 9223372036854775807.0) return INT64_MAX; /* 2^63 */
    if (x <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)x;
}

/* Read element `p` of dtype d as double / write double v to it (slow paths:
 * printing, item(), tests). Writing rounds like musa_cast. */
double musa_load_f64(const void *p, musa_dtype d);
void musa_store_f64(void *p, musa_dtype d, double v);
/* Exact int64 load/store for integer dtypes (floats go through double). */
int64_t musa_load_i64(const void *p, musa_dtype d);
void musa_store_i64(void *p, musa_dtype d, int64_t v);

/* The lowest dtype of the category (bool / int64 / float32 for wrapped
 * numbers) - the "default" dtype of each category. */
musa_dtype musa_default_dtype(int category);

#endif
