"""More of torch's top-level names, over musa's ops and methods:
- the function forms of the in-place methods (torch.exp_(x) is x.exp_());
- the *_copy forms of the view ops (torch.permute_copy: a fresh tensor);
- rsub, fill, zero_, index_put(_), masked_scatter, split_with_sizes,
  unsafe_split, unsafe_chunk, range, gradient (numerical, as numpy's);
- the real-dtype identities of the complex API (conj, resolve_conj,
  resolve_neg, real, is_conj, is_neg; imag fails as torch's does);
- state queries: is_inference, is_anomaly_enabled, set_anomaly_enabled,
  is_autocast_enabled, is_autocast_cpu_enabled, get_autocast_cpu_dtype,
  set_warn_always, is_warn_always_enabled, set_flush_denormal, typename."""
import builtins as _builtins

from . import _C
from ._functions import _dims, _int, _number, _tensors

__all__ = ["rsub", "fill", "zero_", "index_put", "index_put_", "masked_scatter", "split_with_sizes",
           "unsafe_split", "unsafe_chunk", "unsafe_split_with_sizes", "range", "gradient", "conj",
           "conj_physical", "resolve_conj", "resolve_neg", "real", "imag", "is_conj", "is_neg",
           "is_inference", "is_anomaly_enabled", "set_anomaly_enabled", "is_autocast_enabled",
           "is_autocast_cpu_enabled", "get_autocast_cpu_dtype", "set_warn_always",
           "is_warn_always_enabled", "set_flush_denormal", "typename"]

# ---- function forms of the in-place methods ----

_INPLACE = ("acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_",
            "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_", "clamp_min_",
            "clip_", "cos_", "cosh_", "deg2rad_", "detach_", "erf_", "erfc_", "exp2_", "exp_",
            "expm1_", "fix_", "floor_", "frac_", "gcd_", "i0_", "lcm_", "ldexp_", "log10_", "log1p_",
            "log2_", "log_", "logit_", "nan_to_num_", "neg_", "negative_", "rad2deg_",
            "reciprocal_", "round_", "rsqrt_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_",
            "tanh_", "trunc_", "xlogy_", "addmv_", "as_strided_", "celu_", "selu_", "rrelu_",
            "threshold_", "resize_as_", "dropout_", "alpha_dropout_", "feature_alpha_dropout_")


