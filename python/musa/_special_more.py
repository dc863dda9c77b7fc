"""More of torch.special, over the C ops, computing in float64 (the input
dtype's result rounded once): the normal distribution's ndtr, log_ndtr and
ndtri, erfcx, xlog1py, entr, multigammaln (torch.mvlgamma), the Hurwitz
zeta function, spherical_bessel_j0. Each is differentiable where PyTorch's
is, by autograd Functions whose derivatives are closed forms."""
import math as _math

from . import _C
from ._functions import _int, _number, _tensors, with_out
from ._torch_math import promote_types as _promote_types
from ._torch_special import _as_f64, _hurwitz_zeta_real, lgamma
from .autograd import Function as _Function

__all__ = ["ndtr", "log_ndtr", "ndtri", "erfcx", "xlog1py", "entr", "multigammaln", "zeta",
           "spherical_bessel_j0"]

_SQRT2 = _math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * _math.log(2 * _math.pi)
_ERFCX_ASYM = 26.0  # beyond, exp(z^2) overflows and the asymptotic series has converged


def _erfcx_f64(z):
    """exp(z^2) erfc(z): directly to 26, then the asymptotic series
    1/(z sqrt(pi)) sum_k (-1)^k (2k - 1)!! / (2 z^2)^k (its terms fall below
    1e-17 by k = 12 there); for z < 0, 2 exp(z^2) - erfcx(-z)."""
    a = z.abs()
    small = _C.lt(a, _ERFCX_ASYM)
    az = _C.where(small, _ERFCX_ASYM, a)  # the series where it converges
    inv = 1.0 / (2.0 * az * az)
    term, s = _C.ones_like(az), _C.ones_like(az)
    for k in range(1, 14):
        term = term * (-(2 * k - 1)) * inv
        s = s + term
    big = s / (az * _math.sqrt(_math.pi))
    pos = _C.where(small, _exp_square(a) * _C.erfc(a), big)
    neg = _C.where(_C.eq(z, float("-inf")), float("inf"), 2.0 * _exp_square(z) - pos)
    return _C.where(_C.lt(z, 0.0), neg, pos)


def _exp_square(z):
    """exp(z^2) without the rounding of z^2 amplified (exp of a rounded 500
    is off by 500 ulp): z split into 26-bit halves (Dekker), so that
    zh^2 is exact and exp(zh^2) exp(2 zh zl + zl^2) keeps a few ulp."""
    c = z * 134217729.0  # 2^27 + 1
    zh = c - (c - z)
    zl = z - zh
    return _C.exp(zh * zh) * _C.exp(zl * (2.0 * zh + zl))


def _unary_f64(who, fn, deriv):
    """An autograd op computing fn in float64 (the result rounded to the
    input's floating dtype), whose derivative is deriv(x, y) in float64."""
    class _Op(_Function):
        @staticmethod
        def forward(ctx, x):
            x64, dt = _as_f64(x, who)
            y = fn(x64)
            ctx.save_for_backward(x64, y)
            ctx.dt = dt
            return y.to(dt)

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * deriv(x, y).to(ctx.dt)
    _Op.__name__ = _Op.__qualname__ = who
    return _Op.apply


_erfcx = _unary_f64("erfcx", _erfcx_f64, lambda x, y: 2.0 * x * y - 2.0 / _math.sqrt(_math.pi))


def erfcx(input):
    """exp(x^2) erfc(x), finite where erfc(x) underflows (x large)."""
    return _erfcx(input)


def ndtr(input):
    """The standard normal CDF, erfc(-x / sqrt 2) / 2."""
    _tensors("ndtr", input=input)
    x = input if input.is_floating_point() else input.to(_C.get_default_dtype())
    return 0.5 * _C.erfc(x / -_SQRT2)


def _log_ndtr_f64(x):
    """log ndtr(x): log1p(-ndtr(-x)) for x >= 0; below, log(erfcx(-x / sqrt 2)
    / 2) - x^2 / 2, which stays finite far into the tail."""
    pos = _C.log1p(-0.5 * _C.erfc(_C.where(_C.lt(x, 0.0), 0.0, x) / _SQRT2))
    xn = _C.where(_C.lt(x, 0.0), x, 0.0)
    neg = _C.log(0.5 * _erfcx_f64(-xn / _SQRT2)) - 0.5 * xn * xn
    return _C.where(_C.lt(x, 0.0), neg, pos)


# phi(x) / ndtr(x), in logs
_log_ndtr = _unary_f64("log_ndtr", _log_ndtr_f64,
                       lambda x, y: _C.exp(-0.5 * x * x - _LOG_SQRT_2PI - y))


def log_ndtr(input):
    """log of the standard normal CDF, accurate in both tails."""
    return _log_ndtr(input)


