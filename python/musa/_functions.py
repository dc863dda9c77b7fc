"""Functions of the musa namespace written in Python, over the C ops."""
import math as _math
import operator as _operator

from . import _C

__all__ = [
    "norm", "fused_norm", "split", "unbind", "all", "any", "allclose", "isclose", "equal", "mm",
    "bmm", "mv", "dot", "outer", "clip", "concat", "concatenate", "swapaxes", "movedim", "square",
    "log2", "log10", "exp2", "argsort", "masked_select", "count_nonzero", "atleast_1d", "lerp",
    "diag", "trace", "flatten", "repeat_interleave", "sinh", "cosh", "tan",
    "sigmoid_", "relu_", "numel", "abs_", "true_divide", "multiply", "subtract", "divide", "negative",
    "randperm", "isfinite",
]


# ---- argument checks shared by the functions written in Python ----

def with_out(fn, who, factory=False):
    """fn taking PyTorch's keyword out=: its result written into out (a
    tensor, or a tuple of them for a tuple result) with the C bindings'
    rules (_C._into_out: the result's shape, or an empty out resized; a
    dtype the result casts to), and out returned. factory: without dtype=,
    fn makes out's dtype (rand(3, out=float64_tensor) draws float64s)."""
    into = _C._into_out

    def wrapper(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        if factory and kwargs.get("dtype") is None and isinstance(out, _C.Tensor):
            kwargs["dtype"] = out.dtype
        return into(who, fn(*args, **kwargs), out)
    wrapper.__name__ = getattr(fn, "__name__", who)
    wrapper.__qualname__ = wrapper.__name__
    wrapper.__doc__ = getattr(fn, "__doc__", None)
    wrapper.__wrapped__ = fn
    return wrapper


def writes_out(who):
    """Decorator: with_out(fn, who) for a function declaring out=None
    (musa.linalg's)."""
    return lambda fn: with_out(fn, who)


def _tensors(who, **args):
    """TypeError naming who and the argument unless each one is a Tensor (in
    the words of the C bindings' own check)."""
    for name, x in args.items():
        if not isinstance(x, _C.Tensor):
            raise TypeError(f"[{who}] argument '{name}' must be Tensor, not {type(x).__name__}")


def _dim(dim, ndim, who):
    """dim as an index in [0, ndim) (a 0-d tensor takes -1 and 0): TypeError
    unless an int, IndexError when out of range, in PyTorch's words."""
    try:
        d = _operator.index(dim)
    except TypeError:
        raise TypeError(f"[{who}] dim must be an int, not {type(dim).__name__}") from None
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(f"[{who}] dimension out of range (expected to be in range of "
                         f"[{-n}, {n - 1}], but got {d})")
    return d % n


def _int(x, who, what):
    """x as an int; TypeError naming who unless it has __index__."""
    try:
        return _operator.index(x)
    except TypeError:
        raise TypeError(f"[{who}] {what} must be an int, not {type(x).__name__}") from None


def _dims(dims, who, what):
    """An int or a sequence of ints, as a list; TypeError otherwise."""
    if hasattr(dims, "__index__"):
        return [_operator.index(dims)]
    try:
        return [_operator.index(d) for d in dims]
    except TypeError:
        raise TypeError(f"[{who}] {what} must be an int or a sequence of ints, not "
                        f"{type(dims).__name__}") from None


def _int_range(dtype):
    """(lowest, highest) value of an integer dtype."""
    if dtype == _C.uint8:
        return 0, 255
    bits = _C.empty(0, dtype=dtype).element_size() * 8
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _output_fits(shape, dtype, who, what):
    """Raise, naming who and what, when an output of this shape and dtype
    cannot be made (too many elements, or more bytes than memory): callers
    check before work that grows with the output (a Python loop over its
    windows or indices)."""
    try:
        _C.empty(shape, dtype=dtype)
    except (MemoryError, OverflowError, ValueError) as e:
        raise type(e)(f"[{who}] {what} gives an output {tuple(shape)} that cannot be made: "
                      f"{e}") from None


def _number(x, who, what):
    """x as a float; TypeError naming who unless it is a real number."""
    if isinstance(x, (str, bytes, complex)) or not hasattr(x, "__float__"):
        raise TypeError(f"[{who}] {what} must be a number, not {type(x).__name__}")
    return float(x)


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """p-norm of a tensor, or - given a list of tensors - the 2-norm of all
    their elements together (one pass; as used for gradient clipping)."""
    if isinstance(input, (list, tuple)):
        return _C.norm_list(list(input))
    _tensors("norm", input=input)
    if dtype is not None:
        input = input.cast(dtype)
    if p == "fro" or p is None:
        p = 2.0
    return _C.norm(input, p, dim, keepdim)


def fused_norm(tensors):
    """The 2-norm of all elements of a list of tensors, in one pass."""
    if isinstance(tensors, _C.Tensor) or not hasattr(tensors, "__iter__"):
        raise TypeError(f"[fused_norm] tensors must be a sequence of Tensors, not {type(tensors).__name__}")
    return _C.norm_list(list(tensors))


def split(tensor, split_size_or_sections, dim=0):
    """Views of consecutive pieces: a size per piece, or a list of sizes."""
    if isinstance(split_size_or_sections, int):
        return _C._split(tensor, split_size_or_sections, dim)
    _tensors("split", tensor=tensor)
    sizes = _dims(split_size_or_sections, "split", "split_size_or_sections")
    if tensor.ndim == 0:
        raise IndexError("[split] a 0-d tensor cannot be split")
    total = tensor.shape[_dim(dim, tensor.ndim, "split")]
    if _int_sum(sizes) != total:
        raise ValueError(f"[split] sizes {sizes} do not sum to the size {total} of dim {dim}")
    out, start = [], 0
    for s in sizes:
        out.append(_C.narrow(tensor, dim, start, s))
        start += s
    return tuple(out)


def _int_sum(xs):
    s = 0
    for x in xs:
        s += x
    return s


def unbind(input, dim=0):
    """The slices along dim, as a tuple of views."""
    _tensors("unbind", input=input)
    if input.ndim == 0:
        raise IndexError("[unbind] dimension specified as 0 but tensor has no dimensions")
    n = input.shape[_dim(dim, input.ndim, "unbind")]
    return tuple(_C.select(input, dim, i) for i in range(n))


def _bool_reduce(input, dim, keepdim, want_all, who):
    _tensors(who, input=input)
    b = input if input.dtype == _C.bool else _C.ne(input, 0)
    if want_all:  # no zero anywhere (the sum checks dim)
        return _C.eq(_C.sum(_C.cast(_C.logical_not(b), _C.int64), dim, keepdim), 0)
    return _C.gt(_C.sum(_C.cast(b, _C.int64), dim, keepdim), 0)


def all(input, dim=None, keepdim=False):
    """True where every element (along dim) is non-zero."""
    return _bool_reduce(input, dim, keepdim, True, "all")


def any(input, dim=None, keepdim=False):
    """True where some element (along dim) is non-zero."""
    return _bool_reduce(input, dim, keepdim, False, "any")


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    _tensors("isclose", input=input)
    # integers in float64: a uint8 difference wraps around (4 - 5 = 255), and
    # |x| of an integer type's least value (int8 -128) wraps to itself
    ref = other if isinstance(other, _C.Tensor) else _C.tensor(other)
    if not ref.is_floating_point():
        ref = _C.cast(ref, _C.float64)
    a, b = input, other
    if not input.is_floating_point():
        a, b = _C.cast(input, _C.float64), ref if isinstance(other, _C.Tensor) else other
    diff = _C.abs(_C.sub(a, b))
    tol = _C.add(_C.mul(_C.abs(ref), rtol), atol)
    # an infinite difference (an infinity against anything but itself) is never close
    close = _C.logical_and(_C.le(diff, tol), _C.logical_not(_C.isinf(diff)))
    close = _C.logical_or(close, _C.eq(input, other))  # infinities of the same sign
    if equal_nan:
        close = _C.logical_or(close, _C.logical_and(_C.isnan(input), _C.isnan(other)))
    return close


def isfinite(input):
    """True where an element is neither infinite nor NaN (every integer and
    bool element is finite)."""
    _tensors("isfinite", input=input)
    if not input.is_floating_point():
        return _C.ne(input, input) == _C.ne(input, input)  # all True, input's shape
    return _C.logical_not(_C.logical_or(_C.isnan(input), _C.isinf(input)))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(all(isclose(input, other, rtol, atol, equal_nan)))


def equal(input, other):
    """True if both tensors have the same shape and elements."""
    _tensors("equal", input=input, other=other)
    return tuple(input.shape) == tuple(other.shape) and bool(all(_C.eq(input, other)))


def mm(input, mat2, *, out=None):
    _tensors("mm", input=input, mat2=mat2)
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"[mm] expected 2-D tensors, got {input.ndim}-D and {mat2.ndim}-D")
    return _C.matmul(input, mat2, out=out)


