"""Static autodiff and compiled training: gradients of compiled modules
against eager autograd on the model zoo, whole training steps (forward,
backward, optimizer step) compiled against eager step for step, BatchNorm
running statistics, recompiles on a smaller last batch, higher-order
gradients, and the digits CNN trained in static mode."""
import copy
import os
import sys
import warnings

import numpy as np
import pytest

import musa
import musa.nn as nn
import musa.nn.functional as F
from musa.utils.data import DataLoader, TensorDataset

from test_jit import ZOO, ResBlock

HERE = os.path.dirname(os.path.abspath(__file__))


def close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a.detach().numpy(), dtype=np.float64),
                               np.asarray(b.detach().numpy(), dtype=np.float64), rtol=rtol, atol=atol)


def twins(make):
    musa.manual_seed(0)
    a = make()
    b = copy.deepcopy(a)
    return a, b


# ---- static autodiff against eager autograd ----

@pytest.mark.parametrize("name", sorted(ZOO))
def test_compiled_module_gradients_match_eager(name):
    make, shapes = ZOO[name]
    eager, comp = twins(make)
    comp.compile(config=musa.Config(verify=True))
    for shape in shapes:
        x = musa.randn(*shape)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        for model, inp in ((eager, xa), (comp, xb)):
            for p in model.parameters():
                p.grad = None
            out = model(inp)
            (out * out).sum().backward()
        # static autodiff runs eager's formulas in eager's order on values
        # of eager's layouts (views carried as their bases): the same bits
        for (n, p), q in zip(eager.named_parameters(), comp.parameters()):
            assert np.array_equal(q.grad.numpy(), p.grad.numpy()), n
        assert np.array_equal(xb.grad.numpy(), xa.grad.numpy())
    c = comp._compiled_call
    assert c.compiles == len(shapes)
    assert "# backward" in c.get_graph()
    # BatchNorm in training mode updated its running statistics the same way
    for p, q in zip(eager.buffers(), comp.buffers()):
        close(q, p, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_compiled_low_precision_module_gradients_are_eager_bits(dtype):
    # ops computed in float32 for low-precision inputs (softmax,
    # log_softmax) are recorded as a float32 op and a rounding cast; static
    # autodiff runs their formulas on the rounded output, as eager's tape
    # does, so the gradients are eager's bits and the saved values are
    # low-precision ones
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.norm = nn.Linear(16, 16), nn.LayerNorm(16)

        def forward(self, x):
            h = self.norm(self.lin(x))
            return F.softmax(h, dim=-1) * 3 + F.log_softmax(h, dim=-1) * h.tanh()

    dt = getattr(musa, dtype)
    eager, comp = twins(lambda: Net().to(dt))
    comp.compile()
    x = musa.randn(12, 16).to(dt)
    grads = []
    for model in (eager, comp):
        xi = x.clone().requires_grad_()
        out = model(xi)
        (out.float() * out.float()).sum().backward()
        grads.append([xi.grad] + [p.grad for p in model.parameters()])
    for a, b in zip(*grads):
        assert a.dtype == b.dtype == dt
        assert np.array_equal(a.float().numpy(), b.float().numpy())
    # what the backward plan takes: low-precision activations (the layer
    # norm's float32 statistics, as eager saves them), no float32 copies
    sig = comp._compiled_call.get_graph(optimized=False).split("# backward")[1].splitlines()[1]
    assert f"{dtype}[12, 16]" in sig and "float32[12]" in sig and "float32[12, 16]" not in sig


def test_views_saved_for_the_backward_are_carried_as_their_base():
    # q, k and v cut from one projection: the backward plan takes the
    # projection (2, 5, 48) and makes the three views again, as eager's tape
    # keeps their base, instead of three contiguous copies; the matmuls of
    # the backward then read eager's strides and give eager's bits
    musa.manual_seed(0)
    eager, comp = twins(lambda: nn.MultiheadAttention(16, 4, batch_first=True))
    comp.compile()
    x = musa.randn(2, 5, 16)
    grads = []
    for m in (eager, comp):
        xi = x.clone().requires_grad_()
        out = m(xi, xi, xi, need_weights=False)[0]
        (out * out).sum().backward()
        grads.append([xi.grad] + [p.grad for p in m.parameters()])
    for a, b in zip(*grads):
        assert np.array_equal(a.numpy(), b.numpy())
    sig = comp._compiled_call.get_graph(optimized=False).split("# backward")[1].splitlines()[1]
    assert "float32[2, 5, 48]" in sig and "float32[2, 4, 5, 4]" not in sig

    # a small view of a large value stays a view-sized copy
    class Last(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 8)

        def forward(self, x):
            t = self.lin(x)[:, -1]  # (3, 8) of (3, 6, 8)
            return t * t
    last = Last().compile()
    last(musa.randn(3, 6, 4)).sum().backward()
    sig = last._compiled_call.get_graph(optimized=False).split("# backward")[1].splitlines()[1]
    assert "float32[3, 8]" in sig and "float32[3, 6, 8]" not in sig


def test_an_argument_returned_as_it_is_stays_itself_on_the_tape():
    # f returns its argument with other outputs: the call returns the
    # argument itself, as eager does, so the gradient that output gets
    # reaches it directly and is summed where eager's engine sums it (the
    # compiled node used to sum it with the rest first: bfloat16 bits
    # differed, test_jit_fuzz tape seed 726)
    def f(a):
        return a, (a * a).sigmoid() + a.erf(), a.where(a < 0, 0.5).fmod(a)
    c = musa.jit(f)
    rng = np.random.default_rng(726)
    for n in (80, 71):
        x = musa.tensor(rng.standard_normal(n)).to(musa.bfloat16)
        grads = []
        for fn in (f, c):
            xi = x.clone().requires_grad_()
            outs = fn(xi)
            assert outs[0] is xi
            sum((o.float() * 0.5).sum() for o in outs).backward()
            grads.append(xi.grad.float().numpy())
        assert np.array_equal(*grads)


def test_static_autodiff_builds_backward_from_the_op_table_formulas():
    from musa import _C
    w = musa.randn(4, 3, requires_grad=True)
    x = musa.randn(5, 4)
    g = _C.Graph()
    g.capture_begin("trace")
    g.add_input(x, "x")
    y = musa.tanh(x @ w).sum()
    g.set_outputs([y])
    g.capture_end()
    n_fwd = g.nodes_len
    (wv,) = [v for v, t in g.params() if t is w]
    gy = g.new_input(g.outputs[0], "gy")
    (gw,) = g.autodiff(g.outputs, [gy], [wv])
    ops = [op for op, _ in g.ops()][n_fwd:]
    assert "matmul" in ops and "mul" in ops  # tanh' = 1 - y^2, then the matmul formula
    bwd, saved = g.segment(n_fwd, g.nodes_len, [gw], False)
    fwd, _ = g.segment(0, n_fwd, g.outputs + saved, True, 1)
    res = fwd.compile().run([x])
    (grad,) = bwd.compile().run([x, musa.ones(())] + res[1:])
    y.backward()
    close(grad, w.grad)
    # gradients nothing asks for are never built
    g2 = _C.Graph()
    g2.capture_begin("trace")
    g2.add_input(x, "x")
    y2 = musa.exp(x).sum() + (x @ w).sum()
    g2.set_outputs([y2])
    g2.capture_end()
    n2 = g2.nodes_len
    (wv2,) = [v for v, t in g2.params() if t is w]
    g2.autodiff(g2.outputs, [g2.new_input(g2.outputs[0])], [wv2])
    assert "exp" not in [op for op, _ in g2.ops()][n2:]


def test_remat_recomputes_cheap_values_instead_of_saving_them():
    saved = {}
    grads = {}
    for remat in (False, True):
        musa.manual_seed(0)
        m = nn.Sequential(nn.Linear(16, 32), nn.GELU(approximate="tanh"), nn.Linear(32, 8))
        m.compile(config=musa.Config(remat=remat))
        m(musa.randn(4, 16)).sum().backward()
        train = next(e.train for e in m._compiled_call._cache.values() if e.train)
        saved[remat] = train.n_saved
        grads[remat] = [p.grad.clone() for p in m.parameters()]
    assert saved[True] < saved[False]
    for a, b in zip(grads[True], grads[False]):
        assert np.array_equal(a.numpy(), b.numpy())


def test_higher_order_through_compiled_equals_eager():
    def f(x):
        return (musa.tanh(x) * x).sum()

    c = musa.jit(f)
    x = musa.randn(5, requires_grad=True)
    xe = x.detach().clone().requires_grad_()
    (g,) = musa.autograd.grad(c(x), x, create_graph=True)
    (ge,) = musa.autograd.grad(f(xe), xe, create_graph=True)
    close(g, ge)
    (gg,) = musa.autograd.grad(g.sum(), x)
    (gge,) = musa.autograd.grad(ge.sum(), xe)
    close(gg, gge, rtol=1e-5)
    # a second call runs the compiled plans, and still agrees
    (g2,) = musa.autograd.grad(c(x), x, create_graph=True)
    (gg2,) = musa.autograd.grad(g2.sum(), x)
    close(gg2, gge, rtol=1e-5)


def test_higher_order_through_random_ops_is_refused():
    c = musa.jit(lambda x: F.dropout(x, 0.5, training=True).sum())
    x = musa.randn(8, requires_grad=True)
    c(x)
    (g,) = musa.autograd.grad(c(x), x, create_graph=False)
    assert g.shape == (8,)
    with pytest.raises(RuntimeError, match="create_graph=True through compiled"):
        musa.autograd.grad(c(x), x, create_graph=True)


# ---- whole training steps ----

def make_cnn():
    return nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(6 * 4 * 4, 10))


