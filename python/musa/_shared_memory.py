"""Tensor.share_memory_ and is_shared: a tensor's data moved to a shared
mapping of an anonymous file (memfd_create, mmap with MAP_SHARED), so
processes forked after the call (multiprocessing's fork start method,
DataLoader workers) write into the same memory as the parent: Hogwild
training, shared buffers. The file's descriptor stays open while the
mapping lives, so musa.multiprocessing can pass it to other processes
(tensors sent through its queues, or to spawned processes, are mapped
there rather than copied).

The tensor object keeps its identity (Parameters stay the ones optimizers
hold): it is pointed at the new memory with set_. A view taken before the
call keeps the old memory; PyTorch moves the whole storage, so its views
follow. Memory shared this way is released when the last tensor using it
goes, as any other."""
import mmap
import os
import weakref

from . import _C

__all__ = []

# (weak reference to the mapping, first byte, end, file descriptor) of the
# mappings tensors live in
_mappings = []


def _live():
    _mappings[:] = [m for m in _mappings if m[0]() is not None]
    return _mappings


def _mapping_of(t):
    """(mapping, first byte, end, fd) of the shared mapping holding t's data,
    or None."""
    p = t.data_ptr()
    for ref, lo, hi, fd in _live():
        buf = ref()
        if buf is not None and lo <= p < hi:
            return buf, lo, hi, fd
    return None


def _map(fd, n, dtype):
    """Map n bytes of file fd (taking ownership of fd: it is closed with the
    mapping) as a 1-D tensor of dtype; registers the mapping."""
    from ._torch_methods_more import frombuffer
    try:
        buf = mmap.mmap(fd, n)  # MAP_SHARED
    except BaseException:
        os.close(fd)
        raise
    weakref.finalize(buf, os.close, fd)
    size = _C.empty(0, dtype=dtype).element_size()
    t = frombuffer(buf, dtype=dtype, count=n // size)
    lo = t.data_ptr()
    _mappings.append((weakref.ref(buf), lo, lo + n, fd))
    return t


def is_shared(self):
    """Whether self's data lies in memory share_memory_ set up (or that
    another process sent through musa.multiprocessing)."""
    return _mapping_of(self) is not None


def share_memory_(self):
    """Move self's data to shared memory (a no-op when it is already there);
    returns self."""
    from .autograd import no_grad
    n = self.numel() * self.element_size()
    if n == 0 or is_shared(self):  # (an empty tensor has no data to share)
        return self
    fd = os.memfd_create("musa-shared", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, n)
    except BaseException:
        os.close(fd)
        raise
    shared = _map(fd, n, self.dtype).reshape(tuple(self.shape))
    with no_grad():
        shared.copy_(self)
        self.set_(shared)
    return self


def _bind():
    _C.Tensor.share_memory_ = share_memory_
    _C.Tensor.is_shared = is_shared


_bind()
