"""musa.special's normal-distribution functions, erfcx, xlog1py, entr,
multigammaln, zeta and spherical_bessel_j0 against torch.special (and the
exact values where torch 1.13 loses digits), with their gradients."""
import math

import numpy as np
import pytest
import torch

import musa
import musa.special as S


def both(name, *arrays):
    return (getattr(S, name)(*[musa.tensor(a) for a in arrays]).numpy(),
            getattr(torch.special, name)(*[torch.tensor(a) for a in arrays]).numpy())


def grads(name, x0, *extra):
    a, t = musa.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    g = musa.autograd.grad(getattr(S, name)(a, *extra).sum(), a)[0].numpy()
    tg = torch.autograd.grad(getattr(torch.special, name)(t, *extra).sum(), t)[0].numpy()
    return g, tg


def test_ndtr_log_ndtr_erfcx_equal_torchs():
    x = np.concatenate([np.linspace(-37, 40, 771), [0.0, -0.0, 1e-300]])
    got, want = both("ndtr", x)
    # torch computes 1 + erf below 0 and loses digits in the lower tail
    # (ndtr(-8.2) is 1.11e-16 there, 1.20e-16 exactly): erfc does not
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=2e-16)
    np.testing.assert_allclose(got, [0.5 * math.erfc(-v / math.sqrt(2)) for v in x], rtol=1e-14)
    x = np.concatenate([np.linspace(-60, 36, 961), [-1e3, -1e5]])
    got, want = both("log_ndtr", x)
    # past x = 30 log_ndtr is ~ -ndtr(-x), whose relative condition number is
    # about x^2: musa and torch are each within 1.7e-13 of the exact values
    # there (mpmath), at different points
    np.testing.assert_allclose(got, want, rtol=4e-13)
    x = np.concatenate([np.linspace(-25, 60, 851), [1e3, 1e10, -26.4]])
    got, want = both("erfcx", x)
    np.testing.assert_allclose(got, want, rtol=1e-13)
    for name in ("ndtr", "log_ndtr", "erfcx"):
        inf = getattr(S, name)(musa.tensor([math.inf, -math.inf, math.nan])).numpy()
        tinf = getattr(torch.special, name)(torch.tensor([math.inf, -math.inf, math.nan])).numpy()
        np.testing.assert_array_equal(inf, tinf)
        g, tg = grads(name, np.array([-30.0, -3.0, -0.5, 0.0, 0.7, 4.0]))
        np.testing.assert_allclose(g, tg, rtol=1e-12, atol=1e-300)
    assert S.ndtr(musa.tensor([1, 2])).dtype == musa.float32
    np.testing.assert_allclose(S.log_ndtr(musa.tensor([-3.0])).numpy(),
                               torch.special.log_ndtr(torch.tensor([-3.0])).numpy(), rtol=1e-6)


def test_ndtri_inverts_ndtr_to_float64_precision():
    p = np.concatenate([np.logspace(-300, -1, 300), np.linspace(0.01, 0.99, 99),
                        1 - np.logspace(-16, -1, 50)])
    got, want = both("ndtri", p)
    np.testing.assert_allclose(got, want, rtol=1e-13)
    edge = S.ndtri(musa.tensor([0.0, 1.0, -0.1, 1.1, math.nan, 0.5])).tolist()
    assert edge[:2] == [-math.inf, math.inf] and edge[5] == 0.0
    assert all(math.isnan(v) for v in edge[2:5])
    g, tg = grads("ndtri", np.array([1e-10, 0.1, 0.5, 0.97]))
    np.testing.assert_allclose(g, tg, rtol=1e-12)
    x = musa.tensor([0.2, 0.7], dtype=musa.float64, requires_grad=True)
    assert musa.autograd.gradcheck(S.ndtri, (x,))


