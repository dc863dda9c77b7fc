"""Gradient clipping, in place on the parameters' .grad."""
import math

from ... import _C
from ..._functions import norm
from ...autograd import no_grad


def _grads(parameters):
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale the gradients so that their joint norm_type-norm (all gradients
    taken as one vector) is at most max_norm. Returns that norm, as it was
    before clipping, as a 0-d tensor. With error_if_nonfinite, a NaN or
    infinite norm raises RuntimeError instead."""
    grads = _grads(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not grads:
        return _C.tensor(0.0)
    with no_grad():
        if norm_type == 2.0:
            total = norm(grads)  # one fused pass in C
        elif norm_type == math.inf:
            total = _C.stack([g.detach().abs().max().to(_C.float64) for g in grads]).max()
        else:
            total = norm(_C.stack([norm(g.detach(), norm_type).to(_C.float64) for g in grads]), norm_type)
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise RuntimeError(f"[clip_grad_norm_] the total norm of order {norm_type} for gradients from "
                               "`parameters` is non-finite, so it cannot be clipped. To disable this error "
                               "and scale the gradients by the non-finite norm anyway, set "
                               "`error_if_nonfinite=False`")
        coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))
    return total.to(grads[0].dtype)


def clip_grad_value_(parameters, clip_value):
    """Clamp every gradient element into [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(min=-clip_value, max=clip_value)
