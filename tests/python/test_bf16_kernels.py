"""bfloat16 matmul, linear and convolutions on oneDNN's bfloat16 primitives
(float32 accumulation, one rounding of the result), against float32
arithmetic on the same bfloat16 inputs; the float32 fallbacks (forced with
MUSA_BF16_GEMM_F32 and MUSA_CONV_IM2COL) against the primitives; and a
compiled bfloat16 forward and backward against the eager ones."""
import os

import numpy as np
import pytest
import torch

import musa
import musa.nn as nn
import musa.nn.functional as F

# the result is rounded once to bfloat16 (8 bits): relative to the largest
# magnitude, errors stay within a few units of 2^-9
TOL = 2.0 ** -7


def bf(a):
    return musa.tensor(np.asarray(a, dtype=np.float32)).to(musa.bfloat16)


def f32(t):
    return torch.tensor(t.detach().float().numpy())


def rel(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    if want.size == 0:
        return 0.0
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(params=["primitive", "fallback"])
def path(request, monkeypatch):
    if request.param == "fallback":
        monkeypatch.setenv("MUSA_BF16_GEMM_F32", "1")
        monkeypatch.setenv("MUSA_CONV_IM2COL", "1")
    return request.param


@pytest.mark.parametrize("sa, sb, ta, tb", [
    ((64, 96), (96, 32), False, False),
    ((64, 96), (32, 96), False, True),     # B a transposed view
    ((96, 64), (96, 32), True, False),     # A a transposed view
    ((3, 5, 16, 24), (5, 24, 7), False, False),  # broadcast batch
    ((7,), (7, 3), False, False),
    ((4, 9), (9,), False, False),
    ((0, 5), (5, 3), False, False),
    ((4, 0), (0, 3), False, False),        # empty sum: zeros
])
def test_matmul(rng, path, sa, sb, ta, tb):
    a, b = bf(rng.standard_normal(sa)), bf(rng.standard_normal(sb))
    if ta:
        a = a.transpose(-1, -2)
    if tb:
        b = b.transpose(-1, -2)
    c = a @ b
    assert c.dtype == musa.bfloat16
    assert rel(c.float().numpy(), (f32(a) @ f32(b)).numpy()) <= TOL


@pytest.mark.parametrize("xs, ws, bias", [((8, 16), (4, 16), True), ((2, 5, 16), (4, 16), False),
                                          ((3, 0), (4, 0), True), ((0, 5), (4, 5), True)])
def test_linear_forward_and_backward(rng, path, xs, ws, bias):
    x, w, b = (bf(rng.standard_normal(s)).requires_grad_() for s in (xs, ws, ws[:1]))
    tx, tw, tb = (f32(t).requires_grad_() for t in (x, w, b))
    y = F.linear(x, w, b if bias else None)
    ty = torch.nn.functional.linear(tx, tw, tb if bias else None)
    assert y.dtype == musa.bfloat16 and tuple(y.shape) == tuple(ty.shape)
    assert rel(y.float().detach().numpy(), ty.detach().numpy()) <= TOL
    g = rng.standard_normal(tuple(y.shape))
    y.backward(bf(g))
    ty.backward(f32(bf(g)))
    for m, t in [(x, tx), (w, tw)] + ([(b, tb)] if bias else []):
        assert m.grad.dtype == musa.bfloat16
        assert rel(m.grad.float().numpy(), t.grad.numpy()) <= TOL


@pytest.mark.parametrize("xs, ws, kw", [
    ((2, 3, 8, 8), (4, 3, 3, 3), dict(padding=1)),
    ((2, 4, 9, 7), (6, 2, 3, 2), dict(stride=2, groups=2)),
    ((1, 3, 8, 8), (5, 3, 1, 1), dict()),
    ((2, 3, 10, 10), (4, 3, 3, 3), dict(dilation=2, padding=2)),
    # small output planes: the weight gradient as one GEMM over the batch
    ((3, 5, 4, 4), (6, 5, 3, 3), dict(padding=1)),
    ((2, 4, 9, 7), (6, 4, 3, 2), dict(stride=2, padding=(1, 0))),
    ((2, 3, 8, 8), (4, 3, 1, 1), dict(stride=2)),
    ((2, 3, 4, 4), (4, 3, 3, 3), dict(dilation=2, padding=2)),
    ((1, 8, 3, 3), (8, 8, 3, 3), dict(stride=2, padding=1)),
    ((2, 3, 16, 16), (4, 3, 3, 3), dict(stride=2, padding=1)),
    # whole blocks of 16 channels: activations move to and from oneDNN's
    # nChw16c by our transposition (planes of 16 elements and tails)
    ((2, 16, 5, 5), (32, 16, 3, 3), dict(padding=1)),
    ((1, 32, 7, 9), (16, 32, 3, 3), dict(padding=1)),
    ((2, 32, 8, 8), (16, 32, 3, 3), dict(stride=2, padding=1)),
    ((3, 16, 1, 1), (32, 16, 3, 3), dict(padding=1)),  # 1x1 planes: tails only
])
def test_conv2d_forward_and_backward(rng, path, xs, ws, kw):
    x = bf(rng.standard_normal(xs)).requires_grad_()
    w = bf(rng.standard_normal(ws) * 0.2).requires_grad_()
    b = bf(rng.standard_normal(ws[0])).requires_grad_()
    tx, tw, tb = (f32(t).requires_grad_() for t in (x, w, b))
    y = F.conv2d(x, w, b, **kw)
    ty = torch.nn.functional.conv2d(tx, tw, tb, **kw)
    assert y.dtype == musa.bfloat16
    assert rel(y.float().detach().numpy(), ty.detach().numpy()) <= TOL
    g = rng.standard_normal(tuple(y.shape))
    y.backward(bf(g))
    ty.backward(f32(bf(g)))
    for m, t in [(x, tx), (w, tw), (b, tb)]:
        assert m.grad.dtype == musa.bfloat16
        assert rel(m.grad.float().numpy(), t.grad.numpy()) <= TOL


def test_primitive_and_fallback_agree_closely(rng, monkeypatch):
    x = bf(rng.standard_normal((2, 3, 8, 8)))
    w = bf(rng.standard_normal((4, 3, 3, 3)))
    a, b = bf(rng.standard_normal((33, 40))), bf(rng.standard_normal((40, 17)))
    fast = (F.conv2d(x, w, padding=1), a @ b)
    monkeypatch.setenv("MUSA_BF16_GEMM_F32", "1")
    monkeypatch.setenv("MUSA_CONV_IM2COL", "1")
    slow = (F.conv2d(x, w, padding=1), a @ b)
    for p, q in zip(fast, slow):  # both round the same float32 sums once: a bfloat16 ulp apart at most
        assert rel(p.float().numpy(), q.float().numpy()) <= 2.0 ** -7


def test_compiled_bf16_forward_and_backward_equal_eager():
    def run(compiled):
        musa.manual_seed(0)
        net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
                            nn.Linear(8 * 8 * 8, 10)).to(musa.bfloat16)
        x = musa.randn(4, 3, 8, 8).to(musa.bfloat16)
        y = musa.randint(0, 10, (4,))

        def step():
            for p in net.parameters():
                p.grad = None
            loss = F.cross_entropy(net(x).float(), y)
            loss.backward()
            return loss.detach()

        if compiled:
            step = musa.jit(step)
        losses = [float(step()) for _ in range(2)]
        return losses, [p.grad.float().numpy() for p in net.parameters()]

    (l0, g0), (l1, g1) = run(False), run(True)
    assert l0 == l1
    for a, b in zip(g0, g1):
        assert np.array_equal(a, b)
    assert len(g0) == 4 and all(np.abs(g).max() > 0 for g in g0)


