"""Weight reparametrisations, as torch.nn.utils: weight_norm (w = g v / |v|)
and spectral_norm (w = w_orig / sigma, sigma the largest singular value by
power iteration). Each is a forward pre-hook that recomputes the weight
from its parameters before every call, so gradients reach g and v (or
w_orig) through the recomputation; remove_* puts a plain parameter back."""
from ... import _C
from ... import _functions as _F
from ...autograd import no_grad
from ..parameter import Parameter

__all__ = ["weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm"]


def _norm_except(v, dim):
    """The 2-norm of v over every dim but dim (all of them for dim None, and
    for -1, which PyTorch's weight_norm reads the same way), shaped to
    broadcast against v."""
    if dim is None or dim == -1:
        return _C.norm(v, 2.0)
    d = dim % v.ndim if v.ndim else 0
    others = [i for i in range(v.ndim) if i != d]
    return _C.norm(v, 2.0, others, True) if others else _C.abs(v)


class _WeightNorm:
    def __init__(self, name, dim):
        self.name, self.dim = name, dim

    def compute(self, module):
        g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
        return v * (g / _norm_except(v, self.dim))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute(module))


def weight_norm(module, name="weight", dim=0):
    """Reparametrise module.<name> as g * v / |v| (the norm over every dim but
    dim; dim=None: one norm over all), with parameters <name>_g and
    <name>_v."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _WeightNorm) and hook.name == name:
            raise RuntimeError(f"[weight_norm] Cannot register two weight_norm hooks on the same parameter {name}")
    weight = getattr(module, name, None)
    if not isinstance(weight, Parameter):
        raise ValueError(f"[weight_norm] module has no parameter named {name!r}")
    fn = _WeightNorm(name, dim)
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(_norm_except(weight.detach(), dim).clone()))
    module.register_parameter(name + "_v", Parameter(weight.detach().clone()))
    setattr(module, name, fn.compute(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name="weight"):
    """Put a plain parameter <name> back (with the current g * v / |v|)."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _WeightNorm) and hook.name == name:
            with no_grad():
                weight = hook.compute(module)
            delattr(module, name)
            del module._parameters[name + "_g"], module._parameters[name + "_v"]
            module.register_parameter(name, Parameter(weight.detach().clone()))
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"[remove_weight_norm] weight_norm of '{name}' not found in {module}")


class _SpectralNorm:
    def __init__(self, name, n_power_iterations, dim, eps):
        self.name, self.n_power_iterations, self.dim, self.eps = name, n_power_iterations, dim, eps

    def matrix(self, weight):
        """weight as a matrix with dim first (rows)."""
        w = weight
        if self.dim != 0:
            w = w.permute(self.dim, *[d for d in range(w.ndim) if d != self.dim])
        return w.reshape(w.shape[0], -1)

    def compute(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        mat = self.matrix(weight)
        if do_power_iteration:
            with no_grad():  # u and v are updated in place, outside the graph
                for _ in range(self.n_power_iterations):
                    v.copy_(_normalize(_F.mv(mat.t(), u), self.eps))
                    u.copy_(_normalize(_F.mv(mat, v), self.eps))
                # clones, so that the next in-place update does not touch
                # what this forward's backward reads
                u, v = u.clone(), v.clone()
        sigma = _F.dot(u, _F.mv(mat, v))
        return weight / sigma

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute(module, module.training))


def _normalize(x, eps):
    return x / _C.clamp(_C.norm(x, 2.0), min=eps)


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Reparametrise module.<name> as <name>_orig / sigma, sigma its largest
    singular value estimated by n_power_iterations of power iteration per
    training forward (buffers <name>_u and <name>_v); dim defaults to 1 for
    transposed convolutions, else 0."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _SpectralNorm) and hook.name == name:
            raise RuntimeError(f"[spectral_norm] Cannot register two spectral_norm hooks on the same "
                               f"parameter {name}")
    if n_power_iterations <= 0:
        raise ValueError(f"[spectral_norm] Expected n_power_iterations to be positive, but got "
                         f"n_power_iterations={n_power_iterations}")
    weight = getattr(module, name, None)
    if not isinstance(weight, Parameter):
        raise ValueError(f"[spectral_norm] module has no parameter named {name!r}")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    fn = _SpectralNorm(name, n_power_iterations, dim, eps)
    with no_grad():
        mat = fn.matrix(weight)
        h, w = mat.shape
        u = _normalize(_C.randn(h, dtype=weight.dtype), eps)
        v = _normalize(_C.randn(w, dtype=weight.dtype), eps)
    del module._parameters[name]
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.detach().clone())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name="weight"):
    """Put a plain parameter <name> back (with the current normalised value)."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _SpectralNorm) and hook.name == name:
            with no_grad():
                weight = hook.compute(module, False)
            delattr(module, name)
            del module._parameters[name + "_orig"]
            del module._buffers[name + "_u"], module._buffers[name + "_v"]
            module.register_parameter(name, Parameter(weight.detach().clone()))
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"[remove_spectral_norm] spectral_norm of '{name}' not found in {module}")
