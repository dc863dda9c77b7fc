"""Still more of PyTorch's namespace, written over the C ops (so each is
differentiable through them and captured like any composite), in three
families: elementwise math, fused multiply-adds and dtype helpers
(_torch_math), reductions, statistics and products (_torch_reduce), shape
and index utilities (_torch_index). Each is also a Tensor method where
PyTorch has one (_tensor.py)."""
from ._torch_index import *  # noqa: F401,F403
from ._torch_index import __all__ as _index_all
from ._torch_math import *  # noqa: F401,F403
from ._torch_math import __all__ as _math_all
from ._torch_reduce import *  # noqa: F401,F403
from ._torch_reduce import __all__ as _reduce_all

__all__ = _math_all + _reduce_all + _index_all