def test_fallback_switches_are_read_per_call(monkeypatch):
    # documented switches: the kernels read them at every call
    assert "MUSA_BF16_GEMM_F32" not in os.environ
    a = bf(np.ones((4, 4)))
    monkeypatch.setenv("MUSA_BF16_GEMM_F32", "1")
    assert float((a @ a).float().sum()) == 64.0


def test_flipping_a_switch_under_a_plan_fails_cleanly(rng, monkeypatch):
    # a plan sizes its workspace for the primitive; the float32 way needs more
    x = bf(rng.standard_normal((2, 3, 8, 8)))
    w = bf(rng.standard_normal((4, 3, 3, 3)))
    a, b = bf(rng.standard_normal((33, 40))), bf(rng.standard_normal((40, 17)))
    conv = musa.jit(lambda x, w: F.conv2d(x, w, padding=1))
    mm = musa.jit(lambda a, b: a @ b)
    want = (conv(x, w), mm(a, b))
    monkeypatch.setenv("MUSA_BF16_GEMM_F32", "1")
    monkeypatch.setenv("MUSA_CONV_IM2COL", "1")
    for f, args, ref in ((conv, (x, w), want[0]), (mm, (a, b), want[1])):
        try:
            got = f(*args)
        except RuntimeError as e:
            assert "workspace" in str(e)
        else:
            assert rel(got.float().numpy(), ref.float().numpy()) <= 2.0 ** -7


