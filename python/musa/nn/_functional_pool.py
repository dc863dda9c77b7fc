"""Volumetric (3-D) convolution and pooling, 1-D pooling, adaptive pooling
and LP pooling, as composites over the 2-D kernels (each differentiable
through them, and captured by the static graph like any composite).
Re-exported by musa.nn.functional.

A 3-D convolution is one 2-D convolution: the kernel_depth input slabs
that each output depth reads are stacked as channels (group-major, so that
groups still work), and the kernel's depth taps become those channels'
weights. A transposed one first spreads the input along depth by the stride
and pads it, which turns it into a stride-1 correlation with the depth taps
flipped. 3-D pooling pads explicitly (including ceil_mode's overhang) and
pools each depth tap's slab with the 2-D kernel, then combines the taps.
"""
import math

from .. import _C
from .._functions import _number, _output_fits, _tensors
from ._functional_more import _ints, _unpool, _unpool_size

__all__ = ["conv3d", "conv_transpose3d", "max_pool1d", "max_pool3d", "avg_pool1d", "avg_pool3d",
           "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
           "adaptive_avg_pool1d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "adaptive_max_pool3d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices", "lp_pool1d", "lp_pool2d", "max_unpool3d"]


def _batched(input, n, who):
    """(input with a batch dim, whether one was added)."""
    _tensors(who, input=input)
    if input.ndim == n + 1:
        return input.unsqueeze(0), True
    if input.ndim != n + 2:
        raise _C.InvalidArgumentError(f"[{who}] expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) input, "
                         f"got shape {tuple(input.shape)}")
    return input, False


def _depth_taps(x, taps, start, step, stride, count):
    """The taps slabs x[:, :, start + k*step :: stride][:count] stacked on a
    new dim 1: (N, taps, C, count, H, W)."""
    last = stride * (count - 1) + 1
    return _C.stack([x[:, :, start + k * step:start + k * step + last:stride] for k in range(taps)], 1)


def _as_channels(slabs, groups):
    """(N, taps, C, D, H, W) -> (N*D, C*taps, H, W), channels ordered (group,
    tap, channel-in-group) as a grouped 2-D convolution reads them."""
    n, taps, c, d, h, w = slabs.shape
    x = slabs.reshape(n, taps, groups, c // groups, d, h, w).permute(0, 4, 2, 1, 3, 5, 6)
    return x.reshape(n * d, c * taps, h, w)


def _from_planes(y, n, d):
    """(N*D, C, H, W) -> (N, C, D, H, W)."""
    return y.reshape(n, d, *y.shape[1:]).permute(0, 2, 1, 3, 4)


def _with_bias(y, bias, who):
    if bias is None:
        return y
    _tensors(who, bias=bias)
    if tuple(bias.shape) != (y.shape[1],):
        raise _C.InvalidArgumentError(f"[{who}] bias has shape {tuple(bias.shape)}, expected ({y.shape[1]},)")
    return y + bias.reshape(1, -1, 1, 1, 1)


def _check_weight(x, weight, groups, transposed, who):
    if weight.ndim != 5:
        raise _C.InvalidArgumentError(f"[{who}] weight must be 5-D, got shape {tuple(weight.shape)}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0:
        raise _C.InvalidArgumentError(f"[{who}] groups must be a positive integer, got {groups!r}")
    cin = weight.shape[0] if transposed else weight.shape[1] * groups
    if x.shape[1] != cin or (weight.shape[0] % groups):
        raise _C.InvalidArgumentError(f"[{who}] input of shape {tuple(x.shape)} and weight of shape "
                         f"{tuple(weight.shape)} with groups={groups}: expected {cin} input channels "
                         f"and a weight dim 0 divisible by groups")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution of (N, C_in, D, H, W) or (C_in, D, H, W) with weight
    (C_out, C_in/groups, kD, kH, kW)."""
    from .functional import _conv_input, _unbatch, conv2d, pad
    who = "conv3d"
    x, padding = _conv_input(input, weight, padding, stride, dilation, 3, who)
    s, d = _ints(stride, 3, who, "stride"), _ints(dilation, 3, who, "dilation")
    p = _ints(padding, 3, who, "padding", positive=False)
    _check_weight(x, weight, groups, False, who)
    out_c, cg, kd, kh, kw = weight.shape
    if p[0]:
        x = pad(x, [0, 0, 0, 0, p[0], p[0]])
    n, depth = x.shape[0], x.shape[2]
    dout = (depth - d[0] * (kd - 1) - 1) // s[0] + 1
    if dout <= 0:
        raise _C.InvalidArgumentError(f"[{who}] the kernel depth {kd} (dilation {d[0]}) is larger than the padded "
                         f"input depth {depth}")
    x2 = _as_channels(_depth_taps(x, kd, 0, d[0], s[0], dout), groups)
    w2 = weight.reshape(groups, out_c // groups, cg, kd, kh, kw).permute(0, 1, 3, 2, 4, 5)
    y = conv2d(x2, w2.reshape(out_c, kd * cg, kh, kw), None, s[1:], p[1:], d[1:], groups)
    return _unbatch(_with_bias(_from_planes(y, n, dout), bias, who), input, 3)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Transposed 3-D convolution (the gradient of conv3d with respect to its
    input) of (N, C_in, D, H, W) with weight (C_in, C_out/groups, kD, kH, kW)."""
    from .functional import _conv_input, _unbatch, conv_transpose2d, pad
    who = "conv_transpose3d"
    x, _ = _conv_input(input, weight, 0, stride, dilation, 3, who)
    s, d = _ints(stride, 3, who, "stride"), _ints(dilation, 3, who, "dilation")
    p = _ints(padding, 3, who, "padding", positive=False)
    op = _ints(output_padding, 3, who, "output_padding", positive=False)
    for i in range(3):
        if op[i] >= max(s[i], d[i]):
            raise _C.InvalidArgumentError(f"[{who}] output_padding {op} must be smaller than either stride {s} or "
                             f"dilation {d} in each dim")
    _check_weight(x, weight, groups, True, who)
    cin, og, kd, kh, kw = weight.shape
    n, depth = x.shape[0], x.shape[2]
    if s[0] > 1:  # spread along depth: stride-1 zeros between the input's slabs
        x = _C.stack([x] + [_C.zeros_like(x)] * (s[0] - 1), 3)
        x = x.reshape(n, cin, depth * s[0], *x.shape[4:])[:, :, :(depth - 1) * s[0] + 1]
    reach = d[0] * (kd - 1)
    dout = (depth - 1) * s[0] - 2 * p[0] + reach + op[0] + 1
    if dout <= 0:
        raise _C.InvalidArgumentError(f"[{who}] the output depth would be {dout} (input depth {depth}, padding {p[0]})")
    x = pad(x, [0, 0, 0, 0, reach, reach + op[0]])
    x2 = _as_channels(_depth_taps(x, kd, p[0], d[0], 1, dout), groups)
    w2 = weight.flip(2).reshape(groups, cin // groups, og, kd, kh, kw).permute(0, 3, 1, 2, 4, 5)
    y = conv_transpose2d(x2, w2.reshape(cin * kd, og, kh, kw), None, s[1:], p[1:], op[1:], groups,
                         d[1:])
    return _unbatch(_with_bias(_from_planes(y, n, dout), bias, who), input, 3)


# ---- pooling ----

def _pool_args(n, kernel_size, stride, padding, dilation, who):
    k = _ints(kernel_size, n, who, "kernel_size")
    empty = stride is None or (isinstance(stride, (list, tuple)) and not stride)
    s = k if empty else _ints(stride, n, who, "stride")
    p = _ints(padding, n, who, "padding", positive=False)
    d = _ints(dilation, n, who, "dilation")
    for i in range(n):
        if p[i] > (d[i] * (k[i] - 1) + 1) // 2:
            raise _C.InvalidArgumentError(f"[{who}] pad should be at most half of effective kernel size, but got "
                             f"pad={p}, kernel_size={k} and dilation={d}")
    return k, s, p, d


def _out_len(size, k, s, p, d, ceil_mode, who):
    reach = d * (k - 1) + 1
    if size + 2 * p < reach:
        raise _C.InvalidArgumentError(f"[{who}] the window ({reach}) is larger than the padded input ({size + 2 * p})")
    out = (size + 2 * p - reach + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:  # no window may start in the right padding
        out -= 1
    return out


def _padded(x, n, k, s, p, d, outs, value):
    """x padded on its last n dims: p on the left, p plus whatever the last
    window reaches past (ceil_mode) on the right."""
    from .functional import pad
    amounts = []
    for i in reversed(range(n)):
        size = x.shape[x.ndim - n + i]
        right = max(p[i], (outs[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 - size - p[i])
        amounts += [p[i], right]
    return pad(x, amounts, value=value) if any(amounts) else x


def _pool3d_taps(xp, k, s, d, outs, plane_pool):
    """plane_pool over each depth tap's slab of the padded (N, C, D, H, W)
    input: a list of (N, C, outD, outH, outW) results (plane_pool's first
    output if it gives several, and the list of its second outputs)."""
    n, c = xp.shape[:2]
    firsts, seconds = [], []
    last = s[0] * (outs[0] - 1) + 1
    for t in range(k[0]):
        slab = xp[:, :, t * d[0]:t * d[0] + last:s[0]]
        r = plane_pool(slab.reshape(n, c * outs[0], *slab.shape[3:]))
        r = r if isinstance(r, tuple) else (r,)
        firsts.append(r[0][..., :outs[1], :outs[2]].reshape(n, c, *outs))
        if len(r) > 1:
            seconds.append(r[1][..., :outs[1], :outs[2]].reshape(n, c, *outs))
    return firsts, seconds


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over kD x kH x kW windows of (N, C, D, H, W) or (C, D, H, W); the
    indices are flat positions d*H*W + h*W + w in each input volume."""
    from .functional import max_pool2d
    who = "max_pool3d"
    x, added = _batched(input, 3, who)
    if not x.is_floating_point():
        raise TypeError(f"[{who}] needs a floating input, got {x.dtype}")
    k, s, p, d = _pool_args(3, kernel_size, stride, padding, dilation, who)
    size = x.shape[2:]
    outs = [_out_len(size[i], k[i], s[i], p[i], d[i], ceil_mode, who) for i in range(3)]
    xp = _padded(x, 3, k, s, p, d, outs, -math.inf)
    wp = xp.shape[4]
    values, idx = _pool3d_taps(xp, k, s, d, outs,
                               lambda t: max_pool2d(t, k[1:], s[1:], 0, d[1:], False, True))
    out, tap = _C.stack(values, 0).max(0)
    if not return_indices:
        return out.squeeze(0) if added else out
    flat = _C.stack(idx, 0).gather(0, tap.unsqueeze(0)).squeeze(0)  # in the padded plane
    depth = _C.arange(outs[0], dtype=_C.int64).reshape(-1, 1, 1) * s[0] + tap * d[0] - p[0]
    h, w = flat // wp - p[1], flat % wp - p[2]
    index = (depth * size[1] + h) * size[2] + w
    return (out.squeeze(0), index.squeeze(0)) if added else (out, index)


def _sum_pool3d(xp, k, s, d, outs):
    from .functional import avg_pool2d
    area = k[1] * k[2]
    sums, _ = _pool3d_taps(xp, k, s, (d[0], 1, 1), outs,
                           lambda t: avg_pool2d(t, k[1:], s[1:], 0, False, True) * area)
    total = sums[0]
    for t in sums[1:]:
        total = total + t
    return total


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over kD x kH x kW windows of (N, C, D, H, W) or (C, D, H, W)."""
    from .functional import pad
    who = "avg_pool3d"
    x, added = _batched(input, 3, who)
    k, s, p, _ = _pool_args(3, kernel_size, stride, padding, 1, who)
    size = x.shape[2:]
    outs = [_out_len(size[i], k[i], s[i], p[i], 1, ceil_mode, who) for i in range(3)]
    ones = (1, 1, 1)
    total = _sum_pool3d(_padded(x, 3, k, s, p, ones, outs, 0.0), k, s, ones, outs)
    if divisor_override is not None:
        div = _number(divisor_override, who, "divisor_override")
        if div == 0:
            raise _C.InvalidArgumentError(f"[{who}] divisor must be not zero")
        out = total / div
    else:
        # each window's divisor: the cells it covers inside the input, or
        # inside the input and its padding with count_include_pad
        mask = _C.ones(1, 1, *size, dtype=x.dtype)
        if count_include_pad:
            mask = pad(mask, [v for i in reversed(range(3)) for v in (p[i], p[i])], value=1.0)
            mask = _padded(mask, 3, k, s, (0, 0, 0), ones, outs, 0.0)
        else:
            mask = _padded(mask, 3, k, s, p, ones, outs, 0.0)
        count = _sum_pool3d(mask, k, s, ones, outs)
        out = total / count
    return out.squeeze(0) if added else out



def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    from .functional import max_pool2d
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _as_2d(input, who):
    """(N, C, L) or (C, L) -> a 4-D (N, C, 1, L) view."""
    x, added = _batched(input, 1, who)
    return x.unsqueeze(2), added


def _from_2d(y, added):
    y = y.squeeze(2)
    return y.squeeze(0) if added else y


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over windows of (N, C, L) or (C, L); indices are positions in L."""
    from .functional import max_pool2d
    who = "max_pool1d"
    (k,), (s,), (p,), (d,) = _pool_args(1, kernel_size, stride, padding, dilation, who)
    x, added = _as_2d(input, who)
    r = max_pool2d(x, (1, k), (1, s), (0, p), (1, d), ceil_mode, return_indices)
    if return_indices:
        return _from_2d(r[0], added), _from_2d(r[1], added)
    return _from_2d(r, added)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Mean over windows of (N, C, L) or (C, L)."""
    from .functional import avg_pool2d
    who = "avg_pool1d"
    (k,), (s,), (p,), _ = _pool_args(1, kernel_size, stride, padding, 1, who)
    x, added = _as_2d(input, who)
    return _from_2d(avg_pool2d(x, (1, k), (1, s), (0, p), ceil_mode, count_include_pad), added)


def _lp_norm(norm_type, who):
    """The power p of an Lp pool: a nonzero number (the result takes 1/p)."""
    p = _number(norm_type, who, "norm_type")
    if p == 0:
        raise ValueError(f"[{who}] norm_type must be nonzero, got {norm_type}")
    return p


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum of x^p over each window)^(1/p), as PyTorch computes it (negative
    window sums become 0)."""
    _tensors("lp_pool1d", input=input)
    p = _lp_norm(norm_type, "lp_pool1d")
    (k,) = _ints(kernel_size, 1, "lp_pool1d", "kernel_size")
    out = avg_pool1d(input.pow(p), k, stride, 0, ceil_mode)
    return (_C.sign(out) * _C.relu(_C.abs(out))).mul(k).pow(1.0 / p)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    from .functional import avg_pool2d
    _tensors("lp_pool2d", input=input)
    p = _lp_norm(norm_type, "lp_pool2d")
    kh, kw = _ints(kernel_size, 2, "lp_pool2d", "kernel_size")
    out = avg_pool2d(input.pow(p), (kh, kw), stride, 0, ceil_mode)
    return (_C.sign(out) * _C.relu(_C.abs(out))).mul(kh * kw).pow(1.0 / p)


# ---- adaptive pooling ----

def _adaptive_sizes(input, n, output_size, who):
    x, added = _batched(input, n, who)
    if isinstance(output_size, int) or output_size is None:
        size = (output_size,) * n
    elif isinstance(output_size, (tuple, list)):
        size = tuple(output_size)
    else:
        raise TypeError(f"[{who}] output_size must be an int or a tuple of {n}, got {type(output_size).__name__}")
    if len(size) != n:
        raise _C.InvalidArgumentError(f"[{who}] output_size must be an int or {n} of them, got {output_size!r}")
    size = tuple(x.shape[2 + i] if v is None else v for i, v in enumerate(size))
    for i, v in enumerate(size):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (v == 0 and x.shape[2 + i]):
            raise _C.InvalidArgumentError(f"[{who}] output_size {size} must be non-negative ints (0 only for an "
                             f"empty input dim)")
    shape = list(x.shape[:2]) + list(size)
    _output_fits(shape, x.dtype, who, f"output_size {size}")  # before a loop over its windows
    return x, added, size, shape


def _windows(length, out):
    """PyTorch's adaptive windows: [floor(i*L/out), ceil((i+1)*L/out))."""
    return [((i * length) // out, -((-(i + 1) * length) // out)) for i in range(out)]


def _adaptive_avg(input, n, output_size, who):
    """adaptive_avg_pool1d and 3d on the 2-d kernel, which sums each window
    of a plane alone: 1-d as planes of one row; 3-d as (H, W) planes, then
    (D, H' W') planes whose windows along the second dim are single
    elements. (A product with a matrix of window weights, used before,
    spread an inf or NaN in one window to every other: 0 * inf.)"""
    x, added, size, shape = _adaptive_sizes(input, n, output_size, who)
    spatial = list(x.shape[2:])
    if 0 in shape:  # nothing to average: an empty batch, channel or output
        x = _C.zeros(shape, dtype=x.dtype) + x.sum() * 0 if x.requires_grad else \
            _C.zeros(shape, dtype=x.dtype)
    elif 0 in spatial:  # every window is empty: its mean is NaN (0 / 0), as in PyTorch
        x = (x.sum(list(range(2, 2 + n)), keepdim=True) / 0.0).expand(shape).contiguous()
    elif n == 1:
        x = _C.adaptive_avg_pool2d(x.reshape(shape[:2] + [1] + spatial), (1, size[0])).reshape(shape)
    else:
        (d, h, w), (od, oh, ow) = spatial, size
        y = _C.adaptive_avg_pool2d(x.reshape([shape[0], shape[1] * d, h, w]), (oh, ow))
        x = _C.adaptive_avg_pool2d(y.reshape(shape[:2] + [d, oh * ow]), (od, oh * ow)).reshape(shape)
    return x.squeeze(0) if added else x


def adaptive_avg_pool1d(input, output_size):
    return _adaptive_avg(input, 1, output_size, "adaptive_avg_pool1d")


def adaptive_avg_pool3d(input, output_size):
    return _adaptive_avg(input, 3, output_size, "adaptive_avg_pool3d")


def _adaptive_max(input, n, output_size, return_indices, who):
    """Max over each window, one window tuple at a time; the indices are flat
    positions in each input plane/volume."""
    import itertools
    x, added, size, shape = _adaptive_sizes(input, n, output_size, who)
    spatial = list(x.shape[2:])
    lead = list(x.shape[:2])
    values, indices = [], []
    # an empty output has no windows to take (an empty batch's would reshape nothing)
    windows = () if 0 in shape else itertools.product(*[_windows(spatial[i], size[i]) for i in range(n)])
    for window in windows:
        region = x[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in window)]
        extent = [b - a for a, b in window]
        v, i = region.reshape(lead + [-1]).max(-1)
        flat = _C.zeros_like(i)
        for dim in range(n):  # unravel in the window, then ravel in the input
            inner = 1
            for e in extent[dim + 1:]:
                inner *= e
            pos = (i // inner) % extent[dim] + window[dim][0]
            stride = 1
            for e in spatial[dim + 1:]:
                stride *= e
            flat = flat + pos * stride
        values.append(v)
        indices.append(flat)
    if values:
        out, idx = _C.stack(values, -1).reshape(shape), _C.stack(indices, -1).reshape(shape)
    else:
        out, idx = _C.zeros(shape, dtype=x.dtype), _C.zeros(shape, dtype=_C.int64)
    if added:
        out, idx = out.squeeze(0), idx.squeeze(0)
    return (out, idx) if return_indices else out


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return _adaptive_max(input, 1, output_size, return_indices, "adaptive_max_pool1d")


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _adaptive_max(input, 2, output_size, return_indices, "adaptive_max_pool2d")


def adaptive_max_pool3d(input, output_size, return_indices=False):
    return _adaptive_max(input, 3, output_size, return_indices, "adaptive_max_pool3d")


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool3d(input, output_size, True)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Place each value at its max_pool3d index, zeros elsewhere."""
    size = _unpool_size(input, indices, 3, kernel_size, stride, padding, output_size, "max_unpool3d")
    return _unpool(input, indices, size, "max_unpool3d")
