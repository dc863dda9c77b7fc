"""Tensor methods written in Python (the hot ones are in C: tensor.c, ops.c).

musa.Tensor is a heap type, so methods can be added to it here.
"""
import copyreg
import math as _math

from . import _C
from . import _functions as F

Tensor = _C.Tensor

_CAST_METHODS = {
    "float": _C.float32, "double": _C.float64, "half": _C.float16, "bfloat16": _C.bfloat16,
    "long": _C.int64, "int": _C.int32, "short": _C.int16, "char": _C.int8, "byte": _C.uint8,
    "bool": _C.bool,
}


def _method(fn, name=None):
    setattr(Tensor, name or fn.__name__, fn)
    return fn


def _make_cast(dt):
    def cast(self):
        return self if self.dtype is dt else _C.cast(self, dt)
    return cast


for _name, _dt in _CAST_METHODS.items():
    _method(_make_cast(_dt), _name)

Tensor.__array_priority__ = 1000  # NumPy defers binary operators to us


@_method
def __iter__(self):
    if self.ndim == 0:
        raise TypeError("[Tensor.__iter__] iteration over a 0-d tensor")
    return iter(F.unbind(self, 0))


@_method
def __contains__(self, element):
    return bool(F.any(_C.eq(self, element)))


@_method
def __format__(self, spec):
    if self.ndim == 0:
        return self.item().__format__(spec)
    return object.__format__(self, spec) if spec else repr(self)


@_method
def __reversed__(self):
    return self.flip(0) if self.ndim else self


def _rebuild(data, dtype_name, shape, requires_grad):
    import numpy as np
    dt = getattr(_C, dtype_name)
    if dtype_name == "bfloat16":
        t = _C.tensor(np.frombuffer(data, dtype=np.float32).reshape(shape)).cast(dt)
    else:
        t = _C.from_numpy(np.frombuffer(data, dtype=_NUMPY_NAMES[dtype_name]).reshape(shape).copy())
    if requires_grad:
        t.requires_grad_(True)
    return t


_NUMPY_NAMES = {
    "float32": "float32", "float64": "float64", "float16": "float16", "int64": "int64",
    "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
}


@_method
def __reduce_ex__(self, protocol):
    t = self.detach()
    name = str(self.dtype).split(".")[1]
    if name == "bfloat16":
        t = t.cast(_C.float32)
    data = t.contiguous().numpy().tobytes()
    return (_rebuild, (data, name, tuple(self.shape), self.requires_grad and self.is_leaf))


@_method
def __deepcopy__(self, memo):
    if id(self) in memo:
        return memo[id(self)]
    with _C_no_grad():
        data = self.clone()
    if self.__class__ is not Tensor:  # Parameter and other subclasses keep their class
        new = Tensor._make_subclass(self.__class__, data, self.requires_grad)
        for k, v in getattr(self, "__dict__", {}).items():
            import copy
            setattr(new, k, copy.deepcopy(v, memo))
    else:
        new = data.requires_grad_(self.requires_grad) if self.is_leaf else data
    if self.grad is not None:
        new.grad = self.grad.clone()
    memo[id(self)] = new
    return new


class _C_no_grad:
    def __enter__(self):
        self.prev = _C._set_grad_enabled(False)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)


# ---- autograd ----

