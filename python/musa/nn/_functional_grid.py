"""Spatial transformers: affine_grid and grid_sample, as composites of
differentiable ops (gradients reach the input, the grid and theta).
Re-exported by musa.nn.functional.

grid_sample follows PyTorch's grid sampler: a grid value of -1 and 1 is the
centre of the first and last pixel (align_corners=True) or their outer
edge (False); padding_mode says what a tap outside the input reads (zeros:
0; border: the nearest edge pixel; reflection: the input mirrored at its
border). Each output is a weighted sum of gathered taps: 2^n of them for
(bi/tri)linear, 1 for nearest (rounded half to even), 16 for bicubic (Keys'
cubic convolution, A = -0.75, 4-D inputs only), as PyTorch computes them."""
import operator as _operator
import warnings

from .. import _C
from .._functions import _tensors
from ._functional_more import _cubic_weights

__all__ = ["affine_grid", "grid_sample"]

_MODES = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")


def _align(align_corners, who):
    if align_corners is None:
        warnings.warn(f"[{who}] the default align_corners is False (since PyTorch 1.3.0); pass "
                      f"align_corners=False or True to say which you mean", UserWarning,
                      stacklevel=3)
        return False
    return bool(align_corners)


def _base(n, align_corners, dtype):
    """n normalised coordinates in [-1, 1]: pixel centres (align_corners) or
    their positions in a grid whose outer edges are -1 and 1."""
    if n <= 1:
        return _C.zeros(max(n, 0), dtype=dtype)
    r = _C.linspace(-1.0, 1.0, n, dtype=dtype)
    return r if align_corners else _C.mul(r, (n - 1) / n)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of a batch of affine maps: theta (N, 2, 3) and size
    (N, C, H, W) give (N, H, W, 2); theta (N, 3, 4) and size (N, C, D, H, W)
    give (N, D, H, W, 3). Each grid point is theta applied to the output
    pixel's normalised (x, y[, z], 1)."""
    _tensors("affine_grid", theta=theta)
    align_corners = _align(align_corners, "affine_grid")
    try:
        size = [_operator.index(s) for s in size]
    except TypeError:
        raise TypeError(f"[affine_grid] size must be a sequence of ints, got {size!r}") from None
    if not theta.is_floating_point():
        raise TypeError(f"[affine_grid] theta must be a floating point tensor, got {theta.dtype}")
    if len(size) not in (4, 5):
        raise ValueError(f"[affine_grid] size must have 4 (2-D) or 5 (3-D) entries, got {size}")
    k = len(size) - 2
    want = (size[0], k, k + 1)
    if tuple(theta.shape) != want:
        raise ValueError(f"[affine_grid] expected theta of shape {want} for size {size}, got "
                         f"{tuple(theta.shape)}")
    if min(size) <= 0:
        raise ValueError(f"[affine_grid] expected a positive output size, got {size}")
    spatial = size[2:]  # (D,) H, W
    zeros = _C.zeros(spatial, dtype=theta.dtype)
    cols = []
    for d in reversed(range(k)):  # x (along W) first
        shape = [1] * k
        shape[d] = spatial[d]
        cols.append(_C.add(_C.reshape(_base(spatial[d], align_corners, theta.dtype), shape), zeros))
    cols.append(_C.add(zeros, 1.0))
    base = _C.reshape(_C.stack(cols, -1), (1, -1, k + 1))  # (1, points, k + 1)
    grid = _C.matmul(base, _C.transpose(theta, 1, 2))  # (N, points, k)
    return _C.reshape(grid, [size[0]] + spatial + [k])


def _unnormalize(c, n, align_corners):
    if align_corners:
        return _C.mul(_C.div(_C.add(c, 1.0), 2.0), float(n - 1))
    return _C.div(_C.sub(_C.mul(_C.add(c, 1.0), float(n)), 1.0), 2.0)


def _reflect(c, twice_low, twice_high):
    """c mirrored into [twice_low / 2, twice_high / 2] (PyTorch's
    reflect_coordinates)."""
    if twice_low == twice_high:
        return _C.mul(c, 0.0)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    c = _C.abs(_C.sub(c, low))
    extra = _C.fmod(c, span)
    even = _C.eq(_C.fmod(_C.floor(_C.div(c, span)), 2.0), 0.0)
    return _C.where(even, _C.add(extra, low), _C.add(_C.sub(span, extra), low))


def _bounded(c, n, padding_mode, align_corners):
    """A source coordinate moved inside [0, n - 1] as padding_mode says
    (zeros: left as it is; a tap outside reads 0)."""
    if padding_mode == "zeros":
        return c
    if padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (n - 1)) if align_corners else _reflect(c, -1, 2 * n - 1)
    return _C.clamp(c, min=0.0, max=float(n - 1))


class _Taps:
    """Gathers of input (N, C, *spatial) at integer source positions, one
    per output point; positions outside the input read 0."""

    def __init__(self, input, out_spatial):
        self.n, self.c = input.shape[0], input.shape[1]
        self.sizes = list(input.shape[2:])
        self.points, pixels = 1, 1
        for s in out_spatial:
            self.points *= s
        for s in self.sizes:
            pixels *= s
        self.flat = _C.reshape(input, (self.n, self.c, pixels))

    def read(self, idx):
        """idx: per spatial dim an int64 tensor (N, *out_spatial): the
        values (N, C, points), and where the position is inside (N, 1,
        points)."""
        inside, lin = None, None
        for i, n in zip(idx, self.sizes):
            ok = _C.logical_and(_C.ge(i, 0), _C.lt(i, n))
            inside = ok if inside is None else _C.logical_and(inside, ok)
            lin = i if lin is None else _C.add(_C.mul(lin, n), i)
        lin = _C.reshape(_C.where(inside, lin, 0), (self.n, 1, self.points))
        inside = _C.reshape(inside, (self.n, 1, self.points))
        return _C.gather(self.flat, 2, lin.expand(self.n, self.c, self.points)), inside

    def weighted(self, idx, w):
        """w (N, *out_spatial) times the taps at idx, 0 outside (a NaN
        there does not leak in)."""
        v, inside = self.read(idx)
        term = _C.mul(v, _C.reshape(w, (self.n, 1, self.points)))
        return _C.where(inside, term, 0.0)