def _ndtri_f64(p):
    """The x with ndtr(x) = p: sqrt(2) erfinv(2p - 1) to start (or, in the
    tails, sqrt(-2 log p) less its correction), then Newton steps on
    log_ndtr(x) = log p, each from phi / ndtr in logs (quadratic, so four
    reach float64's precision); by symmetry for p > 1/2."""
    from ._torch_special import _erfinv_f64
    upper = _C.gt(p, 0.5)
    q = _C.where(upper, 1.0 - p, p)  # the lower tail, q <= 1/2
    qs = _C.where(_C.gt(q, 0.0), q, 0.5)  # keep the steps finite at 0 (and NaN)
    t = _C.sqrt(-2.0 * _C.log(qs))
    tail = -(t - (2.30753 + 0.27061 * t) / (1.0 + 0.99229 * t + 0.04481 * t * t))
    x = _C.where(_C.lt(qs, 1e-8), tail, _SQRT2 * _erfinv_f64(2.0 * qs - 1.0))
    logq = _C.log(qs)
    for _ in range(4):
        ln = _log_ndtr_f64(x)
        x = x - (ln - logq) * _C.exp(ln + 0.5 * x * x + _LOG_SQRT_2PI)
    x = _C.where(upper, -x, x)
    x = _C.where(_C.eq(p, 0.0), float("-inf"), x)
    x = _C.where(_C.eq(p, 1.0), float("inf"), x)
    bad = _C.logical_or(_C.lt(p, 0.0), _C.gt(p, 1.0))
    return _C.where(_C.logical_or(bad, _C.ne(p, p)), float("nan"), x)


_ndtri = _unary_f64("ndtri", _ndtri_f64, lambda p, y: _C.exp(0.5 * y * y + _LOG_SQRT_2PI))


def ndtri(input):
    """The inverse of ndtr (the standard normal quantile): -inf at 0, inf
    at 1, NaN outside [0, 1]."""
    return _ndtri(input)


def xlog1py(input, other):
    """input * log1p(other), 0 where input is 0 (unless other is NaN)."""
    if not isinstance(input, _C.Tensor) and not isinstance(other, _C.Tensor):
        raise TypeError("[xlog1py] expected a tensor among input and other")
    # a number takes the tensor's floating dtype, as PyTorch's wrapped numbers do
    like = input if isinstance(input, _C.Tensor) else other
    dt = like.dtype if like.is_floating_point() else _C.get_default_dtype()
    x = input if isinstance(input, _C.Tensor) else _C.tensor(_number(input, "xlog1py", "input"),
                                                               dtype=dt)
    y = other if isinstance(other, _C.Tensor) else _C.tensor(_number(other, "xlog1py", "other"),
                                                               dtype=dt)
    if not x.is_floating_point() and not y.is_floating_point():
        x = x.to(_C.get_default_dtype())
    zero = _C.logical_and(_C.eq(x, 0), _C.eq(y, y))
    return _C.where(zero, 0.0, x * _C.log1p(y))


def entr(input):
    """-x log x: 0 at 0, -inf below, NaN stays."""
    _tensors("entr", input=input)
    x = input if input.is_floating_point() else input.to(_C.get_default_dtype())
    safe = _C.where(_C.gt(x, 0.0), x, 1.0)
    out = _C.where(_C.gt(x, 0.0), -x * _C.log(safe), 0.0)
    return _C.where(_C.lt(x, 0.0), float("-inf"), _C.where(_C.ne(x, x), x, out))


def multigammaln(input, p):
    """log of the multivariate gamma function of dimension p:
    p (p - 1) / 4 log pi + sum_i<p lgamma(x - i / 2); every element must
    exceed (p - 1) / 2, as PyTorch checks."""
    _tensors("multigammaln", input=input)
    p = _int(p, "multigammaln", "p")
    if p < 1:
        raise ValueError(f"[multigammaln] p must be at least 1, got {p}")
    if not input.is_floating_point():
        raise _C.InvalidTypeError(f"[multigammaln] expected a floating point tensor, got "
                                  f"{input.dtype}")
    if input.numel() and not bool(_C.gt(input, (p - 1) / 2).all()):
        raise _C.InvalidArgumentError(f"[multigammaln] all elements must be greater than "
                                      f"(p-1)/2 = {(p - 1) / 2}")
    out = lgamma(input)
    for i in range(1, p):
        out = out + lgamma(input - i / 2)
    return out + p * (p - 1) / 4 * _math.log(_math.pi)


class _Zeta(_Function):
    @staticmethod
    def forward(ctx, x, q):
        x64, dt = _as_f64(x, "zeta")
        q64, dq = _as_f64(q, "zeta")
        out_dt = _promote_types(dt, dq)
        ctx.save_for_backward(x64, q64)
        ctx.dt = out_dt
        return _hurwitz_zeta_real(x64, q64).to(out_dt)

    @staticmethod
    def backward(ctx, grad):
        x, q = ctx.saved_tensors  # d/dq zeta(x, q) = -x zeta(x + 1, q); none for x, as torch
        gq = grad * (-x * _hurwitz_zeta_real(x + 1.0, q)).to(ctx.dt)
        return None, gq


