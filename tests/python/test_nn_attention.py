"""MultiheadAttention against torch.nn.MultiheadAttention with identical
weights: outputs, attention weights and gradients, with every mask kind."""
import math

import numpy as np
import pytest

import musa
import musa.nn as nn

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(3)
RTOL, ATOL = 1e-4, 1e-5
E, H, L, S, N = 8, 2, 4, 5, 3


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def twin(*args, **kwargs):
    t = torch.nn.MultiheadAttention(*args, **kwargs)
    m = nn.MultiheadAttention(*args, **kwargs)
    with torch.no_grad():
        for p in t.parameters():  # non-zero biases, so they are tested too
            p.add_(torch.randn(p.shape) * 0.1)
    m.load_state_dict({k: musa.tensor(v.numpy()) for k, v in t.state_dict().items()})
    return m, t


def as_lib(lib, a):
    return None if a is None else lib.tensor(a)


def compare(m, t, q, k=None, v=None, **kw):
    """Run both on q, k, v (self-attention when k is None: the same tensor
    three times), masks given as numpy in kw; compare outputs, weights and
    the gradients of inputs and parameters."""
    mq, tq = musa.tensor(q, requires_grad=True), torch.tensor(q, requires_grad=True)
    if k is None:
        margs, targs = (mq, mq, mq), (tq, tq, tq)
    else:
        mk, tk = musa.tensor(k, requires_grad=True), torch.tensor(k, requires_grad=True)
        mv, tv = musa.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
        margs, targs = (mq, mk, mv), (tq, tk, tv)
    mkw = {key: as_lib(musa, val) if isinstance(val, np.ndarray) else val for key, val in kw.items()}
    tkw = {key: as_lib(torch, val) if isinstance(val, np.ndarray) else val for key, val in kw.items()}
    mo, mw = m(*margs, **mkw)
    to, tw = t(*targs, **tkw)
    np.testing.assert_allclose(mo.detach().numpy(), to.detach().numpy(), rtol=RTOL, atol=ATOL)
    assert (mw is None) == (tw is None)
    mloss, tloss = (mo * musa.tensor(cot := randn(*to.shape))).sum(), (to * torch.tensor(cot)).sum()
    if tw is not None:
        assert tuple(mw.shape) == tuple(tw.shape)
        np.testing.assert_allclose(mw.detach().numpy(), tw.detach().numpy(), rtol=RTOL, atol=ATOL)
        cw = randn(*tw.shape)
        mloss, tloss = mloss + (mw * musa.tensor(cw)).sum(), tloss + (tw * torch.tensor(cw)).sum()
    mloss.backward()
    tloss.backward()
    for a, b in zip(margs, targs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=RTOL, atol=ATOL)
    tp = dict(t.named_parameters())
    for name, p in m.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.mark.parametrize("batch_first", [False, True])
def test_self_attention(batch_first):
    m, t = twin(E, H, batch_first=batch_first)
    compare(m, t, randn(N, L, E) if batch_first else randn(L, N, E))


@pytest.mark.parametrize("kw", [dict(), dict(bias=False), dict(kdim=3, vdim=6), dict(add_bias_kv=True),
                                dict(add_zero_attn=True), dict(add_bias_kv=True, add_zero_attn=True, kdim=5)])
def test_cross_attention_variants(kw):
    m, t = twin(E, H, batch_first=True, **kw)
    compare(m, t, randn(N, L, E), randn(N, S, kw.get("kdim", E)), randn(N, S, kw.get("vdim", E)))


def _masks():
    bool2d = RNG.random((L, S)) > 0.6
    bool2d[:, 0] = False  # every query keeps a key
    kpm = np.zeros((N, S), dtype=bool)
    kpm[0, 3:] = True
    kpm[2, 1] = True
    return dict(
        bool_attn=dict(attn_mask=bool2d), float_attn=dict(attn_mask=randn(L, S)),
        attn3d=dict(attn_mask=randn(N * H, L, S)), bool_kpm=dict(key_padding_mask=kpm),
        float_kpm=dict(key_padding_mask=np.where(kpm, -1e9, 0.0).astype(np.float32)),
        both_bool=dict(attn_mask=bool2d, key_padding_mask=kpm),
        float_attn_bool_kpm=dict(attn_mask=randn(L, S), key_padding_mask=kpm),
    )


