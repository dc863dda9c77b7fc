"""The rest of PyTorch's torch.distributions.constraints, added to
musa.distributions.constraints: square, symmetric, positive_semidefinite,
lower_triangular, one_hot, multinomial, cat, stack, dependent_property and
is_dependent (the rest live in _dist_transforms.py and
_distributions_rest.py)."""
from . import _C
from ._dist_transforms import Constraint, _Dependent, constraints


class _Square(Constraint):
    """Square matrices (over the last two dims)."""
    event_dim = 2

    def check(self, value):
        return _C.full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1],
                       dtype=_C.bool)


class _Symmetric(_Square):
    """Square matrices equal to their transpose (within 1e-6)."""

    def check(self, value):
        square = super().check(value)
        if not bool(square.all()):
            return square
        from . import isclose
        return isclose(value, value.transpose(-2, -1), atol=1e-6).all(-2).all(-1)


class _PositiveSemidefinite(_Symmetric):
    """Symmetric matrices whose eigenvalues are all >= 0."""

    def check(self, value):
        from . import linalg
        sym = super().check(value)
        if not bool(sym.all()):
            return sym
        return _C.ge(linalg.eigvalsh(value), 0).all(-1)


class _LowerTriangular(Constraint):
    """Matrices with zeros above the diagonal."""
    event_dim = 2

    def check(self, value):
        return _C.eq(value.tril(), value).all(-1).all(-1)


class _OneHot(Constraint):
    """Vectors of zeros and ones with a single one."""
    is_discrete = True
    event_dim = 1

    def check(self, value):
        binary = _C.logical_or(_C.eq(value, 0), _C.eq(value, 1)).all(-1)
        return _C.logical_and(binary, _C.eq(value.sum(-1), 1))


class _Multinomial(Constraint):
    """Vectors of non-negative counts summing to at most upper_bound."""
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, x):
        return _C.logical_and(_C.ge(x, 0).all(-1), _C.le(x.sum(-1), self.upper_bound))


def _check_dim(who, dim, value):
    if not -value.dim() <= dim < value.dim():
        raise ValueError(f"[constraints.{who}] dim {dim} is out of range for a value of "
                         f"{value.dim()} dims")


def _constraints_of(cseq, who):
    cseq = list(cseq)
    if not all(isinstance(c, Constraint) for c in cseq):
        raise TypeError(f"[constraints.{who}] expected a sequence of Constraints")
    return cseq


class _Cat(Constraint):
    """Constraint cseq[i] on the i-th piece of the value along dim (pieces
    of lengths[i], 1 each by default), as torch.cat joins them."""

    def __init__(self, cseq, dim=0, lengths=None):
        self.cseq = _constraints_of(cseq, "cat")
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise ValueError(f"[constraints.cat] {len(self.lengths)} lengths for "
                             f"{len(self.cseq)} constraints")
        self.dim = dim
        self.is_discrete = any(c.is_discrete for c in self.cseq)
        self.event_dim = max((c.event_dim for c in self.cseq), default=0)

    def check(self, value):
        _check_dim("cat", self.dim, value)
        if sum(self.lengths) != value.shape[self.dim]:
            raise ValueError(f"[constraints.cat] the lengths {self.lengths} do not add up to "
                             f"the value's size {value.shape[self.dim]} along dim {self.dim}")
        checks, start = [], 0
        for c, n in zip(self.cseq, self.lengths):
            checks.append(c.check(value.narrow(self.dim, start, n)))
            start += n
        return _C.cat(checks, self.dim)


class _Stack(Constraint):
    """Constraint cseq[i] on value.select(dim, i), as torch.stack joins them."""

    def __init__(self, cseq, dim=0):
        self.cseq = _constraints_of(cseq, "stack")
        self.dim = dim
        self.is_discrete = any(c.is_discrete for c in self.cseq)
        self.event_dim = max((c.event_dim for c in self.cseq), default=0)

    def check(self, value):
        _check_dim("stack", self.dim, value)
        if value.shape[self.dim] != len(self.cseq):
            raise ValueError(f"[constraints.stack] {len(self.cseq)} constraints for a size of "
                             f"{value.shape[self.dim]} along dim {self.dim}")
        return _C.stack([c.check(value.select(self.dim, i)) for i, c in enumerate(self.cseq)],
                        self.dim)


class _DependentProperty(property, _Dependent):
    """A property whose value is a constraint that depends on the
    distribution's parameters (`@constraints.dependent_property`); read on
    the class it is the dependent constraint itself."""

    def __init__(self, fn=None, *, is_discrete=False, event_dim=0):
        super().__init__(fn)
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self.is_discrete, event_dim=self.event_dim)


def _is_dependent(constraint):
    """Whether constraint is dependent (its value depends on the parameters)."""
    return isinstance(constraint, _Dependent)


_ns = type(constraints)
_ns.square = _Square()
_ns.symmetric = _Symmetric()
_ns.positive_semidefinite = _PositiveSemidefinite()
_ns.lower_triangular = _LowerTriangular()
_ns.one_hot = _OneHot()
_ns.multinomial = staticmethod(_Multinomial)
_ns.cat = staticmethod(_Cat)
_ns.stack = staticmethod(_Stack)
_ns.dependent_property = staticmethod(_DependentProperty)
_ns.is_dependent = staticmethod(_is_dependent)
