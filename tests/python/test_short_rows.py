"""Softmax, log-softmax and cross-entropy over rows shorter than a vector
(fewer than 16 classes in float32, 8 in float64), which their kernels run a
block of rows at a time: against float64 NumPy, with -inf logits, rows of
-inf, ignored targets, label smoothing and per-sample gradients, over
row counts that end a block part way."""
import numpy as np
import pytest

import musa
import musa.nn.functional as F
from musa import _C

RNG = np.random.default_rng(11)


def logits(rows, classes, dtype):
    x = (RNG.standard_normal((rows, classes)) * 4).astype(dtype)
    x[1, 0] = -np.inf
    x[3, :] = -np.inf  # a row of -inf: NaN, as softmax over nothing gives
    return x


def ref_softmax(x):
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.max(x, 1, keepdims=True)
        m = np.where(np.isinf(m), 0, m)
        e = np.exp(x - m)
        return e / e.sum(1, keepdims=True), (x - m) - np.log(e.sum(1, keepdims=True))


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-6), (np.float64, 1e-14)])
@pytest.mark.parametrize("rows,classes", [(300, 9), (64, 10), (5, 1), (33, 2), (40, 7), (29, 15)])
def test_softmax_and_log_softmax(rows, classes, dtype, tol):
    x = logits(rows, classes, dtype)
    y = _C.softmax(musa.tensor(x), 1).numpy()
    ly = _C.log_softmax(musa.tensor(x), 1).numpy()
    ry, rl = ref_softmax(x)
    np.testing.assert_allclose(y, ry, rtol=tol * 4, atol=tol)
    np.testing.assert_allclose(ly, rl, rtol=tol * 4, atol=tol * 8)
    assert np.isnan(y[3]).all() and np.isnan(ly[3]).all()


@pytest.mark.parametrize("dtype,tol", [(np.float32, 3e-6), (np.float64, 1e-13)])
@pytest.mark.parametrize("eps", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("rows,classes", [(300, 9), (45, 3), (7, 1)])
def test_cross_entropy_and_its_gradient(rows, classes, eps, reduction, dtype, tol):
    x = (RNG.standard_normal((rows, classes)) * 3).astype(dtype)
    t = RNG.integers(0, classes, rows)
    t[::5] = -100  # ignored
    xm = musa.tensor(x).requires_grad_()
    loss = F.cross_entropy(xm, musa.tensor(t), label_smoothing=eps, reduction=reduction)
    g = RNG.standard_normal(rows).astype(dtype) if reduction == "none" else np.array(1.0, dtype)
    loss.backward(musa.tensor(g) if reduction == "none" else None)

    p, lp = ref_softmax(x)
    keep = t != -100
    onehot = np.zeros_like(p)
    onehot[np.arange(rows)[keep], t[keep]] = 1
    target = (1 - eps) * onehot + eps / classes
    per = np.where(keep, -(target * lp).sum(1), 0.0)
    gs = g.astype(np.float64) * np.ones(rows)
    if reduction == "mean":
        want, gs = per.sum() / keep.sum(), gs / keep.sum()
    elif reduction == "sum":
        want = per.sum()
    else:
        want = per
    grad = np.where(keep[:, None], (p - target) * gs[:, None], 0.0)
    np.testing.assert_allclose(loss.detach().numpy(), want, rtol=tol * 10, atol=tol)
    np.testing.assert_allclose(xm.grad.numpy(), grad, rtol=tol * 10, atol=tol)


@pytest.mark.parametrize("classes", [2, 3, 10])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_rows_result_does_not_depend_on_where_it_sits(classes, dtype):
    # short rows go through exp a block of rows at a time; a block's last
    # vector was a tail loop, whose exp could round differently, and where a
    # block ends depends on the thread's range (or a plan's tile): rows
    # shifted by a few places, or compiled, must give the same bits
    musa.manual_seed(0)
    x = musa.randn(70001, classes, dtype=getattr(musa, dtype)) * 3
    t = musa.randint(0, classes, (70001,))
    for shift in [1, 3, 7]:
        for f in [lambda v: F.softmax(v, -1), lambda v: F.log_softmax(v, -1)]:
            assert np.array_equal(f(x)[shift:].numpy(), f(x[shift:]).numpy())
        whole = F.cross_entropy(x, t, reduction="none")[shift:]
        assert np.array_equal(whole.numpy(), F.cross_entropy(x[shift:], t[shift:],
                                                              reduction="none").numpy())
    c = musa.jit(lambda v: F.softmax(v * 1.5, -1))
    c(x)
    assert np.array_equal(c(x).numpy(), F.softmax(x * 1.5, -1).numpy())
