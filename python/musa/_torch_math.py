"""PyTorch's elementwise functions written over the C ops: fused
multiply-adds (addmm, addcmul, ...), math (atan2, hypot, xlogy, logit, fmax,
nan_to_num, ...), aliases and the dtype helpers. Re-exported by
_torch_ops."""
import math as _math

from . import _C
from . import _functions as _F
from ._functions import _number, _tensors

__all__ = [
    "addmm",
    "addbmm",
    "baddbmm",
    "addmv",
    "addr",
    "addcmul",
    "addcdiv",
    "atan2",
    "arctan2",
    "hypot",
    "clamp_min",
    "clamp_max",
    "deg2rad",
    "rad2deg",
    "frac",
    "sgn",
    "signbit",
    "positive",
    "float_power",
    "ldexp",
    "xlogy",
    "logit",
    "heaviside",
    "fmax",
    "fmin",
    "nan_to_num",
    "isposinf",
    "isneginf",
    "isreal",
    "is_complex",
    "is_nonzero",
    "is_same_size",
    "sinc",
    "absolute",
    "negative",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "not_equal",
    "promote_types",
    "result_type",
    "can_cast",
]


def _t(x, like=None):
    """x as a tensor (numbers take like's dtype when given)."""
    if isinstance(x, _C.Tensor):
        return x
    return _C.tensor(x, dtype=like.dtype) if like is not None else _C.tensor(x)


def _scaled(x, s):
    return x if s == 1 else x * s



# ---- fused multiply-adds ----

def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2)."""
    _tensors("addmm", input=input, mat1=mat1, mat2=mat2)
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise _C.InvalidArgumentError(f"[addmm] mat1 and mat2 must be matrices, got shapes "
                                      f"{tuple(mat1.shape)} and {tuple(mat2.shape)}")
    return _add_scaled(input, _C.matmul(mat1, mat2), beta, alpha, blas=True)


def _scalar_for(x, like, who, what, strict=False):
    """Number x as a factor of tensor like: a float, or for an integer tensor
    an int, truncated as PyTorch 1.13 does (0.5 * an int8 tensor is 0 * it;
    a float factor would make the result float). strict (addr, as in
    PyTorch): a float factor of an integer tensor is an error."""
    if strict and isinstance(x, float) and not (like.is_floating_point() or like.is_complex()):
        raise _C.InvalidArgumentError(f"[{who}] for integral input tensors, argument {what} "
                                      f"must not be a floating point number, got {x}")
    x = _number(x, who, what)
    if like.is_floating_point() or like.is_complex():
        return x
    if not _math.isfinite(x):
        raise OverflowError(f"[{who}] {what} {x} cannot be converted to {like.dtype} without "
                            f"overflow")
    return int(x)


def _add_scaled(input, product, beta, alpha, blas=False, who="addmm", strict=False):
    """beta * input + alpha * product. As in PyTorch, beta = 0 ignores input,
    and for the BLAS-backed ops (blas: addmm, addmv, addbmm) alpha = 0 ignores
    the product: NaNs in the ignored side do not propagate (its gradient is
    zero). Integer tensors take the factors truncated (_scalar_for)."""
    beta = _scalar_for(beta, product, who, "beta", strict)
    alpha = _scalar_for(alpha, product, who, "alpha", strict)
    if blas and alpha == 0:
        out = _C.where(_C.zeros((), dtype=_C.bool), product, 0)  # a recorded constant
    else:
        out = _scaled(product, alpha)
    if beta == 0:
        return out + _C.zeros_like(input)
    return _scaled(input, beta) + out


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * sum_b (batch1[b] @ batch2[b])."""
    _tensors("addbmm", input=input, batch1=batch1, batch2=batch2)
    prod = _F.bmm(batch1, batch2)
    # integer sums widen to int64; the products' dtype keeps torch's (wrapping) result
    return _add_scaled(input, prod.sum(0).to(prod.dtype), beta, alpha, blas=True,
                       who="addbmm")


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2), per batch."""
    _tensors("baddbmm", input=input, batch1=batch1, batch2=batch2)
    return _add_scaled(input, _F.bmm(batch1, batch2), beta, alpha, who="baddbmm")


def addmv(input, mat, vec, *, beta=1, alpha=1):
    _tensors("addmv", input=input, mat=mat, vec=vec)
    return _add_scaled(input, _F.mv(mat, vec), beta, alpha, blas=True, who="addmv")


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2), the product computed in the
    common dtype of all three, as PyTorch does (bfloat16 vectors with a
    float32 input give float32 products, not bfloat16 ones widened)."""
    _tensors("addr", input=input, vec1=vec1, vec2=vec2)
    input, vec1, vec2 = _common(input, vec1, vec2)
    return _add_scaled(input, _F.outer(vec1, vec2), beta, alpha, who="addr", strict=True)


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2."""
    _tensors("addcmul", input=input, tensor1=tensor1, tensor2=tensor2)
    input, tensor1, tensor2 = _common(input, tensor1, tensor2)
    value = _scalar_for(value, input, "addcmul", "value")
    return input + _scaled(tensor1 * tensor2, value)


def _common(*tensors):
    """The tensors in their common dtype (the product of two float16 factors
    is rounded in float16 otherwise, where PyTorch computes in the result's
    dtype)."""
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = promote_types(dtype, t.dtype)
    return tuple(t.to(dtype) for t in tensors)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2."""
    _tensors("addcdiv", input=input, tensor1=tensor1, tensor2=tensor2)
    if not tensor1.is_floating_point() and not tensor2.is_floating_point():
        raise TypeError("[addcdiv] integer division with addcdiv is no longer supported; use "
                        "floating tensors")
    input, tensor1, tensor2 = _common(input, tensor1, tensor2)
    return input + _scaled(tensor1 / tensor2, _number(value, "addcdiv", "value"))


