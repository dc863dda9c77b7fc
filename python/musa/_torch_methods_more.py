"""The last torch names musa lacked whose pieces it had: Tensor methods
for functions musa already had (hardshrink, prelu, matrix_power, the split
forms, the complex API's real-dtype identities, is_inference; real and
imag as properties; new and new_empty_strided), and torch.matrix_power,
adjoint, get_device, is_signed, fill_, frombuffer,
is_inference_mode_enabled, set_default_tensor_type and init_num_threads;
Tensor.apply_, map_ and map2_, which call a Python function per element."""
import numbers

from . import _C
from ._functions import _tensors

__all__ = ["matrix_power", "adjoint", "get_device", "is_signed", "fill_", "frombuffer",
           "is_inference_mode_enabled", "set_default_tensor_type", "init_num_threads"]


def matrix_power(input, n):
    """input^n for square matrices (linalg.matrix_power)."""
    from . import linalg
    return linalg.matrix_power(input, n)


def adjoint(input):
    """The last two dims swapped (a view; the conjugate is the identity here)."""
    _tensors("adjoint", input=input)
    if input.ndim < 2:
        raise ValueError(f"[adjoint] tensor.adjoint() is only supported on matrices or batches of matrices. "
                         f"Got {input.ndim}-D tensor.")
    return input.transpose(-2, -1)


def get_device(input):
    """-1: musa tensors live in host memory (torch's answer for CPU tensors)."""
    _tensors("get_device", input=input)
    return -1


def is_signed(input):
    _tensors("is_signed", input=input)
    return input.dtype not in (_C.uint8, _C.bool)


def fill_(input, value):
    _tensors("fill_", input=input)
    return input.fill_(value)


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over an object that exposes the buffer protocol (bytes,
    bytearray, memoryview, array.array, mmap), sharing its memory as
    torch's does: count elements of dtype from byte offset (-1: all)."""
    import numpy as np
    if not isinstance(dtype, type(_C.float32)):
        raise TypeError(f"[frombuffer] dtype must be a musa dtype, got {dtype!r}")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ValueError(f"[frombuffer] offset must be a non-negative int, got {offset!r}")
    if not isinstance(count, int) or isinstance(count, bool) or count == 0 or count < -1:
        raise ValueError(f"[frombuffer] count must be -1 or positive, got {count!r}")
    try:
        view = memoryview(buffer)
    except TypeError:
        raise TypeError(f"[frombuffer] a {type(buffer).__name__} does not expose the buffer protocol") from None
    except BufferError as e:  # an exporter that refuses a plain (contiguous) view
        raise BufferError(f"[frombuffer] the {type(buffer).__name__} cannot lend its memory as one "
                          f"contiguous buffer ({e})") from None
    if not view.c_contiguous:
        raise BufferError(f"[frombuffer] the {type(buffer).__name__}'s memory is not contiguous "
                          f"(strides {view.strides}); copy it first")
    nbytes = view.nbytes
    size = _C.empty(0, dtype=dtype).element_size()
    if offset > nbytes or (offset == nbytes and nbytes):  # an empty buffer takes offset 0 only
        raise ValueError(f"[frombuffer] offset {offset} is past the buffer's {nbytes} bytes")
    avail = (nbytes - offset) // size
    if count == -1:
        if (nbytes - offset) % size:
            raise ValueError(f"[frombuffer] the buffer's {nbytes - offset} bytes after offset {offset} are not "
                             f"a multiple of {dtype}'s {size}")
        count = avail
    elif count > avail:
        raise ValueError(f"[frombuffer] requested {count} elements of {size} bytes at offset {offset}, but the "
                         f"buffer has {nbytes} bytes")
    if dtype is _C.bfloat16:  # NumPy has no bfloat16: its bytes, reinterpreted
        from . import from_numpy
        t = from_numpy(np.frombuffer(buffer, dtype=np.uint8, count=2 * count, offset=offset)).view(_C.bfloat16)
    else:
        from . import from_numpy
        np_dtype = {_C.float32: np.float32, _C.float64: np.float64, _C.float16: np.float16,
                    _C.int64: np.int64, _C.int32: np.int32, _C.int16: np.int16, _C.int8: np.int8,
                    _C.uint8: np.uint8,
                    _C.bool: np.bool_}[dtype]
        t = from_numpy(np.frombuffer(buffer, dtype=np_dtype, count=count, offset=offset))
    return t.requires_grad_() if requires_grad else t