def test_xlog1py_entr_spherical_bessel_j0():
    x = np.array([0.0, 1.0, 2.0, 0.0, -1.5, 3.0])
    y = np.array([5.0, 1.0, -1.0, math.nan, 0.5, -2.0])
    got, want = both("xlog1py", x, y)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=1e-15)
    np.testing.assert_allclose(S.xlog1py(musa.tensor(x), 2.0).numpy(),
                               torch.special.xlog1py(torch.tensor(x), 2.0).numpy(), rtol=1e-15)
    e = np.array([0.0, 1.0, 2.0, -1.0, math.nan, 1e-300, 0.3])
    got, want = both("entr", e)
    np.testing.assert_allclose(got, want, rtol=1e-15)
    j = np.array([0.0, 1e-9, 1.0, -2.5, 10.0, 100.0])
    got, want = both("spherical_bessel_j0", j)
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_multigammaln_and_mvlgamma():
    x = np.array([2.5, 3.0, 10.3, 100.0])
    for p in (1, 2, 3, 5):
        got = S.multigammaln(musa.tensor(x), p)
        want = torch.special.multigammaln(torch.tensor(x), p)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-14)
    np.testing.assert_allclose(musa.mvlgamma(musa.tensor(x), 3).numpy(),
                               torch.mvlgamma(torch.tensor(x), 3).numpy(), rtol=1e-14)
    m = musa.tensor(x)
    m.mvlgamma_(2)
    np.testing.assert_allclose(m.numpy(), torch.tensor(x).mvlgamma(2).numpy(), rtol=1e-14)
    g, tg = grads("multigammaln", x, 3)
    np.testing.assert_allclose(g, tg, rtol=1e-12)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[multigammaln\] all elements must be "
                                                        r"greater than \(p-1\)/2 = 1.0"):
        S.multigammaln(musa.tensor([0.9, 3.0]), 3)


def test_zeta_equals_torchs_with_cephes_domain():
    xs = np.array([1.5, 2, 3.3, 10, 50, 1.0001, 1, 0.5, 2, 2, 2.5, 200, 1.5, 3])
    qs = np.array([0.3, 1, 2.5, 0.1, 3, 7, 1, 1, -3, -2.5, -2.5, 0.9, 1e5, -4.5])
    got, want = both("zeta", xs, qs)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=2e-15)
    basel = float(S.zeta(2.0, musa.tensor(1.0, dtype=musa.float64)))
    assert basel == pytest.approx(math.pi ** 2 / 6, rel=1e-15)
    assert S.zeta(musa.tensor([3.0]), 2.0).shape == (1,)
    q = musa.tensor([0.7, 2.0, 5.5], dtype=musa.float64, requires_grad=True)
    tq = torch.tensor([0.7, 2.0, 5.5], dtype=torch.float64, requires_grad=True)
    g = musa.autograd.grad(S.zeta(musa.tensor(3.5, dtype=musa.float64), q).sum(), q)[0]
    tg = torch.autograd.grad(torch.special.zeta(torch.tensor(3.5, dtype=torch.float64), tq).sum(),
                             tq)[0]
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-13)


POLYNOMIALS = [n for n in musa.special.__all__ if "_polynomial_" in n]


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_orthogonal_polynomials_against_torch(name):
    assert len(POLYNOMIALS) == 12
    rng = np.random.default_rng(11)
    x = rng.uniform(-1.5, 1.5, 40)
    deg = np.arange(40) % 13 - 1.0  # -1 .. 11: a negative degree gives 0
    fm, ft = getattr(musa.special, name), getattr(torch.special, name)
    got = fm(musa.tensor(x, dtype=musa.float64), musa.tensor(deg, dtype=musa.float64)).numpy()
    want = ft(torch.tensor(x), torch.tensor(deg)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    for n in (0, 1, 5, 2.7):  # a number n (truncated, as torch)
        np.testing.assert_allclose(fm(musa.tensor(x, dtype=musa.float64), n).numpy(),
                                   ft(torch.tensor(x), n).numpy(), rtol=1e-9, atol=1e-9)
    assert fm(musa.tensor([1, 2]), 2).dtype == musa.float32
    # differentiable in x (torch's are not): against central differences
    xs = musa.tensor(x[:5], dtype=musa.float64, requires_grad=True)
    fm(xs, 4).sum().backward()
    h = 1e-6
    diff = (fm(musa.tensor(x[:5] + h, dtype=musa.float64), 4) -
            fm(musa.tensor(x[:5] - h, dtype=musa.float64), 4)).numpy() / (2 * h)
    np.testing.assert_allclose(xs.grad.numpy(), diff, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match=r"degrees up to 1000000 are supported"):
        fm(musa.ones(2), 1 << 62)