def make_step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


@pytest.mark.parametrize("optim", ["sgd", "adam", "adamw", "rmsprop"])
@pytest.mark.parametrize("make", [make_cnn, ZOO["mlp"][0]], ids=["cnn_bn", "mlp"])
def test_whole_step_matches_eager_for_50_steps(optim, make):
    eager, comp = twins(make)

    def opt_for(m):
        if optim == "sgd":
            return musa.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
        if optim == "adam":
            return musa.optim.Adam(m.parameters(), lr=1e-2)
        if optim == "rmsprop":
            return musa.optim.RMSprop(m.parameters(), lr=1e-3, momentum=0.5, centered=True,
                                      weight_decay=1e-4)
        return musa.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1)

    oe, oc = opt_for(eager), opt_for(comp)
    step_e, step_c = make_step(eager, oe), musa.jit(make_step(comp, oc))
    musa.manual_seed(1)
    shape = (16, 1, 8, 8) if make is make_cnn else (16, 64)
    for i in range(50):
        x, y = musa.randn(*shape), musa.randint(0, 10, (16,))
        le, lc = step_e(x, y), step_c(x, y)
        assert float(le) == float(lc), f"step {i}: loss {float(le)} eager, {float(lc)} compiled"
    for p, q in zip(eager.parameters(), comp.parameters()):
        close(q, p, rtol=1e-6, atol=1e-7)
        close(q.grad, p.grad, rtol=1e-6, atol=1e-7)
    for p, q in zip(eager.buffers(), comp.buffers()):
        close(q, p, rtol=1e-6, atol=1e-7)
    for se, sc in zip(oe.state.values(), oc.state.values()):
        for k in se:
            if isinstance(se[k], musa.Tensor):
                close(sc[k], se[k], rtol=1e-6, atol=1e-7)
    # compiled: one (symbolic) capture, then plans only, the first call's included
    assert step_c.compiles == 1, step_c.recompile_log
    assert step_c.plan_stats()["runs"] == 50


