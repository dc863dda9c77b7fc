/*
 * grad_elementwise.c - backward formulas of the elementwise ops.
 *
 * Each formula is written with public op functions (so it is differentiable
 * itself, for grad of grad) and reduces broadcast gradients back to each
 * input's shape with musa_sum_to_size.
 */
#include <math.h>

#include "grad_util.h"

#define G       (a->gout[0])
#define X       (a->in[0])
#define X1      (a->in[1])
#define Y       (a->out[0])
#define T(expr) musa_tmp(&t, (expr))
#define NUM(v)  T(musa_number(v))

int grad_none(const musa_grad_args *a, musa_tensor **gin) {
    MUSA_UNUSED(a), MUSA_UNUSED(gin);
    return musa_err(MUSA_ERR_RUNTIME, "[autograd] this op is not differentiable");
}

/* Run a one-input formula: gin[0] = EXPR with temporaries released. */
#define UNARY_GRAD(NAME, EXPR)                                                                     \
    int NAME(const musa_grad_args *a, musa_tensor **gin) {                                         \
        musa_temps t = {0};                                                                        \
        gin[0] = (EXPR);                                                                           \
        musa_temps_release(&t);                                                                    \
        return gin[0] ? MUSA_OK : musa_last_error_code();                                          \
    }

UNARY_GRAD(grad_neg, musa_neg(G))
UNARY_GRAD(grad_abs, musa_mul(G, T(musa_sign(X))))
UNARY_GRAD(grad_zero, musa_zeros_like(G))
UNARY_GRAD(grad_exp, musa_mul(G, Y))
UNARY_GRAD(grad_expm1, musa_mul(G, T(musa_add(Y, NUM(1)))))
UNARY_GRAD(grad_log, musa_div(G, X))
UNARY_GRAD(grad_log1p, musa_div(G, T(musa_add(X, NUM(1)))))
UNARY_GRAD(grad_sqrt, musa_div(G, T(musa_mul(Y, NUM(2)))))
/* d/dx x^-1/2 = -1/2 y^3 */
UNARY_GRAD(grad_rsqrt, musa_mul(T(musa_mul(G, NUM(-0.5))), T(musa_mul(Y, T(musa_mul(Y, Y))))))
UNARY_GRAD(grad_reciprocal, musa_mul(T(musa_neg(G)), T(musa_mul(Y, Y))))
UNARY_GRAD(grad_sin, musa_mul(G, T(musa_cos(X))))
UNARY_GRAD(grad_cos, musa_mul(T(musa_neg(G)), T(musa_sin(X))))
UNARY_GRAD(grad_tanh, musa_mul(G, T(musa_sub(NUM(1), T(musa_mul(Y, Y))))))
UNARY_GRAD(grad_sigmoid, musa_mul(G, T(musa_mul(Y, T(musa_sub(NUM(1), Y))))))
/* d/dx erf(x) = 2/sqrt(pi) exp(-x^2) */
UNARY_GRAD(grad_erf, musa_mul(T(musa_mul(G, NUM(1.1283791670955126))),
                              T(musa_exp(T(musa_neg(T(musa_mul(X, X))))))))
UNARY_GRAD(grad_erfc, musa_mul(T(musa_mul(G, NUM(-1.1283791670955126))),
                               T(musa_exp(T(musa_neg(T(musa_mul(X, X))))))))
/* Bessel I: i0' = i1; i1' = i0 - i1 / x (1/2 at 0); the scaled forms add
 * -sign(x) times themselves: i0e' = i1e - sign(x) i0e,
 * i1e' = i0e - i1e (sign(x) + 1 / x) (1/2 at 0) */
UNARY_GRAD(grad_i0, musa_mul(G, T(musa_i1(X))))
UNARY_GRAD(grad_i0e, musa_mul(G, T(musa_sub(T(musa_i1e(X)), T(musa_mul(T(musa_sign(X)), Y))))))
static musa_tensor *at_zero_half(musa_tensor *x, musa_tensor *v) {
    musa_temps t = {0};
    musa_tensor *r = musa_where(T(musa_eq(x, NUM(0))), T(musa_full_like(v, 0.5)), v);
    musa_temps_release(&t);
    return r;
}
UNARY_GRAD(grad_i1, musa_mul(G, T(at_zero_half(X, T(musa_sub(T(musa_i0(X)), T(musa_div(Y, X))))))))
UNARY_GRAD(grad_i1e,
           musa_mul(G, T(at_zero_half(
                           X, T(musa_sub(T(musa_i0e(X)),
                                         T(musa_mul(Y, T(musa_add(T(musa_sign(X)),
                                                                  T(musa_reciprocal(X))))))))))))
