/*
 * vmath.h - tells GCC that glibc's libmvec has SIMD versions of the libm
 * functions the kernels call, so contiguous loops over expf, tanhf, erff,
 * ... vectorise (calls to _ZGVeN16v_expf and friends on AVX-512, the SSE/AVX2
 * variants elsewhere). libmvec is part of glibc (2.35+ for erf, tanh,
 * expm1, log1p); its documented error is at most 4 ulp, inside the float32
 * and float64 tolerances the op tests use.
 *
 * Include after <math.h>; needs -fopenmp-simd and linking with -lmvec.
 */
#ifndef MUSA_CPU_VMATH_H
#define MUSA_CPU_VMATH_H

#include <math.h>

#define MUSA_SIMD_DECL1(f, T) _Pragma("omp declare simd notinbranch") extern T f(T);
#define MUSA_SIMD_DECL2(f, T) _Pragma("omp declare simd notinbranch") extern T f(T, T);

MUSA_SIMD_DECL1(expf, float)
MUSA_SIMD_DECL1(expm1f, float)
MUSA_SIMD_DECL1(logf, float)
MUSA_SIMD_DECL1(log1pf, float)
MUSA_SIMD_DECL1(sinf, float)
MUSA_SIMD_DECL1(cosf, float)
MUSA_SIMD_DECL1(tanhf, float)
MUSA_SIMD_DECL1(erff, float)
MUSA_SIMD_DECL2(powf, float)
MUSA_SIMD_DECL1(exp, double)
MUSA_SIMD_DECL1(expm1, double)
MUSA_SIMD_DECL1(log, double)
MUSA_SIMD_DECL1(log1p, double)
MUSA_SIMD_DECL1(sin, double)
MUSA_SIMD_DECL1(cos, double)
MUSA_SIMD_DECL1(tanh, double)
MUSA_SIMD_DECL1(erf, double)
MUSA_SIMD_DECL2(pow, double)

#endif
