"""Tensors through multiprocessing's pickler (Queue, Pipe, Pool, and the
arguments of processes started with spawn or forkserver): moved to shared
memory (Tensor.share_memory_) and sent as the mapping's file descriptor,
which the receiving process maps; both then read and write the same
memory, as with torch.multiprocessing's file_descriptor strategy.

A view of shared memory arrives as the same view (offset and strides);
a tensor not yet shared is moved to shared memory first (the sender's
tensor keeps its identity and values). Parameters arrive as Parameters,
with requires_grad. A tensor that requires grad and is not a leaf is
refused: its autograd history cannot travel. The descriptor is served by
the sending process until the receiver takes it (multiprocessing's
resource sharer), so a sender must stay alive until its tensors have been
received. Plain pickle (musa.save, copy) is not affected."""
from multiprocessing.reduction import DupFd, ForkingPickler

from .. import _C
from .. import _shared_memory as _shm

__all__ = ["init_reductions"]


def _rebuild_empty(cls, shape, dtype, requires_grad):
    t = _C.empty(shape, dtype=getattr(_C, dtype))
    return _finish(cls, t, requires_grad)


def _finish(cls, t, requires_grad):
    from ..nn.parameter import Parameter
    if cls is Parameter or (isinstance(cls, type) and issubclass(cls, Parameter)):
        return Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_(requires_grad) if requires_grad else t


def _rebuild_shared(cls, dupfd, nbytes, offset, dtype, shape, stride, requires_grad):
    dt = getattr(_C, dtype)
    base = _shm._map(dupfd.detach(), nbytes, dt)
    size = base.element_size()
    t = base.as_strided(shape, stride, offset // size)
    return _finish(cls, t, requires_grad)


def reduce_tensor(t):
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError("[multiprocessing] cannot send a tensor that requires grad and is not "
                           "a leaf: its autograd history cannot travel between processes; send "
                           "t.detach() (or a leaf) instead")
    dtype = str(t.dtype).rsplit(".", 1)[-1]
    if t.numel() == 0:
        return _rebuild_empty, (type(t), tuple(t.shape), dtype, t.requires_grad)
    m = _shm._mapping_of(t)
    if m is None:
        t.share_memory_()
        m = _shm._mapping_of(t)
    _, lo, hi, fd = m
    return _rebuild_shared, (type(t), DupFd(fd), hi - lo, t.data_ptr() - lo, dtype,
                             tuple(t.shape), tuple(t.stride()), t.requires_grad)


def init_reductions():
    from ..nn.parameter import Parameter
    for cls in (_C.Tensor, Parameter):
        ForkingPickler.register(cls, reduce_tensor)