/* Bessel J, Y, K: j0' = -j1, j1' = j0 - j1 / x (1/2 at 0), and y the
 * same; k0' = -k1, k1' = -k0 - k1 / x; the scaled forms exp(x) k add
 * themselves: k0e' = k0e - k1e, k1e' = k1e (1 - 1 / x) - k0e */
UNARY_GRAD(grad_bessel_j0, musa_mul(T(musa_neg(G)), T(musa_bessel_j1(X))))
UNARY_GRAD(grad_bessel_j1,
           musa_mul(G, T(at_zero_half(X, T(musa_sub(T(musa_bessel_j0(X)), T(musa_div(Y, X))))))))
UNARY_GRAD(grad_bessel_y0, musa_mul(T(musa_neg(G)), T(musa_bessel_y1(X))))
UNARY_GRAD(grad_bessel_y1, musa_mul(G, T(musa_sub(T(musa_bessel_y0(X)), T(musa_div(Y, X))))))
UNARY_GRAD(grad_modified_bessel_k0, musa_mul(T(musa_neg(G)), T(musa_modified_bessel_k1(X))))
UNARY_GRAD(grad_modified_bessel_k1,
           musa_mul(T(musa_neg(G)), T(musa_add(T(musa_modified_bessel_k0(X)), T(musa_div(Y, X))))))
UNARY_GRAD(grad_scaled_modified_bessel_k0,
           musa_mul(G, T(musa_sub(Y, T(musa_scaled_modified_bessel_k1(X))))))
UNARY_GRAD(grad_scaled_modified_bessel_k1,
           musa_mul(G, T(musa_sub(T(musa_mul(Y, T(musa_sub(NUM(1), T(musa_reciprocal(X)))))),
                                  T(musa_scaled_modified_bessel_k0(X))))))
/* Airy: Ai' by its row, Ai'' = x Ai */
UNARY_GRAD(grad_airy_ai, musa_mul(G, T(musa_call1(MUSA_OP_airy_ai_prime, X, NULL))))
UNARY_GRAD(grad_airy_ai_prime, musa_mul(G, T(musa_mul(X, T(musa_airy_ai(X))))))
/* inverse trigonometric and hyperbolic functions */
UNARY_GRAD(grad_asin, musa_div(G, T(musa_sqrt(T(musa_sub(NUM(1), T(musa_mul(X, X))))))))
UNARY_GRAD(grad_acos,
           musa_div(T(musa_neg(G)), T(musa_sqrt(T(musa_sub(NUM(1), T(musa_mul(X, X))))))))
UNARY_GRAD(grad_atan, musa_div(G, T(musa_add(NUM(1), T(musa_mul(X, X))))))
UNARY_GRAD(grad_asinh, musa_div(G, T(musa_sqrt(T(musa_add(T(musa_mul(X, X)), NUM(1)))))))
UNARY_GRAD(grad_acosh,
           musa_div(G, T(musa_sqrt(T(musa_mul(T(musa_sub(X, NUM(1))), T(musa_add(X, NUM(1)))))))))
UNARY_GRAD(grad_atanh, musa_div(G, T(musa_sub(NUM(1), T(musa_mul(X, X))))))
/* GELU: its fused derivative kernel, or under create_graph the derivative
 * in primitives (erf: Phi(x) + x phi(x); tanh: the chain rule through
 * tanh(sqrt(2/pi) (x + 0.044715 x^3))) so higher orders stay exact. */
int grad_gelu(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_gelu *at = a->attrs;
    musa_temps t = {0};
    if (!musa_is_grad_enabled()) {
        gin[0] = musa_call2(MUSA_OP_gelu_backward, G, X, at);
    } else if (!at->tanh) {
        musa_tensor *cdf = T(musa_mul(
            T(musa_add(T(musa_erf(T(musa_mul(X, NUM(0.7071067811865476))))), NUM(1))), NUM(0.5)));
        musa_tensor *pdf = T(musa_mul(T(musa_exp(T(musa_mul(T(musa_mul(X, X)), NUM(-0.5))))),
                                      NUM(0.3989422804014327)));
        gin[0] = musa_mul(G, T(musa_add(cdf, T(musa_mul(X, pdf)))));
    } else {
        musa_tensor *x2 = T(musa_mul(X, X));
        musa_tensor *u = T(musa_mul(T(musa_add(X, T(musa_mul(T(musa_mul(x2, X)), NUM(0.044715))))),
                                    NUM(0.7978845608028654)));
        musa_tensor *th = T(musa_tanh(u));
        musa_tensor *du = T(musa_mul(T(musa_add(T(musa_mul(x2, NUM(3 * 0.044715))), NUM(1))),
                                     NUM(0.7978845608028654)));
        musa_tensor *left = T(musa_mul(T(musa_add(th, NUM(1))), NUM(0.5)));
        musa_tensor *right = T(musa_mul(
            T(musa_mul(T(musa_mul(X, NUM(0.5))), T(musa_sub(NUM(1), T(musa_mul(th, th)))))), du));
        gin[0] = musa_mul(G, T(musa_add(left, right)));
    }
    musa_temps_release(&t);
    return gin[0] ? MUSA_OK : musa_last_error_code();
}

