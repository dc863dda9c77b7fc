/*
 * gamma.c - the regularised incomplete gamma functions, in double:
 * P(a, x) = (1 / Gamma(a)) int_0^x t^(a-1) e^-t dt (igamma, PyTorch's
 * igamma and special.gammainc) and Q = 1 - P (igammac), their derivatives
 * in x and in a, and the derivative of a Gamma(a) sample in a (the implicit
 * reparameterisation gradient of standard_gamma: along P(a, x) = u fixed,
 * dx/da = -(dP/da) / (dP/dx)).
 *
 * Method, by region (each tail is computed where it is the small one, so
 * it keeps its relative accuracy; the other is 1 minus it):
 * - x < a + 1: P by its power series e^-x x^a / Gamma(a + 1) sum_n
 *   x^n / ((a + 1) ... (a + n)), whose terms fall from n = x - a on;
 * - otherwise: Q by its continued fraction e^-x x^a / Gamma(a) /
 *   (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / ...)), evaluated
 *   by the modified Lentz method;
 * - a < SMALL_A and x < a + 1: P by the series, and Q (which tends to
 *   a E1(x) as a -> 0, where 1 - P would keep no digit of it) by its own
 *   series: Q = -expm1(f) - e^f a sum_n>=1 (-x)^n / (n! (a + n)), with
 *   f = a log x - log Gamma(1 + a); it follows from integrating e^-t's
 *   series term by term, P = x^a / Gamma(a) sum_n>=0 (-x)^n / (n! (a + n)),
 *   and loses at most a digit to cancellation below x = 1.5;
 * - a > TEMME_A: both need on the order of sqrt(a) terms, so Temme's
 *   uniform asymptotic expansion takes over: Q = erfc(eta sqrt(a/2)) / 2 +
 *   e^(-a eta^2/2) / sqrt(2 pi a) c0(eta) (1 + O(1/a)), with lambda = x/a,
 *   eta^2 / 2 = lambda - 1 - log(lambda) (eta's sign that of lambda - 1)
 *   and c0 = 1/(lambda - 1) - 1/eta (a Taylor series near eta = 0, where
 *   the two terms cancel). Past 1e7 the dropped terms are below 1e-14.
 * The a-derivatives differentiate the logarithm of the small tail
 * numerically (five-point central differences), which needs no special
 * function beyond these. Against 40-digit values at 40 Gamma draws (a from
 * 0.003 to 3000), standard_gamma_grad was within 9e-12 (relative), PyTorch's
 * within 5e-5; igamma and igammac within 3e-13 for a up to 1e7 and 2e-12
 * beyond.
 *
 * Edge values follow PyTorch's igamma: NaN for a < 0 or x < 0 (and either
 * NaN), P(0, x > 0) = 1, P(a, 0) = 0, P(inf, x) = 0, P(a, inf) = 1,
 * P(inf, inf) = NaN, P(0, 0) = NaN.
 */
#define _DEFAULT_SOURCE /* lgamma_r: glibc's lgamma writes the global signgam */
#include <float.h>
#include <math.h>

#include "kernels.h"

#define SERIES_MAX 100000000 /* terms: a series or fraction that needs more has a > TEMME_A */
#define TEMME_A    1e7
#define SMALL_A    0.5 /* below it, Q where x < a + 1 by upper_small() */

double musa_lgamma_f64(double x) {
    int sign;
    return lgamma_r(x, &sign);
}

/* log Gamma(1 + a) for 0 < a < SMALL_A, relative to its size for tiny a,
 * where 1 + a would round a away: -gamma a + sum_k>=2 (-1)^k zeta(k) a^k / k
 * below 0.05 (13 terms reach 1e-18 there). */
static double lgamma1p(double a) {
    static const double zeta[14] = {0,
                                    0,
                                    1.6449340668482264,
                                    1.2020569031595943,
                                    1.0823232337111382,
                                    1.0369277551433699,
                                    1.0173430619844491,
                                    1.0083492773819228,
                                    1.0040773561979443,
                                    1.0020083928260822,
                                    1.0009945751278181,
                                    1.0004941886041195,
                                    1.0002460865533080,
                                    1.0001227133475785};
    if (a >= 0.05) return musa_lgamma_f64(1 + a);
    double s = 0, p = -a;
    for (int k = 2; k < 14; k++) {
        p *= -a; /* (-a)^k */
        s += zeta[k] * p / k;
    }
    return s - 0.57721566490153286 * a; /* Euler's gamma */
}

