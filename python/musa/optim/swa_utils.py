"""Stochastic weight averaging, as torch.optim.swa_utils: AveragedModel
keeps a running average of a model's parameters (or any avg_fn, e.g. an
exponential one), SWALR anneals each group's lr to its swa_lr, and
update_bn recomputes BatchNorm statistics for the averaged weights with
one pass over the data.

    swa = AveragedModel(model)
    sched = SWALR(opt, swa_lr=0.05)
    for epoch in range(epochs):
        train_one_epoch(model, opt)
        if epoch >= swa_start:
            swa.update_parameters(model)
            sched.step()
    update_bn(loader, swa)
"""
import copy
import itertools
import math

from .. import _C
from ..autograd import no_grad
from ..nn.modules.module import Module
from .lr_scheduler import LRScheduler

__all__ = ["AveragedModel", "SWALR", "update_bn"]


def _mean_update(averaged, current, num_averaged):
    return averaged + (current - averaged) / (num_averaged + 1)


class AveragedModel(Module):
    """A deep copy of model whose parameters (and buffers, if use_buffers)
    update_parameters(model) averages: the first call copies them, then
    avg_fn(averaged, current, n_averaged) (default: the running mean)."""

    def __init__(self, model, device=None, avg_fn=None, use_buffers=False):
        super().__init__()
        if not isinstance(model, Module):
            raise TypeError(f"[AveragedModel] model must be a Module, got {type(model).__name__}")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", _C.tensor(0, dtype=_C.int64))
        self.avg_fn = _mean_update if avg_fn is None else avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        ours = (itertools.chain(self.module.parameters(), self.module.buffers()) if self.use_buffers
                else self.module.parameters())
        theirs = (itertools.chain(model.parameters(), model.buffers()) if self.use_buffers
                  else model.parameters())
        first = int(self.n_averaged.item()) == 0
        with no_grad():
            for a, p in itertools.zip_longest(ours, theirs):
                if a is None or p is None:
                    raise ValueError("[AveragedModel] update_parameters got a model with another number of "
                                     "parameters than the averaged one")
                if tuple(a.shape) != tuple(p.shape):
                    raise ValueError(f"[AveragedModel] parameter shapes differ: {tuple(a.shape)} averaged, "
                                     f"{tuple(p.shape)} given")
                current = p.detach()
                a.copy_(current if first else self.avg_fn(a.detach(), current, self.n_averaged))
            self.n_averaged += 1


class SWALR(LRScheduler):
    """Anneals each group's lr from its value to swa_lr over anneal_epochs
    steps ('cos' or 'linear'), then holds it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        groups = optimizer.param_groups if hasattr(optimizer, "param_groups") else None
        if groups is not None:
            lrs = list(swa_lr) if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(groups)
            if len(lrs) != len(groups):
                raise ValueError(f"[SWALR] swa_lr must have the same length as optimizer.param_groups: "
                                 f"swa_lr has {len(lrs)}, optimizer.param_groups has {len(groups)}")
            for lr, group in zip(lrs, groups):
                group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"[SWALR] anneal_strategy must be one of 'cos' or 'linear', "
                             f"instead got {anneal_strategy!r}")
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal
        if isinstance(anneal_epochs, bool) or not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"[SWALR] anneal_epochs must be equal or greater than 0, got {anneal_epochs!r}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _initial_lr(lr, swa_lr, alpha):  # the lr before annealing, from the current one
        return swa_lr if alpha == 1 else (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        prev = [self._initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in self.optimizer.param_groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(self.optimizer.param_groups, prev)]


def update_bn(loader, model, device=None):
    """Recompute the running statistics of model's BatchNorm layers from one
    pass over loader (batches: tensors, or tuples whose first element is
    the input), as a plain average over the batches; momenta and the
    training flag are restored after."""
    from ..nn.modules.normalization import _BatchNorm, _InstanceNorm
    momenta = {}
    for m in model.modules():
        if isinstance(m, _BatchNorm) and not isinstance(m, _InstanceNorm) and m.running_mean is not None:
            m.running_mean = _C.zeros_like(m.running_mean)
            m.running_var = _C.ones_like(m.running_var)
            momenta[m] = m.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for m in momenta:
        m.momentum = None
        m.num_batches_tracked.zero_()
    with no_grad():
        for batch in loader:
            x = batch[0] if isinstance(batch, (list, tuple)) else batch
            model(x if device is None else x.to(device))
    for m, momentum in momenta.items():
        m.momentum = momentum
    model.train(was_training)
