"""DistributedSampler: each rank of a data-parallel job reads its own share
of a dataset, as torch.utils.data.distributed.DistributedSampler does."""
import math

from .sampler import Sampler


class DistributedSampler(Sampler):
    """Indices rank, rank + num_replicas, ... of the dataset's order: a
    permutation seeded with seed + epoch (the same on every rank; call
    set_epoch at each epoch) when shuffle, else 0..n-1. Without drop_last the
    order is padded by repeating its start so every rank gets
    ceil(n / num_replicas) indices; with it, the tail that would not divide
    evenly is dropped. num_replicas and rank default to the process group's."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            from ... import distributed as dist
            if not dist.is_initialized():
                raise RuntimeError("[DistributedSampler] pass num_replicas and rank, or call "
                                   "musa.distributed.init_process_group() first")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        num_replicas, rank = int(num_replicas), int(rank)
        if num_replicas < 1:
            raise ValueError(f"[DistributedSampler] num_replicas must be positive, got {num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"[DistributedSampler] invalid rank {rank}, rank should be in the "
                             f"interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.shuffle, self.seed, self.drop_last = 0, bool(shuffle), int(seed), drop_last
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            from ... import Generator, randperm
            g = Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad > 0 and indices:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch seeds the shuffle: set it before each epoch's iterator,
        or every epoch repeats one order."""
        self.epoch = int(epoch)
