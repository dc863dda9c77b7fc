"""Dropout: zero elements with probability p in training mode."""
from .. import functional as F
from .module import Module


class Dropout(Module):
    """Zero each element with probability p and scale the rest by 1/(1-p)
    while training; the identity in eval mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"[{type(self).__name__}] dropout probability has to be between 0 and 1, "
                             f"but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
