"""Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop, as in torch.optim
(single-tensor formulas). Each step of a parameter group is one C call
running the optimizer's update row (adagrad_update, ...) over the group, as
for SGD and Adam; state keys and their order are torch's, and scalar state
(step, eta, mu, mu_product) is 0-d float64."""
from .. import _C
from .optimizer import (Optimizer, _check, _guard_options, _new_state, _scalar_state,
                        _step_tensor, _update)

__all__ = ["Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "Rprop"]


def _betas(name, betas):
    _check(name, "beta parameter at index 0", betas[0], 0.0 <= betas[0] < 1.0)
    _check(name, "beta parameter at index 1", betas[1], 0.0 <= betas[1] < 1.0)


class _RowOptimizer(Optimizer):
    """An optimizer whose state is a fixed list: _tensors (zeros like the
    parameter, or _init's value) and _scalars ((key, first value)), in
    torch's order; _row_op names the update row, _attrs(group) its
    attributes."""

    _row_op = None
    _tensors = ()
    _scalars = ()
    _init = {}

    def _prepare_state(self, group):
        params, grads, states = self._with_grad(group)
        for p, s in zip(params, states):
            self._fill_state(p, s, group)
        return params, grads, states

    def _fill_state(self, p, s, group):
        _step_tensor(s)
        for key, first in self._scalars:
            if key != "step":
                _scalar_state(s, key, first(group) if callable(first) else first)
        for key in self._tensors:
            if key not in s:
                v = self._init.get(key, 0.0)
                s[key] = _new_state(_C.full_like, p, v(group) if callable(v) else v)

    def _step_group(self, group):
        params, grads, states = self._prepare_state(group)
        if not params:
            return
        _guard_options(group, states)
        lr = group.lr_tensor()
        keys = list(self._tensors) + [k for k, _ in self._scalars if k != "step"] + ["step"]
        rows = [(p,) + tuple(s[k] for k in keys) + (g, lr)
                for p, g, s in zip(params, grads, states)]
        _update(self._row_op, rows, **self._attrs(group))


class Adagrad(_RowOptimizer):
    """sum += g^2; p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(sum) + eps)."""

    _row_op = "adagrad_update"
    _tensors = ("sum",)
    _init = {"sum": lambda g: g["initial_accumulator_value"]}

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False):
        _check("Adagrad", "learning rate", lr, 0.0 <= lr)
        _check("Adagrad", "lr_decay value", lr_decay, 0.0 <= lr_decay)
        _check("Adagrad", "weight_decay value", weight_decay, 0.0 <= weight_decay)
        _check("Adagrad", "initial_accumulator_value value", initial_accumulator_value,
               0.0 <= initial_accumulator_value)
        _check("Adagrad", "epsilon value", eps, 0.0 <= eps)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)
        for group in self.param_groups:  # torch makes the state at construction
            for p in group["params"]:
                self._fill_state(p, self.state[p], group)

    def _attrs(self, group):
        return dict(lr_decay=group["lr_decay"], weight_decay=group["weight_decay"],
                    eps=group["eps"], maximize=group["maximize"])


class Adadelta(_RowOptimizer):
    """v = rho v + (1 - rho) g^2; d = sqrt(u + eps) / sqrt(v + eps) g;
    u = rho u + (1 - rho) d^2; p -= lr d."""

    _row_op = "adadelta_update"
    _tensors = ("square_avg", "acc_delta")

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 maximize=False):
        _check("Adadelta", "learning rate", lr, 0.0 <= lr)
        _check("Adadelta", "rho value", rho, 0.0 <= rho <= 1.0)
        _check("Adadelta", "epsilon value", eps, 0.0 <= eps)
        _check("Adadelta", "weight_decay value", weight_decay, 0.0 <= weight_decay)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _attrs(self, group):
        return dict(rho=group["rho"], eps=group["eps"], weight_decay=group["weight_decay"],
                    maximize=group["maximize"])