def _method_form(name):
    def fn(input, *args, **kwargs):
        _tensors(name, input=input)
        method = getattr(input, name, None)
        if method is None:
            raise NotImplementedError(f"[{name}] musa tensors have no {name} method")
        return method(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.{name}(input, ...): input.{name}(...)."
    return fn


def _functional_form(name, functional):
    """torch.<name>(input, ...): F.<functional>(input, ..., inplace=True)."""
    def fn(input, *args, **kwargs):
        _tensors(name, input=input)
        from .nn import functional as F
        return getattr(F, functional)(input, *args, inplace=True, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.{name}(input, ...): F.{functional}(input, ..., inplace=True)."
    return fn


# the in-place forms nn.functional provides (inplace=True), not Tensor methods
_FUNCTIONAL_INPLACE = ("celu_", "selu_", "rrelu_", "threshold_", "dropout_", "alpha_dropout_",
                       "feature_alpha_dropout_")

for _n in _INPLACE:
    if _n in _FUNCTIONAL_INPLACE:
        globals()[_n] = _functional_form(_n, _n[:-1])
    elif hasattr(_C.Tensor, _n):
        globals()[_n] = _method_form(_n)
    else:
        continue  # no such method: no function form either
    __all__.append(_n)

# ---- the *_copy forms of the view ops ----

_VIEW_COPIES = {"alias_copy": lambda x: x.view(tuple(x.shape)), "detach_copy": "detach",
                "diagonal_copy": "diagonal", "expand_copy": "expand", "permute_copy": "permute",
                "select_copy": "select", "squeeze_copy": "squeeze", "t_copy": "t",
                "transpose_copy": "transpose", "unfold_copy": "unfold", "unsqueeze_copy": "unsqueeze",
                "view_copy": "view", "as_strided_copy": "as_strided", "split_copy": "split",
                "split_with_sizes_copy": "split_with_sizes", "unbind_copy": "unbind"}


def _copy_form(name, view):
    def fn(input, *args, **kwargs):
        _tensors(name, input=input)
        if callable(view):
            out = view(input, *args, **kwargs)
        elif view == "split_with_sizes":
            out = split_with_sizes(input, *args, **kwargs)
        else:
            out = getattr(input, view)(*args, **kwargs)
        if isinstance(out, (tuple, list)):
            return tuple(_fresh(o) for o in out)
        return _fresh(out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.{name}: the {view if isinstance(view, str) else 'alias'} view, copied."
    return fn


def _fresh(t):
    """A contiguous copy sharing no memory with t."""
    c = t.clone()
    return c if c.is_contiguous() else c.contiguous()


for _n, _v in _VIEW_COPIES.items():
    globals()[_n] = _copy_form(_n, _v)
    __all__.append(_n)


# ---- small functions ----

def rsub(input, other, *, alpha=1):
    """other - alpha * input."""
    if not isinstance(input, _C.Tensor):
        raise TypeError(f"[rsub] argument 'input' must be Tensor, not {type(input).__name__}")
    if not isinstance(alpha, _C.Tensor):
        _number(alpha, "rsub", "alpha")  # (checked; an int stays an int)
    if not isinstance(other, _C.Tensor):
        _number(other, "rsub", "other")
    # sub's alpha: alpha * input in the promoted dtype (fuzz-py seed 11420: float16
    # input, float64 other), and an int alpha keeps integers integers
    return _C.sub(other, input, alpha=alpha)


def fill(input, value):
    """A new tensor of input's shape and dtype, every element value."""
    _tensors("fill", input=input)
    if isinstance(value, _C.Tensor):
        if value.ndim != 0:
            raise ValueError(f"[fill] value must be a number or a 0-d tensor, got a tensor of shape "
                             f"{tuple(value.shape)}")
        value = value.item()
    return _C.full(tuple(input.shape), _number(value, "fill", "value"), dtype=input.dtype)


def zero_(input):
    """input.zero_()."""
    _tensors("zero_", input=input)
    return input.zero_()


def index_put(input, indices, values, accumulate=False):
    """input.index_put(indices, values, accumulate)."""
    _tensors("index_put", input=input)
    return input.index_put(indices, values, accumulate)


def index_put_(input, indices, values, accumulate=False):
    _tensors("index_put_", input=input)
    return input.index_put_(indices, values, accumulate)


def masked_scatter(input, mask, source):
    """input.masked_scatter(mask, source)."""
    _tensors("masked_scatter", input=input)
    return input.masked_scatter(mask, source)


def split_with_sizes(input, split_sizes, dim=0):
    """input split into pieces of split_sizes along dim (their sum must be
    the dim's size)."""
    _tensors("split_with_sizes", input=input)
    if input.ndim == 0:
        raise ValueError("[split_with_sizes] expects at least a 1-dimensional tensor, got a 0-d one")
    sizes = _dims(split_sizes, "split_with_sizes", "split_sizes")
    from ._functions import _dim
    d = _dim(dim, input.ndim, "split_with_sizes")
    if any(s < 0 for s in sizes) or sum(sizes) != input.shape[d]:
        raise ValueError(f"[split_with_sizes] split_sizes {sizes} must be non-negative and sum to "
                         f"the size of dim {d}, {input.shape[d]}")
    from ._functions import split
    return tuple(split(input, sizes, d))


def unsafe_split(input, split_size_or_sections, dim=0):
    from ._functions import split
    _tensors("unsafe_split", input=input)
    return tuple(split(input, split_size_or_sections, dim))


def unsafe_split_with_sizes(input, split_sizes, dim=0):
    return split_with_sizes(input, split_sizes, dim)


def unsafe_chunk(input, chunks, dim=0):
    _tensors("unsafe_chunk", input=input)
    return tuple(input.chunk(_int(chunks, "unsafe_chunk", "chunks"), dim))


def range(start=0, end=None, step=1, *, dtype=None, out=None, layout=None, device=None,
          requires_grad=False):
    """torch.range (deprecated there): start to end inclusive, in steps."""
    _C._factory_options("range", device, layout)
    if end is None:
        start, end = 0, start
    start, end, step = (_number(v, "range", n) for v, n in ((start, "start"), (end, "end"),
                                                              (step, "step")))
    if not all(v - v == 0 for v in (start, end, step)):  # (false for inf and NaN)
        raise ValueError(f"[range] start, end and step must be finite, got {start}, {end}, {step}")
    if step == 0:
        raise ValueError("[range] step must be nonzero")
    if (end - start) * step < 0:
        raise ValueError(f"[range] upper bound and larger bound inconsistent with step sign: "
                         f"start {start}, end {end}, step {step}")
    n = int((end - start) / step) + 1
    if n > 1 << 40:
        raise ValueError(f"[range] {n} elements is too many")
    dt = dtype or _C.get_default_dtype()
    r = _C.arange(n, dtype=_C.float64).mul(step).add(start).to(dt)
    return r.requires_grad_() if requires_grad else r


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """Numerical derivatives of input along each dim in dim (default: all),
    as numpy.gradient: central differences inside, one-sided (first or
    second order, edge_order) at the edges. spacing: a number, one number
    per dim, or one tensor of coordinates per dim. Returns a tuple."""
    _tensors("gradient", input=input)
    from ._functions import _dim
    if input.ndim == 0:
        raise ValueError("[gradient] input must have at least one dimension, got a 0-d tensor")
    dims = list(_builtins.range(input.ndim)) if dim is None else \
        [_dim(d, input.ndim, "gradient") for d in _dims(dim, "gradient", "dim")]
    if edge_order not in (1, 2):
        raise ValueError(f"[gradient] edge_order must be 1 or 2, got {edge_order}")
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise ValueError(f"[gradient] spacing must give one value per dim ({len(dims)}), got "
                             f"{len(spacing)}")
        spacings = list(spacing)
    else:
        spacings = [spacing] * len(dims)
    x = input if input.is_floating_point() else input.to(_C.get_default_dtype())
    return tuple(_gradient_1d(x, d, s, edge_order) for d, s in zip(dims, spacings))


def _gradient_1d(x, d, spacing, edge_order):
    n = x.shape[d]
    if n < edge_order + 1:
        raise ValueError(f"[gradient] each dim needs at least edge_order + 1 = {edge_order + 1} "
                         f"samples, dim {d} has {n}")

    def sl(a, b):
        return x.narrow(d, a, b - a)

    if isinstance(spacing, _C.Tensor):
        if spacing.ndim != 1 or spacing.shape[0] != n:
            raise ValueError(f"[gradient] coordinates along dim {d} must be 1-d of length {n}, got "
                             f"shape {tuple(spacing.shape)}")
        c = spacing.to(x.dtype).reshape([-1 if i == d else 1 for i in _builtins.range(x.ndim)])
        h = c.narrow(d, 1, n - 1) - c.narrow(d, 0, n - 1)  # n - 1 steps
        hl, hr = h.narrow(d, 0, n - 2), h.narrow(d, 1, n - 2)
        a = -hr / (hl * (hl + hr))
        b = (hr - hl) / (hl * hr)
        cc = hl / (hr * (hl + hr))
        inner = a * sl(0, n - 2) + b * sl(1, n - 1) + cc * sl(2, n)
        h0, h1 = h.narrow(d, 0, 1), h.narrow(d, n - 2, 1)
        if edge_order == 1:
            first = (sl(1, 2) - sl(0, 1)) / h0
            last = (sl(n - 1, n) - sl(n - 2, n - 1)) / h1
        else:
            g0, g1 = h.narrow(d, 0, 1), h.narrow(d, 1, 1)
            first = (-(2 * g0 + g1) / (g0 * (g0 + g1)) * sl(0, 1) + (g0 + g1) / (g0 * g1) * sl(1, 2) -
                     g0 / (g1 * (g0 + g1)) * sl(2, 3))
            e0, e1 = h.narrow(d, n - 3, 1), h.narrow(d, n - 2, 1)
            last = (e1 / (e0 * (e0 + e1)) * sl(n - 3, n - 2) - (e0 + e1) / (e0 * e1) * sl(n - 2, n - 1) +
                    (2 * e1 + e0) / (e1 * (e0 + e1)) * sl(n - 1, n))
    else:
        h = _number(spacing, "gradient", "spacing")
        inner = (sl(2, n) - sl(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first = (sl(1, 2) - sl(0, 1)) / h
            last = (sl(n - 1, n) - sl(n - 2, n - 1)) / h
        else:
            first = (-1.5 * sl(0, 1) + 2 * sl(1, 2) - 0.5 * sl(2, 3)) / h
            last = (0.5 * sl(n - 3, n - 2) - 2 * sl(n - 2, n - 1) + 1.5 * sl(n - 1, n)) / h
    return _C.cat([first, inner, last], d) if n > 2 else _C.cat([first, last], d)


# ---- the real-dtype identities of the complex API ----

def conj(input):
    """input itself (musa has no complex dtypes)."""
    _tensors("conj", input=input)
    return input


def conj_physical(input):
    _tensors("conj_physical", input=input)
    return input.clone()


def resolve_conj(input):
    _tensors("resolve_conj", input=input)
    return input


def resolve_neg(input):
    _tensors("resolve_neg", input=input)
    return input


def real(input):
    _tensors("real", input=input)
    return input


def imag(input):
    _tensors("imag", input=input)
    raise RuntimeError("[imag] imag is not implemented for tensors with non-complex dtypes "
                       "(musa has no complex dtypes)")


def is_conj(input):
    _tensors("is_conj", input=input)
    return False


def is_neg(input):
    _tensors("is_neg", input=input)
    return False


def is_inference(input):
    """False: musa has no inference tensors (inference_mode is no_grad's
    mode; its results are ordinary tensors)."""
    _tensors("is_inference", input=input)
    return False


# ---- global state ----

def is_anomaly_enabled():
    return _C.is_anomaly_enabled()


def set_anomaly_enabled(enabled, check_nan=True):
    _C._set_anomaly_enabled(bool(enabled), bool(check_nan))


def is_autocast_enabled():
    return _C._autocast_state()[0]


is_autocast_cpu_enabled = is_autocast_enabled


def get_autocast_cpu_dtype():
    return _C._autocast_state()[1]


_warn_always = [False]


def set_warn_always(b):
    """PyTorch's switch for warnings its C++ side gives once; musa's
    Python warnings follow the warnings module, so this is a flag only."""
    _warn_always[0] = bool(b)


def is_warn_always_enabled():
    return _warn_always[0]


def set_flush_denormal(mode):
    """Returns False: musa does not change the CPU's denormal mode."""
    bool(mode)
    return False


def typename(obj):
    """'musa.FloatTensor' for a float32 tensor (torch's naming), else the
    object's qualified type name."""
    if isinstance(obj, _C.Tensor):
        return obj.type()
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
