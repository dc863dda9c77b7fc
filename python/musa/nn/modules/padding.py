"""Padding layers: constant (and zero), reflection, replication and circular
padding of the last 1, 2 or 3 dims, over F.pad."""
from .. import functional as F
from .module import Module


class _PadNd(Module):
    _n = 1            # dims padded
    _mode = "constant"

    def __init__(self, padding):
        super().__init__()
        n = self._n
        if isinstance(padding, int):
            padding = (padding,) * (2 * n)
        padding = tuple(padding)
        if len(padding) != 2 * n or not all(isinstance(p, int) for p in padding):
            raise ValueError(f"[{type(self).__name__}] padding must be an int or {2 * n} ints, got "
                             f"{padding!r}")
        self.padding = padding

    def forward(self, input):
        if input.ndim not in (self._n + 1, self._n + 2):
            raise ValueError(f"[{type(self).__name__}] expected a {self._n + 1}D or {self._n + 2}D "
                             f"input, got {input.ndim}D input of shape {tuple(input.shape)}")
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        if input.ndim not in (self._n + 1, self._n + 2):
            raise ValueError(f"[{type(self).__name__}] expected a {self._n + 1}D or {self._n + 2}D "
                             f"input, got {input.ndim}D input of shape {tuple(input.shape)}")
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


def _make(name, n, mode, base=_PadNd):
    return type(name, (base,), {"_n": n, "_mode": mode, "__doc__": f"{mode} padding of the last "
                                f"{n} dim{'s' if n > 1 else ''}."})


ReflectionPad1d = _make("ReflectionPad1d", 1, "reflect")
ReflectionPad2d = _make("ReflectionPad2d", 2, "reflect")
ReflectionPad3d = _make("ReflectionPad3d", 3, "reflect")
ReplicationPad1d = _make("ReplicationPad1d", 1, "replicate")
ReplicationPad2d = _make("ReplicationPad2d", 2, "replicate")
ReplicationPad3d = _make("ReplicationPad3d", 3, "replicate")
CircularPad1d = _make("CircularPad1d", 1, "circular")
CircularPad2d = _make("CircularPad2d", 2, "circular")
CircularPad3d = _make("CircularPad3d", 3, "circular")
ConstantPad1d = _make("ConstantPad1d", 1, "constant", _ConstantPadNd)
ConstantPad2d = _make("ConstantPad2d", 2, "constant", _ConstantPadNd)
ConstantPad3d = _make("ConstantPad3d", 3, "constant", _ConstantPadNd)


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


ZeroPad1d = _make("ZeroPad1d", 1, "constant", _ZeroPadNd)
ZeroPad2d = _make("ZeroPad2d", 2, "constant", _ZeroPadNd)
ZeroPad3d = _make("ZeroPad3d", 3, "constant", _ZeroPadNd)

__all__ = ["ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
           "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d", "CircularPad2d",
           "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d",
           "ZeroPad2d", "ZeroPad3d"]
