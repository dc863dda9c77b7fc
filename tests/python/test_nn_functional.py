"""musa.nn.functional against torch.nn.functional: values and input
gradients, from identical float32 inputs; plus the errors on bad input."""
import warnings

import numpy as np
import pytest

import musa
import musa.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(0)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def compare(mfn, tfn, *arrays, rtol=1e-5, atol=1e-6, grad=True):
    """Run mfn on musa copies and tfn on torch copies of the numpy arrays
    (floating ones require grad); compare outputs and, after backward with
    the same random cotangent, the input gradients."""
    ms = [musa.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    ts = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    mo, to = mfn(*ms), tfn(*ts)
    assert tuple(mo.shape) == tuple(to.shape)
    np.testing.assert_allclose(mo.detach().numpy(), to.detach().numpy(), rtol=rtol, atol=atol)
    if grad and to.requires_grad:
        cot = randn(*to.shape)
        mo.backward(musa.tensor(cot))
        to.backward(torch.tensor(cot))
        for m, t in zip(ms, ts):
            if t.grad is not None:
                np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=10 * atol)
    return mo


X = randn(3, 4, 5)

ACTIVATIONS = [
    ("relu", lambda f, x: f.relu(x)), ("relu6", lambda f, x: f.relu6(x * 4)),
    ("leaky_relu", lambda f, x: f.leaky_relu(x, 0.2)), ("elu", lambda f, x: f.elu(x, 0.7)),
    ("gelu", lambda f, x: f.gelu(x)), ("gelu_tanh", lambda f, x: f.gelu(x, approximate="tanh")),
    ("silu", lambda f, x: f.silu(x)), ("softplus", lambda f, x: f.softplus(x * 10, 2.0, 5.0)),
    ("hardtanh", lambda f, x: f.hardtanh(x, -0.5, 0.8)), ("sigmoid", lambda f, x: f.sigmoid(x)),
    ("tanh", lambda f, x: f.tanh(x * 1.0)), ("softmax", lambda f, x: f.softmax(x, 1)),
    ("softmax_neg", lambda f, x: f.softmax(x, -1)), ("log_softmax", lambda f, x: f.log_softmax(x, 0)),
    ("softmax_dtype", lambda f, x: f.softmax(x, 2, dtype=f is TF and torch.float64 or musa.float64)),
    ("normalize", lambda f, x: f.normalize(x, dim=2)), ("normalize_p1", lambda f, x: f.normalize(x, 1.0, 1)),
    ("linear", lambda f, x: f.linear(x, x[0, :2] * 1.5)),
]


@pytest.mark.filterwarnings("ignore:nn.functional.* is deprecated")
@pytest.mark.parametrize("name,fn", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_elementwise_and_softmax(name, fn):
    compare(lambda x: fn(F, x), lambda x: fn(TF, x), X)


@pytest.mark.parametrize("fn", ["relu", "leaky_relu", "elu", "silu", "hardtanh", "relu6"])
def test_inplace_variants_modify_input_and_differentiate(fn):
    def run(f, x):
        y = x * 1.0  # a non-leaf to modify
        out = getattr(f, fn)(y, inplace=True)
        assert out is y
        return y
    compare(lambda x: run(F, x), lambda x: run(TF, x), X)


def masked_rows(dtype):
    """Rows of 70 logits (more than a 64-lane block: tails too) with -inf,
    huge negatives (-1e30 and values just past exp's zero, -120) and a
    causal pattern: the inputs the kernels' masked exp takes its fast path
    on; one row keeps only its last logit."""
    x = randn(6, 70).astype(dtype) * 3
    x[np.tril(np.ones((6, 70), bool), -1)[:, ::-1]] = -np.inf
    x[1, ::3] = -1e30
    x[2, 5:40] = -120
    x[4, :-1] = -np.inf
    x[4, -1] = 1.5
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_over_masked_rows(fn, dtype):
    x = masked_rows(dtype)
    out = compare(lambda t: getattr(F, fn)(t, -1), lambda t: getattr(TF, fn)(t, -1), x,
                  rtol=1e-5, atol=1e-6)
    masked = x == -np.inf
    if fn == "softmax":
        assert (out.detach().numpy()[masked] == 0).all()
        assert (out.detach().numpy()[4, -1] == 1)
    else:
        assert np.isneginf(out.detach().numpy()[masked]).all()
    # -inf and a huge finite negative give the same bits (exp is +0 for both)
    y = x.copy()
    y[masked] = -3e38
    a = getattr(F, fn)(musa.tensor(x), -1).numpy()
    b = getattr(F, fn)(musa.tensor(y), -1).numpy()
    np.testing.assert_array_equal(a[~masked], b[~masked])


def test_softmax_masked_nan_and_all_masked_rows():
    x = np.full((3, 20), -np.inf, np.float32)
    x[1, 3] = np.nan
    x[2, :5] = 1.0
    out = F.softmax(musa.tensor(x), -1).numpy()
    ref = TF.softmax(torch.tensor(x), -1).numpy()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))  # all -inf and NaN rows: NaN
    np.testing.assert_allclose(out[2], ref[2], rtol=1e-6)


def test_cross_entropy_with_masked_logits():
    x = masked_rows(np.float32)
    target = np.array([69, 65, 68, 60, 69, 0], np.int64)
    x[5, 0] = 2.0  # a finite target logit in every row
    compare(lambda a, t: F.cross_entropy(a, t), lambda a, t: TF.cross_entropy(a, t), x, target,
            rtol=1e-5, atol=1e-6)
    compare(lambda a, t: F.cross_entropy(a, t, label_smoothing=0.0, reduction="none"),
            lambda a, t: TF.cross_entropy(a, t, label_smoothing=0.0, reduction="none"), x, target,
            rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 3, 10, 15])
