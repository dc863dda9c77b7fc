"""Lazy layers: LazyLinear, LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d,
LazyBatchNorm1d/2d/3d and LazyInstanceNorm1d/2d/3d read their input size
(in_features, in_channels, num_features) from the first input.

Until then their parameters are UninitializedParameter and their running
statistics UninitializedBuffer: empty placeholders that no op accepts as a
weight. The first forward gives them their shapes, initialises them as the
regular layer does, and turns the layer into that layer (a LazyLinear
becomes a Linear). A parameter keeps its identity through this, so an
optimizer made before the first forward holds the real parameters.
Loading a state_dict into a lazy layer takes the shapes from the loaded
tensors."""
from ... import _C
from ..parameter import UninitializedBuffer, UninitializedParameter
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Linear
from .normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d,
                            InstanceNorm3d)

__all__ = ["UninitializedParameter", "UninitializedBuffer", "LazyModuleMixin", "LazyLinear",
           "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
           "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


def _uninitialized(v):
    return isinstance(v, (UninitializedParameter, UninitializedBuffer))


class LazyModuleMixin:
    """The lazy protocol: initialize_parameters(*inputs) (a subclass's)
    materialises the placeholders at the first call, after which the
    module's class becomes cls_to_become."""

    cls_to_become = None

    def _lazy_setup(self):
        self._lazy_hook = self.register_forward_pre_hook(_infer_parameters)

    def has_uninitialized_params(self):
        return any(_uninitialized(v) for v in
                   list(self._parameters.values()) + list(self._buffers.values()))

    def _materialize(self, name, shape):
        """Give the placeholder `name` its shape (a parameter in place, a
        buffer replaced)."""
        v = getattr(self, name)
        if isinstance(v, UninitializedParameter):
            v.materialize(shape)
        elif isinstance(v, UninitializedBuffer):
            self._buffers[name] = _C.empty(tuple(shape), dtype=v.dtype)

    def _load_from_state_dict(self, state_dict, prefix, missing_keys, unexpected_keys, error_msgs):
        for name, v in list(self._parameters.items()) + list(self._buffers.items()):
            key = prefix + name
            if _uninitialized(v) and isinstance(state_dict.get(key), _C.Tensor):
                self._materialize(name, state_dict[key].shape)
        super()._load_from_state_dict(state_dict, prefix, missing_keys, unexpected_keys, error_msgs)
        if not self.has_uninitialized_params():
            self._lazy_sizes()

    def _lazy_sizes(self):
        """Set the size attributes from materialised parameters (a loaded
        state_dict)."""


def _infer_parameters(module, args):
    if module.has_uninitialized_params():
        if not args:
            raise ValueError(f"[{type(module).__name__}] a lazy layer needs an input at its first "
                             f"call to infer its size")
        module.initialize_parameters(*args)
    module._lazy_hook.remove()
    del module._lazy_hook
    module.__class__ = module.cls_to_become


class LazyLinear(LazyModuleMixin, Linear):
    """Linear whose in_features is the last dim of its first input."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, out_features, False, device, dtype)
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)
        self._lazy_setup()

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if input.ndim == 0:
            raise ValueError("[LazyLinear] expected an input of at least 1 dim, got a 0-d tensor")
        self.in_features = input.shape[-1]
        self._materialize("weight", (self.out_features, self.in_features))
        if self.bias is not None:
            self._materialize("bias", (self.out_features,))
        self.reset_parameters()

    def _lazy_sizes(self):
        self.in_features = self.weight.shape[1]


class _LazyConvNd(LazyModuleMixin):
    """The convolutions: in_channels from dim 1 of a batched input (dim 0
    of an unbatched one)."""

    _n = 2

    def _lazy_conv(self, bias, dtype):
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)
        self._lazy_setup()

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        name, n = type(self).__name__, self._n
        if input.ndim not in (n + 1, n + 2):
            raise ValueError(f"[{name}] expected a {n + 1}D (unbatched) or {n + 2}D (batched) "
                             f"input, got shape {tuple(input.shape)}")
        c = input.shape[1] if input.ndim == n + 2 else input.shape[0]
        if c % self.groups:
            raise ValueError(f"[{name}] in_channels ({c}) must be divisible by groups "
                             f"({self.groups})")
        self.in_channels = c
        out = self.out_channels
        shape = (c, out // self.groups) if self.transposed else (out, c // self.groups)
        self._materialize("weight", shape + self.kernel_size)
        if self.bias is not None:
            self._materialize("bias", (out,))
        self.reset_parameters()

    def _lazy_sizes(self):
        w = self.weight.shape
        self.in_channels = w[0] if self.transposed else w[1] * self.groups


def _lazy_conv_class(base, n):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        base.__init__(self, groups, out_channels, kernel_size, stride, padding, dilation, groups,
                      False, padding_mode, device, dtype)
        self._lazy_conv(bias, dtype)

    def __init_t__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                   groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        base.__init__(self, groups, out_channels, kernel_size, stride, padding, output_padding,
                      groups, False, dilation, padding_mode, device, dtype)
        self._lazy_conv(bias, dtype)

    transposed = base.__name__.startswith("ConvTranspose")
    doc = f"{base.__name__} whose in_channels is read from its first input."
    return type("Lazy" + base.__name__, (_LazyConvNd, base),
                {"__init__": __init_t__ if transposed else __init__, "cls_to_become": base,
                 "_n": n, "__doc__": doc, "__module__": __name__})


LazyConv1d = _lazy_conv_class(Conv1d, 1)
LazyConv2d = _lazy_conv_class(Conv2d, 2)
LazyConv3d = _lazy_conv_class(Conv3d, 3)
LazyConvTranspose1d = _lazy_conv_class(ConvTranspose1d, 1)
LazyConvTranspose2d = _lazy_conv_class(ConvTranspose2d, 2)
LazyConvTranspose3d = _lazy_conv_class(ConvTranspose3d, 3)


class _LazyNorm(LazyModuleMixin):
    """The batch and instance norms: num_features from the channel dim."""

    def _lazy_norm(self, dtype):
        if self.affine:
            self.weight = UninitializedParameter(dtype=dtype)
            self.bias = UninitializedParameter(dtype=dtype)
        if self.track_running_stats:
            self._buffers["running_mean"] = UninitializedBuffer(dtype=dtype)
            self._buffers["running_var"] = UninitializedBuffer(dtype=dtype)
        self._lazy_setup()

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def _channel_dim(self, input):
        return 1

    def initialize_parameters(self, input, *args, **kwargs):
        if input.ndim < 2:
            raise ValueError(f"[{type(self).__name__}] expected an input with a channel dim, got "
                             f"shape {tuple(input.shape)}")
        self.num_features = input.shape[self._channel_dim(input)]
        for name in ("weight", "bias", "running_mean", "running_var"):
            self._materialize(name, (self.num_features,))
        self.reset_parameters()

    def _lazy_sizes(self):
        for name in ("weight", "running_mean"):
            v = getattr(self, name)
            if v is not None:
                self.num_features = v.shape[0]


def _lazy_norm_class(base, instance):
    defaults = (False, False) if instance else (True, True)

    def __init__(self, eps=1e-5, momentum=0.1, affine=defaults[0],
                 track_running_stats=defaults[1], device=None, dtype=None):
        base.__init__(self, 0, eps, momentum, affine, track_running_stats, device, dtype)
        self._lazy_norm(dtype)

    attrs = {"__init__": __init__, "cls_to_become": base, "__module__": __name__,
             "__doc__": f"{base.__name__} whose num_features is read from its first input."}
    if instance:  # an unbatched input has its channels first
        attrs["_channel_dim"] = lambda self, input: 1 if input.ndim == self._spatial + 2 else 0
    return type("Lazy" + base.__name__, (_LazyNorm, base), attrs)


LazyBatchNorm1d = _lazy_norm_class(BatchNorm1d, False)
LazyBatchNorm2d = _lazy_norm_class(BatchNorm2d, False)
LazyBatchNorm3d = _lazy_norm_class(BatchNorm3d, False)
LazyInstanceNorm1d = _lazy_norm_class(InstanceNorm1d, True)
LazyInstanceNorm2d = _lazy_norm_class(InstanceNorm2d, True)
LazyInstanceNorm3d = _lazy_norm_class(InstanceNorm3d, True)
