"""musa.storage: torch.storage's UntypedStorage and TypedStorage.

A storage is the memory a tensor and all its views look into.
`Tensor.untyped_storage()` gives its bytes (an UntypedStorage),
`Tensor.storage()` the same memory read as the tensor's dtype (a
TypedStorage). Both share the memory: writes through a storage are seen by
the tensors, and `data_ptr()` is the storage's first byte, equal for every
view of it (what code that detects shared tensors compares). A tensor can
be pointed at a storage with `Tensor.set_(storage, offset, size, stride)`
(without size: all of it, 1-D).

What musa does not do: resize a storage in place (views would keep the old
memory), and move one to shared memory (use Tensor.share_memory_).
"""
import operator

from . import _C

__all__ = ["UntypedStorage", "TypedStorage", "is_storage"]

_uint8 = _C.uint8


def _device(who, device):
    if device is not None and str(device).split(":")[0] != "cpu":
        raise RuntimeError(f"[{who}] musa storages live on the CPU; device={device!r} is not "
                           f"available")


def _byte_tensor(who, args):
    """The bytes of a new storage made from torch's constructor arguments:
    nothing (empty), a size (zeroed) or a sequence of byte values."""
    if not args:
        return _C.empty(0, dtype=_uint8)
    if len(args) == 1 and isinstance(args[0], int) and not isinstance(args[0], bool):
        if args[0] < 0:
            raise ValueError(f"[{who}] size must be non-negative, got {args[0]}")
        return _C.zeros(args[0], dtype=_uint8)
    if len(args) == 1 and isinstance(args[0], (list, tuple, range)):
        vals = list(args[0])
        if any(isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 255 for v in vals):
            raise ValueError(f"[{who}] a sequence of byte values (ints in 0..255) is needed")
        return _C.tensor(vals, dtype=_uint8) if vals else _C.empty(0, dtype=_uint8)
    raise TypeError(f"[{who}] takes no arguments, a size, or a sequence of byte values; got "
                    f"{', '.join(type(a).__name__ for a in args)}")


class _Storage:
    """What both storage classes share (through untyped(): the bytes)."""

    __slots__ = ()
    is_cuda = False
    is_sparse = False
    is_sparse_csr = False
    is_meta = False

    def data_ptr(self):
        return self.untyped()._bytes.data_ptr()

    def nbytes(self):
        return self.untyped()._bytes.numel()

    @property
    def device(self):
        return self.untyped()._bytes.device

    def __len__(self):
        return self.size()

    def __iter__(self):
        return iter(self.tolist())

    def is_pinned(self, device=None):
        return False

    def is_shared(self):
        return self.untyped()._bytes.is_shared()

    def cpu(self):
        return self

    def __copy__(self):
        return self.clone()

    def __deepcopy__(self, memo):
        return memo.setdefault(id(self), self.clone())


class UntypedStorage(_Storage):
    """The bytes of a storage. UntypedStorage(n) makes n zeroed bytes,
    UntypedStorage([b, ...]) bytes of given values."""

    __slots__ = ("_bytes",)

    def __init__(self, *args, device=None):
        _device("UntypedStorage", device)
        self._bytes = _byte_tensor("UntypedStorage", args)

    @classmethod
    def _wrap(cls, byte_tensor):
        s = cls.__new__(cls)
        s._bytes = byte_tensor
        return s

    # ---- what it is ----
    def size(self):
        return self._bytes.numel()

    def element_size(self):
        return 1

    @property
    def dtype(self):
        return _uint8

    def type(self):
        return "musa.UntypedStorage"

    def untyped(self):
        return self

    # ---- data ----
    def tolist(self):
        return self._bytes.tolist()

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                raise ValueError(f"[UntypedStorage] a slice of a storage takes step 1, got {step}")
            return type(self)._wrap(self._bytes[start:max(start, stop)])
        return int(self._bytes[operator.index(i)])

    def __setitem__(self, i, value):
        self._bytes[i] = value

    def fill_(self, value):
        self._bytes.fill_(value)
        return self

    def copy_(self, src, non_blocking=False):
        if not isinstance(src, _Storage):
            raise TypeError(f"[UntypedStorage.copy_] src must be a storage, not "
                            f"{type(src).__name__}")
        src = src.untyped()
        if src.nbytes() != self.nbytes():
            raise RuntimeError(f"[UntypedStorage.copy_] sizes differ: {src.nbytes()} bytes into "
                               f"{self.nbytes()}")
        self._bytes.copy_(src._bytes)
        return self

    def clone(self):
        return type(self)._wrap(self._bytes.clone())

    def __reduce__(self):
        return UntypedStorage, (self.tolist(),)

    def pin_memory(self, device=None):
        raise RuntimeError("[UntypedStorage.pin_memory] musa has no pinned memory (there is no "
                           "GPU to copy to)")

    def resize_(self, size):
        if size == self.nbytes():
            return self
        raise NotImplementedError(f"[UntypedStorage.resize_] musa cannot resize a storage in "
                                  f"place ({self.nbytes()} to {size} bytes): tensors viewing it "
                                  f"would keep the old memory")

    def share_memory_(self):
        raise NotImplementedError("[UntypedStorage.share_memory_] musa moves tensors, not "
                                  "storages, to shared memory: use Tensor.share_memory_()")

    def __repr__(self):
        body = "\n".join(f" {b}" for b in self.tolist()) or " "  # (torch's empty line)
        return f"{body}\n[musa.storage.UntypedStorage(device=cpu) of size {self.nbytes()}]"

    def _tensor_of(self, dtype, who):
        """The storage as a 1-D tensor of dtype (all of it), for set_."""
        size = _C.empty(0, dtype=dtype).element_size()
        if self.nbytes() % size:
            raise RuntimeError(f"[{who}] the storage's {self.nbytes()} bytes do not hold a whole "
                               f"number of {dtype} elements ({size} bytes each)")
        return self._bytes.view(dtype)


