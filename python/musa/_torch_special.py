"""Special functions of PyTorch's namespace written over the C ops: erfinv,
lgamma, digamma, polygamma (trigamma is digamma's derivative), the cross
product, frexp and angle. Each is a Tensor method too (_tensor.py);
musa.special gathers them under PyTorch's special names.

The special functions compute in float64 (float32, bfloat16 and float16
inputs are rounded once at the end) and are autograd Functions: their
derivatives are closed forms of the result (erfinv), or the next function
of the family (lgamma -> digamma -> trigamma). Against PyTorch in float64:
lgamma within 7e-15, digamma 1e-13 (relative, absolute below 1); erfinv in
its far tails and trigamma are closer to the exact values than PyTorch's
(tests in test_torch_ops.py)."""
import collections as _collections
import math as _math

from . import _C
from ._functions import _int, _tensors
from .autograd import Function as _Function

__all__ = ["erfinv", "lgamma", "digamma", "polygamma", "cross", "frexp", "angle"]

_FLOATS = (_C.float32, _C.float64, _C.bfloat16, _C.float16)
_FrexpResult = _collections.namedtuple("frexp", ["mantissa", "exponent"])


def _as_f64(input, who):
    _tensors(who, input=input)
    if input.dtype not in _FLOATS:
        if input.dtype == _C.bool:
            raise TypeError(f"[{who}] expected a real tensor, got {input.dtype}")
        return input.to(_C.float64), _C.get_default_dtype()  # integers: the default float dtype
    return input.to(_C.float64), input.dtype


def _poly(w, coefs):
    p = _C.zeros_like(w) + coefs[0]
    for c in coefs[1:]:
        p = p * w + c
    return p


# Giles (2010), "Approximating the erfinv function": about 1e-7 relative
# over float32's range, refined below by Newton steps
_GILES_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
               -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _erfinv_f64(y):
    a = _C.abs(y)
    inside = _C.lt(a, 1.0)
    safe = _C.where(inside, a, 0.5)  # |y| >= 1 and NaN: any value, replaced at the end
    w = -_C.log((1.0 - safe) * (1.0 + safe))
    central = _poly(w - 2.5, _GILES_CENTRAL)
    tail = _poly(_C.sqrt(w) - 3.0, _GILES_TAIL)
    z = _C.where(_C.lt(w, 5.0), central, tail) * safe
    slope = 2.0 / _math.sqrt(_math.pi)
    tail_side = _C.gt(safe, 0.5)
    log_rest = _C.log(1.0 - safe)  # exact 1 - y there (Sterbenz)
    for _ in range(4):
        # Newton on erf(z) = y in the middle; on log erfc(z) = log(1 - y) in
        # the tails, nearly linear there where erfc itself is exponentially
        # flat (Giles' polynomial is meant for float32's range of y)
        density = slope * _C.exp(-z * z)
        ec = _C.erfc(z)
        step_tail = (_C.log(ec) - log_rest) * ec / density
        step_mid = (safe - _C.erf(z)) / density
        z = z + _C.where(tail_side, step_tail, step_mid)
    z = _C.where(inside, z, _C.where(_C.eq(a, 1.0), float("inf"), float("nan")))
    return _C.copysign(z, y)


class _Erfinv(_Function):
    @staticmethod
    def forward(ctx, y):
        y64, dt = _as_f64(y, "erfinv")
        out = _erfinv_f64(y64).to(dt)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (_C.exp(out * out) * (_math.sqrt(_math.pi) / 2))


def erfinv(input):
    """The inverse of erf on (-1, 1); +-inf at +-1, NaN outside."""
    return _Erfinv.apply(input)


# Lanczos (g = 7, 9 terms), for x >= 0.5; reflection below
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)


