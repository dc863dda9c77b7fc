"""musa.optim checked against torch.optim: 20 steps of each optimizer and
option on the same parameters and loss, param groups, state_dict round
trips, errors, and the lr schedulers epoch by epoch."""
import warnings

import numpy as np
import pytest
import torch

import musa
import musa.optim as optim
from musa.optim import lr_scheduler as sched

STEPS = 20


def npy(t):
    return t.detach().numpy()


def make_params(dtype=np.float32, seed=0):
    """A small tanh network's weights, as numpy arrays."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) * 0.5 for s in [(5, 4), (4,), (4, 2)]]


def make_data(dtype=np.float32):
    rng = np.random.default_rng(1)
    return rng.standard_normal((8, 5)).astype(dtype), rng.standard_normal((8, 2)).astype(dtype)


def loss_fn(ws, x, y, sign=1.0):
    # identical expression in both frameworks: tanh(x @ w1 + b1) @ w2, squared error
    # (sign -1 for maximize, so ascent converges instead of diverging chaotically)
    w1, b1, w2 = ws
    return (((x @ w1 + b1).tanh() @ w2 - y) ** 2).mean() * sign


def run(lib, opt_cls, arrays, groups=None, steps=STEPS, **kw):
    """Train for `steps` steps; return the final parameters (numpy) and the optimizer."""
    tensor = musa.tensor if lib is musa else torch.tensor
    ws = [tensor(a, requires_grad=True) for a in arrays]
    x, y = (tensor(a) for a in make_data(arrays[0].dtype))
    params = ws if groups is None else [dict(g, params=[ws[i] for i in g["params"]]) for g in groups]
    opt = opt_cls(params, **kw)
    sign = -1.0 if kw.get("maximize") else 1.0
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(ws, x, y, sign).backward()
        opt.step()
    return [w.detach().numpy().copy() for w in ws], opt


def check_vs_torch(name, kw, groups=None, dtype=np.float32, steps=STEPS):
    arrays = make_params(dtype)
    got, _ = run(musa, getattr(optim, name), arrays, groups, steps, **kw)
    want, _ = run(torch, getattr(torch.optim, name), arrays, groups, steps, **kw)
    for g, w, a in zip(got, want, arrays):
        assert not np.allclose(w, a), "the parameters did not move; the test would prove nothing"
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# ---- each optimizer and option against torch ----

@pytest.mark.parametrize("kw", [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.1, momentum=0.9, dampening=0.3),
    dict(lr=0.1, momentum=0.9, nesterov=True),
    dict(lr=0.1, weight_decay=0.05),
    dict(lr=0.1, momentum=0.5, weight_decay=0.05, dampening=0.1),
    dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01, maximize=True),
    dict(lr=0.05, maximize=True),
])
def test_sgd_matches_torch(kw):
    check_vs_torch("SGD", kw)


@pytest.mark.parametrize("kw", [
    dict(),
    dict(lr=0.01, amsgrad=True),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6),
    dict(lr=0.01, maximize=True),
    dict(lr=0.02, amsgrad=True, weight_decay=0.05, maximize=True),
])
def test_adam_matches_torch(kw):
    check_vs_torch("Adam", kw)


@pytest.mark.parametrize("kw", [
    dict(),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.01, amsgrad=True, weight_decay=0.0),
    dict(lr=0.01, amsgrad=True, maximize=True),
])
def test_adamw_matches_torch(kw):
    check_vs_torch("AdamW", kw)


@pytest.mark.parametrize("kw", [
    dict(),
    dict(lr=0.01, centered=True),
    dict(lr=0.01, momentum=0.9),
    dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.05, alpha=0.9),
    dict(lr=0.01, maximize=True, eps=1e-4),
])
def test_rmsprop_matches_torch(kw):
    check_vs_torch("RMSprop", kw)


@pytest.mark.parametrize("name,kw", [
    ("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(lr=0.01, amsgrad=True)), ("AdamW", dict(lr=0.01)),
    ("RMSprop", dict(centered=True, momentum=0.5))])
def test_float64_params_match_torch(name, kw):
    check_vs_torch(name, kw, dtype=np.float64)


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(lr=0.01)),
                                     ("RMSprop", dict(lr=0.01, momentum=0.9))])
def test_param_groups_with_own_options_match_torch(name, kw):
    groups = [{"params": [0, 1]}, {"params": [2], "lr": 0.003, "weight_decay": 0.1}]
    check_vs_torch(name, kw, groups=groups)


def test_default_adamw_weight_decay_and_defaults():
    p = musa.zeros(2, requires_grad=True)
    assert optim.AdamW([p]).defaults["weight_decay"] == 1e-2
    assert optim.Adam([p]).defaults == dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                                            amsgrad=False, maximize=False)
    assert optim.RMSprop([p]).param_groups[0]["alpha"] == 0.99


# ---- mechanics ----

def test_one_update_call_per_group_per_step(monkeypatch):
    calls = []
    real = musa._C._update
    counted = lambda op, rows, attrs: (calls.append(len(rows)), real(op, rows, attrs))  # noqa: E731
    monkeypatch.setattr(musa._C, "_update", counted)
    ws = [musa.randn(3, requires_grad=True) for _ in range(4)]
    opt = optim.Adam([{"params": ws[:3]}, {"params": ws[3:], "lr": 0.1}])
    for _ in range(2):
        opt.zero_grad()
        sum(w.sum() for w in ws).backward()
        opt.step()
    assert calls == [3, 1, 3, 1]


@pytest.mark.parametrize("make", [
    lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-4, nesterov=True),
    lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.3),
    lambda ps: optim.Adam(ps, lr=1e-2, amsgrad=True),
    lambda ps: optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    lambda ps: optim.RMSprop(ps, lr=1e-3, momentum=0.5, centered=True, weight_decay=1e-4),
], ids=["sgd-nesterov", "sgd-dampening", "adam-amsgrad", "adamw", "rmsprop-centered"])
def test_multi_tensor_step_is_bitwise_the_row_by_row_step(make, monkeypatch):
    # _C._update runs a group's rows as one multi-tensor kernel; the same
    # training with each row passed alone (one dispatch per parameter, the
    # old route) ends bitwise equal, parameters and state
    def model():
        musa.manual_seed(0)
        return musa.nn.Sequential(musa.nn.Conv2d(2, 8, 3), musa.nn.BatchNorm2d(8), musa.nn.ReLU(),
                                  musa.nn.Flatten(), musa.nn.Linear(8 * 6 * 6, 300),
                                  musa.nn.Linear(300, 130), musa.nn.Linear(130, 3))

    real = musa._C._update
    one_by_one = lambda op, rows, attrs: [real(op, [r], attrs) for r in rows]  # noqa: E731
    results = []
    for update in (real, one_by_one):
        monkeypatch.setattr(musa._C, "_update", update)
        m = model()
        opt = make(m.parameters())
        musa.manual_seed(1)
        for _ in range(4):
            opt.zero_grad()
            m(musa.randn(4, 2, 8, 8)).square().mean().backward()
            opt.step()
        state = [v for s in opt.state.values() for v in s.values() if isinstance(v, musa.Tensor)]
        results.append([npy(t) for t in list(m.parameters()) + state])
    assert len(results[0]) == len(results[1]) > 8
    for a, b in zip(*results):
        assert a.tobytes() == b.tobytes()


def test_params_without_grad_are_skipped():
    a, b = musa.ones(3, requires_grad=True), musa.ones(3, requires_grad=True)
    opt = optim.Adam([a, b], lr=0.1)
    a.sum().backward()
    opt.step()
    assert b not in opt.state and opt.state[a]["step"] == 1
    np.testing.assert_array_equal(npy(b), np.ones(3, np.float32))
    assert (npy(a) < 1).all()


def test_step_bumps_version_and_keeps_leaf():
    p = musa.ones(3, requires_grad=True)
    p.grad = musa.ones(3)
    v = p._version
    optim.SGD([p], lr=0.5).step()
    assert p._version > v and p.is_leaf and p.grad_fn is None
    np.testing.assert_array_equal(npy(p), np.full(3, 0.5, np.float32))


def test_noncontiguous_param_and_grad():
    base = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    p = musa.tensor(base).t().detach().requires_grad_(True)  # a leaf with strides (1, 3)
    assert not p.is_contiguous()
    tp = torch.tensor(base).t().detach().requires_grad_(True)
    g = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    opt, topt = optim.Adam([p], lr=0.1), torch.optim.Adam([tp], lr=0.1)
    for _ in range(3):
        p.grad, tp.grad = musa.tensor(g).t(), torch.tensor(g).t()
        opt.step()
        topt.step()
    np.testing.assert_allclose(npy(p), npy(tp), rtol=1e-5, atol=1e-6)


def test_zero_grad():
    p = musa.ones(2, requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    (p * 3).sum().backward()
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(npy(p.grad), [0, 0])
    opt.zero_grad()
    assert p.grad is None
    p.sum().backward()  # leaves a broadcast view of ones in .grad
    opt.zero_grad(set_to_none=False)
    (p * 2).sum().backward()
    np.testing.assert_array_equal(npy(p.grad), [2, 2])


def test_closure_runs_with_grad_enabled_and_returns_loss():
    p = musa.tensor([2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with musa.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 4.0
    assert p.item() == pytest.approx(2.0 - 0.25 * 4.0)


def test_add_param_group_and_repr():
    a, b = musa.zeros(2, requires_grad=True), musa.zeros(2, requires_grad=True)
    opt = optim.SGD([a], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": b, "lr": 0.01})
    assert opt.param_groups[1]["params"] == [b] and opt.param_groups[1]["momentum"] == 0.9
    ta, tb = torch.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)
    topt = torch.optim.SGD([ta], lr=0.1, momentum=0.9)
    topt.add_param_group({"params": tb, "lr": 0.01})
    # torch 1.13 has extra keys (foreach, differentiable); the rest of the text is the same
    want = "\n".join(line for line in repr(topt).splitlines()
                     if "foreach" not in line and "differentiable" not in line)
    assert repr(opt) == want
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})


# ---- state_dict ----

def test_state_dict_format():
    ws = [musa.randn(2, requires_grad=True) for _ in range(3)]
    opt = optim.Adam([{"params": ws[:2]}, {"params": ws[2:], "lr": 0.1}], amsgrad=True)
    sum((w * w).sum() for w in ws).backward()
    opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert sd["param_groups"][1]["lr"] == 0.1 and sd["param_groups"][0]["lr"] == 1e-3
    assert sorted(sd["state"]) == [0, 1, 2]
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    assert sd["state"][2]["step"] == 1
    assert sd["state"][2]["exp_avg"] is opt.state[ws[2]]["exp_avg"]  # shared, like torch
    sgd = optim.SGD(ws, lr=0.1, momentum=0.9)
    sgd.step()
    assert set(sgd.state_dict()["state"][0]) == {"momentum_buffer"}
    rms = optim.RMSprop(ws, momentum=0.9, centered=True)
    rms.step()
    assert set(rms.state_dict()["state"][0]) == {"step", "square_avg", "momentum_buffer", "grad_avg"}


@pytest.mark.parametrize("name,kw", [
    ("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(lr=0.01, amsgrad=True)), ("AdamW", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True))])
def test_state_dict_round_trip_continues_identically(name, kw):
    cls = getattr(optim, name)
    arrays = make_params()
    groups = [{"params": [0, 1]}, {"params": [2], "lr": 0.005}]
    ws, opt = run(musa, cls, arrays, groups, steps=10, **kw)
    # resume in a fresh optimizer over fresh tensors holding the same values
    sd = opt.state_dict()
    resumed = [musa.tensor(w, requires_grad=True) for w in ws]
    opt2 = cls([dict(g, params=[resumed[i] for i in g["params"]]) for g in groups], **kw)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[1]["lr"] == 0.005 and opt2.param_groups[1]["params"][0] is resumed[2]
    orig = [p for g in opt.param_groups for p in g["params"]]
    x, y = (musa.tensor(a) for a in make_data())
    for _ in range(10):
        for o, params in ((opt, orig), (opt2, resumed)):
            o.zero_grad()
            loss_fn(params, x, y).backward()
            o.step()
    for a, b in zip(orig, resumed):
        np.testing.assert_array_equal(npy(a), npy(b))
    # and both equal 20 uninterrupted steps
    want, _ = run(musa, cls, arrays, groups, steps=20, **kw)
    for a, w in zip(orig, want):
        np.testing.assert_array_equal(npy(a), w)


def test_load_state_dict_copies_and_casts():
    p = musa.ones(2, requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = musa.ones(2)
    opt.step()
    sd = opt.state_dict()
    q = musa.ones(2, dtype=musa.float64, requires_grad=True)
    opt2 = optim.SGD([q], lr=0.1, momentum=0.9)
    opt2.load_state_dict(sd)
    buf = opt2.state[q]["momentum_buffer"]
    assert buf.dtype is musa.float64 and buf is not sd["state"][0]["momentum_buffer"]
    sd["state"][0]["momentum_buffer"].fill_(5.0)
    np.testing.assert_array_equal(npy(buf), [1, 1])


def test_load_state_dict_mismatch_errors():
    a, b = musa.ones(2, requires_grad=True), musa.ones(2, requires_grad=True)
    sd = optim.SGD([a, b], lr=0.1).state_dict()
    with pytest.raises(ValueError, match="parameter groups"):
        optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="group 0 has 2 parameters"):
        optim.SGD([a], lr=0.1).load_state_dict(sd)


# ---- errors ----

@pytest.mark.parametrize("make,msg", [
    (lambda p: optim.SGD(p, lr=-1), r"\[SGD\] Invalid learning rate: -1"),
    (lambda p: optim.SGD(p, lr=0.1, momentum=-0.5), "Invalid momentum value: -0.5"),
    (lambda p: optim.SGD(p, lr=0.1, weight_decay=-1e-3), "Invalid weight_decay value: -0.001"),
    (lambda p: optim.SGD(p, lr=0.1, nesterov=True), "Nesterov momentum requires a momentum and zero damp"),
    (lambda p: optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "zero dampening"),
    (lambda p: optim.SGD(p), "required optimization parameter lr"),
    (lambda p: optim.Adam(p, lr=-0.01), r"\[Adam\] Invalid learning rate: -0.01"),
    (lambda p: optim.Adam(p, betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
    (lambda p: optim.Adam(p, betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    (lambda p: optim.Adam(p, eps=-1e-8), "Invalid epsilon value: -1e-08"),
    (lambda p: optim.AdamW(p, lr=-2), r"\[AdamW\] Invalid learning rate: -2"),
    (lambda p: optim.RMSprop(p, alpha=-0.1), r"\[RMSprop\] Invalid alpha value: -0.1"),
    (lambda p: optim.RMSprop(p, momentum=-1), "Invalid momentum value: -1"),
    (lambda p: optim.SGD([], lr=0.1), "empty parameter list"),
])
def test_invalid_arguments_raise_value_error(make, msg):
    p = [musa.zeros(2, requires_grad=True)]
    with pytest.raises(ValueError, match=msg):
        make(p)


def test_invalid_params_raise():
    p = musa.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match="not a Tensor"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(TypeError, match="one of the params is int"):
        optim.SGD([p, 3], lr=0.1)
    with pytest.raises(TypeError, match="not a set"):
        optim.SGD([{"params": {p}}], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2], lr=0.1)


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("name, kw", [("SGD", dict(lr=0.1, momentum=0.9)),
                                      ("Adam", dict(lr=0.01)),
                                      ("RMSprop", dict(lr=0.01, momentum=0.5))])
def test_low_precision_parameters_step_like_torch(dt, name, kw):
    # float16/bfloat16 parameters, state and gradients: float32 arithmetic,
    # one rounding per store (torch rounds after each op: a few ulps apart)
    rng = np.random.default_rng(0)
    p0 = rng.standard_normal(64).astype(np.float32)
    # Debian's torch 1.13 has no float16 Adam/RMSprop on the CPU: then its
    # float32 optimizer on the same (rounded) values is the reference
    tdt = getattr(torch, dt)
    try:
        t = torch.zeros(1, dtype=tdt, requires_grad=True)
        t.grad = torch.ones(1, dtype=tdt)
        getattr(torch.optim, name)([t], **kw).step()
    except RuntimeError:
        tdt = torch.float32
    mp = musa.tensor(p0).to(getattr(musa, dt)).requires_grad_()
    tp = torch.tensor(mp.detach().float().numpy()).to(tdt).requires_grad_()
    mo, to = getattr(optim, name)([mp], **kw), getattr(torch.optim, name)([tp], **kw)
    for _ in range(3):
        g = rng.standard_normal(64).astype(np.float32)
        mp.grad = musa.tensor(g).to(getattr(musa, dt))
        tp.grad = torch.tensor(mp.grad.float().numpy()).to(tdt)
        mo.step()
        to.step()
    assert mp.dtype == getattr(musa, dt)
    got, want = mp.detach().float().numpy(), tp.detach().float().numpy()
    assert np.abs(got - want).max() <= 2 ** -5 * np.abs(want).max()
    assert np.abs(got - p0).max() > 0.01  # it moved


# ---- lr schedulers ----

def sched_pair(make, lrs=(0.1, 0.02), make_torch=None, momentum=0.0):
    """The same scheduler over a musa and a torch SGD with one group per lr."""
    mp = [{"params": [musa.zeros(1, requires_grad=True)], "lr": lr} for lr in lrs]
    tp = [{"params": [torch.zeros(1, requires_grad=True)], "lr": lr} for lr in lrs]
    mo, to = optim.SGD(mp, lr=1.0, momentum=momentum), torch.optim.SGD(tp, lr=1.0, momentum=momentum)
    return (mo, make(sched, mo)), (to, (make_torch or make)(torch.optim.lr_scheduler, to))


def lrs_of(opt):
    return [g["lr"] for g in opt.param_groups]


SCHEDULERS = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=7, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[3, 10, 10, 25], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
    "CosineAnnealingLR_T1": lambda m, o: m.CosineAnnealingLR(o, T_max=1),
    "LambdaLR": lambda m, o: m.LambdaLR(o, [lambda e: 0.95 ** e, lambda e: 1.0 / (1 + e)]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lambda e: 0.97),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=12),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=4),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=5), m.CosineAnnealingLR(o, T_max=20)],
        milestones=[5]),
}


@pytest.mark.filterwarnings("ignore:The epoch parameter")  # torch's SequentialLR warns about itself
@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduler_matches_torch_over_40_epochs(name):
    (mo, ms), (to, ts) = sched_pair(SCHEDULERS[name])
    assert lrs_of(mo) == lrs_of(to)
    for epoch in range(40):
        mo.step()
        to.step()
        ms.step()
        ts.step()
        assert ms.get_last_lr() == ts.get_last_lr(), f"epoch {epoch}"  # exact: the same float formulas
        assert lrs_of(mo) == lrs_of(to)
    assert ms.last_epoch == ts.last_epoch == 40


def test_reduce_lr_on_plateau_matches_torch():
    def make(m, o):
        return m.ReduceLROnPlateau(o, factor=0.5, patience=2, cooldown=1, min_lr=[0.01, 0.001])

    (mo, ms), (to, ts) = sched_pair(make)
    metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8] * 3
    for m in metrics:
        ms.step(musa.tensor(m))
        ts.step(m)
        assert lrs_of(mo) == lrs_of(to) and ms.get_last_lr() == lrs_of(to)
    assert lrs_of(mo)[0] < 0.1
    mx = sched.ReduceLROnPlateau(mo, mode="max", threshold_mode="abs")
    assert mx.is_better(1.0, 0.5) and not mx.is_better(0.5, 0.5)
    with pytest.raises(ValueError, match="Factor|factor"):
        sched.ReduceLROnPlateau(mo, factor=1.0)
    with pytest.raises(ValueError, match="mode 'avg' is unknown"):
        sched.ReduceLROnPlateau(mo, mode="avg")


def test_scheduler_state_dict_round_trip():
    make = lambda m, o: m.CosineAnnealingLR(o, T_max=8, eta_min=0.01)  # noqa: E731
    (mo, ms), _ = sched_pair(make)
    for _ in range(11):
        mo.step()
        ms.step()
    sd_opt, sd_s = mo.state_dict(), ms.state_dict()
    assert "optimizer" not in sd_s and sd_s["last_epoch"] == 11
    (mo2, ms2), _ = sched_pair(make)
    mo2.load_state_dict(sd_opt)
    ms2.load_state_dict(sd_s)
    for _ in range(15):
        for o, s in ((mo, ms), (mo2, ms2)):
            o.step()
            s.step()
        assert ms.get_last_lr() == ms2.get_last_lr() and lrs_of(mo) == lrs_of(mo2)


def test_lambda_scheduler_state_dict_keeps_callable_objects():
    class Decay:
        def __init__(self):
            self.rate = 0.5

        def __call__(self, epoch):
            return self.rate ** epoch

    (mo, ms), _ = sched_pair(lambda m, o: m.LambdaLR(o, [Decay(), lambda e: 1.0]))
    sd = ms.state_dict()
    assert sd["lr_lambdas"] == [{"rate": 0.5}, None]
    sd["lr_lambdas"][0]["rate"] = 0.25
    ms.load_state_dict(sd)
    assert ms.lr_lambdas[0].rate == 0.25 and "lr_lambdas" in sd


def test_scheduler_resume_with_last_epoch_matches_torch():
    make = lambda m, o: m.CosineAnnealingLR(o, T_max=10, last_epoch=4)  # noqa: E731
    mp = [{"params": [musa.zeros(1, requires_grad=True)], "lr": 0.05, "initial_lr": 0.1}]
    tp = [{"params": [torch.zeros(1, requires_grad=True)], "lr": 0.05, "initial_lr": 0.1}]
    mo, to = optim.SGD(mp, lr=1.0), torch.optim.SGD(tp, lr=1.0)
    ms, ts = make(sched, mo), make(torch.optim.lr_scheduler, to)
    for _ in range(12):
        assert ms.get_last_lr() == ts.get_last_lr()
        mo.step(), to.step(), ms.step(), ts.step()
    with pytest.raises(KeyError, match="initial_lr"):
        sched.StepLR(optim.SGD([musa.zeros(1, requires_grad=True)], lr=0.1), 3, last_epoch=5)


def test_scheduler_epoch_argument_uses_closed_form():
    (mo, ms), (to, ts) = sched_pair(lambda m, o: m.StepLR(o, step_size=3, gamma=0.5))
    with pytest.warns(UserWarning, match="deprecated"):
        ms.step(7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts.step(7)
    assert ms.get_last_lr() == ts.get_last_lr() == [0.1 * 0.25, 0.02 * 0.25]


def test_scheduler_warns_when_stepped_before_optimizer():
    opt = optim.SGD([musa.zeros(1, requires_grad=True)], lr=0.1)
    s = sched.StepLR(opt, step_size=2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()
    opt2 = optim.SGD([musa.zeros(1, requires_grad=True)], lr=0.1)
    s2 = sched.ExponentialLR(opt2, gamma=0.5)
    opt2.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s2.step()
    assert s2.get_last_lr() == [0.05]
    assert sched._LRScheduler is sched.LRScheduler
    with pytest.raises(TypeError, match="is not an Optimizer"):
        sched.StepLR(object(), 3)


def test_training_with_scheduler_matches_torch():
    # Adam + StepLR for 20 steps: the lrs the scheduler sets reach the kernel
    arrays = make_params()
    results = []
    for lib, mod in ((musa, optim), (torch, torch.optim)):
        tensor = musa.tensor if lib is musa else torch.tensor
        ws = [tensor(a, requires_grad=True) for a in arrays]
        x, y = (tensor(a) for a in make_data())
        opt = mod.Adam(ws, lr=0.05)
        s = mod.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
        for _ in range(STEPS):
            opt.zero_grad()
            loss_fn(ws, x, y).backward()
            opt.step()
            s.step()
        results.append([w.detach().numpy() for w in ws])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# ---- one route for lr and the update rows ----

def test_lr_set_any_way_reaches_the_update():
    p = musa.ones(3, requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    for setter in (lambda g: g.__setitem__("lr", 0.5), lambda g: g.update(lr=0.25)):
        setter(opt.param_groups[0])
        before = npy(p).copy()
        p.grad = musa.ones(3)
        opt.step()
        np.testing.assert_allclose(before - npy(p), opt.param_groups[0]["lr"], rtol=1e-6)


def test_param_groups_stay_groups_through_copies_and_state_dicts():
    import copy
    import pickle
    p = musa.ones(3, requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    p.sum().backward()
    opt.step()
    for o in (copy.deepcopy(opt), pickle.loads(pickle.dumps(opt))):
        assert o.param_groups[0]["lr"] == 0.1 and hasattr(o.param_groups[0], "lr_tensor")
    sd = opt.state_dict()
    assert type(sd["param_groups"][0]) is dict
    opt.load_state_dict(sd)
    opt.param_groups[0]["lr"] = 0.0
    before = npy(p).copy()
    opt.step()
    np.testing.assert_array_equal(npy(p), before)


def test_update_rows_reject_bad_state_with_the_op_name():
    p = musa.ones(3, requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = musa.ones(3)
    opt.step()
    opt.state[p]["momentum_buffer"] = musa.ones(4)
    with pytest.raises(ValueError, match=r"\[sgd_update\] row 0: state tensor \(input 1\) has shape"):
        opt.step()
    with pytest.raises(ValueError, match="not an update op"):
        musa._C._update("add", [], {})
