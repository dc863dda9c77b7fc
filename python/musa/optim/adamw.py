"""AdamW: Adam with decoupled weight decay (p *= 1 - lr*wd before the
Adam update), as torch.optim.AdamW; default weight_decay 1e-2."""
from .adam import Adam

__all__ = ["AdamW"]


class AdamW(Adam):
    """Adam whose weight decay shrinks the parameter instead of adding to
    the gradient (Loshchilov & Hutter, "Decoupled Weight Decay Regularization")."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
