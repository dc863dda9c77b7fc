"""PyTorch's legacy names: the typed tensor constructors (FloatTensor,
LongTensor, ...) and torch.Size."""
from . import _C

__all__ = ["sparse_coo_tensor", "sparse_csr_tensor", "spmm", "Size", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
           "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]


def _no_sparse(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"[{name}] sparse tensors are not supported by musa; use dense "
                                  f"tensors (e.g. an adjacency matrix and matmul)")
    fn.__name__ = name
    return fn


sparse_coo_tensor = _no_sparse("sparse_coo_tensor")
sparse_csr_tensor = _no_sparse("sparse_csr_tensor")
spmm = _no_sparse("spmm")


class Size(tuple):
    """A shape: a tuple of ints (torch.Size)."""

    def __new__(cls, sizes=()):
        sizes = tuple(sizes)
        for s in sizes:
            if not isinstance(s, int) or isinstance(s, bool):
                raise TypeError(f"[Size] sizes must be ints, got {type(s).__name__}")
        return super().__new__(cls, sizes)

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return f"musa.Size({list(self)})"


class _TypedTensorMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _C.Tensor) and obj.dtype is cls._dtype


def legacy_new(name, dtype, args):
    """The legacy constructors' arguments (FloatTensor(...), Tensor.new(...)):
    sizes give an uninitialised tensor (none: an empty one, (0,)), one
    sequence, array or tensor its data (converted), a Size its shape."""
    if len(args) == 1 and not isinstance(args[0], int):
        data = args[0]
        if isinstance(data, _C.Tensor):
            return data.to(dtype)
        if isinstance(data, Size):  # FloatTensor(x.size()) is a shape
            return _C.empty(list(data), dtype=dtype)
        return _C.tensor(data, dtype=dtype)
    for a in args:
        if not isinstance(a, int) or isinstance(a, bool):
            raise TypeError(f"[{name}] expected sizes (ints) or one sequence of data, got "
                            f"{type(a).__name__}")
    return _C.empty(list(args) if args else [0], dtype=dtype)


def _typed(name, dtype):
    def __new__(cls, *args, device=None):
        """FloatTensor(2, 3): uninitialised, of that shape; FloatTensor(data):
        from a list, NumPy array or tensor (converted)."""
        return legacy_new(name, dtype, args)

    return _TypedTensorMeta(name, (), {"__new__": __new__, "_dtype": dtype,
                                       "__doc__": f"The {dtype} tensor constructor (legacy)."})


FloatTensor = _typed("FloatTensor", _C.float32)
DoubleTensor = _typed("DoubleTensor", _C.float64)
HalfTensor = _typed("HalfTensor", _C.float16)
BFloat16Tensor = _typed("BFloat16Tensor", _C.bfloat16)
LongTensor = _typed("LongTensor", _C.int64)
IntTensor = _typed("IntTensor", _C.int32)
ShortTensor = _typed("ShortTensor", _C.int16)
CharTensor = _typed("CharTensor", _C.int8)
ByteTensor = _typed("ByteTensor", _C.uint8)
BoolTensor = _typed("BoolTensor", _C.bool)