def bmm(input, mat2, *, out=None):
    _tensors("bmm", input=input, mat2=mat2)
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"[bmm] expected 3-D tensors, got {input.ndim}-D and {mat2.ndim}-D")
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"[bmm] batch sizes differ ({input.shape[0]} and {mat2.shape[0]})")
    return _C.matmul(input, mat2, out=out)


def mv(input, vec, *, out=None):
    _tensors("mv", input=input, vec=vec)
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"[mv] expected a 2-D and a 1-D tensor, got {input.ndim}-D and {vec.ndim}-D")
    return _C.matmul(input, vec, out=out)


def dot(input, other, *, out=None):
    _tensors("dot", input=input, other=other)
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"[dot] expected 1-D tensors, got {input.ndim}-D and {other.ndim}-D")
    return _C.matmul(input, other, out=out)


def outer(input, vec2):
    return _C.mul(_C.unsqueeze(input, 1), _C.unsqueeze(vec2, 0))


clip = _C.clamp
concat = _C.cat
concatenate = _C.cat
true_divide = _C.div
multiply = _C.mul
subtract = _C.sub
divide = _C.div
negative = _C.neg


def swapaxes(input, axis0, axis1):
    return _C.transpose(input, axis0, axis1)


def movedim(input, source, destination):
    _tensors("movedim", input=input)
    nd = input.ndim
    src = _dims(source, "movedim", "source")
    dst = _dims(destination, "movedim", "destination")
    if len(src) != len(dst):
        raise ValueError("[movedim] source and destination must have the same number of dims")
    lo, hi = (-nd, nd - 1) if nd else (-1, 0)
    for d in src + dst:
        if not lo <= d <= hi:
            raise IndexError(f"[movedim] dimension out of range (expected to be in range of "
                             f"[{lo}, {hi}], but got {d})")
    src = [s % nd if nd else 0 for s in src]
    dst = [d % nd if nd else 0 for d in dst]
    for what, ds in (("source", src), ("destination", dst)):
        if len(set(ds)) != len(ds):
            raise ValueError(f"[movedim] repeated dim in `{what}` ({ds})")
    if nd == 0:
        return _C.permute(input, [])
    order = [None] * nd
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(nd) if i not in src)
    order = [o if o is not None else next(rest) for o in order]
    return _C.permute(input, order)


