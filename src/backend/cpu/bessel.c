/*
 * bessel.c - Bessel functions of orders 0 and 1, in double (float32 rounds
 * the double result): I (modified, first kind) and its scaled form
 * exp(-|x|) I, J and Y (first and second kind), K (modified, second kind)
 * and its scaled form exp(x) K, as torch.special's; and Airy's Ai and Ai'.
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
 * - Airy's Ai and its derivative: the Maclaurin series in double-double
 *   from -10 to 2, K_1/3 and K_2/3 (the integral above) beyond 2, the
 *   asymptotic expansions below -10. Within 1.1e-15 of 40-digit values
 *   (relative; below -10 relative to the larger of the value and the
 *   envelope |x|^(-+1/4) / sqrt(pi)) over 6000 points, -1e8 to 105.
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
    out[3] = x < 1e-150 ? -M_2_PI / x : -M_2_PI / x + M_2_PI * (log(x) - M_LN2) * j1 - M_1_PI * s1;
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
        if (k % 2)
            q += term;
        else
            p += term;
        if (fabs(t) < 1e-18) break;
    }
    double s = sin(x), c = cos(x), cc, ss; /* cos and sin of x - pi/4 or x - 3 pi/4 */
    if (nu == 0)
        cc = (c + s) * M_SQRT1_2, ss = (s - c) * M_SQRT1_2;
    else
        cc = (s - c) * M_SQRT1_2, ss = -(s + c) * M_SQRT1_2;
    double amp = sqrt(M_2_PI / x);
    *jv = amp * (p * cc - q * ss);
    *yv = amp * (p * ss + q * cc);
}