@pytest.mark.parametrize("optim", ["sgd", "adam", "rmsprop"])
def test_whole_step_runs_its_updates_as_one_multi_tensor_instruction(optim):
    # the step's update rows (one per parameter, as recorded) run as one
    # plan instruction, one parallel loop; parameters and state stay
    # bitwise equal to the eager step's, which runs the same rows as one
    # multi-tensor kernel per group too
    eager, comp = twins(ZOO["mlp"][0])
    make = {"sgd": lambda ps: musa.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
            "adam": lambda ps: musa.optim.Adam(ps, lr=1e-2, amsgrad=True),
            "rmsprop": lambda ps: musa.optim.RMSprop(ps, lr=1e-3, momentum=0.5, centered=True)}
    oe, oc = make[optim](eager.parameters()), make[optim](comp.parameters())
    step_e, step_c = make_step(eager, oe), musa.jit(make_step(comp, oc))
    musa.manual_seed(1)
    for i in range(5):
        x, y = musa.randn(16, 64), musa.randint(0, 10, (16,))
        assert float(step_e(x, y)) == float(step_c(x, y))
    n = len(list(comp.parameters()))
    st = step_c.plan_stats()
    assert st["multi_updates"] == 1 and st["multi_nodes"] == n, st
    assert f"multi[{optim}_update x{n}, " in step_c.plan_text()
    for p, q in zip(eager.parameters(), comp.parameters()):
        assert p.detach().numpy().tobytes() == q.detach().numpy().tobytes()
    for se, sc in zip(oe.state.values(), oc.state.values()):
        for k in se:
            assert se[k].numpy().tobytes() == sc[k].numpy().tobytes(), k


def test_whole_step_follows_the_learning_rate_without_recompiling():
    eager, comp = twins(ZOO["mlp"][0])
    oe = musa.optim.SGD(eager.parameters(), lr=0.1)
    oc = musa.optim.SGD(comp.parameters(), lr=0.1)
    se, sc = musa.optim.lr_scheduler.StepLR(oe, 3, 0.5), musa.optim.lr_scheduler.StepLR(oc, 3, 0.5)
    step_e, step_c = make_step(eager, oe), musa.jit(make_step(comp, oc))
    musa.manual_seed(2)
    for _ in range(7):
        x, y = musa.randn(8, 64), musa.randint(0, 10, (8,))
        step_e(x, y), step_c(x, y)
        se.step(), sc.step()
    for p, q in zip(eager.parameters(), comp.parameters()):
        close(q, p, rtol=1e-6, atol=1e-7)
    assert step_c.compiles == 1 and step_c.recompile_log == []
    # other options are guarded: changing one recompiles, logged
    for g in oe.param_groups + oc.param_groups:
        g["weight_decay"] = 0.01
    x, y = musa.randn(8, 64), musa.randint(0, 10, (8,))
    step_e(x, y), step_c(x, y)
    for p, q in zip(eager.parameters(), comp.parameters()):
        close(q, p, rtol=1e-6, atol=1e-7)
    assert len(step_c.recompile_log) == 1
    assert "optimizer options changed: weight_decay 0 -> 0.01" in step_c.recompile_log[0]


def test_sgd_with_dampening_recompiles_once_for_the_first_step():
    eager, comp = twins(ZOO["mlp"][0])
    oe = musa.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9, dampening=0.5)
    oc = musa.optim.SGD(comp.parameters(), lr=0.1, momentum=0.9, dampening=0.5)
    step_e, step_c = make_step(eager, oe), musa.jit(make_step(comp, oc))
    for _ in range(5):
        x, y = musa.randn(8, 64), musa.randint(0, 10, (8,))
        assert float(step_e(x, y)) == float(step_c(x, y))
    for p, q in zip(eager.parameters(), comp.parameters()):
        close(q, p, rtol=1e-6, atol=1e-7)
    assert step_c.compiles == 2 and "optimizer state changed" in step_c.recompile_log[0]