# ---- elementwise math ----

def atan2(input, other):
    """The angle of the point (other, input), in (-pi, pi]; d/dy = x/r^2,
    d/dx = -y/r^2 (0 at the origin)."""
    _tensors("atan2", input=input)
    y, x = input, _t(other, input)
    if not y.is_floating_point():
        y = y.float()
    zero_x = _C.eq(x, 0)
    base = _C.atan(y / _C.where(zero_x, 1.0, x))
    half = _C.copysign(_C.full_like(base, _math.pi / 2), y)
    full = _C.copysign(_C.full_like(base, _math.pi), y)
    # on the y axis: +-pi/2; at the origin 0, or +-pi from a negative zero x
    origin = _C.where(signbit(x if x.is_floating_point() else x.float()), full, _C.copysign(_C.zeros_like(base), y))
    at_axis = _C.where(_C.eq(y, 0), origin, half)
    left = base + full  # x < 0: the angle's other half-plane
    return _C.where(zero_x, at_axis, _C.where(_C.lt(x, 0), left, base))


arctan2 = atan2


def hypot(input, other):
    """sqrt(input^2 + other^2) in the promoted dtype (a bfloat16 input
    squared in bfloat16 lost digits against a float32 other), as
    m sqrt(1 + (n / m)^2) with m, n the larger and smaller magnitude, as
    libm's hypot: no overflow for values past the square root of the
    dtype's largest (1e20 in float32 gave inf) and no underflow below that
    of its smallest (hypot(1e-30, 0) gave 0); inf if either is infinite."""
    _tensors("hypot", input=input)
    dt = result_type(input, other)
    x = input if input.dtype == dt or not dt.is_floating_point else input.to(dt)
    y = _t(other, x)
    y = y if y.dtype == dt or not dt.is_floating_point else y.to(dt)
    ax, ay = _C.abs(x), _C.abs(y)
    m, n = _C.maximum(ax, ay), _C.minimum(ax, ay)
    r = n / _C.where(_C.eq(m, 0), 1.0, m)
    h = m * _C.sqrt(r * r + 1.0)
    return _C.where(_C.isinf(ax) | _C.isinf(ay), float("inf"), h)


def clamp_min(input, min):
    _tensors("clamp_min", input=input)
    return _C.clamp(input, min=min)


def clamp_max(input, max):
    _tensors("clamp_max", input=input)
    return _C.clamp(input, max=max)


def deg2rad(input):
    _tensors("deg2rad", input=input)
    return input * (_math.pi / 180.0)


def rad2deg(input):
    _tensors("rad2deg", input=input)
    return input * (180.0 / _math.pi)


def frac(input):
    """input - trunc(input), with input's sign."""
    _tensors("frac", input=input)
    return input - _C.trunc(input)


