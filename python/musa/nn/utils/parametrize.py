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
    applied in order by forward()."""

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
        if not isinstance(new, _C.Tensor):
            raise ValueError(f"[register_parametrization] right_inverse must return a tensor, got "
                             f"{type(new).__name__}")
        if new.dtype != original.dtype:
            raise ValueError(f"[register_parametrization] right_inverse may not change the dtype: "
                             f"{original.dtype} became {new.dtype}")
        with no_grad():
            original.set_(new)  # the same Parameter object: optimizers that hold it keep working
        _register_tensor(self, "original", original)

    def right_inverse(self, value):
        """Assignment to the parametrized tensor: value through each
        module's right_inverse, from the last, into original."""
        with no_grad():
            for m in reversed(self):
                if not hasattr(m, "right_inverse"):
                    raise RuntimeError(f"[parametrize] parametrization {type(m).__name__} does not "
                                       "implement right_inverse")
                value = m.right_inverse(value)
            if not isinstance(value, _C.Tensor) or value.dtype != self.original.dtype:
                raise ValueError("[parametrize] right_inverse must give a tensor of the original's dtype")
            self.original.set_(value)

    def forward(self):
        x = self[0](self.original)
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


def _check_keeps(tensor_name, parametrization, y):
    """That parametrization(y) has y's shape and dtype (unless unsafe)."""
    x = parametrization(y)
    if not isinstance(x, _C.Tensor) or x.dtype != y.dtype or tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"[register_parametrization] the parametrization must keep {tensor_name}'s shape "
                         f"{tuple(y.shape)} and dtype {y.dtype}, got "
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
            _check_keeps(tensor_name, parametrization, getattr(module, tensor_name))
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
    if not unsafe:
        _check_keeps(tensor_name, parametrization, original)
    chain = ParametrizationList([parametrization], original, unsafe=unsafe)
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
    original = chain.original
    if leave_parametrized:
        with no_grad():
            value = getattr(module, tensor_name)
            if value.dtype != original.dtype:
                raise ValueError("[remove_parametrizations] the parametrized tensor's dtype differs from the "
                                 "original's: use leave_parametrized=False")
            original.set_(value)
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register_tensor(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module
