"""DistributedDataParallel: data-parallel training over musa.distributed.

Each rank holds a replica and trains on its share of the batch; after
backward every gradient is the mean over ranks, so the optimizer steps stay
equal everywhere. As in PyTorch:

- construction checks that every rank has the same parameters (shapes and
  dtypes) and broadcasts rank 0's parameters and buffers;
- gradients go into buckets (parameters in reverse order, as backward tends
  to produce them; the first bucket holds up to 1 MiB, the others bucket_cap_mb),
  and a bucket's all-reduce starts, non-blocking, from the post-accumulate
  hook that completes it, in bucket order, so communication overlaps the
  rest of backward; the last hook of the pass waits for them all and sets
  each .grad to its slice of the averaged bucket;
- no_sync() skips the reduction (gradients accumulate locally); the first
  backward after it reduces the accumulated gradients;
- a parameter that got no gradient is an error at the next forward, unless
  find_unused_parameters=True, which walks the output's graph at each
  forward and counts the unreached parameters as zero;
- broadcast_buffers=True (the default) broadcasts rank 0's buffers at the
  start of each forward (BatchNorm's running statistics).

The collectives are ops, so a training step compiled whole with musa.jit
records the buckets' start and wait as graph nodes, and its plan overlaps
them with the backward just as eager does.
"""
from contextlib import contextmanager

from ... import _C
from ... import distributed as dist
from ...autograd import no_grad
from ..modules.module import Module

_FIRST_BUCKET_BYTES = 1 << 20


class _Bucket:
    __slots__ = ("index", "params", "offsets", "ready", "flat")

    def __init__(self, index):
        self.index, self.params, self.offsets, self.ready, self.flat = index, [], [], 0, None


class DistributedDataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=25, find_unused_parameters=False,
                 check_reduction=False, gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        who = "DistributedDataParallel"
        if not isinstance(module, Module):
            raise TypeError(f"[{who}] module must be a Module, not {type(module).__name__}")
        if process_group is not None:
            raise ValueError(f"[{who}] musa has one process group (every rank); pass "
                             f"process_group=None")
        if not dist.is_initialized():
            raise RuntimeError(f"[{who}] the default process group is not initialized: call "
                               f"musa.distributed.init_process_group() first")
        if not bucket_cap_mb or bucket_cap_mb <= 0:
            raise ValueError(f"[{who}] bucket_cap_mb must be positive, got {bucket_cap_mb}")
        self.module = module
        self.device_ids = device_ids
        self.output_device = output_device
        self.dim = dim
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.bucket_bytes_cap = int(bucket_cap_mb * (1 << 20))
        named, seen = [], set()
        for name, p in module.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                named.append((name, p))
        self._names = [n for n, _ in named]
        self._params = [p for _, p in named]
        self._verify_and_broadcast(who)
        self._world = dist.get_world_size()
        self._buckets, self._where = self._make_buckets()
        self._hooks = [p.register_post_accumulate_grad_hook(self._hook_for(i))
                       for i, p in enumerate(self._params)]
        self._reset()

    # ---- construction ----

    def _verify_and_broadcast(self, who):
        """Every rank must hold the same parameters: the count, then each
        one's dtype and shape, compared with MAX and MIN all-reduces."""
        def spread(values):
            hi = _C.tensor(values, dtype=_C.int64)
            lo = -hi
            _C._dist_all_reduce(hi, int(dist.ReduceOp.MAX))
            _C._dist_all_reduce(lo, int(dist.ReduceOp.MAX))
            return hi.tolist(), [-v for v in lo.tolist()]

        n = len(self._params)
        hi, lo = spread([n])
        if hi != lo:
            raise RuntimeError(f"[{who}] the ranks have different numbers of parameters that "
                               f"require grad (this rank, {dist.get_rank()}, has {n})")
        sig = []
        for p in self._params:
            sig += [_dtype_code(p.dtype), p.dim()] + list(p.shape) + [-1] * (8 - p.dim())
        if sig:
            hi, lo = spread(sig)
            for i, (name, p) in enumerate(zip(self._names, self._params)):
                s = slice(i * 10, i * 10 + 10)
                if hi[s] != lo[s]:
                    raise RuntimeError(
                        f"[{who}] parameter {name} differs between ranks: this rank "
                        f"({dist.get_rank()}) has {p.dtype} {tuple(p.shape)}, another rank does "
                        f"not; every rank must build the same model")
        _broadcast_coalesced(self._params + list(self.module.buffers()))

    def _make_buckets(self):
        """Parameters in reverse order, cut by dtype and by size."""
        buckets, where = [], {}
        cap = min(_FIRST_BUCKET_BYTES, self.bucket_bytes_cap)
        cur, size, dtype = None, 0, None
        for i in reversed(range(len(self._params))):
            p = self._params[i]
            nbytes = p.numel() * p.element_size()
            if cur is None or p.dtype != dtype or (size and size + nbytes > cap):
                if cur is not None:
                    cap = self.bucket_bytes_cap
                cur = _Bucket(len(buckets))
                buckets.append(cur)
                size, dtype = 0, p.dtype
            where[i] = (cur.index, len(cur.params))
            cur.offsets.append(size // p.element_size())
            cur.params.append(i)
            size += nbytes
        return buckets, where

    # ---- one iteration ----

    def _reset(self):
        self._ready = [False] * len(self._params)
        self._n_ready = 0
        self._hooked = 0  # gradients this iteration's backward delivered
        self._next_bucket = 0
        self._sync = False
        for b in self._buckets:
            b.ready, b.flat = 0, None

    def _hook_for(self, i):
        def hook(_param):
            if self._sync:
                self._hooked += 1
                self._mark_ready(i)
                if self._next_bucket:  # buckets in flight: let MPI move them along
                    _C._dist_progress()
        return hook

    def _mark_ready(self, i):
        if self._ready[i]:
            raise RuntimeError(
                f"[DistributedDataParallel] parameter {self._names[i]} got its gradient twice in "
                f"one iteration (a second backward through the same forward, or a parameter "
                f"used by two models): this is not supported")
        self._ready[i] = True
        self._n_ready += 1
        self._buckets[self._where[i][0]].ready += 1
        while (self._next_bucket < len(self._buckets) and
               self._buckets[self._next_bucket].ready == len(self._buckets[self._next_bucket].params)):
            self._launch(self._buckets[self._next_bucket])
            self._next_bucket += 1
        if self._n_ready == len(self._params):
            self._finish()

    def _launch(self, b):
        grads = []
        for i in b.params:
            p = self._params[i]
            g = p.grad
            grads.append(_C.zeros_like(p) if g is None else g)
        b.flat = _C._dist_all_reduce_start(grads, int(dist.ReduceOp.AVG))

    def _finish(self):
        with no_grad():
            for b in self._buckets:
                res = _C._dist_all_reduce_wait(b.flat, int(dist.ReduceOp.AVG))
                b.flat = None
                for i, off in zip(b.params, b.offsets):
                    p = self._params[i]
                    n = p.numel()
                    p.grad = res[off:off + n].view(p.shape)
        self._reset()

    def _unfinished(self):
        """The previous iteration's reduction did not finish: finish what
        started (the other ranks did the same) and name what got no grad."""
        missing = [self._names[i] for i, r in enumerate(self._ready) if not r]
        for b in self._buckets[:self._next_bucket]:
            _C._dist_all_reduce_wait(b.flat, int(dist.ReduceOp.AVG))
        self._reset()
        raise RuntimeError(
            "[DistributedDataParallel] expected to have finished reduction in the prior iteration "
            "before starting a new one: these parameters received no gradient: "
            f"{', '.join(missing)}. Pass find_unused_parameters=True if the forward does not use "
            "every parameter, and make sure the loss depends on all forward outputs")

    def forward(self, *inputs, **kwargs):
        # a backward that delivered some gradients but not all; a forward
        # with no backward after it (evaluation with grad on) is no error
        if self._sync and self._hooked and self._n_ready < len(self._params):
            self._unfinished()
        if self.broadcast_buffers and self._world > 1:
            _broadcast_coalesced(list(self.module.buffers()))
        out = self.module(*inputs, **kwargs)
        self._reset()
        # a group of one: the local gradients are the mean already
        if _C.is_grad_enabled() and self.require_backward_grad_sync and self._world > 1:
            self._sync = True
            if self.find_unused_parameters:
                used = _reached_leaves(out)
                for i, p in enumerate(self._params):
                    if id(p) not in used:
                        self._mark_ready(i)
        return out

    @contextmanager
    def no_sync(self):
        """Backward passes of forwards run inside accumulate into .grad
        without communicating; the next synchronised one reduces the sum."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old


def _broadcast_coalesced(tensors):
    """Rank 0's values into `tensors`, in place: one broadcast per dtype of
    the tensors packed together (a ResNet-18 has 60 BatchNorm buffers:
    one collective each would make 60 synchronisation points per step)."""
    groups = {}
    for t in tensors:
        groups.setdefault(t.dtype, []).append(t)
    with no_grad():
        for group in groups.values():
            flat = _C.cat([t.reshape(-1) for t in group])
            _C._dist_broadcast(flat, 0)
            off = 0
            for t in group:
                n = t.numel()
                t.copy_(flat[off:off + n].view(t.shape))
                off += n


def _dtype_code(dtype):
    return ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8",
            "bool", "int16"].index(str(dtype).replace("musa.", ""))


def _reached_leaves(out):
    """ids of the leaf tensors the autograd graph of out's tensors reaches."""
    roots, stack = [], [out]
    while stack:
        o = stack.pop()
        if isinstance(o, _C.Tensor):
            if o.grad_fn is not None:
                roots.append(o.grad_fn)
            elif o.requires_grad:
                roots.append(None)
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
    seen, leaves = set(), set()  # nodes hash and compare by the node they wrap
    nodes = [r for r in roots if r is not None]
    while nodes:
        n = nodes.pop()
        if n in seen:
            continue
        seen.add(n)
        v = getattr(n, "variable", None)
        if v is not None:
            leaves.add(id(v))
        for nxt, _ in n.next_functions:
            if nxt is not None:
                nodes.append(nxt)
    return leaves