def square(input):
    return _C.mul(input, input)


def log2(input):
    return _C.div(_C.log(input), _math.log(2.0))


def log10(input):
    return _C.div(_C.log(input), _math.log(10.0))


def exp2(input):
    return _C.exp(_C.mul(input, _math.log(2.0)))


def _floating(input, who):
    """input, or for an integer tensor its conversion to the default float
    dtype (a uint8 tensor's negation wraps around)."""
    _tensors(who, input=input)
    return input if input.is_floating_point() else _C.cast(input, _C.get_default_dtype())


def sinh(input):
    input = _floating(input, "sinh")
    return _C.mul(_C.sub(_C.exp(input), _C.exp(_C.neg(input))), 0.5)


def cosh(input):
    input = _floating(input, "cosh")
    return _C.mul(_C.add(_C.exp(input), _C.exp(_C.neg(input))), 0.5)


def tan(input):
    return _C.div(_C.sin(input), _C.cos(input))


def argsort(input, dim=-1, descending=False):
    return _C.sort(input, dim, descending).indices


def masked_select(input, mask):
    """The elements of input where mask (broadcast with it) is true, as a
    1-D tensor. A uint8 mask counts nonzero as true, as PyTorch (which
    deprecates it) does."""
    _tensors("masked_select", input=input, mask=mask)
    if mask.dtype not in (_C.bool, _C.uint8):
        raise TypeError(f"[masked_select] mask must be a bool (or uint8) tensor, got {mask.dtype}")
    if mask.dtype == _C.uint8:
        import warnings
        warnings.warn("[masked_select] a uint8 mask counts nonzero as true, as in PyTorch, which "
                      "deprecates it; use a bool mask", UserWarning, stacklevel=2)
        mask = _C.ne(mask, 0)
    from ._torch_ops import broadcast_shapes
    shape = broadcast_shapes(input.shape, mask.shape)
    return input.broadcast_to(shape)[mask.broadcast_to(shape)]


