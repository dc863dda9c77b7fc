"""musa.utils.data: datasets, samplers, default_collate (checked against
torch's) and DataLoader batching, shuffling, drop_last, len and errors."""
import collections
import os

import numpy as np
import pytest
import torch
from torch.utils.data import default_collate as torch_collate

import musa
from musa.utils import data
from musa.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler,
                             SequentialSampler, Subset, SubsetRandomSampler, TensorDataset, default_collate,
                             random_split)


def npy(t):
    return t.detach().numpy()


def dataset(n=10):
    x = musa.arange(n * 3, dtype=musa.float32).reshape(n, 3)
    y = musa.arange(n)
    return TensorDataset(x, y)


# ---- datasets ----

def test_tensor_dataset():
    ds = dataset(5)
    assert len(ds) == 5
    x, y = ds[2]
    np.testing.assert_array_equal(npy(x), [6, 7, 8])
    assert y.item() == 2 and y.dtype is musa.int64


def test_tensor_dataset_size_mismatch():
    msg = r"\[TensorDataset\] size mismatch between tensors: first dimensions \[4, 3\]"
    with pytest.raises(ValueError, match=msg):
        TensorDataset(musa.zeros(4, 2), musa.zeros(3))
    with pytest.raises(ValueError, match="at least one tensor"):
        TensorDataset()


def test_subset_concat_and_add():
    ds = dataset(6)
    sub = Subset(ds, [5, 0, 3])
    assert len(sub) == 3 and sub[0][1].item() == 5 and sub[2][1].item() == 3
    cat = ds + sub
    assert isinstance(cat, ConcatDataset) and len(cat) == 9
    assert [cat[i][1].item() for i in (0, 5, 6, 8, -1, -9)] == [0, 5, 5, 3, 3, 0]
    with pytest.raises(IndexError):
        cat[-10]
    with pytest.raises(ValueError, match="empty"):
        ConcatDataset([])


def test_random_split_lengths_and_fractions():
    ds = dataset(10)
    musa.manual_seed(3)
    a, b = random_split(ds, [7, 3])
    assert (len(a), len(b)) == (7, 3)
    assert sorted(a.indices + b.indices) == list(range(10))
    musa.manual_seed(3)
    a2, _ = random_split(ds, [7, 3])
    assert a2.indices == a.indices  # reproducible from the musa seed
    # fractions: floor(f * n), remainder dealt round-robin; the same sizes as torch
    for fracs in ([0.8, 0.2], [0.33, 0.33, 0.34], [0.5, 0.25, 0.25], [1 / 3] * 3):
        got = [len(s) for s in random_split(ds, fracs)]
        want = [len(s) for s in torch.utils.data.random_split(range(10), fracs)]
        assert got == want, fracs
    msg = r"sum of input lengths \(9\) does not equal the length of the input dataset \(10\)"
    with pytest.raises(ValueError, match=msg):
        random_split(ds, [5, 4])
    with pytest.raises(TypeError, match=r"\[random_split\] generator must be a musa.Generator"):
        random_split(ds, [5, 5], generator=object())


def test_random_split_warns_on_empty_split():
    with pytest.warns(UserWarning, match="index 2 is 0"):
        random_split(dataset(2), [0.5, 0.5, 0.0])


# ---- samplers ----

def test_sequential_and_batch_sampler():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    bs = BatchSampler(SequentialSampler(range(7)), 3, drop_last=False)
    assert list(bs) == [[0, 1, 2], [3, 4, 5], [6]] and len(bs) == 3
    bs = BatchSampler(range(7), 3, drop_last=True)
    assert list(bs) == [[0, 1, 2], [3, 4, 5]] and len(bs) == 2
    with pytest.raises(ValueError, match="batch_size should be a positive integer value, got 0"):
        BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean"):
        BatchSampler(range(3), 2, 1)


def test_random_sampler():
    s = RandomSampler(range(20))
    musa.manual_seed(7)
    first = list(s)
    second = list(s)
    musa.manual_seed(7)
    assert list(s) == first  # reproducible
    assert sorted(first) == list(range(20)) and first != second
    assert len(s) == 20
    s = RandomSampler(range(5), num_samples=12)
    got = list(s)
    assert len(got) == 12 and sorted(got[:5]) == list(range(5)) and sorted(got[5:10]) == list(range(5))
    r = list(RandomSampler(range(3), replacement=True, num_samples=70))
    assert len(r) == 70 and set(r) == {0, 1, 2}
    with pytest.raises(ValueError, match="num_samples should be a positive integer value, got 0"):
        RandomSampler(range(3), num_samples=0)
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        RandomSampler(range(3), replacement=1)


