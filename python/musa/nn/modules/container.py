"""Containers: Sequential, ModuleList, ModuleDict, ParameterList.

Sequence containers name their children by position ("0", "1", ...); after
a deletion or insertion the children are renumbered, as in PyTorch 2.
"""
import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from ... import _C
from ..parameter import Parameter
from .module import Module


def _position(idx, n, owner):
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"[{owner}] index {idx} is out of range for length {n}")
    return idx % n


class _ModuleSequence(Module):
    """The list behaviour shared by Sequential and ModuleList; a subclass
    defines _from_list(modules), which builds one from a list."""

    def _renumber(self, modules):
        for m in modules:
            if not isinstance(m, Module):
                raise TypeError(f"[{type(self).__name__}] {type(m).__name__} is not a Module subclass")
        self._modules.clear()
        self._modules.update((str(i), m) for i, m in enumerate(modules))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self._from_list(list(self._modules.values())[idx])
        return list(self._modules.values())[_position(idx, len(self), type(self).__name__)]

    def __setitem__(self, idx, module):
        key = list(self._modules)[_position(idx, len(self), type(self).__name__)]
        self.add_module(key, module)

    def __delitem__(self, idx):
        modules = list(self._modules.values())
        if isinstance(idx, slice):
            del modules[idx]
        else:
            del modules[_position(idx, len(self), type(self).__name__)]
        self._renumber(modules)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other):
        return self._from_list(list(self) + list(other))

    def __iadd__(self, other):
        return self.extend(other)

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if not isinstance(modules, Iterable):
            raise TypeError(f"[{type(self).__name__}.extend] should be called with an iterable, "
                            f"but got {type(modules).__name__}")
        for m in list(modules):
            self.append(m)
        return self

    def insert(self, index, module):
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._renumber(modules)
        return self

    def pop(self, idx=-1):
        module = self[idx]
        del self[idx]
        return module


class Sequential(_ModuleSequence):
    """Calls its modules in order, each on the previous one's output.
    Sequential(m0, m1, ...) names them "0", "1", ...; Sequential(OrderedDict)
    keeps the dict's names."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    @classmethod
    def _from_list(cls, modules):
        return cls(*modules)

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ModuleList(_ModuleSequence):
    """A list of modules, registered as children (it has no forward)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    @classmethod
    def _from_list(cls, modules):
        return cls(modules)


class ModuleDict(Module):
    """An ordered dict of modules, registered as children."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        """Add (name, module) pairs from a mapping or an iterable of pairs."""
        for key, module in _pairs("ModuleDict.update", modules, "(name, module)"):
            self[key] = module


def _pairs(who, items, what):
    """(key, value) pairs of a mapping (or a ModuleDict/ParameterDict) or
    of an iterable of pairs, checked, as a list: the dicts' update."""
    if isinstance(items, Mapping) or (isinstance(items, Module) and hasattr(items, "items")):
        return list(items.items())
    if not isinstance(items, Iterable) or isinstance(items, (str, _C.Tensor)):
        raise TypeError(f"[{who}] should be called with an iterable of key/value pairs, but got "
                        f"{type(items).__name__}")
    pairs = list(items)
    for j, pair in enumerate(pairs):
        if not isinstance(pair, Iterable) or isinstance(pair, (str, _C.Tensor)) or len(pair) != 2:
            raise ValueError(f"[{who}] element #{j} should be a {what} pair, got {pair!r}")
    return pairs


def _held_lines(pairs):
    """ParameterList's and ParameterDict's repr lines, as PyTorch's."""
    lines = []
    for k, p in pairs:
        if isinstance(p, _C.Tensor):
            kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
            size = "x".join(str(s) for s in p.shape)
            lines.append(f"  ({k}): {kind} containing: [{p.dtype} of size {size}]")
        else:
            lines.append(f"  ({k}): Object of type: {type(p).__name__}")
    return "\n".join(lines)


class ParameterList(Module):
    """A list whose tensors are registered as parameters (a plain tensor is
    wrapped in a Parameter); other objects are stored as attributes."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList(self[i] for i in range(*idx.indices(len(self))))
        return getattr(self, str(_position(idx, len(self), "ParameterList")))

    def __setitem__(self, idx, value):
        if isinstance(value, _C.Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, str(_position(idx, len(self), "ParameterList")), value)

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values):
        return self.extend(values)

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, value):
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        if not isinstance(values, Iterable) or isinstance(values, _C.Tensor):
            raise TypeError(f"[ParameterList.extend] should be called with an iterable, "
                            f"but got {type(values).__name__}")
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return _held_lines(enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("[ParameterList] ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict whose tensors are registered as parameters under
    their keys (a plain tensor is wrapped in a Parameter); other objects
    are stored as attributes, as in PyTorch."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def _check_key(self, key):
        if not isinstance(key, str):
            raise TypeError(f"[ParameterDict] keys must be str, got {type(key).__name__}")
        return key

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key, value):
        self._keys[self._check_key(key)] = None
        if isinstance(value, _C.Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, key, value)

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key):
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        if not self._keys:
            raise KeyError("[ParameterDict.popitem] the dict is empty")
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for key in list(self._keys):
            del self[key]

    def copy(self):
        """A new ParameterDict holding the same parameters."""
        return ParameterDict(list(self.items()))

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def update(self, parameters):
        """Add (key, value) pairs from a mapping or an iterable of pairs."""
        for key, value in _pairs("ParameterDict.update", parameters, "(key, value)"):
            self[key] = value

    def __or__(self, other):
        r = self.copy()
        r.update(other)
        return r

    def __ior__(self, other):
        self.update(other)
        return self

    def __dir__(self):
        return [k for k in super().__dir__() if k not in self._keys]

    def extra_repr(self):
        return _held_lines(self.items())

    def __call__(self, *args, **kwargs):
        raise RuntimeError("[ParameterDict] ParameterDict should not be called.")
