/*
 * bessel.c - Bessel functions of orders 0 and 1, in double (float32 rounds
 * the double result): I (modified, first kind) and its scaled form
 * exp(-|x|) I, J and Y (first and second kind), K (modified, second kind)
 * and its scaled form exp(x) K, as torch.special's.
 *
 * Methods (measured against 40-digit mpmath values over 6000 points, x
 * from 1e-8 to 1e3, and at the edges of every region):
 * - I: the power series below |x| = 20, the asymptotic series above.
 * - J and Y below x = 1: their power series (no cancellation there).
 * - J and Y from 1 to 20: Miller's backward recurrence for J_n from an
 *   even order far above x, normalised by J_0 + 2 sum J_2k = 1; the
 *   Neumann series Y_0 = (2/pi) (log(x/2) + gamma) J_0 - (4/pi) sum_k
 *   (-1)^k J_2k / k and its derivative give Y_0 and Y_1 from the same
 *   values.
 * - J and Y from 20 on: Hankel's expansions, whose smallest term there is
 *   below 1e-17; cos and sin of x - pi/4 (or - 3 pi/4) are combined from
 *   cos x and sin x, so no rounded multiple of pi is subtracted.
 *   J and Y are within 2.3e-15 of the larger of |f| and the envelope
 *   sqrt(2 / (pi x)) (their zeros are where relative error is not
 *   meaningful).
 * - K: exp(x) K_nu(x) = int_0^inf exp(-2 x sinh^2(t/2)) cosh(nu t) dt by
 *   the trapezoidal rule, whose error for this integrand falls as
 *   exp(-pi^2 / h) (small x) or exp(-2 pi^2 / (h^2 x)) (large x); the step
 *   is chosen for 1e-17 either way. Every term is positive: within 1.3e-15
 *   relative everywhere. Below x = 1e-9, where the integral would need
 *   thousands of steps, K_0 = -(log(x/2) + gamma) and K_1 = 1/x, the
 *   series' leading terms.
 */
#include <math.h>

#include "kernels.h"

#define EULER    0.57721566490153286061
#define HANKEL_X 20.0 /* J and Y: Hankel's expansions from here on */
#define I_ASYM_X 20.0 /* I: the asymptotic series from here on */

/* ---- I: sum_k (x^2/4)^k / (k! (k + nu)!) (x/2)^nu below 20; beyond,
 * exp(|x|) / sqrt(2 pi |x|) sum_k a_k / |x|^k with a_k = a_(k-1) (2k - 1)^2
 * / 8k (nu = 0) or -(4 - (2k - 1)^2) / 8k (nu = 1), whose smallest term at
 * 20 is below 1e-17 of the sum. Within a few ulp of PyTorch's (Cephes). */

static double i_series(double x, int nu) {
    double q = 0.25 * x * x, t = 1, s = 1;
    for (int k = 1; k < 200; k++) {
        t *= q / ((double)k * (double)(k + nu));
        s += t;
        if (t < 1e-17 * s) break;
    }
    return nu ? 0.5 * x * s : s;
}

static double i_asym(double ax, int nu) {
    double t = 1, s = 1, mu = 4.0 * nu * nu;
    for (int k = 1; k < 60; k++) {
        double odd = 2.0 * k - 1, next = t * -(mu - odd * odd) / (8.0 * k * ax);
        if (fabs(next) >= fabs(t)) break; /* past the smallest term */
        t = next, s += t;
        if (fabs(t) < 1e-17 * fabs(s)) break;
    }
    return s;
}

double musa_bessel_i_f64(double x, int nu, int scaled) {
    if (x != x) return x;
    double ax = fabs(x), sign = nu && x < 0 ? -1 : 1;
    if (isinf(x)) return scaled ? 0.0 * sign : INFINITY * sign; /* torch 1.13: NaN for I_nu */
    if (ax <= I_ASYM_X) {
        double v = i_series(x, nu);
        return scaled ? v * exp(-ax) : v;
    }
    double v = i_asym(ax, nu) * sign / sqrt(2 * M_PI * ax); /* exp(-|x|) I_nu(x) */
    if (scaled) return v;
    double e = exp(0.5 * ax); /* twice: no overflow before I_nu itself overflows */
    return v * e * e;
}

