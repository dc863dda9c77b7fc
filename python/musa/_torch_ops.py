"""Still more of PyTorch's namespace, written over the C ops (so each is
differentiable through them and captured like any composite), in four
families: elementwise math, fused multiply-adds and dtype helpers
(_torch_math), reductions, statistics and products (_torch_reduce), shape
and index utilities (_torch_index), special functions and the cross
product (_torch_special). Each is also a Tensor method where PyTorch has
one (_tensor.py)."""
from ._torch_index import *  # noqa: F401,F403
from ._torch_index import __all__ as _index_all
from ._torch_math import *  # noqa: F401,F403
from ._torch_math import __all__ as _math_all
from ._torch_reduce import *  # noqa: F401,F403
from ._torch_reduce import __all__ as _reduce_all
from ._torch_special import *  # noqa: F401,F403
from ._torch_special import __all__ as _special_all

__all__ = _math_all + _reduce_all + _index_all + _special_all