@_method
def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate the gradients of this tensor into the .grad of the leaves."""
    from . import autograd
    autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)


class RemovableHandle:
    """Returned by register_hook; remove() unregisters the hook."""

    def __init__(self, remove_fn):
        self._remove = remove_fn

    def remove(self):
        if self._remove is not None:
            self._remove()
            self._remove = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


@_method
def register_hook(self, hook):
    """Call hook(grad) when the gradient of this tensor is computed; a
    returned tensor replaces the gradient."""
    hid = self._register_hook(hook)
    return RemovableHandle(lambda: self._remove_hook(hid))


@_method
def register_post_accumulate_grad_hook(self, hook):
    """Call hook(self) after backward has accumulated into this leaf's .grad
    (PyTorch 2.1's hook; the hook returns None)."""
    hid = self._register_post_hook(hook)
    return RemovableHandle(lambda: self._remove_hook(hid))


# ---- conversions ----

def _parse_to(who, args, kwargs):
    """The (dtype, device, copy) of a to(...) call: to(dtype), to(device),
    to(device, dtype), to(tensor), with keywords dtype/device/copy. Checks
    that the device exists in this build."""
    dtype, device = kwargs.pop("dtype", None), kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"[{who}] got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, _C.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, (str, _C.device)):
            device = a
        else:
            raise TypeError(f"[{who}] received an invalid argument {a!r}")
    if device is not None:
        try:
            _C.empty(0, device=device)  # raises unless the device exists in this build
        except (RuntimeError, TypeError) as e:  # the message names empty(): name who instead
            msg = str(e)
            if msg.startswith("["):
                msg = msg.split("] ", 1)[-1]
            raise e.__class__(f"[{who}] {msg}") from None
    return dtype, device, copy


@_method
def to(self, *args, **kwargs):
    """to(dtype), to(device), to(device, dtype), to(other); copy=False;
    memory_format= (musa.channels_last, ...) lays the result out so."""
    fmt = kwargs.pop("memory_format", None)
    dtype, _, copy = _parse_to("Tensor.to", args, dict(kwargs))
    out = _C.cast(self, dtype) if dtype is not None and dtype is not self.dtype else \
        (self.clone() if copy else self)
    if fmt is not None:
        from ._memory_format import to_format
        out = to_format("Tensor.to", out, fmt)
    return out


@_method
def cpu(self):
    return self


@_method
def cuda(self, device=None):
    return self.to("cuda" if device is None else device)


@_method
def type(self, dtype=None):
    if dtype is None:
        return "musa." + {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
                          "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor",
                          "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor",
                          "bool": "BoolTensor"}[
            str(self.dtype).split(".")[1]]
    return self.to(dtype)


@_method
def type_as(self, other):
    F._tensors("Tensor.type_as", other=other)
    return self.to(other.dtype)


@_method
def new_tensor(self, data, dtype=None, requires_grad=False):
    return _C.tensor(data, dtype=dtype or self.dtype, requires_grad=requires_grad)


def _new_factory(fn):
    def new(self, *size, dtype=None, device=None, requires_grad=False):
        return fn(*size, dtype=dtype or self.dtype, requires_grad=requires_grad)
    return new


Tensor.new_zeros = _new_factory(_C.zeros)
Tensor.new_ones = _new_factory(_C.ones)
Tensor.new_empty = _new_factory(_C.empty)


@_method
def new_full(self, size, fill_value, dtype=None, requires_grad=False):
    return _C.full(size, fill_value, dtype=dtype or self.dtype, requires_grad=requires_grad)


# ---- shape ----

@_method
def split(self, split_size, dim=0):
    return F.split(self, split_size, dim)


@_method
def unbind(self, dim=0):
    return F.unbind(self, dim)


@_method
def view_as(self, other):
    F._tensors("Tensor.view_as", other=other)
    return self.view(other.shape)


@_method
def reshape_as(self, other):
    F._tensors("Tensor.reshape_as", other=other)
    return self.reshape(other.shape)


@_method
def expand_as(self, other):
    F._tensors("Tensor.expand_as", other=other)
    return self.expand(other.shape)


@_method
def where(self, condition, other):
    return _C.where(condition, self, other)


@_method
def movedim(self, source, destination):
    return F.movedim(self, source, destination)


@_method
def swapaxes(self, a, b):
    return self.transpose(a, b)


Tensor.nelement = Tensor.numel
Tensor.ndimension = Tensor.dim
Tensor.clip = Tensor.clamp
Tensor.absolute = Tensor.abs
Tensor.negative = Tensor.neg
Tensor.multiply = Tensor.mul
Tensor.subtract = Tensor.sub
Tensor.divide = Tensor.div
Tensor.true_divide = Tensor.div


# ---- reductions and math written in Python ----

for _name in ("all", "any", "square", "log2", "log10", "exp2", "argsort", "masked_select",
              "count_nonzero", "lerp", "diag", "trace", "repeat_interleave", "sinh", "cosh",
              "tan", "mm", "bmm", "mv", "dot", "outer"):
    setattr(Tensor, _name, getattr(F, _name))


@_method
def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
    return F.norm(self, p, dim, keepdim, dtype)


@_method
def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return F.allclose(self, other, rtol, atol, equal_nan)


@_method
def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return F.isclose(self, other, rtol, atol, equal_nan)


@_method
def equal(self, other):
    return F.equal(self, other)


@_method
def isfinite(self):
    return F.isfinite(self)


from . import _torch_ops as _TO  # noqa: E402

# the functions PyTorch also has as Tensor methods (input first), and the
# in-place forms it has of them
for _name in ("addmm", "addbmm", "baddbmm", "addmv", "addr", "addcmul", "addcdiv", "atan2", "arctan2",
              "hypot", "clamp_min", "clamp_max", "deg2rad", "rad2deg", "frac", "sgn", "signbit", "positive",
              "float_power", "ldexp", "xlogy", "logit", "heaviside", "fmax", "fmin", "nan_to_num",
              "isposinf", "isneginf", "isreal", "is_complex", "is_nonzero", "is_same_size", "sinc",
              "absolute", "negative", "greater", "greater_equal", "less", "less_equal", "not_equal",
              "nansum", "nanmean", "aminmax", "mode", "median", "nanmedian", "kthvalue", "quantile", "nanquantile",
              "msort", "argwhere", "diff", "cov", "corrcoef", "dist", "inner", "ger", "kron", "vdot", "tile",
              "ravel", "moveaxis", "swapdims", "fliplr", "flipud", "rot90", "tensor_split", "hsplit",
              "vsplit", "dsplit", "take", "take_along_dim", "index_copy", "index_fill", "diagflat",
              "unique_consecutive", "renorm", "select_scatter", "slice_scatter", "diagonal_scatter",
              "narrow_copy", "bincount", "histc", "erfinv", "lgamma", "digamma", "cross",
              "scatter_reduce", "frexp", "angle"):
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, getattr(_TO, _name))


