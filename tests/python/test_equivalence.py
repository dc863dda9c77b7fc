"""End-to-end equivalence with PyTorch: the same models built in musa and in
torch with identical weights must agree on (a) forward outputs, (b) the
gradient of every parameter after the same loss's backward, and (c) every
parameter (and BatchNorm running statistic) after 20 optimizer steps on the
same fixed batches, for SGD(lr=0.05, momentum=0.9) and Adam(lr=1e-3).

Each model is written once against a "lib" (musa or torch), so both sides
are built by the very same code."""
import numpy as np
import pytest

import musa

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-4, 1e-5  # outputs and gradients
STEP_RTOL, STEP_ATOL = 1e-4, 1e-5  # parameters after 20 optimizer steps
N_STEPS = 20
N_BATCHES = 4  # fixed batches, generated once, cycled over the 20 steps

OPTIMIZERS = {
    "sgd": lambda lib, params: lib.optim.SGD(params, lr=0.05, momentum=0.9),
    "adam": lambda lib, params: lib.optim.Adam(params, lr=1e-3),
}


# --------------------------------------------------------------------------
# models, written once for either library


def make_mlp(lib):
    nn = lib.nn
    return nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(),
        nn.Linear(128, 128), nn.ReLU(),
        nn.Linear(128, 10),
    )


def make_cnn(lib):
    nn = lib.nn
    # bias=False, as is conventional before BatchNorm: in train mode a conv
    # bias feeding BN has an exactly-zero true gradient, so both sides only
    # see float rounding noise (~1e-8), which Adam normalises into full-size
    # lr steps of arbitrary sign - the two frameworks then legitimately drift
    # apart on that (output-irrelevant) parameter.
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 4 * 4, 10),
    )


def make_lstm(lib):
    nn = lib.nn

    class LSTMRegressor(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(6, 12, num_layers=2, batch_first=True)
            self.head = nn.Linear(12, 3)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.head(out[:, -1])

    return LSTMRegressor()


def make_block(lib):
    nn = lib.nn
    E, H = 16, 4

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(E)
            self.attn = nn.MultiheadAttention(E, H, dropout=0.0, batch_first=True)
            self.ln2 = nn.LayerNorm(E)
            self.mlp = nn.Sequential(nn.Linear(E, 4 * E), nn.GELU(), nn.Linear(4 * E, E),
                                     nn.Dropout(0.0))

        def forward(self, x):
            L = x.shape[1]
            mask = lib.triu(lib.ones(L, L, dtype=lib.bool), diagonal=1)  # True = masked
            h = self.ln1(x)
            a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
            x = x + a
            return x + self.mlp(self.ln2(x))

    return Block()


def ce_loss(lib, out, y):
    return lib.nn.functional.cross_entropy(out, y)


def mse_loss(lib, out, y):
    return lib.nn.functional.mse_loss(out, y)


def square_loss(lib, out, y):
    return (out * out).mean()


def data_mlp(rng):
    return (rng.standard_normal((16, 64)).astype(np.float32),
            rng.randint(0, 10, size=16).astype(np.int64))


def data_cnn(rng):
    return (rng.standard_normal((8, 3, 16, 16)).astype(np.float32),
            rng.randint(0, 10, size=8).astype(np.int64))


def data_lstm(rng):
    return (rng.standard_normal((4, 7, 6)).astype(np.float32),
            rng.standard_normal((4, 3)).astype(np.float32))


def data_block(rng):
    return rng.standard_normal((3, 6, 16)).astype(np.float32), None


CASES = {
    "mlp": (make_mlp, ce_loss, data_mlp),
    "cnn": (make_cnn, ce_loss, data_cnn),
    "lstm": (make_lstm, mse_loss, data_lstm),
    "block": (make_block, square_loss, data_block),
}


# --------------------------------------------------------------------------
# helpers


def seed(s=0):
    musa.manual_seed(s)
    torch.manual_seed(s)
    return np.random.RandomState(s)


def twin(name):
    """(musa model, torch model) with identical parameters and buffers; the
    torch model's init is perturbed so that zero biases / unit BN weights
    get exercised with non-trivial values too."""
    make = CASES[name][0]
    t = make(torch)
    m = make(musa)
    with torch.no_grad():
        for p in t.parameters():
            p.add_(torch.randn(p.shape) * 0.05)
    tsd = t.state_dict()
    msd = m.state_dict()
    assert list(msd.keys()) == list(tsd.keys())
    m.load_state_dict({k: musa.tensor(v.detach().numpy()) for k, v in tsd.items()})
    # loaded exactly
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), tsd[k].numpy(), err_msg=k)
    return m, t


def batches(name, rng):
    return [CASES[name][2](rng) for _ in range(N_BATCHES)]


def as_lib(lib, a):
    return None if a is None else lib.tensor(a)


def step_loss(lib, name, model, x, y):
    out = model(lib.tensor(x))
    return out, CASES[name][1](lib, out, as_lib(lib, y))


# Parameter parts whose true gradient is exactly zero, so that both sides
# only see rounding noise (~1e-10): the key third of MultiheadAttention's
# in_proj_bias (adding a constant to every key adds the same q.b_k to a whole
# row of scores, which softmax ignores). Adam divides that noise by its own
# magnitude and takes ~lr-sized steps of random sign, so the two frameworks
# legitimately drift apart there (by up to ~N_STEPS * lr); SGD does not.
ADAM_DEGENERATE = {"attn.in_proj_bias": slice(16, 32)}  # E = 16