def _lgamma_right(x):  # x >= 0.5
    xm = x - 1.0
    s = _C.zeros_like(x) + _LANCZOS[0]
    for i, c in enumerate(_LANCZOS[1:], 1):
        s = s + c / (xm + i)
    t = xm + 7.5
    return 0.5 * _math.log(2 * _math.pi) + (xm + 0.5) * _C.log(t) - t + _C.log(s)


def _sin_pi_abs(x):
    """|sin(pi x)| with x reduced to [-0.5, 0.5] first (exact), so large
    arguments keep their digits and integers give exactly 0."""
    return _C.abs(_C.sin(_math.pi * (x - _C.round(x))))


def _lgamma_f64(x):
    left = _C.lt(x, 0.5)
    xr = _C.where(left, 1.0 - x, x)
    finite = _C.lt(_C.abs(xr), float("inf"))
    right = _C.where(finite, _lgamma_right(_C.where(finite, xr, 1.0)), xr)  # +inf -> inf, NaN -> NaN
    out = _C.where(left, _math.log(_math.pi) - _C.log(_sin_pi_abs(x)) - right, right)
    # lgamma(1) = lgamma(2) = 0 exactly, as libm gives; -inf: inf
    out = _C.where(_C.eq(x, 1.0) | _C.eq(x, 2.0), 0.0, out)
    return _C.where(_C.eq(x, float("-inf")), float("inf"), out)


def _psi_series(x, order):
    """digamma (order 0) or trigamma (1) for x >= 0.5: the recurrence up to
    x + 8, then the asymptotic series there."""
    acc = _C.zeros_like(x)
    for _ in range(8):
        acc = acc + (1.0 / x if order == 0 else 1.0 / (x * x))
        x = x + 1.0
    r = 1.0 / (x * x)
    if order == 0:
        tail = r * (1 / 12 - r * (1 / 120 - r * (1 / 252 - r * (1 / 240 - r * (1 / 132)))))
        return _C.log(x) - 0.5 / x - tail - acc
    tail = (1.0 + (0.5 + (1 / 6 - r * (1 / 30 - r * (1 / 42 - r * (1 / 30)))) / x) / x) / x
    return tail + acc


def _psi_f64(x, order):
    left = _C.lt(x, 0.5)
    finite = _C.lt(_C.abs(x), float("inf"))
    xr = _C.where(left, 1.0 - x, x)
    right = _psi_series(_C.where(finite, xr, 1.0), order)
    s = _C.sin(_math.pi * (x - _C.round(x)))  # sign and size of sin(pi x), exact reduction
    sign = 1.0 - 2.0 * _C.remainder(_C.round(x), 2.0)  # (-1)^round(x)
    if order == 0:  # psi(x) = psi(1 - x) - pi / tan(pi x)
        cos = _C.cos(_math.pi * (x - _C.round(x))) * sign
        out = _C.where(left, right - _math.pi * cos / (s * sign), right)
        pole = _C.eq(x, 0.0)
        out = _C.where(pole, _C.copysign(_C.zeros_like(x) + float("inf"), -x), out)  # -inf at +0, inf at -0
        out = _C.where(left & _C.eq(s, 0.0) & ~pole, float("nan"), out)  # negative integers
        out = _C.where(_C.eq(x, float("inf")), float("inf"), out)
        return _C.where(_C.eq(x, float("-inf")) | _C.ne(x, x), float("nan"), out)
    out = _C.where(left, _math.pi ** 2 / (s * s) - right, right)  # psi1(1 - x) + psi1(x) = pi^2 / sin^2
    out = _C.where(left & _C.eq(s, 0.0), float("inf"), out)
    out = _C.where(_C.eq(x, float("inf")), 0.0, out)
    return _C.where(_C.eq(x, float("-inf")) | _C.ne(x, x), float("nan"), out)


class _Lgamma(_Function):
    @staticmethod
    def forward(ctx, x):
        x64, dt = _as_f64(x, "lgamma")
        ctx.save_for_backward(x)
        return _lgamma_f64(x64).to(dt)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * digamma(x)


