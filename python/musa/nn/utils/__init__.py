"""musa.nn.utils: gradient clipping, flat parameter vectors, packed
sequences (rnn), weight reparametrisations (weight_norm, spectral_norm),
parametrize and parametrizations (orthogonal, spectral_norm)."""
from . import rnn  # noqa: F401
from . import parametrize, parametrizations, fusion, stateless  # noqa: F401
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights
from .clip_grad import clip_grad_norm_, clip_grad_value_
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .weight_norm import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters", "rnn",
           "weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm", "parametrize",
           "parametrizations", "fusion", "stateless", "fuse_conv_bn_eval", "fuse_conv_bn_weights",
           "fuse_linear_bn_eval", "fuse_linear_bn_weights", "skip_init", "clip_grad_norm",
           "convert_conv2d_weight_memory_format"]


def convert_conv2d_weight_memory_format(module, memory_format):
    """The weights of every Conv2d and ConvTranspose2d in module laid out as
    memory_format (musa.channels_last or contiguous_format), in place;
    returns module."""
    from ..modules.conv import Conv2d, ConvTranspose2d
    from ..._memory_format import to_format
    for m in module.modules():
        if isinstance(m, (Conv2d, ConvTranspose2d)):
            m._apply(lambda t: to_format("convert_conv2d_weight_memory_format", t, memory_format)
                     if t.ndim == 4 else t)
    return module


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) whose parameters the caller will
    overwrite (torch skips their initialisation; here it runs, and the
    values are simply not to be relied on). The class must take device=,
    as torch requires."""
    import inspect
    if not isinstance(module_cls, type):
        raise TypeError(f"[skip_init] expected a Module class, got {type(module_cls).__name__}")
    try:
        params = inspect.signature(module_cls).parameters
    except (TypeError, ValueError):
        params = {}
    if "device" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        raise RuntimeError(f"[skip_init] Module must support a 'device' arg to skip initialization")
    return module_cls(*args, **kwargs)


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Deprecated torch name of clip_grad_norm_."""
    import warnings
    warnings.warn("torch.nn.utils.clip_grad_norm is now deprecated in favor of "
                  "torch.nn.utils.clip_grad_norm_.", stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite)
