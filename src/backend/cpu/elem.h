/*
 * elem.h - per-dtype element helpers shared by the CPU kernels: the C type
 * of each dtype, how it loads into its compute type (float16/bfloat16 load
 * as float), how a compute value stores back (rounding once), and an
 * X-macro over all dtypes.
 */
#ifndef MUSA_CPU_ELEM_H
#define MUSA_CPU_ELEM_H

#include "../../base/dtype.h"
#include "../kernel.h"

/* X(suffix, C type, compute type, dtype enum) */
#define MUSA_FOR_DTYPES(X)                                                                         \
    X(f32, float, float, MUSA_DTYPE_FLOAT32)                                                       \
    X(f64, double, double, MUSA_DTYPE_FLOAT64)                                                     \
    X(f16, musa_f16, float, MUSA_DTYPE_FLOAT16)                                                    \
    X(bf16, musa_bf16, float, MUSA_DTYPE_BFLOAT16)                                                 \
    X(i64, int64_t, int64_t, MUSA_DTYPE_INT64)                                                     \
    X(i32, int32_t, int32_t, MUSA_DTYPE_INT32)                                                     \
    X(i16, int16_t, int16_t, MUSA_DTYPE_INT16)                                                     \
    X(i8, int8_t, int8_t, MUSA_DTYPE_INT8)                                                         \
    X(u8, uint8_t, uint8_t, MUSA_DTYPE_UINT8)                                                      \
    X(b, uint8_t, uint8_t, MUSA_DTYPE_BOOL)

#define MUSA_FOR_FLOATS(X)                                                                         \
    X(f32, float, float, MUSA_DTYPE_FLOAT32)                                                       \
    X(f64, double, double, MUSA_DTYPE_FLOAT64)                                                     \
    X(f16, musa_f16, float, MUSA_DTYPE_FLOAT16)                                                    \
    X(bf16, musa_bf16, float, MUSA_DTYPE_BFLOAT16)

#define MUSA_FOR_INTS(X)                                                                           \
    X(i64, int64_t, int64_t, MUSA_DTYPE_INT64)                                                     \
    X(i32, int32_t, int32_t, MUSA_DTYPE_INT32)                                                     \
    X(i16, int16_t, int16_t, MUSA_DTYPE_INT16)                                                     \
    X(i8, int8_t, int8_t, MUSA_DTYPE_INT8)                                                         \
    X(u8, uint8_t, uint8_t, MUSA_DTYPE_UINT8)

/* Elements per block of the elementwise loops (unary.c, binary.c), and per
 * block of their padded tails (a multiple of every SIMD width in use). */
#define MUSA_VBLK  64
#define MUSA_VTAIL 16

/* Load an element into its compute type. */
#define LD_f32(x)  (x)
#define LD_f64(x)  (x)
#define LD_f16(x)  ((float)(x))
#define LD_bf16(x) musa_bf16_to_f32(x)
#define LD_i64(x)  (x)
#define LD_i32(x)  (x)
#define LD_i16(x)  (x)
#define LD_i8(x)   (x)
#define LD_u8(x)   (x)
#define LD_b(x)    (x)

/* Store a value of any arithmetic C type into an element, converting the
 * way musa_cast documents (saturating float->int, nonzero->bool). */
static inline int64_t musa_to_i64_f(float v) {
    return musa_sat_i64(v);
}
static inline int64_t musa_to_i64_d(double v) {
    return musa_sat_i64(v);
}
#define MUSA_IS_FP(v) _Generic((v), float : 1, double : 1, default : 0)
#define ST_f32(v)     ((float)(v))
#define ST_f64(v)     ((double)(v))
#define ST_f16(v)     MUSA_TO_F16(v)
#define ST_bf16(v)                                                                                 \
    _Generic((v), float                                                                            \
             : musa_f32_to_bf16, double                                                            \
             : musa_f64_to_bf16, default                                                           \
             : musa_f64_to_bf16)(v)
#define ST_i64(v)                                                                                  \
    _Generic((v), float : musa_sat_i64, double : musa_sat_i64, default : musa_wrap_i64)(v)
#define ST_i32(v)                                                                                  \
    _Generic((v), float : musa_sat_i32, double : musa_sat_i32, default : musa_wrap_i32)(v)
#define ST_i16(v)                                                                                  \
    _Generic((v), float : musa_sat_i16, double : musa_sat_i16, default : musa_wrap_i16)(v)
#define ST_i8(v) _Generic((v), float : musa_sat_i8, double : musa_sat_i8, default : musa_wrap_i8)(v)
#define ST_u8(v) _Generic((v), float : musa_sat_u8, double : musa_sat_u8, default : musa_wrap_u8)(v)
#define ST_b(v)  ((uint8_t)((v) != 0))

/* Integer narrowing wraps modulo 2^n (defined, via unsigned arithmetic). */
static inline int64_t musa_wrap_i64(int64_t v) {
    return v;
}
static inline int32_t musa_wrap_i32(int64_t v) {
    return (int32_t)(uint32_t)(uint64_t)v;
}
static inline int16_t musa_wrap_i16(int64_t v) {
    return (int16_t)(uint16_t)(uint64_t)v;
}
static inline int8_t musa_wrap_i8(int64_t v) {
    return (int8_t)(uint8_t)(uint64_t)v;
}
static inline uint8_t musa_wrap_u8(int64_t v) {
    return (uint8_t)(uint64_t)v;
}

#endif
