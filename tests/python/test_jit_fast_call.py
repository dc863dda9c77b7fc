"""The compiled call's fast path (Plan.call): after a variant has run once,
calls with the same argument signature, grad and autocast modes and guard
values skip the Python key and run the plan from C. Every check it makes
must send a call that differs to the full path, which picks (or captures)
the right variant: these tests change one thing at a time and compare with
eager results."""
import copy

import numpy as np
import pytest

import musa
import musa.nn as nn
import musa.nn.functional as F


def same(a, b):
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(a.detach().float().numpy(), b.detach().float().numpy())


def fast_on(f):
    return f._fast is not None


def test_engages_and_matches_eager():
    def fn(a, b):
        return (a @ b).relu() + 1

    f = musa.jit(fn)
    a, b = musa.randn(5, 4), musa.randn(4, 3)
    for _ in range(3):
        same(f(a, b), fn(a, b))
    assert fast_on(f) and f.compiles == 1
    a.mul_(2)  # new values, same signature: the plan reads them
    same(f(a, b), fn(a, b))


@pytest.mark.parametrize("change", ["shape", "dtype", "requires_grad", "rank"])
def test_a_changed_signature_takes_its_own_variant(change):
    def fn(a, b):
        return a * b + a

    f = musa.jit(fn)
    a, b = musa.randn(3, 4), musa.randn(3, 4)
    f(a, b), f(a, b)
    assert fast_on(f)
    if change == "shape":
        a2, b2 = musa.randn(2, 4), musa.randn(2, 4)
    elif change == "dtype":
        a2, b2 = a.double(), b.double()
    elif change == "rank":
        a2, b2 = musa.randn(12), musa.randn(12)
    else:
        a2, b2 = a.detach().clone().requires_grad_(), b
    for _ in range(2):
        r = f(a2, b2)
        same(r, fn(a2, b2))
        assert r.dtype == a2.dtype and r.requires_grad == a2.requires_grad
    assert f.compiles == 2
    for _ in range(2):  # and back: the first variant again, no third capture
        same(f(a, b), fn(a, b))
    assert f.compiles == 2


def test_grad_mode_and_autocast_are_checked():
    def fn(a, w):
        return a @ w

    f = musa.jit(fn)
    a, w = musa.randn(4, 8), musa.randn(8, 2)
    f(a, w), f(a, w)
    assert fast_on(f)
    with musa.amp.autocast():
        for _ in range(2):
            r = f(a, w)
            assert r.dtype == musa.bfloat16
            same(r, fn(a, w))
    r = f(a, w)
    assert r.dtype == musa.float32
    same(r, fn(a, w))

    def step(x, w):  # backward under no_grad raises, compiled or not
        loss = (x * w).sum()
        loss.backward()
        return loss

    g = musa.jit(step)
    x, w = musa.randn(3), musa.randn(3, requires_grad=True)
    for _ in range(2):
        w.grad = None
        g(x, w)
    assert fast_on(g)
    w.grad = None
    with musa.no_grad():
        with pytest.raises(RuntimeError, match="grad"):
            step(x, w)
        with pytest.raises(RuntimeError, match="grad"):
            g(x, w)


@pytest.mark.filterwarnings("ignore:musa.jit.*runs eagerly")
def test_gradient_presence_is_checked():
    # with .grad set, backward adds to it: that variant runs eagerly, and a
    # call with a gradient present must not take the variant that sets it
    def fn(x, w):
        loss = (x * w).sum()
        loss.backward()
        return loss

    f = musa.jit(fn)
    x = musa.randn(6)
    w = musa.randn(6, requires_grad=True)
    ref = w.detach().clone().requires_grad_()
    for i in range(7):
        if i % 3 == 0:
            w.grad = ref.grad = None
        same(f(x, w), fn(x, ref))
        same(w.grad, ref.grad)
    assert fast_on(f)


def test_arguments_the_fast_path_does_not_take():
    def fn(a, b=None):
        return a * 2 + (0 if b is None else b)

    f = musa.jit(fn)
    a, b = musa.randn(4, 3), musa.randn(4, 3)
    f(a, b), f(a, b)
    assert fast_on(f)
    same(f(a, a), fn(a, a))                      # one tensor twice
    same(f(a.t().t(), b), fn(a, b))              # a view, still contiguous
    c = musa.randn(3, 4).t()                     # not contiguous
    same(f(c, b), fn(c, b))
    same(f(a, b=b), fn(a, b=b))                  # by keyword
    same(f(a, 1.5), fn(a, 1.5))                  # a Python number
    same(f(a, b), fn(a, b))


