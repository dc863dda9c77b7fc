"""AdaptiveLogSoftmaxWithLoss (Grave et al., "Efficient softmax
approximation for GPUs"), as torch.nn's: the frequent classes (below
cutoffs[0]) and one token per cluster share the head softmax; each cluster
has its own low-rank tail (in_features -> in_features / div_value^(i+1) ->
its classes), evaluated only on the rows whose target falls in it."""
from collections import namedtuple

from ... import _C
from ..functional import log_softmax
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None,
                 dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if (not cutoffs or cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("[AdaptiveLogSoftmaxWithLoss] cutoffs should be a sequence of unique, positive "
                             "integers sorted in an increasing order, where each value is between 1 and "
                             f"n_classes-1 = {n_classes - 1}, got {cutoffs}")
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = [int(c) for c in cutoffs] + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, device=device, dtype=dtype),
                                        Linear(hsz, osz, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def _batched(self, input, target=None):
        if target is None:
            if input.ndim not in (1, 2):
                raise RuntimeError(f"[AdaptiveLogSoftmaxWithLoss] input should be (batch, in_features) or (in_features,), got "
                                   f"{tuple(input.shape)}")
            return input.ndim == 2
        if target.ndim == 1:
            if input.ndim != 2:
                raise RuntimeError(f"[AdaptiveLogSoftmaxWithLoss] 1D target tensor expects 2D input tensors, but found inputs with "
                                   f"size {tuple(input.shape)}")
            if input.shape[0] != target.shape[0]:
                raise RuntimeError(f"[AdaptiveLogSoftmaxWithLoss] Input and target should have the same size in the batch "
                                   f"dimension: {input.shape[0]} and {target.shape[0]}")
        elif target.ndim == 0:
            if input.ndim != 1:
                raise RuntimeError(f"[AdaptiveLogSoftmaxWithLoss] 0D target tensor expects 1D input tensors, but found inputs with "
                                   f"size {tuple(input.shape)}")
        else:
            raise RuntimeError(f"[AdaptiveLogSoftmaxWithLoss] 0D or 1D target tensor expected, multi-target not supported")
        return target.ndim > 0

    def forward(self, input, target):
        """(output, loss): each row's log-probability of its target, and
        their negated mean."""
        batched = self._batched(input, target)
        x = input if batched else input.unsqueeze(0)
        t = target if batched else target.unsqueeze(0)
        n = t.shape[0]
        lo, hi = int(t.min().item()) if n else 0, int(t.max().item()) if n else 0
        if n and (lo < 0 or hi >= self.n_classes):
            raise RuntimeError(f"[AdaptiveLogSoftmaxWithLoss] Target values should be in "
                               f"[0, {self.n_classes - 1}], but values in range [{lo}, {hi}] were found.")
        # the head's column for each row: its class in the shortlist, else its cluster's token
        head_col = t
        output = _C.zeros(n, dtype=x.dtype)
        for i in range(self.n_clusters):
            start, stop = self.cutoffs[i], self.cutoffs[i + 1]
            mask = _C.logical_and(_C.ge(t, start), _C.lt(t, stop))
            rows = _C.nonzero(mask).reshape(-1)
            if rows.numel() == 0:
                continue
            head_col = _C.where(mask, self.shortlist_size + i, head_col)
            logp = log_softmax(self.tail[i](x.index_select(0, rows)), 1)
            local = logp.gather(1, (t.index_select(0, rows) - start).unsqueeze(1)).squeeze(1)
            output = output.index_add(0, rows, local)
        head = log_softmax(self.head(x), 1)
        output = output + head.gather(1, head_col.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, x):
        head = log_softmax(self.head(x), 1)
        parts = [head[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            parts.append(log_softmax(self.tail[i](x), 1) + head[:, self.shortlist_size + i].unsqueeze(1))
        return _C.cat(parts, 1)

    def log_prob(self, input):
        """Every class's log-probability: (batch, n_classes) or (n_classes,)."""
        batched = self._batched(input)
        out = self._full_log_prob(input if batched else input.unsqueeze(0))
        return out if batched else out.squeeze(0)

    def predict(self, input):
        """The most probable class of each row (argmax of log_prob)."""
        batched = self._batched(input)
        out = self._full_log_prob(input if batched else input.unsqueeze(0)).argmax(1)
        return out if batched else out.squeeze(0)
