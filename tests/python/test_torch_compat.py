"""torch's older and smaller names (musa/_torch_compat.py) against torch:
svd and qr with their older conventions, pinverse, nuclear_norm,
frobenius_norm, put, index_reduce, histogram, nextafter, scalar_tensor,
empty_strided, asarray, and the Tensor methods."""
import math
import warnings

import numpy as np
import pytest
import torch

import musa

RNG = np.random.default_rng(5)


def close(m, t, tol=1e-12):
    np.testing.assert_allclose(np.asarray(m.tolist()), np.asarray(t.tolist()), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 4, 4)])
def test_svd_qr_pinverse_older_conventions(shape):
    a = RNG.normal(size=shape)
    for some in (True, False):
        U, S, V = musa.svd(musa.tensor(a), some)
        tU, tS, tV = torch.svd(torch.tensor(a), some)
        close(S, tS)
        # signs are arbitrary: compare U diag(S) V^T and the shapes
        assert U.shape == tuple(tU.shape) and V.shape == tuple(tV.shape)
        k = min(shape[-2:])
        rec = (U[..., :k] * S.unsqueeze(-2)) @ V[..., :k].transpose(-2, -1)
        close(rec, torch.tensor(a))
        Q, R = musa.qr(musa.tensor(a), some)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch: qr is deprecated
            tQ, tR = torch.qr(torch.tensor(a), some)
        assert Q.shape == tuple(tQ.shape) and R.shape == tuple(tR.shape)
        close(Q @ R, torch.tensor(a))
    U, S, V = musa.tensor(a).svd(compute_uv=False)
    tU, tS, tV = torch.tensor(a).svd(compute_uv=False)
    close(S, tS)
    assert U.tolist() == tU.tolist() and V.tolist() == tV.tolist()  # zeros, as torch's
    assert type(musa.svd(musa.tensor(a))).__name__ == "svd"
    close(musa.pinverse(musa.tensor(a)), torch.pinverse(torch.tensor(a)), 1e-10)
    close(musa.tensor(a).pinverse(), torch.tensor(a).pinverse(), 1e-10)


def test_norms():
    a = RNG.normal(size=(3, 4))
    close(musa.nuclear_norm(musa.tensor(a)), torch.nuclear_norm(torch.tensor(a)))
    close(musa.nuclear_norm(musa.tensor(a), True), torch.nuclear_norm(torch.tensor(a), True))
    b = RNG.normal(size=(2, 3, 4))
    close(musa.nuclear_norm(musa.tensor(b), (1, 2)), torch.nuclear_norm(torch.tensor(b), (1, 2)))
    close(musa.frobenius_norm(musa.tensor(b)), torch.frobenius_norm(torch.tensor(b)))
    close(musa.frobenius_norm(musa.tensor(b), (0, 2), True),
          torch.frobenius_norm(torch.tensor(b), (0, 2), True))


def test_put_and_index_reduce():
    t = np.zeros((2, 3))
    idx, src = [0, 5, -1], np.array([9.0, 8.0, 7.0])
    close(musa.put(musa.tensor(t), musa.tensor(idx), musa.tensor(src)),
          torch.put(torch.tensor(t), torch.tensor(idx), torch.tensor(src)))
    two = np.array([1.0, 2.0])
    close(musa.tensor(t).put(musa.tensor([0, 0]), musa.tensor(two), accumulate=True),
          torch.tensor(t).put(torch.tensor([0, 0]), torch.tensor(two), accumulate=True))
    m = musa.tensor(t)
    assert m.put_(musa.tensor([1]), musa.tensor([4.0])) is m and m.tolist()[0][1] == 4.0
    with pytest.raises(IndexError, match=r"\[put\] index out of range"):
        musa.put(musa.tensor(t), musa.tensor([6]), musa.tensor([1.0]))
    x = RNG.normal(size=(3, 2))
    s = RNG.normal(size=(4, 2))
    index = [0, 0, 2, 0]
    for red in ("prod", "mean", "amax", "amin"):
        for inc in (True, False):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch: index_reduce is in beta
                want = torch.index_reduce(torch.tensor(x), 0, torch.tensor(index),
                                          torch.tensor(s), red, include_self=inc)
            close(musa.index_reduce(musa.tensor(x), 0, musa.tensor(index), musa.tensor(s), red,
                                    include_self=inc), want)
    y = musa.tensor(x)
    y.index_reduce_(1, musa.tensor([1, 1]), musa.tensor(x), "amax")
    assert y[:, 1].tolist() == np.maximum(x[:, 1], x.max(1)).tolist()
    with pytest.raises(musa.InvalidArgumentError, match=r"\[index_reduce\] reduce must be"):
        musa.index_reduce(musa.tensor(x), 0, musa.tensor(index), musa.tensor(s), "sum")


