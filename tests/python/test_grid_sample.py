"""F.affine_grid and F.grid_sample against torch: every mode, padding mode
and align_corners, 4-D and 5-D, values and the gradients of input, grid and
theta; float32; empty batches; compiled; and the errors."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import musa
import musa.nn.functional as F

RNG = np.random.default_rng(41)
CASES = [(nd, mode, pad, ac) for nd in (4, 5) for mode in ("bilinear", "nearest", "bicubic")
         for pad in ("zeros", "border", "reflection") for ac in (False, True)
         if not (mode == "bicubic" and nd == 5)]


def shapes(nd):
    return ((2, 3, 5, 7), (2, 4, 6, 2)) if nd == 4 else ((2, 3, 4, 5, 6), (2, 3, 4, 5, 3))


@pytest.mark.parametrize("nd,mode,pad,ac", CASES)
def test_values_and_gradients_against_torch(nd, mode, pad, ac):
    ishape, gshape = shapes(nd)
    x, g = RNG.standard_normal(ishape), RNG.uniform(-1.6, 1.6, gshape)  # taps outside too
    w = RNG.standard_normal((ishape[0], ishape[1]) + gshape[1:-1])
    mx, mg = musa.tensor(x, requires_grad=True), musa.tensor(g, requires_grad=True)
    tx, tg = torch.tensor(x, requires_grad=True), torch.tensor(g, requires_grad=True)
    m = F.grid_sample(mx, mg, mode=mode, padding_mode=pad, align_corners=ac)
    t = TF.grid_sample(tx, tg, mode=mode, padding_mode=pad, align_corners=ac)
    np.testing.assert_allclose(m.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-12)
    (m * musa.tensor(w)).sum().backward()
    (t * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mg.grad.numpy(), tg.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_gradcheck(mode):
    x = musa.tensor(RNG.standard_normal((1, 2, 4, 5)), requires_grad=True)
    g = musa.tensor(RNG.uniform(-0.9, 0.9, (1, 3, 3, 2)), requires_grad=True)
    assert musa.autograd.gradcheck(
        lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode="reflection", align_corners=False),
        (x, g))


@pytest.mark.parametrize("nd", [4, 5])
@pytest.mark.parametrize("ac", [False, True])
def test_affine_grid_and_its_theta_gradient(nd, ac):
    size = (2, 3, 5, 7) if nd == 4 else (2, 3, 4, 5, 6)
    th = RNG.standard_normal((2, nd - 2, nd - 1))
    mt, tt = musa.tensor(th, requires_grad=True), torch.tensor(th, requires_grad=True)
    m, t = F.affine_grid(mt, size, align_corners=ac), TF.affine_grid(tt, size, align_corners=ac)
    np.testing.assert_allclose(m.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = RNG.standard_normal(tuple(t.shape))
    (m * musa.tensor(w)).sum().backward()
    (t * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(mt.grad.numpy(), tt.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_identity_transform_samples_the_input_back():
    x = RNG.standard_normal((2, 3, 6, 8)).astype(np.float32)
    eye = musa.tensor(np.tile(np.eye(2, 3, dtype=np.float32), (2, 1, 1)))
    for ac in (False, True):
        grid = F.affine_grid(eye, (2, 3, 6, 8), align_corners=ac)
        y = F.grid_sample(musa.tensor(x), grid, align_corners=ac)
        np.testing.assert_allclose(y.numpy(), x, rtol=1e-5, atol=1e-5)


def test_float32_against_torch():
    x = RNG.standard_normal((2, 3, 9, 9)).astype(np.float32)
    g = RNG.uniform(-1.2, 1.2, (2, 5, 5, 2)).astype(np.float32)
    m = F.grid_sample(musa.tensor(x), musa.tensor(g), align_corners=False)
    t = TF.grid_sample(torch.tensor(x), torch.tensor(g), align_corners=False)
    assert m.dtype == musa.float32
    np.testing.assert_allclose(m.numpy(), t.numpy(), rtol=1e-5, atol=1e-5)


def test_a_nan_outside_the_taps_does_not_leak():
    x = np.zeros((1, 1, 3, 3))
    x[0, 0, 0, 0] = np.nan
    g = np.array([[[[0.9, 0.9], [-3.0, -3.0]]]])  # near the far corner, and wholly outside
    y = F.grid_sample(musa.tensor(x), musa.tensor(g), align_corners=True)
    assert np.isfinite(y.numpy()).all()


def test_empty_batch_and_empty_output():
    y = F.grid_sample(musa.zeros(0, 2, 3, 3), musa.zeros(0, 4, 4, 2), align_corners=False)
    assert y.shape == (0, 2, 4, 4)
    y = F.grid_sample(musa.zeros(1, 2, 3, 3), musa.zeros(1, 0, 4, 2), align_corners=False)
    assert y.shape == (1, 2, 0, 4)


def test_compiled_matches_eager():
    x = musa.tensor(RNG.standard_normal((2, 3, 6, 6)).astype(np.float32))
    th = musa.tensor(RNG.uniform(-0.5, 0.5, (2, 2, 3)).astype(np.float32))

    def stn(x, th):
        return F.grid_sample(x, F.affine_grid(th, (2, 3, 4, 4), align_corners=False),
                             padding_mode="border", align_corners=False)

    np.testing.assert_array_equal(musa.jit(stn)(x, th).numpy(), stn(x, th).numpy())


def test_default_align_corners_warns_as_pytorch():
    with pytest.warns(UserWarning, match="align_corners"):
        F.grid_sample(musa.zeros(1, 1, 2, 2), musa.zeros(1, 1, 1, 2))
    with pytest.warns(UserWarning, match="align_corners"):
        F.affine_grid(musa.zeros(1, 2, 3), (1, 1, 2, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.grid_sample(musa.zeros(1, 1, 2, 2), musa.zeros(1, 1, 1, 2), align_corners=False)


def test_errors_name_the_function_and_the_values():
    x, g = musa.zeros(1, 1, 3, 3), musa.zeros(1, 2, 2, 2)
    with pytest.raises(ValueError, match=r"\[grid_sample\] mode must be one of .* got 'area'"):
        F.grid_sample(x, g, mode="area", align_corners=False)
    with pytest.raises(ValueError, match=r"\[grid_sample\] padding_mode .* got 'wrap'"):
        F.grid_sample(x, g, padding_mode="wrap", align_corners=False)
    with pytest.raises(ValueError, match=r"expected a grid of shape \(1, \.\.\., 2\)"):
        F.grid_sample(x, musa.zeros(1, 2, 2, 3), align_corners=False)
    with pytest.raises(ValueError, match=r"bicubic interpolation needs a 4-D input"):
        F.grid_sample(musa.zeros(1, 1, 2, 2, 2), musa.zeros(1, 1, 1, 1, 3), mode="bicubic",
                      align_corners=False)
    with pytest.raises(TypeError, match=r"one floating point dtype, got musa.float32 and "
                                        r"musa.float64"):
        F.grid_sample(x, g.double(), align_corners=False)
    with pytest.raises(ValueError, match=r"non-empty spatial dims"):
        F.grid_sample(musa.zeros(1, 1, 0, 3), g, align_corners=False)
    with pytest.raises(ValueError, match=r"\[affine_grid\] expected theta of shape \(2, 2, 3\)"):
        F.affine_grid(musa.zeros(1, 2, 3), (2, 1, 4, 4), align_corners=False)
    with pytest.raises(ValueError, match=r"\[affine_grid\] expected a positive output size"):
        F.affine_grid(musa.zeros(1, 2, 3), (1, 1, 0, 4), align_corners=False)
    with pytest.raises(TypeError, match=r"\[affine_grid\] size must be a sequence of ints, got "
                                        r"\[\[1\], \[2, 3\]\]"):  # fuzz-py seed 7558
        F.affine_grid(musa.zeros(1, 2, 3), [[1], [2, 3]], align_corners=False)
    with pytest.raises(TypeError, match=r"\[affine_grid\] size must be a sequence of ints"):
        F.affine_grid(musa.zeros(1, 2, 3), 4, align_corners=False)
    with pytest.raises(TypeError, match=r"\[affine_grid\] theta must be a floating point"):
        F.affine_grid(musa.zeros(1, 2, 3, dtype=musa.int64), (1, 1, 4, 4), align_corners=False)
