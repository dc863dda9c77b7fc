"""Python control flow in eager mode: data-dependent branches, loops over
variable-length sequences and recursion over trees must build the right graph
and train.  Acceptance tests: each model is trained on a small synthetic task
where the control flow matters, and its gradients are checked against finite
differences or against torch with copied weights."""
import time

import numpy as np
import pytest

import musa
import musa.nn as nn
import musa.nn.functional as F


def _np(t):
    return t.detach().numpy()


# ---------------------------------------------------------------------------
# 1. data-dependent branch: `if x.sum() > 0` picks one of two cells
# ---------------------------------------------------------------------------

D = 4


class Branchy(nn.Module):
    """tanh(cell1(x)) when x.sum() > 0, else tanh(cell2(x)); with
    branch=False it always uses cell1 (the control model)."""

    def __init__(self, branch=True):
        super().__init__()
        self.cell1 = nn.Linear(D, D)
        self.cell2 = nn.Linear(D, D)
        self.branch = branch

    def forward(self, x):
        if self.branch and not (x.sum() > 0):
            return musa.tanh(self.cell2(x))
        return musa.tanh(self.cell1(x))


def _branch_task(rng, n):
    A = rng.standard_normal((D, D)) * 1.5
    B = -A.T + rng.standard_normal((D, D))   # a very different map
    X = rng.standard_normal((n, D)).astype(np.float32)
    Y = np.where(X.sum(1, keepdims=True) > 0, np.tanh(X @ A.T), np.tanh(X @ B.T)).astype(np.float32)
    return X, Y


def _train_branchy(model, X, Y, steps, bs, rng):
    opt = musa.optim.Adam(model.parameters(), lr=0.03)

    def loss_on(idx):
        preds = [model(musa.tensor(X[i])) for i in idx]   # one sample at a time
        return F.mse_loss(musa.stack(preds), musa.tensor(Y[idx]))

    every = np.arange(len(X))
    with musa.no_grad():
        first = loss_on(every).item()
    for _ in range(steps):
        idx = rng.choice(len(X), bs, replace=False)
        opt.zero_grad()
        loss = loss_on(idx)
        loss.backward()
        opt.step()
    with musa.no_grad():
        last = loss_on(every).item()
    return first, last


def test_branch_trains_and_beats_single_cell():
    rng = np.random.RandomState(0)
    X, Y = _branch_task(rng, 96)
    musa.manual_seed(1)
    first, last = _train_branchy(Branchy(True), X, Y, steps=120, bs=16, rng=np.random.RandomState(1))
    musa.manual_seed(1)
    _, last_ctrl = _train_branchy(Branchy(False), X, Y, steps=120, bs=16, rng=np.random.RandomState(1))
    assert np.isfinite(last)
    assert last < 0.1 * first, (first, last)
    # the branch matters: one cell for everything cannot fit the task
    assert last < 0.25 * last_ctrl, (last, last_ctrl)


def _grads_of(mod):
    return [None if p.grad is None else _np(p.grad) for p in mod.parameters()]


def _is_zero(grads):
    return all(g is None or not np.any(g) for g in grads)


def _is_nonzero(grads):
    return all(g is not None and np.any(g) for g in grads)


def test_branch_gradients_reach_only_the_taken_cell():
    model = Branchy(True)
    pos = musa.tensor(np.array([1.0, 0.5, -0.2, 0.3], np.float32))
    neg = -pos
    target = musa.tensor(np.full(D, 0.7, np.float32))

    F.mse_loss(model(pos), target).backward()
    assert _is_nonzero(_grads_of(model.cell1))
    assert _is_zero(_grads_of(model.cell2))
    # and they are exactly the gradients of the cell1 path alone
    ref = nn.Linear(D, D)
    ref.load_state_dict(model.cell1.state_dict())
    F.mse_loss(musa.tanh(ref(pos)), target).backward()
    for a, b in zip(_grads_of(model.cell1), _grads_of(ref)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)

    model.zero_grad()
    F.mse_loss(model(neg), target).backward()
    assert _is_nonzero(_grads_of(model.cell2))
    assert _is_zero(_grads_of(model.cell1))


# ---------------------------------------------------------------------------
# 2. LSTMs over variable-length sequences
# ---------------------------------------------------------------------------

H = 12


