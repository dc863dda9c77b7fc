"""RMSprop, as torch.optim.RMSprop. State per parameter: 'step' (a float64
0-d tensor, as in torch),
'square_avg', and 'momentum_buffer' (momentum > 0) and 'grad_avg'
(centered) when used."""
from .. import _C
from .optimizer import Optimizer, _capturing, _check, _fused, _lr

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
            if not s or (momentum > 0 and "momentum_buffer" not in s) or \
                    (centered and "grad_avg" not in s):
                from ..jit import outside_capture
                with outside_capture():  # state outlives a compiled run: bound by reference
                    if not s:
                        s["step"] = _C.zeros((), dtype=_C.float64)
                        s["square_avg"] = _C.zeros_like(p)
                    if momentum > 0 and "momentum_buffer" not in s:
                        s["momentum_buffer"] = _C.zeros_like(p)
                    if centered and "grad_avg" not in s:
                        s["grad_avg"] = _C.zeros_like(p)
            if not isinstance(s["step"], _C.Tensor):  # a state_dict saved with int steps
                s["step"] = _C.full((), float(s["step"]), dtype=_C.float64)
            s["step"].add_(1)
        if _capturing(group, states):
            return self._step_ops(group, params, grads, states)
        _fused(_C._optim_rmsprop, params, grads, [s["square_avg"] for s in states],
               [s["momentum_buffer"] for s in states] if momentum > 0 else None,
               [s["grad_avg"] for s in states] if centered else None, group["lr"], group["alpha"],
               group["eps"], group["weight_decay"], momentum, centered, group["maximize"])

    def _step_ops(self, group, params, grads, states):
        # The fused kernel's arithmetic, op by op (src/ops/optim.c, DEF_RMS).
        lr, al, eps, wd = _lr(group), group["alpha"], group["eps"], group["weight_decay"]
        mom, c = group["momentum"], 1 - group["alpha"]
        for p, g, s in zip(params, grads, states):
            gi = -g if group["maximize"] else g
            if wd != 0:
                gi = gi + p * wd
            sq = s["square_avg"]
            sq.copy_(sq * al + c * gi * gi)
            if group["centered"]:
                ga = s["grad_avg"]
                ga.copy_(ga * al + gi * c)
                avg = (sq + -1 * ga * ga).sqrt()
            else:
                avg = sq.sqrt()
            avg = avg + eps
            if mom > 0:
                buf = s["momentum_buffer"]
                buf.copy_(buf * mom + gi / avg)
                p.add_(buf * -lr)
            else:
                p.add_(-lr * gi / avg)
