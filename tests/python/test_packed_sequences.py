"""PackedSequence and nn.utils.rnn (issue 17's NLP programs), and RNN,
LSTM and GRU over packed input, against torch from the same weights: outputs,
final states and gradients."""
import numpy as np
import pytest
import torch

import musa
import musa.nn as nn

RNG = np.random.default_rng(11)
LENGTHS = [2, 5, 3, 5, 1]


def padded(lengths=LENGTHS, features=3):
    x = RNG.standard_normal((max(lengths), len(lengths), features))
    for b, n in enumerate(lengths):
        x[n:, b] = 0.0
    return x


def test_pack_and_pad_round_trip_like_torch():
    for lengths, enforce in ((LENGTHS, False), (sorted(LENGTHS, reverse=True), True)):
        x = padded(lengths)
        m = nn.utils.rnn.pack_padded_sequence(musa.tensor(x), lengths, enforce_sorted=enforce)
        t = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), lengths, enforce_sorted=enforce)
        if enforce:
            assert m.sorted_indices is None and t.sorted_indices is None
        for a, b in zip(m, t):
            if b is not None:
                np.testing.assert_array_equal(a.numpy(), b.numpy())
        mp, ml = nn.utils.rnn.pad_packed_sequence(m, batch_first=True, padding_value=-1.0, total_length=7)
        tp, tl = torch.nn.utils.rnn.pad_packed_sequence(t, batch_first=True, padding_value=-1.0, total_length=7)
        np.testing.assert_array_equal(mp.numpy(), tp.numpy())
        np.testing.assert_array_equal(ml.numpy(), tl.numpy())
    seqs = [RNG.standard_normal((n, 2)) for n in (4, 2, 3)]
    np.testing.assert_array_equal(nn.utils.rnn.pad_sequence([musa.tensor(s) for s in seqs], True, 9.0).numpy(),
                                  torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], True, 9.0).numpy())
    m = nn.utils.rnn.pack_sequence([musa.tensor(s) for s in seqs], enforce_sorted=False)
    t = torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    np.testing.assert_array_equal(m.data.numpy(), t.data.numpy())
    back = nn.utils.rnn.unpack_sequence(m)
    assert [tuple(b.shape) for b in back] == [(4, 2), (2, 2), (3, 2)]


@pytest.mark.parametrize("kind,kw", [("LSTM", {}), ("GRU", {"num_layers": 2}), ("RNN", {"bidirectional": True}),
                                     ("LSTM", {"bidirectional": True, "num_layers": 2, "batch_first": True})])
def test_recurrent_layers_over_packed_input_match_torch(kind, kw):
    torch.manual_seed(0)
    tm = getattr(torch.nn, kind)(3, 4, **kw).double()
    mm = getattr(nn, kind)(3, 4, **kw).double()
    mm.load_state_dict({k: musa.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = padded()
    bf = kw.get("batch_first", False)
    xs = np.swapaxes(x, 0, 1).copy() if bf else x
    mx, tx = musa.tensor(xs, requires_grad=True), torch.tensor(xs, requires_grad=True)
    mo, mh = mm(nn.utils.rnn.pack_padded_sequence(mx, LENGTHS, batch_first=bf, enforce_sorted=False))
    to, th = tm(torch.nn.utils.rnn.pack_padded_sequence(tx, LENGTHS, batch_first=bf, enforce_sorted=False))
    np.testing.assert_array_equal(mo.batch_sizes.numpy(), to.batch_sizes.numpy())
    np.testing.assert_allclose(mo.data.detach().numpy(), to.data.detach().numpy(), rtol=1e-12, atol=1e-12)
    mhs, ths = (mh if kind == "LSTM" else (mh,)), (th if kind == "LSTM" else (th,))
    for a, b in zip(mhs, ths):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = RNG.standard_normal(tuple(to.data.shape))
    ((mo.data * musa.tensor(w)).sum() + sum(h.sum() for h in mhs)).backward()
    ((to.data * torch.tensor(w)).sum() + sum(h.sum() for h in ths)).backward()
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for (name, p), q in zip(mm.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


def test_a_given_initial_state_is_in_the_original_batch_order():
    torch.manual_seed(1)
    tm, mm = torch.nn.GRU(3, 2).double(), nn.GRU(3, 2).double()
    mm.load_state_dict({k: musa.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    h0 = RNG.standard_normal((1, len(LENGTHS), 2))
    x = padded()
    mo, mh = mm(nn.utils.rnn.pack_padded_sequence(musa.tensor(x), LENGTHS, enforce_sorted=False), musa.tensor(h0))
    to, th = tm(torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), LENGTHS, enforce_sorted=False),
                torch.tensor(h0))
    np.testing.assert_allclose(mh.detach().numpy(), th.detach().numpy(), rtol=1e-12)
    out, lengths = nn.utils.rnn.pad_packed_sequence(mo)
    assert lengths.tolist() == LENGTHS and tuple(out.shape) == (5, 5, 2)


def test_errors():
    x = musa.zeros(4, 2, 3)
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        nn.utils.rnn.pack_padded_sequence(x, [2, 4])
    with pytest.raises(RuntimeError, match="greater than 0"):
        nn.utils.rnn.pack_padded_sequence(x, [0, 4], enforce_sorted=False)
    with pytest.raises(ValueError, match="expected 2 lengths"):
        nn.utils.rnn.pack_padded_sequence(x, [4])
    packed = nn.utils.rnn.pack_padded_sequence(x, [4, 2])
    with pytest.raises(ValueError, match="total_length"):
        nn.utils.rnn.pad_packed_sequence(packed, total_length=2)
    with pytest.raises(RuntimeError, match="input_size"):
        nn.LSTM(5, 2)(packed)