def compare_params(m, t, rtol, atol, what, degenerate=None, init=None):
    mp = dict(m.named_parameters())
    tp = dict(t.named_parameters())
    assert mp.keys() == tp.keys()
    for k in tp:
        ma, ta = mp[k].detach().numpy().copy(), tp[k].detach().numpy().copy()
        if degenerate and k in degenerate:
            sl = degenerate[k]
            # still bounded: at most ~lr per step away from the start
            bound = 1.5 * N_STEPS * 1e-3
            assert np.abs(ma[sl] - init[k][sl]).max() <= bound, k
            assert np.abs(ta[sl] - init[k][sl]).max() <= bound, k
            ma[sl] = ta[sl] = 0.0
        np.testing.assert_allclose(ma, ta, rtol=rtol, atol=atol, err_msg=f"{what}: {k}")


def compare_buffers(m, t, rtol, atol, what):
    mb = dict(m.named_buffers())
    tb = dict(t.named_buffers())
    assert mb.keys() == tb.keys()
    for k in tb:
        np.testing.assert_allclose(mb[k].numpy(), tb[k].numpy(),
                                   rtol=rtol, atol=atol, err_msg=f"{what}: {k}")


# --------------------------------------------------------------------------
# tests


@pytest.mark.parametrize("name", list(CASES))
def test_forward_and_grads(name):
    rng = seed()
    m, t = twin(name)
    x, y = batches(name, rng)[0]
    mo, ml = step_loss(musa, name, m, x, y)
    to, tl = step_loss(torch, name, t, x, y)
    np.testing.assert_allclose(mo.detach().numpy(), to.detach().numpy(),
                               rtol=RTOL, atol=ATOL, err_msg="output")
    np.testing.assert_allclose(ml.item(), tl.item(), rtol=RTOL, atol=ATOL, err_msg="loss")
    ml.backward()
    tl.backward()
    mp = dict(m.named_parameters())
    n = 0
    for k, tp in t.named_parameters():
        assert tp.grad is not None, k
        assert mp[k].grad is not None, f"musa grad missing: {k}"
        tg = tp.grad.numpy()
        # sanity: the gradient is not trivially zero, so the check can fail
        assert np.abs(tg).max() > 0, k
        np.testing.assert_allclose(mp[k].grad.numpy(), tg, rtol=RTOL, atol=ATOL,
                                   err_msg=f"grad {k}")
        n += 1
    assert n == len(mp)
    if name == "cnn":  # train-mode forward updated the running statistics
        compare_buffers(m, t, RTOL, ATOL, "running stats after one forward")


@pytest.mark.parametrize("opt", list(OPTIMIZERS))
@pytest.mark.parametrize("name", list(CASES))
def test_training_steps(name, opt):
    rng = seed()
    m, t = twin(name)
    data = batches(name, rng)
    init = {k: p.detach().numpy().copy() for k, p in t.named_parameters()}
    mopt = OPTIMIZERS[opt](musa, m.parameters())
    topt = OPTIMIZERS[opt](torch, t.parameters())
    m.train()
    t.train()
    for i in range(N_STEPS):
        x, y = data[i % N_BATCHES]
        mopt.zero_grad()
        topt.zero_grad()
        _, ml = step_loss(musa, name, m, x, y)
        _, tl = step_loss(torch, name, t, x, y)
        np.testing.assert_allclose(ml.item(), tl.item(), rtol=STEP_RTOL, atol=STEP_ATOL,
                                   err_msg=f"loss at step {i}")
        ml.backward()
        tl.backward()
        mopt.step()
        topt.step()
    # training actually moved every parameter, so agreement is meaningful
    for k, p in t.named_parameters():
        assert not np.array_equal(p.detach().numpy(), init[k]), f"{k} did not move"
    compare_params(m, t, STEP_RTOL, STEP_ATOL, f"{opt} after {N_STEPS} steps",
                   degenerate=ADAM_DEGENERATE if opt == "adam" else None, init=init)
    compare_buffers(m, t, STEP_RTOL, STEP_ATOL, f"{opt} buffers after {N_STEPS} steps")

    # eval mode (BatchNorm switches to running statistics) and a fresh input
    m.eval()
    t.eval()
    x, _ = CASES[name][2](rng)
    with musa.no_grad():
        mo = m(musa.tensor(x))
    with torch.no_grad():
        to = t(torch.tensor(x))
    np.testing.assert_allclose(mo.numpy(), to.numpy(), rtol=STEP_RTOL, atol=STEP_ATOL,
                               err_msg="eval output after training")
    if name == "cnn":
        # eval must not touch the running statistics, and must differ from
        # what batch statistics would give (i.e. eval mode really switched)
        compare_buffers(m, t, STEP_RTOL, STEP_ATOL, "buffers after eval forward")
        t.train()
        with torch.no_grad():
            to_train = t(torch.tensor(x))
        assert not np.allclose(to_train.numpy(), to.numpy(), rtol=RTOL, atol=ATOL)
