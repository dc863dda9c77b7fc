"""SGD with momentum, dampening, Nesterov, weight decay and maximize, as
torch.optim.SGD. State: 'momentum_buffer' per parameter (None while
momentum is 0), created by the first step that uses it."""
from .. import _C
from .optimizer import Optimizer, _check, _fused, required

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
