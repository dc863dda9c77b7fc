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