class _Digamma(_Function):
    @staticmethod
    def forward(ctx, x):
        x64, dt = _as_f64(x, "digamma")
        ctx.save_for_backward(x)
        return _psi_f64(x64, 0).to(dt)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * _trigamma(x)


def _trigamma(x):
    x64, dt = _as_f64(x, "polygamma")
    return _psi_f64(x64, 1).to(dt)


def lgamma(input):
    """log |Gamma(x)|: inf at 0 and the negative integers."""
    return _Lgamma.apply(input)


def digamma(input):
    """d/dx lgamma(x): -inf at +0 and inf at -0, NaN at the negative
    integers (as PyTorch)."""
    return _Digamma.apply(input)


def cross(input, other, dim=None):
    """The cross product of 3-vectors along dim (inputs broadcast). dim None:
    the first dim of size 3, as PyTorch's torch.cross (linalg.cross takes
    -1)."""
    _tensors("cross", input=input, other=other)
    from ._torch_index import broadcast_shapes
    shape = list(broadcast_shapes(input.shape, other.shape))
    a, b = input.expand(shape), other.expand(shape)
    if dim is None:
        dims = [d for d, n in enumerate(shape) if n == 3]
        if not dims:
            raise RuntimeError(f"[cross] no dimension of size 3 in input (shapes {tuple(input.shape)} and "
                               f"{tuple(other.shape)})")
        dim = dims[0]
    nd = len(shape)
    dim = _int(dim, "cross", "dim")
    if not -nd <= dim < nd:
        raise IndexError(f"[cross] dim {dim} is out of range for {nd}-D inputs")
    dim %= nd

    def size_at(t):  # t's own size at the broadcast dim (1: broadcast there)
        k = dim - (nd - t.ndim)
        return t.shape[k] if k >= 0 else 1
    if size_at(input) != 3 or size_at(other) != 3:
        raise RuntimeError(f"[cross] inputs dimension {dim} must have length 3, got shapes "
                           f"{tuple(input.shape)} and {tuple(other.shape)}")
    a1, a2, a3 = (a.narrow(dim, k, 1) for k in range(3))
    b1, b2, b3 = (b.narrow(dim, k, 1) for k in range(3))
    return _C.cat([a2 * b3 - a3 * b2, a3 * b1 - a1 * b3, a1 * b2 - a2 * b1], dim)


class _Frexp(_Function):
    """mantissa * 2^exponent = x, the mantissa in [0.5, 1) in magnitude;
    read from the float64 bits (exact for every floating dtype), subnormal
    float64 values scaled by 2^54 first."""

    @staticmethod
    def forward(ctx, x):
        x64 = x.to(_C.float64)
        tiny = _C.logical_and(_C.lt(_C.abs(x64), 2.0 ** -1022), _C.ne(x64, 0.0))
        bits = _C.where(tiny, x64 * 2.0 ** 54, x64).view(_C.int64)
        field = _C.bitwise_and(_C.bitwise_right_shift(bits, 52), 0x7FF)
        e = _C.sub(_C.sub(field, 1022), _C.where(tiny, 54, 0))
        keep = _C.bitwise_not(_C.bitwise_left_shift(_C.full((), 0x7FF, dtype=_C.int64), 52))
        m = _C.bitwise_or(_C.bitwise_and(bits, keep), 1022 << 52).view(_C.float64)
        special = _C.logical_or(_C.eq(x64, 0.0), _C.logical_or(_C.isinf(x64), _C.isnan(x64)))
        m = _C.where(special, x64, m).to(x.dtype)
        e = _C.where(special, 0, e).to(_C.int32)
        ctx.save_for_backward(e)
        ctx.mark_non_differentiable(e)
        return m, e

    @staticmethod
    def backward(ctx, gm, ge):
        (e,) = ctx.saved_tensors
        return gm * _C.pow(2.0, _C.neg(e.to(_C.float64))).to(gm.dtype)


