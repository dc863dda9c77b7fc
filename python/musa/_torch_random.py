"""PyTorch's samplers beyond musa's C ones (rand, randn, randint, bernoulli,
randperm, standard_gamma, poisson, binomial), written over them so they
draw from the same generator: multinomial, normal, randint_like,
sample_dirichlet (torch._sample_dirichlet), and the in-place Tensor.random_,
cauchy_, log_normal_, geometric_. Each takes generator= (musa/__init__.py
wraps the functions, musa/_tensor.py the methods)."""
import math as _math

from . import _C
from ._functions import _int, _number, _tensors
from ._torch_index import broadcast_shapes as _broadcast_shapes
from ._torch_index import searchsorted as _searchsorted
from .autograd import no_grad as _no_grad

__all__ = ["multinomial", "normal", "randint_like", "sample_dirichlet"]


def multinomial(input, num_samples, replacement=False):
    """num_samples category indices (int64) per row of non-negative weights
    input (K,) or (rows, K). With replacement: the inverse of each row's
    cumulative distribution (in float64, normalised by its own total, so a
    category of weight 0 is never drawn); without: the num_samples smallest
    of E / w for E ~ Exp(1) (Efraimidis and Spirakis), in the order a draw
    one at a time would make. The weights are checked on the host, as
    PyTorch does."""
    _tensors("multinomial", input=input)
    if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
        raise _C.InvalidArgumentError(f"[multinomial] num_samples must be a positive int, got "
                                      f"{num_samples!r}")
    if input.ndim not in (1, 2):
        raise _C.InvalidArgumentError(f"[multinomial] prob_dist must be 1 or 2 dim, got "
                                      f"{input.ndim}")
    if not input.is_floating_point():
        raise _C.InvalidTypeError(f"[multinomial] expected a floating point tensor of weights, "
                                  f"got {input.dtype}")
    w = input.detach().to(_C.float64).reshape(-1, input.shape[-1])
    rows, k = w.shape
    if k == 0:
        raise _C.InvalidArgumentError("[multinomial] the distribution has no categories")
    if rows and not bool(((w >= 0) & w.isfinite()).all()):
        raise _C.InvalidArgumentError("[multinomial] probability tensor contains either inf, nan "
                                      "or element < 0")
    total = w.sum(1)
    if rows and not bool((total > 0).all()):
        raise _C.InvalidArgumentError("[multinomial] invalid multinomial distribution (sum of "
                                      "probabilities <= 0)")
    with _no_grad():
        if replacement:
            cdf = w.cumsum(1)
            cdf = cdf / cdf[:, -1:]
            u = _C.rand(rows, num_samples, dtype=_C.float64)
            idx = _searchsorted(cdf.contiguous(), u, right=True)
        else:
            nonzero = int((w > 0).sum(1).min()) if rows else k
            if num_samples > nonzero:
                raise _C.InvalidArgumentError(
                    f"[multinomial] cannot draw {num_samples} samples without replacement from "
                    f"{nonzero} categories of non-zero weight")
            e = (1 - _C.rand(rows, k, dtype=_C.float64)).log().neg()  # Exp(1)
            keys = _C.where(w > 0, e / w, float("inf"))
            idx = keys.topk(num_samples, dim=1, largest=False).indices
    return idx.reshape(num_samples) if input.ndim == 1 else idx


def normal(mean=0.0, std=1.0, size=None, *, dtype=None, layout=None, device=None,
           requires_grad=False, pin_memory=False):
    """mean + std * N(0, 1): mean and std tensors broadcast against each
    other (the result has their shape), or numbers with size. As in
    PyTorch the draw passes no gradient to mean or std."""
    _C._factory_options("normal", device, layout, pin_memory)
    is_t = isinstance(mean, _C.Tensor), isinstance(std, _C.Tensor)
    with _no_grad():
        if not any(is_t):
            if size is None:
                raise TypeError("[normal] with a number mean and std, size is required")
            m, s = _number(mean, "normal", "mean"), _number(std, "normal", "std")
            if s < 0:
                raise _C.InvalidArgumentError(f"[normal] std must be >= 0, got {s}")
            from ._functions import _dims
            shape = _dims(size, "normal", "size")
            r = _C.randn(*shape, dtype=dtype or _C.get_default_dtype()) * s + m
        else:
            if size is not None:
                raise TypeError("[normal] size is only for a number mean and std")
            m = mean.detach() if is_t[0] else _number(mean, "normal", "mean")
            s = std.detach() if is_t[1] else _number(std, "normal", "std")
            if (bool((s < 0).any()) if is_t[1] else s < 0):
                raise _C.InvalidArgumentError("[normal] std must be >= 0")
            like = m if is_t[0] else s
            shape = _broadcast_shapes(m.shape, s.shape) if all(is_t) else like.shape
            dt = like.dtype if like.is_floating_point() else _C.get_default_dtype()
            r = _C.randn(*shape, dtype=dt) * s + m
    return r.requires_grad_() if requires_grad else r


