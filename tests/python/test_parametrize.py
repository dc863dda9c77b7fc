"""torch.nn.utils.parametrize and parametrizations (orthogonal,
spectral_norm, weight_norm; parametrizations of several tensors) against torch
1.13, and linalg.householder_product."""
import copy
import os

import numpy as np
import pytest
import torch

import musa
import musa.nn as nn
from musa.nn.utils import parametrizations as PZ
from musa.nn.utils import parametrize as P


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)


class TSymmetric(torch.nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)


class Transpose(nn.Module):
    def forward(self, X):
        return X.t()


class Scale(nn.Module):
    def forward(self, X):
        return 2 * X

    def right_inverse(self, Y):
        return Y / 2


def test_register_read_assign_remove():
    lin = nn.Linear(3, 3).double()
    w0 = lin.weight.detach().clone()
    param = lin.weight
    opt = musa.optim.SGD([param], lr=0.1)
    P.register_parametrization(lin, "weight", Symmetric())
    assert P.is_parametrized(lin) and P.is_parametrized(lin, "weight") and not P.is_parametrized(lin, "bias")
    assert type(lin).__name__ == "ParametrizedLinear" and P.type_before_parametrizations(lin) is nn.Linear
    assert lin.parametrizations.weight.original is param  # the optimizer's parameter
    w = lin.weight
    np.testing.assert_array_equal(w.detach().numpy(), (w0.triu() + w0.triu(1).t()).numpy())
    assert list(lin.state_dict()) == ["bias", "parametrizations.weight.original"]
    # gradients reach original through the chain, and an optimizer step moves it
    lin(musa.ones(2, 3, dtype=musa.float64)).sum().backward()
    assert param.grad is not None
    opt.step()
    assert not np.array_equal(param.detach().numpy(), w0.numpy())
    # a second parametrization chains; assignment runs right_inverse backwards, and
    # Symmetric has none
    P.register_parametrization(lin, "weight", Scale())
    assert len(lin.parametrizations.weight) == 2
    np.testing.assert_allclose(lin.weight.detach().numpy(),
                               2 * (param.triu() + param.triu(1).t()).detach().numpy())
    with pytest.raises(RuntimeError, match=r"\[parametrize\] parametrization Symmetric does not implement"):
        lin.weight = musa.tensor(np.eye(3))
    other = nn.Linear(3, 3).double()
    P.register_parametrization(other, "weight", Scale())
    other.weight = musa.tensor(np.eye(3) * 4.0)  # original becomes eye * 2
    np.testing.assert_allclose(other.parametrizations.weight.original.detach().numpy(), np.eye(3) * 2)
    np.testing.assert_allclose(other.weight.detach().numpy(), np.eye(3) * 4)
    with P.cached():
        a, b = lin.weight, lin.weight
        assert a is b
    assert lin.weight is not lin.weight
    value = lin.weight.detach().numpy()
    P.remove_parametrizations(lin, "weight")
    assert type(lin) is nn.Linear and isinstance(lin.weight, nn.Parameter) and lin.weight is param
    np.testing.assert_array_equal(lin.weight.detach().numpy(), value)
    assert list(lin.state_dict()) == ["bias", "weight"]
    P.remove_parametrizations(other, "weight", leave_parametrized=False)
    np.testing.assert_allclose(other.weight.detach().numpy(), np.eye(3) * 2)


def test_assignment_without_right_inverse_and_errors():
    lin = nn.Linear(3, 3)
    P.register_parametrization(lin, "weight", Symmetric())
    with pytest.raises(RuntimeError, match=r"\[parametrize\].*right_inverse"):
        lin.weight = musa.eye(3)
    with pytest.raises(ValueError, match=r"\[register_parametrization\].*'nope'"):
        P.register_parametrization(lin, "nope", Symmetric())
    with pytest.raises(ValueError, match=r"\[register_parametrization\] the parametrization must keep"):
        P.register_parametrization(nn.Linear(3, 2), "weight", Transpose())
    with pytest.raises(TypeError, match=r"\[register_parametrization\] parametrization must be a Module"):
        P.register_parametrization(nn.Linear(3, 3), "weight", lambda x: x)
    with pytest.raises(ValueError, match=r"\[remove_parametrizations\]"):
        P.remove_parametrizations(nn.Linear(2, 2), "weight")


def test_symmetric_matches_torch_and_trains_the_same():
    torch.manual_seed(0)
    t = torch.nn.Linear(4, 4).double()
    m = nn.Linear(4, 4).double()
    m.load_state_dict({k: musa.tensor(v.numpy()) for k, v in t.state_dict().items()})
    torch.nn.utils.parametrize.register_parametrization(t, "weight", TSymmetric())
    P.register_parametrization(m, "weight", Symmetric())
    x = np.random.default_rng(0).normal(size=(5, 4))
    ot, om = torch.optim.SGD(t.parameters(), lr=0.1), musa.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(3):
        ot.zero_grad(), om.zero_grad()
        t(torch.tensor(x)).pow(2).sum().backward()
        m(musa.tensor(x)).pow(2).sum().backward()
        ot.step(), om.step()
    for (k, a), (k2, b) in zip(m.state_dict().items(), t.state_dict().items()):
        assert k == k2
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


