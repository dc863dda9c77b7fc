/*
 * musa.h - the public C API of musa, a deep learning framework.
 *
 * This header is the manual. Read it top to bottom once; every later section
 * builds on the ones before it.
 *
 * ## A worked example
 *
 *     #include <musa.h>
 *     #include <stdio.h>
 *
 *     int main(void) {
 *         int64_t shape[2] = {2, 3};
 *         musa_tensor *x = musa_arange(0, 6, 1, MUSA_DTYPE_FLOAT32); // [0 1 2 3 4 5]
 *         musa_tensor *a = musa_reshape(x, 2, shape);                // 2x3 view of x
 *         musa_tensor *b = musa_mul(a, a);                           // new 2x3 tensor
 *         musa_tensor *s = musa_sum(b, 0, NULL, false);              // 0-d tensor: 55
 *         double v;
 *         if (musa_tensor_item(s, &v) != MUSA_OK) {                  // NULLs propagate:
 *             fprintf(stderr, "%s\n", musa_last_error());            // check once, at
 *             return 1;                                              // the end
 *         }
 *         printf("sum of squares = %g\n", v);
 *         musa_tensor_release(s); musa_tensor_release(b);
 *         musa_tensor_release(a); musa_tensor_release(x);
 *         return 0;
 *     }
 *
 * ## Ownership
 *
 * - Tensors are reference counted. Every function that returns a
 *   `musa_tensor *` returns a NEW reference: the caller owns it and must call
 *   musa_tensor_release() once. musa_tensor_retain() adds a reference.
 * - Arguments are BORROWED: a function never takes ownership of a tensor it is
 *   given, and never keeps it past the call unless it retains it.
 * - musa_tensor_release(NULL) is a no-op.
 * - Views (musa_view, musa_permute, musa_slice, musa_expand, ...) share
 *   storage with their base. Writing through a view writes the base.
 *
 * ## Errors
 *
 * - A function that returns a pointer returns NULL on failure; a function that
 *   returns `int` returns MUSA_OK (0) or a negative MUSA_ERR_* code.
 * - On failure a thread-local last error is set: musa_last_error() gives the
 *   message, prefixed with the function or op that failed, for example
 *   "[matmul] shapes (2,3) and (4,5) cannot be multiplied".
 * - Every op accepts NULL inputs and then fails at once without overwriting
 *   the last error. So a chain of calls can be checked once at the end: the
 *   message is the one from the first failure.
 * - No function ever aborts, exits or prints because of bad input.
 *
 * ## Threads
 *
 * - The last error, grad mode and the dispatcher mode are thread-local.
 * - A tensor may be read from several threads at once; writing a tensor while
 *   another thread reads it is a data race, as in any array library.
 * - musa_set_num_threads() bounds every thread musa uses: its own pool, the
 *   OpenMP threads of oneDNN and the BLAS threads.
 *
 * ## Type promotion (binary and ternary ops)
 *
 * Operands are ranked in three tiers: tensors with at least one dimension,
 * 0-d tensors, and wrapped numbers (musa_number_*: what a Python scalar
 * becomes). The result dtype is the promotion of the highest non-empty tier,
 * unless a lower tier holds a higher *category* (bool < integer < floating),
 * in which case that category wins: a float number with an integer tensor
 * gives float32, an int number with a bool tensor gives int64, and a float64
 * 0-d tensor with a float32 tensor stays float32. Within a tier: bool < uint8
 * < int8 < int32 < int64 < float16/bfloat16 < float32 < float64, with
 * uint8+int8 -> int16-like int32 and float16+bfloat16 -> float32.
 * Per-op rules (division, comparisons, float-only functions) are given where
 * the op is declared.
 */
#ifndef MUSA_H
#define MUSA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MUSA_API __attribute__((visibility("default")))

#define MUSA_VERSION_MAJOR 0
#define MUSA_VERSION_MINOR 1
#define MUSA_VERSION_PATCH 0

/* The most dimensions a tensor may have. */
#define MUSA_MAX_DIMS 8

/* ------------------------------------------------------------------------ */
/* Status codes and the last error                                          */
/* ------------------------------------------------------------------------ */

enum musa_status {
    MUSA_OK = 0,
    MUSA_ERR_VALUE = -1,           /* bad value or shape           -> ValueError          */
    MUSA_ERR_TYPE = -2,            /* unsupported dtype            -> TypeError           */
    MUSA_ERR_INDEX = -3,           /* index or dim out of range    -> IndexError          */
    MUSA_ERR_RUNTIME = -4,         /* state error (e.g. autograd)  -> RuntimeError        */
    MUSA_ERR_NOMEM = -5,           /* allocation failed            -> MemoryError         */
    MUSA_ERR_NOT_IMPLEMENTED = -6, /* valid but not supported yet  -> NotImplementedError */
    MUSA_ERR_IO = -7,              /* file or format error         -> OSError             */
    MUSA_ERR_DEVICE = -8,          /* device not available         -> RuntimeError        */
    MUSA_ERR_ZERO_DIVISION = -9,   /* integer division by zero     -> ZeroDivisionError   */
    MUSA_ERR_INTERRUPTED = -10,    /* musa_interrupt() stopped it  -> KeyboardInterrupt   */
    MUSA_ERR_LINALG = -11,         /* a factorization failed on its values (singular, not
                                    * positive-definite, no convergence) -> musa.linalg.LinAlgError,
                                    * a subclass of musa.InvalidArgumentError */
};

/* The message of the last error on this thread ("" if none). Never NULL. */
MUSA_API const char *musa_last_error(void);
/* The code of the last error on this thread (MUSA_OK if none). */
MUSA_API int musa_last_error_code(void);
/* The source location attached to the last error, if any: *file is NULL when
 * none is known. Locations come from musa_set_error_location (the Python
 * layer and the graph executor attach the user's file:line). */
MUSA_API void musa_last_error_location(const char **file, int *line);
/* Attach a source location to the current last error. */
MUSA_API void musa_set_error_location(const char *file, int line);
/* Set this thread's last error (code: a negative MUSA_ERR_*; anything else
 * becomes MUSA_ERR_RUNTIME) and return the code, for code that extends
 * musa, such as a custom op's functions. musa prefixes "[op] " when the
 * message does not start with '['. */
MUSA_API int musa_set_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Forget the last error on this thread. */
MUSA_API void musa_clear_error(void);
/* A short name for a status code, e.g. "MUSA_ERR_VALUE". */
MUSA_API const char *musa_status_name(int code);

/* Interrupts. musa_interrupt() asks the running ops to stop: parallel loops
 * stop taking chunks, long serial loops check between blocks, and the op
 * fails with MUSA_ERR_INTERRUPTED ("[op] interrupted"), its fresh outputs
 * discarded (an in-place op may have written part of its target). It is
 * async-signal-safe (an atomic store), so a SIGINT handler may call it. The
 * request is consumed by the op that reports it. */
MUSA_API void musa_interrupt(void);
/* A hook around kernels that may run long (about 2^18 elements or more):
 * called with true before and false after, on the calling thread. A front
 * end uses it to release its interpreter lock and to route Ctrl-C to
 * musa_interrupt while the kernel runs. NULL (the default) removes it. */
MUSA_API void musa_set_long_op_hook(void (*hook)(bool begin));

/* ------------------------------------------------------------------------ */
/* Data types and devices                                                   */
/* ------------------------------------------------------------------------ */

typedef enum musa_dtype {
    MUSA_DTYPE_FLOAT32 = 0,
    MUSA_DTYPE_FLOAT64 = 1,
    MUSA_DTYPE_FLOAT16 = 2,  /* IEEE binary16 */
    MUSA_DTYPE_BFLOAT16 = 3, /* bfloat16: float32 with 7 mantissa bits */
    MUSA_DTYPE_INT64 = 4,
    MUSA_DTYPE_INT32 = 5,
    MUSA_DTYPE_INT8 = 6,
    MUSA_DTYPE_UINT8 = 7,
    MUSA_DTYPE_BOOL = 8,  /* one byte, 0 or 1 */
    MUSA_DTYPE_INT16 = 9, /* added after bool: codes in saved files stay */
    MUSA_DTYPE_COUNT = 10,
} musa_dtype;

/* "float32", "int64", ...; "?" for an invalid value. */
MUSA_API const char *musa_dtype_name(musa_dtype dtype);
/* Bytes per element; 0 for an invalid dtype. */
MUSA_API size_t musa_dtype_size(musa_dtype dtype);
MUSA_API bool musa_dtype_is_floating(musa_dtype dtype);
/* The dtype named `name` ("float32", "float", "half", "long", ...), or -1. */
MUSA_API int musa_dtype_from_name(const char *name);
/* The promoted dtype of two dtypes in the same tier (see Type promotion). */
MUSA_API musa_dtype musa_promote_types(musa_dtype a, musa_dtype b);

typedef enum musa_device_type {
    MUSA_DEVICE_CPU = 0,
    MUSA_DEVICE_CUDA = 1, /* recognised; not available in this build */
} musa_device_type;

typedef struct musa_device {
    musa_device_type type;
    int index; /* device ordinal; 0 for the CPU */
} musa_device;

/* Check that a device can hold tensors. Returns MUSA_OK for the CPU and
 * MUSA_ERR_DEVICE ("[device] cuda is not available in this build") for CUDA. */
MUSA_API int musa_device_check(musa_device device);
/* Whether a CUDA device is usable (always false in this build). */
MUSA_API bool musa_cuda_is_available(void);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct musa_tensor musa_tensor;

/* Reference counting. retain returns its argument. */
MUSA_API musa_tensor *musa_tensor_retain(musa_tensor *t);
MUSA_API void musa_tensor_release(musa_tensor *t);

/* Shape and layout. Strides are in elements, as in NumPy divided by itemsize. */
MUSA_API int musa_tensor_ndim(const musa_tensor *t);
MUSA_API const int64_t *musa_tensor_shape(const musa_tensor *t);
MUSA_API const int64_t *musa_tensor_strides(const musa_tensor *t);
/* Size of dimension `dim` (negative counts from the end); -1 and an error if
 * out of range. */
MUSA_API int64_t musa_tensor_size(const musa_tensor *t, int64_t dim);
MUSA_API int64_t musa_tensor_numel(const musa_tensor *t);
/* Offset of the first element in its storage, in elements. */
MUSA_API int64_t musa_tensor_offset(const musa_tensor *t);
MUSA_API musa_dtype musa_tensor_dtype(const musa_tensor *t);
MUSA_API musa_device musa_tensor_device(const musa_tensor *t);
/* Row-major contiguous (size-1 dims may have any stride). */
MUSA_API bool musa_tensor_is_contiguous(const musa_tensor *t);
/* A meta tensor has a shape and dtype but no storage (symbolic mode). */
MUSA_API bool musa_tensor_is_meta(const musa_tensor *t);
/* Pointer to the first element (base pointer + offset), or NULL for a meta
 * tensor. Valid while the tensor (or any view of its storage) is alive.
 * Waits for stream work on the tensor's storage first (see Streams). */
MUSA_API void *musa_tensor_data(const musa_tensor *t);
/* Wait for stream work that reads or writes the tensor's storage; returns
 * the error of failed work it waited for. Host reads (copy_to, item, get)
 * do this themselves. */
MUSA_API int musa_tensor_sync(const musa_tensor *t);
/* Whether two tensors share storage. */
MUSA_API bool musa_tensor_shares_storage(const musa_tensor *a, const musa_tensor *b);
/* The whole storage t looks into, as a new 1-D uint8 tensor of all its
 * bytes (offset 0) sharing the memory: what Python's untyped_storage()
 * wraps. NULL and MUSA_ERR_VALUE for a meta tensor. */
MUSA_API musa_tensor *musa_tensor_storage_bytes(const musa_tensor *t);
/* The version counter shared by all views of a storage; bumped by every
 * in-place write. Autograd uses it to detect modified saved tensors. */
MUSA_API uint64_t musa_tensor_version(const musa_tensor *t);
/* Bump the version counter (for code that writes musa_tensor_data directly). */
MUSA_API void musa_tensor_bump_version(musa_tensor *t);

/* Copy the elements (any layout) into `dst` as a row-major array of the
 * tensor's dtype. Fails with MUSA_ERR_VALUE unless dst_bytes >= numel*size. */
MUSA_API int musa_tensor_copy_to(const musa_tensor *t, void *dst, size_t dst_bytes);
/* The value of a one-element tensor as double / int64 (any dtype). */
MUSA_API int musa_tensor_item(const musa_tensor *t, double *out);
MUSA_API int musa_tensor_item_int(const musa_tensor *t, int64_t *out);
/* Read one element at a multi-index (ndim entries, negatives allowed). */
MUSA_API int musa_tensor_get(const musa_tensor *t, const int64_t *index, double *out);
/* One opaque pointer per tensor for language bindings (the Python layer
 * keeps its wrapper object here, borrowed). NULL until set; views and
 * copies start with NULL. */
MUSA_API void *musa_tensor_handle(const musa_tensor *t);
MUSA_API void musa_tensor_set_handle(musa_tensor *t, void *handle);
/* Human-readable dump ("tensor([[1., 2.], ...], dtype=...)") into buf;
 * returns the length it needed (like snprintf), or -1 with the error set
 * (no memory, or failed stream work that was to produce t). */
MUSA_API int musa_tensor_format(const musa_tensor *t, char *buf, size_t buf_size);
/* How musa_tensor_format prints, for the whole process (PyTorch's
 * set_printoptions): decimals of floats; a tensor of more elements than
 * threshold shows edgeitems at each end of every dim around "..."; rows
 * wrap at linewidth columns; sci_mode 1 always prints floats in scientific
 * notation, 0 never, -1 when their range asks for it. Defaults 4, 1000, 3,
 * 80, -1. set validates (MUSA_ERR_VALUE) and changes nothing on error. */
typedef struct musa_print_options {
    int precision;
    int64_t threshold;
    int edgeitems;
    int linewidth;
    int sci_mode;
} musa_print_options;
MUSA_API int musa_set_print_options(const musa_print_options *options);
MUSA_API void musa_get_print_options(musa_print_options *options);

/* ------------------------------------------------------------------------ */
/* Creation                                                                 */
/* ------------------------------------------------------------------------ */

/* Uninitialised, zeros, ones, or `value`. Shapes have 0..MUSA_MAX_DIMS dims,
 * each >= 0 (0 gives an empty tensor); ndim 0 gives a 0-d scalar tensor. */
MUSA_API musa_tensor *musa_empty(int ndim, const int64_t *shape, musa_dtype dtype);
MUSA_API musa_tensor *musa_zeros(int ndim, const int64_t *shape, musa_dtype dtype);
MUSA_API musa_tensor *musa_ones(int ndim, const int64_t *shape, musa_dtype dtype);
MUSA_API musa_tensor *musa_full(int ndim, const int64_t *shape, double value, musa_dtype dtype);
/* Same shape and dtype as `like`. */
MUSA_API musa_tensor *musa_zeros_like(const musa_tensor *like);
MUSA_API musa_tensor *musa_ones_like(const musa_tensor *like);
MUSA_API musa_tensor *musa_full_like(const musa_tensor *like, double value);
/* [start, end) in steps of `step` (nonzero); ceil((end-start)/step) values. */
MUSA_API musa_tensor *musa_arange(double start, double end, double step, musa_dtype dtype);
/* `steps` evenly spaced values from start to end inclusive. */
MUSA_API musa_tensor *musa_linspace(double start, double end, int64_t steps, musa_dtype dtype);
/* n x m matrix with ones on the diagonal (m < 0 means m = n). */
MUSA_API musa_tensor *musa_eye(int64_t n, int64_t m, musa_dtype dtype);
/* A copy of `ndim`/`shape` row-major elements of `dtype` read from `data`. */
MUSA_API musa_tensor *musa_from_data(const void *data, int ndim, const int64_t *shape,
                                     musa_dtype dtype);
/* Wrap memory owned elsewhere, without copying. strides (in elements) may be
 * NULL for row-major. `deleter(ctx)` is called when the last view dies
 * (deleter may be NULL). The memory must stay valid until then. data must
 * be aligned to the element size (MUSA_ERR_VALUE otherwise: copy unaligned
 * memory with musa_from_data, which takes any address). */
MUSA_API musa_tensor *musa_from_blob(void *data, int ndim, const int64_t *shape,
                                     const int64_t *strides, musa_dtype dtype,
                                     void (*deleter)(void *ctx), void *ctx);
