/*
 * sample.c - the rejection samplers (standard_gamma, poisson, binomial)
 * against their distributions (chi-square over buckets of the exact
 * probabilities; Gamma through its distribution function, igamma), their
 * parameter errors and edge values; the incomplete gamma functions
 * (igamma, igammac) and their derivatives against values computed to 40
 * digits (mpmath) and against each other.
 */
#include <float.h>

#include "../util.h"

static musa_tensor *full64(int64_t n, double v) {
    return musa_full(1, (int64_t[]){n}, v, MUSA_DTYPE_FLOAT64);
}

static musa_tensor *T1(double v) {
    return full64(1, v);
}

/* Pearson's chi-square of counts against n * probs over k buckets, below a
 * bound that a correct sampler exceeds with probability about 1e-6 (the
 * draws are seeded: each run sees the same ones). */
static bool chi_square_ok(const char *what, const int64_t *counts, const double *probs, int k,
                          int64_t n) {
    double chi = 0;
    for (int i = 0; i < k; i++) {
        double e = probs[i] * (double)n;
        chi += (counts[i] - e) * (counts[i] - e) / e;
    }
    double bound = (k - 1) + 7 * sqrt(2.0 * (k - 1)) + 10;
    if (chi > bound)
        fprintf(stderr, "  %s: chi-square %g over %d buckets (bound %g)\n", what, chi, k, bound);
    return chi <= bound;
}

/* Counts of whole values 0..k-2 and a last bucket for the rest, against a
 * pmf given as log-probabilities. */
static bool discrete_ok(const char *what, const double *v, int64_t n, int k,
                        double (*logpmf)(double, const double *), const double *par) {
    int64_t counts[64] = {0};
    double probs[64], rest = 1;
    for (int i = 0; i < k - 1; i++) rest -= probs[i] = exp(logpmf(i, par));
    probs[k - 1] = rest;
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] != floor(v[i])) {
            fprintf(stderr, "  %s: drew %g\n", what, v[i]);
            return false;
        }
        counts[v[i] < k - 1 ? (int)v[i] : k - 1]++;
    }
    return chi_square_ok(what, counts, probs, k, n);
}

static double poisson_logpmf(double k, const double *rate) {
    return k * log(*rate) - *rate - lgamma(k + 1);
}
static double binomial_logpmf(double k, const double *np) {
    double n = np[0], p = np[1];
    return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1) + k * log(p) + (n - k) * log1p(-p);
}

TEST(op_standard_gamma) {
    musa_manual_seed(7);
    const double alphas[] = {0.05, 0.5, 1, 2.5, 30, 1e4};
    const int64_t n = 20000;
    for (int j = 0; j < 6; j++) {
        musa_tensor *a = full64(n, alphas[j]), *x = musa_standard_gamma(a);
        /* through the distribution function the draws are uniform: ten buckets */
        musa_tensor *u = musa_igamma(a, x);
        double *uv = values(u), probs[10];
        int64_t counts[10] = {0};
        for (int64_t i = 0; i < n; i++) counts[uv[i] >= 1 ? 9 : (int)(uv[i] * 10)]++;
        for (int k = 0; k < 10; k++) probs[k] = 0.1;
        char what[64];
        snprintf(what, sizeof what, "standard_gamma(%g)", alphas[j]);
        CHECK(chi_square_ok(what, counts, probs, 10, n));
        free(uv);
        release_all(3, a, x, u);
    }
    /* dtypes: the parameter's; no value below the dtype's smallest normal */
    musa_tensor *small = musa_full(1, (int64_t[]){4000}, 1e-3, MUSA_DTYPE_FLOAT32);
    musa_tensor *xs = musa_standard_gamma(small);
    CHECK(musa_tensor_dtype(xs) == MUSA_DTYPE_FLOAT32);
    double *v = values(xs), lo = INFINITY;
    for (int i = 0; i < 4000; i++) lo = fmin(lo, v[i]);
    CHECK_MSG(lo >= FLT_MIN, "smallest draw %g", lo);
    free(v);
    musa_tensor *h = musa_full(1, (int64_t[]){100}, 3, MUSA_DTYPE_BFLOAT16),
                *xh = musa_standard_gamma(h);
    CHECK(musa_tensor_dtype(xh) == MUSA_DTYPE_BFLOAT16);
    musa_tensor *inf = from_list(MUSA_DTYPE_FLOAT64, 1, S(1), (double[]){INFINITY});
    musa_tensor *xi = musa_standard_gamma(inf);
    double got;
    CHECK_OK(musa_tensor_item(xi, &got));
    CHECK(isinf(got) && got > 0);
    /* errors name the first bad parameter */
    musa_tensor *bad = from_list(MUSA_DTYPE_FLOAT32, 1, S(3), (double[]){1, 0, -1});
    CHECK_ERR(FAILS(musa_standard_gamma(bad)), MUSA_ERR_VALUE,
              "[standard_gamma] alpha must be positive, got 0 at element 1");
    musa_tensor *nan = from_list(MUSA_DTYPE_FLOAT32, 1, S(2), (double[]){2, NAN});
    CHECK_ERR(FAILS(musa_standard_gamma(nan)), MUSA_ERR_VALUE, "got nan at element 1");
    musa_tensor *ints = musa_ones(1, S(2), MUSA_DTYPE_INT64);
    CHECK_ERR(FAILS(musa_standard_gamma(ints)), MUSA_ERR_TYPE,
              "[standard_gamma] expected floating point parameters, got int64");
    release_all(10, small, xs, h, xh, inf, xi, bad, nan, ints, NULL);
}

