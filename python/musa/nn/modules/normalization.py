"""Normalisation layers: BatchNorm1d, BatchNorm2d, InstanceNorm1d/2d/3d,
LayerNorm, GroupNorm, LocalResponseNorm.

Affine weights start at 1 and biases at 0. Batch norm keeps running_mean
(zeros), running_var (ones) and num_batches_tracked (an int64 count) as
buffers when track_running_stats.
"""
from ... import _C
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


class _BatchNorm(Module):
    """Normalise each channel (dim 1) over all other dims. momentum=None
    makes the running stats a cumulative average."""

    _dims = ()  # the input ranks a subclass accepts

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(_C.empty(num_features, device=device, dtype=dtype))
            self.bias = Parameter(_C.empty(num_features, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _C.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", _C.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", _C.tensor(0, dtype=_C.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input):
        if input.ndim not in self._dims:
            dims = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"[{type(self).__name__}] expected {dims} input "
                             f"(got {input.ndim}D input of shape {tuple(input.shape)})")
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                momentum = 1.0 / self.num_batches_tracked.item()
        use_batch_stats = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch_stats, momentum, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L)."""
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W)."""
    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch norm over (N, C, D, H, W)."""
    _dims = (5,)


class _InstanceNorm(_BatchNorm):
    """Normalise each channel of each sample over its spatial dims. Without
    affine or running stats by default (PyTorch's defaults); with
    track_running_stats, eval mode uses the running stats."""

    _spatial = 1

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input):
        n = self._spatial
        if input.ndim not in (n + 1, n + 2):
            raise ValueError(f"[{type(self).__name__}] expected {n + 1}D or {n + 2}D input (got "
                             f"{input.ndim}D input of shape {tuple(input.shape)})")
        unbatched = input.ndim == n + 1
        x = input.unsqueeze(0) if unbatched else input
        if x.shape[1] != self.num_features and self.affine:
            raise ValueError(f"[{type(self).__name__}] expected input with {self.num_features} "
                             f"channels, got {x.shape[1]}")
        use_input_stats = self.training or not self.track_running_stats
        y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            use_input_stats, 0.1 if self.momentum is None else self.momentum,
                            self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over (N, C, L) or (C, L)."""
    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance norm over (N, C, H, W) or (C, H, W)."""
    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance norm over (N, C, D, H, W) or (C, D, H, W)."""
    _spatial = 3


class LocalResponseNorm(Module):
    """x / (k + alpha/size * sum of x^2 over `size` neighbouring channels)^beta."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class LayerNorm(Module):
    """Normalise over the last len(normalized_shape) dims, with an
    elementwise affine of that shape."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine

        def param(wanted):
            return Parameter(_C.empty(self.normalized_shape, device=device, dtype=dtype)) if wanted else None

        self.register_parameter("weight", param(elementwise_affine))
        self.register_parameter("bias", param(elementwise_affine and bias))
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Normalise each of num_groups channel groups over (C/G, *), with a
    per-channel affine."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups:
            raise ValueError(f"[GroupNorm] num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(_C.empty(num_channels, device=device, dtype=dtype))
            self.bias = Parameter(_C.empty(num_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _AllReduceSum:
    """all_reduce(SUM) of a tensor as an autograd op: the gradient of a sum
    over processes is the sum of their gradients."""

    @staticmethod
    def apply(x, group):
        from ...autograd import Function

        class _Op(Function):
            @staticmethod
            def forward(ctx, t):
                from ... import distributed as dist
                out = t.detach().clone()
                dist.all_reduce(out, group=group)
                return out

            @staticmethod
            def backward(ctx, grad):
                from ... import distributed as dist
                g = grad.detach().clone()
                dist.all_reduce(g, group=group)
                return g
        return _Op.apply(x)


class SyncBatchNorm(_BatchNorm):
    """Batch norm whose training statistics span every process of the
    group (musa.distributed): each computes its count, mean and centred
    sum of squares per channel, one all_reduce combines them (Chan et al.'s
    parallel variance), and the gradient flows back through it, so a
    model split over processes trains as it would on the whole batch.
    Outside a process group of two or more, and in eval, it is BatchNorm.
    Any input rank of 2 or more."""

    _dims = (2, 3, 4, 5, 6)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _world(self):
        from ... import distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            return 1
        return dist.get_world_size(self.process_group)

    def forward(self, input):
        if not self.training or self._world() < 2:
            return super().forward(input)
        if input.ndim < 2:
            raise ValueError(f"[SyncBatchNorm] expected an input of 2 or more dims, got "
                             f"{input.ndim}D of shape {tuple(input.shape)}")
        dims = [0] + list(range(2, input.ndim))
        n = input.numel() // max(input.shape[1], 1)
        x = input if input.dtype == _C.float64 else input.to(_C.float32)  # statistics in float32+
        mean = x.mean(dims) if n else _C.zeros(input.shape[1], dtype=x.dtype)
        centred = x - mean.reshape(1, -1, *[1] * (input.ndim - 2))
        m2 = (centred * centred).sum(dims)
        c = input.shape[1]
        # the global mean, then the centred sums about it (no cancellation):
        # M2 = sum_i M2_i + n_i (mean_i - mean)^2
        first = _AllReduceSum.apply(_C.cat([mean * n, _C.full((1,), float(n), dtype=x.dtype)]),
                                    self.process_group)
        N = first[c]
        if float(N) < 2:
            raise ValueError(f"[SyncBatchNorm] expected more than 1 value per channel in training "
                             f"across the processes, got {int(float(N))}")
        g_mean = first[:c] / N
        d = mean - g_mean
        var = _AllReduceSum.apply(m2 + d * d * n, self.process_group) / N  # biased, as torch
        if self.track_running_stats:
            self.num_batches_tracked.add_(1)
            momentum = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                        else self.momentum)
            from ...autograd import no_grad
            with no_grad():
                unbiased = var.detach() * (N / (N - 1))
                self.running_mean.mul_(1 - momentum).add_(g_mean.detach().to(
                    self.running_mean.dtype) * momentum)
                self.running_var.mul_(1 - momentum).add_(unbiased.to(
                    self.running_var.dtype) * momentum)
        shape = (1, -1, *[1] * (input.ndim - 2))
        y = (x - g_mean.reshape(shape)) * (var + self.eps).rsqrt().reshape(shape)
        if self.affine:
            y = y * self.weight.reshape(shape) + self.bias.reshape(shape)
        return y.to(input.dtype)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """module with every BatchNorm1d/2d/3d (recursively) replaced by a
        SyncBatchNorm holding the same parameters and running statistics."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, (_InstanceNorm, cls)):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group)
            if module.affine:
                out.weight, out.bias = module.weight, module.bias
            if module.track_running_stats:
                out.running_mean = module.running_mean
                out.running_var = module.running_var
                out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