/* Q(a, x) for 0 < a < SMALL_A and 0 < x < a + 1 (see the file comment). */
static double upper_small(double a, double x) {
    double f = a * log(x) - lgamma1p(a);
    double t = 1, sum = 0;
    for (int n = 1; n < 200; n++) {
        t *= -x / n; /* (-x)^n / n! */
        double term = t / (a + n);
        sum += term;
        if (fabs(term) <= fabs(sum) * (DBL_EPSILON / 4)) break;
    }
    return -expm1(f) - exp(f) * a * sum;
}

/* log of P's series sum sum_n x^n / ((a + 1) ... (a + n)). */
static double log_series(double a, double x) {
    double term = 1, sum = 1;
    for (int n = 1; n < SERIES_MAX; n++) {
        term *= x / (a + n);
        sum += term;
        if (term <= sum * (DBL_EPSILON / 4)) break;
    }
    return log(sum);
}

/* log of Q's continued fraction 1 / (x + 1 - a - 1 (1 - a) / ...). */
static double log_fraction(double a, double x) {
    const double tiny = 1e-300;
    double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
    /* Past 1e300 the fraction is 1 / b to double precision (the next term is
     * (1 - a) / b^2 relative, with a <= TEMME_A), and from b = 4.5e307 the
     * loop's 1 / b is subnormal: it never met its tolerance, and ran all
     * SERIES_MAX terms (50 ms an element; libFuzzer's op_call found it). */
    if (b > 1e300) return -log(b);
    for (int i = 1; i < SERIES_MAX; i++) {
        double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) <= DBL_EPSILON) break;
    }
    return log(h);
}

/* mu - log(1 + mu), without its cancellation for small mu. */
static double mu_minus_log1p(double mu) {
    if (fabs(mu) >= 0.1) return mu - log1p(mu);
    double s = 0, p = mu; /* sum_k>=2 (-1)^k mu^k / k */
    for (int k = 2; k < 40; k++) {
        p *= -mu;
        double t = -p / k; /* (-1)^k mu^k / k with p = (-1)^(k-1) mu^k */
        s += t;
        if (fabs(t) <= fabs(s) * DBL_EPSILON) break;
    }
    return s;
}

/* log(x^a e^-x / Gamma(a + 1)), the lower series' factor. For a >= 20 the
 * three terms of order a would cancel to a relative error of a eps; in
 * Stirling's form, -a (mu - log(1 + mu)) - log(2 pi a) / 2 - s(a) with
 * mu = x/a - 1 and s Stirling's correction (4 terms: below 1e-15 there),
 * only the small ones remain. */
static double log_factor(double a, double x) {
    if (a < 20) return a * log(x) - x - musa_lgamma_f64(a + 1);
    double r = 1 / a, r2 = r * r;
    double s = r * (1.0 / 12 - r2 * (1.0 / 360 - r2 * (1.0 / 1260 - r2 / 1680)));
    return -a * mu_minus_log1p((x - a) / a) - 0.5 * log(2 * M_PI * a) - s;
}

/* Temme's expansion: the lower (upper = 0) or upper tail, for large a. */
static double temme_tail(double a, double x, int upper) {
    double mu = x / a - 1;
    double eta = sqrt(2 * mu_minus_log1p(mu));
    if (mu < 0) eta = -eta;
    double c0;
    if (fabs(eta) < 0.01)
        c0 = -1.0 / 3 +
             eta *
                 (1.0 / 12 + eta * (-2.0 / 135 +
                                    eta * (1.0 / 864 + eta * (1.0 / 2835 - eta * 139.0 / 777600))));
    else
        c0 = 1 / mu - 1 / eta;
    double r = exp(-a * eta * eta / 2) / sqrt(2 * M_PI * a) * c0;
    double z = eta * sqrt(a / 2);
    return upper ? 0.5 * erfc(z) + r : 0.5 * erfc(-z) - r;
}

/* Whether both tails are computed directly (a small, x < a + 1). */
static int both_direct(double a, double x) {
    return a < SMALL_A && x < a + 1;
}

