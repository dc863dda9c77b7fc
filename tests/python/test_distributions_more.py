"""The samplers (standard_gamma, poisson, binomial, sample_dirichlet), the
incomplete gamma functions, and the distributions built on them
(musa._distributions_more) against torch and torch.distributions:
log_prob, cdf, entropy, moments, KL divergences with their gradients,
sample statistics, reparametrised gradients, validation and errors."""
import math

import numpy as np
import pytest
import torch

import musa
import musa.distributions as D
import torch.distributions as TD

from test_distributions import both, close, t64

RNG = np.random.default_rng(5)
POS = RNG.uniform(0.5, 3, (2, 3))
POS2 = RNG.uniform(0.5, 3, (3,))
X = RNG.uniform(0.2, 4, (4, 2, 3))


# ---- the ops ----

def test_igamma_igammac_match_torch_and_differentiate():
    a = RNG.uniform(0.1, 30, 200)
    x = RNG.uniform(0.01, 40, 200)
    for fm, ft in ((musa.igamma, torch.igamma), (musa.special.gammaincc, torch.special.gammaincc)):
        m = fm(t64(musa, a), t64(musa, x)).numpy()
        t = ft(torch.tensor(a), torch.tensor(x)).numpy()
        np.testing.assert_allclose(m, t, rtol=1e-8, atol=1e-300)  # torch: ~1e-9 (musa: 3e-13, C tests)
    # d/dx as torch; d/da (which torch lacks) against differences of P
    am, xm = t64(musa, a[:5], True), t64(musa, x[:5], True)
    musa.igamma(am, xm).sum().backward()
    at, xt = torch.tensor(a[:5]), torch.tensor(x[:5], requires_grad=True)
    torch.igamma(at, xt).sum().backward()
    np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-10)
    h = 1e-6 * a[:5]
    diff = (torch.igamma(torch.tensor(a[:5] + h), torch.tensor(x[:5])) -
            torch.igamma(torch.tensor(a[:5] - h), torch.tensor(x[:5]))).numpy() / (2 * h)
    np.testing.assert_allclose(am.grad.numpy(), diff, rtol=1e-5, atol=1e-10)
    y = musa.tensor([1.0, 2.0])
    y.igammac_(musa.tensor([0.5, 3.0]))
    np.testing.assert_allclose(y.numpy(), torch.igammac(torch.tensor([1.0, 2.0]), torch.tensor([0.5, 3.0])).numpy(),
                               rtol=1e-6)


def test_incomplete_gamma_at_the_top_of_doubles():
    # libFuzzer (op_call): from x = 5e307, 1 / (x + 1 - a) is subnormal and the
    # continued fraction never met its tolerance, running all its 1e8 terms
    # (50 ms an element); past 1e300 the fraction is 1 / (x + 1 - a) to
    # double precision, and the tails are 1 and 0
    a = np.array([1e-300, 0.5, 2.5, 1e3, 1e6, 2.0])
    x = np.array([5e307, 1e308, 1.7e308, 6e307, 1.2e308, 1e301])
    np.testing.assert_array_equal(musa.igamma(t64(musa, a), t64(musa, x)).numpy(), np.ones(6))
    np.testing.assert_array_equal(musa.igammac(t64(musa, a), t64(musa, x)).numpy(), np.zeros(6))
    np.testing.assert_array_equal(torch.igammac(torch.tensor(a), torch.tensor(x)).numpy(),
                                  np.zeros(6))
    assert np.isfinite(musa._standard_gamma_grad(t64(musa, a), t64(musa, x)).numpy()).all()


def test_standard_gamma_grad_beats_torchs_approximation():
    """Against the implicit derivative from P by differences in float64."""
    a = np.array([0.05, 0.7, 3.0, 45.0, 900.0])
    x = np.array([0.002, 0.4, 4.1, 40.0, 950.0])
    g = musa._standard_gamma_grad(t64(musa, a), t64(musa, x)).numpy()
    h, k = 1e-6 * a, 1e-7 * x
    P = lambda aa, xx: torch.igamma(torch.tensor(aa), torch.tensor(xx)).numpy()  # noqa: E731
    want = -((P(a + h, x) - P(a - h, x)) / (2 * h)) / ((P(a, x + k) - P(a, x - k)) / (2 * k))
    np.testing.assert_allclose(g, want, rtol=1e-6)
    tg = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
    assert np.max(np.abs(g - want) / want) < np.max(np.abs(tg - want) / want)