def test_short_rows_softmax_and_cross_entropy(n, dtype):
    # rows shorter than a vector (10 classes) take one padded vector exp
    x = randn(8, n).astype(dtype) * 3
    x[1, 0] = -np.inf if n > 1 else x[1, 0]
    x[2, -1] = -1e30 if n > 1 else x[2, -1]
    target = np.arange(8, dtype=np.int64) % n
    if n > 1:
        target[1] = 1  # a finite target logit in the masked row
    compare(lambda t: F.softmax(t, -1), lambda t: TF.softmax(t, -1), x)
    compare(lambda t: F.log_softmax(t, -1), lambda t: TF.log_softmax(t, -1), x)
    compare(lambda a, t: F.cross_entropy(a, t), lambda a, t: TF.cross_entropy(a, t), x, target)
    compare(lambda a, t: F.cross_entropy(a, t, label_smoothing=0.1) if n > 1 else a.sum(),
            lambda a, t: TF.cross_entropy(a, t, label_smoothing=0.1) if n > 1 else a.sum(),
            np.where(np.isfinite(x), x, -50).astype(dtype), target)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [16, 17, 31, 64, 100, 256, 257, 600])
def test_row_sums_over_lane_tails_and_blocks(n, dtype):
    # rows summed in 16 interleaved partials (and blocks of 256): every
    # tail length against a float64 reference, masked rows included, and
    # the backward's row sums (softmax's g.y, log-softmax's g) likewise
    x = randn(6, n).astype(dtype) * 4
    x[1, n // 2:] = -np.inf
    x[2, ::3] = -np.inf
    ref = x.astype(np.float64)
    e = np.exp(ref - ref.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    with np.errstate(divide="ignore"):
        log_want = np.log(want)
    for fn, expect in ((F.softmax, want), (F.log_softmax, log_want)):
        t = musa.tensor(x, requires_grad=True)
        y = fn(t, -1)
        ok = np.isfinite(expect)
        np.testing.assert_allclose(y.detach().numpy()[ok], expect[ok], rtol=3e-6, atol=1e-7)
        g = randn(6, n).astype(dtype)
        y.backward(musa.tensor(g))
        g64 = g.astype(np.float64)
        if fn is F.softmax:
            gx = want * (g64 - (g64 * want).sum(-1, keepdims=True))
        else:
            gx = g64 - want * g64.sum(-1, keepdims=True)
        np.testing.assert_allclose(t.grad.numpy(), gx, rtol=1e-5, atol=1e-5)


def test_softmax_implicit_dim_warns():
    with pytest.warns(UserWarning, match="Implicit dimension"):
        out = F.softmax(musa.tensor(X[0]))
    np.testing.assert_allclose(out.numpy(), TF.softmax(torch.tensor(X[0]), 1).numpy(), rtol=1e-6)


def test_cosine_similarity():
    compare(lambda a, b: F.cosine_similarity(a, b), lambda a, b: TF.cosine_similarity(a, b), X,
            randn(3, 4, 5))
    compare(lambda a, b: F.cosine_similarity(a, b, dim=-1), lambda a, b: TF.cosine_similarity(a, b, dim=-1),
            X, randn(1, 4, 5))


# ---- convolution and pooling ----

CONV2D = [
    dict(), dict(stride=2, padding=1), dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2),
    dict(padding="same", dilation=2), dict(padding="valid"),
]


@pytest.mark.parametrize("kw", CONV2D)
def test_conv2d(kw):
    x, w, b = randn(2, 4, 9, 8), randn(6, 4 // kw.get("groups", 1), 3, 2), randn(6)
    compare(lambda x, w, b: F.conv2d(x, w, b, **kw), lambda x, w, b: TF.conv2d(x, w, b, **kw), x, w, b)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_conv2d_same_with_even_kernel_pads_right():
    compare(lambda x, w: F.conv2d(x, w, padding="same"), lambda x, w: TF.conv2d(x, w, padding="same"),
            randn(1, 2, 6, 7), randn(3, 2, 4, 2))


def test_conv2d_unbatched():
    compare(lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: TF.conv2d(x, w, padding=1),
            randn(2, 5, 5), randn(3, 2, 3, 3))


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, dilation=2, groups=2), dict(padding="same"),
                                dict(stride=(2,), padding=(1,))])
def test_conv1d(kw):
    compare(lambda x, w, b: F.conv1d(x, w, b, **kw), lambda x, w, b: TF.conv1d(x, w, b, **kw),
            randn(2, 4, 11), randn(6, 4 // kw.get("groups", 1), 3), randn(6))


def test_conv1d_unbatched():
    compare(lambda x, w: F.conv1d(x, w), lambda x, w: TF.conv1d(x, w), randn(4, 11), randn(6, 4, 3))


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, output_padding=1),
                                dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2,
                                     dilation=(1, 2))])
def test_conv_transpose2d(kw):
    compare(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw),
            lambda x, w, b: TF.conv_transpose2d(x, w, b, **kw),
            randn(2, 4, 5, 6), randn(4, 3, 3, 3), randn(3 * kw.get("groups", 1)))


