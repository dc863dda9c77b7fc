"""musa.Config(fuse_attention=True): written-out attention (q @ k^T, an
optional scale and mask, softmax, @ v) and the backward its ops record run
as the fused scaled_dot_product_attention kernels (pass "attention"):
results and gradients against eager, the forms it matches and the ones it
leaves alone, memory, and saved models."""
import math

import numpy as np
import pytest

import musa
import musa.nn as nn
import musa.nn.functional as F

FA = musa.Config(fuse_attention=True)
B, H, T, E = 2, 3, 6, 4


def arr(t):
    return t.detach().numpy()


def qkv(requires_grad=False, seed=0):
    musa.manual_seed(seed)
    return [musa.randn(B, H, T, E, requires_grad=requires_grad) for _ in range(3)]


FUTURE = musa.tril(musa.ones(T, T)) == 0  # True above the diagonal: masked


def written_out(q, k, v, form="mul_mask"):
    """Attention as models wrote it before F.scaled_dot_product_attention."""
    if form == "div_keep":  # scaled by a division, masked where the mask is False
        s = q.matmul(k.transpose(-2, -1)) / math.sqrt(E)
        s = musa.where(~FUTURE, s, float("-inf"))
    elif form == "plain":
        s = q @ k.transpose(-2, -1)
    elif form == "tb":  # k^T through matmul's own transpose: k.mT read by the GEMM
        s = musa.matmul(q, k.transpose(-2, -1).contiguous().transpose(-2, -1).transpose(-2, -1))
    else:
        s = q.matmul(k.transpose(2, 3)) * (1.0 / math.sqrt(E))
        s = s.masked_fill(FUTURE, float("-inf"))
    return F.softmax(s, dim=-1).matmul(v)


def fused_ops(fn):
    g = fn.get_graph()
    return (g.count("scaled_dot_product_attention("),
            g.count("scaled_dot_product_attention_backward("), g.count("softmax"))


@pytest.mark.parametrize("form", ["mul_mask", "div_keep", "plain", "tb"])
def test_forward_matches_eager(form):
    q, k, v = qkv()
    f = musa.jit(lambda q, k, v: written_out(q, k, v, form), config=FA)
    got = f(q, k, v)
    want = written_out(q, k, v, form)
    np.testing.assert_allclose(arr(got), arr(want), rtol=1e-5, atol=1e-6)
    assert fused_ops(f) == (1, 0, 0)


def test_off_by_default_and_disable_pass():
    q, k, v = qkv()
    for cfg in (musa.Config(), musa.Config(fuse_attention=True, disable_passes=("attention",))):
        f = musa.jit(lambda q, k, v: written_out(q, k, v), config=cfg)
        got = f(q, k, v)
        assert fused_ops(f)[0] == 0
        assert np.array_equal(arr(got), arr(written_out(q, k, v)))  # eager's bits
    assert "fuse_attention=True" in repr(FA)


@pytest.mark.parametrize("form", ["mul_mask", "div_keep", "plain"])
def test_whole_step_gradients(form):
    """A step with its backward inside: the backward's ops become one fused
    backward node; gradients within rounding of eager's."""
    def step(q, k, v):
        y = written_out(q, k, v, form)
        (y * y).sum().backward()
        return q.grad, k.grad, v.grad

    want = step(*qkv(True))
    f = musa.jit(step, config=FA)
    got = f(*qkv(True))
    assert fused_ops(f) == (1, 1, 0)
    for a, b in zip(got, want):
        np.testing.assert_allclose(arr(a), arr(b), rtol=2e-5, atol=2e-5)


def test_compiled_forward_with_backward_outside():
    """A compiled model trained with loss.backward() outside: static autodiff
    builds the backward from the fused node."""
    musa.manual_seed(0)
    proj = nn.Linear(E, 3 * E)

    def model(x):
        q, k, v = proj(x).split(E, dim=-1)
        return written_out(q, k, v)

    x = musa.randn(B, H, T, E)
    grads = []
    compiled = musa.jit(model, config=FA)
    for fn in (model, compiled):
        proj.zero_grad()
        y = fn(x)
        (y * y).sum().backward()
        grads.append([arr(p.grad).copy() for p in proj.parameters()] + [arr(y).copy()])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)
    # the forward plan fuses, and its backward plan runs the fused backward
    node = next(e.train for e in compiled._cache.values() if e.train is not None)
    fwd, bwd = node.fwd.graph.text(), node.bwd.graph.text()
    assert "scaled_dot_product_attention(" in fwd and "softmax" not in fwd
    assert "scaled_dot_product_attention_backward(" in bwd and "softmax" not in bwd