TEST(op_poisson) {
    musa_manual_seed(11);
    const double rates[] = {0.5, 3, 9.99, 10, 37};
    const int64_t n = 30000;
    for (int j = 0; j < 5; j++) {
        musa_tensor *r = full64(n, rates[j]), *k = musa_poisson(r);
        double *v = values(k);
        char what[64];
        snprintf(what, sizeof what, "poisson(%g)", rates[j]);
        int buckets = rates[j] < 5 ? 10 : rates[j] < 20 ? 25 : 60;
        CHECK(discrete_ok(what, v, n, buckets, poisson_logpmf, &rates[j]));
        free(v);
        release_all(2, r, k);
    }
    /* a huge rate: mean and variance */
    musa_tensor *r = full64(n, 1e9), *k = musa_poisson(r);
    double *v = values(k), m = 0, s = 0;
    for (int64_t i = 0; i < n; i++) m += v[i];
    m /= n;
    for (int64_t i = 0; i < n; i++) s += (v[i] - m) * (v[i] - m);
    s /= n;
    CHECK_MSG(fabs(m - 1e9) < 6 * sqrt(1e9 / n) && fabs(s / 1e9 - 1) < 0.05, "mean %.1f var %.4g",
              m, s);
    free(v);
    musa_tensor *edge = from_list(MUSA_DTYPE_FLOAT32, 1, S(2), (double[]){0, INFINITY});
    musa_tensor *ke = musa_poisson(edge);
    double *ev = values(ke);
    CHECK(ev[0] == 0 && isinf(ev[1]));
    free(ev);
    musa_tensor *bad = from_list(MUSA_DTYPE_FLOAT64, 1, S(2), (double[]){1, -0.5});
    CHECK_ERR(FAILS(musa_poisson(bad)), MUSA_ERR_VALUE,
              "[poisson] rates must be non-negative, got -0.5 at element 1");
    musa_tensor *ints = musa_ones(1, S(2), MUSA_DTYPE_INT32);
    CHECK_ERR(FAILS(musa_poisson(ints)), MUSA_ERR_TYPE, "[poisson] expected floating point");
    release_all(6, r, k, edge, ke, bad, ints);
}

