"""Fractional max pooling (musa/nn/_functional_frac.py) against torch's,
given the same random samples: outputs, indices and input gradients."""
import numpy as np
import pytest
import torch

import musa
import musa.nn as nn
import musa.nn.functional as F

RNG = np.random.default_rng(21)

CASES_2D = [((2, 3, 11, 13), 3, {"output_size": (5, 6)}), ((3, 10, 10), 2, {"output_ratio": 0.5}),
            ((1, 2, 9, 7), (2, 3), {"output_size": 4}), ((2, 2, 5, 5), 2, {"output_size": 1}),
            ((1, 1, 6, 6), 3, {"output_size": (4, 4)})]


def run(nd, shape, k, kw):
    x = RNG.normal(size=shape)
    n = shape[0] if len(shape) == nd + 2 else 1
    s = RNG.uniform(size=(n, shape[-nd - 1], nd))
    mx, tx = musa.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    mf, tf = getattr(F, f"fractional_max_pool{nd}d"), getattr(torch.nn.functional,
                                                             f"fractional_max_pool{nd}d")
    m, mi = mf(mx, k, return_indices=True, _random_samples=musa.tensor(s), **kw)
    t, ti = tf(tx, k, return_indices=True, _random_samples=torch.tensor(s), **kw)
    assert m.tolist() == t.tolist() and mi.tolist() == ti.tolist()
    g = RNG.normal(size=tuple(t.shape))
    (gm,) = musa.autograd.grad((m * musa.tensor(g)).sum(), mx)
    (gt,) = torch.autograd.grad((t * torch.tensor(g)).sum(), tx)
    np.testing.assert_allclose(gm.numpy(), gt.numpy(), rtol=1e-15)


@pytest.mark.parametrize("case", range(len(CASES_2D)))
def test_fractional_max_pool2d_equals_torchs(case):
    run(2, *CASES_2D[case])


@pytest.mark.parametrize("shape, k, kw", [((2, 2, 7, 8, 9), 2, {"output_size": (3, 4, 5)}),
                                          ((2, 6, 6, 6), (2, 3, 2), {"output_ratio": 0.5})])
def test_fractional_max_pool3d_equals_torchs(shape, k, kw):
    run(3, shape, k, kw)


def test_modules_draw_new_windows_and_check_their_arguments():
    musa.manual_seed(0)
    pool = nn.FractionalMaxPool2d(3, output_ratio=(0.5, 0.5))
    x = musa.randn(4, 3, 20, 20)
    a, b = pool(x), pool(x)
    assert a.shape == (4, 3, 10, 10) and not musa.equal(a, b)  # new samples each call
    y, idx = nn.FractionalMaxPool3d(2, output_size=3, return_indices=True)(musa.randn(1, 2, 6, 6, 6))
    assert y.shape == idx.shape == (1, 2, 3, 3, 3) and idx.dtype == musa.int64
    # every output is its window's maximum, at its index
    flat = musa.randn(1, 1, 8, 8)
    v, i = F.fractional_max_pool2d(flat, 2, output_size=5, return_indices=True)
    assert musa.equal(flat.reshape(-1)[i.reshape(-1)], v.reshape(-1))
    with pytest.raises(ValueError, match=r"\[FractionalMaxPool2d\] requires specifying either"):
        nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError, match=r"\[fractional_max_pool2d\] output size \(8, 8\) with "
                                         r"kernel \(2, 2\) does not fit"):
        F.fractional_max_pool2d(flat, 2, output_size=8)
    with pytest.raises(ValueError, match=r"\[fractional_max_pool2d\] output_ratio must be between"):
        F.fractional_max_pool2d(flat, 2, output_ratio=1.5)
    with pytest.raises(ValueError, match=r"\[fractional_max_pool2d\] _random_samples must be a "
                                         r"tensor of shape"):
        F.fractional_max_pool2d(flat, 2, output_size=3, _random_samples=musa.rand(1, 1, 3))