def test_subset_random_sampler():
    got = list(SubsetRandomSampler([10, 20, 30]))
    assert sorted(got) == [10, 20, 30]


# ---- default_collate, against torch ----

def same(m, t):
    """A musa batch and a torch batch hold the same structure, dtypes and values."""
    if isinstance(t, torch.Tensor):
        assert isinstance(m, musa.Tensor), type(m)
        assert str(m.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_array_equal(m.numpy(), t.numpy())
    elif isinstance(t, dict):
        assert type(m) is type(t) and list(m) == list(t)
        for k in t:
            same(m[k], t[k])
    elif isinstance(t, (list, tuple)):
        assert type(m) is type(t) and len(m) == len(t)
        for a, b in zip(m, t):
            same(a, b)
    else:
        assert m == t


Point = collections.namedtuple("Point", "x y")

SAMPLES = {
    "ints": [1, 2, 3],
    "floats": [1.5, 2.0],
    "bools": [True, False],
    "strings": ["a", "bc"],
    "tuples": [(1, 2.0, "a"), (3, 4.0, "b")],
    "lists": [[1, 2], [3, 4]],
    "dicts": [{"x": 1.0, "y": [1, 2]}, {"x": 2.0, "y": [3, 4]}],
    "namedtuples": [Point(1, 2.5), Point(3, 4.5)],
    "np_f32": [np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)],
    "np_i32": [np.arange(3, dtype=np.int32), np.arange(3, dtype=np.int32)],
    "np_f64_scalars": [np.float64(1.5), np.float64(2.5)],
    "np_i64_scalars": [np.int64(1), np.int64(2)],
    "np_nested": [{"a": np.float32(1), "b": (np.ones(2), 3)}, {"a": np.float32(2), "b": (np.zeros(2), 4)}],
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_default_collate_matches_torch(name):
    batch = SAMPLES[name]  # no tensors in them, so torch can collate the same objects
    same(default_collate(batch), torch_collate(batch))


def test_default_collate_tensors():
    a, b = musa.tensor([[1.0, 2.0]]), musa.tensor([[3.0, 4.0]])
    out = default_collate([(a, 0), (b, 1)])
    assert isinstance(out, list) and out[0].shape == (2, 1, 2)
    np.testing.assert_array_equal(npy(out[0]), [[[1, 2]], [[3, 4]]])
    assert out[1].tolist() == [0, 1] and out[1].dtype is musa.int64


def test_default_collate_errors():
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="found object"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="found numpy dtype <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])


# ---- DataLoader ----

def test_dataloader_batches_in_order():
    loader = DataLoader(dataset(10), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and len(batches) == 3
    assert [b[0].shape for b in batches] == [(4, 3), (4, 3), (2, 3)]
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    np.testing.assert_array_equal(npy(batches[2][0]), [[24, 25, 26], [27, 28, 29]])


def test_dataloader_drop_last_and_len():
    loader = DataLoader(dataset(10), batch_size=4, drop_last=True)
    assert len(loader) == 2 and [b[1].tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(DataLoader(dataset(8), batch_size=4)) == 2
    assert len(DataLoader(dataset(9), batch_size=4)) == 3
    assert len(DataLoader(dataset(3))) == 3


def test_dataloader_shuffle_is_reproducible():
    loader = DataLoader(dataset(12), batch_size=5, shuffle=True)
    order = lambda: [i for _, y in loader for i in y.tolist()]  # noqa: E731
    musa.manual_seed(42)
    a, b = order(), order()
    musa.manual_seed(42)
    assert order() == a
    assert sorted(a) == list(range(12)) and a != list(range(12)) and a != b
    assert isinstance(loader.sampler, RandomSampler)


def test_dataloader_batch_size_none_converts_samples():
    class Arrays(Dataset):
        def __getitem__(self, i):
            return np.full(2, i, np.float64), i

        def __len__(self):
            return 3

    out = list(DataLoader(Arrays(), batch_size=None))
    assert len(out) == 3
    x, i = out[1]
    assert isinstance(x, musa.Tensor) and x.dtype is musa.float64 and i == 1


def test_dataloader_dict_samples_and_custom_collate():
    class Dicts(Dataset):
        def __getitem__(self, i):
            return {"x": np.array([i, i], np.float32), "label": i, "name": f"s{i}"}

        def __len__(self):
            return 5

    b = next(iter(DataLoader(Dicts(), batch_size=3)))
    assert b["x"].shape == (3, 2) and b["x"].dtype is musa.float32
    assert b["label"].tolist() == [0, 1, 2] and b["name"] == ["s0", "s1", "s2"]
    sizes = [len(b) for b in DataLoader(Dicts(), batch_size=2, collate_fn=lambda s: s)]
    assert sizes == [2, 2, 1]


def test_dataloader_sampler_and_batch_sampler():
    ds = dataset(6)
    loader = DataLoader(ds, batch_size=2, sampler=[5, 4, 3, 2, 1, 0])
    assert [y.tolist() for _, y in loader] == [[5, 4], [3, 2], [1, 0]]
    loader = DataLoader(ds, batch_sampler=[[0, 5], [1, 2, 3]])
    assert [y.tolist() for _, y in loader] == [[0, 5], [1, 2, 3]] and len(loader) == 2
    assert loader.batch_size is None


@pytest.mark.parametrize("kw,msg", [
    (dict(sampler=[0, 1], shuffle=True), "sampler option is mutually exclusive with shuffle"),
    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
    (dict(batch_sampler=[[0]], drop_last=True), "batch_sampler option is mutually exclusive"),
    (dict(batch_size=None, drop_last=True), "mutually exclusive with drop_last"),
    (dict(num_workers=-1), "num_workers option should be a non-negative integer, got -1"),
])
def test_dataloader_invalid_options(kw, msg):
    with pytest.raises(ValueError, match=msg):
        DataLoader(dataset(4), **kw)


def test_dataloader_bad_options():
    with pytest.raises(ValueError, match=r"persistent_workers option needs num_workers > 0"):
        DataLoader(dataset(4), persistent_workers=True)
    with pytest.raises(ValueError, match=r"prefetch_factor option could only be specified"):
        DataLoader(dataset(4), prefetch_factor=2)
    with pytest.raises(TypeError, match=r"\[DataLoader\] generator must be a musa.Generator"):
        DataLoader(dataset(4), generator=object())


def test_dataloader_iterable_dataset():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(7))

        def __len__(self):
            return 7

    loader = DataLoader(Stream(), batch_size=3)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]] and len(loader) == 3
    loader = DataLoader(Stream(), batch_size=3, drop_last=True)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5]] and len(loader) == 2
    assert list(DataLoader(Stream(), batch_size=None))[:2] == [0, 1]
    with pytest.raises(ValueError, match="cannot be shuffled"):
        DataLoader(Stream(), shuffle=True)


