"""musa.special: PyTorch's torch.special names for the functions musa
has; each is the musa namespace's function of that name (gammaln is
lgamma, expit sigmoid, psi digamma)."""
from . import _C
from . import _torch_ops as _T
from . import _functions as _F
from .nn import functional as _NF

__all__ = ["erf", "erfc", "erfinv", "expit", "logit", "xlogy", "gammaln", "digamma", "psi", "polygamma",
           "expm1", "exp2", "log1p", "sinc", "round", "softmax", "log_softmax", "logsumexp",
           "i0", "i0e", "i1", "i1e", "modified_bessel_i0", "modified_bessel_i1", "ndtr",
           "log_ndtr", "ndtri", "erfcx", "xlog1py", "entr", "multigammaln", "zeta",
           "spherical_bessel_j0", "gammainc", "gammaincc", "bessel_j0", "bessel_j1", "bessel_y0",
           "bessel_y1", "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
           "scaled_modified_bessel_k1", "airy_ai"]

erf = _C.erf
erfc = _C.erfc
erfinv = _T.erfinv
expit = _C.sigmoid
logit = _T.logit
xlogy = _T.xlogy
gammaln = _T.lgamma
digamma = psi = _T.digamma
polygamma = _T.polygamma
expm1 = _C.expm1
exp2 = _F.exp2
log1p = _C.log1p
sinc = _T.sinc
round = _C.round
i0, i0e, i1, i1e = _C.i0, _C.i0e, _C.i1, _C.i1e
modified_bessel_i0, modified_bessel_i1 = _C.i0, _C.i1
bessel_j0, bessel_j1, bessel_y0, bessel_y1 = _C.bessel_j0, _C.bessel_j1, _C.bessel_y0, _C.bessel_y1
modified_bessel_k0, modified_bessel_k1 = _C.modified_bessel_k0, _C.modified_bessel_k1
scaled_modified_bessel_k0 = _C.scaled_modified_bessel_k0
scaled_modified_bessel_k1 = _C.scaled_modified_bessel_k1
airy_ai = _C.airy_ai
gammainc, gammaincc = _C.igamma, _C.igammac  # the regularised incomplete gamma functions
from ._special_more import (ndtr, log_ndtr, ndtri, erfcx, xlog1py, entr,  # noqa: E402,F401
                            multigammaln, zeta, spherical_bessel_j0)
from . import _special_more as _SM  # noqa: E402

# the orthogonal polynomials: chebyshev_polynomial_t/u/v/w (and shifted_),
# hermite_polynomial_h/he, laguerre_polynomial_l, legendre_polynomial_p
for _n in _SM.__all__:
    if "_polynomial_" in _n:
        globals()[_n] = getattr(_SM, _n)
        __all__.append(_n)


def softmax(input, dim, *, dtype=None):
    return _NF.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    return _NF.log_softmax(input, dim, dtype=dtype)


def logsumexp(input, dim, keepdim=False):
    return _C.logsumexp(input, dim, keepdim)