def sgn(input):
    _tensors("sgn", input=input)
    return _C.sign(input)


def signbit(input):
    """Whether the sign bit is set (True for -0.0)."""
    _tensors("signbit", input=input)
    if not input.is_floating_point():
        return _C.lt(input, 0)
    return _C.lt(_C.copysign(_C.ones_like(input), input), 0)


def positive(input):
    _tensors("positive", input=input)
    if input.dtype == _C.bool:
        raise TypeError("[positive] the positive operation is not supported on bool tensors")
    return input


def float_power(input, exponent):
    """input ** exponent in float64."""
    if isinstance(input, _C.Tensor):
        input = input.to(_C.float64)
    else:
        input = _C.tensor(_number(input, "float_power", "input"), dtype=_C.float64)
    if isinstance(exponent, _C.Tensor):
        exponent = exponent.to(_C.float64)
    else:
        exponent = _number(exponent, "float_power", "exponent")
    return _C.pow(input, exponent)


def ldexp(input, other):
    """input * 2 ** other, the power in other's dtype (a float one; else
    the default) and the product in the promoted one, as in PyTorch."""
    _tensors("ldexp", input=input)
    x = input if input.is_floating_point() else input.float()
    return x * _C.pow(2.0, _t(other, x))


def xlogy(input, other):
    """input * log(other), and 0 where input is 0 (unless other is NaN)."""
    # both in the result dtype first: log(y) in y's own dtype lost digits
    # (bf16); a number promotes as a number (-1 with a bool x is not True)
    dt = result_type(input, other) if isinstance(input, _C.Tensor) or isinstance(other, _C.Tensor) \
        else _C.float32
    dt = dt if dt.is_floating_point else _C.float32
    x = input.to(dt) if isinstance(input, _C.Tensor) else _C.tensor(input, dtype=dt)
    y = other.to(dt) if isinstance(other, _C.Tensor) else _C.tensor(other, dtype=dt)
    log_y = _C.log(y)
    prod = x * log_y
    masked = _C.logical_and(_C.eq(x, 0), _C.logical_not(_C.isnan(y)))
    out = _C.where(masked, _C.zeros_like(prod), prod)
    if x.requires_grad:  # PyTorch's d/dx is log(y) at x = 0 too: a zero-valued term carries it
        out = out + (x - x.detach()) * _C.where(_C.logical_and(masked, _F.isfinite(log_y)), log_y, 0.0)
    return out


def logit(input, eps=None):
    """log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given."""
    _tensors("logit", input=input)
    p = input if input.is_floating_point() else input.float()
    if eps is not None:
        eps = _number(eps, "logit", "eps")
        lo, hi = _C.tensor(eps, dtype=p.dtype), _C.tensor(1.0 - eps, dtype=p.dtype)
        # PyTorch's order: below eps gives eps, else above 1 - eps gives 1 - eps. With eps > 0.5
        # the bounds cross, and clamp (max, then min) gave 1 - eps everywhere (fuzz-py seed 16824)
        p = _C.where(_C.lt(p, lo), lo, _C.where(_C.gt(p, hi), hi, p))
    return _C.log(p / (1.0 - p))


def heaviside(input, values):
    """0 where input < 0, values where input == 0, 1 where input > 0."""
    _tensors("heaviside", input=input, values=values)
    if input.dtype != values.dtype:
        raise TypeError(f"[heaviside] input ({input.dtype}) and values ({values.dtype}) must have the "
                        f"same dtype")
    one, zero = _C.ones_like(input), _C.zeros_like(input)
    return _C.where(_C.eq(input, 0), values.expand_as(input) if values.ndim else values,
                    _C.where(_C.gt(input, 0), one, zero))


def _nan_ignoring(input, other, pick):
    _tensors(pick.__name__, input=input)
    other = _t(other, input)
    best = pick(input, other)
    if not (input.is_floating_point() or other.is_floating_point()):
        return best
    return _C.where(_C.isnan(input), other, _C.where(_C.isnan(other), input, best))


def fmax(input, other):
    """Elementwise maximum that ignores a NaN when the other value is not."""
    return _nan_ignoring(input, other, _C.maximum)


def fmin(input, other):
    return _nan_ignoring(input, other, _C.minimum)