@_method
def polygamma(self, n):
    """polygamma(n, self), as PyTorch's Tensor.polygamma."""
    return _TO.polygamma(n, self)


def _inplace_of(fn, name):
    def op(self, *args, **kwargs):
        return self.copy_(fn(self, *args, **kwargs))
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"In-place {name[:-1]}."
    return op


for _name in ("addmm", "addbmm", "baddbmm", "addmv", "addr", "addcmul", "addcdiv", "atan2", "arctan2",
              "hypot", "clamp_min", "clamp_max", "deg2rad", "rad2deg", "frac", "sgn", "float_power", "ldexp",
              "xlogy", "logit", "heaviside", "nan_to_num", "sinc", "absolute", "negative", "greater",
              "greater_equal", "less", "less_equal", "not_equal", "index_copy", "index_fill", "renorm",
              "swapdims", "scatter_reduce"):
    if not hasattr(Tensor, _name + "_"):
        setattr(Tensor, _name + "_", _inplace_of(getattr(_TO, _name), _name + "_"))


@_method
def masked_scatter(self, mask, source):
    """A copy of self with the positions where mask (broadcast) is True
    filled, in order, from source's elements."""
    F._tensors("masked_scatter", mask=mask, source=source)
    if mask.dtype != _C.bool:
        raise TypeError(f"[masked_scatter] mask must be bool, got {mask.dtype}")
    m = mask.expand(*self.shape) if tuple(mask.shape) != tuple(self.shape) else mask
    count = int(m.sum())
    if count > source.numel():
        raise RuntimeError(f"[masked_scatter] the mask selects {count} elements but source has only "
                           f"{source.numel()}")
    order = _C.clamp(_C.cumsum(m.reshape(-1).long(), 0) - 1, min=0)
    spread = source.reshape(-1).index_select(0, order).reshape(self.shape) if self.numel() else self
    return _C.where(m, spread.to(self.dtype), self)


