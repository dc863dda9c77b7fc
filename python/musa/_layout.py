"""Layouts, as torch's: every musa tensor is strided (dense, with strides);
the sparse layouts exist so that code comparing against them runs, and
asking a factory for one is a NotImplementedError naming it."""
from . import _C
from ._memory_format import _Named

__all__ = ["layout", "strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr",
           "sparse_bsc"]


class layout(_Named):
    """A tensor layout (Tensor.layout, the layout= of the factories)."""


strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")
sparse_csc = layout("sparse_csc")
sparse_bsr = layout("sparse_bsr")
sparse_bsc = layout("sparse_bsc")

_C._register_layout(strided)
_C.Tensor.layout = property(lambda self: strided, doc="musa.strided: every tensor is dense")
