"""The layers of musa.nn, one family per file."""
from .module import Module
from .linear import Identity, Linear
from .conv import Conv1d, Conv2d, ConvTranspose2d
from .activation import (ReLU, ReLU6, LeakyReLU, ELU, GELU, SiLU, Softplus, Hardtanh, Sigmoid, Tanh, Softmax,
                         LogSoftmax, MultiheadAttention)
from .pooling import MaxPool2d, AvgPool2d, AdaptiveAvgPool2d
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm, GroupNorm
from .sparse import Embedding
from .dropout import Dropout
from .container import Sequential, ModuleList, ModuleDict, ParameterList
from .flatten import Flatten, Unflatten
from .rnn import RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell
from .loss import CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, BCELoss, BCEWithLogitsLoss

__all__ = [
    "Module", "Identity", "Linear", "Conv1d", "Conv2d", "ConvTranspose2d", "ReLU", "ReLU6", "LeakyReLU",
    "ELU", "GELU", "SiLU", "Softplus", "Hardtanh", "Sigmoid", "Tanh", "Softmax", "LogSoftmax",
    "MultiheadAttention", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d",
    "LayerNorm", "GroupNorm", "Embedding", "Dropout", "Sequential", "ModuleList", "ModuleDict",
    "ParameterList", "Flatten", "Unflatten", "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell",
    "LSTMCell", "GRUCell", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "BCELoss",
    "BCEWithLogitsLoss",
]