def _finfo(dtype):
    import numpy as np
    names = {_C.float32: np.float32, _C.float64: np.float64, _C.float16: np.float16}
    if dtype == _C.bfloat16:
        return -3.3895313892515355e38, 3.3895313892515355e38
    info = np.finfo(names[dtype])
    return float(info.min), float(info.max)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced (by 0 and the dtype's largest and
    smallest finite values unless given)."""
    _tensors("nan_to_num", input=input)
    if not input.is_floating_point():
        return input.clone()
    lo, hi = _finfo(input.dtype)
    hi = hi if posinf is None else _number(posinf, "nan_to_num", "posinf")
    lo = lo if neginf is None else _number(neginf, "nan_to_num", "neginf")
    out = _C.where(_C.isnan(input), _number(nan, "nan_to_num", "nan"), input)
    out = _C.where(isposinf(input), hi, out)
    return _C.where(isneginf(input), lo, out)


def isposinf(input):
    _tensors("isposinf", input=input)
    return _C.logical_and(_C.isinf(input), _C.gt(input, 0))


def isneginf(input):
    _tensors("isneginf", input=input)
    return _C.logical_and(_C.isinf(input), _C.lt(input, 0))


def isreal(input):
    """True everywhere: musa has no complex dtypes."""
    _tensors("isreal", input=input)
    return _C.ones_like(input, dtype=_C.bool)


def is_complex(input):
    _tensors("is_complex", input=input)
    return False


def is_nonzero(input):
    _tensors("is_nonzero", input=input)
    if input.numel() != 1:
        raise RuntimeError(f"[is_nonzero] Boolean value of Tensor with {'no values' if not input.numel() else 'more than one value'} is ambiguous")
    return bool(input.reshape(()).item() != 0)


def is_same_size(input, other):
    _tensors("is_same_size", input=input, other=other)
    return tuple(input.shape) == tuple(other.shape)


def sinc(input):
    """sin(pi x) / (pi x), 1 at 0."""
    _tensors("sinc", input=input)
    x = input if input.is_floating_point() else input.float()
    zero = _C.eq(x, 0)
    px = _C.where(zero, 1.0, x) * _math.pi
    return _C.where(zero, _C.ones_like(x), _C.sin(px) / px)


def _alias(name, op, binary):
    """PyTorch's other spelling of an op: the op under name, whose errors
    name it."""
    if binary:
        def fn(input, other):
            _tensors(name, input=input)
            return op(input, other)
    else:
        def fn(input):
            _tensors(name, input=input)
            return op(input)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name}: the same as {op.__name__}."
    return fn


absolute, negative = _alias("absolute", _C.abs, False), _alias("negative", _C.neg, False)
greater, greater_equal = _alias("greater", _C.gt, True), _alias("greater_equal", _C.ge, True)
less, less_equal = _alias("less", _C.lt, True), _alias("less_equal", _C.le, True)
not_equal = _alias("not_equal", _C.ne, True)



# ---- dtypes ----

def promote_types(type1, type2):
    """The dtype two tensors of these dtypes compute in."""
    return (_C.zeros((), dtype=type1) + _C.zeros((), dtype=type2)).dtype


def result_type(tensor1, tensor2):
    """The dtype of tensor1 + tensor2 (numbers take part as PyTorch's weak
    scalars, and 0-d tensors below tensors with dims of their category)."""
    def probe(x, what):  # an empty stand-in: the dtype, and whether it has dims
        if isinstance(x, _C.Tensor):
            return _C.zeros((0,) if x.ndim else (), dtype=x.dtype)
        if not isinstance(x, (int, float)):  # (bool is an int)
            raise TypeError(f"[result_type] {what} must be a Tensor or a number, not {type(x).__name__}")
        return x
    a, b = probe(tensor1, "tensor1"), probe(tensor2, "tensor2")
    if not isinstance(a, _C.Tensor) and not isinstance(b, _C.Tensor):
        a = _C.tensor(a)
    return (a + b).dtype


def can_cast(from_, to):
    """Whether PyTorch's type promotion allows from_ to become to (no float
    to integer, no non-bool to bool)."""
    f_float = from_ in (_C.float16, _C.bfloat16, _C.float32, _C.float64)
    t_float = to in (_C.float16, _C.bfloat16, _C.float32, _C.float64)
    if f_float and not t_float:
        return False
    if from_ != _C.bool and to == _C.bool:
        return False
    return True
