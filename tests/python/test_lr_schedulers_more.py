"""PolynomialLR, CosineAnnealingWarmRestarts, OneCycleLR, CyclicLR and
ChainedScheduler against torch 1.13: the lr (and momentum) of every group at
every step, exactly, and state_dict round trips."""
import numpy as np
import pytest
import torch

import musa


def optimizers(kind, lrs=(0.1, 0.05)):
    """The same two-group optimizer in both libraries."""
    out = []
    for lib in (musa, torch):
        params = [[lib.nn.Parameter(lib.zeros(2))], [lib.nn.Parameter(lib.zeros(3))]]
        groups = [{"params": p, "lr": lr} for p, lr in zip(params, lrs)]
        if kind == "sgd":
            out.append(lib.optim.SGD(groups, lr=lrs[0], momentum=0.9))
        else:
            out.append(lib.optim.Adam(groups, lr=lrs[0], betas=(0.9, 0.99)))
    return out


def trace(opt, sched, steps):
    rows = []
    for _ in range(steps):
        opt.step()
        sched.step()
        rows.append([(g["lr"], g.get("momentum"), g.get("betas")) for g in opt.param_groups])
    return rows


CASES = {
    "polynomial": ("sgd", lambda L, o: L.optim.lr_scheduler.PolynomialLR(o, total_iters=7, power=2.0), 12),
    "warm_restarts": ("sgd", lambda L, o: L.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2,
                                                                                         eta_min=0.001), 30),
    "warm_restarts_t1": ("sgd", lambda L, o: L.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, 4), 13),
    "one_cycle": ("sgd", lambda L, o: L.optim.lr_scheduler.OneCycleLR(o, max_lr=[0.5, 0.2], total_steps=25), 25),
    "one_cycle_adam_linear_3": ("adam", lambda L, o: L.optim.lr_scheduler.OneCycleLR(
        o, max_lr=0.3, epochs=3, steps_per_epoch=8, anneal_strategy="linear", three_phase=True), 24),
    "one_cycle_no_momentum": ("adam", lambda L, o: L.optim.lr_scheduler.OneCycleLR(
        o, max_lr=0.3, total_steps=10, cycle_momentum=False, pct_start=0.5), 10),
    "cyclic": ("sgd", lambda L, o: L.optim.lr_scheduler.CyclicLR(o, 0.01, [0.1, 0.2], step_size_up=4), 30),
    "cyclic_triangular2": ("sgd", lambda L, o: L.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, step_size_up=3, step_size_down=5, mode="triangular2"), 40),
    "cyclic_exp_range": ("sgd", lambda L, o: L.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, step_size_up=2, mode="exp_range", gamma=0.9), 20),
    "cyclic_scale_fn": ("sgd", lambda L, o: L.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, step_size_up=2, scale_fn=lambda x: 0.5 ** x, scale_mode="iterations",
        cycle_momentum=False), 12),
    "chained": ("sgd", lambda L, o: L.optim.lr_scheduler.ChainedScheduler([
        L.optim.lr_scheduler.ConstantLR(o, factor=0.1, total_iters=2),
        L.optim.lr_scheduler.ExponentialLR(o, gamma=0.9)]), 10),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_schedules_equal_torch(name):
    kind, make, steps = CASES[name]
    mo, to = optimizers(kind)
    ms, ts = make(musa, mo), make(torch, to)
    assert [g["lr"] for g in mo.param_groups] == [g["lr"] for g in to.param_groups]
    assert trace(mo, ms, steps) == trace(to, ts, steps)
    assert ms.get_last_lr() == ts.get_last_lr()


def test_warm_restarts_take_fractional_epochs():
    mo, to = optimizers("sgd")
    ms = musa.optim.lr_scheduler.CosineAnnealingWarmRestarts(mo, T_0=2, T_mult=3)
    ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(to, T_0=2, T_mult=3)
    for epoch in np.arange(0, 12, 0.25):
        ms.step(float(epoch))
        ts.step(float(epoch))
        assert ms.get_last_lr() == ts.get_last_lr(), epoch
    with pytest.raises(ValueError, match="non-negative epoch"):
        ms.step(-1)


def test_state_dicts_round_trip():
    for name in ("one_cycle", "cyclic", "warm_restarts", "chained"):
        kind, make, steps = CASES[name]
        mo, _ = optimizers(kind)
        s = make(musa, mo)
        for _ in range(5):
            mo.step()
            s.step()
        saved = s.state_dict()
        mo2, _ = optimizers(kind)
        s2 = make(musa, mo2)
        s2.load_state_dict(saved)
        for g2, g in zip(mo2.param_groups, mo.param_groups):
            g2["lr"] = g["lr"]
        for _ in range(4):
            for o, sch in ((mo, s), (mo2, s2)):
                o.step()
                sch.step()
        assert s.get_last_lr() == s2.get_last_lr(), name


def test_errors():
    mo, _ = optimizers("sgd")
    sched = musa.optim.lr_scheduler
    with pytest.raises(ValueError, match="total_steps OR"):
        sched.OneCycleLR(mo, 0.1)
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        s = sched.OneCycleLR(mo, 0.1, total_steps=3)
        for _ in range(4):
            mo.step()
            s.step()
    with pytest.raises(ValueError, match="positive integer T_0"):
        sched.CosineAnnealingWarmRestarts(mo, 0)
    with pytest.raises(ValueError, match="mode is invalid"):
        sched.CyclicLR(mo, 0.01, 0.1, mode="sawtooth")
    plain = musa.optim.Adagrad([musa.nn.Parameter(musa.zeros(1))], lr=0.1)
    with pytest.raises(ValueError, match="must support momentum"):
        sched.CyclicLR(plain, 0.01, 0.1)
    with pytest.raises(ValueError, match="expected 2 values for max_lr"):
        sched.OneCycleLR(mo, [0.1, 0.2, 0.3], total_steps=5)
