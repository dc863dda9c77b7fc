"""The fused attention kernel behind F.scaled_dot_product_attention:
results and gradients against a float64 composition, strided head views,
broadcasting, masks, dtypes, create_graph, autocast, thread counts, compiled
steps, and what it saves in memory."""
import math

import numpy as np
import pytest

import musa
import musa.nn.functional as F
from musa import _C


def composite(q, k, v, mask=None, causal=False, scale=None):
    """softmax(q k^T scale, masked) v with separate ops, in float64."""
    q, k, v = q.double(), k.double(), v.double()
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        mask = musa.ones(q.shape[-2], k.shape[-2], dtype=musa.bool).tril()
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return F.softmax(s, -1) @ v


def grads_of(fn, tensors, g):
    ts = [t.detach().clone().requires_grad_() for t in tensors]
    y = fn(*ts)
    y.backward(g.to(y.dtype))
    return y, [t.grad for t in ts]


def assert_close(a, b, tol):
    a, b = a.detach().double().numpy(), b.detach().double().numpy()
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def heads(x, B, T, H, E):
    """(B, T, H*E) -> (B, H, T, E) as a strided view (no copy)."""
    return x.reshape(B, T, H, E).transpose(1, 2)


CASES = {
    # name: (q shape, k shape, v shape, kwargs)
    "plain": ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6), {}),
    "causal_square": ((2, 2, 9, 4), (2, 2, 9, 4), (2, 2, 9, 4), dict(is_causal=True)),
    "causal_more_keys": ((1, 2, 4, 3), (1, 2, 9, 3), (1, 2, 9, 5), dict(is_causal=True)),
    "causal_more_queries": ((1, 2, 9, 3), (1, 2, 4, 3), (1, 2, 4, 5), dict(is_causal=True)),
    "several_blocks": ((1, 1, 150, 8), (1, 1, 140, 8), (1, 1, 140, 8), dict(is_causal=True)),
    "broadcast_batch": ((2, 3, 5, 4), (1, 3, 6, 4), (2, 1, 6, 4), {}),
    "no_batch": ((5, 4), (6, 4), (6, 3), dict(scale=0.9)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_the_composition(name):
    qs, ks, vs, kw = CASES[name]
    musa.manual_seed(1)
    q, k, v = musa.randn(*qs), musa.randn(*ks), musa.randn(*vs)
    out_shape = tuple(np.broadcast_shapes(qs[:-2], ks[:-2], vs[:-2])) + (qs[-2], vs[-1])
    g = musa.randn(*out_shape)
    y, gr = grads_of(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw), (q, k, v), g)
    causal = kw.get("is_causal", False)
    r, rg = grads_of(lambda q, k, v: composite(q, k, v, causal=causal, scale=kw.get("scale")),
                     (q, k, v), g)
    assert y.dtype == musa.float32 and tuple(y.shape) == out_shape
    assert_close(y, r, 2e-5)
    for a, b in zip(gr, rg):
        assert a.shape == b.shape
        assert_close(a, b, 5e-5)


def test_head_views_of_a_projection_and_masks():
    """q, k, v as strided views of one (B, T, 3C) projection (what a GPT
    block passes), with a per-batch bool mask broadcast over the heads."""
    B, T, H, E = 2, 6, 3, 4
    musa.manual_seed(2)
    qkv = musa.randn(B, T, 3 * H * E)
    mask = musa.rand(B, 1, T, T) > 0.4
    mask[..., 0] = True
    g = musa.randn(B, H, T, E)

    def split(x):
        return [heads(t, B, T, H, E) for t in x.split(H * E, dim=2)]

    y, (gx,) = grads_of(lambda x: F.scaled_dot_product_attention(*split(x), attn_mask=mask), (qkv,), g)
    r, (rx,) = grads_of(lambda x: composite(*split(x), mask=mask), (qkv,), g)
    assert not split(qkv)[0].is_contiguous()
    assert_close(y, r, 2e-5)
    assert_close(gx, rx, 5e-5)


@pytest.mark.parametrize("kind", ["random", "runs", "strided"])
def test_masks_over_many_keys(kind):
    """Masks over 21 keys (the kernel reads contiguous mask rows eight keys
    a word, then the tail): random, in runs (a causal band with a gap), and
    a transposed (strided) mask, forward and backward."""
    T, E = 21, 5
    musa.manual_seed(3)
    q, k, v = (musa.randn(2, 3, T, E) for _ in range(3))
    if kind == "random":
        mask = musa.rand(T, T) > 0.5
    else:
        mask = musa.ones(T, T, dtype=musa.bool).tril() & ~musa.ones(T, T, dtype=musa.bool).tril(-12)
        mask[:, 9] = False
        if kind == "strided":
            mask = mask.t().contiguous().t()
            assert not mask.is_contiguous()
    mask[:, 0] = True
    g = musa.randn(2, 3, T, E)
    y, gs = grads_of(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                     (q, k, v), g)
    r, rs = grads_of(lambda q, k, v: composite(q, k, v, mask=mask), (q, k, v), g)
    assert_close(y, r, 2e-5)
    for a, b in zip(gs, rs):
        assert_close(a, b, 5e-5)