class TypedStorage(_Storage):
    """A storage read as one dtype: TypedStorage(n, dtype=musa.float32)
    makes n zeroed elements; Tensor.storage() gives a tensor's."""

    __slots__ = ("_untyped", "dtype")

    def __init__(self, *args, dtype=None, device=None):
        _device("TypedStorage", device)
        self.dtype = _C.get_default_dtype() if dtype is None else dtype
        if not isinstance(self.dtype, type(_uint8)):
            raise TypeError(f"[TypedStorage] dtype must be a musa dtype, not {self.dtype!r}")
        size = _C.empty(0, dtype=self.dtype).element_size()
        if len(args) == 1 and isinstance(args[0], int) and not isinstance(args[0], bool):
            if args[0] < 0:
                raise ValueError(f"[TypedStorage] size must be non-negative, got {args[0]}")
            self._untyped = UntypedStorage(args[0] * size)
        elif len(args) == 1 and isinstance(args[0], (list, tuple, range)):
            t = _C.tensor(list(args[0]), dtype=self.dtype) if len(args[0]) else \
                _C.empty(0, dtype=self.dtype)
            self._untyped = UntypedStorage._wrap(_C._storage_bytes(t))
        elif not args:
            self._untyped = UntypedStorage()
        else:
            raise TypeError("[TypedStorage] takes no arguments, a size, or a sequence of values")

    @classmethod
    def _wrap(cls, untyped, dtype):
        s = cls.__new__(cls)
        s._untyped, s.dtype = untyped, dtype
        return s

    def untyped(self):
        return self._untyped

    def _tensor_of(self, dtype, who):
        if dtype != self.dtype:
            raise RuntimeError(f"[{who}] the storage holds {self.dtype}, the tensor is {dtype}")
        return self._untyped._tensor_of(dtype, who)

    def element_size(self):
        return _C.empty(0, dtype=self.dtype).element_size()

    def size(self):
        return self._untyped.nbytes() // self.element_size()

    def type(self):
        return f"musa.TypedStorage({self.dtype})"

    def _elements(self):
        return self._untyped._bytes[:self.size() * self.element_size()].view(self.dtype)

    def tolist(self):
        return self._elements().tolist()

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                raise ValueError(f"[TypedStorage] a slice of a storage takes step 1, got {step}")
            k = self.element_size()
            return type(self)._wrap(self._untyped[start * k:max(start, stop) * k], self.dtype)
        return self._elements()[operator.index(i)].item()

    def __setitem__(self, i, value):
        self._elements()[i] = value

    def fill_(self, value):
        self._elements().fill_(value)
        return self

    def copy_(self, src, non_blocking=False):
        if isinstance(src, TypedStorage) and src.dtype != self.dtype:
            if src.size() != self.size():
                raise RuntimeError(f"[TypedStorage.copy_] sizes differ: {src.size()} elements "
                                   f"into {self.size()}")
            self._elements().copy_(src._elements())
            return self
        self._untyped.copy_(src)
        return self

    def clone(self):
        return type(self)._wrap(self._untyped.clone(), self.dtype)

    def __reduce__(self):
        return _rebuild_typed, (self.tolist(), str(self.dtype).rsplit(".", 1)[-1])

    def pin_memory(self, device=None):
        return self._untyped.pin_memory(device)

    def resize_(self, size):
        self._untyped.resize_(size * self.element_size())
        return self

    def share_memory_(self):
        return self._untyped.share_memory_()

    def __repr__(self):
        body = "\n".join(f" {v}" for v in self.tolist()) or " "
        return (f"{body}\n[musa.storage.TypedStorage(dtype={self.dtype}, device=cpu) of size "
                f"{self.size()}]")


def _rebuild_typed(values, dtype):
    return TypedStorage(values, dtype=getattr(_C, dtype))


def is_storage(obj):
    """Whether obj is a storage (torch.is_storage)."""
    return isinstance(obj, _Storage)


# ---- the Tensor methods ----

def untyped_storage(self):
    """The bytes of the storage self looks into (all of it, whatever part
    self views)."""
    return UntypedStorage._wrap(_C._storage_bytes(self))


def storage(self):
    """self's storage, read as self's dtype."""
    return TypedStorage._wrap(untyped_storage(self), self.dtype)


def is_set_to(self, tensor):
    """Whether self and tensor look at the same elements of one storage in
    the same way (storage, offset, sizes and strides)."""
    if not isinstance(tensor, _C.Tensor):
        raise TypeError(f"[Tensor.is_set_to] tensor must be a Tensor, not "
                        f"{type(tensor).__name__}")
    return (self.dtype == tensor.dtype and self.device == tensor.device
            and self.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr()
            and self.storage_offset() == tensor.storage_offset()
            and tuple(self.shape) == tuple(tensor.shape) and self.stride() == tensor.stride())


def _bind():
    _C.Tensor.untyped_storage = untyped_storage
    _C.Tensor.storage = storage
    _C.Tensor.is_set_to = is_set_to


_bind()