TEST(op_binomial) {
    musa_manual_seed(13);
    /* inversion (mean < 10), BTRS, BTRS mirrored (p > 1/2), inversion with a huge count */
    const double cases[][2] = {{10, 0.3}, {50, 0.3}, {1000, 0.9}, {200, 0.97}, {1e12, 3e-12}};
    const int64_t n = 30000;
    for (int j = 0; j < 5; j++) {
        musa_tensor *c = full64(n, cases[j][0]), *p = full64(n, cases[j][1]);
        musa_tensor *k = musa_binomial(c, p);
        double *v = values(k);
        char what[64];
        snprintf(what, sizeof what, "binomial(%g, %g)", cases[j][0], cases[j][1]);
        double nq = cases[j][0] * fmin(cases[j][1], 1 - cases[j][1]);
        bool mirrored = cases[j][1] > 0.5;
        if (mirrored) /* count the failures: Binomial(n, 1 - p) */
            for (int64_t i = 0; i < n; i++) v[i] = cases[j][0] - v[i];
        double par[2] = {cases[j][0], mirrored ? 1 - cases[j][1] : cases[j][1]};
        int buckets = nq < 5 ? 10 : nq < 20 ? 35 : 60;
        CHECK(discrete_ok(what, v, n, buckets, binomial_logpmf, par));
        free(v);
        release_all(3, c, p, k);
    }
    /* broadcast (3, 1) counts against (4,) probabilities; 0 and 1 exactly */
    musa_tensor *c = from_list(MUSA_DTYPE_FLOAT32, 2, S(3, 1), (double[]){0, 5, 40});
    musa_tensor *p = from_list(MUSA_DTYPE_FLOAT64, 1, S(4), (double[]){0, 1, 0.5, 0.2});
    musa_tensor *k = musa_binomial(c, p);
    CHECK(same_shape(k, 2, S(3, 4)) && musa_tensor_dtype(k) == MUSA_DTYPE_FLOAT64);
    double *v = values(k);
    for (int i = 0; i < 3; i++) {
        double cnt = i == 0 ? 0 : i == 1 ? 5 : 40;
        CHECK(v[i * 4] == 0 && v[i * 4 + 1] == cnt);
        CHECK(v[i * 4 + 2] >= 0 && v[i * 4 + 2] <= cnt && v[i * 4 + 3] <= cnt);
    }
    free(v);
    musa_tensor *half = from_list(MUSA_DTYPE_FLOAT32, 1, S(1), (double[]){10.5});
    musa_tensor *pp = from_list(MUSA_DTYPE_FLOAT32, 1, S(1), (double[]){0.5});
    CHECK_ERR(FAILS(musa_binomial(half, pp)), MUSA_ERR_VALUE,
              "[binomial] count must hold non-negative whole numbers, got 10.5 at element 0");
    musa_tensor *bp = from_list(MUSA_DTYPE_FLOAT32, 1, S(2), (double[]){0.5, 1.5});
    CHECK_ERR(FAILS(musa_binomial(c, bp)), MUSA_ERR_VALUE,
              "[binomial] prob must lie in [0, 1], got 1.5 at element 1");
    musa_tensor *ic = musa_ones(1, S(2), MUSA_DTYPE_INT64);
    CHECK_ERR(FAILS(musa_binomial(ic, bp)), MUSA_ERR_TYPE,
              "[binomial] expected floating point parameters, got int64 and float32");
    musa_tensor *p5 = from_list(MUSA_DTYPE_FLOAT32, 2, S(2, 1), (double[]){0.5, 0.5});
    CHECK_ERR(FAILS(musa_binomial(c, p5)), MUSA_ERR_VALUE, "[binomial] shapes (3, 1) and (2, 1)");
    release_all(9, c, p, k, half, pp, bp, ic, p5, NULL);
}

TEST(random_samplers_reproducible_across_threads) {
    int saved = musa_get_num_threads();
    musa_tensor *r[2][3];
    musa_tensor *a = full64(20001, 0.7), *c = full64(20001, 300), *p = full64(20001, 0.4);
    for (int t = 0; t < 2; t++) {
        CHECK_OK(musa_set_num_threads(t + 1));
        musa_manual_seed(99);
        r[t][0] = musa_standard_gamma(a);
        r[t][1] = musa_poisson(c);
        r[t][2] = musa_binomial(c, p);
    }
    CHECK_OK(musa_set_num_threads(saved));
    for (int j = 0; j < 3; j++) CHECK(same_values(r[0][j], r[1][j]));
    /* the next draw differs */
    musa_tensor *again = musa_poisson(c);
    CHECK(!same_values(again, r[1][1]));
    release_all(10, a, c, p, r[0][0], r[0][1], r[0][2], r[1][0], r[1][1], r[1][2], again);
}

/* (a, x, P(a, x), dx/da along P fixed), to 12 digits (mpmath, 40 digits) */
static const double IGAMMA_KNOWN[][4] = {
    {0.5, 0.3, 0.561421973919, 1.00980194595},
    {2, 2.5, 0.712702504816354, 1.21231929008},
    {50, 45, 0.24680203440017, 0.951410192212},
    {1e-3, 1e-10, 0.977800656598626, 2.24502790005e-6},
    {1e4, 1.01e4, 0.84134875044718, 1.00500016601},
    {9605000, 9590000, 6.41455332922087e-7, NAN},
};

