"""RMSprop, as torch.optim.RMSprop. State per parameter: 'step' (an int),
'square_avg', and 'momentum_buffer' (momentum > 0) and 'grad_avg'
(centered) when used."""
from .. import _C
from .optimizer import Optimizer, _check, _fused

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop: v = alpha*v + (1-alpha)*g^2; with centered, the running
    mean a of g gives v - a^2 in place of v; p -= lr * g / (sqrt(v) + eps),
    or through a momentum buffer b = momentum*b + g / (sqrt(v) + eps)."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, *,
                 maximize=False):
        _check("RMSprop", "learning rate", lr, 0.0 <= lr)
        _check("RMSprop", "epsilon value", eps, 0.0 <= eps)
        _check("RMSprop", "momentum value", momentum, 0.0 <= momentum)
        _check("RMSprop", "weight_decay value", weight_decay, 0.0 <= weight_decay)
        _check("RMSprop", "alpha value", alpha, 0.0 <= alpha)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _step_group(self, group):
        params, grads, states = self._with_grad(group)
        if not params:
            return
        momentum, centered = group["momentum"], group["centered"]
        for p, s in zip(params, states):
            if not s:
                s["step"] = 0
                s["square_avg"] = _C.zeros_like(p)
            if momentum > 0 and "momentum_buffer" not in s:
                s["momentum_buffer"] = _C.zeros_like(p)
            if centered and "grad_avg" not in s:
                s["grad_avg"] = _C.zeros_like(p)
            s["step"] += 1
        _fused(_C._optim_rmsprop, params, grads, [s["square_avg"] for s in states],
               [s["momentum_buffer"] for s in states] if momentum > 0 else None,
               [s["grad_avg"] for s in states] if centered else None, group["lr"], group["alpha"],
               group["eps"], group["weight_decay"], momentum, centered, group["maximize"])