class CellLoop(nn.Module):
    """LSTMCell driven by a Python loop of data-dependent length; hidden states
    are written into a preallocated tensor with `out[t] = h`."""

    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(1, H)
        self.head = nn.Linear(H, 1)

    def forward(self, seq):                      # seq: (L, 1)
        L = seq.shape[0]
        dt = self.head.weight.dtype
        h = musa.zeros(1, H, dtype=dt)
        c = musa.zeros(1, H, dtype=dt)
        out = musa.zeros(L, H, dtype=dt)
        for t in range(L):
            h, c = self.cell(seq[t:t + 1], (h, c))
            out[t] = h[0]
        return self.head(out[L - 1]).reshape(())


class WholeLSTM(nn.Module):
    """nn.LSTM on one unbatched sequence at a time."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(1, H)
        self.head = nn.Linear(H, 1)

    def forward(self, seq):                      # seq: (L, 1)
        out, (h, c) = self.lstm(seq)
        assert tuple(out.shape) == (seq.shape[0], H)
        return self.head(h[0]).reshape(())


def _sequences(rng, n, lo=3, hi=15):
    seqs = [rng.standard_normal((rng.randint(lo, hi + 1), 1)).astype(np.float32) for _ in range(n)]
    ys = np.array([0.3 * s.sum() for s in seqs], np.float32)
    return seqs, ys


def _eval_mse(model, seqs, ys):
    with musa.no_grad():
        preds = np.array([model(musa.tensor(s)).item() for s in seqs])
    return float(np.mean((preds - ys) ** 2))


@pytest.mark.parametrize("Model", [CellLoop, WholeLSTM], ids=["LSTMCell-loop", "nn.LSTM"])
def test_lstm_variable_length_trains(Model):
    rng = np.random.RandomState(0)
    seqs, ys = _sequences(rng, 64)
    test_seqs, test_ys = _sequences(np.random.RandomState(1), 48)
    assert len({len(s) for s in seqs}) >= 10          # really variable lengths
    baseline = float(np.mean((test_ys - ys.mean()) ** 2))  # predicting the mean

    musa.manual_seed(0)
    model = Model()
    opt = musa.optim.Adam(model.parameters(), lr=0.02)
    start = _eval_mse(model, test_seqs, test_ys)
    for _ in range(100):
        idx = rng.choice(len(seqs), 8, replace=False)
        opt.zero_grad()
        loss = sum((model(musa.tensor(seqs[i])) - float(ys[i])) ** 2 for i in idx) / len(idx)
        loss.backward()
        opt.step()
    end = _eval_mse(model, test_seqs, test_ys)
    assert np.isfinite(end)
    assert end < 0.15 * baseline, (start, end, baseline)


@pytest.mark.parametrize("Model", [CellLoop, WholeLSTM], ids=["LSTMCell-loop", "nn.LSTM"])
def test_lstm_variable_length_gradient_matches_finite_differences(Model):
    musa.manual_seed(3)
    model = Model().double()
    rng = np.random.RandomState(5)
    seq = musa.tensor(rng.standard_normal((9, 1)))
    y = 0.8

    def loss_fn():
        return (model(seq) - y) ** 2

    loss = loss_fn()
    loss.backward()
    eps = 1e-6
    checked = 0
    for name, p in model.named_parameters():
        assert p.dtype == musa.float64
        grad = _np(p.grad).reshape(-1)
        flat_idx = rng.choice(p.numel(), min(4, p.numel()), replace=False)
        for k in flat_idx:
            idx = np.unravel_index(k, tuple(p.shape))
            with musa.no_grad():
                orig = p[idx].item()
                p[idx] = orig + eps
                up = loss_fn().item()
                p[idx] = orig - eps
                down = loss_fn().item()
                p[idx] = orig
                assert p[idx].item() == orig
            fd = (up - down) / (2 * eps)
            assert up != down or grad[k] == 0.0, name  # the perturbation took effect
            np.testing.assert_allclose(grad[k], fd, rtol=1e-5, atol=1e-8, err_msg=f"{name}{idx}")
            checked += 1
    assert checked >= 12


# ---------------------------------------------------------------------------
# 3. binary Tree-LSTM by Python recursion
# ---------------------------------------------------------------------------

K = 2          # tokens 0..K-1; label = sum of leaf tokens mod K
E, TH = 8, 16


def _random_tree(rng, n_leaves):
    if n_leaves == 1:
        return int(rng.randint(K))
    left = rng.randint(1, n_leaves)
    return (_random_tree(rng, left), _random_tree(rng, n_leaves - left))


def _leaf_sum(tree):
    return tree if isinstance(tree, int) else _leaf_sum(tree[0]) + _leaf_sum(tree[1])


def _depth(tree):
    return 0 if isinstance(tree, int) else 1 + max(_depth(tree[0]), _depth(tree[1]))


def _tree_lstm_class(lib):
    """The same binary Tree-LSTM written against musa or torch."""

    class TreeLSTM(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = lib.nn.Embedding(K, E)
            self.leaf = lib.nn.Linear(E, 3 * TH)       # i, o, u
            self.node = lib.nn.Linear(2 * TH, 5 * TH)  # i, f_left, f_right, o, u
            self.head = lib.nn.Linear(TH, K)

        def encode(self, tree):
            if isinstance(tree, int):
                g = self.leaf(self.emb(lib.tensor([tree])))
                i, o, u = g[:, :TH], g[:, TH:2 * TH], g[:, 2 * TH:]
                c = lib.sigmoid(i) * lib.tanh(u)
            else:
                hl, cl = self.encode(tree[0])
                hr, cr = self.encode(tree[1])
                g = self.node(lib.cat([hl, hr], 1))
                i, fl, fr, o, u = (g[:, j * TH:(j + 1) * TH] for j in range(5))
                c = lib.sigmoid(i) * lib.tanh(u) + lib.sigmoid(fl) * cl + lib.sigmoid(fr) * cr
            h = lib.sigmoid(o) * lib.tanh(c)
            return h, c

        def forward(self, tree):
            return self.head(self.encode(tree)[0])     # (1, K)

    return TreeLSTM


MusaTreeLSTM = _tree_lstm_class(musa)


def _trees(rng, n, lo=2, hi=6):
    trees = [_random_tree(rng, rng.randint(lo, hi + 1)) for _ in range(n)]
    labels = np.array([_leaf_sum(t) % K for t in trees], np.int64)
    return trees, labels


def _accuracy(model, trees, labels):
    with musa.no_grad():
        pred = [int(np.argmax(_np(model(t)))) for t in trees]
    return float(np.mean(np.array(pred) == labels))


def test_tree_lstm_trains_above_chance():
    rng = np.random.RandomState(0)
    trees, labels = _trees(rng, 128)
    assert len({_depth(t) for t in trees}) >= 3          # really varying shapes
    assert 0.35 < labels.mean() < 0.65                    # chance is ~1/2
    musa.manual_seed(0)
    model = MusaTreeLSTM()
    opt = musa.optim.Adam(model.parameters(), lr=0.03)
    before = _accuracy(model, trees, labels)
    t0 = time.perf_counter()
    for _ in range(150):
        idx = rng.choice(len(trees), 16, replace=False)
        opt.zero_grad()
        logits = musa.cat([model(trees[i]) for i in idx], 0)
        loss = F.cross_entropy(logits, musa.tensor(labels[idx]))
        loss.backward()
        opt.step()
    elapsed = time.perf_counter() - t0
    after = _accuracy(model, trees, labels)
    held_trees, held_labels = _trees(np.random.RandomState(1), 64)
    held = _accuracy(model, held_trees, held_labels)
    assert after >= 0.9, (before, after, elapsed)
    assert held >= 0.85, (before, held, elapsed)          # learned parity, not the pool


def test_tree_lstm_matches_torch():
    torch = pytest.importorskip("torch")
    TorchTreeLSTM = _tree_lstm_class(torch)
    musa.manual_seed(0)
    m = MusaTreeLSTM()
    t = TorchTreeLSTM()
    t.load_state_dict({k: torch.tensor(_np(v)) for k, v in m.state_dict().items()})
    rng = np.random.RandomState(7)
    tree = _random_tree(rng, 7)
    assert _depth(tree) >= 3
    label = _leaf_sum(tree) % K

    ml = F.cross_entropy(m(tree), musa.tensor([label]))
    tl = torch.nn.functional.cross_entropy(t(tree), torch.tensor([label]))
    np.testing.assert_allclose(ml.item(), tl.item(), rtol=1e-5)
    ml.backward()
    tl.backward()
    tp = dict(t.named_parameters())
    names = [n for n, _ in m.named_parameters()]
    assert sorted(names) == sorted(tp)
    for name, p in m.named_parameters():
        g, tg = _np(p.grad), tp[name].grad.numpy()
        assert np.any(tg), name
        np.testing.assert_allclose(g, tg, rtol=1e-5, atol=1e-5 * np.abs(tg).max(), err_msg=name)