def test_training_loop_with_loader_and_optimizer():
    # y = 2x + 1 recovered by SGD over shuffled mini-batches
    x = musa.linspace(-1, 1, 64).reshape(64, 1)
    loader = DataLoader(TensorDataset(x, x * 2 + 1), batch_size=16, shuffle=True)
    w, b = musa.zeros(1, 1, requires_grad=True), musa.zeros(1, requires_grad=True)
    opt = musa.optim.SGD([w, b], lr=0.3, momentum=0.5)
    for _ in range(40):
        for xb, yb in loader:
            opt.zero_grad()
            (((xb @ w + b) - yb) ** 2).mean().backward()
            opt.step()
    assert w.item() == pytest.approx(2.0, abs=1e-3) and b.item() == pytest.approx(1.0, abs=1e-3)


def test_package_exports():
    assert musa.utils.data is data
    for name in ("DataLoader", "Dataset", "TensorDataset", "Subset", "random_split", "Sampler",
                 "SequentialSampler", "RandomSampler", "BatchSampler", "default_collate"):
        assert hasattr(data, name), name


# ---- worker processes ----

class _Squares(musa.utils.data.Dataset):
    """Samples that say which worker made them (and fail on request)."""

    def __init__(self, n, fail_at=None, die_at=None):
        self.n, self.fail_at, self.die_at = n, fail_at, die_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise KeyError(f"sample {i} is broken")
        if i == self.die_at:
            import os
            os._exit(3)
        info = musa.utils.data.get_worker_info()
        return {"x": musa.tensor([float(i * i)]), "i": i, "worker": -1 if info is None else info.id,
                "bf": musa.tensor([i], dtype=musa.bfloat16)}


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_workers_give_the_in_process_batches(workers):
    ds = _Squares(23)
    ref = list(DataLoader(ds, batch_size=4))
    got = list(DataLoader(ds, batch_size=4, num_workers=workers))
    assert len(got) == len(ref) == 6
    for a, b in zip(ref, got):
        assert musa.equal(a["x"], b["x"]) and a["i"].tolist() == b["i"].tolist()
        assert b["bf"].dtype == musa.bfloat16 and musa.equal(a["bf"], b["bf"])
    assert {int(w) for b in got for w in b["worker"]} == set(range(workers))
    # unbatched (batch_size=None) and a worker_init_fn
    seen = []
    got = list(DataLoader(ds, batch_size=None, num_workers=2, worker_init_fn=seen.append))
    assert [int(b["i"]) for b in got] == list(range(23))