/* log P (upper = 0) or log Q (upper = 1), for finite a > 0 and x > 0. */
static double log_tail(double a, double x, int upper) {
    if (a > TEMME_A) {
        /* (the expansion's two terms can cancel to <= 0 where both underflow) */
        double t = temme_tail(a, x, upper);
        return t > 0 ? log(t) : -INFINITY;
    }
    int lower_series = x < a + 1;
    if (upper && both_direct(a, x)) {
        double q = upper_small(a, x);
        if (q > 0) return log(q);
    }
    /* (1 / Gamma(a) = a / Gamma(a + 1)) */
    double own = lower_series ? log_factor(a, x) + log_series(a, x)
                              : log_factor(a, x) + log(a) + log_fraction(a, x);
    if (lower_series == !upper) return own;
    return log1p(-exp(own)); /* the other tail: 1 - it */
}

/* The edge cases shared by P and Q: returns 1 and sets *p (P's value)
 * when a or x is not in the interior (a > 0, x > 0, both finite). */
static int igamma_edge(double a, double x, double *p) {
    if (isnan(a) || isnan(x) || a < 0 || x < 0) return *p = NAN, 1;
    if (a == 0) return *p = x > 0 ? 1 : NAN, 1;
    if (x == 0) return *p = 0, 1;
    if (isinf(a)) return *p = isinf(x) ? NAN : 0, 1;
    if (isinf(x)) return *p = 1, 1;
    return 0;
}

double musa_igamma_f64(double a, double x) {
    double p;
    if (igamma_edge(a, x, &p)) return p;
    int upper = x >= a && !both_direct(a, x); /* the smaller tail, computed directly */
    double t = exp(log_tail(a, x, upper));
    return upper ? 1 - t : t;
}

double musa_igammac_f64(double a, double x) {
    double p;
    if (igamma_edge(a, x, &p)) return 1 - p;
    int upper = x >= a || both_direct(a, x);
    double t = exp(log_tail(a, x, upper));
    return upper ? t : 1 - t;
}

/* log of dP/dx = x^(a-1) e^-x / Gamma(a). */
static double log_density(double a, double x) {
    return log_factor(a, x) + log(a) - log(x); /* Gamma(a + 1) = a Gamma(a) */
}

double musa_igamma_grad_x_f64(double a, double x) {
    double p;
    if (igamma_edge(a, x, &p)) {
        if (isnan(p)) return NAN;
        /* the density's limits: x = 0 (inf below a = 1, 1 at a = 1, 0 above), x or a infinite: 0 */
        if (x == 0 && a > 0 && !isinf(a)) return a < 1 ? INFINITY : a == 1 ? 1 : 0;
        return 0;
    }
    return exp(log_density(a, x));
}

/* d/da log(tail), the tail on the side `upper`: the five-point central
 * difference (error O(h^4)), with h a thousandth of the scale on which the
 * tail changes with a (a for small a, sqrt(a) for large). */
static double dlog_tail_da(double a, double x, int upper) {
    double h = 1e-3 * fmin(a, sqrt(a));
    double f1 = log_tail(a + h, x, upper) - log_tail(a - h, x, upper);
    double f2 = log_tail(a + 2 * h, x, upper) - log_tail(a - 2 * h, x, upper);
    return (8 * f1 - f2) / (12 * h);
}

double musa_igamma_grad_a_f64(double a, double x) {
    double p;
    if (igamma_edge(a, x, &p)) return isnan(p) ? NAN : 0;
    int upper = x >= a;
    double lt = log_tail(a, x, upper);
    if (isinf(lt)) return 0;                         /* the tail below double's range */
    double dt = exp(lt) * dlog_tail_da(a, x, upper); /* d(tail)/da; dQ/da = -dP/da */
    return upper ? -dt : dt;
}

double musa_standard_gamma_grad_f64(double a, double x) {
    if (isnan(a) || isnan(x) || a <= 0 || x <= 0) return NAN;
    if (isinf(a) || isinf(x)) return isinf(a) && isinf(x) ? NAN : isinf(x) ? INFINITY : 0;
    int upper = x >= a;
    double lt = log_tail(a, x, upper), ld = log_density(a, x);
    if (isinf(lt) || isinf(ld)) {
        /* a tail or the density below double's range (a sample there has
         * probability under 1e-300): the normal approximation's x ~ a +
         * sqrt(a) z, dx/da = 1 + (x - a) / (2a) */
        return 1 + (x - a) / (2 * a);
    }
    double g = exp(lt - ld) * dlog_tail_da(a, x, upper);
    return upper ? g : -g;
}
