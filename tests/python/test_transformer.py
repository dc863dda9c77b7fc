"""nn.Transformer and its parts against torch: a torch state_dict loads as
is, outputs and gradients agree (post-norm and pre-norm, batch_first,
masks, key padding, gelu), causal masks, and a compiled training step."""
import numpy as np
import pytest
import torch

import musa
import musa.nn as nn
import musa.nn.functional as F


def load_from(m, t):
    m.load_state_dict({k: musa.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def grads_close(m, t, tol=1e-9):
    tg = dict(t.named_parameters())
    for name, p in m.named_parameters():
        assert p.grad is not None, name
        np.testing.assert_allclose(p.grad.numpy(), tg[name].grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("batch_first,norm_first,act", [(False, False, "relu"), (True, True, "gelu"),
                                                        (True, False, "gelu")])
def test_transformer_against_torch(batch_first, norm_first, act):
    torch.manual_seed(0)
    kw = dict(d_model=16, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=24,
              dropout=0.0, batch_first=batch_first, norm_first=norm_first, activation=act)
    t = torch.nn.Transformer(**kw).double()
    m = nn.Transformer(**kw).double()
    assert sorted(k for k, _ in m.named_parameters()) == sorted(k for k, _ in t.named_parameters())
    load_from(m, t)
    rng = np.random.default_rng(1)
    S, T, N = 5, 4, 3
    src = rng.standard_normal((N, S, 16) if batch_first else (S, N, 16))
    tgt = rng.standard_normal((N, T, 16) if batch_first else (T, N, 16))
    mask = torch.nn.Transformer.generate_square_subsequent_mask(T).double()
    kpm = np.zeros((N, S), bool)
    kpm[0, -2:] = True
    tout = t(torch.tensor(src), torch.tensor(tgt), tgt_mask=mask,
             src_key_padding_mask=torch.tensor(kpm), memory_key_padding_mask=torch.tensor(kpm))
    mout = m(musa.tensor(src), musa.tensor(tgt), tgt_mask=musa.tensor(mask.numpy()),
             src_key_padding_mask=musa.tensor(kpm), memory_key_padding_mask=musa.tensor(kpm))
    close(mout, tout)
    w = rng.standard_normal(tout.shape)
    (tout * torch.tensor(w)).sum().backward()
    (mout * musa.tensor(w)).sum().backward()
    grads_close(m, t)


def test_encoder_layer_and_causal_masks():
    torch.manual_seed(1)
    t = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, 0.0), 3,
                                    torch.nn.LayerNorm(8)).double()
    m = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0.0), 3, nn.LayerNorm(8)).double()
    load_from(m, t)
    x = np.random.default_rng(2).standard_normal((6, 2, 8))
    mask = nn.Transformer.generate_square_subsequent_mask(6).double()
    assert mask.numpy().tolist() == torch.nn.Transformer.generate_square_subsequent_mask(6).tolist()
    tm = torch.tensor(mask.numpy())
    close(m(musa.tensor(x), mask), t(torch.tensor(x), tm))
    # is_causal without a mask makes the same mask
    close(m(musa.tensor(x), is_causal=True), t(torch.tensor(x), tm))
    # a boolean mask (True forbids), unbatched input
    bm = np.triu(np.ones((6, 6), bool), 1)
    close(m(musa.tensor(x[:, 0]), musa.tensor(bm)), t(torch.tensor(x[:, 0]), torch.tensor(bm)))


def test_decoder_layer_alone():
    torch.manual_seed(3)
    t = torch.nn.TransformerDecoderLayer(8, 4, 16, 0.0, norm_first=True).double()
    m = nn.TransformerDecoderLayer(8, 4, 16, 0.0, norm_first=True).double()
    load_from(m, t)
    rng = np.random.default_rng(4)
    tgt, mem = rng.standard_normal((3, 2, 8)), rng.standard_normal((5, 2, 8))
    close(m(musa.tensor(tgt), musa.tensor(mem), tgt_is_causal=True),
          t(torch.tensor(tgt), torch.tensor(mem),
            tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(3).double()))


def test_dropout_and_modes():
    m = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    x = musa.randn(4, 2, 8)
    m.train()
    assert not musa.equal(m(x), m(x))  # dropout draws
    m.eval()
    assert musa.equal(m(x), m(x))
    with pytest.raises(ValueError, match=r"\[TransformerEncoderLayer\] activation should be"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")
    with pytest.raises(RuntimeError, match="batch number of src and tgt"):
        nn.Transformer(8, 2, 1, 1, 16)(musa.randn(3, 2, 8), musa.randn(3, 4, 8))
    # a callable activation
    layer = nn.TransformerEncoderLayer(8, 2, 16, 0.0, activation=F.silu)
    assert layer(x).shape == x.shape


def test_compiled_training_step_equals_eager():
    def run(compiled):
        musa.manual_seed(0)
        enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32, 0.0, batch_first=True), 2)
        head = nn.Linear(16, 10)
        params = list(enc.parameters()) + list(head.parameters())
        opt = musa.optim.Adam(params, lr=1e-3)
        mask = nn.Transformer.generate_square_subsequent_mask(6)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(head(enc(x, mask)).reshape(-1, 10), y.reshape(-1))
            loss.backward()
            opt.step()
            return loss

        f = musa.jit(step) if compiled else step
        x, y = musa.randn(4, 6, 16), musa.randint(0, 10, (4, 6))
        return [f(x, y).item() for _ in range(4)]

    eager, compiled = run(False), run(True)
    assert compiled == eager  # bit for bit
    assert compiled[-1] < compiled[0]