TEST(op_igamma) {
    int n = (int)(sizeof IGAMMA_KNOWN / sizeof IGAMMA_KNOWN[0]);
    double av[8], xv[8], pv[8];
    for (int i = 0; i < n; i++)
        av[i] = IGAMMA_KNOWN[i][0], xv[i] = IGAMMA_KNOWN[i][1], pv[i] = IGAMMA_KNOWN[i][2];
    musa_tensor *a = from_list(MUSA_DTYPE_FLOAT64, 1, S(n), av),
                *x = from_list(MUSA_DTYPE_FLOAT64, 1, S(n), xv);
    musa_tensor *p = musa_igamma(a, x), *q = musa_igammac(a, x);
    double *P = values(p), *Q = values(q);
    for (int i = 0; i < n; i++) {
        CHECK_MSG(fabs(P[i] - pv[i]) <= 1e-11 * pv[i], "igamma(%g, %g) = %.15g, want %.15g", av[i],
                  xv[i], P[i], pv[i]);
        CHECK_MSG(fabs(P[i] + Q[i] - 1) < 1e-14, "P + Q = %.17g", P[i] + Q[i]);
    }
    free(P), free(Q);
    /* edges, as PyTorch's: NaN outside the domain, limits at 0 and inf */
    musa_tensor *ea =
        from_list(MUSA_DTYPE_FLOAT32, 1, S(8), (double[]){0, -1, 1, 2, INFINITY, 1, 3, 0});
    musa_tensor *ex =
        from_list(MUSA_DTYPE_FLOAT32, 1, S(8), (double[]){1, 1, 0, -1, 1, INFINITY, INFINITY, 0});
    musa_tensor *ep = musa_igamma(ea, ex), *eq = musa_igammac(ea, ex);
    double *EP = values(ep), *EQ = values(eq);
    const double want_p[8] = {1, NAN, 0, NAN, 0, 1, 1, NAN},
                 want_q[8] = {0, NAN, 1, NAN, 1, 0, 0, NAN};
    for (int i = 0; i < 8; i++) {
        CHECK_MSG(isnan(want_p[i]) ? isnan(EP[i]) : EP[i] == want_p[i], "edge %d: P %g", i, EP[i]);
        CHECK_MSG(isnan(want_q[i]) ? isnan(EQ[i]) : EQ[i] == want_q[i], "edge %d: Q %g", i, EQ[i]);
    }
    free(EP), free(EQ);
    /* integers give float32, and broadcast */
    musa_tensor *ia = from_list(MUSA_DTYPE_INT64, 2, S(2, 1), (double[]){1, 3});
    musa_tensor *ix = from_list(MUSA_DTYPE_INT32, 1, S(3), (double[]){1, 2, 3});
    musa_tensor *ip = musa_igamma(ia, ix);
    CHECK(musa_tensor_dtype(ip) == MUSA_DTYPE_FLOAT32 && same_shape(ip, 2, S(2, 3)));
    double *IP = values(ip);
    CHECK(fabs(IP[0] - (1 - exp(-1.0))) < 1e-6 && fabs(IP[5] - 0.5768099188731565) < 1e-6);
    free(IP);
    release_all(11, a, x, p, q, ea, ex, ep, eq, ia, ix, ip);
}

TEST(op_igammac) {
    /* the upper tail keeps its relative accuracy far out, where 1 - P is 0 */
    musa_tensor *a = from_list(MUSA_DTYPE_FLOAT64, 1, S(2), (double[]){2, 0.5});
    musa_tensor *x = from_list(MUSA_DTYPE_FLOAT64, 1, S(2), (double[]){60, 40});
    musa_tensor *q = musa_igammac(a, x);
    double *Q = values(q);
    double want0 = 61 * exp(-60.0),
           want1 = erfc(sqrt(40.0)); /* Q(2, x) = (1 + x) e^-x; Q(1/2, x) = erfc(sqrt x) */
    CHECK_MSG(fabs(Q[0] - want0) < 1e-13 * want0 && fabs(Q[1] - want1) < 1e-13 * want1,
              "Q %.17g %.17g want %.17g %.17g", Q[0], Q[1], want0, want1);
    free(Q);
    /* small a: Q tends to a E1(x), which 1 - P would round to 0 or to 1e-16
     * (mpmath, 40 digits) */
    const double sa[4] = {1e-30, 1e-8, 0.01, 0.3}, sx[4] = {0.242, 1e-20, 1.0, 1.2};
    const double sq[4] = {1.0697138600644347e-30, 4.5474475863561142e-7, 0.0022162346232279903,
                          0.063394719569259105};
    musa_tensor *a2 = from_list(MUSA_DTYPE_FLOAT64, 1, S(4), sa),
                *x2 = from_list(MUSA_DTYPE_FLOAT64, 1, S(4), sx), *q2 = musa_igammac(a2, x2),
                *p2 = musa_igamma(a2, x2);
    double *Q2 = values(q2), *P2 = values(p2);
    for (int i = 0; i < 4; i++) {
        CHECK_MSG(fabs(Q2[i] - sq[i]) < 1e-13 * sq[i], "igammac(%g, %g) = %.17g, want %.17g", sa[i],
                  sx[i], Q2[i], sq[i]);
        CHECK_MSG(fabs(P2[i] + Q2[i] - 1) < 1e-15, "P + Q = %.17g", P2[i] + Q2[i]);
    }
    free(Q2), free(P2);
    release_all(7, a, x, q, a2, x2, q2, p2);
}

