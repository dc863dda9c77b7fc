"""Cache keys of compiled variants, and the recompile log's reasons.

A call's CacheKey picks its compiled variant: the argument structure and
non-tensor values (CallSpec), each tensor leaf's TensorSig, grad mode, autocast, the
owner's extra state (a module's training flag) and the values of the Python
guards the captures registered (musa.jit.guard).

Invariants:
* Two calls with equal keys can run the same plans.
* A dim declared dynamic, and within its range, is DYNAMIC in the key (one
  entry serves the range) unless the key is asked for exact sizes; entries
  whose plans turned out to be per size are filed under exact keys.
* ``guards`` follows the order in which the owner first saw each guard; a key
  made before a guard existed is shorter, never reordered.
"""
from typing import Any, NamedTuple

from ._args import CONTAINERS, DICT, MODULE, VALUE, CallSpec, new_tuple

DYNAMIC = "dyn"  # a shape entry: a dim declared dynamic, within its range


class TensorSig(NamedTuple):
    """What a variant fixes about one tensor argument."""
    dtype: Any
    shape: tuple  # ints, or DYNAMIC for a dynamic dim within its range
    requires_grad: bool
    has_grad: bool  # it requires grad and has a .grad (a backward inside may add to it)


class CacheKey(NamedTuple):
    """What picks a compiled variant."""
    spec: CallSpec        # argument structure and non-tensor values
    signature: tuple      # a TensorSig per tensor leaf, in leaf order
    grad_enabled: bool    # grad mode at the call
    autocast: tuple       # (enabled, dtype) of musa.amp.autocast at the call
    extra: Any            # the owner's extra_key() (a module's training flag), or None
    guards: tuple         # the Python guards' values, in the owner's guard order

    @property
    def merges_dynamic(self):
        """True when a dim of the signature is DYNAMIC."""
        return any(DYNAMIC in sig.shape for sig in self.signature)


def declared_dims(dynamic, index, name):
    """{dim: (min, max)} declared dynamic for tensor leaf `index`, found by
    its parameter name first and then by its position, or None."""
    return dynamic.get(name) or dynamic.get(index)


def signature(leaves, dynamic=None, names=None):
    """The TensorSigs of the leaves. With `dynamic` (Config.dynamic) and the
    leaves' names, dims declared dynamic and within their range are DYNAMIC."""
    sig = []
    for i, t in enumerate(leaves):
        shape = tuple(t.shape)
        dims = declared_dims(dynamic, i, names.get(i)) if dynamic else None
        if dims:
            shape = tuple(DYNAMIC if d in dims and _within(s, dims[d]) else s
                          for d, s in enumerate(shape))
        rg = t.requires_grad
        sig.append(new_tuple(TensorSig, (t.dtype, shape, rg, rg and t.grad is not None)))
    return tuple(sig)


def _within(size, bounds):
    lo, hi = bounds
    return lo <= size <= hi


def describe_change(old, new, names, guard_whats):
    """Why `new` missed the variant filed under `old`, in words, or None
    when the keys do not differ in a way this can name."""
    if old.spec != new.spec:
        if old.spec.args != new.spec.args:
            return describe_spec_change(old.spec.args, new.spec.args)
        return describe_spec_change(old.spec.kwargs, new.spec.kwargs)
    for i, (a, b) in enumerate(zip(old.signature, new.signature)):
        name = names.get(i, f"tensor {i}")
        reason = None
        if a.dtype != b.dtype:
            reason = f"argument '{name}' dtype changed: {a.dtype} -> {b.dtype}"
        elif len(a.shape) != len(b.shape):
            reason = f"argument '{name}' rank changed: {len(a.shape)} -> {len(b.shape)}"
        else:
            for d, (x, y) in enumerate(zip(a.shape, b.shape)):
                if x != y:
                    reason = f"argument '{name}' dim {d} changed: {x} -> {y}"
                    break
        if a.requires_grad != b.requires_grad and reason is None:
            reason = (f"argument '{name}' requires_grad changed: {a.requires_grad} -> "
                      f"{b.requires_grad}")
        if a.has_grad != b.has_grad and reason is None:
            reason = (f"argument '{name}' .grad changed: "
                      f"{'set' if a.has_grad else 'None'} -> {'set' if b.has_grad else 'None'}")
        if reason:
            return reason
    if old.grad_enabled != new.grad_enabled:
        return f"grad mode changed: {old.grad_enabled} -> {new.grad_enabled}"
    if old.autocast != new.autocast:
        return f"autocast changed: {old.autocast} -> {new.autocast}"
    if old.extra != new.extra:
        return f"module state changed: {old.extra} -> {new.extra}"
    if old.guards != new.guards:
        return describe_guard_change(guard_whats, old.guards, new.guards)
    return None


def describe_spec_change(a, b):
    """The first difference between two ArgSpecs, in words."""
    if a.kind != b.kind:
        return f"the argument structure changed ({a.kind.value} -> {b.kind.value})"
    if a.kind is MODULE:
        if a.body.obj is not b.body.obj:
            return f"a different {type(b.body.obj).__name__} module is passed"
        return (f"module {type(b.body.obj).__name__} training changed: {a.body.training} -> "
                f"{b.body.training}")
    if a.kind is VALUE:
        return f"a non-tensor argument changed: {a.body!r} -> {b.body!r}"[:300]
    if a.kind in CONTAINERS:
        if len(a.body) != len(b.body):
            return f"the argument structure changed ({len(a.body)} -> {len(b.body)} items)"
        for x, y in zip(a.body, b.body):
            if a.kind is DICT:
                (kx, x), (ky, y) = x, y
                if kx != ky:
                    return f"a keyword argument changed: {kx!r} -> {ky!r}"
            if x != y:
                return describe_spec_change(x, y)
    return "the non-tensor arguments or the argument structure changed"


def describe_guard_change(whats, old, new):
    """The first guard whose value differs, in words. Values that are tuples
    of (name, value) pairs (e.g. optimizer options) are compared by name."""
    for what, a, b in zip(whats, old, new):
        if a == b:
            continue
        if isinstance(a, tuple) and isinstance(b, tuple) and all(
                isinstance(x, tuple) and len(x) == 2 for x in a + b):
            da, db = dict(a), dict(b)
            keys = [k for k in dict.fromkeys(list(da) + list(db)) if da.get(k) != db.get(k)]
            return f"{what} changed: " + ", ".join(f"{k} {da.get(k)!r} -> {db.get(k)!r}"
                                                    for k in keys)
        return f"{what} changed: {a!r} -> {b!r}"[:300]
    return "Python state the function depends on changed"