@pytest.mark.parametrize("shape,omap", [((4, 4), None), ((4, 4), "cayley"), ((6, 3), None),
                                        ((3, 6), "householder"), ((5, 2), "matrix_exp")])
def test_orthogonal(shape, omap):
    musa.manual_seed(0)
    lin = nn.Linear(shape[1], shape[0]).double()
    w0 = lin.weight.detach().numpy().copy()
    PZ.orthogonal(lin, orthogonal_map=omap)
    w = lin.weight.detach().numpy()
    small = min(shape)
    gram = w @ w.T if shape[0] <= shape[1] else w.T @ w
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-12)
    if shape[0] == shape[1]:  # initialised to the weight's orthogonalisation: Q of QR with R's diagonal > 0
        q, r = np.linalg.qr(w0)
        np.testing.assert_allclose(w, q * np.sign(np.diag(r)), atol=1e-12)
    # stays orthogonal through training steps
    opt = musa.optim.SGD(lin.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        lin(musa.randn(8, shape[1], dtype=musa.float64)).pow(2).sum().backward()
        opt.step()
    w = lin.weight.detach().numpy()
    gram = w @ w.T if shape[0] <= shape[1] else w.T @ w
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-12)
    keys = list(lin.state_dict())
    assert "parametrizations.weight.original" in keys and "parametrizations.weight.0.base" in keys


def test_orthogonal_maps_match_torch():
    # the same original X and base give torch's Q for each map
    rng = np.random.default_rng(3)
    for shape, omap in (((4, 4), "matrix_exp"), ((4, 4), "cayley"), ((5, 3), "householder"),
                        ((3, 5), "householder")):
        X = rng.normal(size=shape)
        tl = torch.nn.Linear(shape[1], shape[0]).double()
        torch.nn.utils.parametrizations.orthogonal(tl, orthogonal_map=omap, use_trivialization=False)
        ml = nn.Linear(shape[1], shape[0]).double()
        PZ.orthogonal(ml, orthogonal_map=omap, use_trivialization=False)
        with torch.no_grad(), musa.no_grad():
            tl.parametrizations.weight.original.copy_(torch.tensor(X))
            ml.parametrizations.weight.original.copy_(musa.tensor(X))
        np.testing.assert_allclose(ml.weight.detach().numpy(), tl.weight.detach().numpy(), atol=1e-12)
    with pytest.raises(ValueError, match=r"\[orthogonal\] orthogonal_map"):
        PZ.orthogonal(nn.Linear(3, 3), orthogonal_map="qr")
    with pytest.raises(ValueError, match=r"\[orthogonal\] Expected a matrix"):
        PZ.orthogonal(nn.Linear(3, 3), "bias")


def test_spectral_norm_against_torch():
    torch.manual_seed(0)
    for t, m in ((torch.nn.Linear(6, 4), nn.Linear(6, 4)),
                 (torch.nn.Conv2d(3, 5, 3), nn.Conv2d(3, 5, 3)),
                 (torch.nn.ConvTranspose2d(3, 5, 3), nn.ConvTranspose2d(3, 5, 3))):
        t, m = t.double(), m.double()
        m.load_state_dict({k: musa.tensor(v.numpy()) for k, v in t.state_dict().items()})
        torch.nn.utils.parametrizations.spectral_norm(t)
        PZ.spectral_norm(m)
        assert list(m.state_dict()) == list(t.state_dict())
        # the same power-iteration vectors give the same weight
        with torch.no_grad(), musa.no_grad():
            for k in ("_u", "_v"):
                getattr(m.parametrizations.weight[0], k).copy_(
                    musa.tensor(getattr(t.parametrizations.weight[0], k).numpy()))
        t.eval(), m.eval()
        np.testing.assert_allclose(m.weight.detach().numpy(), t.weight.detach().numpy(), rtol=1e-12)
        t.train(), m.train()
        for _ in range(5):  # each read in training takes a power-iteration step, in both
            np.testing.assert_allclose(m.weight.detach().numpy(), t.weight.detach().numpy(), rtol=1e-10)
        for _ in range(300):  # it converges: the result's largest singular value is 1
            w = m.weight.detach().numpy()
        mat = w.transpose(1, 0, *range(2, w.ndim)) if isinstance(m, nn.ConvTranspose2d) else w
        np.testing.assert_allclose(np.linalg.svd(mat.reshape(mat.shape[0], -1), compute_uv=False)[0], 1,
                                   rtol=1e-8)
    with pytest.raises(ValueError, match=r"\[spectral_norm\] Expected n_power_iterations"):
        PZ.spectral_norm(nn.Linear(3, 3), n_power_iterations=0)