def test_clearing_a_parameters_optimizer_state_recompiles_and_matches_eager():
    eager, comp = twins(ZOO["mlp"][0])
    oe = musa.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    oc = musa.optim.SGD(comp.parameters(), lr=0.1, momentum=0.9)
    step_e, step_c = make_step(eager, oe), musa.jit(make_step(comp, oc))
    musa.manual_seed(4)
    for i in range(6):
        if i == 3:  # the fast path's guard sees one parameter lose its momentum
            oe.state[next(iter(eager.parameters()))].clear()
            oc.state[next(iter(comp.parameters()))].clear()
        x, y = musa.randn(8, 64), musa.randint(0, 10, (8,))
        assert float(step_e(x, y)) == float(step_c(x, y))
    for p, q in zip(eager.parameters(), comp.parameters()):
        assert np.array_equal(q.detach().numpy(), p.detach().numpy())
    # the state is whole again on the next step: the first variant serves it
    assert step_c.compiles == 2 and "optimizer state changed" in step_c.recompile_log[0]


def test_guard_values_built_in_c_are_the_python_ones():
    from collections import OrderedDict, defaultdict

    from musa import _C
    group = {"params": [1], "lr": 0.1, "momentum": 0.9, "nesterov": False, 3: None}
    assert _C._items_except(group, ("params", "lr")) == tuple(
        kv for kv in group.items() if kv[0] not in ("params", "lr"))
    assert _C._items_except({}, ("params",)) == ()
    states = [{}, {"momentum_buffer": 1, "step": 2}, OrderedDict(a=1), defaultdict(int, b=2)]
    assert _C._keys_of_each(states) == tuple(map(tuple, states))
    assert _C._keys_of_each(()) == ()
    with pytest.raises(TypeError, match=r"\[_items_except\] expected \(dict, tuple\), got \(list"):
        _C._items_except([], ())
    with pytest.raises(TypeError, match=r"\[_keys_of_each\] expected a sequence"):
        _C._keys_of_each(5)

    class Unequal:  # a key whose comparison raises: the error comes through
        def __eq__(self, other):
            raise ValueError("no comparing")

        def __hash__(self):
            return 1

    with pytest.raises(ValueError, match="no comparing"):
        _C._items_except({Unequal(): 1}, ("params",))


