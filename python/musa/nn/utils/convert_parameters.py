"""Parameters as one flat vector, and back."""
from ... import _C


def parameters_to_vector(parameters):
    """All parameters flattened and concatenated into one 1-D tensor (which
    is differentiable with respect to them)."""
    return _C.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Make the parameters' data consecutive slices of vec (in the order of
    parameters_to_vector)."""
    if not isinstance(vec, _C.Tensor):
        raise TypeError(f"[vector_to_parameters] expected musa.Tensor, but got {type(vec).__name__}")
    parameters = list(parameters)
    total = sum(p.numel() for p in parameters)
    if vec.ndim != 1 or vec.shape[0] != total:
        raise ValueError(f"[vector_to_parameters] vec of shape {tuple(vec.shape)} does not hold the {total} "
                         "elements of the parameters")
    offset = 0
    for p in parameters:
        n = p.numel()
        p.data = vec[offset:offset + n].view(p.shape).detach()
        offset += n
