"""Convolutions: Conv1d/2d/3d, ConvTranspose1d/2d/3d.

Hyperparameters are stored as tuples of one entry per spatial dim (padding
may instead be 'same' or 'valid'), as PyTorch stores them.
"""
import math

from ... import _C
from .. import functional as F
from .. import init
from ..functional import _ntuple
from ..parameter import Parameter
from .module import Module

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """Shared state of the convolutions; weight is (out, in/groups, *kernel),
    or (in, out/groups, *kernel) when transposed."""

    def __init__(self, n, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed,
                 output_padding, groups, bias, padding_mode, device, dtype):
        super().__init__()
        name = type(self).__name__
        tup = _ntuple(n, name)
        if groups <= 0:
            raise ValueError(f"[{name}] groups must be a positive integer, got {groups}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"[{name}] in_channels ({in_channels}) and out_channels ({out_channels}) "
                             f"must be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"[{name}] padding_mode must be one of {_PADDING_MODES}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.dilation = tup(kernel_size), tup(stride), tup(dilation)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"[{name}] invalid padding string {padding!r}, "
                                 "should be one of ('valid', 'same')")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"[{name}] padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = tup(padding)
        self.transposed = transposed
        self.output_padding = tup(output_padding)
        self.groups = groups
        self.padding_mode = padding_mode
        shape = (in_channels, out_channels // groups) if transposed else (out_channels, in_channels // groups)
        self.weight = Parameter(_C.empty(shape + self.kernel_size, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(_C.empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """PyTorch's default, as for Linear."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _mode_padded(self, input):
        """(input, padding) with a non-zeros padding_mode applied explicitly."""
        if self.padding_mode == "zeros":
            return input, self.padding
        if self.padding == "valid":
            return input, 0
        amounts = []  # F.pad order: last dim first, (left, right) each
        for i in reversed(range(len(self.kernel_size))):
            if self.padding == "same":
                total = self.dilation[i] * (self.kernel_size[i] - 1)
                amounts += [total // 2, total - total // 2]
            else:
                amounts += [self.padding[i], self.padding[i]]
        return F.pad(input, amounts, mode=self.padding_mode), 0

    def extra_repr(self):
        n = len(self.kernel_size)
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """1-D convolution over (N, C_in, L) or (C_in, L)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(1, in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0,
                         groups, bias, padding_mode, device, dtype)

    def forward(self, input):
        input, padding = self._mode_padded(input)
        return F.conv1d(input, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class Conv2d(_ConvNd):
    """2-D convolution over (N, C_in, H, W) or (C_in, H, W)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(2, in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0,
                         groups, bias, padding_mode, device, dtype)

    def forward(self, input):
        input, padding = self._mode_padded(input)
        return F.conv2d(input, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class Conv3d(_ConvNd):
    """3-D convolution over (N, C_in, D, H, W) or (C_in, D, H, W)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(3, in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0,
                         groups, bias, padding_mode, device, dtype)

    def forward(self, input):
        input, padding = self._mode_padded(input)
        return F.conv3d(input, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class _ConvTransposeNd(_ConvNd):
    """The gradient of a convolution with respect to its input, as a layer;
    an output_size given to forward picks the output_padding."""

    _n = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        name = type(self).__name__
        if padding_mode != "zeros":
            raise ValueError(f"[{name}] only 'zeros' padding mode is supported, got "
                             f"'{padding_mode}'")
        if isinstance(padding, str):
            raise ValueError(f"[{name}] padding must be numbers, got {padding!r}")
        super().__init__(self._n, in_channels, out_channels, kernel_size, stride, padding, dilation,
                         True, output_padding, groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        n, name = self._n, type(self).__name__
        output_size = list(output_size)[-n:]
        if len(output_size) != n:
            raise ValueError(f"[{name}] output_size must have {n} or more elements, got {output_size}")
        pads = []
        for d in range(n):
            smallest = ((input.shape[d - n] - 1) * self.stride[d] - 2 * self.padding[d]
                        + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            largest = smallest + self.stride[d] - 1
            if not smallest <= output_size[d] <= largest:
                raise ValueError(f"[{name}] requested an output size of {output_size}, but valid "
                                 f"sizes along dim {d} range from {smallest} to {largest} "
                                 f"(for an input of {tuple(input.shape[-n:])})")
            pads.append(output_size[d] - smallest)
        return tuple(pads)


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution over (N, C_in, L) or (C_in, L)."""

    _n = 1

    def forward(self, input, output_size=None):
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-D convolution over (N, C_in, H, W) or (C_in, H, W)."""

    def forward(self, input, output_size=None):
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-D convolution over (N, C_in, D, H, W) or (C_in, D, H, W)."""

    _n = 3

    def forward(self, input, output_size=None):
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)
