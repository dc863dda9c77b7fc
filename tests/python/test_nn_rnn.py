"""Recurrent layers against torch.nn with identical weights: outputs, final
states and all gradients, for every layout option; cells; errors."""
import math

import numpy as np
import pytest

import musa
import musa.nn as nn

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(2)
RTOL, ATOL = 1e-4, 1e-5  # long chains of float32 ops


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def twin(name, *args, **kwargs):
    t = getattr(torch.nn, name)(*args, **kwargs)
    m = getattr(nn, name)(*args, **kwargs)
    m.load_state_dict({k: musa.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return m, t


def flat(out):
    """The tensors of a (output, h) or (output, (h, c)) result, in order."""
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in flat(o)]
    return [out]


def compare(m, t, x, state=None):
    """Run both with input x and optional initial state arrays; compare every
    output, then backward a random cotangent on each and compare the
    gradients of the input, the initial states and all parameters."""
    mx, tx = musa.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ms = ts = None
    if state is not None:
        ms = [musa.tensor(s, requires_grad=True) for s in state]
        ts = [torch.tensor(s, requires_grad=True) for s in state]
    margs = (mx,) if ms is None else (mx, ms[0] if len(ms) == 1 else tuple(ms))
    targs = (tx,) if ts is None else (tx, ts[0] if len(ts) == 1 else tuple(ts))
    mouts, touts = flat(m(*margs)), flat(t(*targs))
    assert len(mouts) == len(touts)
    mloss, tloss = 0, 0
    for a, b in zip(mouts, touts):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=RTOL, atol=ATOL)
        cot = randn(*b.shape)
        mloss = mloss + (a * musa.tensor(cot)).sum()
        tloss = tloss + (b * torch.tensor(cot)).sum()
    mloss.backward()
    tloss.backward()
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=RTOL, atol=ATOL)
    for a, b in zip(ms or [], ts or []):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=RTOL, atol=ATOL)
    tp = dict(t.named_parameters())
    for name, p in m.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), rtol=RTOL, atol=ATOL, err_msg=name)


LAYOUTS = [dict(), dict(num_layers=2), dict(batch_first=True), dict(bidirectional=True),
           dict(num_layers=3, bidirectional=True, batch_first=True), dict(bias=False, num_layers=2)]


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("kw", LAYOUTS)
def test_recurrent_layers_match_torch(name, kw):
    m, t = twin(name, 3, 5, **kw)
    shape = (2, 6, 3) if kw.get("batch_first") else (6, 2, 3)
    compare(m, t, randn(*shape))


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_initial_state(name):
    m, t = twin(name, 3, 4, num_layers=2, bidirectional=True, batch_first=True)
    states = [randn(4, 2, 4)] * (2 if name == "LSTM" else 1)
    compare(m, t, randn(2, 5, 3), states)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_unbatched_input(name):
    m, t = twin(name, 3, 4, num_layers=2)
    compare(m, t, randn(5, 3))
    compare(m, t, randn(5, 3), [randn(2, 4)] * (2 if name == "LSTM" else 1))


def test_rnn_relu_and_lstm_projection():
    compare(*twin("RNN", 3, 4, 2, nonlinearity="relu"), randn(5, 2, 3))
    m, t = twin("LSTM", 3, 6, num_layers=2, proj_size=2, bidirectional=True)
    compare(m, t, randn(4, 2, 3), [randn(4, 2, 2), randn(4, 2, 6)])
    assert tuple(m.weight_hr_l0.shape) == (2, 6)


def test_parameter_names_and_shapes_match_torch():
    for name, kw in (("LSTM", dict(num_layers=2, bidirectional=True)), ("GRU", dict(bias=False)),
                     ("LSTM", dict(proj_size=2)), ("RNN", dict(num_layers=2))):
        t, m = getattr(torch.nn, name)(3, 4, **kw), getattr(nn, name)(3, 4, **kw)
        assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == \
               [(n, tuple(p.shape)) for n, p in t.named_parameters()]
        assert [[tuple(w.shape) for w in ws] for ws in m.all_weights] == \
               [[tuple(w.shape) for w in ws] for ws in t.all_weights]


