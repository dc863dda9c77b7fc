"""Adam, as torch.optim.Adam (single-tensor formulas of torch 1.13).
State per parameter: 'step' (a float64 0-d tensor, as in torch), 'exp_avg',
'exp_avg_sq' and, with amsgrad, 'max_exp_avg_sq'. AdamW (adamw.py) reuses it with decoupled decay."""
from .. import _C
from .optimizer import Optimizer, _check, _guard_options, _new_state, _step_tensor, _update

__all__ = ["Adam"]


class Adam(Optimizer):
    """Adam: m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
    p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps), where g includes
    weight_decay*p (L2 penalty) and v is its running max with amsgrad."""

    _decoupled = False  # AdamW: decay the parameter, not the gradient

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 maximize=False):
        name = type(self).__name__
        _check(name, "learning rate", lr, 0.0 <= lr)
        _check(name, "epsilon value", eps, 0.0 <= eps)
        _check(name, "beta parameter at index 0", betas[0], 0.0 <= betas[0] < 1.0)
        _check(name, "beta parameter at index 1", betas[1], 0.0 <= betas[1] < 1.0)
        _check(name, "weight_decay value", weight_decay, 0.0 <= weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _prepare_state(self, group):
        """Create the state of the group's parameters that have a gradient
        (zeros, as the first step would); returns (params, grads, states)."""
        params, grads, states = self._with_grad(group)
        for p, s in zip(params, states):
            _step_tensor(s)  # first, as torch orders the state
            if "exp_avg" not in s:
                s["exp_avg"] = _new_state(_C.zeros_like, p)
                s["exp_avg_sq"] = _new_state(_C.zeros_like, p)
            if group["amsgrad"] and "max_exp_avg_sq" not in s:
                s["max_exp_avg_sq"] = _new_state(_C.zeros_like, p)
        return params, grads, states

    def _step_group(self, group):
        params, grads, states = self._prepare_state(group)
        if not params:
            return
        amsgrad = group["amsgrad"]
        _guard_options(group, states)
        beta1, beta2 = group["betas"]
        lr = group.lr_tensor()
        rows = [(p, s["exp_avg"], s["exp_avg_sq"]) + ((s["max_exp_avg_sq"],) if amsgrad else ()) +
                (s["step"], g, lr) for p, g, s in zip(params, grads, states)]
        _update("adam_update", rows, beta1=beta1, beta2=beta2, eps=group["eps"],
                weight_decay=group["weight_decay"], amsgrad=amsgrad, maximize=group["maximize"],
                decoupled=self._decoupled)