class Adamax(_RowOptimizer):
    """m = b1 m + (1 - b1) g; u = max(b2 u, |g| + eps);
    p -= lr / (1 - b1^t) * m / u."""

    _row_op = "adamax_update"
    _tensors = ("exp_avg", "exp_inf")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False):
        _check("Adamax", "learning rate", lr, 0.0 <= lr)
        _check("Adamax", "epsilon value", eps, 0.0 <= eps)
        _betas("Adamax", betas)
        _check("Adamax", "weight_decay value", weight_decay, 0.0 <= weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _attrs(self, group):
        b1, b2 = group["betas"]
        return dict(beta1=b1, beta2=b2, eps=group["eps"], weight_decay=group["weight_decay"],
                    maximize=group["maximize"])


class NAdam(_RowOptimizer):
    """Adam with Nesterov momentum whose coefficient follows the
    momentum_decay schedule (Dozat's NAdam); decoupled_weight_decay decays
    the parameter as AdamW does."""

    _row_op = "nadam_update"
    _tensors = ("exp_avg", "exp_avg_sq")
    _scalars = (("step", 0), ("mu_product", 1.0))

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, foreach=None, *, decoupled_weight_decay=False,
                 maximize=False):
        _check("NAdam", "learning rate", lr, 0.0 <= lr)
        _check("NAdam", "epsilon value", eps, 0.0 <= eps)
        _betas("NAdam", betas)
        _check("NAdam", "weight_decay value", weight_decay, 0.0 <= weight_decay)
        _check("NAdam", "momentum_decay value", momentum_decay, 0.0 <= momentum_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay, foreach=foreach,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _attrs(self, group):
        b1, b2 = group["betas"]
        return dict(beta1=b1, beta2=b2, eps=group["eps"], weight_decay=group["weight_decay"],
                    momentum_decay=group["momentum_decay"],
                    decoupled=group["decoupled_weight_decay"], maximize=group["maximize"])


class RAdam(_RowOptimizer):
    """Adam with the variance rectification: plain momentum steps until the
    second moment's estimate is tractable."""

    _row_op = "radam_update"
    _tensors = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, decoupled_weight_decay=False, maximize=False):
        _check("RAdam", "learning rate", lr, 0.0 <= lr)
        _check("RAdam", "epsilon value", eps, 0.0 <= eps)
        _betas("RAdam", betas)
        _check("RAdam", "weight_decay value", weight_decay, 0.0 <= weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _attrs(self, group):
        b1, b2 = group["betas"]
        return dict(beta1=b1, beta2=b2, eps=group["eps"], weight_decay=group["weight_decay"],
                    decoupled=group["decoupled_weight_decay"], maximize=group["maximize"])


class ASGD(_RowOptimizer):
    """Averaged SGD: p = p (1 - lambd eta) - eta g, with the running average
    ax of p (from step t0 on); eta = lr / (1 + lambd lr t)^alpha."""

    _row_op = "asgd_update"
    _tensors = ("ax",)
    _scalars = (("step", 0), ("eta", lambda g: g["lr"]), ("mu", 1.0))

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False):
        _check("ASGD", "learning rate", lr, 0.0 <= lr)
        _check("ASGD", "weight_decay value", weight_decay, 0.0 <= weight_decay)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def _attrs(self, group):
        return dict(lambd=group["lambd"], alpha=group["alpha"], t0=group["t0"],
                    weight_decay=group["weight_decay"], maximize=group["maximize"])


class Rprop(_RowOptimizer):
    """Resilient backpropagation: each element's step size grows by etaplus
    while its gradient keeps its sign and shrinks by etaminus when it flips
    (that step is skipped), within step_sizes; p -= sign(g) * step_size.
    lr is the step sizes' first value."""

    _row_op = "rprop_update"
    _tensors = ("prev", "step_size")
    _init = {"step_size": lambda g: g["lr"]}

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), foreach=None,
                 maximize=False):
        _check("Rprop", "learning rate", lr, 0.0 <= lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"[Rprop] Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _attrs(self, group):
        (etaminus, etaplus), (lo, hi) = group["etas"], group["step_sizes"]
        return dict(etaminus=etaminus, etaplus=etaplus, step_size_min=lo, step_size_max=hi,
                    maximize=group["maximize"])
