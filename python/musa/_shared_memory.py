"""Tensor.share_memory_ and is_shared: a tensor's data moved to an
anonymous shared mapping (mmap with MAP_SHARED), so processes forked after
the call (multiprocessing's fork start method, DataLoader workers) write
into the same memory as the parent: Hogwild training, shared buffers.

The tensor object keeps its identity (Parameters stay the ones optimizers
hold): it is pointed at the new memory with set_. A view taken before the
call keeps the old memory; PyTorch moves the whole storage, so its views
follow. Memory shared this way is released when the last tensor using it
goes, as any other."""
import mmap
import weakref

from . import _C

__all__ = []

# (mapping, first byte, end) of the mappings that tensors were moved into
_mappings = []


def _live():
    _mappings[:] = [m for m in _mappings if m[0]() is not None]
    return _mappings


def is_shared(self):
    """Whether self's data lies in memory share_memory_ set up."""
    p = self.data_ptr()
    return any(lo <= p < hi for _, lo, hi in _live())


def share_memory_(self):
    """Move self's data to shared memory (a no-op when it is already there);
    returns self."""
    from ._torch_methods_more import frombuffer
    from .autograd import no_grad
    n = self.numel() * self.element_size()
    if n == 0 or is_shared(self):  # (an empty tensor has no data to share)
        return self
    buf = mmap.mmap(-1, n)  # anonymous and MAP_SHARED
    shared = frombuffer(buf, dtype=self.dtype, count=self.numel()).reshape(tuple(self.shape))
    with no_grad():
        shared.copy_(self)
        self.set_(shared)
    lo = self.data_ptr()
    _mappings.append((weakref.ref(buf), lo, lo + n))
    return self


def _bind():
    _C.Tensor.share_memory_ = share_memory_
    _C.Tensor.is_shared = is_shared


_bind()
