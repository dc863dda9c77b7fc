"""Tensor API breadth (issue 17): view(dtype), unfold, bool extrema,
sort(stable=), the NumPy keyword spellings (axis=, keepdims=), and the
functions written over the op table, each against torch."""
import numpy as np
import pytest
import torch

import musa

RNG = np.random.default_rng(1717)


def arr(*shape, lo=-2.0, hi=2.0, dtype=np.float64):
    return RNG.uniform(lo, hi, shape).astype(dtype)


def close(m, t, tol=1e-6):
    m = m.detach().numpy() if isinstance(m, musa.Tensor) else np.asarray(m)
    t = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    assert m.shape == t.shape, (m.shape, t.shape)
    if m.dtype == np.bool_ or np.issubdtype(m.dtype, np.integer):
        np.testing.assert_array_equal(m, t)
    else:
        np.testing.assert_allclose(m, t, rtol=tol, atol=tol)


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("float32", "uint8"), ("float32", "float64"),
                                     ("float64", "int8"), ("int64", "float32"), ("float32", "bfloat16")])
def test_view_dtype_matches_torch(src, dst):
    a = arr(3, 8).astype(np.float64)
    m = musa.tensor(a).to(getattr(musa, src))
    t = torch.tensor(a).to(getattr(torch, src))
    mv, tv = m.view(getattr(musa, dst)), t.view(getattr(torch, dst))
    assert tuple(mv.shape) == tuple(tv.shape)
    close(mv.float(), tv.float())
    close(m[:, 2:6].view(dtype=getattr(musa, dst)).float(), t[:, 2:6].view(dtype=getattr(torch, dst)).float())


def test_view_dtype_shares_memory_and_has_no_gradient():
    x = musa.ones(4)
    x.view(musa.int32)[1] = 0
    assert x.tolist() == [1.0, 0.0, 1.0, 1.0]
    g = musa.randn(4, requires_grad=True)
    assert not g.view(musa.int32).requires_grad
    assert g.view(musa.float32).requires_grad  # same dtype: an ordinary view


@pytest.mark.parametrize("bad,match", [
    (lambda: musa.randn(2, 5)[:, 1:4].view(musa.float64), "multiple of 2"),
    (lambda: musa.randn(4, 4)[:, 1:3].view(musa.float64), "storage offset"),
    (lambda: musa.randn(3, 4).t().view(musa.int8), "stride 1"),
    (lambda: musa.tensor(1.0).view(musa.float64), "0-d"),
])
def test_view_dtype_errors(bad, match):
    with pytest.raises(RuntimeError, match=match):
        bad()


def test_view_dtype_in_a_compiled_function_falls_back_to_eager():
    f = musa.jit(lambda x: (x * 2).view(musa.int32) + 1)
    x = musa.randn(5)
    with pytest.warns(RuntimeWarning, match="view\\(dtype\\)"):
        out = f(x)
    close(out, (torch.tensor(x.numpy()) * 2).view(torch.int32) + 1)


@pytest.mark.parametrize("args", [(2, 2, 1), (1, 2, 2), (0, 1, 1), (2, 4, 3), (-1, 0, 1), (1, 3, 5)])
def test_unfold_matches_torch(args):
    a = arr(2, 3, 4)
    close(musa.tensor(a).unfold(*args), torch.tensor(a).unfold(*args))


def test_unfold_is_a_view_with_gradients():
    a = arr(3, 7)
    m, t = musa.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (m.t().unfold(0, 3, 2) ** 2).sum().backward()
    (t.t().unfold(0, 3, 2) ** 2).sum().backward()
    close(m.grad, t.grad)
    x = musa.zeros(6)
    x.unfold(0, 2, 2)[1, 0] = 5
    assert x.tolist() == [0, 0, 5, 0, 0, 0]
    close(musa.tensor(5.0).unfold(0, 1, 1), torch.tensor(5.0).unfold(0, 1, 1))
    with pytest.raises(RuntimeError, match="size 5 must be in"):
        musa.zeros(3).unfold(0, 5, 1)
    with pytest.raises(RuntimeError, match="step must be > 0"):
        musa.zeros(3).unfold(0, 1, 0)