/* The derivative rows against central differences of igamma in float64. */
static void check_derivative(const char *op, int which) {
    const double av[4] = {0.7, 2, 5, 30}, xv[4] = {0.4, 2.5, 3, 33};
    musa_tensor *a = from_list(MUSA_DTYPE_FLOAT64, 1, S(4), av),
                *x = from_list(MUSA_DTYPE_FLOAT64, 1, S(4), xv);
    int id = musa_op_lookup(op);
    CHECK(id >= 0);
    musa_tensor *in[2] = {a, x}, *out = NULL;
    CHECK_OK(musa_op_call(id, 2, in, NULL, &out));
    double *g = values(out);
    for (int i = 0; i < 4; i++) {
        double h = 1e-6 * (which ? xv[i] : av[i]);
        double lo[2] = {av[i], xv[i]}, hi[2] = {av[i], xv[i]};
        lo[which] -= h, hi[which] += h;
        musa_tensor *p[4] = {T1(lo[0]), T1(lo[1]), T1(hi[0]), T1(hi[1])};
        musa_tensor *l = musa_igamma(p[0], p[1]), *u = musa_igamma(p[2], p[3]);
        double vl, vu;
        CHECK_OK(musa_tensor_item(l, &vl));
        CHECK_OK(musa_tensor_item(u, &vu));
        double want = (vu - vl) / (2 * h);
        CHECK_MSG(fabs(g[i] - want) < 1e-6 * fabs(want) + 1e-9,
                  "%s(%g, %g) = %.12g, differences %.12g", op, av[i], xv[i], g[i], want);
        release_all(6, l, u, p[0], p[1], p[2], p[3]);
    }
    free(g);
    release_all(3, a, x, out);
}

TEST(op_igamma_grad_x) {
    check_derivative("igamma_grad_x", 1);
}

TEST(op_igamma_grad_a) {
    check_derivative("igamma_grad_a", 0);
}

TEST(op_standard_gamma_grad) {
    int n = 5; /* the known rows with a gradient */
    double av[5], xv[5];
    for (int i = 0; i < n; i++) av[i] = IGAMMA_KNOWN[i][0], xv[i] = IGAMMA_KNOWN[i][1];
    musa_tensor *a = from_list(MUSA_DTYPE_FLOAT64, 1, S(5), av),
                *x = from_list(MUSA_DTYPE_FLOAT64, 1, S(5), xv);
    musa_tensor *g = musa_standard_gamma_grad(a, x);
    double *G = values(g);
    for (int i = 0; i < n; i++)
        CHECK_MSG(fabs(G[i] - IGAMMA_KNOWN[i][3]) < 1e-8 * IGAMMA_KNOWN[i][3],
                  "(%g, %g): %.12g want %.12g", av[i], xv[i], G[i], IGAMMA_KNOWN[i][3]);
    free(G);
    musa_tensor *ea = from_list(MUSA_DTYPE_FLOAT32, 1, S(3), (double[]){0, 1, NAN});
    musa_tensor *ex = from_list(MUSA_DTYPE_FLOAT32, 1, S(3), (double[]){1, -1, 1});
    musa_tensor *eg = musa_standard_gamma_grad(ea, ex);
    double *EG = values(eg);
    CHECK(isnan(EG[0]) && isnan(EG[1]) && isnan(EG[2]));
    free(EG);
    release_all(6, a, x, g, ea, ex, eg);
}
