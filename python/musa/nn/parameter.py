"""Parameter: a tensor that a Module registers as one of its parameters."""
from .. import _C

Tensor = _C.Tensor


class Parameter(Tensor):
    """A leaf tensor, sharing data's storage, that Module attribute
    assignment registers as a parameter. requires_grad defaults to True."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _C.empty(0)
        elif not isinstance(data, Tensor):
            raise TypeError(f"[Parameter] data must be a musa.Tensor, got {type(data).__name__}")
        return Tensor._make_subclass(cls, data, requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach(), self.requires_grad))


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)



class UninitializedParameter(Parameter):
    """A parameter without a shape yet (a lazy layer's, before its first
    call); materialize(shape) gives it one in place and makes it a
    Parameter, so whoever holds it (an optimizer) holds the real one."""

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return Parameter.__new__(cls, _C.empty(0, dtype=dtype), requires_grad)

    def materialize(self, shape, device=None, dtype=None):
        self.data = _C.empty(tuple(shape), dtype=dtype or self.dtype)
        self.__class__ = Parameter

    def __repr__(self):
        return "<UninitializedParameter>"

    def __reduce_ex__(self, protocol):
        return (UninitializedParameter, (self.requires_grad, None, self.dtype))


class UninitializedBuffer(Tensor):
    """A buffer without a shape yet; its lazy layer replaces it."""

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        return Tensor._make_subclass(cls, _C.empty(0, dtype=dtype), requires_grad)

    def __repr__(self):
        return "<UninitializedBuffer>"
