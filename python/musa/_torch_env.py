"""PyTorch's process-level names that scripts call around the ops: dtype
limits (finfo, iinfo), the math constants, determinism and matmul
precision switches, inter-op threads, seed(), and the signal windows
(hann, hamming, blackman, bartlett, kaiser)."""
import math as _math
import os as _os

from . import _C

__all__ = ["finfo", "iinfo", "pi", "e", "inf", "nan", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_float32_matmul_precision",
           "get_float32_matmul_precision", "get_num_interop_threads", "set_num_interop_threads",
           "seed", "set_printoptions", "get_printoptions", "hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window"]

pi, e, inf, nan = _math.pi, _math.e, _math.inf, _math.nan

# (bits, eps, max, smallest normal, resolution) of the floating dtypes
_FLOATS = {
    "float32": (32, 2.0 ** -23, (2 - 2.0 ** -23) * 2.0 ** 127, 2.0 ** -126, 1e-6),
    "float64": (64, 2.0 ** -52, (2 - 2.0 ** -52) * 2.0 ** 1023, 2.0 ** -1022, 1e-15),
    "float16": (16, 2.0 ** -10, 65504.0, 2.0 ** -14, 1e-3),
    "bfloat16": (16, 2.0 ** -7, (2 - 2.0 ** -7) * 2.0 ** 127, 2.0 ** -126, 1e-2),
}
_INTS = {"int8": (8, -128, 127), "uint8": (8, 0, 255), "int16": (16, -2 ** 15, 2 ** 15 - 1),
         "int32": (32, -2 ** 31, 2 ** 31 - 1),
         "int64": (64, -2 ** 63, 2 ** 63 - 1)}


def _dtype_name(who, dtype):
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"[{who}] expected a musa.dtype, got {type(dtype).__name__}")
    return str(dtype).split(".")[-1]


class finfo:
    """Limits of a floating dtype (the default dtype when none is given):
    bits, eps, max, min, tiny = smallest_normal, resolution, dtype."""

    def __init__(self, type=None):
        name = _dtype_name("finfo", type if type is not None else _C.get_default_dtype())
        if name not in _FLOATS:
            raise TypeError(f"[finfo] requires a floating point dtype, got musa.{name}; use "
                            f"musa.iinfo for integers")
        self.bits, self.eps, self.max, self.smallest_normal, self.resolution = _FLOATS[name]
        self.min, self.tiny, self.dtype = -self.max, self.smallest_normal, name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype: bits, min, max, dtype."""

    def __init__(self, type):
        name = _dtype_name("iinfo", type)
        if name not in _INTS:
            raise TypeError(f"[iinfo] requires an integer dtype, got musa.{name}; use "
                            f"musa.finfo for floating point")
        self.bits, self.min, self.max = _INTS[name]
        self.dtype = name

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


# ---- determinism and precision ----

_deterministic = {"on": False, "warn_only": False}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Recorded for are_deterministic_algorithms_enabled(). musa's CPU
    kernels are deterministic already: no atomics, a fixed reduction order
    for a given thread count (oneDNN's convolutions reduce per thread, so
    change the thread count and their last bits may change)."""
    if not isinstance(mode, bool) or not isinstance(warn_only, bool):
        raise TypeError(f"[use_deterministic_algorithms] mode and warn_only must be bools, got "
                        f"{type(mode).__name__} and {type(warn_only).__name__}")
    _deterministic.update(on=mode, warn_only=warn_only)


def are_deterministic_algorithms_enabled():
    return _deterministic["on"]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic["warn_only"]


_matmul_precision = ["highest"]


def set_float32_matmul_precision(precision):
    """'highest', 'high' or 'medium'. On the CPU, as in PyTorch 1.13, float32
    products stay float32 whatever the setting (it allows TF32 on CUDA);
    bfloat16 products come from musa.amp.autocast."""
    if precision not in ("highest", "high", "medium"):
        raise ValueError(f"[set_float32_matmul_precision] precision must be 'highest', 'high' "
                         f"or 'medium', got {precision!r}")
    _matmul_precision[0] = precision


def get_float32_matmul_precision():
    return _matmul_precision[0]


def get_num_interop_threads():
    """Threads that run independent ops at once: musa's plans run them on
    the intra-op team (musa.get_num_threads())."""
    return _C.get_num_threads()


def set_num_interop_threads(n):
    """Accepted for PyTorch scripts; inter-op work shares the intra-op team,
    so musa.set_num_threads(n) is the call that sizes it."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"[set_num_interop_threads] n must be a positive int, got {n!r}")


def seed():
    """Seed the default generator from the OS's randomness; returns the seed."""
    s = int.from_bytes(_os.urandom(8), "little") & ((1 << 63) - 1)
    _C.manual_seed(s)
    return s


