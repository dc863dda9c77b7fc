"""3-D convolution and pooling, 1-D and adaptive pooling, LP pooling and
their layers (issue 17), against torch: values, indices, and gradients of a
weighted sum, in float64."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import musa
import musa.nn as nn
import musa.nn.functional as MF

RNG = np.random.default_rng(333)


def close(m, t, tol=1e-9):
    m = m.detach().numpy() if isinstance(m, musa.Tensor) else np.asarray(m)
    t = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    assert m.shape == t.shape, (m.shape, t.shape)
    np.testing.assert_allclose(m, t, rtol=tol, atol=tol)


def same(mfn, tfn, *arrays, grad=True):
    """Values (and indices, for pairs), then the gradients of sum(out * w)."""
    ms = [musa.tensor(a, requires_grad=grad) for a in arrays]
    ts = [torch.tensor(a, requires_grad=grad) for a in arrays]
    mo, to = mfn(*ms), tfn(*ts)
    if isinstance(to, tuple):
        for m, t in zip(mo, to):
            close(m, t)
        mo, to = mo[0], to[0]
    close(mo, to)
    if grad:
        w = RNG.standard_normal(tuple(to.shape))
        (mo * musa.tensor(w)).sum().backward()
        (to * torch.tensor(w)).sum().backward()
        for m, t in zip(ms, ts):
            close(m.grad, t.grad)


X = RNG.standard_normal((2, 4, 6, 7, 5))


@pytest.mark.parametrize("kw", [
    dict(),
    dict(stride=(2, 1, 2), padding=(1, 0, 1), dilation=(1, 2, 1), groups=2),
    dict(stride=2, padding=2),
])
def test_conv3d(kw):
    w = RNG.standard_normal((6, 4 // kw.get("groups", 1), 3, 2, 3))
    b = RNG.standard_normal(6)
    same(lambda x, w, b: MF.conv3d(x, w, b, **kw), lambda x, w, b: TF.conv3d(x, w, b, **kw), X, w, b)


def test_conv3d_same_padding_and_unbatched():
    w = RNG.standard_normal((3, 4, 2, 3, 2))
    same(lambda x, w: MF.conv3d(x, w, padding="same"), lambda x, w: TF.conv3d(x, w, padding="same"), X, w)
    same(lambda x, w: MF.conv3d(x[0], w), lambda x, w: TF.conv3d(x[0], w), X, w)


@pytest.mark.parametrize("kw", [
    dict(),
    dict(stride=(2, 1, 3), padding=(1, 0, 1), output_padding=(1, 0, 2), groups=2, dilation=(1, 2, 1)),
    dict(stride=3, padding=2),
])
def test_conv_transpose3d(kw):
    w = RNG.standard_normal((4, 3, 3, 2, 3))
    b = RNG.standard_normal(3 * kw.get("groups", 1))
    same(lambda x, w, b: MF.conv_transpose3d(x, w, b, **kw), lambda x, w, b: TF.conv_transpose3d(x, w, b, **kw),
         X, w, b)


def test_conv3d_errors():
    x = musa.randn(1, 4, 3, 3, 3)
    with pytest.raises(RuntimeError, match="input channels"):
        MF.conv3d(x, musa.randn(2, 3, 1, 1, 1))
    with pytest.raises(RuntimeError, match="larger than the padded input depth"):
        MF.conv3d(x, musa.randn(2, 4, 5, 1, 1))
    with pytest.raises(RuntimeError, match="5-D"):
        MF.conv3d(x, musa.randn(2, 4, 1, 1))
    with pytest.raises(RuntimeError, match="output_padding"):
        MF.conv_transpose3d(x, musa.randn(4, 2, 1, 1, 1), output_padding=1)


POOLS = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
         dict(kernel_size=(2, 3, 2), stride=(1, 2, 3), padding=(1, 1, 0), ceil_mode=True),
         dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)]


@pytest.mark.parametrize("kw", POOLS + [dict(kernel_size=2, dilation=2, stride=1)])
def test_max_pool3d(kw):
    same(lambda x: MF.max_pool3d(x, return_indices=True, **kw), lambda x: TF.max_pool3d(x, return_indices=True, **kw),
         X)
    same(lambda x: nn.MaxPool3d(**kw)(x[0]), lambda x: torch.nn.MaxPool3d(**kw)(x[0]), X)


@pytest.mark.parametrize("kw", POOLS)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool3d(kw, count_include_pad):
    same(lambda x: MF.avg_pool3d(x, count_include_pad=count_include_pad, **kw),
         lambda x: TF.avg_pool3d(x, count_include_pad=count_include_pad, **kw), X)
    same(lambda x: MF.avg_pool3d(x, divisor_override=3, **kw), lambda x: TF.avg_pool3d(x, divisor_override=3, **kw), X)


def test_avg_pool2d_divisor_override():
    same(lambda x: MF.avg_pool2d(x[0], 2, 1, 1, True, False, divisor_override=3),
         lambda x: TF.avg_pool2d(x[0], 2, 1, 1, True, False, divisor_override=3), X)
    same(lambda x: nn.AvgPool2d(3, 2, divisor_override=2)(x[0]), lambda x: torch.nn.AvgPool2d(3, 2, divisor_override=2)(x[0]),
         X)


def test_one_d_and_lp_pooling():
    y = RNG.standard_normal((3, 4, 11))
    same(lambda x: MF.max_pool1d(x, 3, 2, 1, return_indices=True, ceil_mode=True),
         lambda x: TF.max_pool1d(x, 3, 2, 1, return_indices=True, ceil_mode=True), y)
    same(lambda x: nn.MaxPool1d(2)(x[0]), lambda x: torch.nn.MaxPool1d(2)(x[0]), y)
    same(lambda x: MF.avg_pool1d(x, 3, 2, 1, count_include_pad=False),
         lambda x: TF.avg_pool1d(x, 3, 2, 1, count_include_pad=False), y)
    same(lambda x: nn.AvgPool1d(4, 3, ceil_mode=True)(x), lambda x: torch.nn.AvgPool1d(4, 3, ceil_mode=True)(x), y)
    same(lambda x: nn.LPPool1d(2, 3, 2)(x.abs()), lambda x: torch.nn.LPPool1d(2, 3, 2)(x.abs()), y)
    same(lambda x: nn.LPPool2d(3, 2)(x.abs()), lambda x: torch.nn.LPPool2d(3, 2)(x.abs()), y)


@pytest.mark.parametrize("size", [1, 3, 4, 11, None])
def test_adaptive_pooling_1d(size):
    y = RNG.standard_normal((3, 4, 11))
    same(lambda x: MF.adaptive_avg_pool1d(x, size or 5), lambda x: TF.adaptive_avg_pool1d(x, size or 5), y)
    same(lambda x: MF.adaptive_max_pool1d(x, size or 5, True), lambda x: TF.adaptive_max_pool1d(x, size or 5, True), y)


@pytest.mark.parametrize("size", [(2, 3, 4), 1, (None, 2, 3)])
def test_adaptive_pooling_2d_3d(size):
    same(lambda x: nn.AdaptiveAvgPool3d(size)(x), lambda x: torch.nn.AdaptiveAvgPool3d(size)(x), X)
    same(lambda x: nn.AdaptiveMaxPool3d(size, True)(x), lambda x: torch.nn.AdaptiveMaxPool3d(size, True)(x), X)
    s2 = size[1:] if isinstance(size, tuple) else size
    same(lambda x: nn.AdaptiveMaxPool2d(s2, True)(x[0]), lambda x: torch.nn.AdaptiveMaxPool2d(s2, True)(x[0]), X)
    same(lambda x: nn.AdaptiveMaxPool2d(s2)(x[0, 0]), lambda x: torch.nn.AdaptiveMaxPool2d(s2)(x[0, 0]), X)


def test_max_unpool3d_inverts_max_pool3d():
    mo, mi = MF.max_pool3d(musa.tensor(X), 2, return_indices=True)
    to, ti = TF.max_pool3d(torch.tensor(X), 2, return_indices=True)
    close(nn.MaxUnpool3d(2)(mo, mi, output_size=X.shape[2:]), TF.max_unpool3d(to, ti, 2, output_size=X.shape[2:]))


def test_pooling_errors():
    x = musa.randn(1, 2, 4, 4, 4)
    with pytest.raises(RuntimeError, match="at most half"):
        MF.max_pool3d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="larger than the padded input"):
        MF.avg_pool3d(x, 5)
    with pytest.raises(RuntimeError, match="4-D \\(unbatched\\) or 5-D"):
        MF.max_pool3d(musa.randn(4, 4), 2)
    with pytest.raises(TypeError, match="floating"):
        MF.max_pool3d(musa.ones(1, 1, 2, 2, 2, dtype=musa.int64), 2)
    with pytest.raises(RuntimeError, match="output_size"):
        MF.adaptive_max_pool2d(musa.randn(1, 3, 3), (1, 2, 3))


def test_layers_match_torch_from_the_same_weights():
    torch.manual_seed(0)
    layers = [(nn.Conv3d(4, 6, 3, stride=2, padding=1, groups=2), torch.nn.Conv3d(4, 6, 3, stride=2, padding=1, groups=2)),
              (nn.ConvTranspose3d(4, 2, (2, 3, 1), stride=2), torch.nn.ConvTranspose3d(4, 2, (2, 3, 1), stride=2)),
              (nn.BatchNorm3d(4), torch.nn.BatchNorm3d(4))]
    for m, t in layers:
        m.double(), t.double()
        m.load_state_dict({k: musa.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
        same(m, t, X)
    out = nn.ConvTranspose3d(4, 2, 3, stride=2)(musa.tensor(X), output_size=(14, 15, 11))
    assert tuple(out.shape) == (2, 2, 14, 15, 11)
    assert repr(nn.Conv3d(4, 6, 3)) == repr(torch.nn.Conv3d(4, 6, 3))
    with pytest.raises(ValueError, match="expected 5D"):
        nn.BatchNorm3d(4)(musa.randn(2, 4, 3))


def test_a_compiled_3d_model_captures():
    net = nn.Sequential(nn.Conv3d(4, 8, 3, padding=1), nn.ReLU(), nn.MaxPool3d(2), nn.Conv3d(8, 4, 1),
                        nn.AdaptiveAvgPool3d(1), nn.Flatten())
    x = musa.tensor(X.astype(np.float32))
    compiled = musa.jit(net)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = compiled(x)
    close(out, net(x).detach().numpy(), tol=1e-5)


@pytest.mark.parametrize("fn", ["adaptive_avg_pool1d", "adaptive_max_pool1d"])
def test_adaptive_pooling_refuses_outputs_that_cannot_be_made(fn):
    # fuzz_py seed 1940: an output_size of 2**64 ran past 3 s building one
    # window per output element; now the output is made (or refused) first
    x = musa.randn(6, 2, 6)
    for size, err in ((2 ** 64, OverflowError), (2 ** 62, ValueError), (2 ** 40, MemoryError)):
        with pytest.raises(err, match=rf"^\[{fn}\] output_size .* cannot be made"):
            getattr(MF, fn)(x, size)


def test_adaptive_pooling_of_an_empty_batch():
    # nothing to pool: no window weights (avg) and no window loop (max, whose
    # reshape of an empty region failed), whatever the output size
    e = musa.zeros(0, 3, 4, requires_grad=True)
    assert MF.adaptive_avg_pool1d(e, 2 ** 40).shape == (0, 3, 2 ** 40)
    assert MF.adaptive_max_pool1d(e, 2 ** 40).shape == (0, 3, 2 ** 40)
    out, idx = MF.adaptive_max_pool2d(musa.zeros(0, 3, 4, 4), (2, 2), return_indices=True)
    assert out.shape == idx.shape == (0, 3, 2, 2) and idx.dtype == musa.int64
    y = MF.adaptive_avg_pool1d(e, 3)
    y.sum().backward()
    assert y.shape == (0, 3, 3) and e.grad.shape == (0, 3, 4)


@pytest.mark.parametrize("shape,size", [((2, 3, 10), 4), ((1, 2, 5), 9), ((3, 17), 5), ((2, 3, 7), 7)])
def test_adaptive_avg_pool1d_windows_match_torch(shape, size):
    x = np.random.default_rng(0).standard_normal(shape)
    got = MF.adaptive_avg_pool1d(musa.tensor(x), size).numpy()
    want = TF.adaptive_avg_pool1d(torch.tensor(x), size).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)


def test_adaptive_avg_pool_keeps_an_inf_or_nan_in_its_window():
    # (found beside fuzz-py's diag_embed finding) the 1-d and 3-d windows
    # were averaged by a product with a matrix of window weights: 0 * inf
    # made every other window NaN
    inf, nan = float("inf"), float("nan")
    x = [[[1.0, inf, 3.0, 4.0, 5.0]], [[nan, 2.0, 3.0, -inf, 5.0]]]
    got = MF.adaptive_avg_pool1d(musa.tensor(x), 2).numpy()
    np.testing.assert_array_equal(got, TF.adaptive_avg_pool1d(torch.tensor(x), 2).numpy())
    x3 = np.arange(2 * 4 * 4 * 4, dtype=np.float64).reshape(1, 2, 4, 4, 4)
    x3[0, 0, 0, 0, 0], x3[0, 1, 3, 3, 3] = nan, -inf
    got = MF.adaptive_avg_pool3d(musa.tensor(x3), 2).numpy()
    want = TF.adaptive_avg_pool3d(torch.tensor(x3), 2).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_adaptive_avg_pool_of_an_empty_window_is_nan():
    # fuzz_py seed 2467: a (2, 0) input pooled to 1 gave 0; the mean of an
    # empty window is 0 / 0, NaN, as in PyTorch
    got = MF.adaptive_avg_pool1d(musa.zeros((2, 0), dtype=musa.bfloat16), 1)
    want = TF.adaptive_avg_pool1d(torch.zeros((2, 0), dtype=torch.bfloat16), 1)
    assert got.shape == tuple(want.shape) == (2, 1) and np.isnan(got.float().numpy()).all()
    assert np.isnan(MF.adaptive_avg_pool3d(musa.zeros((1, 2, 0, 3, 3)), 2).numpy()).all()
    x = musa.zeros((1, 2, 0), requires_grad=True)
    MF.adaptive_avg_pool1d(x, 3).sum().backward()
    assert x.grad.shape == (1, 2, 0)
