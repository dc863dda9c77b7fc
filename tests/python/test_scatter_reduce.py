"""scatter_reduce (function, method, in-place) against torch: every
reduction with and without include_self, float and integer dtypes, ties,
zeros and NaN, the gradients of input and src, compiled, and the errors."""
import numpy as np
import pytest
import torch

import musa

RNG = np.random.default_rng(53)
REDUCE = ["sum", "prod", "mean", "amax", "amin"]
pytestmark = pytest.mark.filterwarnings("ignore:scatter_reduce\\(\\) is in beta")


def data(dtype, dim):
    if dtype == "int64":
        x, src = RNG.integers(-5, 5, (4, 5)), RNG.integers(-5, 5, (6, 5))
    else:
        x, src = RNG.standard_normal((4, 5)).astype(dtype), RNG.standard_normal((6, 5)).astype(dtype)
    idx = RNG.integers(0, 3, (6, 5))
    if dim == 1:  # the same along the other dim
        x, src, idx = x.T.copy(), src.T.copy(), idx.T.copy()
    return x, src, idx


@pytest.mark.parametrize("reduce", REDUCE)
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
@pytest.mark.parametrize("dim", [0, 1])
def test_values_against_torch(reduce, include_self, dtype, dim):
    x, src, idx = data(dtype, dim)
    m = musa.scatter_reduce(musa.tensor(x), dim, musa.tensor(idx), musa.tensor(src), reduce,
                            include_self=include_self)
    t = torch.scatter_reduce(torch.tensor(x), dim, torch.tensor(idx), torch.tensor(src), reduce,
                             include_self=include_self)
    assert str(m.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(m.numpy(), t.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reduce", REDUCE)
@pytest.mark.parametrize("include_self", [True, False])
def test_gradients_against_torch(reduce, include_self):
    x, src, idx = data("float64", 0)
    if reduce in ("amax", "amin"):  # a tie between two src values, and one with x
        src[0, 0], idx[0, 0] = src[1, 0], idx[1, 0]
        if include_self:  # (without x, torch still counts x's tie: see the next test)
            x[idx[2, 1], 1] = src[2, 1]
    if reduce == "prod":  # one zero at a position, and two at another
        src[2, 1] = 0.0
        src[0, 3], src[1, 3], idx[0, 3], idx[1, 3] = 0.0, 0.0, 1, 1
    w = RNG.standard_normal((4, 5))
    mx, ms = musa.tensor(x, requires_grad=True), musa.tensor(src, requires_grad=True)
    tx, ts = torch.tensor(x, requires_grad=True), torch.tensor(src, requires_grad=True)
    m = musa.scatter_reduce(mx, 0, musa.tensor(idx), ms, reduce, include_self=include_self)
    t = torch.scatter_reduce(tx, 0, torch.tensor(idx), ts, reduce, include_self=include_self)
    (m * musa.tensor(w)).sum().backward()
    (t * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ms.grad.numpy(), ts.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_without_self_a_tie_with_x_takes_no_share():
    # include_self=False: x does not take part, so a src value equal to x at
    # its position gets the whole gradient; PyTorch 1.13 still counts x's
    # tie when it shares the gradient out, then drops x's share (half lost)
    x = musa.tensor([3.0, 0.0])
    src = musa.tensor([3.0, 1.0], requires_grad=True)
    y = musa.scatter_reduce(x, 0, musa.tensor([0, 1]), src, "amax", include_self=False)
    y.sum().backward()
    assert src.grad.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax"])
def test_gradcheck(reduce):
    x = musa.tensor(RNG.uniform(0.5, 2, (3, 4)), requires_grad=True)
    src = musa.tensor(RNG.uniform(0.5, 2, (3, 4)), requires_grad=True)
    idx = musa.tensor(RNG.integers(0, 3, (3, 4)))
    assert musa.autograd.gradcheck(
        lambda a, b: musa.scatter_reduce(a, 0, idx, b, reduce, include_self=False), (x, src))


def test_nan_wins_amax_and_amin():
    x = np.array([np.nan, 1.0, 2.0])
    src, idx = np.array([5.0, np.nan, 7.0]), np.array([0, 1, 1])
    for reduce in ("amax", "amin"):
        m = musa.tensor(x).scatter_reduce(0, musa.tensor(idx), musa.tensor(src), reduce)
        t = torch.tensor(x).scatter_reduce(0, torch.tensor(idx), torch.tensor(src), reduce)
        np.testing.assert_array_equal(m.numpy(), t.numpy())


def test_method_in_place_and_compiled():
    x, src, idx = data("float32", 0)
    m = musa.tensor(x)
    r = m.scatter_reduce_(0, musa.tensor(idx), musa.tensor(src), "amax", include_self=False)
    t = torch.tensor(x).scatter_reduce_(0, torch.tensor(idx), torch.tensor(src), "amax",
                                        include_self=False)
    assert r is m
    np.testing.assert_array_equal(m.numpy(), t.numpy())

    def f(a, i, s):
        return musa.scatter_reduce(a, 0, i, s, "mean", include_self=False) * 2

    args = (musa.tensor(x), musa.tensor(idx), musa.tensor(src))
    np.testing.assert_array_equal(musa.jit(f)(*args).numpy(), f(*args).numpy())


def test_integer_mean_rounds_down_and_uint8_limits():
    x = np.array([7, 7], dtype=np.int64)
    src, idx = np.array([-2, 1, 4], dtype=np.int64), np.array([0, 0, 1])
    for inc in (True, False):
        m = musa.scatter_reduce(musa.tensor(x), 0, musa.tensor(idx), musa.tensor(src), "mean",
                                include_self=inc)
        t = torch.scatter_reduce(torch.tensor(x), 0, torch.tensor(idx), torch.tensor(src), "mean",
                                 include_self=inc)
        assert m.tolist() == t.tolist()
    big = np.array([2 ** 63 - 1, -2 ** 63, 5])  # int64's limits start amin and amax
    for reduce in ("amax", "amin"):
        m = musa.scatter_reduce(musa.tensor(big), 0, musa.tensor([0, 1, 2]), musa.tensor(big),
                                reduce, include_self=False)
        assert m.tolist() == big.tolist()
    u = np.array([10, 200], dtype=np.uint8)
    for reduce in ("amax", "amin"):
        m = musa.scatter_reduce(musa.tensor(u), 0, musa.tensor([1]), musa.tensor(u[:1]), reduce,
                                include_self=False)
        assert m.tolist() == [10, 10]


def test_errors_name_the_function():
    x, i = musa.zeros(3), musa.tensor([0, 1])
    with pytest.raises(ValueError, match=r"\[scatter_reduce\] reduce must be one of sum, mean, "
                                         r"prod, amax, amin, got 'max'"):
        musa.scatter_reduce(x, 0, i, musa.ones(2), "max")
    with pytest.raises(TypeError, match=r"\[scatter_reduce\] src must have input's dtype"):
        musa.scatter_reduce(x, 0, i, musa.ones(2, dtype=musa.float64), "sum")
    with pytest.raises(IndexError, match=r"\[scatter_amax\] index 5 is out of bounds for a dim "
                                         r"of size 3"):
        musa.scatter_reduce(x, 0, musa.tensor([5]), musa.ones(1), "amax")
    big = musa.ones(4, requires_grad=True)
    y = musa.scatter_reduce(musa.zeros(3), 0, i, big, "amax")
    with pytest.raises(NotImplementedError, match=r"\[scatter_reduce\] the gradient of src is "
                                                  r"implemented only for src of index's shape"):
        y.sum().backward()