def test_samplers_statistics_dtypes_and_generators():
    musa.manual_seed(1)
    g = musa.standard_gamma(musa.full((40000,), 2.5))
    assert abs(float(g.mean()) - 2.5) < 0.05 and abs(float(g.var()) - 2.5) < 0.1
    p = musa.poisson(musa.full((40000,), 12.0, dtype=musa.float64))
    assert p.dtype == musa.float64 and abs(float(p.mean()) - 12) < 0.1 and abs(float(p.var()) - 12) < 0.5
    b = musa.binomial(musa.full((40000,), 30.0), musa.full((40000,), 0.8))
    assert abs(float(b.mean()) - 24) < 0.06 and abs(float(b.var()) - 4.8) < 0.2
    assert bool((b == b.round()).all()) and float(b.max()) <= 30
    gen = musa.Generator().manual_seed(4)
    first = musa.poisson(musa.full((50,), 3.0), generator=gen)
    gen.manual_seed(4)
    musa.rand(10)  # the global generator moves; gen's draws repeat
    assert musa.equal(first, musa.poisson(musa.full((50,), 3.0), generator=gen))
    d = musa._sample_dirichlet(musa.full((1000, 4), 0.5))
    np.testing.assert_allclose(d.sum(-1).numpy(), 1, rtol=1e-6)
    assert abs(float(d.mean()) - 0.25) < 0.01


def test_sampler_errors():
    with pytest.raises(ValueError, match=r"\[poisson\] rates must be non-negative, got -1 at element 0"):
        musa.poisson(musa.tensor([-1.0]))
    with pytest.raises(ValueError, match=r"\[standard_gamma\] alpha must be positive, got nan"):
        musa._standard_gamma(musa.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match=r"\[binomial\] count must hold non-negative whole numbers"):
        musa.binomial(musa.tensor([2.5]), musa.tensor([0.5]))
    with pytest.raises(ValueError, match=r"\[binomial\] prob must lie in \[0, 1\], got 1.5"):
        musa.binomial(musa.tensor([2.0]), musa.tensor([1.5]))
    with pytest.raises(TypeError, match=r"\[poisson\] expected floating point parameters, got int64"):
        musa.poisson(musa.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"\[sample_dirichlet\] alpha must have at least 1 dim"):
        musa._sample_dirichlet(musa.tensor(1.0))


def test_samplers_in_compiled_functions_draw_fresh_values():
    f = musa.jit(lambda r: musa.poisson(r) + musa._standard_gamma(r))
    r = musa.full((64,), 5.0)
    assert not musa.equal(f(r), f(r))


# ---- the distributions against torch.distributions ----

CASES = {
    "Exponential": (lambda L, M, a: M.Exponential(a), (POS,), ["log_prob", "cdf", "icdf", "entropy", "mean", "variance"]),
    "Laplace": (lambda L, M, a, b: M.Laplace(a - 1, b), (POS, POS2), ["log_prob", "cdf", "icdf", "entropy", "mean", "variance"]),
    "Cauchy": (lambda L, M, a, b: M.Cauchy(a, b), (POS, POS2), ["log_prob", "cdf", "icdf", "entropy"]),
    "Gumbel": (lambda L, M, a, b: M.Gumbel(a, b), (POS, POS2), ["log_prob", "cdf", "entropy", "mean", "variance"]),
    "HalfNormal": (lambda L, M, a: M.HalfNormal(a), (POS,), ["log_prob", "cdf", "entropy", "mean", "variance"]),
    "LogNormal": (lambda L, M, a, b: M.LogNormal(a - 1, b), (POS, POS2), ["log_prob", "cdf", "entropy", "mean", "variance"]),
    "StudentT": (lambda L, M, a, b: M.StudentT(a + 2, a, b), (POS, POS2), ["log_prob", "entropy", "mean", "variance"]),
    "Gamma": (lambda L, M, a, b: M.Gamma(a, b), (POS, POS2), ["log_prob", "entropy", "mean", "variance"]),
    "Chi2": (lambda L, M, a: M.Chi2(a), (POS,), ["log_prob", "entropy", "mean", "variance"]),
    "Beta": (lambda L, M, a, b: M.Beta(a, b), (POS, POS2), ["log_prob", "entropy", "mean", "variance"]),
    "Poisson": (lambda L, M, a: M.Poisson(a), (POS,), ["log_prob", "mean", "variance"]),
    "Geometric": (lambda L, M, a: M.Geometric(a / 4), (POS,), ["log_prob", "entropy", "mean", "variance"]),
}
QUANTILES = RNG.uniform(0.05, 0.95, (2, 3))
VALUE_OF = {"icdf": lambda L: t64(L, QUANTILES),
            "Beta": lambda L: t64(L, X / 4.5), "Poisson": lambda L: t64(L, np.floor(X)),
            "Geometric": lambda L: t64(L, np.floor(X))}