def test_conv_errors():
    x, w = musa.randn(1, 2, 5, 5), musa.randn(3, 2, 3, 3)
    with pytest.raises(ValueError, match="strided"):
        F.conv2d(x, w, padding="same", stride=2)
    with pytest.raises(ValueError, match="invalid padding string 'full'"):
        F.conv2d(x, w, padding="full")
    with pytest.raises(ValueError, match=r"^\[conv2d\] expected a 3-D \(unbatched\) or 4-D"):
        F.conv2d(musa.randn(5, 5), w)
    with pytest.raises(ValueError, match="conv2d"):
        F.conv2d(x, musa.randn(3, 4, 3, 3))  # channel mismatch, raised by the C op
    with pytest.raises(TypeError, match="musa.Tensor"):
        F.conv2d([1.0], w)


POOLS = [
    ("max", dict(kernel_size=2)), ("max", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("max", dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(2, 1))),
    ("avg", dict(kernel_size=2)), ("avg", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                               count_include_pad=False)),
    ("avg", dict(kernel_size=(3, 2), padding=(1, 1))),
]


@pytest.mark.parametrize("kind,kw", POOLS)
def test_pool2d(kind, kw):
    name = kind + "_pool2d"
    compare(lambda x: getattr(F, name)(x, **kw), lambda x: getattr(TF, name)(x, **kw), randn(2, 3, 9, 8))


def test_float16_linear_is_the_float32_linear_rounded_once():
    # a float16 linear runs on float32 copies of its inputs; a graph records
    # it as a float32 linear and a cast. Both take the float32 product's own
    # kernel (oneDNN's, the bias in its epilogue): eager's once chose sgemm
    # from the float16 output's dtype, 1 ulp apart in 670 of 393,216 outputs
    # over these six products (test_jit_fuzz seed 108541)
    for seed in range(6):
        rng = np.random.default_rng(seed)
        x, w = (musa.tensor(rng.standard_normal(s).astype(np.float16)) for s in ((256, 512),) * 2)
        b = musa.tensor(rng.standard_normal(256).astype(np.float16))
        got = F.linear(x, w, b)
        assert got.dtype == musa.float16
        want = F.linear(x.float(), w.float(), b.float()).half()
        assert np.array_equal(got.numpy(), want.numpy()), seed
        assert np.array_equal(musa.jit(lambda x: F.linear(x, w, b))(x).numpy(), got.numpy())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_max_pool2d_window_of_padding_only(dtype):
    # fuzz_py seed 4846: a window whose taps all fall in the padding (width
    # 1, padding 1, dilation 2) gave 0 where PyTorch gives -inf, max's
    # identity; its index -1 then made the backward's scatter_add raise.
    # Such a window passes no gradient (PyTorch's, from its garbage
    # indices, reaches elements no window read)
    a = randn(2, 3, 4, 1)
    x = musa.tensor(a).to(getattr(musa, dtype)).requires_grad_()
    y, i = F.max_pool2d(x, (2, 2), padding=(1,), dilation=(1, 2), return_indices=True)
    assert y.shape == (2, 3, 3, 1) and np.all(y.detach().float().numpy() == -np.inf)
    assert np.all(i.numpy() == -1)
    y.float().clamp(min=-5).sum().backward()
    assert np.array_equal(x.grad.float().numpy(), np.zeros_like(a))
    # compiled, the same
    x = musa.tensor(a).to(getattr(musa, dtype)).requires_grad_()
    step = musa.jit(lambda x: F.max_pool2d(x, (2, 2), padding=(1,), dilation=(1, 2)).float()
                    .clamp(min=-5).sum())
    assert step(x).item() == -5 * 18
    step(x).backward()
    assert np.array_equal(x.grad.float().numpy(), np.zeros_like(a))


def test_max_pool2d_indices_and_unbatched():
    x = randn(3, 8, 8)
    mv, mi = F.max_pool2d(musa.tensor(x), 2, return_indices=True)
    tv, ti = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(mv.numpy(), tv.numpy())
    np.testing.assert_array_equal(mi.numpy(), ti.numpy())


@pytest.mark.parametrize("size", [1, 3, (2, 5), (None, 4), (9, 8)])
def test_adaptive_avg_pool2d(size):
    compare(lambda x: F.adaptive_avg_pool2d(x, size), lambda x: TF.adaptive_avg_pool2d(x, size),
            randn(2, 3, 9, 8))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,size", [((2, 3, 32, 32), 1), ((4, 3, 7, 7), 1), ((2, 3, 5, 40), (2, 1)),
                                        ((2, 3, 5, 40), (2, 3)), ((2, 3, 5, 40), (2, 2)),
                                        ((2, 3, 40, 5), (3, 1))])
def test_adaptive_avg_pool2d_windows_of_whole_rows_and_wide_rows(shape, size, dtype):
    # window sums in 16 interleaved partials: windows of whole rows summed as
    # one run (global pooling), rows wider than 16 in vectors with tails
    compare(lambda x: F.adaptive_avg_pool2d(x, size), lambda x: TF.adaptive_avg_pool2d(x, size),
            randn(*shape).astype(dtype), rtol=1e-6 if dtype == np.float32 else 1e-12, atol=1e-7)


def test_avg_pool2d_divisor_override_divides_the_window_sums():
    x = musa.arange(16.0).reshape(1, 1, 4, 4)
    out = F.avg_pool2d(x, 2, divisor_override=3)
    sums = [[0 + 1 + 4 + 5, 2 + 3 + 6 + 7], [8 + 9 + 12 + 13, 10 + 11 + 14 + 15]]
    assert out.reshape(-1).tolist() == pytest.approx([v / 3 for r in sums for v in r])
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(x, 2, divisor_override=0)