@_method
def masked_scatter_(self, mask, source):
    return self.copy_(self.masked_scatter(mask, source))


@_method
def index_put(self, indices, values, accumulate=False):
    """A copy of self with self[indices] = values (+= with accumulate, where
    repeated positions all add)."""
    return self.clone().index_put_(indices, values, accumulate)


@_method
def index_put_(self, indices, values, accumulate=False):
    if not isinstance(indices, (tuple, list)) or not all(isinstance(i, Tensor) for i in indices):
        raise TypeError(f"[index_put_] indices must be a tuple of Tensors, got {indices.__class__.__name__}")
    indices = tuple(indices)
    if not accumulate:
        self[indices] = values
        return self
    # accumulate: the positions as flat indices, summed with index_add
    flat_pos = _C.arange(self.numel()).reshape(self.shape)[indices]
    vals = values if isinstance(values, Tensor) else _C.tensor(values, dtype=self.dtype)
    vals = vals.expand(*flat_pos.shape).reshape(-1).to(self.dtype)
    out = _C.reshape(self, [-1]).index_add(0, flat_pos.reshape(-1), vals)
    return self.copy_(out.reshape(self.shape))


_view_shape = Tensor.view


@_method
def view(self, *shape, **kwargs):
    """view(*shape): the same memory in another shape; view(dtype): the same
    memory read as another dtype (the last dim rescaled when the element
    sizes differ; no gradient)."""
    if not kwargs and len(shape) == 1 and isinstance(shape[0], _C.dtype):
        return _C._view_dtype(self, shape[0])
    if "dtype" in kwargs and not shape and len(kwargs) == 1:
        return _C._view_dtype(self, kwargs["dtype"])
    return _view_shape(self, *shape, **kwargs)


from . import _legacy  # noqa: E402
from . import _more_functions as _M  # noqa: E402

for _name in ("to_sparse", "to_sparse_coo", "to_sparse_csr"):
    setattr(Tensor, _name, _legacy._no_sparse("Tensor." + _name))
Tensor.is_sparse = property(lambda self: False, doc="False: musa tensors are dense")
Tensor.mH = property(lambda self: self.transpose(-2, -1),
                     doc="The conjugate transpose of the last two dims: mT (no complex dtypes)")
Tensor.H = property(lambda self: self.t(), doc="The conjugate transpose of a matrix: t()")

Tensor.is_cpu = property(lambda self: not self.is_cuda, doc="True: musa tensors live in memory")
Tensor.is_xpu = property(lambda self: False, doc="False: no XPU backend")
Tensor.is_mps = property(lambda self: False, doc="False: no MPS backend")

for _name in ("roll", "diagonal", "unflatten", "logaddexp", "logaddexp2", "arcsin", "arccos",
              "arctan", "arcsinh", "arccosh", "arctanh", "fix", "diag_embed"):
    setattr(Tensor, _name, getattr(_M, _name))


Tensor.unfold = _M._unfold
Tensor.unfold.__name__ = Tensor.unfold.__qualname__ = "unfold"


