"""Argument structures of a compiled call: flattening the arguments (and
the outputs) into a spec plus a list of tensor leaves, putting them back
together, and the names of the leaves for logs and graph inputs.

Invariants:
* A spec is hashable and equal for two calls exactly when they have the same
  structure and the same non-tensor values; tensors enter it only as their
  leaf index, so the spec is half of a cache key (the tensors' signature,
  ``_keys.TensorSig``, is the other).
* Leaves are numbered in the order ``flatten`` meets them, depth first and
  positional arguments before keywords; ``unflatten`` reads them in that
  order, so ``unflatten(flatten(x, leaves), leaves)`` rebuilds x.
* A call's arguments hold each tensor object once among the leaves: a tensor
  passed again (``attn(x, x, x)``) is the first one's leaf index, so the
  capture sees one tensor where the function does (``query is key``), and
  the spec, hence the key, tells aliased calls from the others.
* A Module argument is keyed by identity and training flag, so train() and
  eval() pick different variants.
"""
import enum
import types
import weakref
from typing import Any, NamedTuple

from .. import _C

_Tensor = _C.Tensor


class ArgKind(str, enum.Enum):
    """What an ArgSpec node stands for (a str enum: it hashes as fast as a str)."""
    TENSOR = "tensor"  # body: the leaf index
    TUPLE = "tuple"    # body: a tuple of child specs
    LIST = "list"      # body: a tuple of child specs
    DICT = "dict"      # body: a tuple of (key, child spec)
    MODULE = "module"  # body: a ModuleArg
    VALUE = "value"    # body: the value itself, part of the cache key


# The kinds as module constants: flatten runs on every call, and an Enum
# member's lookup through its class costs more than a global.
TENSOR, TUPLE, LIST, DICT = ArgKind.TENSOR, ArgKind.TUPLE, ArgKind.LIST, ArgKind.DICT
MODULE, VALUE = ArgKind.MODULE, ArgKind.VALUE
CONTAINERS = (TUPLE, LIST, DICT)


class ArgSpec(NamedTuple):
    """One node of an argument structure."""
    kind: ArgKind
    body: Any


class CallSpec(NamedTuple):
    """The structure of one call: its positional and its keyword arguments."""
    args: ArgSpec    # a TUPLE node
    kwargs: ArgSpec  # a DICT node


# tuple.__new__ makes a NamedTuple without its Python-level __new__ (the
# hot path makes one per argument of every call).
new_tuple = tuple.__new__


class ModuleArg:
    """A Module passed as an argument (e.g. self of a compiled method): keyed
    by identity and training flag, so train()/eval() recompiles."""
    __slots__ = ("obj", "training", "_key")

    def __init__(self, obj):
        self.obj, self.training = obj, obj.training
        self._key = (id(obj), obj.training)

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, ModuleArg) and self._key == other._key

    def __repr__(self):
        return f"{type(self.obj).__name__}(training={self.training})"


def flatten(obj, leaves, seen=None):
    """The ArgSpec of obj, appending its tensors to leaves. With seen (a
    dict, id -> leaf index), a tensor met before is its first leaf again."""
    if isinstance(obj, _Tensor):
        if seen is not None:
            i = seen.get(id(obj))
            if i is not None:
                return new_tuple(ArgSpec, (TENSOR, i))
            seen[id(obj)] = len(leaves)
        leaves.append(obj)
        return new_tuple(ArgSpec, (TENSOR, len(leaves) - 1))
    if isinstance(obj, tuple):
        return new_tuple(ArgSpec, (TUPLE, tuple([flatten(o, leaves, seen) for o in obj])))
    if isinstance(obj, list):
        return new_tuple(ArgSpec, (LIST, tuple([flatten(o, leaves, seen) for o in obj])))
    if isinstance(obj, dict):
        return new_tuple(ArgSpec, (DICT, tuple([(k, flatten(v, leaves, seen))
                                                for k, v in obj.items()])))
    if hasattr(obj, "training") and hasattr(obj, "_modules"):  # a musa.nn.Module
        return new_tuple(ArgSpec, (MODULE, ModuleArg(obj)))
    return new_tuple(ArgSpec, (VALUE, obj))


_POSITIONAL_TENSORS = {}  # n -> the CallSpec of n tensors passed positionally