# ---- normalisation ----

def test_batch_norm_training_updates_running_stats():
    x, w, b = randn(6, 3, 4, 5), randn(3), randn(3)
    mrm, mrv = musa.zeros(3), musa.ones(3)
    trm, trv = torch.zeros(3), torch.ones(3)
    compare(lambda x, w, b: F.batch_norm(x, mrm, mrv, w, b, True, 0.3, 1e-3),
            lambda x, w, b: TF.batch_norm(x, trm, trv, w, b, True, 0.3, 1e-3), x, w, b)
    np.testing.assert_allclose(mrm.numpy(), trm.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(mrv.numpy(), trv.numpy(), rtol=1e-5)


def test_batch_norm_eval_uses_running_stats():
    rm, rv = randn(3), np.abs(randn(3)) + 0.5
    compare(lambda x, w, b: F.batch_norm(x, musa.tensor(rm), musa.tensor(rv), w, b),
            lambda x, w, b: TF.batch_norm(x, torch.tensor(rm), torch.tensor(rv), w, b), randn(4, 3), randn(3),
            randn(3))


@pytest.mark.parametrize("shape", [(3, 5, 2, 3), (4, 70, 4, 4), (2, 9, 63), (5, 3, 8, 8), (3, 130, 16, 16),
                                   (2, 4, 300), (6, 2, 33, 33)])
def test_batch_norm_statistics_over_every_plane_length(shape):
    # planes under 16, 16 and 64 elements and over 256 (the sums' partials),
    # channel counts that cut into uneven blocks: float64's result, and the
    # same bits on 1 and 2 threads (a compiled step and eager must agree)
    x = randn(*shape) * 3 + 1
    w, b, g = randn(shape[1]), randn(shape[1]), randn(*shape)
    xt, wt, bt = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b))
    yt = TF.batch_norm(xt, None, None, wt, bt, training=True)
    yt.backward(torch.tensor(g, dtype=torch.float64))
    runs = []
    old = musa.get_num_threads()
    try:
        for threads in (1, 2):
            musa.set_num_threads(threads)
            xm, wm, bm = (musa.tensor(a).requires_grad_() for a in (x, w, b))
            y = F.batch_norm(xm, None, None, wm, bm, training=True)
            y.backward(musa.tensor(g))
            runs.append([t.detach().numpy() for t in (y, xm.grad, wm.grad, bm.grad)])
    finally:
        musa.set_num_threads(old)
    for a, c in zip(*runs):
        assert np.array_equal(a, c)
    for got, want in zip(runs[0], (yt, xt.grad, wt.grad, bt.grad)):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=2e-4, atol=2e-4)


def test_batch_norm_errors():
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(musa.randn(1, 3), None, None, training=True)
    with pytest.raises(ValueError, match=r"^\[batch_norm\] running_mean has shape \(2,\), expected \(3,\)"):
        F.batch_norm(musa.randn(4, 3), musa.zeros(2), musa.ones(3))
    with pytest.raises(ValueError, match=r"^\[batch_norm\] bias has shape \(4,\)"):
        F.batch_norm(musa.randn(4, 3), None, None, musa.ones(3), musa.ones(4), training=True)


def test_layer_norm_and_group_norm():
    compare(lambda x, w, b: F.layer_norm(x, (4, 5), w, b), lambda x, w, b: TF.layer_norm(x, (4, 5), w, b),
            X, randn(4, 5), randn(4, 5))
    compare(lambda x: F.layer_norm(x, [5], eps=1e-2), lambda x: TF.layer_norm(x, [5], eps=1e-2), X)
    compare(lambda x, w, b: F.group_norm(x, 2, w, b), lambda x, w, b: TF.group_norm(x, 2, w, b),
            randn(2, 6, 3, 3), randn(6), randn(6))


@pytest.mark.parametrize("eps", [1e-12, 1e-5])
def test_group_norm_of_a_constant_group_is_its_bias(eps):
    # fuzz_py seed 5537: x * scale + (b - mean * scale) cancelled a shift of
    # ~2e6 (eps 1e-12) against x * scale: -1.875 for a bias of -1.989
    # (1.4e-5 off at eps 1e-5); (x - mean) * scale + b is b exactly
    x = musa.tensor([[[0.787]]]).expand(1, 1, 4)
    w, b = musa.tensor([-2.66]), musa.tensor([-1.989])
    assert F.group_norm(x, 1, w, b, eps=eps).tolist() == [[[b.item()] * 4]]
    x = musa.tensor([[[0.787] * 3, [1.5] * 3]]).expand(2, 2, 3)
    y = F.group_norm(x, 2, musa.tensor([2.0, 3.0]), musa.tensor([0.5, -0.25]), eps=eps)
    assert y.tolist() == [[[0.5] * 3, [-0.25] * 3]] * 2



@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_norms_of_a_group_holding_an_inf_are_nan(dtype):
    # (fuzz-py, seeds 7150-) an inf makes the group's variance NaN; the
    # variance clamp made it 0, so the group's finite values came out inf
    inf = float("inf")
    x = [[[0.9, -1.5], [-3.4, -inf]], [[-inf, -3.8], [3.0, 0.08]]]
    for norm in (lambda L, t: L.nn.functional.group_norm(t, 1), lambda L, t: L.nn.functional.layer_norm(t, (2,)),
                 lambda L, t: L.nn.functional.batch_norm(t, None, None, training=True)):
        m = norm(musa, musa.tensor(x, dtype=getattr(musa, dtype))).float().numpy()
        t = norm(torch, torch.tensor(x, dtype=getattr(torch, dtype))).float().numpy()
        np.testing.assert_array_equal(np.isnan(m), np.isnan(t))
        assert np.isfinite(m[~np.isnan(m)]).all()