def randint_like(input, low=0, high=None, *, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None):
    """randint(low, high) of input's shape (and dtype unless given);
    randint_like(input, high) as in PyTorch."""
    _tensors("randint_like", input=input)
    _C._factory_options("randint_like", device, layout)
    if high is None:
        low, high = 0, low
    return _C.randint(low, high, tuple(input.shape), dtype=dtype or input.dtype)


def sample_dirichlet(alpha):
    """Dirichlet(alpha) over alpha's last dim: Gamma(alpha_i) draws over
    their sum; differentiable in alpha through standard_gamma's implicit
    gradient."""
    _tensors("sample_dirichlet", alpha=alpha)
    if alpha.ndim < 1:
        raise ValueError("[sample_dirichlet] alpha must have at least 1 dim (the categories), "
                         "got a 0-d tensor")
    g = _C.standard_gamma(alpha)
    return g / g.sum(-1, keepdim=True)


# ---- in-place fillers (Tensor methods) ----

def _bits63(shape):
    """Uniform int64 in [0, 2^63): two draws of 31 and 32 bits."""
    hi = _C.randint(0, 1 << 31, shape, dtype=_C.int64)
    return hi * (1 << 32) + _C.randint(0, 1 << 32, shape, dtype=_C.int64)


def random_(self, *args, **kw):
    """Integers uniform in [from, to - 1], PyTorch's spellings random_(),
    random_(to), random_(from, to) and from=/to= keywords; to defaults to
    the dtype's largest exactly held integer plus one (2^24 for float32,
    2^53 for float64, the maximum + 1 for integer dtypes)."""
    from_, to = kw.pop("from", 0), kw.pop("to", None)
    if kw or len(args) > 2:
        raise TypeError("[Tensor.random_] takes (to), (from, to) or from=, to=")
    if len(args) == 2:
        from_, to = args
    elif len(args) == 1:
        if to is None:
            to = args[0]
        else:
            from_ = args[0]
    name = str(self.dtype).split(".")[-1]
    top = {"float32": 1 << 24, "float64": 1 << 53, "float16": 1 << 11, "bfloat16": 1 << 8,
           "int8": 128, "uint8": 256, "int16": 1 << 15, "int32": 1 << 31, "int64": 1 << 63,
           "bool": 2}[name]
    lo = _int(from_, "Tensor.random_", "from")
    hi = top if to is None else _int(to, "Tensor.random_", "to")
    if hi <= lo:
        raise _C.InvalidArgumentError(f"[Tensor.random_] expects from < to, got from={lo}, "
                                      f"to={hi}")
    shape = tuple(self.shape)
    with _no_grad():
        if hi - lo <= 1 << 53:
            r = _C.randint(lo, hi, shape, dtype=_C.int64)
        elif hi - lo == 1 << 63:
            r = _bits63(shape) + lo
        elif hi - lo < 1 << 63:  # wider than a double holds: 63 random bits, reduced
            r = _bits63(shape) % (hi - lo) + lo
        else:
            raise _C.InvalidArgumentError(f"[Tensor.random_] the range [{lo}, {hi}) is wider "
                                          f"than 2^63")
        return self.copy_(r)


def cauchy_(self, median=0.0, sigma=1.0):
    """median + sigma tan(pi (u - 1/2))."""
    m, s = _number(median, "Tensor.cauchy_", "median"), _number(sigma, "Tensor.cauchy_", "sigma")
    with _no_grad():
        u = _C.rand(*self.shape, dtype=_C.float64)
        return self.copy_(((u - 0.5) * _math.pi).tan() * s + m)


def log_normal_(self, mean=1.0, std=2.0):
    """exp(mean + std N(0, 1))."""
    m, s = _number(mean, "Tensor.log_normal_", "mean"), _number(std, "Tensor.log_normal_", "std")
    if s <= 0:
        raise _C.InvalidArgumentError(f"[Tensor.log_normal_] std must be > 0, got {s}")
    with _no_grad():
        return self.copy_((_C.randn(*self.shape, dtype=_C.float64) * s + m).exp())


def geometric_(self, p):
    """The trial of the first success, p per trial: 1, 2, ... (ceil of
    log(u) / log(1 - p))."""
    p = _number(p, "Tensor.geometric_", "p")
    if not 0 < p < 1:
        raise _C.InvalidArgumentError(f"[Tensor.geometric_] p must be in (0, 1), got {p}")
    with _no_grad():
        u = 1 - _C.rand(*self.shape, dtype=_C.float64)  # in (0, 1]
        return self.copy_((u.log() / _math.log1p(-p)).ceil().clamp(min=1))


def _multinomial(self, num_samples, replacement=False):
    return multinomial(self, num_samples, replacement)


METHODS = {"random_": random_, "cauchy_": cauchy_, "log_normal_": log_normal_,
           "geometric_": geometric_, "multinomial": _multinomial}