def test_last_smaller_batch_recompiles_once_and_is_logged():
    eager, comp = twins(make_cnn)
    oe = musa.optim.SGD(eager.parameters(), lr=0.05)
    oc = musa.optim.SGD(comp.parameters(), lr=0.05)
    step_e, step_c = make_step(eager, oe), musa.jit(make_step(comp, oc))
    musa.manual_seed(3)
    x, y = musa.randn(70, 1, 8, 8), musa.randint(0, 10, (70,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16, drop_last=False)
    for epoch in range(3):
        for xb, yb in loader:
            assert float(step_e(xb, yb)) == float(step_c(xb, yb))
    batch_lines = [line for line in step_c.recompile_log if "dim 0 changed: 16 -> 6" in line]
    assert len(batch_lines) == 1, step_c.recompile_log
    assert step_c.compiles == 2


def test_compiled_module_trains_with_an_eager_optimizer():
    eager, comp = twins(lambda: ResBlock(4))
    comp.compile()
    oe = musa.optim.Adam(eager.parameters(), lr=1e-2)
    oc = musa.optim.Adam(comp.parameters(), lr=1e-2)
    musa.manual_seed(4)
    for _ in range(10):
        x = musa.randn(2, 4, 5, 5)
        for m, o in ((eager, oe), (comp, oc)):
            o.zero_grad()
            (m(x) ** 2).mean().backward()
            o.step()
    for p, q in zip(eager.parameters(), comp.parameters()):
        close(q, p, rtol=1e-4, atol=1e-5)
    for p, q in zip(eager.buffers(), comp.buffers()):
        close(q, p, rtol=1e-4, atol=1e-5)


def test_jit_trace_of_a_training_module_shows_forward_and_backward():
    m = ZOO["mlp"][0]()
    traced = musa.jit.trace(m, (musa.randn(4, 64),))
    text = traced.get_graph()
    assert text.startswith("# forward") and "# backward" in text
    assert "linear(" in text and "matmul(" in text.split("# backward")[1]


# ---- digits ----

def load_digits():
    """The demo's split (examples/train_digits.py), as 1x8x8 images."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
    from train_digits import load_digits as load
    xtr, ytr, xte, yte = load()
    return xtr.reshape(-1, 1, 8, 8), ytr, xte.reshape(-1, 1, 8, 8), yte


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.c2, self.b2 = nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        x = F.max_pool2d(F.relu(self.b2(self.c2(x))), 2)
        return self.fc(x.flatten(1))


def test_digits_cnn_trained_static_reaches_the_eager_accuracy():
    xtr, ytr, xte, yte = load_digits()
    eager, comp = twins(DigitsCNN)
    oe = musa.optim.SGD(eager.parameters(), lr=0.05, momentum=0.9)
    oc = musa.optim.SGD(comp.parameters(), lr=0.05, momentum=0.9)
    step_e, step_c = make_step(eager, oe), musa.jit(make_step(comp, oc))
    musa.manual_seed(5)
    order = musa.randperm(len(xtr)) if hasattr(musa, "randperm") else None
    idx = order.numpy() if order is not None else np.random.RandomState(5).permutation(len(xtr))
    for epoch in range(3):
        for s in range(0, len(xtr), 64):
            b = musa.tensor(idx[s:s + 64].astype(np.int64))
            xb, yb = xtr[b], ytr[b]
            step_e(xb, yb)
            step_c(xb, yb)
    acc = {}
    for name, m in (("eager", eager), ("static", comp)):
        m.eval()
        with musa.no_grad():
            acc[name] = float((m(xte).argmax(1) == yte).float().mean())
    assert acc["static"] >= 0.95 and abs(acc["static"] - acc["eager"]) <= 0.005, acc


def test_dropout_steps_draw_the_same_numbers_as_eager():
    make = lambda: nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 10))
    eager, comp = twins(make)
    oe = musa.optim.SGD(eager.parameters(), lr=0.05)
    oc = musa.optim.SGD(comp.parameters(), lr=0.05)
    step_e, step_c = make_step(eager, oe), musa.jit(make_step(comp, oc))
    data = [(musa.randn(8, 64), musa.randint(0, 10, (8,))) for _ in range(6)]
    losses = {}
    for name, step in (("eager", step_e), ("static", step_c)):
        musa.manual_seed(11)  # the same generator state for both runs
        losses[name] = [float(step(x, y)) for x, y in data]
    assert losses["eager"] == losses["static"]
    for p, q in zip(eager.parameters(), comp.parameters()):
        close(q, p, rtol=1e-6, atol=1e-7)
    assert step_c.plan_stats()["runs"] >= 4


# ---- symbolic first captures (Config.capture) ----

def test_first_call_of_a_whole_step_runs_the_plan_not_an_eager_step():
    eager, comp = twins(ZOO["mlp"][0])
    oe, oc = (musa.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (eager, comp))
    step_e, step_c = make_step(eager, oe), musa.jit(make_step(comp, oc))
    x, y = musa.randn(8, 64), musa.randint(0, 10, (8,))
    assert float(step_e(x, y)) == float(step_c(x, y))
    assert step_c.compiles == 1 and step_c.plan_stats()["runs"] == 1
    for p, q in zip(eager.parameters(), comp.parameters()):
        assert np.array_equal(q.detach().numpy(), p.detach().numpy())
        assert np.array_equal(q.grad.numpy(), p.grad.numpy())


def test_a_host_read_in_a_callee_falls_back_to_tracing_and_keeps_old_grads(caplog):
    model = nn.Linear(4, 1)

    def loss_of(out):
        if out.sum() > -1e9:  # a host read the step function's own bytecode does not show
            return (out * out).sum()
        return out.sum()

    def step(x):  # accumulates: no zero_grad
        loss = loss_of(model(x))
        loss.backward()
        return loss.detach()

    x = musa.randn(3, 4)
    model.weight.grad = musa.ones(1, 4)  # an accumulated gradient that must survive
    w0 = model.weight.detach().clone()
    twin = nn.Linear(4, 1)
    twin.weight.data.copy_(model.weight.data)
    twin.bias.data.copy_(model.bias.data)
    twin.weight.grad = musa.ones(1, 4)
    c = musa.jit(step)
    with caplog.at_level("WARNING", logger="musa.jit"):
        out = c(x)
    assert any("symbolic capture not possible" in r.message for r in caplog.records)
    lt = (twin(x) * twin(x)).sum()
    lt.backward()
    close(out, lt.detach())
    close(model.weight.grad, twin.weight.grad)  # the old 1s plus this call's gradient
    assert np.array_equal(model.weight.detach().numpy(), w0.numpy())


def test_capture_modes_are_validated_and_symbolic_only_runs_eagerly_on_a_host_read():
    with pytest.raises(ValueError, match=r"\[Config\] capture must be one of"):
        musa.Config(capture="eager")
    c = musa.jit(lambda x: x * 2 if float(x.sum()) > 0 else x,
                 config=musa.Config(capture="symbolic"))
    with pytest.warns(RuntimeWarning, match="runs eagerly"):
        assert c(musa.ones(2)).tolist() == [2.0, 2.0]
    cfg = musa.Config(remat=False, dynamic={"x": {0: (1, 8)}})
    assert musa.jit(lambda x: x, fusion_level=0, config=cfg).config.remat is False
    assert cfg.set_fusion_level(2).dynamic == {"x": {0: (1, 8)}} and cfg.remat is False


def test_embedding_step_compiles_once_whatever_the_smallest_index():
    # indices are checked by the kernel as the plan runs: no host read, so
    # the step is captured symbolically, once, whatever the batch holds
    make = lambda: nn.Sequential(nn.Embedding(16, 8), nn.Flatten(), nn.Linear(32, 16))
    eager, comp = twins(make)
    step_e = make_step(eager, musa.optim.SGD(eager.parameters(), lr=0.1))
    step_c = musa.jit(make_step(comp, musa.optim.SGD(comp.parameters(), lr=0.1)))
    for lo in (0, 3, 1, 5):
        x, y = musa.randint(lo, 16, (6, 4)), musa.randint(0, 16, (6,))
        assert float(step_c(x, y)) == pytest.approx(float(step_e(x, y)), rel=1e-5)
    assert step_c.compiles == 1 and step_c.plan_stats()["runs"] == 4
    with pytest.raises(IndexError, match=r"\[index_select\] index 16 is out of bounds"):
        step_c(musa.tensor([[0, -2, 1, 1]]), musa.tensor([0]))  # -2 is out of range too
    with pytest.raises(IndexError, match=r"\[embedding\] index out of range: indices must be in \[0, 16\)"):
        step_e(musa.tensor([[0, -2, 1, 1]]), musa.tensor([0]))


def conv_bn_relu_net():
    """Three conv-BatchNorm-ReLU blocks over 8x8 inputs and a linear head."""
    blocks = []
    for cin, cout in ((1, 6), (6, 8), (8, 8)):
        blocks += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU()]
    return nn.Sequential(*blocks, nn.Flatten(), nn.Linear(8 * 8 * 8, 10))


def test_remat_recomputes_batch_norm_outputs_from_their_statistics():
    # relu(batch_norm(conv)) read again in the backward is recomputed there
    # from the conv output and the stored mean/invstd: one pass, the same bits
    eager, comp = twins(conv_bn_relu_net)
    oe = musa.optim.SGD(eager.parameters(), lr=0.05, momentum=0.9)
    oc = musa.optim.SGD(comp.parameters(), lr=0.05, momentum=0.9)
    step_e, step_c = make_step(eager, oe), musa.jit(make_step(comp, oc))
    x, y = musa.randn(8, 1, 8, 8), musa.randint(0, 10, (8,))
    for _ in range(3):
        assert float(step_e(x, y)) == float(step_c(x, y))
    assert "batch_norm_apply" in step_c.plan_text()


def test_remat_recomputes_layer_norm_outputs_from_their_statistics():
    # a transformer-like MLP block: LayerNorm's output, read again by the
    # backward, is recomputed there from the stored mean/invstd, one pass
    def make():
        return nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 32),
                             nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 32), nn.LayerNorm(32),
                             nn.GELU(), nn.Linear(32, 10))

    eager, comp = twins(make)
    oe = musa.optim.SGD(eager.parameters(), lr=0.05, momentum=0.9)
    oc = musa.optim.SGD(comp.parameters(), lr=0.05, momentum=0.9)
    step_e, step_c = make_step(eager, oe), musa.jit(make_step(comp, oc))
    x, y = musa.randn(8, 16), musa.randint(0, 10, (8,))
    for _ in range(3):
        assert float(step_e(x, y)) == float(step_c(x, y))
    assert "layer_norm_apply" in step_c.plan_text()


def test_remat_false_recomputes_nothing_in_a_whole_step():
    # Config(remat=False) turns the remat pass off too, not only the
    # forward/backward split of compiled modules: the step saves what the
    # backward reads (a larger plan, the same bits), and a memory_budget is
    # then only checked, at once, without rebuilding
    x, y = musa.randn(8, 1, 8, 8), musa.randint(0, 10, (8,))
    losses, peaks = {}, {}
    for remat in (True, False):
        musa.manual_seed(0)
        m = conv_bn_relu_net()
        step = musa.jit(make_step(m, musa.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)),
                        config=musa.Config(remat=remat))
        losses[remat] = [float(step(x, y)) for _ in range(3)]
        assert ("batch_norm_apply" in step.plan_text()) == remat
        peaks[remat] = step.memory_plan()["peak_bytes"]
    assert losses[True] == losses[False]
    assert peaks[False] > peaks[True]
    musa.manual_seed(0)
    m = conv_bn_relu_net()
    step = musa.jit(make_step(m, musa.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)),
                    config=musa.Config(remat=False, memory_budget=peaks[True]))
    with pytest.raises(MemoryError, match=r"with remat=False \(nothing recomputed\) the plan "
                                          rf"needs .* \({peaks[False]} bytes"):
        step(x, y)


def make_step_3d(model, opt):
    """A whole step whose model gives (B, T, 10) logits, flattened for the loss."""
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, 10), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def test_remat_frees_the_original_when_the_late_read_is_a_view():
    # a 3-d linear's weight gradient reads gelu's output through a 2-d view;
    # the view follows the recomputed value, so the original dies at its
    # forward reader instead of living until the backward
    def make():
        return nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16), nn.LayerNorm(16),
                             nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16), nn.LayerNorm(16),
                             nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 10))

    eager, comp = twins(make)
    oe = musa.optim.SGD(eager.parameters(), lr=0.05, momentum=0.9)
    oc = musa.optim.SGD(comp.parameters(), lr=0.05, momentum=0.9)

    step_e, step_c = make_step_3d(eager, oe), musa.jit(make_step_3d(comp, oc))
    x, y = musa.randn(4, 8, 16), musa.randint(0, 10, (32,))
    for _ in range(3):
        assert float(step_e(x, y)) == float(step_c(x, y))
    gelus = [t for t in step_c.memory_plan()["largest_intermediates"] if t["op"] == "gelu"]
    # the first two blocks' gelus and their recomputations each live from
    # their writer to their one reader (the last block's is read too soon
    # to be recomputed)
    short = [t for t in gelus if t["live_steps"][1] - t["live_steps"][0] <= 1]
    assert len(short) == 4, gelus


@pytest.mark.parametrize("poison", [False, True])
def test_cross_entropy_gradient_is_written_over_its_reshaped_logits(poison):
    # the logits (B, T, V) reach cross_entropy as a (B T, V) view; their
    # buffer dies at the loss's backward, whose gradient (same bytes) is
    # written over it (OVERWRITE: the kernel reads each row first), and the
    # step stays eager's bit for bit (poison: dead buffers filled with NaN)
    def make():
        return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 10))

    eager, comp = twins(make)
    oe = musa.optim.SGD(eager.parameters(), lr=0.05, momentum=0.9)
    oc = musa.optim.SGD(comp.parameters(), lr=0.05, momentum=0.9)

    step_e = make_step_3d(eager, oe)
    step_c = musa.jit(make_step_3d(comp, oc), config=musa.Config(poison=poison))
    musa.manual_seed(3)
    for _ in range(3):
        x, y = musa.randn(4, 8, 16), musa.randint(0, 10, (32,))
        assert float(step_e(x, y)) == float(step_c(x, y))
    for p, q in zip(eager.parameters(), comp.parameters()):
        assert bool((p == q).all()) and bool((p.grad == q.grad).all())
    seg = step_c._last
    g = seg.graph
    xent = [g.node_info(i) for i in range(g.nodes_len)
            if g.node_info(i) is not None and g.node_info(i).op == "cross_entropy_backward"]
    assert len(xent) == 1
    own = {b[0] for b in seg.plan.buffers()}  # values with a buffer of their own
    assert xent[0].outputs[0] not in own


def fgsm_step(x, y, w):
    # an adversarial step: the gradient of the loss with respect to the input
    loss = F.cross_entropy(musa.tanh(x @ w) * 3, y)
    loss.backward()
    return loss.detach(), (x + 0.1 * x.grad.sign()).detach()


@pytest.mark.parametrize("capture", ["auto", "trace"])
def test_whole_step_sets_the_grad_of_arguments_as_eager(capture):
    # a backward inside the function sets .grad of arguments that require
    # grad, as it does of parameters: each call's own tensors
    musa.manual_seed(0)
    w = musa.randn(8, 4).requires_grad_(True)  # a parameter (read, not passed)
    y = musa.randint(0, 4, (5,))
    step = musa.jit(lambda x: fgsm_step(x, y, w), config=musa.Config(capture=capture))
    for i in range(3):
        x = musa.randn(5, 8).requires_grad_(True)
        xe = x.detach().clone().requires_grad_(True)
        w.grad = None
        want_loss, want_adv = fgsm_step(xe, y, w)
        want_gw = w.grad.numpy().copy()
        w.grad = None
        loss, adv = step(x)
        assert np.array_equal(loss.numpy(), want_loss.numpy()), i
        assert np.array_equal(adv.numpy(), want_adv.numpy()), i
        assert x.grad is not None and np.array_equal(x.grad.numpy(), xe.grad.numpy()), i
        assert np.array_equal(w.grad.numpy(), want_gw), i
    assert step.compiles == 1


def test_an_arguments_existing_grad_is_added_to_as_eager():
    # eager adds the new gradient to an argument's .grad, and code after the
    # backward reads the sum: such a call runs eagerly
    musa.manual_seed(1)
    w = musa.randn(8, 4)
    y = musa.randint(0, 4, (5,))
    step = musa.jit(lambda x: fgsm_step(x, y, w))
    x = musa.randn(5, 8).requires_grad_(True)
    xe = x.detach().clone().requires_grad_(True)
    step(x)  # compiled: x.grad was None
    fgsm_step(xe, y, w)
    assert np.array_equal(x.grad.numpy(), xe.grad.numpy())
    with pytest.warns(RuntimeWarning, match="adds to an argument's existing .grad"):
        loss, adv = step(x)  # x.grad is set: added to, as eager does (a new variant, eager)
    want_loss, want_adv = fgsm_step(xe, y, w)
    assert np.array_equal(x.grad.numpy(), xe.grad.numpy())
    assert np.array_equal(adv.numpy(), want_adv.numpy())
    assert "argument 'x' .grad changed: None -> set" in step.recompile_log[-1]
    # a function that drops the .grad itself compiles with it set
    def fresh(x):
        x.grad = None
        return fgsm_step(x, y, w)
    c = musa.jit(fresh)
    for _ in range(3):
        loss, adv = c(x)
        want_loss, want_adv = fresh(xe)
        assert np.array_equal(x.grad.numpy(), xe.grad.numpy())
        assert np.array_equal(adv.numpy(), want_adv.numpy())
    assert c.compiles == 1 and "fused" in c.plan_text()
    # a trace that saw an existing .grad added to is not compiled: eager, once warned
    traced = musa.jit(lambda x: fgsm_step(x, y, w), config=musa.Config(capture="trace"))
    with pytest.warns(RuntimeWarning, match="runs eagerly"):
        traced(x)
    fgsm_step(xe, y, w)
    assert np.array_equal(x.grad.numpy(), xe.grad.numpy())


def test_compiled_function_with_a_float_output_that_needs_no_grad():
    # a float output computed from no input that requires grad comes first:
    # the tape node's backward takes the gradients of the others by position
    def f(a, b):
        mask = musa.sigmoid(((b > 0) & (b < 1)).float())
        return mask, b - a, a ** 2
    a = musa.randn(5, 3, requires_grad=True)
    b = musa.randn(5, 3, requires_grad=True)
    c = musa.jit(f)
    for fn in (f, c, c):
        a.grad = b.grad = None
        mask, d, s = fn(a, b)
        assert not mask.requires_grad
        (d * 3 + s).sum().backward()
        if fn is f:
            ga, gb = a.grad.numpy().copy(), b.grad.numpy().copy()
        else:
            assert np.array_equal(a.grad.numpy(), ga) and np.array_equal(b.grad.numpy(), gb)


def test_a_compiled_step_over_a_model_follows_its_train_and_eval_modes():
    # batch norm reads self.training while the step is captured; that read is
    # a guard now: before, model.eval() after a training capture ran the
    # training plan (batch statistics, running stats updated)
    musa.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    twin = copy.deepcopy(net)

    def make(model):
        opt = musa.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x):
            opt.zero_grad()
            loss = (model(x) ** 2).mean()
            if model.training:
                loss.backward()
                opt.step()
            return loss.detach()
        return step

    compiled, eager = musa.jit(make(net)), make(twin)
    x = musa.randn(8, 4)
    for mode in ["train", "train", "eval", "eval", "train", "eval", "train"]:
        getattr(net, mode)(), getattr(twin, mode)()
        close(compiled(x), eager(x), rtol=0, atol=0)
        for a, b in zip(net.state_dict().values(), twin.state_dict().values()):
            close(a, b, rtol=0, atol=0)
    assert any("BatchNorm1d.training changed" in line for line in compiled.recompile_log)


@pytest.mark.parametrize("caller", ["sum", "sum reversed", "roots", "one op"])
def test_three_gradient_contributions_to_one_input_add_in_eager_order(caller):
    # b reaches the loss through its mean (an output, also read by another
    # output) and as both operands of b / b: three terms into b.grad. The
    # two b / b terms cancel, so where 1 / b is large the rounding of their
    # partial sum shows (jit fuzzer seed 1095110: 0.00549316 against eager's
    # 0.00549451). Eager runs the mean's backward only after the caller's
    # use of m, so the compiled backward must wait for it too.
    def f(a, b):
        m = b.mean()
        return m, (b / b) * a, m * 2.0

    def backward(outs):
        if caller == "roots":
            return musa.autograd.backward([(o * 0.5).sum() for o in outs])
        if caller == "one op":
            return musa.stack([outs[0] * 0.5, (outs[1] * 0.5).sum(), outs[2] * 0.5]).sum().backward()
        order = outs[::-1] if caller == "sum reversed" else outs
        sum((o * 0.5).sum() for o in order).backward()

    musa.manual_seed(0)
    base = [musa.randn(273) for _ in range(2)]
    grads = []
    for g in (f, musa.jit(f)):
        xs = [x.clone().requires_grad_(True) for x in base]
        backward(g(*xs))
        grads.append([x.grad.numpy() for x in xs])
    assert np.array_equal(grads[0][0], grads[1][0])
    assert np.array_equal(grads[0][1], grads[1][1])


@pytest.mark.parametrize("capture", ["symbolic", "trace"])
def test_a_scheduler_step_inside_a_compiled_step_raises(capture):
    """A compiled call runs only the recorded ops: an lr change the function
    makes after the optimizer's step would happen at the capture only (the
    compiled step silently kept that lr). It raises, naming both values; the
    same step with the scheduler outside matches eager."""
    def train(compiled, inside):
        musa.manual_seed(0)
        lin = nn.Linear(8, 3)
        opt = musa.optim.SGD(lin.parameters(), lr=0.1)
        sch = musa.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)

        def step(x):
            opt.zero_grad()
            loss = lin(x).pow(2).sum()
            loss.backward()
            opt.step()
            if inside:
                sch.step()
            return loss.detach()

        if compiled:
            step = musa.jit(step, config=musa.Config(capture=capture))
        musa.manual_seed(1)
        losses = []
        for _ in range(4):
            losses.append(float(step(musa.randn(4, 8))))
            if not inside:
                sch.step()
        return losses

    with pytest.raises(RuntimeError, match=r"lr changed during the call \(0\.1 -> 0\.05\)"):
        train(True, True)
    assert train(True, False) == train(False, False) == train(False, True)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 3])
def test_an_embedding_bag_step_compiles_with_eager_losses(mode, padding_idx):
    """embedding_bag read its offsets (and, for max, each bag's count) on
    the host, so a step using it ran eagerly under musa.jit, with a
    warning; its bags are ops now, an empty bag and padding included."""
    x, off = musa.tensor([3, 1, 2, 3, 3, 7, 8, 9, 3, 4, 5, 6]), musa.tensor([0, 3, 3, 7])

    def losses(compiled):
        musa.manual_seed(0)
        eb = nn.EmbeddingBag(50, 8, mode=mode, padding_idx=padding_idx)
        opt = musa.optim.SGD(eb.parameters(), lr=0.1)

        def step(x, off):
            opt.zero_grad()
            loss = eb(x, off).pow(2).sum()
            loss.backward()
            opt.step()
            return loss.detach()

        fn = musa.jit(step) if compiled else step
        out = [float(fn(x, off)) for _ in range(3)]
        return out, (fn.compiles if compiled else None)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "runs eagerly" warning
        got, compiles = losses(True)
    assert compiles == 1
    assert got == losses(False)[0]


def test_bad_embedding_bag_offsets_are_refused_in_a_compiled_step():
    """Eager checks the offsets on the host; a compiled step cannot read
    them there, so a bad offsets tensor makes the plan refuse the run."""
    eb = nn.EmbeddingBag(50, 4)
    step = musa.jit(lambda x, off: eb(x, off).sum())
    x = musa.tensor([1, 2, 3, 4, 5])
    good = float(step(x, musa.tensor([0, 2])))
    assert good == float(eb(x, musa.tensor([0, 2])).sum())
    for bad in ([1, 2], [0, 9], [0, -1], [3, 2]):
        with pytest.raises(ValueError, match=r"\[embedding_bag\] offsets must start at 0"):
            eb(x, musa.tensor(bad))
        with pytest.raises(IndexError, match=r"index_select"):
            step(x, musa.tensor(bad))
