"""SGD with momentum, dampening, Nesterov, weight decay and maximize, as
torch.optim.SGD. State: 'momentum_buffer' per parameter (None while
momentum is 0), created by the first step that uses it."""
from .. import _C
from .optimizer import (Optimizer, _check, _guard_options, _new_state, _update, required,
                        state_keys_of)

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

    def _prepare_state(self, group):
        """Create the momentum buffers the next step would (zeros: without
        dampening a zero buffer gives the first step's value); with
        dampening the first step is the `fresh` form, so nothing is made
        early. Returns (params, grads, states)."""
        params, grads, states = self._with_grad(group)
        if group["momentum"] != 0 and group["dampening"] == 0:
            for p, s in zip(params, states):
                if s.get("momentum_buffer") is None:
                    s["momentum_buffer"] = _new_state(_C.zeros_like, p)
        return params, grads, states

    def _step_group(self, group):
        params, grads, states = self._with_grad(group)
        if not params:
            return
        mom, lr = group["momentum"], group.lr_tensor()
        attrs = dict(momentum=mom, dampening=group["dampening"], weight_decay=group["weight_decay"],
                     nesterov=group["nesterov"], maximize=group["maximize"])
        if mom == 0:
            for s in states:
                s.setdefault("momentum_buffer", None)
            _guard_options(group, states)
            _update("sgd_update", [(p, g, lr) for p, g in zip(params, grads)], **attrs)
            return
        before = state_keys_of(states)
        new = [s.get("momentum_buffer") is None for s in states]
        for p, s, n in zip(params, states, new):
            if n:
                s["momentum_buffer"] = _new_state(_C.zeros_like, p)
        # torch sets a new buffer to the first d_p. Without dampening,
        # buf*mom + d on a zero buffer is that same value, so the update
        # runs as usual and a compiled step serves every step; with
        # dampening the first step is the `fresh` form, and a compiled
        # first step is keyed on the state before it (the next recompiles).
        fresh = group["dampening"] != 0 and any(new)
        _guard_options(group, states, before if fresh else None)
        rows = [(p, s["momentum_buffer"], g, lr) for p, g, s in zip(params, grads, states)]
        for first in (True, False) if fresh else (False,):
            batch = [r for r, n in zip(rows, new) if n == first] if fresh else rows
            if batch:
                _update("sgd_update", batch, fresh=first, **attrs)
