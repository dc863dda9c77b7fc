"""More of musa.nn.functional, as composites of differentiable ops: channel
dropout and alpha dropout, pixel (un)shuffle, interpolate, instance norm,
local response norm and the bilinear layer's function. Re-exported by
musa.nn.functional."""
import math
import warnings

from .. import _C
from .._functions import _number, _tensors
from ..autograd import no_grad

__all__ = ["unfold", "fold", "max_unpool1d", "max_unpool2d", "embedding_bag", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
           "pixel_shuffle", "pixel_unshuffle", "interpolate", "upsample", "upsample_nearest",
           "upsample_bilinear", "instance_norm", "local_response_norm", "bilinear"]


def _check_p(p, who):
    if not 0.0 <= _number(p, who, "p") <= 1.0:
        raise ValueError(f"[{who}] dropout probability has to be between 0 and 1, but got {p}")


def _channel_dropout(input, p, training, inplace, spatial, who):
    """Zero whole channels: input (N, C, *spatial) or (C, *spatial)."""
    _tensors(who, input=input)
    _check_p(p, who)
    if input.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"[{who}] expected a {spatial + 1}D or {spatial + 2}D input, got "
                         f"{input.ndim}D input of shape {tuple(input.shape)}")
    if not training or p == 0.0:
        return input
    lead = input.ndim - spatial
    mask_shape = list(input.shape[:lead]) + [1] * spatial
    if p == 1.0:
        out = _C.mul(input, _C.zeros(mask_shape, dtype=input.dtype))
    else:
        keep = _C.bernoulli(_C.full(mask_shape, 1.0 - p, dtype=_C.float32)).to(input.dtype)
        out = _C.mul(input, _C.mul(keep, 1.0 / (1.0 - p)))
    return input.copy_(out) if inplace else out


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) inputs."""
    return _channel_dropout(input, p, training, inplace, 1, "dropout1d")


def _deprecated_channel_dropout(input, p, training, inplace, spatial, who):
    """dropout2d/3d of an input with other dims: as PyTorch does (with its
    warning), the input is taken as one unbatched sample whose channels are
    its first dim (so a (N, C) input loses whole rows)."""
    _tensors(who, input=input)
    if input.ndim in (spatial + 1, spatial + 2):
        return _channel_dropout(input, p, training, inplace, spatial, who)
    warnings.warn(f"{who}: Received a {input.ndim}-D input to {who}, which is deprecated and will "
                  f"result in an error in a future release. To retain the behavior and silence this "
                  f"warning, please use dropout instead. Note that {who} exists to provide "
                  f"channel-wise dropout on inputs with {spatial} spatial dimensions, a channel "
                  f"dimension, and an optional batch dimension (i.e. {spatial + 1}D or "
                  f"{spatial + 2}D inputs).", stacklevel=3)
    _check_p(p, who)
    if not training or p == 0.0 or input.ndim == 0:
        return input
    mask_shape = [input.shape[0]] + [1] * (input.ndim - 1)
    keep = _C.bernoulli(_C.full(mask_shape, 1.0 - p, dtype=_C.float32)).to(input.dtype)
    out = _C.mul(input, _C.mul(keep, 1.0 / (1.0 - p)) if p < 1.0 else keep)
    return input.copy_(out) if inplace else out


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) or (C, H, W) inputs."""
    return _deprecated_channel_dropout(input, p, training, inplace, 2, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs."""
    return _deprecated_channel_dropout(input, p, training, inplace, 3, "dropout3d")


def _alpha(input, p, training, inplace, mask_shape, who):
    _check_p(p, who)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input.copy_(_C.zeros_like(input)) if inplace else _C.zeros_like(input)
    from .functional import _SELU_ALPHA, _SELU_SCALE
    # dropped units take SELU's negative saturation; a and b keep mean and variance
    alpha_p = -_SELU_ALPHA * _SELU_SCALE
    a = ((1 - p) * (1 + p * alpha_p ** 2)) ** -0.5
    b = -a * alpha_p * p
    keep = _C.bernoulli(_C.full(mask_shape, 1.0 - p, dtype=_C.float32)).to(input.dtype)
    out = _C.add(_C.mul(_C.add(_C.mul(input, keep), _C.mul(_C.sub(1.0, keep), alpha_p)), a), b)
    return input.copy_(out) if inplace else out


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: keeps the mean and variance of its input."""
    _tensors("alpha_dropout", input=input)
    return _alpha(input, p, training, inplace, list(input.shape), "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels."""
    _tensors("feature_alpha_dropout", input=input)
    shape = list(input.shape[:2]) + [1] * max(input.ndim - 2, 0)
    return _alpha(input, p, training, inplace, shape, "feature_alpha_dropout")


# ---- pixel shuffle ----

def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    _tensors("pixel_shuffle", input=input)
    r = upscale_factor
    if not isinstance(r, int) or r <= 0:
        raise ValueError(f"[pixel_shuffle] upscale_factor must be a positive int, got {r!r}")
    if input.ndim < 3 or input.shape[-3] % (r * r):
        raise RuntimeError(f"[pixel_shuffle] expected an input of at least 3 dims whose channels "
                           f"({input.shape[-3] if input.ndim >= 3 else None}) divide by "
                           f"upscale_factor^2 = {r * r}, got shape {tuple(input.shape)}")
    *lead, c, h, w = input.shape
    oc = c // (r * r)
    x = _C.reshape(input, lead + [oc, r, r, h, w])
    n = len(lead)
    x = _C.permute(x, list(range(n)) + [n, n + 3, n + 1, n + 4, n + 2])
    return _C.reshape(x, lead + [oc, h * r, w * r])


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""
    _tensors("pixel_unshuffle", input=input)
    r = downscale_factor
    if not isinstance(r, int) or r <= 0:
        raise ValueError(f"[pixel_unshuffle] downscale_factor must be a positive int, got {r!r}")
    if input.ndim < 3 or input.shape[-2] % r or input.shape[-1] % r:
        raise RuntimeError(f"[pixel_unshuffle] expected an input of at least 3 dims whose height "
                           f"and width divide by {r}, got shape {tuple(input.shape)}")
    *lead, c, h, w = input.shape
    x = _C.reshape(input, lead + [c, h // r, r, w // r, r])
    n = len(lead)
    x = _C.permute(x, list(range(n)) + [n, n + 2, n + 4, n + 1, n + 3])
    return _C.reshape(x, lead + [c * r * r, h // r, w // r])


# ---- interpolate ----

_MODES = {"nearest": (1, 2, 3), "nearest-exact": (1, 2, 3), "linear": (1,), "bilinear": (2,),
          "trilinear": (3,), "bicubic": (2,), "area": (1, 2, 3)}


def _out_sizes(input, size, scale_factor, n, recompute):
    """Output sizes and the scale (input / output) each dim's index map uses."""
    ins = list(input.shape[2:])
    if (size is None) == (scale_factor is None):
        raise ValueError("[interpolate] give exactly one of size and scale_factor")
    if size is not None:
        sizes = [size] * n if isinstance(size, int) else \
            list(size) if isinstance(size, (list, tuple)) else None
        if sizes is None or len(sizes) != n or not all(isinstance(s, int) and s > 0
                                                       for s in sizes):
            raise ValueError(f"[interpolate] size must be {n} positive ints for a {n + 2}D input, "
                             f"got {size!r}")
        return sizes, [i / o for i, o in zip(ins, sizes)]
    scales = [scale_factor] * n if isinstance(scale_factor, (int, float)) else \
        list(scale_factor) if isinstance(scale_factor, (list, tuple)) else None
    if scales is None or len(scales) != n or not all(isinstance(s, (int, float)) and s > 0 and
                                                     math.isfinite(s) for s in scales):
        raise ValueError(f"[interpolate] scale_factor must be {n} positive finite numbers for a "
                         f"{n + 2}D input, got {scale_factor!r}")
    prods = [i * s for i, s in zip(ins, scales)]
    if not all(p < 2.0 ** 62 for p in prods):  # (inf for 1e308 times a size)
        raise ValueError(f"[interpolate] scale_factor {scale_factor!r} gives output sizes "
                         f"{[f'{p:g}' for p in prods]}, beyond any tensor's")
    sizes = [int(math.floor(p)) for p in prods]
    if any(s <= 0 for s in sizes):
        raise ValueError(f"[interpolate] output size {sizes} has a dim below 1")
    if recompute:
        return sizes, [i / o for i, o in zip(ins, sizes)]
    return sizes, [1.0 / s for s in scales]


def _source(scale, in_size, out_size, align_corners, cubic):
    """The source coordinate of each output index (PyTorch's
    area_pixel_compute_source_index), as floats."""
    d = _C.arange(out_size, dtype=_C.float64)
    if align_corners:
        return _C.mul(d, (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0)
    src = _C.sub(_C.mul(_C.add(d, 0.5), scale), 0.5)
    return src if cubic else _C.clamp(src, min=0.0)


def _take(x, dim, idx):
    return x.index_select(dim, idx)


def _taps(x, dim, index, weights):
    """Sum over taps k of x's rows index[k] times weights[k] along dim, in
    one pass (_C.resample): index and weights are lists of (out,) tensors,
    the weights read in x's compute precision."""
    wdt = _C.float64 if x.dtype == _C.float64 else _C.float32
    return _C.resample(x, dim, _C.stack(index, 1), _C.stack([w.to(wdt) for w in weights], 1))


def _linear_taps(n, out_size, scale, align_corners):
    """The two taps of each output along a dim of n: ([i0, i1], [w0, w1])."""
    src = _source(scale, n, out_size, align_corners, False)
    i0 = _C.clamp(_C.floor(src), max=float(n - 1))
    lam = _C.sub(src, i0)
    i0 = i0.to(_C.int64)
    i1 = _C.clamp(_C.add(i0, 1), max=n - 1)
    return [i0, i1], [_C.sub(1.0, lam), lam]


def _linear_dim(x, dim, out_size, scale, align_corners):
    # a w0 + b w1, as PyTorch: a + (b - a) w1 made an inf at a tap of
    # weight 1 NaN (inf + (b - inf) 0), and its neighbours' blends NaN
    return _taps(x, dim, *_linear_taps(x.shape[dim], out_size, scale, align_corners))


def _cubic_weights(t, a=-0.75):
    """The four taps' weights (Keys' cubic convolution, A = -0.75)."""
    def near(u):  # |u| <= 1
        return _C.add(_C.mul(_C.mul(_C.sub(_C.mul(u, a + 2), a + 3), u), u), 1.0)

    def far(u):  # 1 < |u| < 2
        return _C.sub(_C.mul(_C.add(_C.mul(_C.sub(_C.mul(u, a), 5 * a), u), 8 * a), u), 4 * a)

    return [far(_C.add(t, 1.0)), near(t), near(_C.sub(1.0, t)), far(_C.sub(2.0, t))]


def _cubic_dim(x, dim, out_size, scale, align_corners):
    n = x.shape[dim]
    src = _source(scale, n, out_size, align_corners, True)
    i0 = _C.floor(src)
    t = _C.sub(src, i0)
    i0 = i0.to(_C.int64)
    index = [_C.clamp(_C.add(i0, k - 1), min=0, max=n - 1) for k in range(4)]
    return _taps(x, dim, index, _cubic_weights(t))


def _nearest_dim(x, dim, out_size, scale, exact):
    n = x.shape[dim]
    d = _C.arange(out_size, dtype=_C.float64)
    src = _C.floor(_C.mul(_C.add(d, 0.5), scale) if exact else _C.mul(d, scale))
    idx = _C.clamp(src, max=float(n - 1)).to(_C.int64)
    return _take(x, dim, idx)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims of (N, C, *spatial) inputs: nearest,
    nearest-exact, (bi/tri)linear, bicubic or area, as PyTorch computes
    them. Linear modes and bicubic are separable: one pass per dim."""
    _tensors("interpolate", input=input)
    if not isinstance(mode, str) or mode not in _MODES:
        raise ValueError(f"[interpolate] unknown mode {mode!r}; expected one of "
                         f"{', '.join(_MODES)}")
    n = input.ndim - 2
    if n not in _MODES[mode]:
        raise ValueError(f"[interpolate] mode {mode!r} needs a "
                         f"{' or '.join(str(d + 2) + 'D' for d in _MODES[mode])} input, got "
                         f"{input.ndim}D input of shape {tuple(input.shape)}")
    if antialias:
        raise NotImplementedError("[interpolate] antialias=True is not supported")
    linear = mode in ("linear", "bilinear", "trilinear", "bicubic")
    if align_corners is not None and not linear:
        raise ValueError(f"[interpolate] align_corners only applies to linear modes and bicubic, "
                         f"not {mode!r}")
    sizes, scales = _out_sizes(input, size, scale_factor, n, bool(recompute_scale_factor))
    if not input.is_floating_point() and mode != "nearest" and mode != "nearest-exact":
        raise TypeError(f"[interpolate] mode {mode!r} needs a floating-point input, got "
                        f"{input.dtype}")
    if mode == "area":
        from .functional import adaptive_avg_pool2d
        if n == 2:
            return adaptive_avg_pool2d(input, sizes)
        if n == 1:
            return adaptive_avg_pool2d(input.unsqueeze(-2), [1, sizes[0]]).squeeze(-2)
        raise NotImplementedError("[interpolate] mode 'area' supports 3D and 4D inputs")
    x = input
    for i in range(n):
        dim = 2 + i
        if mode in ("nearest", "nearest-exact"):
            if sizes[i] != x.shape[dim] or scales[i] != 1.0:
                x = _nearest_dim(x, dim, sizes[i], scales[i], mode == "nearest-exact")
        elif mode == "bicubic":
            x = _cubic_dim(x, dim, sizes[i], scales[i], bool(align_corners))
        else:
            x = _linear_dim(x, dim, sizes[i], scales[i], bool(align_corners))
    return x


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, "nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, "bilinear", align_corners=True)


# ---- normalisation ----

def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalise each channel of each sample over its spatial dims; with
    running stats (and use_input_stats) they follow the batch's mean of the
    per-instance statistics, as batch norm's do."""
    _tensors("instance_norm", input=input)
    for what, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and not isinstance(t, _C.Tensor):
            raise TypeError(f"[instance_norm] {what} must be a Tensor or None, got "
                            f"{type(t).__name__}")
    if input.ndim < 3:
        raise ValueError(f"[instance_norm] expected an input with at least 3 dims (N, C, ...), got "
                         f"shape {tuple(input.shape)}")
    momentum = _number(momentum, "instance_norm", "momentum")
    eps = _number(eps, "instance_norm", "eps")
    dims = list(range(2, input.ndim))
    c = input.shape[1]
    for what, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and tuple(t.shape) != (c,):
            raise ValueError(f"[instance_norm] {what} should have the input's {c} channels, got "
                             f"shape {tuple(t.shape)}")
    if use_input_stats:
        var, mean = input.var(dims, correction=0, keepdim=True), input.mean(dims, keepdim=True)
        if running_mean is not None or running_var is not None:
            count = 1
            for d in dims:
                count *= input.shape[d]
            with no_grad():
                bm = mean.detach().reshape([input.shape[0], c]).mean(0)
                bv = var.detach().reshape([input.shape[0], c]).mean(0) * (count / max(count - 1, 1))
                if running_mean is not None:
                    running_mean.mul_(1 - momentum).add_(bm * momentum)
                if running_var is not None:
                    running_var.mul_(1 - momentum).add_(bv * momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("[instance_norm] use_input_stats=False needs running_mean and "
                             "running_var")
        shape = [1, c] + [1] * len(dims)
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
    y = _C.mul(_C.sub(input, mean), _C.rsqrt(_C.add(var, eps)))
    shape = [1, c] + [1] * len(dims)
    if weight is not None:
        y = _C.mul(y, weight.reshape(shape))
    if bias is not None:
        y = _C.add(y, bias.reshape(shape))
    return y


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha/size * sum of x^2 over `size` neighbouring channels)^beta."""
    _tensors("local_response_norm", input=input)
    if input.ndim < 3:
        raise ValueError(f"[local_response_norm] expected an input with at least 3 dims, got "
                         f"shape {tuple(input.shape)}")
    if not isinstance(size, int) or size <= 0:
        raise ValueError(f"[local_response_norm] size must be a positive int, got {size!r}")
    sq = _C.mul(input, input)
    c = input.shape[1]
    # sum over channels [i - size//2, i + (size-1)//2] through a zero-padded cumulative sum
    lo, hi = size // 2, (size - 1) // 2
    pad_shape = list(sq.shape)
    pad_shape[1] = lo + 1
    z1 = _C.zeros(pad_shape, dtype=sq.dtype)
    pad_shape[1] = hi
    z2 = _C.zeros(pad_shape, dtype=sq.dtype)
    cs = _C.cumsum(_C.cat([z1, sq, z2], 1), 1)
    win = _C.sub(cs.narrow(1, size, c), cs.narrow(1, 0, c))
    div = _C.pow(_C.add(_C.mul(win, alpha / size), k), beta)
    return _C.div(input, div)


def bilinear(input1, input2, weight, bias=None):
    """y_k = x1^T W_k x2 + b_k: input1 (*, n1), input2 (*, n2), weight
    (out, n1, n2)."""
    _tensors("bilinear", input1=input1, input2=input2, weight=weight)
    if input1.ndim < 1 or input2.ndim < 1 or weight.ndim != 3 or input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"[bilinear] shapes do not match: input1 {tuple(input1.shape)}, input2 "
                           f"{tuple(input2.shape)}, weight {tuple(weight.shape)}")
    o, n1, n2 = weight.shape
    lead = list(input1.shape[:-1])
    a = _C.reshape(input1, [-1, n1])
    b = _C.reshape(input2, [-1, n2])
    t = _C.matmul(a, _C.reshape(weight.permute(1, 0, 2), [n1, o * n2]))  # (B, o*n2)
    y = _C.mul(_C.reshape(t, [-1, o, n2]), b.unsqueeze(1)).sum(2)
    if bias is not None:
        y = _C.add(y, bias)
    return _C.reshape(y, lead + [o])


# ---- im2col ----

def _pair(v, who, what):
    t = (v, v) if isinstance(v, int) else tuple(v) if isinstance(v, (tuple, list)) else None
    if t is None or len(t) != 2 or not all(isinstance(i, int) for i in t):
        raise ValueError(f"[{who}] {what} must be an int or 2 ints, got {v!r}")
    return t


def _grid(who, kernel_size, dilation, padding, stride):
    k, d = _pair(kernel_size, who, "kernel_size"), _pair(dilation, who, "dilation")
    p, s = _pair(padding, who, "padding"), _pair(stride, who, "stride")
    if min(k) <= 0 or min(d) <= 0 or min(s) <= 0 or min(p) < 0:
        raise ValueError(f"[{who}] kernel_size, dilation and stride must be positive and padding "
                         f"non-negative, got {k}, {d}, {s}, {p}")
    return k, d, p, s


def _blocks(size, k, d, p, s, who):
    n = [(size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    if min(n) <= 0:
        raise RuntimeError(f"[{who}] the sliding blocks do not fit: size {tuple(size)}, kernel {k}, "
                           f"dilation {d}, padding {p}, stride {s}")
    return n


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C kh kw, L), the sliding blocks as
    columns (channel-major, then the kernel's rows), through a strided view
    of the zero-padded input."""
    _tensors("unfold", input=input)
    if input.ndim not in (3, 4):
        raise ValueError(f"[unfold] expected a 3-D or 4-D input, got shape {tuple(input.shape)}")
    k, d, p, s = _grid("unfold", kernel_size, dilation, padding, stride)
    x = input.unsqueeze(0) if input.ndim == 3 else input
    n, c = x.shape[0], x.shape[1]
    oh, ow = _blocks(x.shape[2:], k, d, p, s, "unfold")
    if p != (0, 0):
        x = _C._pad(x, [p[1], p[1], p[0], p[0]], 0.0)
    x = x.contiguous()
    sn, sc, sh, sw = x.stride()
    v = _C.as_strided(x, [n, c, k[0], k[1], oh, ow],
                      [sn, sc, d[0] * sh, d[1] * sw, s[0] * sh, s[1] * sw], x.storage_offset())
    out = _C.reshape(v, [n, c * k[0] * k[1], oh * ow])
    return out.squeeze(0) if input.ndim == 3 else out


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, the adjoint of unfold: (N, C kh kw, L) -> (N, C, H, W),
    overlapping blocks summed (an index_add into the padded image)."""
    _tensors("fold", input=input)
    if input.ndim not in (2, 3):
        raise ValueError(f"[fold] expected a 2-D or 3-D input, got shape {tuple(input.shape)}")
    k, d, p, s = _grid("fold", kernel_size, dilation, padding, stride)
    size = _pair(output_size, "fold", "output_size")
    x = input.unsqueeze(0) if input.ndim == 2 else input
    n, ckk, L = x.shape
    if ckk % (k[0] * k[1]):
        raise RuntimeError(f"[fold] expected the size of dim 1 ({ckk}) to be divisible by the "
                           f"product of kernel_size ({k[0] * k[1]})")
    oh, ow = _blocks(size, k, d, p, s, "fold")
    if oh * ow != L:
        raise RuntimeError(f"[fold] expected {oh * ow} blocks (dim 2) for output_size {size}, "
                           f"kernel {k}, dilation {d}, padding {p}, stride {s}; got {L}")
    c = ckk // (k[0] * k[1])
    hp, wp = size[0] + 2 * p[0], size[1] + 2 * p[1]
    # the padded image's flat position of each (ki, kj, block)
    ki = _C.arange(k[0], dtype=_C.int64).reshape([k[0], 1, 1, 1])
    kj = _C.arange(k[1], dtype=_C.int64).reshape([1, k[1], 1, 1])
    bi = _C.arange(oh, dtype=_C.int64).reshape([1, 1, oh, 1])
    bj = _C.arange(ow, dtype=_C.int64).reshape([1, 1, 1, ow])
    pos = (bi * s[0] + ki * d[0]) * wp + bj * s[1] + kj * d[1]
    cols = _C.reshape(x, [n, c, k[0] * k[1] * L])
    img = _C.zeros([n, c, hp * wp], dtype=x.dtype).index_add(2, _C.reshape(pos, [-1]), cols)
    img = _C.reshape(img, [n, c, hp, wp])[:, :, p[0]:p[0] + size[0], p[1]:p[1] + size[1]]
    return img.squeeze(0) if input.ndim == 2 else img


# ---- max unpooling ----

def _unpool(input, indices, out_spatial, who):
    lead = list(input.shape[:-len(out_spatial)])
    total = 1
    for v in out_spatial:
        total *= v
    flat_in = _C.reshape(input, lead + [-1])
    flat_idx = _C.reshape(indices, lead + [-1])
    if flat_idx.numel() and (int(flat_idx.min()) < 0 or int(flat_idx.max()) >= total):
        raise IndexError(f"[{who}] an index is out of range for an output of {total} elements "
                         f"per plane")
    out = _C.zeros(lead + [total], dtype=input.dtype).scatter(len(lead), flat_idx, flat_in)
    return _C.reshape(out, lead + list(out_spatial))


def _ints(v, n, who, what, positive=True):
    t = (v,) * n if isinstance(v, int) and not isinstance(v, bool) else v
    if not isinstance(t, (tuple, list)) or len(t) != n or \
            not all(isinstance(i, int) and not isinstance(i, bool) for i in t) or \
            any(i < (1 if positive else 0) for i in t):
        raise ValueError(f"[{who}] {what} must be {'a positive' if positive else 'a non-negative'} "
                         f"int or {n} of them, got {v!r}")
    return tuple(t)


def _unpool_size(input, indices, n, kernel_size, stride, padding, output_size, who):
    """Check the arguments; the output's spatial size."""
    _tensors(who, input=input, indices=indices)
    if input.ndim not in (n + 1, n + 2):
        raise ValueError(f"[{who}] expected a {n + 1}-D or {n + 2}-D input, got shape "
                         f"{tuple(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise ValueError(f"[{who}] indices have shape {tuple(indices.shape)}, the input "
                         f"{tuple(input.shape)}")
    k = _ints(kernel_size, n, who, "kernel_size")
    s = k if stride is None else _ints(stride, n, who, "stride")
    p = _ints(padding, n, who, "padding", positive=False)
    default = [(input.shape[-n + i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(n)]
    if output_size is None:
        size = default
    else:
        if not isinstance(output_size, (tuple, list)) or len(output_size) < n or \
                not all(isinstance(v, int) for v in output_size):
            raise ValueError(f"[{who}] output_size must be {n} or more ints, got {output_size!r}")
        size = list(output_size)[-n:]
        for i in range(n):
            if not default[i] - s[i] < size[i] < default[i] + s[i]:
                raise ValueError(f"[{who}] invalid output_size {list(output_size)}: expected "
                                 f"sizes between {[v - t + 1 for v, t in zip(default, s)]} and "
                                 f"{[v + t - 1 for v, t in zip(default, s)]}")
    if any(v <= 0 for v in size):
        raise ValueError(f"[{who}] the output would have size {size}")
    return size


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Place each value at its max_pool1d index, zeros elsewhere."""
    size = _unpool_size(input, indices, 1, kernel_size, stride, padding, output_size,
                        "max_unpool1d")
    return _unpool(input, indices, size, "max_unpool1d")


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Place each value at its max_pool2d index (a flat position in its
    output plane), zeros elsewhere."""
    size = _unpool_size(input, indices, 2, kernel_size, stride, padding, output_size,
                        "max_unpool2d")
    return _unpool(input, indices, size, "max_unpool2d")


# ---- embedding bags ----

def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sum, mean or max of the embeddings of each bag: the rows of a 2-D
    input, or the pieces of a 1-D input that offsets start. Entries equal to
    padding_idx are left out (an empty bag gives zeros)."""
    from .functional import embedding
    _tensors("embedding_bag", input=input, weight=weight)
    for what, t in (("offsets", offsets), ("per_sample_weights", per_sample_weights)):
        if t is not None and not isinstance(t, _C.Tensor):
            raise TypeError(f"[embedding_bag] {what} must be a Tensor or None, got "
                            f"{type(t).__name__}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"[embedding_bag] mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"[embedding_bag] per_sample_weights was not None; it is only "
                                  f"supported for mode='sum', got mode={mode!r}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("[embedding_bag] offsets has to be None if input is 2-D")
        b, length = input.shape
        flat = _C.reshape(input, [-1])
        bag_of = _C.arange(b * length, dtype=_C.int64) // max(length, 1)
    elif input.ndim == 1:
        if offsets is None or offsets.ndim != 1:
            raise ValueError("[embedding_bag] offsets has to be a 1-D tensor when input is 1-D")
        n = input.shape[0]
        b = offsets.shape[0] - (1 if include_last_offset else 0)
        if include_last_offset and b < 0:
            raise ValueError("[embedding_bag] the last offset must be the input length")
        starts_t = offsets.to(_C.int64)
        if _C._jit_capturing():
            # no host read inside a capture (it would cut the plan): there a
            # bad offsets tensor makes this index_select refuse when the plan runs
            if b > 0:
                bad = (starts_t[0] != 0).logical_or((starts_t < 0).any()).logical_or(
                    (starts_t > n).any())
                if b > 1:
                    bad = bad.logical_or((starts_t[1:b] < starts_t[:b - 1]).any())
                starts_t = starts_t + _C.zeros([1], dtype=_C.int64).index_select(
                    0, _C.reshape(bad.to(_C.int64), [1]))
        else:
            starts = [int(v) for v in offsets.tolist()]
            if include_last_offset and starts[-1] > n:
                raise ValueError("[embedding_bag] the last offset must be the input length")
            starts = starts[:b]
            if starts and (starts[0] != 0 or any(q < p for p, q in zip(starts, starts[1:])) or
                           starts[-1] > n):
                raise ValueError(f"[embedding_bag] offsets must start at 0, not decrease and "
                                 f"stay within the input ({n}), got {starts}")
        flat = input
        # each entry's bag: how many bags start at or before it, less one
        # (equal starts are empty bags; a start at n owns nothing: slot n)
        starts_t = starts_t[:b]
        marks = _C.zeros([n + 1], dtype=_C.int64).index_add(0, starts_t, _C.ones_like(starts_t))
        bag_of = marks[:n].cumsum(0) - 1
    else:
        raise ValueError(f"[embedding_bag] input has to be 1-D or 2-D, got shape {tuple(input.shape)}")
    rows = embedding(flat, weight, None, max_norm, norm_type, scale_grad_by_freq)
    if per_sample_weights is not None:
        rows = _C.mul(rows, _C.reshape(per_sample_weights, [-1, 1]))
    dim = weight.shape[1]
    bags = bag_of
    # an entry equal to padding_idx counts in no bag (its row: zeros, or -inf for max)
    kept = None
    if padding_idx is not None:
        kept = _C.reshape(flat, [-1]) != padding_idx % weight.shape[0]
        fill = float("-inf") if mode == "max" else 0.0
        rows = _C.where(_C.reshape(kept, [-1, 1]), rows, _C.full([], fill, dtype=rows.dtype))
    counts = _C.zeros([b], dtype=_C.int64).index_add(
        0, bags, kept.to(_C.int64) if kept is not None else _C.ones_like(bags))
    if mode == "max":
        idx = _C.reshape(bags, [-1, 1]).expand(bags.shape[0], dim)
        out = _C.full([b, dim], float("-inf"), dtype=weight.dtype).scatter_reduce(
            0, idx, rows, "amax", include_self=True)
        return _C.where(_C.reshape(counts > 0, [-1, 1]), out,
                        _C.zeros([], dtype=weight.dtype))
    out = _C.zeros([b, dim], dtype=weight.dtype).index_add(0, bags, rows)
    if mode == "mean":
        out = _C.div(out, counts.clamp(min=1).to(weight.dtype).reshape(-1, 1))
    return out