/* 0-d tensors holding one value. */
MUSA_API musa_tensor *musa_scalar(double value, musa_dtype dtype);
/* Wrapped numbers: 0-d tensors with the lowest promotion priority, the way a
 * Python number behaves in PyTorch (float64, int64 and bool). */
MUSA_API musa_tensor *musa_number(double value);
MUSA_API musa_tensor *musa_number_int(int64_t value);
MUSA_API musa_tensor *musa_number_bool(bool value);
MUSA_API bool musa_tensor_is_number(const musa_tensor *t);

/* ------------------------------------------------------------------------ */
/* Random numbers                                                           */
/* ------------------------------------------------------------------------ */
/* One global generator: Philox4x32-10, counter based. Element i of a call
 * depends only on (seed, the generator's offset, i), never on the number of
 * threads. Each call advances the offset past the values it used. */

MUSA_API void musa_manual_seed(uint64_t seed);
MUSA_API uint64_t musa_initial_seed(void);
/* Save and restore the generator (seed and offset). */
MUSA_API void musa_get_rng_state(uint64_t *seed, uint64_t *offset);
MUSA_API void musa_set_rng_state(uint64_t seed, uint64_t offset);

/* Uniform [0, 1) and standard normal; floating dtypes only. */
MUSA_API musa_tensor *musa_rand(int ndim, const int64_t *shape, musa_dtype dtype);
MUSA_API musa_tensor *musa_randn(int ndim, const int64_t *shape, musa_dtype dtype);
/* Uniform integers in [low, high); any non-bool dtype. */
MUSA_API musa_tensor *musa_randint(int64_t low, int64_t high, int ndim, const int64_t *shape,
                                   musa_dtype dtype);
/* 1 with probability p[i], else 0; same shape and dtype as p (floating). */
MUSA_API musa_tensor *musa_bernoulli(musa_tensor *p);
/* Samplers (each element its own draws; parameters must be floating, of one
 * promoted dtype, which the samples take; a bad parameter fails with
 * MUSA_ERR_VALUE naming its first element):
 * - musa_standard_gamma: Gamma(alpha, 1) for every alpha > 0 (inf gives
 *   inf), at least the dtype's smallest normal number; differentiable in
 *   alpha (the implicit gradient, musa_standard_gamma_grad);
 * - musa_poisson: Poisson(rate), rate >= 0;
 * - musa_binomial: Binomial(count, prob), count non-negative whole numbers
 *   and prob in [0, 1], broadcast together. */
MUSA_API musa_tensor *musa_standard_gamma(musa_tensor *alpha);
MUSA_API musa_tensor *musa_poisson(musa_tensor *rate);
MUSA_API musa_tensor *musa_binomial(musa_tensor *count, musa_tensor *prob);

/* ------------------------------------------------------------------------ */
/* Views (share storage; no data is copied)                                 */
/* ------------------------------------------------------------------------ */

/* One entry of `shape` may be -1 (inferred). view fails if the strides do
 * not allow it; reshape then copies. */
MUSA_API musa_tensor *musa_view(musa_tensor *x, int ndim, const int64_t *shape);
MUSA_API musa_tensor *musa_reshape(musa_tensor *x, int ndim, const int64_t *shape);
/* Flatten dims start..end (inclusive) into one. */
MUSA_API musa_tensor *musa_flatten(musa_tensor *x, int64_t start_dim, int64_t end_dim);
MUSA_API musa_tensor *musa_permute(musa_tensor *x, int ndim, const int64_t *dims);
MUSA_API musa_tensor *musa_transpose(musa_tensor *x, int64_t dim0, int64_t dim1);
/* Elements start, start+step, ... < end along `dim`; start/end are clamped as
 * in Python slicing (negatives count from the end); step > 0. */
MUSA_API musa_tensor *musa_slice(musa_tensor *x, int64_t dim, int64_t start, int64_t end,
                                 int64_t step);
/* Drop dimension `dim`, taking index `index` (negative counts from the end). */
MUSA_API musa_tensor *musa_select(musa_tensor *x, int64_t dim, int64_t index);
/* Broadcast to `shape` (-1 keeps a size); new leading dims allowed. */
MUSA_API musa_tensor *musa_expand(musa_tensor *x, int ndim, const int64_t *shape);
MUSA_API musa_tensor *musa_broadcast_to(musa_tensor *x, int ndim, const int64_t *shape);
/* Remove the listed size-1 dims (ndims = 0: all size-1 dims). Listed dims
 * whose size is not 1 are left alone, as in PyTorch. */
MUSA_API musa_tensor *musa_squeeze(musa_tensor *x, int ndims, const int64_t *dims);
MUSA_API musa_tensor *musa_unsqueeze(musa_tensor *x, int64_t dim);
/* Any strides into x's storage; checked to stay inside the storage. */
MUSA_API musa_tensor *musa_as_strided(musa_tensor *x, int ndim, const int64_t *shape,
                                      const int64_t *strides, int64_t offset);
/* x itself (a new reference) when contiguous, else a contiguous copy. */
MUSA_API musa_tensor *musa_contiguous(musa_tensor *x);
/* A copy of x (row-major) whose region (shape, strides, offset, counted in
 * x's row-major elements) holds src instead: the out-of-place form of
 * writing into a view. src has the region's shape. */
MUSA_API musa_tensor *musa_as_strided_scatter(musa_tensor *x, musa_tensor *src, int ndim,
                                              const int64_t *shape, const int64_t *strides,
                                              int64_t offset);

/* ------------------------------------------------------------------------ */
/* Elementwise ops                                                          */
/* ------------------------------------------------------------------------ */
/* Unary float functions (exp, log, sqrt, sin, tanh, sigmoid, erf, ...) on
 * integer or bool input compute in float32. neg, abs, sign, relu keep the
 * dtype (not bool for neg). floor/ceil/round are identities on integers;
 * round is half-to-even. logical_not, isnan, isinf return bool. */

MUSA_API musa_tensor *musa_neg(musa_tensor *x);
MUSA_API musa_tensor *musa_abs(musa_tensor *x);
MUSA_API musa_tensor *musa_sign(musa_tensor *x);
MUSA_API musa_tensor *musa_exp(musa_tensor *x);
MUSA_API musa_tensor *musa_expm1(musa_tensor *x);
MUSA_API musa_tensor *musa_log(musa_tensor *x);
MUSA_API musa_tensor *musa_log1p(musa_tensor *x);
MUSA_API musa_tensor *musa_sqrt(musa_tensor *x);
MUSA_API musa_tensor *musa_rsqrt(musa_tensor *x);
MUSA_API musa_tensor *musa_reciprocal(musa_tensor *x);
MUSA_API musa_tensor *musa_sin(musa_tensor *x);
MUSA_API musa_tensor *musa_cos(musa_tensor *x);
MUSA_API musa_tensor *musa_tanh(musa_tensor *x);
MUSA_API musa_tensor *musa_sigmoid(musa_tensor *x);
MUSA_API musa_tensor *musa_erf(musa_tensor *x);
MUSA_API musa_tensor *musa_erfc(musa_tensor *x); /* 1 - erf(x), accurate where erf(x) is near 1 */
/* Modified Bessel functions of the first kind I0 and I1, and exp(-|x|) I0,
 * exp(-|x|) I1 (no overflow); integer inputs give float32 */
MUSA_API musa_tensor *musa_i0(musa_tensor *x);
MUSA_API musa_tensor *musa_i0e(musa_tensor *x);
MUSA_API musa_tensor *musa_i1(musa_tensor *x);
MUSA_API musa_tensor *musa_i1e(musa_tensor *x);
/* Bessel functions of the first kind J0, J1 (J1 odd, J0 even), of the
 * second kind Y0, Y1 (NaN below 0, -inf at 0), modified of the second kind
 * K0, K1 (NaN below 0, inf at 0) and exp(x) K0, exp(x) K1; all within a
 * few ulp in float64 (J and Y: of their envelope sqrt(2 / (pi x)) near
 * their zeros), 0 at inf, differentiable; integer inputs give float32 */
MUSA_API musa_tensor *musa_bessel_j0(musa_tensor *x);
MUSA_API musa_tensor *musa_bessel_j1(musa_tensor *x);
MUSA_API musa_tensor *musa_bessel_y0(musa_tensor *x);
MUSA_API musa_tensor *musa_bessel_y1(musa_tensor *x);
MUSA_API musa_tensor *musa_modified_bessel_k0(musa_tensor *x);
MUSA_API musa_tensor *musa_modified_bessel_k1(musa_tensor *x);
MUSA_API musa_tensor *musa_scaled_modified_bessel_k0(musa_tensor *x);
MUSA_API musa_tensor *musa_scaled_modified_bessel_k1(musa_tensor *x);
/* Airy's function Ai: within a few ulp in float64 (below -10, of its
 * envelope |x|^(-1/4) / sqrt(pi)); 0 at inf, NaN where |x|^(3/2) overflows
 * double (x < -1e205); differentiable; integer inputs give float32 */
MUSA_API musa_tensor *musa_airy_ai(musa_tensor *x);
MUSA_API musa_tensor *musa_asin(musa_tensor *x);
MUSA_API musa_tensor *musa_acos(musa_tensor *x);
MUSA_API musa_tensor *musa_atan(musa_tensor *x);
MUSA_API musa_tensor *musa_asinh(musa_tensor *x);
MUSA_API musa_tensor *musa_acosh(musa_tensor *x);
MUSA_API musa_tensor *musa_atanh(musa_tensor *x);
MUSA_API musa_tensor *musa_relu(musa_tensor *x);
MUSA_API musa_tensor *musa_floor(musa_tensor *x);
MUSA_API musa_tensor *musa_ceil(musa_tensor *x);
MUSA_API musa_tensor *musa_round(musa_tensor *x);
MUSA_API musa_tensor *musa_trunc(musa_tensor *x);
MUSA_API musa_tensor *musa_logical_not(musa_tensor *x);
MUSA_API musa_tensor *musa_isnan(musa_tensor *x);
MUSA_API musa_tensor *musa_isinf(musa_tensor *x);
/* ~x on integer tensors, logical not on bool; floats fail with
 * MUSA_ERR_TYPE. */
MUSA_API musa_tensor *musa_bitwise_not(musa_tensor *x);

/* Binary ops broadcast as NumPy does and promote as described above.
 * div is true division (integers give float32); floor_divide rounds toward
 * -inf; fmod takes the sign of the dividend, remainder that of the divisor;
 * integer division by zero fails with MUSA_ERR_ZERO_DIVISION. Integer
 * arithmetic wraps on overflow. pow of integers to negative integer powers
 * fails. maximum/minimum propagate NaN. Comparisons return bool;
 * logical_and/or/xor take any dtype (nonzero is true) and return bool. */
