"""SGD with momentum, dampening, Nesterov, weight decay and maximize, as
torch.optim.SGD. State: 'momentum_buffer' per parameter (None while
momentum is 0), created by the first step that uses it."""
from .. import _C
from .optimizer import Optimizer, _capturing, _check, _fused, _lr, required

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent: with momentum mu, dampening tau and
    weight decay wd, g = grad + wd*p; b = mu*b + (1-tau)*g (b = g on the
    first step); p -= lr * (g + mu*b if nesterov else b)."""

    def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False):
        if lr is not required:
            _check("SGD", "learning rate", lr, lr >= 0.0)
        _check("SGD", "momentum value", momentum, momentum >= 0.0)
        _check("SGD", "weight_decay value", weight_decay, weight_decay >= 0.0)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("[SGD] Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def _step_group(self, group):
        params, grads, states = self._with_grad(group)
        if not params:
            return
        if _C._jit_capturing():
            return self._step_ops(group, params, grads, states)
        bufs = fresh = None
        if group["momentum"] != 0:
            fresh = [s.get("momentum_buffer") is None for s in states]
            bufs = []
            for p, s, new in zip(params, states, fresh):
                if new:  # the kernel sets it to the first d_p
                    s["momentum_buffer"] = _C.zeros_like(p)
                bufs.append(s["momentum_buffer"])
        else:
            for s in states:
                s.setdefault("momentum_buffer", None)
        _fused(_C._optim_sgd, params, grads, bufs, fresh, group["lr"], group["momentum"], group["dampening"],
               group["weight_decay"], group["nesterov"], group["maximize"])

    def _step_ops(self, group, params, grads, states):
        # The fused kernel's arithmetic, op by op (src/ops/optim.c, DEF_SGD).
        from ..jit import outside_capture
        mom, wd = group["momentum"], group["weight_decay"]
        damp = 1 - group["dampening"]
        before = tuple(sorted(k for s in states for k in s))
        fresh = [mom != 0 and s.get("momentum_buffer") is None for s in states]
        for p, s, new in zip(params, states, fresh):
            if new:
                with outside_capture():  # state outlives the run: bound by reference
                    s["momentum_buffer"] = _C.zeros_like(p)
            elif mom == 0:
                s.setdefault("momentum_buffer", None)
        # Without dampening, buf*mom + d on a zero buffer is the first step's
        # b = d exactly, so one graph serves every step; with dampening the
        # first step differs and the next call recompiles.
        first = any(fresh) and group["dampening"] != 0
        _capturing(group, states, before if first else None)
        lr = _lr(group)
        for p, g, s, new in zip(params, grads, states, fresh):
            d = -g if group["maximize"] else g
            if wd != 0:
                d = d + p * wd
            if mom != 0:
                buf = s["momentum_buffer"]
                b = d.clone() if first and new else buf * mom + d * damp
                buf.copy_(b)
                d = d + b * mom if group["nesterov"] else b
            p.add_(d * -lr)