def count_nonzero(input, dim=None):
    return _C.sum(_C.cast(_C.ne(input, 0), _C.int64), dim)


def atleast_1d(input):
    _tensors("atleast_1d", input=input)
    return _C.reshape(input, [1]) if input.ndim == 0 else input


def lerp(input, end, weight):
    """input + weight (end - input) for weights under 0.5, else
    end - (end - input) (1 - weight), as PyTorch 1.13: exactly end at
    weight 1, and an infinite end point kept where the other form gives
    inf - inf (a quantile between -inf and a finite value)."""
    low = (_C.bfloat16, _C.float16)
    if isinstance(input, _C.Tensor) and input.dtype in low and isinstance(end, _C.Tensor) and \
            end.dtype == input.dtype and (not isinstance(weight, _C.Tensor) or weight.dtype == input.dtype):
        # one rounding to the low dtype, as PyTorch computes it, not one per op
        w = weight.float() if isinstance(weight, _C.Tensor) else weight
        return lerp(input.float(), end.float(), w).to(input.dtype)
    diff = _C.sub(end, input)
    if not isinstance(weight, _C.Tensor):
        w = _number(weight, "lerp", "weight")
        return _C.add(input, _C.mul(diff, w)) if w < 0.5 else _C.sub(end, _C.mul(diff, 1.0 - w))
    return _C.where(_C.lt(weight, 0.5), _C.add(input, _C.mul(diff, weight)),
                    _C.sub(end, _C.mul(diff, _C.sub(1.0, weight))))


def diag(input, diagonal=0):
    _tensors("diag", input=input)
    diagonal = _int(diagonal, "diag", "diagonal")
    if input.ndim == 1:
        n = input.shape[0] + (diagonal if diagonal > 0 else -diagonal)
        out = _C.zeros(n, n, dtype=input.dtype)
        idx = _C.arange(input.shape[0])
        rows = _C.add(idx, -diagonal if diagonal < 0 else 0)
        cols = _C.add(idx, diagonal if diagonal > 0 else 0)
        out[rows, cols] = input
        return out
    if input.ndim == 2:
        r, c = input.shape
        start_r, start_c = (0, diagonal) if diagonal >= 0 else (-diagonal, 0)
        n = max(0, min(r - start_r, c - start_c))
        idx = _C.arange(n)
        return input[_C.add(idx, start_r), _C.add(idx, start_c)]
    raise RuntimeError(f"[diag] expected a 1-D or 2-D tensor, got {input.ndim}-D")


def trace(input):
    _tensors("trace", input=input)
    if input.ndim != 2:
        raise RuntimeError(f"[trace] expected a matrix, got a {input.ndim}-D tensor")
    return _C.sum(diag(input))


def flatten(input, start_dim=0, end_dim=-1):
    return _C.flatten(input, start_dim, end_dim)


def repeat_interleave(input, repeats, dim=None):
    _tensors("repeat_interleave", input=input)
    if dim is None:
        input, dim = _C.reshape(input, [-1]), 0
    if not isinstance(repeats, int):
        raise NotImplementedError("[repeat_interleave] only an int number of repeats is supported")
    if repeats < 0:
        raise ValueError(f"[repeat_interleave] repeats must be non-negative, got {repeats}")
    if input.ndim == 0:
        input = _C.reshape(input, [1])
    d = _dim(dim, input.ndim, "repeat_interleave")
    x = _C.unsqueeze(input, d + 1)
    shape = list(x.shape)
    shape[d + 1] = repeats
    new = list(input.shape)
    new[d] *= repeats
    return _C.reshape(x.expand(*shape), new)


def sigmoid_(input):
    _tensors("sigmoid_", input=input)
    return input.copy_(_C.sigmoid(input))


def relu_(input):
    _tensors("relu_", input=input)
    return input.copy_(_C.relu(input))


def abs_(input):
    _tensors("abs_", input=input)
    return input.copy_(_C.abs(input))


numel = _C.numel


def randperm(n, *, dtype=None, requires_grad=False, layout=None, device=None, pin_memory=False):
    """A random permutation of 0..n-1 from the musa generator (seeded by
    musa.manual_seed)."""
    _C._factory_options("randperm", device, layout, pin_memory)
    perm = _C.sort(_C.rand(n, dtype=_C.float64)).indices
    if dtype is not None and dtype is not _C.int64:
        perm = _C.cast(perm, dtype)
    return perm
