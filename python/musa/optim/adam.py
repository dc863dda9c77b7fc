"""Adam, as torch.optim.Adam (single-tensor formulas of torch 1.13).
State per parameter: 'step' (a float64 0-d tensor, as in torch), 'exp_avg',
'exp_avg_sq' and, with amsgrad, 'max_exp_avg_sq'. AdamW (adamw.py) reuses it with decoupled decay."""
from .. import _C
from .optimizer import Optimizer, _capturing, _check, _fused, _lr

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

    def _step_group(self, group):
        params, grads, states = self._with_grad(group)
        if not params:
            return
        amsgrad = group["amsgrad"]
        for p, s in zip(params, states):
            if not s or (amsgrad and "max_exp_avg_sq" not in s):
                from ..jit import outside_capture
                with outside_capture():  # state outlives a compiled run: bound by reference
                    if not s:
                        s["step"] = _C.zeros((), dtype=_C.float64)
                        s["exp_avg"] = _C.zeros_like(p)
                        s["exp_avg_sq"] = _C.zeros_like(p)
                    if amsgrad and "max_exp_avg_sq" not in s:
                        s["max_exp_avg_sq"] = _C.zeros_like(p)
            if not isinstance(s["step"], _C.Tensor):  # a state_dict saved with int steps
                s["step"] = _C.full((), float(s["step"]), dtype=_C.float64)
        if _capturing(group, states):
            return self._step_ops(group, params, grads, states)
        steps = []
        for s in states:
            s["step"].add_(1)
            steps.append(int(s["step"]))
        beta1, beta2 = group["betas"]
        vmax = [s["max_exp_avg_sq"] for s in states] if amsgrad else None
        m, v = [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]
        _fused(_C._optim_adam, params, grads, m, v, vmax, steps, group["lr"], beta1, beta2, group["eps"],
               group["weight_decay"], amsgrad, group["maximize"], self._decoupled)

    def _step_ops(self, group, params, grads, states):
        # The fused kernel's arithmetic, op by op (src/ops/optim.c, DEF_ADAM);
        # the bias corrections come from the step tensor, in float64.
        lr, eps, wd = _lr(group), group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        for p, g, s in zip(params, grads, states):
            step = s["step"]
            step.add_(1)
            step_size = lr / (1 - beta1 ** step)
            bc = (1 - beta2 ** step).sqrt()
            gi = -g if group["maximize"] else g
            if self._decoupled:
                if wd != 0:
                    p.mul_(1 - lr * wd)
            elif wd != 0:
                gi = gi + p * wd
            m, v = s["exp_avg"], s["exp_avg_sq"]
            m.copy_(m * beta1 + gi * (1 - beta1))
            v.copy_(v * beta2 + (1 - beta2) * gi * gi)
            vv = v
            if group["amsgrad"]:
                vmax = s["max_exp_avg_sq"]
                vmax.copy_(_C.maximum(vmax, v))
                vv = vmax
            denom = vv.sqrt() / bc + eps
            p.add_(-step_size * m / denom)