def flatten_call(args, kwargs, leaves):
    """The CallSpec of a call, appending its tensors to leaves (each tensor
    object once)."""
    n = len(args)
    if (not kwargs and all([type(a) is _Tensor for a in args]) and
            (n < 2 or (args[0] is not args[1] if n == 2 else len({id(a) for a in args}) == n))):
        # the common call (distinct tensors, positionally), kept cheap
        leaves.extend(args)
        spec = _POSITIONAL_TENSORS.get(len(args))
        if spec is None:
            spec = _POSITIONAL_TENSORS[len(args)] = new_tuple(
                CallSpec, (flatten(args, []), flatten(kwargs, [])))
        return spec
    seen = {}
    return new_tuple(CallSpec, (flatten(args, leaves, seen), flatten(kwargs, leaves, seen)))


def positional_spec(n):
    """The CallSpec of n distinct tensors passed positionally (flatten_call's
    common call), or None before such a call."""
    return _POSITIONAL_TENSORS.get(n)


def unflatten(spec, leaves):
    """The structure spec describes, with leaves in place of its tensors."""
    kind, body = spec
    if kind is TENSOR:
        return leaves[body]
    if kind is TUPLE:
        return tuple([unflatten(s, leaves) for s in body])
    if kind is LIST:
        return [unflatten(s, leaves) for s in body]
    if kind is DICT:
        return {k: unflatten(s, leaves) for k, s in body}
    if kind is MODULE:
        return body.obj
    return body


def contiguous(tensors):
    """The tensors as a plan takes them: contiguous (a copy where needed)."""
    return [t if t.is_contiguous() else t.contiguous() for t in tensors]


def overlapping(leaves):
    """Whether two of the (distinct) tensor leaves share memory."""
    return any(a._shares_storage(b) for i, a in enumerate(leaves) for b in leaves[i + 1:])


def copy_back(leaves, inputs, res=None):
    """Write into each argument what was written into its contiguous copy;
    an output (in the list res) that is such a copy becomes the argument
    itself, as eager returns it."""
    for i, (t, c) in enumerate(zip(leaves, inputs)):
        if t is c:
            continue
        if c._version != 0:
            t.copy_(c)
        if res is not None:
            for j, r in enumerate(res):
                if r is c:
                    res[j] = t


_param_names = weakref.WeakKeyDictionary()  # function -> its parameter names


def _code_names(func):
    """A plain function's parameter names in inspect.signature's order
    (positional, *args, keyword-only, **kwargs), read from its code object;
    None for anything else (a wrapper, a partial, a builtin, a signature
    set by hand)."""
    if type(func) is not types.FunctionType or hasattr(func, "__signature__"):
        return None
    wrapped = getattr(func, "__wrapped__", None)
    if wrapped is not None:  # inspect.signature follows functools.wraps
        inner = getattr(wrapped, "__func__", wrapped)
        if inner is func or getattr(inner, "__wrapped__", None) is not None:
            return None  # chains and cycles: inspect's unwrap
        return param_names(wrapped)
    code = func.__code__
    n = code.co_argcount
    k = code.co_kwonlyargcount
    v = code.co_varnames
    names = list(v[:n])
    extra = n + k
    if code.co_flags & 0x04:  # CO_VARARGS
        names.append(v[extra])
        extra += 1
    names += v[n:n + k]
    if code.co_flags & 0x08:  # CO_VARKEYWORDS
        names.append(v[extra])
    return names


def param_names(fn):
    """fn's parameter names, in order ([] when it has no signature). Cached
    per function, weakly: a bound method is looked up by its function, so
    the cache never keeps an object (a compiled module) alive."""
    func = getattr(fn, "__func__", fn)
    bound = func is not fn
    try:
        names = _param_names.get(func)
    except TypeError:  # not weakly referenceable (a builtin): no caching
        names = None
    if names is None:
        names = _code_names(func)
    if names is None:
        import inspect  # (with ast, dis and tokenize: 0.8 MiB resident, so only when needed)
        try:
            names = list(inspect.signature(func).parameters)
        except (TypeError, ValueError):
            names = []
        try:
            _param_names[func] = names
        except TypeError:
            pass
    return names[1:] if bound and names else names


def leaf_names(fn, call_spec):
    """{leaf index: readable name}: the parameter name of fn the leaf was
    passed as, with the path inside containers (``xs[0]``, ``d['k']``)."""
    params = param_names(fn)
    names = {}

    def walk(spec, name):
        kind, body = spec
        if kind is TENSOR:
            names.setdefault(body, name)  # an aliased tensor: its first name
        elif kind is TUPLE or kind is LIST:
            for i, s in enumerate(body):
                walk(s, f"{name}[{i}]")
        elif kind is DICT:
            for k, s in body:
                walk(s, f"{name}[{k!r}]")

    for i, s in enumerate(call_spec.args.body):
        walk(s, params[i] if i < len(params) else f"args[{i}]")
    for k, s in call_spec.kwargs.body:
        walk(s, k)
    return names