def test_structured_results():
    def fn(a, b):
        return {"sum": a + b, "pair": (a * b, [a - b])}

    f = musa.jit(fn)
    a, b = musa.randn(3), musa.randn(3)
    for _ in range(3):
        r, e = f(a, b), fn(a, b)
        same(r["sum"], e["sum"])
        same(r["pair"][0], e["pair"][0])
        same(r["pair"][1][0], e["pair"][1][0])
    assert fast_on(f)


def test_python_guards_are_checked():
    state = {"k": 2.0}

    def fn(a):
        musa.jit.guard("k", lambda: state["k"], state["k"])
        return a * state["k"]

    f = musa.jit(fn)
    a = musa.randn(5)
    f(a), f(a)
    assert fast_on(f)
    state["k"] = 3.0
    same(f(a), a * 3.0)
    same(f(a), a * 3.0)
    assert f.compiles == 2
    state["k"] = 2.0
    same(f(a), a * 2.0)
    assert f.compiles == 2


def test_a_guard_that_raises_raises_as_before():
    state = {"k": 2.0}

    def fn(a):
        musa.jit.guard("k", lambda: state["k"], state["k"])
        return a * 2

    f = musa.jit(fn)
    a = musa.randn(5)
    f(a), f(a)
    del state["k"]
    with pytest.raises(KeyError):
        f(a)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def make_step(net, opt):
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def test_whole_training_step_matches_eager_step_for_step():
    musa.manual_seed(0)
    net = MLP()
    twin = copy.deepcopy(net)
    opt = musa.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    topt = musa.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)
    step, eager = musa.jit(make_step(net, opt)), make_step(twin, topt)
    x, y = musa.randn(6, 8), musa.randint(0, 4, (6,))
    for i in range(8):
        if i == 4:
            opt.param_groups[0]["lr"] = topt.param_groups[0]["lr"] = 0.05  # read at run time
        if i == 6:  # a guarded option: a new variant
            opt.param_groups[0]["momentum"] = topt.param_groups[0]["momentum"] = 0.5
        same(step(x, y), eager(x, y))
        for p, q in zip(net.parameters(), twin.parameters()):
            same(p, q)
            same(p.grad, q.grad)
    assert fast_on(step)
    assert step.compiles == 2 and len(step.recompile_log) == 1


def test_inside_another_capture_it_is_inlined():
    inner = musa.jit(lambda a: a * 3)
    a = musa.randn(4)
    inner(a), inner(a)
    assert fast_on(inner)
    outer = musa.jit(lambda a: inner(a) + 1)
    for _ in range(3):
        same(outer(a), a * 3 + 1)
    assert inner.compiles == 1


def test_compiled_module_training_takes_the_fast_checks():
    # a variant run as a training node (outputs that need autograd): C checks
    # the call, Python makes the tape node; gradients match eager's
    musa.manual_seed(0)
    net = MLP()
    twin = copy.deepcopy(net)
    f = musa.jit(net)
    x, y = musa.randn(6, 8), musa.randint(0, 4, (6,))
    for i in range(4):
        F.cross_entropy(f(x), y).backward()
        F.cross_entropy(twin(x), y).backward()
        for p, q in zip(net.parameters(), twin.parameters()):
            same(p.grad, q.grad)  # accumulated over the calls, as eagerly
    assert fast_on(f) and f._fast[0] is None
    xg = x.detach().clone().requires_grad_()  # a new variant: x needs a gradient
    xt = x.detach().clone().requires_grad_()
    for _ in range(2):
        F.cross_entropy(f(xg), y).backward()
        F.cross_entropy(twin(xt), y).backward()
        same(xg.grad, xt.grad)
    with musa.no_grad():
        for _ in range(2):
            r = f(x)
            assert not r.requires_grad
            same(r, twin(x))
    assert f.compiles == 4  # x without and with .grad, then no_grad


@pytest.mark.parametrize("how", ["jit", "compile"])
def test_a_compiled_module_follows_train_and_eval(how):
    # musa.jit(module) did not key on module.training: after eval() it ran
    # the training plan (batch statistics, running stats updated)
    musa.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 6), nn.BatchNorm1d(6), nn.ReLU())
    twin = copy.deepcopy(net)
    f = musa.jit(net) if how == "jit" else net.compile()
    x = musa.randn(5, 8)
    with musa.no_grad():
        for mode in ["train", "train", "train", "eval", "eval", "train", "eval"]:
            getattr(net, mode)(), getattr(twin, mode)()
            same(f(x), twin(x))
            same(net[1].running_mean, twin[1].running_mean)
    assert fast_on(net._compiled_call if how == "compile" else f)