/* {J_0, J_1, Y_0, Y_1} at 0 < x < inf */
static void bessel_jy(double x, int nu, double out[4]) {
    if (x >= HANKEL_X)
        jy_hankel(x, nu, &out[nu], &out[2 + nu]);
    else if (x < 1)
        jy_series(x, out);
    else
        jy_miller(x, out);
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

/* K_nu for real nu (Airy's 1/3 and 2/3 too) */
static double bessel_k(double x, double nu, int scaled) {
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

double musa_bessel_k_f64(double x, int nu, int scaled) {
    return bessel_k(x, nu, scaled);
}

/* ---- Airy's Ai and Ai' ---- */

/* Double-double numbers hi + lo (|lo| <= ulp(hi) / 2) and the few
 * operations the series needs (Dekker, Knuth: exact sums and products). */
typedef struct {
    double hi, lo;
} dd;

static dd two_sum(double a, double b) {
    double s = a + b, bb = s - a;
    return (dd){s, (a - (s - bb)) + (b - bb)};
}
static dd dd_add(dd a, dd b) {
    dd s = two_sum(a.hi, b.hi);
    return two_sum(s.hi, s.lo + a.lo + b.lo);
}
static dd dd_mul(dd a, dd b) {
    double p = a.hi * b.hi, e = fma(a.hi, b.hi, -p) + a.hi * b.lo + a.lo * b.hi;
    return two_sum(p, e);
}
static dd dd_div(dd a, double b) {
    double q = a.hi / b, r = fma(-q, b, a.hi) + a.lo;
    return two_sum(q, r / b);
}

static const dd AI_0 = {0.3550280538878172, 2.05233632436212e-17};          /* Ai(0) */
static const dd MINUS_DAI_0 = {0.2588194037928068, -2.522243111610832e-17}; /* -Ai'(0) */

/* -10 <= x <= 2: Ai = Ai(0) f - (-Ai'(0)) g with f = sum f_k, f_0 = 1,
 * f_k = f_(k-1) x^3 / ((3k - 1) 3k), g = sum g_k, g_0 = x, g_k = g_(k-1)
 * x^3 / (3k (3k + 1)); Ai' from f' (f'_1 = x^2 / 2, ratio x^3 / ((3k - 3)
 * (3k - 1))) and g' (g'_0 = 1, ratio x^3 / ((3k - 2) 3k)). The terms
 * reach 1e8 times the result at x = -10 and 40 times at 2: summed in
 * double-double, they lose nothing double keeps. */
static double airy_series(double x, int deriv) {
    dd x2 = {x * x, fma(x, x, -x * x)}, x3 = dd_mul(x2, (dd){x, 0});
    dd f = deriv ? dd_div(x2, 2) : (dd){1, 0}, g = deriv ? (dd){1, 0} : (dd){x, 0};
    dd sf = f, sg = g;
    for (int k = deriv ? 2 : 1; k < 200; k++) {
        f = dd_div(dd_mul(f, x3),
                   deriv ? (3.0 * k - 3) * (3.0 * k - 1) : (3.0 * k - 1) * (3.0 * k));
        sf = dd_add(sf, f);
        if (fabs(f.hi) <= 1e-34 * fabs(sf.hi)) break;
    }
    for (int k = 1; k < 200; k++) {
        g = dd_div(dd_mul(g, x3), deriv ? (3.0 * k - 2) * (3.0 * k) : (3.0 * k) * (3.0 * k + 1));
        sg = dd_add(sg, g);
        if (fabs(g.hi) <= 1e-34 * fabs(sg.hi)) break;
    }
    dd r = dd_add(dd_mul(AI_0, sf), dd_mul((dd){-MINUS_DAI_0.hi, -MINUS_DAI_0.lo}, sg));
    return r.hi + r.lo;
}

/* zeta = (2/3) z^(3/2) in double-double: past z = 10 its rounding in
 * double would shift the phase (or the exponent) by up to zeta ulp */
static dd airy_zeta(double z) {
    double s = sqrt(z), sl = fma(-s, s, z) / (2 * s); /* sqrt(z) = s + sl */
    return dd_div(dd_mul(dd_mul((dd){z, 0}, (dd){s, sl}), (dd){2, 0}), 3);
}

/* x = -z < -10: Ai(-z) = (sin(c) P - cos(c) Q) / (sqrt(pi) z^(1/4)),
 * Ai'(-z) = -z^(1/4) (cos(c) R + sin(c) S) / sqrt(pi), c = zeta + pi/4,
 * P = u_0 - u_2 / zeta^2 + ..., Q = u_1 / zeta - u_3 / zeta^3 ..., R and S
 * the same in v_k = -(6k + 1) / (6k - 1) u_k, u_k = u_(k-1) (6k - 5)
 * (6k - 3) (6k - 1) / ((2k - 1) 216 k) (Abramowitz and Stegun 10.4.58-62).
 * The smallest term at z = 10 is below 1e-18. */
static double airy_oscillating(double z, int deriv) {
    dd zeta = airy_zeta(z);
    if (!isfinite(zeta.hi)) return NAN; /* no phase left in double (z past 1e205) */
    double u = 1, p = 1, q = 0, r = 1, s = 0;
    for (int k = 1; k < 100; k++) {
        double next =
            u * (6.0 * k - 5) * (6.0 * k - 3) * (6.0 * k - 1) / ((2.0 * k - 1) * 216 * k * zeta.hi);
        if (k > 2 && fabs(next) >= fabs(u)) break; /* past the smallest term */
        u = next;
        double v = -(6.0 * k + 1) / (6.0 * k - 1) * u, sign = k % 4 < 2 ? 1 : -1;
        if (k % 2)
            q += sign * u, s += sign * v;
        else
            p += sign * u, r += sign * v;
        if (fabs(u) < 1e-18) break;
    }
    /* sin and cos of zeta.hi + zeta.lo, then of that + pi/4 */
    double sh = sin(zeta.hi), ch = cos(zeta.hi), sl = sin(zeta.lo), cl = cos(zeta.lo);
    double sz = sh * cl + ch * sl, cz = ch * cl - sh * sl;
    double sc = (sz + cz) * M_SQRT1_2, cc = (cz - sz) * M_SQRT1_2, z4 = sqrt(sqrt(z));
    return deriv ? -z4 * (cc * r + sc * s) / sqrt(M_PI) : (sc * p - cc * q) / (sqrt(M_PI) * z4);
}

/* x > 2: Ai = sqrt(x/3) K_1/3(zeta) / pi, Ai' = -x K_2/3(zeta) / (pi
 * sqrt 3), with exp(-zeta) from zeta's double-double value */
static double airy_decaying(double x, int deriv) {
    if (x > 120) return 0; /* below the smallest double */
    dd zeta = airy_zeta(x);
    double e = exp(-zeta.hi) * (1 - zeta.lo);
    if (deriv) return -x / (M_PI * sqrt(3)) * bessel_k(zeta.hi, 2.0 / 3, 1) * e;
    return sqrt(x / 3) / M_PI * bessel_k(zeta.hi, 1.0 / 3, 1) * e;
}

double musa_airy_ai_f64(double x, int deriv) {
    if (x != x) return x;
    if (x > 2) return airy_decaying(x, deriv);
    if (x >= -10) return airy_series(x, deriv);
    return airy_oscillating(-x, deriv);
}
