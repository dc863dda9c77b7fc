"""DataLoader and the collate functions, as torch.utils.data, loading in
the calling process (num_workers=0).

A map-style dataset is read through a sampler of indices grouped by a
batch sampler, and each list of samples is merged by collate_fn. With
batch_size=None there is no batching: samples pass through
default_convert. An IterableDataset is read in order, batch_size items
at a time.
"""
import collections.abc as abc

import numpy as np

from ... import _C
from ..._generator import Generator
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert"]

_COLLATE_TYPES = "tensors, numpy arrays, numbers, dicts or lists"


def _np_tensor(a, who):
    if a.dtype.kind in "SaUO":
        raise TypeError(f"[{who}] batch must contain {_COLLATE_TYPES}; found numpy dtype {a.dtype}")
    return _C.as_tensor(a)


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_convert(data):
    """Numpy arrays and scalars in data (recursing into dicts and
    sequences) become tensors; everything else is kept."""
    if isinstance(data, _C.Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)):
        return data if data.dtype.kind in "SaUO" else _C.as_tensor(np.asarray(data))
    if isinstance(data, abc.Mapping):
        try:
            return type(data)({k: default_convert(v) for k, v in data.items()})
        except TypeError:  # a mapping type that cannot be built from a dict
            return {k: default_convert(v) for k, v in data.items()}
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def default_collate(batch):
    """Merge a list of samples into a batch, as torch's default_collate:
    tensors are stacked along a new first dimension; numpy arrays likewise
    after conversion; floats become a float64 tensor, ints an int64 one
    (bools a bool one); strings stay a list; dicts, namedtuples and
    sequences are collated field by field (tuples give lists)."""
    elem = batch[0]
    if isinstance(elem, _C.Tensor):
        return _C.stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        return default_collate([_np_tensor(b, "default_collate") for b in batch])
    if isinstance(elem, np.generic):
        # np.array keeps the numpy dtype (as_tensor of a list of np.float64 gives float32)
        return _np_tensor(np.array(batch), "default_collate")
    if isinstance(elem, float):
        return _C.tensor(batch, dtype=_C.float64)
    if isinstance(elem, int):  # bool included: it gives a bool tensor
        return _C.tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, abc.Mapping):
        fields = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, abc.Sequence):
        n = len(elem)
        if any(len(b) != n for b in batch):
            raise RuntimeError("[default_collate] each element in list of batch should be of equal size")
        fields = [default_collate(s) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return fields
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    raise TypeError(f"[default_collate] batch must contain {_COLLATE_TYPES}; found {type(elem).__name__}")


class DataLoader:
    """Iterates over dataset in batches of batch_size samples merged by
    collate_fn (default_collate). shuffle draws a new order each epoch from
    generator (a musa.Generator) or the global one; drop_last drops a short last batch. sampler or
    batch_sampler replace the default index order. With num_workers > 0,
    forked worker processes load and collate batches and return them through
    shared memory (in order; persistent_workers keeps them between epochs,
    prefetch_factor batches per worker are in flight; worker_init_fn(id)
    runs in each; get_worker_info() tells a dataset which worker it is in).
    pin_memory is accepted and ignored."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 generator=None, *, prefetch_factor=None, persistent_workers=False):
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"[DataLoader] num_workers option should be a non-negative integer, "
                             f"got {num_workers!r}")
        if persistent_workers and num_workers == 0:
            raise ValueError("[DataLoader] persistent_workers option needs num_workers > 0")
        if prefetch_factor is not None and (num_workers == 0 or prefetch_factor < 1):
            raise ValueError("[DataLoader] prefetch_factor option could only be specified in "
                             "multiprocessing (num_workers > 0), and must be positive")
        if timeout < 0:
            raise ValueError(f"[DataLoader] timeout option should be non-negative, got {timeout}")
        if generator is not None and not isinstance(generator, Generator):
            raise TypeError(f"[DataLoader] generator must be a musa.Generator, got "
                            f"{type(generator).__name__}")
        if isinstance(dataset, IterableDataset):
            if shuffle:
                raise ValueError("[DataLoader] an IterableDataset cannot be shuffled; shuffle=True "
                                 "is for map-style datasets")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("[DataLoader] an IterableDataset takes no sampler or batch_sampler")
        if sampler is not None and shuffle:
            raise ValueError("[DataLoader] sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("[DataLoader] batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("[DataLoader] batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not isinstance(dataset, IterableDataset):
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and sampler is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        if collate_fn is None:
            collate_fn = default_convert if batch_size is None and batch_sampler is None else default_collate
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.collate_fn = sampler, batch_sampler, collate_fn
        self.num_workers, self.pin_memory, self.timeout = num_workers, pin_memory, timeout
        self.worker_init_fn, self.generator = worker_init_fn, generator
        self.prefetch_factor, self.persistent_workers = prefetch_factor, persistent_workers

    def __iter__(self):
        data, collate = self.dataset, self.collate_fn
        if self.num_workers > 0:
            yield from self._iter_workers()
            return
        if isinstance(data, IterableDataset):
            yield from self._iter_stream(data, collate)
        elif self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield collate([data[i] for i in indices])
        else:
            for i in self.sampler:
                yield collate(data[i])

    def _fetch(self, indices):
        """In a worker: the collated batch of indices (a map-style dataset),
        or, given None, the worker's own stream of batches."""
        data, collate = self.dataset, self.collate_fn
        if isinstance(data, IterableDataset):
            return self._iter_stream(data, collate)
        if self.batch_sampler is not None:
            return collate([data[i] for i in indices])
        return collate(data[indices])

    def _iter_workers(self):
        from ._workers import WorkerPool
        iterable = isinstance(self.dataset, IterableDataset)
        pool = self.__dict__.get("_pool")
        if pool is None or not pool.alive:
            pool = WorkerPool(self, self._fetch, iterable)
            if self.persistent_workers:
                self._pool = pool
        batches = None if iterable else (self.batch_sampler if self.batch_sampler is not None
                                         else self.sampler)
        try:
            yield from pool.run(batches)
        finally:
            if not self.persistent_workers:
                pool.shutdown()

    def _iter_stream(self, data, collate):
        if self.batch_size is None:
            for sample in data:
                yield collate(sample)
            return
        batch = []
        for sample in data:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield collate(batch)
                batch = []
        if batch and not self.drop_last:
            yield collate(batch)

    def __len__(self):
        """Batches per epoch (for an IterableDataset, from its __len__)."""
        if isinstance(self.dataset, IterableDataset):
            n, b = len(self.dataset), self.batch_size
            if b is None:
                return n
            return n // b if self.drop_last else (n + b - 1) // b
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)
