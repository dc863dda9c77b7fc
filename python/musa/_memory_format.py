"""Memory formats, as torch's: musa.contiguous_format (row-major),
channels_last (4-D tensors stored N, H, W, C), channels_last_3d (5-D, N,
D, H, W, C) and preserve_format, taken by Tensor.contiguous,
is_contiguous, clone, to, the *_like factories and Module.to. A
channels-last tensor keeps its logical (N, C, H, W) shape; only its
strides differ, and every op reads such strides."""
from . import _C

__all__ = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d", "preserve_format"]


class _Named:
    """A constant of the musa namespace: it prints as musa.<name> and
    pickles as that same object."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return "musa." + self._name

    def __reduce__(self):
        return self._name


class memory_format(_Named):
    """A memory layout for the memory_format= arguments."""


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")

_ORDERS = {channels_last: (4, (0, 2, 3, 1)), channels_last_3d: (5, (0, 2, 3, 4, 1))}
# the C methods, before _bind() wraps them with memory_format=
_c_contiguous, _c_is_contiguous, _c_clone = _C.Tensor.contiguous, _C.Tensor.is_contiguous, _C.Tensor.clone


def _check(who, fmt, allow_preserve=True):
    if not isinstance(fmt, memory_format) or (fmt is preserve_format and not allow_preserve):
        raise ValueError(f"[{who}] memory_format must be one of musa.contiguous_format, channels_last, "
                         f"channels_last_3d{', preserve_format' if allow_preserve else ''}; got {fmt!r}")


def _order(who, t, fmt):
    ndim, order = _ORDERS[fmt]
    if t.ndim != ndim:
        raise ValueError(f"[{who}] required rank {ndim} tensor to use {fmt!r} format, got {t.ndim}")
    return order


def _dense_in(t, order):
    """Whether t's strides are those of a dense tensor stored in dim order
    `order` (outermost first); dims of size 1 may have any stride, as in
    torch."""
    expected = 1
    for d in reversed(order):
        n = t.shape[d]
        if n != 1 and t.stride()[d] != expected:
            return False
        expected *= n
    return True


def is_contiguous(t, fmt=contiguous_format):
    _check("Tensor.is_contiguous", fmt, allow_preserve=False)
    if fmt is contiguous_format:
        return _c_is_contiguous(t)
    ndim, order = _ORDERS[fmt]
    return t.ndim == ndim and _dense_in(t, order)


def _to_format(who, t, fmt):
    """t's values in layout fmt (t itself when it already is)."""
    if fmt is contiguous_format:
        return _c_contiguous(t)
    order = _order(who, t, fmt)
    if _dense_in(t, order):
        return t
    inverse = [order.index(i) for i in range(len(order))]
    return _c_contiguous(t.permute(*order)).permute(*inverse)


def _suggested(t):
    """The format preserve_format keeps: channels-last when t is stored so
    (and not also row-major), else contiguous."""
    for fmt, (ndim, order) in _ORDERS.items():
        if t.ndim == ndim and _dense_in(t, order) and not _c_is_contiguous(t):
            return fmt
    return contiguous_format


def contiguous(t, memory_format=contiguous_format):
    if memory_format is preserve_format:
        raise RuntimeError("[Tensor.contiguous] preserve memory format is unsupported by the contiguous "
                           "operator")
    _check("Tensor.contiguous", memory_format)
    return _to_format("Tensor.contiguous", t, memory_format)


def _laid_out(who, t, out, fmt):
    """out, a fresh (contiguous) result shaped like t, laid out as fmt asks
    (preserve_format: t's own layout); itself when that is row-major."""
    if fmt is contiguous_format or (fmt is preserve_format and _c_is_contiguous(t)):
        return out
    _check(who, fmt)
    fmt = _suggested(t) if fmt is preserve_format else fmt
    return out if fmt is contiguous_format else _to_format(who, out, fmt)


def _bind():
    T = _C.Tensor

    def contiguous_(self, memory_format=contiguous_format):
        if memory_format is contiguous_format:
            return _c_contiguous(self)
        return contiguous(self, memory_format)

    def is_contiguous_(self, memory_format=contiguous_format):
        if memory_format is contiguous_format:
            return _c_is_contiguous(self)
        return is_contiguous(self, memory_format)

    def clone_(self, *, memory_format=preserve_format):
        return _laid_out("Tensor.clone", self, _c_clone(self), memory_format)

    contiguous_.__doc__ = "The values in memory_format's layout (self when already so)."
    is_contiguous_.__doc__ = "Whether self is stored densely in memory_format's layout."
    clone_.__doc__ = "A copy (with history), laid out as memory_format (default: self's layout)."
    contiguous_.__name__, is_contiguous_.__name__, clone_.__name__ = "contiguous", "is_contiguous", "clone"
    contiguous_.__wrapped__, is_contiguous_.__wrapped__, clone_.__wrapped__ = (_c_contiguous, _c_is_contiguous,
                                                                               _c_clone)
    T.contiguous, T.is_contiguous, T.clone = contiguous_, is_contiguous_, clone_


_bind()


def _like_factory(fn, name):
    def like_fn(input, *args, memory_format=preserve_format, **kwargs):
        return _laid_out(name, input, fn(input, *args, **kwargs), memory_format)
    like_fn.__name__ = like_fn.__qualname__ = name
    like_fn.__doc__ = (fn.__doc__ or "") + " memory_format: the result's layout (default: input's)."
    return like_fn


def wrap_factories(ns):
    """Give namespace ns's *_like factories and clone memory_format=."""
    for name in ("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
                 "randint_like"):
        setattr(ns, name, _like_factory(getattr(ns, name), name))
    c_clone = ns.clone

    def clone_fn(input, *, memory_format=preserve_format, **kwargs):
        return _laid_out("clone", input, c_clone(input, **kwargs), memory_format)
    clone_fn.__name__ = clone_fn.__qualname__ = "clone"
    clone_fn.__wrapped__ = c_clone
    ns.clone = clone_fn


def to_format(who, t, fmt):
    """Tensor.to / Module.to(memory_format=fmt)."""
    _check(who, fmt)
    if fmt is preserve_format:
        return t
    return _to_format(who, t, fmt)