def test_bool_extrema_are_any_and_all():
    b = np.array([[True, False, True], [False, False, True]])
    m, t = musa.tensor(b), torch.tensor(b)
    close(m.max(), t.max())
    close(m.min(), t.min())
    for dim in (0, 1):
        mv, mi = m.max(dim)
        tv, ti = t.max(dim)
        close(mv, tv)
        close(mi, ti)
        close(m.min(dim).values, t.min(dim).values)
        close(m.amax(dim), t.amax(dim))
        close(m.amin(dim, keepdim=True), t.amin(dim, keepdim=True))
    assert m.max().dtype == musa.bool
    assert m.argmax().item() == 0


def test_sort_stable_is_accepted():
    a = RNG.integers(0, 3, 20).astype(np.float64)
    for descending in (False, True):
        mv, mi = musa.tensor(a).sort(stable=True, descending=descending)
        tv, ti = torch.tensor(a).sort(stable=True, descending=descending)
        close(mv, tv)
        close(mi, ti)
    close(musa.sort(musa.tensor(a), stable=False)[0], torch.sort(torch.tensor(a), stable=False)[0])


@pytest.mark.parametrize("name", ["sum", "mean", "var", "std", "amax", "prod", "logsumexp"])
def test_numpy_keyword_spellings(name):
    a = arr(3, 4)
    mf, tf = getattr(musa, name), getattr(torch, name)
    close(mf(musa.tensor(a), axis=1), tf(torch.tensor(a), axis=1))
    close(getattr(musa.tensor(a), name)(axis=0, keepdims=True), getattr(torch.tensor(a), name)(axis=0, keepdims=True))
    with pytest.raises(TypeError, match="multiple values"):
        mf(musa.tensor(a), dim=1, axis=1)


def test_pow_gradient_keeps_a_float64_number_exponent_exact():
    # the exponent minus one was computed in float32 (number - number), so
    # d/dx x^(1/3) in float64 was off by ~4e-8 relative
    a = np.array([0.5, 1.7, 2.9])
    m = musa.tensor(a, requires_grad=True)
    m.pow(1 / 3).sum().backward()
    np.testing.assert_allclose(m.grad.numpy(), (1 / 3) * a ** (1 / 3 - 1), rtol=1e-15)


BOOL_INDEX_CASES = [
    lambda L, x: x[[0], False],  # (fuzz) was (1, 0, 4): False beside a tensor index broadcasts as []
    lambda L, x: x[True, L.tensor([False, True, True])],  # (fuzz) was (1, 2, 4)
    lambda L, x: x[True], lambda L, x: x[False], lambda L, x: x[:, True, [1, 3]],
    lambda L, x: x[True, [0, 2], True], lambda L, x: x[L.tensor(True)], lambda L, x: x[L.tensor(False), 1],
    lambda L, x: x[L.tensor([0, 2]), L.tensor(True)], lambda L, x: x[L.tensor(1), True],
]
# the same indices for assignment (case number: the index, from the library)
BOOL_INDEX_SETS = {
    0: lambda L: ([0], False), 1: lambda L: (True, L.tensor([False, True, True])), 2: lambda L: True,
    3: lambda L: False, 6: lambda L: L.tensor(True), 7: lambda L: (L.tensor(False), 1),
}


@pytest.mark.parametrize("case", range(len(BOOL_INDEX_CASES)))
def test_bool_scalar_indices_beside_tensor_indices_broadcast_as_numpy_does(case):
    a = np.arange(12).reshape(3, 4)
    index = BOOL_INDEX_CASES[case]
    close(index(musa, musa.tensor(a)), index(torch, torch.tensor(a)))
    if case in BOOL_INDEX_SETS:  # assignment through the same index
        m, t = musa.tensor(a), torch.tensor(a)
        value = np.arange(index(torch, t).numel()).reshape(tuple(index(torch, t).shape)) + 100
        m[BOOL_INDEX_SETS[case](musa)] = musa.tensor(value)
        t[BOOL_INDEX_SETS[case](torch)] = torch.tensor(value)
        close(m, t)


def test_bool_index_shape_mismatch_is_an_index_error():
    with pytest.raises(IndexError, match="could not be broadcast together"):
        musa.zeros(3, 4)[[0, 1], None, False]