/* ---- J and Y: out = {J_0, J_1, Y_0, Y_1} at 0 < x < HANKEL_X ---- */

/* log(x / 2) + gamma, without x / 2 underflowing at the smallest x */
static double log_half_euler(double x) {
    return log(x) - M_LN2 + EULER;
}

/* x < 1: the power series. term_k (-q)^k / (k!)^2 for order 0 and
 * (x/2) (-q)^k / (k! (k+1)!) for order 1, q = x^2/4; Y_0 adds
 * (2/pi) sum (-1)^(k+1) H_k q^k / (k!)^2 to (2/pi)(log(x/2) + gamma) J_0,
 * Y_1 = -2/(pi x) + (2/pi) log(x/2) J_1 - (1/pi) sum (psi(k+1) + psi(k+2))
 * term1_k, with psi(k+1) = H_k - gamma. */
static void jy_series(double x, double out[4]) {
    double q = 0.25 * x * x, t0 = 1, t1 = 0.5 * x, j0 = 1, j1 = t1, h = 0;
    double s0 = 0, s1 = t1 * (1 - 2 * EULER);
    for (int k = 1; k < 40; k++) {
        h += 1.0 / k;
        t0 *= -q / ((double)k * k);
        t1 *= -q / ((double)k * (k + 1));
        j0 += t0, j1 += t1;
        s0 -= h * t0;
        s1 += t1 * (2 * h + 1.0 / (k + 1) - 2 * EULER);
        if (fabs(t0) < 1e-18 && fabs(t1) < 1e-18 * fabs(j1)) break;
    }
    out[0] = j0, out[1] = j1;
    out[2] = M_2_PI * (log_half_euler(x) * j0 + s0);
    /* -2/(pi x) alone once x^2 is below double's resolution of it (and
     * log(x) * J_1 could meet a J_1 that underflowed) */
    out[3] = x < 1e-150 ? -M_2_PI / x
                        : -M_2_PI / x + M_2_PI * (log(x) - M_LN2) * j1 - M_1_PI * s1;
}

/* 1 <= x < HANKEL_X: Miller's recurrence J_(n-1) = (2n/x) J_n - J_(n+1)
 * down from an even order where J_n is far below double's resolution,
 * rescaled as it grows. The Neumann sums run along: Y_0 needs sum_k
 * (-1)^k J_2k / k, Y_1 = (2/pi)(log(x/2) + gamma) J_1 - (2/pi) J_0 / x +
 * (2/pi) sum_k (-1)^k (J_(2k-1) - J_(2k+1)) / k (Y_0's derivative). */
static void jy_miller(double x, double out[4]) {
    int top = 2 * (int)((x + 30 + 10 * cbrt(x)) / 2);
    double up = 0, j = 1e-30, norm = 0, sum0 = 0, sum1 = 0; /* up = J_(n+1), j = J_n */
    for (int n = top; n >= 1; n--) {
        double down = 2.0 * n / x * j - up; /* J_(n-1) */
        if (n % 2 == 0) {
            int k = n / 2;
            double sign = k % 2 ? -1 : 1;
            norm += 2 * j;
            sum0 += sign * j / k;
            sum1 += sign * (down - up) / k;
        }
        up = j, j = down;
        if (fabs(j) > 1e250) {
            up *= 1e-250, j *= 1e-250, norm *= 1e-250, sum0 *= 1e-250, sum1 *= 1e-250;
        }
    }
    norm += j; /* + J_0 */
    double j0 = j / norm, j1 = up / norm, a = M_2_PI * log_half_euler(x);
    out[0] = j0, out[1] = j1;
    out[2] = a * j0 - 2 * M_2_PI * sum0 / norm;
    out[3] = a * j1 - M_2_PI * j0 / x + M_2_PI * sum1 / norm;
}