@pytest.mark.parametrize("eps", [1e-12, 1e-5])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_batch_norm_of_a_constant_channel_is_its_bias(eps, dtype):
    # as group_norm above: with invstd at 1e6, x * scale + (b - mean * scale)
    # cancelled; (N, C, H, W) runs the channel-block kernel, (N, C) the rows one
    dt = getattr(musa, dtype)
    w, b = musa.tensor([-2.66, 2.0]), musa.tensor([-1.989, 0.5])
    for shape in [(3, 2, 2, 2), (5, 2)]:
        x = musa.tensor([0.787, 1.5]).reshape(1, 2, *[1] * (len(shape) - 2)).expand(*shape)
        y = F.batch_norm(x.to(dt), None, None, w, b, training=True, eps=eps)
        want = b.to(dt).reshape(1, 2, *[1] * (len(shape) - 2)).expand(*shape)
        assert y.to(musa.float32).tolist() == want.to(musa.float32).tolist(), shape


# ---- embedding, one_hot, pad ----

def test_embedding_with_padding_idx():
    idx = np.array([[1, 2, 0], [4, 3, 3]])
    for pad in (None, 0, -1):
        compare(lambda w: F.embedding(musa.tensor(idx), w, pad),
                lambda w: TF.embedding(torch.tensor(idx), w, pad), randn(5, 3))


def test_cross_entropy_names_0d_logits_with_a_weight():
    # fuzz_py seed 4833: with a weight, input.shape[1] of 0-d logits raised
    # an unnamed IndexError
    with pytest.raises(ValueError, match=r"^\[cross_entropy\] logits need at least 1 dim"):
        F.cross_entropy(musa.tensor(-1.3), musa.tensor([0, 1]), weight=musa.tensor(2.0))


@pytest.mark.parametrize("shape", [(), (4,), (2, 3, 4)])
def test_embedding_names_a_weight_that_is_not_2d_before_its_padding_idx(shape):
    # fuzz_py seed 4575: a 0-d weight with a padding_idx reached
    # weight.shape[0] (IndexError "tuple index out of range")
    with pytest.raises(ValueError, match=r"^\[embedding\] weight must be \(num_embeddings, dim\)"):
        F.embedding(musa.tensor([0, 1]), musa.ones(shape), padding_idx=-2, max_norm=1.0)


def test_embedding_max_norm_renormalises_rows_in_place():
    w = randn(6, 3) * 3
    idx = np.array([0, 2, 2, 5])
    mw, tw = musa.tensor(w), torch.tensor(w)
    mo = F.embedding(musa.tensor(idx), mw, max_norm=1.0)
    to = TF.embedding(torch.tensor(idx), tw, max_norm=1.0)
    np.testing.assert_allclose(mo.numpy(), to.numpy(), rtol=1e-5)
    np.testing.assert_allclose(mw.numpy(), tw.numpy(), rtol=1e-5)


def test_embedding_errors():
    w = musa.randn(5, 2)
    with pytest.raises(IndexError, match=r"\[embedding\] index out of range: indices must be in \[0, 5\)"):
        F.embedding(musa.tensor([5]), w)
    with pytest.raises(ValueError, match="padding_idx 7"):
        F.embedding(musa.tensor([1]), w, padding_idx=7)
    with pytest.raises(NotImplementedError, match="sparse"):
        F.embedding(musa.tensor([1]), w, sparse=True)
    with pytest.raises(IndexError, match=r"\[embedding\] index out of range"):
        F.embedding(musa.tensor([0, -1]), w)


def test_one_hot():
    t = np.array([[0, 3], [1, 2]])
    np.testing.assert_array_equal(F.one_hot(musa.tensor(t)).numpy(), TF.one_hot(torch.tensor(t)).numpy())
    np.testing.assert_array_equal(F.one_hot(musa.tensor(t), 6).numpy(),
                                  TF.one_hot(torch.tensor(t), 6).numpy())


PADS = [((1, 2), "constant", 0.5, 4), ((1, 2, 0, 3), "constant", None, 4),
        ((-1, 2, 1, -1), "constant", None, 4), ((2, 1), "reflect", None, 3),
        ((2, 1, 1, 2), "reflect", None, 4),
        ((3, 1, 2, 0), "replicate", None, 4), ((2, 3, 1, 1), "circular", None, 4),
        ((1, 0), "replicate", None, 2)]


@pytest.mark.parametrize("pad,mode,value,ndim", PADS)
def test_pad(pad, mode, value, ndim):
    kw = {} if value is None else {"value": value}
    x = randn(2, 3, 4, 5)[(0,) * (4 - ndim)]
    compare(lambda x: F.pad(x, pad, mode, **kw), lambda x: TF.pad(x, pad, mode, **kw), x)


def test_pad_errors():
    x = musa.randn(2, 3)
    with pytest.raises(ValueError, match="divisible by 2"):
        F.pad(x, (1,))
    with pytest.raises(ValueError, match="too long"):
        F.pad(x, (1, 1, 1, 1, 1, 1))
    with pytest.raises(ValueError, match="unknown mode 'wrap'"):
        F.pad(x, (1, 1), mode="wrap")
    with pytest.raises(ValueError, match="less than the dim size 3"):
        F.pad(x, (3, 0), mode="reflect")


