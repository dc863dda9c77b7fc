"""musa.distributions against torch.distributions: log_prob, entropy, cdf,
moments and KL divergences (values and gradients), sample shapes and
statistics, reparametrised gradients, and parameter validation."""
import numpy as np
import pytest
import torch

import musa
import musa.distributions as D
import torch.distributions as TD

RNG = np.random.default_rng(21)


def t64(lib, a, grad=False):
    return lib.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def close(m, t, tol=1e-10):
    np.testing.assert_allclose(m.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def both(make, params, method, *args, grad=True, tol=1e-10):
    """make(lib, D, *params) in both libraries; method's values and the
    gradients of its sum with respect to the parameters, within tol."""
    outs, grads = [], []
    for lib, mod in ((musa, D), (torch, TD)):
        ps = [t64(lib, p, grad) for p in params]
        d = make(lib, mod, *ps)
        out = getattr(d, method)
        out = out(*[a(lib) for a in args]) if callable(out) else out
        outs.append(out)
        if grad:
            out.sum().backward()
            grads.append([p.grad for p in ps])
    close(*outs, tol=tol)
    for a, b in zip(*grads):
        if b is not None:
            close(a, b, tol=tol)


LOC, SCALE = RNG.standard_normal((3, 1)), RNG.uniform(0.5, 2, (4,))
PROBS = RNG.uniform(0.05, 0.95, (2, 3))
LOGITS = RNG.standard_normal((2, 5))
VALUES = RNG.standard_normal((3, 4))


@pytest.mark.parametrize("method", ["log_prob", "cdf", "entropy", "mean", "variance", "stddev"])
def test_normal(method):
    args = (lambda L: t64(L, VALUES),) if method in ("log_prob", "cdf") else ()
    both(lambda L, M, a, b: M.Normal(a, b), (LOC, SCALE), method, *args)


@pytest.mark.parametrize("method", ["log_prob", "cdf", "entropy", "mean", "variance"])
def test_uniform(method):
    args = (lambda L: t64(L, [[-0.5, 0.0, 0.9]]),) if method in ("log_prob", "cdf") else ()
    both(lambda L, M, a, b: M.Uniform(a, b), ([-1.0, -0.2, 0.5], [1.0, 0.3, 2.0]), method, *args)


@pytest.mark.parametrize("given", ["probs", "logits"])
@pytest.mark.parametrize("method", ["log_prob", "entropy", "mean", "variance"])
def test_bernoulli(given, method):
    args = (lambda L: t64(L, [[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]),) if method == "log_prob" else ()
    value = PROBS if given == "probs" else np.log(PROBS / (1 - PROBS))
    both(lambda L, M, p: M.Bernoulli(**{given: p}), (value,), method, *args)


@pytest.mark.parametrize("given", ["probs", "logits"])
@pytest.mark.parametrize("method", ["log_prob", "entropy"])
def test_categorical(given, method):
    args = (lambda L: L.tensor([[1, 4], [0, 2], [3, 3]]),) if method == "log_prob" else ()
    value = np.exp(LOGITS) * 3 if given == "probs" else LOGITS  # unnormalised probs are normalised
    both(lambda L, M, p: M.Categorical(**{given: p}), (value,), method, *args)


def test_one_hot_categorical_and_independent():
    v = np.eye(5)[[1, 3]]
    both(lambda L, M, p: M.OneHotCategorical(logits=p), (LOGITS,), "log_prob", lambda L: t64(L, v))
    both(lambda L, M, p: M.OneHotCategorical(logits=p), (LOGITS,), "entropy")
    both(lambda L, M, a, b: M.Independent(M.Normal(a, b), 1), (LOC, SCALE), "log_prob", lambda L: t64(L, VALUES))
    d = D.Independent(D.Normal(musa.zeros(2, 3), musa.ones(2, 3)), 1)
    assert tuple(d.batch_shape) == (2,) and tuple(d.event_shape) == (3,)


@pytest.mark.parametrize("pair", ["normal", "bernoulli", "categorical", "uniform", "independent"])
def test_kl_divergence(pair):
    makers = {
        "normal": (lambda M, a, b: (M.Normal(a, b), M.Normal(b, a.abs() + 0.5)), (LOC.ravel(), SCALE[:3])),
        "bernoulli": (lambda M, a, b: (M.Bernoulli(a), M.Bernoulli(b)), (PROBS[0], PROBS[1])),
        "categorical": (lambda M, a, b: (M.Categorical(logits=a), M.Categorical(logits=b)), (LOGITS[0], LOGITS[1])),
        "uniform": (lambda M, a, b: (M.Uniform(a, b), M.Uniform(a - 1, b + 1)), ([0.0, 1.0], [1.0, 3.0])),
        "independent": (lambda M, a, b: (M.Independent(M.Normal(a, b), 1), M.Independent(M.Normal(b, b), 1)),
                        (LOC.ravel(), SCALE[:3])),
    }
    make, params = makers[pair]
    outs, grads = [], []
    for lib, mod in ((musa, D), (torch, TD)):
        ps = [t64(lib, p, True) for p in params]
        kl = mod.kl_divergence(*make(mod, *ps))
        kl.sum().backward()
        outs.append(kl)
        grads.append([p.grad for p in ps])
    close(*outs)
    for a, b in zip(*grads):
        close(a, b)


def test_samples():
    musa.manual_seed(0)
    n = D.Normal(musa.tensor([0.0, 3.0]), musa.tensor([1.0, 0.5]))
    s = n.sample((20000,))
    assert tuple(s.shape) == (20000, 2) and not s.requires_grad
    np.testing.assert_allclose(s.mean(0).numpy(), [0.0, 3.0], atol=0.03)
    np.testing.assert_allclose(s.std(0).numpy(), [1.0, 0.5], atol=0.03)
    loc = musa.tensor([0.5], requires_grad=True)
    D.Normal(loc, 2.0).rsample((4,)).sum().backward()  # reparametrised: d/dloc = 4
    assert loc.grad.tolist() == [4.0]
    c = D.Categorical(probs=musa.tensor([[0.1, 0.6, 0.3], [1.0, 0.0, 0.0]]))
    draws = c.sample((30000,))
    assert tuple(draws.shape) == (30000, 2) and draws.dtype == musa.int64
    freq = np.bincount(draws[:, 0].numpy(), minlength=3) / 30000
    np.testing.assert_allclose(freq, [0.1, 0.6, 0.3], atol=0.015)
    assert (draws[:, 1] == 0).all()
    b = D.Bernoulli(probs=musa.full((4,), 0.25)).sample((10000,))
    assert abs(float(b.mean()) - 0.25) < 0.02
    u = D.Uniform(-1.0, 3.0).sample((5000,))
    assert float(u.min()) >= -1 and float(u.max()) < 3
    assert tuple(D.OneHotCategorical(logits=musa.zeros(2, 4)).sample((3,)).shape) == (3, 2, 4)


def test_reinforce_style_policy_gradient_matches_torch():
    """pytorch/examples' reinforce: -log_prob(action) * return through a
    Categorical over a policy's softmax."""
    logits = RNG.standard_normal((4, 3))
    actions, returns = [2, 0, 1, 1], [1.0, -0.5, 2.0, 0.3]
    grads = []
    for lib, mod in ((musa, D), (torch, TD)):
        x = t64(lib, logits, True)
        m = mod.Categorical(lib.softmax(x, -1))
        loss = (-m.log_prob(lib.tensor(actions)) * t64(lib, returns)).sum()
        loss.backward()
        grads.append(x.grad)
    close(*grads)


def test_validation():
    with pytest.raises(ValueError, match="scale"):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError, match="probs"):
        D.Bernoulli(probs=musa.tensor([1.5]))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Categorical()
    with pytest.raises(ValueError, match="within the support"):
        D.Bernoulli(probs=musa.tensor([0.5])).log_prob(musa.tensor([0.5]))
    with pytest.raises(ValueError, match="within the support"):
        D.Categorical(logits=musa.zeros(3)).log_prob(musa.tensor(3))
    assert D.Normal(0.0, -1.0, validate_args=False).scale.item() == -1.0
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Bernoulli(probs=musa.tensor(0.5)))