def test_householder_product_against_torch():
    rng = np.random.default_rng(0)
    A, tau = rng.normal(size=(2, 5, 3)), rng.uniform(0.5, 1.5, size=(2, 3))
    for k in (3, 2, 0):
        np.testing.assert_allclose(
            musa.linalg.householder_product(musa.tensor(A), musa.tensor(tau[:, :k])).numpy(),
            torch.linalg.householder_product(torch.tensor(A), torch.tensor(tau[:, :k])).numpy(), atol=1e-14)
    a = musa.tensor(A[0], requires_grad=True)
    t = musa.tensor(tau[0], requires_grad=True)
    assert musa.autograd.gradcheck(musa.linalg.householder_product, (a, t))
    with pytest.raises(ValueError, match=r"\[householder_product\] A must have at least as many rows"):
        musa.linalg.householder_product(musa.tensor(A[0].T), musa.tensor(tau[0]))
    with pytest.raises(ValueError, match=r"\[householder_product\] tau must be"):
        musa.linalg.householder_product(musa.tensor(A), musa.tensor(tau[0]))


def test_set_on_a_parameter_under_no_grad():
    # what register_parametrization relies on: the same Parameter object takes new
    # data, keeping requires_grad, only under no_grad
    p = nn.Parameter(musa.zeros(2))
    with pytest.raises(RuntimeError, match=r"\[Tensor.set_\] a leaf Variable"):
        p.set_(musa.ones(3))
    with musa.no_grad():
        p.set_(musa.ones(3))
    assert isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf and p.shape == (3,)
    (p * 2).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, 2.0, 2.0])


def test_a_parametrization_of_several_tensors_against_torch():
    """right_inverse returning a sequence: original0, original1, ... (torch
    1.13 has the mechanism; the script's lines must print the same)."""
    import subprocess
    import sys
    script = r'''
import sys, importlib, numpy as np
lib = importlib.import_module(sys.argv[1]); nn = importlib.import_module(sys.argv[1] + ".nn")
P = importlib.import_module(sys.argv[1] + ".nn.utils.parametrize")
class Split(nn.Module):
    def forward(self, a, b): return a + b
    def right_inverse(self, w): return (w * 0.25, w * 0.75)
m = nn.Linear(3, 2)
with lib.no_grad():
    m.weight.copy_(lib.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))); m.bias.zero_()
P.register_parametrization(m, "weight", Split())
print(sorted(k for k in m.state_dict()), m.weight.tolist())
print(m.parametrizations.weight.original0.tolist(), m.parametrizations.weight.original1.requires_grad)
m(lib.ones(1, 3)).sum().backward(); print(m.parametrizations.weight.original0.grad.tolist())
m.weight = lib.ones(2, 3) * 4; print(m.parametrizations.weight.original1.tolist())
try: P.remove_parametrizations(m, "weight", leave_parametrized=False)
except ValueError: print("ValueError")
P.remove_parametrizations(m, "weight")
print(sorted(k for k, _ in m.named_parameters()), m.weight.tolist(), type(m.weight).__name__)
'''
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    outs = [subprocess.run([sys.executable, "-c", script, lib], capture_output=True, text=True,
                           env=env, check=True).stdout for lib in ("musa", "torch")]
    assert outs[0] == outs[1] and outs[0].count("\n") == 6


@pytest.mark.parametrize("dim", [0, 1, None, -1])
def test_weight_norm_parametrization_matches_the_hook_form(dim):
    from musa.nn.utils import parametrizations, weight_norm
    musa.manual_seed(0)
    a = nn.Conv2d(3, 4, 3)
    b = copy.deepcopy(a)
    parametrizations.weight_norm(a, dim=dim)
    weight_norm(b, dim=dim)
    p = a.parametrizations.weight
    assert sorted(n for n, _ in a.named_parameters()) == [
        "bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    np.testing.assert_allclose(p.original0.detach().numpy(), b.weight_g.detach().numpy())
    np.testing.assert_allclose(p.original1.detach().numpy(), b.weight_v.detach().numpy())
    x = musa.randn(2, 3, 6, 6)
    ya, yb = a(x), b(x)
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-6, atol=1e-6)
    ya.square().sum().backward()
    yb.square().sum().backward()
    np.testing.assert_allclose(p.original0.grad.numpy(), b.weight_g.grad.numpy(), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(p.original1.grad.numpy(), b.weight_v.grad.numpy(), rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(ValueError, match=r"\[weight_norm\] .*'nothing'"):
        parametrizations.weight_norm(nn.Linear(2, 2), name="nothing")