# ---- printing ----

_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80),
             "full": (4, 2 ** 63 - 1, 3, 80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """How tensors print, for the whole process, as PyTorch's: decimals,
    the element count past which dims are summarised (inf: never), the
    items kept at each end then, the line width rows wrap at, a profile
    ('default', 'short', 'full') to start from, and sci_mode (True always,
    False never, None as the values' range asks)."""
    cur = list(_C._get_print_options())
    if profile is not None:
        if not isinstance(profile, str) or profile not in _PROFILES:
            raise ValueError(f"[set_printoptions] profile must be 'default', 'short' or 'full', "
                             f"got {profile!r}")
        cur[:4] = _PROFILES[profile]
    for k, v in enumerate((precision, threshold, edgeitems, linewidth)):
        if v is None:
            continue
        if k == 1 and v == _math.inf:
            v = 2 ** 63 - 1
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"[set_printoptions] "
                            f"{('precision', 'threshold', 'edgeitems', 'linewidth')[k]} must be "
                            f"an int, got {v!r}")
        cur[k] = v
    if sci_mode not in (None, True, False):
        raise TypeError(f"[set_printoptions] sci_mode must be None, True or False, got "
                        f"{sci_mode!r}")
    cur[4] = -1 if sci_mode is None else int(sci_mode)
    _C._set_print_options(*cur)


def get_printoptions():
    """The print options as a dict (set_printoptions's names)."""
    p, t, e, w, s = _C._get_print_options()
    return {"precision": p, "threshold": _math.inf if t == 2 ** 63 - 1 else t, "edgeitems": e,
            "linewidth": w, "sci_mode": None if s < 0 else bool(s)}


# ---- windows ----

def _window(who, window_length, periodic, dtype, requires_grad, device, layout, fn):
    _C._factory_options(who, device, layout)
    if not isinstance(window_length, int) or isinstance(window_length, bool) or window_length < 0:
        raise ValueError(f"[{who}] window_length must be a non-negative int, got "
                         f"{window_length!r}")
    dtype = dtype or _C.get_default_dtype()
    if not isinstance(dtype, _C.dtype) or not dtype.is_floating_point:
        raise ValueError(f"[{who}] expects a floating point dtype, got {dtype}")
    if window_length <= 1:
        w = _C.ones(window_length, dtype=dtype)
    else:
        n = window_length + 1 if periodic else window_length
        # positions in float64, the window rounded to dtype once
        w = fn(_C.arange(n, dtype=_C.float64), n - 1)[:window_length].to(dtype)
    return w.requires_grad_() if requires_grad else w


def _cosines(*coef):
    def fn(k, m):
        w = _C.full_like(k, coef[0])
        for j, c in enumerate(coef[1:], 1):
            w = w + c * (2 * j * _math.pi * k / m).cos()
        return w
    return fn


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False):
    """0.5 - 0.5 cos(2 pi n / (N - 1)); periodic: of N + 1 points, the last dropped."""
    return _window("hann_window", window_length, periodic, dtype, requires_grad, device, layout,
                   _cosines(0.5, -0.5))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, requires_grad=False):
    """alpha - beta cos(2 pi n / (N - 1))."""
    from ._functions import _number
    alpha, beta = _number(alpha, "hamming_window", "alpha"), _number(beta, "hamming_window", "beta")
    return _window("hamming_window", window_length, periodic, dtype, requires_grad, device, layout,
                   _cosines(alpha, -beta))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))."""
    return _window("blackman_window", window_length, periodic, dtype, requires_grad, device, layout,
                   _cosines(0.42, -0.5, 0.08))


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """1 - |2 n / (N - 1) - 1|."""
    return _window("bartlett_window", window_length, periodic, dtype, requires_grad, device, layout,
                   lambda k, m: 1 - (2 * k / m - 1).abs())


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, requires_grad=False):
    """I0(beta sqrt(1 - (2 n / (N - 1) - 1)^2)) / I0(beta)."""
    from ._functions import _number
    beta = _number(beta, "kaiser_window", "beta")

    def fn(k, m):
        r = (1 - (2 * k / m - 1) ** 2).clamp(min=0).sqrt()
        return _C.i0(r * beta) / _C.i0(_C.full((), beta, dtype=_C.float64))
    return _window("kaiser_window", window_length, periodic, dtype, requires_grad, device, layout, fn)
