"""The layers of musa.nn, one family per file."""
from .module import Module
from .linear import Identity, Linear, Bilinear
from .adaptive import AdaptiveLogSoftmaxWithLoss
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .activation import (ReLU, ReLU6, LeakyReLU, ELU, GELU, SiLU, Softplus, Hardtanh, Sigmoid, Tanh, Softmax,
                         LogSoftmax, MultiheadAttention, CELU, SELU, Mish, Hardswish, Hardsigmoid,
                         LogSigmoid, Softsign, Tanhshrink, Softmin, Softshrink, Hardshrink, Threshold, PReLU,
                         RReLU, GLU, Softmax2d, ChannelShuffle)
from .distance import PairwiseDistance, CosineSimilarity
from .pooling import (MaxPool1d, MaxPool2d, MaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, AdaptiveAvgPool1d,
                      AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d,
                      AdaptiveMaxPool3d, LPPool1d, LPPool2d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d, Fold,
                      Unfold, FractionalMaxPool2d, FractionalMaxPool3d)
from .normalization import (SyncBatchNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d, LayerNorm, GroupNorm, InstanceNorm1d,
                            InstanceNorm2d, InstanceNorm3d, LocalResponseNorm)
from .sparse import Embedding, EmbeddingBag
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout
from .padding import *  # noqa: F401,F403
from .padding import __all__ as _padding_all
from .pixelshuffle import PixelShuffle, PixelUnshuffle
from .upsampling import Upsample, UpsamplingNearest2d, UpsamplingBilinear2d
from .transformer import (Transformer, TransformerEncoder, TransformerDecoder,
                          TransformerEncoderLayer, TransformerDecoderLayer)
from .container import Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict
from .flatten import Flatten, Unflatten
from .rnn import RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell
from .loss import (CrossEntropyLoss, NLLLoss, NLLLoss2d, MSELoss, L1Loss, SmoothL1Loss, BCELoss, BCEWithLogitsLoss, KLDivLoss,
                   HuberLoss, MarginRankingLoss, HingeEmbeddingLoss, CosineEmbeddingLoss, SoftMarginLoss,
                   MultiLabelSoftMarginLoss, MultiLabelMarginLoss, MultiMarginLoss, TripletMarginLoss,
                   TripletMarginWithDistanceLoss, PoissonNLLLoss, GaussianNLLLoss, CTCLoss)
from .lazy import *  # noqa: F401,F403
from .lazy import __all__ as _lazy_all

__all__ = [
    "Module", "Identity", "Linear", "Conv1d", "Conv2d", "ConvTranspose2d", "ReLU", "ReLU6", "LeakyReLU",
    "ELU", "GELU", "SiLU", "Softplus", "Hardtanh", "Sigmoid", "Tanh", "Softmax", "LogSoftmax",
    "MultiheadAttention", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d",
    "LayerNorm", "GroupNorm", "Embedding", "Dropout", "Sequential", "ModuleList", "ModuleDict",
    "ParameterList", "ParameterDict", "Flatten", "Unflatten", "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell",
    "LSTMCell", "GRUCell", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "BCELoss",
    "BCEWithLogitsLoss", "CELU", "SELU", "Mish", "Hardswish", "Hardsigmoid", "LogSigmoid", "Softsign",
    "Tanhshrink", "Softmin", "Bilinear", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    "LocalResponseNorm", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
    "PixelShuffle", "PixelUnshuffle", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
    "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
    "TransformerDecoderLayer", "ConvTranspose1d", "MaxUnpool1d", "MaxUnpool2d", "Fold", "Unfold",
    "EmbeddingBag", "Conv3d", "ConvTranspose3d", "MaxPool1d", "MaxPool3d", "AvgPool1d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
    "LPPool1d", "LPPool2d", "MaxUnpool3d", "BatchNorm3d", "SyncBatchNorm", "FractionalMaxPool2d", "FractionalMaxPool3d", "Softshrink", "Hardshrink", "Threshold", "PReLU",
    "RReLU", "GLU", "Softmax2d", "ChannelShuffle", "PairwiseDistance", "CosineSimilarity", "KLDivLoss",
    "HuberLoss", "MarginRankingLoss", "HingeEmbeddingLoss", "CosineEmbeddingLoss", "SoftMarginLoss",
    "MultiLabelSoftMarginLoss", "MultiLabelMarginLoss", "MultiMarginLoss", "TripletMarginLoss",
    "TripletMarginWithDistanceLoss", "PoissonNLLLoss", "GaussianNLLLoss", "CTCLoss",
    "AdaptiveLogSoftmaxWithLoss", "NLLLoss2d",
] + _padding_all + _lazy_all