def zeta(input, other):
    """The Hurwitz zeta function sum_k (other + k)^-input, for input > 1
    (inf at 1, NaN below); other <= 0 as Cephes: inf at the non-positive
    integers, NaN for a non-integer input. Differentiable in other."""
    if not isinstance(input, _C.Tensor) and not isinstance(other, _C.Tensor):
        raise TypeError("[zeta] expected a tensor among input and other")
    x = input if isinstance(input, _C.Tensor) else _C.tensor(_number(input, "zeta", "input"),
                                                               dtype=_C.float64)
    q = other if isinstance(other, _C.Tensor) else _C.tensor(_number(other, "zeta", "other"),
                                                               dtype=_C.float64)
    if not isinstance(input, _C.Tensor) and isinstance(other, _C.Tensor) and \
            other.is_floating_point():
        x = x.to(other.dtype)
    if not isinstance(other, _C.Tensor) and isinstance(input, _C.Tensor) and \
            input.is_floating_point():
        q = q.to(input.dtype)
    return _Zeta.apply(x, q)


def spherical_bessel_j0(input):
    """sin(x) / x, 1 at 0."""
    _tensors("spherical_bessel_j0", input=input)
    x = input if input.is_floating_point() else input.to(_C.get_default_dtype())
    from ._torch_math import sinc
    return sinc(x / _math.pi)


# ---- the classical orthogonal polynomials (torch.special's *_polynomial_*) ----

_MAX_DEGREE = 1_000_000  # a degree past this is refused (the recurrence runs n steps)

# (p0, p1 of x, and p_{k+1} from (x, k, p_k, p_{k-1})) for each family
_ONE = lambda x: _C.ones_like(x)  # noqa: E731
_FAMILIES = {
    "chebyshev_polynomial_t": (lambda x: x, lambda x, k, a, b: 2 * x * a - b),
    "chebyshev_polynomial_u": (lambda x: 2 * x, lambda x, k, a, b: 2 * x * a - b),
    "chebyshev_polynomial_v": (lambda x: 2 * x - 1, lambda x, k, a, b: 2 * x * a - b),
    "chebyshev_polynomial_w": (lambda x: 2 * x + 1, lambda x, k, a, b: 2 * x * a - b),
    "hermite_polynomial_h": (lambda x: 2 * x, lambda x, k, a, b: 2 * x * a - 2 * k * b),
    "hermite_polynomial_he": (lambda x: x, lambda x, k, a, b: x * a - k * b),
    "laguerre_polynomial_l": (lambda x: 1 - x, lambda x, k, a, b: ((2 * k + 1 - x) * a - k * b) / (k + 1)),
    "legendre_polynomial_p": (lambda x: x, lambda x, k, a, b: ((2 * k + 1) * x * a - k * b) / (k + 1)),
}


def _polynomial(name, shifted=False):
    first, step = _FAMILIES[name]
    who = ("shifted_" + name) if shifted else name

    def fn(input, n):
        if not isinstance(input, _C.Tensor):
            x = _C.tensor(_number(input, who, "input"), dtype=_C.get_default_dtype())
        else:
            x = input if input.is_floating_point() else input.to(_C.get_default_dtype())
        if shifted:
            x = 2 * x - 1
        if isinstance(n, _C.Tensor):
            if n.dtype == _C.bool:
                raise _C.InvalidTypeError(f"[{who}] n must be a number or a numeric tensor, got bool")
            deg = _C.trunc(n.to(_C.float64)) if n.is_floating_point() else n.to(_C.float64)
            top = float(deg.max()) if deg.numel() else -1.0
        else:
            deg, top = float(int(_number(n, who, "n"))), float(int(_number(n, who, "n")))
        if top != top or top > _MAX_DEGREE:
            raise ValueError(f"[{who}] degrees up to {_MAX_DEGREE} are supported, got {top}")
        top = int(top)
        scalar = not isinstance(deg, _C.Tensor)
        if scalar and top < 0:
            return _C.zeros_like(x)
        prev, cur = _ONE(x), first(x)
        if scalar:
            if top == 0:
                return prev
            for k in range(1, top):
                prev, cur = cur, step(x, k, cur, prev)
            return cur
        deg = deg.to(x.dtype)
        result = _C.where(_C.eq(deg, 0), prev, _C.zeros_like(x))
        if top >= 1:
            result = _C.where(_C.eq(deg, 1), cur, result)
        for k in range(1, top):
            prev, cur = cur, step(x, k, cur, prev)
            result = _C.where(_C.eq(deg, k + 1), cur, result)
        return result  # (negative degrees: 0, as torch)
    fn.__name__ = fn.__qualname__ = who
    fn.__doc__ = (f"torch.special.{who}(input, n): the degree-n polynomial (n truncated to an "
                  f"integer; 0 for n < 0) at input{', shifted to [0, 1] (x -> 2x - 1)' if shifted else ''}, "
                  f"by its three-term recurrence; differentiable in input.")
    return with_out(fn, who)


for _name in list(_FAMILIES):
    globals()[_name] = _polynomial(_name)
    __all__.append(_name)
    if _name.startswith("chebyshev"):
        globals()["shifted_" + _name] = _polynomial(_name, shifted=True)
        __all__.append("shifted_" + _name)