@_method
def std_mean(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _M.std_mean(self, dim, unbiased, keepdim, correction=correction)


@_method
def var_mean(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _M.var_mean(self, dim, unbiased, keepdim, correction=correction)


@_method
def unique(self, sorted=True, return_inverse=False, return_counts=False, dim=None):
    return _M.unique(self, sorted, return_inverse, return_counts, dim)


# ---- in-place versions: the op written into self (out=self) where its
# binding takes out= (the ops.def rows bound as generated unary and binary
# functions: one pass, no new tensor); else compute, then copy into self ----

_WRITES_OUT = {n: 1 if fn == "binary" else 0 for n, fn, py in _C._op_table()
               if py == "gen" and fn in ("unary", "binary")}  # name -> its other operands


def _inplace(name):
    fn = getattr(Tensor, name)
    others = _WRITES_OUT.get(name)

    def op(self, *args, **kwargs):
        if others is not None and len(args) == others and not kwargs:
            return fn(self, *args, out=self)
        return self.copy_(fn(self, *args, **kwargs))
    op.__name__ = name + "_"
    op.__doc__ = f"In-place {name}."
    return op


for _name in ("abs", "neg", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
              "cos", "tanh", "sigmoid", "relu", "floor", "ceil", "round", "sign", "clamp", "pow",
              "remainder", "fmod", "masked_fill", "index_add", "scatter", "scatter_add", "tril",
              "triu", "square", "lerp", "erf", "erfc", "erfinv", "lgamma", "digamma", "logical_not",
              "clip", "maximum", "minimum", "asin",
              "acos", "atan", "asinh", "acosh", "atanh", "trunc", "copysign", "arcsin", "arccos",
              "arctan", "arcsinh", "arccosh", "arctanh", "fix", "logical_and", "logical_or",
              "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
              "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm", "i0", "igamma", "igammac", "divide",
              "multiply", "subtract", "true_divide", "floor_divide", "cumsum", "cumprod", "log2",
              "log10", "sinh", "cosh", "tan", "exp2", "polygamma", "eq", "ne", "lt", "le", "gt",
              "ge"):
    setattr(Tensor, _name + "_", _inplace(_name))


@_method
def uniform_(self, a=0.0, b=1.0):
    a, b = F._number(a, "Tensor.uniform_", "a"), F._number(b, "Tensor.uniform_", "b")
    with _C_no_grad():
        r = _C.rand_like(self) if self.is_floating_point() else _C.rand(*self.shape)
        return self.copy_(r * (b - a) + a)


@_method
def normal_(self, mean=0.0, std=1.0):
    mean, std = F._number(mean, "Tensor.normal_", "mean"), F._number(std, "Tensor.normal_", "std")
    with _C_no_grad():
        return self.copy_(_C.randn_like(self) * std + mean)


@_method
def bernoulli_(self, p=0.5):
    with _C_no_grad():
        probs = p if isinstance(p, Tensor) else _C.full(self.shape, F._number(p, "Tensor.bernoulli_", "p"))
        return self.copy_(_C.bernoulli(probs.cast(_C.float32)))


@_method
def exponential_(self, lambd=1.0):
    lambd = F._number(lambd, "Tensor.exponential_", "lambd")
    with _C_no_grad():
        u = _C.rand_like(self)
        return self.copy_(_C.neg(_C.log1p(_C.neg(u))) / lambd)


@_method
def pin_memory(self):
    return self


@_method
def is_pinned(self):
    return False


from ._generator import with_generator as _with_generator  # noqa: E402

from ._torch_random import METHODS as _RANDOM_METHODS  # noqa: E402

for _name, _fn in _RANDOM_METHODS.items():
    setattr(Tensor, _name, _fn)
for _name in ("uniform_", "normal_", "bernoulli_", "exponential_", *_RANDOM_METHODS):
    setattr(Tensor, _name, _with_generator(getattr(Tensor, _name), "Tensor." + _name))


def _device_from_str(s):
    return _C.device(s)


copyreg.pickle(_C.device, lambda d: (_device_from_str, (str(d),)))


# ---- linear algebra methods (musa.linalg; _more_functions.py) ----

@_method
def det(self):
    return _C.linalg_det(self)


@_method
def inverse(self):
    return _C.linalg_inv(self)


@_method
def slogdet(self):
    from ._more_functions import slogdet as _slogdet
    return _slogdet(self)


@_method
def logdet(self):
    from ._more_functions import logdet as _logdet
    return _logdet(self)


@_method
def cholesky(self, upper=False):
    return _C.linalg_cholesky(self, upper=bool(upper))


@_method
def cholesky_solve(self, input2, upper=False):
    from ._more_functions import cholesky_solve as _cs
    return _cs(self, input2, upper)


@_method
def cholesky_inverse(self, upper=False):
    from ._more_functions import cholesky_inverse as _ci
    return _ci(self, upper)


@_method
def triangular_solve(self, A, upper=True, transpose=False, unitriangular=False):
    from ._more_functions import triangular_solve as _ts
    return _ts(self, A, upper, transpose, unitriangular)


@_method
def lu(self, pivot=True, get_infos=False):
    from ._more_functions import lu as _lu
    return _lu(self, pivot, get_infos)


@_method
def lu_solve(self, LU_data, LU_pivots):
    from ._more_functions import lu_solve as _lu_solve
    return _lu_solve(self, LU_data, LU_pivots)


# ---- small methods PyTorch programs call ----

@_method
def adjoint(self):
    return self.mH


@_method
def get_device(self):
    """-1: the CPU (PyTorch's answer for CPU tensors)."""
    return -1


@_method
def is_signed(self):
    return self.dtype.is_signed


@_method
def sum_to_size(self, *size):
    """The sum of self down to `size`, a shape self broadcasts from
    (PyTorch's gradient reduction, as a method)."""
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    lead = self.ndim - len(size)
    ok = lead >= 0 and all(s == n or s == 1 for s, n in zip(size, self.shape[lead:]))
    if not ok:
        raise _C.InvalidArgumentError(f"[Tensor.sum_to_size] size {list(size)} is not "
                                      f"expandable to the tensor's size {list(self.shape)}")
    r = self.sum(tuple(range(lead))) if lead else self
    dims = tuple(i for i, (s, n) in enumerate(zip(size, r.shape)) if s == 1 and n != 1)
    return r.sum(dims, keepdim=True) if dims else r


@_method
def fill_diagonal_(self, fill_value, wrap=False):
    """Write fill_value on the main diagonal (a matrix, or a tensor of
    equal dims); wrap: a tall matrix's diagonal starts again below each
    square block, every N + 1 rows (as NumPy's fill_diagonal)."""
    if self.ndim < 2:
        raise _C.InvalidArgumentError(f"[Tensor.fill_diagonal_] dimensions must be larger than "
                                      f"1, got {self.ndim}")
    if self.ndim > 2 and len(set(self.shape)) != 1:
        raise _C.InvalidArgumentError(f"[Tensor.fill_diagonal_] all dimensions of input must be "
                                      f"of equal length, got {tuple(self.shape)}")
    rows, cols = self.shape[0], self.numel() // max(self.shape[0], 1)
    step = sum(_math.prod(self.shape[k + 1:]) for k in range(self.ndim)) if self.ndim > 2 \
        else cols + 1
    end = self.numel() if (wrap and self.ndim == 2) else min(rows, self.shape[-1]) * step
    idx = _C.arange(0, min(end, self.numel()), step, dtype=_C.int64)
    return self.copy_(self.reshape(-1).index_fill(0, idx, fill_value).reshape(self.shape))


@_method
def matrix_exp(self):
    from ._linalg_more import matrix_exp as _me
    return _me(self)


@_method
def mvlgamma(self, p):
    from ._special_more import multigammaln
    return multigammaln(self, p)


@_method
def mvlgamma_(self, p):
    return self.copy_(self.mvlgamma(p))


def _compat_method(name, inplace=False):
    """Tensor.<name> of musa/_torch_compat.py's function (self first); with
    inplace, Tensor.<name>_ writing the result into self."""
    def method(self, *args, **kwargs):
        from . import _torch_compat
        r = getattr(_torch_compat, name)(self, *args, **kwargs)
        return self.copy_(r) if inplace else r
    method.__name__ = name + ("_" if inplace else "")
    return _method(method)


for _name in ("svd", "qr", "pinverse", "put", "index_reduce", "nextafter", "histogram"):
    _compat_method(_name)
for _name in ("put", "index_reduce", "nextafter"):
    _compat_method(_name, inplace=True)


# ---- in-place view ops: the object rebinds to the view (C: _rebind_) ----

def _inplace_view(name, make):
    def method(self, *args, **kwargs):
        if self.requires_grad and self.is_leaf:
            raise RuntimeError(f"[Tensor.{name}] a leaf Variable that requires grad is being "
                               f"used in an in-place operation")
        self._rebind_(make(self, *args, **kwargs))
        return self
    method.__name__ = name
    return _method(method)


_inplace_view("unsqueeze_", lambda t, dim: t.unsqueeze(dim))
_inplace_view("squeeze_", lambda t, *dim: t.squeeze(*dim))
_inplace_view("t_", lambda t: t.t())
_inplace_view("transpose_", lambda t, dim0, dim1: t.transpose(dim0, dim1))
_inplace_view("swapaxes_", lambda t, axis0, axis1: t.transpose(axis0, axis1))
_inplace_view("swapdims_", lambda t, dim0, dim1: t.transpose(dim0, dim1))
_inplace_view("as_strided_", lambda t, size, stride, storage_offset=None:
              t.as_strided(size, stride, storage_offset))


def _resized(self, *sizes):
    sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
    if any(not isinstance(s, int) or s < 0 for s in sizes):
        raise _C.InvalidArgumentError(f"[Tensor.resize_] sizes must be non-negative ints, got "
                                      f"{list(sizes)}")
    n = _math.prod(sizes)
    if n == self.numel() and self.is_contiguous():
        return self.view(*sizes)
    # new storage: the flat prefix kept (PyTorch keeps the old storage's
    # elements and leaves the rest uninitialised; musa's new ones are zero)
    out = _C.zeros(n, dtype=self.dtype)
    k = min(n, self.numel())
    if k:
        out[:k] = self.detach().reshape(-1)[:k]
    return out.reshape(sizes)


@_method
def resize_(self, *sizes, memory_format=None):
    if self.requires_grad:
        raise RuntimeError("[Tensor.resize_] cannot resize tensors that require grad")
    self._rebind_(_resized(self, *sizes))
    return self


@_method
def resize_as_(self, other, memory_format=None):
    F._tensors("Tensor.resize_as_", other=other)
    return self.resize_(*other.shape)


@_method
def set_(self, source=None, storage_offset=0, size=None, stride=None):
    """This tensor becomes source (sharing its storage, without its
    history), or, with size and stride, a view of source's storage; with
    no source, an empty tensor. source may be a storage (UntypedStorage, or
    a TypedStorage of self's dtype): all of it, 1-D, or the view that
    storage_offset, size and stride describe."""
    # (a leaf that requires grad takes it only under no_grad, as in torch)
    if self.requires_grad and self.is_leaf and _C.is_grad_enabled():
        raise RuntimeError("[Tensor.set_] a leaf Variable that requires grad is being used in an "
                           "in-place operation")
    keep_grad = self.requires_grad and self.is_leaf
    if hasattr(source, "_tensor_of"):  # a storage (musa.storage): its elements, 1-D
        source = source._tensor_of(self.dtype, "Tensor.set_")
    if source is not None:
        F._tensors("Tensor.set_", source=source)
    if source is None:
        self._rebind_(_C.empty(0, dtype=self.dtype))
    elif size is None:
        self._rebind_(source.detach())
    else:
        size = F._dims(size, "Tensor.set_", "size")
        stride = _contiguous_strides(size) if stride is None else F._dims(stride, "Tensor.set_",
                                                                          "stride")
        offset = F._int(storage_offset, "Tensor.set_", "storage_offset")
        self._rebind_(source.detach().as_strided(size, stride, offset))
    if keep_grad and not self.requires_grad:
        self.requires_grad_(True)
    return self


def _contiguous_strides(size):
    strides, acc = [], 1
    for s in reversed(tuple(size)):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))