@pytest.mark.parametrize("name,method", [(n, m) for n, (_, _, ms) in CASES.items() for m in ms])
def test_against_torch(name, method):
    make, params, _ = CASES[name]
    args = ()
    if method in ("log_prob", "cdf", "icdf"):
        args = (VALUE_OF.get("icdf" if method == "icdf" else name, lambda L: t64(L, X)),)
    # digamma's derivative (entropies' gradients): torch 1.13's trigamma is within 1e-10, musa's 1e-12
    both(make, params, method, *args, tol=1e-8 if method == "entropy" or name == "Beta" else 1e-10)


def test_gamma_cdf_is_the_regularised_incomplete_gamma():
    d = D.Gamma(t64(musa, POS), t64(musa, POS2))
    want = torch.igamma(torch.tensor(POS), torch.tensor(POS2) * torch.tensor(X)).numpy()
    np.testing.assert_allclose(d.cdf(t64(musa, X)).numpy(), want, rtol=1e-8)


def test_binomial_dirichlet_and_mvn_against_torch():
    n = np.array([[5.0, 12.0, 30.0], [7.0, 7.0, 1.0]])
    k = np.minimum(np.floor(X[:2] * 3), n)
    both(lambda L, M, p: M.Binomial(L.tensor(n), probs=p / 4), (POS,), "log_prob", lambda L: t64(L, k))
    both(lambda L, M, lg: M.Binomial(10, logits=lg), (POS - 1.5,), "entropy", tol=1e-8)
    conc = RNG.uniform(0.3, 4, (2, 4))
    simplex = RNG.dirichlet(np.ones(4), size=(3, 2))
    for method in ("log_prob", "entropy", "mean", "variance"):
        args = (lambda L: t64(L, simplex),) if method == "log_prob" else ()
        both(lambda L, M, c: M.Dirichlet(c), (conc,), method, *args, tol=1e-8)
    A = RNG.standard_normal((2, 3, 3))
    cov = A @ A.transpose(0, 2, 1) + 3 * np.eye(3)
    loc = RNG.standard_normal((3,))
    for given in ("covariance_matrix", "precision_matrix", "scale_tril"):
        m = {"covariance_matrix": cov, "precision_matrix": np.linalg.inv(cov),
             "scale_tril": np.linalg.cholesky(cov)}[given]
        xs = RNG.standard_normal((4, 2, 3))
        for method in ("log_prob", "entropy", "variance", "covariance_matrix"):
            args = (lambda L: t64(L, xs),) if method == "log_prob" else ()
            tol = 1e-8 if given == "precision_matrix" else 1e-10
            outs = []
            for lib, mod in ((musa, D), (torch, TD)):
                d = mod.MultivariateNormal(t64(lib, loc), **{given: t64(lib, m)})
                out = getattr(d, method)
                outs.append(out(*[a(lib) for a in args]) if callable(out) else out)
            close(*outs, tol=tol)


@pytest.mark.parametrize("pair", ["exponential", "gamma", "poisson", "laplace", "beta", "dirichlet", "mvn"])
def test_kl_divergence_against_torch(pair):
    A = RNG.standard_normal((3, 3))
    spd = A @ A.T + 2 * np.eye(3)
    makers = {
        "exponential": (lambda L, M, a, b: (M.Exponential(a), M.Exponential(b)), (POS2, POS2[::-1].copy())),
        "gamma": (lambda L, M, a, b: (M.Gamma(a, b), M.Gamma(b, a)), (POS2, POS2[::-1].copy())),
        "poisson": (lambda L, M, a, b: (M.Poisson(a), M.Poisson(b)), (POS2, POS2[::-1].copy())),
        "laplace": (lambda L, M, a, b: (M.Laplace(a, b), M.Laplace(b, a)), (POS2, POS2[::-1].copy())),
        "beta": (lambda L, M, a, b: (M.Beta(a, b), M.Beta(b, a)), (POS2, POS2[::-1].copy())),
        "dirichlet": (lambda L, M, a, b: (M.Dirichlet(a), M.Dirichlet(b)), (POS, POS[::-1].copy())),
        "mvn": (lambda L, M, a, b: (M.MultivariateNormal(a, scale_tril=L.tensor(np.linalg.cholesky(spd))),
                                    M.MultivariateNormal(b, covariance_matrix=L.tensor(spd + np.eye(3)))),
                (POS2, POS2[::-1].copy())),
    }
    make, params = makers[pair]
    outs, grads = [], []
    for lib, mod in ((musa, D), (torch, TD)):
        ps = [t64(lib, p, True) for p in params]
        kl = mod.kl_divergence(*make(lib, mod, *ps))
        kl.sum().backward()
        outs.append(kl)
        grads.append([p.grad for p in ps])
    close(*outs, tol=1e-8)
    for a, b in zip(*grads):
        close(a, b, tol=1e-8)


