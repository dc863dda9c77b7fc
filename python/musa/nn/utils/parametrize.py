"""Parametrizations, as torch.nn.utils.parametrize: a module's parameter
or buffer `name` becomes the output of a chain of modules applied to an
unconstrained tensor kept as module.parametrizations[name].original.

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).mT
    register_parametrization(layer, "weight", Symmetric())
    layer.weight       # symmetric, recomputed on each read (or once inside cached())
    layer.parametrizations.weight.original   # what the optimizer updates

The module's class is swapped for a subclass with a property per
parametrized name (reads run the chain; assignment runs the chain's
right_inverse into original); remove_parametrizations undoes it."""
import contextlib

from ... import _C
from ...autograd import no_grad
from ..modules.container import ModuleDict, ModuleList
from ..modules.module import Module
from ..parameter import Parameter

__all__ = ["register_parametrization", "remove_parametrizations", "is_parametrized", "cached",
           "ParametrizationList", "type_before_parametrizations"]

_cache_enabled = 0
_cache = {}


@contextlib.contextmanager
def cached():
    """Inside, each parametrized tensor is computed once (on first read)."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _register_tensor(module, name, value):
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


class ParametrizationList(ModuleList):
    """The chain for one tensor: original (a Parameter or buffer, set
    through the chain's right_inverse when registered) and the modules,
    applied in order by forward(). When the first module's right_inverse
    returns a sequence, the chain keeps one tensor per element (original0,
    original1, ...) and the first module's forward takes them all."""

    def __init__(self, modules, original, unsafe=False):
        if not modules:
            raise ValueError("[ParametrizationList] needs at least one parametrization")
        super().__init__(modules)
        self.unsafe = unsafe
        with no_grad():
            new = original
            for m in reversed(self):
                if hasattr(m, "right_inverse"):
                    try:
                        new = m.right_inverse(new)
                    except NotImplementedError:
                        pass  # taken as the identity, as torch
        self.is_tensor = isinstance(new, _C.Tensor)
        if not self.is_tensor and not isinstance(new, (tuple, list)):
            raise ValueError(f"[register_parametrization] right_inverse must return a tensor or "
                             f"a sequence of tensors, got {type(new).__name__}")
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new.dtype != original.dtype:
                raise ValueError(f"[register_parametrization] right_inverse may not change the "
                                 f"dtype: {original.dtype} became {new.dtype}")
            with no_grad():
                original.set_(new)  # the same Parameter object: optimizers that hold it keep working
            _register_tensor(self, "original", original)
            return
        for i, t in enumerate(new):
            if not isinstance(t, _C.Tensor):
                raise ValueError(f"[register_parametrization] right_inverse's element {i} must be "
                                 f"a tensor, got {type(t).__name__}")
            t = t.detach().clone()
            if isinstance(original, Parameter):
                t = Parameter(t, requires_grad=original.requires_grad)
            _register_tensor(self, f"original{i}", t)

    def _originals(self):
        return [getattr(self, f"original{i}") for i in range(self.ntensors)]

    def right_inverse(self, value):
        """Assignment to the parametrized tensor: value through each
        module's right_inverse, from the last, into the original(s)."""
        with no_grad():
            for m in reversed(self):
                if not hasattr(m, "right_inverse"):
                    raise RuntimeError(f"[parametrize] parametrization {type(m).__name__} does not "
                                       "implement right_inverse")
                value = m.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, _C.Tensor) or value.dtype != self.original.dtype:
                    raise ValueError("[parametrize] right_inverse must give a tensor of the "
                                     "original's dtype")
                self.original.set_(value)
                return
            if not isinstance(value, (tuple, list)) or len(value) != self.ntensors:
                raise ValueError(f"[parametrize] right_inverse must give a sequence of "
                                 f"{self.ntensors} tensors")
            for i, (orig, v) in enumerate(zip(self._originals(), value)):
                if not isinstance(v, _C.Tensor) or v.dtype != orig.dtype:
                    raise ValueError(f"[parametrize] right_inverse's element {i} must be a tensor "
                                     f"of dtype {orig.dtype}")
                orig.set_(v)

    def forward(self):
        x = self[0](self.original) if self.is_tensor else self[0](*self._originals())
        for m in list(self)[1:]:
            x = m(x)
        return x


