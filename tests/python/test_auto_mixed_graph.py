"""musa.auto_mixed_graph (issue 18): the bytecode findings, the policy's
decisions (with a scripted clock where a decision depends on times, so the
tests do not depend on this machine's load), results equal to eager, and
explain()."""
import logging
import random

import numpy as np
import pytest

import musa
import musa.nn as nn
from musa._auto_mixed import analyze


class Clock:
    """A clock whose calls take the times a test scripts: eager calls
    `eager` seconds, compiled ones `compiled` (the first compiled call adds
    `compile`)."""

    def __init__(self, eager, compiled, compile=0.001):
        self.now, self.eager, self.compiled, self.compile = 0.0, eager, compiled, compile
        self.next = eager

    def __call__(self):
        self.now += self.next  # each reading advances a call: end - start is one call
        return self.now


def scripted(wrapper, eager, compiled, compile=0.001):
    """Make wrapper's timings eager/compiled seconds per call."""
    clock = Clock(eager, compiled, compile)
    wrapper._clock = clock
    run_compiled = wrapper._run_compiled

    def timed(args, kwargs):
        first = wrapper._compile_cost is None and wrapper.mode == "trial"
        clock.next = compiled + (compile if first else 0.0)
        try:
            return run_compiled(args, kwargs)
        finally:
            clock.next = eager
    wrapper._run_compiled = timed
    return wrapper


def lines(w):
    return w.explain()


def small_cnn():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, 10))


# 1
def test_a_fixed_shape_cnn_becomes_static_after_warmup_and_equals_eager():
    net = small_cnn().eval()
    g = scripted(musa.auto_mixed_graph(net, warmup=3, measure=2), eager=400e-6, compiled=150e-6)
    x = musa.randn(2, 3, 8, 8)
    modes = []
    with musa.no_grad():
        for _ in range(8):
            out = g(x)
            np.testing.assert_array_equal(out.numpy(), net(x).numpy())
            modes.append(g.mode)
    assert modes[:3] == ["warmup", "warmup", "trial"] and modes[-1] == "static"
    assert g.compiles == 1 and g._compiled.compiles == 1
    assert "static: compiled calls take 150.0 us against 400.0 us eager (2.67x)" in g.explain()


# 2
def test_a_branch_on_values_takes_the_right_side_for_both_signs_and_is_named():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1
    g = scripted(musa.auto_mixed_graph(f, warmup=2, measure=2), eager=100e-6, compiled=40e-6)
    for i in range(10):
        v = 1.5 if i % 3 else -0.5
        assert g(musa.full((3,), v)).tolist() == ([3.0] * 3 if v > 0 else [-1.5] * 3)
    assert g.mode == "static"
    report = g.explain()
    assert "data_branch at test_auto_mixed_graph.py:" in report and "if x.sum() > 0:" in report


# 3
def test_a_new_shape_every_call_stays_dynamic_without_recompiling():
    g = musa.auto_mixed_graph(lambda x: (x * 2).sum(), warmup=3)
    for n in range(1, 30):
        assert g(musa.ones(n)).item() == 2 * n
    assert g.mode == "dynamic" and g.compiles == 0 and g._compiled is None
    assert "the argument shapes changed: 3 signatures in the first 3 calls" in g.explain()
    assert len(g.decisions) == 1  # said once, not per call


def test_shapes_that_change_after_going_static_send_it_back_once():
    g = scripted(musa.auto_mixed_graph(lambda x: x * 3 + 1, warmup=2, measure=1, max_variants=2),
                 eager=100e-6, compiled=20e-6)
    for _ in range(4):
        g(musa.ones(4))
    assert g.mode == "static"
    for n in range(5, 12):
        assert g(musa.ones(n)).tolist() == [4.0] * n
    assert g.mode == "dynamic" and g._compiled.compiles <= 2
    assert "keep changing" in g.explain()


def test_declared_dynamic_dims_are_not_new_shapes():
    g = scripted(musa.auto_mixed_graph(lambda x: x.relu() * 2, warmup=2, measure=1, dynamic={"x": 0}),
                 eager=100e-6, compiled=20e-6)
    for n in (3, 4, 5, 6, 7, 8):
        assert g(musa.ones(n, 2)).sum().item() == 4 * n
    assert g.mode == "static" and g._compiled.compiles == 1


TABLE = {}


# 4
def test_side_effects_keep_it_dynamic_and_name_the_line():
    seen = []

    def prints(x):
        print("value", x.shape)
        return x + 1

    def writes_global(x):
        global LAST
        LAST = x
        return x + 1

    def appends(x):
        seen.append(x)
        return x + 1

    def stores(x):
        TABLE["last"] = x
        return x + 1

    for fn, kind, text in ((prints, "side_effect", 'print("value", x.shape)'),
                           (writes_global, "global_write", "LAST = x"),
                           (appends, "outer_mutation", "seen.append(x)"),
                           (stores, "outer_mutation", 'TABLE["last"] = x')):
        g = musa.auto_mixed_graph(fn)
        for _ in range(6):
            assert g(musa.ones(2)).tolist() == [2.0, 2.0]
        assert g.mode == "dynamic" and g.compiles == 0
        report = g.explain()
        assert f"BLOCKS {kind} at test_auto_mixed_graph.py:" in report and text in report, report
    assert len(seen) == 6


