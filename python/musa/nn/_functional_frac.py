"""Fractional max pooling (Graham, 2014): F.fractional_max_pool2d/3d and
their _with_indices forms. Each window's start along a dim follows
PyTorch's pseudo-random sequence: with alpha = (in - k) / (out - 1) and a
sample u in [0, 1) per (batch, channel, dim), start_i = floor((i + u)
alpha) - floor(u alpha) for i < out - 1, and in - k for the last, so the
windows cover the input and overlap or skip by fractions. The maximum of
each window is gathered (the first of equal maxima), so the gradient flows
to it. Given the same samples (_random_samples), outputs and indices equal
PyTorch's. Re-exported by musa.nn.functional."""
from .. import _C
from .._functions import _tensors

__all__ = ["fractional_max_pool2d", "fractional_max_pool3d",
           "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices"]


def _tuple(v, n, who, what):
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,) * n
    if len(t) != n:
        raise ValueError(f"[{who}] {what} must be one value or {n}, got {v!r}")
    return t


def _starts(u, size, out, k):
    """The window starts (.., out) for samples u (..): PyTorch's sequence."""
    if out == 1:
        return _C.full((*u.shape, 1), float(size - k), dtype=_C.float64).to(_C.int64)
    alpha = (size - k) / (out - 1)
    i = _C.arange(out - 1, dtype=_C.float64)
    u = u.to(_C.float64).unsqueeze(-1)
    seq = ((i + u) * alpha).floor() - (u * alpha).floor()
    last = _C.full((*u.shape[:-1], 1), float(size - k), dtype=_C.float64)
    return _C.cat([seq, last], -1).to(_C.int64)


def _fractional(input, kernel_size, output_size, output_ratio, samples, nd, who):
    _tensors(who, input=input)
    if input.ndim not in (nd + 1, nd + 2):
        raise ValueError(f"[{who}] expected a {nd + 1}D or {nd + 2}D input, got "
                         f"{input.ndim}D of shape {tuple(input.shape)}")
    batched = input.ndim == nd + 2
    x = input if batched else input.unsqueeze(0)
    N, C, sizes = x.shape[0], x.shape[1], tuple(x.shape[2:])
    k = _tuple(kernel_size, nd, who, "kernel_size")
    if output_size is None and output_ratio is None:
        raise ValueError(f"[{who}] fractional_max_pool requires specifying either an output_size "
                         f"or an output_ratio")
    if output_size is not None:
        out = _tuple(output_size, nd, who, "output_size")
    else:
        ratio = _tuple(output_ratio, nd, who, "output_ratio")
        if not all(isinstance(r, (int, float)) and not isinstance(r, bool) and 0 < r < 1
                   for r in ratio):
            raise ValueError(f"[{who}] output_ratio must be between 0 and 1, got {output_ratio!r}")
        out = tuple(int(s * r) for s, r in zip(sizes, ratio))
    for s, o, kk in zip(sizes, out, k):
        if not isinstance(kk, int) or kk < 1 or not isinstance(o, int) or o < 1 or o + kk - 1 > s:
            raise ValueError(f"[{who}] output size {out} with kernel {k} does not fit the input's "
                             f"{sizes}: each output + kernel - 1 must be at most the input")
    if samples is None:
        samples = _C.rand(N, C, nd, dtype=x.dtype if x.is_floating_point() else _C.float32)
    elif not isinstance(samples, _C.Tensor) or tuple(samples.shape) != (N, C, nd):
        got = tuple(samples.shape) if isinstance(samples, _C.Tensor) else type(samples).__name__
        raise ValueError(f"[{who}] _random_samples must be a tensor of shape {(N, C, nd)}, got "
                         f"{got}")
    # PyTorch's sample order: (width, height) in 2-D, (depth, height, width) in 3-D
    order = [1, 0] if nd == 2 else [0, 1, 2]
    starts = [_starts(samples[..., order[j]], sizes[j], out[j], k[j]) for j in range(nd)]
    # the flat index (within a plane) of every window element, (N, C, *out, *k)
    flat = None
    for j in range(nd):
        rows = starts[j].unsqueeze(-1) + _C.arange(k[j], dtype=_C.int64)  # (N, C, out_j, k_j)
        stride = 1
        for s in sizes[j + 1:]:
            stride *= s
        shape = [N, C] + [1] * nd + [1] * nd
        shape[2 + j], shape[2 + nd + j] = out[j], k[j]
        term = (rows * stride).reshape(shape)
        flat = term if flat is None else flat + term
    full = [N, C, *out, *k]
    flat = flat.expand(full).reshape(N, C, -1)
    window = 1
    for kk in k:
        window *= kk
    vals = x.reshape(N, C, -1).gather(2, flat).reshape(N, C, *out, window)
    best = vals.argmax(-1, keepdim=True)
    idx = flat.reshape(N, C, *out, window).gather(-1, best).squeeze(-1)
    y = vals.gather(-1, best).squeeze(-1)
    if not batched:
        y, idx = y.squeeze(0), idx.squeeze(0)
    return y, idx


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    y, idx = _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 2,
                         "fractional_max_pool2d")
    return (y, idx) if return_indices else y


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    y, idx = _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 3,
                         "fractional_max_pool3d")
    return (y, idx) if return_indices else y


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 2,
                       "fractional_max_pool2d")


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 3,
                       "fractional_max_pool3d")