def is_inference_mode_enabled():
    """Whether the innermost grad-mode context is inference_mode (enabled)."""
    from .autograd import inference_mode
    return inference_mode._depth > 0


def set_default_tensor_type(t):
    """The default floating dtype from a legacy tensor type (FloatTensor,
    DoubleTensor, 'torch.DoubleTensor', ...), as torch's (deprecated)."""
    from . import _legacy, set_default_dtype
    name = t if isinstance(t, str) else getattr(t, "__name__", None)
    name = name.split(".")[-1] if isinstance(name, str) else None
    dtypes = {"FloatTensor": _C.float32, "DoubleTensor": _C.float64, "HalfTensor": _C.float16,
              "BFloat16Tensor": _C.bfloat16}
    if name not in dtypes or (not isinstance(t, str) and t is not getattr(_legacy, name)):
        raise TypeError(f"[set_default_tensor_type] expected a floating tensor type (FloatTensor, "
                        f"DoubleTensor, HalfTensor, BFloat16Tensor) or its name, got {t!r}")
    set_default_dtype(dtypes[name])


def init_num_threads():
    """Nothing to do: musa's thread pool starts with the library."""


# ---- methods ----

def _per_element(self, who, fn, others):
    """self[i] = fn(self[i], other[i] ...) for every element, in place, the
    others broadcast to self's shape; each result converted to self's dtype
    as Python converts it (int() truncates). Not recorded by autograd."""
    if not callable(fn):
        raise TypeError(f"[Tensor.{who}] expected a callable, got {type(fn).__name__}")
    if self.requires_grad:
        raise RuntimeError(f"[Tensor.{who}] cannot call {who} on a tensor that requires grad; "
                           f"use t.detach().{who}(...)")
    for i, o in enumerate(others):
        if not isinstance(o, _C.Tensor):
            raise TypeError(f"[Tensor.{who}] argument {i} must be a tensor, got "
                            f"{type(o).__name__}")
    cols = [self.reshape(-1).tolist()] + [o.expand(self.shape).reshape(-1).tolist()
                                          for o in others]
    conv = (float if self.is_floating_point() else bool if self.dtype is _C.bool else int)
    new = []
    for vals in zip(*cols):
        r = fn(*vals)
        if not isinstance(r, numbers.Number):
            raise TypeError(f"[Tensor.{who}] the function must return a number, got "
                            f"{type(r).__name__}")
        new.append(conv(r))
    from .autograd import no_grad
    with no_grad():
        self.copy_(_C.tensor(new, dtype=self.dtype).reshape(tuple(self.shape)))
    return self


def apply_(self, callable):
    """self[i] = callable(self[i]) for every element, in place (a Python
    call per element)."""
    return _per_element(self, "apply_", callable, ())


def map_(self, tensor, callable):
    """self[i] = callable(self[i], tensor[i]), tensor broadcast to self."""
    return _per_element(self, "map_", callable, (tensor,))


def map2_(self, x, y, callable):
    """self[i] = callable(self[i], x[i], y[i]), x and y broadcast to self."""
    return _per_element(self, "map2_", callable, (x, y))


def _bind():
    from . import _torch_names_more as N
    from ._torch_nn_names import _F
    T = _C.Tensor

    def hardshrink(self, lambd=0.5):
        return _F().hardshrink(self, lambd)

    def prelu(self, weight):
        return _F().prelu(self, weight)

    def new(self, *args):
        """Legacy: new(sizes...) uninitialised, new(data) from data, new()
        empty; always in self's dtype (the typed constructors' rules)."""
        from ._legacy import legacy_new
        return legacy_new("Tensor.new", self.dtype, args)

    def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False, **kw):
        from ._torch_compat import empty_strided
        return empty_strided(size, stride, dtype=dtype or self.dtype, requires_grad=requires_grad)

    def imag(self):
        return N.imag(self)

    for fn in (hardshrink, prelu, new, new_empty_strided):
        setattr(T, fn.__name__, fn)
    for name in ("split_with_sizes", "unsafe_split", "unsafe_chunk", "unsafe_split_with_sizes", "is_conj",
                 "resolve_conj", "resolve_neg", "is_neg", "conj", "conj_physical", "is_inference"):
        setattr(T, name, getattr(N, name))
    T.matrix_power = matrix_power
    T.apply_, T.map_, T.map2_ = apply_, map_, map2_
    T.real = property(N.real)
    T.imag = property(imag)


_bind()
