"""musa.nn.utils: gradient clipping, flat parameter vectors, packed
sequences (rnn), weight reparametrisations (weight_norm, spectral_norm),
parametrize and parametrizations (orthogonal, spectral_norm)."""
from . import rnn  # noqa: F401
from . import parametrize, parametrizations  # noqa: F401
from .clip_grad import clip_grad_norm_, clip_grad_value_
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .weight_norm import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters", "rnn",
           "weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm", "parametrize",
           "parametrizations"]