UNARY_GRAD(grad_relu, musa_where(T(musa_gt(Y, NUM(0))), G, NUM(0)))
UNARY_GRAD(grad_clone, musa_tensor_retain(G))

int grad_cast(const musa_grad_args *a, musa_tensor **gin) {
    gin[0] = musa_cast(G, (musa_dtype)a->in_meta[0].dtype);
    return gin[0] ? MUSA_OK : musa_last_error_code();
}

/* Two-input formulas: each side computed only when needed, then reduced
 * to its input's shape. */
static int finish2(const musa_grad_args *a, musa_tensor **gin, musa_tensor *ga, musa_tensor *gb,
                   musa_temps *t) {
    int rc = MUSA_OK;
    gin[0] = a->needs[0] ? grad_to_input(a, 0, ga) : NULL;
    gin[1] = a->needs[1] ? grad_to_input(a, 1, gb) : NULL;
    if ((a->needs[0] && !gin[0]) || (a->needs[1] && !gin[1])) {
        rc = musa_last_error_code();
        musa_tensor_release(gin[0]), musa_tensor_release(gin[1]);
        gin[0] = gin[1] = NULL;
    }
    musa_temps_release(t);
    return rc;
}

int grad_add(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    return finish2(a, gin, G, G, &t);
}

int grad_sub(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    return finish2(a, gin, G, a->needs[1] ? T(musa_neg(G)) : NULL, &t);
}

int grad_mul(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    return finish2(a, gin, a->needs[0] ? T(musa_mul(G, X1)) : NULL,
                   a->needs[1] ? T(musa_mul(G, X)) : NULL, &t);
}

int grad_div(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    musa_tensor *ga = a->needs[0] ? T(musa_div(G, X1)) : NULL, *gb = NULL;
    if (a->needs[1]) /* -g a / b^2 */
        gb = T(musa_div(T(musa_div(T(musa_mul(T(musa_neg(G)), X)), X1)), X1));
    return finish2(a, gin, ga, gb, &t);
}

/* d/da a^b = b a^(b-1) (0 where b == 0); d/db a^b = a^b log a (0 where a == 0
 * and b >= 0), as PyTorch defines them at those points. */
int grad_pow(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    musa_tensor *ga = NULL, *gb = NULL, *zero = NUM(0);
    if (a->needs[0]) {
        /* a Python number exponent stays a number (float64): number - number
         * would be computed in the default dtype, and 1/3 - 1 in float32
         * loses digits a float64 base keeps */
        double e;
        musa_tensor *e1 = (X1->flags & MUSA_TF_NUMBER) && X1->dtype == MUSA_DTYPE_FLOAT64 &&
                                  !musa_tensor_item(X1, &e)
                              ? NUM(e - 1)
                              : T(musa_sub(X1, NUM(1)));
        musa_tensor *d = T(musa_mul(X1, T(musa_pow(X, e1))));
        ga = T(musa_mul(G, T(musa_where(T(musa_eq(X1, zero)), zero, d))));
    }
    if (a->needs[1]) {
        musa_tensor *d = T(musa_mul(Y, T(musa_log(X))));
        musa_tensor *mask = T(musa_logical_and(T(musa_eq(X, zero)), T(musa_ge(X1, zero))));
        gb = T(musa_mul(G, T(musa_where(mask, zero, d))));
    }
    return finish2(a, gin, ga, gb, &t);
}

/* maximum/minimum: the winner takes the gradient; ties split it evenly. */
static int grad_extreme2(const musa_grad_args *a, musa_tensor **gin, bool is_max) {
    musa_temps t = {0};
    musa_tensor *zero = NUM(0);
    musa_tensor *half = T(musa_where(T(musa_eq(X, X1)), T(musa_mul(G, NUM(0.5))), G));
    musa_tensor *a_loses = is_max ? T(musa_lt(X, X1)) : T(musa_gt(X, X1));
    musa_tensor *b_loses = is_max ? T(musa_gt(X, X1)) : T(musa_lt(X, X1));
    musa_tensor *ga = a->needs[0] ? T(musa_where(a_loses, zero, half)) : NULL;
    musa_tensor *gb = a->needs[1] ? T(musa_where(b_loses, zero, half)) : NULL;
    return finish2(a, gin, ga, gb, &t);
}