def test_dropout():
    x = musa.ones(1000)
    musa.manual_seed(1)
    y = F.dropout(x, 0.3)
    kept = y.numpy() != 0
    assert 0.6 < kept.mean() < 0.8
    np.testing.assert_allclose(y.numpy()[kept], 1 / 0.7, rtol=1e-6)
    assert F.dropout(x, 0.3, training=False) is x
    assert float(F.dropout(x, 1.0).abs().sum()) == 0.0
    with pytest.raises(ValueError, match="between 0 and 1, but got 1.5"):
        F.dropout(x, 1.5)


# ---- losses ----

LOGITS, TARGET = randn(6, 5), np.array([1, 0, 4, 2, 2, 3])
WEIGHT = np.abs(randn(5)) + 0.1


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("kw", [dict(), dict(ignore_index=2), dict(label_smoothing=0.2),
                                dict(label_smoothing=0.1, ignore_index=0)])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_indices(reduction, kw, weighted):
    w = WEIGHT if weighted else None
    compare(lambda x: F.cross_entropy(x, musa.tensor(TARGET), None if w is None else musa.tensor(w),
                                      reduction=reduction, **kw),
            lambda x: TF.cross_entropy(x, torch.tensor(TARGET), None if w is None else torch.tensor(w),
                                       reduction=reduction, **kw), LOGITS)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_spatial_and_unbatched(weighted, reduction):
    x, t = randn(2, 5, 3, 4), RNG.integers(0, 5, (2, 3, 4))
    w = WEIGHT if weighted else None
    for xs, ts in ((x, t), (x[0, :, 0, 0], t[0, 0, 0])):
        compare(lambda x: F.cross_entropy(x, musa.tensor(ts), None if w is None else musa.tensor(w),
                                          reduction=reduction, label_smoothing=0.1),
                lambda x: TF.cross_entropy(x, torch.tensor(ts), None if w is None else torch.tensor(w),
                                           reduction=reduction, label_smoothing=0.1), xs)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_probabilities(weighted, reduction):
    p = np.exp(randn(6, 5))
    p = (p / p.sum(1, keepdims=True)).astype(np.float32)
    w = WEIGHT if weighted else None
    compare(lambda x, p: F.cross_entropy(x, p, None if w is None else musa.tensor(w), reduction=reduction,
                                         label_smoothing=0.1),
            lambda x, p: TF.cross_entropy(x, p, None if w is None else torch.tensor(w), reduction=reduction,
                                          label_smoothing=0.1), LOGITS, p)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(reduction, weighted):
    w = WEIGHT if weighted else None
    for x, t in ((LOGITS, TARGET), (randn(2, 5, 3), RNG.integers(0, 5, (2, 3)))):
        compare(lambda x: F.nll_loss(x, musa.tensor(t), None if w is None else musa.tensor(w),
                                     ignore_index=1, reduction=reduction),
                lambda x: TF.nll_loss(x, torch.tensor(t), None if w is None else torch.tensor(w),
                                      ignore_index=1, reduction=reduction), x)


def test_legacy_size_average_and_reduce():
    t = musa.tensor(TARGET)
    x = musa.tensor(LOGITS)
    assert tuple(F.nll_loss(x, t, None, None, -100, False).shape) == (6,)
    np.testing.assert_allclose(F.cross_entropy(x, t, size_average=False).item(),
                               F.cross_entropy(x, t, reduction="sum").item(), rtol=1e-6)