def test_dropout_between_layers():
    m, t = twin("GRU", 3, 4, num_layers=2, dropout=0.5)
    x = musa.randn(5, 2, 3)
    musa.manual_seed(0)
    a = m(x)[0]
    b = m(x)[0]
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())
    m.eval(), t.eval()
    compare(m, t, x.numpy())
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.LSTM(3, 4, dropout=0.2)


def test_default_init_bounds():
    musa.manual_seed(0)
    lstm = nn.LSTM(10, 25, num_layers=2)
    bound = 1 / math.sqrt(25)
    values = np.concatenate([p.detach().numpy().ravel() for p in lstm.parameters()])
    assert np.abs(values).max() <= bound and np.abs(values).max() > 0.99 * bound
    assert abs(values.mean()) < 0.01


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("bias", [True, False])
def test_cells(name, bias):
    m, t = twin(name, 3, 4, bias=bias)
    states = [randn(2, 4)] * (2 if name == "LSTMCell" else 1)
    compare(m, t, randn(2, 3), states)
    compare(m, t, randn(2, 3))
    compare(m, t, randn(3), [s[0] for s in states])


def test_cell_matches_one_step_of_layer():
    cell = nn.LSTMCell(3, 4)
    layer = nn.LSTM(3, 4)
    layer.load_state_dict({k + "_l0": v for k, v in cell.state_dict().items()})
    x = musa.randn(1, 2, 3)
    h, c = cell(x[0])
    out, (hn, cn) = layer(x)
    np.testing.assert_allclose(h.detach().numpy(), hn[0].detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(c.detach().numpy(), cn[0].detach().numpy(), rtol=1e-6)


def test_errors():
    lstm = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(RuntimeError, match=r"input.size\(-1\) must equal input_size. Expected 3, got 5"):
        lstm(musa.randn(2, 2, 5))
    with pytest.raises(ValueError, match="Expected input to be 2-D or 3-D but received 4-D"):
        lstm(musa.randn(1, 2, 2, 3))
    with pytest.raises(ValueError, match="sequence length larger than 0"):
        lstm(musa.randn(0, 2, 3))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(2, 2, 4\), got \[1, 2, 4\]"):
        lstm(musa.randn(5, 2, 3), (musa.zeros(1, 2, 4), musa.zeros(2, 2, 4)))
    with pytest.raises(TypeError, match="tuple \\(h_0, c_0\\)"):
        lstm(musa.randn(5, 2, 3), musa.zeros(2, 2, 4))
    with pytest.raises(RuntimeError, match="should also be 3-D"):
        nn.GRU(3, 4)(musa.randn(5, 2, 3), musa.zeros(2, 4))
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'sigmoid'"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="only supported for LSTM"):
        nn.RNNBase("GRU", 3, 4, proj_size=2)
    with pytest.raises(TypeError, match="proj_size"):
        nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="must be positive"):
        nn.GRU(3, 0)
    cell = nn.GRUCell(3, 4)
    with pytest.raises(RuntimeError, match="inconsistent input_size: got 2 expected 3"):
        cell(musa.randn(2, 2))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(2, 4\), got \(3, 4\)"):
        cell(musa.randn(2, 3), musa.zeros(3, 4))
    with pytest.raises(ValueError, match="1-D or 2-D"):
        cell(musa.randn(1, 2, 3))


def test_train_lstm_on_a_sum_task():
    """A small LSTM learns to output the running sum of its inputs."""
    musa.manual_seed(0)
    lstm, head = nn.LSTM(1, 16, batch_first=True), nn.Linear(16, 1)
    x = musa.rand(32, 6, 1)
    y = musa.cumsum(x, 1)
    params = list(lstm.parameters()) + list(head.parameters())
    losses = []
    for _ in range(60):
        out, _ = lstm(x)
        loss = nn.functional.mse_loss(head(out), y)
        losses.append(loss.item())
        for p in params:
            p.grad = None
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        with musa.no_grad():
            for p in params:
                p.sub_(p.grad * 0.1)
    assert losses[-1] < 0.2 * losses[0]