def test_the_analysis_finds_each_kind():
    import numpy

    def host(x):
        n = int(x.sum())
        v = x.max().item()
        for _ in range(int(x[0].item())):
            x = x + 1
        return x * n * v + numpy.float32(1)

    kinds = {f.kind for f in analyze(host)}
    assert {"host_read", "loop_on_values", "foreign_library"} <= kinds, kinds

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
            self.cache = {}

        def forward(self, x):
            self.last = x  # a module attribute: allowed
            self.cache["x"] = x
            return self.fc(x)

    found = analyze(Net())
    assert not any(f.blocking for f in found if "last" in f.detail)


# 5
class Tree:
    def __init__(self, left=None, right=None, leaf=None):
        self.left, self.right, self.leaf = left, right, leaf


def random_tree(rng, depth=0):
    if depth > 2 or rng.random() < 0.3:
        return Tree(leaf=rng.randrange(10))
    return Tree(random_tree(rng, depth + 1), random_tree(rng, depth + 1))


class TreeLSTM(nn.Module):
    """A binary Tree-LSTM (Tai et al.): the recursion follows each tree."""

    def __init__(self, d=8):
        super().__init__()
        self.embed = nn.Embedding(10, d)
        self.iou = nn.Linear(2 * d, 3 * d)
        self.f = nn.Linear(2 * d, 2 * d)
        self.out = nn.Linear(d, 1)
        self.d = d

    def node(self, tree):
        if tree.leaf is not None:
            h = self.embed(musa.tensor([tree.leaf])).reshape(self.d)
            return h, musa.zeros(self.d)
        (hl, cl), (hr, cr) = self.node(tree.left), self.node(tree.right)
        hx = musa.cat([hl, hr])
        i, o, u = self.iou(hx).chunk(3)
        fl, fr = self.f(hx).chunk(2)
        c = i.sigmoid() * u.tanh() + fl.sigmoid() * cl + fr.sigmoid() * cr
        return o.sigmoid() * c.tanh(), c

    def forward(self, tree):
        return self.out(self.node(tree)[0])


def test_a_tree_lstm_over_random_trees_stays_dynamic_and_trains():
    rng = random.Random(0)
    musa.manual_seed(0)
    model = TreeLSTM()
    g = musa.auto_mixed_graph(model)
    opt = musa.optim.Adam(model.parameters(), lr=0.05)
    trees = [random_tree(rng) for _ in range(8)]
    targets = [float(rng.random()) for _ in trees]
    first = last = None
    for epoch in range(15):
        total = 0.0
        for tree, y in zip(trees, targets):
            opt.zero_grad()
            loss = (g(tree) - y).pow(2).sum()
            loss.backward()
            opt.step()
            total += loss.item()
        first = first if first is not None else total
        last = total
    assert g.mode == "dynamic" and g.compiles == 0
    assert last < 0.5 * first
    assert "the argument structure (or objects) changed" in g.explain()
    # the recursion is read too: its branch on the tree is Python data, not a tensor read
    assert not any(f.blocking for f in g.findings), g.explain()


# 6
def test_a_whole_training_step_becomes_static_and_matches_eager_step_for_step():
    def make():
        musa.manual_seed(3)
        model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
        return model, musa.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    x, y = musa.randn(8, 6), musa.randn(8, 1)

    def step_of(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return step

    eager_model, eager_opt = make()
    eager_step = step_of(eager_model, eager_opt)
    model, opt = make()
    g = scripted(musa.auto_mixed_graph(step_of(model, opt), warmup=2, measure=2), eager=300e-6, compiled=100e-6)
    for _ in range(10):
        assert g(x, y).item() == eager_step(x, y).item()
    assert g.mode == "static"
    for a, b in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


# 7
def test_a_compiled_form_that_is_slower_goes_back_to_eager_once(caplog):
    g = scripted(musa.auto_mixed_graph(lambda x: x + 1, warmup=2, measure=3), eager=1e-6, compiled=5e-6)
    with caplog.at_level(logging.INFO, logger="musa.auto_mixed_graph"):
        for _ in range(20):
            assert g(musa.ones(1)).item() == 2.0
    assert g.mode == "dynamic" and g.compiles == 1
    assert "compiled calls are not faster: 5.0 us against 1.0 us eager" in g.explain()
    assert len([r for r in caplog.records if "not faster" in r.getMessage()]) == 1


def test_a_compile_cost_that_never_pays_back_stays_eager():
    g = scripted(musa.auto_mixed_graph(lambda x: x * 2, warmup=2, measure=2, payback_calls=100),
                 eager=100e-6, compiled=90e-6, compile=1.0)
    for _ in range(8):
        g(musa.ones(3))
    assert g.mode == "dynamic"
    assert "calls to pay back (limit 100)" in g.explain() and "compile cost (1000.0 ms)" in g.explain()


def test_the_decorator_forms_and_bad_options():
    @musa.auto_mixed_graph
    def f(x):
        return x + 1

    @musa.auto_mixed_graph(warmup=5)
    def h(x):
        return x + 1

    assert f(musa.ones(1)).item() == 2.0 and h._warmup == 5 and f.__name__ == "f"
    assert isinstance(f, musa.AutoMixedGraph) and repr(f).endswith(".f, mode='warmup')")
    with pytest.raises(ValueError, match="warmup must be a positive int"):
        musa.auto_mixed_graph(f, warmup=0)
    with pytest.raises(ValueError, match="min_speedup"):
        musa.auto_mixed_graph(lambda x: x, min_speedup=-1)
    with pytest.raises(TypeError, match="expected a function or a module"):
        musa.auto_mixed_graph(3)
