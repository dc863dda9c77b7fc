"""musa.optim: optimizers and learning-rate schedulers with torch.optim's API.

Each step updates all parameters of a param group with one C call that
dispatches the optimizer's update op row (sgd_update, adam_update,
rmsprop_update, adagrad_update, ...) once per parameter, so the Python side only gathers
parameters, gradients and state, and eager and compiled steps run the
same kernels.

    opt = musa.optim.SGD(params, lr=0.1, momentum=0.9)
    sched = musa.optim.lr_scheduler.StepLR(opt, step_size=30)
    for x, y in loader:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    sched.step()
"""
from . import lr_scheduler  # noqa: F401
from . import swa_utils  # noqa: F401
from ._more import Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop
from .adam import Adam
from .adamw import AdamW
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
           "NAdam", "RAdam", "ASGD", "LBFGS", "lr_scheduler", "Rprop"]