def is_parametrized(module, tensor_name=None):
    """Whether module has parametrizations (on tensor_name, if given)."""
    p = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(p, ModuleDict):
        return False
    return len(p) > 0 if tensor_name is None else tensor_name in p


def type_before_parametrizations(module):
    """The module's class before register_parametrization swapped it."""
    cls = type(module)
    return cls.__bases__[0] if is_parametrized(module) else cls


def _inject_class(module):
    cls = type(module)
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {})


def _inject_property(module, name):
    def get(self):
        chain = self.parametrizations[name]
        if not _cache_enabled:
            return chain()
        key = (id(self), name)
        if key not in _cache:
            _cache[key] = chain()
        return _cache[key]

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)

    setattr(type(module), name, property(get, set_))


def _check_keeps(tensor_name, shape, dtype, x):
    """That x, the tensor parametrized, has its shape and dtype (unless unsafe)."""
    if not isinstance(x, _C.Tensor) or x.dtype != dtype or tuple(x.shape) != shape:
        raise ValueError(f"[register_parametrization] the parametrization must keep {tensor_name}'s shape "
                         f"{shape} and dtype {dtype}, got "
                         f"{tuple(x.shape) if isinstance(x, _C.Tensor) else type(x).__name__}")


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Make module.<tensor_name> parametrization(original): a second call on
    the same name appends to its chain. Unless unsafe, the parametrization
    is checked to keep the tensor's shape and dtype."""
    if not isinstance(parametrization, Module):
        raise TypeError(f"[register_parametrization] parametrization must be a Module, got "
                        f"{type(parametrization).__name__}")
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            _check_keeps(tensor_name, tuple(y.shape), y.dtype, parametrization(y))
        chain = module.parametrizations[tensor_name]
        chain.append(parametrization)
        chain.unsafe |= unsafe
        return module
    if tensor_name not in module._parameters and tensor_name not in module._buffers:
        raise ValueError(f"[register_parametrization] Module '{type(module).__name__}' does not have a "
                         f"parameter, a buffer, or a parametrized element with name '{tensor_name}'")
    original = getattr(module, tensor_name)
    if original is None:
        raise ValueError(f"[register_parametrization] {tensor_name} is None")
    shape, dtype = tuple(original.shape), original.dtype  # (the chain sets original)
    chain = ParametrizationList([parametrization], original, unsafe=unsafe)
    if not unsafe:  # what the chain gives from its original(s), as PyTorch checks it
        _check_keeps(tensor_name, shape, dtype, chain())
    delattr(module, tensor_name)
    if not is_parametrized(module):
        _inject_class(module)
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = chain
    _inject_property(module, tensor_name)
    return module


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Undo register_parametrization on tensor_name: the tensor becomes a
    plain parameter (or buffer) again, with its current parametrized value
    (leave_parametrized) or the original's."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"[remove_parametrizations] Module {type(module).__name__} does not have a "
                         f"parametrization on {tensor_name}")
    chain = module.parametrizations[tensor_name]
    if not chain.is_tensor:  # originals of other shapes: the current value, as a new tensor
        if not leave_parametrized:
            raise ValueError(f"[remove_parametrizations] {tensor_name} is parametrized by a "
                             f"sequence of tensors: it cannot be left unparametrized "
                             f"(leave_parametrized=False)")
        with no_grad():
            value = getattr(module, tensor_name).detach().clone()
        first = chain.original0
        original = Parameter(value, requires_grad=first.requires_grad) \
            if isinstance(first, Parameter) else value
    else:
        original = chain.original
    if leave_parametrized and chain.is_tensor:
        with no_grad():
            value = getattr(module, tensor_name)
            if value.dtype != original.dtype:
                raise ValueError("[remove_parametrizations] the parametrized tensor's dtype differs "
                                 "from the original's: use leave_parametrized=False")
            original.set_(value)
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register_tensor(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module