@pytest.mark.parametrize("case", list(_masks()))
@pytest.mark.parametrize("add_bias_kv", [False, True])
def test_masks(case, add_bias_kv):
    m, t = twin(E, H, add_bias_kv=add_bias_kv)
    compare(m, t, randn(L, N, E), randn(S, N, E), randn(S, N, E), **_masks()[case])


@pytest.mark.parametrize("kw", [dict(need_weights=False), dict(average_attn_weights=False)])
def test_weight_options(kw):
    m, t = twin(E, H, batch_first=True)
    compare(m, t, randn(N, L, E), randn(N, S, E), randn(N, S, E), key_padding_mask=_masks()["bool_kpm"][
        "key_padding_mask"], **kw)


def test_unbatched():
    m, t = twin(E, H)
    kpm = np.array([False, True, False, False, False])
    compare(m, t, randn(L, E), randn(S, E), randn(S, E), key_padding_mask=kpm)
    compare(m, t, randn(L, E), randn(S, E), randn(S, E), attn_mask=randn(H, L, S))


def test_dropout_only_in_training():
    m = nn.MultiheadAttention(E, H, dropout=0.5)
    x = musa.randn(L, N, E)
    musa.manual_seed(0)
    a, b = m(x, x, x)[0], m(x, x, x)[0]
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())
    m.eval()
    assert np.array_equal(m(x, x, x)[0].detach().numpy(), m(x, x, x)[0].detach().numpy())


def test_parameters_and_init():
    musa.manual_seed(0)
    m = nn.MultiheadAttention(32, 4)
    t = torch.nn.MultiheadAttention(32, 4)
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == \
           [(n, tuple(p.shape)) for n, p in t.named_parameters()]
    assert float(m.in_proj_bias.abs().sum()) == 0 and float(m.out_proj.bias.abs().sum()) == 0
    bound = math.sqrt(6 / (32 + 96))  # xavier_uniform_ on (3E, E)
    w = m.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    m2 = nn.MultiheadAttention(8, 2, kdim=4, vdim=6, add_bias_kv=True)
    t2 = torch.nn.MultiheadAttention(8, 2, kdim=4, vdim=6, add_bias_kv=True)
    assert [n for n, _ in m2.named_parameters()] == [n for n, _ in t2.named_parameters()]
    assert m2.in_proj_weight is None and tuple(m2.k_proj_weight.shape) == (8, 4)
    assert repr(m2) == repr(t2)


def test_errors():
    with pytest.raises(ValueError, match=r"embed_dim \(10\) must be divisible by num_heads \(3\)"):
        nn.MultiheadAttention(10, 3)
    m = nn.MultiheadAttention(E, H)
    x = musa.randn(L, N, E)
    with pytest.raises(ValueError, match="query has 4 features, expected embed_dim=8"):
        m(musa.randn(L, N, 4), x, x)
    with pytest.raises(ValueError, match="do not match query"):
        m(x, musa.randn(S, N, E), musa.randn(S + 1, N, E))
    with pytest.raises(ValueError, match=r"attn_mask of shape \(3, 3\)"):
        m(x, x, x, attn_mask=musa.zeros(3, 3))
    with pytest.raises(ValueError, match=r"key_padding_mask of shape \(4,\)"):
        m(x, x, x, key_padding_mask=musa.zeros(4, dtype=musa.bool))
    with pytest.raises(TypeError, match="bool or floating point"):
        m(x, x, x, attn_mask=musa.zeros(L, L, dtype=musa.int64))
    with pytest.raises(ValueError, match="2-D \\(unbatched\\) or 3-D"):
        m(musa.randn(E), musa.randn(E), musa.randn(E))


def test_transformer_block_trains():
    """Self-attention + MLP with residuals and layer norms: a smoke test of
    the layers working together under training."""
    musa.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
            self.ln1, self.ln2 = nn.LayerNorm(16), nn.LayerNorm(16)
            self.mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))

        def forward(self, x, mask):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    block, head = Block(), nn.Linear(16, 1)
    x = musa.randn(8, 6, 16)
    y = musa.cumsum(x[..., :1], 1)
    causal = musa.ones(6, 6, dtype=musa.bool).triu(1)
    params = list(block.parameters()) + list(head.parameters())
    first = None
    for _ in range(40):
        loss = nn.functional.mse_loss(head(block(x, causal)), y)
        first = first if first is not None else loss.item()
        for p in params:
            p.grad = None
        loss.backward()
        with musa.no_grad():
            for p in params:
                p.sub_(p.grad * 0.05)
    assert loss.item() < 0.5 * first