@pytest.mark.parametrize("dt", [musa.bfloat16, musa.float16])
def test_compiled_low_precision_ops_keep_eager_dtypes_and_values(dt):
    # ops computed in float32 and rounded once (layer_norm, softmax, ...) keep
    # their low-precision output in a plan: recorded as a float32 value and a cast
    musa.manual_seed(0)
    ln, lin = nn.LayerNorm(8).to(dt), nn.Linear(8, 3).to(dt)
    x = musa.randn(2, 8).to(dt)

    def f(x):
        h = ln(x)
        return lin(h), F.softmax(h, dim=-1), h

    want = f(x)
    got = musa.jit(f)(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype == dt
        assert np.array_equal(g.detach().float().numpy(), w.detach().float().numpy())


@pytest.mark.parametrize("wdt", [musa.float32, musa.bfloat16])
def test_batch_norm_of_bfloat16_input_keeps_its_dtype(rng, wdt):
    # float32 weights (autocast's case) or bfloat16 ones: bfloat16 in and out,
    # float32 statistics and weight gradients in the weights' dtype
    x = bf(rng.standard_normal((4, 3, 5, 5)) * 2 + 1).requires_grad_()
    w = musa.tensor(rng.standard_normal(3).astype(np.float32)).to(wdt).requires_grad_()
    b = musa.tensor(rng.standard_normal(3).astype(np.float32)).to(wdt).requires_grad_()
    y = F.batch_norm(x, None, None, w, b, training=True)
    tx, tw, tb = (f32(t).requires_grad_() for t in (x, w, b))
    ty = torch.nn.functional.batch_norm(tx, None, None, tw, tb, training=True)
    assert y.dtype == musa.bfloat16
    assert rel(y.float().detach().numpy(), ty.detach().numpy()) <= TOL
    g = rng.standard_normal(tuple(y.shape))
    y.backward(bf(g))
    ty.backward(f32(bf(g)))
    assert x.grad.dtype == musa.bfloat16 and w.grad.dtype == wdt
    for m, t in [(x, tx), (w, tw), (b, tb)]:
        assert rel(m.grad.float().numpy(), t.grad.numpy()) <= TOL


@pytest.mark.parametrize("dtype", [musa.bfloat16, musa.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sigmoid", "erf", "gelu", "gelu_tanh",
                                  "gelu_backward", "gelu_tanh_backward"])
def test_low_precision_math_is_float32_math_rounded_once(dtype, name):
    """Math on float16/bfloat16 is the float32 kernel's on the widened values,
    rounded once: bit for bit, over full blocks, tails and strided views."""
    musa.manual_seed(5)
    x = (musa.randn(3, 1000) * 3).to(dtype)[:, 1:]  # 999 columns: blocks and a tail
    g = musa.randn(3, 999).to(dtype)
    if name == "log":
        x = x.abs() + 0.5  # rounded to dtype here, before the comparison
    xs = x.t()  # strided
    ops = {"exp": musa.exp, "log": musa.log, "tanh": musa.tanh,
           "sigmoid": musa.sigmoid, "erf": musa.erf, "gelu": F.gelu,
           "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}
    for t in (x, xs):
        if name.endswith("backward"):
            approx = "tanh" if "tanh" in name else "none"
            def f(v, gg):
                v = v.detach().requires_grad_()
                F.gelu(v, approximate=approx).backward(gg)
                return v.grad
            gg = g if t is x else g.t()
            got = f(t, gg)
            want = f(t.float(), gg.float()).to(dtype)
        else:
            got, want = ops[name](t), ops[name](t.float()).to(dtype)
        assert got.dtype == dtype
        assert np.array_equal(got.float().numpy(), want.float().numpy(), equal_nan=True)


@pytest.mark.parametrize("dtype", [musa.bfloat16, musa.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("shape,nd", [((512, 512), 1), ((3, 7, 33), 2), ((4, 65), 1), ((0, 8), 1)])
def test_layer_norm_of_low_precision_rows_is_float32_rounded_once(dtype, shape, nd):
    """layer_norm reads and writes float16/bfloat16 rows as they are: its
    output is the float32 layer norm of the widened values rounded once, bit
    for bit; its backward and the weights' gradients keep working. (The
    statistics it stores are checked through layer_norm_apply, which a
    compiled step's remat runs: test_compiled_bf16_layer_norm_step_equals_eager.)"""
    musa.manual_seed(3)
    x = (musa.randn(*shape) * 3 + 1).to(dtype)
    w, b = musa.randn(*shape[-nd:]).to(dtype), musa.randn(*shape[-nd:]).to(dtype)
    y = F.layer_norm(x, shape[-nd:], w, b)
    want = F.layer_norm(x.float(), shape[-nd:], w.float(), b.float()).to(dtype)
    assert y.dtype == dtype
    assert np.array_equal(y.float().numpy(), want.float().numpy())
    if x.numel() == 0:
        return
    xg, wg, bg = (t.detach().requires_grad_() for t in (x, w, b))
    F.layer_norm(xg, shape[-nd:], wg, bg).float().sum().backward()
    assert xg.grad.dtype == dtype and wg.grad.dtype == dtype
    assert np.isfinite(xg.grad.float().numpy()).all()


def test_compiled_bf16_layer_norm_step_equals_eager():
    # a layer norm whose output the backward reads again (remat recomputes
    # it with layer_norm_apply, on bfloat16 rows too)
    def run(compiled):
        musa.manual_seed(0)
        layers = [nn.Linear(16, 32)]
        for _ in range(6):
            layers += [nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 32)]
        net = nn.Sequential(*layers, nn.Linear(32, 4)).to(musa.bfloat16)
        x = musa.randn(64, 16).to(musa.bfloat16)

        def step():
            for p in net.parameters():
                p.grad = None
            loss = net(x).float().pow(2).mean()
            loss.backward()
            return loss.detach()

        if compiled:
            step = musa.jit(step)
        losses = [float(step()) for _ in range(2)]
        if compiled:
            assert "layer_norm_apply" in step.plan_text()
        return losses, [p.grad.float().numpy() for p in net.parameters()]

    (l0, g0), (l1, g1) = run(False), run(True)
    assert l0 == l1
    for a, b in zip(g0, g1):
        assert np.array_equal(a, b)