def test_the_function_runs_the_fused_kernel():
    q, k, v = musa.randn(2, 5, 4), musa.randn(2, 6, 4), musa.randn(2, 6, 3)
    fused = _C.scaled_dot_product_attention(q, k, v, None, 0.5, True)
    assert np.array_equal(F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5).numpy(),
                          fused.numpy())
    # float masks and dropout keep the composition (same values, other bits)
    fm = musa.zeros(5, 6)
    assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=fm), composite(q, k, v), 2e-6)


def test_float64_and_a_query_that_sees_no_key():
    q, k, v = (musa.randn(2, 3, 4, dtype=musa.float64) for _ in range(3))
    mask = musa.tensor([[True, True, False], [False, False, False], [True, False, True]])
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    r = composite(q, k, v, mask=mask)
    assert y.dtype == musa.float64
    assert np.isnan(y.numpy()[:, 1]).all() and np.isnan(r.numpy()[:, 1]).all()
    np.testing.assert_allclose(y.numpy()[:, [0, 2]], r.numpy()[:, [0, 2]], rtol=1e-13, atol=1e-13)
    # its masked scores are constants: q and k get no gradient through them
    # (0, as masked_fill's backward gives, not 0 * NaN), while v's gradient
    # sees the row's NaN probabilities in both forms
    g = musa.randn(2, 3, 4, dtype=musa.float64)
    g[:, 1] = 0
    _, gs = grads_of(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                     (q, k, v), g)
    _, rs = grads_of(lambda q, k, v: composite(q, k, v, mask=mask), (q, k, v), g)
    for a, b in zip(gs[:2], rs[:2]):
        assert not np.isnan(a.numpy()).any()
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
    assert np.isnan(gs[2].numpy()).any() and np.isnan(rs[2].numpy()).any()


@pytest.mark.parametrize("dtype,tol", [(musa.bfloat16, 3e-2), (musa.float16, 4e-3)])
def test_low_precision(dtype, tol):
    musa.manual_seed(3)
    q, k, v = (musa.randn(2, 2, 70, 8).to(dtype) for _ in range(3))
    g = musa.randn(2, 2, 70, 8).to(dtype)
    y, gr = grads_of(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), g)
    r, rg = grads_of(lambda q, k, v: composite(q, k, v, causal=True), (q, k, v), g)
    assert y.dtype == dtype and all(t.dtype == dtype for t in gr)
    assert_close(y, r, tol)
    for a, b in zip(gr, rg):
        assert_close(a, b, 2 * tol)


def test_create_graph_differentiates_the_gradient():
    musa.manual_seed(4)
    q, k, v = (musa.randn(2, 4, 3, dtype=musa.float64) for _ in range(3))
    w = musa.randn(2, 4, 3, dtype=musa.float64)

    def second(fn):
        ts = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        y = fn(*ts)
        (gq,) = musa.autograd.grad((y * w).sum(), ts[0], create_graph=True)
        (gq * gq).sum().backward()
        return [t.grad for t in ts]

    a = second(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    b = second(lambda q, k, v: composite(q, k, v, causal=True))
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-10, atol=1e-12)


def test_thread_count_does_not_change_the_bits():
    musa.manual_seed(5)
    q, k, v = (musa.randn(4, 3, 130, 16) for _ in range(3))
    g = musa.randn(4, 3, 130, 16)
    before = musa.get_num_threads()
    outs = []
    try:
        for n in (1, 2):
            musa.set_num_threads(n)
            y, gr = grads_of(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                             (q, k, v), g)
            outs.append([y] + gr)
    finally:
        musa.set_num_threads(before)
    for a, b in zip(*outs):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())


