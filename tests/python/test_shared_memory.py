"""Tensor.share_memory_ / is_shared and Module.share_memory: memory that a
forked process writes is what the parent reads (Hogwild), and memory that
was not shared stays private to each process."""
import os

import pytest

import musa
import musa.nn as nn

fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def in_child(fn):
    """Run fn in a forked process; its exit status (0: fine)."""
    pid = os.fork()
    if pid == 0:
        try:
            fn()
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@fork
def test_a_shared_tensor_is_written_by_a_forked_child():
    shared = musa.arange(6.0).reshape(2, 3)
    private = musa.arange(6.0).reshape(2, 3)
    assert not shared.is_shared()
    ident = id(shared)
    assert shared.share_memory_() is shared and id(shared) == ident
    assert shared.is_shared() and not private.is_shared()
    assert shared.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert shared.share_memory_() is shared  # again: nothing to do

    def child():
        shared.add_(10)
        private.add_(10)

    assert in_child(child) == 0
    assert shared.tolist() == [[10.0, 11.0, 12.0], [13.0, 14.0, 15.0]]
    assert private.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


@fork
def test_hogwild_updates_reach_the_parent():
    musa.manual_seed(0)
    model = nn.Linear(3, 1)
    before = model.weight.detach().clone()
    assert model.share_memory() is model
    assert all(p.is_shared() for p in model.parameters())
    opt = musa.optim.SGD(model.parameters(), lr=0.5)
    x, y = musa.ones(4, 3), musa.zeros(4, 1)

    def child():
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    assert in_child(child) == 0
    assert not bool((model.weight == before).all())  # the child's step is the parent's
    assert model.weight.requires_grad and isinstance(model.weight, nn.Parameter)


def test_values_dtypes_and_views():
    for t in (musa.tensor([True, False]), musa.arange(5, dtype=musa.int32),
              musa.randn(3, 4).t(), musa.tensor(2.5)):
        want = t.tolist()
        t.share_memory_()
        assert t.tolist() == want and t.is_shared()
    empty = musa.zeros(0)
    assert empty.share_memory_() is empty


# ---- through musa.multiprocessing: spawned processes and queues ----

def _workers():
    import sys
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist")
    if here not in sys.path:
        sys.path.insert(0, here)
    import spawned
    return spawned


def test_tensors_passed_to_spawned_processes_are_shared():
    import musa.multiprocessing as mp
    w = _workers()
    ctx = mp.get_context("spawn")
    base = musa.arange(10.0).share_memory_()
    view = base[2:8:2]                      # a strided view of shared memory
    bf = musa.zeros(3, dtype=musa.bfloat16)  # not shared yet: moved when sent
    empty = musa.zeros(0)
    done = ctx.SimpleQueue()
    mp.spawn(w.add_in_place, args=((view, bf, empty), done), nprocs=2)
    assert sorted([done.get(), done.get()]) == [0, 1]
    want = list(range(10))
    for i in (2, 4, 6):
        want[i] += 300
    assert base.tolist() == want  # the view wrote into base's memory
    assert bf.is_shared() and bf.float().tolist() == [300.0] * 3


def test_queues_carry_shared_memory_both_ways():
    import musa.multiprocessing as mp
    w = _workers()
    ctx = mp.get_context("spawn")
    q_in, q_out, go, done = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Event()
    p = ctx.Process(target=w.echo, args=(q_in, q_out, go, done))
    p.start()
    param = nn.Parameter(musa.ones(2, 2))
    q_in.put(param)
    mine, kind, grad, shared = q_out.get(timeout=60)
    assert (kind, grad, shared) == ("Parameter", True, True)
    assert mine.is_shared() and mine.tolist() == [0.0, 1.0, 2.0, 3.0]
    go.set()
    assert done.wait(60)
    p.join(60)
    assert p.exitcode == 0
    assert param.tolist() == [[-1.0, -1.0], [-1.0, -1.0]]  # the child's write
    assert mine.tolist() == [1000.0, 1001.0, 1002.0, 1003.0]  # written after it was sent


def test_hogwild_with_spawn_trains_the_parents_model():
    import musa.multiprocessing as mp
    w = _workers()
    musa.manual_seed(0)
    model = nn.Linear(3, 1)
    model.share_memory()
    before = model.weight.detach().clone()
    x = musa.randn(256, 3)

    def loss():
        with musa.no_grad():
            return float(((model(x) - x.sum(1, keepdim=True)) ** 2).mean())

    start = loss()
    mp.spawn(w.hogwild, args=(model, 40), nprocs=2)
    assert not musa.equal(model.weight, before)
    assert loss() < start / 10, (start, loss())


def test_a_non_leaf_tensor_that_requires_grad_is_refused():
    import pickle
    import musa.multiprocessing  # noqa: F401  (registers the reductions)
    from multiprocessing.reduction import ForkingPickler
    a = musa.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\[multiprocessing\] cannot send a tensor that "
                                           r"requires grad and is not a leaf"):
        ForkingPickler.dumps(a * 2)
    # plain pickle still copies (musa.save, copy.deepcopy)
    b = pickle.loads(pickle.dumps(musa.arange(3.0)))
    assert not b.is_shared() and b.tolist() == [0.0, 1.0, 2.0]