def test_histogram_equals_torchs():
    x = np.array([0.1, 0.2, 0.3, 0.7, 1.0, -3.0], dtype=np.float32)
    for bins, kw in ((4, {}), (3, {"range": (0.0, 0.9)}), (5, {"range": (-4.0, 2.0)}),
                     (torch.tensor([0.0, 0.25, 0.5, 1.0]), {}),
                     (2, {"weight": np.arange(6.0, dtype=np.float32), "density": True})):
        tk = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        mk = {k: musa.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        mb = musa.tensor(bins.numpy()) if isinstance(bins, torch.Tensor) else bins
        got, want = musa.histogram(musa.tensor(x), mb, **mk), torch.histogram(torch.tensor(x),
                                                                             bins, **tk)
        close(got.hist, want.hist, 1e-6), close(got.bin_edges, want.bin_edges, 1e-6)
    got = musa.tensor([2.0, 2.0, 2.0]).histogram(4)  # constant: widened by 1/2 each side
    assert got.bin_edges.tolist() == [1.5, 1.75, 2.0, 2.25, 2.5] and got.hist.tolist()[2] == 3
    with pytest.raises(musa.InvalidArgumentError, match=r"\[histogram\] range \[nan, nan\] is "
                                                        r"not finite"):
        musa.histogram(musa.tensor([1.0, math.nan]), 2)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[histogram\] bin edges must increase"):
        musa.histogram(musa.tensor([1.0, 2.0]), musa.tensor([2.0, 1.0, 3.0]))  # (fuzz seed 8868)
    with pytest.raises(musa.InvalidTypeError, match=r"\[histogram\] expected a floating point"):
        musa.histogram(musa.tensor([1, 2]), 2)


@pytest.mark.parametrize("dt, tdt", [(musa.float32, torch.float32), (musa.float64, torch.float64)])
def test_nextafter_equals_torchs(dt, tdt):
    a = [1.0, 0.0, -1.0, 0.0, 2.5, -0.0, math.inf, -math.inf, math.nan, 1.0, 3.0]
    b = [2.0, -1.0, -2.0, 1.0, 2.5, 1.0, 0.0, 0.0, 1.0, math.nan, -math.inf]
    got = musa.nextafter(musa.tensor(a, dtype=dt), musa.tensor(b, dtype=dt)).tolist()
    want = torch.nextafter(torch.tensor(a, dtype=tdt), torch.tensor(b, dtype=tdt)).tolist()
    assert np.array_equal(np.array(got), np.array(want), equal_nan=True)
    x = musa.tensor([1.0], dtype=dt)
    x.nextafter_(musa.tensor([2.0], dtype=dt))
    assert x.tolist() == torch.tensor([1.0], dtype=tdt).nextafter(torch.tensor([2.0],
                                                                              dtype=tdt)).tolist()


def test_scalar_tensor_empty_strided_asarray():
    s = musa.scalar_tensor(3)
    assert s.dtype == musa.float32 and s.ndim == 0 and float(s) == 3.0
    assert musa.scalar_tensor(2, dtype=musa.int64).dtype == musa.int64
    e = musa.empty_strided((2, 3), (1, 2))
    assert e.shape == (2, 3) and e.stride() == (1, 2)
    assert musa.empty_strided((0, 4), (4, 1)).shape == (0, 4)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[empty_strided\] size"):
        musa.empty_strided((2, 3), (1,))
    t = musa.ones(2)
    assert musa.asarray(t) is t and musa.asarray(t, copy=True) is not t
    assert musa.asarray(t, dtype=musa.float64).dtype == musa.float64
    assert musa.asarray([1, 2]).tolist() == [1, 2] and float(musa.asarray(3.5)) == 3.5
    with pytest.raises(ValueError, match=r"\[asarray\] copy=False, but converting"):
        musa.asarray(t, dtype=musa.float64, copy=False)