int grad_maximum(const musa_grad_args *a, musa_tensor **gin) {
    return grad_extreme2(a, gin, true);
}
int grad_minimum(const musa_grad_args *a, musa_tensor **gin) {
    return grad_extreme2(a, gin, false);
}

/* fmod: d/db = -trunc(a / b), with trunc(a/b) = (a - fmod(a, b)) / b. */
int grad_fmod(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    musa_tensor *gb = NULL;
    if (a->needs[1]) {
        musa_tensor *q = T(musa_div(T(musa_sub(X, T(musa_fmod(X, X1)))), X1));
        gb = T(musa_mul(T(musa_neg(G)), q));
    }
    return finish2(a, gin, G, gb, &t);
}

/* igamma(a, x) = P(a, x): d/dx the Gamma(a) density, d/da by igamma_grad_a
 * (PyTorch has no derivative in a); igammac = 1 - P: their negatives. */
static int grad_incomplete_gamma(const musa_grad_args *a, musa_tensor **gin, double sign) {
    musa_temps t = {0};
    musa_tensor *ga = NULL, *gx = NULL, *s = NUM(sign);
    if (a->needs[0])
        ga = T(musa_mul(T(musa_mul(G, s)), T(musa_call2(MUSA_OP_igamma_grad_a, X, X1, NULL))));
    if (a->needs[1])
        gx = T(musa_mul(T(musa_mul(G, s)), T(musa_call2(MUSA_OP_igamma_grad_x, X, X1, NULL))));
    return finish2(a, gin, ga, gx, &t);
}
int grad_igamma(const musa_grad_args *a, musa_tensor **gin) {
    return grad_incomplete_gamma(a, gin, 1);
}
int grad_igammac(const musa_grad_args *a, musa_tensor **gin) {
    return grad_incomplete_gamma(a, gin, -1);
}

/* A Gamma(alpha) sample y: dy/dalpha along its quantile (implicit
 * reparameterisation), standard_gamma_grad(alpha, y). */
UNARY_GRAD(grad_standard_gamma, musa_mul(G, T(musa_standard_gamma_grad(X, Y))))

/* copysign(a, b) = |a| sign(b): d/da = y / a (0 where a is 0), d/db = 0. */
int grad_copysign(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    musa_tensor *ga = NULL, *gb = NULL;
    if (a->needs[0]) {
        musa_tensor *zero = NUM(0);
        musa_tensor *r = T(musa_where(T(musa_eq(X, zero)), zero, T(musa_div(Y, X))));
        ga = T(musa_mul(G, r));
    }
    if (a->needs[1]) gb = T(musa_zeros_like(G));
    return finish2(a, gin, ga, gb, &t);
}

/* remainder: d/db = -floor(a / b). */
int grad_remainder(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    musa_tensor *gb = a->needs[1] ? T(musa_mul(T(musa_neg(G)), T(musa_floor_divide(X, X1)))) : NULL;
    return finish2(a, gin, G, gb, &t);
}

int grad_where(const musa_grad_args *a, musa_tensor **gin) {
    musa_temps t = {0};
    musa_tensor *zero = NUM(0), *c = a->in[0];
    gin[0] = NULL;
    musa_tensor *ga = a->needs[1] ? T(musa_where(c, G, zero)) : NULL;
    musa_tensor *gb = a->needs[2] ? T(musa_where(c, zero, G)) : NULL;
    int rc = MUSA_OK;
    gin[1] = ga ? grad_to_input(a, 1, ga) : NULL;
    gin[2] = gb ? grad_to_input(a, 2, gb) : NULL;
    if ((a->needs[1] && !gin[1]) || (a->needs[2] && !gin[2])) {
        rc = musa_last_error_code();
        musa_tensor_release(gin[1]), musa_tensor_release(gin[2]);
        gin[1] = gin[2] = NULL;
    }
    musa_temps_release(&t);
    return rc;
}

/* clamp passes the gradient where min <= x <= max. */
int grad_clamp(const musa_grad_args *a, musa_tensor **gin) {
    const musa_attrs_clamp *c = a->attrs;
    musa_temps t = {0};
    musa_tensor *mask = T(musa_ones_like(X));
    mask = T(musa_cast(mask, MUSA_DTYPE_BOOL));
    if (c->has_min) mask = T(musa_logical_and(mask, T(musa_ge(X, NUM(c->min)))));
    if (c->has_max) mask = T(musa_logical_and(mask, T(musa_le(X, NUM(c->max)))));
    gin[0] = musa_where(mask, G, NUM(0));
    musa_temps_release(&t);
    return gin[0] ? MUSA_OK : musa_last_error_code();
}