def test_classification_loss_errors():
    x = musa.tensor(LOGITS)
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(x, musa.tensor([1, 0, 7, 2, 2, 3]))
    with pytest.raises(IndexError, match="target 7 is out of bounds for 5 classes"):
        F.cross_entropy(x, musa.tensor([1, 0, 7, 2, 2, 3]), musa.ones(5))
    with pytest.raises(ValueError, match="weight tensor should be defined"):
        F.cross_entropy(x, musa.tensor(TARGET), musa.ones(3))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(x, musa.tensor(TARGET), reduction="avg")
    with pytest.raises(ValueError, match="reduction"):
        F.nll_loss(x, musa.tensor(TARGET), musa.ones(5), reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(x, musa.tensor(TARGET), label_smoothing=1.5)
    with pytest.raises(ValueError, match=r"expected input \(N, C, \*\) and target \(N, \*\)"):
        F.nll_loss(musa.randn(2, 3, 4), musa.tensor([0, 1]))
    with pytest.raises(TypeError, match=r"^\[nll_loss\] expected class indices"):
        F.nll_loss(x, musa.zeros(6), musa.ones(5))


REGRESSION = [("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {}), ("smooth_l1_loss", dict(beta=0.3)),
              ("smooth_l1_loss", dict(beta=0.0))]


@pytest.mark.parametrize("name,kw", REGRESSION)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(name, kw, reduction):
    compare(lambda a, b: getattr(F, name)(a, b, reduction=reduction, **kw),
            lambda a, b: getattr(TF, name)(a, b, reduction=reduction, **kw), X, randn(3, 4, 5))


def test_regression_loss_warns_on_broadcast():
    with pytest.warns(UserWarning, match="different to the input size"):
        F.mse_loss(musa.randn(3, 1), musa.randn(3))
    with pytest.raises(ValueError, match="beta must be non-negative"):
        F.smooth_l1_loss(musa.randn(3), musa.randn(3), beta=-1.0)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(reduction, weighted):
    p = 1 / (1 + np.exp(-X))
    y = (RNG.random(X.shape) > 0.5).astype(np.float32)
    w = np.abs(randn(4, 5)) if weighted else None
    compare(lambda p: F.binary_cross_entropy(p, musa.tensor(y), None if w is None else musa.tensor(w),
                                             reduction=reduction),
            lambda p: TF.binary_cross_entropy(p, torch.tensor(y), None if w is None else torch.tensor(w),
                                              reduction=reduction), p.astype(np.float32))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weight,pos_weight", [(None, None), (True, None), (None, True), (True, True)])
def test_binary_cross_entropy_with_logits(reduction, weight, pos_weight):
    y = RNG.random(X.shape).astype(np.float32)
    w = np.abs(randn(4, 5)) if weight else None
    pw = np.abs(randn(5)) * 2 if pos_weight else None

    def conv(lib, a):
        return None if a is None else lib.tensor(a)
    compare(lambda x: F.binary_cross_entropy_with_logits(x * 10, musa.tensor(y), conv(musa, w),
                                                         reduction=reduction, pos_weight=conv(musa, pw)),
            lambda x: TF.binary_cross_entropy_with_logits(x * 10, torch.tensor(y), conv(torch, w),
                                                          reduction=reduction, pos_weight=conv(torch, pw)), X)


def test_binary_losses_need_equal_shapes():
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy(musa.rand(3, 1), musa.rand(3))
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(musa.rand(3, 1), musa.rand(3))


# ---- attention ----

def _sdpa_reference(q, k, v, mask=None, causal=False, scale=None):
    """PyTorch 2's documented reference implementation, written in torch."""
    s = q @ k.transpose(-2, -1) * (scale if scale is not None else 1 / np.sqrt(q.shape[-1]))
    if causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("case", ["plain", "bool_mask", "float_mask", "causal", "scale"])
def test_scaled_dot_product_attention(case):
    q, k, v = randn(2, 3, 4, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 5)
    bool_mask = RNG.random((4, 6)) > 0.3
    bool_mask[:, 0] = True  # every query sees at least one key
    kw, tkw = {}, {}
    if case == "bool_mask":
        kw, tkw = dict(attn_mask=musa.tensor(bool_mask)), dict(mask=torch.tensor(bool_mask))
    elif case == "float_mask":
        fm = randn(1, 3, 4, 6)
        kw, tkw = dict(attn_mask=musa.tensor(fm)), dict(mask=torch.tensor(fm))
    elif case == "causal":
        q, k, v = randn(2, 5, 8), randn(2, 5, 8), randn(2, 5, 8)
        kw, tkw = dict(is_causal=True), dict(causal=True)
    elif case == "scale":
        kw, tkw = dict(scale=0.3), dict(scale=0.3)
    compare(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw),
            lambda q, k, v: _sdpa_reference(q, k, v, **tkw), q, k, v)


def test_scaled_dot_product_attention_dropout_and_errors():
    q = musa.randn(2, 4, 8)
    musa.manual_seed(0)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    b = F.scaled_dot_product_attention(q, q, q)
    assert not np.allclose(a.numpy(), b.numpy())
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=musa.ones(4, 4, dtype=musa.bool), is_causal=True)
    with pytest.raises(TypeError, match="mask must be bool or floating point"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=musa.ones(4, 4, dtype=musa.int64))


def test_fully_masked_row_gives_nan_like_torch():
    q = musa.randn(1, 2, 4)
    mask = musa.tensor([[False, False], [True, True]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = F.scaled_dot_product_attention(q, q, q, attn_mask=mask).numpy()
    assert np.isnan(out[0, 0]).all() and not np.isnan(out[0, 1]).any()


@pytest.mark.parametrize("rows,d", [(2500, 48), (7, 130), (1, 16)])
def test_layer_norm_backward_does_not_depend_on_threads(rows, d):
    """The layer norm kernels sum in fixed chunks of rows (the backward's
    gweight and gbias) and fixed partial sums (the statistics): 1 and 2
    threads give the same bits, and float64 references agree."""
    rng = np.random.default_rng(1)
    x, g = (rng.standard_normal((rows, d)).astype(np.float32) * 2 + 1 for _ in range(2))
    w, b = (rng.standard_normal(d).astype(np.float32) for _ in range(2))
    outs = []
    old = musa.get_num_threads()
    try:
        for n in (1, 2):
            musa.set_num_threads(n)
            ts = [musa.tensor(a).requires_grad_() for a in (x, w, b)]
            y = F.layer_norm(ts[0], (d,), ts[1], ts[2])
            y.backward(musa.tensor(g))
            outs.append([y.detach().numpy()] + [t.grad.numpy() for t in ts])
    finally:
        musa.set_num_threads(old)
    for a, c in zip(*outs):
        np.testing.assert_array_equal(a, c)
    t = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, w, b)]
    ty = TF.layer_norm(t[0], (d,), t[1], t[2])
    ty.backward(torch.tensor(g.astype(np.float64)))
    for got, want in zip(outs[0], [ty.detach().numpy()] + [a.grad.numpy() for a in t]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1, rows ** 0.5))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_refuses_an_output_that_cannot_be_made(mode):
    # fuzz_py seed 1925: reflect padding of a (2**31, 2**31) expanded tensor
    # built a Python list of 2**31 source indices (past 3 s) before the
    # output could fail; the output is now made, or refused, first
    x = musa.full((1, 1), 0, dtype=musa.int32).expand(2 ** 31, 2 ** 31)
    with pytest.raises(MemoryError, match=r"^\[pad\] padding .* cannot be made"):
        musa.nn.functional.pad(x, (-2, 0, 2, 0), mode=mode)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_index_modes_match_torch(mode):
    x = np.random.default_rng(1).standard_normal((2, 3, 6, 5)).astype(np.float32)
    for p in [(0, 0, 0, 0), (1, 2, 3, 0), (-1, 2, 0, -2), (4, 4, 5, 5), (2, -3, 1, 1)]:
        got = musa.nn.functional.pad(musa.tensor(x), p, mode=mode).numpy()
        want = torch.nn.functional.pad(torch.tensor(x), p, mode=mode).numpy()
        np.testing.assert_array_equal(got, want)