def test_autocast_runs_it_in_bfloat16_with_float32_parameter_gradients():
    lin = musa.nn.Linear(8, 24)
    x = musa.randn(2, 5, 8)
    with musa.amp.autocast():
        q, k, v = (heads(t, 2, 5, 2, 4) for t in lin(x).split(8, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert y.dtype == musa.bfloat16
    y.float().sum().backward()
    assert lin.weight.grad.dtype == musa.float32
    assert np.isfinite(lin.weight.grad.numpy()).all()


class _Attn(musa.nn.Module):
    def __init__(self, C=16, H=2):
        super().__init__()
        self.qkv, self.proj, self.H = musa.nn.Linear(C, 3 * C), musa.nn.Linear(C, C), H

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (heads(t, B, T, self.H, C // self.H) for t in self.qkv(x).split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


def _train(compiled, steps=3):
    musa.manual_seed(6)
    net = _Attn()
    opt = musa.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def step(x, t):
        opt.zero_grad()
        loss = F.mse_loss(net(x), t)
        loss.backward()
        opt.step()
        return loss

    fn = musa.jit(step) if compiled else step
    data = [(musa.randn(3, 7, 16), musa.randn(3, 7, 16)) for _ in range(steps)]
    losses = [float(fn(x, t)) for x, t in data]
    return losses, [p.detach().clone() for p in net.parameters()], fn


def test_compiled_training_equals_eager_bit_for_bit():
    el, ep, _ = _train(False)
    cl, cp, fn = _train(True)
    assert el == cl
    for a, b in zip(ep, cp):
        assert np.array_equal(a.numpy(), b.numpy())
    plan = fn.plan_text()
    assert "scaled_dot_product_attention_backward" in plan
    # the kernels write their results in the heads' (B, T, H, E) order:
    # the transposes back to the projection's layout copy nothing
    assert "clone" not in plan


def test_the_probabilities_are_not_kept_for_the_backward():
    B, H, T, E = 2, 2, 256, 8
    q, k, v = (musa.randn(B, H, T, E).requires_grad_() for _ in range(3))
    probs = B * H * T * T * 4

    def held(fn):
        musa.reset_peak_memory_stats()
        before = musa.memory_stats()["current_bytes"]
        y = fn(q, k, v)
        held = musa.memory_stats()["current_bytes"] - before
        y.sum().backward()
        return held

    fused = held(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    explicit = held(lambda q, k, v: F.softmax(
        (q @ k.transpose(-2, -1) * 0.3).masked_fill(~musa.ones(T, T, dtype=musa.bool).tril(), float("-inf")),
        -1) @ v)
    assert fused < probs / 4 and explicit >= probs, (fused, explicit, probs)


def test_bad_operands_name_the_op():
    q = musa.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"\[scaled_dot_product_attention\] query \(2, 3, 4\), key"):
        _C.scaled_dot_product_attention(q, musa.randn(2, 3, 5), q)
    with pytest.raises(TypeError, match=r"\[scaled_dot_product_attention\] query, key and value must be "
                                        r"floating point, got int64"):
        _C.scaled_dot_product_attention(*(musa.ones(2, 3, 4, dtype=musa.int64),) * 3)
    with pytest.raises(ValueError, match=r"the mask must be bool and broadcast"):
        _C.scaled_dot_product_attention(q, q, q, musa.ones(3, 2, dtype=musa.bool))
    with pytest.raises(ValueError, match=r"either a mask or causal"):
        _C.scaled_dot_product_attention(q, q, q, musa.ones(3, 3, dtype=musa.bool), 1.0, True)
    with pytest.raises(ValueError, match=r"scale is NaN"):
        _C.scaled_dot_product_attention(q, q, q, None, float("nan"))


def _random_operand(rng, shape):
    """A float tensor of `shape` laid out at random: contiguous, a
    transposed copy seen back in shape, every other element of a wider
    tensor, or expanded from size-1 dims (zero strides)."""
    kind = rng.integers(4)
    if kind == 1 and len(shape) >= 2:
        t = musa.randn(*shape[:-2], shape[-1], shape[-2]).transpose(-2, -1)
    elif kind == 2:
        t = musa.randn(*shape[:-1], 2 * shape[-1])[..., ::2]
    elif kind == 3:
        t = musa.randn(*[1 if rng.random() < 0.5 else s for s in shape]).expand(*shape)
    else:
        t = musa.randn(*shape)
    assert tuple(t.shape) == tuple(shape)
    return t


def test_random_shapes_layouts_and_masks():
    """Random batch dims, lengths (block edges included), head sizes,
    layouts, masks and causal flags: the kernel against the composition,
    gradients included."""
    rng = np.random.default_rng(21)
    for case in range(40):
        nb = rng.integers(0, 3)
        batch = tuple(int(b) for b in rng.integers(1, 4, nb))
        tq, tk = (int(rng.choice([1, 2, 5, 63, 64, 65, 130])) for _ in range(2))
        e, ev = (int(rng.choice([1, 3, 8, 17])) for _ in range(2))
        q = _random_operand(rng, batch + (tq, e))
        k = _random_operand(rng, batch + (tk, e))
        v = _random_operand(rng, batch + (tk, ev))
        mask, causal = None, bool(rng.random() < 0.3)
        if not causal and rng.random() < 0.5:
            mshape = batch[len(batch) - int(rng.integers(0, nb + 1)):] + (tq, tk)
            mask = musa.rand(*mshape) > 0.3
            mask[..., 0] = True  # every query sees a key
        g = musa.randn(*batch, tq, ev)
        y, gr = grads_of(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                                       is_causal=causal), (q, k, v), g)
        r, rg = grads_of(lambda q, k, v: composite(q, k, v, mask=mask, causal=causal), (q, k, v), g)
        where = f"case {case}: batch {batch}, tq {tq}, tk {tk}, e {e}, ev {ev}, causal {causal}"
        assert tuple(y.shape) == tuple(r.shape), where
        ok = np.isfinite(r.detach().numpy())
        np.testing.assert_allclose(y.detach().numpy()[ok], r.detach().numpy()[ok], rtol=1e-4, atol=1e-4,
                                   err_msg=where)
        for a, b in zip(gr, rg):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-3, atol=1e-3, err_msg=where)
