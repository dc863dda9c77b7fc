"""Samplers, as torch.utils.data: iterables of dataset indices (or, for
BatchSampler, of lists of indices). Random ones draw from their
generator= (a musa.Generator) or the global one when iterated, so a seed
makes each epoch's order reproducible."""
from ... import _C
from ..._functions import randperm
from ..._generator import using

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]


class Sampler:
    """Base class: subclasses implement __iter__ (and __len__ when known)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"[{type(self).__name__}] does not implement __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source)-1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the indices (repeated to reach num_samples),
    or num_samples indices drawn with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"[RandomSampler] replacement should be a boolean value, got {replacement!r}")
        self.data_source, self.replacement, self._num_samples, self.generator = (
            data_source, replacement, num_samples, generator)
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"[RandomSampler] num_samples should be a positive integer value, "
                             f"got {self.num_samples!r}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, k = len(self.data_source), self.num_samples
        # drawn whole inside the generator's context, then handed out (the
        # caller's own draws in between use the global generator)
        with using(self.generator, "RandomSampler"):
            if self.replacement:
                order = [v for _ in range(k // 32) for v in _C.randint(0, n, (32,)).tolist()]
                order += _C.randint(0, n, (k % 32,)).tolist()
            else:
                order = [v for _ in range(k // n) for v in randperm(n).tolist()]
                order += randperm(n).tolist()[:k % n]
        yield from order

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a random order."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        with using(self.generator, "SubsetRandomSampler"):
            order = randperm(len(self.indices)).tolist()
        for i in order:
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices in [0, len(weights)), index i drawn with
    probability weights[i] / sum(weights), with or without replacement."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples <= 0:
            raise ValueError(f"[WeightedRandomSampler] num_samples should be a positive integer value, "
                             f"got {num_samples!r}")
        if not isinstance(replacement, bool):
            raise ValueError(f"[WeightedRandomSampler] replacement should be a boolean value, "
                             f"got {replacement!r}")
        w = weights if isinstance(weights, _C.Tensor) else _C.tensor(list(weights), dtype=_C.float64)
        if w.ndim != 1:
            raise ValueError(f"[WeightedRandomSampler] weights should be a 1-D sequence, got shape "
                             f"{tuple(w.shape)}")
        self.weights = w.to(_C.float64)
        self.num_samples, self.replacement, self.generator = num_samples, replacement, generator
        positive = int(_C.gt(self.weights, 0).sum().item()) if not replacement else None
        if not replacement and num_samples > positive:
            raise ValueError(f"[WeightedRandomSampler] cannot draw {num_samples} samples without replacement "
                             f"from {positive} positive weights")

    def __iter__(self):
        from ..._torch_random import multinomial
        with using(self.generator, "WeightedRandomSampler"):
            order = multinomial(self.weights, self.num_samples, self.replacement).tolist()
        yield from order

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of sampler into lists of batch_size; the last,
    shorter one is kept unless drop_last."""

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"[BatchSampler] batch_size should be a positive integer value, "
                             f"got {batch_size!r}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"[BatchSampler] drop_last should be a boolean value, got {drop_last!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