def test_sample_statistics_and_shapes():
    musa.manual_seed(3)
    n = 40000
    checks = [(D.Exponential(musa.tensor([2.0])), 0.5, 0.25), (D.Laplace(1.0, 2.0), 1.0, 8.0),
              (D.Gumbel(0.0, 1.0), 0.5772, math.pi ** 2 / 6), (D.HalfNormal(2.0), 2 * math.sqrt(2 / math.pi), 4 * (1 - 2 / math.pi)),
              (D.LogNormal(0.0, 0.5), math.exp(0.125), (math.exp(0.25) - 1) * math.exp(0.25)),
              (D.Gamma(3.0, 2.0), 1.5, 0.75), (D.Chi2(4.0), 4.0, 8.0), (D.Beta(2.0, 5.0), 2 / 7, 10 / (49 * 8)),
              (D.StudentT(6.0, 1.0, 2.0), 1.0, 4 * 6 / 4), (D.Poisson(7.0), 7.0, 7.0),
              (D.Binomial(20, probs=0.3), 6.0, 4.2), (D.Geometric(0.25), 3.0, 12.0)]
    for d, mean, var in checks:
        s = d.sample((n,)).double()
        name = type(d).__name__
        assert abs(float(s.mean()) - mean) < 6 * math.sqrt(var / n), name
        assert abs(float(s.var()) / var - 1) < 0.08, name
    assert tuple(D.Dirichlet(musa.ones(2, 3)).sample((5,)).shape) == (5, 2, 3)
    mvn = D.MultivariateNormal(musa.zeros(2), covariance_matrix=musa.tensor([[2.0, 0.6], [0.6, 1.0]]))
    s = mvn.sample((n,))
    cov = np.cov(s.numpy().T)
    np.testing.assert_allclose(cov, [[2.0, 0.6], [0.6, 1.0]], atol=0.05)
    assert tuple(D.Cauchy(musa.zeros(3), 1.0).sample((2,)).shape) == (2, 3)
    assert tuple(D.Gamma(musa.ones(()), 1.0).rsample().shape) == ()


def test_reparametrised_gradients():
    """d E[x] / d parameter from rsample averages: Gamma's mean c / r gives
    1 / r in c; Beta's a / (a + b) gives b / (a + b)^2 in a."""
    musa.manual_seed(8)
    c = musa.tensor(3.0, requires_grad=True)
    D.Gamma(c, 2.0).rsample((50000,)).mean().backward()
    assert abs(float(c.grad) - 0.5) < 0.01
    a = musa.tensor(2.0, requires_grad=True)
    D.Beta(a, musa.tensor(3.0)).rsample((50000,)).mean().backward()
    assert abs(float(a.grad) - 3 / 25) < 0.006
    loc = musa.zeros(2, requires_grad=True)
    D.MultivariateNormal(loc, scale_tril=musa.eye(2)).rsample((7,)).sum().backward()
    assert loc.grad.tolist() == [7.0, 7.0]
    assert not D.Poisson(2.0).has_rsample and D.StudentT(3.0).has_rsample


def test_validation_errors():
    with pytest.raises(ValueError, match=r"\[Gamma\] Expected parameter concentration"):
        D.Gamma(musa.tensor([-1.0]), 1.0)
    with pytest.raises(ValueError, match=r"\[Exponential\] Expected value argument"):
        D.Exponential(1.0).log_prob(musa.tensor([-1.0]))
    with pytest.raises(ValueError, match=r"\[Poisson\] Expected value argument"):
        D.Poisson(1.0).log_prob(musa.tensor([1.5]))
    with pytest.raises(ValueError, match=r"\[Binomial\] Expected parameter total_count"):
        D.Binomial(musa.tensor([2.5]), probs=0.5)
    with pytest.raises(ValueError, match=r"\[MultivariateNormal\] Exactly one of"):
        D.MultivariateNormal(musa.zeros(2))
    with pytest.raises(ValueError, match=r"\[MultivariateNormal\] the matrix must be 2 x 2"):
        D.MultivariateNormal(musa.zeros(2), covariance_matrix=musa.eye(3))
    with pytest.raises(ValueError, match=r"\[Dirichlet\] `concentration` parameter must be at least"):
        D.Dirichlet(musa.tensor(1.0))
    with pytest.raises(NotImplementedError, match=r"\[kl_divergence\] No KL"):
        D.kl_divergence(D.Gamma(1.0, 1.0), D.Poisson(1.0))