def test_circular_pad_crops_then_wraps_as_torch():
    # a negative side crops first and the other side wraps around what is
    # left (PyTorch's order); wrapping more than once is refused (PyTorch
    # accepts it and copies overlapping slices)
    x = np.arange(24, dtype=np.float32).reshape(1, 1, 4, 6)
    for p in [(-1, 2, 0, 0), (2, -3, 0, 0), (1, -1, 1, 1), (2, 1, 1, -2), (0, 0, 1, -1)]:
        got = musa.nn.functional.pad(musa.tensor(x), p, mode="circular").numpy()
        want = torch.nn.functional.pad(torch.tensor(x), p, mode="circular").numpy()
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match=r"^\[pad\] padding \(2, -3\) wraps around .* more than once"):
        musa.nn.functional.pad(musa.tensor(x), (0, 0, 2, -3), mode="circular")


@pytest.mark.parametrize("scale", [float("inf"), float("nan"), -1.0, 0.0])
def test_interpolate_names_a_scale_that_is_not_positive_and_finite(scale):
    # fuzz_py seed 2123: an infinite scale reached int(inf) (OverflowError)
    with pytest.raises(ValueError, match=r"^\[interpolate\] scale_factor must be .* positive finite"):
        F.upsample_nearest(musa.randn(2, 3, 3), scale_factor=scale)


@pytest.mark.parametrize("scale", [1e308, 1e19])
def test_interpolate_names_a_finite_scale_whose_sizes_overflow(scale):
    # fuzz_py seed 4192: 1e308 times a size of 5 is inf, and int(inf) raised
    # an OverflowError that named nothing
    with pytest.raises(ValueError, match=r"^\[interpolate\] scale_factor .* gives output sizes"):
        F.upsample_nearest(musa.randn(2, 3, 5), scale_factor=scale)


def test_cosine_similarity_of_mixed_dtypes_computes_in_the_common_one():
    # a bfloat16 x2's norm was summed in bfloat16 beside a float32 x1
    # (2e-3 off torch: fuzz-py seed 3975); torch promotes both first
    a = np.array([[0.89, -2.66], [1.5, 0.25]], np.float32)
    b = np.array([[-0.697, 3.113], [-2.39, -3.068]], np.float32)
    got = F.cosine_similarity(musa.tensor(a), musa.tensor(b).to(musa.bfloat16))
    want = torch.nn.functional.cosine_similarity(torch.tensor(a), torch.tensor(b).bfloat16())
    assert got.dtype == musa.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64", "float32"])
@pytest.mark.parametrize("thr,value", [(-0.35, 7), (1.7, 9), (-1.5, 5), (0.5, 7.9), (float("inf"), 3)])
def test_threshold_converts_the_threshold_to_an_integer_dtype(dtype, thr, value):
    # fuzz-py seed 4910: int32 0 was kept against -0.35 (compared in float);
    # torch converts the threshold to the tensor's dtype first (toward zero)
    x = np.array([-1, 0, 1, 2, 3], dtype) if dtype != "uint8" else np.array([0, 1, 2, 3], dtype)
    try:
        want = TF.threshold(torch.tensor(x), thr, value)
    except RuntimeError:  # not representable in the dtype: both refuse
        with pytest.raises(RuntimeError, match=r"^\[threshold\] threshold .* cannot be converted"):
            F.threshold(musa.tensor(x), thr, value)
        return
    got = F.threshold(musa.tensor(x), thr, value)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    y = musa.tensor(x)
    F.threshold_(y, thr, value)
    np.testing.assert_array_equal(y.numpy(), want.numpy())



@pytest.mark.parametrize("thr", [1.5, float("nan"), float("-inf")])
def test_threshold_keeps_nan_as_torch(thr):
    # fuzz-py seed 6318: NaN is not above the threshold, and musa replaced
    # it by the value; PyTorch replaces x <= threshold, so NaN stays
    x = [float("nan"), 1.0, 2.0, float("-inf"), float("inf")]
    want = TF.threshold(torch.tensor(x, dtype=torch.float64), thr, 9.0)
    got = F.threshold(musa.tensor(x, dtype=musa.float64), thr, 9.0)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    m = musa.nn.Threshold(thr, 9.0)(musa.tensor(x))
    np.testing.assert_array_equal(m.numpy(), want.float().numpy())


def test_threshold_of_a_bool_tensor_is_refused_by_name():
    with pytest.raises(TypeError, match=r"^\[threshold\] input of dtype bool"):
        F.threshold(musa.tensor([True, False]), 0.5, 1)
