"""musa.cuda.amp: torch.cuda.amp's names on a build without CUDA. As
PyTorch does where CUDA is unavailable, autocast warns and leaves autocast
off, and GradScaler warns and is disabled: scale() returns the loss as it
is, step() calls the optimizer's step, get_scale() is 1.0. Code written
for a GPU then trains on the CPU in float32; musa.amp (docs/amp.md) is the
CPU's mixed precision."""
import functools
import warnings

from ..amp import GradScaler as _GradScaler
from ..amp import autocast as _autocast

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(_autocast):
    """torch.cuda.amp.autocast(enabled=True, dtype=float16,
    cache_enabled=True): off here, with a warning."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cuda", dtype, enabled, cache_enabled)


class GradScaler(_GradScaler):
    """torch.cuda.amp.GradScaler: disabled here (with a warning when asked
    to be enabled), as PyTorch's without CUDA."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if enabled:
            warnings.warn("musa.cuda.amp.GradScaler is enabled, but CUDA is not available; "
                          "disabling (musa.amp.GradScaler is the CPU's)", stacklevel=2)
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled=False)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """The forward of a custom autograd Function, unchanged (autocast is off)."""
    if fwd is None:
        return functools.partial(custom_fwd, cast_inputs=cast_inputs)
    return fwd


def custom_bwd(bwd):
    """The backward of a custom autograd Function, unchanged."""
    return bwd
