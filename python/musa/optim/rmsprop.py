"""RMSprop, as torch.optim.RMSprop. State per parameter: 'step' (a float64
0-d tensor, as in torch),
'square_avg', and 'momentum_buffer' (momentum > 0) and 'grad_avg'
(centered) when used."""
from .. import _C
from .optimizer import Optimizer, _check, _guard_options, _new_state, _step_tensor, _update

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

    def _prepare_state(self, group):
        """Create the state of the group's parameters that have a gradient
        (zeros, as the first step would); returns (params, grads, states)."""
        params, grads, states = self._with_grad(group)
        for p, s in zip(params, states):
            _step_tensor(s)  # first, as torch orders the state
            if "square_avg" not in s:
                s["square_avg"] = _new_state(_C.zeros_like, p)
            if group["momentum"] > 0 and "momentum_buffer" not in s:
                s["momentum_buffer"] = _new_state(_C.zeros_like, p)
            if group["centered"] and "grad_avg" not in s:
                s["grad_avg"] = _new_state(_C.zeros_like, p)
        return params, grads, states

    def _step_group(self, group):
        params, grads, states = self._prepare_state(group)
        if not params:
            return
        momentum, centered = group["momentum"], group["centered"]
        _guard_options(group, states)
        lr = group.lr_tensor()
        rows = [(p, s["square_avg"]) + ((s["momentum_buffer"],) if momentum > 0 else ()) +
                ((s["grad_avg"],) if centered else ()) + (s["step"], g, lr)
                for p, g, s in zip(params, grads, states)]
        _update("rmsprop_update", rows, alpha=group["alpha"], eps=group["eps"],
                weight_decay=group["weight_decay"], momentum=momentum, centered=centered,
                maximize=group["maximize"])
