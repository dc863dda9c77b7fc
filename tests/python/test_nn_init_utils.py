"""musa.nn.init and musa.nn.utils: initialisations (bounds, statistics,
in-place contract, errors), gradient clipping against torch, flat vectors."""
import math

import numpy as np
import pytest

import musa
import musa.nn as nn
from musa.nn import init


def test_calculate_gain():
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("conv2d") == 1
    assert init.calculate_gain("sigmoid") == 1 and init.calculate_gain("selu") == 0.75
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    with pytest.raises(ValueError, match="unsupported nonlinearity 'swish'"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="not a valid number"):
        init.calculate_gain("leaky_relu", "x")


def test_fan_in_and_fan_out():
    assert init._calculate_fan_in_and_fan_out(musa.empty(5, 3)) == (3, 5)
    assert init._calculate_fan_in_and_fan_out(musa.empty(8, 4, 3, 2)) == (24, 48)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(musa.empty(5))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_uniform_(musa.empty(3, 3), mode="fan_avg")


def _stats(t):
    a = t.detach().numpy().ravel()
    return a.min(), a.max(), a.mean(), a.std()


def test_uniform_normal_constant_in_place_on_parameters():
    p = nn.Parameter(musa.empty(200, 100))
    assert init.uniform_(p, -2.0, 3.0) is p and p.requires_grad and p.grad_fn is None
    lo, hi, mean, _ = _stats(p)
    assert -2.0 <= lo < -1.9 and 2.9 < hi <= 3.0 and abs(mean - 0.5) < 0.05
    assert init.normal_(p, 1.0, 0.5) is p
    _, _, mean, std = _stats(p)
    assert abs(mean - 1.0) < 0.01 and abs(std - 0.5) < 0.01
    assert init.constant_(p, 0.25) is p and set(p.detach().numpy().ravel()) == {0.25}
    assert init.zeros_(p) is p and float(p.abs().sum()) == 0
    assert init.ones_(p) is p and float(p.sum()) == p.numel()


def test_eye():
    p = nn.Parameter(musa.empty(2, 3))
    assert init.eye_(p) is p and p.tolist() == [[1, 0, 0], [0, 1, 0]]
    with pytest.raises(ValueError, match="2 dimensions"):
        init.eye_(musa.empty(2, 2, 2))


def test_xavier_and_kaiming_statistics():
    musa.manual_seed(0)
    w = musa.empty(300, 200)
    a = math.sqrt(6 / 500)
    lo, hi, _, std = _stats(init.xavier_uniform_(w, gain=2.0))
    assert -2 * a <= lo and hi <= 2 * a and abs(std - 2 * a / math.sqrt(3)) < 0.02 * a
    _, _, _, std = _stats(init.xavier_normal_(w))
    assert abs(std - math.sqrt(2 / 500)) < 0.02 * math.sqrt(2 / 500)
    bound = math.sqrt(2) * math.sqrt(3 / 200)
    lo, hi, _, _ = _stats(init.kaiming_uniform_(w, nonlinearity="relu"))
    assert -bound <= lo and hi <= bound and hi > 0.99 * bound
    _, _, _, std = _stats(init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu"))
    assert abs(std - math.sqrt(2 / 300)) < 0.02 * math.sqrt(2 / 300)
    assert init.kaiming_uniform_(musa.empty(0, 3)).numel() == 0


def test_orthogonal():
    musa.manual_seed(0)
    for shape in ((6, 4), (4, 6), (3, 2, 2)):
        w = init.orthogonal_(musa.empty(*shape), gain=2.0)
        m = w.reshape(shape[0], -1).numpy() / 2.0
        gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
        np.testing.assert_allclose(gram, np.eye(gram.shape[0]), atol=1e-5)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(musa.empty(3))


def test_initialisation_is_seeded():
    musa.manual_seed(5)
    a = nn.Linear(4, 4).weight.detach().numpy()
    musa.manual_seed(5)
    b = nn.Linear(4, 4).weight.detach().numpy()
    assert np.array_equal(a, b)


# ---- clipping ----

def _grads_pair(torch, seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (5,), (2, 2, 2)]
    values = [rng.standard_normal(s).astype(np.float32) * 3 for s in shapes]
    mp = [nn.Parameter(musa.zeros(*s)) for s in shapes]
    tp = [torch.nn.Parameter(torch.zeros(*s)) for s in shapes]
    for m, t, v in zip(mp, tp, values):
        m.grad, t.grad = musa.tensor(v), torch.tensor(v)
    return mp, tp


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 1e4])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    torch = pytest.importorskip("torch")
    mp, tp = _grads_pair(torch)
    mt = nn.utils.clip_grad_norm_(mp, max_norm, norm_type)
    tt = torch.nn.utils.clip_grad_norm_(tp, max_norm, norm_type)
    assert mt.ndim == 0 and mt.dtype == musa.float32
    np.testing.assert_allclose(mt.item(), tt.item(), rtol=1e-5)
    for m, t in zip(mp, tp):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_clip_grad_norm_edge_cases():
    p = nn.Parameter(musa.ones(3))
    assert nn.utils.clip_grad_norm_([p], 1.0).item() == 0.0  # no gradients
    p.grad = musa.tensor([3.0, 4.0, 0.0])
    assert nn.utils.clip_grad_norm_(p, 1.0).item() == pytest.approx(5.0)  # a single tensor
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8, 0.0], rtol=1e-5)
    p.grad = musa.tensor([float("nan"), 1.0, 0.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    assert math.isnan(nn.utils.clip_grad_norm_(p, 1.0).item())


def test_clip_grad_value_matches_torch():
    torch = pytest.importorskip("torch")
    mp, tp = _grads_pair(torch, seed=1)
    nn.utils.clip_grad_value_(mp, 1.5)
    torch.nn.utils.clip_grad_value_(tp, 1.5)
    for m, t in zip(mp, tp):
        np.testing.assert_array_equal(m.grad.numpy(), t.grad.numpy())


def test_parameters_to_vector_and_back():
    lin = nn.Linear(3, 2)
    vec = nn.utils.parameters_to_vector(lin.parameters())
    assert tuple(vec.shape) == (8,)
    np.testing.assert_array_equal(vec.detach().numpy()[:6], lin.weight.detach().numpy().ravel())
    (vec * 2).sum().backward()
    assert lin.bias.grad.tolist() == [2.0, 2.0]
    new = musa.arange(8.0)
    weight = lin.weight
    nn.utils.vector_to_parameters(new, lin.parameters())
    assert lin.weight is weight and lin.weight.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert lin.bias.tolist() == [6, 7]
    with pytest.raises(TypeError, match="expected musa.Tensor"):
        nn.utils.vector_to_parameters([1.0], lin.parameters())
    with pytest.raises(ValueError, match="does not hold the 8 elements"):
        nn.utils.vector_to_parameters(musa.zeros(7), lin.parameters())