class GPTBlock(nn.Module):
    """A GPT block's attention, written out: heads as strided views of one
    projection, a causal buffer, a residual (test_attention_exact.py too)."""

    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.register_buffer("future", musa.tril(musa.ones(seq, seq)) == 0)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = q.matmul(k.transpose(2, 3)) * (1.0 / math.sqrt(c // self.heads))
        att = F.softmax(att.masked_fill(self.future[:t, :t], float("-inf")), dim=-1)
        return x + self.proj(att.matmul(v).transpose(1, 2).reshape(b, t, c))


def test_gpt_training_tracks_eager_and_saves_memory():
    """GPT-style blocks (heads as strided views of one projection, a causal
    buffer, residuals): the compiled step with the option follows eager's
    losses, and its plan holds no probabilities (a smaller arena)."""
    d, seq = 32, 16

    def run(cfg):
        musa.manual_seed(0)
        net = nn.Sequential(GPTBlock(d, 4, seq), GPTBlock(d, 4, seq))
        opt = musa.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        x = musa.randn(4, seq, d)

        def step(x):
            opt.zero_grad()
            loss = (net(x) ** 2).mean()
            loss.backward()
            opt.step()
            return loss.detach()

        fn = step if cfg is None else musa.jit(step, config=cfg)
        return [float(fn(x)) for _ in range(5)], fn

    eager, _ = run(None)
    plain, f0 = run(musa.Config())
    fused, f1 = run(FA)
    assert plain == eager  # the default computes eager's bits
    np.testing.assert_allclose(fused, eager, rtol=1e-5)
    assert fused_ops(f1) == (2, 2, 0)
    assert f1.plan_stats()["arena_bytes"] < f0.plan_stats()["arena_bytes"]


def test_left_alone_when_the_probabilities_are_read_elsewhere():
    """P returned (or read by another op) must exist: no rewrite, and the
    default's bits."""
    q, k, v = qkv()

    def f(q, k, v):
        p = F.softmax(q @ k.transpose(-2, -1), dim=-1)
        return p @ v, p

    c = musa.jit(f, config=FA)
    got, want = c(q, k, v), f(q, k, v)
    assert fused_ops(c)[0] == 0
    for a, b in zip(got, want):
        assert np.array_equal(arr(a), arr(b))


def test_left_alone_other_shapes():
    """A softmax over another dim, keys broadcast over the batch, an additive
    float mask: not attention as the kernel computes it."""
    q, k, v = qkv()
    k1 = k[:1]
    bias = musa.randn(T, T)
    cases = [
        lambda q, k, v: F.softmax(q @ k.transpose(-2, -1), dim=-2) @ v,
        lambda q, k, v: F.softmax(q @ k1.transpose(-2, -1), dim=-1) @ v,
        lambda q, k, v: F.softmax(q @ k.transpose(-2, -1) + bias, dim=-1) @ v,
    ]
    for fn in cases:
        c = musa.jit(fn, config=FA)
        got = c(q, k, v)
        assert fused_ops(c)[0] == 0
        assert np.array_equal(arr(got), arr(fn(q, k, v)))


def test_gradient_read_elsewhere_keeps_the_composed_backward():
    """A step that also returns the scores' gradient path's value (the
    softmax's input gradient through a hook-free second use of the scores):
    the backward does not match, so nothing is rewritten."""
    def step(q, k, v):
        s = q @ k.transpose(-2, -1)
        y = F.softmax(s, dim=-1) @ v
        (y.sum() + s.sum()).backward()
        return q.grad, k.grad, v.grad

    want = step(*qkv(True))
    c = musa.jit(step, config=FA)
    got = c(*qkv(True))
    assert fused_ops(c)[0] == 0
    for a, b in zip(got, want):
        assert np.array_equal(arr(a), arr(b))


def test_unbatched_two_dim_attention():
    q, k, v = (t[0, 0] for t in qkv())
    f = musa.jit(lambda q, k, v: F.softmax(q @ k.t() * 0.5, dim=-1) @ v, config=FA)
    got = f(q, k, v)
    assert fused_ops(f)[0] == 1
    np.testing.assert_allclose(arr(got), arr(F.softmax(q @ k.t() * 0.5, dim=-1) @ v), rtol=1e-5,
                               atol=1e-6)


def test_float64():
    q, k, v = (t.double() for t in qkv())
    f = musa.jit(lambda q, k, v: written_out(q, k, v), config=FA)
    got = f(q, k, v)
    assert fused_ops(f)[0] == 1
    np.testing.assert_allclose(arr(got), arr(written_out(q, k, v)), rtol=1e-12, atol=1e-12)


def test_saved_model_keeps_the_option(tmp_path):
    musa.manual_seed(0)
    proj = nn.Linear(E, 3 * E)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = proj

        def forward(self, x):
            q, k, v = self.proj(x).split(E, dim=-1)
            return written_out(q, k, v)

    x = musa.randn(B, H, T, E)
    with musa.no_grad():
        traced = musa.jit.trace(M().eval(), (x,), config=FA)
        want = traced(x)
    assert fused_ops(traced)[0] == 1
    traced.save(tmp_path / "fa.musa")
    loaded = musa.jit.load(tmp_path / "fa.musa")
    assert loaded.header()["config"]["fuse_attention"] is True
    assert np.array_equal(arr(loaded(x)), arr(want))  # the loader fuses it too


def _random_case(seed, heads=False):
    """A random written-out attention: shapes, k given as k or as k^T, a
    scale or not, a mask (masking where True or keeping where True) or not,
    dtype, which arguments require grad, and sometimes an extra output that
    must keep the ops (the probabilities or the scores). heads: sizes the
    default eager-bits fusion takes (test_attention_exact.py)."""
    rng = np.random.default_rng(seed)
    nb = int(rng.integers(0, 3))
    batch = [int(rng.integers(1, 4)) for _ in range(nb)]
    tq, tk = (int(rng.choice([16, 17, 33, 64, 128] if heads else [1, 3, 8, 17]))
              for _ in range(2))
    e, ev = (int(rng.choice([16, 24, 40] if heads else [1, 4, 8])),
             int(rng.choice([2, 8, 40] if heads else [1, 4, 8])))
    dtype = musa.float64 if rng.random() < 0.3 else musa.float32
    k_as_kt = rng.random() < 0.3
    scale = rng.choice(["none", "mul", "rmul", "div"])
    mask_kind = rng.choice(["none", "fill", "keep"])
    mask_shape = [tq, tk] if rng.random() < 0.5 else [1] * min(nb, 1) + [tq, tk]
    extra = rng.choice(["none", "none", "none", "probs", "scores"])
    grads = [bool(rng.random() < 0.7) for _ in range(3)] if rng.random() < 0.6 else None
    if grads is not None and not any(grads):
        grads[int(rng.integers(0, 3))] = True
    musa.manual_seed(seed)
    q = musa.randn(*batch, tq, e, dtype=dtype)
    k = musa.randn(*batch, e, tk, dtype=dtype) if k_as_kt else musa.randn(*batch, tk, e, dtype=dtype)
    v = musa.randn(*batch, tk, ev, dtype=dtype)
    mask = musa.rand(*mask_shape) < 0.3
    c = float(rng.uniform(0.1, 2.0))

    def attend(q, k, v):
        s = q @ (k if k_as_kt else k.transpose(-2, -1))
        if scale == "mul":
            s = s * c
        elif scale == "rmul":
            s = c * s
        elif scale == "div":
            s = s / c
        scores = s
        if mask_kind == "fill":
            s = s.masked_fill(mask, float("-inf"))
        elif mask_kind == "keep":
            s = musa.where(mask, s, float("-inf"))
        p = F.softmax(s, dim=-1)
        out = p @ v
        return out, {"probs": p, "scores": scores}.get(extra)

    outside = grads is not None and seed % 3 == 0  # the backward outside the compiled function

    def fn(q, k, v):
        out, more = attend(q, k, v)
        if grads is not None and not outside:
            (out * out).sum().backward()
            gs = tuple(t.grad for t, g in zip((q, k, v), grads) if g)
            return (out,) + gs + ((more,) if more is not None else ())
        return (out, more) if more is not None else out

    def args():
        return [t.detach().clone().requires_grad_(grads is not None and g)
                for t, g in zip((q, k, v), grads or (False,) * 3)]

    if outside:
        def run(f):
            ts = args()
            res = f(*ts)
            out = res[0] if isinstance(res, tuple) else res
            (out * out).sum().backward()
            return (out,) + tuple(t.grad for t, g in zip(ts, grads) if g) + (
                res[1:] if isinstance(res, tuple) else ())
    else:
        def run(f):
            return f(*args())
    return fn, run, extra != "none", dtype


@pytest.mark.parametrize("seed", range(60))
def test_random_attention_programs(seed):
    """Compiled with the option, random attention programs agree with eager
    within rounding (a third of those with gradients take the backward
    outside the compiled function: compiled training), and the ops are fused
    exactly when nothing else reads the probabilities or the scores."""
    fn, run, extra, dtype = _random_case(seed)
    want = run(fn)
    c = musa.jit(fn, config=FA)
    got = run(c)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    tol = 1e-10 if dtype == musa.float64 else 2e-4
    for a, b in zip(got, want):
        np.testing.assert_allclose(arr(a), arr(b), rtol=tol, atol=tol, equal_nan=True)
    assert fused_ops(c)[0] == (0 if extra else 1), c.get_graph()


def test_dynamic_batch_with_backward_outside():
    """A dynamic batch dim, compiled training: each size's forward and
    backward plans fuse, and follow eager."""
    musa.manual_seed(0)
    proj = nn.Linear(E, 3 * E)

    def model(x):
        q, k, v = proj(x).split(E, dim=-1)
        return written_out(q, k, v)

    cfg = musa.Config(fuse_attention=True, dynamic={0: {0: (1, 8)}})
    compiled = musa.jit(model, config=cfg)
    for b in (2, 3, 5):
        x = musa.randn(b, H, T, E)
        outs = []
        for fn in (model, compiled):
            proj.zero_grad()
            y = fn(x)
            (y * y).sum().backward()
            outs.append([arr(y).copy()] + [arr(p.grad).copy() for p in proj.parameters()])
        for a, c in zip(*outs):
            np.testing.assert_allclose(a, c, rtol=2e-5, atol=2e-5)
    assert "scaled_dot_product_attention(" in compiled.get_graph()
