"""musa.nn: layers, losses and their functional forms (PyTorch's torch.nn).

    import musa, musa.nn as nn
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    loss = nn.CrossEntropyLoss()(model(musa.randn(3, 4)), musa.tensor([0, 1, 1]))
    loss.backward()
"""
from .parameter import Parameter, UninitializedBuffer, UninitializedParameter  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _modules_all
from . import functional, init, utils, parallel  # noqa: F401
from .parallel import DataParallel  # noqa: F401  (torch.nn.DataParallel's place)

__all__ = ["Parameter", "functional", "init", "utils", "parallel", "DataParallel"] + _modules_all