# ---- transforms, transformed and relaxed distributions, mixtures ----

TRANSFORMS = {
    "exp": lambda M, L: M.transforms.ExpTransform(),
    "sigmoid": lambda M, L: M.transforms.SigmoidTransform(),
    "tanh": lambda M, L: M.transforms.TanhTransform(),
    "softplus": lambda M, L: M.transforms.SoftplusTransform(),
    "power": lambda M, L: M.transforms.PowerTransform(2.0),  # (torch keeps 1/exponent in float32)
    "affine": lambda M, L: M.transforms.AffineTransform(L.tensor([1.0, -2.0, 0.5], dtype=L.float64), -3.0),
    "compose": lambda M, L: M.transforms.ComposeTransform([M.transforms.AffineTransform(0.5, 2.0),
                                                           M.transforms.TanhTransform()]),
    "stick": lambda M, L: M.transforms.StickBreakingTransform(),
    "inverse": lambda M, L: M.transforms.ExpTransform().inv,
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_transforms_against_torch(name):
    x0 = RNG.uniform(0.2, 1.5, (4, 3))
    outs = []
    for lib, mod in ((musa, D), (torch, TD)):
        t = TRANSFORMS[name](mod, lib)
        x = t64(lib, x0, True)
        y = t(x)
        back = t.inv(y)
        ladj = t.log_abs_det_jacobian(x, y)
        (y.sum() + ladj.sum()).backward()
        outs.append((y, back, ladj, x.grad))
    for a, b in zip(*outs):
        close(a, b, tol=1e-9)


def test_tanh_squashed_normal_as_soft_actor_critic_uses_it():
    """SAC's policy: a Normal through tanh (and an affine rescale); the
    log-probability of a reparametrised action and its gradients."""
    mu0, s0 = RNG.standard_normal((5, 2)), RNG.uniform(0.3, 1.2, (5, 2))
    eps = RNG.standard_normal((5, 2))
    res = []
    for lib, mod in ((musa, D), (torch, TD)):
        mu, sigma = t64(lib, mu0, True), t64(lib, s0, True)
        d = mod.TransformedDistribution(mod.Normal(mu, sigma), [mod.transforms.TanhTransform(),
                                                                mod.transforms.AffineTransform(0.0, 2.0)])
        action = 2.0 * lib.tanh(mu + sigma * t64(lib, eps))
        lp = d.log_prob(action).sum(-1)
        (lp.sum() - action.sum()).backward()
        res.append((lp, mu.grad, sigma.grad))
    for a, b in zip(*res):
        close(a, b, tol=1e-8)
    musa.manual_seed(2)
    d = D.TransformedDistribution(D.Normal(musa.zeros(3), musa.ones(3)), D.transforms.TanhTransform())
    s = d.sample((1000,))
    assert float(s.abs().max()) < 1 and d.has_rsample and tuple(s.shape) == (1000, 3)
    np.testing.assert_allclose(D.TransformedDistribution(D.Normal(0.0, 1.0), [D.transforms.ExpTransform()])
                               .cdf(musa.tensor([0.5, 2.0], dtype=musa.float64)).numpy(),
                               TD.LogNormal(0.0, 1.0).cdf(torch.tensor([0.5, 2.0], dtype=torch.float64)).numpy())


def test_relaxed_distributions_against_torch():
    p0 = RNG.uniform(0.1, 0.9, (3,))
    v = RNG.uniform(0.05, 0.95, (4, 3))
    both(lambda L, M, p: M.RelaxedBernoulli(t64(L, 0.7), probs=p), (p0,), "log_prob", lambda L: t64(L, v),
         tol=1e-9)
    lg = RNG.standard_normal((2, 4))
    simplex = RNG.dirichlet(np.ones(4), size=(2,))
    both(lambda L, M, g: M.RelaxedOneHotCategorical(t64(L, 0.5), logits=g), (lg,), "log_prob",
         lambda L: t64(L, simplex), tol=1e-9)
    musa.manual_seed(6)
    s = D.RelaxedOneHotCategorical(musa.tensor(0.3), logits=musa.zeros(5, 4)).rsample((100,))
    np.testing.assert_allclose(s.sum(-1).numpy(), 1, rtol=1e-5)
    b = D.RelaxedBernoulli(musa.tensor(0.3), probs=musa.full((1000,), 0.8)).sample()
    assert 0 < float(b.min()) and float(b.max()) < 1 and float((b > 0.5).double().mean()) > 0.7


def test_mixture_same_family_against_torch():
    w, loc, scale = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3)), RNG.uniform(0.5, 2, (2, 3))
    x = RNG.standard_normal((4, 2))
    for method in ("log_prob", "cdf", "mean", "variance"):
        args = (lambda L: t64(L, x),) if method in ("log_prob", "cdf") else ()
        both(lambda L, M, a, b, c: M.MixtureSameFamily(M.Categorical(logits=a), M.Normal(b, c)),
             (w, loc, scale), method, *args, tol=1e-9)
    musa.manual_seed(4)
    m = D.MixtureSameFamily(D.Categorical(probs=musa.tensor([0.25, 0.75])),
                            D.Normal(musa.tensor([-5.0, 5.0]), musa.tensor([0.1, 0.1])))
    s = m.sample((4000,))
    assert tuple(s.shape) == (4000,) and abs(float((s > 0).double().mean()) - 0.75) < 0.03
    with pytest.raises(ValueError, match=r"\[MixtureSameFamily\] the components' last batch dim"):
        D.MixtureSameFamily(D.Categorical(probs=musa.tensor([0.5, 0.5])), D.Normal(musa.zeros(3), 1.0))