def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2^exponent, the
    mantissa in [0.5, 1) in magnitude (in input's dtype) and the exponent
    int32; 0, inf and NaN give themselves and exponent 0, as in PyTorch."""
    _tensors("frexp", input=input)
    if input.dtype not in _FLOATS:
        raise TypeError(f"[frexp] only floating point tensors are supported, got {input.dtype}")
    return _FrexpResult(*_Frexp.apply(input))


def angle(input):
    """The argument of a real number: pi below 0, 0 from 0 up (either
    sign), NaN for NaN; integers give the default float dtype. Its
    gradient is 0."""
    _tensors("angle", input=input)
    x = input if input.dtype in _FLOATS else input.to(_C.get_default_dtype())
    return _C.where(_C.ne(x, x), x, _C.where(_C.lt(x, 0.0), _math.pi, 0.0)).to(x.dtype)


# B_2j / (2j)! for the Euler-Maclaurin tail of the Hurwitz zeta function
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
              43867 / 798, -174611 / 330, 854513 / 138, -236364091 / 2730)
_EM = tuple(b / _math.factorial(2 * j + 2) for j, b in enumerate(_BERNOULLI))


def _hurwitz_zeta(s, a):
    """zeta(s, a) = sum_k (a + k)^-s for an integer s >= 2 and a >= 0.5
    (float64): ten terms, then Euler-Maclaurin at a + 10 with twelve
    Bernoulli terms."""
    acc = _C.zeros_like(a)
    for _ in range(10):
        acc = acc + _C.pow(a, float(-s))
        a = a + 1.0
    tail = _C.pow(a, float(1 - s)) / (s - 1) + 0.5 * _C.pow(a, float(-s))
    rising, inv2 = float(s), 1.0 / (a * a)
    term = _C.pow(a, float(-s - 1))
    for j, c in enumerate(_EM):
        tail = tail + (c * rising) * term
        rising *= (s + 2 * j + 1) * (s + 2 * j + 2)
        term = term * inv2
    return acc + tail


def _hurwitz_zeta_real(s, q):
    """zeta(s, q) = sum_k (q + k)^-s for float64 tensors s and q (broadcast):
    direct terms until a = q + k is past max(10, s) (so that Euler-Maclaurin's
    Bernoulli terms fall, at most 2000), then its tail with twelve terms.
    Cephes's domain: inf at s = 1, NaN below; for q <= 0, inf at the
    integers and NaN unless s is an integer."""
    from ._torch_index import broadcast_tensors
    s, q = broadcast_tensors(s, q)
    ok = _C.logical_and(_C.gt(s, 1.0), _C.eq(s, s))
    ss = _C.where(ok, s, 2.0)
    hi = float(ss.amax()) if ss.numel() else 2.0
    lo = float(_C.where(_C.eq(q, q), q, 1.0).amin()) if q.numel() else 1.0
    steps = int(min(2000, max(10, _math.ceil(max(hi, 10.0) - min(lo, 0.0)))))
    a, acc = q, _C.zeros_like(q)
    for _ in range(steps):
        acc = acc + _C.pow(a, -ss)
        a = a + 1.0
    tail = _C.pow(a, 1.0 - ss) / (ss - 1.0) + 0.5 * _C.pow(a, -ss)
    rising, inv2, term = ss, 1.0 / (a * a), _C.pow(a, -ss - 1.0)
    for j, c in enumerate(_EM):
        tail = tail + c * rising * term
        rising = rising * (ss + 2 * j + 1) * (ss + 2 * j + 2)
        term = term * inv2
    out = acc + tail
    nonpos = _C.le(q, 0.0)
    q_int = _C.eq(q, _C.floor(q))
    out = _C.where(_C.logical_and(nonpos, q_int), float("inf"), out)
    s_frac = _C.ne(s, _C.floor(s))
    out = _C.where(_C.logical_and(_C.logical_and(nonpos, _C.logical_not(q_int)), s_frac),
                   float("nan"), out)
    out = _C.where(_C.eq(s, 1.0), float("inf"), out)
    return _C.where(_C.logical_or(_C.lt(s, 1.0), _C.ne(s, s) | _C.ne(q, q)), float("nan"), out)


def _cot_derivative(n, x):
    """pi d^n/dx^n cot(pi x), as a polynomial in c = cot(pi x): Q_0 = pi c,
    Q_(k+1) = Q_k'(c) (-pi) (1 + c^2)."""
    q = [0.0, _math.pi]  # coefficients of c^0, c^1, ...
    for _ in range(n):
        d = [k * q[k] for k in range(1, len(q))] + [0.0, 0.0]  # Q', padded
        q = [-_math.pi * (d[k] + (d[k - 2] if k >= 2 else 0.0)) for k in range(len(d))]
    c = _C.cos(_math.pi * (x - _C.round(x))) / _C.sin(_math.pi * (x - _C.round(x)))
    out = _C.zeros_like(x)
    for coef in reversed(q):
        out = out * c + coef
    return out


def _polygamma_f64(n, x):
    if n <= 1:
        return _psi_f64(x, n)
    finite = _C.lt(_C.abs(x), float("inf"))
    sign = -1.0 if n % 2 == 0 else 1.0  # (-1)^(n + 1)
    scale = sign * _math.factorial(n) if n <= 170 else sign * float("inf")
    # below 0.5: zeta(s, x) = sum_k<m (x + k)^-s + zeta(s, x + m), up to 64
    # steps (no cancellation); further down, the reflection formula
    # psi_n(x) = (-1)^n psi_n(1 - x) - pi d^n/dx^n cot(pi x)
    xs = _C.where(finite, x, 1.0)
    acc = _C.zeros_like(x)
    low = float(_C.amin(xs).item()) if xs.numel() else 1.0
    for _ in range(min(64, max(0, _math.ceil(0.5 - low)))):
        below = _C.lt(xs, 0.5)
        acc = acc + _C.where(below, _C.pow(xs, float(-n - 1)), 0.0)
        xs = _C.where(below, xs + 1.0, xs)
    left = _C.lt(xs, 0.5)  # more than 64 steps down
    xr = _C.where(left, 1.0 - x, xs)
    right = (_hurwitz_zeta(n + 1, xr) + _C.where(left, 0.0, acc)) * scale
    # (past n = 170, n! is not a float64: the values are +-inf, the polynomial
    # of degree n + 1 is not needed)
    cot = _cot_derivative(n, x) if n <= 170 and bool(left.any()) else 0.0
    out = _C.where(left, (-sign) * right - cot, right)
    pole = _C.logical_and(_C.lt(x, 0.5), _C.eq(x, _C.round(x)))
    out = _C.where(pole, sign * float("inf"), out)
    out = _C.where(_C.eq(x, float("inf")), 0.0, out)
    return _C.where(_C.eq(x, float("-inf")) | _C.ne(x, x), float("nan"), out)


class _Polygamma(_Function):
    @staticmethod
    def forward(ctx, x, n):
        x64, dt = _as_f64(x, "polygamma")
        ctx.save_for_backward(x)
        ctx.n = n
        return _polygamma_f64(n, x64).to(dt)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * polygamma(ctx.n + 1, x), None


def polygamma(n, input):
    """The n-th derivative of digamma: digamma and trigamma for n = 0 and 1;
    for n >= 2, (-1)^(n+1) n! zeta(n + 1, x) for x >= 0.5 (the Hurwitz zeta
    function) and the reflection formula below. +-inf at the poles (0 and
    the negative integers), 0 at +inf, NaN at -inf."""
    n = _int(n, "polygamma", "n")
    if n < 0:
        raise ValueError(f"[polygamma] n must be non-negative, got {n}")
    if n == 0:
        return digamma(input)
    return _Polygamma.apply(input, n)
