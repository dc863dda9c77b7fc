"""Datasets, as torch.utils.data: a map-style Dataset is indexed by
0..len-1; an IterableDataset is iterated. Random splits draw from their
generator= or the global one, so a seed makes them reproducible."""
import bisect
import math
import warnings

from ..._functions import randperm
from ..._generator import using

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset", "Subset",
           "random_split"]




class Dataset:
    """A map-style dataset: subclasses implement __getitem__(index) and,
    for samplers and len(DataLoader), __len__."""

    def __getitem__(self, index):
        raise NotImplementedError(f"[{type(self).__name__}] does not implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read as a stream: subclasses implement __iter__."""

    def __iter__(self):
        raise NotImplementedError(f"[{type(self).__name__}] does not implement __iter__")

    def __add__(self, other):
        raise TypeError("[IterableDataset] iterable datasets cannot be concatenated with +")


class TensorDataset(Dataset):
    """Sample i is (t[i] for t in tensors); all tensors share their first dimension."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("[TensorDataset] needs at least one tensor")
        sizes = [t.shape[0] if t.ndim else None for t in tensors]
        if None in sizes or any(s != sizes[0] for s in sizes):
            raise ValueError(f"[TensorDataset] size mismatch between tensors: first dimensions {sizes}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class ChainDataset(IterableDataset):
    """Several iterable datasets, one after another (lazily)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"[ChainDataset] only supports IterableDataset, got {type(d).__name__}")
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


class ConcatDataset(Dataset):
    """The samples of several map-style datasets, one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("[ConcatDataset] datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("[ConcatDataset] does not support IterableDataset")
        self.cumulative_sizes, total = [], 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise IndexError(f"[ConcatDataset] index {index} out of range for length {len(self)}")
            index += len(self)
        k = bisect.bisect_right(self.cumulative_sizes, index)
        return self.datasets[k][index - (self.cumulative_sizes[k - 1] if k else 0)]


class Subset(Dataset):
    """The samples of dataset at the given indices."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Split dataset into non-overlapping random Subsets of the given lengths,
    or fractions summing to 1 (each floor(f * len); the remainder is dealt
    out one by one from the first split)."""
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, f in enumerate(lengths):
            if not 0 <= f <= 1:
                raise ValueError(f"[random_split] fraction at index {i} is not between 0 and 1: {f}")
        sizes = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, s in enumerate(sizes):
            if s == 0:
                warnings.warn(f"[random_split] length of split at index {i} is 0; "
                              "this might result in an empty dataset")
        lengths = sizes
    if sum(lengths) != n:
        raise ValueError(f"[random_split] sum of input lengths ({sum(lengths)}) does not equal the length "
                         f"of the input dataset ({n})")
    with using(generator, "random_split"):
        perm = randperm(n).tolist()
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[start:start + length]))
        start += length
    return out