def _linear(taps, coords):
    out = None
    k = len(coords)
    lows = [_C.floor(c) for c in coords]
    for corner in range(1 << k):
        idx, w = [], None
        for d in range(k):  # the last coordinate varies fastest: PyTorch's tap order
            up = (corner >> (k - 1 - d)) & 1
            lo = lows[d]
            idx.append(_C.add(lo, 1.0).to(_C.int64) if up else lo.to(_C.int64))
            f = _C.sub(coords[d], lo) if up else _C.sub(_C.add(lo, 1.0), coords[d])
            w = f if w is None else _C.mul(w, f)
        term = taps.weighted(idx, w)
        out = term if out is None else _C.add(out, term)
    return out


def _nearest(taps, coords):
    v, inside = taps.read([_C.round(c).to(_C.int64) for c in coords])
    # minus a zero that depends on the grid: its gradient is zeros, as in
    # PyTorch, rather than none (x - 0.0 is x, -0.0 included)
    zero = _C.where(_C.zeros((), dtype=_C.bool), _C.reshape(coords[0], (taps.n, 1, taps.points)),
                    0.0)
    return _C.sub(_C.where(inside, v, 0.0), zero)


def _bicubic(taps, coords, padding_mode, align_corners):
    y, x = coords
    y0, x0 = _C.floor(y), _C.floor(x)
    wy, wx = _cubic_weights(_C.sub(y, y0)), _cubic_weights(_C.sub(x, x0))
    sizes = taps.sizes
    out = None
    for i in range(4):
        yi = _bounded(_C.add(y0, float(i - 1)), sizes[0], padding_mode, align_corners)
        row = None
        for j in range(4):
            xj = _bounded(_C.add(x0, float(j - 1)), sizes[1], padding_mode, align_corners)
            term = taps.weighted([yi.to(_C.int64), xj.to(_C.int64)], wx[j])
            row = term if row is None else _C.add(row, term)
        row = _C.mul(row, _C.reshape(wy[i], (taps.n, 1, taps.points)))
        out = row if out is None else _C.add(out, row)
    return out


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample input (N, C, H, W) at grid (N, Ho, Wo, 2) into (N, C, Ho, Wo), or
    input (N, C, D, H, W) at grid (N, Do, Ho, Wo, 3) into (N, C, Do, Ho,
    Wo). grid[..., 0] is x (along W), grid[..., 1] y, grid[..., 2] z, in
    [-1, 1]. mode: bilinear (trilinear for 5-D), nearest, bicubic (4-D);
    padding_mode: zeros, border, reflection."""
    _tensors("grid_sample", input=input, grid=grid)
    align_corners = _align(align_corners, "grid_sample")
    if mode not in _MODES:
        raise ValueError(f"[grid_sample] mode must be one of {', '.join(_MODES)}, got {mode!r}")
    if padding_mode not in _PADDING:
        raise ValueError(f"[grid_sample] padding_mode must be one of {', '.join(_PADDING)}, "
                         f"got {padding_mode!r}")
    if input.ndim not in (4, 5):
        raise ValueError(f"[grid_sample] expected a 4-D or 5-D input, got shape "
                         f"{tuple(input.shape)}")
    k = input.ndim - 2
    if grid.ndim != input.ndim or grid.shape[-1] != k or grid.shape[0] != input.shape[0]:
        raise ValueError(f"[grid_sample] expected a grid of shape ({input.shape[0]}, ..., {k}) "
                         f"with {input.ndim} dims for input {tuple(input.shape)}, got "
                         f"{tuple(grid.shape)}")
    if mode == "bicubic" and k != 2:
        raise ValueError("[grid_sample] bicubic interpolation needs a 4-D input, got "
                         f"{tuple(input.shape)}")
    if input.dtype != grid.dtype or not input.is_floating_point():
        raise TypeError(f"[grid_sample] input and grid must have one floating point dtype, got "
                        f"{input.dtype} and {grid.dtype}")
    if any(s == 0 for s in input.shape[2:]):
        raise ValueError(f"[grid_sample] expected an input with non-empty spatial dims, got "
                         f"{tuple(input.shape)}")
    out_spatial = list(grid.shape[1:-1])
    taps = _Taps(input, out_spatial)
    # input dims (D, H, W) against grid components (x, y, z): reversed
    coords = [_unnormalize(_C.select(grid, -1, k - 1 - d), n, align_corners)
              for d, n in enumerate(taps.sizes)]
    if mode == "bicubic":
        out = _bicubic(taps, coords, padding_mode, align_corners)
    else:
        coords = [_bounded(c, n, padding_mode, align_corners) for c, n in zip(coords, taps.sizes)]
        out = _linear(taps, coords) if mode == "bilinear" else _nearest(taps, coords)
    return _C.reshape(out, [taps.n, taps.c] + out_spatial)
