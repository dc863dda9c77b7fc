"""histogramdd against torch 1.13 (and histogram after its refactor)."""
import numpy as np
import pytest
import torch

import musa

RNG = np.random.default_rng(0)
X = RNG.normal(size=(200, 3))
W = RNG.uniform(size=200)


@pytest.mark.parametrize("kw", [dict(bins=4), dict(bins=[3, 4, 5]),
                                dict(bins=[2, 3, 4], range=[-1.0, 1.0, -2.0, 2.0, 0.0, 3.0]),
                                dict(bins=5, density=True), dict(bins=3, weight=True),
                                dict(bins=[2, 2, 2], weight=True, density=True)])
def test_histogramdd_against_torch(kw):
    mk, tk = dict(kw), dict(kw)
    if kw.get("weight"):
        mk["weight"], tk["weight"] = musa.tensor(W), torch.tensor(W)
    a, b = musa.histogramdd(musa.tensor(X), **mk), torch.histogramdd(torch.tensor(X), **tk)
    np.testing.assert_allclose(a.hist.numpy(), b.hist.numpy(), rtol=1e-13, atol=1e-17)
    assert len(a.bin_edges) == 3
    for e, f in zip(a.bin_edges, b.bin_edges):
        np.testing.assert_allclose(e.numpy(), f.numpy(), rtol=1e-15)
    h, _ = a
    assert tuple(h.shape) == tuple(b.hist.shape)


def test_histogramdd_edges_batches_and_errors():
    edges = [np.array([-3.0, 0, 3]), np.array([-1.0, 0, 0.5, 1]), np.array([-5.0, 5])]
    a = musa.histogramdd(musa.tensor(X), bins=[musa.tensor(e) for e in edges])
    b = torch.histogramdd(torch.tensor(X), bins=[torch.tensor(e) for e in edges])
    np.testing.assert_array_equal(a.hist.numpy(), b.hist.numpy())
    # (..., D): the leading dims are samples; a sample on the last edge counts in the last bin
    x = np.array([[[0.0, 1.0], [1.0, 1.0]], [[0.5, 0.0], [1.0, 0.0]]])
    np.testing.assert_array_equal(musa.histogramdd(musa.tensor(x), bins=2).hist.numpy(),
                                  torch.histogramdd(torch.tensor(x), bins=2).hist.numpy())
    np.testing.assert_array_equal(musa.histogramdd(musa.tensor(x), bins=2).hist.numpy(),
                                  np.histogramdd(x.reshape(-1, 2), bins=2)[0])
    with pytest.raises(ValueError, match=r"\[histogramdd\] bins must give one entry per dimension"):
        musa.histogramdd(musa.tensor(X), bins=[2, 3])
    with pytest.raises(ValueError, match=r"\[histogramdd\] range must hold 2 \* D = 6"):
        musa.histogramdd(musa.tensor(X), bins=2, range=[0.0, 1.0])
    with pytest.raises(ValueError, match=r"\[histogramdd\] weight must have 200"):
        musa.histogramdd(musa.tensor(X), weight=musa.ones(3))
    with pytest.raises(TypeError, match=r"\[histogramdd\] expected a floating point"):
        musa.histogramdd(musa.tensor([[1, 2]]))
    with pytest.raises(MemoryError, match=r"\[histogramdd\] D = 2199023255552 \(two edges a dim at least\)"):
        musa.histogramdd(musa.ones(1).expand(1, 1 << 41))  # every dim a pass: refused up front
    with pytest.raises(ValueError, match=r"\[histogramdd\] bins must be a positive int"):
        musa.histogramdd(musa.tensor(X), bins=0)
    # histogram still agrees with torch after sharing its binning with histogramdd
    v = X[:, 0]
    for kw in (dict(bins=7), dict(bins=4, range=(-1.0, 1.0), density=True)):
        np.testing.assert_allclose(musa.histogram(musa.tensor(v), **kw).hist.numpy(),
                                   torch.histogram(torch.tensor(v), **kw).hist.numpy(), rtol=1e-13)


def test_svd_and_pca_lowrank():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(2, 50, 4)) @ rng.normal(size=(2, 4, 30))  # a batch of rank-4 matrices
    musa.manual_seed(0)
    U, S, V = musa.svd_lowrank(musa.tensor(A), q=6)
    assert U.shape == (2, 50, 6) and S.shape == (2, 6) and V.shape == (2, 30, 6)
    np.testing.assert_allclose((U.numpy() * S.numpy()[:, None, :]) @ np.swapaxes(V.numpy(), -1, -2), A,
                               atol=1e-12)
    np.testing.assert_allclose(S.numpy()[:, :4], np.linalg.svd(A, compute_uv=False)[:, :4], rtol=1e-12)
    np.testing.assert_allclose(np.swapaxes(U.numpy(), -1, -2) @ U.numpy(), np.broadcast_to(np.eye(6), (2, 6, 6)),
                               atol=1e-12)
    # a wide matrix, and M subtracted first
    Mm = np.ones((30, 50))
    U, S, V = musa.svd_lowrank(musa.tensor(A[0].T + Mm), q=5, M=musa.tensor(Mm))
    np.testing.assert_allclose((U.numpy() * S.numpy()) @ V.numpy().T, A[0].T, atol=1e-12)
    # pca_lowrank centres the columns: its singular values are torch's
    P = A[0].T
    _, S, _ = musa.pca_lowrank(musa.tensor(P))
    _, tS, _ = torch.pca_lowrank(torch.tensor(P))
    np.testing.assert_allclose(S.numpy()[:4], tS.numpy()[:4], rtol=1e-12)
    with pytest.raises(ValueError, match=r"\[svd_lowrank\] q must be in \[1, min\(m, n\) = 30\]"):
        musa.svd_lowrank(musa.tensor(A[0]), q=31)
    with pytest.raises(ValueError, match=r"\[svd_lowrank\] A must be a floating matrix"):
        musa.svd_lowrank(musa.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"\[pca_lowrank\] q must be in"):
        musa.pca_lowrank(musa.tensor(P), q=100)