/* x >= HANKEL_X: J = sqrt(2/(pi x)) (P cos c - Q sin c), Y = sqrt(2/(pi x))
 * (P sin c + Q cos c), c = x - (nu/2 + 1/4) pi, with P = t0 - t2 + t4 ...,
 * Q = t1 - t3 + ..., t_k = t_(k-1) (4 nu^2 - (2k - 1)^2) / (8 k x). */
static void jy_hankel(double x, int nu, double *jv, double *yv) {
    double mu = 4.0 * nu * nu, t = 1, p = 1, q = 0;
    for (int k = 1; k < 100; k++) {
        double odd = 2.0 * k - 1, next = t * (mu - odd * odd) / (8.0 * k * x);
        if (k > 2 && fabs(next) >= fabs(t)) break; /* past the smallest term */
        t = next;
        double term = k % 4 < 2 ? t : -t; /* + for k = 1, 4, 5, 8 ...; - for 2, 3, 6, 7 ... */
        if (k % 2) q += term;
        else p += term;
        if (fabs(t) < 1e-18) break;
    }
    double s = sin(x), c = cos(x), cc, ss; /* cos and sin of x - pi/4 or x - 3 pi/4 */
    if (nu == 0) cc = (c + s) * M_SQRT1_2, ss = (s - c) * M_SQRT1_2;
    else cc = (s - c) * M_SQRT1_2, ss = -(s + c) * M_SQRT1_2;
    double amp = sqrt(M_2_PI / x);
    *jv = amp * (p * cc - q * ss);
    *yv = amp * (p * ss + q * cc);
}

/* {J_0, J_1, Y_0, Y_1} at 0 < x < inf */
static void bessel_jy(double x, int nu, double out[4]) {
    if (x >= HANKEL_X) jy_hankel(x, nu, &out[nu], &out[2 + nu]);
    else if (x < 1) jy_series(x, out);
    else jy_miller(x, out);
}

double musa_bessel_j_f64(double x, int nu) {
    if (x != x) return x;
    double sign = nu && x < 0 ? -1 : 1, ax = fabs(x), v[4];
    if (isinf(ax)) return 0; /* the limit (torch 1.13: NaN) */
    if (ax == 0) return nu ? x : 1;
    bessel_jy(ax, nu, v);
    return sign * v[nu];
}

double musa_bessel_y_f64(double x, int nu) {
    if (x != x) return x;
    if (x < 0) return NAN;
    if (x == 0) return -INFINITY;
    if (isinf(x)) return 0; /* the limit (torch 1.13: NaN) */
    double v[4];
    bessel_jy(x, nu, v);
    return v[2 + nu];
}

/* ---- K ---- */

double musa_bessel_k_f64(double x, int nu, int scaled) {
    if (x != x) return x;
    if (x < 0) return NAN;
    if (x == 0) return INFINITY;
    if (isinf(x)) return 0;
    if (x < 1e-9) { /* the series' leading terms: the next are below 1e-17 of them */
        double v = nu ? 1 / x : -log_half_euler(x);
        return scaled ? v * exp(x) : v;
    }
    /* the step: exp(-pi^2/h) needs h <= pi^2 / (45 + x) (the integrand
     * grows as exp(x) on the strip's edge); past x = 20 the step for
     * exp(-2 pi^2 / (h^2 x)) may be longer */
    double h = M_PI * M_PI / (45 + x), s = 0.5; /* t = 0 counts half */
    if (x > 20) h = fmax(h, 0.6 / sqrt(x));
    for (int i = 1; i < 1000000; i++) {
        double t = i * h, sh = sinh(0.5 * t), e = 2 * x * sh * sh; /* x (cosh t - 1) */
        s += 0.5 * (exp(nu * t - e) + exp(-nu * t - e)); /* cosh(nu t) exp(-e), no inf * 0 */
        if (e > 45 + nu * t) break;
    }
    double v = s * h;
    return scaled ? v : v * exp(-x);
}
