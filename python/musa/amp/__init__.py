"""Mixed precision: ``musa.amp.autocast`` (and ``musa.autocast``).

Inside an autocast region the GEMM-shaped ops (matmul, linear, conv2d) run
in bfloat16 (or float16) and the ops that need range or accuracy (softmax,
log_softmax, cross_entropy, exp, log, pow, sums) run in float32; the rest
take their inputs as they come, mixed dtypes promoting. The policy is a
column of flags in src/ops/ops.def (AMPLOW, AMPF32), applied by the
dispatcher, so eager calls, captures (``musa.jit``) and the C API follow
the same table. The casts are recorded ops: float32 parameters get float32
gradients. Within a region a parameter is cast once per dtype (a cache
dropped when the outermost region exits). Backward passes are not autocast:
their ops run in the dtypes the forward recorded.

    with musa.amp.autocast():
        output = model(input)
        loss = loss_fn(output, target)
    loss.backward()
"""
import functools
import threading
import warnings

from .. import _C
from .grad_scaler import GradScaler  # noqa: E402

__all__ = ["autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype"]

_depth = threading.local()


def is_autocast_enabled():
    """Whether autocast is on in this thread."""
    return _C._autocast_state()[0]


def get_autocast_dtype():
    """The dtype autocast casts to in this thread (bfloat16 when off)."""
    return _C._autocast_state()[1]


class autocast:
    """autocast(dtype=musa.bfloat16, enabled=True, cache_enabled=True)

    Context manager and decorator. ``dtype`` is ``musa.bfloat16`` (the CPU
    default) or ``musa.float16``; ``enabled=False`` turns autocast off inside
    the region (regions nest, each restoring the state it found).
    ``cache_enabled=False`` casts parameters at every use. PyTorch's form
    ``autocast("cpu", dtype=...)`` is accepted; another device type warns and
    leaves autocast off, as PyTorch does for a device it cannot use."""

    def __init__(self, device_type="cpu", dtype=None, enabled=True, cache_enabled=True):
        from .. import bfloat16, float16  # noqa: F401 (validated below)
        if not isinstance(device_type, str):  # autocast(musa.bfloat16): dtype first
            device_type, dtype = "cpu", device_type
        if device_type != "cpu":
            warnings.warn(f"musa.amp.autocast: device_type '{device_type}' is not available; "
                          f"autocast is off in this region", stacklevel=2)
            enabled = False
        self.device_type = device_type
        self.dtype = bfloat16 if dtype is None else dtype
        if self.dtype not in (bfloat16, float16):
            raise ValueError(f"[autocast] dtype must be musa.bfloat16 or musa.float16 on the CPU, "
                             f"got {self.dtype!r}")
        if not isinstance(enabled, bool):
            raise TypeError(f"[autocast] enabled must be a bool, got {type(enabled).__name__}")
        self.enabled = enabled
        self.cache_enabled = bool(cache_enabled)
        self._prev = []

    def __enter__(self):
        prev = _C._autocast_set(self.enabled, self.dtype)
        prev_cache = _C._autocast_set_cache_enabled(self.cache_enabled)
        self._prev.append((prev, prev_cache))
        _depth.n = getattr(_depth, "n", 0) + 1
        return self

    def __exit__(self, *exc):
        (enabled, dtype), cache = self._prev.pop()
        _C._autocast_set(enabled, dtype)
        _C._autocast_set_cache_enabled(cache)
        _depth.n -= 1
        if _depth.n == 0:  # the outermost region: its parameters' casts go
            _C._autocast_clear_cache()
        return False

    def __call__(self, fn):
        args = (self.device_type, self.dtype, self.enabled, self.cache_enabled)

        @functools.wraps(fn)
        def wrapper(*a, **kw):
            with autocast(*args):
                return fn(*a, **kw)
        return wrapper

    def __repr__(self):
        return (f"musa.amp.autocast(dtype={self.dtype}, enabled={self.enabled}, "
                f"cache_enabled={self.cache_enabled})")