def test_constraints_as_torch():
    from musa.distributions import constraints as MC
    from torch.distributions import constraints as TC
    v = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, float("nan")])
    for name in ("real", "positive", "nonnegative", "unit_interval", "boolean", "nonnegative_integer"):
        got = getattr(MC, name).check(musa.tensor(v)).numpy()
        want = getattr(TC, name).check(torch.tensor(v)).numpy()
        assert (got == want).all(), name
    assert MC.interval(0.0, 1.0).check(musa.tensor([1.0])).tolist() == [True]
    assert MC.half_open_interval(0.0, 1.0).check(musa.tensor([1.0])).tolist() == [False]
    assert MC.simplex.check(musa.tensor([[0.2, 0.8], [0.5, 0.6]])).tolist() == [True, False]
    import musa.distributions.transforms as MT  # importable as torch's submodule
    assert MT.ExpTransform().codomain is MC.positive


def test_supports_and_arg_constraints_name_torchs():
    checks = {"Normal": (D.Normal(0.0, 1.0), TD.Normal(0.0, 1.0)),
              "Gamma": (D.Gamma(2.0, 1.0), TD.Gamma(2.0, 1.0)),
              "Beta": (D.Beta(2.0, 1.0), TD.Beta(2.0, 1.0)),
              "Poisson": (D.Poisson(2.0), TD.Poisson(2.0)),
              "Uniform": (D.Uniform(0.0, 2.0), TD.Uniform(0.0, 2.0))}
    v = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.0])
    for name, (m, t) in checks.items():
        assert set(type(m).arg_constraints) == set(type(t).arg_constraints), name
        np.testing.assert_array_equal(m.support.check(musa.tensor(v)).numpy(),
                                      t.support.check(torch.tensor(v)).numpy(), err_msg=name)
    d = D.Binomial(musa.tensor([3.0, 5.0]), probs=0.5)
    assert d.support.check(musa.tensor([3.0, 4.0])).tolist() == [True, True]
    assert d.support.check(musa.tensor([4.0, 4.0])).tolist() == [False, True]
    sac = D.TransformedDistribution(D.Normal(0.0, 1.0), D.transforms.TanhTransform())
    assert sac.support.check(musa.tensor([0.5, 1.5])).tolist() == [True, False]


