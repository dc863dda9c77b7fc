"""musa.utils.data: datasets, samplers and DataLoader with
torch.utils.data's API, loading in the calling process or (num_workers > 0)
in forked worker processes.

    ds = TensorDataset(x, y)
    train, val = random_split(ds, [0.8, 0.2])
    for xb, yb in DataLoader(train, batch_size=64, shuffle=True):
        ...
"""
from .dataloader import DataLoader, default_collate, default_convert
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset,
                      random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
                      WeightedRandomSampler)
from ._workers import WorkerInfo, get_worker_info
from .distributed import DistributedSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "Dataset", "IterableDataset", "TensorDataset",
           "ConcatDataset", "ChainDataset", "Subset", "random_split", "Sampler", "SequentialSampler",
           "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler", "DistributedSampler", "get_worker_info", "WorkerInfo"]