MUSA_API musa_tensor *musa_add(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_sub(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_mul(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_div(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_floor_divide(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_pow(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_maximum(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_minimum(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_fmod(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_remainder(musa_tensor *a, musa_tensor *b);
/* |a| with the sign of b (floats; integers give float32), as copysign(3). */
MUSA_API musa_tensor *musa_copysign(musa_tensor *a, musa_tensor *b);
/* The regularised incomplete gamma functions P(a, x) = gammainc and
 * Q(a, x) = 1 - P = gammaincc (floats; integers give float32; NaN where a
 * or x is negative, PyTorch's values at 0 and inf), differentiable in both
 * arguments; and dx/da along P(a, x) fixed, the gradient of a Gamma(a)
 * sample x in a (NaN unless a > 0 and x > 0). */
MUSA_API musa_tensor *musa_igamma(musa_tensor *a, musa_tensor *x);
MUSA_API musa_tensor *musa_igammac(musa_tensor *a, musa_tensor *x);
MUSA_API musa_tensor *musa_standard_gamma_grad(musa_tensor *a, musa_tensor *x);
MUSA_API musa_tensor *musa_eq(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_ne(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_lt(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_le(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_gt(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_ge(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_logical_and(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_logical_or(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_logical_xor(musa_tensor *a, musa_tensor *b);
/* Bitwise ops on integer and bool tensors (promoted; a float operand fails
 * with MUSA_ERR_TYPE); on bool, and/or/xor are the logical ops. Shifts take
 * integers only: a left shift wraps, a right shift of a negative value is
 * arithmetic, and a count below 0 or at least the dtype's width gives 0
 * (left) or the sign, 0 or -1 (right), as NumPy does. */
MUSA_API musa_tensor *musa_bitwise_and(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_bitwise_or(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_bitwise_xor(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_bitwise_left_shift(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_bitwise_right_shift(musa_tensor *a, musa_tensor *b);
/* Greatest common divisor and least common multiple of integer tensors
 * (never negative; gcd(0, 0) = 0, lcm with a 0 is 0; lcm wraps). */
MUSA_API musa_tensor *musa_gcd(musa_tensor *a, musa_tensor *b);
MUSA_API musa_tensor *musa_lcm(musa_tensor *a, musa_tensor *b);
/* cond ? a : b elementwise; cond is read as bool; a and b are promoted. */
MUSA_API musa_tensor *musa_where(musa_tensor *cond, musa_tensor *a, musa_tensor *b);
/* Clamp into [*min, *max]; a NULL bound is absent. Keeps x's dtype (an
 * integer tensor with a fractional bound computes in float32). */
MUSA_API musa_tensor *musa_clamp(musa_tensor *x, const double *min, const double *max);
/* Elementwise conversion; floats to integers truncate toward zero and
 * saturate (NaN gives 0); to bool is "nonzero"; float16 and bfloat16 round
 * to nearest even. */
MUSA_API musa_tensor *musa_cast(musa_tensor *x, musa_dtype dtype);
/* The dtype a binary or ternary op gives the n operands ts (see Type
 * promotion; PyTorch's result_type). */
MUSA_API musa_dtype musa_result_type(int n, musa_tensor *const *ts);
/* A contiguous copy. */
MUSA_API musa_tensor *musa_clone(musa_tensor *x);

/* In place: the result (broadcast to self's shape, cast to self's dtype) is
 * written into self, whose version counter is bumped. */
MUSA_API int musa_add_(musa_tensor *self, musa_tensor *other);
MUSA_API int musa_sub_(musa_tensor *self, musa_tensor *other);
MUSA_API int musa_mul_(musa_tensor *self, musa_tensor *other);
MUSA_API int musa_div_(musa_tensor *self, musa_tensor *other);
/* dst[...] = src, broadcasting src and converting its dtype. */
MUSA_API int musa_copy_(musa_tensor *dst, musa_tensor *src);
MUSA_API int musa_fill_(musa_tensor *self, double value);
MUSA_API int musa_zero_(musa_tensor *self);

/* ------------------------------------------------------------------------ */
/* Reductions                                                               */
/* ------------------------------------------------------------------------ */
/* `dims` lists ndims dims to reduce (negatives allowed, no repeats);
 * ndims = 0 reduces every dim. keepdim keeps reduced dims with size 1.
 * sum/prod of integer or bool input give int64; floating input keeps its
 * dtype. Floating sums accumulate in float64 with blocked pairwise
 * summation: before the single rounding to the output dtype the error is at
 * most about (log2(n) + 12) * 2^-53 * sum(|x|). mean/var/std need floating input.
 * Reducing over a zero-size dim gives 0 (sum), 1 (prod) or NaN (mean), and
 * an error for amax/amin/argmax/argmin/max/min. */
MUSA_API musa_tensor *musa_sum(musa_tensor *x, int ndims, const int64_t *dims, bool keepdim);
MUSA_API musa_tensor *musa_mean(musa_tensor *x, int ndims, const int64_t *dims, bool keepdim);
MUSA_API musa_tensor *musa_prod(musa_tensor *x, int ndims, const int64_t *dims, bool keepdim);
MUSA_API musa_tensor *musa_amax(musa_tensor *x, int ndims, const int64_t *dims, bool keepdim);
MUSA_API musa_tensor *musa_amin(musa_tensor *x, int ndims, const int64_t *dims, bool keepdim);
/* Variance with Bessel-style `correction` (1 = unbiased, 0 = population):
 * the squared deviations summed over max(n - correction, 0); NaN over an empty
 * reduction whatever the correction, as in PyTorch. */
MUSA_API musa_tensor *musa_var(musa_tensor *x, int ndims, const int64_t *dims, int64_t correction,
                               bool keepdim);
MUSA_API musa_tensor *musa_std(musa_tensor *x, int ndims, const int64_t *dims, int64_t correction,
                               bool keepdim);
/* log(sum(exp(x))), computed stably by subtracting the max. */
MUSA_API musa_tensor *musa_logsumexp(musa_tensor *x, int ndims, const int64_t *dims, bool keepdim);
/* p-norm over dims, any p as PyTorch defines it: (sum |x|^p)^(1/p), the
 * max (INFINITY) or min (-INFINITY) of |x|, and for p = 0 the count of
 * nonzero elements; NaN p is MUSA_ERR_VALUE, and so are p < 0 and p = INFINITY
 * over an empty reduction (they have no identity; PyTorch's vector_norm refuses them too).
 * p is taken as a float, as PyTorch does: from 3.403e38 it is INFINITY (except
 * over an empty reduction, which gives 0). For p > 0 the gradient at a zero
 * vector, and at the zero elements under p < 1, is 0, as in PyTorch. */
MUSA_API musa_tensor *musa_norm(musa_tensor *x, double p, int ndims, const int64_t *dims,
                                bool keepdim);
/* The 2-norm of all elements of n tensors together, in one pass; a 0-d
 * tensor of the promoted floating dtype (float32 for float16/bfloat16). */
MUSA_API musa_tensor *musa_norm_list(int n, musa_tensor *const *tensors);

/* Along one dim: the max (min) values and their int64 indices (the first
 * index among ties). Both outputs are new references. */
MUSA_API int musa_max_dim(musa_tensor *x, int64_t dim, bool keepdim, musa_tensor **values,
                          musa_tensor **indices);
MUSA_API int musa_min_dim(musa_tensor *x, int64_t dim, bool keepdim, musa_tensor **values,
                          musa_tensor **indices);
/* Index of the max/min along `dim`; dim = MUSA_DIM_ALL flattens x first. */
#define MUSA_DIM_ALL INT64_MIN
MUSA_API musa_tensor *musa_argmax(musa_tensor *x, int64_t dim, bool keepdim);
MUSA_API musa_tensor *musa_argmin(musa_tensor *x, int64_t dim, bool keepdim);

/* ------------------------------------------------------------------------ */
/* Linear algebra                                                           */
/* ------------------------------------------------------------------------ */

/* NumPy matmul: 1-D operands are promoted to matrices and the added dim is
 * removed; leading batch dims broadcast. float32 runs on oneDNN's sgemm,
 * float64 on BLAS dgemm; float16/bfloat16 accumulate in float32; integers
 * accumulate in int64. Transposed views are passed to GEMM without copies. */
MUSA_API musa_tensor *musa_matmul(musa_tensor *a, musa_tensor *b);

/* LAPACK-backed linear algebra (OpenBLAS), PyTorch's torch.linalg. Inputs
 * are float32 or float64 (other dtypes fail with MUSA_ERR_TYPE) and batched
 * over leading dims: A is (.., m, n), and "square" means m == n. Any layout
 * works (each matrix is copied into column-major scratch); empty matrices
 * and empty batches give empty results. Every function below is
 * differentiable unless it says otherwise; gradients assume what PyTorch's
 * do (distinct eigen/singular values, full rank) and are written with
 * these same functions, so second derivatives follow. Numerical failures
 * (a singular A for solve, an A that is not positive-definite for
 * cholesky) fail with MUSA_ERR_VALUE naming the batch element. */

/* X with A X = B, A square (.., n, n), B (.., n, k) or a vector (n,) or
 * (.., n) (B is a vector when it is 1-d or has A's shape less its last
 * dim; X is then one too). Batch dims broadcast. */
MUSA_API musa_tensor *musa_linalg_solve(musa_tensor *a, musa_tensor *b);
/* A = P L U with partial pivoting, A (.., m, n), k = min(m, n): lu holds
 * L (.., m, k; unit lower, its diagonal not stored) and U (.., k, n; upper)
 * in one (.., m, n) matrix; pivots (.., k) int32 are LAPACK's, 1-based (row
 * i was swapped with row pivots[i] - 1, in order); info (..) int32 is 0, or
 * i + 1 where U[i, i] is exactly zero (the factorization is still complete);
 * perm (.., m) int64, or NULL if not wanted, is the row order those swaps
 * make: A[perm] = L U. lu gets a gradient (any m, n; U must be invertible,
 * as in PyTorch). */
MUSA_API int musa_linalg_lu_factor(musa_tensor *a, musa_tensor **lu, musa_tensor **pivots,
                                   musa_tensor **info, musa_tensor **perm);
/* A = P L U unpacked: P (.., m, m), L (.., m, k), U (.., k, n). */
MUSA_API int musa_linalg_lu(musa_tensor *a, musa_tensor **p, musa_tensor **l, musa_tensor **u);
/* X with A X = B (left) or X A = B (not left) for triangular A (.., n, n):
 * its upper or lower triangle is read, the other is not; with
 * unitriangular its diagonal is taken as ones and not read either. B is
 * (.., n, k) (left) or (.., k, n); batch dims broadcast. A zero on the
 * diagonal gives infinities or NaNs (no check, as in PyTorch). */
MUSA_API musa_tensor *musa_linalg_solve_triangular(musa_tensor *a, musa_tensor *b, bool upper,
                                                   bool left, bool unitriangular);
/* sign(det A) and log |det A| for square A, each shaped like A's batch.
 * A singular A gives sign 0 and logabsdet -inf (whose gradient fails:
 * the formula needs A's inverse). sign gets no gradient. */
MUSA_API int musa_linalg_slogdet(musa_tensor *a, musa_tensor **sign, musa_tensor **logabsdet);
/* The Cholesky factor of a symmetric positive-definite A: lower L with
 * A = L L^T from A's lower triangle, or, with upper, U = L^T from A's
 * upper triangle. The other triangle is not read. */
MUSA_API musa_tensor *musa_linalg_cholesky(musa_tensor *a, bool upper);
/* Eigenvalues (.., n), ascending, and orthonormal eigenvectors (.., n, n)
 * (columns) of a symmetric A, read from its lower (or upper) triangle.
 * Each eigenvector's sign is arbitrary (what LAPACK returns). */
MUSA_API int musa_linalg_eigh(musa_tensor *a, bool upper, musa_tensor **eigenvalues,
                              musa_tensor **eigenvectors);
/* A = U diag(S) Vh with S (.., k) descending, k = min(m, n); U is
 * (.., m, k) and Vh (.., k, n), or with full_matrices (.., m, m) and
 * (.., n, n). Singular vectors' signs are arbitrary; the gradient ignores
 * the columns beyond k of full U and Vh (they are not unique), as PyTorch's
 * does. */
MUSA_API int musa_linalg_svd(musa_tensor *a, bool full_matrices, musa_tensor **u, musa_tensor **s,
                             musa_tensor **vh);
/* Modes of musa_linalg_qr, PyTorch's mode strings. */
typedef enum musa_qr_mode {
    MUSA_QR_REDUCED = 0,  /* Q (.., m, k), R (.., k, n), k = min(m, n) */
    MUSA_QR_COMPLETE = 1, /* Q (.., m, m), R (.., m, n) */
    MUSA_QR_R = 2,        /* R (.., k, n) only; Q is an empty (0,) tensor */
} musa_qr_mode;
/* A = Q R, Q with orthonormal columns, R upper triangular (Householder, as
 * LAPACK's geqrf: R's diagonal may be negative). The gradient needs Q: it
 * fails in mode R, and in mode COMPLETE when m > n (Q's last columns are
 * not unique), as in PyTorch. */
MUSA_API int musa_linalg_qr(musa_tensor *a, musa_qr_mode mode, musa_tensor **q, musa_tensor **r);
/* The inverse of square A: musa_linalg_solve(A, I). */
MUSA_API musa_tensor *musa_linalg_inv(musa_tensor *a);
/* det A of square A: sign * exp(logabsdet) from musa_linalg_slogdet; 1
 * for 0 by 0 matrices. Its gradient fails at a singular A. */
MUSA_API musa_tensor *musa_linalg_det(musa_tensor *a);

/* ------------------------------------------------------------------------ */
/* Shape and data movement                                                  */
/* ------------------------------------------------------------------------ */

/* Join along an existing dim (cat) or a new one (stack); dtypes promote. */
MUSA_API musa_tensor *musa_cat(int n, musa_tensor *const *tensors, int64_t dim);
MUSA_API musa_tensor *musa_stack(int n, musa_tensor *const *tensors, int64_t dim);
/* Views of consecutive pieces of `split_size` (the last may be smaller),
 * or of `chunks` nearly equal pieces. Writes at most max_out new references
 * into outs and returns how many pieces there are (or a negative status). */
MUSA_API int musa_split(musa_tensor *x, int64_t split_size, int64_t dim, int max_out,
                        musa_tensor **outs);
MUSA_API int musa_chunk(musa_tensor *x, int64_t chunks, int64_t dim, int max_out,
                        musa_tensor **outs);
/* out[i][j] = x[index[i][j]][j] for dim 0, etc.; index is int64 with the
 * same ndim as x and sizes <= x's outside `dim`, each in [0, size along
 * dim): a negative one is an index error, as in PyTorch (scatter and
 * scatter_add likewise; index_select counts negatives from the end). */
MUSA_API musa_tensor *musa_gather(musa_tensor *x, int64_t dim, musa_tensor *index);
/* A copy of x with src scattered (scatter) or added (scatter_add) at index. */
MUSA_API musa_tensor *musa_scatter(musa_tensor *x, int64_t dim, musa_tensor *index,
                                   musa_tensor *src);
MUSA_API musa_tensor *musa_scatter_add(musa_tensor *x, int64_t dim, musa_tensor *index,
                                       musa_tensor *src);
/* A copy of x with src multiplied in (scatter_prod), or the larger
 * (scatter_amax) or smaller (scatter_amin) value kept, at index: x's own
 * value takes part (PyTorch's scatter_reduce with include_self=True). A NaN
 * wins amax and amin; bool is or (amax) and and (amin, prod). */
MUSA_API musa_tensor *musa_scatter_prod(musa_tensor *x, int64_t dim, musa_tensor *index,
                                        musa_tensor *src);
MUSA_API musa_tensor *musa_scatter_amax(musa_tensor *x, int64_t dim, musa_tensor *index,
                                        musa_tensor *src);
MUSA_API musa_tensor *musa_scatter_amin(musa_tensor *x, int64_t dim, musa_tensor *index,
                                        musa_tensor *src);
/* Rows of x along dim picked by a 1-D int64 index (negatives allowed). */
MUSA_API musa_tensor *musa_index_select(musa_tensor *x, int64_t dim, musa_tensor *index);
/* A copy of x with src's slices added at the rows named by index. */
MUSA_API musa_tensor *musa_index_add(musa_tensor *x, int64_t dim, musa_tensor *index,
                                     musa_tensor *src);
/* Weighted taps along dim: with index and weight both (m, K), the result
 * has m rows in dim, row j being x's rows index[j, 0..K-1] times
 * weight[j, 0..K-1], summed left to right, each product rounded (the
 * separable core of linear and cubic interpolation: nn.functional's
 * interpolate and ONNX Resize). x and weight are floating point, weight
 * read in x's compute precision (float64 for float64, else float32, the
 * result rounded once); every index must lie in [0, size of dim). Both x
 * and weight take gradients. */
MUSA_API musa_tensor *musa_resample(musa_tensor *x, int64_t dim, musa_tensor *index,
                                    musa_tensor *weight);
/* x with `value` where mask (broadcast to x) is true. */
MUSA_API musa_tensor *musa_masked_fill(musa_tensor *x, musa_tensor *mask, double value);
/* Constant padding. pads has 2*k entries (before, after) for the last k
 * dims, last dim first, as in torch.nn.functional.pad; negatives crop. */
MUSA_API musa_tensor *musa_pad(musa_tensor *x, int npads, const int64_t *pads, double value);
MUSA_API musa_tensor *musa_flip(musa_tensor *x, int ndims, const int64_t *dims);
/* Tile x: repeats has at least x's ndim entries. */
MUSA_API musa_tensor *musa_repeat(musa_tensor *x, int ndim, const int64_t *repeats);
/* Lower/upper triangle of the last two dims, relative to diagonal k. */
MUSA_API musa_tensor *musa_tril(musa_tensor *x, int64_t k);
MUSA_API musa_tensor *musa_triu(musa_tensor *x, int64_t k);
/* Inclusive prefix sum along dim; integers give int64. */
MUSA_API musa_tensor *musa_cumsum(musa_tensor *x, int64_t dim);
/* Running product along dim (integers give int64, wrapping); its gradient
 * is exact where x has zeros (first order only). */
MUSA_API musa_tensor *musa_cumprod(musa_tensor *x, int64_t dim);
/* Running log(sum(exp)) along dim, computed pairwise without overflow. */
MUSA_API musa_tensor *musa_logcumsumexp(musa_tensor *x, int64_t dim);
/* Running maximum / minimum along dim and the index it came from (a later
 * equal value takes over; NaN, once seen, stays). */
MUSA_API int musa_cummax(musa_tensor *x, int64_t dim, musa_tensor **values, musa_tensor **indices);
MUSA_API int musa_cummin(musa_tensor *x, int64_t dim, musa_tensor **values, musa_tensor **indices);
/* int64 classes -> int64 one-hot with a new last dim (num_classes -1:
 * max + 1; other negative counts are MUSA_ERR_VALUE). */
MUSA_API musa_tensor *musa_one_hot(musa_tensor *x, int64_t num_classes);
/* Stable sort along dim (NaN sorts as the largest value). */
MUSA_API int musa_sort(musa_tensor *x, int64_t dim, bool descending, musa_tensor **values,
                       musa_tensor **indices);
/* The k largest (or smallest) along dim, in sorted order. */
MUSA_API int musa_topk(musa_tensor *x, int64_t k, int64_t dim, bool largest, musa_tensor **values,
                       musa_tensor **indices);

/* Indexing as in NumPy and PyTorch: x[0, 1:5:2, None, ..., idx]. Entries:
 *   INT       start is the index (negative counts from the end); drops the dim
 *   SLICE     start:stop:step (clamped as in Python; INT64_MAX as stop means
 *             "to the end"); step > 0
 *   NONE      a new size-1 dim;  ELLIPSIS  as many full slices as needed
 *   BOOL      start != 0: a new size-1 dim; start == 0: a new size-0 dim
 *   TENSOR    an integer tensor (advanced index; all of them broadcast
 *             together) or a bool mask covering mask.ndim dims
 * Basic entries give a view; advanced ones gather (a copy). The broadcast
 * dims of advanced indices replace them in place when they are adjacent,
 * and come first otherwise (NumPy's rule). Differentiable. */
typedef enum musa_index_kind {
    MUSA_INDEX_INT,
    MUSA_INDEX_SLICE,
    MUSA_INDEX_NONE,
    MUSA_INDEX_ELLIPSIS,
    MUSA_INDEX_TENSOR,
    MUSA_INDEX_BOOL,
} musa_index_kind;
typedef struct musa_index_entry {
    musa_index_kind kind;
    int64_t start, stop, step;
    musa_tensor *tensor; /* borrowed */
} musa_index_entry;
MUSA_API musa_tensor *musa_index(musa_tensor *x, int n, const musa_index_entry *entries);
/* x[entries] = value (broadcast to the indexed shape, cast to x's dtype),
 * in place. With advanced indices and repeated positions, which value is
 * written is unspecified. */
MUSA_API int musa_index_put_(musa_tensor *x, int n, const musa_index_entry *entries,
                             musa_tensor *value);
/* Indices of the non-zero elements: (count, ndim) int64. Needs values (not
 * traceable). */
MUSA_API musa_tensor *musa_nonzero(musa_tensor *x);
/* x's memory read as dtype (Tensor.view(dtype)): same shape when the element
 * sizes match; otherwise the last dim (stride 1) grows or shrinks by their
 * ratio. No gradient; a capture that meets it falls back to eager. */
MUSA_API musa_tensor *musa_view_dtype(musa_tensor *x, musa_dtype dtype);

/* ------------------------------------------------------------------------ */
/* Neural network functions                                                 */
/* ------------------------------------------------------------------------ */
/* Layouts are NCHW. Array arguments of two values (stride, padding, ...)
 * may be NULL for the default (stride 1, padding 0, dilation 1; pooling
 * stride defaults to the kernel size). float16/bfloat16 inputs compute in
 * float32 and are rounded once. All are differentiable; convolution and
 * pooling to any order, the normalisations, softmax and cross-entropy to
 * any order too (fused backward kernels serve ordinary backward, and
 * compositions of primitives serve create_graph). */

typedef enum musa_reduction {
    MUSA_REDUCTION_NONE = 0,
    MUSA_REDUCTION_MEAN = 1,
    MUSA_REDUCTION_SUM = 2,
} musa_reduction;

/* x (N, C, H, W), weight (Cout, C/groups, kh, kw), bias (Cout) or NULL.
 * Through musa_op_call, conv2d and its two backward ops take attribute
 * `winograd` (false here; the jit pass "winograd" sets it): float32 calls
 * of 64 channels or more in and out (whole blocks of 16), 3x3, stride 1,
 * no dilation, then run oneDNN's Winograd primitive (faster, with a larger
 * workspace and other rounding); other calls ignore it. */
MUSA_API musa_tensor *musa_conv2d(musa_tensor *x, musa_tensor *weight, musa_tensor *bias,
                                  const int64_t *stride, const int64_t *padding,
                                  const int64_t *dilation, int64_t groups);
/* x (N, C, L), weight (Cout, C/groups, k): conv2d on a height-1 view. */
MUSA_API musa_tensor *musa_conv1d(musa_tensor *x, musa_tensor *weight, musa_tensor *bias,
                                  int64_t stride, int64_t padding, int64_t dilation,
                                  int64_t groups);
/* x (N, Cin, H, W), weight (Cin, Cout/groups, kh, kw): the adjoint of conv2d;
 * output size (H-1) stride - 2 padding + dilation (k-1) + output_padding + 1. */
MUSA_API musa_tensor *musa_conv_transpose2d(musa_tensor *x, musa_tensor *weight, musa_tensor *bias,
                                            const int64_t *stride, const int64_t *padding,
                                            const int64_t *output_padding, const int64_t *dilation,
                                            int64_t groups);

/* Max pooling over (C, H, W) or (N, C, H, W). indices (may be NULL) gets
 * the flat index h * W + w of each maximum within its plane. NaN wins. */
MUSA_API int musa_max_pool2d(musa_tensor *x, const int64_t *kernel, const int64_t *stride,
                             const int64_t *padding, const int64_t *dilation, bool ceil_mode,
                             musa_tensor **values, musa_tensor **indices);
MUSA_API musa_tensor *musa_avg_pool2d(musa_tensor *x, const int64_t *kernel, const int64_t *stride,
                                      const int64_t *padding, bool ceil_mode,
                                      bool count_include_pad);
MUSA_API musa_tensor *musa_adaptive_avg_pool2d(musa_tensor *x, int64_t out_h, int64_t out_w);

/* Batch norm over (N, C, ...). Training normalises with batch statistics
 * and, when running_mean/running_var are given, updates them in place
 * (running = (1 - momentum) running + momentum batch, the variance
 * unbiased); evaluation uses the running statistics. weight/bias may be
 * NULL (1 and 0). */
MUSA_API musa_tensor *musa_batch_norm(musa_tensor *x, musa_tensor *running_mean,
                                      musa_tensor *running_var, musa_tensor *weight,
                                      musa_tensor *bias, bool training, double momentum,
                                      double eps);
/* Normalise over the last ndims dims; weight/bias have those dims' shape. */
MUSA_API musa_tensor *musa_layer_norm(musa_tensor *x, int ndims, musa_tensor *weight,
                                      musa_tensor *bias, double eps);
MUSA_API musa_tensor *musa_group_norm(musa_tensor *x, int64_t groups, musa_tensor *weight,
                                      musa_tensor *bias, double eps);

MUSA_API musa_tensor *musa_softmax(musa_tensor *x, int64_t dim);
MUSA_API musa_tensor *musa_log_softmax(musa_tensor *x, int64_t dim);

/* Attention, softmax(q k^T * scale, masked) v, by one fused kernel: q is
 * (..., Tq, E), k (..., Tk, E), v (..., Tk, Ev), with equal batch dims
 * (broadcast them first, e.g. with musa_expand); the result is
 * (..., Tq, Ev). mask (or NULL) is bool, True where a query may attend a
 * key, broadcasting to (..., Tq, Tk); causal lets query i attend keys
 * 0..i (not with a mask). A query that may attend no key gets NaN, as
 * softmax over -inf gives. float32, float64, bfloat16 or float16 (the
 * last two with float32 arithmetic); integers fail with MUSA_ERR_TYPE. The
 * probabilities are never stored: the backward recomputes them a block
 * of queries at a time from a saved log-sum-exp per query. Operands may
 * be strided views (a head split of a projection reads in place). A mask
 * that keeps exactly the causal triangle runs as causal, which computes
 * only the products below the diagonal (docs/nn.md, "Attention"). The op's
 * attribute `exact` (musa_op_call; 0 here) is the attention pass's: 1, 2
 * or 3 make float32 calls compute the written-out ops' bits (q k^T, no
 * scale, `* scale` or `/ scale`, masked_fill(-inf), softmax, @ v, and
 * their backward formulas), the whole reduction of every product summed
 * in order with fused multiply-adds; other values fail with
 * MUSA_ERR_VALUE. The attribute `plus_zero` (the padsum pass's; false
 * here) adds +0.0 to every element the op writes but the log-sum-exp,
 * turning -0.0 into +0.0 as the adds to zeros that it replaces did. */
MUSA_API musa_tensor *musa_scaled_dot_product_attention(musa_tensor *q, musa_tensor *k,
                                                        musa_tensor *v, musa_tensor *mask,
                                                        double scale, bool causal);

/* Cross-entropy of logits (N, C, d...) or (C). An integer target holds
 * class indices (N, d...) (entries equal to ignore_index are skipped; mean
 * divides by the count of the others); a floating target holds class
 * probabilities of the logits' shape. label_smoothing mixes the target
 * with the uniform distribution. */
MUSA_API musa_tensor *musa_cross_entropy(musa_tensor *logits, musa_tensor *target,
                                         int64_t ignore_index, double label_smoothing,
                                         musa_reduction reduction);
/* logp (N, C) log-probabilities, target (N) class indices. */
MUSA_API musa_tensor *musa_nll_loss(musa_tensor *logp, musa_tensor *target, int64_t ignore_index,
                                    musa_reduction reduction);
MUSA_API musa_tensor *musa_mse_loss(musa_tensor *input, musa_tensor *target,
                                    musa_reduction reduction);
MUSA_API musa_tensor *musa_l1_loss(musa_tensor *input, musa_tensor *target,
                                   musa_reduction reduction);
MUSA_API musa_tensor *musa_smooth_l1_loss(musa_tensor *input, musa_tensor *target, double beta,
                                          musa_reduction reduction);
/* p are probabilities; logs are clamped at -100 as in PyTorch. */
MUSA_API musa_tensor *musa_binary_cross_entropy(musa_tensor *p, musa_tensor *target,
                                                musa_reduction reduction);
MUSA_API musa_tensor *musa_binary_cross_entropy_with_logits(musa_tensor *logits,
                                                            musa_tensor *target,
                                                            musa_reduction reduction);

/* gelu: exact (erf) or tanh approximation. */
MUSA_API musa_tensor *musa_gelu(musa_tensor *x, bool tanh_approximation);
MUSA_API musa_tensor *musa_silu(musa_tensor *x);
MUSA_API musa_tensor *musa_leaky_relu(musa_tensor *x, double negative_slope);
MUSA_API musa_tensor *musa_elu(musa_tensor *x, double alpha);
MUSA_API musa_tensor *musa_softplus(musa_tensor *x, double beta, double threshold);
MUSA_API musa_tensor *musa_hardtanh(musa_tensor *x, double min_val, double max_val);

/* Rows of weight (num, dim) picked by integer indices of any shape; the
 * row padding_idx (if >= 0) gets no gradient. */
MUSA_API musa_tensor *musa_embedding(musa_tensor *weight, musa_tensor *indices,
                                     int64_t padding_idx);
/* Zero each element with probability p (from the musa generator) and scale
 * the rest by 1/(1-p); the identity when not training. */
MUSA_API musa_tensor *musa_dropout(musa_tensor *x, double p, bool training);
/* x (..., in) W^T + b with W (out, in), b (out) or NULL, in one GEMM:
 * float32 with a bias and bfloat16 on oneDNN's matmul primitive (the bias
 * added in its epilogue), other cases on sgemm/dgemm. */
MUSA_API musa_tensor *musa_linear(musa_tensor *x, musa_tensor *weight, musa_tensor *bias);

/* ------------------------------------------------------------------------ */
/* Autograd (the dynamic graph)                                             */
/* ------------------------------------------------------------------------ */
/* Every op whose inputs require gradients records a node (its "grad_fn")
 * on the tape, saving what its backward formula needs. musa_backward walks
 * the tape from the roots in dependency order and accumulates gradients
 * into the .grad of leaves:
 *
 *     musa_tensor *x = ..., *y = ...;              // float tensors
 *     musa_tensor_set_requires_grad(x, true);
 *     musa_tensor_set_requires_grad(y, true);
 *     musa_tensor *z = musa_mul(x, y);              // records MulBackward
 *     musa_tensor *s = musa_sum(z, 0, NULL, false);
 *     musa_backward(1, &s, NULL, false, false);     // x.grad = y, y.grad = x
 *     musa_tensor *gx = musa_tensor_grad(x);        // new reference
 *
 * Rules:
 * - Only floating tensors can require gradients. A tensor created by the
 *   user is a leaf; an op output with history is not.
 * - Views share the version counter of their storage. A tensor saved for
 *   backward and later modified in place makes backward fail with
 *   "[mul] a tensor saved for backward was modified in place: version 1,
 *   expected 0".
 * - Without retain_graph, backward frees saved tensors as it goes; a
 *   second backward through the same nodes fails with a clear error.
 * - With create_graph, the backward pass is itself recorded, so gradients
 *   of gradients work to any order. A leaf's .grad then has history that
 *   refers back to the leaf (a reference cycle, as in PyTorch): clear it
 *   with musa_tensor_set_grad(t, NULL) when done, or the two never die.
 * - Grad mode is thread-local; musa_set_grad_enabled(false) stops recording.
 * - The engine is iterative: a chain of millions of ops neither overflows
 *   the C stack in backward nor when the graph is freed. */

typedef struct musa_node musa_node;

/* Grad mode; both return the previous setting. */
MUSA_API bool musa_set_grad_enabled(bool enabled);
MUSA_API bool musa_is_grad_enabled(void);

/* Autocast (mixed precision), thread-local. While on, the GEMM-shaped ops
 * (matmul, linear, conv2d) cast their float32 inputs to `dtype` (bfloat16,
 * or float16) and the ops that need range or accuracy (softmax,
 * log_softmax, cross_entropy, exp, expm1, log, log1p, pow, sum, prod, the
 * norm of a list, cumsum) cast low-precision inputs to float32; the rest
 * take their inputs as they come, mixed dtypes promoting. The policy is
 * the AMPLOW/AMPF32 flags of src/ops/ops.def. The casts are ordinary
 * recorded ops, so a float32 parameter gets a float32 gradient; a
 * parameter (a leaf that requires grad) is cast once per dtype and version
 * until musa_autocast_clear_cache. Calls writing into given outputs, and
 * backward passes, are not autocast. musa_autocast_set fails
 * (MUSA_ERR_VALUE) for a dtype other than bfloat16 or float16. */
MUSA_API int musa_autocast_set(bool enabled, musa_dtype dtype);
MUSA_API bool musa_autocast_enabled(void);
MUSA_API musa_dtype musa_autocast_dtype(void); /* bfloat16 when off */
MUSA_API void musa_autocast_clear_cache(void);
/* Whether parameters' casts are cached (default true); returns the previous. */
MUSA_API bool musa_autocast_set_cache_enabled(bool enabled);

/* Only floating tensors may require grad; turning it off is only allowed on
 * leaves. */
MUSA_API int musa_tensor_set_requires_grad(musa_tensor *t, bool requires_grad);
MUSA_API bool musa_tensor_requires_grad(const musa_tensor *t);
/* A leaf has no grad_fn (created by the user, or not requiring grad). */
MUSA_API bool musa_tensor_is_leaf(const musa_tensor *t);
/* The accumulated gradient (a new reference), or NULL when there is none
 * (not an error). */
MUSA_API musa_tensor *musa_tensor_grad(const musa_tensor *t);
/* Replace .grad (NULL clears it). The shape must match; the dtype is
 * converted. */
MUSA_API int musa_tensor_set_grad(musa_tensor *t, musa_tensor *grad);
/* Keep .grad for a non-leaf tensor too. */
MUSA_API int musa_tensor_retain_grad(musa_tensor *t);
/* Whether retain_grad was called on non-leaf t (false for leaves, as in
 * PyTorch: they keep .grad anyway). */
MUSA_API bool musa_tensor_retains_grad(const musa_tensor *t);
/* A tensor sharing t's storage, with no autograd history. */
MUSA_API musa_tensor *musa_detach(musa_tensor *t);

/* The node that made t (borrowed; NULL for leaves). */
MUSA_API musa_node *musa_tensor_grad_fn(const musa_tensor *t);
/* "MulBackward", "AccumulateGrad", or a custom node's name. */
MUSA_API const char *musa_node_name(const musa_node *node);
/* Edges to the nodes that receive this node's input gradients: the i-th is
 * (node, input_nr); node is NULL for inputs that need no gradient. */
MUSA_API int musa_node_num_next(const musa_node *node);
MUSA_API musa_node *musa_node_next(const musa_node *node, int i, int *input_nr);
/* The leaf tensor an AccumulateGrad node writes to (borrowed), else NULL. */
MUSA_API musa_tensor *musa_node_variable(const musa_node *node);
/* The forward op's outputs (the gradients the node receives). */
MUSA_API int musa_node_num_outputs(const musa_node *node);
/* The forward op's attributes as text ("dim=1, keepdim=true") into buf
 * (snprintf semantics: returns the length the text needs); "" for ops
 * without attributes, AccumulateGrad and custom nodes. */
MUSA_API int musa_node_attrs(const musa_node *node, char *buf, size_t size);
/* A tensor the node keeps for its backward: its forward input i
 * (is_output false) or output i, as a new reference; NULL when none is
 * kept (the formula needs none, or a backward without retain_graph freed
 * them). Saved outputs are detached. */
MUSA_API musa_tensor *musa_node_saved(const musa_node *node, bool is_output, int i);
/* Nodes are reference counted too: keep one alive past its tensors with
 * retain (returns its argument), then release (NULL is a no-op). */
MUSA_API musa_node *musa_node_retain(musa_node *node);
MUSA_API void musa_node_release(musa_node *node);

/* A gradient hook: called with the gradient flowing into t; may replace it
 * by storing a new reference in *replace (leave it NULL to keep it).
 * Returns MUSA_OK or an error status (which aborts backward). */
typedef int (*musa_hook_fn)(void *ctx, musa_tensor *grad, musa_tensor **replace);
/* Register a hook on t (which must require grad). free_ctx (may be NULL)
 * is called when the hook is removed or its tensor/node dies, and at once
 * if registering fails. Returns a hook id (>= 0) or a negative status. */
MUSA_API int musa_tensor_register_hook(musa_tensor *t, musa_hook_fn fn, void *ctx,
                                       void (*free_ctx)(void *ctx));
/* A hook on a leaf t, called after backward accumulated into t's .grad,
 * as fn(ctx, t, NULL) (PyTorch's post-accumulate-grad hook; gradient
 * bucketing for data parallelism starts from it). The id shares the space
 * of musa_tensor_register_hook's, and musa_tensor_remove_hook removes it. */
MUSA_API int musa_tensor_register_post_accumulate_hook(musa_tensor *t, musa_hook_fn fn, void *ctx,
                                                       void (*free_ctx)(void *ctx));
MUSA_API int musa_tensor_remove_hook(musa_tensor *t, int hook_id);

/* Backpropagate from n roots. grad_roots may be NULL, or have NULL entries,
 * for roots with one element (the gradient is 1). */
MUSA_API int musa_backward(int n, musa_tensor *const *roots, musa_tensor *const *grad_roots,
                           bool retain_graph, bool create_graph);
/* Gradients of outputs with respect to inputs, returned (new references)
 * in results[n_in] instead of accumulated into .grad. An input the outputs
 * do not depend on gives NULL with allow_unused, an error otherwise. */
MUSA_API int musa_grad(int n_out, musa_tensor *const *outputs, musa_tensor *const *grad_outputs,
                       int n_in, musa_tensor *const *inputs, bool retain_graph, bool create_graph,
                       bool allow_unused, musa_tensor **results);

/* Anomaly mode (thread-local, off by default): when a backward node
 * produces NaN or inf, backward fails naming the node and the forward op
 * that created it (with the location set by musa_set_anomaly_location when
 * the node was recorded). With check_forward, every op's floating outputs
 * are checked for NaN as they are computed, too. */
MUSA_API void musa_set_anomaly_enabled(bool enabled, bool check_forward);
MUSA_API bool musa_is_anomaly_enabled(void);
/* The user's source location recorded into nodes made from now on (file
 * must outlive them; NULL clears). Used by the Python layer. */
MUSA_API void musa_set_anomaly_location(const char *file, int line);

/* A user-defined differentiable function (for custom ops written outside
 * the op table, e.g. Python's musa.autograd.Function). backward receives
 * the gradients of the outputs (NULL entries are zero) and writes a new
 * reference or NULL into grad_inputs[i] for each input. */
typedef int (*musa_custom_backward)(void *ctx, int n_out, musa_tensor *const *grad_outputs,
                                    int n_in, musa_tensor **grad_inputs);
/* Attach a node named `name` as the grad_fn of the n_out fresh outputs
 * (computed by the caller from inputs without recording). Floating outputs
 * then require grad; ctx is freed with free_ctx when the node dies (or at
 * once when this call fails before making the node). */
MUSA_API int musa_custom_node(const char *name, int n_in, musa_tensor *const *inputs, int n_out,
                              musa_tensor *const *outputs, musa_custom_backward backward, void *ctx,
                              void (*free_ctx)(void *ctx));

/* Check gradients by central finite differences. fn computes up to 8
 * outputs from inputs (new references into outputs, count into *n_out).
 * Inputs that require grad are checked (use float64). Returns MUSA_OK, or
 * MUSA_ERR_VALUE naming the output, input and element where the analytical
 * and numerical Jacobians differ by more than atol + rtol * |numerical|.
 * Defaults as in PyTorch: eps 1e-6, atol 1e-5, rtol 1e-3. */
typedef int (*musa_func)(void *ctx, int n_in, musa_tensor *const *inputs, int *n_out,
                         musa_tensor **outputs);
MUSA_API int musa_gradcheck(musa_func fn, void *ctx, int n_in, musa_tensor *const *inputs,
                            double eps, double atol, double rtol);
/* The same check for the gradient of the gradient (random float64 output
 * gradients are drawn from the musa generator). */
MUSA_API int musa_gradgradcheck(musa_func fn, void *ctx, int n_in, musa_tensor *const *inputs,
                                double eps, double atol, double rtol);

/* Sum x down to `shape` (undoing broadcasting): sums leading dims and dims
 * where shape has 1. x itself (a new reference) if already that shape. */
MUSA_API musa_tensor *musa_sum_to_size(musa_tensor *x, int ndim, const int64_t *shape);

/* ------------------------------------------------------------------------ */
/* Generic op access                                                        */
/* ------------------------------------------------------------------------ */
/* Every primitive op has a row in musa's op table. These calls reach any op
 * by name, which is what graph builders, loaders and bindings use. */

typedef struct musa_attrs musa_attrs;

/* Number of primitive ops, and the op id of a name (or -1). */
MUSA_API int musa_op_count(void);
MUSA_API int musa_op_lookup(const char *name);
MUSA_API const char *musa_op_name(int op);
/* Number of tensor inputs (-1: variadic) and outputs of an op. Update ops
 * (sgd_update, ...) have -1 outputs: one per input they update, which
 * their attributes decide (see "Optimizer updates"). */
MUSA_API int musa_op_num_inputs(int op);
MUSA_API int musa_op_num_outputs(int op);

/* The types of attribute fields (the records of the op table), and the most
 * values an integer-list attribute holds. */
enum {
    MUSA_ATTR_TYPE_BOOL = 0,
    MUSA_ATTR_TYPE_INT = 1,   /* int64_t */
    MUSA_ATTR_TYPE_FLOAT = 2, /* double */
    MUSA_ATTR_TYPE_INTS = 3,  /* up to MUSA_MAX_ATTR_INTS int64_t */
    MUSA_ATTR_TYPE_DTYPE = 4, /* musa_dtype */
};
#define MUSA_MAX_ATTR_INTS 16

/* An op's attributes, with defaults; set fields by name. Setting a field the
 * op does not have fails with MUSA_ERR_VALUE, one of another type with
 * MUSA_ERR_TYPE. */
MUSA_API musa_attrs *musa_attrs_new(int op);
MUSA_API void musa_attrs_free(musa_attrs *attrs);
MUSA_API int musa_attrs_set_int(musa_attrs *attrs, const char *field, int64_t value);
MUSA_API int musa_attrs_set_float(musa_attrs *attrs, const char *field, double value);
MUSA_API int musa_attrs_set_bool(musa_attrs *attrs, const char *field, bool value);
MUSA_API int musa_attrs_set_ints(musa_attrs *attrs, const char *field, int n,
                                 const int64_t *values);
MUSA_API int musa_attrs_set_dtype(musa_attrs *attrs, const char *field, musa_dtype value);
/* Set a bool, int or float field from a number, converted to the field's
 * kind (an int field takes integral values only; anything else fails with
 * MUSA_ERR_VALUE naming the field and the value). */
MUSA_API int musa_attrs_set_number(musa_attrs *attrs, const char *field, double value);

/* Run op on n_in inputs. attrs may be NULL (defaults). outs has the call's
 * output count of entries (at most 6): a NULL entry receives a new tensor (a new
 * reference); a non-NULL entry is written in place (it must have the
 * result's shape and a dtype the result casts to) and is left as is. */
MUSA_API int musa_op_call(int op, int n_in, musa_tensor *const *inputs, const musa_attrs *attrs,
                          musa_tensor **outs);

/* ------------------------------------------------------------------------ */
/* Custom ops                                                               */
/* ------------------------------------------------------------------------ */
/*
 * An op defined outside musa: a forward function, shape inference and,
 * optionally, a backward formula. Calls go through the dispatcher as the
 * op-table row "custom" (attribute `index`), so a custom op runs eagerly,
 * is recorded by autograd, captured by musa.jit as a graph node (not a
 * graph break) and run by plans; a saved model names it, and loading the
 * model in a process that has not registered that name fails naming it.
 * A custom op must be a pure function of its inputs: compiled graphs may
 * merge two identical calls or drop an unused one.
 *
 *     static int infer(void *u, int n_in, const musa_tensor *const *in,
 *                      musa_dtype *dt, int *ndim, int64_t (*shape)[MUSA_MAX_DIMS]) {
 *         dt[0] = musa_tensor_dtype(in[0]);         // same as the input
 *         ndim[0] = musa_tensor_ndim(in[0]);
 *         memcpy(shape[0], musa_tensor_shape(in[0]), sizeof(int64_t) * ndim[0]);
 *         return MUSA_OK;
 *     }
 *     musa_custom_op def = {.name = "mylib::twice", .n_in = 1, .n_out = 1,
 *                           .infer = infer, .forward = twice, .backward = twice_grad};
 *     int op = musa_op_register(&def);
 *     musa_tensor *y;
 *     musa_custom_op_call(op, 1, &x, 1, &y);
 */
#define MUSA_CUSTOM_NAME_MAX    64 /* bytes of a name, with its NUL */
#define MUSA_CUSTOM_MAX_INPUTS  16
#define MUSA_CUSTOM_MAX_OUTPUTS 6

typedef struct musa_custom_op {
    const char *name; /* letters, digits, '_', ':' and '.': "mylib::scale" (copied) */
    int n_in, n_out;  /* tensor inputs (0..16) and outputs (1..6) */
    /* Each output's dtype, rank and shape from the inputs' (read their dtype
     * and shape only: under symbolic capture they hold no data). Returns
     * MUSA_OK, or an error status (set a message with musa's error API or
     * let musa name the op and the status). */
    int (*infer)(void *user, int n_in, const musa_tensor *const *in, musa_dtype *out_dtype,
                 int *out_ndim, int64_t (*out_shape)[MUSA_MAX_DIMS]);
    /* Write the outputs: fresh contiguous tensors of the inferred shapes;
     * the inputs are contiguous. Both are views valid during the call only. */
    int (*forward)(void *user, int n_in, musa_tensor *const *in, int n_out,
                   musa_tensor *const *out);
    /* Gradients of the inputs (new references in grad_in[i], or NULL for
     * none) from those of the outputs (grad_out[j] NULL means zero), with
     * the forward's inputs and outputs. Written with musa ops, it is itself
     * differentiable (create_graph). NULL: the op has no gradient, and a
     * backward through it fails naming it. */
    int (*backward)(void *user, int n_in, musa_tensor *const *in, int n_out,
                    musa_tensor *const *out, musa_tensor *const *grad_out, musa_tensor **grad_in);
    void *user; /* passed to each function; musa never frees it */
} musa_custom_op;

/* Register def (copied); returns its index (>= 0), or an error: a bad or
 * duplicate name, bad counts, a missing infer or forward. Registrations
 * last for the process. */
MUSA_API int musa_op_register(const musa_custom_op *def);
/* The index of the custom op `name`, or -1. */
MUSA_API int musa_custom_op_find(const char *name);
/* The name of custom op `index`, or NULL. */
MUSA_API const char *musa_custom_op_name(int index);
/* Call custom op `index`: out[0..n_out) receive new tensors. */
MUSA_API int musa_custom_op_call(int index, int n_in, musa_tensor *const *in, int n_out,
                                 musa_tensor **out);

/* ------------------------------------------------------------------------ */
/* Optimizer updates                                                        */
/* ------------------------------------------------------------------------ */
/* Each optimizer update is one op row (sgd_update, adam_update,
 * rmsprop_update, adagrad_update, adadelta_update, adamax_update,
 * nadam_update, radam_update, asgd_update, rprop_update): eager calls, captured graphs
 * (musa_graph_*), profiling and saved models all see the same op, and these functions are that row
 * dispatched with the parameter and its state as provided outputs. One call
 * updates one parameter and its state in place with PyTorch's formulas
 * (torch.optim, single-tensor path) in the parameter's dtype (float32 or
 * float64). State tensors and the gradient must have the parameter's dtype
 * and shape; non-contiguous ones are updated through a contiguous copy. The
 * learning rate is a 0-d floating tensor read when the update runs, so a
 * captured step follows later changes to it; step counters are 0-d float64
 * tensors counting this step (incremented by the update). Updates are not
 * recorded by autograd; version counters are bumped. On error (NULL or
 * mismatched tensors, invalid options: MUSA_ERR_VALUE/TYPE naming the input)
 * nothing is written.
 *
 * As a generic op (musa_op_call): inputs (param, state..., grad, lr), the
 * optional state present as the options say, and outputs the new (param,
 * state...): pass the inputs themselves as outs to update in place. */
typedef struct musa_sgd_options {
    double momentum, dampening, weight_decay;
    bool nesterov, maximize;
} musa_sgd_options;
/* momentum_buffer is ignored (may be NULL) when momentum is 0. fresh: the
 * buffer is new and is set to the (undamped) gradient, as PyTorch's first
 * step does. */
MUSA_API int musa_sgd_update(musa_tensor *param, musa_tensor *momentum_buffer, musa_tensor *grad,
                             musa_tensor *lr, const musa_sgd_options *options, bool fresh);

typedef struct musa_adam_options {
    double beta1, beta2, eps, weight_decay;
    bool amsgrad, maximize;
    bool decoupled; /* AdamW: weight decay applied to the parameter, not the gradient */
} musa_adam_options;
/* max_exp_avg_sq is used only with amsgrad (may be NULL otherwise). */
MUSA_API int musa_adam_update(musa_tensor *param, musa_tensor *exp_avg, musa_tensor *exp_avg_sq,
                              musa_tensor *max_exp_avg_sq, musa_tensor *step, musa_tensor *grad,
                              musa_tensor *lr, const musa_adam_options *options);

typedef struct musa_rmsprop_options {
    double alpha, eps, weight_decay, momentum;
    bool centered, maximize;
} musa_rmsprop_options;
/* momentum_buffer is used when momentum > 0, grad_avg when centered (each
 * may be NULL otherwise). */
MUSA_API int musa_rmsprop_update(musa_tensor *param, musa_tensor *square_avg,
                                 musa_tensor *momentum_buffer, musa_tensor *grad_avg,
                                 musa_tensor *step, musa_tensor *grad, musa_tensor *lr,
                                 const musa_rmsprop_options *options);

/* Adagrad: sum += g^2; p -= lr / (1 + (step - 1) lr_decay) g / (sqrt(sum) + eps). */
typedef struct musa_adagrad_options {
    double lr_decay, weight_decay, eps;
    bool maximize;
} musa_adagrad_options;
MUSA_API int musa_adagrad_update(musa_tensor *param, musa_tensor *sum, musa_tensor *step,
                                 musa_tensor *grad, musa_tensor *lr,
                                 const musa_adagrad_options *options);

/* Adadelta: running averages of g^2 and of the squared updates. */
typedef struct musa_adadelta_options {
    double rho, eps, weight_decay;
    bool maximize;
} musa_adadelta_options;
MUSA_API int musa_adadelta_update(musa_tensor *param, musa_tensor *square_avg,
                                  musa_tensor *acc_delta, musa_tensor *step, musa_tensor *grad,
                                  musa_tensor *lr, const musa_adadelta_options *options);

/* Adamax: Adam with the infinity norm (exp_inf = max(beta2 exp_inf, |g| + eps)). */
typedef struct musa_adamax_options {
    double beta1, beta2, eps, weight_decay;
    bool maximize;
} musa_adamax_options;
MUSA_API int musa_adamax_update(musa_tensor *param, musa_tensor *exp_avg, musa_tensor *exp_inf,
                                musa_tensor *step, musa_tensor *grad, musa_tensor *lr,
                                const musa_adamax_options *options);

/* NAdam: Adam with Nesterov momentum on a momentum_decay schedule;
 * mu_product is a 0-d float64 state starting at 1. */
typedef struct musa_nadam_options {
    double beta1, beta2, eps, weight_decay, momentum_decay;
    bool decoupled; /* weight decay on the parameter (AdamW's form) */
    bool maximize;
} musa_nadam_options;
MUSA_API int musa_nadam_update(musa_tensor *param, musa_tensor *exp_avg, musa_tensor *exp_avg_sq,
                               musa_tensor *mu_product, musa_tensor *step, musa_tensor *grad,
                               musa_tensor *lr, const musa_nadam_options *options);

/* RAdam: Adam with the variance rectification (plain momentum steps until
 * the variance is tractable). */
typedef struct musa_radam_options {
    double beta1, beta2, eps, weight_decay;
    bool decoupled, maximize;
} musa_radam_options;
MUSA_API int musa_radam_update(musa_tensor *param, musa_tensor *exp_avg, musa_tensor *exp_avg_sq,
                               musa_tensor *step, musa_tensor *grad, musa_tensor *lr,
                               const musa_radam_options *options);

/* ASGD: averaged SGD; eta (starts at lr) and mu (starts at 1) are 0-d
 * float64 state the update advances, ax the average. */
typedef struct musa_asgd_options {
    double lambd, alpha, t0, weight_decay;
    bool maximize;
} musa_asgd_options;
MUSA_API int musa_asgd_update(musa_tensor *param, musa_tensor *ax, musa_tensor *eta,
                              musa_tensor *mu, musa_tensor *step, musa_tensor *grad,
                              musa_tensor *lr, const musa_asgd_options *options);

/* Rprop: per-element step sizes grown by etaplus where the gradient keeps
 * its sign, shrunk by etaminus where it flips (that step then skipped),
 * clamped to [step_size_min, step_size_max]; p -= sign(g) * step_size.
 * prev (the last gradient) starts at 0, step_size at lr; lr is read only
 * then (torch.optim.Rprop). */
typedef struct musa_rprop_options {
    double etaminus, etaplus, step_size_min, step_size_max;
    bool maximize;
} musa_rprop_options;
MUSA_API int musa_rprop_update(musa_tensor *param, musa_tensor *prev, musa_tensor *step_size,
                               musa_tensor *step, musa_tensor *grad, musa_tensor *lr,
                               const musa_rprop_options *options);

/* The multi-tensor form: one update over many parameters (an optimizer's
 * parameter group) in one call, with the same results, bit for bit, as
 * musa_op_call of the row on each row in turn, the row's first n_in - 2
 * tensors passed as its outputs.
 *
 * op is an update row (any of the rows above) and attrs
 * its attributes (musa_attrs_new(op); NULL: defaults), shared by every row.
 * tensors holds n_rows rows of n_in tensors each, row r at tensors[r * n_in]:
 * (param, state..., grad, lr) as the row takes them (see above), the
 * parameter and state updated in place. n_rows may be 0.
 *
 * Every row is checked first, by the row's own inference and the checks of
 * in-place outputs: an invalid row fails the call with the row's error,
 * naming the row ("[sgd_update] row 3: gradient (input 1) has shape (3,)
 * but the parameter has (4,)"), and nothing is written. Then the rows run:
 * in eager mode, those the dispatcher would update straight in place
 * (contiguous, lr float64, sharing no memory with their other operands) as
 * one parallel loop over all their elements, the others one by one. Rows
 * that share memory one of them writes, a capture in progress (each row is
 * recorded as a node, as musa_op_call records it) and anomaly mode's NaN
 * checks run every row one by one, in order. Version counters are bumped;
 * a profiler sees one event for the rows run together. A failure after the
 * checks (out of memory, an interrupt) may leave rows updated. */
MUSA_API int musa_update_multi(int op, const musa_attrs *attrs, int n_rows, int n_in,
                               musa_tensor *const *tensors);

/* ------------------------------------------------------------------------ */
/* Static graphs (jit)                                                      */
/* ------------------------------------------------------------------------ */
/*
 * A graph is captured from ordinary op calls, optimised by passes, lowered
 * to a plan, and run:
 *
 *     musa_graph *g = musa_graph_new();
 *     musa_tensor *x = musa_empty_meta(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){64, 128});
 *     musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC);   // record only
 *     musa_graph_add_input(g, x, "x");
 *     musa_tensor *y = musa_relu(musa_matmul(x, w));        // recorded nodes
 *     musa_graph_set_outputs(g, 1, &y);
 *     musa_graph_capture_end(g);
 *     musa_pass_ctx ctx = {.fusion_level = 2};
 *     musa_graph_optimize(g, &ctx);                         // the pass pipeline
 *     musa_plan *p = musa_plan_build(g, NULL);              // schedule + memory plan
 *     musa_tensor *out[1];
 *     musa_plan_run(p, 1, &real_x, 1, out);                 // no dispatcher, no tape
 *
 * In MUSA_CAPTURE_TRACE mode ops also compute (eager results plus a graph);
 * in MUSA_CAPTURE_SYMBOLIC mode they only record, on meta tensors. Tensors
 * the capture did not create and that are not inputs become parameters,
 * bound by reference (a plan reads their current data at each run); Python
 * numbers become constants. An op writing in place into an input or a
 * parameter is recorded as a mutation, written back when the plan finishes.
 * Values are named %<id> in the text and JSON forms.
 */
typedef struct musa_graph musa_graph;
typedef struct musa_plan musa_plan;

enum { MUSA_CAPTURE_TRACE = 1, MUSA_CAPTURE_SYMBOLIC = 2 };
/* Kinds of host reads (musa_graph_host_read) and of graph values. */
enum { MUSA_READ_BOOL = 0, MUSA_READ_SCALAR = 1, MUSA_READ_DATA = 2 };
enum { MUSA_VALUE_NODE = 0, MUSA_VALUE_INPUT = 1, MUSA_VALUE_PARAM = 2, MUSA_VALUE_CONST = 3 };

/* A meta tensor (shape and dtype, no storage) for symbolic capture. */
MUSA_API musa_tensor *musa_empty_meta(musa_dtype dtype, int ndim, const int64_t *shape);

/* A new, empty graph (free with musa_graph_free), or NULL when out of memory. */
MUSA_API musa_graph *musa_graph_new(void);
/* Free g and everything it holds (its parameters' and constants' references);
 * NULL is a no-op. Plans built from g must be freed first. */
MUSA_API void musa_graph_free(musa_graph *g);
/* Record this thread's op calls into g until musa_graph_capture_end. One
 * capture per thread at a time; a graph is captured once. */
MUSA_API int musa_graph_capture_begin(musa_graph *g, int mode);
/* Stop recording. Fails (MUSA_ERR_NOT_IMPLEMENTED naming the op and the
 * user's line) when something could not be captured, e.g. a write through a
 * view or a read of a whole tensor on the host. */
MUSA_API int musa_graph_capture_end(musa_graph *g);
/* Declare a (contiguous) tensor a graph input; call while capturing, before
 * the ops that read it. */
MUSA_API int musa_graph_add_input(musa_graph *g, musa_tensor *t, const char *name);
/* Declare the graph's outputs (tensors made while capturing, or inputs and
 * parameters). Replaces earlier outputs; MUSA_ERR_VALUE for a NULL tensor. */
MUSA_API int musa_graph_set_outputs(musa_graph *g, int n, musa_tensor *const *t);
/* The value id of a tensor in g while capturing, or -1. */
MUSA_API int musa_graph_value_of(const musa_graph *g, const musa_tensor *t);
/* A host read of t's value (bool(), item(), ...) by a front end while
 * capturing: recorded as a break (kinds MUSA_READ_*). */
MUSA_API int musa_graph_host_read(musa_graph *g, const musa_tensor *t, int kind, double value);
/* The graph this thread records into, or NULL. */
MUSA_API musa_graph *musa_graph_recording(void);
/* Mark the capture void: something ran that cannot be recorded (named by
 * `why`, e.g. a call that bypasses the dispatcher); capture_end then fails. */
MUSA_API int musa_graph_refuse(musa_graph *g, const char *why);
/* The mode (MUSA_CAPTURE_TRACE or _SYMBOLIC) of g's running or last capture
 * (0 before any), e.g. to resume a paused capture the same way. */
MUSA_API int musa_graph_capture_mode(const musa_graph *g);
/* After a symbolic capture: give back to every leaf the .grad it had before
 * the capture (a symbolic backward leaves meta tensors in .grad), e.g. when
 * the capture is abandoned and the function runs again eagerly. */
MUSA_API int musa_graph_restore_grads(musa_graph *g);
/* Continue recording into g after musa_graph_capture_end (its values keep
 * their tags); used to append the backward graph, or after a pause. */
MUSA_API int musa_graph_capture_resume(musa_graph *g, int mode);
/* A function giving the user's "file:line" for recorded nodes (the string
 * must outlive the graph), or NULL. */
MUSA_API void musa_jit_set_location_hook(const char *(*fn)(void));

/* Passes run in the order of one table (src/jit/passes/pipeline.c); each
 * can be disabled by name. */
typedef struct musa_pass_ctx {
    int fusion_level;     /* 0: no fusion; 1: elementwise chains; 2: also row reductions,
                           * epilogues of matmul/conv/softmax, row-wise norms (fuse.c) */
    bool verify;          /* verify after every pass (always on in debug builds) */
    const char *disabled; /* comma-separated pass names, or NULL */
    int changes;          /* out: nodes the passes changed */
    /* With remat_budget > 0 (bytes), the remat pass also recomputes values
     * of any deterministic op (matmuls, convolutions: activation
     * checkpointing), largest first, while its estimate of the peak of live
     * intermediate bytes is over the budget and a recomputation lowers it.
     * Results stay bitwise the same. musa.Config(memory_budget=) sets it. */
    int64_t remat_budget;
    /* Keep the activations of convolution chains channels-last (NHWC) in the
     * plan (pass "channels_last", after remat): no layout reorders around
     * oneDNN's convolutions. Results change in rounding (other kernels and
     * sum orders), so it is off by default. musa.Config(channels_last=True)
     * sets it. */
    bool channels_last;
    /* The attention pass (first) replaces written-out attention (q k^T, an
     * optional scale and mask, softmax, @ v), and the backward the eager
     * formulas record for it, by the fused scaled_dot_product_attention
     * kernels: the softmax's probabilities are no longer saved for the
     * backward. Without this flag it does so only where the kernels then
     * give the written-out ops' bits (float32 heads of 16 to 128 queries,
     * keys and dims); with it, everywhere, with the fused formulas, whose
     * results differ in rounding. musa.Config(fuse_attention=True) sets it;
     * disabling the pass by name turns both off. */
    bool fuse_attention;
    /* Run float32 3x3 stride-1 convolutions (and their backward products)
     * on oneDNN's Winograd primitive where it has one and its workspace
     * fits in the plan's arena without raising its peak (pass "winograd",
     * after channels_last, which marks them with attribute winograd).
     * About twice as fast here; results change in rounding (about 1e-6
     * relative), so it is off by default. musa.Config(winograd=True)
     * sets it. */
    bool winograd;
} musa_pass_ctx;
/* The name of pass i in pipeline order, or NULL past the last one. */
MUSA_API const char *musa_graph_pass_name(int i);
/* Run the pipeline on a captured graph, in place. Fails with the failing
 * pass named (and, with verify, the verifier's finding); MUSA_ERR_RUNTIME
 * for a graph still capturing, MUSA_ERR_VALUE for NULL arguments. On
 * failure the graph may be partly rewritten: do not plan it. */
MUSA_API int musa_graph_optimize(musa_graph *g, musa_pass_ctx *ctx);
/* Run one pass by name; an unknown name is MUSA_ERR_VALUE listing the passes. */
MUSA_API int musa_graph_run_pass(musa_graph *g, const char *name, musa_pass_ctx *ctx);
/* Check structure, order and every node against its op's inference;
 * MUSA_OK, or an error naming the node, its op and what is wrong. */
MUSA_API int musa_graph_verify(const musa_graph *g);
/* Text (one node per line) and JSON forms; malloc'd, free() them. */
MUSA_API char *musa_graph_text(const musa_graph *g);
MUSA_API char *musa_graph_json(const musa_graph *g);

/* Inspection. Nodes are numbered in order, dead ones included (their op
 * name is NULL). */
MUSA_API int musa_graph_num_nodes(const musa_graph *g);
MUSA_API int musa_graph_node_count(const musa_graph *g); /* live nodes */
MUSA_API const char *musa_graph_node_op(const musa_graph *g, int node);
MUSA_API int musa_graph_node_group(const musa_graph *g, int node); /* fusion group or -1 */
MUSA_API int musa_graph_num_values(const musa_graph *g);
MUSA_API int musa_graph_value_kind(const musa_graph *g, int value);
MUSA_API int musa_graph_value_producer(const musa_graph *g, int value);
MUSA_API int musa_graph_value_ndim(const musa_graph *g, int value); /* -1: no such value */
MUSA_API musa_tensor *musa_graph_value_tensor(const musa_graph *g, int value); /* borrowed */
MUSA_API int musa_graph_num_inputs(const musa_graph *g);
MUSA_API int musa_graph_input(const musa_graph *g, int i);
MUSA_API bool musa_graph_has_random(const musa_graph *g); /* a live node draws random numbers */
MUSA_API int musa_graph_num_outputs(const musa_graph *g);
MUSA_API int musa_graph_output(const musa_graph *g, int i);
MUSA_API int musa_graph_num_mutations(const musa_graph *g);
/* The value (an input or parameter) that mutation i writes into, or -1 when
 * i is out of range. */
MUSA_API int musa_graph_mutation_target(const musa_graph *g, int i);
MUSA_API bool musa_graph_requires_grad(const musa_graph *g);
MUSA_API int musa_graph_num_breaks(const musa_graph *g);
MUSA_API int musa_graph_break(const musa_graph *g, int i, int *value, int *at_node, int *kind,
                              double *outcome, const char **loc);

/* Values and nodes by id, so front ends need not parse the JSON form. Ids
 * run over [0, musa_graph_num_values) and [0, musa_graph_num_nodes). An int
 * getter returns its answer (>= 0) or a negative status: MUSA_ERR_VALUE for
 * a NULL graph, MUSA_ERR_INDEX for an id out of range or a node removed by a
 * pass, with the last error naming the id. A pointer getter returns NULL in
 * those cases, with the error set. Strings are borrowed from g (or static)
 * and live as long as g. */

/* A value's dtype (a musa_dtype). */
MUSA_API int musa_graph_value_dtype(const musa_graph *g, int value);
/* A value's shape: dims[d] receives dim d's size, syms[d] the symbol it
 * follows (an index for musa_graph_symbol) or -1 for a static dim. Either
 * array may be NULL, else needs room for MUSA_MAX_DIMS. Returns ndim. */
MUSA_API int musa_graph_value_shape(const musa_graph *g, int value, int64_t *dims, int *syms);
/* An input value's name; NULL for unnamed values too (no error then). */
MUSA_API const char *musa_graph_value_name(const musa_graph *g, int value);
/* Dynamic dims (musa_graph_add_symbol): symbol i's name, range and the
 * size the capture saw. Any out pointer may be NULL. MUSA_ERR_INDEX for no
 * such symbol. */
MUSA_API int musa_graph_num_symbols(const musa_graph *g);
MUSA_API int musa_graph_symbol(const musa_graph *g, int i, const char **name, int64_t *lo,
                               int64_t *hi, int64_t *traced);
/* A node's tensor inputs and outputs, as value ids; k out of range is
 * MUSA_ERR_INDEX. */
MUSA_API int musa_graph_node_num_inputs(const musa_graph *g, int node);
MUSA_API int musa_graph_node_input(const musa_graph *g, int node, int k);
MUSA_API int musa_graph_node_num_outputs(const musa_graph *g, int node);
MUSA_API int musa_graph_node_output(const musa_graph *g, int node, int k);
/* The user's "file:line" where a node was recorded; NULL when unknown too
 * (no error then). */
MUSA_API const char *musa_graph_node_loc(const musa_graph *g, int node);
/* A node's attributes: the fields of its op's record, in their order in
 * attrs.def (0 for ops without attributes). Field i's name and type
 * (MUSA_ATTR_TYPE_*); either out pointer may be NULL. */
MUSA_API int musa_graph_node_attr_count(const musa_graph *g, int node);
MUSA_API int musa_graph_node_attr(const musa_graph *g, int node, int i, const char **name,
                                  int *type);
/* An attribute's value by name, into *out (which may be NULL: a check).
 * MUSA_ERR_VALUE when the node's op has no attribute of that name,
 * MUSA_ERR_TYPE when it has another type; the message names the attribute,
 * and *out is left alone. musa_graph_node_attr_ints writes *n values (room
 * for MUSA_MAX_ATTR_INTS). */
MUSA_API int musa_graph_node_attr_int(const musa_graph *g, int node, const char *name,
                                      int64_t *out);
MUSA_API int musa_graph_node_attr_float(const musa_graph *g, int node, const char *name,
                                        double *out);
MUSA_API int musa_graph_node_attr_bool(const musa_graph *g, int node, const char *name, bool *out);
MUSA_API int musa_graph_node_attr_dtype(const musa_graph *g, int node, const char *name,
                                        musa_dtype *out);
MUSA_API int musa_graph_node_attr_ints(const musa_graph *g, int node, const char *name,
                                       int64_t *values, int *n);

/* Nodes [begin, end) as a graph: inputs are g's first n_inputs inputs (-1:
 * all), then the values made before begin that it reads (*carried,
 * malloc'd, lists their ids in g). With `mutations` it also writes g's
 * mutations back (default: when end is the last node). With `remat`, cheap
 * values (views, non-random elementwise nodes over values it takes anyway)
 * are recomputed in the segment instead of carried. opt may be NULL. */
typedef struct musa_segment_options {
    bool mutations;
    int n_inputs;
    bool remat;
} musa_segment_options;
MUSA_API musa_graph *musa_graph_segment(const musa_graph *g, int begin, int end, int n_out,
                                        const int *outs, const musa_segment_options *opt,
                                        int **carried, int *n_carried);
/* Run g through the dispatcher node by node on real tensors (eager
 * semantics, autograd recorded; mutations are not written back) and return
 * new references to the values asked for. */
MUSA_API int musa_graph_run_eager(const musa_graph *g, int n_in, musa_tensor *const *inputs,
                                  int n_req, const int *values, musa_tensor **out);
/* Dynamic dims in the IR: a symbol with its range and the size the capture
 * saw (returns its index), and the dims that follow it. The text form
 * prints them by name, the JSON form lists them under "symbolic". */
MUSA_API int musa_graph_add_symbol(musa_graph *g, const char *name, int64_t lo, int64_t hi,
                                   int64_t traced);
MUSA_API int musa_graph_set_symbolic(musa_graph *g, int value, int dim, int sym);
/* A new graph input shaped like value `like` (e.g. an output's gradient). */
MUSA_API int musa_graph_new_input(musa_graph *g, int like, const char *name);
/* Static autodiff: append to g the backward graph of outs[k] (incoming
 * gradients: values gouts[k]) with respect to wrt[0..n_wrt), built by the op
 * table's backward formulas run in symbolic mode. grads[k] receives the
 * gradient value of wrt[k], or -1 when none flows to it. */
MUSA_API int musa_graph_autodiff(musa_graph *g, int n_out, const int *outs, const int *gouts,
                                 int n_wrt, const int *wrt, int *grads);
/* A hash of nodes [begin, end): ops, attributes, value ids, dtypes and
 * shapes (equal graphs hash equal; used to share segments). 0 for NULL. */
MUSA_API uint64_t musa_graph_fingerprint(const musa_graph *g, int begin, int end);
typedef struct musa_attr_override {
    int node;
    const char *field;
    int n;
    int64_t v[MUSA_MAX_ATTR_INTS];
} musa_attr_override;
/* A copy of g for other input shapes (same ranks), with integer attributes
 * replaced; every node is re-inferred (NULL with the op's error if the
 * graph does not hold at those shapes). */
MUSA_API musa_graph *musa_graph_respecialize(const musa_graph *g,
                                             const int64_t (*shapes)[MUSA_MAX_DIMS], int n_over,
                                             const musa_attr_override *over);

typedef struct musa_plan_options {
    int num_threads;   /* 0: musa_get_num_threads(); 1: no concurrent steps */
    bool memory_arena; /* false: every intermediate gets its own region (no reuse) */
    bool poison;       /* debug: fill buffers with NaN bytes when they die */
    /* The last loaned_outputs graph outputs may be placed in the arena,
     * planned with the intermediates, and returned as views of it: for
     * outputs the caller drops before the next run (a whole training
     * step's gradients, replaced at each step). A run that finds views of
     * an earlier run's outputs still held gets a new arena (the held ones
     * keep the old), so results are never overwritten. An output whose
     * root another output or a break also reads gets a buffer of its own.
     * Such plans run on the calling thread even under a stream. 0: none. */
    int loaned_outputs;
    /* Bytes the workspaces of convolutions marked winograd (pass
     * "winograd") may add to the plan's block beyond what the direct
     * primitives need: each such convolution whose Winograd workspace finds
     * no gap below that runs direct. 0: none (the option costs no memory).
     * musa.Config(winograd=True, memory_budget=...) gives the room the
     * budget leaves. */
    size_t winograd_room;
} musa_plan_options;

typedef struct musa_plan_stats {
    size_t arena_bytes;     /* planned peak of intermediates (one arena) */
    size_t naive_bytes;     /* sum of every intermediate, as eager allocates them */
    size_t live_peak_bytes; /* largest set of buffers live at one step */
    size_t scratch_bytes;   /* kernel workspaces and fused tiles, at the widest step */
    size_t held_bytes;      /* the block a plan holds: intermediates and, in their gaps, scratch */
    size_t loaned_bytes;    /* loaned outputs placed in that block (musa_plan_options) */
    int instructions;
    int kernels;         /* kernel instructions */
    int fused_groups;    /* fused-tile instructions */
    int fused_nodes;     /* nodes inside them */
    int chains;          /* fused groups run in registers (float32 chains, docs/jit.md) */
    int multi_updates;   /* multi-tensor update instructions (update rows run as one kernel) */
    int multi_nodes;     /* update nodes inside them */
    int winograd;        /* convolutions on oneDNN's Winograd primitive (attribute
                          * winograd, where the workspace fits: winograd_room) */
    int winograd_direct; /* convolutions marked winograd that run direct: no room */
    int parallel_steps;  /* steps running several instructions concurrently */
    int views;           /* view nodes turned into aliases */
    int inplace;         /* buffers reused in place */
    uint64_t runs;
    uint64_t parallel_tasks; /* instructions run as concurrent tasks */
    uint64_t arena_renewals; /* runs that found loaned outputs still held: a new block */
} musa_plan_stats;

typedef struct musa_plan_buffer {
    int value;     /* root value */
    size_t offset; /* in the arena */
    size_t bytes;
    int first; /* step that writes it */
    int last;  /* last step that reads it */
} musa_plan_buffer;

/* Lower an optimised graph (which must outlive the plan); opt may be NULL
 * (defaults: all threads, memory arena on). */
MUSA_API musa_plan *musa_plan_build(const musa_graph *g, const musa_plan_options *opt);
/* Free a plan and its arena; NULL is a no-op. Outputs of earlier runs are
 * the caller's and stay valid. */
MUSA_API void musa_plan_free(musa_plan *p);
/* Run with inputs in graph input order (contiguous, of the compiled dtypes
 * and shapes); outputs[0..n_out) receive new references. A kernel failing
 * names its op and the user's line where it was recorded. */
MUSA_API int musa_plan_run(musa_plan *p, int n_in, musa_tensor *const *inputs, int n_out,
                           musa_tensor **outputs);
/* The plan's figures (borrowed, updated by each run; all zero for NULL). */
MUSA_API const musa_plan_stats *musa_plan_get_stats(const musa_plan *p);
/* Whether graph output i of a run is lent from the arena (loaned_outputs). */
MUSA_API bool musa_plan_output_loaned(const musa_plan *p, int i);
/* The arena's buffers (borrowed, into *out); returns their count (0 for NULL). */
MUSA_API int musa_plan_buffers(const musa_plan *p, const musa_plan_buffer **out);
/* The plan as text, one instruction per line (malloc'd: free() it), or NULL
 * with the error set. */
MUSA_API char *musa_plan_text(const musa_plan *p);

/* ------------------------------------------------------------------------ */
/* Files (.musa)                                                            */
/* ------------------------------------------------------------------------ */

/*
 * A .musa file holds tensors and a JSON header; docs/format.md has the
 * layout. Its `kind` says what the header describes: "model" for a saved
 * compiled model, "object" for musa.save's containers. These calls are the
 * container that both share:
 *
 *     musa_file_writer *w = musa_file_writer_new("object");
 *     int64_t i = musa_file_writer_add_tensor(w, weight);     // its index in the file
 *     musa_file_writer_set_json(w, "object", "{\"weight\": 0}");
 *     if (musa_file_writer_save(w, "weights.musa")) ... musa_last_error() ...
 *     musa_file_writer_free(w);
 *
 *     musa_file *f = musa_file_open("weights.musa", MUSA_FILE_MMAP);
 *     musa_tensor *t = musa_file_tensor(f, 0);                // a new reference
 *     musa_file_close(f);                                      // t stays valid
 *
 * - Saving is atomic: the bytes go to a temporary file in the same folder,
 *   which is synced and renamed over the target; a crash at any moment
 *   leaves the old file or the new one, never a mix.
 * - Tensors that share storage are saved with it once and load as views of
 *   one storage again; the same tensor added twice is one entry.
 * - Opening validates everything before allocating any tensor: the three
 *   CRC-32C (prelude, header, data), the JSON, every storage inside the data
 *   section without overlap, every tensor inside its storage, shape products
 *   without overflow. A bad file fails with MUSA_ERR_IO and a message naming
 *   the file, the section and the byte offset; it never crashes.
 * - With MUSA_FILE_MMAP the tensors are the mapped file (no copy; writing
 *   one copies that page, the file never changes). The file must not be
 *   truncated by someone else while mapped (that is SIGBUS, as for any
 *   mapping); musa's own saves replace files by rename, which is safe.
 */
typedef struct musa_file_writer musa_file_writer;
typedef struct musa_file musa_file;

#define MUSA_FILE_MMAP 1 /* musa_file_open: map the file instead of copying the tensors */

/* A writer for a file of `kind` (1 to 32 of a-z and _). */
MUSA_API musa_file_writer *musa_file_writer_new(const char *kind);
/* Add t (retained until the writer is freed). Returns its index in the
 * file's tensor list (>= 0), or a negative status. */
MUSA_API int64_t musa_file_writer_add_tensor(musa_file_writer *w, const musa_tensor *t);
/* Keep `json` (a JSON text, checked by the reader's own parser) as header
 * member `key` (a-z and _, not "kind", "storages" or "tensors"); setting a
 * key again replaces it. */
MUSA_API int musa_file_writer_set_json(musa_file_writer *w, const char *key, const char *json);
/* Write the file atomically (see above). The writer can save again. */
MUSA_API int musa_file_writer_save(musa_file_writer *w, const char *path);
MUSA_API void musa_file_writer_free(musa_file_writer *w);

/* Open and validate a file (flags: 0 or MUSA_FILE_MMAP). NULL on failure. */
MUSA_API musa_file *musa_file_open(const char *path, int flags);
/* The same from bytes in memory (copied). */
MUSA_API musa_file *musa_file_open_memory(const void *data, size_t size);
/* The file's kind, and its whole header as JSON text (valid until close). */
MUSA_API const char *musa_file_kind(const musa_file *f);
MUSA_API const char *musa_file_header(const musa_file *f);
/* Its tensors: the count, and tensor i as a new reference. */
MUSA_API int64_t musa_file_num_tensors(const musa_file *f);
MUSA_API musa_tensor *musa_file_tensor(const musa_file *f, int64_t i);
/* Close; tensors taken from it stay valid. NULL is a no-op. */
MUSA_API void musa_file_close(musa_file *f);

/* ------------------------------------------------------------------------ */
/* Saved models: musa_model_save, musa_model_load, musa_model_run           */
/* ------------------------------------------------------------------------ */

/*
 * A compiled model saved to a .musa file (kind "model") runs from C with no
 * Python (docs/deploy.md; `musa-run` is a command around these calls):
 *
 *     musa_model *m = musa_model_load("model.musa", MUSA_FILE_MMAP);
 *     if (!m) { fprintf(stderr, "%s\n", musa_last_error()); return 1; }
 *     musa_tensor *x = musa_from_data(pixels, 2, (int64_t[]){1, 64}, MUSA_DTYPE_FLOAT32);
 *     musa_tensor *y;
 *     if (musa_model_run(m, 1, &x, 1, &y)) ... musa_last_error() ...
 *     musa_model_free(m);                      // y stays valid
 *
 * - The file keeps the captured graph (ops by name, typed attributes, the
 *   user's source line on each node), the parameters, the input signature
 *   (dtypes, ranks, fixed dims, a dynamic size with its range) and the
 *   options it was compiled with. Loading validates all of it, each node
 *   through its op's own inference; a bad file fails with MUSA_ERR_IO
 *   naming the member and byte offset.
 * - A run checks its inputs against the signature and fails naming the
 *   input, the dim and the values. It then runs the plan for those shapes:
 *   built on the first run (one per dynamic size, the last 8 kept), the
 *   same plan musa.jit builds for the live model, so outputs are bitwise
 *   equal to it on the same machine and thread count.
 * - Parameters the graph writes in place (BatchNorm's running statistics in
 *   training mode) live in the model: each run updates them there.
 * - A model runs one call at a time (a lock); load it twice to run two.
 */
typedef struct musa_model musa_model;

/* An integer attribute that follows a dynamic size: its values at the
 * traced size and their change per unit of the size. */
typedef struct musa_attr_slope {
    int node; /* the node's index in the graph */
    const char *field;
    int n; /* 1 for an int attribute, else the list's length */
    int64_t values[MUSA_MAX_ATTR_INTS];
    int64_t slope[MUSA_MAX_ATTR_INTS];
} musa_attr_slope;

typedef struct musa_model_save_options {
    int fusion_level;     /* the passes' options (musa_pass_ctx); NULL options: 2 */
    const char *disabled; /* comma-separated pass names, or NULL */
    bool memory_arena;    /* the plan's options (musa_plan_options) */
    int num_threads;
    bool channels_last;  /* musa_pass_ctx's: the loader plans convolutions NHWC */
    bool fuse_attention; /* musa_pass_ctx's: the loader fuses written-out attention */
    bool winograd;       /* musa_pass_ctx's: the loader plans Winograd convolutions */
    int n_slopes;        /* a dynamic graph's size-following attributes */
    const musa_attr_slope *slopes;
    const char *extra_key;  /* one more header member (NULL: none), e.g. "python" */
    const char *extra_json; /* its JSON text */
} musa_model_save_options;

/* Save captured graph g (not optimised, no graph breaks, at most one
 * dynamic symbol) with its parameters' current values, atomically. opt may
 * be NULL (fusion level 2, arena on). Custom ops are saved by name. */
MUSA_API int musa_model_save(const musa_graph *g, const char *path,
                             const musa_model_save_options *opt);
/* Load a model (flags: 0 or MUSA_FILE_MMAP), or from bytes in memory. */
MUSA_API musa_model *musa_model_load(const char *path, int flags);
MUSA_API musa_model *musa_model_load_memory(const void *data, size_t size);
MUSA_API int musa_model_num_inputs(const musa_model *m);
MUSA_API int musa_model_num_outputs(const musa_model *m);
/* Input i's name (may be NULL), dtype, rank and dims (room for
 * MUSA_MAX_DIMS; -1 for a dim that follows the dynamic size, whose range
 * goes to *lo, *hi). Any out pointer may be NULL. */
MUSA_API int musa_model_input(const musa_model *m, int i, const char **name, musa_dtype *dtype,
                              int *ndim, int64_t *dims, int64_t *lo, int64_t *hi);
/* The file's header (JSON text, valid while m lives) and the loaded graph
 * (borrowed: for inspection, e.g. musa_graph_text). */
MUSA_API const char *musa_model_header(const musa_model *m);
MUSA_API const musa_graph *musa_model_graph(const musa_model *m);
/* Run: inputs in the saved order; outputs[0..n_out) receive new references
 * (n_out must be musa_model_num_outputs). */
MUSA_API int musa_model_run(musa_model *m, int n_in, musa_tensor *const *inputs, int n_out,
                            musa_tensor **outputs);
/* NULL is a no-op; outputs of earlier runs stay valid. */
MUSA_API void musa_model_free(musa_model *m);

/*
 * ONNX models run the same way (docs/onnx.md): musa_model_load of a path
 * ending in ".onnx", or musa_model_load_memory of a serialized ModelProto,
 * reads one (opsets 1 to 18; `musa-run model.onnx` too). Loading checks the
 * whole file before any tensor is allocated: the protobuf, the opset, each
 * node's op, domain, input and output counts and attribute names and
 * types, that every value is made before it is read (no cycles), unique
 * names, and each initializer's data against its dims (external data only
 * from files inside the model's folder). A problem fails with MUSA_ERR_IO,
 * an op the importer does not read with MUSA_ERR_NOT_IMPLEMENTED, each
 * naming the node, its op (and domain and opset).
 * - Inputs are the graph's inputs that no initializer gives; a dim that
 *   the file names (dim_param) or leaves open is -1 in musa_model_input
 *   (lo and hi are 0) and takes any size, equal names equal sizes.
 * - Each new set of input shapes captures the graph anew: nodes whose
 *   inputs are constants or shapes are computed then (so Shape -> Gather ->
 *   Concat -> Reshape chains fold into integers), the rest is recorded,
 *   optimised and planned like a .musa model. musa_model_graph gives the
 *   graph of the last new signature (NULL before the first run).
 * - Inputs an op needs as integers (Reshape's shape, Slice's starts, ...)
 *   must be known that way; one computed from the model's inputs is an
 *   error naming the node and the input.
 */
/* The ONNX ops the importer reads, i from 0 (NULL past the last). */
MUSA_API const char *musa_onnx_op(int i);

/* NumPy .npy files (versions 1 to 3; little-endian float16/32/64,
 * int8/32/64, uint8 and bool): read (validated like a .musa file: a bad
 * file is MUSA_ERR_IO naming what is wrong) and write (version 1.0). */
MUSA_API musa_tensor *musa_npy_load(const char *path);
MUSA_API musa_tensor *musa_npy_read_memory(const void *data, size_t size);
MUSA_API int musa_npy_save(const char *path, const musa_tensor *t);

/* ------------------------------------------------------------------------ */
/* Threads and memory                                                       */
/* ------------------------------------------------------------------------ */

/* Threads used by musa, oneDNN (OpenMP) and BLAS together; n >= 1. The
 * default is the number of online CPUs. Processes that share cores should
 * split them (or run with OMP_WAIT_POLICY=PASSIVE): OpenMP threads spin
 * between regions, and two spinning teams on the same cores slowed an eager
 * training step 5.8x here (docs/design.md, "Threads"). */
MUSA_API int musa_set_num_threads(int n);
MUSA_API int musa_get_num_threads(void);

typedef struct musa_alloc_stats {
    size_t current_bytes;   /* bytes held by live tensors (rounded to size classes) */
    size_t peak_bytes;      /* max of current_bytes since start or the last reset */
    size_t cached_bytes;    /* freed blocks kept for reuse: on a miss, cached blocks are
                             * returned until in-use + cached + the new block fit in
                             * twice the most ever in use + 16 MiB */
    uint64_t alloc_count;   /* allocations served (from the cache or the system) */
    uint64_t system_allocs; /* allocations that reached the system allocator */
} musa_alloc_stats;

/* Statistics of the caching CPU allocator. All blocks are 64-byte aligned. */
MUSA_API void musa_alloc_get_stats(musa_alloc_stats *stats);
/* Set peak_bytes to current_bytes. */
MUSA_API void musa_alloc_reset_peak(void);
/* Return cached blocks to the system. */
MUSA_API void musa_alloc_empty_cache(void);
/* Return the C heap's free pages to the system (glibc's malloc_trim; elsewhere
 * nothing), keeping the cache: what a compilation freed (its graphs, the plan
 * builder's tables) otherwise stays resident below the blocks allocated
 * after it. musa.jit calls it once a capture is planned. */
MUSA_API void musa_alloc_trim(void);
/* The bytes a tensor of `bytes` holds in the statistics (its size class). */
MUSA_API size_t musa_alloc_size(size_t bytes);

/* ------------------------------------------------------------------------ */
/* Profiler                                                                 */
/* ------------------------------------------------------------------------ */
/*
 * One profiler per process records timed events on every thread: each
 * eagerly dispatched op, each instruction of a plan run (a kernel, a fused
 * group named by its ops, or a multi-tensor update), each autograd node's
 * backward, user ranges, and, with MUSA_PROFILE_MEMORY, each allocation
 * and free of the caching allocator with its running total.
 *
 *     musa_profiler_start(MUSA_PROFILE_SHAPES);
 *     ... run ops, plans, a saved model ...
 *     musa_profiler_stop();
 *     musa_profiler_write_chrome_trace("trace.json");   // Perfetto, chrome://tracing
 *
 * Events stay readable from stop until the next start. Off, the profiler
 * costs each op one branch; bench_core reports its cost per op when on.
 */
#define MUSA_PROFILE_SHAPES 1 /* record each op's input dtypes and shapes (see detail) */
#define MUSA_PROFILE_MEMORY 2 /* record allocations, frees and the running total */
#define MUSA_PROFILE_STACK                                                                         \
    4 /* record where each op and range was called from (see below),                               \
       * and each plan instruction's line in the captured program */

typedef enum musa_profile_kind {
    MUSA_PROFILE_OP = 0,        /* an eagerly dispatched op (nested ops nest) */
    MUSA_PROFILE_PLAN = 1,      /* a plan instruction */
    MUSA_PROFILE_BACKWARD = 2,  /* an autograd node's backward */
    MUSA_PROFILE_RANGE = 3,     /* a user range (musa_profiler_range_end) */
    MUSA_PROFILE_MEMORY_EV = 4, /* an allocation or a free (dur_ns 0) */
    MUSA_PROFILE_STREAM = 5     /* an op or plan run by a stream's worker (see Streams) */
} musa_profile_kind;

typedef struct musa_profile_event {
    const char *name;     /* op, instruction, node or range name; "[memory]" */
    const char *detail;   /* ops, with MUSA_PROFILE_SHAPES: the inputs, "float32[64, 128],
                           * int64[64]"; plan kernels and fused groups: the (last) node's
                           * inputs likewise; multi-tensor updates: "30 parameters"; or "" */
    int kind;             /* musa_profile_kind */
    int tid;              /* the recording thread's id (gettid) */
    int64_t start_ns;     /* from musa_profiler_start */
    int64_t dur_ns;       /* duration; 0 for memory events */
    int64_t bytes;        /* memory events: allocated (> 0) or freed (< 0) */
    int64_t total_bytes;  /* memory events: the allocator's current bytes after it */
    const char *location; /* with MUSA_PROFILE_STACK: the caller's "file:line" (a plan
                           * instruction: its node's, as captured), or "" */
} musa_profile_event;

/* Start recording (dropping the last session's events); flags are
 * MUSA_PROFILE_* bits. MUSA_ERR_RUNTIME if it is already running. */
MUSA_API int musa_profiler_start(int flags);
/* Stop recording; MUSA_ERR_RUNTIME if it is not running. */
MUSA_API int musa_profiler_stop(void);
MUSA_API bool musa_profiler_enabled(void);
/* The last session's events, in start order (ties: the longer first, so
 * an enclosing event precedes what it contains); -1 while recording. */
MUSA_API int64_t musa_profiler_num_events(void);
/* Event i of the last session; its strings live until the next start.
 * MUSA_ERR_INDEX out of range, MUSA_ERR_RUNTIME while recording. */
MUSA_API int musa_profiler_get_event(int64_t i, musa_profile_event *e);
/* The last session as Trace Event Format JSON: a complete ("X") event per
 * op, instruction, node and range (ts, dur, pid, tid, name, cat, args),
 * an instant ("i") event per allocation and free and a counter ("C") of
 * the allocator's bytes, and each thread named. MUSA_ERR_IO naming the path
 * when it cannot be written. */
MUSA_API int musa_profiler_write_chrome_trace(const char *path);
/* Where the calling thread is in the caller's program ("train.py:12"), for
 * MUSA_PROFILE_STACK: a language binding sets it (the Python package
 * names the innermost frame outside musa); NULL, the default, records "".
 * The function's strings must live as long as the process. */
MUSA_API void musa_profiler_set_location_fn(const char *(*fn)(void));
/* A user range: begin returns a timestamp (0 while the profiler is off);
 * end records [begin, now) as `name` on the calling thread, if the same
 * session is still recording. Ranges nest by time, like ops. */
MUSA_API int64_t musa_profiler_range_begin(void);
MUSA_API void musa_profiler_range_end(const char *name, int64_t begin);

/* ------------------------------------------------------------------------ */
/* Streams and events                                                       */
/* ------------------------------------------------------------------------ */
/*
 * A stream is a worker thread that runs the ops issued under it in order,
 * asynchronously: with a stream current on a thread, musa_op_call (and
 * everything built on it: autograd's recorded ops, plan runs) checks the
 * call, makes the outputs and returns at once; the kernel runs later on
 * the stream's worker, with `threads` threads of its own.
 *
 *     musa_stream *s = musa_stream_new(1);
 *     musa_stream *prev = musa_stream_set_current(s);
 *     ... musa_matmul(a, b) ...        // queued on s
 *     musa_stream_set_current(prev);
 *     musa_stream_synchronize(s);      // or read the result: reads wait
 *     musa_stream_free(s);
 *
 * Results equal a synchronous run. musa tracks which stream work reads and
 * writes each storage: work on one stream that uses a tensor another
 * stream writes (or, for a write, reads) waits for that work; code on the
 * default stream (the calling thread, no stream current) waits before it
 * touches such a tensor, and so do host reads (musa_tensor_data, copy_to,
 * item, printing). musa_stream_wait_stream and events order work that no
 * shared tensor orders (and let timing measure it). A tensor released while
 * a stream still uses it stays alive until that work is done.
 *
 * Ops whose results depend on when they run stay synchronous even under a
 * stream (random sampling draws from the global generator; custom ops may
 * call back into Python), as does recording (symbolic and trace modes);
 * they wait for the stream work on their tensors first.
 *
 * An error in a stream's work (a kernel's failure) is kept by the stream:
 * its later work is skipped, and the error is returned by the next
 * musa_stream_synchronize / musa_synchronize (which then clear it), by an
 * event synchronize after it, and by host reads of tensors that work was
 * to produce. Those tensors hold unspecified values.
 */
typedef struct musa_stream musa_stream;
typedef struct musa_event musa_event;

/* A new stream whose kernels use `threads` threads (1 to 256). */
MUSA_API musa_stream *musa_stream_new(int threads);
/* Wait for its work, then free it. Never free a stream that is current on
 * another thread; on the calling thread it stops being current. */
MUSA_API void musa_stream_free(musa_stream *s);
/* A number naming the stream (1, 2, ...; 0 for NULL, the default stream). */
MUSA_API uint64_t musa_stream_id(const musa_stream *s);
MUSA_API int musa_stream_threads(const musa_stream *s);
/* The calling thread's current stream (NULL: the default, synchronous) and
 * setting it (returns the previous one). */
MUSA_API musa_stream *musa_stream_current(void);
MUSA_API musa_stream *musa_stream_set_current(musa_stream *s);
/* Wait for all work issued to s; returns (and clears) the error of failed
 * work. NULL: nothing to wait for. */
MUSA_API int musa_stream_synchronize(musa_stream *s);
/* Whether all work issued to s has finished. */
MUSA_API bool musa_stream_query(musa_stream *s);
/* Work issued to s from now on starts after the work issued to `other`
 * so far. s NULL: the calling thread waits for it now. */
MUSA_API int musa_stream_wait_stream(musa_stream *s, musa_stream *other);
/* Wait for every stream; returns the first error. */
MUSA_API int musa_synchronize(void);

/* An event marks a point in a stream's work; with timing it records when
 * the stream reached it. */
MUSA_API musa_event *musa_event_new(bool enable_timing);
MUSA_API void musa_event_free(musa_event *e);
/* Mark the work issued to s so far (NULL: the default stream, reached now). */
MUSA_API int musa_event_record(musa_event *e, musa_stream *s);
/* Whether the marked work has finished (true if never recorded). */
MUSA_API bool musa_event_query(const musa_event *e);
/* Wait for the marked work; returns the error of failed work up to it. */
MUSA_API int musa_event_synchronize(const musa_event *e);
/* Work issued to s from now on starts after the event's work. s NULL: the
 * calling thread waits now. */
MUSA_API int musa_stream_wait_event(musa_stream *s, const musa_event *e);
/* Milliseconds from start to end; both recorded with timing and complete. */
MUSA_API int musa_event_elapsed_time(const musa_event *start, const musa_event *end, double *ms);

/* ------------------------------------------------------------------------ */
/* Distributed: collectives on MPI or TCP                                   */
/* ------------------------------------------------------------------------ */
/*
 * Data-parallel training runs one process per replica, started by MPI's
 * launcher (`mpirun -np 4 ./train`, with a hostfile across machines). The
 * process group is MPI_COMM_WORLD of Open MPI, loaded on first use from
 * libmusa_mpi.so (built next to libmusa when libopenmpi-dev is installed),
 * so programs that never call musa_dist_init never load MPI.
 *
 *     musa_dist_init();                                  // rank, size from mpirun
 *     musa_tensor *g = ...;                              // this rank's gradient
 *     musa_dist_all_reduce(g, MUSA_REDUCE_AVG);          // the mean over ranks
 *     musa_dist_finalize();
 *
 * Processes started any other way (fork, a shell loop, a cluster's
 * launcher) form the group over TCP instead, knowing their rank, the world
 * size and where rank 0 listens:
 *
 *     musa_dist_init_tcp("10.0.0.1", 29500, rank, world_size, 1800.0);
 *
 * The ranks connect through rank 0, then into a ring of TCP connections
 * that every collective runs over (ring all-reduce). Each collective first
 * checks with its neighbour that both called the same thing, so ranks that
 * diverge fail naming both calls. A peer that exits makes its neighbours
 * fail at once ("rank 2 closed its connection"); every other wait fails
 * after the timeout without progress; after a failure every call fails
 * with the first error. Non-blocking all-reduces complete before they
 * return on this backend.
 *
 * Every rank must call the same collectives in the same order with tensors
 * of one dtype and shape; the public functions check that between ranks (one
 * small all-reduce) and fail with MUSA_ERR_VALUE naming both shapes. They
 * take tensors of every dtype and any layout (float16 and bfloat16 reduce in
 * float32, rounding once per step of MPI's reduction; bool reduces with
 * or, and with min). MUSA_REDUCE_AVG needs a floating dtype.
 *
 * The collectives are ops (dist_* rows of the op table), so a captured
 * function records them as graph nodes, which run in program order, once per
 * call, on the calling thread. MPI's failures (a peer that died, a
 * truncated message) come back as MUSA_ERR_RUNTIME with MPI's text. Before
 * musa_dist_init, every call fails with MUSA_ERR_RUNTIME.
 */
typedef enum musa_reduce_op {
    MUSA_REDUCE_SUM = 0,
    MUSA_REDUCE_AVG = 1, /* the sum divided by the world size */
    MUSA_REDUCE_MAX = 2,
    MUSA_REDUCE_MIN = 3,
} musa_reduce_op;

/* Join the process group (MPI_Init_thread at MPI_THREAD_SERIALIZED: any
 * thread may call the collectives, one at a time). A second call is a
 * no-op; after musa_dist_finalize it fails (MPI cannot start again). A
 * process not started by mpirun is a group of one. */
MUSA_API int musa_dist_init(void);
/* Join a group of world_size processes over TCP: rank 0 listens on port
 * (all interfaces), the others connect to host:port, retrying until rank 0
 * is up. Every wait (the rendezvous, each collective) fails with
 * MUSA_ERR_RUNTIME after timeout_s seconds without progress. Fails with
 * MUSA_ERR_VALUE for a bad argument, MUSA_ERR_RUNTIME when a group is up
 * already. After musa_dist_finalize a TCP group can be formed again. */
MUSA_API int musa_dist_init_tcp(const char *host, int port, int rank, int world_size,
                                double timeout_s);
/* "mpi" or "tcp"; NULL when no group is up. */
MUSA_API const char *musa_dist_backend(void);
MUSA_API bool musa_dist_is_initialized(void);
/* This process's rank and the group's size; -1 when not initialized. */
MUSA_API int musa_dist_rank(void);
MUSA_API int musa_dist_world_size(void);
/* Finish the collectives in flight, then leave the group (MPI_Finalize;
 * over TCP, close the ring). */
MUSA_API int musa_dist_finalize(void);
/* End every process of the job with this exit code (MPI_Abort), now: for
 * a rank that failed while the others may wait for it in a collective.
 * Over TCP this process exits and its neighbours' calls fail at once. */
MUSA_API void musa_dist_abort(int code);
MUSA_API int musa_dist_barrier(void);

/* In place: t becomes the reduction of every rank's t. */
MUSA_API int musa_dist_all_reduce(musa_tensor *t, musa_reduce_op op);
/* In place: t becomes rank src's t. */
MUSA_API int musa_dist_broadcast(musa_tensor *t, int src);
/* A new tensor of shape (world_size, *t.shape): row r is rank r's t. */
MUSA_API musa_tensor *musa_dist_all_gather(musa_tensor *t);
/* t's first dim is world_size * k: a new tensor of shape (k, ...) holding
 * block `rank` of the reduction of every rank's t. */
MUSA_API musa_tensor *musa_dist_reduce_scatter(musa_tensor *t, musa_reduce_op op);
/* Non-blocking all-reduce of n tensors of one dtype, as one message: returns
 * a new 1-D tensor, their elements packed in order (divided by the world
 * size as they are packed, for MUSA_REDUCE_AVG, as PyTorch's DDP does),
 * being reduced while the caller works on. musa_dist_all_reduce_wait(flat,
 * op) waits for it and returns flat, which then holds the result, as a new
 * reference. Until then flat must stay alive and unread; every started
 * reduction must be waited for, in any order. Between ranks nothing is checked:
 * this is the bucket path of DistributedDataParallel, whose tensors are
 * checked once when it is built. */
MUSA_API musa_tensor *musa_dist_all_reduce_start(int n, musa_tensor *const *tensors,
                                                 musa_reduce_op op);
MUSA_API musa_tensor *musa_dist_all_reduce_wait(musa_tensor *flat, musa_reduce_op op);
/* MPI moves non-blocking collectives along only inside MPI calls: code that
 * works long between a start and its wait calls this now and then (compiled
 * plans do it between steps, DistributedDataParallel from its hooks). Cheap
 * when nothing is in flight or another thread is inside MPI. */
MUSA_API void musa_dist_progress(void);

#ifdef __cplusplus
}
#endif

#endif /* MUSA_H */