def test_modes_icdf_enumerate_support_and_expand_as_torch():
    conc = np.array([[2., 3., 4.], [0.5, 0.5, 0.5], [0.5, 2., 3.], [2., 1., 3.]])
    both(lambda L, M, c: M.Dirichlet(c), (conc,), "mode", grad=False)
    both(lambda L, M, a, b: M.Beta(a, b), ([2., .5, .5, 2.], [3., .5, 2., .8]), "mode", grad=False)
    both(lambda L, M, p: M.Bernoulli(p), ([0.2, 0.5, 0.7],), "mode", grad=False)
    q = RNG.uniform(0.05, 0.95, (3, 4))
    both(lambda L, M, a, b: M.Normal(a, b), (RNG.standard_normal(4), RNG.uniform(0.5, 2, 4)), "icdf",
         lambda L: t64(L, q))
    both(lambda L, M, a, b: M.Uniform(a, b), ([0.0, 1.0, -2.0, 0.5], [1.0, 3.0, 2.0, 0.6]), "icdf",
         lambda L: t64(L, q))
    for m, t in ((D.Bernoulli(musa.tensor([0.3, 0.6])), TD.Bernoulli(torch.tensor([0.3, 0.6]))),
                 (D.Binomial(3, probs=musa.tensor([0.3, 0.6])), TD.Binomial(3, probs=torch.tensor([0.3, 0.6])))):
        assert m.has_enumerate_support and t.has_enumerate_support
        np.testing.assert_array_equal(m.enumerate_support().numpy(), t.enumerate_support().numpy())
    assert not D.Normal(0.0, 1.0).has_enumerate_support
    # expand: the parameters broadcast to the new batch; values as torch's
    for make, shape in ((lambda L, M: M.Normal(L.tensor([0.0, 1.0]), L.tensor([1.0, 2.0])), (3, 2)),
                        (lambda L, M: M.Dirichlet(L.tensor([[1.0, 2.0, 3.0]])), (4, 1)),
                        (lambda L, M: M.Beta(L.tensor([2.0]), L.tensor([3.0])), (4, 1)),
                        (lambda L, M: M.MultivariateNormal(L.zeros(2), L.eye(2)), (5,))):
        m, t = make(musa, D).expand(shape), make(torch, TD).expand(shape)
        assert tuple(m.batch_shape) == tuple(t.batch_shape)
        x = t.sample()
        close(m.log_prob(musa.tensor(x.numpy())), t.log_prob(x), tol=1e-6)
    with pytest.raises(ValueError, match=r"\[Normal.expand\] batch shape \(2,\) cannot be expanded to \(3,\)"):
        D.Normal(musa.zeros(2), 1.0).expand((3,))


# ---- _distributions_extra.py ----

EXTRA = {
    "Weibull": (lambda L, M, a, b: M.Weibull(a, b), (POS, POS2), ["log_prob", "cdf", "entropy", "mean", "variance", "mode"]),
    "Pareto": (lambda L, M, a, b: M.Pareto(a / 10, b + 2.5), (POS, POS2), ["log_prob", "cdf", "entropy", "mean", "variance"]),
    "HalfCauchy": (lambda L, M, a: M.HalfCauchy(a), (POS,), ["log_prob", "cdf", "icdf", "entropy"]),
    "Kumaraswamy": (lambda L, M, a, b: M.Kumaraswamy(a, b), (POS, POS2), ["log_prob", "entropy", "mean", "variance"]),
    "FisherSnedecor": (lambda L, M, a, b: M.FisherSnedecor(a, b + 4.5), (POS, POS2), ["log_prob", "mean", "variance", "mode"]),
    "NegativeBinomial": (lambda L, M, a, b: M.NegativeBinomial(a, probs=b / 4), (POS, POS2), ["log_prob", "mean", "variance"]),
    # (torch's log I0 is Abramowitz and Stegun's polynomial, 1e-7 off: see test_von_mises_exactly)
    "VonMises": (lambda L, M, a, b: M.VonMises(a, b), (POS, POS2), ["log_prob", "mean", "variance"]),
}
EXTRA_VALUES = {"Kumaraswamy": lambda L: t64(L, X / 4.5), "NegativeBinomial": lambda L: t64(L, np.floor(X)),
                "icdf": lambda L: t64(L, QUANTILES)}


@pytest.mark.parametrize("name,method", [(n, m) for n, (_, _, ms) in EXTRA.items() for m in ms])
def test_extra_against_torch(name, method):
    make, params, _ = EXTRA[name]
    args = ()
    if method in ("log_prob", "cdf", "icdf"):
        args = (EXTRA_VALUES.get("icdf" if method == "icdf" else name, lambda L: t64(L, X + 0.5)),)
    both(make, params, method, *args, tol=1e-6 if name == "VonMises" else 1e-8)


def test_von_mises_exactly():
    """Against its formula with torch's exact (Cephes) i0e and i1e."""
    d = D.VonMises(t64(musa, POS), t64(musa, POS2))
    k, loc, x = torch.tensor(POS2), torch.tensor(POS), torch.tensor(X + 0.5)
    want = k * torch.cos(x - loc) - math.log(2 * math.pi) - (torch.log(torch.special.i0e(k)) + k)
    np.testing.assert_allclose(d.log_prob(t64(musa, X + 0.5)).numpy(), want.numpy(), rtol=1e-13)
    var = 1 - torch.special.i1e(k) / torch.special.i0e(k)
    np.testing.assert_allclose(d.variance.numpy(), var.expand(2, 3).numpy(), rtol=1e-13)