def test_workers_shuffle_reproducibly_and_persist():
    ds = musa.utils.data.TensorDataset(musa.arange(40))

    def order(seed, **kw):
        musa.manual_seed(seed)
        return [int(v) for (b,) in DataLoader(ds, batch_size=6, shuffle=True, num_workers=2, **kw)
                for v in b]

    assert order(1) == order(1) and sorted(order(1)) == list(range(40))
    assert order(1, generator=musa.Generator().manual_seed(5)) == \
        order(2, generator=musa.Generator().manual_seed(5))
    dl = DataLoader(ds, batch_size=10, num_workers=2, persistent_workers=True, prefetch_factor=1)
    first = [b[0].tolist() for b in dl]
    pids = [p.pid for p in dl._pool.procs]
    assert [b[0].tolist() for b in dl] == first and [p.pid for p in dl._pool.procs] == pids
    dl._pool.shutdown()


def test_workers_leave_no_queue_threads_behind():
    # each index queue's feeder thread ends with its pool: one still writing
    # while the next pool forks hung the sanitize job's forked workers
    import threading

    def feeders():
        return {t for t in threading.enumerate() if t.name == "QueueFeederThread"}

    ds = musa.utils.data.TensorDataset(musa.arange(40))
    for persistent in (False, True):
        before = feeders()
        dl = DataLoader(ds, batch_size=6, num_workers=2, persistent_workers=persistent)
        got, started = [], set()
        for (b,) in dl:
            got += [int(v) for v in b]
            started |= {t.native_id for t in feeders() - before}
        assert sorted(got) == list(range(40))
        if persistent:
            dl._pool.shutdown()
        assert feeders() <= before
        # ... and so have their OS threads (a joined thread may still be
        # tearing down, which under ASan holds allocator locks a fork copies)
        assert started and not [t for t in started if os.path.exists(f"/proc/self/task/{t}")]


def test_waiting_for_threads_to_end_is_bounded():
    import threading
    import time
    from musa.utils.data._workers import _wait_gone
    go = threading.Event()
    t = threading.Thread(target=go.wait)
    t.start()
    t0 = time.monotonic()
    _wait_gone([t.native_id], limit=0.2)  # still running: gives up at the limit
    assert 0.2 <= time.monotonic() - t0 < 5 and os.path.exists(f"/proc/self/task/{t.native_id}")
    go.set()
    t.join()
    _wait_gone([t.native_id])
    assert not os.path.exists(f"/proc/self/task/{t.native_id}")


def test_worker_errors_reach_the_main_process():
    with pytest.raises(RuntimeError, match=r"(?s)\[DataLoader\] worker \d raised KeyError:.*sample 5 "
                                           r"is broken"):
        list(DataLoader(_Squares(10, fail_at=5), batch_size=2, num_workers=2))
    with pytest.raises(RuntimeError, match=r"\[DataLoader\] worker \d \(pid \d+\) exited unexpectedly "
                                           r"with exit code 3"):
        list(DataLoader(_Squares(10, die_at=3), batch_size=2, num_workers=2))


def test_iterable_dataset_workers_shard_with_worker_info():
    class Stream(musa.utils.data.IterableDataset):
        def __iter__(self):
            info = musa.utils.data.get_worker_info()
            lo, step = (info.id, info.num_workers) if info else (0, 1)
            return iter(musa.tensor([v]) for v in range(lo, 14, step))

    got = [int(v) for b in DataLoader(Stream(), batch_size=3, num_workers=2) for v in b]
    assert sorted(got) == list(range(14))
    assert musa.utils.data.get_worker_info() is None