def test_multinomial_against_torch():
    p = RNG.dirichlet(np.ones(4), size=2)
    counts = np.array([[[2, 0, 3, 1], [0, 0, 6, 0]], [[1, 1, 1, 3], [6, 0, 0, 0]]], dtype=np.float64)
    for method in ("log_prob", "mean", "variance", "entropy"):
        args = (lambda L: t64(L, counts),) if method == "log_prob" else ()
        # (torch's entropy takes lgamma(total_count + 1) in float32: 8e-8 off)
        both(lambda L, M, q: M.Multinomial(6, probs=q), (p,), method, *args,
             tol=1e-6 if method == "entropy" else 1e-8)
    musa.manual_seed(9)
    s = D.Multinomial(20, probs=musa.tensor([0.2, 0.5, 0.3])).sample((5000,))
    assert tuple(s.shape) == (5000, 3) and bool((s.sum(-1) == 20).all())
    np.testing.assert_allclose(s.mean(0).numpy(), [4, 10, 6], atol=0.15)
    with pytest.raises(TypeError, match=r"\[Multinomial\] inhomogeneous total_count"):
        D.Multinomial(musa.tensor([2, 3]), probs=musa.tensor([0.5, 0.5]))


def test_extra_samples():
    musa.manual_seed(12)
    n = 40000
    for d, mean, var in ((D.Weibull(2.0, 1.5), 2 * math.gamma(1 + 1 / 1.5),
                          4 * (math.gamma(1 + 2 / 1.5) - math.gamma(1 + 1 / 1.5) ** 2)),
                         (D.Pareto(1.0, 5.0), 1.25, 5 / (16 * 3)),
                         (D.Kumaraswamy(2.0, 3.0), None, None),
                         (D.FisherSnedecor(8.0, 12.0), 1.2, 2 * 144 * 18 / (8 * 100 * 8)),
                         (D.NegativeBinomial(5.0, probs=0.4), 5 * 0.4 / 0.6, 5 * 0.4 / 0.36),
                         (D.VonMises(0.5, 2.0), 0.5, None)):
        s = d.sample((n,)).double()
        name = type(d).__name__
        if mean is None:
            mean, var = float(d.mean), float(d.variance)
        assert abs(float(s.mean()) - mean) < 6 * math.sqrt((var or 1) / n), name
        if var is not None and name != "VonMises":
            assert abs(float(s.var()) / var - 1) < 0.1, name
    v = D.VonMises(musa.tensor([3.0, -3.0]), musa.tensor([0.5, 1e-6])).sample((2000,))
    assert float(v.max()) < math.pi and float(v.min()) >= -math.pi
    assert D.Weibull(1.0, 2.0).has_rsample and not D.NegativeBinomial(2.0, probs=0.5).has_rsample


def test_low_rank_mvn_and_logistic_normal_against_torch():
    loc, W, d = RNG.standard_normal((2, 4)), RNG.standard_normal((2, 4, 2)), RNG.uniform(0.5, 2, (4,))
    xs = RNG.standard_normal((3, 2, 4))
    for method in ("log_prob", "entropy", "variance", "covariance_matrix"):
        args = (lambda L: t64(L, xs),) if method == "log_prob" else ()
        both(lambda L, M, a, b, c: M.LowRankMultivariateNormal(a, b, c), (loc, W, d), method, *args, tol=1e-9)
    musa.manual_seed(1)
    lr = D.LowRankMultivariateNormal(musa.zeros(3), musa.tensor([[1.0], [0.5], [0.0]]), musa.ones(3))
    s = lr.sample((40000,))
    np.testing.assert_allclose(np.cov(s.numpy().T), lr.covariance_matrix.numpy(), atol=0.05)
    simplex = RNG.dirichlet(np.ones(4), size=(2,))
    both(lambda L, M, a, b: M.LogisticNormal(a, b), (RNG.standard_normal((2, 3)), RNG.uniform(0.5, 2, (2, 3))),
         "log_prob", lambda L: t64(L, simplex), tol=1e-9)
    ln = D.LogisticNormal(musa.zeros(3), musa.ones(3)).rsample((5,))
    assert tuple(ln.shape) == (5, 4)
    np.testing.assert_allclose(ln.sum(-1).numpy(), 1, rtol=1e-6)
    with pytest.raises(ValueError, match=r"\[LowRankMultivariateNormal\] cov_factor must be"):
        D.LowRankMultivariateNormal(musa.zeros(3), musa.ones(2, 1), musa.ones(3))
